//! SRTP and SRTCP (RFC 3711) with the AES_CM_128_HMAC_SHA1_80 suite, and its keys as SDP
//! carries them (RFC 4568 SDES: `a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:KEY`). Sans-IO: a
//! packet in, the protected or recovered packet out. The cipher is `rtc-srtp`'s.
//!
//! One [`Srtp`] per direction and kind of packet keeps the state RFC 3711 asks for: the
//! rollover counter of each SSRC on the RTP side, the SRTCP index on the RTCP side, and a
//! replay window for what comes in.

use base64::Engine;
use rtc_srtp::context::Context;
use rtc_srtp::option;
use rtc_srtp::protection_profile::ProtectionProfile;

/// The one suite spoken (RFC 4568 §6.2.1; the mandatory one of RFC 3711).
pub const SUITE: &str = "AES_CM_128_HMAC_SHA1_80";
/// Master key (16 bytes) and master salt (14 bytes), as SDES carries them.
pub const KEY_LEN: usize = 30;
/// The authentication tag of the suite (80 bits).
const SRTCP_TAG_LEN: usize = 10;
/// Packets behind the newest that may still arrive (RFC 3711 §3.3.2 asks for at least 64).
const REPLAY_WINDOW: usize = 1024;

/// An SRTP master key and salt.
#[derive(Clone, PartialEq, Eq)]
pub struct SrtpKey([u8; KEY_LEN]);

impl std::fmt::Debug for SrtpKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SrtpKey(…)")
    }
}

/// What is wrong with a key or a packet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SrtpError {
    /// The key text is not base64, or not 30 bytes; or `rtc-srtp` refused the key.
    #[error(
        "an SRTP key is {KEY_LEN} bytes (16 of key, 14 of salt) in base64, 40 characters; {0}"
    )]
    BadKey(String),
    /// An `a=crypto` value this side cannot use: another suite, no `inline:` key, or a key
    /// lifetime or MKI.
    #[error("a=crypto: {0}")]
    BadCrypto(String),
    /// A packet could not be protected or unprotected: it did not authenticate (another key,
    /// forged, damaged), was replayed, or is not SRTP or SRTCP at all.
    #[error("SRTP: {0}")]
    Packet(String),
}

impl SrtpKey {
    /// A key from its 30 raw bytes: 16 of master key, then 14 of master salt.
    pub fn new(bytes: [u8; KEY_LEN]) -> Self {
        SrtpKey(bytes)
    }

    /// A key from its base64 text (what FFmpeg's `-srtp_out_params` takes).
    pub fn from_base64(text: &str) -> Result<Self, SrtpError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| SrtpError::BadKey(format!("this is not base64 ({e})")))?;
        let bytes: [u8; KEY_LEN] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| SrtpError::BadKey(format!("this is {} bytes", b.len())))?;
        Ok(SrtpKey(bytes))
    }

    /// The key as standard base64 with padding (40 characters), as SDES's `inline:` carries it.
    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.0)
    }

    /// The value of an `a=crypto` attribute for it: `1 AES_CM_128_HMAC_SHA1_80 inline:KEY`.
    pub fn crypto_attribute(&self) -> String {
        format!("1 {SUITE} inline:{}", self.to_base64())
    }

    /// The key of an `a=crypto` value; the suite must be [`SUITE`], with one inline key and
    /// no lifetime or MKI that this side would have to honour.
    pub fn from_crypto_attribute(value: &str) -> Result<Self, SrtpError> {
        let bad = |m: &str| SrtpError::BadCrypto(format!("{m} (in '{}')", value.escape_debug()));
        let mut words = value.split_whitespace();
        let (_tag, suite, params) = (words.next(), words.next(), words.next());
        if suite != Some(SUITE) {
            return Err(bad(&format!("only the {SUITE} suite is supported")));
        }
        let inline = params
            .and_then(|p| p.strip_prefix("inline:"))
            .ok_or_else(|| bad("no inline: key"))?;
        if inline.contains(['|', ';']) {
            return Err(bad("key lifetimes and MKIs are not supported"));
        }
        Self::from_base64(inline)
    }
}

/// One direction's SRTP or SRTCP state.
pub struct Srtp {
    ctx: Context,
}

impl std::fmt::Debug for Srtp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Srtp")
    }
}

