//! A receiver fed datagrams some other way than its own UDP sockets: RTP and RTCP interleaved
//! on an RTSP connection (RFC 2326 §10.12).

use super::output::{open_outputs, record, write_err};
use super::{ReceiverOutcome, ReceiverRunConfig, RecvError};
use metronome_rt::clock::Clock;
use metronome_rt::host::HostWatch;
use metronome_rt::run::{EndedBy, RunLimit};
use metronome_session::receiver::ReceiverSession;
use metronome_time::Micros;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What a [`DatagramSource`] had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// An RTP datagram of this many bytes, copied into the buffer.
    Rtp(usize),
    /// An RTCP datagram of this many bytes, copied into the buffer.
    Rtcp(usize),
    /// Nothing came for a short while.
    Nothing,
    /// The source is closed: nothing more will come.
    Ended,
}

/// Why a [`DatagramSource`] failed.
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// Datagrams that come some other way than the receiver's UDP sockets: RTP and RTCP
/// interleaved on an RTSP connection (RFC 2326 §10.12).
pub trait DatagramSource {
    /// The next datagram, copied into `buf`; waits a short while (tens of ms) at most.
    fn recv(&mut self, buf: &mut [u8]) -> Result<Incoming, SourceError>;
    /// Sends a receiver report back the way the datagrams came; false if it could not.
    fn send_rtcp(&mut self, report: &[u8]) -> bool;
    /// Where the datagrams come from, for the outcome.
    fn describe(&self) -> String;
}

/// Receives from `src` as [`super::Receiver::run`] does from its sockets, until `duration` or
/// `packets`, `stop`, or the end of the source. `cfg.source` and `cfg.socket` are not used.
///
/// A datagram's arrival time is when it was read (there is no kernel timestamp), so jitter
/// includes the time the transport held it.
pub fn run_datagrams(
    cfg: &ReceiverRunConfig,
    src: &mut dyn DatagramSource,
    stop: &AtomicBool,
    mut on_status: impl FnMut(&ReceiverSession, Duration),
) -> Result<ReceiverOutcome, RecvError> {
    let mut out = open_outputs(cfg)?;
    let host = HostWatch::start();
    let clock = Clock::new();
    let mut session = ReceiverSession::new(cfg.session.clone());
    let start = clock.now();
    let mut next_status = start + cfg.status_every;
    let mut buf = vec![0u8; 65_536];
    let mut reports_sent = 0u64;
    let limit = RunLimit::new(start, cfg.duration, stop);
    let ended_by = loop {
        let now = clock.now();
        if let Some(why) = limit.ended(now) {
            break why;
        }
        if cfg
            .packets
            .is_some_and(|n| session.counters().rtp_packets >= n)
        {
            break EndedBy::Packets;
        }
        if cfg.end_on_bye && session.every_source_said_bye() {
            break EndedBy::SenderBye;
        }
        if let Some(n) = session.poll_transmit(now, &mut buf) {
            reports_sent += src.send_rtcp(&buf[..n]) as u64;
        }
        if now >= next_status {
            next_status = super::next_status_after(next_status, now, cfg.status_every);
            on_status(&session, now.saturating_since(start));
        }
        match src.recv(&mut buf).map_err(RecvError::Source)? {
            Incoming::Rtp(n) => {
                let (arrival, wall) = clock.arrival(None);
                let data = &buf[..n.min(buf.len())];
                let rec = session.handle_rtp(arrival, Some(wall), data);
                record(&mut out, arrival, wall.to_unix_nanos(), data, &rec)?;
            }
            Incoming::Rtcp(n) => {
                let (at, _) = clock.arrival(None);
                session.handle_rtcp(at, &buf[..n.min(buf.len())]);
            }
            Incoming::Nothing => {}
            Incoming::Ended => break EndedBy::EndOfInput,
        }
        while session.poll_event().is_some() {}
    };
    let end = clock.now();
    if let Some(n) = session.bye(end, &mut buf) {
        reports_sent += src.send_rtcp(&buf[..n]) as u64;
    }
    for (p, w) in [&mut out.trace, &mut out.output].into_iter().flatten() {
        w.flush().map_err(|e| write_err(p, e))?;
    }
    on_status(&session, end.saturating_since(start));
    Ok(ReceiverOutcome {
        source: src.describe(),
        ended_by,
        duration_us: Micros::from(end.saturating_since(start)),
        kernel_timestamps: false,
        datagrams_without_kernel_timestamp: session.counters().datagrams,
        receive_buffer_bytes: 0,
        socket_overflows: 0,
        fec_socket_overflows: 0,
        truncated_datagrams: 0,
        foreign_fec_datagrams: 0,
        srtp_rejected_datagrams: 0,
        receiver_reports_sent: reports_sent,
        host: host.finish(0),
        receiver: session.summary(),
    })
}
