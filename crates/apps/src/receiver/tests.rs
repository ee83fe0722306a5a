use super::*;
use metronome_rt::udp::SocketOptions;
use metronome_session::receiver::{AgentKind, ReceiverConfig};
use metronome_time::Timestamp;
use metronome_wire::PayloadType;
use metronome_wire::Ssrc;

fn sender_report(ssrc: u32) -> Vec<u8> {
    // V=2, no report blocks, PT 200, length 6 (28 bytes): SSRC, NTP, RTP time, counts.
    let mut sr = vec![0x80, 200, 0, 6];
    sr.extend_from_slice(&ssrc.to_be_bytes());
    sr.extend_from_slice(&[0; 20]);
    sr
}

fn rtp_packet(ssrc: u32) -> Vec<u8> {
    let mut p = vec![0x80, 33, 0, 1, 0, 0, 0, 0];
    p.extend_from_slice(&ssrc.to_be_bytes());
    for _ in 0..7 {
        let mut ts = [0xffu8; 188];
        ts[..4].copy_from_slice(&[0x47, 0x1f, 0xff, 0x10]);
        p.extend_from_slice(&ts);
    }
    p
}

/// A sender's first report may come before its first packet: reports go back to it once a
/// packet shows its SSRC is the stream's; a report of another SSRC, or anything that is not
/// a sender report, decides nothing.
#[test]
fn a_report_before_the_first_packet_is_followed_once_the_packet_comes() {
    let port = metronome_rt::ports::free_udp_run(2).unwrap();
    let url = RtpUrl::unicast(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    let mut rtcp = RtcpSocket::open_for_receiver(&url, &SocketOptions::default()).unwrap();
    let mut session = ReceiverSession::new(ReceiverConfig::default());
    let mut peer = PeerFollower::default();
    let (sender, stray) = (
        "127.0.0.1:40000".parse().unwrap(),
        "127.0.0.1:40002".parse().unwrap(),
    );
    let at = Timestamp::from_nanos(1_000_000);
    assert!(!session.handle_rtcp(at, &sender_report(7)));
    peer.heard(&mut rtcp, false, &sender_report(7), sender);
    peer.heard(&mut rtcp, false, b"not rtcp", stray);
    peer.settle(&mut rtcp, &session);
    assert_eq!(rtcp.peer(), None, "no packet of SSRC 7 yet");
    session.handle_rtp(at, None, &rtp_packet(7)).unwrap();
    peer.settle(&mut rtcp, &session);
    assert_eq!(rtcp.peer(), Some(sender));

    // Another SSRC's early report is never followed.
    drop(rtcp);
    let mut rtcp = RtcpSocket::open_for_receiver(&url, &SocketOptions::default()).unwrap();
    let mut peer = PeerFollower::default();
    peer.heard(&mut rtcp, false, &sender_report(8), stray);
    peer.settle(&mut rtcp, &session);
    assert_eq!(rtcp.peer(), None);
}

/// A rate controller's first feedback is due at the first packet. A unicast receiver that
/// has not heard the sender's report yet has nowhere to send it: it holds it until it has
/// (sent at once, it was lost, and TFRC's sender, at one packet a second before feedback,
/// waited a second for the next).
#[test]
fn feedback_due_before_the_sender_is_known_waits_for_it() {
    let port = metronome_rt::ports::free_udp_run(2).unwrap();
    let url = RtpUrl::unicast(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    let mut cfg = ReceiverRunConfig::new(url);
    cfg.session.cc = AgentKind::Tfrc;
    cfg.duration = Some(Duration::from_secs(5));
    let rx = Receiver::open(cfg).unwrap();
    let stop = AtomicBool::new(false);
    let data = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let control = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    control
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    std::thread::scope(|scope| {
        let running = scope.spawn(|| rx.run(&stop, |_, _| {}));
        data.send_to(&rtp_packet(7), ("127.0.0.1", port)).unwrap();
        // The sender's report comes later than its packet.
        std::thread::sleep(Duration::from_millis(200));
        control
            .send_to(&sender_report(7), ("127.0.0.1", port + 1))
            .unwrap();
        let mut buf = [0u8; 1500];
        let got = control.recv(&mut buf);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let n = got.expect("the feedback due at the first packet, once the sender is known");
        assert!(
            buf[..n].windows(4).any(|w| w == b"TFRC"),
            "a TFRC report, not only a receiver report"
        );
        running.join().unwrap().unwrap();
    });
}

/// A TS packet of `ssrc` numbered `seq`, its TS payloads marked with `seq`.
fn numbered(ssrc: u32, seq: u16) -> Vec<u8> {
    let mut p = rtp_packet(ssrc);
    p[2..4].copy_from_slice(&seq.to_be_bytes());
    p[4..8].copy_from_slice(&(u32::from(seq) * 900).to_be_bytes());
    for ts in p[12..].chunks_exact_mut(188) {
        ts[4..].fill(seq as u8);
    }
    p
}

/// `recv --rtx-pt 97`: a packet lost on the way is asked for in a NACK sent to the
/// sender's RTCP address, and its retransmission is written out as the packet itself.
#[test]
fn a_lost_packet_is_asked_for_and_its_retransmission_written_out() {
    use metronome_session::receiver::ReceiverRepair;
    use metronome_wire::rtcp::{parse_compound, RtcpItem};
    let port = metronome_rt::ports::free_udp_run(2).unwrap();
    let out = std::env::temp_dir().join(format!("metronome-rtx-{}.ts", std::process::id()));
    let url = RtpUrl::unicast(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    let mut cfg = ReceiverRunConfig::new(url);
    cfg.session.repair = Some(ReceiverRepair::new(PayloadType(97), Duration::from_secs(2)));
    cfg.duration = Some(Duration::from_secs(10));
    cfg.output = Some(out.clone());
    let rx = Receiver::open(cfg).unwrap();
    let stop = AtomicBool::new(false);
    let data = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let control = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    control
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let to = ("127.0.0.1", port);
    std::thread::scope(|scope| {
        let running = scope.spawn(|| rx.run(&stop, |_, _| {}));
        data.send_to(&numbered(7, 0), to).unwrap();
        control
            .send_to(&sender_report(7), ("127.0.0.1", port + 1))
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        // Packet 5 is lost on the way.
        for seq in (1..10).filter(|&s| s != 5) {
            data.send_to(&numbered(7, seq), to).unwrap();
        }
        let mut asked = Vec::new();
        let mut buf = [0u8; 1500];
        while asked.is_empty() {
            let n = control.recv(&mut buf).expect("a NACK for packet 5");
            parse_compound(&buf[..n], |item| {
                if let RtcpItem::Nack(n) = item {
                    asked.extend(n.sequences().map(|s| (n.media_ssrc, s.get())));
                }
            })
            .unwrap();
        }
        assert_eq!(asked, vec![(Ssrc(7), 5)]);
        let ids = metronome_wire::rtx::StreamIds {
            ssrc: Ssrc(0x77),
            payload_type: PayloadType(97),
        };
        let mut rtx = [0u8; 1500];
        let n = metronome_wire::rtx::wrap(&numbered(7, 5), ids, metronome_wire::SeqNo(1), &mut rtx)
            .unwrap();
        data.send_to(&rtx[..n], to).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        running.join().unwrap().unwrap();
    });
    let written = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    // Ten packets of seven TS packets each; packet 5's after the others, as it came.
    assert_eq!(written.len(), 10 * 7 * 188);
    let order: Vec<u8> = written.chunks_exact(7 * 188).map(|p| p[4]).collect();
    assert_eq!(order, vec![0, 1, 2, 3, 4, 6, 7, 8, 9, 5]);
}

/// Packets, and FEC packets with their direction.
type Matrix = (
    Vec<Vec<u8>>,
    Vec<(metronome_wire::fec2022::Direction, Vec<u8>)>,
);

/// Sixteen TS packets of SSRC 7 and the FEC (4 x 4) a sender makes of them.
fn fec_matrix() -> Matrix {
    use metronome_config::repair::FecShape;
    use metronome_session::repair::{FecConfig, FecEncoder};
    let shape = FecShape {
        columns: 4,
        rows: 4,
    };
    let mut enc = FecEncoder::new(FecConfig::new(shape), metronome_wire::SeqNo(100));
    let packets: Vec<Vec<u8>> = (0..16).map(|s| numbered(7, s)).collect();
    let mut fec = Vec::new();
    let mut buf = [0u8; 2000];
    for p in &packets {
        enc.push(p);
        while let Some((dir, n)) = enc.poll(&mut buf) {
            fec.push((dir, buf[..n].to_vec()));
        }
    }
    (packets, fec)
}

/// A `recv --fec` on loopback while `send` sends to its port: what it measured, and the TS
/// it wrote.
fn fec_receiver_run(send: impl FnOnce(u16) + Send) -> (ReceiverOutcome, Vec<u8>) {
    fec_receiver_run_with(SocketOptions::default(), send)
}

/// [`fec_receiver_run`] with sockets opened with `socket`.
fn fec_receiver_run_with(
    socket: SocketOptions,
    send: impl FnOnce(u16) + Send,
) -> (ReceiverOutcome, Vec<u8>) {
    use metronome_session::receiver::ReceiverRepair;
    let port = metronome_rt::ports::free_udp_run(6).unwrap();
    let out = std::env::temp_dir().join(format!(
        "metronome-fec-host-{}-{port}.ts",
        std::process::id()
    ));
    let url = RtpUrl::unicast(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    let mut cfg = ReceiverRunConfig::new(url);
    cfg.session.repair = Some(ReceiverRepair::fec(Duration::from_secs(2)));
    cfg.duration = Some(Duration::from_secs(10));
    cfg.output = Some(out.clone());
    cfg.socket = socket;
    let rx = Receiver::open(cfg).unwrap();
    let stop = AtomicBool::new(false);
    let outcome = std::thread::scope(|scope| {
        let running = scope.spawn(|| rx.run(&stop, |_, _| {}));
        send(port);
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        running.join().unwrap().unwrap()
    });
    let written = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    (outcome, written)
}

/// Where a FEC packet of direction `dir` goes for a stream on `port`.
fn fec_port(port: u16, dir: metronome_wire::fec2022::Direction) -> u16 {
    port + match dir {
        metronome_wire::fec2022::Direction::Column => metronome_wire::fec2022::COLUMN_PORT_OFFSET,
        metronome_wire::fec2022::Direction::Row => metronome_wire::fec2022::ROW_PORT_OFFSET,
    }
}

/// `recv --fec`: FEC from another host than the stream's is counted and dropped (it would
/// rebuild whatever its sender likes); the same FEC from the stream's host rebuilds the packet
/// lost on the way.
#[test]
fn fec_is_taken_only_from_the_streams_host() {
    let (packets, fec) = fec_matrix();
    let ours = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let stranger = std::net::UdpSocket::bind("127.0.0.2:0").unwrap();
    let (outcome, written) = fec_receiver_run(|port| {
        // Packet 5 is lost on the way.
        for (_, p) in packets.iter().enumerate().filter(|(s, _)| *s != 5) {
            ours.send_to(p, ("127.0.0.1", port)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        for (dir, f) in &fec {
            stranger
                .send_to(f, ("127.0.0.1", fec_port(port, *dir)))
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        for (dir, f) in &fec {
            ours.send_to(f, ("127.0.0.1", fec_port(port, *dir)))
                .unwrap();
        }
    });
    assert_eq!(outcome.foreign_fec_datagrams, fec.len() as u64);
    // The four rows (a column's FEC leaves after the packets that follow the matrix).
    assert_eq!(fec.len(), 4);
    // Sixteen packets; packet 5 rebuilt from the stream's host's FEC.
    assert_eq!(written.len(), 16 * 7 * 188);
    let repair = outcome.receiver.repair.unwrap();
    assert_eq!(repair.fec_useful, 1, "{repair:?}");
}

/// FEC that comes before the stream's first packet (the media delayed on its way, the FEC
/// not) waits for it, and then counts as the stream's host's: nothing is dropped, and the
/// lost packet is rebuilt.
#[test]
fn fec_before_the_first_packet_waits_for_it() {
    let (packets, fec) = fec_matrix();
    let ours = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (outcome, written) = fec_receiver_run(|port| {
        for (dir, f) in &fec {
            ours.send_to(f, ("127.0.0.1", fec_port(port, *dir)))
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        for (_, p) in packets.iter().enumerate().filter(|(s, _)| *s != 5) {
            ours.send_to(p, ("127.0.0.1", port)).unwrap();
        }
    });
    assert_eq!(outcome.foreign_fec_datagrams, 0);
    assert_eq!(written.len(), 16 * 7 * 188);
    let repair = outcome.receiver.repair.unwrap();
    assert_eq!(
        repair.fec.map(|f| f.packets),
        Some(fec.len() as u64),
        "{repair:?}"
    );
    assert_eq!(repair.fec_useful, 1, "{repair:?}");
}

/// FEC the kernel drops for lack of socket buffer is counted, as the RTP socket's overflows
/// are: here FEC comes long before its stream and fills the smallest buffer the kernel grants
/// while it waits, and no datagram after the drops carries their count (the socket's own
/// count, read at the end, has them). Every FEC datagram sent is taken, dropped as foreign or
/// counted here.
#[test]
fn fec_socket_overflows_are_counted() {
    let (packets, fec) = fec_matrix();
    let (dir, row) = fec[0].clone();
    let ours = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let tiny = SocketOptions {
        buffer_bytes: 1,
        ..SocketOptions::default()
    };
    const FLOOD: u64 = 200;
    let (outcome, _) = fec_receiver_run_with(tiny, |port| {
        for _ in 0..FLOOD {
            ours.send_to(&row, ("127.0.0.1", fec_port(port, dir)))
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        ours.send_to(&packets[0], ("127.0.0.1", port)).unwrap();
    });
    let taken = outcome.receiver.repair.unwrap().fec.unwrap().packets;
    assert!(outcome.fec_socket_overflows > 0, "{outcome:?}");
    assert_eq!(
        outcome.fec_socket_overflows + taken + outcome.foreign_fec_datagrams,
        FLOOD,
        "{outcome:?}"
    );
    assert_eq!(outcome.socket_overflows, 0, "{outcome:?}");
}
