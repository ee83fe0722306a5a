//! MPEG-TS packet views (ISO/IEC 13818-1 §2.4.3.2 and §2.4.3.4). Parsing only; the muxer that
//! writes TS lives in `metronome-media`.

/// Bytes in one TS packet: a 4-byte header and 184 of adaptation field and payload.
pub const TS_PACKET_LEN: usize = 188;
/// The first byte of every TS packet (`sync_byte`, §2.4.3.3).
pub const TS_SYNC_BYTE: u8 = 0x47;
/// The PID of the Program Association Table (Table 2-3).
pub const PID_PAT: u16 = 0x0000;
/// The PID of null packets, stuffing a receiver discards (Table 2-3).
pub const PID_NULL: u16 = 0x1fff;
/// The 27 MHz system clock of PCR (§2.4.2.2).
pub const PCR_HZ: u64 = 27_000_000;
/// PCR wraps at 2^33 × 300 ticks (about 26.5 hours).
pub const PCR_MODULUS: u64 = (1 << 33) * 300;

/// Why bytes are not a usable TS packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TsError {
    /// The slice is not exactly [`TS_PACKET_LEN`] bytes; carries the length given.
    #[error("a TS packet is 188 bytes; got {0}")]
    WrongLength(usize),
    /// The first byte is not [`TS_SYNC_BYTE`]: the stream has lost packet alignment.
    #[error("TS packet does not start with the 0x47 sync byte")]
    NoSync,
    /// The adaptation field's length byte (carried) is above 183, more than the packet holds.
    #[error("TS adaptation field length {0} runs past the packet")]
    BadAdaptationField(u8),
}

/// A checked view of one 188-byte TS packet.
#[derive(Clone, Copy, Debug)]
pub struct TsPacket<'a> {
    data: &'a [u8; TS_PACKET_LEN],
}

impl<'a> TsPacket<'a> {
    /// Checks `data`: exactly 188 bytes, the sync byte, and an adaptation field length that
    /// fits. The other accessors then never panic.
    pub fn parse(data: &'a [u8]) -> Result<Self, TsError> {
        let data: &[u8; TS_PACKET_LEN] = data
            .try_into()
            .map_err(|_| TsError::WrongLength(data.len()))?;
        if data[0] != TS_SYNC_BYTE {
            return Err(TsError::NoSync);
        }
        let p = TsPacket { data };
        if p.has_adaptation_field() {
            let len = data[4];
            // With a payload the field is at most 182 bytes, without one exactly 183 (§2.4.3.5).
            if len as usize > 183 {
                return Err(TsError::BadAdaptationField(len));
            }
        }
        Ok(p)
    }
    /// The whole packet, header included.
    pub fn bytes(&self) -> &'a [u8; TS_PACKET_LEN] {
        self.data
    }
    /// The `transport_error_indicator` bit: an upstream demodulator found an uncorrectable
    /// error in this packet.
    pub fn transport_error(&self) -> bool {
        self.data[1] & 0x80 != 0
    }
    /// The `payload_unit_start_indicator` bit: the payload begins a PES packet or a PSI
    /// section.
    pub fn payload_unit_start(&self) -> bool {
        self.data[1] & 0x40 != 0
    }
    /// The 13-bit packet identifier (0 to 0x1fff): which elementary stream or table this
    /// packet belongs to.
    pub fn pid(&self) -> u16 {
        u16::from_be_bytes([self.data[1] & 0x1f, self.data[2]])
    }
    /// The 4-bit `continuity_counter` (0 to 15), incremented per payload-carrying packet of
    /// a PID; a skip means lost packets.
    pub fn continuity_counter(&self) -> u8 {
        self.data[3] & 0x0f
    }
    /// Whether `adaptation_field_control` says an adaptation field follows the header.
    pub fn has_adaptation_field(&self) -> bool {
        self.data[3] & 0x20 != 0
    }
    /// Whether `adaptation_field_control` says the packet carries payload.
    pub fn has_payload(&self) -> bool {
        self.data[3] & 0x10 != 0
    }
    fn adaptation_field(&self) -> Option<&'a [u8]> {
        if !self.has_adaptation_field() {
            return None;
        }
        let len = self.data[4] as usize;
        self.data.get(5..5 + len)
    }
    /// The discontinuity indicator (§2.4.3.5): the PCR timeline restarts here.
    pub fn discontinuity(&self) -> bool {
        self.adaptation_field()
            .and_then(|af| af.first())
            .is_some_and(|flags| flags & 0x80 != 0)
    }
    /// The PCR in 27 MHz ticks, if this packet carries one (§2.4.3.5).
    pub fn pcr(&self) -> Option<u64> {
        let af = self.adaptation_field()?;
        if af.first()? & 0x10 == 0 {
            return None;
        }
        let b = af.get(1..7)?;
        let base = ((b[0] as u64) << 25)
            | ((b[1] as u64) << 17)
            | ((b[2] as u64) << 9)
            | ((b[3] as u64) << 1)
            | ((b[4] as u64) >> 7);
        let ext = (((b[4] & 1) as u64) << 8) | b[5] as u64;
        Some(base * 300 + ext)
    }
    /// The payload bytes after header and adaptation field (empty when there is none).
    pub fn payload(&self) -> &'a [u8] {
        if !self.has_payload() {
            return &[];
        }
        let start = if self.has_adaptation_field() {
            5 + self.data[4] as usize
        } else {
            4
        };
        self.data.get(start..).unwrap_or(&[])
    }
}

/// Encodes a PCR (27 MHz ticks, taken modulo [`PCR_MODULUS`]) into the 6 bytes of §2.4.3.5.
pub fn encode_pcr(pcr: u64) -> [u8; 6] {
    let pcr = pcr % PCR_MODULUS;
    let base = pcr / 300;
    let ext = pcr % 300;
    [
        (base >> 25) as u8,
        (base >> 17) as u8,
        (base >> 9) as u8,
        (base >> 1) as u8,
        (((base & 1) as u8) << 7) | 0x7e | ((ext >> 8) as u8 & 1),
        ext as u8,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcr_round_trip_and_header_fields() {
        let mut p = [0xffu8; TS_PACKET_LEN];
        p[0] = TS_SYNC_BYTE;
        p[1] = 0x41; // PUSI, PID high bits 1
        p[2] = 0x00; // PID 0x100
        p[3] = 0x35; // AF + payload, CC 5
        p[4] = 7; // AF length
        p[5] = 0x10; // PCR flag
        let pcr = 123_456_789_012u64;
        p[6..12].copy_from_slice(&encode_pcr(pcr));
        let v = TsPacket::parse(&p).unwrap();
        assert_eq!(v.pid(), 0x100);
        assert!(v.payload_unit_start());
        assert_eq!(v.continuity_counter(), 5);
        assert_eq!(v.pcr(), Some(pcr));
        assert_eq!(v.payload().len(), 188 - 12);
        assert!(!v.discontinuity());
    }

    #[test]
    fn bad_packets_are_errors() {
        assert_eq!(
            TsPacket::parse(&[0x47; 10]).unwrap_err(),
            TsError::WrongLength(10)
        );
        let mut p = [0u8; TS_PACKET_LEN];
        assert_eq!(TsPacket::parse(&p).unwrap_err(), TsError::NoSync);
        p[0] = TS_SYNC_BYTE;
        p[3] = 0x30;
        p[4] = 200;
        assert_eq!(
            TsPacket::parse(&p).unwrap_err(),
            TsError::BadAdaptationField(200)
        );
    }
}
