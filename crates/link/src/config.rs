//! What a link does to packets: plain data, so a scenario file can map onto it.
//!
//! The knobs follow Linux netem's (tc-netem(8): `rate`, `delay`/jitter, `loss random`,
//! `loss gemodel`, `reorder`, `duplicate`, `limit`) where the meaning is the same; where ours
//! differs, the field says how.

use crate::delivery::DeliveryTrace;
use std::sync::Arc;
use std::time::Duration;

/// Configuration of one direction of a link.
///
/// `Default` is an ideal link: infinite rate, no delay, no impairments, no queue limit.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Serialization rate in bit/s; `None` is infinite (a packet leaves the moment it is sent).
    pub rate_bps: Option<u64>,
    /// With a rate: the link is a token bucket, as tc-tbf shapes, instead of a serializer.
    /// Tokens accrue at `rate_bps` up to this many bytes (tbf's `burst`; the bucket starts
    /// full); a packet leaves as soon as the bucket holds its size, so after an idle spell up
    /// to `burst` bytes leave at once, and over time no more than `rate_bps` passes. Packets
    /// wait in order; `queue_limit_bytes` is tbf's `limit`. A packet larger than the bucket is
    /// dropped, as tbf drops it.
    pub burst_bytes: Option<usize>,
    /// Propagation delay, added to every packet after serialization.
    pub delay: Duration,
    /// Extra delay drawn uniformly from `[0, jitter]` per packet. Order-preserving: a packet never
    /// arrives before the packet sent before it (unless that one was picked for reordering). Unlike
    /// netem, whose jitter is centred on `delay` (`delay ± jitter`, tc-netem(8)) and can reorder
    /// packets (its `tfifo` sorts by time to send); ours only adds, and keeps order.
    pub jitter: Duration,
    /// How `jitter` is drawn: uniformly added and order-preserving (the default, above), or as
    /// netem's `distribution normal`: `delay + jitter·z`, z standard normal, never below zero,
    /// with or without reordering.
    pub jitter_model: JitterModel,
    /// Which packets are lost on the link, decided per packet from the seeded RNG.
    pub loss: LossModel,
    /// Probability that a packet is held back `reorder_delay` extra, so later packets overtake it.
    /// netem does the opposite (a picked packet skips the delay and overtakes the ones before it);
    /// both reorder, ours keeps `delay` a lower bound for every packet.
    pub reorder: f64,
    /// Extra delay of a packet picked for reordering.
    pub reorder_delay: Duration,
    /// Probability that a delivered packet arrives twice (the copy right after the original).
    pub duplicate: f64,
    /// Drop-tail limit, in bytes, of the queue in front of the rate limiter. `None` is unbounded.
    /// Has no effect without a rate (nothing ever waits).
    pub queue_limit_bytes: Option<usize>,
    /// Drop-tail limit, in packets, of the same queue (the packet on the wire included), as a
    /// router's or tbf's queue counts them. `None` is unbounded; no effect without a rate.
    pub queue_limit_packets: Option<usize>,
    /// netem's own `limit` (tc-netem(8), `sch->limit` in `sch_netem.c`): a packet is dropped
    /// when the link already holds this many, counting every packet accepted and not yet
    /// delivered, those still serving their delay included. This is how an experiment run with
    /// netem's `limit` is reproduced as it ran: with 20 ms of delay, a limit of 2 passes at most
    /// 2 packets per 20 ms whatever the rate. Checked after loss, as netem does.
    pub netem_limit: Option<usize>,
    /// A Mahimahi packet-delivery trace as the link's capacity, instead of `rate_bps` (which
    /// must then be `None`): see [`crate::delivery`]. Queue limits apply as with a rate.
    pub delivery: Option<Arc<DeliveryTrace>>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_bps: None,
            burst_bytes: None,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            jitter_model: JitterModel::Uniform,
            loss: LossModel::None,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            duplicate: 0.0,
            queue_limit_bytes: None,
            queue_limit_packets: None,
            netem_limit: None,
            delivery: None,
        }
    }
}

