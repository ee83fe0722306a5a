//! The report's tables of each point's figures: its flows and receivers, how they shared
//! the bottleneck, what viewers saw, and its links.

use super::{esc, receivers};
use crate::results::{PointResult, Summary};
use metronome_time::Micros;
use std::fmt::Write as _;

/// Each point: its receivers' figures, and its links.
pub(crate) fn points_section(s: &Summary) -> String {
    let mut h = String::from("<h2 id=\"points\">Points</h2>\n");
    for p in &s.points {
        h.push_str(&point_heading(p));
        h.push_str(&commands_table(p));
        h.push_str(&flows_table(p));
        h.push_str(&sharing_table(p));
        h.push_str(&video_table(p));
        h.push_str(&super::repair::repair_table(p));
        h.push_str(&super::figures::point_plots(p));
        h.push_str(&super::figures::rate_plot(p));
        h.push_str(&super::figures::sent_plots(p));
        h.push_str(&super::figures::video_plots(p));
        h.push_str(&links_table(p));
    }
    h
}

/// A point's heading: its parameters, how long it took (and its video), its warnings, and
/// in emu mode how well the emulator kept time.
fn point_heading(p: &PointResult) -> String {
    let params: Vec<String> = p.params.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    let video = if p.video_us > Micros::ZERO {
        let net = (p.wall_us - p.video_us).as_secs_f64().max(1e-9);
        let parts = p.video_work.map_or(String::new(), |w| {
            format!(
                " (the ladder {:.3} s, sending {:.3} s, decoding and comparing what \
                 viewers saw {:.3} s)",
                w.ladder_us.as_secs_f64(),
                w.sending_us.as_secs_f64(),
                w.judging_us.as_secs_f64()
            )
        });
        format!(
            "; the video took {:.3} s{parts}, the network and the sessions {:.3} s: \
             {:.2} M events/s",
            p.video_us.as_secs_f64(),
            net,
            p.events as f64 / net / 1e6
        )
    } else {
        String::new()
    };
    let mut h = format!(
        "<h3 id=\"{}\">{}: {}</h3>\n<p class=\"note\">{:.1} s of virtual time in {:.3} s \
         ({} events, seed {}){video}.</p>\n",
        p.id,
        p.id,
        esc(&params.join(", ")),
        p.sim_us.as_secs_f64(),
        p.wall_us.as_secs_f64(),
        p.events,
        p.seed
    );
    for w in &p.warnings {
        let _ = writeln!(h, "<p class=\"note bad\">{}</p>", esc(w));
    }
    if let Some(e) = &p.emu {
        let _ = writeln!(
            h,
            "<p class=\"note\">On real sockets: the emulator sent datagrams p50 {:.0} µs, \
             p99 {:.0} µs, at most {:.0} µs after its model's time; its sockets dropped {}; \
             {}.</p>",
            e.lateness_p50_us.as_micros_f64(),
            e.lateness_p99_us.as_micros_f64(),
            e.lateness_max_us.as_micros_f64(),
            e.socket_drops,
            esc(&e.host)
        );
    }
    h
}

/// The programs a point's command flows ran (emu mode), and how each ended.
fn commands_table(p: &PointResult) -> String {
    if p.commands.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<table><tr><th>program flow</th><th>host</th><th>command</th><th>ended</th>\
         <th>ran s</th><th>output</th></tr>",
    );
    for c in &p.commands {
        let ended = match (c.exit_code, c.signal) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(sig)) => format!("signal {sig}"),
            (None, None) => "not started".into(),
        };
        let stopped = if c.stopped {
            " (stopped by the lab)"
        } else {
            ""
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{ended}{stopped}</td>\
             <td>{:.2}</td><td><a href=\"{}\">stdout</a> <a href=\"{}\">stderr</a></td></tr>",
            esc(&c.flow),
            esc(&c.host),
            esc(&c.argv.join(" ")),
            c.ran_us.as_secs_f64(),
            esc(&c.stdout),
            esc(&c.stderr)
        );
    }
    h.push_str("</table>\n");
    h
}

/// Each flow's receivers, those with equal figures in one row (the first rows of a crowd
/// that differs, and a row for the rest).
fn flows_table(p: &PointResult) -> String {
    let mut h = String::from(
        "<table><tr><th>flow</th><th>kind</th><th>receiver</th><th>sent</th><th>received</th>\
         <th>loss %</th><th>throughput Mbit/s</th><th>jitter ms</th><th>mean delay ms</th>\
         <th>p99 delay ms</th><th>frames lost</th><th>frame delay ms (mean / p99)</th></tr>",
    );
    for f in &p.flows {
        let rows = f
            .receivers
            .iter()
            .map(|r| (r.node.as_str(), receiver_cells(f, r)))
            .collect();
        let groups = receivers::collapse(rows);
        let shown = if groups.len() > MAX_ROWS {
            SHOWN_ROWS
        } else {
            groups.len()
        };
        for (label, cells) in &groups[..shown] {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td>{cells}</tr>",
                esc(&f.name),
                esc(&f.kind),
                esc(label)
            );
        }
        if groups.len() > shown {
            h.push_str(&crowd_row(f, groups.len() - shown));
        }
    }
    h.push_str("</table>\n");
    h
}

