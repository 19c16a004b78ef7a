//! Verdicts: plain-language findings about where a run's latency went, with the figures behind
//! them.
//!
//! # CPU ([`cpu_verdict`])
//! Run-queue delay per I/O (`CpuStats::runq_us_per_io`, from schedstat) is time a session was
//! runnable but had no CPU; it is part of the latency the application measured. Compared with
//! the run's mean I/O latency (all ops but `sync`, weighted by count):
//! - share > [`RUNQ_SHARE_WARN`] (10 %) → warning `cpu-bound`: latency includes scheduling delay;
//! - otherwise, host busy > [`HOST_BUSY_WARN`] (85 %) → info `cpu-busy` (the CPUs were busy but
//!   the sessions hardly waited for one), or, when run-queue delay was not measured (no
//!   schedstat: `runq_delay_s` and `session_run_s` both 0), warning `cpu-bound`: latency *may*
//!   include scheduling delay.
//!
//! # Host queue versus device ([`host_queue_verdict`])
//! The application's mean read latency is set beside the device's own average time per read
//! (`/proc/diskstats`: ms reading / reads, counted from when the request entered the block layer,
//! so it includes the I/O scheduler's queue). First the two must describe the same reads: the
//! device's read bytes (or, without byte counts, its read count) relative to the application's:
//! - below [`CACHE_RATIO`] (0.5) → info `page-cache`: most reads were served from the page
//!   cache; the comparison does not apply;
//! - above [`FOREIGN_RATIO`] (2.0), or a device time above 1.2 × the application's → info
//!   `device-shared`: the device's counters include other I/O (other processes, readahead);
//!   the comparison is unreliable.
//!
//! The application latency compared is that of the reads that reached the device. When the
//! device did fewer reads than the application (ratio below [`DEVICE_ALL_RATIO`], 0.95: a
//! buffered run partly served by the page cache), cache hits are the fast reads, so the reads
//! that reached the device are the slowest `ratio` share of the application's histogram: their
//! mean (`app_device_mean_us`) is compared, not the mean over all reads, which cache hits pull
//! down. Each message says which reads were compared.
//!
//! Otherwise the host share is `(app mean − device await) / app mean`:
//! - share > [`HOST_SHARE_WARN`] (30 %) and the host part > [`HOST_US_MIN`] (10 µs) → warning
//!   `host-queueing`: the time was spent above the block layer (submission, scheduling,
//!   filesystem, host queue), not in the storage;
//! - else → info `storage-bound`: the device accounts for most of the latency.
//!
//! With the disk's request queue known (`nr_requests` from the results' target, per hardware
//! queue; [`RequestQueue`]), a `host-queueing` verdict says whether that queue was held full:
//! `/proc/diskstats`' requests in flight on average at least [`QUEUE_FULL`] of it. A request
//! takes its place in that queue when it enters the block layer, so a reader that finds it
//! full sleeps in the host above the block layer, uncounted by the device's time per read: the
//! verdict then names that wait (a full LUN queue, seed 001), and otherwise says the queue was
//! not full. A run over several targets on different disks gets this comparison per target.
//!
//! With the run's own block requests traced (`--watch`, [`RunResult::block`]), the comparison
//! is distribution against distribution instead ([`block_verdict`]): the application's read
//! latency, the device's service time (issue → completion) and the host block queue (submission
//! → issue) at p50 and p99, the application's taken over the reads that reached the device
//! (all of them, or when fewer bytes reached it than were read, the slowest share, as above).
//! The host part at a percentile is the application's latency less the device's; either
//! percentile above [`HOST_SHARE_WARN`] and [`HOST_US_MIN`] gives `host-queueing`, else
//! `storage-bound`; fewer than [`CACHE_RATIO`] of the bytes reaching the device gives
//! `page-cache`. With the disk's request queue known (the watch's `nr_requests`, else the
//! target's), the requests in it on average (Little's law over the traced requests' time from
//! entering the block layer to completion, [`in_request_queue`]) at least [`QUEUE_FULL`] of it
//! is a full queue: a `host-queueing` verdict then names it as the host's wait above the block
//! layer ([`request_queue_full`]), as the untraced comparison does; otherwise it says the queue
//! was not full.

use super::positive;

pub mod calibration;
pub use crate::results::analysis::{Severity, Verdict, VerdictKind};
use crate::results::RunResult;
use crate::units::{fmt_ns, fmt_rate, sig3};

/// Run-queue delay share of mean latency above which a run is called CPU-bound.
pub const RUNQ_SHARE_WARN: f64 = 0.10;
/// System-wide CPU busy share above which the host is called busy.
pub const HOST_BUSY_WARN: f64 = 0.85;
/// Device/application read ratio below which reads are taken as page-cache hits.
pub const CACHE_RATIO: f64 = 0.5;
/// Device/application read ratio above which the device's counters include other I/O.
pub const FOREIGN_RATIO: f64 = 2.0;
/// Device/application read ratio at or above which every application read is taken to have
/// reached the device (below it, only the slowest `ratio` share of them).
pub const DEVICE_ALL_RATIO: f64 = 0.95;
/// Share of read latency spent above the block layer that is reported as host queueing.
pub const HOST_SHARE_WARN: f64 = 0.30;
/// ... provided that part is at least this many µs (a syscall alone costs a few µs).
pub const HOST_US_MIN: f64 = 10.0;

