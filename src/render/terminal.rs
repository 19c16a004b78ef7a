//! `iolens show`: the report's story in the terminal. Summary tables, the calibration curve,
//! latency histograms as bars and latency-over-time heatmaps (frequency and intensity, in the
//! manner of PyLatencyMap/OraLatencyMap) sized to the terminal width. ANSI colour only when
//! [`TermStyle::color`] says so (NO_COLOR, not a terminal → plain characters).

use std::fmt::Write as _;

use anyhow::{bail, Result};

use super::heatmap::{level_for, log_bins, HeatKind, Heatmap, LoadedColumns, OpSeries};
use super::table::{calibration_curve, heading, Table};
use super::{kind_name, TermStyle};
use crate::results::analysis::{Analysis, OpModes};
use crate::results::{Results, RunResult};
use crate::units::{fmt_bytes, fmt_ns, fmt_rate, sig3};

fn warn_line(out: &mut String, style: &TermStyle, text: &str) {
    if style.color {
        let _ = writeln!(out, "\x1b[33mwarning:\x1b[0m {text}");
    } else {
        let _ = writeln!(out, "warning: {text}");
    }
}

/// The per-run summary table (one row per run and op).
/// The summary table of every run and op. Without bytes anywhere (wait events, ingested
/// histograms) there is no MB/s column: a column of zeros would say nothing.
pub fn summary_table(r: &Results) -> Table {
    let bytes = r.runs.iter().flat_map(|x| &x.ops).any(|o| o.bytes > 0);
    let mut t = Table::new(&[
        "run",
        "op",
        "count",
        super::rate_name(r),
        "MB/s",
        "mean",
        "p50",
        "p99",
        "p99.9",
        "max",
        "errors",
    ]);
    for (i, run) in r.runs.iter().enumerate() {
        for op in &run.ops {
            let s = &op.summary;
            // Why a rate is unknown is said once, beside the run, not in every cell.
            let per_s = |v: f64, f: fn(f64) -> String| {
                if run.rates_known() {
                    f(v / run.duration_s)
                } else {
                    "unknown".to_string()
                }
            };
            t.row(vec![
                format!("{i}: {}", run.name),
                op.op.clone(),
                op.count.to_string(),
                per_s(op.count as f64, fmt_rate),
                per_s(op.bytes as f64 / 1e6, sig3),
                fmt_ns(s.mean_ns),
                fmt_ns(s.p50_ns as f64),
                fmt_ns(s.p99_ns as f64),
                fmt_ns(s.p999_ns as f64),
                fmt_ns(s.max_ns as f64),
                op.errors.to_string(),
            ]);
        }
    }
    if !bytes {
        t.drop_column("MB/s");
    }
    t
}

/// Lines describing CPU cost, run-queue delay and the device's view of a run.
pub(crate) fn host_lines(run: &RunResult) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(c) = &run.cpu {
        let runq = if c.runq_measured() {
            format!(
                "run-queue delay {} µs per I/O ({} total)",
                sig3(c.runq_us_per_io),
                fmt_ns(c.runq_delay_s * 1e9)
            )
        } else {
            "run-queue delay not measured".to_string()
        };
        v.push(format!(
            "CPU per I/O: {} µs (user {}, sys {}); {runq}; host busy {}%, iowait {}%, {} CPUs",
            sig3(c.us_per_io),
            sig3(c.user_us_per_io),
            sig3(c.sys_us_per_io),
            sig3(c.host_busy * 100.0),
            sig3(c.host_iowait * 100.0),
            c.cpus
        ));
    }
    if let Some(d) = &run.device {
        let mut s = format!(
            "Device {}: {} IOPS, {} MB/s, util {}%, {} in flight; device read await {}, write await {}",
            d.device,
            fmt_rate(d.iops),
            sig3(d.mb_per_s),
            sig3(d.util * 100.0),
            sig3(d.avg_in_flight),
            fmt_ns(d.read_await_us * 1e3),
            fmt_ns(d.write_await_us * 1e3),
        );
        for (name, dev_us) in [("read", d.read_await_us), ("write", d.write_await_us)] {
            if let Some(op) = run.op(name) {
                if op.count > 0 && dev_us > 0.0 {
                    let _ = write!(
                        s,
                        "; application {name} mean {} vs device {}",
                        fmt_ns(op.summary.mean_ns),
                        fmt_ns(dev_us * 1e3)
                    );
                }
            }
        }
        v.push(s);
    }
    if let Some(p) = &run.page_cache {
        v.push(format!(
            "Page cache: {}% of the {} working set resident before, {}% after",
            sig3(p.resident_before * 100.0),
            fmt_bytes(p.working_set_bytes),
            sig3(p.resident_after * 100.0)
        ));
    }
    v
}

