//! The Prometheus text exposition (format 0.0.4, which OpenMetrics parsers and the node_exporter
//! textfile collector read too): an [`Exposition`] worded line by line, and a results
//! document made one (`run`, `calibrate`, `db run --metrics FILE`).
//!
//! Latencies are classic histograms in seconds on one fixed bucket layout
//! ([`crate::histogram::classic`]: 16 buckets an octave from 256 ns to 68.7 s, each 4.43 %
//! wide), so series of many hosts add up with `sum by (le)` and `histogram_quantile` is within a
//! bucket's width of the exact quantile.

use std::fmt::Write as _;

use anyhow::Result;

use crate::histogram::classic::{classic_bound_ns, ClassicHist, CLASSIC_BOUNDS};
use crate::results::analysis::Analysis;
use crate::results::exposition::{Exposition, MetricKind, SampleValue};
use crate::results::Results;

/// The content type of the text exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value escaped as the exposition wants it (backslash, double quote, newline).
fn escape(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// `{a="x",b="y"` (open: the caller adds `le` or closes it), or nothing when there are no
/// labels and no `le` follows.
fn labels(ls: &[(String, String)], out: &mut String) {
    out.push('{');
    for (i, (k, v)) in ls.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        escape(v, out);
        out.push('"');
    }
}

/// A float as the exposition writes it (`+Inf`, `-Inf`, `NaN` spelled out).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// The `le` label values of the layout, seconds (the same text on every host).
pub fn le_values() -> &'static [String] {
    static LE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    LE.get_or_init(|| {
        (0..CLASSIC_BOUNDS)
            .map(|j| number(classic_bound_ns(j) / 1e9))
            .chain(std::iter::once("+Inf".to_string()))
            .collect()
    })
}

fn histogram(name: &str, ls: &[(String, String)], h: &ClassicHist, out: &mut String) {
    let le = le_values();
    let mut head = String::new();
    labels(ls, &mut head);
    if !ls.is_empty() {
        head.push(',');
    }
    for (j, cum) in h.cumulative().enumerate() {
        let _ = writeln!(out, "{name}_bucket{head}le=\"{}\"}} {cum}", le[j]);
    }
    let tail = if ls.is_empty() {
        String::new()
    } else {
        let mut t = String::new();
        labels(ls, &mut t);
        t.push('}');
        t
    };
    let _ = writeln!(out, "{name}_sum{tail} {}", number(h.sum_ns as f64 / 1e9));
    let _ = writeln!(out, "{name}_count{tail} {}", h.count);
}

/// The text exposition of `e`.
pub fn text(e: &Exposition) -> String {
    let mut out = String::new();
    for f in &e.families {
        if f.samples.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help.replace('\n', " "));
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.name());
        for s in &f.samples {
            match &s.value {
                SampleValue::Hist(h) => histogram(&f.name, &s.labels, h, &mut out),
                SampleValue::Number(v) => {
                    out.push_str(&f.name);
                    if !s.labels.is_empty() {
                        labels(&s.labels, &mut out);
                        out.push('}');
                    }
                    let _ = writeln!(out, " {}", number(*v));
                }
            }
        }
    }
    out
}

/// Latency histograms of every op of every run.
pub const OP_LATENCY: &str = "iolens_op_latency_seconds";

/// A results document as an exposition: per run and op its latency histogram (seconds), I/O,
/// error and byte counters, the run's length, and each verdict as a gauge of 1 labelled with
/// its kind and severity.
pub fn of_results(r: &Results, an: &Analysis) -> Result<Exposition> {
    let mut e = Exposition::default();
    let kind = r.kind.name();
    for run in &r.runs {
        for op in &run.ops {
            let ls = [
                ("kind", kind),
                ("run", run.name.as_str()),
                ("op", op.op.as_str()),
            ];
            let h = ClassicHist::from_hdr(&op.hist.decode()?);
            e.family(
                OP_LATENCY,
                "Latency of each completed operation, seconds (classic buckets: 16 an octave from \
                 256 ns to 68.7 s).",
                MetricKind::Histogram,
            )
            .push(&ls, SampleValue::Hist(h));
            e.family(
                "iolens_op_errors_total",
                "Operations that failed (counted, not timed).",
                MetricKind::Counter,
            )
            .push(&ls, SampleValue::Number(op.errors as f64));
            e.family(
                "iolens_op_bytes_total",
                "Bytes the operations transferred.",
                MetricKind::Counter,
            )
            .push(&ls, SampleValue::Number(op.bytes as f64));
        }
        e.family(
            "iolens_run_duration_seconds",
            "Length of the run's measured window, seconds.",
            MetricKind::Gauge,
        )
        .push(
            &[("kind", kind), ("run", run.name.as_str())],
            SampleValue::Number(run.duration_s),
        );
    }
    let verdicts = an
        .runs
        .iter()
        .zip(&r.runs)
        .flat_map(|(a, run)| a.verdicts.iter().map(move |v| (run.name.as_str(), v)))
        .chain(
            an.watch
                .iter()
                .flat_map(|w| w.verdicts.iter().map(|v| ("watch", v))),
        );
    for (run, v) in verdicts {
        e.family(
            "iolens_verdict",
            "A verdict of the analysis (1 while it holds), labelled by its kind and severity.",
            MetricKind::Gauge,
        )
        .push(
            &[
                ("kind", kind),
                ("run", run),
                ("verdict", v.kind.as_str()),
                ("severity", v.severity.as_str()),
            ],
            SampleValue::Number(1.0),
        );
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_with_every_bound_and_escaped_labels() {
        let mut e = Exposition::default();
        let mut h = ClassicHist::default();
        for v in [100, 300, 1_000_000, 1u64 << 40] {
            h.record(v);
        }
        e.family("x_seconds", "help", MetricKind::Histogram)
            .push(&[("op", "a\"b\\c")], SampleValue::Hist(h));
        e.family("y_total", "h", MetricKind::Counter)
            .push(&[], SampleValue::Number(3.0));
        let t = text(&e);
        let buckets: Vec<&str> = t.lines().filter(|l| l.contains("_bucket")).collect();
        assert_eq!(buckets.len(), CLASSIC_BOUNDS + 1);
        assert!(buckets[0].starts_with("x_seconds_bucket{op=\"a\\\"b\\\\c\",le=\"0.000000256\"} 1"));
        assert!(buckets[CLASSIC_BOUNDS].ends_with("le=\"+Inf\"} 4"));
        assert_eq!(buckets[CLASSIC_BOUNDS - 1].rsplit(' ').next(), Some("3"));
        assert!(t.contains("x_seconds_count{op=\"a\\\"b\\\\c\"} 4\n"));
        assert!(t.contains("\ny_total 3\n"));
    }
}
