use super::*;
use crate::decode::VideoCodec;
use crate::motion::Motion;
use metronome_quality::playout::FrameType;
use metronome_testkit::TempDir;

fn spec(frames: u32) -> LadderSpec {
    LadderSpec {
        encoder: EncoderConfig {
            width: 176,
            height: 144,
            ..EncoderConfig::seed002(2)
        },
        quantizers: vec![2, 5, 12, 31],
        frames,
        content: "motion seed 3".into(),
    }
}

#[test]
fn every_rung_has_the_same_gops_and_the_rate_falls_with_the_quantizer() {
    let ladder = Ladder::build(spec(36), &mut Motion::new(25, 3).unwrap()).unwrap();
    assert_eq!(ladder.frames(), 36);
    let mut last = f64::INFINITY;
    for r in &ladder.rungs {
        let kinds: Vec<FrameType> = r.frames.iter().map(|f| f.kind).collect();
        for (i, k) in kinds.iter().enumerate() {
            assert_eq!(
                *k == FrameType::I,
                i % 12 == 0,
                "q {}: {kinds:?}",
                r.quantizer
            );
        }
        let rate = r.rate_bps(25);
        assert!(rate < last, "q {}: {rate} after {last}", r.quantizer);
        last = rate;
    }
    assert_eq!(
        ladder.gop_bytes(5, 1),
        ladder.rung(5).frames[12..24]
            .iter()
            .map(|f| f.data.len() as u64)
            .sum::<u64>()
    );
    // A quantizer between rungs takes the coarser: a controller's rate is not exceeded.
    assert_eq!(ladder.rung(6).quantizer, 12, "the next coarser rung");
    assert_eq!(ladder.rung(3).quantizer, 5);
    assert_eq!(
        (ladder.rung(1).quantizer, ladder.rung(40).quantizer),
        (2, 31)
    );
}

#[test]
fn a_second_run_reads_the_ladder_back_instead_of_encoding() {
    let dir = TempDir::new("ladder-cache");
    let content = || -> Result<Box<dyn Pictures>, MediaError> { Ok(Box::new(Motion::new(25, 3)?)) };
    let first = Ladder::load_or_build(spec(24), Some(dir.path()), content).unwrap();
    assert!(!first.from_cache);
    let never = || -> Result<Box<dyn Pictures>, MediaError> { panic!("encoded again") };
    let second = Ladder::load_or_build(spec(24), Some(dir.path()), never).unwrap();
    assert!(second.from_cache);
    assert_eq!(first.rungs, second.rungs);
    // Other settings are another ladder.
    let mut other = spec(24);
    other.encoder.gop = 6;
    let third = Ladder::load_or_build(other, Some(dir.path()), content).unwrap();
    assert!(!third.from_cache);
    // A damaged file is a miss: encoded again, never a wrong ladder or a panic.
    let file = cache::path(dir.path(), &spec(24).key());
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    assert!(cache::load(dir.path(), &spec(24)).is_none());
    let again = Ladder::load_or_build(spec(24), Some(dir.path()), content).unwrap();
    assert!(!again.from_cache);
    assert_eq!(again.rungs, first.rungs, "the encoder is deterministic");
}

#[test]
fn the_cache_key_names_every_setting() {
    let a = spec(24);
    let mut b = spec(24);
    b.encoder.codec = VideoCodec::H264;
    assert_ne!(a.key(), b.key());
    let mut c = spec(24);
    c.content = "motion seed 4".into();
    assert_ne!(a.key(), c.key());
}
