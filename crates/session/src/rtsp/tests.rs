//! Unit tests of the RTSP server: a test [`Backend`] that records every call, and a harness that
//! sends request text through the [`Framer`] into the [`RtspServer`].

mod framing;
mod server;
mod setup;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use metronome_time::Timestamp;

use super::*;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Call {
    Mount(String),
    Setup {
        session: SessionId,
        conn: ConnId,
        mount: String,
        transport: Requested,
    },
    Play(SessionId, Option<Duration>),
    Pause(SessionId),
    Teardown(SessionId),
}

/// Mounts `live` (no duration, multicast) and `file` (60 s, unicast only).
struct TestBackend {
    mounts: BTreeMap<String, MountInfo>,
    calls: Vec<Call>,
    setup_refusal: Option<Refusal>,
    play_refusal: Option<Refusal>,
    pause_position: Duration,
}

const SDP: &str =
    "v=0\r\no=- 0 0 IN IP4 192.0.2.1\r\ns=test\r\nm=video 0 RTP/AVP 33\r\na=control:trackID=0\r\n";
const SSRC: Ssrc = Ssrc(0x1234_abcd);

impl TestBackend {
    fn new() -> Self {
        let mount = |duration, multicast| MountInfo {
            sdp: SDP.to_owned(),
            duration,
            multicast,
            srtp: false,
            feedback: false,
        };
        let mut mounts = BTreeMap::new();
        mounts.insert("live".to_owned(), mount(None, true));
        let mut srtp = mount(None, false);
        srtp.srtp = true;
        mounts.insert("srtp".to_owned(), srtp);
        let mut repairs = mount(None, true);
        repairs.feedback = true;
        mounts.insert("repairs".to_owned(), repairs);
        mounts.insert(
            "file".to_owned(),
            mount(Some(Duration::from_secs(60)), false),
        );
        TestBackend {
            mounts,
            calls: Vec::new(),
            setup_refusal: None,
            play_refusal: None,
            pause_position: Duration::from_secs(12),
        }
    }

    fn teardowns(&self) -> Vec<SessionId> {
        self.calls
            .iter()
            .filter_map(|c| match c {
                Call::Teardown(id) => Some(*id),
                _ => None,
            })
            .collect()
    }

    /// Calls other than `mount`.
    fn actions(&self) -> Vec<Call> {
        self.calls
            .iter()
            .filter(|c| !matches!(c, Call::Mount(_)))
            .cloned()
            .collect()
    }
}

impl Backend for TestBackend {
    fn mount(&mut self, name: &str, _local: SocketAddr) -> Option<MountInfo> {
        self.calls.push(Call::Mount(name.to_owned()));
        self.mounts.get(name).cloned()
    }
    fn setup(&mut self, req: &SetupRequest<'_>) -> Result<Delivery, Refusal> {
        self.calls.push(Call::Setup {
            session: req.session,
            conn: req.conn,
            mount: req.mount.to_owned(),
            transport: req.transport,
        });
        if let Some(r) = self.setup_refusal.clone() {
            return Err(r);
        }
        Ok(match req.transport {
            Requested::Udp {
                client_rtp,
                client_rtcp,
            } => Delivery::Udp {
                client_rtp,
                client_rtcp,
                server_rtp: 6970,
                server_rtcp: 6971,
                ssrc: SSRC,
            },
            Requested::Multicast => Delivery::Multicast {
                group: "239.1.2.3".parse().unwrap(),
                port: 5004,
                rtcp_port: 5005,
                ttl: 16,
                ssrc: SSRC,
            },
            Requested::Interleaved {
                rtp_channel,
                rtcp_channel,
            } => Delivery::Interleaved {
                rtp_channel,
                rtcp_channel,
                ssrc: SSRC,
            },
        })
    }
    fn play(&mut self, session: SessionId, from: Option<Duration>) -> Result<PlayInfo, Refusal> {
        self.calls.push(Call::Play(session, from));
        if let Some(r) = self.play_refusal.clone() {
            return Err(r);
        }
        Ok(PlayInfo {
            seq: metronome_wire::SeqNo(4321),
            rtptime: metronome_time::RtpTime(987_654),
            start: from.unwrap_or_default(),
            end: None,
        })
    }
    fn pause(&mut self, session: SessionId) -> Result<Duration, Refusal> {
        self.calls.push(Call::Pause(session));
        Ok(self.pause_position)
    }
    fn teardown(&mut self, session: SessionId) {
        self.calls.push(Call::Teardown(session));
    }
}

