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

/// A results file open for reading: its descriptor, its name, and, for a regular file, the
/// [`FileState`] it had when opened. A regular file is parsed straight from the descriptor
/// ([`Source::parse`]: its text is never held, so two 24-hour runs side by side cost what their
/// models hold, not their text as well) and can be read again from its start; a pipe or a device
/// is read once, as text, bounded ([`Source::text`]).
pub(crate) struct Source {
    f: std::fs::File,
    path: std::path::PathBuf,
    state: Option<FileState>,
}

/// Why [`Source::parse`] failed: the input (not JSON text, too long, unreadable, with its
/// message) or the JSON it held.
pub(crate) enum ParseError {
    Input(anyhow::Error),
    Json(serde_json::Error),
}

impl Source {
    /// Open `path`; `regular` refuses anything but a regular file (a reading that must find the
    /// same bytes again).
    pub(crate) fn open(path: &std::path::Path, regular: bool) -> Result<Source> {
        let f =
            std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        let is_file = f
            .metadata()
            .with_context(|| format!("cannot read {}", path.display()))?
            .is_file();
        let state = if regular || is_file {
            Some(FileState::of(&f, path)?)
        } else {
            None
        };
        Ok(Source {
            f,
            path: path.to_path_buf(),
            state,
        })
    }

    /// The [`FileState`] of a file opened as `regular` ([`Source::open`]) when it was opened.
    pub(crate) fn opened(&self) -> Result<FileState> {
        self.state
            .with_context(|| format!("{} is not a regular file", self.path.display()))
    }

    /// Whether the file can be read from its start again (a regular file).
    pub(crate) fn rereadable(&self) -> bool {
        self.state.is_some()
    }

    /// Back to the start of a regular file.
    fn rewind(&mut self) -> Result<()> {
        use std::io::Seek as _;
        if self.state.is_some() {
            self.f
                .rewind()
                .with_context(|| format!("cannot read {}", self.path.display()))?;
        }
        Ok(())
    }

    /// The whole text, from the start ([`read_results_text`]'s checks and bound).
    pub(crate) fn text(&mut self) -> Result<String> {
        self.rewind()?;
        read_open_results_text(&self.f, &self.path)
    }

    /// `T` deserialised from the start of the file as it is read, through the same checks as
    /// [`Source::text`] (a byte JSON text never holds, invalid UTF-8, more than
    /// [`MAX_RESULTS_BYTES`] end it at once), holding no more of the text than a buffer.
    pub(crate) fn parse<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, ParseError> {
        self.rewind().map_err(ParseError::Input)?;
        let mut input = CheckedRead {
            f: &self.f,
            path: &self.path,
            check: TextCheck::default(),
            failure: None,
        };
        let res = serde_json::from_reader(std::io::BufReader::with_capacity(1 << 16, &mut input));
        match (res, input.failure) {
            (_, Some(e)) => Err(ParseError::Input(e)),
            (Ok(v), None) => Ok(v),
            (Err(e), None) if e.is_io() => Err(ParseError::Input(
                anyhow::Error::new(e).context(format!("cannot read {}", self.path.display())),
            )),
            (Err(e), None) => Err(ParseError::Json(e)),
        }
    }

    /// The file's [`FileState`] now, which must be the one it had when opened (a regular
    /// file): else it changed while it was read, and this is an error.
    pub(crate) fn unchanged(&self) -> Result<FileState> {
        let before = self.opened()?;
        let after = FileState::of(&self.f, &self.path)?;
        if after != before {
            bail!(
                "{} changed while it was read ({}): was it being rewritten? Read it again once \
                 it is complete",
                self.path.display(),
                after.difference(&before)
            );
        }
        Ok(before)
    }
}

/// A reader of the file that checks each piece as it passes ([`TextCheck`]); the first failure
/// is kept (the JSON parser sees only an I/O error).
struct CheckedRead<'a> {
    f: &'a std::fs::File,
    path: &'a std::path::Path,
    check: TextCheck,
    failure: Option<anyhow::Error>,
}

