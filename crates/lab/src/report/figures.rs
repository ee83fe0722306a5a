//! Which plots the report draws of each point, from its figures: the throughput over time,
//! the delay and inter-arrival distributions, the controller's target, what was sent and
//! what viewers saw. (The reference's plots are in `reference.rs`, the sweep's in
//! `sweep.rs`.)

use super::plots::{figure, Line, Plot, Style};
use crate::results::PointResult;
use crate::video::FrameSeries;
use metronome_time::Micros;

/// Throughput over time, and the delay and inter-arrival distributions, of one point.
/// Receivers with the same curves are drawn once; a flow with more different ones than this
/// shows only its first [`CROWD_SHOWN`].
const CROWD: usize = 8;
const CROWD_SHOWN: usize = 3;

/// A receiver's curves: bits per interval, and its delay and inter-arrival distributions.
#[derive(PartialEq)]
struct Curves {
    throughput: Vec<(f64, f64)>,
    delay: Vec<(f64, f64)>,
    gaps: Vec<(f64, f64)>,
}

impl Curves {
    fn of(r: &metronome_link::report::ReceiverReport) -> Curves {
        let width = r
            .intervals
            .windows(2)
            .map(|w| (w[1].start_us - w[0].start_us).as_nanos_u64())
            .next()
            .unwrap_or(1_000_000_000)
            .max(1);
        let cdf = |q: &[Micros]| {
            q.iter()
                .enumerate()
                .map(|(i, d)| (d.as_millis_f64(), i as f64))
                .collect::<Vec<_>>()
        };
        Curves {
            throughput: r
                .intervals
                .iter()
                .map(|i| {
                    (
                        i.start_us.as_secs_f64(),
                        i.bytes as f64 * 8e3 / width as f64,
                    )
                })
                .collect(),
            delay: cdf(&r.delay_quantiles_us),
            gaps: cdf(&r.interarrival_quantiles_us),
        }
    }
}

pub(crate) fn point_plots(p: &PointResult) -> String {
    let (mut lines, mut delays, mut gaps) = (Vec::new(), Vec::new(), Vec::new());
    for f in &p.flows {
        let rows = f
            .receivers
            .iter()
            .map(|r| (r.node.as_str(), Curves::of(r)))
            .collect();
        let groups = super::receivers::collapse(rows);
        let n = groups.len();
        for (label, c) in groups
            .into_iter()
            .take(if n > CROWD { CROWD_SHOWN } else { n })
        {
            let group = lines.len();
            let line = |points| Line {
                group,
                name: format!("{} → {label}", f.name),
                points,
                style: Style::Plain,
            };
            lines.push(line(c.throughput));
            delays.push(line(c.delay));
            gaps.push(line(c.gaps));
        }
    }
    let mut html = figure(Plot {
        x_names: Vec::new(),
        id: &format!("{}-throughput", p.id),
        title: "Throughput over time",
        x_label: "time, s",
        y_label: "Mbit/s",
        caption: "Bits received per interval (on the wire; TCP: what the application read); receivers with the same curves drawn once, and of a flow with more than 8 different ones the first 3",
        lines,
    });
    html.push_str(&figure(Plot {
        x_names: Vec::new(),
        id: &format!("{}-delay", p.id),
        title: "One-way delay distribution",
        x_label: "delay, ms",
        y_label: "% of packets",
        caption: "Cumulative distribution of the one-way delay",
        lines: delays,
    }));
    html.push_str(&figure(Plot {
        x_names: Vec::new(),
        id: &format!("{}-interarrival", p.id),
        title: "Inter-arrival distribution",
        x_label: "gap between arrivals, ms",
        y_label: "% of packets",
        caption: "Cumulative distribution of the time between consecutive arrivals",
        lines: gaps,
    }));
    html
}

