//! PostgreSQL's IO wait events, read from a server process's memory the way `watch` reads them,
//! have the names `pg_stat_activity` gives: a table in a tablespace on a device that is slow
//! by construction (tests/common/slowdev.rs) is scanned with its pages evicted, so the backend
//! (and on PostgreSQL 18 with io_method=worker, its IO workers) spends milliseconds in each IO
//! wait; each process is caught in one and both views must agree. Needs root, the Debian test
//! server (scripts/pg-test-server.sh) and, for 18, scripts/pg18-test-server.sh.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::slowdev::SlowDevice;
use iolens::watch::pg;

fn connect(dsn: &str) -> postgres::Client {
    postgres::Client::connect(dsn, postgres::NoTls).unwrap()
}

/// Evicts the page cache of every file under `dir` (the tablespace's relation files).
fn evict(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            evict(&p);
        } else if let Ok(f) = std::fs::File::open(&p) {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid descriptor; advice only.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
}

/// The slow device with an ext4 filesystem mounted on a temporary directory.
struct SlowFs {
    mnt: PathBuf,
    _dev: SlowDevice,
    _dir: tempfile::TempDir,
}

impl SlowFs {
    fn new() -> Option<SlowFs> {
        let dev = SlowDevice::new(Duration::from_millis(5), 256 << 20)?;
        let ok = Command::new("mkfs.ext4")
            .args(["-q", "-F", &dev.dev])
            .status()
            .unwrap()
            .success();
        assert!(ok, "mkfs.ext4 {}", dev.dev);
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let ok = Command::new("mount")
            .arg(&dev.dev)
            .arg(&mnt)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount {}", dev.dev);
        Some(SlowFs {
            mnt,
            _dev: dev,
            _dir: dir,
        })
    }
}

impl Drop for SlowFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

/// A table in a tablespace on the slow filesystem, dropped with it.
struct SlowTable {
    dsn: String,
    name: String,
    location: PathBuf,
}

impl SlowTable {
    fn new(dsn: &str, fs: &SlowFs, tag: &str) -> SlowTable {
        let name = format!("iolens_slow_{tag}_{}", std::process::id());
        let location = fs.mnt.join(&name);
        std::fs::create_dir(&location).unwrap();
        let pg = nix_ids("postgres");
        std::os::unix::fs::chown(&location, Some(pg.0), Some(pg.1)).unwrap();
        let t = SlowTable {
            dsn: dsn.to_string(),
            name,
            location,
        };
        let mut c = connect(dsn);
        // One statement at a time: CREATE TABLESPACE may not run in a transaction block.
        for sql in [
            format!(
                "CREATE TABLESPACE {} LOCATION '{}'",
                t.name,
                t.location.display()
            ),
            format!(
                "CREATE TABLE {n} TABLESPACE {n} AS \
                 SELECT g, repeat('x', 500) AS pad FROM generate_series(1, 60000) g",
                n = t.name
            ),
            "CHECKPOINT".to_string(),
        ] {
            c.batch_execute(&sql).unwrap();
        }
        t
    }
}

impl Drop for SlowTable {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.dsn, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP TABLE IF EXISTS {}", self.name));
            let _ = c.batch_execute(&format!("DROP TABLESPACE IF EXISTS {}", self.name));
        }
    }
}

fn nix_ids(user: &str) -> (u32, u32) {
    let name = std::ffi::CString::new(user).unwrap();
    // SAFETY: getpwnam returns a pointer to static storage or null; read at once.
    unsafe {
        let pw = libc::getpwnam(name.as_ptr());
        assert!(!pw.is_null(), "no user {user}");
        ((*pw).pw_uid, (*pw).pw_gid)
    }
}

