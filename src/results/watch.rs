//! The measurements of `iolens watch` that are not histograms ([`Results::watch`]): where the
//! watched threads' wall time went, per interval, thread and process, the cgroups that limit
//! them, and the PostgreSQL server's own wait events, relations and queries.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[allow(unused_imports)]
use super::*;
/// Where the watched processes' time went in one interval of `iolens watch` (the sums the
/// verdicts rest on; stored in [`Results::watch`] as a [`WatchBudget`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct WatchSpan {
    /// Start of the interval, seconds from the start of the watch.
    pub start_s: f64,
    /// Length of the interval in seconds.
    pub duration_s: f64,
    /// Traced I/O syscalls of watched processes that completed in the interval.
    pub syscalls: u64,
    /// Their summed latency (entry to exit), ns.
    pub syscall_ns: u64,
    /// Block requests issued by watched processes (attributed at submission).
    pub block_requests: u64,
    /// Their summed device service time (issue to complete), ns.
    pub device_ns: u64,
    /// Their summed host queue time (submission to issue), ns.
    pub queue_ns: u64,
    /// Summed run-queue wait of watched threads (runnable, waiting for a CPU), ns.
    pub runq_ns: u64,
    /// The part of `runq_ns` spent inside a traced I/O syscall (woken by the I/O's completion,
    /// waiting for a CPU before the syscall could return) while that CPU ran another task: CPU
    /// contention inflating I/O latency (an idle CPU's wake-up time is not counted), ns.
    /// Included in `syscall_ns`.
    #[serde(default)]
    pub runq_io_ns: u64,
    /// Summed on-CPU time of watched threads, ns.
    pub oncpu_ns: u64,
    /// Where the watched threads' wall time went in the interval (thread-seconds; the parts sum
    /// to the time the threads were watched in it).
    #[serde(default)]
    pub wall: WallSplit,
    /// Device and host-queue time charged to the traced syscalls that completed in the interval:
    /// for each, the union of its requests' time (never more than the syscall lasted), ns.
    #[serde(default)]
    pub sys_device_ns: u64,
    #[serde(default)]
    pub sys_queue_ns: u64,
    /// Syscalls charged more block-layer time than they lasted (an accounting fault: always 0).
    #[serde(default)]
    pub overcharged: u64,
    /// The part of `runq_ns` (inside I/O syscalls or not) during which the CPU the thread got
    /// was running another task: contention, not an idle CPU's wake-up time, ns.
    #[serde(default)]
    pub runq_contended_ns: u64,
    /// Background I/O: block requests of the watched processes that no syscall of theirs waited
    /// for (readahead, writeback, flushes), and their summed device service time, ns.
    #[serde(default)]
    pub bg_requests: u64,
    #[serde(default)]
    pub bg_device_ns: u64,
}

impl WatchSpan {
    /// Add the interval that follows this one (a long watch rolling up its older intervals):
    /// one interval as long as both, holding both's sums.
    pub fn absorb(&mut self, next: &WatchSpan) {
        // Every field named: one added later cannot be left out.
        let WatchSpan {
            start_s: _,
            duration_s,
            syscalls,
            syscall_ns,
            block_requests,
            device_ns,
            queue_ns,
            runq_ns,
            runq_io_ns,
            oncpu_ns,
            wall,
            sys_device_ns,
            sys_queue_ns,
            overcharged,
            runq_contended_ns,
            bg_requests,
            bg_device_ns,
        } = next;
        self.duration_s += duration_s;
        self.syscalls += syscalls;
        self.syscall_ns += syscall_ns;
        self.block_requests += block_requests;
        self.device_ns += device_ns;
        self.queue_ns += queue_ns;
        self.runq_ns += runq_ns;
        self.runq_io_ns += runq_io_ns;
        self.oncpu_ns += oncpu_ns;
        self.wall.add(wall);
        self.sys_device_ns += sys_device_ns;
        self.sys_queue_ns += sys_queue_ns;
        self.overcharged += overcharged;
        self.runq_contended_ns += runq_contended_ns;
        self.bg_requests += bg_requests;
        self.bg_device_ns += bg_device_ns;
    }
}

