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

use iolens::analysis::regimes::{run_regimes, THROTTLE_SLICE_S};
use iolens::results::analysis::{CalibrationBurst, RateStretch, Regime, RegimeCause};
use iolens::results::Results;

mod common;
use common::{bin, results_of, root_or_skip};

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

    /// Cap the bytes a second of this limit's direction too (0: none).
    fn cap_bytes(&self, bps: u64) {
        let (file, line) = if self.v2 {
            let key = if self.what == Dir::Read {
                "rbps"
            } else {
                "wbps"
            };
            let v = if bps == 0 {
                "max".to_string()
            } else {
                bps.to_string()
            };
            ("io.max", format!("{} {key}={v}", self.dev))
        } else {
            let f = if self.what == Dir::Read {
                "blkio.throttle.read_bps_device"
            } else {
                "blkio.throttle.write_bps_device"
            };
            (f, format!("{} {bps}", self.dev))
        };
        std::fs::write(self.dir.join(file), line).expect("set the bandwidth limit");
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

    /// [`Limit::command`] with iolens at real-time priority (`chrt -f 10`): the storage the
    /// emulator builds is what is under test, and on a host that other work keeps 100 % busy
    /// a normal-priority load waits in the run queue (1.4 ms a read measured here) and cannot
    /// spend the credits at the burst rate, so the cliff would come late or not at all.
    /// iolens' sessions block in I/O, and the kernel keeps 5 % of each second for the rest.
    fn command_rt(&self, args: &[String]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("echo $$ > \"$0\" && exec chrt -f 10 \"$@\"")
            .arg(self.dir.join("cgroup.procs"))
            .arg(env!("CARGO_BIN_EXE_iolens"))
            .args(args);
        c
    }
}

impl Drop for Limit {
    fn drop(&mut self) {
        self.set(0);
        self.cap_bytes(0);
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
        Loop::new_in(size, "/var/tmp")
    }

