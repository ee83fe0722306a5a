//! SETUP: transports, session creation and its limits.

use super::*;

fn setup(h: &mut Harness, conn: u64, url: &str, transport: &str) -> Resp {
    h.send(conn, "SETUP", url, &[&format!("Transport: {transport}")])
}

fn requested(h: &Harness) -> Vec<Requested> {
    h.backend
        .calls
        .iter()
        .filter_map(|c| match c {
            Call::Setup { transport, .. } => Some(*transport),
            _ => None,
        })
        .collect()
}

#[test]
fn unicast_udp() {
    let mut h = Harness::new();
    let r = setup(
        &mut h,
        1,
        "live/trackID=0",
        "RTP/AVP;unicast;client_port=5000-5001",
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.header("Transport").as_deref(),
        Some("RTP/AVP;unicast;client_port=5000-5001;server_port=6970-6971;ssrc=1234ABCD")
    );
    let s = r.session();
    assert_eq!(r.header("Session"), Some(format!("{s};timeout=60")));
    assert_eq!(
        r.header("Content-Base").as_deref(),
        Some("rtsp://192.0.2.1/live/"),
        "clients that build PLAY from the SETUP response name the mount"
    );
    let id = Harness::id(&s);
    assert_eq!(
        h.backend.actions(),
        [Call::Setup {
            session: id,
            conn: ConnId(1),
            mount: "live".into(),
            transport: Requested::Udp {
                client_rtp: 5000,
                client_rtcp: 5001
            },
        }]
    );
    let info = h.server.session_info(id).unwrap();
    assert_eq!(info.url, "rtsp://192.0.2.1/live/trackID=0");
    assert_eq!(
        (info.conn, info.peer, info.mount.as_str()),
        (ConnId(1), peer(), "live")
    );

    // Other spellings of the same thing.
    for (url, transport) in [
        ("live/streamid=0", "RTP/AVP/UDP;unicast;client_port=6000"),
        (
            "live/",
            "rtp/avp;unicast;client_port=6000;mode=play;ssrc=01020304;ttl=3",
        ),
        (
            "live",
            "RTP/AVP;client_port=6000;destination=192.0.2.10;mode=\"PLAY\"",
        ),
        (
            "live/trackID=0/",
            "RTP/SAVP;unicast;client_port=1-2, RTP/AVP;unicast;client_port=6000-6001",
        ),
    ] {
        let r = setup(&mut h, 1, url, transport);
        assert_eq!(r.status, 200, "{url} {transport}: {}", r.text);
    }
    let six = Requested::Udp {
        client_rtp: 6000,
        client_rtcp: 6001,
    };
    assert_eq!(requested(&h)[1..], [six, six, six, six]);
}

#[test]
fn multicast_when_the_mount_has_a_group() {
    let mut h = Harness::new();
    let r = setup(&mut h, 1, "live/trackID=0", "RTP/AVP;multicast");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Transport").as_deref(),
        Some("RTP/AVP;multicast;destination=239.1.2.3;port=5004-5005;ttl=16;ssrc=1234ABCD")
    );
    // The first acceptable alternative wins: multicast is not offered by `file`.
    let r = setup(
        &mut h,
        1,
        "file/trackID=0",
        "RTP/AVP;multicast, RTP/AVP;unicast;client_port=7000-7001",
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        requested(&h),
        [
            Requested::Multicast,
            Requested::Udp {
                client_rtp: 7000,
                client_rtcp: 7001
            }
        ]
    );
}

#[test]
fn interleaved_channels_are_assigned_per_connection() {
    let mut h = Harness::new();
    let tcp = "RTP/AVP/TCP;unicast";
    let r = setup(&mut h, 1, "live", "RTP/AVP/TCP;unicast;interleaved=0-1");
    assert_eq!(
        r.header("Transport").as_deref(),
        Some("RTP/AVP/TCP;unicast;interleaved=0-1;ssrc=1234ABCD")
    );
    let r = setup(&mut h, 1, "live", tcp);
    assert_eq!(
        r.header("Transport").as_deref(),
        Some("RTP/AVP/TCP;unicast;interleaved=2-3;ssrc=1234ABCD")
    );
    assert_eq!(
        setup(&mut h, 1, "live", "RTP/AVP/TCP;interleaved=4").status,
        200
    );
    // Taken on connection 1, free on connection 2.
    assert_eq!(
        setup(&mut h, 1, "live", "RTP/AVP/TCP;interleaved=1-2").status,
        461
    );
    assert_eq!(setup(&mut h, 2, "live", tcp).status, 200);
    let il = |a, b| Requested::Interleaved {
        rtp_channel: a,
        rtcp_channel: b,
    };
    assert_eq!(requested(&h), [il(0, 1), il(2, 3), il(4, 5), il(0, 1)]);
    // Channels of a session that ended are free again.
    h.server.connection_closed(ConnId(1), &mut h.backend);
    assert_eq!(setup(&mut h, 1, "live", tcp).status, 200);
    assert_eq!(requested(&h)[4], il(0, 1));
}

