//! A burst or a write cache in a calibration's ramp: the step whose rate fell and stayed
//! down, the burst's rate before it and the sustained rate after.

use super::*;

/// A burst in a calibration's random-read ramp: the first step (in the order the steps ran,
/// the `--sustain` held point last) whose rate fell and stayed down splits the ramp into steps
/// inside the burst (before) and after it. The sustained figure is the best after the cliff; a
/// maximum chosen inside the burst is flagged.
pub fn calibration_burst(r: &Results, c: &Calibration) -> Option<CalibrationBurst> {
    let max_run = c.max_iops_point.and_then(|p| c.curve.get(p)).map(|p| p.run);
    ramp_cliff(
        r,
        &c.curve,
        c.findings.sustain.map(|s| s.run),
        max_run.zip(c.max_iops),
        false,
    )
}

/// A write cache the random-write ramp filled (the held write point of `--sustain` included):
/// as [`calibration_burst`], with the bytes the calibration wrote to the cliff.
pub fn calibration_write_cache(r: &Results, c: &Calibration) -> Option<CalibrationBurst> {
    let f = &c.findings;
    let best = f
        .write_best
        .and_then(|b| f.write_ramp.iter().find(|p| p.sessions == b.level))
        .map(|p| (p.run, p.iops));
    ramp_cliff(r, &f.write_ramp, f.sustain_write.map(|s| s.run), best, true)
}

/// Bytes `run` moved in one direction (written, or read), its `sync` op left out: measured,
/// and in its warm-up (a cache fills and credits drain during a warm-up too). The warm-up's
/// I/Os are the run's count including it (`ios_completed_incl_warmup`) less the measured ones,
/// taken at the measured mean size (exact for a calibration step, which does one size of one
/// kind; a run that went both ways gets none).
fn moved(run: &RunResult, writes: bool) -> (u64, u64) {
    let (mut bytes, mut count, mut all) = (0u64, 0u64, 0u64);
    for o in run.ops.iter().filter(|o| o.op != "sync") {
        all = all.saturating_add(o.count);
        if o.op.contains("write") == writes {
            bytes = bytes.saturating_add(o.bytes);
            count = count.saturating_add(o.count);
        }
    }
    let warm = run
        .counters
        .get("ios_completed_incl_warmup")
        .filter(|v| v.is_finite() && **v >= all as f64)
        .map_or(0.0, |v| v - all as f64);
    if count == all && count > 0 {
        (bytes, (warm * bytes as f64 / count as f64) as u64)
    } else {
        (bytes, 0)
    }
}

