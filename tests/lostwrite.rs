//! Offline lost-write detection with the generation journal, end to end on real files: a block
//! restored from an older copy after a write run is found by `iolens verify` (exit 3, with its
//! offset and generations); an untouched file passes; a damaged, missing, foreign or
//! impostor journal is reported or refused, never used or overwritten; runs with different
//! block sizes keep the journal right.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::AtomicBool;

use iolens::journal::{path_for, PAGE};
use iolens::run::execute;
use iolens::target::{Target, HEADER_AREA};
use iolens::workload::{Pattern, WorkloadSpec};

mod common;
use common::{bin, opts};
use common::{read_at, write_at};

const MB: u64 = 1 << 20;
const BS: u64 = 8192;

/// `iolens run --pattern randwrite` on a small working set, so every block is rewritten.
fn write_run(path: &Path, bs: &str, working_set: &str, offset: &str) -> Output {
    bin()
        .args([
            "run",
            "--no-progress",
            "--buffered",
            "--pattern",
            "randwrite",
        ])
        .args(["--bs", bs, "--working-set", working_set, "--offset", offset])
        .args(["--ios", "600", "--size", "4M", "--target"])
        .arg(path)
        .output()
        .unwrap()
}

fn verify(path: &Path, extra: &[&str]) -> (i32, String) {
    let out = bin()
        .args(["verify", "--no-progress", "--target"])
        .arg(path)
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.dat");
    common::scratch(&path, 4 * MB, true);
    (dir, path)
}

/// `iolens run` on `path` with `args`, then `--size SIZE --target PATH`.
fn run_sized(path: &Path, size: &str, args: &[&str]) -> Output {
    bin()
        .args(["run", "--no-progress", "--buffered"])
        .args(args)
        .args(["--size", size, "--target"])
        .arg(path)
        .output()
        .unwrap()
}

#[test]
fn growing_is_asked_for_and_the_journal_grows_with_the_file() {
    let (_d, path) = setup();
    ok(&write_run(&path, "8k", "64k", "0"));
    let jpath = path_for(&path);
    let (data, journal) = (
        std::fs::read(&path).unwrap(),
        std::fs::read(&jpath).unwrap(),
    );
    // 4 MiB at an 8 KiB granule: 512 entries, 2 pages after the header page.
    assert_eq!(journal.len(), 3 * PAGE);
    // A larger --size without --grow is refused, reading or writing, naming the flag; the
    // file and its journal are left as they were.
    for pattern in ["randread", "randwrite"] {
        let out = run_sized(&path, "8M", &["--pattern", pattern, "--ios", "50"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{pattern}: {err}");
        assert!(err.contains("--grow") && err.contains("4 MiB"), "{err}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            data,
            "{pattern}: file untouched"
        );
        assert_eq!(
            std::fs::read(&jpath).unwrap(),
            journal,
            "{pattern}: journal untouched"
        );
    }
    // Grown by a read-only run: the journal covers the whole new size before any write
    // (8 MiB: 1,024 entries, 3 pages), its old pages kept.
    ok(&run_sized(
        &path,
        "8M",
        &["--pattern", "randread", "--ios", "50", "--grow"],
    ));
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        HEADER_AREA + 8 * MB
    );
    let grown = std::fs::read(&jpath).unwrap();
    assert_eq!(grown.len(), 4 * PAGE);
    assert_eq!(
        grown[PAGE..3 * PAGE],
        journal[PAGE..3 * PAGE],
        "old bounds kept"
    );
    let (code, text) = verify(&path, &[]);
    assert_eq!(code, 0, "{text}");
    // A lost write in the grown part is found like any other.
    let blk = HEADER_AREA + 6 * MB + 3 * BS;
    let old = read_at(&path, blk, BS as usize);
    ok(&run_sized(
        &path,
        "8M",
        &[
            "--pattern",
            "randwrite",
            "--bs",
            "8k",
            "--working-set",
            "64k",
            "--offset",
            "6M",
            "--ios",
            "600",
        ],
    ));
    write_at(&path, blk, &old);
    let (code, text) = verify(&path, &[]);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains(&format!("stale at offset {blk} ")), "{text}");
}

