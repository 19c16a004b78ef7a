//! Readers of /proc and /sys: CPU (getrusage, /proc/stat, schedstat), the block device's own
//! counters (/proc/diskstats), and facts about the host, filesystem and device.
//!
//! A run takes a [`SysSnapshot`] at the start of measurement and one at the end;
//! [`SysSnapshot::delta`] turns the pair into the `CpuStats` and `DeviceStats` of the results.
//! Nothing here is on the I/O hot path.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::Instant;

use crate::results::{CpuStats, DeviceStats, Environment, TargetInfo};

/// User and system CPU seconds of this process (getrusage RUSAGE_SELF).
pub(crate) fn rusage_self() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// System-wide CPU jiffies from the first line of /proc/stat.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuTimes {
    pub(crate) busy: u64,
    pub(crate) iowait: u64,
    pub(crate) total: u64,
}

/// Read /proc/stat's aggregate cpu line.
pub(crate) fn cpu_times() -> Option<CpuTimes> {
    let s = fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 5 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest is included in user)
    let idle = v[3];
    let iowait = v[4];
    let total: u64 = v.iter().take(8).sum();
    Some(CpuTimes {
        busy: total - idle - iowait,
        iowait,
        total,
    })
}

/// Raise this process's soft limit on open descriptors to its hard limit (a run gives each
/// session a descriptor of its own; the usual soft limit, 1024, is below SLOB-sized session
/// counts). Nothing happens where the soft limit already is the hard one.
pub(crate) fn raise_nofile_limit() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// The soft locked-memory limit (`RLIMIT_MEMLOCK`) in bytes; `None` when unlimited or unknown.
pub(crate) fn memlock_limit() -> Option<u64> {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit on a valid struct.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut l) } == 0;
    (ok && l.rlim_cur != libc::RLIM_INFINITY).then_some(l.rlim_cur)
}

/// Kernel thread id of the calling thread.
pub(crate) fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// (time on CPU ns, time runnable but waiting on a run queue ns) of a thread of this process.
pub(crate) fn schedstat(tid: i32) -> Option<(u64, u64)> {
    let s = fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let mut it = s.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// The host's CPU pressure: microseconds in which at least one runnable task waited for a CPU
/// (`/proc/pressure/cpu`, "some" total), None where the kernel has no PSI.
pub(crate) fn cpu_pressure_some_us() -> Option<u64> {
    let s = fs::read_to_string("/proc/pressure/cpu").ok()?;
    let line = s.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// The session threads' scheduling read at one interval edge.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SchedEdge {
    /// Threads read (a thread that has exited keeps its last reading).
    pub(crate) threads: u32,
    /// Their time on a CPU, summed, ns.
    pub(crate) run_ns: u64,
    /// Their time runnable but waiting for a CPU, summed, ns.
    pub(crate) runq_ns: u64,
    /// [`cpu_pressure_some_us`] then.
    pub(crate) host_some_us: Option<u64>,
    /// The device's own kernel threads since the previous edge (see [`DeviceThreads`]).
    pub(crate) device: ThreadsWait,
}

/// Kernel threads' scheduling over one interval: how many, and their run-queue wait summed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct ThreadsWait {
    pub(crate) threads: u32,
    pub(crate) runq_ns: u64,
}

/// Whether a kernel thread's name names block device `dev`: a workqueue worker shows the
/// workqueue it runs (`kworker/u8:3+loop0`) or ran last (`kworker/u8:3-loop0`) after its own
/// name, and a driver's own threads carry the device's name (`nbd0-recv` → workers
/// `kworker/u9:1+nbd0-recv`); a word of the name (split at anything not a letter or a digit)
/// must equal `dev`, so that `loop1` does not name `loop10`.
pub(crate) fn kthread_names_device(comm: &str, dev: &str) -> bool {
    let named = match comm.strip_prefix("kworker/") {
        Some(w) => match w.find(['+', '-']) {
            Some(i) => &w[i + 1..],
            None => return false,
        },
        None => comm,
    };
    named
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| word == dev)
}

/// The run-queue wait of the kernel threads that serve a block device's requests: the loop
/// driver's workers (`kworker/u8:3+loop0`) read the backing file for each request, so while
/// they wait for a CPU the device's requests wait with them, whatever the storage under them
/// does. The kernel's threads are kthreadd's children (`/proc/2/task/2/children`); a thread's
/// name is read once, except an unbound workqueue worker's (`kworker/u…`), which names the
/// workqueue it runs or ran last and is read at every edge with its run-queue wait. A thread's
/// wait since the previous edge counts when its name named the device at either edge (a
/// worker of the shared pool may have run other work items in between too).
///
/// Cheap by design: it runs in iolens' own process, so what it costs is taken from the
/// sessions' CPU on a starved host (a scan of every process under a 2 ms-a-second CPU cap
/// took most of it). Where the kernel has no `children` file nothing is read (0 threads).
#[derive(Debug, Default)]
pub(crate) struct DeviceThreads {
    /// Kernel thread id → whether its fixed name names the device (None: an unbound worker,
    /// whose name changes).
    fixed: std::collections::HashMap<i32, Option<bool>>,
    /// Thread id → (named the device, run-queue wait ns) at the previous edge, for the unbound
    /// workers and the threads named after the device.
    last: std::collections::HashMap<i32, (bool, u64)>,
}

