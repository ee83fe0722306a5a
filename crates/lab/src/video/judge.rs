//! What each viewer of a video flow saw: its frames by the play-out rules, its pictures
//! decoded and compared with the source's (once per distinct view), its figures.

use super::series::series;
use super::{
    frames_csv, pictures_of, rungs_csv, FrameMap, FrameRow, FrameSeries, SentSeries, FRAMES_HEADER,
};
use metronome_config::scenario::{FlowDecl, FlowKind, VideoDecl};
use metronome_link::report::{FlowReport, FrameFigures, PictureFigures};
use metronome_media::decode::VideoDecoder;
use metronome_media::Frame;
use metronome_quality::compare::FrameQuality;
use metronome_quality::playout::{reconstruct, FrameType, Playout, SentFrame};
use metronome_quality::trace::PacketRecord;
use metronome_quality::{compare, mos, psnr, viewer, Chroma, Picture};
use metronome_time::Micros;
use metronome_time::Timestamp;
use std::collections::HashMap;
use std::rc::Rc;

/// One receiver's frames: the summary, every frame's row, and the series for plots.
pub struct Viewed {
    pub figures: FrameFigures,
    pub rows: Vec<FrameRow>,
    pub series: FrameSeries,
}

/// What a video flow leaves in its point's directory, and its series for the report.
#[derive(Debug, Default)]
pub struct FlowVideo {
    pub series: Vec<FrameSeries>,
    /// The flow as sent (frame sizes, rungs), for the report's plots.
    pub sent: Option<SentSeries>,
    /// `(file name, contents)`: `FLOW.frames.csv` (every receiver's frames, [`FRAMES_HEADER`]),
    /// `FLOW.sent.csv` (the sender's frame trace) and `FLOW.RECEIVER.packets.csv` (what each
    /// receiver got), in `metronome_quality::trace`'s formats; for a ladder's video
    /// `FLOW.rungs.csv` (each GOP's rung, [`super::RUNGS_HEADER`]).
    pub files: Vec<(String, Vec<u8>)>,
    /// What went wrong with the flow's video, in words.
    pub warnings: Vec<String>,
}

/// The play-out of a flow's viewers.
pub fn playout_of(f: &FlowDecl) -> Playout {
    match f.kind {
        FlowKind::Rtp {
            playout_deadline, ..
        } => Playout {
            deadline_ns: playout_deadline.map(|d| d.as_nanos() as u64),
            ..Playout::default()
        },
        _ => Playout::default(),
    }
}

/// Every receiver of video flow `f` (its report's receivers, in order, and their packets'
/// arrivals): frame figures into the report, series and files for the point.
pub fn view_flow(
    f: &FlowDecl,
    report: &mut FlowReport,
    map: &FrameMap,
    arrivals: &[&[Timestamp]],
) -> FlowVideo {
    let playout = playout_of(f);
    let mut out = FlowVideo::default();
    if let Some(e) = &map.source_error {
        out.warnings.push(format!("flow '{}': {e}", f.name));
    }
    let mut rows_csv = String::from(FRAMES_HEADER);
    rows_csv.push('\n');
    let sent = sent_frames(map);
    let mut trace = Vec::new();
    let _ = metronome_quality::trace::write_frames(&mut trace, &sent);
    out.files.push((format!("{}.sent.csv", f.name), trace));
    let fps = map.picture.map_or(25, |v| v.fps).max(1);
    let gop = match f.kind {
        FlowKind::Rtp { gop, .. } => gop.unwrap_or(fps),
        _ => fps,
    };
    if !map.rungs.is_empty() {
        let csv = rungs_csv(map, gop, fps);
        out.files
            .push((format!("{}.rungs.csv", f.name), csv.into_bytes()));
    }
    let rungs: Vec<(u32, u32)> = map.rungs.iter().map(|(g, d)| (*g, d.quantizer)).collect();
    let gop_ns = u64::from(gop) * 1_000_000_000 / u64::from(fps);
    out.sent = Some(SentSeries::of(
        &f.name,
        &sent,
        &rungs,
        map.epoch.as_nanos(),
        gop_ns,
    ));
    let mut cache = PictureCache::default();
    for (rx, got) in report.receivers.iter_mut().zip(arrivals) {
        let v = view(map, got, playout, &mut cache);
        rx.frames = Some(v.figures);
        frames_csv(&mut rows_csv, &f.name, &rx.node, &v.rows);
        out.series.push(FrameSeries {
            flow: f.name.clone(),
            receiver: rx.node.clone(),
            ..v.series
        });
        let packets: Vec<PacketRecord> = got
            .iter()
            .enumerate()
            .filter(|(_, t)| **t != Timestamp::MAX)
            .map(|(k, t)| PacketRecord {
                packet: k as u64,
                time_ns: t.as_nanos(),
                size_bytes: map.sent.payload_bytes.get(k).copied().unwrap_or(0),
            })
            .collect();
        let mut trace = Vec::new();
        let _ = metronome_quality::trace::write_packets(&mut trace, &packets);
        out.files
            .push((format!("{}.{}.packets.csv", f.name, rx.node), trace));
    }
    out.files
        .push((format!("{}.frames.csv", f.name), rows_csv.into_bytes()));
    out
}

