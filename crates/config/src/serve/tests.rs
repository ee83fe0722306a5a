use super::*;
use std::time::Duration;

const FULL: &str = r#"
# server settings
sched = "dm"
rt_cores = 2
link_capacity = "1gbit"
control = "127.0.0.1:8089"
control_token_file = "/var/lib/metronome/control-token"
control_hosts = ["metronome.example"]
allow_destinations = ["127.0.0.0/8", "10.1.0.0/16"]
memory_budget = "512MiB"
encode_budget = "150%"
core_budget = "95%"

[[stream]]
name = "cam1"
source = "test"
destination = "rtp://127.0.0.1:5004"
bitrate = "4mbit"
period = "15ms"
deadline = "10ms"

[[stream]]
name = "file2"
source = "clip.ts"
loop = true
destination = ["rtp://127.0.0.1:5006", "rtp://239.1.1.1:5008"]
"#;

fn err(text: &str) -> ConfigError {
    parse(text, "config.toml").expect_err("the config should be refused")
}

#[test]
fn rtsp_users_are_read_and_their_mistakes_located() {
    let md5 = "939e7578ed9e3c518a452acee763bce9";
    let text = format!(
        "rtsp = \"0.0.0.0:8554\"\n[rtsp_auth]\npublic = [\"a\"]\n\
         [[rtsp_auth.user]]\nname = \"alice\"\nmd5 = \"{md5}\"\n"
    );
    let cfg = parse(&text, "config.toml").unwrap();
    let auth = cfg.rtsp_auth.unwrap();
    assert!(auth.is_public("a") && auth.user("alice").is_some());
    let e = err("sched = \"edf\"\n[rtsp_auth]\nrealm = \"x\"\n");
    assert_eq!((e.kind, e.line), (ConfigErrorKind::Invalid, Some(2)));
    assert!(e.message.starts_with("[rtsp_auth]: "), "{e}");
}

/// How the pacing threads run is the file's to say too, each value checked.
#[test]
fn the_pacing_threads_settings_are_read() {
    let text =
        "rt = \"deadline\"\nwait = \"busy-poll\"\ncpu = 3\nlate = \"catch-up=3\"\nseed = 9\n";
    let c = parse(text, "config.toml").unwrap();
    assert_eq!(c.rt, Some(CoreRt::Deadline));
    assert_eq!(c.wait, Some(WaitPolicy::BusyPoll));
    assert_eq!((c.cpu, c.seed), (Some(3), Some(9)));
    assert_eq!(c.late, Some(LatePolicy::CatchUp { factor: 3.0 }));
    for (bad, says) in [
        ("rt = \"sometimes\"\n", "auto, fifo, deadline or off"),
        ("wait = \"nap\"\n", "auto, sleep-spin or busy-poll"),
        ("cpu = -1\n", "0 to 4095"),
        ("late = \"drop\"\n", "drop-late=DURATION"),
    ] {
        let e = err(bad);
        assert_eq!(e.line, Some(1), "{bad}: {e}");
        assert!(e.message.contains(says), "{bad}: {e}");
    }
}

/// The options of `serve` that are not a stream's have keys too, and say what is wrong.
#[test]
fn budgets_overload_and_rtsp_limits_are_read() {
    let text = "send_cost = \"5us\"\nencode_cost = \"25%\"\noverload = \"shed\"\n\
                sdp_dir = \"/run/sdp\"\nrtsp_encoder_per_session = true\n\
                rtsp_session_timeout = \"30s\"\nrtsp_idle_timeout = \"60s\"\n\
                rtsp_request_timeout = \"2s\"\nrtsp_max_connections = 10\n\
                rtsp_max_per_address = 3\nrtsp_max_sessions = 4\n\
                rtsp_max_sessions_per_address = 2\n";
    let c = parse(text, "config.toml").unwrap();
    assert_eq!(c.send_cost, Some(Duration::from_micros(5)));
    assert_eq!(c.encode_cost, Some(0.25));
    assert_eq!(c.overload, Some(OverloadPolicy::Shed));
    assert_eq!(c.sdp_dir, Some(PathBuf::from("/run/sdp")));
    let l = c.rtsp_limits;
    assert_eq!(l.encoder_per_session, Some(true));
    assert_eq!(
        (l.session_timeout, l.idle_timeout, l.request_timeout),
        (
            Some(Duration::from_secs(30)),
            Some(Duration::from_secs(60)),
            Some(Duration::from_secs(2))
        )
    );
    assert_eq!(
        (
            l.max_connections,
            l.max_per_address,
            l.max_sessions,
            l.max_sessions_per_address
        ),
        (Some(10), Some(3), Some(4), Some(2))
    );
    let e = err("sched = \"edf\"\noverload = \"panic\"\n");
    assert_eq!((e.kind, e.line), (ConfigErrorKind::Parse, Some(2)), "{e}");
    assert!(e.message.contains("use warn, refuse or shed"), "{e}");
    let e = err("rtsp_max_sessions = 0\n");
    assert!(e.message.contains("use 1 to 1000000"), "{e}");
    let e = err("send_cost = \"fast\"\n");
    assert_eq!(e.line, Some(1), "{e}");
}

