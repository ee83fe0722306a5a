//! The framer: splits, interleaving, every limit, resynchronisation.

use super::*;

const OPTIONS: &[u8] = b"OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n";
const SET: &[u8] = b"SET_PARAMETER rtsp://h/live RTSP/1.0\r\nCSeq: 2\r\n\
    Content-Type: text/parameters\r\nContent-Length: 9\r\n\r\nvolume: 1";

/// What came out, in a comparable form: `R<method> <cseq> <body len>`, `D<channel> <len>`,
/// `E<status> <cseq>`.
fn drain(framer: &mut Framer, out: &mut Vec<String>) {
    while let Some(frame) = framer.next_frame() {
        out.push(match frame {
            Ok(Frame::Request(req)) => {
                let method: &str = req.method().into();
                let cseq = req
                    .header(&rtsp_types::headers::CSEQ)
                    .unwrap()
                    .as_str()
                    .to_owned();
                format!("R{method} {cseq} {}", req.body().len())
            }
            Ok(Frame::Data { channel, payload }) => format!("D{channel} {}", payload.len()),
            Err(e) => format!("E{} {:?}", e.status(), e.cseq()),
        });
        assert!(framer.buffered() <= framer.capacity());
    }
    assert!(
        framer.buffer_space() > 0,
        "a reader must always make progress"
    );
}

/// Feeds `chunks` in order (each within buffer_space), draining after each.
fn run(limits: FramerLimits, chunks: &[&[u8]]) -> Vec<String> {
    let mut framer = Framer::new(limits);
    let mut out = Vec::new();
    for chunk in chunks {
        let mut rest = *chunk;
        while !rest.is_empty() {
            let n = framer.push(rest);
            rest = &rest[n..];
            drain(&mut framer, &mut out);
        }
    }
    out
}

fn data(channel: u8, len: usize) -> Vec<u8> {
    let mut v = vec![b'$', channel];
    v.extend_from_slice(&(len as u16).to_be_bytes());
    v.extend((0..len).map(|i| i as u8));
    v
}

fn stream() -> Vec<u8> {
    let mut s = b"\r\n".to_vec();
    s.extend_from_slice(OPTIONS);
    s.extend(data(1, 60));
    s.extend(data(0, 0));
    s.extend_from_slice(SET);
    s.extend(data(3, 300));
    s.extend_from_slice(OPTIONS);
    s
}

const EXPECTED: [&str; 6] = [
    "ROPTIONS 1 0",
    "D1 60",
    "D0 0",
    "RSET_PARAMETER 2 9",
    "D3 300",
    "ROPTIONS 1 0",
];

#[test]
fn requests_and_interleaved_data_in_one_read() {
    assert_eq!(run(FramerLimits::default(), &[&stream()]), EXPECTED);
}

#[test]
fn split_at_every_byte_boundary() {
    let s = stream();
    for i in 0..=s.len() {
        let out = run(FramerLimits::default(), &[&s[..i], &s[i..]]);
        assert_eq!(out, EXPECTED, "split at {i}");
    }
    let bytes: Vec<&[u8]> = s.chunks(1).collect();
    assert_eq!(run(FramerLimits::default(), &bytes), EXPECTED);
}

#[test]
fn the_body_is_part_of_the_request() {
    let mut framer = Framer::new(FramerLimits::default());
    framer.push(SET);
    let Some(Ok(Frame::Request(req))) = framer.next_frame() else {
        panic!("request expected");
    };
    assert_eq!(req.body(), b"volume: 1");
}

fn limits() -> FramerLimits {
    FramerLimits {
        max_head: 200,
        max_line: 60,
        max_headers: 4,
        max_body: 10,
        max_data: 64,
    }
}

/// `bad` then a good OPTIONS (CSeq 1) then a data frame: the error, then the framer is back.
fn resyncs(bad: &[u8], error: &str) {
    let mut s = bad.to_vec();
    s.extend_from_slice(OPTIONS);
    s.extend(data(0, 4));
    let expected = [error, "ROPTIONS 1 0", "D0 4"];
    assert_eq!(
        run(limits(), &[&s]),
        expected,
        "{}",
        String::from_utf8_lossy(bad)
    );
    let bytes: Vec<&[u8]> = s.chunks(7).collect();
    assert_eq!(run(limits(), &bytes), expected);
}

#[test]
fn each_limit_and_resync() {
    let long = "x".repeat(100);
    let line = format!("OPTIONS rtsp://h/{long} RTSP/1.0\r\nCSeq: 9\r\n\r\n");
    resyncs(line.as_bytes(), "E414 Some(9)");
    let header = format!("OPTIONS * RTSP/1.0\r\nCSeq: 9\r\nX: {long}\r\n\r\n");
    resyncs(header.as_bytes(), "E400 Some(9)");
    let many = "OPTIONS * RTSP/1.0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nCSeq: 9\r\n\r\n";
    resyncs(many.as_bytes(), "E400 Some(9)");
    let head = format!(
        "OPTIONS * RTSP/1.0\r\nCSeq: 9\r\n{}\r\n",
        format!("X: {}\r\n", "y".repeat(56)).repeat(3)
    );
    resyncs(head.as_bytes(), "E400 Some(9)");
    let body = "SET_PARAMETER * RTSP/1.0\r\nCSeq: 9\r\nContent-Length: 11\r\n\r\nhello world";
    stops(body.as_bytes(), "E413 Some(9)");
    // An oversized data frame is skipped silently...
    let mut s = data(2, 100);
    s.extend_from_slice(OPTIONS);
    s.extend(data(0, 4));
    assert_eq!(run(limits(), &[&s]), ["ROPTIONS 1 0", "D0 4"]);
    let mut framer = Framer::new(limits());
    framer.push(&data(2, 100)[..50]);
    assert!(framer.next_frame().is_none());
    assert_eq!(framer.skipped_data_frames(), 1); // ...and counted
}

