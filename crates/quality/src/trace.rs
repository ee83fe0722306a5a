//! Trace files: what the sender sent, frame by frame and packet by packet, and what a receiver
//! got; in Metronome's CSV formats and in Evalvid's (`st`, `sd`, `rd`), so that results can be
//! checked with Evalvid's own tools.
//!
//! Metronome's formats (CSV with a header line, times in ns on the run's clock):
//! - frame trace: `frame,type,size_bytes,packets,send_ns` (type `I`, `P`, `B` or `H`;
//!   `packets` the ids of the packets carrying part of it, space-separated, a run written
//!   `first-last`: `120-131 133`, as a packet of only PSI or null TS packets in between
//!   carries none of it);
//! - packet trace: `packet,time_ns,size_bytes` (the sender's: when each left; a receiver's: when
//!   each arrived, a duplicate on a line of its own).
//!
//! Evalvid's (whitespace-separated, times in seconds):
//! - `st` (mp4trace's sender trace): `frame type size packets time`, packets numbered in frame
//!   order from 0;
//! - `sd` and `rd` (tcpdump-derived dumps of the sender and the receiver): `time id N udp size`.
//!
//! Readers are bounded: a line longer than [`MAX_LINE`] is an error, and every error names the
//! line.

use crate::playout::{FrameType, SentFrame};
use std::io::{BufRead, Write};

/// The longest line a trace may have (a frame's packet list included).
pub const MAX_LINE: usize = 16 << 10;

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A line is malformed: a field missing or unparsable, a bad packet run, or a line
    /// longer than [`MAX_LINE`].
    #[error("line {line}: {what}")]
    Line {
        /// The offending line, numbered from 1.
        line: usize,
        /// What is wrong with it.
        what: String,
    },
    /// Reading the input failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A packet as a trace records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketRecord {
    /// The packet's id, as the frame trace's packet lists name it (Evalvid's `id N`).
    pub packet: u64,
    /// When it left the sender or reached the receiver, ns (on the run's clock, or Unix
    /// time in a receiver's `arrival_unix_ns` trace).
    pub time_ns: u64,
    /// Its size, bytes, as the trace gives it.
    pub size_bytes: u32,
}

/// Each line of `input` (without its end), numbered from 1, bounded.
fn lines(input: impl BufRead) -> impl Iterator<Item = Result<(usize, String), TraceError>> {
    let mut input = input;
    let mut n = 0;
    std::iter::from_fn(move || {
        let mut buf = Vec::new();
        n += 1;
        let mut limited = std::io::Read::take(&mut input, MAX_LINE as u64 + 1);
        match limited.read_until(b'\n', &mut buf) {
            Ok(0) => None,
            Ok(_) if buf.len() > MAX_LINE => Some(Err(TraceError::Line {
                line: n,
                what: format!("longer than {MAX_LINE} bytes"),
            })),
            Ok(_) => {
                let s = String::from_utf8_lossy(&buf).trim_end().to_string();
                Some(Ok((n, s)))
            }
            Err(e) => Some(Err(e.into())),
        }
    })
}

fn field<T: std::str::FromStr>(v: Option<&str>, line: usize, name: &str) -> Result<T, TraceError> {
    v.and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| TraceError::Line {
            line,
            what: format!("no valid {name}"),
        })
}

/// Seconds with a decimal fraction, as text, to ns exactly (an f64 loses ns on epoch times).
fn seconds_to_ns(text: Option<&str>, line: usize) -> Result<u64, TraceError> {
    let bad = || TraceError::Line {
        line,
        what: format!("'{}' is not a time in seconds", text.unwrap_or("")),
    };
    let t = text.ok_or_else(bad)?.trim();
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let secs: u64 = int.parse().map_err(|_| bad())?;
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().map_err(|_| bad())? * 10u64.pow(9 - frac.len() as u32)
    };
    secs.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(frac_ns))
        .ok_or_else(bad)
}

/// ns as seconds with 6 decimals (Evalvid's and tcpdump's microseconds).
fn ns_to_seconds(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000)
}

/// Writes Metronome's frame trace.
pub fn write_frames(out: &mut impl Write, frames: &[SentFrame]) -> std::io::Result<()> {
    writeln!(out, "frame,type,size_bytes,packets,send_ns")?;
    for (i, f) in frames.iter().enumerate() {
        writeln!(
            out,
            "{i},{},{},{},{}",
            f.kind.letter(),
            f.size_bytes,
            runs(&f.packets),
            f.send_ns
        )?;
    }
    Ok(())
}

/// Packet ids as runs: `3-7 9 11-12`.
fn runs(ids: &[u64]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&if j > i {
            format!("{}-{}", ids[i], ids[j])
        } else {
            ids[i].to_string()
        });
        i = j + 1;
    }
    out
}