#[test]
fn a_block_restored_from_an_older_copy_after_the_run_is_stale() {
    let (_d, path) = setup();
    // The "old snapshot" of block 3 of the working set, taken before the run.
    let blk = HEADER_AREA + 3 * BS;
    let old = read_at(&path, blk, BS as usize);
    ok(&write_run(&path, "8k", "64k", "0"));
    assert!(path_for(&path).exists(), "the run created the journal");
    assert_ne!(read_at(&path, blk, BS as usize), old, "the run rewrote it");

    // Untouched after the run: clean.
    let (code, text) = verify(&path, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("No corruption found"), "{text}");

    // Restored from the older copy: stale, named with its offset and generations.
    let newer = read_at(&path, blk, BS as usize);
    write_at(&path, blk, &old);
    let (code, text) = verify(&path, &[]);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains(&format!("stale at offset {blk} ")), "{text}");
    assert!(text.contains("found generation fill"), "{text}");
    assert!(text.contains("16 consecutive units"), "{text}");
    assert!(
        !text.contains(&format!("offset {} ", blk + BS)),
        "only that block: {text}"
    );
    // Explicitly without the journal it goes unnoticed (and says so).
    let (code, text) = verify(&path, &["--no-journal"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("stale blocks are not detected"), "{text}");

    // Restored from a copy taken after an earlier run: stale too (generations grow from run
    // to run). Put the newer version back, run again, then restore the previous run's copy.
    write_at(&path, blk, &newer);
    ok(&write_run(&path, "8k", "64k", "0"));
    assert_eq!(verify(&path, &[]).0, 0);
    write_at(&path, blk, &newer);
    let (code, text) = verify(&path, &[]);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains(&format!("stale at offset {blk} ")), "{text}");
}

#[test]
fn a_damaged_or_missing_journal_is_reported_and_never_overwritten() {
    let (_d, path) = setup();
    ok(&write_run(&path, "8k", "64k", "0"));
    let jp = path_for(&path);
    let pristine = std::fs::read(&jp).unwrap();

    // A torn entry page: reported with the offsets it covers, non-zero.
    let mut torn = pristine.clone();
    torn[PAGE + 100] ^= 0x40;
    std::fs::write(&jp, &torn).unwrap();
    let (code, text) = verify(&path, &[]);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("journal-damaged"), "{text}");
    assert!(
        text.contains("page 0 is torn, damaged or missing"),
        "{text}"
    );
    // A run refuses to write over the evidence.
    let o = write_run(&path, "8k", "64k", "0");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("fails its checksum"));
    assert!(std::fs::read(&jp).unwrap() == torn, "journal left as found");

    // A damaged header.
    let mut bad = pristine.clone();
    bad[30] ^= 1;
    std::fs::write(&jp, &bad).unwrap();
    let (code, text) = verify(&path, &[]);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("is unusable"), "{text}");
    assert!(text.contains("checksum"), "{text}");

    // A truncated journal.
    std::fs::write(&jp, &pristine[..PAGE + 100]).unwrap();
    let (code, text) = verify(&path, &[]);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("journal-damaged"), "{text}");

    // Missing, though workloads rewrote blocks.
    std::fs::remove_file(&jp).unwrap();
    let (code, text) = verify(&path, &[]);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("journal-missing"), "{text}");
    assert_eq!(verify(&path, &["--no-journal"]).0, 0);
}