/// Key=value summary of the top-level scalar fields of a workload spec.
pub(crate) fn spec_line(spec: Option<&crate::results::Spec>) -> Option<String> {
    let spec = spec?.to_value();
    let obj = spec.as_object()?;
    let parts: Vec<String> = obj
        .iter()
        .filter(|(_, v)| !v.is_object() && !v.is_array() && !v.is_null())
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// ANSI 256 colours of the terminal heatmaps, lowest level first, after PyLatencyMap: pale to
/// saturated blue for frequency, pale yellow to red for intensity. None is near black, so
/// cells read on dark terminals as well as on light ones.
const TERM_PALETTE_FREQ: [u8; 9] = [195, 159, 123, 87, 51, 45, 39, 33, 27];
const TERM_PALETTE_INT: [u8; 9] = [230, 229, 228, 226, 220, 214, 208, 202, 196];

fn term_palette(kind: HeatKind) -> &'static [u8; 9] {
    match kind {
        HeatKind::Frequency => &TERM_PALETTE_FREQ,
        HeatKind::Intensity => &TERM_PALETTE_INT,
    }
}

/// Palette step (0..9) of a heatmap level in (0, 1].
fn step(l: f64) -> usize {
    ((l * RAMP.len() as f64).ceil() as usize).clamp(1, RAMP.len()) - 1
}

/// Cell value at the top of palette step `i` (the inverse of [`level_for`]).
fn step_value(kind: HeatKind, i: usize, max: f64) -> f64 {
    let l = (i + 1) as f64 / RAMP.len() as f64;
    match kind {
        HeatKind::Frequency => (1.0 + max).powf(l) - 1.0,
        HeatKind::Intensity => l * max,
    }
}

/// The legend under a terminal heatmap: every colour (or character) with the value it
/// stands for, lowest first.
fn heat_legend(kind: HeatKind, max: f64, style: &TermStyle, indent: usize) -> String {
    let fmt = |v: f64| match kind {
        HeatKind::Frequency => fmt_rate(v),
        HeatKind::Intensity => fmt_ns(v),
    };
    let mut s = format!("{:>indent$}  scale:", "");
    for (code, ch) in term_palette(kind).iter().zip(RAMP) {
        if style.color {
            let _ = write!(s, " \x1b[48;5;{code}m  \x1b[0m");
        } else {
            let _ = write!(s, " {ch}");
        }
    }
    let _ = writeln!(
        s,
        "  ≤ {} … {} {} per cell",
        fmt(step_value(kind, 0, max)),
        fmt(max),
        match kind {
            HeatKind::Frequency => "I/Os",
            HeatKind::Intensity => "of latency",
        }
    );
    s
}

/// Characters used for heatmap levels without colour (lightest to darkest).
const RAMP: &[char] = &['.', ':', '-', '=', '+', '*', '#', '%', '@'];

/// Most time columns a terminal heatmap has at `style`'s width.
pub(crate) fn heatmap_columns(style: &TermStyle) -> usize {
    style.width.saturating_sub(10 + 2).max(10)
}

/// A terminal heatmap: one row per factor of two of latency (highest on top), one character
/// per column, as wide as `style.width` allows.
pub(crate) fn heatmap_text(series: &OpSeries, kind: HeatKind, style: &TermStyle) -> Option<String> {
    let label_w = 10;
    let cols = heatmap_columns(style);
    let m = Heatmap::build(series, cols, 1, 40)?;
    // Short runs: widen each column to fill the width.
    let rep = (cols / m.cols).max(1);
    let max = m.max_value(kind);
    let mut out = String::new();
    let secs_per_col = m.col_edges_s[1] - m.col_edges_s[0];
    let _ = writeln!(
        out,
        "{} heatmap, {} — {} s per cell, colour/character = {} ({} scale, max {})",
        series.op,
        kind.title(),
        sig3(secs_per_col),
        match kind {
            HeatKind::Frequency => "operations",
            HeatKind::Intensity => "time spent",
        },
        match kind {
            HeatKind::Frequency => "log",
            HeatKind::Intensity => "linear",
        },
        match kind {
            HeatKind::Frequency => fmt_rate(max),
            HeatKind::Intensity => fmt_ns(max),
        }
    );
    for r in (0..m.rows).rev() {
        let (lo, _) = m.row_bounds_ns(r);
        let _ = write!(out, "{:>label_w$} |", fmt_ns(lo));
        for c in (0..m.cols * rep).map(|x| x / rep) {
            let l = level_for(kind, m.value(kind, r, c), max);
            if l <= 0.0 {
                out.push(' ');
            } else if style.color {
                let _ = write!(out, "\x1b[48;5;{}m \x1b[0m", term_palette(kind)[step(l)]);
            } else {
                out.push(RAMP[step(l)]);
            }
        }
        out.push('\n');
    }
    let t0 = m.col_edges_s[0];
    let t1 = *m.col_edges_s.last().unwrap_or(&t0);
    let left = format!("{} s", sig3(t0));
    let right = format!("{} s", sig3(t1));
    let gap = (m.cols * rep).saturating_sub(left.len() + right.len());
    let _ = writeln!(
        out,
        "{:>label_w$} +{}\n{:>label_w$}  {left}{}{right}",
        "",
        "-".repeat(m.cols * rep),
        "",
        " ".repeat(gap)
    );
    out.push_str(&heat_legend(kind, max, style, label_w));
    Some(out)
}

