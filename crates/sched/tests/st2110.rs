//! ST 2110-21 pacing models and conformance: the formulas against worked numbers, each sender
//! type through the receiver's measurement, and a property test of the gapped schedule.

use metronome_sched::st2110::{
    ActiveRatio, Arrival, Conformance, EpochAnchor, FrameFormat, FrameRate, FrameSchedule,
    ReadSchedule, SenderType, Verdict,
};
use metronome_time::{RtpTime, Timestamp};
use proptest::prelude::*;
use std::time::Duration;

fn ns(n: u64) -> Duration {
    Duration::from_nanos(n)
}

/// 1080p59.94 4:2:2 10-bit: 4320 packets of 480 pixels (1200 bytes) a frame, as in the
/// ST 2110-21 articles (TV Technology, "Taming the Torrents") and Intel MTL's format table.
fn hd() -> FrameFormat {
    FrameFormat::new(FrameRate::P59_94, 4320, 1080)
}

#[test]
fn hd_59_94_worked_numbers() {
    let f = hd();
    // TFRAME = 1001/60000 s = 16 683 333.3 ns; RACTIVE × TFRAME = 16 016 000 ns exactly.
    assert_eq!(f.tframe(), ns(16_683_333));
    // Gapped TRS = 16 016 000 / 4320 = 3707.4 ns; linear 16 683 333.3 / 4320 = 3861.9 ns.
    assert_eq!(f.trs(ReadSchedule::Gapped), ns(3_707));
    assert_eq!(f.trs(ReadSchedule::Linear), ns(3_861));
    // TRODEFAULT = 43/1125 × TFRAME = 637 674.07 ns.
    assert_eq!(f.troffset(), ns(637_674));
    let g = f.limits(ReadSchedule::Gapped);
    // 4320 / (43200 × 0.96 × 0.0166833) = 6.24; 4320 / (21600 × 0.0166833) = 11.99 → 16;
    // 4320 / (27000 × 0.0166833) = 9.59; 4320 / (300 × 0.0166833) = 863.1.
    assert_eq!(
        (
            g.cmax_narrow,
            g.cmax_wide,
            g.vrx_full_narrow,
            g.vrx_full_wide
        ),
        (6, 16, 9, 863)
    );
    // Linear: RACTIVE = 1 in the narrow CMAX, 4320 / (43200 × 0.0166833) = 5.99.
    assert_eq!(f.limits(ReadSchedule::Linear).cmax_narrow, 5);
}

#[test]
fn other_formats_worked_numbers() {
    // 1080p50, 4320 packets: one every 4.63 µs when spread evenly (TV Technology article).
    let p50 = FrameFormat::new(FrameRate::P50, 4320, 1080);
    assert_eq!(p50.trs(ReadSchedule::Linear), ns(4_629));
    assert_eq!(p50.trs(ReadSchedule::Gapped), ns(4_444));
    // 1080p30, 4115 packets (MTL's TSN notes: trs ≈ 7776.43 ns, cmax 4, vrx_full 8).
    let p30 = FrameFormat::new(FrameRate::new(30, 1), 4115, 1080);
    assert_eq!(p30.trs(ReadSchedule::Gapped), ns(7_776));
    let l = p30.limits(ReadSchedule::Gapped);
    assert_eq!((l.cmax_narrow, l.vrx_full_narrow), (4, 8));
    // 2160p59.94, 17 280 packets: 24.97, 47.95, 38.36, 3452.5.
    let uhd = FrameFormat::new(FrameRate::P59_94, 17_280, 2160);
    let l = uhd.limits(ReadSchedule::Gapped);
    assert_eq!(
        (
            l.cmax_narrow,
            l.cmax_wide,
            l.vrx_full_narrow,
            l.vrx_full_wide
        ),
        (24, 47, 38, 3452)
    );
    // 720p59.94: TRODEFAULT = 28/750 × TFRAME = 622 844.4 ns; RACTIVE 720/750 = 1080/1125.
    let p720 = FrameFormat::new(FrameRate::P59_94, 1800, 720);
    assert_eq!(p720.troffset(), ns(622_844));
    let same = p720.with_active_ratio(ActiveRatio::new(720, 750).unwrap());
    assert_eq!(
        same.trs(ReadSchedule::Gapped),
        p720.trs(ReadSchedule::Gapped)
    );
}

/// Every packet of `frames` frames arriving `delay` after the schedule says it leaves, from
/// a stream whose epoch is `epoch` and whose RTP timestamps start at `rtp0`.
fn feed(s: &FrameSchedule, c: &mut Conformance, frames: u64, delay: Duration, rtp0: u32) {
    let (f, epoch) = (*s.format(), Timestamp::from_millis(5));
    for n in 0..frames {
        let e = f.frame_epoch(epoch, n);
        for k in 0..s.npackets() {
            c.on_packet(Arrival {
                at: s.send_time(e, k) + delay,
                rtp_ts: RtpTime(rtp0).add(f.rtp_timestamp(n).get()),
                marker: k + 1 == s.npackets(),
            });
        }
    }
}

