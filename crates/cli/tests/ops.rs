//! What operators use beside the server: shell completions and man pages generated from the
//! CLI definition, and the packaged config the systemd unit and the container serve.

mod common;

use common::{assert_one_vocabulary, bin};

#[test]
fn completions_for_each_shell_know_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = bin().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        for word in ["metronome", "serve", "recv", "rtsp-max-per-address"] {
            assert!(text.contains(word), "{shell}: no {word}");
        }
    }
    let bad = bin().args(["completions", "tcsh"]).output().unwrap();
    assert!(!bad.status.success());
}

/// `metronome completions bash | head`: a reader that goes early is no error (clap_complete
/// panicked on the closed pipe).
#[test]
fn completions_into_a_closed_pipe_end_quietly() {
    use std::io::Read as _;
    use std::process::Stdio;
    let mut child = bin()
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe's read end is closed here; the rest of the script goes nowhere.
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.is_empty(),
        "{:?}: {err}",
        out.status
    );
}

#[test]
fn man_pages_for_every_subcommand() {
    let dir = common::tmp_dir("man");
    let out = bin().arg("man").arg(&dir).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    for page in [
        "metronome.1",
        "metronome-serve.1",
        "metronome-recv.1",
        "metronome-lab-run.1",
    ] {
        let text =
            std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.starts_with(".ie") || text.contains(".TH"), "{page}");
    }
    let serve = std::fs::read_to_string(dir.join("metronome-serve.1")).unwrap();
    assert!(
        serve.contains("rtsp\\-request\\-timeout"),
        "the options are documented"
    );
}

/// `--help` ends with examples that are commands of this binary, and is wrapped: no line
/// longer than the 100 columns clap takes when the output is not a terminal.
#[test]
fn help_is_wrapped_and_ends_with_examples() {
    for cmd in [
        &["serve"][..],
        &["recv"],
        &["demo"],
        &["sdp"],
        &["quality"],
        &["frames"],
        &["lab", "run"],
        &["lab", "slurm"],
        &["lab", "report"],
        &["lab", "compare"],
        &["emu", "relay"],
        &["emu", "pair"],
        &["lab", "list"],
        &["lab", "show"],
        &["schema"],
        &["passwd"],
        &["bench"],
        &["bench", "pacing"],
        &["bench", "streams"],
        &["bench", "raw"],
        &["bench", "sim"],
        &["bench", "ns3"],
        &["bench", "emu"],
        &["bench", "quality"],
        &["bench", "ladder"],
        &["bench", "viewers"],
        &["bench", "srt"],
    ] {
        // clap takes the width from COLUMNS when set; 100 when not and not a terminal.
        let out = bin()
            .args(cmd)
            .arg("--help")
            .env_remove("COLUMNS")
            .output()
            .unwrap();
        assert!(out.status.success(), "{cmd:?}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let examples = text
            .split_once("Examples:\n")
            .unwrap_or_else(|| panic!("{cmd:?}: no examples"))
            .1;
        let commands: Vec<&str> = examples
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("metronome "))
            .collect();
        assert!(commands.len() >= 2, "{cmd:?}: {examples}");
        assert!(commands
            .iter()
            .any(|c| c.starts_with(&format!("metronome {}", cmd.join(" ")))));
        // No example wrapped by clap: each line a comment, a command, or the continuation of
        // one that ends with a backslash.
        let lines: Vec<&str> = examples.lines().map(str::trim).collect();
        for (k, l) in lines.iter().enumerate() {
            let continued = k > 0 && lines[k - 1].ends_with('\\');
            assert!(
                l.is_empty() || l.starts_with(['#', 'm']) || continued,
                "{cmd:?}: an example wrapped at '{l}': {examples}"
            );
        }
        let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= 100, "{cmd:?}: a help line of {widest} characters");
    }
}