/// Where watched threads' wall time went, in thread-seconds. Every instant of a watched
/// thread is in exactly one part: on CPU, runnable (waiting for a CPU) or otherwise off CPU
/// (sleep, locks, client, idle) outside traced I/O syscalls; inside one, on CPU, runnable,
/// asleep while one of its requests was in the device, asleep while one was in the host's block
/// queue (none in the device), or asleep above the block layer (page cache, filesystem, locks).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct WallSplit {
    pub cpu_s: f64,
    pub runnable_s: f64,
    pub off_cpu_s: f64,
    pub io_cpu_s: f64,
    pub io_runnable_s: f64,
    pub io_device_s: f64,
    pub io_queue_s: f64,
    pub io_above_s: f64,
}

impl WallSplit {
    /// The parts in kernel order (`P_CPU` .. `P_IO_ABOVE` in `bpf/watch.bpf.c`).
    pub fn parts_mut(&mut self) -> [&mut f64; 8] {
        [
            &mut self.cpu_s,
            &mut self.runnable_s,
            &mut self.off_cpu_s,
            &mut self.io_cpu_s,
            &mut self.io_runnable_s,
            &mut self.io_device_s,
            &mut self.io_queue_s,
            &mut self.io_above_s,
        ]
    }

    /// The parts, in the same order.
    pub fn parts(&self) -> [f64; 8] {
        [
            self.cpu_s,
            self.runnable_s,
            self.off_cpu_s,
            self.io_cpu_s,
            self.io_runnable_s,
            self.io_device_s,
            self.io_queue_s,
            self.io_above_s,
        ]
    }

    /// Add `other`, part by part.
    pub fn add(&mut self, other: &WallSplit) {
        for (a, b) in self.parts_mut().into_iter().zip(other.parts()) {
            *a += b;
        }
    }

    /// The wall time accounted: the sum of the parts.
    pub fn wall_s(&self) -> f64 {
        self.parts().iter().sum()
    }

    /// Time inside traced I/O syscalls.
    pub fn io_s(&self) -> f64 {
        self.io_cpu_s + self.io_runnable_s + self.io_device_s + self.io_queue_s + self.io_above_s
    }
}

/// One watched thread's time over the whole watch.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct WatchThread {
    pub pid: u32,
    pub tid: u32,
    /// The thread's name when first seen.
    pub comm: String,
    /// The time it was watched (from its first event, or the watch's start for a thread found
    /// asleep, to its exit or the watch's end), seconds.
    pub watched_s: f64,
    pub wall: WallSplit,
    /// Threads that exited during a long watch, folded into this one row of their name (pid
    /// and tid 0) to keep the table bounded; 0 for a thread's own row.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exited: u64,
}

/// One watched process's (or thread's) traced syscalls (by syscall) in an `iolens watch`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct WatchProcess {
    pub pid: u32,
    /// The thread, when the watch was asked for threads (`--threads`); else the whole process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<u32>,
    pub comm: String,
    /// Syscall name → (count, bytes, summed latency ns).
    pub syscalls: BTreeMap<String, [u64; 3]>,
    /// Processes (threads, with `--threads`) that exited during a long watch, folded into this
    /// one row of their name (pid 0) to keep the table bounded; 0 for a process's own row.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exited: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The measurements of an `iolens watch` that are not histograms: per-interval time sums of the
/// watched processes, per-process syscall tables, what was attached and what was lost.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct WatchBudget {
    /// Per interval, in order.
    pub intervals: Vec<WatchSpan>,
    /// Watched processes seen, by pid.
    pub processes: Vec<WatchProcess>,
    /// Tracepoints attached, as `name (tp_btf|raw_tp)`.
    pub tracepoints: Vec<String>,
    /// Events the kernel side could not deliver (full ring buffer or state map), by cause.
    pub lost: BTreeMap<String, u64>,
    /// The filters: pids, process names, devices (empty: the whole host).
    pub pids: Vec<u32>,
    pub comms: Vec<String>,
    pub devices: Vec<String>,
    /// How many requests each disk with traced requests takes at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<DiskQueue>,
    /// Every watched thread seen, with its wall-time split over the watch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<WatchThread>,
    /// PostgreSQL's own account of the watched server processes' time, when any was watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pg: Option<PgWaits>,
    /// The cgroups that limit the watched processes' block I/O (their own or an ancestor).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cgroups: Vec<WatchCgroup>,
    /// The watched PostgreSQL processes' I/O syscalls by the relation (or WAL, temporary file)
    /// they were on, when any was on a data directory's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relations: Option<PgRelations>,
}