/// How a link draws each packet's jitter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JitterModel {
    /// `U[0, jitter]` added to the delay; a packet never arrives before the one sent before it.
    #[default]
    Uniform,
    /// netem's `delay D J distribution normal`: `D + J·z` with `z` standard normal (drawn by the
    /// inverse normal CDF from the packet's variate), clamped at zero. With `reorder`, a packet
    /// may overtake the ones before it, as netem's time-sorted queue lets it without a rate;
    /// without, it waits for them, as netem does once a rate is set.
    Normal {
        /// Whether a packet may overtake the ones sent before it (else it waits for them).
        reorder: bool,
    },
    /// netem's `distribution pareto`: `D + J·z`, `z` the Pareto table's quantile (shape 3,
    /// centred on its mean; from −2/3, heavy tail capped at 4), clamped at zero.
    Pareto {
        /// Whether a packet may overtake the ones sent before it (else it waits for them).
        reorder: bool,
    },
    /// netem's `distribution paretonormal`: `z` = ¼ normal + ¾ Pareto, quantile by quantile,
    /// as iproute2 builds the table.
    ParetoNormal {
        /// Whether a packet may overtake the ones sent before it (else it waits for them).
        reorder: bool,
    },
}

impl JitterModel {
    /// Whether a packet may overtake the ones sent before it.
    pub fn reorders(self) -> bool {
        match self {
            JitterModel::Uniform => false,
            JitterModel::Normal { reorder }
            | JitterModel::Pareto { reorder }
            | JitterModel::ParetoNormal { reorder } => reorder,
        }
    }
}

/// How a link loses packets.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum LossModel {
    /// No random loss.
    #[default]
    None,
    /// Each packet is lost independently with this probability (netem `loss random P`).
    Bernoulli(f64),
    /// The two-state Gilbert-Elliott channel (Gilbert 1960, Elliott 1963), as netem's `loss gemodel
    /// p r 1-h 1-k` (Salsano et al., "Definition of a general and intuitive loss model for packet
    /// networks and its implementation in the Netem module in the Linux kernel", 2012).
    GilbertElliott {
        /// Per-packet probability of moving from the good to the bad state (netem `p`).
        p_good_to_bad: f64,
        /// Per-packet probability of moving from the bad to the good state (netem `r`).
        p_bad_to_good: f64,
        /// Loss probability in the good state (netem `1-k`).
        loss_in_good: f64,
        /// Loss probability in the bad state (netem `1-h`).
        loss_in_bad: f64,
    },
}

impl LossModel {
    /// The simple Gilbert model: nothing is lost in the good state, everything in the bad state.
    /// Loss bursts then have a mean length of `1 / p_bad_to_good` packets.
    pub fn simple_gilbert(p_good_to_bad: f64, p_bad_to_good: f64) -> Self {
        LossModel::GilbertElliott {
            p_good_to_bad,
            p_bad_to_good,
            loss_in_good: 0.0,
            loss_in_bad: 1.0,
        }
    }

    /// The long-run fraction of packets lost.
    ///
    /// For Gilbert-Elliott this is the stationary mean `π_G·(1-k) + π_B·(1-h)` with
    /// `π_B = p / (p + r)` and `π_G = r / (p + r)`. A chain that never moves (`p + r = 0`) stays in
    /// the good state it starts in.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli(p) => p,
            LossModel::GilbertElliott {
                p_good_to_bad: p,
                p_bad_to_good: r,
                loss_in_good,
                loss_in_bad,
            } => {
                if p + r <= 0.0 {
                    return loss_in_good;
                }
                (r * loss_in_good + p * loss_in_bad) / (p + r)
            }
        }
    }

    fn probabilities(&self) -> Vec<(&'static str, f64)> {
        match *self {
            LossModel::None => Vec::new(),
            LossModel::Bernoulli(p) => vec![("loss", p)],
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => vec![
                ("loss.p_good_to_bad", p_good_to_bad),
                ("loss.p_bad_to_good", p_bad_to_good),
                ("loss.loss_in_good", loss_in_good),
                ("loss.loss_in_bad", loss_in_bad),
            ],
        }
    }
}

/// The smallest token bucket a link takes: an Ethernet frame's worth (1500 bytes of IP), so
/// that a full-size packet can ever leave.
pub const MIN_BURST_BYTES: usize = 1500;

