//! Who may connect when the server is full, and when a connection has waited too long, sans-IO:
//! the connection table ([`Room`]) that the RTSP server's and the control API's event loops
//! keep, and its rule ([`admit`]). The driver holds the sockets and closes what this says.
//!
//! Under the limits (all connections, and those from the newcomer's address) a newcomer is
//! served. At a limit, the connection that holds its place without using it is closed to make
//! room: one without a session, waiting longest for the rest of a request (after
//! [`EVICT_PARTIAL`]), else connected but silent longest (after [`EVICT_SILENT`]), else idle
//! longest after its requests (after [`EVICT_IDLE`]), from the newcomer's address when it is
//! that address's limit that is reached. When one will be soon (the places are held by
//! connections too young to close), the newcomer waits in the [`Lobby`] until then, at most
//! [`PATIENCE`], rather than being refused at the start of a flood; when none will, it is
//! refused (503). A slow or stuck client cannot keep prompt ones out.

use super::ConnId;
use metronome_time::Timestamp;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

/// How long a connection must have held its place, by what it is doing, before it may be
/// closed to make room. This one: waiting for the rest of a request (a whole request comes in
/// one round trip).
pub const EVICT_PARTIAL: Duration = Duration::from_millis(20);
/// How long a connection that has sent nothing may hold its place before it may be closed to
/// make room (a client sends its request as soon as it connects).
pub const EVICT_SILENT: Duration = Duration::from_millis(100);
/// How long a connection idle after the requests it made (a player between its keep-alives)
/// may hold its place before it may be closed to make room.
pub const EVICT_IDLE: Duration = Duration::from_secs(1);
/// The longest a newcomer waits in the [`Lobby`] for a place.
pub const PATIENCE: Duration = Duration::from_millis(1500);
/// How many newcomers wait in the [`Lobby`] at once; one more is refused.
pub const LOBBY_PLACES: usize = 64;

/// What the table knows of a live connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The connection.
    pub id: ConnId,
    /// Its peer's IP address, for the per-address limit.
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
    /// There is a place: serve it now.
    Serve,
    /// Close this connection first, then serve.
    CloseFirst(ConnId),
    /// No place can be made before this instant, when one can: ask again then.
    Wait(Timestamp),
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
    let mut best = None;
    let mut soonest: Option<Timestamp> = None;
    for h in live().filter(|h| h.sessions == 0 && (!full_ip || h.ip == ip)) {
        // Waiting for the rest of a request first, then silent, then idle after requests.
        let (rank, since, after) = match (h.partial_since, h.served) {
            (Some(t), _) => (0, t, EVICT_PARTIAL),
            (None, false) => (1, h.last_active, EVICT_SILENT),
            (None, true) => (2, h.last_active, EVICT_IDLE),
        };
        if now.saturating_since(since) >= after {
            let candidate = ((rank, since), h.id);
            best = Some(best.map_or(candidate, |b: ((u8, Timestamp), ConnId)| b.min(candidate)));
        } else {
            soonest = Some(soonest.map_or(since + after, |t| t.min(since + after)));
        }
    }
    match (best, soonest) {
        (Some((_, id)), _) => Admit::CloseFirst(id),
        (None, Some(t)) => Admit::Wait(t),
        (None, None) => Admit::Refuse,
    }
}

/// Newcomers waiting for a place ([`Admit::Wait`]), oldest first: at most [`LOBBY_PLACES`],
/// each at most [`PATIENCE`]. `T` is what the driver holds for one (its socket).
#[derive(Debug)]
pub struct Lobby<T> {
    waiting: VecDeque<Waiting<T>>,
}

/// One newcomer in the [`Lobby`].
#[derive(Debug)]
pub struct Waiting<T> {
    /// What the driver holds for the newcomer (its socket).
    pub item: T,
    /// When it first asked: its patience counts from here.
    pub arrived: Timestamp,
    /// When to ask again.
    pub retry_at: Timestamp,
}

impl<T> Default for Lobby<T> {
    fn default() -> Self {
        Lobby {
            waiting: VecDeque::new(),
        }
    }
}

impl<T> Lobby<T> {
    /// Holds a newcomer that arrived at `arrived` until `retry_at`; gives it back (to refuse)
    /// when the lobby is full or it would wait past its patience.
    pub fn hold(&mut self, item: T, arrived: Timestamp, retry_at: Timestamp) -> Result<(), T> {
        if self.waiting.len() >= LOBBY_PLACES || retry_at.saturating_since(arrived) > PATIENCE {
            return Err(item);
        }
        self.waiting.push_back(Waiting {
            item,
            arrived,
            retry_at,
        });
        Ok(())
    }

    /// The newcomers due to ask again at `now`, oldest first.
    pub fn due(&mut self, now: Timestamp) -> Vec<Waiting<T>> {
        let (due, wait): (VecDeque<_>, VecDeque<_>) =
            self.waiting.drain(..).partition(|w| w.retry_at <= now);
        self.waiting = wait;
        due.into()
    }

