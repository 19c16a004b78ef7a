//! The answer of `iolens watch`: where the watched threads' time went.
//!
//! Input: the per-interval sums a watch records ([`WatchBudget`]), above all each interval's
//! [`WallSplit`](crate::results::WallSplit): every instant of every watched thread in exactly one
//! part (on CPU, runnable, off CPU; inside a traced I/O syscall on CPU, runnable, asleep with a
//! request of its own in the device, in the host queue, or above the block layer). A syscall is
//! charged the union of its requests' time, never more than it lasted; requests no syscall
//! waited for are background I/O. Method (seed 000's layering, seed 003's CPU caveat): the
//! verdict starts from wall time. When the threads waited for a CPU that ran another task for
//! at least [`CPU_WAIT_SHARE`] of their time, or as long as they ran (and at least
//! [`MIN_CPU_WAIT`] of it), or inside their I/O for at least [`CPU_SHARE`] of it, the CPU is
//! the answer, whatever the storage does. Otherwise, when
//! I/O syscalls are at least [`IO_SHARE`] of the time, the layer that dominates inside them is;
//! below that, the answer is that I/O is not where the time goes. When the time above the
//! block layer dominates and a cgroup of the watched processes ran at one of its I/O limits
//! (at least [`LIMIT_USE`] of it while it did I/O), the answer is that limit: blk-throttle holds
//! bios before they become requests, so a throttled wait is above the block layer, and no
//! device is to blame. Without such a limit, when a traced disk's request queue
//! (`nr_requests`) was held full (its requests, every process's, in it on average at least
//! [`QUEUE_FULL`] of it), time above the block layer is the wait for a place in that queue: the
//! answer is that the host queues, naming the full queue (a full LUN queue, seed 001).

use super::verdicts::{
    device_limit, in_device, in_request_queue, request_queue_full, RequestQueue, QUEUE_FULL,
};
use crate::results::analysis::{
    Severity, Verdict, VerdictKind, WalChain, WatchAnalysis, WatchShares,
};
use crate::results::profile::{FrameKind, OffCpuReason, StackProfile, StackState};
use crate::results::{
    CgroupIoLimit, PgWaitKind, PgWaits, Results, WallSplit, WatchBudget, WatchCgroup, WatchSpan,
};

/// The I/O syscalls `watch` traces (`crate::watch::SYSCALLS`, checked there): a profile's
/// stack is inside I/O when its kernel frames hold one's entry (`__x64_sys_pread64`).
pub const IO_SYSCALLS: &[&str] = &[
    "pread64",
    "pwrite64",
    "preadv",
    "preadv2",
    "pwritev",
    "pwritev2",
    "fsync",
    "fdatasync",
    "io_submit",
    "io_getevents",
    "io_uring_enter",
];

/// Share of I/O syscall time spent waiting for a CPU (another task on it) from which the CPU
/// is the verdict.
pub const CPU_SHARE: f64 = 0.20;
/// Share of wall time spent waiting for a CPU (another task on it) from which the CPU is the
/// verdict.
pub const CPU_WAIT_SHARE: f64 = 0.20;
/// Share of wall time spent waiting for a CPU below which waiting as long as running is no
/// sign of saturation (a mostly idle thread's few microseconds of each).
pub const MIN_CPU_WAIT: f64 = 0.02;
/// Share of wall time inside I/O syscalls from which the verdict is about the I/O.
pub const IO_SHARE: f64 = 0.10;
/// Host-queue share from which a host-queueing warning is given even when it does not dominate.
pub const QUEUE_SHARE: f64 = 0.30;
/// Share of client backends' DB time waiting on WAL flushes from which the WAL chain is told.
pub const WAL_SHARE: f64 = 0.10;
/// Share of a cgroup I/O limit that the cgroup's rate, while it did I/O, must reach for the
/// limit to be what held the I/O (blk-throttle runs a saturated cgroup at its limit, within
/// its slices' rounding; a rate far below the limit was not held by it).
pub const LIMIT_USE: f64 = 0.8;

/// A cgroup I/O limit the watched processes' cgroup ran at.
struct Held<'a> {
    cg: &'a WatchCgroup,
    lim: &'a CgroupIoLimit,
    /// `riops`, `wiops`, `rbps` or `wbps`.
    what: &'static str,
    limit: u64,
    /// The cgroup's rate on the device while it did I/O (per second).
    rate: f64,
}

/// The limit of a watched cgroup its rate came nearest to, when at least [`LIMIT_USE`] of it.
fn held_limit(b: &WatchBudget) -> Option<Held<'_>> {
    held_in(&b.cgroups)
}

/// The limit of `cgroups` the watched processes ran at, if any (see [`held_limit`]).
fn held_in(cgroups: &[WatchCgroup]) -> Option<Held<'_>> {
    let mut best: Option<Held> = None;
    for cg in cgroups {
        for lim in &cg.limits {
            // The rate while the cgroup did I/O; failing two readings apart, over the window.
            let (secs, n) = if lim.busy_s >= 0.2 {
                (lim.busy_s, lim.busy)
            } else {
                (
                    cg.window_s,
                    [lim.reads, lim.writes, lim.read_bytes, lim.write_bytes],
                )
            };
            if secs <= 0.0 {
                continue;
            }
            for (i, what, limit) in [
                (0, "riops", lim.riops),
                (1, "wiops", lim.wiops),
                (2, "rbps", lim.rbps),
                (3, "wbps", lim.wbps),
            ] {
                let Some(limit) = limit.filter(|&l| l > 0) else {
                    continue;
                };
                let rate = n[i] as f64 / secs;
                let use_ = rate / limit as f64;
                if use_ >= LIMIT_USE && best.as_ref().is_none_or(|b| use_ > b.rate / b.limit as f64)
                {
                    best = Some(Held {
                        cg,
                        lim,
                        what,
                        limit,
                        rate,
                    });
                }
            }
        }
    }
    best
}

