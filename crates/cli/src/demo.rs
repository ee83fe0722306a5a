//! `metronome demo`: the main job on its built-in default. A paced sender with the live test
//! source streams to one unicast and one multicast receiver on loopback for a few seconds, then
//! both sides say what they measured.

use crate::args::{parse_duration, SourceArgs};
use crate::report;
use clap::Args;
use metronome_apps::receiver::{Receiver, ReceiverOutcome, ReceiverRunConfig};
use metronome_apps::sender::{run_sender, SenderConfig};
use metronome_rt::ports::free_udp_run;
use metronome_rt::url::RtpUrl;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub(crate) struct DemoArgs {
    /// How long to stream
    #[arg(long, value_parser = parse_duration, default_value = "6s")]
    pub duration: Duration,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Print the summaries as JSON
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(a: DemoArgs, stop: Arc<AtomicBool>) -> Result<(), Box<dyn std::error::Error>> {
    let lo = Ipv4Addr::LOCALHOST;
    let uport = free_udp_run(2)?;
    let mport = free_udp_run(2)?;
    let group = Ipv4Addr::new(239, 255, 77, 1);
    let unicast = RtpUrl::unicast(SocketAddr::from((lo, uport)));
    let multicast = RtpUrl::multicast(SocketAddr::from((group, mport)), Some(lo));
    let source = a.source.open()?;
    eprintln!(
        "demo: {} for {:.0} s to {} (unicast) and {} (multicast), with two receivers…",
        source.describe(),
        a.duration.as_secs_f64(),
        unicast,
        multicast
    );

    let rx_stop = Arc::new(AtomicBool::new(false));
    let mut receivers = Vec::new();
    for (i, url) in [unicast, multicast].into_iter().enumerate() {
        let mut cfg = ReceiverRunConfig::new(url);
        cfg.duration = Some(a.duration + Duration::from_secs(10));
        cfg.session.ssrc = metronome_wire::Ssrc(0x5243_5600 + i as u32);
        cfg.session.cname = format!("demo-receiver-{i}");
        // Bound (and joined) before the sender starts.
        let receiver = Receiver::open(cfg)?;
        let stop = rx_stop.clone();
        receivers.push(std::thread::spawn(move || receiver.run(&stop, |_, _| {})));
    }

    let seed = crate::serve::fresh_seed();
    let mut cfg = SenderConfig::new(
        vec![unicast, multicast],
        metronome_wire::Ssrc(seed as u32),
        seed,
    );
    cfg.duration = Some(a.duration);
    cfg.send_time_ext = true;
    let live = report::LiveLine::new(!a.json);
    let sent = run_sender(source, cfg, stop, |s| live.show(&report::sender_status(s)));
    live.finish();
    // Receivers stop once the last packets and the BYE have had time to arrive.
    std::thread::sleep(Duration::from_millis(300));
    rx_stop.store(true, Ordering::SeqCst);
    let received: Vec<ReceiverOutcome> = receivers
        .into_iter()
        .map(|h| h.join().expect("receiver thread does not panic"))
        .collect::<Result<_, _>>()?;
    let sent = sent?;
    if a.json {
        let v = DemoRun {
            sender: sent,
            receivers: received,
        };
        println!("{}", report::to_json(&v)?);
        return Ok(());
    }
    println!("{}", report::sender_summary(&sent));
    for (name, r) in ["unicast", "multicast"].iter().zip(&received) {
        println!("{name} {}", report::receiver_summary(r));
    }
    Ok(())
}

/// `demo --json`: the sender's outcome and the two receivers' (unicast, then multicast).
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct DemoRun {
    pub sender: metronome_apps::sender::SenderOutcome,
    pub receivers: Vec<ReceiverOutcome>,
}
