//! The high-rate UDP path on loopback: GSO batches arrive as separate datagrams, in order and
//! intact, through a GRO receiver and through a plain socket; short last segments; large
//! datagrams whole (and fragmented, in a network namespace of the test's own with a 1500-byte
//! MTU); kernel receive timestamps; the drop counter; the fallback paths; no allocation per
//! batch; socket buffer reports and advice.

use metronome_rt::clock::Clock;
use metronome_rt::udp::{
    classify, is_timeout, read_limit, tune_buffers, BatchReceiver, BatchSender, BufferReport,
    GsoStatus, RecvBufs, SendPath, SocketOptions,
};
use metronome_rt::url::RtpUrl;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

#[global_allocator]
static GLOBAL: metronome_testkit::CountingAlloc = metronome_testkit::CountingAlloc;

fn allocs() -> u64 {
    metronome_testkit::allocations()
}

const LO: Ipv4Addr = Ipv4Addr::LOCALHOST;
const RTP: usize = 1428;

fn opts() -> SocketOptions {
    SocketOptions {
        buffer_bytes: 4 << 20,
        read_timeout: Some(Duration::from_secs(2)),
    }
}

fn receiver() -> (BatchReceiver, SocketAddr) {
    let rx = BatchReceiver::open(&RtpUrl::unicast((LO, 0).into()), &opts()).unwrap();
    let at = rx.local_addr().unwrap();
    (rx, at)
}

fn sender(to: SocketAddr) -> BatchSender {
    BatchSender::open(&RtpUrl::unicast(to), &opts()).unwrap()
}

/// Packet `i` of length `len`: its index, then a pattern that differs per packet.
fn packet(i: usize, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|k| (i * 7 + k * 13) as u8).collect();
    p[..4.min(len)].copy_from_slice(&(i as u32).to_be_bytes()[..4.min(len)]);
    p
}

struct Got {
    datagrams: Vec<Vec<u8>>,
    messages: usize,
    timestamps: Vec<Option<u64>>,
}

/// Receives until `n` datagrams have arrived (a read timeout fails the test).
fn recv_n(rx: &BatchReceiver, bufs: &mut RecvBufs, n: usize) -> Got {
    let mut got = Got {
        datagrams: Vec::new(),
        messages: 0,
        timestamps: Vec::new(),
    };
    while got.datagrams.len() < n {
        let batch = match rx.recv_batch(bufs) {
            Ok(b) => b,
            Err(e) => panic!(
                "after {} of {n} datagrams: {e} (timeout: {})",
                got.datagrams.len(),
                is_timeout(&e)
            ),
        };
        got.messages += batch.messages();
        for d in batch {
            assert!(!d.truncated);
            got.datagrams.push(d.data.to_vec());
            got.timestamps.push(d.kernel_rx_realtime_ns);
        }
    }
    assert_eq!(got.datagrams.len(), n, "more datagrams than sent");
    got
}

fn plain_socket() -> (UdpSocket, SocketAddr) {
    let s = UdpSocket::bind((LO, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    // Room for 8 datagrams of 60000 bytes (the default 208 KiB is not).
    tune_buffers(&s, 4 << 20, true);
    let a = s.local_addr().unwrap();
    (s, a)
}

fn plain_recv_n(s: &UdpSocket, n: usize) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; 65_536];
    (0..n)
        .map(|_| {
            let len = s.recv(&mut buf).unwrap();
            buf[..len].to_vec()
        })
        .collect()
}

fn assert_same(got: &[Vec<u8>], sent: &[Vec<u8>]) {
    assert_eq!(got.len(), sent.len());
    for (i, (g, s)) in got.iter().zip(sent).enumerate() {
        assert_eq!(g.len(), s.len(), "datagram {i}: length");
        assert!(g == s, "datagram {i}: contents differ");
    }
}

