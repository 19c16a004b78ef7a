//! `iolens watch`: live processes traced with BPF, layer by layer.
//!
//! The kernel side (`bpf/watch.bpf.c`) times, for the watched processes, every traced I/O
//! syscall (entry to exit), every block request (submission → issue: host queue; issue →
//! completion: device service; attributed to the submitting process) and the scheduler's view
//! of their threads (run-queue wait after a wakeup or preemption, on-CPU slices, off-CPU spans).
//! Each finished event comes through one ring buffer (in per-CPU batches); here it becomes an
//! exact latency in the interval of its completion. Each thread's wall-time parts are summed in
//! the kernel and written once per interval, and its parts under each PostgreSQL wait event are
//! summed in a kernel map (`wait_parts`) read from here, so the result is the same per-interval HdrHistogram model every
//! other producer writes: a run `syscalls` (ops named by syscall), one run per block device
//! (`blk:read:queue`, `blk:read:device`, ...) and a run `cpu` (`cpu:runq`, `cpu:on`, `cpu:off`),
//! plus the per-interval time budget ([`WatchBudget`]) that the analysis turns into verdicts.

mod assemble;
mod cgroup;
pub mod filter;
pub mod grid;
pub mod io_record;
mod layout;
pub mod metrics;
pub mod own;
pub mod pg;
pub(crate) mod pgwait;
mod queries;
mod recording;
pub mod syscalls;
use assemble::Ending;
use recording::Recording;
pub mod relations;

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use aya::maps::{Array, MapData, PerCpuArray, RingBuf};
use hdrhistogram::Histogram;

use crate::bpf::{self, Attached, Global};
use crate::histogram::OpAcc;
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
    /// Keep the cumulative metrics of `--prometheus` ([`IntervalView::metrics`]).
    pub metrics: bool,
    /// `--record`: each traced positioned I/O syscall and io_uring read or write is kept, and
    /// the log is put here at the end ([`io_record`]).
    pub record: Option<RecordSink>,
    /// About how many intervals to keep (`--keep-intervals`): the newest half at full
    /// resolution, older ones rolled up into coarser ones ([`grid`]).
    pub keep_intervals: usize,
    /// The live view is drawn: its layers' histograms ([`IntervalView::layer_hist`],
    /// [`IntervalView::series`]) are recorded. They are in no result, so a watch that draws
    /// nothing (piped, `--no-progress`, `db run`) does not record them: one histogram record
    /// fewer per syscall, per run-queue wait and per watched block request.
    pub live: bool,
}

/// Where a watch puts its I/O log at its end (`--record`).
pub type RecordSink = std::sync::Arc<std::sync::Mutex<Option<io_record::IoLog>>>;

/// What the live view gets at the end of every interval: the interval's time budget, and each
/// layer's histograms on demand (built only when drawn; reading one records the values its open
/// intervals still hold back, hence `&mut`).
pub(crate) struct IntervalView<'a> {
    /// The interval's slot (see [`grid`]; the newest are one interval each).
    pub index: usize,
    rec: &'a mut Recording,
    cgroups: &'a cgroup::CgroupTracker,
    /// Events lost so far, by cause (read only with `metrics`).
    lost: &'a [(String, u64)],
}

impl IntervalView<'_> {
    /// The interval's time budget.
    pub(crate) fn span(&self) -> &WatchSpan {
        &self.rec.spans[self.index]
    }

    /// The limiting cgroups of the watched processes, their counters so far.
    pub(crate) fn cgroups(&self) -> Vec<crate::results::WatchCgroup> {
        self.cgroups.report()
    }

    /// Everything recorded so far as a metrics exposition (`None` unless
    /// [`WatchOptions::metrics`]).
    pub(crate) fn metrics(&self) -> Option<crate::results::exposition::Exposition> {
        let m = self.rec.metrics.as_ref()?;
        let done = (self.index + 1).min(self.rec.spans.len());
        Some(m.exposition(&self.rec.spans[..done], self.lost))
    }

    /// The layer's latency histogram of this interval.
    pub(crate) fn layer_hist(&mut self, layer: Layer) -> Result<Histogram<u64>> {
        self.rec.layers[layer as usize].hist_at(self.index)
    }

    /// The layer over the last `columns` intervals up to this one, one interval per column
    /// (heatmap material, newest on the right).
    pub(crate) fn series(&mut self, layer: Layer, columns: usize) -> Result<OpResult> {
        let from = (self.index + 1).saturating_sub(columns.max(1));
        let spans: Vec<(f64, f64)> = (from..=self.index).map(|i| self.rec.span_s(i)).collect();
        let parts = self.rec.layers[layer as usize].parts(from, spans.len())?;
        OpResult::of_parts(layer.name(), parts, &spans)
    }
}

