//! `metronome bench viewers` as a script runs it: its `--json` document against its schema.

mod common;

/// `bench viewers --json`, shortened (3 viewers sharing an encoder, 2 with one each, 1 s a
/// measurement, a small picture): one document, as its schema says, with both modes measured
/// at the viewer counts asked for and packets reaching every viewer.
#[test]
fn bench_viewers_json_is_what_its_schema_says() {
    let _one = common::serial();
    let out = common::run(
        common::bin().args([
            "bench",
            "viewers",
            "--viewers",
            "3",
            "--baseline-viewers",
            "2",
            "--duration",
            "1s",
            "--size",
            "320x180",
            "--json",
        ]),
        std::time::Duration::from_secs(120),
    )
    .expect_success();
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("one JSON document");
    common::assert_valid(&v, "bench-viewers");
    assert_eq!(v["shared"]["many"]["viewers"], 3, "{v}");
    assert_eq!(v["per_session"]["many"]["viewers"], 2, "{v}");
    for mode in ["shared", "per_session"] {
        for n in ["one", "many"] {
            let m = &v[mode][n];
            assert!(
                m["packets_per_s_min"].as_f64().is_some_and(|p| p > 0.0),
                "{mode} {n}: {m}"
            );
        }
    }
}
