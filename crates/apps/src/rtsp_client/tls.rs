//! RTSPS for the client (`rtsps://`, port 322 by default): the RTSP connection's bytes through a
//! rustls client connection over the blocking socket. The server's certificate is checked
//! against the CA certificates of `RtspClientConfig::tls_ca` (a PEM file: a private CA, or a
//! self-signed server's own certificate), else the system's bundle; and for the URL's host
//! name or address. Nothing is sent before the handshake has proved the server.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

/// Debian's (ca-certificates) bundle of trusted CA certificates.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The connection's byte stream: plain TCP, or TLS over it.
pub(super) enum ClientStream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl ClientStream {
    /// The socket under it (timeouts, addresses, shutdown).
    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            ClientStream::Plain(s) => s,
            ClientStream::Tls(t) => t.get_ref(),
        }
    }

    /// TLS over `tcp` with the server named `host`, the handshake done within the socket's
    /// timeouts.
    pub(super) fn tls(tcp: TcpStream, host: &str, ca: Option<&Path>) -> io::Result<ClientStream> {
        let config = client_config(ca)?;
        let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']'))
            .map_err(|e| {
                invalid(format!(
                    "'{host}' cannot be checked against a certificate: {e}"
                ))
            })?
            .to_owned();
        let conn = rustls::ClientConnection::new(config, name)
            .map_err(|e| invalid(format!("cannot start TLS: {e}")))?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .map_err(|e| io::Error::new(e.kind(), handshake_failed(&e)))?;
        }
        Ok(ClientStream::Tls(Box::new(stream)))
    }
}

impl Read for ClientStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ClientStream::Plain(s) => s.read(buf),
            ClientStream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for ClientStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ClientStream::Plain(s) => s.write(buf),
            ClientStream::Tls(t) => t.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            ClientStream::Plain(s) => s.flush(),
            ClientStream::Tls(t) => t.flush(),
        }
    }
}

/// What a failed handshake says, with what to do about the usual causes.
fn handshake_failed(e: &io::Error) -> String {
    let text = e.to_string();
    let hint = if text.contains("CaUsedAsEndEntity") {
        "the server's certificate is a CA's (openssl req -x509 makes one unless given -addext \
         basicConstraints=critical,CA:FALSE): the server needs a certificate of its own"
    } else if text.contains("NotValidForName") {
        "the server's certificate does not name the host of the URL (its subjectAltName)"
    } else {
        "a self-signed server's certificate is trusted with --rtsp-tls-ca CERT.pem"
    };
    format!("the TLS handshake failed: {text} ({hint})")
}

fn invalid(what: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, what)
}

/// Trusts the certificates in `ca` (PEM), else the system's bundle.
fn client_config(ca: Option<&Path>) -> io::Result<Arc<rustls::ClientConfig>> {
    let path = ca.unwrap_or(Path::new(SYSTEM_BUNDLE));
    let bad = |e: &dyn std::fmt::Display| {
        invalid(format!(
            "cannot read the CA certificates {}: {e}",
            path.display()
        ))
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))? {
        roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
    }
    if roots.is_empty() {
        return Err(bad(&"no CERTIFICATE block in it"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("no TLS version to offer: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
