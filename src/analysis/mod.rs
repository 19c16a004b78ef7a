//! Analysis of measured results: latency modes (tiers), the knee of the load curve, a Universal
//! Scalability Law fit, a Little's law check, and plain-language verdicts about CPU and host
//! queueing.
//!
//! # Data flow
//! Analysis reads only the [`crate::results`] model — [`RunResult`]s with their per-op
//! histograms ([`crate::results::Hist`]), CPU and device statistics, and the calibration curve
//! ([`crate::results::CurvePoint`]) — never the engine, so it works the same on runs, calibration
//! steps, traces and ingested histograms. It produces plain serialisable values that renderers
//! print and `calibrate` stores (e.g. in `Calibration::analysis`):
//! ```text
//! RunResult ──► analyse_run ──► RunAnalysis { modes per op, verdicts }
//!                 ├─ modes::find_modes (per op histogram)
//!                 └─ verdicts::run_verdicts (CpuStats, DeviceStats, op summaries)
//! [CurvePoint] ──► knee::find_knee             (max power: IOPS / mean latency)
//! [(N, IOPS)]  ──► usl::fit_usl                (λ, σ, κ, peak)
//! RunResult + configured concurrency ──► little::littles_law
//! ```
//! Each submodule documents its method and thresholds.

pub mod knee;
pub mod little;
pub mod modes;
pub mod usl;
pub mod verdicts;

use serde::{Deserialize, Serialize};

use crate::results::RunResult;

pub use knee::{find_knee, Knee};
pub use little::{littles_law, LittleCheck};
pub use modes::{describe, find_modes, find_modes_with_edges, Mode};
pub use usl::{fit_usl, UslFit};
pub use verdicts::{cpu_verdict, host_queue_verdict, run_verdicts, Verdict};

/// True for a finite number above zero (false for NaN).
pub(crate) fn positive(x: f64) -> bool {
    x > 0.0 && x.is_finite()
}

/// An op with only a count and a mean latency (what the verdicts and Little's law read).
#[cfg(test)]
pub(crate) fn test_op(name: &str, count: u64, mean_ns: f64) -> crate::results::OpResult {
    crate::results::OpResult {
        op: name.into(),
        count,
        bytes: count * 8192,
        errors: 0,
        hist: Default::default(),
        summary: crate::results::LatencySummary {
            count,
            mean_ns,
            ..Default::default()
        },
        intervals: vec![],
        bucket_convention: crate::results::BucketConvention::Exact,
        bucket_edges_ns: vec![],
    }
}

/// Per-run analysis: latency modes of each op and the run's verdicts.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct RunAnalysis {
    /// `(op name, modes)` for every op with a non-empty histogram, in the run's op order.
    pub modes: Vec<(String, Vec<Mode>)>,
    /// Verdicts about the run; a histogram that cannot be decoded adds a `bad-histogram` warning.
    pub verdicts: Vec<Verdict>,
}

/// Analyse one run: decode each op's histogram, find its modes, and collect the verdicts.
pub fn analyse_run(run: &RunResult) -> RunAnalysis {
    let mut modes = Vec::new();
    let mut verdicts = Vec::new();
    for op in &run.ops {
        match op.hist.decode() {
            Ok(h) if h.is_empty() => {}
            Ok(h) => modes.push((
                op.op.clone(),
                modes::find_modes_with_edges(&h, &op.bucket_edges_ns),
            )),
            Err(e) => verdicts.push(Verdict::new(
                "bad-histogram",
                "warning",
                format!(
                    "the {} histogram of '{}' cannot be read: {e:#}",
                    op.op, run.name
                ),
                &[],
            )),
        }
    }
    verdicts.extend(run_verdicts(run));
    RunAnalysis { modes, verdicts }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{new_histogram, record_ns, CpuStats, Hist, OpResult};

    #[test]
    fn analyse_run_decodes_histograms_and_collects_verdicts() {
        let mut h = new_histogram();
        for i in 0..3000u64 {
            record_ns(&mut h, 2_000 + i % 100);
            if i % 2 == 0 {
                record_ns(&mut h, 150_000 + (i % 1000) * 20);
            }
        }
        let mut bad = OpResult::new("write", &new_histogram(), 0, vec![]);
        bad.hist = Hist::default();
        let mut garbage = OpResult::new("sync", &new_histogram(), 0, vec![]);
        garbage.hist = serde_json::from_str("\"bm90IGEgaGlzdG9ncmFt\"").unwrap();
        let run = RunResult {
            name: "randread".into(),
            duration_s: 1.0,
            ops: vec![
                OpResult::new("read", &h, 8192 * h.len(), vec![]),
                bad,
                garbage,
            ],
            cpu: Some(CpuStats {
                runq_us_per_io: 30.0,
                session_run_s: 1.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let a = analyse_run(&run);
        assert_eq!(a.modes.len(), 1, "{a:?}");
        assert_eq!(a.modes[0].0, "read");
        assert_eq!(a.modes[0].1.len(), 2, "{}", describe(&a.modes[0].1));
        let kinds: Vec<&str> = a.verdicts.iter().map(|v| v.kind.as_str()).collect();
        assert_eq!(kinds, ["bad-histogram", "cpu-bound"]);
        assert!(a.verdicts[0]
            .message
            .contains("sync histogram of 'randread'"));
        // Round trip through JSON.
        let back: RunAnalysis = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back.modes, a.modes);
        assert_eq!(back.verdicts, a.verdicts);
    }
}
