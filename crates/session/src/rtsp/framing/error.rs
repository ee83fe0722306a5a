//! Framing errors and the status that answers each (RFC 2326 §7.1.1).

/// Why a message could not be framed. Each has a status for the response ([`Self::status`]) and
/// the request's CSeq if it could be read ([`Self::cseq`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// No empty line within `limit` bytes: the head is too large.
    #[error("request head longer than {limit} bytes")]
    HeadTooLarge {
        /// The head limit, bytes (`FramerLimits::max_head`).
        limit: usize,
        /// The request's CSeq, if it could be read, for the response to echo.
        cseq: Option<u32>,
    },
    /// One line of the head is longer than `limit` bytes.
    #[error("{} longer than {limit} bytes", if *.request_line { "request line" } else { "header line" })]
    LineTooLong {
        /// The line limit, bytes without the CRLF (`FramerLimits::max_line`).
        limit: usize,
        /// The long line is the request line (answered 414), not a header (400).
        request_line: bool,
        /// The request's CSeq, if it could be read, for the response to echo.
        cseq: Option<u32>,
    },
    /// More than `limit` header lines.
    #[error("more than {limit} header lines")]
    TooManyHeaders {
        /// The most header lines accepted (`FramerLimits::max_headers`).
        limit: usize,
        /// The request's CSeq, if it could be read, for the response to echo.
        cseq: Option<u32>,
    },
    /// `Content-Length` above the limit. The body is not read: the connection is answered
    /// and closed ([`Self::closes_connection`]), as a body that long cannot be skipped safely.
    #[error("body of {length} bytes is larger than the limit of {limit}")]
    BodyTooLarge {
        /// The `Content-Length` given, bytes.
        length: u64,
        /// The body limit, bytes (`FramerLimits::max_body`).
        limit: usize,
        /// The request's CSeq, if it could be read, for the response to echo.
        cseq: Option<u32>,
    },
    /// `Content-Length` that is not a number, or given twice: where the next message starts
    /// cannot be known, so the connection is answered and closed.
    #[error("{reason}")]
    BadLength {
        /// What is wrong with the header, in words.
        reason: String,
        /// The request's CSeq, if it could be read, for the response to echo.
        cseq: Option<u32>,
    },
    /// Not a well-formed RTSP request.
    #[error("malformed request: {reason}")]
    Malformed {
        /// What is wrong with it, in words.
        reason: String,
        /// The request's CSeq, if it could be read, for the response to echo.
        cseq: Option<u32>,
    },
    /// A protocol version other than RTSP/1.0 (RTSP/2.0 included).
    #[error("unsupported protocol version {version:?}: only RTSP/1.0 is served")]
    UnsupportedVersion {
        /// The version the request line names: its first 16 bytes, any not printable ASCII
        /// shown as `?`.
        version: String,
        /// The request's CSeq, if it could be read, for the response to echo.
        cseq: Option<u32>,
    },
    /// A request (head and body) that did not arrive whole within `seconds` of its first
    /// byte: the connection is answered and closed (a slow client holds no place).
    #[error("the request did not arrive whole within {seconds} s")]
    Timeout {
        /// The time allowed, seconds.
        seconds: u64,
        /// The request's CSeq, if it could be read, for the response to echo.
        cseq: Option<u32>,
    },
    /// A response (status line) where a request was expected.
    #[error("a response was received where a request was expected")]
    NotARequest {
        /// The request's CSeq, if it could be read, for the response to echo.
        cseq: Option<u32>,
    },
}

impl FrameError {
    /// The status of the response that answers this error (RFC 2326 §7.1.1).
    pub fn status(&self) -> u16 {
        match self {
            FrameError::HeadTooLarge { .. } | FrameError::TooManyHeaders { .. } => 400,
            FrameError::LineTooLong { request_line, .. } => {
                if *request_line {
                    414
                } else {
                    400
                }
            }
            FrameError::BodyTooLarge { .. } => 413,
            FrameError::BadLength { .. } => 400,
            FrameError::Timeout { .. } => 408,
            FrameError::Malformed { .. } | FrameError::NotARequest { .. } => 400,
            FrameError::UnsupportedVersion { .. } => 505,
        }
    }

    /// The CSeq of the bad message, if it could be read, for the response to echo.
    pub fn cseq(&self) -> Option<u32> {
        match self {
            FrameError::HeadTooLarge { cseq, .. }
            | FrameError::LineTooLong { cseq, .. }
            | FrameError::TooManyHeaders { cseq, .. }
            | FrameError::BodyTooLarge { cseq, .. }
            | FrameError::BadLength { cseq, .. }
            | FrameError::Timeout { cseq, .. }
            | FrameError::Malformed { cseq, .. }
            | FrameError::UnsupportedVersion { cseq, .. }
            | FrameError::NotARequest { cseq } => *cseq,
        }
    }

    /// Whether the connection must close after the answer: the message's end cannot be
    /// found (a body too long to skip, a Content-Length that is not one number). The framer
    /// reads nothing more after such an error.
    pub fn closes_connection(&self) -> bool {
        matches!(
            self,
            FrameError::BodyTooLarge { .. }
                | FrameError::BadLength { .. }
                | FrameError::Timeout { .. }
        )
    }

    pub(super) fn with_cseq(mut self, value: Option<u32>) -> Self {
        match &mut self {
            FrameError::HeadTooLarge { cseq, .. }
            | FrameError::LineTooLong { cseq, .. }
            | FrameError::TooManyHeaders { cseq, .. }
            | FrameError::BodyTooLarge { cseq, .. }
            | FrameError::BadLength { cseq, .. }
            | FrameError::Timeout { cseq, .. }
            | FrameError::Malformed { cseq, .. }
            | FrameError::UnsupportedVersion { cseq, .. }
            | FrameError::NotARequest { cseq } => *cseq = value,
        }
        self
    }

    pub(super) fn malformed(reason: &str) -> Self {
        FrameError::Malformed {
            reason: reason.to_owned(),
            cseq: None,
        }
    }
}
