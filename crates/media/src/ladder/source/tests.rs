use super::*;
use crate::encode::EncoderConfig;
use crate::ladder::{Ladder, LadderSpec};
use crate::motion::Motion;
use metronome_wire::PayloadType;
use metronome_wire::Ssrc;

fn ladder() -> Arc<Ladder> {
    let spec = LadderSpec {
        encoder: EncoderConfig {
            width: 176,
            height: 144,
            ..EncoderConfig::seed002(2)
        },
        quantizers: (2..=31).step_by(3).collect(),
        frames: 96,
        content: "motion seed 5".into(),
    };
    Arc::new(Ladder::build(spec, &mut Motion::new(25, 5).unwrap()).unwrap())
}

fn source(l: &Arc<Ladder>) -> LadderSource {
    LadderSource::new(
        l.clone(),
        LadderSourceConfig {
            payloader: PayloaderConfig {
                ssrc: Ssrc(9),
                payload_type: PayloadType(96),
                max_payload: 978,
                initial_seq: metronome_wire::SeqNo(100),
                send_time: metronome_wire::rtp::SendTimeExt::None,
            },
            rtp_ts_base: metronome_time::RtpTime(1000),
            overhead_per_packet: 40,
            reference_q: 2,
            max_bps: f64::INFINITY,
            epoch: metronome_time::Timestamp::ZERO,
            send_at_rate: false,
        },
    )
}

/// Every packet: (due, frame, payload length).
fn drain(s: &mut LadderSource, rate_bps: f64) -> Vec<(Duration, u32, usize)> {
    let mut buf = [0u8; 1500];
    let mut out = Vec::new();
    while let Some(p) = s.next_noted(&mut buf).unwrap() {
        if p.first_of_frame {
            s.on_rate(rate_bps);
        }
        assert!(p.payload_len <= 978 && p.len == p.payload_len + 12);
        out.push((p.due, p.frame, p.payload_len));
    }
    out
}

#[test]
fn frames_leave_whole_and_unpadded_paced_over_their_interval() {
    let l = ladder();
    let mut s = source(&l);
    let got = drain(&mut s, 10_000_000.0);
    let frames: Vec<u32> = got.iter().map(|g| g.1).collect();
    let mut distinct = frames.clone();
    distinct.dedup();
    assert_eq!(distinct, (0..96).collect::<Vec<_>>());
    for k in 0..96u32 {
        let mine: Vec<_> = got.iter().filter(|g| g.1 == k).collect();
        let t0 = Duration::from_millis(40) * k;
        assert_eq!(mine[0].0, t0, "frame {k} starts at its time");
        assert!(mine
            .iter()
            .all(|g| g.0 >= t0 && g.0 < t0 + Duration::from_millis(40)));
        // Its bytes are the rung's frame's, no more: no padding.
        let payload: usize = mine.iter().map(|g| g.2).sum();
        let q = s.decisions()[k as usize / 12].1.quantizer;
        assert_eq!(payload, l.rung(q).frames[k as usize].data.len());
    }
}

#[test]
fn the_rung_follows_the_allowed_rate_gop_by_gop() {
    let l = ladder();
    let rich = {
        let mut s = source(&l);
        drain(&mut s, 50_000_000.0);
        s.decisions()
            .iter()
            .map(|d| d.1.quantizer)
            .collect::<Vec<_>>()
    };
    // Below what even the coarsest rung needs (this QCIF ladder: 902 kbit/s at q 2, 101 at
    // q 11, 37 at q 29), the source goes to the coarse end.
    let poor = {
        let mut s = source(&l);
        drain(&mut s, 30_000.0);
        s.decisions()
            .iter()
            .map(|d| d.1.quantizer)
            .collect::<Vec<_>>()
    };
    assert_eq!(rich.len(), 8, "a decision per GOP");
    assert_eq!(*rich.last().unwrap(), 2, "{rich:?}");
    assert!(*poor.last().unwrap() >= 26, "{poor:?}");
    // The wire rate of what it sent at a middling rate is near that rate.
    let mut s = source(&l);
    let mid = 600_000.0;
    let got = drain(&mut s, mid);
    let wire: usize = got.iter().skip_while(|g| g.1 < 24).map(|g| g.2 + 40).sum();
    let secs = (96 - 24) as f64 / 25.0;
    let bps = wire as f64 * 8.0 / secs;
    assert!(
        bps < 1.3 * mid && bps > 0.5 * mid,
        "{bps} against {mid}: {:?}",
        s.decisions()
    );
}

