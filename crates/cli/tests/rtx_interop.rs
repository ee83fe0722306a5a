//! Retransmission (RFC 4588) with NACKs (RFC 4585) between Metronome and GStreamer, both
//! ways, through `metronome emu relay` (5 % loss, one way) and a two-way RTCP proxy here.
//!
//! GStreamer recovers what the path took from Metronome's retransmissions: `serve` with
//! `repair=rtx` sends MPEG-TS over RTP; GStreamer's `rtpjitterbuffer do-retransmission=true`
//! asks through its `rtpsession`, and `rtprtxreceive` turns the server's retransmissions back
//! into the packets they repair. The TS GStreamer writes is then all but whole.
//!
//! Metronome recovers from GStreamer's: `rtprtxsend` keeps what `rtpmp2tpay` sent and answers
//! the requests `rtpsession` makes of `metronome recv --rtx-pt 97`'s NACKs.
//!
//! Over RTSP, `rtspsrc` does all of it by itself from the mount's DESCRIBE: the last test plays
//! a repairing mount across two namespaces that `metronome emu pair` joins with a lossy link.
//!
//! The pipeline is wired by hand rather than with `rtpbin`: `rtprtxreceive` in front of
//! `rtpbin` never sees the jitter buffer's requests (`rtpsession` turns them into NACKs and
//! does not pass them upstream), so it could associate the retransmission SSRC only from an
//! `ssrc-map`; after `rtpsession` it sees them. `rtpssrcdemux` gives the jitter buffer the
//! stream's SSRC, which its requests need. The payload-type map reads original → rtx.

mod common;

use common::{
    bin, continuity_gaps, lossy_relay, port_pair, require, run, tmp_dir, wait_udp_bound, Running,
};
use serde_json::Value;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::thread::JoinHandle;
use std::time::Duration;

/// RTCP both ways between the server and GStreamer (the relay carries the media one way):
/// the server's reports, arriving at `from_server` (where the stream sends its RTCP), go on to
/// `gst_rtcp`; what GStreamer sends to `from_gst` goes back to where the reports came from.
/// Runs for `limit`; returns how many datagrams went each way.
fn rtcp_proxy(
    from_server: UdpSocket,
    from_gst: UdpSocket,
    gst_rtcp: SocketAddr,
    limit: Duration,
) -> JoinHandle<(u64, u64)> {
    std::thread::spawn(move || {
        let deadline = common::now() + limit;
        for s in [&from_server, &from_gst] {
            s.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
        }
        let (mut server, mut out, mut back) = (None, 0, 0);
        let mut buf = [0u8; 2048];
        while common::now() < deadline {
            if let Ok((n, src)) = from_server.recv_from(&mut buf) {
                server = Some(src);
                out += from_server.send_to(&buf[..n], gst_rtcp).is_ok() as u64;
            }
            if let (Ok((n, _)), Some(to)) = (from_gst.recv_from(&mut buf), server) {
                back += from_gst.send_to(&buf[..n], to).is_ok() as u64;
            }
        }
        (out, back)
    })
}

fn gstreamer_receiver(rtp: u16, rtcp: u16, rtcp_to: u16, out: &std::path::Path) -> Running {
    let caps = "application/x-rtp,media=video,clock-rate=90000,encoding-name=MP2T,payload=33";
    let pipeline = format!(
        "rtpsession name=s rtp-profile=avpf rtcp-fraction=20000 \
         udpsrc address=127.0.0.1 port={rtp} caps={caps} ! s.recv_rtp_sink \
         s.recv_rtp_src ! rtprtxreceive payload-type-map=application/x-rtp-pt-map,33=(uint)97 \
         ! rtpssrcdemux ! rtpjitterbuffer do-retransmission=true latency=200 \
         ! rtpmp2tdepay ! filesink location={} \
         udpsrc address=127.0.0.1 port={rtcp} ! s.recv_rtcp_sink \
         s.send_rtcp_src ! udpsink host=127.0.0.1 port={rtcp_to} sync=false async=false",
        out.display()
    );
    let mut c = std::process::Command::new("timeout");
    c.args(["-s", "INT", "-k", "5", "30", "gst-launch-1.0", "-e"])
        .args(pipeline.split_whitespace());
    Running::spawn(&mut c)
}

