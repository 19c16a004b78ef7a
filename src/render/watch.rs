//! Text of `iolens watch`: the answer section (terminal and HTML, through
//! [`super::analysis::blocks`]), the per-process table and the live view's per-interval line.

use hdrhistogram::Histogram;

use super::table::Block;
use super::table::Table;
use crate::results::analysis::{Analysis, VerdictKind, WatchShares};
use crate::results::{PgWaitKind, Results};
use crate::units::{fmt_bytes, fmt_ns, sig3};

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// A verdict kind in two or three words, for the live view's lines.
pub(crate) fn verdict_short(k: Option<VerdictKind>) -> &'static str {
    match k {
        Some(VerdictKind::StorageBound) => "storage slow",
        Some(VerdictKind::HostQueueing) => "host queues",
        Some(VerdictKind::AboveBlockLayer) => "above block layer",
        Some(VerdictKind::CgroupLimit) => "cgroup limit",
        Some(VerdictKind::CpuBound) => "CPU saturated",
        Some(VerdictKind::NotIo) => "not I/O",
        Some(_) => "-",
        None => "idle",
    }
}

/// The live view's line for one interval.
/// `layer` names the histogram `hist` holds (the heatmap's layer).
pub(crate) fn interval_line(s: &WatchShares, layer: &str, hist: &Histogram<u64>) -> String {
    let lat = if hist.is_empty() {
        String::new()
    } else {
        format!(
            " ({layer} p50 {} p99 {})",
            fmt_ns(hist.value_at_quantile(0.5) as f64),
            fmt_ns(hist.value_at_quantile(0.99) as f64)
        )
    };
    format!(
        "{:>6}s {:>7} I/O syscalls{} time: CPU {} wait {} I/O {} off {}; in I/O: device {} \
         queue {} above {} CPU wait {} → {}",
        sig3(s.start_s + s.duration_s),
        s.syscalls,
        lat,
        pct(s.wall_cpu),
        pct(s.wall_cpu_wait),
        pct(s.wall_io),
        pct(s.wall_off_cpu),
        pct(s.device),
        pct(s.host_queue),
        pct(s.above_block),
        pct(s.runq),
        verdict_short(s.verdict)
    )
}

/// Rows of the per-interval table; longer watches are shown with intervals merged.
const MAX_ROWS: usize = 48;

