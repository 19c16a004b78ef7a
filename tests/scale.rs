//! Scale: hundreds of sessions through the real binary. Peak memory (the process's own maximum
//! resident set, from `wait4`) stays within budget in all and per session, and the measured
//! duration equals `--duration` within one interval even when the sessions never block (the
//! null engine on 2 CPUs) and when they do (8 KiB reads of a real file).

use std::path::Path;
use std::process::Stdio;

mod common;
use common::bin;

/// Peak memory of a 480-session run, in all.
const MAX_PEAK_KB: u64 = 128 * 1024;
/// Peak memory each session adds.
const MAX_PER_SESSION_KB: u64 = 200;

struct Measured {
    peak_kb: u64,
    duration_s: f64,
    interval_s: f64,
    ios: u64,
}

/// Run `iolens run ARGS --sessions N --json OUT` and read its peak RSS and measured duration.
fn run(dir: &Path, sessions: u32, args: &[&str]) -> Measured {
    let out = dir.join(format!("r{sessions}.json"));
    let child = bin()
        .arg("run")
        .args(args)
        .args([
            "--sessions",
            &sessions.to_string(),
            "--no-progress",
            "--json",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start iolens");
    let (status, ru) = reap(child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "iolens run {args:?} --sessions {sessions} failed: status {status}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("results")).expect("json");
    let r = &j["runs"][0];
    Measured {
        peak_kb: ru.ru_maxrss as u64,
        duration_s: r["duration_s"].as_f64().expect("duration"),
        interval_s: r["interval_s"].as_f64().expect("interval"),
        ios: r["ops"]
            .as_array()
            .expect("ops")
            .iter()
            .map(|o| o["count"].as_u64().unwrap_or(0))
            .sum(),
    }
}

/// Wait for `child` to exit: its wait status and resource usage (peak RSS included).
fn reap(child: std::process::Child) -> (i32, libc::rusage) {
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 reaps our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    assert_eq!(pid, child.id() as i32, "wait4");
    (status, ru)
}

/// 1 and 480 sessions of `args` for 3 s: memory within budget, measured duration within one
/// interval of `--duration`.
fn check(dir: &Path, args: &[&str]) {
    let mut all = vec!["--duration", "3s"];
    all.extend_from_slice(args);
    let one = run(dir, 1, &all);
    let many = run(dir, 480, &all);
    let per = many.peak_kb.saturating_sub(one.peak_kb) / 479;
    eprintln!(
        "{args:?}: peak {} KB at 1 session, {} KB at 480 ({per} KB per session); measured {:.3} s \
         for 3 s, {} I/Os",
        one.peak_kb, many.peak_kb, many.duration_s, many.ios
    );
    assert!(many.ios > 0, "the sessions did I/O");
    assert!(
        many.peak_kb <= MAX_PEAK_KB,
        "{args:?}: 480 sessions peaked at {} KB (budget {MAX_PEAK_KB} KB)",
        many.peak_kb
    );
    assert!(
        per <= MAX_PER_SESSION_KB,
        "{args:?}: {per} KB per session (budget {MAX_PER_SESSION_KB} KB)"
    );
    for (n, m) in [(1, &one), (480, &many)] {
        assert!(
            (m.duration_s - 3.0).abs() <= m.interval_s,
            "{args:?}: measured {:.3} s for --duration 3s at {n} session(s) (interval {} s)",
            m.duration_s,
            m.interval_s
        );
    }
}

#[test]
fn null_engine_480_sessions_memory_and_duration() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("s.dat");
    let t = target.to_str().unwrap();
    check(
        dir.path(),
        &["--target", t, "--size", "16M", "--engine", "null"],
    );
}

#[test]
fn sync_reads_480_sessions_memory_and_duration() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("s.dat");
    let t = target.to_str().unwrap();
    // Buffered: the temp directory's filesystem may refuse O_DIRECT; memory and timing are the
    // tool's either way.
    check(
        dir.path(),
        &[
            "--target",
            t,
            "--size",
            "64M",
            "--buffered",
            "--verify",
            "none",
        ],
    );
}