#[test]
fn the_packaged_config_is_one_the_server_takes() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/metronome.toml");
    let cfg = metronome_config::serve::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.streams.len(), 1);
    assert!(cfg.rtsp.is_some() && cfg.control.is_some());
    // It listens beyond loopback, so it must say who may play: the test pattern, anyone.
    let auth = cfg.rtsp_auth.expect("[rtsp_auth]");
    assert!(auth.is_public("test"));
}

/// GET one path of the control API with `token`; the head and the body.
fn http_get(addr: &str, token: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let (head, body) = all.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

/// Prometheus's own checker (`promtool check metrics`, Debian's `prometheus`) reads `text`
/// without a problem, lint warnings included.
fn promtool_accepts(text: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; scripts/test.sh installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The value of the metric line `name{labels}` (labels as written), if there is one.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// `GET /metrics` while a stream runs to a receiver that reports: the same figures as the JSON
/// status, in Prometheus's format.
#[test]
fn metrics_match_the_json_status() {
    let port = common::port_pair();
    let dir = common::tmp_dir("metrics");
    let token_file = dir.join("control-token");
    let stream = format!("name=a,destination=rtp://127.0.0.1:{port},bitrate=2mbit");
    let (server, addr) =
        common::serve_control(&token_file, &["--stream", &stream, "--duration", "8"]);
    let mut rx = common::Running::spawn(bin().args([
        "recv",
        &format!("rtp://127.0.0.1:{port}"),
        "--duration",
        "6",
    ]));
    rx.wait_for("listening on", std::time::Duration::from_secs(20));
    std::thread::sleep(std::time::Duration::from_secs(3));
    let json = |body: String| -> serde_json::Value { serde_json::from_str(&body).unwrap() };
    // The server made the token file, for its operator only.
    let token = std::fs::read_to_string(&token_file).unwrap();
    let token = token.trim();
    let (head, _) = http_get(&addr, "not-the-token-0123456789", "/metrics");
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    let before = json(http_get(&addr, token, "/streams").1);
    let (head, text) = http_get(&addr, token, "/metrics");
    let after = json(http_get(&addr, token, "/streams").1);
    // One Content-Type, Prometheus's text format (a second, JSON's, made scrapes fail).
    let types: Vec<&str> = head
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("content-type:"))
        .collect();
    assert_eq!(
        types,
        ["Content-Type: text/plain; version=0.0.4; charset=utf-8"],
        "{head}"
    );
    promtool_accepts(&text);
    let packets = |v: &serde_json::Value| v["streams"][0]["packets"].as_f64().unwrap();
    let m = metric(&text, "metronome_stream_packets_total{stream=\"a\"}").expect(&text);
    assert!(
        packets(&before) <= m && m <= packets(&after),
        "{m} {before} {after}"
    );
    assert_eq!(metric(&text, "metronome_streams_running"), Some(1.0));
    // The JSON's durations are numbers of µs, not {secs, nanos}.
    assert!(
        after["server"]["calibration"]["per_packet_us"].is_number(),
        "{after}"
    );
    assert!(!after.to_string().contains("\"secs\""), "{after}");
    assert_eq!(
        metric(
            &text,
            "metronome_stream_target_bytes_per_second{stream=\"a\"}"
        ),
        after["streams"][0]["target_bitrate_bps"]
            .as_f64()
            .map(|bps| bps / 8.0)
    );
    // The receiver's reports: the same receiver, loss and RTT as the JSON.
    let rv = &after["streams"][0]["receivers"][0];
    let series = format!(
        "{{stream=\"a\",receiver=\"{}\",addr=\"{}\"}}",
        rv["ssrc"].as_str().unwrap(),
        rv["addr"].as_str().unwrap()
    );
    let reports = metric(&text, &format!("metronome_receiver_reports_total{series}")).expect(&text);
    assert!(reports >= 1.0, "{text}");
    assert_eq!(
        metric(
            &text,
            &format!("metronome_receiver_packets_lost_total{series}")
        ),
        Some(0.0)
    );
    assert!(
        metric(&text, &format!("metronome_receiver_rtt_seconds{series}"))
            .is_some_and(|r| r > 0.0 && r < 0.1)
    );
    // Every sample line is NAME{LABELS} VALUE or NAME VALUE, after its # TYPE.
    for l in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let value = l.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "{l}");
    }
    drop(rx);
    drop(server);
}