/// A cgroup that limits the block I/O of watched processes in it or below it (cgroup v2
/// `io.max`, v1 `blkio.throttle.*`). Its throttle (blk-throttle) holds bios above the block
/// layer before they become requests: that time is in the syscalls, not in the device.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct WatchCgroup {
    /// Its path in its hierarchy (as in `/proc/PID/cgroup`).
    pub path: String,
    /// The hierarchy: 2 (`io.max`, `io.stat`) or 1 (`blkio.throttle.*`).
    pub version: u8,
    /// The first watched processes found in it or below it (at most
    /// [`WatchCgroup::PIDS_KEPT`]: a days-long watch of short-lived processes keeps no list of
    /// every one).
    pub pids: Vec<u32>,
    /// How many watched processes were found in it or below it (0 in files written before it
    /// was counted: then `pids` lists them all).
    #[serde(default)]
    pub processes: u64,
    /// Its limits, one row per device.
    pub limits: Vec<CgroupIoLimit>,
    /// Seconds between the first and the last reading of its counters (from when a watched
    /// process was first found in it to the watch's end).
    pub window_s: f64,
    /// Time some of its tasks stalled on I/O over the window (v2 `io.pressure`, "some"),
    /// seconds; absent without PSI or on v1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure_some_s: Option<f64>,
}

impl WatchCgroup {
    /// Most pids kept in [`WatchCgroup::pids`].
    pub const PIDS_KEPT: usize = 64;
}

/// One device's limits in a cgroup (`None`: unlimited), and what the cgroup completed on that
/// device over the window (`io.stat`, or v1 `blkio.throttle.io_serviced` / `io_service_bytes`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CgroupIoLimit {
    /// The device's kernel name (`vda`, `loop3`).
    pub disk: String,
    /// `MAJ:MIN`.
    pub dev: String,
    pub riops: Option<u64>,
    pub wiops: Option<u64>,
    /// Bytes per second.
    pub rbps: Option<u64>,
    pub wbps: Option<u64>,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Seconds from the first reading of its counters that saw I/O on the device to the last
    /// (read every 100 ms), and what it completed in between (reads, writes, read bytes,
    /// written bytes): its rate while it did I/O.
    #[serde(default)]
    pub busy_s: f64,
    #[serde(default)]
    pub busy: [u64; 4],
}

/// The watched PostgreSQL server processes' time in the database's own words: every slice of
/// their wall time (on CPU, runnable, inside an I/O syscall, off CPU) carries the wait event the
/// process had published (`my_wait_event_info`, read at each traced syscall's entry and each
/// switch-out: what `pg_stat_activity` shows), as PostgreSQL counts it: an event's time is all
/// the time it was set. Per role (client backend, walwriter, ...), a Method R profile: DB time =
/// CPU (on CPU under no event) + waiting for a CPU (runnable under no event) + each wait +
/// off-CPU time under no event; idle waits (`Client:ClientRead`, `Activity:*`) are kept apart.
/// Latency histograms of the off-CPU spans per event are the ops of the run `pg wait events`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PgWaits {
    /// Major versions of the servers seen.
    pub majors: Vec<u32>,
    /// Per server and role: client backends first, then most DB time first.
    pub roles: Vec<PgRoleWaits>,
    /// Server processes whose wait-event pointer could not be found, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
    /// Servers whose backends' transaction state cannot be read (`MyBEEntry` not exported, or
    /// its layout not measured for that version), with the reason: their `Client:ClientRead`
    /// is all counted idle, not split into idle and in transaction.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state_unread: Vec<String>,
}

/// One role's wait-event table, on one server.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PgRoleWaits {
    /// The server: its postmaster's pid (`None`: processes that exited before they were
    /// identified).
    pub server: Option<u32>,
    /// Its major version, when known.
    pub major: Option<u32>,
    /// `pg::Role::kind`: "client backend", "walwriter", ...
    pub role: String,
    /// For client backends and WAL senders: `user@database` (WAL senders: the user), from the
    /// process title; sessions of other users or databases are other tables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Processes of the role seen.
    pub processes: u32,
    /// Database time (CPU, waits, off CPU under no wait event), thread-seconds.
    pub db_s: f64,
    /// Idle time (`Client:ClientRead`, `Activity:*`), thread-seconds.
    pub idle_s: f64,
    /// Most time first.
    pub rows: Vec<PgWaitRow>,
}

