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
//! - blkparse text output (its default format, `maj,min cpu seq time pid action rwbs sector +
//!   sectors [comm]`): each `Q` (a request queued by a process) is one recorded I/O, issued at
//!   its time by its pid (the session), on the device `maj,min` (the file), at sector × 512;
//!   its latency runs to the `C` (completion) of the request holding its first sector (a `C`
//!   may come before its `Q` in the text: blkparse prints each CPU's events in turn, so the
//!   events are put in time order first). A `Q` with no completion in the capture, a `C`
//!   whose `Q` is not in it (queued before the capture began), discards, flushes without data
//!   and the other actions (G, I, D, M, P, U, A …) are counted or ignored, never replayed.
//! - fio iologs (`write_iolog`): version 2 (`filename action [offset length]`, with `wait`
//!   actions holding microseconds to wait, below 100 discarded as fio does) and version 3 (a leading timestamp on each line,
//!   in microseconds from the job's start: fio's writer stamps `utime_since_now`). Each log
//!   is one session (one fio job replays one log); `read` and `write` are replayed, `sync`,
//!   `datasync` and `trim` are counted as skipped. An iolog holds no latency: the recorded
//!   side has no latencies ([`IoStream::latency_known`] is false). Version 2 without `wait`
//!   lines holds no times either: its I/Os are all due at 0, issued back to back in order.

use std::collections::{BTreeMap, HashMap};

use anyhow::{bail, Result};

use super::oracle_trace::{parse_trace, ParseOptions};
use super::sniff::{sniff, Guess};
use super::{bcc, source_file, Format, LineReader};

use super::io_stream_model::Raw;
pub use super::io_stream_model::{
    IoRecord, IoStream, StreamFormat, StreamOptions, DEFAULT_TRACE_BLOCK,
};

/// Read the sources into one stream.
pub fn read_stream(opts: &StreamOptions) -> Result<IoStream> {
    if opts.files.is_empty() {
        bail!("no source files given");
    }
    let mut format = opts.format;
    if format == StreamFormat::Auto {
        format = match sniff_stream(&opts.files[0]) {
            Some(f) => f,
            None => match sniff(&opts.files[0]) {
                Some(Guess::OracleTrace) => StreamFormat::Oracle10046,
                Some(Guess::Ingest(Format::Biosnoop)) => StreamFormat::Biosnoop,
                _ => bail!(
                    "{}: not recognised as an Oracle 10046 trace, biosnoop or blkparse output, \
                     an fio iolog or an iolens watch record; name the format with --format",
                    opts.files[0].display()
                ),
            },
        };
    }
    let bs = opts.block_size.unwrap_or(DEFAULT_TRACE_BLOCK);
    if bs == 0 || bs > 1 << 30 {
        bail!("--block-size must be between 1 byte and 1 GiB");
    }
    let mut s = IoStream {
        source: format.name().to_string(),
        block_size: match format {
            StreamFormat::Oracle10046 => bs,
            StreamFormat::FioIolog | StreamFormat::WatchRecord => 1,
            _ => 512,
        },
        latency_known: format != StreamFormat::FioIolog,
        ..IoStream::default()
    };
    let mut raw = match format {
        StreamFormat::Oracle10046 => read_traces(opts, bs, &mut s)?,
        StreamFormat::Blkparse => read_blkparses(opts, &mut s)?,
        StreamFormat::FioIolog => read_iologs(opts, &mut s)?,
        StreamFormat::WatchRecord => super::watch_record::read_records(opts, &mut s)?,
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

/// The stream formats `sniff` does not know: an fio iolog's version line, or blkparse's
/// event lines.
fn sniff_stream(path: &std::path::Path) -> Option<StreamFormat> {
    let mut r = LineReader::open(path).ok()?;
    let mut n = 0;
    while let Ok(Some(line)) = r.next_line() {
        let t = line.trim_ascii();
        if t.is_empty() {
            continue;
        }
        if t == super::watch_record::HEADER.as_bytes() {
            return Some(StreamFormat::WatchRecord);
        }
        if t.starts_with(b"fio version 2 iolog") || t.starts_with(b"fio version 3 iolog") {
            return Some(StreamFormat::FioIolog);
        }
        if blkparse_event(t).is_some() {
            return Some(StreamFormat::Blkparse);
        }
        n += 1;
        if n >= 50 {
            break;
        }
    }
    None
}

/// One blkparse event line.
struct BlkEvent<'a> {
    dev: &'a [u8],
    time_ns: i64,
    pid: &'a [u8],
    action: u8,
    rwbs: &'a [u8],
    sector: u64,
    sectors: u64,
    comm: &'a [u8],
}

/// Parse blkparse's default event line: `maj,min cpu seq time pid action rwbs sector + n
/// [comm]` (actions without a sector, such as `P   N [comm]`, are not events here).
fn blkparse_event(t: &[u8]) -> Option<BlkEvent<'_>> {
    let f: Vec<&[u8]> = t
        .split(|c| c.is_ascii_whitespace())
        .filter(|s| !s.is_empty())
        .collect();
    if f.len() < 10 || f[8] != b"+" {
        return None;
    }
    let dev = f[0];
    let comma = dev.iter().position(|&c| c == b',')?;
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    if !(digits(&dev[..comma]) && digits(&dev[comma + 1..]) && digits(f[1]) && digits(f[2])) {
        return None;
    }
    let time: &str = std::str::from_utf8(f[3]).ok()?;
    let (secs, frac) = time.split_once('.')?;
    let secs: i64 = secs.parse().ok()?;
    let mut frac_ns: i64 = 0;
    for (i, c) in frac.bytes().take(9).enumerate() {
        if !c.is_ascii_digit() {
            return None;
        }
        frac_ns += (c - b'0') as i64 * 10i64.pow(8 - i as u32);
    }
    if f[5].len() != 1 || !f[5][0].is_ascii_alphabetic() || !digits(f[4]) {
        return None;
    }
    let num = |s: &[u8]| std::str::from_utf8(s).ok()?.parse::<u64>().ok();
    let comm = f.get(10).copied().unwrap_or(b"");
    Some(BlkEvent {
        dev,
        time_ns: secs.saturating_mul(1_000_000_000).saturating_add(frac_ns),
        pid: f[4],
        action: f[5][0],
        rwbs: f[6],
        sector: num(f[7])?,
        sectors: num(f[9])?,
        comm: comm
            .strip_prefix(b"[")
            .map(|c| c.strip_suffix(b"]").unwrap_or(c))
            .unwrap_or(comm),
    })
}

