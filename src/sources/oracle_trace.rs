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
use std::io::Write;
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
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            interval_ns: 1_000_000_000,
            top: 20,
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
    pub warnings: Vec<String>,
    pub(crate) first_tim: Option<i64>,
    pub(crate) last_tim: Option<i64>,
    /// The traced span (µs on the `tim` clock): from the earliest start of a line (its `tim`,
    /// less its `e` or `ela` for calls and waits, so that a call or wait in progress when
    /// tracing began counts from its own start) to the largest `tim`. R is its length.
    pub(crate) tim_range: Option<(i64, i64)>,
}

#[derive(Clone, Copy)]
struct Pending {
    end: i64,
    ev: u32,
    ela: u64,
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

/// Waits not yet known to lie within or between calls, oldest first: a `Vec` with a moving
/// front, so that adding one (once per timed wait) is an inlined push. The front is compacted
/// away once it is most of the vector, so memory stays that of the waits held.
#[derive(Default)]
struct PendingQueue {
    v: Vec<Pending>,
    head: usize,
}

impl PendingQueue {
    #[inline]
    fn len(&self) -> usize {
        self.v.len() - self.head
    }

    #[inline]
    fn push_back(&mut self, p: Pending) {
        self.v.push(p);
    }

    #[inline]
    fn pop_front(&mut self) -> Option<Pending> {
        let p = *self.v.get(self.head)?;
        self.head += 1;
        if self.head == self.v.len() {
            self.clear();
        } else if self.head >= 4096 && self.head * 2 >= self.v.len() {
            self.v.drain(..self.head);
            self.head = 0;
        }
        Some(p)
    }

    /// Drop the newest waits while they ended after `t` (they lie within the call that began
    /// at `t`).
    #[inline]
    fn drop_ended_after(&mut self, t: i64) {
        while self.v.len() > self.head && self.v[self.v.len() - 1].end > t {
            self.v.pop();
        }
        if self.v.len() == self.head {
            self.clear();
        }
    }

    #[inline]
    fn clear(&mut self) {
        self.v.clear();
        self.head = 0;
    }
}

/// Streaming parser state for one file.
pub(crate) struct TraceParser {
    opts: ParseOptions,
    out: TraceFile,
    ev_index: HashMap<Vec<u8>, u32>,
    ev_names: Vec<Vec<u8>>,
    /// [`name_key`] of each of `ev_names`: most names differ in it, so few are compared whole.
    ev_keys: Vec<(usize, u64)>,
    ev_op: Vec<usize>,
    /// The parameter layout of each event's latest WAIT line (see [`Template`]).
    ev_tmpl: Vec<Option<Template>>,
    /// The event of the previous WAIT line (consecutive waits are often of one event).
    last_ev: Option<u32>,
    in_sql: bool,
    /// Bytes of failed-statement text still to skip after `PARSE ERROR`.
    sql_left: u64,
    in_header: bool,
    pending_wall_us: Option<i64>,
    /// Added to tim (µs) to place events on the time axis (wall clock when anchored).
    axis_off: i64,
    last_tim: Option<i64>,
    pending: PendingQueue,
    untimed: Vec<(usize, u64)>,
    /// Calls not yet claimed by a parent, by depth then kind (index into `call_kinds`).
    open_calls: Vec<Vec<CallFigures>>,
    call_kinds: Vec<String>,
    /// The field layout of the latest database call line (see [`call_fields_noting`]).
    call_tmpl: Option<Template>,
    /// [`name_key`] of each of `call_kinds`.
    call_kind_keys: Vec<(usize, u64)>,
    /// Inside a `Dump of memory` block (hex lines of a bind value).
    in_dump: bool,
    /// Σ ela (µs) of waits without `tim` since the last `tim` (9i): the clock ran on by at
    /// least that much, so a trailing wait extends the traced span.
    untimed_after: u64,
    slow_min: u64,
    session_id: Option<String>,
    pid: Option<String>,
}

impl TraceParser {
    /// A parser for the file named `path`.
    pub(crate) fn new(path: &str, opts: ParseOptions) -> TraceParser {
        TraceParser {
            out: TraceFile {
                path: path.to_string(),
                session: String::new(),
                continued_from: None,
                instance: None,
                binned: Binned::new(opts.interval_ns),
                offset_us: None,
                stats: LineStats::default(),
                gzip: false,
                events: Vec::new(),
                calls: BTreeMap::new(),
                outermost_by_depth: BTreeMap::new(),
                recursive_calls: 0,
                errors: BTreeMap::new(),
                io_files: FxHashMap::default(),
                io_objs: FxHashMap::default(),
                io_ranges: FxHashMap::default(),
                slowest: Vec::new(),
                warnings: Vec::new(),
                first_tim: None,
                last_tim: None,
                tim_range: None,
            },
            opts,
            ev_index: HashMap::new(),
            ev_names: Vec::new(),
            ev_keys: Vec::new(),
            ev_op: Vec::new(),
            ev_tmpl: Vec::new(),
            last_ev: None,
            in_sql: false,
            sql_left: 0,
            in_header: true,
            pending_wall_us: None,
            axis_off: 0,
            last_tim: None,
            pending: PendingQueue::default(),
            untimed: Vec::new(),
            open_calls: Vec::new(),
            call_kinds: Vec::new(),
            call_kind_keys: Vec::new(),
            call_tmpl: None,
            in_dump: false,
            untimed_after: 0,
            slow_min: 0,
            session_id: None,
            pid: None,
        }
    }

    /// Parse a whole file.
    pub(crate) fn parse_reader(mut self, r: &mut LineReader) -> Result<TraceFile> {
        let mut stats = LineStats::default();
        let mut n = r.line_no;
        while let Some(line) = r.next_line()? {
            n += 1;
            self.line(line, n, &mut stats);
        }
        stats.lines = r.stats.lines;
        let mut f = self.finish();
        f.stats = stats;
        f.gzip = r.gzip;
        Ok(f)
    }

    fn ignored(stats: &mut LineStats, kind: &'static str) {
        if let Some(n) = stats.ignored.get_mut(kind) {
            *n += 1;
        } else {
            stats.ignored.insert(kind.to_string(), 1);
        }
    }

    /// Process one line (without terminator); `n` is its 1-based number.
    pub(crate) fn line(&mut self, line: &[u8], n: u64, stats: &mut LineStats) {
        if self.in_sql {
            if line.starts_with(b"END OF STMT") {
                self.in_sql = false;
            }
            Self::ignored(stats, "sql text");
            return;
        }
        if self.sql_left > 0 {
            self.sql_left = self.sql_left.saturating_sub(line.len() as u64 + 1);
            Self::ignored(stats, "sql text");
            return;
        }
        if self.in_dump {
            if is_hex_dump_line(line) {
                Self::ignored(stats, "binds");
                return;
            }
            self.in_dump = false;
        }
        let Some(&c0) = line.first() else {
            Self::ignored(stats, "blank");
            return;
        };
        match c0 {
            b'W' if line.starts_with(b"WAIT #") => {
                self.in_header = false;
                match self.wait(line, n) {
                    Ok(()) => stats.parsed += 1,
                    Err(why) => count_unparsed(stats, n, line, why),
                }
                return;
            }
            b'F' if line.starts_with(b"FETCH #") => return self.call(line, 6, "FETCH", n, stats),
            b'E' if line.starts_with(b"EXEC #") => return self.call(line, 5, "EXEC", n, stats),
            b'E' if line.starts_with(b"END OF STMT") => return Self::ignored(stats, "sql text"),
            b'E' if line.starts_with(b"ERROR #") => {
                let err = field(line, b"err=").map(|v| String::from_utf8_lossy(v).into_owned());
                let key = format!("ORA-{:0>5}", err.unwrap_or_else(|| "?".into()));
                *self.out.errors.entry(key).or_default() += 1;
                self.note_tim(field(line, b"tim=").and_then(parse_i64));
                return Self::ignored(stats, "ERROR");
            }
            b'P' if line.starts_with(b"PARSE ERROR") => {
                // The failed statement's text follows: `len=` bytes of it.
                self.sql_left = field(line, b"len=").and_then(parse_u64).unwrap_or(0);
                self.note_tim(field(line, b"tim=").and_then(parse_i64));
                return Self::ignored(stats, "PARSE ERROR");
            }
            b'P' if line.starts_with(b"PARSE #") => return self.call(line, 6, "PARSE", n, stats),
            b'P' if line.starts_with(b"PARSING IN CURSOR") => {
                self.in_header = false;
                self.in_sql = true;
                self.note_tim(field(line, b"tim=").and_then(parse_i64));
                return Self::ignored(stats, "PARSING IN CURSOR");
            }
            b'C' if line.starts_with(b"CLOSE #") => return self.call(line, 6, "CLOSE", n, stats),
            b'U' if line.starts_with(b"UNMAP #") => return self.call(line, 6, "UNMAP", n, stats),
            b'S' if line.starts_with(b"SORT UNMAP #") => {
                return self.call(line, 11, "SORT UNMAP", n, stats)
            }
            b'S' if line.starts_with(b"STAT #") => return Self::ignored(stats, "STAT"),
            b'L' if line.starts_with(b"LOB") => {
                if let Some(colon) = memchr::memchr(b':', line) {
                    let name = &line[..colon];
                    if name.iter().all(|c| c.is_ascii_uppercase()) {
                        let kind = String::from_utf8_lossy(name).into_owned();
                        return self.call_named(line, colon + 1, &kind, n, stats);
                    }
                }
            }
            b'R' if line.starts_with(b"RPC EXEC:") => {
                return self.call(line, 9, "RPC EXEC", n, stats)
            }
            b'R' if line.starts_with(b"RPC ") => return Self::ignored(stats, "RPC"),
            b'X' if line.starts_with(b"XCTEND") => {
                self.note_tim(field(line, b"tim=").and_then(parse_i64));
                return Self::ignored(stats, "XCTEND");
            }
            b'B' if line.starts_with(b"BINDS #") => return Self::ignored(stats, "BINDS"),
            b' ' | b'\t' => {
                if trim(line).is_empty() {
                    return Self::ignored(stats, "blank");
                }
                return Self::ignored(stats, "binds");
            }
            b'k' if line.starts_with(b"kxsbbbfp") => return Self::ignored(stats, "binds"),
            b'=' if line.iter().all(|&c| c == b'=') => return Self::ignored(stats, "separator"),
            b'*' if line.starts_with(b"***") => {
                return match self.star_line(line) {
                    Ok(kind) => Self::ignored(stats, kind),
                    Err(why) => count_unparsed(stats, n, line, why),
                };
            }
            _ => {}
        }
        if line.starts_with(b" Bind#") || line.starts_with(b"Bind#") {
            return Self::ignored(stats, "binds");
        }
        if line.starts_with(b"-----") {
            return Self::ignored(stats, "dump section");
        }
        if line.starts_with(b"Dump of memory from") {
            // A bind value Oracle could not format, followed by hex lines.
            self.in_dump = true;
            return Self::ignored(stats, "binds");
        }
        if self.header_line(line) {
            return Self::ignored(stats, "header");
        }
        if trim(line).is_empty() {
            return Self::ignored(stats, "blank");
        }
        count_unparsed(stats, n, line, "not a 10046 trace line");
    }

