//! Lab scenarios: a network, the flows over it, and parameter sweeps, as a TOML file.
//!
//! The same file runs in the simulator (virtual time) and, later, in the emulator (real
//! sockets); this module only reads and checks it. The format, by example (every key is
//! documented in `docs/lab.md`):
//!
//! ```toml
//! name = "two-clients"
//! seed = 1                 # the same seed replays the same run
//! duration = "10s"         # how long flows send, unless a flow says otherwise
//!
//! [sweep]                  # every combination runs; "${rate}" below takes each value
//! rate = ["2mbit", "4mbit"]
//!
//! [links.lan]              # link profiles, by name
//! rate = "1gbit"
//! [links.poor]
//! rate = "10mbit"
//! delay = "20ms"
//! netem_limit = 2
//!
//! [topology]
//! shape = "star"
//! center = "switch"
//! leaves = [{ node = "server", link = "lan" }, { node = "client", link = "poor" }]
//!
//! [[flow]]
//! kind = "udp"
//! from = "server"
//! to = "client"
//! rate = "${rate}"
//! ```
//!
//! Errors name the line and say what is expected ([`ConfigError`]). A sweep value replaces
//! its `"${name}"` reference in place, so an error in a swept value is reported at the line
//! of the reference, for the sweep point that has it.

mod checks;
mod flow;
mod parse;
mod sweep;
mod topology;
mod values;

pub use crate::serve::{ConfigError, ConfigErrorKind};
pub use sweep::{Point, ScenarioFile, MAX_REPLICATES, REPLICATE};

use std::collections::BTreeMap;
use std::time::Duration;

/// One point of a scenario, every sweep reference resolved, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// `name`: the scenario's name (the results directory's default name).
    pub name: String,
    /// `description`: one line for the report (empty if not given).
    pub description: String,
    /// `seed` (0 by default): seeds every link's and flow's randomness; the same seed
    /// replays the same run, byte for byte.
    pub seed: u64,
    /// How long flows send by default.
    pub duration: Duration,
    /// How long the run goes on after the last flow stops, for packets in flight.
    pub drain: Duration,
    /// Bin width of per-interval figures (throughput over time).
    pub interval: Duration,
    /// What the run records of every packet (`trace`).
    pub trace: Trace,
    /// Keep full delay and inter-arrival distributions per receiver.
    pub histograms: bool,
    /// Every node, in the order first named.
    pub nodes: Vec<String>,
    /// Every link: two directions between two nodes.
    pub links: Vec<LinkDecl>,
    /// The `[[flow]]` tables, in file order; at least one, names unique.
    pub flows: Vec<FlowDecl>,
    /// Figures from elsewhere (a paper, a seed experiment) to show beside the measured ones.
    pub reference: Option<Reference>,
    /// What a source concluded, to be checked against the run (`[[claim]]`).
    pub claims: Vec<Claim>,
}

/// A full-duplex link between `a` and `b`.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkDecl {
    /// One end's node name.
    pub a: String,
    /// The other end's node name (never `a`).
    pub b: String,
    /// The profile from `a` to `b`, by name, and its settings.
    pub ab: (String, LinkProfile),
    /// The profile from `b` to `a`.
    pub ba: (String, LinkProfile),
}

