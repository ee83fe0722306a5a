use super::*;

/// `ffmpeg -f lavfi -i testsrc -c:v libx264 -f rtp rtp://127.0.0.1:5006 -sdp_file x.sdp`
/// (ffmpeg 5.1, Debian 12; "LIBAVFORMAT_VERSION" is what that build writes).
const FFMPEG_H264: &str = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=No Name\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\na=tool:libavformat LIBAVFORMAT_VERSION\r\nm=video 5006 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1\r\n";

/// The same to `rtp://239.1.2.3:5008?ttl=16`.
const FFMPEG_MULTICAST: &str = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=No Name\r\nc=IN IP4 239.1.2.3/16\r\nt=0 0\r\na=tool:libavformat LIBAVFORMAT_VERSION\r\nm=video 5008 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1\r\n";

/// GStreamer 1.22 rtsp-server's DESCRIBE answer for
/// `videotestsrc ! openh264enc ! h264parse ! mpegtsmux ! rtpmp2tpay pt=33`.
const GST_RTSP_MP2T: &str = "v=0\r\no=- 15515255537852121363 1 IN IP4 127.0.0.1\r\ns=Session streamed with GStreamer\r\ni=rtsp-server\r\nt=0 0\r\na=tool:GStreamer\r\na=type:broadcast\r\na=control:*\r\na=range:npt=now-\r\nm=video 0 RTP/AVP 33\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:33 MP2T/90000\r\na=control:stream=0\r\na=ts-refclk:local\r\na=mediaclk:sender\r\na=ssrc:3655766253 cname:user2634205943@host-467390c7\r\n";

/// GStreamer 1.22 rtsp-server's DESCRIBE answer for `... ! rtph264pay pt=96`.
const GST_RTSP_H264: &str = "v=0\r\no=- 14980620447037535051 1 IN IP4 127.0.0.1\r\ns=Session streamed with GStreamer\r\ni=rtsp-server\r\nt=0 0\r\na=tool:GStreamer\r\na=type:broadcast\r\na=control:*\r\na=range:npt=now-\r\nm=video 0 RTP/AVP 96\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:96 H264/90000\r\na=framerate:30\r\na=fmtp:96 packetization-mode=1;sprop-parameter-sets=Z0LADYyNQKD5APCIRqA=,aM48gA==;profile-level-id=42c00d;level-asymmetry-allowed=1\r\na=control:stream=0\r\na=ts-refclk:local\r\na=mediaclk:sender\r\na=ssrc:3627088133 cname:user3441882376@host-513aa9fc\r\n";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn ffmpeg_unicast_h264() {
    let s = SessionDescription::parse(FFMPEG_H264).unwrap();
    assert_eq!(s.origin, ip("127.0.0.1"));
    assert_eq!(s.session_id, 0);
    assert_eq!(s.name, "No Name");
    assert_eq!(s.connection, Some(Connection::new(ip("127.0.0.1"), None)));
    assert_eq!(s.tool.as_deref(), Some("libavformat LIBAVFORMAT_VERSION"));
    assert_eq!(s.control, None);
    assert_eq!(s.media.len(), 1);
    let m = &s.media[0];
    assert_eq!(
        (m.media.as_str(), m.port, m.payload_type),
        ("video", 5006, crate::PayloadType(96))
    );
    assert_eq!((m.encoding.as_str(), m.clock_rate), ("H264", 90_000));
    assert_eq!(m.fmtp.as_deref(), Some("packetization-mode=1"));
    assert!(!m.is_mp2t());
    assert_eq!(m.connection_or(&s).unwrap().addr, ip("127.0.0.1"));
}

#[test]
fn ffmpeg_multicast_with_ttl() {
    let s = SessionDescription::parse(FFMPEG_MULTICAST).unwrap();
    let c = s.media[0].connection_or(&s).unwrap();
    assert_eq!(*c, Connection::new(ip("239.1.2.3"), Some(16)));
    assert!(c.is_multicast());
    assert_eq!(s.media[0].port, 5008);
    // Written back with its TTL.
    assert!(s.to_sdp().contains("c=IN IP4 239.1.2.3/16\r\n"));
}