fn known(rtp0: u32) -> EpochAnchor {
    EpochAnchor::Known {
        at: Timestamp::from_millis(5),
        rtp_ts: RtpTime(rtp0),
    }
}

#[test]
fn narrow_gapped_schedule_is_narrow() {
    let s = FrameSchedule::new(&hd(), SenderType::NarrowGapped);
    let mut c = Conformance::for_sender(&s, known(0));
    feed(&s, &mut c, 5, Duration::ZERO, 0);
    let sum = c.summary();
    assert_eq!(sum.verdict, Verdict::Narrow);
    assert_eq!(
        (sum.frames, sum.incomplete_frames, sum.packets),
        (5, 0, 21_600)
    );
    assert_eq!(sum.cinst_max, 0);
    // Runs 4 packets ahead of the reads: VRX 4, or 5 where a floored nanosecond delays a read.
    assert!(sum.vrx_max <= 5 && sum.vrx_min >= 0, "{sum:?}");
    // Spread: 4319 × TRS = 16 012 292.6 ns, the same measured as scheduled.
    assert_eq!(s.spread(), ns(16_012_292));
    let r = c.last_frame().unwrap();
    assert_eq!(
        (r.spread_ns, r.complete, r.narrow),
        (16_012_292, true, true)
    );
    assert_eq!(r.last_offset_ns as u128, s.last_offset().as_nanos());
}

#[test]
fn narrow_linear_schedule_is_narrow_linear_and_wrap_safe() {
    let s = FrameSchedule::new(&hd(), SenderType::NarrowLinear);
    let rtp0 = u32::MAX - 2000; // wraps after the first frame
    let mut c = Conformance::for_sender(&s, EpochAnchor::first_packet_of(&s));
    feed(&s, &mut c, 4, Duration::ZERO, rtp0);
    let sum = c.summary();
    assert_eq!(sum.verdict, Verdict::NarrowLinear, "{sum:?}");
    assert_eq!((sum.cinst_max, sum.stray_packets), (0, 0));
    // The linear schedule spreads a frame over the whole frame period.
    assert_eq!(s.spread(), ns(16_679_471)); // 4319 × 3861.88 ns
}

#[test]
fn wide_schedule_is_wide_not_narrow() {
    let s = FrameSchedule::new(&hd(), SenderType::Wide);
    let mut c = Conformance::for_sender(&s, known(0));
    feed(&s, &mut c, 3, Duration::ZERO, 0);
    let sum = c.summary();
    assert_eq!(sum.verdict, Verdict::Wide);
    // Groups of 8 at one instant: Cinst 0..=7, above narrow CMAX 5 (linear), within 16.
    assert_eq!(sum.cinst_max, 7);
    assert_eq!(sum.narrow.violating_frames, 3);
    assert_eq!(sum.cinst_histogram[7], 3 * 4320 / 8);
}

#[test]
fn burst_fails_narrow_and_wide_with_its_cinst() {
    let s = FrameSchedule::new(&hd(), SenderType::Burst);
    let mut c = Conformance::for_sender(&s, known(0));
    feed(&s, &mut c, 2, Duration::ZERO, 0);
    let sum = c.summary();
    // A frame at one instant: the last packet finds the other 4319 queued.
    assert_eq!(sum.verdict, Verdict::NotConformant);
    assert_eq!(sum.cinst_max, 4319);
    assert_eq!(
        (sum.narrow.violating_frames, sum.wide.violating_frames),
        (2, 2)
    );
    // Every packet before TPR0: nothing read yet, VRX reaches NPACKETS > VRX_FULL wide 863.
    assert_eq!(sum.vrx_max, 4320);

    // The same burst at line rate, one packet a microsecond: packet k finds k queued less
    // ⌊k × 1000 ns / TDRAIN⌋ drained, TDRAIN = TFRAME / (4320 × 1.1) = 3510.8 ns.
    let mut c = Conformance::for_sender(&s, known(0));
    for k in 0..4320u64 {
        c.on_packet(Arrival {
            at: Timestamp::from_millis(5) + Duration::from_micros(k),
            rtp_ts: RtpTime(0),
            marker: k == 4319,
        });
    }
    let drained = 4319 * 1000 * 60_000 * 11 * 4320 / (1_000_000_000 * 1001 * 10);
    assert_eq!(c.summary().cinst_max as u64, 4319 - drained);
    assert_eq!(c.summary().verdict, Verdict::NotConformant);
}

#[test]
fn delay_underflows_a_known_epoch_but_not_one_taken_from_the_first_packet() {
    let s = FrameSchedule::new(&hd(), SenderType::NarrowGapped);
    // 30 µs late is more than the lead of 4 packets (≈ 18.5 µs): reads find packets missing.
    let mut c = Conformance::for_sender(&s, known(0));
    feed(&s, &mut c, 2, Duration::from_micros(30), 0);
    let sum = c.summary();
    assert!(sum.vrx_min < 0);
    assert_eq!(sum.verdict, Verdict::NotConformant);
    // Anchored on the first packet, a constant delay is invisible.
    let mut c = Conformance::for_sender(&s, EpochAnchor::first_packet_of(&s));
    feed(&s, &mut c, 2, Duration::from_micros(30), 0);
    assert_eq!(c.summary().verdict, Verdict::Narrow);
}

