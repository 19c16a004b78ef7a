//! Runs over several targets (`--target a --target b …`, see `stripe`): the I/O spreads
//! evenly, counted by iolens per target and by each loop device's own /proc/diskstats; one
//! target that fails a check refuses the whole run before anything is written anywhere; the
//! same target named twice is refused; the per-target series sum exactly to the run's.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::loopdev::Loop;
use common::{bin, root_or_skip, scratch};
use iolens::results::Results;

const MB: u64 = 1 << 20;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Loop devices over `files`, or `None` (skipped, but not under CI) where there are none.
fn loops(files: &[PathBuf]) -> Option<Vec<Loop>> {
    let mut v = Vec::new();
    for f in files {
        match Loop::attach(f) {
            Some(l) => v.push(l),
            None => {
                assert!(std::env::var_os("CI").is_none(), "losetup failed under CI");
                eprintln!("note: loop devices unavailable here; skipped");
                return None;
            }
        }
    }
    // Let udev's probing of the new devices finish before anything is counted.
    let _ = Command::new("udevadm").arg("settle").status();
    Some(v)
}

/// A loop device's queue set to a scheduler and `nr_requests` of the test's choosing, put back
/// as it was when dropped (loop devices are reused by number: the next user must not inherit
/// them).
struct Queue {
    sys: String,
    was: (String, String),
}

impl Queue {
    /// Set `dev`'s scheduler to `sched` (one the kernel lists) and then its `nr_requests` to
    /// `n` (a scheduler change resets it), and check the kernel kept both.
    fn set(dev: &Loop, sched: &str, n: u32) -> Queue {
        let sys = format!("/sys/block/{}/queue", dev.name());
        let read = |f: &str| std::fs::read_to_string(format!("{sys}/{f}")).unwrap();
        let was = (active(&read("scheduler")), read("nr_requests"));
        let q = Queue {
            sys: sys.clone(),
            was,
        };
        std::fs::write(format!("{}/scheduler", q.sys), sched).unwrap();
        std::fs::write(format!("{}/nr_requests", q.sys), n.to_string()).unwrap();
        assert_eq!(active(&read("scheduler")), sched, "{}", q.sys);
        assert_eq!(read("nr_requests").trim(), n.to_string(), "{}", q.sys);
        q
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("{}/scheduler", self.sys), &self.was.0);
        let _ = std::fs::write(format!("{}/nr_requests", self.sys), self.was.1.trim());
    }
}

/// The bracketed (active) word of a `queue/scheduler` file: `[none] mq-deadline` → `none`.
fn active(s: &str) -> String {
    s.split_once('[')
        .and_then(|(_, r)| r.split_once(']'))
        .map_or_else(|| s.trim().to_string(), |(a, _)| a.to_string())
}

/// Disk `name`'s queue facts as the test reads them from sysfs: the `queue/scheduler` line,
/// `queue/nr_requests`, and its block-multiqueue tags summed over its hardware queues
/// (`mq/*/nr_tags`) with the count of those queues.
fn sysfs_queue(name: &str) -> (String, u32, u32, u32) {
    let q = format!("/sys/block/{name}/queue");
    let sched = std::fs::read_to_string(format!("{q}/scheduler")).unwrap();
    let nr = std::fs::read_to_string(format!("{q}/nr_requests")).unwrap();
    let (mut tags, mut hw) = (0, 0);
    for e in std::fs::read_dir(format!("/sys/block/{name}/mq")).unwrap() {
        let t = e.unwrap().path().join("nr_tags");
        if let Ok(s) = std::fs::read_to_string(t) {
            tags += s.trim().parse::<u32>().unwrap();
            hw += 1;
        }
    }
    (
        sched.trim().to_string(),
        nr.trim().parse().unwrap(),
        tags,
        hw,
    )
}

/// Completed reads and writes of block device `name` in /proc/diskstats.
fn disk_ios(name: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/diskstats").unwrap();
    for l in s.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() > 7 && f[2] == name {
            return f[3].parse::<u64>().unwrap() + f[7].parse::<u64>().unwrap();
        }
    }
    panic!("{name} not in /proc/diskstats");
}

