use super::*;
use std::time::Duration;

fn stream(period_us: u64, deadline_us: u64, cost_us: u64, bps: u64) -> TaskParams {
    TaskParams {
        period: Duration::from_micros(period_us),
        deadline: Duration::from_micros(deadline_us),
        cost: Duration::from_micros(cost_us),
        bitrate_bps: bps,
    }
}

fn platform(cores: usize, budget: u32) -> Platform {
    Platform {
        cores,
        budget: Budget::percent(budget),
        link_capacity_bps: None,
        blocking: Duration::ZERO,
    }
}

#[test]
fn worst_fit_spreads_identical_streams_and_prefers_the_lower_core_on_ties() {
    let mut a = Admission::new(Policy::Edf, platform(3, 95));
    let cores: Vec<usize> = (0..7)
        .map(|i| {
            a.try_admit(i, "s", stream(1000, 1000, 100, 0))
                .unwrap()
                .core
        })
        .collect();
    assert_eq!(cores, vec![0, 1, 2, 0, 1, 2, 0]);
    assert_eq!(a.admitted(), 7);
    assert!((a.core_utilisation(0) - 0.3).abs() < 1e-12);
    assert_eq!(a.core_utilisation(9), 0.0);
    // A heavy stream goes where there is room, then the light ones avoid that core.
    let mut a = Admission::new(Policy::Dm, platform(2, 100));
    assert_eq!(a.try_admit(1, "big", stream(10, 10, 6, 0)).unwrap().core, 0);
    let p = a.try_admit(2, "small", stream(10, 10, 1, 0)).unwrap();
    assert_eq!(p.core, 1);
    assert!((p.core_utilisation_after - 0.1).abs() < 1e-12);
    assert_eq!(a.try_admit(3, "mid", stream(10, 10, 5, 0)).unwrap().core, 1);
    assert_eq!(
        a.try_admit(4, "tiny", stream(10, 10, 3, 0)).unwrap().core,
        0
    );
    assert_eq!(a.core_of(4), Some(0));
}

#[test]
fn a_stream_too_big_for_any_core_names_the_least_loaded_one() {
    let mut a = Admission::new(Policy::Edf, platform(2, 95));
    a.try_admit(1, "cam1", stream(1000, 1000, 870, 0)).unwrap();
    a.try_admit(2, "cam2", stream(1000, 1000, 900, 0)).unwrap();
    // cam7: 10% of a core at 20 Mbit/s; core 0 would reach 97% of its 95% budget.
    let r = a
        .try_admit(7, "cam7", stream(1000, 1000, 100, 20_000_000))
        .unwrap_err();
    assert!(matches!(r, Refusal::Cpu { core: 0, .. }), "{r:?}");
    assert_eq!(
        r.to_string(),
        "admitting 'cam7' would put core 0 (the least loaded of 2) at 97.0% of its 95% budget; \
         free 2.0% of that core (about 4.0 Mbit/s of streams like this one) or add a core"
    );
    assert_eq!(r.name(), "cam7");
    assert_eq!(a.admitted(), 2);
}

#[test]
fn a_demand_failure_says_which_window_overflows() {
    let mut a = Admission::new(
        Policy::Edf,
        Platform {
            blocking: Duration::from_micros(10),
            ..platform(1, 95)
        },
    );
    a.try_admit(1, "bg", stream(20_000, 20_000, 1_000, 0))
        .unwrap();
    a.try_admit(2, "cam1", stream(20_000, 2_000, 1_000, 0))
        .unwrap();
    // U = 0.15, but cam1 and cam7 are both due within 2.1 ms of a common release.
    let r = a
        .try_admit(7, "cam7", stream(40_000, 2_100, 1_290, 0))
        .unwrap_err();
    assert!(
        matches!(
            r,
            Refusal::Cpu {
                cause: CpuCause::Demand { .. },
                ..
            }
        ),
        "{r:?}"
    );
    assert_eq!(
        r.to_string(),
        "admitting 'cam7' would let jobs due within 2.1 ms need 2.3 ms (10 µs of it for a packet \
         in flight) of core 0, but its 95% budget gives only 1.995 ms in that window; \
         lengthen its deadline or add a core"
    );
    // A deadline of 2.5 ms (2.375 ms available in that window) fits.
    assert!(a
        .try_admit(7, "cam7", stream(40_000, 2_500, 1_290, 0))
        .is_ok());
}

#[test]
fn a_dm_failure_names_the_stream_that_would_miss() {
    let mut a = Admission::new(Policy::Dm, platform(1, 100));
    a.try_admit(1, "cam1", stream(5, 5, 2, 0)).unwrap();
    let r = a.try_admit(2, "cam2", stream(7, 7, 4, 0)).unwrap_err();
    assert_eq!(
        r.to_string(),
        "admitting 'cam2' on core 0 would let its jobs take 8 µs or more, past their 7 µs \
         deadline (core at 97.1% of its 100% budget); lengthen deadlines, use EDF, or add a core"
    );
    // A short-deadline newcomer pushes an admitted stream over instead.
    let mut a = Admission::new(Policy::Dm, platform(1, 100));
    a.try_admit(1, "slow", stream(10, 6, 5, 0)).unwrap();
    let r = a.try_admit(2, "urgent", stream(10, 3, 2, 0)).unwrap_err();
    let victim_named = matches!(&r,
        Refusal::Cpu { cause: CpuCause::ResponseTime { victim, .. }, .. } if victim == "slow");
    assert!(victim_named, "{r:?}");
    let msg = r.to_string();
    assert!(
        msg.contains("would let jobs of 'slow' take 7 µs or more, past their 6 µs deadline"),
        "{msg}"
    );
}

