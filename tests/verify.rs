//! Block stamps and verification end to end, on real temp files with real I/O: corruption
//! injected while runs are going (flipped bytes, misdirected blocks, lost writes,
//! truncation), no false positives under heavy concurrent rewriting, foreign and old-format
//! targets, the offline `iolens verify`, exit codes, and no allocation per verified I/O.

use std::alloc::{GlobalAlloc, Layout, System};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use iolens::results::{Results, RunResult};
use iolens::run::execute;
use iolens::stamp::{OnCorruption, VerifyMode};
use iolens::target::{PrepareOptions, Target, HEADER_AREA};
use iolens::verify::{verify_target, OfflineOptions};
use iolens::workload::{EngineKind, Pattern, WorkloadSpec};

/// Counts every allocation of this test binary (all threads).
struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The allocation test runs alone; the others may run together.
static EXCLUSIVE: RwLock<()> = RwLock::new(());

mod common;
use common::{bin, opts};
use common::{read_at, write_at};

const MB: u64 = 1 << 20;
const BS: u64 = 8192;

fn scratch(path: &Path, size: u64) -> Target {
    common::scratch(path, size, true)
}

fn spec(t: &Target) -> WorkloadSpec {
    WorkloadSpec {
        target: t.path.display().to_string(),
        target_size: t.data_size,
        duration_s: None,
        io_count: Some(2000),
        interval_s: 0.1,
        ..Default::default()
    }
}

fn run(s: &WorkloadSpec, t: &Target) -> RunResult {
    execute(s, t, &opts(&AtomicBool::new(false))).expect("run")
}

fn offline(path: &Path) -> RunResult {
    verify_target(
        path,
        &OfflineOptions {
            full: true,
            chunk: 1 << 20,
            stop_at_first: false,
            direct: false,
            progress: false,
            journal: true,
        },
        &AtomicBool::new(false),
    )
    .expect("offline verify")
}

#[test]
fn flipped_bytes_during_a_read_run_are_detected_with_their_offset() {
    let _g = EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.dat");
    let t = scratch(&path, 8 * MB);
    let json = dir.path().join("r.json");
    let child = bin()
        .args([
            "run",
            "--duration",
            "60s",
            "--working-set",
            "1M",
            "--no-progress",
        ])
        .arg("--target")
        .arg(&path)
        .arg("--json")
        .arg(&json)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    // Flip one byte in the payload of the 4th unit of block 37 (inside the working set).
    let unit = t.data_offset + 37 * BS + 3 * 512;
    let b = read_at(&path, unit + 300, 1);
    write_at(&path, unit + 300, &[b[0] ^ 0x5a]);
    let t0 = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(30), "run stopped early");
    assert_eq!(out.status.code(), Some(3), "corruption exits with 3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("DATA CORRUPTION DETECTED"), "{stdout}");
    let r = Results::read_file(&json).unwrap();
    let run = &r.runs[0];
    let c = &run.corruption;
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].kind, "checksum");
    assert_eq!(c[0].offset, unit, "the flipped unit's offset");
    assert_eq!(c[0].io_offset, t.data_offset + 37 * BS);
    assert_ne!(c[0].expected, c[0].found);
    let v = run.verify.as_ref().unwrap();
    assert_eq!((v.mode.name(), v.errors, v.stopped), ("full", 1, true));
    assert!(v.reads_verified > 0 && v.units_verified == v.reads_verified * 16);
    assert!(v.ns_per_read > 0.0, "verification cost is measured");
}

