//! What the readers of evidence (`trace`, `ingest`) and the database mode (`db run`) add to a
//! results document besides their series: the database and its layout, a PostgreSQL wait
//! profile, how every input line was used, a trace's I/O breakdown and its slowest waits.
//!
//! Files written before these were typed held them in `extra` under the same names (`engine`,
//! `layout`, `wait_profile`, `source`, `trace_profile`, `trace_io`, `trace_slowest`);
//! [`super::Results::from_json`] moves them here ([`upgrade_extra`]).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Results;

/// The database engine of a `db run`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DbEngine {
    Sqlite,
    Postgres,
}

impl DbEngine {
    /// The engine's name as written in the file (`sqlite`, `postgres`).
    pub fn name(self) -> &'static str {
        match self {
            DbEngine::Sqlite => "sqlite",
            DbEngine::Postgres => "postgres",
        }
    }
}

/// The SLOB-style table layout a `db run` measured: `schemas` tables of `rows` rows, one row
/// per block, keys shuffled with `seed`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct DbLayout {
    pub schemas: u32,
    pub rows: u64,
    pub seed: u64,
}

/// The database of a `db run`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DbInfo {
    pub engine: DbEngine,
    pub layout: DbLayout,
    /// Sampled wait events of the server's sessions (PostgreSQL with `--ash-hz`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_profile: Option<WaitProfile>,
}

/// Wait events sampled from `pg_stat_activity` during a PostgreSQL run (an ASH-like profile).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct WaitProfile {
    /// Sampling rate, samples per second.
    pub hz: f64,
    /// Samples taken.
    pub samples: u64,
    /// Session states seen over all samples (the denominator of `share`).
    pub session_samples: u64,
    /// Most frequent first.
    pub events: Vec<WaitShare>,
}

/// One wait event of a [`WaitProfile`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct WaitShare {
    pub event: String,
    pub count: u64,
    /// Share (0..1) of the session samples.
    pub share: f64,
}

/// How a reader of evidence used its input files.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SourceInfo {
    /// The input format (`oracle-10046`, `bcc`, `fio`, ...).
    pub format: String,
    pub files: Vec<SourceFile>,
}

/// The line accounting of one input file: nothing is dropped silently.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SourceFile {
    pub path: String,
    #[serde(default)]
    pub gzip: bool,
    /// Lines read.
    pub lines: u64,
    /// Lines that carried data that was used.
    pub parsed: u64,
    /// Lines recognised and deliberately not used, by kind.
    #[serde(default)]
    pub ignored: BTreeMap<String, u64>,
    /// Lines not understood.
    pub unparsed: u64,
    /// The first few unparsed lines.
    #[serde(default)]
    pub unparsed_first: Vec<UnparsedLine>,
}

/// An unparsed line quoted in the report.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct UnparsedLine {
    pub line: u64,
    pub text: String,
    pub reason: String,
}

/// A trace's I/O waits broken down by file#, obj# and block range, per event.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TraceIo {
    /// Blocks per block range.
    pub block_range_blocks: u64,
    /// At most this many objects and block ranges are kept per event (the busiest).
    #[serde(default)]
    pub top: u64,
    pub events: Vec<TraceIoEvent>,
}

/// The I/O of one wait event of a trace.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TraceIoEvent {
    pub event: String,
    /// By file# (all of them), busiest first.
    #[serde(default)]
    pub files: Vec<IoByFile>,
    /// By obj#, busiest first.
    #[serde(default)]
    pub objects: Vec<IoByObject>,
    /// Objects seen (more than `objects` holds when cut at `top`).
    #[serde(default)]
    pub objects_total: u64,
    /// By block range, busiest first.
    #[serde(default)]
    pub block_ranges: Vec<IoByRange>,
    #[serde(default)]
    pub block_ranges_total: u64,
}

/// Waits of one event on one file#, obj# or block range.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IoFigures {
    pub count: u64,
    pub seconds: f64,
    pub mean_us: f64,
    pub max_us: u64,
    /// Blocks read or written.
    pub blocks: u64,
}

/// The waits of one event on one data file (`file#`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IoByFile {
    pub file: i64,
    /// Lowest and highest block touched, when the waits named blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_block: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_block: Option<u64>,
    #[serde(flatten)]
    pub io: IoFigures,
}

/// The waits of one event on one segment (`obj#`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IoByObject {
    pub obj: i64,
    #[serde(flatten)]
    pub io: IoFigures,
}

/// The waits of one event on one range of blocks of a file.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IoByRange {
    pub file: i64,
    pub first_block: u64,
    pub last_block: u64,
    #[serde(flatten)]
    pub io: IoFigures,
}

/// One of the slowest single waits of a trace.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SlowWait {
    pub event: String,
    pub ela_us: u64,
    /// The trace file and line.
    pub path: String,
    pub line: u64,
    pub cursor: String,
    /// Wall-clock time (RFC 3339) when anchored, else empty.
    #[serde(default)]
    pub time: String,
    #[serde(default)]
    pub tim: Option<i64>,
    #[serde(default)]
    pub file: Option<i64>,
    #[serde(default)]
    pub block: Option<u64>,
    #[serde(default)]
    pub blocks: Option<u64>,
    #[serde(default)]
    pub obj: Option<i64>,
}

/// Move what older files kept in `extra` into its typed field (the keys named in the module
/// doc, and `watch`); a key whose typed field is already set stays in `extra`.
pub(super) fn upgrade_extra(r: &mut Results) -> Result<()> {
    fn take<T: serde::de::DeserializeOwned>(
        extra: &mut BTreeMap<String, serde_json::Value>,
        key: &str,
        what: &str,
    ) -> Result<Option<T>> {
        match extra.remove(key) {
            None => Ok(None),
            Some(v) => serde_json::from_value(v)
                .map(Some)
                .with_context(|| format!("its {what} (extra.{key}) is not valid")),
        }
    }
    let x = &mut r.extra;
    if r.watch.is_none() {
        r.watch = take(x, "watch", "watch budget")?;
    }
    if r.db.is_none() && x.contains_key("engine") && x.contains_key("layout") {
        r.db = Some(DbInfo {
            engine: take(x, "engine", "database engine")?.unwrap_or(DbEngine::Sqlite),
            layout: take(x, "layout", "database layout")?.unwrap_or_default(),
            wait_profile: take(x, "wait_profile", "wait profile")?,
        });
    }
    if r.source.is_none() {
        r.source = take(x, "source", "line accounting")?;
    }
    if r.trace_profile.is_none() {
        r.trace_profile = take(x, "trace_profile", "trace profile")?;
    }
    if r.trace_io.is_none() {
        r.trace_io = take(x, "trace_io", "trace I/O breakdown")?;
    }
    if r.trace_slowest.is_empty() {
        r.trace_slowest = take(x, "trace_slowest", "slowest waits")?.unwrap_or_default();
    }
    Ok(())
}
