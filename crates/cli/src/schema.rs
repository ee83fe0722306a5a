//! JSON Schemas (draft 2020-12) of the documents `--json` prints, made from the types that
//! write them (schemars), so a schema cannot drift from its output: `metronome schema NAME`
//! prints one, `docs/schemas/NAME.schema.json` ships it, and the tests validate real output
//! against it with Python's `jsonschema` (Debian's `python3-jsonschema`).
//!
//! Every document starts with `schema_version` ([`SCHEMA_VERSION`]) and the `run` header.
//!
//! `metronome schema openapi` prints the control API's OpenAPI 3.0 description instead (what
//! `serve --control` serves at `/openapi.json`; shipped as `docs/openapi.json`).

use crate::report::{Versioned, SCHEMA_VERSION};
use schemars::JsonSchema;
use serde_json::Value;

/// The documents that have a schema: name, what prints it, and how its schema is made.
pub(crate) const DOCUMENTS: &[(&str, &str, Schema)] = &[
    (
        "recv",
        "metronome recv --json: what the receiver measured (the last line with --interval)",
        document::<crate::recv::Judged<'static>>,
    ),
    (
        "serve",
        "metronome serve --json, one stream: what the sender did and its receivers reported (the \
         last line with --interval)",
        document::<metronome_apps::sender::SenderOutcome>,
    ),
    (
        "serve-streams",
        "metronome serve --json with --config, --stream, --rtsp or --control: the server, each \
         stream's status, the pacing cores",
        document::<metronome_apps::streams::ServerOutcome>,
    ),
    (
        "serve-raw",
        "metronome serve --raw --json: uncompressed video sent (RFC 4175), its pacing and \
         conformance (the last line with --interval)",
        document::<metronome_apps::uncompressed::RawSenderOutcome>,
    ),
    (
        "recv-raw",
        "metronome recv --raw --json: uncompressed video received, frames and latency (the last \
         line with --interval)",
        document::<metronome_apps::uncompressed::RawReceiverOutcome>,
    ),
    (
        "recv-interval",
        "metronome recv --json --interval: one line per interval, before the summary",
        line::<crate::report::IntervalLine<crate::recv::RecvInterval>>,
    ),
    (
        "serve-interval",
        "metronome serve --json --interval, one stream: one line per interval, before the summary",
        line::<crate::report::IntervalLine<crate::serve::ServeInterval>>,
    ),
    (
        "serve-raw-interval",
        "metronome serve --raw --json --interval: one line per interval, before the summary",
        line::<crate::report::IntervalLine<crate::serve::RawServeInterval>>,
    ),
    (
        "recv-raw-interval",
        "metronome recv --raw --json --interval: one line per interval, before the summary",
        line::<crate::report::IntervalLine<crate::recv::RawRecvInterval>>,
    ),
    (
        "demo",
        "metronome demo --json: the sender's outcome and its two receivers' (unicast, multicast)",
        document::<crate::demo::DemoRun>,
    ),
    (
        "lab-summary",
        "metronome lab run: summary.json in the results directory (its own header: `schema`)",
        line::<metronome_lab::results::Summary>,
    ),
    (
        "bench-pacing",
        "metronome bench pacing --json: send lateness and receiver jitter of the real-time pacer \
         and the plain-sleep baseline, and their ratios",
        document::<crate::bench::PacingBench>,
    ),
    (
        "bench-streams",
        "metronome bench streams --json: many streams under EDF/DM against the naive baseline",
        document::<crate::bench_streams::StreamsBench>,
    ),
    (
        "quality",
        "metronome quality --json: PSNR, SSIM and MOS of a video against its reference",
        document::<crate::quality::Report<'static>>,
    ),
    (
        "frames",
        "metronome frames --json: what viewers saw, from the sender's and a receiver's traces",
        document::<crate::frames::Report>,
    ),
    (
        "lab-run",
        "metronome lab run --json: where the results are, and the run's summary",
        document::<crate::lab::LabRun<'static>>,
    ),
    (
        "lab-list",
        "metronome lab list --json: the built-in scenarios",
        document::<crate::lab::LabList>,
    ),
    (
        "lab-report",
        "metronome lab report --json: the report drawn, and how many points it shows",
        document::<crate::lab::LabReport>,
    ),
    (
        "lab-slurm",
        "metronome lab slurm --json: the job array's scripts, and the jobs submitted",
        document::<crate::lab_slurm::LabSlurm>,
    ),
    (
        "lab-compare",
        "metronome lab compare --json: each receiver's figures in two runs, side by side",
        document::<crate::lab::Compared<'static>>,
    ),
    (
        "bench-sim",
        "metronome bench sim --json: the simulator's speed, beside ns-3's",
        document::<crate::bench_sim::SimBench>,
    ),
    (
        "bench-emu",
        "metronome bench emu --json: the emulator against the kernel's tbf",
        document::<crate::bench_emu::EmuBench>,
    ),
    (
        "bench-srt",
        "metronome bench srt --json: Metronome's RTX beside srt-live-transmit",
        document::<crate::bench_srt::SrtBench>,
    ),
    (
        "bench-ns3",
        "metronome bench ns3 --json: seed 002's dumbbell in ns-3 and in Metronome",
        document::<crate::bench_ns3::Ns3Bench>,
    ),
    (
        "bench-ladder",
        "metronome bench ladder --json: a ladder encoded once, judged as FFmpeg does",
        document::<crate::bench_ladder::LadderBench>,
    ),
    (
        "bench-quality",
        "metronome bench quality --json: PSNR and SSIM against FFmpeg's filters",
        document::<crate::bench_quality::QualityBench>,
    ),
    (
        "bench-raw",
        "metronome bench raw --json: uncompressed video's pacing against GStreamer's",
        document::<crate::bench_raw::RawBench>,
    ),
    (
        "bench-viewers",
        "metronome bench viewers --json: many RTSP viewers of one server",
        document::<crate::bench_viewers::ViewersBench>,
    ),
    (
        "emu-relay",
        "metronome emu relay --json: a UDP relay through the link model",
        document::<crate::emu::RelayReport>,
    ),
    (
        "emu-pair-ready",
        "metronome emu pair --json: the first line, once its namespaces are up",
        line::<crate::emu::PairReady>,
    ),
    (
        "emu-pair",
        "metronome emu pair --json: the last line, what each way of the link did",
        document::<crate::emu::PairReport>,
    ),
];

