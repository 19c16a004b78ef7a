//! `iolens db` against a real PostgreSQL server.
//!
//! The server comes from `scripts/pg-test-server.sh` (installs PostgreSQL if missing, starts a
//! throwaway cluster with a 16MB shared_buffers, writes its key=value DSN to target/pgtest/dsn).
//! The DSN is read from `IOLENS_PG_DSN` or that file. Without one, these tests fail with a clear
//! message when `IOLENS_PG_TESTS=1` (CI) and are skipped with a note otherwise. Each test works
//! in its own database, created and dropped here.

mod common;

use std::process::Command;

use common::testdb::TestDb;
use iolens::results::Results;
use postgres::Client;

fn base_dsn() -> Option<String> {
    common::pg_dsn("PostgreSQL db test")
}

fn iolens(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_iolens"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn postgres_setup_and_run_end_to_end() {
    let Some(db) = TestDb::new("iolens_e2e", "PostgreSQL db test") else {
        return;
    };
    let dsn = db.dsn();
    let (ok, so, se) = iolens(&common::strs(&db.setup_args(2, "32M", &[])));
    assert!(ok, "{so}\n{se}");
    assert!(so.contains("setup complete"), "{so}");
    // Layout: one row per heap block, key order uncorrelated with block order.
    let mut c = db.client();
    for s in 0..2 {
        let r = c
            .query_one(
                &format!(
                    "SELECT count(*), count(DISTINCT (ctid::text::point)[0]),
                            corr(k, (ctid::text::point)[0]), min(k), max(k)
                       FROM iolens_t{s}"
                ),
                &[],
            )
            .unwrap();
        let (rows, blocks): (i64, i64) = (r.get(0), r.get(1));
        assert_eq!(rows, 4096);
        assert_eq!(blocks, 4096, "one row per block");
        assert!(r.get::<_, f64>(2).abs() < 0.1);
        assert_eq!((r.get::<_, i64>(3), r.get::<_, i64>(4)), (1, 4096));
    }
    // Setup again: nothing to load, verified again.
    let (ok, so, _) = iolens(&common::strs(&db.setup_args(2, "32M", &[])));
    assert!(ok && !so.contains("loading rows"), "{so}");

    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("pg.json");
    let secret_dsn = format!("{dsn} password=hunter2secret");
    let (ok, so, se) = iolens(&[
        "db",
        "run",
        "--engine",
        "postgres",
        "--dsn",
        &secret_dsn,
        "--sessions",
        "3",
        "--update-pct",
        "25",
        "--work-unit",
        "32",
        "--duration",
        "3s",
        "--seed",
        "4",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{so}\n{se}");
    assert!(!so.contains("hunter2") && !se.contains("hunter2"));
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(!text.contains("hunter2"), "credentials leaked into results");
    let r = Results::read_file(&json).unwrap();
    assert_eq!(Results::from_json(&r.to_json().unwrap()).unwrap(), r);
    assert!(r.command_line.iter().any(|a| a.contains("password=***")));
    let run = &r.runs[0];
    let k = |n: &str| *run.counters.get(n).unwrap_or_else(|| panic!("counter {n}"));
    let ops = k("ops");
    assert!(ops > 100.0, "{ops}");
    let share = k("update_ops") / ops;
    assert!((share - 0.25).abs() < 0.07, "update share {share}");
    assert_eq!(k("rows_touched"), ops * 32.0);
    // Every committed update incremented its 32 rows.
    let total: i64 = c
        .query_one(
            "SELECT ((SELECT sum(v) FROM iolens_t0) + (SELECT sum(v) FROM iolens_t1))::bigint",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(total as f64, k("update_ops") * 32.0);
    // Physical reads happened (data 64MB vs shared_buffers 16MB) and were timed by the server.
    assert!(k("physical_reads") > 1000.0, "{}", k("physical_reads"));
    assert!(k("logical_reads") > k("physical_reads"));
    assert!(k("blk_read_time_ms") > 0.0, "track_io_timing was on");
    assert!(k("pg_db_xact_commit") >= k("commits"));
    assert_eq!(
        run.op("select").map(|o| o.count).unwrap_or(0)
            + run.op("update").map(|o| o.count).unwrap_or(0),
        ops as u64
    );
    let cpu = run.cpu.as_ref().unwrap();
    assert!(
        cpu.us_per_io > 0.0 && cpu.user_s + cpu.sys_s > 0.0,
        "server CPU measured"
    );
    let w =
        r.db.as_ref()
            .and_then(|d| d.wait_profile.as_ref())
            .expect("wait profile");
    assert!(w.samples >= 15);
    let share_sum: f64 = w.events.iter().map(|e| e.share).sum();
    assert!((share_sum - 1.0).abs() < 1e-9);
    assert!(so.contains("wait profile"), "{so}");

    // drop removes everything setup created.
    let (ok, _, se) = iolens(&["db", "drop", "--engine", "postgres", "--dsn", &dsn]);
    assert!(ok, "{se}");
    let left: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_class WHERE relname LIKE 'iolens%'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
}

#[test]
fn postgres_bad_input_is_explained() {
    let Some(db) = TestDb::new("iolens_bad", "PostgreSQL db test") else {
        return;
    };
    // Wrong DSN: clear message, password never shown.
    let (ok, so, se) = iolens(&[
        "db",
        "run",
        "--engine",
        "postgres",
        "--dsn",
        "host=/nonexistent/socket/dir port=1 dbname=x password=topsecret9",
        "--duration",
        "1s",
    ]);
    assert!(!ok);
    assert!(se.contains("cannot connect to PostgreSQL"), "{se}");
    // The socket looked for is named, not a bare "No such file or directory".
    assert!(
        se.contains("no server socket /nonexistent/socket/dir/.s.PGSQL.1"),
        "{se}"
    );
    assert!(
        !se.contains("topsecret9") && !so.contains("topsecret9"),
        "{se}"
    );
    assert!(se.contains("password=***"), "{se}");
    // A database without the schema.
    let (ok, _, se) = iolens(&[
        "db",
        "run",
        "--engine",
        "postgres",
        "--dsn",
        &db.dsn(),
        "--duration",
        "1s",
    ]);
    assert!(!ok);
    assert!(
        se.contains("no iolens schema") && se.contains("db setup"),
        "{se}"
    );
    // A role that may not enable track_io_timing.
    let plain = format!("{} user=iolens_plain", db.dsn());
    let (ok, _, se) = iolens(&[
        "db",
        "run",
        "--engine",
        "postgres",
        "--dsn",
        &plain,
        "--duration",
        "1s",
    ]);
    assert!(!ok);
    assert!(
        se.contains("track_io_timing") && se.contains("--no-io-timing"),
        "{se}"
    );
    // Nothing was created by any of these.
    let mut c = db.client();
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_class WHERE relname LIKE 'iolens%'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    // Resumable setup: a partial load is reported, then completed.
    let layout = iolens::db::Layout {
        schemas: 1,
        rows: 2048,
        seed: 1,
    };
    let o = iolens::db::postgres::setup(&db.dsn(), &[], &layout, Some(1000), false).unwrap();
    assert!(!o.complete);
    let (ok, _, se) = iolens(&[
        "db",
        "run",
        "--engine",
        "postgres",
        "--dsn",
        &db.dsn(),
        "--duration",
        "1s",
    ]);
    assert!(
        !ok && se.contains("incomplete") && se.contains("1000 of 2048"),
        "{se}"
    );
    let o = iolens::db::postgres::setup(&db.dsn(), &[], &layout, None, false).unwrap();
    assert!(o.complete);
    assert_eq!(o.rows_loaded, 1048);
    assert_eq!(o.checks[0].blocks, 2048);
}

/// libpq's conventions (issue 10, item 16): no --dsn at all, the connection taken from PGHOST,
/// PGPORT, PGUSER and PGDATABASE, and a password file with loose permissions ignored with
/// libpq's warning.
#[test]
fn postgres_connection_from_the_libpq_environment() {
    let Some(db) = TestDb::new("iolens_libpq_env", "PostgreSQL db test") else {
        return;
    };
    let p = iolens::db::libpq::dsn_params(&db.dsn()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let passfile = dir.path().join("pgpass");
    std::fs::write(&passfile, "*:*:*:*:unused\n").unwrap();
    std::fs::set_permissions(
        &passfile,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_iolens"));
    c.args([
        "db", "setup", "--engine", "postgres", "--scale", "8M", "--quiet",
    ]);
    for v in [
        "PGSERVICE",
        "PGPASSWORD",
        "PGSSLMODE",
        "PGHOSTADDR",
        "PGOPTIONS",
    ] {
        c.env_remove(v);
    }
    for (k, v) in [
        ("host", "PGHOST"),
        ("port", "PGPORT"),
        ("user", "PGUSER"),
        ("dbname", "PGDATABASE"),
    ] {
        match p.get(k) {
            Some(x) => c.env(v, x),
            None => c.env_remove(v),
        };
    }
    c.env("PGPASSFILE", &passfile);
    let out = c.output().unwrap();
    let se = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{se}");
    assert!(se.contains("group or world access"), "{se}");
    let n: i64 = db
        .client()
        .query_one("SELECT count(*) FROM iolens_t0", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 1024);
}

/// The password from a libpq password file reaches the server: the test cluster's `iolens_pw`
/// role must authenticate with SCRAM (password `s3cr:t\x`, written with libpq's escapes).
#[test]
fn postgres_password_from_the_password_file() {
    let Some(base) = base_dsn() else {
        return;
    };
    let p = iolens::db::libpq::dsn_params(&base).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let passfile = dir.path().join("pgpass");
    let attempt = |line: &str| {
        std::fs::write(&passfile, format!("# test\n{line}\n")).unwrap();
        std::fs::set_permissions(
            &passfile,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        let mut c = Command::new(env!("CARGO_BIN_EXE_iolens"));
        c.args(["db", "drop", "--engine", "postgres"]);
        for v in [
            "PGSERVICE",
            "PGPASSWORD",
            "PGSSLMODE",
            "PGHOSTADDR",
            "PGOPTIONS",
        ] {
            c.env_remove(v);
        }
        c.env("PGHOST", &p["host"])
            .env(
                "PGPORT",
                p.get("port").map(String::as_str).unwrap_or("5432"),
            )
            .env("PGDATABASE", &p["dbname"])
            .env("PGUSER", "iolens_pw")
            .env("PGPASSFILE", &passfile);
        let out = c.output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let port = p.get("port").cloned().unwrap_or_else(|| "5432".into());
    // Authenticated: the command gets as far as finding nothing to drop.
    let se = attempt(&format!("*:{port}:*:iolens_pw:s3cr\\:t\\\\x"));
    if se.contains("role \"iolens_pw\" does not exist") {
        panic!("the test cluster predates the iolens_pw role: rerun scripts/pg-test-server.sh");
    }
    assert!(se.contains("nothing to drop"), "{se}");
    // A wrong password, or no matching line, is refused by the server.
    let se = attempt(&format!("*:{port}:*:iolens_pw:wrong"));
    assert!(se.contains("password"), "{se}");
    assert!(!se.contains("nothing to drop"), "{se}");
    let se = attempt("otherhost:*:*:*:s3cr\\:t\\\\x");
    assert!(!se.contains("nothing to drop"), "{se}");
}

/// Passwords written in every DSN form the parser accepts — a backslash-escaped space in the
/// `key=value` form, a percent-encoded key or value in a URL's query, a URL's user information
/// holding `?` — connect (the test cluster's `iolens_pw_sp` role authenticates with SCRAM,
/// password `abc SECRET`), and the password shows nowhere: not in the results JSON, not in
/// `show`, not in error messages (issue 22, item 7).
#[test]
fn postgres_passwords_in_every_dsn_form_connect_and_never_show() {
    let Some(db) = TestDb::new("iolens_redact", "PostgreSQL db test") else {
        return;
    };
    let p = iolens::db::libpq::dsn_params(&db.base).unwrap();
    let (host, port) = (
        p["host"].clone(),
        p.get("port").cloned().unwrap_or_else(|| "5432".into()),
    );
    let mut c = db.client();
    if c.query_opt("SELECT 1 FROM pg_roles WHERE rolname = 'iolens_pw_sp'", &[])
        .unwrap()
        .is_none()
    {
        panic!("the test cluster predates the iolens_pw_sp role: rerun scripts/pg-test-server.sh");
    }
    // The role owns the test database and may turn on track_io_timing (PostgreSQL 15+), as a
    // DBA would set it up for iolens.
    c.batch_execute(&format!(
        "ALTER DATABASE {} OWNER TO iolens_pw_sp; \
         GRANT SET ON PARAMETER track_io_timing TO iolens_pw_sp",
        db.name
    ))
    .unwrap();
    drop(c);
    let enc_host: String = host
        .bytes()
        .map(|b| match b {
            b'/' => "%2F".to_string(),
            b => (b as char).to_string(),
        })
        .collect();
    let name = &db.name;
    let forms = [
        format!("host={host} port={port} dbname={name} user=iolens_pw_sp password=abc\\ SECRET"),
        format!("host={host} port={port} dbname={name} user=iolens_pw_sp password='abc SECRET'"),
        format!("postgresql://iolens_pw_sp@{enc_host}:{port}/{name}?pass%77ord=abc%20SECRET"),
        format!("postgresql://iolens_pw_sp:abc%20SECRET@{enc_host}:{port}/{name}"),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let clean = |what: &str, s: &str| {
        assert!(!s.contains("SECRET"), "{what} shows the password: {s}");
    };
    for (i, dsn) in forms.iter().enumerate() {
        let (ok, so, se) = iolens(&[
            "db", "setup", "--engine", "postgres", "--dsn", dsn, "--scale", "8M", "--quiet",
        ]);
        assert!(ok, "form {i} does not connect: {so}\n{se}");
        clean("setup", &format!("{so}{se}"));
        let json = tmp.path().join(format!("r{i}.json"));
        let (ok, so, se) = iolens(&[
            "db",
            "run",
            "--engine",
            "postgres",
            "--dsn",
            dsn,
            "--sessions",
            "1",
            "--duration",
            "1s",
            "--quiet",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(ok, "form {i}: {so}\n{se}");
        clean("db run", &format!("{so}{se}"));
        let doc = std::fs::read_to_string(&json).unwrap();
        clean("the results JSON", &doc);
        assert!(
            doc.contains("***"),
            "form {i}: the password is marked redacted"
        );
        let (ok, so, se) = iolens(&["show", json.to_str().unwrap()]);
        assert!(ok, "{se}");
        clean("show", &format!("{so}{se}"));
        // A wrong password (same forms): refused by the server, and not shown either.
        let wrong = dsn.replace("SECRET", "WRONGSECRET");
        let (ok, so, se) = iolens(&["db", "drop", "--engine", "postgres", "--dsn", &wrong]);
        assert!(!ok, "form {i}: a wrong password connected: {so}");
        clean("the error message", &format!("{so}{se}"));
    }
}

/// Drop a table's pages from the OS page cache (as root: the server's files), so that its
/// reads reach the device.
fn evict_table(c: &mut Client, table: &str) {
    // POSIX_FADV_DONTNEED drops only clean pages: a table just loaded by `db setup` is still
    // dirty in the page cache until written back, and its reads would all be cache hits.
    // CHECKPOINT writes and syncs it; the file is synced again before the pages are dropped.
    c.batch_execute("CHECKPOINT").unwrap();
    let path: String = c
        .query_one(
            "SELECT current_setting('data_directory') || '/' || pg_relation_filepath($1::text::regclass)",
            &[&table],
        )
        .unwrap()
        .get(0);
    let f = std::fs::File::open(&path).unwrap();
    f.sync_all().unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor; POSIX_FADV_DONTNEED only drops clean cached pages.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0, "fadvise {path}");
}

/// As root, `db run --engine postgres` traces its sessions' backends with the watch probes:
/// each physical read PostgreSQL counts is one traced `pread64` of a backend (PostgreSQL 15
/// reads a block with one pread), the reads that missed the page cache are block requests on
/// the data directory's disk (the run's block layer, as a SQLite run has it), the wait-event
/// table names IO:DataFileRead, and `show` and `export --markdown` print the wait profile.
/// Without root the same run says what it could not measure.
#[test]
fn postgres_run_as_root_traces_the_backends() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            std::env::var_os("CI").is_none(),
            "needs root, and CI is set"
        );
        eprintln!("note: postgres_run_as_root_traces_the_backends skipped: it needs root");
        return;
    }
    let Some(db) = TestDb::new("iolens_probes", "PostgreSQL db test") else {
        return;
    };
    let dsn = db.dsn();
    let (ok, so, se) = iolens(&common::strs(&db.setup_args(1, "32M", &[])));
    assert!(ok, "{so}\n{se}");
    let mut c = db.client();
    evict_table(&mut c, "iolens_t0");
    // PostgreSQL's own count of the table's block reads (each a pread of a backend), before
    // and after the run, once the sessions that read have flushed their statistics.
    let heap_read = |c: &mut Client| -> i64 {
        let read = |c: &mut Client| -> i64 {
            c.query_one(
                "SELECT coalesce(heap_blks_read, 0) FROM pg_statio_user_tables \
                 WHERE relname = 'iolens_t0'",
                &[],
            )
            .unwrap()
            .get(0)
        };
        let mut last = read(c);
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(600));
            let now = read(c);
            if now == last {
                break;
            }
            last = now;
        }
        last
    };
    let heap_before = heap_read(&mut c);
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("pg.json");
    let (ok, so, se) = iolens(&[
        "db",
        "run",
        "--engine",
        "postgres",
        "--dsn",
        &dsn,
        "--sessions",
        "2",
        "--work-unit",
        "16",
        "--duration",
        "3s",
        "--interval",
        "500ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{so}\n{se}");
    let r = Results::read_file(&json).unwrap();
    let run = &r.runs[0];
    let physical = run.counters["physical_reads"];
    let syscalls = r
        .runs
        .iter()
        .find(|x| x.name == "syscalls")
        .expect("the backends' syscalls run");
    let preads = syscalls.op("pread64").map_or(0, |o| o.count) as f64;
    assert!(physical > 500.0, "{physical} physical reads");
    // Both count the same reads over nearly the same window (the probes attach just before
    // the statistics are read and stop as the sessions stop).
    assert!(
        (preads - physical).abs() <= 0.03 * physical + 20.0,
        "{preads} traced preads, {physical} physical reads"
    );
    // The evicted table's reads reached the disk: requests on it, never more than the reads.
    let block = run.block.as_ref().expect("the run's block layer");
    let dev = block.op("blk:read:device").expect("device reads traced");
    assert!(
        dev.count > 0 && dev.count as f64 <= preads + 64.0,
        "{} device reads, {preads} preads",
        dev.count
    );
    // The wait-event table: the backends waited on IO:DataFileRead.
    let pg = r
        .watch
        .as_ref()
        .and_then(|w| w.pg.as_ref())
        .expect("wait-event table");
    let rows: Vec<&str> = pg
        .roles
        .iter()
        .flat_map(|role| role.rows.iter().map(|x| x.event.as_str()))
        .collect();
    assert!(rows.contains(&"IO:DataFileRead"), "{rows:?}");
    // The relation table (issue 23, item 3): the reads were on the run's table, as many as
    // PostgreSQL counted for it (the same window as the physical reads above), and it holds
    // most of the syscall time.
    let heap = heap_read(&mut c) - heap_before;
    let rels = r
        .watch
        .as_ref()
        .and_then(|w| w.relations.as_ref())
        .expect("relation table");
    let t0 = rels
        .rows
        .iter()
        .find(|x| x.name == "public.iolens_t0" && x.fork == "main")
        .unwrap_or_else(|| panic!("no row for public.iolens_t0: {:?}", rels.rows));
    eprintln!(
        "public.iolens_t0: {} traced reads, pg_statio_user_tables heap_blks_read +{heap}; \
         {:.3} of {:.3} s of syscall time",
        t0.reads,
        t0.syscall_s,
        rels.rows.iter().map(|x| x.syscall_s).sum::<f64>()
    );
    assert_eq!(t0.kind, "table");
    assert!(heap > 500, "{heap} heap blocks read");
    assert!(
        (t0.reads as f64 - heap as f64).abs() <= 0.03 * heap as f64 + 20.0,
        "{} traced reads of public.iolens_t0, PostgreSQL counted {heap}",
        t0.reads
    );
    let all_s: f64 = rels.rows.iter().map(|x| x.syscall_s).sum();
    assert!(t0.syscall_s >= 0.5 * all_s, "{:?}", rels.rows);
    // Shown by show and export --markdown.
    let (ok, shown, se) = iolens(&["show", json.to_str().unwrap()]);
    assert!(ok, "{se}");
    assert!(shown.contains("IO:DataFileRead"), "{shown}");
    let (ok, md, se) = iolens(&["export", json.to_str().unwrap(), "--markdown", "-"]);
    assert!(ok, "{se}");
    assert!(md.contains("IO:DataFileRead"), "{md}");

    // Without root: the run goes on and says what it did not measure.
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let plain = tmp.path().join("plain.json");
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            env!("CARGO_BIN_EXE_iolens"),
            "db",
            "run",
            "--engine",
            "postgres",
            "--dsn",
            &dsn,
            "--sessions",
            "1",
            "--duration",
            "1s",
            "--json",
            plain.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{so}\n{se}");
    let r = Results::read_file(&plain).unwrap();
    assert!(r.watch.is_none());
    let said = r.runs[0].warnings.join("\n");
    assert!(
        said.contains("per-I/O latency histograms") && said.contains("root"),
        "{said}"
    );
}
