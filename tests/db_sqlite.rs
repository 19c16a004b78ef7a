//! `iolens db` on the embedded SQLite engine: layout, resumption, the work loop's mix, per-I/O
//! timing against SQLite's own counters, results round trip, and bad input.

mod common;

use common::bin;
use std::path::Path;
use std::process::Command;

use iolens::db::{sqlite, Layout};
use iolens::results::Results;
use rusqlite::Connection;

fn run_ok(args: &[&str]) -> String {
    let out = bin().args(args).output().expect("runs");
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    let se = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?} failed:\n{so}\n{se}");
    so
}

fn run_err(args: &[&str]) -> String {
    let out = bin().args(args).output().expect("runs");
    assert!(!out.status.success(), "{args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn setup_dir(dir: &Path, schemas: &str, scale: &str) {
    run_ok(&[
        "db",
        "setup",
        "--dir",
        dir.to_str().unwrap(),
        "--schemas",
        schemas,
        "--scale",
        scale,
        "--quiet",
    ]);
}

fn counter(r: &Results, k: &str) -> f64 {
    *r.runs[0]
        .counters
        .get(k)
        .unwrap_or_else(|| panic!("counter {k} missing"))
}

#[test]
fn layout_has_one_row_per_page_in_random_physical_order() {
    let t = tempfile::tempdir().unwrap();
    let layout = Layout {
        schemas: 2,
        rows: 1024,
        seed: 3,
    };
    let o = sqlite::setup(t.path(), &layout, None, false).unwrap();
    assert!(o.complete);
    assert_eq!(o.checks.len(), 2);
    // Independent look at SQLite's page map.
    let c = Connection::open(sqlite::db_path(t.path())).unwrap();
    let ps: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    assert_eq!(ps, 8192);
    for s in 0..2 {
        let (leaves, max_cells): (i64, i64) = c
            .query_row(
                &format!(
                    "SELECT count(*), max(ncell) FROM dbstat WHERE name='t{s}' AND pagetype='leaf'"
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(leaves, 1024, "one leaf page per row");
        assert_eq!(max_cells, 1);
        let overflow: i64 = c
            .query_row(
                &format!("SELECT count(*) FROM dbstat WHERE name='t{s}' AND pagetype='overflow'"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(overflow, 0);
        // Keys are a permutation of 1..=rows, uncorrelated with the physical (id) order.
        let (n, mn, mx, distinct): (i64, i64, i64, i64) = c
            .query_row(
                &format!("SELECT count(*), min(k), max(k), count(DISTINCT k) FROM t{s}"),
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!((n, mn, mx, distinct), (1024, 1, 1024, 1024));
        let mut st = c.prepare(&format!("SELECT k, id FROM t{s}")).unwrap();
        let pairs: Vec<(f64, f64)> = st
            .query_map([], |r| {
                Ok((r.get::<_, i64>(0)? as f64, r.get::<_, i64>(1)? as f64))
            })
            .unwrap()
            .map(|x| x.unwrap())
            .collect();
        let m = 512.5;
        let cov: f64 = pairs.iter().map(|(a, b)| (a - m) * (b - m)).sum();
        let var: f64 = pairs.iter().map(|(a, _)| (a - m) * (a - m)).sum();
        assert!((cov / var).abs() < 0.1, "correlation {}", cov / var);
        assert!(o.checks[s].key_position_corr.abs() < 0.1);
        let idx: i64 = c
            .query_row(
                &format!("SELECT count(*) FROM sqlite_master WHERE type='index' AND name='t{s}_k'"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(idx, 1);
        // Payload is incompressible random bytes.
        let pad: Vec<u8> = c
            .query_row(&format!("SELECT pad FROM t{s} WHERE id=7"), [], |r| {
                r.get(0)
            })
            .unwrap();
        let zeros = pad.iter().filter(|b| **b == 0).count();
        assert!(zeros < pad.len() / 50, "payload looks compressible");
    }
}

#[test]
fn setup_resumes_where_it_stopped_and_is_idempotent() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let layout = Layout {
        schemas: 2,
        rows: 1024,
        seed: 9,
    };
    let o = sqlite::setup(&a, &layout, Some(1500), false).unwrap();
    assert!(!o.complete);
    assert_eq!(o.rows_loaded, 1500);
    // A run on an incomplete layout is refused with a clear message.
    let e = run_err(&[
        "db",
        "run",
        "--dir",
        a.to_str().unwrap(),
        "--duration",
        "1s",
    ]);
    assert!(e.contains("incomplete") && e.contains("476 of 1024"), "{e}");
    let o = sqlite::setup(&a, &layout, None, false).unwrap();
    assert!(o.complete);
    assert_eq!(o.rows_loaded, 548);
    let o = sqlite::setup(&a, &layout, None, false).unwrap();
    assert!(o.complete);
    assert_eq!(o.rows_loaded, 0, "a second setup loads nothing");
    // Same content as a layout built in one go.
    sqlite::setup(&b, &layout, None, false).unwrap();
    let keys = |p: &Path| -> Vec<i64> {
        let c = Connection::open(sqlite::db_path(p)).unwrap();
        let mut st = c.prepare("SELECT k FROM t1 ORDER BY id").unwrap();
        let v = st
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|x| x.unwrap())
            .collect();
        v
    };
    assert_eq!(keys(&a), keys(&b));
    // A different layout on the same directory is refused, not mixed in.
    let e = sqlite::setup(
        &a,
        &Layout {
            schemas: 3,
            ..layout
        },
        None,
        false,
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("different layout"), "{e:#}");
}

#[test]
fn update_pct_is_honoured_and_every_update_lands() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("slob");
    setup_dir(&dir, "2", "8M");
    let json = t.path().join("r.json");
    run_ok(&[
        "db",
        "run",
        "--dir",
        dir.to_str().unwrap(),
        "--sessions",
        "2",
        "--update-pct",
        "30",
        "--work-unit",
        "16",
        "--duration",
        "2s",
        "--seed",
        "5",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ]);
    let r = Results::read_file(&json).unwrap();
    let ops = counter(&r, "ops");
    let upd = counter(&r, "update_ops");
    assert!(ops >= 200.0, "too few ops to judge: {ops}");
    let share = upd / ops;
    assert!((share - 0.30).abs() < 0.06, "update share {share}");
    assert_eq!(counter(&r, "commits"), upd);
    assert_eq!(
        counter(&r, "rows_touched"),
        ops * 16.0,
        "each op touches the work unit"
    );
    // Every committed update incremented 16 rows by one.
    let c = Connection::open(sqlite::db_path(&dir)).unwrap();
    let total: i64 = c
        .query_row(
            "SELECT (SELECT sum(v) FROM t0) + (SELECT sum(v) FROM t1)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(total as f64, upd * 16.0);
    // Commits went through the log: writes and syncs were timed there.
    let ops_by_name = |n: &str| r.runs[0].op(n).map(|o| o.count).unwrap_or(0);
    assert!(ops_by_name("log write") > 0);
    assert_eq!(ops_by_name("log sync") as f64, counter(&r, "log_syncs"));
    assert!(
        counter(&r, "log_syncs") >= upd,
        "synchronous=FULL syncs the WAL per commit"
    );
    // Operation latencies: one per op.
    let o = &r.runs[1];
    assert_eq!(
        o.op("select").map(|x| x.count).unwrap_or(0) + o.op("update").map(|x| x.count).unwrap_or(0),
        ops as u64
    );

    // Read-only: no updates, nothing written.
    let json0 = t.path().join("r0.json");
    run_ok(&[
        "db",
        "run",
        "--dir",
        dir.to_str().unwrap(),
        "--sessions",
        "2",
        "--update-pct",
        "0",
        "--duration",
        "1s",
        "--quiet",
        "--json",
        json0.to_str().unwrap(),
    ]);
    let r0 = Results::read_file(&json0).unwrap();
    assert_eq!(counter(&r0, "update_ops"), 0.0);
    assert_eq!(counter(&r0, "log_writes"), 0.0);
    assert!(r0.runs[0].op("write").is_none());
}

#[test]
fn per_io_timing_counts_exactly_sqlites_physical_reads() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("slob");
    setup_dir(&dir, "1", "16M");
    let json = t.path().join("r.json");
    run_ok(&[
        "db",
        "run",
        "--dir",
        dir.to_str().unwrap(),
        "--sessions",
        "2",
        "--duration",
        "2s",
        "--cache-size",
        "256K",
        "--interval",
        "500ms",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ]);
    let r = Results::read_file(&json).unwrap();
    let read = r.runs[0].op("read").expect("block reads were timed");
    let physical = counter(&r, "physical_reads");
    assert!(physical > 1000.0, "{physical}");
    assert_eq!(
        read.count as f64, physical,
        "one timed read per SQLite cache miss"
    );
    assert_eq!(read.count as f64, counter(&r, "block_reads"));
    assert_eq!(read.bytes, read.count * 8192);
    assert!(counter(&r, "logical_reads") > physical);
    assert_eq!(
        read.intervals.iter().map(|i| i.count).sum::<u64>(),
        read.count
    );
    assert!(read.intervals.len() >= 4);
    assert!(read.summary.p50_ns > 0 && read.summary.p50_ns <= read.summary.p99_ns);
    let cpu = r.runs[0].cpu.as_ref().unwrap();
    assert!(cpu.us_per_io > 0.0);
    assert!(
        (cpu.us_per_io - (cpu.user_s + cpu.sys_s) * 1e6 / physical).abs()
            < 1e-6 * cpu.us_per_io.max(1.0)
    );
    // Without the shim: SQLite still counts, but nothing is timed.
    let json2 = t.path().join("r2.json");
    run_ok(&[
        "db",
        "run",
        "--dir",
        dir.to_str().unwrap(),
        "--sessions",
        "1",
        "--duration",
        "1s",
        "--no-timing",
        "--quiet",
        "--json",
        json2.to_str().unwrap(),
    ]);
    let r2 = Results::read_file(&json2).unwrap();
    assert!(r2.runs[0].op("read").is_none());
    assert!(counter(&r2, "physical_reads") > 0.0);
}

#[test]
fn results_round_trip_and_summary() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("slob");
    setup_dir(&dir, "1", "8M");
    let json = t.path().join("r.json");
    let out = run_ok(&[
        "db",
        "run",
        "--dir",
        dir.to_str().unwrap(),
        "--sessions",
        "1",
        "--update-pct",
        "10",
        "--duration",
        "1s",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.contains("physical reads") && out.contains("CPU"),
        "{out}"
    );
    let r = Results::read_file(&json).unwrap();
    let back = Results::from_json(&r.to_json().unwrap()).unwrap();
    assert_eq!(r, back);
    assert_eq!(r.kind, iolens::results::Kind::Db);
    assert_eq!(r.runs.len(), 2);
    for run in &r.runs {
        for o in &run.ops {
            let h = o.hist.decode().unwrap();
            assert_eq!(h.len(), o.count);
        }
    }
}

#[test]
fn bad_input_gives_clear_errors_and_creates_nothing() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("none");
    let e = run_err(&[
        "db",
        "run",
        "--dir",
        dir.to_str().unwrap(),
        "--duration",
        "1s",
    ]);
    assert!(
        e.contains("no iolens database") && e.contains("db setup"),
        "{e}"
    );
    assert!(!dir.exists());
    // A scale that cannot fit: refused before anything is created.
    let e = run_err(&[
        "db",
        "setup",
        "--dir",
        dir.to_str().unwrap(),
        "--scale",
        "500T",
        "--quiet",
    ]);
    assert!(
        e.contains("free") && e.contains("nothing was created"),
        "{e}"
    );
    assert!(!dir.exists(), "no directory left behind");
    let e = run_err(&[
        "db",
        "setup",
        "--dir",
        dir.to_str().unwrap(),
        "--scale",
        "1M",
    ]);
    assert!(e.contains("too small"), "{e}");
    let e = run_err(&[
        "db",
        "setup",
        "--dir",
        dir.to_str().unwrap(),
        "--scale",
        "lots",
    ]);
    assert!(e.contains("not a size"), "{e}");
    let e = run_err(&["db", "setup", "--dsn", "host=/tmp"]);
    assert!(e.contains("--dsn is for --engine postgres"), "{e}");
    // A foreign file with our name is never touched.
    std::fs::create_dir_all(&dir).unwrap();
    let foreign = dir.join(sqlite::DB_FILE);
    {
        let c = Connection::open(&foreign).unwrap();
        c.execute_batch("CREATE TABLE mine(x); INSERT INTO mine VALUES (1);")
            .unwrap();
    }
    let before = std::fs::read(&foreign).unwrap();
    let e = run_err(&[
        "db",
        "setup",
        "--dir",
        dir.to_str().unwrap(),
        "--scale",
        "8M",
        "--quiet",
    ]);
    assert!(e.contains("not created by"), "{e}");
    let e = run_err(&["db", "drop", "--dir", dir.to_str().unwrap()]);
    assert!(e.contains("not created by"), "{e}");
    assert_eq!(std::fs::read(&foreign).unwrap(), before);
    // Run arguments are validated.
    let ok = t.path().join("ok");
    setup_dir(&ok, "1", "8M");
    let e = run_err(&[
        "db",
        "run",
        "--dir",
        ok.to_str().unwrap(),
        "--update-pct",
        "120",
    ]);
    assert!(e.contains("--update-pct"), "{e}");
    let e = run_err(&[
        "db",
        "run",
        "--dir",
        ok.to_str().unwrap(),
        "--work-unit",
        "5000",
    ]);
    assert!(e.contains("--work-unit 5000 is larger"), "{e}");
    // drop removes exactly what setup made.
    run_ok(&["db", "drop", "--dir", ok.to_str().unwrap()]);
    assert_eq!(std::fs::read_dir(&ok).unwrap().count(), 0);
}

/// `db run` progress on a terminal: one line per interval just measured, each interval once,
/// in order, none past the end, with that interval's own figures.
#[test]
fn progress_lines_show_the_interval_just_measured() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: `script` (util-linux) is needed to give iolens a terminal");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("slob");
    setup_dir(&dir, "1", "8M");
    let json = t.path().join("r.json");
    let cmd = format!(
        "{} db run --dir {} --sessions 1 --update-pct 20 --duration 4s --interval 1s --json {}",
        env!("CARGO_BIN_EXE_iolens"),
        dir.display(),
        json.display()
    );
    // `script` runs the command on a pseudo-terminal, so progress is drawn.
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("script runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    let lines: Vec<Vec<String>> = text
        .lines()
        .map(|l| l.trim())
        .filter(|l| l.contains("ops/s") && l.contains("block reads/s"))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    let at: Vec<&str> = lines.iter().map(|l| l[0].as_str()).collect();
    assert_eq!(at, ["1.0s", "2.0s", "3.0s", "4.0s"], "{text}");
    let r = Results::read_file(&json).unwrap();
    let count = |run: usize, names: &[&str], k: usize| -> u64 {
        r.runs[run]
            .ops
            .iter()
            .filter(|o| names.contains(&o.op.as_str()))
            .map(|o| o.intervals[k].count)
            .sum()
    };
    // The last interval's stored figures also hold the operation that ended past the end.
    for (k, l) in lines.iter().enumerate().take(3) {
        let ops = iolens::units::fmt_rate(count(1, &["select", "update"], k) as f64);
        assert_eq!(l[2], ops, "ops/s of interval {k}: {l:?}");
        let reads = iolens::units::fmt_rate(count(0, &["read", "write", "sync"], k) as f64);
        assert_eq!(l[5], reads, "block reads/s of interval {k}: {l:?}");
    }
}
