//! The controllers by name: the one list that `serve --cc`, `recv --cc`, a scenario's
//! `cc = "…"` and the lab's models all read.

use crate::receiver::AgentKind;
use crate::{
    AsmpConfig, AsmpSender, FixedRate, GccConfig, GccSender, RateController, TfmccConfig,
    TfmccSender, TfrcConfig, TfrcSender,
};
use metronome_time::{Bitrate, Timestamp};

/// A stream's rate controller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ControllerKind {
    /// The rate as declared.
    #[default]
    Fixed,
    /// TFRC (RFC 5348), for one receiver.
    Tfrc,
    /// TFMCC (RFC 4654), for a group.
    Tfmcc,
    /// ASMP (seed 002), from receiver reports.
    Asmp,
    /// GCC (draft-ietf-rmcat-gcc), for one receiver, from RFC 8888 feedback.
    Gcc,
}

/// What every controller is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerParams {
    /// A packet's size on the wire, bytes.
    pub segment_bytes: u32,
    /// Where the rate starts (the fixed rate; ASMP's and GCC's first rate; TFRC and TFMCC
    /// start their own way).
    pub start: Bitrate,
    /// The least the source sends whatever the rate (a constant-rate mux's lowest rate):
    /// TFMCC, ASMP and GCC never go below it (ASMP nor below its own 16 kbit/s). A source
    /// sent at its controller's rate has none (zero): what the rate does not carry waits in
    /// the sender's queue, as Evalvid-RA's application does, and TFMCC keeps RFC 4654's own
    /// start and floor (one packet per `R_max`, one per 8 s).
    pub min: Bitrate,
    /// The ceiling.
    pub max: Bitrate,
}

impl ControllerKind {
    /// Every controller, in the order help texts and the lab list them.
    pub const ALL: [ControllerKind; 5] = [
        ControllerKind::Fixed,
        ControllerKind::Tfrc,
        ControllerKind::Tfmcc,
        ControllerKind::Asmp,
        ControllerKind::Gcc,
    ];

    /// As written on the command line and in scenarios, and shown in reports.
    pub fn name(self) -> &'static str {
        match self {
            ControllerKind::Fixed => "fixed",
            ControllerKind::Tfrc => "tfrc",
            ControllerKind::Tfmcc => "tfmcc",
            ControllerKind::Asmp => "asmp",
            ControllerKind::Gcc => "gcc",
        }
    }

    /// The controller called `name` (as [`ControllerKind::name`] spells it, lower case), or
    /// `None` for a name no controller has.
    pub fn from_name(name: &str) -> Option<ControllerKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// What its receivers run beside their reports.
    pub fn receiver(self) -> AgentKind {
        match self {
            ControllerKind::Tfrc => AgentKind::Tfrc,
            ControllerKind::Tfmcc => AgentKind::Tfmcc,
            ControllerKind::Gcc => AgentKind::Gcc,
            ControllerKind::Fixed | ControllerKind::Asmp => AgentKind::None,
        }
    }

    /// Whether its receivers place each data packet on the sender's clock (RFC 5348 §3.2.1 and
    /// RFC 4654 §2.2.1: data packets carry their send time), so packets carry a send-time
    /// header extension.
    pub fn receivers_need_send_times(self) -> bool {
        matches!(self, ControllerKind::Tfrc | ControllerKind::Tfmcc)
    }

    /// Whether it is rate-based: its packets leave at most at its rate, one every `s / X`,
    /// and what the application makes faster waits in the sender's queue (RFC 5348 §4.6,
    /// RFC 4654 §3.7; the ns-2 agents Evalvid-RA feeds, seed 002's ASMP alike).
    pub fn sends_at_its_rate(self) -> bool {
        matches!(
            self,
            ControllerKind::Tfrc | ControllerKind::Tfmcc | ControllerKind::Asmp
        )
    }

    /// Whether it serves a multicast group (TFMCC, ASMP) rather than one receiver.
    pub fn for_groups(self) -> bool {
        matches!(self, ControllerKind::Tfmcc | ControllerKind::Asmp)
    }

    /// The controller, its clock starting at `epoch`.
    pub fn build(self, p: ControllerParams, epoch: Timestamp) -> Box<dyn RateController> {
        let min = p.min.min(p.max);
        match self {
            ControllerKind::Fixed => Box::new(FixedRate::new(p.start)),
            ControllerKind::Tfrc => Box::new(TfrcSender::new(
                TfrcConfig::new(p.segment_bytes, p.max),
                epoch,
            )),
            ControllerKind::Tfmcc => Box::new(TfmccSender::new(
                TfmccConfig {
                    min_rate: min,
                    ..TfmccConfig::new(p.segment_bytes, p.max)
                },
                epoch,
            )),
            ControllerKind::Asmp => {
                let cfg = AsmpConfig::new(p.segment_bytes, p.start, p.max);
                Box::new(AsmpSender::new(AsmpConfig {
                    min_rate: min.max(cfg.min_rate).min(p.max),
                    ..cfg
                }))
            }
            ControllerKind::Gcc => Box::new(GccSender::new(GccConfig {
                min_rate: min,
                packet_bytes: p.segment_bytes,
                ..GccConfig::new(p.start, p.max)
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_builds_the_controller_of_that_name() {
        let p = ControllerParams {
            segment_bytes: 1356,
            start: Bitrate::mbps(1),
            min: Bitrate::kbps(200),
            max: Bitrate::mbps(4),
        };
        for k in ControllerKind::ALL {
            assert_eq!(ControllerKind::from_name(k.name()), Some(k));
            assert_eq!(k.build(p, Timestamp::ZERO).name(), k.name());
        }
        assert_eq!(ControllerKind::from_name("bbr"), None);
    }
}
