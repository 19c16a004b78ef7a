//! Calibration: stop rules, refinement, budget division, known-rate ground truth, mode
//! detection on a real half-cached file, and end-to-end runs of the command.

use std::sync::atomic::AtomicBool;

use clap::Parser;
use iolens::analysis::ramp::Ramp;
use iolens::calibrate::{CalibrateOptions, Phase, Plan, StopReason};
use iolens::commands::calibrate::CalibrateArgs;
use iolens::results::{Kind, Results};
use iolens::run::execute;
use iolens::workload::WorkloadSpec;

mod common;
use common::{bin, drive};

const MS: f64 = 1e6;

/// Tests that measure latency or run calibrations hold this, so they never share the two CPUs
/// with each other: a preempted page-cache hit would otherwise land in the device's mode.
static QUIET: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn quiet() -> std::sync::MutexGuard<'static, ()> {
    QUIET.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Parser)]
struct Wrap {
    #[command(flatten)]
    a: CalibrateArgs,
}

fn args(extra: &[&str]) -> CalibrateOptions {
    let mut v = vec!["x"];
    v.extend_from_slice(extra);
    Wrap::parse_from(v).a.options()
}

#[test]
fn ramp_stops_on_latency_target_and_refines_between() {
    // Latency crosses 5 ms between 16 and 32 sessions; IOPS keeps growing.
    let r = drive(Ramp::new(64, 5.0 * MS, 0.05, 2), |n| {
        (n as f64 * 1000.0, n as f64 * 0.2 * MS)
    });
    assert_eq!(r.stop, Some(StopReason::LatencyTarget));
    let sessions: Vec<u32> = r.steps.iter().map(|s| s.0).collect();
    assert_eq!(sessions, vec![1, 2, 4, 8, 16, 32, 24, 28]);
    // 24 × 0.2 ms = 4.8 ms is good, 28 × 0.2 ms = 5.6 ms is not: best is 24.
    assert_eq!(r.best(), Some((24, 24_000.0)));
}

#[test]
fn ramp_stops_on_plateau_and_ceiling() {
    let r = drive(Ramp::new(64, 5.0 * MS, 0.05, 2), |n| {
        ((n.min(4) as f64) * 1000.0 + n as f64, 0.1 * MS)
    });
    assert_eq!(r.stop, Some(StopReason::Plateau));
    assert_eq!(r.steps.len(), 5, "1,2,4 then 8 and 16 show no growth");
    assert_eq!(r.best(), Some((16, 4016.0)));

    let r = drive(Ramp::new(6, 5.0 * MS, 0.05, 2), |n| {
        (n as f64 * 1000.0, 0.1 * MS)
    });
    assert_eq!(r.stop, Some(StopReason::Ceiling));
    let sessions: Vec<u32> = r.steps.iter().map(|s| s.0).collect();
    assert_eq!(sessions, vec![1, 2, 4, 6], "ceiling is measured exactly");
}

#[test]
fn ramp_with_no_good_step_reports_none() {
    let r = drive(Ramp::new(64, 1.0 * MS, 0.05, 2), |_| (100.0, 2.0 * MS));
    assert_eq!(r.stop, Some(StopReason::LatencyTarget));
    assert_eq!(r.steps.len(), 1);
    assert_eq!(r.best(), None);
}

