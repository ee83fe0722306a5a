use super::*;
use metronome_wire::rtp::RtpView;
use metronome_wire::Ssrc;

fn cfg(max: usize) -> PayloaderConfig {
    PayloaderConfig {
        ssrc: Ssrc(0x1234),
        payload_type: PayloadType(96),
        max_payload: max,
        initial_seq: metronome_wire::SeqNo(65534),
        send_time: metronome_wire::rtp::SendTimeExt::None,
    }
}

/// Every packet of `frame`: (payload, marker, seq, timestamp).
fn packets(p: &mut FramePayloader, frame: &[u8], ts: u32) -> Vec<(Vec<u8>, bool, u16, u32)> {
    let n = p.begin(frame, metronome_time::RtpTime(ts));
    let mut out = Vec::new();
    let mut buf = [0u8; 2048];
    while let Some(o) = p.next(frame, &mut buf).unwrap() {
        let v = RtpView::parse(&buf[..o.len]).unwrap();
        assert_eq!(v.payload().len(), o.payload_len);
        out.push((
            v.payload().to_vec(),
            v.marker(),
            v.sequence().get(),
            v.timestamp().get(),
        ));
    }
    assert_eq!(out.len(), n, "begin() counts the packets");
    out
}

#[test]
fn an_mpeg4_frame_is_cut_in_order_with_the_marker_on_its_last_packet() {
    let frame: Vec<u8> = (0..2500u32).map(|i| (i % 251) as u8).collect();
    let mut p = FramePayloader::new(VideoCodec::Mpeg4Part2, cfg(940));
    let got = packets(&mut p, &frame, 3600);
    assert_eq!(got.len(), 3);
    assert_eq!(
        got.iter().map(|g| g.0.len()).collect::<Vec<_>>(),
        vec![940, 940, 620],
        "no padding"
    );
    assert_eq!(
        got.iter().map(|g| g.1).collect::<Vec<_>>(),
        [false, false, true]
    );
    assert_eq!(
        got.iter().map(|g| g.2).collect::<Vec<_>>(),
        [65534, 65535, 0]
    );
    assert!(got.iter().all(|g| g.3 == 3600));
    let joined: Vec<u8> = got.iter().flat_map(|g| g.0.clone()).collect();
    assert_eq!(joined, frame);
    // The next frame continues the numbering.
    assert_eq!(packets(&mut p, &frame[..10], 7200)[0].2, 1);
}

/// SPS, PPS and a 3000-byte IDR slice at a 1000-byte payload: two single NAL unit packets,
/// then the slice in FU-A fragments (RFC 6184 §5.8) that reassemble to it.
#[test]
fn h264_nal_units_go_whole_or_in_fu_a_fragments() {
    let sps = [0x67u8, 0x64, 0x00, 0x1e, 0xac];
    let pps = [0x68u8, 0xee, 0x3c, 0x80];
    let mut idr = vec![0x65u8];
    idr.extend((0..2999u32).map(|i| (i % 200) as u8 + 1));
    let mut au = Vec::new();
    for (i, nal) in [&sps[..], &pps[..], &idr[..]].iter().enumerate() {
        au.extend_from_slice(if i == 0 {
            &[0, 0, 0, 1][..]
        } else {
            &[0, 0, 1][..]
        });
        au.extend_from_slice(nal);
    }
    let mut p = FramePayloader::new(VideoCodec::H264, cfg(1000));
    let got = packets(&mut p, &au, 90);
    assert_eq!(got[0].0, sps);
    assert_eq!(got[1].0, pps);
    // 2999 bytes of body at 998 a fragment: four FU-As.
    assert_eq!(got.len(), 2 + 4);
    let mut rebuilt = vec![(got[2].0[0] & 0xe0) | (got[2].0[1] & 0x1f)];
    for (k, g) in got[2..].iter().enumerate() {
        assert_eq!(g.0[0] & 0x1f, 28, "FU-A");
        assert_eq!(g.0[1] >> 7, u8::from(k == 0), "S bit");
        assert_eq!((g.0[1] >> 6) & 1, u8::from(k == 3), "E bit");
        assert!(g.0.len() <= 1000);
        rebuilt.extend_from_slice(&g.0[2..]);
    }
    assert_eq!(rebuilt, idr);
    assert_eq!(got.iter().filter(|g| g.1).count(), 1);
    assert!(
        got.last().unwrap().1,
        "the marker on the access unit's last packet"
    );
}
