//! Whatever bytes a client sends, the RTSP framer and server never panic, the framer's buffer
//! stays within its capacity, every response serialises, and the backend's contract holds
//! (no play without setup, one teardown per session). Property tests over the `rtsp` fuzz
//! target's world (`metronome_fuzz::rtsp_world`).

use std::time::Duration;

use metronome_fuzz::rtsp_world::{small_limits, World};
use metronome_session::rtsp::{ConnId, Framer, FramerLimits};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..400), 0..12),
                       small in any::<bool>()) {
        let mut w = World::new(if small { small_limits() } else { FramerLimits::default() });
        for c in &chunks {
            w.feed(c);
        }
        w.finish();
    }

    #[test]
    fn plausible_requests(parts in prop::collection::vec(part(), 1..24), split in 1usize..64) {
        let mut w = World::new(small_limits());
        for p in parts {
            let bytes = substitute(&p, &w.last_session);
            for c in bytes.chunks(split) {
                w.feed(c);
            }
            w.now += Duration::from_millis(300);
            w.server.handle_timeout(w.now, &mut w.backend);
        }
        w.finish();
    }

    #[test]
    fn client_flows(steps in prop::collection::vec(step(), 1..40)) {
        let mut w = World::new(small_limits());
        let mut mount = "live";
        for s in steps {
            step_world(&mut w, s, &mut mount);
        }
        w.finish();
    }
}

