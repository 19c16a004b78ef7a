//! A noisy neighbour: the intervals in which the device's own counters moved much more than
//! iolens asked (see the parent module's docs), and the verdict that names them.

use super::{
    overlap_sums, Series, Severity, Verdict, VerdictKind, NEIGHBOUR_FLOOR_BPS, NEIGHBOUR_RATIO,
};
use crate::results::analysis::NeighbourSpan;
use crate::results::RunResult;
use crate::units::fmt_bytes;

/// Per interval of `s`: the device's bytes and ops (its own counters, spread over our
/// intervals by overlap), or None when the run has no such counters or is not judged (see the
/// module docs).
pub(super) fn device_per_interval(run: &RunResult, s: &Series) -> Option<Vec<(f64, f64)>> {
    let direct = run
        .spec
        .as_ref()
        .and_then(|sp| sp.other.get("direct"))
        .and_then(|v| v.as_bool());
    if run.device_intervals.is_empty() || direct != Some(true) {
        return None;
    }
    let spans: Vec<(f64, f64, [f64; 2])> = run
        .device_intervals
        .iter()
        .map(|iv| {
            (
                iv.start_s,
                iv.duration_s,
                [
                    (iv.read_bytes + iv.write_bytes) as f64,
                    (iv.reads + iv.writes) as f64,
                ],
            )
        })
        .collect();
    Some(
        overlap_sums(s, &spans)
            .into_iter()
            .map(|[b, o]| (b, o))
            .collect(),
    )
}

/// Which intervals of `s` had a neighbour on the device, given the device's bytes per interval.
pub(super) fn neighbour_flags(s: &Series, dev: &[(f64, f64)]) -> Vec<bool> {
    s.bytes
        .iter()
        .zip(dev)
        .zip(&s.dur_s)
        .map(|((&own, &(dev_b, _)), &d)| {
            dev_b - own > ((NEIGHBOUR_RATIO - 1.0) * own).max(NEIGHBOUR_FLOOR_BPS * d)
        })
        .collect()
}

/// The stretches of flagged intervals, with what the device and iolens moved in them.
pub(super) fn neighbour_spans(
    s: &Series,
    dev: &[(f64, f64)],
    flags: &[bool],
) -> Vec<NeighbourSpan> {
    let mut out: Vec<NeighbourSpan> = Vec::new();
    let mut prev = false;
    for i in 0..flags.len() {
        if !flags[i] {
            prev = false;
            continue;
        }
        if !prev {
            out.push(NeighbourSpan {
                start_s: s.start_s[i],
                ..Default::default()
            });
        }
        prev = true;
        let span = out.last_mut().expect("pushed above");
        span.end_s = s.start_s[i] + s.dur_s[i];
        span.device_bytes += dev[i].0.round() as u64;
        span.device_ops += dev[i].1.round() as u64;
        span.own_bytes += s.bytes[i] as u64;
        span.own_ops += s.ops[i] as u64;
    }
    out
}

/// The intervals in which another process used the device, in one verdict.
pub(super) fn neighbour_verdict(spans: &[NeighbourSpan], device: &str) -> Verdict {
    let dev = if device.is_empty() {
        "the device"
    } else {
        device
    };
    let (mut dev_b, mut own_b, mut secs) = (0u64, 0u64, 0.0);
    let parts: Vec<String> = spans
        .iter()
        .map(|n| {
            dev_b += n.device_bytes;
            own_b += n.own_bytes;
            secs += n.end_s - n.start_s;
            format!(
                "{:.0}–{:.0} s ({} moved by {dev}, {} by iolens)",
                n.start_s,
                n.end_s,
                fmt_bytes(n.device_bytes),
                fmt_bytes(n.own_bytes)
            )
        })
        .collect();
    Verdict::new(
        VerdictKind::NoisyNeighbour,
        Severity::Warning,
        format!(
            "another process used {dev} in {}: its own counters moved much more than iolens \
             asked, so those intervals show a neighbour's load, not a change of the storage",
            parts.join(", ")
        ),
        &[
            ("neighbour_s", secs),
            ("neighbour_start_s", spans[0].start_s),
            ("device_bytes", dev_b as f64),
            ("own_bytes", own_b as f64),
        ],
    )
}
