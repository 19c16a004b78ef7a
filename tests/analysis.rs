//! Analysis fed only by a results document read back from disk: a synthetic calibration whose
//! load curve follows a known Universal Scalability Law, and an ingested wait-event histogram.

use std::collections::BTreeMap;

use iolens::analysis::{analyse_run, describe, find_knee, fit_usl, littles_law};
use iolens::histogram::{new_histogram, record_ns};
use iolens::results::{
    BucketConvention, Calibration, CpuStats, CurvePoint, DeviceStats, Kind, OpResult, Results,
    RunResult,
};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, LogNormal};

const LAMBDA: f64 = 5_000.0;
const SIGMA: f64 = 0.04;
const KAPPA: f64 = 0.002;
/// Share of each session's time spent outside the I/O (issuing, reaping, thinking).
const OUTSIDE: f64 = 0.2;
const SESSIONS: [u32; 8] = [1, 2, 4, 6, 10, 16, 24, 32];
const SPREAD: f64 = 1.3;

fn usl(n: f64) -> f64 {
    LAMBDA * n / (1.0 + SIGMA * (n - 1.0) + KAPPA * n * (n - 1.0))
}

/// One calibration step of `n` sessions over 2 s: X = usl(n) reads/s, each session busy with
/// I/O (1 − OUTSIDE) of the time, so by Little's law the mean latency is n·(1 − OUTSIDE)/X.
fn step(n: u32, rng: &mut SmallRng) -> RunResult {
    let duration = 2.0;
    let x = usl(n as f64);
    let count = (x * duration).round() as u64;
    let mean_ns = n as f64 * (1.0 - OUTSIDE) / x * 1e9;
    let s = SPREAD.ln();
    let d = LogNormal::new((mean_ns).ln() - s * s / 2.0, s).unwrap();
    let mut h = new_histogram();
    for _ in 0..count {
        record_ns(&mut h, d.sample(rng).round() as u64);
    }
    RunResult {
        name: format!("randread 8k sessions={n}"),
        phase: "iops".into(),
        duration_s: duration,
        interval_s: 1.0,
        ops: vec![OpResult::new("read", &h, count * 8192, vec![])],
        cpu: Some(CpuStats {
            host_busy: 0.3 + 0.02 * n as f64,
            runq_us_per_io: 0.5,
            session_run_s: 0.4,
            us_per_io: 7.5,
            cpus: 2,
            ..Default::default()
        }),
        device: Some(DeviceStats {
            device: "vdb".into(),
            reads: count,
            read_bytes: count * 8192,
            read_await_us: mean_ns / 1e3 * 0.9,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn calibration_document(dir: &std::path::Path) -> Results {
    let mut rng = SmallRng::seed_from_u64(2024);
    let mut doc = Results::new(Kind::Calibrate, vec!["iolens".into(), "calibrate".into()]);
    let mut curve = Vec::new();
    for (i, &n) in SESSIONS.iter().enumerate() {
        let run = step(n, &mut rng);
        let s = &run.ops[0].summary;
        curve.push(CurvePoint {
            run: i,
            sessions: n,
            qd: 1,
            iops: run.iops(),
            mb_per_s: run.mb_per_s(),
            p50_ns: s.p50_ns,
            p99_ns: s.p99_ns,
            p999_ns: s.p999_ns,
            mean_ns: s.mean_ns,
            ..Default::default()
        });
        doc.runs.push(run);
    }
    doc.calibration = Some(Calibration {
        percentile: 99.0,
        max_latency_ns: 10_000_000,
        curve,
        ..Default::default()
    });
    let path = dir.join("calibrate.json");
    doc.write_file(&path).unwrap();
    Results::read_file(&path).unwrap()
}

#[test]
fn calibration_curve_knee_usl_and_little_from_a_results_file() {
    let dir = tempfile::tempdir().unwrap();
    let doc = calibration_document(dir.path());
    let cal = doc.calibration.as_ref().unwrap();

    // Knee: power X/R = X²/(n(1−OUTSIDE)) is largest where X²/n is; find that session count from
    // the model itself.
    let expected = *SESSIONS
        .iter()
        .max_by(|a, b| {
            let p = |n: u32| usl(n as f64).powi(2) / n as f64;
            p(**a).total_cmp(&p(**b))
        })
        .unwrap();
    assert_eq!(
        expected, 10,
        "model power: 4.22 at 10 sessions, 3.78 at 6, 3.70 at 16"
    );
    let knee = find_knee(&cal.curve).expect("the curve bends");
    assert_eq!(knee.sessions, expected, "{knee:?}");
    assert_eq!(knee.p99_ns, cal.curve[knee.index].p99_ns);

    // USL on (sessions, IOPS) recovers the model.
    let pts: Vec<(f64, f64)> = cal
        .curve
        .iter()
        .map(|p| (p.sessions as f64, p.iops))
        .collect();
    let fit = fit_usl(&pts).unwrap();
    assert!((fit.lambda / LAMBDA - 1.0).abs() < 0.01, "{fit:?}");
    assert!((fit.sigma - SIGMA).abs() < 0.005, "{fit:?}");
    assert!((fit.kappa / KAPPA - 1.0).abs() < 0.05, "{fit:?}");
    let peak = ((1.0 - SIGMA) / KAPPA).sqrt();
    assert!((fit.peak_n.unwrap() / peak - 1.0).abs() < 0.03, "{fit:?}");
    assert!(fit.r2 > 0.999, "{fit:?}");

    // Little's law: the sessions spent OUTSIDE of their time outside the I/O.
    for (run, p) in doc.runs.iter().zip(&cal.curve) {
        let c = littles_law(run, p.sessions as f64).unwrap();
        assert!(
            (c.outside_share - OUTSIDE).abs() < 0.02,
            "{}: {c:?}",
            run.name
        );
    }

    // Per-run analysis: one mode per step, storage-bound (device 90 % of latency), not CPU-bound.
    for run in &doc.runs {
        let a = analyse_run(run);
        assert_eq!(a.modes.len(), 1);
        let (op, modes) = (&a.modes[0].op, &a.modes[0].modes);
        assert_eq!(op, "read");
        assert_eq!(modes.len(), 1, "{}: {}", run.name, describe(modes));
        let median = run.ops[0].summary.mean_ns / (SPREAD.ln().powi(2) / 2.0).exp();
        assert!(
            (modes[0].centre_ns / median - 1.0).abs() < 0.15,
            "{modes:?}"
        );
        // Run-queue delay is tiny, so a busy host (from 28 sessions on) is only an info.
        let kinds: Vec<&str> = a.verdicts.iter().map(|v| v.kind.as_str()).collect();
        if run.cpu.as_ref().unwrap().host_busy > 0.85 {
            assert_eq!(kinds, ["cpu-busy", "storage-bound"], "{}", run.name);
        } else {
            assert_eq!(kinds, ["storage-bound"], "{}", run.name);
        }
    }
}

#[test]
fn cache_tier_and_cpu_pressure_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    // Buffered reads: 60 % page-cache hits around 2 µs, 40 % from the device around 150 µs.
    let cache = LogNormal::new(2_000f64.ln(), 1.2f64.ln()).unwrap();
    let dev = LogNormal::new(150_000f64.ln(), 1.3f64.ln()).unwrap();
    let mut h = new_histogram();
    for i in 0..50_000 {
        let d = if i % 5 < 3 { &cache } else { &dev };
        record_ns(&mut h, d.sample(&mut rng) as u64);
    }
    let mean_ns = h.mean();
    let mut doc = Results::new(Kind::Run, vec![]);
    doc.runs.push(RunResult {
        name: "buffered randread".into(),
        duration_s: 5.0,
        interval_s: 1.0,
        ops: vec![OpResult::new("read", &h, 50_000 * 8192, vec![])],
        cpu: Some(CpuStats {
            host_busy: 0.97,
            runq_us_per_io: mean_ns / 1e3 * 0.25,
            session_run_s: 3.0,
            cpus: 2,
            ..Default::default()
        }),
        device: Some(DeviceStats {
            device: "vdb".into(),
            reads: 20_000,
            read_bytes: 20_000 * 8192,
            read_await_us: 140.0,
            ..Default::default()
        }),
        ..Default::default()
    });
    let path = dir.path().join("run.json");
    doc.write_file(&path).unwrap();
    let back = Results::read_file(&path).unwrap();
    let a = analyse_run(&back.runs[0]);
    let modes = &a.modes[0].modes;
    assert_eq!(modes.len(), 2, "{}", describe(modes));
    assert!((modes[0].share - 0.6).abs() < 0.02 && (modes[1].share - 0.4).abs() < 0.02);
    assert!(
        (modes[0].centre_ns / 2_000.0 - 1.0).abs() < 0.15,
        "{modes:?}"
    );
    assert!(
        (modes[1].centre_ns / 150_000.0 - 1.0).abs() < 0.15,
        "{modes:?}"
    );
    let kinds: Vec<&str> = a.verdicts.iter().map(|v| v.kind.as_str()).collect();
    // 40 % of the bytes reached the device: below the 50 % cache threshold.
    assert_eq!(kinds, ["cpu-bound", "page-cache"]);
    assert!((a.verdicts[0].figures["runq_share"] - 0.25).abs() < 1e-9);
    // The analysis itself serialises for the results document.
    let v = serde_json::to_value(&a).unwrap();
    assert_eq!(v["modes"][0]["op"], "read");
    assert_eq!(v["verdicts"][1]["kind"], "page-cache");
}

#[test]
fn ingested_oracle_event_histogram_has_two_tiers() {
    // An Oracle "db file sequential read" event histogram: buckets labelled by their upper
    // bound in µs (v holds waits in [v/2, v)): array-cache hits around 64–128 µs and disk reads
    // around 4–16 ms.
    let buckets: BTreeMap<u64, u64> = [
        (32, 40),
        (64, 2_100),
        (128, 9_800),
        (256, 1_900),
        (512, 300),
        (1_024, 80),
        (2_048, 150),
        (4_096, 1_400),
        (8_192, 5_200),
        (16_384, 2_300),
        (32_768, 260),
        (65_536, 30),
    ]
    .into_iter()
    .collect();
    let mut h = new_histogram();
    for (&upper_us, &count) in &buckets {
        // Record at the geometric middle of [v/2, v).
        let ns = (upper_us as f64 * 1e3 / std::f64::consts::SQRT_2) as u64;
        h.record_n(ns, count).unwrap();
    }
    let mut op = OpResult::new("db file sequential read", &h, 0, vec![]);
    op.bucket_convention = BucketConvention::UpperBound;
    let run = RunResult {
        name: "AWR event histogram".into(),
        phase: "ingest".into(),
        duration_s: 3600.0,
        ops: vec![op],
        ..Default::default()
    };
    let a = analyse_run(&run);
    let modes = &a.modes[0].modes;
    assert_eq!(modes.len(), 2, "{}", describe(modes));
    let total: u64 = buckets.values().sum();
    let fast: u64 = buckets.range(..=1_024).map(|(_, c)| c).sum();
    assert!(
        (modes[0].share - fast as f64 / total as f64).abs() < 0.03,
        "{modes:?}"
    );
    // Centres within a bucket of the fullest buckets (90 µs and 5.8 ms middles).
    assert!(
        modes[0].centre_ns > 45e3 && modes[0].centre_ns < 181e3,
        "{modes:?}"
    );
    assert!(
        modes[1].centre_ns > 2.9e6 && modes[1].centre_ns < 11.6e6,
        "{modes:?}"
    );
    assert!(a.verdicts.is_empty());
}

fn lognormal_mixture(
    parts: &[(f64, f64, f64)],
    n: usize,
    seed: u64,
) -> hdrhistogram::Histogram<u64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut h = new_histogram();
    for &(median, spread, share) in parts {
        let d = LogNormal::new(median.ln(), f64::ln(spread)).unwrap();
        for _ in 0..(n as f64 * share).round() as usize {
            record_ns(&mut h, d.sample(&mut rng).round() as u64);
        }
    }
    h
}

#[test]
fn mode_count_sweep() {
    use iolens::analysis::find_modes;
    // Never split one log-normal, whatever its spread or sample size.
    for n in [50, 500, 20_000] {
        for spread in [1.1, 1.3, 2.0, 3.0] {
            for seed in 0..8 {
                let m = find_modes(&lognormal_mixture(&[(100_000.0, spread, 1.0)], n, seed));
                assert_eq!(
                    m.len(),
                    1,
                    "n={n} spread={spread} seed={seed}: {}",
                    describe(&m)
                );
            }
        }
    }
    // Never merge two tiers a factor ≥ 3 apart holding ≥ 20 % each, from 1000 values on; find
    // them a factor 2 apart at 50/50 from 20k values (3.1 sd apart at spread 1.25).
    for (n, ratio, share) in [
        (1_000, 3.0, 0.2),
        (1_000, 3.0, 0.5),
        (1_000, 10.0, 0.2),
        (20_000, 3.0, 0.05),
        (20_000, 2.0, 0.5),
        (20_000, 40.0, 0.05),
    ] {
        for seed in 0..8 {
            let h = lognormal_mixture(
                &[
                    (100_000.0, 1.25, share),
                    (100_000.0 * ratio, 1.25, 1.0 - share),
                ],
                n,
                seed,
            );
            let m = find_modes(&h);
            assert_eq!(
                m.len(),
                2,
                "n={n} ratio={ratio} share={share}: {}",
                describe(&m)
            );
            assert!((m[0].share - share).abs() < 0.03, "{}", describe(&m));
            assert!(
                (m[1].centre_ns / (100_000.0 * ratio) - 1.0).abs() < 0.15,
                "{m:?}"
            );
        }
    }
}

#[test]
fn stored_analysis_of_a_calibration_is_what_show_and_report_print() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = calibration_document(dir.path());
    // A file without stored analysis (as version 1 wrote it) is analysed on reading...
    let text = iolens::render::terminal::render(
        &doc,
        &iolens::render::TermStyle {
            color: false,
            width: 200,
        },
        None,
    )
    .unwrap();
    // ...and the stored analysis is the same.
    let an = iolens::analysis::analyse(&doc);
    doc.analysis = Some(an.clone());
    let ca = an.calibration.as_ref().unwrap();
    let usl = ca.usl.as_ref().unwrap();
    assert!((usl.sigma - SIGMA).abs() < 0.005, "{usl:?}");
    assert_eq!(ca.knee.as_ref().unwrap().sessions, 10);
    assert_eq!(ca.little.len(), SESSIONS.len());
    let line = format!(
        "USL fit: σ={:.4} κ={:.5} (R²={:.3}); predicted peak",
        usl.sigma, usl.kappa, usl.r2
    );
    let html = iolens::render::html::report(&doc, "calibrate.json").unwrap();
    for (what, out) in [("show", &text), ("report", &html)] {
        assert!(out.contains(&line), "{what} lacks {line:?}");
        assert!(out.contains("Knee: 10 sessions"), "{what}: knee");
        assert!(
            out.contains("Little&#x27;s law") || out.contains("Little's law"),
            "{what}: Little"
        );
    }
}

/// Issue 27: a read op of `count` reads of mean `mean_ns` (the verdicts read the mean).
fn reads(count: u64, mean_ns: f64) -> OpResult {
    OpResult {
        op: "read".into(),
        count,
        bytes: count * 8192,
        summary: iolens::results::LatencySummary {
            count,
            mean_ns,
            p50_ns: mean_ns as u64,
            ..Default::default()
        },
        errors: 0,
        hist: Default::default(),
        intervals: Vec::new(),
        bucket_convention: BucketConvention::Exact,
        bucket_edges_ns: Vec::new(),
    }
}

/// `disk` did `n` reads of `await_us` each, `in_flight` of them in it on average.
fn disk(name: &str, n: u64, await_us: f64, in_flight: f64) -> DeviceStats {
    DeviceStats {
        device: name.into(),
        reads: n,
        read_bytes: n * 8192,
        read_await_us: await_us,
        avg_in_flight: in_flight,
        ..Default::default()
    }
}

/// A full request queue (issue 27): reads 16 ms in the application, 4 ms in the disk, with the
/// disk's queue of 4 held full: the verdict says the time was queued in the host above the
/// block layer for a place in that queue. The same reads with a queue of 128 holding as many
/// are not called a full queue; two hardware queues of 4 are half full; a storage-bound run
/// says nothing of its queue.
#[test]
fn a_full_request_queue_is_named_as_the_hosts_wait_and_a_deep_one_is_not() {
    use iolens::analysis::verdicts::{host_queue_verdict, host_queue_verdict_with, RequestQueue};
    use iolens::analysis::VerdictKind;
    let run = |app_ns: f64| RunResult {
        duration_s: 10.0,
        ops: vec![reads(100_000, app_ns)],
        device: Some(disk("loop7", 100_000, 4_000.0, 3.9)),
        ..Default::default()
    };
    let r = run(16_000_000.0);
    let q = |n, hw| RequestQueue {
        nr_requests: n,
        hw_queues: hw,
    };
    let v = host_queue_verdict_with(&r, Some(q(4, 1))).unwrap();
    assert_eq!(v.kind, VerdictKind::HostQueueing);
    assert_eq!(v.figures["queue_full"], 1.0);
    assert_eq!(v.figures["nr_requests"], 4.0);
    assert!(
        v.message.contains(
            "its request queue was full (3.9 requests in it on average, of nr_requests 4)"
        ) && v.message.contains(
            "75 % of the time (12 ms per read) was queued in the host above the block layer"
        ),
        "{}",
        v.message
    );
    let v = host_queue_verdict_with(&r, Some(q(128, 1))).unwrap();
    assert_eq!(v.kind, VerdictKind::HostQueueing);
    assert_eq!(v.figures["queue_full"], 0.0);
    assert!(
        v.message.contains(
            "its request queue was not full (3.9 requests in it on average, of nr_requests 128)"
        ) && !v.message.contains("waiting for a place"),
        "{}",
        v.message
    );
    let v = host_queue_verdict_with(&r, Some(q(4, 2))).unwrap();
    assert_eq!(v.figures["queue_full"], 0.0, "{}", v.message);
    assert!(v
        .message
        .contains("of nr_requests 4 on each of its 2 hardware queues"));
    // Unknown queue: the verdict as before, without a word on it.
    let v = host_queue_verdict(&r).unwrap();
    assert!(!v.message.contains("request queue") && !v.figures.contains_key("queue_full"));
    // Storage-bound: the queue is not the host's wait.
    let v = host_queue_verdict_with(&run(4_100_000.0), Some(q(4, 1))).unwrap();
    assert_eq!(v.kind, VerdictKind::StorageBound);
    assert!(!v.message.contains("request queue"), "{}", v.message);
}

/// A run over two targets on different disks has no one disk view: each target's reads are set
/// beside its own disk, named by the target, with its own request queue (issue 27).
#[test]
fn a_run_over_two_disks_gets_a_host_verdict_per_target() {
    use iolens::analysis::verdicts::run_verdicts_with;
    use iolens::analysis::VerdictKind;
    use iolens::results::{TargetInfo, TargetRun};
    let target = |path: &str, name: &str, nr: u32, app_ns: f64| TargetRun {
        target: TargetInfo {
            path: path.into(),
            nr_requests: Some(nr),
            ..Default::default()
        },
        ops: vec![reads(50_000, app_ns)],
        device: Some(disk(name, 50_000, 4_000.0, 3.9)),
        ..Default::default()
    };
    let mut r = RunResult {
        duration_s: 10.0,
        ops: vec![reads(100_000, 10_000_000.0)],
        targets: vec![
            target("/dev/loop7", "loop7", 4, 16_000_000.0),
            target("/dev/loop8", "loop8", 128, 4_100_000.0),
        ],
        ..Default::default()
    };
    let v = run_verdicts_with(&r, None);
    assert_eq!(v.len(), 2, "{v:#?}");
    assert_eq!(v[0].kind, VerdictKind::HostQueueing);
    assert!(
        v[0].message.starts_with("target /dev/loop7: ")
            && v[0].message.contains("its request queue was full"),
        "{}",
        v[0].message
    );
    assert_eq!(v[1].kind, VerdictKind::StorageBound);
    assert!(
        v[1].message
            .starts_with("target /dev/loop8: loop8 accounts"),
        "{}",
        v[1].message
    );
    // One disk view (targets on one disk): the run's verdict, not one per target.
    r.device = Some(disk("loop7", 100_000, 4_000.0, 3.9));
    let v = run_verdicts_with(&r, None);
    assert_eq!(v.len(), 1, "{v:#?}");
}
