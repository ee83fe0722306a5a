//! RTSPS: RTSP over TLS (rustls), on the same readiness loop as plain RTSP.
//!
//! A connection's bytes go through [`ConnStream`]: the socket itself, or a rustls server
//! connection in front of it. Reading feeds the socket's ciphertext to rustls and hands out the
//! plaintext; writing gives rustls plaintext and pushes its records to the socket as far as the
//! socket takes them. rustls holds at most [`TLS_BUFFER`] of records the socket did not take;
//! past that a write "would block", as a socket's would, so the connection's queue
//! ([`crate::interleaved::ConnOut`]) stays the one place that bounds and drops what a slow
//! client is sent.

use mio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::{self, ErrorKind, Read, Write};
use std::net::Shutdown;
use std::path::Path;
use std::sync::Arc;

/// Records rustls keeps for a socket that would not take them.
const TLS_BUFFER: usize = 64 << 10;

/// The server's TLS settings from a PEM certificate chain and its PEM private key.
pub(super) fn server_config(cert: &Path, key: &Path) -> io::Result<Arc<rustls::ServerConfig>> {
    let bad = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
        io::Error::new(
            ErrorKind::InvalidInput,
            format!("cannot read the RTSPS {what} {}: {e}", path.display()),
        )
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad("certificate", cert, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad("certificate", cert, &e))?;
    if chain.is_empty() {
        return Err(bad("certificate", cert, &"no CERTIFICATE block in it"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| bad("key", key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| {
            io::Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "the RTSPS certificate and key do not make a TLS server: {e}; is the key \
                     the certificate's?"
                ),
            )
        })?;
    Ok(Arc::new(config))
}

/// A client connection's byte stream: plain TCP, or TLS over it.
pub(super) enum ConnStream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

pub(super) struct TlsStream {
    tcp: TcpStream,
    tls: rustls::ServerConnection,
}

impl ConnStream {
    /// `tcp`, behind TLS when `tls` is given.
    pub(super) fn new(tcp: TcpStream, tls: Option<&Arc<rustls::ServerConfig>>) -> io::Result<Self> {
        let Some(cfg) = tls else {
            return Ok(ConnStream::Plain(tcp));
        };
        let mut conn = rustls::ServerConnection::new(cfg.clone()).map_err(io::Error::other)?;
        conn.set_buffer_limit(Some(TLS_BUFFER));
        Ok(ConnStream::Tls(Box::new(TlsStream { tcp, tls: conn })))
    }

    /// The socket, for the poll registry.
    pub(super) fn tcp(&mut self) -> &mut TcpStream {
        match self {
            ConnStream::Plain(s) => s,
            ConnStream::Tls(t) => &mut t.tcp,
        }
    }

    /// Pushes records rustls holds to the socket; `true` once none is left.
    pub(super) fn push_pending(&mut self) -> io::Result<bool> {
        match self {
            ConnStream::Plain(_) => Ok(true),
            ConnStream::Tls(t) => t.push_records(),
        }
    }

    /// Ends the connection (with TLS's close_notify, sent if the socket takes it).
    pub(super) fn shutdown(&mut self) {
        if let ConnStream::Tls(t) = self {
            t.tls.send_close_notify();
            let _ = t.push_records();
        }
        let _ = self.tcp().shutdown(Shutdown::Both);
    }
}

impl TlsStream {
    fn push_records(&mut self) -> io::Result<bool> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.tcp) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn read_plain(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            // No plaintext yet: more records from the socket (would block when none came).
            if self.tls.read_tls(&mut self.tcp)? == 0 {
                return Ok(0);
            }
            let processed = self.tls.process_new_packets();
            // The handshake's answers, or the alert that says why it failed.
            let pushed = self.push_records();
            if let Err(e) = processed {
                return Err(io::Error::new(ErrorKind::InvalidData, e));
            }
            pushed?;
        }
    }

    fn write_plain(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push_records()?;
        let n = self.tls.writer().write(buf)?;
        self.push_records()?;
        if n == 0 && !buf.is_empty() {
            return Err(ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }
}

impl Read for ConnStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ConnStream::Plain(s) => s.read(buf),
            ConnStream::Tls(t) => t.read_plain(buf),
        }
    }
}

impl Write for ConnStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ConnStream::Plain(s) => s.write(buf),
            ConnStream::Tls(t) => t.write_plain(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.push_pending().map(|_| ())
    }
}