#[test]
fn a_bad_prefix_in_the_allow_list_names_its_line() {
    let e = err("control = \"127.0.0.1:8089\"\nallow_destinations = [\"10.0.0.0/33\"]\n");
    assert_eq!((e.kind, e.line), (ConfigErrorKind::Parse, Some(2)), "{e}");
    assert!(e.message.contains("longer than the address"), "{e}");
}

#[test]
fn a_full_example_parses() {
    let c = parse(FULL, "config.toml").unwrap();
    assert_eq!(c.sched, Some(SchedKind::Dm));
    assert_eq!(c.rt_cores, Some(2));
    assert_eq!(c.link_capacity, Some(1_000_000_000));
    assert_eq!(c.control, Some("127.0.0.1:8089".parse().unwrap()));
    assert_eq!(
        c.control_token_file.as_deref(),
        Some(Path::new("/var/lib/metronome/control-token"))
    );
    assert_eq!(c.control_hosts, ["metronome.example"]);
    let allowed = c.allow_destinations.unwrap();
    assert_eq!(allowed.len(), 2);
    assert!(allowed[1].contains("10.1.2.3".parse().unwrap()));
    assert_eq!(c.memory_budget, Some(512 << 20));
    assert_eq!(c.encode_budget, Some(1.5));
    assert_eq!(c.core_budget, Some(0.95));
    assert_eq!(c.streams.len(), 2);
    assert_eq!(c.streams[0].deadline, Some(Duration::from_millis(10)));
    assert_eq!(c.streams[1].destination.len(), 2);
    assert!(c.streams[1].looping);
}

#[test]
fn everything_is_optional() {
    assert_eq!(parse("", "x").unwrap(), ServeConfig::default());
    let c = parse("core_budget = 0.5\nlink_capacity = 100000000\n", "x").unwrap();
    assert_eq!(
        (c.core_budget, c.link_capacity),
        (Some(0.5), Some(100_000_000))
    );
    assert!(c.streams.is_empty() && c.sched.is_none() && c.control.is_none());
}

#[test]
fn sched_kind_parses_and_prints() {
    for k in [SchedKind::Edf, SchedKind::Dm, SchedKind::Naive] {
        assert_eq!(k.to_string().parse::<SchedKind>(), Ok(k));
    }
    assert_eq!("EDF".parse::<SchedKind>(), Ok(SchedKind::Edf));
    assert!("rm"
        .parse::<SchedKind>()
        .unwrap_err()
        .contains("edf, dm or naive"));
}

