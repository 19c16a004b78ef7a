//! Targets: scratch files iolens creates and marks as its own, existing files and block
//! devices; their layout, fill, ownership marker, alignment and page-cache control.
//!
//! A scratch file starts with a 1 MiB header area whose first block carries the iolens marker
//! (magic, format version, data size, fill progress, a random target id, stamp unit, and a
//! CRC-64 over all of them); the data area follows and is filled with incompressible
//! pseudo-random data in which every 512-byte unit carries a stamp (magic, checksum, target id,
//! offset, generation; see `verify`).
//!
//! Safety rules, all enforced here:
//! - The target is opened **once** per command ([`Target::prepare`]) and that descriptor is
//!   kept: every later open ([`Target::open`]) re-opens the same inode through
//!   `/proc/self/fd` and confirms device and inode with `fstat`, so renaming or re-pointing a
//!   path during the command changes nothing. A symbolic link is followed only where the user
//!   named one (`O_NOFOLLOW` otherwise).
//! - Ownership is proven by a header whose checksum is valid **and** by the data itself: a
//!   sample of blocks spread over the filled area must carry the header's random target id.
//!   A header copied onto another file proves nothing. Only a proven scratch file, or a target
//!   the user names as disposable, is ever written.
//! - A read-only command never writes to an existing file; a scratch file's fill is written
//!   only by a command that writes, by one that asks for a larger `--size`, or with `--refill`.
//! - Evidence is kept: a truncated scratch file or a damaged header is reported as corruption
//!   ([`crate::exit::Corrupt`], exit status 3) and left as found. `--refill` rewrites such a file (or one of
//!   another format) only when its generation journal proves iolens made it: the journal names
//!   the target id in the file's header and the file's device and inode. A header alone (copied,
//!   format 1, failing its checksum) proves nothing.
//! - A new scratch file is created under a temporary name, locked, marked and only then given
//!   its name, so no other process ever sees it unlocked; it is filled under that lock.
//! - Block devices are written only when named disposable, opened `O_EXCL` (the kernel refuses
//!   a mounted or claimed device), and refused when mounted, held (device-mapper, md, LVM),
//!   backing a loop device, or in use as swap.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use crate::exit::{Corrupt, Interrupted};
use crate::units::fmt_bytes;
use crate::workload::WorkloadSpec;

mod access;
mod scratch;

pub(crate) use access::drop_cache;
pub use access::residency;
use access::*;
pub(crate) use scratch::open_for_verify;
use scratch::*;
pub use scratch::{is_scratch, read_scratch_header, Header};

/// Size of the header area before a scratch file's data (keeps data 1 MiB aligned).
pub const HEADER_AREA: u64 = 1 << 20;
const MAGIC: &[u8; 16] = b"IOLENS-SCRATCH-1";
const NOTE: &[u8] =
    b"\nThis file was created by iolens as a scratch target for storage measurement; it holds no user data and may be deleted.\n";
const FILL_CHUNK: usize = 4 << 20;
/// On-disk format of scratch files: 1 = unstamped data, 2 = every 512-byte unit stamped,
/// 3 = stamped, header protected by a CRC-64.
pub const FORMAT_VERSION: u32 = 3;
/// Blocks sampled over the filled area to prove a scratch file's ownership.
const OWNERSHIP_SAMPLES: u64 = 32;
/// How far the fill may run ahead of the progress recorded in the header.
const MARK_EVERY: u64 = 256 << 20;

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

impl From<TargetKind> for crate::results::StorageKind {
    fn from(k: TargetKind) -> Self {
        match k {
            TargetKind::Scratch => crate::results::StorageKind::Scratch,
            TargetKind::File => crate::results::StorageKind::File,
            TargetKind::BlockDevice => crate::results::StorageKind::BlockDevice,
        }
    }
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

/// A prepared target, holding the descriptor opened once for the whole command.
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
    /// The descriptor opened once; every later open is of this very inode.
    file: Arc<File>,
    /// Device and inode of `file` (for block devices: 0 and the device number).
    identity: (u64, u64),
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
    /// `--refill`: the user asks to (re)write the scratch file's fill: complete an interrupted
    /// fill from a read-only command, or rewrite a truncated, damaged or old-format scratch
    /// file from the start (destroying the evidence).
    pub refill: bool,
    /// `--grow`: the user asks to grow an existing scratch file to `size` (fill the new part
    /// and extend its generation journal over it). Without it a larger `--size` is refused.
    pub grow: bool,
}