    /// Header lines (trace file preamble); key lines are remembered.
    fn header_line(&mut self, line: &[u8]) -> bool {
        const KNOWN: [&[u8]; 21] = [
            b"Trace file ",
            b"Dump file ",
            b"Oracle Database ",
            b"Oracle9i ",
            b"Oracle8i ",
            b"Personal Oracle",
            b"With the ",
            b"Version ",
            b"Build label:",
            b"ORACLE_HOME",
            b"System name:",
            b"Node name:",
            b"Release:",
            b"Version:",
            b"Machine:",
            b"Instance name:",
            b"Redo thread mounted",
            b"Oracle process number:",
            b"Unix process pid:",
            b"Windows thread id:",
            b"Windows NT ",
        ];
        let known = KNOWN.iter().any(|k| line.starts_with(k))
            || (self.in_header
                && (line.starts_with(b"/")
                    || line.ends_with(b"Production")
                    || memchr::memmem::find(line, b" Release ").is_some()));
        if line.starts_with(b"Instance name:") {
            let v = trim(&line[14..]);
            self.out.instance = Some(String::from_utf8_lossy(v).into_owned());
        } else if line.starts_with(b"Unix process pid:") {
            let v = &line[17..];
            let end = v.iter().position(|&c| c == b',').unwrap_or(v.len());
            self.pid = Some(String::from_utf8_lossy(trim(&v[..end])).into_owned());
        }
        if known {
            return true;
        }
        // Other `Name: value` / `NAME = value` preamble lines before the first record.
        if self.in_header {
            let key_end = line
                .iter()
                .position(|&c| c == b':' || c == b'=')
                .unwrap_or(0);
            return key_end > 0
                && line[..key_end]
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || b" _-/().#".contains(c));
        }
        false
    }

    /// `***` lines: timestamps (possibly after `SESSION ID:(…)` and similar), continuation.
    fn star_line(&mut self, line: &[u8]) -> std::result::Result<&'static str, &'static str> {
        let rest = trim(&line[3..]);
        if rest.starts_with(b"TRACE CONTINUED FROM FILE") {
            let p = trim(&rest[25..]);
            let p = p.strip_suffix(b"***").map(trim).unwrap_or(p);
            self.out.continued_from = Some(String::from_utf8_lossy(p).into_owned());
            return Ok("trace continued");
        }
        if rest.starts_with(b"TRACE CONTINUES IN FILE") || rest.starts_with(b"TRACE CONTINUED") {
            return Ok("trace continued");
        }
        // `*** [ Unix process pid: 9850 ]`: trcsess's marker of where each process's lines begin.
        if rest.starts_with(b"[") && rest.ends_with(b"]") {
            return Ok("trcsess marker");
        }
        // `*** TRACE FILE RECREATED AFTER BEING REMOVED ***`, `*** DUMP FILE SIZE IS LIMITED …`
        if rest.first().is_some_and(|c| c.is_ascii_uppercase())
            && memchr::memchr(b'(', rest).is_none()
        {
            return Ok("marker");
        }
        let mut ts = rest;
        let mut kind = "timestamp";
        if rest.first().is_some_and(|c| c.is_ascii_digit()) {
            // `*** 2017-09-12T10:32:11.123456+02:00 (PDB1(3))` (12.2+: container after the time)
            if let Some(p) = memchr::memmem::find(rest, b" (") {
                ts = trim(&rest[..p]);
            }
        } else if let Some(open) = memchr::memchr(b'(', rest) {
            if let Some(close) = memchr::memrchr(b')', rest) {
                if close > open {
                    let name = trim(&rest[..open]);
                    let val = &rest[open + 1..close];
                    if name.starts_with(b"SESSION ID") {
                        kind = "session id";
                        if self.session_id.is_none() {
                            self.session_id = Some(String::from_utf8_lossy(val).into_owned());
                        }
                    } else {
                        kind = "session info";
                    }
                    ts = trim(&rest[close + 1..]);
                }
            }
        }
        if ts.is_empty() {
            return Ok(kind);
        }
        match parse_timestamp(ts) {
            Some(ns) => {
                if self.pending_wall_us.is_none() && self.out.first_tim.is_none() {
                    self.pending_wall_us = Some(ns / 1000);
                }
                Ok(kind)
            }
            None => Err("timestamp not understood"),
        }
    }

    #[inline]
    fn note_tim(&mut self, tim: Option<i64>) {
        let Some(t) = tim else { return };
        if self.out.first_tim.is_none() {
            // The time axis is fixed by the first tim: epoch µs, or anchored to the preceding
            // `***` timestamp, or (neither) the trace's own clock.
            self.out.first_tim = Some(t);
            if t as u64 >= EPOCH_TIM {
                self.out.offset_us = Some(0);
            } else if let Some(w) = self.pending_wall_us.take() {
                self.out.offset_us = Some(w.saturating_sub(t));
            }
            self.axis_off = self.out.offset_us.unwrap_or(0);
        }
        self.last_tim = Some(t);
        self.out.last_tim = Some(t);
        self.untimed_after = 0;
        self.out.tim_range = Some(match self.out.tim_range {
            Some((lo, hi)) => (lo.min(t), hi.max(t)),
            None => (t, t),
        });
        if !self.untimed.is_empty() {
            for (op, ela) in std::mem::take(&mut self.untimed) {
                self.out.binned.record(
                    op,
                    t.saturating_add(self.axis_off).saturating_mul(1000),
                    ela.saturating_mul(1000),
                    0,
                );
            }
        }
    }

    /// A call or wait began at `t` (its `tim` less its duration): the traced span starts no
    /// later.
    #[inline]
    fn note_start(&mut self, t: i64) {
        if let Some((lo, _)) = &mut self.out.tim_range {
            *lo = (*lo).min(t);
        }
    }

    /// The index of the event named `name`, if it has one yet.
    #[inline]
    fn find_event(&self, name: &[u8]) -> Option<u32> {
        let key = name_key(name);
        let same = |i: usize| self.ev_keys[i] == key && same_tail(&self.ev_names[i], name);
        if let Some(i) = self.last_ev {
            if same(i as usize) {
                return Some(i);
            }
        }
        if self.out.events.len() <= 32 {
            (0..self.ev_names.len())
                .find(|&i| same(i))
                .map(|i| i as u32)
        } else {
            self.ev_index.get(name).copied()
        }
    }

    /// Whether `text` begins with the name of event `e` and a closing quote.
    #[inline]
    fn named_at(&self, e: u32, text: &[u8]) -> bool {
        let (len, head) = self.ev_keys[e as usize];
        text.get(len) == Some(&b'\'')
            && word_at(text, 0) & low_bytes(len) == head
            && same_tail(&self.ev_names[e as usize], &text[..len])
    }

    /// A new event named `name` (not yet known): its index.
    fn add_event(&mut self, name: &[u8]) -> u32 {
        let i = self.out.events.len() as u32;
        let s = String::from_utf8_lossy(name).into_owned();
        self.ev_op.push(self.out.binned.op(&s));
        self.out.events.push(EventTotals {
            between_by_name: BETWEEN_CALL_EVENTS.contains(&s.as_str()),
            name: s,
            ..Default::default()
        });
        self.ev_index.insert(name.to_vec(), i);
        self.ev_names.push(name.to_vec());
        self.ev_keys.push(name_key(name));
        self.ev_tmpl.push(None);
        i
    }

    /// The parameters after a WAIT line's name: by the layout of the event's previous line when
    /// this one has it, else read the general way (and its layout kept for the next line).
    #[inline]
    fn wait_params(&mut self, found: Option<u32>, p: &[u8]) -> (WaitParams, Option<Template>) {
        if let Some(ev) = found {
            let slot = &mut self.ev_tmpl[ev as usize];
            if let Some(w) = slot.as_ref().and_then(|t| params_by_template(p, t)) {
                return (w, None);
            }
            let mut t = Some(slot.take().unwrap_or_default());
            let w = parse_params_noting(p, &mut t);
            *slot = t;
            return (w, None);
        }
        let mut t = Some(Template::default());
        let w = parse_params_noting(p, &mut t);
        (w, t)
    }