#[test]
fn an_unknown_key_names_its_line_stream_and_the_known_keys() {
    let e = err("[[stream]]\nname = \"cam1\"\ndestination = \"rtp://h:1\"\nperod = \"15ms\"\n");
    assert_eq!(
        (e.kind, e.line, e.column),
        (ConfigErrorKind::Parse, Some(4), Some(1))
    );
    let s = e.to_string();
    assert!(s.starts_with("config.toml line 4, column 1: unknown key 'perod' in [[stream]] 'cam1'; known keys: name, source"), "{s}");
    let e = err("sched = \"edf\"\nbogus = 1\n");
    assert_eq!(e.line, Some(2));
    assert!(
        e.message.contains("unknown key 'bogus' at the top level"),
        "{e}"
    );
    assert!(
        e.message
            .contains("rtsp_max_sessions_per_address, [rtsp_auth], [[stream]]"),
        "{e}"
    );
    // A key with "stream" in its name is not a table (it read "max_[[stream]]_rate").
    assert!(e.message.contains(", max_stream_rate, "), "{e}");
    // Within [rtsp_auth] and its users, the table is named, and so are its own tables.
    let e = err("[rtsp_auth]
realm = \"x\"
perod = 1
");
    assert_eq!(
        e.message,
        "unknown key 'perod' in [rtsp_auth]; known keys: realm, public, [[rtsp_auth.user]]"
    );
    let e = err("[rtsp_auth]
[[rtsp_auth.user]]
name = \"alice\"
perod = 1
");
    assert_eq!(
        e.message,
        "unknown key 'perod' in [[rtsp_auth.user]] 'alice'; known keys: name, md5, sha256, mounts"
    );
}

#[test]
fn syntax_type_and_missing_key_errors_are_located() {
    let e = err("sched = \"edf\n");
    assert_eq!((e.kind, e.line), (ConfigErrorKind::Parse, Some(1)));
    let e = err("sched = \"rm\"\n");
    assert!(e.message.contains("edf"), "{e}");
    let e = err("rt_cores = 0\n");
    assert!(e.message.contains("1 to 1024"), "{e}");
    let e = err("core_budget = \"120%\"\n");
    assert!(e.message.contains("95%"), "{e}");
    let e = err("control = \"localhost\"\n");
    assert!(e.message.contains("127.0.0.1:8089"), "{e}");
    let e = err("link_capacity = \"fast\"\n");
    assert!(e.message.contains("1gbit"), "{e}");
    let e = err("[[stream]]\nname = \"a\"\ndestination = \"rtp://h:1\"\nperiod = \"15\"\n");
    assert_eq!(e.line, Some(4));
    assert!(
        e.message.contains("[[stream]] 'a'") && e.message.contains("15ms"),
        "{e}"
    );
    let e = err(
        "[[stream]]\nname = \"a\"\ndestination = \"rtp://h:1\"\n[[stream]]\nsource = \"test\"\n",
    );
    assert_eq!(e.line, Some(4));
    assert!(
        e.message
            .contains("[[stream]] #2: the key 'name' is required"),
        "{e}"
    );
}

#[test]
fn streams_are_validated_and_names_unique() {
    let e = err("[[stream]]\nname = \"a b\"\ndestination = \"rtp://h:1\"\n");
    assert_eq!((e.kind, e.line), (ConfigErrorKind::Invalid, Some(1)));
    assert!(e.message.contains("not usable"), "{e}");
    let one = "[[stream]]\nname = \"cam\"\ndestination = \"rtp://h:1\"\n";
    let e = err(&format!("{one}\n{one}"));
    assert_eq!((e.kind, e.line), (ConfigErrorKind::Invalid, Some(5)));
    assert!(
        e.message.contains("named 'cam'") && e.message.contains("unique"),
        "{e}"
    );
}

#[test]
fn size_limits_are_enforced() {
    let one = |i: usize| format!("[[stream]]\nname=\"s{i}\"\ndestination=\"rtp://h:1\"\n");
    let many: String = (0..=MAX_STREAMS).map(one).collect();
    assert!(many.len() as u64 <= MAX_CONFIG_BYTES);
    assert_eq!(err(&many).kind, ConfigErrorKind::TooLarge);
    let huge = format!("# {}\n", "x".repeat(MAX_CONFIG_BYTES as usize));
    assert_eq!(err(&huge).kind, ConfigErrorKind::TooLarge);
}

#[test]
fn files_are_read_with_clear_errors() {
    let dir = std::env::temp_dir().join(format!("metronome-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("serve.toml");
    std::fs::write(&path, FULL).unwrap();
    assert_eq!(load(&path).unwrap().streams.len(), 2);
    std::fs::write(&path, "rt_cores = 1\nx = 2\n").unwrap();
    let e = load(&path).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{} line 2", path.display())),
        "{e}"
    );
    std::fs::write(&path, vec![b'#'; MAX_CONFIG_BYTES as usize + 10]).unwrap();
    assert_eq!(load(&path).unwrap_err().kind, ConfigErrorKind::TooLarge);
    std::fs::remove_dir_all(&dir).unwrap();
    let e = load(&dir.join("missing.toml")).unwrap_err();
    assert_eq!(e.kind, ConfigErrorKind::Read);
    assert!(
        e.to_string()
            .contains("missing.toml: cannot read the config file"),
        "{e}"
    );
    assert!(e.message.contains("check the path"), "{e}");
}
