//! What the RTSP server admits, and what it refuses with 453 and the reason: the declared
//! link, the encoders' CPU budget, and mounts of uncompressed video (the link, their own rate,
//! `--max-stream-rate`). Against a plain socket client, on loopback, bounded in time.

mod common;

use common::rtsp_client::*;
use common::RtspServer;
use std::time::Duration;

#[test]
fn admission_refusal_is_453_with_the_reason() {
    // Room on the declared link for one 600 kbit/s stream, not two.
    let mut args = small_test_source().to_vec();
    args.extend(["--link-capacity", "1mbit"]);
    let server = RtspServer::start(&args);
    let mut a = Client::connect(&server, "test");
    let sa = a
        .setup("RTP/AVP/TCP;unicast;interleaved=0-1", None)
        .session();
    assert_eq!(a.play(&sa, None).status, 200);
    let mut b = Client::connect(&server, "test");
    let sb = b
        .setup("RTP/AVP/TCP;unicast;interleaved=0-1", None)
        .session();
    let r = b.play(&sb, None);
    assert_eq!(r.status, 453, "{r:?}");
    let why = format!(
        "{} {}",
        r.header("x-metronome-reason"),
        String::from_utf8_lossy(&r.body)
    );
    assert!(why.contains("link"), "the reason names the link: {r:?}");
    // Once the first leaves, the second is admitted.
    let url = a.url.clone();
    assert_eq!(a.req("TEARDOWN", &url, &[("Session", &sa)]).status, 200);
    assert_eq!(b.play(&sb, None).status, 200);
    server.stop();
}

/// Encoders are admitted against a CPU budget: with an encoder per session, the third of
/// three that each take 30 % of a CPU does not fit in 70 % and its PLAY gets 453 with the
/// reason, until one leaves; viewers of the shared encoder cost it once, so six all play.
/// (The cost is given, `--encode-cost`, so that the count does not depend on the host; the
/// measurement itself is `metronome_apps::streams::server::encode_cost`'s to test.)
#[test]
fn encoders_past_the_cpu_budget_are_refused_and_a_shared_one_counts_once() {
    for per_session in [true, false] {
        let mut args = small_test_source().to_vec();
        args.extend(["--encode-cost", "30%", "--encode-budget", "70%"]);
        if per_session {
            args.push("--rtsp-encoder-per-session");
        }
        let server = RtspServer::start(&args);
        let mut clients = Vec::new();
        let mut statuses = Vec::new();
        for _ in 0..6 {
            let mut c = Client::connect(&server, "test");
            let s = c
                .setup("RTP/AVP/TCP;unicast;interleaved=0-1", None)
                .session();
            let r = c.play(&s, None);
            statuses.push(r.status);
            if r.status == 453 {
                let why = format!(
                    "{} {}",
                    r.header("x-metronome-reason"),
                    String::from_utf8_lossy(&r.body)
                );
                assert!(
                    why.contains("encoder that takes 30.0 % of a CPU")
                        && why.contains("--encode-budget"),
                    "the reason names the encoders' budget: {r:?}"
                );
            }
            clients.push((c, s));
        }
        if per_session {
            assert_eq!(statuses, [200, 200, 453, 453, 453, 453]);
            // The first leaves: its encoder's share comes back and the third plays.
            let (a, sa) = &mut clients[0];
            let url = a.url.clone();
            assert_eq!(a.req("TEARDOWN", &url, &[("Session", &*sa)]).status, 200);
            let (c, sc) = &mut clients[2];
            assert_eq!(c.play(sc, None).status, 200);
        } else {
            assert_eq!(statuses, [200; 6], "one shared encoder");
        }
        server.stop();
    }
}