    /// When the next newcomer is due, if one waits.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.waiting.iter().map(|w| w.retry_at).min()
    }

    /// Everyone still waiting (to refuse them at shutdown).
    pub fn drain(&mut self) -> Vec<Waiting<T>> {
        self.waiting.drain(..).collect()
    }
}

/// How long a connection may wait, by what it is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    /// A whole request, from its first byte (408 after it).
    pub request: Duration,
    /// Quiet before its first request (closed without an answer after it).
    pub first_request: Duration,
    /// Quiet after a request, when it uses nothing (closed after it).
    pub idle: Duration,
}

/// Why a connection's time is up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// Its request did not arrive whole in time: answer 408, then close.
    Request,
    /// It stayed quiet too long: close.
    Idle,
}

/// What the table keeps of one connection.
#[derive(Clone, Copy, Debug)]
struct Place {
    ip: IpAddr,
    partial_since: Option<Timestamp>,
    last_active: Timestamp,
    /// Since when nothing has arrived (or the last answer went out).
    quiet_since: Timestamp,
    served: bool,
    closing: bool,
}

/// The connection table: every live connection's address and timing, the caps, and the
/// deadlines. `busy` (asked of the driver) is how much a connection uses its place: the
/// sessions it set up, or a request being served. A busy connection is never closed to make
/// room, nor for being idle.
#[derive(Debug)]
pub struct Room {
    max: usize,
    per_address: usize,
    places: HashMap<ConnId, Place>,
    per_ip: HashMap<IpAddr, usize>,
}

impl Room {
    /// A table for `max` connections in all and `per_address` from one address.
    pub fn new(max: usize, per_address: usize) -> Room {
        Room {
            max: max.max(1),
            per_address: per_address.max(1),
            places: HashMap::new(),
            per_ip: HashMap::new(),
        }
    }

    /// Connections in the table (closing ones too).
    pub fn len(&self) -> usize {
        self.places.len()
    }

    /// Whether the table holds no connection.
    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// What to do with a newcomer from `ip` ([`admit`], asked only at a cap).
    pub fn admit(&self, ip: IpAddr, now: Timestamp, busy: impl Fn(ConnId) -> usize) -> Admit {
        let from_ip = self.per_ip.get(&ip).copied().unwrap_or(0);
        if self.places.len() < self.max && from_ip < self.per_address {
            return Admit::Serve;
        }
        let holders: Vec<Holder> = self
            .places
            .iter()
            .map(|(&id, p)| Holder {
                id,
                ip: p.ip,
                partial_since: p.partial_since,
                last_active: p.last_active,
                served: p.served,
                sessions: busy(id),
                closing: p.closing,
            })
            .collect();
        admit(&holders, ip, now, self.max, self.per_address)
    }

    /// A connection from `ip` is served from `now`.
    pub fn enter(&mut self, id: ConnId, ip: IpAddr, now: Timestamp) {
        let place = Place {
            ip,
            partial_since: None,
            last_active: now,
            quiet_since: now,
            served: false,
            closing: false,
        };
        if self.places.insert(id, place).is_none() {
            *self.per_ip.entry(ip).or_insert(0) += 1;
        }
    }

    /// The connection is gone.
    pub fn leave(&mut self, id: ConnId) {
        let Some(p) = self.places.remove(&id) else {
            return;
        };
        if let Some(n) = self.per_ip.get_mut(&p.ip) {
            *n -= 1;
            if *n == 0 {
                self.per_ip.remove(&p.ip);
            }
        }
    }

    /// The connection is ending (its last answer is being written): it holds no place a
    /// newcomer needs, and no deadline applies.
    pub fn closing(&mut self, id: ConnId) {
        if let Some(p) = self.places.get_mut(&id) {
            p.closing = true;
        }
    }

    /// Bytes arrived at `now`; `mid_request` says whether part of a request now waits for
    /// the rest (its deadline counts from the first of them).
    pub fn heard(&mut self, id: ConnId, now: Timestamp, mid_request: bool) {
        if let Some(p) = self.places.get_mut(&id) {
            p.quiet_since = now;
            p.partial_since = if mid_request {
                p.partial_since.or(Some(now))
            } else {
                None
            };
        }
    }

    /// A whole request arrived at `now`: the connection has been served, and is active.
    pub fn request_done(&mut self, id: ConnId, now: Timestamp) {
        if let Some(p) = self.places.get_mut(&id) {
            p.served = true;
            p.last_active = now;
        }
    }

    /// An answer went out at `now`: quiet counts from here.
    pub fn answered(&mut self, id: ConnId, now: Timestamp) {
        if let Some(p) = self.places.get_mut(&id) {
            p.quiet_since = now;
        }
    }