    fn wait(&mut self, line: &[u8], n: u64) -> std::result::Result<(), &'static str> {
        let rest = &line[6..];
        // The cursor number and the event name are short: an eight-byte scan beats a memchr
        // call.
        let colon = find_byte(rest, b':').ok_or("WAIT line without ':'")?;
        let cursor = &rest[..colon];
        let rest = &rest[colon + 1..];
        let rest = rest.trim_ascii_start();
        let after = match rest.strip_prefix(b"nam='") {
            Some(a) => a,
            None => {
                let nam =
                    memchr::memmem::find(rest, b"nam='").ok_or("WAIT line without nam='…'")?;
                &rest[nam + 5..]
            }
        };
        // Most often the event of the previous wait: its name and the closing quote, compared
        // word by word, are the name (a name holds no quote).
        let (q, found) = match self.last_ev.filter(|&e| self.named_at(e, after)) {
            Some(e) => (self.ev_names[e as usize].len(), Some(e)),
            None => {
                let q = find_byte(after, b'\'').ok_or("WAIT line with unterminated nam='")?;
                (q, self.find_event(&after[..q]))
            }
        };
        let name = &after[..q];
        let (params, tmpl) = self.wait_params(found, &after[q + 1..]);
        if let Some(b) = params.bad {
            return Err(b);
        }
        let ela = params.ela.ok_or("WAIT line without ela=")?;
        let ev = match found {
            Some(ev) => ev,
            None => {
                let ev = self.add_event(name);
                self.ev_tmpl[ev as usize] = tmpl;
                ev
            }
        };
        self.last_ev = Some(ev);
        self.note_tim(params.tim);
        if let Some(t) = params.tim {
            self.note_start(t.saturating_sub(ela as i64));
            if self.pending.len() >= MAX_PENDING {
                if let Some(p) = self.pending.pop_front() {
                    self.resolve(p, false);
                }
            }
            self.pending.push_back(Pending { end: t, ev, ela });
        }
        if params.tim.is_none() {
            self.untimed_after = self.untimed_after.saturating_add(ela);
        }
        let e = &mut self.out.events[ev as usize];
        e.count += 1;
        e.ela_us += ela;
        e.max_us = e.max_us.max(ela);
        // Without tim, between/within database call is decided by the event name.
        if params.tim.is_none() && e.between_by_name {
            e.between_us += ela;
            e.between_count += 1;
        }
        // Latency histogram.
        let op = self.ev_op[ev as usize];
        match params.tim.or(self.last_tim) {
            Some(t) => self.out.binned.record(
                op,
                t.saturating_add(self.axis_off).saturating_mul(1000),
                ela.saturating_mul(1000),
                0,
            ),
            None => {
                if self.untimed.len() < MAX_PENDING {
                    self.untimed.push((op, ela));
                } else {
                    self.out.binned.record(op, 0, ela.saturating_mul(1000), 0);
                }
            }
        }
        // I/O breakdown: file parameter named file#/file number, or p1 of I/O events (9i).
        let (file, block, blocks) = if params.file.is_some() {
            (params.file, params.block, params.blocks)
        } else if params.p1.is_some() && is_io_event_name(name) {
            (params.p1, params.p2, params.p3)
        } else {
            (None, None, None)
        };
        let obj = params
            .obj
            .map(|o| if o == u32::MAX as i64 { -1 } else { o });
        if let Some(f) = file {
            e.io = true;
            let nb = blocks.unwrap_or(1);
            self.out
                .io_files
                .entry((ev, f))
                .or_default()
                .add(ela, block, nb);
            if let Some(o) = obj {
                self.out
                    .io_objs
                    .entry((ev, o))
                    .or_default()
                    .add(ela, block, nb);
            }
            if let Some(b) = block {
                self.out
                    .io_ranges
                    .entry((ev, f, b / BLOCK_RANGE))
                    .or_default()
                    .add(ela, block, nb);
            }
        }
        // Slowest waits.
        if self.opts.top > 0 && (ela > self.slow_min || self.out.slowest.len() < self.opts.top) {
            let time = match (params.tim.or(self.last_tim), self.out.offset_us) {
                (Some(t), Some(off)) => rfc3339_ns(t.saturating_add(off).saturating_mul(1000)),
                _ => String::new(),
            };
            let w = SlowWait {
                event: self.out.events[ev as usize].name.clone(),
                ela_us: ela,
                path: self.out.path.clone(),
                line: n,
                cursor: String::from_utf8_lossy(cursor).into_owned(),
                time,
                tim: params.tim,
                file,
                block,
                blocks,
                obj,
            };
            insert_slowest(&mut self.out.slowest, w, self.opts.top);
            if self.out.slowest.len() >= self.opts.top {
                self.slow_min = self.out.slowest.last().map(|w| w.ela_us).unwrap_or(0);
            }
        }
        Ok(())
    }

    /// Resolve a pending wait that no call of the file contains: between calls when a depth-0
    /// call followed it (`between`), else by its event name (between calls, or in a call that
    /// is not in the trace).
    fn resolve(&mut self, p: Pending, between: bool) {
        let e = &mut self.out.events[p.ev as usize];
        if between || e.between_by_name {
            e.between_us += p.ela;
            e.between_count += 1;
        } else {
            e.outside_us += p.ela;
            e.outside_count += 1;
        }
    }

    fn call(&mut self, line: &[u8], prefix: usize, kind: &'static str, n: u64, st: &mut LineStats) {
        // `EXEC #123:c=…` — skip the cursor number to the colon.
        let Some(colon) = find_byte(&line[prefix..], b':') else {
            return count_unparsed(st, n, line, "database call line without ':'");
        };
        self.call_named(line, prefix + colon + 1, kind, n, st)
    }

    /// A database call. Its `c` and `e` include those of its recursive children, which come
    /// before it with a greater `dep`: the call claims every unclaimed call deeper than itself,
    /// so that only outermost calls (at whatever depth the trace holds them) are counted. Waits
    /// that ended after it began lie within it; waits that ended before a depth-0 call began
    /// lie between calls.
    fn call_named(&mut self, line: &[u8], start: usize, kind: &str, n: u64, st: &mut LineStats) {
        self.in_header = false;
        let b = &line[start..];
        let CallFields { c, e, dep, tim } = match self
            .call_tmpl
            .as_ref()
            .and_then(|t| call_fields_by_template(b, t))
        {
            Some(f) => f,
            None => {
                let mut t = Some(self.call_tmpl.take().unwrap_or_default());
                let f = call_fields_noting(b, &mut t);
                self.call_tmpl = t;
                f
            }
        };
        let in_range = |x: &u64| *x <= MAX_TRACE_US;
        let (Some(c), Some(e)) = (c.filter(in_range), e.filter(in_range)) else {
            return count_unparsed(
                st,
                n,
                line,
                "database call without numeric c= and e= (up to 12 days)",
            );
        };
        if dep > MAX_DEPTH {
            return count_unparsed(st, n, line, "dep= beyond any real recursion depth");
        }
        st.parsed += 1;
        self.note_tim(tim);
        if let Some(t) = tim {
            self.note_start(t.saturating_sub(e as i64));
        }
        if dep > 0 {
            self.out.recursive_calls += 1;
        }
        let d = dep as usize;
        // Claim the children; count this call until a parent claims it.
        self.open_calls.truncate(d + 1);
        if self.open_calls.len() <= d {
            self.open_calls.resize_with(d + 1, Vec::new);
        }
        let key = name_key(kind.as_bytes());
        let k = match (0..self.call_kinds.len()).find(|&k| {
            self.call_kind_keys[k] == key
                && same_tail(self.call_kinds[k].as_bytes(), kind.as_bytes())
        }) {
            Some(k) => k,
            None => {
                self.call_kind_keys.push(key);
                self.call_kinds.push(kind.to_string());
                self.call_kinds.len() - 1
            }
        };
        let row = &mut self.open_calls[d];
        if row.len() <= k {
            row.resize_with(k + 1, CallFigures::default);
        }
        let t = &mut row[k];
        t.count += 1;
        t.cpu_us += c;
        t.elapsed_us += e;
        // Waits: the latest ones, ended after this call began, are within it.
        match tim.map(|t| t.saturating_sub(e as i64)) {
            Some(s) => {
                self.pending.drop_ended_after(s);
            }
            None => self.pending.clear(),
        }
        if dep == 0 {
            while let Some(p) = self.pending.pop_front() {
                self.resolve(p, true);
            }
        }
    }

    /// Finish: resolve pending waits (no call followed them: between calls) and hand back.
    pub(crate) fn finish(mut self) -> TraceFile {
        while let Some(p) = self.pending.pop_front() {
            self.resolve(p, false);
        }
        for (d, row) in self.open_calls.iter().enumerate() {
            for (k, t) in row.iter().enumerate().filter(|(_, t)| t.count > 0) {
                let o = self
                    .out
                    .calls
                    .entry(self.call_kinds[k].clone())
                    .or_default();
                o.count += t.count;
                o.cpu_us += t.cpu_us;
                o.elapsed_us += t.elapsed_us;
                *self.out.outermost_by_depth.entry(d as u64).or_default() += t.count;
            }
        }
        if let Some((_, hi)) = &mut self.out.tim_range {
            *hi = hi.saturating_add(self.untimed_after as i64);
        }
        if let Some((lo, hi)) = self.out.tim_range {
            let off = self.axis_off;
            self.out
                .binned
                .observe(lo.saturating_add(off).saturating_mul(1000));
            self.out
                .binned
                .observe(hi.saturating_add(off).saturating_mul(1000));
        }
        if let Some(d) = self.out.outermost_by_depth.keys().find(|d| **d > 0) {
            self.out.warnings.push(format!(
                "{}: the trace holds calls at dep={d} whose parent is not in it (tracing began or ended inside a call): their c= and e= are counted as outermost calls",
                self.out.path
            ));
        }
        if !self.untimed.is_empty() {
            self.out.warnings.push(format!(
                "{}: no tim= values, so waits have no time axis ({} waits in one interval)",
                self.out.path,
                self.untimed.len()
            ));
            for (op, ela) in std::mem::take(&mut self.untimed) {
                self.out.binned.record(op, 0, ela.saturating_mul(1000), 0);
            }
        }
        if self.out.first_tim.is_some() && self.out.offset_us.is_none() {
            self.out.warnings.push(format!(
                "{}: no '*** yyyy-mm-dd hh:mm:ss' timestamp line before the first tim=: times are \
                 relative to the trace's own clock",
                self.out.path
            ));
        }
        let base = Path::new(&self.out.path)
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.out.session = match (&self.session_id, &self.pid) {
            (Some(s), _) => format!(
                "{}session {s}",
                self.out
                    .instance
                    .as_ref()
                    .map(|i| format!("{i} "))
                    .unwrap_or_default()
            ),
            (None, Some(p)) => format!("pid {p}"),
            (None, None) => pid_from_name(&base).map_or(base, |p| format!("pid {p}")),
        };
        self.out
    }
}

/// The `c`, `e`, `dep` and `tim` fields of a database call line (after its colon).
#[derive(Debug, Default, PartialEq)]
struct CallFields {
    c: Option<u64>,
    e: Option<u64>,
    dep: u64,
    tim: Option<i64>,
}

/// Read the fields of a database call line: `c=…,e=…,p=…,…,dep=…,…,tim=…`.
#[cfg(test)]
fn call_fields(b: &[u8]) -> CallFields {
    call_fields_noting(b, &mut None)
}

/// [`call_fields`], also noting the line's layout as a [`Template`] in `tmpl` (left `None`
/// when a field's bytes before its value take more than 16, or a field other than the four
/// read has no `=`). A template's parameter is [`Param::Other`] for a field passed over, else
/// `Ela`, `Blocks`, `Block` or `Tim` standing for `c`, `e`, `dep` and `tim`.
fn call_fields_noting(b: &[u8], tmpl: &mut Option<Template>) -> CallFields {
    if let Some(t) = tmpl.as_mut() {
        t.keys.clear();
    }
    let mut f = CallFields::default();
    // `key=value` fields split at commas; a field's key is what precedes its first `=`, so
    // the key is `c` exactly when the (trimmed) field starts with `c=`, and so on: the
    // other fields (`p=`, `cr=`, `cu=`, `mis=`, `r=`, `og=`, `plh=` …) are passed over
    // by their first byte. A value is the trimmed rest of its field; plain digits up to the
    // comma (the rule) are taken as they are accumulated.
    let len = b.len();
    let mut i = 0;
    while i <= len {
        let seg = i;
        while i < len && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let rest = &b[i..];
        let key = match rest.first() {
            Some(b'c') if rest.get(1) == Some(&b'=') => Some((0, 2)),
            Some(b'e') if rest.get(1) == Some(&b'=') => Some((1, 2)),
            Some(b'd') if rest.starts_with(b"dep=") => Some((2, 4)),
            Some(b't') if rest.starts_with(b"tim=") => Some((3, 4)),
            _ => None,
        };
        let Some((k, skip)) = key else {
            if tmpl.is_some() {
                // The field up to its `=` tells it apart from the four read.
                let eq = find_byte(rest, b'=').filter(|&q| find_byte(&rest[..q], b',').is_none());
                let kept = eq.is_some_and(|q| {
                    tmpl.as_mut()
                        .is_some_and(|t| t.push(&b[seg..i + q + 1], Param::Other))
                });
                if !kept && !rest.is_empty() {
                    *tmpl = None;
                }
            }
            i += find_byte(rest, b',').map_or(rest.len(), |c| c + 1);
            if i >= len {
                break;
            }
            continue;
        };
        let vs = i + skip;
        if let Some(t) = tmpl.as_mut() {
            if !t.push(&b[seg..vs], CALL_PARAMS[k]) {
                *tmpl = None;
            }
        }
        let (acc, nd) = leading_digits(&b[vs..]);
        let ve = vs + nd;
        let (u, s) = if (ve == len || b[ve] == b',') && (1..=19).contains(&nd) {
            i = ve + 1;
            (Some(acc), i64::try_from(acc).ok())
        } else {
            let end = vs + find_byte(&b[vs..], b',').unwrap_or(len - vs);
            i = end + 1;
            let v = trim(&b[vs..end]);
            if k == 3 {
                (None, parse_i64(v))
            } else {
                (parse_u64(v), None)
            }
        };
        match k {
            0 => f.c = u,
            1 => f.e = u,
            2 => f.dep = u.unwrap_or(0),
            _ => f.tim = s,
        }
    }
    f
}

