//! The BPF side of `iolens profile` (`bpf/profile.bpf.c`): load the object with the chosen
//! processes, attach a software cpu-clock perf event on every online CPU (and, for off-CPU
//! stacks, sched_switch and sched_wakeup), and read back the aggregated stacks: raw addresses,
//! leaf first, with their counts and nanosecond weights. Symbolisation is the producer's
//! (`crate::profile`).

use aya::maps::{HashMap as BpfHashMap, MapData, StackTraceMap};
use aya::programs::perf_event::{PerfEventScope, PerfTypeId, SamplePolicy};
use aya::programs::{BtfTracePoint, PerfEvent, RawTracePoint};
use aya::{Btf, Ebpf, Pod};

use super::{attach_tracepoint, load, sum_per_cpu, BpfError, Global};

/// The profile programs: `bpf/profile.bpf.c`.
pub(crate) static PROFILE_OBJECT: &[u8] = aya::include_bytes_aligned!("obj/profile.bpf.o");

/// `PERF_COUNT_SW_CPU_CLOCK`.
const SW_CPU_CLOCK: u64 = 0;

/// What to sample.
#[derive(Clone, Debug, Default)]
pub(crate) struct SamplerOptions {
    /// Process ids (thread-group ids) to profile.
    pub(crate) pids: Vec<u32>,
    /// Process names (the first 15 bytes, as the kernel keeps them) to profile.
    pub(crate) comms: Vec<String>,
    /// CPU time between two samples of a running thread, ns.
    pub(crate) period_ns: u64,
    /// Also record off-CPU stacks.
    pub(crate) off_cpu: bool,
}

/// The state a stack was recorded in (as `bpf/profile.bpf.c` numbers them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawState {
    OnCpu,
    IoWait,
    Sleep,
    Runnable,
}

/// One aggregated stack as the kernel recorded it.
#[derive(Clone, Debug)]
pub(crate) struct RawStack {
    pub(crate) tgid: u32,
    pub(crate) comm: String,
    pub(crate) state: RawState,
    /// User-space return addresses, leaf first (empty when not walked).
    pub(crate) user: Vec<u64>,
    /// Kernel addresses, leaf first (empty in user mode).
    pub(crate) kernel: Vec<u64>,
    pub(crate) count: u64,
    pub(crate) ns: u64,
    /// PostgreSQL's wait_event_info when sampled or switched out (0: none, or not PostgreSQL;
    /// 0xffffffff: unreadable).
    pub(crate) wait_event: u32,
}

/// Losses, counted by the programs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lost {
    /// Stacks not counted because the counts map was full.
    pub(crate) counts_full: u64,
    /// User stacks the kernel could not walk (or whose id collided).
    pub(crate) user_stack: u64,
    /// Kernel stacks the kernel could not walk.
    pub(crate) kernel_stack: u64,
    /// Off-CPU starts not recorded (map full).
    pub(crate) off_state: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Key {
    tgid: u32,
    user_stack: i32,
    kernel_stack: i32,
    state: u32,
    wev: u32,
    comm: [u8; 16],
}
// SAFETY: plain old data, laid out as `struct prof_key` in bpf/profile.bpf.c.
unsafe impl Pod for Key {}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Weight {
    count: u64,
    ns: u64,
}
// SAFETY: plain old data, laid out as `struct prof_weight`.
unsafe impl Pod for Weight {}

/// A thread off CPU (`struct prof_off` in bpf/profile.bpf.c).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Off {
    ts: u64,
    wake_ts: u64,
    user_stack: i32,
    kernel_stack: i32,
    state: u32,
    tgid: u32,
    wev: u32,
    pad: u32,
    comm: [u8; 16],
}
// SAFETY: plain old data, laid out as `struct prof_off`.
unsafe impl Pod for Off {}

