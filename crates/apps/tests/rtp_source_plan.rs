//! A source that makes its own RTP packets (a ladder's coded frames, RFC 6416) run by the
//! real-time driver as the simulator runs it: numbered and timed by the server, sent as coded,
//! no MPEG-TS and no padding.

use metronome_apps::sender::{run_sender, SenderConfig};
use metronome_apps::streams::{GivenSource, PacketShape, RtpSourcePlan, StartInfo};
use metronome_media::decode::VideoCodec;
use metronome_media::encode::EncoderConfig;
use metronome_media::ladder::source::{LadderSource, LadderSourceConfig};
use metronome_media::ladder::{Ladder, LadderSpec};
use metronome_media::pattern::TestPattern;
use metronome_media::payload::PayloaderConfig;
use metronome_rt::url::RtpUrl;
use metronome_session::sender::RtpSource;
use metronome_time::Timestamp;
use metronome_wire::rtp::RtpView;
use metronome_wire::PayloadType;
use metronome_wire::Ssrc;
use std::net::UdpSocket;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Largest RTP packet the plan makes (payload 1000 bytes and the 12-byte header).
const MAX_PAYLOAD: usize = 1000;

struct Plan {
    ladder: Arc<Ladder>,
}

impl RtpSourcePlan for Plan {
    fn describe(&self) -> String {
        "a one-rung ladder".into()
    }
    fn start_rate(&self) -> u64 {
        2_000_000
    }
    fn shape(&self) -> PacketShape {
        PacketShape::on_the_wire((MAX_PAYLOAD + 12 + 28) as u64)
    }
    fn open(
        self: Box<Self>,
        start: &StartInfo,
        epoch: Timestamp,
    ) -> Result<Box<dyn RtpSource>, String> {
        Ok(Box::new(LadderSource::new(
            self.ladder,
            LadderSourceConfig {
                payloader: PayloaderConfig {
                    ssrc: start.ssrc,
                    payload_type: PayloadType(96),
                    max_payload: MAX_PAYLOAD,
                    initial_seq: start.seq,
                    send_time: metronome_wire::rtp::SendTimeExt::None,
                },
                rtp_ts_base: start.rtptime,
                overhead_per_packet: 40,
                reference_q: 6,
                max_bps: 2e6,
                epoch,
                send_at_rate: false,
            },
        )))
    }
}

#[test]
fn a_ladder_leaves_the_real_time_driver_as_coded() {
    let spec = LadderSpec {
        encoder: EncoderConfig {
            codec: VideoCodec::Mpeg4Part2,
            width: 176,
            height: 144,
            fps: 25,
            gop: 12,
            b_frames: 0,
            quantizer: 6,
        },
        quantizers: vec![6],
        frames: 24,
        content: "pattern".into(),
    };
    let mut pictures = TestPattern::new(25, 4).unwrap();
    let ladder = Arc::new(Ladder::build(spec, &mut pictures).unwrap());
    let coded: Vec<usize> = ladder.rungs[0]
        .frames
        .iter()
        .map(|f| f.data.len())
        .collect();

    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let port = rx.local_addr().unwrap().port();
    let dest = RtpUrl::parse_destination(&format!("rtp://127.0.0.1:{port}")).unwrap();
    let mut cfg = SenderConfig::new(vec![dest], Ssrc(0x1234_5678), 7);
    cfg.lock_memory = false;
    cfg.duration = Some(Duration::from_secs(5));
    let got = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut got = Vec::new();
        // Until the stream has been quiet for a while after its end.
        let mut quiet = 0;
        while quiet < 10 && got.len() < 10_000 {
            match rx.recv(&mut buf) {
                Ok(n) => {
                    quiet = 0;
                    got.push(buf[..n].to_vec());
                }
                Err(_) => quiet += 1,
            }
        }
        got
    });
    let plan = GivenSource::Rtp(Box::new(Plan { ladder }));
    let out = run_sender(plan, cfg, Arc::new(AtomicBool::new(false)), |_| {}).unwrap();
    let got = got.join().unwrap();
    assert_eq!(
        out.ended_by,
        metronome_rt::run::EndedBy::EndOfInput,
        "{out:?}"
    );
    assert_eq!(
        got.len() as u64,
        out.packets,
        "every packet arrived on loopback"
    );
    let mut payload = 0;
    let mut markers = 0;
    for (i, d) in got.iter().enumerate() {
        let p = RtpView::parse(d).unwrap();
        assert_eq!(p.payload_type(), PayloadType(96));
        assert_eq!(p.ssrc(), out.ssrc);
        assert_eq!(
            p.sequence(),
            metronome_wire::SeqNo(out.first_seq.wrapping_add(i as u16))
        );
        assert!(d.len() <= MAX_PAYLOAD + 12, "{} bytes", d.len());
        payload += p.payload().len();
        markers += usize::from(p.marker());
    }
    // Every frame as coded, its last packet marked (RFC 6416), nothing else.
    assert_eq!(payload, coded.iter().sum::<usize>());
    assert_eq!(markers, coded.len());
    assert_eq!(out.bytes, (payload + 12 * got.len()) as u64);
}
