//! Readers of evidence that databases and the OS already produce, turned into [`Results`].
//!
//! One file per source format:
//! - [`oracle_trace`]: Oracle extended SQL trace (event 10046) → `iolens trace`.
//! - [`event_histogram`]: `V$EVENT_HISTOGRAM` / `V$EVENT_HISTOGRAM_MICRO` CSV snapshots.
//! - [`pylatencymap`]: PyLatencyMap `<begin record>` … `<end record>` streams.
//! - [`bcc`]: bcc `biolatency` text, bpftrace `hist()` maps and `biosnoop` output.
//! - [`fio`]: fio per-I/O latency logs (`write_lat_log`) and histogram logs (`write_hist_log`).
//! - [`hlog`]: HdrHistogram interval logs (`.hlog`, V2 encodings).
//! - [`pairs`]: two-column `time latency` text (the input of Brendan Gregg's heatmap tool).
//! - [`perf_script`], [`folded`]: `perf script` samples and folded stacks into a stack profile
//!   (`Results::profile`) rather than latency runs.
//!
//! Data flow: a reader streams its input line by line through [`LineReader`] (gzip detected by
//! magic bytes, one reused buffer, no per-line allocation), feeds latencies into a
//! [`Binned`] accumulator (per-event values binned into fixed intervals by completion time) or
//! builds per-snapshot intervals itself, and returns one [`RunResult`] per source series with
//! one [`crate::results::OpResult`] per event name. The command then prints a terminal summary
//! (`render::brief_trace`) and optionally writes the JSON.
//!
//! Bucketed sources keep their convention in `OpResult::bucket_convention`. When a bucket's
//! count is converted into the nanosecond HdrHistogram, it is spread with [`spread`]: the bucket
//! range `[lo, hi)` is cut into up to [`SPREAD_SLOTS`] geometrically equal slots (uniform slots
//! when `lo` is 0), the count is divided evenly across them (remainder to the lowest slots), and
//! each slot's share is recorded at the slot's geometric midpoint. So an Oracle bucket `8` ms
//! becomes values in [4, 8) ms and a bcc row `4 -> 7` µs values in [4, 8) µs; counts are exact,
//! the shape inside a bucket is log-uniform.
//!
//! Typed `Results` fields written here (documented in `docs/results-schema.md`):
//! - `source` ([`SourceInfo`]): `{format, files:[{path, lines, parsed, ignored:{kind:n}, unparsed, unparsed_first:[{line,text}]}]}`
//!   for every reader: how many lines were read, used, knowingly ignored and not understood.
//! - `trace_profile`, `trace_io`, `trace_slowest`: see [`oracle_trace`].

pub mod awr;
pub mod bcc;
pub mod event_histogram;
pub mod fio;
pub mod folded;
pub mod hlog;
pub mod oracle_trace;
pub mod pairs;
pub mod perf_script;
pub mod pg_stats;
pub mod pylatencymap;
pub mod sniff;
pub mod sql_table;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::histogram::{
    interval_histogram, new_histogram, record_interval, Hist, HistEncoder, IndexCounts, TotalCounts,
};
use crate::results::evidence::{SourceFile, SourceInfo};
use crate::results::profile::{ProfileSource, StackProfile};
use crate::results::{BucketConvention, Interval, Kind, OpResult, Results, RunResult};

/// Number of sub-slots a bucket's count is spread over (see the module docs).
pub const SPREAD_SLOTS: u64 = 32;
/// How many unparsed lines are quoted (with line numbers) per file.
pub const UNPARSED_QUOTED: usize = 10;

// ---------------------------------------------------------------------------------------------
// Command-line arguments

/// What `iolens trace` reads and how.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// Oracle extended SQL trace files (event 10046), plain or gzip-compressed.
    pub files: Vec<PathBuf>,
    /// Keep only these wait events in the latency histograms (empty: all).
    pub events: Vec<String>,
    /// Interval length of the per-interval histograms.
    pub interval: std::time::Duration,
    /// How many of the slowest individual waits to list.
    pub top: usize,
}

/// Formats understood by `iolens ingest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// V$EVENT_HISTOGRAM(_MICRO) snapshots spooled as CSV: time, event, bucket, count.
    EventHistogram,
    /// PyLatencyMap record stream (<begin record> … <end record>).
    Pylatencymap,
    /// bcc biolatency text output (log2 histograms, optional -T/-D/-F sections).
    Biolatency,
    /// bpftrace hist()/lhist() map output.
    Bpftrace,
    /// bcc biosnoop output (one line per I/O).
    Biosnoop,
    /// fio per-I/O latency log (write_lat_log / write_clat_log ...).
    FioLog,
    /// fio histogram log (write_hist_log).
    FioHist,
    /// HdrHistogram interval log (.hlog).
    Hlog,
    /// Two columns: time latency (Brendan Gregg's heatmap input).
    TimeLatency,
    /// `perf script` output (sampled stacks) into a stack profile.
    PerfScript,
    /// Folded stacks (`comm;outer;…;leaf weight`) into a stack profile.
    Folded,
    /// Oracle AWR or Statspack report, text form: wait event histograms over the snap window.
    Awr,
    /// PostgreSQL `pg_stat_io` snapshots (psql or CSV): means-only per-interval deltas.
    PgStatIo,
    /// PostgreSQL `pg_stat_database` snapshots: block reads and their time, means only.
    PgStatDatabase,
    /// PostgreSQL `pg_stat_statements` snapshots: per-statement block I/O time, means only.
    PgStatStatements,
}

/// What `iolens ingest` reads and how.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// Input format.
    pub format: Format,
    /// Input files, plain or gzip-compressed.
    pub files: Vec<PathBuf>,
    /// Latency unit of the values where the format does not say it (`None`: the format's
    /// default).
    pub unit: Option<Unit>,
    /// Time unit of the first column of time-latency input (`None`: us).
    pub time_unit: Option<Unit>,
    /// Interval length for formats with per-event timestamps, and the assumed spacing of
    /// un-timestamped histogram sections.
    pub interval: std::time::Duration,
    /// How long the source was recording, for sources that do not say.
    pub duration: Option<std::time::Duration>,
}

/// A time or latency unit named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Unit {
    Ns,
    Us,
    Ms,
    S,
}

impl Unit {
    /// Nanoseconds per unit.
    pub fn ns(self) -> f64 {
        match self {
            Unit::Ns => 1.0,
            Unit::Us => 1e3,
            Unit::Ms => 1e6,
            Unit::S => 1e9,
        }
    }
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "us",
            Unit::Ms => "ms",
            Unit::S => "s",
        }
    }
}

