//! The cluster's calibration merged step by step from every rank's fixed schedule.

use super::*;

/// The cluster's calibration: every rank followed the same fixed schedule, so step `i` of every
/// rank merged is the cluster's step `i`: IOPS summed over ranks (in the common window),
/// latency from the merged histograms, and max IOPS at the latency target, max MB/s and the
/// knee recomputed from that curve.
pub(super) fn merge_calibration(
    inputs: &[Input],
    runs: &[RunResult],
    merges: &[RunMerge],
    warnings: &mut Vec<String>,
) -> Result<Option<crate::results::Calibration>> {
    let Some(c0) = inputs[0].res.calibration.as_ref() else {
        return Ok(None);
    };
    let scheduled = inputs.iter().all(|i| {
        i.res
            .placement
            .as_ref()
            .is_some_and(|p| p.start_at.is_some())
    });
    if !scheduled {
        warnings.push(
            "the calibrations were not all run with --start-at: their steps were not \
             scheduled together, so the cluster curve sums steps that may not have overlapped"
                .into(),
        );
    }
    let n = inputs.len() as u32;
    let rate = |k: usize| {
        merges[k]
            .common
            .as_ref()
            .map_or((runs[k].iops(), runs[k].mb_per_s()), |w| {
                (w.iops, w.mb_per_s)
            })
    };
    let point = |p: &CurvePoint| -> Result<Option<CurvePoint>> {
        let Some(run) = runs.get(p.run) else {
            return Ok(None);
        };
        let h = run.merged_io_hist()?;
        let q = |x: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(x)
            }
        };
        let (iops, mbs) = rate(p.run);
        Ok(Some(CurvePoint {
            run: p.run,
            sessions: p.sessions * n,
            qd: p.qd,
            iops,
            mb_per_s: mbs,
            p50_ns: q(0.5),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            mean_ns: if h.is_empty() { 0.0 } else { h.mean() },
            cpu_us_per_io: run.cpu.as_ref().map_or(0.0, |c| c.us_per_io),
            runq_us_per_io: run.cpu.as_ref().map_or(0.0, |c| c.runq_us_per_io),
            device_await_us: 0.0,
            device_in_flight: None,
        }))
    };
    let mut curve = Vec::new();
    for p in &c0.curve {
        if let Some(x) = point(p)? {
            curve.push(x);
        }
    }
    let target = c0.max_latency_ns;
    let pct = c0.percentile;
    let mut at_pct = Vec::with_capacity(curve.len());
    for p in &curve {
        let h = runs[p.run].merged_io_hist()?;
        let lat = if h.is_empty() {
            u64::MAX
        } else {
            h.value_at_quantile(pct / 100.0)
        };
        at_pct.push((p.sessions, p.iops, lat));
    }
    let best = crate::analysis::target::best_at_target(&at_pct, target);
    let phase_best = |phase: &str| -> Option<(usize, f64)> {
        runs.iter()
            .enumerate()
            .filter(|(_, r)| r.phase == phase)
            .map(|(k, _)| (k, rate(k).1))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    };
    let mut findings = c0.findings.clone();
    let seq = phase_best("seqread");
    let seq1 = phase_best("seqread1");
    if let (Some(b), Some((k, v))) = (findings.seq_best.as_mut(), seq) {
        b.value = v;
        b.level = runs[k].spec.as_ref().and_then(|s| s.qd).unwrap_or(b.level);
    }
    if let (Some(b), Some((_, v))) = (findings.seq1_best.as_mut(), seq1) {
        b.value = v;
    }
    let mut write_ramp = Vec::new();
    for p in &c0.findings.write_ramp {
        if let Some(x) = point(p)? {
            write_ramp.push(x);
        }
    }
    findings.write_ramp = write_ramp;
    let verdicts =
        crate::analysis::verdicts::calibration::cluster(n, pct, target, best.map(|b| &curve[b]));
    Ok(Some(crate::results::Calibration {
        percentile: pct,
        max_latency_ns: target,
        max_iops: best.map(|b| curve[b].iops),
        max_iops_point: best,
        curve,
        max_mbps: seq.map(|x| x.1),
        max_pmbps: seq1.map(|x| x.1),
        findings,
        overhead_s: c0.overhead_s,
        budget_s: c0.budget_s,
        verdicts,
    }))
}