fn load(p: &Path) -> Results {
    Results::read_file(p).unwrap()
}

/// Per-target series sum exactly to the run's: op by op, interval by interval.
fn check_sums(res: &Results) {
    let run = &res.runs[0];
    for o in &run.ops {
        let parts: Vec<_> = run
            .targets
            .iter()
            .filter_map(|t| t.ops.iter().find(|x| x.op == o.op))
            .collect();
        assert_eq!(
            parts.iter().map(|p| p.count).sum::<u64>(),
            o.count,
            "{}",
            o.op
        );
        assert_eq!(
            parts.iter().map(|p| p.bytes).sum::<u64>(),
            o.bytes,
            "{}",
            o.op
        );
        for (k, iv) in o.intervals.iter().enumerate() {
            let n: u64 = parts
                .iter()
                .filter_map(|p| p.intervals.get(k))
                .map(|i| i.count)
                .sum();
            assert_eq!(n, iv.count, "{} interval {k}", o.op);
        }
        let mut h = iolens::histogram::new_histogram();
        for p in &parts {
            h.add(p.hist.decode().unwrap()).unwrap();
        }
        assert_eq!(
            h,
            o.hist.decode().unwrap(),
            "{}: histograms merge exactly",
            o.op
        );
    }
}

/// Three loop devices over iolens-owned scratch files, random 8 KiB reads striped in 1 MiB
/// units: each gets a third of the I/O within 2 %, counted by iolens and by the kernel. Each
/// device is given its own scheduler and `nr_requests` first, and each target's queue facts in
/// the results (scheduler, `nr_requests`, block-multiqueue tags) and in the markdown's rows are
/// its own device's, as the test reads them from sysfs.
/// (The offsets are seeded, so iolens' own split is the same every time: its expected
/// deviation at 60,000 reads is about 0.6 %; the kernel counts one request per O_DIRECT read.)
#[test]
fn three_loop_devices_share_the_io_evenly_by_iolens_and_by_diskstats() {
    if !root_or_skip("striping over loop devices") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("lun{i}.dat")))
        .collect();
    for f in &files {
        scratch(f, 24 * MB, false);
    }
    let Some(devs) = loops(&files) else { return };
    // Each device gets its own queue facts (a scheduler the kernel offers, in turn, and its own
    // nr_requests), so a target given another's facts is seen.
    let offered: Vec<String> =
        std::fs::read_to_string(format!("/sys/block/{}/queue/scheduler", devs[0].name()))
            .unwrap()
            .split_whitespace()
            .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
            .collect();
    let _queues: Vec<Queue> = devs
        .iter()
        .zip([8, 24, 56])
        .enumerate()
        .map(|(i, (d, n))| Queue::set(d, &offered[i % offered.len()], n))
        .collect();
    let facts: Vec<_> = devs.iter().map(|d| sysfs_queue(d.name())).collect();
    let before: Vec<u64> = devs.iter().map(|d| disk_ios(d.name())).collect();
    let json = dir.path().join("r.json");
    let mut c = bin();
    c.args([
        "run",
        "--pattern",
        "randread",
        "--sessions",
        "3",
        "--ios",
        "60000",
    ]);
    c.args(["--no-progress", "--stripe-unit", "1M", "--json"])
        .arg(&json);
    for d in &devs {
        c.args(["--target", &d.0]);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let after: Vec<u64> = devs.iter().map(|d| disk_ios(d.name())).collect();
    let res = load(&json);
    let run = &res.runs[0];
    assert_eq!(run.targets.len(), 3);
    check_sums(&res);
    let total = run.total_count();
    assert_eq!(total, 60_000);
    let third = total as f64 / 3.0;
    for (i, t) in run.targets.iter().enumerate() {
        let n = t.total_count() as f64;
        assert!(
            (n - third).abs() <= 0.02 * third,
            "iolens counted {n} I/Os on {} (a third is {third})",
            t.target.path
        );
        let kernel = (after[i] - before[i]) as f64;
        assert!(
            (kernel - third).abs() <= 0.02 * third,
            "the kernel counted {kernel} requests on {} (a third is {third})",
            devs[i].0
        );
        // The target's own disk view in the results is that device's.
        assert_eq!(t.target.device, devs[i].name());
        let d = t.device.as_ref().expect("each target's disk counters");
        assert!(
            (d.reads as f64 - n).abs() <= 0.02 * n,
            "results: {} disk reads for {n} I/Os",
            d.reads
        );
        // Its queue facts are its own device's, as the test read them from sysfs.
        let (sched, nr, tags, hw) = &facts[i];
        // The active scheduler, and the ones the device offers.
        assert_eq!(
            t.target.scheduler,
            active(sched),
            "{}'s scheduler",
            devs[i].0
        );
        assert_eq!(t.target.schedulers, offered, "{}'s schedulers", devs[i].0);
        assert_eq!(
            t.target.nr_requests,
            Some(*nr),
            "{}'s nr_requests",
            devs[i].0
        );
        let q = t
            .queue
            .as_ref()
            .expect("each target's block-multiqueue tags");
        assert_eq!(q.disk, devs[i].name());
        assert_eq!(
            (q.driver_tags, q.hw_queues),
            (*tags, *hw),
            "{}'s tags",
            devs[i].0
        );
        assert_eq!(q.nr_requests, Some(*nr), "{}'s queue", devs[i].0);
    }
    let nrs: Vec<u32> = facts.iter().map(|f| f.1).collect();
    assert_eq!(nrs, [8, 24, 56], "the devices' queues as set");
    // Shown by `show` and `export --markdown`, one row per target.
    let show = common::ok_stdout(bin().arg("show").arg(&json));
    let md = common::ok_stdout(bin().arg("export").arg(&json).args(["--markdown", "-"]));
    for d in &devs {
        assert!(show.contains(&d.0), "show names {}: {show}", d.0);
        assert!(md.contains(&d.0), "markdown names {}", d.0);
    }
    assert!(show.contains("Targets (3"), "{show}");
    // Each target's scheduler is its active one, not the sysfs line of all it offers.
    for (sched, ..) in &facts {
        assert!(
            !show.contains(sched.as_str()),
            "show gives {sched} whole: {show}"
        );
    }
    // The markdown's per-target table gives each row its own device's queue facts.
    let cells = |l: &str| -> Vec<String> { l.split('|').map(|c| c.trim().to_string()).collect() };
    let header = md
        .lines()
        .find(|l| l.contains("| nr_requests |"))
        .map(cells)
        .unwrap_or_else(|| panic!("a per-target table with nr_requests: {md}"));
    let col = |name: &str| header.iter().position(|c| c == name).unwrap();
    for (d, (sched, nr, tags, _)) in devs.iter().zip(&facts) {
        let row = md
            .lines()
            .find(|l| l.starts_with('|') && cells(l).get(1) == Some(&d.0))
            .map(cells)
            .unwrap_or_else(|| panic!("a row for {}: {md}", d.0));
        assert_eq!(row[col("nr_requests")], nr.to_string(), "{}: {md}", d.0);
        assert_eq!(row[col("tags")], tags.to_string(), "{}: {md}", d.0);
        assert_eq!(row[col("scheduler")], active(sched), "{}: {md}", d.0);
    }
}

