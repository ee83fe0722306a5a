//! Lab scenario files: the format, sweeps, and errors that name the line.

use metronome_config::scenario::{FlowKind, LossDecl, RateShape, ScenarioFile};
use std::time::Duration;

const SEED001: &str = include_str!("../../lab/scenarios/seed001-udp.toml");

#[test]
fn seed001_udp_has_ten_points_and_resolves() {
    let f = ScenarioFile::parse(SEED001, "seed001-udp.toml").unwrap();
    let points = f.points();
    assert_eq!(points.len(), 10);
    // The last parameter varies fastest.
    assert_eq!(points[0].to_string(), "hold_extra=0ms, rate=2mbit");
    assert_eq!(points[1].to_string(), "hold_extra=0ms, rate=4mbit");
    assert_eq!(points[5].to_string(), "hold_extra=1.2ms, rate=2mbit");
    let all = f.resolve_all().unwrap();
    let (_, s) = &all[6];
    assert_eq!(s.nodes, ["switch", "server", "poor", "moderate", "good"]);
    assert_eq!(s.links.len(), 4);
    let poor = &s.links[1];
    assert_eq!((poor.a.as_str(), poor.b.as_str()), ("switch", "poor"));
    assert_eq!(poor.ab.1.rate_bps, Some(10_000_000));
    assert_eq!(poor.ab.1.netem_limit, Some(2));
    assert_eq!(poor.ab.1.hold_extra, Duration::from_micros(1200));
    assert_eq!(s.flows.len(), 3);
    assert_eq!(
        s.flows[0].kind,
        FlowKind::Udp {
            payload: 1470,
            rate: RateShape::Constant(4_000_000)
        }
    );
    assert_eq!(s.flows[0].duration, Duration::from_secs(10));
    let r = s.reference.as_ref().unwrap();
    assert_eq!(r.rows[1].1, [0.0, 0.0, 9.3, 33.0, 47.0]);
}

