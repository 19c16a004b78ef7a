//! How the traced syscalls ([`super::SYSCALLS`]) are seen: through the kernel's per-syscall
//! trace events (`syscalls:sys_enter_pread64`, `syscalls:sys_exit_pread64`, …), or through the
//! raw tracepoints `sys_enter`/`sys_exit`.
//!
//! Both run the same program bodies (`bpf/watch.bpf.c`: `sys_enter_body`, `sys_exit_body`);
//! what differs is what they cost the rest of the host. A raw tracepoint's program runs at every
//! syscall of every process, traced or not (a pgbench transaction makes ~150 syscalls on a
//! host, of which a few are traced); a per-syscall event's program runs only for its syscall:
//! the kernel tests a bit for the others. Per-syscall events need the kernel's syscall trace
//! events (CONFIG_FTRACE_SYSCALLS, in every major distribution's kernel) and tracefs to learn
//! their ids (mounted for the look where it is not: `bpf::perf_tp`).
//!
//! The default is the per-syscall events, falling back to the raw tracepoints where the kernel
//! lacks them (the reason is noted in the list of what was attached). [`ENV`] picks one outright:
//! `raw` or `events` (then no fallback), so that both paths are tested on one kernel.

use anyhow::{bail, Result};

use crate::bpf::perf_tp::{self, PerfLinks};
use crate::bpf::{self, BpfError};

/// The environment variable that picks the syscall probes: `raw` or `events`.
pub const ENV: &str = "IOLENS_SYSCALL_PROBES";

/// The probes attached for the traced syscalls.
pub(crate) enum SyscallProbes {
    /// One program on each traced syscall's entry event and one on each exit event.
    Events { enter: PerfLinks, exit: PerfLinks },
    /// The raw tracepoints `sys_enter` and `sys_exit` (every syscall).
    Raw,
}

/// Which syscall probes to attach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The per-syscall events, else the raw tracepoints.
    Default,
    /// The per-syscall events or an error.
    Events,
    /// The raw tracepoints.
    Raw,
}

impl Choice {
    /// The choice [`ENV`] makes (unset or empty: the default).
    pub(crate) fn from_env() -> Result<Choice> {
        match std::env::var(ENV).as_deref() {
            Err(_) | Ok("") => Ok(Choice::Default),
            Ok("raw") => Ok(Choice::Raw),
            Ok("events") => Ok(Choice::Events),
            Ok(other) => bail!("{ENV}={other}: expected `raw` or `events`"),
        }
    }
}

impl SyscallProbes {
    /// Attach the syscall probes (see the module's text), noting each in `attached`.
    pub(crate) fn attach(
        ebpf: &mut aya::Ebpf,
        btf: &aya::Btf,
        choice: Choice,
        attached: &mut Vec<String>,
    ) -> Result<Self> {
        let mut why_raw = None;
        if choice != Choice::Raw {
            match Self::attach_events(ebpf, attached) {
                Ok(p) => return Ok(p),
                // Refused outright (permissions): the raw tracepoints would be too.
                Err(e @ BpfError::Refused { .. }) => return Err(e.into()),
                Err(e) if choice == Choice::Events => return Err(e.into()),
                Err(e) => why_raw = Some(e.to_string()),
            }
        }
        for tp in ["sys_enter", "sys_exit"] {
            super::attach_one(ebpf, btf, tp, true, attached)?;
        }
        if let (Some(why), Some(last)) = (why_raw, attached.last_mut()) {
            last.push_str(&format!("; per-syscall trace events not used: {why}"));
        }
        Ok(SyscallProbes::Raw)
    }

