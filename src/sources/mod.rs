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
pub mod io_stream;
pub mod io_stream_model;
pub mod oracle_trace;
pub mod pairs;
pub mod perf_script;
pub mod pg_stats;
pub mod prometheus;
pub mod pylatencymap;
pub mod sniff;
pub mod sql_table;
pub mod watch_record;

mod buckets;
mod intervals;
mod lines;

pub(crate) use crate::histogram::spread_with;
pub(crate) use buckets::bucket_range;
pub use buckets::{spread, spread_bucket};
pub(crate) use intervals::{Binned, BucketRange, SnapshotSeries};
pub use intervals::{MAX_INTERVALS, MAX_SERIES_OPS};
pub(crate) use lines::{count_unparsed, parse_f64, parse_i64, parse_u64, rfc3339_ns, source_file};
pub use lines::{trim, truncate, LineReader, LineStats, UnparsedLine, MAX_LINE_BYTES};

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::histogram::{
    interval_histogram, new_histogram, record_interval, BucketText, Hist, HistEncoder, IndexCounts,
    SpreadWriter, TotalCounts,
};
use crate::results::evidence::{SourceFile, SourceInfo};
use crate::results::profile::{ProfileSource, StackProfile};
use crate::results::{BucketConvention, Interval, Kind, OpResult, Results, RunResult};

/// Number of sub-slots a bucket's count is spread over (see the module docs; part of the
/// spread-bucket encoding's definition, so it lives with the histogram).
pub use crate::histogram::SPREAD_SLOTS;
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
    /// Oracle AWR (text or HTML, also AWR RAC global) or Statspack report: wait event histograms
    /// over the snap window.
    Awr,
    /// PostgreSQL `pg_stat_io` snapshots (psql or CSV): means-only per-interval deltas.
    PgStatIo,
    /// PostgreSQL `pg_stat_database` snapshots: block reads and their time, means only.
    PgStatDatabase,
    /// PostgreSQL `pg_stat_statements` snapshots: per-statement block I/O time, means only.
    PgStatStatements,
    /// MySQL/MariaDB per-file I/O snapshots (`performance_schema.file_summary_by_instance`,
    /// `sys.io_global_by_file_by_latency`): counts, bytes, wait time per file, means only.
    MysqlFileIo,
    /// Prometheus text exposition: classic histograms (an `iolens watch --prometheus` scrape, a
    /// `--metrics` file, any exporter's).
    Prometheus,
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
            Format::Prometheus => prometheus::read(&mut reader, args),
            Format::PgStatIo
            | Format::PgStatDatabase
            | Format::PgStatStatements
            | Format::MysqlFileIo => {
                let view = match args.format {
                    Format::PgStatIo => pg_stats::StatsView::Io,
                    Format::PgStatDatabase => pg_stats::StatsView::Database,
                    Format::MysqlFileIo => pg_stats::StatsView::MysqlFileIo,
                    _ => pg_stats::StatsView::Statements,
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
        Format::MysqlFileIo => "mysql-file-io",
        Format::Prometheus => "prometheus",
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
