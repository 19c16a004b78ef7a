//! Opening a target once and re-opening that same inode, locks, whether a device is in use,
//! renaming without replacing, and page-cache control.

use super::*;

/// Open `path` read-only, once. A symbolic link is followed only when `path` itself is one
/// (the user named a link); otherwise `O_NOFOLLOW`. Never blocks on a FIFO. `None` when
/// nothing is there.
pub(super) fn open_once(path: &Path) -> Result<Option<File>> {
    let named_link = std::fs::symlink_metadata(path)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false);
    let mut flags = libc::O_NONBLOCK;
    if !named_link {
        flags |= libc::O_NOFOLLOW;
    }
    match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => {
            // SAFETY: fcntl on a valid fd we own.
            unsafe {
                let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
                if fl >= 0 {
                    libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
                }
            }
            Ok(Some(f))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && named_link => bail!(
            "{} is a symbolic link to nothing: name the file it should point to",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => bail!(
            "{} became a symbolic link while iolens opened it; refusing to follow it (name the \
             link's target, or the link itself, and keep it in place)",
            path.display()
        ),
        Err(e) => Err(e).with_context(|| format!("cannot open {}", path.display())),
    }
}

/// Device and inode of an open file.
pub(super) fn identity_of(f: &File) -> Result<(u64, u64)> {
    let m = f.metadata().context("fstat of the target")?;
    Ok((m.dev(), m.ino()))
}

/// Open the very inode `f` refers to again, with other flags (`/proc/self/fd` names the open
/// file, not a path that could have changed), and confirm it is the same device and inode.
pub(super) fn reopen(
    f: &File,
    write: bool,
    flags: libc::c_int,
    path: &Path,
) -> std::io::Result<File> {
    let g = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(flags)
        .open(format!("/proc/self/fd/{}", f.as_raw_fd()))?;
    let (a, b) = (f.metadata()?, g.metadata()?);
    if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
        return Err(std::io::Error::other(format!(
            "re-opening {} gave another file (device/inode changed); /proc may not be mounted",
            path.display()
        )));
    }
    Ok(g)
}

/// flock without waiting; `Ok(false)` when another process holds a conflicting lock.
pub(super) fn try_flock(f: &File, exclusive: bool) -> Result<bool> {
    let how = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    // SAFETY: flock on a valid fd.
    if unsafe { libc::flock(f.as_raw_fd(), how | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Ok(false);
        }
        // Filesystems without flock support: go on without the lock.
    }
    Ok(true)
}

/// Releases a lock taken on the held descriptor while the target is being prepared (holds a
/// duplicate of it: same open file, so unlocking it unlocks the held one).
pub(super) struct PrepLock(File);

impl PrepLock {
    pub(super) fn on(f: &File) -> Result<PrepLock> {
        Ok(PrepLock(
            f.try_clone().context("dup of the target descriptor")?,
        ))
    }
}