/// `--stripe per-session`: each session on one target, so a count split evenly over the
/// sessions lands evenly, exactly, on the targets (no root: scratch files).
#[test]
fn per_session_striping_gives_each_session_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut c = bin();
    c.args([
        "run",
        "--sessions",
        "4",
        "--ios",
        "4000",
        "--size",
        "4M",
        "--no-progress",
    ]);
    c.args(["--stripe", "per-session", "--interval", "100ms", "--json"])
        .arg(&json);
    for i in 0..2 {
        c.arg("--target").arg(dir.path().join(format!("s{i}.dat")));
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let res = load(&json);
    check_sums(&res);
    let run = &res.runs[0];
    let counts: Vec<u64> = run.targets.iter().map(|t| t.total_count()).collect();
    assert_eq!(counts, vec![2000, 2000]);
    // Verified reads on both scratch files (every read checked against its own target).
    let v = run.verify.as_ref().unwrap();
    assert_eq!(v.reads_verified, 4000);
    assert_eq!(v.errors, 0);
}

/// Striped writes on scratch files: every block stamped for its own target, so `iolens
/// verify` finds each file whole afterwards, and each has its own journal.
#[test]
fn striped_writes_leave_every_scratch_file_verifiable() {
    let dir = tempfile::tempdir().unwrap();
    let files = named(dir.path(), "w", 3);
    randrw_over(&files, "50", "6000", &["--stripe-unit", "64k"]);
    for f in &files {
        let o = bin().args(["verify", "--target"]).arg(f).output().unwrap();
        assert!(o.status.success(), "{}: {}", f.display(), stderr(&o));
    }
}