impl DeviceThreads {
    /// The threads' wait since the previous call (none at the first).
    pub(crate) fn read(&mut self, dev: &str) -> ThreadsWait {
        let mut out = ThreadsWait::default();
        let Ok(kids) = fs::read_to_string("/proc/2/task/2/children") else {
            return out;
        };
        let mut now = std::collections::HashMap::with_capacity(self.last.len());
        let mut fixed = std::collections::HashMap::with_capacity(self.fixed.len());
        for pid in kids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            let kind = match self.fixed.get(&pid) {
                Some(k) => *k,
                None => match kthread_name(pid) {
                    Some(n) if n.starts_with("kworker/u") => None,
                    Some(n) => Some(kthread_names_device(&n, dev)),
                    None => continue,
                },
            };
            fixed.insert(pid, kind);
            let named = match kind {
                Some(false) => continue,
                Some(true) => true,
                None => match kthread_name(pid) {
                    Some(n) => kthread_names_device(&n, dev),
                    None => continue,
                },
            };
            let Some(w) = kthread_runq_ns(pid) else {
                continue;
            };
            if let Some(&(was, w0)) = self.last.get(&pid) {
                if named || was {
                    out.threads += 1;
                    out.runq_ns += w.saturating_sub(w0);
                }
            }
            now.insert(pid, (named, w));
        }
        self.fixed = fixed;
        self.last = now;
        out
    }
}

/// A kernel thread's name as `/proc/PID/stat` gives it (a workqueue worker's with the
/// workqueue it runs or ran last; `/proc/PID/comm` is cut at 15 bytes on older kernels).
fn kthread_name(pid: i32) -> Option<String> {
    Some(ProcStat::of(pid)?.name()?.to_string())
}

/// A process's `/proc/PID/stat` line: its name (`comm`, in parentheses, which may itself hold
/// `)` and spaces) and the fields after the name's last `)`, read by their number in proc(5).
pub(crate) struct ProcStat {
    line: String,
    /// The name's closing `)`: the line's last.
    close: usize,
}

impl ProcStat {
    /// Process (or thread) `pid`'s line; `None` once it is gone.
    pub(crate) fn of(pid: impl std::fmt::Display) -> Option<ProcStat> {
        ProcStat::parse(fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// A line as the kernel writes it; `None` without a name's `)`.
    pub(crate) fn parse(line: String) -> Option<ProcStat> {
        let close = line.rfind(')')?;
        Some(ProcStat { line, close })
    }

    /// The name (between the first `(` and the last `)`).
    pub(crate) fn name(&self) -> Option<&str> {
        self.line.get(self.line.find('(')? + 1..self.close)
    }

    /// Field `n` of proc(5), numbered from 1 (the pid); 3, the state, is the first after the
    /// name.
    fn field(&self, n: usize) -> Option<&str> {
        self.line[self.close + 1..]
            .split_whitespace()
            .nth(n.checked_sub(3)?)
    }

    /// The state (`R`, `S`, `D`, `Z`, …).
    pub(crate) fn state(&self) -> Option<char> {
        self.field(3)?.chars().next()
    }

    /// The parent's pid.
    pub(crate) fn ppid(&self) -> Option<u32> {
        self.field(4)?.parse().ok()
    }

    /// User and system CPU time, clock ticks (`utime`, `stime`).
    pub(crate) fn cpu_ticks(&self) -> Option<(u64, u64)> {
        Some((self.field(14)?.parse().ok()?, self.field(15)?.parse().ok()?))
    }

    /// Whether the process still runs: neither a zombie nor dead.
    pub(crate) fn alive(&self) -> bool {
        !matches!(self.state(), Some('Z' | 'X') | None)
    }
}

/// Whether process `pid` exists and is not a zombie.
pub(crate) fn alive(pid: u32) -> bool {
    ProcStat::of(pid).is_some_and(|s| s.alive())
}

/// Run-queue wait ns of a process of the host (`/proc/PID/schedstat`).
fn kthread_runq_ns(pid: i32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    s.split_whitespace().nth(1)?.parse().ok()
}

/// Reads the session threads' schedstat at interval edges; a thread that has exited keeps its
/// last reading, so that sums never go back.
#[derive(Debug, Default)]
pub(crate) struct SchedReader {
    last: Vec<(i32, (u64, u64))>,
    device: DeviceThreads,
}

impl SchedReader {
    /// One edge for the threads `tids`, and the kernel threads of block device `device`.
    pub(crate) fn read(&mut self, tids: &[i32], device: Option<&str>) -> SchedEdge {
        for &t in tids {
            let now = schedstat(t);
            match (self.last.iter_mut().find(|x| x.0 == t), now) {
                (Some(x), Some(v)) => x.1 = v,
                (None, Some(v)) => self.last.push((t, v)),
                _ => {}
            }
        }
        SchedEdge {
            threads: self.last.len() as u32,
            run_ns: self.last.iter().map(|x| x.1 .0).sum(),
            runq_ns: self.last.iter().map(|x| x.1 .1).sum(),
            host_some_us: cpu_pressure_some_us(),
            device: device.map_or_else(ThreadsWait::default, |d| self.device.read(d)),
        }
    }
}

/// The session threads' scheduling between successive edges (seconds since the measurement
/// start), one interval per pair, with the threads read at its end.
pub(crate) fn sched_intervals(edges: &[(f64, SchedEdge)]) -> Vec<crate::results::SchedInterval> {
    edges
        .windows(2)
        .map(|w| {
            let ((t0, a), (t1, b)) = (w[0], w[1]);
            crate::results::SchedInterval {
                start_s: t0,
                duration_s: (t1 - t0).max(0.0),
                threads: b.threads,
                run_ns: b.run_ns.saturating_sub(a.run_ns),
                runq_ns: b.runq_ns.saturating_sub(a.runq_ns),
                host_some_us: match (a.host_some_us, b.host_some_us) {
                    (Some(x), Some(y)) => Some(y.saturating_sub(x)),
                    _ => None,
                },
                device_threads: b.device.threads,
                device_runq_ns: b.device.runq_ns,
            }
        })
        .collect()
}

/// Counters of one block device from /proc/diskstats.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DiskCounters {
    pub(crate) reads: u64,
    pub(crate) read_sectors: u64,
    pub(crate) read_ms: u64,
    pub(crate) writes: u64,
    pub(crate) write_sectors: u64,
    pub(crate) write_ms: u64,
    pub(crate) io_ticks_ms: u64,
    pub(crate) weighted_ms: u64,
}

/// Read /proc/diskstats for the named device (e.g. `vda`, `nvme0n1p2`).
pub(crate) fn disk_counters(dev: &str) -> Option<DiskCounters> {
    let s = fs::read_to_string("/proc/diskstats").ok()?;
    for line in s.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 14 && f[2] == dev {
            let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
            return Some(DiskCounters {
                reads: n(3),
                read_sectors: n(5),
                read_ms: n(6),
                writes: n(7),
                write_sectors: n(9),
                write_ms: n(10),
                io_ticks_ms: n(12),
                weighted_ms: n(13),
            });
        }
    }
    None
}

