//! The `iolens profile` producer: sample the stacks of chosen processes with BPF
//! ([`crate::bpf::profile`]) on and off CPU, symbolise them, and build the results' stack
//! profile ([`crate::results::profile`]).
//!
//! Symbolisation uses blazesym (libbpf project, BSD-3-Clause): user addresses through the
//! process's own mappings (`/proc/PID/maps` and `map_files`: ELF symbol tables, DWARF where the
//! binary has readable debug sections, perf maps of JIT runtimes), kernel addresses through `/proc/kallsyms`; Rust
//! and C++ names are demangled by rustc-demangle and cpp_demangle ([`demangle`]). It runs while the profiled processes are still alive (a process
//! that exited before the end keeps its stacks, as `[unknown]` frames, with a warning).
//! Return addresses (every frame but the leaf) are looked up one byte earlier, inside the call
//! instruction, so a call at the end of a function is not taken for the next function.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use blazesym::symbolize::source::{Kernel, Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::{MaybeDefault, Pid};

use crate::bpf::profile::{RawStack, RawState, Sampler, SamplerOptions};
use crate::results::profile::{FrameKind, OffCpuReason, ProfileBuilder, ProfileSource, StackState};
use crate::results::{Kind, Results};

/// What `iolens profile` samples and for how long.
#[derive(Clone, Debug)]
pub(crate) struct ProfileOptions {
    /// Processes by id.
    pub(crate) pids: Vec<u32>,
    /// Processes by name.
    pub(crate) comm: Option<String>,
    /// How long to sample (Ctrl-C ends earlier and keeps what was sampled).
    pub(crate) duration: Duration,
    /// Samples per second of CPU time of each running thread.
    pub(crate) frequency_hz: u32,
    /// Also record off-CPU stacks.
    pub(crate) off_cpu: bool,
    /// Draw a progress line on a terminal.
    pub(crate) progress: bool,
    /// Keep idle stacks (see [`idle_stack`]) in the profile and the flame graph.
    pub(crate) keep_idle: bool,
    /// With `comm`: a name no running process has yet is accepted (`--wait`).
    pub(crate) wait: bool,
}

/// Highest sampling frequency accepted (a sample every 10 µs of CPU time).
pub(crate) const MAX_FREQUENCY_HZ: u32 = 100_000;

impl ProfileOptions {
    /// Check the options before anything is loaded.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.pids.is_empty() && self.comm.is_none() {
            bail!("say what to profile: --pid PID (one or more) or --comm NAME");
        }
        if !(1..=MAX_FREQUENCY_HZ).contains(&self.frequency_hz) {
            bail!(
                "--frequency {} is out of range: give 1 to {MAX_FREQUENCY_HZ} Hz (99 is the usual \
                 choice: it does not beat with timers at 100 Hz)",
                self.frequency_hz
            );
        }
        if self.duration.is_zero() {
            bail!("--duration must be longer than 0 s");
        }
        for &p in &self.pids {
            if p == 0 || !Path::new(&format!("/proc/{p}")).exists() {
                bail!("no process with pid {p} is running");
            }
        }
        if let Some(c) = &self.comm {
            if c.is_empty() {
                bail!("--comm needs a process name");
            }
            if c.contains('/') {
                bail!(
                    "--comm {c}: give the process name as `ps -o comm` shows it (e.g. postgres), \
                     not a path"
                );
            }
            let cut: String = c.chars().take(15).collect();
            if !self.wait && !crate::watch::filter::process_named(&cut) {
                bail!(
                    "--comm {c}: no running process has this name (`ps -e -o comm` lists them; \
                     the name is the process's, not a thread's; --wait waits for one)"
                );
            }
        }
        Ok(())
    }

    /// CPU time between samples, ns.
    pub(crate) fn period_ns(&self) -> u64 {
        (1e9 / self.frequency_hz as f64).round() as u64
    }
}

