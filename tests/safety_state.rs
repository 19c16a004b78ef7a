//! Issue 22, items 3, 5, 6 and 8 and the bounds of durations and ranks: each test reproduces,
//! through the real binary on real files (and, as root, a tmpfs that fills), a way iolens
//! rewrote a file it could not prove it made, reported a healthy file as corrupt, missed a lost
//! write, ignored a signal, or panicked on a value; and proves it no longer does.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use iolens::journal::path_for;
use iolens::results::Results;
use iolens::target::HEADER_AREA;

mod common;
use common::tmpfs::Tmpfs;
use common::{bin, read_at, root_or_skip, write_at};

const MB: u64 = 1 << 20;
const BS: u64 = 8192;

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", text(o));
}

/// `iolens run --pattern randwrite` over the first 64 KiB, so every block there is rewritten.
fn write_run(path: &Path) -> Output {
    bin()
        .args([
            "run",
            "--no-progress",
            "--buffered",
            "--pattern",
            "randwrite",
        ])
        .args(["--bs", "8k", "--working-set", "64k", "--ios", "300"])
        .arg("--target")
        .arg(path)
        .output()
        .unwrap()
}

fn verify(path: &Path) -> (i32, String) {
    let out = bin()
        .args(["verify", "--no-progress", "--target"])
        .arg(path)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), text(&out))
}

fn scratch(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    common::scratch(&p, 4 * MB, false);
    p
}

/// Files in `dir` (names), sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// Item 3: --refill only rewrites what iolens can prove it made

/// A foreign file given a scratch file's header (copied; as format 1; with a broken checksum)
/// is never rewritten, not even with --refill; and no message recommends --refill for it.
#[test]
fn refill_never_rewrites_a_file_whose_header_merely_looks_like_iolens() {
    let dir = tempfile::tempdir().unwrap();
    let donor = scratch(dir.path(), "donor.dat");
    let header = read_at(&donor, 0, HEADER_AREA as usize);
    type Forge = fn(&mut Vec<u8>);
    let forgeries: [(&str, Forge); 3] = [
        ("copied header", |_| {}),
        ("format 1", |b| {
            b[16..20].copy_from_slice(&1u32.to_le_bytes())
        }),
        ("broken checksum", |b| b[60] ^= 0x55),
    ];
    for (what, forge) in forgeries {
        let victim = dir.path().join("users01.dbf");
        // Someone's data, as long as the donor's header says, the first MiB replaced by the
        // (forged) header.
        let mut data: Vec<u8> = (0..HEADER_AREA + 4 * MB)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        data[..HEADER_AREA as usize].copy_from_slice(&header);
        forge(&mut data);
        std::fs::write(&victim, &data).unwrap();
        for args in [
            &["run", "--ios", "50", "--buffered"][..],
            &["run", "--ios", "50", "--buffered", "--refill"][..],
            &["run", "--ios", "50", "--pattern", "randwrite", "--refill"][..],
        ] {
            let out = bin()
                .args(args)
                .arg("--no-progress")
                .arg("--target")
                .arg(&victim)
                .output()
                .unwrap();
            assert!(!out.status.success(), "{what} {args:?}: {}", text(&out));
            assert!(
                std::fs::read(&victim).unwrap() == data,
                "{what} {args:?} wrote to the foreign file: {}",
                text(&out)
            );
            let t = text(&out);
            assert!(!t.contains("panicked"), "{t}");
            assert!(
                !t.contains("rewrite it with --refill"),
                "{what} {args:?}: the message recommends --refill: {t}"
            );
        }
        let (code, t) = verify(&victim);
        assert_ne!(code, 0, "{t}");
        assert!(!t.contains("rewrite it with --refill"), "{t}");
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            data,
            "{what}: verify wrote"
        );
    }
}

