//! `iolens export --markdown`: the summary as GitHub-flavoured Markdown, to paste into a ticket
//! or a pull request: what ran where, the per-run table, the calibration headline and load
//! curve, verdicts and warnings. Tables are the same [`Table`]s the terminal and HTML show.

use std::fmt::Write as _;

use super::findings::verdicts;
use super::kind_name;
use super::table::{blocks_markdown, calibration_curve, md, Table};
use super::terminal::summary_table;
use crate::results::Results;
use crate::units::{fmt_bytes, fmt_ns, fmt_rate, sig3};

/// The summary of `r` as Markdown.
pub fn summary(r: &Results) -> String {
    let mut out = String::new();
    let an = crate::analysis::of(r);
    let _ = writeln!(
        out,
        "## iolens {} results\n\nWritten {} by iolens {}.\n",
        kind_name(r.kind),
        md(&r.created),
        md(&r.tool_version)
    );
    if !r.command_line.is_empty() {
        let cmd = super::command_text(&r.command_line).replace('`', "'");
        let _ = writeln!(out, "```\n{cmd}\n```\n");
    }
    let e = &r.environment;
    if e.cpus > 0 || !e.hostname.is_empty() {
        let _ = writeln!(
            out,
            "- host: {} ({}), {} CPUs {}, {} memory",
            md(&e.hostname),
            md(&e.kernel),
            e.cpus,
            md(&e.cpu_model),
            fmt_bytes(e.memory_bytes)
        );
    }
    if let Some(t) = &e.target {
        let _ = writeln!(
            out,
            "- target: {} ({}, {}) on {}, device {} {}",
            md(&t.path),
            md(t.kind.name()),
            fmt_bytes(t.size_bytes),
            md(&t.filesystem),
            md(&t.device),
            md(&t.device_model)
        );
    }
    let top = super::watch::headline(r, &an);
    if !top.is_empty() {
        let _ = writeln!(out, "\n### Verdict\n");
        for (_, line) in &top {
            let _ = writeln!(out, "- {}", md(line));
        }
    }
    let _ = writeln!(out, "\n### Summary\n\n{}", summary_table(r).markdown());
    out.push_str(&super::targets::markdown(r));
    out.push_str(&super::plan::markdown(r));
    out.push_str(&super::replay::markdown(r));
    if let Some(c) = &r.calibration {
        let _ = writeln!(
            out,
            "### Calibration\n\n- max IOPS at p{} ≤ {}: **{}**\n- max MB/s, many streams: {}\n- max MB/s, one stream: {}\n",
            sig3(c.percentile),
            fmt_ns(c.max_latency_ns as f64),
            c.max_iops.map(fmt_rate).unwrap_or_else(|| "not reached".into()),
            c.max_mbps.map(sig3).unwrap_or_else(|| "-".into()),
            c.max_pmbps.map(sig3).unwrap_or_else(|| "-".into()),
        );
        if let Some(t) = calibration_curve(r, &an) {
            let _ = writeln!(out, "{}", t.markdown());
        }
        for v in &c.verdicts {
            let _ = writeln!(out, "- {}", md(&v.message));
        }
        if !c.verdicts.is_empty() {
            out.push('\n');
        }
    }
    let mut findings = Table::new(&["run", "severity", "finding"]);
    for (i, run) in r.runs.iter().enumerate() {
        for (sev, msg) in verdicts(&an, i) {
            findings.row(vec![format!("{i}: {}", run.name), sev, msg]);
        }
        for w in &run.warnings {
            findings.row(vec![
                format!("{i}: {}", run.name),
                "warning".into(),
                w.clone(),
            ]);
        }
    }
    // A watch's sections: where the time went per interval, the wait-event tables, the
    // processes' syscalls.
    let mut watch = Vec::new();
    super::watch::blocks(r, &an, &mut watch);
    out.push_str(&blocks_markdown(watch));
    if !findings.rows.is_empty() {
        let _ = writeln!(out, "### Findings\n\n{}", findings.markdown());
    }
    if !r.warnings.is_empty() {
        let _ = writeln!(out, "### Warnings\n");
        for w in &r.warnings {
            let _ = writeln!(out, "- {}", md(w));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth;

    #[test]
    fn calibration_summary_as_markdown_tables() {
        let r = synth::calibration_results(3, 1, 50, 1);
        let m = summary(&r);
        assert!(m.starts_with("## iolens calibrate results"), "{m}");
        assert!(m.contains("### Summary\n\n| run | op | count |"), "{m}");
        assert!(m.contains("| sessions | qd | IOPS |"), "{m}");
        assert!(m.contains("| --- | ---: |"), "{m}");
        // Every table row has as many cells as its header.
        for block in m.split("\n\n").filter(|b| b.starts_with('|')) {
            let n = block.lines().next().unwrap().matches(" | ").count();
            for l in block.lines() {
                assert_eq!(l.replace("\\|", "").matches(" | ").count(), n, "{l}");
            }
        }
    }

    #[test]
    fn markup_in_text_is_escaped() {
        assert_eq!(md("a|b *c* <d>"), "a\\|b \\*c\\* \\<d\\>");
    }
}
