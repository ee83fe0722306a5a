//! A streaming MPEG-TS checker: feed it packets with their times and read a [`TsReport`] of
//! what a conformance-minded receiver would care about — continuity counters (§2.4.3.3), PSI
//! CRCs and repetition (§2.4.4), PCR spacing and PCR-vs-arrival drift (§2.4.2.2), and whether
//! every video PES (one access unit) had fully arrived by its PTS (§2.4.3.7).
//!
//! Used by this crate's tests; also usable on a received stream.

use crate::psi::{parse_section, pat_programs, pmt_pcr_pid};
use crate::tsmux::decode_timestamp;
use metronome_wire::ts::{TsPacket, PCR_HZ, PCR_MODULUS, PID_NULL, PID_PAT, TS_PACKET_LEN};
use std::collections::HashMap;
use std::time::Duration;

/// What the analyzer saw. Intervals are measured on the packet times given to it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TsReport {
    /// TS packets pushed, null and broken ones included.
    pub packets: u64,
    /// Null packets (PID 0x1FFF): stuffing, otherwise ignored.
    pub null_packets: u64,
    /// Packets that did not parse: no 0x47 sync byte, or an adaptation field that does not
    /// fit.
    pub sync_errors: u64,
    /// Continuity counter jumps on non-null PIDs not excused by a discontinuity indicator.
    pub cc_errors: u64,
    /// PAT sections that parsed and checked (one per PAT packet starting a section).
    pub pat_count: u64,
    /// PMT sections that parsed and checked, on the PID the PAT names.
    pub pmt_count: u64,
    /// PSI sections whose CRC32 (or framing) did not check.
    pub psi_errors: u64,
    /// The PMT's PID, from the latest PAT's first program (`None` before a PAT).
    pub pmt_pid: Option<u16>,
    /// The PCR's PID, from the latest PMT (`None` before a PMT); its PES are the ones
    /// followed for the PTS checks.
    pub pcr_pid: Option<u16>,
    /// Longest time between consecutive good PATs (ISO/IEC 13818-1 and DVB want at most
    /// 100 ms for the PAT and PMT); zero with fewer than two.
    pub max_pat_interval: Duration,
    /// Longest time between consecutive good PMTs; zero with fewer than two.
    pub max_pmt_interval: Duration,
    /// Packets on the PCR PID that carried a PCR.
    pub pcr_count: u64,
    /// Longest time between consecutive PCRs (§2.7.2 wants at most 100 ms); zero with fewer
    /// than two.
    pub max_pcr_interval: Duration,
    /// Largest |(PCR − first PCR) − (time − time of first PCR)| in nanoseconds.
    pub max_pcr_drift_ns: u64,
    /// PES packets (access units) started on the PCR PID.
    pub pes_count: u64,
    /// PES packets that started with a random_access_indicator.
    pub random_access_count: u64,
    /// PES packets whose first NAL was not an access unit delimiter.
    pub missing_aud: u64,
    /// PES packets whose last TS packet arrived after their PTS.
    pub late_pes: u64,
    /// Smallest PTS − (time of the PES's last packet), in nanoseconds.
    pub min_pes_slack_ns: Option<i64>,
    /// The first problem seen, in words.
    pub first_error: Option<String>,
}

/// The checker. Only the PES on the PCR PID is followed for PTS checks.
#[derive(Debug, Default)]
pub struct TsAnalyzer {
    report: TsReport,
    cc: HashMap<u16, u8>,
    last_pat: Option<u64>,
    last_pmt: Option<u64>,
    last_pcr_time: Option<u64>,
    first_pcr: Option<(u64, u64)>,
    /// (PTS in 90 kHz, time of the latest packet) of the PES being received.
    open_pes: Option<(u64, u64)>,
}

impl TsAnalyzer {
    /// An analyzer that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// What has been seen so far; the PES still being received is not in it yet (see
    /// [`TsAnalyzer::finish`]).
    pub fn report(&self) -> &TsReport {
        &self.report
    }

    /// Ends the stream: the last open PES is checked too.
    pub fn finish(mut self) -> TsReport {
        self.close_pes();
        self.report
    }

    fn error(&mut self, what: String) {
        self.report.first_error.get_or_insert(what);
    }

    /// Checks one packet that is due at `time` on the stream timeline.
    pub fn push(&mut self, packet: &[u8; TS_PACKET_LEN], time: Duration) {
        let t = time.as_nanos() as u64;
        let n = self.report.packets;
        self.report.packets += 1;
        let Ok(p) = TsPacket::parse(packet) else {
            self.report.sync_errors += 1;
            self.error(format!(
                "packet {n}: no sync byte or a bad adaptation field"
            ));
            return;
        };
        if p.pid() == PID_NULL {
            self.report.null_packets += 1;
            return;
        }
        self.check_cc(n, &p);
        if p.pid() == PID_PAT && p.payload_unit_start() {
            self.on_pat(n, t, &p);
        } else if Some(p.pid()) == self.report.pmt_pid && p.payload_unit_start() {
            self.on_pmt(n, t, &p);
        }
        if Some(p.pid()) == self.report.pcr_pid {
            self.on_pcr_pid(n, t, &p);
        }
    }

