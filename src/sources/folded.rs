//! Folded stacks (Brendan Gregg's format, as `render::folded` writes it and stackcollapse-*.pl
//! produce it) into a stack profile: `comm;outer;…;leaf WEIGHT` per line.
//!
//! The first frame is taken as the process name; a line needs at least one `;`, and a file
//! with more lines not understood than stacks is not read as folded stacks. A `_[k]` suffix marks a kernel frame
//! (`_[j]`, `_[i]` — JIT, inlined — are dropped: the frames are user code). A last frame
//! `[off-cpu REASON]` marks an off-CPU stack. Weights are sample counts, or microseconds when
//! the file has off-CPU stacks (as iolens writes them).

use anyhow::Result;

use super::{parse_u64, LineReader};
use crate::results::profile::{
    FrameKind, OffCpuReason, ProfileBuilder, ProfileSource, StackProfile, StackState,
};

/// Read one folded file (empty profile when no line was a stack).
pub fn read(r: &mut LineReader) -> Result<StackProfile> {
    let mut b = ProfileBuilder::new();
    let mut rows: Vec<(String, Vec<u32>, StackState, u64)> = Vec::new();
    while let Some(line) = r.next_line()? {
        let t = line.trim_ascii();
        if t.is_empty() || t.starts_with(b"#") {
            r.ignored("blank or comment");
            continue;
        }
        let Some(sp) = t.iter().rposition(|&c| c == b' ') else {
            r.unparsed("no weight after the stack");
            continue;
        };
        let Some(w) = parse_u64(&t[sp + 1..]) else {
            r.unparsed("the weight is not a whole number");
            continue;
        };
        let Ok(stack) = std::str::from_utf8(&t[..sp]) else {
            r.unparsed("not UTF-8 text");
            continue;
        };
        if !stack.contains(';') {
            r.unparsed("no `;` between frames");
            continue;
        }
        let mut parts = stack.split(';');
        let comm = parts.next().unwrap_or_default().to_string();
        let mut names: Vec<&str> = parts.collect();
        let mut state = StackState::OnCpu;
        if let Some(m) = names
            .last()
            .and_then(|l| l.strip_prefix("[off-cpu "))
            .and_then(|l| l.strip_suffix(']'))
        {
            let Some(reason) = OffCpuReason::parse(m) else {
                r.unparsed("unknown off-CPU reason");
                continue;
            };
            state = StackState::OffCpu(reason);
            names.pop();
        }
        let frames = names
            .iter()
            .map(|n| {
                if let Some(k) = n.strip_suffix("_[k]") {
                    b.frame(k, FrameKind::Kernel, "")
                } else {
                    let u = n
                        .strip_suffix("_[j]")
                        .or_else(|| n.strip_suffix("_[i]"))
                        .unwrap_or(n);
                    b.frame(u, FrameKind::User, "")
                }
            })
            .collect();
        rows.push((comm, frames, state, w));
        r.parsed();
    }
    // Text that merely has a few lines of this shape (a trace, a log) is not folded stacks.
    if r.stats.unparsed > r.stats.parsed {
        rows.clear();
    }
    let us = rows.iter().any(|r| r.2 != StackState::OnCpu);
    for (comm, frames, state, w) in rows {
        let (count, ns) = match (us, state) {
            // Microseconds say nothing of how many samples or blocks made them.
            (true, _) => (0, w.saturating_mul(1000)),
            (false, _) => (w, w),
        };
        b.add(&comm, frames, state, count, ns);
    }
    if !us && !b.is_empty() {
        r.warnings
            .push("folded stacks carry no time: weights are sample counts".into());
    }
    Ok(b.finish(ProfileSource {
        producer: "folded".into(),
        off_cpu: us,
        ..ProfileSource::default()
    }))
}
