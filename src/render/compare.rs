//! `iolens compare`: several results side by side, as summary tables with ratio columns
//! against the first file (the baseline); whether the comparison means anything and which
//! runs pair up is decided in [`crate::analysis::compare`]. The HTML form with overlaid curves
//! and histograms is [`html`].

use std::fmt::Write as _;

use anyhow::Result;

use hdrhistogram::Histogram;

use super::heatmap::log_bins;
use super::svg::{self, colour, esc, Fmt, HistSeries, LineChart, Series};
use super::table::Table;
use super::TermStyle;
pub use crate::analysis::compare::incompatibilities;
#[cfg(test)]
use crate::analysis::compare::spec_differences;
use crate::analysis::compare::{differences, figure, holds_values, means, pair_runs, Figure};
use crate::histogram::{sparse_quantile, standard_reference, value_of, V2Scan};
use crate::results::analysis::CalibrationAnalysis;
use crate::results::{Calibration, Results, RunResult};
pub use crate::units::ratio;
use crate::units::{fmt_ns, fmt_rate, sig3};

/// `other / base` with its noise, as hyperfine writes it (`1.04 ± 0.02×`): `noise_*` are the
/// relative interval-to-interval spreads (standard deviation over mean) of each figure, and the
/// ratio's spread is theirs combined. Without both spreads, the plain [`ratio`].
pub(crate) fn ratio_noise(
    base: f64,
    noise_base: Option<f64>,
    other: f64,
    noise_other: Option<f64>,
) -> String {
    let (Some(na), Some(nb)) = (noise_base, noise_other) else {
        return ratio(base, other);
    };
    if !(base > 0.0 && other.is_finite()) {
        return ratio(base, other);
    }
    let r = other / base;
    let err = r * (na * na + nb * nb).sqrt();
    // Two significant digits of the spread, the ratio to the same decimals.
    let decimals = if err > 0.0 {
        (1 - err.log10().floor() as i32).clamp(2, 4) as usize
    } else {
        2
    };
    format!("{r:.decimals$} ± {err:.decimals$}×")
}

/// Relative spread (standard deviation over mean) of per-interval values; `None` with fewer
/// than two intervals or a zero mean.
fn spread(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if mean.is_nan() || mean <= 0.0 {
        return None;
    }
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
    Some(var.sqrt() / mean)
}

/// The interval-to-interval spread of each figure of [`op_metrics`] (same order): rates from
/// each interval's count and duration, latencies from each interval's histogram. Maximums and
/// CPU cost have none.
pub(crate) fn op_noise(run: &RunResult, op: &str) -> Vec<Option<f64>> {
    let Some(o) = run.op(op) else { return vec![] };
    let n_metrics = op_metrics(run, op).len();
    let ivs: Vec<&crate::results::Interval> = o
        .intervals
        .iter()
        .filter(|i| i.count > 0 && i.duration_s > 0.0)
        .collect();
    let rates = |f: fn(&crate::results::Interval) -> f64| -> Option<f64> {
        if !run.rates_known() {
            return None;
        }
        spread(&ivs.iter().map(|i| f(i) / i.duration_s).collect::<Vec<_>>())
    };
    // One histogram decoded at a time, keeping only its figures: a day of one-second
    // intervals decoded at once was ~265 KB an interval (issue 22).
    let (mut scan, mut counts, mut sparse) = (V2Scan::new(), Vec::new(), Vec::new());
    let figures: Vec<[f64; 5]> = ivs
        .iter()
        .filter_map(|i| interval_figures(&i.hist, &mut scan, &mut counts, &mut sparse))
        .collect();
    let lat =
        |k: usize| -> Option<f64> { spread(&figures.iter().map(|f| f[k]).collect::<Vec<_>>()) };
    let mut v = vec![
        rates(|i| i.count as f64),
        rates(|i| i.bytes as f64),
        lat(0),
        lat(1),
        lat(2),
        lat(3),
        lat(4),
    ];
    v.resize(n_metrics, None);
    v
}

