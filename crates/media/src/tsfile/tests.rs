use super::*;
use crate::analyze::TsAnalyzer;
use crate::tsmux::{TsMuxConfig, TsMuxer};
use metronome_wire::ts::{encode_pcr, PCR_MODULUS};
use proptest::prelude::*;
use std::io::Cursor;

/// A constant-rate stream from our muxer (fake 30 fps video), with each packet's mux time.
fn muxed(cfg: TsMuxConfig, secs: u64) -> (Vec<u8>, Vec<Duration>) {
    let mut mux = TsMuxer::new(cfg).unwrap();
    let (mut bytes, mut times, mut pkt) = (Vec::new(), Vec::new(), [0u8; 188]);
    let mut au = vec![0, 0, 0, 1, 0x41];
    au.resize(8_000, 0x11);
    let mut next = 0u64;
    while next < secs * 30 || !mux.is_drained() {
        let capture = Duration::from_nanos(next * 1_000_000_000 / 30);
        if next < secs * 30 && capture <= mux.next_packet_time() {
            mux.push_access_unit(capture, &au, next % 30 == 0).unwrap();
            next += 1;
        }
        times.push(mux.write_packet(&mut pkt));
        bytes.extend_from_slice(&pkt);
    }
    (bytes, times)
}

fn source(bytes: Vec<u8>, looping: bool) -> Result<TsFileSource, MediaError> {
    TsFileSource::from_reader("test.ts".into(), Box::new(Cursor::new(bytes)), looping)
}

fn drain(src: &mut TsFileSource, limit: usize) -> Vec<([u8; 188], Duration)> {
    let mut out = Vec::new();
    let mut pkt = [0u8; 188];
    while out.len() < limit {
        match src.next_packet(&mut pkt).unwrap() {
            Some(t) => out.push((pkt, t)),
            None => break,
        }
    }
    out
}

/// Index of the first packet with a PCR.
fn first_pcr(bytes: &[u8]) -> usize {
    bytes
        .chunks(188)
        .position(|p| TsPacket::parse(p).unwrap().pcr().is_some())
        .unwrap()
}

#[test]
fn times_match_the_muxer_clock() {
    let (bytes, mux_times) = muxed(TsMuxConfig::default(), 2);
    let k = first_pcr(&bytes);
    let mut src = source(bytes.clone(), false).unwrap();
    assert_eq!(src.pcr_pid(), Some(0x100));
    assert_eq!(src.nominal_bitrate().map(|r| r / 1000), Some(5_000));
    let got = drain(&mut src, usize::MAX);
    assert_eq!(got.len(), mux_times.len());
    for (i, ((pkt, t), mt)) in got.iter().zip(&mux_times).enumerate() {
        assert_eq!(
            &pkt[..],
            &bytes[i * 188..(i + 1) * 188],
            "packet {i} must pass unchanged"
        );
        let expected = mt.saturating_sub(mux_times[k]);
        let err = t.as_nanos().abs_diff(expected.as_nanos());
        assert!(err < 100, "packet {i}: {t:?} vs {expected:?}");
    }
    assert_eq!(src.stats().rebases, 0);
    assert_eq!(
        src.describe(),
        "MPEG-TS file 'test.ts' (PCR PID 0x100, 5 Mbit/s)"
    );
}

#[test]
fn pcr_wrap_keeps_time_linear() {
    let cfg = TsMuxConfig {
        start_offset: Duration::from_nanos(PCR_MODULUS / 27 * 1000) - Duration::from_millis(500),
        ..TsMuxConfig::default()
    };
    let (bytes, mux_times) = muxed(cfg, 2);
    let k = first_pcr(&bytes);
    let got = drain(&mut source(bytes, false).unwrap(), usize::MAX);
    for (i, ((_, t), mt)) in got.iter().zip(&mux_times).enumerate().skip(k) {
        let err = t.as_nanos().abs_diff((*mt - mux_times[k]).as_nanos());
        assert!(err < 1000, "packet {i}: {t:?} vs {mt:?}");
    }
}

#[test]
fn pcr_jump_rebases_at_the_last_rate() {
    let (mut bytes, mux_times) = muxed(TsMuxConfig::default(), 2);
    let k = first_pcr(&bytes);
    // From packet 3000 on, every PCR is an hour later: a time-base jump without an indicator.
    for p in bytes.chunks_mut(188).skip(3000) {
        if let Some(pcr) = TsPacket::parse(p).unwrap().pcr() {
            p[6..12].copy_from_slice(&encode_pcr(pcr + 3600 * PCR_HZ));
        }
    }
    let mut src = source(bytes, false).unwrap();
    let got = drain(&mut src, usize::MAX);
    assert_eq!(src.stats().rebases, 1);
    let last = got.len() - 1;
    let err = got[last]
        .1
        .as_nanos()
        .abs_diff((mux_times[last] - mux_times[k]).as_nanos());
    assert!(
        err < 2_000,
        "the rebased timeline should continue at the same rate: {err} ns off"
    );
}