/// Packets: (due, made, frame, payload length), the rate and a queue of `queued` packets
/// told at each frame.
fn drain_at_rate(
    s: &mut LadderSource,
    rate_bps: f64,
    queued: usize,
) -> Vec<(Duration, Duration, u32, usize)> {
    let mut buf = [0u8; 1500];
    let mut out = Vec::new();
    s.on_queue(queued);
    s.on_rate(rate_bps);
    loop {
        let next = RtpSource::next_due(s);
        let Some(p) = s.next_noted(&mut buf).unwrap() else {
            assert_eq!(next, None, "no packet after the last");
            break;
        };
        assert_eq!(
            next,
            Some(Timestamp::ZERO + p.due),
            "next_due said when it is due"
        );
        if p.first_of_frame {
            s.on_queue(queued);
            s.on_rate(rate_bps);
        }
        out.push((p.due, p.made, p.frame, p.payload_len));
    }
    out
}

#[test]
fn at_the_controllers_rate_a_frame_is_due_when_made_and_the_queue_lowers_the_next_target() {
    let l = ladder();
    let paced = |queued: usize| {
        let mut s = source(&l);
        s.cfg.send_at_rate = true;
        let got = drain_at_rate(&mut s, 200_000.0, queued);
        (s, got)
    };
    assert!(!source(&l).leaves_at_rate());
    // Every packet of a frame is due when the frame is made: the sender session spaces them
    // at the rate of each moment (RFC 4654 §3.7's ts_ipi = s / X).
    let (s, got) = paced(0);
    assert!(s.leaves_at_rate());
    for g in &got {
        assert_eq!(g.0, g.1, "{g:?}");
    }
    // The VBR controller is told the sender's queue: 500 packets waiting lower what it asks
    // of the next GOP (Evalvid-RA's exp(-backlog / 1000)).
    let (queued, _) = paced(500);
    let (q, e) = (queued.decisions(), s.decisions());
    assert!(
        q[1].1.target_bytes < 0.7 * e[1].1.target_bytes,
        "{:?} against {:?}",
        q[1],
        e[1]
    );
}

/// Evalvid-RA's TFRC agent tells the VBR controller the rate at every feedback, changed or
/// not, and at no other time: a report that keeps the rate counts in the GOP's mean as one
/// that changed it, so a target lowered by a queue that has since drained recovers while the
/// rate holds; a change on the controller's own clock does not count.
#[test]
fn reports_count_in_the_gops_mean_and_changes_between_them_do_not() {
    let l = ladder();
    let target = |reports: usize| {
        let mut s = source(&l);
        s.cfg.send_at_rate = true;
        s.on_queue(500);
        RtpSource::rate_reported(&mut s, 2_000_000);
        s.on_queue(0);
        // TFRC's no-feedback timer halves the rate: the VBR controller is not told.
        RtpSource::follow_rate(&mut s, 1_000_000).unwrap();
        for _ in 0..reports {
            RtpSource::rate_reported(&mut s, 2_000_000);
        }
        let mut buf = [0u8; 1500];
        while s.decisions().len() < 2 {
            s.next_noted(&mut buf).unwrap().expect("a second GOP");
        }
        s.decisions()[1].1.target_bytes
    };
    let e = &l.spec.encoder;
    let gop_bytes = |bps: f64| bps / 8.0 * f64::from(e.gop) / f64::from(e.fps);
    // The first report alone: 2 Mbit/s scaled by exp(-500 / 1000) for the queue then.
    let scaled = 2e6 * (-0.5f64).exp();
    assert!((target(0) - gop_bytes(scaled)).abs() < 1.0, "{}", target(0));
    // Three reports at 2 Mbit/s with the queue drained: the mean of the four.
    let mean = (scaled + 3.0 * 2e6) / 4.0;
    assert!((target(3) - gop_bytes(mean)).abs() < 1.0, "{}", target(3));
}
