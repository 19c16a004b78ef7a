//! The per-target table of a run over several targets (`run --target a --target b …`, `db run
//! --dir a --dir b …`): what landed on each target (count, share, rate, latency; a database's
//! operations, its reads of the target's tables), its queue facts from sysfs, its disk's own
//! counters, and the block requests traced on its disk. Drawn by `show`, `report`, `export
//! --markdown` and the closing summary.

use crate::results::{Results, RunResult, TargetRun};
use crate::units::{fmt_ns, fmt_rate, sig3};

use super::table::Table;

/// The table of `run`'s targets; `None` for a run on one target.
pub(crate) fn table(run: &RunResult) -> Option<Table> {
    if run.targets.is_empty() {
        return None;
    }
    // A database run's targets hold its operations (an update's commit is part of the
    // update, not an operation of its own), and its own count of the reads of their tables.
    // (SQLite's targets hold its file I/O: I/Os.)
    let db = run.phase == "db" && run.ops.iter().any(|o| o.op == "select");
    let count = |tr: &TargetRun| -> u64 {
        tr.ops
            .iter()
            .filter(|o| !(db && o.op == "commit"))
            .map(|o| o.count)
            .sum()
    };
    let total: u64 = run.targets.iter().map(count).sum();
    let db_reads = |tr: &TargetRun| tr.counters.get("physical_reads").copied();
    let reads_total: f64 = run.targets.iter().filter_map(db_reads).sum();
    let blk = |tr: &TargetRun, name: &str| {
        tr.block
            .as_ref()
            .and_then(|b| b.ops.iter().find(|o| o.op == name).cloned())
    };
    let mut t = Table::new(&[
        "target",
        if db { "operations" } else { "I/Os" },
        "share",
        if db { "ops/s" } else { "IOPS" },
        "MB/s",
        "p50",
        "p99",
        "max",
        "tables",
        "db reads",
        "db read share",
        "disk",
        "disk I/Os",
        "disk await",
        "util",
        "block reads",
        "host queue p99",
        "device p50",
        "device p99",
        "in device",
        "scheduler",
        "nr_requests",
        "tags",
    ]);
    for tr in &run.targets {
        let n = count(tr);
        let bytes: u64 = tr.ops.iter().map(|o| o.bytes).sum();
        // The op with the most I/Os speaks for the target's latency.
        let main = tr.ops.iter().max_by_key(|o| o.count);
        let lat = |f: fn(&crate::results::LatencySummary) -> f64| {
            main.filter(|o| o.count > 0)
                .map(|o| fmt_ns(f(&o.summary)))
                .unwrap_or_else(|| "-".into())
        };
        let per_s = |v: f64| {
            if run.rates_known() && run.duration_s > 0.0 {
                Some(v / run.duration_s)
            } else {
                None
            }
        };
        let d = tr.device.as_ref();
        let info = &tr.target;
        t.row(vec![
            info.path.clone(),
            n.to_string(),
            if total > 0 {
                format!("{} %", sig3(n as f64 * 100.0 / total as f64))
            } else {
                "-".into()
            },
            per_s(n as f64).map(fmt_rate).unwrap_or_else(|| "-".into()),
            per_s(bytes as f64 / 1e6)
                .map(sig3)
                .unwrap_or_else(|| "-".into()),
            lat(|s| s.p50_ns as f64),
            lat(|s| s.p99_ns as f64),
            lat(|s| s.max_ns as f64),
            tr.counters
                .get("tables")
                .map(|v| sig3(*v))
                .unwrap_or_else(|| "-".into()),
            db_reads(tr).map(sig3).unwrap_or_else(|| "-".into()),
            db_reads(tr)
                .filter(|_| reads_total > 0.0)
                .map(|v| format!("{} %", sig3(v * 100.0 / reads_total)))
                .unwrap_or_else(|| "-".into()),
            or_dash(&info.device),
            d.map(|d| (d.reads + d.writes).to_string())
                .unwrap_or_else(|| "-".into()),
            d.map(|d| {
                let n = d.reads + d.writes;
                let w = d.read_await_us * d.reads as f64 + d.write_await_us * d.writes as f64;
                if n > 0 {
                    fmt_ns(w / n as f64 * 1e3)
                } else {
                    "-".into()
                }
            })
            .unwrap_or_else(|| "-".into()),
            d.map(|d| format!("{} %", sig3(d.util * 100.0)))
                .unwrap_or_else(|| "-".into()),
            blk(tr, "blk:read:device")
                .map(|o| o.count.to_string())
                .unwrap_or_else(|| "-".into()),
            blk(tr, "blk:read:queue")
                .filter(|o| o.count > 0)
                .map(|o| fmt_ns(o.summary.p99_ns as f64))
                .unwrap_or_else(|| "-".into()),
            blk(tr, "blk:read:device")
                .filter(|o| o.count > 0)
                .map(|o| fmt_ns(o.summary.p50_ns as f64))
                .unwrap_or_else(|| "-".into()),
            blk(tr, "blk:read:device")
                .filter(|o| o.count > 0)
                .map(|o| fmt_ns(o.summary.p99_ns as f64))
                .unwrap_or_else(|| "-".into()),
            // Requests in the device on average (Little's law on the traced service times).
            tr.block
                .as_ref()
                .filter(|_| run.rates_known())
                .map(|b| sig3(crate::analysis::verdicts::in_device(&b.ops, run.duration_s)))
                .unwrap_or_else(|| "-".into()),
            or_dash(info.active_scheduler()),
            info.nr_requests
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into()),
            tr.queue
                .as_ref()
                .map(|q| {
                    let mut s = q.driver_tags.to_string();
                    if let Some(l) = tr.lun_queue_depth {
                        s += &format!(" (LUN queue {l})");
                    }
                    s
                })
                .or(tr.lun_queue_depth.map(|l| format!("LUN queue {l}")))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    if run
        .targets
        .iter()
        .all(|t| t.ops.iter().all(|o| o.bytes == 0))
    {
        t.drop_column("MB/s");
    }
    if run.targets.iter().all(|t| t.device.is_none()) {
        for c in ["disk I/Os", "disk await", "util"] {
            t.drop_column(c);
        }
    }
    if run.targets.iter().all(|t| t.counters.is_empty()) {
        for c in ["tables", "db reads", "db read share"] {
            t.drop_column(c);
        }
    }
    if run.targets.iter().all(|t| t.block.is_none()) {
        for c in [
            "block reads",
            "host queue p99",
            "device p50",
            "device p99",
            "in device",
        ] {
            t.drop_column(c);
        }
    }
    Some(t)
}

/// A note under the table: disks shared by several targets are counted whole by each.
pub(crate) fn note(run: &RunResult) -> Option<String> {
    let mut disks: Vec<&str> = run
        .targets
        .iter()
        .filter(|t| t.device.is_some())
        .map(|t| t.target.device.as_str())
        .collect();
    disks.sort_unstable();
    let n = disks.len();
    disks.dedup();
    (disks.len() < n).then(|| {
        "several targets sit on one disk: its counters (disk I/Os, await, util) are the whole \
         disk's, shown beside each of them"
            .to_string()
    })
}

/// The runs of `r` (with their indices) that have per-target series.
pub(crate) fn runs_with_targets(r: &Results) -> impl Iterator<Item = (usize, &RunResult)> {
    r.runs
        .iter()
        .enumerate()
        .filter(|(_, run)| !run.targets.is_empty())
}

/// The table and its note in the terminal, under a heading.
pub(crate) fn text(run: &RunResult, style: &super::TermStyle) -> String {
    let Some(t) = table(run) else {
        return String::new();
    };
    let mut out = String::new();
    super::table::heading(
        &mut out,
        style,
        &format!("Targets ({}, per target)", run.targets.len()),
    );
    out.push_str(&t.render(style));
    if let Some(n) = note(run) {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

/// The per-target tables of every run of `r` that has them, in Markdown.
pub(crate) fn markdown(r: &Results) -> String {
    let mut out = String::new();
    for (i, run) in runs_with_targets(r) {
        if let Some(t) = table(run) {
            out += &format!("### Targets of run {i}\n\n{}\n", t.markdown());
            if let Some(n) = note(run) {
                out += &format!("{n}\n\n");
            }
        }
    }
    out
}

/// The per-target table of `run` in HTML (empty for a run on one target).
pub(crate) fn html(run: &RunResult) -> String {
    let Some(t) = table(run) else {
        return String::new();
    };
    let mut out = format!(
        "<h3>Targets ({})</h3><div class=\"wide\">{}</div>",
        run.targets.len(),
        t.html()
    );
    if let Some(n) = note(run) {
        out += &format!("<p class=\"note\">{}</p>", super::svg::esc(&n));
    }
    out
}

fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.to_string()
    }
}
