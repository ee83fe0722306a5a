//! Rate control end to end through the sessions' own RTCP bytes: a sender session with a TFMCC
//! (or TFRC) controller, receiver sessions running its receiving end, RTP and RTCP carried by
//! hand with a fixed delay each way, one receiver losing packets. The receivers measure their
//! RTT from the sender's echoes, report in RTCP APP packets, and the sender makes the lossy one
//! its current limiting receiver.

use metronome_cc::receiver::{Agent, AgentKind};
use metronome_cc::{
    Announce, ControllerTimer, Feedback, GccConfig, GccSender, RateController, TfmccConfig,
    TfmccSender, TfrcConfig, TfrcSender,
};
use metronome_sched::PacingConfig;
use metronome_session::receiver::{ReceiverConfig, ReceiverSession};
use metronome_session::sender::{
    Input, JobConfig, Queued, SenderReportsConfig, SenderSession, SenderSessionConfig, Transmit,
};
use metronome_time::{Bitrate, MediaClock, NtpTime, RtpTime, Timestamp};
use metronome_wire::rtp::{patch_send_time, write_packet, RtpHeader, SendTimeExt};
use metronome_wire::PayloadType;
use metronome_wire::Ssrc;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SSRC: Ssrc = Ssrc(0xabc);
const ONE_WAY: Duration = Duration::from_millis(25);

fn wall(t: Timestamp) -> NtpTime {
    NtpTime::from_unix_nanos(1_767_225_600_000_000_000 + t.as_nanos())
}

fn sender(cc: Box<dyn RateController>) -> SenderSession {
    let cfg = SenderSessionConfig {
        reports: SenderReportsConfig {
            ssrc: SSRC,
            cname: "sender".into(),
            clock: MediaClock::VIDEO_90K,
            rtp_ts_base: RtpTime(0),
            session_bw_bps: 2_000_000,
            rtcp_min_interval: Duration::from_secs(1),
            max_receivers: 8,
            seed: 1,
        },
        pacing: PacingConfig::default(),
        jobs: JobConfig {
            period: None,
            deadline: Duration::from_millis(2),
        },
        queue_capacity: 4096,
    };
    SenderSession::new(cfg, Timestamp::ZERO, cc)
}

/// The RTP packet of `seq`, with the timestamp of `time` (its due time, or its frame's) and
/// the send-time element `ext` stamped with `sent`.
fn rtp(seq: u16, time: Timestamp, ext: SendTimeExt, sent: NtpTime) -> Vec<u8> {
    let mut payload = [0u8; 1316];
    for c in payload.chunks_exact_mut(188) {
        c[0] = 0x47;
    }
    let hdr = RtpHeader {
        payload_type: PayloadType(33),
        sequence: metronome_wire::SeqNo(seq),
        timestamp: MediaClock::VIDEO_90K.rtp_timestamp(RtpTime(0), Timestamp::ZERO, time),
        ssrc: SSRC,
        marker: false,
    };
    let mut buf = vec![0u8; 1500];
    let n = write_packet(&mut buf, &hdr, ext, &payload).unwrap();
    buf.truncate(n);
    patch_send_time(&mut buf, sent);
    buf
}

enum Msg {
    Rtp(Vec<u8>),
    Rtcp(Vec<u8>),
}

/// Runs `secs` of 1 Mbit/s (packets every 10.7 ms); receiver `k` loses every `loss_every[k]`th
/// packet (0: none). Returns the sender and receivers at the end.
fn run(
    cc: Box<dyn RateController>,
    kind: AgentKind,
    loss_every: &[u64],
    secs: u64,
) -> (SenderSession, Vec<ReceiverSession>) {
    let r = run_stamped(cc, kind, loss_every, secs, Stamping::DUE);
    (r.sender, r.receivers)
}

/// What a packet says of its time.
#[derive(Clone, Copy)]
struct Stamping {
    /// Its RTP timestamp from its due time.
    rtp_ts: fn(Timestamp) -> Timestamp,
    /// The send-time element, stamped as it leaves.
    send_time: SendTimeExt,
}

impl Stamping {
    /// The RTP timestamp of the due time, no send time.
    const DUE: Stamping = Stamping {
        rtp_ts: |due| due,
        send_time: SendTimeExt::None,
    };
}

struct Run {
    sender: SenderSession,
    receivers: Vec<ReceiverSession>,
    /// Receiver 0's TFMCC RTT in use each millisecond once it has measured one, ms.
    rtts: Vec<f64>,
}

