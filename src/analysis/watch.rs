//! The answer of `iolens watch`: where the watched processes' I/O time went.
//!
//! Input: the per-interval sums a watch records ([`WatchBudget`]): I/O syscall latency,
//! device service and host queue time of the block requests those processes issued, and their
//! threads' run-queue wait, with the part of it spent inside a traced I/O syscall. Method (seed
//! 000's layering, seed 003's CPU caveat): the syscall time is the whole. The part the block
//! layer accounts for is split into device service and host queue in their proportion (capped at
//! the syscall time: asynchronous I/O can spend block time outside any syscall); the run-queue
//! wait inside the syscalls (the I/O had completed, the thread waited for a CPU to return) is the
//! CPU's share; the rest is *above the block layer* (page cache, filesystem, locks). Run-queue
//! wait outside I/O syscalls (after a sleep, a lock, a timer) is reported beside it but is not
//! I/O time: a rate-limited or mostly idle process always has some, even on an idle host. The
//! dominant layer is the verdict, except that a CPU share of at least [`CPU_SHARE`] always gives
//! "the CPU is saturated; the storage may be fine".

use super::verdicts::{device_limit, in_device};
use crate::results::analysis::{Severity, Verdict, VerdictKind, WatchAnalysis, WatchShares};
use crate::results::{Results, WatchBudget, WatchSpan};

/// Share of I/O syscall time spent waiting for a CPU from which the CPU is the verdict.
pub const CPU_SHARE: f64 = 0.20;
/// Host-queue share from which a host-queueing warning is given even when it does not dominate.
pub const QUEUE_SHARE: f64 = 0.30;

/// The shares of one span.
pub fn shares(s: &WatchSpan) -> WatchShares {
    let sys = s.syscall_ns as f64;
    let blk = (s.device_ns + s.queue_ns) as f64;
    let in_block = blk.min(sys);
    let (device, queue) = if blk > 0.0 {
        (
            in_block * s.device_ns as f64 / blk,
            in_block * s.queue_ns as f64 / blk,
        )
    } else {
        (0.0, 0.0)
    };
    let runq_io = (s.runq_io_ns as f64).min(sys - in_block);
    let above = sys - in_block - runq_io;
    let mut out = WatchShares {
        start_s: s.start_s,
        duration_s: s.duration_s,
        syscalls: s.syscalls,
        syscall_s: sys / 1e9,
        runq_s: s.runq_ns as f64 / 1e9,
        runq_io_s: runq_io / 1e9,
        ..Default::default()
    };
    // The question is where I/O time went: without traced I/O there is no answer.
    if sys <= 0.0 {
        return out;
    }
    out.device = device / sys;
    out.host_queue = queue / sys;
    out.above_block = above / sys;
    out.runq = runq_io / sys;
    out.verdict = Some(if out.runq >= CPU_SHARE {
        VerdictKind::CpuBound
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
    });
    out
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// What held the host's block queue, disk by disk: how many requests (every process's, the
/// disk's `block DISK` run) were in each disk on average (Little's law over the watch) against
/// what the disk takes at once ([`device_limit`]); the figures as `in_flight:DISK` and
/// `driver_tags:DISK`.
fn disk_limits(r: &Results, budget: &WatchBudget) -> (String, Vec<(String, f64)>) {
    let mut text = String::new();
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
    }
    (text, figures)
}

