//! Which point of a load curve is the headline "max IOPS at the latency target": the most IOPS
//! among the points whose latency at the target's percentile is at most the target, the fewest
//! sessions among equal IOPS. A calibration's ramp ([`super::ramp::Ramp`]) asks it step by
//! step as it measures; a cluster's merged calibration asks it of the merged curve.

/// Index of the point of `points` (sessions, IOPS, latency in ns at the target's percentile)
/// with the most IOPS among those at most `target_ns`; the fewest sessions among equal IOPS.
/// `None` when no point met the target.
pub fn best_at_target(points: &[(u32, f64, u64)], target_ns: u64) -> Option<usize> {
    best_of(points.iter().map(|p| (p.0, p.1, p.2 <= target_ns)))
}

/// Index of the point of `points` (sessions, IOPS, whether it met the target) with the most
/// IOPS among those that met it; the fewest sessions among equal IOPS. The one rule behind
/// [`best_at_target`] and the calibration ramp's best step ([`super::ramp::Ramp::best`]).
pub fn best_of(points: impl Iterator<Item = (u32, f64, bool)>) -> Option<usize> {
    points
        .enumerate()
        .filter(|(_, p)| p.2)
        .max_by(|(_, a), (_, b)| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_iops_that_met_the_target_and_no_point_that_missed_it() {
        // 8 sessions give the most IOPS but miss 1 ms: the 4-session point is the answer.
        let curve = [
            (1, 1_000.0, 200_000),
            (2, 1_900.0, 400_000),
            (4, 3_500.0, 900_000),
            (8, 4_000.0, 2_500_000),
        ];
        assert_eq!(best_at_target(&curve, 1_000_000), Some(2));
        // The target exactly met counts; a looser target lets 8 sessions win.
        assert_eq!(best_at_target(&curve, 900_000), Some(2));
        assert_eq!(best_at_target(&curve, 2_500_000), Some(3));
        // No point met it: there is no answer, not the least bad point.
        assert_eq!(best_at_target(&curve, 100_000), None);
        assert_eq!(best_at_target(&[], 1_000_000), None);
    }

    #[test]
    fn equal_iops_go_to_the_fewest_sessions() {
        let curve = [
            (8, 3_000.0, 500_000),
            (4, 3_000.0, 400_000),
            (16, 2_000.0, 1),
        ];
        assert_eq!(best_at_target(&curve, 1_000_000), Some(1));
    }
}
