use super::*;
use crate::repair::fec_encoder::{FecConfig, FecEncoder};
use metronome_config::repair::FecShape;
use metronome_wire::fec2022::Direction;
use std::collections::BTreeSet;

/// Media packet `i`: its own length, timestamp, marker and bytes.
fn media(i: u16) -> Vec<u8> {
    let len = 100 + usize::from(i % 7) * 13;
    let mut p = vec![0u8; 12 + len];
    p[0] = 0x80;
    p[1] = 33 | if i % 5 == 4 { 0x80 } else { 0 };
    p[2..4].copy_from_slice(&i.to_be_bytes());
    p[4..8].copy_from_slice(&(u32::from(i) * 3000 + 7).to_be_bytes());
    p[8..12].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    for (k, b) in p[12..].iter_mut().enumerate() {
        *b = (k as u16 ^ i.wrapping_mul(31)) as u8;
    }
    p
}

/// Sends `n` packets from `first` through an encoder of `shape`; the decoder gets every FEC
/// packet and the media packets `lost` does not name. Returns the decoder and what it rebuilt.
fn run(shape: FecShape, first: u16, n: u16, lost: &BTreeSet<u16>) -> (FecDecoder, Vec<Vec<u8>>) {
    run_late(shape, first, n, lost, 0)
}

/// As [`run`], each media packet arriving `late` packets after its FEC would have.
fn run_late(
    shape: FecShape,
    first: u16,
    n: u16,
    lost: &BTreeSet<u16>,
    late: usize,
) -> (FecDecoder, Vec<Vec<u8>>) {
    let mut queue = std::collections::VecDeque::new();
    let mut enc = FecEncoder::new(FecConfig::new(shape), SeqNo(1000));
    let mut dec = FecDecoder::new(1500);
    let mut buf = vec![0u8; 2000];
    let mut got = Vec::new();
    let mut out = Vec::new();
    for k in 0..n {
        let seq = first.wrapping_add(k);
        let p = media(seq);
        enc.push(&p);
        if !lost.contains(&seq) {
            queue.push_back(p);
        }
        while queue.len() > late {
            dec.on_media(&queue.pop_front().unwrap());
        }
        while let Some((_, len)) = enc.poll(&mut buf) {
            dec.on_fec(&buf[..len]);
        }
        while dec.poll_recovered(&mut out) {
            got.push(out.clone());
        }
    }
    (dec, got)
}

/// What an ideal 2-D XOR decoder rebuilds of `lost` (by index in the matrix, whole matrices
/// of L × D from `first` up to `n`): peel every row and column missing exactly one.
fn peel(shape: FecShape, first: u16, n: u16, lost: &BTreeSet<u16>) -> BTreeSet<u16> {
    let (l, d) = (u16::from(shape.columns), u16::from(shape.rows));
    let mut missing: BTreeSet<u16> = lost.clone();
    let matrices = n / (l * d);
    let mut changed = true;
    while changed {
        changed = false;
        for m in 0..matrices {
            let base = first.wrapping_add(m * l * d);
            let groups = (0..d)
                .map(|r| {
                    (0..l)
                        .map(|c| base.wrapping_add(r * l + c))
                        .collect::<Vec<_>>()
                })
                .chain((0..l).map(|c| (0..d).map(|r| base.wrapping_add(r * l + c)).collect()));
            for g in groups {
                let gone: Vec<u16> = g.into_iter().filter(|s| missing.contains(s)).collect();
                if gone.len() == 1 {
                    missing.remove(&gone[0]);
                    changed = true;
                }
            }
        }
    }
    lost.difference(&missing).copied().collect()
}

#[test]
fn one_loss_a_row_comes_back_byte_for_byte() {
    let shape = FecShape {
        columns: 5,
        rows: 4,
    };
    let want: BTreeSet<u16> = (0..400u16)
        .filter(|i| i % 5 == i / 5 % 5)
        .map(|i| 65_000u16.wrapping_add(i))
        .collect();
    let (dec, got) = run(shape, 65_000, 400, &want);
    let back: BTreeSet<u16> = got
        .iter()
        .map(|p| u16::from_be_bytes([p[2], p[3]]))
        .collect();
    assert_eq!(back, want);
    for p in &got {
        assert_eq!(p, &media(u16::from_be_bytes([p[2], p[3]])));
    }
    assert_eq!(dec.counters().recovered, want.len() as u64);
    assert_eq!(dec.counters().malformed, 0);
}

#[test]
fn a_whole_row_lost_comes_back_through_its_columns() {
    let shape = FecShape {
        columns: 10,
        rows: 10,
    };
    // Row 3 of the second matrix: ten consecutive packets, a burst a row cannot repair.
    let lost: BTreeSet<u16> = (130..140).collect();
    let (_, got) = run(shape, 0, 400, &lost);
    assert_eq!(got.len(), 10);
    for p in &got {
        assert_eq!(p, &media(u16::from_be_bytes([p[2], p[3]])));
    }
}