/// Latency histogram of one op as horizontal bars (one per factor of two).
pub fn histogram_text(run: &RunResult, op_idx: usize, style: &TermStyle) -> Result<String> {
    let a = crate::analysis::analyse_run(run);
    let modes = a.modes.iter().find(|m| m.op == run.ops[op_idx].op);
    op_histogram_text(run, op_idx, modes, style)
}

/// [`histogram_text`] with the op's modes from the stored analysis.
fn op_histogram_text(
    run: &RunResult,
    op_idx: usize,
    modes: Option<&OpModes>,
    style: &TermStyle,
) -> Result<String> {
    let op = &run.ops[op_idx];
    let h = op.hist.decode()?;
    let bins = log_bins(&h, &op.bucket_edges_ns, 1);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} latency histogram ({} operations):",
        op.op, op.count
    );
    let top = bins.iter().map(|b| b.share).fold(0.0, f64::max);
    let bar_w = style.width.saturating_sub(40).max(10);
    for b in &bins {
        let n = if top > 0.0 {
            (b.share / top * bar_w as f64).round() as usize
        } else {
            0
        };
        let n = if b.count > 0 { n.max(1) } else { 0 };
        let bar = "█".repeat(n);
        let bar = if style.color {
            format!("\x1b[34m{bar}\x1b[0m")
        } else {
            bar
        };
        let _ = writeln!(
            out,
            "{:>9} .. {:<9} {:>6}% {}",
            fmt_ns(b.low_ns),
            fmt_ns(b.high_ns),
            format!("{:.2}", b.share * 100.0),
            bar
        );
    }
    let desc = modes.map(|m| m.description.as_str()).unwrap_or("");
    if !desc.is_empty() {
        let _ = writeln!(out, "modes: {desc}");
    }
    Ok(out)
}

/// The calibration section: headline figures and the curve as a table.
fn calibration_text(r: &Results, an: &Analysis, style: &TermStyle, out: &mut String) {
    let Some(c) = &r.calibration else { return };
    heading(out, style, "Calibration");
    let target = format!(
        "p{} ≤ {}",
        sig3(c.percentile),
        fmt_ns(c.max_latency_ns as f64)
    );
    let _ = writeln!(
        out,
        "Max IOPS at {target}: {}   max MB/s (many streams): {}   max MB/s (one stream): {}",
        c.max_iops
            .map(fmt_rate)
            .unwrap_or_else(|| "not reached".into()),
        c.max_mbps.map(sig3).unwrap_or_else(|| "-".into()),
        c.max_pmbps.map(sig3).unwrap_or_else(|| "-".into()),
    );
    if let Some(t) = calibration_curve(r, an) {
        out.push_str(&t.render(style));
    }
    let _ = writeln!(
        out,
        "Step overhead: {} s of a {} s budget.",
        sig3(c.overhead_s),
        sig3(c.budget_s)
    );
    for v in &c.verdicts {
        let _ = writeln!(out, "• {}", v.message);
    }
}

/// Render the whole terminal view. `only_run` limits the per-run details to one run.
pub fn render(r: &Results, style: &TermStyle, only_run: Option<usize>) -> Result<String> {
    render_loaded(r, style, only_run, None)
}

