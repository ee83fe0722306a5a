//! Who may play which RTSP mount: the `[rtsp_auth]` table of the `serve` config.
//!
//! ```toml
//! [rtsp_auth]
//! realm = "metronome"            # the Digest realm; the hashes below are made with it
//! public = ["lobby"]             # mounts anyone may play (default: none)
//!
//! [[rtsp_auth.user]]
//! name = "alice"
//! md5 = "…32 hex digits…"        # MD5(name:realm:password), as `metronome passwd` prints it
//! sha256 = "…64 hex digits…"     # SHA-256(name:realm:password)
//! mounts = ["cam1"]              # what alice may play (default: every mount)
//! ```
//!
//! Passwords are never stored, only Digest's `H(A1)` (RFC 7616 §3.4.2), the same thing an
//! Apache `htdigest` file keeps: enough to check a Digest answer, and a password sent with Basic
//! over TLS, without knowing it. A hash is tied to its realm: change the realm, make them again.

use serde::Deserialize;
use std::collections::HashSet;

/// The `[rtsp_auth]` table, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtspAuthSpec {
    /// The protection space, sent in every challenge and part of every hash.
    pub realm: String,
    /// Mounts anyone may play without credentials.
    pub public: Vec<String>,
    /// The `[[rtsp_auth.user]]` entries, in file order.
    pub users: Vec<RtspUser>,
}

/// One user: a name and the hashes of its password under each algorithm it may use.
#[derive(Clone, PartialEq, Eq)]
pub struct RtspUser {
    /// The user name a client sends (Digest's `username`), also part of every hash.
    pub name: String,
    /// `MD5(name:realm:password)`.
    pub md5: Option<[u8; 16]>,
    /// `SHA-256(name:realm:password)`.
    pub sha256: Option<[u8; 32]>,
    /// The mounts the user may play; `None`: every mount.
    pub mounts: Option<Vec<String>>,
}

impl std::fmt::Debug for RtspUser {
    /// Without the hashes: they stand for the password (a Digest answer needs only them).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RtspUser")
            .field("name", &self.name)
            .field("md5", &self.md5.map(|_| "…"))
            .field("sha256", &self.sha256.map(|_| "…"))
            .field("mounts", &self.mounts)
            .finish()
    }
}

impl RtspAuthSpec {
    /// The user named `name`.
    pub fn user(&self, name: &str) -> Option<&RtspUser> {
        self.users.iter().find(|u| u.name == name)
    }

    /// Whether `mount` may be played without credentials.
    pub fn is_public(&self, mount: &str) -> bool {
        self.public.iter().any(|m| m == mount)
    }

    /// Every mount name the table mentions (public ones and users' lists), with where.
    pub fn named_mounts(&self) -> impl Iterator<Item = (&str, String)> {
        let public = self
            .public
            .iter()
            .map(|m| (m.as_str(), "public".to_string()));
        let users = self.users.iter().flat_map(|u| {
            u.mounts
                .iter()
                .flatten()
                .map(move |m| (m.as_str(), format!("user '{}'", u.name)))
        });
        public.chain(users)
    }
}

impl RtspUser {
    /// Whether this user may play `mount`.
    pub fn may_play(&self, mount: &str) -> bool {
        self.mounts
            .as_ref()
            .is_none_or(|list| list.iter().any(|m| m == mount))
    }
}

/// The default realm.
pub const DEFAULT_REALM: &str = "metronome";
/// The most users one config may declare.
pub const MAX_USERS: usize = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileRtspAuth {
    #[serde(default)]
    realm: Option<String>,
    #[serde(default)]
    public: Vec<String>,
    #[serde(default)]
    user: Vec<FileUser>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileUser {
    name: String,
    #[serde(default)]
    md5: Option<String>,
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default)]
    mounts: Option<Vec<String>>,
}

impl FileRtspAuth {
    /// Checks the table; the error says what to change.
    pub(crate) fn check(self) -> Result<RtspAuthSpec, String> {
        let realm = self.realm.unwrap_or_else(|| DEFAULT_REALM.to_string());
        quotable("realm", &realm)?;
        if self.user.is_empty() && self.public.is_empty() {
            return Err(
                "[rtsp_auth] has no user and no public mount, so nobody could play \
                anything: add a [[rtsp_auth.user]] (made by `metronome passwd NAME`)"
                    .into(),
            );
        }
        if self.user.len() > MAX_USERS {
            return Err(format!(
                "[rtsp_auth] declares {} users; at most {MAX_USERS} fit",
                self.user.len()
            ));
        }
        let mut names = HashSet::new();
        let mut users = Vec::with_capacity(self.user.len());
        for u in self.user {
            let user = u.check()?;
            if !names.insert(user.name.clone()) {
                return Err(format!(
                    "a second [[rtsp_auth.user]] is named '{}'; user names must be unique",
                    user.name
                ));
            }
            users.push(user);
        }
        Ok(RtspAuthSpec {
            realm,
            public: self.public,
            users,
        })
    }
}