/// CLOCK_MONOTONIC now, ns (the clock of `bpf_ktime_get_ns`).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A running sampler: the programs stay attached while it lives.
pub(crate) struct Sampler {
    ebpf: Ebpf,
    /// When the programs were attached (CLOCK_MONOTONIC ns).
    start_ns: u64,
    /// CPUs with a sampling event.
    pub(crate) cpus: u32,
}

fn err(e: impl std::fmt::Display) -> BpfError {
    BpfError::Load(e.to_string())
}

impl Sampler {
    /// Load, fill the process filters and attach everything.
    pub(crate) fn start(o: &SamplerOptions) -> Result<Sampler, BpfError> {
        let period = u32::try_from(o.period_ns).map_err(|_| {
            err("the sampling period must be below 4.29 s (a frequency of 1 Hz or more)")
        })?;
        let globals = [
            Global {
                name: "self_tgid",
                value: std::process::id(),
            },
            Global {
                name: "want_off_cpu",
                value: u32::from(o.off_cpu),
            },
            Global {
                name: "period_ns",
                value: period,
            },
        ];
        let mut ebpf = load(PROFILE_OBJECT, &globals)?;
        super::set_process_filter(&mut ebpf, &o.pids, &o.comms)?;
        let btf = Btf::from_sys_fs().map_err(|_| BpfError::NoBtf)?;
        // Forked PostgreSQL backends inherit their server's wait-event address.
        attach_tracepoint(&mut ebpf, &btf, "sched_process_fork")?;
        attach_tracepoint(&mut ebpf, &btf, "sched_process_exit")?;
        if o.off_cpu {
            attach_tracepoint(&mut ebpf, &btf, "sched_wakeup")?;
            attach_tracepoint(&mut ebpf, &btf, "sched_switch")?;
        }
        let cpus = aya::util::online_cpus().map_err(|(what, e)| err(format!("{what}: {e}")))?;
        let prog: &mut PerfEvent = ebpf
            .program_mut("on_sample")
            .ok_or_else(|| err("no program on_sample"))?
            .try_into()
            .map_err(err)?;
        prog.load().map_err(|e| BpfError::Load(e.to_string()))?;
        for &cpu in &cpus {
            prog.attach(
                PerfTypeId::Software,
                SW_CPU_CLOCK,
                PerfEventScope::AllProcessesOneCpu { cpu },
                SamplePolicy::Period(o.period_ns),
                false,
            )
            .map_err(|e| BpfError::Attach {
                tracepoint: format!("perf_event cpu-clock on CPU {cpu}"),
                detail: e.to_string(),
            })?;
        }
        Ok(Sampler {
            ebpf,
            start_ns: monotonic_ns(),
            cpus: cpus.len() as u32,
        })
    }

    /// Tell the programs where PostgreSQL process `pid` publishes its wait event and its
    /// transaction state (the user addresses of its `my_wait_event_info` and `MyBEEntry`).
    pub(crate) fn place_wait_pointer(
        &mut self,
        pid: u32,
        addr: super::PgPtrs,
    ) -> Result<(), BpfError> {
        let mut m: BpfHashMap<&mut MapData, u32, super::PgPtrs> = BpfHashMap::try_from(
            self.ebpf
                .map_mut("pg_wait_ptr")
                .ok_or_else(|| err("no map pg_wait_ptr"))?,
        )
        .map_err(err)?;
        m.insert(pid, addr, 0).map_err(err)
    }

