//! Argument types shared by the subcommands: rates, sizes, durations, source selection.

use clap::Args;
use metronome_apps::streams::StreamSpec;
use metronome_media::{MediaError, TestSource, TestSourceConfig, TsFileSource, TsSource};
use metronome_sched::LatePolicy;
use std::path::PathBuf;
use std::time::Duration;

/// A bit rate: `5000000`, `500k`, `5M`, `5mbit`, `1.5M`, `1gbit`.
pub(crate) fn parse_rate(s: &str) -> Result<u64, String> {
    metronome_apps::streams::parse_bitrate(s)
}

/// An amount of memory: `512MiB`, `2GiB`.
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    metronome_config::stream::parse_bytes(s)
}

/// An address prefix: `10.1.0.0/16`, `239.1.2.3`, `fd00::/8`.
pub(crate) fn parse_prefix(s: &str) -> Result<metronome_config::prefix::IpPrefix, String> {
    s.parse()
}

/// A duration in seconds (`10`, `2.5`) or with a unit (`500ms`, `15ms`, `3s`, `250us`).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() && v <= 1e7 => Ok(Duration::from_secs_f64(v)),
        Ok(_) => Err(format!("'{s}' is out of range")),
        Err(_) => metronome_apps::streams::parse_duration(s),
    }
}

/// A run's length (a bench's `--duration`): [`parse_duration`], and more than nothing.
pub(crate) fn parse_run_length(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err(format!("'{s}' is no time: a run must last some, e.g. 2s")),
        d => Ok(d),
    }
}

/// What a stream does with packets later than the stall threshold (`--late`): as the config
/// file's `late` reads it.
pub(crate) fn parse_late(s: &str) -> Result<LatePolicy, String> {
    metronome_config::serve::parse_late(s)
}

/// `WIDTHxHEIGHT`, both even.
pub(crate) fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("'{s}' is not a frame size; write it like 640x360 (even numbers)");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let (w, h): (u32, u32) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
    if w < 16 || h < 16 || w % 2 == 1 || h % 2 == 1 || w > 7680 || h > 4320 {
        return Err(bad());
    }
    Ok((w, h))
}

/// Where the media comes from.
#[derive(Args, Clone, Debug)]
pub(crate) struct SourceArgs {
    /// An MPEG-TS file to stream, timed by its PCRs. Without it, the built-in live test source.
    #[arg(short, long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Start the file again at its end
    #[arg(long = "loop")]
    pub looping: bool,
    /// Test source frame size
    #[arg(long, value_parser = parse_size, default_value = "640x360")]
    pub size: (u32, u32),
    /// Test source frame rate (1 to 240 frames per second)
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=240))]
    pub fps: u32,
    /// Test source video bit rate (H.264); defaults to what fits the mux rate
    #[arg(long, value_parser = parse_rate)]
    pub bitrate: Option<u64>,
    /// Test source constant mux rate (null-packet stuffing)
    #[arg(long, value_parser = parse_rate, default_value = "5M")]
    pub mux_rate: u64,
}

impl SourceArgs {
    /// The built-in live test source as its defaults have it (640x360 at 30 frames/s), muxed
    /// at `mux_rate`: what the benchmarks stream.
    pub(crate) fn test_pattern(mux_rate: u64) -> SourceArgs {
        SourceArgs {
            input: None,
            looping: false,
            size: (640, 360),
            fps: 30,
            bitrate: None,
            mux_rate,
        }
    }

    pub(crate) fn open(&self) -> Result<Box<dyn TsSource>, MediaError> {
        if let Some(path) = &self.input {
            return Ok(Box::new(TsFileSource::open(path, self.looping)?));
        }
        let mut cfg = TestSourceConfig {
            width: self.size.0,
            height: self.size.1,
            fps: self.fps,
            mux_rate: self.mux_rate,
            ..TestSourceConfig::default()
        };
        // By default the video takes 70% of the mux rate, as the test source's own default does,
        // leaving room for TS/PES/PSI overhead and I-frame bursts.
        let video = self.bitrate.unwrap_or(self.mux_rate * 7 / 10);
        if video >= self.mux_rate {
            return Err(MediaError::Config(format!(
                "video bit rate {video} must be below the mux rate {}; lower --bitrate or raise --mux-rate",
                self.mux_rate
            )));
        }
        cfg.video_bitrate = u32::try_from(video).unwrap_or(u32::MAX);
        Ok(Box::new(TestSource::new(cfg)?))
    }
}

