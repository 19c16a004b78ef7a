//! Whether several results compare at all, and which of their runs pair up (`iolens compare`):
//! a different kind of results, no operation in common, or runs whose I/Os differ in size,
//! pattern or read/write mix make ratios meaningless and are refused (unless forced); other
//! workload differences are listed beside the figures. Renderers word nothing of this anew.

use serde_json::Value;

use crate::results::{BucketConvention, OpResult, Results};
use crate::units::{fmt_ns, sig3};

/// Spec keys that may differ between compared runs without making the comparison meaningless:
/// where it ran, for how long, and what it was called.
const FREE_KEYS: &[&str] = &[
    "target",
    "target_path",
    "path",
    "file",
    "device",
    "dsn",
    "url",
    "duration",
    "duration_s",
    "runtime",
    "runtime_s",
    "warmup",
    "warmup_s",
    "seed",
    "output",
    "interval",
    "interval_s",
    "name",
    "label",
    "started",
    "time_budget",
    "budget_s",
];

/// Spec keys whose difference makes ratios meaningless: what each I/O is (its size, its
/// pattern, the read/write mix). Everything else (sessions, queue depth, engine, …) is what a
/// comparison is for, and is listed beside the figures instead.
const BLOCKING_KEYS: &[&str] = &["block_size", "pattern", "read_pct", "op", "ops"];

/// Whether a `key: a vs b` difference (from [`spec_differences`]) is one of [`BLOCKING_KEYS`].
fn blocking(difference: &str) -> bool {
    let key = difference.split(':').next().unwrap_or("");
    let leaf = key.rsplit('.').next().unwrap_or(key);
    BLOCKING_KEYS.contains(&leaf)
}

/// Differences between two workload specs outside [`FREE_KEYS`], as `key: a vs b`.
pub(crate) fn spec_differences(a: &Value, b: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_into("", a, b, &mut out);
    out
}

fn diff_into(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    walk_differences(path, a, b, FREE_KEYS, &mut |path, a, b| {
        out.push(format!(
            "{}: {} vs {}",
            if path.is_empty() { "spec" } else { path },
            short(a),
            short(b)
        ))
    });
}

/// Walk two JSON values side by side — objects field by field in key order, leaving out the
/// fields named in `skip`, a field absent on one side `null` there — and call `each` with the
/// dotted path (empty at the top) and both values of every leaf that differs. The one walker
/// of `compare`'s spec differences and `merge`'s check that ranks ran one workload.
pub(crate) fn walk_differences(
    path: &str,
    a: &Value,
    b: &Value,
    skip: &[&str],
    each: &mut dyn FnMut(&str, &Value, &Value),
) {
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                if skip.contains(&k.as_str()) {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk_differences(
                    &p,
                    ma.get(k).unwrap_or(&Value::Null),
                    mb.get(k).unwrap_or(&Value::Null),
                    skip,
                    each,
                );
            }
        }
        _ if a == b => {}
        _ => each(path, a, b),
    }
}

fn short(v: &Value) -> String {
    match v {
        Value::Null => "(absent)".into(),
        Value::String(s) => s.clone(),
        other => {
            let s = other.to_string();
            if s.chars().count() > 40 {
                format!("{}…", s.chars().take(40).collect::<String>())
            } else {
                s
            }
        }
    }
}

/// Reasons why comparing these results would be meaningless (empty when they compare): a
/// different kind of results, no operation in common, or runs whose I/Os differ in size,
/// pattern or read/write mix. Each input is `(label, results)`; the first is the baseline, and
/// every message names the files in the order given.
pub fn incompatibilities(inputs: &[(String, Results)]) -> Vec<String> {
    checks(inputs).0
}

/// Differences that do not stop a comparison but belong beside it: other workload settings
/// (sessions, queue depth, engine, …) and a different calibration target.
pub(crate) fn differences(inputs: &[(String, Results)]) -> Vec<String> {
    checks(inputs).1
}