impl Srtp {
    /// A fresh context for `key` (the suite's session keys derived from it, RFC 3711 §4.3), with
    /// 1024-packet replay windows.
    pub fn new(key: &SrtpKey) -> Result<Self, SrtpError> {
        let crypto = rtc_srtp::crypto::providers::RingCrypto;
        let ctx = Context::new(
            &key.0[..16],
            &key.0[16..],
            ProtectionProfile::Aes128CmHmacSha1_80,
            Some(option::srtp_replay_protection(REPLAY_WINDOW)),
            Some(option::srtcp_replay_protection(REPLAY_WINDOW)),
            &crypto,
        )
        .map_err(|e| SrtpError::BadKey(e.to_string()))?;
        Ok(Srtp { ctx })
    }

    /// Protects one RTP packet into `out` (10 bytes longer: the authentication tag).
    pub fn protect_rtp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        let p = self.ctx.encrypt_rtp(packet).map_err(packet_error)?;
        out.clear();
        out.extend_from_slice(&p);
        Ok(())
    }

    /// Checks and decrypts one SRTP packet into `out`; a forged, damaged or replayed packet
    /// is an error.
    pub fn unprotect_rtp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        let p = self.ctx.decrypt_rtp(packet).map_err(packet_error)?;
        out.clear();
        out.extend_from_slice(&p);
        Ok(())
    }

    /// Protects one compound RTCP packet (SRTCP: encrypted, indexed, authenticated).
    pub fn protect_rtcp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        let p = self.ctx.encrypt_rtcp(packet).map_err(packet_error)?;
        out.clear();
        out.extend_from_slice(&p);
        Ok(())
    }

    /// Checks and decrypts one SRTCP packet. One whose E flag says it is not encrypted is
    /// refused: rtc-srtp 0.21 returns such a packet without checking its authentication tag
    /// (RFC 3711 §3.4 authenticates every SRTCP packet), so a forged one would pass. Every
    /// sender here (Metronome, FFmpeg, libsrtp's users) encrypts SRTCP.
    pub fn unprotect_rtcp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        let e_flag = packet
            .len()
            .checked_sub(SRTCP_TAG_LEN + 4)
            .filter(|&at| at >= 8)
            .map(|at| packet[at] & 0x80 != 0);
        if e_flag != Some(true) {
            return Err(SrtpError::Packet(
                "not an encrypted SRTCP packet (unencrypted SRTCP is refused)".into(),
            ));
        }
        let p = self.ctx.decrypt_rtcp(packet).map_err(packet_error)?;
        out.clear();
        out.extend_from_slice(&p);
        Ok(())
    }
}

/// A receiver's SRTP: RTP and SRTCP in, its own reports out as SRTCP, with what did not
/// authenticate counted (and dropped by the caller).
pub struct ReceiverSrtp {
    rtp: Srtp,
    rtcp_in: Srtp,
    rtcp_out: Srtp,
    buf: Vec<u8>,
    /// Datagrams (RTP and RTCP) that did not authenticate: another key, forged, damaged,
    /// replayed, or not SRTP at all.
    pub rejected: u64,
}

impl std::fmt::Debug for ReceiverSrtp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiverSrtp")
            .field("rejected", &self.rejected)
            .finish_non_exhaustive()
    }
}

impl ReceiverSrtp {
    /// The three contexts (RTP in, SRTCP in, SRTCP out) for `key`, nothing rejected yet.
    pub fn new(key: &SrtpKey) -> Result<Self, SrtpError> {
        Ok(ReceiverSrtp {
            rtp: Srtp::new(key)?,
            rtcp_in: Srtp::new(key)?,
            rtcp_out: Srtp::new(key)?,
            buf: Vec::with_capacity(2048),
            rejected: 0,
        })
    }

    /// The RTP packet an SRTP datagram holds; `None` (counted) if it does not authenticate.
    pub fn rtp(&mut self, datagram: &[u8]) -> Option<&[u8]> {
        let ok = self.rtp.unprotect_rtp(datagram, &mut self.buf).is_ok();
        self.kept(ok)
    }

    /// The RTCP an SRTCP datagram holds; `None` (counted) if it does not authenticate.
    pub fn rtcp_in(&mut self, datagram: &[u8]) -> Option<&[u8]> {
        let ok = self.rtcp_in.unprotect_rtcp(datagram, &mut self.buf).is_ok();
        self.kept(ok)
    }

    /// This receiver's report as SRTCP.
    pub fn rtcp_out(&mut self, report: &[u8]) -> Option<&[u8]> {
        self.rtcp_out.protect_rtcp(report, &mut self.buf).ok()?;
        Some(&self.buf)
    }

    fn kept(&mut self, ok: bool) -> Option<&[u8]> {
        if ok {
            Some(&self.buf)
        } else {
            self.rejected += 1;
            None
        }
    }
}