#[test]
fn a_block_copied_over_another_is_reported_as_misdirected() {
    let _g = EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.dat");
    let t = scratch(&path, 2 * MB);
    let (from, to) = (t.data_offset + 3 * BS, t.data_offset + 200 * BS);
    write_at(&path, to, &read_at(&path, from, BS as usize));
    for verify in [VerifyMode::Header, VerifyMode::Full] {
        let r = run(
            &WorkloadSpec {
                verify,
                io_count: Some(100_000),
                direct: false,
                ..spec(&t)
            },
            &t,
        );
        assert!(r.total_count() < 100_000, "stopped at the first corruption");
        assert_eq!(r.corruption.len(), 1, "{:?}", r.corruption);
        let c = &r.corruption[0];
        assert_eq!(c.kind, "misdirected", "{verify:?}");
        assert_eq!((c.offset, c.units), (to, 16), "the whole block, grouped");
        assert_eq!(c.expected, format!("offset {to}"));
        assert_eq!(c.found, format!("offset {from}"));
    }
    let r = offline(&path);
    assert_eq!(r.corruption.len(), 1);
    assert_eq!(r.corruption[0].kind, "misdirected");
    assert_eq!(r.corruption[0].offset, to);
    assert_eq!(r.verify.as_ref().unwrap().errors, 16);
    let out = bin()
        .args(["verify", "--no-progress", "--target"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("misdirected") && stdout.contains(&format!("offset {from}")),
        "{stdout}"
    );
}

#[test]
fn an_older_version_written_back_during_a_write_workload_is_a_lost_write() {
    let _g = EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.dat");
    let t = scratch(&path, 2 * MB);
    // The version of block 0 as filled, before the run rewrites it.
    let block0 = t.data_offset;
    let old = read_at(&path, block0, BS as usize);
    let done = AtomicBool::new(false);
    let s = WorkloadSpec {
        pattern: Pattern::Randrw,
        read_pct: 50,
        region_size: 8 * BS,
        direct: false,
        io_count: None,
        duration_s: Some(1.5),
        on_corruption: OnCorruption::Continue,
        ..spec(&t)
    };
    let r = std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            while !done.load(Ordering::Relaxed) {
                f.write_all_at(&old, block0).unwrap();
                std::thread::sleep(Duration::from_millis(3));
            }
        });
        let r = run(&s, &t);
        done.store(true, Ordering::Relaxed);
        r
    });
    let lost: Vec<_> = r
        .corruption
        .iter()
        .filter(|c| c.kind == "lost-write")
        .collect();
    assert!(!lost.is_empty(), "lost write detected: {:?}", r.corruption);
    assert_eq!(lost[0].offset, block0);
    assert!(lost[0].found.contains("fill"), "{:?}", lost[0]);
    assert!(lost[0].expected.starts_with("generation "), "{:?}", lost[0]);
    assert!(
        r.corruption.iter().all(|c| c.io_offset == block0),
        "only the block written back is reported: {:?}",
        r.corruption
    );
    let v = r.verify.as_ref().unwrap();
    assert!(v.generation_checks > 0 && v.writes_stamped > 0 && !v.stopped);
}

#[test]
fn heavy_concurrent_rewriting_of_few_blocks_reports_nothing() {
    let _g = EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.dat");
    let t = scratch(&path, 2 * MB);
    for (engine, qd, direct) in [
        (EngineKind::Uring, 8, false),
        (EngineKind::Uring, 8, true),
        (EngineKind::Sync, 1, false),
    ] {
        let r = run(
            &WorkloadSpec {
                pattern: Pattern::Randrw,
                read_pct: 50,
                region_size: 4 * BS,
                engine,
                qd,
                sessions: 2,
                direct,
                io_count: Some(6000),
                ..spec(&t)
            },
            &t,
        );
        let v = r.verify.as_ref().unwrap();
        assert!(r.corruption.is_empty(), "{engine:?}: {:?}", r.corruption);
        assert_eq!(v.errors, 0);
        assert_eq!(r.total_count(), 6000);
        assert!(v.generation_checks > 0, "{engine:?}: {v:?}");
        assert!(v.writes_stamped > 2000 && v.reads_verified > 2000);
    }
    // Different block sizes on the same file: 512-byte writes, then 64 KiB reads.
    let r = run(
        &WorkloadSpec {
            pattern: Pattern::Randwrite,
            block_size: 512,
            ..spec(&t)
        },
        &t,
    );
    assert!(r.corruption.is_empty());
    let r = run(
        &WorkloadSpec {
            block_size: 64 << 10,
            ..spec(&t)
        },
        &t,
    );
    assert!(r.corruption.is_empty(), "{:?}", r.corruption);
    let off = offline(&path);
    let v = off.verify.as_ref().unwrap();
    assert_eq!(v.errors, 0, "{:?}", off.corruption);
    assert_eq!(v.units_verified, 2 * MB / 512);
    assert!(v.units_rewritten > 1000, "{v:?}");
}

#[test]
fn truncating_the_target_is_a_clear_error() {
    let _g = EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.dat");
    let t = scratch(&path, 8 * MB);
    let r = std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.set_len(HEADER_AREA + MB).unwrap();
        });
        run(
            &WorkloadSpec {
                io_count: None,
                duration_s: Some(20.0),
                ..spec(&t)
            },
            &t,
        )
    });
    assert!(r.duration_s < 10.0, "stopped at the first short read");
    assert_eq!(r.corruption.len(), 1, "{:?}", r.corruption);
    let c = &r.corruption[0];
    assert_eq!(c.kind, "truncated");
    assert!(c.io_offset >= HEADER_AREA + MB);
    assert!(
        c.message.contains("truncated")
            && c.message
                .contains(&format!("now {} bytes", HEADER_AREA + MB)),
        "{}",
        c.message
    );
    // Offline: the header says 8 MiB of data, the file holds 1 MiB.
    let out = bin()
        .args(["verify", "--no-progress", "--target"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("target truncated") && stdout.contains("7 MiB missing"),
        "{stdout}"
    );
}