fn read_blkparses(opts: &StreamOptions, s: &mut IoStream) -> Result<Vec<Raw>> {
    // (time, order, Q or C, dev, sector, sectors, write, pid/comm)
    struct Ev {
        t: i64,
        q: bool,
        dev: u32,
        sector: u64,
        sectors: u64,
        write: bool,
        session: u32,
    }
    let (mut smap, mut fmap, mut emap) = (HashMap::new(), HashMap::new(), HashMap::new());
    let mut evs = Vec::new();
    let skip = |s: &mut IoStream, why: &str| *s.skipped.entry(why.to_string()).or_default() += 1;
    for p in &opts.files {
        let mut r = LineReader::open(p)?;
        while let Some(line) = r.next_line()? {
            let t = line.trim_ascii().to_vec();
            let t = t.as_slice();
            let Some(e) = blkparse_event(t) else {
                if t.is_empty() {
                    r.ignored("blank");
                } else {
                    r.unparsed("not a blkparse event with a sector");
                }
                continue;
            };
            r.parsed();
            if e.action != b'Q' && e.action != b'C' {
                continue;
            }
            let (write, read) = (e.rwbs.contains(&b'W'), e.rwbs.contains(&b'R'));
            if e.rwbs.contains(&b'D') {
                if e.action == b'Q' {
                    skip(s, "blkparse discards");
                }
                continue;
            }
            if !(write || read) || e.sectors == 0 {
                if e.action == b'Q' {
                    skip(s, "blkparse requests without data (flushes)");
                }
                continue;
            }
            let dev = IoStream::index(
                &mut s.files,
                &mut fmap,
                &format!("dev {}", String::from_utf8_lossy(e.dev)),
            );
            let session = if e.action == b'Q' {
                IoStream::index(
                    &mut s.sessions,
                    &mut smap,
                    &format!(
                        "pid {} ({})",
                        String::from_utf8_lossy(e.pid),
                        String::from_utf8_lossy(e.comm)
                    ),
                )
            } else {
                0
            };
            evs.push(Ev {
                t: e.time_ns,
                q: e.action == b'Q',
                dev,
                sector: e.sector,
                sectors: e.sectors,
                write,
                session,
            });
        }
        s.inputs.push(r.file_stats(p));
        if r.stats.parsed == 0 {
            bail!("{}: no blkparse event lines", p.display());
        }
    }
    // Time order (stable: a Q and its C at the same ns keep the text's order, Q first when
    // printed first).
    evs.sort_by_key(|e| e.t);
    // Queued, not yet completed: by (device, first sector), in queue order.
    let mut pending: BTreeMap<(u32, u64), Vec<usize>> = BTreeMap::new();
    let mut raw: Vec<Raw> = Vec::new();
    let mut done: Vec<bool> = Vec::new();
    for e in &evs {
        if e.q {
            let event = IoStream::index(
                &mut s.events,
                &mut emap,
                if e.write { "write" } else { "read" },
            );
            pending
                .entry((e.dev, e.sector))
                .or_default()
                .push(raw.len());
            raw.push(Raw {
                t_ns: e.t,
                rec: IoRecord {
                    t_ns: 0,
                    latency_ns: 0,
                    session: e.session,
                    file: e.dev,
                    offset: e.sector.saturating_mul(512),
                    size: e.sectors.saturating_mul(512),
                    write: e.write,
                    event,
                },
            });
            done.push(false);
            continue;
        }
        // A completion ends every queued request of its device whose first sector it covers
        // (requests merged into it complete with it).
        let end = e.sector.saturating_add(e.sectors);
        let keys: Vec<(u32, u64)> = pending
            .range((e.dev, e.sector)..(e.dev, end))
            .map(|(k, _)| *k)
            .collect();
        if keys.is_empty() {
            skip(
                s,
                "blkparse completions whose queue event is not in the capture",
            );
            continue;
        }
        for k in keys {
            for i in pending.remove(&k).unwrap_or_default() {
                raw[i].rec.latency_ns = e.t.saturating_sub(raw[i].t_ns).max(0) as u64;
                done[i] = true;
            }
        }
    }
    let mut kept = Vec::with_capacity(raw.len());
    for (r, d) in raw.into_iter().zip(done) {
        if d {
            kept.push(r);
        } else {
            skip(
                s,
                "blkparse queued requests without a completion in the capture",
            );
        }
    }
    Ok(kept)
}