/// Each rate controller's target over time (empty without one).
pub(crate) fn rate_plot(p: &PointResult) -> String {
    let lines: Vec<Line> = p
        .flows
        .iter()
        .filter_map(|f| {
            let rc = f
                .rate_control
                .as_ref()
                .filter(|r| r.controller != "fixed")?;
            Some((f, rc))
        })
        .enumerate()
        .map(|(group, (f, rc))| {
            // A step line: each target holds until the next.
            let end = (f.start_us + f.duration_us).as_secs_f64();
            let mut points = Vec::with_capacity(rc.points.len() * 2 + 1);
            for (i, &(t, bps)) in rc.points.iter().enumerate() {
                let y = bps as f64 / 1e6;
                points.push((t.as_secs_f64(), y));
                let next = rc.points.get(i + 1).map_or(end, |n| n.0.as_secs_f64());
                points.push((next, y));
            }
            Line {
                group,
                name: format!("{} ({})", f.name, rc.controller),
                points,
                style: Style::Plain,
            }
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    figure(Plot {
        x_names: Vec::new(),
        id: &format!("{}-rate", p.id),
        title: "Sending rate over time",
        x_label: "time, s",
        y_label: "Mbit/s",
        caption:
            "The rate controller's target (bits on the wire); the video follows it at its next GOP",
        lines,
    })
}

/// Each video flow as sent: its coded frames' sizes over time and, for a ladder's video, the
/// rung its VBR controller chose for each GOP; empty without video.
pub(crate) fn sent_plots(p: &PointResult) -> String {
    if p.sent_series.is_empty() {
        return String::new();
    }
    let (mut sizes, mut rungs) = (Vec::new(), Vec::new());
    for (group, s) in p.sent_series.iter().enumerate() {
        let t = |d: Micros| d.as_secs_f64();
        let points = |v: &[f64]| {
            s.time_us
                .iter()
                .zip(v)
                .map(|(x, y)| (t(*x), y / 1e3))
                .collect()
        };
        sizes.push(Line {
            group,
            name: s.flow.clone(),
            points: points(&s.frame_bytes_mean),
            style: Style::Plain,
        });
        if !s.rung_quantizer.is_empty() {
            rungs.push(Line {
                group,
                name: s.flow.clone(),
                points: rung_steps(s),
                style: Style::Plain,
            });
        }
    }
    let step = p.sent_series[0].step;
    let caption = if step > 1 {
        format!("The coded size of each frame as sent; each point the mean of {step} frames (every frame is in FLOW.sent.csv)")
    } else {
        "The coded size of each frame as sent: I-frames stand above the P-frames".to_string()
    };
    let mut html = figure(Plot {
        x_names: Vec::new(),
        id: &format!("{}-frame-bytes", p.id),
        title: "Frame sizes over time",
        x_label: "time, s",
        y_label: "coded frame, kB",
        caption: &caption,
        lines: sizes,
    });
    if !rungs.is_empty() {
        html.push_str(&figure(Plot {
        x_names: Vec::new(),
            id: &format!("{}-rungs", p.id),
            title: "Rung per GOP",
            x_label: "time, s",
            y_label: "quantizer",
            caption: "The ladder's rung the VBR controller picked for each GOP (2: finest, 31: coarsest); every GOP is in FLOW.rungs.csv",
            lines: rungs,
        }));
    }
    html
}

/// A ladder's rungs as a step line: each quantizer held until the next change.
fn rung_steps(s: &crate::video::SentSeries) -> Vec<(f64, f64)> {
    let end = s.time_us.last().copied().unwrap_or(Micros::ZERO);
    let mut points = Vec::new();
    for (i, (&t, &q)) in s.rung_start_us.iter().zip(&s.rung_quantizer).enumerate() {
        let until = s.rung_start_us.get(i + 1).copied().unwrap_or(end.max(t));
        points.push((t.as_secs_f64(), f64::from(q)));
        points.push((until.as_secs_f64(), f64::from(q)));
    }
    points
}

/// The lines of the video plots, one per viewer in each.
#[derive(Default)]
struct ViewerLines {
    psnr: Vec<Line>,
    delay: Vec<Line>,
    cj: Vec<Line>,
    mos: Vec<Line>,
}

impl ViewerLines {
    /// Viewer `s`'s lines (`group`: its colour), named for the viewers `label` stands for.
    fn add(&mut self, p: &PointResult, group: usize, s: &FrameSeries, label: &str) {
        let name = format!("{} → {label}", s.flow);
        let t = |i: usize| {
            (s.start_us.as_nanos_u64() as f64
                + (i * s.step as usize) as f64 * s.frame_interval_us.as_nanos_u64() as f64)
                / 1e9
        };
        let line = |points: Vec<(f64, f64)>| Line {
            group,
            name: name.clone(),
            points,
            style: Style::Plain,
        };
        self.psnr.push(line(
            s.psnr_y_db
                .iter()
                .enumerate()
                .map(|(i, v)| (t(i), *v))
                .collect(),
        ));
        self.delay.push(line(
            s.delay_us
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.map(|d| (t(i), d.as_millis_f64())))
                .collect(),
        ));
        // Each point's smallest then largest: the line covers every frame's value.
        let ms = |v: &Option<Micros>| v.map(Micros::as_millis_f64);
        self.cj.push(line(
            s.cumulative_jitter_us
                .iter()
                .enumerate()
                .flat_map(|(i, hi)| {
                    let lo = s.cumulative_jitter_min_us.get(i).and_then(ms);
                    [lo, ms(hi)].into_iter().flatten().map(move |v| (t(i), v))
                })
                .collect(),
        ));
        if let Some(points) = mos_shares(p, s) {
            self.mos.push(Line {
                group,
                name,
                points,
                style: Style::Bars,
            });
        }
    }
}

/// The share of viewer `s`'s display slots at each MOS, %, if its pictures were judged.
fn mos_shares(p: &PointResult, s: &FrameSeries) -> Option<Vec<(f64, f64)>> {
    let q = p
        .flows
        .iter()
        .filter(|f| f.name == s.flow)
        .flat_map(|f| &f.receivers)
        .find(|r| r.node == s.receiver)
        .and_then(|r| r.frames)
        .and_then(|f| f.pictures)?;
    let n = q.mos_frames.iter().sum::<u64>().max(1) as f64;
    Some(
        q.mos_frames
            .iter()
            .enumerate()
            .map(|(m, c)| ((m + 1) as f64, 100.0 * *c as f64 / n))
            .collect(),
    )
}

/// A viewer's series (at `index` in the point's) and its figures (frames lost, the MOS of
/// every slot: the thinned series alone could hide a difference), equal to another's when the
/// two saw the same, whoever they are.
struct Seen {
    index: usize,
    frames: FrameSeries,
    figures: Option<metronome_link::report::FrameFigures>,
}

impl Seen {
    fn of(p: &PointResult, index: usize, s: &FrameSeries) -> Seen {
        let figures = p
            .flows
            .iter()
            .filter(|f| f.name == s.flow)
            .flat_map(|f| &f.receivers)
            .find(|r| r.node == s.receiver)
            .and_then(|r| r.frames);
        Seen {
            index,
            frames: FrameSeries {
                receiver: String::new(),
                ..s.clone()
            },
            figures,
        }
    }
}

impl PartialEq for Seen {
    fn eq(&self, other: &Seen) -> bool {
        self.frames == other.frames && self.figures == other.figures
    }
}

/// Each video receiver's frames over time (PSNR of Y, delay, cumulative jitter) and its MOS
/// distribution; empty without video.
pub(crate) fn video_plots(p: &PointResult) -> String {
    if p.frame_series.is_empty() {
        return String::new();
    }
    // Viewers that saw the same frames are drawn once.
    let rows = p
        .frame_series
        .iter()
        .enumerate()
        .map(|(i, s)| (s.receiver.as_str(), Seen::of(p, i, s)))
        .collect();
    let mut lines = ViewerLines::default();
    for (group, (label, seen)) in super::receivers::collapse(rows).iter().enumerate() {
        lines.add(p, group, &p.frame_series[seen.index], label);
    }
    let ViewerLines {
        psnr,
        delay,
        cj,
        mos,
    } = lines;
    let step = p.frame_series[0].step;
    let thinned = if step > 1 {
        format!(" (each point the worst of {step} frames)")
    } else {
        String::new()
    };
    let mut html = figure(Plot {
        x_names: Vec::new(),
        id: &format!("{}-psnr", p.id),
        title: "PSNR per frame",
        x_label: "time, s",
        y_label: "PSNR of Y, dB",
        caption: &format!(
            "What each viewer's screen showed against the source's frame{thinned}; 100 dB: identical"
        ),
        lines: psnr,
    });
    html.push_str(&figure(Plot {
        x_names: ["1 bad", "2 poor", "3 fair", "4 good", "5 excellent"]
            .map(String::from)
            .to_vec(),
        id: &format!("{}-mos", p.id),
        title: "MOS distribution",
        x_label: "MOS (Evalvid's table of PSNR)",
        y_label: "% of frames",
        caption: "Share of display slots at each MOS: 5 above 37 dB, 4 above 31, 3 above 25, 2 above 20, else 1",
        lines: mos,
    }));
    html.push_str(&figure(Plot {
        x_names: Vec::new(),
        id: &format!("{}-frame-delay", p.id),
        title: "Frame delay over time",
        x_label: "time, s",
        y_label: "delay, ms",
        caption: &format!(
            "From a frame's first packet's due time to its last packet's arrival{}",
            if step > 1 {
                " (each point the largest of its frames)"
            } else {
                ""
            }
        ),
        lines: delay,
    }));
    html.push_str(&figure(Plot {
        x_names: Vec::new(),
        id: &format!("{}-cumulative-jitter", p.id),
        title: "Cumulative jitter over time",
        x_label: "time, s",
        y_label: "cumulative jitter, ms",
        caption: "Seed 002's Eq. 3–4: the play-out delay that would have kept every frame so far",
        lines: cj,
    }));
    html
}
