//! Every file iolens writes goes through one writer (issue 22, items 1, 2 and 4, and `{host}`
//! and `--csv F --hlog F` from its lower list), driven through the real binary on real files,
//! hard links, symbolic links, FIFOs, loop-device nodes and small tmpfs mounts that fill.
//! Tests that need root (loop devices, mounts) skip with a note elsewhere, and fail under CI.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::tmpfs::Tmpfs;
use common::{bin, null_run, root_or_skip};
use iolens::results::Results;

fn run_out(c: &mut Command) -> (ExitStatus, String, String) {
    let o = c.output().unwrap();
    (
        o.status,
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Wait for `child`, killing it after `limit` (then the test fails: the command hung).
fn wait_limited(mut child: Child, limit: Duration) -> (ExitStatus, String) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return (st, err);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command was still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A small results file (from `dev-synth`) in `dir`.
fn results_file(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let (st, _, err) = run_out(
        bin()
            .args(["dev-synth", "--seconds", "2", "--samples", "50", "-o"])
            .arg(&p),
    );
    assert!(st.success(), "{err}");
    p
}

/// `args` must fail with exit 2 before doing anything, saying `why`, and leave every file in
/// `keep` byte for byte as it was.
fn assert_refused(args: &[&str], why: &str, keep: &[&Path]) {
    let before: Vec<Vec<u8>> = keep.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let (st, _, err) = run_out(bin().args(args));
    assert_eq!(st.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(why), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for (p, b) in keep.iter().zip(before) {
        assert_eq!(
            std::fs::read(p).unwrap(),
            b,
            "{args:?} changed {}",
            p.display()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Item 1: reports, exports and profiles are written like results

#[test]
fn outputs_never_go_through_links_nor_into_fifos() {
    let d = tempfile::tempdir().unwrap();
    let r = results_file(d.path(), "r.json");
    let r2 = results_file(d.path(), "r2.json");
    // A stack profile for export --flame/--folded: folded stacks from FlameGraph's own tests.
    let prof = d.path().join("p.json");
    let (st, _, err) = run_out(
        bin()
            .args(["-q", "ingest", "--format", "folded"])
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/fixtures/real/flamegraph-perf-dd-stacks-01-collapsed-kernel.txt"),
            )
            .arg("--json")
            .arg(&prof),
    );
    assert!(st.success(), "{err}");
    let victim = d.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let link = d.path().join("out.link");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let fifo = d.path().join("out.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let pid = std::process::id().to_string();
    for (dest, why) in [(&link, "symbolic link"), (&fifo, "FIFO")] {
        for args in [
            vec!["report", s(&r), "-o", s(dest)],
            vec!["compare", s(&r), s(&r2), "-o", s(dest)],
            vec!["export", s(&r), "--csv", s(dest)],
            vec!["export", s(&r), "--hlog", s(dest)],
            vec!["export", s(&r), "--markdown", s(dest)],
            vec!["export", s(&prof), "--flame", s(dest)],
            vec!["export", s(&prof), "--folded", s(dest)],
            vec!["profile", "--pid", &pid, "--duration", "30s", "-o", s(dest)],
            vec![
                "profile",
                "--pid",
                &pid,
                "--duration",
                "30s",
                "--folded",
                s(dest),
            ],
        ] {
            // A FIFO at the path once hung the command forever: it must fail at once.
            let child = bin()
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let (st, err) = wait_limited(child, Duration::from_secs(30));
            assert_eq!(st.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(why) && err.contains(s(dest)),
                "{args:?}: {err}"
            );
        }
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    // Nothing else was left behind (no temp files).
    assert_eq!(
        names_in(d.path()),
        ["out.fifo", "out.link", "p.json", "r.json", "r2.json", "victim"]
    );
}

/// A full disk once left a partial report and destroyed the previous one: every output is
/// written whole beside its destination and renamed over it, so the old report, CSV or
/// Markdown stays byte for byte and no partial file is left.
#[test]
fn a_full_disk_keeps_the_previous_report_and_leaves_no_partial_file() {
    if !root_or_skip("the full-disk report test (tmpfs)") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let r = results_file(d.path(), "r.json");
    let Some(fs) = Tmpfs::mount("1m") else { return };
    let mut keep = Vec::new();
    for name in ["old.html", "old.csv", "old.md"] {
        let p = fs.path().join(name);
        std::fs::write(&p, format!("the previous {name}, kept")).unwrap();
        keep.push(p);
    }
    fs.fill();
    for (args, dest) in [
        (vec!["report", s(&r), "-o"], &keep[0]),
        (vec!["export", s(&r), "--csv"], &keep[1]),
        (vec!["export", s(&r), "--markdown"], &keep[2]),
    ] {
        let (st, _, err) = run_out(bin().args(&args).arg(dest));
        assert_eq!(st.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
    for p in &keep {
        let name = p.file_name().unwrap().to_string_lossy();
        assert_eq!(
            std::fs::read_to_string(p).unwrap(),
            format!("the previous {name}, kept")
        );
    }
    assert_eq!(
        names_in(fs.path()),
        ["filler", "old.csv", "old.html", "old.md"],
        "a partial or temp file was left"
    );
}

/// A block device node planted at the output path: `report -o` once wrote 24 KB of HTML over
/// the device's first blocks.
#[test]
fn outputs_never_write_into_a_block_device() {
    if !root_or_skip("the block-device output test (loop device, mknod)") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let backing = d.path().join("disk.img");
    let pattern: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&backing, &pattern).unwrap();
    let Some(detach) = common::loopdev::Loop::attach(&backing) else {
        if common::ci() {
            panic!("cannot set up a loop device (CI runs as root)");
        }
        eprintln!("note: skipped (no loop device here)");
        return;
    };
    let loopdev = detach.dev().to_string();
    use std::os::unix::fs::MetadataExt;
    let rdev = std::fs::metadata(&loopdev).unwrap().rdev();
    let node = d.path().join("report.html");
    let ok = Command::new("mknod")
        .arg(&node)
        .arg("b")
        .arg(libc_major(rdev).to_string())
        .arg(libc_minor(rdev).to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "mknod failed");
    let r = results_file(d.path(), "r.json");
    for args in [
        vec!["report", s(&r), "-o", s(&node)],
        vec!["export", s(&r), "--csv", s(&node)],
    ] {
        assert_refused(&args, "block device", &[&r]);
    }
    drop(detach);
    assert_eq!(
        std::fs::read(&backing).unwrap(),
        pattern,
        "the device was written"
    );
}

fn libc_major(rdev: u64) -> u64 {
    ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff)
}

fn libc_minor(rdev: u64) -> u64 {
    (rdev & 0xff) | ((rdev >> 12) & !0xff)
}

// ---------------------------------------------------------------------------------------------
// Item 2: an output is never an input or a target, by identity

#[test]
fn an_output_is_never_an_input_nor_a_target_even_by_hard_link() {
    let d = tempfile::tempdir().unwrap();
    let r = results_file(d.path(), "r.json");
    let r2 = results_file(d.path(), "r2.json");
    let hard = d.path().join("hard.json");
    std::fs::hard_link(&r, &hard).unwrap();
    let why = "inputs or targets";
    for args in [
        vec!["export", s(&r), "--csv", s(&hard)],
        vec!["export", s(&r), "--markdown", s(&hard)],
        vec!["report", s(&r), "-o", s(&hard)],
        vec!["compare", s(&r2), s(&r), "-o", s(&hard)],
        vec!["merge", s(&r), s(&r2), "-o", s(&hard)],
    ] {
        assert_refused(&args, why, &[&r]);
    }
    // A datafile given as the target of a read-only run, named again (or through a hard link)
    // as its results: once replaced by 6.8 KB of JSON.
    let dbf = d.path().join("users01.dbf");
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 % 256) as u8).collect();
    std::fs::write(&dbf, &data).unwrap();
    let dbf_link = d.path().join("users01.link");
    std::fs::hard_link(&dbf, &dbf_link).unwrap();
    for json in [&dbf, &dbf_link] {
        let (st, _, err) = run_out(
            bin()
                .args([
                    "run",
                    "--engine",
                    "null",
                    "--no-progress",
                    "--duration",
                    "1s",
                ])
                .arg("--target")
                .arg(&dbf)
                .arg("--json")
                .arg(json),
        );
        assert_eq!(st.code(), Some(2), "{err}");
        assert!(err.contains(why), "{err}");
        assert_eq!(std::fs::read(&dbf).unwrap(), data);
    }
    // Evidence read by trace and ingest.
    let trc = d.path().join("x1.trc");
    let trc2 = d.path().join("x2.trc");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sources/ora10g_accmeas2_j004_32116.trc");
    std::fs::copy(&fixture, &trc).unwrap();
    std::fs::copy(&fixture, &trc2).unwrap();
    assert_refused(&["trace", s(&trc), "--json", s(&trc)], why, &[&trc]);
    let bio = d.path().join("bio.txt");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sources/biolatency_TD.txt"),
        &bio,
    )
    .unwrap();
    assert_refused(
        &[
            "ingest",
            "--format",
            "biolatency",
            s(&bio),
            "--json",
            s(&bio),
        ],
        why,
        &[&bio],
    );
    // The everyday typo `trace --json *.trc`: the first trace file becomes --json.
    assert_refused(
        &["trace", "--json", s(&trc), s(&trc2)],
        "not an iolens results file",
        &[&trc, &trc2],
    );
    // A report never replaces measured results either.
    assert_refused(
        &["report", s(&r), "-o", s(&r2)],
        "holds iolens results",
        &[&r2],
    );
}

#[test]
fn two_outputs_of_one_command_that_are_one_file_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let r = results_file(d.path(), "r.json");
    let f = d.path().join("F");
    let same = d.path().join(".").join("F");
    assert_refused(
        &["export", s(&r), "--csv", s(&f), "--hlog", s(&f)],
        "same file",
        &[&r],
    );
    assert_refused(
        &["export", s(&r), "--csv", s(&f), "--markdown", s(&same)],
        "same file",
        &[&r],
    );
    assert!(!f.exists(), "the first output was written before refusing");
    std::fs::write(&f, b"old csv").unwrap();
    let hard = d.path().join("G");
    std::fs::hard_link(&f, &hard).unwrap();
    assert_refused(
        &["export", s(&r), "--csv", s(&f), "--hlog", s(&hard)],
        "same file",
        &[&f],
    );
    assert_eq!(names_in(d.path()), ["F", "G", "r.json"]);
}

// ---------------------------------------------------------------------------------------------
// Item 4: measured results are never lost

/// The pre-run check once created an empty probe file, which a full filesystem allows: the run
/// measured for its whole duration and then lost the results. The space is reserved up front.
#[test]
fn a_full_filesystem_fails_the_run_before_measuring() {
    if !root_or_skip("the full-filesystem test (tmpfs)") {
        return;
    }
    let Some(fs) = Tmpfs::mount("1m") else { return };
    let work = tempfile::tempdir().unwrap();
    fs.fill_leaving(0);
    let json = fs.path().join("r.json");
    let t0 = Instant::now();
    let (st, _, err) = run_out(null_run(work.path(), "30s").arg("--json").arg(&json));
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "refused only after measuring"
    );
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains(s(&json)), "{err}");
    assert!(
        !work.path().join("s.dat").exists(),
        "the target was created"
    );
    assert_eq!(
        names_in(fs.path()),
        ["filler"],
        "a temp file was left behind"
    );
}

/// Results larger than what was reserved, on a filesystem that fills: they are written again
/// where there is room, and the error says where.
#[test]
fn results_that_cannot_be_written_are_saved_elsewhere_and_said() {
    if !root_or_skip("the results-elsewhere test (tmpfs)") {
        return;
    }
    let Some(fs) = Tmpfs::mount("1m") else { return };
    let work = tempfile::tempdir().unwrap();
    let trc = work.path().join("big.trc");
    // About 85 KB of results, more than the 64 KiB reserved for a trace's results.
    let (st, _, err) = run_out(bin().arg("gen-trace").arg(&trc).args(["--size", "3M"]));
    assert!(st.success(), "{err}");
    fs.fill_leaving(72 << 10);
    let elsewhere = tempfile::tempdir().unwrap();
    let json = fs.path().join("r.json");
    let (st, _, err) = run_out(
        bin()
            .env("TMPDIR", elsewhere.path())
            .args(["trace", "-q"])
            .arg(&trc)
            .arg("--json")
            .arg(&json),
    );
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let saved = names_in(elsewhere.path());
    assert_eq!(saved.len(), 1, "{saved:?}");
    let saved = elsewhere.path().join(&saved[0]);
    assert!(err.contains(s(&saved)), "{err}");
    let r = Results::read_file(&saved).unwrap();
    assert!(!r.runs.is_empty());
    assert_eq!(
        names_in(fs.path()),
        ["filler"],
        "a partial file was left behind"
    );
}

/// Start a run of `secs` writing to `json`; return it once its temp file exists (the
/// destination was checked and reserved, the measurement begins).
fn run_until_reserved(work: &Path, json: &Path, secs: &str) -> Child {
    let dir = json.parent().unwrap().to_path_buf();
    let child = null_run(work, secs)
        .arg("-q")
        .arg("--json")
        .arg(json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !names_in(&dir)
        .iter()
        .any(|n| n.starts_with(".iolens-results-"))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no temp file appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// The path the error says the results were kept at.
fn kept_path(err: &str) -> PathBuf {
    let at = err.find("kept in ").expect(err) + "kept in ".len();
    let rest = &err[at..];
    PathBuf::from(&rest[..rest.find(": ").expect(err)])
}

#[test]
fn a_directory_or_link_appearing_at_the_destination_keeps_the_results() {
    let work = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("r.json");
    // A directory.
    let child = run_until_reserved(work.path(), &json, "1s");
    std::fs::create_dir(&json).unwrap();
    let (st, err) = wait_limited(child, Duration::from_secs(60));
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains("directory"), "{err}");
    let kept = kept_path(&err);
    assert_eq!(kept.parent().unwrap(), out.path().canonicalize().unwrap());
    assert_eq!(Results::read_file(&kept).unwrap().runs.len(), 1);
    std::fs::remove_dir(&json).unwrap();
    std::fs::remove_file(&kept).unwrap();
    // A symbolic link to a victim: not followed, the victim untouched.
    let victim = work.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let child = run_until_reserved(work.path(), &json, "1s");
    std::os::unix::fs::symlink(&victim, &json).unwrap();
    let (st, err) = wait_limited(child, Duration::from_secs(60));
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(Results::read_file(&kept_path(&err)).unwrap().runs.len(), 1);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
}

#[test]
fn a_destination_directory_moved_mid_run_says_where_the_results_are() {
    let work = tempfile::tempdir().unwrap();
    let top = tempfile::tempdir().unwrap();
    let sub = top.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let child = run_until_reserved(work.path(), &sub.join("r.json"), "1s");
    let moved = top.path().join("moved");
    std::fs::rename(&sub, &moved).unwrap();
    let (st, err) = wait_limited(child, Duration::from_secs(60));
    assert_eq!(st.code(), Some(2), "{err}");
    let real = moved.canonicalize().unwrap().join("r.json");
    assert!(err.contains("was moved") && err.contains(s(&real)), "{err}");
    assert_eq!(Results::read_file(&real).unwrap().runs.len(), 1);
    assert_eq!(names_in(&moved), ["r.json"]);
}

/// `profile` once checked -o/--folded only after sampling, so a bad path lost the profile.
#[test]
fn profile_checks_every_output_before_sampling() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("missing-dir/flame.svg");
    let pid = std::process::id().to_string();
    for flag in ["-o", "--folded", "--json"] {
        let t0 = Instant::now();
        let (st, _, err) = run_out(
            bin()
                .args(["profile", "--pid", &pid, "--duration", "30s", flag])
                .arg(&bad),
        );
        assert_eq!(st.code(), Some(2), "{flag}: {err}");
        assert!(err.contains(s(&bad)), "{flag}: {err}");
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "{flag}: sampled first"
        );
    }
    let r = results_file(d.path(), "r.json");
    let (st, _, err) = run_out(
        bin()
            .args(["profile", "--pid", &pid, "--duration", "30s", "--json"])
            .arg(&r)
            .arg("-o")
            .arg(&r),
    );
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains("same file"), "{err}");
}

