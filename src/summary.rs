//! The plain-text summary printed at the end of `iolens run` (and for each calibration step
//! on request): per-op throughput and latency percentiles, CPU cost, run-queue delay, the
//! device's own view, and warnings. Reads only a [`RunResult`].

use std::fmt::Write as _;

use crate::results::RunResult;
use crate::units::{fmt_bytes, fmt_ns, fmt_rate};

/// Render the summary of one run as text.
pub fn run_summary(r: &RunResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} — {:.1} s measured{}",
        r.name,
        r.duration_s,
        if r.interrupted { " (interrupted)" } else { "" }
    );
    let _ = writeln!(
        s,
        "  {:<6} {:>10} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "op", "count", "IOPS", "MB/s", "min", "p50", "p90", "p99", "p99.9", "p99.99", "max"
    );
    for o in &r.ops {
        let l = &o.summary;
        let rate = if r.duration_s > 0.0 {
            o.count as f64 / r.duration_s
        } else {
            0.0
        };
        let _ = writeln!(
            s,
            "  {:<6} {:>10} {:>8} {:>9.1} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            o.op,
            o.count,
            fmt_rate(rate),
            o.bytes as f64 / r.duration_s.max(1e-9) / 1e6,
            fmt_ns(l.min_ns as f64),
            fmt_ns(l.p50_ns as f64),
            fmt_ns(l.p90_ns as f64),
            fmt_ns(l.p99_ns as f64),
            fmt_ns(l.p999_ns as f64),
            fmt_ns(l.p9999_ns as f64),
            fmt_ns(l.max_ns as f64),
        );
        if o.errors > 0 {
            let _ = writeln!(s, "  {:<6} {} errors", o.op, o.errors);
        }
    }
    if let Some(c) = &r.cpu {
        let _ = writeln!(
            s,
            "  CPU: {:.2} µs per I/O (user {:.2}, sys {:.2}); host {:.0} % busy, {:.0} % iowait on {} CPUs; run-queue delay {:.2} µs per I/O",
            c.us_per_io,
            c.user_us_per_io,
            c.sys_us_per_io,
            c.host_busy * 100.0,
            c.host_iowait * 100.0,
            c.cpus,
            c.runq_us_per_io
        );
    }
    if let Some(d) = &r.device {
        let _ = writeln!(
            s,
            "  Device {}: {} IOPS, {:.1} MB/s ({} read, {} written), read await {}, write await {}, util {:.0} %, avg in flight {:.1}",
            d.device,
            fmt_rate(d.iops),
            d.mb_per_s,
            fmt_bytes(d.read_bytes),
            fmt_bytes(d.write_bytes),
            fmt_ns(d.read_await_us * 1e3),
            fmt_ns(d.write_await_us * 1e3),
            d.util * 100.0,
            d.avg_in_flight
        );
    }
    if let Some(pc) = &r.page_cache {
        let _ = writeln!(
            s,
            "  Page cache: {:.0} % of the {} working set resident before, {:.0} % after",
            pc.resident_before * 100.0,
            fmt_bytes(pc.working_set_bytes),
            pc.resident_after * 100.0
        );
    }
    for v in crate::analysis::run_verdicts(r) {
        let tag = if v.severity == "warning" {
            "WARNING"
        } else {
            "Verdict"
        };
        let _ = writeln!(s, "  {tag}: {}", v.message);
    }
    for w in &r.warnings {
        let _ = writeln!(s, "  WARNING: {w}");
    }
    s
}
