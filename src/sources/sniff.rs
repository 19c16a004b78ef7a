//! Guess which format a file holds from its first lines, to turn "nothing could be read" into a
//! hint at the right `--format` (or at `iolens trace` for an Oracle trace).
//!
//! Each format is recognised by lines only it writes: PyLatencyMap's `<begin record>`, the
//! biosnoop column header (`TIME(s) … LAT(ms)`), biolatency's `usecs : count distribution`
//! header and `lo -> hi : count` rows, bpftrace's `@map:` headers and `[lo, hi)` rows,
//! HdrHistogram's `#[StartTime:`/`HIST…` lines, fio's all-numeric comma rows (histogram logs have
//! hundreds of columns, latency logs four to six), `V$EVENT_HISTOGRAM` spools' `EVENT` header,
//! AWR/Statspack reports' `WORKLOAD REPOSITORY report for` / `STATSPACK report for` titles
//! (and the HTML report's `<title>AWR Report for DB:`; the RAC report's `WORKLOAD REPOSITORY REPORT
//! (RAC)` / `<title>AWR RAC Report for DB:`),
//! the 10046 trace's `WAIT #`/`PARSING IN CURSOR` lines, `perf script`'s indented
//! `address symbol (module)` frames and folded stacks' `a;b;c 42` lines.

use std::path::Path;

use super::{format_name, Format, LineReader};

/// How many lines are looked at.
const SNIFF_LINES: u64 = 400;

/// What the file looks like, when it is recognisable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guess {
    /// One of the `ingest` formats.
    Ingest(Format),
    /// An Oracle extended SQL trace (read with `iolens trace`).
    OracleTrace,
}

