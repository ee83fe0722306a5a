//! A host's packets as a capture file (the classic pcap format with nanosecond times, link type
//! `LINKTYPE_RAW`: each record an IPv4 packet), as tcpdump on that host would have written it:
//! what its applications sent and what reached them. Wireshark and tcpdump read it.
//!
//! The simulator carries what the sessions and the TCP stack wrote, not whole IP packets, so
//! the headers are made here, the same way every time:
//! - host `n` (its [`NodeId`]) is `10.0.0.0 + n + 1`, multicast tree `t` is `239.1.0.0 + t`;
//! - flow `f` uses UDP ports `5000 + 10 f` (RTP, and the datagrams of UDP flows), `+ 1` (RTCP:
//!   a datagram whose second byte is 200-206, RFC 5761 §4) and `+ 2` (FEC, column and row
//!   alike: the simulator does not tell them apart), at both ends, modulo 65 536;
//! - a UDP flow's datagram carries zeros (only its size is simulated);
//! - a TCP segment keeps the stack's bytes; its addresses become the hosts' and both
//!   checksums are made again.
//!
//! Times are virtual: the run's start is the Unix epoch.

use super::packet::{Body, Dst, Packet};
use super::trace::Capture;
use metronome_link::topology::NodeId;

/// The host's IPv4 address.
pub fn host_addr(n: NodeId) -> [u8; 4] {
    (0x0a00_0000u32 + n.0 + 1).to_be_bytes()
}

/// Every host's capture file, from `captures` in one pass: its records in order.
pub fn pcaps(captures: &[Capture]) -> std::collections::BTreeMap<NodeId, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    for c in captures {
        let out = files.entry(c.node).or_insert_with(file_header);
        let ip = ipv4(&c.packet);
        let ns = c.at.as_nanos();
        out.extend(((ns / 1_000_000_000) as u32).to_le_bytes());
        out.extend(((ns % 1_000_000_000) as u32).to_le_bytes());
        out.extend((ip.len() as u32).to_le_bytes());
        out.extend((ip.len() as u32).to_le_bytes());
        out.extend(ip);
    }
    files
}

/// Magic (nanosecond resolution), version 2.4, no zone, no accuracy, snap length, RAW.
fn file_header() -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(0xa1b2_3c4du32.to_le_bytes());
    out.extend(2u16.to_le_bytes());
    out.extend(4u16.to_le_bytes());
    out.extend([0u8; 8]);
    out.extend(65_535u32.to_le_bytes());
    out.extend(101u32.to_le_bytes());
    out
}

/// Where a packet goes, as an address.
fn dst_addr(p: &Packet) -> [u8; 4] {
    match p.dst {
        Dst::Node(n) => host_addr(n),
        Dst::Tree(t) => (0xef01_0000u32 + t.0).to_be_bytes(),
    }
}

/// The packet as an IPv4 packet.
fn ipv4(p: &Packet) -> Vec<u8> {
    let (src, dst) = (host_addr(p.src), dst_addr(p));
    let port = 5000u16.wrapping_add((p.flow.0 as u16).wrapping_mul(10));
    match &p.body {
        Body::Ip(bytes) => retarget_tcp(bytes, src, dst),
        Body::Datagram(d) => {
            let rtcp = d.len() > 1 && (200..=206).contains(&d[1]);
            udp(src, dst, port.wrapping_add(u16::from(rtcp)), d)
        }
        Body::Fec(d) => udp(src, dst, port.wrapping_add(2), d),
        Body::Probe { .. } => {
            let len = (p.size as usize).saturating_sub(28).min(65_507);
            udp(src, dst, port, &vec![0; len])
        }
    }
}

/// An IPv4 header of protocol `proto` around `payload_len` bytes, its checksum made.
fn ip_header(src: [u8; 4], dst: [u8; 4], proto: u8, payload_len: usize) -> [u8; 20] {
    let total = (20 + payload_len).min(65_535) as u16;
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let sum = checksum(&[&h]);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    h
}

/// A UDP datagram from and to `port` carrying `payload`, in its IPv4 packet.
fn udp(src: [u8; 4], dst: [u8; 4], port: u16, payload: &[u8]) -> Vec<u8> {
    let payload = &payload[..payload.len().min(65_507)];
    let len = (8 + payload.len()) as u16;
    let mut u = [0u8; 8];
    u[0..2].copy_from_slice(&port.to_be_bytes());
    u[2..4].copy_from_slice(&port.to_be_bytes());
    u[4..6].copy_from_slice(&len.to_be_bytes());
    let sum = checksum(&[&pseudo(src, dst, 17, len), &u, payload]);
    u[6..8].copy_from_slice(&(if sum == 0 { 0xffff } else { sum }).to_be_bytes());
    let mut out = ip_header(src, dst, 17, len as usize).to_vec();
    out.extend(u);
    out.extend(payload);
    out
}