/// A scratch file a writing run made (it has a generation journal bound to it) whose header
/// checksum is then broken: corruption, left as found; --refill rewrites it (the journal
/// proves iolens made it), the message says so, and it verifies clean afterwards.
#[test]
fn refill_rewrites_a_damaged_scratch_file_its_journal_proves_iolens_made() {
    let dir = tempfile::tempdir().unwrap();
    let s = scratch(dir.path(), "s.dat");
    ok(&write_run(&s));
    write_at(&s, 60, &[read_at(&s, 60, 1)[0] ^ 0x55]);
    let before = std::fs::read(&s).unwrap();
    let out = bin()
        .args([
            "run",
            "--ios",
            "50",
            "--buffered",
            "--no-progress",
            "--target",
        ])
        .arg(&s)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("--refill"), "{}", text(&out));
    assert!(text(&out).contains("journal"), "{}", text(&out));
    assert_eq!(std::fs::read(&s).unwrap(), before, "left as found");
    let out = bin()
        .args([
            "run",
            "--ios",
            "50",
            "--buffered",
            "--refill",
            "--no-progress",
        ])
        .arg("--target")
        .arg(&s)
        .output()
        .unwrap();
    ok(&out);
    // The refill rewrote every block with generation 0 and restarted the journal's bounds.
    let (code, t) = verify(&s);
    assert_eq!(code, 0, "{t}");
    ok(&write_run(&s));
    let (code, t) = verify(&s);
    assert_eq!(code, 0, "{t}");
}

// ---------------------------------------------------------------------------------------------
// Item 5: the journal is created complete or not at all

/// The disk fills while the first writing run creates the journal: the run fails before
/// writing, leaves no journal (not an empty one), `verify` finds the file healthy, and once
/// space is freed write runs work and lost writes are found again.
#[test]
fn a_full_disk_while_creating_the_journal_leaves_no_journal_and_no_false_corruption() {
    if !root_or_skip("the full-disk journal test (tmpfs)") {
        return;
    }
    let Some(fs) = Tmpfs::mount("8M") else {
        return;
    };
    let s = scratch(fs.path(), "s.dat");
    let filler = fs.fill();
    let before = std::fs::read(&s).unwrap();
    let out = write_run(&s);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("journal"), "{}", text(&out));
    assert_eq!(std::fs::read(&s).unwrap(), before, "nothing written");
    assert_eq!(
        names(fs.path()),
        ["filler", "s.dat"],
        "no journal, no debris"
    );
    let (code, t) = verify(&s);
    assert_eq!(code, 0, "a healthy file: {t}");
    std::fs::remove_file(filler).unwrap();
    ok(&write_run(&s));
    assert_eq!(verify(&s).0, 0);
    // The journal works: a block restored from before the run is stale.
    let blk = HEADER_AREA + 2 * BS;
    let old = read_at(&s, blk, BS as usize);
    ok(&write_run(&s));
    write_at(&s, blk, &old);
    let (code, t) = verify(&s);
    assert_eq!(code, 3, "{t}");
    assert!(t.contains(&format!("stale at offset {blk} ")), "{t}");
}

/// The empty (or torn) journal an older iolens left on a full disk records nothing: `verify`
/// does not call that corruption, and the next writing run replaces it.
#[test]
fn an_unfinished_journal_is_no_corruption_and_the_next_run_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    for (what, content) in [
        ("empty", Vec::new()),
        ("torn header", b"IOLENS-GENJ".to_vec()),
        ("header never written", vec![0u8; 3 * 4096]),
    ] {
        let s = scratch(dir.path(), "s.dat");
        std::fs::write(path_for(&s), &content).unwrap();
        let (code, t) = verify(&s);
        assert_eq!(code, 0, "{what}: {t}");
        ok(&write_run(&s));
        let (code, t) = verify(&s);
        assert_eq!(code, 0, "{what}: {t}");
        assert!(t.contains("generation journal"), "{what}: {t}");
        assert!(std::fs::metadata(path_for(&s)).unwrap().len() > 4096);
        std::fs::remove_file(&s).unwrap();
        std::fs::remove_file(path_for(&s)).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Item 6: the journal belongs to the file, whatever name reaches it

/// Writes made through a hard link (in another directory) are journaled in the file's one
/// journal: a block restored from before them is stale by either name.
#[test]
fn a_lost_write_made_through_a_hard_link_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let s = scratch(dir.path(), "s.dat");
    std::fs::create_dir(dir.path().join("other")).unwrap();
    let link = dir.path().join("other/link.dat");
    std::fs::hard_link(&s, &link).unwrap();
    ok(&write_run(&s));
    let blk = HEADER_AREA + 5 * BS;
    let old = read_at(&s, blk, BS as usize);
    ok(&write_run(&link));
    assert_ne!(read_at(&s, blk, BS as usize), old, "the run rewrote it");
    assert_eq!(verify(&s).0, 0);
    assert_eq!(verify(&link).0, 0);
    write_at(&s, blk, &old);
    for name in [&s, &link] {
        let (code, t) = verify(name);
        assert_eq!(code, 3, "{}: {t}", name.display());
        assert!(t.contains(&format!("stale at offset {blk} ")), "{t}");
    }
    assert!(
        !path_for(&link).exists(),
        "one journal for the file, not one per name"
    );
}

