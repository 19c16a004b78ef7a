//! Scale: hundreds of sessions through the real binary. Peak memory (the process's own maximum
//! resident set, `VmHWM` after exec: [`common::peak`]) stays within budget in all and per session, and the measured
//! duration equals `--duration` within one interval even when the sessions never block (the
//! null engine on 2 CPUs) and when they do (8 KiB reads of a real file).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

mod common;
use common::{bin, peak};

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
    let mut cmd = bin();
    cmd.arg("run")
        .args(args)
        .args([
            "--sessions",
            &sessions.to_string(),
            "--no-progress",
            "--json",
        ])
        .arg(&out);
    let p = peak::run(cmd, Duration::from_secs(300));
    assert!(
        p.status.success() && !p.killed,
        "iolens run {args:?} --sessions {sessions} failed: {:?} {}",
        p.status,
        p.stderr_text()
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("results")).expect("json");
    let r = &j["runs"][0];
    Measured {
        peak_kb: p.peak_kb,
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

/// Merge `n` ranks of the synthetic results `base` (each a copy under its own rank and host):
/// the merge's peak RSS in KB.
fn merge_peak_kb(dir: &Path, base: &serde_json::Value, n: u32) -> u64 {
    let mut files = Vec::new();
    for r in 0..n {
        let mut doc = base.clone();
        doc["placement"]["rank"] = r.into();
        doc["placement"]["ranks"] = n.into();
        doc["placement"]["host"] = format!("synth-{r}").into();
        let f = dir.join(format!("n{n}-rank{r}.json"));
        std::fs::write(&f, serde_json::to_vec(&doc).unwrap()).unwrap();
        files.push(f);
    }
    let out = dir.join(format!("merged-{n}.json"));
    let mut cmd = bin();
    cmd.args(["-q", "merge"]).args(&files).arg("-o").arg(&out);
    let p = peak::run(cmd, Duration::from_secs(300));
    assert!(
        p.status.success() && !p.killed,
        "iolens merge of {n} ranks failed: {:?} {}",
        p.status,
        p.stderr_text()
    );
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        m["merge"]["inputs"].as_array().map(Vec::len),
        Some(n as usize)
    );
    for f in files {
        std::fs::remove_file(f).unwrap();
    }
    p.peak_kb
}

/// `merge` holds one rank's intervals at a time, not every rank's: 40 ranks of half an hour of
/// 1 s intervals peak within a few MB of 2 ranks. (Holding every input, as merge once did,
/// cost about 1.3 MB per rank here: 49 MB more for the 38 extra ranks, release build.)
#[test]
fn merge_memory_does_not_grow_with_the_ranks_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let synth = dir.path().join("synth.json");
    let st = bin()
        .args(["dev-synth", "--seconds", "1800", "--samples", "20"])
        .args(["--rank", "0", "--ranks", "1", "-o"])
        .arg(&synth)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "dev-synth");
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&synth).unwrap()).unwrap();
    let two = merge_peak_kb(dir.path(), &base, 2);
    let forty = merge_peak_kb(dir.path(), &base, 40);
    let per_rank = forty.saturating_sub(two) / 38;
    eprintln!("merge peak: {two} KB for 2 ranks, {forty} KB for 40 ({per_rank} KB per rank)");
    // Each rank's own series (1,800 slots of IOPS and p99, 29 KB) and its document without
    // intervals stay: 33 KB per rank in a release build, 67 KB in the tests' build.
    assert!(
        per_rank <= 200,
        "merge grew by {per_rank} KB per rank of 1,800 intervals (2 ranks: {two} KB, 40: {forty} KB)"
    );
}
