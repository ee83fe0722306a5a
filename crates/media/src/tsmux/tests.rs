use super::*;
use crate::analyze::TsAnalyzer;
use metronome_wire::ts::{TsPacket, PCR_MODULUS};

/// A fake access unit of `len` bytes: SPS/PPS/IDR NAL headers or a P slice, then filler.
fn fake_au(len: usize, idr: bool, buf: &mut Vec<u8>) {
    buf.clear();
    if idr {
        buf.extend_from_slice(&[
            0, 0, 0, 1, 0x67, 0x42, 0, 0, 0, 1, 0x68, 0xce, 0, 0, 0, 1, 0x65,
        ]);
    } else {
        buf.extend_from_slice(&[0, 0, 0, 1, 0x41]);
    }
    buf.resize(len.max(buf.len()), 0x5a);
}

/// Muxes `secs` of 30 fps fake video (IDR 60 kB every second, P frames `p_len`), checking each
/// packet's time and PCR against the constant-rate formula. Returns the analyzer's report.
fn mux_fake(cfg: TsMuxConfig, secs: u64, p_len: usize) -> (crate::TsReport, MuxStats) {
    let mut mux = TsMuxer::new(cfg).unwrap();
    let mut an = TsAnalyzer::new();
    let (mut pkt, mut au) = ([0u8; 188], Vec::new());
    let frames = secs * 30;
    let mut next = 0u64;
    let mut i = 0u64;
    while next < frames || !mux.is_drained() {
        while next < frames
            && Duration::from_nanos(next * 1_000_000_000 / 30) <= mux.next_packet_time()
        {
            let idr = next % 30 == 0;
            fake_au(if idr { 60_000 } else { p_len }, idr, &mut au);
            mux.push_access_unit(Duration::from_nanos(next * 1_000_000_000 / 30), &au, idr)
                .unwrap();
            next += 1;
        }
        let t = mux.write_packet(&mut pkt);
        let exact = i as u128 * 1504 * 1_000_000_000 / mux.config().mux_rate as u128;
        assert_eq!(t.as_nanos(), exact, "packet {i} time");
        if let Some(pcr) = TsPacket::parse(&pkt).unwrap().pcr() {
            assert_eq!(pcr, mux.slot_pcr(i) % PCR_MODULUS, "packet {i} PCR");
        }
        an.push(&pkt, t);
        i += 1;
    }
    (an.finish(), *mux.stats())
}

#[test]
fn constant_rate_stream_is_conformant() {
    let (r, s) = mux_fake(TsMuxConfig::default(), 5, 10_000);
    assert_eq!(r.first_error, None);
    assert_eq!((r.sync_errors, r.cc_errors, r.psi_errors), (0, 0, 0));
    assert_eq!((r.pmt_pid, r.pcr_pid), (Some(0x1000), Some(0x100)));
    assert!(
        r.max_pcr_interval <= Duration::from_millis(40),
        "{:?}",
        r.max_pcr_interval
    );
    assert!(
        r.max_pat_interval <= Duration::from_millis(100),
        "{:?}",
        r.max_pat_interval
    );
    assert!(
        r.max_pmt_interval <= Duration::from_millis(100),
        "{:?}",
        r.max_pmt_interval
    );
    assert!(
        r.max_pcr_drift_ns < 100,
        "PCR drifts from packet time by {} ns",
        r.max_pcr_drift_ns
    );
    assert_eq!(r.pes_count, 150);
    assert_eq!(r.random_access_count, 5);
    assert_eq!(r.missing_aud, 0);
    assert_eq!(r.late_pes, 0);
    assert_eq!((s.frames_in, s.frames_out, s.late_frames), (150, 150, 0));
    assert!(
        s.null_packets > 0,
        "a 2.6 Mbit/s load in a 5 Mbit/s mux needs stuffing"
    );
    assert_eq!(s.packets, r.packets);
}

#[test]
fn overloaded_mux_counts_late_frames() {
    // 30 kB P frames at 30 fps is 7.2 Mbit/s: more than the 5 Mbit/s mux can carry.
    let (r, s) = mux_fake(TsMuxConfig::default(), 2, 30_000);
    assert!(s.late_frames > 10, "{s:?}");
    assert_eq!(
        r.late_pes, s.late_frames,
        "the analyzer and the muxer must agree on lateness"
    );
    assert!(s.min_slack_ns.unwrap() < 0);
    assert_eq!(r.cc_errors, 0);
}

#[test]
fn pcr_and_pts_wrap() {
    // Start 1 s before the 33-bit wrap, so PCR and PTS both wrap during the stream.
    let wrap_secs = PCR_MODULUS / PCR_HZ;
    let cfg = TsMuxConfig {
        start_offset: Duration::from_secs(wrap_secs - 1),
        mux_rate: 3_000_000,
        ..TsMuxConfig::default()
    };
    let (r, s) = mux_fake(cfg, 3, 5_000);
    assert_eq!(r.first_error, None);
    assert!(r.max_pcr_drift_ns < 100);
    assert_eq!((r.late_pes, s.late_frames), (0, 0));
    assert_eq!(r.pes_count, 90);
}

