//! Many streams in one process, each a real-time task (period, deadline, cost, rate).
//!
//! - What a user declares (command line, TOML, the HTTP API) is `metronome_config`'s.
//! - [`server`]: the stream server: admission control and the stream table, and its parts:
//!   `server::open` (a spec becomes a stream: source opened, task derived, admitted, sockets
//!   and ring), `server::status` (what it shows; `server::metrics` the same in Prometheus's
//!   text format), `server::rtcp` (sender and receiver reports
//!   for every stream), `server::encode_cost` (what a live encoder costs, measured when one is
//!   first asked for; the send cost is the driver's `metronome_rt::pacing::calibrate`).
//! - [`stream`]: what a stream's threads share, and the per-stream send logic ([`stream::Cursor`]).
//! - the driver's `metronome_rt::pacing`: one pacing core per real-time core, EDF or DM over
//!   the lanes of all its streams ([`stream::TsLane`], `uncompressed::stream::RawLane`).
//! - [`control`]: what a controller may ask of the server ([`control::StreamControl`]) and
//!   why it refuses ([`control::ControlError`]).
//! - [`naive`]: the baseline, one plain sleeping thread per stream.
//! - [`producer`]: the producer pool that fills the rings.
//! - [`rate_knob`]: how the rate controller's target, and a person's, reach the producer.

pub mod control;
pub mod naive;
pub mod outlet;
pub mod producer;
mod protection_wait;
pub mod rate_knob;
pub mod server;
pub mod srtp;
pub mod stream;

pub use metronome_config::serve::{SchedKind, ServeConfig};
pub use metronome_config::stream::{
    format_bitrate, parse_bitrate, parse_cpus, parse_duration, parse_share, SourceSpec, SpecError,
    StreamSpec,
};
pub use metronome_rt::pacing::Calibration;
pub use outlet::{MediaOut, RtcpOut, SessionOutlet, StartInfo};
pub(crate) use server::open::open_source;
pub use server::open::{task_for, task_of_shape, GivenSource, PacketShape, RtpSourcePlan};
pub use server::status::{ServerStatus, StreamList, StreamStatus};
pub use server::{
    CoreRt, PacerView, RawAdmission, ServerConfig, ServerError, ServerOutcome, Stopped,
    StreamServer,
};