    /// Over a file in `dir`: `/dev/shm` for a device of memory's speed, which only the cgroup
    /// limit holds (this VM's disk, shared with other builds, wandered between 200 and 900
    /// random 4 KiB writes a second under a 1000 IOPS limit).
    fn new_in(size: u64, dir: &str) -> Option<Loop> {
        let dir = tempfile::Builder::new()
            .prefix("iolens-burst")
            .tempdir_in(dir)
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

    /// The device's own counters (`/sys/block/NAME/stat`): reads or writes completed so far.
    fn done(&self, what: Dir) -> u64 {
        self.stat()[if what == Dir::Read { 0 } else { 4 }]
    }

    /// Bytes the device has written so far (its own counter of sectors written).
    fn written(&self) -> u64 {
        self.stat()[6] * 512
    }

    fn stat(&self) -> Vec<u64> {
        let s = std::fs::read_to_string(format!("/sys/block/{}/stat", self.name)).unwrap();
        s.split_whitespace().map(|x| x.parse().unwrap()).collect()
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

/// The controller: a token bucket over the device's own counters, `count` (I/Os completed,
/// or bytes written). Credits start at `credits` units beyond the baseline and refill at
/// `refill` units a second (the baseline: for a write cache, what it drains to the media); the
/// limit is `burst` I/Os a second while the balance is positive and `base` after. Returns when
/// the limit fell (wall clock) and the count then, from the first unit on.
#[allow(clippy::too_many_arguments)]
fn controller(
    lim: &Limit,
    count: &dyn Fn() -> u64,
    burst: u64,
    base: u64,
    credits: f64,
    refill: f64,
    stop: &AtomicBool,
) -> Option<(SystemTime, u64)> {
    lim.set(burst);
    let start = count();
    let mut t0: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
        let done = count() - start;
        if done == 0 {
            continue;
        }
        // The bucket starts with the first I/O.
        let t = t0.get_or_insert_with(Instant::now).elapsed().as_secs_f64();
        if credits + refill * t - done as f64 <= 0.0 {
            lim.set(base);
            return Some((SystemTime::now(), done));
        }
    }
    None
}

/// The controller of a read burst (credits in I/Os) or of a write cache (credits in bytes,
/// drained at the baseline's 4 KiB writes a second) on `lo`.
fn bucket(
    lo: &Loop,
    lim: &Limit,
    what: Dir,
    (burst, base): (u64, u64),
    credits: f64,
    stop: &AtomicBool,
) -> Option<(SystemTime, u64)> {
    match what {
        Dir::Read => controller(
            lim,
            &|| lo.done(Dir::Read),
            burst,
            base,
            credits,
            base as f64,
            stop,
        ),
        Dir::Write => controller(
            lim,
            &|| lo.written(),
            burst,
            base,
            credits,
            base as f64 * 4096.0,
            stop,
        ),
    }
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
    // Over memory and at real-time priority, as the calibrate tests: only the emulator's limit
    // may hold the device (over /var/tmp a CI run's writes fell from 1.02k to 804 a second for
    // 4 s below the 1000 limit, the VM's disk busy with other builds).
    let Some(lo) = Loop::new_in(64 << 20, "/dev/shm") else {
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
    // Credits for `burst_s` seconds at the burst rate: I/Os for reads, bytes for writes.
    let credits = (burst - base) as f64 * burst_s * if what == Dir::Write { 4096.0 } else { 1.0 };
    let (cliff, out) = std::thread::scope(|s| {
        let h = s.spawn(|| bucket(&lo, &lim, what, (burst, base), credits, &stop));
        let out = lim.command_rt(&args).output().unwrap();
        stop.store(true, Ordering::Relaxed);
        (h.join().unwrap(), out)
    });
    let r = results_of(&out, &json);
    let g = run_regimes(&r.runs[0]).expect("regimes of a 1 s series");
    let own: Vec<u64> = r.runs[0].ops[0].intervals.iter().map(|i| i.count).collect();
    let device: Vec<u64> = r.runs[0]
        .device_intervals
        .iter()
        .map(|i| if what == Dir::Read { i.reads } else { i.writes })
        .collect();
    eprintln!(
        "I/Os per interval, iolens {own:?}, the device {device:?}; {}",
        g.sentence
    );
    let (cliff, count_at_cliff) = cliff.expect("the controller lowered the limit during the run");
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
    // The burst is the first regime (the run starts inside it, at the limit); the sustained
    // figure is the last regime; a regime between the first and the cliff (the storage below
    // giving less for a while) is on the burst's side, above the sustained rate.
    let (b, s) = (g.regimes[0].iops, g.regimes[g.regimes.len() - 1].iops);
    eprintln!(
        "measured: burst {b:.0} IOPS (set {burst}), sustained {s:.0} (set {base}), cliff at \
         {:.2} s (controller {cliff_s:.2} s), {} bytes before it; sessions' run-queue share \
         {:?}",
        c.at_s, c.bytes_before, c.runq
    );
    // The other side of `iolens_starved_of_cpu_is_named_the_host_cpu_not_the_storage`: the
    // sessions' wait was read, and the cliff the device made is not put on the host's CPU.
    assert!(c.runq.is_some(), "no run-queue readings: {}", g.sentence);
    assert!(!g.sentence.contains("starved of CPU"), "{}", g.sentence);
    for x in &g.regimes[1..=ci] {
        assert!(x.iops > s * (1.0 + 0.08), "{}", g.sentence);
    }
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
    // The other side of `throttling_set_and_lifted_is_named_where_it_was`: a limit that
    // drops and stays is the cliff, and nothing from the cliff on is called throttling (a
    // throttle would be lifted, the rate back).
    assert!(
        g.changes.iter().all(|x| x.at_s < cliff_s - 2.0
            || !matches!(
                x.cause,
                RegimeCause::ThrottlingStarts | RegimeCause::ThrottlingStops
            )),
        "throttling named at the cliff: {}",
        g.sentence
    );
    if what == Dir::Write {
        // The bytes written to the cliff: what the device had written when the controller
        // found the cache full (its own counter). The cliff's placement is good to a fraction
        // of an interval: a tenth of the bytes is 0.8 s of writes at the burst rate here.
        assert!(
            (c.bytes_before as f64 / count_at_cliff as f64 - 1.0).abs() <= 0.1,
            "{} bytes to the cliff, the device had written {count_at_cliff}",
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

/// The throttle of [`throttling_set_and_lifted_is_named_where_it_was`]: from the device's
/// first read (the run's first I/O; `run` has no warm-up by default), a byte-rate limit of
/// `bps` on the emulated device at `at.0` seconds, lifted at `at.1`. Returns when each was
/// set (wall clock).
fn throttle(
    lo: &Loop,
    lim: &Limit,
    bps: u64,
    at: (f64, f64),
    stop: &AtomicBool,
) -> Option<(SystemTime, SystemTime)> {
    let start = lo.done(Dir::Read);
    while lo.done(Dir::Read) == start {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let t0 = Instant::now();
    let until = |s: f64| {
        while t0.elapsed().as_secs_f64() < s {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    };
    if !until(at.0) {
        return None;
    }
    lim.cap_bytes(bps);
    let set = SystemTime::now();
    if !until(at.1) {
        return None;
    }
    lim.cap_bytes(0);
    Some((set, SystemTime::now()))
}

/// Throttling that starts and stops, by construction: the emulated device reads 1000 IOPS of
/// 4 KiB (a fixed `riops` limit, its own speed, as the burst emulator's), and a second limit of
/// the same cgroup — a byte rate of 250 × 4 KiB a second, what a container's or a volume's
/// throttle sets — is set 8 s into a 24 s `run` and lifted at 16 s. iolens must name
/// throttling that starts within 2 s of the first and stops within 2 s of the second, report
/// the three regimes at the limits (1000, 250, 1000), and name no burst cliff or write cache;
/// the show text says both. The other side is the burst emulator's tests: a limit that drops
/// and stays is the cliff, never throttling.
///
/// Tolerance: iolens places a change inside the 1 s interval that mixes the two rates by that
/// interval's rate, so its error is what the rate in that interval misreads: blk-throttle
/// grants in 100 ms slices ([`THROTTLE_SLICE_S`]), a tenth of a second, plus the controller's
/// 2 ms polling; 2 s (the bound) is two whole intervals of room for a loaded host. The
/// regimes' rates: 3 % and a throttle slice at each end of their stretch, as the burst's.
#[test]
fn throttling_set_and_lifted_is_named_where_it_was() {
    if !root_or_skip("the throttling emulator (loop device, cgroup I/O limit)") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lo) = Loop::new_in(64 << 20, "/dev/shm") else {
        assert!(!common::ci(), "no loop device under CI");
        eprintln!("note: skipped: no loop device");
        return;
    };
    let Some(lim) = Limit::new(&lo.majmin, Dir::Read) else {
        assert!(!common::ci(), "no cgroup I/O controller under CI");
        eprintln!("note: skipped: no cgroup I/O controller");
        return;
    };
    let (device, throttled) = (1000u64, 250u64);
    let (t1, t2) = (8.0, 16.0);
    lim.set(device);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let dev = lo.dev.display().to_string();
    let mut args = strings(&[
        "run",
        "--pattern",
        "randread",
        "--bs",
        "4k",
        "--sessions",
        "4",
        "--interval",
        "1s",
        "--duration",
        "24s",
        "--no-progress",
        "--target",
        &dev,
        "--json",
    ]);
    args.push(json.display().to_string());
    let stop = AtomicBool::new(false);
    let (set, out) = std::thread::scope(|s| {
        let h = s.spawn(|| throttle(&lo, &lim, throttled * 4096, (t1, t2), &stop));
        let out = lim.command_rt(&args).output().unwrap();
        stop.store(true, Ordering::Relaxed);
        (h.join().unwrap(), out)
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (on, off) = set.expect("the throttle was set and lifted during the run");
    let r = Results::read_file(&json).unwrap();
    let g = run_regimes(&r.runs[0]).expect("regimes of a 1 s series");
    let own: Vec<u64> = r.runs[0].ops[0].intervals.iter().map(|i| i.count).collect();
    let dev_ios: Vec<u64> = r.runs[0].device_intervals.iter().map(|i| i.reads).collect();
    let (on_s, off_s) = (
        secs_between(started(&r), on),
        secs_between(started(&r), off),
    );
    eprintln!(
        "I/Os per interval, iolens {own:?}, the device {dev_ios:?}; throttle set at {on_s:.2} s, \
         lifted at {off_s:.2} s; {}",
        g.sentence
    );
    // Never a burst's cliff nor a write cache.
    assert!(
        g.changes.iter().all(|c| !matches!(
            c.cause,
            RegimeCause::CreditsExhausted | RegimeCause::WriteCacheFull
        )),
        "{}",
        g.sentence
    );
    let named = |cause: RegimeCause, want: f64| {
        let c = g
            .changes
            .iter()
            .filter(|c| c.cause == cause)
            .min_by(|a, b| (a.at_s - want).abs().total_cmp(&(b.at_s - want).abs()))
            .unwrap_or_else(|| panic!("no {cause:?} change: {}", g.sentence));
        eprintln!(
            "{cause:?} named at {:.2} s, set at {want:.2} s ({:+.2} s)",
            c.at_s,
            c.at_s - want
        );
        assert!(
            (c.at_s - want).abs() <= 2.0,
            "{cause:?} at {:.2} s, the controller at {want:.2} s: {}",
            c.at_s,
            g.sentence
        );
        c.at_s
    };
    let a = named(RegimeCause::ThrottlingStarts, on_s);
    let b = named(RegimeCause::ThrottlingStops, off_s);
    // Both regimes reported at their limits: the one throttled, and the device's own on each
    // side of it.
    let slack = |x: &Regime| 0.03 + 2.0 * THROTTLE_SLICE_S / (x.rate_to_s - x.rate_from_s);
    let near = |x: &Regime, want: u64| (x.iops / want as f64 - 1.0).abs() <= slack(x);
    let inside: Vec<&Regime> = g
        .regimes
        .iter()
        .filter(|x| x.start_s >= a - 0.5 && x.end_s <= b + 0.5)
        .collect();
    assert!(
        !inside.is_empty() && inside.iter().all(|x| near(x, throttled)),
        "the throttled regime(s) {:?} vs {throttled}: {}",
        inside.iter().map(|x| x.iops).collect::<Vec<_>>(),
        g.sentence
    );
    let (first, last) = (&g.regimes[0], &g.regimes[g.regimes.len() - 1]);
    assert!(
        near(first, device) && near(last, device),
        "before {:.1}, after {:.1} IOPS vs the device's {device}: {}",
        first.iops,
        last.iops,
        g.sentence
    );
    let shown = bin().arg("show").arg(&json).output().unwrap();
    // Prose is broken between words to the width: read it as one line.
    let text = String::from_utf8_lossy(&shown.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for said in [
        format!("throttling starts {a:.1} s in"),
        format!("throttling stops {b:.1} s in"),
    ] {
        assert!(text.contains(&said), "{said:?} not in: {text}");
    }
    assert!(!text.contains("credits exhausted"), "{text}");
}

/// The steady device: a loop device over memory under a fixed 600 read IOPS limit. Memory's
/// speed under the limit, so that only the limit holds it: over this VM's shared disk the
/// device itself dipped (CI: 480 IOPS for 2 s under a 600 limit, rightly found). None (the
/// test skipped) without a loop device or the cgroup I/O controller, except under CI.
fn steady_device() -> Option<(Loop, Limit)> {
    let Some(lo) = Loop::new_in(64 << 20, "/dev/shm") else {
        assert!(!common::ci(), "no loop device under CI");
        return None;
    };
    let Some(lim) = Limit::new(&lo.majmin, Dir::Read) else {
        assert!(!common::ci(), "no cgroup I/O controller under CI");
        return None;
    };
    lim.set(600);
    Some((lo, lim))
}

/// `run`'s arguments for 4 sessions of 4 KiB random reads on the steady device for
/// `duration`, 1 s intervals, results to `json`.
fn steady_run(lo: &Loop, duration: &str, json: &Path) -> Vec<String> {
    let dev = lo.dev.display().to_string();
    let mut args = strings(&[
        "run",
        "--pattern",
        "randread",
        "--bs",
        "4k",
        "--sessions",
        "4",
        "--duration",
        duration,
        "--interval",
        "1s",
        "--no-progress",
        "--target",
        &dev,
        "--json",
    ]);
    args.push(json.display().to_string());
    args
}

/// A steady device (a fixed 600 IOPS limit) run 20 times (8 s each, 1 s intervals): every run
/// gets a steady-state verdict and no change point, and no neighbour is named (the other side
/// of `a_neighbour_on_the_device_is_named_where_it_ran`). The false-positive rate is printed.
#[test]
fn steady_device_is_steady_and_has_no_change_points() {
    if !root_or_skip("the steady emulated device (loop device, cgroup I/O limit)") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let Some((lo, lim)) = steady_device() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let args = steady_run(&lo, "8s", &json);
    let runs = 20;
    let (mut changed, mut starved, mut steady, mut clean, mut ios, mut secs) =
        (Vec::new(), Vec::new(), 0, 0, 0u64, 0.0);
    for i in 0..runs {
        let _ = std::fs::remove_file(&json);
        let out = lim.command(&args).output().unwrap();
        let r = results_of(&out, &json);
        let g = run_regimes(&r.runs[0]).unwrap();
        assert!(!r.runs[0].device_intervals.is_empty());
        assert!(!r.runs[0].sched_intervals.is_empty());
        assert!(g.neighbours.is_empty(), "run {i}: {}", g.sentence);
        // The loop device's workers, which read its backing file for each request, are read
        // with the sessions (their wait for a CPU holds the device's requests).
        assert!(
            r.runs[0]
                .sched_intervals
                .iter()
                .any(|iv| iv.device_threads > 0),
            "run {i}: no kernel worker of {} seen",
            lo.name
        );
        // Per interval: the sessions' share of time waiting for a CPU, and the device's
        // workers' wait in ms.
        let shares: Vec<String> = r.runs[0]
            .sched_intervals
            .iter()
            .filter_map(|iv| {
                let f = iv.runq_share()?;
                Some(format!(
                    "{:.0}/{}",
                    100.0 * f,
                    iv.device_runq_ns / 1_000_000
                ))
            })
            .collect();
        // iolens starved of CPU by the host's other work is named so (the device did not
        // change); any other change is a false positive.
        let host = g.changes.iter().any(|c| c.cause == RegimeCause::HostCpu)
            || g.steady.as_ref().is_some_and(|s| s.host_cpu.is_some());
        if g.changes.iter().any(|c| c.cause != RegimeCause::HostCpu) {
            changed.push(format!(
                "run {i}: {} (run-queue % / device workers' wait ms {shares:?})",
                g.sentence
            ));
        } else if host {
            starved.push(format!(
                "run {i}: {} (run-queue % / device workers' wait ms {shares:?})",
                g.sentence
            ));
            continue;
        }
        steady += g.steady.as_ref().is_some_and(|s| s.steady) as u32;
        clean += 1;
        ios += r.runs[0].ops.iter().map(|o| o.count).sum::<u64>();
        secs += r.runs[0].duration_s;
    }
    let rate = ios as f64 / secs;
    eprintln!(
        "false-positive rate: {} of {runs} runs with a change point; {} named the host's CPU \
         {starved:#?}; steady: {steady} of the {clean} others; {rate:.1} IOPS over those \
         (limit 600) {changed:?}",
        changed.len(),
        starved.len()
    );
    assert!(changed.is_empty(), "{changed:?}");
    assert_eq!(steady, clean);
    if clean > 0 {
        assert!((rate / 600.0 - 1.0).abs() <= 0.03, "{rate:.1} IOPS");
    }
}

/// A CPU cap on iolens' own processes by construction: a cgroup of the `cpu` controller (v2
/// `cpu.max`, v1 `cpu.cfs_quota_us`) that iolens joins beside its I/O limit, capped at a known
/// second. The kernel's bandwidth control then lets its threads run only `quota` of each
/// `period`: they wait, runnable, for the rest (schedstat counts it as run-queue wait, PSI as
/// CPU pressure).
struct CpuCap {
    dir: PathBuf,
    v2: bool,
}

impl CpuCap {
    /// A cap for the processes of `lim`'s cgroup (v2: the same cgroup; v1: a `cpu` cgroup of
    /// its own); None without the controller.
    fn new(lim: &Limit) -> Option<CpuCap> {
        if lim.v2 {
            let _ = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+cpu");
            lim.dir.join("cpu.max").exists().then(|| CpuCap {
                dir: lim.dir.clone(),
                v2: true,
            })
        } else {
            let dir = PathBuf::from("/sys/fs/cgroup/cpu")
                .join(format!("iolens-cpucap-{}", std::process::id()));
            std::fs::create_dir_all(&dir).ok()?;
            dir.join("cpu.cfs_quota_us")
                .exists()
                .then_some(CpuCap { dir, v2: false })
        }
    }

    /// Caps the cgroup at `quota_us` of CPU time per `period_us`; None lifts the cap.
    fn set(&self, cap: Option<(u64, u64)>) {
        if self.v2 {
            let line = cap.map_or("max 100000".to_string(), |(q, p)| format!("{q} {p}"));
            std::fs::write(self.dir.join("cpu.max"), line).expect("set cpu.max");
        } else {
            let (q, p) = cap.map_or((-1i64, 100_000u64), |(q, p)| (q as i64, p));
            // The quota first when lifting, the period first when capping (the kernel refuses
            // a quota above the period's bound otherwise).
            if q < 0 {
                std::fs::write(self.dir.join("cpu.cfs_quota_us"), "-1").expect("lift the quota");
            }
            std::fs::write(self.dir.join("cpu.cfs_period_us"), p.to_string())
                .expect("set cpu.cfs_period_us");
            if q >= 0 {
                std::fs::write(self.dir.join("cpu.cfs_quota_us"), q.to_string())
                    .expect("set cpu.cfs_quota_us");
            }
        }
    }

    /// `lim`'s command line, joining this cgroup too.
    fn command(&self, lim: &Limit, args: &[String]) -> Command {
        if self.v2 {
            return lim.command(args);
        }
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("echo $$ > \"$0\" && echo $$ > \"$1\" && shift && exec \"$@\"")
            .arg(lim.dir.join("cgroup.procs"))
            .arg(self.dir.join("cgroup.procs"))
            .arg(env!("CARGO_BIN_EXE_iolens"))
            .args(args);
        c
    }
}

impl Drop for CpuCap {
    fn drop(&mut self) {
        self.set(None);
        if !self.v2 {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// iolens starved of CPU at a known second, by construction: a steady device (a fixed 600
/// IOPS limit over memory) and, 6 s into a 14 s `run`, a CPU cap on iolens' own cgroup of
/// [`CAP_QUOTA_US`] per [`CAP_PERIOD_US`] (2 ms of CPU a second). The device did not change
/// (its limit stayed); iolens could not ask for more. The change must be found within 2 s of
/// the cap (an interval of the mixed rate either side), named the host's CPU with the
/// sessions' run-queue share higher on the starved side, and no change named a cause of the
/// storage (credits, a write cache, throttling, unknown); the JSON's analysis and `show` say
/// it.
///
/// Why the cap starves by construction: a 600 IOPS run's sessions used 10.9–11.3 µs of CPU per
/// I/O here (`CPU per I/O` in `show`, debug build), 6.5 ms a second; the cap gives 2 ms, so
/// the rate must fall below a third (measured: 612 → 136 IOPS, run-queue share 0 → 75 %).
/// The run's own figure is checked: the cap must be under what the run used before it.
#[test]
fn iolens_starved_of_cpu_is_named_the_host_cpu_not_the_storage() {
    if !root_or_skip("the steady emulated device (loop device, cgroup I/O and CPU limits)") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let Some((lo, lim)) = steady_device() else {
        return;
    };
    let Some(cap) = CpuCap::new(&lim) else {
        assert!(!common::ci(), "no cgroup cpu controller under CI");
        eprintln!("note: skipped: no cgroup cpu controller");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let args = steady_run(&lo, "14s", &json);
    let child = cap
        .command(&lim, &args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The run measures from its start line, a little after the process starts; the cap's
    // moment is placed against the run's own start afterwards.
    std::thread::sleep(Duration::from_secs(6));
    let capped_at = SystemTime::now();
    cap.set(Some((CAP_QUOTA_US, CAP_PERIOD_US)));
    let out = child.wait_with_output().unwrap();
    cap.set(None);
    let r = results_of(&out, &json);
    let run = &r.runs[0];
    let cap_s = secs_between(started(&r), capped_at);
    let g = run_regimes(run).unwrap();
    let shares: Vec<String> = run
        .sched_intervals
        .iter()
        .filter_map(|iv| iv.runq_share())
        .map(|f| format!("{:.0}", 100.0 * f))
        .collect();
    let psi: Vec<String> = run
        .sched_intervals
        .iter()
        .filter_map(|iv| Some(100.0 * iv.host_some_us? as f64 / (iv.duration_s * 1e6)))
        .map(|f| format!("{f:.0}"))
        .collect();
    let own: Vec<u64> = run.ops[0].intervals.iter().map(|i| i.count).collect();
    eprintln!(
        "CPU cap from {cap_s:.2} s; I/Os per interval {own:?}; sessions' run-queue % \
         {shares:?}; host PSI cpu some % {psi:?}; {}",
        g.sentence
    );
    // The construction holds: before the cap the sessions used more CPU a second than it
    // gives.
    let before: Vec<_> = run
        .sched_intervals
        .iter()
        .filter(|iv| iv.start_s >= 1.0 && iv.start_s + iv.duration_s <= cap_s)
        .collect();
    let used = before.iter().map(|iv| iv.run_ns as f64).sum::<f64>()
        / before.iter().map(|iv| iv.duration_s).sum::<f64>();
    let given = CAP_QUOTA_US as f64 * 1e3 / (CAP_PERIOD_US as f64 / 1e6);
    assert!(
        used > given,
        "the sessions used {:.1} ms of CPU a second, the cap gives {:.1}: it cannot starve them",
        used / 1e6,
        given / 1e6
    );
    let c = g
        .changes
        .iter()
        .find(|c| c.cause == RegimeCause::HostCpu)
        .unwrap_or_else(|| panic!("no host-cpu change: {}", g.sentence));
    assert!(
        (c.at_s - cap_s).abs() <= 2.0,
        "host CPU at {:.2} s, the cap at {cap_s:.2} s: {}",
        c.at_s,
        g.sentence
    );
    assert!(c.to_iops < c.from_iops, "{}", g.sentence);
    let h = c.runq.expect("the shares are recorded");
    assert!(h.low_rate > h.high_rate, "{h:?}");
    for x in &g.changes {
        assert_eq!(
            x.cause,
            RegimeCause::HostCpu,
            "a cause other than the host's CPU named for a starved iolens: {}",
            g.sentence
        );
    }
    assert!(g.sentence.contains("the host's CPU, not the storage"));
    assert!(g.sentence.contains("while iolens was starved of CPU"));
    assert!(!g.sentence.contains("credits"), "{}", g.sentence);
    // The results file carries it: the stored analysis names the cause, with the shares.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let changes = &doc["analysis"]["runs"][0]["regimes"]["changes"];
    assert!(
        changes.as_array().is_some_and(|a| a
            .iter()
            .any(|x| x["cause"] == "host-cpu" && x["runq"].is_object())),
        "{changes}"
    );
    // The summary `run` printed, and `show`, say it.
    // (Prose is broken between words to the terminal's width: compared with its spaces joined.)
    let words = |b: &[u8]| -> String {
        String::from_utf8_lossy(b)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    // (The summary is text for people: stdout, or stderr where stdout carries results.)
    let printed = words(&[out.stdout.as_slice(), out.stderr.as_slice()].concat());
    assert!(
        printed.contains("waited for the host's CPU, not the storage"),
        "{printed}"
    );
    assert!(!printed.contains("credits"), "{printed}");
    let shown = bin().arg("show").arg(&json).output().unwrap();
    let text = words(&shown.stdout);
    assert!(text.contains("the host's CPU, not the storage"), "{text}");
    assert!(!text.contains("credits"), "{text}");
}

/// The cap of [`iolens_starved_of_cpu_is_named_the_host_cpu_not_the_storage`]: 1 ms (the
/// kernel's smallest quota) per half second.
const CAP_QUOTA_US: u64 = 1_000;
const CAP_PERIOD_US: u64 = 500_000;

/// What the device itself did over a stretch of a run (its `/proc/diskstats` counters per
/// interval, `device_intervals`, taken by overlap): 4 KiB reads, or writes, a second, from its
/// sectors (the block layer may merge two adjacent requests into one it counts once).
fn device_rate(r: &Results, st: &RateStretch, what: Dir) -> f64 {
    let run = &r.runs[st.run];
    assert!(
        !run.device_intervals.is_empty(),
        "run {} recorded the device's counters",
        st.run
    );
    let mut n = 0.0;
    for iv in &run.device_intervals {
        let (a, b) = (iv.start_s, iv.start_s + iv.duration_s);
        let overlap = (st.to_s.min(b) - st.from_s.max(a)).max(0.0);
        if overlap > 0.0 && iv.duration_s > 0.0 {
            let bytes = if what == Dir::Read {
                iv.read_bytes
            } else {
                iv.write_bytes
            };
            n += bytes as f64 / 4096.0 * overlap / iv.duration_s;
        }
    }
    n / (st.to_s - st.from_s)
}

/// Wall-clock time of `s` seconds into run `run`'s measurement.
fn at(r: &Results, run: usize, s: f64) -> SystemTime {
    humantime::parse_rfc3339(&r.runs[run].started).expect("started is RFC 3339")
        + Duration::from_secs_f64(s)
}

/// A calibration's burst (or write cache) checked against the construction: `burst`/`base`
/// the limits the controller set, `cliff` when it lowered the limit. The burst figure is held
/// to what the device delivered over the stretch iolens picked (a busy host may not reach the
/// limit: 2 sessions of 2.12 ms reads are 943 IOPS under a 1000 IOPS limit), that delivery to
/// the limit (never above it, and clearly a burst), and the stretch to the construction: wholly
/// before the cliff; the sustained figure to the baseline limit (a rate any host here reaches)
/// over a stretch wholly after it. Tolerance 3 % (the issue's); the delivery may pass the limit
/// by a 100 ms throttle slice at each end of its stretch (blk-throttle grants in slices).
fn check_against_construction(
    r: &Results,
    b: &CalibrationBurst,
    what: Dir,
    (burst, base): (u64, u64),
    cliff: SystemTime,
    text: &str,
) {
    let bs = b.burst_stretch.expect("the burst's stretch");
    let ss = b.sustained_stretch.expect("the sustained stretch");
    let delivered = device_rate(r, &bs, what);
    let after = device_rate(r, &ss, what);
    // 3 %, and a throttle slice at each end of a stretch.
    let slack = |st: &RateStretch| 0.03 + 0.2 / (st.to_s - st.from_s);
    eprintln!(
        "burst {:.1} IOPS over run {} {:.1}–{:.1} s, the device delivered {delivered:.1} there          (limit {burst}); sustained {:.1} over run {} {:.1}–{:.1} s, the device {after:.1}          (limit {base})",
        b.burst_iops, bs.run, bs.from_s, bs.to_s, b.sustained_iops, ss.run, ss.from_s, ss.to_s
    );
    assert!(
        (b.burst_iops / delivered - 1.0).abs() <= 0.03,
        "burst {:.1} IOPS, the device delivered {delivered:.1} over the same stretch: {text}",
        b.burst_iops
    );
    assert!(
        delivered <= burst as f64 * (1.0 + slack(&bs)),
        "the device delivered {delivered:.1} under a {burst} limit: {text}"
    );
    assert!(
        delivered >= 2.0 * base as f64,
        "the burst stretch delivered {delivered:.1}: not the burst of {burst} (baseline {base}): \
         {text}"
    );
    assert!(
        (b.sustained_iops / base as f64 - 1.0).abs() <= 0.03,
        "sustained {:.1} vs the {base} limit: {text}",
        b.sustained_iops
    );
    // Against the device's own count over the stretch: its counters are read on their own
    // clock and spread over iolens' intervals by overlap, so each end of the stretch may be
    // off by a slice too (a 2.9 s last regime under busy loops: iolens 250.0, the device 236.4).
    assert!(
        (b.sustained_iops / after - 1.0).abs() <= slack(&ss),
        "sustained {:.1}, the device delivered {after:.1}: {text}",
        b.sustained_iops
    );
    // Each stretch on its side of the cliff (to within the interval that holds it).
    let edge = |run: usize, s: f64| secs_between(cliff, at(r, run, s));
    assert!(
        edge(bs.run, bs.to_s) <= 1.0,
        "the burst stretch ends {:+.2} s after the cliff: {text}",
        edge(bs.run, bs.to_s)
    );
    assert!(
        edge(ss.run, ss.from_s) >= -1.0,
        "the sustained stretch starts {:+.2} s from the cliff: {text}",
        edge(ss.run, ss.from_s)
    );
}

/// Runs `calibrate` with `args` in the limit's cgroup while the controller (`what`: a read
/// burst or a write cache) changes the limit; returns the results, the standard output and
/// the controller's record (when it lowered the limit, and its count then).
fn calibrate_under(
    lo: &Loop,
    lim: &Limit,
    what: Dir,
    limits: (u64, u64),
    credits: f64,
    args: &[String],
    json: &Path,
) -> (Results, String, (SystemTime, u64)) {
    let stop = AtomicBool::new(false);
    let (cliff, out) = std::thread::scope(|s| {
        let h = s.spawn(|| bucket(lo, lim, what, limits, credits, &stop));
        let out = lim.command_rt(args).output().unwrap();
        stop.store(true, Ordering::Relaxed);
        (h.join().unwrap(), out)
    });
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cliff = cliff.expect("the controller lowered the limit during the calibration");
    (Results::read_file(json).unwrap(), stdout, cliff)
}

/// The named change in a held point's regimes (a loaded VM can dip a rate too; the cliff is the
/// change named for the controller's cause), and how far from the controller's change it was
/// placed, seconds.
fn cliff_offset(r: &Results, run: usize, cause: RegimeCause, cliff: SystemTime) -> f64 {
    let g = run_regimes(&r.runs[run]).unwrap();
    let series: Vec<u64> = r.runs[run].ops[0]
        .intervals
        .iter()
        .map(|i| i.count)
        .collect();
    eprintln!("held point, I/Os per interval: {series:?}; {}", g.sentence);
    let ch = g
        .changes
        .iter()
        .find(|c| c.cause == cause)
        .unwrap_or_else(|| panic!("no {cause:?} change: {}", g.sentence));
    secs_between(cliff, at(r, run, ch.at_s))
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
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
    let Some(lo) = Loop::new_in(64 << 20, "/dev/shm") else {
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
    let dev = lo.dev.display().to_string();
    let mut args = strings(&[
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
        &dev,
        "--json",
    ]);
    args.push(json.display().to_string());
    let (r, stdout, (cliff, _)) =
        calibrate_under(&lo, &lim, Dir::Read, (burst, base), credits, &args, &json);
    let c = r.calibration.as_ref().unwrap();
    let held = c.findings.sustain.expect("the chosen point was held");
    let an = iolens::analysis::analyse(&r);
    let b = an
        .calibration
        .as_ref()
        .and_then(|a| a.burst.clone())
        .unwrap_or_else(|| panic!("no burst found: {stdout}"));
    eprintln!("{}", b.sentence);
    assert!(b.max_in_burst, "{stdout}");
    check_against_construction(&r, &b, Dir::Read, (burst, base), cliff, &stdout);
    // The cliff, in wall-clock time, where the controller lowered the limit.
    let off = cliff_offset(&r, held.run, RegimeCause::CreditsExhausted, cliff);
    eprintln!("cliff {off:+.2} s from the controller's change");
    assert!(off.abs() <= 2.0, "cliff {off:+.2} s off: {stdout}");
    // Said as a burst, and the sustained figure as the answer.
    assert!(stdout.contains("IOPS sustained"), "{stdout}");
    assert!(stdout.contains("inside a burst"), "{stdout}");
}

/// The write cache through `calibrate --phases writes --sustain`: the device takes 1000 writes
/// a second (and at most 8 MB/s, so the 128 KiB commit writes cannot empty the cache alone)
/// until the bytes written, less what it drains at the baseline's 250 4 KiB writes a second,
/// pass 45 MB; then 250. The commit steps and the random-write ramp run inside the cache, the
/// held point runs into the cliff (6 to 13 s in, from the fastest and slowest commit writes
/// seen here). calibrate must report the sustained write rate as the answer, the cache's rate
/// as a write cache, the cliff where the controller put it and the bytes written to it.
#[test]
fn calibrate_reports_the_write_cache_and_sustained_writes() {
    if !root_or_skip("the write-cache emulator (loop device, cgroup I/O limit)") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(lo) = Loop::new_in(64 << 20, "/dev/shm") else {
        assert!(!common::ci(), "no loop device under CI");
        return;
    };
    let Some(lim) = Limit::new(&lo.majmin, Dir::Write) else {
        assert!(!common::ci(), "no cgroup I/O controller under CI");
        return;
    };
    lim.cap_bytes(8_000_000);
    let (burst, base) = (1000u64, 250u64);
    let credits = 45e6;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let dev = lo.dev.display().to_string();
    let mut args = strings(&[
        "calibrate",
        "--phases",
        "writes",
        "--bs",
        "4k",
        "--max-sessions",
        "2",
        "--budget",
        "8s",
        "--max-latency",
        "100ms",
        "--sustain",
        "24s",
        "--no-progress",
        "--target",
        &dev,
        "--disposable-target",
        &dev,
        "--json",
    ]);
    args.push(json.display().to_string());
    let (r, stdout, (cliff, written)) =
        calibrate_under(&lo, &lim, Dir::Write, (burst, base), credits, &args, &json);
    let c = r.calibration.as_ref().unwrap();
    let held = c
        .findings
        .sustain_write
        .expect("the chosen write point was held");
    let an = iolens::analysis::analyse(&r);
    let b = an
        .calibration
        .as_ref()
        .and_then(|a| a.write_cache.clone())
        .unwrap_or_else(|| panic!("no write cache found: {stdout}"));
    eprintln!("{}", b.sentence);
    // The read burst's analysis finds nothing here (no read ramp), the write cache's does.
    assert!(an.calibration.as_ref().unwrap().burst.is_none());
    assert!(b.max_in_burst, "{stdout}");
    check_against_construction(&r, &b, Dir::Write, (burst, base), cliff, &stdout);
    let off = cliff_offset(&r, held.run, RegimeCause::WriteCacheFull, cliff);
    eprintln!(
        "cliff {off:+.2} s from the controller's change; {} written to it by iolens' count, \
         {written} B by the device's",
        b.bytes_before
    );
    assert!(off.abs() <= 2.0, "cliff {off:+.2} s off: {stdout}");
    // Bytes to the cliff: what the device had written when the controller found the cache
    // full; 2 s of writes at the burst rate (the cliff's tolerance) either way.
    let slack = 2.0 * burst as f64 * 4096.0;
    assert!(
        (b.bytes_before as f64 - written as f64).abs() <= slack,
        "{} B written to the cliff, the device had written {written} B: {stdout}",
        b.bytes_before
    );
    assert!(stdout.contains("write IOPS sustained"), "{stdout}");
    assert!(stdout.contains("a write cache"), "{stdout}");
    assert!(stdout.contains("before the cache filled"), "{stdout}");
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
    let r = results_of(&out, &json);
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
    // What the device itself completed over the rounds the verdict rests on (its own
    // /proc/diskstats): iolens' steady figure must be the device's. The 400 set on the cgroup
    // bounds it from above; on this kernel (6.18) blk-throttle let 227-241 random 8 KiB
    // io_uring writes a second through a 400 limit (stop 31 saw 405 on an earlier kernel), so
    // the limit is an upper bound here, and the device's count the measure.
    let last = &pc.rounds[pc.rounds.len() - st.rounds as usize..];
    let (mut writes, mut secs) = (0u64, 0.0f64);
    for &i in last {
        for d in &r.runs[i].device_intervals {
            writes += d.writes;
            secs += d.duration_s;
        }
    }
    assert!(secs > 0.0, "the rounds carry the device's own counters");
    let delivered = writes as f64 / secs;
    eprintln!(
        "steady {:.1} IOPS by iolens, {delivered:.1} writes/s by the device",
        st.average
    );
    assert!(
        (st.average / delivered - 1.0).abs() <= 0.05,
        "iolens {:.1} vs device {delivered:.1}: {}",
        st.average,
        pc.sentence
    );
    assert!(st.average <= 400.0 * 1.05, "{}", pc.sentence);
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
    let r = results_of(&out, &json);
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