/// A receiver's cells of [`flows_table`], after its name.
fn receiver_cells(
    f: &metronome_link::report::FlowReport,
    r: &metronome_link::report::ReceiverReport,
) -> String {
    let frames = r.frames.map_or_else(
        || "<td>n/a</td><td>n/a</td>".to_string(),
        |f| {
            format!(
                "<td>{} of {} ({:.1} %)</td><td>{:.1} / {:.1}</td>",
                f.lost,
                f.frames,
                f.lost_percent,
                f.mean_delay_us.as_millis_f64(),
                f.p99_delay_us.as_millis_f64()
            )
        },
    );
    // A TCP flow is measured as the application reads it: no packet's delay or jitter.
    let ms = |d: Micros| {
        if f.kind == "tcp" {
            "n/a".to_string()
        } else {
            format!("{:.3}", d.as_millis_f64())
        }
    };
    format!(
        "<td>{}</td><td>{}</td><td>{:.2}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td>\
         {frames}",
        f.sent_packets,
        r.packets,
        r.loss_percent,
        r.throughput_bps / 1e6,
        ms(r.jitter_us),
        ms(r.mean_delay_us),
        ms(r.p99_delay_us)
    )
}

/// The time-weighted mean of a rate controller's target over the flow's active time, bit/s.
pub(crate) fn mean_target(f: &metronome_link::report::FlowReport) -> Option<f64> {
    let rc = f.rate_control.as_ref()?;
    let end = f.start_us + f.duration_us;
    let mut sum = 0.0;
    for (i, &(t, bps)) in rc.points.iter().enumerate() {
        let next = rc.points.get(i + 1).map_or(end, |p| p.0).min(end);
        sum += bps as f64 * (next - t.max(f.start_us)).as_nanos_u64() as f64;
    }
    (f.duration_us > Micros::ZERO).then(|| sum / f.duration_us.as_nanos_u64() as f64)
}

/// The flows' rate controllers and how the flows shared the network (empty when neither
/// applies).
fn sharing_table(p: &PointResult) -> String {
    let mut h = String::new();
    let controlled: Vec<_> = p
        .flows
        .iter()
        .filter(|f| {
            f.rate_control
                .as_ref()
                .is_some_and(|r| r.controller != "fixed")
        })
        .collect();
    if !controlled.is_empty() {
        h.push_str(
            "<table><caption>Rate control</caption><tr><th>flow</th><th>controller</th>\
             <th>target changes</th><th>mean target Mbit/s</th><th>sent Mbit/s</th></tr>",
        );
        for f in controlled {
            let rc = f
                .rate_control
                .as_ref()
                .map_or("", |r| r.controller.as_str());
            let sent = f.sent_bytes as f64 * 8e9 / f.duration_us.as_nanos_u64().max(1) as f64;
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td></tr>",
                esc(&f.name),
                esc(rc),
                f.rate_control.as_ref().map_or(0, |r| r.changes),
                mean_target(f).unwrap_or(0.0) / 1e6,
                sent / 1e6
            );
        }
        h.push_str("</table>\n");
    }
    // Each group of flows that shared a bottleneck (a summary written before there were
    // groups has only the one of all flows).
    let groups: Vec<(String, &crate::fairness::Fairness)> = match (&p.bottlenecks[..], &p.fairness)
    {
        ([], Some(all)) => vec![(String::new(), all)],
        (groups, _) => groups
            .iter()
            .map(|g| (format!(" at {}", g.links.join(", ")), &g.fairness))
            .collect(),
    };
    for (at, fair) in groups {
        bottleneck_table(&mut h, &at, fair);
    }
    h
}

/// The flows that shared a bottleneck (`at` names its links): each one's throughput, Jain's
/// index over them, the largest ratio.
fn bottleneck_table(h: &mut String, at: &str, fair: &crate::fairness::Fairness) {
    let _ = write!(
        h,
        "<table><caption>Sharing the bottleneck{}: each flow's throughput (the mean of its \
         receivers'), Jain's fairness index over them, the largest ratio</caption>\
         <tr><th>flow</th><th>kind</th><th>throughput Mbit/s</th></tr>",
        esc(at)
    );
    for f in &fair.flows {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{:.3}</td></tr>",
            esc(&f.flow),
            esc(&f.kind),
            f.throughput_bps / 1e6
        );
    }
    let _ = writeln!(
        h,
        "<tr><th colspan=\"2\">Jain's index</th><td>{:.3}</td></tr>\
         <tr><th colspan=\"2\">largest / smallest</th><td>{:.2}</td></tr></table>",
        fair.jain_index, fair.max_ratio
    );
}

