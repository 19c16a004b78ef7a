//! Text of `iolens watch`: the answer section (terminal and HTML, through
//! [`super::analysis::blocks`]), the per-process table and the verdict names of its tables;
//! the verdict and wait-event lines every renderer puts at the top ([`headline`]), the
//! wall-time chart of the HTML report ([`wall_chart`]) and the side-by-side tables of
//! `iolens compare` ([`compare_tables`]).

use std::collections::BTreeMap;

use super::svg::{stacked_chart, Fmt, Stack};
use super::table::Block;
use super::table::Table;
use crate::results::analysis::{Analysis, Severity, VerdictKind, WatchShares};
use crate::results::{PgWaitKind, Results, WallSplit};
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
            crate::analysis::watch::merged_shares(r, MAX_ROWS)
        }
        _ => (1, Vec::new()),
    };
    for s in if per > 1 { &merged } else { &w.intervals } {
        row(
            crate::units::fmt_span_s(s.start_s, s.start_s + s.duration_s),
            s,
        );
    }
    row("overall".into(), &w.overall);
    let mut lines: Vec<String> = w
        .verdicts
        .iter()
        .map(|v| format!("• {}", v.message))
        .collect();
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
    out.extend(pg_relation_blocks(r));
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

/// Where a wait-event row's time was: on CPU, waiting for a CPU, in the device, in the host
/// queue, the rest (asleep above the block layer or off CPU), as shares of the row's time.
fn where_split(w: &crate::results::WallSplit) -> String {
    let total = w.wall_s();
    if total <= 0.0 {
        return "-".into();
    }
    let share = |x: f64| format!("{:.0}%", 100.0 * x / total);
    format!(
        "{} / {} / {} / {} / {}",
        share(w.cpu_s + w.io_cpu_s),
        share(w.runnable_s + w.io_runnable_s),
        share(w.io_device_s),
        share(w.io_queue_s),
        share(w.off_cpu_s + w.io_above_s)
    )
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
            "where (CPU / CPU wait / device / queue / rest)",
        ]);
        for row in &role.rows {
            let name = match row.kind {
                PgWaitKind::Cpu => "CPU".to_string(),
                PgWaitKind::CpuWait => "waiting for a CPU (no wait event)".to_string(),
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
                if row.count > 0 {
                    fmt_ns(row.time_s * 1e9 / row.count as f64)
                } else {
                    "-".into()
                },
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
                where_split(&row.split),
            ]);
        }
        let mut lines = vec![format!(
            "{} process(es); DB time {} thread-s (CPU, waiting for a CPU, waits, and off CPU \
             under no wait event; Client:ClientRead (in transaction) is a client thinking while \
             its transaction is open, holding its locks), idle {} thread-s (Client:ClientRead \
             outside a transaction, Activity:*: waiting for work, not DB time). Every slice of wall time (on CPU, runnable, in a syscall, off \
             CPU) carries the wait event PostgreSQL {} had set, read from the process at every \
             I/O syscall and every switch-out, not sampled: an event's time is all the time it \
             was set, as pg_stat_activity counts it.",
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
            for u in &pg.state_unread {
                lines.push(format!("Transaction state not readable: {u}"));
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
                _ => format!(
                    "PostgreSQL wait events: {}{}",
                    role.role,
                    role.session
                        .as_ref()
                        .map(|s| format!(" ({s})"))
                        .unwrap_or_default()
                ),
            },
            lines,
            table: Some(t),
        });
    }
    out
}

