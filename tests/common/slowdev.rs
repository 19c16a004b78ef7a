//! A block device slow by construction: a loop device over the one file of a FUSE filesystem
//! (`slowfuse.c`, built here with gcc against Debian's libfuse3-dev) that sleeps a known delay
//! before serving each read. Every read the loop device issues reaches the FUSE daemon
//! (direct_io), so each takes at least the delay and `/proc/diskstats` of the loop device
//! shows it as service time. Needs root, gcc, pkg-config and fuse3.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The slow device; dropping it detaches the loop device, unmounts and stops the daemon.
pub struct SlowDevice {
    /// `/dev/loopN`.
    pub dev: String,
    /// `loopN`, its name in /proc/diskstats and /sys/block.
    pub name: String,
    /// What each read of the backing file sleeps before it is served.
    pub delay: Duration,
    mnt: PathBuf,
    daemon: Child,
    /// The queue depth to put back at drop (`/sys/block/loopN/queue/nr_requests`, its value).
    nr_requests_was: Option<(String, String)>,
    _dir: tempfile::TempDir,
}

/// Builds `slowfuse` for one device, in target/; its path or why not.
fn build_slowfuse() -> Result<PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/slowfuse.c");
    let out_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-helpers");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    // One file per device: tests of one binary make devices at the same time, and each removes
    // its file once its daemon runs (a shared path was removed under another test's `chrt`
    // before it exec'd it: exit 127).
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let bin = out_dir.join(format!("slowfuse-{}-{n}", std::process::id()));
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "fuse3"])
        .output()
        .map_err(|e| format!("pkg-config: {e}"))?;
    if !flags.status.success() {
        return Err("pkg-config finds no fuse3 (apt-get install libfuse3-dev fuse3)".into());
    }
    let flags = String::from_utf8_lossy(&flags.stdout).into_owned();
    let out = Command::new("gcc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&bin)
        .arg(&src)
        .args(flags.split_whitespace())
        .output()
        .map_err(|e| format!("gcc: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "gcc slowfuse.c: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(bin)
}

/// How a [`SlowDevice`] is made beyond its delay.
#[derive(Clone, Debug, Default)]
pub struct SlowOptions {
    /// Serve this existing file (e.g. an iolens scratch file) instead of a new one.
    pub backing: Option<PathBuf>,
    /// Attach the loop device with direct I/O: it then submits its reads asynchronously, so as
    /// many are in flight as its queue takes (without it a loop device serves one at a time).
    pub direct_io: bool,
    /// Lower the loop device's queue (`/sys/block/loopN/queue/nr_requests`; with scheduler
    /// `none` these are its tags): at most this many requests in flight, as a LUN queue.
    pub nr_requests: Option<u32>,
    /// Run the FUSE daemon SCHED_FIFO, so that its sleeps end on time on a busy host.
    pub fifo: bool,
}

impl SlowDevice {
    /// A `size`-byte device whose every read takes at least `delay`; `None` (with a note) when
    /// not root or the FUSE tools are missing, except under CI, where that fails the test.
    pub fn new(delay: Duration, size: u64) -> Option<SlowDevice> {
        SlowDevice::with(delay, size, &SlowOptions::default())
    }

    /// [`SlowDevice::new`] made as `o` says (`size` unused with a backing file).
    pub fn with(delay: Duration, size: u64, o: &SlowOptions) -> Option<SlowDevice> {
        if !super::root_or_skip("a FUSE-backed slow loop device") {
            return None;
        }
        let bin = match build_slowfuse() {
            Ok(b) => b,
            Err(e) => {
                assert!(!super::ci(), "slow device: {e}");
                eprintln!("note: slow-device test skipped: {e}");
                return None;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let backing = match &o.backing {
            Some(b) => b.clone(),
            None => {
                let backing = dir.path().join("backing");
                let f = std::fs::File::create(&backing).unwrap();
                f.set_len(size).unwrap();
                backing
            }
        };
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        // The kernel takes no queue shorter than 4 (`blk_mq_update_nr_requests` raises it):
        // refused before anything is made, so that nothing is left behind.
        if let Some(n) = o.nr_requests {
            assert!(
                n >= MIN_NR_REQUESTS,
                "nr_requests {n}: the kernel takes no fewer than {MIN_NR_REQUESTS}"
            );
        }
        let mut cmd = if o.fifo {
            let mut c = Command::new("chrt");
            c.args(["-f", "50"]).arg(&bin);
            c
        } else {
            Command::new(&bin)
        };
        let daemon = cmd
            .arg(&backing)
            .arg(&mnt)
            .arg(delay.as_micros().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // From here on what is made is freed by the device's Drop, also when a check below
        // panics: the daemon and its mount now, the loop device once attached.
        let mut d = SlowDevice {
            dev: String::new(),
            name: String::new(),
            delay,
            mnt,
            daemon,
            nr_requests_was: None,
            _dir: dir,
        };
        let disk = d.mnt.join("disk");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !disk.exists() {
            if let Some(st) = d.daemon.try_wait().unwrap() {
                panic!("slowfuse exited ({st}) before mounting {}", d.mnt.display());
            }
            assert!(
                Instant::now() < deadline,
                "slowfuse did not mount {}",
                d.mnt.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Removed once running (under chrt it is exec'd after spawn returns).
        let _ = std::fs::remove_file(&bin);
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .args(o.direct_io.then_some("--direct-io=on"))
            .arg(&disk)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        d.dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        d.name = d.dev.trim_start_matches("/dev/").to_string();
        // A lowered queue is put back when the device is freed: loop devices are reused by
        // number, and the next test (or another process) must not inherit a 4-deep queue.
        if let Some(n) = o.nr_requests {
            let q = format!("/sys/block/{}/queue/nr_requests", d.name);
            d.nr_requests_was = Some((q.clone(), std::fs::read_to_string(&q).unwrap()));
            std::fs::write(&q, n.to_string()).unwrap();
            let now: u32 = std::fs::read_to_string(&q).unwrap().trim().parse().unwrap();
            assert_eq!(now, n, "{q} kept {now}");
        }
        Some(d)
    }

    /// A "LUN" for issue 27's tests: an iolens scratch file of `size` (iolens creates and
    /// marks it with one tiny read) at `scratch`, served by a slow loop device with direct I/O
    /// whose every read takes `delay` and whose queue holds `queue` requests (its daemon
    /// SCHED_FIFO); `None` (with a note) where that cannot be made, as [`SlowDevice::with`].
    pub fn lun(scratch: &Path, size: &str, delay: Duration, queue: u32) -> Option<SlowDevice> {
        if !super::root_or_skip("LUNs as slow loop devices") {
            return None;
        }
        super::ok(
            super::bin()
                .args(["run", "--size", size, "--ios", "1", "-q", "--target"])
                .arg(scratch)
                .output()
                .unwrap(),
        );
        SlowDevice::with(
            delay,
            0,
            &SlowOptions {
                backing: Some(scratch.to_path_buf()),
                direct_io: true,
                nr_requests: Some(queue),
                fifo: true,
            },
        )
    }
}

/// A LUN with a filesystem: an ext4 made on a [`SlowDevice::lun`] and mounted; unmounted (then
/// the device freed) when dropped.
pub struct MountedLun {
    pub dev: SlowDevice,
    pub mnt: PathBuf,
}

impl MountedLun {
    /// `n` LUNs (`lunI.dat`, mounted on `mntI` in `dir`), as [`SlowDevice::lun`] makes them.
    pub fn several(
        dir: &Path,
        n: usize,
        size: &str,
        delay: Duration,
        queue: u32,
    ) -> Option<Vec<MountedLun>> {
        let mut out = Vec::new();
        for i in 0..n {
            let dev = SlowDevice::lun(&dir.join(format!("lun{i}.dat")), size, delay, queue)?;
            super::ok(
                Command::new("mkfs.ext4")
                    .args(["-q", "-F", "-E", "nodiscard", &dev.dev])
                    .output()
                    .unwrap(),
            );
            let mnt = dir.join(format!("mnt{i}"));
            std::fs::create_dir(&mnt).unwrap();
            super::ok(
                Command::new("mount")
                    .arg(&dev.dev)
                    .arg(&mnt)
                    .output()
                    .unwrap(),
            );
            out.push(MountedLun { dev, mnt });
        }
        Some(out)
    }
}

impl Drop for MountedLun {
    fn drop(&mut self) {
        for _ in 0..50 {
            let ok = Command::new("umount")
                .arg(&self.mnt)
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The shortest request queue (`nr_requests`) the kernel takes.
pub const MIN_NR_REQUESTS: u32 = 4;

impl Drop for SlowDevice {
    fn drop(&mut self) {
        if let Some((q, was)) = &self.nr_requests_was {
            let _ = std::fs::write(q, was.trim());
        }
        if !self.dev.is_empty() {
            let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        }
        // The loop device lets go of the file asynchronously: retry the unmount briefly.
        for _ in 0..50 {
            let ok = Command::new("umount")
                .arg(&self.mnt)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// Reads completed and milliseconds spent reading, from /proc/diskstats, of block device `name`.
pub fn disk_reads(name: &str) -> (u64, u64) {
    let stats = std::fs::read_to_string("/proc/diskstats").unwrap();
    for line in stats.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(2) == Some(&name) {
            return (f[3].parse().unwrap(), f[6].parse().unwrap());
        }
    }
    panic!("{name} is not in /proc/diskstats");
}

/// Time of each of `n` `bs`-byte O_DIRECT reads of `dev` at offsets spread over its first
/// `span` bytes, one at a time.
pub fn direct_reads(dev: &str, n: usize, bs: usize, span: u64) -> Vec<Duration> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(dev)
        .unwrap();
    let layout = std::alloc::Layout::from_size_align(bs, 4096).unwrap();
    // SAFETY: the layout has a non-zero size; the buffer is freed below.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    // SAFETY: ptr points to bs bytes allocated above, used only in this function.
    let buf = unsafe { std::slice::from_raw_parts_mut(ptr, bs) };
    let blocks = span / bs as u64;
    let mut times = Vec::with_capacity(n);
    for i in 0..n as u64 {
        // A fixed stride over the span (no two reads of one block).
        let off = (i * 7919 % blocks) * bs as u64;
        let t = Instant::now();
        f.read_exact_at(buf, off).unwrap();
        times.push(t.elapsed());
    }
    // SAFETY: allocated above with this layout.
    unsafe { std::alloc::dealloc(ptr, layout) };
    times
}