/// A journal an older iolens made beside another name of the file (a hard link), before files
/// recorded where their journal is: a run through the other name uses it (its binding finds
/// it), rather than starting a second journal whose generations would repeat the first's.
#[test]
fn a_journal_an_older_iolens_made_beside_a_hard_link_is_found_by_its_binding() {
    let dir = tempfile::tempdir().unwrap();
    let s = scratch(dir.path(), "s.dat");
    let link = dir.path().join("link.dat");
    std::fs::hard_link(&s, &link).unwrap();
    ok(&write_run(&link));
    // As an older iolens left it: no record of the journal in the file's header area.
    write_at(&s, 4096, &[0u8; 4096]);
    let blk = HEADER_AREA + 6 * BS;
    let old = read_at(&s, blk, BS as usize);
    ok(&write_run(&s));
    assert!(!path_for(&s).exists(), "no second journal");
    write_at(&s, blk, &old);
    let (code, t) = verify(&s);
    assert_eq!(code, 3, "{t}");
    assert!(t.contains(&format!("stale at offset {blk} ")), "{t}");
}

/// Writes made through a symbolic link verify by the real name (no "journal-missing"), and a
/// lost one is found by it.
#[test]
fn writes_through_a_symlink_verify_by_the_real_name() {
    let dir = tempfile::tempdir().unwrap();
    let s = scratch(dir.path(), "s.dat");
    let link = dir.path().join("link.dat");
    std::os::unix::fs::symlink(&s, &link).unwrap();
    let blk = HEADER_AREA + 4 * BS;
    let old = read_at(&s, blk, BS as usize);
    ok(&write_run(&link));
    let (code, t) = verify(&s);
    assert_eq!(code, 0, "{t}");
    assert!(!t.contains("journal-missing"), "{t}");
    write_at(&s, blk, &old);
    for name in [&s, &link] {
        let (code, t) = verify(name);
        assert_eq!(code, 3, "{t}");
        assert!(t.contains(&format!("stale at offset {blk} ")), "{t}");
    }
}

// ---------------------------------------------------------------------------------------------
// Item 8: every sleep wakes on a signal

/// Wait for `child`, killing it after `limit` (then the test fails). Returns its status,
/// stderr and how long it took from `since`.
fn wait_limited(mut child: Child, limit: Duration, since: Instant) -> (ExitStatus, String, f64) {
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return (st, err, since.elapsed().as_secs_f64());
        }
        if since.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command was still running {limit:?} after the signal");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Start `cmd`, wait until it has been running for `after`, send SIGTERM, and return its exit
/// status, stderr, and the seconds from the signal to its exit.
fn terminate(cmd: &mut Command, after: Duration) -> (ExitStatus, String, f64) {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait_limited(child, Duration::from_secs(30), Instant::now())
}

/// `run --think 60s` and `run --rate 0.01` (one I/O per 100 s): SIGTERM ends the run at once
/// (well within 5 s on a loaded machine, where the sleep it interrupts lasts 60–100 s), with
/// exit 143 and the results of what was measured.
#[test]
fn sigterm_during_think_time_or_a_low_rate_ends_the_run_at_once_with_results() {
    let dir = tempfile::tempdir().unwrap();
    let s = scratch(dir.path(), "s.dat");
    for extra in [&["--think", "60s"][..], &["--rate", "0.01"][..]] {
        let json = dir.path().join("r.json");
        let _ = std::fs::remove_file(&json);
        let (st, err, took) = terminate(
            bin()
                .args(["run", "--no-progress", "--buffered", "--duration", "10m"])
                .args(extra)
                .arg("--json")
                .arg(&json)
                .arg("--target")
                .arg(&s),
            Duration::from_millis(1500),
        );
        assert_eq!(st.code(), Some(143), "{extra:?}: {err}");
        assert!(took < 5.0, "{extra:?}: {took:.1} s after SIGTERM");
        let r = Results::read_file(&json).unwrap();
        assert!(r.runs[0].interrupted, "{extra:?}");
        assert!(r.runs[0].total_count() >= 1, "{extra:?}: the first I/O");
    }
}