/// Whether `a` and `b` name the same file (device and inode) or the same block device (device
/// number), through whatever links; `false` when either cannot be examined.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => {
            (x.dev(), x.ino()) == (y.dev(), y.ino())
                || (x.file_type().is_block_device()
                    && y.file_type().is_block_device()
                    && x.rdev() == y.rdev())
        }
        _ => false,
    }
}

/// Refuse a list of targets that names one file or device twice: by identity where it exists
/// (two paths, links or device nodes of one inode or device), by its resolved directory and
/// name where it is yet to be created.
pub fn refuse_repeats(paths: &[PathBuf]) -> Result<()> {
    let resolved = |p: &Path| -> Option<PathBuf> {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
    };
    for (i, a) in paths.iter().enumerate() {
        for b in &paths[..i] {
            let same = same_file(a, b)
                || (std::fs::symlink_metadata(a).is_err()
                    && resolved(a).is_some_and(|x| Some(x) == resolved(b)));
            if same {
                bail!(
                    "{} and {} are the same target: name each file or device once (a run over \
                     several targets spreads its I/O over distinct ones)",
                    b.display(),
                    a.display()
                );
            }
        }
    }
    Ok(())
}

/// Default data size of a new scratch file.
pub const DEFAULT_SCRATCH_SIZE: u64 = 1 << 30;

/// What preparation produced: a ready target, or (dry run) the data size it would have.
enum Prepared {
    Ready(Box<Target>),
    Would(u64),
}

impl Target {
    /// The `WorkloadSpec::targets` of a run over `targets`: their names when the work is
    /// striped over several, empty for one (a one-target run names it in `target` alone).
    pub fn stripe_names(targets: &[Target]) -> Vec<String> {
        if targets.len() > 1 {
            targets
                .iter()
                .map(|t| t.path.display().to_string())
                .collect()
        } else {
            Vec::new()
        }
    }

    /// A prepared target that is not an iolens scratch file (a block device, an existing
    /// file): its data from offset 0, writable only where the user named it disposable.
    fn other(
        path: &Path,
        kind: TargetKind,
        file: File,
        data_size: u64,
        writable: bool,
    ) -> Result<Prepared> {
        let identity = identity_of(&file)?;
        Ok(Prepared::Ready(Box::new(Target {
            path: path.to_path_buf(),
            kind,
            data_offset: 0,
            data_size,
            id: 0,
            writable,
            filled_bytes: 0,
            file: Arc::new(file),
            identity,
        })))
    }

    /// A prepared iolens scratch file: data after its header area, always writable.
    fn scratch(path: &Path, file: File, data_size: u64, id: u64, filled: u64) -> Result<Prepared> {
        let identity = identity_of(&file)?;
        Ok(Prepared::Ready(Box::new(Target {
            path: path.to_path_buf(),
            kind: TargetKind::Scratch,
            data_offset: HEADER_AREA,
            data_size,
            id,
            writable: true,
            filled_bytes: filled,
            file: Arc::new(file),
            identity,
        })))
    }

    /// Resolve, create or reuse the target for a workload, enforcing the safety rules. The
    /// target is opened here, once; the returned `Target` holds that descriptor.
    pub fn prepare(path: &Path, opts: &PrepareOptions, stop: &AtomicBool) -> Result<Target> {
        match Self::prepare_inner(path, opts, stop, false, 0)? {
            Prepared::Ready(t) => Ok(*t),
            Prepared::Would(_) => bail!("internal: a dry run where a real one was asked"),
        }
    }

    /// Every check [`Target::prepare`] makes, without creating, filling, locking or writing
    /// anything (for `--explain`). Returns the data size the target would have.
    pub fn check(path: &Path, opts: &PrepareOptions) -> Result<u64> {
        match Self::prepare_inner(path, opts, &AtomicBool::new(false), true, 0)? {
            Prepared::Ready(t) => Ok(t.data_size),
            Prepared::Would(s) => Ok(s),
        }
    }

    /// The descriptor opened once for this command.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Whether `other` is the very same file or device (compared by the descriptors held).
    pub fn same_as(&self, other: &Target) -> bool {
        self.identity == other.identity
    }

