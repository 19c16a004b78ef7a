//! Knee of the load curve: the load beyond which more sessions buy mostly queueing.
//!
//! # Method: maximum power
//! Kleinrock's *power* of an operating point is throughput divided by response time,
//! `P = IOPS / mean latency`. While the storage still has idle parallelism, adding sessions raises
//! IOPS at nearly constant latency, so power rises; once it saturates, IOPS stays flat while
//! latency grows with the queue (Little's law), so power falls. The maximum of power is the
//! optimal operating point of a closed queueing system and the standard definition of the knee:
//! for `X(N) = Xmax·N/(N + N*)` it is exactly `N*`, and for `X(N) = min(N/R0, Xmax)` it is the
//! concurrency where the two asymptotes meet.
//!
//! Mean latency is used because it is what Little's law and power are defined on; when a
//! producer left it at 0, the median and then p99 are used instead (the method string says so).
//! At least [`MIN_POINTS`] points with positive IOPS and latency are needed. When power still
//! rises at the last point, the curve has not bent yet and there is no knee (`None`): the
//! calibration did not push far enough. A maximum at the first point is a knee at the lowest
//! load (adding sessions only added queueing).

pub use crate::results::analysis::Knee;
use crate::results::CurvePoint;

/// Fewest usable curve points to look for a knee.
pub const MIN_POINTS: usize = 3;

/// Find the knee of a load curve (points in order of increasing load). See the module docs.
pub fn find_knee(curve: &[CurvePoint]) -> Option<Knee> {
    // Pick the latency measure available on every point.
    type Lat = fn(&CurvePoint) -> f64;
    let measures: [(&str, Lat); 3] = [
        ("mean latency", |p| p.mean_ns),
        ("median latency", |p| p.p50_ns as f64),
        ("p99 latency", |p| p.p99_ns as f64),
    ];
    let usable = |p: &CurvePoint, lat: Lat| p.iops > 0.0 && p.iops.is_finite() && lat(p) > 0.0;
    let (name, lat) = measures
        .into_iter()
        .find(|(_, lat)| curve.iter().filter(|p| usable(p, *lat)).count() >= MIN_POINTS)?;

    let pts: Vec<(usize, f64)> = curve
        .iter()
        .enumerate()
        .filter(|(_, p)| usable(p, lat))
        .map(|(i, p)| (i, p.iops / lat(p)))
        .collect();
    let best = pts
        .iter()
        .enumerate()
        .max_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
        .map(|(k, _)| k)?;
    if best == pts.len() - 1 {
        return None;
    }
    let index = pts[best].0;
    let p = &curve[index];
    Some(Knee {
        index,
        sessions: p.sessions,
        iops: p.iops,
        p99_ns: p.p99_ns,
        method: format!("max power (IOPS / {name})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A closed system with `n` sessions: X = xmax·n/(n + nstar), R = n/X.
    fn smooth_curve(sessions: &[u32], xmax: f64, nstar: f64) -> Vec<CurvePoint> {
        sessions
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let x = xmax * n as f64 / (n as f64 + nstar);
                let r = n as f64 / x * 1e9;
                CurvePoint {
                    run: i,
                    sessions: n,
                    qd: 1,
                    iops: x,
                    mean_ns: r,
                    p50_ns: (r * 0.9) as u64,
                    p99_ns: (r * 3.0) as u64,
                    ..Default::default()
                }
            })
            .collect()
    }

    #[test]
    fn knee_of_smooth_saturation_curve_is_nstar() {
        let s = [1, 2, 4, 6, 8, 10, 12, 16, 24, 32, 48, 64];
        let c = smooth_curve(&s, 50_000.0, 8.0);
        let k = find_knee(&c).unwrap();
        assert_eq!(k.sessions, 8);
        assert_eq!(k.index, 4);
        assert_eq!(k.iops, c[4].iops);
        assert_eq!(k.p99_ns, c[4].p99_ns);
        assert_eq!(k.method, "max power (IOPS / mean latency)");
        let c = smooth_curve(&s, 50_000.0, 24.0);
        assert_eq!(find_knee(&c).unwrap().sessions, 24);
    }

    #[test]
    fn knee_of_hockey_stick() {
        // R0 = 100 µs, Xmax = 40k IOPS: asymptotes meet at N = 4.
        let pts: Vec<CurvePoint> = [1u32, 2, 3, 4, 5, 6, 8, 12, 16]
            .iter()
            .map(|&n| {
                let x = (n as f64 / 100e-6).min(40_000.0);
                CurvePoint {
                    sessions: n,
                    iops: x,
                    mean_ns: n as f64 / x * 1e9,
                    ..Default::default()
                }
            })
            .collect();
        assert_eq!(find_knee(&pts).unwrap().sessions, 4);
    }

    #[test]
    fn falls_back_to_median_when_mean_missing() {
        let mut c = smooth_curve(&[1, 2, 4, 8, 16, 32], 10_000.0, 4.0);
        for p in &mut c {
            p.mean_ns = 0.0;
        }
        let k = find_knee(&c).unwrap();
        assert_eq!(k.sessions, 4);
        assert_eq!(k.method, "max power (IOPS / median latency)");
    }

    #[test]
    fn no_knee_when_still_scaling_or_too_short() {
        // Still linear: latency constant, power rising to the end.
        let c = smooth_curve(&[1, 2, 4, 8], 1e6, 1e4);
        assert!(find_knee(&c).is_none());
        let c = smooth_curve(&[1, 64], 10_000.0, 4.0);
        assert!(find_knee(&c).is_none());
        assert!(find_knee(&[]).is_none());
        // Points without latency are not usable.
        let mut c = smooth_curve(&[1, 2, 4, 8, 16], 10_000.0, 4.0);
        for p in c.iter_mut().skip(2) {
            p.mean_ns = 0.0;
            p.p50_ns = 0;
            p.p99_ns = 0;
        }
        assert!(find_knee(&c).is_none());
    }
}