/// [`run`], packets stamped as `stamping` says.
fn run_stamped(
    cc: Box<dyn RateController>,
    kind: AgentKind,
    loss_every: &[u64],
    secs: u64,
    stamping: Stamping,
) -> Run {
    let mut s = sender(cc);
    let mut rx: Vec<ReceiverSession> = (0..loss_every.len())
        .map(|k| {
            ReceiverSession::new(ReceiverConfig {
                ssrc: Ssrc(100 + k as u32),
                cname: format!("r{k}"),
                seed: k as u64,
                cc: kind,
                ..ReceiverConfig::default()
            })
        })
        .collect();
    let gap = Duration::from_micros(10_700);
    let n = (secs * 1_000_000 / 10_700) as u32;
    let mut down: VecDeque<(Timestamp, Msg)> = VecDeque::new();
    let mut up: VecDeque<(Timestamp, Vec<u8>)> = VecDeque::new();
    let mut queued = 0u32;
    let mut buf = vec![0u8; 1500];
    let step = Duration::from_millis(1);
    let mut now = Timestamp::ZERO;
    let mut rtts = Vec::new();
    while now < Timestamp::from_secs(secs) {
        while queued < n && queued < 64 + (now.as_nanos() / gap.as_nanos() as u64) as u32 {
            let q = Queued {
                id: queued,
                packets: 1,
                due: Timestamp::ZERO + gap * queued,
                wire_len: 1344,
                payload_len: 1316,
                seq: metronome_wire::SeqNo(queued as u16),
            };
            s.handle_input(now, Input::Packet(q)).unwrap();
            queued += 1;
        }
        s.handle_timeout(now);
        while let Some(t) = s.poll_transmit(now) {
            if let Transmit::Send { id, due, .. } = t {
                let ts = (stamping.rtp_ts)(due);
                let p = rtp(id as u16, ts, stamping.send_time, wall(now));
                down.push_back((now + ONE_WAY, Msg::Rtp(p)));
            }
        }
        if let Some(len) = s.poll_rtcp(now, wall(now), &mut buf) {
            down.push_back((now + ONE_WAY, Msg::Rtcp(buf[..len].to_vec())));
        }
        while s.poll_event().is_some() {}
        while down.front().is_some_and(|(t, _)| *t <= now) {
            let (_, m) = down.pop_front().unwrap();
            for (k, r) in rx.iter_mut().enumerate() {
                match &m {
                    Msg::Rtp(p) => {
                        let seq = u16::from_be_bytes([p[2], p[3]]) as u64;
                        if loss_every[k] > 0 && seq % loss_every[k] == 7 {
                            continue;
                        }
                        let _ = r.handle_rtp(now, Some(wall(now)), p);
                    }
                    Msg::Rtcp(p) => {
                        r.handle_rtcp(now, p);
                    }
                }
            }
        }
        for r in rx.iter_mut() {
            if let Some(len) = r.poll_transmit(now, &mut buf) {
                up.push_back((now + ONE_WAY, buf[..len].to_vec()));
            }
            while r.poll_event().is_some() {}
        }
        while up.front().is_some_and(|(t, _)| *t <= now) {
            let (_, p) = up.pop_front().unwrap();
            let input = Input::Rtcp {
                wall: wall(now),
                from: "10.0.0.2:5005".parse().unwrap(),
                outlet: metronome_session::repair::Outlet(0),
                data: &p,
            };
            s.handle_input(now, input).unwrap();
        }
        if let Some(Agent::Tfmcc(t)) = rx[0].cc_agent() {
            if t.has_rtt() {
                rtts.push(t.rtt().as_secs_f64() * 1e3);
            }
        }
        now += step;
    }
    Run {
        sender: s,
        receivers: rx,
        rtts,
    }
}