#[test]
fn a_stalled_then_catching_up_sender_is_wide_for_that_frame() {
    let s = FrameSchedule::new(&hd(), SenderType::NarrowGapped).with_lead(8);
    let (f, epoch) = (hd(), Timestamp::from_millis(5));
    let mut c = Conformance::for_sender(&s, known(0));
    for n in 0..3u64 {
        let e = f.frame_epoch(epoch, n);
        for k in 0..4320 {
            let due = s.send_time(e, k);
            // In frame 1, the pacer wakes 30 µs late at packet 1000 and sends the backlog.
            let stall_end = s.send_time(e, 1000) + Duration::from_micros(30);
            let at = if n == 1 && due >= s.send_time(e, 1000) {
                due.max(stall_end)
            } else {
                due
            };
            let marker = k == 4319;
            let r = c.on_packet(Arrival {
                at,
                rtp_ts: f.rtp_timestamp(n),
                marker,
            });
            if let (1, Some(r)) = (n, r) {
                assert!((7..=9).contains(&r.cinst_max), "{r:?}");
                assert!(!r.narrow && r.wide && r.vrx_min >= 0, "{r:?}");
            }
        }
    }
    let sum = c.summary();
    assert_eq!(
        (sum.narrow.violating_frames, sum.wide.violating_frames),
        (1, 0)
    );
    assert_eq!(sum.verdict, Verdict::Wide);
}

#[test]
fn frames_without_markers_and_stray_packets_are_accounted_for() {
    let s = FrameSchedule::new(&hd(), SenderType::NarrowGapped);
    let mut c = Conformance::for_sender(&s, known(0));
    let at = |us| Timestamp::from_millis(5) + Duration::from_micros(us);
    let p = |us, rtp_ts, marker| Arrival {
        at: at(us),
        rtp_ts,
        marker,
    };
    assert!(c.on_packet(p(700, RtpTime(0), false)).is_none());
    // The next frame starts before frame 0's marker: frame 0 is closed, incomplete.
    let r = c.on_packet(p(17_300, RtpTime(1501), false)).unwrap();
    assert_eq!((r.rtp_ts.get(), r.packets, r.complete), (0, 1, false));
    // A late packet of frame 0 belongs to no frame.
    assert!(c.on_packet(p(17_310, RtpTime(0), true)).is_none());
    assert!(
        c.on_packet(p(17_320, RtpTime(1501), true))
            .unwrap()
            .complete
    );
    assert!(c.finish().is_none());
    let sum = c.summary();
    assert_eq!(
        (sum.frames, sum.incomplete_frames, sum.stray_packets),
        (2, 1, 1)
    );
    assert_eq!(sum.packets, 4);
    assert_serialize(&sum);
    assert_eq!(
        Conformance::for_sender(&s, known(0)).summary().verdict,
        Verdict::NoFrames
    );
}

/// The summary is meant for JSON: it must implement `Serialize`.
fn assert_serialize<T: serde::Serialize>(_: &T) {}

#[global_allocator]
static GLOBAL: metronome_testkit::CountingAlloc = metronome_testkit::CountingAlloc;

#[test]
fn schedules_and_measurement_allocate_nothing_per_packet() {
    for kind in [
        SenderType::NarrowGapped,
        SenderType::Wide,
        SenderType::Burst,
    ] {
        let s = FrameSchedule::new(&hd(), kind);
        let mut c = Conformance::for_sender(&s, known(0));
        let before = metronome_testkit::allocations();
        feed(&s, &mut c, 2, Duration::ZERO, 0);
        c.finish();
        assert_eq!(metronome_testkit::allocations(), before, "{kind:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any NPACKETS and frame rate: the gapped schedule is strictly increasing, stays inside
    /// [0, TFRAME), and a receiver on the same clock finds it narrow.
    #[test]
    fn gapped_schedule_is_monotonic_inside_the_frame_and_narrow(
        npackets in 1u32..12_000,
        fps in 23u32..=120,
        ntsc in any::<bool>(),
        height in prop::sample::select(vec![480u32, 720, 1080, 2160]),
    ) {
        let rate = if ntsc { FrameRate::new(fps * 1000, 1001) } else { FrameRate::new(fps, 1) };
        let f = FrameFormat::new(rate, npackets, height);
        let s = FrameSchedule::new(&f, SenderType::NarrowGapped);
        let mut prev = None;
        for k in 0..npackets {
            let o = s.offset(k);
            prop_assert!(o < f.tframe());
            prop_assert!(prev.is_none_or(|p| o > p), "k {k}: {o:?} after {prev:?}");
            prev = Some(o);
        }
        let mut c = Conformance::for_sender(&s, known(7));
        feed(&s, &mut c, 2, Duration::ZERO, 7);
        let sum = c.summary();
        prop_assert_eq!(sum.verdict, Verdict::Narrow, "{:?}", sum);
        prop_assert_eq!(sum.cinst_max, 0);
    }
}
