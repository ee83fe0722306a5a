//! RTSP message framing over a byte stream: requests (RFC 2326 §4, §6) and interleaved binary
//! data (`$`, channel, 16-bit length, payload: RFC 2326 §10.12), with every limit checked on the
//! raw bytes before `rtsp_types` (whose parser is not bounded) sees a message.
//!
//! The framer never panics and holds at most [`Framer::capacity`] bytes. After an error it
//! resynchronises: the bad message is skipped up to and including its empty line and its
//! `Content-Length` body when that could be read; a head longer than `max_head` is discarded
//! until an empty line is seen. The caller answers each error with a response of
//! [`FrameError::status`] (see `RtspServer::error_response`) and carries on, except after an
//! error that [`FrameError::closes_connection`] (a body over the limit, a Content-Length that
//! is not one number): where the next message starts is not known, so the framer stops and
//! the caller closes the connection after the answer.

use rtsp_types::{Message, ParseError};

mod error;
pub use error::FrameError;

/// Limits on what one message may be. Defaults suit every client we know of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramerLimits {
    /// Request line + headers + the empty line, in bytes.
    pub max_head: usize,
    /// One line of the head, without its CRLF.
    pub max_line: usize,
    /// Header lines (continuation lines count).
    pub max_headers: usize,
    /// A request body (`Content-Length`).
    pub max_body: usize,
    /// A whole interleaved frame (`$`, channel, length and payload); larger ones are skipped.
    pub max_data: usize,
}

impl Default for FramerLimits {
    fn default() -> Self {
        FramerLimits {
            max_head: 8192,
            max_line: 1024,
            max_headers: 32,
            max_body: 65536,
            max_data: 65535 + 4,
        }
    }
}

/// What the framer found in the stream.
#[derive(Debug)]
pub enum Frame {
    /// A complete RTSP request, body included.
    Request(rtsp_types::Request<Vec<u8>>),
    /// An interleaved binary frame (RFC 2326 §10.12): RTCP from a client on a TCP transport.
    Data {
        /// The interleaved channel the frame came on (the second byte).
        channel: u8,
        /// The frame's payload, without the 4-byte `$` header.
        payload: Vec<u8>,
    },
}

/// Splits a TCP byte stream into [`Frame`]s. Sans-IO: the caller pushes what it read and pulls
/// frames until [`Framer::next_frame`] returns `None`.
#[derive(Debug)]
pub struct Framer {
    limits: FramerLimits,
    cap: usize,
    /// Unconsumed input. While a head is read (and no error seen) it starts with that head.
    buf: Vec<u8>,
    state: State,
    skipped_data: u64,
}

#[derive(Debug)]
enum State {
    /// Between messages.
    Idle,
    /// Reading a head.
    Head(HeadScan),
    /// The head (of `head_len` bytes) is complete and valid; waiting for `total` bytes.
    Body { head_len: usize, total: usize },
    /// Dropping a body or an oversized data frame.
    Skip { remaining: u64 },
    /// After an error that closes the connection: nothing more is read.
    Stopped,
}

/// What has been learnt about the head being read, line by line.
#[derive(Debug, Default)]
struct HeadScan {
    /// Bytes of `buf` scanned that belong to this head (zero while discarding: they are dropped).
    pos: usize,
    /// Bytes of the head seen in all, dropped ones included.
    total: usize,
    /// The current line: its length so far and its first `max_line + 2` bytes.
    line_len: usize,
    line: Vec<u8>,
    /// Complete lines, the request line included.
    lines: usize,
    content_length: Option<u64>,
    bad_length: bool,
    bare_lf: bool,
    cseq: Option<u32>,
    /// The first error seen. Once set, the rest of the head is discarded.
    error: Option<FrameError>,
    /// The error was already returned (the head ran past `max_head`); only resync is left.
    reported: bool,
}

enum ScanEvent {
    /// The empty line ending the head was consumed.
    End,
    /// The head ran past `max_head`: report the error now, keep discarding.
    ReportNow,
}