/// Read every input of an `ingest` invocation into one results document.
pub fn ingest(args: &IngestOptions, command_line: Vec<String>) -> Result<Results> {
    let mut results = Results::new(Kind::Ingest, command_line);
    let mut stats = Vec::new();
    let mut stacks: Option<(crate::results::profile::ProfileBuilder, ProfileSource)> = None;
    let mut io_stats = Vec::new();
    for path in &args.files {
        let mut reader = LineReader::open(path)?;
        let mut read_stacks = |p: Result<StackProfile>| -> Result<Vec<RunResult>> {
            let p = p?;
            if !p.stacks.is_empty() {
                let (b, src) = stacks.get_or_insert_with(|| (Default::default(), p.source.clone()));
                src.duration_s = match (src.duration_s, p.source.duration_s) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                b.merge(&p);
            }
            Ok(Vec::new())
        };
        let runs = match args.format {
            Format::EventHistogram => event_histogram::read(&mut reader, args),
            Format::Pylatencymap => pylatencymap::read(&mut reader, args),
            Format::Biolatency => bcc::read_biolatency(&mut reader, args),
            Format::Bpftrace => bcc::read_bpftrace(&mut reader, args),
            Format::Biosnoop => bcc::read_biosnoop(&mut reader, args),
            Format::FioLog => fio::read_lat_log(&mut reader, args),
            Format::FioHist => fio::read_hist_log(&mut reader, args),
            Format::Hlog => hlog::read(&mut reader, args),
            Format::TimeLatency => pairs::read(&mut reader, args),
            Format::PerfScript => read_stacks(perf_script::read(&mut reader)),
            Format::Folded => read_stacks(folded::read(&mut reader)),
            Format::Awr => awr::read(&mut reader, args),
            Format::PgStatIo | Format::PgStatDatabase | Format::PgStatStatements => {
                let view = match args.format {
                    Format::PgStatIo => pg_stats::PgView::Io,
                    Format::PgStatDatabase => pg_stats::PgView::Database,
                    _ => pg_stats::PgView::Statements,
                };
                pg_stats::read(&mut reader, view).map(|s| {
                    io_stats.push(s);
                    Vec::new()
                })
            }
        }
        .map_err(|e| {
            // Errors of the line reader already name the file.
            let name = path.display().to_string();
            if e.to_string().starts_with(&name) {
                e
            } else {
                e.context(name)
            }
        })?;
        for w in reader.warnings.drain(..) {
            results.warnings.push(format!("{}: {w}", path.display()));
        }
        let stacks_read = reader.stats.parsed > 0 && (stacks.is_some() || !io_stats.is_empty());
        if runs.is_empty() && !stacks_read {
            // Nothing read is an error, not an empty results document (exit non-zero even with
            // -q, and say why), with the likely format when it is another.
            let mut msg = format!(
                "{}; is this the right --format?",
                nothing_read(
                    &path.display().to_string(),
                    format_name(args.format),
                    &reader.stats
                )
            );
            for w in &results.warnings {
                msg.push_str(&format!("\n  {w}"));
            }
            if let Some(hint) = sniff::hint(path, args.format) {
                msg.push_str(&format!("\n  hint: {hint}"));
            }
            bail!(msg);
        }
        for mut r in runs {
            apply_duration(&mut r, args.duration);
            if let Some(s) = &mut r.spec {
                s.file = Some(path.display().to_string());
            }
            results.runs.push(r);
        }
        if reader.stats.unparsed > 0 {
            results.warnings.push(format!(
                "{}: {} line(s) could not be parsed (first at line {})",
                path.display(),
                reader.stats.unparsed,
                reader
                    .stats
                    .unparsed_first
                    .first()
                    .map(|u| u.line)
                    .unwrap_or(0)
            ));
        }
        stats.push(reader.file_stats(path));
    }
    results.io_stats = io_stats;
    results.source = Some(SourceInfo {
        format: format_name(args.format).to_string(),
        files: stats,
    });
    if let Some((b, src)) = stacks {
        let p = b.finish(src);
        p.validate()
            .context("the stacks read cannot be used as a profile")?;
        results.profile = Some(p);
    }
    Ok(results)
}

/// Give a run without a duration of its own the one the user stated (`--duration`): its
/// intervals are spread evenly over it. A run whose source has its own span keeps it.
fn apply_duration(r: &mut RunResult, duration: Option<std::time::Duration>) {
    let Some(d) = duration.map(|d| d.as_secs_f64()).filter(|d| *d > 0.0) else {
        return;
    };
    if !r.duration_unknown {
        r.warnings.push(format!(
            "--duration {d} s ignored: the source gives its own span ({} s)",
            crate::units::sig3(r.duration_s)
        ));
        return;
    }
    let n = r
        .ops
        .iter()
        .map(|o| o.intervals.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let each = d / n as f64;
    for o in &mut r.ops {
        for (i, iv) in o.intervals.iter_mut().enumerate() {
            iv.start_s = i as f64 * each;
            iv.duration_s = each;
        }
    }
    r.duration_s = d;
    r.interval_s = each;
    r.duration_unknown = false;
    r.warnings.push(format!(
        "duration {d} s taken from --duration (the source does not record time){}",
        if n > 1 {
            format!(
                "; its {n} histograms taken as {} s each",
                crate::units::sig3(each)
            )
        } else {
            String::new()
        }
    ));
}

/// Why a file yielded no data: what was read and the first line not understood.
pub(crate) fn nothing_read(path: &str, format: &str, stats: &LineStats) -> String {
    let mut m = if stats.lines == 0 {
        format!("{path}: no {format} data found: the file is empty")
    } else {
        format!(
            "{path}: no {format} data found ({} line(s) read, {} not understood)",
            stats.lines, stats.unparsed
        )
    };
    if let Some(u) = stats.unparsed_first.first() {
        // Binary input: show control and undecodable bytes as '?', not raw on the terminal.
        let text: String = u
            .text
            .chars()
            .map(|c| {
                if c.is_control() || c == '\u{fffd}' {
                    '?'
                } else {
                    c
                }
            })
            .collect();
        m.push_str(&format!(
            "; line {}: {} ({})",
            u.line,
            truncate(&text, 80),
            u.reason
        ));
    }
    m
}

/// The CLI spelling of a format.
pub fn format_name(f: Format) -> &'static str {
    match f {
        Format::EventHistogram => "event-histogram",
        Format::Pylatencymap => "pylatencymap",
        Format::Biolatency => "biolatency",
        Format::Bpftrace => "bpftrace",
        Format::Biosnoop => "biosnoop",
        Format::FioLog => "fio-log",
        Format::FioHist => "fio-hist",
        Format::Hlog => "hlog",
        Format::TimeLatency => "time-latency",
        Format::PerfScript => "perf-script",
        Format::Folded => "folded",
        Format::Awr => "awr",
        Format::PgStatIo => "pg-stat-io",
        Format::PgStatDatabase => "pg-stat-database",
        Format::PgStatStatements => "pg-stat-statements",
    }
}

/// Peak resident set size of this process (VmHWM from /proc/self/status).
pub(crate) fn peak_rss() -> Option<String> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .map(|l| l["VmHWM:".len()..].trim().to_string())
}

// ---------------------------------------------------------------------------------------------
// Input

/// Per-file line accounting: nothing is dropped silently.
#[derive(Debug, Default, Clone)]
pub struct LineStats {
    /// Lines read.
    pub lines: u64,
    /// Lines that carried data that was used.
    pub parsed: u64,
    /// Lines recognised and deliberately not used, by kind.
    pub ignored: BTreeMap<String, u64>,
    /// Lines not understood.
    pub unparsed: u64,
    /// The first few unparsed lines.
    pub unparsed_first: Vec<UnparsedLine>,
}

pub use crate::results::evidence::UnparsedLine;

/// Streams lines of a (possibly gzip-compressed) file through one reused buffer: lines are
/// returned as slices of the buffer (no per-line copy or allocation).
pub struct LineReader {
    inner: Box<dyn Read>,
    buf: Vec<u8>,
    /// Start of unread data in `buf`.
    pos: usize,
    /// End of valid data in `buf`.
    end: usize,
    eof: bool,
    /// The current line's range in `buf` (without terminator).
    cur: (usize, usize),
    /// Current line number (1-based; 0 before the first line).
    pub(crate) line_no: u64,
    pub stats: LineStats,
    /// True when the input was gzip-compressed.
    pub gzip: bool,
    /// Display name of the input.
    pub name: String,
    /// Warnings about the input as a whole (moved into `Results.warnings`).
    pub warnings: Vec<String>,
}

