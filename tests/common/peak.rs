//! The peak memory of a child process itself, for tests that bound a reader's memory.
//!
//! `ru_maxrss` from `wait4` cannot be used for a child of a test process: at `exec` the kernel
//! carries the high-water mark of the address space the child had before it (a copy of the
//! test process after `fork`, the test process's own after `vfork`/`posix_spawn`) into the
//! child's maximum, so a reader peaking at 14 MiB showed 162–183 MiB when the test process was
//! big. This samples `VmHWM` of `/proc/PID/status` instead, which belongs to the address space
//! `exec` made, counting only samples taken after `exec` (the status's `Name` is then the
//! program's), every 2 ms until the process exits. A high-water mark only rises, so a sample
//! misses only growth in the last 2 ms before exit.

use std::io::Read as _;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What [`run`] saw.
pub struct Peak {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Highest `VmHWM` seen after `exec`, KiB (0 when the process exited before a sample).
    pub peak_kb: u64,
    /// Killed at the time limit.
    pub killed: bool,
    pub elapsed: Duration,
}

impl Peak {
    pub fn peak_mib(&self) -> u64 {
        self.peak_kb / 1024
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// `VmHWM` (KiB) of `pid` when its name is `name` (truncated as the kernel keeps it).
fn hwm_kb(pid: u32, name: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let comm: String = name.chars().take(15).collect();
    let mut named = false;
    let mut hwm = None;
    for l in s.lines() {
        if let Some(n) = l.strip_prefix("Name:") {
            named = n.trim() == comm;
        } else if let Some(v) = l.strip_prefix("VmHWM:") {
            hwm = v.trim().trim_end_matches("kB").trim().parse().ok();
        }
    }
    hwm.filter(|_| named)
}

/// Run `cmd` (stdin empty, stdout and stderr captured) to its end, or kill it past `limit`;
/// its status, output and own peak resident memory.
pub fn run(mut cmd: Command, limit: Duration) -> Peak {
    let name = std::path::Path::new(cmd.get_program())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let t0 = Instant::now();
    let pid = child.id();
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            b
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let mut peak_kb = 0;
    let mut killed = false;
    let status = loop {
        if let Some(kb) = hwm_kb(pid, &name) {
            peak_kb = peak_kb.max(kb);
        }
        if let Some(st) = child.try_wait().expect("wait for the command") {
            break st;
        }
        if !killed && t0.elapsed() > limit {
            let _ = child.kill();
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Peak {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        peak_kb,
        killed,
        elapsed: t0.elapsed(),
    }
}