/// The mean and the 50th, 90th, 99th and 99.9th percentiles of one interval's histogram (ns),
/// the figures HdrHistogram gives: read from its non-zero counts straight from the encoding
/// ([`V2Scan`]) when it has the standard layout, else decoded with the bounds it was stored
/// with and dropped; `None` when it does not decode.
fn interval_figures(
    hist: &crate::results::Hist,
    scan: &mut V2Scan,
    counts: &mut Vec<(usize, u64)>,
    sparse: &mut Vec<(u64, u64)>,
) -> Option<[f64; 5]> {
    if scan.scan(hist, counts) && V2Scan::len_in_range(counts).is_some() {
        let total = counts.iter().map(|c| c.1).sum::<u64>();
        if total == 0 {
            return Some([0.0; 5]);
        }
        let r = standard_reference();
        sparse.clear();
        sparse.extend(counts.iter().map(|&(i, n)| (value_of(i), n)));
        // As `Histogram::mean` sums, in the same order.
        let mean = sparse.iter().fold(0.0, |m, &(v, n)| {
            m + r.median_equivalent(v) as f64 * n as f64 / total as f64
        });
        let q = |q: f64| sparse_quantile(sparse, q) as f64;
        return Some([mean, q(0.5), q(0.9), q(0.99), q(0.999)]);
    }
    let stored = hist.decode_as_stored().ok()?;
    let h = match stored {
        None => return Some([0.0; 5]),
        Some(h) if h.low() == 1 && h.sigfig() == crate::histogram::SIGFIG => h,
        // Another layout: the project-wide one, as every other figure is read.
        Some(_) => hist.decode().ok()?,
    };
    let q = |q: f64| h.value_at_quantile(q) as f64;
    Some([h.mean(), q(0.5), q(0.9), q(0.99), q(0.999)])
}

/// `f(v)`, or [`crate::results::UNKNOWN_RATE`] for NaN (a rate of a run without a duration).
fn unknown_or(v: f64, f: fn(f64) -> String) -> String {
    if v.is_nan() {
        crate::results::UNKNOWN_RATE.into()
    } else {
        f(v)
    }
}

