//! Loading and attaching iolens' BPF programs (shared by `watch` and `profile`).
//!
//! The programs are written in C (`bpf/<name>.bpf.c`), compiled by clang with
//! `scripts/build-bpf.sh` into `src/bpf/obj/<name>.bpf.o`, committed, and embedded here with
//! [`aya::include_bytes_aligned!`], so building iolens needs only Rust and a C linker; `aya` is
//! used purely as a loader (no Rust-side BPF, no nightly).
//!
//! Conventions the C side follows so that [`attach_tracepoint`] can pick what the kernel accepts:
//! every handler of tracepoint `T` exists twice, as `SEC("tp_btf/T") int btf_T(u64 *ctx)` and
//! `SEC("raw_tp/T") int raw_T(u64 *ctx)`; the BTF-typed one is tried first. Lost events are
//! counted by the programs in a per-CPU array map (read with [`sum_per_cpu`]).
//!
//! Before anything is loaded, [`check_access`] turns the usual reasons BPF is refused (not root
//! and without CAP_BPF/CAP_PERFMON, `kernel.unprivileged_bpf_disabled`, lockdown, a kernel
//! without BTF) into one [`BpfError`] that names what is missing and what to do.

use std::fs;
use std::os::fd::AsRawFd;
use std::time::Duration;

use aya::maps::{MapData, PerCpuArray, RingBuf};
use aya::programs::{BtfTracePoint, RawTracePoint};
use aya::{Btf, Ebpf, EbpfLoader};

pub(crate) mod perf_tp;
pub(crate) mod profile;

/// The watch programs (syscalls, block layer, scheduler): `bpf/watch.bpf.c`.
pub(crate) static WATCH_OBJECT: &[u8] = aya::include_bytes_aligned!("obj/watch.bpf.o");

/// Where the kernel publishes its own BTF (type information CO-RE and tp_btf need).
pub(crate) const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Why BPF cannot be used, phrased for the person running iolens.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BpfError {
    /// The process lacks the capabilities BPF tracing needs.
    #[error(
        "tracing with BPF needs root, or the capabilities {missing} (this process has neither): \
         run it with sudo, or grant them once with `sudo setcap cap_bpf,cap_perfmon+ep {exe}`{sysctl}"
    )]
    NotPermitted {
        missing: String,
        exe: String,
        sysctl: String,
    },
    /// Kernel lockdown forbids reading kernel memory from BPF.
    #[error(
        "the kernel is locked down ({mode}), which forbids BPF tracing: boot without \
         `lockdown={mode}` (or with Secure Boot's lockdown lifted) to use this command"
    )]
    Lockdown { mode: String },
    /// No kernel BTF.
    #[error(
        "this kernel publishes no BTF type information ({KERNEL_BTF} is missing): iolens' BPF \
         programs need a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian, Ubuntu, Fedora and \
         RHEL kernels have it)"
    )]
    NoBtf,
    /// The kernel refused although the checks above passed (typically a container).
    #[error(
        "the kernel refused to load BPF programs ({detail}): in a container, run it privileged \
         or with CAP_BPF, CAP_PERFMON and CAP_SYS_RESOURCE; check `sysctl \
         kernel.unprivileged_bpf_disabled` and any seccomp or LSM policy that blocks bpf(2)"
    )]
    Refused { detail: String },
    /// Loading failed for another reason (a bug or a kernel too old for the object).
    #[error("loading the BPF object failed: {0}")]
    Load(String),
    /// No variant of a required tracepoint could be attached.
    #[error("attaching to kernel tracepoint {tracepoint} failed: {detail}")]
    Attach { tracepoint: String, detail: String },
}

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The effective capability mask of this process (from /proc/self/status).
fn effective_caps() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// The kernel lockdown mode in force, if any (`integrity` or `confidentiality`).
fn lockdown_mode() -> Option<String> {
    let s = fs::read_to_string("/sys/kernel/security/lockdown").ok()?;
    let mode = s.split_whitespace().find(|w| w.starts_with('['))?;
    let mode = mode.trim_matches(|c| c == '[' || c == ']');
    (mode != "none").then(|| mode.to_string())
}

