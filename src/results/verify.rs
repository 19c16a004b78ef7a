//! Data verification in the results model: how a run's reads were verified
//! ([`VerifyMode`]), what checking them found and cost ([`VerifyStats`]) and each corrupt unit
//! ([`CorruptionReport`] of a [`CorruptionKind`]), as `run`, `calibrate` and `verify` record them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How reads are verified: asked for on the command line, and (never `auto`) as recorded in
/// [`VerifyStats::mode`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VerifyMode {
    /// `full` on scratch files iolens created, `none` on other targets.
    #[default]
    Auto,
    /// Do not look at the data read.
    None,
    /// Check each unit's magic, target id, offset and generation (no checksum).
    Header,
    /// Everything `header` checks, plus the CRC32C of every 512-byte unit.
    Full,
}

impl VerifyMode {
    /// The name, as in the JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            VerifyMode::Auto => "auto",
            VerifyMode::None => "none",
            VerifyMode::Header => "header",
            VerifyMode::Full => "full",
        }
    }
}

/// What reading a run's blocks back found and cost (see `verify`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct VerifyStats {
    /// `none`, `header` or `full`.
    pub mode: VerifyMode,
    /// Bytes per stamp unit (each carries magic, checksum, target id, offset, generation).
    pub unit_bytes: u64,
    /// Reads whose data was checked, and the stamp units they held.
    pub reads_verified: u64,
    pub units_verified: u64,
    /// Time spent verifying per read and per unit, ns: the median of clock-timed samples
    /// (one batch of completions in eight), robust to preemption inside a sample.
    pub ns_per_read: f64,
    pub ns_per_unit: f64,
    /// Mean of the same samples (includes any preemption inside them).
    #[serde(default)]
    pub ns_per_read_mean: f64,
    /// Writes stamped, and the time of stamping (registration and checksums included) per
    /// write, ns: median of samples (one write in eight), and their mean.
    pub writes_stamped: u64,
    pub stamp_ns_per_write: f64,
    #[serde(default)]
    pub stamp_ns_per_write_mean: f64,
    /// Reads that also checked the generation of the last write this run completed.
    pub generation_checks: u64,
    /// Slots of the in-memory generation map (0 when the run does not write).
    pub generation_slots: u64,
    /// Failed checks not reported because one of this run's own writes to the block was in
    /// flight during the read (a torn mix is legitimate then).
    pub skipped_concurrent: u64,
    /// Corrupt units found (all of them; `corruption` keeps the first reports).
    pub errors: u64,
    /// Units found rewritten by a workload since the fill (`iolens verify`).
    #[serde(default)]
    pub units_rewritten: u64,
    /// The run stopped at the first corruption.
    pub stopped: bool,
    /// Why verification is off or limited, when it is.
    #[serde(default)]
    pub note: String,
}

/// Kinds of corruption (and, offline, of damage to the generation journal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CorruptionKind {
    /// The unit's contents do not match its checksum.
    #[default]
    Checksum,
    /// A valid unit stamped for another offset.
    Misdirected,
    /// A valid unit of another iolens target.
    Foreign,
    /// No iolens stamp at all.
    Unstamped,
    /// An older generation than the last write this run completed.
    LostWrite,
    /// A generation this run never completed (no write was in flight).
    UnexpectedGeneration,
    /// The read came back short: the target ends early.
    Truncated,
    /// Offline: an older generation than the generation journal recorded as written.
    Stale,
    /// Offline: the generation journal is missing although workloads rewrote blocks.
    JournalMissing,
    /// Offline: the generation journal's header or pages are damaged.
    JournalDamaged,
}

impl CorruptionKind {
    /// The kebab-case name, as in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            CorruptionKind::Checksum => "checksum",
            CorruptionKind::Misdirected => "misdirected",
            CorruptionKind::Foreign => "foreign",
            CorruptionKind::Unstamped => "unstamped",
            CorruptionKind::LostWrite => "lost-write",
            CorruptionKind::UnexpectedGeneration => "unexpected-generation",
            CorruptionKind::Truncated => "truncated",
            CorruptionKind::Stale => "stale",
            CorruptionKind::JournalMissing => "journal-missing",
            CorruptionKind::JournalDamaged => "journal-damaged",
        }
    }
}

/// One corrupt unit: where, what was expected and what was found.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CorruptionReport {
    /// What is wrong with the unit.
    pub kind: CorruptionKind,
    /// Absolute byte offset of the (first) corrupt 512-byte unit in the target.
    pub offset: u64,
    /// Consecutive units with the same fault this report covers (e.g. a whole misdirected
    /// block); `expected`/`found` are those of the first.
    #[serde(default)]
    pub units: u64,
    /// Absolute offset and length of the I/O that found it.
    pub io_offset: u64,
    pub io_len: u64,
    pub expected: String,
    pub found: String,
    /// One line for people.
    pub message: String,
    pub session: u32,
    /// Seconds from the start of measurement (negative during warm-up).
    pub time_s: f64,
    /// The target the unit is in (its path as given), in a run over several targets; empty
    /// where the document has one target and the unit is in it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
}
