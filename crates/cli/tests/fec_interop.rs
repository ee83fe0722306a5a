//! SMPTE 2022-1 FEC between Metronome and GStreamer, both ways, the media through `metronome
//! emu relay` (5 % loss, one way), the FEC (column on the media's port + 2, row on + 4)
//! straight to the receiver.
//!
//! GStreamer rebuilds what the path took from the server's FEC: `serve` with `repair=fec:5x5`
//! sends MPEG-TS over RTP and its FEC; `rtpst2022-1-fecdec` rebuilds, `rtpjitterbuffer` puts
//! the rebuilt packets back in order. The TS GStreamer writes is then all but whole.
//!
//! Metronome rebuilds from GStreamer's: `rtpst2022-1-fecenc` (5 x 5, behind `rtpmp2tpay
//! ssrc=0`, as it requires) and `metronome recv --fec`; and from FFmpeg's: its Pro-MPEG Code
//! of Practice #3 FEC (`-f rtp_mpegts -fec prompeg=l=5:d=5`), which is SMPTE 2022-1's, to the
//! same ports.
//!
//! The live tests take turns (`common::serial`): each runs an encoder, a relay and a decoder
//! in real time.

mod common;

use common::{
    bin, continuity_gaps, lossy_relay, port_run, require, serial, tmp_dir, wait_udp_bound, Running,
};
use serde_json::Value;
use std::time::Duration;

/// GStreamer taking MPEG-TS over RTP on `rtp` and its FEC on `rtp + 2` and `rtp + 4`, the
/// rebuilt stream's TS written to `out`.
fn gstreamer_fec_receiver(rtp: u16, out: &std::path::Path) -> Running {
    let caps = "application/x-rtp,media=video,clock-rate=90000,encoding-name=MP2T,payload=33";
    let fec = "application/x-rtp,payload=96";
    let pipeline = format!(
        "rtpst2022-1-fecdec name=d size-time=1000000000 ! rtpjitterbuffer latency=500 \
         ! rtpmp2tdepay ! filesink location={} \
         udpsrc address=127.0.0.1 port={rtp} caps={caps} ! d.sink \
         udpsrc address=127.0.0.1 port={} caps={fec} ! d.fec_0 \
         udpsrc address=127.0.0.1 port={} caps={fec} ! d.fec_1",
        out.display(),
        rtp + 2,
        rtp + 4
    );
    let mut c = std::process::Command::new("timeout");
    c.args(["-s", "INT", "-k", "5", "30", "gst-launch-1.0", "-e"])
        .args(pipeline.split_whitespace());
    Running::spawn(&mut c)
}

#[test]
fn gstreamer_rebuilds_lost_packets_from_metronomes_fec() {
    let _turn = serial();
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let dir = tmp_dir("fec-interop");
    let (relay_in, gst_rtp) = (port_run(6), port_run(6));
    let relay = lossy_relay(relay_in, gst_rtp);
    // The server's FEC goes to the relay's port + 2 and + 4: on, as it is, to GStreamer's.
    let forwarding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let fec_out = [2, 4].map(|k| forward(relay_in + k, gst_rtp + k, forwarding.clone()));
    let ts = dir.path().join("out.ts");
    let gst = gstreamer_fec_receiver(gst_rtp, &ts);
    wait_udp_bound(gst_rtp + 4, Duration::from_secs(10));
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
            "name=cam,destination=rtp://127.0.0.1:{relay_in},repair=fec:5x5,size=320x240,fps=25,bitrate=1mbit"
        ),
    ]));
    let serve = serve.finish_within(Duration::from_secs(40));
    assert!(serve.succeeded(), "serve: {}", serve.report());
    std::thread::sleep(Duration::from_millis(800));
    forwarding.store(false, std::sync::atomic::Ordering::Relaxed);
    gst.interrupt();
    let gst = gst.finish_within(Duration::from_secs(15));
    let relay = relay.finish_within(Duration::from_secs(30));
    let forwarded: Vec<u64> = fec_out.into_iter().map(|f| f.join().unwrap()).collect();
    let served: Value = serde_json::from_str(&serve.stdout).expect("serve --json");
    common::assert_valid(&served, "serve-streams");
    let stream = &served["streams"][0];
    let relayed: Value = serde_json::from_str(&relay.stdout).expect("relay --json");
    let lost = relayed["lost"].as_u64().unwrap();
    let bytes = std::fs::read(&ts).unwrap_or_default();
    let gaps = continuity_gaps(&bytes);
    let said = format!(
        "relay lost {lost} of {}; server fec {}; FEC forwarded {forwarded:?}; {} TS bytes, \
         {gaps} continuity gaps\n{}\n{}",
        relayed["received"],
        stream["fec"],
        bytes.len(),
        gst.report(),
        relay.report()
    );
    println!("{said}");
    // The server sent a row FEC packet for every 5 media packets, a column's for every 5.
    let packets = stream["packets"].as_u64().unwrap();
    let rows = stream["fec"]["rows"].as_u64().unwrap();
    let columns = stream["fec"]["columns"].as_u64().unwrap();
    assert_eq!(rows, packets / 5, "{said}");
    assert!(columns + 5 >= rows && columns <= rows, "{said}");
    assert_eq!(forwarded, vec![columns, rows], "{said}");
    // 5 % of about 950 packets went missing on the way; GStreamer rebuilt nearly all: each
    // lost packet is otherwise a gap in the TS it writes.
    assert!(lost >= 20, "{said}");
    assert!(bytes.len() > 500_000, "GStreamer wrote too little: {said}");
    assert!(gaps * 4 <= lost as usize, "{said}");
}

