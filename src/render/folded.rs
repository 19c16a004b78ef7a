//! Brendan Gregg's folded-stack format: one line per distinct stack, frames root first joined
//! by `;`, a space, and the stack's weight (`comm;main;a 42`). flamegraph.pl, speedscope and
//! most flame-graph tools read it; `iolens ingest --format folded` reads it back.
//!
//! The first frame is the process name. Kernel frames carry stackcollapse's `_[k]` suffix.
//! Off-CPU stacks end with a marker frame `[off-cpu REASON]` (`io-wait`, `sleep`, `runnable`).
//! Weights are sample counts when the profile has only on-CPU stacks, and microseconds for
//! both halves when it also has off-CPU stacks (CPU time is samples × period); a stack that
//! rounds to 0 µs is left out.

use std::fmt::Write as _;

use crate::results::profile::{FrameKind, StackProfile, StackState};

/// The marker frame that ends an off-CPU stack.
pub(crate) fn off_cpu_marker(state: StackState) -> Option<String> {
    match state {
        StackState::OnCpu => None,
        StackState::OffCpu(r) => Some(format!("[off-cpu {}]", r.as_str())),
    }
}

/// Whether [`folded`] writes microseconds (else sample counts).
pub(crate) fn weights_in_us(p: &StackProfile) -> bool {
    p.has_off_cpu()
}

/// The folded text of a profile.
pub fn folded(p: &StackProfile) -> String {
    let us = weights_in_us(p);
    let mut out = String::with_capacity(p.stacks.len() * 64);
    let mut lines: Vec<(String, u64)> = Vec::with_capacity(p.stacks.len());
    for s in &p.stacks {
        let w = if us {
            s.weight_ns.saturating_add(500) / 1000
        } else {
            s.count
        };
        if w == 0 {
            continue;
        }
        let mut line = s.comm.replace([';', ' '], "_");
        for &f in &s.frames {
            let f = p.frame(f);
            line.push(';');
            line.push_str(&f.name.replace(';', ":"));
            if f.kind == FrameKind::Kernel {
                line.push_str("_[k]");
            }
        }
        if let Some(m) = off_cpu_marker(s.state) {
            line.push(';');
            line.push_str(&m);
        }
        lines.push((line, w));
    }
    // Sorted as stackcollapse sorts, so equal profiles give equal files.
    lines.sort();
    for (l, w) in lines {
        let _ = writeln!(out, "{l} {w}");
    }
    out
}