/// The frames as sent: type, size, packets, send time on the run's clock.
fn sent_frames(map: &FrameMap) -> Vec<SentFrame> {
    map.sent.trace(map.epoch.as_nanos(), 0)
}

/// What one receiver saw, from its packets' arrival times (by packet number,
/// `Timestamp::MAX` or missing: lost), played out with `playout`.
pub fn view(
    map: &FrameMap,
    arrivals: &[Timestamp],
    playout: Playout,
    cache: &mut PictureCache,
) -> Viewed {
    let n = map.sent.frame_due.len();
    let sent = sent_frames(map);
    let got: Vec<(u64, u64)> = arrivals
        .iter()
        .enumerate()
        .filter(|(_, t)| **t != Timestamp::MAX)
        .map(|(k, t)| (k as u64, t.as_nanos()))
        .collect();
    let r = reconstruct(&sent, &got, playout);
    let mut rows: Vec<FrameRow> = r
        .frames
        .iter()
        .enumerate()
        .map(|(k, f)| FrameRow {
            frame: k as u32,
            kind: f.kind,
            shown: r.slots.get(k).copied().flatten(),
            arrived: f.arrived,
            delay_ns: f.delay_ns,
            cumulative_jitter_ns: f.cumulative_jitter_ns,
            missed_deadline: f.missed_deadline,
            psnr_y_db: None,
            psnr_yuv_db: None,
            ssim: None,
            mos: None,
        })
        .collect();
    let delay = r.shown_delay();
    let by_type = |t: FrameType| r.loss_by_type[t as usize].lost;
    let mut figures = FrameFigures {
        frames: n as u64,
        lost: r.frames_lost,
        lost_percent: if n == 0 {
            0.0
        } else {
            100.0 * r.frames_lost as f64 / n as f64
        },
        lost_i: by_type(FrameType::I),
        lost_p: by_type(FrameType::P),
        missed_deadline: r.missed_deadline,
        mean_delay_us: Micros::from_nanos_u64(delay.mean_ns),
        p99_delay_us: Micros::from_nanos_u64(delay.p99_ns),
        max_delay_us: Micros::from_nanos_u64(delay.max_ns),
        max_cumulative_jitter_us: Micros::from_nanos(r.max_cumulative_jitter_ns()),
        first_delay_us: Micros::from_nanos_u64(r.first_delay_ns()),
        pictures: None,
    };
    if let Some(v) = map.picture.filter(|_| !map.sent.coded.is_empty()) {
        if let Some((mut p, slots)) = pictures_cached(map, v, &sent, &r, playout, cache) {
            // MIV (Evalvid's): against the MOS of the video as sent, every frame shown.
            let every: Vec<(u64, u64)> = sent
                .iter()
                .flat_map(|f| f.packets.iter().map(|k| (*k, f.send_ns)))
                .collect();
            let lossless = reconstruct(&sent, &every, Playout::default());
            let as_sent = pictures_cached(map, v, &sent, &lossless, Playout::default(), cache);
            if let Some((_, reference)) = as_sent {
                let mos = |s: &SlotFigures| s.iter().map(|q| q.3).collect::<Vec<u8>>();
                let miv = mos::miv(&mos(&slots), &mos(&reference), mos::MIV_WINDOW);
                p.miv_max_percent = miv.iter().copied().fold(0.0, f64::max);
                p.miv_mean_percent = miv.iter().sum::<f64>() / miv.len().max(1) as f64;
            }
            figures.pictures = Some(p);
            for (row, q) in rows.iter_mut().zip(slots.iter()) {
                row.psnr_y_db = Some(q.0);
                row.psnr_yuv_db = Some(q.1);
                row.ssim = Some(q.2);
                row.mos = Some(q.3);
            }
        }
    }
    let series = series(map, &rows);
    Viewed {
        figures,
        rows,
        series,
    }
}

