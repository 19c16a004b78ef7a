//! PostgreSQL's I/O statistics views read from snapshots (`ingest --format pg-stat-io`,
//! `pg-stat-database`, `pg-stat-statements`) and sampled live (`db sample`), and MySQL's and
//! MariaDB's per-file I/O views (`--format mysql-file-io`): real psql output of the PostgreSQL
//! 15 and 18 test servers and real `mariadb` client output of MariaDB 10.11
//! (tests/fixtures/README.md, written by scripts/pg-stats-fixtures.sh and
//! scripts/mysql-stats-fixtures.sh), deltas checked against the files' own numbers (read here
//! independently), a `pg_stat_reset_shared('io')` between two snapshots handled and said, and
//! bad input refused with a specific error and a non-zero exit.

mod common;
use common::real;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use iolens::results::io_stats::{IoStats, IoStatsSeries};
use iolens::results::Results;
use iolens::sources::{ingest, Format, IngestOptions};

fn read(format: Format, path: PathBuf) -> anyhow::Result<Results> {
    ingest(
        &IngestOptions {
            format,
            files: vec![path],
            unit: None,
            time_unit: None,
            interval: std::time::Duration::from_secs(1),
            duration: None,
        },
        vec![],
    )
}

fn one(r: &Results) -> &IoStats {
    assert_eq!(r.io_stats.len(), 1, "one view");
    assert!(r.runs.is_empty(), "means only: no latency series");
    &r.io_stats[0]
}

fn series<'a>(s: &'a IoStats, key: &str, op: &str) -> &'a IoStatsSeries {
    s.series
        .iter()
        .find(|x| x.key == key && x.op == op)
        .unwrap_or_else(|| panic!("no series {key} {op}"))
}

fn near(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-6 * b.abs().max(1.0), "{a} vs {b}");
}

#[test]
fn pg18_watch_output_with_a_reset_between_snapshots() {
    let r = read(Format::PgStatIo, real("pg18_stat_io_watch.txt")).unwrap();
    let s = one(&r);
    assert!(s.column_set.contains("18"), "{}", s.column_set);
    // Eight `\watch` tables of 20 rows each.
    assert_eq!(s.snapshots, 8);
    assert_eq!(s.intervals.len(), 7);
    // client backend / relation / bulkread, as printed in the eight tables (reads, read_bytes,
    // read_time): 317 7643136 0 twice, 1244 53952512 330.328 twice, then (after the reset at
    // 14:22:41.977577) 0 0 0 twice, 1732 42213376 146.825 twice.
    let rd = series(s, "client backend/relation/bulkread", "read");
    let counts: Vec<Option<u64>> = rd
        .deltas
        .iter()
        .map(|d| d.as_ref().and_then(|d| d.count))
        .collect();
    assert_eq!(
        counts,
        [0, 927, 0, 0, 0, 1732, 0].map(Some).to_vec(),
        "the reset interval counts from the reset (0), never 0 - 1244"
    );
    assert_eq!(rd.count, Some(927 + 1732));
    assert_eq!(rd.bytes, Some((53952512 - 7643136) + 42213376));
    near(rd.time_ms.unwrap(), 330.32800000000003 + 146.82500000000002);
    near(rd.mean_ms.unwrap(), (330.328 + 146.825) / 2659.0);
    // Writes: 1644 (13467648 bytes, 9.002 ms) in the third table, then reset.
    let wr = series(s, "client backend/relation/bulkread", "write");
    assert_eq!((wr.count, wr.bytes), (Some(1644), Some(13467648)));
    near(wr.time_ms.unwrap(), 9.002);
    // The reset: every one of the 20 keys has a new stats_reset in the fourth interval.
    let resets: Vec<u64> = s.intervals.iter().map(|i| i.resets).collect();
    assert_eq!(resets, vec![0, 0, 0, 20, 0, 0, 0]);
    assert!(s.notes.iter().any(|n| n.contains("reset")), "{:?}", s.notes);
    // Titles are to the second: 14:22:37 38 39 40 42 43 43 44.
    let d: Vec<Option<f64>> = s.intervals.iter().map(|i| i.duration_s).collect();
    assert_eq!(
        d,
        vec![
            Some(1.0),
            Some(1.0),
            Some(1.0),
            Some(2.0),
            Some(1.0),
            None,
            Some(1.0)
        ]
    );
    assert!(s.notes.iter().any(|n| n.contains("same time")));
    // A WAL row (18 only): checkpointer/wal/normal wrote 3 times before the reset, never in
    // the window after the first snapshot.
    let wal = series(s, "checkpointer/wal/normal", "write");
    assert_eq!(wal.count, Some(0));
    // Means only: no op is given a distribution anywhere in the document.
    let json = serde_json::to_string(&r).unwrap();
    assert!(
        !json.contains("p99"),
        "no percentiles for means-only evidence"
    );
}