#[test]
fn tfmcc_over_rtcp_makes_the_lossy_receiver_the_clr_and_measures_rtts() {
    let cc = TfmccSender::new(TfmccConfig::new(1372, Bitrate::mbps(10)), Timestamp::ZERO);
    // Receiver 1 loses one packet in 20, the others nothing.
    let (s, rx) = run(Box::new(cc), AgentKind::Tfmcc, &[0, 20, 0], 20);
    let rate = s.target_rate();
    let out_of_turn: Vec<u64> = rx.iter().map(|r| r.counters().cc_reports).collect();
    println!(
        "target {rate}, receivers' out-of-turn reports {out_of_turn:?}, sender's extra RTCP {}",
        s.reports().counters().cc_packets
    );
    // Every receiver answered (the first round has no suppression rate yet), the sender
    // announced rounds and echoes out of turn.
    assert!(out_of_turn.iter().all(|n| *n > 0), "{out_of_turn:?}");
    // The lossy receiver is the CLR: it reports once per RTT, the others only in rounds.
    assert!(
        out_of_turn[1] > 2 * out_of_turn[0].max(out_of_turn[2]),
        "{out_of_turn:?}"
    );
    // Each measured its RTT from the sender's echoes: 50 ms, give or take the 1 ms steps.
    for r in &rx {
        let Some(Agent::Tfmcc(t)) = r.cc_agent() else {
            panic!("no TFMCC receiver")
        };
        assert!(t.has_rtt());
        let rtt = t.rtt().as_secs_f64() * 1000.0;
        assert!((rtt - 50.0).abs() < 3.0, "{rtt} ms");
    }
    assert!(s.reports().counters().cc_packets > 10);
    // One in 20 lost, 50 ms RTT, 1372-byte packets: the equation allows roughly 150-400 kB/s;
    // the sender sends no more than that (and far less than the 10 Mbit/s ceiling).
    let bps = rate.as_bps() as f64;
    assert!(bps > 200_000.0 && bps < 4_000_000.0, "{rate}");
}

/// A TFMCC sender, keeping every round-trip sample its receivers' echoes give it.
struct Sampling {
    inner: TfmccSender,
    samples: Arc<Mutex<Vec<Duration>>>,
}

impl RateController for Sampling {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn target_rate(&self) -> Bitrate {
        self.inner.target_rate()
    }
    fn on_feedback(&mut self, now: Timestamp, feedback: &Feedback) {
        if let Some((sent, held)) = feedback.tfmcc.and_then(|r| r.echo) {
            let sample = now.saturating_since(sent).saturating_sub(held);
            self.samples.lock().unwrap().push(sample);
        }
        self.inner.on_feedback(now, feedback);
    }
    fn on_sent(&mut self, now: Timestamp, bytes: u64) {
        self.inner.on_sent(now, bytes);
    }
    fn wants_send_times(&self) -> bool {
        self.inner.wants_send_times()
    }
    fn poll_timeout(&self) -> Option<(Timestamp, ControllerTimer)> {
        self.inner.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        self.inner.handle_timeout(now);
    }
    fn poll_announce(&mut self, now: Timestamp) -> Option<Announce> {
        self.inner.poll_announce(now)
    }
    fn set_rate(&mut self, rate: Bitrate) {
        self.inner.set_rate(rate);
    }
}

/// RFC 4654 §3.2: the sender's RTT sample of a receiver is now less the echoed data packet's
/// send time, less how long the receiver held it. A video packet's RTP timestamp is its
/// frame's presentation time, shared by the frame's packets however they are paced: here 40
/// ms frames of about four packets each. The echoes name packets by sequence number, so every
/// sample is the path's 50 ms (give or take the 1 ms steps), not 50 ms plus up to 30 ms of
/// pacing within the frame.
#[test]
fn tfmcc_echoes_give_the_sender_the_paths_rtt_whatever_the_packets_rtp_timestamps() {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let cc = Sampling {
        inner: TfmccSender::new(TfmccConfig::new(1372, Bitrate::mbps(10)), Timestamp::ZERO),
        samples: samples.clone(),
    };
    let stamping = Stamping {
        rtp_ts: frame_time,
        send_time: SendTimeExt::None,
    };
    let s = run_stamped(Box::new(cc), AgentKind::Tfmcc, &[0, 20, 0], 10, stamping).sender;
    let samples = samples.lock().unwrap();
    let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    println!("{} samples, {:?}", ms.len(), &ms[..ms.len().min(20)]);
    assert!(ms.len() > 50, "{}", ms.len());
    assert!(ms.iter().all(|r| (49.0..=52.0).contains(r)), "{ms:?}");
    assert_eq!(s.feedback_unmatched(), 0);
}

/// A packet's RTP timestamp: its 40 ms frame's presentation time.
fn frame_time(due: Timestamp) -> Timestamp {
    Timestamp::from_millis(due.as_nanos() / 40_000_000 * 40)
}

