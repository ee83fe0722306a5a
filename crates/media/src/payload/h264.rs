//! RFC 6184 packetization mode 1: single NAL unit packets and FU-A fragments.

/// FU-A's NAL unit type (RFC 6184 §5.8).
const FU_A: u8 = 28;

/// The NAL units of an Annex B access unit, as byte ranges without their start codes.
pub(super) fn nal_ranges(au: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut starts = Vec::new();
    let mut i = 0;
    while i + 2 < au.len() {
        if au[i] == 0 && au[i + 1] == 0 && au[i + 2] == 1 {
            starts.push(i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    let ends: Vec<usize> = starts
        .iter()
        .skip(1)
        .map(|&s| {
            // The next start code, with a four-byte one's leading zero.
            let mut e = s - 3;
            if e > 0 && au[e - 1] == 0 {
                e -= 1;
            }
            e
        })
        .chain(std::iter::once(au.len()))
        .collect();
    starts.into_iter().zip(ends).filter(|(s, e)| e > s)
}

/// Packets a NAL unit of `len` bytes makes with payloads of at most `max` bytes.
pub(super) fn packets_for(len: usize, max: usize) -> usize {
    if len <= max {
        1
    } else {
        // An FU-A carries two bytes of its own and the NAL unit's body without its header.
        (len - 1).div_ceil(max - 2)
    }
}

/// The next payload of NAL unit `nal` from `*offset` into `out`: the whole unit if it fits,
/// else an FU-A fragment; moves `*offset` past what it took.
pub(super) fn fragment(nal: &[u8], offset: &mut usize, max: usize, out: &mut Vec<u8>) {
    out.clear();
    if nal.len() <= max {
        out.extend_from_slice(nal);
        *offset = nal.len();
        return;
    }
    let header = nal[0];
    let body = &nal[1..];
    let from = offset.saturating_sub(1).min(body.len());
    let start = *offset == 0;
    let to = (from + max - 2).min(body.len());
    let end = to == body.len();
    out.push((header & 0xe0) | FU_A);
    out.push(u8::from(start) << 7 | u8::from(end) << 6 | (header & 0x1f));
    out.extend_from_slice(&body[from..to]);
    *offset = to + 1;
}