/// The device's counters between successive readings (`edges`: seconds since the measurement
/// start and the counters read then), one interval per pair. A reading whose counters went back
/// (the device was replaced) yields zeros rather than a wrapped count.
pub(crate) fn device_intervals(
    edges: &[(f64, DiskCounters)],
) -> Vec<crate::results::DeviceInterval> {
    edges
        .windows(2)
        .map(|w| {
            let ((t0, a), (t1, b)) = (w[0], w[1]);
            crate::results::DeviceInterval {
                start_s: t0,
                duration_s: (t1 - t0).max(0.0),
                reads: b.reads.saturating_sub(a.reads),
                writes: b.writes.saturating_sub(a.writes),
                read_bytes: b.read_sectors.saturating_sub(a.read_sectors) * 512,
                write_bytes: b.write_sectors.saturating_sub(a.write_sectors) * 512,
                busy_ms: b.io_ticks_ms.saturating_sub(a.io_ticks_ms),
                queue_ms: b.weighted_ms.saturating_sub(a.weighted_ms),
            }
        })
        .collect()
}

/// A block device as found under /sys/dev/block.
#[derive(Clone, Debug, Default)]
pub(crate) struct BlockDev {
    /// Kernel name of the device holding the data (a partition or a whole disk).
    pub(crate) name: String,
    /// The whole disk whose queue settings apply (same as `name` for a whole disk).
    pub(crate) disk: String,
}

/// Find the block device behind a path (a file on a filesystem, or a block device node).
pub(crate) fn block_dev_for(path: &Path) -> Option<BlockDev> {
    let md = fs::metadata(path).ok()?;
    let dev = if md.file_type().is_block_device() {
        md.rdev()
    } else {
        md.dev()
    };
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    let link = fs::canonicalize(format!("/sys/dev/block/{maj}:{min}")).ok()?;
    let name = link.file_name()?.to_string_lossy().to_string();
    let disk = if link.join("partition").exists() {
        link.parent()?.file_name()?.to_string_lossy().to_string()
    } else {
        name.clone()
    };
    Some(BlockDev { name, disk })
}