/// Each slot's picture against the source's frame: PSNR of Y and of YUV (dB), SSIM, MOS.
type SlotFigures = Vec<(f64, f64, f64, u8)>;

/// What decides a viewer's pictures: when each frame reached its decoder (the slot it was
/// decoded for), and which frame each slot showed.
type ViewKey = (Vec<Option<usize>>, Vec<Option<u32>>);

/// Receivers whose decoder got the same frames for the same slots, and whose slots showed the
/// same frames, saw the same pictures: they are decoded and judged once (in a crowd behind one
/// bottleneck, most viewers lose the same packets).
///
/// Views that differ still show mostly the same pictures (a lost packet spoils its frame and
/// the frames that refer to it, not the rest): a slot whose picture was judged in an earlier
/// view is not drawn from the source or compared again.
#[derive(Default)]
pub struct PictureCache {
    seen: HashMap<ViewKey, (PictureFigures, Rc<SlotFigures>)>,
    /// Receivers whose pictures came from the cache.
    pub hits: u64,
    /// Each slot's figures by the digest of the picture shown in it.
    slots: HashMap<(usize, u64), FrameQuality>,
    /// Slots whose figures came from `slots`.
    pub slot_hits: u64,
}

/// The pictures receiver `r` saw, from the cache or decoded and compared now.
fn pictures_cached(
    map: &FrameMap,
    v: VideoDecl,
    sent: &[SentFrame],
    r: &metronome_quality::playout::Reconstruction,
    playout: Playout,
    cache: &mut PictureCache,
) -> Option<(PictureFigures, Rc<SlotFigures>)> {
    let order = map.order();
    let key = (
        viewer::decoder_input(sent, r, playout, &order),
        r.slots.clone(),
    );
    if let Some(hit) = cache.seen.get(&key) {
        cache.hits += 1;
        return Some(hit.clone());
    }
    let got = pictures(map, v, sent, r, playout, cache)?;
    let got = (got.0, Rc::new(got.1));
    cache.seen.insert(key, got.clone());
    Some(got)
}

