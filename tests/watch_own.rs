//! `--watch` on `run`, `calibrate` and `db run`: the block layer under iolens' own I/O, traced
//! with real BPF probes during real runs.
//!
//! Loading BPF needs root: these tests skip with a note when not root, except under CI (env CI
//! set), where they run and fail if broken.

use std::path::Path;
use std::process::Command;

use iolens::results::analysis::VerdictKind;
use iolens::results::{Results, RunResult};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iolens"))
}

/// One at a time: each run's block requests are compared with its own reads.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 || std::env::var_os("CI").is_some() {
        return true;
    }
    eprintln!("note: {test} skipped: loading BPF programs needs root");
    false
}

fn run_ok(args: &[&str]) -> String {
    let out = bin().args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every block-layer op of `run` is on the run's own interval grid, and its intervals sum to it.
fn check_grid(run: &RunResult) {
    let block = run.block.as_ref().expect("the run has a block layer");
    let grid: Vec<(f64, f64)> = run.ops[0]
        .intervals
        .iter()
        .map(|i| (i.start_s, i.duration_s))
        .collect();
    for op in &block.ops {
        let g: Vec<(f64, f64)> = op
            .intervals
            .iter()
            .map(|i| (i.start_s, i.duration_s))
            .collect();
        assert_eq!(g, grid, "{}: {} on the run's grid", run.name, op.op);
        let n: u64 = op.intervals.iter().map(|i| i.count).sum();
        assert_eq!(n, op.count, "{}: {} interval counts", run.name, op.op);
    }
}

#[test]
fn run_watch_sees_one_block_request_per_direct_read() {
    if !root_or_skip("run_watch_sees_one_block_request_per_direct_read") {
        return;
    }
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("s.dat");
    let json = tmp.path().join("r.json");
    let out = run_ok(&[
        "run",
        "--watch",
        "--target",
        target.to_str().unwrap(),
        "--size",
        "64M",
        "--bs",
        "4k",
        "--duration",
        "2s",
        "--interval",
        "500ms",
        "--verify",
        "none",
        "--no-progress",
        "--json",
        json.to_str().unwrap(),
    ]);
    let r = Results::read_file(&json).unwrap();
    let run = &r.runs[0];
    let read = run.op("read").unwrap();
    assert!(read.count > 1000, "the run did {} reads", read.count);
    let block = run.block.as_ref().unwrap();
    assert_eq!(
        block.device,
        iolens::sys::block_dev_for(&target).unwrap().disk
    );
    assert!(block.lost.is_empty(), "lost: {:?}", block.lost);
    let dev = block.op("blk:read:device").expect("device reads traced");
    let queue = block.op("blk:read:queue").expect("queue times traced");
    assert_eq!(dev.count, queue.count);
    // O_DIRECT 4 KiB reads: one request each (or a bio merged into a queued request). A
    // request completes before its read returns, so at the edges of the measured span the
    // block layer can only see as many more as there are sessions. Below: the shortfall seen
    // on this shared VM in about one run in three (up to 0.6 %, not explained, see the
    // report of issue 13), bounded at 1 %.
    let seen = dev.count + block.merged;
    assert!(
        seen <= read.count + 1,
        "{seen} requests for {} reads",
        read.count
    );
    assert!(
        seen as f64 >= read.count as f64 * 0.99,
        "{seen} requests for {} reads",
        read.count
    );
    assert_eq!(dev.bytes, dev.count * 4096);
    // The device serves a read inside the syscall that waits for it.
    assert!(
        dev.summary.p50_ns <= read.summary.p50_ns,
        "device p50 {} ns above the application's {} ns",
        dev.summary.p50_ns,
        read.summary.p50_ns
    );
    check_grid(run);
    // The verdict compares the distributions.
    let a = r.analysis.as_ref().unwrap();
    let v = a.runs[0]
        .verdicts
        .iter()
        .find(|v| {
            matches!(
                v.kind,
                VerdictKind::HostQueueing | VerdictKind::StorageBound
            )
        })
        .expect("a host/device verdict");
    for k in [
        "app_p50_us",
        "app_p99_us",
        "device_p50_us",
        "device_p99_us",
        "queue_p99_us",
    ] {
        assert!(v.figures.contains_key(k), "{k} missing: {:?}", v.figures);
    }
    assert!(
        v.message.contains("p50") && v.message.contains("p99"),
        "{}",
        v.message
    );
    assert!(v.message.contains("service time"), "{}", v.message);
    assert!(out.contains("traced block requests"), "{out}");
}

#[test]
fn calibrate_watch_has_block_series_per_step() {
    if !root_or_skip("calibrate_watch_has_block_series_per_step") {
        return;
    }
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("s.dat");
    let json = tmp.path().join("c.json");
    run_ok(&[
        "calibrate",
        "--watch",
        "--budget",
        "8s",
        "--max-sessions",
        "2",
        "--max-qd",
        "1",
        "--phases",
        "randread",
        "--size",
        "32M",
        "--verify",
        "none",
        "--no-progress",
        "--target",
        target.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let r = Results::read_file(&json).unwrap();
    assert!(r.runs.len() >= 2, "{} steps", r.runs.len());
    for run in &r.runs {
        let reads = run.op("read").map_or(0, |o| o.count);
        let block = run.block.as_ref().expect("each step has its block layer");
        let dev = block.op("blk:read:device").map_or(0, |o| o.count);
        // Each step counts its own requests only: close to its own reads.
        assert!(
            dev + block.merged <= reads + 2 && (dev + block.merged) as f64 >= reads as f64 * 0.99,
            "{}: {dev} requests for {reads} reads",
            run.name
        );
        check_grid(run);
    }
}

fn sqlite_setup(dir: &Path) {
    run_ok(&[
        "db",
        "setup",
        "--dir",
        dir.to_str().unwrap(),
        "--schemas",
        "1",
        "--scale",
        "16M",
        "--quiet",
    ]);
}

#[test]
fn db_run_sqlite_watch_traces_its_reads() {
    if !root_or_skip("db_run_sqlite_watch_traces_its_reads") {
        return;
    }
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    sqlite_setup(tmp.path());
    let json = tmp.path().join("d.json");
    run_ok(&[
        "db",
        "run",
        "--watch",
        "--dir",
        tmp.path().to_str().unwrap(),
        "--sessions",
        "1",
        "--duration",
        "2s",
        "--interval",
        "500ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    let r = Results::read_file(&json).unwrap();
    let run = &r.runs[0];
    let block = run.block.as_ref().expect("the I/O run has a block layer");
    let dev = block.op("blk:read:device").expect("device reads traced");
    assert!(dev.count > 0);
    // The OS cache was dropped first: the database's block reads reach the device, each at
    // least one request's worth (readahead may make requests larger, never more numerous).
    let reads = run.op("read").map_or(0, |o| o.count);
    assert!(
        reads > 0 && dev.count <= reads + 16,
        "{} requests, {reads} reads",
        dev.count
    );
    check_grid(run);
}

#[test]
fn watch_is_refused_before_any_io() {
    // Without privilege: the error names the capabilities, and the target is never created.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let target = tmp.path().join("never.dat");
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            env!("CARGO_BIN_EXE_iolens"),
            "run",
            "--watch",
            "--size",
            "8M",
            "--duration",
            "1s",
            "--target",
            target.to_str().unwrap(),
        ])
        .output();
    match out {
        Ok(out) if root_or_skip("watch_is_refused_before_any_io (privilege)") => {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert!(err.contains("--watch") && err.contains("CAP_BPF"), "{err}");
            assert!(
                !target.exists(),
                "the target was created before the refusal"
            );
        }
        Ok(_) => {}
        Err(_) => assert!(
            std::env::var_os("CI").is_none(),
            "setpriv (util-linux) is missing"
        ),
    }
    // PostgreSQL's I/O is its server's: a clear error, before connecting.
    let err = bin()
        .args(["db", "run", "--engine", "postgres", "--watch"])
        .output()
        .unwrap();
    assert!(!err.status.success());
    let text = String::from_utf8_lossy(&err.stderr);
    assert!(text.contains("iolens watch --comm postgres"), "{text}");
}