impl Framer {
    /// An empty framer that enforces `limits`; it never holds more than
    /// [`Framer::capacity`] bytes.
    pub fn new(limits: FramerLimits) -> Self {
        let data = limits.max_data.min(65535 + 4);
        let cap = limits
            .max_head
            .saturating_add(limits.max_body)
            .max(data)
            .saturating_add(4);
        Framer {
            limits,
            cap,
            buf: Vec::new(),
            state: State::Idle,
            skipped_data: 0,
        }
    }

    /// The most bytes the framer ever holds.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// How many more bytes [`Framer::push`] accepts now. After `next_frame` returned `None`
    /// this is never zero, so a reader always makes progress.
    pub fn buffer_space(&self) -> usize {
        self.cap.saturating_sub(self.buf.len())
    }

    /// Whether part of a message has arrived and not the rest (a head or body being read,
    /// or bytes held): what a deadline for a whole request runs on.
    pub fn mid_message(&self) -> bool {
        !self.buf.is_empty() || !matches!(self.state, State::Idle | State::Stopped)
    }

    /// Bytes held now.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Interleaved frames larger than `max_data` that were skipped.
    pub fn skipped_data_frames(&self) -> u64 {
        self.skipped_data
    }

    /// Appends bytes read from the connection. Takes at most [`Framer::buffer_space`] bytes and
    /// returns how many it took (a caller that respects `buffer_space` can ignore it).
    pub fn push(&mut self, bytes: &[u8]) -> usize {
        if matches!(self.state, State::Stopped) {
            return bytes.len();
        }
        let n = bytes.len().min(self.buffer_space());
        self.buf.extend_from_slice(&bytes[..n]);
        n
    }

    /// The next complete frame or framing error; `None` when more bytes are needed.
    pub fn next_frame(&mut self) -> Option<Result<Frame, FrameError>> {
        loop {
            match &mut self.state {
                State::Stopped => return None,
                State::Skip { remaining } => {
                    let n = usize::try_from(*remaining)
                        .unwrap_or(usize::MAX)
                        .min(self.buf.len());
                    self.buf.drain(..n);
                    *remaining -= n as u64;
                    if *remaining > 0 {
                        return None;
                    }
                    self.state = State::Idle;
                }
                State::Body { head_len, total } => {
                    let (head_len, total) = (*head_len, *total);
                    if self.buf.len() < total {
                        return None;
                    }
                    self.state = State::Idle;
                    let res = parse_request(&self.buf[..total], head_len);
                    self.buf.drain(..total);
                    return Some(res);
                }
                State::Head(scan) => {
                    let event = scan.scan(&self.buf, &self.limits);
                    if scan.error.is_some() {
                        // Discarding: nothing scanned is kept.
                        self.buf.drain(..scan.pos);
                        scan.pos = 0;
                    }
                    match event {
                        None => return None,
                        Some(ScanEvent::ReportNow) => {
                            scan.reported = true;
                            let cseq = scan.cseq;
                            if let Some(err) = scan.error.clone() {
                                return Some(Err(err.with_cseq(cseq)));
                            }
                        }
                        Some(ScanEvent::End) => {
                            if let Some(res) = self.end_of_head() {
                                return Some(res);
                            }
                        }
                    }
                }
                State::Idle => {
                    // Empty lines between messages are ignored (RFC 2326 §15.1 keep-alives).
                    let blank = self
                        .buf
                        .iter()
                        .take_while(|b| **b == b'\r' || **b == b'\n')
                        .count();
                    self.buf.drain(..blank);
                    match self.buf.first() {
                        None => return None,
                        Some(b'$') => {
                            if let Some(res) = self.data_frame() {
                                return res;
                            }
                        }
                        Some(_) => self.state = State::Head(HeadScan::default()),
                    }
                }
            }
        }
    }

