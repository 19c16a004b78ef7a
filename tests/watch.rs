//! `iolens watch` with real BPF probes on real processes.
//!
//! Loading BPF needs root: these tests skip with a note when not root, except under CI (env CI
//! set), where they run and fail if broken. The filter errors need no privilege and always run.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{bin, data_file, root_or_skip};
use hdrhistogram::Histogram;
use iolens::results::analysis::{Verdict, VerdictKind};
use iolens::results::{
    BlockLayer, DiskQueue, OpResult, PgWaitKind, Results, RunResult, WatchBudget, WatchCgroup,
};

/// The loss a block-layer watch may report: completions the kernel did not run the probe for.
const UNSEEN: &str = "block completion of a watched request not seen";

/// The BPF tests run one at a time: the CPU test's hogs would slow the others' runs.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// What every test of `--watch` on iolens' own load starts with: root (else `None`, skipped),
/// the BPF tests' lock, and a scratch directory with a target path and a results path in it.
struct OwnLoad {
    _serial: std::sync::MutexGuard<'static, ()>,
    tmp: tempfile::TempDir,
    target: std::path::PathBuf,
    json: std::path::PathBuf,
}

fn own_load(test: &str) -> Option<OwnLoad> {
    if !root_or_skip(test) {
        return None;
    }
    let serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    Some(OwnLoad {
        _serial: serial,
        target: tmp.path().join("s.dat"),
        json: tmp.path().join("r.json"),
        tmp,
    })
}

/// A process that waits for a line on stdin, then execs `cmd`: its pid is known (and watched)
/// before the command does anything.
struct Gated {
    child: Child,
}

impl Gated {
    fn new(cmd: &[&str]) -> Gated {
        Gated::new_in(cmd, None)
    }

    /// Gated, the process (and so the command) in the cgroup of `limit`, when given.
    fn new_in(cmd: &[&str], limit: Option<&common::iolimit::IoLimit>) -> Gated {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("read _ && exec \"$@\"")
            .arg("sh")
            .args(cmd)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(l) = limit {
            l.join_on_exec(&mut c);
        }
        Gated {
            child: c.spawn().unwrap(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn go(&mut self) {
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
    }

    fn wait(mut self) {
        let st = self.child.wait().unwrap();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        assert!(st.success(), "gated command failed: {err}");
    }
}

/// Start `iolens watch ARGS` and return once its probes are attached.
fn start_watch(args: &[&str]) -> Child {
    start_watch_env(args, &[])
}

/// [`start_watch`] with environment variables `env` set.
fn start_watch_env(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut child = bin()
        .arg("watch")
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        let n = err.read_line(&mut line).unwrap();
        assert!(n > 0, "iolens watch ended before attaching");
        if line.contains("tracepoints attached") {
            break;
        }
        assert!(!line.contains("error"), "iolens watch failed: {line}");
    }
    // Keep draining its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        if !rest.trim().is_empty() {
            eprintln!("watch stderr: {rest}");
        }
    });
    child
}

/// End a watch with Ctrl-C (SIGINT) and wait for it to write its results and exit 130.
fn interrupt_watch(w: Child, within: Duration) {
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill sends a signal to the child we started.
    unsafe { libc::kill(w.id() as i32, libc::SIGINT) };
    wait_watch(w, within, Some(130));
}

fn finish_watch(w: Child, within: Duration) {
    wait_watch(w, within, None);
}

