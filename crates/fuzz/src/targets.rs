//! The targets themselves. Each drives the parser as the server or receiver does with what
//! arrives from the network or a file, and checks what must hold whatever the input.

use super::chunks;
use crate::rtsp_world::World;
use metronome_session::receiver::{PayloadKind, ReceiverConfig, ReceiverRepair, ReceiverSession};
use metronome_session::rtsp::{FramerLimits, TransportSpec};
use metronome_session::sender::{SenderReports, SenderReportsConfig};
use metronome_time::{MediaClock, NtpTime, Timestamp};
use metronome_wire::rtcp::parse_compound;
use metronome_wire::PayloadType;
use metronome_wire::{Rfc4175View, RtpView};
use metronome_wire::{SeqNo, Ssrc};
use std::time::Duration;

/// RTP datagrams (and their header extensions) into a receiver session, for TS and for any
/// payload, and with repairs asked for (payload type 97 taken as retransmissions, NACKs
/// written after every datagram) and rebuilt from FEC (every datagram also taken as a SMPTE
/// 2022-1 FEC packet, what it rebuilds taken after it).
pub fn rtp(data: &[u8]) {
    let repair = Some(ReceiverRepair::new(
        PayloadType(97),
        Duration::from_millis(100),
    ));
    let fec = Some(ReceiverRepair::new(PayloadType(97), Duration::from_millis(100)).with_fec());
    for (payload, repair) in [
        (PayloadKind::Mp2t, None),
        (PayloadKind::Any, None),
        (PayloadKind::Any, repair.clone()),
        (PayloadKind::Mp2t, repair),
        (PayloadKind::Any, fec),
    ] {
        let mut rx = ReceiverSession::new(ReceiverConfig {
            payload,
            send_time_ext_id: Some(1),
            max_sources: 4,
            repair,
            ..ReceiverConfig::default()
        });
        let mut rtcp = [0u8; 1500];
        let mut now = Timestamp::from_millis(1);
        for d in chunks(data) {
            if let Ok(p) = RtpView::parse(d) {
                let _ = (p.payload(), p.send_time(1), p.marker());
                assert!(p.payload().len() <= d.len());
            }
            if let Ok(r) = rx.handle_rtp(now, Some(NtpTime::from_unix_nanos(now.as_nanos())), d) {
                let from = if r.repaired { rx.repaired_packet() } else { d };
                assert!(r.payload.end <= from.len());
            }
            rx.handle_fec(d);
            while let Some(r) = rx.poll_rebuilt(now) {
                if let Ok(r) = r {
                    assert!(r.repaired && r.payload.end <= rx.repaired_packet().len());
                }
            }
            let _ = rx.poll_transmit(now, &mut rtcp);
            now += Duration::from_millis(3);
        }
        while rx.poll_event().is_some() {}
    }
    srtp(data);
}

/// The datagrams as SRTP and SRTCP under a key their sender cannot know: nothing
/// authenticates, nothing panics.
fn srtp(data: &[u8]) {
    use metronome_session::srtp::{ReceiverSrtp, SrtpKey};
    let Ok(mut k) = ReceiverSrtp::new(&SrtpKey::new([0x5a; 30])) else {
        return;
    };
    for d in chunks(data) {
        assert!(k.rtp(d).is_none() && k.rtcp_in(d).is_none());
    }
}

/// Compound RTCP packets (reports, SDES, BYE, the congestion-control APP packets) into the
/// parser, a receiver session and a sender's report table.
pub fn rtcp(data: &[u8]) {
    let mut rx = ReceiverSession::new(ReceiverConfig::default());
    let mut tx = SenderReports::new(
        SenderReportsConfig {
            ssrc: Ssrc(7),
            cname: "fuzz".into(),
            clock: MediaClock::VIDEO_90K,
            rtp_ts_base: metronome_time::RtpTime(0),
            session_bw_bps: 1_000_000,
            rtcp_min_interval: Duration::from_secs(1),
            max_receivers: 4,
            seed: 1,
        },
        Timestamp::ZERO,
    );
    let from = "192.0.2.1:5005".parse().unwrap();
    let mut now = Timestamp::from_millis(1);
    for d in chunks(data) {
        let mut items = 0usize;
        let _ = parse_compound(d, |_| items += 1);
        assert!(items <= d.len(), "{items} items from {} bytes", d.len());
        let _ = rx.handle_rtcp(now, d);
        // Every sequence number "sent" at its own µs: TFRC's and TFMCC's echoes are resolved.
        let sent_at = |seq: SeqNo| Some(Timestamp::from_micros(u64::from(seq.get())));
        tx.handle_rtcp(
            now,
            NtpTime::from_unix_nanos(now.as_nanos()),
            from,
            d,
            &sent_at,
        );
        now += Duration::from_millis(10);
    }
}

