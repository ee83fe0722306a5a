//! `metronome frames SENT RECEIVED`: what a viewer saw, frame by frame, from traces (Evalvid's
//! reconstruction, after the fact): the sender's frame trace (`serve --frame-trace`, the lab's
//! `FLOW.sent.csv`, or Evalvid's `st`) and a receiver's packet trace (`recv --trace`, the
//! lab's `FLOW.RECEIVER.packets.csv`, or Evalvid's `rd`). Frames lost by type, frame delay,
//! cumulative jitter, play-out deadline; `--evalvid` exports the pair as Evalvid's `st`, `sd`
//! and `rd`, so Evalvid's own tools can check the same run.

use crate::args::parse_duration;
use crate::recv::LateFrames;
use clap::Args;
use metronome_quality::playout::{reconstruct, LossRule, Playout, SentFrame};
use metronome_quality::trace::{self, PacketRecord};
use metronome_time::Micros;
use serde::Serialize;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args, Debug)]
pub(crate) struct FramesArgs {
    /// The sender's frame trace: Metronome's CSV, or Evalvid's st (a .st file)
    pub sent: PathBuf,
    /// A receiver's packet trace: metronome recv --trace, Metronome's packet CSV, or Evalvid's
    /// rd dump. Its times must be on the sender's clock (recv --trace's arrival_unix_ns is,
    /// with the hosts' clocks in step) for delays to mean anything
    pub received: PathBuf,
    /// The viewer's play-out deadline after a frame's send time, e.g. 150ms
    #[arg(long, value_parser = parse_duration)]
    pub playout_deadline: Option<Duration>,
    /// With --playout-deadline: a late frame is shown at a later slot if it is then the newest
    /// arrived (newest, seed 002), or is lost (drop, Evalvid's stricter rule)
    #[arg(long, value_enum, default_value_t = LateFrames::Newest)]
    pub late_frames: LateFrames,
    /// A frame arrived when its first packet did (default: when all of them did, Evalvid's rule)
    #[arg(long)]
    pub first_packet: bool,
    /// Write one CSV row per frame here
    #[arg(long, value_name = "FILE")]
    pub frames: Option<PathBuf>,
    /// Also write the pair as Evalvid's traces: PREFIX.st, PREFIX.sd, PREFIX.rd
    #[arg(long, value_name = "PREFIX")]
    pub evalvid: Option<PathBuf>,
    /// Print JSON only (durations in µs; the fields are on `Report` in frames.rs)
    #[arg(long)]
    pub json: bool,
}

/// The JSON document.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct Report {
    sent: String,
    received: String,
    frames: u64,
    frames_lost: u64,
    /// By type: I, P, B, other.
    frames_lost_by_type: [u64; 4],
    frames_missed_deadline: u64,
    duplicate_packets: u64,
    /// Of the frames shown: complete − sent.
    mean_delay_us: Micros,
    p99_delay_us: Micros,
    max_delay_us: Micros,
    max_cumulative_jitter_us: Micros,
}

fn open(p: &Path) -> Result<BufReader<File>, String> {
    File::open(p)
        .map(BufReader::new)
        .map_err(|e| format!("cannot open {}: {e}", p.display()))
}

fn is_st(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("st"))
}

