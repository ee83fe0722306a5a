//! What the link model must give, worked out by hand: the loss of a constant-rate UDP flow
//! through a link with netem's `limit`, and the fit of the extra time a real testbed held
//! packets.
//!
//! netem's limit counts every packet the qdisc holds, including those still serving their
//! delay. A packet accepted at `t` is held for `hold = delay + serialization` (plus whatever
//! the testbed adds), so with `L` places at most `L / hold` packets pass per second: the
//! **fluid bound**, `loss = 1 − L / (hold · pps)`. Evenly spaced arrivals (iperf's pacing) do
//! a little worse: a place freed between two arrivals stays empty until the next one, so a
//! packet accepted at arrival `i` blocks its place until arrival `i + k`, `k = ⌈hold /
//! interval⌉`, and exactly `L` of every `k` pass: the **periodic form**, `loss = 1 − L / k`.
//! The simulator sends evenly spaced datagrams, so it must match the periodic form; the
//! fluid bound is never beaten.

use metronome_config::scenario::{FlowKind, RateShape, Reference, Scenario};
use metronome_link::report::FlowReport;
use metronome_link::topology::{LinkId, NodeId, Topology};
use metronome_time::Micros;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The closed forms for one UDP flow and receiver whose path has a netem limit.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClosedForm {
    pub flow: String,
    pub receiver: String,
    /// The limit of the path's netem link, packets.
    pub limit: usize,
    /// Delay plus serialization of one datagram on that link (without `hold_extra_us`).
    pub hold_us: Micros,
    /// The profile's `hold_extra` (already in the link's delay).
    pub hold_extra_us: Micros,
    /// Gap between datagrams.
    pub interval_us: Micros,
    /// `1 − L / ⌈hold / interval⌉`, in percent.
    pub periodic_loss_percent: f64,
    /// `1 − L / (hold · pps)`, in percent.
    pub fluid_loss_percent: f64,
}

/// The periodic form, percent.
pub fn periodic_loss(limit: usize, hold_ns: u64, interval_ns: u64) -> f64 {
    let k = hold_ns.div_ceil(interval_ns.max(1)) as usize;
    if k <= limit {
        0.0
    } else {
        100.0 * (1.0 - limit as f64 / k as f64)
    }
}

/// The fluid bound, percent.
pub fn fluid_loss(limit: usize, hold_ns: u64, interval_ns: u64) -> f64 {
    (100.0 * (1.0 - limit as f64 * interval_ns as f64 / hold_ns.max(1) as f64)).max(0.0)
}

/// The closed forms for every constant-rate UDP flow of `s` whose path crosses a link with
/// netem's limit (the first such link on the path; one bottleneck is what the form is for).
pub fn for_scenario(s: &Scenario, net: &Topology) -> Vec<ClosedForm> {
    let mut out = Vec::new();
    for f in &s.flows {
        let FlowKind::Udp {
            payload,
            rate: RateShape::Constant(rate),
        } = f.kind
        else {
            continue;
        };
        if rate == 0 {
            continue;
        }
        let wire = payload as u64 + 28;
        let interval_ns = payload as u64 * 8 * 1_000_000_000 / rate;
        let (Some(src), true) = (net.node_by_name(&f.from), f.to.len() == 1) else {
            continue;
        };
        let Some(dst) = net.node_by_name(&f.to[0]) else {
            continue;
        };
        let Some(path) = net.path(src, dst) else {
            continue;
        };
        let Some(link) = path
            .iter()
            .find(|l| net.link_config(**l).netem_limit.is_some())
        else {
            continue;
        };
        let cfg = net.link_config(*link);
        let limit = cfg.netem_limit.unwrap_or(0);
        let ser = cfg
            .rate_bps
            .map_or(0, |r| wire * 8 * 1_000_000_000 / r.max(1));
        let extra = profile_extra(s, net.link_ends(*link), net);
        let delay_ns = cfg.delay.as_nanos() as u64;
        let hold_ns = delay_ns - extra.min(delay_ns) + ser;
        out.push(ClosedForm {
            flow: f.name.clone(),
            receiver: f.to[0].clone(),
            limit,
            hold_us: Micros::from_nanos_u64(hold_ns),
            hold_extra_us: Micros::from_nanos_u64(extra),
            interval_us: Micros::from_nanos_u64(interval_ns),
            periodic_loss_percent: periodic_loss(limit, hold_ns + extra, interval_ns),
            fluid_loss_percent: fluid_loss(limit, hold_ns + extra, interval_ns),
        });
    }
    out
}

