//! `watch --prometheus`: cumulative histograms of every layer (native buckets at schema 5 and
//! the classic ones they give), recorded as the events arrive, and made an [`Exposition`] at the
//! end of every interval.
//!
//! Memory is fixed whatever the watch's length: one [`PromHist`] (898 counts, 7.2 KB) per
//! series, and the series are bounded by their labels' limits: comm [`COMMS`], role [`ROLES`],
//! device [`DEVICES`], wait event [`WAITS`] distinct values, every later one `other`; ops are the
//! fixed sets of traced syscalls and block ops. Pids are never labels. The pid → (comm, role)
//! cache is emptied every interval (pids come and go; a role is named once the server's
//! process is identified).

use std::collections::HashMap;

use crate::histogram::classic::PromHist;
use crate::results::exposition::{Exposition, LabelValues, MetricKind, SampleValue};
use crate::results::WatchSpan;

/// Most distinct comm label values.
pub const COMMS: usize = 16;
/// Most distinct PostgreSQL role label values.
pub const ROLES: usize = 16;
/// Most distinct device label values.
pub const DEVICES: usize = 16;
/// Most distinct wait-event label values.
pub const WAITS: usize = 48;

/// Where block ops' numbers start (past every syscall's).
pub const BLOCK_OPS: u16 = 256;

/// Syscall latency family.
pub const SYSCALL_FAMILY: &str = "iolens_syscall_latency_seconds";

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
enum Fam {
    Syscall,
    Queue,
    Device,
    Runq,
    PgWait,
}

/// (family, label numbers): syscall (op, comm, role), block (op, device, watched), run queue
/// (comm, role), wait (event, role).
type Key = (Fam, u16, u16, u16);

/// The watch's cumulative metrics (see the module doc).
pub(crate) struct LiveMetrics {
    comms: LabelValues,
    roles: LabelValues,
    devices: LabelValues,
    waits: LabelValues,
    /// Op names by number: a syscall's index in `SYSCALLS`, a block op's [`BLOCK_OPS`] plus
    /// its code (recording indexes by the event's number, hashing nothing per event).
    ops: Vec<&'static str>,
    who: HashMap<u32, (u16, u16)>,
    hists: HashMap<Key, PromHist>,
    /// Per syscall series: errors, bytes.
    sys: HashMap<Key, [u64; 2]>,
}

impl LiveMetrics {
    pub(crate) fn new() -> LiveMetrics {
        LiveMetrics {
            comms: LabelValues::new(COMMS),
            roles: LabelValues::new(ROLES),
            devices: LabelValues::new(DEVICES),
            waits: LabelValues::new(WAITS),
            ops: Vec::new(),
            who: HashMap::new(),
            hists: HashMap::new(),
            sys: HashMap::new(),
        }
    }

    /// The comm and role numbers of process `tgid` (`who` names them on a cache miss).
    fn who(&mut self, tgid: u32, who: impl FnOnce() -> (String, String)) -> (u16, u16) {
        if let Some(&w) = self.who.get(&tgid) {
            return w;
        }
        let (comm, role) = who();
        let w = (self.comms.id(&comm), self.roles.id(&role));
        self.who.insert(tgid, w);
        w
    }

    /// A new interval: names looked up again (bounded: only the pids of one interval).
    pub(crate) fn interval(&mut self) {
        self.who.clear();
    }

    /// The number of op `name`, numbered `i` (named the first time it is seen).
    #[inline]
    fn op(&mut self, i: u16, name: &'static str) -> u16 {
        let n = i as usize;
        if self.ops.len() <= n {
            self.ops.resize(n + 1, "");
        }
        self.ops[n] = name;
        i
    }

    fn op_name(&self, i: u16) -> &str {
        self.ops.get(i as usize).copied().unwrap_or("")
    }

    fn hist(&mut self, k: Key, ns: u64) {
        self.hists.entry(k).or_default().record(ns);
    }

