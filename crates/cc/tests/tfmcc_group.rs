//! A TFMCC sender and a whole group of receivers in virtual time: each receiver has its own
//! path delay and loss rate; data and the sender's announcements go down, reports come back.
//! What RFC 4654 promises is checked here: the feedback per round stays bounded however large
//! the group (10 000 receivers), the slowest receiver becomes the CLR (also one that joins
//! late), and the rate follows it.

use metronome_cc::tfmcc::{ReceiverFeedback, SenderInfo, TfmccReceiver, TfmccReceiverConfig};
use metronome_cc::{Announce, RateController, TfmccConfig, TfmccSender};
use metronome_time::{Bitrate, Timestamp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

const S: usize = 1000;

#[derive(Clone, Copy)]
struct Member {
    one_way: Duration,
    loss: f64,
    joins: Timestamp,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// Packet `seq` (sent at `sent`) reaches delay class `class`.
    Data {
        class: usize,
        seq: u64,
        sent: u64,
    },
    /// Announcement `idx` reaches delay class `class`.
    Info {
        class: usize,
        idx: usize,
    },
    /// Receiver `r`'s report `idx` reaches the sender.
    Report {
        r: usize,
        idx: usize,
    },
    Timer {
        r: usize,
    },
    Sender,
}

/// The sender at one moment.
struct Sample {
    /// Seconds from the start.
    t: f64,
    /// The sending rate, bytes/s.
    rate: f64,
    clr: Option<u32>,
    round: u16,
    /// The CLR's last report's `X_r`, bytes/s.
    clr_x_r: Option<f64>,
}

struct Outcome {
    /// Non-CLR reports per finished round (rounds after the first `skip`).
    per_round: Vec<u64>,
    /// The sender every 100 ms.
    trace: Vec<Sample>,
    sender: TfmccSender,
}

/// Runs `secs` of a group whose members are given; delay classes are members' distinct
/// one-way delays (a data packet is one event per class, not per receiver).
fn run(members: &[Member], secs: u64, max_rate: Bitrate, seed: u64) -> Outcome {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut sender = TfmccSender::new(TfmccConfig::new(S as u32, max_rate), Timestamp::ZERO);
    let mut rx: Vec<TfmccReceiver> = (0..members.len())
        .map(|i| TfmccReceiver::new(TfmccReceiverConfig::new(i as u32 + 1, seed ^ i as u64)))
        .collect();
    let mut classes: Vec<Duration> = members.iter().map(|m| m.one_way).collect();
    classes.sort();
    classes.dedup();
    let class_of: Vec<usize> = members
        .iter()
        .map(|m| classes.binary_search(&m.one_way).unwrap())
        .collect();
    let mut in_class: Vec<Vec<usize>> = vec![Vec::new(); classes.len()];
    for (i, &c) in class_of.iter().enumerate() {
        in_class[c].push(i);
    }
    let mut heap: BinaryHeap<Reverse<(u64, Ev)>> = BinaryHeap::new();
    let mut infos: Vec<(SenderInfo, u64)> = Vec::new();
    let mut reports: Vec<ReceiverFeedback> = Vec::new();
    let mut timers: Vec<Option<Timestamp>> = vec![None; members.len()];
    let end = Timestamp::from_secs(secs);
    let mut next_send = Timestamp::ZERO;
    let mut seq = 0u64;
    let mut round_reports: BTreeMap<u16, u64> = BTreeMap::new();
    let mut trace = Vec::new();
    let mut last_x_r = vec![None; members.len()];
    let mut next_sample = 0.0;
    heap.push(Reverse((0, Ev::Sender)));
    while let Some(Reverse((t, ev))) = heap.pop() {
        let now = Timestamp::from_nanos(t);
        if now >= end {
            break;
        }
        let mut touched: Vec<usize> = Vec::new();
        match ev {
            Ev::Sender => {
                sender.handle_timeout(now);
                if now >= next_send {
                    for (c, d) in classes.iter().enumerate() {
                        let at = now + *d;
                        heap.push(Reverse((
                            at.as_nanos(),
                            Ev::Data {
                                class: c,
                                seq,
                                sent: t,
                            },
                        )));
                    }
                    seq += 1;
                    sender.on_sent(now, S as u64);
                    let gap = S as f64 / (sender.target_rate().as_bps() as f64 / 8.0).max(1.0);
                    next_send = now + Duration::from_secs_f64(gap);
                }
            }
            Ev::Data { class, seq, sent } => {
                for &r in &in_class[class] {
                    let m = &members[r];
                    if now < m.joins || rng.random::<f64>() < m.loss {
                        continue;
                    }
                    rx[r].on_packet(now, seq, Timestamp::from_nanos(sent), S);
                }
            }
            Ev::Info { class, idx } => {
                let (info, sent) = infos[idx];
                for &r in &in_class[class] {
                    if now < members[r].joins {
                        continue;
                    }
                    rx[r].on_sender_info(now, &info, Timestamp::from_nanos(sent));
                    touched.push(r);
                }
            }
            Ev::Report { r, idx } => {
                let fb = reports[idx];
                last_x_r[r] = Some(fb.x_r);
                let clr = sender.clr();
                if clr != Some(r as u32 + 1) {
                    *round_reports.entry(fb.round).or_default() += 1;
                }
                let feedback = metronome_cc::Feedback {
                    tfmcc: Some(fb),
                    ..metronome_cc::Feedback::bare(r as u32 + 1, "10.0.0.1:5005".parse().unwrap())
                };
                sender.on_feedback(now, &feedback);
            }
            Ev::Timer { r } => {
                if timers[r] == Some(now) {
                    timers[r] = None;
                    touched.push(r);
                }
            }
        }
        for r in touched {
            if let Some(fb) = rx[r].poll_report(now) {
                reports.push(fb);
                let at = now + members[r].one_way;
                heap.push(Reverse((
                    at.as_nanos(),
                    Ev::Report {
                        r,
                        idx: reports.len() - 1,
                    },
                )));
            }
            let next = rx[r].poll_timeout();
            if let Some(at) = next.filter(|_| next != timers[r]) {
                timers[r] = next;
                heap.push(Reverse((at.as_nanos(), Ev::Timer { r })));
            }
        }
        // The sender: announcements, its timers, its next packet.
        while let Some(Announce::Tfmcc(info)) = sender.poll_announce(now) {
            infos.push((info, t));
            for (c, d) in classes.iter().enumerate() {
                heap.push(Reverse((
                    (now + *d).as_nanos(),
                    Ev::Info {
                        class: c,
                        idx: infos.len() - 1,
                    },
                )));
            }
        }
        if now.as_secs_f64() >= next_sample {
            let clr = sender.clr();
            trace.push(Sample {
                t: now.as_secs_f64(),
                rate: sender.rate_bytes_per_s(),
                clr,
                round: sender.round(),
                clr_x_r: clr.and_then(|c| last_x_r[c as usize - 1]),
            });
            next_sample += 0.1;
        }
        let wake = sender.poll_timeout().map(|(w, _)| w).unwrap_or(end);
        let wake = wake.min(next_send).max(now + Duration::from_micros(1));
        if matches!(ev, Ev::Sender) || heap.iter().all(|Reverse((_, e))| *e != Ev::Sender) {
            heap.push(Reverse((wake.as_nanos(), Ev::Sender)));
        }
    }
    let last = sender.round();
    let per_round = round_reports
        .iter()
        .filter(|(r, _)| **r >= 2 && **r < last)
        .map(|(_, n)| *n)
        .collect();
    Outcome {
        per_round,
        trace,
        sender,
    }
}

fn group(n: usize, seed: u64) -> Vec<Member> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| Member {
            // 10 delay classes, 10–55 ms one way.
            one_way: Duration::from_millis(10 + 5 * rng.random_range(0..10u64)),
            loss: 0.02 + 0.02 * rng.random::<f64>(),
            joins: Timestamp::ZERO,
        })
        .collect()
}