/// What a link does to packets, in one direction (mapped onto the link model by the lab).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkProfile {
    /// bit/s; `None`: infinite.
    pub rate_bps: Option<u64>,
    /// A tc-tbf token bucket of this many bytes instead of a serializer.
    pub burst_bytes: Option<usize>,
    /// tc-tbf's `latency`: the longest a packet may wait; the queue then holds
    /// `rate · latency + burst` bytes, as tc computes tbf's limit (`queue_bytes` is then set).
    pub tbf_latency: Option<Duration>,
    /// Propagation delay added to every packet (0 when not given).
    pub delay: Duration,
    /// Extra delay per packet, drawn as `jitter_distribution` says (uniform: from
    /// `[0, jitter]`); 0 when not given.
    pub jitter: Duration,
    /// How `jitter` is drawn, and whether packets may then overtake each other.
    pub jitter_distribution: JitterDistribution,
    /// Which packets the link loses (none by default).
    pub loss: LossDecl,
    /// Probability, 0 to 1, that a packet arrives twice.
    pub duplicate: f64,
    /// Probability, 0 to 1, that a packet is held back `reorder_delay` extra, so later ones
    /// overtake it.
    pub reorder: f64,
    /// How long a packet picked by `reorder` is held back.
    pub reorder_delay: Duration,
    /// Drop-tail limit of the queue in front of the rate limiter, packets (`None`:
    /// unbounded).
    pub queue_packets: Option<usize>,
    /// Drop-tail limit of the same queue, bytes (`None`: unbounded); with `tbf_latency`,
    /// computed from it.
    pub queue_bytes: Option<usize>,
    /// netem's `limit`: counts every packet held, those still serving their delay too.
    pub netem_limit: Option<usize>,
    /// Time the testbed held each packet beyond its delay and serialization (a fitted
    /// property of a real netem set-up, see the seed001 scenarios); added to the delay.
    pub hold_extra: Duration,
    /// How the profile changes over time (`None`: it does not).
    pub variation: Option<Variation>,
    /// A Mahimahi packet-delivery trace as the capacity, instead of `rate_bps`.
    pub delivery: Option<DeliveryDecl>,
}

/// A link profile that changes over time. Each step's profile is the base profile with the
/// step's keys replacing its own.
#[derive(Clone, Debug, PartialEq)]
pub enum Variation {
    /// From each offset on (the base profile until the first), the last one for good.
    Steps(Vec<(Duration, LinkProfile)>),
    /// The base profile for `duty · period`, then `low`, repeating.
    Square {
        /// The length of one cycle.
        period: Duration,
        /// The share of each period spent at the base profile, 0 to 1 (0.5 by default).
        duty: f64,
        /// The profile for the rest of each period: the base profile with `low`'s keys
        /// replacing its own.
        low: Box<LinkProfile>,
    },
}

/// What a run records of every packet: `trace = true` (or `"csv"`) a row per packet event
/// (sent, queued, dropped, delivered) in `packets.csv`; `"pcap"` each host's packets, sent and
/// received, in a capture file Wireshark and tcpdump read; `"csv+pcap"` both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// `packets.csv`.
    pub csv: bool,
    /// `NODE.pcap` per host.
    pub pcap: bool,
}

impl Trace {
    /// From the key's value: `true`/`false`, `"csv"`, `"pcap"` or `"csv+pcap"`.
    pub fn parse(v: &toml::Value) -> Result<Trace, String> {
        match v {
            toml::Value::Boolean(b) => Ok(Trace {
                csv: *b,
                pcap: false,
            }),
            toml::Value::String(s) => match s.as_str() {
                "csv" => Ok(Trace {
                    csv: true,
                    pcap: false,
                }),
                "pcap" => Ok(Trace {
                    csv: false,
                    pcap: true,
                }),
                "csv+pcap" | "pcap+csv" => Ok(Trace {
                    csv: true,
                    pcap: true,
                }),
                other => Err(format!(
                    "trace = \"{other}\": write true (or \"csv\"), \"pcap\" or \"csv+pcap\""
                )),
            },
            other => Err(format!(
                "trace = {other}: write true (or \"csv\"), \"pcap\" or \"csv+pcap\""
            )),
        }
    }

    /// Whether anything is recorded.
    pub fn any(self) -> bool {
        self.csv || self.pcap
    }
}

/// Where a delivery trace comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeliveryDecl {
    /// Opportunity times in ms, written in the scenario.
    Millis(Vec<u64>),
    /// A Mahimahi trace file, relative to the scenario file's directory.
    File(String),
}

/// How jitter is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JitterDistribution {
    /// Uniform in `[0, jitter]`, added, order kept.
    #[default]
    Uniform,
    /// netem's `distribution normal`, order kept.
    Normal,
    /// netem's `distribution normal`, packets may overtake each other.
    NormalReorder,
    /// netem's `distribution pareto`, order kept.
    Pareto,
    /// netem's `distribution pareto`, packets may overtake each other.
    ParetoReorder,
    /// netem's `distribution paretonormal`, order kept.
    ParetoNormal,
    /// netem's `distribution paretonormal`, packets may overtake each other.
    ParetoNormalReorder,
}