/// `db run --think 60s` (SQLite): SIGTERM ends it at once, with exit 143 and results.
#[test]
fn sigterm_during_db_think_time_ends_the_run_at_once_with_results() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(&bin()
        .args(["db", "setup", "--scale", "8M", "--quiet", "--dir"])
        .arg(&db)
        .output()
        .unwrap());
    let json = dir.path().join("r.json");
    let (st, err, took) = terminate(
        bin()
            .args([
                "db",
                "run",
                "--quiet",
                "--sessions",
                "1",
                "--duration",
                "10m",
            ])
            .args(["--think", "60s", "--dir"])
            .arg(&db)
            .arg("--json")
            .arg(&json),
        Duration::from_millis(2500),
    );
    assert_eq!(st.code(), Some(143), "{err}");
    assert!(took < 5.0, "{took:.1} s after SIGTERM");
    let r = Results::read_file(&json).unwrap();
    assert!(r.runs[0].interrupted);
}

/// Waiting for a `--start-at` an hour away: SIGTERM exits 143 at once, no panic.
#[test]
fn sigterm_while_waiting_for_a_distant_start_exits_143() {
    let dir = tempfile::tempdir().unwrap();
    let s = scratch(dir.path(), "s.dat");
    for at in ["+1h", "+300d"] {
        let (st, err, took) = terminate(
            bin()
                .args(["run", "--no-progress", "--buffered", "--duration", "1s"])
                .args(["--start-at", at, "--target"])
                .arg(&s),
            Duration::from_millis(1000),
        );
        assert_eq!(st.code(), Some(143), "{at}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(took < 5.0, "{at}: {took:.1} s after SIGTERM");
    }
}

/// `ingest` and `trace` reading a slow input (a FIFO another process feeds and holds open, as
/// `tail -f … | ` or a slow network file would): a SIGTERM or Ctrl-C killed them, leaving their
/// 64 KB hidden temp results file beside the destination. Now they end at once, exit 143 / 130
/// as every command does, say that nothing was written, and leave nothing behind.
#[test]
fn a_signal_while_ingest_or_trace_reads_a_slow_input_ends_it_and_leaves_no_temp_file() {
    let fixture = |name: &str| {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/real")
                .join(name),
        )
        .unwrap()
    };
    let cases: [(&[&str], String, i32, i32); 2] = [
        (
            &["ingest", "--format", "biosnoop"],
            fixture("bcc_biosnoop.txt"),
            libc::SIGTERM,
            143,
        ),
        (
            &["trace"],
            fixture("js122a1_ora_9854.trc"),
            libc::SIGINT,
            130,
        ),
    ];
    for (args, text, sig, code) in cases {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("input");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let mut child = bin()
            .args(args)
            .arg(&fifo)
            .arg("--json")
            .arg(out.join("r.json"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The feeder: the first third of the file, then the pipe held open, as a slow source.
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (fed, was_fed) = std::sync::mpsc::channel::<()>();
        let head = text[..text.len() / 3].to_string();
        let feeder_path = fifo.clone();
        let feeder = std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new()
                .write(true)
                .open(&feeder_path)
                .unwrap();
            std::io::Write::write_all(&mut w, head.as_bytes()).unwrap();
            let _ = fed.send(());
            let _ = stopped.recv_timeout(Duration::from_secs(60));
        });
        was_fed.recv_timeout(Duration::from_secs(60)).unwrap();
        // Until the reader holds the pipe open and waits in it for more (its temp results file
        // made before): then the signal comes while it reads.
        let t0 = Instant::now();
        let pid = child.id();
        let temp_made = || {
            std::fs::read_dir(&out).unwrap().any(|e| {
                e.unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".iolens-results-")
            })
        };
        let holds_pipe = || {
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|d| {
                    d.flatten()
                        .any(|e| std::fs::read_link(e.path()).ok() == Some(fifo.clone()))
                })
                .unwrap_or(false)
        };
        let waits_in_pipe = || {
            std::fs::read_to_string(format!("/proc/{pid}/wchan"))
                .map(|w| w.contains("pipe"))
                .unwrap_or(false)
        };
        loop {
            if temp_made() && holds_pipe() && waits_in_pipe() {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{args:?} never waited in the pipe (temp file: {}, pipe open: {})",
                temp_made(),
                holds_pipe()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let since = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if since.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{args:?} still running 30 s after the signal");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let took = since.elapsed().as_secs_f64();
        let _ = stop.send(());
        feeder.join().unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(status.code(), Some(code), "{args:?}: {status:?} {err}");
        assert!(took < 5.0, "{args:?}: {took:.1} s after the signal");
        assert!(err.contains("no results written"), "{args:?}: {err}");
        let left: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
}

/// `db setup --engine sqlite --dir D` with a symbolic link planted at `D/iolens-slob.db`: SQLite
/// resolves the link, so setup created its 8 MB database at the link's target (anywhere the
/// link points, as root; exit 0), or opened the file it named. A link there is now refused
/// before anything is opened, and nothing is created at its target; `db run` and `db drop`
/// refuse it too.
#[test]
fn sqlite_setup_never_follows_a_link_planted_at_its_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let victim = dir.path().join("elsewhere.dat");
    std::os::unix::fs::symlink(&victim, db.join("iolens-slob.db")).unwrap();
    // A dangling link: its target would be created.
    let o = bin()
        .args(["db", "setup", "--scale", "8M", "--quiet", "--dir"])
        .arg(&db)
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("symbolic link"), "{t}");
    assert!(!victim.exists(), "setup created the link's target: {t}");
    // A link to an existing file: refused, the file unchanged.
    std::fs::write(&victim, vec![7u8; 1 << 16]).unwrap();
    for args in [
        &["db", "setup", "--scale", "8M", "--quiet", "--dir"][..],
        &["db", "run", "--quiet", "--duration", "1s", "--dir"][..],
        &["db", "drop", "--dir"][..],
    ] {
        let o = bin().args(args).arg(&db).output().unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains("symbolic link"), "{args:?}: {t}");
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            vec![7u8; 1 << 16],
            "{args:?}"
        );
    }
    let names: Vec<String> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["iolens-slob.db".to_string()]);
}

