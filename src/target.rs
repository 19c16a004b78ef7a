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
//!   ([`Corrupt`], exit status 3) and left as found. `--refill` rewrites such a file (or one of
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

use crate::units::fmt_bytes;
use crate::workload::WorkloadSpec;

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

/// A target that shows corruption (truncated, damaged header, blocks of another target): the
/// command stops without writing and exits with status 3.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Corrupt(pub String);

/// Work before the measurement was stopped by Ctrl-C or SIGTERM (a scratch-file fill, whose
/// filled part is kept and resumed by the next fill; the wait for `--start-at`). The command
/// exits with 128 + the signal, as an interrupted run does.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Interrupted(pub String);

/// The exit status an error calls for: 3 for corruption, 130 (143 for SIGTERM) for interrupted
/// preparation, 2 else.
pub fn exit_code_of(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<Corrupt>()) {
        crate::stamp::EXIT_CORRUPTION
    } else if e.chain().any(|c| c.is::<Interrupted>()) {
        // 130 for Ctrl-C, 143 for SIGTERM, as for an interrupted run.
        crate::interrupt::exit_code().max(130)
    } else {
        2
    }
}

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

fn crc64(b: &[u8]) -> u64 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, b)
}

impl Header {
    /// The same scratch file (size and id) with its fill started again: what `--refill` writes.
    fn restart(&self) -> Header {
        Header::new(self.data_size, 0, self.id)
    }