#[test]
fn foreign_targets_are_not_verified_and_refuse_explicit_verification() {
    let _g = EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.db");
    std::fs::write(&path, vec![7u8; 2 * MB as usize]).unwrap();
    let t = Target::prepare(&path, &PrepareOptions::default(), &AtomicBool::new(false)).unwrap();
    let r = run(
        &WorkloadSpec {
            direct: false,
            ..spec(&t)
        },
        &t,
    );
    let v = r.verify.as_ref().unwrap();
    assert_eq!(v.mode, "none");
    assert!(v.note.contains("did not create"), "{}", v.note);
    assert!(r.corruption.is_empty());
    let stored: WorkloadSpec = serde_json::from_value(r.spec_value()).unwrap();
    assert_eq!(
        stored.verify,
        VerifyMode::None,
        "the resolved mode is stored"
    );
    for verify in [VerifyMode::Full, VerifyMode::Header] {
        let e = execute(
            &WorkloadSpec {
                verify,
                direct: false,
                ..spec(&t)
            },
            &t,
            &opts(&AtomicBool::new(false)),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("needs blocks stamped by iolens"), "{e}");
    }
    let out = bin()
        .args([
            "run",
            "--ios",
            "100",
            "--buffered",
            "--no-progress",
            "--target",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Verify: none"));
    let out = bin()
        .args(["verify", "--no-progress", "--target"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not created by iolens"));
    assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 2 * MB as usize]);
}

#[test]
fn an_old_format_scratch_file_is_never_refilled_without_proof_of_ownership() {
    let _g = EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.dat");
    let t = scratch(&path, 2 * MB);
    // Make it look like format 1: version 1 and unstamped data.
    write_at(&path, 16, &1u32.to_le_bytes());
    write_at(&path, t.data_offset, &vec![0u8; 64 << 10]);
    let out = bin()
        .args(["verify", "--no-progress", "--target"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("older iolens"));
    // Its ownership cannot be proven (no generation journal is bound to it): no command
    // writes to it, not even with --refill (issue 22, item 3), and no message recommends it.
    let before = std::fs::read(&path).unwrap();
    let e = Target::prepare(
        &path,
        &PrepareOptions {
            size: Some(2 * MB),
            writes: true,
            ..Default::default()
        },
        &AtomicBool::new(false),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("older iolens") && !e.contains("rewrite it with --refill"),
        "{e}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "left as found");
    let e = Target::prepare(
        &path,
        &PrepareOptions {
            size: Some(2 * MB),
            writes: true,
            refill: true,
            ..Default::default()
        },
        &AtomicBool::new(false),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--refill does not rewrite it"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "left as found");
}

#[test]
fn the_offline_check_reads_everything_and_writes_json() {
    let _g = EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.dat");
    scratch(&path, 4 * MB);
    let json = dir.path().join("v.json");
    let out = bin()
        .args([
            "verify",
            "--no-progress",
            "--mode",
            "header",
            "--bs",
            "1M",
            "--target",
        ])
        .arg(&path)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("No corruption found"));
    let r = Results::read_file(&json).unwrap();
    assert_eq!(r.kind, iolens::results::Kind::Verify);
    let run = &r.runs[0];
    assert_eq!(run.ops[0].count, 4, "four 1 MiB reads");
    assert_eq!(run.ops[0].bytes, 4 * MB);
    let v = run.verify.as_ref().unwrap();
    assert_eq!((v.mode.name(), v.units_verified), ("header", 4 * MB / 512));
    // The hidden in-process benchmark reports figures.
    let out = bin()
        .args(["verify", "--bench", "--bench-bs", "8k"])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && s.contains("full_hot_ns="), "{s}");
}

/// Allocations of a whole run with `n` I/Os.
fn allocs_of(s: &WorkloadSpec, t: &Target, n: u64) -> u64 {
    let s = WorkloadSpec {
        io_count: Some(n),
        interval_s: 60.0,
        ..s.clone()
    };
    let before = ALLOCS.load(Ordering::SeqCst);
    let r = run(&s, t);
    let after = ALLOCS.load(Ordering::SeqCst);
    assert!(r.corruption.is_empty());
    drop(r);
    after - before
}

#[test]
fn verification_adds_no_allocation_per_io() {
    let _g = EXCLUSIVE.write().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.dat");
    let t = scratch(&path, 4 * MB);
    for pattern in [Pattern::Randread, Pattern::Randrw] {
        let base = WorkloadSpec {
            pattern,
            read_pct: if pattern == Pattern::Randrw { 50 } else { 100 },
            direct: false,
            ..spec(&t)
        };
        let mut extra = Vec::new();
        for verify in [VerifyMode::None, VerifyMode::Full] {
            let s = WorkloadSpec {
                verify,
                ..base.clone()
            };
            allocs_of(&s, &t, 500); // warm up lazily initialised state
            let small = allocs_of(&s, &t, 1000);
            let large = allocs_of(&s, &t, 21_000);
            extra.push(large as i64 - small as i64);
        }
        // 20,000 more verified I/Os may cost a few time-driven allocations (collector polls),
        // never one per I/O.
        assert!(
            extra[1] - extra[0] < 200,
            "{pattern:?}: allocations for 20k more I/Os: none {} full {}",
            extra[0],
            extra[1]
        );
    }
}
