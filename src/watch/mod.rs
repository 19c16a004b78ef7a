//! `iolens watch`: live processes traced with BPF, layer by layer.
//!
//! The kernel side (`bpf/watch.bpf.c`) times, for the watched processes, every traced I/O
//! syscall (entry to exit), every block request (submission → issue: host queue; issue →
//! completion: device service; attributed to the submitting process) and the scheduler's view
//! of their threads (run-queue wait after a wakeup or preemption, on-CPU slices, off-CPU spans).
//! Each finished event comes through one ring buffer; here it becomes an exact latency in the
//! interval of its completion, so the result is the same per-interval HdrHistogram model every
//! other producer writes: a run `syscalls` (ops named by syscall), one run per block device
//! (`blk:read:queue`, `blk:read:device`, ...) and a run `cpu` (`cpu:runq`, `cpu:on`, `cpu:off`),
//! plus the per-interval time budget ([`WatchBudget`]) that the analysis turns into verdicts.

mod acc;
mod cgroup;
mod layout;
pub(crate) use acc::OpAcc;
pub mod filter;
pub mod own;
pub mod pg;
pub(crate) mod pgwait;
mod queries;
pub mod relations;

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use aya::maps::{Array, MapData, PerCpuArray, RingBuf};
use hdrhistogram::Histogram;

use crate::bpf::{self, Attached, Global};
use crate::results::{
    Kind, OpResult, Results, RunResult, WallSplit, WatchBudget, WatchProcess, WatchSpan,
    WatchThread,
};

pub use filter::{Device, Filters};

/// The syscalls traced, in result order; their op names are the syscall names.
pub const SYSCALLS: &[(&str, libc::c_long, bool)] = &[
    ("pread64", libc::SYS_pread64, true),
    ("pwrite64", libc::SYS_pwrite64, true),
    ("preadv", libc::SYS_preadv, true),
    ("preadv2", libc::SYS_preadv2, true),
    ("pwritev", libc::SYS_pwritev, true),
    ("pwritev2", libc::SYS_pwritev2, true),
    ("fsync", libc::SYS_fsync, false),
    ("fdatasync", libc::SYS_fdatasync, false),
    ("io_submit", libc::SYS_io_submit, false),
    ("io_getevents", libc::SYS_io_getevents, false),
    ("io_uring_enter", libc::SYS_io_uring_enter, false),
];

/// Names of the block-layer ops a request of kernel op `op` is recorded under: (queue, device).
fn block_ops(op: u32) -> (&'static str, &'static str, &'static str) {
    match op {
        0 => ("read", "blk:read:queue", "blk:read:device"),
        1 => ("write", "blk:write:queue", "blk:write:device"),
        2 => ("flush", "blk:flush:queue", "blk:flush:device"),
        3 => ("discard", "blk:discard:queue", "blk:discard:device"),
        _ => ("other", "blk:other:queue", "blk:other:device"),
    }
}

/// Run-queue wait of a thread that became runnable (woken or preempted), until it ran.
pub const CPU_RUNQ: &str = "cpu:runq";
/// One on-CPU slice of a watched thread.
pub const CPU_ON: &str = "cpu:on";
/// One off-CPU span of a watched thread (sleeping or waiting, run-queue wait included).
pub const CPU_OFF: &str = "cpu:off";

/// Which layer the live view's heatmap shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    /// I/O syscall latency.
    Syscall = 0,
    /// Block device service time.
    Block = 1,
    /// CPU run-queue wait.
    Cpu = 2,
}

impl Layer {
    /// The name of the live series.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Syscall => "syscalls",
            Layer::Block => "block device",
            Layer::Cpu => "run queue",
        }
    }
}

/// What to watch and for how long.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    pub(crate) filters: Filters,
    /// Stop after this long (`None`: until Ctrl-C, or until every watched pid has exited).
    pub duration: Option<Duration>,
    /// Length of the per-interval histograms.
    pub interval: Duration,
    /// Break the per-process syscall table down by thread.
    pub threads: bool,
    /// Set by another thread to end the watch (`db run --engine postgres` ends it with its
    /// run); `None`: only the duration, Ctrl-C or the pids' exit end it.
    pub(crate) stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The server's catalogs (`--dsn`): relations named, query ids sampled. `None`: files are
    /// named by their paths, and the output says names need a DSN.
    pub catalog: Option<relations::Catalog>,
}

/// What the live view gets at the end of every interval: the interval's time budget, and each
/// layer's histograms on demand (built only when drawn).
pub(crate) struct IntervalView<'a> {
    /// Interval number (0-based).
    pub index: usize,
    pub span: &'a WatchSpan,
    rec: &'a Recording,
    cgroups: &'a cgroup::CgroupTracker,
}

impl IntervalView<'_> {
    /// The limiting cgroups of the watched processes, their counters so far.
    pub(crate) fn cgroups(&self) -> Vec<crate::results::WatchCgroup> {
        self.cgroups.report()
    }

    /// The layer's latency histogram of this interval.
    pub(crate) fn layer_hist(&self, layer: Layer) -> Result<Histogram<u64>> {
        self.rec.layers[layer as usize].hist_at(self.index)
    }

    /// The layer over the last `columns` intervals up to this one, one interval per column
    /// (heatmap material, newest on the right).
    pub(crate) fn series(&self, layer: Layer, columns: usize) -> Result<OpResult> {
        let from = (self.index + 1).saturating_sub(columns.max(1));
        let len = self.rec.interval_ns as f64 / 1e9;
        let spans: Vec<(f64, f64)> = (from..=self.index).map(|i| (i as f64 * len, len)).collect();
        self.rec.layers[layer as usize].finish_range(layer.name(), from, &spans)
    }
}

