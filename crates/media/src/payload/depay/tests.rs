use super::*;
use crate::h264::nal_units;
use crate::payload::{FramePayloader, PayloaderConfig};
use metronome_time::RtpTime;
use metronome_wire::rtp::RtpView;
use metronome_wire::PayloadType;
use metronome_wire::Ssrc;

/// Every packet of `frames` (each with its RTP timestamp) as the payloader cuts them at
/// `max` bytes: (timestamp, marker, payload).
fn packets(codec: VideoCodec, frames: &[(u32, Vec<u8>)], max: usize) -> Vec<(u32, bool, Vec<u8>)> {
    let mut p = FramePayloader::new(
        codec,
        PayloaderConfig {
            ssrc: Ssrc(7),
            payload_type: PayloadType(96),
            max_payload: max,
            initial_seq: metronome_wire::SeqNo(0),
            send_time: metronome_wire::rtp::SendTimeExt::None,
        },
    );
    let mut out = Vec::new();
    let mut buf = [0u8; 2048];
    for (ts, frame) in frames {
        p.begin(frame, RtpTime(*ts));
        while let Some(o) = p.next(frame, &mut buf).unwrap() {
            let v = RtpView::parse(&buf[..o.len]).unwrap();
            out.push((v.timestamp().get(), v.marker(), v.payload().to_vec()));
        }
    }
    out
}

/// What the depayloader makes of `packets`, skipping those whose index is in `drop` (and
/// saying so before the next one).
fn depay(codec: VideoCodec, packets: &[(u32, bool, Vec<u8>)], drop: &[usize]) -> Vec<DepayFrame> {
    let mut d = FrameDepayloader::new(codec);
    let mut out = Vec::new();
    let mut gap = false;
    for (i, (ts, marker, payload)) in packets.iter().enumerate() {
        if drop.contains(&i) {
            gap = true;
            continue;
        }
        if std::mem::take(&mut gap) {
            d.lost();
        }
        out.extend(d.push(RtpTime(*ts), *marker, payload));
    }
    out.extend(d.finish());
    out
}

fn mpeg4_frame(n: usize, seed: u8) -> Vec<u8> {
    let mut f = vec![0, 0, 1, 0xB6];
    f.extend((0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1));
    f
}

#[test]
fn mpeg4_frames_come_back_as_they_were_sent() {
    let frames: Vec<(u32, Vec<u8>)> = (0..3)
        .map(|k| (3600 * k, mpeg4_frame(100 + 150 * k as usize, k as u8)))
        .collect();
    let got = depay(
        VideoCodec::Mpeg4Part2,
        &packets(VideoCodec::Mpeg4Part2, &frames, 100),
        &[],
    );
    assert_eq!(got.len(), 3);
    for (g, (ts, f)) in got.iter().zip(&frames) {
        assert_eq!((g.rtp_ts.get(), &g.data, g.damaged), (*ts, f, false));
    }
}

#[test]
fn a_lost_packet_damages_its_frame_and_no_other_mpeg4_frame() {
    let frames: Vec<(u32, Vec<u8>)> = (0..4)
        .map(|k| (3600 * k, mpeg4_frame(250, k as u8)))
        .collect();
    // Three packets a frame: packet 4 is the middle of frame 1; packets 6–8 all of frame 2.
    let p = packets(VideoCodec::Mpeg4Part2, &frames, 100);
    assert_eq!(p.len(), 12);
    let got = depay(VideoCodec::Mpeg4Part2, &p, &[4, 6, 7, 8]);
    let seen: Vec<(u32, bool)> = got.iter().map(|f| (f.rtp_ts.get(), f.damaged)).collect();
    // Frame 3 starts with its start code: whole at the start, not damaged.
    assert_eq!(seen, [(0, false), (3600, true), (10800, false)]);
    // Frame 1's last packet lost: its marker never comes; frame 2 starts with a start code.
    let got = depay(VideoCodec::Mpeg4Part2, &p, &[5]);
    let seen: Vec<(u32, bool)> = got.iter().map(|f| (f.rtp_ts.get(), f.damaged)).collect();
    assert_eq!(
        seen,
        [(0, false), (3600, true), (7200, false), (10800, false)]
    );
}