    /// Stop sampling (detach every program) and read the stacks and losses.
    pub(crate) fn finish(mut self) -> Result<(Vec<RawStack>, Lost), BpfError> {
        let end_ns = monotonic_ns();
        // Detach first so the maps no longer change while they are read.
        if let Some(p) = self.ebpf.program_mut("on_sample") {
            if let Ok(p) = <&mut PerfEvent>::try_from(p) {
                let _ = p.unload();
            }
        }
        for name in [
            "btf_sched_switch",
            "btf_sched_wakeup",
            "btf_sched_process_fork",
            "btf_sched_process_exit",
        ] {
            if let Some(p) = self.ebpf.program_mut(name) {
                if let Ok(p) = <&mut BtfTracePoint>::try_from(p) {
                    let _ = p.unload();
                }
            }
        }
        for name in [
            "raw_sched_switch",
            "raw_sched_wakeup",
            "raw_sched_process_fork",
            "raw_sched_process_exit",
        ] {
            if let Some(p) = self.ebpf.program_mut(name) {
                if let Ok(p) = <&mut RawTracePoint>::try_from(p) {
                    let _ = p.unload();
                }
            }
        }
        let stacks: StackTraceMap<&MapData> = StackTraceMap::try_from(
            self.ebpf
                .map("stacks")
                .ok_or_else(|| err("no map stacks"))?,
        )
        .map_err(err)?;
        let walk = |id: i32| -> Vec<u64> {
            if id < 0 {
                return Vec::new();
            }
            stacks
                .get(&(id as u32), 0)
                .map(|t| t.frames().iter().map(|f| f.ip).collect())
                .unwrap_or_default()
        };
        let counts: BpfHashMap<&MapData, Key, Weight> = BpfHashMap::try_from(
            self.ebpf
                .map("counts")
                .ok_or_else(|| err("no map counts"))?,
        )
        .map_err(err)?;
        let mut out = Vec::new();
        for kv in counts.iter() {
            let (k, w) = kv.map_err(err)?;
            let n = k.comm.iter().position(|&c| c == 0).unwrap_or(16);
            out.push(RawStack {
                tgid: k.tgid,
                comm: String::from_utf8_lossy(&k.comm[..n]).into_owned(),
                state: match k.state {
                    1 => RawState::IoWait,
                    2 => RawState::Sleep,
                    3 => RawState::Runnable,
                    _ => RawState::OnCpu,
                },
                user: walk(k.user_stack),
                kernel: walk(k.kernel_stack),
                count: w.count,
                ns: w.ns,
                wait_event: k.wev,
            });
        }
        // Threads still off CPU at the end: their span so far (from their switch-out, or the
        // start), as a switch-in at the end would have counted it.
        let off: BpfHashMap<&MapData, u32, Off> = BpfHashMap::try_from(
            self.ebpf
                .map("off_cpu")
                .ok_or_else(|| err("no map off_cpu"))?,
        )
        .map_err(err)?;
        for kv in off.iter() {
            let Ok((_, s)) = kv else { continue };
            let from = s.ts.max(self.start_ns);
            if from >= end_ns {
                continue;
            }
            let n = s.comm.iter().position(|&c| c == 0).unwrap_or(16);
            let one = |state: RawState, count: u64, ns: u64| RawStack {
                tgid: s.tgid,
                comm: String::from_utf8_lossy(&s.comm[..n]).into_owned(),
                state,
                user: walk(s.user_stack),
                kernel: walk(s.kernel_stack),
                count,
                ns,
                wait_event: s.wev,
            };
            let wake = if s.wake_ts >= s.ts && s.wake_ts > 0 && s.wake_ts <= end_ns {
                s.wake_ts.max(from)
            } else {
                end_ns
            };
            let runnable = s.state == 3;
            if !runnable && wake > from {
                let state = if s.state == 1 {
                    RawState::IoWait
                } else {
                    RawState::Sleep
                };
                out.push(one(state, 1, wake - from));
            }
            let runq_from = if runnable { from } else { wake };
            if end_ns > runq_from {
                out.push(one(
                    RawState::Runnable,
                    u64::from(runnable),
                    end_ns - runq_from,
                ));
            }
        }
        let l = sum_per_cpu(&self.ebpf, "lost")?;
        let lost = Lost {
            counts_full: l.first().copied().unwrap_or(0),
            user_stack: l.get(1).copied().unwrap_or(0),
            kernel_stack: l.get(2).copied().unwrap_or(0),
            off_state: l.get(3).copied().unwrap_or(0),
        };
        Ok((out, lost))
    }
}
