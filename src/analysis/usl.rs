//! Universal Scalability Law fit of throughput against concurrency.
//!
//! Gunther's USL models the throughput of `N` concurrent sessions as
//! `X(N) = λN / (1 + σ(N−1) + κN(N−1))`: λ is the throughput of one session, σ the contention
//! (the serialised share, Amdahl) and κ the coherency cost (crosstalk between sessions). With
//! κ > 0 throughput peaks at `N* = sqrt((1−σ)/κ)` and then falls.
//!
//! # Method
//! Ordinary least squares on X itself (not on a transformed quantity, so every point's error
//! counts in IOPS), with σ, κ ≥ 0:
//! 1. For fixed (σ, κ) the model is linear in λ, so λ is solved in closed form
//!    (`λ = Σ X·g / Σ g²` with `g = N / (1 + σ(N−1) + κN(N−1))`); only σ and κ are searched
//!    (variable projection).
//! 2. Start: Gunther's linearisation `N/C(N) − 1 = σ(N−1) + κN(N−1)` with `C(N) = X(N)/λ₀`,
//!    λ₀ = X/N at the smallest N, solved as a two-regressor linear least squares without
//!    intercept, with negative coefficients dropped (non-negative least squares over the
//!    4 subsets). This is exact on noise-free data.
//! 3. Refine: Nelder–Mead on (u, v) with σ = u², κ = v² (non-negativity without constraints),
//!    restarted once from its own result; started also from (0, 0); the best fit wins.
//! 4. A parameter that can be set to exactly 0 without raising the squared error by more than
//!    1e-9 (relative; plus 1e-20·Σx² for rounding noise) is set to 0, so pure Amdahl scaling reports κ = 0 and no peak.
//!
//! A 2-parameter Nelder–Mead is a few dozen lines; a general optimisation crate (argmin,
//! nalgebra-based Levenberg–Marquardt) would add far more code than it replaces.

pub use crate::results::analysis::UslFit;

