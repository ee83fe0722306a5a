use super::*;
use metronome_media::uncompressed::{Depth, RawTestPattern, Sampling};
use metronome_wire::rtp::RtpView;
use std::sync::atomic::AtomicU64;

/// A pacing thread held up in the middle of a frame (preempted on a busy host) for longer
/// than the drop-late bound: the frame still leaves whole, the rest of it at once when the
/// thread runs again. The cursor is driven here as a core drives it, on the real clock.
#[test]
fn a_frame_held_up_halfway_still_leaves_whole() {
    use super::super::stream::RawCursor;
    use metronome_rt::pacing::{Load, Sent};

    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dest = format!("rtp://{}", rx.local_addr().unwrap());
    let mut cfg = RawSenderConfig::new(RtpUrl::parse_destination(&dest).unwrap(), Ssrc(7), 1);
    cfg.max_payload = 300;
    cfg.rtcp = false;
    let late = LatePolicy::DropLate {
        after: Duration::from_millis(10),
    };
    let f = VideoFormat::new(160, 96, Sampling::Ycbcr422, Depth::Eight, 25, 1).unwrap();
    let source = Box::new(RawTestPattern::new(f).unwrap());
    let RawSender {
        mut payloader,
        schedule,
        out,
        ring,
        rtp_ts_base,
        ..
    } = RawSender::open(source, cfg.clone()).unwrap();
    let n = payloader.packets_per_frame();
    let clock = Clock::new();
    let epoch0 = clock.now() + Duration::from_millis(5);
    let session = new_session(&cfg, late, 10_000_000, n, rtp_ts_base, epoch0);
    let mut slot = ring.take_free().unwrap();
    let mut frame = RawFrame::new(f);
    RawTestPattern::new(f).unwrap().render(0, &mut frame);
    payload_into(&mut payloader, &frame, &mut slot, true).unwrap();
    slot.epoch = epoch0;
    ring.publish(slot);
    let settings = PacerSettings {
        batch_window: cfg.batch_window,
        late_threshold: cfg.late_threshold,
        send_time_ext: false,
        late,
    };
    let ctl = Arc::new(RawControl::default());
    let rt = RawStreamRt::new(1, ring, out, schedule, settings, ctl.clone(), session);
    let mut cursor = RawCursor::new(n);
    let mut held_up = false;
    while let Load::Ready(job) = cursor.load(&rt, clock.now()) {
        std::thread::sleep(job.release.saturating_since(clock.now()));
        if let Some(Sent::Sent(_)) = cursor.send(&rt, &clock) {
            if !held_up {
                // The first batch has left: the thread is held up for 30 ms.
                held_up = true;
                std::thread::sleep(Duration::from_millis(30));
            }
        }
    }
    let c = &ctl.counters;
    let count = |a: &AtomicU64| a.load(Ordering::Relaxed);
    assert!(held_up);
    assert_eq!(
        (
            count(&c.frames),
            count(&c.frames_dropped),
            count(&c.packets_dropped)
        ),
        (1, 0, 0)
    );
    assert_eq!(count(&c.packets), n as u64);
    rx.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 2048];
    let got = std::iter::from_fn(|| rx.recv(&mut buf).ok()).count();
    assert_eq!(got, n, "every packet of the frame arrives");
}

#[test]
fn frames_are_padded_to_one_size_and_depayload_unchanged() {
    let f = VideoFormat::new(1920, 8, Sampling::Ycbcr422, Depth::Ten, 60, 1).unwrap();
    let mut cfg = RawPayloaderConfig::new(Ssrc(5), &f);
    cfg.capture_time_ext = true;
    let mut pay = RawPayloader::new(cfg, f).unwrap();
    let ring = FrameRing::new(1, pay.packets_per_frame(), pay.packet_capacity());
    let mut slot = ring.take_free().unwrap();
    let mut frame = RawFrame::new(f);
    RawTestPattern::new(f).unwrap().render(3, &mut frame);
    frame.capture_ns = 42;
    payload_into(&mut pay, &frame, &mut slot, true).unwrap();
    assert!(slot.uniform);
    assert_eq!(slot.npackets, pay.packets_per_frame());
    let mut d = metronome_session::rfc4175::RawDepayloader::new(f, Some(PayloadType(96))).unwrap();
    let mut complete = 0;
    for i in 0..slot.npackets {
        let p = slot.packet(i);
        if i + 1 < slot.npackets {
            assert_eq!(p.len(), slot.stride());
        }
        assert!(RtpView::parse(p).is_ok());
        for e in d.push(Timestamp::ZERO, p) {
            if let metronome_session::rfc4175::RawEvent::Complete(c) = e {
                assert_eq!(c.capture_ns, Some(42));
                complete += 1;
            }
        }
    }
    assert_eq!(complete, 1);
    assert_eq!(d.frame().unwrap().data, frame.data);
    assert_eq!(d.counters().dropped.total(), 0);
    // Without padding the packets differ where lines end.
    payload_into(&mut pay, &frame, &mut slot, false).unwrap();
    assert!(!slot.uniform);
}
