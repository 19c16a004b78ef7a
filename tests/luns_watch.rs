//! `--watch` over several targets (issue 27): each target's disk traced on its own. Two "LUNs",
//! loop devices over iolens scratch files served by a FUSE daemon that sleeps a known delay per
//! read (`common::slowdev`), one fast and one slow by construction, each with a 4-request queue.
//! The run's per-target block layer must name the slow one (its device service time at least
//! its delay, the fast one's well under), agree with each device's own `/proc/diskstats` (never
//! more traced reads than the disk completed over the same window; the traced time per read
//! that of the disk's own count), hold the requests in each device as the closed loop puts
//! them there, and add up to the run's block layer.
//!
//! Root only (loop devices, FUSE, BPF): skipped with a note otherwise, except under CI. The
//! tests run one at a time (each builds its own LUNs).

mod common;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::loopdev::Loop;
use common::slowdev::{disk_reads, MountedLun, SlowDevice, MIN_NR_REQUESTS};
use common::{iolens_fifo as iolens, ok};
use serde_json::Value;

/// One test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The fast LUN's and the slow LUN's service time per read.
const FAST: Duration = Duration::from_millis(2);
const SLOW: Duration = Duration::from_millis(8);

/// One LUN with a filesystem mounted (`MountedLun::several`), in `dir`.
fn mounted_lun(dir: &Path, size: &str, delay: Duration) -> Option<MountedLun> {
    MountedLun::several(dir, 1, size, delay, MIN_NR_REQUESTS)?.pop()
}

/// This test's turn (the lock held), a directory, and a LUN mounted in it ([`mounted_lun`]);
/// `None` where it cannot be made, or when not run as root (the test `what` skipped, with a
/// note). Bound in this order, the LUN goes first, then the directory, then the turn.
fn serial_lun(
    what: &str,
    size: &str,
    delay: Duration,
) -> Option<(MutexGuard<'static, ()>, tempfile::TempDir, MountedLun)> {
    let one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    if !common::root_or_skip(what) {
        return None;
    }
    let lun = mounted_lun(dir.path(), size, delay)?;
    Some((one, dir, lun))
}

/// `db setup` of two schemas of `scale` each, in directories `a` and `b`.
fn db_setup(a: &str, b: &str, scale: &str) {
    ok(iolens(&[
        "db",
        "setup",
        "--dir",
        a,
        "--dir",
        b,
        "--schemas",
        "2",
        "--scale",
        scale,
        "-q",
    ]));
}

/// A fast and a slow LUN (in that order), or `None` where they cannot be made.
fn fast_and_slow(dir: &Path) -> Option<[SlowDevice; 2]> {
    let fast = SlowDevice::lun(&dir.join("fast.dat"), "32M", FAST, MIN_NR_REQUESTS)?;
    let slow = SlowDevice::lun(&dir.join("slow.dat"), "32M", SLOW, MIN_NR_REQUESTS)?;
    // Let udev's probes of the new devices pass.
    std::thread::sleep(Duration::from_millis(500));
    Some([fast, slow])
}

fn op<'a>(ops: &'a Value, name: &str) -> Option<&'a Value> {
    ops.as_array()?.iter().find(|o| o["op"] == name)
}

fn count(ops: &Value, name: &str) -> u64 {
    op(ops, name).map_or(0, |o| o["count"].as_u64().unwrap())
}

fn summary(ops: &Value, name: &str, field: &str) -> f64 {
    op(ops, name).unwrap()["summary"][field].as_f64().unwrap()
}

/// Requests in the device on average: Little's law on the traced service times.
fn in_device(block: &Value, secs: f64) -> f64 {
    let ops = &block["ops"];
    count(ops, "blk:read:device") as f64 * summary(ops, "blk:read:device", "mean_ns") / 1e9 / secs
}

/// A disk's reads completed and milliseconds reading (`disk_reads`).
type Reads = (u64, u64);

