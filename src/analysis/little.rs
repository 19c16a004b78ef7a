//! Little's law check: did the sessions really keep the configured number of I/Os in flight?
//!
//! Little's law says the average number of requests in a system equals throughput × time in the
//! system. For a run, the average number of I/Os actually in flight is
//! `Σ over ops (count × mean latency) / duration` — IOPS × mean latency for a single op; every
//! op (sync included) counts, since a session waiting for an fdatasync is busy with I/O too.
//! Compared with the configured concurrency (sessions × queue depth), the difference is the
//! share of the sessions' time spent *outside* the I/O: issuing, reaping, waiting for a CPU, or
//! (for a rate-limited run) idling. A large share means the figures describe the host as much as
//! the storage. A negative share means more I/O was in flight than configured (a mismatch in the
//! given concurrency, or ops overlapping within a session).

use super::positive;
pub use crate::results::analysis::LittleCheck;
use crate::results::RunResult;

/// Check Little's law for a run against its configured concurrency. `None` when the run has no
/// duration, no completed operations, or the concurrency is not positive.
pub fn littles_law(run: &RunResult, concurrency: f64) -> Option<LittleCheck> {
    if !positive(run.duration_s) || !positive(concurrency) {
        return None;
    }
    let busy_ns: f64 = run
        .ops
        .iter()
        .filter(|o| o.count > 0 && o.summary.mean_ns > 0.0)
        .map(|o| o.count as f64 * o.summary.mean_ns)
        .sum();
    if !positive(busy_ns) {
        return None;
    }
    let observed = busy_ns / 1e9 / run.duration_s;
    Some(LittleCheck {
        concurrency,
        observed,
        outside_share: 1.0 - observed / concurrency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::test_op as op;

    #[test]
    fn four_sessions_fully_busy_and_partly_busy() {
        // 4 sessions, 100 µs per read, 10 s: fully busy would be 400k reads.
        let mut run = RunResult {
            duration_s: 10.0,
            ops: vec![op("read", 400_000, 100_000.0)],
            ..Default::default()
        };
        let c = littles_law(&run, 4.0).unwrap();
        assert!((c.observed - 4.0).abs() < 1e-9, "{c:?}");
        assert!(c.outside_share.abs() < 1e-9);
        // Only 300k completed: a quarter of the time was spent outside the I/O.
        run.ops[0] = op("read", 300_000, 100_000.0);
        let c = littles_law(&run, 4.0).unwrap();
        assert!((c.observed - 3.0).abs() < 1e-9, "{c:?}");
        assert!((c.outside_share - 0.25).abs() < 1e-9);
    }

    #[test]
    fn sync_ops_count_as_time_in_io() {
        // One log writer: 1000 writes of 20 µs and 1000 fdatasyncs of 780 µs in 1 s.
        let run = RunResult {
            duration_s: 1.0,
            ops: vec![op("write", 1000, 20_000.0), op("sync", 1000, 780_000.0)],
            ..Default::default()
        };
        let c = littles_law(&run, 1.0).unwrap();
        assert!((c.observed - 0.8).abs() < 1e-9, "{c:?}");
        assert!((c.outside_share - 0.2).abs() < 1e-9);
    }

    #[test]
    fn none_without_data() {
        let run = RunResult {
            duration_s: 0.0,
            ops: vec![op("read", 10, 1000.0)],
            ..Default::default()
        };
        assert!(littles_law(&run, 1.0).is_none());
        let run = RunResult {
            duration_s: 1.0,
            ops: vec![],
            ..Default::default()
        };
        assert!(littles_law(&run, 1.0).is_none());
        let run = RunResult {
            duration_s: 1.0,
            ops: vec![op("read", 10, 1000.0)],
            ..Default::default()
        };
        assert!(littles_law(&run, 0.0).is_none());
        assert!(littles_law(&run, f64::NAN).is_none());
    }
}