// ---------------------------------------------------------------------------------------------
// Bounds: durations and ranks

fn refused(args: &[&str], env: &[(&str, &str)], expect: &str) {
    let mut c = bin();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {t}");
    assert!(!t.contains("panicked"), "{args:?}: {t}");
    assert!(t.contains(expect), "{args:?}: expected {expect:?} in: {t}");
}

/// Absurd durations (1e20 s, 8000 years) for every duration option of run, calibrate, db run
/// and the launch options, and absurd world sizes, are clear errors (exit 2), never a panic
/// (exit 101) nor accepted.
#[test]
fn absurd_durations_and_world_sizes_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("never-created.dat");
    let t = t.to_str().unwrap();
    for v in ["1e20", "8000y", "1e400", "-1", "inf"] {
        for opt in ["--duration", "--warmup", "--interval", "--think"] {
            refused(&["run", "--target", t, opt, v], &[], v);
        }
        refused(&["calibrate", "--target", t, "--budget", v], &[], v);
        for opt in ["--duration", "--warmup", "--interval", "--think"] {
            refused(&["db", "run", "--dir", t, opt, v], &[], v);
        }
        refused(
            &["run", "--target", t, "--start-at", &format!("+{v}")],
            &[],
            v,
        );
        refused(&["watch", "--duration", v], &[], v);
    }
    refused(
        &["run", "--target", t, "--rate", "1e-300"],
        &[],
        "--rate 1e-300 is too low",
    );
    refused(
        &["run", "--target", t, "--start-at", "2100-01-01T00:00:00Z"],
        &[],
        "366 days",
    );
    refused(
        &["run", "--target", t, "--start-at", "9999-01-01T00:00:00Z"],
        &[],
        "out of range",
    );
    refused(
        &["run", "--target", t, "--rank", "0", "--ranks", "4294967295"],
        &[],
        "at most 1000000 ranks",
    );
    refused(
        &["run", "--target", t],
        &[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "200000000")],
        "at most 1000000 ranks",
    );
    refused(
        &["run", "--target", t],
        &[("JOB_COMPLETION_INDEX", "4000000000")],
        "1000000",
    );
    assert!(!Path::new(t).exists(), "nothing was created");
}
