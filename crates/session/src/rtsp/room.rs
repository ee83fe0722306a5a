//! Who may connect when the server is full, sans-IO: the connection table's rule, which the
//! driver applies (it holds the sockets and closes what this says).
//!
//! Under the limits (all connections, and those from the newcomer's address) a newcomer is
//! served. At a limit, the connection that holds its place without using it is closed to make
//! room: one without a session, waiting longest for the rest of a request (after
//! [`EVICT_PARTIAL`]), else connected but silent longest (after [`EVICT_SILENT`]), else idle
//! longest after its requests (after [`EVICT_IDLE`]), from the newcomer's address when it is
//! that address's limit that is reached. When none is, the newcomer is refused (503). A slow or
//! stuck client cannot keep prompt ones out.

use super::ConnId;
use metronome_time::Timestamp;
use std::net::IpAddr;
use std::time::Duration;

/// How long a connection must have held its place, by what it is doing, before it may be
/// closed to make room: waiting for the rest of a request (a whole request comes in one
/// round trip), connected but silent (a client sends its request as soon as it connects),
/// idle after requests it made (a player between its keep-alives).
pub const EVICT_PARTIAL: Duration = Duration::from_millis(20);
pub const EVICT_SILENT: Duration = Duration::from_millis(100);
pub const EVICT_IDLE: Duration = Duration::from_secs(1);

/// What the table knows of a live connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub id: ConnId,
    pub ip: IpAddr,
    /// Since when part of a request has been waiting for the rest, if it has.
    pub partial_since: Option<Timestamp>,
    /// When it last completed a request (or connected).
    pub last_active: Timestamp,
    /// Whether it has completed a request at all.
    pub served: bool,
    /// Sessions it set up (a connection with one is never closed to make room).
    pub sessions: usize,
    /// Already closed to make room; its thread is on its way out.
    pub closing: bool,
}

/// What to do with a newcomer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    Serve,
    /// Close this connection first, then serve.
    CloseFirst(ConnId),
    /// Answer 503.
    Refuse,
}

/// The rule for a newcomer from `ip` at `now`, with `max` connections in all and
/// `per_address` from one address. Connections on their way out still count against a hard
/// bound of twice `max`.
pub fn admit(
    holders: &[Holder],
    ip: IpAddr,
    now: Timestamp,
    max: usize,
    per_address: usize,
) -> Admit {
    let live = || holders.iter().filter(|h| !h.closing);
    let total = live().count();
    let full_ip = live().filter(|h| h.ip == ip).count() >= per_address.max(1);
    if holders.len() >= 2 * max.max(1) {
        return Admit::Refuse;
    }
    if total < max && !full_ip {
        return Admit::Serve;
    }
    live()
        .filter(|h| h.sessions == 0 && (!full_ip || h.ip == ip))
        .filter_map(|h| {
            // Waiting for the rest of a request first, then silent, then idle after requests.
            let (rank, since, after) = match (h.partial_since, h.served) {
                (Some(t), _) => (0, t, EVICT_PARTIAL),
                (None, false) => (1, h.last_active, EVICT_SILENT),
                (None, true) => (2, h.last_active, EVICT_IDLE),
            };
            (now.saturating_since(since) >= after).then_some(((rank, since), h.id))
        })
        .min()
        .map_or(Admit::Refuse, |(_, id)| Admit::CloseFirst(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    fn ms(v: u64) -> Timestamp {
        Timestamp::from_millis(v)
    }

    fn holder(id: u64, ip: IpAddr, since: u64) -> Holder {
        Holder {
            id: ConnId(id),
            ip,
            partial_since: None,
            last_active: ms(since),
            served: false,
            sessions: 0,
            closing: false,
        }
    }

    #[test]
    fn under_the_limits_a_newcomer_is_served() {
        let h = [holder(1, A, 0), holder(2, B, 0)];
        assert_eq!(admit(&h, A, ms(10), 4, 2), Admit::Serve);
    }

    #[test]
    fn at_a_limit_the_slowest_holder_makes_room_and_one_with_a_session_never_does() {
        let mut h = vec![holder(1, A, 0), holder(2, A, 0), holder(3, B, 0)];
        h[0].served = true; // idle after a request: last in line
        h[1].partial_since = Some(ms(500)); // a request trickling in
        h[2].sessions = 1;
        // Full: the trickling one goes first.
        assert_eq!(admit(&h, B, ms(1000), 3, 8), Admit::CloseFirst(ConnId(2)));
        // It just started waiting: too soon; the idle one has been idle a second.
        h[1].partial_since = Some(ms(995));
        assert_eq!(admit(&h, B, ms(1000), 3, 8), Admit::CloseFirst(ConnId(1)));
        // Nothing old enough, and the third has a session: refused.
        h[0].last_active = ms(900);
        assert_eq!(admit(&h, B, ms(1000), 3, 8), Admit::Refuse);
    }

    #[test]
    fn an_address_at_its_limit_makes_room_among_its_own() {
        let mut h = vec![holder(1, A, 0), holder(2, A, 0), holder(3, B, 0)];
        h[2].partial_since = Some(ms(0)); // B's is the slowest, but A is full
        assert_eq!(admit(&h, A, ms(1000), 10, 2), Admit::CloseFirst(ConnId(1)));
        // Holders already closing do not count, but the hard bound does.
        h[0].closing = true;
        assert_eq!(admit(&h, A, ms(1000), 10, 2), Admit::Serve);
        assert_eq!(admit(&h, A, ms(1000), 1, 2), Admit::Refuse);
    }
}
