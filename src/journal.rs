//! Generation journal: offline lost-write detection for scratch files.
//!
//! The in-memory [`GenMap`] catches a lost write only while the run that made it is still
//! going. A block restored from an older copy after the run (a snapshot rolled back, a backup
//! written over it, a write the storage acknowledged and dropped on power loss) would pass
//! `iolens verify`, because nothing outside the run's memory remembered what was written.
//! Oracle closes that gap with its redo (lost-write protection compares each block's SCN with
//! the SCN the redo recorded); iolens keeps a *generation journal* beside the scratch file.
//!
//! ## What it holds
//! For each *granule* of the data area, a lower bound: every 512-byte unit of the granule must
//! carry a generation ≥ the journal's. A write that covers a whole granule and completed alone
//! raises the bound to its generation; nothing else changes it. `iolens verify` reports a unit
//! whose stamp is *below* the bound as a stale block (exit 3); a stamp above it is fine (the
//! journal lags the data). Generations compare across runs because a journaled run takes its
//! 24-bit run nonce from the journal's run counter (1, 2, 3, … instead of a random number), so
//! `nonce << 40 | per-block counter` grows with every write to a block, run after run.
//!
//! ## Never ahead of the data
//! Entries are collected from the [`GenMap`] off the hot path (a flusher thread, every
//! [`FLUSH_INTERVAL`] and at the end of the run: no lock, allocation or syscall per I/O): only
//! blocks whose last write completed, succeeded and did not overlap another are taken. Then the
//! *target* is `fdatasync`ed, and only then are the journal pages written and synced: a
//! generation is recorded only once the write that carries it is durable. A crash loses the
//! latest journal updates (it lags; no false report), never the reverse.
//!
//! ## Format (`<target>.iolens-journal`, 4 KiB pages)
//! Page 0 is the header (magic, version, target id, device and inode of the scratch file,
//! granule, entry count, run counter, flush count; CRC32C over the page). Page k+1 holds
//! entries 510·k … 510·k+509 as little-endian u64 generations, after a CRC32C over the rest of
//! the page, the page number and the target id (a page of another journal, or one misplaced,
//! fails its checksum). A torn or damaged page is reported as such; the other pages still count.
//!
//! ## Size and block sizes
//! The granule is the largest size dividing every write block size (and region offset) used
//! on the file so far: the first writing run's `--bs`; a later run with a smaller or unaligned
//! `--bs` re-grains the journal (each finer granule inherits its coarse granule's bound, which
//! stays a valid lower bound), written to a new file and renamed over the old one. 8 bytes per
//! granule, plus 16 bytes per 510 entries: a 1 GiB file written with 8 KiB blocks costs 1 MiB
//! (0.1 %), with 512-byte writes 16 MiB (1.6 %, the bound). A run keeps only the pages covering
//! its working set in memory, at most [`MAX_RUN_ENTRIES`] entries (32 MiB); a larger run still
//! takes its nonce from the journal but leaves the entries as they were (they lag), and says so.
//! `iolens verify` reads the journal one page at a time, in step with the data.
//!
//! ## Binding and finding it
//! The journal is created complete or not at all: written and synced under a temporary name
//! (`O_EXCL|O_NOFOLLOW`), then linked to its name, which must not exist. A disk filling up
//! leaves no journal, never an empty one. It names the scratch file's random target id and its
//! device and inode. A journal of another target or another file (the scratch file replaced by
//! a copy) is refused, never overwritten or used; a file at the journal's path that is not a
//! journal is never touched. One that an older iolens left unfinished (shorter than its header
//! page with nothing but the start of a header, or a header page never written) records
//! nothing: it is reported as such, not as corruption, and the next writing run replaces it.
//!
//! The journal is found by the file, not by the name it was reached through: a writing run
//! records the journal's absolute path in the scratch file's header area (the second 4 KiB
//! block, checksummed and bound to the target id), so a run or `verify` through a hard link or
//! a symbolic link finds the same journal. Without that record (a file a writing run has not
//! seen yet) the journal is the one beside the file's real name (symbolic links resolved),
//! then the one beside the name given.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::stamp::{GenMap, MAX_SLOTS, UNIT};

