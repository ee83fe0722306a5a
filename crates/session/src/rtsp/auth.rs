//! RTSP authentication, sans-IO: HTTP Digest (RFC 7616) with SHA-256 and MD5, as RTSP borrows
//! it (RFC 2326 §D.1, RFC 7826 §19.1). Users and what they may play come from the config
//! (`metronome_config::rtsp_auth`), which keeps each password's `H(A1)`, never the password.
//!
//! - **Challenges.** A 401 carries one challenge per algorithm some user has a hash for,
//!   SHA-256 first and MD5 last, in one `WWW-Authenticate` (a list of challenges, RFC 7235
//!   §4.1), each with `qop="auth"`. Clients that read the list take the first they support;
//!   FFmpeg (5.1) and curl read it as one challenge whose later `algorithm` wins, so they answer
//!   with MD5, which they also support.
//! - **Answers.** `qop=auth` (with `nc` and `cnonce`), and, for the clients that still send it
//!   (GStreamer's `rtspsrc`, live555), the RFC 2069 answer without `qop`. `uri` must name the
//!   request's own URL. The `-sess` algorithms and `auth-int` are not offered and are refused.
//! - **Nonces** are stateless: the time they were made and an HMAC-SHA-256 (a per-process key)
//!   of that time and the client's address, so a nonce works only from the address it was
//!   given to and only for [`NONCE_LIFETIME`]; after that a right answer gets `stale=true` and
//!   the client answers the new nonce without asking its user. A client's session keeps
//!   working with the nonce it set the session up with (players use one nonce for a whole
//!   session). Nonce counts are not remembered: without TLS, an answer seen on the wire can
//!   be replayed from the same address for the same method and URL within the lifetime.
//! - **Basic** (RFC 7617) sends the password itself: it is offered and accepted only on a
//!   server whose connections are TLS (RTSPS), and checked against the same stored hashes.
//!
//! Unknown user and wrong password get the same answer, in the same time.

use std::net::IpAddr;
use std::time::Duration;

use hmac::{Hmac, Mac};
use md5::Md5;
use metronome_config::rtsp_auth::{RtspAuthSpec, RtspUser};
use metronome_time::Timestamp;
use rtsp_types::Url;
use sha2::{Digest, Sha256};

/// How long a nonce may start new requests.
pub const NONCE_LIFETIME: Duration = Duration::from_secs(300);
/// Most auth-params read from one `Authorization` (more is not an answer to our challenge).
const MAX_PARAMS: usize = 16;

/// A Digest algorithm (RFC 7616 §3.4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// `MD5`: the default when an answer names none; the one older clients support.
    Md5,
    /// `SHA-256`: offered first.
    Sha256,
}

impl Algorithm {
    /// Its name in challenges and answers.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Md5 => "MD5",
            Algorithm::Sha256 => "SHA-256",
        }
    }

    /// The algorithm an answer names; an answer without one means MD5 (RFC 7616 §3.4).
    fn from_answer(name: Option<&str>) -> Option<Algorithm> {
        match name {
            None => Some(Algorithm::Md5),
            Some(n) if n.eq_ignore_ascii_case("MD5") => Some(Algorithm::Md5),
            Some(n) if n.eq_ignore_ascii_case("SHA-256") => Some(Algorithm::Sha256),
            Some(_) => None,
        }
    }

    /// The hash of `parts` joined by `:`, in lowercase hex.
    pub(super) fn hex(self, parts: &[&[u8]]) -> String {
        fn join<D: Digest>(parts: &[&[u8]]) -> Vec<u8> {
            let mut d = D::new();
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    d.update(b":");
                }
                d.update(p);
            }
            d.finalize().to_vec()
        }
        let bytes = match self {
            Algorithm::Md5 => join::<Md5>(parts),
            Algorithm::Sha256 => join::<Sha256>(parts),
        };
        hex(&bytes)
    }

    /// A user's stored `H(A1)` for this algorithm.
    fn stored(self, user: &RtspUser) -> Option<String> {
        match self {
            Algorithm::Md5 => user.md5.map(|h| hex(&h)),
            Algorithm::Sha256 => user.sha256.map(|h| hex(&h)),
        }
    }
}

/// `H(A1) = H(user:realm:password)` (RFC 7616 §3.4.2) in hex: what the config stores.
pub fn ha1(alg: Algorithm, user: &str, realm: &str, password: &str) -> String {
    alg.hex(&[user.as_bytes(), realm.as_bytes(), password.as_bytes()])
}