/// What each target's traced block layer says against its disk's own count, for a run's
/// `targets` over `devs` (in order), `before`/`after` the test's own reads of /proc/diskstats
/// around the command, each target having traced more than `floor` reads; returns each target's
/// traced device p50 (ns) and requests in the device.
fn check_targets(
    run: &Value,
    devs: &[&SlowDevice],
    (before, after): (&[Reads], &[Reads]),
    floor: u64,
) -> Vec<(f64, f64)> {
    let secs = run["duration_s"].as_f64().unwrap();
    let targets = run["targets"].as_array().unwrap();
    assert_eq!(targets.len(), devs.len(), "{run}");
    let mut out = Vec::new();
    for (i, (t, d)) in targets.iter().zip(devs).enumerate() {
        let b = &t["block"];
        assert_eq!(b["device"], d.name.as_str(), "target {i}'s block layer");
        let traced = count(&b["ops"], "blk:read:device");
        let disk = t["device"]["reads"].as_u64().unwrap();
        let whole = after[i].0 - before[i].0;
        let lost: u64 = b["lost"]
            .as_object()
            .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
        // The disk's traced time per read against its own: diskstats' read time runs from the
        // request's start to its completion, the traced host queue plus device service.
        let await_disk = t["device"]["read_await_us"].as_f64().unwrap() * 1e3;
        let traced_mean = summary(&b["ops"], "blk:read:device", "mean_ns")
            + op(&b["ops"], "blk:read:queue")
                .map_or(0.0, |o| o["summary"]["mean_ns"].as_f64().unwrap());
        let p50 = summary(&b["ops"], "blk:read:device", "p50_ns");
        let held = in_device(b, secs);
        eprintln!(
            "{} ({:?} a read): traced {traced} reads (lost {lost}), the disk {disk} over the \
             run's window, {whole} over the command; device p50 {:.2} ms, traced queue + \
             device {:.2} ms a read against the disk's {:.2} ms; {held:.2} in the device",
            d.name,
            d.delay,
            p50 / 1e6,
            traced_mean / 1e6,
            await_disk / 1e6
        );
        // The trace and the disk's counters are taken over one window (opened before the
        // first I/O, closed after the last): every traced read is one the disk completed.
        // After a warm-up (a calibration's steps) the disk's window opens when the driver
        // sees measurement begin, a few ms after the trace's base: the reads completing in
        // between are traced and not in the window (allowed: those of 25 ms, and one).
        let warm = run["spec"]["warmup_s"].as_f64().unwrap_or(0.0) > 0.0;
        let gap = if warm {
            (traced as f64 / secs * 0.025).ceil() as u64 + 1
        } else {
            0
        };
        assert!(
            traced <= disk + gap,
            "{traced} traced > {disk} on the disk (+ {gap})"
        );
        assert!(
            disk <= whole,
            "{disk} in the window > {whole} over the command"
        );
        // The probes miss a completion now and then (counted in `lost`).
        assert!(
            traced + lost >= disk * 95 / 100,
            "traced {traced} + lost {lost} of {disk}"
        );
        assert!(traced > floor, "{traced} reads traced");
        // Every read waits at least its delay in the device (the daemon sleeps it).
        assert!(
            p50 >= d.delay.as_nanos() as f64,
            "device p50 {p50} under the delay {:?}",
            d.delay
        );
        // Two views of the same reads' time agree (within 15 %: the disk's clock starts a
        // request a little before the probe sees it start).
        assert!(
            (traced_mean - await_disk).abs() <= 0.15 * await_disk,
            "traced {traced_mean} ns a read, the disk {await_disk}"
        );
        out.push((p50, held));
    }
    out
}

/// The run's block layer is its targets' (on `devs`, in order) summed, op by op.
fn adds_up(run: &Value, devs: &[&SlowDevice]) {
    let targets = run["targets"].as_array().unwrap();
    for name in ["blk:read:device", "blk:read:queue"] {
        let sum: u64 = targets
            .iter()
            .map(|t| count(&t["block"]["ops"], name))
            .sum();
        assert_eq!(count(&run["block"]["ops"], name), sum, "{name}");
    }
    let names: Vec<&str> = devs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(run["block"]["device"], names.join(" + ").as_str());
}

/// `show` of the results file `json` details each target's block view, returns its text.
fn shows_each_target(json: &Path, devs: &[&SlowDevice]) -> String {
    let show = ok(common::bin()
        .arg("show")
        .arg(json)
        .args(["--width", "250"])
        .output()
        .unwrap());
    let text = String::from_utf8_lossy(&show.stdout).to_string();
    for w in ["block reads", "device p50", "in device"]
        .into_iter()
        .chain(devs.iter().map(|d| d.name.as_str()))
    {
        assert!(text.contains(w), "show lacks {w}:\n{text}");
    }
    text
}