/// Whether process `pid` was caught in an IO wait with the same name in its memory (read
/// before and after) and in pg_stat_activity; the name, if so. Equal reads before and after
/// do not prove the event held in between: a scan goes read → write (a page dirtied by its hint
/// bits, evicted) → read faster than the query runs (seen in CI: memory DataFileRead twice,
/// pg_stat_activity DataFileWrite). Such a sample is counted in `changed`, not caught; a wrong
/// name table would disagree on every sample and never be caught.
fn caught_io(
    watcher: &mut postgres::Client,
    major: u32,
    pid: u32,
    changed: &mut Vec<String>,
) -> Option<String> {
    let before = pg::read_wait_event_info(pid).ok()?;
    let row = watcher
        .query_opt(
            "SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE pid = $1",
            &[&(pid as i32)],
        )
        .unwrap()?;
    let after = pg::read_wait_event_info(pid).ok()?;
    let (class, event): (Option<String>, Option<String>) = (row.get(0), row.get(1));
    if before != after || class.as_deref() != Some("IO") {
        return None;
    }
    let event = event?;
    if pg::wait_event_name(major, before) != Some(("IO", event.as_str())) {
        changed.push(format!(
            "pid {pid}: memory {before:#010X} ({:?}), pg_stat_activity IO:{event}",
            pg::wait_event_name(major, before)
        ));
        return None;
    }
    Some(event)
}

/// Scans the slow table (pages evicted before each scan) until the backend, and each process
/// of `also` (IO workers), was caught in an IO wait whose two names agree.
fn io_waits_agree(dsn: &str, fs: &SlowFs, tag: &str, with_io_workers: bool) {
    let table = SlowTable::new(dsn, fs, tag);
    let mut watcher = connect(dsn);
    let num: i32 = watcher
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .unwrap()
        .get(0);
    let major = num as u32 / 10000;
    let mut scanner = connect(dsn);
    let pid: i32 = scanner
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0);
    let pid = pid as u32;
    let postmaster = pg::postgres_processes()
        .into_iter()
        .find(|p| p.pid == pid)
        .expect("the backend is a PostgreSQL process")
        .postmaster;
    let workers: Vec<u32> = if with_io_workers {
        pg::postgres_processes()
            .into_iter()
            .filter(|p| p.postmaster == postmaster && p.role.kind() == "io worker")
            .map(|p| p.pid)
            .collect()
    } else {
        Vec::new()
    };
    assert!(
        !with_io_workers || !workers.is_empty(),
        "PG {major}: no IO workers"
    );
    let mut backend_seen: Option<String> = None;
    let mut worker_seen: Option<String> = None;
    let mut changed: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while backend_seen.is_none() || (with_io_workers && worker_seen.is_none()) {
        assert!(
            Instant::now() < deadline,
            "PG {major}: not caught in an IO wait (backend {backend_seen:?}, IO workers \
             {worker_seen:?}); samples whose names disagreed: {changed:?}"
        );
        evict(&table.location);
        let q = format!(
            "SET max_parallel_workers_per_gather = 0; SELECT count(*) FROM {}",
            table.name
        );
        let mut c = scanner;
        let scan = std::thread::spawn(move || {
            c.batch_execute(&q).unwrap();
            c
        });
        while !scan.is_finished() {
            if backend_seen.is_none() {
                backend_seen = caught_io(&mut watcher, major, pid, &mut changed);
            }
            for &w in &workers {
                if worker_seen.is_none() {
                    worker_seen = caught_io(&mut watcher, major, w, &mut changed);
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        scanner = scan.join().unwrap();
    }
    eprintln!(
        "PG {major}: backend caught in IO:{backend_seen:?}, IO workers in IO:{worker_seen:?}; \
         {} samples changed between the reads: {changed:?}",
        changed.len()
    );
}

#[test]
fn io_wait_names_agree_on_a_slow_tablespace() {
    if !common::root_or_skip("reading a server's memory, a slow loop device") {
        return;
    }
    let Some(dsn) = common::pg_dsn("PostgreSQL wait I/O test") else {
        return;
    };
    let Some(fs) = SlowFs::new() else {
        return;
    };
    io_waits_agree(&dsn, &fs, "deb", false);
    let pg18 = std::env::var("IOLENS_PG18_DSN").ok().or_else(|| {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pg18/worker/dsn"),
        )
        .ok()
        .map(|s| s.trim().to_string())
    });
    match pg18 {
        Some(d) if postgres::Client::connect(&d, postgres::NoTls).is_ok() => {
            io_waits_agree(&d, &fs, "pg18", true)
        }
        _ => {
            assert!(
                std::env::var("IOLENS_PG_TESTS").as_deref() != Ok("1"),
                "IOLENS_PG_TESTS=1 but no PostgreSQL 18: run scripts/pg18-test-server.sh"
            );
            eprintln!("note: the PostgreSQL 18 half skipped (no IOLENS_PG18_DSN server)");
        }
    }
}
