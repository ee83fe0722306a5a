//! The client's side of RTSP authentication, sans-IO: from a 401's `WWW-Authenticate` to the
//! `Authorization` of each later request. Digest (RFC 7616) with SHA-256 where the server
//! offers it, else MD5, `qop=auth` when offered (with a counted `nc` and the caller's
//! `cnonce`), else the RFC 2069 answer; Basic (RFC 7617) only on a TLS connection, and only
//! when the server offers nothing else.

use super::auth::{auth_params, Algorithm};
use base64::Engine;

/// The most challenges read from one header.
const MAX_CHALLENGES: usize = 8;

/// The scheme and parameters the client answers with.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Scheme {
    Digest {
        alg: Algorithm,
        realm: String,
        nonce: String,
        opaque: Option<String>,
        qop_auth: bool,
    },
    Basic,
}

/// Credentials and the challenge they answer.
#[derive(Clone, Debug)]
pub struct ClientAuth {
    user: String,
    password: String,
    scheme: Scheme,
    /// Requests answered with the current nonce.
    nc: u32,
}

/// Why a challenge cannot be answered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChallengeError {
    /// A challenge does not parse, or a Digest one lacks `realm` or `nonce` (the message
    /// quotes the challenge or says what is missing).
    #[error("the server's challenge is malformed: {0}")]
    Malformed(String),
    /// The server offers only Basic and the connection is not TLS: answering would send the
    /// password in clear, so the client refuses.
    #[error(
        "the server offers only Basic authentication, which would send the password in clear \
         over a connection that is not TLS: use rtsps://"
    )]
    BasicInClear,
    /// The user name holds a quote or a control character, which a Digest `username`
    /// cannot carry.
    #[error("the user name may not hold quotes or control characters")]
    UserName,
    /// No challenge is Digest with MD5 or SHA-256, or Basic; the message lists what was offered.
    #[error("the server offers no scheme this client speaks ({0}); it speaks Digest (SHA-256, MD5) and Basic over TLS")]
    Unsupported(String),
}

impl ClientAuth {
    /// The answer to `challenges` (every `WWW-Authenticate` value of a 401, joined by commas)
    /// with these credentials; `secure` when the connection is TLS.
    pub fn new(
        challenges: &str,
        user: &str,
        password: &str,
        secure: bool,
    ) -> Result<ClientAuth, ChallengeError> {
        if user.chars().any(|c| c == '"' || c.is_control()) {
            return Err(ChallengeError::UserName);
        }
        let scheme = choose(challenges, secure)?;
        Ok(ClientAuth {
            user: user.to_string(),
            password: password.to_string(),
            scheme,
            nc: 0,
        })
    }

    /// Takes a newer challenge (a 401 with `stale=true`, or a new nonce): the same
    /// credentials, the count starting again.
    pub fn renew(&mut self, challenges: &str, secure: bool) -> Result<(), ChallengeError> {
        self.scheme = choose(challenges, secure)?;
        self.nc = 0;
        Ok(())
    }

    /// Whether a 401's challenge says only that the nonce was stale (the credentials were
    /// right: answer the new nonce without asking the user).
    pub fn is_stale(challenges: &str) -> bool {
        split(challenges).iter().any(|(_, params)| {
            auth_params(params).is_some_and(|ps| {
                ps.iter()
                    .any(|(k, v)| k.eq_ignore_ascii_case("stale") && v.eq_ignore_ascii_case("true"))
            })
        })
    }

    /// The `Authorization` value for `method` on `uri`; `cnonce` is the caller's fresh random
    /// text (used with `qop=auth`).
    pub fn authorization(&mut self, method: &str, uri: &str, cnonce: &str) -> String {
        match &self.scheme {
            Scheme::Basic => {
                let token = base64::engine::general_purpose::STANDARD
                    .encode(format!("{}:{}", self.user, self.password));
                format!("Basic {token}")
            }
            Scheme::Digest {
                alg,
                realm,
                nonce,
                opaque,
                qop_auth,
            } => {
                let ha1 = super::auth::ha1(*alg, &self.user, realm, &self.password);
                let ha2 = alg.hex(&[method.as_bytes(), uri.as_bytes()]);
                let mut out = format!(
                    "Digest username=\"{}\", realm=\"{realm}\", nonce=\"{nonce}\", uri=\"{uri}\", \
                     algorithm={}",
                    self.user,
                    alg.name()
                );
                let response = if *qop_auth {
                    self.nc += 1;
                    let nc = format!("{:08x}", self.nc);
                    out.push_str(&format!(", qop=auth, nc={nc}, cnonce=\"{cnonce}\""));
                    alg.hex(&[
                        ha1.as_bytes(),
                        nonce.as_bytes(),
                        nc.as_bytes(),
                        cnonce.as_bytes(),
                        b"auth",
                        ha2.as_bytes(),
                    ])
                } else {
                    alg.hex(&[ha1.as_bytes(), nonce.as_bytes(), ha2.as_bytes()])
                };
                out.push_str(&format!(", response=\"{response}\""));
                if let Some(o) = opaque {
                    out.push_str(&format!(", opaque=\"{o}\""));
                }
                out
            }
        }
    }
}

