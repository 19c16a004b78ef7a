//! Evidence turned into the ordered stream of I/Os `iolens replay` issues: for each recorded
//! I/O its issue time, session, file, offset, size and direction, and the latency it had when
//! it was recorded.
//!
//! - Oracle 10046 traces: every wait that names a file and a first block (`db file sequential
//!   read`, `db file scattered read`, `direct path read`/`write` and the like: `file#`/`block#`
//!   /`blocks`, `file number`/`first dba`/`block cnt`, 9i `p1`/`p2`/`p3`). The wait began at
//!   `tim − ela`; offset = block × block size, size = blocks × block size (a trace does not hold
//!   `db_block_size`: `--block-size`, default 8 KiB). `read by other session` (another session's
//!   read) and waits without a block (`db file parallel read`) are not this session's single
//!   I/O and are counted as skipped. A session is the trace's session (files that continue
//!   one another join it). Files of one instance share its `tim` clock, which orders them
//!   exactly; files of several instances are placed by their wall-clock anchors.
//! - bcc biosnoop: each row is a block request that completed at TIME after LAT: issued at
//!   TIME − LAT; the file is the disk, the offset SECTOR × 512, the session the process id.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use anyhow::{bail, Result};

use super::oracle_trace::{parse_trace, ParseOptions};
use super::sniff::{sniff, Guess};
use super::{bcc, source_file, Format, LineReader};
use crate::results::evidence::SourceFile;

/// Default database block size for traces (`db_block_size` is not in a 10046 trace).
pub const DEFAULT_TRACE_BLOCK: u64 = 8192;

/// What the sources are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFormat {
    /// Decided from each file's first lines.
    Auto,
    Oracle10046,
    Biosnoop,
}

impl StreamFormat {
    pub fn name(self) -> &'static str {
        match self {
            StreamFormat::Auto => "auto",
            StreamFormat::Oracle10046 => "oracle-10046",
            StreamFormat::Biosnoop => "biosnoop",
        }
    }
}

/// What to read.
#[derive(Debug, Clone)]
pub struct StreamOptions {
    pub files: Vec<PathBuf>,
    pub format: StreamFormat,
    /// Bytes per block of a trace's block numbers (`None`: [`DEFAULT_TRACE_BLOCK`]).
    pub block_size: Option<u64>,
}

/// One recorded I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRecord {
    /// Issue time, ns from the stream's first issue.
    pub t_ns: u64,
    /// The latency it had when recorded (ns).
    pub latency_ns: u64,
    /// Index into [`IoStream::sessions`].
    pub session: u32,
    /// Index into [`IoStream::files`].
    pub file: u32,
    /// Byte offset in its file.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
    pub write: bool,
    /// Index into [`IoStream::events`] (the trace's event, or `read`/`write`).
    pub event: u32,
}

/// The recorded I/Os of all sources, ordered by issue time (ties keep source order, so each
/// session's own order is kept).
#[derive(Clone, Debug, Default)]
pub struct IoStream {
    /// The format read (`oracle-10046`, `biosnoop`).
    pub source: String,
    /// Session names (`SESSION ID`, `pid 1234`).
    pub sessions: Vec<String>,
    /// File names as the source names them (`file#25`, `disk vda`).
    pub files: Vec<String>,
    /// Event or operation names.
    pub events: Vec<String>,
    pub records: Vec<IoRecord>,
    /// Bytes per block the offsets were computed with (traces), or 512 (sectors).
    pub block_size: u64,
    /// Recorded waits or rows not replayable, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// How each input line was used.
    pub inputs: Vec<SourceFile>,
}

impl IoStream {
    /// Recorded span: first issue to last completion (ns).
    pub fn span_ns(&self) -> u64 {
        self.records
            .iter()
            .map(|r| r.t_ns.saturating_add(r.latency_ns))
            .max()
            .unwrap_or(0)
    }

