//! The sending half of an RTSP connection that also carries media: RTP and RTCP interleaved
//! with the RTSP messages (RFC 2326 §10.12: `$`, a channel byte, a 16-bit length, the data).
//!
//! Everything written to the connection goes through one [`ConnOut`]: responses and `$` frames
//! are queued whole, so they never interleave mid-message, and the control plane's event loop
//! drains the queue to the socket when the socket can take it ([`ConnOut::flush_into`]). A
//! pacing thread that sends a packet only copies it into the queue and, when the queue was
//! empty, rings the loop's [`Doorbell`] (no allocation, no blocking on the network): a client
//! that reads too slowly has frames dropped and counted, never the pacer stalled. A client that
//! stops reading altogether is cut off by the loop when its queue has made no progress for the
//! write timeout.

use metronome_rt::sync::lock;
use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Room kept for RTSP messages beyond the data capacity: a response is never dropped because
/// media filled the queue.
const MESSAGE_RESERVE: usize = 64 << 10;
/// Largest write handed to the socket at once.
pub const CHUNK: usize = 64 << 10;

/// How queues tell the event loop that they have something to write: the ids of the rung
/// queues, and a wake-up for the loop's `poll` (an eventfd behind [`mio::Waker`]).
pub struct Doorbell {
    waker: mio::Waker,
    rung: Mutex<Vec<u64>>,
}

impl Doorbell {
    pub fn new(registry: &mio::Registry, token: mio::Token) -> io::Result<Doorbell> {
        Ok(Doorbell {
            waker: mio::Waker::new(registry, token)?,
            rung: Mutex::new(Vec::new()),
        })
    }

    /// Makes room for `queues` rings, so that ringing never allocates (it happens on pacing
    /// threads). Each queue is in the list at most once.
    pub fn reserve(&self, queues: usize) {
        let mut r = lock(&self.rung);
        let len = r.len();
        r.reserve(queues.saturating_sub(len));
    }

    fn ring(&self, id: u64) {
        lock(&self.rung).push(id);
        let _ = self.waker.wake();
    }

    /// Wakes the loop without a queue (to stop it, say).
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }

    /// Moves the ids of the queues rung since the last call into `into`.
    pub fn take(&self, into: &mut Vec<u64>) {
        into.extend(lock(&self.rung).drain(..));
    }
}

struct Queue {
    bytes: VecDeque<u8>,
    closed: bool,
    /// In the doorbell's list, or being drained: a push does not ring again.
    rung: bool,
}

/// What [`ConnOut::flush_into`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// Everything queued was written; the queue is open.
    Drained,
    /// The socket took `written` bytes and then would block: wait until it is writable.
    Blocked { written: usize },
    /// Closed, and everything queued was written: the connection can end.
    Closed,
}

/// The queue in front of one connection's socket.
pub struct ConnOut {
    id: u64,
    queue: Mutex<Queue>,
    bell: std::sync::Arc<Doorbell>,
    data_capacity: usize,
    /// `$` frames dropped because the queue was full or the connection closed.
    pub dropped: AtomicU64,
    /// `$` frames queued.
    pub frames: AtomicU64,
}

impl ConnOut {
    /// A queue holding up to `data_capacity` bytes of `$` frames (plus room for messages),
    /// which rings `bell` with `id` when it has something to write. Nothing is allocated until
    /// a message is queued or a session sends media on the connection
    /// ([`ConnOut::reserve_for_media`]): an idle connection costs bytes, not megabytes.
    pub fn new(id: u64, data_capacity: usize, bell: std::sync::Arc<Doorbell>) -> ConnOut {
        ConnOut {
            id,
            queue: Mutex::new(Queue {
                bytes: VecDeque::new(),
                closed: false,
                rung: false,
            }),
            bell,
            data_capacity,
            dropped: AtomicU64::new(0),
            frames: AtomicU64::new(0),
        }
    }

    /// Rings the bell unless the queue already did (called with the queue locked).
    fn ring(&self, q: &mut Queue) {
        if !q.rung {
            q.rung = true;
            self.bell.ring(self.id);
        }
    }