    fn prepare_inner(
        path: &Path,
        opts: &PrepareOptions,
        stop: &AtomicBool,
        dry: bool,
        depth: u32,
    ) -> Result<Prepared> {
        if opts.size == Some(0) {
            bail!("--size must be positive");
        }
        if let Some(s) = opts.size {
            if s.checked_add(HEADER_AREA).is_none() {
                bail!("--size {s} is too large: no target holds that many bytes");
            }
        }
        let Some(file) = open_once(path)? else {
            return Self::create_scratch(path, opts, stop, dry, depth);
        };
        let m = file
            .metadata()
            .with_context(|| format!("cannot examine {}", path.display()))?;
        if m.is_dir() {
            bail!(
                "{} is a directory; give a file name for the scratch file, e.g. {}/iolens-scratch.dat",
                path.display(),
                path.display()
            );
        }
        if m.file_type().is_block_device() {
            return Self::block_device(path, file, &m, opts, dry);
        }
        if !m.is_file() {
            bail!(
                "{} is neither a regular file nor a block device",
                path.display()
            );
        }
        Self::existing_file(path, file, &m, opts, stop, dry)
    }

    fn block_device(
        path: &Path,
        file: File,
        m: &std::fs::Metadata,
        opts: &PrepareOptions,
        dry: bool,
    ) -> Result<Prepared> {
        let disposable = named_disposable(opts, m);
        if opts.refill {
            bail!(
                "--refill applies to iolens scratch files; {} is a block device",
                path.display()
            );
        }
        if opts.writes {
            if !disposable {
                bail!(
                    "refusing to write to block device {}: iolens did not create it. If \
                     its contents are disposable, say so with --disposable-target {}",
                    path.display(),
                    path.display()
                );
            }
            if let Some(why) = device_in_use(m.rdev()) {
                bail!("refusing to write to {}: {why}", path.display());
            }
        }
        let size = fd_size(&file)?;
        Self::check_size(path, opts.size, size)?;
        let data_size = opts.size.unwrap_or(size);
        if dry {
            return Ok(Prepared::Would(data_size));
        }
        let file = if opts.writes {
            // O_EXCL: the kernel refuses a device that is mounted or claimed by a holder, and
            // keeps others from claiming it while this command runs.
            match reopen(&file, true, libc::O_EXCL, path) {
                Ok(f) => f,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => bail!(
                    "refusing to write to {}: the kernel reports it in use (mounted, or held \
                     by device-mapper, md, LVM or another program)",
                    path.display()
                ),
                Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
            }
        } else {
            file
        };
        Target::other(
            path,
            TargetKind::BlockDevice,
            file,
            data_size,
            opts.writes && disposable,
        )
    }