fn summary(o: &Outcome) -> (f64, u64) {
    let n = o.per_round.len().max(1) as f64;
    let mean = o.per_round.iter().sum::<u64>() as f64 / n;
    (mean, o.per_round.iter().copied().max().unwrap_or(0))
}

#[test]
fn feedback_per_round_stays_bounded_from_100_to_10_000_receivers() {
    let mut figures = Vec::new();
    for n in [100, 1_000, 10_000] {
        let o = run(&group(n, 7), 40, Bitrate::mbps(2), 11);
        let (mean, max) = summary(&o);
        println!(
            "{n:>6} receivers: {} rounds, non-CLR reports per round mean {mean:.1}, max {max}; rate {:.0} B/s, CLR {:?}, counters {:?}",
            o.per_round.len(),
            o.sender.rate_bytes_per_s(),
            o.sender.clr(),
            o.sender.counters()
        );
        assert!(o.per_round.len() >= 5, "{n}: too few rounds to judge");
        figures.push((n, mean, max));
    }
    // A hundred times the receivers: nowhere near a hundred times the feedback (RFC 4654's
    // timers give about N^(RTT/T) answers), and never an implosion.
    let (_, small, _) = figures[0];
    let (_, large, large_max) = figures[2];
    assert!(large < 4.0 * small.max(1.0), "{figures:?}");
    assert!(large_max < 100, "{figures:?}");
}

