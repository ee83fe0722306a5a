//! A web page cannot drive the control API: headless Chromium (Debian's `chromium`) loads a
//! page from another origin that tries what a hostile page can (a simple cross-site POST, one
//! with no Content-Type at all, a `sendBeacon`, a JSON POST with the token, which needs a
//! preflight), and afterwards the server has no stream. The token's owner, from a program,
//! still can.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

/// The hostile page: three attempts on `api`, then its outcome in `<pre id="out">`.
fn page(api: &str, token: &str) -> String {
    format!(
        r#"<!doctype html><html><body><pre id="out">running</pre><script>
const api = "{api}";
const spec = JSON.stringify({{name: "evil", destination: "rtp://127.0.0.1:29000", bitrate: "20mbit"}});
const seen = [];
const tries = [
  fetch(api + "/streams", {{method: "POST", mode: "no-cors", body: spec}})
    .then(r => seen.push("simple: sent, opaque"), e => seen.push("simple: " + e)),
  // A Blob of no type: the POST carries no Content-Type at all (which the API once took).
  fetch(api + "/streams", {{method: "POST", mode: "no-cors", body: new Blob([spec])}})
    .then(r => seen.push("untyped: sent, opaque"), e => seen.push("untyped: " + e)),
  fetch(api + "/streams", {{method: "POST", headers: {{"Content-Type": "application/json",
      "Authorization": "Bearer {token}"}}, body: spec}})
    .then(r => seen.push("json: " + r.status), e => seen.push("json: blocked")),
  fetch(api + "/streams", {{method: "GET", headers: {{"Authorization": "Bearer {token}"}}}})
    .then(r => r.text()).then(t => seen.push("read: " + t), e => seen.push("read: blocked")),
  Promise.resolve(navigator.sendBeacon(api + "/streams", spec)).then(b => seen.push("beacon: " + b)),
];
Promise.allSettled(tries).then(() => {{
  seen.sort();
  document.getElementById("out").textContent = "done\n" + seen.join("\n");
}});
</script></body></html>"#
    )
}

/// Serves `html` to every request on a port of its own (another origin than the API's) until
/// the test ends.
fn serve_page(html: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(64) {
            let Ok(mut c) = conn else { continue };
            let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n",
                html.len()
            );
            let _ = c.write_all(head.as_bytes());
            let _ = c.write_all(html.as_bytes());
        }
    });
    format!("http://{addr}/")
}

/// Chromium, headless, loads `url`, runs its script (up to 10 s of virtual time) and prints
/// the DOM.
fn dump_dom(profile: &std::path::Path, url: &str) -> String {
    common::require("chromium", "chromium");
    metronome_testkit::chromium(profile, &["--virtual-time-budget=10000", "--dump-dom"], url)
}

/// One request to the API from a program; the status line and the body.
fn request(addr: &str, head: &str, body: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "{head}Host: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let (h, b) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
    (h.lines().next().unwrap_or("").to_string(), b.to_string())
}

#[test]
fn a_page_from_another_origin_cannot_add_a_stream() {
    let dir = common::tmp_dir("control-browser");
    let token_file = dir.join("token");
    let (server, addr) = common::serve_control(&token_file, &["--duration", "60"]);
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_string();

    // Even a page that knows the token: what it sends with the token needs a preflight the
    // API does not grant, and what it may send without one carries no token.
    let url = serve_page(page(&format!("http://{addr}"), &token));
    let dom = dump_dom(&dir.join("chromium"), &url);
    assert!(
        dom.contains("done"),
        "the page's script did not finish: {dom}"
    );
    assert!(dom.contains("json: blocked"), "{dom}");
    assert!(dom.contains("read: blocked"), "{dom}");

    let auth = format!("Authorization: Bearer {token}\r\n");
    let (status, body) = request(&addr, &format!("GET /streams HTTP/1.1\r\n{auth}"), "");
    assert!(status.contains("200"), "{status} {body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["streams"], serde_json::json!([]), "{body}\n{dom}");

    // Its owner, from a program, adds one.
    let spec = r#"{"name":"mine","destination":"rtp://127.0.0.1:29000","bitrate":"1mbit"}"#;
    let head = format!("POST /streams HTTP/1.1\r\n{auth}Content-Type: application/json\r\n");
    let (status, body) = request(&addr, &head, spec);
    assert!(status.contains("201"), "{status} {body}");
    server.interrupt();
    let out = server.finish_within(Duration::from_secs(10));
    assert!(out.succeeded(), "{}", out.report());
}
