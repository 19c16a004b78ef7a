//! `iolens plan` on LUNs with a known queue: loop devices over iolens scratch files served by a
//! FUSE daemon that sleeps a fixed delay per read (`common::slowdev`: the array's flat service
//! time), each loop device's queue lowered to 4 requests (`nr_requests`, its tags with scheduler
//! none): one such "LUN" holds at most 4 reads in flight, as a 30-deep LUN queue holds 30. So
//! one LUN's IOPS are 4 ÷ delay whatever the sessions, and its latency grows with them (seed
//! 001's shape); more LUNs relieve it. `plan` from the 1-LUN calibration predicts the IOPS at 2
//! and 4 LUNs, and `--verify` runs the plan.
//!
//! Root only (loop devices, FUSE, SCHED_FIFO): skipped with a note otherwise, except under CI.
//! The FUSE daemons and iolens run SCHED_FIFO so that the sleeps and wake-ups keep time on a busy
//! 2-CPU host; every figure compared is a rate over seconds of I/O.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::slowdev::SlowDevice;
use common::{iolens_fifo as iolens, ok};
use serde_json::Value;

/// Each read's delay: the LUN's service time.
const DELAY: Duration = Duration::from_millis(4);
/// Each LUN's queue.
const QUEUE: u32 = 4;

