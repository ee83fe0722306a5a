//! A scenario's `[[flow]]` tables → [`FlowDecl`]: each kind's keys, their forms, and the
//! checks that need the nodes of the topology.

use super::values::{Dur, Rate};
use super::{
    CodedVideo, FlowDecl, FlowKind, Membership, RateShape, Repair, RtpCc, TcpCc, VideoCodecDecl,
    VideoContent, RTCP_MIN_INTERVAL,
};
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileFlow {
    name: Option<String>,
    kind: String,
    from: String,
    to: Option<OneOrMany>,
    start: Option<Dur>,
    duration: Option<Dur>,
    rate: Option<Rate>,
    payload: Option<u32>,
    square: Option<RawSquare>,
    cc: Option<String>,
    bytes: Option<u64>,
    video: Option<String>,
    playout_deadline: Option<Dur>,
    content: Option<OneOrMany>,
    program: Option<String>,
    args: Option<Vec<String>>,
    start_rate: Option<Rate>,
    mtu: Option<u32>,
    initial_window: Option<u32>,
    max_window: Option<u32>,
    delayed_ack: Option<bool>,
    gop: Option<u32>,
    codec: Option<String>,
    quantizers: Option<Vec<u32>>,
    b_frames: Option<u32>,
    rtcp_interval: Option<Dur>,
    membership: Option<Vec<RawMembership>>,
    repair: Option<String>,
}

/// `membership = [{ to = "R45", join = "20s", leave = "50s" }]`: when receivers of a group
/// join it and leave it.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct RawMembership {
    to: String,
    join: Option<Dur>,
    leave: Option<Dur>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct RawSquare {
    high: Rate,
    low: Rate,
    period: Dur,
    #[serde(default = "half")]
    duty: f64,
}

fn half() -> f64 {
    0.5
}

impl FileFlow {
    /// `codec`, `quantizers` and `b_frames`: the video as Evalvid-RA sends it.
    fn coded(&self, has_video: bool) -> Result<Option<CodedVideo>, String> {
        let Some(name) = self.codec.as_deref() else {
            if self.quantizers.is_some() || self.b_frames.is_some() {
                return Err(
                    "quantizers and b_frames belong to codec = \"mpeg4\" (or \"h264\"): set it"
                        .into(),
                );
            }
            return Ok(None);
        };
        let codec = match name {
            "mpeg4" => VideoCodecDecl::Mpeg4,
            "h264" => VideoCodecDecl::H264,
            other => {
                return Err(format!(
                    "codec = \"{other}\" is not known; use \"mpeg4\" (MPEG-4 Part 2, seed 002's) or \"h264\""
                ))
            }
        };
        if !has_video {
            return Err(format!(
                "codec = \"{name}\" codes a picture: it needs video = \"352x288@25\""
            ));
        }
        let (lo, hi) = codec.quantizer_range();
        let quantizers = match self.quantizers.as_deref() {
            None => codec.default_ladder(),
            Some(&[a, b]) if lo <= a && a <= b && b <= hi => (a, b),
            Some(q) => {
                return Err(format!(
                    "quantizers = {q:?}: write the ladder's finest and coarsest quantizer, like [2, 31], within {lo}–{hi} for {name}"
                ))
            }
        };
        let b_frames = self.b_frames.unwrap_or(0);
        if b_frames > 4 {
            return Err(format!("b_frames = {b_frames}: at most 4"));
        }
        Ok(Some(CodedVideo {
            codec,
            quantizers,
            b_frames,
        }))
    }