    /// `$` channel length payload (RFC 2326 §10.12), at the start of `buf`. `Some(res)`: return
    /// `res` from `next_frame`; `None`: an oversized frame is being skipped, keep looping.
    #[allow(clippy::type_complexity)]
    fn data_frame(&mut self) -> Option<Option<Result<Frame, FrameError>>> {
        let [_, channel, hi, lo, ..] = self.buf[..] else {
            return Some(None);
        };
        let total = 4 + usize::from(u16::from_be_bytes([hi, lo]));
        if total > self.limits.max_data {
            self.skipped_data += 1;
            self.state = State::Skip {
                remaining: total as u64,
            };
            return None;
        }
        if self.buf.len() < total {
            return Some(None);
        }
        let payload = self.buf[4..total].to_vec();
        self.buf.drain(..total);
        Some(Some(Ok(Frame::Data { channel, payload })))
    }

    /// The head's empty line was consumed: decide what follows. `None`: keep looping.
    fn end_of_head(&mut self) -> Option<Result<Frame, FrameError>> {
        let State::Head(scan) = std::mem::replace(&mut self.state, State::Idle) else {
            return None;
        };
        let length = if scan.bad_length {
            None
        } else {
            Some(scan.content_length.unwrap_or(0))
        };
        let error = scan.error.or_else(|| {
            if scan.bad_length {
                Some(FrameError::BadLength {
                    reason: "Content-Length is not one number (invalid, or given twice with different values): the connection closes".into(),
                    cseq: None,
                })
            } else if scan.bare_lf {
                Some(FrameError::malformed("lines must end with CRLF"))
            } else {
                match length {
                    Some(n) if n > self.limits.max_body as u64 => Some(FrameError::BodyTooLarge {
                        length: n,
                        limit: self.limits.max_body,
                        cseq: None,
                    }),
                    _ => None,
                }
            }
        });
        match error {
            Some(err) if err.closes_connection() => {
                self.buf.clear();
                self.state = State::Stopped;
                Some(Err(err.with_cseq(scan.cseq)))
            }
            Some(err) => {
                // Resync: the head is gone already if an error was seen while scanning.
                if scan.pos > 0 {
                    self.buf.drain(..scan.pos.min(self.buf.len()));
                }
                if let Some(n) = length.filter(|n| *n > 0) {
                    self.state = State::Skip { remaining: n };
                }
                if scan.reported {
                    None
                } else {
                    Some(Err(err.with_cseq(scan.cseq)))
                }
            }
            None => {
                // Within max_body, so it fits in usize.
                let body = length.unwrap_or(0) as usize;
                self.state = State::Body {
                    head_len: scan.pos,
                    total: scan.pos + body,
                };
                None
            }
        }
    }
}

impl HeadScan {
    /// Scans `buf[self.pos..]` up to the end of the head.
    fn scan(&mut self, buf: &[u8], limits: &FramerLimits) -> Option<ScanEvent> {
        while self.pos < buf.len() {
            let b = buf[self.pos];
            self.pos += 1;
            self.total += 1;
            if b == b'\n' {
                if self.end_of_line(limits) {
                    return Some(ScanEvent::End);
                }
            } else {
                self.line_len += 1;
                if self.line.len() < limits.max_line.saturating_add(2) {
                    self.line.push(b);
                }
                if self.line_len > limits.max_line.saturating_add(1) {
                    self.fail(FrameError::LineTooLong {
                        limit: limits.max_line,
                        request_line: self.lines == 0,
                        cseq: None,
                    });
                }
            }
            if self.total > limits.max_head && !self.reported {
                self.fail(FrameError::HeadTooLarge {
                    limit: limits.max_head,
                    cseq: None,
                });
                return Some(ScanEvent::ReportNow);
            }
        }
        None
    }

    fn fail(&mut self, err: FrameError) {
        if self.error.is_none() {
            self.error = Some(err);
        }
    }