/// Forwards what comes to `from` on to `to` for 15 s; how many datagrams it forwarded.
/// Forwards datagrams from port `from` to port `to` while `on` (at most 60 s: the test
/// ends it once the server has finished); how many.
fn forward(
    from: u16,
    to: u16,
    on: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let s = std::net::UdpSocket::bind(("127.0.0.1", from)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    std::thread::spawn(move || {
        let deadline = common::now() + Duration::from_secs(60);
        let (mut n, mut buf) = (0, [0u8; 2048]);
        while common::now() < deadline && on.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok(len) = s.recv(&mut buf) {
                n += s.send_to(&buf[..len], ("127.0.0.1", to)).is_ok() as u64;
            }
        }
        n
    })
}

/// A live test pattern, H.264 in MPEG-TS over RTP (payload type 33, SSRC 0) to `rtp`, with
/// SMPTE 2022-1 FEC over 5 x 5 to `fec_at + 2` (columns) and `fec_at + 4` (rows). 10 s.
fn gstreamer_fec_sender(rtp: u16, fec_at: u16) -> Running {
    let pipeline = format!(
        "videotestsrc is-live=true num-buffers=250 \
         ! video/x-raw,width=320,height=240,framerate=25/1 \
         ! x264enc tune=zerolatency bitrate=800 key-int-max=25 ! mpegtsmux \
         ! rtpmp2tpay ssrc=0 pt=33 ! rtpst2022-1-fecenc name=e rows=5 columns=5 \
         ! udpsink host=127.0.0.1 port={rtp} \
         e.fec_0 ! udpsink host=127.0.0.1 port={} async=false \
         e.fec_1 ! udpsink host=127.0.0.1 port={} async=false",
        fec_at + 2,
        fec_at + 4
    );
    let mut c = std::process::Command::new("timeout");
    c.args(["-s", "INT", "-k", "5", "25", "gst-launch-1.0"])
        .args(pipeline.split_whitespace());
    Running::spawn(&mut c)
}

#[test]
fn metronome_rebuilds_lost_packets_from_gstreamers_fec() {
    let _turn = serial();
    require("gst-launch-1.0", "gstreamer1.0-tools");
    let (relay_in, recv_rtp) = (port_run(2), port_run(6));
    let relay = lossy_relay(relay_in, recv_rtp);
    let recv = fec_receiver(recv_rtp);
    wait_udp_bound(recv_rtp + 4, Duration::from_secs(10));
    wait_udp_bound(relay_in, Duration::from_secs(10));
    let gst = gstreamer_fec_sender(relay_in, recv_rtp).finish_within(Duration::from_secs(30));
    let recv = recv.finish_within(Duration::from_secs(30));
    let relay = relay.finish_within(Duration::from_secs(30));
    let got: Value = serde_json::from_str(&recv.stdout).expect("recv --json");
    let relayed: Value = serde_json::from_str(&relay.stdout).expect("relay --json");
    let repair = &got["repair"];
    let said = format!(
        "relay lost {}; recv: source {}, repair {repair}\n{}\n{}",
        relayed["lost"],
        got["sources"][0],
        gst.report(),
        recv.report()
    );
    println!("{said}");
    // About 900 packets sent; every FEC packet GStreamer sent was read as one.
    assert_rebuilt(&got, 300, &said);
}

/// FFmpeg streaming a live test pattern (H.264 in MPEG-TS over RTP, its `rtp_mpegts` muxer)
/// to `rtp` for 10 s, with its Pro-MPEG COP #3 FEC over 5 x 5: columns to `rtp + 2`, rows to
/// `rtp + 4` (FFmpeg sends them beside the media's port; it has no option to send them
/// elsewhere).
fn ffmpeg_prompeg_sender(rtp: u16) -> Running {
    let mut c = std::process::Command::new("timeout");
    c.args([
        "-s",
        "INT",
        "-k",
        "5",
        "25",
        "ffmpeg",
        "-hide_banner",
        "-nostdin",
    ])
    .args(["-loglevel", "warning", "-re", "-f", "lavfi"])
    .args(["-i", "testsrc2=size=320x240:rate=25", "-t", "10"])
    .args([
        "-c:v",
        "libx264",
        "-tune",
        "zerolatency",
        "-b:v",
        "800k",
        "-g",
        "25",
    ])
    .args(["-f", "rtp_mpegts", "-fec", "prompeg=l=5:d=5"])
    .arg(format!("rtp://127.0.0.1:{rtp}"));
    Running::spawn(&mut c)
}