impl FileUser {
    fn check(self) -> Result<RtspUser, String> {
        quotable("a user's name", &self.name)?;
        if self.name.contains(':') {
            return Err(format!(
                "user name '{}' has a ':', which Digest and Basic cannot carry; rename it",
                self.name
            ));
        }
        let who = format!("user '{}'", self.name);
        let md5 = self
            .md5
            .as_deref()
            .map(|h| hex::<16>(&who, "md5", h))
            .transpose()?;
        let sha256 = self
            .sha256
            .as_deref()
            .map(|h| hex::<32>(&who, "sha256", h))
            .transpose()?;
        if md5.is_none() && sha256.is_none() {
            return Err(format!(
                "{who} has no password hash: add the md5 and sha256 lines that \
                 `metronome passwd {}` prints",
                self.name
            ));
        }
        Ok(RtspUser {
            name: self.name,
            md5,
            sha256,
            mounts: self.mounts,
        })
    }
}

/// A value that goes between quotes in a challenge: 1 to 64 printable ASCII characters, no `"`
/// or `\`.
fn quotable(what: &str, s: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} '{}' must be 1 to 64 printable ASCII characters without '\"' or '\\'",
            s.escape_debug()
        ))
    }
}

/// `N` bytes written as `2N` hex digits.
fn hex<const N: usize>(who: &str, key: &str, text: &str) -> Result<[u8; N], String> {
    let bad = || {
        format!(
            "{who}: {key} must be {} hex digits, as `metronome passwd` prints it",
            2 * N
        )
    };
    let text = text.trim();
    if text.len() != 2 * N || !text.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RtspAuthSpec, String> {
        let raw: FileRtspAuth = toml::from_str(text).map_err(|e| e.to_string())?;
        raw.check()
    }

    const MD5: &str = "939e7578ed9e3c518a452acee763bce9";

    #[test]
    fn a_user_with_a_hash_and_mounts() {
        let spec = parse(&format!(
            "realm = \"cams\"\npublic = [\"lobby\"]\n[[user]]\nname = \"alice\"\nmd5 = \"{MD5}\"\nmounts = [\"cam1\"]\n"
        ))
        .unwrap();
        assert_eq!(spec.realm, "cams");
        let alice = spec.user("alice").unwrap();
        assert_eq!(alice.md5.unwrap()[0], 0x93);
        assert!(alice.sha256.is_none());
        assert!(alice.may_play("cam1") && !alice.may_play("cam2"));
        assert!(spec.is_public("lobby") && !spec.is_public("cam1"));
        assert!(
            !format!("{alice:?}").contains("939e"),
            "Debug hides the hash"
        );
    }

    #[test]
    fn mistakes_are_refused_with_what_to_do() {
        let no_hash = parse("[[user]]\nname = \"bob\"\n").unwrap_err();
        assert!(no_hash.contains("metronome passwd bob"), "{no_hash}");
        let short = parse("[[user]]\nname = \"bob\"\nmd5 = \"abc\"\n").unwrap_err();
        assert!(short.contains("32 hex digits"), "{short}");
        let colon = parse(&format!("[[user]]\nname = \"a:b\"\nmd5 = \"{MD5}\"\n")).unwrap_err();
        assert!(colon.contains("':'"), "{colon}");
        let twice = parse(&format!(
            "[[user]]\nname = \"a\"\nmd5 = \"{MD5}\"\n[[user]]\nname = \"a\"\nmd5 = \"{MD5}\"\n"
        ))
        .unwrap_err();
        assert!(twice.contains("unique"), "{twice}");
        let empty = parse("realm = \"x\"\n").unwrap_err();
        assert!(empty.contains("nobody could play"), "{empty}");
        let quote = parse("realm = \"a\\\"b\"\npublic = [\"x\"]\n").unwrap_err();
        assert!(quote.contains("realm"), "{quote}");
    }
}
