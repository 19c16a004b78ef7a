//! Synthetic evidence for tests, demos and benchmarks: a producer, like the readers and the
//! engine, but of made-up data. This file makes results files (`iolens dev-synth`, hidden);
//! `trace.rs` writes Oracle extended SQL traces (`iolens gen-trace`, hidden).
//!
//! Synthetic results files for tests, demos and the report benchmark. Latencies are drawn from seeded log-normal mixtures so the output is repeatable:
//! reads are bimodal (a cache tier near 100 µs, a slow tier near 4 ms), writes unimodal, with a
//! burst of slow I/O in the middle of the run; calibrations get a load curve whose latency
//! climbs once the "device" saturates. Every document says it is synthetic in its warnings.

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal};

mod trace;
pub use trace::write_synthetic_trace;

use crate::histogram::{new_histogram, record_ns};
use crate::results::{
    Calibration, CpuStats, CurvePoint, DeviceStats, Environment, Hist, Interval, Kind, OpResult,
    Results, RunResult, TargetInfo,
};

/// A component of a latency mixture: weight, median ns, log-space sigma.
type Component = (f64, f64, f64);

fn sample_mixture(rng: &mut SmallRng, mix: &[Component], h: &mut Histogram<u64>, n: usize) {
    let total: f64 = mix.iter().map(|c| c.0).sum();
    for _ in 0..n {
        let mut u = rng.gen::<f64>() * total;
        let mut pick = mix[mix.len() - 1];
        for c in mix {
            if u < c.0 {
                pick = *c;
                break;
            }
            u -= c.0;
        }
        let d = LogNormal::new(pick.1.ln(), pick.2).expect("valid log-normal");
        record_ns(h, d.sample(rng) as u64);
    }
}

/// Build one op with `seconds / interval_s` intervals drawn from `mix_at(t)`.
fn synth_op(
    rng: &mut SmallRng,
    name: &str,
    seconds: usize,
    interval_s: f64,
    samples: usize,
    bytes_per_op: u64,
    mix_at: &dyn Fn(f64) -> Vec<Component>,
) -> OpResult {
    let n = ((seconds as f64) / interval_s).ceil() as usize;
    let mut total = new_histogram();
    let mut intervals = Vec::with_capacity(n);
    for i in 0..n {
        let t = i as f64 * interval_s;
        let mut h = new_histogram();
        sample_mixture(rng, &mix_at(t), &mut h, samples);
        total.add(&h).expect("same bounds");
        intervals.push(Interval {
            start_s: t,
            duration_s: interval_s.min(seconds as f64 - t),
            count: h.len(),
            bytes: h.len() * bytes_per_op,
            hist: Hist::encode(&h),
        });
    }
    OpResult::new(name, &total, total.len() * bytes_per_op, intervals)
}

fn environment() -> Environment {
    Environment {
        hostname: "synthetic-host".into(),
        kernel: "6.1.0-synthetic".into(),
        cpu_model: "Synthetic CPU @ 2.0GHz".into(),
        cpus: 2,
        memory_bytes: 24 << 30,
        target: Some(TargetInfo {
            path: "/data/iolens-scratch".into(),
            kind: crate::results::StorageKind::Scratch,
            size_bytes: 8 << 30,
            filesystem: "xfs".into(),
            mount_point: "/data".into(),
            mount_options: "rw,noatime".into(),
            device: "nvme0n1".into(),
            device_model: "Synthetic NVMe".into(),
            rotational: Some(false),
            scheduler: "none".into(),
            schedulers: vec!["none".into(), "mq-deadline".into()],
            logical_block_size: 512,
            physical_block_size: 4096,
            nr_requests: Some(1023),
            max_sectors_kb: Some(128),
            read_ahead_kb: Some(128),
            link_mb_per_s: None,
            driver: "nvme".into(),
        }),
    }
}

fn cpu_for(count: u64, seconds: f64) -> CpuStats {
    let us = 7.5;
    CpuStats {
        user_s: count as f64 * 2.0e-6,
        sys_s: count as f64 * 5.5e-6,
        us_per_io: us,
        user_us_per_io: 2.0,
        sys_us_per_io: 5.5,
        host_busy: 0.45,
        host_iowait: 0.03,
        cpus: 2,
        runq_delay_s: count as f64 * 0.4e-6,
        runq_us_per_io: 0.4,
        session_run_s: seconds * 0.4,
    }
}

/// A synthetic `run` document of `seconds` 1-second intervals with default sample counts.
pub fn run_results(seconds: usize, interval_s: f64, seed: u64) -> Results {
    run_results_with(seconds, interval_s, 300, seed)
}