/// The watch sections: where the time went (overall and per interval) and the processes.
pub fn blocks(r: &Results, an: &Analysis, out: &mut Vec<Block>) {
    let Some(w) = &an.watch else {
        return;
    };
    let mut t = Table::new(&[
        "interval",
        "thread time",
        "on CPU",
        "waiting for CPU",
        "in I/O",
        "off CPU",
        "syscalls",
        "I/O: device",
        "host queue",
        "above block",
        "CPU wait",
        "verdict",
    ]);
    let mut row = |label: String, s: &WatchShares| {
        t.row(vec![
            label,
            format!("{} s", sig3(s.wall_s)),
            pct(s.wall_cpu),
            pct(s.wall_cpu_wait),
            pct(s.wall_io),
            pct(s.wall_off_cpu),
            s.syscalls.to_string(),
            pct(s.device),
            pct(s.host_queue),
            pct(s.above_block),
            pct(s.runq),
            verdict_short(s.verdict).to_string(),
        ])
    };
    // A long watch's intervals are merged for the table, exactly (sums of whole intervals).
    let (per, merged) = match r.watch.as_ref() {
        Some(b) if b.intervals.len() > MAX_ROWS => {
            crate::analysis::watch::merged_shares(b, MAX_ROWS)
        }
        _ => (1, Vec::new()),
    };
    for s in if per > 1 { &merged } else { &w.intervals } {
        row(
            format!("{}–{} s", sig3(s.start_s), sig3(s.start_s + s.duration_s)),
            s,
        );
    }
    row("overall".into(), &w.overall);
    let mut lines: Vec<String> = w
        .verdicts
        .iter()
        .map(|v| format!("• {}", v.message))
        .collect();
    if lines.is_empty() {
        lines.push("The watched processes did no traced I/O.".into());
    }
    let o = &w.overall;
    if o.wall_s > 0.0 {
        lines.push(format!(
            "Shares of the watched threads' time ({} thread-s): on CPU, waiting for a CPU \
             (inside I/O syscalls or not), inside I/O syscalls, otherwise off CPU; they sum to \
             100 %. The I/O columns split the time inside I/O syscalls.",
            sig3(o.wall_s)
        ));
    }
    if o.bg_requests > 0 {
        lines.push(format!(
            "Background I/O: {} block requests of the watched processes that none of their \
             syscalls waited for (readahead, writeback, flushes), {} s in the device: nobody's \
             wait.",
            o.bg_requests,
            sig3(o.bg_device_s)
        ));
    }
    if per > 1 {
        lines.push(format!(
            "Each row sums {per} intervals (the results file keeps every one)."
        ));
    }
    let budget = r.watch.as_ref();
    if let Some(b) = budget {
        if !b.lost.is_empty() {
            lines.push(format!(
                "Events lost in the kernel: {}",
                b.lost
                    .iter()
                    .map(|(k, v)| format!("{v} ({k})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    out.push(Block {
        title: "Where the watched threads' time went".into(),
        lines,
        table: Some(t),
    });
    let Some(b) = budget else {
        return;
    };
    out.extend(pg_wait_blocks(r));
    if b.processes.is_empty() {
        return;
    }
    let mut t = Table::new(&["pid", "thread", "name", "syscall", "count", "bytes", "mean"]);
    for p in &b.processes {
        for (name, [count, bytes, ns]) in &p.syscalls {
            t.row(vec![
                p.pid.to_string(),
                p.tid.map(|t| t.to_string()).unwrap_or_else(|| "all".into()),
                p.comm.clone(),
                name.clone(),
                count.to_string(),
                fmt_bytes(*bytes),
                fmt_ns(*ns as f64 / (*count).max(1) as f64),
            ]);
        }
    }
    out.push(Block {
        title: "Watched processes: traced syscalls".into(),
        lines: vec![],
        table: Some(t),
    });
}

/// The wait-event tables of the watched PostgreSQL server processes, one per role: a Method R
/// profile (DB time = CPU + each wait + off CPU under no wait event), idle waits apart.
pub(crate) fn pg_wait_blocks(r: &Results) -> Vec<Block> {
    let Some(pg) = r.watch.as_ref().and_then(|b| b.pg.as_ref()) else {
        return Vec::new();
    };
    let hists: Vec<&crate::results::OpResult> = r
        .runs
        .iter()
        .filter(|run| run.name == crate::watch::PG_WAIT_RUN)
        .flat_map(|run| run.ops.iter())
        .collect();
    let pctl = |event: &str, q: f64| -> String {
        hists
            .iter()
            .find(|o| o.op == event)
            .and_then(|o| o.hist.decode().ok())
            .filter(|h| !h.is_empty())
            .map_or_else(|| "-".into(), |h| fmt_ns(h.value_at_quantile(q) as f64))
    };
    let versions = pg
        .majors
        .iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = Vec::new();
    for role in &pg.roles {
        let mut t = Table::new(&[
            "event",
            "time",
            "share of DB time",
            "count",
            "mean",
            "p50 (all roles)",
            "p99 (all roles)",
            "I/O syscalls",
            "I/O syscall time",
        ]);
        for row in &role.rows {
            let name = match row.kind {
                PgWaitKind::Cpu => "CPU".to_string(),
                PgWaitKind::Unnamed => "off CPU, no wait event".to_string(),
                PgWaitKind::Idle => format!("{} (idle)", row.event),
                PgWaitKind::Wait => row.event.clone(),
            };
            let named = row.kind == PgWaitKind::Wait || row.kind == PgWaitKind::Idle;
            t.row(vec![
                name,
                fmt_ns(row.time_s * 1e9),
                row.share_of_db.map_or_else(|| "-".into(), pct),
                row.count.to_string(),
                fmt_ns(row.time_s * 1e9 / row.count.max(1) as f64),
                if named {
                    pctl(&row.event, 0.5)
                } else {
                    "-".into()
                },
                if named {
                    pctl(&row.event, 0.99)
                } else {
                    "-".into()
                },
                row.syscalls.to_string(),
                fmt_ns(row.syscall_s * 1e9),
            ]);
        }
        let mut lines = vec![format!(
            "{} process(es); DB time {} thread-s (CPU, waits, and off CPU under no wait event), \
             idle {} thread-s (Client:ClientRead, Activity:*: waiting for work, not DB time). \
             Each off-CPU span carries the wait event PostgreSQL {} published as it began, \
             read from the process at every switch-out, not sampled.",
            role.processes,
            sig3(role.db_s),
            sig3(role.idle_s),
            role.major
                .map(|m| m.to_string())
                .unwrap_or_else(|| versions.clone()),
        )];
        if std::ptr::eq(role, &pg.roles[0]) {
            for u in &pg.unreadable {
                lines.push(format!("Wait events not readable: {u}"));
            }
        }
        out.push(Block {
            title: match (
                role.server,
                pg.roles.iter().any(|x| x.server != role.server),
            ) {
                // Several servers watched: say which one.
                (Some(pid), true) => format!(
                    "PostgreSQL wait events: {} (server {pid}{})",
                    role.role,
                    role.major
                        .map(|m| format!(", PostgreSQL {m}"))
                        .unwrap_or_default()
                ),
                _ => format!("PostgreSQL wait events: {}", role.role),
            },
            lines,
            table: Some(t),
        });
    }
    out
}