const READ_CHUNK: usize = 128 << 10;
/// Longest line any reader accepts (bytes, before decompression limits apply): memory stays
/// bounded whatever the input, with a clear error naming the file and line.
pub const MAX_LINE_BYTES: usize = 4 << 20;

impl LineReader {
    /// Open a file; gzip is detected by its magic bytes (1f 8b), whatever the file is called.
    pub fn open(path: &Path) -> Result<LineReader> {
        let f =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
            bail!("{} is a directory, not a file", path.display());
        }
        LineReader::from_reader(Box::new(f), &path.display().to_string())
    }

    /// Wrap any reader (gzip detected by magic bytes).
    pub fn from_reader(r: Box<dyn Read>, name: &str) -> Result<LineReader> {
        let mut br = BufReader::with_capacity(64 * 1024, r);
        let head = br
            .fill_buf()
            .with_context(|| format!("cannot read {name}"))?;
        let gzip = head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b;
        let inner: Box<dyn Read> = if gzip {
            Box::new(flate2::bufread::MultiGzDecoder::new(br))
        } else {
            Box::new(br)
        };
        Ok(LineReader {
            inner,
            buf: vec![0; READ_CHUNK],
            pos: 0,
            end: 0,
            eof: false,
            cur: (0, 0),
            line_no: 0,
            stats: LineStats::default(),
            gzip,
            name: name.to_string(),
            warnings: Vec::new(),
        })
    }

    fn fill(&mut self) -> Result<usize> {
        // Move the partial line to the front, grow when one line fills the buffer.
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.end == self.buf.len() {
            // One line fills the buffer: grow it, but never past the line-length cap, so input
            // without newlines (`/dev/zero`, a gzip bomb, a binary file) cannot exhaust memory.
            if self.buf.len() >= MAX_LINE_BYTES {
                bail!(
                    "{}: line {} is longer than {} MiB (no line break found): not a text \
                     file of this format?",
                    self.name,
                    self.line_no + 1,
                    MAX_LINE_BYTES >> 20
                );
            }
            let n = (self.buf.len() * 2).min(MAX_LINE_BYTES);
            self.buf.resize(n, 0);
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(anyhow::Error::new(e).context(format!(
                        "{}: read error after line {}{}",
                        self.name,
                        self.line_no,
                        if self.gzip {
                            " (corrupt or truncated gzip data?)"
                        } else {
                            ""
                        }
                    )))
                }
            }
        }
    }

    /// The next line without its line terminator (`\n` or `\r\n`), or `None` at the end.
    #[inline]
    pub(crate) fn next_line(&mut self) -> Result<Option<&[u8]>> {
        let mut scanned = self.pos;
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[scanned..self.end]) {
                let nl = scanned + i;
                let start = self.pos;
                self.pos = nl + 1;
                return Ok(Some(self.take_line(start, nl)));
            }
            if self.eof {
                if self.pos < self.end {
                    let (start, end) = (self.pos, self.end);
                    self.pos = self.end;
                    return Ok(Some(self.take_line(start, end)));
                }
                return Ok(None);
            }
            let done = self.end - self.pos;
            if self.fill()? == 0 {
                self.eof = true;
            }
            scanned = self.pos + done;
        }
    }

    #[inline]
    fn take_line(&mut self, start: usize, mut end: usize) -> &[u8] {
        if end > start && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        self.line_no += 1;
        self.stats.lines += 1;
        self.cur = (start, end);
        &self.buf[start..end]
    }

    /// Count the current line as used.
    #[inline]
    pub fn parsed(&mut self) {
        self.stats.parsed += 1;
    }

    /// Count the current line as recognised but not used.
    pub fn ignored(&mut self, kind: &str) {
        if let Some(n) = self.stats.ignored.get_mut(kind) {
            *n += 1;
        } else {
            self.stats.ignored.insert(kind.to_string(), 1);
        }
    }

    /// Count the current line as not understood (it is quoted from the reader's buffer).
    pub fn unparsed(&mut self, reason: &str) {
        let (a, b) = self.cur;
        count_unparsed(&mut self.stats, self.line_no, &self.buf[a..b], reason);
    }

    /// The per-file line accounting.
    pub(crate) fn file_stats(&self, path: &Path) -> SourceFile {
        source_file(&self.stats, &path.display().to_string(), self.gzip)
    }
}

/// Record an unparsed line in `stats`.
pub(crate) fn count_unparsed(stats: &mut LineStats, line: u64, text: &[u8], reason: &str) {
    stats.unparsed += 1;
    if stats.unparsed_first.len() < UNPARSED_QUOTED {
        let mut t = String::from_utf8_lossy(text).into_owned();
        if t.len() > 200 {
            let mut cut = 200;
            while !t.is_char_boundary(cut) {
                cut -= 1;
            }
            t.truncate(cut);
            t.push('…');
        }
        stats.unparsed_first.push(UnparsedLine {
            line,
            text: t,
            reason: reason.to_string(),
        });
    }
}

