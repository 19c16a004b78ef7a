//! Oracle extended SQL trace (event 10046) → per-event latency histograms, a Method R style
//! response-time profile, an I/O breakdown by file#/obj#/block range, and the slowest waits.
//!
//! Data flow: each file is streamed line by line ([`super::LineReader`], gzip detected by magic
//! bytes) through [`TraceParser`], which classifies every line:
//! - `WAIT #c: nam='…' ela= N p=v … tim=T` → the event's latency (ela, µs) is binned by `tim`
//!   into per-interval histograms ([`super::Binned`]), and added to the profile, the I/O
//!   breakdown (for events with a file parameter: `file#`, `file number`, or 9i `p1`) and the
//!   slowest-waits list (with line numbers);
//! - database calls `PARSE/EXEC/FETCH/CLOSE/UNMAP/SORT UNMAP #c:c=…,e=…,dep=…,tim=…`, LOB calls
//!   (`LOBREAD:` …) and `RPC EXEC:` → CPU (`c`) and elapsed (`e`) of the outermost calls;
//! - `*** yyyy-mm-dd hh:mm:ss.fff` (also ISO 8601 with zone, also after `SESSION ID:(…)` etc.)
//!   anchor `tim` to wall-clock time: the first timestamp line is paired with the next `tim`
//!   seen. A `tim` ≥ 10^15 is taken as Unix-epoch µs (10g and older). Without either, times
//!   are relative to the trace's own clock;
//! - SQL text, `BINDS`/bind detail, `STAT`, `XCTEND`, `ERROR`, `PARSE ERROR`, header lines,
//!   `TRACE CONTINUED` markers and blank lines are recognised and counted as ignored by kind;
//! - anything else is counted as unparsed, with the first few quoted with line numbers.
//!
//! Response-time profile (after Millsap & Holt's Method R). Units: `c`, `e`, `ela` and `tim` are
//! µs (9i and later).
//! - R is the traced span: from the earliest start of a call or wait (`tim − e`, `tim − ela`;
//!   the first `tim` unless tracing began inside a call or wait) to the last `tim`.
//! - CPU = Σ c of the *outermost* calls. A call's `c` and `e` include those of its recursive
//!   children, which are written before it with `dep` one greater; so each call claims the
//!   unclaimed calls deeper than itself, and whatever no parent claims by the end of the file
//!   (a trace that begins inside a PL/SQL call holds only `dep=1` or deeper calls) is outermost,
//!   at whatever depth.
//! - Each wait is classified by the call that contains it: *within* a call when it ended after
//!   the call began (`tim > call tim − e`), *between calls* when it ended before a depth-0 call
//!   began, and otherwise (no call of the file contains it: tracing began or ended inside a
//!   call) *in no traced call*, except the idle events below, which are between calls. Waits
//!   without `tim` (9i) are between calls by event name only (`SQL*Net message from client`).
//! - Unaccounted-for = R − CPU − Σ every wait's ela: time covered by neither a call's CPU nor a
//!   wait (negative values are reported as they are: they reveal double-counted or
//!   clock-granular time).
//!
//! Typed `Results` fields: `trace_profile` `{total, files:[{path, session, profile}]}`,
//! `trace_io` `{block_range_blocks, events:[{event, files, objects, block_ranges}]}`,
//! `trace_slowest` (list of waits) and `source` (line accounting, see [`super`]).
//! Files of one session (same `SESSION ID`, or linked by `TRACE CONTINUED FROM FILE`, or the
//! same process id when neither is present) become one [`RunResult`].

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::Result;
use rustc_hash::FxHashMap;
use serde_json::json;

use super::{
    count_unparsed, parse_i64, parse_u64, rfc3339_ns, source_file, trim, Binned, LineReader,
    LineStats, TraceOptions,
};
use crate::results::analysis::{CallFigures, FileProfile, Profile, ProfileRow, TraceProfile};
use crate::results::evidence::{
    IoByFile, IoByObject, IoByRange, IoFigures, SlowWait, SourceInfo, TraceIo, TraceIoEvent,
};
use crate::results::{BucketConvention, Kind, Results, RunResult, Spec};

mod document;
mod fields;
mod method_r;
mod parser;
#[cfg(test)]
mod tests;

pub use document::{build_results, read_traces};
use parser::TraceParser;

/// Block-range granularity of the I/O breakdown (blocks): 2^17 blocks = 1 GiB of 8 KiB blocks.
pub const BLOCK_RANGE: u64 = 1 << 17;
/// Largest ela=, c= or e= accepted (2^40 µs, about 12.7 days): larger values are corrupt
/// lines, and bounding them keeps every sum of them far from overflowing.
pub const MAX_TRACE_US: u64 = 1 << 40;
/// A `tim` at or above this is Unix-epoch µs (2001-09-09 and later).
const EPOCH_TIM: u64 = 1_000_000_000_000_000;
/// Most waits kept pending (unresolved between/within call) before the oldest are resolved by
/// event name; bounds memory for calls with millions of waits.
const MAX_PENDING: usize = 1 << 20;
/// Deepest `dep=` accepted (Oracle's recursion limit is far lower).
const MAX_DEPTH: u64 = 1000;
/// Events that, without `tim`, are taken to lie between database calls.
const BETWEEN_CALL_EVENTS: [&str; 3] = [
    "SQL*Net message from client",
    "SQL*Net vector message from client",
    "single-task message",
];