/// Every JSON document says its schema and its run (version, start, host, arguments); enum
/// values are spelled as on the command line; durations are numbers of µs.
#[test]
fn json_documents_carry_a_run_header_and_one_vocabulary() {
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dest = format!("rtp://{}", sink.local_addr().unwrap());
    let out = bin()
        .args([
            "serve",
            &dest,
            "--duration",
            "1",
            "--json",
            "--wait",
            "sleep-spin",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys = assert_one_vocabulary(&v);
    assert!(
        v["run"]["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--json"),
        "{v}"
    );
    assert_eq!(v["wait_mode"], "sleep-spin");
    // The pacing thread's policy and memory as values, with the words beside them.
    let policy = v["realtime"]["policy"].as_str().unwrap();
    assert!(["deadline", "fifo", "other"].contains(&policy), "{v}");
    assert!(v["realtime"]["note"]
        .as_str()
        .unwrap()
        .starts_with("SCHED_"));
    let memory = v["memory_locked"]["state"].as_str().unwrap();
    assert!(["locked", "not-locked"].contains(&memory), "{v}");
    assert!(keys.iter().any(|k| k == "duration_us"), "{keys:?}");
}

/// The benchmarks' documents keep the same vocabulary (the ones that need root, GStreamer or
/// FFmpeg are checked where they run: emu.rs, bench_raw.rs, quality.rs, lab.rs).
#[test]
fn bench_documents_keep_the_vocabulary() {
    for args in [
        &["bench", "pacing", "--duration", "1s", "--json"][..],
        &[
            "bench",
            "streams",
            "--streams",
            "2",
            "--sched",
            "edf",
            "--duration",
            "1s",
            "--no-paper",
            "--json",
        ],
    ] {
        let out = bin().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let keys = assert_one_vocabulary(&v);
        assert!(
            keys.iter().any(|k| k == "duration_us"),
            "{args:?}: {keys:?}"
        );
        common::assert_valid(&v, &format!("bench-{}", args[1]));
        // Progress, with the time left, goes to stderr only.
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(args[1] != "pacing" || err.contains("4/4 done in"), "{err}");
        // Without --json: the same in words on stdout, and no JSON.
        let human = bin().args(&args[..args.len() - 1]).output().unwrap();
        let text = String::from_utf8_lossy(&human.stdout);
        assert!(
            human.status.success() && !text.trim().is_empty(),
            "{args:?}: {human:?}"
        );
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_err()
                && !text.contains("\"schema_version\""),
            "{args:?}: JSON on stdout without --json:\n{text}"
        );
    }
}

/// A bench of no time measures nothing: `--duration 0` is refused, saying what to give
/// (`bench pacing` printed lateness ratios of 100 000 from empty runs).
#[test]
fn a_bench_of_no_time_is_refused() {
    let cases = [
        ("pacing", "--duration", "is no time: a run must last some"),
        ("streams", "--duration", "is no time: a run must last some"),
        ("raw", "--duration", "is no time: a run must last some"),
        ("emu", "--duration", "is no time: a run must last some"),
        ("srt", "--duration", "is no time: a run must last some"),
        ("viewers", "--duration", "is no time: a run must last some"),
        ("sim", "--small-media", "is no time: a run must last some"),
        ("ns3", "--media", "is no time: a run must last some"),
        ("ladder", "--seconds", "is not a length of content"),
    ];
    for (bench, option, says) in cases {
        let out = bin().args(["bench", bench, option, "0"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "bench {bench} {option} 0: {err}"
        );
    }
}