/// How a link loses packets.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum LossDecl {
    /// No loss (the default).
    #[default]
    None,
    /// Independent loss with this probability.
    Random(f64),
    /// Gilbert-Elliott: `p` good→bad, `r` bad→good, loss probability in each state.
    GilbertElliott {
        /// Probability, per packet, of going from the good state to the bad one.
        p: f64,
        /// Probability, per packet, of going from the bad state back to the good one.
        r: f64,
        /// Loss probability in the good state (0 by default).
        loss_good: f64,
        /// Loss probability in the bad state (1 by default).
        loss_bad: f64,
    },
}

/// An application in the network.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowDecl {
    /// The flow's name, unique in the scenario (`flowN`, N its place from 1, by default).
    pub name: String,
    /// The sending node.
    pub from: String,
    /// Receiving nodes (one: unicast; several: a multicast group). For a command flow, the
    /// hosts it talks to (maybe none).
    pub to: Vec<String>,
    /// When it starts sending, from the run's start (0 by default).
    pub start: Duration,
    /// How long it sends (the scenario's `duration` by default).
    pub duration: Duration,
    /// What it sends, with the settings of its kind.
    pub kind: FlowKind,
    /// When receivers of a group join and leave it (times from the run's start); a receiver
    /// not named is a member from start to end.
    pub membership: Vec<Membership>,
}

/// One receiver's time in its group: it joins at `join` and, with `leave`, leaves then (an
/// RTP receiver says goodbye: RTCP BYE, and TFMCC's leaving report, RFC 4654 §4.4).
#[derive(Clone, Debug, PartialEq)]
pub struct Membership {
    /// The receiving node, one of the flow's `to`.
    pub node: String,
    /// When it joins, from the run's start (0 by default).
    pub join: Duration,
    /// When it leaves, from the run's start (after `join`); `None`: it stays to the end.
    pub leave: Option<Duration>,
}

pub use crate::repair::Repair;