#[test]
fn budget_is_divided_by_weight_and_checked() {
    let p = Plan::new(&args(&["--budget", "120s"])).unwrap();
    let total: f64 = p.phases.iter().map(|x| x.step_s * x.max_steps as f64).sum();
    assert!(
        (total - 120.0).abs() < 1e-6,
        "steps fill the budget exactly: {total}"
    );
    let rr = p
        .phases
        .iter()
        .find(|x| x.phase == Phase::Randread)
        .unwrap();
    assert_eq!(rr.max_steps, 7 + 2, "1..64 is 7 steps plus 2 refinements");
    assert!(rr.warmup_s > 0.0 && rr.warmup_s < rr.step_s);
    let p = Plan::new(&args(&["--budget", "10m", "--writes", "--cache-probe"])).unwrap();
    assert_eq!(p.phases.len(), 5);
    let e = Plan::new(&args(&["--budget", "5s"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("too small for the plan") && e.contains("at least"),
        "{e}"
    );
    // The suggested minimum really is enough.
    let min: String = e
        .split("at least ")
        .nth(2)
        .unwrap()
        .split('s')
        .next()
        .unwrap()
        .to_string();
    Plan::new(&args(&["--budget", &format!("{min}s")])).unwrap();
    for (bad, want) in [
        (vec!["--max-latency", "0"], "--max-latency"),
        (vec!["--percentile", "100"], "--percentile"),
        (vec!["--max-sessions", "0"], "--max-sessions"),
    ] {
        let e = Plan::new(&args(&bad)).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn bad_options_exit_with_clear_errors() {
    for (a, want) in [
        (vec!["calibrate", "--phases", "foo"], "invalid value 'foo'"),
        (
            vec!["calibrate", "--max-latency=-1"],
            "not a valid duration",
        ),
        (vec!["calibrate", "--budget", "3s"], "too small"),
        // A bare number for a latency is refused with the fix, never read as seconds.
        (vec!["calibrate", "--max-latency", "5"], "e.g. 5ms"),
        (vec!["run", "--think", "100"], "e.g. 100ms"),
        (vec!["db", "run", "--think", "2"], "e.g. 2ms"),
    ] {
        let out = bin().args(&a).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{a:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(want), "{a:?}");
    }
}

#[test]
fn rate_limited_step_reports_known_iops() {
    let _quiet = quiet();
    let dir = tempfile::tempdir().unwrap();
    let t = common::scratch(&dir.path().join("s.dat"), 16 << 20, false);
    // Cached reads: the rate limiter, not a slow disk under a loaded CI machine (3000 cold
    // reads a second fell 4 % short there once), must be what sets the rate.
    t.warm(0, 16 << 20).unwrap();
    let stop = AtomicBool::new(false);
    for rate in [500.0, 3000.0] {
        let spec = WorkloadSpec {
            target: t.path.display().to_string(),
            target_size: t.data_size,
            sessions: 2,
            direct: false,
            rate_iops: Some(rate),
            // Ops count where they complete: a session held off its CPU across the window's
            // start carries ops meant for the warm-up into it (CI, beside this file's other
            // tests, saw 536 at 500 in a 1 s window: 72 ms of such spill). Over 4 s the same
            // spill is under 1 %, inside the 3 % this asserts.
            duration_s: Some(4.0),
            warmup_s: 0.5,
            interval_s: 0.5,
            ..Default::default()
        };
        let r = execute(&spec, &t, &common::opts(&stop)).unwrap();
        let p = iolens::calibrate::curve_point(0, &r, 2, 1);
        assert!(
            (p.iops - rate).abs() / rate < 0.03,
            "step at {rate} IOPS reported {}",
            p.iops
        );
    }
}

#[test]
fn half_cached_file_shows_two_modes_with_the_right_shares() {
    let _quiet = quiet();
    let dir = tempfile::tempdir().unwrap();
    let size = 64u64 << 20;
    let t = common::scratch(&dir.path().join("s.dat"), size, false);
    // First half in the page cache, second half not.
    t.evict(0, size).unwrap();
    t.warm(0, size / 2).unwrap();
    // Readahead while warming may have pulled in part of the second half: drop it again.
    t.evict(size / 2, size / 2).unwrap();
    let before = t.residency(0, size).unwrap();
    assert!((0.45..0.55).contains(&before), "half resident: {before}");
    let spec = WorkloadSpec {
        target: t.path.display().to_string(),
        target_size: t.data_size,
        direct: false,
        duration_s: None,
        io_count: Some(600),
        interval_s: 0.1,
        ..Default::default()
    };
    let r = execute(&spec, &t, &common::opts(&AtomicBool::new(false))).unwrap();
    let h = r.merged_io_hist().unwrap();
    let modes = iolens::analysis::find_modes(&h);
    // Two tiers: page-cache hits and device reads. A small middle mode (pages whose readahead
    // was still in flight when read) is real when its valley is, and allowed; it must stay small.
    assert!(
        (2..=3).contains(&modes.len()),
        "{}",
        iolens::analysis::describe(&modes)
    );
    for m in &modes[1..modes.len() - 1] {
        assert!(m.share < 0.1, "{}", iolens::analysis::describe(&modes));
    }
    // Ground truth: the share resident just before the run (measured by the run itself);
    // re-reads of blocks read earlier in the run (~2 % of 600 over 8192 blocks) also hit.
    let resident = r.page_cache.as_ref().unwrap().resident_before;
    assert!(
        (0.45..0.55).contains(&resident),
        "resident before run: {resident}"
    );
    let cached = modes[0].share;
    assert!(
        cached > resident - 0.07 && cached < resident + 0.09,
        "cached share {cached}: {}",
        iolens::analysis::describe(&modes)
    );
    assert!(modes[modes.len() - 1].centre_ns > 5.0 * modes[0].centre_ns);
}

/// Whether `p` is on tmpfs (RAM: there O_DIRECT reads are RAM too).
fn on_tmpfs(p: &std::path::Path) -> bool {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string and a zeroed statfs to fill.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == 0x0102_1994 }
}

/// Issue 24 item 3: a scratch file in the page cache, read buffered, is named as cached (a
/// cache answered; the figures are the cache's, with the latency tiers as evidence); O_DIRECT
/// reads of the same file on the same device are not.
#[test]
fn a_cached_file_read_buffered_is_named_cached_and_o_direct_is_not() {
    let _quiet = quiet();
    let dir = tempfile::tempdir().unwrap();
    if on_tmpfs(dir.path()) {
        eprintln!("note: skipped: the temporary directory is on tmpfs, where O_DIRECT is RAM too");
        return;
    }
    let size = 16u64 << 20;
    let t = common::scratch(&dir.path().join("s.dat"), size, false);
    t.warm(0, size).unwrap();
    let spec = |direct| WorkloadSpec {
        target: t.path.display().to_string(),
        target_size: t.data_size,
        direct,
        duration_s: None,
        io_count: Some(2000),
        interval_s: 0.1,
        ..Default::default()
    };
    let cached = |r: &iolens::results::RunResult| {
        iolens::analysis::run_verdicts(r)
            .into_iter()
            .filter(|v| v.message.contains("a cache answered these reads"))
            .collect::<Vec<_>>()
    };
    let r = execute(&spec(false), &t, &common::opts(&AtomicBool::new(false))).unwrap();
    let resident = r.page_cache.as_ref().unwrap().resident_before;
    assert!(resident > 0.9, "warmed: {resident}");
    let v = cached(&r);
    assert_eq!(v.len(), 1, "{:#?}", iolens::analysis::run_verdicts(&r));
    assert!(
        v[0].message.contains("this host's page cache"),
        "{}",
        v[0].message
    );
    assert!(
        v[0].message.contains("latency tiers: RAM cache:"),
        "{}",
        v[0].message
    );
    assert!(
        v[0].message.contains("the figures are the cache's"),
        "{}",
        v[0].message
    );
    let r = execute(&spec(true), &t, &common::opts(&AtomicBool::new(false))).unwrap();
    assert!(
        cached(&r).is_empty(),
        "O_DIRECT named cached: {:#?}",
        iolens::analysis::run_verdicts(&r)
    );
}

/// `calibrate --precondition` on a scratch file: the fill covers it, the rounds end by one of
/// the named reasons within the bound, and the verdict follows the SNIA criteria it reports.
#[test]
fn calibrate_precondition_reports_rounds_and_steady_state() {
    let _quiet = quiet();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cal.json");
    let started = std::time::Instant::now();
    let out = bin()
        .args([
            "calibrate",
            "--precondition",
            "12s",
            "--budget",
            "3s",
            "--max-sessions",
            "1",
            "--phases",
            "randread",
            "--size",
            "16M",
            "--no-progress",
        ])
        .arg("--target")
        .arg(dir.path().join("s.dat"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let took = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("0. precondition (SNIA-style"), "{stdout}");
    let r = Results::read_file(&json).unwrap();
    let pc = r
        .calibration
        .as_ref()
        .unwrap()
        .findings
        .precondition
        .clone()
        .unwrap();
    assert!(stdout.contains(&pc.sentence), "{stdout}");
    // Two passes of whole 128 KiB blocks over the data area.
    assert!(
        pc.fill_bytes <= 2 * pc.target_bytes
            && pc.fill_bytes + 2 * (128 << 10) > 2 * pc.target_bytes,
        "{}",
        pc.sentence
    );
    assert!(
        !pc.rounds.is_empty() && pc.rounds.len() <= 25,
        "{}",
        pc.sentence
    );
    assert_eq!(pc.rounds.len(), pc.round_iops.len());
    assert!(["steady", "round-limit", "time-bound"].contains(&pc.ended.as_str()));
    match &pc.steady {
        Some(s) => assert_eq!(
            pc.reached,
            s.range_pct <= 20.0 && s.slope_pct <= 10.0,
            "{}",
            pc.sentence
        ),
        None => assert!(!pc.reached && pc.rounds.len() < 5),
    }
    // The bound holds (plus the budget, set-up and the fill's last step).
    assert!(took < 12.0 * 1.02 + 3.0 + 10.0, "took {took:.1} s");
    // Refused on a file iolens may not write, which stays as it was.
    let victim = dir.path().join("data.bin");
    let content = vec![42u8; 4 << 20];
    std::fs::write(&victim, &content).unwrap();
    let out = bin()
        .args(["calibrate", "--precondition", "--budget", "2m"])
        .arg("--target")
        .arg(&victim)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to write"));
    assert_eq!(std::fs::read(&victim).unwrap(), content);
}

#[test]
fn calibrate_end_to_end_writes_a_complete_results_file() {
    let _quiet = quiet();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cal.json");
    let out = bin()
        .args([
            "calibrate",
            "--budget",
            "8s",
            "--max-sessions",
            "2",
            "--max-qd",
            "1",
            "--phases",
            "randread,seqread1",
            "--size",
            "32M",
            "--no-progress",
        ])
        .arg("--target")
        .arg(dir.path().join("s.dat"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Calibration plan"), "{stdout}");
    assert!(stdout.contains("CALIBRATE_IO would report"), "{stdout}");
    assert!(stdout.contains("Max MB/s, one stream"), "{stdout}");
    let r = Results::read_file(&json).unwrap();
    assert_eq!(r.kind, Kind::Calibrate);
    let c = r.calibration.as_ref().unwrap();
    assert!(!c.curve.is_empty() && c.curve[0].sessions == 1);
    assert!(c.max_pmbps.unwrap() > 0.0);
    assert!(
        c.overhead_s < 0.25 * c.budget_s,
        "overhead {}",
        c.overhead_s
    );
    for p in &c.curve {
        assert_eq!(r.runs[p.run].phase, "randread");
        assert!(!r.runs[p.run].ops[0].intervals.is_empty());
    }
}

#[test]
fn calibrate_writes_and_cache_probe_phases() {
    let _quiet = quiet();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cal.json");
    let out = bin()
        .args([
            "calibrate",
            "--budget",
            "12s",
            "--max-sessions",
            "1",
            "--phases",
            "cache",
            "--writes",
            "--size",
            "32M",
            "--no-progress",
        ])
        .arg("--target")
        .arg(dir.path().join("s.dat"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Commit write 8 KiB O_DSYNC"), "{stdout}");
    assert!(stdout.contains("Cache probe, 1 % of target"), "{stdout}");
    let r = Results::read_file(&json).unwrap();
    let phases: Vec<&str> = r.runs.iter().map(|x| x.phase.as_str()).collect();
    assert!(
        phases.contains(&"writes") && phases.contains(&"cache"),
        "{phases:?}"
    );
}

#[test]
fn calibrate_writes_refuse_a_foreign_target() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("data.bin");
    let content = vec![42u8; 4 << 20];
    std::fs::write(&victim, &content).unwrap();
    let out = bin()
        .args(["calibrate", "--writes", "--budget", "2m"])
        .arg("--target")
        .arg(&victim)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to write"));
    assert_eq!(std::fs::read(&victim).unwrap(), content);
}

#[test]
fn calibrate_without_json_leaves_a_dated_results_file() {
    let _quiet = quiet();
    let dir = tempfile::tempdir().unwrap();
    // Someone's file that must stay as it is.
    std::fs::write(dir.path().join("keep.json"), b"mine").unwrap();
    let out = bin()
        .current_dir(dir.path())
        .args([
            "calibrate",
            "--budget",
            "8s",
            "--max-sessions",
            "2",
            "--phases",
            "randread",
            "--size",
            "16M",
            "--no-progress",
            "--target",
            "s.dat",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let made: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("iolens-calibrate-") && n.ends_with(".json"))
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    let name = &made[0];
    // Said at the start (before the plan) and at the end.
    let first = stdout.find(name.as_str()).expect("name said");
    assert!(first < stdout.find("Calibration plan").unwrap(), "{stdout}");
    assert!(
        stdout.contains(&format!("Results written to {name}")),
        "{stdout}"
    );
    let r = Results::read_file(&dir.path().join(name)).unwrap();
    assert_eq!(r.kind, Kind::Calibrate);
    assert_eq!(
        std::fs::read(dir.path().join("keep.json")).unwrap(),
        b"mine"
    );
}

/// Ctrl-C promises "writing results" only where a results file will be written.
#[test]
fn interrupt_message_promises_results_only_with_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("s.dat");
    for with_json in [false, true] {
        let mut cmd = bin();
        cmd.args([
            "run",
            "--engine",
            "null",
            "--duration",
            "30s",
            "--size",
            "1M",
            "--no-progress",
        ])
        .arg("--target")
        .arg(&target)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
        if with_json {
            cmd.arg("--json").arg(dir.path().join("r.json"));
        }
        let child = cmd.spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        // SAFETY: kill(2) of the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{err}");
        assert!(err.contains("interrupted (Ctrl-C)"), "{err}");
        assert_eq!(err.contains("writing results"), with_json, "{err}");
        assert_eq!(dir.path().join("r.json").exists(), with_json);
    }
}