/// RFC 4654 §4.3.3: between the sender's echoes a receiver keeps its RTT current with each
/// data packet's one-way delay, from the packet's send time on the sender's clock. With
/// abs-send-time on the packets (and the sender reports' NTP time for when the echo left),
/// receiver 0's RTT in use stays the path's 50 ms throughout, although the RTP timestamps are
/// 40 ms frames' presentation times; taking the RTP timestamp as the send time instead puts
/// the pacing within each frame (0-30 ms) into it.
#[test]
fn tfmcc_receivers_keep_their_rtt_from_each_packets_send_time() {
    let tfmcc = || TfmccSender::new(TfmccConfig::new(1372, Bitrate::mbps(10)), Timestamp::ZERO);
    let summary = |send_time| {
        let stamping = Stamping {
            rtp_ts: frame_time,
            send_time,
        };
        let r = run_stamped(Box::new(tfmcc()), AgentKind::Tfmcc, &[0, 20], 10, stamping);
        let (lo, hi) = r
            .rtts
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
        println!(
            "{send_time:?}: {} values of the RTT in use, {lo:.1}-{hi:.1} ms",
            r.rtts.len()
        );
        assert!(r.rtts.len() > 5000, "{}", r.rtts.len());
        (lo, hi)
    };
    let (lo, hi) = summary(SendTimeExt::Abs24);
    assert!(lo >= 48.0 && hi <= 52.0, "{lo}-{hi}");
    // The same with the RTP timestamp standing in: the pacing shows.
    let (_, hi) = summary(SendTimeExt::None);
    assert!(hi > 60.0, "{hi}");
}

#[test]
fn tfrc_over_rtcp_tells_the_receiver_its_rtt_and_follows_its_reports() {
    let cc = TfrcSender::new(TfrcConfig::new(1372, Bitrate::mbps(10)), Timestamp::ZERO);
    let (s, rx) = run(Box::new(cc), AgentKind::Tfrc, &[20], 10);
    let reports = rx[0].counters().cc_reports;
    println!("target {}, reports out of turn {reports}", s.target_rate());
    // Once per RTT (50 ms) after the first: well over a hundred in 10 s.
    assert!(reports > 100, "{reports}");
    let bps = s.target_rate().as_bps() as f64;
    assert!(bps > 200_000.0 && bps < 4_000_000.0, "{}", s.target_rate());
}

#[test]
fn gcc_over_rfc_8888_feedback_grows_on_a_clear_path_and_backs_off_under_loss() {
    // A clear path: every 50 ms the receiver reports each packet; the sender matches them
    // with its send times and, seeing no queue and no loss, raises the rate 8 % a second.
    let cc = GccSender::new(GccConfig::new(Bitrate::kbps(300), Bitrate::mbps(10)));
    let (s, rx) = run(Box::new(cc), AgentKind::Gcc, &[0], 10);
    let reports = rx[0].counters().cc_reports;
    println!(
        "clear: target {}, RFC 8888 reports {reports}, unmatched {}",
        s.target_rate(),
        s.feedback_unmatched()
    );
    assert!(reports > 150, "{reports}");
    assert_eq!(s.feedback_unmatched(), 0);
    // 300 kbit/s × 1.08^~9.9 s of feedback.
    let bps = s.target_rate().as_bps() as f64;
    assert!((560e3..700e3).contains(&bps), "{}", s.target_rate());
    // One packet in 8 lost (12.5 %, over GCC's 10 %): the loss-based rate falls below where
    // it started.
    let cc = GccSender::new(GccConfig::new(Bitrate::kbps(300), Bitrate::mbps(10)));
    let (s, _) = run(Box::new(cc), AgentKind::Gcc, &[8], 10);
    println!("lossy: target {}", s.target_rate());
    assert!(s.target_rate() < Bitrate::kbps(300), "{}", s.target_rate());
}

/// A TFMCC sender announces at once (RFC 4654 §3.1); its compound can reach a receiver
/// before the stream's first packet. The announcement is kept until that packet starts the
/// receiver's end, which then answers the round at once, not a whole `R_max` later.
#[test]
fn a_tfmcc_announcement_before_the_first_packet_is_not_lost() {
    let cc = TfmccSender::new(TfmccConfig::new(1372, Bitrate::mbps(10)), Timestamp::ZERO);
    let mut s = sender(Box::new(cc));
    let mut buf = vec![0u8; 1500];
    let t0 = Timestamp::ZERO;
    s.handle_timeout(t0);
    let n = s
        .poll_rtcp(t0, wall(t0), &mut buf)
        .expect("the first announcement");
    let compound = buf[..n].to_vec();
    let first = rtp(0, t0, SendTimeExt::None, wall(t0));
    let timer_after = |rtcp_first: bool, data_at: u64| {
        let mut r = ReceiverSession::new(ReceiverConfig {
            ssrc: Ssrc(100),
            cname: "r0".into(),
            cc: AgentKind::Tfmcc,
            ..ReceiverConfig::default()
        });
        let ms = Timestamp::from_millis;
        if rtcp_first {
            r.handle_rtcp(ms(10), &compound);
            let _ = r.handle_rtp(ms(data_at), Some(wall(ms(data_at))), &first);
        } else {
            let _ = r.handle_rtp(ms(10), Some(wall(ms(10))), &first);
            r.handle_rtcp(ms(11), &compound);
        }
        let Some(Agent::Tfmcc(t)) = r.cc_agent() else {
            panic!("no TFMCC end")
        };
        t.poll_timeout()
    };
    // Either way the round's feedback timer runs, from the announcement's arrival, within
    // the round (T = 6 R_max = 3 s, the sender's first).
    let (early, late) = (timer_after(true, 11), timer_after(false, 0));
    let round = Timestamp::from_millis(10)..=Timestamp::from_millis(3011);
    assert!(early.is_some_and(|t| round.contains(&t)), "{early:?}");
    assert!(late.is_some_and(|t| round.contains(&t)), "{late:?}");
    // One that came a whole round before the first packet is stale: the next counts.
    assert_eq!(timer_after(true, 3100), None);
}