/// What a flow is (`kind = ...`), with the keys only that kind has.
#[derive(Clone, Debug, PartialEq)]
pub enum FlowKind {
    /// UDP as iperf sends it: `rate` of payload in `payload`-byte datagrams, or a square wave.
    Udp {
        /// Payload of each datagram, bytes, 1 to 65507 (1470 by default, iperf 2's).
        payload: u32,
        /// The payload rate over time.
        rate: RateShape,
    },
    /// TCP bulk transfer: as fast as the congestion control allows (or at most `rate_bps`
    /// from the application, as iperf's `-b` limits a TCP test), `bytes` or until the end.
    /// `mtu`: the largest IP packet (its segments are `mtu − 40` bytes; 1500 by default).
    Tcp {
        /// The congestion control (CUBIC by default).
        cc: TcpCc,
        /// Stop after this many bytes (`None`: send until the flow's end).
        bytes: Option<u64>,
        /// The application's limit, bit/s (`None`: as fast as the congestion control allows).
        rate_bps: Option<u64>,
        /// The largest IP packet, bytes, 576 to 9000 (`None`: 1500).
        mtu: Option<u32>,
        /// The congestion window it starts with, segments, 1 to 100 (`None`: the TCP's own:
        /// the kernel's 10, RFC 6928; ns-2's `windowInit_` is 2). Emu mode sets it as the
        /// sending host's route to the receiver's `initcwnd` (so every TCP between those two
        /// hosts starts from it); the simulator's TCP (smoltcp) starts with 2,048 bytes
        /// whatever it is told, so it takes only the whole segments in those (2 at an `mtu`
        /// of 1040, 1 at 1500).
        initial_window: Option<u32>,
        /// The most segments in flight, 1 to 10000 (`None`: no cap beyond the buffers):
        /// ns-2's `window_` (20 by default in ns-2, whose TCP sends at most
        /// `min(cwnd_, window_)` packets). The simulator's sender holds that many segments in
        /// its send buffer, where smoltcp keeps what it sent until it is acknowledged (its
        /// receiver advertises one more, which bounds the congestion window). Emu
        /// mode sets `cwnd lock max_window` on the sending host's route to the receiver and
        /// primes the kernel's TCP metrics cache with it (the kernel reads a locked `cwnd`
        /// only from there), so the cap holds for every TCP from the sending host to the
        /// receiving one; two flows between them may not ask different caps.
        max_window: Option<u32>,
        /// Whether the receiver delays its ACKs (true, the default: at most every second
        /// segment or after a delay, as the kernel's and smoltcp's do) or ACKs every segment
        /// at once (false: ns-2's `TCPSink`). smoltcp's sender grows its window per ACK, not
        /// per segment acknowledged as the kernel's does, so behind delayed ACKs it climbs at
        /// about half the kernel's rate. Emu mode sets `quickack 1` on the receiving host's
        /// route to the sender (so it holds for every TCP there with that peer).
        delayed_ack: bool,
    },
    /// An RTP stream of MPEG-TS at a constant rate, sent by the engine's sender session:
    /// null-free constant-rate TS, or with `video` the test pattern encoded with H.264 at
    /// 70 % of the rate and muxed at the rate (its frames are then known, for frame figures).
    /// With `video`, `playout_deadline` is the viewers' play-out deadline (seed 002's: a
    /// frame not complete by its send time plus this is not shown in its slot).
    /// `content` is what the video shows (with `video`).
    ///
    /// With a rate controller (`cc`, other than `fixed`), `rate_bps` is the most the stream
    /// may send; the source follows the controller: the constant-rate TS at once, the video
    /// at its next GOP (a new encoder at the new rate: the rendition ladder of one live
    /// encoder). `start_bps` is where a controller without slow start begins (ASMP).
    /// `mtu` limits the IP packets (TS packets per RTP packet follow), `gop` sets the video's
    /// frames per GOP (its IDR interval; one second by default).
    ///
    /// With `coded`, the video is sent as Evalvid-RA sends it instead: the content encoded once
    /// per quantizer of a ladder, each GOP at the rung the VBR controller picks from the rate
    /// allowed, every frame as coded over RTP (RFC 6416, RFC 6184), no MPEG-TS, no padding.
    ///
    /// `rtcp_interval` is the sender's and receivers' minimum RTCP interval (RFC 3550 §6.2:
    /// 5 s unless the scenario says otherwise, [`RTCP_MIN_INTERVAL`]).
    Rtp {
        /// The MPEG-TS rate, bit/s, at least 10 000; with a controller, the most the stream
        /// may send.
        rate_bps: u64,
        /// The video's picture (`None`: null-free constant-rate TS, no video).
        video: Option<VideoDecl>,
        /// The viewers' play-out deadline (only with `video`; `None`: no deadline).
        playout_deadline: Option<Duration>,
        /// What the video shows (the pattern by default; only with `video`).
        content: VideoContent,
        /// The rate controller (`fixed`, no control, by default).
        cc: RtpCc,
        /// Where the controller begins, bit/s (`start_rate`; only with a controller; `None`:
        /// a quarter of `rate_bps`).
        start_bps: Option<u64>,
        /// The largest IP packet, bytes, 300 to 9000 (`None`: 7 TS packets per RTP packet).
        mtu: Option<u32>,
        /// Frames per GOP, at least 1 (only with `video`; `None`: one second's).
        gop: Option<u32>,
        /// `Some`: the video is sent as Evalvid-RA sends it (only with `video`).
        coded: Option<CodedVideo>,
        /// The minimum RTCP interval, 100 ms to 60 s ([`RTCP_MIN_INTERVAL`] by default).
        rtcp_interval: Duration,
        /// How viewers get lost packets back (`repair = "rtx"`, `"fec"`, `"rtx+fec"`; none by
        /// default).
        repair: Repair,
    },
    /// A real program run in the `from` host's namespace (emu mode only), from `start` until
    /// it exits or `duration` has passed (then it is interrupted). In `args`, `@{NODE}` is a
    /// host's address, `@{group:FLOW}` the group address of a flow with several receivers
    /// (this one's included: its `to` hosts are then routed from `from`), `@{out}` the
    /// directory its output goes to.
    Command {
        /// The program to run (`iperf3`, `ffmpeg`, `metronome`, …); not empty.
        program: String,
        /// Its arguments, the `@{…}` placeholders not yet replaced (none by default).
        args: Vec<String>,
    },
}

/// RFC 3550's minimum RTCP interval (§6.2, T_min): an RTP flow's `rtcp_interval` unless set.
pub const RTCP_MIN_INTERVAL: Duration = Duration::from_secs(5);