fn packet_error(e: impl std::fmt::Display) -> SrtpError {
    SrtpError::Packet(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtp(seq: u16) -> Vec<u8> {
        let mut p = vec![0x80, 33, 0, 0, 0, 0, 0, 1, 0x12, 0x34, 0x56, 0x78];
        p[2..4].copy_from_slice(&seq.to_be_bytes());
        p.extend(std::iter::repeat_n(0x47, 188));
        p
    }

    #[test]
    fn a_packet_goes_through_and_a_forged_one_does_not() {
        let key = SrtpKey::new([9; KEY_LEN]);
        let (mut tx, mut rx) = (Srtp::new(&key).unwrap(), Srtp::new(&key).unwrap());
        let (mut wire, mut back) = (Vec::new(), Vec::new());
        for seq in [65534, 65535, 0, 1] {
            tx.protect_rtp(&rtp(seq), &mut wire).unwrap();
            assert_eq!(wire.len(), rtp(seq).len() + 10);
            assert_ne!(wire[12..200], rtp(seq)[12..200], "the payload is encrypted");
            rx.unprotect_rtp(&wire, &mut back).unwrap();
            assert_eq!(back, rtp(seq));
        }
        assert!(rx.unprotect_rtp(&wire, &mut back).is_err(), "a replay");
        tx.protect_rtp(&rtp(2), &mut wire).unwrap();
        wire[30] ^= 1;
        assert!(rx.unprotect_rtp(&wire, &mut back).is_err(), "a flipped bit");
        let other = Srtp::new(&SrtpKey::new([8; KEY_LEN])).unwrap();
        let mut other = other;
        tx.protect_rtp(&rtp(3), &mut wire).unwrap();
        assert!(
            other.unprotect_rtp(&wire, &mut back).is_err(),
            "another key"
        );
        assert!(rx.unprotect_rtp(&wire[..8], &mut back).is_err(), "a stub");
    }

    #[test]
    fn rtcp_goes_through_srtcp() {
        let key = SrtpKey::new([5; KEY_LEN]);
        let (mut tx, mut rx) = (Srtp::new(&key).unwrap(), Srtp::new(&key).unwrap());
        // An empty receiver report from SSRC 0x01020304.
        let rr = [0x80, 201, 0, 1, 1, 2, 3, 4];
        let (mut wire, mut back) = (Vec::new(), Vec::new());
        tx.protect_rtcp(&rr, &mut wire).unwrap();
        assert_eq!(
            wire.len(),
            rr.len() + 4 + 10,
            "E flag and index, then the tag"
        );
        rx.unprotect_rtcp(&wire, &mut back).unwrap();
        assert_eq!(back, rr);
    }

    #[test]
    fn unencrypted_srtcp_is_refused_whatever_its_tag() {
        // What the fuzzer found: an RTCP header, the E flag clear, index 0, ten bytes of "tag".
        let forged = [
            0x8f, 0x21, 0x00, 0x01, 0x1b, 0x0c, 0x8f, 0x21, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0x12, 0x34,
        ];
        let mut rx = Srtp::new(&SrtpKey::new([0x5a; KEY_LEN])).unwrap();
        assert!(rx.unprotect_rtcp(&forged, &mut Vec::new()).is_err());
        let mut r = ReceiverSrtp::new(&SrtpKey::new([0x5a; KEY_LEN])).unwrap();
        assert!(r.rtcp_in(&forged).is_none());
        assert_eq!(r.rejected, 1);
    }

    #[test]
    fn keys_as_sdp_carries_them() {
        let key = SrtpKey::new(*b"0123456789abcdefghijklmnopqrst");
        let attr = key.crypto_attribute();
        assert_eq!(
            attr,
            "1 AES_CM_128_HMAC_SHA1_80 inline:MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1ub3BxcnN0"
        );
        assert_eq!(SrtpKey::from_crypto_attribute(&attr).unwrap(), key);
        for bad in [
            "1 AES_CM_128_HMAC_SHA1_32 inline:MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1ub3BxcnN0",
            "1 AES_CM_128_HMAC_SHA1_80 inline:MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1ub3BxcnN0|2^20",
            "1 AES_CM_128_HMAC_SHA1_80 inline:c2hvcnQ=",
            "1 AES_CM_128_HMAC_SHA1_80",
            "",
        ] {
            assert!(SrtpKey::from_crypto_attribute(bad).is_err(), "{bad}");
        }
        assert!(!format!("{key:?}").contains("MDEy"));
    }
}