/// The line accounting of one file, as stored in [`Results::source`].
pub(crate) fn source_file(s: &LineStats, path: &str, gzip: bool) -> SourceFile {
    SourceFile {
        path: path.to_string(),
        gzip,
        lines: s.lines,
        parsed: s.parsed,
        ignored: s.ignored.clone(),
        unparsed: s.unparsed,
        unparsed_first: s.unparsed_first.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// Small byte parsers shared by the readers

/// Parse an unsigned decimal integer (whole slice).
#[inline]
pub(crate) fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// Parse a signed decimal integer (whole slice).
#[inline]
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    match s.first() {
        Some(b'-') => parse_u64(&s[1..]).and_then(|v| i64::try_from(v).ok().map(|v| -v)),
        Some(b'+') => parse_u64(&s[1..]).and_then(|v| i64::try_from(v).ok()),
        _ => parse_u64(s).and_then(|v| i64::try_from(v).ok()),
    }
}

/// Parse a float from bytes (whole slice, trimmed).
pub(crate) fn parse_f64(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?.trim();
    let v: f64 = t.parse().ok()?;
    v.is_finite().then_some(v)
}

/// Trim ASCII whitespace on both ends.
#[inline]
pub fn trim(s: &[u8]) -> &[u8] {
    s.trim_ascii()
}

// ---------------------------------------------------------------------------------------------
// Buckets

/// Spread `count` values over `[lo_ns, hi_ns)` deterministically (see the module docs).
pub fn spread(h: &mut Histogram<u64>, lo_ns: u64, hi_ns: u64, count: u64) {
    if count == 0 {
        return;
    }
    if hi_ns <= lo_ns.saturating_add(1) {
        record_interval(h, lo_ns, count);
        return;
    }
    let slots = count.min(SPREAD_SLOTS);
    let base = count / slots;
    let rem = count % slots;
    let (lo, hi) = (lo_ns as f64, hi_ns as f64);
    for i in 0..slots {
        let f = (i as f64 + 0.5) / slots as f64;
        let v = if lo_ns == 0 {
            hi * f
        } else {
            lo * (hi / lo).powf(f)
        };
        let v = (v as u64).clamp(lo_ns.max(1), hi_ns - 1);
        let n = base + u64::from(i < rem);
        if n > 0 {
            record_interval(h, v, n);
        }
    }
}

/// The `[lo, hi)` range in the value's unit of a power-of-two bucket labelled `v`.
///
/// Upper-bound (Oracle): `v` holds `[v/2, v)`, and bucket 1 holds `[0, 1)`; the sentinel
/// 4294967295 is read as 2^32. Lower-bound (bcc, SystemTap, DTrace): `v` holds `[v, 2v)`, and
/// bucket 0 holds `[0, 1)`.
pub(crate) fn bucket_range(v: u64, conv: BucketConvention) -> (u64, u64) {
    match conv {
        BucketConvention::UpperBound => {
            let v = if v == u32::MAX as u64 { 1u64 << 32 } else { v };
            if v <= 1 {
                (0, 1)
            } else {
                (v / 2, v)
            }
        }
        BucketConvention::LowerBound => {
            if v == 0 {
                (0, 1)
            } else {
                (v, v.saturating_mul(2))
            }
        }
        BucketConvention::Exact => (v, v + 1),
    }
}

/// Spread a bucket given in `unit_ns` units.
pub fn spread_bucket(
    h: &mut Histogram<u64>,
    v: u64,
    conv: BucketConvention,
    unit_ns: f64,
    count: u64,
) {
    let (lo, hi) = bucket_range(v, conv);
    let lo_ns = (lo as f64 * unit_ns).round() as u64;
    let hi_ns = (hi as f64 * unit_ns).round() as u64;
    spread(h, lo_ns, hi_ns, count);
}

// ---------------------------------------------------------------------------------------------
// Accumulating per-event values into fixed intervals

/// Most latencies an open interval holds as a list before they go into its histogram: 16,384
/// values take 128 KiB, the size of an interval histogram that spans 1 µs to 20 ms.
const MAX_CUR_VALS: usize = 1 << 14;

struct Slot {
    hist: Hist,
    count: u64,
    bytes: u64,
}

/// One event's accumulator in [`Binned`].
struct EventAcc {
    name: String,
    total: Histogram<u64>,
    /// Latencies of `total` not yet in it (added when the accumulator is drained).
    total_counts: TotalCounts,
    bytes: u64,
    cur: Option<i64>,
    /// Times `[lo, hi)` (ns) of interval `cur`; empty when none is open.
    cur_span: (i64, i64),
    cur_hist: Histogram<u64>,
    /// Latencies (ns) of the open interval not yet in `cur_hist`: appending is cheaper than
    /// recording into a histogram that was last touched on the encoder thread (a cache miss
    /// per value); the encoder records them. At most [`MAX_CUR_VALS`].
    cur_vals: Vec<u64>,
    cur_bytes: u64,
    closed: BTreeMap<i64, Slot>,
    /// Edges of the source buckets spread into this op (see `OpResult::bucket_edges_ns`).
    edges: std::collections::BTreeSet<u64>,
}

/// A closed interval histogram on its way to (or back from) the encoder thread.
struct Job {
    op: usize,
    k: i64,
    /// The interval's histogram, when values were recorded into it (spread buckets, or more
    /// than [`MAX_CUR_VALS`] latencies); `None` (the common case) when they are all in `vals`.
    hist: Option<Histogram<u64>>,
    /// Latencies (ns) still to be recorded into `hist`.
    vals: Vec<u64>,
    bytes: u64,
}

impl Job {
    /// The interval's histogram with the pending latencies recorded into it (a fresh one when
    /// it had none).
    fn settled(&mut self) -> &mut Histogram<u64> {
        let h = self.hist.get_or_insert_with(interval_histogram);
        for &v in &self.vals {
            record_interval(h, v, 1);
        }
        self.vals.clear();
        h
    }
}

struct Done {
    op: usize,
    k: i64,
    slot: Slot,
}

impl Job {
    /// Encode the job's interval with `enc` (counting its latencies in `own` when it has no
    /// histogram, the common case: only the counts in use are touched), leaving its list empty
    /// for reuse.
    fn encode(&mut self, enc: &mut HistEncoder, own: &mut IndexCounts) -> Done {
        let slot = if self.hist.is_none() && !self.vals.is_empty() {
            for &v in &self.vals {
                own.record(v);
            }
            self.vals.clear();
            let count = own.len;
            Slot {
                hist: enc.encode_counts(own),
                count,
                bytes: self.bytes,
            }
        } else {
            let bytes = self.bytes;
            let h = self.settled();
            Slot {
                hist: enc.encode(h),
                count: h.len(),
                bytes,
            }
        };
        Done {
            op: self.op,
            k: self.k,
            slot,
        }
    }
}

/// Closed intervals handed over at once: one message (and at most one wake-up of the helper)
/// per batch rather than per interval.
const BATCH_JOBS: usize = 32;
/// A batch is handed over early once its lists hold this many latencies (bounds memory).
const BATCH_VALS: usize = 1 << 16;
/// Batches queued for the helper before the parser waits for it (bounds memory: with the one
/// being encoded and the one being filled, at most (2 + 2) · [`BATCH_JOBS`] intervals and
/// about (2 + 2) · ([`BATCH_VALS`] + [`MAX_CUR_VALS`]) latencies are in flight).
const BATCHES_QUEUED: usize = 2;

/// Encodes closed intervals (V2-deflate) on a helper thread, so the parsing thread only appends
/// latencies to a list and hands the lists over in batches at interval boundaries: the helper
/// counts them by HdrHistogram index ([`IndexCounts`]) and encodes those counts, or (an
/// interval that also holds spread buckets or more than [`MAX_CUR_VALS`] values) records them
/// into the interval's histogram and encodes that. The lists come back with the encoded batch
/// for reuse; the batch queue is bounded, which bounds memory.
struct Encoder {
    tx: Option<std::sync::mpsc::SyncSender<Vec<Job>>>,
    /// Encoded intervals, and the emptied jobs of their batch (for reuse).
    done: std::sync::mpsc::Receiver<(Vec<Done>, Vec<Job>)>,
    /// The batch being filled.
    batch: Vec<Job>,
    batch_vals: usize,
    /// Emptied lists to reuse. (Histograms are not reused: one that grew would encode with a
    /// larger highest trackable value than a fresh one.)
    spare: Vec<Vec<u64>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Encoder {
    fn start() -> Encoder {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Job>>(BATCHES_QUEUED);
        let (done_tx, done) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("iolens-encode".into())
            .spawn(move || {
                let mut enc = HistEncoder::new();
                let mut own = IndexCounts::new();
                for mut batch in rx {
                    let out: Vec<Done> = batch
                        .iter_mut()
                        .map(|job| job.encode(&mut enc, &mut own))
                        .collect();
                    if done_tx.send((out, batch)).is_err() {
                        break;
                    }
                }
            })
            .ok();
        Encoder {
            tx: handle.as_ref().map(|_| tx),
            done,
            batch: Vec::with_capacity(BATCH_JOBS),
            batch_vals: 0,
            spare: Vec::new(),
            handle,
        }
    }

    /// Hand the batch being filled to the helper. `Err` gives the batch back when there is no
    /// helper (it could not be started, or it has stopped).
    fn flush(&mut self) -> std::result::Result<(), Vec<Job>> {
        self.batch_vals = 0;
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH_JOBS));
        match &self.tx {
            Some(tx) => tx.send(batch).map_err(|e| e.0),
            None => Err(batch),
        }
    }
}

fn merge_slot(closed: &mut BTreeMap<i64, Slot>, k: i64, s: Slot) {
    match closed.remove(&k) {
        None => {
            closed.insert(k, s);
        }
        Some(old) => {
            // The same interval closed twice (out-of-order times): merge exactly.
            let mut h = old.hist.decode().unwrap_or_else(|_| new_histogram());
            if let Ok(x) = s.hist.decode() {
                let _ = h.add(x);
            }
            closed.insert(
                k,
                Slot {
                    count: h.len(),
                    hist: Hist::encode(&h),
                    bytes: old.bytes.saturating_add(s.bytes),
                },
            );
        }
    }
}

