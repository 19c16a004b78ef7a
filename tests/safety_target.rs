//! "It wrote where it must not" (issue 10, items 1, 2, 3, 5, 6, 7) and the fill's clean stop:
//! each test reproduces, on real files (and, as root, real loop devices), a way iolens once
//! wrote into data it did not create or destroyed evidence, and proves the bytes are now
//! unchanged. Tests needing root skip with a message elsewhere, unless CI is set (then they fail).

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use iolens::target::{Header, PrepareOptions, Target, FORMAT_VERSION, HEADER_AREA};

mod common;
use common::loopdev::Loop;
use common::{bin, root_or_skip};

const MB: u64 = 1 << 20;

fn foreign(path: &Path, len: u64) -> Vec<u8> {
    let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(path, &data).unwrap();
    data
}

fn scratch(path: &Path, size: u64) -> Target {
    common::scratch(path, size, false)
}

fn iolens(args: &[&str], target: &Path) -> Output {
    bin()
        // calibrate leaves a dated results file in the working directory.
        .current_dir(target.parent().unwrap())
        .args(args)
        .arg("--no-progress")
        .arg("--target")
        .arg(target)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Replace `link` atomically by a symbolic link to `to`.
fn point(link: &Path, to: &Path) {
    let tmp = link.with_extension("swap-tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(to, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

// ---------------------------------------------------------------------------------------------
// 1. The target is opened once and held by descriptor

/// A thread keeps re-pointing the symbolic link the user named between the scratch file and a
/// foreign file while `calibrate --phases writes` runs: every step must use the descriptor
/// opened at the start, so the foreign file is never written.
#[test]
fn a_symlink_swapped_during_calibrate_writes_never_reaches_the_foreign_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s.dat");
    drop(scratch(&s, 16 * MB));
    let f = dir.path().join("foreign.db");
    let before = foreign(&f, 17 * MB);
    let link = dir.path().join("target");
    point(&link, &s);
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(400));
            while !stop.load(Ordering::Relaxed) {
                point(&link, &f);
                std::thread::sleep(Duration::from_millis(15));
                point(&link, &s);
                std::thread::sleep(Duration::from_millis(15));
            }
        });
        let out = iolens(
            &[
                "calibrate",
                "--phases",
                "writes",
                "--budget",
                "8s",
                "--buffered",
            ],
            &link,
        );
        stop.store(true, Ordering::Relaxed);
        out
    });
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::read(&f).unwrap() == before, "foreign file changed");
}