    /// For each file, the end of the highest byte any record touches.
    pub fn file_extents(&self) -> Vec<u64> {
        let mut ext = vec![0u64; self.files.len()];
        for r in &self.records {
            let e = &mut ext[r.file as usize];
            *e = (*e).max(r.offset.saturating_add(r.size));
        }
        ext
    }

    fn index(names: &mut Vec<String>, map: &mut HashMap<String, u32>, name: &str) -> u32 {
        if let Some(&i) = map.get(name) {
            return i;
        }
        let i = names.len() as u32;
        names.push(name.to_string());
        map.insert(name.to_string(), i);
        i
    }
}

/// Raw record before the stream's time origin is known.
struct Raw {
    t_ns: i64,
    rec: IoRecord,
}

/// Read the sources into one stream.
pub fn read_stream(opts: &StreamOptions) -> Result<IoStream> {
    if opts.files.is_empty() {
        bail!("no source files given");
    }
    let mut format = opts.format;
    if format == StreamFormat::Auto {
        format = match sniff(&opts.files[0]) {
            Some(Guess::OracleTrace) => StreamFormat::Oracle10046,
            Some(Guess::Ingest(Format::Biosnoop)) => StreamFormat::Biosnoop,
            _ => bail!(
                "{}: not recognised as an Oracle 10046 trace or biosnoop output; name the format \
                 with --format",
                opts.files[0].display()
            ),
        };
    }
    let bs = opts.block_size.unwrap_or(DEFAULT_TRACE_BLOCK);
    if bs == 0 || bs > 1 << 30 {
        bail!("--block-size must be between 1 byte and 1 GiB");
    }
    let mut s = IoStream {
        source: format.name().to_string(),
        block_size: if format == StreamFormat::Biosnoop {
            512
        } else {
            bs
        },
        ..IoStream::default()
    };
    let mut raw = match format {
        StreamFormat::Oracle10046 => read_traces(opts, bs, &mut s)?,
        _ => read_biosnoops(opts, &mut s)?,
    };
    if raw.is_empty() {
        bail!(
            "{}: no replayable I/O (no wait with a file and a block, no block request); \
             skipped: {:?}",
            opts.files
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            s.skipped
        );
    }
    // Stable: records of equal time keep their order within each source.
    raw.sort_by_key(|r| r.t_ns);
    let t0 = raw[0].t_ns;
    s.records = raw
        .into_iter()
        .map(|r| IoRecord {
            t_ns: (r.t_ns - t0) as u64,
            ..r.rec
        })
        .collect();
    Ok(s)
}

fn read_traces(opts: &StreamOptions, bs: u64, s: &mut IoStream) -> Result<Vec<Raw>> {
    let popts = ParseOptions {
        top: 0,
        keep_io: true,
        ..ParseOptions::default()
    };
    let mut traces = Vec::new();
    for p in &opts.files {
        let mut r = LineReader::open(p)?;
        let f = parse_trace(&mut r, &popts)?;
        if f.stats.parsed == 0 {
            bail!(
                "{}: no Oracle 10046 trace lines (WAIT, PARSE, EXEC, FETCH …)",
                p.display()
            );
        }
        s.inputs.push(source_file(&f.stats, &f.path, f.gzip));
        traces.push(f);
    }
    // One instance (or none named): the shared tim clock; else the wall-clock anchors.
    let instances: std::collections::HashSet<_> =
        traces.iter().filter_map(|f| f.instance.clone()).collect();
    let by_wall = instances.len() > 1;
    if by_wall && traces.iter().any(|f| f.offset_us.is_none()) {
        bail!(
            "the traces come from several instances and not every one has a wall-clock \
             timestamp line (*** yyyy-mm-dd …) to place it by"
        );
    }
    let (mut smap, mut fmap, mut emap) = (HashMap::new(), HashMap::new(), HashMap::new());
    let mut raw = Vec::new();
    for f in &traces {
        let session = IoStream::index(&mut s.sessions, &mut smap, &f.session);
        let shift = if by_wall { f.offset_us.unwrap_or(0) } else { 0 };
        for r in &f.io_records {
            let name = &f.events[r.event as usize].name;
            if name == "read by other session" {
                *s.skipped
                    .entry(format!("{name} (another session's read)"))
                    .or_default() += 1;
                continue;
            }
            let file = IoStream::index(&mut s.files, &mut fmap, &format!("file#{}", r.file));
            let event = IoStream::index(&mut s.events, &mut emap, name);
            let start_us = r.tim.saturating_sub(r.ela_us as i64).saturating_add(shift);
            raw.push(Raw {
                t_ns: start_us.saturating_mul(1000),
                rec: IoRecord {
                    t_ns: 0,
                    latency_ns: r.ela_us.saturating_mul(1000),
                    session,
                    file,
                    offset: r.block.saturating_mul(bs),
                    size: r.blocks.max(1).saturating_mul(bs),
                    write: name.contains("write"),
                    event,
                },
            });
        }
        for e in &f.events {
            if e.name == "db file parallel read" {
                *s.skipped
                    .entry("db file parallel read (no block numbers in the trace)".into())
                    .or_default() += e.count;
            }
        }
    }
    Ok(raw)
}