/// What a TCP bulk transfer should carry: the smallest of what the application offers, the
/// path's narrowest rate less 40 bytes of IPv4 and TCP headers per packet of the flow's
/// `mtu` (smoltcp sends no TCP options on data segments; 1460 of 1500 by default), and with
/// `max_window` that many segments per round trip of the empty path. Loss recovery and
/// queues can only lower it.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TcpExpected {
    pub flow: String,
    pub receiver: String,
    /// The narrowest link rate on the path, bit/s (0: none is limited).
    pub bottleneck_bps: u64,
    /// The application's limit, bit/s of payload (0: none).
    pub app_bps: u64,
    pub expected_goodput_bps: f64,
}

/// [`TcpExpected`] for every TCP flow of `s`.
pub fn tcp_for_scenario(s: &Scenario, net: &Topology) -> Vec<TcpExpected> {
    let mut out = Vec::new();
    for f in &s.flows {
        let FlowKind::Tcp {
            rate_bps,
            mtu,
            max_window,
            ..
        } = f.kind
        else {
            continue;
        };
        let (Some(a), Some(b)) = (net.node_by_name(&f.from), net.node_by_name(&f.to[0])) else {
            continue;
        };
        let Some(path) = net.path(a, b) else { continue };
        let bottleneck = path
            .iter()
            .filter_map(|l| net.link_config(*l).rate_bps)
            .min();
        let mtu = mtu.unwrap_or(1500);
        let mss = mtu.saturating_sub(40) as f64;
        let by_link = bottleneck.map_or(f64::INFINITY, |r| r as f64 * mss / mtu.max(1) as f64);
        let by_app = rate_bps.map_or(f64::INFINITY, |r| r as f64);
        let by_window = max_window
            .zip(net.path(b, a))
            .map_or(f64::INFINITY, |(w, back)| {
                let rtt = path_time(net, &path, mtu) + path_time(net, &back, 40);
                w as f64 * mss * 8.0 / rtt.max(1e-9)
            });
        let expected = by_link.min(by_app).min(by_window);
        out.push(TcpExpected {
            flow: f.name.clone(),
            receiver: f.to[0].clone(),
            bottleneck_bps: bottleneck.unwrap_or(0),
            app_bps: rate_bps.unwrap_or(0),
            expected_goodput_bps: if expected.is_finite() { expected } else { 0.0 },
        });
    }
    out
}

/// Seconds a packet of `bytes` takes along `path` when its queues are empty: each link's
/// delay and its time on the wire.
fn path_time(net: &Topology, path: &[LinkId], bytes: u32) -> f64 {
    path.iter()
        .map(|l| {
            let c = net.link_config(*l);
            let wire = c.rate_bps.map_or(0.0, |r| bytes as f64 * 8.0 / r as f64);
            c.delay.as_secs_f64() + wire
        })
        .sum()
}