#[test]
fn gstreamer_rtsp_describe_mp2t() {
    let s = SessionDescription::parse(GST_RTSP_MP2T).unwrap();
    assert_eq!(s.session_id, 15_515_255_537_852_121_363);
    assert_eq!(s.name, "Session streamed with GStreamer");
    assert_eq!(s.control.as_deref(), Some("*"));
    assert_eq!(s.range.as_deref(), Some("npt=now-"));
    assert_eq!(s.connection, None);
    let m = &s.media[0];
    assert_eq!(*m, {
        let mut m = MediaDescription::mp2t(0).with_control("stream=0");
        m.connection = Some(Connection::new(ip("0.0.0.0"), None));
        // GStreamer's rtsp-server names the payloader's SSRC (RFC 5576).
        m.source = Some(Source {
            ssrc: Ssrc(3_655_766_253),
            cname: "user2634205943@host-467390c7".into(),
        });
        m
    });
    assert!(m.is_mp2t());
}

#[test]
fn gstreamer_rtsp_describe_h264_fmtp() {
    let s = SessionDescription::parse(GST_RTSP_H264).unwrap();
    let m = &s.media[0];
    assert_eq!(m.encoding, "H264");
    assert_eq!(
        m.fmtp.as_deref(),
        Some("packetization-mode=1;sprop-parameter-sets=Z0LADYyNQKD5APCIRqA=,aM48gA==;profile-level-id=42c00d;level-asymmetry-allowed=1")
    );
    let again = SessionDescription::parse(&s.to_sdp()).unwrap();
    assert_eq!(again, s);
}

#[test]
fn rtsp_mp2t_text() {
    let s = SessionDescription::rtsp_mp2t(ip("192.0.2.1"), 42, "live", "npt=0-");
    let text = s.to_sdp();
    let want = [
        "v=0",
        "o=- 42 1 IN IP4 192.0.2.1",
        "s=live",
        "c=IN IP4 0.0.0.0",
        "t=0 0",
        concat!("a=tool:metronome ", env!("CARGO_PKG_VERSION")),
        "a=control:*",
        "a=range:npt=0-",
        "m=video 0 RTP/AVP 33",
        "a=rtpmap:33 MP2T/90000",
        "a=control:trackID=0",
        "",
    ]
    .join("\r\n");
    assert_eq!(text, want);
    assert_eq!(SessionDescription::parse(&text).unwrap(), s);
}

#[test]
fn round_trip_everything() {
    let mut s = SessionDescription::new(ip("2001:db8::1"), u64::MAX, "all fields");
    s.connection = Some(Connection::new(ip("ff15::1"), None));
    s.control = Some("rtsp://[2001:db8::1]:8554/live/".into());
    s.range = Some("npt=0-12.5".into());
    s.tool = Some("t".into());
    let mut m = MediaDescription::new("audio", 5004, PayloadType(97), "opus", 48_000);
    m.fmtp = Some("minptime=10;useinbandfec=1".into());
    m.control = Some("trackID=1".into());
    m.connection = Some(Connection::new(ip("239.0.0.9"), Some(32)));
    m.bitrate_kbps = Some(5_000);
    m.extmap = Some((1, crate::rtp::ABS_SEND_TIME_URI.into()));
    s.media.push(MediaDescription::mp2t(5006));
    s.media.push(m);
    let text = s.to_sdp();
    assert!(text.contains("c=IN IP6 ff15::1\r\n"), "{text}");
    assert!(text.contains("m=audio 5004 RTP/AVP 97\r\nc=IN IP4 239.0.0.9/32\r\nb=AS:5000\r\na=rtpmap:97 opus/48000\r\na=fmtp:97 minptime=10;useinbandfec=1\r\na=control:trackID=1\r\na=extmap:1 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time\r\n"), "{text}");
    // A direction after the id (RFC 8285 §8) is read past.
    let with_dir = text.replace("a=extmap:1 ", "a=extmap:1/sendonly ");
    assert_eq!(SessionDescription::parse(&with_dir).unwrap(), s);
    assert!(text.ends_with("\r\n") && !text.replace("\r\n", "").contains('\n'));
    assert_eq!(SessionDescription::parse(&text).unwrap(), s);
}