fn read_biosnoops(opts: &StreamOptions, s: &mut IoStream) -> Result<Vec<Raw>> {
    let (mut smap, mut fmap, mut emap) = (HashMap::new(), HashMap::new(), HashMap::new());
    let mut raw = Vec::new();
    for p in &opts.files {
        let mut r = LineReader::open(p)?;
        let mut skipped = 0u64;
        bcc::biosnoop_rows(&mut r, |row| {
            let (write, op) = match row.dir {
                b'R' => (false, "read"),
                b'W' => (true, "write"),
                _ => {
                    skipped += 1;
                    return;
                }
            };
            let (Some(sector), true) = (row.sector, row.bytes > 0) else {
                skipped += 1;
                return;
            };
            let lat_ns = (row.lat_ms * 1e6).round().max(0.0) as u64;
            let session = IoStream::index(
                &mut s.sessions,
                &mut smap,
                &format!("pid {}", String::from_utf8_lossy(row.pid)),
            );
            let file = IoStream::index(
                &mut s.files,
                &mut fmap,
                &format!("disk {}", String::from_utf8_lossy(row.disk)),
            );
            let event = IoStream::index(&mut s.events, &mut emap, op);
            raw.push(Raw {
                t_ns: (row.time_s * 1e9).round() as i64 - lat_ns as i64,
                rec: IoRecord {
                    t_ns: 0,
                    latency_ns: lat_ns,
                    session,
                    file,
                    offset: sector.saturating_mul(512),
                    size: row.bytes,
                    write,
                    event,
                },
            });
        })?;
        if skipped > 0 {
            *s.skipped
                .entry("biosnoop rows neither R nor W, or without a sector or bytes".into())
                .or_default() += skipped;
        }
        s.inputs.push(r.file_stats(p));
        if r.stats.parsed == 0 {
            bail!("{}: no biosnoop rows", p.display());
        }
    }
    Ok(raw)
}

/// Latencies of one side of a replay (recorded or replayed) binned into per-interval
/// histograms per event, by completion time.
pub struct Series(super::Binned);

impl Series {
    pub fn new(interval_ns: u64) -> Series {
        Series(super::Binned::new(interval_ns))
    }

    /// One I/O of `event`, completed at `t_ns` (from the start) after `lat_ns`.
    pub fn record(&mut self, event: &str, t_ns: u64, lat_ns: u64, bytes: u64) {
        let i = self.0.op(event);
        self.0
            .record(i, t_ns.min(i64::MAX as u64) as i64, lat_ns, bytes);
    }

    /// Every event's totals and intervals, the span (s) and the interval used (s).
    pub fn finish(self) -> (Vec<crate::results::OpResult>, f64, f64, Option<String>) {
        let f = self
            .0
            .finish(crate::results::BucketConvention::Exact, &|_| true);
        (f.ops, f.duration_s, f.interval_s, f.warning)
    }
}