impl Verdict {
    pub(crate) fn new(
        kind: VerdictKind,
        severity: Severity,
        message: String,
        figures: &[(&str, f64)],
    ) -> Self {
        Verdict {
            kind,
            severity,
            message,
            figures: figures.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }
}

/// Mean latency (ns) of the run's I/O ops (all but `sync`), weighted by count.
fn io_mean_ns(run: &RunResult) -> Option<f64> {
    let (n, t) = run
        .ops
        .iter()
        .filter(|o| o.op != "sync" && o.count > 0 && o.summary.mean_ns > 0.0)
        .fold((0.0, 0.0), |(n, t), o| {
            (n + o.count as f64, t + o.count as f64 * o.summary.mean_ns)
        });
    (n > 0.0).then(|| t / n)
}

fn pct(share: f64) -> String {
    sig3(share * 100.0)
}

/// Is the host CPU-bound, so that latency includes scheduling delay? See the module docs.
pub fn cpu_verdict(run: &RunResult) -> Option<Verdict> {
    let cpu = run.cpu.as_ref()?;
    let mean_ns = io_mean_ns(run)?;
    let runq_ns = cpu.runq_us_per_io * 1e3;
    let runq_share = runq_ns / mean_ns;
    let measured = cpu.runq_measured();
    let busy = cpu.host_busy > HOST_BUSY_WARN;
    let figures = [
        ("host_busy", cpu.host_busy),
        ("runq_us_per_io", cpu.runq_us_per_io),
        ("runq_share", runq_share),
        ("mean_latency_us", mean_ns / 1e3),
        ("cpu_us_per_io", cpu.us_per_io),
        ("cpus", cpu.cpus as f64),
    ];
    let busy_note = format!(
        "host CPU was {} % busy{}",
        pct(cpu.host_busy),
        if cpu.cpus > 0 {
            format!(" ({} CPUs)", cpu.cpus)
        } else {
            String::new()
        }
    );
    // The null engine does no I/O: no sentence about the storage applies to it.
    let no_io = run
        .spec
        .as_ref()
        .and_then(|s| s.other.get("engine"))
        .and_then(|v| v.as_str())
        == Some("null");
    let storage = if no_io {
        "the null engine does no I/O: this is iolens' own overhead"
    } else {
        MAY_BE_FASTER
    };
    if measured && runq_share > 1.0 {
        // A wait longer than the operation it would be part of is not inside it: it falls
        // between operations (think time, a database's own work), not in the latency.
        let msg = format!(
            "{busy_note}: the sessions waited {} per I/O for a CPU, more than the mean latency \
             of {}: the wait falls between operations, so the latency is not inflated by it",
            fmt_ns(runq_ns),
            fmt_ns(mean_ns)
        );
        return Some(Verdict::new(
            VerdictKind::CpuBusy,
            Severity::Info,
            msg,
            &figures,
        ));
    }
    if measured && runq_share > RUNQ_SHARE_WARN {
        let mut msg = format!(
            "latency at this step includes {} of scheduling delay per I/O ({} % of mean latency \
             {}); {storage}",
            fmt_ns(runq_ns),
            pct(runq_share),
            fmt_ns(mean_ns)
        );
        if busy {
            msg = format!("{busy_note}: {msg}");
        }
        return Some(Verdict::new(
            VerdictKind::CpuBound,
            Severity::Warning,
            msg,
            &figures,
        ));
    }
    if !busy {
        return None;
    }
    if measured {
        let msg = format!(
            "{busy_note}, but the sessions waited only {} per I/O for a CPU ({} % of mean latency \
             {}): latency is not inflated by scheduling",
            fmt_ns(runq_ns),
            pct(runq_share),
            fmt_ns(mean_ns)
        );
        Some(Verdict::new(
            VerdictKind::CpuBusy,
            Severity::Info,
            msg,
            &figures,
        ))
    } else {
        let msg = format!(
            "{busy_note} and run-queue delay was not measured: latency may include scheduling \
             delay; {storage}"
        );
        Some(Verdict::new(
            VerdictKind::CpuBound,
            Severity::Warning,
            msg,
            &figures,
        ))
    }
}

/// Was read latency spent in the host (above the block layer) or in the device? See the module
/// docs. `None` without a `read` op or device statistics.
pub fn host_queue_verdict(run: &RunResult) -> Option<Verdict> {
    host_queue_verdict_with(run, None)
}

/// A disk's request queue as sysfs described it: `nr_requests` per hardware queue. A request
/// takes one of them when it enters the block layer and gives it back at completion; a
/// submitter that finds none free sleeps in the host, above the block layer, before its
/// request exists, so that wait is in neither `/proc/diskstats`' time per read nor the traced
/// block queue (see [`QUEUE_FULL`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestQueue {
    /// `/sys/block/DISK/queue/nr_requests`.
    pub nr_requests: u32,
    /// Its hardware queues, where known (a run over several targets records them); 1 otherwise.
    pub hw_queues: u32,
}