/// Per-event latencies binned by completion time into fixed intervals.
///
/// Time is in ns on any consistent axis (Unix epoch or relative); interval `k` covers
/// `[k·interval, (k+1)·interval)` on that axis, so accumulators of different files on the same
/// axis merge exactly. Only one interval per event is open (a plain histogram); closed ones are
/// handed to an encoder thread and kept encoded, so memory grows with the number of non-empty
/// intervals, not with input size.
///
/// The series' duration never depends on the interval: it is the observed span, from the
/// earliest to the latest time recorded or [`observed`](Binned::observe) (a source that knows
/// its own span, such as a trace's first and last `tim`, says so). The grid is cut to that
/// span: the first and last intervals keep their real, shorter lengths, and one shorter than
/// half an interval is folded into its neighbour, so no interval is a sliver whose rate would
/// mean nothing.
pub(crate) struct Binned {
    interval_ns: u64,
    /// Earliest and latest time seen (ns on the axis).
    span: Option<(i64, i64)>,
    ops: Vec<EventAcc>,
    index: HashMap<String, usize>,
    encoder: Option<Encoder>,
}

impl Drop for Binned {
    fn drop(&mut self) {
        if let Some(mut e) = self.encoder.take() {
            e.tx = None;
            if let Some(h) = e.handle.take() {
                let _ = h.join();
            }
        }
    }
}

impl Binned {
    /// A new accumulator with the given interval length (ns, > 0).
    pub(crate) fn new(interval_ns: u64) -> Binned {
        Binned {
            interval_ns: interval_ns.max(1),
            span: None,
            ops: Vec::new(),
            index: HashMap::new(),
            encoder: None,
        }
    }

    /// Index of the event named `name`, created on first use.
    pub(crate) fn op(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.ops.len();
        self.ops.push(EventAcc {
            name: name.to_string(),
            total: new_histogram(),
            total_counts: TotalCounts::default(),
            bytes: 0,
            cur: None,
            cur_span: (0, 0),
            cur_hist: interval_histogram(),
            cur_vals: Vec::new(),
            cur_bytes: 0,
            closed: BTreeMap::new(),
            edges: Default::default(),
        });
        self.index.insert(name.to_string(), i);
        i
    }

    /// Close the open interval of `op` and queue it for encoding.
    #[cold]
    fn close(&mut self, op: usize) {
        let o = &mut self.ops[op];
        let Some(k) = o.cur.take() else { return };
        o.cur_span = (0, 0);
        if o.cur_hist.is_empty() && o.cur_vals.is_empty() && o.cur_bytes == 0 {
            return;
        }
        let enc = self.encoder.get_or_insert_with(Encoder::start);
        // An empty histogram stays (it is fresh: any value recorded would have made it
        // non-empty); only the list of latencies goes, in the common case.
        let hist = (!o.cur_hist.is_empty())
            .then(|| std::mem::replace(&mut o.cur_hist, interval_histogram()));
        let vals = std::mem::replace(&mut o.cur_vals, enc.spare.pop().unwrap_or_default());
        let bytes = std::mem::take(&mut o.cur_bytes);
        enc.batch_vals += vals.len();
        enc.batch.push(Job {
            op,
            k,
            hist,
            vals,
            bytes,
        });
        if enc.batch.len() >= BATCH_JOBS || enc.batch_vals >= BATCH_VALS {
            self.flush();
        }
    }

    /// Hand the batch of closed intervals to the encoder thread (encoding it here when there is
    /// none) and collect what it has encoded.
    fn flush(&mut self) {
        let Some(enc) = self.encoder.as_mut() else {
            return;
        };
        if let Err(batch) = enc.flush() {
            // No encoder thread: encode here.
            for mut job in batch {
                let bytes = job.bytes;
                let h = job.settled();
                let slot = Slot {
                    hist: Hist::encode(h),
                    count: h.len(),
                    bytes,
                };
                merge_slot(&mut self.ops[job.op].closed, job.k, slot);
            }
        }
        self.drain(false);
    }

    /// Collect encoded intervals; with `all`, close everything and wait for the encoder.
    fn drain(&mut self, all: bool) {
        if all {
            for i in 0..self.ops.len() {
                self.close(i);
                let o = &mut self.ops[i];
                o.total_counts.add_into(&mut o.total);
            }
            if self.encoder.as_ref().is_some_and(|e| !e.batch.is_empty()) {
                self.flush();
            }
        }
        let Some(enc) = self.encoder.as_mut() else {
            return;
        };
        if all {
            enc.tx = None;
            if let Some(h) = enc.handle.take() {
                let _ = h.join();
            }
        }
        while let Ok((done, jobs)) = enc.done.try_recv() {
            for d in done {
                merge_slot(&mut self.ops[d.op].closed, d.k, d.slot);
            }
            if !all {
                enc.spare.extend(jobs.into_iter().map(|j| j.vals));
            }
        }
        if all {
            self.encoder = None;
        }
    }

    /// First and last interval index holding data (closes open intervals).
    pub(crate) fn key_range(&mut self) -> Option<(i64, i64)> {
        self.drain(true);
        let lo = self
            .ops
            .iter()
            .filter_map(|o| o.closed.keys().next())
            .min()?;
        let hi = self
            .ops
            .iter()
            .filter_map(|o| o.closed.keys().next_back())
            .max()?;
        Some((*lo, *hi))
    }

    /// Widen the observed span to include `t_ns` (a time of the source that carries no value,
    /// e.g. a trace line that is not a wait).
    #[inline]
    pub(crate) fn observe(&mut self, t_ns: i64) {
        self.span = Some(match self.span {
            Some((lo, hi)) => (lo.min(t_ns), hi.max(t_ns)),
            None => (t_ns, t_ns),
        });
    }

    /// Move every interval by `k` intervals (to align files on one time axis).
    pub(crate) fn shift(&mut self, k: i64) {
        if k == 0 {
            return;
        }
        let d = k.saturating_mul(self.interval_ns as i64);
        self.span = self
            .span
            .map(|(lo, hi)| (lo.saturating_add(d), hi.saturating_add(d)));
        self.drain(true);
        for o in &mut self.ops {
            let old = std::mem::take(&mut o.closed);
            o.closed = old.into_iter().map(|(i, s)| (i + k, s)).collect();
        }
    }

    #[inline]
    fn slot_of(&mut self, op: usize, t_ns: i64) -> &mut EventAcc {
        let (lo, hi) = self.ops[op].cur_span;
        if lo <= t_ns && t_ns < hi {
            // Still in the open interval: no division.
            return &mut self.ops[op];
        }
        let iv = self.interval_ns as i64;
        let k = t_ns.div_euclid(iv);
        if self.ops[op].cur != Some(k) {
            self.close(op);
            self.ops[op].cur = Some(k);
        }
        let o = &mut self.ops[op];
        o.cur_span = k
            .checked_mul(iv)
            .and_then(|lo| Some((lo, lo.checked_add(iv)?)))
            .unwrap_or((0, 0));
        o
    }

    /// Record one latency completing at `t_ns`.
    #[inline]
    pub(crate) fn record(&mut self, op: usize, t_ns: i64, lat_ns: u64, bytes: u64) {
        self.observe(t_ns);
        let o = self.slot_of(op, t_ns);
        if o.cur_vals.len() >= MAX_CUR_VALS {
            for &v in &o.cur_vals {
                record_interval(&mut o.cur_hist, v, 1);
            }
            o.cur_vals.clear();
        }
        o.cur_vals.push(lat_ns);
        o.total_counts.record(lat_ns);
        o.cur_bytes = o.cur_bytes.saturating_add(bytes);
        o.bytes = o.bytes.saturating_add(bytes);
    }