const EV_SYSCALL: u32 = 1;
const EV_BLOCK: u32 = 2;
/// An on-CPU slice (`a`, ending at `ts`) and, with [`CPU_SPAN`], the off-CPU span before it.
const EV_CPU_ON: u32 = 3;
/// An io_uring read, write or sync of a watched process at its completion (`EV_URING`).
const EV_URING: u32 = 7;
/// A PostgreSQL process's title at its exit (`EV_TITLE`; `a` its parent).
const EV_TITLE: u32 = 8;
/// A process's name (`EV_NAME`: a title record, the name in `title`).
const EV_NAME: u32 = 9;
/// Flags of a cpu event's off-CPU span (`bpf/watch.bpf.c`): waited inside a traced syscall; the
/// CPU it got was running another task (contention, not an idle CPU waking); the event carries
/// the span before its slice (`c` its length, `d` its run-queue wait, `dev` its wait event),
/// which ended where the slice began (`ts - a`).
const CPU_IN_IO: u32 = 1;
const CPU_CONTENDED: u32 = 2;
const CPU_SPAN: u32 = 4;
const BLOCK_WATCHED: u32 = 1 << 16;
/// Set on a block event whose request a traced syscall waited for (see `BLOCK_WAITED`).
const BLOCK_WAITED: u32 = 1 << 17;
const LOST_CAUSES: [&str; 10] = [
    "ring buffer full",
    "syscall state map full",
    "block state map full",
    "task state map full",
    "block completion without a start seen",
    "block issue without a start seen",
    "block issue again without a completion seen",
    UNSEEN_COMPLETION,
    "syscall exit of a watched thread not seen",
    "wait-event map full",
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

/// The kernel side's counters of `lost` by cause (`LOST_CAUSES`), those of no target's: all
/// of a watch's (the slots per target are `--watch` on iolens' own load's, `own.rs`).
fn no_target_lost(ebpf: &aya::Ebpf) -> Result<Vec<u64>, bpf::BpfError> {
    bpf::sum_per_cpu_range(ebpf, "lost", 0..LOST_CAUSES.len() as u32)
}

/// Block requests the probes could not follow, by cause.
type Unfollowed = Vec<(String, f64)>;

/// The kernel side's per-slot counters by cause: events lost, and block requests the probes
/// could not follow (see [`unfollowed_slot`]); malformed records among the lost.
fn lost_by_cause(counts: &[u64], parse_errors: u64) -> (Vec<(String, u64)>, Unfollowed) {
    let mut lost = Vec::new();
    let mut unfollowed = Vec::new();
    for (i, &v) in counts.iter().enumerate() {
        if v > 0 {
            let cause = LOST_CAUSES.get(i).unwrap_or(&"other").to_string();
            if unfollowed_slot(i) {
                unfollowed.push((cause, v as f64));
            } else {
                lost.push((cause, v));
            }
        }
    }
    if parse_errors > 0 {
        lost.push(("malformed records".into(), parse_errors));
    }
    (lost, unfollowed)
}

/// One record of the ring buffer (`struct event` in `bpf/watch.bpf.c`).
#[derive(Clone, Debug)]
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
    /// Syscall: device and host-queue time charged to it, ns. Cpu event (with [`CPU_SPAN`]):
    /// the off-CPU span before the slice and its run-queue wait.
    c: u64,
    d: u64,
    /// Syscall: the file its descriptor named at entry (inode, filesystem device as the kernel
    /// numbers it, 0 and 0: none) and the descriptor.
    ino: u64,
    fdev: u32,
    fd: i32,
    /// Syscall: its fourth argument (the offset of a positioned read or write); io_uring: the
    /// offset its read or write named.
    pos: u64,
    /// A parts record (`struct parts_event`): the thread's wall-time parts over `[from, ts]`.
    parts: Option<(u64, [u64; PARTS])>,
    /// A title record (`struct title_event`): the process's title.
    title: Option<String>,
}

use layout::{
    BATCH_HEADER, BATCH_LEN, EVENT_LEN, PARTS, PARTS_LEN, SYS_BATCH, TITLE_AT, TITLE_REC_LEN,
};