/// Bytes per journal page.
pub const PAGE: usize = 4096;
/// Entries per journal page.
pub const PER_PAGE: u64 = ((PAGE - 16) / 8) as u64;
const MAGIC: &[u8; 16] = b"IOLENS-GENJRNL-1";
const VERSION: u32 = 1;
/// Suffix of the journal beside its scratch file.
pub const SUFFIX: &str = ".iolens-journal";
/// How often a run records completed generations (and at its end).
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(2);
/// Most entries a run keeps in memory (32 MiB).
pub const MAX_RUN_ENTRIES: u64 = 1 << 22;
/// Largest run nonce (24 bits).
const MAX_RUNS: u64 = 0xFF_FFFF;

/// The journal beside scratch file `target`'s name (where a new one is created, beside the
/// real name; see [`locate`] for the one a file uses).
pub fn path_for(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(SUFFIX);
    target.with_file_name(name)
}

fn crc(b: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, b) as u32
}

fn rd64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The journal's header page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub(crate) target_id: u64,
    pub dev: u64,
    pub(crate) ino: u64,
    /// Bytes of the data area per entry (a multiple of 512).
    pub(crate) granule: u64,
    pub entries: u64,
    /// Runs that took a nonce from this journal (the last nonce handed out).
    pub runs: u64,
    pub flushes: u64,
    /// Unix time of the last flush.
    pub(crate) updated: u64,
}

