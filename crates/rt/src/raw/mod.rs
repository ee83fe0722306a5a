//! The drivers of uncompressed video (RFC 4175) at Gbit/s rates.
//!
//! ```text
//!  producer thread (ordinary)              pacing thread (SCHED_FIFO where permitted)
//!  RawSource ─► RawPayloader ─► FrameRing ─► FrameSchedule.send_time(epoch, k)
//!  (frame n at   (all packets of   (a few      Waiter: sleep then spin (or busy-poll)
//!   its epoch,    the frame, one    pre-        FastSender: one GSO send per batch
//!   capture time  buffer, padded    allocated   (burst: the whole frame at once)
//!   = the epoch)  to equal size)    frames)     lateness per packet, per batch, per frame
//! ```
//!
//! - [`sender`]: [`RawSender`]: a [`metronome_media::raw::RawSource`] paced to one destination
//!   under one of the ST 2110-21 sender models or as a whole-frame burst. Frame `n` has its epoch
//!   at `epoch0 + n × TFRAME`; its capture time (the RTP header extension element
//!   `wire::rfc4175::CAPTURE_TIME_EXT_ID`) is that epoch's wall-clock time. A live source (the
//!   test pattern) is produced just before its epoch, as a camera delivers frames; a file is
//!   read ahead by up to the ring's size.
//! - [`receiver`]: [`RawReceiver`]: GRO + `recvmmsg` into [`metronome_session::raw::RawDepayloader`];
//!   per frame: latency (completion − capture time), spread (last − first arrival), ST 2110-21
//!   conformance, and optional Y4M output (a writer thread, [`output`]).
//! - [`ring`]: the frame ring between producer and pacer.
//! - [`report`]: what runs measured, serializable to JSON.
//!
//! Packets of a frame are padded (RFC 3550 §5.1 padding) to one size, so that every batch is a
//! run of equal datagrams that one UDP GSO `sendmsg` carries (the payloader's packets differ by a
//! few bytes where lines end). Receivers drop the padding (`rtp-types`, GStreamer, FFmpeg).

pub mod output;
pub mod pacer;
pub mod receiver;
pub mod report;
pub mod ring;
pub mod sender;

pub use receiver::{RawReceiver, RawReceiverConfig, RawRecvError};
pub use report::{BufferInfo, LatencyUs, RawReceiverOutcome, RawSenderOutcome, RawSenderStatus};
pub use sender::{RawSendError, RawSender, RawSenderConfig};

use metronome_sched::SenderType;

/// The command-line name of a sender model (`burst`, `narrow-gapped`, `narrow-linear`, `wide`).
pub fn model_name(m: SenderType) -> &'static str {
    match m {
        SenderType::Burst => "burst",
        SenderType::NarrowGapped => "narrow-gapped",
        SenderType::NarrowLinear => "narrow-linear",
        SenderType::Wide => "wide",
    }
}

/// Parses a model name as [`model_name`] writes it, or an SDP `TP=` value (`2110TPN`,
/// `2110TPNL`, `2110TPW`).
pub fn parse_model(s: &str) -> Option<SenderType> {
    match s.trim().to_ascii_lowercase().as_str() {
        "burst" => Some(SenderType::Burst),
        "narrow-gapped" | "narrow_gapped" | "narrow" | "2110tpn" => Some(SenderType::NarrowGapped),
        "narrow-linear" | "narrow_linear" | "2110tpnl" => Some(SenderType::NarrowLinear),
        "wide" | "2110tpw" => Some(SenderType::Wide),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_round_trip() {
        for m in [
            SenderType::Burst,
            SenderType::NarrowGapped,
            SenderType::NarrowLinear,
            SenderType::Wide,
        ] {
            assert_eq!(parse_model(model_name(m)), Some(m));
            if let Some(tp) = m.sdp_tp() {
                assert_eq!(parse_model(tp), Some(m));
            }
        }
        assert_eq!(parse_model("fast"), None);
    }

    /// The two drivers on loopback, in one process: every frame arrives complete, with its
    /// capture time, and the sender's counts match the receiver's.
    #[test]
    fn sender_to_receiver_on_loopback() {
        use crate::sender::WaitPolicy;
        use crate::thread::RtPolicy;
        use crate::url::RtpUrl;
        use metronome_media::raw::{Depth, RawTestPattern, Sampling, VideoFormat};
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        use std::time::Duration;

        let f = VideoFormat::new(64, 48, Sampling::Ycbcr422, Depth::Ten, 100, 1).unwrap();
        let any = RtpUrl::unicast(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let mut rcfg = RawReceiverConfig::new(any, f);
        rcfg.frames = Some(20);
        rcfg.duration = Some(Duration::from_secs(10));
        rcfg.rt_policy = RtPolicy::Other;
        let rx = RawReceiver::open(rcfg).unwrap();
        let port = rx.local_addr().unwrap().port();
        let stop = AtomicBool::new(false);
        let dest = RtpUrl::parse_destination(&format!("rtp://127.0.0.1:{port}")).unwrap();
        let mut cfg = RawSenderConfig::new(dest, 7, 99);
        cfg.frames = Some(20);
        cfg.max_payload = 300;
        cfg.rt_policy = RtPolicy::Other;
        cfg.lock_memory = false;
        cfg.wait = WaitPolicy::SleepSpin;
        let src = Box::new(RawTestPattern::new(f).unwrap());
        let sender = RawSender::open(src, cfg).unwrap();
        let (s, r) = std::thread::scope(|scope| {
            let r = scope.spawn(|| rx.run(&stop, |_| {}));
            let s = sender.run(Arc::new(AtomicBool::new(false)), |_| {});
            (s.unwrap(), r.join().unwrap().unwrap())
        });
        assert_eq!(
            (s.frames_sent, s.ended_by, s.send_errors),
            (20, "frames", 0)
        );
        assert_eq!(s.model, "narrow-gapped");
        assert_eq!(
            (r.frames_complete, r.frames_partial, r.frames_lost),
            (20, 0, 0),
            "{r:?}"
        );
        assert_eq!(r.packets, s.packets_sent);
        assert_eq!(r.latency_us.count, 20);
        assert_eq!(r.drops.total_malformed, 0);
        assert!(r.conformance.is_some());
    }
}