/// The template parameters standing for a call's `c`, `e`, `dep` and `tim` (see
/// [`call_fields_noting`]).
const CALL_PARAMS: [Param; 4] = [Param::Ela, Param::Blocks, Param::Block, Param::Tim];

/// [`call_fields`] of a line laid out as `t`: `None` as soon as the line departs from it (the
/// bytes before a value, a value that is not plain digits up to its comma, fields left after
/// the last), so that the caller reads it the general way. Where it returns a value, that
/// value is what [`call_fields`] returns: the same bytes begin the same fields.
#[inline]
fn call_fields_by_template(b: &[u8], t: &Template) -> Option<CallFields> {
    let mut f = CallFields::default();
    let len = b.len();
    let mut i = 0;
    for k in &t.keys {
        if i > len || !k.matches(b, i) {
            return None;
        }
        i += k.len;
        if let Param::Other = k.param {
            i += find_byte(&b[i..], b',').map_or(len - i, |c| c + 1);
            continue;
        }
        let (acc, nd) = leading_digits(&b[i..]);
        let ve = i + nd;
        if !(ve == len || b[ve] == b',') || !(1..=19).contains(&nd) {
            return None;
        }
        i = ve + 1;
        match k.param {
            Param::Ela => f.c = Some(acc),
            Param::Blocks => f.e = Some(acc),
            Param::Block => f.dep = acc,
            _ => f.tim = Some(i64::try_from(acc).ok()?),
        }
    }
    (i >= len).then_some(f)
}

/// Parse the parameters after `nam='…'`: `ela= N name=value … tim=T`. Parameter names may
/// contain spaces (`file number=`, `first dba=`); values are the next space-free token.
///
/// One pass: a name of up to seven bytes (all the common ones) is found and told apart with
/// one eight-byte load (the bytes before the first `=`, as a number, with the name's length in
/// the top byte); longer names are scanned for and compared as bytes. The value's digits are
/// accumulated while its end is found, so a plain decimal value (all of them but `obj#=-1` in
/// practice) is never scanned twice.
#[cfg(test)]
fn parse_params(p: &[u8]) -> WaitParams {
    parse_params_noting(p, &mut None)
}

/// [`parse_params`], also noting the line's layout as a [`Template`] in `tmpl` (left `None`
/// when a name and the spaces around it take more than 16 bytes).
fn parse_params_noting(p: &[u8], tmpl: &mut Option<Template>) -> WaitParams {
    let mut w = WaitParams::default();
    let n = p.len();
    let mut i = 0;
    // Where the bytes before the next value (spaces, name, `=`, spaces) begin.
    let mut seg = 0;
    if let Some(t) = tmpl.as_mut() {
        t.keys.clear();
    }
    let mut noting = tmpl.as_mut();
    loop {
        while i < n && p[i] == b' ' {
            i += 1;
        }
        let name_start = i;
        // `key`: the name as a short key (see [`short_key`]), when it is one.
        let (key, eq) = match p.get(i..i + 8) {
            Some(chunk) => {
                let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                match first_byte_eq(x, b'=') {
                    Some(k) => (name_key_at(p, i, i + k), i + k),
                    None => match find_byte(&p[i + 8..], b'=') {
                        Some(k) => (None, i + 8 + k),
                        None => break,
                    },
                }
            }
            None => match find_byte(&p[i..], b'=') {
                Some(k) => (None, i + k),
                None => break,
            },
        };
        let param = param_of(key, &p[name_start..eq]);
        i = eq + 1;
        while i < n && p[i] == b' ' {
            i += 1;
        }
        if let Some(t) = noting.as_deref_mut() {
            if !t.push(&p[seg..i], param) {
                noting = None;
                *tmpl = None;
            }
        }
        i = read_value(p, i, param, &mut w);
        seg = i;
    }
    w
}

/// Read the value of `param` that begins at `vs` (after the spaces following its `=`) into
/// `w`; returns where it ends (the next space, or the end of `p`). A value that is not kept
/// is only passed over. Digits first (the common case, eight at a time), then whatever else
/// the value holds up to the next space.
#[inline(always)]
fn read_value(p: &[u8], vs: usize, param: Param, w: &mut WaitParams) -> usize {
    let n = p.len();
    if let Param::Other = param {
        return vs + find_byte(&p[vs..], b' ').unwrap_or(n - vs);
    }
    let (acc, nd) = leading_digits(&p[vs..]);
    let mut i = vs + nd;
    let mut digits = true;
    if i < n && p[i] != b' ' {
        digits = false;
        i += find_byte(&p[i..], b' ').unwrap_or(n - i);
    }
    let val = &p[vs..i];
    // Up to 19 digits cannot overflow u64: the accumulated value is the number.
    let fast = (digits && !val.is_empty() && val.len() <= 19).then_some(acc);
    keep_param(w, param, val, fast);
    i
}

/// The layout of a WAIT line's parameters: for each, the bytes before its value (spaces, its
/// name, `=`, spaces: at most 16) and which parameter it is. Lines of one event nearly always
/// share it, so [`params_by_template`] checks those bytes with two word comparisons instead of
/// searching for `=` and reading the name.
#[derive(Default, Debug)]
struct Template {
    keys: Vec<TemplateKey>,
}

#[derive(Clone, Copy, Debug)]
struct TemplateKey {
    /// The bytes, little-endian, zero past `len`, and the mask of the bytes that count.
    words: [u64; 2],
    masks: [u64; 2],
    len: usize,
    param: Param,
}

impl TemplateKey {
    /// Whether `p` holds this key's bytes at `i`.
    #[inline]
    fn matches(&self, p: &[u8], i: usize) -> bool {
        word_at(p, i) & self.masks[0] == self.words[0]
            && (self.len <= 8 || word_at(p, i + 8) & self.masks[1] == self.words[1])
    }
}

impl Template {
    /// Add the parameter whose value follows `before`; false when `before` is empty or longer
    /// than 16 bytes.
    fn push(&mut self, before: &[u8], param: Param) -> bool {
        if before.is_empty() || before.len() > 16 {
            return false;
        }
        let len = before.len();
        let masks = [low_bytes(len.min(8)), low_bytes(len.saturating_sub(8))];
        self.keys.push(TemplateKey {
            words: [word_at(before, 0) & masks[0], word_at(before, 8) & masks[1]],
            masks,
            len,
            param,
        });
        true
    }
}

/// Eight bytes of `p` from `i` (little-endian), zero past its end.
#[inline]
fn word_at(p: &[u8], i: usize) -> u64 {
    match p.get(i..i + 8) {
        Some(c) => u64::from_le_bytes(c.try_into().expect("8 bytes")),
        // The last eight bytes, shifted so that those from `i` come first.
        None if p.len() >= 8 && i < p.len() => {
            u64::from_le_bytes(p[p.len() - 8..].try_into().expect("8 bytes"))
                >> (8 * (i + 8 - p.len()))
        }
        // Shorter than eight bytes in all: byte by byte (a copy of a length not known at
        // compile time is a call of memcpy).
        None => p
            .get(i..)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .fold(0, |w, (j, &c)| w | (c as u64) << (8 * j)),
    }
}

/// The mask of the low `n` (0 to 8) bytes of a word.
#[inline]
fn low_bytes(n: usize) -> u64 {
    if n >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * n)) - 1
    }
}

/// [`parse_params`] of a line laid out as `t`: `None` as soon as the line departs from it (a
/// name, a space, a value starting with a space, anything but spaces after the last value),
/// so that the caller parses it the general way. Where it returns a value, that value is what
/// [`parse_params`] returns: the same bytes delimit the same names and values.
#[inline]
fn params_by_template(p: &[u8], t: &Template) -> Option<WaitParams> {
    let mut w = WaitParams::default();
    let n = p.len();
    let mut i = 0;
    for k in &t.keys {
        if !k.matches(p, i) {
            return None;
        }
        i += k.len;
        // The general reading skips every space before a value; the template holds as many
        // as its own line had.
        if i >= n || p[i] == b' ' {
            return None;
        }
        i = read_value(p, i, k.param, &mut w);
    }
    p[i..].iter().all(|&c| c == b' ').then_some(w)
}

/// The name `p[start..eq]` (shorter than eight bytes) as a [`short_key`], unless it ends in a
/// space (then it is trimmed and compared as bytes by [`param_of`]).
#[inline]
fn name_key_at(p: &[u8], start: usize, eq: usize) -> Option<u64> {
    let k = eq - start;
    if k > 0 && p[eq - 1] == b' ' {
        return None;
    }
    Some((word_at(p, start) & low_bytes(k)) | (k as u64) << 56)
}

/// Which parameter the name before a `=` is: by its short key when it has one, else by its
/// bytes with trailing spaces trimmed.
#[inline]
fn param_of(key: Option<u64>, name: &[u8]) -> Param {
    match key {
        Some(k) => match k {
            K_ELA => Param::Ela,
            K_TIM => Param::Tim,
            K_OBJ => Param::Obj,
            K_FILE => Param::File,
            K_BLOCK => Param::Block,
            K_BLOCKS => Param::Blocks,
            K_P1 => Param::P1,
            K_P2 => Param::P2,
            K_P3 => Param::P3,
            _ => Param::Other,
        },
        None => match trim_end_spaces(name) {
            b"ela" => Param::Ela,
            b"tim" => Param::Tim,
            b"obj#" => Param::Obj,
            b"file#" | b"file number" => Param::File,
            b"block#" | b"first dba" => Param::Block,
            b"blocks" | b"block cnt" => Param::Blocks,
            b"p1" => Param::P1,
            b"p2" => Param::P2,
            b"p3" => Param::P3,
            _ => Param::Other,
        },
    }
}