/// Client steps in a mostly sensible order, with garbage, silence and reconnects between them.
#[derive(Clone, Debug)]
enum Step {
    Setup { file: bool, transport: usize },
    Play { range: Option<&'static str> },
    Pause,
    Teardown,
    KeepAlive,
    Garbage(Vec<u8>),
    Silence(u64),
    Close,
}

fn step() -> impl Strategy<Value = Step> {
    let range = prop::option::of(prop::sample::select(vec![
        "npt=0.000-",
        "npt=3-",
        "npt=10-",
        "npt=now-",
        "npt=x",
        "clock=1-",
    ]));
    prop_oneof![
        3 => (any::<bool>(), 0usize..4).prop_map(|(file, transport)| Step::Setup { file, transport }),
        3 => range.prop_map(|range| Step::Play { range }),
        2 => Just(Step::Pause),
        1 => Just(Step::Teardown),
        1 => Just(Step::KeepAlive),
        1 => prop::collection::vec(any::<u8>(), 0..40).prop_map(Step::Garbage),
        1 => (0u64..8000).prop_map(Step::Silence),
        1 => Just(Step::Close),
    ]
}

/// Takes one client step in `w`.
fn step_world(w: &mut World, step: Step, mount: &mut &'static str) {
    {
        let session = format!("Session: {}\r\n", w.last_session);
        let text = match step {
            Step::Setup { file, transport } => {
                *mount = if file { "file" } else { "live" };
                let t = [
                    "RTP/AVP;unicast;client_port=5000-5001",
                    "RTP/AVP/TCP;unicast",
                    "RTP/AVP;multicast,RTP/AVP/TCP;unicast;interleaved=0-1",
                    "RTP/SAVP;unicast;client_port=9",
                ][transport];
                format!("SETUP rtsp://h/{mount}/trackID=0 RTSP/1.0\r\nCSeq: 1\r\nTransport: {t}\r\n\r\n")
            }
            Step::Play { range } => {
                let range = range.map(|r| format!("Range: {r}\r\n")).unwrap_or_default();
                format!("PLAY rtsp://h/{mount}/ RTSP/1.0\r\nCSeq: 2\r\n{session}{range}\r\n")
            }
            Step::Pause => format!("PAUSE rtsp://h/{mount}/ RTSP/1.0\r\nCSeq: 3\r\n{session}\r\n"),
            Step::Teardown => {
                format!("TEARDOWN rtsp://h/{mount}/ RTSP/1.0\r\nCSeq: 4\r\n{session}\r\n")
            }
            Step::KeepAlive => {
                format!("GET_PARAMETER rtsp://h/{mount}/ RTSP/1.0\r\nCSeq: 5\r\n{session}\r\n")
            }
            Step::Garbage(bytes) => return w.feed(&bytes),
            Step::Silence(ms) => {
                w.now += Duration::from_millis(ms);
                w.server.handle_timeout(w.now, &mut w.backend);
                return;
            }
            Step::Close => {
                // A new connection: the framer starts afresh, the old sessions end.
                w.server.connection_closed(ConnId(1), &mut w.backend);
                w.framer = Framer::new(small_limits());
                return;
            }
        };
        w.feed(text.as_bytes());
    }
}

/// `{S}` replaced by the last session id.
fn substitute(bytes: &[u8], session: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        if let Some(tail) = rest.strip_prefix(b"{S}") {
            out.extend_from_slice(session.as_bytes());
            rest = tail;
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}

/// A request made of likely and hostile pieces, a data frame, or noise.
fn part() -> impl Strategy<Value = Vec<u8>> {
    let method = prop_oneof![
        6 => Just("SETUP"), 5 => Just("PLAY"), 2 => Just("PAUSE"), 1 => Just("TEARDOWN"),
        1 => Just("OPTIONS"), 1 => Just("DESCRIBE"), 1 => Just("GET_PARAMETER"),
        1 => Just("SET_PARAMETER"), 1 => Just("ANNOUNCE"), 1 => Just("FOO"),
    ];
    let url = prop_oneof![
        6 => Just("rtsp://h/live/trackID=0"), 6 => Just("rtsp://h/file/streamid=0"),
        1 => Just("*"), 1 => Just("rtsp://h/live"), 1 => Just("rtsp://h/file/"),
        1 => Just("rtsp://h/nope"), 1 => Just("rtsp://h/live/trackID=9"), 1 => Just("rtsp://h"),
        1 => Just("x:"),
    ];
    let session = prop_oneof![
        8 => Just("Session: {S}"), 1 => Just("Session: {S};timeout=5"), 1 => Just("Session: zz"),
    ];
    let valid = prop::sample::select(vec![
        "Transport: RTP/AVP;unicast;client_port=5000-5001",
        "Transport: RTP/AVP/TCP;unicast",
        "Transport: RTP/AVP;multicast,RTP/AVP;unicast;client_port=6000",
    ]);
    let transport = prop::sample::select(vec![
        "Transport: RTP/AVP/TCP;interleaved=254-255",
        "Transport: RTP/AVP;multicast",
        "Transport: RTP/AVP;unicast;dest_addr=\"\\\"",
        "Transport: RTP/AVP;unicast;src_addr=\"",
        "Transport: RTP/AVP;mode=\"",
        "Transport: RTP/AVP;unicast;client_port=65535;destination=::1",
        "Transport: RTP/AVP;unicast;client_port=5000;destination=10.0.0.2",
        "Transport: ,;=,\"",
    ]);
    let range = prop::sample::select(vec![
        "Range: npt=5-",
        "Range: npt=99999999999999999999-",
        "Range: npt=1:99:99-",
        "Range: npt=0.0000000001-",
        "Range: clock=x",
        "Range: npt=-",
        "Range: npt=now-",
    ]);
    let hostile = prop::sample::select(vec![
        "CSeq: 1",
        "CSeq: -1",
        "Accept: text/plain",
        "Accept: ;;;,",
        "Require: x",
        "Content-Length: 3",
        "Content-Length: 99",
        "Content-Length: x",
        " folded",
        "X: \u{7f}\u{1}",
    ]);
    let request = (
        (method, url, prop::bool::weighted(0.9)),
        prop::option::weighted(0.7, session),
        prop::option::weighted(0.8, prop_oneof![3 => valid, 1 => transport]),
        prop::option::weighted(0.3, range),
        prop::option::weighted(0.25, hostile),
        (prop::bool::weighted(0.1), prop::bool::weighted(0.1)),
    )
        .prop_map(
            |((m, u, cseq), session, transport, range, hostile, (body, keep))| {
                // SETUP mostly creates a session; the other methods mostly name one.
                let session = session.filter(|_| m != "SETUP" || keep);
                let mut s = format!("{m} {u} RTSP/1.0\r\n");
                if cseq {
                    s.push_str("CSeq: 42\r\n");
                }
                let headers = session
                    .into_iter()
                    .chain(transport)
                    .chain(range)
                    .chain(hostile);
                for h in headers {
                    s.push_str(h);
                    s.push_str("\r\n");
                }
                s.push_str(if body { "\r\nabc" } else { "\r\n" });
                s.into_bytes()
            },
        );
    let data = (any::<u8>(), 0u8..60).prop_map(|(c, n)| {
        let mut v = vec![b'$', c, 0, n];
        v.resize(4 + usize::from(n), b'd');
        v
    });
    let noise = prop::collection::vec(any::<u8>(), 0..30);
    prop_oneof![12 => request, 1 => data, 1 => noise, 1 => Just(b"\r\n\r\n".to_vec())]
}