/// A compared figure: label, value as the source holds it ([`figure`]) and how to format it.
pub(crate) type Metric = (&'static str, Figure, fn(f64) -> String);

/// A figure in words: a bucket as `≤ edge` or `≥ edge`, one a source does not hold as `-`.
fn say(v: Figure, f: fn(f64) -> String) -> String {
    match v {
        Figure::Value(v) => f(v),
        Figure::AtMost(e) => format!("≤ {}", f(e as f64)),
        Figure::AtLeast(e) => format!("≥ {}", f(e as f64)),
        Figure::NotHeld => "-".into(),
    }
}

/// The figures of one op and their interval-to-interval noise ([`op_metrics`], [`op_noise`]).
type MetricsNoise = (Vec<Metric>, Vec<Option<f64>>);

/// The figures compared for one op of one run.
pub(crate) fn op_metrics(run: &RunResult, op: &str) -> Vec<Metric> {
    let Some(o) = run.op(op) else { return vec![] };
    let d = run.duration_s.max(1e-9);
    // A run without a known duration has no rates: NaN, printed as unknown.
    let known = |v: f64| if run.rates_known() { v } else { f64::NAN };
    let s = &o.summary;
    let lat: fn(f64) -> String = fmt_ns;
    // Latencies as the source holds them: a source of buckets holds the bucket a percentile
    // falls in, and no mean.
    let held = |v: f64| figure(o, v, false);
    let mut v: Vec<Metric> = vec![
        ("IOPS", Figure::Value(known(o.count as f64 / d)), |v| {
            unknown_or(v, fmt_rate)
        }),
        (
            "MB/s",
            Figure::Value(known(o.bytes as f64 / d / 1e6)),
            |v| unknown_or(v, sig3),
        ),
        ("mean", figure(o, s.mean_ns, true), lat),
        ("p50", held(s.p50_ns as f64), lat),
        ("p90", held(s.p90_ns as f64), lat),
        ("p99", held(s.p99_ns as f64), lat),
        ("p99.9", held(s.p999_ns as f64), lat),
        ("max", held(s.max_ns as f64), lat),
    ];
    if let Some(c) = &run.cpu {
        v.push(("CPU µs/IO", Figure::Value(c.us_per_io), sig3));
        v.push(("runq µs/IO", Figure::Value(c.runq_us_per_io), sig3));
    }
    v
}

/// One table per paired run and common op: a column per file, ratio columns after the first.
pub(crate) fn run_tables(inputs: &[(String, Results)]) -> Vec<(String, Table)> {
    let mut out = Vec::new();
    let Some((_, base)) = inputs.first() else {
        return out;
    };
    for (ri, run) in base.runs.iter().enumerate() {
        // Index of the matching run in every input.
        let matches = partners(inputs, ri);
        if matches.iter().skip(1).all(|m| m.is_none()) {
            continue;
        }
        for op in &run.ops {
            let mut t = Table {
                header: ratio_header(inputs),
                rows: vec![],
            };
            let base_m = op_metrics(run, &op.op);
            let base_n = op_noise(run, &op.op);
            let others: Vec<Option<MetricsNoise>> = inputs
                .iter()
                .enumerate()
                .map(|(i, (_, r))| {
                    matches[i]
                        .map(|j| (op_metrics(&r.runs[j], &op.op), op_noise(&r.runs[j], &op.op)))
                })
                .collect();
            for (mi, (name, bv, f)) in base_m.iter().enumerate() {
                let mut row = vec![name.to_string(), say(*bv, *f)];
                for other in others.iter().skip(1) {
                    let val = other
                        .as_ref()
                        .and_then(|(m, n)| m.get(mi).map(|m| (m.1, n.get(mi).copied().flatten())));
                    match val {
                        Some((v, nv)) => {
                            row.push(say(v, *f));
                            // Ratios of figures held exactly; a bucket edge is no latency.
                            row.push(match (bv.value(), v.value()) {
                                (Some(b), Some(v)) => {
                                    ratio_noise(b, base_n.get(mi).copied().flatten(), v, nv)
                                }
                                _ => "-".into(),
                            });
                        }
                        None => {
                            row.push("-".into());
                            row.push("-".into());
                        }
                    }
                }
                t.rows.push(row);
            }
            out.push((format!("{} — run {ri} ({})", op.op, run.name), t));
        }
    }
    out
}

/// Where an input holds means only ([`means`]): its title, saying so, and a table of the mean
/// latency of each common operation per input, with ratios. Never percentiles.
pub(crate) fn means_table(inputs: &[(String, Results)]) -> Option<(String, Table)> {
    let m = means(inputs)?;
    let title = format!(
        "Means only: {} hold(s) counts and total time, no distribution; mean latencies are \
         compared, never percentiles",
        m.means_only.join(", ")
    );
    let mut t = Table {
        header: ratio_header(inputs),
        rows: vec![],
    };
    for (op, v) in &m.ops {
        let base = v[0].1;
        let mut row = vec![format!("{op} mean"), fmt_ns(base)];
        for &(_, mean) in v.iter().skip(1) {
            row.push(fmt_ns(mean));
            row.push(ratio(base, mean));
        }
        t.rows.push(row);
        let mut row = vec![format!("{op} count"), v[0].0.to_string()];
        for &(n, _) in v.iter().skip(1) {
            row.push(n.to_string());
            row.push(ratio(v[0].0 as f64, n as f64));
        }
        t.rows.push(row);
    }
    Some((title, t))
}

/// The run of every input paired with run `ri` of the first (the baseline), if any.
fn partners(inputs: &[(String, Results)], ri: usize) -> Vec<Option<usize>> {
    let base = &inputs[0].1;
    inputs
        .iter()
        .map(|(_, r)| {
            pair_runs(base, r)
                .into_iter()
                .find(|p| p.0 == ri)
                .map(|p| p.1)
        })
        .collect()
}

/// The header of a table with a column per input and a ratio column after each but the first.
fn ratio_header(inputs: &[(String, Results)]) -> Vec<String> {
    let mut header = vec!["".to_string()];
    for (i, (label, _)) in inputs.iter().enumerate() {
        header.push(label.clone());
        if i > 0 {
            header.push("ratio".into());
        }
    }
    header
}

/// A calibration figure: its name, how to get it from a calibration and its analysis, and how
/// to print it.
type CalRow = (
    &'static str,
    fn(&Calibration, &CalibrationAnalysis) -> Option<f64>,
    fn(f64) -> String,
);

/// Headline calibration figures and what analysis found in them (knee, USL fit, the write
/// ramp, commit latency, what CALIBRATE_IO would say) side by side, with ratios.
pub(crate) fn calibration_table(inputs: &[(String, Results)]) -> Option<Table> {
    inputs.first()?.1.calibration.as_ref()?;
    let mut t = Table {
        header: ratio_header(inputs),
        rows: vec![],
    };
    let rows: [CalRow; 12] = [
        ("max IOPS at target", |c, _| c.max_iops, fmt_rate),
        ("max MB/s", |c, _| c.max_mbps, sig3),
        ("max MB/s one stream", |c, _| c.max_pmbps, sig3),
        (
            "knee IOPS",
            |_, a| a.knee.as_ref().map(|k| k.iops),
            fmt_rate,
        ),
        (
            "knee sessions",
            |_, a| a.knee.as_ref().map(|k| k.sessions as f64),
            sig3,
        ),
        (
            "knee p99",
            |_, a| a.knee.as_ref().map(|k| k.p99_ns as f64),
            fmt_ns,
        ),
        (
            "USL peak IOPS",
            |_, a| a.usl.as_ref().and_then(|u| u.peak_x),
            fmt_rate,
        ),
        (
            "USL peak sessions",
            |_, a| a.usl.as_ref().and_then(|u| u.peak_n),
            sig3,
        ),
        ("USL σ", |_, a| a.usl.as_ref().map(|u| u.sigma), sig3),
        ("USL κ", |_, a| a.usl.as_ref().map(|u| u.kappa), sig3),
        (
            "random-write IOPS",
            |_, a| a.write_best.map(|b| b.value),
            fmt_rate,
        ),
        (
            "commit p99",
            |_, a| a.commit.first().map(|c| c.p99_ns as f64),
            fmt_ns,
        ),
    ];
    let analyses: Vec<Option<(&Calibration, CalibrationAnalysis)>> = inputs
        .iter()
        .map(|(_, r)| {
            r.calibration.as_ref().map(|c| {
                let an = crate::analysis::of(r);
                (c, an.calibration.clone().unwrap_or_default())
            })
        })
        .collect();
    for (name, get, f) in rows {
        let vals: Vec<Option<f64>> = analyses
            .iter()
            .map(|x| x.as_ref().and_then(|(c, a)| get(c, a)))
            .collect();
        if vals.iter().all(|v| v.is_none()) {
            continue;
        }
        let bv = vals[0];
        let mut row = vec![name.to_string(), bv.map(f).unwrap_or_else(|| "-".into())];
        for v in vals.iter().skip(1) {
            row.push(v.map(f).unwrap_or_else(|| "-".into()));
            row.push(match (bv, v) {
                (Some(a), Some(b)) => ratio(a, *b),
                _ => "-".into(),
            });
        }
        t.rows.push(row);
    }
    Some(t)
}

/// Latency modes in a few columns: `102 µs 77% · 4.18 ms 23%` (centre and share, fastest first).
fn compact_modes(modes: &[crate::results::analysis::Mode]) -> String {
    if modes.is_empty() {
        return "-".into();
    }
    modes
        .iter()
        .map(|m| format!("{} {:.0}%", fmt_ns(m.centre_ns), m.share * 100.0))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// What analysis found in each input, side by side (text, no ratios): the ramp's stop reason
/// of calibrations, then for every run paired with the baseline's the
/// latency modes of each op and the verdicts. `None` when there is nothing to show.
pub(crate) fn analysis_table(inputs: &[(String, Results)]) -> Option<Table> {
    let (_, base) = inputs.first()?;
    let mut header = vec!["".to_string()];
    header.extend(inputs.iter().map(|(l, _)| l.clone()));
    let mut t = Table {
        header,
        rows: vec![],
    };
    let ans: Vec<_> = inputs.iter().map(|(_, r)| crate::analysis::of(r)).collect();
    let mut push = |name: String, cells: Vec<String>| {
        if cells.iter().any(|c| !c.is_empty() && c != "-") {
            let mut row = vec![name];
            row.extend(cells);
            t.rows.push(row);
        }
    };
    let cal = |i: usize| ans[i].calibration.as_ref();
    push(
        "ramp stopped".into(),
        (0..inputs.len())
            .map(|i| {
                cal(i)
                    .and_then(|c| c.stop_reason)
                    .and_then(|s| serde_json::to_value(s).ok())
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "-".into())
            })
            .collect(),
    );
    // Runs paired with the baseline's (of a calibration's many steps, only the max-IOPS step:
    // its modes are the modes at max IOPS).
    let focus: Vec<usize> = match base.calibration.as_ref() {
        Some(c) => c
            .max_iops_point
            .and_then(|p| c.curve.get(p))
            .map(|p| vec![p.run])
            .unwrap_or_default(),
        None => (0..base.runs.len()).collect(),
    };
    for ri in focus {
        let Some(run) = base.runs.get(ri) else {
            continue;
        };
        let pairs = partners(inputs, ri);
        for op in &run.ops {
            push(
                format!("{} modes — run {ri}", op.op),
                (0..inputs.len())
                    .map(|i| {
                        pairs[i]
                            .and_then(|j| ans[i].runs.get(j))
                            .and_then(|a| a.modes.iter().find(|m| m.op == op.op))
                            .map(|m| compact_modes(&m.modes))
                            .unwrap_or_else(|| "-".into())
                    })
                    .collect(),
            );
        }
        push(
            format!("verdicts — run {ri}"),
            (0..inputs.len())
                .map(|i| {
                    let v: Vec<&str> = pairs[i]
                        .and_then(|j| ans[i].runs.get(j))
                        .map(|a| a.verdicts.iter().map(|v| v.kind.as_str()).collect())
                        .unwrap_or_default();
                    if v.is_empty() {
                        "-".into()
                    } else {
                        v.join(", ")
                    }
                })
                .collect(),
        );
    }
    (!t.rows.is_empty()).then_some(t)
}

/// The terminal comparison.
pub fn terminal(
    inputs: &[(String, Results)],
    problems: &[String],
    style: &TermStyle,
) -> Result<String> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Comparing {} results; ratios are against {}.",
        inputs.len(),
        inputs[0].0
    );
    for (label, r) in inputs {
        let _ = writeln!(
            out,
            "  {label}: {} on {} ({}), {} run(s), written {}",
            r.kind.name(),
            r.environment.hostname,
            r.environment
                .target
                .as_ref()
                .map(|t| t.path.as_str())
                .unwrap_or("-"),
            r.runs.len(),
            r.created
        );
    }
    for p in problems {
        let _ = writeln!(out, "warning (compared with --force): {p}");
    }
    for d in differences(inputs) {
        let _ = writeln!(out, "differs: {d}");
    }
    if let Some((title, t)) = means_table(inputs) {
        let _ = writeln!(out, "\n{title}");
        out.push_str(&t.render(style));
    }
    if let Some(t) = calibration_table(inputs) {
        let _ = writeln!(out, "\nCalibration");
        out.push_str(&t.render(style));
    }
    if let Some(t) = analysis_table(inputs) {
        let _ = writeln!(out, "\nAnalysis");
        out.push_str(&t.render(style));
    }
    for (title, t) in super::watch::compare_tables(inputs)
        .into_iter()
        .chain(super::replay::compare_tables(inputs))
    {
        let _ = writeln!(out, "\n{title}");
        out.push_str(&t.render(style));
    }
    for (title, t) in run_tables(inputs) {
        let _ = writeln!(out, "\n{title}");
        out.push_str(&t.render(style));
    }
    Ok(crate::out::fit(&out, style.width))
}