impl Drop for PrepLock {
    fn drop(&mut self) {
        // SAFETY: flock on a valid fd.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

pub(super) fn busy(path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "another iolens process is using {} (creating, filling or writing it); wait for it to \
         finish and try again",
        path.display()
    )
}

/// True when `--disposable-target` names the file `m` is the metadata of.
pub(super) fn named_disposable(opts: &PrepareOptions, m: &std::fs::Metadata) -> bool {
    let Some(d) = opts.disposable.as_deref() else {
        return false;
    };
    match std::fs::metadata(d) {
        Ok(dm) => {
            (dm.dev(), dm.ino()) == (m.dev(), m.ino())
                || (dm.file_type().is_block_device()
                    && m.file_type().is_block_device()
                    && dm.rdev() == m.rdev())
        }
        Err(_) => false,
    }
}

/// Why the block device with device number `rdev` (or a partition of it) must not be
/// written: held by device-mapper/md/LVM, mounted, active swap, or backing a loop device.
pub(super) fn device_in_use(rdev: u64) -> Option<String> {
    use std::collections::HashSet;
    let (maj, min) = (libc::major(rdev), libc::minor(rdev));
    let Ok(sys) = std::fs::canonicalize(format!("/sys/dev/block/{maj}:{min}")) else {
        return Some(format!(
            "cannot find device {maj}:{min} in /sys to check whether it is in use"
        ));
    };
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default()
    };
    // The device itself and, for a whole disk, its partitions.
    let mut devs = vec![sys.clone()];
    if let Ok(rd) = std::fs::read_dir(&sys) {
        for e in rd.flatten() {
            if e.path().join("partition").exists() {
                devs.push(e.path());
            }
        }
    }
    let mut numbers: HashSet<u64> = HashSet::new();
    for d in &devs {
        if let Ok(s) = std::fs::read_to_string(d.join("dev")) {
            if let Some((a, b)) = s.trim().split_once(':') {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    numbers.insert(libc::makedev(a, b));
                }
            }
        }
    }
    numbers.insert(rdev);
    for d in &devs {
        if let Ok(rd) = std::fs::read_dir(d.join("holders")) {
            let hs: Vec<String> = rd.flatten().map(|e| name(&e.path())).collect();
            if !hs.is_empty() {
                return Some(format!(
                    "{} is held by {} (device-mapper, md, LVM or another stacked device)",
                    name(d),
                    hs.join(", ")
                ));
            }
        }
    }
    if let Ok(s) = std::fs::read_to_string("/proc/self/mountinfo") {
        for line in s.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let Some((a, b)) = f.get(2).and_then(|x| x.split_once(':')) {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    if numbers.contains(&libc::makedev(a, b)) {
                        return Some(format!(
                            "it (or a partition of it) is mounted on {}",
                            f.get(4).unwrap_or(&"?")
                        ));
                    }
                }
            }
        }
    }
    if let Ok(s) = std::fs::read_to_string("/proc/swaps") {
        for line in s.lines().skip(1) {
            let Some(p) = line.split_whitespace().next() else {
                continue;
            };
            let p = p.replace("\\040", " ");
            if let Ok(m) = std::fs::metadata(&p) {
                if m.file_type().is_block_device() && numbers.contains(&m.rdev()) {
                    return Some(format!("it (or a partition of it) is in use as swap ({p})"));
                }
            }
        }
    }
    // Loop devices: one backed by this device, or (for a loop device) another loop device
    // backed by the same file.
    let backing = |loopdir: &Path| -> Option<std::fs::Metadata> {
        let s = std::fs::read_to_string(loopdir.join("loop/backing_file")).ok()?;
        std::fs::metadata(s.trim().trim_end_matches(" (deleted)")).ok()
    };
    let own_backing = backing(&sys).map(|m| (m.dev(), m.ino()));
    if let Ok(rd) = std::fs::read_dir("/sys/block") {
        for e in rd.flatten() {
            let p = e.path();
            let n = name(&p);
            if !n.starts_with("loop") || n == name(&sys) {
                continue;
            }
            let Some(b) = backing(&p) else { continue };
            if b.file_type().is_block_device() && numbers.contains(&b.rdev()) {
                return Some(format!("it backs loop device /dev/{n}"));
            }
            if own_backing == Some((b.dev(), b.ino())) {
                return Some(format!("loop device /dev/{n} uses the same backing file"));
            }
        }
    }
    None
}

/// Size of what `f` refers to (regular file or block device).
pub(super) fn fd_size(f: &File) -> Result<u64> {
    // SAFETY: lseek on a valid fd.
    let end = unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_END) };
    if end < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot find the target's size");
    }
    Ok(end as u64)
}

/// Rename `from` to `to` unless `to` exists (then `AlreadyExists`).
pub(super) fn link_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| std::io::Error::other("path contains NUL"))
    };
    let (a, b) = (c(from)?, c(to)?);
    // SAFETY: valid C strings.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        // Filesystems without RENAME_NOREPLACE: a hard link never replaces either.
        Some(libc::EINVAL) | Some(libc::ENOSYS) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        _ => Err(e),
    }
}

/// posix_fadvise(DONTNEED) on a range (len 0 = to the end).
pub(crate) fn drop_cache(f: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: advisory call on a valid fd.
    unsafe {
        libc::posix_fadvise(
            f.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
}

/// Share of pages of `[offset, offset+len)` of `f` resident in the page cache (mincore).
pub fn residency(f: &File, offset: u64, len: u64) -> Result<f64> {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return Ok(0.0);
    }
    let page = 4096u64;
    let start = offset / page * page;
    let end = offset + len;
    let maplen = (end - start) as usize;
    // SAFETY: read-only shared mapping of a file we hold open; unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            maplen,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            start as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error()).context("mmap for page-cache residency");
    }
    let pages = maplen.div_ceil(page as usize);
    let mut vec = vec![0u8; pages];
    // SAFETY: p is a valid mapping of maplen bytes, vec has one byte per page.
    let r = unsafe { libc::mincore(p, maplen, vec.as_mut_ptr()) };
    let err = std::io::Error::last_os_error();
    // SAFETY: unmapping what we mapped.
    unsafe { libc::munmap(p, maplen) };
    if r != 0 {
        return Err(err).context("mincore");
    }
    let resident = vec.iter().filter(|&&b| b & 1 == 1).count();
    Ok(resident as f64 / pages as f64)
}