pub(crate) fn run(a: FramesArgs) -> Result<(), String> {
    let sent = if is_st(&a.sent) {
        trace::read_st(open(&a.sent)?)
    } else {
        trace::read_frames(open(&a.sent)?)
    }
    .map_err(|e| format!("{}: {e}", a.sent.display()))?;
    let got = trace::read_received(open(&a.received)?)
        .map_err(|e| format!("{}: {e}", a.received.display()))?;
    if let Some(prefix) = &a.evalvid {
        write_evalvid(prefix, &sent, &got)?;
    }
    let p = Playout {
        loss: if a.first_packet {
            LossRule::FirstPacket
        } else {
            LossRule::AnyPacket
        },
        deadline_ns: a.playout_deadline.map(|d| d.as_nanos() as u64),
        late: a.late_frames.into(),
    };
    let arrivals: Vec<(u64, u64)> = got.iter().map(|r| (r.packet, r.time_ns)).collect();
    let r = reconstruct(&sent, &arrivals, p);
    if let Some(path) = &a.frames {
        write_rows(path, &sent, &r).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let delay = r.shown_delay();
    let report = Report {
        sent: a.sent.display().to_string(),
        received: a.received.display().to_string(),
        frames: sent.len() as u64,
        frames_lost: r.frames_lost,
        frames_lost_by_type: r.loss_by_type.map(|t| t.lost),
        frames_missed_deadline: r.missed_deadline,
        duplicate_packets: r.duplicate_packets,
        mean_delay_us: Micros::from_nanos_u64(delay.mean_ns),
        p99_delay_us: Micros::from_nanos_u64(delay.p99_ns),
        max_delay_us: Micros::from_nanos_u64(delay.max_ns),
        max_cumulative_jitter_us: Micros::from_nanos(r.max_cumulative_jitter_ns()),
    };
    if a.json {
        println!(
            "{}",
            crate::report::to_json(&report).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    let t = report.frames_lost_by_type;
    println!(
        "{} frames, {} lost (I {}, P {}, B {}, other {}), {} missed the play-out deadline, {} duplicate packets",
        report.frames, report.frames_lost, t[0], t[1], t[2], t[3], report.frames_missed_deadline, report.duplicate_packets
    );
    println!(
        "frame delay (shown frames): mean {:.3} ms, p99 {:.3} ms, max {:.3} ms; cumulative jitter at most {:.3} ms",
        report.mean_delay_us.as_millis_f64(),
        report.p99_delay_us.as_millis_f64(),
        report.max_delay_us.as_millis_f64(),
        report.max_cumulative_jitter_us.as_millis_f64()
    );
    Ok(())
}

fn write_rows(
    path: &Path,
    sent: &[SentFrame],
    r: &metronome_quality::playout::Reconstruction,
) -> std::io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    writeln!(
        w,
        "frame,type,size_bytes,send_ns,arrived,complete_ns,delay_ns,missed_deadline,shown,cumulative_jitter_ns,slot_shows"
    )?;
    let opt = |v: Option<String>| v.unwrap_or_default();
    for (k, (s, f)) in sent.iter().zip(&r.frames).enumerate() {
        writeln!(
            w,
            "{k},{},{},{},{},{},{},{},{},{},{}",
            s.kind.letter(),
            s.size_bytes,
            s.send_ns,
            u8::from(f.arrived),
            opt(f.complete_ns.map(|v| v.to_string())),
            opt(f.delay_ns.map(|v| v.to_string())),
            u8::from(f.missed_deadline),
            u8::from(f.shown),
            opt(f.cumulative_jitter_ns.map(|v| v.to_string())),
            opt(r.slots.get(k).copied().flatten().map(|v| v.to_string())),
        )?;
    }
    w.flush()
}

/// PREFIX.st, PREFIX.sd (each frame's packets at its send time) and PREFIX.rd, numbered as
/// Evalvid numbers packets.
fn write_evalvid(prefix: &Path, sent: &[SentFrame], got: &[PacketRecord]) -> Result<(), String> {
    let (frames, received) = trace::to_evalvid(sent, got);
    let sd: Vec<PacketRecord> = frames
        .iter()
        .flat_map(|f| {
            let size = f.size_bytes / f.packets.len().max(1) as u32;
            f.packets.iter().map(move |p| PacketRecord {
                packet: *p,
                time_ns: f.send_ns,
                size_bytes: size,
            })
        })
        .collect();
    let name = |ext: &str| {
        let mut p = prefix.as_os_str().to_owned();
        p.push(ext);
        PathBuf::from(p)
    };
    let write = |path: PathBuf, f: &dyn Fn(&mut BufWriter<File>) -> std::io::Result<()>| {
        File::create(&path)
            .map(BufWriter::new)
            .and_then(|mut w| f(&mut w).and_then(|()| w.flush()))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    write(name(".st"), &|w| trace::write_st(w, &frames))?;
    write(name(".sd"), &|w| trace::write_dump(w, &sd))?;
    write(name(".rd"), &|w| trace::write_dump(w, &received))?;
    Ok(())
}