/// [`render`], taking the display columns validation merged on loading (`loaded`, made for
/// [`heatmap_columns`] of `style`): the same text, each interval histogram decoded once.
pub(crate) fn render_loaded(
    r: &Results,
    style: &TermStyle,
    only_run: Option<usize>,
    loaded: Option<&LoadedColumns>,
) -> Result<String> {
    if let Some(i) = only_run {
        if i >= r.runs.len() {
            bail!(
                "--run {i} is out of range: this file has {} run(s), numbered from 0",
                r.runs.len()
            );
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "iolens {} results, written {} by iolens {}",
        kind_name(r.kind),
        r.created,
        r.tool_version
    );
    if !r.command_line.is_empty() {
        let _ = writeln!(out, "command: {}", super::command_text(&r.command_line));
    }
    let e = &r.environment;
    // Traces and ingested histograms come from elsewhere: no host facts to show.
    if e.cpus > 0 || !e.hostname.is_empty() {
        let _ = writeln!(
            out,
            "host: {} ({}), {} CPUs {}, {} memory",
            e.hostname,
            e.kernel,
            e.cpus,
            e.cpu_model,
            fmt_bytes(e.memory_bytes)
        );
    }
    if let Some(t) = &e.target {
        let _ = writeln!(
            out,
            "target: {} ({}, {}) on {} {} [{}], device {} {}",
            t.path,
            t.kind,
            fmt_bytes(t.size_bytes),
            t.filesystem,
            t.mount_point,
            t.mount_options,
            t.device,
            t.device_model
        );
    }
    let an = crate::analysis::of(r);
    // A watch's answer comes first: its verdict and the database's own words.
    let top = super::watch::headline(r, &an);
    if !top.is_empty() {
        heading(&mut out, style, "Verdict");
        for (_, line) in &top {
            let _ = writeln!(out, "• {line}");
        }
    }
    // A stack profile alone (`profile`, perf-script ingest) has no runs to summarise.
    if !r.runs.is_empty() || r.profile.is_none() {
        heading(&mut out, style, "Summary");
        out.push_str(&summary_table(r).render(style));
    }
    out.push_str(&super::hosts::text(r, style));
    out.push_str(&super::plan::text(r, style));
    out.push_str(&super::replay::text(r, style));
    calibration_text(r, &an, style, &mut out);
    out.push_str(&super::analysis::text(r, &an, style));
    let details: Vec<usize> = match only_run {
        Some(i) => vec![i],
        None if r.runs.len() <= 4 => (0..r.runs.len()).collect(),
        None => {
            let pick = r
                .calibration
                .as_ref()
                .and_then(|c| c.max_iops_point.and_then(|p| c.curve.get(p)).map(|p| p.run))
                .filter(|&i| i < r.runs.len())
                .unwrap_or(r.runs.len() - 1);
            // The runs over several targets (a database run's SQL run beside its watch's
            // runs) come too: their per-target table is what the file was measured for.
            let mut picks: Vec<usize> = super::targets::runs_with_targets(r)
                .map(|(i, _)| i)
                .filter(|&i| i != pick)
                .collect();
            picks.push(pick);
            let named: Vec<String> = picks.iter().map(|i| i.to_string()).collect();
            let _ = writeln!(
                out,
                "\n{} runs: details below are for run{} {}; use --run N for another.",
                r.runs.len(),
                if picks.len() > 1 { "s" } else { "" },
                named.join(" and ")
            );
            picks
        }
    };
    for i in details {
        let run = &r.runs[i];
        heading(
            &mut out,
            style,
            &format!(
                "Run {i}: {} ({} s, {} s intervals)",
                run.name,
                sig3(run.duration_s),
                sig3(run.interval_s)
            ),
        );
        if let Some(s) = spec_line(run.spec.as_ref()) {
            let _ = writeln!(out, "workload: {s}");
        }
        let _ = writeln!(
            out,
            "{}{}",
            if run.rates_known() && run.phase == "db" && run.ops.iter().all(|o| o.bytes == 0) {
                // SQL statements are not I/Os (PostgreSQL: the server does the reads).
                let ops: u64 = run.ops.iter().map(|o| o.count).sum();
                format!(
                    "{} SQL operations/s{}",
                    fmt_rate(ops as f64 / run.duration_s.max(1e-9)),
                    run.counters
                        .get("physical_reads_per_s")
                        .map(|x| format!(
                            "; {} physical reads/s by the server's count",
                            fmt_rate(*x)
                        ))
                        .unwrap_or_default()
                )
            } else {
                let bytes = run.ops.iter().any(|o| o.bytes > 0);
                let rate = super::rate_name(r);
                match (run.rates_known(), bytes) {
                    (true, true) => format!(
                        "{} {rate}, {} MB/s",
                        fmt_rate(run.iops()),
                        sig3(run.mb_per_s())
                    ),
                    (true, false) => format!("{} {rate}", fmt_rate(run.iops())),
                    (false, true) => format!("{rate}, MB/s: {}", crate::results::UNKNOWN_RATE),
                    (false, false) => format!("{rate}: {}", crate::results::UNKNOWN_RATE),
                }
            },
            if run.interrupted {
                " (interrupted before its planned end)"
            } else {
                ""
            }
        );
        for l in host_lines(run) {
            let _ = writeln!(out, "{l}");
        }
        out.push_str(&super::targets::text(run, style));
        for w in &run.warnings {
            warn_line(&mut out, style, w);
        }
        let ra = an.runs.get(i);
        for v in ra.map(|a| a.verdicts.as_slice()).unwrap_or(&[]) {
            let _ = writeln!(out, "{}: {}", v.severity, v.message);
        }
        // Display columns merged exactly from the intervals (as many as the width holds).
        let series = OpSeries::decode_all_columns_loaded(
            &run.ops,
            heatmap_columns(style),
            loaded.map(|l| (l, i)),
        )?;
        for (oi, s) in series.iter().enumerate() {
            if run.ops[oi].count == 0 {
                continue;
            }
            out.push('\n');
            let modes = ra.and_then(|a| a.modes.iter().find(|m| m.op == run.ops[oi].op));
            out.push_str(&op_histogram_text(run, oi, modes, style)?);
            for kind in [HeatKind::Frequency, HeatKind::Intensity] {
                if let Some(h) = heatmap_text(s, kind, style) {
                    out.push('\n');
                    out.push_str(&h);
                }
            }
        }
    }
    if !r.warnings.is_empty() {
        heading(&mut out, style, "Warnings");
        for w in &r.warnings {
            warn_line(&mut out, style, w);
        }
    }
    Ok(crate::out::fit(&out, style.width))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::table::plain;
    use crate::synth;

    #[test]
    fn heatmap_fits_width_and_shows_both_modes() {
        let r = synth::run_results(120, 1.0, 7);
        let s = OpSeries::decode(&r.runs[0].ops[0]).unwrap();
        let txt = heatmap_text(&s, HeatKind::Frequency, &plain(70)).unwrap();
        for l in txt.lines().skip(1) {
            assert!(l.chars().count() <= 70, "{l:?}");
        }
        // Rows labelled by latency, highest first; the synthetic bimodal data (~100 µs and
        // ~4 ms) shows in two separate bands of rows.
        let density: Vec<usize> = txt
            .lines()
            .filter(|l| l.contains(" |"))
            .map(|l| {
                l.split_once('|')
                    .unwrap()
                    .1
                    .chars()
                    .filter(|c| *c != ' ')
                    .count()
            })
            .collect();
        let dense = |d: &usize| *d >= 35;
        let first = density.iter().position(dense).expect("a dense row");
        let last = density.iter().rposition(dense).expect("a dense row");
        assert!(
            density[first..last].iter().any(|d| *d <= 2),
            "expected an empty row between the two modes:\n{txt}"
        );
        assert!(!txt.contains('\x1b'));
        let coloured = heatmap_text(
            &s,
            HeatKind::Intensity,
            &TermStyle {
                color: true,
                width: 70,
            },
        )
        .unwrap();
        assert!(coloured.contains("\x1b[48;5;"));
    }

    #[test]
    fn heatmap_legend_and_a_palette_readable_on_dark_terminals() {
        let r = synth::run_results(60, 1.0, 3);
        let s = OpSeries::decode(&r.runs[0].ops[0]).unwrap();
        let txt = heatmap_text(&s, HeatKind::Frequency, &plain(80)).unwrap();
        let legend = txt.lines().last().unwrap();
        assert!(legend.contains("scale: . : - = + * # % @"), "{txt}");
        assert!(legend.contains("I/Os per cell"), "{txt}");
        let c = TermStyle {
            color: true,
            width: 80,
        };
        for kind in [HeatKind::Frequency, HeatKind::Intensity] {
            let txt = heatmap_text(&s, kind, &c).unwrap();
            assert!(txt.lines().last().unwrap().contains("\x1b[48;5;"), "{txt}");
            // Every colour of the 6×6×6 cube part is at least mid-bright in one channel.
            for &code in term_palette(kind) {
                let i = code - 16;
                let (r, g, b) = (i / 36, (i / 6) % 6, i % 6);
                assert!(r.max(g).max(b) >= 5, "colour {code} is too dark");
            }
            for w in term_palette(kind).windows(2) {
                assert_ne!(w[0], w[1]);
            }
        }
    }

    #[test]
    fn render_reports_bad_run_index() {
        let r = synth::run_results(5, 1.0, 1);
        let e = render(&r, &plain(80), Some(3)).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }
}
