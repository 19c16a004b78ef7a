//! The plain-text summary printed at the end of `iolens run` (and for each calibration step
//! on request): per-op throughput and latency percentiles, CPU cost, run-queue delay, the
//! device's own view, block verification and its cost, corruption found, and warnings. Reads
//! only a [`RunResult`].

use std::fmt::Write as _;

use crate::results::RunResult;
use crate::units::{fmt_bytes, fmt_ns, fmt_rate};

/// Render the summary of one run as text.
pub fn run_summary(r: &RunResult) -> String {
    let mut s = String::new();
    let errors = r.verify.as_ref().map(|v| v.errors).unwrap_or(0);
    if errors > 0 || !r.corruption.is_empty() {
        let _ = writeln!(
            s,
            "!! DATA CORRUPTION DETECTED: {} corrupt 512-byte unit(s) — see below",
            errors.max(r.corruption.len() as u64)
        );
    }
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
        let (rate, mbs) = if r.rates_known() {
            (
                fmt_rate(o.count as f64 / r.duration_s),
                format!("{:.1}", o.bytes as f64 / r.duration_s / 1e6),
            )
        } else {
            ("unknown".to_string(), "unknown".to_string())
        };
        let _ = writeln!(
            s,
            "  {:<6} {:>10} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            o.op,
            o.count,
            rate,
            mbs,
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
    if !r.rates_known() {
        let _ = writeln!(s, "  IOPS, MB/s: {}", crate::results::UNKNOWN_RATE);
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
    if let Some(v) = &r.verify {
        if v.mode == "none" {
            let _ = writeln!(s, "  Verify: none — {}", v.note);
        } else {
            let mut line = format!(
                "  Verify: {}, {} B stamp units: {} reads checked ({} units)",
                v.mode, v.unit_bytes, v.reads_verified, v.units_verified
            );
            if v.reads_verified > 0 {
                let mean = r.op("read").map(|o| o.summary.mean_ns).unwrap_or(0.0);
                line += &format!(", {} per read to verify", fmt_ns(v.ns_per_read));
                if mean > 0.0 {
                    line += &format!(
                        " ({:.1} % of the mean read latency)",
                        v.ns_per_read / mean * 100.0
                    );
                }
            }
            if v.generation_checks > 0 {
                line += &format!(", {} with a known generation", v.generation_checks);
            }
            let _ = writeln!(s, "{line}");
        }
        if v.writes_stamped > 0 {
            let _ = writeln!(
                s,
                "  Stamping: {} writes stamped, {} per write{}",
                v.writes_stamped,
                fmt_ns(v.stamp_ns_per_write),
                if v.generation_slots > 0 {
                    format!("; generations tracked in {} slots", v.generation_slots)
                } else {
                    String::new()
                }
            );
        }
        if v.skipped_concurrent > 0 {
            let _ = writeln!(
                s,
                "  Verify: {} failed check(s) not counted: the run's own write to the block was in flight",
                v.skipped_concurrent
            );
        }
        if v.mode != "none" && v.reads_verified > 0 && v.units_verified == 0 {
            let _ = writeln!(
                s,
                "  WARNING: reads smaller than or misaligned with the 512-byte stamp units: nothing was verified"
            );
        }
    }
    if !r.corruption.is_empty() {
        let _ = writeln!(
            s,
            "  !! CORRUPTION ({} unit(s){}):",
            errors.max(r.corruption.len() as u64),
            if r.verify.as_ref().is_some_and(|v| v.stopped) {
                ", stopped at the first"
            } else {
                ""
            }
        );
        s += &crate::stamp::render_reports(&r.corruption, errors, 10);
    }
    for v in crate::analysis::run_verdicts(r) {
        let tag = if v.severity == crate::analysis::Severity::Warning {
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