/// What the check of one request's credentials decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The request goes on, as this user.
    Pass(String),
    /// 401 and a fresh challenge. `failed`: credentials were given and were wrong (counted
    /// against the connection); `stale`: they were right but the nonce is too old.
    Challenge {
        /// Why, for the 401's reason header.
        reason: String,
        /// The answer was right but its nonce expired: the challenge says `stale=true`.
        stale: bool,
        /// Credentials were given and were wrong.
        failed: bool,
    },
    /// 403: a known user who may not play this mount.
    Forbidden(String),
}

impl Verdict {
    fn wrong(reason: impl Into<String>) -> Verdict {
        Verdict::Challenge {
            reason: reason.into(),
            stale: false,
            failed: true,
        }
    }
}

/// One request, as far as authentication cares.
#[derive(Clone, Copy, Debug)]
pub struct Asking<'a> {
    /// When the request arrived: a nonce older than [`NONCE_LIFETIME`] is stale.
    pub now: Timestamp,
    /// The client's IP address: a nonce is good only from the address it was given to.
    pub peer: IpAddr,
    /// The request's method (`DESCRIBE`, `SETUP`, ...), part of the Digest's `A2`.
    pub method: &'a str,
    /// The Request-URI: the answer's `uri` must name it.
    pub url: &'a Url,
    /// The mount the URL names, whose allowed users are checked.
    pub mount: &'a str,
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
    /// The user who set up the session the request names: that user's nonce stays good.
    pub session_user: Option<&'a str>,
    /// The connection is TLS: Basic is offered and accepted.
    pub secure: bool,
}

/// Checks credentials against the configured users and makes challenges.
#[derive(Clone, PartialEq, Eq)]
pub struct Authenticator {
    spec: RtspAuthSpec,
    key: [u8; 32],
    offered: Vec<Algorithm>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("spec", &self.spec)
            .field("offered", &self.offered)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// `key` signs the nonces: the driver fills it from the operating system's entropy.
    pub fn new(spec: RtspAuthSpec, key: [u8; 32]) -> Self {
        let has = |f: fn(&RtspUser) -> bool| spec.users.iter().any(f);
        let offered = [
            (Algorithm::Sha256, has(|u| u.sha256.is_some())),
            (Algorithm::Md5, has(|u| u.md5.is_some())),
        ]
        .into_iter()
        .filter_map(|(a, any)| any.then_some(a))
        .collect();
        Authenticator { spec, key, offered }
    }

    /// The same check with other users, realm or public mounts (a reloaded config), keeping
    /// the nonce key: the nonces already handed out stay valid.
    pub fn with_spec(&self, spec: RtspAuthSpec) -> Self {
        Authenticator::new(spec, self.key)
    }

    /// The users, realm and public mounts it was made with.
    pub fn spec(&self) -> &RtspAuthSpec {
        &self.spec
    }

    /// The `WWW-Authenticate` value of a 401 to `peer` at `now` (Basic last, over TLS).
    pub fn challenge(&self, now: Timestamp, peer: IpAddr, stale: bool, secure: bool) -> String {
        let nonce = self.nonce(now, peer);
        let realm = &self.spec.realm;
        let stale = if stale { ", stale=true" } else { "" };
        let one = |a: &Algorithm| {
            format!(
                "Digest realm=\"{realm}\", qop=\"auth\", algorithm={}, nonce=\"{nonce}\"{stale}",
                a.name()
            )
        };
        let mut all: Vec<String> = self.offered.iter().map(one).collect();
        if secure {
            all.push(format!("Basic realm=\"{realm}\""));
        }
        all.join(", ")
    }