impl Header {
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; PAGE];
        b[..16].copy_from_slice(MAGIC);
        b[16..20].copy_from_slice(&VERSION.to_le_bytes());
        b[20..24].copy_from_slice(&(PER_PAGE as u32).to_le_bytes());
        for (i, v) in [
            self.target_id,
            self.dev,
            self.ino,
            self.granule,
            self.entries,
            self.runs,
            self.flushes,
            self.updated,
        ]
        .iter()
        .enumerate()
        {
            b[24 + 8 * i..32 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        let c = crc(&b[..PAGE - 4]);
        b[PAGE - 4..].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Decode a header page; the error says what is wrong with it.
    fn decode(b: &[u8]) -> std::result::Result<Header, String> {
        if b.len() < PAGE {
            return Err(format!(
                "it is {} bytes long, shorter than its {PAGE}-byte header (torn or truncated)",
                b.len()
            ));
        }
        if &b[..16] != MAGIC {
            return Err("it does not start with the journal magic".into());
        }
        if rd32(b, PAGE - 4) != crc(&b[..PAGE - 4]) {
            return Err("its header fails its checksum (torn or damaged)".into());
        }
        if rd32(b, 16) != VERSION || rd32(b, 20) as u64 != PER_PAGE {
            return Err(format!("it has an unknown format version {}", rd32(b, 16)));
        }
        let h = Header {
            target_id: rd64(b, 24),
            dev: rd64(b, 32),
            ino: rd64(b, 40),
            granule: rd64(b, 48),
            entries: rd64(b, 56),
            runs: rd64(b, 64),
            flushes: rd64(b, 72),
            updated: rd64(b, 80),
        };
        if h.granule == 0 || !h.granule.is_multiple_of(UNIT as u64) || h.runs > MAX_RUNS {
            return Err(format!(
                "its header holds impossible values (granule {}, runs {})",
                h.granule, h.runs
            ));
        }
        Ok(h)
    }

    fn pages(&self) -> u64 {
        self.entries.div_ceil(PER_PAGE)
    }

    /// Bytes the journal file must have.
    pub(crate) fn file_len(&self) -> u64 {
        (1 + self.pages()) * PAGE as u64
    }
}

/// Seal entry page `no` (its checksum binds it to its number and target).
fn seal(page: &mut [u8], no: u64, id: u64) {
    page[4..8].copy_from_slice(&(no as u32).to_le_bytes());
    page[8..16].copy_from_slice(&id.to_le_bytes());
    let c = crc(&page[4..]);
    page[0..4].copy_from_slice(&c.to_le_bytes());
}

fn page_ok(page: &[u8], no: u64, id: u64) -> bool {
    rd32(page, 0) == crc(&page[4..]) && rd32(page, 4) == no as u32 && rd64(page, 8) == id
}

fn entry(page: &[u8], i: u64) -> u64 {
    rd64(page, 16 + 8 * i as usize)
}

fn set_entry(page: &mut [u8], i: u64, v: u64) {
    let at = 16 + 8 * i as usize;
    page[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn open_nofollow(path: &Path, write: bool) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn read_header(f: &File) -> std::result::Result<Header, String> {
    let mut b = vec![0u8; PAGE];
    let mut n = 0;
    while n < PAGE {
        match f.read_at(&mut b[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("it cannot be read: {e}")),
        }
    }
    b.truncate(n);
    Header::decode(&b)
}

/// Refuse a journal that is not this target's: another target id, or another file.
fn check_binding(h: &Header, jpath: &Path, id: u64, dev: u64, ino: u64) -> Result<()> {
    if h.target_id != id {
        bail!(
            "{} belongs to another iolens target (id {:016x}, this one is {:016x}): refusing to \
             use it. If its scratch file is gone, delete the journal",
            jpath.display(),
            h.target_id,
            id
        );
    }
    if (h.dev, h.ino) != (dev, ino) {
        bail!(
            "{} was written for another file (device {:#x}, inode {}; this one is device {:#x}, \
             inode {}): the scratch file was replaced by a copy, so the journal cannot vouch for \
             its blocks. Refusing to use it; verify with --no-journal, or delete the journal",
            jpath.display(),
            h.dev,
            h.ino,
            dev,
            ino
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Finding a file's journal

/// Offset, in the scratch file's header area, of the block naming its journal.
const LOCATOR_AT: u64 = 4096;
const LOCATOR_MAGIC: &[u8; 16] = b"IOLENS-JRNLLOC-1";

/// A plain (buffered, no `O_DIRECT`) descriptor of the very inode `data` holds, checked by
/// device and inode.
fn plain(data: &File, write: bool) -> std::io::Result<File> {
    use std::os::fd::AsRawFd;
    let f = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{}", data.as_raw_fd()))?;
    let (a, b) = (f.metadata()?, data.metadata()?);
    if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
        return Err(std::io::Error::other(
            "the file changed while it was reopened",
        ));
    }
    Ok(f)
}

/// The journal path recorded in scratch file `data` (target id `id`), if a writing run
/// recorded one.
fn recorded(data: &File, id: u64) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let f = plain(data, false).ok()?;
    let mut b = vec![0u8; PAGE];
    f.read_exact_at(&mut b, LOCATOR_AT).ok()?;
    if &b[..16] != LOCATOR_MAGIC || rd64(&b, 16) != id {
        return None;
    }
    let n = rd32(&b, 24) as usize;
    if n == 0 || 28 + n > PAGE - 4 || rd32(&b, PAGE - 4) != crc(&b[..PAGE - 4]) {
        return None;
    }
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(&b[28..28 + n])))
}

/// Record `jpath` (absolute) as the journal of scratch file `data`.
fn record(data: &File, id: u64, jpath: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let p = jpath.as_os_str().as_bytes();
    if p.len() + 32 > PAGE {
        return Err(std::io::Error::other(
            "the journal's path is too long to record",
        ));
    }
    let mut b = vec![0u8; PAGE];
    b[..16].copy_from_slice(LOCATOR_MAGIC);
    b[16..24].copy_from_slice(&id.to_le_bytes());
    b[24..28].copy_from_slice(&(p.len() as u32).to_le_bytes());
    b[28..28 + p.len()].copy_from_slice(p);
    let c = crc(&b[..PAGE - 4]);
    b[PAGE - 4..].copy_from_slice(&c.to_le_bytes());
    let f = plain(data, true)?;
    f.write_all_at(&b, LOCATOR_AT)?;
    f.sync_data()
}

/// The real name of the file `data` holds (symbolic links resolved), as the kernel has it.
fn real_path(data: &File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    let p = std::fs::read_link(format!("/proc/self/fd/{}", data.as_raw_fd())).ok()?;
    (p.is_absolute() && !p.to_string_lossy().ends_with(" (deleted)")).then_some(p)
}

/// Where scratch file `data` (reached as `target`, id `id`) may have its journal, in order:
/// the path a writing run recorded in the file, beside its real name, beside `target`.
fn named_candidates(target: &Path, data: &File, id: u64) -> Vec<PathBuf> {
    let mut c: Vec<PathBuf> = Vec::new();
    for p in [
        recorded(data, id),
        real_path(data).map(|p| path_for(&p)),
        Some(path_for(target)),
    ]
    .into_iter()
    .flatten()
    {
        if !c.contains(&p) {
            c.push(p);
        }
    }
    c
}

/// [`named_candidates`], then, for a file that records no journal yet, every journal in the
/// directories of its names: one an older iolens made beside another name of this file (a
/// hard link) is found by its binding, never by its name.
fn candidates(target: &Path, data: &File, id: u64) -> Vec<PathBuf> {
    let mut c = named_candidates(target, data, id);
    if recorded(data, id).is_some() {
        return c;
    }
    for dir in [real_path(data), Some(target.to_path_buf())]
        .into_iter()
        .flatten()
    {
        let dir = match dir.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten().take(100_000) {
            let p = e.path();
            if p.to_string_lossy().ends_with(SUFFIX) && !c.contains(&p) {
                c.push(p);
            }
        }
    }
    c
}

/// The journal scratch file `data` (reached as `target`, id `id`) uses: the first of its
/// [`candidates`] that is a journal bound to it, else the first that exists (to be reported or
/// refused, never overwritten), else where a writing run creates it (beside its real name).
pub fn locate(target: &Path, data: &File, id: u64) -> PathBuf {
    if let Some(p) = proof_of_ownership(target, data, id) {
        return p;
    }
    let c = named_candidates(target, data, id);
    c.iter()
        .find(|p| std::fs::symlink_metadata(p).is_ok())
        .cloned()
        .unwrap_or_else(|| real_path(data).map_or_else(|| path_for(target), |p| path_for(&p)))
}

/// Whether journal file `f` (`len` bytes) is one whose creation never finished (an older
/// iolens stopped by a full disk): empty, shorter than its header page with nothing but the
/// start of a header, or a header page never written (all zeros). It records nothing.
fn unfinished(f: &File, len: u64) -> bool {
    let n = len.min(PAGE as u64) as usize;
    let mut b = vec![0u8; n];
    if f.read_exact_at(&mut b, 0).is_err() {
        return false;
    }
    if b.iter().all(|&x| x == 0) {
        return true;
    }
    len < PAGE as u64 && {
        let m = n.min(16);
        b[..m] == MAGIC[..m]
    }
}

/// A new journal temp file beside `jpath` (random name, `O_EXCL|O_NOFOLLOW`): the journal is
/// written there whole and then linked or renamed into place.
fn create_temp_beside(jpath: &Path) -> Result<(std::path::PathBuf, File)> {
    let tmp = jpath.with_file_name(format!(
        "{}.tmp-{:016x}",
        jpath.file_name().unwrap_or_default().to_string_lossy(),
        rand::random::<u64>()
    ));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    Ok((tmp, f))
}
/// Create journal `jpath` complete or not at all: written and synced under a temporary name,
/// then linked to `jpath` (which must not exist, unless `replace` names an unfinished journal
/// to be replaced).
fn create_complete(jpath: &Path, h: &Header, replace: bool) -> Result<File> {
    let (tmp, f) = create_temp_beside(jpath)?;
    let placed = write_fresh(&f, h).and_then(|()| {
        if replace {
            std::fs::rename(&tmp, jpath)
        } else {
            // A link never replaces: a journal created meanwhile is never overwritten.
            std::fs::hard_link(&tmp, jpath).and_then(|()| std::fs::remove_file(&tmp))
        }
    });
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| {
            format!(
                "cannot create the generation journal {} (nothing was written to the target, \
                 and no journal is left part-way)",
                jpath.display()
            )
        });
    }
    if let Some(dir) = jpath.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(f)
}