/// `run --pattern randwrite` on a plain path that a thread keeps replacing with a symbolic
/// link to a foreign file (and back): whatever the timing, the foreign file is never written.
#[test]
fn a_path_replaced_by_a_symlink_during_randwrite_runs_never_reaches_the_foreign_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.dat");
    drop(scratch(&p, 8 * MB));
    let keep = dir.path().join("s.keep");
    std::fs::hard_link(&p, &keep).unwrap();
    let f = dir.path().join("foreign.db");
    let before = foreign(&f, 9 * MB);
    let stop = AtomicBool::new(false);
    let mut ok = 0;
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let back = dir.path().join("s.back");
            while !stop.load(Ordering::Relaxed) {
                point(&p, &f);
                std::thread::sleep(Duration::from_millis(3));
                let _ = std::fs::remove_file(&back);
                std::fs::hard_link(&keep, &back).unwrap();
                std::fs::rename(&back, &p).unwrap();
                std::thread::sleep(Duration::from_millis(3));
            }
        });
        for _ in 0..30 {
            let out = iolens(
                &[
                    "run",
                    "--pattern",
                    "randwrite",
                    "--ios",
                    "300",
                    "--buffered",
                ],
                &p,
            );
            ok += out.status.success() as u32;
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(std::fs::read(&f).unwrap() == before, "foreign file changed");
    assert!(
        ok > 0,
        "no run got the scratch file: the test proved nothing"
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Ownership is proven by the checksummed header and the data's own stamps

#[test]
fn a_scratch_header_copied_onto_a_foreign_file_proves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s.dat");
    drop(scratch(&s, 8 * MB));
    let f = dir.path().join("foreign.db");
    foreign(&f, 8 * MB);
    let head = std::fs::read(&s).unwrap()[..4096].to_vec();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .write_all_at(&head, 0)
        .unwrap();
    let before = std::fs::read(&f).unwrap();
    for args in [
        &[
            "run",
            "--pattern",
            "randwrite",
            "--ios",
            "200",
            "--buffered",
        ][..],
        &["run", "--ios", "200", "--buffered"][..],
        &[
            "run",
            "--pattern",
            "randwrite",
            "--ios",
            "200",
            "--size",
            "8M",
        ][..],
    ] {
        let out = iolens(args, &f);
        assert!(!out.status.success(), "{args:?} ran on a foreign file");
        assert!(
            stderr(&out).contains("not belong") || stderr(&out).contains("truncated"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(std::fs::read(&f).unwrap() == before, "{args:?} wrote");
    }
    // Same header with the version field changed: a read-only run must not "refill" it.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .write_all_at(&2u32.to_le_bytes(), 16)
        .unwrap();
    let before = std::fs::read(&f).unwrap();
    for args in [
        &["run", "--ios", "200", "--buffered"][..],
        &["run", "--pattern", "randwrite", "--ios", "200"][..],
        &["verify"][..],
    ] {
        let out = iolens(args, &f);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("older iolens"), "{}", stderr(&out));
        assert!(std::fs::read(&f).unwrap() == before, "{args:?} wrote");
    }
}

/// Write a valid (checksummed) header claiming `data_size`/`filled` over scratch file `p`.
fn forge(p: &Path, data_size: u64, filled: u64) {
    let id = iolens::target::read_scratch_header(p).unwrap().id;
    let h = Header {
        version: FORMAT_VERSION,
        unit: 512,
        data_size,
        filled_upto: filled,
        id,
    };
    std::fs::OpenOptions::new()
        .write(true)
        .open(p)
        .unwrap()
        .write_all_at(&h.encode(), 0)
        .unwrap();
}

#[test]
fn a_header_claiming_more_than_the_file_holds_is_refused_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s.dat");
    drop(scratch(&s, 8 * MB));
    forge(&s, 1 << 30, 1 << 30);
    let before = std::fs::read(&s).unwrap();
    for args in [
        &["run", "--ios", "100", "--buffered"][..],
        &["run", "--pattern", "randwrite", "--ios", "100"][..],
    ] {
        let out = iolens(args, &s);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("truncated"), "{}", stderr(&out));
        assert!(std::fs::read(&s).unwrap() == before, "{args:?} wrote");
    }
}

/// A header claiming 1 GiB of which 8 MiB is filled, on a 64 MiB filesystem: a read-only run
/// does not fill (it used to fill the filesystem), and a writing one is refused for room.
#[test]
fn a_read_only_run_never_fills_a_partly_filled_scratch_file() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let small = root_or_skip("a 64 MiB tmpfs")
        && Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64M", "tmpfs"])
            .arg(&mnt)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
    struct Umount(PathBuf, bool);
    impl Drop for Umount {
        fn drop(&mut self) {
            if self.1 {
                let _ = Command::new("umount").arg(&self.0).status();
            }
        }
    }
    let _u = Umount(mnt.clone(), small);
    let s = mnt.join("s.dat");
    drop(scratch(&s, 8 * MB));
    forge(&s, 1 << 30, 8 * MB);
    let before = std::fs::read(&s).unwrap();
    let out = iolens(&["run", "--ios", "100", "--buffered"], &s);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("filled only up to"),
        "{}",
        stderr(&out)
    );
    assert!(
        std::fs::read(&s).unwrap() == before,
        "a read-only run wrote"
    );
    if small {
        let out = iolens(&["run", "--pattern", "randwrite", "--ios", "100"], &s);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("not enough free space"),
            "{}",
            stderr(&out)
        );
        assert!(std::fs::read(&s).unwrap() == before, "a refused run wrote");
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Evidence is never destroyed

