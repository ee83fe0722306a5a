//! The control API's OpenAPI description, checked from outside: the running server serves it,
//! it is a valid OpenAPI 3.0 document, and every answer of a real session (and every body the
//! server took or refused) is what it says, as Perl's JSON::Validator judges
//! (`tests/openapi/check.pl`).

mod common;

use common::bin;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::time::Duration;

/// One request and its answer, as `check.pl` reads them.
struct Exchange {
    method: &'static str,
    /// The path as the document spells it (`/streams/{name}`).
    template: &'static str,
    /// The stream's name in the path, if any.
    name: &'static str,
    /// The body sent, and whether it is a valid one (the server may still refuse it: a name
    /// taken).
    request: Option<(Value, bool)>,
}

/// Sends `method path` with `body`; the status, the content type and the body of the answer.
fn call(
    addr: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let typed = if body.is_empty() {
        String::new()
    } else {
        format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        )
    };
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n{typed}\
         Connection: close\r\n\r\n{body}"
    )
    .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let (head, body) = all.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    (status, content_type, body.to_string())
}

#[test]
fn the_served_description_is_valid_and_every_answer_matches_it() {
    common::require("perl", "perl");
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dest = format!("rtp://{}", sink.local_addr().unwrap());
    let dir = common::tmp_dir("openapi");
    let token_file = dir.join("control-token");
    let stream = format!("name=a,destination={dest},bitrate=1mbit");
    let (server, addr) =
        common::serve_control(&token_file, &["--stream", &stream, "--duration", "60"]);
    let token = std::fs::read_to_string(&token_file).unwrap();
    let token = token.trim();

    // What the server serves is what `metronome schema openapi` prints and docs/ ships.
    let (status, _, served) = call(&addr, token, "GET", "/openapi.json", None);
    assert_eq!(status, 200, "{served}");
    let printed = bin().args(["schema", "openapi"]).output().unwrap();
    assert!(printed.status.success());
    let served: Value = serde_json::from_str(&served).unwrap();
    assert_eq!(
        served,
        serde_json::from_slice::<Value>(&printed.stdout).unwrap()
    );

    let added = json!({ "name": "b", "destination": dest, "bitrate": "800kbit", "period": "2ms" });
    let exchanges = [
        get("/", ""),
        get("/openapi.json", ""),
        get("/health", ""),
        get("/metrics", ""),
        get("/streams", ""),
        get("/streams/{name}", "a"),
        get("/streams/{name}", "nope"),
        send(
            "POST",
            "/streams",
            "",
            json!({ "name": "c", "destination": dest, "colour": "red" }),
            false,
        ),
        send(
            "POST",
            "/streams",
            "",
            json!({ "name": "c", "destination": dest, "bitrate": [1] }),
            false,
        ),
        send("POST", "/streams", "", added.clone(), true),
        send("POST", "/streams", "", added, true),
        send(
            "PATCH",
            "/streams/{name}",
            "b",
            json!({ "bitrate": 600_000 }),
            true,
        ),
        send(
            "PATCH",
            "/streams/{name}",
            "b",
            json!({ "bitrate": "700kbit" }),
            true,
        ),
        send("PATCH", "/streams/{name}", "b", json!({ "rate": 1 }), false),
        Exchange {
            method: "DELETE",
            template: "/streams/{name}",
            name: "b",
            request: None,
        },
        Exchange {
            method: "DELETE",
            template: "/streams/{name}",
            name: "b",
            request: None,
        },
        Exchange {
            method: "DELETE",
            template: "/",
            name: "",
            request: None,
        },
    ];
    let mut records = Vec::new();
    for x in &exchanges {
        let path = x.template.replace("{name}", x.name);
        let (status, content_type, body) = call(
            &addr,
            token,
            x.method,
            &path,
            x.request.as_ref().map(|r| &r.0),
        );
        let body = serde_json::from_str::<Value>(&body).unwrap_or(Value::String(body));
        let mut r = json!({ "method": x.method, "path": x.template, "name": x.name,
            "status": status, "content_type": content_type, "body": body });
        if let Some((sent, valid)) = &x.request {
            r["request"] = sent.clone();
            r["request_valid"] = json!(valid);
        }
        records.push(r);
    }
    // Refused before any route: no token.
    let (status, content_type, body) =
        call(&addr, "not-the-token-0123456789", "GET", "/streams", None);
    records.push(
        json!({ "method": "GET", "path": "/streams", "status": status,
        "content_type": content_type, "body": serde_json::from_str::<Value>(&body).unwrap() }),
    );
    let statuses: Vec<u64> = records
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            200, 200, 200, 200, 200, 200, 404, 400, 400, 201, 409, 200, 200, 400, 200, 404, 405,
            401
        ],
        "{records:#?}"
    );
    drop(server);
    // Every float of every answer has six decimals at most, as in the command line's JSON.
    for r in &records {
        common::assert_floats_rounded(&r["body"]);
    }

    let doc_file = dir.join("openapi.json");
    let x_file = dir.join("exchanges.json");
    std::fs::write(&doc_file, served.to_string()).unwrap();
    std::fs::write(&x_file, Value::Array(records).to_string()).unwrap();
    let check = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/openapi/check.pl");
    let out = std::process::Command::new("timeout")
        .args(["60", "perl", check])
        .args([&doc_file, &x_file])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "JSON::Validator (libjson-validator-perl) found:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn get(template: &'static str, name: &'static str) -> Exchange {
    Exchange {
        method: "GET",
        template,
        name,
        request: None,
    }
}

fn send(
    method: &'static str,
    template: &'static str,
    name: &'static str,
    body: Value,
    valid: bool,
) -> Exchange {
    Exchange {
        method,
        template,
        name,
        request: Some((body, valid)),
    }
}
