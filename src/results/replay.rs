//! The replay of recorded I/O (`iolens replay`, a results kind): how the source was mapped onto
//! the target, how faithfully the schedule was kept (issue-time error, span, IOPS per interval,
//! order within sessions), and recorded beside replayed latency per session. Recorded and
//! replayed latency per event are the document's two runs (`phase` `recorded` and `replay`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Hist, LatencySummary};

/// Where one source file (a trace's file#, a biosnoop disk) lies on the target.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ReplayMapEntry {
    /// The source's name for it (`file#25`, `disk vda`).
    pub file: String,
    /// Byte offset in the target's data area where the file's byte `first_byte` lies.
    pub target_offset: u64,
    /// The file's lowest byte the source touches (the region starts here).
    pub first_byte: u64,
    /// Bytes of the region (from `first_byte` to the highest byte touched).
    pub length: u64,
}

/// I/Os in flight, recorded and replayed, over a span (a session's, an interval, the whole
/// replay). The recorded figures are 0 when the source holds no latencies. Stored flat in the
/// span's own object.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct InFlight {
    /// Most I/Os in flight at once, recorded and replayed.
    #[serde(default)]
    pub recorded_peak_in_flight: u32,
    #[serde(default)]
    pub replayed_peak_in_flight: u32,
    /// Mean I/Os in flight over the span, recorded and replayed.
    #[serde(default)]
    pub recorded_mean_in_flight: f64,
    #[serde(default)]
    pub replayed_mean_in_flight: f64,
}

impl InFlight {
    /// From (peak, mean) recorded and replayed.
    pub fn of(recorded: (u32, f64), replayed: (u32, f64)) -> InFlight {
        InFlight {
            recorded_peak_in_flight: recorded.0,
            replayed_peak_in_flight: replayed.0,
            recorded_mean_in_flight: recorded.1,
            replayed_mean_in_flight: replayed.1,
        }
    }

    /// (peak, mean) recorded.
    pub fn recorded(&self) -> (u32, f64) {
        (self.recorded_peak_in_flight, self.recorded_mean_in_flight)
    }

    /// (peak, mean) replayed.
    pub fn replayed(&self) -> (u32, f64) {
        (self.replayed_peak_in_flight, self.replayed_mean_in_flight)
    }
}

/// One recorded session replayed.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ReplaySession {
    pub session: String,
    /// I/Os recorded and replayed.
    pub ios: u64,
    pub recorded: LatencySummary,
    pub replayed: LatencySummary,
    /// I/Os issued after one that was recorded later (0 when the session's order was kept).
    pub reordered: u64,
    /// Recorded first issue to last completion, s (scaled by the timing).
    pub recorded_s: f64,
    /// Replayed first issue to last completion, s.
    pub replayed_s: f64,
    /// The session's issue-time errors summed, s: in `think` timing each one delays the rest
    /// of the session, so `replayed_s` = think time + replayed latencies + this.
    pub late_s: f64,
    /// Threads the session replayed on: its recorded I/Os dealt so that each lane's I/Os did
    /// not overlap when recorded (1 for a session that waited for each I/O).
    #[serde(default)]
    pub lanes: u32,
    /// I/Os in flight from the session's first issue to its last completion.
    #[serde(flatten)]
    pub in_flight: InFlight,
}

/// One interval of the replay: I/Os the recording issued in it (scaled) and those replayed,
/// and how many were in flight in it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ReplayInterval {
    pub start_s: f64,
    pub duration_s: f64,
    pub recorded_ios: u64,
    pub replayed_ios: u64,
    /// I/Os in flight within the interval (each recorded I/O from its scaled issue for its
    /// recorded latency); the mean is the time each I/O spent in flight within the interval,
    /// summed, over its length (Little's law: IOPS × latency).
    #[serde(flatten)]
    pub in_flight: InFlight,
}

/// What `iolens replay` did and how faithfully.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ReplayInfo {
    /// The source format (`oracle-10046`, `biosnoop`).
    pub source: String,
    /// `recorded`, `scaled:K`, `fast` or `think`.
    pub timing: String,
    /// The speed factor K of `scaled:K` (1 for `recorded` and `think`, 0 for `fast`).
    pub speed: f64,
    /// Bytes per block of the source's block numbers.
    pub block_size: u64,
    /// Whether recorded writes were written (`--writes`); else they were skipped.
    pub writes: bool,
    /// Whether the target was opened with O_DIRECT.
    pub direct: bool,
    pub map: Vec<ReplayMapEntry>,
    /// I/Os in the source that were to be replayed.
    pub recorded_ios: u64,
    /// I/Os issued.
    pub replayed_ios: u64,
    /// I/Os that failed (counted, not timed).
    pub errors: u64,
    /// Reads whose data's stamp named another offset than the one mapped (scratch targets; 0
    /// means every block read held its own offset).
    pub misplaced: u64,
    /// Reads whose blocks were checked against their stamps.
    pub stamp_checked: u64,
    /// Recorded I/Os not replayed, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Issue time minus scheduled time of every I/O, ns (never negative: no I/O is issued
    /// early). Empty for `fast`.
    pub issue_error: LatencySummary,
    pub issue_error_hist: Hist,
    /// The schedule's first to last issue, s (the recording's, scaled).
    pub scheduled_span_s: f64,
    /// First to last actual issue, s.
    pub replayed_span_s: f64,
    /// (replayed − scheduled span) / scheduled span, %.
    pub span_error_pct: f64,
    /// First issue to last completion: recorded (scaled) and replayed, s.
    pub recorded_duration_s: f64,
    pub replayed_duration_s: f64,
    /// Largest lateness of any I/O, s: how far behind the replay fell.
    pub behind_s: f64,
    /// True when the p99 issue-time error stayed under 1 ms and the span within 1 %.
    pub kept_up: bool,
    /// Times a session thread owed its CPU a pause (150 µs), having used more than 90 % of it
    /// over 2 ms (I/Os due closer together than a sleep's wake-up); it pays it in the gaps
    /// before its next I/Os, sleeping to their due time instead of spinning: the kernel keeps
    /// 5 % of each CPU from real-time threads, and short pauses of the replay's choosing
    /// replace a stall of tens of ms of the kernel's.
    #[serde(default)]
    pub pauses: u64,
    /// I/Os issued out of the recorded order within their session (0: order kept).
    pub reordered: u64,
    pub sessions: Vec<ReplaySession>,
    /// I/Os in flight over all sessions (first issue to last completion).
    #[serde(flatten)]
    pub in_flight: InFlight,
    /// Whether the source held each I/O's recorded latency (an fio iolog does not).
    #[serde(default)]
    pub recorded_latency_known: bool,
    /// Achieved beside recorded (scaled) IOPS, per interval of the replay.
    pub intervals: Vec<ReplayInterval>,
}
