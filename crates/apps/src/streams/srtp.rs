//! A stream's SRTP (RFC 3711, `metronome_session::srtp`): the pacing thread protects each
//! packet once, for every destination; the RTCP thread protects the sender reports (SRTCP) and
//! checks what receivers send, dropping and counting what does not authenticate.

use metronome_session::srtp::{Srtp, SrtpError, SrtpKey};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use metronome_rt::sync::lock;

pub struct StreamSrtp {
    /// Locked by the pacing thread for each packet (nobody else takes it).
    rtp: Mutex<Protecting>,
    rtcp_out: Mutex<Srtp>,
    rtcp_in: Mutex<Srtp>,
    /// Receiver reports that did not authenticate (wrong key, forged, replayed, plain RTCP).
    pub rejected: AtomicU64,
}

struct Protecting {
    srtp: Srtp,
    /// The protected packet, reused (the pacing thread allocates no buffer of its own).
    buf: Vec<u8>,
}

impl StreamSrtp {
    pub fn new(key: &SrtpKey) -> Result<Self, SrtpError> {
        Ok(StreamSrtp {
            rtp: Mutex::new(Protecting {
                srtp: Srtp::new(key)?,
                buf: Vec::with_capacity(2048),
            }),
            rtcp_out: Mutex::new(Srtp::new(key)?),
            rtcp_in: Mutex::new(Srtp::new(key)?),
            rejected: AtomicU64::new(0),
        })
    }

    /// Protects one RTP packet and hands it to `send`; `None` if it could not be protected
    /// (after 2^48 packets under one key).
    pub fn protect_rtp<R>(&self, packet: &[u8], send: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let mut p = lock(&self.rtp);
        let Protecting { srtp, buf } = &mut *p;
        srtp.protect_rtp(packet, buf).ok()?;
        Some(send(buf))
    }

    /// A compound RTCP packet as SRTCP.
    pub fn protect_rtcp(&self, packet: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(packet.len() + 16);
        lock(&self.rtcp_out).protect_rtcp(packet, &mut out).ok()?;
        Some(out)
    }

    /// What a receiver sent, checked and decrypted; `None` (counted) if it does not
    /// authenticate.
    pub fn unprotect_rtcp(&self, packet: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(packet.len());
        match lock(&self.rtcp_in).unprotect_rtcp(packet, &mut out) {
            Ok(()) => Some(out),
            Err(_) => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}
