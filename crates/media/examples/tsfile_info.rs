//! Reads a TS file the way the file source plays it and prints its timing:
//! `cargo run -p metronome-media --example tsfile_info -- FILE.ts`.

use metronome_media::{TsFileSource, TsSource};

fn main() {
    let path = std::env::args().nth(1).expect("usage: tsfile_info FILE.ts");
    let mut src = match TsFileSource::open(&path, false) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let (mut pkt, mut n, mut last) = ([0u8; 188], 0u64, None);
    loop {
        match src.next_packet(&mut pkt) {
            Ok(Some(t)) => {
                n += 1;
                last = Some(t);
            }
            Ok(None) => break,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
    }
    let span = last.unwrap_or_default().as_secs_f64();
    println!("{}", src.describe());
    println!(
        "{n} packets over {span:.3} s ({:.0} bit/s); {:?}",
        if span > 0.0 {
            n as f64 * 1504.0 / span
        } else {
            0.0
        },
        src.stats()
    );
}
