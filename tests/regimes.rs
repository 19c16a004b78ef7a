//! Regime changes, by construction (issue 24): a burst emulator — a loop device over a file
//! (`losetup --direct-io=on`, so the limit touches nothing else) whose cgroup I/O limit a
//! token-bucket controller thread changes from outside (a burst rate while credits last, a
//! baseline after) — and the analysis must find the burst, the sustained rate and the cliff
//! where the controller put them. Needs root (skips with a note otherwise, fails under CI).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use iolens::analysis::regimes::{change_points, run_regimes};
use iolens::results::analysis::RegimeCause;
use iolens::results::Results;

mod common;
use common::{bin, root_or_skip};

/// The live tests share the VM's two CPUs and the loop device's queue: one at a time.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Which I/O the limit applies to.
#[derive(Clone, Copy, PartialEq)]
enum Dir {
    Read,
    Write,
}

/// A cgroup (v2 `io.max` or v1 `blkio.throttle.*`) that limits one device's IOPS for the
/// processes put in it.
struct Limit {
    dir: PathBuf,
    v2: bool,
    dev: String,
    what: Dir,
}

impl Limit {
    fn new(dev: &str, what: Dir) -> Option<Limit> {
        let name = format!("iolens-burst-{}", std::process::id());
        let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "io"));
        let dir = if v2 {
            let _ = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+io");
            PathBuf::from("/sys/fs/cgroup").join(name)
        } else if Path::new("/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device").exists() {
            PathBuf::from("/sys/fs/cgroup/blkio").join(name)
        } else {
            return None;
        };
        std::fs::create_dir_all(&dir).ok()?;
        Some(Limit {
            dir,
            v2,
            dev: dev.to_string(),
            what,
        })
    }

    /// Set the IOPS limit (0: none).
    fn set(&self, iops: u64) {
        let (file, line) = if self.v2 {
            let v = if iops == 0 {
                "max".to_string()
            } else {
                iops.to_string()
            };
            let key = if self.what == Dir::Read {
                "riops"
            } else {
                "wiops"
            };
            ("io.max", format!("{} {key}={v}", self.dev))
        } else {
            let f = if self.what == Dir::Read {
                "blkio.throttle.read_iops_device"
            } else {
                "blkio.throttle.write_iops_device"
            };
            (f, format!("{} {iops}", self.dev))
        };
        std::fs::write(self.dir.join(file), line).expect("set the I/O limit");
    }

    /// A command line that joins this cgroup, then runs iolens.
    fn command(&self, args: &[String]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(self.dir.join("cgroup.procs"))
            .arg(env!("CARGO_BIN_EXE_iolens"))
            .args(args);
        c
    }
}