#[test]
fn truncation_and_damaged_headers_are_corruption_left_as_found() {
    let dir = tempfile::tempdir().unwrap();
    type Damage = fn(&Path);
    let cases: [(&str, Damage); 3] = [
        ("truncated", |p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(HEADER_AREA + 3 * MB)
                .unwrap()
        }),
        ("magic", |p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .write_all_at(b"X", 0)
                .unwrap()
        }),
        ("checksum", |p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .write_all_at(&[0x55], 60)
                .unwrap()
        }),
    ];
    for (name, damage) in cases {
        let s = dir.path().join(format!("{name}.dat"));
        drop(scratch(&s, 8 * MB));
        // A writing run gives it a generation journal: what later lets --refill prove that
        // iolens made this very file (issue 22, item 3).
        let out = iolens(&["run", "--pattern", "randwrite", "--ios", "100"], &s);
        assert!(out.status.success(), "{}", stderr(&out));
        damage(&s);
        let before = std::fs::read(&s).unwrap();
        for args in [
            &["run", "--ios", "100", "--buffered"][..],
            &["run", "--pattern", "randwrite", "--ios", "100"][..],
            &["calibrate", "--explain"][..],
        ] {
            let out = iolens(args, &s);
            assert_eq!(
                out.status.code(),
                Some(3),
                "{name} {args:?}: {}",
                stderr(&out)
            );
            assert!(stderr(&out).contains("corruption"), "{}", stderr(&out));
            assert!(
                std::fs::read(&s).unwrap() == before,
                "{name} {args:?} wrote"
            );
        }
        if name != "truncated" {
            let out = iolens(&["verify"], &s);
            assert_eq!(
                out.status.code(),
                Some(3),
                "{name} verify: {}",
                stderr(&out)
            );
        }
        // Repair is the user's explicit choice.
        let out = iolens(&["run", "--ios", "100", "--buffered", "--refill"], &s);
        assert!(out.status.success(), "{name} --refill: {}", stderr(&out));
        let out = iolens(&["verify"], &s);
        assert!(
            out.status.success(),
            "{name} after --refill: {}",
            stderr(&out)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Size arithmetic

#[test]
fn absurd_sizes_and_offsets_are_clear_errors_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new.dat");
    for args in [
        &["run", "--size", "18446744073709551615", "--ios", "10"][..],
        &[
            "run",
            "--size",
            "18446744073709551615",
            "--ios",
            "10",
            "--explain",
        ][..],
        &["calibrate", "--size", "100P", "--explain"][..],
        &["calibrate", "--size", "18446744073709551615", "--explain"][..],
    ] {
        let out = iolens(args, &new);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let e = stderr(&out);
        assert!(
            e.contains("too large") || e.contains("not enough free space"),
            "{args:?}: {e}"
        );
        assert!(!new.exists(), "{args:?} created the target");
    }
    let s = dir.path().join("s.dat");
    drop(scratch(&s, 8 * MB));
    let before = std::fs::read(&s).unwrap();
    for pattern in ["randread", "randwrite"] {
        let out = iolens(
            &[
                "run",
                "--pattern",
                pattern,
                "--offset",
                "1M",
                "--working-set",
                "18446744073709551104",
                "--ios",
                "10",
            ],
            &s,
        );
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("beyond"), "{}", stderr(&out));
    }
    assert!(std::fs::read(&s).unwrap() == before);
}

// ---------------------------------------------------------------------------------------------
// 6. Block devices in use

fn write_run(dev: &str) -> Output {
    bin()
        .args([
            "run",
            "--pattern",
            "randwrite",
            "--ios",
            "50",
            "--no-progress",
            "--target",
            dev,
            "--disposable-target",
            dev,
        ])
        .output()
        .unwrap()
}

/// A 16 MiB image behind a loop device, or `None` (with a note) where that cannot be had.
fn loop_image() -> Option<(tempfile::TempDir, PathBuf, Loop)> {
    if !root_or_skip("loop devices") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    foreign(&img, 16 * MB);
    let Some(a) = Loop::attach(&img) else {
        assert!(std::env::var_os("CI").is_none(), "losetup failed under CI");
        eprintln!("note: loop devices unavailable here; skipped");
        return None;
    };
    Some((dir, img, a))
}

fn assert_refused(dev: &str, img: &Path, why: &str) {
    let before = std::fs::read(img).unwrap();
    let out = write_run(dev);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(why),
        "wanted `{why}`: {}",
        stderr(&out)
    );
    assert!(std::fs::read(img).unwrap() == before, "{dev} written");
}

/// Held open `O_EXCL` by another program: the kernel refuses iolens' exclusive open. A free
/// loop device named disposable, the control, is written.
#[test]
fn a_block_device_held_exclusively_is_never_written() {
    let Some((_dir, img, a)) = loop_image() else {
        return;
    };
    let before = std::fs::read(&img).unwrap();
    let out = write_run(&a.0);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        std::fs::read(&img).unwrap() != before,
        "control run wrote nothing"
    );
    let _held = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(&a.0)
        .unwrap();
    assert_refused(&a.0, &img, "in use");
}