/// The most packets one frame may have in a trace.
const MAX_FRAME_PACKETS: u64 = 1_000_000;

fn parse_runs(text: Option<&str>, line: usize) -> Result<Vec<u64>, TraceError> {
    let bad = |what: String| TraceError::Line { line, what };
    let mut ids = Vec::new();
    for run in text.unwrap_or("").split_whitespace() {
        let (a, b) = run.split_once('-').unwrap_or((run, run));
        let (a, b): (u64, u64) = match (a.parse(), b.parse()) {
            (Ok(a), Ok(b)) if a <= b => (a, b),
            _ => {
                return Err(bad(format!(
                    "'{run}' is not a packet id or a run first-last"
                )))
            }
        };
        if ids.len() as u64 + (b - a) >= MAX_FRAME_PACKETS {
            return Err(bad(format!(
                "more than {MAX_FRAME_PACKETS} packets in one frame"
            )));
        }
        ids.extend(a..=b);
    }
    Ok(ids)
}

/// Reads Metronome's frame trace.
pub fn read_frames(input: impl BufRead) -> Result<Vec<SentFrame>, TraceError> {
    let mut frames = Vec::new();
    for l in lines(input) {
        let (n, line) = l?;
        if n == 1 || line.is_empty() {
            continue; // the header
        }
        let mut f = line.split(',');
        let _frame: u64 = field(f.next(), n, "frame")?;
        let kind: String = field(f.next(), n, "type")?;
        let size_bytes = field(f.next(), n, "size_bytes")?;
        let packets = parse_runs(f.next(), n)?;
        frames.push(SentFrame {
            kind: FrameType::from_letter(kind.chars().next().unwrap_or('H')),
            size_bytes,
            packets,
            send_ns: field(f.next(), n, "send_ns")?,
        });
    }
    Ok(frames)
}

/// Writes Metronome's packet trace.
pub fn write_packets(out: &mut impl Write, packets: &[PacketRecord]) -> std::io::Result<()> {
    writeln!(out, "packet,time_ns,size_bytes")?;
    for p in packets {
        writeln!(out, "{},{},{}", p.packet, p.time_ns, p.size_bytes)?;
    }
    Ok(())
}

/// Reads Metronome's packet trace.
pub fn read_packets(input: impl BufRead) -> Result<Vec<PacketRecord>, TraceError> {
    packets_from(lines(input))
}

type Lines = Result<(usize, String), TraceError>;

fn packets_from(lines: impl Iterator<Item = Lines>) -> Result<Vec<PacketRecord>, TraceError> {
    let mut out = Vec::new();
    for l in lines {
        let (n, line) = l?;
        if n == 1 || line.is_empty() {
            continue;
        }
        let mut f = line.split(',');
        out.push(PacketRecord {
            packet: field(f.next(), n, "packet")?,
            time_ns: field(f.next(), n, "time_ns")?,
            size_bytes: field(f.next(), n, "size_bytes")?,
        });
    }
    Ok(out)
}

/// Writes Evalvid's `st`: `frame type size packets time_s`.
pub fn write_st(out: &mut impl Write, frames: &[SentFrame]) -> std::io::Result<()> {
    for (i, f) in frames.iter().enumerate() {
        writeln!(
            out,
            "{i}\t{}\t{}\t{}\t{}",
            f.kind.letter(),
            f.size_bytes,
            f.packets.len(),
            ns_to_seconds(f.send_ns)
        )?;
    }
    Ok(())
}

/// Reads Evalvid's `st`; packets are numbered in frame order from 0, as Evalvid numbers them.
pub fn read_st(input: impl BufRead) -> Result<Vec<SentFrame>, TraceError> {
    let mut frames = Vec::new();
    let mut next = 0u64;
    for l in lines(input) {
        let (n, line) = l?;
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut f = line.split_whitespace();
        let _frame: u64 = field(f.next(), n, "frame number")?;
        let kind: String = field(f.next(), n, "frame type")?;
        let size_bytes = field(f.next(), n, "frame size")?;
        let count: u64 = field(f.next(), n, "number of packets")?;
        if count > 1_000_000 {
            return Err(TraceError::Line {
                line: n,
                what: format!("{count} packets in one frame"),
            });
        }
        let send_ns = seconds_to_ns(f.next(), n)?;
        frames.push(SentFrame {
            kind: FrameType::from_letter(kind.chars().next().unwrap_or('H')),
            size_bytes,
            packets: (next..next + count).collect(),
            send_ns,
        });
        next += count;
    }
    Ok(frames)
}

/// Writes Evalvid's `sd` or `rd`: `time_s id N udp size`.
pub fn write_dump(out: &mut impl Write, packets: &[PacketRecord]) -> std::io::Result<()> {
    for p in packets {
        writeln!(
            out,
            "{} id {} udp {}",
            ns_to_seconds(p.time_ns),
            p.packet,
            p.size_bytes
        )?;
    }
    Ok(())
}