#[test]
fn unacceptable_transports_get_461() {
    let mut h = Harness::new();
    for (url, transport) in [
        ("live", "RTP/SAVP;unicast;client_port=5000-5001"),
        ("live", "RTP/AVPF;unicast;client_port=5000-5001"),
        ("live", "RAW/RAW/UDP;unicast;client_port=5000-5001"),
        ("live", "RTP/AVP/SCTP;unicast;client_port=5000-5001"),
        ("live", "RTP/AVP/UDP;unicast"),
        ("live", "RTP/AVP;unicast;client_port=0-1"),
        ("live", "RTP/AVP;unicast;client_port=65535"),
        ("live", "RTP/AVP;unicast;client_port=abc"),
        ("live", "RTP/AVP;unicast;client_port=70000-70001"),
        ("live", "RTP/AVP;unicast;client_port"),
        ("live", "RTP/AVP;unicast;multicast;client_port=5000"),
        ("live", "RTP/AVP/TCP;multicast"),
        ("live", "RTP/AVP/TCP;interleaved=255"),
        ("live", "RTP/AVP/TCP;interleaved=3-3"),
        ("live", "RTP/AVP/TCP;interleaved=300-301"),
        ("file", "RTP/AVP;multicast"),
        ("live", "RTP/AVP;unicast;client_port=5000-5001;mode=record"),
        (
            "live",
            "RTP/AVP;unicast;client_port=5000-5001;mode=\"PLAY,RECORD\"",
        ),
        ("live", ""),
        ("live", ","),
        // Never stream to an address the client does not control.
        (
            "live",
            "RTP/AVP;unicast;client_port=5000-5001;destination=198.51.100.7",
        ),
        (
            "live",
            "RTP/AVP;unicast;client_port=5000-5001;destination=example.com",
        ),
        (
            "live",
            "RTP/AVP;unicast;client_port=5000-5001;destination=::ffff:198.51.100.7",
        ),
        ("live", "RTP/AVP/TCP;unicast;destination=198.51.100.7"),
        // RTSP 2.0 address parameters, some of which make rtsp-types' parser panic.
        (
            "live",
            "RTP/AVP;unicast;client_port=5000-5001;dest_addr=\"\\\"",
        ),
        ("live", "RTP/AVP;unicast;client_port=5000-5001;dest_addr=\""),
        (
            "live",
            "RTP/AVP;unicast;client_port=5000-5001;src_addr=\"a\\\"",
        ),
        (
            "live",
            "RTP/AVP;unicast;dest_addr=\"192.0.2.10:5000\"/\"192.0.2.10:5001\"",
        ),
        ("live", "RTP/AVP;unicast;client_port=5000-5001;mode=\""),
    ] {
        let r = setup(&mut h, 1, url, transport);
        assert_eq!(r.status, 461, "{transport}: {}", r.text);
        assert!(r.header(REASON_HEADER).is_some());
    }
    assert_eq!(h.send(1, "SETUP", "live", &[]).status, 461);
    assert!(requested(&h).is_empty(), "the backend saw none of them");
    assert_eq!(h.server.sessions(), 0);
    // The client's own address is fine, in any spelling.
    for dest in ["192.0.2.10", "::ffff:192.0.2.10", "[::ffff:192.0.2.10]"] {
        let t = format!("RTP/AVP;unicast;client_port=5000-5001;destination={dest}");
        assert_eq!(setup(&mut h, 1, "live", &t).status, 200, "{dest}");
    }
}

#[test]
fn setup_into_an_existing_session() {
    let mut h = Harness::new();
    let s = h.setup(1, "live");
    let session = format!("Session: {s}");
    let udp = "Transport: RTP/AVP;unicast;client_port=5000-5001";
    // Another mount: 459. The same one again, Ready or Playing: 455 (documented choice).
    assert_eq!(
        h.send(1, "SETUP", "file/trackID=0", &[&session, udp])
            .status,
        459
    );
    assert_eq!(
        h.send(1, "SETUP", "live/trackID=0", &[&session, udp])
            .status,
        455
    );
    assert_eq!(h.play(1, "live", &s, &[]).status, 200);
    let r = h.send(1, "SETUP", "live/trackID=0", &[&session, udp]);
    assert_eq!(r.status, 455);
    assert_eq!(r.session(), s);
    assert_eq!(h.server.sessions(), 1);
    assert_eq!(requested(&h).len(), 1);
}

