//! Analysis of measured results: latency modes (tiers), the knee of the load curve, a Universal
//! Scalability Law fit, a Little's law check, and plain-language verdicts about CPU and host
//! queueing.
//!
//! # Data flow
//! Analysis reads only the [`crate::results`] model — [`RunResult`]s with their per-op
//! histograms ([`crate::results::Hist`]), CPU and device statistics, and the calibration curve
//! ([`crate::results::CurvePoint`]) — never the engine, so it works the same on runs, calibration
//! steps, traces and ingested histograms. It produces plain serialisable values that renderers
//! print. [`analyse`] gathers them into one typed [`Analysis`] that producers store in
//! [`Results::analysis`] (types in [`crate::results::analysis`]) and renderers show:
//! ```text
//! Results ──► analyse ──► Analysis { runs, calibration, trace_profile, db, stack_profile }
//! RunResult ──► analyse_run ──► RunAnalysis { modes per op, verdicts }
//!                 ├─ modes::find_modes (per op histogram)
//!                 └─ verdicts::run_verdicts (CpuStats, DeviceStats, op summaries)
//! [CurvePoint] ──► knee::find_knee             (max power: IOPS / mean latency)
//! [(N, IOPS)]  ──► usl::fit_usl                (λ, σ, κ, peak)
//! RunResult + configured concurrency ──► little::littles_law
//! ```
//! Each submodule documents its method and thresholds.

pub mod compare;
pub mod dblayers;
pub mod knee;
pub mod little;
pub mod modes;
pub mod plan;
pub mod ramp;
pub mod regimes;
pub mod stacks;
pub mod target;
pub mod usl;
pub mod verdicts;
pub mod watch;

pub use crate::results::analysis::{Analysis, RunAnalysis};
use crate::results::analysis::{
    CacheProbeResult, CalibrateIoFigures, CalibrationAnalysis, CommitResult, DbFigures, LittleAt,
    OpModes, RampBest, SeqBest,
};
use crate::results::{Calibration, Results, RunResult};

pub use knee::{find_knee, Knee};
pub use little::{littles_law, LittleCheck};
pub use modes::{describe, find_modes, find_modes_with_edges, Mode};
pub use usl::{fit_usl, UslFit};
pub use verdicts::{cpu_verdict, host_queue_verdict, run_verdicts, Severity, Verdict, VerdictKind};

/// The median of `v` (the mean of the middle two for an even count); 0 when empty.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

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

/// Analyse one run: decode each op's histogram, find its modes, and collect the verdicts.
pub fn analyse_run(run: &RunResult) -> RunAnalysis {
    analyse_run_with(run, None)
}

/// [`analyse_run`] knowing the run's target as the results file recorded it (what its device's
/// link can carry, its request queue).
pub fn analyse_run_with(
    run: &RunResult,
    target: Option<&crate::results::TargetInfo>,
) -> RunAnalysis {
    let mut modes = Vec::new();
    let mut verdicts = Vec::new();
    for op in &run.ops {
        match op.hist.decode() {
            Ok(h) if h.is_empty() => {}
            Ok(h) => {
                let m = modes::find_modes_with_edges(&h, &op.bucket_edges_ns);
                modes.push(OpModes {
                    op: op.op.clone(),
                    description: describe(&m),
                    modes: m,
                })
            }
            Err(e) => verdicts.push(Verdict::new(
                VerdictKind::BadHistogram,
                Severity::Warning,
                format!(
                    "the {} histogram of '{}' cannot be read: {e:#}",
                    op.op, run.name
                ),
                &[],
            )),
        }
    }
    verdicts.extend(verdicts::run_verdicts_with(run, target));
    let regimes = regimes::run_regimes(run);
    if let Some(g) = &regimes {
        verdicts.extend(regimes::verdicts(
            g,
            run.device.as_ref().map_or("", |d| d.device.as_str()),
        ));
    }
    RunAnalysis {
        modes,
        verdicts,
        regimes,
    }
}

/// The verdicts `run`'s closing summary words: the run's own ([`run_verdicts`]) and a change of
/// its regimes, with its named cause (the storage's, another process's on the device, or the
/// host's CPU starving iolens), so that the first thing a user reads says whose rate it was.
pub fn run_summary_verdicts(run: &RunResult) -> Vec<Verdict> {
    let mut out = run_verdicts(run);
    if let Some(g) = regimes::run_regimes(run) {
        let device = run.device.as_ref().map_or("", |d| d.device.as_str());
        out.extend(
            regimes::verdicts(&g, device)
                .into_iter()
                .filter(|v| v.kind == VerdictKind::RegimeChange),
        );
    }
    out
}

/// Analyse a whole results document: every run, the calibration, a trace's profile and the
/// database figures. This is what producers store in [`Results::analysis`] and what renderers
/// show; for files written before the analysis was stored (schema version 1), renderers call it
/// on the file as read.
pub fn analyse(r: &Results) -> Analysis {
    Analysis {
        runs: r
            .runs
            .iter()
            .map(|run| analyse_run_with(run, r.environment.target.as_ref()))
            .collect(),
        calibration: r.calibration.as_ref().map(|c| calibration(r, c)),
        trace_profile: r.trace_profile.clone(),
        db: db_figures(r),
        watch: watch::watch_analysis(r),
        stack_profile: r.profile.as_ref().map(stacks::analyse),
    }
}

/// The stored analysis of `r`, or (for an older file without one) the analysis computed now.
pub fn of(r: &Results) -> std::borrow::Cow<'_, Analysis> {
    match &r.analysis {
        // A file written before regimes were analysed gets them now.
        Some(a)
            if a.runs.len() == r.runs.len()
                && a.runs
                    .iter()
                    .zip(&r.runs)
                    .all(|(a, run)| a.regimes.is_some() || !regimes::analysable(run)) =>
        {
            std::borrow::Cow::Borrowed(a)
        }
        _ => std::borrow::Cow::Owned(analyse(r)),
    }
}