    fn existing_file(
        path: &Path,
        file: File,
        m: &std::fs::Metadata,
        opts: &PrepareOptions,
        stop: &AtomicBool,
        dry: bool,
    ) -> Result<Prepared> {
        // Whoever may write takes the lock before looking, so what it sees cannot change
        // under it; a read-only look shares it when it can.
        let must_write = opts.writes || opts.refill;
        let mut exclusive = false;
        let _lock = if dry {
            None
        } else if (must_write || opts.size.is_some()) && try_flock(&file, true)? {
            exclusive = true;
            Some(PrepLock::on(&file)?)
        } else if must_write {
            return Err(busy(path));
        } else if try_flock(&file, false)? {
            Some(PrepLock::on(&file)?)
        } else {
            None
        };
        let len = m.len();
        let disposable = named_disposable(opts, m);
        match inspect(&file, len) {
            Found::Foreign => {
                if opts.refill {
                    bail!(
                        "--refill applies to iolens scratch files; {} was not created by iolens",
                        path.display()
                    );
                }
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
                Self::check_size(path, opts.size, len)?;
                if len == 0 {
                    bail!("{} is empty: nothing to read", path.display());
                }
                let data_size = opts.size.unwrap_or(len);
                if dry {
                    return Ok(Prepared::Would(data_size));
                }
                drop(_lock);
                Target::other(
                    path,
                    TargetKind::File,
                    file,
                    data_size,
                    opts.writes && disposable,
                )
            }
            Found::Damaged(why) if !opts.refill || proof(&file).is_none() => Err(Corrupt(format!(
                "{} looks like an iolens scratch file, but {why}: reported as corruption, \
                     and the file is left as found. Examine it, then {}",
                path.display(),
                next_step(path, &file, opts.refill)
            ))
            .into()),
            Found::OtherFormat(h) if !opts.refill || proof(&file).is_none() => bail!(
                "{} was made by {} iolens (scratch format {}, this one uses {}); its ownership \
                 cannot be proven, so nothing was written. {}",
                path.display(),
                if h.version < FORMAT_VERSION {
                    "an older"
                } else {
                    "a newer"
                },
                h.version,
                FORMAT_VERSION,
                upper_first(&next_step(path, &file, opts.refill))
            ),
            Found::Damaged(_) | Found::OtherFormat(_) => {
                // --refill, and a generation journal bound to this very file and to the id in
                // its header proves iolens made it: rewrite it from the start.
                let old = Header::decode(&{
                    let mut b = vec![0u8; 64.min(len as usize)];
                    let _ = file.read_exact_at(&mut b, 0);
                    b
                });
                let data_size = opts
                    .size
                    .or_else(|| {
                        old.map(|h| h.data_size)
                            .filter(|&s| s > 0 && s.checked_add(HEADER_AREA).is_some())
                    })
                    .unwrap_or(len.saturating_sub(HEADER_AREA) / 512 * 512);
                // The id its journal is bound to (proven above), whatever state the magic is in.
                let id = raw_id(&file);
                Self::refill(
                    path,
                    file,
                    Header::new(data_size, 0, id),
                    len,
                    opts,
                    stop,
                    dry,
                )
            }
            Found::Scratch(h) => {
                Self::existing_scratch(path, file, h, len, opts, stop, dry, exclusive)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn existing_scratch(
        path: &Path,
        file: File,
        h: Header,
        len: u64,
        opts: &PrepareOptions,
        stop: &AtomicBool,
        dry: bool,
        exclusive: bool,
    ) -> Result<Prepared> {
        let corrupt = |what: String| -> anyhow::Error {
            Corrupt(format!(
                "{}: {what}. Reported as corruption; the file is left as found. Examine it \
                 (`iolens verify --target {}`), then {}",
                path.display(),
                path.display(),
                next_step(path, &file, opts.refill)
            ))
            .into()
        };
        let proven = || proof(&file).is_some();
        let end = HEADER_AREA.checked_add(h.data_size);
        if h.unit != crate::stamp::UNIT as u32
            || h.data_size == 0
            || end.is_none()
            || h.filled_upto > h.data_size
            || h.id == 0
        {
            return Err(corrupt(format!(
                "its header is inconsistent (unit {}, data size {}, filled {}, id {:#x})",
                h.unit, h.data_size, h.filled_upto, h.id
            )));
        }
        let end = end.unwrap_or(u64::MAX);
        let data_end = HEADER_AREA + h.filled_upto;
        if h.filled_upto > 0 && len < data_end {
            if opts.refill && proven() {
                return Self::refill(path, file, h.restart(), len, opts, stop, dry);
            }
            return Err(corrupt(format!(
                "truncated: its header says the data area is filled up to offset {data_end}, \
                 the file ends at {len} ({} missing)",
                fmt_bytes(data_end - len)
            )));
        }
        if len > end {
            return Err(corrupt(format!(
                "the file ({}) is larger than its header says ({} of data after a {} header)",
                fmt_bytes(len),
                fmt_bytes(h.data_size),
                fmt_bytes(HEADER_AREA)
            )));
        }
        // Ownership: the data must carry the header's target id.
        if let Err(e) = prove_ownership(&file, &h, len, path) {
            if !opts.refill || !proven() {
                return Err(e);
            }
            return Self::refill(path, file, h.restart(), len, opts, stop, dry);
        }
        let want = opts.size.unwrap_or(h.data_size);
        // Growing is asked for, never done on the side: the file and its generation journal
        // grow together, or not at all.
        if want > h.data_size && !opts.grow {
            bail!(
                "--size {} is larger than scratch file {} ({} of data): a scratch file grows only \
                 when asked. Add --grow to fill the {} more and extend its generation journal \
                 over them, or give --size {} or less to use it as it is",
                fmt_bytes(want),
                path.display(),
                fmt_bytes(h.data_size),
                fmt_bytes(want - h.data_size),
                fmt_bytes(h.data_size)
            );
        }
        let needs_fill = want > h.filled_upto;
        if opts.refill && !needs_fill {
            let h = Header::new(want.max(h.data_size), 0, h.id);
            return Self::refill(path, file, h, len, opts, stop, dry);
        }
        if needs_fill {
            let asked = opts.writes || opts.refill || opts.size.is_some();
            if !asked {
                bail!(
                    "{} is filled only up to {} of {} (a fill was interrupted, or another iolens \
                     process is filling it now). A read-only command does not write to it: \
                     complete the fill with --refill, or with any command that writes",
                    path.display(),
                    fmt_bytes(h.filled_upto),
                    fmt_bytes(h.data_size)
                );
            }
            if !dry && !exclusive {
                return Err(busy(path));
            }
            // Room for everything up to the end of the fill, beyond what the file holds now.
            let total = HEADER_AREA + want.max(h.data_size);
            Self::check_room(path, total.saturating_sub(len), total)?;
        }
        if dry {
            return Ok(Prepared::Would(want));
        }
        let mut filled = 0;
        if needs_fill {
            let rw = reopen(&file, true, 0, path)
                .with_context(|| format!("cannot open {} to fill it", path.display()))?;
            let mut h2 = h;
            if want > h.data_size {
                // The journal first, then the new size: the journal always covers the whole
                // data area the header names, and the file never grows beyond what its header
                // says.
                crate::journal::extend(path, &file, h.id, want)?;
                h2.data_size = want;
                rw.write_all_at(&h2.encode(), 0)?;
                rw.sync_data()?;
            }
            filled = fill(&rw, path, h2, opts.progress, stop)?;
        }
        Target::scratch(path, file, want, h.id, filled)
    }

    /// Rewrite a scratch file's fill from the start (`--refill`).
    fn refill(
        path: &Path,
        file: File,
        h: Header,
        len: u64,
        opts: &PrepareOptions,
        stop: &AtomicBool,
        dry: bool,
    ) -> Result<Prepared> {
        if h.data_size == 0 {
            bail!("{} is too small to refill; give a --size", path.display());
        }
        let total = h
            .data_size
            .checked_add(HEADER_AREA)
            .with_context(|| format!("--size {} is too large", h.data_size))?;
        if total > len {
            Self::check_room(path, total - len, total)?;
        }
        if dry {
            return Ok(Prepared::Would(h.data_size));
        }
        crate::out::note(&format!(
            "--refill: rewriting {} ({} of data) from the start",
            path.display(),
            fmt_bytes(h.data_size)
        ));
        let rw = reopen(&file, true, 0, path)
            .with_context(|| format!("cannot open {} to fill it", path.display()))?;
        // Every block is rewritten with generation 0: its journal's bounds start again at 0
        // first (a lower bound that stays true however far the fill gets).
        crate::journal::restart(path, &file, h.id)?;
        rw.write_all_at(&h.encode(), 0)?;
        if len > total {
            rw.set_len(total)?;
        }
        rw.sync_data()?;
        let filled = fill(&rw, path, h, opts.progress, stop)?;
        Target::scratch(path, file, h.data_size, h.id, filled)
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

    /// Refuse growth by `more` bytes (to `total` bytes in all) that the filesystem holding
    /// `path` cannot take: beyond its capacity, or beyond its free space.
    fn check_room(path: &Path, more: u64, total: u64) -> Result<()> {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let (capacity, free) = crate::sys::fs_space(&dir)
            .with_context(|| format!("cannot check free space in {}", dir.display()))?;
        if total > capacity {
            bail!(
                "not enough free space for a {} scratch file in {}: the filesystem holds only {} \
                 in all; use a smaller --size",
                fmt_bytes(total),
                dir.display(),
                fmt_bytes(capacity)
            );
        }
        if more > free {
            bail!(
                "not enough free space for a {} scratch file in {}: {} more needed, {} \
                 available. Use a smaller --size or another --target directory",
                fmt_bytes(total),
                dir.display(),
                fmt_bytes(more),
                fmt_bytes(free)
            );
        }
        Ok(())
    }

    fn create_scratch(
        path: &Path,
        opts: &PrepareOptions,
        stop: &AtomicBool,
        dry: bool,
        depth: u32,
    ) -> Result<Prepared> {
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
        if opts.refill {
            bail!(
                "--refill: {} does not exist (a new scratch file is filled anyway)",
                path.display()
            );
        }
        let size = opts.size.unwrap_or(DEFAULT_SCRATCH_SIZE);
        let total = size
            .checked_add(HEADER_AREA)
            .with_context(|| format!("--size {size} is too large"))?;
        Self::check_room(path, total, total)?;
        if dry {
            return Ok(Prepared::Would(size));
        }
        // Create under a temporary name, lock, mark, and only then give it its name: no other
        // process can see it unmarked or unlocked.
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "scratch".into());
        let temp = dir.join(format!(".{name}.iolens-new-{:016x}", rand::random::<u64>()));
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temp)
            .with_context(|| format!("cannot create scratch file {}", path.display()))?;
        let placed = (|| -> Result<Header> {
            if !try_flock(&f, true)? {
                bail!("internal: a new file was locked by someone else");
            }
            let h = Header::new(size, 0, rand::random::<u64>() | 1);
            f.write_all_at(&h.encode(), 0)
                .with_context(|| format!("cannot write {}", path.display()))?;
            f.sync_data()?;
            Ok(h)
        })()
        .and_then(|h| {
            link_noreplace(&temp, path)
                .map(|_| h)
                .map_err(anyhow::Error::from)
        });
        let h = match placed {
            Ok(h) => h,
            Err(e) => {
                let _ = std::fs::remove_file(&temp);
                let exists = e
                    .downcast_ref::<std::io::Error>()
                    .map(|e| e.kind() == std::io::ErrorKind::AlreadyExists)
                    .unwrap_or(false);
                if exists && depth == 0 {
                    // Someone else created it first: treat it as an existing file.
                    return Self::prepare_inner(path, opts, stop, dry, depth + 1);
                }
                return Err(e)
                    .with_context(|| format!("cannot create scratch file {}", path.display()));
            }
        };
        let _lock = PrepLock::on(&f)?;
        let filled = fill(&f, path, h, opts.progress, stop)?;
        drop(_lock);
        Target::scratch(path, f, size, h.id, filled)
    }

    /// Open for a workload with the right flags (O_DIRECT, O_DSYNC, read-only unless
    /// writing): the same inode as the descriptor opened by [`Target::prepare`], never the
    /// path again.
    pub fn open(&self, spec: &WorkloadSpec) -> Result<File> {
        let dsync = spec.sync == crate::workload::SyncMode::Dsync;
        let random = !spec.pattern.sequential();
        self.open_with(spec.pattern.writes(), spec.direct, dsync, random)
    }

    /// [`Target::open`] by its flags: writing (refused unless the target is writable),
    /// O_DIRECT, O_DSYNC, and random access (no readahead for buffered reads).
    pub fn open_with(&self, writes: bool, direct: bool, dsync: bool, random: bool) -> Result<File> {
        if writes && !self.writable {
            bail!("internal: target {} is not writable", self.path.display());
        }
        let mut flags = 0;
        if direct {
            flags |= libc::O_DIRECT;
        }
        if dsync {
            flags |= libc::O_DSYNC;
        }
        match reopen(&self.file, writes, flags, &self.path) {
            Ok(f) => {
                if identity_of(&f)? != self.identity {
                    bail!(
                        "{} is no longer the file this command opened; stopping",
                        self.path.display()
                    );
                }
                if !direct && random {
                    // Like a database (and fio's fadvise_hint): no readahead for random access,
                    // so a buffered read brings in only the block asked for.
                    // SAFETY: advisory call on a valid fd.
                    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
                }
                Ok(f)
            }
            Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
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
    pub(crate) fn check_alignment(&self, spec: &WorkloadSpec) -> Result<()> {
        if !spec.direct {
            return Ok(());
        }
        let lbs = crate::sys::logical_block_size(&self.path) as u64;
        if !spec.block_size.is_multiple_of(lbs) {
            bail!(
                "--bs {} is not a multiple of the device's logical block size ({lbs} bytes), \
                 which O_DIRECT requires; use a multiple of {lbs} or --buffered",
                spec.block_size
            );
        }
        if !(self.data_offset + spec.region_offset).is_multiple_of(lbs) {
            bail!("--offset must be a multiple of the device's logical block size ({lbs} bytes)");
        }
        Ok(())
    }

    /// Share (0..1) of `[offset, offset+len)` of the data area resident in the page cache.
    pub fn residency(&self, offset: u64, len: u64) -> Result<f64> {
        residency(&self.file, self.data_offset + offset, len)
    }

    /// Drop `[offset, offset+len)` of the data area from the page cache.
    pub fn evict(&self, offset: u64, len: u64) -> Result<()> {
        drop_cache(&self.file, self.data_offset + offset, len);
        Ok(())
    }

    /// Read `[offset, offset+len)` of the data area through the page cache (to warm it).
    /// Readahead is disabled so exactly that range, and nothing beyond it, becomes resident.
    pub fn warm(&self, offset: u64, len: u64) -> Result<()> {
        let f = reopen(&self.file, false, 0, &self.path)?;
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