const EV_SYSCALL: u32 = 1;
const EV_BLOCK: u32 = 2;
const EV_CPU_ON: u32 = 3;
const EV_CPU_OFF: u32 = 4;
/// A thread's parts under one PostgreSQL wait event (`EV_WAIT` in `bpf/watch.bpf.c`).
const EV_WAIT: u32 = 6;
/// An io_uring read, write or sync of a watched process at its completion (`EV_URING`).
const EV_URING: u32 = 7;
/// Flags of a cpu-off event (`bpf/watch.bpf.c`): waited inside a traced syscall; the CPU it got
/// was running another task (contention, not an idle CPU waking).
const CPU_IN_IO: u32 = 1;
const CPU_CONTENDED: u32 = 2;
const BLOCK_WATCHED: u32 = 1 << 16;
/// Set on a block event whose request a traced syscall waited for (see `BLOCK_WAITED`).
const BLOCK_WAITED: u32 = 1 << 17;
const LOST_CAUSES: [&str; 9] = [
    "ring buffer full",
    "syscall state map full",
    "block state map full",
    "task state map full",
    "block completion without a start seen",
    "block issue without a start seen",
    "block issue again without a completion seen",
    UNSEEN_COMPLETION,
    "syscall exit of a watched thread not seen",
];
/// A watched process's block request whose completion the probe never saw (the kernel did not
/// run it; see `LOST_BLOCK_UNSEEN_COMPLETION` in `bpf/watch.bpf.c`): lost, and said so.
const UNSEEN_COMPLETION: &str = "block completion of a watched request not seen";

/// Whether slot `i` of `lost` counts block requests the probes could not follow from start to
/// completion (not lost events: requests in flight when the probes attached, flush sequences
/// issued without a start); those become counters of the block runs, not warnings.
fn unfollowed_slot(i: usize) -> bool {
    (4..=6).contains(&i)
}

/// One record of the ring buffer (`struct event` in `bpf/watch.bpf.c`).
#[derive(Clone, Copy, Debug)]
struct Event {
    kind: u32,
    tgid: u32,
    tid: u32,
    sub: u32,
    a: u64,
    b: u64,
    ts: u64,
    dev: u32,
    bytes: u32,
    /// Syscall: device and host-queue time charged to it, ns.
    c: u64,
    d: u64,
    /// Syscall: the file its descriptor named at entry (inode, filesystem device as the kernel
    /// numbers it, 0 and 0: none) and the descriptor.
    ino: u64,
    fdev: u32,
    fd: i32,
    /// A parts record (`struct parts_event`): the thread's wall-time parts over `[from, ts]`.
    parts: Option<(u64, [u64; PARTS])>,
}

use layout::{BATCH_HEADER, BATCH_LEN, EVENT_LEN, PARTS, PARTS_LEN, SYS_BATCH};

impl Event {
    /// Every event of one ring-buffer record (a single event; a batch of syscall events, as
    /// written to the ring with only the events it holds, or as read whole from the per-CPU
    /// map); false when the record is neither.
    fn each(d: &[u8], mut f: impl FnMut(Event)) -> bool {
        if d.len() == EVENT_LEN {
            return Event::parse(d).map(f).is_some();
        }
        if d.len() == PARTS_LEN {
            let Some(mut e) = Event::parse(d) else {
                return false;
            };
            let u64_at = |o: usize| u64::from_ne_bytes(d[o..o + 8].try_into().unwrap_or([0; 8]));
            let mut parts = [0u64; PARTS];
            for (i, p) in parts.iter_mut().enumerate() {
                *p = u64_at(layout::PARTS_AT + i * 8);
            }
            e.parts = Some((u64_at(layout::PARTS_FROM), parts));
            f(e);
            return true;
        }
        if d.len() < BATCH_HEADER || d.len() > BATCH_LEN {
            return false;
        }
        let n = u32::from_ne_bytes(d[..4].try_into().unwrap_or([0; 4])) as usize;
        let held = BATCH_HEADER + n * EVENT_LEN;
        if n > SYS_BATCH || !(d.len() == held || d.len() == BATCH_LEN) {
            return false;
        }
        for k in 0..n {
            let at = BATCH_HEADER + k * EVENT_LEN;
            match Event::parse(&d[at..at + EVENT_LEN]) {
                Some(e) => f(e),
                None => return false,
            }
        }
        true
    }