#[test]
fn aud_not_doubled_and_pts_exact() {
    let mut mux = TsMuxer::new(TsMuxConfig::default()).unwrap();
    // Default offset 1 s + delay 450 ms: frame 1 at 30 fps has PTS 1.45 s + 3000 ticks.
    assert_eq!(
        mux.pts_for(Duration::from_nanos(1_000_000_000 / 30)),
        130_500 + 3000
    );
    let au = [0, 0, 0, 1, 9, 0xf0, 0, 0, 0, 1, 0x41, 1, 2, 3];
    mux.push_access_unit(Duration::ZERO, &au, false).unwrap();
    let mut pkt = [0u8; 188];
    let mut found = false;
    for _ in 0..10 {
        mux.write_packet(&mut pkt);
        let p = TsPacket::parse(&pkt).unwrap();
        if p.pid() == 0x100 && p.payload_unit_start() {
            let pl = p.payload();
            assert_eq!(&pl[14..], &au, "PES payload must be the AU as given");
            assert_eq!(decode_timestamp(pl[9..14].try_into().unwrap()), 130_500);
            found = true;
        }
    }
    assert!(found);
}

#[test]
fn bad_config_is_refused() {
    let bad = [
        TsMuxConfig {
            mux_rate: 100,
            ..Default::default()
        },
        TsMuxConfig {
            video_pid: 0x1000,
            ..Default::default()
        },
        TsMuxConfig {
            pcr_interval: Duration::from_micros(100),
            ..Default::default()
        },
    ];
    for cfg in bad {
        assert!(TsMuxer::new(cfg.clone()).is_err(), "{cfg:?}");
    }
}

#[test]
fn the_rate_changes_at_the_marked_frame_with_clock_and_pcr_continuous() {
    // 3 Mbit/s for 2 s, then 1.5 Mbit/s from the IDR frame at 2 s on, with frames sized for
    // each rate: the slots after the switch are spaced at the new rate, continuing the old
    // timeline, and the PCR follows the packets' times exactly (no drift, no step).
    let mut mux = TsMuxer::new(TsMuxConfig {
        mux_rate: 3_000_000,
        ..Default::default()
    })
    .unwrap();
    let mut an = TsAnalyzer::new();
    let (mut pkt, mut au) = ([0u8; 188], Vec::new());
    let (frames, switch_frame) = (120u64, 60u64);
    let (mut next, mut times, mut switched_at) = (0u64, Vec::new(), None);
    while next < frames || !mux.is_drained() {
        while next < frames
            && Duration::from_nanos(next * 1_000_000_000 / 30) <= mux.next_packet_time()
        {
            let idr = next % 30 == 0;
            let p_len = if next < switch_frame { 8_000 } else { 4_000 };
            fake_au(if idr { 30_000 } else { p_len }, idr, &mut au);
            let capture = Duration::from_nanos(next * 1_000_000_000 / 30);
            mux.push_access_unit(capture, &au, idr).unwrap();
            if next == switch_frame {
                mux.switch_rate_at_last_frame(1_500_000).unwrap();
            }
            next += 1;
        }
        let rate_before = mux.rate();
        let t = mux.write_packet(&mut pkt);
        if rate_before != mux.rate() {
            switched_at = Some(times.len());
        }
        if let Some(pcr) = TsPacket::parse(&pkt).unwrap().pcr() {
            let start = mux.config().start_offset.as_nanos() as u64;
            let pcr_ns = pcr as u128 * 1_000_000_000 / PCR_HZ as u128;
            let t_ns = (start + t.as_nanos() as u64) as u128;
            assert!(
                pcr_ns.abs_diff(t_ns) < 1_000,
                "PCR {pcr_ns} ns at {t_ns} ns"
            );
        }
        an.push(&pkt, t);
        times.push(t.as_nanos() as u64);
    }
    let r = an.finish();
    assert_eq!(r.first_error, None);
    assert_eq!((r.cc_errors, r.late_pes), (0, 0), "{r:?}");
    assert!(r.max_pcr_drift_ns < 1_000, "{r:?}");
    let k = switched_at.expect("the rate changed");
    // The switch comes when the marked frame starts leaving: after its capture at 2 s.
    assert!(times[k] >= 2_000_000_000, "{}", times[k]);
    let gap = |i: usize| times[i + 1] - times[i];
    let old = 1504 * 1_000_000_000 / 3_000_000;
    let new = 1504 * 1_000_000_000 / 1_500_000;
    assert!(gap(k - 2).abs_diff(old) <= 1, "{} vs {old}", gap(k - 2));
    assert!(gap(k + 1).abs_diff(new) <= 1, "{} vs {new}", gap(k + 1));
    assert!(times.windows(2).all(|w| w[1] > w[0]), "the clock runs on");
    // Rates outside what the muxer can run at are refused, and need a frame to start at.
    assert!(mux.switch_rate_at_last_frame(100).is_err());
    let mut empty = TsMuxer::new(TsMuxConfig::default()).unwrap();
    assert!(empty.switch_rate_at_last_frame(2_000_000).is_err());
}
