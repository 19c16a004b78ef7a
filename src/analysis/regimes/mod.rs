//! Regime changes in a run's per-interval series (issue 24): where the storage changed under a
//! constant load — burst credits running out, a write cache filling, throttling starting or
//! stopping — and the SNIA PTS steady-state verdict of the last regime.
//!
//! # Method
//! Binary segmentation of a Gaussian mean-shift model on each series (IOPS, MB/s, p99 latency
//! per interval): a segment is split at the point that most reduces its sum of squared
//! deviations, when the reduction exceeds a penalty of `3 ln(n) σ²` (a BIC-style penalty for one
//! more mean and one change location), where σ is the series' own noise, estimated robustly from
//! its successive differences (`1.4826 · median|xᵢ₊₁ − xᵢ| / √2`, blind to a few level shifts).
//! A change must also be of practical size (the two means differ by at least
//! [`MIN_CHANGE`] of the larger) and leave at least [`MIN_LEN`] intervals on each side. Prefix
//! sums make each split search linear, so a day of 1 s intervals is analysed in milliseconds.
//!
//! The cliff is placed inside its interval: the interval that mixes both regimes gives the
//! fraction of it spent in the first one from its rate. Each regime's figures leave out the
//! intervals that mix two regimes, so they are the regime's own.
//!
//! # Causes
//! A throughput drop that does not recover is named `credits-exhausted` for reads (time to the
//! cliff) and `write-cache-full` for writes (bytes written to the cliff); a drop followed by a
//! recovery is `throttling-starts` then `throttling-stops`. Otherwise the cause is left
//! `unknown`.
//!
//! # A noisy neighbour
//! Runs record the device's own counters per interval (`RunResult::device_intervals`). In an
//! O_DIRECT run every byte iolens asks for reaches the device once, so an interval in which the
//! device moved at least [`NEIGHBOUR_RATIO`] times iolens' bytes, and at least
//! [`NEIGHBOUR_FLOOR_BPS`] more, had another process on the device (a filesystem's journal
//! and metadata writes stay under the floor). Those intervals are named as a neighbour's,
//! and a change whose lower regime lies mostly in them is named `neighbour`, not a change of
//! the storage. Buffered runs are not judged (readahead and writeback move other amounts by
//! design), nor files without the counters (older ones).
//!
//! # The host's CPU
//! Runs record their session threads' wait for a CPU per interval
//! (`RunResult::sched_intervals`, from schedstat). A closed-loop session's time is its I/O's
//! latency, its CPU time and that wait, so a change whose low-rate side waited enough more to
//! explain at least [`HOST_CPU_EXPLAINS`] of the rate lost is named `host-cpu`: iolens itself
//! was starved of CPU by other work on the host, and the storage did not change. Likewise a
//! last regime that is not steady, where its slowest interval waited that much more than its
//! fastest. The I/O path's own kernel threads count too: runs record the wait for a CPU of the
//! threads that serve the device's requests (a loop device's workers,
//! `SchedInterval::device_runq_ns`), and the time the device's requests spent waiting with
//! them is added to the sessions' wait (see `hostcpu`). Files without the readings are judged
//! as before.
//!
//! # Steady state (SNIA SSS PTS)
//! Over the last [`SNIA_ROUNDS`] intervals of the last regime: the data excursion
//! (max − min) is at most 20 % of the window's average, and the excursion of the least-squares
//! line across the window is at most 10 % of the average.

mod calibration;
mod hostcpu;
mod neighbour;
mod segment;
#[cfg(test)]
mod tests;

use super::{Severity, Verdict, VerdictKind};
use crate::results::analysis::{
    CalibrationBurst, RateStretch, Regime, RegimeCause, RegimeChange, RunRegimes, RunqShares,
};
use crate::results::{Calibration, Results, RunResult};
use crate::units::{fmt_bytes, fmt_rate};
pub use calibration::{calibration_burst, calibration_write_cache};
pub use hostcpu::host_cpu_explains;
use neighbour::{device_per_interval, neighbour_flags, neighbour_spans, neighbour_verdict};
use segment::change_points_of;
pub use segment::{change_points, noise_sigma, snia_steady};