#[test]
fn ipv4_multicast_without_ttl_is_written_with_one() {
    let s = SessionDescription::rtp_mp2t(
        ip("10.0.0.1"),
        7,
        "m",
        "239.255.0.1:5004".parse().unwrap(),
        None,
    );
    assert!(s.to_sdp().contains("c=IN IP4 239.255.0.1/1\r\n"));
    let u = SessionDescription::rtp_mp2t(
        ip("10.0.0.1"),
        7,
        "u",
        "127.0.0.1:5004".parse().unwrap(),
        Some(4),
    );
    // A TTL means nothing for unicast: not written.
    assert!(u.to_sdp().contains("c=IN IP4 127.0.0.1\r\n"));
}

#[test]
fn static_payload_type_needs_no_rtpmap() {
    let text =
        "v=0\no=- 1 1 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=video 5004 RTP/AVP 33\n";
    let s = SessionDescription::parse(text).unwrap();
    assert_eq!(s.media[0], MediaDescription::mp2t(5004));
}

#[test]
fn first_payload_type_is_taken() {
    let text = "v=0\r\ns=x\r\nm=video 5004 RTP/AVP 96 33\r\na=rtpmap:33 MP2T/90000\r\na=rtpmap:96 H265/90000\r\na=fmtp:33 x=1\r\n";
    let s = SessionDescription::parse(text).unwrap();
    assert_eq!(s.media[0].encoding, "H265");
    assert_eq!(s.media[0].fmtp, None);
    // No o=: the origin reads as 0.0.0.0.
    assert_eq!(s.origin, ip("0.0.0.0"));
}