fn gso_on(tx: &BatchSender) {
    assert!(
        matches!(tx.gso_status(), GsoStatus::On { .. }),
        "{}",
        tx.gso_status()
    );
    assert_eq!(tx.path(), SendPath::Gso);
}

#[test]
fn gso_batch_arrives_as_separate_datagrams_through_gro() {
    let (rx, at) = receiver();
    assert!(rx.gro(), "UDP_GRO could not be enabled");
    let tx = sender(at);
    gso_on(&tx);
    let sent: Vec<Vec<u8>> = (0..64).map(|i| packet(i, RTP)).collect();
    let refs: Vec<&[u8]> = sent.iter().map(|p| p.as_slice()).collect();
    assert_eq!(tx.send_batch(&refs).unwrap(), 64);
    let mut bufs = RecvBufs::default();
    let got = recv_n(&rx, &mut bufs, 64);
    assert_same(&got.datagrams, &sent);
    // GSO on the way out and GRO on the way in: the kernel hands over coalesced messages
    // (45 + 19 segments of 1428 bytes fit in 64 KiB), and recv_batch cuts them apart again.
    assert!(
        got.messages < 64,
        "{} messages for 64 datagrams",
        got.messages
    );
}

#[test]
fn gso_batch_arrives_as_separate_datagrams_at_a_plain_socket() {
    let (rx, at) = plain_socket();
    let tx = sender(at);
    gso_on(&tx);
    let sent: Vec<Vec<u8>> = (0..64).map(|i| packet(i, RTP)).collect();
    let refs: Vec<&[u8]> = sent.iter().map(|p| p.as_slice()).collect();
    assert_eq!(tx.send_batch(&refs).unwrap(), 64);
    assert_same(&plain_recv_n(&rx, 64), &sent);
    rx.set_nonblocking(true).unwrap();
    assert!(rx.recv(&mut [0u8; 2048]).is_err(), "more than 64 datagrams");
}

#[test]
fn short_last_segment_in_a_list_and_in_a_contiguous_buffer() {
    let (rx, at) = receiver();
    let (prx, pat) = plain_socket();
    let tx = sender(at);
    let ptx = sender(pat);
    // A list: 10 full packets and a short one.
    let mut sent: Vec<Vec<u8>> = (0..10).map(|i| packet(i, RTP)).collect();
    sent.push(packet(10, 345));
    let refs: Vec<&[u8]> = sent.iter().map(|p| p.as_slice()).collect();
    assert_eq!(tx.send_batch(&refs).unwrap(), 11);
    assert_eq!(ptx.send_batch(&refs).unwrap(), 11);
    let mut bufs = RecvBufs::default();
    assert_same(&recv_n(&rx, &mut bufs, 11).datagrams, &sent);
    assert_same(&plain_recv_n(&prx, 11), &sent);
    // One buffer cut into 1000-byte segments: 100 full ones (three GSO sends: 64 KiB holds 65)
    // and 345 bytes.
    let buf: Vec<u8> = (0..100 * 1000 + 345).map(|k| (k % 251) as u8).collect();
    let want: Vec<Vec<u8>> = buf.chunks(1000).map(<[u8]>::to_vec).collect();
    assert_eq!(want.len(), 101);
    assert_eq!(tx.send_segments(&buf, 1000).unwrap(), 101);
    assert_eq!(ptx.send_segments(&buf, 1000).unwrap(), 101);
    assert_same(&recv_n(&rx, &mut bufs, 101).datagrams, &want);
    assert_same(&plain_recv_n(&prx, 101), &want);
    // Mixed sizes: each run of equal sizes is its own GSO send.
    let sizes = [500, 500, 500, 200, 1400, 1400, 1, 0, 900, 900];
    let sent: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| packet(i, n))
        .collect();
    let refs: Vec<&[u8]> = sent.iter().map(|p| p.as_slice()).collect();
    assert_eq!(tx.send_batch(&refs).unwrap(), sizes.len());
    assert_same(&recv_n(&rx, &mut bufs, sizes.len()).datagrams, &sent);
    assert!(tx.send_segments(&buf, 0).is_err());
    assert_eq!(tx.send_segments(&[], 1000).unwrap(), 0);
}