/// `n` paths `PREFIX0.dat`, … in `dir`.
fn named(dir: &Path, prefix: &str, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| dir.join(format!("{prefix}{i}.dat")))
        .collect()
}

/// A 2-session random read/write run of `ios` I/Os (`read_pct` % reads) striped over `files`
/// (4 MiB scratch files), with `more` arguments; it must succeed.
fn randrw_over(files: &[PathBuf], read_pct: &str, ios: &str, more: &[&str]) {
    let mut c = bin();
    c.args(["run", "--pattern", "randrw", "--read-pct", read_pct]);
    c.args([
        "--sessions",
        "2",
        "--ios",
        ios,
        "--size",
        "4M",
        "--no-progress",
    ]);
    c.args(more);
    for f in files {
        c.arg("--target").arg(f);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

fn foreign(path: &Path, size: u64) {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let data: Vec<u8> = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, data).unwrap();
}

/// One foreign (unmarked) file among iolens' own: the write run is refused whole, before any
/// I/O: no target's bytes change and the new scratch file named first is not even created.
#[test]
fn one_foreign_target_refuses_the_whole_run_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let own = dir.path().join("own.dat");
    scratch(&own, 4 * MB, true);
    let other = dir.path().join("other.dat");
    foreign(&other, 8 * MB);
    let new = dir.path().join("new.dat");
    let (own0, other0) = (std::fs::read(&own).unwrap(), std::fs::read(&other).unwrap());
    let out = bin()
        .args([
            "run",
            "--pattern",
            "randwrite",
            "--ios",
            "500",
            "--no-progress",
        ])
        .arg("--target")
        .arg(&new)
        .arg("--target")
        .arg(&own)
        .arg("--target")
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("other.dat") && e.contains("no target was written"),
        "{e}"
    );
    assert!(std::fs::read(&own).unwrap() == own0, "own.dat written");
    assert!(
        std::fs::read(&other).unwrap() == other0,
        "other.dat written"
    );
    assert!(!new.exists(), "new.dat created");
}

/// A block device not named disposable among scratch files: refused whole, nothing written
/// to the device's backing file or to the scratch file.
#[test]
fn a_device_not_named_disposable_refuses_the_whole_run() {
    if !root_or_skip("a loop device among the targets") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let own = dir.path().join("own.dat");
    scratch(&own, 4 * MB, true);
    let img = dir.path().join("disk.img");
    foreign(&img, 8 * MB);
    let Some(devs) = loops(std::slice::from_ref(&img)) else {
        return;
    };
    let (own0, img0) = (std::fs::read(&own).unwrap(), std::fs::read(&img).unwrap());
    let out = bin()
        .args([
            "run",
            "--pattern",
            "randwrite",
            "--ios",
            "500",
            "--no-progress",
        ])
        .arg("--target")
        .arg(&own)
        .args(["--target", &devs[0].0])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--disposable-target"),
        "{}",
        stderr(&out)
    );
    assert!(std::fs::read(&own).unwrap() == own0, "own.dat written");
    assert!(
        std::fs::read(&img).unwrap() == img0,
        "the device was written"
    );
}