fn peer() -> SocketAddr {
    "192.0.2.10:40000".parse().unwrap()
}

fn local() -> SocketAddr {
    "192.0.2.1:554".parse().unwrap()
}

/// Frames `text` (which must hold exactly one request).
fn parse(text: &str) -> rtsp_types::Request<Vec<u8>> {
    let mut framer = Framer::new(FramerLimits::default());
    framer.push(text.as_bytes());
    match framer.next_frame() {
        Some(Ok(Frame::Request(req))) => {
            assert!(framer.next_frame().is_none(), "one request expected");
            req
        }
        other => panic!("not a request: {other:?}"),
    }
}

/// A response, serialised as it goes on the wire.
struct Resp {
    status: u16,
    text: String,
    resp: rtsp_types::Response<Vec<u8>>,
}

impl Resp {
    fn new(resp: rtsp_types::Response<Vec<u8>>) -> Self {
        let mut out = Vec::new();
        resp.write(&mut out).unwrap();
        Resp {
            status: resp.status().into(),
            text: String::from_utf8(out).unwrap(),
            resp,
        }
    }
    fn header(&self, name: &str) -> Option<String> {
        let name = rtsp_types::HeaderName::try_from(name).unwrap();
        self.resp.header(&name).map(|v| v.as_str().to_owned())
    }
    /// The id in the Session header.
    fn session(&self) -> String {
        let value = self.header("Session").expect("Session header");
        value.split(';').next().unwrap().to_owned()
    }
    fn body(&self) -> &[u8] {
        self.resp.body()
    }
}

struct Harness {
    server: RtspServer,
    backend: TestBackend,
    now: Timestamp,
    cseq: u32,
    /// The client's address for the next requests.
    peer: SocketAddr,
}

const BASE: &str = "rtsp://192.0.2.1/";

impl Harness {
    fn new() -> Self {
        Harness::with(RtspConfig::default())
    }
    fn with(cfg: RtspConfig) -> Self {
        Harness {
            server: RtspServer::new(cfg),
            backend: TestBackend::new(),
            now: Timestamp::from_secs(1),
            cseq: 0,
            peer: peer(),
        }
    }

    /// Sends `METHOD URL RTSP/1.0` with a fresh CSeq and `headers` on connection `conn`;
    /// checks that the response echoes the CSeq. `url` is relative to rtsp://192.0.2.1/.
    fn send(&mut self, conn: u64, method: &str, url: &str, headers: &[&str]) -> Resp {
        self.cseq += 1;
        let url = if url == "*" {
            url.to_owned()
        } else {
            format!("{BASE}{url}")
        };
        let mut text = format!("{method} {url} RTSP/1.0\r\nCSeq: {}\r\n", self.cseq);
        for h in headers {
            text.push_str(h);
            text.push_str("\r\n");
        }
        text.push_str("\r\n");
        let resp = self.raw(conn, &text);
        assert_eq!(
            resp.header("CSeq"),
            Some(self.cseq.to_string()),
            "{}",
            resp.text
        );
        resp
    }

    fn raw(&mut self, conn: u64, text: &str) -> Resp {
        let req = parse(text);
        let resp = self.server.handle_request(
            self.now,
            ConnId(conn),
            self.peer,
            local(),
            &req,
            &mut self.backend,
        );
        Resp::new(resp)
    }

    /// SETUP of `mount` over UDP on `conn`: the session id.
    fn setup(&mut self, conn: u64, mount: &str) -> String {
        let r = self.send(
            conn,
            "SETUP",
            &format!("{mount}/trackID=0"),
            &["Transport: RTP/AVP;unicast;client_port=5000-5001"],
        );
        assert_eq!(r.status, 200, "{}", r.text);
        r.session()
    }

    fn play(&mut self, conn: u64, mount: &str, session: &str, extra: &[&str]) -> Resp {
        let mut headers = vec![format!("Session: {session}")];
        headers.extend(extra.iter().map(|s| s.to_string()));
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        self.send(conn, "PLAY", &format!("{mount}/"), &headers)
    }

    fn id(session: &str) -> SessionId {
        SessionId(u128::from_str_radix(session, 16).unwrap())
    }
}