    /// A '\n' ended the current line. Returns true for the empty line that ends the head.
    fn end_of_line(&mut self, limits: &FramerLimits) -> bool {
        let line = std::mem::take(&mut self.line);
        let len = std::mem::take(&mut self.line_len);
        let complete = len == line.len();
        let (content, content_len) = match line.strip_suffix(b"\r") {
            Some(c) if complete => (c, len - 1),
            _ => {
                if complete {
                    self.bare_lf = true;
                }
                (&line[..], len)
            }
        };
        if content_len == 0 {
            return true;
        }
        if content_len > limits.max_line {
            self.fail(FrameError::LineTooLong {
                limit: limits.max_line,
                request_line: self.lines == 0,
                cseq: None,
            });
        } else if self.lines == 0 {
            if let Err(e) = check_request_line(content) {
                self.fail(e);
            }
        } else {
            if self.lines > limits.max_headers {
                self.fail(FrameError::TooManyHeaders {
                    limit: limits.max_headers,
                    cseq: None,
                });
            }
            // Still read: the CSeq for the error response, the Content-Length to skip the body.
            self.header(content);
        }
        self.lines += 1;
        // Keep the line's allocation for the next one.
        self.line = line;
        self.line.clear();
        false
    }

    /// Notes the headers the framer needs itself: Content-Length and CSeq.
    fn header(&mut self, line: &[u8]) {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            return;
        };
        let name = &line[..colon];
        let value = std::str::from_utf8(&line[colon + 1..]).map(str::trim);
        if name.eq_ignore_ascii_case(b"content-length") {
            // Given twice (even with one value) is refused: a proxy in between may have read
            // the other one (RFC 7230 §3.3.3's request smuggling).
            match value.ok().and_then(|v| v.parse::<u64>().ok()) {
                Some(n) if self.content_length.is_none() => self.content_length = Some(n),
                _ => self.bad_length = true,
            }
        } else if name.eq_ignore_ascii_case(b"cseq") && self.cseq.is_none() {
            self.cseq = value.ok().and_then(|v| v.parse::<u32>().ok());
        }
    }
}

/// `Method SP Request-URI SP RTSP-Version` (RFC 2326 §6.1), checked before the parser sees it.
fn check_request_line(line: &[u8]) -> Result<(), FrameError> {
    if line.starts_with(b"RTSP/") {
        return Err(FrameError::NotARequest { cseq: None });
    }
    let parts: Vec<&[u8]> = line.split(|b| *b == b' ').collect();
    let [_, _, version] = parts[..] else {
        return Err(FrameError::malformed(
            "the request line is not `METHOD URI RTSP/1.0`",
        ));
    };
    if version == b"RTSP/1.0" {
        Ok(())
    } else if version.starts_with(b"RTSP/") {
        let shown: String = version
            .iter()
            .take(16)
            .map(|b| {
                if b.is_ascii_graphic() {
                    *b as char
                } else {
                    '?'
                }
            })
            .collect();
        Err(FrameError::UnsupportedVersion {
            version: shown,
            cseq: None,
        })
    } else {
        Err(FrameError::malformed("not an RTSP/1.0 request"))
    }
}

/// Parses a complete message (head and body) whose limits were checked.
fn parse_request(bytes: &[u8], head_len: usize) -> Result<Frame, FrameError> {
    let cseq = find_cseq(&bytes[..head_len.min(bytes.len())]);
    let err = |reason: &str| FrameError::malformed(reason).with_cseq(cseq);
    match Message::<Vec<u8>>::parse(bytes) {
        Ok((Message::Request(req), used)) if used == bytes.len() => Ok(Frame::Request(req)),
        Ok((Message::Request(_), _)) => Err(err("message length does not match Content-Length")),
        Ok((Message::Response(_), _)) => Err(FrameError::NotARequest { cseq }),
        Ok((Message::Data(_), _)) => Err(err("unexpected data frame")),
        Err(ParseError::Incomplete(_)) => Err(err("incomplete message")),
        Err(ParseError::Error) => Err(err("unparseable request (syntax or URL)")),
    }
}

fn find_cseq(head: &[u8]) -> Option<u32> {
    head.split(|b| *b == b'\n').skip(1).find_map(|line| {
        let colon = line.iter().position(|b| *b == b':')?;
        if !line[..colon].eq_ignore_ascii_case(b"cseq") {
            return None;
        }
        std::str::from_utf8(&line[colon + 1..])
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}