/// Percentile summary of a run's I/O ops merged (empty histogram: zeros).
fn merged_latency(run: &RunResult) -> (u64, u64, String) {
    match run.merged_io_hist() {
        Ok(h) if !h.is_empty() => (
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.99),
            describe(&find_modes(&h)),
        ),
        _ => (0, 0, String::new()),
    }
}

fn calibration(r: &Results, c: &Calibration) -> CalibrationAnalysis {
    let f = &c.findings;
    let run = |i: usize| r.runs.get(i);
    let max_point = c.max_iops_point.and_then(|p| c.curve.get(p));
    let pts: Vec<(f64, f64)> = c
        .curve
        .iter()
        .map(|p| (p.sessions as f64, p.iops))
        .collect();
    let little = c
        .curve
        .iter()
        .filter_map(|p| {
            let check = littles_law(run(p.run)?, (p.sessions * p.qd.max(1)) as f64)?;
            Some(LittleAt {
                sessions: p.sessions,
                run: p.run,
                check,
            })
        })
        .collect();
    let commit = f
        .commit
        .iter()
        .filter_map(|s| {
            let rr = run(s.run)?;
            let w = rr.op("write")?;
            Some(CommitResult {
                size_bytes: s.size_bytes,
                run: s.run,
                writes_per_s: rr.rates_known().then(|| rr.iops()),
                p50_ns: w.summary.p50_ns,
                p99_ns: w.summary.p99_ns,
                p999_ns: w.summary.p999_ns,
            })
        })
        .collect();
    let cache_probe = f
        .cache
        .iter()
        .filter_map(|s| {
            let rr = run(s.run)?;
            let (p50_ns, p99_ns, modes) = merged_latency(rr);
            Some(CacheProbeResult {
                share: s.share,
                working_set_bytes: rr.spec.as_ref().and_then(|s| s.region_size).unwrap_or(0),
                run: s.run,
                iops: rr.rates_known().then(|| rr.iops()),
                p50_ns,
                p99_ns,
                modes,
            })
        })
        .collect();
    let seq = |b: &RampBest| SeqBest {
        qd: b.level,
        mb_per_s: b.value,
    };
    let usl = fit_usl(&pts);
    let plateau = f.plan.as_ref().map_or(0.05, |p| p.plateau);
    CalibrationAnalysis {
        stop_reason: f.stop_reason,
        stop_sentence: f
            .stop_reason
            .map(|s| verdicts::ramp_stop_sentence(s, usl.as_ref(), c.max_iops, plateau)),
        knee: find_knee(&c.curve),
        usl,
        little,
        tiers_at_max: max_point
            .and_then(|p| run(p.run)?.merged_io_hist().ok())
            .filter(|h| !h.is_empty())
            .map(|h| modes::tiers(&find_modes(&h))),
        modes_at_max: max_point
            .and_then(|p| run(p.run))
            .map(|rr| merged_latency(rr).2)
            .filter(|m| !m.is_empty()),
        seq_best: f.seq_best.as_ref().map(seq),
        seq1_best: f.seq1_best.as_ref().map(seq),
        commit,
        write_best: f.write_best,
        cache_probe,
        verdicts_at: max_point.or(c.curve.first()).map(|p| p.run),
        // What CALIBRATE_IO would print: max IOPS, max MB/s, and an integer-millisecond
        // average latency at the max-IOPS point.
        calibrate_io: CalibrateIoFigures {
            max_iops: max_point.map(|p| p.iops.round() as u64),
            max_mbps: f.seq_best.map(|b| b.value.round() as u64),
            max_pmbps: f.seq1_best.map(|b| b.value.round() as u64),
            latency_ms: max_point.map(|p| (p.mean_ns / 1e6).floor() as u64),
        },
        burst: regimes::calibration_burst(r, c),
        write_cache: regimes::calibration_write_cache(r, c),
    }
}

/// Buffer-cache figures of every run that counted logical reads (database runs).
fn db_figures(r: &Results) -> Vec<DbFigures> {
    r.runs
        .iter()
        .enumerate()
        .filter_map(|(i, run)| {
            let ctr = |k: &str| run.counters.get(k).copied().filter(|v| v.is_finite());
            let logical = ctr("logical_reads")?;
            let physical = ctr("physical_reads").unwrap_or(0.0);
            let rate = |k: &str| ctr(k).filter(|_| run.rates_known());
            Some(DbFigures {
                run: i,
                logical_reads: logical,
                physical_reads: physical,
                hit_ratio: (logical > 0.0).then(|| 1.0 - physical / logical),
                logical_reads_per_s: rate("logical_reads_per_s"),
                physical_reads_per_s: rate("physical_reads_per_s"),
                os_cache_served_share: ctr("os_cache_served_share"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::{new_histogram, record_ns};
    use crate::results::{CpuStats, Hist, OpResult};

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
        assert_eq!(a.modes[0].op, "read");
        assert_eq!(a.modes[0].modes.len(), 2, "{}", a.modes[0].description);
        let kinds: Vec<&str> = a.verdicts.iter().map(|v| v.kind.as_str()).collect();
        // Two thirds of the reads at ~2 µs: below any device's floor, so a cache answered.
        assert_eq!(kinds, ["bad-histogram", "cpu-bound", "cache-answered"]);
        assert!(a.verdicts[0]
            .message
            .contains("sync histogram of 'randread'"));
        // Round trip through JSON.
        let back: RunAnalysis = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back.modes, a.modes);
        assert_eq!(back.verdicts, a.verdicts);
    }
}