impl std::io::Read for CheckedRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.failure.is_some() {
            return Err(std::io::Error::other("results file refused"));
        }
        let mut f = self.f;
        let n = loop {
            match f.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        let done = if n == 0 {
            self.check.end(self.path)
        } else {
            self.check.piece(&buf[..n], self.path)
        };
        match done {
            Ok(()) => Ok(n),
            Err(e) => {
                self.failure = Some(e);
                Err(std::io::Error::other("results file refused"))
            }
        }
    }
}

/// The checks every reading of a results file makes as its bytes come, piece by piece: no
/// byte that JSON text never holds (a control character other than tab, CR, LF), a first
/// non-blank byte `{`, valid UTF-8 (a character split between pieces completed by the next),
/// and no more than [`MAX_RESULTS_BYTES`].
#[derive(Default)]
struct TextCheck {
    /// Bytes checked so far.
    seen: u64,
    /// Whether a non-blank byte was seen.
    begun: bool,
    /// The start of a UTF-8 character the last piece ended in.
    carry: [u8; 4],
    carry_len: usize,
}

impl TextCheck {
    fn piece(&mut self, piece: &[u8], path: &std::path::Path) -> Result<()> {
        let name = path.display();
        let at = self.seen;
        if at + piece.len() as u64 > MAX_RESULTS_BYTES {
            bail!(
                "{name}: more than {} GiB, more than any results file holds (a device or an \
                 endless stream?)",
                MAX_RESULTS_BYTES >> 30
            );
        }
        if let Some(i) = piece
            .iter()
            .position(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
        {
            bail!(
                "{name} is not a results file: byte {} is {:#04x}, which JSON text never holds \
                 (binary data or a device?)",
                at + i as u64,
                piece[i]
            );
        }
        if !self.begun {
            if let Some(&b) = piece.iter().find(|b| !b.is_ascii_whitespace()) {
                if b != b'{' {
                    bail!(
                        "{name} is not a results file: it does not begin with a JSON object ('{{')"
                    );
                }
                self.begun = true;
            }
        }
        let bad = |offset: u64| {
            anyhow::anyhow!("{name} is not a results file: byte {offset} is not UTF-8 text")
        };
        let mut start = 0;
        if self.carry_len > 0 {
            // The character the last piece began: its lead byte says how long it is.
            let width = match self.carry[0] {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                _ => 4,
            };
            let take = (width - self.carry_len).min(piece.len());
            self.carry[self.carry_len..self.carry_len + take].copy_from_slice(&piece[..take]);
            self.carry_len += take;
            start = take;
            if self.carry_len == width {
                if std::str::from_utf8(&self.carry[..width]).is_err() {
                    return Err(bad(at - (width - take) as u64));
                }
                self.carry_len = 0;
            }
        }
        if self.carry_len == 0 {
            match std::str::from_utf8(&piece[start..]) {
                Ok(_) => {}
                Err(e) if e.error_len().is_none() => {
                    let rest = &piece[start + e.valid_up_to()..];
                    self.carry[..rest.len()].copy_from_slice(rest);
                    self.carry_len = rest.len();
                }
                Err(e) => return Err(bad(at + (start + e.valid_up_to()) as u64)),
            }
        }
        self.seen += piece.len() as u64;
        Ok(())
    }

    /// The end of the text: a character begun and never finished is not UTF-8.
    fn end(&self, path: &std::path::Path) -> Result<()> {
        if self.carry_len > 0 {
            bail!(
                "{} is not a results file: byte {} is not UTF-8 text",
                path.display(),
                self.seen - self.carry_len as u64
            );
        }
        Ok(())
    }
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
    let mut check = TextCheck::default();
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {name}")),
        };
        check.piece(&chunk[..n], path)?;
        out.extend_from_slice(&chunk[..n]);
    }
    check.end(path)?;
    // Checked as UTF-8 piece by piece above.
    String::from_utf8(out).map_err(|e| {
        anyhow::anyhow!(
            "{name} is not a results file: byte {} is not UTF-8 text",
            e.utf8_error().valid_up_to()
        )
    })
}

