//! Means-only I/O evidence: a database's cumulative I/O counters (operations, bytes, total
//! time) read at snapshots — `pg_stat_io`, `pg_stat_database`, `pg_stat_statements` — and
//! turned into per-interval deltas.
//!
//! These hold counts and sums only. There is no distribution here: no histogram, no
//! percentiles, and nothing downstream may draw one from them. A mean is the total time over
//! the count of the same interval; where the source keeps no count or no time (or its timing
//! was off) the mean is absent, never guessed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The snapshots of one view, as deltas between consecutive snapshots.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IoStats {
    /// The view or query the snapshots are of (`pg_stat_io`, `pg_stat_database`,
    /// `pg_stat_statements`).
    pub view: String,
    /// The column set recognised (which server versions print it), in words.
    pub column_set: String,
    /// Snapshots read.
    pub snapshots: u64,
    /// The intervals between consecutive snapshots; a single snapshot gives one interval that
    /// begins at the view's `stats_reset` (its counters are totals since then).
    pub intervals: Vec<IoStatsInterval>,
    /// One per key and operation, most time first (then most operations).
    pub series: Vec<IoStatsSeries>,
    /// Resets, counters that went back, keys that came and went, timing that was off: in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One interval between two snapshots.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IoStatsInterval {
    /// Its start, RFC 3339, when the snapshots say when they were taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Its length in seconds, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Keys whose counters were reset (a new `stats_reset`, or counters that went back) in
    /// this interval: their deltas count from the reset only, a lower bound of the interval.
    #[serde(default)]
    pub resets: u64,
}

/// One operation of one key (a backend type, object and context; a database; a statement).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IoStatsSeries {
    /// Whose counters: `client backend/relation/normal`, a database, a statement's query id.
    pub key: String,
    /// The operation: `read`, `write`, `writeback`, `extend`, `fsync`, `hit`, `eviction`,
    /// `reuse`, or a statement's `shared read` …
    pub op: String,
    /// Operations over all intervals (absent when the source keeps only a time for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Bytes over all intervals, when the source says (or gives the operation size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Time spent over all intervals, ms (absent when not timed or timing was off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<f64>,
    /// `time_ms / count`: a mean, the only latency figure such counters hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_ms: Option<f64>,
    /// Per interval (aligned with [`IoStats::intervals`]); `None` where the key is in neither
    /// snapshot of that interval.
    pub deltas: Vec<Option<IoStatsDelta>>,
}

/// What one key's operation did in one interval.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IoStatsDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<f64>,
}