    /// Checks a request for a mount that is not public.
    pub fn check(&self, req: &Asking<'_>) -> Verdict {
        let Some(header) = req.authorization else {
            return Verdict::Challenge {
                reason: format!("{} needs a user name and password", req.mount),
                stale: false,
                failed: false,
            };
        };
        let header = header.trim();
        let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
        if scheme.eq_ignore_ascii_case("Basic") && !req.secure {
            return Verdict::wrong(
                "Basic would send the password in clear, and this connection is not TLS: \
                 answer the Digest challenge",
            );
        }
        if scheme.eq_ignore_ascii_case("Basic") {
            return match self.basic(rest) {
                Some(user) if user.may_play(req.mount) => Verdict::Pass(user.name.clone()),
                Some(user) => {
                    Verdict::Forbidden(format!("user {} may not play {}", user.name, req.mount))
                }
                None => Verdict::wrong("wrong user name or password"),
            };
        }
        if !scheme.eq_ignore_ascii_case("Digest") {
            return Verdict::wrong(format!(
                "unknown authentication scheme '{}': answer the Digest challenge",
                scheme.escape_debug()
            ));
        }
        let Some(answer) = DigestAnswer::parse(rest) else {
            return Verdict::wrong("malformed Digest answer");
        };
        let user = match self.verify(req, &answer) {
            Ok(user) => user,
            Err(verdict) => return verdict,
        };
        if !user.may_play(req.mount) {
            return Verdict::Forbidden(format!("user {} may not play {}", user.name, req.mount));
        }
        Verdict::Pass(user.name.clone())
    }

    /// The user whose Basic credentials (`base64(user:password)`) these are, checked against
    /// the stored hash (SHA-256 where there is one).
    fn basic(&self, token: &str) -> Option<&RtspUser> {
        use base64::Engine;
        let token = token.trim();
        if token.len() > 1024 {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(token)
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (name, password) = text.split_once(':')?;
        // Hashed whether or not the user exists, so that both take the same time.
        let user = self.spec.user(name);
        let alg = match user {
            Some(u) if u.sha256.is_none() => Algorithm::Md5,
            _ => Algorithm::Sha256,
        };
        let given = ha1(alg, name, &self.spec.realm, password);
        let user = user?;
        let stored = alg.stored(user)?;
        same(stored.as_bytes(), given.as_bytes()).then_some(user)
    }

    /// The user a right answer names, or the 401 to send.
    fn verify(&self, req: &Asking<'_>, a: &DigestAnswer<'_>) -> Result<&RtspUser, Verdict> {
        let (Some(username), Some(realm), Some(nonce), Some(uri), Some(response)) =
            (a.username, a.realm, a.nonce, a.uri, a.response)
        else {
            return Err(Verdict::wrong(
                "the Digest answer lacks username, realm, nonce, uri or response",
            ));
        };
        if realm != self.spec.realm {
            return Err(Verdict::wrong(format!(
                "the answer is for realm '{}', not '{}'",
                realm.escape_debug(),
                self.spec.realm
            )));
        }
        let Some(alg) = Algorithm::from_answer(a.algorithm).filter(|x| self.offered.contains(x))
        else {
            return Err(Verdict::wrong("the answer's algorithm was not offered"));
        };
        if !uri_names(uri, req.url) {
            return Err(Verdict::wrong("the answer's uri is not the request's URL"));
        }
        let Some(qop_part) = a.qop_part() else {
            return Err(Verdict::wrong(
                "qop must be auth, with an 8-digit nc and a cnonce",
            ));
        };
        // Unknown users are checked against a made-up hash, so that they take the same time.
        let user = self.spec.user(username);
        let stored = user
            .and_then(|u| alg.stored(u))
            .unwrap_or_else(|| alg.hex(&[b"no such user"]));
        let ha2 = alg.hex(&[req.method.as_bytes(), uri.as_bytes()]);
        let mut parts: Vec<&[u8]> = vec![stored.as_bytes(), nonce.as_bytes()];
        parts.extend(qop_part.iter().map(|p| p.as_bytes()));
        parts.push(ha2.as_bytes());
        let expected = alg.hex(&parts);
        let right = same(
            expected.as_bytes(),
            response.to_ascii_lowercase().as_bytes(),
        );
        let user = match user {
            Some(u) if right && alg.stored(u).is_some() => u,
            _ => return Err(Verdict::wrong("wrong user name or password")),
        };
        let keeps = req.session_user == Some(user.name.as_str());
        match self.nonce_age(nonce, req.now, req.peer) {
            Some(age) if age <= NONCE_LIFETIME || keeps => Ok(user),
            _ => Err(Verdict::Challenge {
                reason: "the nonce is too old or not this server's: answer the new one".into(),
                stale: true,
                failed: false,
            }),
        }
    }

    /// A nonce: when it was made (ms on the server's clock) and its HMAC with the address.
    fn nonce(&self, now: Timestamp, peer: IpAddr) -> String {
        let t = now.as_nanos() / 1_000_000;
        format!("{}{}", hex(&t.to_be_bytes()), hex(&self.mac(t, peer)))
    }

    /// How old a nonce of ours given to `peer` is; `None` if it is not one.
    fn nonce_age(&self, nonce: &str, now: Timestamp, peer: IpAddr) -> Option<Duration> {
        if nonce.len() != 48 || !nonce.is_ascii() {
            return None;
        }
        let t = u64::from_str_radix(&nonce[..16], 16).ok()?;
        if !same(hex(&self.mac(t, peer)).as_bytes(), &nonce.as_bytes()[16..]) {
            return None;
        }
        let now_ms = now.as_nanos() / 1_000_000;
        now_ms.checked_sub(t).map(Duration::from_millis)
    }

    fn mac(&self, t: u64, peer: IpAddr) -> [u8; 16] {
        let ip = match peer {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key) else {
            unreachable!("HMAC takes a key of any length");
        };
        mac.update(&t.to_be_bytes());
        mac.update(&ip.octets());
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }
}

/// The auth-params of a Digest answer this server reads (RFC 7616 §3.4).
#[derive(Debug, Default)]
struct DigestAnswer<'a> {
    username: Option<&'a str>,
    realm: Option<&'a str>,
    nonce: Option<&'a str>,
    uri: Option<&'a str>,
    response: Option<&'a str>,
    algorithm: Option<&'a str>,
    qop: Option<&'a str>,
    nc: Option<&'a str>,
    cnonce: Option<&'a str>,
}