    /// Record a bucket of `count` values in `[lo_ns, hi_ns)` at `t_ns` (spread as [`spread`]).
    pub(crate) fn record_spread(
        &mut self,
        op: usize,
        t_ns: i64,
        lo_ns: u64,
        hi_ns: u64,
        count: u64,
    ) {
        self.observe(t_ns);
        let o = self.slot_of(op, t_ns);
        spread(&mut o.cur_hist, lo_ns, hi_ns, count);
        spread(&mut o.total, lo_ns, hi_ns, count);
        o.edges.insert(lo_ns);
        o.edges.insert(hi_ns);
    }

    /// Add another accumulator on the same time axis.
    pub(crate) fn merge(&mut self, mut other: Binned) -> Result<()> {
        if other.interval_ns != self.interval_ns {
            bail!("cannot merge series with different intervals");
        }
        self.drain(true);
        other.drain(true);
        if let Some((lo, hi)) = other.span {
            self.observe(lo);
            self.observe(hi);
        }
        for src in std::mem::take(&mut other.ops) {
            let i = self.op(&src.name);
            let dst = &mut self.ops[i];
            dst.total
                .add(&src.total)
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            dst.bytes = dst.bytes.saturating_add(src.bytes);
            dst.edges.extend(src.edges);
            for (k, s) in src.closed {
                merge_slot(&mut dst.closed, k, s);
            }
        }
        Ok(())
    }

    /// Close every interval and build one [`OpResult`] per event on a shared interval grid
    /// (gaps become empty intervals). `keep` filters events by name. When the data spans more
    /// than [`MAX_INTERVALS`] intervals (a long trace, or a corrupt time far from the rest), the
    /// interval is widened by a whole factor so that the grid stays bounded, with a warning.
    pub(crate) fn finish(
        mut self,
        conv: BucketConvention,
        keep: &dyn Fn(&str) -> bool,
    ) -> Finished {
        self.drain(true);
        let mut kept: Vec<EventAcc> = std::mem::take(&mut self.ops)
            .into_iter()
            .filter(|o| !o.total.is_empty() && keep(&o.name))
            .collect();
        let range = |kept: &[EventAcc]| {
            let lo = kept
                .iter()
                .filter_map(|o| o.closed.keys().next().copied())
                .min();
            let hi = kept
                .iter()
                .filter_map(|o| o.closed.keys().next_back().copied())
                .max();
            lo.zip(hi)
        };
        let Some((mut lo, mut hi)) = range(&kept) else {
            // No values, but the source's own times (a trace of calls without waits) still
            // give the span it covers.
            let (start_ns, duration_s) = self
                .span
                .map_or((0, 0.0), |(a, b)| (a, b.saturating_sub(a) as f64 / 1e9));
            return Finished {
                ops: Vec::new(),
                start_ns,
                duration_s,
                interval_s: self.interval_ns as f64 / 1e9,
                warning: None,
            };
        };
        let mut interval_ns = self.interval_ns;
        let mut warning = None;
        if let Some((s_lo, s_hi)) = self.span {
            lo = lo.min(s_lo.div_euclid(interval_ns as i64));
            hi = hi.max(s_hi.div_euclid(interval_ns as i64));
        }
        let span = (hi as i128 - lo as i128 + 1) as u128;
        if span > MAX_INTERVALS as u128 {
            let f = span.div_ceil(MAX_INTERVALS as u128).min(i64::MAX as u128) as i64;
            for o in &mut kept {
                let old = std::mem::take(&mut o.closed);
                for (k, slot) in old {
                    merge_slot(&mut o.closed, k.div_euclid(f), slot);
                }
            }
            interval_ns = interval_ns.saturating_mul(f as u64).min(i64::MAX as u64);
            warning = Some(format!(
                "the data spans {span} intervals of {} s: interval widened to {} s to keep at \
                 most {MAX_INTERVALS} (check for times far from the rest)",
                self.interval_ns as f64 / 1e9,
                interval_ns as f64 / 1e9
            ));
            (lo, hi) = range(&kept).expect("still has data");
        }
        let iv_s = interval_ns as f64 / 1e9;
        let iv = interval_ns as i64;
        // The grid covers the observed span (which may reach past the intervals holding values:
        // a trace's last `tim` after its last wait), cut to the span at both ends.
        let (s_lo, s_hi) = self
            .span
            .unwrap_or((lo.saturating_mul(iv), hi.saturating_mul(iv)));
        lo = lo.min(s_lo.div_euclid(iv));
        hi = hi.max(s_hi.div_euclid(iv));
        // Groups of grid keys that become one interval: (first key, last key, start, end).
        let mut groups: Vec<(i64, i64, i64, i64)> = (lo..=hi)
            .map(|k| {
                let b0 = k.saturating_mul(iv).max(s_lo);
                let b1 = k.saturating_add(1).saturating_mul(iv).min(s_hi);
                (k, k, b0, b1.max(b0))
            })
            .collect();
        // A first or last interval shorter than half an interval joins its neighbour.
        if groups.len() > 1 && groups[0].3.saturating_sub(groups[0].2) < iv / 2 {
            let g = groups.remove(0);
            groups[0].0 = g.0;
            groups[0].2 = g.2;
        }
        let n = groups.len();
        if n > 1 && groups[n - 1].3.saturating_sub(groups[n - 1].2) < iv / 2 {
            let g = groups.pop().expect("n > 1");
            let last = groups.last_mut().expect("n > 1");
            last.1 = g.1;
            last.3 = g.3;
        }
        let empty = Hist::encode(&new_histogram());
        let mut ops = Vec::new();
        for mut o in kept {
            let mut ivs = Vec::with_capacity(groups.len());
            for &(k0, k1, b0, b1) in &groups {
                for k in k0..k1 {
                    if let Some(s) = o.closed.remove(&k) {
                        merge_slot(&mut o.closed, k1, s);
                    }
                }
                let (hist, count, bytes) = match o.closed.remove(&k1) {
                    Some(s) => (s.hist, s.count, s.bytes),
                    None => (empty.clone(), 0, 0),
                };
                ivs.push(Interval {
                    // i128: times from a hostile file may lie at both ends of i64.
                    start_s: (b0 as i128 - s_lo as i128) as f64 / 1e9,
                    duration_s: (b1 as i128 - b0 as i128) as f64 / 1e9,
                    count,
                    bytes,
                    hist,
                });
            }
            let mut r = OpResult::new(&o.name, &o.total, o.bytes, ivs);
            r.bucket_convention = conv;
            r.bucket_edges_ns = o.edges.into_iter().collect();
            ops.push(r);
        }
        Finished {
            ops,
            start_ns: s_lo,
            duration_s: s_hi.saturating_sub(s_lo) as f64 / 1e9,
            interval_s: iv_s,
            warning,
        }
    }
}

/// Most intervals a [`Binned`] series keeps: two days of 1 s intervals, so that a day-long
/// source keeps its 1 s intervals (display columns merge them exactly, whatever their number);
/// beyond, the interval is widened (with a warning).
pub const MAX_INTERVALS: i64 = 172_800;

/// What [`Binned::finish`] returns.
pub(crate) struct Finished {
    pub ops: Vec<OpResult>,
    /// Start of the observed span on the time axis (ns).
    pub(crate) start_ns: i64,
    /// The observed span (s): earliest to latest time, whatever the interval.
    pub duration_s: f64,
    /// Interval length actually used (s).
    pub interval_s: f64,
    /// Set when the interval had to be widened.
    pub warning: Option<String>,
}

