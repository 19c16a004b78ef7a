//! Where one series changes level, and whether its end is steady: penalised binary
//! segmentation of a mean-shift model and the SNIA PTS steady-state test (the method is in
//! the parent module's docs).

use super::{MIN_CHANGE, MIN_LEN, SNIA_ROUNDS};
use crate::results::analysis::SteadyState;

/// A segment `[a, b)` of a series.
type Seg = (usize, usize);

/// Prefix sums of a series and its squares.
pub(super) struct Prefix {
    s1: Vec<f64>,
    s2: Vec<f64>,
}

impl Prefix {
    pub(super) fn new(x: &[f64]) -> Prefix {
        let mut s1 = Vec::with_capacity(x.len() + 1);
        let mut s2 = Vec::with_capacity(x.len() + 1);
        s1.push(0.0);
        s2.push(0.0);
        for v in x {
            s1.push(s1[s1.len() - 1] + v);
            s2.push(s2[s2.len() - 1] + v * v);
        }
        Prefix { s1, s2 }
    }
    pub(super) fn mean(&self, (a, b): Seg) -> f64 {
        (self.s1[b] - self.s1[a]) / (b - a) as f64
    }
    /// Sum of squared deviations from the segment's mean.
    pub(super) fn cost(&self, (a, b): Seg) -> f64 {
        let n = (b - a) as f64;
        let s = self.s1[b] - self.s1[a];
        (self.s2[b] - self.s2[a] - s * s / n).max(0.0)
    }
}

/// The noise of a series: σ estimated from the median absolute successive difference.
pub fn noise_sigma(x: &[f64]) -> f64 {
    if x.len() < 3 {
        return 0.0;
    }
    let d: Vec<f64> = x.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    1.4826 * crate::analysis::median(d) / std::f64::consts::SQRT_2
}

/// Change points of `x` (indices where a new regime starts), in order, by penalised binary
/// segmentation (see the module docs).
pub fn change_points(x: &[f64]) -> Vec<usize> {
    change_points_of(x, MIN_CHANGE)
}

/// [`change_points`] with the smallest change of practical size given.
pub(super) fn change_points_of(x: &[f64], min_change: f64) -> Vec<usize> {
    let n = x.len();
    if n < 2 * MIN_LEN {
        return vec![];
    }
    let level = crate::analysis::median(x.iter().map(|v| v.abs()).collect());
    // A perfectly regular series (a hard rate limit) has σ near 0: a floor of 1 % of its level
    // keeps rounding from being read as a change.
    let sigma = noise_sigma(x).max(0.01 * level).max(f64::MIN_POSITIVE);
    let penalty = 3.0 * (n as f64).ln() * sigma * sigma;
    let p = Prefix::new(x);
    let mut out = Vec::new();
    let mut todo: Vec<Seg> = vec![(0, n)];
    while let Some((a, b)) = todo.pop() {
        if b - a < 2 * MIN_LEN {
            continue;
        }
        let whole = p.cost((a, b));
        let mut best: Option<(usize, f64)> = None;
        for k in a + MIN_LEN..=b - MIN_LEN {
            let gain = whole - p.cost((a, k)) - p.cost((k, b));
            if best.is_none_or(|(_, g)| gain > g) {
                best = Some((k, gain));
            }
        }
        let Some((k, gain)) = best else { continue };
        let (m1, m2) = (p.mean((a, k)), p.mean((k, b)));
        let big = m1.abs().max(m2.abs());
        if gain > penalty && big > 0.0 && (m1 - m2).abs() >= min_change * big {
            out.push(k);
            todo.push((a, k));
            todo.push((k, b));
        }
    }
    out.sort_unstable();
    merge_mixed(x, out, min_change)
}

/// Drop the change points whose two sides differ by less than `min_change` once the intervals
/// next to a change are left out: a cliff inside an interval leaves that interval between the
/// two levels, and binary segmentation can cut it off with its neighbours as a regime of its
/// own ("1.01k IOPS for 7 s, then 874 for 3 s, then 250": intervals 996, 1002 and the mixed
/// 746 — seen in CI). The least different pair is merged first, until none is left.
fn merge_mixed(x: &[f64], mut cps: Vec<usize>, min_change: f64) -> Vec<usize> {
    loop {
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(cps.iter().copied())
            .chain(std::iter::once(x.len()))
            .collect();
        // The mean of segment (a, b) without the intervals next to a change point.
        let trimmed = |a: usize, b: usize| -> f64 {
            let lo = if a > 0 && b - a > 1 { a + 1 } else { a };
            let hi = if b < x.len() && b - lo > 1 { b - 1 } else { b };
            x[lo..hi].iter().sum::<f64>() / (hi - lo) as f64
        };
        let weakest = (1..bounds.len() - 1)
            .map(|i| {
                let m1 = trimmed(bounds[i - 1], bounds[i]);
                let m2 = trimmed(bounds[i], bounds[i + 1]);
                let big = m1.abs().max(m2.abs());
                let rel = if big > 0.0 {
                    (m1 - m2).abs() / big
                } else {
                    0.0
                };
                (i - 1, rel)
            })
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match weakest {
            Some((j, rel)) if rel < min_change => {
                cps.remove(j);
            }
            _ => return cps,
        }
    }
}

/// SNIA PTS steady state of the last [`SNIA_ROUNDS`] values of `x` (None with fewer).
pub fn snia_steady(x: &[f64], start_s: &[f64]) -> Option<SteadyState> {
    if x.len() < SNIA_ROUNDS {
        return None;
    }
    let w = &x[x.len() - SNIA_ROUNDS..];
    let avg = w.iter().sum::<f64>() / w.len() as f64;
    if !crate::analysis::positive(avg) {
        return None;
    }
    let max = w.iter().cloned().fold(f64::MIN, f64::max);
    let min = w.iter().cloned().fold(f64::MAX, f64::min);
    // Least-squares line over the window (x = round number).
    let n = w.len() as f64;
    let mx = (n - 1.0) / 2.0;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, v) in w.iter().enumerate() {
        sxy += (i as f64 - mx) * (v - avg);
        sxx += (i as f64 - mx).powi(2);
    }
    let slope = sxy / sxx;
    let range_pct = 100.0 * (max - min) / avg;
    let slope_pct = 100.0 * (slope * (n - 1.0)).abs() / avg;
    Some(SteadyState {
        rounds: SNIA_ROUNDS as u32,
        window_start_s: start_s[x.len() - SNIA_ROUNDS],
        average: avg,
        range_pct,
        slope_pct,
        steady: range_pct <= 20.0 && slope_pct <= 10.0,
        host_cpu: None,
    })
}