/// The generation journal that proves iolens made scratch file `data` (reached as `target`)
/// with target id `id`: one whose checksummed header names this id and this very file (device
/// and inode). A header copied onto another file, or the header alone, proves nothing.
pub(crate) fn proof_of_ownership(target: &Path, data: &File, id: u64) -> Option<PathBuf> {
    let m = data.metadata().ok()?;
    if id == 0 {
        return None;
    }
    candidates(target, data, id).into_iter().find(|p| {
        open_nofollow(p, false)
            .ok()
            .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
            .and_then(|f| read_header(&f).ok())
            .is_some_and(|h| h.target_id == id && (h.dev, h.ino) == (m.dev(), m.ino()))
    })
}

/// Header `h` of journal `file` with entries for a data area of `data_size` bytes: the pages a
/// grown scratch file needs are appended with zero bounds (nothing known yet) and synced; the
/// header saying so is the caller's to write, after them.
fn add_entries(file: &File, h: Header, data_size: u64) -> Result<Header> {
    let need = data_size.div_ceil(h.granule);
    if need <= h.entries {
        return Ok(h);
    }
    let mut grown = h;
    grown.entries = need;
    let mut page = vec![0u8; PAGE];
    for p in h.pages()..grown.pages() {
        page.fill(0);
        seal(&mut page, p, h.target_id);
        file.write_all_at(&page, (1 + p) * PAGE as u64)?;
    }
    file.sync_data()?;
    Ok(grown)
}