/// Wait up to `within` for the watch to exit with `code` (`None`: success).
fn wait_watch(mut w: Child, within: Duration, code: Option<i32>) {
    let t = Instant::now();
    loop {
        if let Some(st) = w.try_wait().unwrap() {
            match code {
                None => assert!(st.success(), "iolens watch exited with {st}"),
                Some(c) => assert_eq!(st.code(), Some(c), "iolens watch exited with {st}"),
            }
            return;
        }
        if t.elapsed() > within {
            let _ = w.kill();
            panic!("iolens watch did not end within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `iolens run --target DATA -q RUN_ARGS…` watched from its first I/O to its end by
/// `iolens watch --pid PID WATCH_ARGS…`; returns the run's pid.
fn run_under_watch(data: &Path, run_args: &[&str], watch_args: &[&str]) -> String {
    run_under_watch_env(data, run_args, watch_args, &[])
}

/// [`run_under_watch`] with environment variables `env` set for the watch.
fn run_under_watch_env(
    data: &Path,
    run_args: &[&str],
    watch_args: &[&str],
    env: &[(&str, &str)],
) -> String {
    let mut cmd = vec![
        env!("CARGO_BIN_EXE_iolens"),
        "run",
        "--target",
        data.to_str().unwrap(),
        "-q",
    ];
    cmd.extend_from_slice(run_args);
    let mut run = Gated::new(&cmd);
    let pid = run.pid().to_string();
    let mut args = vec!["--pid", pid.as_str()];
    args.extend_from_slice(watch_args);
    let w = start_watch_env(&args, env);
    run.go();
    run.wait();
    finish_watch(w, Duration::from_secs(20));
    pid
}

fn hist(r: &Results, run: &str, op: &str) -> Option<Histogram<u64>> {
    r.runs
        .iter()
        .find(|x| x.name == run)?
        .op(op)
        .map(|o| o.hist.decode().unwrap())
}

fn budget(r: &Results) -> WatchBudget {
    r.watch.clone().expect("a watch budget")
}

/// The cgroup of `limit` as the watch's results report it.
fn limiting_cgroup(r: &Results, limit: &common::iolimit::IoLimit) -> WatchCgroup {
    let cg = limit.path().file_name().unwrap().to_str().unwrap();
    budget(r)
        .cgroups
        .into_iter()
        .find(|c| c.path.ends_with(cg))
        .expect("the limiting cgroup is in the results")
}

/// The whole disk under `path` (`vda`), as the watch names its block runs.
/// The accounting invariants every watch must keep (issue 23, item 1): each thread's parts sum
/// to the time it was watched (1 %: the kernel side's records race only where two CPUs touch
/// one thread at once); the overall row is the sum of the intervals; no interval holds more
/// thread time than its threads could have; no syscall was charged more block-layer time than it
/// lasted.
fn check_accounting(r: &Results) {
    let b = budget(r);
    assert!(!b.threads.is_empty(), "no watched thread accounted");
    for t in &b.threads {
        let parts = t.wall.wall_s();
        assert!(
            (parts - t.watched_s).abs() <= 0.01 * t.watched_s + 1e-6,
            "thread {} ({}): parts sum to {parts} s, watched {} s: {:?}",
            t.tid,
            t.comm,
            t.watched_s,
            t.wall
        );
    }
    // The overall row is the sum of the intervals: the threads' parts, each spread over the
    // intervals it covers, add up to the intervals' parts but for the float sums' rounding.
    // (Against the time watched, the parts are off by what the per-thread check above allows:
    // a CI run's 100 s of threads held 104 µs more parts than time watched, and 7a1f6f6 and
    // this build alike gave 35-40 µs in 130 s by hand.)
    let threads_s: f64 = b.threads.iter().map(|t| t.wall.wall_s()).sum();
    let intervals_s: f64 = b.intervals.iter().map(|s| s.wall.wall_s()).sum();
    assert!(
        (threads_s - intervals_s).abs() <= 1e-9 * threads_s.max(1.0),
        "threads' parts {threads_s} s, intervals' {intervals_s} s"
    );
    for s in &b.intervals {
        assert_eq!(
            s.overcharged, 0,
            "syscalls charged beyond their length: {s:?}"
        );
        assert!(
            s.wall.wall_s() <= s.duration_s * b.threads.len() as f64 * 1.001 + 1e-6,
            "{} thread-s in an interval of {} s with {} threads",
            s.wall.wall_s(),
            s.duration_s,
            b.threads.len()
        );
        assert!(
            (s.sys_device_ns + s.sys_queue_ns) as f64 <= s.syscall_ns as f64 * 1.000001,
            "{s:?}"
        );
    }
    let a = r.analysis.as_ref().unwrap().watch.as_ref().unwrap();
    let sum = |f: &dyn Fn(&iolens::results::analysis::WatchShares) -> f64| -> f64 {
        a.intervals.iter().map(f).sum::<f64>()
    };
    for (what, overall, intervals) in [
        ("wall", a.overall.wall_s, sum(&|s| s.wall_s)),
        ("io", a.overall.io_s, sum(&|s| s.io_s)),
        ("runq", a.overall.runq_s, sum(&|s| s.runq_s)),
        ("runq_io", a.overall.runq_io_s, sum(&|s| s.runq_io_s)),
        ("syscall", a.overall.syscall_s, sum(&|s| s.syscall_s)),
    ] {
        assert!(
            (overall - intervals).abs() <= 1e-6 * overall.max(1.0),
            "overall {what} {overall} != sum of intervals {intervals}"
        );
    }
    let o = &a.overall;
    if o.wall_s > 0.0 {
        let total = o.wall_cpu + o.wall_cpu_wait + o.wall_io + o.wall_off_cpu;
        assert!((total - 1.0).abs() < 1e-6, "wall shares sum to {total}");
    }
}

fn disk_of(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).unwrap().dev();
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    iolens::watch::filter::resolve_device(&format!("{maj}:{min}"))
        .unwrap()
        .name
}

#[test]
fn syscalls_of_a_watched_run_equal_its_own_io_count() {
    if !root_or_skip("syscalls_of_a_watched_run_equal_its_own_io_count") {
        return;
    }
    // The default: the kernel's per-syscall trace events.
    exact_io_count("events", "syscalls:sys_enter_pread64 (tracepoint)", true);
}

/// The same, the syscalls seen through the raw sys_enter/sys_exit tracepoints (what a kernel
/// without per-syscall trace events gets).
#[test]
fn syscalls_seen_by_the_raw_tracepoints_equal_a_runs_own_io_count() {
    if !root_or_skip("syscalls_seen_by_the_raw_tracepoints_equal_a_runs_own_io_count") {
        return;
    }
    exact_io_count("raw", "sys_enter (", false);
}

/// A watched `iolens run` of O_DIRECT reads: its pread64 calls counted exactly, with the
/// syscall probes `probes` (IOLENS_SYSCALL_PROBES), whose attached list has an entry beginning
/// `attached`; with `block`, its device reads all seen or counted unseen and inside its
/// syscalls (the block probes are the same whichever syscall probes are used: checked once).
fn exact_io_count(probes: &str, attached: &str, block: bool) {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let data = data_file(tmp.path(), 64);
    let disk = disk_of(&data);
    let run_json = tmp.path().join("run.json");
    let watch_json = tmp.path().join("watch.json");
    let pid = run_under_watch_env(
        &data,
        &[
            "--rate",
            "2000",
            "--duration",
            "3s",
            "--verify",
            "none",
            "--json",
            run_json.to_str().unwrap(),
        ],
        &[
            "--threads",
            "--device",
            &disk,
            "--interval",
            "500ms",
            "--json",
            watch_json.to_str().unwrap(),
        ],
        &[("IOLENS_SYSCALL_PROBES", probes)],
    );

    let ran = Results::read_file(&run_json).unwrap();
    let ios = ran.runs[0].op("read").unwrap().count;
    assert!(ios > 4000, "the run did {ios} reads");
    let watched = Results::read_file(&watch_json).unwrap();
    let b = budget(&watched);
    assert!(
        b.tracepoints.iter().any(|t| t.starts_with(attached)),
        "{probes}: {:?}",
        b.tracepoints
    );
    // The one loss allowed: completions the kernel did not run the probe for (see below).
    assert!(
        b.lost.keys().all(|k| k == UNSEEN),
        "lost events: {:?}",
        b.lost
    );
    // The run's I/O is done by its session thread; the main thread only reads the target's
    // first blocks when it opens it. Per thread, the count is exact.
    let threads: Vec<(u32, u64)> = b
        .processes
        .iter()
        .filter(|p| p.pid.to_string() == pid)
        .filter_map(|p| Some((p.tid?, p.syscalls.get("pread64")?[0])))
        .collect();
    let session = threads.iter().map(|t| t.1).max().unwrap_or(0);
    // Every read the session completed, measured or not: a read issued before the planned end
    // that completes after it is done (the kernel saw its pread64) but lies outside the
    // measured window, so the run's measured count can be one less (one session, one read in
    // flight, no warm-up) — CI saw 5997 calls for 5996 measured reads.
    let completed = ran.runs[0].counters["ios_completed_incl_warmup"] as u64;
    assert!(
        (ios..=ios + 1).contains(&completed),
        "the run measured {ios} of its {completed} completed reads"
    );
    assert_eq!(
        session, completed,
        "pread64 calls of the session thread vs the run's own completed reads: {threads:?}"
    );
    let all: u64 = threads.iter().map(|t| t.1).sum();
    let syscalls = watched.runs.iter().find(|r| r.name == "syscalls").unwrap();
    assert_eq!(syscalls.op("pread64").unwrap().count, all);
    assert!(all - ios <= 16, "{} reads besides the run's own", all - ios);
    // The run's interval counts sum to it too (per-interval histograms in the results model).
    let per_interval: u64 = syscalls
        .op("pread64")
        .unwrap()
        .intervals
        .iter()
        .map(|i| i.count)
        .sum();
    assert_eq!(per_interval, all);
    if !block {
        check_accounting(&watched);
        return;
    }

    // O_DIRECT: every read reaches the device. While other work loads the disk the kernel
    // skips the completion probe for some completions (it ran fewer times than `perf stat`
    // counted the tracepoint, with no recursion miss; an independent bpftrace script misses
    // the same requests, in bursts of 20-40 ms in which every completion goes unseen: 0.4-1.5 %
    // of a run's reads at load 10-12, 1.02 % in a CI run); the watch counts those it can tell
    // (lost: UNSEEN, checked exactly below) and the bounds here allow 3 %.
    let device_reads = hist(&watched, &format!("block {disk}"), "blk:read:device")
        .unwrap()
        .len();
    let unseen = b.lost.get(UNSEEN).copied().unwrap_or(0);
    let interval_bytes = |r: &Results, run: &str, op: &str| -> u64 {
        let run = r.runs.iter().find(|x| x.name == run).unwrap();
        run.op(op).unwrap().intervals.iter().map(|i| i.bytes).sum()
    };
    let device_bytes = interval_bytes(&watched, &format!("block {disk}"), "blk:read:device");
    let run_bytes = interval_bytes(&ran, &ran.runs[0].name, "read");
    assert!(
        run_bytes >= ios * 4096,
        "the run read {run_bytes} bytes in {ios} reads"
    );
    assert!(
        device_bytes as f64 >= run_bytes as f64 * 0.97,
        "{device_bytes} bytes read from the device, far fewer than the {run_bytes} read by the run"
    );
    assert!(
        device_reads as f64 >= ios as f64 * 0.97,
        "{device_reads} block reads, far fewer than the run's {ios}"
    );
    let mine = format!("block {disk} (watched)");
    let sys = hist(&watched, "syscalls", "pread64").unwrap();
    let dev = hist(&watched, &mine, "blk:read:device").unwrap();
    // Exact accounting: every read the run completed reached the device (O_DIRECT) and is
    // either among the watched device reads or counted as a completion not seen, including
    // those missed in the watch's last moments, which no later request reveals (7 runs, 3
    // under busy loops: seen + unseen was the completed count or one more, unseen 0 to 43).
    assert!(
        dev.len() as u64 + unseen >= completed,
        "{} device reads seen + {unseen} counted unseen < the run's {completed} completed reads: \
         a loss not said",
        dev.len()
    );
    // Attribution happens when the request is allocated in the submitting task; a read merged
    // into another process's queued request is that process's.
    assert!(
        dev.len() as f64 >= 0.98 * ios as f64,
        "only {} of {ios} reads attributed to the run",
        dev.len()
    );
    // The syscall contains the block request: its latency is at least the device's, in
    // distribution. Compared rank by rank: the process's own other requests (page faults of
    // its binary when the page cache is busy, as during the whole test suite) can only add
    // device values, which lowers none of the ranks from the bottom; its other preads (the
    // main thread's, served from the cache) are the fastest, so they are skipped first.
    // Completions the probe did not see (allowed above, up to 1 %) are missing from the
    // device's ranks: its rank r is compared at r less the missing ones (CI: 5962 device reads
    // for 5995 run reads put device rank 5940 at its p99.6 against the syscalls' p99).
    let extra = all - ios;
    let missing = ios.saturating_sub(dev.len()) as f64;
    for q in [0.1, 0.5, 0.9, 0.99] {
        let r = q * ios as f64;
        let s = sys.value_at_quantile((r + extra as f64) / sys.len() as f64);
        let d = dev.value_at_quantile((r - missing).max(0.0) / dev.len() as f64);
        assert!(
            s >= d,
            "rank {r:.0} (q{q} of the run's reads): syscall {s} < device {d} ({} syscalls, {} \
             device reads)",
            sys.len(),
            dev.len()
        );
    }
    // The results model works for the other readers unchanged.
    let out = bin()
        .args(["show", watch_json.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("Where the watched threads' time went"),
        "{text}"
    );
    assert!(text.contains("pread64"), "{text}");

    check_accounting(&watched);
    // The session thread's O_DIRECT reads: each waits for its one request, so the device time
    // charged to its syscalls is its requests' (none is background), and its time inside the
    // syscalls holds it.
    let session_tid = threads.iter().max_by_key(|t| t.1).unwrap().0;
    let t = b.threads.iter().find(|t| t.tid == session_tid).unwrap();
    let charged: f64 = b
        .intervals
        .iter()
        .map(|s| s.sys_device_ns as f64 / 1e9)
        .sum();
    assert!(
        t.wall.io_device_s <= charged * 1.001 + 1e-6,
        "session thread {:?}, charged {charged}",
        t.wall
    );
    let dev_s = dev.mean() * dev.len() as f64 / 1e9;
    assert!(
        t.wall.io_device_s >= 0.5 * dev_s && t.wall.io_device_s <= dev_s * 1.01 + 1e-3,
        "device time in the session's syscalls {} s against its requests' {dev_s} s",
        t.wall.io_device_s
    );
}

/// Busy loops on every CPU (twice over) until dropped.
struct Hogs(Vec<Child>);

impl Hogs {
    fn start() -> Hogs {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get()) * 2;
        Hogs(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn watched_run_verdict(dir: &Path, data: &Path, name: &str) -> (Option<VerdictKind>, f64) {
    let json = dir.join(format!("{name}.json"));
    run_under_watch(
        data,
        &["--rate", "1000", "--duration", "2s", "--verify", "none"],
        &["--json", json.to_str().unwrap()],
    );
    let r = Results::read_file(&json).unwrap();
    check_accounting(&r);
    let a = r.analysis.unwrap().watch.unwrap();
    (a.overall.verdict, a.overall.wall_cpu_wait)
}

/// (idle + iowait, total) jiffies of all CPUs, from /proc/stat.
fn cpu_times() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    (f[3] + f[4], f.iter().take(8).sum())
}

#[test]
fn cpu_hogs_give_the_cpu_verdict_and_an_idle_host_does_not() {
    if !root_or_skip("cpu_hogs_give_the_cpu_verdict_and_an_idle_host_does_not") {
        return;
    }
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let data = data_file(tmp.path(), 32);
    let hogs = Hogs::start();
    std::thread::sleep(Duration::from_millis(200));
    let (busy, busy_runq) = watched_run_verdict(tmp.path(), &data, "busy");
    drop(hogs);
    eprintln!("with hogs: {busy:?}, CPU wait share of I/O time {busy_runq:.3}");
    assert_eq!(
        busy,
        Some(VerdictKind::CpuBound),
        "with every CPU busy (run-queue share {busy_runq:.2})"
    );
    // "Idle" means idle: on a shared machine that others keep busy the half below would test
    // them, not iolens. Whether it was idle is measured over the watched run itself
    // (/proc/stat), under CI too: a busy host rightly gives the CPU verdict.
    let before = cpu_times();
    let (idle, idle_runq) = watched_run_verdict(tmp.path(), &data, "idle");
    let after = cpu_times();
    let busy = 1.0 - (after.0 - before.0) as f64 / (after.1 - before.1).max(1) as f64;
    eprintln!("idle: {idle:?}, CPU wait share of I/O time {idle_runq:.3}, host CPU busy {busy:.2}");
    if busy > 0.5 {
        eprintln!("note: idle half not judged: the host's CPUs were {busy:.2} busy during it");
        return;
    }
    assert_ne!(
        idle,
        Some(VerdictKind::CpuBound),
        "without hogs (run-queue share {idle_runq:.2}; is something else keeping the CPUs busy?)"
    );
    assert!(idle_runq < busy_runq);
}

/// A multithreaded process whose threads have names of their own (iolens' session threads) is
/// watched by its process name: every one of its reads is counted, and its threads are each
/// accounted.
#[test]
fn a_process_is_watched_by_its_name_whatever_its_threads_are_called() {
    if !root_or_skip("a_process_is_watched_by_its_name_whatever_its_threads_are_called") {
        return;
    }
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let data = data_file(tmp.path(), 32);
    let run_json = tmp.path().join("run.json");
    let watch_json = tmp.path().join("watch.json");
    let mut run = Gated::new(&[
        env!("CARGO_BIN_EXE_iolens"),
        "run",
        "--target",
        data.to_str().unwrap(),
        "-q",
        "--sessions",
        "2",
        "--rate",
        "1500",
        "--duration",
        "2s",
        "--verify",
        "none",
        "--json",
        run_json.to_str().unwrap(),
    ]);
    let pid = run.pid();
    // The gate is `sh` until it execs iolens: wait for a process named iolens to be watchable.
    let w = start_watch(&[
        "--comm",
        "iolens",
        "--wait",
        "--threads",
        "--duration",
        "4s",
        "--json",
        watch_json.to_str().unwrap(),
    ]);
    run.go();
    run.wait();
    finish_watch(w, Duration::from_secs(20));
    let ran = Results::read_file(&run_json).unwrap();
    let ios = ran.runs[0].op("read").unwrap().count;
    assert!(ios > 1000, "the run did {ios} reads");
    let watched = Results::read_file(&watch_json).unwrap();
    let b = budget(&watched);
    let rows: Vec<_> = b.processes.iter().filter(|p| p.pid == pid).collect();
    let preads: u64 = rows
        .iter()
        .filter_map(|p| p.syscalls.get("pread64"))
        .map(|r| r[0])
        .sum();
    // The sessions' reads, plus the few the main thread does when it opens the target.
    assert!(
        preads >= ios && preads - ios <= 16,
        "{preads} pread64 calls watched by name, the run did {ios}: {rows:?}"
    );
    let names: Vec<String> = b
        .threads
        .iter()
        .filter(|t| t.pid == pid)
        .map(|t| t.comm.clone())
        .collect();
    assert!(
        names.iter().any(|n| n != "iolens"),
        "no thread with a name of its own among {names:?}"
    );
    check_accounting(&watched);
}

/// Threads asleep nearly all the time are off CPU, never "waiting for a CPU": 100 threads of
/// one process, each sleeping 0.3 s in a loop (3 wake-ups a second, microseconds of CPU each),
/// watched twice for 1 s. A thread's run-queue wait is what its wake-ups waited for a CPU:
/// milliseconds at most under busy loops on every CPU, 1-2 % of a second here; a thread is
/// allowed 15 %. The watch once attached sched_wakeup before sched_switch: a thread woken
/// between the two stayed runnable (its switch in and out unseen) until its next wake-up, up
/// to 0.3 s here (30 %), for an idle server process the whole watch (4 of 5 watches of this
/// host's PostgreSQL processes had one, which turned a CPU verdict into "I/O is not where the
/// time goes").
#[test]
fn threads_asleep_are_off_cpu_not_waiting_for_a_cpu() {
    if !root_or_skip("threads_asleep_are_off_cpu_not_waiting_for_a_cpu") {
        return;
    }
    let _serial = serial();
    let mut sleepers = Command::new("python3")
        .args([
            "-c",
            "import threading, time\n\
             def nap():\n    while True: time.sleep(0.3)\n\
             for _ in range(100): threading.Thread(target=nap, daemon=True).start()\n\
             time.sleep(60)\n",
        ])
        .spawn()
        .unwrap();
    let pid = sleepers.id().to_string();
    let tasks = format!("/proc/{pid}/task");
    let t = Instant::now();
    while std::fs::read_dir(&tasks).map_or(0, |d| d.count()) < 101 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the sleepers did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut runnable = Vec::new();
    for round in 0..2 {
        let json = tmp.path().join(format!("sleepers{round}.json"));
        let w = start_watch(&[
            "--pid",
            &pid,
            "--duration",
            "1s",
            "--json",
            json.to_str().unwrap(),
        ]);
        finish_watch(w, Duration::from_secs(30));
        let r = Results::read_file(&json).unwrap();
        check_accounting(&r);
        let b = budget(&r);
        let threads: Vec<_> = b
            .threads
            .iter()
            .filter(|t| t.pid.to_string() == pid)
            .collect();
        assert!(threads.len() >= 100, "{} threads watched", threads.len());
        for t in threads {
            let share = t.wall.runnable_s / t.watched_s.max(1e-9);
            runnable.push(share);
            assert!(
                share <= 0.15,
                "round {round}: thread {} asleep but {:.0} % of its {:.3} s waiting for a \
                 CPU: {:?}",
                t.tid,
                share * 100.0,
                t.watched_s,
                t.wall
            );
        }
    }
    let _ = sleepers.kill();
    let _ = sleepers.wait();
    runnable.sort_by(f64::total_cmp);
    eprintln!(
        "run-queue share of the sleepers' time: median {:.4}, max {:.4}",
        runnable[runnable.len() / 2],
        runnable[runnable.len() - 1]
    );
}

#[test]
fn bad_filters_are_clear_errors() {
    for (filter, value, says) in [
        ("--pid", "999999999", "--pid 999999999: no such process"),
        ("--device", "/dev/no-such-disk", "no such block device"),
        ("--device", "/dev/null", "not a block device"),
        ("--comm", "/usr/bin/postgres", "not a path"),
        ("--comm", "postgrs-typo", "no running process has this name"),
    ] {
        let out = bin()
            .args(["watch", filter, value, "--duration", "1s"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{filter} {value}: {err}");
        assert!(err.contains(says), "{filter} {value}: {err}");
    }
}

#[test]
fn without_privilege_the_error_names_the_capabilities() {
    if !root_or_skip("without_privilege_the_error_names_the_capabilities") {
        return;
    }
    // Drop to nobody with no capabilities (setpriv is in util-linux).
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            env!("CARGO_BIN_EXE_iolens"),
            "watch",
            "--duration",
            "1s",
        ])
        .output();
    let Ok(out) = out else {
        assert!(
            std::env::var_os("CI").is_none(),
            "setpriv (util-linux) is missing"
        );
        eprintln!("note: setpriv missing; privilege error not checked");
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("CAP_BPF and CAP_PERFMON"), "{err}");
    assert!(err.contains("setcap") && err.contains("sudo"), "{err}");
}

/// The test server's DSN ([`common::pg_dsn`]).
fn pg_dsn() -> Option<String> {
    common::pg_dsn("PostgreSQL watch test")
}

fn blks_read(dsn: &str) -> i64 {
    let mut c = postgres::Client::connect(dsn, postgres::NoTls).unwrap();
    c.query_one("SELECT sum(blks_read)::bigint FROM pg_stat_database", &[])
        .unwrap()
        .get(0)
}

#[test]
fn postgres_backends_reads_match_blks_read() {
    if !root_or_skip("postgres_backends_reads_match_blks_read") {
        return;
    }
    let Some(base) = pg_dsn() else {
        return;
    };
    let _serial = serial();
    let name = "iolens_watch_test";
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    let dsn = format!("{base} dbname={name}");
    // Larger than the test server's 16MB shared_buffers, so backends read from the OS.
    let out = bin()
        .args(["db", "setup", "--engine", "postgres", "--dsn", &dsn])
        .args(["--scale", "40M", "-q"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("pg-watch.json");
    // Let autovacuum and the checkpointer finish with the fresh tables first.
    let mut last = blks_read(&base);
    for _ in 0..30 {
        std::thread::sleep(Duration::from_millis(400));
        let now = blks_read(&base);
        if now == last {
            break;
        }
        last = now;
    }
    // The watch spans the whole run and is ended after it (Ctrl-C), never by a fixed duration:
    // `db run` connects and drops its tables' files from the OS page cache before its
    // sessions read, which took 3 s of a 7.3 s run at load 11, so a 5 s watch begun with the
    // run closed while the sessions were still reading and saw 48 % of blks_read (the
    // failures at load 20: ~40 %). Spanning the run, the same load gave 100 % (68,611 blocks
    // watched vs 68,632; 97,779 vs 97,800; 69,782 vs 69,815).
    let w = start_watch(&["--comm", "postgres", "--json", json.to_str().unwrap()]);
    let before = blks_read(&base);
    let out = bin()
        .args(["db", "run", "--engine", "postgres", "--dsn", &dsn])
        .args(["--sessions", "2", "--duration", "3s", "-q"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Backends flush their statistics when they exit, which the run's sessions have done.
    std::thread::sleep(Duration::from_millis(700));
    interrupt_watch(w, Duration::from_secs(30));
    let delta = blks_read(&base) - before;
    let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));

    let r = Results::read_file(&json).unwrap();
    let b = budget(&r);
    let mut reads = 0u64;
    let mut read_blocks = 0u64;
    for p in &b.processes {
        assert_eq!(p.comm, "postgres", "only postgres processes are watched");
        for sc in ["pread64", "preadv", "preadv2"] {
            if let Some(row) = p.syscalls.get(sc) {
                reads += row[0];
                read_blocks += row[1] / 8192;
            }
        }
    }
    eprintln!(
        "postgres: {reads} read syscalls, {read_blocks} blocks; blks_read delta {delta}; \
         lost {:?}",
        b.lost
    );
    assert!(
        delta > 100,
        "the run read only {delta} blocks outside shared_buffers"
    );
    // Every block PostgreSQL counts in blks_read is read with one read syscall of a postgres
    // process (one block per pread64; PostgreSQL 17's vectored reads cover several). Its other
    // reads (relation maps, control file) use read(2), which is not traced. The two windows
    // differ only at their edges: statistics are flushed when a backend exits or goes idle,
    // so a read just before the watch began can be counted in the delta, and one by a process
    // still running at the end (autovacuum, checkpointer) can be missing from it.
    let diff = (read_blocks as f64 - delta as f64).abs();
    assert!(
        diff <= 0.02 * delta as f64 + 50.0,
        "{read_blocks} blocks read by postgres syscalls vs blks_read delta {delta} \
         (events the watch says it lost: {:?})",
        b.lost
    );
    assert!(reads > 0);
}

/// Ground truth (a) of issue 23: pgbench writes on a host whose CPUs are all kept busy (two busy
/// loops per CPU), on fast storage. Each transaction is one UPDATE committed on its own, so every
/// commit flushes WAL and a backend waiting for its client is always outside a transaction
/// (idle, never DB time, for the watch and for `pg_stat_activity` alike). The verdict must name
/// the CPU, never the storage, and the WAL chain must say that the flushes wait for a CPU; the
/// accounting invariants hold over every server process; and the watch's shares of the client
/// backends' DB time — every wait event and CPU (active, no wait event) — agree within 10
/// points with PostgreSQL's own view over the same window: an independent `pg_stat_activity`
/// sampler at 100 Hz, real-time (SCHED_FIFO, thread and backend: at normal priority it is
/// starved, looks only when the backends are not running and saw 1 % CPU where they had 8 to
/// 14 %), and pg_wait_sampling's profile (10 ms period, waits only, its collector real-time
/// too). The watch and both references start together once pgbench's sessions are connected,
/// and end before pgbench does: connection and exit are outside all three. The references
/// connect to another database, so that their own backends are not the sessions measured.
#[test]
fn pgbench_on_a_saturated_host_is_the_cpu_not_the_storage() {
    if !root_or_skip("pgbench_on_a_saturated_host_is_the_cpu_not_the_storage") {
        return;
    }
    let Some(dsn) = pg_dsn() else { return };
    if Command::new("pgbench").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "pgbench is missing");
        eprintln!("note: pgbench missing: test skipped");
        return;
    }
    let _serial = serial();
    let init = Command::new("pgbench")
        .args(["-i", "-s", "2", "-q", &dsn])
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let mut admin = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    let server = server_pid(&mut admin);
    let session: String = admin
        .query_one("SELECT current_user || '@' || current_database()", &[])
        .unwrap()
        .get(0);
    drop(admin);
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("pg.json");
    let script = tmp.path().join("update.sql");
    std::fs::write(
        &script,
        "\\set aid random(1, 200000)\n\
         UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;\n",
    )
    .unwrap();
    let reference_dsn = format!("{dsn} dbname=postgres");
    let hogs = Hogs::start();
    let bench = Command::new("pgbench")
        .args(["-n", "-c", "4", "-j", "2", "-T", "8", "-f"])
        .arg(&script)
        .arg(&dsn)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the sessions are connected, the watch and both references over the same window
    // (within the few milliseconds between their starts): pgbench's start and end, and its
    // sessions' connection and exit, outside all three.
    std::thread::sleep(Duration::from_millis(1000));
    let w = start_watch(&[
        "--comm",
        "postgres",
        "--duration",
        "5s",
        "--json",
        json.to_str().unwrap(),
    ]);
    let sampler = common::pgsampler::PgSampler::start(&reference_dsn, "pgbench", 100.0);
    // pg_wait_sampling is created in the test database only (its window has two queries).
    let server_side = common::pgsampler::WaitSamplingWindow::start(&dsn, "pgbench");
    std::thread::sleep(Duration::from_millis(4900));
    let seen = sampler.finish();
    let server_side = server_side.map(common::pgsampler::WaitSamplingWindow::finish);
    finish_watch(w, Duration::from_secs(30));
    let bench = bench.wait_with_output().unwrap();
    drop(hogs);
    assert!(
        bench.status.success(),
        "{}",
        String::from_utf8_lossy(&bench.stderr)
    );
    let r = Results::read_file(&json).unwrap();
    check_accounting(&r);
    let a = r.analysis.as_ref().unwrap().watch.as_ref().unwrap();
    eprintln!(
        "{:?}",
        a.verdicts.iter().map(|v| &v.message).collect::<Vec<_>>()
    );
    assert_eq!(
        a.overall.verdict,
        Some(VerdictKind::CpuBound),
        "{:?}",
        a.verdicts
    );
    assert!(
        a.verdicts
            .iter()
            .all(|v| v.kind != VerdictKind::StorageBound),
        "{:?}",
        a.verdicts
    );
    // The WAL chain: backends wait on WAL flushes, and the flushes wait for a CPU.
    let chain = a
        .wal
        .iter()
        .find(|c| c.server == Some(server))
        .unwrap_or_else(|| panic!("no WAL chain for server {server}: {:?}", a.wal));
    eprintln!("WAL chain: {chain:?}");
    assert_eq!(chain.verdict, Some(VerdictKind::CpuBound), "{chain:?}");
    assert!(
        chain.cpu_wait_s > chain.device_s + chain.queue_s,
        "{chain:?}"
    );
    let parts = chain.device_s + chain.queue_s + chain.cpu_wait_s + chain.cpu_s + chain.other_s;
    assert!((parts - chain.flush_s).abs() <= 1e-9 + 1e-6 * chain.flush_s);
    assert!(a
        .verdicts
        .iter()
        .any(|v| v.message.starts_with("backends wait for WAL flushes")
            && v.message
                .contains("the CPU is saturated, the storage is fine")));

    // The watch's shares of the pgbench sessions' DB time.
    let pg = budget(&r).pg.expect("no PostgreSQL wait events recorded");
    let role = pg
        .roles
        .iter()
        .find(|x| {
            x.role == "client backend"
                && x.server == Some(server)
                && x.session.as_deref() == Some(session.as_str())
        })
        .unwrap_or_else(|| panic!("no client backend {session} of server {server}"));
    let mut watch: std::collections::BTreeMap<String, f64> = Default::default();
    for x in &role.rows {
        eprintln!(
            "  {:?} {:24} {:.3} s, {:?} of DB time: {:?}",
            x.kind, x.event, x.time_s, x.share_of_db, x.split
        );
        let Some(share) = x.share_of_db else { continue };
        // pg_stat_activity shows a backend that waits on nothing as running: CPU.
        let label = match x.kind {
            PgWaitKind::Wait => x.event.clone(),
            _ => "CPU".to_string(),
        };
        *watch.entry(label).or_default() += share;
    }
    let sampled = seen.db_time();
    eprintln!(
        "watch (DB time {:.2} thread-s): {watch:?}\nsampler ({} rounds, {:.0} Hz, {} samples, \
         real-time {}): {:?}\nits standard errors, of this window: {:?}; by batch means: {:?}",
        role.db_s,
        seen.rounds,
        seen.rate_hz(),
        seen.samples,
        seen.realtime,
        sampled.shares,
        sampled.window_stderr,
        sampled.stderr
    );
    assert!(sampled.samples >= 200, "{} samples", sampled.samples);
    // A sampler that must win a CPU on this saturated host sees backends only when they are
    // not running (see tests/common/pgsampler.rs): it runs real-time, or its CPU share is void.
    assert!(
        seen.realtime,
        "the pg_stat_activity sampler could not run SCHED_FIFO"
    );
    assert!(
        seen.rate_hz() >= 50.0,
        "sampled at {:.0} Hz",
        seen.rate_hz()
    );
    let agree = |name: &str,
                 theirs: &std::collections::BTreeMap<String, f64>,
                 mine: &std::collections::BTreeMap<String, f64>,
                 tol: &dyn Fn(&str) -> f64| {
        let labels: std::collections::BTreeSet<&String> =
            theirs.keys().chain(mine.keys()).collect();
        let mut wrong = Vec::new();
        for label in labels {
            let (t, m) = (
                theirs.get(label).copied().unwrap_or(0.0),
                mine.get(label).copied().unwrap_or(0.0),
            );
            let tol = tol(label);
            eprintln!(
                "{label}: watch {m:.3}, {name} {t:.3}, difference {:+.3} (tolerance {tol:.3})",
                m - t
            );
            if (t - m).abs() > tol {
                wrong.push(format!(
                    "{label}: the watch {m:.3} of DB time, {name} {t:.3} (tolerance {tol:.3})"
                ));
            }
        }
        assert!(
            wrong.is_empty(),
            "{wrong:?}\nwatch {mine:?}\n{name} {theirs:?}"
        );
    };
    // Every share, CPU included (an active backend with no wait event), against the sampler,
    // within the issue's 10 points. That bound must be wider than the sampler's own error in
    // measuring this window: three of its successive-differences standard errors
    // (`window_stderr`: what sampling 100 times a second misses of the backends' states).
    // Not its batch-means error (`stderr`), which also holds how far this window's shares
    // stray from the load's long-run ones: the watch measured the same window, so a burst of
    // waits under a loaded host is in both and no error of the comparison (at load 20 it
    // once made the batch-means error 0.13 and failed this check though the two agreed
    // with the window's). What is left of the 10 points covers what the two do not see
    // alike: the sampler's own real-time CPU is taken from the backends while it samples,
    // pg_stat_activity reads a backend's state and its wait event at two moments, and the
    // sampler's window ends 0.1 s before the watch's. Measured on the loaded 2-CPU VM
    // (docs/pg-watch-accuracy.md): CPU within -6 to +6 points.
    let tol = |label: &str| {
        let err = 3.0 * sampled.window_stderr.get(label).copied().unwrap_or(0.0);
        assert!(
            err <= 0.07,
            "{label}: the sampler's own error is {err:.3}: too few rounds ({}) to compare \
             within 10 points",
            seen.rounds
        );
        0.10
    };
    agree(
        "the pg_stat_activity sampler",
        &sampled.shares,
        &watch,
        &tol,
    );
    // pg_wait_sampling (Debian's 1.1.4) counts waits only, and cannot tell a backend waiting
    // for its client outside a transaction (here: every Client:ClientRead) from one inside:
    // the shares among the other waits.
    if let Some(ws) = server_side {
        let waits_of = |m: &std::collections::BTreeMap<String, f64>| {
            let kept: std::collections::BTreeMap<String, f64> = m
                .iter()
                .filter(|(k, _)| {
                    *k != "CPU"
                        && *k != "Client:ClientRead"
                        && !k.starts_with("idle:")
                        && !k.starts_with("none:")
                })
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            let total: f64 = kept.values().sum();
            kept.into_iter()
                .map(|(k, v)| (k, v / total.max(1e-12)))
                .collect::<std::collections::BTreeMap<String, f64>>()
        };
        let theirs = waits_of(&ws.shares);
        eprintln!("pg_wait_sampling ({} samples): {theirs:?}", ws.samples);
        assert!(
            ws.samples >= 200,
            "pg_wait_sampling: {} samples",
            ws.samples
        );
        // Its rounds are not kept: the issue's 10 points.
        agree("pg_wait_sampling", &theirs, &waits_of(&watch), &|_| 0.10);
    }
}

/// Issue 23, item 3: a server process asleep for the whole watch (here a session idle since
/// before it began, in Client:ClientRead) is never seen by the probes — no switch, no wakeup,
/// no syscall — yet it was there all along: its table holds the whole watch under the event
/// it had at the start (read from its memory then), as idle time, and no DB time. Tolerance:
/// the watch's own start and end are stamped a few milliseconds from the probes'; 5 %.
#[test]
fn a_session_asleep_for_the_whole_watch_has_its_time() {
    if !root_or_skip("a_session_asleep_for_the_whole_watch_has_its_time") {
        return;
    }
    let Some(dsn) = pg_dsn() else { return };
    let _serial = serial();
    let mut admin = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'iolens_asleep') \
             THEN CREATE ROLE iolens_asleep LOGIN; END IF; END$$",
        )
        .unwrap();
    let server = server_pid(&mut admin);
    let database: String = admin
        .query_one("SELECT current_database()", &[])
        .unwrap()
        .get(0);
    let mut asleep =
        postgres::Client::connect(&format!("{dsn} user=iolens_asleep"), postgres::NoTls).unwrap();
    asleep.batch_execute("SELECT 1").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("asleep.json");
    let w = start_watch(&[
        "--comm",
        "postgres",
        "--duration",
        "2s",
        "--json",
        json.to_str().unwrap(),
    ]);
    finish_watch(w, Duration::from_secs(30));
    drop(asleep);
    let r = Results::read_file(&json).unwrap();
    check_accounting(&r);
    let pg = budget(&r).pg.expect("no PostgreSQL tables");
    let session = format!("iolens_asleep@{database}");
    let role = pg
        .roles
        .iter()
        .find(|x| {
            x.role == "client backend"
                && x.server == Some(server)
                && x.session.as_deref() == Some(session.as_str())
        })
        .unwrap_or_else(|| panic!("no client backend {session}: {:?}", pg.roles));
    eprintln!("{role:?}");
    assert_eq!(role.processes, 1);
    assert_eq!(role.db_s, 0.0, "{role:?}");
    let read = role
        .rows
        .iter()
        .find(|x| x.event == "Client:ClientRead")
        .unwrap_or_else(|| panic!("no Client:ClientRead row: {:?}", role.rows));
    assert_eq!(read.kind, PgWaitKind::Idle);
    assert!(
        (read.time_s - 2.0).abs() <= 0.1 && (read.split.off_cpu_s - read.time_s).abs() < 1e-9,
        "{read:?}"
    );
    assert_eq!(read.count, 1);
    let _ = admin.batch_execute("DROP ROLE iolens_asleep");
}

/// The test server's postmaster pid (the parent of a backend): the watch covers every
/// `postgres` on the host (other clusters too); its tables are per server.
fn server_pid(c: &mut postgres::Client) -> u32 {
    let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Issue 23, item 2, known by construction: one session sleeps in `pg_sleep` holding a row
/// lock, a second one blocks on that lock. The watch's wait-event table for client backends
/// names exactly `Timeout:PgSleep` and `Lock:transactionid`, each with the time its statement
/// took as the client timed it: the wait is all of a statement's time but its parse, CPU and
/// round trip (milliseconds), and the off-CPU span that carries it is cut short only by the
/// run-queue wait after the wakeup, which it includes. Tolerance: 10 % of the statement's time.
#[test]
fn pg_wait_events_name_a_sleep_and_a_row_lock_with_their_time() {
    if !root_or_skip("pg_wait_events_name_a_sleep_and_a_row_lock_with_their_time") {
        return;
    }
    let Some(dsn) = pg_dsn() else { return };
    let _serial = serial();
    let mut admin = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "DROP TABLE IF EXISTS iolens_wait_t; \
             CREATE TABLE iolens_wait_t (id int PRIMARY KEY, v int); \
             INSERT INTO iolens_wait_t VALUES (1, 0);",
        )
        .unwrap();
    let server = server_pid(&mut admin);
    drop(admin);
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("pg.json");
    let w = start_watch(&[
        "--comm",
        "postgres",
        "--duration",
        "6s",
        "--json",
        json.to_str().unwrap(),
    ]);
    // Both sessions connect after the probes are attached: their backends are forked during
    // the watch.
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let d = dsn.clone();
    let sleeper = std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&d, postgres::NoTls).unwrap();
        let mut tx = c.transaction().unwrap();
        tx.execute("UPDATE iolens_wait_t SET v = v + 1 WHERE id = 1", &[])
            .unwrap();
        locked_tx.send(()).unwrap();
        let t = Instant::now();
        tx.execute("SELECT pg_sleep(2.5)", &[]).unwrap();
        let slept = t.elapsed().as_secs_f64();
        tx.commit().unwrap();
        slept
    });
    let mut c = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    locked_rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    c.execute("UPDATE iolens_wait_t SET v = v + 1 WHERE id = 1", &[])
        .unwrap();
    let blocked = t.elapsed().as_secs_f64();
    let slept = sleeper.join().unwrap();
    drop(c);
    finish_watch(w, Duration::from_secs(20));
    let r = Results::read_file(&json).unwrap();
    let pg = budget(&r).pg.expect("no PostgreSQL wait events recorded");
    assert!(pg.majors.contains(&15), "{:?}", pg.majors);
    let role = pg
        .roles
        .iter()
        .find(|x| x.role == "client backend" && x.server == Some(server))
        .expect("no client backend");
    eprintln!(
        "statements: pg_sleep {slept:.3} s, blocked UPDATE {blocked:.3} s; table: {:?}",
        role.rows
            .iter()
            .map(|x| (x.event.as_str(), x.kind, x.time_s, x.count))
            .collect::<Vec<_>>()
    );
    let time_of = |event: &str| {
        role.rows
            .iter()
            .filter(|x| x.event == event && x.kind == PgWaitKind::Wait)
            .map(|x| x.time_s)
            .sum::<f64>()
    };
    for (event, truth) in [("Timeout:PgSleep", slept), ("Lock:transactionid", blocked)] {
        let got = time_of(event);
        assert!(
            (got - truth).abs() <= 0.1 * truth,
            "{event}: {got:.3} s in the table, the statement took {truth:.3} s"
        );
    }
    // Nothing else of substance: other waits of these sessions (their commits' WAL flush) are
    // milliseconds.
    let others: Vec<_> = role
        .rows
        .iter()
        .filter(|x| {
            x.kind == PgWaitKind::Wait
                && x.time_s > 0.1
                && !["Timeout:PgSleep", "Lock:transactionid"].contains(&x.event.as_str())
        })
        .collect();
    assert!(others.is_empty(), "{others:?}");
    // Shares are of DB time and sum to 1; idle (Client:ClientRead) is not in DB time.
    let sum: f64 = role.rows.iter().filter_map(|x| x.share_of_db).sum();
    assert!((sum - 1.0).abs() < 1e-6, "{sum}");
    assert!(role.db_s >= slept + blocked - 0.1 * (slept + blocked));
    // The per-event histograms: one span per pg_sleep; the lock wait wakes every
    // deadlock_timeout (1 s) to check for a deadlock, so it is one span or more.
    let ops = &r
        .runs
        .iter()
        .find(|x| x.name == "pg wait events")
        .expect("no pg wait events run")
        .ops;
    assert!(ops
        .iter()
        .any(|o| o.op == "Timeout:PgSleep" && o.count >= 1));
    // The renderers show the table.
    let text = run_ok(&["show", json.to_str().unwrap()]);
    assert!(
        text.contains("PostgreSQL wait events: client backend"),
        "{text}"
    );
    assert!(text.contains("Timeout:PgSleep"), "{text}");
    let md_path = tmp.path().join("pg.md");
    run_ok(&[
        "export",
        "--markdown",
        md_path.to_str().unwrap(),
        json.to_str().unwrap(),
    ]);
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(
        md.contains("### PostgreSQL wait events: client backend"),
        "{md}"
    );
    assert!(md.contains("Lock:transactionid"), "{md}");
}