/// Check, before loading anything, that this process may use BPF tracing here.
pub(crate) fn check_access() -> Result<(), BpfError> {
    let caps = effective_caps();
    let has = |c: u32| caps & (1u64 << c) != 0;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let permitted = root || has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON));
    if !permitted {
        let missing: Vec<&str> = [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
            .iter()
            .filter(|(c, _)| !has(*c))
            .map(|(_, n)| *n)
            .collect();
        let sysctl = match fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled")
            .map(|s| s.trim().to_string())
        {
            Ok(v) if v != "0" => format!(
                " (kernel.unprivileged_bpf_disabled = {v} forbids BPF to unprivileged users)"
            ),
            _ => String::new(),
        };
        return Err(BpfError::NotPermitted {
            missing: missing.join(" and "),
            exe: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "iolens".into()),
            sysctl,
        });
    }
    if let Some(mode) = lockdown_mode() {
        if mode == "confidentiality" {
            return Err(BpfError::Lockdown { mode });
        }
    }
    if !std::path::Path::new(KERNEL_BTF).exists() {
        return Err(BpfError::NoBtf);
    }
    Ok(())
}

/// A value for one `const volatile` global of a BPF object, set before it is loaded.
pub(crate) struct Global<'a> {
    pub(crate) name: &'a str,
    pub(crate) value: u32,
}

fn is_permission(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
                return true;
            }
        }
        let text = err.to_string();
        if text.contains("Operation not permitted") || text.contains("Permission denied") {
            return true;
        }
        cur = err.source();
    }
    false
}

fn describe(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(err) = cur {
        let t = err.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// Load an embedded object with its globals set (after [`check_access`]).
pub(crate) fn load(object: &[u8], globals: &[Global]) -> Result<Ebpf, BpfError> {
    load_sized(object, globals, &[])
}

/// [`load`], with the named maps made `sizes` entries long instead of their declared
/// `max_entries` (an array map's memory is all allocated at load: one sized for the most a
/// run may need is made as long as this one needs).
pub(crate) fn load_sized(
    object: &[u8],
    globals: &[Global],
    sizes: &[(&str, u32)],
) -> Result<Ebpf, BpfError> {
    check_access()?;
    // Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK; lifting it is harmless after.
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the struct we own; failure only matters on old kernels.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
    let btf = Btf::from_sys_fs().map_err(|_| BpfError::NoBtf)?;
    let mut loader = EbpfLoader::new();
    loader.btf(Some(&btf));
    let values: Vec<[u8; 4]> = globals.iter().map(|g| g.value.to_ne_bytes()).collect();
    for (g, v) in globals.iter().zip(&values) {
        loader.set_global(g.name, v, true);
    }
    for &(name, n) in sizes {
        loader.set_max_entries(name, n.max(1));
    }
    loader.load(object).map_err(|e| {
        if is_permission(&e) {
            BpfError::Refused {
                detail: describe(&e),
            }
        } else {
            BpfError::Load(describe(&e))
        }
    })
}

/// How a tracepoint handler ended up attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attached {
    /// As a BTF-typed tracepoint (`tp_btf`).
    Btf,
    /// As a raw tracepoint.
    Raw,
}

/// Detach and unload the handler of tracepoint `name` (whichever of its tp_btf and raw_tp
/// programs was loaded). When this returns, no instance of it is running any more.
pub(crate) fn detach_tracepoint(ebpf: &mut Ebpf, name: &str) -> Result<(), BpfError> {
    let fail = |e: aya::programs::ProgramError| BpfError::Attach {
        tracepoint: name.to_string(),
        detail: format!("cannot detach: {}", describe(&e)),
    };
    if let Some(prog) = ebpf.program_mut(&format!("btf_{name}")) {
        let p: &mut BtfTracePoint = prog.try_into().map_err(fail)?;
        if p.fd().is_ok() {
            p.unload().map_err(fail)?;
        }
    }
    if let Some(prog) = ebpf.program_mut(&format!("raw_{name}")) {
        let p: &mut RawTracePoint = prog.try_into().map_err(fail)?;
        if p.fd().is_ok() {
            p.unload().map_err(fail)?;
        }
    }
    Ok(())
}

/// Load and attach the handler of tracepoint `name`: `btf_<name>` (tp_btf) if the kernel takes
/// it, else `raw_<name>` (raw tracepoint). The handler stays attached while `ebpf` lives.
pub(crate) fn attach_tracepoint(
    ebpf: &mut Ebpf,
    btf: &Btf,
    name: &str,
) -> Result<Attached, BpfError> {
    let mut errors = Vec::new();
    if let Some(prog) = ebpf.program_mut(&format!("btf_{name}")) {
        let r: Result<(), aya::programs::ProgramError> = (|| {
            let p: &mut BtfTracePoint = prog.try_into()?;
            p.load(name, btf)?;
            p.attach()?;
            Ok(())
        })();
        match r {
            Ok(()) => return Ok(Attached::Btf),
            Err(e) => errors.push(format!("tp_btf: {}", describe(&e))),
        }
    }
    if let Some(prog) = ebpf.program_mut(&format!("raw_{name}")) {
        let r: Result<(), aya::programs::ProgramError> = (|| {
            let p: &mut RawTracePoint = prog.try_into()?;
            p.load()?;
            p.attach(name)?;
            Ok(())
        })();
        match r {
            Ok(()) => return Ok(Attached::Raw),
            Err(e) => errors.push(format!("raw_tp: {}", describe(&e))),
        }
    }
    if errors.is_empty() {
        errors.push("the object has no handler for it".into());
    }
    let detail = errors.join("; ");
    if detail.contains("Operation not permitted") || detail.contains("Permission denied") {
        return Err(BpfError::Refused { detail });
    }
    Err(BpfError::Attach {
        tracepoint: name.to_string(),
        detail,
    })
}

/// Where a PostgreSQL server process publishes its wait event and its transaction state: the
/// value of the kernel's `pg_wait_ptr` map (`struct pg_ptrs`, bpf/common.h), found by
/// `crate::watch::pg::process_pointers`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PgPtrs {
    /// Address of `uint32 *my_wait_event_info`.
    pub wait: u64,
    /// Address of `PgBackendStatus *MyBEEntry`; 0: unknown (13, a version not measured).
    pub status: u64,
    /// Offset of `st_state` in the entry.
    pub state_off: u32,
    pub pad: u32,
}

