//! The sending half of an RTSP connection that also carries media: RTP and RTCP interleaved
//! with the RTSP messages (RFC 2326 §10.12: `$`, a channel byte, a 16-bit length, the data).
//!
//! Everything written to the connection goes through one [`ConnOut`]: responses and `$` frames
//! are queued whole, so they never interleave mid-message, and one writer thread per connection
//! drains the queue to the socket. A pacing thread that sends a packet only copies it into the
//! queue (no allocation, no blocking on the network): a client that reads too slowly has frames
//! dropped and counted, never the pacer stalled. A client that stops reading altogether is cut
//! off when a write has made no progress for the write timeout.

use crate::streams::stream::lock;
use std::collections::VecDeque;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Room kept for RTSP messages beyond the data capacity: a response is never dropped because
/// media filled the queue.
const MESSAGE_RESERVE: usize = 64 << 10;
/// Largest write handed to the socket at once.
const CHUNK: usize = 64 << 10;

#[derive(Default)]
struct Queue {
    bytes: VecDeque<u8>,
    closed: bool,
}

/// The queue in front of one connection's socket.
pub struct ConnOut {
    queue: Mutex<Queue>,
    ready: Condvar,
    data_capacity: usize,
    /// `$` frames dropped because the queue was full or the connection closed.
    pub dropped: AtomicU64,
    /// `$` frames queued.
    pub frames: AtomicU64,
}

impl ConnOut {
    /// A queue holding up to `data_capacity` bytes of `$` frames (plus room for messages).
    /// Only the messages' room is allocated until a session sends media on the connection
    /// ([`ConnOut::reserve_for_media`]): an idle connection costs kilobytes, not megabytes.
    pub fn new(data_capacity: usize) -> ConnOut {
        ConnOut {
            queue: Mutex::new(Queue {
                bytes: VecDeque::with_capacity(MESSAGE_RESERVE),
                closed: false,
            }),
            ready: Condvar::new(),
            data_capacity,
            dropped: AtomicU64::new(0),
            frames: AtomicU64::new(0),
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
        drop(q);
        self.frames.fetch_add(1, Ordering::Relaxed);
        self.ready.notify_one();
        true
    }

    /// Queues an RTSP message (a response). Fails only if the connection is closed or the
    /// writer is hopelessly behind.
    pub fn send_message(&self, message: &[u8]) -> bool {
        let mut q = lock(&self.queue);
        if q.closed || q.bytes.len() + message.len() > self.data_capacity + MESSAGE_RESERVE {
            return false;
        }
        q.bytes.extend(message);
        drop(q);
        self.ready.notify_one();
        true
    }

    /// No more writes; the writer thread ends once the queue is drained or at once on error.
    /// Allocates the whole queue, so that the pacing thread, which queues media here, never
    /// allocates: called on the control side when a session on this connection is set up.
    pub fn reserve_for_media(&self) {
        let mut q = lock(&self.queue);
        let want = self.data_capacity + MESSAGE_RESERVE;
        let len = q.bytes.len();
        q.bytes.reserve(want.saturating_sub(len));
    }

    pub fn close(&self) {
        lock(&self.queue).closed = true;
        self.ready.notify_all();
    }

    pub fn is_closed(&self) -> bool {
        lock(&self.queue).closed
    }

    /// The writer thread's loop: drains the queue into `stream` until the connection closes.
    /// A write that fails or times out closes the queue and shuts the socket down, so the
    /// connection's reader sees the end too.
    pub fn run_writer(&self, mut stream: TcpStream, write_timeout: Duration) {
        let _ = stream.set_write_timeout(Some(write_timeout));
        let mut chunk = Vec::with_capacity(CHUNK);
        loop {
            chunk.clear();
            {
                let mut q = lock(&self.queue);
                while q.bytes.is_empty() && !q.closed {
                    q = self.ready.wait(q).unwrap_or_else(|e| e.into_inner());
                }
                if q.bytes.is_empty() {
                    break;
                }
                // Two slice copies, so the pacers wait on the lock as briefly as possible.
                let n = q.bytes.len().min(CHUNK);
                let (a, b) = q.bytes.as_slices();
                let from_a = a.len().min(n);
                chunk.extend_from_slice(&a[..from_a]);
                chunk.extend_from_slice(&b[..n - from_a]);
                q.bytes.drain(..n);
            }
            if stream.write_all(&chunk).is_err() {
                self.close();
                break;
            }
        }
        let _ = stream.flush();
        let _ = stream.shutdown(Shutdown::Both);
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
    use std::io::Read;
    use std::net::TcpListener;
    use std::sync::Arc;

    #[test]
    fn frames_and_messages_arrive_whole_and_in_order() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let out = Arc::new(ConnOut::new(1 << 16));
        let w = {
            let out = out.clone();
            std::thread::spawn(move || out.run_writer(s, Duration::from_secs(2)))
        };
        assert!(out.send_message(b"RTSP/1.0 200 OK\r\n\r\n"));
        assert!(out.send_data(0, &[1, 2, 3]));
        assert!(out.send_data(1, &[]));
        out.close();
        w.join().unwrap();
        let mut got = Vec::new();
        (&c).read_to_end(&mut got).unwrap();
        let mut want = b"RTSP/1.0 200 OK\r\n\r\n".to_vec();
        want.extend([b'$', 0, 0, 3, 1, 2, 3, b'$', 1, 0, 0]);
        assert_eq!(got, want);
    }

    #[test]
    fn a_full_queue_drops_frames_but_keeps_room_for_messages() {
        let out = ConnOut::new(100);
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
