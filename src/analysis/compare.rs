//! Whether several results compare at all, and which of their runs pair up (`iolens compare`):
//! a different kind of results, no operation in common, or runs whose I/Os differ in size,
//! pattern or read/write mix make ratios meaningless and are refused (unless forced); other
//! workload differences are listed beside the figures. Renderers word nothing of this anew.

use serde_json::Value;

use crate::results::Results;
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
/// (`io_stats`) that did something; sorted, each once.
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

/// Count and total time (ns) of `op` in `r`: over its runs' operations (count × mean) or, for
/// means-only evidence, over its series that keep both a count and a time.
fn count_and_time(r: &Results, op: &str) -> Option<(u64, f64)> {
    let (mut n, mut t) = (0u64, 0f64);
    if means_only(r) {
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
            n = n.saturating_add(o.count);
            t += o.count as f64 * o.summary.mean_ns;
        }
    }
    (n > 0).then_some((n, t))
}

/// Mean latencies per common operation where any input holds means only (`None` where none
/// does, or where no operation has a mean on every side).
pub fn means(inputs: &[(String, Results)]) -> Option<MeansComparison> {
    let only: Vec<String> = inputs
        .iter()
        .filter(|(_, r)| means_only(r))
        .map(|(l, _)| l.clone())
        .collect();
    if only.is_empty() {
        return None;
    }
    let (_, base) = inputs.first()?;
    let ops: Vec<(String, Vec<(u64, f64)>)> = op_names(base)
        .into_iter()
        .filter_map(|op| {
            let v: Option<Vec<(u64, f64)>> = inputs
                .iter()
                .map(|(_, r)| count_and_time(r, &op).map(|(n, t)| (n, t / n as f64)))
                .collect();
            v.map(|v| (op, v))
        })
        .collect();
    (!ops.is_empty()).then_some(MeansComparison {
        means_only: only,
        ops,
    })
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
