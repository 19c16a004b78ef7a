//! `iolens replay`: real 10046 traces replayed, each read checked at the syscall (strace) and
//! by the target's own stamps; the schedule's span against the trace's own; `scaled:2`;
//! `think` on a slow device against recorded timing there; writes refused where they must be.
//!
//! The traces: tests/fixtures/real/js122a1_ora_9850.trc and js122a1_ora_9854.trc
//! (jkstill/trace-combine, two sessions of one instance, 8 `db file sequential read` waits
//! between them; origin in tests/fixtures/README.md). Their reads are read from the text here,
//! independently of iolens' parser.

mod common;
use common::real;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{bin, root_or_skip};
use serde_json::Value;

fn traces() -> [PathBuf; 2] {
    [real("js122a1_ora_9850.trc"), real("js122a1_ora_9854.trc")]
}

/// One traced read: (start µs on tim clock, ela µs, file#, block#, blocks).
type Read = (i64, i64, i64, u64, u64);

/// The `db file sequential read` / `db file scattered read` waits of a trace, read from the
/// text.
fn reads_of(path: &Path) -> Vec<Read> {
    let text = std::fs::read_to_string(path).unwrap();
    let field = |l: &str, k: &str| -> String {
        let i = l.find(k).unwrap() + k.len();
        l[i..].split_whitespace().next().unwrap().to_string()
    };
    text.lines()
        .filter(|l| {
            l.starts_with("WAIT #")
                && (l.contains("nam='db file sequential read'")
                    || l.contains("nam='db file scattered read'"))
        })
        .map(|l| {
            let ela: i64 = field(l, "ela= ").parse().unwrap();
            let tim: i64 = field(l, "tim=").parse().unwrap();
            (
                tim - ela,
                ela,
                field(l, "file#=").parse().unwrap(),
                field(l, "block#=").parse().unwrap(),
                field(l, "blocks=").parse().unwrap(),
            )
        })
        .collect()
}

const BS: u64 = 8192;
const MIB: u64 = 1 << 20;
/// The map the tests give: file#25 and file#26 each a 4 MiB region from a known first byte.
const REGIONS: [(i64, u64, u64); 2] = [(25, 0, 31_300 * BS), (26, 4 * MIB, 36_000 * BS)];

fn write_map(dir: &Path) -> PathBuf {
    let entries: Vec<Value> = REGIONS
        .iter()
        .map(|(f, at, first)| {
            serde_json::json!({"file": format!("file#{f}"), "target_offset": at,
                               "first_byte": first, "length": 4 * MIB})
        })
        .collect();
    let p = dir.join("map.json");
    std::fs::write(&p, serde_json::to_string(&entries).unwrap()).unwrap();
    p
}

/// Where a read must land in the target file: its 1 MiB header area, the region, the block.
fn expected_offset(file: i64, block: u64) -> u64 {
    let (_, at, first) = REGIONS.iter().find(|r| r.0 == file).unwrap();
    MIB + at + block * BS - first
}

