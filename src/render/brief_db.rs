//! The terminal renderer's brief mode for `iolens db run`: the closing summary of a database
//! run (see [`super::brief`] for the other commands).

use std::fmt::Write as _;

use super::TermStyle;
use crate::out::fit;
use crate::results::{Results, RunResult};
use crate::units::{fmt_ns, fmt_rate, sig3};

/// Counter value or 0.
fn ctr(r: &RunResult, k: &str) -> f64 {
    r.counters.get(k).copied().unwrap_or(0.0)
}

/// The closing summary of `iolens db run`: throughput, cache hit ratio, per-op latency, CPU, the
/// device's view and the wait profile, fitted to `style.width`.
pub(crate) fn db_summary(res: &Results, style: &TermStyle) -> String {
    let mut s = String::new();
    let Some(r) = res.runs.first() else {
        return s;
    };
    let engine = res.db.as_ref().map(|d| d.engine.name()).unwrap_or("db");
    let _ = writeln!(s, "== iolens db run ({engine}): {} ==", r.name);
    let spec = r.spec.clone().unwrap_or_default();
    let _ = writeln!(
        s,
        "  {:.1} s measured, {} sessions, update {}%, work unit {} rows",
        r.duration_s,
        spec.sessions.unwrap_or(0),
        spec.update_pct.unwrap_or(0.0),
        spec.work_unit.unwrap_or(0),
    );
    let _ = writeln!(
        s,
        "  operations  {}/s ({} selects, {} updates), statements {}/s, commits {}/s",
        fmt_rate(ctr(r, "ops_per_s")),
        ctr(r, "select_ops") as u64,
        ctr(r, "update_ops") as u64,
        fmt_rate(ctr(r, "statements") / r.duration_s.max(1e-9)),
        fmt_rate(ctr(r, "commits") / r.duration_s.max(1e-9)),
    );
    let _ = writeln!(
        s,
        "  logical reads {}/s, physical reads {}/s (hit ratio {:.1}%)",
        fmt_rate(ctr(r, "logical_reads_per_s")),
        fmt_rate(ctr(r, "physical_reads_per_s")),
        100.0 * (1.0 - ctr(r, "physical_reads") / ctr(r, "logical_reads").max(1.0)),
    );
    for run in &res.runs {
        for o in &run.ops {
            if o.count == 0 {
                continue;
            }
            let l = &o.summary;
            let _ = writeln!(
                s,
                "  {:<12} {:>9} {:>9}/s  p50 {:>9}  p99 {:>9}  p99.9 {:>9}  max {:>9}",
                o.op,
                o.count,
                fmt_rate(o.count as f64 / run.duration_s.max(1e-9)),
                fmt_ns(l.p50_ns as f64),
                fmt_ns(l.p99_ns as f64),
                fmt_ns(l.p999_ns as f64),
                fmt_ns(l.max_ns as f64),
            );
        }
    }
    if let Some(c) = &r.cpu {
        let _ = writeln!(
        s,
            "  CPU {} µs per physical read ({} user + {} sys s over the window{}), host busy {:.0}%, iowait {:.0}%",
            sig3(c.us_per_io),
            sig3(c.user_s),
            sig3(c.sys_s),
            if engine == "postgres" { ", server processes" } else { ", this process" },
            c.host_busy * 100.0,
            c.host_iowait * 100.0,
        );
        if c.runq_us_per_io > 0.0 {
            let _ = writeln!(
                s,
                "  run-queue delay {} µs per physical read",
                sig3(c.runq_us_per_io)
            );
        }
    }
    if let Some(d) = &r.device {
        let _ = writeln!(
            s,
            "  device {}: {} reads ({}/s, await {} µs), {} writes; database physical reads {}",
            d.device,
            d.reads,
            fmt_rate(d.reads as f64 / r.duration_s.max(1e-9)),
            sig3(d.read_await_us),
            d.writes,
            ctr(r, "physical_reads") as u64,
        );
        let served = ctr(r, "os_cache_served_reads");
        let _ = writeln!(
        s,
            "  about {} of the database's physical reads ({:.0}%) were served by the OS page cache, not the device",
            served as u64,
            ctr(r, "os_cache_served_share") * 100.0
        );
    }
    // Over several directories (tablespaces, database files): each one's own row.
    s.push_str(&super::targets::text(r, style));
    if let Some(w) = res.db.as_ref().and_then(|d| d.wait_profile.as_ref()) {
        let _ = writeln!(s, "  wait profile ({} samples):", w.samples);
        for e in w.events.iter().take(8) {
            let _ = writeln!(s, "    {:<40} {:>5.1}%", e.event, e.share * 100.0);
        }
    }
    for w in r.warnings.iter().chain(res.warnings.iter()) {
        let _ = writeln!(s, "  warning: {w}");
    }
    fit(&s, style.width)
}