#[test]
fn a_journal_of_another_file_or_no_journal_at_all_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.dat"), dir.path().join("b.dat"));
    common::scratch(&a, 4 * MB, true);
    common::scratch(&b, 4 * MB, true);
    ok(&write_run(&a, "8k", "64k", "0"));
    ok(&write_run(&b, "8k", "64k", "0"));
    // b's journal put beside a: another target.
    std::fs::copy(path_for(&b), path_for(&a)).unwrap();
    let (code, text) = verify(&a, &[]);
    assert!(code != 0 && code != 3, "{text}");
    assert!(text.contains("belongs to another iolens target"), "{text}");
    let o = write_run(&a, "8k", "64k", "0");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("belongs to another"));

    // a replaced by a copy of b (same target id, another inode): the journal cannot vouch.
    std::fs::remove_file(&a).unwrap();
    std::fs::copy(&b, &a).unwrap();
    let (code, text) = verify(&a, &[]);
    assert!(code != 0 && code != 3, "{text}");
    assert!(text.contains("written for another file"), "{text}");

    // Something that is not a journal at the journal's path is never touched.
    let c = dir.path().join("c.dat");
    common::scratch(&c, 4 * MB, true);
    std::fs::write(path_for(&c), b"precious").unwrap();
    let o = write_run(&c, "8k", "64k", "0");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a usable iolens generation journal"));
    assert_eq!(std::fs::read(path_for(&c)).unwrap(), b"precious");
    // And a symlink there is not followed.
    std::fs::remove_file(path_for(&c)).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    std::os::unix::fs::symlink(&victim, path_for(&c)).unwrap();
    let o = write_run(&c, "8k", "64k", "0");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("symbolic link"));
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
}

#[test]
fn runs_with_different_block_sizes_keep_the_journal_right() {
    let (_d, path) = setup();
    let a = HEADER_AREA + 2 * BS; // written by the 8 KiB run
    let b = HEADER_AREA + 256 * 1024 + 4096; // written by the 4 KiB run (offset 256 KiB)
    let c = HEADER_AREA + 512 * 1024 + 3 * 65536; // written by the 64 KiB run
    let old_a = read_at(&path, a, BS as usize);
    let old_b = read_at(&path, b, 4096);
    let old_c = read_at(&path, c, 65536);
    ok(&write_run(&path, "8k", "32k", "0"));
    ok(&write_run(&path, "4k", "16k", "256k")); // finer: the journal is re-grained
    ok(&write_run(&path, "64k", "256k", "512k")); // coarser: one write covers 16 granules
    let (code, text) = verify(&path, &[]);
    assert_eq!(code, 0, "no false report after mixed block sizes: {text}");
    assert!(text.contains("entries of 4096 B"), "{text}");
    for (off, old) in [(a, &old_a), (b, &old_b), (c, &old_c)] {
        let cur = read_at(&path, off, old.len());
        write_at(&path, off, old);
        let (code, text) = verify(&path, &[]);
        assert_eq!(code, 3, "{text}");
        assert!(text.contains(&format!("stale at offset {off} ")), "{text}");
        write_at(&path, off, &cur);
    }
    assert_eq!(verify(&path, &[]).0, 0);
}

#[test]
fn concurrent_sessions_never_make_the_journal_ahead_of_the_data() {
    // Many sessions rewriting few blocks with overlapping writes, a run long enough for
    // interval flushes: the journal never claims a generation the data does not hold.
    let (_d, path) = setup();
    let t: Target = common::scratch(&path, 4 * MB, true);
    let s = WorkloadSpec {
        pattern: Pattern::Randwrite,
        target: path.display().to_string(),
        target_size: t.data_size,
        region_size: 16 * BS,
        sessions: 8,
        direct: true,
        duration_s: Some(2.5),
        interval_s: 0.5,
        ..Default::default()
    };
    let r = execute(&s, &t, &opts(&AtomicBool::new(false))).expect("run");
    assert!(r.corruption.is_empty());
    // At least one flush during the run (every 2 s), and the last one after it.
    let j = std::fs::read(path_for(&path)).unwrap();
    let flushes = u64::from_le_bytes(j[72..80].try_into().unwrap());
    assert!(flushes >= 2, "flushes: {flushes}");
    let (code, text) = verify(&path, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("generation journal"), "{text}");
}
