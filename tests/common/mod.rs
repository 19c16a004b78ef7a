//! Helpers shared by the integration tests that drive real I/O: the binary under test, a
//! scratch target in a temp directory, and run options without progress; and the fixtures of
//! experiments with a known answer (tests/harness.rs proves each does what it says): a slow
//! device ([`slowdev`]), a cgroup I/O limit ([`iolimit`]), busy loops on every CPU ([`busy`])
//! and an independent pg_stat_activity sampler ([`pgsampler`]).
#![allow(dead_code)] // each test binary uses its own subset

pub mod busy;
pub mod iolimit;
pub mod loopdev;
pub mod peak;
pub mod pgsampler;
pub mod slowdev;
pub mod tmpfs;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;

use iolens::run::RunOptions;
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
        progress: false,
        progress_prefix: String::new(),
        interrupt,
        start_at: None,
        block_watch: None,
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