/// Scratch file `data` (reached as `target`, id `id`) has grown to `data_size` bytes of data
/// (`--grow`): its journal, if it has one, is extended to cover all of them, so that
/// `verify` never checks part of the file against a journal that stops short of it. The new
/// granules' bounds are 0 until a writing run raises them.
pub(crate) fn extend(target: &Path, data: &File, id: u64, data_size: u64) -> Result<()> {
    let Some(jpath) = proof_of_ownership(target, data, id) else {
        return Ok(());
    };
    let f =
        open_nofollow(&jpath, true).with_context(|| format!("cannot open {}", jpath.display()))?;
    let h = read_header(&f).map_err(|why| anyhow::anyhow!("{}: {why}", jpath.display()))?;
    let len = f.metadata()?.len();
    if len < h.file_len() {
        bail!(
            "{} is shorter than its header says ({len} of {} bytes: truncated). Refusing to \
             extend it; run `iolens verify --target {}`",
            jpath.display(),
            h.file_len(),
            target.display()
        );
    }
    let grown = add_entries(&f, h, data_size)?;
    if grown.entries != h.entries {
        let nh = Header {
            updated: unix_now(),
            ..grown
        };
        f.write_all_at(&nh.encode(), 0)
            .and_then(|_| f.sync_data())
            .with_context(|| format!("cannot write {}", jpath.display()))?;
    }
    Ok(())
}

/// `--refill` is rewriting every block of scratch file `data` with generation 0: the bounds
/// of its journal (if it has one) start again at 0, keeping its run counter so that later
/// generations still grow. Written complete under a temporary name and renamed over it.
pub(crate) fn restart(target: &Path, data: &File, id: u64) -> Result<()> {
    let Some(jpath) = proof_of_ownership(target, data, id) else {
        return Ok(());
    };
    let f =
        open_nofollow(&jpath, false).with_context(|| format!("cannot open {}", jpath.display()))?;
    let h = read_header(&f).map_err(|why| anyhow::anyhow!("{}: {why}", jpath.display()))?;
    let nh = Header {
        updated: unix_now(),
        ..h
    };
    create_complete(&jpath, &nh, true)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A run's side

/// The journal as one run writing a scratch file uses it.
pub(crate) struct RunJournal {
    file: File,
    path: PathBuf,
    h: Header,
    nonce: u64,
    region_offset: u64,
    block_size: u64,
    blocks: u64,
    first_page: u64,
    pages: Vec<u8>,
    dirty: Vec<bool>,
    tracked: bool,
    /// Why this run does not record its generations, when it does not.
    pub note: String,
}

/// Geometry of a writing run (data-area offsets).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunGeometry {
    pub data_size: u64,
    pub region_offset: u64,
    pub block_size: u64,
    pub blocks: u64,
}

