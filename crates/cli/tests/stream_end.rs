//! How a stream's end looks from outside, on loopback: its RTCP BYE a quarter second after
//! its last packet (however it ended), and NACKs for its last packets still answered after
//! its media ended, by itself or with the server, to the destination that asked alone. Every
//! run is bounded and stops by itself.

mod common;

use common::rtsp_client::Client;
use common::{bin, port_pair, serve, RtspServer};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;

/// Every datagram `socket` receives (with its kernel receive time, ns) until it has been quiet
/// for half a second after `done` is set.
fn gather(
    socket: metronome_rt::udp::UdpReceiver,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<(u64, Vec<u8>)>> {
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        loop {
            match socket.recv(&mut buf) {
                Ok(m) => got.push((m.kernel_rx_realtime_ns.unwrap(), buf[..m.len].to_vec())),
                Err(_) if done.load(std::sync::atomic::Ordering::Acquire) => return got,
                Err(_) => {}
            }
        }
    })
}

/// Whether an RTCP compound packet holds a BYE (packet type 203).
fn holds_bye(mut p: &[u8]) -> bool {
    while p.len() >= 4 {
        if p[1] == 203 {
            return true;
        }
        let len = (usize::from(u16::from_be_bytes([p[2], p[3]])) + 1) * 4;
        p = &p[len.min(p.len())..];
    }
    false
}

/// How long after its last RTP packet `serve … extra` said RTCP BYE, ms, by the kernel's
/// receive times (which a busy test machine cannot blur).
fn bye_gap_ms(extra: &[&std::ffi::OsStr]) -> f64 {
    use metronome_rt::udp::{SocketOptions, UdpReceiver};
    use metronome_rt::url::RtpUrl;
    let port = port_pair();
    let open = |p: u16| {
        let o = SocketOptions {
            buffer_bytes: 1 << 20,
            read_timeout: Some(Duration::from_millis(500)),
        };
        UdpReceiver::open(&RtpUrl::unicast((Ipv4Addr::LOCALHOST, p).into()), &o).unwrap()
    };
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rtp = gather(open(port), done.clone());
    let rtcp = gather(open(port + 1), done.clone());
    let out = serve(port, extra);
    done.store(true, std::sync::atomic::Ordering::Release);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last_rtp = rtp.join().unwrap().iter().map(|(t, _)| *t).max();
    let bye = rtcp.join().unwrap().into_iter().find(|(_, p)| holds_bye(p));
    let (Some(last_rtp), Some((bye, _))) = (last_rtp, bye) else {
        panic!("no RTP ({last_rtp:?}) or no BYE");
    };
    (bye as f64 - last_rtp as f64) / 1e6
}

/// A stream that ends, by `--duration` or at its input's end, says RTCP BYE a quarter second
/// after its last packet (a raw one too, whose sender runs apart). FFmpeg reads a waiting RTCP packet before waiting RTP ones and ends
/// the stream at BYE: a BYE right behind the last frame made FFmpeg on a busy machine drop it.
#[test]
fn an_ended_streams_bye_leaves_a_quarter_second_after_its_last_packet() {
    let clip = common::ts_file_made("bye.ts", "160x120", 25, 1, "200k", "400k");
    for (how, extra) in [
        ("--duration", vec!["--duration".as_ref(), "1".as_ref()]),
        ("the input's end", vec!["-i".as_ref(), clip.as_os_str()]),
        (
            "a raw stream's --duration",
            ["--raw", "--size", "160x120", "--duration", "1"]
                .map(AsRef::as_ref)
                .to_vec(),
        ),
    ] {
        let gap_ms = bye_gap_ms(&extra);
        assert!(
            (249.0..2000.0).contains(&gap_ms),
            "ended by {how}, the BYE arrived {gap_ms:.1} ms after the last RTP packet"
        );
    }
}

