//! Per-packet loss processes.
//!
//! A [`LossProcess`] turns uniform variates into loss decisions. It takes the variates as
//! arguments rather than owning an RNG, so the caller decides how randomness is drawn (the
//! [`Link`](crate::Link) draws the same number per packet whatever the configuration, see there).

use crate::config::LossModel;

/// The state of a [`LossModel`]: nothing for Bernoulli, the channel state for Gilbert-Elliott.
#[derive(Clone, Debug)]
pub struct LossProcess {
    model: LossModel,
    bad: bool,
}

impl LossProcess {
    /// A process for `model`. Gilbert-Elliott starts in the good state, as netem does.
    pub fn new(model: LossModel) -> Self {
        LossProcess { model, bad: false }
    }

    /// The configuration this process follows.
    pub fn model(&self) -> LossModel {
        self.model
    }

    /// Whether a Gilbert-Elliott channel is in its bad state (always false for other models).
    pub fn in_bad_state(&self) -> bool {
        self.bad
    }

    /// Decides the fate of one packet from two independent uniform variates in `[0, 1)`.
    ///
    /// Bernoulli uses `u_loss` only: lost iff `u_loss < p`, so `p = 0` never loses and `p = 1`
    /// always does. Gilbert-Elliott follows Linux `sch_netem.c` `loss_gilb_ell()`: the packet is
    /// lost with the loss probability of the state it finds (`u_loss`), and the chain takes one
    /// step (`u_transition`) per packet. The order of the two draws does not change the process.
    pub fn is_lost(&mut self, u_transition: f64, u_loss: f64) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Bernoulli(p) => u_loss < p,
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
            } => {
                let (p_loss, p_move) = if self.bad {
                    (loss_in_bad, p_bad_to_good)
                } else {
                    (loss_in_good, p_good_to_bad)
                };
                let lost = u_loss < p_loss;
                if u_transition < p_move {
                    self.bad = !self.bad;
                }
                lost
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bernoulli_is_a_threshold() {
        let mut l = LossProcess::new(LossModel::Bernoulli(0.25));
        assert!(l.is_lost(0.9, 0.2));
        assert!(!l.is_lost(0.9, 0.25));
        assert!(!LossProcess::new(LossModel::Bernoulli(0.0)).is_lost(0.0, 0.0));
        assert!(LossProcess::new(LossModel::Bernoulli(1.0)).is_lost(0.0, 0.999_999));
        assert!(!LossProcess::new(LossModel::None).is_lost(0.0, 0.0));
    }

    #[test]
    fn gilbert_elliott_steps_by_hand() {
        let mut l = LossProcess::new(LossModel::simple_gilbert(0.5, 0.5));
        // Good: not lost; the transition variate 0.4 < 0.5 moves the chain to bad.
        assert!(!l.is_lost(0.4, 0.0));
        assert!(l.in_bad_state());
        // Bad: lost; 0.6 >= 0.5 stays bad.
        assert!(l.is_lost(0.6, 0.99));
        assert!(l.in_bad_state());
        // Bad: lost (the packet sees the state it finds), then back to good.
        assert!(l.is_lost(0.1, 0.99));
        assert!(!l.in_bad_state());
        assert!(!l.is_lost(0.9, 0.0));
    }
}