#[test]
fn metronome_rebuilds_lost_packets_from_ffmpegs_prompeg_fec() {
    let _turn = serial();
    require("ffmpeg", "ffmpeg");
    let (relay_in, recv_rtp) = (port_run(6), port_run(6));
    let relay = lossy_relay(relay_in, recv_rtp);
    // FFmpeg's FEC goes to the relay's port + 2 and + 4: on, as it is, to the receiver's.
    let forwarding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let fec_in = [2, 4].map(|k| forward(relay_in + k, recv_rtp + k, forwarding.clone()));
    let recv = fec_receiver(recv_rtp);
    wait_udp_bound(recv_rtp + 4, Duration::from_secs(10));
    wait_udp_bound(relay_in, Duration::from_secs(10));
    let ffmpeg = ffmpeg_prompeg_sender(relay_in).finish_within(Duration::from_secs(30));
    let recv = recv.finish_within(Duration::from_secs(30));
    forwarding.store(false, std::sync::atomic::Ordering::Relaxed);
    let relay = relay.finish_within(Duration::from_secs(30));
    let forwarded: Vec<u64> = fec_in.into_iter().map(|f| f.join().unwrap()).collect();
    let got: Value = serde_json::from_str(&recv.stdout).expect("recv --json");
    let relayed: Value = serde_json::from_str(&relay.stdout).expect("relay --json");
    let repair = &got["repair"];
    let said = format!(
        "relay lost {}; FEC forwarded {forwarded:?}; recv: {} foreign FEC datagrams, source {}, \
         repair {repair}\n{}\n{}",
        relayed["lost"],
        got["foreign_fec_datagrams"],
        got["sources"][0],
        ffmpeg.report(),
        recv.report()
    );
    println!("{said}");
    assert!(ffmpeg.succeeded(), "{said}");
    // Every FEC packet FFmpeg sent was read as one (two for each five media packets), the
    // first ones too, which pass the relay 10 ms ahead of the stream's first packet and wait
    // for it.
    let read = repair["fec"]["packets"].as_u64().unwrap_or(0);
    assert_eq!(read, forwarded.iter().sum::<u64>(), "{said}");
    assert_eq!(got["foreign_fec_datagrams"].as_u64(), Some(0), "{said}");
    // About 800 packets sent.
    assert_rebuilt(&got, 200, &said);
}

/// `metronome recv --fec` of the stream on `port` (its FEC on + 2 and + 4) for 15 s, with a
/// 500 ms play-out delay, saying what it measured as JSON.
fn fec_receiver(port: u16) -> Running {
    Running::spawn(
        bin()
            .args(["recv", &format!("rtp://127.0.0.1:{port}")])
            .args(["--fec", "--playout-delay", "500ms", "--json"])
            .args(["--duration", "15"]),
    )
}

/// What `recv --fec` said (`got`) after the relay's 5 % loss: at least 20 packets went
/// missing on the way (the network's loss, before repair); more than `fec_packets` FEC
/// packets came, none malformed; at least four losses in five were rebuilt in time, and no
/// more than were lost.
fn assert_rebuilt(got: &Value, fec_packets: u64, said: &str) {
    let repair = &got["repair"];
    let lost = got["sources"][0]["lost"].as_u64().unwrap_or(0);
    assert!(lost >= 20, "{said}");
    let fec = &repair["fec"];
    assert!(fec["packets"].as_u64().unwrap_or(0) > fec_packets, "{said}");
    assert_eq!(fec["malformed"].as_u64(), Some(0), "{said}");
    let useful = repair["fec_useful"].as_u64().unwrap_or(0);
    assert!(useful * 5 >= lost * 4, "{said}");
    assert!(useful <= lost, "{said}");
}

/// SRTP authenticates the stream; SMPTE 2022-1 FEC is not protected, and could rebuild any
/// bytes into it: `recv --fec` on an SRTP stream (an SDP with `a=crypto`) refuses, and says why.
#[test]
fn recv_refuses_fec_beside_srtp() {
    let dir = tmp_dir("fec-srtp");
    let port = port_run(6);
    let sdp = dir.path().join("srtp.sdp");
    let key = "WVNfX19zZW1jdGwgKCkgewkyMjA7fQp9CnVubGVz";
    std::fs::write(
        &sdp,
        format!(
            "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=cam\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
             m=video {port} RTP/SAVP 33\r\na=rtpmap:33 MP2T/90000\r\n\
             a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{key}\r\n"
        ),
    )
    .unwrap();
    let out = common::run(
        bin()
            .arg("recv")
            .arg(&sdp)
            .args(["--fec", "--duration", "1"]),
        Duration::from_secs(20),
    );
    assert!(!out.succeeded(), "{}", out.report());
    assert!(
        out.stderr.contains("not protected by SRTP"),
        "{}",
        out.report()
    );
}