/// A TCP segment in the stack's IPv4 packet, with the hosts' addresses and its checksums made
/// again; anything that is not a TCP packet is kept as it is.
fn retarget_tcp(ip: &[u8], src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let header = usize::from(ip.first().map_or(0, |b| b & 0x0f)) * 4;
    if ip.len() < header + 20 || header < 20 || ip[9] != 6 {
        return ip.to_vec();
    }
    let segment = &ip[header..];
    let mut tcp = segment.to_vec();
    tcp[16..18].fill(0);
    let len = tcp.len().min(65_535) as u16;
    let sum = checksum(&[&pseudo(src, dst, 6, len), &tcp]);
    tcp[16..18].copy_from_slice(&sum.to_be_bytes());
    let mut out = ip_header(src, dst, 6, tcp.len()).to_vec();
    out.extend(tcp);
    out
}

/// The pseudo-header UDP and TCP checksums cover (RFC 768, RFC 9293).
fn pseudo(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16) -> [u8; 12] {
    let mut p = [0u8; 12];
    p[0..4].copy_from_slice(&src);
    p[4..8].copy_from_slice(&dst);
    p[9] = proto;
    p[10..12].copy_from_slice(&len.to_be_bytes());
    p
}

/// The Internet checksum (RFC 1071) of the parts, read as one run of bytes.
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum = 0u64;
    let mut odd: Option<u8> = None;
    for b in parts.iter().flat_map(|p| p.iter()) {
        match odd.take() {
            Some(hi) => sum += u64::from(u16::from_be_bytes([hi, *b])),
            None => odd = Some(*b),
        }
    }
    if let Some(hi) = odd {
        sum += u64::from(u16::from_be_bytes([hi, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::FlowId;
    use metronome_time::Timestamp;
    use std::rc::Rc;

    #[test]
    fn a_datagram_becomes_a_udp_packet_whose_checksums_add_up() {
        let rtcp = Packet {
            id: 1,
            flow: FlowId(2),
            src: NodeId(0),
            dst: Dst::Node(NodeId(3)),
            size: 60,
            sent_at: Timestamp::ZERO,
            body: Body::Datagram(Rc::from(&[0x80u8, 201, 0, 1, 1, 2, 3, 4][..])),
        };
        let ip = ipv4(&rtcp);
        assert_eq!(ip.len(), 20 + 8 + 8);
        assert_eq!(&ip[12..20], &[10, 0, 0, 1, 10, 0, 0, 4]);
        // RTCP on the flow's RTP port + 1.
        assert_eq!(u16::from_be_bytes([ip[20], ip[21]]), 5021);
        // A header with its checksum sums to zero, and so does UDP with its pseudo-header.
        assert_eq!(checksum(&[&ip[..20]]), 0);
        let p = pseudo([10, 0, 0, 1], [10, 0, 0, 4], 17, 16);
        assert_eq!(checksum(&[&p, &ip[20..]]), 0);
    }

    #[test]
    fn the_file_has_the_header_and_a_record_per_packet_of_the_host() {
        let probe = |src, dst, at| Capture {
            at: Timestamp::from_nanos(at),
            node: NodeId(src),
            sent: true,
            packet: Packet {
                id: 0,
                flow: FlowId(0),
                src: NodeId(src),
                dst: Dst::Node(NodeId(dst)),
                size: 100,
                sent_at: Timestamp::ZERO,
                body: Body::Probe { seq: 0 },
            },
        };
        let caps = [probe(0, 1, 1_500_000_001), probe(1, 0, 7), probe(0, 1, 9)];
        let files = pcaps(&caps);
        assert_eq!(files.len(), 2);
        let f = &files[&NodeId(0)];
        assert_eq!(&f[0..4], &0xa1b2_3c4du32.to_le_bytes());
        assert_eq!(u32::from_le_bytes(f[20..24].try_into().unwrap()), 101);
        // Two records of 100 bytes (IP header included): 24 + 2 × (16 + 100).
        assert_eq!(f.len(), 24 + 2 * 116);
        assert_eq!(&f[24..32], &[1, 0, 0, 0, 0x01, 0x65, 0xcd, 0x1d]);
    }
}