/// A stream that repairs and ends by itself (its file's end) still answers a NACK for its last
/// packet after that packet left, until its play-out time: the simulator answers through its
/// drain, and the real-time driver now keeps the stream that long.
#[test]
fn an_ended_stream_still_answers_a_nack_for_its_last_packet() {
    let clip = common::ts_file_made("bye.ts", "160x120", 25, 1, "200k", "400k");
    let (rtp, rtcp, port) = media_and_report_sockets();
    let spec = format!(
        "name=c,destination=rtp://127.0.0.1:{port},repair=rtx,playout_delay=1s,source={}",
        clip.display()
    );
    let server = common::Running::spawn(
        bin()
            .args(["serve", "--json", "--duration", "8"])
            .args(["--stream", &spec]),
    );
    nack_the_last_packet_and_get_it_again(&rtp, &rtcp);
    let out = server.finish_within(Duration::from_secs(15));
    assert!(out.succeeded(), "{}", out.report());
}

/// A server stopped from outside (here `--duration`; a signal takes the same way) stops its
/// streams' media, answers the NACKs that can still be of use, and only then says BYE.
#[test]
fn a_stopped_server_answers_a_nack_for_its_last_packet_then_says_bye() {
    let (rtp, rtcp, port) = media_and_report_sockets();
    let spec = format!(
        "name=c,destination=rtp://127.0.0.1:{port},repair=rtx,playout_delay=1s,size=160x120,fps=25"
    );
    let server = common::Running::spawn(
        bin()
            .args(["serve", "--json", "--duration", "2"])
            .args(["--stream", &spec]),
    );
    nack_the_last_packet_and_get_it_again(&rtp, &rtcp);
    assert!(bye_comes(&rtcp), "no RTCP BYE after the retransmission");
    let out = server.finish_within(Duration::from_secs(15));
    assert!(out.succeeded(), "{}", out.report());
}

/// A stream to two unicast destinations: the retransmission one of them asks for goes to it
/// alone; the other, which has the packet, gets none.
#[test]
fn a_retransmission_goes_only_to_the_destination_that_asked() {
    let (rtp, rtcp, port) = media_and_report_sockets();
    // Everything the other destination gets, read as it comes, into a large buffer (the
    // stream is slow too): packets per SSRC.
    let other = common::port_pair();
    let other_rtp = metronome_rt::udp::UdpReceiver::open(
        &metronome_rt::url::RtpUrl::unicast((Ipv4Addr::LOCALHOST, other).into()),
        &metronome_rt::udp::SocketOptions {
            buffer_bytes: 4 << 20,
            read_timeout: Some(Duration::from_millis(200)),
        },
    )
    .unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let counting = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let mut ssrcs = std::collections::BTreeMap::new();
            loop {
                match other_rtp.recv(&mut buf) {
                    Ok(m) => {
                        let v = metronome_wire::rtp::RtpView::parse(&buf[..m.len]);
                        *ssrcs.entry(v.expect("not RTP").ssrc()).or_insert(0u32) += 1;
                    }
                    Err(_) if done.load(std::sync::atomic::Ordering::Acquire) => return ssrcs,
                    Err(_) => {}
                }
            }
        })
    };
    let dir = common::tmp_dir("rtx_to_one");
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[[stream]]\nname = \"c\"\nsize = \"160x120\"\nfps = 25\nbitrate = \"400k\"\n\
             repair = \"rtx\"\n\
             playout_delay = \"1s\"\ndestination = [\"rtp://127.0.0.1:{port}\", \
             \"rtp://127.0.0.1:{other}\"]\n"
        ),
    )
    .unwrap();
    let server = common::Running::spawn(
        bin()
            .args(["serve", "--json", "--duration", "2"])
            .args(["--config".as_ref(), config.as_os_str()]),
    );
    nack_the_last_packet_and_get_it_again(&rtp, &rtcp);
    let out = server.finish_within(Duration::from_secs(15));
    assert!(out.succeeded(), "{}", out.report());
    done.store(true, std::sync::atomic::Ordering::Release);
    let ssrcs = counting.join().unwrap();
    // The media alone: one SSRC, and every packet of it (none lost on loopback).
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("serve --json");
    let sent = v["streams"][0]["packets"].as_u64();
    assert_eq!(
        (ssrcs.len(), ssrcs.values().next().map(|&n| u64::from(n))),
        (1, sent),
        "packets per SSRC at the other destination: {ssrcs:?}"
    );
}