/// Format a Unix-epoch time in ns as RFC 3339 (UTC), or "" when it is not plausibly absolute.
pub(crate) fn rfc3339_ns(t_ns: i64) -> String {
    // Plausible absolute times: 1990..2100.
    if !(631_152_000_000_000_000..4_102_444_800_000_000_000).contains(&t_ns) {
        return String::new();
    }
    let secs = t_ns.div_euclid(1_000_000_000);
    let nanos = t_ns.rem_euclid(1_000_000_000) as u32;
    match chrono::DateTime::from_timestamp(secs, nanos) {
        Some(d) => d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        None => String::new(),
    }
}

/// `(start_s, duration_s, histogram per op)` of the snapshot interval being filled.
type SnapshotInterval = (f64, f64, Vec<Option<Histogram<u64>>>);

/// A closed snapshot interval: `(start_s, duration_s, per-op (encoding, count))`.
type ClosedInterval = (f64, f64, Vec<Option<(Hist, u64)>>);

/// Most distinct histograms (ops: bpftrace map keys, bcc sections, wait events, hlog tags) one
/// series holds. Each keeps a full-range total (about 300 KB), so a file of a few thousand
/// one-line keys would otherwise take gigabytes; real tools print far fewer.
pub const MAX_SERIES_OPS: usize = 256;

/// Build a run from per-snapshot histograms: `series[i]` is `(start_s, duration_s, per-op
/// histogram)` with `start_s` relative to the first snapshot. Only the interval being filled
/// is held as histograms; each closed interval is kept encoded (its size follows its counts),
/// so memory grows with what the input holds, not with its number of intervals.
pub(crate) struct SnapshotSeries {
    names: Vec<String>,
    index: HashMap<String, usize>,
    /// Closed intervals: `(start_s, duration_s, per-op (encoding, count))`.
    closed: Vec<ClosedInterval>,
    cur: Option<SnapshotInterval>,
    totals: Vec<Histogram<u64>>,
    /// Edges of the source buckets spread into each op (see `OpResult::bucket_edges_ns`).
    edges: Vec<std::collections::BTreeSet<u64>>,
    enc: HistEncoder,
}

impl Default for SnapshotSeries {
    fn default() -> Self {
        SnapshotSeries::new()
    }
}

impl SnapshotSeries {
    /// An empty series.
    pub(crate) fn new() -> SnapshotSeries {
        SnapshotSeries {
            names: Vec::new(),
            index: HashMap::new(),
            closed: Vec::new(),
            cur: None,
            totals: Vec::new(),
            edges: Vec::new(),
            enc: HistEncoder::new(),
        }
    }

    /// Index of an op, created on first use; an error beyond [`MAX_SERIES_OPS`] ops.
    pub(crate) fn op(&mut self, name: &str) -> Result<usize> {
        if let Some(&i) = self.index.get(name) {
            return Ok(i);
        }
        if self.names.len() >= MAX_SERIES_OPS {
            bail!(
                "more than {MAX_SERIES_OPS} distinct histograms (the {}th is {:?}): iolens reads \
                 at most {MAX_SERIES_OPS} per series (each takes about 300 KB); is this the \
                 right --format?",
                MAX_SERIES_OPS + 1,
                truncate(name, 60)
            );
        }
        self.names.push(name.to_string());
        self.totals.push(new_histogram());
        self.edges.push(Default::default());
        self.index.insert(name.to_string(), self.names.len() - 1);
        Ok(self.names.len() - 1)
    }

    /// Encode the interval being filled and keep it closed.
    fn close(&mut self) {
        if let Some((s, d, hs)) = self.cur.take() {
            let enc = &mut self.enc;
            let hs = hs
                .into_iter()
                .map(|h| h.map(|h| (enc.encode(&h), h.len())))
                .collect();
            self.closed.push((s, d, hs));
        }
    }

    /// Start a new interval.
    pub(crate) fn begin_interval(&mut self, start_s: f64, duration_s: f64) {
        self.close();
        self.cur = Some((start_s, duration_s, Vec::new()));
    }

    /// Number of intervals so far.
    pub(crate) fn len(&self) -> usize {
        self.closed.len() + usize::from(self.cur.is_some())
    }

    /// True when there are no intervals.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Add a bucket count to `op` in the current interval.
    pub(crate) fn add_spread(&mut self, op: usize, lo_ns: u64, hi_ns: u64, count: u64) {
        let Some(cur) = self.cur.as_mut() else {
            return;
        };
        if cur.2.len() <= op {
            cur.2.resize_with(op + 1, || None);
        }
        let h = cur.2[op].get_or_insert_with(new_histogram);
        spread(h, lo_ns, hi_ns, count);
        spread(&mut self.totals[op], lo_ns, hi_ns, count);
        self.edges[op].insert(lo_ns);
        self.edges[op].insert(hi_ns);
    }

    /// Add a whole histogram to `op` in the current interval.
    pub(crate) fn add_hist(&mut self, op: usize, src: &Histogram<u64>) {
        let Some(cur) = self.cur.as_mut() else {
            return;
        };
        if cur.2.len() <= op {
            cur.2.resize_with(op + 1, || None);
        }
        let h = cur.2[op].get_or_insert_with(new_histogram);
        let _ = h.add(src);
        let _ = self.totals[op].add(src);
    }

    /// Build the ops (every op gets every interval; empty where it had no data). Returns the
    /// ops and the covered duration.
    pub(crate) fn finish(mut self, conv: BucketConvention) -> (Vec<OpResult>, f64) {
        self.close();
        let empty = Hist::encode(&new_histogram());
        let duration = self
            .closed
            .iter()
            .map(|(s, d, _)| s + d)
            .fold(0.0, f64::max);
        let mut ops = Vec::new();
        for (i, name) in self.names.iter().enumerate() {
            let ivs = self
                .closed
                .iter_mut()
                .map(|(s, d, hs)| {
                    let (hist, count) = match hs.get_mut(i).and_then(|h| h.take()) {
                        Some(h) => h,
                        None => (empty.clone(), 0),
                    };
                    Interval {
                        start_s: *s,
                        duration_s: *d,
                        count,
                        bytes: 0,
                        hist,
                    }
                })
                .collect();
            let mut r = OpResult::new(name, &self.totals[i], 0, ivs);
            r.bucket_convention = conv;
            r.bucket_edges_ns = self.edges[i].iter().copied().collect();
            ops.push(r);
        }
        (ops, duration)
    }
}

/// A run for an ingested series.
pub(crate) fn ingest_run(
    name: &str,
    format: Format,
    ops: Vec<OpResult>,
    started: String,
    duration_s: f64,
    interval_s: f64,
    spec: serde_json::Value,
) -> RunResult {
    // The readers describe their series with fixed keys and types: a description that does
    // not fit is a bug, said in the run's warnings rather than written into the file.
    let (mut spec, warnings) = match crate::results::Spec::of(spec) {
        Ok(s) => (s, Vec::new()),
        Err(e) => (None, vec![format!("{e:#}")]),
    };
    if let Some(s) = &mut spec {
        s.source = Some(format_name(format).to_string());
    }
    RunResult {
        name: name.to_string(),
        phase: "ingest".into(),
        spec,
        started,
        duration_s,
        interval_s,
        ops,
        warnings,
        ..Default::default()
    }
}