impl<'a> DigestAnswer<'a> {
    /// The answer's parameters; `None` if malformed (see [`auth_params`]) or a key is given
    /// twice.
    fn parse(text: &'a str) -> Option<Self> {
        let mut a = DigestAnswer::default();
        for (key, value) in auth_params(text)? {
            if !a.set(key, value) {
                return None;
            }
        }
        Some(a)
    }

    /// Keeps one parameter; `false` if it was already given.
    fn set(&mut self, key: &str, value: &'a str) -> bool {
        let slot = match key.to_ascii_lowercase().as_str() {
            "username" => &mut self.username,
            "realm" => &mut self.realm,
            "nonce" => &mut self.nonce,
            "uri" => &mut self.uri,
            "response" => &mut self.response,
            "algorithm" => &mut self.algorithm,
            "qop" => &mut self.qop,
            "nc" => &mut self.nc,
            "cnonce" => &mut self.cnonce,
            _ => return true, // opaque, userhash=false and extensions: not used
        };
        slot.replace(value).is_none()
    }

    /// What goes between the nonce and `H(A2)`: `nc:cnonce:qop` with `qop=auth`, nothing for
    /// an RFC 2069 answer; `None` for anything else.
    fn qop_part(&self) -> Option<Vec<&'a str>> {
        match (self.qop, self.nc, self.cnonce) {
            (None, None, None) => Some(Vec::new()),
            (Some(q), Some(nc), Some(cn)) if q.eq_ignore_ascii_case("auth") => {
                let nc_ok = nc.len() == 8 && nc.bytes().all(|b| b.is_ascii_hexdigit());
                (nc_ok && !cn.is_empty()).then(|| vec![nc, cn, q])
            }
            _ => None,
        }
    }
}

/// `key=token` or `key="quoted"` pairs separated by commas (RFC 7235's auth-params). `None`
/// if malformed, more than [`MAX_PARAMS`], or a quoted value with an escape (none of Digest's
/// needs one).
pub(super) fn auth_params(text: &str) -> Option<Vec<(&str, &str)>> {
    let mut out = Vec::new();
    let mut rest = text;
    for _ in 0..MAX_PARAMS {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return Some(out);
        }
        let (key, after) = rest.split_once('=')?;
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(q) => {
                let end = q.find('"')?;
                (&q[..end], &q[end + 1..])
            }
            None => {
                let end = after.find([',', ' ', '\t']).unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        if value.contains('\\') {
            return None;
        }
        out.push((key.trim(), value));
        rest = next;
    }
    rest.trim_start_matches([' ', '\t', ','])
        .is_empty()
        .then_some(out)
}

/// Whether an answer's `uri` names the request's URL: the same absolute URL, or its path.
fn uri_names(uri: &str, url: &Url) -> bool {
    if uri == url.as_str() || Url::parse(uri).is_ok_and(|u| u == *url) {
        return true;
    }
    let path_query = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    uri == path_query
}

/// Byte strings compared in time that depends only on their lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests;