/// Profile the chosen processes into a results document.
pub(crate) fn profile(o: &ProfileOptions, command_line: Vec<String>) -> Result<Results> {
    o.validate()?;
    let mut warnings = Vec::new();
    let comm = o.comm.as_ref().map(|c| {
        if c.len() > 15 {
            let cut: String = c.chars().take(15).collect();
            warnings.push(format!(
                "--comm {c}: the kernel keeps the first 15 bytes of a process name; matching \
                 \"{cut}\""
            ));
            cut
        } else {
            c.clone()
        }
    });
    crate::interrupt::install();
    let mut sampler = Sampler::start(&SamplerOptions {
        pids: o.pids.clone(),
        comms: comm.iter().cloned().collect(),
        period_ns: o.period_ns(),
        off_cpu: o.off_cpu,
    })
    .map_err(anyhow::Error::new)?;
    let cpus = sampler.cpus;
    crate::outln!(
        "Sampling {} on {cpus} CPUs at {} Hz{} for {} s (Ctrl-C ends it early)",
        match &comm {
            Some(c) => format!("processes named {c}"),
            None => format!("pid {:?}", o.pids),
        },
        o.frequency_hz,
        if o.off_cpu {
            ", with off-CPU stacks,"
        } else {
            ""
        },
        crate::units::sig3(o.duration.as_secs_f64())
    );
    // PostgreSQL server processes among the profiled: where each publishes its wait event
    // (forked backends inherit it in the kernel; a look every 250 ms finds new servers).
    let mut pg = crate::watch::pgwait::PgWaitAcc::default();
    let profiled = |pid: u32| {
        o.pids.contains(&pid)
            || comm
                .as_ref()
                .is_some_and(|c| crate::watch::filter::comm_of(pid).as_deref() == Some(c))
    };
    let place = |pg: &mut crate::watch::pgwait::PgWaitAcc, sampler: &mut Sampler| {
        for (pid, addr) in pg.refresh(profiled) {
            // A process gone since has nothing to place.
            let _ = sampler.place_wait_pointer(pid, addr);
        }
    };
    place(&mut pg, &mut sampler);
    let mut pg_looked = Instant::now();
    let started = Instant::now();
    let pb = crate::progress::line(o.progress);
    while started.elapsed() < o.duration && !crate::interrupt::interrupted() {
        if pg_looked.elapsed() >= Duration::from_millis(250) {
            place(&mut pg, &mut sampler);
            pg_looked = Instant::now();
        }
        // Watching pids: once every one has exited there is nothing left to sample.
        if comm.is_none() && !o.pids.is_empty() && !o.pids.iter().any(|&p| crate::sys::alive(p)) {
            let at = crate::units::sig3(started.elapsed().as_secs_f64());
            warnings.push(format!(
                "the profiled process{} exited {at} s into the profile: sampling stopped then, \
                 before --duration",
                if o.pids.len() > 1 { "es" } else { "" }
            ));
            // Said once, with the other warnings, after the progress line is cleared.
            break;
        }
        let left = o.duration.saturating_sub(started.elapsed());
        pb.set_message(crate::progress::fit(&format!(
            "profiling for {:.0} s more (Ctrl-C ends it early)",
            left.as_secs_f64()
        )));
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
    let elapsed = started.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let (raw, lost) = sampler.finish().map_err(anyhow::Error::new)?;
    // Wait events by name, in each process's server version.
    let labels: Vec<Option<String>> = raw
        .iter()
        .map(|s| (s.wait_event != 0).then(|| pg.label(s.tgid, s.wait_event).to_string()))
        .collect();
    let mut b = ProfileBuilder::new();
    let (idle_ns, idle_count) = symbolise(&raw, &labels, o.keep_idle, &mut b, &mut warnings)
        .context("symbolising the sampled stacks")?;
    if raw.is_empty() {
        warnings.push(
            "no stack was recorded: the chosen processes did not run (or were not found by \
             that name) while iolens sampled"
                .into(),
        );
    }
    if lost.user_stack + lost.kernel_stack > 0 {
        warnings.push(format!(
            "{} user and {} kernel stack walks failed (code without frame pointers, or the \
             stack map was full): those samples are counted with a shorter stack",
            lost.user_stack, lost.kernel_stack
        ));
    }
    if lost.counts_full + lost.off_state > 0 {
        warnings.push(format!(
            "{} samples and {} off-CPU intervals lost (maps full)",
            lost.counts_full, lost.off_state
        ));
    }
    let profile = b.finish(ProfileSource {
        producer: "bpf".into(),
        frequency_hz: Some(o.frequency_hz as f64),
        period_ns: Some(o.period_ns()),
        duration_s: Some(elapsed),
        off_cpu: o.off_cpu,
        pids: o.pids.clone(),
        comm,
        cpus,
        lost: lost.counts_full + lost.off_state,
        truncated: lost.user_stack + lost.kernel_stack,
        idle_ns,
        idle_count,
    });
    let mut res = Results::new(Kind::Profile, command_line);
    res.environment = crate::sys::environment();
    res.warnings = warnings;
    res.profile = Some(profile);
    Ok(res)
}

/// A symbol name for each address (leaf first; `ret` addresses are looked up one byte back).
fn names(sym: &Symbolizer, src: &Source, addrs: &[u64]) -> Result<Vec<Option<(String, String)>>> {
    let out = sym
        .symbolize(src, Input::AbsAddr(addrs))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(out
        .into_iter()
        .map(|s| match s {
            Symbolized::Sym(s) => Some((
                demangle(&s.name),
                s.module
                    .map(|m| m.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            )),
            Symbolized::Unknown(_) => None,
        })
        .collect())
}

/// A symbol as people read it: Rust (`_R…`, and legacy `_ZN…E` with its hash) and C++
/// (`_Z…`, without the parameter list, as flame graphs show it) names demangled; any other
/// name as it is.
pub(crate) fn demangle(name: &str) -> String {
    if name.starts_with("_R") || name.starts_with("_ZN") {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            // `{:#}` leaves out the legacy hash suffix.
            let s = format!("{d:#}");
            if name.starts_with("_R") || s != name {
                return s;
            }
        }
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            let opts = cpp_demangle::DemangleOptions::new().no_params();
            if let Ok(s) = sym.demangle_with_options(&opts) {
                return s;
            }
        }
    }
    name.to_string()
}