/// `profile` writes its results before the flame graph: an SVG path that turns into a directory
/// while sampling keeps both the results (where asked) and the drawn graph (named).
#[test]
fn profile_writes_its_results_first_and_keeps_an_unplaceable_flame_graph() {
    if !root_or_skip("live profiling (BPF)") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut busy = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let json = d.path().join("p.json");
    let svg = d.path().join("flame.svg");
    let child = bin()
        .args([
            "profile",
            "-q",
            "--no-progress",
            "--duration",
            "3s",
            "--pid",
        ])
        .arg(busy.id().to_string())
        .arg("--json")
        .arg(&json)
        .arg("-o")
        .arg(&svg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !names_in(d.path())
        .iter()
        .any(|n| n.starts_with(".iolens-output-"))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no temp file appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::fs::create_dir(&svg).unwrap();
    let (st, err) = wait_limited(child, Duration::from_secs(90));
    let _ = busy.kill();
    let _ = busy.wait();
    assert_eq!(st.code(), Some(2), "{err}");
    let r = Results::read_file(&json).expect("the results were written first");
    assert!(r.profile.is_some());
    let kept = std::fs::read_to_string(kept_path(&err)).unwrap();
    assert!(
        kept.starts_with("<?xml") || kept.starts_with("<svg"),
        "{kept:.80}"
    );
}

/// The hidden temp files in `dir` (`.iolens-….tmp`).
fn temp_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".iolens-") && n.ends_with(".tmp"))
        .collect();
    v.sort();
    v
}