    /// One traced syscall, `op` its index in `SYSCALLS` and `name` its name (an error is
    /// counted, not timed).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn syscall(
        &mut self,
        tgid: u32,
        who: impl FnOnce() -> (String, String),
        op: u16,
        name: &'static str,
        ns: u64,
        bytes: u64,
        error: bool,
    ) {
        let (c, r) = self.who(tgid, who);
        let k = (Fam::Syscall, self.op(op, name), c, r);
        if !error {
            self.hist(k, ns);
        }
        let s = self.sys.entry(k).or_default();
        s[0] += u64::from(error);
        s[1] += bytes;
    }

    /// One block request of op code `op` (named `name`): host queue and device time.
    pub(crate) fn block(
        &mut self,
        device: &str,
        op: u16,
        name: &'static str,
        watched: bool,
        queue: u64,
        dev: u64,
    ) {
        let (o, d) = (self.op(BLOCK_OPS + op, name), self.devices.id(device));
        self.hist((Fam::Queue, o, d, u16::from(watched)), queue);
        self.hist((Fam::Device, o, d, u16::from(watched)), dev);
    }

    /// One run-queue wait of a watched thread.
    pub(crate) fn runq(&mut self, tgid: u32, who: impl FnOnce() -> (String, String), ns: u64) {
        let (c, r) = self.who(tgid, who);
        self.hist((Fam::Runq, c, r, 0), ns);
    }

    /// One off-CPU span of a PostgreSQL process under wait event `event`.
    pub(crate) fn pg_wait(
        &mut self,
        tgid: u32,
        who: impl FnOnce() -> (String, String),
        event: &str,
        ns: u64,
    ) {
        let (_, r) = self.who(tgid, who);
        let w = self.waits.id(event);
        self.hist((Fam::PgWait, w, r, 0), ns);
    }

    /// Everything so far as an exposition: the histograms, the syscall counters, the wall-time
    /// parts of `spans`, the events `lost` (cause, count) and this process's own CPU time and
    /// memory.
    pub(crate) fn exposition(&self, spans: &[WatchSpan], lost: &[(String, u64)]) -> Exposition {
        let mut e = Exposition::default();
        let mut keys: Vec<&Key> = self.hists.keys().collect();
        keys.sort_unstable();
        for k in keys {
            let h = SampleValue::Hist(self.hists[k].clone());
            let (name, help, labels): (&str, &str, Vec<(&str, &str)>) = match k.0 {
                Fam::Syscall => (
                    SYSCALL_FAMILY,
                    "Latency of the watched processes' I/O syscalls (entry to exit), seconds.",
                    vec![
                        ("op", self.op_name(k.1)),
                        ("comm", self.comms.name(k.2)),
                        ("role", self.roles.name(k.3)),
                    ],
                ),
                Fam::Queue | Fam::Device => (
                    if k.0 == Fam::Queue {
                        "iolens_block_queue_seconds"
                    } else {
                        "iolens_block_device_seconds"
                    },
                    if k.0 == Fam::Queue {
                        "Block requests' time in the host queue (submission to issue), seconds."
                    } else {
                        "Block requests' device service time (issue to completion), seconds."
                    },
                    vec![
                        ("device", self.devices.name(k.2)),
                        ("op", self.op_name(k.1)),
                        ("submitter", if k.3 == 1 { "watched" } else { "other" }),
                    ],
                ),
                Fam::Runq => (
                    "iolens_cpu_runq_seconds",
                    "Run-queue wait of the watched threads (runnable until running), seconds.",
                    vec![
                        ("comm", self.comms.name(k.1)),
                        ("role", self.roles.name(k.2)),
                    ],
                ),
                Fam::PgWait => (
                    "iolens_pg_wait_seconds",
                    "Off-CPU spans of PostgreSQL processes by the wait event they published, \
                     seconds.",
                    vec![
                        ("wait_event", self.waits.name(k.1)),
                        ("role", self.roles.name(k.2)),
                    ],
                ),
            };
            let labels: Vec<(&str, &str)> =
                labels.into_iter().filter(|(_, v)| !v.is_empty()).collect();
            e.family(name, help, MetricKind::Histogram).push(&labels, h);
        }
        let mut keys: Vec<&Key> = self.sys.keys().collect();
        keys.sort_unstable();
        for k in keys {
            let labels: Vec<(&str, &str)> = [
                ("op", self.op_name(k.1)),
                ("comm", self.comms.name(k.2)),
                ("role", self.roles.name(k.3)),
            ]
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .collect();
            let [errors, bytes] = self.sys[k];
            e.family(
                "iolens_syscall_errors_total",
                "Traced syscalls that returned an error (counted, not timed).",
                MetricKind::Counter,
            )
            .push(&labels, SampleValue::Number(errors as f64));
            e.family(
                "iolens_syscall_bytes_total",
                "Bytes the traced syscalls transferred.",
                MetricKind::Counter,
            )
            .push(&labels, SampleValue::Number(bytes as f64));
        }
        let mut wall = crate::results::WallSplit::default();
        for s in spans {
            wall.add(&s.wall);
        }
        let f = e.family(
            "iolens_wall_seconds_total",
            "Wall time of the watched threads by part (on CPU, waiting for a CPU, off CPU; inside \
             an I/O syscall: on CPU, waiting for a CPU, device, host queue, above the block \
             layer), seconds.",
            MetricKind::Counter,
        );
        for (part, v) in WALL_PARTS.iter().zip(wall.parts()) {
            f.push(&[("part", part)], SampleValue::Number(v));
        }
        let f = e.family(
            "iolens_lost_events_total",
            "Events the kernel side could not deliver, by cause.",
            MetricKind::Counter,
        );
        for (cause, n) in lost {
            f.push(&[("cause", cause)], SampleValue::Number(*n as f64));
        }
        let (cpu, rss) = own_usage();
        e.family(
            "process_cpu_seconds_total",
            "CPU time of iolens itself (user and system), seconds.",
            MetricKind::Counter,
        )
        .push(&[], SampleValue::Number(cpu));
        e.family(
            "process_resident_memory_bytes",
            "Resident memory of iolens itself, bytes.",
            MetricKind::Gauge,
        )
        .push(&[], SampleValue::Number(rss));
        e
    }
}