/// A synthetic `run` document: ops `read` (bimodal), `write` and `sync`.
pub fn run_results_with(seconds: usize, interval_s: f64, samples: usize, seed: u64) -> Results {
    let mut rng = SmallRng::seed_from_u64(seed);
    let dur = seconds as f64;
    let burst = move |t: f64| t >= dur * 0.6 && t < dur * 0.7;
    let read = synth_op(&mut rng, "read", seconds, interval_s, samples, 8192, &|t| {
        let slow = if burst(t) { 0.5 } else { 0.2 };
        vec![(1.0 - slow, 100_000.0, 0.25), (slow, 4_000_000.0, 0.3)]
    });
    let write = synth_op(
        &mut rng,
        "write",
        seconds,
        interval_s,
        samples / 4 + 1,
        8192,
        &|t| vec![(1.0, if burst(t) { 900_000.0 } else { 300_000.0 }, 0.35)],
    );
    let sync = synth_op(
        &mut rng,
        "sync",
        seconds,
        interval_s,
        samples / 10 + 1,
        0,
        &|_| vec![(1.0, 1_200_000.0, 0.2)],
    );
    let ops = vec![read, write, sync];
    let count: u64 = ops.iter().map(|o| o.count).sum();
    let mut r = Results::new(Kind::Run, vec!["iolens".into(), "dev-synth".into()]);
    r.environment = environment();
    let mut run = RunResult {
        name: "randrw 8k sessions=4 (synthetic)".into(),
        phase: "run".into(),
        spec: crate::results::Spec::of(serde_json::json!({
            "pattern": "random", "block_size": 8192, "read_pct": 80, "sessions": 4,
            "engine": "sync", "direct": true, "duration_s": dur, "target": "/data/iolens-scratch"
        }))
        .ok()
        .flatten(),
        started: "2025-01-01T00:00:00Z".into(),
        duration_s: dur,
        interval_s,
        warmup_s: 0.0,
        ops,
        cpu: Some(cpu_for(count, dur)),
        device: Some(DeviceStats {
            device: "nvme0n1".into(),
            reads: count,
            writes: 0,
            read_bytes: count * 8192,
            write_bytes: 0,
            iops: count as f64 / dur.max(1.0),
            mb_per_s: count as f64 * 8192.0 / dur.max(1.0) / 1e6,
            read_await_us: 700.0,
            write_await_us: 250.0,
            util: 0.93,
            avg_in_flight: 3.4,
        }),
        ..RunResult::default()
    };
    run.warnings
        .push("synthetic data, not a measurement".into());
    r.runs.push(run);
    r.warnings
        .push("this results file was generated by iolens dev-synth".into());
    r
}

/// A synthetic `calibrate` document: `steps` load steps (sessions 1, 2, 4, ...) of random
/// reads whose latency climbs past saturation, with a 1 ms p99 target.
pub fn calibration_results(steps: usize, seconds: usize, samples: usize, seed: u64) -> Results {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut r = Results::new(Kind::Calibrate, vec!["iolens".into(), "dev-synth".into()]);
    r.environment = environment();
    let target = 1_000_000u64;
    let mut curve = Vec::new();
    let capacity = 60_000.0;
    for s in 0..steps {
        let sessions = 1u32 << s;
        // Offered load per session 8k IOPS; latency grows as utilisation approaches 1.
        let offered = sessions as f64 * 8_000.0;
        let util = (offered / capacity).min(0.98);
        let iops = offered.min(capacity * 0.98);
        let median = 110_000.0 / (1.0 - util).max(0.02).sqrt();
        // Samples per second in proportion to the achieved IOPS, so the curve's IOPS axis is
        // the document's own count / duration.
        let n = ((samples as f64 * iops / 8_000.0) as usize).max(10);
        let op = synth_op(&mut rng, "read", seconds, 1.0, n, 8192, &|_| {
            vec![(0.97, median, 0.25 + util * 0.2), (0.03, median * 6.0, 0.3)]
        });
        let h = op.hist.decode().expect("own encoding");
        let run = RunResult {
            name: format!("randread 8k sessions={sessions}"),
            phase: "curve".into(),
            spec: crate::results::Spec::of(serde_json::json!({"pattern": "random", "block_size": 8192, "sessions": sessions, "read_pct": 100}))
                .ok()
                .flatten(),
            started: format!("2025-01-01T00:{:02}:00Z", s),
            duration_s: seconds as f64,
            interval_s: 1.0,
            ops: vec![op],
            cpu: Some(cpu_for(h.len(), seconds as f64)),
            ..RunResult::default()
        };
        curve.push(CurvePoint {
            run: s,
            sessions,
            qd: 1,
            iops: run.iops(),
            mb_per_s: run.mb_per_s(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            mean_ns: h.mean(),
            cpu_us_per_io: 7.5,
            runq_us_per_io: 0.4 + s as f64 * 0.2,
            device_await_us: median / 1e3 * 0.9,
            device_in_flight: None,
        });
        r.runs.push(run);
    }
    let best = curve
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p99_ns <= target)
        .max_by(|a, b| a.1.iops.total_cmp(&b.1.iops))
        .map(|(i, _)| i);
    r.calibration = Some(Calibration {
        percentile: 99.0,
        max_latency_ns: target,
        max_iops: best.map(|i| curve[i].iops),
        max_iops_point: best,
        curve,
        max_mbps: Some(1450.0),
        max_pmbps: Some(610.0),
        overhead_s: 0.8,
        budget_s: (steps * seconds) as f64 + 1.0,
        ..Calibration::default()
    });
    r.warnings
        .push("this results file was generated by iolens dev-synth".into());
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_run_is_consistent_and_repeatable() {
        let a = run_results(10, 1.0, 3);
        let b = run_results(10, 1.0, 3);
        assert!(a.runs == b.runs, "same seed, same document");
        let op = &a.runs[0].ops[0];
        assert_eq!(op.intervals.len(), 10);
        assert_eq!(op.intervals.iter().map(|i| i.count).sum::<u64>(), op.count);
        // Round trip through JSON.
        let back = Results::from_json(&a.to_json().unwrap()).unwrap();
        assert!(back.runs[0].ops[0].intervals == op.intervals);
    }

    #[test]
    fn synthetic_calibration_has_curve_and_target() {
        let r = calibration_results(6, 2, 200, 1);
        let c = r.calibration.as_ref().unwrap();
        assert_eq!(c.curve.len(), 6);
        assert!(c.curve.last().unwrap().p99_ns > c.curve[0].p99_ns * 2);
        let best = c.max_iops_point.unwrap();
        assert!(c.curve[best].p99_ns <= c.max_latency_ns);
    }
}
