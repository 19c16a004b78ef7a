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

/// A running sampler: the programs stay attached while it lives.
pub(crate) struct Sampler {
    ebpf: Ebpf,
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
        if o.off_cpu {
            let btf = Btf::from_sys_fs().map_err(|_| BpfError::NoBtf)?;
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
            cpus: cpus.len() as u32,
        })
    }

    /// Stop sampling (detach every program) and read the stacks and losses.
    pub(crate) fn finish(mut self) -> Result<(Vec<RawStack>, Lost), BpfError> {
        // Detach first so the maps no longer change while they are read.
        if let Some(p) = self.ebpf.program_mut("on_sample") {
            if let Ok(p) = <&mut PerfEvent>::try_from(p) {
                let _ = p.unload();
            }
        }
        for name in ["btf_sched_switch", "btf_sched_wakeup"] {
            if let Some(p) = self.ebpf.program_mut(name) {
                if let Ok(p) = <&mut BtfTracePoint>::try_from(p) {
                    let _ = p.unload();
                }
            }
        }
        for name in ["raw_sched_switch", "raw_sched_wakeup"] {
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
            });
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