fn usl(lambda: f64, sigma: f64, kappa: f64, n: f64) -> f64 {
    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

/// Best λ and the squared error for given σ, κ.
fn profile(pts: &[(f64, f64)], sigma: f64, kappa: f64) -> (f64, f64) {
    let g: Vec<f64> = pts
        .iter()
        .map(|&(n, _)| usl(1.0, sigma, kappa, n))
        .collect();
    let sgg: f64 = g.iter().map(|v| v * v).sum();
    let sxg: f64 = pts.iter().zip(&g).map(|(p, v)| p.1 * v).sum();
    let lambda = if sgg > 0.0 { sxg / sgg } else { 0.0 };
    let sse = pts
        .iter()
        .zip(&g)
        .map(|(p, v)| (p.1 - lambda * v).powi(2))
        .sum();
    (lambda, sse)
}

/// Gunther's linearised estimate of (σ, κ), non-negative.
fn linearised(pts: &[(f64, f64)]) -> (f64, f64) {
    let (n0, x0) = pts
        .iter()
        .copied()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .expect("at least one point");
    let lambda0 = x0 / n0;
    // Rows: a = N−1, b = N(N−1), y = N/C − 1.
    let rows: Vec<(f64, f64, f64)> = pts
        .iter()
        .map(|&(n, x)| (n - 1.0, n * (n - 1.0), n * lambda0 / x - 1.0))
        .collect();
    let sse = |s: f64, k: f64| -> f64 {
        rows.iter()
            .map(|(a, b, y)| (y - s * a - k * b).powi(2))
            .sum()
    };
    let (saa, sbb, sab, say, sby) = rows.iter().fold((0.0, 0.0, 0.0, 0.0, 0.0), |t, (a, b, y)| {
        (
            t.0 + a * a,
            t.1 + b * b,
            t.2 + a * b,
            t.3 + a * y,
            t.4 + b * y,
        )
    });
    let mut cands = vec![(0.0, 0.0)];
    if saa > 0.0 {
        cands.push(((say / saa).max(0.0), 0.0));
    }
    if sbb > 0.0 {
        cands.push((0.0, (sby / sbb).max(0.0)));
    }
    let det = saa * sbb - sab * sab;
    if det.abs() > 1e-12 * saa * sbb {
        let s = (say * sbb - sby * sab) / det;
        let k = (sby * saa - say * sab) / det;
        if s >= 0.0 && k >= 0.0 {
            cands.push((s, k));
        }
    }
    cands
        .into_iter()
        .min_by(|a, b| sse(a.0, a.1).total_cmp(&sse(b.0, b.1)))
        .unwrap_or((0.0, 0.0))
}

/// Nelder–Mead minimisation of `f` in two dimensions.
fn nelder_mead(f: &dyn Fn([f64; 2]) -> f64, start: [f64; 2], step: [f64; 2]) -> [f64; 2] {
    let mut s = [
        start,
        [start[0] + step[0], start[1]],
        [start[0], start[1] + step[1]],
    ];
    let mut fv = s.map(f);
    for _ in 0..2000 {
        // Order: best, middle, worst.
        let mut idx = [0usize, 1, 2];
        idx.sort_by(|&a, &b| fv[a].total_cmp(&fv[b]));
        s = idx.map(|i| s[i]);
        fv = idx.map(|i| fv[i]);
        let spread = (fv[2] - fv[0]).abs();
        let size = (s[2][0] - s[0][0]).abs().max((s[2][1] - s[0][1]).abs())
            + (s[1][0] - s[0][0]).abs().max((s[1][1] - s[0][1]).abs());
        if spread <= 1e-15 * fv[0].abs().max(1e-300) && size < 1e-12 {
            break;
        }
        if size < 1e-14 {
            break;
        }
        let c = [(s[0][0] + s[1][0]) / 2.0, (s[0][1] + s[1][1]) / 2.0];
        let at = |t: f64| [c[0] + t * (s[2][0] - c[0]), c[1] + t * (s[2][1] - c[1])];
        let r = at(-1.0);
        let fr = f(r);
        if fr < fv[0] {
            let e = at(-2.0);
            let fe = f(e);
            if fe < fr {
                s[2] = e;
                fv[2] = fe;
            } else {
                s[2] = r;
                fv[2] = fr;
            }
        } else if fr < fv[1] {
            s[2] = r;
            fv[2] = fr;
        } else {
            let (k, fk) = if fr < fv[2] {
                let k = at(-0.5);
                (k, f(k))
            } else {
                let k = at(0.5);
                (k, f(k))
            };
            if fk < fv[2].min(fr) {
                s[2] = k;
                fv[2] = fk;
            } else {
                for i in 1..3 {
                    s[i] = [(s[i][0] + s[0][0]) / 2.0, (s[i][1] + s[0][1]) / 2.0];
                    fv[i] = f(s[i]);
                }
            }
        }
    }
    let best = (0..3).min_by(|&a, &b| fv[a].total_cmp(&fv[b])).unwrap_or(0);
    s[best]
}

/// Fit the USL to `(N, throughput)` points. `None` with fewer than 3 usable points (N ≥ 1 and
/// throughput > 0, finite) or fewer than 3 distinct N.
pub fn fit_usl(points: &[(f64, f64)]) -> Option<UslFit> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(n, x)| n.is_finite() && x.is_finite() && n >= 1.0 && x > 0.0)
        .collect();
    let mut ns: Vec<f64> = pts.iter().map(|p| p.0).collect();
    ns.sort_by(f64::total_cmp);
    ns.dedup();
    if pts.len() < 3 || ns.len() < 3 {
        return None;
    }

    let obj = |p: [f64; 2]| profile(&pts, p[0] * p[0], p[1] * p[1]).1;
    let (s0, k0) = linearised(&pts);
    let mut best = [s0.sqrt(), k0.sqrt()];
    for start in [[s0.sqrt(), k0.sqrt()], [0.0, 0.0]] {
        let step = [
            (start[0] * 0.2).max(0.05),
            (start[1] * 0.2).max(0.05 / ns[ns.len() - 1].max(1.0)),
        ];
        let a = nelder_mead(&obj, start, step);
        let b = nelder_mead(&obj, a, [(a[0] * 0.1).max(1e-3), (a[1] * 0.1).max(1e-4)]);
        if obj(b) < obj(best) {
            best = b;
        }
    }
    let (mut sigma, mut kappa) = (best[0] * best[0], best[1] * best[1]);
    let sse = profile(&pts, sigma, kappa).1;
    // The 1e-20·Σx² floor (residuals of 1e-10 relative) lets exact data, whose sse is rounding
    // noise, snap too.
    let sxx: f64 = pts.iter().map(|p| p.1 * p.1).sum();
    let tol = |e: f64| e <= sse * (1.0 + 1e-9) + 1e-20 * sxx;
    if tol(profile(&pts, sigma, 0.0).1) {
        kappa = 0.0;
    }
    if tol(profile(&pts, 0.0, kappa).1) {
        sigma = 0.0;
    }
    let (lambda, sse) = profile(&pts, sigma, kappa);

    let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
    let sst: f64 = pts.iter().map(|p| (p.1 - mean).powi(2)).sum();
    let r2 = if sst > 0.0 {
        1.0 - sse / sst
    } else if sse <= 1e-12 * mean * mean {
        1.0
    } else {
        0.0
    };
    let peak_n = (kappa > 0.0 && sigma < 1.0).then(|| ((1.0 - sigma) / kappa).sqrt());
    let peak_x = peak_n.map(|n| usl(lambda, sigma, kappa, n));
    Some(UslFit {
        lambda,
        sigma,
        kappa,
        peak_n,
        peak_x,
        r2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    const NS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0];

    fn curve(lambda: f64, sigma: f64, kappa: f64, ns: &[f64]) -> Vec<(f64, f64)> {
        ns.iter()
            .map(|&n| (n, usl(lambda, sigma, kappa, n)))
            .collect()
    }

    #[test]
    fn recovers_exact_parameters() {
        for &(l, s, k) in &[
            (1000.0, 0.05, 0.001),
            (20_000.0, 0.3, 0.0002),
            (500.0, 0.0, 0.01),
        ] {
            let f = fit_usl(&curve(l, s, k, &NS)).unwrap();
            assert!((f.lambda / l - 1.0).abs() < 1e-4, "{f:?}");
            assert!((f.sigma - s).abs() < 1e-4, "{f:?}");
            assert!((f.kappa / k - 1.0).abs() < 1e-3, "{f:?}");
            assert!(f.r2 > 0.999_999, "{f:?}");
            let pn = ((1.0 - s) / k).sqrt();
            assert!((f.peak_n.unwrap() / pn - 1.0).abs() < 1e-3, "{f:?}");
            assert!((f.peak_x.unwrap() / usl(l, s, k, pn) - 1.0).abs() < 1e-4);
        }
    }

    #[test]
    fn amdahl_has_no_peak() {
        let f = fit_usl(&curve(1000.0, 0.1, 0.0, &NS)).unwrap();
        assert!((f.sigma - 0.1).abs() < 1e-4, "{f:?}");
        assert_eq!(f.kappa, 0.0, "{f:?}");
        assert_eq!(f.peak_n, None);
        assert_eq!(f.peak_x, None);
        // Linear scaling: both coefficients zero.
        let f = fit_usl(&curve(1000.0, 0.0, 0.0, &NS)).unwrap();
        assert_eq!((f.sigma, f.kappa), (0.0, 0.0), "{f:?}");
        assert!((f.lambda - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn without_a_single_session_point() {
        let f = fit_usl(&curve(1000.0, 0.05, 0.001, &NS[2..])).unwrap();
        assert!((f.sigma - 0.05).abs() < 1e-3, "{f:?}");
        assert!((f.kappa / 0.001 - 1.0).abs() < 1e-2, "{f:?}");
    }

    #[test]
    fn recovers_from_noisy_data() {
        let mut rng = SmallRng::seed_from_u64(42);
        let (l, s, k) = (8000.0, 0.08, 0.0015);
        let mut pts = Vec::new();
        for &n in &NS {
            for _ in 0..3 {
                let noise: f64 = rng.gen_range(-0.03..0.03);
                pts.push((n, usl(l, s, k, n) * (1.0 + noise)));
            }
        }
        let f = fit_usl(&pts).unwrap();
        assert!((f.lambda / l - 1.0).abs() < 0.05, "{f:?}");
        assert!((f.sigma - s).abs() < 0.02, "{f:?}");
        assert!((f.kappa / k - 1.0).abs() < 0.25, "{f:?}");
        let pn = ((1.0 - s) / k).sqrt();
        assert!((f.peak_n.unwrap() / pn - 1.0).abs() < 0.15, "{f:?}");
        assert!(f.r2 > 0.98 && f.r2 < 1.0, "{f:?}");
    }

    #[test]
    fn too_few_points() {
        assert!(fit_usl(&[]).is_none());
        assert!(fit_usl(&[(1.0, 100.0), (2.0, 190.0)]).is_none());
        // Three points but only two distinct N.
        assert!(fit_usl(&[(1.0, 100.0), (2.0, 190.0), (2.0, 185.0)]).is_none());
        // Unusable points are ignored.
        assert!(fit_usl(&[(1.0, 100.0), (2.0, 190.0), (4.0, 0.0), (0.0, 5.0)]).is_none());
        assert!(fit_usl(&[(1.0, 100.0), (2.0, 190.0), (4.0, f64::NAN)]).is_none());
    }
}