/// Decodes what reached the viewer and compares every slot's picture with the source's
/// frame (or takes its figures from `cache`'s slots, by slot and picture). `None` if the
/// decoder cannot be made.
fn pictures(
    map: &FrameMap,
    v: VideoDecl,
    sent: &[SentFrame],
    r: &metronome_quality::playout::Reconstruction,
    playout: Playout,
    cache: &mut PictureCache,
) -> Option<(PictureFigures, SlotFigures)> {
    let mut decoder = VideoDecoder::new(map.codec, None).ok()?;
    let order = map.order();
    let mut source = pictures_of(v, &map.content, r.slots.len() as u64).ok()?;
    let mut frame = Frame::new(v.width, v.height).ok()?;
    let mut failed = false;
    let (w, h) = (v.width as usize, v.height as usize);
    let blank = Picture::black(w, h, Chroma::C420);
    let mut reference = blank.clone();
    let mut totals = psnr::Totals::default();
    let share = psnr::plane_share(&blank);
    let mut slots = Vec::with_capacity(r.slots.len());
    let mut ssim_sum = 0.0;
    let mut wrong_size = 0u64;
    let stats = viewer::play(
        sent,
        r,
        playout,
        &map.sent.coded,
        &order,
        &mut decoder,
        &blank,
        |j, shown| {
            // A picture of another size is nothing like the source: as black.
            let shown = if shown.same_format(&blank) {
                shown
            } else {
                wrong_size += 1;
                &blank
            };
            let key = (j, digest(shown));
            let q = match cache.slots.get(&key) {
                Some(q) => {
                    cache.slot_hits += 1;
                    *q
                }
                None => {
                    if failed || source.picture(j as u64, &mut frame).is_err() {
                        failed = true;
                        return;
                    }
                    frame.copy_to(&mut reference);
                    let q = compare::frame(&reference, shown, j as u64);
                    cache.slots.insert(key, q);
                    q
                }
            };
            totals.add(&q.psnr, share);
            ssim_sum += q.ssim.all;
            slots.push((q.psnr.y_db, q.psnr.yuv_db, q.ssim.all, q.mos));
        },
    );
    if failed {
        // The reference pictures could not be made again: no figures rather than wrong ones.
        return None;
    }
    let mos_all: Vec<u8> = slots.iter().map(|s| s.3).collect();
    let n = mos_all.len().max(1) as f64;
    let mean = totals.mean();
    let figures = PictureFigures {
        psnr_y_db: mean.y_db,
        psnr_yuv_db: mean.yuv_db,
        ssim: ssim_sum / n,
        mos: mos_all.iter().map(|m| f64::from(*m)).sum::<f64>() / n,
        mos_frames: mos::distribution(&mos_all),
        undecodable: stats.undecodable + wrong_size,
        blank_frames: stats.blank_slots,
        // Against the video as sent: filled in by the caller.
        miv_mean_percent: 0.0,
        miv_max_percent: 0.0,
    };
    Some((figures, slots))
}

