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
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                if FREE_KEYS.contains(&k.as_str()) {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                diff_into(
                    &p,
                    ma.get(k).unwrap_or(&Value::Null),
                    mb.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        _ if a == b => {}
        _ => out.push(format!(
            "{}: {} vs {}",
            if path.is_empty() { "spec" } else { path },
            short(a),
            short(b)
        )),
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
        if r.kind != base.kind {
            bad.push(format!(
                "{base_label} is a {} result but {label} is a {} result",
                base.kind.name(),
                r.kind.name()
            ));
            continue;
        }
        let ops_of = |r: &Results| -> Vec<String> {
            let mut v: Vec<String> = r
                .runs
                .iter()
                .flat_map(|x| x.ops.iter().map(|o| o.op.clone()))
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let (a, b) = (ops_of(base), ops_of(r));
        if !a.iter().any(|o| b.contains(o)) {
            bad.push(format!(
                "{base_label} and {label} have no operation in common ({} vs {})",
                a.join(", "),
                b.join(", ")
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
    (bad, notes)
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