    pub(super) fn resolve(
        &self,
        i: usize,
        nodes: &[String],
        duration: Duration,
    ) -> Result<FlowDecl, String> {
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| format!("flow{}", i + 1));
        let known = |n: &str| nodes.iter().any(|m| m == n);
        if !known(&self.from) {
            return Err(format!(
                "flow '{name}': from = \"{}\" is not a node of the topology",
                self.from
            ));
        }
        let command = self.kind == "command";
        let to = match &self.to {
            Some(OneOrMany::One(s)) => vec![s.clone()],
            Some(OneOrMany::Many(v)) => v.clone(),
            None if command => Vec::new(),
            None => {
                return Err(format!(
                    "flow '{name}': to = \"NODE\" (or a list, for a multicast group) is missing"
                ))
            }
        };
        let mut receivers = Vec::new();
        for t in &to {
            match t.strip_suffix('*') {
                Some(prefix) => {
                    let before = receivers.len();
                    receivers.extend(nodes.iter().filter(|n| n.starts_with(prefix)).cloned());
                    if receivers.len() == before {
                        return Err(format!(
                            "flow '{name}': no node's name starts with '{prefix}'"
                        ));
                    }
                }
                None if known(t) => receivers.push(t.clone()),
                None => {
                    return Err(format!(
                        "flow '{name}': to = \"{t}\" is not a node of the topology"
                    ))
                }
            }
        }
        if receivers.is_empty() && !command {
            return Err(format!("flow '{name}': to names no receiver"));
        }
        if receivers.contains(&self.from) {
            return Err(format!(
                "flow '{name}' sends to its own node '{}'",
                self.from
            ));
        }
        let kind = self.kind(&name)?;
        if matches!(kind, FlowKind::Tcp { .. }) && receivers.len() != 1 {
            return Err(format!(
                "flow '{name}': a TCP flow goes to exactly one node"
            ));
        }
        if let FlowKind::Rtp { cc, .. } = kind {
            if cc != RtpCc::Fixed && !cc.for_groups() && receivers.len() != 1 {
                return Err(format!(
                    "flow '{name}': cc = \"{}\" controls a stream to one receiver, and this one has {}; \
                     for a group use \"tfmcc\" or \"asmp\"",
                    cc.name(),
                    receivers.len()
                ));
            }
        }
        let start = self.start.map_or(Duration::ZERO, |d| d.0);
        let end = start + self.duration.map_or(duration, |d| d.0);
        let membership = self.membership(&name, &receivers, (start, end))?;
        if !membership.is_empty() && matches!(kind, FlowKind::Rtp { video: Some(_), .. }) {
            return Err(format!(
                "flow '{name}': membership with video is not judged yet (a viewer's frames would count from the video's start, not from its join); drop video, or membership"
            ));
        }
        Ok(FlowDecl {
            name,
            from: self.from.clone(),
            to: receivers,
            start,
            duration: end - start,
            kind,
            membership,
        })
    }

    fn kind(&self, name: &str) -> Result<FlowKind, String> {
        if !["command", "udp", "tcp", "rtp"].contains(&self.kind.as_str()) {
            return Err(format!(
                "flow '{name}': kind = \"{}\" is not known; use \"udp\", \"tcp\", \"rtp\" or \"command\"",
                self.kind
            ));
        }
        if let Some((key, _, _)) = self
            .keys()
            .into_iter()
            .find(|(_, set, kinds)| *set && !kinds.contains(&self.kind.as_str()))
        {
            return Err(unused(name, key, &self.kind));
        }
        match self.kind.as_str() {
            "command" => self.command(name),
            "udp" => self.udp(name),
            "tcp" => self.tcp(name),
            _ => self.rtp(name),
        }
    }

    /// Every key only some kinds have: whether it is set, and the kinds that take it, in the
    /// order a flow's first unused key is found.
    fn keys(&self) -> [(&'static str, bool, &'static [&'static str]); 22] {
        const RTP: &[&str] = &["rtp"];
        [
            ("video", self.video.is_some(), RTP),
            ("playout_deadline", self.playout_deadline.is_some(), RTP),
            ("content", self.content.is_some(), RTP),
            ("program", self.program.is_some(), &["command"]),
            ("args", self.args.is_some(), &["command"]),
            ("start_rate", self.start_rate.is_some(), RTP),
            ("mtu", self.mtu.is_some(), &["tcp", "rtp"]),
            ("gop", self.gop.is_some(), RTP),
            ("codec", self.codec.is_some(), RTP),
            ("quantizers", self.quantizers.is_some(), RTP),
            ("b_frames", self.b_frames.is_some(), RTP),
            ("rtcp_interval", self.rtcp_interval.is_some(), RTP),
            ("membership", self.membership.is_some(), RTP),
            ("repair", self.repair.is_some(), RTP),
            ("cc", self.cc.is_some(), &["tcp", "rtp"]),
            ("bytes", self.bytes.is_some(), &["tcp"]),
            ("initial_window", self.initial_window.is_some(), &["tcp"]),
            ("max_window", self.max_window.is_some(), &["tcp"]),
            ("delayed_ack", self.delayed_ack.is_some(), &["tcp"]),
            ("payload", self.payload.is_some(), &["udp"]),
            ("square", self.square.is_some(), &["udp"]),
            ("rate", self.rate.is_some(), &["udp", "tcp", "rtp"]),
        ]
    }

    fn command(&self, name: &str) -> Result<FlowKind, String> {
        let program = match self.program.as_deref().map(str::trim) {
            Some(p) if !p.is_empty() => p.to_string(),
            _ => {
                return Err(format!(
                    "flow '{name}': a command flow needs program = \"iperf3\" (or ffmpeg, gst-launch-1.0, cvlc, metronome, …) and args = [...]"
                ))
            }
        };
        Ok(FlowKind::Command {
            program,
            args: self.args.clone().unwrap_or_default(),
        })
    }

    fn udp(&self, name: &str) -> Result<FlowKind, String> {
        let rate = match (self.rate, self.square) {
            (Some(r), None) => RateShape::Constant(r.0),
            (None, Some(s)) => {
                if !(0.0..=1.0).contains(&s.duty) {
                    return Err(format!("flow '{name}': square.duty must be in 0..1"));
                }
                RateShape::Square {
                    high_bps: s.high.0,
                    low_bps: s.low.0,
                    period: s.period.0,
                    duty: s.duty,
                }
            }
            _ => {
                return Err(format!(
                    "flow '{name}': a udp flow needs either rate = \"2mbit\" or square = {{ high, low, period }}"
                ))
            }
        };
        let payload = self.payload.unwrap_or(1470);
        if !(1..=65_507).contains(&payload) {
            return Err(format!("flow '{name}': payload must be 1 to 65507 bytes"));
        }
        Ok(FlowKind::Udp { payload, rate })
    }

    fn tcp(&self, name: &str) -> Result<FlowKind, String> {
        let cc = match self.cc.as_deref() {
            None | Some("cubic") => TcpCc::Cubic,
            Some("reno") => TcpCc::Reno,
            Some(other) => {
                return Err(format!(
                    "flow '{name}': cc = \"{other}\" is not known; use \"reno\" or \"cubic\""
                ))
            }
        };
        if let Some(m) = self.mtu.filter(|m| !(576..=9000).contains(m)) {
            return Err(format!(
                "flow '{name}': mtu = {m}: an IP packet of 576 to 9000 bytes"
            ));
        }
        if let Some(w) = self.initial_window.filter(|w| !(1..=100).contains(w)) {
            return Err(format!(
                "flow '{name}': initial_window = {w}: a congestion window of 1 to 100 segments"
            ));
        }
        if let Some(w) = self.max_window.filter(|w| !(1..=10_000).contains(w)) {
            return Err(format!(
                "flow '{name}': max_window = {w}: a window of 1 to 10000 segments"
            ));
        }
        Ok(FlowKind::Tcp {
            cc,
            bytes: self.bytes,
            rate_bps: self.rate.map(|r| r.0),
            mtu: self.mtu,
            initial_window: self.initial_window,
            max_window: self.max_window,
            delayed_ack: self.delayed_ack.unwrap_or(true),
        })
    }

    fn rtp(&self, name: &str) -> Result<FlowKind, String> {
        let video = match &self.video {
            Some(v) => Some(v.parse().map_err(|e| format!("flow '{name}': {e}"))?),
            None => None,
        };
        if video.is_none() && self.playout_deadline.is_some() {
            return Err(format!(
                "flow '{name}': playout_deadline needs video = \"640x360@30\" (frames to play out)"
            ));
        }
        let content = match &self.content {
            None => Ok(VideoContent::Pattern),
            Some(_) if video.is_none() => {
                return Err(format!(
                    "flow '{name}': content needs video = \"640x360@30\" (a picture to show it in)"
                ))
            }
            Some(OneOrMany::One(s)) => VideoContent::parse(std::slice::from_ref(s)),
            Some(OneOrMany::Many(v)) => VideoContent::parse(v),
        }
        .map_err(|e| format!("flow '{name}': {e}"))?;
        let cc = match self.cc.as_deref() {
            None => RtpCc::Fixed,
            Some(n) => RtpCc::from_name(n).ok_or_else(|| {
                let names: Vec<String> = RtpCc::ALL
                    .iter()
                    .map(|k| format!("\"{}\"", k.name()))
                    .collect();
                format!(
                    "flow '{name}': cc = \"{n}\" is not known for rtp; use one of {}",
                    names.join(", ")
                )
            })?,
        };
        if self.start_rate.is_some() && cc == RtpCc::Fixed {
            return Err(format!(
                "flow '{name}': start_rate is where a rate controller begins: set cc (\"asmp\", \"gcc\", \"tfmcc\", \"tfrc\") or remove it"
            ));
        }
        if let Some(m) = self.mtu.filter(|m| !(300..=9000).contains(m)) {
            return Err(format!(
                "flow '{name}': mtu = {m}: an IP packet of 300 to 9000 bytes (one TS packet needs 236 with the headers)"
            ));
        }
        if self.gop.is_some() && video.is_none() {
            return Err(format!(
                "flow '{name}': gop needs video = \"352x288@25\" (frames to group)"
            ));
        }
        if self.gop == Some(0) {
            return Err(format!(
                "flow '{name}': gop is a number of frames, at least 1"
            ));
        }
        let coded = self
            .coded(video.is_some())
            .map_err(|e| format!("flow '{name}': {e}"))?;
        let rtcp_interval = self.rtcp_interval.map_or(RTCP_MIN_INTERVAL, |d| d.0);
        if !(Duration::from_millis(100)..=Duration::from_secs(60)).contains(&rtcp_interval) {
            return Err(format!(
                "flow '{name}': rtcp_interval = {:?}: write 100ms to 60s (RFC 3550's minimum is \"5s\")",
                rtcp_interval
            ));
        }
        match self.rate {
            Some(r) if r.0 >= 10_000 => Ok(FlowKind::Rtp {
                rate_bps: r.0,
                video,
                playout_deadline: self.playout_deadline.map(|d| d.0),
                content,
                cc,
                start_bps: self.start_rate.map(|r| r.0),
                mtu: self.mtu,
                gop: self.gop,
                coded,
                rtcp_interval,
                repair: self.repair(name)?,
            }),
            _ => Err(format!(
                "flow '{name}': an rtp flow needs rate = \"1mbit\" (its MPEG-TS rate, at least 10kbit)"
            )),
        }
    }

    /// `repair`: "none", "rtx", "fec[:LxD]" or "rtx+fec[:LxD]"; repairs need a play-out
    /// deadline to respect.
    fn repair(&self, name: &str) -> Result<Repair, String> {
        let repair = match self.repair.as_deref() {
            None => Repair::None,
            Some(r) => Repair::parse(r).map_err(|e| format!("flow '{name}': {e}"))?,
        };
        if repair != Repair::None && self.playout_deadline.is_none() {
            return Err(format!(
                "flow '{name}': repair = \"{}\" needs playout_deadline = \"200ms\" (a repair is of use only before its frame is shown)",
                repair
            ));
        }
        Ok(repair)
    }

    /// `membership`: each entry names receivers of this flow (a name, or a prefix and `*`),
    /// each receiver at most once, joining before it leaves; only a group's receivers.
    fn membership(
        &self,
        name: &str,
        receivers: &[String],
        (start, end): (Duration, Duration),
    ) -> Result<Vec<Membership>, String> {
        let Some(raw) = &self.membership else {
            return Ok(Vec::new());
        };
        if receivers.len() < 2 {
            return Err(format!(
                "flow '{name}': membership is for a multicast group's receivers, and this flow has one receiver; a unicast receiver takes what is sent to it from start to end"
            ));
        }
        let mut out: Vec<Membership> = Vec::new();
        for m in raw {
            let join = m.join.map_or(Duration::ZERO, |d| d.0);
            if m.leave.is_some_and(|l| l.0 <= join) {
                return Err(format!(
                    "flow '{name}': membership of '{}': leave must come after join",
                    m.to
                ));
            }
            if join >= end || m.leave.is_some_and(|l| l.0 <= start) {
                return Err(format!(
                    "flow '{name}': membership of '{}' is outside the flow's time ({} s to {} s from the run's start): it would get nothing",
                    m.to,
                    start.as_secs_f64(),
                    end.as_secs_f64()
                ));
            }
            let named: Vec<&String> = match m.to.strip_suffix('*') {
                Some(prefix) => receivers.iter().filter(|r| r.starts_with(prefix)).collect(),
                None => receivers.iter().filter(|r| **r == m.to).collect(),
            };
            if named.is_empty() {
                return Err(format!(
                    "flow '{name}': membership names '{}', which is not one of the flow's receivers (to = ...)",
                    m.to
                ));
            }
            for node in named {
                if out.iter().any(|o| &o.node == node) {
                    return Err(format!(
                        "flow '{name}': membership names '{node}' twice; give each receiver one join and one leave"
                    ));
                }
                out.push(Membership {
                    node: node.clone(),
                    join,
                    leave: m.leave.map(|l| l.0),
                });
            }
        }
        Ok(out)
    }
}

/// What a flow is told when it sets a key its kind does not have.
fn unused(name: &str, key: &str, kind: &str) -> String {
    format!("flow '{name}': a {kind} flow has no '{key}'; remove it")
}