/// A digest of a picture's size and samples, to know one already judged: four SplitMix lanes
/// over its 8-byte words (not cryptographic; two different pictures of one flow's slot share
/// a digest with odds of about 2^-64).
fn digest(p: &Picture) -> u64 {
    use metronome_time::mix::mix64;
    let mut lanes = [p.width as u64, p.height as u64, p.data.len() as u64, 0];
    let words = p.data.chunks_exact(32);
    let rest = words.remainder();
    for w in words {
        for (k, lane) in lanes.iter_mut().enumerate() {
            let x = u64::from_le_bytes(w[8 * k..8 * k + 8].try_into().expect("8 bytes"));
            *lane = mix64(*lane ^ x);
        }
    }
    for b in rest {
        lanes[3] = mix64(lanes[3] ^ u64::from(*b));
    }
    lanes.iter().fold(0, |h, l| mix64(h ^ l))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::video::test_source;
    use metronome_config::scenario::VideoContent;
    use metronome_media::frames::{FrameNoter, SentFrames};
    use metronome_media::TsSource;
    use std::time::Duration;

    #[test]
    fn a_frame_is_lost_with_any_of_its_packets() {
        let ms = Timestamp::from_millis;
        // Frames 0..3; packets: [0], [0,1], [1], none, [2].
        let due = Duration::from_millis;
        let map = FrameMap {
            sent: SentFrames {
                packets: vec![Some((0, 0)), Some((0, 1)), Some((1, 1)), None, Some((2, 2))],
                frame_due: vec![due(0), due(10), due(20)],
                ..SentFrames::default()
            },
            ..FrameMap::default()
        };
        let frame_figures = |m: &FrameMap, a: &[Timestamp]| {
            view(m, a, Playout::default(), &mut PictureCache::default()).figures
        };
        let all = [ms(5), ms(12), ms(18), ms(19), ms(30)];
        let f = frame_figures(&map, &all);
        assert_eq!((f.frames, f.lost), (3, 0));
        // Frame 0 complete at 12 ms (due 0), frame 1 at 18 (due 10), frame 2 at 30 (due 20).
        assert_eq!(f.mean_delay_us.as_nanos(), (12 + 8 + 10) * 1_000_000 / 3);
        // Cumulative jitter: delays 12, 8, 10 ms never grew past the first frame's.
        assert_eq!(f.max_cumulative_jitter_us.as_nanos(), 0);
        let later = [ms(5), ms(12), ms(18), ms(19), ms(40)];
        // Frame 2 now complete at 40 ms: 20 ms of delay, 8 ms more than frame 0's.
        assert_eq!(
            frame_figures(&map, &later)
                .max_cumulative_jitter_us
                .as_nanos(),
            8_000_000
        );
        let mut some = all;
        some[1] = Timestamp::MAX; // carries frames 0 and 1
        let f = frame_figures(&map, &some);
        assert_eq!(f.lost, 2);
        // A packet with no video lost costs no frame; missing tail arrivals are losses.
        let f = frame_figures(&map, &all[..4]);
        assert_eq!(f.lost, 1);
    }

    #[test]
    fn viewers_who_lost_the_same_packets_are_judged_once_and_alike() {
        // Noted from the real source, seven TS packets to a packet, as the sender makes them.
        let v = VideoDecl {
            width: 160,
            height: 96,
            fps: 30,
        };
        let mut src = test_source(
            v,
            &VideoContent::Pattern,
            1_000_000,
            Duration::from_millis(500),
            None,
        )
        .unwrap();
        let mut map = FrameMap {
            picture: Some(v),
            ..FrameMap::default()
        };
        let mut noter = FrameNoter::default();
        let (mut ts, mut n) = ([0u8; 188], 0);
        while let Some(due) = src.next_packet(&mut ts).unwrap() {
            noter.ts(&mut map.sent, &ts, due);
            n += 1;
            if n % 7 == 0 {
                noter.end_packet(&mut map.sent);
            }
        }
        if n % 7 != 0 {
            noter.end_packet(&mut map.sent);
        }
        noter.finish(&mut map.sent);
        assert_eq!((map.sent.coded.len(), map.sent.frame_due.len()), (15, 15));
        let all: Vec<Timestamp> = (0..map.sent.packets.len())
            .map(|k| Timestamp::from_millis(30 + k as u64))
            .collect();
        // A packet carrying frame 3 is lost.
        let mut lossy = all.clone();
        let k = map
            .sent
            .packets
            .iter()
            .position(|p| matches!(p, Some((a, _)) if *a == 3))
            .unwrap();
        lossy[k] = Timestamp::MAX;
        let mut cache = PictureCache::default();
        let p = Playout::default();
        let a = view(&map, &all, p, &mut cache).figures;
        let b = view(&map, &lossy, p, &mut cache).figures;
        let c = view(&map, &lossy, p, &mut cache).figures;
        // b and c are alike; the video as sent (for MIV) is a's.
        assert_eq!(cache.hits, 4);
        assert_eq!(b, c);
        // b's frames before the loss are a's pictures, judged once; its figures are those
        // of b judged first in a cache of its own (where only the video as sent, judged
        // after it, finds those frames judged).
        assert!(cache.slot_hits >= 3, "{}", cache.slot_hits);
        let mut alone = PictureCache::default();
        assert_eq!(view(&map, &lossy, p, &mut alone).figures, b);
        assert_eq!(alone.slot_hits, 3);
        assert_eq!((a.lost, b.lost_p), (0, b.lost));
        assert!(b.lost >= 1);
        let (qa, qb) = (a.pictures.unwrap(), b.pictures.unwrap());
        assert!(qb.psnr_y_db < qa.psnr_y_db, "{qa:?} {qb:?}");
        assert_eq!((qa.undecodable, qa.blank_frames), (0, 0));
        assert_eq!(qa.miv_max_percent, 0.0);
        assert!(
            qb.miv_max_percent > 0.0 || qb.mos_frames == qa.mos_frames,
            "{qb:?}"
        );
    }
}
