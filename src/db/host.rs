//! Minimal host readers the database mode needs: process and thread CPU, /proc/stat,
//! /proc/diskstats for the device holding a path, free space, page-cache residency.
//!
//! Kept small and private to `db` until the shared `sys` module lands on `main`; then these
//! readers are to be replaced by it (no duplication).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::results::DeviceStats;

/// User and system CPU seconds of this process (getrusage RUSAGE_SELF).
pub fn rusage_self() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// Aggregate CPU jiffies from /proc/stat: (busy, iowait, total).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuTimes {
    pub busy: u64,
    pub iowait: u64,
    pub total: u64,
}

/// Read the aggregate `cpu` line of /proc/stat.
pub fn proc_stat() -> Option<CpuTimes> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 5 {
        return None;
    }
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3];
    let iowait = v[4];
    Some(CpuTimes {
        busy: total - idle - iowait,
        iowait,
        total,
    })
}

/// Shares (busy, iowait) of all CPUs between two /proc/stat samples.
pub fn host_shares(a: CpuTimes, b: CpuTimes) -> (f64, f64) {
    let t = b.total.saturating_sub(a.total) as f64;
    if t <= 0.0 {
        return (0.0, 0.0);
    }
    (
        b.busy.saturating_sub(a.busy) as f64 / t,
        b.iowait.saturating_sub(a.iowait) as f64 / t,
    )
}

/// Number of online CPUs.
pub fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as u32
}

/// (run ns, run-queue wait ns) of the calling thread from /proc/thread-self/schedstat.
pub fn thread_schedstat() -> Option<(u64, u64)> {
    let t = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut it = t.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// User+system CPU seconds of process `pid` (/proc/PID/stat), or None if it is not visible.
pub fn pid_cpu_s(pid: i32) -> Option<f64> {
    pid_cpu_split(pid).map(|(u, s)| u + s)
}

/// (user, system) CPU seconds of process `pid`.
pub fn pid_cpu_split(pid: i32) -> Option<(f64, f64)> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces; fields resume after the last ')'.
    let rest = &t[t.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime 15.
    let ut: f64 = f.get(11)?.parse().ok()?;
    let st: f64 = f.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((ut / hz, st / hz))
}

/// The short command name of process `pid`.
pub fn pid_comm(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Raw /proc/diskstats counters of one device.
#[derive(Clone, Copy, Debug, Default)]
pub struct DiskCounters {
    pub reads: u64,
    pub read_sectors: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub write_sectors: u64,
    pub write_ms: u64,
    pub io_ticks_ms: u64,
    pub weighted_ms: u64,
}

/// Name of the block device (as in /proc/diskstats) holding `path`, if any.
pub fn device_for_path(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(path).ok()?;
    let dev = md.dev();
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    let link = std::fs::read_link(format!("/sys/dev/block/{maj}:{min}")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

/// Current counters of device `name`.
pub fn diskstats(name: &str) -> Option<DiskCounters> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 14 && f[2] == name {
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

/// The device's view over a window from two diskstats samples.
pub fn device_stats(name: &str, a: DiskCounters, b: DiskCounters, secs: f64) -> DeviceStats {
    let reads = b.reads.saturating_sub(a.reads);
    let writes = b.writes.saturating_sub(a.writes);
    let rb = b.read_sectors.saturating_sub(a.read_sectors) * 512;
    let wb = b.write_sectors.saturating_sub(a.write_sectors) * 512;
    let per = |ms: u64, n: u64| {
        if n > 0 {
            ms as f64 * 1e3 / n as f64
        } else {
            0.0
        }
    };
    let secs = secs.max(1e-9);
    DeviceStats {
        device: name.to_string(),
        reads,
        writes,
        read_bytes: rb,
        write_bytes: wb,
        iops: (reads + writes) as f64 / secs,
        mb_per_s: (rb + wb) as f64 / secs / 1e6,
        read_await_us: per(b.read_ms.saturating_sub(a.read_ms), reads),
        write_await_us: per(b.write_ms.saturating_sub(a.write_ms), writes),
        util: (b.io_ticks_ms.saturating_sub(a.io_ticks_ms) as f64 / 1e3 / secs).min(1.0),
        avg_in_flight: b.weighted_ms.saturating_sub(a.weighted_ms) as f64 / 1e3 / secs,
    }
}

/// The nearest existing ancestor of `path` (the path itself if it exists).
pub fn existing_ancestor(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut p = abs.as_path();
    loop {
        if p.exists() {
            return p.to_path_buf();
        }
        match p.parent() {
            Some(q) => p = q,
            None => return PathBuf::from("/"),
        }
    }
}

/// Bytes available to an unprivileged user on the filesystem holding `path` (or its nearest
/// existing ancestor).
pub fn free_bytes(path: &Path) -> Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let p = existing_ancestor(path);
    let c = std::ffi::CString::new(p.as_os_str().as_bytes())?;
    // SAFETY: statvfs fills the zeroed struct for a valid C path.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("cannot query free space of {}", p.display()));
    }
    Ok(s.f_bavail as u64 * s.f_frsize as u64)
}

/// Share (0..1) of `path`'s pages resident in the OS page cache (mmap + mincore).
pub fn page_cache_residency(path: &Path) -> Result<f64> {
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = f.metadata()?.len() as usize;
    if len == 0 {
        return Ok(0.0);
    }
    // SAFETY: read-only shared mapping of a file we hold open; unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error()).context("mmap for mincore");
    }
    let pg = 4096usize;
    let n = len.div_ceil(pg);
    let mut vec = vec![0u8; n];
    // SAFETY: vec has one byte per page of the mapping.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = std::io::Error::last_os_error();
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(err).context("mincore");
    }
    Ok(vec.iter().filter(|b| **b & 1 == 1).count() as f64 / n as f64)
}

/// Ask the kernel to drop `path`'s clean pages from the page cache (POSIX_FADV_DONTNEED).
pub fn drop_page_cache(path: &Path) -> Result<()> {
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    f.sync_all().ok();
    // SAFETY: advisory call on an open descriptor.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        anyhow::bail!(
            "posix_fadvise(DONTNEED) on {} failed: {}",
            path.display(),
            std::io::Error::from_raw_os_error(rc)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process_and_host() {
        let me = std::process::id() as i32;
        assert!(pid_cpu_s(me).is_some());
        assert!(pid_comm(me).is_some());
        let a = proc_stat().expect("/proc/stat");
        assert!(a.total >= a.busy);
        assert!(thread_schedstat().is_some());
        assert!(free_bytes(Path::new("/nonexistent/deeper/path")).unwrap() > 0);
    }
}