/// Quantiles drawn on the percentile curves: from the median out to p99.99, evenly spaced in
/// "nines" (−log10(1 − q)) so the tail gets as much room as the body.
const CURVE_NINES: [f64; 13] = [
    0.301, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5,
];

/// Overlaid percentile curves of one op, one per input: latency (log scale) against the
/// percentile in nines, so the inputs' tails are side by side.
fn percentile_chart(title: &str, curves: &[(String, Histogram<u64>)]) -> String {
    let mut ch = LineChart::new(
        title,
        "percentile, in nines (0.3 = p50, 1 = p90, 2 = p99, 3 = p99.9, 4 = p99.99)",
        "latency (log scale)",
        Fmt::Rate,
        Fmt::Latency,
    );
    ch.y_log = true;
    ch.height = 280.0;
    for (i, (label, h)) in curves.iter().enumerate() {
        let points: Vec<(f64, f64)> = CURVE_NINES
            .iter()
            .map(|&n| (n, 1.0 - 10f64.powf(-n)))
            // A quantile is only meaningful with enough operations behind it.
            .filter(|&(_, q)| (h.len() as f64) * (1.0 - q) >= 1.0)
            .map(|(n, q)| (n, h.value_at_quantile(q) as f64))
            .collect();
        ch.series.push(Series {
            name: label.clone(),
            colour: colour(i).into(),
            points,
            dots: true,
            dashed: false,
        });
    }
    ch.render()
}

