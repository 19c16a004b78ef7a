//! Two-column `time latency` text: the input of Brendan Gregg's `trace2heatmap.pl`.
//!
//! One event per line, columns separated by spaces, tabs or a comma; `#` starts a comment.
//! As in trace2heatmap.pl both columns default to microseconds (`--time-unit`, `--unit`). The
//! time is the event's completion time; latencies are exact and binned by time into
//! `--interval`. One run, one op (`latency`).

use anyhow::Result;
use serde_json::json;

use super::{ingest_run, parse_f64, rfc3339_ns, Binned, Format, IngestOptions, LineReader, Unit};
use crate::results::{BucketConvention, RunResult};

/// Read time/latency pairs.
pub fn read(r: &mut LineReader, args: &IngestOptions) -> Result<Vec<RunResult>> {
    let t_ns = args.time_unit.unwrap_or(Unit::Us).ns();
    let l_ns = args.unit.unwrap_or(Unit::Us).ns();
    let interval_ns = (args.interval.as_nanos() as u64).max(1);
    let mut b = Binned::new(interval_ns);
    let op = b.op("latency");
    while let Some(line) = r.next_line()? {
        let t = line.trim_ascii();
        if t.is_empty() {
            r.ignored("blank");
            continue;
        }
        if t.starts_with(b"#") {
            r.ignored("comment");
            continue;
        }
        let mut f = t
            .split(|&c| c == b' ' || c == b'\t' || c == b',')
            .filter(|s| !s.is_empty());
        let (Some(a), Some(l), None) = (f.next(), f.next(), f.next()) else {
            r.unparsed("expected two columns: time latency");
            continue;
        };
        let (Some(a), Some(l)) = (parse_f64(a), parse_f64(l)) else {
            r.unparsed("time or latency is not a number");
            continue;
        };
        if l < 0.0 {
            r.unparsed("negative latency");
            continue;
        }
        b.record(op, (a * t_ns) as i64, (l * l_ns).round() as u64, 0);
        r.parsed();
    }
    let f = b.finish(BucketConvention::Exact, &|_| true);
    if f.ops.is_empty() {
        return Ok(Vec::new());
    }
    let mut run = ingest_run(
        "time-latency",
        Format::TimeLatency,
        f.ops,
        rfc3339_ns(f.start_ns),
        f.duration_s,
        f.interval_s,
        json!({"time_unit": args.time_unit.unwrap_or(Unit::Us).name(),
               "latency_unit": args.unit.unwrap_or(Unit::Us).name()}),
    );
    run.warnings.extend(f.warning);
    Ok(vec![run])
}