#[test]
fn large_datagrams_arrive_whole() {
    let (rx, at) = receiver();
    let (prx, pat) = plain_socket();
    let tx = sender(at);
    let ptx = sender(pat);
    let sent: Vec<Vec<u8>> = (0..3).map(|i| packet(i, 60_000)).collect();
    let refs: Vec<&[u8]> = sent.iter().map(|p| p.as_slice()).collect();
    assert_eq!(tx.send_batch(&refs).unwrap(), 3);
    assert_eq!(ptx.send_batch(&refs).unwrap(), 3);
    let mut bufs = RecvBufs::default();
    assert_same(&recv_n(&rx, &mut bufs, 3).datagrams, &sent);
    assert_same(&plain_recv_n(&prx, 3), &sent);
    // 9000-byte datagrams (jumbo frames): GSO carries 7 per send on loopback's 64 KiB MTU.
    let sent: Vec<Vec<u8>> = (0..16).map(|i| packet(i, 9000)).collect();
    let refs: Vec<&[u8]> = sent.iter().map(|p| p.as_slice()).collect();
    assert_eq!(tx.send_batch(&refs).unwrap(), 16);
    assert_eq!(ptx.send_batch(&refs).unwrap(), 16);
    assert_same(&recv_n(&rx, &mut bufs, 16).datagrams, &sent);
    assert_same(&plain_recv_n(&prx, 16), &sent);
    assert_eq!(tx.send(&sent[0]).unwrap(), 9000);
    assert_same(&recv_n(&rx, &mut bufs, 1).datagrams, &sent[..1]);
}

#[test]
fn every_path_delivers_the_same_datagrams() {
    let (rx, at) = receiver();
    let tx = sender(at);
    let sent: Vec<Vec<u8>> = (0..150).map(|i| packet(i, RTP)).collect();
    let refs: Vec<&[u8]> = sent.iter().map(|p| p.as_slice()).collect();
    let mut bufs = RecvBufs::default();
    for path in [SendPath::Gso, SendPath::Mmsg, SendPath::Plain] {
        assert_eq!(tx.set_path(path), path);
        assert_eq!(tx.send_batch(&refs).unwrap(), 150, "{path:?}");
        assert_same(&recv_n(&rx, &mut bufs, 150).datagrams, &sent);
    }
}