impl Event {
    /// A syscall's or io_uring request's I/O for `--record`: `a` its latency, `b` its bytes.
    fn io(&self, failed: bool) -> io_record::Io {
        io_record::Io {
            end_ns: self.ts,
            lat_ns: self.a,
            pid: self.tgid,
            tid: self.tid,
            fdev: self.fdev,
            ino: self.ino,
            pos: self.pos,
            bytes: self.b,
            failed,
        }
    }

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
        if d.len() == TITLE_REC_LEN {
            let Some(mut e) = Event::parse(d) else {
                return false;
            };
            let n = (e.bytes as usize).min(TITLE_REC_LEN - TITLE_AT);
            let t = &d[TITLE_AT..TITLE_AT + n];
            let t = &t[..t.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)];
            e.title = Some(String::from_utf8_lossy(t).into_owned());
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
            pos: u64_at(EV_POS),
            parts: None,
            title: None,
        })
    }
}

/// The run of PostgreSQL wait-event spans: one op per wait event (`IO:DataFileRead`), each
/// span's length in its histogram.
pub const PG_WAIT_RUN: &str = "pg wait events";
/// Key of the run of PostgreSQL wait-event spans in [`Recording::ops`].
const PG_RUN: &str = "pg";

/// Change the kernel side's clock (`watch_clock`: the watch's start, interval, end).
fn set_clock(ebpf: &mut aya::Ebpf, f: impl FnOnce(&mut layout::WatchClock)) -> Result<()> {
    let mut m: Array<&mut MapData, layout::WatchClock> = Array::try_from(
        ebpf.map_mut("watch_clock")
            .context("BPF object lacks watch_clock")?,
    )?;
    let mut c = m.get(&0, 0)?;
    f(&mut c);
    m.set(0, c, 0)?;
    Ok(())
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
pub(crate) fn attach_one(
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

/// Load and attach the watch programs for `filters`. Returns the loaded object, the syscall
/// probes, and what was attached, as `name (tp_btf|raw_tp|tracepoint)`.
fn attach(filters: &Filters) -> Result<(aya::Ebpf, syscalls::SyscallProbes, Vec<String>)> {
    let mut ebpf = bpf::load_sized(
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
        // No targets of iolens' own here: the extent table (1.5 MiB at its full size) unused.
        &[("extents", 1)],
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
    let choice = syscalls::Choice::from_env()?;
    let syscall_probes = syscalls::SyscallProbes::attach(&mut ebpf, &btf, choice, &mut attached)?;
    attach_block(&mut ebpf, &btf, false, &mut attached)?;
    // sched_switch before the wakeups: a thread woken after sched_wakeup is attached and before
    // sched_switch is would be left runnable (its switch in and out unseen) until its next
    // event, for an idle server process the whole watch (seen: about one PostgreSQL process per
    // 1 s watch counted waiting for a CPU all along, which turned a CPU verdict into "I/O is
    // not where the time goes"). A wakeup missed the other way round only loses that one
    // run-queue wait: the switch in finds the thread and puts it on CPU.
    for tp in [
        "sched_switch",
        "sched_wakeup",
        "sched_wakeup_new",
        "sched_process_exit",
        "sched_process_fork",
        // Keeps the kernel side's cached verdicts true when a process's name changes.
        "task_rename",
    ] {
        attach_one(&mut ebpf, &btf, tp, true, &mut attached)?;
    }
    // io_uring requests by file (PostgreSQL 18's io_method=io_uring); a kernel without them
    // has no io_uring to trace.
    for tp in ["io_uring_submit_req", "io_uring_complete"] {
        attach_one(&mut ebpf, &btf, tp, false, &mut attached)?;
    }
    Ok((ebpf, syscall_probes, attached))
}

/// Watch until the duration ends, Ctrl-C, or (when only pids are watched) every pid has exited.
/// `on_attached` is called once the probes are in place; `view` at the end of every interval.
pub(crate) fn watch(
    opts: &WatchOptions,
    command_line: Vec<String>,
    on_attached: &mut dyn FnMut(&[String]),
    view: &mut dyn FnMut(&mut IntervalView),
) -> Result<Results> {
    let filters = &opts.filters;
    let (mut ebpf, mut syscall_probes, tracepoints) = attach(filters)?;
    let mut ring = RingBuf::try_from(ebpf.take_map("events").context("no events map")?)?;
    crate::interrupt::install();
    let interval_ns = opts.interval.as_nanos().max(1_000_000) as u64;
    let mut rec = Recording {
        interval_ns,
        // Set below, once the server processes' first wait events are in place.
        start_ns: 0,
        grid: grid::Grid::new(opts.keep_intervals),
        ops: Default::default(),
        spans: Vec::new(),
        processes: BTreeMap::new(),
        threads: opts.threads,
        layers: [OpAcc::new(), OpAcc::new(), OpAcc::new()],
        live: opts.live,
        devices: HashMap::new(),
        failed: None,
        thread_time: BTreeMap::new(),
        end_ns: u64::MAX,
        pg: pgwait::PgWaitAcc::default(),
        files: relations::FileTable::default(),
        queries: queries::QueryAcc::default(),
        metrics: opts.metrics.then(metrics::LiveMetrics::new),
        own: None,
        io_log: opts.record.as_ref().map(|_| io_record::IoLog::default()),
        folded: Default::default(),
        names: Default::default(),
        announced: Vec::new(),
        newest: 0,
        closed_behind: 0,
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
    // Bumped after entries are placed: the threads' copies of them are looked up again.
    let mut pg_gen: Array<MapData, u32> =
        Array::try_from(ebpf.take_map("pg_gen").context("BPF object lacks pg_gen")?)?;
    let bump = |gen: &mut Array<MapData, u32>| {
        let g = gen.get(&0, 0).unwrap_or(0);
        let _ = gen.set(0, g.wrapping_add(1), 0);
    };
    // A look at the server processes: all of /proc (`full`), or only the processes the
    // probes announced since the last look and the server processes not yet settled.
    let place_pg = |rec: &mut Recording,
                    map: &mut aya::maps::HashMap<MapData, u32, pg::PgPtrs>,
                    gen: &mut Array<MapData, u32>,
                    full: bool| {
        let mut placed = false;
        let announced = std::mem::take(&mut rec.announced);
        let new = if full {
            rec.pg.refresh(pg_watched)
        } else {
            rec.pg.refresh_some(&announced, pg_watched)
        };
        for (pid, addr) in new {
            // A process gone since: nothing to place.
            placed |= map.insert(pid, addr, 0).is_ok();
        }
        if placed {
            bump(gen);
        }
        for pm in rec.pg.postmasters() {
            rec.files.server(pm);
        }
    };
    // Server processes present at the start, with their wait event then: one the probes never
    // see (asleep for the whole watch: a launcher, an idle checkpointer) is given that time.
    let mut present_at_start: Vec<(u32, u32)> = Vec::new();
    // Each server process's wait event now: a thread asleep since before the watch slept under
    // it (filled before the start is set: only threads first seen woken after it use it).
    {
        let mut first: aya::maps::HashMap<&mut MapData, u32, layout::FirstWev> =
            aya::maps::HashMap::try_from(
                ebpf.map_mut("pg_first_wev")
                    .context("BPF object lacks pg_first_wev")?,
            )?;
        for (pid, addr) in rec.pg.refresh(pg_watched) {
            let _ = pg_map.insert(pid, addr, 0);
            // Its status entry's change count first: a state that changes after it is read
            // changes the count too (`thread_wait_event` in bpf/watch.bpf.c). None known: 0
            // (a real count is even and seldom 0; a wrong one only leaves the slice unnamed).
            let cc = pg::read_backend_changecount(pid, &addr).unwrap_or(0);
            // A process gone since, or unreadable: its first sleep carries no event.
            if let Ok(info) = pg::read_wait_event(pid, &addr) {
                if info != 0 {
                    let _ = first.insert(pid, layout::FirstWev { info, cc }, 0);
                }
                present_at_start.push((pid, info));
            }
        }
        bump(&mut pg_gen);
        for pm in rec.pg.postmasters() {
            rec.files.server(pm);
        }
    }
    // The watch starts: the kernel side writes each thread's parts per interval from here.
    let started_wall = std::time::SystemTime::now();
    let start_ns = monotonic_ns();
    let t0 = Instant::now();
    rec.start_ns = start_ns;
    set_clock(&mut ebpf, |c| {
        c.start = start_ns;
        c.interval = interval_ns;
    })?;
    let mut pg_looked = Instant::now();
    let mut pg_scanned = Instant::now();
    // The cgroups limiting the watched processes' I/O: their counters from now on.
    let mut cgroups = cgroup::CgroupTracker::default();
    cgroups.look(filters.pids.iter().copied());
    let mut cgroups_read = Instant::now();
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
            rec.close_behind();
        });
        if n > 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Server processes started since (their forks inherit the address in the kernel; this
        // names their roles and finds new servers).
        if pg_looked.elapsed() >= Duration::from_millis(250) {
            // All of /proc once a second (a server started since whose processes the probes
            // have not seen yet); the processes the probes announced every 250 ms.
            let full = pg_scanned.elapsed() >= Duration::from_secs(1);
            if full {
                pg_scanned = Instant::now();
            }
            place_pg(&mut rec, &mut pg_map, &mut pg_gen, full);
            cgroups.look(rec.thread_time.values().map(|t| t.pid));
            // The wait-event parts of the processes gone: complete, and room in the map.
            let alive = |pid: u32| crate::sys::alive(pid);
            if let Err(e) = rec.drain_wait_parts(&mut ebpf, alive) {
                rec.failed.get_or_insert(e);
            }
            rec.fold_exited();
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
        let lost = if rec.metrics.is_some() && shown < now_k {
            lost_by_cause(&no_target_lost(&ebpf)?, parse_errors).0
        } else {
            Vec::new()
        };
        while shown < now_k {
            let slot = rec.grid.slot(shown as u64);
            rec.span(slot);
            view(&mut IntervalView {
                index: slot,
                rec: &mut rec,
                cgroups: &cgroups,
                lost: &lost,
            });
            shown += 1;
            if let Some(m) = rec.metrics.as_mut() {
                m.interval();
            }
        }
        // Intervals shown are done: keep them encoded (a late event reopens one), the older
        // ones rolled up.
        let done = rec.grid.slot(shown as u64);
        rec.close_before(done);
        rec.roll_up(done);
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
        if only_pids && filters.pids.iter().all(|&p| !crate::sys::alive(p)) {
            let since = *gone_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_millis(100) {
                end_reason = "exited";
                break;
            }
        }
    }
    // No time is accounted past the end in the kernel from here.
    let end_ns = monotonic_ns();
    set_clock(&mut ebpf, |c| c.end = end_ns)?;
    rec.end_ns = end_ns;
    // The roles of server processes started since the last look.
    place_pg(&mut rec, &mut pg_map, &mut pg_gen, true);
    let end_warnings = rec.drain_after_end(
        &mut ebpf,
        &mut syscall_probes,
        &mut ring,
        filters,
        present_at_start,
        &mut parse_errors,
    );
    // After the drain: a thread asleep for the whole watch has its time written only then (the
    // kernel writes a thread's parts when it next runs, or at the end).
    cgroups.look(rec.thread_time.values().map(|t| t.pid));
    let cgroups = cgroups.finish();
    let query_notes = sampler.map(|q| q.finish(&mut rec.queries, pg_watched));
    let mut lost_counts = no_target_lost(&ebpf)?;
    // Completions missed in the watch's last moments (no later request reused their address).
    let unseen = recording::missed_completions(
        &mut ebpf,
        start_ns,
        end_ns,
        recording::Missed::SyscallReturned,
    )?
    .iter()
    .sum::<u64>();
    if let Some(i) = LOST_CAUSES.iter().position(|&c| c == UNSEEN_COMPLETION) {
        if let Some(v) = lost_counts.get_mut(i) {
            *v += unseen;
        }
    }
    drop(syscall_probes);
    drop(ebpf);
    if let Some(e) = rec.failed.take() {
        return Err(e.context("cannot record the watch's histograms"));
    }
    if let (Some(sink), Some(mut log)) = (&opts.record, rec.io_log.take()) {
        log.roles(|pid| rec.pg.role_of(pid));
        log.start_ns = rec.start_ns;
        // Events lost, not block requests unfollowed: the syscalls the record misses.
        log.lost = lost_counts
            .iter()
            .enumerate()
            .filter(|&(i, _)| !unfollowed_slot(i) && LOST_CAUSES.get(i) != Some(&UNSEEN_COMPLETION))
            .map(|(_, &v)| v)
            .sum();
        if let Ok(mut s) = sink.lock() {
            *s = Some(log);
        }
    }

    rec.into_results(
        opts,
        command_line,
        started_wall,
        tracepoints,
        cgroups,
        Ending {
            reason: end_reason,
            warnings: end_warnings,
            parse_errors,
            lost_counts,
            query_notes,
        },
    )
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