    fn new(data_size: u64, filled_upto: u64, id: u64) -> Header {
        Header {
            version: FORMAT_VERSION,
            unit: crate::stamp::UNIT as u32,
            data_size,
            filled_upto,
            id,
        }
    }
    /// The 4 KiB marker block; bytes 56..64 hold a CRC-64 of bytes 0..56.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[..16].copy_from_slice(MAGIC);
        b[16..20].copy_from_slice(&self.version.to_le_bytes());
        b[20..24].copy_from_slice(&self.unit.to_le_bytes());
        b[24..32].copy_from_slice(&self.data_size.to_le_bytes());
        b[32..40].copy_from_slice(&self.filled_upto.to_le_bytes());
        b[40..48].copy_from_slice(&self.id.to_le_bytes());
        let c = crc64(&b[..56]);
        b[56..64].copy_from_slice(&c.to_le_bytes());
        b[64..64 + NOTE.len()].copy_from_slice(NOTE);
        b
    }
    /// The fields of a block that starts with the magic (any version, checksum not checked).
    fn decode(b: &[u8]) -> Option<Header> {
        if b.len() < 64 || &b[..16] != MAGIC {
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
    /// True when the block's CRC-64 matches its fields.
    fn checksum_ok(b: &[u8]) -> bool {
        b.len() >= 64 && crc64(&b[..56]).to_le_bytes() == b[56..64]
    }
}

/// What the start of a file says about it.
#[derive(Clone, Copy, Debug)]
enum Found {
    /// No iolens marker, nor any sign of one.
    Foreign,
    /// A current-format header with a valid checksum (ownership still to be proven).
    Scratch(Header),
    /// The marker of another format version.
    OtherFormat(Header),
    /// Signs of an iolens scratch file whose marker is damaged.
    Damaged(&'static str),
}

/// The target id in a file's header bytes (whatever the state of its magic and checksum).
fn raw_id(f: &File) -> u64 {
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, 40)
        .map_or(0, |_| u64::from_le_bytes(b))
}

/// The generation journal proving iolens made this very file (see
/// [`crate::journal::proof_of_ownership`]); `None` when nothing proves it.
fn proof(f: &File) -> Option<PathBuf> {
    let id = raw_id(f);
    let p = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok()?;
    crate::journal::proof_of_ownership(&p, f, id)
}

/// What a user can do with a scratch file that is damaged or of another format: `--refill`
/// only where iolens can prove it made the file (its generation journal), else delete it.
fn next_step(path: &Path, f: &File, refill_asked: bool) -> String {
    match proof(f) {
        Some(j) => format!(
            "delete it, or rewrite it with --refill (its generation journal {} proves iolens \
             made it; this destroys the evidence)",
            j.display()
        ),
        None => format!(
            "delete it and let iolens create a new scratch file. {}Nothing proves that iolens \
             made {} (no generation journal is bound to it; a header alone can be copied), so \
             --refill does not rewrite it",
            if refill_asked {
                "--refill refused: "
            } else {
                ""
            },
            path.display()
        ),
    }
}

fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn inspect(f: &File, len: u64) -> Found {
    let mut b = vec![0u8; 4096.min(len as usize)];
    if f.read_exact_at(&mut b, 0).is_err() {
        return Found::Foreign;
    }
    if let Some(h) = Header::decode(&b) {
        if h.version != FORMAT_VERSION {
            return Found::OtherFormat(h);
        }
        if !Header::checksum_ok(&b) {
            return Found::Damaged("its header checksum does not match");
        }
        return Found::Scratch(h);
    }
    // No magic: still ours if the note, most of the magic, or a stamped first block remains.
    let note = b.len() >= 64 + NOTE.len() && &b[64..64 + NOTE.len()] == NOTE;
    let magic_bytes = b.iter().zip(MAGIC.iter()).filter(|(x, y)| x == y).count();
    let mut first = [0u8; 512];
    let stamped = len >= HEADER_AREA + 512
        && f.read_exact_at(&mut first, HEADER_AREA).is_ok()
        && matches!(
            crate::stamp::check_unit(&first, 0, HEADER_AREA, true, None),
            Some(p) if p.kind == crate::stamp::CorruptionKind::Foreign
        );
    if note || magic_bytes >= 12 || stamped {
        Found::Damaged("its header magic is damaged")
    } else {
        Found::Foreign
    }
}

/// Read the iolens marker of a file, if it has one (any version; checksum not checked).
fn read_header(path: &Path) -> Option<Header> {
    let f = File::open(path).ok()?;
    let mut b = vec![0u8; 64];
    f.read_exact_at(&mut b, 0).ok()?;
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

/// Open `path` read-only, once. A symbolic link is followed only when `path` itself is one
/// (the user named a link); otherwise `O_NOFOLLOW`. Never blocks on a FIFO. `None` when
/// nothing is there.
fn open_once(path: &Path) -> Result<Option<File>> {
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
fn identity_of(f: &File) -> Result<(u64, u64)> {
    let m = f.metadata().context("fstat of the target")?;
    Ok((m.dev(), m.ino()))
}

/// Open the very inode `f` refers to again, with other flags (`/proc/self/fd` names the open
/// file, not a path that could have changed), and confirm it is the same device and inode.
fn reopen(f: &File, write: bool, flags: libc::c_int, path: &Path) -> std::io::Result<File> {
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
fn try_flock(f: &File, exclusive: bool) -> Result<bool> {
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
struct PrepLock(File);

impl PrepLock {
    fn on(f: &File) -> Result<PrepLock> {
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

fn busy(path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "another iolens process is using {} (creating, filling or writing it); wait for it to \
         finish and try again",
        path.display()
    )
}

/// True when `--disposable-target` names the file `m` is the metadata of.
fn named_disposable(opts: &PrepareOptions, m: &std::fs::Metadata) -> bool {
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
fn device_in_use(rdev: u64) -> Option<String> {
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
fn fd_size(f: &File) -> Result<u64> {
    // SAFETY: lseek on a valid fd.
    let end = unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_END) };
    if end < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot find the target's size");
    }
    Ok(end as u64)
}

/// What preparation produced: a ready target, or (dry run) the data size it would have.
enum Prepared {
    Ready(Box<Target>),
    Would(u64),
}

impl Target {
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
        let identity = identity_of(&file)?;
        Ok(Prepared::Ready(Box::new(Target {
            path: path.to_path_buf(),
            kind: TargetKind::BlockDevice,
            data_offset: 0,
            data_size,
            id: 0,
            writable: opts.writes && disposable,
            filled_bytes: 0,
            file: Arc::new(file),
            identity,
        })))
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
                let identity = identity_of(&file)?;
                drop(_lock);
                Ok(Prepared::Ready(Box::new(Target {
                    path: path.to_path_buf(),
                    kind: TargetKind::File,
                    data_offset: 0,
                    data_size,
                    id: 0,
                    writable: opts.writes && disposable,
                    filled_bytes: 0,
                    file: Arc::new(file),
                    identity,
                })))
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
        let identity = identity_of(&file)?;
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
        Ok(Prepared::Ready(Box::new(Target {
            path: path.to_path_buf(),
            kind: TargetKind::Scratch,
            data_offset: HEADER_AREA,
            data_size: want,
            id: h.id,
            writable: true,
            filled_bytes: filled,
            file: Arc::new(file),
            identity,
        })))
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
        let identity = identity_of(&file)?;
        Ok(Prepared::Ready(Box::new(Target {
            path: path.to_path_buf(),
            kind: TargetKind::Scratch,
            data_offset: HEADER_AREA,
            data_size: h.data_size,
            id: h.id,
            writable: true,
            filled_bytes: filled,
            file: Arc::new(file),
            identity,
        })))
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
        let identity = identity_of(&f)?;
        Ok(Prepared::Ready(Box::new(Target {
            path: path.to_path_buf(),
            kind: TargetKind::Scratch,
            data_offset: HEADER_AREA,
            data_size: size,
            id: h.id,
            writable: true,
            filled_bytes: filled,
            file: Arc::new(f),
            identity,
        })))
    }

    /// Open for a workload with the right flags (O_DIRECT, O_DSYNC, read-only unless
    /// writing): the same inode as the descriptor opened by [`Target::prepare`], never the
    /// path again.
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
        match reopen(&self.file, writes, flags, &self.path) {
            Ok(f) => {
                if identity_of(&f)? != self.identity {
                    bail!(
                        "{} is no longer the file this command opened; stopping",
                        self.path.display()
                    );
                }
                if !spec.direct && !spec.pattern.sequential() {
                    // Like a database (and fio's fadvise_hint): no readahead for random access,
                    // so a buffered read brings in only the block asked for.
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

/// Rename `from` to `to` unless `to` exists (then `AlreadyExists`).
fn link_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
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

/// Prove that the data of scratch file `f` belongs to header `h`: a sample of units spread
/// over the filled area must carry its target id and their own offset. None doing so means
/// the header does not belong to this file (a copy); some not doing so is corruption.
fn prove_ownership(f: &File, h: &Header, len: u64, path: &Path) -> Result<()> {
    let unit = crate::stamp::UNIT as u64;
    // Units certainly written by the fill: the recorded part, or (a fill that has not yet
    // recorded progress) the first unit when the file reaches that far.
    let units = if h.filled_upto >= unit {
        h.filled_upto / unit
    } else if len >= HEADER_AREA + unit {
        1
    } else {
        return Ok(());
    };
    let n = OWNERSHIP_SAMPLES.min(units);
    let mut bad = Vec::new();
    let mut buf = [0u8; 512];
    for i in 0..n {
        let idx = if n == 1 { 0 } else { i * (units - 1) / (n - 1) };
        let off = HEADER_AREA + idx * unit;
        f.read_exact_at(&mut buf, off)
            .with_context(|| format!("cannot read {} at offset {off}", path.display()))?;
        if let Some(p) = crate::stamp::check_unit(&buf, h.id, off, false, None) {
            bad.push(p);
        }
    }
    if bad.is_empty() {
        return Ok(());
    }
    if bad.len() as u64 == n {
        bail!(
            "refusing to use {}: its header is an iolens scratch header, but none of {n} data \
             blocks sampled carries its target id {:#x} (first at offset {}: {}), so the header \
             does not belong to this file (copied from another?). Nothing was written",
            path.display(),
            h.id,
            bad[0].offset,
            bad[0].kind.name()
        );
    }
    Err(Corrupt(format!(
        "{}: {} of {n} data blocks sampled do not carry this scratch file's stamp (first at \
         offset {}: {}). Reported as corruption; the file is left as found. Run `iolens verify \
         --target {}` for the full picture",
        path.display(),
        bad.len(),
        bad[0].offset,
        bad[0].kind.name(),
        path.display()
    ))
    .into())
}

/// Fill the data area from `filled_upto` to `data_size` through `f` (opened for writing,
/// with the lock held), recording progress in the header so an interrupted fill resumes.
/// Returns the bytes filled. Ctrl-C/SIGTERM (`stop`) ends it cleanly with [`Interrupted`].
fn fill(f: &File, path: &Path, mut h: Header, progress: bool, stop: &AtomicBool) -> Result<u64> {
    let start = h.filled_upto;
    if h.filled_upto >= h.data_size {
        return Ok(0);
    }
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
            f.sync_data()?;
            f.write_all_at(&h.encode(), 0)?;
            f.sync_data()?;
            pb.finish_and_clear();
            return Err(Interrupted(format!(
                "interrupted while filling {} ({} of {} done). Nothing is lost: the fill \
                 resumes where it stopped with the next command that writes to it, asks for \
                 its --size, or is given --refill",
                path.display(),
                fmt_bytes(h.filled_upto),
                fmt_bytes(h.data_size)
            ))
            .into());
        }
        let n = ((h.data_size - h.filled_upto) as usize).min(FILL_CHUNK);
        rng.fill_bytes(&mut buf[..n]);
        crate::stamp::stamp(&mut buf[..n], h.id, HEADER_AREA + h.filled_upto, 0);
        f.write_all_at(&buf[..n], HEADER_AREA + h.filled_upto)
            .with_context(|| format!("cannot fill {}", path.display()))?;
        h.filled_upto += n as u64;
        since_mark += n as u64;
        pb.inc(n as u64);
        if since_mark >= MARK_EVERY {
            f.sync_data()?;
            f.write_all_at(&h.encode(), 0)?;
            drop_cache(f, HEADER_AREA + h.filled_upto - since_mark, since_mark);
            since_mark = 0;
        }
    }
    f.sync_data()?;
    f.write_all_at(&h.encode(), 0)?;
    f.sync_data()?;
    drop_cache(f, 0, 0);
    pb.finish_and_clear();
    Ok(h.filled_upto - start)
}

/// Open scratch file `path` once for the offline check (`iolens verify`): read-only,
/// `O_NOFOLLOW` unless a link was named, `O_DIRECT` when asked and allowed. A damaged header
/// is corruption ([`Corrupt`]); a file that is not a scratch file, or of another format, is
/// refused. Returns the descriptor, the header and the file's length.
pub(crate) fn open_for_verify(path: &Path, direct: bool) -> Result<(File, Header, u64)> {
    let Some(f) = open_once(path)? else {
        bail!("cannot open {}: no such file", path.display());
    };
    let m = f
        .metadata()
        .with_context(|| format!("cannot examine {}", path.display()))?;
    if !m.is_file() {
        bail!(
            "{} is not a regular file: only scratch files iolens created carry block stamps",
            path.display()
        );
    }
    let h = match inspect(&f, m.len()) {
        Found::Foreign => bail!(
            "{} was not created by iolens (no scratch marker): its blocks carry no stamps to verify",
            path.display()
        ),
        Found::Damaged(why) => {
            return Err(Corrupt(format!(
                "{} looks like an iolens scratch file, but {why}: its blocks cannot be checked \
                 against it. Reported as corruption; the file is left as found",
                path.display()
            ))
            .into())
        }
        Found::OtherFormat(h) if h.version < FORMAT_VERSION => bail!(
            "{} was made by an older iolens (scratch format {}); its header cannot be trusted \
             for verification. {}",
            path.display(),
            h.version,
            upper_first(&next_step(path, &f, false))
        ),
        Found::OtherFormat(h) => bail!(
            "{} was made by a newer iolens (scratch format {})",
            path.display(),
            h.version
        ),
        Found::Scratch(h) => h,
    };
    if h.unit != crate::stamp::UNIT as u32
        || h.filled_upto > h.data_size
        || HEADER_AREA.checked_add(h.data_size).is_none()
    {
        return Err(Corrupt(format!(
            "{}: its header is inconsistent (unit {}, data size {}, filled {})",
            path.display(),
            h.unit,
            h.data_size,
            h.filled_upto
        ))
        .into());
    }
    let f = if direct {
        match reopen(&f, false, libc::O_DIRECT, path) {
            Ok(g) => g,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => f,
            Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
        }
    } else {
        f
    };
    Ok((f, h, m.len()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip() {
        let h = Header::new(123 << 20, 5, 77);
        let e = h.encode();
        assert!(Header::checksum_ok(&e));
        let d = Header::decode(&e).unwrap();
        assert_eq!((d.data_size, d.filled_upto, d.id), (123 << 20, 5, 77));
        assert_eq!((d.version, d.unit), (FORMAT_VERSION, 512));
        assert!(Header::decode(&[0u8; 64]).is_none());
    }
}