/// The cliff in a ramp's steps (`curve`, then the `held` run), the burst before it and the
/// sustained rate after; `best`: the run and rate of the step the ramp chose.
fn ramp_cliff(
    r: &Results,
    curve: &[crate::results::CurvePoint],
    held: Option<usize>,
    best: Option<(usize, f64)>,
    writes: bool,
) -> Option<CalibrationBurst> {
    let start = |i: usize| -> Option<f64> {
        let run = r.runs.get(i)?;
        humantime::parse_rfc3339(&run.started)
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs_f64())
    };
    // The steps as they ran (a refined ramp's curve is sorted by sessions, not by time): curve
    // index, run, rate. The held point comes after them all.
    let mut steps: Vec<(usize, usize, f64)> = curve
        .iter()
        .enumerate()
        .map(|(i, p)| (i, p.run, p.iops))
        .collect();
    steps.sort_by_key(|s| s.1);
    if let Some(h) = held.filter(|h| *h < r.runs.len()) {
        steps.push((curve.len(), h, r.runs[h].iops()));
    }
    let whole = |run: usize| RateStretch {
        run,
        from_s: 0.0,
        to_s: r.runs.get(run).map_or(0.0, |x| x.duration_s),
    };
    for (k, &(point, run, _)) in steps.iter().enumerate() {
        let Some(g) = r.runs.get(run).and_then(run_regimes) else {
            continue;
        };
        let Some(ci) = g.changes.iter().position(|ch| {
            matches!(
                ch.cause,
                RegimeCause::CreditsExhausted | RegimeCause::WriteCacheFull
            )
        }) else {
            continue;
        };
        let ch = &g.changes[ci];
        let regime = |x: &Regime| RateStretch {
            run,
            from_s: x.rate_from_s,
            to_s: x.rate_to_s,
        };
        // The burst: the steps before the cliff's, and the cliff step's regimes before it (a
        // change of latency alone can split the burst in two).
        let mut inside: Vec<(f64, RateStretch)> =
            steps[..k].iter().map(|s| (s.2, whole(s.1))).collect();
        inside.extend(g.regimes[..=ci].iter().map(|x| (x.iops, regime(x))));
        let (burst_iops, burst_stretch) = burst_rate(&inside);
        // Sustained: the best of the cliff step's last regime and the steps after it.
        let last = g
            .regimes
            .last()
            .map_or((ch.to_iops, whole(run)), |x| (x.iops, regime(x)));
        let (sustained_iops, sustained_stretch) = steps[k + 1..]
            .iter()
            .map(|s| (s.2, whole(s.1)))
            .fold(last, |a, b| if b.0 > a.0 { b } else { a });
        // From the first step of the calibration that moved data this way.
        let first = r.runs.iter().position(|x| moved(x, writes).0 > 0);
        // (Its warm-up included: `started` is where its measurement began.)
        let burst_s = match (first.and_then(start), start(run)) {
            (Some(a), Some(b)) => b - a + ch.at_s + first.map_or(0.0, |f| r.runs[f].warmup_s),
            _ => ch.at_s,
        };
        // Every step's bytes before the cliff's, warm-ups included, then the cliff step's.
        let bytes_before = r.runs[..run]
            .iter()
            .map(|x| moved(x, writes))
            .fold(ch.bytes_before, |a, (m, w)| {
                a.saturating_add(m).saturating_add(w)
            })
            .saturating_add(moved(&r.runs[run], writes).1);
        let max_in_burst = best.is_some_and(|(m, _)| m <= run);
        let mut sentence = if writes {
            format!(
                "{} IOPS while a write cache took {} ({:.0} s), then {} sustained",
                fmt_rate(burst_iops),
                fmt_bytes(bytes_before),
                burst_s,
                fmt_rate(sustained_iops)
            )
        } else {
            format!(
                "{} IOPS for {:.0} s, then {} sustained",
                fmt_rate(burst_iops),
                burst_s,
                fmt_rate(sustained_iops)
            )
        };
        if max_in_burst {
            sentence += &format!(
                "; the {}{} was measured {}: the sustained figure is the answer",
                if writes {
                    "write ramp's best"
                } else {
                    "ramp's maximum"
                },
                best.map(|(_, v)| format!(" ({} IOPS)", fmt_rate(v)))
                    .unwrap_or_default(),
                if writes {
                    "before the cache filled"
                } else {
                    "inside the burst"
                }
            );
        }
        return Some(CalibrationBurst {
            cliff_point: point,
            burst_iops,
            burst_s,
            sustained_iops,
            max_in_burst,
            sentence,
            bytes_before,
            burst_stretch: Some(burst_stretch),
            sustained_stretch: Some(sustained_stretch),
        });
    }
    None
}

/// The burst's rate, and the stretch it was measured over: of the stretches measured inside
/// it (the ramp's steps before the cliff, and the cliff step's regime before the change),
/// those on its plateau, and of them the longest. A limiter grants its rate in slices
/// (blk-throttle: [`THROTTLE_SLICE_S`]), so a window of `d` seconds can read up to one slice
/// more than the rate, an error of `slice / d`: a 2.5 s ramp step reads 1000 IOPS as up to
/// 1040, while a 14 s stretch reads it within 0.7 %. The highest of several short steps would
/// pick the largest such error (seen in CI: 1039.5 for 1000), so the longest stretch is the
/// figure; and the plateau is taken below the highest rate any stretch is sure of (its rate
/// less that error), so that one short step reading high (1115 over 1.4 s under busy loops, for
/// 1000) cannot leave the long stretches at the true rate off the plateau.
pub(super) fn burst_rate(stretches: &[(f64, RateStretch)]) -> (f64, RateStretch) {
    let sure = |s: &(f64, RateStretch)| {
        let d = s.1.to_s - s.1.from_s;
        if d > 0.0 {
            s.0 / (1.0 + THROTTLE_SLICE_S / d)
        } else {
            s.0
        }
    };
    let top = stretches.iter().map(sure).fold(0.0, f64::max);
    stretches
        .iter()
        .filter(|s| s.0 >= (1.0 - MIN_CHANGE) * top)
        .max_by(|a, b| (a.1.to_s - a.1.from_s).total_cmp(&(b.1.to_s - b.1.from_s)))
        .copied()
        .unwrap_or((top, RateStretch::default()))
}
