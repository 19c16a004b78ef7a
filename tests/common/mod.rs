//! Helpers shared by the integration tests: the binary under test, a scratch target in a temp
//! directory, a file of random data, run options without progress, the fixtures' paths and
//! the PostgreSQL test server's DSN; and the fixtures of
//! experiments with a known answer (tests/harness.rs proves each does what it says): a slow
//! device ([`slowdev`]), a cgroup I/O limit ([`iolimit`]), busy loops on every CPU ([`busy`])
//! and an independent pg_stat_activity sampler ([`pgsampler`]).
#![allow(dead_code)] // each test binary uses its own subset

pub mod busy;
pub mod http;
pub mod iolimit;
pub mod loopdev;
pub mod peak;
pub mod pgsampler;
pub mod slowdev;
pub mod testdb;
pub mod tmpfs;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::AtomicBool;

use iolens::results::Results;
use iolens::run::{RunContext, RunOptions};
use iolens::target::{PrepareOptions, Target};

/// Whether CI is running the tests (then a test that cannot run here must fail, not skip).
pub fn ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// Whether a test that needs root (BPF, loop devices, mounts) may go on: true as root; else it
/// is skipped with a note naming `what`, or fails under CI, which runs as root.
pub fn root_or_skip(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(!ci(), "{what} needs root, and CI is set");
    eprintln!("note: {what} skipped: it needs root");
    false
}

/// The `iolens` binary built for these tests.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iolens"))
}

/// A short null-engine run (no I/O on the target beyond creating a 1 MiB scratch file).
pub fn null_run(dir: &Path, duration: &str) -> Command {
    let mut c = bin();
    c.args([
        "run",
        "--engine",
        "null",
        "--size",
        "1M",
        "--no-progress",
        "--interval",
        "100ms",
        "--duration",
        duration,
    ])
    .arg("--target")
    .arg(dir.join("s.dat"));
    c
}

/// `iolens ARGS` under SCHED_FIFO 40 (`chrt`), so that its sessions keep time on a busy host
/// beside slow devices' daemons (SCHED_FIFO 50): its output, whatever its status.
pub fn iolens_fifo(args: &[&str]) -> Output {
    let mut c = Command::new("chrt");
    c.args(["-f", "40", env!("CARGO_BIN_EXE_iolens")]);
    c.args(args).output().unwrap()
}

/// `v` as the `&str`s a command's arguments take.
pub fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `o`, asserted to be a success (its stdout and stderr in the message).
pub fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Run `cmd`, assert that it succeeded (its stderr in the message), and return its stdout.
pub fn ok_stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The results document that the command whose output is `out` wrote to `json`, read as JSON,
/// once `out` says the command succeeded (else its stderr is the failure).
pub fn json_of(out: &Output, json: &Path) -> serde_json::Value {
    succeeded(out, json);
    let text = std::fs::read_to_string(json).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", json.display()))
}

/// As [`json_of`], read as the results model.
pub fn results_of(out: &Output, json: &Path) -> Results {
    succeeded(out, json);
    Results::read_file(json).unwrap_or_else(|e| panic!("{}: {e:#}", json.display()))
}

fn succeeded(out: &Output, json: &Path) {
    assert!(
        out.status.success(),
        "the command writing {} failed ({}): {}",
        json.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Create (or reuse) an iolens scratch file of `size` data bytes at `path`.
pub fn scratch(path: &Path, size: u64, writes: bool) -> Target {
    Target::prepare(
        path,
        &PrepareOptions {
            size: Some(size),
            writes,
            ..Default::default()
        },
        &AtomicBool::new(false),
    )
    .expect("scratch target")
}

/// Options for a test run: no progress, interrupted only through `interrupt`.
pub fn opts(interrupt: &AtomicBool) -> RunOptions<'_> {
    RunOptions {
        name: "test".into(),
        phase: "run".into(),
        progress_prefix: String::new(),
        ctx: RunContext {
            interrupt,
            ..RunContext::new(false)
        },
    }
}

/// `len` bytes of the file at `path` from offset `off` (a block as the disk holds it).
pub fn read_at(path: &Path, off: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).unwrap();
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, off).unwrap();
    b
}

/// Overwrite the file at `path` from offset `off` behind iolens' back, and sync it.
pub fn write_at(path: &Path, off: u64, data: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(data, off).unwrap();
    f.sync_data().unwrap();
}

/// `rel` under tests/fixtures.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// A real file written by another tool (tests/fixtures/real, origins in its README).
pub fn real(name: &str) -> PathBuf {
    fixture("real").join(name)
}

/// A fully written, synced file of `mib` MiB of random bytes at `dir`/data.bin (not an iolens
/// scratch file: read only; every O_DIRECT read of it reaches the device).
pub fn data_file(dir: &Path, mib: usize) -> PathBuf {
    let p = dir.join("data.bin");
    let mut f = std::fs::File::create(&p).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..mib {
        for c in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&buf).unwrap();
    }
    f.sync_all().unwrap();
    p
}

/// The PostgreSQL test server's key=value DSN (`scripts/pg-test-server.sh`: `IOLENS_PG_DSN`,
/// else target/pgtest/dsn), if it answers. Without one, `what` (the test) is skipped with a
/// note saying why, unless `IOLENS_PG_TESTS=1` (CI), where it fails.
pub fn pg_dsn(what: &str) -> Option<String> {
    let required = std::env::var("IOLENS_PG_TESTS").as_deref() == Ok("1");
    let dsn = std::env::var("IOLENS_PG_DSN")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pgtest/dsn");
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        });
    let why = match dsn
        .as_deref()
        .map(|d| postgres::Client::connect(d, postgres::NoTls))
    {
        Some(Ok(_)) => return dsn,
        Some(Err(e)) => format!("the test server does not answer ({e})"),
        None => "no IOLENS_PG_DSN and no target/pgtest/dsn".to_string(),
    };
    assert!(
        !required,
        "IOLENS_PG_TESTS=1 but {why}: run scripts/pg-test-server.sh first (or set \
         IOLENS_PG_DSN to a key=value DSN of a superuser)"
    );
    eprintln!("note: {what} skipped: {why} (scripts/pg-test-server.sh starts one)");
    None
}

/// Drive a calibration ramp with a synthetic storage model: `model(sessions)` gives (IOPS,
/// latency) of each step the ramp asks for; fails if the ramp does not end within 50 steps.
pub fn drive(
    mut ramp: iolens::analysis::ramp::Ramp,
    model: impl Fn(u32) -> (f64, f64),
) -> iolens::analysis::ramp::Ramp {
    let mut guard = 0;
    while let Some(n) = ramp.next_sessions() {
        let (iops, lat) = model(n);
        ramp.record(n, iops, lat);
        guard += 1;
        assert!(guard < 50, "ramp terminates");
    }
    ramp
}