/// What each video receiver saw: frames lost by type, delay, cumulative jitter, and the
/// pictures against the source's (empty without video).
fn video_table(p: &crate::results::PointResult) -> String {
    // Per flow, its viewers with equal figures in one row.
    let rows: Vec<(&str, String, String)> = p
        .flows
        .iter()
        .flat_map(|f| {
            let viewers = f
                .receivers
                .iter()
                .filter_map(|r| r.frames.map(|v| (r.node.as_str(), viewer_cells(&v))))
                .collect();
            receivers::collapse(viewers)
                .into_iter()
                .map(move |(label, cells)| (f.name.as_str(), label, cells))
        })
        .take(SHOWN_ROWS * 4)
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<table><caption>What viewers saw</caption><tr><th>flow</th><th>receiver</th>\
         <th>frames lost (I / P)</th><th>missed play-out deadline</th>\
         <th>frame delay ms (mean / p99)</th><th>max cumulative jitter ms</th>\
         <th>PSNR Y dB</th><th>PSNR YUV dB</th><th>SSIM</th><th>MOS</th>\
         <th>frames at MOS 1 / 2 / 3 / 4 / 5</th><th>MIV % (mean / max)</th></tr>",
    );
    for (flow, label, cells) in rows {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td>{cells}</tr>",
            esc(flow),
            esc(&label)
        );
    }
    h.push_str(
        "</table>\n<p class=\"note\">A frame is lost when a packet of it is, or when it misses \
         the play-out deadline and a newer frame is shown instead; the pictures are what reached \
         the viewer, decoded by FFmpeg's decoder, each display slot against the source's frame (PSNR \
         capped at 100 dB, Evalvid's MOS table). Every frame: <code>points/PNNN/FLOW.frames.csv</code>.</p>\n",
    );
    h
}

/// A viewer's cells of [`video_table`], after its flow and name.
fn viewer_cells(v: &metronome_link::report::FrameFigures) -> String {
    let pictures = v.pictures.map_or_else(
        || "<td>n/a</td><td>n/a</td><td>n/a</td><td>n/a</td><td>n/a</td><td>n/a</td>".to_string(),
        |q| {
            let m = q.mos_frames;
            format!(
                "<td>{:.2}</td><td>{:.2}</td><td>{:.4}</td><td>{:.2}</td>\
             <td>{} / {} / {} / {} / {}</td><td>{:.1} / {:.1}</td>",
                q.psnr_y_db,
                q.psnr_yuv_db,
                q.ssim,
                q.mos,
                m[0],
                m[1],
                m[2],
                m[3],
                m[4],
                q.miv_mean_percent,
                q.miv_max_percent
            )
        },
    );
    format!(
        "<td>{} of {} ({} / {})</td><td>{}</td><td>{:.1} / {:.1}</td><td>{:.1}</td>{pictures}",
        v.lost,
        v.frames,
        v.lost_i,
        v.lost_p,
        v.missed_deadline,
        v.mean_delay_us.as_millis_f64(),
        v.p99_delay_us.as_millis_f64(),
        v.max_cumulative_jitter_us.as_millis_f64(),
    )
}

/// Receivers shown per flow when it has more than [`MAX_ROWS`].
const SHOWN_ROWS: usize = 20;
const MAX_ROWS: usize = 50;

/// What the receivers of rows left out of the table did, in one row: the spread of every
/// receiver's loss.
fn crowd_row(f: &metronome_link::report::FlowReport, hidden: usize) -> String {
    let n = f.receivers.len();
    let loss = f.receivers.iter().map(|r| r.loss_percent);
    let (lo, hi) = loss.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    let mean = f.receivers.iter().map(|r| r.loss_percent).sum::<f64>() / n as f64;
    format!(
        "<tr><td colspan=\"12\" class=\"note\">… and {hidden} more rows (all {n} receivers \
         in flows.csv): loss from {lo:.2} to {hi:.2} %, mean {mean:.2} %</td></tr>"
    )
}

fn links_table(p: &PointResult) -> String {
    const SHOWN: usize = 200;
    let mut h = String::from(
        "<details><summary>links</summary><table><tr><th>from</th><th>to</th><th>profile</th>\
         <th>sent</th><th>delivered</th><th>lost</th><th>queue drops</th>\
         <th>max queue delay ms</th></tr>",
    );
    for l in p.links.iter().take(SHOWN) {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{:.3}</td></tr>",
            esc(&l.from),
            esc(&l.to),
            esc(&l.profile),
            l.sent,
            l.delivered,
            l.lost,
            l.dropped_queue,
            l.max_queue_delay_us.as_millis_f64()
        );
    }
    if p.links.len() > SHOWN {
        let _ = write!(
            h,
            "<tr><td colspan=\"8\" class=\"note\">… and {} more (every link is in summary.json)</td></tr>",
            p.links.len() - SHOWN
        );
    }
    h.push_str("</table></details>\n");
    h
}