/// The name `metronome schema` gives the control API's OpenAPI description.
const OPENAPI: &str = "openapi";

/// The control API's OpenAPI document, as printed and shipped.
fn openapi_text() -> String {
    serde_json::to_string_pretty(&metronome_apps::control::openapi()).unwrap_or_default()
}

/// Makes a document's schema from its name and description.
type Schema = fn(&str, &str) -> Value;

/// The schema of document `name` (one of [`DOCUMENTS`]).
pub(crate) fn named(name: &str) -> Option<Value> {
    let (_, what, schema) = DOCUMENTS.iter().find(|(n, _, _)| *n == name)?;
    Some(schema(name, what))
}

/// `T` as `--json` prints it, titled, its `schema_version` pinned to this binary's.
fn document<T: JsonSchema + 'static>(name: &str, what: &str) -> Value {
    line::<Versioned<'static, T>>(name, what)
}

/// A JSON line `T` (an interval, or a whole document), titled, its `schema_version` pinned.
fn line<T: JsonSchema>(name: &str, what: &str) -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "$id".into(),
            format!("metronome:{name}/{SCHEMA_VERSION}").into(),
        );
        o.insert("title".into(), format!("metronome {name}").into());
        o.insert("description".into(), what.into());
    }
    if let Some(p) = v.pointer_mut("/properties/schema_version") {
        *p = serde_json::json!({ "const": SCHEMA_VERSION });
    }
    metronome_apps::control::plain_descriptions(&mut v);
    v
}

/// `metronome schema [NAME]`: the schema, or the list of documents.
pub(crate) fn run(name: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    let Some(name) = name else {
        // One column of names, as wide as the longest.
        let width = DOCUMENTS.iter().map(|(n, _, _)| n.len()).max().unwrap_or(0);
        for (n, what, _) in DOCUMENTS {
            println!("{n:<width$}  {what}");
        }
        println!("{OPENAPI:<width$}  the control API (serve --control), described in OpenAPI 3.0");
        return Ok(());
    };
    if name == OPENAPI {
        println!("{}", openapi_text());
        return Ok(());
    }
    let schema = named(name).ok_or_else(|| {
        let names: Vec<&str> = DOCUMENTS.iter().map(|(n, _, _)| *n).collect();
        format!(
            "no document '{name}'; the documents: {}, {OPENAPI}",
            names.join(", ")
        )
    })?;
    println!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schemas shipped in docs/schemas are the ones the binary makes.
    #[test]
    fn the_shipped_schemas_are_current() {
        for (name, _, _) in DOCUMENTS {
            let path = format!(
                "{}/../../docs/schemas/{name}.schema.json",
                env!("CARGO_MANIFEST_DIR")
            );
            let shipped = std::fs::read_to_string(&path).unwrap_or_default();
            let made = serde_json::to_string_pretty(&named(name).unwrap()).unwrap() + "\n";
            assert!(
                shipped == made,
                "{path} is not what `metronome schema {name}` prints: run it and write its output there"
            );
        }
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
        let shipped = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            shipped == openapi_text() + "\n",
            "{path} is not what `metronome schema openapi` prints: run it and write its output there"
        );
    }
}