// SAFETY: plain `#[repr(C)]` integers without padding (8 + 8 + 4 + 4 bytes), as the kernel
// map holds them.
unsafe impl aya::Pod for PgPtrs {}

/// Linux keeps the first 15 bytes of a process name (`comm`; 16 with the NUL).
pub(crate) const COMM_LEN: usize = 15;

/// The 16-byte, NUL-padded key the BPF side compares `comm` with (the name cut as the kernel
/// cuts it).
pub(crate) fn comm_key(name: &str) -> [u8; 16] {
    let mut k = [0u8; 16];
    let b = name.as_bytes();
    let n = b.len().min(COMM_LEN);
    k[..n].copy_from_slice(&b[..n]);
    k
}

/// Fill the process filter every iolens BPF program shares (`bpf/common.h`): the maps
/// `watch_pids` (process ids) and `watch_comms` (process names, see [`comm_key`]).
pub(crate) fn set_process_filter(
    ebpf: &mut Ebpf,
    pids: &[u32],
    comms: &[String],
) -> Result<(), BpfError> {
    let load = |e: &dyn std::error::Error| BpfError::Load(describe(e));
    let mut map: aya::maps::HashMap<&mut MapData, u32, u8> = aya::maps::HashMap::try_from(
        ebpf.map_mut("watch_pids")
            .ok_or_else(|| BpfError::Load("the object has no map watch_pids".into()))?,
    )
    .map_err(|e| load(&e))?;
    for &p in pids {
        map.insert(p, 1, 0).map_err(|e| load(&e))?;
    }
    let mut map: aya::maps::HashMap<&mut MapData, [u8; 16], u8> = aya::maps::HashMap::try_from(
        ebpf.map_mut("watch_comms")
            .ok_or_else(|| BpfError::Load("the object has no map watch_comms".into()))?,
    )
    .map_err(|e| load(&e))?;
    for c in comms {
        map.insert(comm_key(c), 1, 0).map_err(|e| load(&e))?;
    }
    Ok(())
}

/// Sum over CPUs of every slot of a per-CPU `u64` array map (lost-event counters).
pub(crate) fn sum_per_cpu(ebpf: &Ebpf, map: &str) -> Result<Vec<u64>, BpfError> {
    sum_per_cpu_range(ebpf, map, 0..u32::MAX)
}

/// [`sum_per_cpu`] of the slots `slots` (those past the map's end left out).
pub(crate) fn sum_per_cpu_range(
    ebpf: &Ebpf,
    map: &str,
    slots: std::ops::Range<u32>,
) -> Result<Vec<u64>, BpfError> {
    let m = ebpf
        .map(map)
        .ok_or_else(|| BpfError::Load(format!("the object has no map {map}")))?;
    let arr: PerCpuArray<&MapData, u64> =
        PerCpuArray::try_from(m).map_err(|e| BpfError::Load(describe(&e)))?;
    let slots = slots.start.min(arr.len())..slots.end.min(arr.len());
    let mut out = Vec::with_capacity(slots.len());
    for i in slots {
        let v = arr.get(&i, 0).map_err(|e| BpfError::Load(describe(&e)))?;
        out.push(v.iter().sum());
    }
    Ok(out)
}