/// An RTSP session's stream played over UDP is one of the stopping server's streams: it
/// answers its viewer's NACK for its last packet, and only then says BYE (a TEARDOWN, by
/// contrast, ends it at once).
#[test]
fn a_stopped_servers_rtsp_session_answers_a_nack_for_its_last_packet_then_says_bye() {
    let mount = "name=cam,repair=rtx,playout_delay=1s,size=160x120,fps=25";
    let server = RtspServer::start_for(&["--stream", mount], Duration::from_secs(4));
    let mut c = Client::connect(&server, "cam");
    let (rtp, rtcp, port) = media_and_report_sockets();
    let r = c.setup(
        &format!("RTP/AVPF;unicast;client_port={port}-{}", port + 1),
        None,
    );
    assert_eq!(r.status, 200, "{r:?}");
    let r = c.play(&r.session(), None);
    assert_eq!(r.status, 200, "{r:?}");
    nack_the_last_packet_and_get_it_again(&rtp, &rtcp);
    assert!(bye_comes(&rtcp), "no RTCP BYE after the retransmission");
    let (_, log) = server.stop();
    assert!(!log.iter().any(|l| l.contains("panic")), "{log:?}");
}

/// Whether an RTCP BYE comes to `rtcp` before it has been quiet for its read timeout.
fn bye_comes(rtcp: &UdpSocket) -> bool {
    let mut buf = [0u8; 2048];
    while let Ok(n) = rtcp.recv(&mut buf) {
        if holds_bye(&buf[..n]) {
            return true;
        }
    }
    false
}

/// A stream's RTP and RTCP sockets on loopback (a port pair), and the RTP port.
fn media_and_report_sockets() -> (UdpSocket, UdpSocket, u16) {
    let port = port_pair();
    let rtp = UdpSocket::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    let rtcp = UdpSocket::bind((Ipv4Addr::LOCALHOST, port + 1)).unwrap();
    rtcp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    (rtp, rtcp, port)
}

/// Reads the stream's packets until none came for 150 ms (the last is the media's last), NACKs
/// the last one 150 ms after it came, and checks that its retransmission comes.
fn nack_the_last_packet_and_get_it_again(rtp: &UdpSocket, rtcp: &UdpSocket) {
    use metronome_wire::rtcp::{write_compound, write_nack, ReportHead};
    use metronome_wire::{SeqNo, Ssrc};
    // Where the stream's RTCP comes from (its first sender report), where NACKs go.
    let mut buf = [0u8; 2048];
    let (_, server_rtcp) = rtcp.recv_from(&mut buf).expect("no sender report");
    rtp.set_read_timeout(Some(Duration::from_millis(150)))
        .unwrap();
    let mut last = None;
    while let Ok(n) = rtp.recv(&mut buf) {
        let ssrc = u32::from_be_bytes(buf[8..12].try_into().unwrap());
        last = Some((ssrc, u16::from_be_bytes([buf[2], buf[3]])));
        assert!(n > 12);
    }
    let (ssrc, seq) = last.expect("no RTP packet");
    let head = ReportHead::Receiver {
        ssrc: Ssrc(0x7e57),
        blocks: &[],
    };
    let mut nack = vec![0u8; 1500];
    let mut len = write_compound(&mut nack, head, "viewer", None).unwrap();
    len += write_nack(&mut nack[len..], Ssrc(0x7e57), Ssrc(ssrc), &[SeqNo(seq)]);
    rtcp.send_to(&nack[..len], server_rtcp).unwrap();
    // The retransmission (RFC 4588: another SSRC, its payload the original sequence number),
    // within 700 ms; the media's packets that still come (if a busy machine held the stream
    // back for 150 ms, the packet asked for was not its last) are passed over.
    rtp.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let until = common::now() + Duration::from_millis(700);
    let n = loop {
        match rtp.recv(&mut buf) {
            Ok(n) if n >= 12 && buf[8..12] != ssrc.to_be_bytes() => break n,
            _ => assert!(
                common::now() < until,
                "the NACK after the stream's end was not answered"
            ),
        }
    };
    let rtx = metronome_wire::rtp::RtpView::parse(&buf[..n]).expect("not RTP");
    let osn = rtx
        .payload()
        .get(..2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]));
    assert!(
        rtx.ssrc() != Ssrc(ssrc) && osn == Some(seq),
        "not its retransmission: {osn:?}"
    );
}