impl RunJournal {
    /// Open (or create) the journal of scratch file `target` (held open as `data`, with id
    /// `id`) for a run that writes, re-grain it when the run's blocks are finer, and take this
    /// run's nonce. Call with the target locked exclusively, before any write.
    pub(crate) fn open(target: &Path, data: &File, id: u64, g: RunGeometry) -> Result<RunJournal> {
        let jpath = locate(target, data, id);
        let m = data
            .metadata()
            .with_context(|| format!("cannot examine {}", target.display()))?;
        let (dev, ino) = (m.dev(), m.ino());

        if g.block_size == 0
            || !g.block_size.is_multiple_of(UNIT as u64)
            || !g.region_offset.is_multiple_of(512)
        {
            bail!("internal: journaled writes must be whole 512-byte units");
        }
        let want_granule = gcd(g.block_size, g.region_offset);
        let fresh = Header {
            target_id: id,
            dev,
            ino,
            granule: want_granule,
            entries: g.data_size.div_ceil(want_granule),
            runs: 0,
            flushes: 0,
            updated: unix_now(),
        };
        let (file, mut h) = match open_nofollow(&jpath, true) {
            Ok(f) => {
                let meta = f.metadata()?;
                if !meta.is_file() {
                    bail!(
                        "{} is not a regular file: refusing to use it as the generation journal",
                        jpath.display()
                    );
                }
                if unfinished(&f, meta.len()) {
                    // Its creation never finished (a full disk): it records nothing.
                    crate::out::note(&format!(
                        "{}: an unfinished generation journal (its creation was stopped, e.g. by \
                         a full disk; it records nothing): replaced by a new one",
                        jpath.display()
                    ));
                    let f = create_complete(&jpath, &fresh, true)?;
                    (f, fresh)
                } else {
                    let h = read_header(&f).map_err(|why| {
                        anyhow::anyhow!(
                            "{} is not a usable iolens generation journal: {why}. Refusing to \
                         overwrite it; run `iolens verify --target {}` to see, move it away to \
                         start a new journal",
                            jpath.display(),
                            target.display()
                        )
                    })?;
                    check_binding(&h, &jpath, id, dev, ino)?;
                    if meta.len() < h.file_len() {
                        bail!(
                            "{} is shorter than its header says ({} of {} bytes: truncated). \
                         Refusing to write to it; run `iolens verify --target {}`",
                            jpath.display(),
                            meta.len(),
                            h.file_len(),
                            target.display()
                        );
                    }
                    (f, h)
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let f = create_complete(&jpath, &fresh, false)?;
                (f, fresh)
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => bail!(
                "{} is a symbolic link: refusing to use it as the generation journal",
                jpath.display()
            ),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot open {}", jpath.display()));
            }
        };
        let mut file = file;
        let fine = gcd(h.granule, want_granule);
        if fine != h.granule {
            (file, h) = regrain(&file, &jpath, h, fine)?;
        }
        h = add_entries(&file, h, g.data_size)?;
        // The pages covering this run's region.
        let start = g.region_offset / h.granule;
        let end = (g.region_offset + g.blocks * g.block_size).div_ceil(h.granule);
        let tracked_entries = end - start;
        let mut j = RunJournal {
            file,
            path: jpath,
            h,
            nonce: 0,
            region_offset: g.region_offset,
            block_size: g.block_size,
            blocks: g.blocks,
            first_page: start / PER_PAGE,
            pages: Vec::new(),
            dirty: Vec::new(),
            tracked: false,
            note: String::new(),
        };
        if g.blocks > MAX_SLOTS || tracked_entries > MAX_RUN_ENTRIES {
            j.note = format!(
                "generation journal not updated by this run: its working set has {} blocks \
                 ({} journal entries), more than are tracked exactly ({} blocks, {} entries)",
                g.blocks, tracked_entries, MAX_SLOTS, MAX_RUN_ENTRIES
            );
        } else if g.blocks > 0 {
            let last_page = (end - 1) / PER_PAGE;
            let n = (last_page - j.first_page + 1) as usize;
            j.pages = vec![0u8; n * PAGE];
            j.dirty = vec![false; n];
            j.file
                .read_exact_at(&mut j.pages, (1 + j.first_page) * PAGE as u64)
                .with_context(|| format!("cannot read {}", j.path.display()))?;
            for (i, p) in j.pages.chunks_exact(PAGE).enumerate() {
                let no = j.first_page + i as u64;
                if !page_ok(p, no, id) {
                    bail!(
                    "{}: page {no} (data offsets {}..{}) fails its checksum (torn or damaged). \
                     Refusing to write to it; run `iolens verify --target {}` to see",
                    j.path.display(),
                    no * PER_PAGE * h.granule,
                    (no + 1) * PER_PAGE * h.granule,
                    target.display()
                );
                }
            }
            j.tracked = true;
        }
        // Only now, with everything checked, take this run's number.
        if j.h.runs >= MAX_RUNS {
            bail!(
                "{} has handed out all {MAX_RUNS} run numbers: delete the journal and the \
                 scratch file and start anew",
                j.path.display()
            );
        }
        j.h.runs += 1;
        j.nonce = j.h.runs;
        j.file
            .write_all_at(&j.h.encode(), 0)
            .and_then(|_| j.file.sync_data())
            .with_context(|| format!("cannot write {}", j.path.display()))?;
        // The file names its journal, so that every name of it (hard or symbolic links) finds
        // this one.
        let abs = std::path::absolute(&j.path).unwrap_or_else(|_| j.path.clone());
        if recorded(data, id).as_deref() != Some(abs.as_path()) {
            record(data, id, &abs).with_context(|| {
                format!(
                    "cannot record the generation journal's place in {}",
                    target.display()
                )
            })?;
        }
        Ok(j)
    }

    /// This run's nonce (the 24 high bits of its generations).
    pub(crate) fn nonce(&self) -> u64 {
        self.nonce
    }

    /// Journal path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Record the generations of writes completed so far: collect from `gens`, make the
    /// target's data durable, then write and sync the changed pages. Allocates nothing.
    pub(crate) fn flush(&mut self, gens: &GenMap, data: &File) -> Result<()> {
        if !self.tracked {
            return Ok(());
        }
        let gran = self.h.granule;
        let mut changed = false;
        for b in 0..self.blocks {
            let Some(gen) = gens.expected(b, gens.snapshot(b)) else {
                continue;
            };
            let s = self.region_offset + b * self.block_size;
            for e in s / gran..(s + self.block_size) / gran {
                let (p, i) = (e / PER_PAGE - self.first_page, e % PER_PAGE);
                let page = &mut self.pages[p as usize * PAGE..(p as usize + 1) * PAGE];
                if entry(page, i) < gen {
                    set_entry(page, i, gen);
                    self.dirty[p as usize] = true;
                    changed = true;
                }
            }
        }
        if !changed {
            return Ok(());
        }
        // The data first: the journal never records a generation that is not durable.
        data.sync_data().context("fdatasync of the target")?;
        for (i, d) in self.dirty.iter_mut().enumerate() {
            if *d {
                let no = self.first_page + i as u64;
                let page = &mut self.pages[i * PAGE..(i + 1) * PAGE];
                seal(page, no, self.h.target_id);
                self.file
                    .write_all_at(page, (1 + no) * PAGE as u64)
                    .with_context(|| format!("cannot write {}", self.path.display()))?;
                *d = false;
            }
        }
        self.h.flushes += 1;
        self.h.updated = unix_now();
        let hb = self.h.encode();
        self.file
            .write_all_at(&hb, 0)
            .and_then(|_| self.file.sync_data())
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(())
    }
}

/// Write a whole new journal (header and every entry page, all bounds 0) into `f`.
fn write_fresh(f: &File, h: &Header) -> std::io::Result<()> {
    write_entries(f, h, |_| 0)
}

/// Write a whole journal (header and every entry page, entry `i` = `value(i)`) into `f`.
fn write_entries(f: &File, h: &Header, mut value: impl FnMut(u64) -> u64) -> std::io::Result<()> {
    let mut page = vec![0u8; PAGE];
    for p in 0..h.pages() {
        page.fill(0);
        for i in 0..PER_PAGE {
            let e = p * PER_PAGE + i;
            if e >= h.entries {
                break;
            }
            set_entry(&mut page, i, value(e));
        }
        seal(&mut page, p, h.target_id);
        f.write_all_at(&page, (1 + p) * PAGE as u64)?;
    }
    f.sync_data()?;
    f.write_all_at(&h.encode(), 0)?;
    f.sync_data()
}

/// Rewrite the journal with a finer granule (each new entry inherits its old entry's bound)
/// into a new file, renamed over the old one.
fn regrain(old: &File, jpath: &Path, h: Header, granule: u64) -> Result<(File, Header)> {
    let ratio = h.granule / granule;
    let nh = Header {
        granule,
        entries: h.entries * ratio,
        ..h
    };
    let (tmp, f) = create_temp_beside(jpath)?;
    let mut cur = vec![0u8; PAGE];
    let mut cur_no = u64::MAX;
    let mut err: Option<String> = None;
    let r = write_entries(&f, &nh, |e| {
        let oe = e / ratio;
        let no = oe / PER_PAGE;
        if no != cur_no {
            cur_no = no;
            let ok = old.read_exact_at(&mut cur, (1 + no) * PAGE as u64).is_ok()
                && page_ok(&cur, no, h.target_id);
            if !ok && err.is_none() {
                err = Some(format!(
                    "{}: page {no} fails its checksum (torn or damaged); refusing to rewrite it. \
                     Run `iolens verify` on its target to see",
                    jpath.display()
                ));
            }
        }
        entry(&cur, oe % PER_PAGE)
    });
    if let Some(e) = err {
        let _ = std::fs::remove_file(&tmp);
        bail!("{e}");
    }
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write {}", tmp.display()));
    }
    std::fs::rename(&tmp, jpath)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), jpath.display()))?;
    if let Some(dir) = jpath.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok((f, nh))
}