/// RFC 4654 §4.2 at the session: a receiver that is the CLR and wishes to leave may not go
/// at once; it reports with the leave flag until the sender's next round, then it may, and
/// its BYE goes with its last receiver report.
#[test]
fn a_clr_that_wishes_to_leave_stays_until_its_round_ends() {
    use metronome_cc::tfmcc::SenderInfo;
    use metronome_session::cc_app::announce_app;
    use metronome_wire::rtcp::{parse_compound, write_compound_with, ReportHead, RtcpItem};
    let ms = Timestamp::from_millis;
    let announce = |round: u16, at: Timestamp| {
        let info = SenderInfo {
            round,
            x_supp: f64::INFINITY,
            r_max: Duration::from_millis(100),
            feedback_delay: Duration::from_millis(600),
            clr: Some(100),
            echo: None,
            x_send: 100_000.0,
            slow_start: false,
        };
        let sr = metronome_wire::rtcp::SenderInfo {
            ssrc: SSRC,
            ntp: wall(at).0,
            rtp_timestamp: RtpTime(0),
            packet_count: 1,
            octet_count: 1316,
        };
        let app = announce_app(&Announce::Tfmcc(info));
        let mut buf = vec![0u8; 1500];
        let n = write_compound_with(
            &mut buf,
            ReportHead::Sender(sr, &[]),
            "s",
            &[app],
            None,
            None,
        )
        .unwrap();
        buf.truncate(n);
        buf
    };
    let mut r = ReceiverSession::new(ReceiverConfig {
        ssrc: Ssrc(100),
        cname: "r0".into(),
        cc: AgentKind::Tfmcc,
        ..ReceiverConfig::default()
    });
    let mut buf = vec![0u8; 1500];
    let flagged = |r: &mut ReceiverSession, at: Timestamp, buf: &mut [u8]| {
        let mut n = 0;
        while let Some(len) = r.poll_transmit(at, buf) {
            parse_compound(&buf[..len], |i| {
                use metronome_wire::rtcp::{CcApp, TfmccFeedback};
                if let RtcpItem::Cc {
                    app: CcApp::TfmccFeedback(f),
                    ..
                } = i
                {
                    n += usize::from(f.flags & TfmccFeedback::LEAVING != 0);
                }
            })
            .unwrap();
        }
        n
    };
    for k in 0..20u64 {
        let at = ms(10 * k);
        let _ = r.handle_rtp(
            at,
            Some(wall(at)),
            &rtp(k as u16, at, SendTimeExt::None, wall(at)),
        );
        if k == 5 {
            r.handle_rtcp(at, &announce(0, at));
        }
    }
    assert!(!r.wish_to_leave(ms(200)), "the CLR stays for its round");
    assert!(r.leave_pending() && !r.controller_left());
    let mut sent = 0;
    for k in 20..40u64 {
        let at = ms(10 * k);
        let _ = r.handle_rtp(
            at,
            Some(wall(at)),
            &rtp(k as u16, at, SendTimeExt::None, wall(at)),
        );
        sent += flagged(&mut r, at, &mut buf);
    }
    assert!(sent >= 1, "flagged reports while it stays: {sent}");
    r.handle_rtcp(ms(400), &announce(1, ms(400)));
    assert!(r.controller_left() && !r.leave_pending());
    let n = r.leave(ms(401), &mut buf).expect("its goodbye");
    let mut bye = false;
    parse_compound(&buf[..n], |i| bye |= matches!(i, RtcpItem::Bye { .. })).unwrap();
    assert!(bye && r.has_left());
}