#[test]
fn gstreamer_recovers_lost_packets_from_metronomes_retransmissions() {
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let _one = common::serial();
    let dir = tmp_dir("rtx-interop");
    let (relay_in, gst_rtp, back) = (port_pair(), port_pair(), port_pair());
    let relay = lossy_relay(relay_in, gst_rtp);
    let any = |p: u16| UdpSocket::bind((Ipv4Addr::LOCALHOST, p)).unwrap();
    let gst_rtcp = SocketAddr::from((Ipv4Addr::LOCALHOST, gst_rtp + 1));
    let proxy = rtcp_proxy(
        any(relay_in + 1),
        any(back),
        gst_rtcp,
        Duration::from_secs(20),
    );
    let ts = dir.path().join("out.ts");
    let gst = gstreamer_receiver(gst_rtp, gst_rtp + 1, back, &ts);
    wait_udp_bound(gst_rtp, Duration::from_secs(10));
    wait_udp_bound(relay_in, Duration::from_secs(10));
    let serve = Running::spawn(bin().args([
        "serve",
        "--duration",
        "10",
        "--send-cost",
        "5us",
        "--json",
        "--stream",
        &format!(
            "name=cam,destination=rtp://127.0.0.1:{relay_in},repair=rtx,size=320x240,fps=25,bitrate=1mbit"
        ),
    ]))
    .finish_within(Duration::from_secs(40));
    assert!(serve.succeeded(), "serve: {}", serve.report());
    // What is in flight arrives; then GStreamer ends its file (EOS on SIGINT).
    std::thread::sleep(Duration::from_millis(500));
    gst.interrupt();
    let gst = gst.finish_within(Duration::from_secs(15));
    let relay = relay.finish_within(Duration::from_secs(30));
    let (out, back) = proxy.join().unwrap();
    let served: Value = serde_json::from_str(&serve.stdout).expect("serve --json");
    let repair = &served["streams"][0]["repair"];
    let relayed: Value = serde_json::from_str(&relay.stdout).expect("relay --json");
    let lost = relayed["lost"].as_u64().unwrap();
    let bytes = std::fs::read(&ts).unwrap_or_default();
    let gaps = continuity_gaps(&bytes);
    let said = format!(
        "relay lost {lost}; server repair {repair}; RTCP {out} out, {back} back; \
         {} TS bytes, {gaps} continuity gaps\n{}\n{}",
        bytes.len(),
        gst.report(),
        relay.report()
    );
    println!("{said}");
    // 5 % of about 950 packets (and of the retransmissions) went missing on the way.
    assert!(lost >= 20, "{said}");
    assert!(bytes.len() > 500_000, "GStreamer wrote too little: {said}");
    // GStreamer asked (through the proxy) and the server answered...
    let sent = repair["packets"].as_u64().unwrap_or(0);
    assert!(back > 0 && sent * 2 >= lost, "{said}");
    assert_eq!(repair["foreign_nacks"].as_u64(), Some(0), "{said}");
    // ... and GStreamer put the packets back: without repair, each lost packet is a gap in
    // the TS it writes (36 for 46 lost, in a run without do-retransmission).
    assert!(gaps * 5 <= lost as usize, "{said}");
}

/// RTCP both ways between a GStreamer sender and `metronome recv` (which answers where the
/// sender reports came from): on one socket, what comes from the receiver's RTCP port goes to
/// `gst_rtcp`, everything else (GStreamer's reports) to the receiver. Runs for `limit`;
/// returns how many datagrams went each way.
fn rtcp_proxy_to_recv(
    socket: UdpSocket,
    recv_rtcp: SocketAddr,
    gst_rtcp: SocketAddr,
    limit: Duration,
) -> JoinHandle<(u64, u64)> {
    std::thread::spawn(move || {
        let deadline = common::now() + limit;
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let (mut down, mut up) = (0, 0);
        let mut buf = [0u8; 2048];
        while common::now() < deadline {
            let Ok((n, src)) = socket.recv_from(&mut buf) else {
                continue;
            };
            if src == recv_rtcp {
                up += socket.send_to(&buf[..n], gst_rtcp).is_ok() as u64;
            } else {
                down += socket.send_to(&buf[..n], recv_rtcp).is_ok() as u64;
            }
        }
        (down, up)
    })
}