#[test]
fn bad_messages_and_resync() {
    for (bad, error) in [
        ("OPTIONS * RTSP/2.0\r\nCSeq: 9\r\n\r\n", "E505 Some(9)"),
        ("OPTIONS * RTSP/1.1\r\nCSeq: 9\r\n\r\n", "E505 Some(9)"),
        ("OPTIONS * HTTP/1.1\r\nCSeq: 9\r\n\r\n", "E400 Some(9)"),
        ("GET / HTTP/1.1\r\nHost: x\r\n\r\n", "E400 None"),
        ("RTSP/1.0 200 OK\r\nCSeq: 9\r\n\r\n", "E400 Some(9)"),
        ("OPTIONS  * RTSP/1.0\r\nCSeq: 9\r\n\r\n", "E400 Some(9)"),
        (
            "OPTIONS ht!tp:// RTSP/1.0\r\nCSeq: 9\r\n\r\n",
            "E400 Some(9)",
        ),
        ("OPTIONS * RTSP/1.0\nCSeq: 9\n\n", "E400 Some(9)"),
        (
            "OPTIONS * RTSP/1.0\r\nCSeq: 9\r\nno colon\r\n\r\n",
            "E400 Some(9)",
        ),
        ("\x00\x01\x02\r\n\r\n", "E400 None"),
        (
            "RTSP/1.0 200 OK\r\nCSeq: 9\r\nContent-Length: 3\r\n\r\nabc",
            "E400 Some(9)",
        ),
    ] {
        resyncs(bad.as_bytes(), error);
    }
}

/// `bad` then a good OPTIONS and a data frame: the error, and nothing after it (the framer
/// stops; the connection is answered and closed).
fn stops(bad: &[u8], error: &str) {
    let mut s = bad.to_vec();
    s.extend_from_slice(OPTIONS);
    s.extend(data(0, 4));
    assert_eq!(
        run(limits(), &[&s]),
        [error],
        "{}",
        String::from_utf8_lossy(bad)
    );
    let bytes: Vec<&[u8]> = s.chunks(7).collect();
    assert_eq!(run(limits(), &bytes), [error]);
}

#[test]
fn a_length_that_cannot_be_trusted_stops_the_connection() {
    for (bad, error) in [
        // Over the limit, by a little or by 2^63: never skipped, never read.
        (
            "SET_PARAMETER * RTSP/1.0\r\nCSeq: 9\r\nContent-Length: 9223372036854775808\r\n\r\n",
            "E413 Some(9)",
        ),
        (
            "OPTIONS * RTSP/1.0\r\nCSeq: 9\r\nContent-Length: x\r\n\r\n",
            "E400 Some(9)",
        ),
        (
            "OPTIONS * RTSP/1.0\r\nCSeq: 9\r\nContent-Length: 1\r\ncontent-length: 2\r\n\r\n",
            "E400 Some(9)",
        ),
        // Twice, even with one value (a proxy between may have read only one).
        (
            "OPTIONS * RTSP/1.0\r\nCSeq: 9\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
            "E400 Some(9)",
        ),
    ] {
        stops(bad.as_bytes(), error);
    }
    let mut framer = Framer::new(limits());
    framer.push(b"OPTIONS * RTSP/1.0\r\nContent-Length: 99999\r\n\r\n");
    let err = framer.next_frame().unwrap().unwrap_err();
    assert!(err.closes_connection(), "{err}");
    // What comes after is taken and dropped: nothing held, nothing framed.
    assert_eq!(framer.push(OPTIONS), OPTIONS.len());
    assert_eq!(framer.buffered(), 0);
    assert!(framer.next_frame().is_none());
}

#[test]
fn a_huge_head_is_reported_before_it_ends() {
    let mut framer = Framer::new(limits());
    framer.push(b"OPTIONS * RTSP/1.0\r\nCSeq: 3\r\n");
    assert!(framer.next_frame().is_none());
    let filler = [b'a'; 50];
    let mut errors = Vec::new();
    for _ in 0..100 {
        framer.push(&filler);
        while let Some(r) = framer.next_frame() {
            errors.push(r.unwrap_err());
        }
        assert!(framer.buffered() <= 200);
        if !errors.is_empty() {
            assert_eq!(framer.buffered(), 0, "discarded bytes are not kept");
        }
    }
    assert_eq!(errors.len(), 1);
    assert_eq!((errors[0].status(), errors[0].cseq()), (400, Some(3)));
    assert!(errors[0].to_string().contains("line"), "{}", errors[0]);
    framer.push(b"\r\n\r\n");
    framer.push(OPTIONS);
    assert!(matches!(framer.next_frame(), Some(Ok(Frame::Request(_)))));
}

#[test]
fn push_takes_only_what_fits() {
    let mut framer = Framer::new(limits());
    let cap = framer.capacity();
    assert_eq!(cap, 214);
    let junk = vec![b'A'; 1000];
    assert_eq!(framer.push(&junk), cap);
    assert_eq!(framer.buffer_space(), 0);
    assert_eq!(framer.push(&junk), 0);
    let mut out = Vec::new();
    drain(&mut framer, &mut out);
    assert_eq!(out, ["E414 None"]);
}