/// The extents of the regular file at `path` on its whole disk: sorted, disjoint `[start, end)`
/// ranges in 512-byte sectors (a partition's start added), adjacent extents joined. `None`
/// where they cannot stand for the file's I/O: not a regular file, a filesystem that may move
/// blocks on overwrite (only ext2/3/4 and XFS are mapped), an extent FIEMAP cannot place
/// (delayed allocation, inline, encoded, shared), a device stacked on others (device-mapper,
/// md), or more than `max` ranges.
pub(crate) fn disk_extents(path: &Path, max: usize) -> Option<Vec<(u64, u64)>> {
    use std::os::fd::AsRawFd;
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const FIEMAP_FLAG_SYNC: u32 = 1;
    const LAST: u32 = 0x1;
    // UNKNOWN, DELALLOC, ENCODED, DATA_ENCRYPTED, NOT_ALIGNED, DATA_INLINE, DATA_TAIL,
    // UNWRITTEN is fine (reads of it do not reach the disk, writes land in place); SHARED.
    const UNMAPPABLE: u32 = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200 | 0x400 | 0x2000;
    const BATCH: usize = 256;
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Extent {
        logical: u64,
        physical: u64,
        length: u64,
        reserved64: [u64; 2],
        flags: u32,
        reserved: [u32; 3],
    }
    #[repr(C)]
    struct Fiemap {
        start: u64,
        length: u64,
        flags: u32,
        mapped: u32,
        count: u32,
        reserved: u32,
        extents: [Extent; BATCH],
    }
    let md = fs::metadata(path).ok()?;
    if !md.file_type().is_file() {
        return None;
    }
    let file = fs::File::open(path).ok()?;
    let part_start = extent_mount(&file, md.dev())?;
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut fm = Box::new(Fiemap {
        start: 0,
        length: u64::MAX,
        flags: FIEMAP_FLAG_SYNC,
        mapped: 0,
        count: BATCH as u32,
        reserved: 0,
        extents: [Extent::default(); BATCH],
    });
    loop {
        // SAFETY: FS_IOC_FIEMAP with a fiemap header followed by room for `count` extents.
        if unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut *fm as *mut Fiemap) } != 0 {
            return None;
        }
        let n = (fm.mapped as usize).min(BATCH);
        for e in &fm.extents[..n] {
            if e.flags & UNMAPPABLE != 0 || e.physical % 512 != 0 || e.length % 512 != 0 {
                return None;
            }
            let start = part_start + e.physical / 512;
            let end = start + e.length / 512;
            match out.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => out.push((start, end)),
            }
            if out.len() > max {
                return None;
            }
        }
        let Some(last) = fm.extents[..n].last() else {
            break;
        };
        if last.flags & LAST != 0 {
            break;
        }
        fm.start = last.logical + last.length;
        fm.length = u64::MAX - fm.start;
    }
    out.sort_unstable();
    // Disjoint after sorting (a file's extents never overlap); join what now touches.
    let mut joined: Vec<(u64, u64)> = Vec::with_capacity(out.len());
    for (s, e) in out {
        match joined.last_mut() {
            Some(last) if last.1 >= s => last.1 = last.1.max(e),
            _ => joined.push((s, e)),
        }
    }
    (!joined.is_empty()).then_some(joined)
}

/// Whether a regular file made in the directory `dir` would have extents [`disk_extents`] can
/// map (its filesystem is ext2/3/4 or XFS on a device not stacked on others): what a new
/// target's disk filter can be known to be before the file exists. The file's own extents
/// may still defeat the map once it is written (more than the probes hold, or unplaceable).
pub(crate) fn new_file_mappable(dir: &Path) -> bool {
    let Ok(md) = fs::metadata(dir) else {
        return false;
    };
    md.is_dir()
        && fs::File::open(dir)
            .ok()
            .and_then(|f| extent_mount(&f, md.dev()))
            .is_some()
}

/// For an open file (or directory) on device `dev`: the start (in 512-byte sectors) of its
/// partition on the whole disk, where the filesystem's extents stand for its I/O (ext2/3/4
/// or XFS, on a device not stacked on others: device-mapper, md); `None` otherwise.
fn extent_mount(file: &fs::File, dev: u64) -> Option<u64> {
    use std::os::fd::AsRawFd;
    const EXT_MAGIC: i64 = 0xEF53;
    const XFS_MAGIC: i64 = 0x5846_5342;
    // SAFETY: fstatfs into a zeroed struct of the right type.
    let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut sfs) } != 0 {
        return None;
    }
    let magic = sfs.f_type as i64;
    if magic != EXT_MAGIC && magic != XFS_MAGIC {
        return None;
    }
    let sysdev = format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev));
    let sysdev = Path::new(&sysdev);
    let stacked = sysdev
        .join("slaves")
        .read_dir()
        .ok()
        .and_then(|mut d| d.next())
        .is_some();
    if stacked || sysdev.join("dm").exists() || sysdev.join("md").exists() {
        return None;
    }
    if sysdev.join("partition").exists() {
        read_num(sysdev.join("start"))
    } else {
        Some(0)
    }
}

/// One line of /proc/self/mountinfo.
#[derive(Clone, Debug, Default)]
pub(crate) struct Mount {
    pub(crate) mount_point: String,
    pub(crate) fstype: String,
    pub(crate) options: String,
}

fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\134", "\\")
}