/// The same file by two spellings or through a link, the same new path twice, and the same
/// device by two nodes: each refused before anything is created or read.
#[test]
fn the_same_target_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.dat");
    scratch(&a, MB, false);
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let dotted = dir.path().join("sub/../a.dat");
    let link = dir.path().join("link.dat");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    let new = dir.path().join("new.dat");
    let new_dotted = dir.path().join("sub/../new.dat");
    let mut pairs: Vec<(PathBuf, PathBuf)> = vec![
        (a.clone(), dotted),
        (a.clone(), link),
        (new.clone(), new_dotted),
    ];
    let mut _keep = None;
    if unsafe { libc::geteuid() } == 0 {
        if let Some(devs) = loops(std::slice::from_ref(&a)) {
            let node = dir.path().join("node");
            let rdev =
                std::os::unix::fs::MetadataExt::rdev(&std::fs::metadata(&devs[0].0).unwrap());
            let c = std::ffi::CString::new(node.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid path and mode.
            assert_eq!(
                unsafe { libc::mknod(c.as_ptr(), libc::S_IFBLK | 0o600, rdev) },
                0
            );
            pairs.push((PathBuf::from(&devs[0].0), node));
            _keep = Some(devs);
        }
    }
    for (x, y) in &pairs {
        let out = bin()
            .args(["run", "--ios", "10", "--no-progress", "--size", "1M"])
            .arg("--target")
            .arg(x)
            .arg("--target")
            .arg(y)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{x:?} {y:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("same target"), "{}", stderr(&out));
    }
    assert!(!new.exists(), "a refused run created its target");
}

/// `export --csv` of a run over two targets: the run's rows (`target` empty), then each
/// target's, named by its path; op by op and interval by interval the targets' counts and
/// bytes sum to the run's (issue 27).
#[test]
fn per_target_csv_rows_sum_to_the_runs() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let files = named(dir.path(), "c", 2);
    randrw_over(
        &files,
        "70",
        "3000",
        &["--interval", "100ms", "--json", json.to_str().unwrap()],
    );
    let csv_out = bin()
        .args(["export", json.to_str().unwrap(), "--csv", "-"])
        .output()
        .unwrap();
    assert!(csv_out.status.success(), "{}", stderr(&csv_out));
    let mut rd = csv::Reader::from_reader(&csv_out.stdout[..]);
    let hdr = rd.headers().unwrap().clone();
    assert_eq!(&hdr[16], "target");
    let rows: Vec<csv::StringRecord> = rd.records().map(|x| x.unwrap()).collect();
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    // (op, start_s) → (count, bytes) of the run's rows and of the targets' rows summed.
    type Sums = std::collections::BTreeMap<(String, String), (u64, u64)>;
    let (mut run, mut parts, mut per_target) = (Sums::new(), Sums::new(), [0u64; 2]);
    for x in &rows {
        let key = (x[3].to_string(), x[4].to_string());
        let (n, b): (u64, u64) = (x[6].parse().unwrap(), x[15].parse().unwrap());
        let into = match &x[16] {
            "" => &mut run,
            t => {
                let i = names.iter().position(|m| m == t).unwrap_or_else(|| {
                    panic!("row of unknown target {t}");
                });
                per_target[i] += n;
                &mut parts
            }
        };
        let e = into.entry(key).or_default();
        e.0 += n;
        e.1 += b;
    }
    assert!(!run.is_empty());
    assert_eq!(run, parts, "the targets' rows sum to the run's");
    let total: u64 = per_target.iter().sum();
    assert_eq!(total, 3000);
    assert!(per_target.iter().all(|&n| n > 0), "{per_target:?}");
    let res = load(&json);
    for (t, n) in res.runs[0].targets.iter().zip(per_target) {
        assert_eq!(t.total_count(), n, "{}", t.target.path);
    }
}