    /// §2.4.3.3: the counter goes up by one per packet with payload and stays put without one.
    fn check_cc(&mut self, n: u64, p: &TsPacket) {
        let cc = p.continuity_counter();
        if let Some(prev) = self.cc.insert(p.pid(), cc) {
            let expected = if p.has_payload() {
                (prev + 1) & 0x0f
            } else {
                prev
            };
            if cc != expected && !p.discontinuity() {
                self.report.cc_errors += 1;
                self.error(format!(
                    "packet {n}: PID {:#x} continuity counter {cc}, expected {expected}",
                    p.pid()
                ));
            }
        }
    }

    fn interval(last: &mut Option<u64>, t: u64, max: &mut Duration) {
        if let Some(l) = last.replace(t) {
            *max = (*max).max(Duration::from_nanos(t.saturating_sub(l)));
        }
    }

    fn on_pat(&mut self, n: u64, t: u64, p: &TsPacket) {
        match parse_section(p.payload()).filter(|s| s.table_id == 0) {
            Some(s) => {
                self.report.pat_count += 1;
                Self::interval(&mut self.last_pat, t, &mut self.report.max_pat_interval);
                self.report.pmt_pid = pat_programs(s.body).next().map(|(_, pid)| pid);
            }
            None => {
                self.report.psi_errors += 1;
                self.error(format!("packet {n}: PAT does not parse or fails its CRC"));
            }
        }
    }

    fn on_pmt(&mut self, n: u64, t: u64, p: &TsPacket) {
        match parse_section(p.payload()).filter(|s| s.table_id == 2) {
            Some(s) => {
                self.report.pmt_count += 1;
                Self::interval(&mut self.last_pmt, t, &mut self.report.max_pmt_interval);
                self.report.pcr_pid = pmt_pcr_pid(s.body);
            }
            None => {
                self.report.psi_errors += 1;
                self.error(format!("packet {n}: PMT does not parse or fails its CRC"));
            }
        }
    }

    fn on_pcr_pid(&mut self, n: u64, t: u64, p: &TsPacket) {
        if let Some(pcr) = p.pcr() {
            self.report.pcr_count += 1;
            Self::interval(
                &mut self.last_pcr_time,
                t,
                &mut self.report.max_pcr_interval,
            );
            let (t0, pcr0) = *self.first_pcr.get_or_insert((t, pcr));
            let pcr_ns =
                ((pcr + PCR_MODULUS - pcr0) % PCR_MODULUS) as u128 * 1_000_000_000 / PCR_HZ as u128;
            let drift = (pcr_ns as i128 - (t - t0) as i128).unsigned_abs() as u64;
            self.report.max_pcr_drift_ns = self.report.max_pcr_drift_ns.max(drift);
        }
        if p.payload().is_empty() {
            return;
        }
        if !p.payload_unit_start() {
            if let Some((_, last)) = self.open_pes.as_mut() {
                *last = t;
            }
            return;
        }
        self.close_pes();
        let payload = p.payload();
        // PES header (§2.4.3.6): start code, stream_id, length, flags, header length, PTS.
        let pts = (payload.len() >= 14 && payload[..3] == [0, 0, 1] && payload[7] & 0x80 != 0)
            .then(|| decode_timestamp(payload[9..14].try_into().expect("5 bytes")));
        let Some(pts) = pts else {
            self.error(format!("packet {n}: PES without a PTS"));
            return;
        };
        self.report.pes_count += 1;
        if p.bytes()[3] & 0x20 != 0 && p.bytes()[4] > 0 && p.bytes()[5] & 0x40 != 0 {
            self.report.random_access_count += 1;
        }
        let es = payload.get(9 + payload[8] as usize..).unwrap_or(&[]);
        let aud = es.starts_with(&[0, 0, 0, 1, 9]) || es.starts_with(&[0, 0, 1, 9]);
        if !aud {
            self.report.missing_aud += 1;
        }
        self.open_pes = Some((pts, t));
    }

    /// Compares the finished PES's PTS with the arrival of its last packet on the PCR timeline.
    fn close_pes(&mut self) {
        let (Some((pts, last)), Some((t0, pcr0))) = (self.open_pes.take(), self.first_pcr) else {
            return;
        };
        let pts_27 = pts * 300;
        let ahead = ((pts_27 + PCR_MODULUS - pcr0) % PCR_MODULUS) as i128;
        // A PTS more than half the wrap behind the first PCR is read as negative.
        let ahead = if ahead > PCR_MODULUS as i128 / 2 {
            ahead - PCR_MODULUS as i128
        } else {
            ahead
        };
        let due = t0 as i128 + ahead * 1_000_000_000 / PCR_HZ as i128;
        let slack = (due - last as i128) as i64;
        if slack < 0 {
            self.report.late_pes += 1;
        }
        self.report.min_pes_slack_ns =
            Some(self.report.min_pes_slack_ns.map_or(slack, |s| s.min(slack)));
    }
}
