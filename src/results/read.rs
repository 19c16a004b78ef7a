//! Reading a results file's text: bounded, and refused at the first byte JSON text never holds.

use super::*;

/// Largest results file any command reads: a day of 1 s intervals is about 250 MB, so this is
/// several times the largest run iolens writes; a longer "file" (a device, `/dev/zero`, a pipe
/// that never ends) is refused instead of filling memory.
pub const MAX_RESULTS_BYTES: u64 = 2 << 30;

/// The text of the results file `path`, read in pieces and checked as it comes: a byte that
/// cannot appear in JSON text (a control character other than tab, CR or LF, as in
/// `/dev/zero` or random data) or invalid UTF-8 ends the reading at once with an error naming
/// its offset, and nothing beyond [`MAX_RESULTS_BYTES`] is read. Memory grows with what the
/// file holds, never with what it is (a device, a FIFO, an endless stream).
pub fn read_results_text(path: &std::path::Path) -> Result<String> {
    let f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    read_open_results_text(&f, path)
}

/// What a regular file was when it was read: its identity (device, inode) and size, and the
/// times a write sets (modification, and change, which no writer can set back). Two readings
/// by name that find the same `FileState` before and after read the same bytes; a file
/// renamed over the name, rewritten or appended to in between gives another.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct FileState {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileState {
    fn of(f: &std::fs::File, path: &std::path::Path) -> Result<FileState> {
        use std::os::unix::fs::MetadataExt as _;
        let m = f
            .metadata()
            .with_context(|| format!("cannot read {}", path.display()))?;
        if !m.is_file() {
            use std::os::unix::fs::FileTypeExt as _;
            let t = m.file_type();
            let what = if t.is_dir() {
                "a directory"
            } else if t.is_fifo() || t.is_socket() {
                "a pipe"
            } else {
                "a device"
            };
            bail!(
                "{} is not a results file but {what} (this reading needs a regular file, read \
                 twice: save it to one first)",
                path.display()
            );
        }
        Ok(FileState {
            dev: m.dev(),
            ino: m.ino(),
            size: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// What differs from `was`, in words.
    pub(crate) fn difference(&self, was: &FileState) -> &'static str {
        if (self.dev, self.ino) != (was.dev, was.ino) {
            "another file now has its name"
        } else if self.size != was.size {
            "its size changed"
        } else {
            "it was written to"
        }
    }
}

/// [`read_results_text`] of a regular file, with its [`FileState`] as read: the same before the
/// reading and after it, or the file changed while it was read and this is an error.
pub(crate) fn read_results_text_state(path: &std::path::Path) -> Result<(String, FileState)> {
    let f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let before = FileState::of(&f, path)?;
    let text = read_open_results_text(&f, path)?;
    let after = FileState::of(&f, path)?;
    if after != before {
        bail!(
            "{} changed while it was read ({}): was it being rewritten? Read it again once it \
             is complete",
            path.display(),
            after.difference(&before)
        );
    }
    Ok((text, before))
}

/// [`read_results_text`] of the open file `f` (named `path` in errors).
fn read_open_results_text(f: &std::fs::File, path: &std::path::Path) -> Result<String> {
    use std::io::Read as _;
    let name = path.display();
    let meta = f
        .metadata()
        .with_context(|| format!("cannot read {name}"))?;
    if meta.is_dir() {
        bail!("cannot read {name}: it is a directory, not a results file");
    }
    if meta.is_file() && meta.len() > MAX_RESULTS_BYTES {
        bail!(
            "{name}: {} bytes is more than any results file holds (at most {} GiB)",
            meta.len(),
            MAX_RESULTS_BYTES >> 30
        );
    }
    let mut out: Vec<u8> = Vec::with_capacity(if meta.is_file() {
        meta.len() as usize
    } else {
        1 << 16
    });
    let mut r = f.take(MAX_RESULTS_BYTES + 1);
    let mut chunk = vec![0u8; 1 << 16];
    let mut checked = 0usize;
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {name}")),
        };
        let piece = &chunk[..n];
        if let Some(i) = piece
            .iter()
            .position(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
        {
            bail!(
                "{name} is not a results file: byte {} is {:#04x}, which JSON text never holds \
                 (binary data or a device?)",
                out.len() + i,
                piece[i]
            );
        }
        if out.is_empty() {
            if let Some(&b) = piece.iter().find(|b| !b.is_ascii_whitespace()) {
                if b != b'{' {
                    bail!(
                        "{name} is not a results file: it does not begin with a JSON object ('{{')"
                    );
                }
            }
        }
        out.extend_from_slice(piece);
        if out.len() as u64 > MAX_RESULTS_BYTES {
            bail!(
                "{name}: more than {} GiB, more than any results file holds (a device or an \
                 endless stream?)",
                MAX_RESULTS_BYTES >> 30
            );
        }
        // Invalid UTF-8 is found as it comes (a partial character at the end may complete).
        match std::str::from_utf8(&out[checked..]) {
            Ok(_) => checked = out.len(),
            Err(e) if e.error_len().is_none() => checked += e.valid_up_to(),
            Err(e) => bail!(
                "{name} is not a results file: byte {} is not UTF-8 text",
                checked + e.valid_up_to()
            ),
        }
    }
    String::from_utf8(out).map_err(|e| {
        anyhow::anyhow!(
            "{name} is not a results file: byte {} is not UTF-8 text",
            e.utf8_error().valid_up_to()
        )
    })
}