/// A live test pattern, H.264 in MPEG-TS over RTP (payload type 33) to `rtp`, with
/// `rtprtxsend` keeping 1 s of it for retransmission on payload type 97; RTCP out to
/// `rtcp_to`, in at `rtcp_in`. 12 s of video (it ends on its own, or on SIGINT).
fn gstreamer_sender(rtp: u16, rtcp_to: u16, rtcp_in: u16) -> Running {
    let pipeline = format!(
        "rtpsession name=s rtp-profile=avpf rtcp-fraction=20000 \
         videotestsrc is-live=true num-buffers=300 \
         ! video/x-raw,width=320,height=240,framerate=25/1 \
         ! x264enc tune=zerolatency bitrate=800 key-int-max=25 ! mpegtsmux \
         ! rtpmp2tpay pt=33 \
         ! rtprtxsend payload-type-map=application/x-rtp-pt-map,33=(uint)97 max-size-time=1000 \
         ! s.send_rtp_sink s.send_rtp_src ! udpsink host=127.0.0.1 port={rtp} sync=false \
         s.send_rtcp_src ! udpsink host=127.0.0.1 port={rtcp_to} sync=false async=false \
         udpsrc address=127.0.0.1 port={rtcp_in} caps=application/x-rtcp ! s.recv_rtcp_sink"
    );
    let mut c = std::process::Command::new("timeout");
    c.args(["-s", "INT", "-k", "5", "20", "gst-launch-1.0"])
        .args(pipeline.split_whitespace());
    Running::spawn(&mut c)
}

#[test]
fn metronome_recovers_lost_packets_from_gstreamers_retransmissions() {
    let _one = common::serial();
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let (relay_in, recv_rtp, proxy_port, gst_in) =
        (port_pair(), port_pair(), port_pair(), port_pair());
    let relay = lossy_relay(relay_in, recv_rtp);
    let local = |p: u16| SocketAddr::from((Ipv4Addr::LOCALHOST, p));
    let proxy = rtcp_proxy_to_recv(
        UdpSocket::bind(local(proxy_port)).unwrap(),
        local(recv_rtp + 1),
        local(gst_in),
        Duration::from_secs(20),
    );
    let recv = Running::spawn(
        bin()
            .args(["recv", &format!("rtp://127.0.0.1:{recv_rtp}")])
            .args(["--rtx-pt", "97", "--json", "--duration", "17"]),
    );
    wait_udp_bound(recv_rtp, Duration::from_secs(10));
    wait_udp_bound(relay_in, Duration::from_secs(10));
    let gst = gstreamer_sender(relay_in, proxy_port, gst_in).finish_within(Duration::from_secs(30));
    let recv = recv.finish_within(Duration::from_secs(30));
    let relay = relay.finish_within(Duration::from_secs(30));
    let (down, up) = proxy.join().unwrap();
    let got: Value = serde_json::from_str(&recv.stdout).expect("recv --json");
    let relayed: Value = serde_json::from_str(&relay.stdout).expect("relay --json");
    let repair = &got["repair"];
    let said = format!(
        "relay lost {}; recv: source {}, repair {repair}; RTCP {down} to recv, {up} back\n{}\n{}",
        relayed["lost"],
        got["sources"][0],
        gst.report(),
        recv.report()
    );
    println!("{said}");
    let lost = got["sources"][0]["lost"].as_u64().unwrap_or(0);
    // 5 % of about 1 000 packets went missing on the way (the network's loss, before repair).
    assert!(lost >= 20, "{said}");
    assert!(up > 0, "no NACK went back: {said}");
    // recv asked, GStreamer answered, and most losses came back before their play-out time.
    let useful = repair["rtx_useful"].as_u64().unwrap_or(0);
    assert!(useful * 5 >= lost * 4, "{said}");
    assert_eq!(repair["rtx_malformed"].as_u64(), Some(0), "{said}");
}

/// An `emu pair` run, interrupted (so that it removes its namespaces) however the test ends.
struct Pair(Option<Running>);