#[test]
fn setup_errors() {
    let mut h = Harness::new();
    let udp = "RTP/AVP;unicast;client_port=5000-5001";
    assert_eq!(setup(&mut h, 1, "nope/trackID=0", udp).status, 404);
    assert_eq!(setup(&mut h, 1, "live/trackID=1", udp).status, 404);
    assert_eq!(setup(&mut h, 1, "live/trackID=x", udp).status, 404);
    assert_eq!(setup(&mut h, 1, "*", udp).status, 400);
    assert!(requested(&h).is_empty());
}

#[test]
fn one_address_cannot_take_every_session() {
    let mut h = Harness::with(RtspConfig {
        max_sessions: 10,
        max_sessions_per_address: 2,
        ..RtspConfig::default()
    });
    let a = h.setup(1, "live");
    h.setup(2, "live");
    let udp = "RTP/AVP;unicast;client_port=5000-5001";
    let r = setup(&mut h, 3, "live", udp);
    assert_eq!(r.status, 503, "{}", r.text);
    // Another address still gets one.
    h.peer = "192.0.2.77:40000".parse().unwrap();
    assert_eq!(setup(&mut h, 4, "live", udp).status, 200);
    // The first address gets one again once it tears one down.
    h.peer = "192.0.2.10:40000".parse().unwrap();
    let teardown = h.send(1, "TEARDOWN", "live", &[&format!("Session: {a}")]);
    assert_eq!(teardown.status, 200);
    assert_eq!(setup(&mut h, 3, "live", udp).status, 200);
}

#[test]
fn too_many_sessions_get_503() {
    let mut h = Harness::with(RtspConfig {
        max_sessions: 2,
        ..RtspConfig::default()
    });
    let a = h.setup(1, "live");
    h.setup(2, "live");
    let r = setup(&mut h, 3, "live", "RTP/AVP;unicast;client_port=5000-5001");
    assert_eq!(r.status, 503);
    assert_eq!(requested(&h).len(), 2);
    assert_eq!(
        h.send(1, "TEARDOWN", "live", &[&format!("Session: {a}")])
            .status,
        200
    );
    assert_eq!(
        setup(&mut h, 3, "live", "RTP/AVP;unicast;client_port=5000").status,
        200
    );
}

#[test]
fn srtp_mounts_answer_savp_and_plain_ones_refuse_it() {
    let mut h = Harness::new();
    let savp = "RTP/SAVP;unicast;client_port=5000-5001";
    assert_eq!(setup(&mut h, 1, "live/trackID=0", savp).status, 461);
    // SAVP as asked, and AVP too (FFmpeg asks for RTP/AVP for media its SDP says is SAVP):
    // either way the answer says what is sent.
    for (conn, asked) in [(2, savp), (3, "RTP/AVP/TCP;unicast;interleaved=0-1")] {
        let r = setup(&mut h, conn, "srtp/trackID=0", asked);
        assert_eq!(r.status, 200, "{}", r.text);
        let t = r.header("Transport").unwrap_or_default();
        assert!(t.starts_with("RTP/SAVP"), "{t}");
    }
}

#[test]
fn mounts_that_repair_take_and_answer_avpf() {
    let mut h = Harness::new();
    // Feedback as asked (UDP, TCP, multicast), or none for a client that asks for AVP.
    for (conn, asked, answer) in [
        (
            1,
            "RTP/AVPF;unicast;client_port=5000-5001",
            "RTP/AVPF;unicast",
        ),
        (
            2,
            "RTP/AVPF/TCP;unicast;interleaved=0-1",
            "RTP/AVPF/TCP;unicast",
        ),
        (3, "RTP/AVPF/UDP;multicast", "RTP/AVPF;multicast"),
        (
            4,
            "RTP/AVP;unicast;client_port=5002-5003",
            "RTP/AVP;unicast",
        ),
    ] {
        let r = setup(&mut h, conn, "repairs/trackID=0", asked);
        assert_eq!(r.status, 200, "{asked}: {}", r.text);
        let t = r.header("Transport").unwrap_or_default();
        assert!(t.starts_with(answer), "{asked}: {t}");
    }
    // Secure feedback needs an SRTP mount.
    let savpf = "RTP/SAVPF;unicast;client_port=5000-5001";
    let r = setup(&mut h, 5, "repairs/trackID=0", savpf);
    assert_eq!(r.status, 461, "{}", r.text);
}