/// An access unit: SPS, PPS and an IDR slice of `idr` bytes (FU-A fragments at 100).
fn access_unit(idr: usize) -> Vec<u8> {
    let mut au = vec![
        0, 0, 0, 1, 0x67, 0x64, 0, 0x1f, 0xac, 0, 0, 0, 1, 0x68, 0xee, 0x3c, 0x80,
    ];
    au.extend([0, 0, 1, 0x65]);
    au.extend((0..idr).map(|i| (i as u8).wrapping_mul(7) | 0x10));
    au
}

#[test]
fn h264_access_units_come_back_with_their_nal_units_whole() {
    let frames = vec![(0u32, access_unit(450)), (3000, access_unit(40))];
    let got = depay(
        VideoCodec::H264,
        &packets(VideoCodec::H264, &frames, 100),
        &[],
    );
    assert_eq!(got.len(), 2);
    for (g, (_, f)) in got.iter().zip(&frames) {
        assert!(!g.damaged);
        assert!(nal_units(&g.data).eq(nal_units(f)), "the same NAL units");
        assert!(g.data.starts_with(&[0, 0, 0, 1, 0x67]));
    }
}

#[test]
fn an_h264_fragment_without_its_start_damages_the_frame() {
    let frames = vec![
        (0u32, access_unit(450)),
        (3000, access_unit(450)),
        (6000, access_unit(450)),
    ];
    let p = packets(VideoCodec::H264, &frames, 100);
    // Frame 1's packets: SPS, PPS, then the IDR's fragments; lose its first fragment.
    let first_fu = p
        .iter()
        .position(|(ts, _, pl)| *ts == 3000 && pl[0] & 0x1f == FU_A)
        .unwrap();
    let got = depay(VideoCodec::H264, &p, &[first_fu]);
    // The fragments after the lost start are the loss's, not malformed.
    let mut d = FrameDepayloader::new(VideoCodec::H264);
    for (i, (ts, marker, payload)) in p.iter().enumerate() {
        if i == first_fu {
            d.lost();
        } else {
            d.push(RtpTime(*ts), *marker, payload);
        }
    }
    assert_eq!(d.malformed(), 0);
    let seen: Vec<(u32, bool)> = got.iter().map(|f| (f.rtp_ts.get(), f.damaged)).collect();
    assert_eq!(seen, [(0, false), (3000, true), (6000, false)]);
    // Its last packet lost: an H.264 access unit has no start mark, so the next is damaged too.
    let last = p.iter().rposition(|(ts, _, _)| *ts == 3000).unwrap();
    let got = depay(VideoCodec::H264, &p, &[last]);
    let seen: Vec<(u32, bool)> = got.iter().map(|f| (f.rtp_ts.get(), f.damaged)).collect();
    assert_eq!(seen, [(0, false), (3000, true), (6000, true)]);
}

#[test]
fn stap_a_aggregates_and_malformed_payloads() {
    let mut d = FrameDepayloader::new(VideoCodec::H264);
    // STAP-A of SPS and PPS, then a single NAL unit with the marker.
    let stap = [24, 0, 3, 0x67, 1, 2, 0, 2, 0x68, 3];
    assert!(d.push(RtpTime(0), false, &stap).is_empty());
    let got = d.push(RtpTime(0), true, &[0x65, 9, 9]);
    assert_eq!(
        got[0].data,
        [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 9, 9]
    );
    assert!(!got[0].damaged);
    // A truncated aggregate, an empty payload, a type mode 1 never sends: counted, damaged.
    for bad in [&[24u8, 0, 9, 0x67][..], &[], &[0x1e, 1]] {
        let got = d.push(RtpTime(3000), true, bad);
        assert!(got[0].damaged, "{bad:?}");
    }
    assert_eq!(d.malformed(), 3);
}

#[test]
fn sdp_configuration_back_to_bytes() {
    assert_eq!(
        config_of_fmtp(
            VideoCodec::Mpeg4Part2,
            "profile-level-id=1; config=000001B0F5"
        ),
        Some(vec![0, 0, 1, 0xB0, 0xF5])
    );
    assert_eq!(
        config_of_fmtp(
            VideoCodec::H264,
            "packetization-mode=1;sprop-parameter-sets=Z2QAH6w=,aO48gA=="
        ),
        Some(vec![
            0, 0, 0, 1, 0x67, 0x64, 0, 0x1f, 0xac, 0, 0, 0, 1, 0x68, 0xee, 0x3c, 0x80
        ])
    );
    assert_eq!(config_of_fmtp(VideoCodec::Mpeg4Part2, "config=0F0"), None);
    assert_eq!(
        config_of_fmtp(VideoCodec::H264, "packetization-mode=1"),
        None
    );
}
