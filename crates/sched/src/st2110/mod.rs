//! SMPTE ST 2110-21 traffic shaping for uncompressed video (RFC 4175), sans-IO: the sender
//! pacing models ([`FrameSchedule`] for each [`SenderType`]) and the receiver's conformance
//! measurement ([`Conformance`]). Time comes in as arguments; nothing here reads a clock.
//!
//! # The model (ST 2110-21:2017, checked against EBU LIST and Intel MTL)
//!
//! Frame n has its epoch at n × TFRAME (for us: after the stream's own epoch, not the SMPTE
//! epoch; the RTP timestamp of the frame is that epoch on the 90 kHz clock). A virtual
//! receiver reads its NPACKETS packets one every TRS from TVD = TPR0 = epoch + TROFFSET.
//!
//! | quantity | value | source |
//! |---|---|---|
//! | TRS, gapped | TFRAME × RACTIVE / NPACKETS | §6.3; LIST `settings.cpp` `calculate_vrx_constants` |
//! | TRS, linear | TFRAME / NPACKETS | §6.4; LIST (`get_ractive` = 1 for linear) |
//! | RACTIVE, progressive | 1080/1125 (= 720/750) | §6.3.2; LIST `get_ractive`, MTL `rv_tp_init` |
//! | TRODEFAULT, progressive | 43/1125 × TFRAME from 1080 lines, 28/750 × TFRAME below | §6.3.2; LIST `get_tro_default_multiplier`, MTL |
//! | TDRAIN | (TFRAME / NPACKETS) / β, β = 1.1 | network compatibility model; LIST `c_calculator.cpp` |
//! | CMAX narrow (N) | max(4, ⌊NPACKETS / (43200 × RACTIVE × TFRAME)⌋), RACTIVE = 1 for NL | sender-type table; LIST `calculate_cmax_narrow` |
//! | CMAX wide (W) | max(16, ⌊NPACKETS / (21600 × TFRAME)⌋) | LIST `calculate_cmax_wide`, MTL |
//! | VRX_FULL narrow | max(1500·8/MAXIP, ⌊NPACKETS / (27000 × TFRAME)⌋), MAXIP = 1500 | LIST `calculate_vrx_full_narrow`, MTL |
//! | VRX_FULL wide | max(1500·720/MAXIP, ⌊NPACKETS / (300 × TFRAME)⌋) | LIST `calculate_vrx_full_wide`, MTL |
//!
//! (EBU LIST: github.com/ebu/pi-list, `cpp/libs/st2110/lib/src/ebu/list/st2110/d21/`; Intel
//! MTL: github.com/OpenVisualCloud/Media-Transport-Library, `lib/src/st2110/st_rx_timing_parser.c`,
//! verified there against Matrox VERO and Phabrix analysers. The wide CMAX is 16 for HD but
//! grows with NPACKETS: 47 for 2160p59.94 with 17 280 packets.)
//!
//! - **Cinst** (network compatibility model): a bucket that every packet enters and that
//!   loses one packet every TDRAIN (on a grid from the first packet measured). Cinst is the
//!   number of packets a packet finds still in the bucket when it arrives, as LIST and MTL
//!   count it (a burst of n packets at one instant reaches n − 1). Must stay ≤ CMAX.
//! - **VRX** (virtual receiver buffer): per frame, the packets of that frame arrived so far
//!   minus the reads done by then (reads at TPR0 + j × TRS, j < NPACKETS; none before TPR0).
//!   Must stay ≤ VRX_FULL and ≥ 0 (negative: a read found its packet missing).
//!
//! Only progressive formats are modelled; interlaced field timing is not.
//!
//! # Example
//!
//! ```
//! use metronome_sched::st2110::{
//!     Arrival, Conformance, EpochAnchor, FrameFormat, FrameRate, FrameSchedule, SenderType,
//!     Verdict,
//! };
//! use metronome_time::Timestamp;
//!
//! // 1080p59.94, 4320 RTP packets a frame, sent as a narrow gapped (2110TPN) sender.
//! let format = FrameFormat::new(FrameRate::P59_94, 4320, 1080);
//! let sender = FrameSchedule::new(&format, SenderType::NarrowGapped);
//! let mut receiver = Conformance::for_sender(&sender, EpochAnchor::first_packet_of(&sender));
//! let stream_epoch = Timestamp::from_millis(10);
//! for n in 0..3 {
//!     let epoch = format.frame_epoch(stream_epoch, n);
//!     for k in 0..format.npackets() {
//!         // The pacer's target time; on a perfect link also the arrival time.
//!         let at = sender.send_time(epoch, k);
//!         let marker = k + 1 == format.npackets();
//!         receiver.on_packet(Arrival { at, rtp_ts: format.rtp_timestamp(n), marker });
//!     }
//! }
//! let summary = receiver.summary();
//! assert_eq!(summary.verdict, Verdict::Narrow);
//! assert!(summary.latency.p99_us.as_secs_f64() <= 1.2 * sender.last_offset().as_secs_f64());
//! ```

mod batching;
mod conformance;
mod format;
mod report;
mod schedule;

pub use batching::{batch_end, frame_task, max_batch, SendCosts};
pub use conformance::{Arrival, Conformance, EpochAnchor};
pub use format::{tro_default, ActiveRatio, FrameFormat, FrameRate, Limits, ReadSchedule};
pub use report::{ClassResult, ConformanceSummary, FrameReport, Verdict};
pub use schedule::{FrameSchedule, SenderType};