#[test]
fn rtpmap_without_clock_rate_is_an_error() {
    let text = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\nm=video 5004 RTP/AVP 96\r\na=rtpmap:96 H264\r\n";
    let e = SessionDescription::parse(text).unwrap_err();
    assert!(matches!(e, SdpError::BadRtpmap { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("line 5 (m=video 5004 RTP/AVP 96)"), "{msg}");
    assert!(msg.contains("no clock rate after 'H264'"), "{msg}");
}

#[test]
fn errors_say_what_is_wrong() {
    let head = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\n";
    let cases: &[(&str, &str)] = &[
        (
            "m=video 5004 RTP/AVP 96\r\n",
            "dynamic payload type 96 has no a=rtpmap",
        ),
        (
            "m=video 5004 RTP/AVP 200\r\n",
            "payload type '200' is not a number from 0 to 127",
        ),
        (
            "m=application 9 TCP/BFCP *\r\n",
            "transport 'TCP/BFCP' is not RTP",
        ),
        (
            "m=video 5004 RTP/AVP 96\r\na=rtpmap:96 H264/fast\r\n",
            "clock rate 'fast'",
        ),
        (
            "m=video 5004 RTP/AVP 33\r\nc=IN IP4 example.com\r\n",
            "invalid connection address 'example.com'",
        ),
        (
            "m=video 5004 RTP/AVP 33\r\nc=IN IP4 239.1.1.1/999\r\n",
            "time-to-live",
        ),
        (
            "m=video 5004 RTP/AVP 33\r\nc=IN IP6 127.0.0.1\r\n",
            "IPv4 address marked IP6",
        ),
        ("m=video port RTP/AVP 33\r\n", "not a valid SDP"),
    ];
    for (tail, want) in cases {
        let e = SessionDescription::parse(&format!("{head}{tail}")).unwrap_err();
        assert!(e.to_string().contains(want), "{tail:?}: {e}");
    }
    let e = SessionDescription::parse("hello").unwrap_err();
    assert!(e.to_string().contains("not a valid SDP"), "{e}");
    let e = SessionDescription::parse(&"a".repeat(MAX_SDP_BYTES + 1)).unwrap_err();
    assert_eq!(
        e,
        SdpError::TooLarge {
            len: MAX_SDP_BYTES + 1
        }
    );
}

#[test]
fn free_text_cannot_inject_lines() {
    let mut s =
        SessionDescription::rtsp_mp2t(ip("127.0.0.1"), 1, "a\r\nm=audio 1 RTP/AVP 0", "npt=0-");
    s.media[0].control = Some("x\nc=IN IP4 1.2.3.4".into());
    let p = SessionDescription::parse(&s.to_sdp()).unwrap();
    assert_eq!(p.media.len(), 1);
    assert_eq!(p.media[0].connection, None);
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    fn token() -> impl Strategy<Value = String> {
        "[A-Za-z0-9][A-Za-z0-9=;,.:/_-]{0,20}"
    }

    fn conn() -> impl Strategy<Value = Option<Connection>> {
        prop_oneof![
            Just(None),
            (any::<[u8; 4]>(), proptest::option::of(any::<u8>())).prop_map(|(a, ttl)| {
                let addr = IpAddr::from(a);
                // A TTL is only kept for IPv4 multicast; a multicast without one gets /1.
                let ttl = match addr.is_multicast() {
                    true => Some(ttl.unwrap_or(1)),
                    false => None,
                };
                Some(Connection::new(addr, ttl))
            }),
            any::<[u8; 16]>().prop_map(|a| Some(Connection::new(IpAddr::from(a), None))),
        ]
    }

    fn media() -> impl Strategy<Value = MediaDescription> {
        (
            "(video|audio|application)",
            any::<u16>(),
            0u8..=127,
            "[A-Za-z0-9-]{1,10}",
            1u32..,
            proptest::option::of(token()),
            proptest::option::of(token()),
            conn(),
            proptest::option::of(any::<u64>()),
            proptest::option::of((1u8..=14, token())),
            proptest::option::of(token()),
            (
                proptest::option::of((96u8..=127, proptest::option::of(any::<u32>()))),
                proptest::option::of((any::<u32>(), token(), proptest::option::of(any::<u32>()))),
            ),
        )
            .prop_map(
                |(media, port, pt, enc, rate, fmtp, control, c, b, x, k, (r, src))| {
                    // A retransmission's SSRC is written only beside the media's source.
                    let rtx_ssrc = src.as_ref().and_then(|(_, _, rtx)| *rtx).map(Ssrc);
                    let source = src.map(|(ssrc, cname, _)| Source {
                        ssrc: Ssrc(ssrc),
                        cname,
                    });
                    // A retransmission payload type is another than the media's.
                    let retransmission = r.filter(|(rpt, _)| *rpt != pt).map(|(rpt, t)| {
                        super::super::Retransmission {
                            payload_type: PayloadType(rpt),
                            rtx_time_ms: t,
                            ssrc: rtx_ssrc,
                            tllei: rpt % 2 == 0,
                        }
                    });
                    MediaDescription {
                        media,
                        port,
                        payload_type: PayloadType(pt),
                        encoding: enc,
                        clock_rate: rate,
                        fmtp,
                        control,
                        connection: c,
                        bitrate_kbps: b,
                        extmap: x,
                        crypto: k.map(|k| format!("1 AES_CM_128_HMAC_SHA1_80 inline:{k}")),
                        retransmission,
                        source,
                    }
                },
            )
    }

    #[test]
    fn retransmission_is_announced_as_gstreamer_and_webrtc_read_it() {
        let mut m = MediaDescription::mp2t(5004);
        m.retransmission = Some(super::super::Retransmission {
            payload_type: PayloadType(97),
            rtx_time_ms: Some(200),
            ssrc: None,
            tllei: false,
        });
        let mut s = SessionDescription::new("127.0.0.1".parse().unwrap(), 1, "t");
        s.media.push(m);
        let text = s.to_sdp();
        for line in [
            "m=video 5004 RTP/AVPF 33 97\r\n",
            "a=rtpmap:33 MP2T/90000\r\n",
            "a=rtcp-fb:33 nack\r\n",
            "a=rtpmap:97 rtx/90000\r\n",
            "a=fmtp:97 apt=33;rtx-time=200\r\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert_eq!(SessionDescription::parse(&text).unwrap(), s);
        // An rtx whose apt names another payload type is not this media's.
        let other = text.replace("apt=33", "apt=34");
        let parsed = SessionDescription::parse(&other).unwrap();
        assert_eq!(parsed.media[0].retransmission, None);
        // Nor is an rtx on a static payload type.
        let static_pt = text.replace("33 97", "33 32").replace(":97 ", ":32 ");
        let parsed = SessionDescription::parse(&static_pt).unwrap();
        assert_eq!(parsed.media[0].retransmission, None, "{static_pt}");
        // To a group: the sender's TLLEI is announced (RFC 6642 §5), read back, and read
        // from `*` too; another payload type's, or another parameter, is not this media's.
        s.media[0].retransmission.as_mut().unwrap().tllei = true;
        let text = s.to_sdp();
        assert!(
            text.contains("a=rtcp-fb:33 nack\r\na=rtcp-fb:33 nack tllei\r\n"),
            "{text}"
        );
        assert_eq!(SessionDescription::parse(&text).unwrap(), s);
        let tllei = |t: &str| {
            let m = &SessionDescription::parse(t).unwrap().media[0];
            m.retransmission.unwrap().tllei
        };
        assert!(tllei(
            &text.replace("rtcp-fb:33 nack tllei", "rtcp-fb:* nack tllei")
        ));
        assert!(!tllei(
            &text.replace("rtcp-fb:33 nack tllei", "rtcp-fb:34 nack tllei")
        ));
        assert!(!tllei(
            &text.replace("rtcp-fb:33 nack tllei", "rtcp-fb:33 nack pslei")
        ));
    }

    #[test]
    fn sources_and_their_retransmission_are_named_as_webrtc_names_them() {
        let mut m = MediaDescription::mp2t(5004);
        m.source = Some(Source {
            ssrc: Ssrc(3_000_000_001),
            cname: "metronome-b2d05e01-cam".into(),
        });
        m.retransmission = Some(super::super::Retransmission {
            payload_type: PayloadType(97),
            rtx_time_ms: None,
            ssrc: Some(Ssrc(7)),
            tllei: false,
        });
        let mut s = SessionDescription::new("127.0.0.1".parse().unwrap(), 1, "t");
        s.media.push(m);
        let text = s.to_sdp();
        let lines = [
            "a=ssrc-group:FID 3000000001 7\r\n",
            "a=ssrc:3000000001 cname:metronome-b2d05e01-cam\r\n",
            "a=ssrc:7 cname:metronome-b2d05e01-cam\r\n",
        ];
        let at = |l: &str| text.find(l).unwrap_or_else(|| panic!("{l} in {text}"));
        assert!(
            at(lines[0]) < at(lines[1]) && at(lines[1]) < at(lines[2]),
            "{text}"
        );
        assert_eq!(SessionDescription::parse(&text).unwrap(), s);
        // Without the group, the first source line is the media's, and no SSRC is the
        // retransmission's.
        let parsed = SessionDescription::parse(&text.replace(lines[0], "")).unwrap();
        let m = &parsed.media[0];
        assert_eq!(m.source.as_ref().map(|s| s.ssrc), Some(Ssrc(3_000_000_001)));
        assert_eq!(m.retransmission.and_then(|r| r.ssrc), None);
        // A source without a cname, or whose SSRC is not a plain 32-bit number, is not kept.
        for (from, to) in [
            ("cname:", "label:"),
            ("3000000001 cname", "5000000000 cname"),
            ("3000000001 cname", "+3000000001 cname"),
        ] {
            let parsed = SessionDescription::parse(&text.replace(from, to)).unwrap();
            assert_eq!(parsed.media[0].source, None, "{from} → {to}");
        }
        // A malformed source line changes nothing else.
        let junk = "a=ssrc:x cname:\r\na=ssrc-group:FID\r\na=rtpmap:33";
        let junk = text.replace("a=rtpmap:33", junk);
        assert_eq!(SessionDescription::parse(&junk).unwrap(), s);
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
            let _ = SessionDescription::parse(&text);
        }

        #[test]
        fn sdp_like_text_never_panics(
            lines in proptest::collection::vec(
                ("[vosctmabk]", "[ -~]{0,40}").prop_map(|(k, v)| format!("{k}={v}")), 0..20),
            cut in any::<bool>(),
        ) {
            let mut text = String::from("v=0\r\n");
            text.push_str(&lines.join(if cut { "\n" } else { "\r\n" }));
            let _ = SessionDescription::parse(&text);
        }

        #[test]
        fn round_trip(
            origin in any::<[u8; 4]>(),
            id in any::<u64>(),
            name in "[A-Za-z0-9][A-Za-z0-9 ._-]{0,20}[A-Za-z0-9]",
            c in conn(),
            control in proptest::option::of(token()),
            range in proptest::option::of(token()),
            tool in proptest::option::of(token()),
            media in proptest::collection::vec(media(), 0..4),
        ) {
            let s = SessionDescription {
                origin: IpAddr::from(origin), session_id: id, name, connection: c,
                control, range, tool, media,
            };
            prop_assert_eq!(SessionDescription::parse(&s.to_sdp()).unwrap(), s);
        }
    }
}
