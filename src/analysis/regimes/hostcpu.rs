//! The host's CPU: iolens' own session threads waiting for a CPU (run-queue wait, recorded per
//! interval in `RunResult::sched_intervals`) slow a closed loop down whatever the storage does.
//! A session's time is its I/O's latency, its CPU time and its wait for a CPU, so a rise of the
//! wait's share of that time from `f₁` to `f₂` (the rest unchanged) lowers its rate by
//! `(f₂ − f₁) / (1 − f₁)` of itself. A change whose low-rate side waited enough more to explain
//! at least [`HOST_CPU_EXPLAINS`] of the rate it lost, or whose wait per I/O rose by that share
//! of the time per I/O lost (see [`host_cpu_explains`]), is the host's CPU, not the storage.
//!
//! The I/O path's own threads wait too: a loop device's requests are read by kernel workers
//! (`kworker/…+loop0`), and while a worker waits for a CPU the requests queued to it wait with
//! it, inside the device's time. Their wait (`SchedInterval::device_runq_ns`) is counted in
//! the device's request time by the share of the device's busy time it covers: over an
//! interval the device held `queue_ms` request-milliseconds in `busy_ms` milliseconds busy,
//! so a worker waiting `w` of the busy time held `min(1, w / busy) · queue` of them. That is
//! added to the sessions' own wait, in session-thread time (each session has one I/O in
//! flight). A slower medium under the device leaves the workers' wait as it was: 0 again.

use super::{overlap_sums, Series, HOST_CPU_EXPLAINS};
use crate::results::analysis::RunqShares;
use crate::results::RunResult;

/// Per interval of `s`: the session threads' wait for a CPU, the device's requests' wait for
/// the device's own kernel threads to get one, and the session threads' time, ns, to be summed
/// over stretches; None without the readings (older files, readers of evidence).
pub(super) fn runq_per_interval(run: &RunResult, s: &Series) -> Option<Vec<[f64; 3]>> {
    if run.sched_intervals.iter().all(|iv| iv.threads == 0) {
        return None;
    }
    let spans: Vec<(f64, f64, [f64; 3])> = run
        .sched_intervals
        .iter()
        .map(|iv| {
            (
                iv.start_s,
                iv.duration_s,
                [
                    iv.runq_ns as f64,
                    device_held_ns(run, iv),
                    iv.threads as f64 * iv.duration_s * 1e9,
                ],
            )
        })
        .collect();
    Some(overlap_sums(s, &spans))
}

/// Request-nanoseconds the device's requests waited for its kernel threads to get a CPU over
/// the sched interval `iv`, from the device interval read at the same edges (0 without one).
fn device_held_ns(run: &RunResult, iv: &crate::results::SchedInterval) -> f64 {
    if iv.device_runq_ns == 0 {
        return 0.0;
    }
    let Some(d) = run
        .device_intervals
        .iter()
        .find(|d| (d.start_s - iv.start_s).abs() < 1e-3)
    else {
        return 0.0;
    };
    if d.busy_ms == 0 {
        return 0.0;
    }
    let held = (iv.device_runq_ns as f64 / (d.busy_ms as f64 * 1e6)).min(1.0);
    held * d.queue_ms as f64 * 1e6
}

/// Over intervals `js`: the share of the session threads' time spent waiting for a CPU, their
/// own and the device's threads' (both shares of the sessions' time, each at most 1).
pub(super) fn share(per: &[[f64; 3]], js: impl Iterator<Item = usize>) -> Option<(f64, f64)> {
    let (w, d, t) = js.fold((0.0, 0.0, 0.0), |a, j| {
        (a.0 + per[j][0], a.1 + per[j][1], a.2 + per[j][2])
    });
    (t > 0.0).then(|| ((w / t).min(1.0), (d / t).min(1.0)))
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

/// Whether the shares of the two sides (sessions' own, device's threads') explain the rates:
/// [`host_cpu_explains`] on their sums (the path's wait for a CPU, in session time), or both
/// sums at least [`STARVED`]: a rate set by the CPU iolens was given on both sides says nothing
/// of the storage's (a CI run under a CPU cap: 60.5 then 24.7 IOPS, its sessions waiting 77 %
/// and 60 % of their time, had been named "burst credits exhausted").
pub(super) fn explains(low: f64, high: f64, f_low: (f64, f64), f_high: (f64, f64)) -> bool {
    let sum = |f: (f64, f64)| (f.0 + f.1).min(1.0);
    let (a, b) = (sum(f_low), sum(f_high));
    (a >= STARVED && b >= STARVED) || host_cpu_explains(low, high, a, b)
}

/// The share of the sessions' time spent waiting for a CPU on both sides of a change from
/// which the rate is the host's CPU's: they ran less than they waited.
pub(super) const STARVED: f64 = 0.5;

/// The evidence of the two sides of a change (or of the slowest and fastest intervals of a
/// window), the low-rate side first.
pub(super) fn shares(f_low: (f64, f64), f_high: (f64, f64)) -> RunqShares {
    RunqShares {
        low_rate: f_low.0,
        high_rate: f_high.0,
        device_low_rate: f_low.1,
        device_high_rate: f_high.1,
    }
}
