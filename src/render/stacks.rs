//! The stack-profile sections `show` and `report` print: the on/off-CPU split (off-CPU time by
//! reason), the top functions and the database and kernel layers the time went through.

use super::table::Block;
use super::table::Table;
use super::TermStyle;
use crate::results::analysis::StackProfileAnalysis;
use crate::results::profile::OffCpuReason;
use crate::results::Results;
use crate::units::{fmt_ns, sig3};

fn pct(share: f64) -> String {
    format!("{} %", sig3(share * 100.0))
}

/// The sections of the stack profile of `r`, when it has one.
pub fn blocks(r: &Results, an: Option<&StackProfileAnalysis>, out: &mut Vec<Block>) {
    let (Some(p), Some(a)) = (&r.profile, an) else {
        return;
    };
    // Weights are sample counts when the source gave no time (perf script without periods).
    let timed = p.source.period_ns.is_some() || p.has_off_cpu();
    let amount = |ns: u64| {
        if timed {
            fmt_ns(ns as f64)
        } else {
            ns.to_string()
        }
    };
    let mut lines = vec![format!(
        "{} on-CPU samples{}{}; {} distinct stacks{}",
        a.samples,
        p.source
            .frequency_hz
            .map(|f| format!(" at {} Hz", sig3(f)))
            .unwrap_or_default(),
        if timed {
            format!(" ({} CPU time)", fmt_ns(a.on_cpu_ns as f64))
        } else {
            " (weights are sample counts: the source gave no time)".into()
        },
        a.stacks,
        p.source
            .duration_s
            .map(|d| format!(", over {} s", sig3(d)))
            .unwrap_or_default()
    )];
    if p.source.lost > 0 || p.source.truncated > 0 {
        lines.push(format!(
            "{} sample(s) or event(s) lost, {} stack(s) only partly walked",
            p.source.lost, p.source.truncated
        ));
    }
    if a.idle_ns > 0 {
        lines.push(if p.source.idle_ns > 0 {
            format!(
                "idle (waiting for a client or for work: Client:ClientRead outside a transaction, \
                 Activity:*, \
                 epoll_wait, poll, select): {} over {} waits, left out of the stacks and the \
                 flame graph (--keep-idle keeps them)",
                fmt_ns(a.idle_ns as f64),
                p.source.idle_count
            )
        } else {
            format!(
                "idle (waiting for a client or for work): {}, kept in the stacks and the flame \
                 graph, left out of every figure below",
                fmt_ns(a.idle_ns as f64)
            )
        });
    }
    let mut off = None;
    if a.off_cpu_ns > 0 || p.source.off_cpu {
        lines.push(format!("off CPU: {} in total", fmt_ns(a.off_cpu_ns as f64)));
        let mut t = Table::new(&["off-CPU reason", "time", "share", "blocks"]);
        for row in &a.off_cpu {
            let reason = OffCpuReason::parse(&row.reason)
                .map(|r| r.describe())
                .unwrap_or(row.reason.as_str());
            t.row(vec![
                reason.to_string(),
                fmt_ns(row.weight_ns as f64),
                pct(row.share),
                row.count.to_string(),
            ]);
        }
        off = Some(t);
    }
    out.push(Block {
        title: "Stack profile: on and off CPU".into(),
        lines,
        table: off,
    });
    let mut t = Table::new(&[
        "function",
        "layer",
        "self on CPU",
        "self off CPU",
        "total",
        "total %",
    ]);
    for f in &a.top_functions {
        t.row(vec![
            if f.kernel {
                format!("{} [k]", f.name)
            } else {
                f.name.clone()
            },
            f.layer.clone().unwrap_or_default(),
            amount(f.self_on_cpu_ns),
            if f.self_off_cpu_ns > 0 {
                fmt_ns(f.self_off_cpu_ns as f64)
            } else {
                "-".into()
            },
            amount(f.total_ns),
            pct(f.total_share),
        ]);
    }
    let head = [
        "wait event",
        "time",
        "share",
        "on CPU",
        "off CPU",
        "of which waiting for a CPU",
        "waits",
    ];
    let rows = a.wait_events.iter().map(|e| {
        let ns = |n: u64| fmt_ns(n as f64);
        vec![
            e.event.clone(),
            ns(e.on_cpu_ns.saturating_add(e.off_cpu_ns)),
            pct(e.share),
            ns(e.on_cpu_ns),
            ns(e.off_cpu_ns),
            ns(e.runnable_ns),
            e.count.to_string(),
        ]
    });
    table_block(
        out,
        "PostgreSQL wait events (as each process published it)",
        "- is no wait event: running or runnable, or a wait PostgreSQL does not name; idle \
         time is not counted",
        Table::of(&head, rows),
    );
    out.push(Block {
        title: "Top functions (by own time, then total)".into(),
        lines: vec![],
        table: Some(t),
    });
    let head = [
        "system",
        "layer",
        "total",
        "total %",
        "innermost",
        "of which off CPU",
        "functions",
    ];
    let rows = a.layers.iter().map(|l| {
        vec![
            l.system.clone(),
            l.layer.clone(),
            amount(l.total_ns),
            pct(l.total_share),
            amount(l.innermost_ns),
            pct(l.off_cpu_share),
            l.functions.join(", "),
        ]
    });
    table_block(
        out,
        "Layers (database and kernel)",
        "total: stacks passing through the layer; innermost: stacks whose deepest known layer \
         it is (these add up to at most 100 %)",
        Table::of(&head, rows),
    );
}

/// A section of one note and a table, left out when the table has no rows.
fn table_block(out: &mut Vec<Block>, title: &str, note: &str, table: Table) {
    if table.is_empty() {
        return;
    }
    out.push(Block {
        title: title.into(),
        lines: vec![note.into()],
        table: Some(table),
    });
}

/// The sections as terminal text, with at most `rows` rows per table (the brief `profile`
/// prints as it ends; `show` prints them whole).
pub fn text(
    r: &Results,
    an: Option<&StackProfileAnalysis>,
    style: &TermStyle,
    rows: usize,
) -> String {
    let mut blocks = Vec::new();
    let mut an = an.cloned();
    if let Some(a) = an.as_mut() {
        a.top_functions.truncate(rows);
        a.layers.truncate(rows);
    }
    self::blocks(r, an.as_ref(), &mut blocks);
    super::table::blocks_text(blocks, style)
}