/// A [`LinkConfig`] that makes no sense. [`Link`](crate::Link) still runs with one (probabilities
/// outside `[0, 1]` act as "never" or "always", a zero rate never transmits), so check scenarios
/// with [`LinkConfig::validate`] before running them.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// `rate_bps` is `Some(0)`: nothing would ever leave. Use `None` for an unlimited link.
    #[error("link rate is 0 bit/s: no packet would ever leave; use a positive rate, or none for an infinite one")]
    ZeroRate,
    /// `burst_bytes` is below [`MIN_BURST_BYTES`], so full-size packets would be dropped.
    #[error("a token bucket of {bytes} bytes never holds a {MIN_BURST_BYTES}-byte packet's tokens: such packets would never leave; make burst at least {MIN_BURST_BYTES} bytes (tc-tbf wants at least the MTU)")]
    BurstBelowPacket {
        /// The bucket size configured, bytes.
        bytes: usize,
    },
    /// A probability field is outside `[0, 1]` (or NaN).
    #[error("link {field} = {value} is not a probability; use a value in [0, 1]")]
    NotAProbability {
        /// The field's name as a scenario writes it (`reorder`, `duplicate`, `loss`,
        /// `loss.p_good_to_bad`, ...).
        field: &'static str,
        /// The value found.
        value: f64,
    },
    /// Both `rate_bps` and `delivery` are set; the trace alone gives the capacity.
    #[error("a link has a rate and a delivery trace; the trace is its capacity: drop the rate")]
    RateAndTrace,
}

impl LinkConfig {
    /// Checks that the rate is positive and every probability lies in `[0, 1]`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.rate_bps == Some(0) {
            return Err(ConfigError::ZeroRate);
        }
        if let Some(bytes) = self.burst_bytes.filter(|b| *b < MIN_BURST_BYTES) {
            return Err(ConfigError::BurstBelowPacket { bytes });
        }
        if self.rate_bps.is_some() && self.delivery.is_some() {
            return Err(ConfigError::RateAndTrace);
        }
        let mut probs = vec![("reorder", self.reorder), ("duplicate", self.duplicate)];
        probs.extend(self.loss.probabilities());
        for (field, value) in probs {
            if !(0.0..=1.0).contains(&value) {
                return Err(ConfigError::NotAProbability { field, value });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gilbert_elliott_mean_loss_by_hand() {
        // π_B = 0.01 / 0.11 = 1/11, π_G = 10/11: mean = (10·0.001 + 1·0.5) / 11 = 0.51 / 11.
        let m = LossModel::GilbertElliott {
            p_good_to_bad: 0.01,
            p_bad_to_good: 0.1,
            loss_in_good: 0.001,
            loss_in_bad: 0.5,
        };
        assert!((m.mean_loss() - 0.51 / 11.0).abs() < 1e-12);
        assert!((LossModel::simple_gilbert(0.1, 0.3).mean_loss() - 0.25).abs() < 1e-12);
        assert_eq!(LossModel::simple_gilbert(0.0, 0.0).mean_loss(), 0.0);
    }

    #[test]
    fn validate_names_the_bad_field() {
        assert_eq!(LinkConfig::default().validate(), Ok(()));
        let zero = LinkConfig {
            rate_bps: Some(0),
            ..LinkConfig::default()
        };
        assert_eq!(zero.validate(), Err(ConfigError::ZeroRate));
        for bytes in [0, 1499] {
            let tiny = LinkConfig {
                rate_bps: Some(1_000_000),
                burst_bytes: Some(bytes),
                ..LinkConfig::default()
            };
            assert_eq!(
                tiny.validate(),
                Err(ConfigError::BurstBelowPacket { bytes })
            );
        }
        let bad = LinkConfig {
            loss: LossModel::simple_gilbert(0.1, 1.5),
            ..LinkConfig::default()
        };
        assert_eq!(
            bad.validate(),
            Err(ConfigError::NotAProbability {
                field: "loss.p_bad_to_good",
                value: 1.5
            })
        );
        let nan = LinkConfig {
            duplicate: f64::NAN,
            ..LinkConfig::default()
        };
        assert!(nan.validate().is_err());
    }
}
