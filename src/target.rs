//! Targets: scratch files iolens creates and marks as its own, existing files and block
//! devices; their layout, fill, ownership marker, alignment and page-cache control.
//!
//! A scratch file starts with a 1 MiB header area whose first block carries the iolens marker
//! (magic, format version, data size, fill progress, a random target id, stamp unit); the data
//! area follows and is filled with incompressible pseudo-random data in which every 512-byte
//! unit carries a stamp (magic, checksum, target id, offset, generation; see `verify`). Only a
//! file bearing that marker, or a target the user names as disposable, is ever written.
//! Everything else is opened read-only. A scratch file of an older format (no stamps) is ours:
//! it is refilled.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use crate::units::fmt_bytes;
use crate::workload::WorkloadSpec;

/// Size of the header area before a scratch file's data (keeps data 1 MiB aligned).
pub const HEADER_AREA: u64 = 1 << 20;
const MAGIC: &[u8; 16] = b"IOLENS-SCRATCH-1";
const NOTE: &[u8] =
    b"\nThis file was created by iolens as a scratch target for storage measurement; it holds no user data and may be deleted.\n";
const FILL_CHUNK: usize = 4 << 20;
/// On-disk format of scratch files: 1 = unstamped data, 2 = every 512-byte unit stamped.
pub const FORMAT_VERSION: u32 = 2;

/// What kind of target this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// A file created and marked by iolens.
    Scratch,
    /// An existing file iolens did not create.
    File,
    /// A block device.
    BlockDevice,
}

impl TargetKind {
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Scratch => "scratch",
            TargetKind::File => "file",
            TargetKind::BlockDevice => "block-device",
        }
    }
}

/// A prepared target.
#[derive(Clone, Debug)]
pub struct Target {
    pub path: PathBuf,
    pub kind: TargetKind,
    /// Byte offset of the data area (header size for scratch files).
    pub data_offset: u64,
    /// Size of the data area.
    pub data_size: u64,
    /// Random id stamped in a scratch file's header (0 for other targets).
    pub id: u64,
    /// True when writing is allowed (own scratch file or named disposable).
    pub writable: bool,
    /// Bytes filled by this preparation (0 when an existing fill was reused).
    pub filled_bytes: u64,
}

/// How to prepare a target.
#[derive(Clone, Debug, Default)]
pub struct PrepareOptions {
    /// Size wanted for the data area; `None` uses an existing target's size, or 1 GiB for a
    /// new scratch file.
    pub size: Option<u64>,
    /// The path the user explicitly named as disposable (`--disposable-target`).
    pub disposable: Option<PathBuf>,
    /// Whether the workload will write.
    pub writes: bool,
    /// Show fill progress on a terminal.
    pub progress: bool,
}

/// Default data size of a new scratch file.
pub const DEFAULT_SCRATCH_SIZE: u64 = 1 << 30;

/// The marker block at the start of a scratch file.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    /// On-disk format ([`FORMAT_VERSION`] for files this build writes).
    pub version: u32,
    /// Bytes per stamp unit (0 in format 1).
    pub unit: u32,
    pub data_size: u64,
    /// Bytes of the data area filled (and stamped) so far.
    pub filled_upto: u64,
    pub id: u64,
}

impl Header {
    fn new(data_size: u64, filled_upto: u64, id: u64) -> Header {
        Header {
            version: FORMAT_VERSION,
            unit: crate::verify::UNIT as u32,
            data_size,
            filled_upto,
            id,
        }
    }
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[..16].copy_from_slice(MAGIC);
        b[16..20].copy_from_slice(&self.version.to_le_bytes());
        b[20..24].copy_from_slice(&self.unit.to_le_bytes());
        b[24..32].copy_from_slice(&self.data_size.to_le_bytes());
        b[32..40].copy_from_slice(&self.filled_upto.to_le_bytes());
        b[40..48].copy_from_slice(&self.id.to_le_bytes());
        b[64..64 + NOTE.len()].copy_from_slice(NOTE);
        b
    }
    fn decode(b: &[u8]) -> Option<Header> {
        if b.len() < 48 || &b[..16] != MAGIC {
            return None;
        }
        let u = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap());
        let w = |r: std::ops::Range<usize>| u32::from_le_bytes(b[r].try_into().unwrap());
        Some(Header {
            version: w(16..20),
            unit: w(20..24),
            data_size: u(24..32),
            filled_upto: u(32..40),
            id: u(40..48),
        })
    }
}

