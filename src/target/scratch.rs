//! The scratch file's own evidence: its marker block ([`Header`]), what an existing file is
//! found to be, the proof that its data carries the header's target id, its fill, and its
//! opening for the offline check.

use super::*;

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

pub(super) fn crc64(b: &[u8]) -> u64 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, b)
}

impl Header {
    /// The same scratch file (size and id) with its fill started again: what `--refill` writes.
    pub(super) fn restart(&self) -> Header {
        Header::new(self.data_size, 0, self.id)
    }

    pub(super) fn new(data_size: u64, filled_upto: u64, id: u64) -> Header {
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
    pub(super) fn decode(b: &[u8]) -> Option<Header> {
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
pub(super) enum Found {
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
pub(super) fn raw_id(f: &File) -> u64 {
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, 40)
        .map_or(0, |_| u64::from_le_bytes(b))
}

/// The generation journal proving iolens made this very file (see
/// [`crate::journal::proof_of_ownership`]); `None` when nothing proves it.
pub(super) fn proof(f: &File) -> Option<PathBuf> {
    let id = raw_id(f);
    let p = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok()?;
    crate::journal::proof_of_ownership(&p, f, id)
}

/// What a user can do with a scratch file that is damaged or of another format: `--refill`
/// only where iolens can prove it made the file (its generation journal), else delete it.
pub(super) fn next_step(path: &Path, f: &File, refill_asked: bool) -> String {
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

pub(super) fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

pub(super) fn inspect(f: &File, len: u64) -> Found {
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
pub(super) fn read_header(path: &Path) -> Option<Header> {
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

/// Prove that the data of scratch file `f` belongs to header `h`: a sample of units spread
/// over the filled area must carry its target id and their own offset. None doing so means
/// the header does not belong to this file (a copy); some not doing so is corruption.
pub(super) fn prove_ownership(f: &File, h: &Header, len: u64, path: &Path) -> Result<()> {
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
pub(super) fn fill(
    f: &File,
    path: &Path,
    mut h: Header,
    progress: bool,
    stop: &AtomicBool,
) -> Result<u64> {
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