/// The mount holding `path` (longest matching mount point).
pub(crate) fn mount_for(path: &Path) -> Option<Mount> {
    let abs = fs::canonicalize(path)
        .or_else(|_| {
            path.parent()
                .map(fs::canonicalize)
                .unwrap_or_else(|| fs::canonicalize("."))
        })
        .ok()?;
    let s = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<Mount> = None;
    for line in s.lines() {
        let (left, right) = line.split_once(" - ")?;
        let l: Vec<&str> = left.split_whitespace().collect();
        let r: Vec<&str> = right.split_whitespace().collect();
        if l.len() < 6 || r.len() < 2 {
            continue;
        }
        let mp = unescape_mount(l[4]);
        if abs.starts_with(&mp)
            && best
                .as_ref()
                .map(|b| mp.len() >= b.mount_point.len())
                .unwrap_or(true)
        {
            best = Some(Mount {
                mount_point: mp,
                fstype: r[0].to_string(),
                options: format!("{},{}", l[5], r.get(2).copied().unwrap_or("")),
            });
        }
    }
    best
}

fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn read_num<T: std::str::FromStr>(p: impl AsRef<Path>) -> Option<T> {
    read_trim(p)?.parse().ok()
}

/// A number field of /proc/meminfo (`MemTotal:`, `HugePages_Free:`, ...): its value as
/// written, in kB for the sizes, a count for the hugetlb page counts.
fn meminfo(field: &str) -> Option<u64> {
    let m = fs::read_to_string("/proc/meminfo").ok()?;
    let line = m.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// Peak resident set size of this process (VmHWM from /proc/self/status).
pub(crate) fn peak_rss() -> Option<String> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .map(|l| l["VmHWM:".len()..].trim().to_string())
}

/// Total memory of the host in bytes (/proc/meminfo MemTotal; 0 when unknown).
pub(crate) fn memory_bytes() -> u64 {
    meminfo("MemTotal:").unwrap_or(0) * 1024
}

/// The size in bytes of the system's default reserved (hugetlb) huge page, when some of them
/// are free; `None` when none are.
pub(crate) fn free_hugetlb_page_size() -> Option<u64> {
    (meminfo("HugePages_Free:")? > 0).then_some(meminfo("Hugepagesize:")? * 1024)
}

/// The kernel's transparent-huge-page mode: the bracketed word of
/// `/sys/kernel/mm/transparent_hugepage/enabled` (`always`, `madvise` or `never`).
pub(crate) fn thp_setting() -> Option<String> {
    let s = read_trim("/sys/kernel/mm/transparent_hugepage/enabled")?;
    let (_, rest) = s.split_once('[')?;
    Some(rest.split_once(']')?.0.to_string())
}

/// Host facts: hostname, kernel, CPU model and count, memory.
pub(crate) fn environment() -> Environment {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    Environment {
        hostname: read_trim("/proc/sys/kernel/hostname").unwrap_or_default(),
        kernel: read_trim("/proc/sys/kernel/osrelease").unwrap_or_default(),
        cpu_model,
        cpus: online_cpus(),
        memory_bytes: memory_bytes(),
        target: None,
    }
}

/// Number of online CPUs.
pub(crate) fn online_cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// Facts about a target path and its backing device.
pub(crate) fn target_info(path: &Path, kind: crate::results::StorageKind, size: u64) -> TargetInfo {
    let mut t = TargetInfo {
        path: path.display().to_string(),
        kind,
        size_bytes: size,
        ..Default::default()
    };
    if let Some(m) = mount_for(path) {
        t.filesystem = m.fstype;
        t.mount_point = m.mount_point;
        t.mount_options = m.options;
    }
    if let Some(bd) = block_dev_for(path) {
        let q = format!("/sys/block/{}/queue", bd.disk);
        t.device = bd.name.clone();
        t.device_model = read_trim(format!("/sys/block/{}/device/model", bd.disk))
            .unwrap_or_else(|| bd.disk.clone());
        t.rotational = read_num::<u32>(format!("{q}/rotational")).map(|v| v == 1);
        let line = read_trim(format!("{q}/scheduler")).unwrap_or_default();
        t.scheduler = crate::results::active_scheduler(&line).to_string();
        t.schedulers = line
            .split_whitespace()
            .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
            .collect();
        t.logical_block_size = read_num(format!("{q}/logical_block_size")).unwrap_or(512);
        t.physical_block_size = read_num(format!("{q}/physical_block_size")).unwrap_or(512);
        t.nr_requests = read_num(format!("{q}/nr_requests"));
        t.max_sectors_kb = read_num(format!("{q}/max_sectors_kb"));
        t.read_ahead_kb = read_num(format!("{q}/read_ahead_kb"));
        t.driver = disk_driver(&bd.disk).unwrap_or_default();
        // Only an NVMe device's PCIe link is its own: a virtual disk's emulated PCI link
        // (virtio) says nothing about what the host behind it can move.
        if bd.disk.starts_with("nvme") {
            t.link_mb_per_s = fs::canonicalize(format!("/sys/block/{}/device/device", bd.disk))
                .ok()
                .and_then(|d| pcie_link_mb_per_s(&d));
        }
    }
    t
}

