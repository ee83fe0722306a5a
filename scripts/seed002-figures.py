#!/usr/bin/env python3
"""Per-point figures of a seed 002 run that the report does not print, from its points.

    scripts/seed002-figures.py lab-results/seed002-tcp

For each point (its sweep values and replicate), from `points/*/point.json` and
`points/*/flows.csv`, of the first flow (the video):

- first_report_s: when the controller's target first changed (TFMCC: its receivers' first
  reports; ASMP: its first RTCP reports);
- first_frame_s: the first arrived frame's delay at the first receiver (the seed's Eq. 4
  base), s;
- max_cumjit_s: its largest cumulative jitter, s;
- max_delay_s, max_delay_made_s: the first receiver's longest frame delay, s, and when that
  frame was made, s in;
- delay_after10_ms: the first receiver's mean frame delay over frames made after 10 s, ms;
- p10/p50/p90_mbps: the target's 10th, 50th and 90th percentiles after 10 s, weighted by
  time, Mbit/s;
- at5s_mbps: the target at 5 s;
- doubling_s: the mean time per doubling from 0.1 to 1.6 Mbit/s (four doublings), s, or -
  where it never gets there;
- q2_share: the share of the first receiver's judged frames (one in `step`) made at
  quantizer 2, the finest rung of seed 002's ladder;
- pkt_delay_ms: the mean packet delay over the receivers, ms.

The scenarios' notes and docs/cc.md quote these figures. Python 3's standard library only.
"""
import csv
import glob
import json
import os
import sys


def percentile(segments, q):
    """The value below which a share `q` of the time is spent; `segments` are (value, span)."""
    total = sum(w for _, w in segments)
    acc = 0.0
    for v, w in sorted(segments):
        acc += w
        if acc >= q * total:
            return v
    return float("nan")


def target_after(points, start_us, end_us):
    """(value, span) segments of the target from `start_us` to `end_us`."""
    segments = []
    for i, (t, v) in enumerate(points):
        t0 = max(t, start_us)
        t1 = points[i + 1][0] if i + 1 < len(points) else end_us
        if t1 > t0:
            segments.append((v, t1 - t0))
    return segments


def figures(point_dir):
    d = json.load(open(os.path.join(point_dir, "point.json")))
    flow = d["flows"][0]
    pts = flow["rate_control"]["points"]
    end = d["sim_us"]
    seg = target_after(pts, 10e6, end)
    at5 = [v for t, v in pts if t <= 5e6][-1]
    up = next((t for t, v in pts if v >= 100e3), None)
    top = next((t for t, v in pts if v >= 1.6e6), None)
    frames = d["frame_series"][0]
    delays = [x for x in frames["delay_us"] if x is not None]
    cumjit = [x for x in frames["cumulative_jitter_us"] if x is not None]
    period = frames["frame_interval_us"] * frames["step"]
    sent = d["sent_series"][0]
    rungs = list(zip(sent["rung_start_us"], sent["rung_quantizer"]))
    timed = [(k * period, x) for k, x in enumerate(frames["delay_us"]) if x is not None]
    longest = max(timed, key=lambda kx: kx[1]) if timed else (float("nan"), float("nan"))
    late = [x for t, x in timed if t >= 10e6]
    judged = [k * period for k, p in enumerate(frames["psnr_y_db"]) if p is not None]
    at_q2 = sum(1 for t in judged if [q for s, q in rungs if s <= t][-1:] == [2])
    rows = [r for r in csv.DictReader(open(os.path.join(point_dir, "flows.csv")))]
    video = [r for r in rows if r["flow"] == flow["name"]]
    return {
        "point": " ".join(f"{k}={v}" for k, v in d["params"].items()),
        "first_report_s": next((t for t, _ in pts[1:]), float("nan")) / 1e6,
        "first_frame_s": delays[0] / 1e6 if delays else float("nan"),
        "max_cumjit_s": max(cumjit) / 1e6 if cumjit else float("nan"),
        "max_delay_s": longest[1] / 1e6,
        "max_delay_made_s": longest[0] / 1e6,
        "delay_after10_ms": sum(late) / len(late) / 1e3 if late else float("nan"),
        "p10_mbps": percentile(seg, 0.1) / 1e6,
        "p50_mbps": percentile(seg, 0.5) / 1e6,
        "p90_mbps": percentile(seg, 0.9) / 1e6,
        "at5s_mbps": at5 / 1e6,
        "doubling_s": (top - up) / 4e6 if up is not None and top is not None else None,
        "q2_share": at_q2 / len(judged) if judged else float("nan"),
        "pkt_delay_ms": sum(float(r["mean_delay_ns"]) for r in video) / len(video) / 1e6,
    }


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/seed002-figures.py RESULTS_DIR (a `metronome lab run` output)")
    dirs = sorted(glob.glob(os.path.join(sys.argv[1], "points", "p*")))
    if not dirs:
        sys.exit(f"{sys.argv[1]}: no points/p* here; give the results directory of a lab run")
    cols = ["first_report_s", "first_frame_s", "max_cumjit_s", "max_delay_s",
            "max_delay_made_s", "delay_after10_ms", "p10_mbps", "p50_mbps", "p90_mbps",
            "at5s_mbps", "doubling_s", "q2_share", "pkt_delay_ms"]
    print("\t".join(["point"] + cols))
    for p in dirs:
        f = figures(p)
        cells = ["-" if f[c] is None else f"{f[c]:.3f}" for c in cols]
        print("\t".join([f["point"]] + cells))


if __name__ == "__main__":
    main()