/// Read the iolens marker of a file, if it has one.
fn read_header(path: &Path) -> Option<Header> {
    let mut f = File::open(path).ok()?;
    let mut b = vec![0u8; 64];
    f.read_exact(&mut b).ok()?;
    Header::decode(&b)
}

/// The marker of a scratch file created by iolens (any format version), if `path` is one.
pub fn read_scratch_header(path: &Path) -> Option<Header> {
    read_header(path)
}

/// True when `path` is a scratch file created by iolens.
pub fn is_scratch(path: &Path) -> bool {
    read_header(path).is_some()
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn device_size(path: &Path) -> Result<u64> {
    let mut f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(f.seek(SeekFrom::End(0))?)
}

impl Target {
    /// Resolve, create or reuse the target for a workload, enforcing the safety rules.
    pub fn prepare(path: &Path, opts: &PrepareOptions, stop: &AtomicBool) -> Result<Target> {
        let meta = std::fs::metadata(path);
        match meta {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Self::create_scratch(path, opts, stop)
            }
            Err(e) => Err(e).with_context(|| format!("cannot examine {}", path.display())),
            Ok(m) if m.is_dir() => bail!(
                "{} is a directory; give a file name for the scratch file, e.g. {}/iolens-scratch.dat",
                path.display(),
                path.display()
            ),
            Ok(m) if m.file_type().is_block_device() => {
                let disposable = opts
                    .disposable
                    .as_deref()
                    .map(|d| same_path(d, path))
                    .unwrap_or(false);
                if opts.writes {
                    if !disposable {
                        bail!(
                            "refusing to write to block device {}: iolens did not create it. If \
                             its contents are disposable, say so with --disposable-target {}",
                            path.display(),
                            path.display()
                        );
                    }
                    if crate::sys::is_mounted_device(path) {
                        bail!(
                            "refusing to write to {}: it (or a partition of it) is mounted",
                            path.display()
                        );
                    }
                }
                // Refusals come first: a device we may not write is not even opened.
                let size = device_size(path)?;
                Self::check_size(path, opts.size, size)?;
                Ok(Target {
                    path: path.to_path_buf(),
                    kind: TargetKind::BlockDevice,
                    data_offset: 0,
                    data_size: opts.size.unwrap_or(size),
                    id: 0,
                    writable: opts.writes && disposable,
                    filled_bytes: 0,
                })
            }
            Ok(m) if m.is_file() => {
                if let Some(h) = read_header(path) {
                    return Self::reuse_scratch(path, h, opts, stop);
                }
                let disposable = opts
                    .disposable
                    .as_deref()
                    .map(|d| same_path(d, path))
                    .unwrap_or(false);
                if opts.writes && !disposable {
                    bail!(
                        "refusing to write to {}: it exists and was not created by iolens. \
                         Choose a new file name (iolens creates and marks its own scratch file), \
                         or, if this file's contents are disposable, say so with \
                         --disposable-target {}",
                        path.display(),
                        path.display()
                    );
                }
                let size = m.len();
                Self::check_size(path, opts.size, size)?;
                if size == 0 {
                    bail!("{} is empty: nothing to read", path.display());
                }
                Ok(Target {
                    path: path.to_path_buf(),
                    kind: TargetKind::File,
                    data_offset: 0,
                    data_size: opts.size.unwrap_or(size),
                    id: 0,
                    writable: opts.writes && disposable,
                    filled_bytes: 0,
                })
            }
            Ok(_) => bail!(
                "{} is neither a regular file nor a block device",
                path.display()
            ),
        }
    }

    fn check_size(path: &Path, want: Option<u64>, have: u64) -> Result<()> {
        if let Some(w) = want {
            if w > have {
                bail!(
                    "--size {} is larger than {} ({}); iolens only grows scratch files it created",
                    fmt_bytes(w),
                    path.display(),
                    fmt_bytes(have)
                );
            }
        }
        Ok(())
    }

    fn create_scratch(path: &Path, opts: &PrepareOptions, stop: &AtomicBool) -> Result<Target> {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            bail!(
                "cannot create scratch file {}: directory {} does not exist",
                path.display(),
                dir.display()
            );
        }
        let size = opts.size.unwrap_or(DEFAULT_SCRATCH_SIZE);
        if size == 0 {
            bail!("--size must be positive");
        }
        let free = crate::sys::free_space(&dir)
            .with_context(|| format!("cannot check free space in {}", dir.display()))?;
        let need = size + HEADER_AREA;
        if need > free {
            bail!(
                "not enough free space for a {} scratch file in {}: {} available. \
                 Use a smaller --size or another --target directory",
                fmt_bytes(size),
                dir.display(),
                fmt_bytes(free)
            );
        }
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .with_context(|| format!("cannot create scratch file {}", path.display()))?;
        let h = Header::new(size, 0, rand::random::<u64>() | 1);
        f.write_all_at(&h.encode(), 0)
            .with_context(|| format!("cannot write {}", path.display()))?;
        drop(f);
        Self::fill(path, h, opts.progress, stop)
    }

    fn reuse_scratch(
        path: &Path,
        mut h: Header,
        opts: &PrepareOptions,
        stop: &AtomicBool,
    ) -> Result<Target> {
        let want = opts.size.unwrap_or(h.data_size);
        if want > h.data_size {
            let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
            let free = crate::sys::free_space(dir.unwrap_or(Path::new(".")))?;
            if want - h.data_size > free {
                bail!(
                    "not enough free space to grow {} to {}: {} available",
                    path.display(),
                    fmt_bytes(want),
                    fmt_bytes(free)
                );
            }
            h.data_size = want;
        }
        if h.version < FORMAT_VERSION {
            // Ours, but from before block stamps: refill it so every block is stamped.
            eprintln!(
                "iolens: {} was made by an older iolens without block stamps; refilling it",
                path.display()
            );
            h = Header::new(h.data_size, 0, h.id);
        }
        let len = std::fs::metadata(path)?.len();
        if h.filled_upto > h.data_size || len < HEADER_AREA + h.filled_upto {
            if h.filled_upto <= h.data_size {
                eprintln!(
                    "iolens: {} is shorter than its header says (truncated); refilling the missing part",
                    path.display()
                );
            }
            // Truncated behind our back: refill what is missing.
            h.filled_upto = len.saturating_sub(HEADER_AREA).min(h.data_size);
            h.filled_upto -= h.filled_upto % FILL_CHUNK as u64;
        }
        let mut t = Self::fill(path, h, opts.progress, stop)?;
        t.data_size = want;
        Ok(t)
    }

    /// Fill the data area from `filled_upto` to `data_size`, recording progress in the header
    /// so an interrupted fill resumes.
    fn fill(path: &Path, mut h: Header, progress: bool, stop: &AtomicBool) -> Result<Target> {
        let start = h.filled_upto;
        if h.filled_upto < h.data_size {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .with_context(|| format!("cannot open {} to fill it", path.display()))?;
            let pb = crate::progress::bar(
                progress,
                h.data_size - h.filled_upto,
                &format!("filling {}", path.display()),
            );
            let mut rng = SmallRng::seed_from_u64(h.id ^ h.filled_upto);
            let mut buf = vec![0u8; FILL_CHUNK];
            let mut since_mark = 0u64;
            while h.filled_upto < h.data_size {
                if stop.load(Ordering::Relaxed) {
                    f.write_all_at(&h.encode(), 0)?;
                    f.sync_data()?;
                    bail!(
                        "interrupted while filling {} ({} of {} done; the next run resumes)",
                        path.display(),
                        fmt_bytes(h.filled_upto),
                        fmt_bytes(h.data_size)
                    );
                }
                let n = ((h.data_size - h.filled_upto) as usize).min(FILL_CHUNK);
                rng.fill_bytes(&mut buf[..n]);
                crate::verify::stamp(&mut buf[..n], h.id, HEADER_AREA + h.filled_upto, 0);
                f.write_all_at(&buf[..n], HEADER_AREA + h.filled_upto)
                    .with_context(|| format!("cannot fill {}", path.display()))?;
                h.filled_upto += n as u64;
                since_mark += n as u64;
                pb.inc(n as u64);
                if since_mark >= 256 << 20 {
                    f.sync_data()?;
                    f.write_all_at(&h.encode(), 0)?;
                    drop_cache(&f, HEADER_AREA + h.filled_upto - since_mark, since_mark);
                    since_mark = 0;
                }
            }
            f.sync_data()?;
            f.write_all_at(&h.encode(), 0)?;
            f.sync_data()?;
            drop_cache(&f, 0, 0);
            pb.finish_and_clear();
        }
        Ok(Target {
            path: path.to_path_buf(),
            kind: TargetKind::Scratch,
            data_offset: HEADER_AREA,
            data_size: h.data_size,
            id: h.id,
            writable: true,
            filled_bytes: h.filled_upto - start,
        })
    }

    /// Open for a workload with the right flags (O_DIRECT, O_DSYNC, read-only unless writing).
    pub fn open(&self, spec: &WorkloadSpec) -> Result<File> {
        let writes = spec.pattern.writes();
        if writes && !self.writable {
            bail!("internal: target {} is not writable", self.path.display());
        }
        let mut flags = 0;
        if spec.direct {
            flags |= libc::O_DIRECT;
        }
        if spec.sync == crate::workload::SyncMode::Dsync {
            flags |= libc::O_DSYNC;
        }
        let r = OpenOptions::new()
            .read(true)
            .write(writes)
            .custom_flags(flags)
            .open(&self.path);
        match r {
            Ok(f) => {
                if !spec.direct && !spec.pattern.sequential() {
                    // Like a database (and fio's fadvise_hint): no readahead for random access,
                    // so a buffered read brings in only the block asked for.
                    use std::os::fd::AsRawFd;
                    // SAFETY: advisory call on a valid fd.
                    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
                }
                Ok(f)
            }
            Err(e) if spec.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                let fs = crate::sys::mount_for(&self.path)
                    .map(|m| m.fstype)
                    .unwrap_or_else(|| "?".into());
                bail!(
                    "the filesystem holding {} ({fs}) refuses O_DIRECT; use --buffered (and \
                     mind the page cache), or put the target on a filesystem that supports it",
                    self.path.display()
                )
            }
            Err(e) => Err(e).with_context(|| format!("cannot open {}", self.path.display())),
        }
    }

    /// Check O_DIRECT alignment of the spec against the device's logical block size.
    pub fn check_alignment(&self, spec: &WorkloadSpec) -> Result<()> {
        if !spec.direct {
            return Ok(());
        }
        let lbs = crate::sys::logical_block_size(&self.path) as u64;
        if spec.block_size % lbs != 0 {
            bail!(
                "--bs {} is not a multiple of the device's logical block size ({lbs} bytes), \
                 which O_DIRECT requires; use a multiple of {lbs} or --buffered",
                spec.block_size
            );
        }
        if (self.data_offset + spec.region_offset) % lbs != 0 {
            bail!("--offset must be a multiple of the device's logical block size ({lbs} bytes)");
        }
        Ok(())
    }

    /// Share (0..1) of `[offset, offset+len)` of the data area resident in the page cache.
    pub fn residency(&self, offset: u64, len: u64) -> Result<f64> {
        let f = File::open(&self.path)?;
        residency(&f, self.data_offset + offset, len)
    }

    /// Drop `[offset, offset+len)` of the data area from the page cache.
    pub fn evict(&self, offset: u64, len: u64) -> Result<()> {
        let f = File::open(&self.path)?;
        drop_cache(&f, self.data_offset + offset, len);
        Ok(())
    }

    /// Read `[offset, offset+len)` of the data area through the page cache (to warm it).
    /// Readahead is disabled so exactly that range, and nothing beyond it, becomes resident.
    pub fn warm(&self, offset: u64, len: u64) -> Result<()> {
        use std::os::fd::AsRawFd;
        let f = File::open(&self.path)?;
        // SAFETY: advisory call on a valid fd.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        let mut buf = vec![0u8; 1 << 20];
        let mut pos = 0;
        while pos < len {
            let n = ((len - pos) as usize).min(buf.len());
            f.read_exact_at(&mut buf[..n], self.data_offset + offset + pos)?;
            pos += n as u64;
        }
        Ok(())
    }
}

/// posix_fadvise(DONTNEED) on a range (len 0 = to the end).
pub fn drop_cache(f: &File, offset: u64, len: u64) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip() {
        let h = Header::new(123 << 20, 5, 77);
        let d = Header::decode(&h.encode()).unwrap();
        assert_eq!((d.data_size, d.filled_upto, d.id), (123 << 20, 5, 77));
        assert_eq!((d.version, d.unit), (FORMAT_VERSION, 512));
        assert!(Header::decode(&[0u8; 64]).is_none());
    }
}