/// (incompatibilities, differences) of the inputs against the first.
fn checks(inputs: &[(String, Results)]) -> (Vec<String>, Vec<String>) {
    let (mut bad, mut notes) = (Vec::new(), Vec::new());
    let Some((base_label, base)) = inputs.first() else {
        return (bad, notes);
    };
    for (label, r) in &inputs[1..] {
        // Means-only evidence compares by its means with any kind of result.
        if r.kind != base.kind && !means_only(base) && !means_only(r) {
            bad.push(format!(
                "{base_label} is a {} result but {label} is a {} result",
                base.kind.name(),
                r.kind.name()
            ));
            continue;
        }
        let (a, b) = (op_names(base), op_names(r));
        if !a.iter().any(|o| b.contains(o)) {
            bad.push(format!(
                "{base_label} and {label} have no operation in common: {base_label} holds {}, \
                 {label} holds {}",
                name_ops(base, &a),
                name_ops(r, &b)
            ));
        }
        if let (Some(ca), Some(cb)) = (&base.calibration, &r.calibration) {
            if ca.percentile != cb.percentile || ca.max_latency_ns != cb.max_latency_ns {
                notes.push(format!(
                    "{base_label} was calibrated for p{} ≤ {} but {label} for p{} ≤ {}",
                    sig3(ca.percentile),
                    fmt_ns(ca.max_latency_ns as f64),
                    sig3(cb.percentile),
                    fmt_ns(cb.max_latency_ns as f64)
                ));
            }
        }
        for (i, (ra, rb)) in pair_runs(base, r).into_iter().enumerate() {
            let (stop, other): (Vec<String>, Vec<String>) =
                spec_differences(&base.runs[ra].spec_value(), &r.runs[rb].spec_value())
                    .into_iter()
                    .partition(|d| blocking(d));
            if !stop.is_empty() {
                bad.push(format!(
                    "workloads differ ({base_label} run {ra} vs {label} run {rb}): {}",
                    stop.join("; ")
                ));
            }
            if !other.is_empty() {
                notes.push(format!(
                    "{base_label} run {ra} vs {label} run {rb}: {}",
                    other.join("; ")
                ));
            }
            if i >= 50 {
                break;
            }
        }
    }
    let any_means_only = inputs.iter().any(|(_, r)| means_only(r));
    if any_means_only && bad.is_empty() && means(inputs).is_none() {
        bad.push(
            "one side holds means only (counts and total time) and no operation has both on \
             every side: there is no mean to compare"
                .into(),
        );
    }
    (bad, notes)
}

