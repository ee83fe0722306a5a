//! One RTSP connection to the sans-IO server in a test world: a framer, the server, and a
//! backend that accepts everything and checks the contract of the calls it gets (no play
//! without setup, one teardown per session, no id reused). The `rtsp` fuzz target and the
//! property tests (`tests/rtsp_garbage.rs`) drive it.

use metronome_wire::Ssrc;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use metronome_session::rtsp::{
    Backend, ConnId, Delivery, Frame, Framer, FramerLimits, MountInfo, PlayInfo, Refusal,
    Requested, RtspConfig, RtspServer, SessionId, SetupRequest,
};
use metronome_time::Timestamp;

/// Accepts everything, and checks the contract of the calls it gets.
#[derive(Default)]
pub struct Checker {
    pub live: BTreeSet<SessionId>,
    pub ended: BTreeSet<SessionId>,
}

impl Backend for Checker {
    fn mount(&mut self, name: &str, _local: SocketAddr) -> Option<MountInfo> {
        (name == "live" || name == "file").then(|| MountInfo {
            sdp: "v=0\r\n".into(),
            duration: (name == "file").then_some(Duration::from_secs(10)),
            multicast: name == "live",
            // The live mount is SRTP: SETUP's RTP/SAVP alternatives are judged too.
            srtp: name == "live",
            // The file mount repairs: its RTP/AVPF alternatives are judged too.
            feedback: name == "file",
        })
    }
    fn setup(&mut self, req: &SetupRequest<'_>) -> Result<Delivery, Refusal> {
        assert!(self.live.insert(req.session), "setup twice");
        assert!(!self.ended.contains(&req.session), "id reused");
        Ok(match req.transport {
            Requested::Udp {
                client_rtp,
                client_rtcp,
            } => Delivery::Udp {
                client_rtp,
                client_rtcp,
                server_rtp: 6970,
                server_rtcp: 6971,
                ssrc: Ssrc(1),
            },
            Requested::Multicast => Delivery::Multicast {
                group: "239.0.0.1".parse().unwrap(),
                port: 5004,
                rtcp_port: 5005,
                ttl: 1,
                ssrc: Ssrc(1),
            },
            Requested::Interleaved {
                rtp_channel,
                rtcp_channel,
            } => Delivery::Interleaved {
                rtp_channel,
                rtcp_channel,
                ssrc: Ssrc(1),
            },
        })
    }
    fn play(&mut self, session: SessionId, from: Option<Duration>) -> Result<PlayInfo, Refusal> {
        assert!(self.live.contains(&session), "play without setup");
        Ok(PlayInfo {
            seq: metronome_wire::SeqNo(1),
            rtptime: metronome_time::RtpTime(1),
            start: from.unwrap_or_default(),
            end: None,
        })
    }
    fn pause(&mut self, session: SessionId) -> Result<Duration, Refusal> {
        assert!(self.live.contains(&session), "pause without setup");
        Ok(Duration::from_secs(1))
    }
    fn teardown(&mut self, session: SessionId) {
        assert!(self.live.remove(&session), "teardown of an unknown session");
        assert!(self.ended.insert(session), "teardown twice");
    }
}

pub struct World {
    pub framer: Framer,
    pub server: RtspServer,
    pub backend: Checker,
    pub now: Timestamp,
    /// The last session id the server gave out, substituted for `{S}` in generated requests.
    pub last_session: String,
}

impl World {
    pub fn new(limits: FramerLimits) -> Self {
        World {
            framer: Framer::new(limits),
            server: RtspServer::new(RtspConfig {
                max_sessions: 4,
                session_timeout: Duration::from_secs(6),
                ..RtspConfig::default()
            }),
            backend: Checker::default(),
            now: Timestamp::ZERO,
            last_session: String::new(),
        }
    }

    /// Bytes from the client on connection 1: every whole request is answered, and each
    /// answer must be a well-formed head without injected lines.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        let peer: SocketAddr = "10.0.0.2:4000".parse().unwrap();
        let local: SocketAddr = "10.0.0.1:554".parse().unwrap();
        while !bytes.is_empty() {
            let n = self.framer.push(bytes);
            bytes = &bytes[n..];
            while let Some(frame) = self.framer.next_frame() {
                assert!(self.framer.buffered() <= self.framer.capacity());
                let resp = match frame {
                    Ok(Frame::Request(req)) => self.server.handle_request(
                        self.now,
                        ConnId(1),
                        peer,
                        local,
                        &req,
                        &mut self.backend,
                    ),
                    Ok(Frame::Data { .. }) => continue,
                    Err(e) => self.server.error_response(&e),
                };
                let mut out = Vec::new();
                resp.write(&mut out).unwrap();
                let text = String::from_utf8_lossy(&out);
                let head = text.split("\r\n\r\n").next().unwrap_or("");
                assert!(head.starts_with("RTSP/1.0 "), "{text}");
                // No header injection: every head line is `Name: value`.
                for line in head.split("\r\n").skip(1) {
                    assert!(line.contains(": "), "bad header line {line:?} in {text}");
                }
                if let Some(s) = head.lines().find_map(|l| l.strip_prefix("Session: ")) {
                    self.last_session = s.split(';').next().unwrap_or("").to_owned();
                }
            }
            assert!(self.framer.buffer_space() > 0, "stuck with a full buffer");
        }
    }

    /// Time passes and the connection closes: every session must be gone, each torn down once.
    pub fn finish(mut self) {
        self.now += Duration::from_secs(4);
        self.server.handle_timeout(self.now, &mut self.backend);
        self.server.connection_closed(ConnId(1), &mut self.backend);
        assert_eq!(self.server.sessions(), 0);
        assert!(
            self.backend.live.is_empty(),
            "a session was never torn down"
        );
    }
}

/// Limits small enough that random input reaches them.
pub fn small_limits() -> FramerLimits {
    FramerLimits {
        max_head: 300,
        max_line: 80,
        max_headers: 6,
        max_body: 20,
        max_data: 40,
    }
}
