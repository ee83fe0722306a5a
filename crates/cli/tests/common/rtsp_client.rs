//! A bare RTSP client for the server's tests: requests written by hand, replies read as they
//! come, interleaved frames, and the UDP port pair a client binds.

use super::RtspServer;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpStream, UdpSocket};
use std::time::Duration;

/// A response as the test sees it.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: HashMap<String, String>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> &str {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
            .unwrap_or("")
    }
    pub(crate) fn session(&self) -> String {
        self.header("session")
            .split(';')
            .next()
            .unwrap()
            .to_string()
    }
}

/// A bare RTSP connection.
pub(crate) struct Client {
    pub(crate) r: BufReader<TcpStream>,
    pub(crate) w: TcpStream,
    pub(crate) cseq: u32,
    pub(crate) url: String,
}

impl Client {
    pub(crate) fn connect(server: &RtspServer, mount: &str) -> Client {
        let s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
            cseq: 0,
            url: server.url(mount),
        }
    }

    pub(crate) fn raw(&mut self, bytes: &[u8]) -> Reply {
        self.w.write_all(bytes).unwrap();
        self.read_reply()
    }

    /// Sends `METHOD url RTSP/1.0` with a CSeq and `headers`, returns the reply.
    pub(crate) fn req(&mut self, method: &str, url: &str, headers: &[(&str, &str)]) -> Reply {
        self.cseq += 1;
        let mut m = format!("{method} {url} RTSP/1.0\r\nCSeq: {}\r\n", self.cseq);
        for (k, v) in headers {
            m.push_str(&format!("{k}: {v}\r\n"));
        }
        m.push_str("\r\n");
        let r = self.raw(m.as_bytes());
        assert_eq!(
            r.header("cseq"),
            self.cseq.to_string(),
            "CSeq echoed: {r:?}"
        );
        r
    }

    pub(crate) fn setup(&mut self, transport: &str, session: Option<&str>) -> Reply {
        let url = format!("{}/trackID=0", self.url);
        let mut h = vec![("Transport", transport)];
        if let Some(s) = session {
            h.push(("Session", s));
        }
        self.req("SETUP", &url, &h)
    }

    pub(crate) fn play(&mut self, session: &str, range: Option<&str>) -> Reply {
        let url = self.url.clone();
        let mut h = vec![("Session", session)];
        if let Some(r) = range {
            h.push(("Range", r));
        }
        self.req("PLAY", &url, &h)
    }

    /// Reads one response, skipping the interleaved frames before it.
    pub(crate) fn read_reply(&mut self) -> Reply {
        loop {
            let buf = self.r.fill_buf().unwrap();
            assert!(
                !buf.is_empty(),
                "connection closed while waiting for a response"
            );
            if buf[0] == b'$' {
                self.read_frame();
                continue;
            }
            break;
        }
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not a status line: {line:?}"));
        assert!(line.starts_with("RTSP/1.0 "), "{line:?}");
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            self.r.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap();
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
        let len: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        self.r.read_exact(&mut body).unwrap();
        Reply {
            status,
            headers,
            body,
        }
    }

    /// Reads one `$` frame: (channel, payload length).
    pub(crate) fn read_frame(&mut self) -> (u8, usize) {
        let mut head = [0u8; 4];
        self.r.read_exact(&mut head).unwrap();
        assert_eq!(head[0], b'$');
        let len = u16::from_be_bytes([head[2], head[3]]) as usize;
        let mut payload = vec![0; len];
        self.r.read_exact(&mut payload).unwrap();
        (head[1], len)
    }
}

/// Two UDP sockets on an even/odd port pair, as an RTSP client binds for client_port.
pub(crate) fn client_ports() -> (UdpSocket, UdpSocket, u16) {
    for _ in 0..100 {
        let a = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let p = a.local_addr().unwrap().port();
        if p % 2 == 1 {
            continue;
        }
        if let Ok(b) = UdpSocket::bind((Ipv4Addr::LOCALHOST, p + 1)) {
            a.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            b.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            return (a, b, p);
        }
    }
    panic!("no free port pair");
}

/// Drains what is queued and asserts that nothing more arrives for a second.
pub(crate) fn assert_stops(sock: &UdpSocket) {
    let mut buf = [0u8; 2048];
    sock.set_read_timeout(Some(Duration::from_millis(1000)))
        .unwrap();
    for _ in 0..10_000 {
        if sock.recv_from(&mut buf).is_err() {
            return;
        }
    }
    panic!("media still flows after the session ended");
}

/// An RTCP receiver report on interleaved channel 1 (RFC 3550 §6.4.2): from SSRC 0x5eed, one
/// block about `ssrc`: 3 lost, jitter 90, no sender report heard.
pub(crate) fn interleaved_rr(ssrc: u32) -> Vec<u8> {
    let rr = rr_echoing(ssrc, 0);
    let mut frame = vec![b'$', 1, 0, rr.len() as u8];
    frame.extend(&rr);
    frame
}

/// An RTCP receiver report from SSRC 0x5eed, one block about `ssrc` (3 lost, jitter 90)
/// echoing the sender report `lsr` (the middle 32 bits of its NTP time), sent at once after it.
pub(crate) fn rr_echoing(ssrc: u32, lsr: u32) -> Vec<u8> {
    let mut rr = vec![0x81, 201, 0, 7];
    rr.extend(0x5eedu32.to_be_bytes());
    rr.extend(ssrc.to_be_bytes());
    rr.extend([0, 0, 0, 3]);
    rr.extend(100u32.to_be_bytes());
    rr.extend(90u32.to_be_bytes());
    rr.extend(lsr.to_be_bytes());
    rr.extend([0; 4]);
    rr
}

/// The SSRC a SETUP reply names in its Transport header.
pub(crate) fn ssrc_of(r: &Reply) -> u32 {
    r.header("transport")
        .split(';')
        .find_map(|p| p.strip_prefix("ssrc="))
        .map(|s| u32::from_str_radix(s, 16).unwrap())
        .expect("the SETUP reply names the SSRC")
}

/// The `seq=` of a PLAY reply's RTP-Info.
pub(crate) fn rtp_info_seq(r: &Reply) -> u16 {
    let info = r.header("rtp-info");
    info.split(';')
        .find_map(|p| p.trim().strip_prefix("seq="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("seq in RTP-Info: {info}"))
}

pub(crate) fn small_test_source() -> [&'static str; 6] {
    ["--size", "160x120", "--fps", "10", "--mux-rate", "600000"]
}