/// A loop device stacked on the target with a mounted filesystem, and a second loop device
/// over the same backing file: writing the target would corrupt what they hold.
#[test]
fn a_block_device_under_a_stacked_or_shared_loop_device_is_never_written() {
    let Some((dir, img, a)) = loop_image() else {
        return;
    };
    let b = Loop::attach(Path::new(&a.0)).expect("stacked loop device");
    let mkfs = Command::new("mkfs.ext4")
        .args([
            "-q",
            "-F",
            "-E",
            "lazy_itable_init=0,lazy_journal_init=0",
            &b.0,
        ])
        .status();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = mkfs.map(|s| s.success()).unwrap_or(false)
        && Command::new("mount")
            .args(["-o", "ro", &b.0])
            .arg(&mnt)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
    struct Umount(PathBuf);
    impl Drop for Umount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let um = mounted.then(|| Umount(mnt.clone()));
    assert_refused(&a.0, &img, &format!("backs loop device {}", b.0));
    drop(um);
    drop(b);
    let c = Loop::attach(&img).expect("second loop device");
    assert_refused(&a.0, &img, "same backing file");
    drop(c);
}

/// Active swap, and device-mapper holders (/sys/block/<dev>/holders), each where this host
/// allows setting them up.
#[test]
fn a_block_device_used_as_swap_or_held_by_device_mapper_is_never_written() {
    let Some((_dir, img, a)) = loop_image() else {
        return;
    };
    let swap_ok = Command::new("mkswap")
        .arg(&a.0)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
        && Command::new("swapon")
            .arg(&a.0)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
    if swap_ok {
        struct Swapoff(String);
        impl Drop for Swapoff {
            fn drop(&mut self) {
                let _ = Command::new("swapoff").arg(&self.0).status();
            }
        }
        let _off = Swapoff(a.0.clone());
        assert_refused(&a.0, &img, "swap");
    } else {
        eprintln!("note: swapon on a loop device refused here; swap case skipped");
    }
    let name = format!("iolens-test-{}", std::process::id());
    let table = format!("0 {} linear {} 0", 16 * MB / 512, a.0);
    let dm = Command::new("dmsetup")
        .args(["create", &name, "--table", &table])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if dm {
        struct Remove(String);
        impl Drop for Remove {
            fn drop(&mut self) {
                let _ = Command::new("dmsetup").args(["remove", &self.0]).status();
            }
        }
        let _rm = Remove(name);
        assert_refused(&a.0, &img, "held by dm-");
    } else {
        eprintln!("note: device-mapper unavailable here; holders case skipped");
    }
}

// ---------------------------------------------------------------------------------------------
// 7. Create, lock, then fill

#[test]
fn two_concurrent_creators_fill_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.dat");
    let size = 128 * MB;
    let prep = |writes: bool| {
        Target::prepare(
            &p,
            &PrepareOptions {
                size: Some(size),
                writes,
                ..Default::default()
            },
            &AtomicBool::new(false),
        )
    };
    let (a, b) = std::thread::scope(|sc| {
        let a = sc.spawn(|| prep(false));
        // The second starts once the first has made the file visible (it is filling it now).
        while std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0) < 4096 {
            std::thread::yield_now();
        }
        let b = sc.spawn(|| prep(true));
        (a.join().unwrap(), b.join().unwrap())
    });
    let a = a.expect("the creator succeeds");
    assert_eq!(a.filled_bytes, size, "the creator filled it");
    match b {
        Ok(t) => assert_eq!(t.filled_bytes, 0, "both filled"),
        Err(e) => assert!(
            e.to_string().contains("another iolens process"),
            "unclear refusal: {e}"
        ),
    }
    let out = iolens(&["verify"], &p);
    assert!(out.status.success(), "{}", stderr(&out));
    // No temporary names left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

// ---------------------------------------------------------------------------------------------
// 12 (fill part). Ctrl-C during the fill: clean stop, exit 130, resumable

#[test]
fn ctrl_c_during_the_fill_stops_cleanly_and_the_fill_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.dat");
    let child = bin()
        .args([
            "run",
            "--size",
            "2G",
            "--ios",
            "10",
            "--no-progress",
            "--target",
        ])
        .arg(&p)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0) < HEADER_AREA + 16 * MB {
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("interrupted while filling"),
        "{}",
        stderr(&out)
    );
    let h = iolens::target::read_scratch_header(&p).unwrap();
    assert!(h.filled_upto > 0 && h.filled_upto < h.data_size, "{h:?}");
    // What was filled is consistent, and a read-only command does not resume on its own.
    let out = iolens(&["verify"], &p);
    assert!(out.status.success(), "{}", stderr(&out));
    let before = std::fs::metadata(&p).unwrap().len();
    let out = iolens(&["run", "--ios", "10", "--buffered"], &p);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--refill"), "{}", stderr(&out));
    assert_eq!(std::fs::metadata(&p).unwrap().len(), before);
}