fn err(text: &str) -> String {
    let f = match ScenarioFile::parse(text, "t.toml") {
        Ok(f) => f,
        Err(e) => return e.to_string(),
    };
    match f.resolve_all() {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

const BASE: &str = r#"name = "t"
[links.l]
rate = "10mbit"
[topology]
shape = "chain"
nodes = ["a", "b"]
link = "l"
[[flow]]
kind = "udp"
from = "a"
to = "b"
rate = "1mbit"
"#;

#[test]
fn a_good_small_file_parses() {
    let f = ScenarioFile::parse(BASE, "t.toml").unwrap();
    let s = f.resolve(&f.points()[0]).unwrap();
    assert_eq!(s.flows[0].name, "flow1");
    assert_eq!(s.seed, 0);
}

#[test]
fn errors_name_the_line_and_what_is_expected() {
    let e = err(&BASE.replace("rate = \"10mbit\"", "rate = \"10 megabits\""));
    assert!(e.starts_with("t.toml line 3"), "{e}");
    assert!(e.contains("4mbit"), "{e}");

    let e = err(&BASE.replace("link = \"l\"", "link = \"l\"\nfanout = 3"));
    assert!(e.starts_with("t.toml line 8"), "{e}");
    assert!(e.contains("unknown key 'fanout'"), "{e}");

    let e = err(&BASE.replace("to = \"b\"", "to = \"c\""));
    assert!(e.starts_with("t.toml line 8"), "{e}");
    assert!(e.contains("to = \"c\" is not a node"), "{e}");

    let e = err(&BASE.replace("link = \"l\"", "link = \"wan\""));
    assert!(
        e.contains("no link profile 'wan'") && e.contains("[links.wan]"),
        "{e}"
    );

    let e = err(&BASE.replace("kind = \"udp\"", "kind = \"quic\""));
    assert!(
        e.contains("\"udp\", \"tcp\", \"rtp\" or \"command\""),
        "{e}"
    );

    // A command flow names its program; other kinds take no program.
    let e = err(&BASE.replace("kind = \"udp\"", "kind = \"command\""));
    assert!(e.contains("a command flow has no 'rate'"), "{e}");
    let cmd = BASE
        .replace("kind = \"udp\"", "kind = \"command\"")
        .replace("rate = \"1mbit\"", "args = [\"-s\"]");
    let e = err(&cmd);
    assert!(e.contains("needs program = "), "{e}");
    let e = err(&BASE.replace("rate = \"1mbit\"", "rate = \"1mbit\"\nprogram = \"iperf3\""));
    assert!(e.contains("a udp flow has no 'program'"), "{e}");

    let e = err(&BASE.replace("rate = \"1mbit\"", "rate = \"1mbit\"\ncc = \"reno\""));
    assert!(e.contains("a udp flow has no 'cc'"), "{e}");

    // A TCP flow's initial window: segments, 1 to 100; a key of TCP flows only.
    let e = err(&BASE.replace("rate = \"1mbit\"", "rate = \"1mbit\"\ninitial_window = 2"));
    assert!(e.contains("a udp flow has no 'initial_window'"), "{e}");
    let tcp = BASE.replace("kind = \"udp\"", "kind = \"tcp\"");
    let e = err(&tcp.replace("rate = \"1mbit\"", "initial_window = 0"));
    assert!(
        e.contains("initial_window = 0: a congestion window of 1 to 100"),
        "{e}"
    );
    assert!(matches!(
        tcp_kind(&tcp.replace("rate = \"1mbit\"", "initial_window = 2")),
        metronome_config::scenario::FlowKind::Tcp {
            initial_window: Some(2),
            ..
        }
    ));

    // Its largest window: segments, 1 to 10000 (ns-2's window_); TCP flows only.
    let e = err(&BASE.replace("rate = \"1mbit\"", "rate = \"1mbit\"\nmax_window = 20"));
    assert!(e.contains("a udp flow has no 'max_window'"), "{e}");
    let e = err(&tcp.replace("rate = \"1mbit\"", "max_window = 0"));
    assert!(e.contains("max_window = 0: a window of 1 to 10000"), "{e}");
    let e = err(&tcp.replace("rate = \"1mbit\"", "max_window = 10001"));
    assert!(
        e.contains("max_window = 10001: a window of 1 to 10000"),
        "{e}"
    );
    let e = err(&BASE.replace("rate = \"1mbit\"", "rate = \"1mbit\"\ndelayed_ack = false"));
    assert!(e.contains("a udp flow has no 'delayed_ack'"), "{e}");
    assert!(matches!(
        tcp_kind(&tcp.replace("rate = \"1mbit\"", "max_window = 20")),
        metronome_config::scenario::FlowKind::Tcp {
            max_window: Some(20),
            delayed_ack: true,
            ..
        }
    ));
    assert!(matches!(
        tcp_kind(&tcp.replace("rate = \"1mbit\"", "delayed_ack = false")),
        metronome_config::scenario::FlowKind::Tcp {
            delayed_ack: false,
            ..
        }
    ));

    let e = err(&BASE.replace("[links.l]", "[links.l]\nloss = 1.5"));
    assert!(e.starts_with("t.toml line 3"), "{e}");
    assert!(e.contains("probability"), "{e}");

    let e = err(&BASE.replace("[links.l]", "[links.l]\ndelay = 20"));
    assert!(e.contains("needs a unit"), "{e}");

    let e = err(&BASE.replace("[links.l]", "[links.l]\nlatency = \"20ms\""));
    assert!(
        e.starts_with("t.toml line 2") && e.contains("needs rate and burst"),
        "{e}"
    );

    let e = err("name = \"t\"\n[[flow]\n");
    assert!(e.starts_with("t.toml line 2"), "{e}");

    // `interval = "1ns"` once made a run allocate 7.3 GB for its interval rows.
    let e = err(&BASE.replacen("name = \"t\"", "name = \"t\"\ninterval = \"1ns\"", 1));
    assert!(
        e.contains("at most 100000") && e.contains("at least 1 ms"),
        "{e}"
    );
}

#[test]
fn sweep_references_are_checked() {
    let swept = format!(
        "{}[sweep]\nr = [\"1mbit\", \"2mbit\"]\n",
        BASE.replace("rate = \"1mbit\"", "rate = \"${r}\"")
    );
    let f = ScenarioFile::parse(&swept, "t.toml").unwrap();
    let all = f.resolve_all().unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(
        all[1].1.flows[0].kind,
        FlowKind::Udp {
            payload: 1470,
            rate: RateShape::Constant(2_000_000)
        }
    );

    let e = err(&swept.replace("${r}", "${rate}"));
    assert!(e.contains("\"${rate}\" is not a sweep parameter"), "{e}");
    assert!(e.contains("line 12"), "{e}");

    let e = err(&format!("{BASE}[sweep]\nq = [1, 2]\n"));
    assert!(
        e.contains("'q' is never used") && e.starts_with("t.toml line 14"),
        "{e}"
    );

    let e = err(&swept.replace("\"${r}\"", "\"x${r}\""));
    assert!(e.contains("whole string"), "{e}");

    // A swept value of the wrong form is reported at the reference, for that point.
    let bad = swept.replace("\"2mbit\"]", "\"fast\"]");
    let e = err(&bad);
    assert!(
        e.contains("line 12") && e.contains("sweep point r=fast"),
        "{e}"
    );
}

/// `replicates = N` runs each sweep point N times, replicate r after r − 1, each named in
/// the point's parameters; the seed offset is the lab's (`Point::replicate`).
#[test]
fn replicates_multiply_the_points_and_are_named() {
    let swept = format!(
        "replicates = 3\n{}[sweep]\nr = [\"1mbit\", \"2mbit\"]\n",
        BASE.replace("rate = \"1mbit\"", "rate = \"${r}\"")
    );
    let f = ScenarioFile::parse(&swept, "t.toml").unwrap();
    assert_eq!((f.replicates, f.point_count()), (3, 6));
    let points = f.points();
    let seen: Vec<(String, u32)> = points
        .iter()
        .map(|p| (p.params[0].1.clone(), p.replicate))
        .collect();
    assert_eq!(
        seen,
        [
            ("1mbit", 1),
            ("1mbit", 2),
            ("1mbit", 3),
            ("2mbit", 1),
            ("2mbit", 2),
            ("2mbit", 3)
        ]
        .map(|(r, k)| (r.to_string(), k))
    );
    assert_eq!(points[4].params[1], ("replicate".into(), "2".into()));
    assert_eq!(points[4].to_string(), "r=2mbit, replicate=2");
    assert_eq!(f.resolve_all().unwrap().len(), 6);

    // One replicate (the default) adds no parameter; the option replaces the file's.
    let one = ScenarioFile::parse(BASE, "t.toml").unwrap();
    assert_eq!((one.replicates, one.points()[0].params.len()), (1, 0));
    let ten = one.with_replicates(10).unwrap();
    assert_eq!(ten.point_count(), 10);
    assert!(ten.with_replicates(0).is_err());

    for bad in ["0", "-1", "2.5", "\"ten\"", "1001"] {
        let e = err(&format!("replicates = {bad}\n{BASE}"));
        assert!(
            e.starts_with("t.toml line 1") && e.contains("replicates = 10"),
            "{bad}: {e}"
        );
    }
    let e = err(&format!(
        "{}[sweep]\nreplicate = [1, 2]\n",
        BASE.replace("rate = \"1mbit\"", "rate = \"${replicate}\"")
    ));
    assert!(
        e.contains("'replicate'") && e.contains("replicates = N"),
        "{e}"
    );
}

#[test]
fn tbf_latency_sizes_the_queue_as_tc_does() {
    let f = ScenarioFile::parse(
        &BASE.replace("[links.l]", "[links.l]\nburst = 4096\nlatency = \"20ms\""),
        "t.toml",
    )
    .unwrap();
    let s = f.resolve(&f.points()[0]).unwrap();
    // 10 Mbit/s for 20 ms is 25,000 bytes, plus the bucket.
    assert_eq!(s.links[0].ab.1.queue_bytes, Some(25_000 + 4096));
}

#[test]
fn shapes_expand() {
    let tree = r#"name = "t"
[links.core]
rate = "100mbit"
[links.access]
rate = "10mbit"
loss = { p = 0.01, r = 0.5 }
[topology]
shape = "tree"
root = "src"
levels = [{ count = 2, link = "core", prefix = "r" }, { count = 3, link = "access", prefix = "v" }]
[[flow]]
kind = "rtp"
from = "src"
to = "v*"
rate = "1mbit"
"#;
    let f = ScenarioFile::parse(tree, "t.toml").unwrap();
    let s = f.resolve(&f.points()[0]).unwrap();
    assert_eq!(s.nodes.len(), 1 + 2 + 6);
    assert_eq!(s.flows[0].to, ["v1", "v2", "v3", "v4", "v5", "v6"]);
    assert_eq!(s.links[2].a, "r1");
    assert_eq!(s.links[5].a, "r2");
    assert_eq!(
        s.links[2].ab.1.loss,
        LossDecl::GilbertElliott {
            p: 0.01,
            r: 0.5,
            loss_good: 0.0,
            loss_bad: 1.0
        }
    );

    let dumbbell = r#"name = "d"
[links.bn]
rate = "10mbit"
[links.lan]
[topology]
shape = "dumbbell"
bottleneck = "bn"
left = [{ node = "s1", link = "lan" }, { node = "s2", link = "lan" }]
right = [{ node = "c1", link = "lan" }, { node = "c2", link = "lan" }]
[[flow]]
kind = "tcp"
from = "s1"
to = "c1"
[[flow]]
kind = "udp"
from = "s2"
to = "c2"
square = { high = "8mbit", low = "0", period = "1s", duty = 0.25 }
"#;
    let f = ScenarioFile::parse(dumbbell, "d.toml").unwrap();
    let s = f.resolve(&f.points()[0]).unwrap();
    assert_eq!(s.links.len(), 5);
    assert_eq!(s.nodes[..2], ["left", "right"]);
    assert!(
        matches!(s.flows[1].kind, FlowKind::Udp { rate: RateShape::Square { duty, .. }, .. } if duty == 0.25)
    );
}

#[test]
fn a_video_flow_may_have_a_playout_deadline_and_only_a_video_flow() {
    let rtp = |extra: &str| {
        format!(
            "name = \"t\"\n[links.l]\nrate = \"10mbit\"\n[topology]\nshape = \"chain\"\nnodes = [\"a\", \"b\"]\nlink = \"l\"\n[[flow]]\nkind = \"rtp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"2mbit\"\n{extra}\n"
        )
    };
    let text = rtp("video = \"352x288@25\"\nplayout_deadline = \"150ms\"");
    let f = ScenarioFile::parse(&text, "t.toml").unwrap();
    let s = f.resolve(&f.points()[0]).unwrap();
    match &s.flows[0].kind {
        FlowKind::Rtp {
            video: Some(v),
            playout_deadline,
            rtcp_interval,
            ..
        } => {
            assert_eq!((v.width, v.height, v.fps), (352, 288, 25));
            assert_eq!(*playout_deadline, Some(Duration::from_millis(150)));
            // RTCP as RFC 3550 says, unless the scenario says otherwise.
            assert_eq!(*rtcp_interval, Duration::from_secs(5));
        }
        other => panic!("{other:?}"),
    }
    let e = err(&rtp("playout_deadline = \"150ms\""));
    assert!(e.contains("playout_deadline needs video"), "{e}");
    let e = err(&BASE.replace("to = \"b\"", "to = \"b\"\nplayout_deadline = \"150ms\""));
    assert!(e.contains("has no 'playout_deadline'"), "{e}");
    let e = err(&BASE.replace("to = \"b\"", "to = \"b\"\nrtcp_interval = \"1s\""));
    assert!(e.contains("has no 'rtcp_interval'"), "{e}");
}

#[test]
fn video_content_is_the_pattern_or_lavfi_sources_without_filtergraph_syntax() {
    use metronome_config::scenario::VideoContent;
    let rtp = |extra: &str| {
        format!(
            "name = \"t\"\n[links.l]\nrate = \"10mbit\"\n[topology]\nshape = \"chain\"\nnodes = [\"a\", \"b\"]\nlink = \"l\"\n[[flow]]\nkind = \"rtp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"2mbit\"\n{extra}\n"
        )
    };
    let content = |extra: &str| {
        let f = ScenarioFile::parse(&rtp(extra), "t.toml").unwrap();
        match f.resolve(&f.points()[0]).unwrap().flows[0].kind.clone() {
            FlowKind::Rtp { content, .. } => content,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(content("video = \"320x180@25\""), VideoContent::Pattern);
    assert_eq!(
        content("video = \"320x180@25\"\ncontent = [\"testsrc2\", \"life=seed=1\"]"),
        VideoContent::Lavfi(vec!["testsrc2".into(), "life=seed=1".into()])
    );
    for bad in ["\"testsrc2,scale=2:2\"", "\"a;b\"", "[]", "\"x[y]\""] {
        let e = err(&rtp(&format!("video = \"320x180@25\"\ncontent = {bad}")));
        assert!(e.contains("content"), "{bad}: {e}");
    }
    let e = err(&rtp("content = \"testsrc2\""));
    assert!(e.contains("content needs video"), "{e}");
    // Scenes of generated content, each with its pace and length.
    use metronome_config::scenario::ScenePace;
    assert_eq!(
        content("video = \"352x288@25\"\ncontent = [\"motion=calm:300\", \"motion=fast:100\"]"),
        VideoContent::Scenes(vec![(ScenePace::Calm, 300), (ScenePace::Fast, 100)])
    );
    for (bad, says) in [
        ("[\"motion=calm:300\", \"testsrc2\"]", "is not a scene"),
        (
            "[\"motion=slow:300\"]",
            "the pace is one of still, calm, busy, fast, drive",
        ),
        ("[\"motion=calm:0\"]", "1 to 1000000 frames"),
    ] {
        let e = err(&rtp(&format!("video = \"352x288@25\"\ncontent = {bad}")));
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn rate_controlled_rtp_flows_and_claims() {
    let text = |flow: &str, claim: &str| {
        format!(
            "name = \"t\"\n[sweep]\ncc = [\"tfmcc\", \"asmp\"]\n[links.l]\nrate = \"10mbit\"\n[topology]\nshape = \"star\"\ncenter = \"sw\"\nleaves = [{{ node = \"a\", link = \"l\" }}, {{ prefix = \"R\", count = 3, link = \"l\" }}]\n[[flow]]\nname = \"v\"\nkind = \"rtp\"\nfrom = \"a\"\nto = \"R*\"\nrate = \"4mbit\"\n{flow}\n{claim}\n"
        )
    };
    let ok = text(
        "cc = \"${cc}\"\nstart_rate = \"500kbit\"\nvideo = \"352x288@25\"\ngop = 12\nmtu = 1018\nrtcp_interval = \"1s\"\ncodec = \"mpeg4\"\nquantizers = [4, 20]\ncontent = \"motion=seed=3\"",
        "[[claim]]\ntext = \"x\"\nflow = \"v\"\nmetric = \"psnr_y_db\"\nlhs = [{ cc = \"asmp\" }]\nop = \">\"\nrhs = [{ cc = \"tfmcc\" }]\nevidence = [\"quantizer\", \"bottleneck_drop_percent\"]",
    );
    let f = ScenarioFile::parse(&ok, "t.toml").unwrap();
    let points = f.points();
    let s = f.resolve(&points[1]).unwrap();
    // Leaves by prefix and count.
    assert!(["R1", "R2", "R3"]
        .iter()
        .all(|n| s.nodes.iter().any(|m| m == n)));
    assert_eq!(s.flows[0].to.len(), 3);
    match &s.flows[0].kind {
        FlowKind::Rtp {
            cc,
            start_bps,
            mtu,
            gop,
            coded,
            content,
            rtcp_interval,
            ..
        } => {
            assert_eq!(*cc, metronome_config::scenario::RtpCc::Asmp);
            assert_eq!(*rtcp_interval, Duration::from_secs(1));
            assert_eq!(
                (*start_bps, *mtu, *gop),
                (Some(500_000), Some(1018), Some(12))
            );
            let coded = coded.unwrap();
            assert_eq!(
                (coded.codec.name(), coded.quantizers, coded.b_frames),
                ("mpeg4", (4, 20), 0)
            );
            assert_eq!(
                *content,
                metronome_config::scenario::VideoContent::Motion(3)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.claims.len(), 1);
    assert_eq!(s.claims[0].op, metronome_config::scenario::ClaimOp::Greater);
    // Evidence: a flow's metric of the claim's flow, a point's without one.
    let evidence: Vec<String> = s.claims[0].evidence.iter().map(|e| e.label()).collect();
    assert_eq!(evidence, ["quantizer of v", "bottleneck_drop_percent"]);
    // What is refused, and said.
    for (flow, claim, says) in [
        ("cc = \"bbr\"", "", "is not known for rtp"),
        ("start_rate = \"1mbit\"", "", "start_rate is where a rate controller begins"),
        ("cc = \"asmp\"\ncodec = \"mpeg4\"", "", "it needs video"),
        ("video = \"352x288@25\"\ncodec = \"vp9\"", "", "codec = \"vp9\" is not known"),
        ("video = \"352x288@25\"\ncodec = \"mpeg4\"\nquantizers = [1, 31]", "", "within 2–31"),
        ("video = \"352x288@25\"\nquantizers = [2, 31]", "", "belong to codec"),
        ("video = \"352x288@25\"\ncontent = \"motion=seed=x\"", "", "whole number"),
        ("mtu = 100", "", "an IP packet of 300 to 9000 bytes"),
        ("rtcp_interval = \"10ms\"", "", "write 100ms to 60s"),
        ("gop = 12", "", "gop needs video"),
        ("cc = \"gcc\"", "", "cc = \"gcc\" controls a stream to one receiver, and this one has 3"),
        ("cc = \"tfrc\"", "", "for a group use \"tfmcc\" or \"asmp\""),
        ("", "[[claim]]\ntext = \"x\"\nflow = \"v\"\nmetric = \"beauty\"\nlhs = [{ cc = \"asmp\" }]\nop = \">\"\nrhs = [{ cc = \"tfmcc\" }]", "metric = \"beauty\" is not known"),
        ("", "[[claim]]\ntext = \"x\"\nflow = \"w\"\nmetric = \"mos\"\nlhs = [{ cc = \"asmp\" }]\nop = \">\"\nrhs = [{ cc = \"tfmcc\" }]", "flow = \"w\" is not a flow"),
        ("", "[[claim]]\ntext = \"x\"\nflow = \"v\"\nmetric = \"mos\"\nlhs = [{ cc = \"asmp\" }]\nop = \">=\"\nrhs = [{ cc = \"tfmcc\" }]", "use \"<\" or \">\""),
        ("", "[[claim]]\ntext = \"x\"\nflow = \"v\"\nmetric = \"mos\"\nlhs = [{ cc = \"asmp\" }]\nop = \">\"\nrhs = [{ cc = \"tfmcc\" }]\nevidence = [\"luck\"]", "evidence \"luck\": metric = \"luck\" is not known"),
        ("", "[[claim]]\ntext = \"x\"\nflow = \"v\"\nmetric = \"mos\"\nlhs = [{ cc = \"asmp\" }]\nop = \">\"\nrhs = [{ cc = \"tfmcc\" }]\nevidence = [\"bottleneck_drop_percent of v\"]", "bottleneck_drop_percent is the point's: name no flow"),
        ("", "[[claim]]\ntext = \"x\"\nflow = \"v\"\nmetric = \"mos\"\nlhs = [{ cc = \"asmp\" }]\nop = \">\"\nrhs = [{ cc = \"tfmcc\" }]\nevidence = [\"target_mbps of w\"]", "flow = \"w\" is not a flow"),
    ] {
        let t = text(flow, claim).replace("[sweep]\ncc = [\"tfmcc\", \"asmp\"]\n", "");
        let err = ScenarioFile::parse(&t, "t.toml")
            .and_then(|f| f.resolve(&f.points()[0]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{flow} {claim}: {err}");
    }
}

#[test]
fn a_groups_receivers_may_join_and_leave() {
    let group = |membership: &str| {
        format!(
            "name = \"t\"\nduration = \"30s\"\n[links.l]\nrate = \"10mbit\"\n[topology]\nshape = \"star\"\ncenter = \"h\"\nleaves = [{{ node = \"s\", link = \"l\" }}, {{ prefix = \"r\", count = 3, link = \"l\" }}]\n[[flow]]\nkind = \"rtp\"\nfrom = \"s\"\nto = \"r*\"\nrate = \"2mbit\"\ncc = \"tfmcc\"\n{membership}\n"
        )
    };
    let text = group(
        "membership = [{ to = \"r3\", join = \"10s\", leave = \"20s\" }, { to = \"r1\", leave = \"5s\" }]",
    );
    let f = ScenarioFile::parse(&text, "t.toml").unwrap();
    let s = f.resolve(&f.points()[0]).unwrap();
    let m = &s.flows[0].membership;
    assert_eq!(m.len(), 2, "{m:?}");
    assert_eq!(
        (m[0].node.as_str(), m[0].join, m[0].leave),
        ("r3", Duration::from_secs(10), Some(Duration::from_secs(20)))
    );
    assert_eq!(
        (m[1].node.as_str(), m[1].join, m[1].leave),
        ("r1", Duration::ZERO, Some(Duration::from_secs(5)))
    );
    // A pattern names every receiver it matches.
    let f =
        ScenarioFile::parse(&group("membership = [{ to = \"r*\", join = \"1s\" }]"), "t").unwrap();
    assert_eq!(
        f.resolve(&f.points()[0]).unwrap().flows[0].membership.len(),
        3
    );

    for (membership, says) in [
        (
            "membership = [{ to = \"x\" }]",
            "not one of the flow's receivers",
        ),
        (
            "membership = [{ to = \"r1\", join = \"5s\", leave = \"5s\" }]",
            "leave must come after join",
        ),
        (
            "membership = [{ to = \"r1\" }, { to = \"r*\", join = \"2s\" }]",
            "names 'r1' twice",
        ),
        (
            "membership = [{ to = \"r1\", at = \"2s\" }]",
            "unknown key 'at'",
        ),
        (
            "membership = [{ to = \"r1\", join = \"30s\" }]",
            "outside the flow's time",
        ),
        (
            "start = \"10s\"\nmembership = [{ to = \"r1\", leave = \"10s\" }]",
            "outside the flow's time",
        ),
        (
            "video = \"352x288@25\"\nmembership = [{ to = \"r1\", leave = \"2s\" }]",
            "membership with video is not judged yet",
        ),
    ] {
        let e = err(&group(membership));
        assert!(e.contains(says), "{membership}: {e}");
    }
    let unicast = group("membership = [{ to = \"r1\", leave = \"2s\" }]")
        .replace("to = \"r*\"", "to = \"r1\"");
    let e = err(&unicast);
    assert!(e.contains("for a multicast group's receivers"), "{e}");
    let e = err(&BASE.replace("to = \"b\"", "to = \"b\"\nmembership = []"));
    assert!(e.contains("has no 'membership'"), "{e}");
}

/// The kind of the first flow of scenario file `text`.
fn tcp_kind(text: &str) -> metronome_config::scenario::FlowKind {
    let f = ScenarioFile::parse(text, "t.toml").unwrap();
    f.resolve(&f.points()[0]).unwrap().flows[0].kind.clone()
}