/// The `part` label values, in the order of [`crate::results::WallSplit::parts`].
pub const WALL_PARTS: [&str; 8] = [
    "cpu",
    "cpu_wait",
    "off_cpu",
    "io_cpu",
    "io_cpu_wait",
    "io_device",
    "io_queue",
    "io_above_block",
];

/// This process's CPU seconds (user + system) and resident bytes.
fn own_usage() -> (f64, f64) {
    // SAFETY: getrusage fills a plain struct for this process.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let cpu = if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0 {
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(ru.ru_utime) + tv(ru.ru_stime)
    } else {
        f64::NAN
    };
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as f64;
    let rss = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(f64::NAN, |p| p * page);
    (cpu, rss)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_stay_bounded_past_the_label_limits() {
        let mut m = LiveMetrics::new();
        for pid in 0..1000u32 {
            m.syscall(
                pid,
                || (format!("proc{pid}"), String::new()),
                0,
                "pread64",
                1000 + pid as u64,
                8192,
                pid >= 100 && pid % 10 == 0,
            );
            m.interval();
        }
        let e = m.exposition(&[], &[]);
        let f = e
            .families
            .iter()
            .find(|f| f.name == SYSCALL_FAMILY)
            .unwrap();
        assert_eq!(f.samples.len(), COMMS + 1);
        let total: u64 = f
            .samples
            .iter()
            .map(|s| match &s.value {
                SampleValue::Hist(h) => h.count,
                _ => 0,
            })
            .sum();
        assert_eq!(total, 910);
        let errors: f64 = e
            .families
            .iter()
            .find(|f| f.name == "iolens_syscall_errors_total")
            .unwrap()
            .samples
            .iter()
            .map(|s| match s.value {
                SampleValue::Number(v) => v,
                _ => 0.0,
            })
            .sum();
        assert_eq!(errors, 90.0);
        assert!(f.samples.iter().any(|s| s.labels[1].1 == "other"));
    }
}