fn read(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The tests with slow LUNs run one at a time: each one's FIFO daemons and sessions would
/// otherwise add their wake-ups to the others' service times on 2 CPUs.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `n` LUNs: scratch files iolens creates, each behind a slow loop device of queue `QUEUE`.
fn luns(dir: &Path, n: usize) -> Option<Vec<SlowDevice>> {
    let out = (0..n)
        .map(|i| SlowDevice::lun(&dir.join(format!("lun{i}.dat")), "32M", DELAY, QUEUE))
        .collect::<Option<Vec<_>>>()?;
    // Let udev's probes of the new devices pass.
    std::thread::sleep(Duration::from_millis(500));
    Some(out)
}

/// A run over `devs` with `sessions` sessions: its results.
fn run_over(devs: &[&SlowDevice], sessions: u32, json: &Path) -> Value {
    let mut args: Vec<String> = vec![
        "run".into(),
        "--sessions".into(),
        sessions.to_string(),
        "--duration".into(),
        "3s".into(),
        "--warmup".into(),
        "0.5s".into(),
        "-q".into(),
        "--json".into(),
        json.display().to_string(),
    ];
    for d in devs {
        args.push("--target".into());
        args.push(d.dev.clone());
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(iolens(&a));
    read(json)
}

fn iops(r: &Value) -> f64 {
    let run = &r["runs"][0];
    run["ops"][0]["count"].as_f64().unwrap() / run["duration_s"].as_f64().unwrap()
}

fn mean_ns(r: &Value) -> f64 {
    r["runs"][0]["ops"][0]["summary"]["mean_ns"]
        .as_f64()
        .unwrap()
}

#[test]
fn one_lun_goes_flat_more_luns_relieve_and_plan_predicts_and_verifies() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let Some(devs) = luns(dir.path(), 4) else {
        return;
    };
    let p = |n: &str| -> PathBuf { dir.path().join(n) };
    // The 1-LUN calibration: random reads at 1, 2, 4, 8, 16 sessions.
    let cal = p("cal.json");
    ok(iolens(&[
        "calibrate",
        "--target",
        &devs[0].dev,
        "--phases",
        "randread",
        "--max-sessions",
        "16",
        "--budget",
        "12s",
        "--max-latency",
        "500ms",
        "-q",
        "--json",
        cal.to_str().unwrap(),
    ]));
    let c = read(&cal);
    let curve = c["calibration"]["curve"].as_array().unwrap();
    let at = |s: u64| {
        curve
            .iter()
            .find(|p| p["sessions"].as_u64() == Some(s))
            .unwrap_or_else(|| panic!("no step at {s} sessions: {curve:?}"))
    };
    let (x4, x16) = (
        at(4)["iops"].as_f64().unwrap(),
        at(16)["iops"].as_f64().unwrap(),
    );
    let (r4, r16) = (
        at(4)["mean_ns"].as_f64().unwrap(),
        at(16)["mean_ns"].as_f64().unwrap(),
    );
    eprintln!("1 LUN: 4 sessions {x4:.0} IOPS at {r4:.0} ns, 16 sessions {x16:.0} at {r16:.0} ns");
    // The queue limits in-flight reads: Little's law at the plateau gives the queue (the
    // service time is the latency at 4 sessions, all of them in the device).
    let limit = QUEUE as f64 / DELAY.as_secs_f64();
    let in_flight = x16 * r4 / 1e9;
    assert!(
        (in_flight / QUEUE as f64 - 1.0).abs() < 0.15,
        "{in_flight:.2} in flight at the plateau for a queue of {QUEUE}"
    );
    // The plateau is queue ÷ service time, and the service time is the delay plus the
    // daemon's and the wake-ups' own time: never above queue ÷ delay (5 %: timer slack), below
    // it by what the host adds to each read. A CI run, while the other tests of this file
    // ran their FIFO daemons beside this one on 2 CPUs, had 4.68 ms per read for the 4 ms delay
    // (852 and 789 IOPS for 1000); they now run one at a time, and a quarter of the delay is
    // the allowance.
    assert!(
        x16 <= 1.05 * limit,
        "{x16:.0} IOPS above the queue's {limit:.0}"
    );
    assert!(
        r4 < 1.25 * DELAY.as_nanos() as f64,
        "{r4:.0} ns per read at 4 sessions for a {DELAY:?} delay"
    );
    // The calibration's verdict at its max-IOPS step: from 8 sessions on, the LUN's queue of
    // 4 is full and the rest wait in the host above the block layer; the verdict names that
    // queue. (At 4 sessions all are in the device: no host verdict.)
    let best = &curve[c["calibration"]["max_iops_point"].as_u64().unwrap() as usize];
    let cv = c["calibration"]["verdicts"].as_array().unwrap();
    let host = cv.iter().find(|v| v["kind"] == "host-queueing");
    eprintln!("max IOPS at {} sessions: {host:?}", best["sessions"]);
    if best["sessions"].as_u64().unwrap() >= 2 * QUEUE as u64 {
        let h = host.unwrap_or_else(|| panic!("no host-queueing verdict: {cv:#?}"));
        assert_eq!(h["figures"]["queue_full"], 1.0, "{h}");
        assert!(h["message"]
            .as_str()
            .unwrap()
            .contains("its request queue was full"));
    }
    // Seed 001's shape on one LUN: IOPS flat from 4 to 16 sessions, latency ×4.
    assert!((x16 / x4 - 1.0).abs() < 0.1, "{x4:.0} → {x16:.0}");
    assert!(r16 / r4 > 3.0, "latency {r4:.0} → {r16:.0} ns");

    // More LUNs relieve it: 16 sessions over 2 and 4 LUNs (striped in allocation units).
    let two = run_over(&[&devs[0], &devs[1]], 16, &p("two.json"));
    let four = run_over(&devs.iter().collect::<Vec<_>>(), 16, &p("four.json"));
    eprintln!(
        "16 sessions: 2 LUNs {:.0} IOPS at {:.0} ns; 4 LUNs {:.0} at {:.0} ns",
        iops(&two),
        mean_ns(&two),
        iops(&four),
        mean_ns(&four)
    );
    assert!(iops(&two) > 1.6 * x16 && iops(&four) > 2.6 * x16);
    assert!(mean_ns(&four) < mean_ns(&two) && mean_ns(&two) < r16);

    // The plan, from the 1-LUN calibration; the runs at 2 and 4 LUNs are set beside its
    // prediction (they are not the curve it is fitted to: that is the LUN count with the
    // most points, the calibration's 1).
    let plan = p("plan.json");
    let targets: Vec<&str> = devs
        .iter()
        .flat_map(|d| ["--target", d.dev.as_str()])
        .collect();
    let mut args = vec![
        "plan",
        cal.to_str().unwrap(),
        p("two.json").to_str().unwrap().to_owned().leak(),
        p("four.json").to_str().unwrap().to_owned().leak(),
        "--iops",
        "2400",
        "--p99",
        "40ms",
        "--port-queue",
        "64",
        "--verify",
        "--verify-duration",
        "3s",
        "--json",
        plan.to_str().unwrap(),
        "--width",
        "200",
    ];
    args.extend(&targets);
    let out = ok(iolens(&args));
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    let r = read(&plan);
    assert_eq!(r["kind"], "plan");
    let pl = &r["plan"];
    assert_eq!(pl["model"]["luns"], 1, "fitted to the 1-LUN curve");
    for n in [2u64, 4] {
        let c = pl["curves"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["luns"].as_u64() == Some(n))
            .unwrap();
        let pred = c["predicted"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["sessions"] == 16)
            .unwrap()["iops"]
            .as_f64()
            .unwrap();
        let meas = c["measured"][0]["iops"].as_f64().unwrap();
        eprintln!("{n} LUNs, 16 sessions: predicted {pred:.0}, measured {meas:.0}");
        assert!(
            (meas / pred - 1.0).abs() <= 0.15,
            "{n} LUNs: measured {meas:.0} IOPS, predicted {pred:.0}"
        );
    }
    let v = &pl["verify"];
    let luns = v["luns"].as_u64().unwrap();
    assert!((2..=4).contains(&luns), "{v}");
    let err = v["iops_error"].as_f64().unwrap();
    assert!(err.abs() <= 0.15, "verify: {v}");
    assert_eq!(
        r["runs"][0]["targets"].as_array().map_or(1, Vec::len) as u64,
        luns
    );
    p99_within_its_sampling(&cal, &plan);
    // Every figure says where it came from.
    for k in [
        "in_flight",
        "luns",
        "lun_queue_depth",
        "sessions",
        "predicted_iops",
    ] {
        assert!(!pl[k]["from"].as_str().unwrap().is_empty(), "{k}");
    }
    assert!(text.contains("Vendor formulas checked") && text.contains("Verified"));
    // Shown everywhere.
    let show = ok(common::bin().arg("show").arg(&plan).output().unwrap());
    assert!(String::from_utf8_lossy(&show.stdout).contains("Predicted curve per LUN count"));
    let html = p("plan.html");
    ok(common::bin()
        .arg("report")
        .arg(&plan)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap());
    let h = std::fs::read_to_string(&html).unwrap();
    assert!(h.contains("2 LUNs measured") && h.contains("4 LUNs predicted"));
    let md = p("plan.md");
    ok(common::bin()
        .arg("export")
        .arg(&plan)
        .arg("--markdown")
        .arg(&md)
        .output()
        .unwrap());
    assert!(std::fs::read_to_string(&md)
        .unwrap()
        .contains("### Host settings"));
}

/// The p99 of `h` and the band its sampling allows: a p99 of `n` latencies is the value of
/// rank 0.99 n, and that rank is uncertain by √(n · 0.99 · 0.01) (binomial); 3 of those either
/// side give the values between which the same load's p99 falls 99.7 % of the time.
fn p99_band(h: &hdrhistogram::Histogram<u64>) -> (f64, f64, f64) {
    let n = h.len() as f64;
    let d = 3.0 * (0.99 * 0.01 / n).sqrt();
    let q = |x: f64| h.value_at_quantile(x.clamp(0.0, 1.0)) as f64;
    (q(0.99 - d), q(0.99), q(0.99 + d))
}

/// `plan --verify`'s p99 (issue 27). The predicted p99 is the 1-LUN calibration's p99 at the
/// predicted mean latency, interpolated between the two calibration steps around it (by mean,
/// as `analysis::plan` does); the measured one is the verify run's. Each p99 is of finitely
/// many reads, known only within its sampling band ([`p99_band`]).
///
/// The interpolated value itself is not held to that band: over 12 runs of this test (4 under
/// busy loops) the prediction moved between 14.7 and 21.5 ms while the measured p99 was 16.9 to
/// 25.2 ms, once 35.6 ms (errors +3 to +80 %), and a check that the two sampling bands meet
/// failed once in 7.
/// The prediction's spread is the calibration's 8-session step (about 1,470 reads in 1.5 s,
/// queued reads woken in batches, so not independent samples: its p99 varies more than the
/// binomial band of independent reads allows). What holds by construction is the bracket: p99
/// rises with the mean along a load curve, so the p99 at a mean between two steps' lies between
/// their p99s, each within its band. The check: the verify run's band meets that bracket, and
/// the wrong answer (the saturated step's p99, 16 sessions on one LUN) lies above the verify
/// run's band, as the floor (the lowest p99 on the curve) lies below it.
fn p99_within_its_sampling(cal: &Path, plan: &Path) {
    use iolens::results::Results;
    let c = Results::read_file(cal).unwrap();
    let pr = Results::read_file(plan).unwrap();
    let pl = pr.plan.as_ref().unwrap();
    let v = pl.verify.as_ref().unwrap();
    let measured = pr.runs[v.run].merged_io_hist().unwrap();
    let (m_lo, m99, m_hi) = p99_band(&measured);
    assert!((m99 - v.measured_p99_ns).abs() <= 1.0, "{m99} vs {v:?}");
    // The predicted mean latency and the calibration steps around it.
    let mean = pl.sessions.value / pl.predicted_iops.value * 1e9 - pl.model.outside_ns.value;
    let mut pts: Vec<_> = pl.model.points.iter().collect();
    assert!(pts.iter().all(|p| p.file == cal.to_str().unwrap()));
    pts.sort_by(|a, b| a.mean_ns.total_cmp(&b.mean_ns));
    let i = pts
        .iter()
        .position(|p| p.mean_ns >= mean)
        .unwrap_or(pts.len() - 1)
        .max(1);
    let (a, b) = (pts[i - 1], pts[i]);
    let t = ((mean - a.mean_ns) / (b.mean_ns - a.mean_ns)).clamp(0.0, 1.0);
    let band = |p: &iolens::results::plan::LoadPoint| {
        let (lo, p99, hi) = p99_band(&c.runs[p.run].merged_io_hist().unwrap());
        assert!((p99 - p.p99_ns).abs() <= 1.0);
        (
            p99 - lo,
            hi - p99,
            c.runs[p.run].merged_io_hist().unwrap().len(),
        )
    };
    let ((da_lo, da_hi, na), (db_lo, db_hi, nb)) = (band(a), band(b));
    let pred = v.predicted_p99_ns;
    let p_lo = pred - ((1.0 - t) * da_lo + t * db_lo);
    let p_hi = pred + ((1.0 - t) * da_hi + t * db_hi);
    // The bracket: the lower step's p99 less its band to the upper's plus its band.
    let (b_lo, b_hi) = (
        a.p99_ns.min(b.p99_ns) - da_lo,
        a.p99_ns.max(b.p99_ns) + db_hi,
    );
    eprintln!(
        "p99: predicted {:.0} µs [{:.0}, {:.0}] at mean {:.0} µs ({:.2} of the way from the \
         step at {} sessions, {na} reads, to {} sessions, {nb} reads); measured {:.0} µs \
         [{:.0}, {:.0}] of {} reads; error {:+.1} %; bracket [{:.0}, {:.0}] µs",
        pred / 1e3,
        p_lo / 1e3,
        p_hi / 1e3,
        mean / 1e3,
        t,
        a.sessions,
        b.sessions,
        m99 / 1e3,
        m_lo / 1e3,
        m_hi / 1e3,
        measured.len(),
        v.p99_error * 100.0,
        b_lo / 1e3,
        b_hi / 1e3
    );
    assert!(
        b_lo <= m_hi && m_lo <= b_hi,
        "measured p99 {m99:.0} ns [{m_lo:.0}, {m_hi:.0}] outside the bracket [{b_lo:.0}, \
         {b_hi:.0}] of the steps around the predicted mean (predicted {pred:.0} ns)"
    );
    // The wrong answers are told apart: one LUN's saturated p99 and the curve's floor.
    let sat = pts.iter().map(|p| p.p99_ns).fold(0.0, f64::max);
    let floor = pts.iter().map(|p| p.p99_ns).fold(f64::INFINITY, f64::min);
    assert!(
        sat > m_hi,
        "saturated p99 {sat:.0} within [{m_lo:.0}, {m_hi:.0}]"
    );
    assert!(
        floor < m_lo,
        "floor p99 {floor:.0} within [{m_lo:.0}, {m_hi:.0}]"
    );
}

/// Bad input: a clear error, exit 2, never a panic.
fn refused(args: &[&str], says: &str) {
    let o = common::bin().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let cal = dir.path().join("cal.json");
    let run = dir.path().join("run.json");
    for (kind, f) in [("calibrate", &cal), ("run", &run)] {
        ok(common::bin()
            .args(["dev-synth", "--kind", kind, "--seconds", "2", "-o"])
            .arg(f)
            .output()
            .unwrap());
    }
    let cal_s = cal.to_str().unwrap();
    // No results at all.
    refused(&["plan", "--iops", "1000", "--p99", "1ms"], "RESULTS");
    // A file that is not results.
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"hello\": 1}").unwrap();
    refused(
        &[
            "plan",
            junk.to_str().unwrap(),
            "--iops",
            "1000",
            "--p99",
            "1ms",
        ],
        "junk.json",
    );
    // One run: no load curve.
    refused(
        &[
            "plan",
            run.to_str().unwrap(),
            "--iops",
            "1000",
            "--p99",
            "1ms",
        ],
        "no load curve",
    );
    // A p99 below anything the storage delivered.
    refused(
        &["plan", cal_s, "--iops", "1000", "--p99", "1ns"],
        "below anything",
    );
    // IOPS beyond any LUN count within the p99 (the synthetic curve's queueing).
    refused(
        &["plan", cal_s, "--iops", "1e12", "--p99", "1s"],
        "no plan of up to",
    );
    // Nonsense goals.
    refused(&["plan", cal_s, "--iops", "0", "--p99", "1ms"], "--iops");
    refused(&["plan", cal_s, "--iops", "10", "--p99", "5"], "no unit");
    // --verify without enough targets for the plan's LUNs runs nothing.
    let c = read(&cal);
    let top = c["calibration"]["curve"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["iops"].as_f64())
        .fold(0.0, f64::max);
    let goal = format!("{}", (top * 3.0).round());
    let o = common::bin()
        .args([
            "plan", cal_s, "--iops", &goal, "--p99", "1s", "--verify", "--target",
        ])
        .arg(dir.path().join("never.dat"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.success() {
        panic!("a plan of 3× one LUN's IOPS verified on one target: {err}");
    }
    assert!(err.contains("--verify needs"), "{err}");
    assert!(
        !dir.path().join("never.dat").exists(),
        "a target was created"
    );
}

/// The verdicts of a run's results (its stored analysis).
fn verdicts(r: &Value) -> Vec<Value> {
    r["analysis"]["runs"][0]["verdicts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A full LUN queue is the host's wait (issue 27): 16 sessions on one slow LUN whose request
/// queue holds 4 (`nr_requests`) keep it full, so 12 of them wait for a place in it, in the
/// host above the block layer where `/proc/diskstats` does not count them: the run's verdict
/// names that queue. The same LUN with its queue raised to its driver's 128 takes all 16, the
/// reads wait in the device (the FUSE daemon's 4 ms), and no verdict calls the queue full.
#[test]
fn a_full_lun_queue_is_named_as_the_hosts_wait_and_a_deep_one_is_not() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let Some(devs) = luns(dir.path(), 1) else {
        return;
    };
    let d = &devs[0];
    let full = run_over(&[d], 16, &dir.path().join("full.json"));
    let v = verdicts(&full);
    eprintln!("nr_requests {QUEUE}: {v:#?}");
    let host = v
        .iter()
        .find(|v| v["kind"] == "host-queueing")
        .unwrap_or_else(|| panic!("no host-queueing verdict: {v:#?}"));
    let fig = |v: &Value, k: &str| v["figures"][k].as_f64().unwrap();
    assert_eq!(fig(host, "queue_full"), 1.0, "{host}");
    assert_eq!(fig(host, "nr_requests"), QUEUE as f64);
    let msg = host["message"].as_str().unwrap();
    assert!(
        msg.contains("its request queue was full")
            && msg.contains("queued in the host above the block layer"),
        "{msg}"
    );
    // By construction 4 of 16 sessions are in the device: ¾ of the time is the host's (within
    // 0.1: wake-ups, and the daemon's time beyond its sleep is the device's).
    assert!((fig(host, "host_share") - 0.75).abs() < 0.1, "{host}");

    // The queue raised to the loop driver's tags: all 16 in the device.
    let q = format!("/sys/block/{}/queue/nr_requests", d.name);
    std::fs::write(&q, "128").unwrap();
    let deep = run_over(&[d], 16, &dir.path().join("deep.json"));
    let v = verdicts(&deep);
    eprintln!("nr_requests 128: {v:#?}");
    for x in &v {
        let m = x["message"].as_str().unwrap_or("");
        assert!(
            !m.contains("request queue was full")
                && x["figures"]["queue_full"].as_f64() != Some(1.0),
            "{x}"
        );
    }
    assert!(
        v.iter().any(|v| v["kind"] == "storage-bound"),
        "the reads waited in the device: {v:#?}"
    );
}

/// The block verdict of a run traced with `--watch` (issue 27): as the untraced run's, one slow
/// LUN of queue 4 under 16 sessions holds its request queue full, and the traced verdict names
/// that queue as the host's wait above the block layer (its requests' traced time, entering the
/// block layer to completion, is 4 of 16 sessions' worth: ¾ of the median read is the host's).
/// Raised to 128, the same LUN takes all 16: storage-bound, and its queue is said not full.
#[test]
fn a_traced_run_names_a_full_lun_queue_as_the_hosts_wait_and_not_a_deep_one() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let Some(devs) = luns(dir.path(), 1) else {
        return;
    };
    let d = &devs[0];
    let traced = |json: &Path| -> Value {
        ok(iolens(&[
            "run",
            "--target",
            &d.dev,
            "--sessions",
            "16",
            "--duration",
            "3s",
            "--warmup",
            "0.5s",
            "--watch",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ]));
        read(json)
    };
    let fig = |v: &Value, k: &str| v["figures"][k].as_f64().unwrap_or(f64::NAN);
    let full = traced(&dir.path().join("full.json"));
    let v = verdicts(&full);
    eprintln!("traced, nr_requests {QUEUE}: {v:#?}");
    let host = v
        .iter()
        .find(|v| v["kind"] == "host-queueing")
        .unwrap_or_else(|| panic!("no host-queueing verdict: {v:#?}"));
    assert!(
        host["figures"]["app_p50_us"].is_number(),
        "not the traced (block) verdict: {host}"
    );
    assert_eq!(fig(host, "queue_full"), 1.0, "{host}");
    assert_eq!(fig(host, "nr_requests"), QUEUE as f64, "{host}");
    // Held full: at least QUEUE_FULL (0.9) of its 4 places on average, never above them.
    let held = fig(host, "request_queue_in_flight");
    assert!(
        held >= 0.9 * QUEUE as f64 && held <= QUEUE as f64 + 0.05,
        "{host}"
    );
    let msg = host["message"].as_str().unwrap();
    assert!(
        msg.contains("request queue was full")
            && msg.contains("above the block layer for a place in that queue"),
        "{msg}"
    );
    // 4 of 16 in the device by construction: ¾ of the mean read is the host's (within 0.1:
    // wake-ups, and the daemon's own time beyond its sleep is the device's). Not of the median:
    // the tag allocator wakes its sleepers in batches, not in order, so the waits are skewed
    // (one run: p50 8.3 ms, mean 17.3 ms, p99 87 ms) and only their mean is fixed (Little's law).
    let app_mean = full["runs"][0]["ops"][0]["summary"]["mean_ns"]
        .as_f64()
        .unwrap();
    let dev_mean = full["runs"][0]["block"]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == "blk:read:device")
        .unwrap()["summary"]["mean_ns"]
        .as_f64()
        .unwrap();
    let share = 1.0 - dev_mean / app_mean;
    assert!(
        (share - 0.75).abs() < 0.1,
        "host share of the mean {share}: {host}"
    );
    assert!(fig(host, "host_share_p99") > 0.75, "{host}");

    let q = format!("/sys/block/{}/queue/nr_requests", d.name);
    std::fs::write(&q, "128").unwrap();
    let deep = traced(&dir.path().join("deep.json"));
    let v = verdicts(&deep);
    eprintln!("traced, nr_requests 128: {v:#?}");
    for x in &v {
        let m = x["message"].as_str().unwrap_or("");
        assert!(
            !m.contains("request queue was full")
                && x["figures"]["queue_full"].as_f64() != Some(1.0),
            "{x}"
        );
    }
    let storage = v
        .iter()
        .find(|v| v["kind"] == "storage-bound")
        .unwrap_or_else(|| panic!("the reads waited in the device: {v:#?}"));
    assert!(storage["figures"]["app_p50_us"].is_number(), "{storage}");
    assert_eq!(fig(storage, "nr_requests"), 128.0, "{storage}");
    // All 16 sessions' reads in it, far from 0.9 × 128.
    assert!(fig(storage, "request_queue_in_flight") < 17.0, "{storage}");
}

/// `iolens watch` of a live process (issue 27): an `iolens run` of 16 sessions on one slow LUN
/// of queue 4, watched by pid. The time its reads waited for a place in the full request queue
/// is above the block layer (before the requests exist); the watch names it as the host's wait
/// for that queue, not "page cache, filesystem, locks". At 128 the same LUN is the storage.
#[test]
fn a_live_watch_names_a_full_lun_queue_as_the_hosts_wait_and_not_a_deep_one() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let Some(devs) = luns(dir.path(), 1) else {
        return;
    };
    let d = &devs[0];
    let watched = |json: &Path| -> Value {
        let mut run = std::process::Command::new("chrt")
            .args(["-f", "40", env!("CARGO_BIN_EXE_iolens")])
            .args(["run", "--target", &d.dev, "--sessions", "16"])
            .args(["--duration", "6s", "--verify", "none", "-q"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The run's sessions start; the watch attaches and watches 2.5 s of them.
        std::thread::sleep(Duration::from_millis(700));
        let pid = run.id().to_string();
        let w = iolens(&[
            "watch",
            "--pid",
            &pid,
            "--duration",
            "2.5s",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ]);
        let st = run.wait().unwrap();
        assert!(st.success(), "the watched run failed: {st}");
        ok(w);
        read(json)
    };
    let watch_verdicts = |r: &Value| -> Vec<Value> {
        r["analysis"]["watch"]["verdicts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let full = watched(&dir.path().join("watch-full.json"));
    let v = watch_verdicts(&full);
    eprintln!("watch, nr_requests {QUEUE}: {v:#?}");
    let head = &v[0];
    assert_eq!(head["kind"], "host-queueing", "{v:#?}");
    let key = |k: &str| format!("{k}:{}", d.name);
    let fig = |v: &Value, k: &str| v["figures"][k].as_f64().unwrap_or(f64::NAN);
    assert_eq!(fig(head, &key("queue_full")), 1.0, "{head}");
    assert_eq!(fig(head, &key("nr_requests")), QUEUE as f64, "{head}");
    let msg = head["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!("{}'s request queue was full", d.name))
            && msg.contains("for a place in that queue"),
        "{msg}"
    );
    // 12 of 16 sessions wait above the block layer by construction: ¾ of the I/O time (within
    // 0.1, as the run's verdict).
    assert!(
        (fig(head, "above_block_share") - 0.75).abs() < 0.1,
        "{head}"
    );

    let q = format!("/sys/block/{}/queue/nr_requests", d.name);
    std::fs::write(&q, "128").unwrap();
    let deep = watched(&dir.path().join("watch-deep.json"));
    let v = watch_verdicts(&deep);
    eprintln!("watch, nr_requests 128: {v:#?}");
    assert_eq!(v[0]["kind"], "storage-bound", "{v:#?}");
    for x in &v {
        let m = x["message"].as_str().unwrap_or("");
        assert!(!m.contains("request queue was full"), "{x}");
        assert_ne!(fig(x, &key("queue_full")), 1.0, "{x}");
    }
}