#[test]
fn ctrl_c_ends_the_watch_and_writes_the_results() {
    if !root_or_skip("ctrl_c_ends_the_watch_and_writes_the_results") {
        return;
    }
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("w.json");
    let w = start_watch(&["--interval", "200ms", "--json", json.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(700));
    // SAFETY: kill sends a signal to the child we started.
    unsafe { libc::kill(w.id() as i32, libc::SIGINT) };
    let out = w.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "Ctrl-C exit status");
    let r = Results::read_file(&json).unwrap();
    assert_eq!(r.kind, iolens::results::Kind::Watch);
    // Without a duration, the signal is the watch's planned end: not an interrupted run.
    assert!(r.runs.iter().all(|x| !x.interrupted));
    let b = budget(&r);
    assert!(b.intervals.len() >= 3, "{} intervals", b.intervals.len());
    assert!(b.tracepoints.iter().any(|t| t.starts_with("sched_switch")));
}

#[test]
fn sigterm_ends_a_watch_as_asked_and_merge_says_only_a_cut_duration() {
    if !root_or_skip("sigterm_ends_a_watch_as_asked_and_merge_says_only_a_cut_duration") {
        return;
    }
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let path = |n: &str| tmp.path().join(format!("{n}.json"));
    // Two watches until stopped (as systemd or Kubernetes run one), one for 60 s that the
    // signal stops before its end.
    let watches: Vec<(&str, Child)> = [("a", None), ("b", None), ("cut", Some("60s"))]
        .into_iter()
        .map(|(n, d)| {
            let json = path(n);
            let mut args = vec!["--interval", "200ms", "--json", json.to_str().unwrap()];
            args.extend(d.iter().flat_map(|d| ["--duration", *d]));
            (n, start_watch(&args))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    for (n, w) in watches {
        // SAFETY: kill sends a signal to the child we started.
        unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
        let out = w.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(143), "{n}: SIGTERM exit status");
        let r = Results::read_file(&path(n)).unwrap();
        assert!(!r.runs.is_empty(), "{n}: no runs");
        let cut = n == "cut";
        assert!(
            r.runs.iter().all(|x| x.interrupted == cut),
            "{n}: interrupted {:?}",
            r.runs.iter().map(|x| x.interrupted).collect::<Vec<_>>()
        );
    }
    let merge = |files: [&str; 2]| {
        bin()
            .args(["-q", "merge"])
            .args(files.map(path))
            .arg("-o")
            .arg(tmp.path().join("merged.json"))
            .output()
            .unwrap()
    };
    let out = merge(["a", "b"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "merge of two watches ended by SIGTERM: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = Results::read_file(&tmp.path().join("merged.json")).unwrap();
    assert!(m.runs.iter().all(|x| !x.interrupted));
    let out = merge(["a", "cut"]);
    assert_eq!(
        out.status.code(),
        Some(130),
        "merge with a watch cut before its duration: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = Results::read_file(&tmp.path().join("merged.json")).unwrap();
    assert!(m.runs.iter().any(|x| x.interrupted));
}

/// Resident anonymous memory (the heap; not the 16 MiB ring buffer's mapping, which becomes
/// resident as the ring first wraps) of process `pid`, KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

#[test]
fn a_long_watch_of_churning_processes_stays_bounded_and_exact() {
    if !root_or_skip("a_long_watch_of_churning_processes_stays_bounded_and_exact") {
        return;
    }
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    const KEEP: usize = 64;
    const READS: u64 = 10;
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let data = std::fs::File::open(data_file(tmp.path(), 1)).unwrap();
    let json = tmp.path().join("w.json");
    // A tiny interval: 2,000 intervals in 20 s, kept in about 64.
    // Two names (one that no process has), so that no row or label is named by the filter:
    // the exited readers keep the name the kernel side reported (before, most of the exporter's
    // series were `comm="(exited)"`: looked up in /proc after the process was gone).
    let port = common::http::free_port();
    let addr = format!("127.0.0.1:{port}");
    let w = start_watch(&[
        "--comm",
        "iolenschurn",
        "--comm",
        "iolensnobody",
        "--prometheus",
        &addr,
        "--wait",
        "--no-progress",
        "--interval",
        "10ms",
        "--keep-intervals",
        &KEEP.to_string(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let pid = w.id();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rss = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                rss.extend(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(250));
            }
            rss
        })
    };
    // Short-lived readers, one after another: each names itself, reads READS blocks of the
    // cached file with pread64 and exits (only async-signal-safe calls after the fork).
    let fd = data.as_raw_fd();
    let t0 = Instant::now();
    let mut children = 0u64;
    while t0.elapsed() < Duration::from_secs(20) {
        // SAFETY: the child makes only raw syscalls (prctl, pread, _exit) before exiting.
        let child = unsafe { libc::fork() };
        if child == 0 {
            unsafe {
                libc::prctl(
                    libc::PR_SET_NAME,
                    c"iolenschurn".as_ptr() as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                let mut buf = [0u8; 4096];
                let mut ok = true;
                for i in 0..READS {
                    let n = libc::pread(fd, buf.as_mut_ptr().cast(), 4096, (i * 4096) as i64);
                    ok &= n == 4096;
                }
                libc::_exit(if ok { 0 } else { 1 });
            }
        }
        assert!(child > 0, "fork failed");
        let mut st = 0;
        // SAFETY: waits for the child just forked.
        unsafe { libc::waitpid(child, &mut st, 0) };
        assert!(
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
            "a reader failed"
        );
        children += 1;
    }
    // The last readers' events delivered.
    std::thread::sleep(Duration::from_millis(300));
    let (status, metrics) = common::http::http_get(&addr, "/metrics").unwrap();
    assert_eq!(status, 200);
    stop.store(true, Ordering::Relaxed);
    let rss = sampler.join().unwrap();
    // SAFETY: kill sends a signal to the child we started.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let out = w.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143));
    let r = Results::read_file(&json).unwrap();
    let b = budget(&r);
    let expected = children * READS;
    eprintln!(
        "{children} readers; {} intervals kept; {} process rows; RssAnon KiB over time {rss:?}",
        b.intervals.len(),
        b.processes.len()
    );
    assert!(children > 1000, "only {children} readers in 20 s");
    assert!(b.lost.is_empty(), "events lost: {:?}", b.lost);
    // Exact: the op, its intervals, the intervals' spans and the process table all count every
    // read done.
    let syscalls = r.runs.iter().find(|x| x.name == "syscalls").unwrap();
    let op = syscalls.op("pread64").unwrap();
    assert_eq!(op.count, expected, "pread64 count");
    assert_eq!(
        op.intervals.iter().map(|i| i.count).sum::<u64>(),
        expected,
        "the intervals' counts"
    );
    assert_eq!(
        b.intervals.iter().map(|s| s.syscalls).sum::<u64>(),
        expected,
        "the spans' syscalls"
    );
    let table: u64 = b
        .processes
        .iter()
        .filter_map(|p| p.syscalls.get("pread64"))
        .map(|v| v[0])
        .sum();
    assert_eq!(table, expected, "the process table's reads");
    // Every row that read is a reader's, by its own name, folded or not.
    for p in &b.processes {
        if p.syscalls.contains_key("pread64") {
            assert_eq!(p.comm, "iolenschurn", "{p:?}");
        }
    }
    // The exporter's pread64 series: the readers' by name, none `(exited)`. The scrape came
    // before the end, when the per-CPU batches still held at most 15 syscalls each (SYS_BATCH
    // in bpf/watch.bpf.c; flushed then).
    let mut named = 0u64;
    for l in metrics.lines() {
        if l.starts_with("iolens_syscall_latency_seconds_count{") && l.contains("op=\"pread64\"") {
            assert!(l.contains("comm=\"iolenschurn\""), "{l}");
            named += l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64;
        }
    }
    assert!(!metrics.contains("(exited)"), "an exited process unnamed");
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    assert!(
        named <= expected && named + 15 * cpus >= expected,
        "exporter: {named} reads by iolenschurn of {expected}"
    );
    // The intervals cover the watch once each, the older ones rolled up.
    let covered: f64 = b.intervals.iter().map(|s| s.duration_s).sum();
    assert!(
        (covered - syscalls.duration_s).abs() < 1e-6,
        "intervals cover {covered} s of {} s",
        syscalls.duration_s
    );
    for pair in b.intervals.windows(2) {
        assert!((pair[0].start_s + pair[0].duration_s - pair[1].start_s).abs() < 1e-9);
    }
    // Bounded: KEEP intervals, however many 10 ms intervals passed (the end rolls up the last
    // ones too, however far the watch's loop lagged); the tables hold the exited readers in one
    // row per name.
    assert!(b.intervals.len() <= KEEP, "{} intervals", b.intervals.len());
    // The op's: the same, but a last stub interval folded into the one before.
    assert!(
        (b.intervals.len() - 1..=b.intervals.len()).contains(&op.intervals.len()),
        "{} op intervals, {} spans",
        op.intervals.len(),
        b.intervals.len()
    );
    assert!(syscalls.duration_s / 0.01 > 10.0 * KEEP as f64);
    let folded = b
        .processes
        .iter()
        .find(|p| p.pid == 0)
        .expect("a folded row");
    assert_eq!(folded.comm, "iolenschurn");
    assert!(folded.exited as f64 > 0.5 * children as f64, "{folded:?}");
    // A row folds at the second look (every 250 ms) after its process exited: at most the
    // table's 512 rows and the readers of about two looks; a second for looks a loaded machine
    // delays.
    let rows = (512.0 + children as f64 / 20.0) as usize + 64;
    assert!(
        b.processes.len() <= rows,
        "{} process rows",
        b.processes.len()
    );
    assert!(b.threads.len() <= rows, "{} thread rows", b.threads.len());
    check_accounting(&r);
    // The heap after the warm-up (the first third): flat. Unbounded, it would grow by at least
    // a process and a thread row (about 500 bytes with their maps) per reader and a span and a
    // few ops' intervals (about 1 KB) per 10 ms: at 1,000 readers a second, 13 MiB over the
    // last 13 s. What stays is the few decoded histograms of the open intervals (270 KB each)
    // the allocator keeps or returns.
    // Growth, not a moment's peak (a roll-up decodes a few histograms at once): the median of
    // the last third against the middle third's.
    let median = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2]
    };
    let third = rss.len() / 3;
    let (mid, end) = (median(&rss[third..2 * third]), median(&rss[2 * third..]));
    assert!(
        end <= mid + 4 * 1024,
        "heap grew from {mid} to {end} KiB after warm-up"
    );
}

/// A limiting cgroup holding many watched processes keeps a bounded list of them and counts
/// them all: 100 sleepers (a copy of `sleep` named `iolenssleeper`) in a cgroup with an I/O
/// limit, watched by name: the cgroup's `processes` is 100, its `pids` the first 64.
#[test]
fn a_limited_cgroup_of_many_processes_keeps_a_bounded_list() {
    if !root_or_skip("a_limited_cgroup_of_many_processes_keeps_a_bounded_list") {
        return;
    }
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let backing = tmp.path().join("lo.img");
    std::fs::write(&backing, vec![0u8; 1 << 20]).unwrap();
    let Some(lo) = common::loopdev::Loop::attach(&backing) else {
        assert!(!common::ci(), "no loop device under CI");
        return;
    };
    let Some(limit) = common::iolimit::IoLimit::new(lo.dev(), Some(1000), None) else {
        return;
    };
    let sleeper = tmp.path().join("iolenssleeper");
    std::fs::copy("/bin/sleep", &sleeper).unwrap();
    let json = tmp.path().join("w.json");
    let w = start_watch(&[
        "--comm",
        "iolenssleeper",
        "--wait",
        "--no-progress",
        "--duration",
        "4s",
        "--json",
        json.to_str().unwrap(),
    ]);
    let mut sleepers: Vec<Child> = (0..100)
        .map(|_| {
            let mut c = Command::new(&sleeper);
            c.arg("6");
            limit.join_on_exec(&mut c);
            c.spawn().unwrap()
        })
        .collect();
    wait_watch(w, Duration::from_secs(30), Some(0));
    for c in &mut sleepers {
        let _ = c.kill();
        let _ = c.wait();
    }
    let r = Results::read_file(&json).unwrap();
    let found = limiting_cgroup(&r, &limit);
    assert_eq!(found.processes, 100, "{found:?}");
    assert_eq!(found.pids.len(), 64, "{found:?}");
    let ours: std::collections::BTreeSet<u32> = sleepers.iter().map(|c| c.id()).collect();
    assert!(found.pids.iter().all(|p| ours.contains(p)), "{found:?}");
}

/* ------------------------------------------------------------------------------------------
 * `--watch` on `run`, `calibrate` and `db run`: the block layer under iolens' own I/O.
 * ---------------------------------------------------------------------------------------- */

fn run_ok(args: &[&str]) -> String {
    let out = bin().args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The I/Os of a run that reached the block layer as `dev`'s op: its requests seen completing,
/// bios merged into a queued request, and completions the probe did not see; with the three in
/// words for an assertion's message.
fn reached_block_layer(block: &BlockLayer, dev: &OpResult) -> (u64, String) {
    let unseen = block.lost.get(UNSEEN).copied().unwrap_or(0);
    let parts = format!(
        "{} seen completing, {} merged, {unseen} completions not seen",
        dev.count, block.merged
    );
    (dev.count + block.merged + unseen, parts)
}

/// What sysfs says of how many requests `disk` takes at once (read here, independently of
/// iolens): its blk-mq tags over its hardware queues and, on the virtio bus, whether the ring
/// has indirect descriptors (feature bit 28), and its request queue (`nr_requests`); `None`
/// without an mq directory.
fn disk_queue_in_sysfs(disk: &str) -> Option<DiskQueue> {
    let queues: Vec<u32> = std::fs::read_dir(Path::new("/sys/block").join(disk).join("mq"))
        .ok()?
        .flatten()
        .filter_map(|q| std::fs::read_to_string(q.path().join("nr_tags")).ok())
        .map(|t| t.trim().parse::<u32>().unwrap())
        .collect();
    let dev = Path::new("/sys/block").join(disk).join("device");
    let virtio = std::fs::canonicalize(dev.join("subsystem")).is_ok_and(|b| b.ends_with("virtio"));
    Some(DiskQueue {
        disk: disk.to_string(),
        driver_tags: queues.iter().sum(),
        hw_queues: queues.len() as u32,
        virtio_indirect: virtio.then(|| {
            std::fs::read_to_string(dev.join("features"))
                .unwrap()
                .as_bytes()[28]
                == b'1'
        }),
        nr_requests: std::fs::read_to_string(
            Path::new("/sys/block").join(disk).join("queue/nr_requests"),
        )
        .ok()
        .map(|t| t.trim().parse::<u32>().unwrap()),
    })
}

/// The host-vs-device verdict of run `run` of `r`.
fn host_device_verdict(r: &Results, run: usize) -> &Verdict {
    r.analysis.as_ref().expect("analysis").runs[run]
        .verdicts
        .iter()
        .find(|v| {
            matches!(
                v.kind,
                VerdictKind::HostQueueing | VerdictKind::StorageBound
            )
        })
        .expect("a host/device verdict")
}

/// Every block-layer op of `run` is on the run's own interval grid, and its intervals sum to it.
fn check_grid(run: &RunResult) {
    let block = run.block.as_ref().expect("the run has a block layer");
    let grid: Vec<(f64, f64)> = run.ops[0]
        .intervals
        .iter()
        .map(|i| (i.start_s, i.duration_s))
        .collect();
    for op in &block.ops {
        let g: Vec<(f64, f64)> = op
            .intervals
            .iter()
            .map(|i| (i.start_s, i.duration_s))
            .collect();
        assert_eq!(g, grid, "{}: {} on the run's grid", run.name, op.op);
        let n: u64 = op.intervals.iter().map(|i| i.count).sum();
        assert_eq!(n, op.count, "{}: {} interval counts", run.name, op.op);
    }
}

#[test]
fn run_watch_sees_one_block_request_per_direct_read() {
    let Some(OwnLoad {
        _serial,
        tmp: _tmp,
        target,
        json,
    }) = own_load("run_watch_sees_one_block_request_per_direct_read")
    else {
        return;
    };
    let out = run_ok(&[
        "run",
        "--watch",
        "--target",
        target.to_str().unwrap(),
        "--size",
        "64M",
        "--bs",
        "4k",
        "--duration",
        "2s",
        "--interval",
        "500ms",
        "--verify",
        "none",
        "--no-progress",
        "--json",
        json.to_str().unwrap(),
    ]);
    let r = Results::read_file(&json).unwrap();
    let run = &r.runs[0];
    let read = run.op("read").unwrap();
    assert!(read.count > 1000, "the run did {} reads", read.count);
    let block = run.block.as_ref().unwrap();
    assert_eq!(block.device, disk_of(&target));
    assert!(
        block.lost.keys().all(|k| k == UNSEEN),
        "lost: {:?}",
        block.lost
    );
    let unseen = block.lost.get(UNSEEN).copied().unwrap_or(0);
    assert!(
        unseen as f64 <= read.count as f64 * 0.02,
        "{unseen} of {} completions not seen",
        read.count
    );
    let dev = block.op("blk:read:device").expect("device reads traced");
    let queue = block.op("blk:read:queue").expect("queue times traced");
    assert_eq!(dev.count, queue.count);
    // O_DIRECT 4 KiB reads: one request each (or a bio merged into a queued request), seen
    // completing or counted as a completion the probe did not see (every request of the run
    // has completed when it ends, so one still in the kernel's table was missed). A request
    // completes before its read returns, so at each edge of the measured span the counts can
    // differ by one per session (one session here): the accounting is otherwise exact. In about
    // one full test-suite run in ten the block layer used to see a few more requests of this
    // process than it made reads (+17 and +27 of ~31,000), most likely its reads of other files
    // on the same disk (its binary's pages read back after reclaim; bpftrace saw such readahead
    // requests from iolens, outside the run's window). Its writes of other files are certain
    // (own_watch_counts_only_the_targets_blocks). The probes now keep only requests to the
    // target's own extents (`target_extents`); the 0.2 % allowance stays for filesystems whose
    // extents cannot be mapped, where every request of the process counts.
    let (seen, parts) = reached_block_layer(block, dev);
    assert!(
        seen <= read.count + 1 + read.count / 500 && seen + 1 >= read.count,
        "{seen} requests ({parts}) for {} reads",
        read.count
    );
    assert_eq!(dev.bytes, dev.count * 4096);
    // The device serves a read inside the syscall that waits for it.
    assert!(
        dev.summary.p50_ns <= read.summary.p50_ns,
        "device p50 {} ns above the application's {} ns",
        dev.summary.p50_ns,
        read.summary.p50_ns
    );
    check_grid(run);
    // The verdict compares the distributions.
    let v = host_device_verdict(&r, 0);
    for k in [
        "app_p50_us",
        "app_p99_us",
        "device_p50_us",
        "device_p99_us",
        "queue_p99_us",
    ] {
        assert!(v.figures.contains_key(k), "{k} missing: {:?}", v.figures);
    }
    assert!(
        v.message.contains("p50") && v.message.contains("p99"),
        "{}",
        v.message
    );
    assert!(v.message.contains("service time"), "{}", v.message);
    // The summary wraps at the output width: compare with its line breaks folded.
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("traced block requests"), "{out}");
}

/// Only I/O to the target's own blocks is the run's: a write run on a scratch file also writes
/// its generation journal (another file on the same disk, flushed every 2 s with the target's
/// fdatasync), and the filesystem's metadata for both. Filtered by the target's extents, the
/// block layer's write requests equal the run's writes (one per write, or merged, or a
/// completion the probe missed), to the one request per session each edge of the span allows;
/// the whole-disk count was 5 more in each of two 3 s runs before the filter.
#[test]
fn own_watch_counts_only_the_targets_blocks() {
    let Some(OwnLoad {
        _serial,
        tmp: _tmp,
        target,
        json,
    }) = own_load("own_watch_counts_only_the_targets_blocks")
    else {
        return;
    };
    run_ok(&[
        "run",
        "--watch",
        "--target",
        target.to_str().unwrap(),
        "--size",
        "64M",
        "--pattern",
        "randwrite",
        "--bs",
        "4k",
        "--duration",
        "5s",
        "--interval",
        "500ms",
        "--no-progress",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    let r = Results::read_file(&json).unwrap();
    let run = &r.runs[0];
    let block = run.block.as_ref().unwrap();
    // The filesystem type as `stat -f` names it ("ext2/ext3" covers ext4).
    let fs = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(&target)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .ok();
    let Some(n) = block.target_extents else {
        assert!(
            !matches!(fs.as_deref(), Some("ext2/ext3" | "xfs")),
            "the extents of a file on {fs:?} are mapped"
        );
        eprintln!("note: skipped: the target's extents are not mapped on {fs:?}");
        return;
    };
    assert!(n >= 1);
    let writes = run.op("write").unwrap().count;
    assert!(writes > 1000, "the run did {writes} writes");
    let dev = block.op("blk:write:device").expect("device writes traced");
    let (seen, parts) = reached_block_layer(block, dev);
    assert!(
        seen <= writes + 1 && seen + 1 >= writes,
        "{seen} write requests ({parts}) for {writes} writes"
    );
    assert_eq!(
        dev.bytes,
        dev.count * 4096,
        "every request is one of the run's 4 KiB writes"
    );
    check_grid(run);
}

/// Many sessions of O_DIRECT reads: the block layer records the disk's driver tags (and, on
/// virtio, whether the ring has indirect descriptors) as sysfs has them, and the mean number of
/// requests in the device (Little's law, a verdict figure) is within its tags; where the verdict
/// names what held the rest on a virtio disk without indirect descriptors, it names the ring.
#[test]
fn own_watch_counts_requests_in_the_device_against_its_limit() {
    let Some(OwnLoad {
        _serial,
        tmp: _tmp,
        target,
        json,
    }) = own_load("own_watch_counts_requests_in_the_device_against_its_limit")
    else {
        return;
    };
    run_ok(&[
        "run",
        "--watch",
        "--target",
        target.to_str().unwrap(),
        "--size",
        "64M",
        "--sessions",
        "128",
        "--bs",
        "8k",
        "--verify",
        "none",
        "--duration",
        "3s",
        "--no-progress",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    let r = Results::read_file(&json).unwrap();
    let run = &r.runs[0];
    let block = run.block.as_ref().expect("a block layer");
    let Some(q) = disk_queue_in_sysfs(&block.device) else {
        assert_eq!(block.queue, None, "no tags in sysfs but tags recorded");
        eprintln!(
            "note: {} has no mq directory: no tags to check",
            block.device
        );
        return;
    };
    assert_eq!(block.queue.as_ref(), Some(&q));
    let (tags, indirect) = (q.driver_tags, q.virtio_indirect);
    let v = host_device_verdict(&r, 0);
    let fig = |k: &str| v.figures.get(k).copied();
    let l = fig("device_in_flight").expect("requests in the device");
    assert_eq!(fig("driver_tags"), Some(tags as f64));
    // Little's law by hand: the device ops' summed service time over the duration.
    let busy: f64 = block
        .ops
        .iter()
        .filter(|o| o.op.ends_with(":device"))
        .map(|o| o.summary.mean_ns * o.count as f64)
        .sum();
    assert!((l - busy / (run.duration_s * 1e9)).abs() < 1e-6 * l.max(1.0));
    eprintln!(
        "{}: {l:.1} requests in the device, {tags} tags, indirect {indirect:?}: {}",
        block.device, v.message
    );
    assert!(
        l > 1.0,
        "128 sessions keep more than one request in the device: {l}"
    );
    // A request holds its tag from before its issue until after its completion is traced, so
    // no more than the tags can be between the two (the window's edges can add a request's
    // service from just before or after it). The ring's own limit (a third of it for
    // one-segment requests) is not a bound on the traced figure: on busy CPUs a completion is
    // traced after the device has returned the request.
    assert!(l <= tags as f64 * 1.02, "{l} in the device, {tags} tags");
    if indirect == Some(false) && v.message.contains(" held ") {
        assert!(
            v.message
                .contains(&format!("ring of {} descriptors holds at most", 2 * tags)),
            "{}",
            v.message
        );
    }
}

/// A live watch of a disk under 128 sessions of O_DIRECT reads records, for the disk, how many
/// requests it takes at once as sysfs says, and gives with its verdicts the mean number of
/// requests in the disk (every process's, Little's law over the watch): more than one, within
/// the tags; where the host queues, the verdict says what held the rest.
#[test]
fn live_watch_gives_the_disks_requests_against_its_tags() {
    if !root_or_skip("live_watch_gives_the_disks_requests_against_its_tags") {
        return;
    }
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let data = data_file(tmp.path(), 64);
    let disk = disk_of(&data);
    let watch_json = tmp.path().join("watch.json");
    run_under_watch(
        &data,
        &[
            "--sessions",
            "128",
            "--bs",
            "8k",
            "--duration",
            "3s",
            "--verify",
            "none",
        ],
        &["--device", &disk, "--json", watch_json.to_str().unwrap()],
    );
    let r = Results::read_file(&watch_json).unwrap();
    let b = budget(&r);
    let Some(q) = disk_queue_in_sysfs(&disk) else {
        assert!(b.disks.is_empty(), "{:?}", b.disks);
        eprintln!("note: {disk} has no mq directory: no tags to check");
        return;
    };
    assert_eq!(b.disks, vec![q.clone()]);
    let a = r.analysis.as_ref().unwrap().watch.as_ref().unwrap();
    let v = a.verdicts.first().expect("a verdict");
    let l = v.figures[&format!("in_flight:{disk}")];
    assert_eq!(
        v.figures[&format!("driver_tags:{disk}")],
        q.driver_tags as f64
    );
    eprintln!(
        "{disk}: {l:.1} requests in the device of {} tags; {:?}",
        q.driver_tags, a.verdicts
    );
    assert!(
        l > 1.0,
        "128 sessions keep more than one request in {disk}: {l}"
    );
    assert!(
        l <= q.driver_tags as f64 * 1.02,
        "{l} in {disk}, {} tags",
        q.driver_tags
    );
    for v in &a.verdicts {
        if v.kind == VerdictKind::HostQueueing {
            assert!(
                v.message.contains(&format!("{disk} held ")),
                "{}",
                v.message
            );
        }
    }
}

#[test]
fn calibrate_watch_has_block_series_per_step() {
    let Some(OwnLoad {
        _serial,
        tmp: _tmp,
        target,
        json,
    }) = own_load("calibrate_watch_has_block_series_per_step")
    else {
        return;
    };
    run_ok(&[
        "calibrate",
        "--watch",
        "--budget",
        "8s",
        "--max-sessions",
        "2",
        "--max-qd",
        "1",
        "--phases",
        "randread",
        "--size",
        "32M",
        "--verify",
        "none",
        "--no-progress",
        "--target",
        target.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let r = Results::read_file(&json).unwrap();
    assert!(r.runs.len() >= 2, "{} steps", r.runs.len());
    for run in &r.runs {
        let reads = run.op("read").map_or(0, |o| o.count);
        let block = run.block.as_ref().expect("each step has its block layer");
        // Each step counts its own requests only: close to its own reads (up to 0.2 % more where
        // the target's extents cannot be mapped), requests seen completing, merged, or counted
        // as completions the probe did not see (a few per cent under load: the bounds of
        // run_watch_sees_one_block_request_per_direct_read; one full run at load 7 had 1.3 %
        // fewer requests seen than reads when these were left out).
        let unseen = block.lost.get(UNSEEN).copied().unwrap_or(0);
        assert!(
            unseen as f64 <= reads as f64 * 0.02,
            "{}: {unseen} of {reads} completions not seen",
            run.name
        );
        let (seen, parts) = match block.op("blk:read:device") {
            Some(dev) => reached_block_layer(block, dev),
            None => (0, "no device reads".to_string()),
        };
        assert!(
            seen <= reads + 2 + reads / 500 && seen as f64 >= reads as f64 * 0.99,
            "{}: {seen} requests ({parts}) for {reads} reads",
            run.name
        );
        check_grid(run);
    }
    // The curve gives each step's requests in the device (Little's law over its block layer).
    let show = run_ok(&["show", "--width", "200", json.to_str().unwrap()]);
    let header = show
        .lines()
        .position(|l| l.starts_with("sessions") && l.contains("in device"))
        .unwrap_or_else(|| panic!("an 'in device' column: {show}"));
    let c = r.calibration.as_ref().unwrap();
    for (row, p) in show.lines().skip(header + 1).zip(&c.curve) {
        let run = &r.runs[p.run];
        let busy: f64 = run
            .block
            .as_ref()
            .unwrap()
            .ops
            .iter()
            .filter(|o| o.op.ends_with(":device"))
            .map(|o| o.summary.mean_ns * o.count as f64)
            .sum();
        let l = iolens::units::sig3(busy / (run.duration_s * 1e9));
        assert!(
            row.split_whitespace().any(|x| x == l),
            "step {} ({} sessions): {l} in the device, row {row:?}",
            p.run,
            p.sessions
        );
    }
}

fn sqlite_setup(dir: &Path) {
    run_ok(&[
        "db",
        "setup",
        "--dir",
        dir.to_str().unwrap(),
        "--schemas",
        "1",
        "--scale",
        "16M",
        "--quiet",
    ]);
}

#[test]
fn db_run_sqlite_watch_traces_its_reads() {
    let Some(OwnLoad {
        _serial, tmp, json, ..
    }) = own_load("db_run_sqlite_watch_traces_its_reads")
    else {
        return;
    };
    sqlite_setup(tmp.path());
    run_ok(&[
        "db",
        "run",
        "--watch",
        "--dir",
        tmp.path().to_str().unwrap(),
        "--sessions",
        "1",
        "--duration",
        "2s",
        "--interval",
        "500ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    let r = Results::read_file(&json).unwrap();
    let run = &r.runs[0];
    let block = run.block.as_ref().expect("the I/O run has a block layer");
    let dev = block.op("blk:read:device").expect("device reads traced");
    assert!(dev.count > 0);
    // The OS cache was dropped first: the database's block reads reach the device, each at
    // least one request's worth (readahead may make requests larger, never more numerous).
    let reads = run.op("read").map_or(0, |o| o.count);
    assert!(
        reads > 0 && dev.count <= reads + 16,
        "{} requests, {reads} reads",
        dev.count
    );
    check_grid(run);
}

#[test]
fn watch_is_refused_before_any_io() {
    // Without privilege: the error names the capabilities, and the target is never created.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let target = tmp.path().join("never.dat");
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            env!("CARGO_BIN_EXE_iolens"),
            "run",
            "--watch",
            "--size",
            "8M",
            "--duration",
            "1s",
            "--target",
            target.to_str().unwrap(),
        ])
        .output();
    match out {
        Ok(out) if root_or_skip("watch_is_refused_before_any_io (privilege)") => {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert!(err.contains("--watch") && err.contains("CAP_BPF"), "{err}");
            assert!(
                !target.exists(),
                "the target was created before the refusal"
            );
        }
        Ok(_) => {}
        Err(_) => assert!(
            std::env::var_os("CI").is_none(),
            "setpriv (util-linux) is missing"
        ),
    }
    // `db run --engine postgres --watch` traces the server's backends (issue 23 item 7): with
    // no server to reach it is a clear error naming the socket it looked for, before any I/O.
    let err = bin()
        .args(["db", "run", "--engine", "postgres", "--watch"])
        .env("PGHOST", "/nonexistent-iolens-socket-dir")
        .output()
        .unwrap();
    assert!(!err.status.success());
    let text = String::from_utf8_lossy(&err.stderr);
    assert!(
        text.contains("cannot connect to PostgreSQL")
            && text.contains("/nonexistent-iolens-socket-dir"),
        "{text}"
    );
}

/// On a terminal, keys switch the live heatmap's layer (s, b, c), and the terminal is set back
/// as it was when the watch ends. The watch runs on a pseudo-terminal, as a user's would.
#[test]
fn keys_switch_the_live_layer_and_the_terminal_is_restored() {
    use std::os::fd::{FromRawFd, OwnedFd};
    if !root_or_skip("keys_switch_the_live_layer_and_the_terminal_is_restored") {
        return;
    }
    let _serial = serial();
    let (mut master_fd, mut slave_fd) = (0, 0);
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty fills two descriptors, which are owned below.
    let rc = unsafe {
        libc::openpty(
            &mut master_fd,
            &mut slave_fd,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned nowhere else.
    let (master, slave) = unsafe {
        (
            OwnedFd::from_raw_fd(master_fd),
            OwnedFd::from_raw_fd(slave_fd),
        )
    };
    let mut child = bin()
        .args(["watch", "--duration", "6s", "--interval", "200ms"])
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave.try_clone().unwrap()))
        .spawn()
        .unwrap();
    let mut writer = std::fs::File::from(master.try_clone().unwrap());
    let mut reader = std::fs::File::from(master);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let wait_for = |what: &str| {
        let t = Instant::now();
        while !seen.lock().unwrap().contains(what) {
            assert!(
                t.elapsed() < Duration::from_secs(15),
                "never showed {what:?}: {}",
                seen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for("heatmap: syscalls (keys: s syscalls, b block, c run queue)");
    writer.write_all(b"b").unwrap();
    wait_for("heatmap: block device");
    writer.write_all(b"c").unwrap();
    wait_for("heatmap: run queue");
    let status = child.wait().unwrap();
    assert!(status.success(), "{}", seen.lock().unwrap());
    // Canonical mode and echo are back on the terminal.
    // SAFETY: termios is plain data; tcgetattr fills it for the terminal.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::tcgetattr(slave_fd, &mut t) }, 0);
    assert_ne!(
        t.c_lflag & libc::ICANON,
        0,
        "the terminal was left without ICANON"
    );
    assert_ne!(
        t.c_lflag & libc::ECHO,
        0,
        "the terminal was left without ECHO"
    );
    drop(slave);
}

/// A watch keeps finished intervals encoded, as the results file does: a whole-host watch of
/// 300 intervals stays small (each interval histogram kept decoded was 270 KB per op; a 10 s
/// watch at 10 ms intervals once reached 6 GB).
#[test]
fn memory_stays_flat_over_many_intervals() {
    if !root_or_skip("memory_stays_flat_over_many_intervals") {
        return;
    }
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("w.json");
    let data = data_file(tmp.path(), 8);
    // Some I/O to watch, beside it.
    let mut load = bin()
        .args([
            "run",
            "--target",
            data.to_str().unwrap(),
            "--duration",
            "3s",
        ])
        .args(["--verify", "none", "-q"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The watch's own peak: `VmHWM` after exec (ru_maxrss would carry the test process's).
    let mut watch = bin();
    watch
        .args(["watch", "--duration", "3s", "--interval", "10ms", "--json"])
        .arg(&json);
    let p = common::peak::run(watch, Duration::from_secs(120));
    load.wait().unwrap();
    assert!(p.status.success() && !p.killed, "{}", p.stderr_text());
    let peak_mib = p.peak_kb as f64 / 1024.0;
    let r = Results::read_file(&json).unwrap();
    let intervals = r.runs[0].ops[0].intervals.len();
    let ops: usize = r.runs.iter().map(|x| x.ops.len()).sum();
    assert!(intervals >= 250, "{intervals} intervals");
    assert!(
        peak_mib < 250.0,
        "peak RSS of a child {peak_mib:.0} MiB for {ops} ops × {intervals} intervals"
    );
}

/// Per bar of the HTML report's wall-time chart: (total, interval length, summed heights of its
/// parts in px, px per unit of the y axis).
fn wall_bars(html: &str) -> Vec<(f64, f64, f64, f64)> {
    fn attr<'a>(tag: &'a str, name: &str) -> &'a str {
        let at = tag.find(&format!(" {name}=\"")).expect(name) + name.len() + 3;
        &tag[at..at + tag[at..].find('"').unwrap()]
    }
    let at = html
        .find("<section id=\"wall\">")
        .expect("a wall-time section");
    let svg = &html[at..at + html[at..].find("</svg>").unwrap()];
    let sy: Vec<f64> = attr(svg, "data-sy")
        .split(',')
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    let px_per_unit = (sy[2] - sy[3]) / (sy[1] - sy[0]);
    svg.split("<g class=\"bar\"")
        .skip(1)
        .map(|g| {
            let g = &g[..g.find("</g>").unwrap()];
            let heights: f64 = g
                .split("<rect ")
                .skip(1)
                .map(|r| attr(&format!(" {r}"), "height").parse::<f64>().unwrap())
                .sum();
            (
                attr(g, "data-total").parse().unwrap(),
                attr(g, "data-len").parse().unwrap(),
                heights,
                px_per_unit,
            )
        })
        .collect()
}

/// Issue 23, item 8: a real watch of PostgreSQL under pgbench, twice (the second beside busy
/// loops on every CPU), is shown by every renderer with its answer first: `show` and `export
/// --markdown` open with the verdict and the client backends' wait events, then the wait-event
/// tables; `report` with the verdict, then the wall-time split over time as stacked bars whose
/// parts add up to each interval's thread time (to the 0.001 px the heights are written with);
/// `compare` puts both watches' wall splits and wait-event tables side by side, each difference
/// the one the two files' own sums give.
#[test]
fn pg_watch_is_shown_by_show_report_markdown_and_compare() {
    if !root_or_skip("pg_watch_is_shown_by_show_report_markdown_and_compare") {
        return;
    }
    let Some(dsn) = pg_dsn() else { return };
    if Command::new("pgbench").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "pgbench is missing");
        eprintln!("note: pgbench missing: test skipped");
        return;
    }
    let _serial = serial();
    let init = Command::new("pgbench")
        .args(["-i", "-s", "2", "-q", &dsn])
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let tmp = tempfile::tempdir().unwrap();
    let watch_pgbench = |name: &str, hogs: bool| -> String {
        let json = tmp.path().join(name);
        let hogs = hogs.then(Hogs::start);
        let w = start_watch(&[
            "--comm",
            "postgres",
            "--duration",
            "4s",
            "--json",
            json.to_str().unwrap(),
        ]);
        let bench = Command::new("pgbench")
            .args(["-c", "4", "-j", "2", "-T", "3", &dsn])
            .output()
            .unwrap();
        finish_watch(w, Duration::from_secs(20));
        drop(hogs);
        assert!(
            bench.status.success(),
            "{}",
            String::from_utf8_lossy(&bench.stderr)
        );
        json.to_str().unwrap().to_string()
    };
    let a = watch_pgbench("idle.json", false);
    let b = watch_pgbench("busy.json", true);
    let ra = Results::read_file(Path::new(&a)).unwrap();
    let rb = Results::read_file(Path::new(&b)).unwrap();
    check_accounting(&ra);
    check_accounting(&rb);
    let verdict = &ra
        .analysis
        .as_ref()
        .unwrap()
        .watch
        .as_ref()
        .unwrap()
        .verdicts[0];
    let pg = budget(&ra).pg.expect("no PostgreSQL wait events recorded");
    let backends = pg
        .roles
        .iter()
        .find(|x| x.role == "client backend" && x.server.is_some())
        .expect("no client backend");
    let top_wait = backends
        .rows
        .iter()
        .find(|x| x.kind == PgWaitKind::Wait)
        .expect("the backends waited on nothing");

    // show: the verdict first, in full, with the backends' busiest wait event.
    let text = run_ok(&["--width", "400", "show", &a]);
    let (v, s) = (
        text.find("\nVerdict\n").expect("a verdict section"),
        text.find("\nSummary\n").expect("a summary"),
    );
    assert!(v < s, "{text}");
    let top = &text[v..s];
    assert!(top.contains(&verdict.message), "{top}");
    assert!(top.contains("PostgreSQL client backend"), "{top}");
    assert!(top.contains(&top_wait.event), "{top}");
    assert!(
        text.contains("PostgreSQL wait events: client backend"),
        "{text}"
    );

    // export --markdown: the same order.
    let md_path = tmp.path().join("w.md");
    run_ok(&["export", "--markdown", md_path.to_str().unwrap(), &a]);
    let md = std::fs::read_to_string(&md_path).unwrap();
    let (v, s) = (
        md.find("### Verdict").expect("a verdict section"),
        md.find("### Summary").expect("a summary"),
    );
    assert!(v < s, "{md}");
    assert!(md[v..s].contains(&top_wait.event), "{md}");
    for section in [
        "### Where the watched threads' time went",
        "### PostgreSQL wait events: client backend",
    ] {
        assert!(md.contains(section), "{section}: {md}");
    }

    // report: the verdict in the summary, the wall-time chart next, every bar the sum of its
    // interval's parts, the wait-event tables further down.
    let html_path = tmp.path().join("w.html");
    run_ok(&["report", &a, "-o", html_path.to_str().unwrap()]);
    let html = std::fs::read_to_string(&html_path).unwrap();
    let (v, w, t) = (
        html.find("Verdict: ").expect("a verdict"),
        html.find("<section id=\"wall\">")
            .expect("a wall-time chart"),
        html.find("PostgreSQL wait events: client backend")
            .expect("a wait-event table"),
    );
    assert!(v < w && w < t, "verdict {v}, chart {w}, table {t}");
    let bars = wall_bars(&html);
    let spans: Vec<_> = budget(&ra)
        .intervals
        .into_iter()
        .filter(|s| s.duration_s > 0.0)
        .collect();
    assert_eq!(bars.len(), spans.len());
    for ((total, len, heights, ppu), s) in bars.iter().zip(&spans) {
        let wall = s.wall.wall_s();
        assert!(
            (total - wall).abs() <= 1e-9 * wall.max(1.0),
            "{total} vs {wall}"
        );
        assert!((len - s.duration_s).abs() < 1e-9);
        // Eight parts at most, each height written to 0.001 px.
        let want = wall / s.duration_s * ppu;
        assert!(
            (heights - want).abs() <= 0.008 + 1e-9,
            "interval at {} s: parts {heights} px, its thread time {want} px",
            s.start_s
        );
    }

    // compare: both watches side by side, the differences those of the files' own sums.
    let text = run_ok(&["--width", "400", "compare", &a, &b]);
    for title in [
        "Where the watched threads' time went",
        "PostgreSQL wait events: client backend",
    ] {
        assert!(text.contains(title), "{title}: {text}");
    }
    let wall = |r: &Results| {
        let mut w = iolens::results::WallSplit::default();
        for s in &budget(r).intervals {
            w.add(&s.wall);
        }
        w
    };
    let (wa, wb) = (wall(&ra), wall(&rb));
    let d = (wb.runnable_s / wb.wall_s() - wa.runnable_s / wa.wall_s()) * 100.0;
    let want = if d.abs() < 0.05 {
        "0".to_string()
    } else {
        format!("{d:+.1} pts")
    };
    let row = text
        .lines()
        .find(|l| l.starts_with("waiting for a CPU "))
        .expect("a CPU-wait row");
    assert!(row.trim_end().ends_with(&want), "{row:?}, want {want}");
    let cmp_path = tmp.path().join("cmp.html");
    run_ok(&["compare", &a, &b, "-o", cmp_path.to_str().unwrap()]);
    let cmp = std::fs::read_to_string(&cmp_path).unwrap();
    assert!(cmp.contains("<section id=\"watch\">"), "no watch section");
    assert_eq!(cmp.matches(": wall time</title>").count(), 2);
}

/// /proc/diskstats of block device `name`: milliseconds spent reading (summed over requests) and
/// milliseconds with a request in flight (`io_ticks`).
fn disk_read_ms(name: &str) -> (u64, u64) {
    let stats = std::fs::read_to_string("/proc/diskstats").unwrap();
    for line in stats.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(2) == Some(&name) {
            return (f[6].parse().unwrap(), f[12].parse().unwrap());
        }
    }
    panic!("{name} is not in /proc/diskstats");
}

/// A process reading `count` blocks of 8 KiB of `dev` with O_DIRECT, one at a time, with
/// `preadv` (a traced syscall; `dd` uses `read`), in the cgroup of `limit` when given, watched
/// by pid from before its first read to its exit: the results, the device's /proc/diskstats
/// read seconds over the run, and how busy the host's CPUs were (0..1).
fn watched_direct_reads(
    dev: &common::slowdev::SlowDevice,
    count: u32,
    limit: Option<&common::iolimit::IoLimit>,
    json: &Path,
) -> (Results, f64, f64) {
    let script = format!(
        "import os, mmap\n\
         fd = os.open('{}', os.O_RDONLY | os.O_DIRECT)\n\
         buf = mmap.mmap(-1, 8192)\n\
         for i in range({count}):\n    assert os.preadv(fd, [buf], i * 8192) == 8192\n",
        dev.dev
    );
    let mut reader = Gated::new_in(&["python3", "-c", &script], limit);
    let pid = reader.pid().to_string();
    let w = start_watch(&["--pid", &pid, "--json", json.to_str().unwrap()]);
    let (ms0, _) = disk_read_ms(&dev.name);
    let cpu0 = cpu_times();
    reader.go();
    reader.wait();
    let (ms1, _) = disk_read_ms(&dev.name);
    let cpu1 = cpu_times();
    finish_watch(w, Duration::from_secs(20));
    let busy = 1.0 - (cpu1.0 - cpu0.0) as f64 / (cpu1.1 - cpu0.1).max(1) as f64;
    (
        Results::read_file(json).unwrap(),
        (ms1 - ms0) as f64 / 1e3,
        busy,
    )
}

/// Experiment (b) of issue 23, a known answer: uncached reads of a device that is slow by
/// construction (every read of the loop device waits 2 ms in a FUSE daemon), one at a time,
/// CPUs idle. The verdict is the storage, neither the CPU nor a cgroup; the watched thread's
/// time with its request in the device agrees with the device's own /proc/diskstats read time
/// over the run within 10 % (requests one at a time: their summed time is the union); the
/// accounting invariants hold.
#[test]
fn reads_of_a_slow_device_are_the_storage_as_diskstats_say() {
    if !root_or_skip("reads_of_a_slow_device_are_the_storage_as_diskstats_say") {
        return;
    }
    let _serial = serial();
    let Some(dev) = common::slowdev::SlowDevice::new(Duration::from_millis(2), 64 << 20) else {
        return;
    };
    // Let udev's probe of the new device pass before counting.
    std::thread::sleep(Duration::from_millis(500));
    let tmp = tempfile::tempdir().unwrap();
    let (r, disk_s, cpu_busy) = watched_direct_reads(&dev, 400, None, &tmp.path().join("b.json"));
    check_accounting(&r);
    let a = r.analysis.as_ref().unwrap().watch.as_ref().unwrap();
    let o = &a.overall;
    let device_s = o.device * o.io_s;
    eprintln!(
        "slow device {}: watched device time {device_s:.3} s (share {:.3} of {:.3} s in I/O, \
         queue {:.3}), diskstats {disk_s:.3} s; host CPUs {cpu_busy:.2} busy; verdicts {:?}",
        dev.name,
        o.device,
        o.io_s,
        o.host_queue,
        a.verdicts.iter().map(|v| &v.message).collect::<Vec<_>>()
    );
    assert!(
        (device_s - disk_s).abs() <= 0.10 * disk_s,
        "device time {device_s:.3} s against diskstats {disk_s:.3} s"
    );
    // Each read waited at least the delay, in the device.
    assert!(
        disk_s >= 400.0 * 0.002,
        "diskstats {disk_s} s for 400 reads of ≥ 2 ms"
    );
    let kinds: Vec<VerdictKind> = a.verdicts.iter().map(|v| v.kind).collect();
    assert!(
        !kinds.contains(&VerdictKind::CgroupLimit),
        "no cgroup limits these reads: {:?}",
        a.verdicts
    );
    if cpu_busy > 0.5 {
        eprintln!("note: verdict not judged: the host's CPUs were {cpu_busy:.2} busy");
        return;
    }
    assert_eq!(
        o.verdict,
        Some(VerdictKind::StorageBound),
        "{:?}",
        a.verdicts
    );
    assert_eq!(kinds[0], VerdictKind::StorageBound, "{:?}", a.verdicts);
    assert!(!kinds.contains(&VerdictKind::CpuBound), "{:?}", a.verdicts);
}

/// Experiment (b′) of issue 23: the same reads under a cgroup I/O limit of 100 reads per second
/// (blk-throttle, which holds bios above the block layer before they become requests). The
/// verdict names the limit — the cgroup, `riops=100`, the throttled share — and not the device;
/// the rate it reports is the limit's; the accounting invariants hold.
#[test]
fn reads_held_by_a_cgroup_limit_name_the_limit_not_the_device() {
    if !root_or_skip("reads_held_by_a_cgroup_limit_name_the_limit_not_the_device") {
        return;
    }
    let _serial = serial();
    let Some(dev) = common::slowdev::SlowDevice::new(Duration::from_millis(2), 64 << 20) else {
        return;
    };
    std::thread::sleep(Duration::from_millis(500));
    let Some(limit) = common::iolimit::IoLimit::new(&dev.dev, Some(100), None) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (r, disk_s, cpu_busy) =
        watched_direct_reads(&dev, 200, Some(&limit), &tmp.path().join("b2.json"));
    check_accounting(&r);
    let a = r.analysis.as_ref().unwrap().watch.as_ref().unwrap();
    let o = &a.overall;
    eprintln!(
        "limited: device share {:.3}, above {:.3} of {:.3} s in I/O; diskstats {disk_s:.3} s; \
         cgroups {:?}; verdicts {:?}",
        o.device,
        o.above_block,
        o.io_s,
        budget(&r).cgroups,
        a.verdicts.iter().map(|v| &v.message).collect::<Vec<_>>()
    );
    let cg = limit.path().file_name().unwrap().to_str().unwrap();
    let found = limiting_cgroup(&r, &limit);
    assert_eq!(found.limits[0].riops, Some(100), "{found:?}");
    assert_eq!(found.limits[0].disk, dev.name);
    assert!(
        a.verdicts
            .iter()
            .all(|v| v.kind != VerdictKind::StorageBound),
        "{:?}",
        a.verdicts
    );
    // "Idle" means idle: a reader starved of CPU by others issues fewer reads than the limit
    // lets through, and the CPU is then rightly the answer.
    if cpu_busy > 0.5 {
        eprintln!("note: verdict not judged: the host's CPUs were {cpu_busy:.2} busy");
        return;
    }
    let v = &a.verdicts[0];
    assert_eq!(v.kind, VerdictKind::CgroupLimit, "{:?}", a.verdicts);
    assert_eq!(o.verdict, Some(VerdictKind::CgroupLimit));
    assert!(
        v.message.contains(cg) && v.message.contains("riops=100"),
        "{}",
        v.message
    );
    // The rate it ran at is the limit's (blk-throttle's slices round it a little).
    let rate = v.figures["cgroup_rate"];
    assert!((80.0..=110.0).contains(&rate), "{rate} reads per second");
    // Most of the I/O time was held before the device; the device is not blamed.
    assert!(v.figures["throttled_share"] >= 0.5, "{:?}", v.figures);
}

/// Drops a relation file's pages from the page cache, once written out (POSIX_FADV_DONTNEED
/// drops only clean pages), so the next reads of it go to the device.
fn evict_file(path: &str) {
    use std::os::fd::AsRawFd;
    for p in std::iter::once(path.to_string()).chain((1..64).map(|i| format!("{path}.{i}"))) {
        let Ok(f) = std::fs::File::open(&p) else {
            break;
        };
        f.sync_all().unwrap();
        // SAFETY: a valid descriptor; advice only.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
}

/// Issue 23, item 3: with `--dsn`, the watched server processes' I/O is named by relation, from
/// the catalog of the database the files belong to (a database other than the DSN's, so it
/// must connect to that one). Two tables whose uncached reads differ by construction: A holds
/// four times B's rows of the same width, both larger than a quarter of shared_buffers (so a
/// sequential scan, `count(pad)`, reads every block through a small ring: one pread64 per
/// block; parallel workers off), both evicted
/// from shared_buffers (a filler table loaded after them) and from the page cache. A must rank
/// first with 4× B's blocks read, each relation's blocks read must equal PostgreSQL's own count
/// (`pg_statio_user_tables.heap_blks_read`; tolerance: the statistics flush at transaction end
/// and at exit, both inside the window, so 1 % and a few blocks), and the index read by an
/// index-only scan must be named as an index. Query ids are sampled (a query that lasts 0.5 s
/// is seen). Without --dsn the files are named by their paths and the output says why.
#[test]
fn postgres_io_is_named_by_relation() {
    if !root_or_skip("postgres_io_is_named_by_relation") {
        return;
    }
    let Some(base) = pg_dsn() else {
        return;
    };
    let _serial = serial();
    // PostgreSQL 15: each backend reads its own blocks.
    relations_named(&base, 15, "sync");
    // PostgreSQL 18, io_method=worker: IO workers do the reads; io_method=io_uring: the
    // backend submits them to its io_uring, the kernel does them.
    for (var, dir, method) in [
        ("IOLENS_PG18_DSN", "worker", "worker"),
        ("IOLENS_PG18_URING_DSN", "uring", "io_uring"),
    ] {
        let dsn = std::env::var(var).ok().or_else(|| {
            std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/pg18/{dir}/dsn")),
            )
            .ok()
            .map(|s| s.trim().to_string())
        });
        match dsn {
            Some(d) if postgres::Client::connect(&d, postgres::NoTls).is_ok() => {
                relations_named(&d, 18, method)
            }
            _ => {
                assert!(
                    std::env::var("IOLENS_PG_TESTS").as_deref() != Ok("1"),
                    "IOLENS_PG_TESTS=1 but no PostgreSQL 18 with io_method={method}: run \
                     scripts/pg18-test-server.sh"
                );
                eprintln!("note: PostgreSQL 18 io_method={method} skipped (no {var} server)");
            }
        }
    }
}

/// Known reads of known relations on server `base` (PostgreSQL `major`), watched: each
/// relation's row has the blocks PostgreSQL counted, and says who read them (15: the client
/// backend; 18 with io_method=worker: the IO workers, the backend waiting on IO:AioIoCompletion;
/// 18 with io_method=io_uring: the backend's io_uring, the requests traced from their
/// submission to their completion).
fn relations_named(base: &str, major: u32, method: &str) {
    let name = "iolens_rel_test";
    let mut admin = postgres::Client::connect(base, postgres::NoTls).unwrap();
    for sql in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        admin.batch_execute(&sql).unwrap();
    }
    // No session of this test stays in the DSN's database during the watches: the one there is
    // iolens' own (its query-id sampler), which must not be counted.
    drop(admin);
    let dsn = format!("{base} dbname={name}");
    let mut c = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    // B: 1,250 blocks (10 MB); A: 5,000. Autovacuum off: nothing else reads them. The filler,
    // loaded last through shared_buffers (16 MB), evicts A's and B's pages from it.
    for sql in [
        "CREATE TABLE rel_a (id int, pad text) WITH (autovacuum_enabled = off, fillfactor = 100)",
        "CREATE TABLE rel_b (id int, pad text) WITH (autovacuum_enabled = off, fillfactor = 100)",
        "INSERT INTO rel_b SELECT g, repeat('x', 200) FROM generate_series(1, 40000) g",
        "INSERT INTO rel_a SELECT g, repeat('x', 200) FROM generate_series(1, 160000) g",
        "CREATE INDEX rel_a_id ON rel_a (id)",
        "VACUUM (ANALYZE) rel_a, rel_b",
        "CHECKPOINT",
        "CREATE TABLE filler (pad text) WITH (autovacuum_enabled = off)",
        "INSERT INTO filler SELECT repeat('y', 200) FROM generate_series(1, 100000)",
        "CHECKPOINT",
    ] {
        c.batch_execute(sql).unwrap();
    }
    let file = |c: &mut postgres::Client, rel: &str| -> String {
        c.query_one(
            "SELECT current_setting('data_directory') || '/' || pg_relation_filepath($1::text::regclass)",
            &[&rel],
        )
        .unwrap()
        .get(0)
    };
    let blocks = |c: &mut postgres::Client, rel: &str| -> i64 {
        c.query_one(
            "SELECT pg_relation_size($1::text::regclass) / 8192",
            &[&rel],
        )
        .unwrap()
        .get(0)
    };
    let (size_a, size_b) = (blocks(&mut c, "rel_a"), blocks(&mut c, "rel_b"));
    for rel in ["rel_a", "rel_b", "rel_a_id"] {
        evict_file(&file(&mut c, rel));
    }
    let statio = |c: &mut postgres::Client| -> (i64, i64, i64) {
        let r = c
            .query_one(
                "SELECT (SELECT heap_blks_read FROM pg_statio_user_tables WHERE relname = 'rel_a'),
                        (SELECT heap_blks_read FROM pg_statio_user_tables WHERE relname = 'rel_b'),
                        (SELECT idx_blks_read FROM pg_statio_user_indexes
                          WHERE indexrelname = 'rel_a_id')",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    // The setup's own reads (VACUUM, ANALYZE) reach the statistics only when its session
    // flushes them (at most once a second, and at its exit): end it first, or they land
    // between `before` and `after` (in CI: A 16,626 "read" for 4,706 traced).
    drop(c);
    std::thread::sleep(Duration::from_millis(700));
    let mut c = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    let before = statio(&mut c);
    // The server's postmaster: its pid is the first line of postmaster.pid.
    let data_dir: String = c
        .query_one("SELECT current_setting('data_directory')", &[])
        .unwrap()
        .get(0);
    let postmaster: u32 = std::fs::read_to_string(format!("{data_dir}/postmaster.pid"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    drop(c);

    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("rel.json");
    // The DSN names the test server's own database: the files are in another. The watch is
    // ended (Ctrl-C) once the queries are done, so it covers all of their reads however long
    // the uncached reads take on this machine (a fixed duration cut them short in CI).
    let w = start_watch(&[
        "--comm",
        "postgres",
        "--dsn",
        base,
        "--duration",
        "300s",
        "--json",
        json.to_str().unwrap(),
    ]);
    let mut s = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    s.batch_execute(
        "SET compute_query_id = on; SET max_parallel_workers_per_gather = 0;
         SELECT count(pad) FROM rel_a;
         SELECT count(pad) FROM rel_b;
         SET enable_seqscan = off; SET enable_bitmapscan = off;
         SELECT count(*) FROM rel_a WHERE id <= 100000;
         SELECT pg_sleep(0.5);",
    )
    .unwrap();
    // A relation written (the checkpointer writes its blocks) and dropped during the watch:
    // the catalog cannot name it at the end; its row must say it was dropped. The second
    // checkpoint removes its emptied first segment.
    s.batch_execute(
        "CREATE TABLE rel_gone WITH (autovacuum_enabled = off) AS
           SELECT g, repeat('z', 200) AS pad FROM generate_series(1, 20000) g;
         CHECKPOINT;
         DROP TABLE rel_gone;
         CHECKPOINT;",
    )
    .unwrap();
    drop(s);
    interrupt_watch(w, Duration::from_secs(60));
    // The session's statistics are flushed at its exit.
    std::thread::sleep(Duration::from_millis(700));
    let mut c = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    let after = statio(&mut c);
    let b_file = file(&mut c, "rel_b");
    drop(c);

    // The same without --dsn: the files by their paths, and the output says why. The session
    // reads B's blocks (uncached again) and ends at once: its files are closed, and with
    // io_uring its burst of reads may still be in the ring, before the watch reads their
    // events. They are named all the same (the kernel side reads each I/O's file; the file is
    // found in the server's data directory, not among its reader's descriptors), and its role
    // is its title as it exited.
    evict_file(&b_file);
    let mut c = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    let before_b = statio(&mut c).1;
    drop(c);
    std::thread::sleep(Duration::from_millis(700));
    let json2 = tmp.path().join("rel-nodsn.json");
    let w = start_watch(&[
        "--comm",
        "postgres",
        "--duration",
        "3s",
        "--json",
        json2.to_str().unwrap(),
    ]);
    // B is larger than a quarter of shared_buffers: a sequential scan reads it again.
    let mut s = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    s.batch_execute("SET max_parallel_workers_per_gather = 0; SELECT count(pad) FROM rel_b;")
        .unwrap();
    drop(s);
    finish_watch(w, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(700));
    let mut c = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    let truth_b2 = statio(&mut c).1 - before_b;
    drop(c);
    let mut admin = postgres::Client::connect(base, postgres::NoTls).unwrap();
    let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));

    let r = Results::read_file(&json).unwrap();
    // iolens' own connection (the query-id sampler's, to the DSN's database, which no other
    // session of this test uses during the watch) is not among the server's backends.
    let dsn_db = base
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("dbname="))
        .unwrap();
    let waits = budget(&r).pg.expect("wait events of the watched server");
    let own: Vec<_> = waits
        .roles
        .iter()
        .filter(|x| {
            x.server == Some(postmaster)
                && x.session
                    .as_deref()
                    .is_some_and(|s| s.ends_with(&format!("@{dsn_db}")))
        })
        .collect();
    assert!(own.is_empty(), "iolens' own backend counted: {own:#?}");
    let rel = budget(&r).relations.expect("relations with --dsn");
    let gone: Vec<_> = rel
        .rows
        .iter()
        .filter(|x| x.kind == "relation dropped or rewritten during the watch")
        .collect();
    assert!(
        gone.iter()
            .any(|x| x.name.ends_with("(dropped)") && x.writes > 0),
        "the dropped relation is not named as such: {:#?}",
        rel.rows
    );
    assert!(
        rel.resolved.iter().any(|d| d.starts_with(name)),
        "the files' database was not read: {:?} {:?}",
        rel.resolved,
        rel.notes
    );
    let row = |n: &str, fork: &str| {
        rel.rows
            .iter()
            .position(|x| x.name == n && x.fork == fork)
            .unwrap_or_else(|| panic!("no row {n} ({fork}): {:#?}", rel.rows))
    };
    let (ia, ib, ii) = (
        row("public.rel_a", "main"),
        row("public.rel_b", "main"),
        row("public.rel_a_id", "main"),
    );
    let (a, b, i) = (&rel.rows[ia], &rel.rows[ib], &rel.rows[ii]);
    assert_eq!(a.kind, "table");
    assert_eq!(a.database.as_deref(), Some(name));
    assert_eq!(i.kind, "index on rel_a", "{i:?}");
    // A first of every relation (WAL and others aside: this load writes nothing of its own).
    // Rows rank by the time waited. A's reads wait longer than B's (4 times its blocks)
    // where each read is a system call (15: 0.065 s against 0.019 s in CI; 18 worker: the
    // IO workers' preads). Through io_uring the time is each request's, submission to
    // completion, of requests in flight together and partly met by readahead: it follows the
    // device's moments, not the blocks (a CI run under foreign disk writes: A's 675 requests
    // 0.0132 s, B's 171 0.0135 s). There A is first by the bytes read.
    let tables = || {
        rel.rows
            .iter()
            .enumerate()
            .filter(|(_, x)| x.kind == "table" || x.kind.starts_with("index"))
    };
    let first = if method == "io_uring" {
        tables().max_by_key(|(_, x)| x.read_bytes).unwrap().0
    } else {
        tables().next().unwrap().0
    };
    assert_eq!(first, ia, "A does not rank first: {:#?}", rel.rows);
    let (blocks_a, blocks_b, blocks_i) = (
        (a.read_bytes / 8192) as i64,
        (b.read_bytes / 8192) as i64,
        (i.read_bytes / 8192) as i64,
    );
    let (truth_a, truth_b, truth_i) = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
    eprintln!(
        "relations: A {blocks_a} blocks read ({:.3} s), B {blocks_b} ({:.3} s), index \
         {blocks_i}; heap_blks_read A {truth_a}, B {truth_b}, idx_blks_read {truth_i}; sizes \
         {size_a} / {size_b}",
        a.syscall_s, b.syscall_s
    );
    for (got, truth, what) in [
        (blocks_a, truth_a, "A"),
        (blocks_b, truth_b, "B"),
        (blocks_i, truth_i, "the index"),
    ] {
        assert!(
            (got - truth).abs() as f64 <= 0.01 * truth as f64 + 5.0,
            "{what}: {got} blocks read by syscalls, PostgreSQL counted {truth}"
        );
    }
    // By construction A's sequential scan read 4× B's blocks (its size over B's, all
    // uncached); the index scan may add heap reads of A (a plain index scan where the
    // visibility map is not all-visible), which PostgreSQL counts too: the ratio expected is
    // PostgreSQL's own, and A's reads are at least its size.
    assert!(
        blocks_a >= size_a - 5,
        "A read {blocks_a} blocks of its {size_a}"
    );
    let ratio = blocks_a as f64 / blocks_b.max(1) as f64;
    let expect = truth_a as f64 / truth_b.max(1) as f64;
    assert!(
        (ratio - expect).abs() <= 0.03 * expect,
        "A/B blocks read {ratio:.3}, expected {expect:.3}"
    );
    assert!(a.syscall_s > b.syscall_s);
    // io_uring requests are no thread's syscall: no device time is charged to them.
    if method != "io_uring" {
        assert!(a.device_s > 0.0 && b.device_s > 0.0);
    }
    // Who read A: on 15 its client backend alone; on 18 (io_method=worker) mostly the IO
    // workers (a backend still reads a block itself when no worker is free).
    let reads_by = |role: &str| {
        a.by_role
            .iter()
            .filter(|x| x.role == role)
            .map(|x| x.reads)
            .sum::<u64>()
    };
    eprintln!("PG {major} ({method}): A's reads by role: {:?}", a.by_role);
    let total: u64 = a.by_role.iter().map(|x| x.reads).sum();
    assert_eq!(total, a.reads, "{:?}", a.by_role);
    let sum_s: f64 = a.by_role.iter().map(|x| x.syscall_s).sum();
    assert!((sum_s - a.syscall_s).abs() < 1e-6, "{:?}", a.by_role);
    if method == "io_uring" {
        // The backend submitted them; the kernel did them (inline or in its iou-wrk threads).
        assert!(
            reads_by("client backend (io_uring)") as f64 >= 0.5 * a.reads as f64,
            "PG {major} ({method}): {:?}",
            a.by_role
        );
        assert_eq!(reads_by("io worker"), 0, "{:?}", a.by_role);
    } else if major >= 18 {
        assert!(
            reads_by("io worker") as f64 >= 0.5 * a.reads as f64,
            "PG {major}: {:?}",
            a.by_role
        );
    } else {
        assert_eq!(reads_by("client backend"), a.reads, "{:?}", a.by_role);
    }
    // The 0.5 s query was seen, by its query id; what is sampled is said.
    assert!(
        rel.queries
            .iter()
            .any(|q| q.samples >= 2 && q.query_id != 0),
        "{:?} {:?}",
        rel.queries,
        rel.query_notes
    );
    assert!(rel.query_notes.iter().any(|n| n.contains("sampled")));
    let text = run_ok(&["show", json.to_str().unwrap()]);
    assert!(text.contains("PostgreSQL I/O by relation") && text.contains("public.rel_a"));

    // Without --dsn: no error, the files by path, and the note once.
    let r = Results::read_file(&json2).unwrap();
    let rel = budget(&r)
        .relations
        .expect("relations by file without --dsn");
    assert!(rel.resolved.is_empty());
    assert_eq!(
        rel.notes.iter().filter(|n| n.contains("--dsn")).count(),
        1,
        "{:?}",
        rel.notes
    );
    let tail = b_file.rsplit("/base/").next().unwrap();
    let b2 = rel
        .rows
        .iter()
        .find(|x| format!("base/{}", tail).starts_with(&x.name) && x.reads > 0)
        .unwrap_or_else(|| panic!("{tail} not among {:#?}", rel.rows));
    let blocks_b2 = (b2.read_bytes / 8192) as i64;
    eprintln!(
        "PG {major} ({method}), a session that ends at once: B {blocks_b2} blocks read, \
         heap_blks_read {truth_b2}; by role {:?}; unnamed {:?}",
        b2.by_role,
        rel.rows
            .iter()
            .find(|x| x.name.contains("closed before"))
            .map(|x| x.reads)
    );
    assert!(
        (blocks_b2 - truth_b2).abs() as f64 <= 0.01 * truth_b2 as f64 + 5.0,
        "a session that ends at once: {blocks_b2} blocks of B named, PostgreSQL counted \
         {truth_b2}: {:#?}",
        rel.rows
    );
    // Its role is known though it was gone before the watch looked (its title at its exit).
    assert!(
        b2.by_role
            .iter()
            .all(|x| x.role.starts_with("client backend") || x.role.starts_with("io worker")),
        "{:?}",
        b2.by_role
    );
    if method == "io_uring" {
        assert!(
            b2.by_role
                .iter()
                .filter(|x| x.role == "client backend (io_uring)")
                .map(|x| x.reads)
                .sum::<u64>() as f64
                >= 0.5 * b2.reads as f64,
            "{:?}",
            b2.by_role
        );
    }
}

/// Issue 23, item 3, known by construction: waiting for the client inside a transaction is
/// database time, outside one it is idle. Three sessions, each its own login role (the tables
/// are per role and session): the holder BEGINs, takes a row lock, and its client then thinks
/// for HOLD s before COMMIT, holding the transaction (and the lock) open; the idle session does
/// nothing for the whole watch; the blocked session UPDATEs the same row and waits for the
/// holder's lock. The watch must charge the holder ≈ HOLD s of `Client:ClientRead (in
/// transaction)` as a wait, in its DB time; the idle session's time all to `Client:ClientRead`,
/// idle, none of it DB time; the blocked session's wait to `Lock:transactionid`. The state is
/// read with the event at every switch-out, so the slice is exact: the holder's in-transaction
/// wait spans from its reply to the UPDATE to the arrival of COMMIT, the client's HOLD plus a
/// round trip and, on a busy host, the backend's run-queue wait after the wakeup (PostgreSQL
/// counts it too: the event is still set). Tolerance: 10 % of each client-timed span. Run idle
/// and with two busy loops per CPU.
#[test]
fn client_wait_inside_a_transaction_is_db_time_outside_it_idle() {
    if !root_or_skip("client_wait_inside_a_transaction_is_db_time_outside_it_idle") {
        return;
    }
    let Some(dsn) = pg_dsn() else { return };
    let _serial = serial();
    for busy in [false, true] {
        let _hogs = busy.then(Hogs::start);
        client_wait_in_transaction(&dsn, busy);
    }
}

fn client_wait_in_transaction(dsn: &str, busy: bool) {
    const HOLD: f64 = 2.5;
    const ROLES: [&str; 3] = ["iolens_holder", "iolens_idle", "iolens_blocked"];
    let mut admin = postgres::Client::connect(dsn, postgres::NoTls).unwrap();
    let mut setup = String::from(
        "DROP TABLE IF EXISTS iolens_iit_t; \
         CREATE TABLE iolens_iit_t (id int PRIMARY KEY, v int); \
         INSERT INTO iolens_iit_t VALUES (1, 0);",
    );
    for r in ROLES {
        setup.push_str(&format!(
            "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{r}') \
             THEN CREATE ROLE {r} LOGIN; END IF; END$$; \
             GRANT SELECT, UPDATE ON iolens_iit_t TO {r};"
        ));
    }
    admin.batch_execute(&setup).unwrap();
    let server = server_pid(&mut admin);
    let database: String = admin
        .query_one("SELECT current_database()", &[])
        .unwrap()
        .get(0);
    let connect = |role: &str| {
        let mut c =
            postgres::Client::connect(&format!("{dsn} user={role}"), postgres::NoTls).unwrap();
        let pid = server_pid_of(&mut c);
        (c, pid)
    };
    // Connected before the watch: their whole time under it is known.
    let (mut holder, holder_pid) = connect(ROLES[0]);
    let (idle, idle_pid) = connect(ROLES[1]);
    let (mut blocked, _) = connect(ROLES[2]);
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("iit.json");
    let w = start_watch(&[
        "--comm",
        "postgres",
        "--duration",
        "6s",
        "--json",
        json.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(300));
    holder
        .batch_execute("BEGIN; UPDATE iolens_iit_t SET v = v + 1 WHERE id = 1")
        .unwrap();
    let held_from = Instant::now();
    let waiter = std::thread::spawn(move || {
        let t = Instant::now();
        blocked
            .execute("UPDATE iolens_iit_t SET v = v + 1 WHERE id = 1", &[])
            .unwrap();
        (t.elapsed().as_secs_f64(), blocked)
    });
    // The client thinks, its transaction open. Meanwhile the idle session is woken without a
    // statement, as PostgreSQL wakes idle backends to flush their statistics or catch up with
    // invalidations: asked to log its memory contexts, it runs on CPU between two waits for its
    // client and stays idle (the in-kernel sums once counted that slice as database time).
    std::thread::sleep(Duration::from_secs_f64(HOLD / 2.0));
    let signalled: bool = admin
        .query_one(
            "SELECT pg_log_backend_memory_contexts($1)",
            &[&(idle_pid as i32)],
        )
        .unwrap()
        .get(0);
    assert!(signalled, "the idle session was not signalled");
    std::thread::sleep(Duration::from_secs_f64(HOLD / 2.0));
    let held = held_from.elapsed().as_secs_f64();
    holder.batch_execute("COMMIT").unwrap();
    let (waited, blocked) = waiter.join().unwrap();
    finish_watch(w, Duration::from_secs(30));
    drop((holder, idle, blocked));
    let r = Results::read_file(&json).unwrap();
    check_accounting(&r);
    let b = budget(&r);
    let pg = b.pg.clone().expect("no PostgreSQL tables");
    let role_of = |name: &str| {
        let session = format!("{name}@{database}");
        pg.roles
            .iter()
            .find(|x| {
                x.role == "client backend"
                    && x.server == Some(server)
                    && x.session.as_deref() == Some(session.as_str())
            })
            .unwrap_or_else(|| panic!("no client backend {session}: {:?}", pg.roles))
    };
    let time_of = |role: &iolens::results::PgRoleWaits, event: &str, kind: PgWaitKind| {
        role.rows
            .iter()
            .filter(|x| x.event == event && x.kind == kind)
            .map(|x| x.time_s)
            .sum::<f64>()
    };
    let watched = |pid: u32| {
        b.threads
            .iter()
            .filter(|t| t.tid == pid)
            .map(|t| t.watched_s)
            .sum::<f64>()
    };
    let (h, i, k) = (role_of(ROLES[0]), role_of(ROLES[1]), role_of(ROLES[2]));
    let show = |r: &iolens::results::PgRoleWaits| {
        r.rows
            .iter()
            .map(|x| format!("{} {:?} {:.3}", x.event, x.kind, x.time_s))
            .collect::<Vec<_>>()
            .join(", ")
    };
    eprintln!(
        "busy {busy}: held {held:.3} s, blocked {waited:.3} s\n  holder: db {:.3} idle {:.3}: {}\n  \
         idle: db {:.3} idle {:.3} (watched {:.3}): {}\n  blocked: db {:.3} idle {:.3}: {}",
        h.db_s,
        h.idle_s,
        show(h),
        i.db_s,
        i.idle_s,
        watched(idle_pid),
        show(i),
        k.db_s,
        k.idle_s,
        show(k)
    );
    // The holder: its client's think time inside the transaction is a wait, in DB time.
    let in_tx = time_of(h, "Client:ClientRead (in transaction)", PgWaitKind::Wait);
    assert!(
        (in_tx - held).abs() <= 0.1 * held,
        "busy {busy}: in-transaction client wait {in_tx:.3} s, the client held it {held:.3} s"
    );
    // Beyond the client's think time, its DB time is its own named I/O waits (the COMMIT's WAL
    // flush: 0.26 s of IO:WALSync under busy loops in CI) and at most a tenth of the hold.
    let io_waits: f64 = h
        .rows
        .iter()
        .filter(|x| x.event.starts_with("IO:"))
        .map(|x| x.time_s)
        .sum();
    assert!(
        h.db_s >= in_tx && h.db_s <= in_tx + io_waits + 0.1 * held,
        "{h:?}"
    );
    let row = h
        .rows
        .iter()
        .find(|x| x.event == "Client:ClientRead (in transaction)")
        .unwrap();
    assert!(row.share_of_db.unwrap() > 0.8, "{row:?}");
    // Outside its transaction (before BEGIN, after COMMIT) the holder was idle.
    let h_watched = watched(holder_pid);
    assert!(
        (h.idle_s - (h_watched - h.db_s)).abs() <= 0.1 * held,
        "busy {busy}: holder idle {:.3} s of {h_watched:.3} s watched, DB {:.3} s",
        h.idle_s,
        h.db_s
    );
    // The idle session: all its time idle, none of it DB time, none in a transaction.
    let i_watched = watched(idle_pid);
    assert!(i_watched > 5.0, "idle session watched {i_watched:.3} s");
    let i_cpu: f64 = b
        .threads
        .iter()
        .filter(|t| t.tid == idle_pid)
        .map(|t| t.wall.cpu_s + t.wall.io_cpu_s)
        .sum();
    assert!(
        i_cpu > 0.0,
        "busy {busy}: the idle session never ran: {i:?}"
    );
    assert_eq!(i.db_s, 0.0, "busy {busy}: {i:?}");
    assert!(
        (time_of(i, "Client:ClientRead", PgWaitKind::Idle) - i_watched).abs() <= 0.01 * i_watched,
        "busy {busy}: {i:?}"
    );
    // The blocked session: its wait is the lock, not its client.
    let lock = time_of(k, "Lock:transactionid", PgWaitKind::Wait);
    assert!(
        (lock - waited).abs() <= 0.1 * waited,
        "busy {busy}: Lock:transactionid {lock:.3} s, the UPDATE took {waited:.3} s"
    );
    assert_eq!(
        time_of(k, "Client:ClientRead (in transaction)", PgWaitKind::Wait),
        0.0,
        "{k:?}"
    );
    // Shown as DB time by the renderers, idle apart.
    let text = run_ok(&["show", json.to_str().unwrap()]);
    assert!(
        text.contains("Client:ClientRead (in transaction)"),
        "{text}"
    );
    let _ = admin.batch_execute(&format!(
        "DROP TABLE iolens_iit_t; {}",
        ROLES.map(|r| format!("DROP ROLE {r};")).join(" ")
    ));
}

/// The pid of the backend serving connection `c`.
fn server_pid_of(c: &mut postgres::Client) -> u32 {
    let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    pid as u32
}