impl RequestQueue {
    /// The request queue of `target`, with `queue`'s hardware queues where known.
    pub fn of(
        target: &crate::results::TargetInfo,
        queue: Option<&crate::results::DiskQueue>,
    ) -> Option<Self> {
        Some(RequestQueue {
            nr_requests: target.nr_requests.filter(|&n| n > 0)?,
            hw_queues: queue.map_or(1, |q| q.hw_queues.max(1)),
        })
    }

    /// The request queue of a disk as a block watch recorded it (`None` without `nr_requests`).
    pub fn of_disk(q: &crate::results::DiskQueue) -> Option<Self> {
        Some(RequestQueue {
            nr_requests: q.nr_requests.filter(|&n| n > 0)?,
            hw_queues: q.hw_queues.max(1),
        })
    }

    /// Requests it holds at once over all its hardware queues.
    pub fn capacity(&self) -> f64 {
        self.nr_requests as f64 * self.hw_queues as f64
    }

    fn describe(&self) -> String {
        if self.hw_queues > 1 {
            format!(
                "nr_requests {} on each of its {} hardware queues",
                self.nr_requests, self.hw_queues
            )
        } else {
            format!("nr_requests {}", self.nr_requests)
        }
    }
}

/// Share of a disk's request queue ([`RequestQueue::capacity`]) that, held on average over a
/// run (`/proc/diskstats`' weighted time over the window, which counts a request from when it
/// took its place in the queue), is a full queue: with requests completing and new ones taking
/// their places, a queue that is always full averages just under its size.
pub const QUEUE_FULL: f64 = 0.9;

/// [`host_queue_verdict`] knowing the disk's request queue: where the host's share comes with
/// the queue held full, the verdict says the reads waited in the host above the block layer
/// for a place in that queue (a full LUN queue), not in the device; where the queue was not
/// full, it says so.
pub fn host_queue_verdict_with(run: &RunResult, rq: Option<RequestQueue>) -> Option<Verdict> {
    let read = run.op("read").filter(|o| o.count > 0)?;
    if let Some(v) = block_verdict(run, rq) {
        return Some(v);
    }
    device_verdict(read, run.device.as_ref()?, run.cpu.as_ref(), rq)
}