/// The payload MB/s of the PCIe link whose sysfs directory is `dir` (`current_link_speed`
/// such as `8.0 GT/s PCIe`, `current_link_width` such as `4`): GT/s × lanes × the line code's
/// efficiency (8b/10b up to 5 GT/s, 128b/130b from 8 GT/s; 64 GT/s PCIe 6 counted as 1) ÷ 8.
/// An upper bound: packet headers take a few percent more.
pub(crate) fn pcie_link_mb_per_s(dir: &Path) -> Option<f64> {
    let speed = read_trim(dir.join("current_link_speed"))?;
    let gts: f64 = speed.split_whitespace().next()?.parse().ok()?;
    let lanes: f64 = read_num::<u32>(dir.join("current_link_width"))? as f64;
    if !(gts > 0.0 && lanes > 0.0) {
        return None;
    }
    let code = if gts <= 5.0 {
        0.8
    } else if gts < 64.0 {
        128.0 / 130.0
    } else {
        1.0
    };
    Some(gts * 1e9 * lanes * code / 8.0 / 1e6)
}

/// How many requests the disk `disk` takes at once: its driver's tags and, on virtio, whether
/// the ring has indirect descriptors; `None` where sysfs has no tags for it.
pub(crate) fn disk_queue(disk: &str) -> Option<crate::results::DiskQueue> {
    let (hw_queues, driver_tags) = driver_tags(disk)?;
    Some(crate::results::DiskQueue {
        disk: disk.to_string(),
        driver_tags,
        hw_queues,
        virtio_indirect: virtio_indirect(disk),
        nr_requests: read_num::<u32>(format!("/sys/block/{disk}/queue/nr_requests"))
            .filter(|&n| n > 0),
    })
}

/// The driver of the disk `disk`, as sysfs names it: a SCSI disk's host adapter driver
/// (`/sys/class/scsi_host/hostN/proc_name`: `lpfc`, `qla2xxx`, `virtio_scsi`…), else the
/// device's own driver (`virtio_blk`, or the NVMe controller's `nvme`); `loop` for a loop
/// device (which has no device directory). `None` where sysfs says nothing.
pub(crate) fn disk_driver(disk: &str) -> Option<String> {
    if disk.starts_with("loop") {
        return Some("loop".into());
    }
    let dev = fs::canonicalize(format!("/sys/block/{disk}/device")).ok()?;
    // A SCSI disk sits under its host adapter's hostN directory.
    for a in dev.ancestors() {
        let Some(name) = a.file_name().map(|n| n.to_string_lossy()) else {
            break;
        };
        if let Some(n) = name
            .strip_prefix("host")
            .filter(|n| n.parse::<u32>().is_ok())
        {
            if let Some(p) = read_trim(format!("/sys/class/scsi_host/host{n}/proc_name")) {
                return Some(p);
            }
        }
    }
    // NVMe namespaces: device is the controller, whose device has the driver.
    for d in [dev.join("driver"), dev.join("device").join("driver")] {
        if let Ok(l) = fs::read_link(&d) {
            return l.file_name().map(|f| f.to_string_lossy().into_owned());
        }
    }
    None
}

/// The SCSI queue depth of the disk `disk` (`/sys/block/DISK/device/queue_depth`: the LUN
/// queue an HBA driver sets, e.g. lpfc_lun_queue_depth); `None` for disks without one.
pub(crate) fn lun_queue_depth(disk: &str) -> Option<u32> {
    read_num(format!("/sys/block/{disk}/device/queue_depth"))
}

/// The block-multiqueue tags of the disk `disk` (`/sys/block/DISK/mq/*/nr_tags`): how many
/// hardware queues it has and how many requests its driver takes at once over all of them;
/// `None` where the disk has no such directory.
fn driver_tags(disk: &str) -> Option<(u32, u32)> {
    let (mut queues, mut tags) = (0u32, 0u32);
    for e in fs::read_dir(format!("/sys/block/{disk}/mq"))
        .ok()?
        .flatten()
    {
        if let Some(n) = read_num::<u32>(e.path().join("nr_tags")) {
            queues += 1;
            tags = tags.saturating_add(n);
        }
    }
    (queues > 0).then_some((queues, tags))
}

/// For a virtio disk, whether its device offers indirect descriptors
/// (`VIRTIO_RING_F_INDIRECT_DESC`, bit 28 of `/sys/block/DISK/device/features`); `None` for a
/// disk that is not on the virtio bus. Without them each request takes one ring descriptor
/// per data segment plus two, and virtio-blk sizes its tags to half the ring.
fn virtio_indirect(disk: &str) -> Option<bool> {
    let dev = Path::new("/sys/block").join(disk).join("device");
    let bus = fs::canonicalize(dev.join("subsystem")).ok()?;
    if bus.file_name()? != "virtio" {
        return None;
    }
    let bits = read_trim(dev.join("features"))?;
    Some(bits.as_bytes().get(28) == Some(&b'1'))
}

