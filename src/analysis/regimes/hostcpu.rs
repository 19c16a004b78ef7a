//! The host's CPU: iolens' own session threads waiting for a CPU (run-queue wait, recorded per
//! interval in `RunResult::sched_intervals`) slow a closed loop down whatever the storage does.
//! A session's time is its I/O's latency, its CPU time and its wait for a CPU, so a rise of the
//! wait's share of that time from `f₁` to `f₂` (the rest unchanged) lowers its rate by
//! `(f₂ − f₁) / (1 − f₁)` of itself. A change whose low-rate side waited enough more to explain
//! at least [`HOST_CPU_EXPLAINS`] of the rate it lost, or whose wait per I/O rose by that share
//! of the time per I/O lost (see [`host_cpu_explains`]), is the host's CPU, not the storage.

use super::{overlap_sums, Series, HOST_CPU_EXPLAINS};
use crate::results::analysis::RunqShares;
use crate::results::RunResult;

/// Per interval of `s`: the share of the session threads' time spent waiting for a CPU, as
/// (wait ns, thread ns) to be summed over stretches; None without the readings (older files,
/// readers of evidence).
pub(super) fn runq_per_interval(run: &RunResult, s: &Series) -> Option<Vec<[f64; 2]>> {
    if run.sched_intervals.iter().all(|iv| iv.threads == 0) {
        return None;
    }
    let spans: Vec<(f64, f64, [f64; 2])> = run
        .sched_intervals
        .iter()
        .map(|iv| {
            (
                iv.start_s,
                iv.duration_s,
                [iv.runq_ns as f64, iv.threads as f64 * iv.duration_s * 1e9],
            )
        })
        .collect();
    Some(overlap_sums(s, &spans))
}

/// The share of the session threads' time spent waiting for a CPU over intervals `js`.
pub(super) fn share(per: &[[f64; 2]], js: impl Iterator<Item = usize>) -> Option<f64> {
    let (w, t) = js.fold((0.0, 0.0), |a, j| (a.0 + per[j][0], a.1 + per[j][1]));
    (t > 0.0).then(|| (w / t).min(1.0))
}

/// Whether the wait for a CPU explains a rate of `low` against `high`, given the sessions'
/// shares of time spent waiting on each side (`f_low`, `f_high`). Either reading suffices:
/// - the share rose enough to account for at least [`HOST_CPU_EXPLAINS`] of the relative drop
///   (a closed loop whose I/O latency and CPU time stayed: `(f_low − f_high) / (1 − f_high)`);
/// - or the wait per I/O rose by at least that share of the time per I/O the sessions lost. A
///   session's time per I/O is `n / rate` and its wait per I/O `f · n / rate`, so the share of
///   the added time that was wait is `(f_low·high − f_high·low) / (high − low)` (n cancels).
///   A slower device alone leaves the wait per I/O as it was (one wake-up per I/O): 0.
pub fn host_cpu_explains(low: f64, high: f64, f_low: f64, f_high: f64) -> bool {
    let comparable = high > 0.0 && low < high && f_high < 1.0;
    if !comparable {
        return false;
    }
    let drop = 1.0 - low / high;
    let by_share = (f_low - f_high) / (1.0 - f_high);
    let per_io = (f_low * high - f_high * low) / (high - low);
    (by_share > 0.0 && by_share >= HOST_CPU_EXPLAINS * drop) || per_io >= HOST_CPU_EXPLAINS
}

/// The evidence of the two sides of a change (or of the slowest and fastest intervals of a
/// window), the low-rate side first.
pub(super) fn shares(f_low: f64, f_high: f64) -> RunqShares {
    RunqShares {
        low_rate: f_low,
        high_rate: f_high,
    }
}
