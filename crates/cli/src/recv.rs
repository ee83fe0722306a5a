//! `metronome recv`: receive, measure, report.

use crate::args::parse_duration;
use crate::report::{print_outcome, receiver_summary, LiveLine};
use clap::Args;
use metronome_rt::receiver::{Receiver, ReceiverRunConfig};
use metronome_rt::url::RtpUrl;
use metronome_session::receiver::PayloadKind;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct RecvArgs {
    /// Where to listen: rtp://:PORT, rtp://ADDR:PORT, or rtp://GROUP:PORT?iface=ADDR (multicast)
    #[arg(value_name = "URL")]
    pub url: String,
    /// Stop after this long (seconds, or 500ms, 2s)
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many RTP packets
    #[arg(long)]
    pub packets: Option<u64>,
    /// Write a per-packet CSV trace
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Save the received MPEG-TS
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print a JSON summary at the end
    #[arg(long)]
    pub json: bool,
    /// Accept any payload type, not only MPEG-TS (RFC 2250)
    #[arg(long)]
    pub any_payload: bool,
    /// Track up to this many sources (SSRCs) on the port, each measured on its own
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_sources: u32,
}

pub fn run(a: RecvArgs, stop: Arc<AtomicBool>) -> Result<(), Box<dyn std::error::Error>> {
    let url = RtpUrl::parse_source(&a.url)?;
    let mut cfg = ReceiverRunConfig::new(url);
    cfg.duration = a.duration;
    cfg.packets = a.packets;
    cfg.trace = a.trace.clone();
    cfg.output = a.output.clone();
    if a.any_payload {
        cfg.session.payload = PayloadKind::Any;
    }
    cfg.session.ssrc = crate::serve::fresh_seed() as u32;
    cfg.session.max_sources = a.max_sources as usize;
    let receiver = Receiver::open(cfg)?;
    // Said once the sockets are bound (and the group joined): a script may start sending now.
    eprintln!("metronome: listening on {}", a.url);
    let live = LiveLine::new(true);
    let outcome = receiver.run(&stop, |s| live.show(&s.status_line()))?;
    live.finish();
    print_outcome(a.json, &outcome, receiver_summary)?;
    Ok(())
}