/// `ts,backend_type,…` CSV: the totals over the window are the last snapshot's counters less
/// the first's, key by key (no reset in this file: read here, independently of iolens).
#[test]
fn pg18_csv_totals_are_last_minus_first() {
    let path = real("pg18_stat_io.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut header: Vec<&str> = Vec::new();
    let mut snaps: Vec<(String, BTreeMap<String, Vec<String>>)> = Vec::new();
    for l in text.lines() {
        if l.starts_with("ts,") {
            header = l.split(',').collect();
            continue;
        }
        let c: Vec<String> = l.split(',').map(str::to_string).collect();
        if snaps.last().map(|s| &s.0) != Some(&c[0]) {
            snaps.push((c[0].clone(), BTreeMap::new()));
        }
        let key = c[1..4].join("/");
        snaps.last_mut().unwrap().1.insert(key, c);
    }
    assert_eq!(snaps.len(), 3);
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let r = read(Format::PgStatIo, path).unwrap();
    let s = one(&r);
    assert_eq!(s.snapshots, 3);
    let mut checked = 0;
    for (key, last) in &snaps[2].1 {
        let first = &snaps[0].1[key];
        assert_eq!(first[col("stats_reset")], last[col("stats_reset")]);
        for (op, n, b, t) in [
            ("read", "reads", "read_bytes", "read_time"),
            ("write", "writes", "write_bytes", "write_time"),
            ("extend", "extends", "extend_bytes", "extend_time"),
        ] {
            if last[col(n)].is_empty() {
                assert!(!s.series.iter().any(|x| &x.key == key && x.op == op));
                continue;
            }
            let f = |row: &Vec<String>, c: &str| row[col(c)].parse::<f64>().unwrap();
            let x = series(s, key, op);
            assert_eq!(
                x.count,
                Some((f(last, n) - f(first, n)) as u64),
                "{key} {op}"
            );
            assert_eq!(
                x.bytes,
                Some((f(last, b) - f(first, b)) as u64),
                "{key} {op}"
            );
            let dt = f(last, t) - f(first, t);
            if x.count.unwrap() > 0 && dt == 0.0 {
                assert_eq!(x.time_ms, None, "{key} {op}: untimed, not 0");
            } else {
                near(x.time_ms.unwrap(), dt);
            }
            checked += 1;
        }
    }
    assert!(checked >= 30, "{checked}");
    let span: f64 = s.intervals.iter().map(|i| i.duration_s.unwrap()).sum();
    // 14:22:45.95275 to the third snapshot's now().
    let t0 = chrono::DateTime::parse_from_str(&snaps[0].0, "%Y-%m-%d %H:%M:%S%.f%#z").unwrap();
    let t2 = chrono::DateTime::parse_from_str(&snaps[2].0, "%Y-%m-%d %H:%M:%S%.f%#z").unwrap();
    near(span, (t2 - t0).num_microseconds().unwrap() as f64 / 1e6);
}

#[test]
fn pg15_database_unaligned() {
    let r = read(
        Format::PgStatDatabase,
        real("pg15_stat_database_unaligned.txt"),
    )
    .unwrap();
    let s = one(&r);
    assert_eq!(s.snapshots, 3);
    // iolens_test: blks_read 5211 → 21690, blk_read_time 2.434 → 236.575, blk_write_time
    // 35.635 → 217.726, over 14:22:48.148771 → 14:22:49.128739.
    let rd = series(s, "iolens_test", "read");
    assert_eq!(rd.count, Some(21690 - 5211));
    near(rd.time_ms.unwrap(), 236.575 - 2.434);
    near(rd.mean_ms.unwrap(), (236.575 - 2.434) / 16479.0);
    let wr = series(s, "iolens_test", "write");
    assert_eq!(wr.count, None, "pg_stat_database keeps no write count");
    assert_eq!(wr.mean_ms, None);
    near(wr.time_ms.unwrap(), 217.726 - 35.635);
    let span: f64 = s.intervals.iter().map(|i| i.duration_s.unwrap()).sum();
    near(span, 0.979968);
    // The row of shared objects (datname NULL) is its own key.
    assert!(s.series.iter().any(|x| x.key == "(shared objects)"));
}

#[test]
fn statements_before_and_after_17() {
    let r15 = read(Format::PgStatStatements, real("pg15_stat_statements.csv")).unwrap();
    let s = one(&r15);
    assert!(s.column_set.contains("16 and before"), "{}", s.column_set);
    // The first snapshot (just after pg_stat_statements_reset()) has no rows.
    assert_eq!(s.snapshots, 2);
    let key = "5729396266363381825/db 16384/user 10: SELECT count(*) FROM g_big WHERE pad <> $1";
    let rd = series(s, key, "shared+local read");
    assert_eq!(rd.count, Some(6753 - 3384));
    near(rd.time_ms.unwrap(), 97.384634 - 35.886819);
    let wr = series(s, key, "shared+local write");
    assert_eq!(wr.count, Some(1));
    near(wr.time_ms.unwrap(), 0.37126200000000004 - 0.343691);

    let r18 = read(Format::PgStatStatements, real("pg18_stat_statements.csv")).unwrap();
    let s = one(&r18);
    assert!(s.column_set.contains("17 and after"), "{}", s.column_set);
    let key = "6817990857438263352/db 16384/user 10: SELECT count(*) FROM g_big WHERE pad <> $1";
    let rd = series(s, key, "shared read");
    assert_eq!(rd.count, Some(6612 - 3308));
    near(rd.time_ms.unwrap(), 366.737508 - 196.014151);
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    // Another view's table.
    let out = common::bin()
        .args(["ingest", "--format", "pg-stat-io"])
        .arg(real("pg15_stat_database_unaligned.txt"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no pg_stat_io table") && err.contains("blks_read"),
        "{err}"
    );
    // Snapshots out of time order.
    let text = std::fs::read_to_string(real("pg15_stat_database_unaligned.txt")).unwrap();
    let swapped = text.replace("14:22:49.128739", "14:22:47.128739");
    let p = dir.path().join("swapped.txt");
    std::fs::write(&p, swapped).unwrap();
    let e = read(Format::PgStatDatabase, p).unwrap_err();
    assert!(format!("{e:#}").contains("time order"), "{e:#}");
    // A time cell that is no time.
    let garbled = text.replacen("2026-11-25 14:22:48.740129+00", "yesterday", 1);
    let p = dir.path().join("garbled.txt");
    std::fs::write(&p, garbled).unwrap();
    let e = read(Format::PgStatDatabase, p).unwrap_err();
    assert!(format!("{e:#}").contains("not a timestamp"), "{e:#}");
}

fn live_dsn() -> Option<String> {
    for v in ["IOLENS_PG18_DSN", "IOLENS_PG_DSN"] {
        if let Ok(d) = std::env::var(v) {
            if !d.trim().is_empty() {
                return Some(d);
            }
        }
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pgtest/dsn");
    if let Ok(d) = std::fs::read_to_string(p) {
        return Some(d.trim().to_string());
    }
    assert!(
        std::env::var("IOLENS_PG_TESTS").as_deref() != Ok("1"),
        "IOLENS_PG_TESTS=1 but no PostgreSQL DSN: run scripts/pg-test-server.sh"
    );
    eprintln!("note: db sample test skipped (no IOLENS_PG18_DSN / IOLENS_PG_DSN)");
    None
}

/// `db sample` on the test server while a query reads every block of a table: the database's
/// blocks read + hit in the window are at least the table's blocks; Ctrl-C ends the window
/// early and the results are still written.
#[test]
fn db_sample_sees_a_scan_and_ends_on_ctrl_c() {
    let Some(dsn) = live_dsn() else { return };
    let mut c = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    c.batch_execute(
        "DROP TABLE IF EXISTS iolens_sample_t; \
         CREATE TABLE iolens_sample_t AS SELECT i, repeat('y', 500) AS pad \
         FROM generate_series(1, 20000) i",
    )
    .unwrap();
    let pages: i64 = c
        .query_one(
            "SELECT (pg_relation_size('iolens_sample_t') / 8192)::bigint",
            &[],
        )
        .unwrap()
        .get(0);
    let db: String = c
        .query_one("SELECT current_database()", &[])
        .unwrap()
        .get(0);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let mut child = common::bin()
        .args(["db", "sample", "--engine", "postgres", "--dsn", &dsn])
        .args(["--interval", "2s", "--duration", "6s", "--json"])
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The scan once the sampler has taken its first snapshots (its session, named iolens-db,
    // has run the pg_stat_database query), however slowly this machine starts it.
    let t0 = std::time::Instant::now();
    loop {
        let n: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'iolens-db' \
                 AND state = 'idle' AND (query LIKE '%FROM pg_stat_database%' \
                 OR query LIKE '%FROM pg_stat_statements%')",
                &[],
            )
            .unwrap()
            .get(0);
        if n > 0 || t0.elapsed().as_secs() > 5 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Counted in pg_stat_database when this session goes idle (not up to 10 s later).
    c.batch_execute(
        "SELECT pg_stat_force_next_flush(); \
         SELECT count(*) FROM iolens_sample_t WHERE pad <> ''",
    )
    .unwrap();
    let st = child.wait().unwrap();
    assert!(st.success(), "{st}");
    let r = Results::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let d = r
        .io_stats
        .iter()
        .find(|v| v.view == "pg_stat_database")
        .expect("pg_stat_database sampled");
    assert_eq!(d.snapshots, 4, "at 0, 2, 4 and 6 s");
    let sum = |op: &str| {
        d.series
            .iter()
            .find(|x| x.key == db && x.op == op)
            .and_then(|x| x.count)
            .unwrap_or(0)
    };
    assert!(
        sum("read") + sum("hit") >= pages as u64,
        "{} + {} blocks for a table of {pages}",
        sum("read"),
        sum("hit")
    );
    let span: f64 = d.intervals.iter().filter_map(|i| i.duration_s).sum();
    // From the first snapshot (at the start, or a little after on a busy machine) to the
    // last (at 6 s or after).
    assert!(span >= 5.0, "{span}");
    // Ctrl-C after the first snapshots: exit 130, results written.
    let json2 = dir.path().join("i.json");
    let child = common::bin()
        .args(["db", "sample", "--engine", "postgres", "--dsn", &dsn])
        .args(["--interval", "1s", "--duration", "600s", "--json"])
        .arg(&json2)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(4000));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let r = Results::from_json(&std::fs::read_to_string(&json2).unwrap()).unwrap();
    assert!(r.io_stats.iter().all(|v| v.snapshots >= 1));
    c.batch_execute("DROP TABLE iolens_sample_t").unwrap();
}

/// The terminal summary names long keys (#1 …) under the table and fits 80 columns; rates
/// are left out where the span is unknown (two `\watch` titles in the same second).
#[test]
fn summary_fits_80_columns() {
    for (format, file) in [
        ("pg-stat-io", "pg18_stat_io_watch.txt"),
        ("pg-stat-io", "pg18_stat_io.csv"),
        ("pg-stat-statements", "pg15_stat_statements.csv"),
        ("mysql-file-io", "mariadb_file_summary_by_instance.tsv"),
        ("mysql-file-io", "mariadb_io_global_by_file_by_latency.txt"),
    ] {
        let out = common::bin()
            .args(["ingest", "--format", format])
            .arg(real(file))
            .env("COLUMNS", "80")
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        for l in text.lines() {
            assert!(
                iolens::out::visible_width(l) <= 80,
                "{file}: {l}\n---\n{text}"
            );
        }
        assert!(text.contains("#1  "), "{text}");
        assert!(!text.contains("p99"), "{text}");
        if file.ends_with("watch.txt") {
            assert!(!text.contains("per s"), "{text}");
        }
    }
}

/// Cells of the rows of `file` in a boxed (`| a | b |`) or tab-separated client output whose
/// `key_col` is `key`, by column name, read here independently of iolens.
fn client_rows(text: &str, key_col: &str, key: &str) -> Vec<BTreeMap<String, String>> {
    let mut header: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for l in text.lines() {
        let cells: Vec<String> = if l.starts_with('|') {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        } else if l.contains('\t') {
            l.split('\t').map(str::to_string).collect()
        } else {
            continue;
        };
        if cells.iter().any(|c| c.eq_ignore_ascii_case(key_col)) {
            header = cells.iter().map(|c| c.to_ascii_lowercase()).collect();
            continue;
        }
        let row: BTreeMap<String, String> = header.iter().cloned().zip(cells).collect();
        if row.get(key_col).map(String::as_str) == Some(key) {
            rows.push(row);
        }
    }
    rows
}

/// Per-interval deltas of a counter over snapshots, counting from zero where it went back.
fn deltas(v: &[f64]) -> Vec<f64> {
    v.windows(2)
        .map(|w| if w[1] < w[0] { w[1] } else { w[1] - w[0] })
        .collect()
}

/// MariaDB 10.11's performance_schema.file_summary_by_instance (`mariadb -B`) and sys's
/// io_global_by_file_by_latency (boxed, formatted times) and its x$ form (picoseconds, no time
/// column), five snapshots with a server restart between the third and the fourth (written by
/// scripts/mysql-stats-fixtures.sh): per-interval deltas of the big table's file equal the
/// file's own numbers, the restart's interval counts from zero and is said, InnoDB reads are
/// 16 KiB pages (known by construction), and the result is means only.
#[test]
fn mariadb_file_io_snapshots_with_a_restart() {
    // performance_schema, tab-separated, time column `ts`.
    let name = "mariadb_file_summary_by_instance.tsv";
    let r = read(Format::MysqlFileIo, real(name)).unwrap();
    let s = one(&r);
    assert!(
        s.column_set.contains("file_summary_by_instance"),
        "{}",
        s.column_set
    );
    assert_eq!(s.snapshots, 5);
    assert_eq!(s.intervals.len(), 4);
    let text = std::fs::read_to_string(real(name)).unwrap();
    let file = text
        .lines()
        .find_map(|l| l.split('\t').nth(1).filter(|f| f.ends_with("/g/big.ibd")))
        .unwrap()
        .to_string();
    let rows = client_rows(&text, "file_name", &file);
    assert_eq!(rows.len(), 5);
    let col = |c: &str| -> Vec<f64> { rows.iter().map(|r| r[c].parse().unwrap()).collect() };
    let (count, ps, bytes) = (
        deltas(&col("count_read")),
        deltas(&col("sum_timer_read")),
        deltas(&col("sum_number_of_bytes_read")),
    );
    // The restart: counters went back between snapshots 3 and 4.
    assert!(col("count_read")[3] < col("count_read")[2]);
    assert!(s.intervals[2].resets > 0, "{:?}", s.intervals);
    assert_eq!(s.intervals.iter().filter(|i| i.resets > 0).count(), 1);
    assert!(
        s.notes.iter().any(|n| n.contains("server restart")),
        "{:?}",
        s.notes
    );
    let rd = series(s, &format!("{file} [innodb_data_file]"), "read");
    for (i, d) in rd.deltas.iter().enumerate() {
        let d = d.as_ref().unwrap();
        assert_eq!(d.count, Some(count[i] as u64), "interval {i}");
        assert_eq!(d.bytes, Some(bytes[i] as u64), "interval {i}");
        near(d.time_ms.unwrap(), ps[i] / 1e9);
    }
    assert_eq!(rd.count, Some(count.iter().sum::<f64>() as u64));
    near(
        rd.mean_ms.unwrap(),
        ps.iter().sum::<f64>() / 1e9 / count.iter().sum::<f64>(),
    );
    // InnoDB reads whole 16 KiB pages: the scan after the restart read count × 16384 bytes.
    assert_eq!(bytes[2], count[2] * 16384.0);
    // Interval lengths from the time column.
    let ts: Vec<&str> = rows.iter().map(|r| r["ts"].as_str()).collect();
    assert!(s
        .intervals
        .iter()
        .all(|i| i.duration_s.is_some_and(|d| d > 0.0)));
    assert_eq!(
        s.intervals[0].start.as_deref().unwrap()[..19].replace('T', " "),
        ts[0][..19]
    );

    // sys.io_global_by_file_by_latency, boxed, times formatted with their unit.
    let name = "mariadb_io_global_by_file_by_latency.txt";
    let r = read(Format::MysqlFileIo, real(name)).unwrap();
    let s = one(&r);
    assert_eq!((s.snapshots, s.intervals.len()), (5, 4));
    assert!(
        s.notes.iter().any(|n| n.contains("rounded")),
        "{:?}",
        s.notes
    );
    let text = std::fs::read_to_string(real(name)).unwrap();
    let rows = client_rows(&text, "file", "@@datadir/g/big.ibd");
    assert_eq!(rows.len(), 5);
    let counts: Vec<f64> = rows
        .iter()
        .map(|r| r["count_read"].parse().unwrap())
        .collect();
    let rd = series(s, "@@datadir/g/big.ibd", "read");
    let got: Vec<u64> = rd
        .deltas
        .iter()
        .map(|d| d.as_ref().unwrap().count.unwrap())
        .collect();
    let want: Vec<u64> = deltas(&counts).iter().map(|&c| c as u64).collect();
    assert_eq!(got, want);
    assert_eq!(s.intervals.iter().filter(|i| i.resets > 0).count(), 1);
    // A time like `8.65 ms` or `1.22 s`: within the rounding of the two it is the difference of.
    let ms = |t: &str| -> f64 {
        let (n, u) = t.split_once(' ').unwrap();
        let n: f64 = n.parse().unwrap();
        n * match u {
            "ps" => 1e-9,
            "ns" => 1e-6,
            "us" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            _ => panic!("unit {u}"),
        }
    };
    let lat: Vec<f64> = rows.iter().map(|r| ms(&r["read_latency"])).collect();
    for (i, d) in deltas(&lat).iter().enumerate() {
        near(rd.deltas[i].as_ref().unwrap().time_ms.unwrap(), *d);
    }

    // sys.x$io_global_by_file_by_latency: picoseconds, no time column (one table a snapshot).
    let name = "mariadb_x_io_global_by_file_by_latency.txt";
    let r = read(Format::MysqlFileIo, real(name)).unwrap();
    let s = one(&r);
    assert_eq!((s.snapshots, s.intervals.len()), (5, 4));
    assert!(s.intervals.iter().all(|i| i.duration_s.is_none()));
    assert!(
        s.notes.iter().any(|n| n.contains("no time")),
        "{:?}",
        s.notes
    );
    let text = std::fs::read_to_string(real(name)).unwrap();
    let rows = client_rows(&text, "file", &file);
    assert_eq!(rows.len(), 5);
    let ps: Vec<f64> = rows
        .iter()
        .map(|r| r["read_latency"].parse().unwrap())
        .collect();
    let rd = series(s, &file, "read");
    for (i, d) in deltas(&ps).iter().enumerate() {
        near(rd.deltas[i].as_ref().unwrap().time_ms.unwrap(), d / 1e9);
    }

    // A table of neither: refused, naming what is needed.
    let e = read(Format::MysqlFileIo, real("pg18_stat_io.csv")).unwrap_err();
    let m = format!("{e:#}");
    assert!(
        m.contains("no mysql-file-io data found") && m.contains("count_read"),
        "{m}"
    );
}

/// `iolens ingest -q --format FORMAT` of the real fixture `file`, its results written to `json`.
fn ingest_json(format: &str, file: &str, json: &Path) {
    let out = common::bin()
        .args(["ingest", "-q", "--format", format])
        .arg(real(file))
        .arg("--json")
        .arg(json)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// `compare` between means-only evidence (MariaDB's per-file view) and a run compares the mean
/// latency of the operations both hold, says it compares means only, and shows no percentile;
/// where the two hold no operation in common, the refusal names each side's operations.
#[test]
fn compare_means_only_with_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let means = dir.path().join("m.json");
    ingest_json(
        "mysql-file-io",
        "mariadb_io_global_by_file_by_latency.txt",
        &means,
    );
    let m = read(
        Format::MysqlFileIo,
        real("mariadb_io_global_by_file_by_latency.txt"),
    )
    .unwrap();
    let run = iolens::synth::run_results(10, 1.0, 1);
    let run_path = dir.path().join("run.json");
    run.write_file(&run_path).unwrap();
    // The means each side holds, summed here over the series and the run's operations.
    let mean_of = |op: &str| -> (f64, f64) {
        let (mut n, mut t) = (0u64, 0f64);
        for x in one(&m).series.iter().filter(|x| x.op == op) {
            if let (Some(c), Some(ms)) = (x.count, x.time_ms) {
                n += c;
                t += ms * 1e6;
            }
        }
        let o = run.runs[0].ops.iter().find(|o| o.op == op).unwrap();
        (t / n as f64, o.summary.mean_ns)
    };
    let out = common::bin()
        .args(["compare", "--width", "120"])
        .arg(&means)
        .arg(&run_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Means only: m.json") && text.contains("never percentiles"),
        "{text}"
    );
    for op in ["read", "write"] {
        let (a, b) = mean_of(op);
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("{op} mean")))
            .unwrap_or_else(|| panic!("no {op} mean row:\n{text}"));
        assert!(
            row.contains(&iolens::units::fmt_ns(a))
                && row.contains(&iolens::units::fmt_ns(b))
                && row.contains(&iolens::units::ratio(a, b)),
            "{op}: {a} {b}\n{row}"
        );
    }
    assert!(!text.contains("p99") && !text.contains("p50"), "{text}");
    // The same in HTML: a means section, no percentile curves.
    let html = dir.path().join("cmp.html");
    let out = common::bin()
        .arg("compare")
        .arg(&means)
        .arg(&run_path)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let h = std::fs::read_to_string(&html).unwrap();
    assert!(h.contains("<section id=\"means\">"));
    assert!(!h.contains(" percentiles — "));

    // No operation in common: each side's operations named, means-only said.
    let bio = dir.path().join("bio.json");
    ingest_json("biolatency", "bcc_biolatency.txt", &bio);
    let out = common::bin()
        .arg("compare")
        .arg(&means)
        .arg(&bio)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("m.json holds misc, read, write (means only), bio.json holds block I/O"),
        "{err}"
    );
    assert!(!err.contains("( vs"), "{err}");
}