/// Host versus device for the application reads `read` and their disk's counters `dev` (a
/// run's, or one target's of a run over several); `cpu` adds the run-queue delay, `rq` the
/// request queue's fill.
fn device_verdict(
    read: &crate::results::OpResult,
    dev: &crate::results::DeviceStats,
    cpu: Option<&crate::results::CpuStats>,
    rq: Option<RequestQueue>,
) -> Option<Verdict> {
    let app_ns = read.summary.mean_ns;
    if !positive(app_ns) {
        return None;
    }
    let name = if dev.device.is_empty() {
        "the device".to_string()
    } else {
        dev.device.clone()
    };
    let by_bytes = dev.read_bytes > 0 && read.bytes > 0;
    let ratio = if by_bytes {
        dev.read_bytes as f64 / read.bytes as f64
    } else {
        dev.reads as f64 / read.count as f64
    };
    let what = if by_bytes { "bytes" } else { "requests" };
    let await_ns = dev.read_await_us * 1e3;
    let mut figures = vec![
        ("app_reads", read.count as f64),
        ("device_reads", dev.reads as f64),
        ("device_read_ratio", ratio),
        ("app_mean_us", app_ns / 1e3),
        ("device_await_us", dev.read_await_us),
    ];
    if ratio < CACHE_RATIO {
        return Some(page_cache(ratio, what, read.count, &name, &figures));
    }
    if ratio > FOREIGN_RATIO {
        let msg = format!(
            "{name} did {}× the read {what} of this run (other processes, readahead or \
             filesystem metadata): the host/device latency comparison is unreliable",
            sig3(ratio)
        );
        return Some(Verdict::new(
            VerdictKind::DeviceShared,
            Severity::Info,
            msg,
            &figures,
        ));
    }
    if !positive(await_ns) {
        return None;
    }
    // Which application reads reached the device: all of them, or (partly cached) the slowest
    // `ratio` share, since page-cache hits are the fast ones.
    let served = ratio.min(1.0);
    let (cmp_ns, compared) = if served >= DEVICE_ALL_RATIO {
        (
            app_ns,
            format!("all {} application reads", fmt_rate(read.count as f64)),
        )
    } else {
        let k = ((served * read.count as f64).round() as u64).max(1);
        let tail = read.hist.decode().ok().and_then(|h| slowest_mean_ns(&h, k));
        let Some(tail_ns) = tail else {
            let msg = format!(
                "{} % of the read {what} of {} application reads reached {name}; without the \
                 application's latency histogram the reads that reached it cannot be told from \
                 page-cache hits, so the device's service time is not compared",
                pct(ratio),
                fmt_rate(read.count as f64)
            );
            return Some(Verdict::new(
                VerdictKind::PageCache,
                Severity::Info,
                msg,
                &figures,
            ));
        };
        figures.push(("device_served_share", served));
        figures.push(("app_device_mean_us", tail_ns / 1e3));
        (
            tail_ns,
            format!(
                "the slowest {} % of application reads ({} of {}, as many as reached {name} by \
                 {what}; the faster rest were page-cache hits, mean over all reads {})",
                pct(served),
                fmt_rate(k as f64),
                fmt_rate(read.count as f64),
                fmt_ns(app_ns)
            ),
        )
    };
    if await_ns > 1.2 * cmp_ns {
        let msg = format!(
            "{name} reports {} per read but {compared} took {}: the device's counters include \
             other I/O, so the host/device comparison is unreliable",
            fmt_ns(await_ns),
            fmt_ns(cmp_ns)
        );
        return Some(Verdict::new(
            VerdictKind::DeviceShared,
            Severity::Info,
            msg,
            &figures,
        ));
    }
    let host_ns = (cmp_ns - await_ns).max(0.0);
    let share = host_ns / cmp_ns;
    figures.push(("host_us_per_read", host_ns / 1e3));
    figures.push(("host_share", share));
    if share > HOST_SHARE_WARN && host_ns > HOST_US_MIN * 1e3 {
        let in_flight = dev.avg_in_flight;
        let full = rq.filter(|q| in_flight >= QUEUE_FULL * q.capacity());
        if let Some(q) = rq {
            figures.push(("nr_requests", q.nr_requests as f64));
            figures.push(("request_queue", q.capacity()));
            figures.push(("device_in_flight", in_flight));
            figures.push(("queue_full", if full.is_some() { 1.0 } else { 0.0 }));
        }
        let mut msg = match full {
            Some(q) => format!(
                "application reads that reached {name} took {} on average but {name} served \
                 them in {}: its request queue was full ({} requests in it on average, of {}), \
                 so {} % of the time ({} per read) was queued in the host above the block \
                 layer, waiting for a place in that queue before {name} saw the read, not in \
                 the storage; more LUNs, or a deeper queue where the device takes more \
                 (nr_requests, the driver's queue depth), relieve it",
                fmt_ns(cmp_ns),
                fmt_ns(await_ns),
                sig3(in_flight),
                q.describe(),
                pct(share),
                fmt_ns(host_ns)
            ),
            None => format!(
                "application reads that reached {name} took {} on average but {name} served \
                 them in {}: {} % of the time ({} per read) was spent in the host above the \
                 block layer (submission, scheduling, filesystem, host queue), not in the \
                 storage{}",
                fmt_ns(cmp_ns),
                fmt_ns(await_ns),
                pct(share),
                fmt_ns(host_ns),
                rq.map_or(String::new(), |q| format!(
                    "; its request queue was not full ({} requests in it on average, of {})",
                    sig3(in_flight),
                    q.describe()
                ))
            ),
        };
        if let Some(cpu) = cpu.filter(|c| c.runq_us_per_io > 0.0) {
            msg.push_str(&format!(
                "; run-queue delay accounts for {} per I/O of it",
                fmt_ns(cpu.runq_us_per_io * 1e3)
            ));
            figures.push(("runq_us_per_io", cpu.runq_us_per_io));
        }
        msg.push_str(&format!(
            " (compared: {name}'s time per read with {compared})"
        ));
        Some(Verdict::new(
            VerdictKind::HostQueueing,
            Severity::Warning,
            msg,
            &figures,
        ))
    } else {
        let msg = format!(
            "{name} accounts for {} % of the latency of the application reads that reached it \
             ({} of {}): {IN_STORAGE} (compared: {name}'s time per read with {compared})",
            pct(1.0 - share),
            fmt_ns(await_ns),
            fmt_ns(cmp_ns)
        );
        Some(Verdict::new(
            VerdictKind::StorageBound,
            Severity::Info,
            msg,
            &figures,
        ))
    }
}

/// Most reads never reached the device: `ratio` of the application's read `what` (bytes or
/// requests) of `reads` reads reached `name`.
fn page_cache(ratio: f64, what: &str, reads: u64, name: &str, figures: &[(&str, f64)]) -> Verdict {
    let msg = format!(
        "only {} % of the read {what} of {} application reads reached {name}; the rest were \
         served from the page cache, so the device's service time cannot be compared with the \
         application's latency",
        pct(ratio),
        fmt_rate(reads as f64)
    );
    Verdict::new(VerdictKind::PageCache, Severity::Info, msg, figures)
}