/// Corruption in one target of two: every report names that target and none the other, in
/// the results and in what the run prints (issue 27). The middle half of the second file's
/// data area is zeroed after iolens stamped it, so its reads there find no stamp; the first is
/// whole. (The 32 units spread evenly over the data area that opening a scratch file samples
/// to prove it is iolens' own, `target::scratch::prove_ownership`, are left intact, so the run
/// starts and its own reads find the damage.)
#[test]
fn corruption_in_one_target_of_two_names_that_target() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = (dir.path().join("good.dat"), dir.path().join("bad.dat"));
    scratch(&good, 4 * MB, false);
    scratch(&bad, 4 * MB, false);
    // The data area starts after the 1 MiB header area, in 512-byte units.
    let units = (std::fs::metadata(&bad).unwrap().len() - MB) / 512;
    let sampled: Vec<u64> = (0..32).map(|i| i * (units - 1) / 31).collect();
    let f = std::fs::OpenOptions::new().write(true).open(&bad).unwrap();
    for u in (units / 4..3 * units / 4).filter(|u| !sampled.contains(u)) {
        f.write_all_at(&[0u8; 512], MB + u * 512).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    let json = dir.path().join("r.json");
    let out = bin()
        .args([
            "run",
            "--ios",
            "2000",
            "--no-progress",
            "--on-corruption",
            "continue",
            "--json",
        ])
        .arg(&json)
        .arg("--target")
        .arg(&good)
        .arg("--target")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success(), "corruption went unnoticed");
    let res = load(&json);
    let reports = &res.runs[0].corruption;
    assert!(!reports.is_empty(), "{}", stderr(&out));
    let bad_name = bad.display().to_string();
    for r in reports {
        assert_eq!(r.target, bad_name, "{r:?}");
    }
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(
        said.contains(&format!(" on {bad_name} at offset")),
        "{said}"
    );
    assert!(!said.contains(&format!(" on {} at offset", good.display())));
}

/// Three ext4 filesystems, each on its own loop device over a file, mounted under `dir`
/// (unmounted and detached when dropped); `None` (skipped, not under CI) without root.
struct Mounts {
    dirs: Vec<PathBuf>,
    loops: Vec<Loop>,
}

impl Drop for Mounts {
    fn drop(&mut self) {
        for d in &self.dirs {
            let _ = Command::new("umount").arg(d).status();
        }
        self.loops.clear();
    }
}

fn mounts(dir: &Path, n: usize) -> Option<Mounts> {
    if !root_or_skip("db over several loop-device filesystems") {
        return None;
    }
    let imgs = named(dir, "fs", n);
    for i in &imgs {
        std::fs::File::create(i).unwrap().set_len(64 * MB).unwrap();
    }
    let loops = loops(&imgs)?;
    let mut m = Mounts {
        dirs: Vec::new(),
        loops: Vec::new(),
    };
    for (k, l) in loops.into_iter().enumerate() {
        let ok = Command::new("mkfs.ext4")
            .args([
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                l.dev(),
            ])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mkfs.ext4 {}", l.dev());
        let d = dir.join(format!("m{k}"));
        std::fs::create_dir(&d).unwrap();
        let ok = Command::new("mount")
            .arg(l.dev())
            .arg(&d)
            .status()
            .is_ok_and(|s| s.success());
        m.loops.push(l);
        assert!(ok, "mount {}", d.display());
        m.dirs.push(d);
    }
    Some(m)
}

fn db_over(cmd: &[&str], dirs: &[PathBuf]) -> Output {
    let mut c = bin();
    c.args(["db"]).args(cmd);
    for d in dirs {
        c.arg("--dir").arg(d);
    }
    c.output().unwrap()
}