/// Smallest change reported: the two regimes' means differ by this share of the larger.
pub const MIN_CHANGE: f64 = 0.08;
/// Smallest change of latency alone: per-interval percentiles are far noisier than rates
/// (a rate limiter's dispatch slices move a p99 by tens of percent at a constant rate), so a
/// latency-only regime is one whose p99 moved by at least half of the larger.
pub const MIN_LATENCY_CHANGE: f64 = 0.5;
/// A rate limiter's grant slice, seconds (blk-throttle's `throtl_slice`, 100 ms): a window of
/// `d` seconds may read up to one slice's worth above the rate.
pub const THROTTLE_SLICE_S: f64 = 0.1;
/// Fewest intervals on each side of a change.
pub const MIN_LEN: usize = 3;
/// SNIA PTS measurement window, in rounds (intervals here).
pub const SNIA_ROUNDS: usize = 5;
/// An interval had a neighbour when the device moved at least this many times iolens' bytes
/// ("much more work than iolens asked": half as much again)…
pub const NEIGHBOUR_RATIO: f64 = 1.5;
/// …and at least this many bytes per second more than iolens (a filesystem's own journal and
/// metadata writes under an O_DIRECT run stay well below it).
pub const NEIGHBOUR_FLOOR_BPS: f64 = 1e6;

/// A change is the host's CPU when the rise of iolens' sessions' wait for a CPU accounts for
/// at least this share of the relative rate lost (see [`host_cpu_explains`]): the closed-loop
/// model predicts all of it, and several sessions over a rate limiter lose less than their
/// wait (the limiter keeps serving the others), so half is the bar.
pub const HOST_CPU_EXPLAINS: f64 = 0.5;

/// Series longer than this skip the per-interval latency percentiles (each needs a histogram
/// decoded); throughput still covers them.
const MAX_LATENCY_SERIES: usize = 20_000;

/// The per-interval series of a run's I/O ops (all but `sync`, summed interval by interval).
struct Series {
    start_s: Vec<f64>,
    dur_s: Vec<f64>,
    ops: Vec<f64>,
    bytes: Vec<f64>,
    /// Per-interval p99 latency, ns (empty when not computed).
    p99: Vec<f64>,
    writes: bool,
}

fn series(run: &RunResult) -> Option<Series> {
    let io: Vec<_> = run
        .ops
        .iter()
        .filter(|o| o.op != "sync" && !o.intervals.is_empty())
        .collect();
    let first = io.first()?;
    let n = first.intervals.len();
    let mut s = Series {
        start_s: first.intervals.iter().map(|i| i.start_s).collect(),
        dur_s: first.intervals.iter().map(|i| i.duration_s).collect(),
        ops: vec![0.0; n],
        bytes: vec![0.0; n],
        p99: vec![],
        writes: false,
    };
    let mut write_bytes = 0u64;
    let mut read_bytes = 0u64;
    for o in &io {
        for (i, iv) in o.intervals.iter().take(n).enumerate() {
            s.ops[i] += iv.count as f64;
            s.bytes[i] += iv.bytes as f64;
        }
        // Saturating: a results file is input, and its byte counts can be anything.
        if o.op.contains("write") {
            write_bytes = write_bytes.saturating_add(o.bytes);
        } else {
            read_bytes = read_bytes.saturating_add(o.bytes);
        }
    }
    s.writes = write_bytes > read_bytes;
    if io.len() == 1 && n <= MAX_LATENCY_SERIES {
        s.p99 = first
            .intervals
            .iter()
            .map(|iv| {
                iv.hist
                    .decode()
                    .ok()
                    .filter(|h| !h.is_empty())
                    .map_or(f64::NAN, |h| h.value_at_quantile(0.99) as f64)
            })
            .collect();
        if s.p99.iter().any(|v| v.is_nan()) {
            s.p99.clear();
        }
    }
    Some(s)
}