    fn attach_events(ebpf: &mut aya::Ebpf, attached: &mut Vec<String>) -> Result<Self, BpfError> {
        // Those that take a file position as their fourth argument, and the others.
        let of = |positioned: bool| -> Vec<&str> {
            super::SYSCALLS
                .iter()
                .filter(|s| s.2 == positioned)
                .map(|s| s.0)
                .collect()
        };
        let (pos, fd) = (of(true), of(false));
        let names = |prefix: &str, of: &[&str]| -> Vec<String> {
            of.iter().map(|n| format!("{prefix}{n}")).collect()
        };
        let ids = |names: &[String]| {
            perf_tp::event_ids("syscalls", names).map_err(|detail| BpfError::Attach {
                tracepoint: "syscalls".into(),
                detail,
            })
        };
        let (enter_pos, enter_fd) = (names("sys_enter_", &pos), names("sys_enter_", &fd));
        let all: Vec<&str> = pos.iter().chain(&fd).copied().collect();
        let exit = names("sys_exit_", &all);
        // The exits first: an entry seen without its exit would count as an exit not seen.
        let exit_links = perf_tp::attach(ebpf, "sc_exit", &ids(&exit)?, "syscalls:sys_exit_*")?;
        let mut enter = perf_tp::attach(
            ebpf,
            "sc_enter_pos",
            &ids(&enter_pos)?,
            "syscalls:sys_enter_*",
        )?;
        let enter_fd_links = perf_tp::attach(
            ebpf,
            "sc_enter_fd",
            &ids(&enter_fd)?,
            "syscalls:sys_enter_*",
        )?;
        enter.extend(enter_fd_links);
        for n in enter_pos.iter().chain(&enter_fd).chain(&exit) {
            attached.push(format!("syscalls:{n} (tracepoint)"));
        }
        debug_assert_eq!(enter.len() + exit_links.len(), 2 * all.len());
        Ok(SyscallProbes::Events {
            enter,
            exit: exit_links,
        })
    }

    /// Detach the entry probes: no traced syscall begins after this.
    pub(crate) fn detach_enter(&mut self, ebpf: &mut aya::Ebpf) -> Result<(), BpfError> {
        match self {
            SyscallProbes::Events { enter, .. } => {
                enter.detach();
                Ok(())
            }
            SyscallProbes::Raw => bpf::detach_tracepoint(ebpf, "sys_enter"),
        }
    }

    /// Detach the exit probes (they write the per-CPU batches).
    pub(crate) fn detach_exit(&mut self, ebpf: &mut aya::Ebpf) -> Result<(), BpfError> {
        match self {
            SyscallProbes::Events { exit, .. } => {
                exit.detach();
                Ok(())
            }
            SyscallProbes::Raw => bpf::detach_tracepoint(ebpf, "sys_exit"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::Global;

    /// Both ways attach on this kernel and detach (twice is harmless); each says what it is.
    #[test]
    fn per_syscall_events_and_raw_tracepoints_both_attach_and_detach() {
        if !crate::bpf::may_run_as_root("loading BPF programs") {
            return;
        }
        let n = super::super::SYSCALLS.len();
        for choice in [Choice::Events, Choice::Raw, Choice::Default] {
            let mut ebpf = bpf::load(
                bpf::WATCH_OBJECT,
                &[Global {
                    name: "self_tgid",
                    value: std::process::id(),
                }],
            )
            .unwrap();
            let btf = aya::Btf::from_sys_fs().unwrap();
            let mut attached = Vec::new();
            let mut p = SyscallProbes::attach(&mut ebpf, &btf, choice, &mut attached).unwrap();
            match &p {
                SyscallProbes::Events { enter, exit } => {
                    assert_ne!(choice, Choice::Raw);
                    assert_eq!((enter.len(), exit.len()), (n, n));
                    assert_eq!(attached.len(), 2 * n);
                    assert!(attached.contains(&"syscalls:sys_enter_pread64 (tracepoint)".into()));
                    assert!(attached.contains(&"syscalls:sys_exit_fdatasync (tracepoint)".into()));
                }
                SyscallProbes::Raw => {
                    assert_eq!(choice, Choice::Raw, "{attached:?}");
                    assert_eq!(attached.len(), 2);
                    assert!(attached[0].starts_with("sys_enter ("), "{attached:?}");
                    assert!(attached[1].starts_with("sys_exit ("), "{attached:?}");
                }
            }
            for _ in 0..2 {
                p.detach_enter(&mut ebpf).unwrap();
                p.detach_exit(&mut ebpf).unwrap();
            }
        }
    }
}