/// Cut a string to `n` characters (with an ellipsis).
pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_keeps_counts_inside_bucket() {
        for (lo, hi, n) in [
            (4_000_000u64, 8_000_000u64, 1000u64),
            (0, 2000, 7),
            (5, 6, 3),
        ] {
            let mut h = new_histogram();
            spread(&mut h, lo, hi, n);
            assert_eq!(h.len(), n);
            for v in h.iter_recorded() {
                let x = v.value_iterated_to();
                assert!(h.lowest_equivalent(x) >= lo.max(1) && h.lowest_equivalent(x) < hi);
            }
        }
    }

    /// The interval histograms of a [`Binned`] say how many values they hold without being
    /// decoded, and that number is the one decoding finds.
    #[test]
    fn counted_intervals_hold_what_they_say() {
        let mut b = Binned::new(1_000_000_000);
        let op = b.op("x");
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut n = 0;
        for t in 0..3_000i64 {
            for _ in 0..(t % 7) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                b.record(op, t * 5_000_000, seed >> (seed % 64), 0);
                n += 1;
            }
        }
        let fin = b.finish(BucketConvention::Exact, &|_| true);
        let ivs = &fin.ops[0].intervals;
        assert!(ivs.len() > 10);
        let mut sum = 0;
        for iv in ivs {
            // The same histogram as read from a file (not counted: decoded to be checked).
            let decoded: Hist =
                serde_json::from_value(serde_json::Value::String(iv.hist.as_base64().into()))
                    .unwrap();
            assert_eq!(
                iv.hist.checked_len().unwrap(),
                decoded.checked_len().unwrap()
            );
            assert_eq!(iv.hist.checked_len().unwrap(), iv.count);
            sum += iv.count;
        }
        assert_eq!(sum, n);
    }

    #[test]
    fn bucket_conventions() {
        assert_eq!(bucket_range(8, BucketConvention::UpperBound), (4, 8));
        assert_eq!(bucket_range(1, BucketConvention::UpperBound), (0, 1));
        assert_eq!(
            bucket_range(4294967295, BucketConvention::UpperBound),
            (1 << 31, 1 << 32)
        );
        assert_eq!(bucket_range(4, BucketConvention::LowerBound), (4, 8));
        assert_eq!(bucket_range(0, BucketConvention::LowerBound), (0, 1));
    }

    #[test]
    fn binned_grid_and_merge() {
        let mut a = Binned::new(1_000_000_000);
        let r = a.op("read");
        a.record(r, 10_500_000_000, 1000, 8192);
        a.record(r, 12_100_000_000, 2000, 8192);
        a.record(r, 10_700_000_000, 3000, 8192); // back to an earlier interval
        let mut b = Binned::new(1_000_000_000);
        let w = b.op("write");
        b.record(w, 11_000_000_000, 5000, 0);
        let r2 = b.op("read");
        b.record(r2, 12_900_000_000, 4000, 0);
        a.merge(b).unwrap();
        let f = a.finish(BucketConvention::Exact, &|_| true);
        let ops = f.ops;
        // The observed span, 10.5 s to 12.9 s, not whole intervals.
        assert_eq!(f.start_ns, 10_500_000_000);
        assert!((f.duration_s - 2.4).abs() < 1e-12);
        let read = ops.iter().find(|o| o.op == "read").unwrap();
        let counts: Vec<u64> = read.intervals.iter().map(|i| i.count).collect();
        assert_eq!(counts, vec![2, 0, 2]);
        let lens: Vec<f64> = read.intervals.iter().map(|i| i.duration_s).collect();
        let starts: Vec<f64> = read.intervals.iter().map(|i| i.start_s).collect();
        assert!(lens
            .iter()
            .zip([0.5, 1.0, 0.9])
            .all(|(a, b)| (a - b).abs() < 1e-12));
        assert!(starts
            .iter()
            .zip([0.0, 0.5, 1.5])
            .all(|(a, b)| (a - b).abs() < 1e-12));
        assert_eq!(read.count, 4);
        assert_eq!(read.bytes, 3 * 8192);
        let write = ops.iter().find(|o| o.op == "write").unwrap();
        assert_eq!(
            write.intervals.iter().map(|i| i.count).collect::<Vec<_>>(),
            vec![0, 1, 0]
        );
    }

    #[test]
    fn span_is_the_same_at_every_interval_and_slivers_fold() {
        for iv in [1_000_000_000u64, 10_000_000_000, 60_000_000_000] {
            let mut a = Binned::new(iv);
            let r = a.op("read");
            for i in 0..=1778u64 {
                a.record(r, 5_000_000_000 + (i * 100_000_000) as i64, 1000, 0);
            }
            a.observe(183_000_000_000); // a time with no value, after the last one
            let f = a.finish(BucketConvention::Exact, &|_| true);
            assert_eq!(f.start_ns, 5_000_000_000);
            assert!((f.duration_s - 178.0).abs() < 1e-9, "{}", f.duration_s);
            let ivs = &f.ops[0].intervals;
            let total: f64 = ivs.iter().map(|i| i.duration_s).sum();
            assert!((total - 178.0).abs() < 1e-9);
            assert_eq!(ivs.iter().map(|i| i.count).sum::<u64>(), 1779);
            let half = iv as f64 / 2e9;
            assert!(ivs
                .iter()
                .all(|i| i.duration_s >= half && i.duration_s < 3.0 * half));
        }
        // One value: a span of zero, one interval of zero length.
        let mut a = Binned::new(1_000_000_000);
        let r = a.op("read");
        a.record(r, 7_300_000_000, 0, 0);
        let f = a.finish(BucketConvention::Exact, &|_| true);
        assert_eq!((f.duration_s, f.ops[0].intervals.len()), (0.0, 1));
        assert_eq!(f.ops[0].summary.max_ns, 0, "a zero value stays zero");
    }

    #[test]
    fn far_apart_times_widen_the_interval() {
        let mut a = Binned::new(1_000_000_000);
        let r = a.op("read");
        a.record(r, 0, 1000, 0);
        a.record(r, 500_000 * 1_000_000_000, 1000, 0); // 500,000 s later
        let f = a.finish(BucketConvention::Exact, &|_| true);
        assert!(f.warning.is_some());
        assert_eq!(f.interval_s, 3.0);
        assert!(f.ops[0].intervals.len() as i64 <= MAX_INTERVALS);
        assert_eq!(f.ops[0].count, 2);
    }

    #[test]
    fn a_day_of_one_second_intervals_keeps_them() {
        let mut a = Binned::new(1_000_000_000);
        let r = a.op("read");
        for s in 0..86_400i64 {
            a.record(r, s * 1_000_000_000 + 500_000_000, 1000 + s as u64, 0);
        }
        let f = a.finish(BucketConvention::Exact, &|_| true);
        assert!(f.warning.is_none(), "{:?}", f.warning);
        assert_eq!(f.interval_s, 1.0);
        assert_eq!(f.ops[0].intervals.len(), 86_400);
        assert!(f.ops[0].intervals.iter().all(|iv| iv.count == 1));
    }

    #[test]
    fn gzip_detected_by_magic() {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let mut e = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b"a\r\nbb\nccc").unwrap();
        let gz = e.finish().unwrap();
        let mut r = LineReader::from_reader(Box::new(std::io::Cursor::new(gz)), "x").unwrap();
        assert!(r.gzip);
        let mut got = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            got.push(String::from_utf8(l.to_vec()).unwrap());
        }
        assert_eq!(got, vec!["a", "bb", "ccc"]);
    }

    #[test]
    fn byte_numbers() {
        assert_eq!(parse_u64(b"4294967295"), Some(4294967295));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_u64(b"12a"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"99999999999999999999999"), None);
    }
}