/// The verdicts of the whole watch (`limits`: [`disk_limits`], said where the host queues;
/// its figures go with every verdict).
fn verdicts(
    all: &WatchSpan,
    o: &WatchShares,
    limits: &(String, Vec<(String, f64)>),
) -> Vec<Verdict> {
    let mut v = Vec::new();
    let Some(kind) = o.verdict else {
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
    ];
    let per_request_us = |ns: u64| {
        if all.block_requests > 0 {
            ns as f64 / all.block_requests as f64 / 1e3
        } else {
            0.0
        }
    };
    let message = match kind {
        VerdictKind::CpuBound => format!(
            "the CPU is saturated; the storage may be fine: the watched threads waited {:.3} s \
             for a CPU after their I/O had completed, {} of their I/O syscall time (device \
             service {}, above the block layer {})",
            o.runq_io_s,
            pct(o.runq),
            pct(o.device),
            pct(o.above_block)
        ),
        VerdictKind::StorageBound => format!(
            "the storage is slow: device service is {} of the watched processes' I/O time \
             ({:.1} µs per request over {} requests; host queue {}, above the block layer {}, \
             CPU run queue {})",
            pct(o.device),
            per_request_us(all.device_ns),
            all.block_requests,
            pct(o.host_queue),
            pct(o.above_block),
            pct(o.runq)
        ),
        VerdictKind::HostQueueing => format!(
            "the host queues: {} of the I/O time is spent in the host's block queue before the \
             device sees the request ({:.1} µs per request: I/O scheduler, queue-depth limits), \
             device service {}{}",
            pct(o.host_queue),
            per_request_us(all.queue_ns),
            pct(o.device),
            limits.0
        ),
        _ => format!(
            "the time is above the block layer: {} of the I/O syscall time was not spent in the \
             block layer (page cache, filesystem, locks), device service {}, CPU run queue {}",
            pct(o.above_block),
            pct(o.device),
            pct(o.runq)
        ),
    };
    let severity = if kind == VerdictKind::AboveBlockLayer {
        Severity::Info
    } else {
        Severity::Warning
    };
    let mut figures: Vec<(&str, f64)> = figures.to_vec();
    figures.extend(limits.1.iter().map(|(k, x)| (k.as_str(), *x)));
    v.push(Verdict::new(kind, severity, message, &figures));
    if kind != VerdictKind::HostQueueing && o.host_queue >= QUEUE_SHARE {
        v.push(Verdict::new(
            VerdictKind::HostQueueing,
            Severity::Warning,
            format!(
                "the host queues as well: {} of the I/O time is in the host's block queue{}",
                pct(o.host_queue),
                limits.0
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
    }
    all
}

/// The shares of `spans` in at most `rows` rows, each row the exact sum of `per` consecutive
/// spans (the last may hold fewer); `per` is returned with them. For tables of long watches.
pub(crate) fn merged_shares(spans: &[WatchSpan], rows: usize) -> (usize, Vec<WatchShares>) {
    let per = spans.len().div_ceil(rows.max(1)).max(1);
    (per, spans.chunks(per).map(|c| shares(&sum(c))).collect())
}

/// The watch analysis of `r`, when it holds a watch's budget.
pub(crate) fn watch_analysis(r: &Results) -> Option<WatchAnalysis> {
    let budget: &WatchBudget = r.watch.as_ref()?;
    let all = sum(&budget.intervals);
    let overall = shares(&all);
    Some(WatchAnalysis {
        verdicts: verdicts(&all, &overall, &disk_limits(r, budget)),
        intervals: budget.intervals.iter().map(shares).collect(),
        overall,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(sys: u64, dev: u64, queue: u64, runq_io: u64) -> WatchSpan {
        WatchSpan {
            syscalls: 10,
            syscall_ns: sys,
            block_requests: 10,
            device_ns: dev,
            queue_ns: queue,
            runq_ns: runq_io + 5000,
            runq_io_ns: runq_io,
            ..Default::default()
        }
    }

    #[test]
    fn the_dominant_layer_is_the_verdict() {
        let s = shares(&span(1000, 800, 100, 0));
        assert_eq!(s.verdict, Some(VerdictKind::StorageBound));
        assert!((s.device - 0.8).abs() < 1e-9 && (s.above_block - 0.1).abs() < 1e-9);
        let s = shares(&span(1000, 100, 700, 0));
        assert_eq!(s.verdict, Some(VerdictKind::HostQueueing));
        let s = shares(&span(1000, 0, 0, 10));
        assert_eq!(s.verdict, Some(VerdictKind::AboveBlockLayer));
        // Run-queue wait inside the syscalls at 20 % makes it the CPU even though the device
        // dominates; run-queue wait outside them (5 µs in every span here, five times the
        // syscall time of some) is not I/O time and never decides.
        let s = shares(&span(1000, 700, 0, 200));
        assert_eq!(s.verdict, Some(VerdictKind::CpuBound));
        assert!((s.runq - 0.2).abs() < 1e-9 && (s.above_block - 0.1).abs() < 1e-9);
        let s = shares(&span(1000, 800, 0, 150));
        assert_eq!(s.verdict, Some(VerdictKind::StorageBound));
        let sum = s.device + s.host_queue + s.above_block + s.runq;
        assert!((sum - 1.0).abs() < 1e-9, "{sum}");
        // Block time beyond the syscall time (asynchronous I/O) is capped.
        let s = shares(&span(100, 300, 100, 0));
        assert!((s.device + s.host_queue - 1.0).abs() < 1e-9 && s.above_block == 0.0);
        assert_eq!(shares(&span(0, 0, 0, 0)).verdict, None);
        assert_eq!(shares(&span(0, 0, 0, 500)).verdict, None);
    }

    #[test]
    fn merged_rows_are_exact_sums() {
        let spans: Vec<WatchSpan> = (0..10)
            .map(|k| WatchSpan {
                start_s: k as f64,
                duration_s: 1.0,
                ..span(1000 * (k + 1), 500 * (k + 1), 100, 0)
            })
            .collect();
        let (per, rows) = merged_shares(&spans, 4);
        assert_eq!((per, rows.len()), (3, 4));
        assert_eq!(rows[0].syscalls, 30);
        assert_eq!(rows[0].syscall_s, (1000 + 2000 + 3000) as f64 / 1e9);
        assert_eq!((rows[3].start_s, rows[3].duration_s), (9.0, 1.0));
        let (per, rows) = merged_shares(&spans, 40);
        assert_eq!((per, rows.len()), (1, 10));
        assert_eq!(rows[4], shares(&spans[4]));
    }
}
