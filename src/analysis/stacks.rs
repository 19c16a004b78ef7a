//! Analysis of a stack profile: on-CPU versus off-CPU time (by reason), the heaviest functions
//! (own and inclusive weight) and the database and kernel layers the time went through, as the
//! layer table in [`super::dblayers`] names them.
//!
//! Weights are nanoseconds (see [`crate::results::profile`]). A function's inclusive weight
//! counts each stack once even when the function recurses; a layer's "innermost" weight goes to
//! the layer of the leaf-most frame that has one, so those shares add up to at most 100 %.

use std::collections::HashMap;

use super::dblayers::{classify, Layer};
use crate::results::analysis::{
    FunctionRow, LayerRow, OffCpuRow, ProfileWaitRow, StackProfileAnalysis,
};
use crate::results::profile::{FrameKind, OffCpuReason, StackProfile, StackState};

/// How many functions the analysis lists.
pub const TOP_FUNCTIONS: usize = 25;

/// Whether a module is the C library or the dynamic loader (their wait wrappers say only that a
/// thread waited, not why).
fn c_library(module: &str) -> bool {
    let name = module.rsplit('/').next().unwrap_or(module);
    ["libc.so", "libc-", "libpthread", "ld-linux", "libm.so"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// The scheduler's own frames at the top of every off-CPU stack, and the interrupt-exit code a
/// preempted thread leaves through: a blocked stack's time is charged to the innermost frame
/// below them (what blocked), not to `__schedule`.
pub(crate) fn scheduler_frame(name: &str) -> bool {
    matches!(
        name,
        "__schedule"
            | "schedule"
            | "schedule_idle"
            | "io_schedule"
            | "io_schedule_timeout"
            | "schedule_timeout"
            | "schedule_hrtimeout_range"
            | "schedule_hrtimeout_range_clock"
            | "schedule_preempt_disabled"
            | "preempt_schedule"
            | "preempt_schedule_common"
            | "preempt_schedule_irq"
            | "preempt_schedule_notrace"
            | "__cond_resched"
            | "_cond_resched"
    ) || name.starts_with("irqentry_")
        || name.contains("exit_to_user_mode")
        || name.starts_with("asm_sysvec_")
        || name.starts_with("sysvec_")
        || name.contains("common_interrupt")
        || name.contains("irqentry_exit_cond_resched")
}

/// The `System: layer` label of a frame, when the table knows it.
pub(crate) fn layer_label(name: &str, kind: FrameKind) -> Option<String> {
    classify(name, kind == FrameKind::Kernel).map(|l| format!("{}: {}", l.system.as_str(), l.layer))
}

/// Analyse a stack profile.
pub fn analyse(p: &StackProfile) -> StackProfileAnalysis {
    // Shares are of the time at work: idle stacks (kept with --keep-idle) are left out.
    let total = p
        .stacks
        .iter()
        .filter(|s| !s.idle)
        .map(|s| s.weight_ns)
        .fold(0u64, u64::saturating_add)
        .max(1) as f64;
    let layer_of: Vec<Option<&'static Layer>> = p
        .frames
        .iter()
        .map(|f| classify(&f.name, f.kind == FrameKind::Kernel))
        .collect();
    // Functions are keyed by (name, kernel): the same name in two modules is one function.
    let mut fn_ids: HashMap<(&str, bool), usize> = HashMap::new();
    let frame_fn: Vec<usize> = p
        .frames
        .iter()
        .map(|f| {
            let n = fn_ids.len();
            *fn_ids
                .entry((f.name.as_str(), f.kind == FrameKind::Kernel))
                .or_insert(n)
        })
        .collect();
    let mut fns: Vec<FunctionRow> = vec![FunctionRow::default(); fn_ids.len()];
    for (&(name, kernel), &i) in &fn_ids {
        fns[i].name = name.to_string();
        fns[i].kernel = kernel;
        fns[i].layer = layer_label(
            name,
            if kernel {
                FrameKind::Kernel
            } else {
                FrameKind::User
            },
        );
    }
    #[derive(Default)]
    struct LayerAcc {
        total: u64,
        innermost: u64,
        innermost_off: u64,
        functions: HashMap<usize, u64>,
    }
    let mut layers: HashMap<(&'static str, &'static str), LayerAcc> = HashMap::new();
    let mut off: HashMap<OffCpuReason, (u64, u64)> = HashMap::new();
    let mut seen_fn: Vec<u32> = vec![u32::MAX; fns.len()];
    let mut seen_layer: Vec<(&'static str, &'static str)> = Vec::new();
    let mut idle_ns = p.source.idle_ns;
    for (k, s) in p.stacks.iter().enumerate() {
        let w = s.weight_ns;
        if s.idle {
            idle_ns = idle_ns.saturating_add(w);
            continue;
        }

        if let StackState::OffCpu(r) = s.state {
            let e = off.entry(r).or_default();
            e.0 = e.0.saturating_add(w);
            e.1 = e.1.saturating_add(s.count);
        }
        // Off CPU: the innermost frame that is not the scheduler's (what blocked); asleep
        // (not I/O wait), the innermost user frame outside the C library (the program's reason
        // to wait: an event loop's epoll_wait or a futex says only that it waited).
        let not_sched = |f: &&u32| !scheduler_frame(&p.frames[**f as usize].name);
        let program = |f: &&u32| {
            let fr = &p.frames[**f as usize];
            fr.kind == FrameKind::User && !c_library(&fr.module)
        };
        let leaf = match s.state {
            StackState::OnCpu => s.frames.last(),
            StackState::OffCpu(OffCpuReason::Sleep) => s
                .frames
                .iter()
                .rev()
                .find(program)
                .or_else(|| s.frames.iter().rev().find(not_sched))
                .or(s.frames.last()),
            StackState::OffCpu(_) => s
                .frames
                .iter()
                .rev()
                .find(|&&f| !scheduler_frame(&p.frames[f as usize].name))
                .or(s.frames.last()),
        };
        if let Some(&leaf) = leaf {
            let f = &mut fns[frame_fn[leaf as usize]];
            match s.state {
                StackState::OnCpu => {
                    f.self_on_cpu_ns = f.self_on_cpu_ns.saturating_add(w);
                    f.self_samples = f.self_samples.saturating_add(s.count);
                }
                StackState::OffCpu(_) => f.self_off_cpu_ns = f.self_off_cpu_ns.saturating_add(w),
            }
        }
        seen_layer.clear();
        for &fi in &s.frames {
            let id = frame_fn[fi as usize];
            if seen_fn[id] != k as u32 {
                seen_fn[id] = k as u32;
                fns[id].total_ns = fns[id].total_ns.saturating_add(w);
            }
            if let Some(l) = layer_of[fi as usize] {
                let key = (l.system.as_str(), l.layer);
                let acc = layers.entry(key).or_default();
                {
                    let e = acc.functions.entry(id).or_default();
                    *e = e.saturating_add(w);
                }
                if !seen_layer.contains(&key) {
                    seen_layer.push(key);
                    acc.total = acc.total.saturating_add(w);
                }
            }
        }
        if let Some(l) = s.frames.iter().rev().find_map(|&fi| layer_of[fi as usize]) {
            let acc = layers.entry((l.system.as_str(), l.layer)).or_default();
            acc.innermost = acc.innermost.saturating_add(w);
            if s.state != StackState::OnCpu {
                acc.innermost_off = acc.innermost_off.saturating_add(w);
            }
        }
    }
    for f in &mut fns {
        f.total_share = f.total_ns as f64 / total;
    }
    fns.sort_by(|a, b| {
        (b.self_on_cpu_ns.saturating_add(b.self_off_cpu_ns))
            .cmp(&(a.self_on_cpu_ns.saturating_add(a.self_off_cpu_ns)))
            .then(b.total_ns.cmp(&a.total_ns))
            .then_with(|| a.name.cmp(&b.name))
    });
    fns.truncate(TOP_FUNCTIONS);
    let names: Vec<String> = {
        let mut v = vec![String::new(); fn_ids.len()];
        for (&(name, _), &i) in &fn_ids {
            v[i] = name.to_string();
        }
        v
    };
    let mut layer_rows: Vec<LayerRow> = layers
        .into_iter()
        .map(|((system, layer), acc)| {
            let mut f: Vec<(usize, u64)> = acc.functions.into_iter().collect();
            f.sort_by(|a, b| b.1.cmp(&a.1).then(names[a.0].cmp(&names[b.0])));
            LayerRow {
                system: system.to_string(),
                layer: layer.to_string(),
                total_ns: acc.total,
                innermost_ns: acc.innermost,
                off_cpu_share: if acc.innermost > 0 {
                    acc.innermost_off as f64 / acc.innermost as f64
                } else {
                    0.0
                },
                total_share: acc.total as f64 / total,
                functions: f
                    .into_iter()
                    .take(5)
                    .map(|(i, _)| names[i].clone())
                    .collect(),
            }
        })
        .collect();
    layer_rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.system.cmp(&b.system))
            .then_with(|| a.layer.cmp(&b.layer))
    });
    let off_total: u64 = off.values().fold(0u64, |t, v| t.saturating_add(v.0));
    let mut off_rows: Vec<OffCpuRow> = off
        .into_iter()
        .map(|(r, (w, n))| OffCpuRow {
            reason: r.as_str().to_string(),
            weight_ns: w,
            count: n,
            share: if off_total > 0 {
                w as f64 / off_total as f64
            } else {
                0.0
            },
        })
        .collect();
    off_rows.sort_by(|a, b| b.weight_ns.cmp(&a.weight_ns).then(a.reason.cmp(&b.reason)));
    // PostgreSQL's processes publish wait events: every non-idle stack under its event.
    let mut wait_events: Vec<ProfileWaitRow> = if !p.stacks.iter().any(|s| s.wait_event.is_some()) {
        Vec::new()
    } else {
        let mut all: HashMap<&str, ProfileWaitRow> = HashMap::new();
        for s in p.stacks.iter().filter(|s| !s.idle) {
            let e = all
                .entry(s.wait_event.as_deref().unwrap_or("-"))
                .or_default();
            match s.state {
                StackState::OnCpu => e.on_cpu_ns = e.on_cpu_ns.saturating_add(s.weight_ns),
                StackState::OffCpu(r) => {
                    e.off_cpu_ns = e.off_cpu_ns.saturating_add(s.weight_ns);
                    e.count = e.count.saturating_add(s.count);
                    if r == OffCpuReason::Runnable {
                        e.runnable_ns = e.runnable_ns.saturating_add(s.weight_ns);
                    }
                }
            }
        }
        let busy = all
            .values()
            .map(|r| r.on_cpu_ns.saturating_add(r.off_cpu_ns))
            .fold(0u64, u64::saturating_add)
            .max(1) as f64;
        all.into_iter()
            .map(|(event, mut r)| {
                r.event = event.to_string();
                r.share = r.on_cpu_ns.saturating_add(r.off_cpu_ns) as f64 / busy;
                r
            })
            .collect()
    };
    wait_events.sort_by(|a, b| {
        (b.on_cpu_ns.saturating_add(b.off_cpu_ns))
            .cmp(&a.on_cpu_ns.saturating_add(a.off_cpu_ns))
            .then_with(|| a.event.cmp(&b.event))
    });
    StackProfileAnalysis {
        samples: p.on_cpu_samples(),
        on_cpu_ns: p.weight_ns(StackState::OnCpu),
        off_cpu_ns: off_total,
        off_cpu: off_rows,
        stacks: p.stacks.len() as u64,
        top_functions: fns,
        layers: layer_rows,
        wait_events,
        idle_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::profile::{ProfileBuilder, ProfileSource};

    #[test]
    fn layers_and_functions_of_an_oracle_read() {
        let mut b = ProfileBuilder::new();
        let u = |b: &mut ProfileBuilder, n: &str| b.frame(n, FrameKind::User, "oracle");
        let k = |b: &mut ProfileBuilder, n: &str| b.frame(n, FrameKind::Kernel, "");
        let read = vec![
            u(&mut b, "opifch2"),
            u(&mut b, "qertbFetch"),
            u(&mut b, "kdsttgr"),
            u(&mut b, "kcbgtcr"),
            u(&mut b, "kcbzib"),
            u(&mut b, "ksfdread"),
            u(&mut b, "skgfqio"),
            u(&mut b, "pread64"),
            k(&mut b, "io_schedule"),
        ];
        let cpu = vec![
            u(&mut b, "opifch2"),
            u(&mut b, "qertbFetch"),
            u(&mut b, "kdsttgr"),
            u(&mut b, "kcbgtcr"),
        ];
        b.add(
            "oracle",
            read,
            StackState::OffCpu(OffCpuReason::IoWait),
            10,
            3_000,
        );
        b.add("oracle", cpu, StackState::OnCpu, 1, 1_000);
        let a = analyse(&b.finish(ProfileSource::default()));
        assert_eq!((a.on_cpu_ns, a.off_cpu_ns, a.samples), (1_000, 3_000, 1));
        assert_eq!(a.off_cpu[0].reason, "io-wait");
        // The blocked time is the read's, not the scheduler's.
        assert_eq!(a.top_functions[0].name, "pread64");
        let l = |name: &str| a.layers.iter().find(|l| l.layer == name).unwrap();
        assert_eq!(l("row sources").total_ns, 4_000);
        assert_eq!(l("buffer cache").total_ns, 4_000);
        assert_eq!(l("buffer cache").innermost_ns, 1_000);
        assert_eq!(l("scheduler (I/O wait)").innermost_ns, 3_000);
        assert_eq!(l("scheduler (I/O wait)").off_cpu_share, 1.0);
        assert_eq!(l("buffer cache").functions, vec!["kcbgtcr", "kcbzib"]);
    }
}