/// Wait up to `timeout` for a ring buffer to have data, then hand every record to `f`.
/// Returns the number of records read.
pub(crate) fn drain_ring(
    ring: &mut RingBuf<MapData>,
    timeout: Duration,
    mut f: impl FnMut(&[u8]),
) -> usize {
    let mut n = 0;
    while let Some(item) = ring.next() {
        f(&item);
        n += 1;
    }
    if n > 0 {
        return n;
    }
    let mut pfd = libc::pollfd {
        fd: ring.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll reads and writes the one pollfd we own.
    unsafe {
        libc::poll(
            &mut pfd,
            1,
            timeout.as_millis().min(i32::MAX as u128) as i32,
        )
    };
    while let Some(item) = ring.next() {
        f(&item);
        n += 1;
    }
    n
}

/// For unit tests that need root (BPF programs, tracefs mounts): true where they can run; else
/// says why they are skipped. Under CI (`CI` set) they always run, so that a missing privilege
/// fails there instead of passing silently.
#[cfg(test)]
pub(crate) fn may_run_as_root(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 || std::env::var_os("CI").is_some() {
        return true;
    }
    eprintln!("skipped: {what} needs root");
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn may_run() -> bool {
        may_run_as_root("loading BPF programs")
    }

    /// The watch object, loaded (this process excluded, as iolens does).
    fn load_watch() -> Ebpf {
        load(
            WATCH_OBJECT,
            &[Global {
                name: "self_tgid",
                value: std::process::id(),
            }],
        )
        .unwrap()
    }

    #[test]
    fn watch_object_loads_and_every_tracepoint_attaches() {
        if !may_run() {
            return;
        }
        let mut ebpf = load_watch();
        let btf = Btf::from_sys_fs().unwrap();
        for tp in [
            "sys_enter",
            "sys_exit",
            "block_rq_issue",
            "block_rq_complete",
            "sched_switch",
            "sched_wakeup",
            "io_uring_submit_req",
            "io_uring_complete",
        ] {
            attach_tracepoint(&mut ebpf, &btf, tp).unwrap_or_else(|e| panic!("{tp}: {e}"));
        }
        // One slot per cause of `LOST_CAUSES` in src/watch/mod.rs, for no target and for each
        // of the 64 targets of `--watch` on iolens' own load.
        let lost = sum_per_cpu(&ebpf, "lost").unwrap();
        assert_eq!(lost.len(), 10 * 65);
        // Detached before the watch reads the per-CPU batches; a second detach is a no-op.
        detach_tracepoint(&mut ebpf, "sys_exit").unwrap();
        detach_tracepoint(&mut ebpf, "sys_exit").unwrap();
        assert!(matches!(
            attach_tracepoint(&mut ebpf, &btf, "no_such_tracepoint"),
            Err(BpfError::Attach { .. })
        ));
    }

    /// A map given a size at load is made that long (the extent table of `iolens watch` is
    /// one entry, not the 65,536 a 64-target run may need); the others keep their declared
    /// size; a size of 0 is made 1 (the kernel refuses an empty array).
    #[test]
    fn maps_are_made_as_long_as_asked() {
        if !may_run() {
            return;
        }
        let len = |ebpf: &Ebpf, name: &str| -> u32 {
            aya::maps::Array::<_, [u8; 24]>::try_from(ebpf.map(name).unwrap())
                .map(|a| a.len())
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let full = load_watch();
        assert_eq!(len(&full, "extents"), 64 * 1024);
        for (asked, made) in [(3, 3), (0, 1)] {
            let g = [Global {
                name: "self_tgid",
                value: std::process::id(),
            }];
            let ebpf = load_sized(WATCH_OBJECT, &g, &[("extents", asked)]).unwrap();
            assert_eq!(len(&ebpf, "extents"), made);
        }
    }

    /// The raw-tracepoint copy of every watch handler whose tp_btf copy reads kernel fields
    /// with plain loads (`HANDLER_BTF` in bpf/watch.bpf.c) loads too: the verifier refuses a
    /// plain load from a raw tracepoint's argument, and a kernel that takes tp_btf (this one)
    /// never tries the raw copy, so a plain load left in it would fail only where tp_btf is
    /// missing.
    #[test]
    fn watch_raw_tracepoint_copies_load() {
        if !may_run() {
            return;
        }
        let mut ebpf = load_watch();
        for tp in [
            "sched_switch",
            "sched_wakeup",
            "sched_wakeup_new",
            "block_rq_complete",
            "sys_enter",
        ] {
            let prog = ebpf
                .program_mut(&format!("raw_{tp}"))
                .unwrap_or_else(|| panic!("no raw_{tp}"));
            let p: &mut RawTracePoint = prog.try_into().unwrap();
            p.load()
                .unwrap_or_else(|e| panic!("raw_{tp}: {}", describe(&e)));
        }
    }
}