/// Logical block size of the device behind `path` (512 when unknown).
pub(crate) fn logical_block_size(path: &Path) -> u32 {
    block_dev_for(path)
        .and_then(|bd| read_num(format!("/sys/block/{}/queue/logical_block_size", bd.disk)))
        .unwrap_or(512)
}

/// Counters taken at one instant, to be differenced against a later snapshot.
#[derive(Clone, Debug)]
pub(crate) struct SysSnapshot {
    at: Instant,
    rusage: (f64, f64),
    cpu: Option<CpuTimes>,
    disk: Option<DiskCounters>,
    sched: (u64, u64),
}

impl SysSnapshot {
    /// Take a snapshot; `device` is the /proc/diskstats name, `tids` the session threads.
    pub(crate) fn take(device: Option<&str>, tids: &[i32]) -> SysSnapshot {
        let mut sched = (0, 0);
        for &t in tids {
            if let Some((r, w)) = schedstat(t) {
                sched.0 += r;
                sched.1 += w;
            }
        }
        SysSnapshot {
            at: Instant::now(),
            rusage: rusage_self(),
            cpu: cpu_times(),
            disk: device.and_then(disk_counters),
            sched,
        }
    }

    /// Replace the run-queue figures with (run ns, wait ns) summed by the session threads
    /// themselves (they read their own schedstat just before exiting).
    pub(crate) fn set_sched(&mut self, sched: (u64, u64)) {
        self.sched = sched;
    }

    /// Seconds between two snapshots.
    pub(crate) fn elapsed_s(&self, later: &SysSnapshot) -> f64 {
        later.at.duration_since(self.at).as_secs_f64()
    }

    /// CPU and device figures between `self` and `later`, for `ios` completed I/Os.
    ///
    /// Threads that exited before `later` keep their schedstat only in `self`; callers that
    /// need exact run-queue figures take `later` while session threads are still alive.
    pub(crate) fn delta(
        &self,
        later: &SysSnapshot,
        ios: u64,
        device: Option<&str>,
    ) -> (CpuStats, Option<DeviceStats>) {
        let el = self.elapsed_s(later).max(1e-9);
        let per = |x: f64| if ios > 0 { x * 1e6 / ios as f64 } else { 0.0 };
        let user = later.rusage.0 - self.rusage.0;
        let sys = later.rusage.1 - self.rusage.1;
        let (busy, iowait) = match (self.cpu, later.cpu) {
            (Some(a), Some(b)) if b.total > a.total => {
                let t = (b.total - a.total) as f64;
                (
                    (b.busy - a.busy) as f64 / t,
                    (b.iowait.saturating_sub(a.iowait)) as f64 / t,
                )
            }
            _ => (0.0, 0.0),
        };
        let runq_ns = later.sched.1.saturating_sub(self.sched.1) as f64;
        let run_ns = later.sched.0.saturating_sub(self.sched.0) as f64;
        let cpu = CpuStats {
            user_s: user,
            sys_s: sys,
            us_per_io: per(user + sys),
            user_us_per_io: per(user),
            sys_us_per_io: per(sys),
            host_busy: busy,
            host_iowait: iowait,
            cpus: online_cpus(),
            runq_delay_s: runq_ns / 1e9,
            runq_us_per_io: per(runq_ns / 1e9),
            session_run_s: run_ns / 1e9,
        };
        let dev = match (self.disk, later.disk, device) {
            (Some(a), Some(b), Some(name)) => {
                let reads = b.reads.saturating_sub(a.reads);
                let writes = b.writes.saturating_sub(a.writes);
                let rb = b.read_sectors.saturating_sub(a.read_sectors) * 512;
                let wb = b.write_sectors.saturating_sub(a.write_sectors) * 512;
                let avg = |ms: u64, n: u64| {
                    if n > 0 {
                        ms as f64 * 1e3 / n as f64
                    } else {
                        0.0
                    }
                };
                Some(DeviceStats {
                    device: name.to_string(),
                    reads,
                    writes,
                    read_bytes: rb,
                    write_bytes: wb,
                    iops: (reads + writes) as f64 / el,
                    mb_per_s: (rb + wb) as f64 / el / 1e6,
                    read_await_us: avg(b.read_ms.saturating_sub(a.read_ms), reads),
                    write_await_us: avg(b.write_ms.saturating_sub(a.write_ms), writes),
                    util: (b.io_ticks_ms.saturating_sub(a.io_ticks_ms) as f64 / 1e3 / el).min(1.0),
                    avg_in_flight: b.weighted_ms.saturating_sub(a.weighted_ms) as f64 / 1e3 / el,
                })
            }
            _ => None,
        };
        (cpu, dev)
    }
}