/// The address to look up for frame `i` of a leaf-first stack.
fn lookup_addr(i: usize, a: u64) -> u64 {
    if i == 0 {
        a
    } else {
        a.saturating_sub(1)
    }
}

/// Kernel functions an event loop sleeps in, waiting for something to do.
const EVENT_LOOP_WAITS: &[&str] = &[
    "do_epoll_wait",
    "ep_poll",
    "do_sys_poll",
    "do_select",
    "core_sys_select",
];

/// Whether a stack is idle, not work: off CPU asleep (not waiting for a CPU, not in I/O wait)
/// under PostgreSQL's idle wait events (Client:ClientRead, Activity:*, as `watch` keeps them
/// apart), or, with no wait event, asleep in an event loop's wait (epoll_wait, poll, select).
fn idle_stack(state: StackState, wait_event: Option<&str>, kernel: &[(String, u32)]) -> bool {
    if state != StackState::OffCpu(OffCpuReason::Sleep) {
        return false;
    }
    match wait_event {
        Some(e) => crate::watch::pgwait::idle(e),
        None => kernel
            .iter()
            .any(|(n, _)| EVENT_LOOP_WAITS.contains(&n.as_str())),
    }
}

/// Symbolise every raw stack into `b` (`labels`: each one's wait event by name); idle stacks
/// are left out unless `keep_idle`. Returns the idle time left out (ns) and its count.
fn symbolise(
    raw: &[RawStack],
    labels: &[Option<String>],
    keep_idle: bool,
    b: &mut ProfileBuilder,
    warnings: &mut Vec<String>,
) -> Result<(u64, u64)> {
    let (mut idle_ns, mut idle_count) = (0u64, 0u64);
    let sym = Symbolizer::builder().enable_demangling(false).build();
    // Kernel addresses, all processes together.
    let mut kaddrs: Vec<u64> = raw
        .iter()
        .flat_map(|s| s.kernel.iter().enumerate().map(|(i, &a)| lookup_addr(i, a)))
        .collect();
    kaddrs.sort_unstable();
    kaddrs.dedup();
    let kernel_src = Source::Kernel(Kernel {
        kallsyms: MaybeDefault::Default,
        vmlinux: MaybeDefault::None,
        ..Kernel::default()
    });
    let knames: HashMap<u64, Option<(String, String)>> = if kaddrs.is_empty() {
        HashMap::new()
    } else {
        match names(&sym, &kernel_src, &kaddrs) {
            Ok(n) => kaddrs.iter().copied().zip(n).collect(),
            Err(e) => {
                warnings.push(format!(
                    "kernel symbols unavailable ({e}): kernel frames are addresses"
                ));
                HashMap::new()
            }
        }
    };
    // User addresses, per process.
    let mut per_pid: HashMap<u32, Vec<u64>> = HashMap::new();
    for s in raw {
        let v = per_pid.entry(s.tgid).or_default();
        v.extend(s.user.iter().enumerate().map(|(i, &a)| lookup_addr(i, a)));
    }
    let mut unames: HashMap<(u32, u64), Option<(String, String)>> = HashMap::new();
    let mut gone = Vec::new();
    for (pid, mut addrs) in per_pid {
        addrs.sort_unstable();
        addrs.dedup();
        if addrs.is_empty() {
            continue;
        }
        // DWARF first; a file whose debug sections cannot be read (compressed ones: blazesym's
        // zlib support is left out, see Cargo.toml) falls back to the ELF symbol tables.
        let src = Source::Process(Process::new(Pid::from(pid)));
        let mut plain = Process::new(Pid::from(pid));
        plain.debug_syms = false;
        let found =
            names(&sym, &src, &addrs).or_else(|_| names(&sym, &Source::Process(plain), &addrs));
        match found {
            Ok(n) => {
                for (a, n) in addrs.into_iter().zip(n) {
                    unames.insert((pid, a), n);
                }
            }
            Err(e) => gone.push((pid, e.to_string())),
        }
    }
    if !gone.is_empty() {
        // Named a few at a time: a busy host has hundreds of short-lived processes.
        gone.sort_unstable();
        let pids: Vec<String> = gone.iter().map(|(p, _)| p.to_string()).collect();
        warnings.push(format!(
            "the user stacks of {} process(es) ({}) could not be symbolised (exited before the \
             end of the profile?; pid {}: {}): their user frames are [unknown]",
            gone.len(),
            crate::units::fmt_some(&pids, 8),
            gone[0].0,
            gone[0].1
        ));
    }
    for (s, label) in raw.iter().zip(labels) {
        let mut frames: Vec<u32> = Vec::with_capacity(s.user.len() + s.kernel.len());
        for (i, &a) in s.user.iter().enumerate().rev() {
            let id = match unames
                .get(&(s.tgid, lookup_addr(i, a)))
                .and_then(|n| n.as_ref())
            {
                Some((name, module)) => b.frame(name, FrameKind::User, module),
                None => b.frame("[unknown]", FrameKind::User, ""),
            };
            frames.push(id);
        }
        let mut kernel: Vec<(String, u32)> = Vec::with_capacity(s.kernel.len());
        for (i, &a) in s.kernel.iter().enumerate().rev() {
            let name = match knames.get(&lookup_addr(i, a)).and_then(|n| n.as_ref()) {
                Some((name, _)) => name.clone(),
                None => format!("{a:#x}"),
            };
            let id = b.frame(&name, FrameKind::Kernel, "[kernel.kallsyms]");
            kernel.push((name, id));
        }
        let state = match s.state {
            RawState::OnCpu => StackState::OnCpu,
            RawState::IoWait => StackState::OffCpu(OffCpuReason::IoWait),
            RawState::Sleep => StackState::OffCpu(OffCpuReason::Sleep),
            RawState::Runnable => StackState::OffCpu(OffCpuReason::Runnable),
        };
        if state != StackState::OnCpu {
            // The switch-out stack ends in the tracing machinery above __schedule: cut it there.
            if let Some(at) = kernel.iter().position(|(n, _)| n == "__schedule") {
                kernel.truncate(at + 1);
            }
        }
        let idle = idle_stack(state, label.as_deref(), &kernel);
        if idle && !keep_idle {
            idle_ns = idle_ns.saturating_add(s.ns);
            idle_count = idle_count.saturating_add(s.count);
            continue;
        }
        frames.extend(kernel.into_iter().map(|(_, id)| id));
        b.add_tagged(&s.comm, frames, state, label.clone(), idle, s.count, s.ns);
    }
    Ok((idle_ns, idle_count))
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn only_mangled_names_are_demangled() {
        // C functions named like Itanium type codes stay as they are.
        assert_eq!(demangle("a"), "a");
        assert_eq!(demangle("b"), "b");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_ZN3foo3bar17h05af221e174051e9E"), "foo::bar");
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        assert_eq!(demangle("_ZN2ns5Klass6methodEi"), "ns::Klass::method");
    }
}
