//! Host readers the database mode needs beyond [`crate::sys`]: CPU of other processes (the
//! PostgreSQL server's), free space below a path that does not exist yet, and page-cache
//! residency and eviction of the database file.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// (user, system) CPU seconds of process `pid`.
pub(crate) fn pid_cpu_split(pid: i32) -> Option<(f64, f64)> {
    let (ut, st) = crate::sys::ProcStat::of(pid)?.cpu_ticks()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((ut as f64 / hz, st as f64 / hz))
}

/// The short command name of process `pid`.
pub(crate) fn pid_comm(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The nearest existing ancestor of `path` (the path itself if it exists).
pub(crate) fn existing_ancestor(path: &Path) -> PathBuf {
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

/// Bytes available on the filesystem holding `path` (or its nearest existing ancestor).
pub(crate) fn free_bytes(path: &Path) -> Result<u64> {
    let p = existing_ancestor(path);
    crate::sys::free_space(&p)
        .with_context(|| format!("cannot query free space of {}", p.display()))
}

/// Share (0..1) of `path`'s pages resident in the OS page cache (mmap + mincore).
pub(crate) fn page_cache_residency(path: &Path) -> Result<f64> {
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
pub(crate) fn drop_page_cache(path: &Path) -> Result<()> {
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
        assert!(pid_cpu_split(me).is_some());
        assert!(pid_comm(me).is_some());
        assert!(free_bytes(Path::new("/nonexistent/deeper/path")).unwrap() > 0);
    }
}
