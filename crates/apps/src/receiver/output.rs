//! Where each packet goes besides the session: the per-packet trace (CSV), the payload capture
//! (`--output`) and the sink (a live judge of quality).

use super::{PayloadSinkHandle, ReceiverRunConfig, RecvError};
use metronome_session::receiver::{PacketRecord, ReceiverSession};
use metronome_time::Timestamp;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

pub(super) struct Outputs {
    pub(super) trace: Option<(String, BufWriter<File>)>,
    pub(super) output: Option<(String, BufWriter<File>)>,
    pub(super) sink: Option<PayloadSinkHandle>,
}

pub(super) fn create(
    path: &Option<PathBuf>,
) -> Result<Option<(String, BufWriter<File>)>, RecvError> {
    let Some(p) = path else { return Ok(None) };
    let name = p.display().to_string();
    let f = File::create(p).map_err(|source| RecvError::File {
        path: name.clone(),
        source,
    })?;
    Ok(Some((name, BufWriter::with_capacity(1 << 20, f))))
}

pub(super) fn open_outputs(cfg: &ReceiverRunConfig) -> Result<Outputs, RecvError> {
    let mut out = Outputs {
        trace: create(&cfg.trace)?,
        output: create(&cfg.output)?,
        sink: cfg.sink.clone(),
    };
    if let Some((p, w)) = &mut out.trace {
        writeln!(w, "arrival_ns,ssrc,seq,ext_seq,rtp_ts,size,verdict,transit_ticks,jitter_ticks,interarrival_ns,one_way_delay_ns,arrival_unix_ns")
            .map_err(|e| write_err(p, e))?;
    }
    Ok(out)
}

pub(super) fn write_err(path: &str, source: std::io::Error) -> RecvError {
    RecvError::File {
        path: path.to_string(),
        source,
    }
}

/// The packets FEC rebuilt by `arrival`, recorded as the stream's.
pub(super) fn record_rebuilt(
    session: &mut ReceiverSession,
    out: &mut Outputs,
    arrival: Timestamp,
    arrival_unix_ns: u64,
) -> Result<(), RecvError> {
    while let Some(rec) = session.poll_rebuilt(arrival) {
        if rec.is_ok() {
            record(
                out,
                arrival,
                arrival_unix_ns,
                session.repaired_packet(),
                &rec,
            )?;
        }
    }
    Ok(())
}

pub(super) fn record(
    out: &mut Outputs,
    arrival: Timestamp,
    arrival_unix_ns: u64,
    data: &[u8],
    rec: &Result<PacketRecord, metronome_session::receiver::Dropped>,
) -> Result<(), RecvError> {
    if let Some((p, w)) = &mut out.trace {
        let r = match rec {
            Ok(r) => writeln!(
                w,
                "{},{:08x},{},{},{},{},{},{},{:.4},{},{},{arrival_unix_ns}",
                arrival.as_nanos(),
                r.ssrc,
                r.seq,
                r.ext_seq,
                r.rtp_ts,
                r.size,
                r.verdict.name(),
                r.transit_ticks,
                r.jitter_ticks,
                r.interarrival_ns.map(|v| v.to_string()).unwrap_or_default(),
                r.one_way_delay_ns
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
            ),
            Err(d) => writeln!(
                w,
                "{},,,,,{},dropped: {},,,,,{arrival_unix_ns}",
                arrival.as_nanos(),
                data.len(),
                d.name()
            ),
        };
        r.map_err(|e| write_err(p, e))?;
    }
    use metronome_session::receiver::SeqVerdict::*;
    let Ok(r) = rec else { return Ok(()) };
    if let Some(sink) = &out.sink {
        sink.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .packet(r, arrival_unix_ns, data);
    }
    if !matches!(r.verdict, InOrder | Reordered | Resync) {
        return Ok(());
    }
    let payload = data.get(r.payload.clone()).unwrap_or_default();
    if let Some((p, w)) = &mut out.output {
        w.write_all(payload).map_err(|e| write_err(p, e))?;
    }
    if let Some(sink) = &out.sink {
        sink.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .payload(r, payload);
    }
    Ok(())
}