/// A video sent as Evalvid-RA sends it: `codec = "mpeg4"` (or `"h264"`), `quantizers = [2,
/// 31]`, `b_frames = 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodedVideo {
    /// The codec every rung is encoded with.
    pub codec: VideoCodecDecl,
    /// The ladder's finest and coarsest quantizer: a rung for each in between.
    pub quantizers: (u32, u32),
    /// B-frames between reference frames, 0 to 4 (0 by default).
    pub b_frames: u32,
}

/// The codec of a [`CodedVideo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VideoCodecDecl {
    /// MPEG-4 Part 2 (seed 002's), quantizer scale 2–31.
    Mpeg4,
    /// H.264 (x264), QP 0–51.
    H264,
}

impl VideoCodecDecl {
    /// The quantizers a codec has: (lowest, highest).
    pub fn quantizer_range(self) -> (u32, u32) {
        match self {
            VideoCodecDecl::Mpeg4 => (2, 31),
            VideoCodecDecl::H264 => (0, 51),
        }
    }

    /// The ladder used when `quantizers` is not given: (finest, coarsest).
    pub fn default_ladder(self) -> (u32, u32) {
        match self {
            VideoCodecDecl::Mpeg4 => (2, 31),
            // About the MPEG-4 ladder's quality span (QP ≈ 12 + 6·log2 q).
            VideoCodecDecl::H264 => (18, 42),
        }
    }

    /// The name `codec = ...` gives it: `mpeg4` or `h264`.
    pub fn name(self) -> &'static str {
        match self {
            VideoCodecDecl::Mpeg4 => "mpeg4",
            VideoCodecDecl::H264 => "h264",
        }
    }
}

/// What a video flow shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum VideoContent {
    /// The built-in pattern: static, moderate and high-motion scenes of 4 s, in a cycle.
    #[default]
    Pattern,
    /// Generated high-motion content (`metronome_media::motion`, seeded), hard to code as
    /// natural video is: across the MPEG-4 ladder its quality spans the MOS scale.
    Motion(u64),
    /// The user's own video: a Y4M file, or raw planar 4:2:0 (`.yuv`) of the flow's picture
    /// size; a relative path is from the scenario file's directory.
    File(std::path::PathBuf),
    /// FFmpeg lavfi sources (`testsrc2`, `mandelbrot`, `life=seed=1`, …), each for a scene of
    /// 4 s, in a cycle; the picture's size and rate are added to each.
    Lavfi(Vec<String>),
    /// Scenes of generated content of different complexity one after another, in a cycle
    /// (`["motion=calm:300", "motion=still:300", …]`): each scene's pace and frames. Scene `k`
    /// is drawn from seed `k + 1`.
    Scenes(Vec<(ScenePace, u64)>),
}

/// How much a scene of generated content moves (`metronome_media::motion::Pace`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScenePace {
    /// Very low complexity (as *Akiyo*): a still camera, one thing moving a little.
    Still,
    /// Medium (as *News*): a still camera, two things moving slowly.
    Calm,
    /// High to medium (as *Paris*): a drifting camera, three things moving.
    Busy,
    /// Very high (as *Stefan*): fast pans, fast movers.
    Fast,
    /// *highway*'s, `content = "motion"`'s: a camera driving forward.
    Drive,
}

impl ScenePace {
    /// Every pace, in the order error messages list them.
    pub const ALL: [ScenePace; 5] = [
        ScenePace::Still,
        ScenePace::Calm,
        ScenePace::Busy,
        ScenePace::Fast,
        ScenePace::Drive,
    ];

    /// The name a scene is written with (`motion=NAME:FRAMES`).
    pub fn name(self) -> &'static str {
        match self {
            ScenePace::Still => "still",
            ScenePace::Calm => "calm",
            ScenePace::Busy => "busy",
            ScenePace::Fast => "fast",
            ScenePace::Drive => "drive",
        }
    }
}

/// `"motion=PACE:FRAMES"`, one scene of [`VideoContent::Scenes`]; `None` if `s` is not written
/// so at all, an error if it is and is wrong.
fn scene(s: &str) -> Option<Result<(ScenePace, u64), String>> {
    let rest = s.trim().strip_prefix("motion=")?;
    let (pace, frames) = rest.split_once(':')?;
    let Some(pace) = ScenePace::ALL.into_iter().find(|p| p.name() == pace) else {
        let names: Vec<&str> = ScenePace::ALL.iter().map(|p| p.name()).collect();
        return Some(Err(format!(
            "content: '{s}': the pace is one of {}",
            names.join(", ")
        )));
    };
    Some(match frames.parse::<u64>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok((pace, n)),
        _ => Err(format!(
            "content: '{s}': the scene's length is 1 to 1000000 frames, like \"motion=calm:300\""
        )),
    })
}