/// What a row of the wait-event table is.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PgWaitKind {
    /// On CPU (no wait event while running).
    #[default]
    Cpu,
    /// Runnable, waiting for a CPU, under no wait event (a preempted process; PostgreSQL shows
    /// it as running).
    CpuWait,
    /// Off CPU under a wait event that counts as database time.
    Wait,
    /// Off CPU with no wait event published (preempted, page faults, waits PostgreSQL does not
    /// name): database time nobody named.
    Unnamed,
    /// Off CPU waiting for the client or for work (`Client:ClientRead`, `Activity:*`, the
    /// postmaster waiting for connections): not database time.
    Idle,
}

/// One wait event of one role.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PgWaitRow {
    /// `class:event` as the server names it (`IO:DataFileRead`); empty for CPU and unnamed rows.
    pub event: String,
    pub kind: PgWaitKind,
    /// Thread-seconds.
    pub time_s: f64,
    /// Share of the role's DB time (0..1); `None` for idle rows.
    pub share_of_db: Option<f64>,
    /// Off-CPU spans (on-CPU slices for the CPU row).
    pub count: u64,
    /// Traced I/O syscalls entered under this wait event, and their summed latency.
    pub syscalls: u64,
    pub syscall_s: f64,
    /// The row's time split by where the threads were (on CPU, runnable, in the device, ...):
    /// for an I/O event, the OS layers of its time.
    #[serde(default)]
    pub split: WallSplit,
}

/// The watched PostgreSQL processes' traced I/O syscalls (pread, pwrite, fsync…; not
/// io_uring or AIO submissions) by the file they were on, named as the server names it: each
/// syscall's file is exact (read by the kernel side through its descriptor), its relation named
/// from the catalogs of the database its path holds (`--dsn`), at the watch's end.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PgRelations {
    /// One row per relation and fork (segments summed), WAL, temporary files; most syscall
    /// time first.
    pub rows: Vec<PgRelationIo>,
    /// The databases whose catalogs named files: `name (oid N): K relation file(s) named`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolved: Vec<String>,
    /// What could not be named, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Query ids the watched backends were seen running (sampled from `pg_stat_activity`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queries: Vec<PgQueryIo>,
    /// How the query ids were sampled, and what could not be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query_notes: Vec<String>,
}

/// The traced I/O syscalls on one relation's fork (or WAL, temporary files, another file).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PgRelationIo {
    /// `schema.name`; `WAL (pg_wal)`; `base/DBOID/FILENODE` when not named.
    pub name: String,
    /// "table", "index on public.a", "TOAST table of public.a", "WAL", "temporary files"...
    pub kind: String,
    /// Its database's name (`(shared)` for shared catalogs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// "main", "free space map", "visibility map", "init"; empty for other files.
    #[serde(default)]
    pub fork: String,
    /// Files (segments) seen.
    pub files: u32,
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    /// fsync / fdatasync calls.
    pub syncs: u64,
    /// Summed syscall latency, seconds.
    pub syscall_s: f64,
    /// Device service and host-queue time charged to those syscalls (the union of the requests
    /// each waited for), seconds.
    pub device_s: f64,
    pub queue_s: f64,
    /// The same syscalls by the role of the process that made them (client backend, IO worker,
    /// checkpointer, background writer, walwriter, autovacuum worker...): who did the I/O.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_role: Vec<PgRelationRole>,
}

/// One role's part of a relation's traced syscalls.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PgRelationRole {
    /// As the process title names it: "client backend", "io worker", "checkpointer"...
    pub role: String,
    pub reads: u64,
    pub writes: u64,
    pub syncs: u64,
    /// Summed syscall latency, seconds.
    pub syscall_s: f64,
}

/// A query id the watched client backends were seen running, and the I/O syscalls they made
/// while it was the one last sampled.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PgQueryIo {
    /// `pg_stat_activity.query_id`.
    pub query_id: i64,
    /// The query's text from `pg_stat_statements` (one line, truncated), when it has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Samples in which an active backend was running it.
    pub samples: u64,
    /// Of those, samples in which it waited on an I/O event (`IO:*`).
    pub io_samples: u64,
    /// Traced I/O syscalls of backends whose last sample showed this query, their summed
    /// latency and the device time charged to them.
    pub syscalls: u64,
    pub syscall_s: f64,
    pub device_s: f64,
}