/// Guess the format of `path` (plain or gzip) from its first lines.
pub(crate) fn sniff(path: &Path) -> Option<Guess> {
    let mut r = LineReader::open(path).ok()?;
    let mut votes: Vec<(Guess, u32)> = Vec::new();
    let mut vote = |g: Guess, w: u32| match votes.iter_mut().find(|v| v.0 == g) {
        Some(v) => v.1 += w,
        None => votes.push((g, w)),
    };
    let mut n = 0u64;
    while let Ok(Some(line)) = r.next_line() {
        n += 1;
        if n > SNIFF_LINES {
            break;
        }
        let t = line.trim_ascii();
        if t.is_empty() {
            continue;
        }
        let has = |n: &[u8]| memchr::memmem::find(t, n).is_some();
        if t.starts_with(b"WORKLOAD REPOSITORY report for")
            || t.starts_with(b"WORKLOAD REPOSITORY REPORT (RAC)")
            || t.starts_with(b"STATSPACK report for")
            || (t.starts_with(b"Wait Event Histogram") && has(b"DB/Inst:"))
            || has(b"<title>AWR Report for DB:")
            || has(b"<title>AWR RAC Report for DB:")
        {
            vote(Guess::Ingest(Format::Awr), 20);
        } else if t == b"<begin record>" || t == b"<end record>" {
            vote(Guess::Ingest(Format::Pylatencymap), 10);
        } else if t.starts_with(b"TIME(s)") && has(b"LAT(ms)") {
            vote(Guess::Ingest(Format::Biosnoop), 10);
        } else if (t.starts_with(b"usecs") || t.starts_with(b"msecs") || t.starts_with(b"nsecs"))
            && has(b"distribution")
        {
            vote(Guess::Ingest(Format::Biolatency), 10);
        } else if has(b"->") && has(b":") && t[0].is_ascii_digit() {
            vote(Guess::Ingest(Format::Biolatency), 1);
        } else if t.starts_with(b"@") && t.ends_with(b":") {
            vote(Guess::Ingest(Format::Bpftrace), 5);
        } else if t.starts_with(b"[") && has(b")") && has(b"|") {
            vote(Guess::Ingest(Format::Bpftrace), 1);
        } else if t.starts_with(b"#[StartTime")
            || t.starts_with(b"#[Histogram log format")
            || t.starts_with(b"#[BaseTime")
            || has(b",HIST")
        {
            vote(Guess::Ingest(Format::Hlog), 10);
        } else if t.starts_with(b"WAIT #")
            || t.starts_with(b"PARSING IN CURSOR")
            || t.starts_with(b"*** SESSION ID")
        {
            vote(Guess::OracleTrace, 10);
        } else if line.first().is_some_and(|c| c.is_ascii_whitespace())
            && t.ends_with(b")")
            && has(b" (")
            && t.iter()
                .take_while(|c| !c.is_ascii_whitespace())
                .all(|c| c.is_ascii_hexdigit())
        {
            // A `perf script` frame: indented `address symbol (module)`.
            vote(Guess::Ingest(Format::PerfScript), 2);
        } else if has(b";")
            && t.rsplit(|&c| c == b' ')
                .next()
                .is_some_and(|w| super::parse_u64(w).is_some())
            && !has(b",")
        {
            vote(Guess::Ingest(Format::Folded), 2);
        } else if t.to_ascii_uppercase().windows(5).any(|w| w == b"EVENT") && has(b",") {
            vote(Guess::Ingest(Format::EventHistogram), 5);
        } else {
            let fields: Vec<&[u8]> = t.split(|&c| c == b',').map(|f| f.trim_ascii()).collect();
            let numeric = fields
                .iter()
                .all(|f| !f.is_empty() && f.iter().all(|c| c.is_ascii_digit() || *c == b'-'));
            if fields.len() > 1 && numeric {
                if fields.len() >= 3 + 58 {
                    vote(Guess::Ingest(Format::FioHist), 3);
                } else if (4..=6).contains(&fields.len()) {
                    vote(Guess::Ingest(Format::FioLog), 2);
                }
            } else {
                let cols: Vec<&[u8]> = t
                    .split(|c| c.is_ascii_whitespace())
                    .filter(|f| !f.is_empty())
                    .collect();
                if cols.len() == 2 && cols.iter().all(|c| super::parse_f64(c).is_some()) {
                    vote(Guess::Ingest(Format::TimeLatency), 1);
                }
            }
        }
    }
    votes.sort_by_key(|v| std::cmp::Reverse(v.1));
    votes.first().map(|v| v.0)
}

/// A hint for a file that gave nothing when read as `format`: the likely format, when another.
pub(crate) fn hint(path: &Path, format: Format) -> Option<String> {
    match sniff(path)? {
        Guess::Ingest(f) if f != format => Some(format!(
            "this looks like {} output: try --format {}",
            describe(f),
            format_name(f)
        )),
        Guess::OracleTrace => {
            Some("this looks like an Oracle 10046 trace: read it with `iolens trace`".into())
        }
        _ => None,
    }
}

fn describe(f: Format) -> &'static str {
    match f {
        Format::EventHistogram => "V$EVENT_HISTOGRAM snapshot",
        Format::Pylatencymap => "PyLatencyMap record",
        Format::Biolatency => "bcc biolatency-style histogram",
        Format::Bpftrace => "bpftrace map",
        Format::Biosnoop => "bcc biosnoop",
        Format::FioLog => "fio latency log",
        Format::FioHist => "fio histogram log",
        Format::Hlog => "HdrHistogram log",
        Format::TimeLatency => "time/latency pairs",
        Format::PerfScript => "perf script",
        Format::Folded => "folded stacks",
        Format::Awr => "Oracle AWR/Statspack report",
        Format::PgStatIo => "pg_stat_io snapshot",
        Format::PgStatDatabase => "pg_stat_database snapshot",
        Format::PgStatStatements => "pg_stat_statements snapshot",
        Format::MysqlFileIo => "MySQL per-file I/O snapshot",
        Format::Prometheus => "Prometheus exposition",
    }
}