/// The operations a result holds: those of its runs, and those of its means-only evidence
/// (`io_stats`, an AWR or Statspack report's foreground wait events) that did something;
/// sorted, each once.
fn op_names(r: &Results) -> Vec<String> {
    let mut v: Vec<String> = r
        .runs
        .iter()
        .flat_map(|x| x.ops.iter().map(|o| o.op.clone()))
        .chain(r.io_stats.iter().flat_map(|v| {
            v.series
                .iter()
                .filter(|x| x.count.unwrap_or(0) > 0 || x.time_ms.unwrap_or(0.0) > 0.0)
                .map(|x| x.op.clone())
        }))
        .chain(foreground_means(r).into_iter().map(|(op, _, _)| op))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Most operation names listed in a refusal (an AWR report holds a hundred events).
const NAMES_LISTED: usize = 8;

/// `ops` in words for a refusal: "no operation" when empty, at most [`NAMES_LISTED`] names
/// then how many more, and "(means only)" where the result holds no distribution.
fn name_ops(r: &Results, ops: &[String]) -> String {
    if ops.is_empty() {
        return "no operation".into();
    }
    let mut s = ops
        .iter()
        .take(NAMES_LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if ops.len() > NAMES_LISTED {
        s.push_str(&format!(" … ({} more)", ops.len() - NAMES_LISTED));
    }
    if means_only(r) {
        s.push_str(" (means only)");
    }
    s
}

/// Whether a result holds means only: means-only evidence (`io_stats`) and no run with an
/// operation, so no distribution.
pub(crate) fn means_only(r: &Results) -> bool {
    !r.io_stats.is_empty() && r.runs.iter().all(|x| x.ops.is_empty())
}

/// A comparison of mean latencies, made where an input holds means only: percentiles cannot
/// be compared, since one side has none.
#[derive(Clone, Debug, PartialEq)]
pub struct MeansComparison {
    /// The inputs that hold means only, by label.
    pub means_only: Vec<String>,
    /// Per operation every input holds with a mean: the operation, and per input (in the order
    /// given) its operation count and mean latency in ns over the whole of its evidence.
    pub ops: Vec<(String, Vec<(u64, f64)>)>,
}

/// The means an AWR or Statspack report holds beside its histograms: its Foreground Wait
/// Events table (kept in the run's spec as `foreground_wait_events`), per event the waits and
/// the total wait time (ns). Means of foreground waits, never a distribution: the histograms
/// count every wait, foreground and background.
fn foreground_means(r: &Results) -> Vec<(String, u64, f64)> {
    let mut out = Vec::new();
    for run in &r.runs {
        let Some(spec) = run.spec.as_ref().map(|s| s.to_value()) else {
            continue;
        };
        let Some(rows) = spec
            .get("foreground_wait_events")
            .and_then(|v| v.as_array())
        else {
            continue;
        };
        for row in rows {
            let (Some(e), Some(n), Some(s)) = (
                row.get("event").and_then(|v| v.as_str()),
                row.get("waits").and_then(|v| v.as_u64()),
                row.get("total_wait_s").and_then(|v| v.as_f64()),
            ) else {
                continue;
            };
            if n > 0 && s.is_finite() && s >= 0.0 {
                out.push((e.to_string(), n, s * 1e9));
            }
        }
    }
    out
}

/// Whether `r` holds `op` as a distribution: an operation of one of its runs.
fn has_distribution(r: &Results, op: &str) -> bool {
    r.runs.iter().any(|x| x.op(op).is_some())
}

/// Whether `r` holds a mean of `op` of its own, beside or instead of a distribution
/// (`io_stats` series, foreground wait events).
fn has_own_mean(r: &Results, op: &str) -> bool {
    r.io_stats
        .iter()
        .flat_map(|v| v.series.iter())
        .any(|x| x.op == op && x.count.is_some() && x.time_ms.is_some())
        || foreground_means(r).iter().any(|(e, _, _)| e == op)
}

/// Count and total time (ns) of `op` in `r`: from the means the source holds itself (its
/// means-only series, an AWR report's foreground wait events) where it has them, else over its
/// runs' operations (count × mean) where their values are exact; `None` where neither holds a
/// mean (a histogram of buckets holds none).
fn count_and_time(r: &Results, op: &str) -> Option<(u64, f64)> {
    let (mut n, mut t) = (0u64, 0f64);
    if has_own_mean(r, op) {
        for (_, c, ns) in foreground_means(r).into_iter().filter(|(e, _, _)| e == op) {
            n = n.saturating_add(c);
            t += ns;
        }
        for x in r.io_stats.iter().flat_map(|v| v.series.iter()) {
            if let (true, Some(c), Some(ms)) = (x.op == op, x.count, x.time_ms) {
                // Counts come from other tools' files: a sum past 2^64 saturates, never wraps.
                n = n.saturating_add(c);
                t += ms * 1e6;
            }
        }
    } else {
        for o in r
            .runs
            .iter()
            .flat_map(|x| x.ops.iter())
            .filter(|o| o.op == op)
        {
            if figure(o, o.summary.mean_ns, true) == Figure::NotHeld {
                return None;
            }
            n = n.saturating_add(o.count);
            t += o.count as f64 * o.summary.mean_ns;
        }
    }
    (n > 0).then_some((n, t))
}

/// Mean latencies per common operation that some input holds as means (means-only evidence,
/// an AWR report's foreground wait events) or holds no distribution of; `None` where there is
/// none, or where no such operation has a mean on every side.
pub fn means(inputs: &[(String, Results)]) -> Option<MeansComparison> {
    let (_, base) = inputs.first()?;
    let as_means =
        |r: &Results, op: &str| has_own_mean(r, op) || !has_distribution(r, op) || means_only(r);
    let ops: Vec<(String, Vec<(u64, f64)>)> = op_names(base)
        .into_iter()
        .filter(|op| inputs.iter().any(|(_, r)| as_means(r, op)))
        .filter_map(|op| {
            let v: Option<Vec<(u64, f64)>> = inputs
                .iter()
                .map(|(_, r)| count_and_time(r, &op).map(|(n, t)| (n, t / n as f64)))
                .collect();
            v.map(|v| (op, v))
        })
        .collect();
    let only: Vec<String> = inputs
        .iter()
        .filter(|(_, r)| means_only(r) || ops.iter().any(|(op, _)| has_own_mean(r, op)))
        .map(|(l, _)| l.clone())
        .collect();
    (!ops.is_empty() && !only.is_empty()).then_some(MeansComparison {
        means_only: only,
        ops,
    })
}

/// A latency figure of one operation as its source holds it: compare states nothing else.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Figure {
    /// Exact values (iolens' own measurements, traces, exact latency logs): the figure itself.
    Value(f64),
    /// The figure falls in one of the source's buckets (an AWR, Statspack or event histogram's
    /// `<8ms` column, a biolatency power of two): it is at most this bucket's upper edge (ns),
    /// and no more is known.
    AtMost(u64),
    /// The figure falls in the source's open-ended top bucket (`>1s`): at least its lower edge
    /// (ns), with no upper edge.
    AtLeast(u64),
    /// Not held: buckets hold counts, not a mean.
    NotHeld,
}

impl Figure {
    /// The figure for a ratio: exact values only (two bucket edges are no ratio of latencies).
    pub fn value(&self) -> Option<f64> {
        match self {
            Figure::Value(v) => Some(*v),
            _ => None,
        }
    }
}

/// Whether `o`'s source holds its values (exact latencies), not only the buckets they fell in.
pub fn holds_values(o: &OpResult) -> bool {
    o.bucket_convention == BucketConvention::Exact || o.bucket_edges_ns.len() < 2
}

/// What `o`'s source holds for a latency figure that its histogram gives as `v` ns (`mean`:
/// the figure is its mean, else a percentile or the maximum). Exact sources hold every figure.
/// A source of buckets (its [`OpResult::bucket_edges_ns`], which iolens spread values across
/// at ingest) holds, for a percentile or the maximum, only the bucket it falls in, and no
/// mean: an AWR report's event histograms are real distributions, but of buckets.
pub fn figure(o: &OpResult, v: f64, mean: bool) -> Figure {
    let edges = &o.bucket_edges_ns;
    if holds_values(o) {
        return Figure::Value(v);
    }
    if mean {
        return Figure::NotHeld;
    }
    // The histogram keeps 3 significant digits, so a value reads up to 0.1 % off; values are
    // spread at least 1 % inside their bucket's edges (`crate::sources::spread`), so 0.2 % of
    // slack never moves one into another bucket.
    let v = v * (1.0 - 2e-3);
    let n = edges.len();
    // An open-ended bucket is spread as the one-nanosecond bucket [lo, lo + 1): its values
    // are at its lower edge.
    if edges[n - 1] == edges[n - 2] + 1 && v >= edges[n - 2] as f64 * (1.0 - 2e-3) {
        return Figure::AtLeast(edges[n - 2]);
    }
    match edges.iter().find(|&&e| e as f64 >= v) {
        Some(&e) => Figure::AtMost(e.max(edges[0])),
        None => Figure::AtLeast(edges[n - 1]),
    }
}

/// Pair runs of `b` with runs of `a`: by name when names match, else by position.
pub(crate) fn pair_runs(a: &Results, b: &Results) -> Vec<(usize, usize)> {
    let by_name: Vec<(usize, usize)> = a
        .runs
        .iter()
        .enumerate()
        .filter_map(|(i, ra)| {
            b.runs
                .iter()
                .position(|rb| rb.name == ra.name)
                .map(|j| (i, j))
        })
        .collect();
    if by_name.len() == a.runs.len().min(b.runs.len()) && !by_name.is_empty() {
        by_name
    } else {
        (0..a.runs.len().min(b.runs.len()))
            .map(|i| (i, i))
            .collect()
    }
}

/// A replay's recorded and replayed runs as two results, so that `compare` sets them side by
/// side as it does two files (the same per-op percentiles, histograms and modes): each
/// replay input becomes `LABEL recorded` and `LABEL replayed`, each holding its one run (and
/// the replay's details, for the per-session answer). Other inputs are kept as they are.
/// Refused for a replay whose source held no latencies (an fio iolog): it has no recorded
/// side.
pub fn replay_sides(inputs: Vec<(String, Results)>) -> anyhow::Result<Vec<(String, Results)>> {
    let mut out = Vec::with_capacity(inputs.len() * 2);
    for (label, r) in inputs {
        let Some(info) = &r.replay else {
            out.push((label, r));
            continue;
        };
        if !info.recorded_latency_known {
            anyhow::bail!(
                "{label}: its source ({}) held no recorded latencies, so there is no recorded \
                 side to compare the replay with",
                info.source
            );
        }
        for (phase, word) in [("recorded", "recorded"), ("replay", "replayed")] {
            let mut side = r.clone();
            side.runs.retain(|run| run.phase == phase);
            out.push((format!("{label} {word}"), side));
        }
    }
    Ok(out)
}

/// Recorded beside replayed latency of one event of a replay (ns).
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayAnswer {
    pub event: String,
    pub count: u64,
    pub recorded_p50_ns: u64,
    pub replayed_p50_ns: u64,
    pub recorded_p99_ns: u64,
    pub replayed_p99_ns: u64,
}

/// The inputs that are the two sides of one replay (from [`replay_sides`]): (recorded,
/// replayed) index pairs.
pub fn replay_pairs(inputs: &[(String, Results)]) -> Vec<(usize, usize)> {
    let phase = |i: usize| {
        let r = &inputs[i].1;
        (r.replay.is_some() && r.runs.len() == 1).then(|| r.runs[0].phase.as_str())
    };
    (1..inputs.len())
        .filter(|&i| phase(i - 1) == Some("recorded") && phase(i) == Some("replay"))
        .map(|i| (i - 1, i))
        .collect()
}

/// Each event's recorded and replayed p50 and p99, from a replay's two sides: the answer a
/// replay is for ("db file sequential read p99 8.7 ms recorded, 0.41 ms replayed").
pub fn replay_answers(recorded: &Results, replayed: &Results) -> Vec<ReplayAnswer> {
    let (Some(rec), Some(rep)) = (recorded.runs.first(), replayed.runs.first()) else {
        return Vec::new();
    };
    rec.ops
        .iter()
        .filter_map(|o| {
            let q = rep.op(&o.op)?;
            Some(ReplayAnswer {
                event: o.op.clone(),
                count: q.count,
                recorded_p50_ns: o.summary.p50_ns,
                replayed_p50_ns: q.summary.p50_ns,
                recorded_p99_ns: o.summary.p99_ns,
                replayed_p99_ns: q.summary.p99_ns,
            })
        })
        .collect()
}