#[test]
fn random_losses_come_back_as_an_ideal_peeling_decoder_says() {
    // Rows and columns rebuild each other in turn, whatever order FEC and media arrive in.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for (shape, rate, late) in [
        (
            FecShape {
                columns: 5,
                rows: 5,
            },
            8,
            0,
        ),
        (
            FecShape {
                columns: 10,
                rows: 10,
            },
            5,
            0,
        ),
        (
            FecShape {
                columns: 4,
                rows: 8,
            },
            15,
            9,
        ),
        (
            FecShape {
                columns: 20,
                rows: 5,
            },
            3,
            30,
        ),
    ] {
        let n = 20 * u16::from(shape.columns) * u16::from(shape.rows);
        let first = 65_300u16;
        let lost: BTreeSet<u16> = (0..n)
            .filter(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % 100 < rate
            })
            .collect();
        let want = peel(shape, 0, n, &lost);
        let abs: BTreeSet<u16> = lost.iter().map(|i| first.wrapping_add(*i)).collect();
        let (dec, got) = run_late(shape, first, n, &abs, late);
        // A packet still on its way when its row or column is otherwise complete is rebuilt
        // too (the original then comes as a duplicate): only the lost ones are compared.
        let back: BTreeSet<u16> = got
            .iter()
            .map(|p| u16::from_be_bytes([p[2], p[3]]).wrapping_sub(first))
            .filter(|i| lost.contains(i))
            .collect();
        // The last matrix's columns are still held by the encoder when the stream stops.
        let last = n - u16::from(shape.columns) * u16::from(shape.rows);
        let settled =
            |s: &BTreeSet<u16>| s.iter().filter(|i| **i < last).copied().collect::<Vec<_>>();
        assert_eq!(settled(&back), settled(&want), "{shape} at {rate} %");
        assert!(!want.is_empty() && dec.counters().malformed == 0);
        for p in &got {
            assert_eq!(p, &media(u16::from_be_bytes([p[2], p[3]])));
        }
    }
}

#[test]
fn the_encoder_spreads_columns_over_the_next_matrix_and_restarts_on_a_gap() {
    let shape = FecShape {
        columns: 4,
        rows: 3,
    };
    let mut enc = FecEncoder::new(FecConfig::new(shape), SeqNo(0));
    let mut buf = vec![0u8; 2000];
    let mut after = Vec::new();
    for i in 0..36u16 {
        enc.push(&media(i));
        while let Some((dir, n)) = enc.poll(&mut buf) {
            let v = fec2022::parse(&buf[..n]).unwrap();
            after.push((i, dir, v.header.sn_base, v.header.offset, v.header.na));
        }
    }
    let rows: Vec<_> = after.iter().filter(|a| a.1 == Direction::Row).collect();
    assert_eq!(rows.len(), 9);
    assert!(rows
        .iter()
        .all(|r| r.0 % 4 == 3 && r.2.get() == r.0 - 3 && r.3 == 1 && r.4 == 4));
    let cols: Vec<_> = after.iter().filter(|a| a.1 == Direction::Column).collect();
    // The first matrix (0..12) ends at packet 11; its columns go with packets 12, 15, 18, 21.
    assert_eq!(
        cols.iter()
            .take(4)
            .map(|c| (c.0, c.2.get(), c.3, c.4))
            .collect::<Vec<_>>(),
        vec![(12, 0, 4, 3), (15, 1, 4, 3), (18, 2, 4, 3), (21, 3, 4, 3)]
    );
    assert_eq!(enc.counters().rows, 9);
    assert_eq!(enc.counters().columns, 8);
    // A gap in the numbers starts the matrix again: the next row starts at the new packet.
    enc.push(&media(100));
    assert_eq!(enc.counters().restarts, 1);
    for i in 101..104 {
        enc.push(&media(i));
    }
    let mut first_row = None;
    while let Some((dir, n)) = enc.poll(&mut buf) {
        if dir == Direction::Row {
            first_row = Some(fec2022::parse(&buf[..n]).unwrap().header.sn_base);
        }
    }
    assert_eq!(first_row, Some(SeqNo(100)));
}

#[test]
fn hostile_fec_is_counted_and_memory_stays_bounded() {
    let mut dec = FecDecoder::new(1500);
    for i in 0..50u16 {
        dec.on_media(&media(i));
    }
    let mut x = 1u64;
    let mut buf = [0u8; 1600];
    for _ in 0..20_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = (x >> 40) as usize % buf.len();
        for (k, b) in buf[..n].iter_mut().enumerate() {
            *b = (x >> (k % 56)) as u8;
        }
        if n > 28 {
            buf[0] = 0x80;
            buf[16] |= 0x80;
            buf[24] &= 0x47;
        }
        dec.on_fec(&buf[..n]);
    }
    // Claims of wide matrices: 255 columns by 255 rows is refused, not kept.
    let mut enc = FecEncoder::new(
        FecConfig::new(FecShape {
            columns: 5,
            rows: 5,
        }),
        SeqNo(0),
    );
    for i in 0..25u16 {
        enc.push(&media(i));
    }
    let n = enc.poll(&mut buf).unwrap().1;
    buf[25] = 255;
    buf[26] = 255;
    let before = dec.counters().malformed;
    dec.on_fec(&buf[..n]);
    // Within the window, but beyond SMPTE 2022-1's limits: 21 a column, 105 in all.
    buf[25] = 5;
    buf[26] = 21;
    dec.on_fec(&buf[..n]);
    assert_eq!(dec.counters().malformed, before + 2);
    let c = dec.counters();
    assert_eq!(c.packets, 20_002);
    assert!(dec.pending.len() <= PENDING && dec.recovered.len() <= RECOVERED);
    assert!(c.malformed > 0, "{c:?}");
    let mut out = Vec::new();
    while dec.poll_recovered(&mut out) {
        assert!(out.len() <= 1500);
    }
}