/// The fields that say what a document is (the rest is skipped, not built).
#[derive(Deserialize)]
struct Head {
    schema: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
}

/// Why a document's [`Head`] could not be read, in words.
fn head_error(e: serde_json::Error) -> anyhow::Error {
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
}

/// The version of a document whose [`Head`] says it is iolens results this build reads.
fn head_version(schema: Option<&str>, version: Option<u64>) -> Result<u64> {
    match schema {
        Some(SCHEMA_NAME) => {}
        Some(other) => bail!("not an iolens results file (schema is \"{other}\")"),
        None => bail!("not an iolens results file (no \"schema\" field)"),
    }
    let ver = version.unwrap_or(0);
    if ver > SCHEMA_VERSION as u64 {
        bail!(
            "results schema version {ver} is newer than this iolens understands \
             (version {SCHEMA_VERSION}); upgrade iolens"
        );
    }
    if ver == 0 {
        bail!("results file has no valid schema version");
    }
    Ok(ver)
}

impl Head {
    fn version(&self) -> Result<u64> {
        head_version(
            self.schema.as_ref().and_then(|s| s.as_str()),
            self.version.as_ref().and_then(|s| s.as_u64()),
        )
    }
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
        let head: Head = serde_json::from_str(text).map_err(head_error)?;
        let r: Results = if head.version()? == 1 {
            // Older files are upgraded as a JSON tree first.
            let mut v: serde_json::Value = serde_json::from_str(text)?;
            analysis::upgrade_v1(&mut v);
            serde_json::from_value(v).context("results file does not match the iolens schema")?
        } else {
            // The current version straight into the model: no JSON tree of the whole document
            // (for a day of 1 s intervals that tree alone was hundreds of MB).
            serde_json::from_str(text).context("results file does not match the iolens schema")?
        };
        r.checked(groups)
    }

    /// The results in `src`, parsed from its descriptor where it is a regular file (the text
    /// is never held: the model straight from the bytes, and only when that fails a second
    /// reading of what the document says it is, for the error), else from its bounded text.
    /// The errors are [`Results::from_json`]'s.
    pub(crate) fn from_source(
        src: &mut Source,
        groups: Option<&dyn IntervalGroups>,
    ) -> Result<Results> {
        if !src.rereadable() {
            let text = src.text()?;
            return Results::from_json_merging(&text, groups);
        }
        let r = match src.parse::<Results>() {
            Ok(r) => {
                if head_version(Some(&r.schema), Some(r.version as u64))? == 1 {
                    let text = src.text()?;
                    return Results::from_json_merging(&text, groups);
                }
                r
            }
            Err(ParseError::Input(e)) => return Err(e),
            Err(ParseError::Json(e)) => {
                // What the document says it is comes first, as from text.
                let head = match src.parse::<Head>() {
                    Ok(h) => h,
                    Err(ParseError::Input(e)) => return Err(e),
                    Err(ParseError::Json(e)) => return Err(head_error(e)),
                };
                if head.version()? == 1 {
                    let text = src.text()?;
                    return Results::from_json_merging(&text, groups);
                }
                return Err(
                    anyhow::Error::new(e).context("results file does not match the iolens schema")
                );
            }
        };
        r.checked(groups)
    }

    /// A document just parsed, upgraded, cleaned and validated.
    fn checked(mut self, groups: Option<&dyn IntervalGroups>) -> Result<Results> {
        evidence::upgrade_extra(&mut self)?;
        self.clean_labels();
        self.validate_merging(groups)?;
        Ok(self)
    }
}