impl VideoContent {
    /// `"pattern"`, `"motion"` (or `"motion=seed=N"`), a `.y4m` or `.yuv` file, or lavfi
    /// sources: a name with options, no filtergraph syntax.
    pub fn parse(items: &[String]) -> Result<VideoContent, String> {
        if items.len() == 1 {
            let one = items[0].trim();
            if one == "pattern" {
                return Ok(VideoContent::Pattern);
            }
            if one == "motion" {
                return Ok(VideoContent::Motion(1));
            }
            if let Some(seed) = one.strip_prefix("motion=seed=") {
                return seed.parse().map(VideoContent::Motion).map_err(|_| {
                    format!(
                        "content = \"{one}\": the seed is a whole number, like \"motion=seed=3\""
                    )
                });
            }
            let lower = one.to_ascii_lowercase();
            if lower.ends_with(".y4m") || lower.ends_with(".yuv") {
                return Ok(VideoContent::File(std::path::PathBuf::from(one)));
            }
        }
        if items.first().is_some_and(|s| scene(s).is_some()) && items.len() <= 64 {
            return items
                .iter()
                .map(|s| {
                    scene(s).unwrap_or_else(|| {
                        Err(format!(
                            "content: '{s}' is not a scene: write every scene like \"motion=calm:300\""
                        ))
                    })
                })
                .collect::<Result<Vec<_>, String>>()
                .map(VideoContent::Scenes);
        }
        if items.is_empty() || items.len() > 64 {
            return Err("content = \"pattern\", \"motion\", a .y4m or .yuv file, or 1 to 64 lavfi sources like [\"testsrc2\", \"mandelbrot\", \"life=seed=1\"]".into());
        }
        for s in items {
            let (name, opts) = s.split_once('=').unwrap_or((s, ""));
            let name_ok = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            let opts_ok = opts
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"=:._-+".contains(&b));
            if !name_ok || !opts_ok || s.len() > 200 {
                return Err(format!(
                    "content: '{s}' is not a lavfi source: write a source's name and options, like \"life=seed=1:ratio=0.3\" (no filtergraph syntax; size and rate are added)"
                ));
            }
        }
        Ok(VideoContent::Lavfi(items.to_vec()))
    }
}

/// The test pattern's picture: `WIDTHxHEIGHT@FPS`, e.g. `640x360@30`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VideoDecl {
    /// Width, pixels: even, 16 to 4096.
    pub width: u32,
    /// Height, pixels: even, 16 to 4096.
    pub height: u32,
    /// Frames per second, 1 to 60.
    pub fps: u32,
}

impl std::str::FromStr for VideoDecl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!("video = \"{s}\" is not a picture: write it like \"640x360@30\" (even sizes, 1 to 60 fps)")
        };
        let (size, fps) = s.trim().split_once('@').ok_or_else(bad)?;
        let (w, h) = size.split_once('x').ok_or_else(bad)?;
        let v = VideoDecl {
            width: w.parse().map_err(|_| bad())?,
            height: h.parse().map_err(|_| bad())?,
            fps: fps.parse().map_err(|_| bad())?,
        };
        let even = |n: u32| (16..=4096).contains(&n) && n % 2 == 0;
        if !even(v.width) || !even(v.height) || !(1..=60).contains(&v.fps) {
            return Err(bad());
        }
        Ok(v)
    }
}

/// A UDP flow's payload rate over time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RateShape {
    /// Always this many payload bit/s (`rate`).
    Constant(u64),
    /// `high_bps` for `duty · period`, then `low_bps` for the rest, repeating from the flow's
    /// start (`square = { high, low, period, duty }`).
    Square {
        /// The rate of the first part of each period, bit/s.
        high_bps: u64,
        /// The rate of the rest of each period, bit/s.
        low_bps: u64,
        /// The length of one cycle.
        period: Duration,
        /// The share of each period at `high_bps`, 0 to 1 (0.5 by default).
        duty: f64,
    },
}