/// Host versus device from the traced block layer (`--watch`): distributions, not means. See
/// the module docs. `None` without a traced read on the device or an application read.
pub(crate) fn block_verdict(run: &RunResult, rq: Option<RequestQueue>) -> Option<Verdict> {
    let read = run.op("read").filter(|o| o.count > 0)?;
    let block = run.block.as_ref()?;
    // The disk's request queue: as the block watch read it beside the disk's hardware queues,
    // else as the results' target recorded it.
    let rq = block.queue.as_ref().and_then(RequestQueue::of_disk).or(rq);
    let dev_op = block.op("blk:read:device")?;
    let app = read.hist.decode().ok()?;
    let dev = dev_op.hist.decode().ok()?;
    let queue = block
        .op("blk:read:queue")
        .and_then(|o| o.hist.decode().ok())
        .unwrap_or_else(crate::histogram::new_histogram);
    let name = &block.device;
    let by_bytes = dev_op.bytes > 0 && read.bytes > 0;
    let ratio = if by_bytes {
        dev_op.bytes as f64 / read.bytes as f64
    } else {
        dev_op.count as f64 / read.count as f64
    };
    let what = if by_bytes { "bytes" } else { "requests" };
    let mut figures = vec![
        ("app_reads", read.count as f64),
        ("block_read_requests", dev_op.count as f64),
        ("device_read_ratio", ratio),
    ];
    if ratio < CACHE_RATIO {
        let traced = format!("{name} (traced block requests)");
        return Some(page_cache(ratio, what, read.count, &traced, &figures));
    }
    // The application reads that reached the device: all, or the slowest `served` share.
    let served = ratio.min(1.0);
    let all = served >= DEVICE_ALL_RATIO;
    let app_q = |q: f64| {
        let q = if all { q } else { 1.0 - served * (1.0 - q) };
        app.value_at_quantile(q) as f64
    };
    let (a50, a99) = (app_q(0.5), app_q(0.99));
    let (d50, d99) = (
        dev.value_at_quantile(0.5) as f64,
        dev.value_at_quantile(0.99) as f64,
    );
    let (q50, q99) = (
        queue.value_at_quantile(0.5) as f64,
        queue.value_at_quantile(0.99) as f64,
    );
    if !positive(a50) || !positive(a99) {
        return None;
    }
    let (h50, h99) = ((a50 - d50).max(0.0), (a99 - d99).max(0.0));
    let (s50, s99) = (h50 / a50, h99 / a99);
    figures.extend([
        ("app_p50_us", a50 / 1e3),
        ("app_p99_us", a99 / 1e3),
        ("device_p50_us", d50 / 1e3),
        ("device_p99_us", d99 / 1e3),
        ("queue_p50_us", q50 / 1e3),
        ("queue_p99_us", q99 / 1e3),
        ("host_share_p50", s50),
        ("host_share_p99", s99),
    ]);
    let compared = if all {
        format!("all {} application reads", fmt_rate(read.count as f64))
    } else {
        figures.push(("device_served_share", served));
        format!(
            "the slowest {} % of {} application reads, as many as reached {name} by {what}",
            pct(served),
            fmt_rate(read.count as f64)
        )
    };
    let dists = format!(
        "application reads p50 {} / p99 {}, {name}'s service time p50 {} / p99 {}, host block \
         queue p50 {} / p99 {} ({} traced block requests{on}; compared: {compared})",
        fmt_ns(a50),
        fmt_ns(a99),
        fmt_ns(d50),
        fmt_ns(d99),
        fmt_ns(q50),
        fmt_ns(q99),
        fmt_rate(dev_op.count as f64),
        on = if block.target_extents.is_some() {
            " to the target's own blocks"
        } else {
            ""
        },
    );
    let held = run
        .rates_known()
        .then(|| in_device(&block.ops, run.duration_s));
    if let Some(l) = held {
        figures.push(("device_in_flight", l));
    }
    if let Some(q) = &block.queue {
        figures.push(("driver_tags", q.driver_tags as f64));
    }
    // The requests in the disk's request queue on average: each holds its place from when it
    // entered the block layer (traced start) to its completion, queue and device time alike.
    let in_rq = run
        .rates_known()
        .then(|| in_request_queue(&block.ops, run.duration_s));
    let full = match (rq, in_rq) {
        (Some(q), Some(l)) => {
            let full = l >= QUEUE_FULL * q.capacity();
            figures.extend([
                ("nr_requests", q.nr_requests as f64),
                ("request_queue", q.capacity()),
                ("request_queue_in_flight", l),
                ("queue_full", if full { 1.0 } else { 0.0 }),
            ]);
            full.then(|| request_queue_full(name, q, l))
        }
        _ => None,
    };
    let queued = |s: f64, h: f64| s > HOST_SHARE_WARN && h > HOST_US_MIN * 1e3;
    if queued(s50, h50) || queued(s99, h99) {
        // Where the host's share is mostly the block queue, say what held the requests there;
        // a full request queue held the rest above the block layer, before the requests existed.
        let in_queue = q50 >= 0.5 * h50 || q99 >= 0.5 * h99;
        let limit = match (held, &block.queue, in_queue) {
            _ if full.is_some() => full,
            (Some(l), Some(q), true) => Some(device_limit(q, l)),
            _ => None,
        }
        .or_else(|| {
            let (q, l) = (rq?, in_rq?);
            Some(format!(
                "its request queue was not full ({} requests in it on average, of {})",
                sig3(l),
                q.describe()
            ))
        });
        let msg = format!(
            "{} % of the median read ({}) and {} % of the p99 read ({}) was spent in the host \
             above the device (block queue, submission, scheduling, filesystem), not in the \
             storage: {dists}{}",
            pct(s50),
            fmt_ns(h50),
            pct(s99),
            fmt_ns(h99),
            limit.map_or(String::new(), |l| format!(". {l}")),
        );
        Some(Verdict::new(
            VerdictKind::HostQueueing,
            Severity::Warning,
            msg,
            &figures,
        ))
    } else {
        let msg = format!(
            "{name} accounts for {} % of the median read and {} % of the p99 read: \
             {IN_STORAGE}: {dists}",
            pct(1.0 - s50),
            pct(1.0 - s99),
        );
        Some(Verdict::new(
            VerdictKind::StorageBound,
            Severity::Info,
            msg,
            &figures,
        ))
    }
}

