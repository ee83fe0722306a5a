//! Program-specific information (ISO/IEC 13818-1 §2.4.4): the PAT and PMT sections, their
//! CRC32, and the single-packet section reader used by the file source and the tests.

/// Stream type for H.264 video in a PMT (ISO/IEC 13818-1 Table 2-34).
pub const STREAM_TYPE_H264: u8 = 0x1b;

/// CRC32 of PSI sections (ISO/IEC 13818-1 Annex A): polynomial 0x04C11DB7, initial value
/// 0xFFFFFFFF, no reflection, no final XOR. A section including its CRC field checks to 0.
pub fn crc32_mpeg2(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = crc_table();
    data.iter().fold(0xffff_ffff, |crc, &b| {
        (crc << 8) ^ TABLE[((crc >> 24) as u8 ^ b) as usize]
    })
}

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u32) << 24;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 0x8000_0000 != 0 {
                (c << 1) ^ 0x04c1_1db7
            } else {
                c << 1
            };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// Writes a long-form section (§2.4.4.1 `section_syntax_indicator` = 1) with the given table id,
/// id extension and body into `out`, appending the CRC32. Returns the section length in bytes.
fn write_section(out: &mut [u8], table_id: u8, id_ext: u16, version: u8, body: &[u8]) -> usize {
    // section_length counts the bytes after itself: 5 header bytes + body + 4 CRC bytes.
    let section_length = 5 + body.len() + 4;
    out[0] = table_id;
    out[1] = 0xb0 | ((section_length >> 8) as u8 & 0x0f); // syntax 1, '0', reserved '11'
    out[2] = section_length as u8;
    out[3..5].copy_from_slice(&id_ext.to_be_bytes());
    out[5] = 0xc0 | ((version & 0x1f) << 1) | 0x01; // reserved '11', version, current_next = 1
    out[6] = 0; // section_number
    out[7] = 0; // last_section_number
    out[8..8 + body.len()].copy_from_slice(body);
    let end = 8 + body.len();
    let crc = crc32_mpeg2(&out[..end]);
    out[end..end + 4].copy_from_slice(&crc.to_be_bytes());
    end + 4
}

/// A PAT with one program (§2.4.4.3, Table 2-30). Returns the section length.
pub fn write_pat(out: &mut [u8], ts_id: u16, program: u16, pmt_pid: u16, version: u8) -> usize {
    let mut body = [0u8; 4];
    body[..2].copy_from_slice(&program.to_be_bytes());
    body[2..].copy_from_slice(&(0xe000 | pmt_pid).to_be_bytes()); // reserved '111', program_map_PID
    write_section(out, 0x00, ts_id, version, &body)
}

/// A PMT with one elementary stream and no descriptors (§2.4.4.8, Table 2-33).
pub fn write_pmt(
    out: &mut [u8],
    program: u16,
    pcr_pid: u16,
    stream_type: u8,
    es_pid: u16,
    version: u8,
) -> usize {
    let mut body = [0u8; 9];
    body[..2].copy_from_slice(&(0xe000 | pcr_pid).to_be_bytes()); // reserved '111', PCR_PID
    body[2..4].copy_from_slice(&0xf000u16.to_be_bytes()); // reserved '1111', program_info_length 0
    body[4] = stream_type;
    body[5..7].copy_from_slice(&(0xe000 | es_pid).to_be_bytes()); // reserved '111', elementary_PID
    body[7..9].copy_from_slice(&0xf000u16.to_be_bytes()); // reserved '1111', ES_info_length 0
    write_section(out, 0x02, program, version, &body)
}

/// A checked long-form section found at the start of a TS payload (after the pointer field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section<'a> {
    /// `table_id` (Table 2-31): 0x00 PAT, 0x02 PMT.
    pub table_id: u8,
    /// The 16 bits after `section_length`: `transport_stream_id` in a PAT,
    /// `program_number` in a PMT.
    pub id_ext: u16,
    /// The bytes between `last_section_number` and the CRC.
    pub body: &'a [u8],
}

/// Reads the first section of a payload with `payload_unit_start_indicator` set (§2.4.4.2:
/// the payload begins with `pointer_field`). Sections spanning several packets, short-form
/// sections and sections with a bad CRC give `None`.
pub fn parse_section(payload: &[u8]) -> Option<Section<'_>> {
    let pointer = *payload.first()? as usize;
    let s = payload.get(1 + pointer..)?;
    if s.len() < 3 || s[1] & 0x80 == 0 {
        return None;
    }
    let len = (((s[1] & 0x0f) as usize) << 8) | s[2] as usize;
    if len < 9 {
        return None;
    }
    let s = s.get(..3 + len)?;
    if crc32_mpeg2(s) != 0 {
        return None;
    }
    Some(Section {
        table_id: s[0],
        id_ext: u16::from_be_bytes([s[3], s[4]]),
        body: &s[8..s.len() - 4],
    })
}

/// The program map PIDs of a PAT body: (program_number, PID), skipping the network PID (program 0).
pub fn pat_programs(body: &[u8]) -> impl Iterator<Item = (u16, u16)> + '_ {
    body.chunks_exact(4)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u16::from_be_bytes([c[2], c[3]]) & 0x1fff,
            )
        })
        .filter(|&(program, _)| program != 0)
}

/// The PMT's PCR_PID and its elementary streams as (stream_type, PID).
pub fn pmt_info(body: &[u8]) -> Option<(u16, Vec<(u8, u16)>)> {
    let pcr_pid = u16::from_be_bytes([*body.first()?, *body.get(1)?]) & 0x1fff;
    let info_len = (u16::from_be_bytes([*body.get(2)?, *body.get(3)?]) & 0x0fff) as usize;
    let mut rest = body.get(4 + info_len..)?;
    let mut streams = Vec::new();
    while rest.len() >= 5 {
        let es_len = (u16::from_be_bytes([rest[3], rest[4]]) & 0x0fff) as usize;
        streams.push((rest[0], u16::from_be_bytes([rest[1], rest[2]]) & 0x1fff));
        rest = rest.get(5 + es_len..).unwrap_or(&[]);
    }
    Some((pcr_pid, streams))
}

/// Only the PCR_PID of a PMT body (allocation-free, for the file reader's hot path).
pub fn pmt_pcr_pid(body: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes([*body.first()?, *body.get(1)?]) & 0x1fff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_reference_value() {
        // The CRC-32/MPEG-2 check value of "123456789".
        assert_eq!(crc32_mpeg2(b"123456789"), 0x0376_e6e7);
    }

    #[test]
    fn pat_pmt_round_trip() {
        let mut buf = [0u8; 184];
        buf[0] = 0; // pointer_field
        let n = write_pat(&mut buf[1..], 1, 1, 0x1000, 3);
        assert_eq!(n, 16);
        let s = parse_section(&buf).unwrap();
        assert_eq!((s.table_id, s.id_ext), (0, 1));
        assert_eq!(pat_programs(s.body).collect::<Vec<_>>(), vec![(1, 0x1000)]);

        let n = write_pmt(&mut buf[1..], 1, 0x100, STREAM_TYPE_H264, 0x100, 0);
        assert_eq!(n, 21);
        let s = parse_section(&buf).unwrap();
        assert_eq!(s.table_id, 2);
        assert_eq!(pmt_info(s.body), Some((0x100, vec![(0x1b, 0x100)])));
        assert_eq!(pmt_pcr_pid(s.body), Some(0x100));
        buf[10] ^= 1;
        assert_eq!(
            parse_section(&buf),
            None,
            "a corrupted section must fail its CRC"
        );
    }
}