/// An RTP flow's rate controller: the list the command line and the engine share.
pub use metronome_cc::ControllerKind as RtpCc;

/// A TCP flow's congestion control.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TcpCc {
    /// Reno (RFC 5681): the window halves on loss and grows by one segment per round trip.
    Reno,
    /// CUBIC (RFC 9438), Linux's default and the default here.
    #[default]
    Cubic,
}

/// A conclusion of a source (a seed's paper) to check against the run: `metric` of `flow` on
/// the left side compared by `op` with the right. A side is the metric at one point (picked
/// by sweep values), or the difference between two points (the first less the second).
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// The conclusion in words, as the report shows it.
    pub text: String,
    /// Where it comes from (a paper, a seed's table); empty if not given.
    pub source: String,
    /// The flow whose receivers' figures count (`None`: a figure of the point).
    pub flow: Option<String>,
    /// The figure compared, one of [`CLAIM_METRICS`].
    pub metric: String,
    /// The left side: one point (sweep parameter → value, picking it) or two (the metric at
    /// the first less that at the second).
    pub lhs: Vec<BTreeMap<String, String>>,
    /// How the left side must compare with the right for the claim to hold.
    pub op: ClaimOp,
    /// The right side, written as `lhs` is.
    pub rhs: Vec<BTreeMap<String, String>>,
    /// Why the run may differ, shown when it does.
    pub note: String,
    /// Figures of the same points shown under the claim, the run's own data on why it holds
    /// or not (the controllers' targets, the bottleneck's drops, …).
    pub evidence: Vec<Evidence>,
}

/// A figure shown under a claim (`evidence = ["target_mbps", "throughput_mbps of tcp"]`), at
/// the claim's points.
#[derive(Clone, Debug, PartialEq)]
pub struct Evidence {
    /// One of [`CLAIM_METRICS`].
    pub metric: String,
    /// The flow (`None` for a point's metric, [`POINT_METRICS`]).
    pub flow: Option<String>,
}

impl Evidence {
    /// `metric` or `metric of flow`, as the file writes it.
    pub fn label(&self) -> String {
        match &self.flow {
            Some(f) => format!("{} of {f}", self.metric),
            None => self.metric.clone(),
        }
    }
}

/// The comparison a claim makes (`op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimOp {
    /// `<`: the left side is below the right.
    Less,
    /// `>`: the left side is above the right.
    Greater,
}

impl ClaimOp {
    /// The operator as the file writes it: `<` or `>`.
    pub fn symbol(self) -> &'static str {
        match self {
            ClaimOp::Less => "<",
            ClaimOp::Greater => ">",
        }
    }
}

/// The metrics a claim may compare: per flow, the mean over its receivers; those of
/// [`POINT_METRICS`] are the point's.
pub const CLAIM_METRICS: [&str; 17] = [
    "frames_lost_percent",
    "missed_deadline_percent",
    "frame_delay_ms",
    "cumulative_jitter_ms",
    "first_frame_delay_ms",
    "psnr_y_db",
    "mos",
    "throughput_mbps",
    "loss_percent",
    "delay_ms",
    "p99_delay_ms",
    "rate_cv",
    "target_mbps",
    "quantizer",
    "jain_index",
    "bottleneck_drop_percent",
    "bottleneck_queue_ms",
];

/// The metrics of a whole point, not of one flow.
pub const POINT_METRICS: [&str; 3] = [
    "jain_index",
    "bottleneck_drop_percent",
    "bottleneck_queue_ms",
];

/// A table of reference figures (rows × columns), e.g. a seed's measured loss. Rows are
/// receiving nodes, columns the values of the sweep parameter `by`; each cell is `metric` of
/// that receiver at that point, so the report can put what was measured beside it.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// The table's title in the report.
    pub title: String,
    /// A receiver figure: `loss_percent`, `throughput_bps`, `jitter_us`, `mean_delay_us` (values in µs).
    pub metric: String,
    /// The sweep parameter the columns are values of.
    pub by: String,
    /// The column headings: values of `by`, as written.
    pub columns: Vec<String>,
    /// Each row: a receiving node's name and its figure in each column (one per column).
    pub rows: Vec<(String, Vec<f64>)>,
    /// Where the figures come from.
    pub source: String,
}