// ---------------------------------------------------------------------------------------------
// `iolens verify`'s side

/// What `iolens verify` found where the journal should be.
pub(crate) enum VerifyJournal {
    /// No journal file (or one whose creation never finished: it records nothing).
    Missing(PathBuf),
    /// A journal that cannot be used at all (header torn, truncated, not a journal).
    Damaged { path: PathBuf, why: String },
    /// A usable journal, read a page at a time.
    Ok(JournalReader),
}

/// Open the journal of scratch file `target` (open as `data`, id `id`) for reading. A journal
/// bound to another target or file is an error.
pub(crate) fn open_for_verify(target: &Path, data: &File, id: u64) -> Result<VerifyJournal> {
    let jpath = locate(target, data, id);
    let m = data
        .metadata()
        .with_context(|| format!("cannot examine {}", target.display()))?;
    let f = match open_nofollow(&jpath, false) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(VerifyJournal::Missing(jpath))
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => bail!(
            "{} is a symbolic link, not a generation journal iolens wrote: refusing it",
            jpath.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", jpath.display())),
    };
    let jm = f.metadata()?;
    if !jm.is_file() {
        bail!("{} is not a regular file", jpath.display());
    }
    if unfinished(&f, jm.len()) {
        // An older iolens stopped creating it (a full disk): it never recorded anything.
        return Ok(VerifyJournal::Missing(jpath));
    }
    let h = match read_header(&f) {
        Ok(h) => h,
        Err(why) => return Ok(VerifyJournal::Damaged { path: jpath, why }),
    };
    check_binding(&h, &jpath, id, m.dev(), m.ino())?;
    Ok(VerifyJournal::Ok(JournalReader {
        file: f,
        path: jpath,
        len: jm.len(),
        h,
        page: vec![0u8; PAGE],
        page_no: u64::MAX,
        page_ok: false,
        damaged_pages: Vec::new(),
    }))
}