/// Bytes on an RTSP connection: framing, requests, the session state machine (with a backend
/// that checks its contract), interleaved data, timeouts; with the default and with small
/// limits.
pub fn rtsp(data: &[u8]) {
    let small = data.first().is_some_and(|b| b & 1 == 1);
    let limits = if small {
        crate::rtsp_world::small_limits()
    } else {
        FramerLimits::default()
    };
    let mut w = World::new(limits);
    for c in chunks(data) {
        w.feed(c);
        w.now += Duration::from_millis(700);
        w.server.handle_timeout(w.now, &mut w.backend);
    }
    w.finish();
}

/// The request headers a server reads on their own: Transport (RFC 2326 §12.39: every
/// alternative, and the choice a server makes), Session, and an `Authorization` checked as a
/// Digest answer (RFC 7616) for a protected mount.
pub fn rtsp_transport(data: &[u8]) {
    authorization(data);
    let text = String::from_utf8_lossy(data);
    for alt in metronome_session::rtsp::transport_alternatives(&text) {
        let spec = TransportSpec::parse(alt);
        let _ = (spec.destination_ip(), spec.source_ip());
    }
    let _ = TransportSpec::first(&text);
    let _ = metronome_session::rtsp::client::parse_session(&text, Duration::from_secs(60));
}

/// What an RTSP server sends a client (`recv rtsp://`): responses and interleaved frames, and
/// a 401's challenges as the client reads and answers them (`auth_client`).
pub fn rtsp_response(data: &[u8]) {
    use metronome_session::rtsp::auth_client::ClientAuth;
    use metronome_session::rtsp::client::{split_frame, ClientLimits, Split};
    let text = String::from_utf8_lossy(data);
    let secure = data.first().is_some_and(|b| b & 1 == 1);
    let _ = ClientAuth::is_stale(&text);
    if let Ok(mut a) = ClientAuth::new(&text, "user", "password", secure) {
        let answer = a.authorization("DESCRIBE", "rtsp://h/x", "0a4f113b");
        assert!(!answer.contains(['\r', '\n']), "{answer:?}");
        let _ = a.renew(&text, secure);
    }
    let limits = ClientLimits {
        head_bytes: 4096,
        body_bytes: 8192,
    };
    let mut rest = data;
    while let Ok(Some(split)) = split_frame(rest, limits) {
        let used = match split {
            Split::Skip(n) => n,
            Split::Data { len, .. } => 4 + len,
            Split::Message(len) => len,
        };
        assert!(used > 0 && used <= rest.len(), "{used} of {}", rest.len());
        rest = &rest[used..];
    }
}

/// An SDP document (DESCRIBE's answer, or a file given to `recv`).
pub fn sdp(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(sdp) = metronome_wire::sdp::SessionDescription::parse(&text) {
        for c in sdp.media.iter().filter_map(|m| m.crypto.as_deref()) {
            let _ = metronome_session::srtp::SrtpKey::from_crypto_attribute(c);
        }
    }
}

/// MPEG-TS: packets into the parser and the video demultiplexer, and the whole input as a file
/// read by the file source (sync search, PCR timing, PSI).
pub fn mpegts(data: &[u8]) {
    let mut demux = metronome_media::demux::VideoDemux::new();
    for p in data.chunks(188) {
        let _ = metronome_wire::ts::TsPacket::parse(p);
        let _ = metronome_wire::mp2t::check_payload(p);
        if p.len() == 188 {
            let _ = demux.push(p);
        }
    }
    let _ = demux.finish();
    let reader = Box::new(std::io::Cursor::new(data.to_vec()));
    if let Ok(mut src) = metronome_media::TsFileSource::from_reader("fuzz".into(), reader, false) {
        use metronome_media::TsSource;
        let mut out = [0u8; 188];
        // A file of n bytes has at most n / 188 packets; the source never hands out more.
        for _ in 0..=data.len() / 188 + 1 {
            match src.next_packet(&mut out) {
                Ok(Some(_)) => {}
                _ => break,
            }
        }
    }
}