impl Results {
    /// Parse a results document, with clear errors for foreign, truncated or newer files.
    pub fn from_json(text: &str) -> Result<Results> {
        Results::from_json_merging(text, None)
    }

    /// [`Results::from_json`], handing the interval histograms that validation decodes to
    /// `groups` merged into its groups ([`IntervalGroups`]), so that a renderer drawing display
    /// columns decodes each interval once (a day of 1 s intervals is 86,400 per op).
    pub(crate) fn from_json_merging(
        text: &str,
        groups: Option<&dyn IntervalGroups>,
    ) -> Result<Results> {
        /// The fields that say what a document is (the rest is skipped, not built).
        #[derive(Deserialize)]
        struct Head {
            schema: Option<serde_json::Value>,
            version: Option<serde_json::Value>,
        }
        let head: Head = serde_json::from_str(text).map_err(|e| {
            if e.is_eof() {
                anyhow::anyhow!(
                    "the file is truncated (JSON ends early at line {})",
                    e.line()
                )
            } else if e.is_data() {
                anyhow::anyhow!("not an iolens results file (no \"schema\" field)")
            } else {
                anyhow::anyhow!("the file is not JSON: {e}")
            }
        })?;
        match head.schema.as_ref().and_then(|s| s.as_str()) {
            Some(SCHEMA_NAME) => {}
            Some(other) => bail!("not an iolens results file (schema is \"{other}\")"),
            None => bail!("not an iolens results file (no \"schema\" field)"),
        }
        let ver = head.version.as_ref().and_then(|s| s.as_u64()).unwrap_or(0);
        if ver > SCHEMA_VERSION as u64 {
            bail!(
                "results schema version {ver} is newer than this iolens understands \
                 (version {SCHEMA_VERSION}); upgrade iolens"
            );
        }
        if ver == 0 {
            bail!("results file has no valid schema version");
        }
        let mut r: Results = if ver == 1 {
            // Older files are upgraded as a JSON tree first.
            let mut v: serde_json::Value = serde_json::from_str(text)?;
            analysis::upgrade_v1(&mut v);
            serde_json::from_value(v).context("results file does not match the iolens schema")?
        } else {
            // The current version straight into the model: no JSON tree of the whole document
            // (for a day of 1 s intervals that tree alone was hundreds of MB).
            serde_json::from_str(text).context("results file does not match the iolens schema")?
        };
        evidence::upgrade_extra(&mut r)?;
        r.clean_labels();
        r.validate_merging(groups)?;
        Ok(r)
    }
}