/// Per interval of `s`: the values of `spans` (start s, length s, values) spread over it by
/// overlap (a span's values are counted in proportion to the share of it inside the interval).
fn overlap_sums<const K: usize>(s: &Series, spans: &[(f64, f64, [f64; K])]) -> Vec<[f64; K]> {
    s.start_s
        .iter()
        .zip(&s.dur_s)
        .map(|(&t0, &d)| {
            let t1 = t0 + d;
            let mut out = [0.0; K];
            for &(a, len, v) in spans {
                let overlap = (t1.min(a + len) - t0.max(a)).max(0.0);
                if overlap > 0.0 && len > 0.0 {
                    let f = overlap / len;
                    for (o, x) in out.iter_mut().zip(v) {
                        *o += x * f;
                    }
                }
            }
            out
        })
        .collect()
}

/// Regimes of one run (None without per-interval series long enough to split).
pub fn run_regimes(run: &RunResult) -> Option<RunRegimes> {
    let s = series(run)?;
    let n = s.ops.len();
    if n < SNIA_ROUNDS {
        return None;
    }
    // The last interval may be shorter; rates are per its own duration.
    let rate = |v: &[f64]| -> Vec<f64> {
        v.iter()
            .zip(&s.dur_s)
            .map(|(x, d)| if *d > 0.0 { x / d } else { 0.0 })
            .collect()
    };
    let iops = rate(&s.ops);
    let mbps: Vec<f64> = rate(&s.bytes).iter().map(|b| b / 1e6).collect();
    // Change points of every series, merged: a change within one interval of another is the
    // same change.
    let mut changed: Vec<(usize, &'static str)> = Vec::new();
    for (name, x, min) in [
        ("IOPS", &iops, MIN_CHANGE),
        ("MB/s", &mbps, MIN_CHANGE),
        ("p99 latency", &s.p99, MIN_LATENCY_CHANGE),
    ] {
        for k in change_points_of(x, min) {
            changed.push((k, name));
        }
    }
    changed.sort_by_key(|c| c.0);
    // A latency-only change within a few intervals of a throughput change is that change's
    // aftermath (queued requests draining after a cliff), not a regime of its own.
    let rate_changes: Vec<usize> = changed
        .iter()
        .filter(|c| c.1 != "p99 latency")
        .map(|c| c.0)
        .collect();
    changed.retain(|&(k, name)| {
        name != "p99 latency" || !rate_changes.iter().any(|&r| r.abs_diff(k) <= MIN_LEN)
    });
    let mut cps: Vec<(usize, Vec<String>)> = Vec::new();
    for (k, name) in changed {
        match cps.last_mut() {
            Some((k0, names)) if k - *k0 <= 1 => {
                if !names.iter().any(|x| x == name) {
                    names.push(name.to_string());
                }
            }
            _ => cps.push((k, vec![name.to_string()])),
        }
    }
    let build = |cps: &[(usize, Vec<String>)]| -> (Vec<usize>, Vec<Regime>) {
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(cps.iter().map(|c| c.0))
            .chain(std::iter::once(n))
            .collect();
        // Each regime's figures without the intervals that mix two regimes (when it keeps some).
        let regimes: Vec<Regime> = bounds
            .windows(2)
            .enumerate()
            .map(|(r, w)| {
                let (mut a, mut b) = (w[0], w[1]);
                if r > 0 && b - a > 2 {
                    a += 1;
                }
                if w[1] < n && b - a > 2 {
                    b -= 1;
                }
                let dur: f64 = s.dur_s[a..b].iter().sum();
                let p99 = if s.p99.is_empty() {
                    None
                } else {
                    Some(super::median(s.p99[a..b].to_vec()) as u64)
                };
                Regime {
                    start_s: s.start_s[w[0]],
                    end_s: s.start_s[w[1] - 1] + s.dur_s[w[1] - 1],
                    iops: s.ops[a..b].iter().sum::<f64>() / dur,
                    mb_per_s: s.bytes[a..b].iter().sum::<f64>() / dur / 1e6,
                    p99_ns: p99,
                    rate_from_s: s.start_s[a],
                    rate_to_s: s.start_s[b - 1] + s.dur_s[b - 1],
                }
            })
            .collect();
        (bounds, regimes)
    };
    let (mut bounds, mut regimes) = build(&cps);
    // A change seen in latency alone must hold in the regimes' typical p99 (their medians
    // differ by [`MIN_LATENCY_CHANGE`]): a few outlying intervals move a segment's mean, not
    // its median.
    let keep: Vec<bool> = cps
        .iter()
        .enumerate()
        .map(|(i, (_, names))| {
            let latency_only = names.iter().all(|x| x == "p99 latency");
            let held = match (regimes[i].p99_ns, regimes[i + 1].p99_ns) {
                (Some(a), Some(b)) => {
                    let (a, b) = (a as f64, b as f64);
                    (a - b).abs() >= MIN_LATENCY_CHANGE * a.max(b)
                }
                _ => false,
            };
            !latency_only || held
        })
        .collect();
    if keep.iter().any(|k| !k) {
        let mut i = 0;
        cps.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        (bounds, regimes) = build(&cps);
    }
    let mut changes = Vec::new();
    for (i, (k, names)) in cps.iter().enumerate() {
        let (before, after) = (&regimes[i], &regimes[i + 1]);
        let at_s = cliff_time(&iops, &s.start_s, &s.dur_s, *k, before.iops, after.iops);
        // Work done before the cliff: whole intervals, then the share of the mixed one.
        let (mut ops_before, mut bytes_before) = (0.0, 0.0);
        for j in 0..n {
            let (t0, d) = (s.start_s[j], s.dur_s[j]);
            if t0 + d <= at_s {
                ops_before += s.ops[j];
                bytes_before += s.bytes[j];
            } else if t0 < at_s && d > 0.0 {
                let f = (at_s - t0) / d;
                ops_before += s.ops[j] * f;
                bytes_before += s.bytes[j] * f;
            }
        }
        changes.push(RegimeChange {
            at_s,
            series: names.clone(),
            from_iops: before.iops,
            to_iops: after.iops,
            from_p99_ns: before.p99_ns,
            to_p99_ns: after.p99_ns,
            ops_before: ops_before.round() as u64,
            bytes_before: bytes_before.round() as u64,
            cause: RegimeCause::Unknown,
            runq: None,
        });
    }
    // A neighbour on the device: a change whose lower side lies mostly in the neighbour's
    // intervals is the neighbour's doing, not the storage's. Named first, so that the cliff
    // is chosen among the storage's own changes.
    let dev = device_per_interval(run, &s);
    let flags = dev.as_ref().map(|d| neighbour_flags(&s, d));
    let neighbours = match (&dev, &flags) {
        (Some(d), Some(f)) => neighbour_spans(&s, d, f),
        _ => Vec::new(),
    };
    if let Some(flags) = &flags {
        for (i, c) in changes.iter_mut().enumerate() {
            let lower = if c.to_iops < c.from_iops { i + 1 } else { i };
            let (a, b) = (bounds[lower], bounds[lower + 1]);
            let hit = flags[a..b].iter().filter(|f| **f).count();
            if 2 * hit > b - a {
                c.cause = RegimeCause::Neighbour;
            }
        }
    }
    // iolens' own sessions starved of CPU: the host's doing, not the storage's. The shares
    // are those of each regime's own stretch (the intervals that mix two left out).
    let runq = hostcpu::runq_per_interval(run, &s);
    if let Some(per) = &runq {
        let (start, dur) = (&s.start_s, &s.dur_s);
        let stretch = |g: &Regime| {
            let js = (0..n).filter(|&j| {
                start[j] >= g.rate_from_s - 1e-9 && start[j] + dur[j] <= g.rate_to_s + 1e-9
            });
            hostcpu::share(per, js)
        };
        for (i, c) in changes.iter_mut().enumerate() {
            let (Some(fb), Some(fa)) = (stretch(&regimes[i]), stretch(&regimes[i + 1])) else {
                continue;
            };
            let ((low, f_low), (high, f_high)) = if c.to_iops < c.from_iops {
                ((c.to_iops, fa), (c.from_iops, fb))
            } else {
                ((c.from_iops, fb), (c.to_iops, fa))
            };
            c.runq = Some(hostcpu::shares(f_low, f_high));
            if c.cause != RegimeCause::Neighbour && hostcpu::explains(low, high, f_low, f_high) {
                c.cause = RegimeCause::HostCpu;
            }
        }
    }
    name_causes(&mut changes, s.writes);
    let last = regimes
        .last()
        .map_or((0, n), |_| (bounds[bounds.len() - 2], n));
    let mut steady = snia_steady(&iops[last.0..last.1], &s.start_s[last.0..last.1]);
    if let (Some(st), Some(per)) = (steady.as_mut(), &runq) {
        if !st.steady {
            st.host_cpu = window_host_cpu(&iops[n - SNIA_ROUNDS..], &per[n - SNIA_ROUNDS..]);
        }
    }
    let mut r = RunRegimes {
        regimes,
        changes,
        steady,
        sentence: String::new(),
        neighbours,
    };
    r.sentence = describe(&r);
    Some(r)
}

/// Whether the window's range is iolens' sessions waiting for a CPU: its slowest interval
/// waited enough more than its fastest to explain the gap ([`host_cpu_explains`]).
fn window_host_cpu(iops: &[f64], per: &[[f64; 3]]) -> Option<RunqShares> {
    let lo = (0..iops.len()).min_by(|&a, &b| iops[a].total_cmp(&iops[b]))?;
    let hi = (0..iops.len()).max_by(|&a, &b| iops[a].total_cmp(&iops[b]))?;
    let f_lo = hostcpu::share(per, std::iter::once(lo))?;
    let f_hi = hostcpu::share(per, std::iter::once(hi))?;
    hostcpu::explains(iops[lo], iops[hi], f_lo, f_hi).then(|| hostcpu::shares(f_lo, f_hi))
}

/// Whether `run` has per-interval series long enough for [`run_regimes`].
pub fn analysable(run: &RunResult) -> bool {
    run.ops
        .iter()
        .any(|o| o.op != "sync" && o.intervals.len() >= SNIA_ROUNDS)
}

/// The verdicts of a run's regimes: a warning per change of regime, and the steady-state
/// verdict (info when steady, a warning when not).
pub fn verdicts(g: &RunRegimes, device: &str) -> Vec<Verdict> {
    let mut out = Vec::new();
    if !g.changes.is_empty() {
        let first = &g.changes[0];
        let storage = g
            .changes
            .iter()
            .any(|c| !matches!(c.cause, RegimeCause::Neighbour | RegimeCause::HostCpu));
        let host = g.changes.iter().any(|c| c.cause == RegimeCause::HostCpu);
        out.push(Verdict::new(
            VerdictKind::RegimeChange,
            Severity::Warning,
            format!(
                "{}: {}; the figures of the whole run mix the regimes{}",
                if storage {
                    "the storage changed regime under the same load"
                } else if host {
                    "the run's rate changed under the same load while iolens waited for the \
                     host's CPU, not the storage"
                } else {
                    "the run's rate changed under the same load while another process used the \
                     device, not the storage"
                },
                g.sentence,
                if starved_last(g) {
                    ", the last one is the host's CPU's, not what the storage sustains"
                } else {
                    ", the last one is what it sustains"
                }
            ),
            &[
                ("change_at_s", first.at_s),
                ("from_iops", first.from_iops),
                ("to_iops", first.to_iops),
                ("bytes_before_change", first.bytes_before as f64),
                ("changes", g.changes.len() as f64),
            ],
        ));
    }
    if !g.neighbours.is_empty() {
        out.push(neighbour_verdict(&g.neighbours, device));
    }
    if let Some(s) = &g.steady {
        let msg = if s.steady {
            format!(
                "steady state (SNIA PTS) over the last {} intervals: {} IOPS, range {:.1} % of \
                 the average (≤ 20 %), slope {:.1} % (≤ 10 %)",
                s.rounds,
                fmt_rate(s.average),
                s.range_pct,
                s.slope_pct
            )
        } else if let Some(h) = &s.host_cpu {
            format!(
                "NOT in steady state (SNIA PTS) over the last {} intervals: range {:.1} % of the \
                 average (steady ≤ 20 %), slope {:.1} % (steady ≤ 10 %); {}",
                s.rounds,
                s.range_pct,
                s.slope_pct,
                host_cpu_text(h)
            )
        } else {
            format!(
                "NOT in steady state (SNIA PTS) over the last {} intervals: range {:.1} % of the \
                 average (steady ≤ 20 %), slope {:.1} % (steady ≤ 10 %); a longer run may settle \
                 elsewhere",
                s.rounds, s.range_pct, s.slope_pct
            )
        };
        out.push(Verdict::new(
            VerdictKind::SteadyState,
            if s.steady {
                Severity::Info
            } else {
                Severity::Warning
            },
            msg,
            &[
                ("range_pct", s.range_pct),
                ("slope_pct", s.slope_pct),
                ("steady", if s.steady { 1.0 } else { 0.0 }),
            ],
        ));
    }
    out
}

/// Where in time the change at interval `k` happened: inside the interval that mixes the two
/// regimes, by the share of it spent at the first regime's rate. An interval counts as mixed
/// only when it lies beyond its own regime's noise (3 σ of the series), so an ordinary
/// fluctuation next to the change does not move it.
fn cliff_time(x: &[f64], start: &[f64], dur: &[f64], k: usize, m1: f64, m2: f64) -> f64 {
    let span = m1 - m2;
    if span.abs() < f64::EPSILON {
        return start[k];
    }
    let noise = 3.0 * noise_sigma(x);
    let frac = |j: usize| ((x[j] - m2) / span).clamp(0.0, 1.0);
    // The last interval of the first regime, when it fell part way to the second.
    if (x[k - 1] - m1).abs() > noise {
        return start[k - 1] + frac(k - 1) * dur[k - 1];
    }
    // Else the first interval of the second regime, when it is still part way.
    if (x[k] - m2).abs() > noise {
        return start[k] + frac(k) * dur[k];
    }
    start[k]
}

/// Name the cause of each change from its direction and what followed (a change already named
/// [`RegimeCause::Neighbour`] or [`RegimeCause::HostCpu`] keeps that name). A fall that nothing recovers from is the cliff
/// only when it is the deepest such fall (the lowest ratio of after to before): a burst that
/// steps down before it ends ("1.02k IOPS for 5 s, then 804 for 4 s, then 250": the storage
/// under the burst gave less for a while, seen in CI) has one cliff, the fall into the
/// sustained regime, and the smaller step stays a change of unknown cause on the burst's side;
/// a sustained rate that sinks a little further after the cliff is one too.
fn name_causes(changes: &mut [RegimeChange], writes: bool) {
    let n = changes.len();
    let drop = |c: &RegimeChange| c.to_iops < c.from_iops * (1.0 - MIN_CHANGE);
    let rise = |c: &RegimeChange| c.to_iops > c.from_iops * (1.0 + MIN_CHANGE);
    let recovers = |i: usize| changes[i + 1..].iter().any(rise);
    let kept = |c: &RegimeChange| matches!(c.cause, RegimeCause::Neighbour | RegimeCause::HostCpu);
    let cliff = (0..n)
        .filter(|&i| !kept(&changes[i]) && drop(&changes[i]) && !recovers(i))
        .min_by(|&a, &b| {
            let ratio = |c: &RegimeChange| c.to_iops / c.from_iops;
            ratio(&changes[a]).total_cmp(&ratio(&changes[b]))
        });
    let causes: Vec<RegimeCause> = (0..n)
        .map(|i| {
            let c = &changes[i];
            let after_drop = changes[..i].iter().any(drop);
            if kept(c) {
                c.cause
            } else if drop(c) && recovers(i) {
                RegimeCause::ThrottlingStarts
            } else if cliff == Some(i) && writes {
                RegimeCause::WriteCacheFull
            } else if cliff == Some(i) {
                RegimeCause::CreditsExhausted
            } else if rise(c) && after_drop {
                RegimeCause::ThrottlingStops
            } else {
                RegimeCause::Unknown
            }
        })
        .collect();
    for (c, cause) in changes.iter_mut().zip(causes) {
        c.cause = cause;
    }
}

/// One sentence for people: "4.0k IOPS for 41 s, then 1.0k sustained (burst credits exhausted
/// 41.2 s in, 164k I/Os)".
pub fn describe(r: &RunRegimes) -> String {
    let Some(last) = r.regimes.last() else {
        return String::new();
    };
    let mut out = String::new();
    if r.changes.is_empty() {
        out += &format!("one regime: {} IOPS", fmt_rate(last.iops));
    } else {
        for (i, g) in r.regimes.iter().enumerate() {
            let c = r.changes.get(i);
            if i > 0 {
                out += ", then ";
            }
            match c {
                Some(c) => {
                    out += &format!(
                        "{} IOPS{} for {:.0} s",
                        fmt_rate(g.iops),
                        latency_note(r, i),
                        c.at_s - g.start_s
                    );
                }
                // A rate iolens kept only while starved of CPU is not what the storage
                // sustains.
                None if starved_last(r) => {
                    out += &format!(
                        "{}{} while iolens was starved of CPU",
                        fmt_rate(g.iops),
                        latency_note(r, i)
                    )
                }
                None => out += &format!("{}{} sustained", fmt_rate(g.iops), latency_note(r, i)),
            }
        }
        let why: Vec<String> = r.changes.iter().map(cause_text).collect();
        out += &format!(" ({})", why.join("; "));
    }
    if !r.neighbours.is_empty() {
        let spans: Vec<String> = r
            .neighbours
            .iter()
            .map(|n| format!("{:.0}–{:.0} s", n.start_s, n.end_s))
            .collect();
        out += &format!("; another process used the device in {}", spans.join(", "));
    }
    if let Some(s) = &r.steady {
        out += &format!(
            "; {} by SNIA PTS over the last {} intervals (range {:.1} %, slope {:.1} %)",
            if s.steady { "steady" } else { "NOT steady" },
            s.rounds,
            s.range_pct,
            s.slope_pct
        );
        if let Some(h) = &s.host_cpu {
            out += &format!(": {}", host_cpu_text(h));
        }
    }
    out
}

/// Whether the last regime is iolens starved of CPU: a fall named the host's CPU, and since then
/// only changes named so that did not bring the rate back to where it fell from (a starved
/// iolens' rate wanders as its wait does).
fn starved_last(r: &RunRegimes) -> bool {
    let mut from: Option<f64> = None;
    for c in &r.changes {
        if c.cause != RegimeCause::HostCpu {
            from = None;
            continue;
        }
        if c.to_iops < c.from_iops {
            from.get_or_insert(c.from_iops);
        }
        if from.is_some_and(|f| c.to_iops >= f * (1.0 - MIN_CHANGE)) {
            from = None;
        }
    }
    from.is_some()
}

/// ` at p99 X` where regime `i` is told from a neighbour by its latency alone (their rates
/// within [`MIN_CHANGE`] of each other), else nothing.
fn latency_note(r: &RunRegimes, i: usize) -> String {
    let g = &r.regimes[i];
    let same = |o: Option<&Regime>| {
        o.is_some_and(|o| (o.iops - g.iops).abs() < MIN_CHANGE * o.iops.max(g.iops))
    };
    match g.p99_ns {
        Some(p) if same(r.regimes.get(i + 1)) || (i > 0 && same(r.regimes.get(i - 1))) => {
            format!(" at p99 {}", crate::units::fmt_ns(p as f64))
        }
        _ => String::new(),
    }
}

/// iolens' sessions' wait for a CPU in words: "iolens' sessions waited for a CPU (31 % of
/// their time, 2 % before): the host's CPU, not the storage".
pub fn host_cpu_text(h: &RunqShares) -> String {
    format!(
        "iolens' sessions waited for a CPU ({:.0} % of their time, {:.0} % at the higher \
         rate){}: the host's CPU, not the storage",
        100.0 * h.low_rate,
        100.0 * h.high_rate,
        device_threads_text(h.device_low_rate, h.device_high_rate, "at the higher rate")
    )
}

/// `, and the device's kernel threads held its requests waiting for one (40 % of the sessions'
/// time, 4 % before)` where the device's own threads waited for a CPU, else nothing.
fn device_threads_text(now: f64, other: f64, other_is: &str) -> String {
    if now.max(other) < 0.005 {
        return String::new();
    }
    format!(
        ", and the device's own kernel threads held its requests waiting for one ({:.0} % of \
         the sessions' time, {:.0} % {other_is})",
        100.0 * now,
        100.0 * other
    )
}

/// The cause of a change in words, with its evidence.
pub fn cause_text(c: &RegimeChange) -> String {
    if let (RegimeCause::HostCpu, Some(h)) = (c.cause, &c.runq) {
        let ((now, before), (dev_now, dev_before)) = if c.to_iops < c.from_iops {
            (
                (h.low_rate, h.high_rate),
                (h.device_low_rate, h.device_high_rate),
            )
        } else {
            (
                (h.high_rate, h.low_rate),
                (h.device_high_rate, h.device_low_rate),
            )
        };
        return format!(
            "iolens' sessions waited for a CPU ({:.0} % of their time, {:.0} % before){}: the \
             host's CPU, not the storage, {:.1} s in, after {} I/Os",
            100.0 * now,
            100.0 * before,
            device_threads_text(dev_now, dev_before, "before"),
            c.at_s,
            fmt_rate(c.ops_before as f64)
        );
    }
    let what = match c.cause {
        RegimeCause::CreditsExhausted => "burst credits exhausted",
        RegimeCause::WriteCacheFull => "a write cache full",
        RegimeCause::ThrottlingStarts => "throttling starts",
        RegimeCause::ThrottlingStops => "throttling stops",
        RegimeCause::Neighbour if c.to_iops < c.from_iops => {
            "another process on the device starts (a noisy neighbour)"
        }
        RegimeCause::Neighbour => "the noisy neighbour stops",
        RegimeCause::HostCpu => "iolens' sessions' wait for a CPU changed (the host's CPU)",
        RegimeCause::Unknown => "change of unknown cause",
    };
    format!(
        "{what} {:.1} s in, after {} I/Os and {} {}",
        c.at_s,
        fmt_rate(c.ops_before as f64),
        fmt_bytes(c.bytes_before),
        if c.cause == RegimeCause::WriteCacheFull {
            "written"
        } else {
            "moved"
        }
    )
}