/// `name` without the spaces it ends in.
fn trim_end_spaces(name: &[u8]) -> &[u8] {
    let end = name.iter().rposition(|&c| c != b' ').map_or(0, |e| e + 1);
    &name[..end]
}

/// Keep the value `val` of `param`; `fast` is its number when it is plain digits (up to 19).
#[inline(always)]
fn keep_param(w: &mut WaitParams, param: Param, val: &[u8], fast: Option<u64>) {
    let u = || fast.or_else(|| parse_u64(val));
    let s = || match fast {
        Some(x) => i64::try_from(x).ok(),
        None => parse_i64(val),
    };
    match param {
        Param::Ela => match u() {
            Some(x) if x <= MAX_TRACE_US => w.ela = Some(x),
            Some(_) => w.bad = Some("ela= is beyond 12 days (corrupt line?)"),
            None => w.bad = Some("ela= is not a number"),
        },
        Param::Tim => match s() {
            Some(x) => w.tim = Some(x),
            None => w.bad = Some("tim= is not a number"),
        },
        Param::Obj => w.obj = s(),
        Param::File => w.file = s(),
        Param::Block => w.block = u(),
        // Bounded (no read spans 2^32 blocks) so sums of them cannot overflow.
        Param::Blocks => w.blocks = u().filter(|&b| b <= 1 << 32),
        Param::P1 => w.p1 = s(),
        Param::P2 => w.p2 = u(),
        Param::P3 => w.p3 = u(),
        Param::Other => {}
    }
}

/// The number written by the first `k` (1 to 8) bytes of `a` (little-endian), each already a
/// digit's value (0 to 9): the `k` digits, preceded by 8 − k zeros, as the 8-digit number they
/// make, with three multiplications.
#[inline]
fn swar_digits(a: u64, k: usize) -> u64 {
    let d = if k == 8 { a } else { a << (8 * (8 - k)) };
    let d = d.wrapping_mul(10).wrapping_add(d >> 8);
    ((d & 0x0000_00ff_0000_00ff)
        .wrapping_mul(100 + (1_000_000 << 32))
        .wrapping_add(((d >> 16) & 0x0000_00ff_0000_00ff).wrapping_mul(1 + (10_000 << 32))))
        >> 32
}

/// A name's length and first eight bytes (zero-padded): names that differ in it differ.
#[inline]
fn name_key(name: &[u8]) -> (usize, u64) {
    (name.len(), word_at(name, 0))
}

/// Whether two names of the same [`name_key`] (so of one length) are equal: their bytes after
/// the first eight, compared eight at a time (names are short; this beats a call of `memcmp`).
#[inline]
fn same_tail(a: &[u8], b: &[u8]) -> bool {
    let (Some(a), Some(b)) = (a.get(8..), b.get(8..)) else {
        return true;
    };
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
    let mut x = a.chunks_exact(8);
    let mut y = b.chunks_exact(8);
    x.by_ref().zip(y.by_ref()).all(|(p, q)| word(p) == word(q))
        && x.remainder().iter().zip(y.remainder()).all(|(p, q)| p == q)
}

/// The WAIT parameters [`parse_params`] keeps.
#[derive(Clone, Copy, Debug)]
enum Param {
    Ela,
    Tim,
    Obj,
    File,
    Block,
    Blocks,
    P1,
    P2,
    P3,
    Other,
}

/// A name of up to seven bytes as one number: its bytes (little-endian) and its length in the
/// top byte, so that names of different lengths never compare equal.
const fn short_key(name: &[u8]) -> u64 {
    let mut k = (name.len() as u64) << 56;
    let mut i = 0;
    while i < name.len() {
        k |= (name[i] as u64) << (8 * i);
        i += 1;
    }
    k
}

const K_ELA: u64 = short_key(b"ela");
const K_TIM: u64 = short_key(b"tim");
const K_OBJ: u64 = short_key(b"obj#");
const K_FILE: u64 = short_key(b"file#");
const K_BLOCK: u64 = short_key(b"block#");
const K_BLOCKS: u64 = short_key(b"blocks");
const K_P1: u64 = short_key(b"p1");
const K_P2: u64 = short_key(b"p2");
const K_P3: u64 = short_key(b"p3");

const ONES: u64 = 0x0101_0101_0101_0101;

/// Index of the first byte of the eight in `x` (little-endian) equal to `b`, if any. Exact:
/// no carry crosses a byte.
#[inline]
fn first_byte_eq(x: u64, b: u8) -> Option<usize> {
    let t = x ^ (b as u64 * ONES);
    let low = 0x7f * ONES;
    let zero = !(((t & low) + low) | t) & (0x80 * ONES);
    (zero != 0).then(|| (zero.trailing_zeros() / 8) as usize)
}

/// Index of the first `b` in `h`: eight bytes at a time (the fields of a trace line are short,
/// so this beats setting up a vector search).
#[inline]
fn find_byte(h: &[u8], b: u8) -> Option<usize> {
    let mut i = 0;
    while let Some(chunk) = h.get(i..i + 8) {
        if let Some(k) = first_byte_eq(u64::from_le_bytes(chunk.try_into().expect("8 bytes")), b) {
            return Some(i + k);
        }
        i += 8;
    }
    h[i..].iter().position(|&c| c == b).map(|k| i + k)
}

/// The decimal digits that `p` begins with: their value (wrapping past 2^64, so exact for up
/// to 19 digits) and how many there are. Eight bytes at a time ([`word_at`]: past the end of
/// `p` come zeros, which are not digits), SWAR: the first non-digit byte is found and the
/// digits before it converted with three multiplications.
#[inline(always)]
fn leading_digits(p: &[u8]) -> (u64, usize) {
    let mut acc: u64 = 0;
    let mut i = 0;
    while i < p.len() {
        // Per byte: high nibble of b ^ '0' set, or low nibble above 9, marks a non-digit. A
        // carry out of a byte (only from a non-digit byte) can only mark bytes after it.
        let a = word_at(p, i) ^ (0x30 * ONES);
        let t = (a & (0xf0 * ONES)) | (a.wrapping_add(0x06 * ONES) & (0xf0 * ONES));
        let non_digit = ((t >> 1) + 0x78 * ONES) & (0x80 * ONES);
        let k = (non_digit.trailing_zeros() / 8) as usize;
        if k == 0 {
            break;
        }
        acc = acc.wrapping_mul(POW10[k]).wrapping_add(swar_digits(a, k));
        i += k;
        if k < 8 {
            break;
        }
    }
    (acc, i)
}

const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// `7F1C70A4D6D8 C3020C03 …  [....]`: a line of a memory dump.
fn is_hex_dump_line(line: &[u8]) -> bool {
    let sp = line.iter().position(|&c| c == b' ').unwrap_or(line.len());
    sp >= 8 && line[..sp].iter().all(|c| c.is_ascii_hexdigit())
}

fn is_io_event_name(name: &[u8]) -> bool {
    name.starts_with(b"db file")
        || name.starts_with(b"direct path")
        || name.starts_with(b"control file")
}

/// The value after `key` up to the next ',' or space.
fn field<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let i = memchr::memmem::find(line, key)?;
    let v = &line[i + key.len()..];
    let end = v
        .iter()
        .position(|&c| c == b',' || c == b' ')
        .unwrap_or(v.len());
    Some(&v[..end])
}

fn insert_slowest(list: &mut Vec<SlowWait>, w: SlowWait, top: usize) {
    let pos = list
        .iter()
        .position(|x| x.ela_us < w.ela_us)
        .unwrap_or(list.len());
    if pos < top {
        list.insert(pos, w);
        list.truncate(top);
    }
}