/// Two LUNs (fast, slow), `iolens ARGS --target fast --target slow --watch` writing its results
/// to `out` in `dir`, and each disk's reads before and after the command.
struct Watched {
    devs: [SlowDevice; 2],
    json: std::path::PathBuf,
    r: Value,
    before: Vec<Reads>,
    after: Vec<Reads>,
}

impl Watched {
    fn run(dir: &Path, args: &[&str], out: &str) -> Option<Watched> {
        let devs = fast_and_slow(dir)?;
        let json = dir.join(out);
        let before: Vec<Reads> = devs.iter().map(|d| disk_reads(&d.name)).collect();
        let mut all: Vec<&str> = args.to_vec();
        for d in &devs {
            all.extend(["--target", d.dev.as_str()]);
        }
        all.extend(["--watch", "--no-progress", "--json", json.to_str().unwrap()]);
        ok(iolens(&all));
        let after: Vec<Reads> = devs.iter().map(|d| disk_reads(&d.name)).collect();
        let r = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        Some(Watched {
            devs,
            json,
            r,
            before,
            after,
        })
    }

    fn devs(&self) -> [&SlowDevice; 2] {
        [&self.devs[0], &self.devs[1]]
    }

    /// [`check_targets`] on `run`, then: the slow LUN named slow by its own trace (4 × the
    /// fast one's delay by construction), and the requests in each device those of the closed
    /// loop of `sessions` (each session's reads go to either LUN alike, striped by offset, so
    /// the sessions spend 4 times as long in the slow one: theory 0.8 and 0.2 of each session,
    /// the two together no more than the sessions); the run's block layer their sum.
    fn names_the_slow_one(&self, run: &Value, sessions: f64, floor: u64) {
        let devs = self.devs();
        let seen = check_targets(run, &devs, (&self.before, &self.after), floor);
        let ((fast_p50, fast_held), (slow_p50, slow_held)) = (seen[0], seen[1]);
        assert!(
            fast_p50 < 0.6 * slow_p50,
            "fast {fast_p50} ns, slow {slow_p50} ns"
        );
        assert!(
            slow_held > 2.0 * fast_held,
            "{slow_held:.2} vs {fast_held:.2}"
        );
        assert!(
            slow_held + fast_held <= sessions * 1.05,
            "{slow_held:.2} + {fast_held:.2} of {sessions} sessions"
        );
        adds_up(run, &devs);
    }
}

/// A run striped over a fast and a slow LUN with `--watch`: each target's traced block layer
/// is its own disk's, names the slow one, agrees with its /proc/diskstats, and the run's block
/// layer is their exact sum.
#[test]
fn a_watched_run_over_two_luns_traces_each_and_names_the_slow_one() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let args = ["run", "--sessions", "4", "--duration", "3s"];
    let Some(w) = Watched::run(dir.path(), &args, "run.json") else {
        return;
    };
    w.names_the_slow_one(&w.r["runs"][0], 4.0, 100);
    shows_each_target(&w.json, &w.devs());
}