/// Options for parsing one trace file.
#[derive(Clone, Debug)]
pub struct ParseOptions {
    /// Interval length (ns).
    pub interval_ns: u64,
    /// Slowest waits to keep.
    pub top: usize,
    /// Keep every I/O wait that names its file and block ([`TraceFile::io_records`], for
    /// `iolens replay`).
    pub keep_io: bool,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            interval_ns: 1_000_000_000,
            top: 20,
            keep_io: false,
        }
    }
}

/// Per-event totals.
#[derive(Clone, Debug, Default)]
pub struct EventTotals {
    pub name: String,
    pub count: u64,
    pub(crate) ela_us: u64,
    pub(crate) max_us: u64,
    pub(crate) between_us: u64,
    pub(crate) between_count: u64,
    /// Waits in no call of the file and not between calls (e.g. in the PL/SQL of a call that
    /// began before tracing did, or still running when the trace ends).
    pub(crate) outside_us: u64,
    pub(crate) outside_count: u64,
    between_by_name: bool,
    io: bool,
}

/// I/O aggregate for a file, object or block range.
#[derive(Clone, Debug, Default)]
struct IoAgg {
    count: u64,
    ela_us: u64,
    max_us: u64,
    blocks: u64,
    min_block: u64,
    max_block: u64,
}

impl IoAgg {
    #[inline]
    fn add(&mut self, ela: u64, block: Option<u64>, blocks: u64) {
        if self.count == 0 {
            self.min_block = u64::MAX;
        }
        self.count += 1;
        self.ela_us += ela;
        self.max_us = self.max_us.max(ela);
        self.blocks += blocks;
        if let Some(b) = block {
            self.min_block = self.min_block.min(b);
            self.max_block = self.max_block.max(b);
        }
    }
    fn merge(&mut self, o: &IoAgg) {
        if self.count == 0 {
            *self = o.clone();
            return;
        }
        self.count += o.count;
        self.ela_us += o.ela_us;
        self.max_us = self.max_us.max(o.max_us);
        self.blocks += o.blocks;
        self.min_block = self.min_block.min(o.min_block);
        self.max_block = self.max_block.max(o.max_block);
    }
}

/// What one trace file yielded.
pub struct TraceFile {
    pub path: String,
    /// Session identity used for grouping files.
    pub session: String,
    pub(crate) continued_from: Option<String>,
    pub(crate) instance: Option<String>,
    pub(crate) binned: Binned,
    /// Wall-clock µs minus raw `tim`, when known.
    pub(crate) offset_us: Option<i64>,
    pub stats: LineStats,
    pub gzip: bool,
    pub events: Vec<EventTotals>,
    /// Outermost calls by kind: their `c` and `e` include their children's.
    pub calls: BTreeMap<String, CallFigures>,
    /// Outermost calls by depth (`dep=`): depth 0 only, unless the trace begins or ends
    /// inside a call.
    pub(crate) outermost_by_depth: BTreeMap<u64, u64>,
    pub recursive_calls: u64,
    pub errors: BTreeMap<String, u64>,
    io_files: FxHashMap<(u32, i64), IoAgg>,
    io_objs: FxHashMap<(u32, i64), IoAgg>,
    io_ranges: FxHashMap<(u32, i64, u64), IoAgg>,
    pub slowest: Vec<SlowWait>,
    /// Every I/O wait with a file and a block, in trace order (only with
    /// [`ParseOptions::keep_io`]).
    pub io_records: Vec<TraceIoRecord>,
    pub warnings: Vec<String>,
    pub(crate) first_tim: Option<i64>,
    pub(crate) last_tim: Option<i64>,
    /// The traced span (µs on the `tim` clock): from the earliest start of a line (its `tim`,
    /// less its `e` or `ela` for calls and waits, so that a call or wait in progress when
    /// tracing began counts from its own start) to the largest `tim`. R is its length.
    pub(crate) tim_range: Option<(i64, i64)>,
}

/// One I/O wait of a trace that names its file and first block (`db file sequential read`,
/// `db file scattered read`, `direct path read`/`write`, …): what `iolens replay` issues.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceIoRecord {
    /// The wait's end on the trace's `tim` clock (µs).
    pub tim: i64,
    /// Its elapsed time (µs): it began at `tim − ela`.
    pub ela_us: u64,
    /// Index of its event in [`TraceFile::events`].
    pub event: u32,
    pub file: i64,
    pub block: u64,
    pub blocks: u64,
    /// 1-based line number in the trace file.
    pub line: u64,
}

/// Parameters of one WAIT line.
#[derive(Default, Debug, PartialEq)]
struct WaitParams {
    ela: Option<u64>,
    tim: Option<i64>,
    file: Option<i64>,
    block: Option<u64>,
    blocks: Option<u64>,
    obj: Option<i64>,
    p1: Option<i64>,
    p2: Option<u64>,
    p3: Option<u64>,
    bad: Option<&'static str>,
}

/// Parse a trace timestamp to Unix ns: `2024-03-01 10:00:00.123` (taken as UTC) or ISO 8601
/// with a zone (`2017-09-12T10:32:11.123456+02:00`).
pub(crate) fn parse_timestamp(ts: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(ts).ok()?.trim();
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(s) {
        return d.timestamp_nanos_opt();
    }
    for f in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S",
    ] {
        if let Ok(d) = chrono::NaiveDateTime::parse_from_str(s, f) {
            return d.and_utc().timestamp_nanos_opt();
        }
    }
    None
}

/// Parse one trace from a reader (used by `iolens trace` and tests).
pub fn parse_trace(r: &mut LineReader, opts: &ParseOptions) -> Result<TraceFile> {
    let name = r.name.clone();
    TraceParser::new(&name, opts.clone()).parse_reader(r)
}