fn pid_from_name(base: &str) -> Option<String> {
    // orcl_ora_12345.trc, orcl_ora_12345_tag.trc(.gz), orcl_j001_4321.trc
    let stem = base.split('.').next()?;
    let parts: Vec<&str> = stem.split('_').collect();
    parts
        .iter()
        .skip(1)
        .find(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        .map(|p| p.to_string())
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

// ---------------------------------------------------------------------------------------------
// Building the results document

/// The Method R profile of one file (or the sum of several).
///
/// R is the traced span, from the first to the last `tim` (Σ of the files' spans for several
/// files); without any `tim` (very old traces) it falls back to Σ e of the outermost calls plus
/// the waits between calls. R = CPU + waits + unaccounted-for, where CPU is Σ c of the
/// outermost calls (a parent's c includes its children's), waits is Σ ela of every wait, and
/// unaccounted-for is what neither covers: time between calls and waits, time inside calls
/// that Oracle did not instrument, measurement granularity. A negative unaccounted-for time
/// reveals double-counted time (e.g. a first line whose wait began before the first `tim`).
struct ProfileIn<'a> {
    events: &'a [EventTotals],
    calls: &'a BTreeMap<String, CallFigures>,
    outermost_by_depth: &'a BTreeMap<u64, u64>,
    recursive: u64,
    errors: &'a BTreeMap<String, u64>,
    /// Σ (last tim − first tim) in µs, when any tim was seen.
    span_us: Option<i64>,
}

fn profile(p: ProfileIn) -> Profile {
    let ProfileIn {
        events,
        calls,
        outermost_by_depth,
        recursive,
        errors,
        span_us,
    } = p;
    let cpu: u64 = calls.values().map(|c| c.cpu_us).sum();
    let elapsed: u64 = calls.values().map(|c| c.elapsed_us).sum();
    let between: u64 = events.iter().map(|e| e.between_us).sum();
    let outside: u64 = events.iter().map(|e| e.outside_us).sum();
    let waits: u64 = events.iter().map(|e| e.ela_us).sum();
    let r: i64 = span_us.unwrap_or((elapsed + between) as i64);
    let unaccounted = r - cpu as i64 - waits as i64;
    let share = |x: f64| if r > 0 { x / r as f64 } else { 0.0 };
    let ncalls: u64 = calls.values().map(|c| c.count).sum();
    let mut rows = vec![ProfileRow {
        component: "CPU service (outermost calls)".into(),
        seconds: cpu as f64 / 1e6,
        share: share(cpu as f64),
        count: Some(ncalls),
        mean_us: Some(if ncalls == 0 {
            0.0
        } else {
            cpu as f64 / ncalls as f64
        }),
        ..Default::default()
    }];
    for e in events {
        rows.push(ProfileRow {
            component: e.name.clone(),
            seconds: e.ela_us as f64 / 1e6,
            share: share(e.ela_us as f64),
            count: Some(e.count),
            mean_us: Some(e.ela_us as f64 / e.count.max(1) as f64),
            max_us: Some(e.max_us as f64),
            between_calls_seconds: Some(e.between_us as f64 / 1e6),
            between_calls_count: Some(e.between_count),
            outside_calls_seconds: Some(e.outside_us as f64 / 1e6),
            outside_calls_count: Some(e.outside_count),
        });
    }
    rows.push(ProfileRow {
        component: "unaccounted-for".into(),
        seconds: unaccounted as f64 / 1e6,
        share: share(unaccounted as f64),
        ..Default::default()
    });
    rows.sort_by(|a, b| b.seconds.abs().total_cmp(&a.seconds.abs()));
    Profile {
        response_time_s: r as f64 / 1e6,
        response_time_basis: if span_us.is_some() {
            "span of tim"
        } else {
            "calls and between-call waits"
        }
        .into(),
        outermost_elapsed_s: elapsed as f64 / 1e6,
        between_calls_wait_s: between as f64 / 1e6,
        outside_calls_wait_s: outside as f64 / 1e6,
        cpu_s: cpu as f64 / 1e6,
        wait_s: waits as f64 / 1e6,
        unaccounted_s: unaccounted as f64 / 1e6,
        calls: calls.clone(),
        outermost_calls_by_depth: outermost_by_depth
            .iter()
            .map(|(d, n)| (d.to_string(), *n))
            .collect(),
        recursive_calls: recursive,
        errors: errors.clone(),
        rows,
    }
}

fn merge_events(into: &mut Vec<EventTotals>, from: &[EventTotals]) {
    for e in from {
        match into.iter_mut().find(|x| x.name == e.name) {
            Some(x) => {
                x.count += e.count;
                x.ela_us += e.ela_us;
                x.max_us = x.max_us.max(e.max_us);
                x.between_us += e.between_us;
                x.between_count += e.between_count;
                x.outside_us += e.outside_us;
                x.outside_count += e.outside_count;
                x.io |= e.io;
            }
            None => into.push(e.clone()),
        }
    }
}

/// Read the trace files of an `iolens trace` invocation into one results document.
pub fn read_traces(args: &TraceOptions, command_line: Vec<String>) -> Result<Results> {
    let opts = ParseOptions {
        interval_ns: (args.interval.as_nanos() as u64).max(1_000),
        top: args.top,
    };
    let mut files = Vec::new();
    for p in &args.files {
        let mut r = LineReader::open(p)?;
        let f = parse_trace(&mut r, &opts)?;
        if f.stats.parsed == 0 {
            // Nothing read is an error (exit non-zero even with -q, and say why).
            anyhow::bail!(
                "{}: no Oracle 10046 trace lines (WAIT, PARSE, EXEC, FETCH …), not an extended \
                 SQL trace (bcc, bpftrace, fio and HdrHistogram files are read by `iolens ingest \
                 --format …`)",
                super::nothing_read(&p.display().to_string(), "Oracle 10046 trace", &f.stats)
            );
        }
        files.push(f);
    }
    let mut results = build_results(files, &opts, &args.events)?;
    results.command_line = command_line;
    Ok(results)
}

/// Group parsed files into sessions and build the results document. `events` (when not empty)
/// limits which events get latency histograms.
pub fn build_results(
    mut files: Vec<TraceFile>,
    opts: &ParseOptions,
    events: &[String],
) -> Result<Results> {
    let mut results = Results::new(Kind::Trace, Vec::new());
    // Files continuing another given file join its session.
    let bases: Vec<String> = files.iter().map(|f| base_name(&f.path)).collect();
    for i in 0..files.len() {
        if let Some(from) = files[i].continued_from.clone() {
            let b = base_name(&from);
            if let Some(j) = bases.iter().position(|x| *x == b) {
                if j != i {
                    files[i].session = files[j].session.clone();
                }
            }
        }
    }
    // Order files by their first tim on the wall clock when known.
    files.sort_by_key(|f| {
        (
            f.session.clone(),
            f.first_tim
                .map(|t| t.saturating_add(f.offset_us.unwrap_or(0))),
        )
    });
    let mut file_profiles = Vec::new();
    let mut all_events: Vec<EventTotals> = Vec::new();
    let mut all_calls: BTreeMap<String, CallFigures> = BTreeMap::new();
    let mut all_errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut all_recursive = 0;
    let mut all_depths: BTreeMap<u64, u64> = BTreeMap::new();
    let mut all_span: Option<i64> = None;
    let mut slowest: Vec<SlowWait> = Vec::new();
    let mut io_files: HashMap<(String, i64), IoAgg> = HashMap::new();
    let mut io_objs: HashMap<(String, i64), IoAgg> = HashMap::new();
    let mut io_ranges: HashMap<(String, i64, u64), IoAgg> = HashMap::new();
    let mut sources = Vec::new();
    let keep = |name: &str| events.is_empty() || events.iter().any(|e| e == name);

    // Sessions in order of first appearance.
    let mut sessions: Vec<(String, Vec<TraceFile>)> = Vec::new();
    for f in files {
        file_profiles.push(FileProfile {
            path: f.path.clone(),
            session: f.session.clone(),
            profile: profile(ProfileIn {
                events: &f.events,
                calls: &f.calls,
                outermost_by_depth: &f.outermost_by_depth,
                recursive: f.recursive_calls,
                errors: &f.errors,
                span_us: f.tim_range.map(|(lo, hi)| hi.saturating_sub(lo)),
            }),
        });
        if let Some((lo, hi)) = f.tim_range {
            all_span = Some(all_span.unwrap_or(0).saturating_add(hi.saturating_sub(lo)));
        }
        for (d, n) in &f.outermost_by_depth {
            *all_depths.entry(*d).or_default() += n;
        }
        merge_events(&mut all_events, &f.events);
        for (k, c) in &f.calls {
            let t = all_calls.entry(k.clone()).or_default();
            t.count += c.count;
            t.cpu_us += c.cpu_us;
            t.elapsed_us += c.elapsed_us;
        }
        for (k, n) in &f.errors {
            *all_errors.entry(k.clone()).or_default() += n;
        }
        all_recursive += f.recursive_calls;
        for w in &f.slowest {
            if keep(&w.event) {
                insert_slowest(&mut slowest, w.clone(), opts.top);
            }
        }
        let ev_name = |i: u32| f.events[i as usize].name.clone();
        for ((e, k), a) in &f.io_files {
            io_files.entry((ev_name(*e), *k)).or_default().merge(a);
        }
        for ((e, k), a) in &f.io_objs {
            io_objs.entry((ev_name(*e), *k)).or_default().merge(a);
        }
        for ((e, k, r), a) in &f.io_ranges {
            io_ranges.entry((ev_name(*e), *k, *r)).or_default().merge(a);
        }
        sources.push(source_file(&f.stats, &f.path, f.gzip));
        if f.stats.unparsed > 0 {
            results.warnings.push(format!(
                "{}: {} line(s) could not be parsed (first at line {})",
                f.path,
                f.stats.unparsed,
                f.stats.unparsed_first.first().map(|u| u.line).unwrap_or(0)
            ));
        }
        match sessions.iter_mut().find(|(s, _)| *s == f.session) {
            Some((_, v)) => v.push(f),
            None => sessions.push((f.session.clone(), vec![f])),
        }
    }

    for (session, group) in sessions {
        let mut paths = Vec::new();
        let mut warnings = Vec::new();
        let mut it = group.into_iter();
        let first = it.next().expect("a session has at least one file");
        paths.push(first.path.clone());
        warnings.extend(first.warnings);
        let offset = first.offset_us;
        let mut binned = first.binned;
        for f in it {
            paths.push(f.path.clone());
            warnings.extend(f.warnings.iter().cloned());
            let mut b = f.binned;
            // Anchored files are already on the wall-clock axis.
            let shift = match (offset, f.offset_us) {
                (Some(_), Some(_)) => 0,
                _ => {
                    warnings.push(format!(
                        "{}: not anchored to wall-clock time; placed after the previous file",
                        f.path
                    ));
                    match (binned.key_range(), b.key_range()) {
                        (Some((_, hi)), Some((lo, _))) => hi + 1 - lo,
                        _ => 0,
                    }
                }
            };
            b.shift(shift);
            binned.merge(b)?;
        }
        let fin = binned.finish(BucketConvention::Exact, &keep);
        warnings.extend(fin.warning);
        let started = match offset {
            Some(_) => rfc3339_ns(fin.start_ns),
            None => String::new(),
        };
        let mut run = RunResult {
            name: format!("trace {session}"),
            phase: "trace".into(),
            spec: Spec::of(
                json!({"source": "oracle-10046", "files": paths, "session": session,
                         "anchored": offset.is_some()}),
            )?,
            started,
            duration_s: fin.duration_s,
            interval_s: fin.interval_s,
            ops: fin.ops,
            warnings,
            ..Default::default()
        };
        if run.ops.is_empty() {
            run.warnings
                .push("no wait events (after --event filtering)".into());
        }
        if run.duration_s <= 0.0 {
            // One timestamp, or none: the session covers no span, so it has counts, not rates.
            run.duration_s = 0.0;
            run.duration_unknown = true;
            run.warnings.push(
                "the session's trace lines cover no time span (one timestamp or none): counts \
                 only, no rates"
                    .into(),
            );
        }
        results.runs.push(run);
    }
    // Fill counters from the per-file profiles (covers every file of each session).
    for run in &mut results.runs {
        let paths: Vec<String> = run
            .spec
            .as_ref()
            .map(|s| s.files.clone())
            .unwrap_or_default();
        let mut waits = 0.0;
        let mut calls = 0.0;
        for p in file_profiles.iter().filter(|p| paths.contains(&p.path)) {
            calls += p
                .profile
                .calls
                .values()
                .map(|c| c.count as f64)
                .sum::<f64>();
            waits += p
                .profile
                .rows
                .iter()
                .filter(|r| r.between_calls_count.is_some())
                .filter_map(|r| r.count.map(|c| c as f64))
                .sum::<f64>();
        }
        run.counters.insert("waits".into(), waits);
        run.counters.insert("outermost_calls".into(), calls);
        let unparsed: f64 = sources
            .iter()
            .filter(|s| paths.contains(&s.path))
            .map(|s| s.unparsed as f64)
            .sum();
        run.counters.insert("unparsed_lines".into(), unparsed);
    }
    results.trace_profile = Some(TraceProfile {
        total: profile(ProfileIn {
            events: &all_events,
            calls: &all_calls,
            outermost_by_depth: &all_depths,
            recursive: all_recursive,
            errors: &all_errors,
            span_us: all_span,
        }),
        files: file_profiles,
    });
    results.trace_io = Some(trace_io(&all_events, io_files, io_objs, io_ranges, &keep));
    results.trace_slowest = slowest;
    results.source = Some(SourceInfo {
        format: "oracle-10046".into(),
        files: sources,
    });
    Ok(results)
}

fn base_name(p: &str) -> String {
    Path::new(p)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.to_string())
}