    /// Queues one interleaved frame. Returns false (and counts it) if it was dropped: the queue
    /// is full, the connection is closed, or the payload does not fit the 16-bit length.
    pub fn send_data(&self, channel: u8, payload: &[u8]) -> bool {
        let Ok(len) = u16::try_from(payload.len()) else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let mut q = lock(&self.queue);
        if q.closed || q.bytes.len() + 4 + payload.len() > self.data_capacity {
            drop(q);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let [hi, lo] = len.to_be_bytes();
        q.bytes.extend([b'$', channel, hi, lo]);
        q.bytes.extend(payload);
        self.ring(&mut q);
        drop(q);
        self.frames.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Queues an RTSP message (a response). Fails only if the connection is closed or the
    /// client is hopelessly behind.
    pub fn send_message(&self, message: &[u8]) -> bool {
        let mut q = lock(&self.queue);
        if q.closed || q.bytes.len() + message.len() > self.data_capacity + MESSAGE_RESERVE {
            return false;
        }
        q.bytes.extend(message);
        self.ring(&mut q);
        true
    }

    /// Allocates the whole queue, so that the pacing thread, which queues media here, never
    /// allocates: called on the control side when a session on this connection is set up.
    pub fn reserve_for_media(&self) {
        let mut q = lock(&self.queue);
        let want = self.data_capacity + MESSAGE_RESERVE;
        let len = q.bytes.len();
        q.bytes.reserve(want.saturating_sub(len));
    }

    /// Gives back what [`ConnOut::reserve_for_media`] allocated, once no session sends media
    /// on the connection any more (what is queued stays).
    pub fn release_media(&self) {
        lock(&self.queue).bytes.shrink_to_fit();
    }

    /// No more writes: what is queued is still written, then the connection ends.
    pub fn close(&self) {
        let mut q = lock(&self.queue);
        q.closed = true;
        self.ring(&mut q);
    }

    pub fn is_closed(&self) -> bool {
        lock(&self.queue).closed
    }

    /// Writes what is queued into `w` (a non-blocking socket) until it is drained or `w` would
    /// block, through `scratch` (so that pacers wait on the queue's lock only for copies, not
    /// for the socket). An error other than "would block" is returned: the connection failed.
    pub fn flush_into(&self, w: &mut impl Write, scratch: &mut Vec<u8>) -> io::Result<Flush> {
        let mut written = 0;
        loop {
            scratch.clear();
            {
                let mut q = lock(&self.queue);
                if q.bytes.is_empty() {
                    if q.closed {
                        return Ok(Flush::Closed);
                    }
                    q.rung = false;
                    return Ok(Flush::Drained);
                }
                let n = q.bytes.len().min(CHUNK);
                let (a, b) = q.bytes.as_slices();
                let from_a = a.len().min(n);
                scratch.extend_from_slice(&a[..from_a]);
                scratch.extend_from_slice(&b[..n - from_a]);
            }
            match w.write(scratch) {
                // Only this side takes bytes out, so the front is still what was copied.
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    lock(&self.queue).bytes.drain(..n);
                    written += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(Flush::Blocked { written })
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Datagrams that arrived on an interleaved channel (the client's RTCP), waiting for the
/// stream's RTCP turn. Bounded: a flood is dropped, not stored.
pub struct Inbox {
    items: Mutex<VecDeque<Vec<u8>>>,
    capacity: usize,
    pub dropped: AtomicU64,
}

impl Inbox {
    pub fn new(capacity: usize) -> Inbox {
        Inbox {
            items: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity,
            dropped: AtomicU64::new(0),
        }
    }

    pub fn push(&self, datagram: &[u8]) {
        let mut q = lock(&self.items);
        if q.len() >= self.capacity {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.push_back(datagram.to_vec());
    }

    /// Copies the oldest datagram into `buf` (cut to its length); returns its length.
    pub fn pop(&self, buf: &mut [u8]) -> Option<usize> {
        let d = lock(&self.items).pop_front()?;
        let n = d.len().min(buf.len());
        buf[..n].copy_from_slice(&d[..n]);
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn bell() -> (mio::Poll, Arc<Doorbell>) {
        let poll = mio::Poll::new().unwrap();
        let bell = Arc::new(Doorbell::new(poll.registry(), mio::Token(1)).unwrap());
        (poll, bell)
    }

    /// A socket that takes `room` bytes, then would block until given more room.
    struct Slow {
        got: Vec<u8>,
        room: usize,
    }

    impl Write for Slow {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = b.len().min(self.room);
            self.room -= n;
            self.got.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn frames_and_messages_arrive_whole_and_in_order_and_ring_once() {
        let (_poll, bell) = bell();
        let out = ConnOut::new(7, 1 << 16, bell.clone());
        assert!(out.send_message(b"RTSP/1.0 200 OK\r\n\r\n"));
        assert!(out.send_data(0, &[1, 2, 3]));
        assert!(out.send_data(1, &[]));
        let mut rung = Vec::new();
        bell.take(&mut rung);
        assert_eq!(rung, [7], "one ring until the loop drains it");
        let mut sock = Slow {
            got: Vec::new(),
            room: 10,
        };
        let mut scratch = Vec::new();
        let f = out.flush_into(&mut sock, &mut scratch).unwrap();
        assert_eq!(f, Flush::Blocked { written: 10 });
        sock.room = 100;
        assert_eq!(
            out.flush_into(&mut sock, &mut scratch).unwrap(),
            Flush::Drained
        );
        let mut want = b"RTSP/1.0 200 OK\r\n\r\n".to_vec();
        want.extend([b'$', 0, 0, 3, 1, 2, 3, b'$', 1, 0, 0]);
        assert_eq!(sock.got, want);
        // Drained: the next frame rings again; closing flushes it, then says so.
        assert!(out.send_data(2, &[9]));
        out.close();
        bell.take(&mut rung);
        assert_eq!(rung, [7, 7]);
        assert_eq!(
            out.flush_into(&mut sock, &mut scratch).unwrap(),
            Flush::Closed
        );
        assert!(sock.got.ends_with(&[b'$', 2, 0, 1, 9]));
    }

    #[test]
    fn a_full_queue_drops_frames_but_keeps_room_for_messages() {
        let (_poll, bell) = bell();
        let out = ConnOut::new(1, 100, bell);
        assert!(out.send_data(0, &[0; 90]));
        assert!(!out.send_data(0, &[0; 10]));
        assert_eq!(out.dropped.load(Ordering::Relaxed), 1);
        assert!(out.send_message(&[b'x'; 1000]));
        assert!(!out.send_data(0, &vec![0; 70_000]));
        out.close();
        assert!(!out.send_data(0, &[1]));
        assert!(!out.send_message(b"late"));
    }

    #[test]
    fn inbox_is_bounded() {
        let i = Inbox::new(2);
        i.push(&[1]);
        i.push(&[2, 2]);
        i.push(&[3]);
        assert_eq!(i.dropped.load(Ordering::Relaxed), 1);
        let mut b = [0u8; 1];
        assert_eq!(i.pop(&mut b), Some(1));
        assert_eq!(i.pop(&mut b), Some(1), "cut to the buffer");
        assert_eq!(i.pop(&mut b), None);
    }
}