/// What one run of the late-joining slow receiver shows: when it first became the CLR (s),
/// the share of the time after 32 s that it was, and, over that time, the most the sending
/// rate was above the rate it last reported.
struct LateJoin {
    first: Option<f64>,
    /// Feedback rounds from its joining to its first turn as the CLR.
    rounds: Option<u16>,
    led: f64,
    /// The largest `X / X_r` while it was the CLR after 32 s.
    over_its_rate: f64,
}

fn late_join(seed: u64) -> LateJoin {
    let mut members = group(300, 3);
    // A receiver with much more loss joins at 20 s.
    members.push(Member {
        one_way: Duration::from_millis(30),
        loss: 0.15,
        joins: Timestamp::from_secs(20),
    });
    let slow = members.len() as u32;
    let o = run(&members, 40, Bitrate::mbps(2), seed);
    let before = o.trace.iter().take_while(|s| s.t < 20.0);
    assert!(before.clone().all(|s| s.clr != Some(slow)), "seed {seed}");
    let after: Vec<_> = o.trace.iter().filter(|s| s.t > 32.0).collect();
    let led: Vec<_> = after.iter().filter(|s| s.clr == Some(slow)).collect();
    let over_its_rate = led
        .iter()
        .filter_map(|s| Some(s.rate / s.clr_x_r?))
        .fold(0.0, f64::max);
    let first = o.trace.iter().find(|s| s.clr == Some(slow));
    let joined_round = o.trace.iter().find(|s| s.t >= 20.0).map_or(0, |s| s.round);
    let j = LateJoin {
        first: first.map(|s| s.t),
        rounds: first.map(|s| s.round.wrapping_sub(joined_round)),
        led: led.len() as f64 / after.len() as f64,
        over_its_rate,
    };
    let mean = |v: &mut dyn Iterator<Item = f64>| {
        let (sum, n) = v.fold((0.0, 0), |(s, n), x| (s + x, n + 1));
        sum / n.max(1) as f64
    };
    println!(
        "seed {seed}: CLR from {:?} s ({:?} feedback rounds after it joined), then {:.0} % of the time; rate before it joined (15-20 s) {:.0} B/s, while it leads after 32 s {:.0} B/s against its X_r {:.0} (at most {:.3} x); R_max {:?}, T {:?}",
        j.first,
        j.rounds,
        j.led * 100.0,
        mean(&mut o.trace.iter().filter(|s| s.t > 15.0 && s.t < 20.0).map(|s| s.rate)),
        mean(&mut led.iter().map(|s| s.rate)),
        mean(&mut led.iter().filter_map(|s| s.clr_x_r)),
        j.over_its_rate,
        o.sender.r_max(),
        o.sender.feedback_delay()
    );
    j
}

/// Judged over five seeds (one run is one sample path: seeds 5-9 put the first choice 2 to 6
/// feedback rounds after it joined, at 22.2-25.1 s, and the share of the time after 32 s at
/// 80-100 %, 94 % on average; 2026-12-06, `X_recv` as RFC 4654 §4.3.4 measures it, held
/// between arrivals). It needs loss events before its rate falls under the others'
/// suppression rate, and its first loss event rate comes from few intervals. (With `X_recv`
/// decaying between arrivals, seed 5 took 15 rounds, to 31.0 s; before, with `X_recv`
/// over-counted, at seed 5 a receiver with nearly twice its RTT, 110 ms at 3 % loss, asked
/// for less: as the rate rises, the joiner's losses fall closer together into fewer loss
/// events.)
#[test]
fn the_slowest_receiver_becomes_the_clr_also_when_it_joins_late_and_the_rate_follows() {
    let runs: Vec<LateJoin> = std::thread::scope(|s| {
        let handles: Vec<_> = (5..10)
            .map(|seed| s.spawn(move || late_join(seed)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for j in &runs {
        // It is the CLR within 15 feedback rounds of joining, before 32 s: it needs loss
        // events before its rate falls under the others' suppression rate (RFC 5348 §5.4
        // weighs its few first intervals as they are), then, with no RTT yet, the sender
        // scales its rate up by R_max / R_r for the choice (RFC 4654 §3.3) until an echo lets
        // it measure its RTT and it reports again in a later round; RFC 4654's timer sends
        // its report late in a round (after T/2 with probability 0.99).
        assert!(j.first.is_some_and(|t| t < 32.0), "{:?}", j.first);
        assert!(j.rounds.is_some_and(|r| r <= 15), "{:?}", j.rounds);
        // While it leads, the group gets no more than it asks for (§3.3 case 4: each of its
        // reports sets the rate to at most its X_r): the rate follows it down.
        assert!(j.over_its_rate <= 1.0 + 1e-9, "{}", j.over_its_rate);
    }
    // Most of the time from then on (a receiver of the others can still be the lowest for a
    // moment, after a burst of losses).
    let led = runs.iter().map(|j| j.led).sum::<f64>() / runs.len() as f64;
    assert!(led > 0.5, "{led}");
}