fn trace_io(
    events: &[EventTotals],
    files: HashMap<(String, i64), IoAgg>,
    objs: HashMap<(String, i64), IoAgg>,
    ranges: HashMap<(String, i64, u64), IoAgg>,
    keep: &dyn Fn(&str) -> bool,
) -> TraceIo {
    const TOP: usize = 50;
    let figures = |a: &IoAgg| IoFigures {
        count: a.count,
        seconds: a.ela_us as f64 / 1e6,
        mean_us: a.ela_us as f64 / a.count.max(1) as f64,
        max_us: a.max_us,
        blocks: a.blocks,
    };
    let mut out = Vec::new();
    for e in events.iter().filter(|e| e.io && keep(&e.name)) {
        let mut fl: Vec<(&i64, &IoAgg)> = files
            .iter()
            .filter(|((n, _), _)| *n == e.name)
            .map(|((_, k), a)| (k, a))
            .collect();
        fl.sort_by(|a, b| b.1.ela_us.cmp(&a.1.ela_us).then(a.0.cmp(b.0)));
        let fl = fl
            .iter()
            .map(|(k, a)| {
                let blocks = a.min_block != u64::MAX;
                IoByFile {
                    file: **k,
                    min_block: blocks.then_some(a.min_block),
                    max_block: blocks.then_some(a.max_block),
                    io: figures(a),
                }
            })
            .collect();
        let mut ol: Vec<(&i64, &IoAgg)> = objs
            .iter()
            .filter(|((n, _), _)| *n == e.name)
            .map(|((_, k), a)| (k, a))
            .collect();
        let objects_total = ol.len() as u64;
        ol.sort_by(|a, b| b.1.ela_us.cmp(&a.1.ela_us).then(a.0.cmp(b.0)));
        let ol = ol
            .iter()
            .take(TOP)
            .map(|(k, a)| IoByObject {
                obj: **k,
                io: figures(a),
            })
            .collect();
        let mut rl: Vec<(&(String, i64, u64), &IoAgg)> = ranges
            .iter()
            .filter(|((n, _, _), _)| *n == e.name)
            .collect();
        let block_ranges_total = rl.len() as u64;
        rl.sort_by(|a, b| b.1.ela_us.cmp(&a.1.ela_us).then(a.0.cmp(b.0)));
        let rl = rl
            .iter()
            .take(TOP)
            .map(|((_, f, r), a)| IoByRange {
                file: *f,
                first_block: r * BLOCK_RANGE,
                last_block: (r + 1).saturating_mul(BLOCK_RANGE) - 1,
                io: figures(a),
            })
            .collect();
        out.push(TraceIoEvent {
            event: e.name.clone(),
            files: fl,
            objects: ol,
            objects_total,
            block_ranges: rl,
            block_ranges_total,
        });
    }
    TraceIo {
        block_range_blocks: BLOCK_RANGE,
        top: TOP as u64,
        events: out,
    }
}

// ---------------------------------------------------------------------------------------------
// Synthetic traces (benchmark and tests)

