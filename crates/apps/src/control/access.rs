//! Who may drive the control API, and where its streams may go. Every request passes, in order:
//!
//! 1. **Host** (RFC 9110 §7.2): an IP address, `localhost`, or a name the operator lists
//!    (`--control-host`). A web page that points its own name at this address (DNS
//!    rebinding) sends its name, and is refused (403 `forbidden-host`).
//! 2. **Origin** (RFC 6454), which browsers send with every cross-origin request and every
//!    POST, PATCH and DELETE: when present, it must be this API's own (`http://` + Host). A
//!    page from anywhere else is refused (403 `forbidden-origin`), token or not.
//! 3. **The bearer token** (RFC 6750 §2.1, `Authorization: Bearer TOKEN`) on every route but
//!    `GET /health`, compared in constant time: 401 `unauthorized` with a `WWW-Authenticate`
//!    challenge without it or with another.
//!
//! Streams added through the API go only to the prefixes of the destination allow-list
//! (`--allow-destination`; by default loopback and administratively scoped multicast,
//! [`IpPrefix::default_destinations`]): a client cannot make the server send to a third party
//! (403 `forbidden-destination`). Streams the operator declares in the config file or on the
//! command line are the operator's own and are not limited.

use super::http::{Request, Response};
use crate::streams::StreamSpec;
use metronome_config::prefix::IpPrefix;
use metronome_config::url::RtpUrl;
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::path::Path;

/// The realm of the 401 challenge.
const REALM: &str = "metronome control API";
/// The shortest token accepted, in characters.
pub const MIN_TOKEN_CHARS: usize = 16;
/// The largest token file read, in bytes.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// The control API's access rules: its token, the host names it answers to, and where the
/// streams it adds may send.
#[derive(Clone)]
pub struct ControlAccess {
    token: String,
    hosts: Vec<String>,
    destinations: Vec<IpPrefix>,
}

impl std::fmt::Debug for ControlAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlAccess")
            .field("token", &"(hidden)")
            .field("hosts", &self.hosts)
            .field("destinations", &self.destinations)
            .finish()
    }
}