    /// How long connection `id` has been quiet at `now` (`None`: not in the table).
    pub fn quiet_for(&self, id: ConnId, now: Timestamp) -> Option<std::time::Duration> {
        self.places
            .get(&id)
            .map(|p| now.saturating_since(p.quiet_since))
    }

    /// The connections whose time is up at `now`, and why.
    pub fn expired(
        &self,
        now: Timestamp,
        d: Deadlines,
        busy: impl Fn(ConnId) -> usize,
    ) -> Vec<(ConnId, Expiry)> {
        let mut out = Vec::new();
        for (&id, p) in &self.places {
            if p.closing {
                continue;
            }
            match p.partial_since {
                // However its bytes trickle, a whole request takes at most `request`.
                Some(t) if now.saturating_since(t) >= d.request => out.push((id, Expiry::Request)),
                Some(_) => {}
                None => {
                    let wait = if p.served { d.idle } else { d.first_request };
                    if now.saturating_since(p.quiet_since) >= wait && busy(id) == 0 {
                        out.push((id, Expiry::Idle));
                    }
                }
            }
        }
        out
    }

    /// Gives back the memory of connections gone (after a flood).
    pub fn shrink_to_fit(&mut self) {
        self.places.shrink_to_fit();
        self.per_ip.shrink_to_fit();
    }
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
        // Nothing old enough yet: wait until the first is (the trickling one at 1,015 ms,
        // before the idle one at 1.9 s)...
        h[0].last_active = ms(900);
        assert_eq!(admit(&h, B, ms(1000), 3, 8), Admit::Wait(ms(1015)));
        // ...but a holder with a session never makes room: refused.
        h[0].sessions = 1;
        h[1].sessions = 1;
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

    #[test]
    fn the_lobby_holds_a_bounded_number_for_a_bounded_time_oldest_first() {
        let mut lobby = Lobby::default();
        assert!(lobby.hold(1, ms(0), ms(100)).is_ok());
        assert!(lobby.hold(2, ms(10), ms(50)).is_ok());
        // Past its patience: given back.
        assert_eq!(
            lobby.hold(3, ms(0), ms(0) + PATIENCE + Duration::from_millis(1)),
            Err(3)
        );
        assert_eq!(lobby.next_due(), Some(ms(50)));
        assert!(lobby.due(ms(40)).is_empty());
        let due: Vec<u32> = lobby.due(ms(100)).into_iter().map(|w| w.item).collect();
        assert_eq!(due, [1, 2]);
        for i in 0..LOBBY_PLACES as u32 {
            assert!(lobby.hold(i, ms(0), ms(10)).is_ok());
        }
        assert_eq!(lobby.hold(99, ms(0), ms(10)), Err(99), "full");
        assert_eq!(lobby.drain().len(), LOBBY_PLACES);
        assert_eq!(lobby.next_due(), None);
    }

    #[test]
    fn the_table_counts_addresses_and_applies_the_deadlines() {
        let mut room = Room::new(2, 1);
        let idle = |_| 0;
        room.enter(ConnId(1), A, ms(0));
        // A's one place is taken and has just connected: B is served, A waits.
        assert_eq!(room.admit(B, ms(10), idle), Admit::Serve);
        assert_eq!(room.admit(A, ms(10), idle), Admit::Wait(ms(100)));
        // Silent long enough, it makes room for another from A.
        assert_eq!(room.admit(A, ms(200), idle), Admit::CloseFirst(ConnId(1)));
        let d = Deadlines {
            request: Duration::from_millis(500),
            first_request: Duration::from_millis(300),
            idle: Duration::from_secs(1),
        };
        // A request trickling from 100 ms is late at 600; quiet after one, idle at 1.7 s.
        room.heard(ConnId(1), ms(100), true);
        assert_eq!(room.expired(ms(599), d, idle), []);
        assert_eq!(
            room.expired(ms(600), d, idle),
            [(ConnId(1), Expiry::Request)]
        );
        room.heard(ConnId(1), ms(700), false);
        room.request_done(ConnId(1), ms(700));
        assert_eq!(room.expired(ms(1699), d, idle), []);
        assert_eq!(room.expired(ms(1700), d, idle), [(ConnId(1), Expiry::Idle)]);
        // Busy, or closing, it is never idle; gone, its address is free again.
        assert_eq!(room.expired(ms(5000), d, |_| 1), []);
        room.closing(ConnId(1));
        assert_eq!(room.expired(ms(5000), d, idle), []);
        room.leave(ConnId(1));
        assert!(room.is_empty());
        assert_eq!(room.admit(A, ms(5000), idle), Admit::Serve);
        // Before its first request, the first deadline applies.
        room.enter(ConnId(2), B, ms(0));
        assert_eq!(room.expired(ms(300), d, idle), [(ConnId(2), Expiry::Idle)]);
    }
}