impl Drop for Limit {
    fn drop(&mut self) {
        self.set(0);
        // The process that was in it has exited; an empty cgroup can be removed.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A loop device with direct I/O over a file of its own.
struct Loop {
    dev: PathBuf,
    name: String,
    majmin: String,
    _file: tempfile::TempDir,
}

impl Loop {
    fn new(size: u64) -> Option<Loop> {
        let dir = tempfile::Builder::new()
            .prefix("iolens-burst")
            .tempdir_in("/var/tmp")
            .ok()?;
        let f = dir.path().join("backing");
        let mut w = std::fs::File::create(&f).ok()?;
        // Written, not sparse: reads reach the backing disk like a real device's.
        let block = vec![0x5au8; 1 << 20];
        for _ in 0..size >> 20 {
            w.write_all(&block).ok()?;
        }
        w.sync_all().ok()?;
        let out = Command::new("losetup")
            .args(["--direct-io=on", "--find", "--show"])
            .arg(&f)
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!("note: losetup: {}", String::from_utf8_lossy(&out.stderr));
            return None;
        }
        let dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let name = dev.file_name()?.to_string_lossy().to_string();
        let majmin = std::fs::read_to_string(format!("/sys/block/{name}/dev"))
            .ok()?
            .trim()
            .to_string();
        Some(Loop {
            dev,
            name,
            majmin,
            _file: dir,
        })
    }

    /// Reads and writes the device completed so far (its own counters), and sectors written.
    fn done(&self, what: Dir) -> u64 {
        let s = std::fs::read_to_string(format!("/sys/block/{}/stat", self.name)).unwrap();
        let f: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
        match what {
            Dir::Read => f[0],
            Dir::Write => f[4],
        }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

/// The controller: a token bucket over the device's own completed I/Os. Credits start at
/// `credits` I/Os beyond the baseline and refill at the baseline rate; the limit is `burst`
/// while the balance is positive and `base` after. Returns when the limit fell (wall clock).
fn controller(
    lo: &Loop,
    lim: &Limit,
    what: Dir,
    burst: u64,
    base: u64,
    credits: f64,
    stop: &AtomicBool,
) -> Option<SystemTime> {
    lim.set(burst);
    let start_ios = lo.done(what);
    let mut t0: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
        let done = lo.done(what) - start_ios;
        if done == 0 {
            continue;
        }
        // The bucket starts with the first I/O.
        let t = t0.get_or_insert_with(Instant::now).elapsed().as_secs_f64();
        if credits + base as f64 * t - done as f64 <= 0.0 {
            lim.set(base);
            return Some(SystemTime::now());
        }
    }
    None
}

/// A run's start as wall-clock time.
fn started(r: &Results) -> SystemTime {
    humantime::parse_rfc3339(&r.runs[0].started).expect("started is RFC 3339")
}

fn emulate(what: Dir, burst: u64, base: u64, burst_s: f64, run_s: u32) -> Option<()> {
    if !root_or_skip("the burst emulator (loop device, cgroup I/O limit)") {
        return None;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lo) = Loop::new(64 << 20) else {
        assert!(!common::ci(), "no loop device under CI");
        eprintln!("note: skipped: no loop device");
        return None;
    };
    let Some(lim) = Limit::new(&lo.majmin, what) else {
        assert!(!common::ci(), "no cgroup I/O controller under CI");
        eprintln!("note: skipped: no cgroup I/O controller");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let dev = lo.dev.display().to_string();
    let mut args: Vec<String> = [
        "run",
        "--pattern",
        if what == Dir::Read {
            "randread"
        } else {
            "randwrite"
        },
        "--bs",
        "4k",
        "--sessions",
        "4",
        "--interval",
        "1s",
        "--no-progress",
        "--target",
        &dev,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if what == Dir::Write {
        args.extend(["--disposable-target".to_string(), dev.clone()]);
    }
    args.extend([
        "--duration".to_string(),
        format!("{run_s}s"),
        "--json".to_string(),
        json.display().to_string(),
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let credits = (burst - base) as f64 * burst_s;
    let (cliff, out) = std::thread::scope(|s| {
        let h = s.spawn(|| controller(&lo, &lim, what, burst, base, credits, &stop));
        let out = lim.command(&args).output().unwrap();
        stop.store(true, Ordering::Relaxed);
        (h.join().unwrap(), out)
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = Results::read_file(&json).unwrap();
    let g = run_regimes(&r.runs[0]).expect("regimes of a 1 s series");
    eprintln!("{}", g.sentence);
    let cliff = cliff.expect("the controller lowered the limit during the run");
    let cliff_s = cliff
        .duration_since(started(&r))
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    // The cliff is the change named for the controller's cause (a loaded VM may add a dip of
    // its own elsewhere, which is reported too, as it should be).
    let want = if what == Dir::Read {
        RegimeCause::CreditsExhausted
    } else {
        RegimeCause::WriteCacheFull
    };
    let ci = g
        .changes
        .iter()
        .position(|c| c.cause == want)
        .unwrap_or_else(|| panic!("no {want:?} change: {}", g.sentence));
    let c = &g.changes[ci];
    eprintln!(
        "measured: burst {:.0} IOPS (set {burst}), sustained {:.0} (set {base}), cliff at {:.2} s \
         (controller {cliff_s:.2} s), {} bytes before it",
        g.regimes[ci].iops,
        g.regimes[ci + 1].iops,
        c.at_s,
        c.bytes_before
    );
    let (b, s) = (g.regimes[ci].iops, g.regimes[ci + 1].iops);
    assert!(
        (b / burst as f64 - 1.0).abs() <= 0.03,
        "burst {b} vs {burst}: {}",
        g.sentence
    );
    assert!(
        (s / base as f64 - 1.0).abs() <= 0.03,
        "sustained {s} vs {base}: {}",
        g.sentence
    );
    assert!(
        (c.at_s - cliff_s).abs() <= 2.0,
        "cliff at {:.2} s, the controller changed the limit at {cliff_s:.2} s: {}",
        c.at_s,
        g.sentence
    );
    if what == Dir::Write {
        // The bytes written to the cliff: what the bucket allowed, 4 KiB each.
        let want_bytes = (credits + base as f64 * cliff_s) * 4096.0;
        assert!(
            (c.bytes_before as f64 / want_bytes - 1.0).abs() <= 0.1,
            "{} bytes to the cliff, about {want_bytes} expected",
            c.bytes_before
        );
    }
    // The shown text carries it.
    let shown = bin().arg("show").arg(&json).output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("sustained"), "{text}");
    Some(())
}

#[test]
fn read_burst_then_sustained_found_where_the_controller_put_it() {
    emulate(Dir::Read, 1000, 250, 8.0, 20);
}

#[test]
fn write_cache_filling_found_after_the_bytes_it_took() {
    emulate(Dir::Write, 1000, 250, 8.0, 20);
}

#[test]
fn steady_device_is_steady_and_has_no_change_points() {
    if !root_or_skip("the steady emulated device (loop device, cgroup I/O limit)") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lo) = Loop::new(64 << 20) else {
        assert!(!common::ci(), "no loop device under CI");
        return;
    };
    let Some(lim) = Limit::new(&lo.majmin, Dir::Read) else {
        assert!(!common::ci(), "no cgroup I/O controller under CI");
        return;
    };
    lim.set(600);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let args: Vec<String> = [
        "run",
        "--pattern",
        "randread",
        "--bs",
        "4k",
        "--sessions",
        "4",
        "--duration",
        "24s",
        "--no-progress",
        "--target",
        &lo.dev.display().to_string(),
        "--json",
        &json.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = lim.command(&args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = Results::read_file(&json).unwrap();
    let g = run_regimes(&r.runs[0]).unwrap();
    assert!(g.changes.is_empty(), "{}", g.sentence);
    // Nothing else used the device: no neighbour named (the other side of
    // `a_neighbour_on_the_device_is_named_where_it_ran`).
    assert!(!r.runs[0].device_intervals.is_empty());
    assert!(g.neighbours.is_empty(), "{}", g.sentence);
    let st = g.steady.as_ref().expect("a steady-state verdict");
    assert!(st.steady, "{}", g.sentence);
    assert!(
        (g.regimes[0].iops / 600.0 - 1.0).abs() <= 0.03,
        "{}",
        g.sentence
    );
    // Repeated analyses of the recorded series: 20 windows of 12 intervals each (start 0..12
    // in steps, wrapping), none may hold an invented change point.
    let iv = &r.runs[0].ops[0].intervals;
    let iops: Vec<f64> = iv.iter().map(|i| i.count as f64 / i.duration_s).collect();
    let mut false_pos = 0;
    let windows = 20;
    for w in 0..windows {
        let a = w % (iops.len() - 12);
        let len = 12 + (w % 3) * 4;
        let b = (a + len).min(iops.len());
        false_pos += change_points(&iops[a..b]).len();
    }
    eprintln!("false-positive rate: {false_pos}/{windows} windows");
    assert_eq!(false_pos, 0);
}

/// `calibrate --sustain` on the burst emulator: the ramp runs inside the burst, the held point
/// runs into the cliff; calibrate reports the sustained rate as the answer, the burst as a
/// burst, and the cliff where the controller put it.
#[test]
fn calibrate_reports_sustained_not_the_burst() {
    if !root_or_skip("the burst emulator (loop device, cgroup I/O limit)") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lo) = Loop::new(64 << 20) else {
        assert!(!common::ci(), "no loop device under CI");
        return;
    };
    let Some(lim) = Limit::new(&lo.majmin, Dir::Read) else {
        assert!(!common::ci(), "no cgroup I/O controller under CI");
        return;
    };
    let (burst, base) = (1000u64, 250u64);
    let credits = (burst - base) as f64 * 14.0;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let args: Vec<String> = [
        "calibrate",
        "--phases",
        "randread",
        "--bs",
        "4k",
        "--max-sessions",
        "2",
        "--budget",
        "8s",
        "--max-latency",
        "100ms",
        "--sustain",
        "20s",
        "--no-progress",
        "--target",
        &lo.dev.display().to_string(),
        "--json",
        &json.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let stop = AtomicBool::new(false);
    let (cliff, out) = std::thread::scope(|s| {
        let h = s.spawn(|| controller(&lo, &lim, Dir::Read, burst, base, credits, &stop));
        let out = lim.command(&args).output().unwrap();
        stop.store(true, Ordering::Relaxed);
        (h.join().unwrap(), out)
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = Results::read_file(&json).unwrap();
    let c = r.calibration.as_ref().unwrap();
    let held = c.findings.sustain.expect("the chosen point was held");
    let an = iolens::analysis::analyse(&r);
    let b = an
        .calibration
        .as_ref()
        .and_then(|a| a.burst.clone())
        .unwrap_or_else(|| panic!("no burst found: {stdout}"));
    eprintln!("{}", b.sentence);
    assert!(
        (b.burst_iops / burst as f64 - 1.0).abs() <= 0.03,
        "burst {}: {stdout}",
        b.burst_iops
    );
    assert!(
        (b.sustained_iops / base as f64 - 1.0).abs() <= 0.03,
        "sustained {}: {stdout}",
        b.sustained_iops
    );
    assert!(b.max_in_burst, "{stdout}");
    // The cliff, in wall-clock time, where the controller lowered the limit.
    let g = run_regimes(&r.runs[held.run]).unwrap();
    let series: Vec<u64> = r.runs[held.run].ops[0]
        .intervals
        .iter()
        .map(|i| i.count)
        .collect();
    eprintln!("held point, I/Os per interval: {series:?}; {}", g.sentence);
    // A loaded VM can dip the burst rate too; the cliff is the change named as credits running
    // out.
    let ch = g
        .changes
        .iter()
        .find(|c| c.cause == RegimeCause::CreditsExhausted)
        .unwrap_or_else(|| panic!("no credits-exhausted change: {}", g.sentence));
    let at = humantime::parse_rfc3339(&r.runs[held.run].started).unwrap()
        + Duration::from_secs_f64(ch.at_s);
    let cliff = cliff.expect("the controller lowered the limit during the calibration");
    let off = match at.duration_since(cliff) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    };
    eprintln!(
        "measured: burst {:.0} (set {burst}), sustained {:.0} (set {base}), cliff {off:+.2} s from \
         the controller's change",
        b.burst_iops, b.sustained_iops
    );
    assert!(off.abs() <= 2.0, "cliff {off:+.2} s off: {stdout}");
    // Said as a burst, and the sustained figure as the answer.
    assert!(stdout.contains("IOPS sustained"), "{stdout}");
    assert!(stdout.contains("inside a burst"), "{stdout}");
}

/// `calibrate --precondition` on a device whose writes a cgroup holds at a fixed rate (steady
/// by construction): the fill covers the device, the write rounds reach SNIA steady state by
/// both criteria in the first window of 5 rounds (a round or two more allowed for the start),
/// at the limit's rate, and the report says how many rounds ran and that steady state was
/// reached.
#[test]
fn precondition_reaches_steady_state_on_a_steady_device() {
    if !root_or_skip("the steady emulated device (loop device, cgroup I/O limit)") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lo) = Loop::new(16 << 20) else {
        assert!(!common::ci(), "no loop device under CI");
        return;
    };
    let Some(lim) = Limit::new(&lo.majmin, Dir::Write) else {
        assert!(!common::ci(), "no cgroup I/O controller under CI");
        return;
    };
    lim.set(400);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let dev = lo.dev.display().to_string();
    let args: Vec<String> = [
        "calibrate",
        "--precondition",
        "60s",
        "--phases",
        "randread",
        "--max-sessions",
        "1",
        "--budget",
        "3s",
        "--no-progress",
        "--target",
        &dev,
        "--disposable-target",
        &dev,
        "--json",
        &json.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = lim.command(&args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = Results::read_file(&json).unwrap();
    let pc = r
        .calibration
        .as_ref()
        .unwrap()
        .findings
        .precondition
        .clone();
    let pc = pc.expect("a precondition record");
    eprintln!("{}", pc.sentence);
    assert!(stdout.contains(&pc.sentence), "{stdout}");
    assert!(pc.fill_bytes >= pc.target_bytes, "{}", pc.sentence);
    assert!(pc.reached && pc.ended == "steady", "{}", pc.sentence);
    assert!((5..=7).contains(&pc.rounds.len()), "{}", pc.sentence);
    let st = pc.steady.as_ref().unwrap();
    assert!(st.range_pct <= 20.0 && st.slope_pct <= 10.0, "{st:?}");
    assert!((st.average / 400.0 - 1.0).abs() <= 0.05, "{}", pc.sentence);
    assert!(pc.sentence.contains(&format!(
        "steady state reached after {} rounds",
        pc.rounds.len()
    )));
    for &i in pc.rounds.iter().chain(&pc.fill_runs) {
        assert_eq!(r.runs[i].phase, "precondition");
    }
}

/// A reader of `dev` with O_DIRECT (another process's load, as dd or fio would put on it):
/// 128 KiB sequential reads with a 5 ms pause between them, from `from` for `len`. Returns
/// when it started and stopped (wall clock).
fn neighbour(dev: &Path, from: Instant, len: Duration) -> (SystemTime, SystemTime) {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(dev)
        .expect("open the loop device for the neighbour");
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    let size = if size == 0 { 64 << 20 } else { size };
    const BS: usize = 128 << 10;
    let layout = std::alloc::Layout::from_size_align(BS, 4096).unwrap();
    // SAFETY: a non-zero layout; freed below with the same layout.
    let ptr = unsafe { std::alloc::alloc(layout) };
    assert!(!ptr.is_null());
    // SAFETY: `ptr` holds BS bytes, and only this slice uses them until they are freed.
    let buf = unsafe { std::slice::from_raw_parts_mut(ptr, BS) };
    std::thread::sleep(from.saturating_duration_since(Instant::now()));
    let began = SystemTime::now();
    let until = Instant::now() + len;
    let mut off = 0u64;
    while Instant::now() < until {
        f.read_at(buf, off).expect("the neighbour's read");
        off = (off + BS as u64) % (size / BS as u64 * BS as u64);
        std::thread::sleep(Duration::from_millis(5));
    }
    let ended = SystemTime::now();
    // SAFETY: allocated above with this layout.
    unsafe { std::alloc::dealloc(ptr, layout) };
    (began, ended)
}

/// Seconds from `a` to `b` (negative when `b` is earlier).
fn secs_between(a: SystemTime, b: SystemTime) -> f64 {
    match b.duration_since(a) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// A noisy neighbour by construction: iolens reads the loop device at a rate its cgroup holds
/// (500 IOPS of 4 KiB), and a second reader outside that cgroup reads the same device from a
/// known second for 4 s. The device's own per-interval counters must name that stretch (to
/// within the interval that holds each end) as a neighbour's, and nothing else; no change is
/// called the storage's. The steady test above is the other side: no neighbour, none named.
#[test]
fn a_neighbour_on_the_device_is_named_where_it_ran() {
    if !root_or_skip("the noisy neighbour (loop device, cgroup I/O limit)") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lo) = Loop::new(64 << 20) else {
        assert!(!common::ci(), "no loop device under CI");
        return;
    };
    let Some(lim) = Limit::new(&lo.majmin, Dir::Read) else {
        assert!(!common::ci(), "no cgroup I/O controller under CI");
        return;
    };
    lim.set(500);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let args: Vec<String> = [
        "run",
        "--pattern",
        "randread",
        "--bs",
        "4k",
        "--sessions",
        "4",
        "--duration",
        "16s",
        "--no-progress",
        "--target",
        &lo.dev.display().to_string(),
        "--json",
        &json.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let from = Instant::now() + Duration::from_secs(6);
    let ((began, ended), out) = std::thread::scope(|s| {
        let h = s.spawn(|| neighbour(&lo.dev, from, Duration::from_secs(4)));
        let out = lim.command(&args).output().unwrap();
        (h.join().unwrap(), out)
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = Results::read_file(&json).unwrap();
    assert!(
        !r.runs[0].device_intervals.is_empty(),
        "the run recorded the device's own counters per interval"
    );
    let g = run_regimes(&r.runs[0]).unwrap();
    eprintln!("{}", g.sentence);
    let (t0, t1) = (
        secs_between(started(&r), began),
        secs_between(started(&r), ended),
    );
    eprintln!(
        "neighbour ran {t0:.2}–{t1:.2} s; named: {:?}",
        g.neighbours
            .iter()
            .map(|n| (n.start_s, n.end_s, n.device_bytes, n.own_bytes))
            .collect::<Vec<_>>()
    );
    // One stretch, from the interval holding its start to the one holding its end.
    assert_eq!(g.neighbours.len(), 1, "{}", g.sentence);
    let n = &g.neighbours[0];
    assert!(
        (n.start_s - t0).abs() <= 1.0 && (n.end_s - t1).abs() <= 1.0,
        "named {:.1}–{:.1} s, the neighbour ran {t0:.2}–{t1:.2} s",
        n.start_s,
        n.end_s
    );
    assert!(n.device_bytes as f64 >= 1.5 * n.own_bytes as f64);
    // Not a change of the storage.
    assert!(
        g.changes.iter().all(|c| !matches!(
            c.cause,
            RegimeCause::CreditsExhausted | RegimeCause::WriteCacheFull
        )),
        "{}",
        g.sentence
    );
    let an = iolens::analysis::analyse(&r);
    assert!(
        an.runs[0]
            .verdicts
            .iter()
            .any(|v| v.kind.as_str() == "noisy-neighbour"),
        "{:?}",
        an.runs[0].verdicts
    );
}