impl Pair {
    /// Two namespaces joined by a link of 10 ms and `loss` each way, for at most 40 s: the
    /// pair, and the first namespace's name and address, then the second's.
    fn start(name: &str, loss: &str) -> (Pair, [(String, String); 2]) {
        // SAFETY: geteuid(2) has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            root,
            "emu pair makes network namespaces: run the test as root"
        );
        let args = ["--loss", loss, "--delay", "10ms", "--duration", "40"];
        let mut pair = Pair(Some(Running::spawn(
            bin()
                .args(["emu", "pair", "--json", "--name", name])
                .args(args),
        )));
        let running = pair.0.as_mut().unwrap();
        running.wait_for("\"namespaces\"", Duration::from_secs(10));
        // The JSON line (stderr may say first that it removed a killed run's namespaces).
        let line = running.seen().iter().find(|l| l.contains("\"namespaces\""));
        let ready: Value = serde_json::from_str(line.unwrap()).expect("emu pair's first line");
        let ns = |i: usize| {
            let n = &ready["namespaces"][i];
            let text = |k: &str| n[k].as_str().unwrap().to_string();
            (text("name"), text("address"))
        };
        let names = [ns(0), ns(1)];
        (pair, names)
    }

    /// Stops it; its last line (what each way carried and lost).
    fn finish(mut self) -> Value {
        let pair = self.0.take().unwrap();
        pair.interrupt();
        let out = pair.finish_within(Duration::from_secs(15));
        let last = out.stdout.lines().last().unwrap_or_default().to_string();
        serde_json::from_str(&last).unwrap_or_else(|_| panic!("emu pair: {}", out.report()))
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        if let Some(pair) = self.0.take() {
            pair.interrupt();
            let _ = pair.finish_within(Duration::from_secs(15));
        }
    }
}

/// What a user does: GStreamer's `rtspsrc` (do-retransmission, its default) plays a mount
/// with `repair = "rtx"` from a server across a lossy network (two namespaces joined by the
/// emulator, 3 % loss each way; beyond loopback, so the server asks for a password), and
/// repairs what the network lost from the server's retransmissions: it set RTX up from the
/// DESCRIBE's SDP alone.
#[test]
fn rtspsrc_recovers_lost_packets_from_a_repairing_mount_across_a_lossy_network() {
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let dir = tmp_dir("rtsp-rtx");
    let user = common::passwd("alice", "open sesame", &[]);
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[[stream]]\nname = \"cam\"\nrepair = \"rtx\"\nplayout_delay = \"400ms\"\n\
             bitrate = \"1mbit\"\nsize = \"320x240\"\nfps = 25\n[rtsp_auth]\n{user}"
        ),
    )
    .unwrap();
    let _one = common::serial();
    let (pair, [(server_ns, server_addr), (viewer_ns, _)]) = Pair::start("rtsprtx", "3%");
    let mut serve = Running::spawn(
        std::process::Command::new("ip")
            .args(["netns", "exec", &server_ns])
            .arg(env!("CARGO_BIN_EXE_metronome"))
            .args(["serve", "--json", "--duration", "16", "--send-cost", "5us"])
            .args(["--rtsp", &format!("{server_addr}:8554"), "--config"])
            .arg(&config),
    );
    serve.wait_for("serving rtsp://", Duration::from_secs(15));
    let ts = dir.path().join("out.ts");
    let gst = run(
        std::process::Command::new("ip")
            .args(["netns", "exec", &viewer_ns])
            .args([
                "timeout",
                "-s",
                "INT",
                "-k",
                "5",
                "12",
                "gst-launch-1.0",
                "-e",
            ])
            .arg("rtspsrc")
            .arg(format!("location=rtsp://{server_addr}:8554/cam"))
            .args([
                "user-id=alice",
                "user-pw=open sesame",
                "protocols=udp",
                "latency=400",
            ])
            .args(["!", "rtpmp2tdepay", "!", "filesink"])
            .arg(format!("location={}", ts.display())),
        Duration::from_secs(30),
    );
    let serve = serve.finish_within(Duration::from_secs(30));
    let link = pair.finish();
    let served: Value = serde_json::from_str(&serve.stdout).expect("serve --json");
    let repair = &served["streams"][0]["repair"];
    let lost = link["there"]["lost"].as_u64().unwrap();
    let bytes = std::fs::read(&ts).unwrap_or_default();
    let gaps = continuity_gaps(&bytes);
    let said = format!(
        "link lost {lost}; server repair {repair}; {} TS bytes, {gaps} continuity gaps\n{}\n{}",
        bytes.len(),
        gst.report(),
        serve.report()
    );
    println!("{said}");
    // 3 % of about 1 200 packets (and of the repairs) went missing on the way.
    assert!(lost >= 10, "{said}");
    assert!(bytes.len() > 500_000, "GStreamer wrote too little: {said}");
    // rtspsrc asked and the server answered...
    let sent = repair["packets"].as_u64().unwrap_or(0);
    assert!(sent * 2 >= lost, "{said}");
    // ... and rtspsrc put the packets back: without repair, each loss is a gap in its TS.
    assert!(gaps * 5 <= lost as usize, "{said}");
}