/// Write a realistic 12c-style trace of about `size` bytes: a header, a cursor, and repeated
/// FETCH calls each preceded by single-block reads and SQL*Net waits. Returns the wait count.
pub fn write_synthetic_trace(w: &mut dyn Write, size: u64, seed: u64) -> std::io::Result<u64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut written = 0u64;
    let mut waits = 0u64;
    let mut tim: u64 = 2_707_602_560_910;
    let head = "Trace file /u01/app/oracle/diag/rdbms/orcl/orcl/trace/orcl_ora_12345.trc\n\
Oracle Database 19c Enterprise Edition Release 19.0.0.0.0 - Production\n\
Version 19.3.0.0.0\n\
Build label:    RDBMS_19.3.0.0.0DBRU_LINUX.X64_190417\n\
ORACLE_HOME:    /u01/app/oracle/product/19.0.0/dbhome_1\n\
System name:\tLinux\n\
Node name:\tdbhost\n\
Release:\t4.14.35-1902.el7uek.x86_64\n\
Version:\t#2 SMP Fri Aug 9 09:35:18 PDT 2019\n\
Machine:\tx86_64\n\
Instance name: orcl\n\
Redo thread mounted by this instance: 1\n\
Oracle process number: 38\n\
Unix process pid: 12345, image: oracle@dbhost\n\n\n\
*** 2024-03-01T10:00:00.000000+00:00\n\
*** SESSION ID:(152.56419) 2024-03-01T10:00:00.000012+00:00\n\
*** CLIENT ID:() 2024-03-01T10:00:00.000015+00:00\n\
*** SERVICE NAME:(SYS$USERS) 2024-03-01T10:00:00.000016+00:00\n\
*** MODULE NAME:(SQL*Plus) 2024-03-01T10:00:00.000018+00:00\n\n\
=====================\n\
PARSING IN CURSOR #140234567 len=37 dep=0 uid=0 oct=3 lid=0 tim=2707602560910 hv=1 ad='7f' sqlid='abc'\n\
select * from big_table where id > :1\n\
END OF STMT\n\
PARSE #140234567:c=120,e=150,p=0,cr=0,cu=0,mis=1,r=0,dep=0,og=1,plh=0,tim=2707602560910\n\
EXEC #140234567:c=50,e=60,p=0,cr=0,cu=0,mis=0,r=0,dep=0,og=1,plh=1,tim=2707602560980\n";
    w.write_all(head.as_bytes())?;
    written += head.len() as u64;
    let mut line = String::with_capacity(256);
    use std::fmt::Write as _;
    while written < size {
        // Between-call wait, then a FETCH with a few reads.
        let idle = rng.gen_range(50..400u64);
        tim += idle;
        line.clear();
        let _ = writeln!(
            line,
            "WAIT #140234567: nam='SQL*Net message from client' ela= {idle} driver id=1650815232 #bytes=1 p3=0 obj#=-1 tim={tim}"
        );
        let start = tim;
        let mut in_call = 0;
        for _ in 0..rng.gen_range(1..8) {
            let ela: u64 = if rng.gen_bool(0.9) {
                rng.gen_range(80..400)
            } else {
                rng.gen_range(2_000..20_000)
            };
            tim += ela + 5;
            in_call += ela;
            let _ = writeln!(
                line,
                "WAIT #140234567: nam='db file sequential read' ela= {ela} file#={} block#={} blocks=1 obj#={} tim={tim}",
                rng.gen_range(5..9),
                rng.gen_range(128..4_000_000u64),
                73_000 + rng.gen_range(0..40),
            );
            waits += 1;
        }
        tim += 30;
        let _ = writeln!(
            line,
            "WAIT #140234567: nam='SQL*Net message to client' ela= 2 driver id=1650815232 #bytes=1 p3=0 obj#=-1 tim={tim}"
        );
        let e = tim - start - 1;
        let _ = writeln!(
            line,
            "FETCH #140234567:c={},e={e},p=3,cr=5,cu=0,mis=0,r=15,dep=0,og=1,plh=1,tim={tim}",
            e.saturating_sub(in_call + 2)
        );
        waits += 2;
        w.write_all(line.as_bytes())?;
        written += line.len() as u64;
    }
    Ok(waits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> TraceFile {
        let mut r =
            LineReader::from_reader(Box::new(std::io::Cursor::new(s.as_bytes().to_vec())), "t")
                .unwrap();
        parse_trace(&mut r, &ParseOptions::default()).unwrap()
    }

    #[test]
    fn params_with_spaces_and_both_ela_forms() {
        let p = parse_params(b" ela= 23 file number=5 first dba=1234 block cnt=16 obj#=-1 tim=99");
        assert_eq!(
            (p.ela, p.file, p.block, p.blocks, p.obj, p.tim),
            (Some(23), Some(5), Some(1234), Some(16), Some(-1), Some(99))
        );
        let p = parse_params(b" ela=7 file#=6 block#=4 blocks=1 obj#=4294967295 tim=5");
        assert_eq!((p.ela, p.obj), (Some(7), Some(4294967295)));
        assert!(parse_params(b" ela= x tim=5").bad.is_some());
    }

    /// The tests' fixed-seed random numbers (xorshift64).
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    /// Lines laid out as one of `layouts` (for each field, the bytes before its value), each
    /// departing from it now and then: one field in `odd_name` gets a name of `names` instead,
    /// one value in `odd_value` is one of `values` (else plain digits), and each `(k, tail)`
    /// is appended to one line in `k`.
    struct LayoutLines<'a> {
        seed: u64,
        layouts: &'a [&'a [&'a [u8]]],
        names: &'a [&'a [u8]],
        values: &'a [&'a [u8]],
        odd_name: u64,
        odd_value: u64,
        tails: &'a [(u64, &'a [u8])],
    }

    impl LayoutLines<'_> {
        fn line(&self, layout: &[&[u8]], next: &mut impl FnMut() -> u64) -> Vec<u8> {
            let mut l = Vec::new();
            for key in layout {
                if next().is_multiple_of(self.odd_name) {
                    l.extend_from_slice(self.names[(next() >> 8) as usize % self.names.len()]);
                } else {
                    l.extend_from_slice(key);
                }
                if next().is_multiple_of(self.odd_value) {
                    l.extend_from_slice(self.values[(next() >> 8) as usize % self.values.len()]);
                } else {
                    l.extend_from_slice((next() % 100_000_000_000_000).to_string().as_bytes());
                }
            }
            for (k, tail) in self.tails {
                if next().is_multiple_of(*k) {
                    l.extend_from_slice(tail);
                }
            }
            l
        }
    }

    /// For lines of `lines`: the template noted from a line, applied to lines of the same
    /// layout (three times in four) or another, reads a line, where it reads it at all, as
    /// the general reading (`noting` without a template) does; noting a template does not
    /// change the reading; and the template reads at least a third of the lines (else this
    /// would prove nothing).
    fn check_template_reading<T: PartialEq + std::fmt::Debug>(
        lines: &LayoutLines,
        noting: fn(&[u8], &mut Option<Template>) -> T,
        by_template: fn(&[u8], &Template) -> Option<T>,
    ) {
        let mut next = xorshift(lines.seed);
        let general = |l: &[u8]| noting(l, &mut None);
        let (mut read, mut tried) = (0, 0);
        for _ in 0..3_000 {
            let layout = lines.layouts[(next() >> 8) as usize % lines.layouts.len()];
            let mut t = Some(Template::default());
            let first = lines.line(layout, &mut next);
            assert_eq!(noting(&first, &mut t), general(&first));
            let Some(t) = t else { continue };
            for _ in 0..4 {
                let l = if next().is_multiple_of(4) {
                    let other = lines.layouts[(next() >> 8) as usize % lines.layouts.len()];
                    lines.line(other, &mut next)
                } else {
                    lines.line(layout, &mut next)
                };
                tried += 1;
                if let Some(r) = by_template(&l, &t) {
                    read += 1;
                    assert_eq!(r, general(&l), "{:?}", String::from_utf8_lossy(&l));
                }
            }
        }
        assert!(read * 3 > tried, "{read} of {tried}");
    }

    /// Random lines made of `pieces` (xorshift, fixed seed).
    fn random_lines(pieces: &[&[u8]], n: usize, max_len: usize) -> Vec<Vec<u8>> {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        (0..n)
            .map(|_| {
                let len = next() as usize % max_len;
                let mut l = Vec::new();
                while l.len() < len {
                    l.extend_from_slice(pieces[(next() >> 32) as usize % pieces.len()]);
                }
                l
            })
            .collect()
    }

    #[test]
    fn params_as_the_plain_reading() {
        // The plain reading of `name=value …`: spaces skipped, a name up to the next `=` with
        // its trailing spaces trimmed, then the value up to the next space; numbers parsed
        // whole.
        fn plain(p: &[u8]) -> WaitParams {
            let mut w = WaitParams::default();
            let mut rest = p;
            loop {
                let start = rest.iter().position(|&c| c != b' ').unwrap_or(rest.len());
                rest = &rest[start..];
                let Some(eq) = rest.iter().position(|&c| c == b'=') else {
                    break;
                };
                let name = trim_end_spaces(&rest[..eq]);
                let name = name.to_vec();
                rest = &rest[eq + 1..];
                let vs = rest.iter().position(|&c| c != b' ').unwrap_or(rest.len());
                rest = &rest[vs..];
                let ve = rest.iter().position(|&c| c == b' ').unwrap_or(rest.len());
                let v = &rest[..ve];
                rest = &rest[ve..];
                match name.as_slice() {
                    b"ela" => match parse_u64(v) {
                        Some(x) if x <= MAX_TRACE_US => w.ela = Some(x),
                        Some(_) => w.bad = Some("ela= is beyond 12 days (corrupt line?)"),
                        None => w.bad = Some("ela= is not a number"),
                    },
                    b"tim" => match parse_i64(v) {
                        Some(x) => w.tim = Some(x),
                        None => w.bad = Some("tim= is not a number"),
                    },
                    b"obj#" => w.obj = parse_i64(v),
                    b"file#" | b"file number" => w.file = parse_i64(v),
                    b"block#" | b"first dba" => w.block = parse_u64(v),
                    b"blocks" | b"block cnt" => w.blocks = parse_u64(v).filter(|&b| b <= 1 << 32),
                    b"p1" => w.p1 = parse_i64(v),
                    b"p2" => w.p2 = parse_u64(v),
                    b"p3" => w.p3 = parse_u64(v),
                    _ => {}
                }
            }
            w
        }
        let pieces: [&[u8]; 26] = [
            b" ",
            b"  ",
            b"=",
            b"ela",
            b"ela ",
            b"tim",
            b"obj#",
            b"file#",
            b"file number",
            b"block#",
            b"first dba",
            b"blocks",
            b"block cnt",
            b"p1",
            b"p2",
            b"p3",
            b"driver id",
            b"-1",
            b"+7",
            b"12345678901234567890",
            b"2707602560910",
            b"9",
            b"x\xff",
            b"0",
            b"\0",
            b"4294967297",
        ];
        let mut lines = random_lines(&pieces, 20_000, 150);
        lines.push(b" ela= 23 file number=5 first dba=1234 block cnt=16 obj#=-1 tim=99".to_vec());
        lines.push(b" ela =7 file# =6 p1=x p2=99999999999999999999 tim=-5".to_vec());
        for l in &lines {
            assert_eq!(
                parse_params(l),
                plain(l),
                "{:?}",
                String::from_utf8_lossy(l)
            );
        }
    }

    #[test]
    fn params_by_a_template_as_the_general_reading() {
        // Lines laid out alike (the template's home ground) and lines that depart from the
        // layout by a name, a space or a value: wherever the template reads a line, it reads
        // it as the general reading does.
        let layouts: [&[&[u8]]; 4] = [
            &[
                b" ela= ",
                b" file#=",
                b" block#=",
                b" blocks=",
                b" obj#=",
                b" tim=",
            ],
            &[
                b" ela= ",
                b" driver id=",
                b" #bytes=",
                b" p3=",
                b" obj#=",
                b" tim=",
            ],
            &[
                b" ela= ",
                b" file number=",
                b" first dba=",
                b" block cnt=",
                b" tim=",
            ],
            &[b" ela= ", b" p1=", b" p2=", b" p3="],
        ];
        let values: [&[u8]; 12] = [
            b"7",
            b"0",
            b"-1",
            b"2707602560910",
            b"12345678901234567890",
            b"x\xff",
            b"+7",
            b"",
            b" 5",
            b"4294967297",
            b"99",
            b"1650815232",
        ];
        let names: [&[u8]; 4] = [b" ela =", b"  tim=", b" obj#= ", b" blocks="];
        check_template_reading(
            &LayoutLines {
                seed: 0x2545_f491_4f6c_dd1d,
                layouts: &layouts,
                names: &names,
                values: &values,
                odd_name: 32,
                odd_value: 8,
                tails: &[(16, b"   "), (32, b" extra=1")],
            },
            parse_params_noting,
            params_by_template,
        );
    }

    #[test]
    fn call_fields_by_a_template_as_the_general_reading() {
        // As for WAIT parameters: lines of one layout, and lines departing from it by a
        // field's name, spaces or value; wherever the template reads a line, it reads it as
        // the general reading does.
        let layouts: [&[&[u8]]; 3] = [
            &[
                b"c=", b",e=", b",p=", b",cr=", b",cu=", b",mis=", b",r=", b",dep=", b",og=",
                b",plh=", b",tim=",
            ],
            &[
                b"c=", b",e=", b",p=", b",cr=", b",cu=", b",mis=", b",r=", b",dep=", b",og=",
                b",tim=",
            ],
            &[b"c=", b",e=", b",dep=", b",type=", b",tim="],
        ];
        let values: [&[u8]; 9] = [
            b"-1",
            b"12345678901234567890",
            b"x",
            b"",
            b" 5",
            b"9223372036854775808",
            b"7 ",
            b"5,",
            b"1,c=9",
        ];
        let names: [&[u8]; 5] = [b", c=", b",e =", b",dep=", b",tim=", b",cx="];
        check_template_reading(
            &LayoutLines {
                seed: 0x9e37_79b9_7f4a_7c15,
                layouts: &layouts,
                names: &names,
                values: &values,
                odd_name: 64,
                odd_value: 32,
                tails: &[(16, b",")],
            },
            call_fields_noting,
            call_fields_by_template,
        );
    }

    #[test]
    fn call_fields_as_the_plain_reading() {
        // The plain reading: fields split at commas and trimmed, values trimmed and parsed
        // whole, a later field overriding an earlier one.
        fn plain(b: &[u8]) -> CallFields {
            let mut f = CallFields::default();
            for kv in b.split(|&x| x == b',') {
                let kv = kv.trim_ascii();
                if let Some(v) = kv.strip_prefix(b"c=") {
                    f.c = parse_u64(v.trim_ascii());
                } else if let Some(v) = kv.strip_prefix(b"e=") {
                    f.e = parse_u64(v.trim_ascii());
                } else if let Some(v) = kv.strip_prefix(b"dep=") {
                    f.dep = parse_u64(v.trim_ascii()).unwrap_or(0);
                } else if let Some(v) = kv.strip_prefix(b"tim=") {
                    f.tim = parse_i64(v.trim_ascii());
                }
            }
            f
        }
        let pieces: [&[u8]; 22] = [
            b",",
            b" ",
            b"\t",
            b"c=",
            b"e=",
            b"dep=",
            b"tim=",
            b"cr=",
            b"p=",
            b"c =",
            b"d",
            b"t",
            b"1",
            b"42",
            b"-3",
            b"+4",
            b"2707602560910",
            b"12345678901234567890",
            b"99999999999999999999",
            b"x",
            b"\xff",
            b"=",
        ];
        let mut lines = random_lines(&pieces, 20_000, 100);
        lines.push(
            b"c=120,e=150,p=0,cr=0,cu=0,mis=1,r=0,dep=0,og=1,plh=0,tim=2707602560910".to_vec(),
        );
        lines.push(b" c = 1, e=2 ,dep= 3,tim=-9,c=5,".to_vec());
        for l in &lines {
            assert_eq!(call_fields(l), plain(l), "{:?}", String::from_utf8_lossy(l));
        }
    }

    #[test]
    fn leading_digits_as_one_by_one() {
        let one_by_one = |p: &[u8]| {
            let mut acc = 0u64;
            let mut n = 0;
            for &c in p {
                if !c.is_ascii_digit() {
                    break;
                }
                acc = acc.wrapping_mul(10).wrapping_add((c - b'0') as u64);
                n += 1;
            }
            (acc, n)
        };
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let alphabet = b"0123456789 =/:-9x\xff\xfa\x2f\x3a";
        for len in 0..40 {
            for _ in 0..200 {
                let s: Vec<u8> = (0..len)
                    .map(|_| {
                        let seed = next();
                        // Mostly digits, sometimes any byte of the alphabet.
                        if !seed.is_multiple_of(5) {
                            b'0' + (seed >> 8) as u8 % 10
                        } else {
                            alphabet[(seed >> 8) as usize % alphabet.len()]
                        }
                    })
                    .collect();
                assert_eq!(leading_digits(&s), one_by_one(&s), "{s:?}");
            }
        }
        assert_eq!(leading_digits(b"2707602560910 x"), (2707602560910, 13));
        assert_eq!(
            leading_digits(b"99999999999999999999999"),
            one_by_one(b"99999999999999999999999")
        );
    }

    #[test]
    fn between_call_waits_by_time() {
        let t = parse_str(
            "WAIT #1: nam='SQL*Net message from client' ela= 1000 driver id=1 #bytes=1 p3=0 obj#=-1 tim=10000\n\
             WAIT #1: nam='db file sequential read' ela= 300 file#=1 block#=2 blocks=1 obj#=5 tim=10400\n\
             FETCH #1:c=100,e=500,p=1,cr=1,cu=0,mis=0,r=1,dep=0,og=1,plh=1,tim=10500\n",
        );
        let sn = &t.events[0];
        assert_eq!((sn.between_us, sn.count), (1000, 1));
        assert_eq!(t.events[1].between_us, 0);
        assert_eq!(t.calls["FETCH"].elapsed_us, 500);
        assert_eq!(t.stats.parsed, 3);
    }
}