fn read_iologs(opts: &StreamOptions, s: &mut IoStream) -> Result<Vec<Raw>> {
    let (mut fmap, mut emap) = (HashMap::new(), HashMap::new());
    let mut raw = Vec::new();
    for (k, p) in opts.files.iter().enumerate() {
        let mut r = LineReader::open(p)?;
        let session = s.sessions.len() as u32;
        s.sessions.push(format!(
            "iolog {}",
            p.file_name()
                .map_or(k.to_string(), |n| n.to_string_lossy().into_owned())
        ));
        let mut version = 0u8;
        // Version 2: the sum of the wait actions so far (µs).
        let mut waited_us: u64 = 0;
        while let Some(line) = r.next_line()? {
            let t = line.trim_ascii();
            if t.is_empty() {
                r.ignored("blank");
                continue;
            }
            let t = t.to_vec();
            let t = t.as_slice();
            if version == 0 {
                version = match t {
                    b"fio version 2 iolog" => 2,
                    b"fio version 3 iolog" => 3,
                    _ => bail!(
                        "{}: line {}: not an fio iolog of version 2 or 3 (its first line is \
                         `fio version N iolog`)",
                        p.display(),
                        r.line_no
                    ),
                };
                r.ignored("version line");
                continue;
            }
            let text = String::from_utf8_lossy(t).into_owned();
            let mut f: Vec<&str> = text.split_ascii_whitespace().collect();
            let mut at_us = waited_us;
            if version == 3 {
                let Some(ts) = f.first().and_then(|x| x.parse::<u64>().ok()) else {
                    r.unparsed("iolog v3 line without a timestamp");
                    continue;
                };
                at_us = ts;
                f.remove(0);
            }
            // The file name may hold spaces: the action is the word after it, found from the
            // right (2 words for file actions, 4 for I/O actions).
            let n = f.len();
            let (name, act, nums) = match n {
                2.. if matches!(f[n - 1], "add" | "open" | "close") => {
                    (f[..n - 1].join(" "), f[n - 1], None)
                }
                4.. => (f[..n - 3].join(" "), f[n - 3], Some((f[n - 2], f[n - 1]))),
                _ => {
                    r.unparsed("not an iolog line");
                    continue;
                }
            };
            let Some((off, len)) = nums else {
                r.ignored("file action");
                continue;
            };
            let (Ok(off), Ok(len)) = (off.parse::<u64>(), len.parse::<u64>()) else {
                r.unparsed("iolog line with a non-numeric offset or length");
                continue;
            };
            let write = match act {
                "read" => false,
                "write" => true,
                "wait" if version == 2 => {
                    // fio discards waits below 100 µs.
                    if off >= 100 {
                        waited_us = waited_us.saturating_add(off);
                    }
                    r.parsed();
                    continue;
                }
                "sync" | "datasync" | "trim" => {
                    *s.skipped
                        .entry(format!("fio iolog {act} actions"))
                        .or_default() += 1;
                    r.parsed();
                    continue;
                }
                _ => {
                    r.unparsed("unknown iolog action");
                    continue;
                }
            };
            r.parsed();
            if len == 0 {
                *s.skipped
                    .entry("fio iolog I/Os of 0 bytes".into())
                    .or_default() += 1;
                continue;
            }
            let file = IoStream::index(&mut s.files, &mut fmap, &name);
            let event = IoStream::index(
                &mut s.events,
                &mut emap,
                if write { "write" } else { "read" },
            );
            raw.push(Raw {
                t_ns: at_us.saturating_mul(1000).min(i64::MAX as u64) as i64,
                rec: IoRecord {
                    t_ns: 0,
                    latency_ns: 0,
                    session,
                    file,
                    offset: off,
                    size: len,
                    write,
                    event,
                },
            });
        }
        s.inputs.push(r.file_stats(p));
        if version == 0 {
            bail!("{}: empty, not an fio iolog", p.display());
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