/// Who made a relation's syscalls: each role's share of its syscall time, most first
/// ("io worker 97%, client backend 3%"); reads and writes when the time is 0.
fn by_role(x: &crate::results::PgRelationIo) -> String {
    let n = |r: &crate::results::PgRelationRole| (r.reads + r.writes + r.syncs) as f64;
    let all: f64 = x.by_role.iter().map(n).sum();
    x.by_role
        .iter()
        .map(|r| {
            let share = if x.syscall_s > 0.0 {
                r.syscall_s / x.syscall_s
            } else if all > 0.0 {
                n(r) / all
            } else {
                0.0
            };
            format!("{} {}", r.role, pct(share))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rows of the relations table; the rest are summed in one row.
const MAX_RELATIONS: usize = 25;

/// The watched PostgreSQL processes' I/O by relation (WAL, temporary files), most syscall time
/// first, and the query ids sampled.
pub(crate) fn pg_relation_blocks(r: &Results) -> Vec<Block> {
    let Some(rel) = r.watch.as_ref().and_then(|b| b.relations.as_ref()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if !rel.rows.is_empty() {
        // A database column only when the rows are of several databases.
        let dbs: std::collections::BTreeSet<&str> = rel
            .rows
            .iter()
            .filter_map(|x| x.database.as_deref())
            .filter(|d| *d != "(shared)")
            .collect();
        let with_db = dbs.len() > 1;
        let mut head = vec!["relation", "kind"];
        if with_db {
            head.push("database");
        }
        head.extend([
            "reads",
            "read",
            "writes",
            "written",
            "syncs",
            "syscall time",
            "share",
            "device",
            "host queue",
            "by role (share of its syscall time)",
        ]);
        let mut t = Table::new(&head);
        let total: f64 = rel.rows.iter().map(|x| x.syscall_s).sum();
        let share = |x: f64| {
            if total > 0.0 {
                pct(x / total)
            } else {
                "-".into()
            }
        };
        let mut add = |x: &crate::results::PgRelationIo| {
            let mut name = x.name.clone();
            if !x.fork.is_empty() && x.fork != "main" {
                name.push_str(&format!(" ({})", x.fork));
            }
            let mut row = vec![name, x.kind.clone()];
            if with_db {
                row.push(x.database.clone().unwrap_or_default());
            }
            row.extend([
                x.reads.to_string(),
                fmt_bytes(x.read_bytes),
                x.writes.to_string(),
                fmt_bytes(x.write_bytes),
                x.syncs.to_string(),
                fmt_ns(x.syscall_s * 1e9),
                share(x.syscall_s),
                fmt_ns(x.device_s * 1e9),
                fmt_ns(x.queue_s * 1e9),
                by_role(x),
            ]);
            t.row(row)
        };
        for x in rel.rows.iter().take(MAX_RELATIONS) {
            add(x);
        }
        if rel.rows.len() > MAX_RELATIONS {
            let mut rest = crate::results::PgRelationIo {
                name: format!("({} more)", rel.rows.len() - MAX_RELATIONS),
                ..Default::default()
            };
            for x in &rel.rows[MAX_RELATIONS..] {
                rest.files += x.files;
                rest.reads += x.reads;
                rest.read_bytes += x.read_bytes;
                rest.writes += x.writes;
                rest.write_bytes += x.write_bytes;
                rest.syncs += x.syncs;
                rest.syscall_s += x.syscall_s;
                rest.device_s += x.device_s;
                rest.queue_s += x.queue_s;
            }
            add(&rest);
        }
        let mut lines = vec![format!(
            "Traced I/O syscalls (pread, pwrite, fsync…) of the watched PostgreSQL processes \
             by the file each was on, read by the probes through its descriptor (exact, every \
             syscall), and their io_uring requests by file, each from its submission to its \
             completion (role \"… (io_uring)\": submitted by that process, done by the kernel; \
             AIO io_submit requests are not by file); segments summed. Device and host-queue \
             time: the requests each syscall waited for. Top by syscall time: {}.",
            rel.rows
                .iter()
                .take(3)
                .map(|x| format!("{} {}", x.name, share(x.syscall_s)))
                .collect::<Vec<_>>()
                .join(", ")
        )];
        for d in &rel.resolved {
            lines.push(format!("Named from the catalog of {d}."));
        }
        lines.extend(rel.notes.iter().cloned());
        out.push(Block {
            title: "PostgreSQL I/O by relation".into(),
            lines,
            table: Some(t),
        });
    }
    if !rel.queries.is_empty() || !rel.query_notes.is_empty() {
        let mut t = Table::new(&[
            "query id",
            "samples",
            "in IO wait",
            "I/O syscalls",
            "syscall time",
            "device",
            "query",
        ]);
        for q in rel.queries.iter().take(MAX_RELATIONS) {
            t.row(vec![
                q.query_id.to_string(),
                q.samples.to_string(),
                q.io_samples.to_string(),
                q.syscalls.to_string(),
                fmt_ns(q.syscall_s * 1e9),
                fmt_ns(q.device_s * 1e9),
                q.text.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        out.push(Block {
            title: "PostgreSQL query ids (sampled)".into(),
            lines: rel.query_notes.clone(),
            table: (!rel.queries.is_empty()).then_some(t),
        });
    }
    out
}

/// The answer first, for the top of `show`, `report` and `export --markdown`: the watch's
/// verdicts (severity, sentence), then for the watched PostgreSQL servers' client backends (or,
/// without any, the busiest role) where their DB time went in the database's own words, a line
/// each (severity "info"). Empty when `r` holds no watch.
pub(crate) fn headline(r: &Results, an: &Analysis) -> Vec<(Severity, String)> {
    let mut out = Vec::new();
    let Some(w) = &an.watch else {
        return out;
    };
    for v in &w.verdicts {
        out.push((v.severity, format!("Verdict: {}.", v.message)));
    }
    let Some(pg) = r.watch.as_ref().and_then(|b| b.pg.as_ref()) else {
        return out;
    };
    // Client backends (the sessions' time); without any, the busiest role.
    let known = || {
        pg.roles
            .iter()
            .filter(|x| x.server.is_some() && x.db_s > 0.0)
    };
    let mut shown: Vec<&crate::results::PgRoleWaits> = known()
        .filter(|x| x.role == "client backend")
        .take(3)
        .collect();
    if shown.is_empty() {
        shown.extend(known().max_by(|a, b| a.db_s.total_cmp(&b.db_s)));
    }
    for role in shown {
        let busy: Vec<&crate::results::PgWaitRow> = role
            .rows
            .iter()
            .filter(|x| x.kind != PgWaitKind::Idle && x.time_s > 0.0)
            .collect();
        let named = |x: &crate::results::PgWaitRow| match x.kind {
            PgWaitKind::Cpu => "CPU".to_string(),
            PgWaitKind::Unnamed => "off CPU under no wait event".to_string(),
            _ => x.event.clone(),
        };
        let mut parts: Vec<String> = busy
            .iter()
            .take(4)
            .map(|x| format!("{} {}", named(x), pct(x.share_of_db.unwrap_or(0.0))))
            .collect();
        let rest: f64 = busy
            .iter()
            .skip(4)
            .filter_map(|x| x.share_of_db)
            .sum::<f64>();
        if busy.len() > 4 {
            parts.push(format!("{} more {}", busy.len() - 4, pct(rest)));
        }
        out.push((
            Severity::Info,
            format!(
                "PostgreSQL {} ({} process(es){}): DB time {} thread-s = {}; idle {} thread-s.",
                role.role,
                role.processes,
                role.server
                    .map(|p| format!(", server {p}"))
                    .unwrap_or_default(),
                sig3(role.db_s),
                parts.join(", "),
                sig3(role.idle_s)
            ),
        ));
    }
    out
}

/// A part of a [`WallSplit`]: name, colour and how to read it.
pub(crate) type WallPart = (&'static str, &'static str, fn(&WallSplit) -> f64);

/// The parts of a [`WallSplit`] as the charts and comparisons show them, bottom to top.
pub(crate) const WALL_PARTS: [WallPart; 8] = [
    ("on CPU", "#2ca02c", |w| w.cpu_s),
    ("I/O: on CPU", "#98df8a", |w| w.io_cpu_s),
    ("waiting for a CPU", "#d62728", |w| w.runnable_s),
    ("I/O: waiting for a CPU", "#ff9896", |w| w.io_runnable_s),
    ("I/O: device", "#1f77b4", |w| w.io_device_s),
    ("I/O: host queue", "#9467bd", |w| w.io_queue_s),
    ("I/O: above the block layer", "#ff7f0e", |w| w.io_above_s),
    (
        "other off CPU (sleep, locks, client, idle)",
        "#c7c7c7",
        |w| w.off_cpu_s,
    ),
];

/// Columns of the wall-time chart: one per plot column pair at most (as the heatmaps).
const WALL_COLUMNS: usize = 385;

/// The watched threads' wall time over time (`WatchSpan::wall` of every interval) as stacked
/// bars: each bar's parts are [`WALL_PARTS`], its area the interval's thread time, its height
/// the threads watched on average. A long watch's intervals are summed exactly into at most
/// [`WALL_COLUMNS`] bars. `None` without a watch or with no thread time.
pub(crate) fn wall_chart(r: &Results, title: &str) -> Option<String> {
    let b = r.watch.as_ref()?;
    if b.intervals.iter().all(|s| s.wall.wall_s() <= 0.0) {
        return None;
    }
    let per = b.intervals.len().div_ceil(WALL_COLUMNS).max(1);
    let mut columns = Vec::new();
    let mut sums: Vec<WallSplit> = Vec::new();
    for chunk in b.intervals.chunks(per) {
        let mut w = WallSplit::default();
        for s in chunk {
            w.add(&s.wall);
        }
        columns.push((chunk[0].start_s, chunk.iter().map(|s| s.duration_s).sum()));
        sums.push(w);
    }
    let parts: Vec<Stack> = WALL_PARTS
        .iter()
        .map(|(name, colour, f)| Stack {
            name: (*name).into(),
            colour: (*colour).into(),
            values: sums.iter().map(f).collect(),
        })
        .collect();
    Some(stacked_chart(
        &if per > 1 {
            format!("{title} — {per} intervals per bar")
        } else {
            title.to_string()
        },
        (
            "time since the start of the watch",
            "watched threads (thread-s per s)",
        ),
        Fmt::Rate,
        &columns,
        &parts,
    ))
}

/// `a − b` in percentage points, signed (`+3.1 pts`).
fn points(a: f64, b: f64) -> String {
    let d = (a - b) * 100.0;
    if d.abs() < 0.05 {
        "0".into()
    } else {
        format!("{d:+.1} pts")
    }
}

/// The header of a comparison table: a column per input, a difference column after each but
/// the first.
fn diff_header(first: &str, labels: &[&str]) -> Vec<String> {
    let mut h = vec![first.to_string()];
    for (i, l) in labels.iter().enumerate() {
        h.push((*l).to_string());
        if i > 0 {
            h.push("Δ".into());
        }
    }
    h
}

/// One role's wait-event rows summed over every server of one results file: (DB time, idle
/// time, event name → (kind, time)); idle events are rows of their own.
type RoleSum = (f64, f64, BTreeMap<String, (PgWaitKind, f64)>);

fn role_sums(r: &Results) -> BTreeMap<String, RoleSum> {
    let mut out: BTreeMap<String, RoleSum> = BTreeMap::new();
    let Some(pg) = r.watch.as_ref().and_then(|b| b.pg.as_ref()) else {
        return out;
    };
    for role in pg.roles.iter().filter(|x| x.server.is_some()) {
        let e = out.entry(role.role.clone()).or_default();
        e.0 += role.db_s;
        e.1 += role.idle_s;
        for row in &role.rows {
            let name = match row.kind {
                PgWaitKind::Cpu => "CPU".to_string(),
                PgWaitKind::CpuWait => "waiting for a CPU (no wait event)".to_string(),
                PgWaitKind::Unnamed => "off CPU, no wait event".to_string(),
                PgWaitKind::Idle => format!("{} (idle)", row.event),
                PgWaitKind::Wait => row.event.clone(),
            };
            let v = e.2.entry(name).or_insert((row.kind, 0.0));
            v.1 += row.time_s;
        }
    }
    out
}

/// Watch results side by side (`iolens compare`), the first the baseline: where the watched
/// threads' wall time went (shares of it, with its total), and each PostgreSQL role's wait
/// events (shares of its DB time, summed over the servers of each file), with the difference
/// to the baseline in percentage points. Empty unless the baseline and another input are
/// watches.
pub(crate) fn compare_tables(inputs: &[(String, Results)]) -> Vec<(String, Table)> {
    let mut out = Vec::new();
    let watched: Vec<&(String, Results)> =
        inputs.iter().filter(|(_, r)| r.watch.is_some()).collect();
    if watched.len() < 2 || inputs[0].1.watch.is_none() {
        return out;
    }
    let labels: Vec<&str> = watched.iter().map(|(l, _)| l.as_str()).collect();
    let walls: Vec<WallSplit> = watched
        .iter()
        .map(|(_, r)| {
            let mut w = WallSplit::default();
            for s in &r.watch.as_ref().expect("a watch").intervals {
                w.add(&s.wall);
            }
            w
        })
        .collect();
    let ans: Vec<_> = watched
        .iter()
        .map(|(_, r)| crate::analysis::of(r))
        .collect();
    let mut t = Table {
        header: diff_header("share of thread time", &labels),
        rows: vec![],
    };
    let mut total = vec!["thread time".to_string()];
    for (i, w) in walls.iter().enumerate() {
        total.push(format!("{} s", sig3(w.wall_s())));
        if i > 0 {
            total.push(crate::units::ratio(walls[0].wall_s(), w.wall_s()));
        }
    }
    t.rows.push(total);
    let share = |w: &WallSplit, v: f64| v / w.wall_s().max(1e-300);
    let mut row = |name: String, cells: Vec<(String, f64)>| {
        let mut r = vec![name];
        for (i, (text, v)) in cells.iter().enumerate() {
            r.push(text.clone());
            if i > 0 {
                r.push(points(*v, cells[0].1));
            }
        }
        t.rows.push(r);
    };
    for (name, _, f) in WALL_PARTS {
        row(
            name.to_string(),
            walls
                .iter()
                .map(|w| (pct1(share(w, f(w))), share(w, f(w))))
                .collect(),
        );
    }
    row(
        "inside I/O syscalls (all five I/O parts)".into(),
        walls
            .iter()
            .map(|w| (pct1(share(w, w.io_s())), share(w, w.io_s())))
            .collect(),
    );
    let mut verdicts = vec!["verdict".to_string()];
    for (i, a) in ans.iter().enumerate() {
        verdicts.push(verdict_short(a.watch.as_ref().and_then(|w| w.overall.verdict)).into());
        if i > 0 {
            verdicts.push(String::new());
        }
    }
    t.rows.push(verdicts);
    out.push(("Where the watched threads' time went".to_string(), t));

    let sums: Vec<BTreeMap<String, RoleSum>> = watched.iter().map(|(_, r)| role_sums(r)).collect();
    // Roles in the baseline's order (client backends first), then roles only others have.
    let mut roles: Vec<String> = Vec::new();
    for (_, r) in &watched {
        for role in r
            .watch
            .as_ref()
            .and_then(|b| b.pg.as_ref())
            .map(|p| p.roles.as_slice())
            .unwrap_or(&[])
        {
            if role.server.is_some() && !roles.contains(&role.role) {
                roles.push(role.role.clone());
            }
        }
    }
    for role in roles {
        let mut t = Table {
            header: diff_header("share of DB time", &labels),
            rows: vec![],
        };
        let get = |i: usize| sums[i].get(&role);
        let mut db = vec!["DB time".to_string()];
        for i in 0..watched.len() {
            let d = get(i).map_or(0.0, |x| x.0);
            db.push(format!("{} s", sig3(d)));
            if i > 0 {
                db.push(crate::units::ratio(get(0).map_or(0.0, |x| x.0), d));
            }
        }
        t.rows.push(db);
        // Events by the most time in any input.
        let mut events: Vec<(String, PgWaitKind, f64)> = Vec::new();
        for s in sums.iter().filter_map(|s| s.get(&role)) {
            for (name, (kind, time)) in &s.2 {
                match events.iter_mut().find(|e| &e.0 == name) {
                    Some(e) => e.2 = e.2.max(*time),
                    None => events.push((name.clone(), *kind, *time)),
                }
            }
        }
        events.sort_by(|a, b| {
            (a.1 == PgWaitKind::Idle)
                .cmp(&(b.1 == PgWaitKind::Idle))
                .then(b.2.total_cmp(&a.2))
        });
        for (name, kind, _) in events.iter().filter(|e| e.2 > 0.0) {
            let mut r = vec![name.clone()];
            let value = |i: usize| -> (f64, f64) {
                get(i).map_or((0.0, 0.0), |x| {
                    let time = x.2.get(name).map_or(0.0, |v| v.1);
                    (time, if x.0 > 0.0 { time / x.0 } else { 0.0 })
                })
            };
            for i in 0..watched.len() {
                let (time, share) = value(i);
                if *kind == PgWaitKind::Idle {
                    r.push(format!("{} s", sig3(time)));
                    if i > 0 {
                        r.push(crate::units::ratio(value(0).0, time));
                    }
                } else {
                    r.push(format!("{} ({} s)", pct1(share), sig3(time)));
                    if i > 0 {
                        r.push(points(share, value(0).1));
                    }
                }
            }
            t.rows.push(r);
        }
        out.push((format!("PostgreSQL wait events: {role}"), t));
    }
    out
}

fn pct1(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Kind, WatchBudget, WatchSpan};

    /// `name="value"` of the first such attribute in `tag`.
    fn attr<'a>(tag: &'a str, name: &str) -> &'a str {
        let at = tag.find(&format!(" {name}=\"")).expect(name) + name.len() + 3;
        &tag[at..at + tag[at..].find('"').unwrap()]
    }

    /// Per bar of a stacked chart: (total, length, summed rect heights in px, px per unit of
    /// the y axis), from the SVG text.
    pub(crate) fn bars(svg: &str) -> Vec<(f64, f64, f64, f64)> {
        let sy: Vec<f64> = attr(svg, "data-sy")
            .split(',')
            .skip(1)
            .map(|x| x.parse().unwrap())
            .collect();
        let px_per_unit = (sy[2] - sy[3]) / (sy[1] - sy[0]);
        svg.split("<g class=\"bar\"")
            .skip(1)
            .map(|g| {
                let g = &g[..g.find("</g>").unwrap()];
                let heights: f64 = g
                    .split("<rect ")
                    .skip(1)
                    .map(|r| attr(&format!(" {r}"), "height").parse::<f64>().unwrap())
                    .sum();
                (
                    attr(g, "data-total").parse().unwrap(),
                    attr(g, "data-len").parse().unwrap(),
                    heights,
                    px_per_unit,
                )
            })
            .collect()
    }

    fn watch(spans: usize) -> Results {
        let mut r = Results::new(Kind::Watch, vec![]);
        let intervals = (0..spans)
            .map(|k| {
                let x = k as f64;
                WatchSpan {
                    start_s: x,
                    duration_s: if k + 1 == spans { 0.25 } else { 1.0 },
                    wall: WallSplit {
                        cpu_s: 0.3 + 0.01 * (k % 7) as f64,
                        runnable_s: 0.2,
                        off_cpu_s: 1.5 - 0.001 * (k % 13) as f64,
                        io_cpu_s: 0.01,
                        io_runnable_s: 0.05 * (k % 3) as f64,
                        io_device_s: 0.4,
                        io_queue_s: 0.02,
                        io_above_s: 0.03,
                    },
                    ..Default::default()
                }
            })
            .collect();
        r.watch = Some(WatchBudget {
            intervals,
            ..Default::default()
        });
        r
    }

    #[test]
    fn wall_chart_bars_add_up_to_each_intervals_thread_time() {
        for spans in [5, 1000] {
            let r = watch(spans);
            let svg = wall_chart(&r, "t").unwrap();
            let b = bars(&svg);
            let ints = &r.watch.as_ref().unwrap().intervals;
            let per = spans.div_ceil(WALL_COLUMNS);
            assert_eq!(b.len(), spans.div_ceil(per), "{spans} intervals");
            for (i, (total, len, heights, ppu)) in b.iter().enumerate() {
                let chunk = &ints[i * per..((i + 1) * per).min(spans)];
                let wall: f64 = chunk.iter().map(|s| s.wall.wall_s()).sum();
                let dur: f64 = chunk.iter().map(|s| s.duration_s).sum();
                assert!((total - wall).abs() < 1e-9, "bar {i}: {total} vs {wall}");
                assert!((len - dur).abs() < 1e-9);
                // Heights are written to 0.001 px: the parts stack to the bar's height.
                let want = wall / dur * ppu;
                assert!(
                    (heights - want).abs() < 0.001 * 8.0 + 1e-9,
                    "bar {i}: parts {heights} px, thread time {want} px"
                );
            }
            // Eight parts, each named in the legend.
            for (name, _, _) in WALL_PARTS {
                assert!(svg.contains(&crate::render::svg::esc(name)), "{name}");
            }
        }
        let mut empty = watch(3);
        for s in &mut empty.watch.as_mut().unwrap().intervals {
            s.wall = WallSplit::default();
        }
        assert!(wall_chart(&empty, "t").is_none());
    }

    #[test]
    fn compared_watches_show_shares_and_their_differences() {
        let a = watch(4);
        let mut b = watch(4);
        for s in &mut b.watch.as_mut().unwrap().intervals {
            s.wall.runnable_s += 1.0;
        }
        let inputs = vec![("a.json".to_string(), a), ("b.json".to_string(), b)];
        let t = compare_tables(&inputs);
        assert_eq!(t.len(), 1, "no PostgreSQL roles in either");
        let (title, t) = &t[0];
        assert_eq!(title, "Where the watched threads' time went");
        assert_eq!(t.header, ["share of thread time", "a.json", "b.json", "Δ"]);
        let row = t.rows.iter().find(|r| r[0] == "waiting for a CPU").unwrap();
        // a: 0.2 of 2.51 to 2.61 thread-s; b: 1.2 of 3.51 to 3.61 → about +26 points.
        let d: f64 = row[3].trim_end_matches(" pts").parse().unwrap();
        assert!((20.0..30.0).contains(&d), "{row:?}");
        // A lone watch has nothing to compare against.
        assert!(compare_tables(&inputs[..1]).is_empty());
    }
}