/// Reads Evalvid's `sd` or `rd`.
pub fn read_dump(input: impl BufRead) -> Result<Vec<PacketRecord>, TraceError> {
    dump_from(lines(input))
}

fn dump_from(lines: impl Iterator<Item = Lines>) -> Result<Vec<PacketRecord>, TraceError> {
    let mut out = Vec::new();
    for l in lines {
        let (n, line) = l?;
        if line.trim().is_empty() {
            continue;
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 5 || w[1] != "id" || w[3] != "udp" {
            return Err(TraceError::Line {
                line: n,
                what: "expected 'TIME id N udp SIZE', as Evalvid's dumps have".into(),
            });
        }
        out.push(PacketRecord {
            time_ns: seconds_to_ns(Some(w[0]), n)?,
            packet: field(Some(w[2]), n, "packet id")?,
            size_bytes: field(Some(w[4]), n, "size")?,
        });
    }
    Ok(out)
}

/// Reads what a receiver got, whichever of these it is (told by its first line): Metronome's
/// packet trace (`packet,time_ns,…`); `metronome recv --trace`'s CSV (the packet is its
/// `ext_seq`, its time `arrival_unix_ns`, or `arrival_ns` in a trace without it; dropped
/// datagrams are skipped); or Evalvid's `rd` dump.
pub fn read_received(input: impl BufRead) -> Result<Vec<PacketRecord>, TraceError> {
    let mut it = lines(input);
    let Some(first) = it.next() else {
        return Ok(Vec::new());
    };
    let (n, header) = first?;
    if header.starts_with("packet,") {
        return packets_from(std::iter::once(Ok((n, header))).chain(it));
    }
    if header.starts_with("arrival_ns,") {
        let cols: Vec<&str> = header.split(',').collect();
        let at = |name: &str| cols.iter().position(|c| *c == name);
        let missing = |name: &str| TraceError::Line {
            line: 1,
            what: format!("no {name} column: is this metronome recv's --trace?"),
        };
        let seq = at("ext_seq").ok_or_else(|| missing("ext_seq"))?;
        let size = at("size").ok_or_else(|| missing("size"))?;
        let time = at("arrival_unix_ns")
            .or(at("arrival_ns"))
            .ok_or_else(|| missing("arrival_ns"))?;
        let mut out = Vec::new();
        for l in it {
            let (n, line) = l?;
            let f: Vec<&str> = line.split(',').collect();
            // A dropped datagram has no sequence number.
            if f.get(seq).is_none_or(|v| v.is_empty()) {
                continue;
            }
            out.push(PacketRecord {
                packet: field(f.get(seq).copied(), n, "ext_seq")?,
                time_ns: field(f.get(time).copied(), n, "arrival time")?,
                size_bytes: field(f.get(size).copied(), n, "size")?,
            });
        }
        return Ok(out);
    }
    dump_from(std::iter::once(Ok((n, header))).chain(it))
}

/// The same stream as Evalvid sees one: every packet carries part of one frame, numbered in
/// frame order from 0, as its `st`, `sd` and `rd` number them. A packet that carries the end
/// of one frame and the start of the next becomes one Evalvid packet in each (arriving
/// together); packets that carry no frame are left out. Returns the frames and the received
/// packets renumbered.
pub fn to_evalvid(
    frames: &[SentFrame],
    received: &[PacketRecord],
) -> (Vec<SentFrame>, Vec<PacketRecord>) {
    let mut ids: std::collections::HashMap<u64, Vec<u64>> = std::collections::HashMap::new();
    let mut next = 0u64;
    let frames: Vec<SentFrame> = frames
        .iter()
        .map(|f| {
            let packets: Vec<u64> = f
                .packets
                .iter()
                .map(|p| {
                    ids.entry(*p).or_default().push(next);
                    next += 1;
                    next - 1
                })
                .collect();
            SentFrame {
                packets,
                ..f.clone()
            }
        })
        .collect();
    let mut packets: Vec<PacketRecord> = received
        .iter()
        .flat_map(|r| {
            ids.get(&r.packet)
                .into_iter()
                .flatten()
                .map(|id| PacketRecord { packet: *id, ..*r })
        })
        .collect();
    packets.sort_by_key(|p| (p.time_ns, p.packet));
    (frames, packets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<SentFrame> {
        vec![
            SentFrame {
                kind: FrameType::I,
                size_bytes: 6384,
                packets: vec![0, 1, 2, 3, 4],
                send_ns: 0,
            },
            SentFrame {
                kind: FrameType::P,
                size_bytes: 1100,
                packets: vec![5],
                send_ns: 40_000_000,
            },
        ]
    }

    #[test]
    fn received_traces_are_read_whatever_wrote_them_and_renumbered_for_evalvid() {
        let recv = "arrival_ns,ssrc,seq,ext_seq,rtp_ts,size,verdict,transit_ticks,jitter_ticks,interarrival_ns,one_way_delay_ns,arrival_unix_ns\n\
                    5,0000abcd,10,65546,1,1344,in-order,0,0.0,,,1000\n\
                    6,,,,,17,dropped: not-rtp,,,,,1001\n\
                    7,0000abcd,12,65548,1,1344,in-order,0,0.0,,,1002\n";
        let got = read_received(recv.as_bytes()).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[1].packet, got[1].time_ns, got[1].size_bytes),
            (65548, 1002, 1344)
        );
        let rd = "1.000000 id 3 udp 100\n";
        assert_eq!(read_received(rd.as_bytes()).unwrap()[0].packet, 3);
        let csv = "packet,time_ns,size_bytes\n4,9,10\n";
        assert_eq!(read_received(csv.as_bytes()).unwrap()[0].time_ns, 9);

        // Frame 0 in packets 65546-65547, frame 1 in 65547-65548 (sharing one).
        let frames = vec![
            SentFrame {
                kind: FrameType::I,
                size_bytes: 2000,
                packets: vec![65546, 65547],
                send_ns: 0,
            },
            SentFrame {
                kind: FrameType::P,
                size_bytes: 900,
                packets: vec![65547, 65548],
                send_ns: 40,
            },
        ];
        let (ev, rx) = to_evalvid(&frames, &got);
        assert_eq!(ev[0].packets, vec![0, 1]);
        assert_eq!(ev[1].packets, vec![2, 3]);
        // 65547 was lost: Evalvid's 1 and 2 are missing, so both frames are lost there too.
        let ids: Vec<u64> = rx.iter().map(|p| p.packet).collect();
        assert_eq!(ids, vec![0, 3]);
    }

    #[test]
    fn a_frames_packets_need_not_be_contiguous() {
        let f = vec![SentFrame {
            kind: FrameType::P,
            size_bytes: 3000,
            packets: vec![120, 121, 122, 124, 126, 127],
            send_ns: 7,
        }];
        let mut buf = Vec::new();
        write_frames(&mut buf, &f).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert_eq!(text.lines().nth(1), Some("0,P,3000,120-122 124 126-127,7"));
        assert_eq!(read_frames(&buf[..]).unwrap(), f);
        for bad in ["0,P,1,5-3,0", "0,P,1,x,0", "0,P,1,0-99999999,0"] {
            let e = read_frames(format!("h\n{bad}\n").as_bytes()).unwrap_err();
            assert!(e.to_string().starts_with("line 2:"), "{e}");
        }
    }

    #[test]
    fn both_formats_round_trip() {
        let mut buf = Vec::new();
        write_frames(&mut buf, &frames()).unwrap();
        assert_eq!(read_frames(&buf[..]).unwrap(), frames());
        let mut st = Vec::new();
        write_st(&mut st, &frames()).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&st).lines().next(),
            Some("0\tI\t6384\t5\t0.000000")
        );
        assert_eq!(read_st(&st[..]).unwrap(), frames());
        let pk = vec![
            PacketRecord {
                packet: 0,
                time_ns: 1_064_922_471_232_123_000,
                size_bytes: 1052,
            },
            PacketRecord {
                packet: 0,
                time_ns: 1_064_922_471_232_200_000,
                size_bytes: 1052,
            },
        ];
        let mut csv = Vec::new();
        write_packets(&mut csv, &pk).unwrap();
        assert_eq!(read_packets(&csv[..]).unwrap(), pk);
        let mut rd = Vec::new();
        write_dump(&mut rd, &pk).unwrap();
        // Seconds with 6 decimals: microseconds survive, as in tcpdump's dumps.
        assert_eq!(read_dump(&rd[..]).unwrap(), pk);
    }

    #[test]
    fn evalvids_own_lines_read_and_bad_lines_say_where() {
        let rd = b"1064922471.232123 id 1 udp 1052\n1064922471.272210 id 2 udp 1052\n";
        let p = read_dump(&rd[..]).unwrap();
        assert_eq!((p[1].packet, p[1].size_bytes), (2, 1052));
        let e = read_dump(&b"1.0 id 1 udp 10\n1.1 xx 2 udp 10\n"[..]).unwrap_err();
        assert!(e.to_string().starts_with("line 2:"), "{e}");
        let e = read_st(&b"0 I 100 2 0.0\n1 P 100 x 0.04\n"[..]).unwrap_err();
        assert!(
            e.to_string().contains("line 2") && e.to_string().contains("packets"),
            "{e}"
        );
        let long = vec![b'1'; MAX_LINE + 10];
        assert!(read_dump(&long[..]).is_err());
    }
}