/// How many requests were in the disk's request queue on average over `duration_s` seconds
/// (Little's law: the summed time of the traced requests from entering the block layer to
/// completion, `blk:<op>:queue` and `blk:<op>:device` of `ops`, over it).
pub(crate) fn in_request_queue(ops: &[crate::results::OpResult], duration_s: f64) -> f64 {
    let busy_ns: f64 = ops
        .iter()
        .filter(|o| o.op.ends_with(":device") || o.op.ends_with(":queue"))
        .map(|o| o.summary.mean_ns * o.count as f64)
        .sum();
    busy_ns / (duration_s * 1e9)
}

/// The words for `disk`'s request queue `q` held full, `l` requests in it on average: the
/// submitters that found no place in it waited in the host above the block layer, before
/// their requests existed (in neither the traced block queue nor the device's time).
pub(crate) fn request_queue_full(disk: &str, q: RequestQueue, l: f64) -> String {
    format!(
        "{disk}'s request queue was full ({} requests in it on average, of {}): the rest of \
         the reads waited in the host above the block layer for a place in that queue, before \
         the block layer or {disk} saw them, not in the storage; more LUNs, or a deeper queue \
         where the device takes more (nr_requests, the driver's queue depth), relieve it",
        sig3(l),
        q.describe()
    )
}

/// How many requests were in the device on average over `duration_s` seconds (Little's law:
/// the summed service time of the traced requests, `blk:<op>:device` of `ops`, over it).
pub(crate) fn in_device(ops: &[crate::results::OpResult], duration_s: f64) -> f64 {
    let busy_ns: f64 = ops
        .iter()
        .filter(|o| o.op.ends_with(":device"))
        .map(|o| o.summary.mean_ns * o.count as f64)
        .sum();
    busy_ns / (duration_s * 1e9)
}

/// What held requests in the host's block queue while `l` of them were in the disk `q` on
/// average: the driver's tags, all in use; or, with tags to spare, a virtio ring without
/// indirect descriptors (twice as many descriptors as tags, and two plus one per data segment
/// for each request), or the device or scheduler taking no more.
pub(crate) fn device_limit(q: &crate::results::DiskQueue, l: f64) -> String {
    let tags = q.driver_tags;
    let name = &q.disk;
    let t = tags as f64;
    if l >= 0.9 * t {
        format!(
            "{name} held {l:.0} requests on average, nearly all of its driver's {tags} tags: \
             the device's queue depth is the limit, and more concurrency only waits longer in \
             the host"
        )
    } else if q.virtio_indirect == Some(false) {
        let ring = 2 * tags;
        let one = ring / 3;
        format!(
            "{name} held {l:.0} requests on average (issue to traced completion), of its \
             driver's {tags} tags: it is a virtio disk without indirect descriptors, whose ring \
             of {ring} descriptors holds at most {one} requests of one data segment (3 \
             descriptors each) or {} of two, and the rest wait in the host (buffers on huge \
             pages keep a block in one segment){}",
            ring / 4,
            if l > one as f64 {
                format!(
                    "; the traced {l:.0} exceeds the ring's {one} because a completion is traced \
                     when a CPU gets to it, after the device has returned the request"
                )
            } else {
                String::new()
            }
        )
    } else {
        format!(
            "{name} held {l:.0} requests on average (issue to traced completion), of its \
             driver's {tags} tags: the device took no more at once, or the I/O scheduler held \
             requests back"
        )
    }
}