/// `calibrate --watch` over a fast and a slow LUN: each step of the session ramp traces each
/// target's disk on its own. Every step's per-target reads agree with the disk's own count, its
/// device time is each LUN's known delay (the slow one named by its trace), the requests it
/// holds in each device are the closed loop's (the slow LUN about 4 times the fast one's, the
/// two no more than the step's sessions), and the step's block layer is the targets' sum; the
/// steps' disk windows do not overlap (together no more reads than the disk did over the
/// command); `show` details the targets. A plan from it, verified with `--watch`, traces its
/// confirmation run's LUN.
#[test]
fn a_watched_calibration_over_two_luns_traces_each_step_per_target() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "calibrate",
        "--phases",
        "randread",
        "--max-sessions",
        "4",
        "--budget",
        "6s",
        "--max-latency",
        "500ms",
    ];
    let Some(w) = Watched::run(dir.path(), &args, "cal.json") else {
        return;
    };
    let runs = w.r["runs"].as_array().unwrap();
    assert!(runs.len() >= 2, "{} steps", runs.len());
    let mut windows = [0u64; 2];
    for run in runs {
        let sessions = run["spec"]["sessions"].as_f64().unwrap();
        eprintln!(
            "step of {sessions} sessions, {:.2} s:",
            run["duration_s"].as_f64().unwrap()
        );
        // Steps of about 1 s (6 s over the ramp's steps): at one session some 80 reads a LUN.
        w.names_the_slow_one(run, sessions, 30);
        for (n, t) in windows.iter_mut().zip(run["targets"].as_array().unwrap()) {
            *n += t["device"]["reads"].as_u64().unwrap();
        }
    }
    let (devs, before, after) = (w.devs(), &w.before, &w.after);
    for (i, n) in windows.iter().enumerate() {
        assert!(
            *n <= after[i].0 - before[i].0,
            "{}: the steps' windows hold {n} reads, the command {}",
            devs[i].name,
            after[i].0 - before[i].0
        );
    }
    shows_each_target(&w.json, &devs);
    // The plan's confirmation run is traced alike: a goal one LUN meets, verified with --watch
    // on the fast LUN, traces that LUN's reads and only those.
    let fast = devs[0];
    let plan = dir.path().join("plan.json");
    let before = disk_reads(&fast.name);
    ok(iolens(&[
        "plan",
        w.json.to_str().unwrap(),
        "--iops",
        "50",
        "--p99",
        "1s",
        "--verify",
        "--verify-duration",
        "1s",
        "--target",
        &fast.dev,
        "--watch",
        "--no-progress",
        "--json",
        plan.to_str().unwrap(),
    ]));
    let whole = disk_reads(&fast.name).0 - before.0;
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let block = &p["runs"][0]["block"];
    let traced = count(&block["ops"], "blk:read:device");
    eprintln!(
        "plan --verify --watch ({} sessions, {:.2} s): traced {traced} reads, the disk {whole}",
        p["plan"]["sessions"]["value"],
        p["runs"][0]["duration_s"].as_f64().unwrap_or(0.0)
    );
    assert_eq!(block["device"], fast.name.as_str(), "{block}");
    // Every read the disk did but the plan's own checks of the device (a few) is traced.
    assert!(
        traced > 0 && traced <= whole && traced + 2 + whole / 20 >= whole,
        "{traced} of {whole}"
    );
}

/// Two targets of a watched run on one disk where one cannot be told from the other (a LUN's
/// device and a new scratch file on its filesystem) are refused by `run` and `calibrate`
/// before anything is made: no scratch file, no results file, the error naming both and the
/// disk, a non-zero exit. Two new scratch files there (both mapped by their extents) are not
/// refused: each is traced on its own.
#[test]
fn watched_targets_on_one_disk_are_refused_before_any_file_is_made() {
    let Some((_one, dir, lun)) = serial_lun("targets on one LUN", "32M", FAST) else {
        return;
    };
    let new = lun.mnt.join("new.dat");
    let refused = dir.path().join("refused.json");
    let (new_s, refused_s) = (new.to_str().unwrap(), refused.to_str().unwrap());
    let common_args = [
        "--target",
        new_s,
        "--target",
        &lun.dev.dev,
        "--size",
        "4M",
        "--watch",
        "--no-progress",
        "--json",
        refused_s,
    ];
    let made = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&lun.mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        v.sort();
        v
    };
    let was = made();
    for cmd in [
        &["run", "--duration", "1s"][..],
        &[
            "calibrate",
            "--phases",
            "randread",
            "--max-sessions",
            "2",
            "--budget",
            "6s",
        ][..],
    ] {
        let args: Vec<&str> = cmd.iter().chain(&common_args).copied().collect();
        let o = iolens(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        eprintln!("{}: {err}", cmd[0]);
        assert!(!o.status.success(), "{}: not refused", cmd[0]);
        for w in [
            "lie on one disk",
            "nothing was created or written",
            new_s,
            lun.dev.dev.as_str(),
            lun.dev.name.as_str(),
        ] {
            assert!(err.contains(w), "{}: the error lacks {w}: {err}", cmd[0]);
        }
        assert!(!new.exists(), "{}: {} made", cmd[0], new.display());
        assert_eq!(made(), was, "{}: files made on the LUN", cmd[0]);
        assert!(!refused.exists(), "{}: results written", cmd[0]);
    }
    // The other side: two new files on the one disk, each mapped by its extents.
    let (a, b) = (lun.mnt.join("a.dat"), lun.mnt.join("b.dat"));
    let json = dir.path().join("two.json");
    let before = disk_reads(&lun.dev.name);
    ok(iolens(&[
        "run",
        "--target",
        a.to_str().unwrap(),
        "--target",
        b.to_str().unwrap(),
        "--size",
        "4M",
        "--sessions",
        "2",
        "--duration",
        "1s",
        "--watch",
        "--no-progress",
        "--json",
        json.to_str().unwrap(),
    ]));
    let whole = disk_reads(&lun.dev.name).0 - before.0;
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let targets = r["runs"][0]["targets"].as_array().unwrap();
    let traced: Vec<u64> = targets
        .iter()
        .map(|t| {
            assert_eq!(t["block"]["device"], lun.dev.name.as_str());
            count(&t["block"]["ops"], "blk:read:device")
        })
        .collect();
    eprintln!(
        "two files on {}: traced {traced:?}, the disk {whole}",
        lun.dev.name
    );
    assert!(traced.iter().all(|&n| n > 20), "{traced:?}");
    assert!(traced.iter().sum::<u64>() <= whole, "{traced:?} > {whole}");
}