/// Reads a journal's entries a page at a time (sequential access reads each page once).
pub(crate) struct JournalReader {
    file: File,
    pub path: PathBuf,
    len: u64,
    pub h: Header,
    page: Vec<u8>,
    page_no: u64,
    page_ok: bool,
    /// Entry pages that are torn, damaged or missing.
    pub(crate) damaged_pages: Vec<u64>,
}

impl JournalReader {
    /// The bound for data-area offset `off`: `None` where the journal has no usable entry
    /// (damaged page, or beyond its entries).
    pub(crate) fn bound(&mut self, off: u64) -> Option<u64> {
        let e = off / self.h.granule;
        if e >= self.h.entries {
            return None;
        }
        let no = e / PER_PAGE;
        if no != self.page_no {
            self.page_no = no;
            let at = (1 + no) * PAGE as u64;
            self.page_ok = at + PAGE as u64 <= self.len
                && self.file.read_exact_at(&mut self.page, at).is_ok()
                && page_ok(&self.page, no, self.h.target_id);
            if !self.page_ok {
                self.damaged_pages.push(no);
            }
        }
        self.page_ok.then(|| entry(&self.page, e % PER_PAGE))
    }

    /// Data-area byte range an entry page covers.
    pub(crate) fn page_range(&self, no: u64) -> (u64, u64) {
        let g = self.h.granule;
        (no * PER_PAGE * g, (no + 1) * PER_PAGE * g)
    }

    /// One line describing the journal.
    pub(crate) fn describe(&self) -> String {
        format!(
            "generation journal {}: {} runs, {} entries of {} B, last updated {}",
            self.path.display(),
            self.h.runs,
            self.h.entries,
            self.h.granule,
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + Duration::from_secs(self.h.updated)
            )
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip_and_damage() {
        let h = Header {
            target_id: 7,
            dev: 1,
            ino: 2,
            granule: 8192,
            entries: 1000,
            runs: 3,
            flushes: 4,
            updated: 5,
        };
        let mut b = h.encode();
        assert_eq!(Header::decode(&b).unwrap(), h);
        assert_eq!(h.pages(), 2);
        b[100] ^= 1;
        assert!(Header::decode(&b).unwrap_err().contains("checksum"));
        assert!(Header::decode(&b[..100]).unwrap_err().contains("shorter"));
    }

    #[test]
    fn pages_are_bound_to_their_number_and_target() {
        let mut p = vec![0u8; PAGE];
        set_entry(&mut p, 3, 99);
        seal(&mut p, 5, 42);
        assert!(page_ok(&p, 5, 42));
        assert!(!page_ok(&p, 6, 42));
        assert!(!page_ok(&p, 5, 43));
        assert_eq!(entry(&p, 3), 99);
        p[2000] ^= 4;
        assert!(!page_ok(&p, 5, 42));
    }

    #[test]
    fn journal_path_is_beside_the_target() {
        assert_eq!(
            path_for(Path::new("/x/s.dat")),
            PathBuf::from("/x/s.dat.iolens-journal")
        );
    }
}