#[test]
fn looping_keeps_time_and_continuity_counters_running() {
    let (bytes, _) = muxed(TsMuxConfig::default(), 1);
    let n = bytes.len() / 188;
    let mut src = source(bytes, true).unwrap();
    let got = drain(&mut src, 3 * n + 10);
    assert_eq!(got.len(), 3 * n + 10, "a looping source does not end");
    assert!(
        got.windows(2).all(|w| w[0].1 <= w[1].1),
        "time went backwards"
    );
    // Three passes of a stream that lasts n packets at 5 Mbit/s.
    let span = got[3 * n].1.as_secs_f64();
    let expected = 3.0 * n as f64 * 1504.0 / 5e6;
    assert!(
        (span - expected).abs() < 0.005,
        "3 passes last {span} s, expected {expected}"
    );
    let mut an = TsAnalyzer::new();
    for (p, t) in &got {
        an.push(p, *t);
    }
    let r = an.finish();
    assert_eq!(r.cc_errors, 0, "{:?}", r.first_error);
    let flagged = got
        .iter()
        .filter(|(p, _)| TsPacket::parse(p).unwrap().discontinuity())
        .count();
    assert_eq!(flagged, 3, "one discontinuity_indicator per restart");
    assert_eq!(src.stats().loops, 3);
}

#[test]
fn bad_inputs_give_clear_errors() {
    let err = |r: Result<TsFileSource, MediaError>| r.unwrap_err().to_string();
    assert!(err(source(vec![], false)).contains("empty"));
    assert!(err(source(vec![0x47; 100], false)).contains("less than one 188-byte packet"));
    assert!(err(source(
        b"hello world, this is not a transport stream".repeat(20),
        false
    ))
    .contains("sync byte"));
    let mut m2ts = Vec::new();
    for _ in 0..5 {
        m2ts.extend_from_slice(&[0, 0, 0, 0, 0x47]);
        m2ts.extend_from_slice(&[0xff; 187]);
    }
    assert!(err(source(m2ts, false)).contains("192-byte"));
    // Valid packets but no PCR anywhere.
    let mut no_pcr = Vec::new();
    for _ in 0..50 {
        no_pcr.extend_from_slice(&[0x47, 0x01, 0x00, 0x10]);
        no_pcr.extend_from_slice(&[0xff; 184]);
    }
    assert!(err(source(no_pcr, true)).contains("no PCR"));
    let missing = TsFileSource::open("/nonexistent/metronome/x.ts", false).unwrap_err();
    assert!(matches!(missing, MediaError::Open { .. }), "{missing}");
}

#[test]
fn truncated_and_resynced_streams_end_cleanly() {
    let (bytes, _) = muxed(TsMuxConfig::default(), 1);
    let n = bytes.len() / 188;
    let mut cut = bytes.clone();
    cut.truncate(bytes.len() - 100);
    let mut src = source(cut.clone(), false).unwrap();
    assert_eq!(drain(&mut src, usize::MAX).len(), n - 1);
    assert_eq!(src.stats().skipped_bytes, 88);
    // Said once, with how many bytes were dropped; looping says it once too.
    let w = src.take_warning().expect("a warning");
    assert!(w.contains("ends mid-packet: its last 88 bytes"), "{w}");
    assert_eq!(src.take_warning(), None);
    let mut looped = source(cut, true).unwrap();
    let _ = drain(&mut looped, 3 * n);
    assert!(looped.take_warning().is_some());
    let _ = drain(&mut looped, 3 * n);
    assert_eq!(looped.take_warning(), None);
    let mut whole = source(bytes.clone(), false).unwrap();
    let _ = drain(&mut whole, usize::MAX);
    assert_eq!(whole.take_warning(), None);
    // 7 stray bytes in the middle: one resync, no packet lost but the one they hit.
    let mut broken = bytes[..188 * 500].to_vec();
    broken.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7]);
    broken.extend_from_slice(&bytes[188 * 500..]);
    let mut src = source(broken, false).unwrap();
    let got = drain(&mut src, usize::MAX);
    assert_eq!(got.len(), n);
    assert_eq!(src.stats().resyncs, 1);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Random bytes (with sync bytes sprinkled at packet starts so some get past the open check)
    /// never panic, and whatever is read comes out in time order.
    #[test]
    fn garbage_never_panics(mut data in proptest::collection::vec(any::<u8>(), 0..20_000), sync in any::<bool>(), looping in any::<bool>()) {
        if sync {
            for k in (0..data.len()).step_by(188) {
                data[k] = 0x47;
            }
        }
        if let Ok(mut src) = source(data, looping) {
            let mut pkt = [0u8; 188];
            let mut last = Duration::ZERO;
            for _ in 0..2_000 {
                match src.next_packet(&mut pkt) {
                    Ok(Some(t)) => { prop_assert!(t >= last); last = t; }
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
}