/// `db run --engine sqlite --watch` over a directory on each LUN: each directory's disk traced
/// on its own, the slow one named by its trace and every traced read one its disk completed;
/// two directories on one disk cannot be told apart there and are refused before any session.
#[test]
fn a_watched_sqlite_run_over_two_luns_traces_each_and_refuses_two_dirs_on_one_disk() {
    let Some((_one, dir, fast)) = serial_lun("SQLite over loop LUNs", "160M", FAST) else {
        return;
    };
    let sub = dir.path().join("slow");
    std::fs::create_dir(&sub).unwrap();
    let Some(slow) = mounted_lun(&sub, "160M", SLOW) else {
        return;
    };
    let (a, b) = (fast.mnt.join("db"), slow.mnt.join("db"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    db_setup(a_s, b_s, "48M");
    let json = dir.path().join("db.json");
    ok(iolens(&[
        "db",
        "run",
        "--dir",
        a_s,
        "--dir",
        b_s,
        "--sessions",
        "4",
        "--duration",
        "3s",
        "--watch",
        "--json",
        json.to_str().unwrap(),
    ]));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &r["runs"][0];
    let targets = run["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2, "{run}");
    let mut p50 = Vec::new();
    for (t, lun) in targets.iter().zip([&fast, &slow]) {
        let blk = &t["block"];
        assert_eq!(blk["device"], lun.dev.name.as_str());
        let traced = count(&blk["ops"], "blk:read:device");
        let disk = t["device"]["reads"].as_u64().unwrap();
        let p = summary(&blk["ops"], "blk:read:device", "p50_ns");
        eprintln!(
            "{} ({:?}): traced {traced} reads, the disk {disk}; device p50 {:.2} ms",
            lun.dev.name,
            lun.dev.delay,
            p / 1e6
        );
        assert!(traced <= disk, "{traced} traced > {disk} on the disk");
        assert!(traced > 50, "{traced} reads traced");
        assert!(p >= lun.dev.delay.as_nanos() as f64, "device p50 {p}");
        p50.push(p);
    }
    assert!(
        p50[0] < 0.6 * p50[1],
        "fast {} ns, slow {} ns",
        p50[0],
        p50[1]
    );
    let sum: u64 = targets
        .iter()
        .map(|t| count(&t["block"]["ops"], "blk:read:device"))
        .sum();
    assert_eq!(count(&run["block"]["ops"], "blk:read:device"), sum);

    // Two directories on the fast LUN's one disk: refused, saying why, before any session.
    let (c, d) = (fast.mnt.join("c"), fast.mnt.join("d"));
    let (c_s, d_s) = (c.to_str().unwrap(), d.to_str().unwrap());
    db_setup(c_s, d_s, "8M");
    let refused = dir.path().join("refused.json");
    let o = iolens(&[
        "db",
        "run",
        "--dir",
        c_s,
        "--dir",
        d_s,
        "--duration",
        "1s",
        "--watch",
        "--json",
        refused.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("lie on one disk"), "{err}");
    assert!(!refused.exists());
}

/// BPF programs `pid` holds open now, from its /proc/PID/fdinfo (a program's descriptor has a
/// `prog_type` line; bpftool is not needed).
fn bpf_programs(pid: u32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return 0;
    };
    fds.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .filter(|info| info.lines().any(|l| l.starts_with("prog_type:")))
        .count()
}

/// `iolens run --watch` of random reads over the loop devices `devs` for 2 s, its results in
/// `json`: the BPF programs it held while it ran (the count seen most often over the run, so
/// that the loader's short-lived feature probes do not count), and each device's reads before
/// and after.
fn watched_programs(devs: &[&Loop], json: &Path) -> (usize, Vec<u64>, Vec<u64>) {
    let before: Vec<u64> = devs.iter().map(|d| disk_reads(d.name()).0).collect();
    let mut c = common::bin();
    c.args([
        "run",
        "--pattern",
        "randread",
        "--sessions",
        "4",
        "--duration",
        "2s",
    ]);
    c.args(["--watch", "--no-progress", "--json"]).arg(json);
    for d in devs {
        c.args(["--target", &d.0]);
    }
    let mut child = c
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen: std::collections::BTreeMap<usize, u32> = Default::default();
    while child.try_wait().unwrap().is_none() {
        let n = bpf_programs(child.id());
        if n > 0 {
            *seen.entry(n).or_default() += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after: Vec<u64> = devs.iter().map(|d| disk_reads(d.name()).0).collect();
    eprintln!(
        "{} targets: programs held (count: samples) {seen:?}",
        devs.len()
    );
    let most = seen.iter().max_by_key(|(_, &k)| k).map_or(0, |(&n, _)| n);
    (most, before, after)
}

/// One copy of the block-layer probes serves every target of a watched run: a run over four
/// loop devices holds as many BPF programs as a run over one of them (not four times as many),
/// and still traces each target's reads as its own device's (every traced read one the device
/// completed, most of them traced) and sums them into the run's block layer.
#[test]
fn a_watched_run_over_four_targets_loads_the_probes_once() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !common::root_or_skip("a watched run over four loop devices") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut loops = Vec::new();
    for i in 0..4 {
        let f = dir.path().join(format!("lun{i}.dat"));
        common::scratch(&f, 16 << 20, false);
        let Some(l) = Loop::attach(&f) else {
            assert!(std::env::var_os("CI").is_none(), "losetup failed under CI");
            return;
        };
        loops.push(l);
    }
    let _ = std::process::Command::new("udevadm").arg("settle").status();
    let devs: Vec<&Loop> = loops.iter().collect();
    let (one, _, _) = watched_programs(&devs[..1], &dir.path().join("one.json"));
    let json = dir.path().join("four.json");
    let (four, before, after) = watched_programs(&devs, &json);
    assert!(one > 0, "no BPF program seen under a watched run");
    assert_eq!(
        four, one,
        "programs of a 4-target watch against a 1-target one"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &r["runs"][0];
    let targets = run["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 4, "{run}");
    let mut sum = 0;
    for (i, (t, d)) in targets.iter().zip(&devs).enumerate() {
        let b = &t["block"];
        assert_eq!(b["device"], d.name(), "target {i}'s block layer");
        let traced = count(&b["ops"], "blk:read:device");
        let disk = after[i] - before[i];
        let done = t["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["count"].as_u64().unwrap())
            .sum::<u64>();
        eprintln!(
            "{}: traced {traced} reads, iolens {done}, the disk {disk}",
            d.0
        );
        // Every traced read is one the disk completed over the command; the run's own reads
        // (measured ones; the warm-up and the ends are not traced) are most of them.
        assert!(traced <= disk, "{}: {traced} traced > {disk}", d.0);
        assert!(
            traced * 10 >= done * 9,
            "{}: {traced} traced of {done}",
            d.0
        );
        sum += traced;
    }
    assert_eq!(count(&run["block"]["ops"], "blk:read:device"), sum);
}

/// More targets than the probes hold (64) are refused by a watched `run` before any target is
/// made: a non-zero exit naming the limit, no scratch file, no results file. The same run
/// without `--watch` is not refused.
#[test]
fn more_targets_than_the_probes_hold_are_refused_before_any_file_is_made() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !common::root_or_skip("65 watched targets") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("refused.json");
    let paths: Vec<String> = (0..65)
        .map(|i| dir.path().join(format!("t{i}.dat")).display().to_string())
        .collect();
    let mut args: Vec<&str> = vec!["run", "--size", "1M", "--duration", "1s", "--no-progress"];
    for p in &paths {
        args.extend(["--target", p.as_str()]);
    }
    let plain = args.clone();
    args.extend(["--watch", "--json", json.to_str().unwrap()]);
    let o = iolens(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "65 watched targets not refused");
    for w in [
        "at most 64 targets",
        "not 65",
        "nothing was created or written",
    ] {
        assert!(err.contains(w), "the error lacks {w}: {err}");
    }
    let made: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(made.is_empty(), "files made: {made:?}");
    // Not a refusal of 65 targets as such: without --watch the run goes on and makes them.
    ok(iolens(&plain));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 65);
}