impl ControlAccess {
    /// Requests must carry `token` (at least [`MIN_TOKEN_CHARS`] characters of RFC 6750's
    /// `b64token`: letters, digits and `-._~+/`, then `=`s). No extra host names; the default
    /// destinations.
    pub fn new(token: impl Into<String>) -> Result<ControlAccess, String> {
        let token = token.into();
        let body = token.trim_end_matches('=');
        let chars_ok = !body.is_empty()
            && body
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b));
        if token.len() < MIN_TOKEN_CHARS || !chars_ok {
            return Err(format!(
                "the control API token must be at least {MIN_TOKEN_CHARS} characters of \
                 letters, digits and -._~+/ (delete the token file to have one made)"
            ));
        }
        Ok(ControlAccess {
            token,
            hosts: Vec::new(),
            destinations: IpPrefix::default_destinations(),
        })
    }

    /// Host names (besides IP addresses and `localhost`) that requests may give in `Host`.
    pub fn with_hosts(mut self, hosts: impl IntoIterator<Item = String>) -> ControlAccess {
        self.hosts = hosts
            .into_iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        self
    }

    /// Where streams added through the API may send, instead of the default.
    pub fn with_destinations(mut self, prefixes: Vec<IpPrefix>) -> ControlAccess {
        self.destinations = prefixes;
        self
    }

    /// The prefixes streams added through the API may send to.
    pub fn destinations(&self) -> &[IpPrefix] {
        &self.destinations
    }

    /// Whether `req` may be served: its Host, its Origin, its token (not for `/health`).
    pub(crate) fn admit(&self, req: &Request, path: &str) -> Result<(), Response> {
        self.check_host(req)?;
        self.check_origin(req)?;
        if path == "/health" {
            return Ok(());
        }
        self.check_token(req)
    }

    fn check_host(&self, req: &Request) -> Result<(), Response> {
        let Some(host) = req.host.as_deref() else {
            return Err(Response::error(
                400,
                "bad-request",
                "the request has no Host header; send one (HTTP/1.1 requires it)",
            ));
        };
        let name = host_name(host).to_ascii_lowercase();
        let known =
            name.parse::<IpAddr>().is_ok() || name == "localhost" || self.hosts.contains(&name);
        if known {
            return Ok(());
        }
        Err(Response::error(
            403,
            "forbidden-host",
            format!(
                "this control API does not answer to the name '{}'; use its IP address, \
                 or have its operator add the name with --control-host",
                super::http::echo(host)
            ),
        ))
    }

    fn check_origin(&self, req: &Request) -> Result<(), Response> {
        let (Some(origin), Some(host)) = (req.origin.as_deref(), req.host.as_deref()) else {
            return Ok(());
        };
        let own = format!("http://{host}");
        if origin.eq_ignore_ascii_case(&own) {
            return Ok(());
        }
        Err(Response::error(
            403,
            "forbidden-origin",
            format!(
                "a page from {} may not drive this control API; send requests from a \
                 program (curl, a script) with the token",
                super::http::echo(origin)
            ),
        ))
    }

    fn check_token(&self, req: &Request) -> Result<(), Response> {
        let given = req.authorization.as_deref().and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
        let challenge = |error: Option<&str>| {
            let mut c = format!("Bearer realm=\"{REALM}\"");
            if let Some(e) = error {
                c += &format!(", error=\"{e}\"");
            }
            c
        };
        match given {
            Some(t) if same(t.as_bytes(), self.token.as_bytes()) => Ok(()),
            Some(_) => Err(Response::error(
                401,
                "unauthorized",
                "the bearer token is not this server's; send the one in its token file \
                 (--control-token-file)",
            )
            // RFC 6750 §3.1's error code, spelled as the RFC spells it.
            .with_header("WWW-Authenticate", challenge(Some("invalid_token")))),
            None => Err(Response::error(
                401,
                "unauthorized",
                "this control API needs its token: send 'Authorization: Bearer TOKEN' with \
                 the token from the server's token file (--control-token-file)",
            )
            .with_header("WWW-Authenticate", challenge(None))),
        }
    }

    /// Whether every address `spec` would send to is allowed: its destinations and its RTSP
    /// multicast group. Addresses that do not parse are left to the stream's own checks.
    pub(crate) fn check_destinations(&self, spec: &StreamSpec) -> Result<(), Response> {
        let urls = spec.destination.iter().chain(spec.multicast.iter());
        for url in urls {
            let Ok(u) = RtpUrl::parse_destination(url) else {
                continue;
            };
            if !self.destinations.iter().any(|p| p.contains(u.addr.ip())) {
                let allowed: Vec<String> =
                    self.destinations.iter().map(|p| p.to_string()).collect();
                return Err(Response::error(
                    403,
                    "forbidden-destination",
                    format!(
                        "stream '{}' would send to {}, outside the addresses this control \
                         API may send to ({}); its operator can allow more with \
                         --allow-destination PREFIX",
                        spec.name,
                        u.addr.ip(),
                        if allowed.is_empty() {
                            "none".to_string()
                        } else {
                            allowed.join(", ")
                        }
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The host part of a `Host` value: without its port, an IPv6 literal without its brackets.
fn host_name(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Equal, in a time that depends on the lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The control API's token from `path`, or a new one written there (mode 0600, its directory
/// made mode 0700 if missing) when there is no such file. Returns the token and whether it
/// was made now. A file others may read is refused, as ssh refuses such a key.
pub fn load_or_create_token(path: &Path) -> io::Result<(String, bool)> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    let what = |e: io::Error, doing: &str| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot {doing} the control API token file {}: {e}",
                path.display()
            ),
        )
    };
    match std::fs::File::open(path) {
        Ok(f) => {
            let mode = f.metadata().map_err(|e| what(e, "read"))?.mode();
            if mode & 0o077 != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "the control API token file {} may be read by others (mode {:o}); \
                         run chmod 600 on it",
                        path.display(),
                        mode & 0o777
                    ),
                ));
            }
            let mut text = String::new();
            f.take(MAX_TOKEN_FILE_BYTES)
                .read_to_string(&mut text)
                .map_err(|e| what(e, "read"))?;
            Ok((text.trim().to_string(), false))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| what(e, "make the directory of"))?;
            }
            let bytes = metronome_rt::entropy::os_random::<32>("the control API token")?;
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| what(e, "create"))?;
            writeln!(f, "{token}").map_err(|e| what(e, "write"))?;
            Ok((token, true))
        }
        Err(e) => Err(what(e, "read")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_lose_their_port_and_brackets() {
        assert_eq!(host_name("127.0.0.1:8089"), "127.0.0.1");
        assert_eq!(host_name("[::1]:8089"), "::1");
        assert_eq!(host_name("[::1]"), "::1");
        assert_eq!(host_name("localhost"), "localhost");
        assert_eq!(host_name("Example.org:80"), "Example.org");
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abcdefghijklmnop", b"abcdefghijklmnop"));
        assert!(!same(b"abcdefghijklmnop", b"abcdefghijklmnoq"));
        assert!(!same(b"abcdefghijklmnop", b"abcdefghijklmno"));
    }

    #[test]
    fn short_or_odd_tokens_are_refused() {
        assert!(ControlAccess::new("0123456789abcdef").is_ok());
        assert!(ControlAccess::new("abc+/DEF-._~0123==").is_ok());
        for bad in [
            "",
            "short",
            "0123456789abcde",
            "0123456789abcdef ghi",
            "0123456789abcdef\"",
            "================",
        ] {
            assert!(ControlAccess::new(bad).is_err(), "{bad:?}");
        }
        assert!(
            !format!("{:?}", ControlAccess::new("0123456789abcdef").unwrap())
                .contains("0123456789abcdef")
        );
    }

    #[test]
    fn a_missing_token_file_is_made_private_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("metronome-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("control-token");
        let (made, new) = load_or_create_token(&path).unwrap();
        assert!(new && made.len() == 64, "{made}");
        assert!(ControlAccess::new(made.clone()).is_ok());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        assert_eq!(load_or_create_token(&path).unwrap(), (made, false));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = load_or_create_token(&path).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