/// Mean (ns) of the `k` slowest values of `h`; `None` when it holds fewer than `k`.
pub(crate) fn slowest_mean_ns(h: &hdrhistogram::Histogram<u64>, k: u64) -> Option<f64> {
    if k == 0 || h.len() < k {
        return None;
    }
    let vals: Vec<(u64, u64)> = h
        .iter_recorded()
        .map(|v| {
            (
                h.median_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
        .collect();
    let (mut left, mut sum) = (k, 0f64);
    for &(v, c) in vals.iter().rev() {
        let n = c.min(left);
        sum += v as f64 * n as f64;
        left -= n;
        if left == 0 {
            break;
        }
    }
    Some(sum / k as f64)
}

/// All verdicts for one run, CPU first, decided together: a CPU-bound run whose device was
/// timed is not told both that "the storage may be faster than it looks" and that "the time is
/// spent in the storage, not the host" (issue 24). The scheduling delay is inside the
/// application's latency and outside the device's, so the device's own time is the storage's
/// figure, and the storage-bound sentence says the host's part includes that delay.
pub fn run_verdicts(run: &RunResult) -> Vec<Verdict> {
    run_verdicts_with(run, None)
}

/// [`run_verdicts`] knowing the run's target (`None`: unknown) as the results file recorded it:
/// what its device's link can carry (see [`cache_verdict_with`]) and its request queue (see
/// [`host_queue_verdict_with`]). A run over several targets whose disks differ has no one disk
/// view: each target's reads are set beside its own disk's, a verdict per target, named by it.
pub fn run_verdicts_with(
    run: &RunResult,
    target: Option<&crate::results::TargetInfo>,
) -> Vec<Verdict> {
    let link_mb_per_s = target.and_then(|t| t.link_mb_per_s);
    let mut cpu = cpu_verdict(run);
    let rq = match run.targets.first() {
        Some(t) if run.targets.len() > 1 => RequestQueue::of(&t.target, t.queue.as_ref()),
        _ => target.and_then(|t| RequestQueue::of(t, None)),
    };
    let mut host = host_queue_verdict_with(run, rq);
    if let (Some(c), Some(h)) = (cpu.as_mut(), host.as_mut()) {
        if c.kind == VerdictKind::CpuBound && h.kind == VerdictKind::StorageBound {
            let dev_ns = h
                .figures
                .get("device_await_us")
                .or(h.figures.get("device_p50_us"))
                .map(|us| us * 1e3);
            if let Some(dev_ns) = dev_ns {
                c.message = c.message.replace(
                    MAY_BE_FASTER,
                    &format!(
                        "the device's own time per read ({}) is free of it: that is the \
                         storage's figure",
                        fmt_ns(dev_ns)
                    ),
                );
            }
            h.message = h.message.replace(IN_STORAGE, IN_STORAGE_CPU_BOUND);
        }
    }
    // A cache that answered and the page-cache verdict say one thing: one verdict says it.
    let mut cache = cache_verdict_with(run, link_mb_per_s);
    if let (Some(h), Some(c)) = (host.as_mut(), cache.as_ref()) {
        if h.kind == VerdictKind::PageCache {
            h.message = format!("{}; {}", c.message, h.message);
            h.severity = Severity::Warning;
            for (k, v) in &c.figures {
                h.figures.entry(k.clone()).or_insert(*v);
            }
            cache = None;
        }
    }
    let mut out: Vec<Verdict> = [cpu, host, cache].into_iter().flatten().collect();
    if run.device.is_none() && run.block.is_none() {
        out.extend(target_verdicts(run));
    }
    out
}

/// Host versus device per target of a run over several targets on different disks (no one
/// disk view): each target's reads beside its own disk's counters and request queue.
fn target_verdicts(run: &RunResult) -> Vec<Verdict> {
    run.targets
        .iter()
        .filter_map(|t| {
            let read = t.ops.iter().find(|o| o.op == "read" && o.count > 0)?;
            let rq = RequestQueue::of(&t.target, t.queue.as_ref());
            let mut v = device_verdict(read, t.device.as_ref()?, run.cpu.as_ref(), rq)?;
            v.message = format!("target {}: {}", t.target.path, v.message);
            Some(v)
        })
        .collect()
}

/// Share of the working set resident in the page cache before a buffered run above which the
/// page cache is named as what answered.
pub const RESIDENT_CACHED: f64 = 0.9;

/// Did a cache answer this run's reads, so that its figures are the cache's, not the media's?
/// Evidence: the reads' median below [`super::modes::RAM_MAX_NS`] (faster than any device
/// answers); for a buffered run, fewer than [`CACHE_RATIO`] of the read bytes reaching the
/// device, or at least [`RESIDENT_CACHED`] of the working set in the page cache before the run.
/// Names the cache (this host's page cache for buffered runs; RAM in front of the device for
/// O_DIRECT ones) and the latency tiers of the reads. `None` without reads, for the null
/// engine, or without evidence.
pub fn cache_verdict(run: &RunResult) -> Option<Verdict> {
    cache_verdict_with(run, None)
}

/// [`cache_verdict`] with one more piece of evidence: reads moved faster than the device's
/// own link can carry (`link_mb_per_s`, [`crate::results::TargetInfo::link_mb_per_s`]), so
/// they came from a cache on the host's side of it.
pub fn cache_verdict_with(run: &RunResult, link_mb_per_s: Option<f64>) -> Option<Verdict> {
    let read = run.op("read").filter(|o| o.count > 0)?;
    let spec = run.spec.as_ref();
    let engine = spec
        .and_then(|s| s.other.get("engine"))
        .and_then(|v| v.as_str());
    if engine == Some("null") {
        return None;
    }
    let direct = spec
        .and_then(|s| s.other.get("direct"))
        .and_then(|v| v.as_bool());
    let p50 = read.summary.p50_ns as f64;
    let floor = super::modes::RAM_MAX_NS;
    let mut evidence = Vec::new();
    let mut figures = vec![("read_p50_us", p50 / 1e3), ("device_floor_us", floor / 1e3)];
    if positive(p50) && p50 < floor {
        evidence.push(format!(
            "the median read took {}, below {} (faster than any device answers)",
            fmt_ns(p50),
            fmt_ns(floor)
        ));
    }
    let read_mbps = if run.duration_unknown || !positive(run.duration_s) {
        0.0
    } else {
        read.bytes as f64 / run.duration_s / 1e6
    };
    if let Some(link) = link_mb_per_s.filter(|l| positive(*l) && read_mbps > *l) {
        evidence.push(format!(
            "reads moved {:.0} MB/s, more than the device's link carries ({:.0} MB/s)",
            read_mbps, link
        ));
        figures.push(("read_mb_per_s", read_mbps));
        figures.push(("link_mb_per_s", link));
    }
    let buffered = direct == Some(false);
    if buffered {
        if let Some(dev) = run
            .device
            .as_ref()
            .filter(|d| (read.bytes > 0 && d.read_bytes > 0) || d.reads == 0)
        {
            let ratio = dev.read_bytes as f64 / read.bytes.max(1) as f64;
            if ratio < CACHE_RATIO {
                let name = if dev.device.is_empty() {
                    "the device"
                } else {
                    &dev.device
                };
                evidence.push(format!(
                    "only {} % of the read bytes reached {name}",
                    pct(ratio)
                ));
                figures.push(("device_read_ratio", ratio));
            }
        }
        if let Some(pc) = run
            .page_cache
            .as_ref()
            .filter(|p| p.resident_before >= RESIDENT_CACHED)
        {
            evidence.push(format!(
                "{} % of the working set was in the page cache before the run",
                pct(pc.resident_before)
            ));
            figures.push(("resident_before", pc.resident_before));
        }
    }
    if evidence.is_empty() {
        return None;
    }
    let which = if buffered {
        "this host's page cache (buffered reads)"
    } else {
        "RAM in front of the media (a RAM disk, a hypervisor's or an array's cache: O_DIRECT \
         bypasses only this host's page cache)"
    };
    let tiers = read
        .hist
        .decode()
        .ok()
        .filter(|h| !h.is_empty())
        .map(|h| super::modes::tiers(&super::modes::find_modes(&h)))
        .map_or(String::new(), |t| format!("; latency tiers: {t}"));
    let fix = if buffered {
        "; measure the device with O_DIRECT (the default, without --buffered)"
    } else {
        ""
    };
    let msg = format!(
        "a cache answered these reads, not the media: {which}; {}: the figures are the \
         cache's{fix}{tiers}",
        evidence.join("; ")
    );
    Some(Verdict::new(
        VerdictKind::CacheAnswered,
        Severity::Warning,
        msg,
        &figures,
    ))
}

/// A USL fit looser than this (R²) says nothing about where the peak is.
pub const USL_R2_MIN: f64 = 0.9;

/// Why the random-read ramp stopped, in one sentence that agrees with the USL fit printed
/// beside it (issue 24: "the session ceiling was reached (more may be possible)" beside a fit
/// whose peak is 1 % above the measured maximum). Completes "the ramp stopped because …".
/// `measured` is the max IOPS found, `plateau` the growth threshold (0.05 = 5 %): a predicted
/// peak within it of the measured maximum is the measured maximum.
pub fn ramp_stop_sentence(
    stop: crate::results::analysis::StopReason,
    usl: Option<&crate::results::analysis::UslFit>,
    measured: Option<f64>,
    plateau: f64,
) -> String {
    use crate::results::analysis::StopReason;
    let why = stop.describe();
    if stop != StopReason::Ceiling {
        return why.to_string();
    }
    let (Some(u), Some(m)) = (usl, measured.filter(|m| positive(*m))) else {
        return why.to_string();
    };
    let ceiling = "the session ceiling was reached";
    if u.r2 < USL_R2_MIN {
        return format!(
            "{ceiling} (more may be possible: the USL fit, R² {:.2}, is too loose to say)",
            u.r2
        );
    }
    match (u.peak_x, u.peak_n) {
        (Some(x), Some(n)) if x <= m * (1.0 + plateau) => format!(
            "{ceiling}, and little more is possible: the USL fit puts the peak at {} IOPS ({:.0} \
             sessions), {} % above the measured {}, within the {} % plateau threshold",
            fmt_rate(x),
            n,
            sig3((x / m - 1.0).max(0.0) * 100.0),
            fmt_rate(m),
            sig3(plateau * 100.0)
        ),
        (Some(x), Some(n)) => format!(
            "{ceiling}; more is possible: the USL fit predicts a peak of {} IOPS at {:.0} \
             sessions ({} % above the measured {}): raise --max-sessions to measure it",
            fmt_rate(x),
            n,
            sig3((x / m - 1.0) * 100.0),
            fmt_rate(m)
        ),
        _ => format!(
            "{ceiling} while IOPS still grew (the USL fit shows no peak): more may be possible, \
             raise --max-sessions to measure it"
        ),
    }
}

/// The CPU verdict's warning about the storage, when the device's own time is not known.
const MAY_BE_FASTER: &str = "the storage may be faster than it looks";
/// The storage-bound conclusion.
const IN_STORAGE: &str = "the time is spent in the storage, not the host";
/// The storage-bound conclusion beside a CPU-bound verdict at the same run.
const IN_STORAGE_CPU_BOUND: &str = "most of the time is spent in the storage; the host's \
     smaller part includes the scheduling delay above";

#[cfg(test)]
mod tests;