#[test]
fn the_link_capacity_is_a_hard_limit_and_release_frees_it() {
    let mut a = Admission::new(
        Policy::Edf,
        Platform {
            link_capacity_bps: Some(1_000_000_000),
            ..platform(4, 95)
        },
    );
    for i in 0..4 {
        a.try_admit(i, "big", stream(1000, 1000, 10, 250_000_000))
            .unwrap();
    }
    assert_eq!(a.link_used_bps(), 1_000_000_000);
    let cam7 = stream(1000, 1000, 10, 4_000_000);
    let r = a.would_admit(7, "cam7", cam7).unwrap_err();
    assert_eq!(
        r.to_string(),
        "admitting 'cam7' (4.0 Mbit/s) would need 1.004 Gbit/s of the declared 1.0 Gbit/s link; \
         stop a stream or declare a larger --link-capacity"
    );
    assert!(a.release(2));
    assert!(!a.release(2));
    assert_eq!(a.link_used_bps(), 750_000_000);
    assert_eq!(a.try_admit(7, "cam7", cam7).unwrap().core, 2);
    let zero = stream(1000, 1000, 10, 0);
    assert!(a.try_admit(8, "free", zero).is_ok()); // 0 bit/s always fits
}

#[test]
fn invalid_duplicate_and_coreless_requests_are_refused_with_reasons() {
    let mut a = Admission::new(Policy::Edf, platform(1, 95));
    let r = a
        .try_admit(1, "cam1", stream(33_333, 40_000, 100, 0))
        .unwrap_err();
    assert_eq!(
        r.to_string(),
        "cannot admit 'cam1': its deadline 40 ms is longer than its period 33.333 ms; \
         use a deadline no longer than the period"
    );
    for bad in [stream(0, 0, 0, 0), stream(10, 0, 0, 0), stream(10, 5, 5, 0)] {
        assert!(matches!(
            a.try_admit(1, "x", bad),
            Err(Refusal::Invalid { .. })
        ));
    }
    a.try_admit(1, "cam1", stream(1000, 1000, 10, 0)).unwrap();
    let r = a
        .try_admit(1, "again", stream(1000, 1000, 10, 0))
        .unwrap_err();
    assert!(
        r.to_string().contains("stream id 1 is already admitted"),
        "{r}"
    );
    let none = Admission::new(Policy::Dm, platform(0, 95));
    let r = none
        .would_admit(1, "cam1", stream(1000, 1000, 10, 0))
        .unwrap_err();
    assert_eq!(
        r,
        Refusal::NoCores {
            name: "cam1".into()
        }
    );
    // A zero budget refuses everything that costs something, without panicking.
    let mut z = Admission::new(Policy::Dm, platform(2, 0));
    assert!(matches!(
        z.try_admit(1, "x", stream(10, 10, 1, 0)),
        Err(Refusal::Cpu { .. })
    ));
    assert!(z.try_admit(2, "free", stream(10, 10, 0, 0)).is_ok());
}

#[test]
fn the_snapshot_lists_streams_per_core_in_admission_order() {
    let mut a = Admission::new(Policy::Dm, platform(2, 95));
    a.try_admit(10, "a", stream(1000, 1000, 100, 1)).unwrap();
    a.try_admit(11, "b", stream(1000, 1000, 100, 2)).unwrap();
    a.try_admit(12, "c", stream(1000, 1000, 100, 3)).unwrap();
    let s = a.snapshot();
    assert_eq!(
        (s.policy, s.link_used_bps, s.cores.len()),
        (Policy::Dm, 6, 2)
    );
    let names: Vec<&str> = s.cores[0].streams.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["a", "c"]);
    assert_eq!(s.platform, *a.platform());
    assert_eq!(a.policy(), Policy::Dm);
}

#[test]
fn link_only_reservations_share_the_link_with_core_streams() {
    let mut a = Admission::new(
        Policy::Edf,
        Platform {
            link_capacity_bps: Some(1_000_000_000),
            ..platform(1, 95)
        },
    );
    a.try_reserve_link(1, "raw", 800_000_000).unwrap();
    assert_eq!(a.link_used_bps(), 800_000_000);
    // A core stream now finds the link full...
    let ts = stream(1000, 1000, 10, 300_000_000);
    let r = a.would_admit(2, "ts", ts).unwrap_err();
    assert!(r.to_string().contains("1.1 Gbit/s"), "{r}");
    // ...and so does a second link-only one; the same id twice is a duplicate.
    let r = a.try_reserve_link(3, "raw2", 300_000_000).unwrap_err();
    assert!(r.to_string().contains("admitting 'raw2'"), "{r}");
    assert!(a.try_reserve_link(1, "raw", 1).is_err());
    // A reservation is not a core stream: `release` leaves it, `release_link` frees it.
    assert!(!a.release(1));
    assert!(a.release_link(1));
    assert!(!a.release_link(1));
    assert_eq!(a.link_used_bps(), 0);
    assert!(a.try_admit(2, "ts", ts).is_ok());
}