#[test]
fn a_failing_gso_send_turns_gso_off_and_the_batch_still_arrives() {
    let (rx, at) = receiver();
    let tx = sender(at);
    gso_on(&tx);
    // With UDP checksums off (SO_NO_CHECK) the kernel refuses segmented sends with EINVAL, as a
    // device without checksum offload does with EIO.
    let no_check: libc::c_int = 1;
    // SAFETY: a valid socket, option and c_int of the size given.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(tx.socket()),
            libc::SOL_SOCKET,
            libc::SO_NO_CHECK,
            (&no_check as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    let sent: Vec<Vec<u8>> = (0..64).map(|i| packet(i, RTP)).collect();
    let refs: Vec<&[u8]> = sent.iter().map(|p| p.as_slice()).collect();
    assert_eq!(tx.send_batch(&refs).unwrap(), 64);
    let mut bufs = RecvBufs::default();
    assert_same(&recv_n(&rx, &mut bufs, 64).datagrams, &sent);
    assert_eq!(
        tx.gso_status(),
        GsoStatus::Disabled {
            errno: libc::EINVAL
        }
    );
    assert_eq!(tx.path(), SendPath::Mmsg);
    assert!(tx.gso_status().to_string().contains("GSO turned off"));
    assert_eq!(tx.send_batch(&refs).unwrap(), 64);
    assert_same(&recv_n(&rx, &mut bufs, 64).datagrams, &sent);
}

#[test]
fn every_datagram_has_a_kernel_receive_timestamp() {
    let clock = Clock::new();
    let (rx, at) = receiver();
    let tx = sender(at);
    let before = clock.realtime_ns();
    let buf: Vec<u8> = (0..50 * RTP).map(|k| k as u8).collect();
    assert_eq!(tx.send_segments(&buf, RTP).unwrap(), 50);
    let mut bufs = RecvBufs::default();
    let got = recv_n(&rx, &mut bufs, 50);
    let after = clock.realtime_ns();
    for (i, ts) in got.timestamps.iter().enumerate() {
        let ts = ts.unwrap_or_else(|| panic!("datagram {i} has no SO_TIMESTAMPNS time"));
        assert!(
            (before..=after).contains(&ts),
            "datagram {i}: {ts} outside [{before}, {after}]"
        );
    }
    assert_eq!(rx.dropped_total(), Some(0));
}

#[test]
fn receive_queue_overflows_are_counted() {
    let o = SocketOptions {
        buffer_bytes: 64 << 10,
        read_timeout: Some(Duration::from_millis(100)),
    };
    let rx = BatchReceiver::open(&RtpUrl::unicast((LO, 0).into()), &o).unwrap();
    let tx = sender(rx.local_addr().unwrap());
    tx.set_path(SendPath::Mmsg);
    let buf = vec![7u8; 2000 * RTP];
    assert_eq!(tx.send_segments(&buf, RTP).unwrap(), 2000);
    let mut bufs = RecvBufs::default();
    // Drain what fitted; the count rides on datagrams queued after the drops.
    let mut drained = 0;
    loop {
        match rx.recv_batch(&mut bufs) {
            Ok(b) => drained += b.count(),
            Err(e) if is_timeout(&e) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(drained < 2000, "a 64 KiB buffer held {drained} datagrams");
    tx.send(b"after the flood").unwrap();
    let batch = rx.recv_batch(&mut bufs).unwrap();
    let dropped = batch.dropped_total().expect("SO_RXQ_OVFL not enabled");
    // Loopback can also drop in the device backlog, which this counter does not see.
    assert!(
        dropped > 0 && dropped as usize + drained <= 2000,
        "{dropped} dropped, {drained} received of 2000"
    );
    assert_eq!(rx.dropped_total(), Some(dropped));
}

#[test]
fn batches_allocate_nothing() {
    let (rx, at) = receiver();
    let tx = sender(at);
    let buf: Vec<u8> = (0..64 * RTP + 100).map(|k| k as u8).collect();
    let list: Vec<&[u8]> = buf.chunks(RTP).collect();
    let mut bufs = RecvBufs::default();
    let mut round = |tx: &BatchSender| -> usize {
        let mut total = 0;
        tx.send_batch(&list).unwrap();
        tx.send_segments(&buf, RTP).unwrap();
        let mut n = 0;
        while n < 2 * list.len() {
            let batch = rx.recv_batch(&mut bufs).unwrap();
            for d in batch {
                n += 1;
                total += d.data.len() + d.kernel_rx_realtime_ns.is_some() as usize;
            }
        }
        total
    };
    for path in [SendPath::Gso, SendPath::Mmsg, SendPath::Plain] {
        tx.set_path(path);
        round(&tx);
        let before = allocs();
        for _ in 0..20 {
            assert_eq!(round(&tx), 2 * (buf.len() + list.len()));
        }
        assert_eq!(allocs() - before, 0, "{path:?} allocated");
    }
}

#[test]
fn large_datagrams_fragment_and_gso_keeps_to_the_mtu() {
    // A network namespace of this thread's own, whose loopback has a 1500-byte MTU, like an
    // Ethernet link: 9000-byte datagrams must be fragmented and reassembled, and GSO may carry
    // only segments that fit one frame. Needs CAP_SYS_ADMIN; skipped without it.
    std::thread::spawn(|| {
        // SAFETY: unshare affects only this thread's network namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            eprintln!(
                "skipped: cannot unshare a network namespace: {}",
                std::io::Error::last_os_error()
            );
            return;
        }
        lo_up_with_mtu(1500);
        let (rx, at) = receiver();
        let (prx, pat) = plain_socket();
        let tx = sender(at);
        let ptx = sender(pat);
        assert_eq!(tx.gso_status(), GsoStatus::On { max_segment: 1472 });
        let mut bufs = RecvBufs::default();
        for len in [RTP, 1472, 2000, 9000, 60_000] {
            let sent: Vec<Vec<u8>> = (0..8).map(|i| packet(i, len)).collect();
            let refs: Vec<&[u8]> = sent.iter().map(|p| p.as_slice()).collect();
            assert_eq!(tx.send_batch(&refs).unwrap(), 8, "{len}");
            assert_eq!(ptx.send_batch(&refs).unwrap(), 8, "{len}");
            assert_same(&recv_n(&rx, &mut bufs, 8).datagrams, &sent);
            assert_same(&plain_recv_n(&prx, 8), &sent);
        }
        assert!(matches!(tx.gso_status(), GsoStatus::On { .. }));
    })
    .join()
    .unwrap();
}

/// Brings this namespace's `lo` up with `mtu`.
fn lo_up_with_mtu(mtu: i32) {
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY (zeroed): ifreq is plain C data.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_mtu = mtu;
    // SAFETY: `ifr` is a valid ifreq naming `lo`; the ioctls read and write only it.
    unsafe {
        assert_eq!(libc::ioctl(s.as_raw_fd(), libc::SIOCSIFMTU, &mut ifr), 0);
        assert_eq!(libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr), 0);
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        assert_eq!(libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &mut ifr), 0);
    }
}