/// The `hold_extra` of the profile on the link between these nodes, ns.
fn profile_extra(s: &Scenario, (a, b): (NodeId, NodeId), net: &Topology) -> u64 {
    let (an, bn) = (net.node_name(a), net.node_name(b));
    s.links
        .iter()
        .find_map(|l| {
            if l.a == an && l.b == bn {
                Some(l.ab.1.hold_extra)
            } else if l.a == bn && l.b == an {
                Some(l.ba.1.hold_extra)
            } else {
                None
            }
        })
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The extra holding time that brings the periodic form closest to a reference table (least
/// squares over its cells, searched from 0 to 20 ms in 10 µs steps). The form is a step
/// function of the holding time, so the best fit is a range: `(from, to, worst)`, every value
/// in `from..=to` giving the same table, `worst` its largest difference from a reference cell.
/// `cells`: (hold without extra, interval, limit, the reference's loss %).
pub fn fit_hold_extra(cells: &[(u64, u64, usize, f64)]) -> Option<(u64, u64, f64)> {
    if cells.is_empty() {
        return None;
    }
    let score = |e: u64| {
        let (mut sse, mut worst) = (0.0, 0.0f64);
        for &(hold, interval, limit, seen) in cells {
            let d = periodic_loss(limit, hold + e, interval) - seen;
            sse += d * d;
            worst = worst.max(d.abs());
        }
        (sse, worst)
    };
    let steps: Vec<(u64, f64, f64)> = (0..=2000u64)
        .map(|k| {
            let (sse, worst) = score(k * 10_000);
            (k * 10_000, sse, worst)
        })
        .collect();
    let best = steps.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
    let first = steps.iter().position(|s| s.1 <= best + 1e-9)?;
    let len = steps[first..]
        .iter()
        .take_while(|s| s.1 <= best + 1e-9)
        .count();
    Some((steps[first].0, steps[first + len - 1].0, steps[first].2))
}

/// The cells of `reference` matched with the closed forms of the points where the swept
/// parameter `reference.by` has the column's value (one per column and row, from points that
/// agree on every other parameter with `others`).
pub fn reference_cells(
    reference: &Reference,
    points: &[(BTreeMap<String, String>, Vec<ClosedForm>)],
    others: &BTreeMap<String, String>,
) -> Vec<(u64, u64, usize, f64)> {
    let mut cells = Vec::new();
    for (c, col) in reference.columns.iter().enumerate() {
        let Some((_, forms)) = points.iter().find(|(params, _)| {
            params.get(&reference.by) == Some(col)
                && others
                    .iter()
                    .all(|(k, v)| k == &reference.by || params.get(k) == Some(v))
        }) else {
            continue;
        };
        for (row, values) in &reference.rows {
            if let Some(cf) = forms.iter().find(|cf| &cf.receiver == row) {
                cells.push((
                    cf.hold_us.as_nanos_u64(),
                    cf.interval_us.as_nanos_u64(),
                    cf.limit,
                    values[c],
                ));
            }
        }
    }
    cells
}

/// A receiver's figure by name (the reference's `metric`).
pub fn metric(flows: &[FlowReport], receiver: &str, metric: &str) -> Option<f64> {
    let r = flows
        .iter()
        .flat_map(|f| &f.receivers)
        .find(|r| r.node == receiver)?;
    Some(match metric {
        "loss_percent" => r.loss_percent,
        "throughput_bps" => r.throughput_bps,
        "jitter_us" => r.jitter_us.as_micros_f64(),
        "mean_delay_us" => r.mean_delay_us.as_micros_f64(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_by_hand() {
        // Seed 001's poor client at 2 Mbit/s: hold 20 ms + 1.1984 ms, a datagram every
        // 5.88 ms: k = 4, so 2 of 4 pass (50 %); the fluid bound says 1 − 2·5.88/21.1984.
        let (hold, iv) = (21_198_400, 5_880_000);
        assert_eq!(periodic_loss(2, hold, iv), 50.0);
        let fluid = 100.0 * (1.0 - 2.0 * 5.88 / 21.1984);
        assert!((fluid_loss(2, hold, iv) - fluid).abs() < 1e-9);
        assert_eq!(periodic_loss(20, hold, iv), 0.0);
        assert_eq!(fluid_loss(20, hold, iv), 0.0);
    }

    #[test]
    fn the_fit_finds_a_planted_extra() {
        // Cells made with 3 ms extra are fitted back to a value that reproduces them exactly.
        let cells: Vec<_> = [
            (2, 5_880_000u64),
            (2, 2_940_000),
            (10, 1_470_000),
            (10, 980_000),
        ]
        .iter()
        .map(|&(l, iv)| (21_000_000u64, iv, l, periodic_loss(l, 24_000_000, iv)))
        .collect();
        let (from, to, worst) = fit_hold_extra(&cells).unwrap();
        assert_eq!(worst, 0.0, "{from}..{to}");
        assert!(from <= 3_000_000 && 3_000_000 <= to, "{from}..{to}");
        for e in [from, to] {
            for &(h, iv, l, seen) in &cells {
                assert_eq!(periodic_loss(l, h + e, iv), seen);
            }
        }
    }
}