/// A mount of uncompressed video (`serve --raw --rtsp`): its SDP is RFC 4175's; PLAY over UDP
/// delivers RTP/raw from the announced server port with sender reports; PAUSE and PLAY continue
/// the sequence numbers; every session is admitted on the declared link.
#[test]
fn a_raw_mount_plays_pauses_and_is_admitted_on_the_link() {
    // 320x240 4:2:2 8-bit at 25 fps is about 31.5 Mbit/s with headers: one fits in 50, not two.
    let server = RtspServer::start(&[
        "--raw",
        "--size",
        "320x240",
        "--fps",
        "25",
        "--pacing",
        "burst",
        "--link-capacity",
        "50mbit",
    ]);
    let mut c = Client::connect(&server, "raw");
    let url = c.url.clone();
    let r = c.req("DESCRIBE", &url, &[("Accept", "application/sdp")]);
    assert_eq!(r.status, 200, "{r:?}");
    let sdp = String::from_utf8(r.body.clone()).unwrap();
    assert!(sdp.contains("a=rtpmap:96 raw/90000"), "{sdp}");
    assert!(sdp.contains("sampling=YCbCr-4:2:2"), "{sdp}");
    assert!(
        sdp.contains("width=320") && sdp.contains("height=240"),
        "{sdp}"
    );
    let (rtp, rtcp, port) = client_ports();
    let r = c.setup(
        &format!("RTP/AVP;unicast;client_port={}-{}", port, port + 1),
        None,
    );
    assert_eq!(r.status, 200, "{r:?}");
    let session = r.session();
    let ssrc = ssrc_of(&r);
    let server_rtp: u16 = r
        .header("transport")
        .split(';')
        .find_map(|p| p.strip_prefix("server_port="))
        .and_then(|p| p.split('-').next())
        .and_then(|p| p.parse().ok())
        .expect("server_port in the reply");
    let r = c.play(&session, None);
    assert_eq!(r.status, 200, "{r:?}");
    let first_seq = rtp_info_seq(&r);
    let mut buf = [0u8; 2048];
    let (n, from) = rtp.recv_from(&mut buf).expect("RTP on client_port");
    assert_eq!(from.port(), server_rtp, "sent from the announced port");
    assert_eq!(buf[1] & 0x7f, 96, "raw video payload type");
    assert_eq!(u32::from_be_bytes(buf[8..12].try_into().unwrap()), ssrc);
    assert_eq!(u16::from_be_bytes([buf[2], buf[3]]), first_seq);
    assert!(n > 1000, "full-size packets: {n}");
    let (_, _) = rtcp.recv_from(&mut buf).expect("a sender report");
    assert_eq!(buf[1], 200, "a sender report first");
    // A second client does not fit on the link: 453 with the reason.
    let mut b = Client::connect(&server, "raw");
    let sb = b
        .setup("RTP/AVP/TCP;unicast;interleaved=0-1", None)
        .session();
    let r = b.play(&sb, None);
    assert_eq!(r.status, 453, "{r:?}");
    assert!(r.header("x-metronome-reason").contains("link"), "{r:?}");
    // PAUSE stops the media; PLAY resumes where the numbering stopped (what the client's
    // small socket buffer dropped was sent all the same).
    assert_eq!(c.req("PAUSE", &url, &[("Session", &session)]).status, 200);
    rtp.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut got = 1u16;
    let mut last = first_seq;
    while let Ok((_, _)) = rtp.recv_from(&mut buf) {
        got += 1;
        last = u16::from_be_bytes([buf[2], buf[3]]);
    }
    let r = c.play(&session, None);
    assert_eq!(r.status, 200, "{r:?}");
    let resumed_seq = rtp_info_seq(&r);
    rtp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let (_, _) = rtp.recv_from(&mut buf).expect("RTP after the resume");
    assert_eq!(u16::from_be_bytes([buf[2], buf[3]]), resumed_seq);
    let advanced = resumed_seq.wrapping_sub(first_seq);
    assert!(
        advanced >= got && advanced > last.wrapping_sub(first_seq) && advanced < 30_000,
        "numbering continues: first {first_seq}, last heard {last}, resumed {resumed_seq}"
    );
    // Once the first leaves, the second is admitted, and its frames arrive interleaved.
    assert_eq!(
        c.req("TEARDOWN", &url, &[("Session", &session)]).status,
        200
    );
    assert_stops(&rtp);
    assert_eq!(b.play(&sb, None).status, 200);
    let (channel, len) = b.read_frame();
    assert_eq!((channel, len > 1000), (0, true));
    server.stop();
}

/// A raw mount's own rate is its bound: 3840x2160 at 2 fps (about 270 Mbit/s with headers, above
/// the 200 Mbit/s that bounds an MPEG-TS stream by default) plays without `--max-stream-rate`;
/// a `--max-stream-rate` given is kept, and a PLAY past it gets 453 naming it.
#[test]
fn a_raw_mount_may_send_its_own_rate_and_max_stream_rate_bounds_it() {
    let big = RtspServer::start(&[
        "--raw",
        "--size",
        "3840x2160",
        "--fps",
        "2",
        "--pacing",
        "burst",
    ]);
    let mut c = Client::connect(&big, "raw");
    let (rtp, _rtcp, port) = client_ports();
    let r = c.setup(
        &format!("RTP/AVP;unicast;client_port={}-{}", port, port + 1),
        None,
    );
    let session = r.session();
    let r = c.play(&session, None);
    assert_eq!(r.status, 200, "{r:?}");
    let mut buf = [0u8; 2048];
    let (n, _) = rtp.recv_from(&mut buf).expect("RTP on client_port");
    assert_eq!((buf[1] & 0x7f, n > 1000), (96, true));
    big.stop();
    let bounded = RtspServer::start(&[
        "--raw",
        "--size",
        "320x240",
        "--fps",
        "25",
        "--max-stream-rate",
        "10mbit",
    ]);
    let mut c = Client::connect(&bounded, "raw");
    let session = c
        .setup("RTP/AVP/TCP;unicast;interleaved=0-1", None)
        .session();
    let r = c.play(&session, None);
    assert_eq!(r.status, 453, "{r:?}");
    assert!(
        r.header("x-metronome-reason").contains("--max-stream-rate"),
        "{r:?}"
    );
    bounded.stop();
}