fn replay(dir: &Path, target: &Path, extra: &[&str]) -> (Value, std::process::Output) {
    let json = dir.join(format!("r{}.json", rand_suffix()));
    let mut c = bin();
    c.arg("replay")
        .args(traces())
        .arg("--target")
        .arg(target)
        .arg("--map")
        .arg(write_map(dir))
        .arg("--json")
        .arg(&json)
        .arg("--no-progress")
        .args(extra);
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (v, out)
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The span the schedule must keep: the traces' first read start to their last read start.
fn traced_issue_span_s() -> f64 {
    let starts: Vec<i64> = traces()
        .iter()
        .flat_map(|p| reads_of(p))
        .map(|r| r.0)
        .collect();
    (starts.iter().max().unwrap() - starts.iter().min().unwrap()) as f64 / 1e6
}

#[test]
fn recorded_replay_of_a_real_trace_issues_every_read_once_at_its_offset_in_order() {
    if !root_or_skip("replay under strace and SCHED_FIFO") {
        return;
    }
    if Command::new("strace").arg("-V").output().is_err() {
        assert!(!common::ci(), "strace is missing");
        eprintln!("note: skipped: strace is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.dat");
    // The syscalls themselves, by thread.
    let log = dir.path().join("strace.log");
    let json = dir.path().join("r.json");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=pread64", "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_iolens"))
        .arg("replay")
        .args(traces())
        .arg("--target")
        .arg(&target)
        .arg("--map")
        .arg(write_map(dir.path()))
        .arg("--json")
        .arg(&json)
        .arg("--no-progress")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let main_pid: u64 = text.split_whitespace().next().unwrap().parse().unwrap();
    // tid → [(offset, size)] of every pread of a session thread.
    let mut by_tid: std::collections::BTreeMap<u64, Vec<(u64, u64)>> = Default::default();
    for l in text.lines().filter(|l| l.contains("pread64(")) {
        let tid: u64 = l.split_whitespace().next().unwrap().parse().unwrap();
        if tid == main_pid {
            continue; // the target's preparation (header, ownership samples)
        }
        let args = l.rsplit_once(", ").unwrap();
        let off: u64 = args.1.split(')').next().unwrap().parse().unwrap();
        let size: u64 = args.0.rsplit(", ").next().unwrap().parse().unwrap();
        by_tid.entry(tid).or_default().push((off, size));
    }
    // Each session's reads, in traced order, where the map puts them.
    let mut want: Vec<Vec<(u64, u64)>> = traces()
        .iter()
        .map(|p| {
            let mut r = reads_of(p);
            r.sort_by_key(|x| x.0);
            r.iter()
                .map(|&(_, _, f, b, n)| (expected_offset(f, b), n * BS))
                .collect()
        })
        .collect();
    let mut got: Vec<Vec<(u64, u64)>> = by_tid.into_values().collect();
    want.sort();
    got.sort();
    assert_eq!(want.iter().map(Vec::len).sum::<usize>(), 8);
    assert_eq!(
        got, want,
        "session threads' preads against the traces' reads"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &v["replay"];
    assert_eq!(r["replayed_ios"], 8);
    assert_eq!(r["errors"], 0);
    // Each block read held the stamp of the very offset it was read at.
    assert_eq!(r["stamp_checked"], 8);
    assert_eq!(r["misplaced"], 0);
    assert_eq!(r["reordered"], 0);
}

/// Issue span of a replay (s) and the schedule's.
fn spans(v: &Value) -> (f64, f64) {
    let r = &v["replay"];
    (
        r["replayed_span_s"].as_f64().unwrap(),
        r["scheduled_span_s"].as_f64().unwrap(),
    )
}

#[test]
fn recorded_timing_keeps_the_traced_span_and_scaled_2_halves_it() {
    if !root_or_skip("replay under SCHED_FIFO") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t.dat");
    let traced = traced_issue_span_s();
    // 91.086 ms between the first read's start and the last's, on the instance's tim clock.
    assert!((traced - 0.091086).abs() < 1e-9, "{traced}");
    let (rec, _) = replay(dir.path(), &target, &["--realtime"]);
    let (rs, ss) = spans(&rec);
    assert!(
        (ss - traced).abs() < 1e-6,
        "schedule {ss} s, trace {traced} s"
    );
    assert!(
        (rs - traced).abs() <= 0.01 * traced,
        "recorded: replayed span {rs} s, trace {traced} s"
    );
    let (half, _) = replay(dir.path(), &target, &["--realtime", "--timing", "scaled:2"]);
    let (hs, hss) = spans(&half);
    assert!((hss - traced / 2.0).abs() < 1e-6, "{hss}");
    assert!(
        (hs - traced / 2.0).abs() <= 0.01 * traced / 2.0,
        "scaled:2: replayed span {hs} s, half the trace's {} s",
        traced / 2.0
    );
    for v in [&rec, &half] {
        assert_eq!(v["replay"]["replayed_ios"], 8);
        assert_eq!(v["runs"][1]["phase"], "replay");
        assert_eq!(v["runs"][0]["ops"][0]["count"], 8);
    }
}

#[test]
fn think_on_a_slow_device_stretches_sessions_by_the_added_latency_only() {
    let delay = Duration::from_millis(25);
    let Some(dev) = common::slowdev::SlowDevice::new(delay, 16 << 20) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let target = PathBuf::from(&dev.dev);
    let (think, _) = replay(dir.path(), &target, &["--realtime", "--timing", "think"]);
    let (recorded, _) = replay(dir.path(), &target, &["--realtime"]);
    // Session 504.46635 (js122a1_ora_9850.trc): 7 reads; its recorded think time is its span
    // less its reads' recorded latencies.
    let mut reads = reads_of(&traces()[0]);
    reads.sort_by_key(|r| r.0);
    assert_eq!(reads.len(), 7);
    let span_us = reads.iter().map(|r| r.0 + r.1).max().unwrap() - reads[0].0;
    let think_us: i64 = span_us - reads.iter().map(|r| r.1).sum::<i64>();
    let s = think["replay"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session"].as_str().unwrap().contains("504.46635"))
        .unwrap()
        .clone();
    let n = s["ios"].as_f64().unwrap();
    let replayed_lat_s = s["replayed"]["mean_ns"].as_f64().unwrap() * n / 1e9;
    let replayed_s = s["replayed_s"].as_f64().unwrap();
    let late_s = s["late_s"].as_f64().unwrap();
    // Every read waited the device's delay: the session took its think time plus the new
    // latencies plus its own wake-ups' lateness (measured), nothing else (histogram means are
    // exact to 0.1 %; 0.5 ms for the last completion's clock reads).
    assert!(
        replayed_lat_s >= n * delay.as_secs_f64(),
        "{replayed_lat_s}"
    );
    let want = think_us as f64 / 1e6 + replayed_lat_s + late_s;
    assert!(
        (replayed_s - want).abs() <= 0.0005 + 0.002 * want,
        "think: session took {replayed_s} s, think time + replayed latency + lateness {want} s"
    );
    // The recorded session took its span; the replay stretched it by the added latency.
    assert!(replayed_s > span_us as f64 / 1e6 + n * (delay.as_secs_f64() - 0.02));
    // The same device under recorded timing cannot keep the schedule: gaps between reads
    // (0.2–2.8 ms) are shorter than the 25 ms each read now takes.
    assert!(!recorded["replay"]["kept_up"].as_bool().unwrap());
    assert!(
        recorded["replay"]["issue_error"]["max_ns"]
            .as_u64()
            .unwrap()
            > 20_000_000
    );
}

#[test]
fn writes_are_refused_without_writes_and_on_a_target_iolens_did_not_create() {
    let dir = tempfile::tempdir().unwrap();
    // bcc's biosnoop example: every row a write.
    let src = real("bcc_biosnoop.txt");
    let other = dir.path().join("not-ours.dat");
    let data: Vec<u8> = (0..(8u32 << 20)).map(|i| (i % 251) as u8).collect();
    std::fs::write(&other, &data).unwrap();
    let map = dir.path().join("map.json");
    std::fs::write(
        &map,
        r#"[{"file":"disk xvda1","target_offset":0,"first_byte":6702497792,"length":58720256}]"#,
    )
    .unwrap();
    let run = |extra: &[&str], target: &Path| {
        bin()
            .arg("replay")
            .arg(&src)
            .arg("--target")
            .arg(target)
            .arg("--map")
            .arg(&map)
            .arg("--no-progress")
            .args(extra)
            .output()
            .unwrap()
    };
    let no_flag = run(&[], &other);
    assert_eq!(no_flag.status.code(), Some(2));
    let e = String::from_utf8_lossy(&no_flag.stderr);
    assert!(e.contains("--writes"), "{e}");
    let not_ours = run(&["--writes"], &other);
    assert_eq!(not_ours.status.code(), Some(2));
    let e = String::from_utf8_lossy(&not_ours.stderr);
    assert!(e.contains("scratch file iolens created"), "{e}");
    assert!(
        std::fs::read(&other).unwrap() == data,
        "the file was changed"
    );
    // On a scratch file iolens creates, the disk's writes are written where the map says:
    // then read back, each block holds the stamp of its own offset.
    let ours = dir.path().join("ours.dat");
    let json = dir.path().join("w.json");
    let out = run(
        &[
            "--writes",
            "--json",
            json.to_str().unwrap(),
            "--timing",
            "fast",
        ],
        &ours,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let xvda1: Vec<(u64, u64)> = std::fs::read_to_string(&src)
        .unwrap()
        .lines()
        .filter(|l| l.contains(" xvda1 "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[5].parse().unwrap(), f[6].parse().unwrap())
        })
        .collect();
    assert_eq!(v["replay"]["replayed_ios"], xvda1.len() as u64);
    assert_eq!(v["replay"]["errors"], 0);
    let verify = bin()
        .args(["verify", "--target"])
        .arg(&ours)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "verify after the replay's writes: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
}