/// Render the HTML comparison of several results (the first is the baseline).
pub fn html(inputs: &[(String, Results)], problems: &[String]) -> Result<String> {
    let mut out = String::with_capacity(1 << 18);
    let names: Vec<&str> = inputs.iter().map(|(l, _)| l.as_str()).collect();
    super::html::page_start(
        &mut out,
        &format!("iolens compare — {}", names.join(" vs ")),
    );
    let _ = write!(
        out,
        "<header><h1>iolens comparison</h1><p class=\"meta\">Ratios are against {}.</p></header>",
        esc(names[0])
    );
    let mut t = Table::new(&["file", "kind", "host", "target", "runs", "written"]);
    for (label, r) in inputs {
        t.row(vec![
            label.clone(),
            r.kind.name().into(),
            r.environment.hostname.clone(),
            r.environment
                .target
                .as_ref()
                .map(|x| x.path.clone())
                .unwrap_or_default(),
            r.runs.len().to_string(),
            r.created.clone(),
        ]);
    }
    out.push_str(&t.html());
    for p in problems {
        let _ = write!(
            out,
            "<div class=\"verdict warning\">Compared with --force although: {}</div>",
            esc(p)
        );
    }
    for d in differences(inputs) {
        let _ = write!(out, "<p class=\"note\">Differs: {}</p>", esc(&d));
    }
    if let Some((title, t)) = means_table(inputs) {
        let _ = write!(
            out,
            "<section id=\"means\"><h2>Means</h2><p class=\"note\">{}</p>",
            esc(&title)
        );
        out.push_str(&t.html());
        out.push_str("</section>");
    }
    if let Some(t) = calibration_table(inputs) {
        out.push_str("<section id=\"calibration\"><h2>Calibration</h2>");
        out.push_str(&t.html());
        let mut ch = LineChart::new(
            "p99 latency vs IOPS",
            "IOPS",
            "p99 latency (log scale)",
            Fmt::Rate,
            Fmt::Latency,
        );
        ch.y_log = true;
        for (i, (label, r)) in inputs.iter().enumerate() {
            if let Some(c) = &r.calibration {
                ch.series.push(Series {
                    name: label.clone(),
                    colour: colour(i).into(),
                    points: c.curve.iter().map(|p| (p.iops, p.p99_ns as f64)).collect(),
                    dots: true,
                    dashed: false,
                });
            }
        }
        if let Some(c) = &inputs[0].1.calibration {
            ch.hlines.push((
                c.max_latency_ns as f64,
                format!("target {}", fmt_ns(c.max_latency_ns as f64)),
            ));
        }
        out.push_str(&ch.render());
        out.push_str("</section>");
    }
    if let Some(t) = analysis_table(inputs) {
        out.push_str("<section id=\"analysis\"><h2>Analysis</h2>");
        out.push_str(&t.html());
        out.push_str("</section>");
    }
    let replay = super::replay::compare_tables(inputs);
    if !replay.is_empty() {
        out.push_str("<section id=\"replay\"><h2>Recorded beside replayed</h2>");
        for (title, t) in &replay {
            let _ = write!(out, "<h3>{}</h3>", esc(title));
            out.push_str(&t.html());
        }
        out.push_str("</section>");
    }
    let watch = super::watch::compare_tables(inputs);
    if !watch.is_empty() {
        out.push_str("<section id=\"watch\"><h2>Where the time went</h2>");
        for (title, t) in &watch {
            let _ = write!(out, "<h3>{}</h3>", esc(title));
            out.push_str(&t.html());
        }
        for (label, r) in inputs {
            if let Some(chart) = super::watch::wall_chart(r, &format!("{label}: wall time")) {
                out.push_str(&chart);
            }
        }
        out.push_str("</section>");
    }
    out.push_str("<section id=\"runs\"><h2>Runs and operations</h2>");
    let base = &inputs[0].1;
    let tables = run_tables(inputs);
    for (title, t) in &tables {
        let _ = write!(out, "<h3>{}</h3>", esc(title));
        out.push_str(&t.html());
    }
    // Overlaid histograms per paired run and common op.
    let limit = if base.runs.len() > 4 {
        1
    } else {
        base.runs.len()
    };
    let focus: Vec<usize> = if limit == 1 && base.runs.len() > 1 {
        vec![base
            .calibration
            .as_ref()
            .and_then(|c| c.max_iops_point.and_then(|p| c.curve.get(p)).map(|p| p.run))
            .unwrap_or(0)]
    } else {
        (0..limit).collect()
    };
    for ri in focus {
        let Some(run) = base.runs.get(ri) else {
            continue;
        };
        for op in &run.ops {
            let mut series = Vec::new();
            let mut curves = Vec::new();
            for (i, (label, r)) in inputs.iter().enumerate() {
                let Some(j) = pair_runs(base, r)
                    .into_iter()
                    .find(|p| p.0 == ri)
                    .map(|p| p.1)
                else {
                    continue;
                };
                let Some(o) = r.runs[j].op(&op.op) else {
                    continue;
                };
                let h = o.hist.decode()?;
                // Percentile curves only of exact values: a source of buckets holds no
                // percentile between its edges (its histogram below is drawn on them).
                if !h.is_empty() && holds_values(o) {
                    curves.push((label.clone(), h.clone()));
                }
                series.push(HistSeries {
                    name: label.clone(),
                    colour: colour(i).into(),
                    bins: log_bins(&h, &o.bucket_edges_ns, 4)
                        .iter()
                        .map(|b| (b.low_ns, b.high_ns, b.share))
                        .collect(),
                });
            }
            if series.len() > 1 {
                out.push_str(&svg::histogram_chart(
                    &format!("{} latency — run {ri} ({})", op.op, run.name),
                    &series,
                    &[],
                ));
            }
            if curves.len() > 1 {
                out.push_str(&percentile_chart(
                    &format!("{} percentiles — run {ri} ({})", op.op, run.name),
                    &curves,
                ));
            }
        }
    }
    out.push_str("</section>");
    super::html::page_end(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The figures read from an interval's encoding are HdrHistogram's own, for the standard
    /// layout (scanned), an interval's grown layout and another precision (decoded).
    #[test]
    fn interval_figures_are_hdrhistograms() {
        use crate::results::Hist;
        let values = [
            0u64,
            1,
            900,
            1_000,
            12_345,
            250_000,
            3_000_000,
            7_000_000_000,
        ];
        let mut std = crate::histogram::new_histogram();
        let mut grown = crate::histogram::interval_histogram();
        let mut two = Histogram::<u64>::new_with_bounds(1, 1 << 40, 2).unwrap();
        for (k, &v) in values.iter().enumerate() {
            for h in [&mut std, &mut grown, &mut two] {
                h.record_n(v, k as u64 + 1).unwrap();
            }
        }
        let (mut scan, mut counts, mut sparse) = (V2Scan::new(), Vec::new(), Vec::new());
        for h in [&std, &grown, &two] {
            let want = Hist::encode(h).decode().unwrap();
            let q = |q: f64| want.value_at_quantile(q) as f64;
            let got = interval_figures(&Hist::encode(h), &mut scan, &mut counts, &mut sparse);
            assert_eq!(
                got,
                Some([want.mean(), q(0.5), q(0.9), q(0.99), q(0.999)]),
                "{} digits up to {}",
                h.sigfig(),
                h.high()
            );
        }
        let empty = Hist::encode(&crate::histogram::new_histogram());
        assert_eq!(
            interval_figures(&empty, &mut scan, &mut counts, &mut sparse),
            Some([0.0; 5])
        );
    }

    #[test]
    fn spec_differences_ignore_location_and_duration() {
        let a = json!({"block_size": 8192, "sessions": 4, "target": "/a", "duration_s": 10});
        let b = json!({"block_size": 8192, "sessions": 4, "target": "/b", "duration_s": 60});
        assert!(spec_differences(&a, &b).is_empty());
        let c = json!({"block_size": 4096, "sessions": 4, "extra": {"qd": 1}});
        let d = spec_differences(&a, &c);
        assert!(d.contains(&"block_size: 8192 vs 4096".to_string()), "{d:?}");
        assert!(
            d.contains(&"extra: (absent) vs {\"qd\":1}".to_string()),
            "{d:?}"
        );
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(100.0, 150.0), "1.5×");
        assert_eq!(ratio(0.0, 150.0), "-");
        // 1 % and 2 % spreads: 1.04 × √(0.01² + 0.02²) = 0.023.
        assert_eq!(
            ratio_noise(100.0, Some(0.01), 104.0, Some(0.02)),
            "1.040 ± 0.023×"
        );
        assert_eq!(
            ratio_noise(100.0, Some(0.1), 150.0, Some(0.1)),
            "1.50 ± 0.21×"
        );
        assert_eq!(ratio_noise(100.0, None, 150.0, Some(0.1)), "1.5×");
        assert_eq!(spread(&[1.0]), None);
        assert!((spread(&[9.0, 11.0]).unwrap() - 0.1414).abs() < 1e-3);
    }

    #[test]
    fn session_counts_differ_without_force_block_sizes_do_not() {
        let a = crate::synth::run_results(5, 1.0, 1);
        let mut b = a.clone();
        b.runs[0].spec.as_mut().unwrap().sessions = Some(99);
        let inputs = vec![("a.json".to_string(), a.clone()), ("b.json".to_string(), b)];
        assert!(incompatibilities(&inputs).is_empty());
        let d = differences(&inputs);
        assert!(
            d[0].starts_with("a.json run 0 vs b.json run 0: sessions:"),
            "{d:?}"
        );
        let mut c = a.clone();
        c.runs[0].spec.as_mut().unwrap().block_size = Some(4096);
        let inputs = vec![("a.json".to_string(), a), ("c.json".to_string(), c)];
        let bad = incompatibilities(&inputs);
        assert!(
            bad[0].starts_with("workloads differ (a.json run 0 vs c.json run 0): block_size"),
            "{bad:?}"
        );
    }
}