/// Free bytes available to this user on the filesystem holding `dir`.
pub(crate) fn free_space(dir: &Path) -> std::io::Result<u64> {
    use std::ffi::CString;
    let c = CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::other("path contains NUL"))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and a struct we own.
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Capacity and free bytes (available to this user) of the filesystem holding `dir`.
pub(crate) fn fs_space(dir: &Path) -> std::io::Result<(u64, u64)> {
    use std::ffi::CString;
    let c = CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::other("path contains NUL"))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and a struct we own.
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let f = st.f_frsize as u64;
    Ok((
        (st.f_blocks as u64).saturating_mul(f),
        (st.f_bavail as u64).saturating_mul(f),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn pcie_link_payload_rates() {
        let d = tempfile::tempdir().unwrap();
        let link = |speed: &str, width: &str| {
            std::fs::write(d.path().join("current_link_speed"), speed).unwrap();
            std::fs::write(d.path().join("current_link_width"), width).unwrap();
            super::pcie_link_mb_per_s(d.path())
        };
        // As the kernel writes them (drivers/pci/pci-sysfs.c).
        let g3x4 = link("8.0 GT/s PCIe\n", "4\n").unwrap();
        assert!((g3x4 - 3938.46).abs() < 0.1, "{g3x4}");
        let g1x1 = link("2.5 GT/s PCIe\n", "1\n").unwrap();
        assert!((g1x1 - 250.0).abs() < 1e-9, "{g1x1}");
        assert_eq!(link("Unknown\n", "4\n"), None);
        assert_eq!(link("16.0 GT/s PCIe\n", "0\n"), None);
    }

    use super::*;

    #[test]
    fn reads_proc() {
        let (u, s) = rusage_self();
        assert!(u >= 0.0 && s >= 0.0);
        let c = cpu_times().expect("/proc/stat readable");
        assert!(c.total > 0 && c.busy <= c.total);
        assert!(schedstat(gettid()).is_some());
        let env = environment();
        assert!(env.cpus >= 1 && env.memory_bytes > 0 && !env.kernel.is_empty());
        assert!(mount_for(Path::new(".")).is_some());
    }

    /// A stat line whose name holds `) ` and spaces (as a process may name itself): the name
    /// whole, the fields after it; this process's own line, and a pid that does not exist.
    #[test]
    fn stat_fields_follow_the_names_last_parenthesis() {
        let line = "4242 (a) b (c)) D 17 4242 4242 0 -1 4194560 130 0 0 0 1234 567 0 0 20 0 1 0 \
                    88 0 0\n";
        let s = ProcStat::parse(line.to_string()).unwrap();
        assert_eq!(s.name(), Some("a) b (c)"));
        assert_eq!(
            (s.state(), s.ppid(), s.cpu_ticks()),
            (Some('D'), Some(17), Some((1234, 567)))
        );
        assert!(s.alive());
        for (state, alive) in [("Z", false), ("X", false), ("S", true)] {
            let s = ProcStat::parse(line.replace(") D ", &format!(") {state} "))).unwrap();
            assert_eq!(s.alive(), alive, "{state}");
        }
        assert!(ProcStat::parse("4242 (no end".into()).is_none());
        assert!(ProcStat::parse("4242 (cut)".into()).is_some_and(|s| !s.alive()));
        // This thread reads its own line: running.
        let me = ProcStat::of("thread-self").unwrap();
        assert_eq!(me.ppid(), Some(std::os::unix::process::parent_id()));
        assert_eq!(me.state(), Some('R'));
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX) && ProcStat::of(u32::MAX).is_none());
    }

    /// Kernel thread names that name a device, from this kernel (6.18) while a loop device
    /// served reads: its workers show the workqueue after `+` (running) or `-` (ran last).
    #[test]
    fn kernel_threads_name_their_device() {
        assert!(kthread_names_device("kworker/u8:3+loop0", "loop0"));
        assert!(kthread_names_device("kworker/u8:11-loop0", "loop0"));
        assert!(kthread_names_device("kworker/u9:1+nbd0-recv", "nbd0"));
        assert!(!kthread_names_device("kworker/u8:3+loop0", "loop"));
        assert!(!kthread_names_device("kworker/u8:3+loop10", "loop1"));
        assert!(!kthread_names_device("kworker/u8:10-writeback", "loop0"));
        assert!(!kthread_names_device("kworker/R-kthrotld", "loop0"));
        assert!(!kthread_names_device("kworker/0:1H", "loop0"));
        assert!(kthread_names_device("loop0", "loop0"));
        // The worker's own number is not a device.
        assert!(!kthread_names_device("kworker/u8:3", "u8"));
    }

    /// A device no kernel thread is named after: the host's kernel threads are listed, none
    /// counts, and the reader says so (0 threads) rather than failing.
    #[test]
    fn device_threads_of_a_device_without_workers_are_none() {
        let mut r = DeviceThreads::default();
        assert_eq!(r.read("iolens-no-such-device"), ThreadsWait::default());
        assert_eq!(r.read("iolens-no-such-device"), ThreadsWait::default());
        if Path::new("/proc/2/task/2/children").exists() {
            assert!(!r.fixed.is_empty(), "the host's kernel threads are listed");
        }
    }
}