/// The best challenge this client can answer: Digest SHA-256, then Digest MD5, then Basic
/// (only over TLS).
fn choose(challenges: &str, secure: bool) -> Result<Scheme, ChallengeError> {
    let mut offered = Vec::new();
    let mut best: Option<Scheme> = None;
    let mut basic = false;
    for (scheme, params) in split(challenges) {
        offered.push(scheme.to_string());
        if scheme.eq_ignore_ascii_case("Basic") {
            basic = true;
        } else if scheme.eq_ignore_ascii_case("Digest") {
            let d = digest(params)?;
            let better = match (&best, &d) {
                (None, _) => true,
                (Some(Scheme::Digest { alg, .. }), Scheme::Digest { alg: new, .. }) => {
                    *alg == Algorithm::Md5 && *new == Algorithm::Sha256
                }
                _ => false,
            };
            if better {
                best = Some(d);
            }
        }
    }
    match (best, basic) {
        (Some(d), _) => Ok(d),
        (None, true) if secure => Ok(Scheme::Basic),
        (None, true) => Err(ChallengeError::BasicInClear),
        (None, false) => Err(ChallengeError::Unsupported(offered.join(", "))),
    }
}

/// A Digest challenge's parameters; an algorithm it does not know is skipped (`Unsupported`
/// if nothing else is offered).
fn digest(params: &str) -> Result<Scheme, ChallengeError> {
    let ps = auth_params(params)
        .filter(|ps| !ps.iter().any(|(_, v)| v.chars().any(char::is_control)))
        .ok_or_else(|| ChallengeError::Malformed(params.chars().take(80).collect()))?;
    let get = |name: &str| {
        ps.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.to_string())
    };
    let alg = match get("algorithm") {
        None => Algorithm::Md5,
        Some(a) if a.eq_ignore_ascii_case("MD5") => Algorithm::Md5,
        Some(a) if a.eq_ignore_ascii_case("SHA-256") => Algorithm::Sha256,
        Some(a) => return Err(ChallengeError::Unsupported(format!("Digest {a}"))),
    };
    let (Some(realm), Some(nonce)) = (get("realm"), get("nonce")) else {
        return Err(ChallengeError::Malformed(
            "a Digest challenge without realm or nonce".into(),
        ));
    };
    let qop_auth = get("qop").is_some_and(|q| q.split(',').any(|v| v.trim() == "auth"));
    Ok(Scheme::Digest {
        alg,
        realm,
        nonce,
        opaque: get("opaque"),
        qop_auth,
    })
}