/// The rate controllers' names, for `--cc` (the list `metronome_cc::ControllerKind` keeps).
pub(crate) fn controller_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(metronome_cc::ControllerKind::ALL.map(|k| k.name()))
}

/// `--stream name=cam1,destination=rtp://127.0.0.1:5004,bitrate=4mbit,period=15ms`: the keys of
/// a `[[stream]]` table, as KEY=VALUE pairs separated by commas.
pub(crate) fn parse_stream_arg(s: &str) -> Result<StreamSpec, String> {
    let mut table = toml::Table::new();
    for pair in s.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = pair.split_once('=').ok_or_else(|| {
            format!("--stream '{s}': '{pair}' is not KEY=VALUE; write name=cam1,destination=rtp://HOST:PORT")
        })?;
        let k = match k.trim() {
            "dest" => "destination",
            k => k,
        };
        let v = v.trim();
        let value = match (k, v.parse::<i64>(), v.parse::<bool>()) {
            // 8 hex digits, as outputs print an SSRC, are hex even when all are digits.
            ("ssrc", _, _) if is_hex_ssrc(v) => toml::Value::String(v.to_string()),
            ("fps" | "ring" | "ssrc", Ok(n), _) => toml::Value::Integer(n),
            ("loop" | "send_time", _, Ok(b)) => toml::Value::Boolean(b),
            _ => toml::Value::String(v.to_string()),
        };
        table.insert(k.to_string(), value);
    }
    let spec: StreamSpec = toml::Value::Table(table)
        .try_into()
        .map_err(|e| format!("--stream '{s}': {e}"))?;
    spec.validate_settings().map_err(|e| e.to_string())?;
    Ok(spec)
}

/// Whether `v` is an SSRC in hex: 8 hex digits, or hex after `0x`.
fn is_hex_ssrc(v: &str) -> bool {
    v.starts_with("0x")
        || v.starts_with("0X")
        || (v.len() == 8 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streams_ssrc_is_hex_as_outputs_print_it_or_a_number() {
        let ssrc = |v: &str| {
            parse_stream_arg(&format!("name=s,destination=rtp://127.0.0.1:5004,ssrc={v}"))
                .map(|s| s.ssrc)
        };
        assert_eq!(ssrc("0badcafe"), Ok(Some(0x0bad_cafe)));
        assert_eq!(ssrc("12345678"), Ok(Some(0x1234_5678)));
        assert_eq!(ssrc("0xcafe"), Ok(Some(0xcafe)));
        assert_eq!(ssrc("305419896"), Ok(Some(305_419_896)));
        assert!(ssrc("0xnope").is_err());
    }

    #[test]
    fn rates_durations_sizes() {
        assert_eq!(parse_rate("5M"), Ok(5_000_000));
        assert_eq!(parse_rate("500k"), Ok(500_000));
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("1.5mbit"), Ok(1_500_000));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-3M").is_err());
        assert_eq!(parse_duration("15ms"), Ok(Duration::from_millis(15)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_size("640x360"), Ok((640, 360)));
        assert!(parse_size("641x360").is_err());
        assert!(parse_size("640").is_err());
    }

    #[test]
    fn late_policies() {
        assert_eq!(parse_late("catch-up"), Ok(LatePolicy::CATCH_UP));
        assert_eq!(
            parse_late("catch-up=3"),
            Ok(LatePolicy::CatchUp { factor: 3.0 })
        );
        assert_eq!(
            parse_late("drop-late=20ms"),
            Ok(LatePolicy::DropLate {
                after: Duration::from_millis(20)
            })
        );
        let e = parse_late("catch-up=1").unwrap_err();
        assert!(e.contains("above 1"), "{e}");
        let e = parse_late("rebase").unwrap_err();
        assert!(e.contains("catch-up") && e.contains("drop-late"), "{e}");
    }
}