/// RFC 4175 payloads (uncompressed video) into the parser and the depayloader, for 4:2:2 at
/// 8 and 10 bits.
pub fn rfc4175(data: &[u8]) {
    use metronome_video::{Depth, Sampling, VideoFormat};
    for depth in [Depth::Eight, Depth::Ten] {
        let format =
            VideoFormat::new(64, 32, Sampling::Ycbcr422, depth, 25, 1).expect("a valid format");
        let mut d =
            metronome_session::rfc4175::RawDepayloader::new(format, None).expect("a depayloader");
        let mut now = Timestamp::from_millis(1);
        for c in chunks(data) {
            if let Ok(p) = RtpView::parse(c) {
                let _ = Rfc4175View::parse(p.payload());
            }
            let _ = d.push(now, c);
            now += Duration::from_micros(100);
        }
        let _ = d.flush(now);
    }
}

/// RTP datagrams of coded video (RFC 6416 MP4V-ES, RFC 6184 H.264) into the depayloader that
/// `recv --quality` runs, a gap before every datagram whose first byte is odd; the SDP
/// configuration parser on the same bytes. A frame never outgrows its bound.
pub fn coded_depay(data: &[u8]) {
    use metronome_media::decode::VideoCodec;
    use metronome_media::payload::depay::{config_of_fmtp, FrameDepayloader, MAX_FRAME_BYTES};
    for codec in [VideoCodec::Mpeg4Part2, VideoCodec::H264] {
        let mut d = FrameDepayloader::new(codec);
        let mut frames = Vec::new();
        for c in chunks(data) {
            if c.first().is_some_and(|b| b & 1 == 1) {
                d.lost();
            }
            if let Ok(p) = RtpView::parse(c) {
                frames.extend(d.push(p.timestamp(), p.marker(), p.payload()));
            }
        }
        frames.extend(d.finish());
        assert!(frames.iter().all(|f| f.data.len() <= MAX_FRAME_BYTES));
        let _ = config_of_fmtp(codec, &String::from_utf8_lossy(data));
    }
}

/// A request to the HTTP control API.
pub fn http(data: &[u8]) {
    let limits = metronome_apps::control::ControlLimits::default();
    if let Ok(Some(n)) = metronome_apps::control::parse_request(data, &limits) {
        assert!(n <= data.len());
    }
}

/// A scenario file (`lab run FILE`).
pub fn scenario(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = metronome_config::scenario::ScenarioFile::parse(&text, "fuzz.toml");
}

/// A server configuration file (`serve --config FILE`).
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = metronome_config::serve::parse(&text, "fuzz.toml");
}

/// `data` as the `Authorization` of a DESCRIBE for a protected mount: no panic, and nothing
/// but a right answer passes (none can be right: the user's hash is of no password).
fn authorization(data: &[u8]) {
    use metronome_config::rtsp_auth::{RtspAuthSpec, RtspUser};
    use metronome_session::rtsp::auth::{Asking, Authenticator, Verdict};
    let user = RtspUser {
        name: "alice".into(),
        md5: Some([0x11; 16]),
        sha256: Some([0x22; 32]),
        mounts: None,
    };
    let spec = RtspAuthSpec {
        realm: "metronome".into(),
        public: vec![],
        users: vec![user],
    };
    let auth = Authenticator::new(spec, [3; 32]);
    let Ok(url) = rtsp_types::Url::parse("rtsp://127.0.0.1:8554/cam1") else {
        return;
    };
    let text = String::from_utf8_lossy(data);
    let asking = Asking {
        now: Timestamp::from_secs(1),
        peer: std::net::IpAddr::from([127, 0, 0, 1]),
        method: "DESCRIBE",
        url: &url,
        mount: "cam1",
        authorization: Some(&text),
        session_user: None,
        secure: true,
    };
    assert!(!matches!(auth.check(&asking), Verdict::Pass(_)));
}