#[test]
fn buffer_reports_say_what_was_granted_and_what_to_run() {
    let s = UdpSocket::bind((LO, 0)).unwrap();
    let limit = read_limit(true).expect("cannot read net.core.rmem_max");
    let wanted = 2 * limit + (1 << 20);
    let r = tune_buffers(&s, wanted, true);
    assert_eq!(r.wanted, wanted);
    assert!(r.granted > 0);
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        // Root: SO_RCVBUFFORCE goes past the limit.
        assert_eq!(r.accepted(), wanted, "{r}");
        assert_eq!(r.granted, 2 * wanted);
        assert!(!r.is_capped());
        assert_eq!(r.advice, None);
    } else {
        assert_eq!(r.accepted(), limit, "{r}");
        assert_eq!(r.capped_by, Some("net.core.rmem_max"));
    }
    let w = tune_buffers(&s, 1 << 20, false);
    assert_eq!(
        (w.recv, w.accepted(), w.advice.as_deref()),
        (false, 1 << 20, None)
    );
    // What a capped request says, without root or changing any sysctl: the pure judgement.
    let r: BufferReport = classify(32 << 20, 2 * 4_194_304, true, Some(4_194_304));
    assert_eq!(r.capped_by, Some("net.core.rmem_max"));
    assert_eq!(
        r.advice.as_deref(),
        Some(
            "the kernel capped SO_RCVBUF at 4194304 bytes (net.core.rmem_max = 4194304) but this \
             stream needs 33554432: run as root (which uses SO_RCVBUFFORCE), or raise the limit \
             with `sysctl -w net.core.rmem_max=33554432`"
        )
    );
    assert!(r.to_string().starts_with(
        "SO_RCVBUF: 33554432 bytes wanted, 4194304 accepted (8388608 reported by the kernel); "
    ));
    // The sockets report what they got.
    let (rx, at) = receiver();
    assert_eq!(rx.buffer_report().accepted(), 4 << 20);
    assert_eq!(sender(at).buffer_report().wanted, 4 << 20);
}