    fn parse(d: &[u8]) -> Option<Event> {
        if d.len() < EVENT_LEN {
            return None;
        }
        let u32_at = |o: usize| u32::from_ne_bytes(d[o..o + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |o: usize| u64::from_ne_bytes(d[o..o + 8].try_into().unwrap_or([0; 8]));
        use layout::*;
        Some(Event {
            kind: u32_at(EV_KIND),
            tgid: u32_at(EV_TGID),
            tid: u32_at(EV_TID),
            sub: u32_at(EV_SUB),
            a: u64_at(EV_A),
            b: u64_at(EV_B),
            ts: u64_at(EV_TS),
            dev: u32_at(EV_DEV),
            bytes: u32_at(EV_BYTES),
            c: u64_at(EV_C),
            d: u64_at(EV_D),
            ino: u64_at(EV_INO),
            fdev: u32_at(EV_FDEV),
            fd: u32_at(EV_FD) as i32,
            parts: None,
        })
    }
}

/// Everything recorded so far.
struct Recording {
    interval_ns: u64,
    start_ns: u64,
    /// (run, op) → histograms; run "" is the syscall run, "cpu" the CPU run, else a device.
    ops: BTreeMap<String, BTreeMap<&'static str, OpAcc>>,
    spans: Vec<WatchSpan>,
    /// By (pid, tid); tid 0 when threads are not asked for.
    processes: BTreeMap<(u32, u32), WatchProcess>,
    threads: bool,
    /// The live view's layers (indexed by [`Layer`]), all recorded so that keys can switch.
    layers: [OpAcc; 3],
    /// Device number → its name and the name of its run of the watched processes' requests
    /// (shared, so that recording an event allocates nothing).
    devices: HashMap<u32, (Rc<str>, Rc<str>)>,
    /// The first failure to record (a histogram that would not decode): ends the watch.
    failed: Option<anyhow::Error>,
    /// Every watched thread seen, by tid.
    thread_time: BTreeMap<u32, WatchThread>,
    /// The watch's end (`u64::MAX` while it runs): parts past it are cut off.
    end_ns: u64,
    /// PostgreSQL's wait events of the watched server processes.
    pg: pgwait::PgWaitAcc,
    /// The files the traced syscalls were on.
    files: relations::FileTable,
    /// The query ids sampled (with a DSN).
    queries: queries::QueryAcc,
    /// The server process of iolens' own sampling connection: never counted.
    own: Option<u32>,
}

impl Recording {
    fn interval_of(&self, ts: u64) -> usize {
        (ts.saturating_sub(self.start_ns) / self.interval_ns) as usize
    }

    fn span(&mut self, k: usize) -> &mut WatchSpan {
        while self.spans.len() <= k {
            let i = self.spans.len() as f64;
            let len = self.interval_ns as f64 / 1e9;
            self.spans.push(WatchSpan {
                start_s: i * len,
                duration_s: len,
                ..Default::default()
            });
        }
        &mut self.spans[k]
    }

    /// Record one event of op `op` of run `run` ("" syscalls, "cpu", else a device) in
    /// interval `k`; allocates only the first time a run is seen.
    fn record(&mut self, run: &str, op: &'static str, k: usize, ns: u64, bytes: u64, err: bool) {
        let ops = match self.ops.get_mut(run) {
            Some(ops) => ops,
            None => self.ops.entry(run.to_string()).or_default(),
        };
        let r = ops
            .entry(op)
            .or_insert_with(OpAcc::new)
            .record(k, ns, bytes, err);
        self.keep_failure(r);
    }

    fn keep_failure(&mut self, r: Result<()>) {
        if let Err(e) = r {
            self.failed.get_or_insert(e);
        }
    }

    /// Encode every interval before `k`: the watch has moved past them.
    fn close_before(&mut self, k: usize) {
        for acc in self
            .ops
            .values_mut()
            .flat_map(|m| m.values_mut())
            .chain(self.layers.iter_mut())
        {
            acc.close_before(k);
        }
    }

    /// The device's name, and the name of its run of the watched processes' requests.
    fn device_names(&mut self, dev: u32) -> (Rc<str>, Rc<str>) {
        self.devices
            .entry(dev)
            .or_insert_with(|| {
                let name = filter::device_name(dev >> 20, dev & 0xfffff);
                let mine = format!("{name} (watched)");
                (Rc::from(name), Rc::from(mine))
            })
            .clone()
    }

    /// A thread's parts over `[from, ts]`: spread over the intervals it covers in proportion
    /// to their overlap (a record is one phase of the thread, on CPU or off it), cut to the
    /// watch's start and end.
    fn add_parts(&mut self, tgid: u32, tid: u32, from: u64, ts: u64, parts: &[u64; PARTS]) {
        let total = ts.saturating_sub(from);
        let lo = from.max(self.start_ns);
        let hi = ts.min(self.end_ns);
        if hi < lo || (hi == lo && total > 0) {
            return;
        }
        let thread = self.thread_time.entry(tid).or_insert_with(|| WatchThread {
            pid: tgid,
            tid,
            comm: filter::thread_comm(tgid, tid)
                .or_else(|| filter::comm_of(tgid))
                .unwrap_or_else(|| "(exited)".into()),
            ..Default::default()
        });
        let part = |k_from: u64, k_to: u64| -> WallSplit {
            let f = if total == 0 {
                1.0
            } else {
                (k_to - k_from) as f64 / total as f64
            };
            let mut w = WallSplit::default();
            for (dst, &ns) in w.parts_mut().into_iter().zip(parts.iter()) {
                *dst = ns as f64 * f / 1e9;
            }
            w
        };
        thread.watched_s += (hi - lo) as f64 / 1e9;
        let whole = part(lo, hi);
        thread.wall.add(&whole);
        self.pg.wall(tgid, &whole);
        let (k0, k1) = (self.interval_of(lo), self.interval_of(hi.max(lo + 1) - 1));
        for k in k0..=k1 {
            let a = (self.start_ns + k as u64 * self.interval_ns).max(lo);
            let b = (self.start_ns + (k as u64 + 1) * self.interval_ns).min(hi);
            let w = if k0 == k1 { whole } else { part(a, b.max(a)) };
            self.span(k).wall.add(&w);
        }
    }

    /// A thread's parts over `[from, ts]` under wait event `info`, cut to the watch's end.
    fn add_tagged(&mut self, tgid: u32, info: u32, from: u64, ts: u64, parts: &[u64; PARTS]) {
        let total = ts.saturating_sub(from);
        let inside = ts.min(self.end_ns).saturating_sub(from);
        if total > 0 && inside == 0 {
            return;
        }
        let f = if total == 0 {
            1.0
        } else {
            inside as f64 / total as f64
        };
        let mut w = WallSplit::default();
        for (dst, &ns) in w.parts_mut().into_iter().zip(parts.iter()) {
            *dst = ns as f64 * f / 1e9;
        }
        self.pg.tagged(tgid, info, &w);
    }

    fn add(&mut self, e: &Event, filters: &Filters) {
        if Some(e.tgid) == self.own {
            return;
        }
        if let Some((from, parts)) = &e.parts {
            if e.kind == EV_WAIT {
                self.add_tagged(e.tgid, e.dev, *from, e.ts, parts);
                return;
            }
            self.add_parts(e.tgid, e.tid, *from, e.ts, parts);
        }
        if e.ts < self.start_ns || e.ts > self.end_ns {
            return;
        }
        let k = self.interval_of(e.ts);
        match e.kind {
            EV_SYSCALL => {
                let Some(&(name, _, _)) = SYSCALLS.get((e.sub as usize).wrapping_sub(1)) else {
                    return;
                };
                let error = e.bytes != 0;
                if e.dev != 0 || self.pg.is_pg(e.tgid) {
                    self.pg.syscall(e.tgid, e.dev, e.a);
                }
                if e.ino != 0 {
                    if let Some(op) = relations::file_op(name) {
                        self.files
                            .syscall(e.tgid, e.fd, e.fdev, e.ino, op, e.a, e.b, e.c, e.d);
                    }
                }
                self.queries.syscall(e.tgid, e.a, e.c);
                self.record("", name, k, e.a, e.b, error);
                if !error {
                    self.layer_record(Layer::Syscall, k, e.a);
                }
                let span = self.span(k);
                span.syscalls += 1;
                span.syscall_ns += e.a;
                span.sys_device_ns += e.c;
                span.sys_queue_ns += e.d;
                if e.c + e.d > e.a {
                    span.overcharged += 1;
                }
                let tid = if self.threads { e.tid } else { 0 };
                let p = self
                    .processes
                    .entry((e.tgid, tid))
                    .or_insert_with(|| WatchProcess {
                        pid: e.tgid,
                        tid: (tid != 0).then_some(tid),
                        comm: filter::comm_of(e.tgid)
                            .or_else(|| filters.only_comm())
                            .unwrap_or_else(|| "(exited)".into()),
                        syscalls: BTreeMap::new(),
                    });
                // Looked up before inserting: no String allocated per event.
                let row = match p.syscalls.get_mut(name) {
                    Some(row) => row,
                    None => p.syscalls.entry(name.to_string()).or_insert([0; 3]),
                };
                row[0] += 1;
                row[1] += e.b;
                row[2] += e.a;
            }
            EV_URING => {
                // Its file is named as a syscall's is; its time (submission to completion) is
                // no thread's: the submitter waits for it, if at all, in its own syscalls.
                let op = match e.sub {
                    1 => relations::FileOp::Read,
                    2 => relations::FileOp::Write,
                    3 => relations::FileOp::Sync,
                    _ => return,
                };
                if e.ino != 0 && e.bytes == 0 {
                    self.files.uring(e.tgid, e.fdev, e.ino, op, e.a, e.b);
                }
            }
            EV_BLOCK => {
                if !filters.wants_device(e.dev) {
                    return;
                }
                let (dev, mine) = self.device_names(e.dev);
                let (_, queue_op, device_op) = block_ops(e.sub & 0xffff);
                self.record(&dev, queue_op, k, e.b, 0, false);
                self.record(&dev, device_op, k, e.a, e.bytes as u64, false);
                // The kernel side marks requests a watched process submitted.
                let watched = e.sub & BLOCK_WATCHED != 0;
                if watched || filters.all_processes() {
                    self.layer_record(Layer::Block, k, e.a);
                }
                if watched && !filters.all_processes() {
                    // The same device, only the requests the watched processes submitted.
                    self.record(&mine, queue_op, k, e.b, 0, false);
                    self.record(&mine, device_op, k, e.a, e.bytes as u64, false);
                }
                if watched {
                    let span = self.span(k);
                    span.block_requests += 1;
                    span.device_ns += e.a;
                    span.queue_ns += e.b;
                    if e.sub & BLOCK_WAITED == 0 {
                        span.bg_requests += 1;
                        span.bg_device_ns += e.a;
                    }
                }
            }
            EV_CPU_ON => {
                if self.pg.is_pg(e.tgid) {
                    self.pg.on_cpu(e.tgid);
                }
                self.record("cpu", CPU_ON, k, e.a, 0, false);
                self.span(k).oncpu_ns += e.a;
            }
            EV_CPU_OFF => {
                // The span's wait event, as PostgreSQL published it when the span began; only
                // its part inside the watch counts.
                let ns = e.a.min(e.ts - self.start_ns);
                if ns > 0 && (e.dev != 0 || self.pg.is_pg(e.tgid)) {
                    if let Some(op) = self.pg.off_cpu(e.tgid, e.dev) {
                        self.record(PG_RUN, op, k, ns, 0, false);
                    }
                }
                self.record("cpu", CPU_OFF, k, e.a, 0, false);
                if e.b > 0 {
                    self.record("cpu", CPU_RUNQ, k, e.b, 0, false);
                    self.layer_record(Layer::Cpu, k, e.b);
                    let span = self.span(k);
                    span.runq_ns += e.b;
                    if e.sub & CPU_CONTENDED != 0 {
                        span.runq_contended_ns += e.b;
                    }
                    if e.sub & (CPU_IN_IO | CPU_CONTENDED) == CPU_IN_IO | CPU_CONTENDED {
                        span.runq_io_ns += e.b;
                    }
                }
            }
            _ => {}
        }
    }

    fn layer_record(&mut self, layer: Layer, k: usize, ns: u64) {
        let r = self.layers[layer as usize].record(k, ns, 0, false);
        self.keep_failure(r);
    }
}

/// The run of PostgreSQL wait-event spans: one op per wait event (`IO:DataFileRead`), each
/// span's length in its histogram.
pub const PG_WAIT_RUN: &str = "pg wait events";
/// Key of the run of PostgreSQL wait-event spans in [`Recording::ops`].
const PG_RUN: &str = "pg";

use layout::{
    TASK_ACC, TASK_EMIT, TASK_LAST, TASK_LEN, TASK_N_DEV, TASK_N_QUEUE, TASK_OFF, TASK_SEG,
    TASK_SEG_WEV, TASK_STATE, TASK_SYS_TS, TASK_TAG, TASK_TAG_WEV, TASK_TGID, TASK_WEV,
};

/// The part a thread is in (`part_of` in `bpf/watch.bpf.c`).
fn part_of(in_syscall: bool, state: u32, n_dev: i32, n_queue: i32) -> usize {
    match (in_syscall, state) {
        (true, 0) => 3,
        (true, 1) => 4,
        (true, _) if n_dev > 0 => 5,
        (true, _) if n_queue > 0 => 6,
        (true, _) => 7,
        (false, 0) => 0,
        (false, 1) => 1,
        (false, _) => 2,
    }
}

/// A watched thread's state at the end: its parts not yet written to the ring, and the
/// off-CPU span it is in, if any.
struct Pending {
    tgid: u32,
    tid: u32,
    from: u64,
    to: u64,
    parts: [u64; PARTS],
    /// Start of the off-CPU span in progress (0: on CPU or runnable since its last switch-in),
    /// and the wait event it carries.
    off_ts: u64,
    wev: u32,
    /// Its parts under PostgreSQL wait events not yet written: (event, parts), up to two
    /// (the tagged parts, and the slice since the last observation point, which carries the
    /// event it began under: at the end nothing can change it any more).
    tags: Vec<(u32, [u64; PARTS])>,
}

/// Each watched thread's parts not yet written to the ring, up to `end_ns`.
fn pending_parts(ebpf: &aya::Ebpf, end_ns: u64) -> Result<Vec<Pending>> {
    let tasks: aya::maps::HashMap<&MapData, u32, [u8; TASK_LEN]> =
        aya::maps::HashMap::try_from(ebpf.map("tasks").context("BPF object lacks tasks")?)?;
    let mut out = Vec::new();
    for item in tasks.iter() {
        let Ok((tid, v)) = item else { continue };
        let u64_at = |o: usize| u64::from_ne_bytes(v[o..o + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |o: usize| u32::from_ne_bytes(v[o..o + 4].try_into().unwrap_or([0; 4]));
        let (last, from) = (u64_at(TASK_LAST), u64_at(TASK_EMIT));
        if from == 0 || from >= end_ns {
            continue;
        }
        let mut parts = [0u64; PARTS];
        for (i, p) in parts.iter_mut().enumerate() {
            *p = u64_at(TASK_ACC + i * 8);
        }
        let parts_at = |o: usize| {
            let mut p = [0u64; PARTS];
            for (i, x) in p.iter_mut().enumerate() {
                *x = u64_at(o + i * 8);
            }
            p
        };
        let mut seg = parts_at(TASK_SEG);
        if last < end_ns {
            let p = part_of(
                u64_at(TASK_SYS_TS) != 0,
                u32_at(TASK_STATE),
                u32_at(TASK_N_DEV) as i32,
                u32_at(TASK_N_QUEUE) as i32,
            );
            parts[p] += end_ns - last.max(from);
            seg[p] += end_ns - last.max(from);
        }
        let tags = [
            (u32_at(TASK_TAG_WEV), parts_at(TASK_TAG)),
            (u32_at(TASK_SEG_WEV), seg),
        ]
        .into_iter()
        .filter(|t| t.0 != 0)
        .collect();
        out.push(Pending {
            tgid: u32_at(TASK_TGID),
            tid,
            from,
            to: last.max(end_ns),
            parts,
            off_ts: u64_at(TASK_OFF),
            wev: u32_at(TASK_WEV),
            tags,
        });
    }
    Ok(out)
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the struct we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Attach tracepoint `tp`, noting it in `attached` as `name (tp_btf|raw_tp)`; a tracepoint
/// that is not `required` may be missing (false).
fn attach_one(
    ebpf: &mut aya::Ebpf,
    btf: &aya::Btf,
    tp: &str,
    required: bool,
    attached: &mut Vec<String>,
) -> Result<bool> {
    match bpf::attach_tracepoint(ebpf, btf, tp) {
        Ok(how) => {
            let kind = if how == Attached::Btf {
                "tp_btf"
            } else {
                "raw_tp"
            };
            attached.push(format!("{tp} ({kind})"));
            Ok(true)
        }
        Err(e) if required => Err(e.into()),
        Err(_) => Ok(false),
    }
}

/// Attach the block-layer programs (for the whole-host watch and for `--watch` on iolens' own
/// load): a request's start, issue, requeue and completion, and with `merges` the bio merges.
pub(crate) fn attach_block(
    ebpf: &mut aya::Ebpf,
    btf: &aya::Btf,
    merges: bool,
    attached: &mut Vec<String>,
) -> Result<()> {
    // Newer kernels (6.5+) mark a request's start where it is accounted; older ones only
    // show the insert into a scheduler queue.
    if !attach_one(ebpf, btf, "block_io_start", false, attached)? {
        attach_one(ebpf, btf, "block_rq_insert", true, attached)?;
    }
    for tp in ["block_rq_issue", "block_rq_requeue", "block_rq_complete"] {
        attach_one(ebpf, btf, tp, true, attached)?;
    }
    if merges {
        for tp in ["block_bio_backmerge", "block_bio_frontmerge"] {
            attach_one(ebpf, btf, tp, true, attached)?;
        }
    }
    Ok(())
}

/// Load and attach the watch programs for `filters`. Returns the loaded object and what was
/// attached, as `name (tp_btf|raw_tp)`.
fn attach(filters: &Filters) -> Result<(aya::Ebpf, Vec<String>)> {
    let mut ebpf = bpf::load(
        bpf::WATCH_OBJECT,
        &[
            Global {
                name: "watch_all",
                value: u32::from(filters.pids.is_empty() && filters.comms.is_empty()),
            },
            Global {
                name: "self_tgid",
                value: std::process::id(),
            },
        ],
    )?;
    {
        let mut idx: Array<&mut MapData, u32> = Array::try_from(
            ebpf.map_mut("syscall_index")
                .context("BPF object lacks syscall_index")?,
        )?;
        for (i, (_, nr, _)) in SYSCALLS.iter().enumerate() {
            idx.set(*nr as u32, i as u32 + 1, 0)?;
        }
    }
    bpf::set_process_filter(&mut ebpf, &filters.pids, &filters.comms)?;
    let btf = aya::Btf::from_sys_fs().map_err(|_| bpf::BpfError::NoBtf)?;
    let mut attached = Vec::new();
    for tp in ["sys_enter", "sys_exit"] {
        attach_one(&mut ebpf, &btf, tp, true, &mut attached)?;
    }
    attach_block(&mut ebpf, &btf, false, &mut attached)?;
    for tp in [
        "sched_wakeup",
        "sched_wakeup_new",
        "sched_switch",
        "sched_process_exit",
        "sched_process_fork",
    ] {
        attach_one(&mut ebpf, &btf, tp, true, &mut attached)?;
    }
    // io_uring requests by file (PostgreSQL 18's io_method=io_uring); a kernel without them
    // has no io_uring to trace.
    for tp in ["io_uring_submit_req", "io_uring_complete"] {
        attach_one(&mut ebpf, &btf, tp, false, &mut attached)?;
    }
    Ok((ebpf, attached))
}

/// Watch until the duration ends, Ctrl-C, or (when only pids are watched) every pid has exited.
/// `on_attached` is called once the probes are in place; `view` at the end of every interval.
pub(crate) fn watch(
    opts: &WatchOptions,
    command_line: Vec<String>,
    on_attached: &mut dyn FnMut(&[String]),
    view: &mut dyn FnMut(&IntervalView),
) -> Result<Results> {
    let filters = &opts.filters;
    let (mut ebpf, tracepoints) = attach(filters)?;
    let mut ring = RingBuf::try_from(ebpf.take_map("events").context("no events map")?)?;
    crate::interrupt::install();
    let started_wall = std::time::SystemTime::now();
    let interval_ns = opts.interval.as_nanos().max(1_000_000) as u64;
    let start_ns = monotonic_ns();
    let t0 = Instant::now();
    let mut rec = Recording {
        interval_ns,
        start_ns,
        ops: BTreeMap::new(),
        spans: Vec::new(),
        processes: BTreeMap::new(),
        threads: opts.threads,
        layers: [OpAcc::new(), OpAcc::new(), OpAcc::new()],
        devices: HashMap::new(),
        failed: None,
        thread_time: BTreeMap::new(),
        end_ns: u64::MAX,
        pg: pgwait::PgWaitAcc::default(),
        files: relations::FileTable::default(),
        queries: queries::QueryAcc::default(),
        own: None,
    };
    // Query ids, sampled from the server while the watch runs. Its own connection's server
    // process is iolens' load, not the watched one's: left out of everything counted.
    let sampler = opts.catalog.as_ref().map(queries::QuerySampler::start);
    let own = sampler.as_ref().and_then(|q| q.own_pid());
    rec.own = own;
    // The watched PostgreSQL server processes: where each publishes its wait event.
    let pg_watched = |pid: u32| {
        Some(pid) != own
            && (filters.all_processes()
                || filters.pids.contains(&pid)
                || filter::comm_of(pid).is_some_and(|c| filters.comms.contains(&c)))
    };
    let mut pg_map: aya::maps::HashMap<MapData, u32, pg::PgPtrs> = aya::maps::HashMap::try_from(
        ebpf.take_map("pg_wait_ptr")
            .context("BPF object lacks pg_wait_ptr")?,
    )?;
    let place_pg = |rec: &mut Recording, map: &mut aya::maps::HashMap<MapData, u32, pg::PgPtrs>| {
        for (pid, addr) in rec.pg.refresh(pg_watched) {
            // A process gone since: nothing to place.
            let _ = map.insert(pid, addr, 0);
        }
    };
    // Server processes present at the start, with their wait event then: one the probes never
    // see (asleep for the whole watch: a launcher, an idle checkpointer) is given that time.
    let mut present_at_start: Vec<(u32, u32)> = Vec::new();
    // Each server process's wait event now: a thread asleep since before the watch slept under
    // it (filled before the start is set: only threads first seen woken after it use it).
    {
        let mut first: aya::maps::HashMap<&mut MapData, u32, u32> = aya::maps::HashMap::try_from(
            ebpf.map_mut("pg_first_wev")
                .context("BPF object lacks pg_first_wev")?,
        )?;
        for (pid, addr) in rec.pg.refresh(pg_watched) {
            let _ = pg_map.insert(pid, addr, 0);
            // A process gone since, or unreadable: its first sleep carries no event.
            if let Ok(info) = pg::read_wait_event(pid, &addr) {
                if info != 0 {
                    let _ = first.insert(pid, info, 0);
                }
                present_at_start.push((pid, info));
            }
        }
    }
    let mut pg_looked = Instant::now();
    // The cgroups limiting the watched processes' I/O: their counters from now on.
    let mut cgroups = cgroup::CgroupTracker::default();
    cgroups.look(filters.pids.iter().copied());
    let mut cgroups_read = Instant::now();
    // Threads first seen being woken were asleep since the watch's start.
    {
        let mut ws: Array<&mut MapData, u64> = Array::try_from(
            ebpf.map_mut("watch_start")
                .context("BPF object lacks watch_start")?,
        )?;
        ws.set(0, start_ns, 0)?;
    }
    on_attached(&tracepoints);
    let only_pids = !filters.pids.is_empty() && filters.comms.is_empty();
    let mut shown = 0usize;
    let mut gone_since: Option<Instant> = None;
    let mut parse_errors = 0u64;
    let end_reason;
    loop {
        if let Some(q) = &sampler {
            q.drain(&mut rec.queries, pg_watched);
        }
        // The programs do not wake us per record (see emit() in watch.bpf.c): read the ring
        // in batches, every few milliseconds.
        let n = bpf::drain_ring(&mut ring, Duration::from_millis(20), |d| {
            if !Event::each(d, |e| rec.add(&e, filters)) {
                parse_errors += 1;
            }
        });
        if n > 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Server processes started since (their forks inherit the address in the kernel; this
        // names their roles and finds new servers).
        if pg_looked.elapsed() >= Duration::from_millis(250) {
            place_pg(&mut rec, &mut pg_map);
            cgroups.look(rec.thread_time.values().map(|t| t.pid));
            pg_looked = Instant::now();
        }
        if cgroups_read.elapsed() >= cgroup::SAMPLE {
            cgroups.sample();
            cgroups_read = Instant::now();
        }
        let elapsed = t0.elapsed();
        // Show every interval that ended more than a moment ago (events of other CPUs may
        // still be on their way for a few milliseconds).
        let now_k = ((monotonic_ns() - start_ns).saturating_sub(20_000_000) / interval_ns) as usize;
        while shown < now_k {
            rec.span(shown);
            view(&IntervalView {
                index: shown,
                span: &rec.spans[shown],
                rec: &rec,
                cgroups: &cgroups,
            });
            shown += 1;
        }
        // Intervals shown are done: keep them encoded (a late event reopens one).
        rec.close_before(shown);
        if let Some(e) = rec.failed.take() {
            return Err(e.context("cannot record the watch's histograms"));
        }
        if crate::interrupt::interrupted() {
            end_reason = "interrupted";
            break;
        }
        if opts
            .stop
            .as_ref()
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
        {
            end_reason = "stopped";
            break;
        }
        if let Some(d) = opts.duration {
            if elapsed >= d {
                end_reason = "duration";
                break;
            }
        }
        // Let the last events of the exited processes arrive before ending.
        if only_pids && filters.pids.iter().all(|&p| !filter::alive(p)) {
            let since = *gone_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_millis(100) {
                end_reason = "exited";
                break;
            }
        }
    }
    let end_ns = monotonic_ns();
    rec.end_ns = end_ns;
    cgroups.look(rec.thread_time.values().map(|t| t.pid));
    let cgroups = cgroups.finish();
    // The roles of server processes started since the last look.
    place_pg(&mut rec, &mut pg_map);
    // Detach sched_switch and sys_exit (both write the per-CPU syscall batches to the ring):
    // then whatever is still in the ring buffer, and last what the batches still hold,
    // happened before the end. Failing that, the measurement so far is still written, with a
    // warning.
    let mut end_warnings = Vec::new();
    let detached = bpf::detach_tracepoint(&mut ebpf, "sched_switch")
        .and_then(|()| bpf::detach_tracepoint(&mut ebpf, "sys_exit"));
    let mut late = |e: Event| {
        // A wait-event record written after the end may hold time before it (it is cut).
        if e.ts <= end_ns || e.kind == EV_WAIT {
            rec.add(&e, filters)
        }
    };
    while let Some(item) = ring.next() {
        if !Event::each(&item, &mut late) {
            parse_errors += 1;
        }
    }
    match detached {
        Err(e) => end_warnings.push(format!(
            "the last syscalls of each CPU (up to {SYS_BATCH} each) are left out: {e}"
        )),
        Ok(()) => {
            let batches = ebpf
                .map("sys_batches")
                .context("BPF object lacks sys_batches")
                .and_then(|m| Ok(PerCpuArray::<&MapData, [u8; BATCH_LEN]>::try_from(m)?))
                .and_then(|b| Ok(b.get(&0, 0)?));
            match batches {
                Ok(values) => {
                    for b in values.iter() {
                        if !Event::each(b, &mut late) {
                            parse_errors += 1;
                        }
                    }
                }
                Err(e) => end_warnings.push(format!(
                    "the last syscalls of each CPU (up to {SYS_BATCH} each) are left out: \
                     cannot read them: {e:#}"
                )),
            }
        }
    }
    // The threads' parts not yet written (each thread's last phase, up to the end).
    match pending_parts(&ebpf, end_ns) {
        Ok(pending) => {
            for p in pending {
                rec.add_parts(p.tgid, p.tid, p.from, p.to, &p.parts);
                for (info, parts) in &p.tags {
                    rec.pg.tagged(p.tgid, *info, &{
                        let mut w = WallSplit::default();
                        for (dst, &ns) in w.parts_mut().into_iter().zip(parts.iter()) {
                            *dst = ns as f64 / 1e9;
                        }
                        w
                    });
                }
                // Off CPU at the end (an idle backend, a session still sleeping): the span
                // so far, under its wait event.
                if p.off_ts != 0 && p.off_ts < end_ns && (p.wev != 0 || rec.pg.is_pg(p.tgid)) {
                    let from = p.off_ts.max(start_ns);
                    let k = rec.interval_of(end_ns - 1);
                    if let Some(op) = rec.pg.off_cpu(p.tgid, p.wev) {
                        rec.record(PG_RUN, op, k, end_ns - from, 0, false);
                    }
                }
            }
        }
        Err(e) => end_warnings.push(format!(
            "the watched threads' time since their last switch is left out: {e:#}"
        )),
    }
    // Server processes never seen (no switch, no wakeup, no syscall: asleep for the whole
    // watch, under the event they had at its start) and still there: the whole watch off CPU.
    for (pid, info) in present_at_start {
        if rec.thread_time.contains_key(&pid)
            || !std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            continue;
        }
        let span = end_ns.saturating_sub(start_ns);
        let mut parts = [0u64; PARTS];
        parts[2] = span;
        rec.add_parts(pid, pid, start_ns, end_ns, &parts);
        rec.pg.tagged(
            pid,
            info,
            &WallSplit {
                off_cpu_s: span as f64 / 1e9,
                ..Default::default()
            },
        );
        if let Some(op) = rec.pg.off_cpu(pid, info) {
            let k = rec.interval_of(end_ns - 1);
            rec.record(PG_RUN, op, k, span, 0, false);
        }
    }
    let query_notes = sampler.map(|q| q.finish(&mut rec.queries, pg_watched));
    let lost_counts = bpf::sum_per_cpu(&ebpf, "lost")?;
    drop(ebpf);
    if let Some(e) = rec.failed.take() {
        return Err(e.context("cannot record the watch's histograms"));
    }

    let total_s = (end_ns - start_ns) as f64 / 1e9;
    let n = (end_ns - start_ns).div_ceil(interval_ns).max(1) as usize;
    rec.span(n - 1);
    rec.spans.truncate(n);
    if let Some(last) = rec.spans.last_mut() {
        last.duration_s = (total_s - last.start_s).max(1e-6);
    }
    let bounds: Vec<(f64, f64)> = rec
        .spans
        .iter()
        .map(|s| (s.start_s, s.duration_s))
        .collect();

    let mut lost = BTreeMap::new();
    let mut unfollowed = BTreeMap::new();
    for (i, &v) in lost_counts.iter().enumerate() {
        if v > 0 {
            let cause = LOST_CAUSES.get(i).unwrap_or(&"other").to_string();
            if unfollowed_slot(i) {
                unfollowed.insert(cause, v as f64);
            } else {
                lost.insert(cause, v);
            }
        }
    }
    if parse_errors > 0 {
        lost.insert("malformed records".into(), parse_errors);
    }

    let mut res = Results::new(Kind::Watch, command_line);
    res.environment = crate::sys::environment();
    let started = humantime::format_rfc3339_millis(started_wall).to_string();
    let spec = serde_json::json!({
        "source": "watch",
        "pids": filters.pids,
        "comms": filters.comms,
        "devices": filters.devices.iter().map(|d| d.name.clone()).collect::<Vec<_>>(),
        "interval_s": interval_ns as f64 / 1e9,
    });
    let mut runs: BTreeMap<String, Vec<OpResult>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    // Syscall ops in the order of SYSCALLS, then devices, then CPU.
    let mut keys: Vec<(&String, &'static str)> = rec
        .ops
        .iter()
        .flat_map(|(run, ops)| ops.keys().map(move |op| (run, *op)))
        .collect();
    let rank = |k: &(&String, &'static str)| -> (u8, String, usize) {
        if k.0.is_empty() {
            let i = SYSCALLS.iter().position(|s| s.0 == k.1).unwrap_or(99);
            (0, String::new(), i)
        } else if k.0 == "cpu" {
            let i = [CPU_RUNQ, CPU_ON, CPU_OFF]
                .iter()
                .position(|s| *s == k.1)
                .unwrap_or(9);
            (2, String::new(), i)
        } else if k.0 == PG_RUN {
            (3, String::new(), 0)
        } else {
            (1, k.0.to_string(), 0)
        }
    };
    keys.sort_by_key(|k| (rank(k), k.1));
    for key in keys {
        let run = if key.0.is_empty() {
            "syscalls".to_string()
        } else if key.0 == "cpu" {
            "cpu".to_string()
        } else if key.0 == PG_RUN {
            PG_WAIT_RUN.to_string()
        } else {
            format!("block {}", key.0)
        };
        if !runs.contains_key(&run) {
            order.push(run.clone());
        }
        runs.entry(run)
            .or_default()
            .push(rec.ops[key.0][key.1].finish(key.1, &bounds)?);
    }
    let interrupted = end_reason == "interrupted";
    let mut warnings = end_warnings;
    if !lost.is_empty() {
        warnings.push(format!(
            "events were lost in the kernel: {}",
            lost.iter()
                .map(|(k, v)| format!("{v} ({k})"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !runs.contains_key("syscalls") {
        warnings.push(
            "no traced I/O syscall of a watched process completed while watching".to_string(),
        );
    }
    for name in order {
        let ops = runs.remove(&name).unwrap_or_default();
        res.runs.push(RunResult {
            name: name.clone(),
            phase: "watch".into(),
            spec: crate::results::Spec::of(&spec)?,
            started: started.clone(),
            duration_s: total_s,
            interval_s: interval_ns as f64 / 1e9,
            ops,
            interrupted,
            counters: lost
                .iter()
                .map(|(k, v)| (format!("lost: {k}"), *v as f64))
                .chain(
                    unfollowed
                        .iter()
                        .filter(|_| name.starts_with("block "))
                        .map(|(k, v)| (k.clone(), *v)),
                )
                .collect(),
            ..Default::default()
        });
    }
    res.warnings = warnings;
    // The files named from the catalogs (each database's), and the query ids sampled.
    let pg = &rec.pg;
    let mut relations = rec
        .files
        .finish(opts.catalog.as_ref(), &|pid| pg.role_of(pid));
    if let (Some(c), Some(notes)) = (&opts.catalog, query_notes) {
        let (queries, notes) = rec.queries.finish(c, notes);
        let r = relations.get_or_insert_with(Default::default);
        r.queries = queries;
        r.query_notes = notes;
    }
    let budget = WatchBudget {
        intervals: rec.spans.clone(),
        processes: rec.processes.into_values().collect(),
        tracepoints,
        lost,
        pids: filters.pids.clone(),
        comms: filters.comms.clone(),
        devices: filters.devices.iter().map(|d| d.name.clone()).collect(),
        threads: rec.thread_time.into_values().collect(),
        pg: rec.pg.finish(),
        cgroups,
        relations,
        disks: {
            let mut names: Vec<&str> = rec.devices.values().map(|(name, _)| &**name).collect();
            names.sort_unstable();
            names
                .into_iter()
                .filter_map(crate::sys::disk_queue)
                .collect()
        },
    };
    res.watch = Some(budget);
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(ts: u64) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [EV_SYSCALL, 7, 8, 1] {
            v.extend_from_slice(&x.to_ne_bytes());
        }
        for x in [1000u64, 8192, ts] {
            v.extend_from_slice(&x.to_ne_bytes());
        }
        v.resize(EVENT_LEN, 0);
        v
    }

    fn batch(n: u32, whole: bool) -> Vec<u8> {
        let mut v = n.to_ne_bytes().to_vec();
        v.extend_from_slice(&[0; 12]);
        for k in 0..n {
            v.extend(event(100 + k as u64));
        }
        if whole {
            v.resize(BATCH_LEN, 0xee);
        }
        v
    }

    #[test]
    fn profile_verdicts_know_every_traced_syscall() {
        let names: Vec<&str> = SYSCALLS.iter().map(|s| s.0).collect();
        assert_eq!(names, crate::analysis::watch::IO_SYSCALLS);
    }

    #[test]
    fn ring_records_hold_one_event_or_a_batch() {
        let mut ts = Vec::new();
        assert!(Event::each(&event(5), |e| ts.push(e.ts)));
        // As written to the ring (only the events held) and as read from the per-CPU map.
        assert!(Event::each(&batch(3, false), |e| ts.push(e.ts)));
        assert!(Event::each(&batch(2, true), |e| ts.push(e.ts)));
        assert!(Event::each(&batch(SYS_BATCH as u32, false), |_| {}));
        assert_eq!(ts, vec![5, 100, 101, 102, 100, 101]);
        // A count that disagrees with the record's length, or beyond a batch: malformed.
        let mut bad = batch(3, false);
        bad[0] = 4;
        assert!(!Event::each(&bad, |_| {}));
        let mut big = batch(2, true);
        big[0] = SYS_BATCH as u8 + 1;
        assert!(!Event::each(&big, |_| {}));
        assert!(!Event::each(&[0; 20], |_| {}));
        assert!(!Event::each(&[], |_| {}));
    }
}