/// With a cgroup limit held, time above the block layer is the throttle's; with a disk's
/// request queue held full (and no limit), it is the host's wait for a place in that queue.
fn throttled(mut s: WatchShares, held: bool, full: bool) -> WatchShares {
    if s.verdict == Some(VerdictKind::AboveBlockLayer) {
        if held {
            s.verdict = Some(VerdictKind::CgroupLimit);
        } else if full {
            s.verdict = Some(VerdictKind::HostQueueing);
        }
    }
    s
}

/// The shares of one interval as the live view shows it while watching: `cgroups` are the
/// limiting cgroups' counters so far, so an interval held by a limit the processes run at is
/// named as the stored analysis names it (the cgroup limit, not "above the block layer").
pub fn live_shares(s: &WatchSpan, cgroups: &[WatchCgroup]) -> WatchShares {
    throttled(shares(s), held_in(cgroups).is_some(), false)
}

/// The shares of one span.
pub fn shares(s: &WatchSpan) -> WatchShares {
    let w = &s.wall;
    let wall = w.wall_s();
    let io = w.io_s();
    let mut out = WatchShares {
        start_s: s.start_s,
        duration_s: s.duration_s,
        syscalls: s.syscalls,
        syscall_s: s.syscall_ns as f64 / 1e9,
        runq_s: w.runnable_s + w.io_runnable_s,
        runq_io_s: w.io_runnable_s,
        wall_s: wall,
        io_s: io,
        bg_requests: s.bg_requests,
        bg_device_s: s.bg_device_ns as f64 / 1e9,
        ..Default::default()
    };
    if wall <= 0.0 {
        return out;
    }
    out.wall_cpu = w.cpu_s / wall;
    out.wall_cpu_wait = (w.runnable_s + w.io_runnable_s) / wall;
    out.wall_io = (io - w.io_runnable_s) / wall;
    out.wall_off_cpu = w.off_cpu_s / wall;
    if io > 0.0 {
        out.device = w.io_device_s / io;
        out.host_queue = w.io_queue_s / io;
        out.above_block = (w.io_above_s + w.io_cpu_s) / io;
        out.runq = w.io_runnable_s / io;
    }
    // Waiting for a CPU that ran another task (not an idle CPU's wake-up time).
    let contended = s.runq_contended_ns as f64 / 1e9;
    let contended_io = (s.runq_io_ns as f64 / 1e9).min(io);
    let ran = w.cpu_s + w.io_cpu_s;
    let io_share = io / wall;
    out.verdict = Some(
        if contended >= CPU_WAIT_SHARE * wall
            || (contended >= MIN_CPU_WAIT * wall && contended >= ran)
            // Waited longer for a CPU than for the I/O itself: the CPU costs these threads
            // more than the storage does (pgbench beside busy loops: 8.5 % waiting for a CPU
            // against 0.7 % of I/O time outside it — not "I/O is not where the time goes").
            || (contended >= MIN_CPU_WAIT * wall && contended >= io - contended_io)
            || (io_share >= IO_SHARE && contended_io >= CPU_SHARE * io)
        {
            VerdictKind::CpuBound
        } else if io_share < IO_SHARE {
            VerdictKind::NotIo
        } else {
            [
                (out.device, VerdictKind::StorageBound),
                (out.host_queue, VerdictKind::HostQueueing),
                (out.above_block, VerdictKind::AboveBlockLayer),
                (out.runq, VerdictKind::CpuBound),
            ]
            .into_iter()
            .fold((-1.0, VerdictKind::StorageBound), |best, x| {
                if x.0 > best.0 {
                    x
                } else {
                    best
                }
            })
            .1
        },
    );
    out
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// What held the host's block queue, disk by disk: how many requests (every process's, the
/// disk's `block DISK` run) were in each disk on average (Little's law over the watch) against
/// what the disk takes at once ([`device_limit`]); the figures as `in_flight:DISK` and
/// `driver_tags:DISK`. And whether a disk's request queue (`nr_requests`) was held full: then
/// submitters waited for a place in it above the block layer ([`request_queue_full`]); the
/// figures `nr_requests:DISK`, `request_queue_in_flight:DISK`, `queue_full:DISK`.
struct DiskLimits {
    /// What held the block queue, said where the host queues.
    text: String,
    figures: Vec<(String, f64)>,
    /// The words for the disks whose request queue was held full (empty: none).
    full: String,
}

fn disk_limits(r: &Results, budget: &WatchBudget) -> DiskLimits {
    let mut text = String::new();
    let mut full = String::new();
    let mut figures = Vec::new();
    for q in &budget.disks {
        let Some(run) = r
            .runs
            .iter()
            .find(|x| x.name.strip_prefix("block ") == Some(q.disk.as_str()))
        else {
            continue;
        };
        if !run.rates_known() {
            continue;
        }
        let l = in_device(&run.ops, run.duration_s);
        figures.push((format!("in_flight:{}", q.disk), l));
        figures.push((format!("driver_tags:{}", q.disk), q.driver_tags as f64));
        text.push_str(". ");
        text.push_str(&device_limit(q, l));
        if let Some(rq) = RequestQueue::of_disk(q) {
            let l = in_request_queue(&run.ops, run.duration_s);
            let is_full = l >= QUEUE_FULL * rq.capacity();
            figures.push((format!("nr_requests:{}", q.disk), rq.nr_requests as f64));
            figures.push((format!("request_queue_in_flight:{}", q.disk), l));
            figures.push((
                format!("queue_full:{}", q.disk),
                f64::from(u8::from(is_full)),
            ));
            if is_full {
                full.push_str("; ");
                full.push_str(&request_queue_full(&q.disk, rq, l));
            }
        }
    }
    DiskLimits {
        text,
        figures,
        full,
    }
}

/// The words of a cgroup-limit verdict: the cgroup, its limit, its rate, the throttled share.
fn cgroup_message(h: &Held, all: &WatchSpan, o: &WatchShares, inside: &str) -> String {
    let (rate, limit) = if h.what.ends_with("bps") {
        (
            format!("{}/s", crate::units::fmt_bytes(h.rate as u64)),
            crate::units::fmt_bytes(h.limit),
        )
    } else {
        (
            format!("{:.1} I/Os per second", h.rate),
            h.limit.to_string(),
        )
    };
    let file = if h.cg.version == 2 {
        "io.max"
    } else {
        "blkio.throttle"
    };
    let pressure =
        h.cg.pressure_some_s
            .map(|p| format!("; io.pressure: its tasks stalled on I/O for {p:.2} s"))
            .unwrap_or_default();
    format!(
        "a cgroup I/O limit holds the I/O, not the device: cgroup {} (cgroup v{} {file}) \
         limits {} to {}={limit}, and it ran at {rate} ({} of the limit) while doing I/O; I/O \
         syscalls are {} of the watched threads' time, and {} of that was held above the \
         block layer before becoming requests (throttled; {}){pressure}",
        h.cg.path,
        h.cg.version,
        h.lim.disk,
        h.what,
        pct(h.rate / h.limit as f64),
        pct(o.io_s / o.wall_s.max(1e-12)),
        pct(all.wall.io_above_s / o.io_s.max(1e-12)),
        inside
    )
}

/// The verdicts of the whole watch (`limits`: [`disk_limits`], said where the host queues;
/// its figures go with every verdict).
fn verdicts(
    all: &WatchSpan,
    o: &WatchShares,
    limits: &DiskLimits,
    profile: bool,
    held: Option<&Held>,
) -> Vec<Verdict> {
    let mut v = Vec::new();
    let Some(kind) = o.verdict else {
        // No time accounted: nothing to decide, and that is said.
        v.push(Verdict::new(
            VerdictKind::Note,
            Severity::Info,
            "none — the watched threads were not seen (no time accounted)".into(),
            &[("wall_s", o.wall_s)],
        ));
        return v;
    };
    let figures = [
        ("syscalls", o.syscalls as f64),
        ("syscall_s", o.syscall_s),
        ("runq_s", o.runq_s),
        ("runq_io_s", o.runq_io_s),
        ("device_share", o.device),
        ("host_queue_share", o.host_queue),
        ("above_block_share", o.above_block),
        ("runq_share", o.runq),
        ("wall_s", o.wall_s),
        ("io_s", o.io_s),
        ("wall_cpu_share", o.wall_cpu),
        ("wall_cpu_wait_share", o.wall_cpu_wait),
        ("wall_io_share", o.wall_io),
        ("wall_off_cpu_share", o.wall_off_cpu),
        ("background_requests", o.bg_requests as f64),
        ("background_device_s", o.bg_device_s),
    ];
    let per_request_us = |ns: u64| {
        if all.block_requests > 0 {
            ns as f64 / all.block_requests as f64 / 1e3
        } else {
            0.0
        }
    };
    let inside = format!(
        "device service {}, host queue {}, above the block layer {}, waiting for a CPU {}",
        pct(o.device),
        pct(o.host_queue),
        pct(o.above_block),
        pct(o.runq)
    );
    let message = match kind {
        // A profile sees the I/O wait (uninterruptible sleep) but not which block layer held it.
        VerdictKind::StorageBound | VerdictKind::HostQueueing if profile => format!(
            "the I/O is slow: I/O syscalls are {} of the profiled threads' time at work, and {} \
             of that asleep waiting for the I/O, in the device or the host's block queue (a \
             profile does not tell them apart: `iolens watch` does); waiting for a CPU {} of \
             their time, running {}",
            pct(o.io_s / o.wall_s.max(1e-12)),
            pct(o.device + o.host_queue),
            pct(o.wall_cpu_wait),
            pct(o.wall_cpu)
        ),
        VerdictKind::CpuBound => format!(
            "the CPU is saturated; the storage may be fine: the watched threads waited {} of \
             their time for a CPU ({:.3} thread-s, {:.3} of it inside I/O syscalls after the I/O \
             had completed) and ran {}; I/O syscalls are {} of their time ({})",
            pct(o.wall_cpu_wait),
            o.runq_s,
            o.runq_io_s,
            pct(o.wall_cpu),
            pct(o.io_s / o.wall_s.max(1e-12)),
            inside
        ),
        VerdictKind::StorageBound => format!(
            "the storage is slow: I/O syscalls are {} of the watched threads' time, and device \
             service is {} of that ({:.1} µs per request over {} requests; {})",
            pct(o.io_s / o.wall_s.max(1e-12)),
            pct(o.device),
            per_request_us(all.device_ns),
            all.block_requests,
            inside
        ),
        // Above the block layer, held there by a full request queue.
        VerdictKind::HostQueueing if !limits.full.is_empty() && o.above_block > o.host_queue => {
            format!(
                "the host queues: I/O syscalls are {} of the watched threads' time, and {} of \
                 that was above the block layer ({}){}",
                pct(o.io_s / o.wall_s.max(1e-12)),
                pct(o.above_block),
                inside,
                limits.full
            )
        }
        VerdictKind::HostQueueing => format!(
            "the host queues: I/O syscalls are {} of the watched threads' time, and {} of that is \
             in the host's block queue before the device sees the request ({:.1} µs per request: \
             I/O scheduler, queue-depth limits; {}){}",
            pct(o.io_s / o.wall_s.max(1e-12)),
            pct(o.host_queue),
            per_request_us(all.queue_ns),
            inside,
            limits.text
        ),
        VerdictKind::NotIo => format!(
            "I/O is not where the time goes: I/O syscalls are {} of the watched threads' time \
             ({}); they ran {}, waited {} for a CPU and were otherwise off CPU {} (sleep, locks, \
             clients, idle)",
            pct(o.io_s / o.wall_s.max(1e-12)),
            inside,
            pct(o.wall_cpu),
            pct(o.wall_cpu_wait),
            pct(o.wall_off_cpu)
        ),
        VerdictKind::CgroupLimit => cgroup_message(
            held.expect("a cgroup-limit verdict has its limit"),
            all,
            o,
            &inside,
        ),
        _ => format!(
            "the time is above the block layer: I/O syscalls are {} of the watched threads' \
             time, and {} of that was not in the block layer (page cache, filesystem, locks; {})",
            pct(o.io_s / o.wall_s.max(1e-12)),
            pct(o.above_block),
            inside
        ),
    };
    let severity = if matches!(kind, VerdictKind::AboveBlockLayer | VerdictKind::NotIo) {
        Severity::Info
    } else {
        Severity::Warning
    };
    let mut figures: Vec<(&str, f64)> = figures.to_vec();
    figures.extend(limits.figures.iter().map(|(k, x)| (k.as_str(), *x)));
    if let Some(h) = held {
        figures.extend([
            ("cgroup_limit", h.limit as f64),
            ("cgroup_rate", h.rate),
            ("cgroup_limit_use", h.rate / h.limit as f64),
            ("throttled_share", all.wall.io_above_s / o.io_s.max(1e-12)),
        ]);
    }
    v.push(Verdict::new(kind, severity, message, &figures));
    // A limit held while another answer leads (a saturated CPU): said as well, when a good
    // part of the I/O time was held by it.
    if let Some(h) = held {
        if kind != VerdictKind::CgroupLimit
            && all.wall.io_above_s >= QUEUE_SHARE * o.io_s
            && o.io_s >= IO_SHARE * o.wall_s
        {
            v.push(Verdict::new(
                VerdictKind::CgroupLimit,
                Severity::Warning,
                format!("as well, {}", cgroup_message(h, all, o, &inside)),
                &figures,
            ));
        }
    }
    if kind != VerdictKind::HostQueueing
        && o.host_queue >= QUEUE_SHARE
        && o.io_s >= IO_SHARE * o.wall_s
    {
        v.push(Verdict::new(
            VerdictKind::HostQueueing,
            Severity::Warning,
            format!(
                "the host queues as well: {} of the I/O time is in the host's block queue{}",
                pct(o.host_queue),
                limits.text
            ),
            &figures,
        ));
    }
    v
}

/// The sum of consecutive spans: one span from the first one's start, as long as all together.
fn sum(spans: &[WatchSpan]) -> WatchSpan {
    let mut all = WatchSpan {
        start_s: spans.first().map_or(0.0, |s| s.start_s),
        ..Default::default()
    };
    for s in spans {
        all.syscalls += s.syscalls;
        all.syscall_ns += s.syscall_ns;
        all.block_requests += s.block_requests;
        all.device_ns += s.device_ns;
        all.queue_ns += s.queue_ns;
        all.runq_ns += s.runq_ns;
        all.runq_io_ns += s.runq_io_ns;
        all.oncpu_ns += s.oncpu_ns;
        all.duration_s += s.duration_s;
        all.wall.add(&s.wall);
        all.sys_device_ns += s.sys_device_ns;
        all.sys_queue_ns += s.sys_queue_ns;
        all.overcharged += s.overcharged;
        all.runq_contended_ns += s.runq_contended_ns;
        all.bg_requests += s.bg_requests;
        all.bg_device_ns += s.bg_device_ns;
    }
    all
}

/// The shares of `spans` in at most `rows` rows, each row the exact sum of `per` consecutive
/// spans (the last may hold fewer); `per` is returned with them. For tables of long watches.
pub(crate) fn merged_shares(r: &Results, rows: usize) -> (usize, Vec<WatchShares>) {
    let Some(b) = r.watch.as_ref() else {
        return (1, Vec::new());
    };
    let spans = &b.intervals;
    let held = held_limit(b).is_some();
    let full = !disk_limits(r, b).full.is_empty();
    let per = spans.len().div_ceil(rows.max(1)).max(1);
    (
        per,
        spans
            .chunks(per)
            .map(|c| throttled(shares(&sum(c)), held, full))
            .collect(),
    )
}

/// PostgreSQL's WAL chains (issue 23, item 4), server by server: where the client backends
/// wait on WAL flushes for at least [`WAL_SHARE`] of their DB time, and flushes were traced,
/// what the flushes were made of. Waiting for a CPU at least as long as for the device and the
/// host queue together is the CPU; the device and queue at least half of a flush, the storage;
/// else what is above the block layer.
pub fn wal_chains(pg: &PgWaits) -> Vec<WalChain> {
    let mut servers: Vec<Option<u32>> = pg.roles.iter().map(|r| r.server).collect();
    servers.dedup();
    servers.sort();
    servers.dedup();
    let mut out = Vec::new();
    for server in servers {
        let roles = || pg.roles.iter().filter(move |r| r.server == server);
        let backends = || roles().filter(|r| r.role == "client backend");
        let db_s: f64 = backends().map(|r| r.db_s).sum();
        if db_s <= 0.0 {
            continue;
        }
        let event_s = |event: &str| -> f64 {
            backends()
                .flat_map(|r| r.rows.iter())
                .filter(|x| x.kind == PgWaitKind::Wait && x.event == event)
                .map(|x| x.time_s)
                .sum()
        };
        let mut c = WalChain {
            server,
            lwlock_share: event_s("LWLock:WALWrite") / db_s,
            sync_share: event_s("IO:WALSync") / db_s,
            write_share: event_s("IO:WALWrite") / db_s,
            ..Default::default()
        };
        if c.lwlock_share + c.sync_share < WAL_SHARE {
            continue;
        }
        let mut split = WallSplit::default();
        let mut by: Vec<(String, u64)> = Vec::new();
        for r in roles() {
            for x in r.rows.iter().filter(|x| x.event == "IO:WALSync") {
                split.add(&x.split);
                c.flushes += x.syscalls;
                if x.syscalls > 0 {
                    match by.iter_mut().find(|b| b.0 == r.role) {
                        Some(b) => b.1 += x.syscalls,
                        None => by.push((r.role.clone(), x.syscalls)),
                    }
                }
            }
        }
        if c.flushes == 0 {
            continue;
        }
        by.sort_by_key(|b| std::cmp::Reverse(b.1));
        c.flushes_by = by;
        let n = c.flushes as f64;
        c.flush_s = split.wall_s() / n;
        c.device_s = split.io_device_s / n;
        c.queue_s = split.io_queue_s / n;
        c.cpu_wait_s = (split.io_runnable_s + split.runnable_s) / n;
        c.cpu_s = (split.io_cpu_s + split.cpu_s) / n;
        c.other_s = (split.io_above_s + split.off_cpu_s) / n;
        let storage = c.device_s + c.queue_s;
        c.verdict = Some(if c.cpu_wait_s >= storage && c.cpu_wait_s > 0.0 {
            VerdictKind::CpuBound
        } else if storage >= 0.5 * c.flush_s {
            VerdictKind::StorageBound
        } else {
            VerdictKind::AboveBlockLayer
        });
        out.push(c);
    }
    out
}

/// The verdict of one WAL chain, in words.
fn wal_verdict(c: &WalChain, several: bool) -> Option<Verdict> {
    let kind = c.verdict?;
    let ms = |s: f64| format!("{:.2} ms", s * 1e3);
    let by = c
        .flushes_by
        .iter()
        .map(|(role, n)| format!("{n} by {role}"))
        .collect::<Vec<_>>()
        .join(", ");
    let conclusion = match kind {
        VerdictKind::CpuBound => "the CPU is saturated, the storage is fine",
        VerdictKind::StorageBound => "the storage's flushes are slow",
        _ => "the time is above the block layer (filesystem, journal), not in the device",
    };
    let server = match (several, c.server) {
        (true, Some(pid)) => format!(" (server {pid})"),
        _ => String::new(),
    };
    let message = format!(
        "backends wait for WAL flushes{server} (LWLock:WALWrite {}, IO:WALSync {} of DB time); \
         each flush (fdatasync under IO:WALSync, {} flushes: {by}) takes {}, of which {} in the \
         device, {} in the host queue, {} waiting for a CPU, {} on CPU and {} elsewhere \
         → {conclusion}",
        pct(c.lwlock_share),
        pct(c.sync_share),
        c.flushes,
        ms(c.flush_s),
        ms(c.device_s),
        ms(c.queue_s),
        ms(c.cpu_wait_s),
        ms(c.cpu_s),
        ms(c.other_s),
    );
    let figures = [
        ("wal_lwlock_share", c.lwlock_share),
        ("wal_sync_share", c.sync_share),
        ("wal_write_share", c.write_share),
        ("flushes", c.flushes as f64),
        ("flush_s", c.flush_s),
        ("flush_device_s", c.device_s),
        ("flush_queue_s", c.queue_s),
        ("flush_cpu_wait_s", c.cpu_wait_s),
        ("flush_cpu_s", c.cpu_s),
        ("flush_other_s", c.other_s),
    ];
    Some(Verdict::new(kind, Severity::Warning, message, &figures))
}

/// The watch analysis of `r`, when it holds a watch's budget.
pub(crate) fn watch_analysis(r: &Results) -> Option<WatchAnalysis> {
    let Some(budget) = r.watch.as_ref() else {
        return r.profile.as_ref().and_then(profile_analysis);
    };
    let budget: &WatchBudget = budget;
    let all = sum(&budget.intervals);
    let held = held_limit(budget);
    let limits = disk_limits(r, budget);
    let full = !limits.full.is_empty();
    let overall = throttled(shares(&all), held.is_some(), full);
    let mut verdicts = verdicts(&all, &overall, &limits, false, held.as_ref());
    let wal = budget.pg.as_ref().map(wal_chains).unwrap_or_default();
    // Right after the headline: the database's own chain says what the waits were made of.
    let at = verdicts.len().min(1);
    for (i, c) in wal.iter().enumerate() {
        if let Some(v) = wal_verdict(c, wal.len() > 1) {
            verdicts.insert(at + i, v);
        }
    }
    Some(WatchAnalysis {
        verdicts,
        intervals: budget
            .intervals
            .iter()
            .map(|s| throttled(shares(s), held.is_some(), full))
            .collect(),
        overall,
        wal,
    })
}

/// A profile's time as a watch span, so that `profile` and `watch` reach one verdict by one
/// analysis: every non-idle stack's weight in one part of [`WallSplit`] — on CPU, waiting for
/// a CPU, asleep — inside an I/O syscall (one of [`IO_SYSCALLS`] among its kernel frames) or
/// not. Asleep inside I/O in uninterruptible I/O wait is charged to the device (a profile
/// cannot split device from host queue; the verdict says so), other sleep inside I/O to above
/// the block layer. Waiting for a CPU counts as contended. `None` without off-CPU stacks (no
/// wall time to split).
pub(crate) fn profile_analysis(p: &StackProfile) -> Option<WatchAnalysis> {
    if !p.has_off_cpu() || p.source.producer != "bpf" {
        return None;
    }
    let in_io: Vec<bool> = p
        .frames
        .iter()
        .map(|f| {
            f.kind == FrameKind::Kernel
                && IO_SYSCALLS.iter().any(|s| {
                    f.name
                        .strip_suffix(s)
                        .is_some_and(|head| head.ends_with("sys_"))
                })
        })
        .collect();
    let mut w = WallSplit::default();
    let (mut runq, mut runq_io) = (0u64, 0u64);
    for s in p.stacks.iter().filter(|s| !s.idle) {
        let io = s.frames.iter().any(|&f| in_io[f as usize]);
        let x = s.weight_ns as f64 / 1e9;
        match (s.state, io) {
            (StackState::OnCpu, false) => w.cpu_s += x,
            (StackState::OnCpu, true) => w.io_cpu_s += x,
            (StackState::OffCpu(OffCpuReason::Runnable), io) => {
                runq = runq.saturating_add(s.weight_ns);
                if io {
                    runq_io = runq_io.saturating_add(s.weight_ns);
                    w.io_runnable_s += x;
                } else {
                    w.runnable_s += x;
                }
            }
            (StackState::OffCpu(OffCpuReason::IoWait), true) => w.io_device_s += x,
            (StackState::OffCpu(_), true) => w.io_above_s += x,
            (StackState::OffCpu(_), false) => w.off_cpu_s += x,
        }
    }
    let all = WatchSpan {
        duration_s: p.source.duration_s.unwrap_or(0.0),
        runq_ns: runq,
        runq_io_ns: runq_io,
        runq_contended_ns: runq,
        wall: w,
        ..Default::default()
    };
    let overall = shares(&all);
    Some(WatchAnalysis {
        verdicts: verdicts(
            &all,
            &overall,
            &DiskLimits {
                text: String::new(),
                figures: Vec::new(),
                full: String::new(),
            },
            true,
            None,
        ),
        intervals: Vec::new(),
        overall,
        wal: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::WallSplit;

    /// A span of one thread-second: `io` of it in I/O syscalls (device, queue, CPU wait, the
    /// rest above the block layer), `cpu` on CPU, `wait` runnable outside I/O (all contended),
    /// the rest off CPU.
    fn span(io: [f64; 3], io_total: f64, cpu: f64, wait: f64) -> WatchSpan {
        let [dev, queue, runq_io] = io;
        WatchSpan {
            syscalls: 10,
            syscall_ns: (io_total * 1e9) as u64,
            block_requests: 10,
            device_ns: (dev * 1e9) as u64,
            queue_ns: (queue * 1e9) as u64,
            runq_ns: ((wait + runq_io) * 1e9) as u64,
            runq_io_ns: (runq_io * 1e9) as u64,
            runq_contended_ns: ((wait + runq_io) * 1e9) as u64,
            wall: WallSplit {
                cpu_s: cpu,
                runnable_s: wait,
                off_cpu_s: 1.0 - io_total - cpu - wait,
                io_runnable_s: runq_io,
                io_device_s: dev,
                io_queue_s: queue,
                io_above_s: io_total - dev - queue - runq_io,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn the_verdict_starts_from_wall_time() {
        // Half the time in I/O, mostly in the device: storage.
        let s = shares(&span([0.4, 0.05, 0.0], 0.5, 0.3, 0.0));
        assert_eq!(s.verdict, Some(VerdictKind::StorageBound));
        assert!((s.device - 0.8).abs() < 1e-9 && (s.above_block - 0.1).abs() < 1e-9);
        let total = s.wall_cpu + s.wall_cpu_wait + s.wall_io + s.wall_off_cpu;
        assert!((total - 1.0).abs() < 1e-9, "{total}");
        let inside = s.device + s.host_queue + s.above_block + s.runq;
        assert!((inside - 1.0).abs() < 1e-9, "{inside}");
        let s = shares(&span([0.05, 0.35, 0.0], 0.5, 0.3, 0.0));
        assert_eq!(s.verdict, Some(VerdictKind::HostQueueing));
        let s = shares(&span([0.0, 0.0, 0.0], 0.5, 0.3, 0.0));
        assert_eq!(s.verdict, Some(VerdictKind::AboveBlockLayer));
        // 2 % of the time in I/O, all of it in the device: the storage is not the answer.
        let s = shares(&span([0.02, 0.0, 0.0], 0.02, 0.3, 0.0));
        assert_eq!(s.verdict, Some(VerdictKind::NotIo));
        // Waiting for a CPU 34 % of the time: the CPU, even with the device dominating the I/O.
        let s = shares(&span([0.3, 0.0, 0.0], 0.35, 0.2, 0.34));
        assert_eq!(s.verdict, Some(VerdictKind::CpuBound));
        assert!((s.wall_cpu_wait - 0.34).abs() < 1e-9);
        // Waiting inside the I/O for a CPU 20 % of it.
        let s = shares(&span([0.3, 0.0, 0.1], 0.5, 0.3, 0.0));
        assert_eq!(s.verdict, Some(VerdictKind::CpuBound));
        // Waiting as long as running, though both are small.
        let s = shares(&span([0.0, 0.0, 0.0], 0.0, 0.05, 0.05));
        assert_eq!(s.verdict, Some(VerdictKind::CpuBound));
        // Waiting for a CPU (8.5 %) less than running (13.7 %) but far longer than for the
        // I/O outside it (0.6 %): the CPU (seen in CI on pgbench beside busy loops).
        let s = shares(&span([0.0015, 0.0015, 0.034], 0.04, 0.137, 0.051));
        assert_eq!(s.verdict, Some(VerdictKind::CpuBound));
        // Idle threads: a few microseconds of waiting and of running are no saturation.
        let s = shares(&span([0.0, 0.0, 0.0], 0.0, 0.001, 0.001));
        assert_eq!(s.verdict, Some(VerdictKind::NotIo));
        // Nothing watched: no verdict.
        let mut idle = span([0.0, 0.0, 0.0], 0.0, 0.0, 0.0);
        idle.wall = WallSplit::default();
        assert_eq!(shares(&idle).verdict, None);
        // The analysis says so in one note (renderers word no verdict of their own); a watch
        // that saw the threads has no such note.
        let mut r = limited(idle, 0);
        r.watch.as_mut().unwrap().cgroups.clear();
        let a = watch_analysis(&r).unwrap();
        assert_eq!(a.verdicts.len(), 1);
        assert_eq!(a.verdicts[0].kind, VerdictKind::Note);
        assert!(
            a.verdicts[0].message.starts_with("none — "),
            "{:?}",
            a.verdicts
        );
        let seen = watch_analysis(&limited(span([0.4, 0.05, 0.0], 0.5, 0.3, 0.0), 0)).unwrap();
        assert!(seen.verdicts.iter().all(|v| v.kind != VerdictKind::Note));
    }

    /// A watch budget of one span and one cgroup limiting loop3 to 100 reads per second, which
    /// completed `busy` reads in the second it did I/O.
    fn limited(s: WatchSpan, busy: u64) -> Results {
        let mut r = Results::new(crate::results::Kind::Watch, vec![]);
        r.watch = Some(WatchBudget {
            intervals: vec![s],
            cgroups: vec![WatchCgroup {
                path: "/ctr".into(),
                version: 2,
                pids: vec![7],
                processes: 1,
                limits: vec![CgroupIoLimit {
                    disk: "loop3".into(),
                    dev: "7:3".into(),
                    riops: Some(100),
                    reads: busy,
                    busy_s: 1.0,
                    busy: [busy, 0, busy * 8192, 0],
                    ..Default::default()
                }],
                window_s: 1.5,
                pressure_some_s: None,
            }],
            ..Default::default()
        });
        r
    }

    #[test]
    fn a_cgroup_limit_run_at_is_named_and_only_then() {
        // Held above the block layer, the cgroup at its limit: the limit, not the device.
        let held = span([0.05, 0.0, 0.0], 0.9, 0.05, 0.0);
        let a = watch_analysis(&limited(held.clone(), 98)).unwrap();
        assert_eq!(a.overall.verdict, Some(VerdictKind::CgroupLimit));
        assert_eq!(a.intervals[0].verdict, Some(VerdictKind::CgroupLimit));
        // The live view names it the same way from the counters so far; well below the
        // limit, or with no limit, it stays above the block layer.
        let cgs = |busy| limited(held.clone(), busy).watch.unwrap().cgroups;
        assert_eq!(
            live_shares(&held, &cgs(98)).verdict,
            Some(VerdictKind::CgroupLimit)
        );
        assert_eq!(
            live_shares(&held, &cgs(20)).verdict,
            Some(VerdictKind::AboveBlockLayer)
        );
        assert_eq!(
            live_shares(&held, &[]).verdict,
            Some(VerdictKind::AboveBlockLayer)
        );
        let v = &a.verdicts[0];
        assert_eq!(v.kind, VerdictKind::CgroupLimit);
        assert!(
            v.message.contains("/ctr") && v.message.contains("riops=100"),
            "{}",
            v.message
        );
        assert!((v.figures["cgroup_rate"] - 98.0).abs() < 1e-9);
        assert!((v.figures["throttled_share"] - 0.85 / 0.9).abs() < 1e-9);
        // The same time above the block layer with the cgroup far below its limit: not it.
        let a = watch_analysis(&limited(held, 10)).unwrap();
        assert_eq!(a.overall.verdict, Some(VerdictKind::AboveBlockLayer));
        assert!(a
            .verdicts
            .iter()
            .all(|v| v.kind != VerdictKind::CgroupLimit));
        // A slow device under a limit it does not reach, or reaches while the device dominates:
        // the storage.
        let slow = span([0.8, 0.0, 0.0], 0.9, 0.05, 0.0);
        for busy in [10, 98] {
            let a = watch_analysis(&limited(slow.clone(), busy)).unwrap();
            assert_eq!(a.overall.verdict, Some(VerdictKind::StorageBound));
            assert_eq!(a.verdicts[0].kind, VerdictKind::StorageBound);
        }
    }

    #[test]
    fn a_profile_gets_the_watch_verdict_without_its_idle_time() {
        use crate::results::profile::{ProfileBuilder, ProfileSource};
        let mut b = ProfileBuilder::new();
        let main = b.frame("main", FrameKind::User, "prog");
        let pread = b.frame("__x64_sys_pread64", FrameKind::Kernel, "");
        let sched = b.frame("__schedule", FrameKind::Kernel, "");
        let epoll = b.frame("do_epoll_wait", FrameKind::Kernel, "");
        let s = |x: f64| (x * 1e9) as u64;
        b.add("p", vec![main], StackState::OnCpu, 10, s(0.3));
        b.add(
            "p",
            vec![main, pread, sched],
            StackState::OffCpu(OffCpuReason::IoWait),
            5,
            s(0.6),
        );
        b.add(
            "p",
            vec![main, pread, sched],
            StackState::OffCpu(OffCpuReason::Runnable),
            5,
            s(0.01),
        );
        // Ten seconds idle: kept (--keep-idle) but never counted.
        b.add_tagged(
            "p",
            vec![main, epoll, sched],
            StackState::OffCpu(OffCpuReason::Sleep),
            None,
            true,
            1,
            s(10.0),
        );
        let p = b.finish(ProfileSource {
            producer: "bpf".into(),
            off_cpu: true,
            ..ProfileSource::default()
        });
        let a = profile_analysis(&p).unwrap();
        let o = &a.overall;
        assert!((o.wall_s - 0.91).abs() < 1e-6, "{}", o.wall_s);
        assert!((o.io_s - 0.61).abs() < 1e-6);
        assert_eq!(o.verdict, Some(VerdictKind::StorageBound));
        assert!(a.verdicts[0].message.contains("does not tell them apart"));
        // Without off-CPU stacks there is no wall time to split: no verdict.
        let mut on = ProfileBuilder::new();
        let f = on.frame("main", FrameKind::User, "prog");
        on.add("p", vec![f], StackState::OnCpu, 1, 1);
        assert!(profile_analysis(&on.finish(ProfileSource {
            producer: "bpf".into(),
            ..ProfileSource::default()
        }))
        .is_none());
    }

    #[test]
    fn merged_rows_are_exact_sums() {
        let spans: Vec<WatchSpan> = (0..10)
            .map(|k| WatchSpan {
                start_s: k as f64,
                duration_s: 1.0,
                ..span([0.01 * k as f64, 0.0, 0.0], 0.2, 0.1, 0.0)
            })
            .collect();
        let b = Results {
            watch: Some(WatchBudget {
                intervals: spans.clone(),
                ..Default::default()
            }),
            ..Results::new(crate::results::Kind::Watch, Vec::new())
        };
        let (per, rows) = merged_shares(&b, 4);
        assert_eq!((per, rows.len()), (3, 4));
        assert_eq!(rows[0].syscalls, 30);
        assert!((rows[0].wall_s - 3.0).abs() < 1e-9);
        assert!((rows[0].io_s - 0.6).abs() < 1e-9);
        assert_eq!((rows[3].start_s, rows[3].duration_s), (9.0, 1.0));
        let (per, rows) = merged_shares(&b, 40);
        assert_eq!((per, rows.len()), (1, 10));
        assert_eq!(rows[4], shares(&spans[4]));
    }
}
