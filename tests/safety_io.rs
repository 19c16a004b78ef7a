//! Results files, signals, stdout and full disks (issue 10, items 4, 12, 13 and 14), driven
//! through the real binary on real files, FIFOs, sockets, device nodes and a tiny tmpfs.
//! Tests that need root (device nodes, mounts) skip with a note elsewhere, and fail under CI.

mod common;

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::tmpfs::Tmpfs;
use common::{bin, null_run, root_or_skip};
use iolens::results::Results;

/// Wait for `child`, killing it after `limit` (then the test fails: the command was slow).
fn wait_limited(mut child: Child, limit: Duration) -> (ExitStatus, String, String) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut out = String::new();
            let mut err = String::new();
            if let Some(mut o) = child.stdout.take() {
                let _ = o.read_to_string(&mut out);
            }
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return (st, out, err);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command was still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_out(c: &mut Command) -> (ExitStatus, String, String) {
    let o = c.output().unwrap();
    (
        o.status,
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// Item 4: where results may be written

/// A refused destination fails at once, before the measurement, names the path and leaves
/// what was there exactly as it was.
fn assert_refused_before_measuring(dir: &Path, dest: &Path, why: &str) {
    let t0 = Instant::now();
    let child = null_run(dir, "30s")
        .arg("--json")
        .arg(dest)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (st, _, err) = wait_limited(child, Duration::from_secs(20));
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "refused only after measuring"
    );
    assert!(err.contains(&dest.display().to_string()), "{err}");
    assert!(err.contains(why), "{err}");
    assert!(
        !dir.join("s.dat").exists(),
        "the target was touched before refusing"
    );
}

#[test]
fn results_refuse_fifo_socket_directory_and_symlink_destinations() {
    let d = tempfile::tempdir().unwrap();
    let work = d.path().join("work");
    std::fs::create_dir(&work).unwrap();

    let fifo = d.path().join("r.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    assert_refused_before_measuring(&work, &fifo, "FIFO");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());

    let sock = d.path().join("r.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    assert_refused_before_measuring(&work, &sock, "socket");
    assert!(std::fs::symlink_metadata(&sock)
        .unwrap()
        .file_type()
        .is_socket());

    assert_refused_before_measuring(&work, d.path(), "directory");

    // A symlink at the destination is refused, not followed and not replaced.
    let victim = d.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let link = d.path().join("r.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    assert_refused_before_measuring(&work, &link, "symbolic link");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");

    // A directory that does not exist: fails before any I/O.
    assert_refused_before_measuring(&work, &d.path().join("nope/r.json"), "does not exist");
}

#[test]
fn results_never_replace_a_device_node() {
    if !root_or_skip("writing results over a device node") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let work = d.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // A node for the null device (1:3), as /dev/null is, without risking the real one.
    let node = d.path().join("null");
    let c = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
    // SAFETY: mknod on a NUL-terminated path.
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
    assert_refused_before_measuring(&work, &node, "character device");
    assert!(std::fs::symlink_metadata(&node)
        .unwrap()
        .file_type()
        .is_char_device());
    // And the real /dev/null, which the old writer replaced with a regular file.
    assert_refused_before_measuring(&work, Path::new("/dev/null"), "character device");
    assert!(std::fs::symlink_metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn results_temp_file_is_unpredictable_and_never_followed() {
    let d = tempfile::tempdir().unwrap();
    let work = d.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    // The old writer's temp names: `r.json.tmp` planted as a link to a victim, and an
    // unrelated `report.json.tmp` of the user's.
    let victim = d.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, out.join("r.json.tmp")).unwrap();
    std::fs::write(out.join("report.json.tmp"), b"mine").unwrap();
    for name in ["r.json", "report.json"] {
        let (st, _, err) = run_out(null_run(&work, "0.3s").arg("--json").arg(out.join(name)));
        assert!(st.success(), "{err}");
        Results::read_file(&out.join(name)).unwrap();
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert_eq!(std::fs::read(out.join("report.json.tmp")).unwrap(), b"mine");
    assert!(std::fs::symlink_metadata(out.join("r.json.tmp"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        names_in(&out),
        ["r.json", "r.json.tmp", "report.json", "report.json.tmp"],
        "a temp file was left behind"
    );
    // An existing regular results file is replaced (a new inode: never written in place).
    let mode = std::fs::metadata(out.join("r.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o022,
        0,
        "group/world-writable results file: {mode:o}"
    );
}

#[test]
fn every_command_with_json_checks_it_before_working() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("missing-dir/r.json");
    let bad_s = bad.to_str().unwrap();
    let t = d.path().join("s.dat");
    let ts = t.to_str().unwrap();
    let db = d.path().join("db");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sources");
    let trc = fixture.join("orcl_ora_777.trc");
    let bio = fixture.join("biolatency_mF.txt");
    let cases: Vec<Vec<&str>> = vec![
        vec![
            "run",
            "--target",
            ts,
            "--size",
            "4M",
            "--duration",
            "30s",
            "--json",
            bad_s,
        ],
        vec![
            "calibrate",
            "--target",
            ts,
            "--size",
            "4M",
            "--budget",
            "2m",
            "--json",
            bad_s,
        ],
        vec!["verify", "--target", ts, "--json", bad_s],
        vec![
            "db",
            "run",
            "--dir",
            db.to_str().unwrap(),
            "--duration",
            "30s",
            "--json",
            bad_s,
        ],
        vec!["trace", trc.to_str().unwrap(), "--json", bad_s],
        vec![
            "ingest",
            "--format",
            "biolatency",
            bio.to_str().unwrap(),
            "--json",
            bad_s,
        ],
    ];
    for args in cases {
        let t0 = Instant::now();
        let child = bin()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (st, _, err) = wait_limited(child, Duration::from_secs(60));
        assert_eq!(st.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(bad_s) && err.contains("does not exist"),
            "{args:?}: {err}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{args:?} worked first"
        );
        assert!(
            !t.exists() && !db.exists(),
            "{args:?} created its target first"
        );
    }
}

#[test]
fn json_dash_writes_the_results_to_stdout() {
    let d = tempfile::tempdir().unwrap();
    let (st, out, err) = run_out(null_run(d.path(), "0.3s").args(["--json", "-"]));
    assert!(st.success(), "{err}");
    let r = Results::from_json(&out).expect("stdout is exactly the results document");
    assert_eq!(r.runs.len(), 1);
    assert!(
        err.contains("Plan:"),
        "the text for people goes to stderr: {err}"
    );
    assert!(!d.path().join("-").exists(), "a file named - was created");
    // The same for a reader of other tools' files.
    let bio =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sources/biolatency_mF.txt");
    let (st, out, err) = run_out(
        bin()
            .current_dir(d.path())
            .args(["ingest", "--format", "biolatency", "--json", "-"])
            .arg(&bio),
    );
    assert!(st.success(), "{err}");
    Results::from_json(&out).expect("ingest: stdout is exactly the results document");
    assert!(!d.path().join("-").exists());
}

// ---------------------------------------------------------------------------------------------
// Item 13: closed or full stdout

#[test]
fn closed_stdout_neither_panics_nor_loses_the_results() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("r.json");
    // `| head -0`: the reader is gone before the first line.
    let mut child = null_run(d.path(), "0.5s")
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let (st, _, err) = wait_limited(child, Duration::from_secs(60));
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        st.code(),
        Some(0),
        "a closed pipe is the reader's choice: {err}"
    );
    assert_eq!(Results::read_file(&json).unwrap().runs.len(), 1);

    // `| head -1`: the reader takes the first line and leaves.
    let json2 = d.path().join("r2.json");
    let mut child = null_run(d.path(), "0.5s")
        .arg("--json")
        .arg(&json2)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 5];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    assert_eq!(&first, b"Plan:");
    drop(child.stdout.take());
    let (st, _, err) = wait_limited(child, Duration::from_secs(60));
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(st.code(), Some(0), "{err}");
    Results::read_file(&json2).unwrap();
}

#[test]
fn full_stdout_fails_clearly_but_keeps_the_results() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("r.json");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let (st, _, err) = run_out(
        null_run(d.path(), "0.3s")
            .arg("--json")
            .arg(&json)
            .stdout(full),
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(
        err.contains("standard output") && err.contains("No space left"),
        "{err}"
    );
    assert_eq!(Results::read_file(&json).unwrap().runs.len(), 1);
    // Results meant for stdout that cannot be written there are an error too.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let (st, _, err) = run_out(
        null_run(d.path(), "0.3s")
            .args(["--json", "-"])
            .stdout(full),
    );
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Item 12: signals

fn signal_after(child: &Child, sig: i32, after: Duration) {
    std::thread::sleep(after);
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

#[test]
fn sigterm_ends_a_run_like_ctrl_c_and_writes_results() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("r.json");
    let child = null_run(d.path(), "60s")
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    signal_after(&child, libc::SIGTERM, Duration::from_millis(1500));
    let (st, _, err) = wait_limited(child, Duration::from_secs(30));
    assert_eq!(st.code(), Some(143), "{err}");
    assert!(err.contains("SIGTERM"), "{err}");
    let r = Results::read_file(&json).unwrap();
    assert!(r.runs[0].interrupted);
    assert!(r.runs[0].total_count() > 0);
}

fn progress_rows(db: &Path) -> i64 {
    let c = rusqlite::Connection::open(db.join("iolens-slob.db")).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    c.query_row("SELECT sum(loaded) FROM iolens_progress", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn db_setup_stops_cleanly_on_signals_and_resumes() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("db");
    // Large enough that loading takes far longer than the signal's delay.
    let setup = || {
        bin()
            .args(["db", "setup", "--scale", "2G", "--quiet", "--dir"])
            .arg(&db)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let child = setup();
    signal_after(&child, libc::SIGTERM, Duration::from_millis(1500));
    let (st, _, err) = wait_limited(child, Duration::from_secs(60));
    assert_eq!(st.code(), Some(143), "{err}");
    assert!(err.contains("rerun"), "{err}");
    let first = progress_rows(&db);
    assert!(
        first > 0 && first < 262_144,
        "{first} rows after the first stop"
    );

    let child = setup();
    signal_after(&child, libc::SIGINT, Duration::from_millis(1500));
    let (st, _, err) = wait_limited(child, Duration::from_secs(60));
    assert_eq!(st.code(), Some(130), "{err}");
    let second = progress_rows(&db);
    assert!(second > first, "resumed: {first} then {second} rows");
}

#[test]
fn db_run_exits_130_on_ctrl_c_with_results() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("db");
    let (st, _, err) = run_out(
        bin()
            .args(["db", "setup", "--scale", "8M", "--quiet", "--dir"])
            .arg(&db),
    );
    assert!(st.success(), "{err}");
    let json = d.path().join("r.json");
    let child = bin()
        .args([
            "db",
            "run",
            "--duration",
            "60s",
            "--sessions",
            "2",
            "--quiet",
            "--dir",
        ])
        .arg(&db)
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    signal_after(&child, libc::SIGINT, Duration::from_millis(2500));
    let (st, _, err) = wait_limited(child, Duration::from_secs(30));
    assert_eq!(st.code(), Some(130), "{err}");
    let r = Results::read_file(&json).unwrap();
    assert!(r.runs[0].interrupted);
}

// ---------------------------------------------------------------------------------------------
// Item 14: full disks

#[test]
fn full_disk_leaves_no_partial_results_file() {
    if !root_or_skip("the full-disk test (tmpfs)") {
        return;
    }
    let Some(fs) = Tmpfs::mount("1m") else { return };
    let work = tempfile::tempdir().unwrap();
    // An older results file at the destination must survive a failed write intact.
    let json = fs.path().join("r.json");
    let older = b"{\"schema\": \"iolens-results\", \"older\": true}";
    std::fs::write(&json, older).unwrap();
    fs.fill();
    let (st, _, err) = run_out(null_run(work.path(), "0.3s").arg("--json").arg(&json));
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains(json.to_str().unwrap()), "{err}");
    assert_eq!(
        names_in(fs.path()),
        ["filler", "r.json"],
        "a temp file was left behind"
    );
    assert_eq!(std::fs::read(&json).unwrap(), older);
}

#[test]
fn sqlite_disk_full_is_reported_as_no_space() {
    if !root_or_skip("the SQLite full-disk test (tmpfs)") {
        return;
    }
    let Some(fs) = Tmpfs::mount("40m") else {
        return;
    };
    let db = fs.path().join("db");
    let (st, _, err) = run_out(
        bin()
            .args(["db", "setup", "--scale", "8M", "--quiet", "--dir"])
            .arg(&db),
    );
    assert!(st.success(), "{err}");
    fs.fill();
    let (st, _, err) = run_out(
        bin()
            .args([
                "db",
                "run",
                "--duration",
                "2s",
                "--update-pct",
                "50",
                "--quiet",
                "--dir",
            ])
            .arg(&db),
    );
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(err.contains("no space left on device"), "{err}");
}
