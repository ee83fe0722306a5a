//! Writes the test source to a file: `cargo run -p metronome-media --example write_ts -- OUT.ts SECONDS`.

use metronome_media::{TestSource, TestSourceConfig, TsSource};
use std::io::Write;
use std::time::Duration;

fn main() {
    let mut args = std::env::args().skip(1);
    let out = args.next().unwrap_or_else(|| "testsrc.ts".into());
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let cfg = TestSourceConfig {
        duration: Some(Duration::from_secs(secs)),
        ..TestSourceConfig::default()
    };
    let mut src = TestSource::new(cfg).expect("test source");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&out).expect("create output"));
    let mut pkt = [0u8; 188];
    while src.next_packet(&mut pkt).expect("packet").is_some() {
        file.write_all(&pkt).expect("write");
    }
    file.flush().expect("flush");
    eprintln!("{}: {:?}", src.describe(), src.mux_stats());
}