/// `db` over several targets (issue 27), as a DBA spreads data files over LUNs: three
/// directories on three loop-device filesystems, three schemas. Schema s's table and index
/// live in the database file of directory s mod 3 (read back with SQLite itself); a run of
/// three sessions (one per schema) keeps a row per directory whose series sum exactly to the
/// run's, each naming its own loop device, and each device's own /proc/diskstats saw its
/// directory's reads (at least as many requests as iolens counted on it over its window).
#[test]
fn db_over_three_filesystems_keeps_each_ones_series_and_they_sum_to_the_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(m) = mounts(tmp.path(), 3) else {
        return;
    };
    let o = db_over(
        &["setup", "--schemas", "3", "--scale", "8M", "--quiet"],
        &m.dirs,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    for (k, d) in m.dirs.iter().enumerate() {
        let c = rusqlite::Connection::open(d.join("iolens-slob.db")).unwrap();
        let mut st = c
            .prepare("SELECT name FROM sqlite_master WHERE type IN ('table','index') AND name LIKE 't%' ORDER BY name")
            .unwrap();
        let names: Vec<String> = st
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            names,
            vec![format!("t{k}"), format!("t{k}_k")],
            "{}",
            d.display()
        );
    }
    let before: Vec<u64> = m.loops.iter().map(|l| disk_ios(l.name())).collect();
    let json = tmp.path().join("db.json");
    let mut c = bin();
    c.args([
        "db",
        "run",
        "--sessions",
        "3",
        "--duration",
        "2s",
        "-q",
        "--json",
    ])
    .arg(&json);
    for d in &m.dirs {
        c.arg("--dir").arg(d);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let after: Vec<u64> = m.loops.iter().map(|l| disk_ios(l.name())).collect();
    let res = load(&json);
    let run = &res.runs[0];
    assert_eq!(run.targets.len(), 3);
    check_sums(&res);
    for (k, t) in run.targets.iter().enumerate() {
        assert_eq!(
            t.target.path,
            m.dirs[k].join("iolens-slob.db").display().to_string()
        );
        assert_eq!(t.target.device, m.loops[k].name(), "{:?}", t.target);
        let reads = t.ops.iter().find(|o| o.op == "read").map_or(0, |o| o.count);
        assert!(reads > 0, "no reads on {}", m.dirs[k].display());
        let dev = t.device.as_ref().expect("the target's disk counters");
        assert!(dev.reads > 0, "{dev:?}");
        assert!(
            after[k] - before[k] >= dev.reads,
            "{}: /proc/diskstats saw {} requests, iolens counted {} within them",
            m.loops[k].name(),
            after[k] - before[k],
            dev.reads
        );
    }
    // The run's block reads are the three directories' together.
    let total = run.op("read").unwrap().count;
    assert_eq!(
        total,
        run.targets
            .iter()
            .map(|t| t.ops.iter().find(|o| o.op == "read").map_or(0, |o| o.count))
            .sum::<u64>()
    );
    let o = db_over(&["drop"], &m.dirs);
    assert!(o.status.success(), "{}", stderr(&o));
    for d in &m.dirs {
        assert!(!d.join("iolens-slob.db").exists());
    }
}

/// Safety across the directories of `db`: one directory holding a database file iolens did not
/// create refuses the whole setup before anything is created in the others; a layout run with
/// its directories in another order, or one missing, is refused before any session starts.
#[test]
fn db_over_several_directories_refuses_whole_when_one_fails_a_check() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = named(tmp.path(), "d", 3);
    for d in &dirs {
        std::fs::create_dir(d).unwrap();
    }
    // Not iolens': a database file of someone else's in the third directory.
    let c = rusqlite::Connection::open(dirs[2].join("iolens-slob.db")).unwrap();
    c.execute_batch("CREATE TABLE precious(x); INSERT INTO precious VALUES (42);")
        .unwrap();
    drop(c);
    let o = db_over(&["setup", "--schemas", "3", "--scale", "8M", "-q"], &dirs);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not created by `iolens db setup`"),
        "{}",
        stderr(&o)
    );
    for d in &dirs[..2] {
        assert!(
            !d.join("iolens-slob.db").exists(),
            "{} created",
            d.display()
        );
    }
    std::fs::remove_file(dirs[2].join("iolens-slob.db")).unwrap();
    // Fewer schemas than directories cannot place one in each.
    let o = db_over(&["setup", "--schemas", "2", "--scale", "8M", "-q"], &dirs);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("at least 3 schemas"), "{}", stderr(&o));
    let o = db_over(&["setup", "--schemas", "3", "--scale", "8M", "-q"], &dirs);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut swapped = dirs.clone();
    swapped.swap(0, 1);
    for (given, says) in [
        (swapped.clone(), "give the directories in the order"),
        (dirs[..2].to_vec(), "part 1 of a layout over 3"),
        (
            vec![dirs[0].clone(), dirs[0].clone()],
            "are the same directory",
        ),
    ] {
        let mut a = vec!["run", "--sessions", "3", "--duration", "1s", "-q"];
        a.push("--seed");
        a.push("1");
        let o = db_over(&a, &given);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(says), "{given:?}: {}", stderr(&o));
    }
    let o = db_over(&["drop"], &dirs);
    assert!(o.status.success(), "{}", stderr(&o));
}