/// A header's challenges: each scheme and its parameters' text. A new challenge starts where a
/// comma-separated item is a token followed by a space and `key=` (RFC 7235 §4.1).
fn split(header: &str) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    // The current challenge's scheme, and where its parameters start.
    let mut start: Option<(&str, usize)> = None;
    let mut in_quotes = false;
    let mut item_start = 0;
    let bytes = header.as_bytes();
    for i in 0..=bytes.len() {
        let at_end = i == bytes.len();
        if !at_end && bytes[i] == b'"' {
            in_quotes = !in_quotes;
        }
        if !(at_end || (bytes[i] == b',' && !in_quotes)) {
            continue;
        }
        let item = header[item_start..i].trim_start();
        let first = item.split([' ', '=']).next().unwrap_or("");
        let scheme_start =
            !first.is_empty() && item.len() > first.len() && item.as_bytes()[first.len()] == b' ';
        if scheme_start {
            if let Some((scheme, from)) = start.take() {
                out.push((scheme, header[from..item_start].trim()));
            }
            let offset = i - item.len();
            start = Some((first, offset + first.len()));
        }
        item_start = i + 1;
        if out.len() >= MAX_CHALLENGES {
            return out;
        }
    }
    if let Some((scheme, from)) = start {
        out.push((scheme, header[from..].trim()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Metronome's server sends (`auth.rs`): SHA-256 first, MD5 last, in one header.
    const OURS: &str = "Digest realm=\"metronome\", nonce=\"abc\", algorithm=SHA-256, \
                        qop=\"auth\", Digest realm=\"metronome\", nonce=\"abc\", \
                        algorithm=MD5, qop=\"auth\"";

    #[test]
    fn the_list_is_split_into_its_challenges_and_sha256_is_chosen() {
        let parts = split(OURS);
        assert_eq!(parts.len(), 2, "{parts:?}");
        assert_eq!(parts[0].0, "Digest");
        assert!(parts[0].1.starts_with("realm=\"metronome\""), "{parts:?}");
        assert!(parts[1].1.contains("algorithm=MD5"), "{parts:?}");
        let mut a = ClientAuth::new(OURS, "ann", "secret", false).unwrap();
        let h = a.authorization("DESCRIBE", "rtsp://h/test", "0a4f113b");
        assert!(h.starts_with("Digest username=\"ann\""), "{h}");
        assert!(
            h.contains("algorithm=SHA-256") && h.contains("nc=00000001"),
            "{h}"
        );
        let h = a.authorization("SETUP", "rtsp://h/test", "0a4f113b");
        assert!(h.contains("nc=00000002"), "{h}");
    }

    /// RFC 7616 §3.9.1: the example's answer, MD5 and SHA-256 (the example's request line is
    /// an HTTP GET; the arithmetic is the same for RTSP).
    #[test]
    fn the_answers_are_rfc_7616s_example() {
        let realm = "http-auth@example.org";
        let nonce = "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v";
        let cnonce = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ";
        let opaque = "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS";
        for (alg, response) in [
            ("MD5", "8ca523f5e9506fed4657c9700eebdbec"),
            (
                "SHA-256",
                "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1",
            ),
        ] {
            let challenge = format!(
                "Digest realm=\"{realm}\", qop=\"auth, auth-int\", algorithm={alg}, \
                 nonce=\"{nonce}\", opaque=\"{opaque}\""
            );
            let mut a = ClientAuth::new(&challenge, "Mufasa", "Circle of Life", false).unwrap();
            let h = a.authorization("GET", "/dir/index.html", cnonce);
            assert!(
                h.contains(&format!("response=\"{response}\"")),
                "{alg}: {h}"
            );
            assert!(h.contains(&format!("opaque=\"{opaque}\"")), "{h}");
        }
    }

    #[test]
    fn basic_only_over_tls_and_unknown_schemes_are_named() {
        let basic = "Basic realm=\"x\"";
        assert_eq!(
            ClientAuth::new(basic, "a", "b", false).unwrap_err(),
            ChallengeError::BasicInClear
        );
        let mut a = ClientAuth::new(basic, "Aladdin", "open sesame", true).unwrap();
        assert_eq!(
            a.authorization("DESCRIBE", "rtsp://h/x", "c"),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        let e = ClientAuth::new("Negotiate abc=1", "a", "b", true).unwrap_err();
        assert!(e.to_string().contains("Negotiate"), "{e}");
        // Digest is preferred to Basic, in either order.
        let both = format!("Basic realm=\"x\", {OURS}");
        let mut a = ClientAuth::new(&both, "a", "b", true).unwrap();
        assert!(a.authorization("OPTIONS", "*", "c").starts_with("Digest"));
    }

    #[test]
    fn stale_is_read_and_malformed_challenges_are_errors() {
        assert!(ClientAuth::is_stale(
            "Digest realm=\"m\", nonce=\"n2\", stale=true, qop=\"auth\""
        ));
        assert!(!ClientAuth::is_stale(OURS));
        assert!(ClientAuth::new("Digest realm=\"m\"", "a", "b", false).is_err());
        assert!(ClientAuth::new("Digest realm=\"m, nonce=1", "a", "b", false).is_err());
        assert!(ClientAuth::new("", "a", "b", false).is_err());
        // What the answer would echo may not break its header.
        let injected = "Digest realm=\"m\r\nX-Evil: 1\", nonce=\"n\", qop=\"auth\"";
        assert!(ClientAuth::new(injected, "a", "b", false).is_err());
        let e = ClientAuth::new(OURS, "a\"b", "c", false).unwrap_err();
        assert_eq!(e, ChallengeError::UserName);
    }
}
