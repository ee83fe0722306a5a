//! Tests of the control API over real TCP on 127.0.0.1, against an in-memory [`StreamControl`].

mod access;
mod robust;
mod routes;

use super::{ControlAccess, ControlError, ControlLimits, ControlServer, StreamControl};
use crate::streams::StreamSpec;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A test double for the stream set: names starting with `refuse` are refused by "admission",
/// the name `boom` panics.
#[derive(Default)]
struct Fake {
    streams: Mutex<BTreeMap<String, StreamSpec>>,
    list_delay: Duration,
    active: AtomicUsize,
    max_active: AtomicUsize,
}

impl StreamControl for Fake {
    fn list(&self) -> Value {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_active.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(self.list_delay);
        let names: Vec<String> = self.streams.lock().unwrap().keys().cloned().collect();
        self.active.fetch_sub(1, Ordering::SeqCst);
        json!({ "streams": names })
    }

    fn get(&self, name: &str) -> Option<Value> {
        let streams = self.streams.lock().unwrap();
        streams
            .get(name)
            .map(|s| json!({ "name": name, "spec": s }))
    }

    fn add(&self, spec: StreamSpec) -> Result<Value, ControlError> {
        if spec.name.starts_with("refuse") {
            return Err(ControlError::Refused(
                "the stream would not meet its deadlines".into(),
            ));
        }
        assert!(spec.name != "boom", "the fake panics on 'boom'");
        let mut streams = self.streams.lock().unwrap();
        if streams.contains_key(&spec.name) {
            return Err(ControlError::Exists(format!("'{}' exists", spec.name)));
        }
        let name = spec.name.clone();
        streams.insert(name.clone(), spec);
        Ok(json!({ "name": name, "state": "running" }))
    }

    fn remove(&self, name: &str) -> Result<Value, ControlError> {
        match self.streams.lock().unwrap().remove(name) {
            Some(_) => Ok(json!({ "name": name, "state": "removed" })),
            None => Err(ControlError::NotFound(format!("no stream '{name}'"))),
        }
    }

    fn set_rate(&self, name: &str, bitrate_bps: u64) -> Result<Value, ControlError> {
        let mut streams = self.streams.lock().unwrap();
        let Some(spec) = streams.get_mut(name) else {
            return Err(ControlError::NotFound(format!("no stream '{name}'")));
        };
        if bitrate_bps > 10_000_000 {
            return Err(ControlError::Refused("over what was admitted".into()));
        }
        spec.bitrate = Some(bitrate_bps);
        Ok(json!({ "name": name, "target_bitrate_bps": bitrate_bps }))
    }
}

/// Measures test durations with the driver's clock.
struct Stopwatch(u64);

impl Stopwatch {
    fn start() -> Stopwatch {
        Stopwatch(metronome_rt::clock::mono_ns())
    }

    fn elapsed(&self) -> Duration {
        Duration::from_nanos(metronome_rt::clock::mono_ns().saturating_sub(self.0))
    }
}

/// Short timeouts, so that tests which wait for them stay fast.
fn quick() -> ControlLimits {
    ControlLimits {
        read_timeout: Duration::from_millis(800),
        write_timeout: Duration::from_millis(800),
        idle_timeout: Duration::from_millis(800),
        ..ControlLimits::default()
    }
}

/// The token the tests' server takes (written out in the tests' raw requests too).
const TOKEN: &str = "test-token-0123456789";

fn start(limits: ControlLimits, fake: Fake) -> (ControlServer, Arc<Fake>) {
    let fake = Arc::new(fake);
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let access = ControlAccess::new(TOKEN).unwrap();
    let server = ControlServer::start_with(addr, fake.clone(), access, limits).unwrap();
    (server, fake)
}

/// One parsed response.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        let h = self
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name));
        h.map(|(_, v)| v.as_str())
    }

    fn error(&self) -> &str {
        self.body["error"].as_str().unwrap_or("")
    }

    fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or("")
    }
}

/// A client connection that reads responses one at a time.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    fn send(&mut self, raw: &[u8]) {
        self.stream.write_all(raw).unwrap();
    }

    /// Reads one response; `None` if the server closed the connection first.
    fn reply(&mut self) -> Option<Reply> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut resp = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(n) = resp.parse(&self.buf).unwrap() {
                let status = resp.code.unwrap();
                let headers: Vec<(String, String)> = resp
                    .headers
                    .iter()
                    .map(|h| {
                        let v = String::from_utf8(h.value.to_vec()).unwrap();
                        (h.name.to_string(), v)
                    })
                    .collect();
                if status == 100 {
                    self.buf.drain(..n);
                    continue;
                }
                let len = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .map(|(_, v)| v.parse::<usize>().unwrap())
                    .unwrap();
                while self.buf.len() < n + len {
                    self.read_more().then_some(())?;
                }
                let body = serde_json::from_slice(&self.buf[n..n + len]).unwrap();
                self.buf.drain(..n + len);
                return Some(Reply {
                    status,
                    headers,
                    body,
                });
            }
            self.read_more().then_some(())?;
        }
    }

    /// Reads once; false at end of stream (or a reset).
    fn read_more(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// True if the server closes the connection (without sending more) within the read timeout.
    fn closed(&mut self) -> bool {
        let mut chunk = [0u8; 64];
        matches!(self.stream.read(&mut chunk), Ok(0))
    }
}

/// Sends one request on a new connection and reads the answer.
fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Reply {
    let mut c = Client::connect(addr);
    let mut raw = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n"
    );
    if let Some(body) = body {
        raw += &format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
    } else {
        raw += "\r\n";
    }
    c.send(raw.as_bytes());
    c.reply().expect("a response")
}

/// Sends raw bytes on a new connection and reads the answer.
fn raw_call(addr: SocketAddr, raw: &[u8]) -> Option<Reply> {
    let mut c = Client::connect(addr);
    c.send(raw);
    c.reply()
}