/// A run killed with SIGKILL (a container's grace period ending) leaves the hidden temp file
/// of its `--json` beside the destination. The next output there says so, naming it, and
/// leaves it (a name does not prove iolens made a file); the temp file of a run still writing
/// is not mentioned, since that run holds it locked.
#[test]
fn unfinished_temp_files_a_killed_run_left_are_said_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let mut run = null_run(dir.path(), "10m")
        .arg("--json")
        .arg(out.join("r.json"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let tmp = loop {
        if let Some(t) = temp_files(&out).pop() {
            break t;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no temp file appeared"
        );
        assert!(run.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(20));
    };
    let synth = |name: &str| {
        let (st, _, err) = run_out(
            bin()
                .args(["-q", "dev-synth", "--seconds", "2", "-o"])
                .arg(out.join(name)),
        );
        assert!(st.success(), "{err}");
        err
    };
    let err = synth("live.json");
    assert!(
        !err.contains("unfinished"),
        "the temp file of a running iolens was called unfinished: {err}"
    );
    run.kill().unwrap();
    run.wait().unwrap();
    let err = synth("after.json");
    assert!(
        err.contains("1 unfinished file") && err.contains(&tmp) && err.contains("KB"),
        "{err}"
    );
    assert_eq!(
        temp_files(&out),
        std::slice::from_ref(&tmp),
        "the temp file was removed"
    );
    // A file that only resembles one (not 16 hex digits) is not named.
    std::fs::write(out.join(".iolens-results-mine.tmp"), b"mine").unwrap();
    let err = synth("again.json");
    assert!(err.contains(&tmp) && !err.contains("mine"), "{err}");
    assert_eq!(
        std::fs::read(out.join(".iolens-results-mine.tmp")).unwrap(),
        b"mine"
    );
}

/// `gen-trace` writes a new file only: one that appears at the destination while it writes
/// is left alone, and the trace is kept beside it under a name the error says (it once checked
/// the name, then replaced whatever was there when it finished).
#[test]
fn gen_trace_refuses_an_existing_file_by_the_one_writer() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.trc");
    std::fs::write(&f, b"evidence").unwrap();
    let (st, _, err) = run_out(bin().args(["gen-trace", "--size", "64K"]).arg(&f));
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains("writes a new file only"), "{err}");
    assert_eq!(std::fs::read(&f).unwrap(), b"evidence");
}
