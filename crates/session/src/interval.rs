//! The RTCP transmission interval, RFC 3550 §6.3.1 and Appendix A.7.

use std::time::Duration;

/// Inputs of the interval computation (RFC 3550 §6.3).
#[derive(Clone, Copy, Debug)]
pub struct IntervalInputs {
    /// Members of the session, including us.
    pub members: u32,
    /// Members that sent RTP since the last report (including us if `we_sent`).
    pub senders: u32,
    /// Bandwidth for RTCP in octets per second: 5% of the session bandwidth (§6.2).
    pub rtcp_bw_octets: f64,
    /// Whether we sent RTP since the last report: a sender shares the senders' 25% of the RTCP
    /// bandwidth (when senders are at most a quarter of the members), a receiver the other 75%.
    pub we_sent: bool,
    /// Average compound RTCP packet size in octets, including UDP and IP headers.
    pub avg_rtcp_size: f64,
    /// Whether no report has been sent yet (halves the minimum, §6.2).
    pub initial: bool,
    /// Minimum interval: 5 s in RFC 3550; smaller values are allowed by its "reduced minimum"
    /// (360 / session kbit/s, §6.2) and by RFC 4585 profiles.
    pub min: Duration,
}

/// RTCP's share of a session's bandwidth, in octets per second: 5% (RFC 3550 §6.2).
pub fn rtcp_bandwidth_octets(session_bw_bps: u64) -> f64 {
    session_bw_bps as f64 * 0.05 / 8.0
}

/// The running average of compound RTCP packet sizes after one more of `packet_len` octets
/// (RFC 3550 §6.3.3: `avg = size/16 + 15/16 avg`, the size counting UDP and IPv4 headers).
pub fn update_avg_rtcp_size(avg: f64, packet_len: usize) -> f64 {
    let headers = metronome_time::IPV4_UDP_OVERHEAD as f64;
    (packet_len as f64 + headers) / 16.0 + avg * 15.0 / 16.0
}

/// The randomized interval until the next report (RFC 3550 A.7, `rtcp_interval()`), where
/// `uniform` is a sample from [0, 1) supplied by the caller's seeded generator.
pub fn rtcp_interval(i: &IntervalInputs, uniform: f64) -> Duration {
    const SENDER_BW_FRACTION: f64 = 0.25;
    const RCVR_BW_FRACTION: f64 = 1.0 - SENDER_BW_FRACTION;
    // e - 3/2: compensates for the "timer reconsideration" algorithm converging to a value
    // below the intended average (§6.3.1).
    const COMPENSATION: f64 = std::f64::consts::E - 1.5;

    let mut min = i.min.as_secs_f64();
    if i.initial {
        min /= 2.0;
    }
    let mut n = i.members.max(1) as f64;
    let mut bw = i.rtcp_bw_octets.max(1.0);
    if (i.senders as f64) <= i.members as f64 * SENDER_BW_FRACTION {
        if i.we_sent {
            bw *= SENDER_BW_FRACTION;
            n = i.senders.max(1) as f64;
        } else {
            bw *= RCVR_BW_FRACTION;
            n = (i.members.saturating_sub(i.senders)).max(1) as f64;
        }
    }
    let t = (i.avg_rtcp_size * n / bw).max(min);
    let t = t * (uniform.clamp(0.0, 1.0) + 0.5) / COMPENSATION;
    Duration::from_secs_f64(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_share_and_size_average_follow_section_6() {
        // 5 Mbit/s: RTCP gets 250 kbit/s = 31 250 octets/s.
        assert_eq!(rtcp_bandwidth_octets(5_000_000), 31_250.0);
        // From an average of 100, a 72-octet packet (100 with headers) keeps it at 100; a
        // 228-octet one (256) moves it a sixteenth of the way: 100 + 156/16.
        assert_eq!(update_avg_rtcp_size(100.0, 72), 100.0);
        assert_eq!(update_avg_rtcp_size(100.0, 228), 109.75);
    }

    fn inputs() -> IntervalInputs {
        IntervalInputs {
            members: 2,
            senders: 1,
            rtcp_bw_octets: 0.05 * 5_000_000.0 / 8.0,
            we_sent: true,
            avg_rtcp_size: 100.0,
            initial: false,
            min: Duration::from_secs(5),
        }
    }

    #[test]
    fn small_session_is_held_at_the_minimum_then_randomized() {
        // Two members at 5 Mbit/s: the bandwidth term is tiny, so t = 5 s × [0.5, 1.5) / (e − 1.5).
        let c = std::f64::consts::E - 1.5;
        let lo = rtcp_interval(&inputs(), 0.0).as_secs_f64();
        let hi = rtcp_interval(&inputs(), 1.0).as_secs_f64();
        assert!((lo - 2.5 / c).abs() < 1e-9, "{lo}");
        assert!((hi - 7.5 / c).abs() < 1e-9, "{hi}");
        let first = rtcp_interval(
            &IntervalInputs {
                initial: true,
                ..inputs()
            },
            0.5,
        );
        assert!((first.as_secs_f64() - 2.5 / c).abs() < 1e-9);
    }

    #[test]
    fn large_group_scales_with_members() {
        // 10 000 receivers, 1 sender, 64 kbit/s session: receivers share 75% of 400 octets/s.
        let i = IntervalInputs {
            members: 10_001,
            senders: 1,
            rtcp_bw_octets: 0.05 * 64_000.0 / 8.0,
            we_sent: false,
            avg_rtcp_size: 100.0,
            initial: false,
            min: Duration::from_secs(5),
        };
        let expect = 100.0 * 10_000.0 / (400.0 * 0.75) / (std::f64::consts::E - 1.5);
        assert!((rtcp_interval(&i, 0.5).as_secs_f64() - expect).abs() < 1e-6);
    }
}
