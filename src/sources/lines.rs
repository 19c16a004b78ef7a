//! The input every reader shares: lines streamed from a (possibly gzip-compressed) file
//! through one reused buffer ([`LineReader`]), the per-file line accounting ([`LineStats`]),
//! small byte parsers, and times and names as the readers print them.

use super::*;

/// Per-file line accounting: nothing is dropped silently.
#[derive(Debug, Default, Clone)]
pub struct LineStats {
    /// Lines read.
    pub lines: u64,
    /// Lines that carried data that was used.
    pub parsed: u64,
    /// Lines recognised and deliberately not used, by kind.
    pub ignored: BTreeMap<String, u64>,
    /// Lines not understood.
    pub unparsed: u64,
    /// The first few unparsed lines.
    pub unparsed_first: Vec<UnparsedLine>,
}

pub use crate::results::evidence::UnparsedLine;

/// Streams lines of a (possibly gzip-compressed) file through one reused buffer: lines are
/// returned as slices of the buffer (no per-line copy or allocation).
pub struct LineReader {
    inner: Box<dyn Read>,
    buf: Vec<u8>,
    /// Start of unread data in `buf`.
    pos: usize,
    /// End of valid data in `buf`.
    end: usize,
    eof: bool,
    /// The current line's range in `buf` (without terminator).
    cur: (usize, usize),
    /// Current line number (1-based; 0 before the first line).
    pub(crate) line_no: u64,
    pub stats: LineStats,
    /// True when the input was gzip-compressed.
    pub gzip: bool,
    /// Display name of the input.
    pub name: String,
    /// Warnings about the input as a whole (moved into `Results.warnings`).
    pub warnings: Vec<String>,
}

const READ_CHUNK: usize = 128 << 10;
/// Longest line any reader accepts (bytes, before decompression limits apply): memory stays
/// bounded whatever the input, with a clear error naming the file and line.
pub const MAX_LINE_BYTES: usize = 4 << 20;

impl LineReader {
    /// Open a file; gzip is detected by its magic bytes (1f 8b), whatever the file is called.
    pub fn open(path: &Path) -> Result<LineReader> {
        let f =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
            bail!("{} is a directory, not a file", path.display());
        }
        LineReader::from_reader(Box::new(f), &path.display().to_string())
    }

    /// Wrap any reader (gzip detected by magic bytes).
    pub fn from_reader(r: Box<dyn Read>, name: &str) -> Result<LineReader> {
        let mut br = BufReader::with_capacity(64 * 1024, r);
        let head = br
            .fill_buf()
            .with_context(|| format!("cannot read {name}"))?;
        let gzip = head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b;
        let inner: Box<dyn Read> = if gzip {
            Box::new(flate2::bufread::MultiGzDecoder::new(br))
        } else {
            Box::new(br)
        };
        Ok(LineReader {
            inner,
            buf: vec![0; READ_CHUNK],
            pos: 0,
            end: 0,
            eof: false,
            cur: (0, 0),
            line_no: 0,
            stats: LineStats::default(),
            gzip,
            name: name.to_string(),
            warnings: Vec::new(),
        })
    }

    fn fill(&mut self) -> Result<usize> {
        // Move the partial line to the front, grow when one line fills the buffer.
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.end == self.buf.len() {
            // One line fills the buffer: grow it, but never past the line-length cap, so input
            // without newlines (`/dev/zero`, a gzip bomb, a binary file) cannot exhaust memory.
            if self.buf.len() >= MAX_LINE_BYTES {
                bail!(
                    "{}: line {} is longer than {} MiB (no line break found): not a text \
                     file of this format?",
                    self.name,
                    self.line_no + 1,
                    MAX_LINE_BYTES >> 20
                );
            }
            let n = (self.buf.len() * 2).min(MAX_LINE_BYTES);
            self.buf.resize(n, 0);
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(anyhow::Error::new(e).context(format!(
                        "{}: read error after line {}{}",
                        self.name,
                        self.line_no,
                        if self.gzip {
                            " (corrupt or truncated gzip data?)"
                        } else {
                            ""
                        }
                    )))
                }
            }
        }
    }

    /// Up to the first `n` bytes not yet read (fewer at the end), left unread.
    pub(crate) fn peek(&mut self, n: usize) -> Result<&[u8]> {
        while self.end - self.pos < n && !self.eof {
            if self.fill()? == 0 {
                self.eof = true;
            }
        }
        Ok(&self.buf[self.pos..self.end.min(self.pos + n)])
    }

    /// The next length-delimited message of a binary input (its length a protobuf varint, as
    /// the delimited protobuf exposition writes them), `None` at the end; counted as a line.
    pub(crate) fn take_delimited(&mut self) -> Result<Option<Vec<u8>>> {
        let head = self.peek(10)?;
        if head.is_empty() {
            return Ok(None);
        }
        let (mut len, mut used) = (0u64, 0usize);
        for (i, &b) in head.iter().enumerate() {
            len |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                used = i + 1;
                break;
            }
        }
        let at = self.line_no + 1;
        if used == 0 {
            bail!("{}: message {at}: its length is cut off", self.name);
        }
        if len > MAX_LINE_BYTES as u64 {
            bail!(
                "{}: message {at} is {len} bytes, longer than {} MiB: not a delimited \
                 protobuf exposition?",
                self.name,
                MAX_LINE_BYTES >> 20
            );
        }
        let whole = used + len as usize;
        if self.peek(whole)?.len() < whole {
            bail!("{}: message {at} is cut off (truncated input)", self.name);
        }
        let msg = self.buf[self.pos + used..self.pos + whole].to_vec();
        self.pos += whole;
        self.line_no += 1;
        self.stats.lines += 1;
        Ok(Some(msg))
    }

    /// The next line without its line terminator (`\n` or `\r\n`), or `None` at the end.
    #[inline]
    pub(crate) fn next_line(&mut self) -> Result<Option<&[u8]>> {
        let mut scanned = self.pos;
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[scanned..self.end]) {
                let nl = scanned + i;
                let start = self.pos;
                self.pos = nl + 1;
                return Ok(Some(self.take_line(start, nl)));
            }
            if self.eof {
                if self.pos < self.end {
                    let (start, end) = (self.pos, self.end);
                    self.pos = self.end;
                    return Ok(Some(self.take_line(start, end)));
                }
                return Ok(None);
            }
            let done = self.end - self.pos;
            if self.fill()? == 0 {
                self.eof = true;
            }
            scanned = self.pos + done;
        }
    }

    /// [`LineReader::next_line`] with the line's number, for a reader that keeps the line
    /// while it numbers what it holds.
    #[inline]
    pub(crate) fn next_numbered_line(&mut self) -> Result<Option<(u64, &[u8])>> {
        if self.next_line()?.is_none() {
            return Ok(None);
        }
        let (a, b) = self.cur;
        Ok(Some((self.line_no, &self.buf[a..b])))
    }

    #[inline]
    fn take_line(&mut self, start: usize, mut end: usize) -> &[u8] {
        if end > start && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        self.line_no += 1;
        self.stats.lines += 1;
        self.cur = (start, end);
        &self.buf[start..end]
    }

    /// Count the current line as used.
    #[inline]
    pub fn parsed(&mut self) {
        self.stats.parsed += 1;
    }

    /// Count the current line as recognised but not used.
    pub fn ignored(&mut self, kind: &str) {
        if let Some(n) = self.stats.ignored.get_mut(kind) {
            *n += 1;
        } else {
            self.stats.ignored.insert(kind.to_string(), 1);
        }
    }

    /// Count the current line as not understood (it is quoted from the reader's buffer).
    pub fn unparsed(&mut self, reason: &str) {
        let (a, b) = self.cur;
        count_unparsed(&mut self.stats, self.line_no, &self.buf[a..b], reason);
    }

    /// The per-file line accounting.
    pub(crate) fn file_stats(&self, path: &Path) -> SourceFile {
        source_file(&self.stats, &path.display().to_string(), self.gzip)
    }
}

/// Record an unparsed line in `stats`.
pub(crate) fn count_unparsed(stats: &mut LineStats, line: u64, text: &[u8], reason: &str) {
    stats.unparsed += 1;
    if stats.unparsed_first.len() < UNPARSED_QUOTED {
        let mut t = String::from_utf8_lossy(text).into_owned();
        if t.len() > 200 {
            let mut cut = 200;
            while !t.is_char_boundary(cut) {
                cut -= 1;
            }
            t.truncate(cut);
            t.push('…');
        }
        stats.unparsed_first.push(UnparsedLine {
            line,
            text: t,
            reason: reason.to_string(),
        });
    }
}

/// The line accounting of one file, as stored in [`Results::source`].
pub(crate) fn source_file(s: &LineStats, path: &str, gzip: bool) -> SourceFile {
    SourceFile {
        path: path.to_string(),
        gzip,
        lines: s.lines,
        parsed: s.parsed,
        ignored: s.ignored.clone(),
        unparsed: s.unparsed,
        unparsed_first: s.unparsed_first.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// Small byte parsers shared by the readers

/// Parse an unsigned decimal integer (whole slice).
#[inline]
pub(crate) fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// Parse a signed decimal integer (whole slice).
#[inline]
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    match s.first() {
        Some(b'-') => parse_u64(&s[1..]).and_then(|v| i64::try_from(v).ok().map(|v| -v)),
        Some(b'+') => parse_u64(&s[1..]).and_then(|v| i64::try_from(v).ok()),
        _ => parse_u64(s).and_then(|v| i64::try_from(v).ok()),
    }
}

/// Parse a float from bytes (whole slice, trimmed).
pub(crate) fn parse_f64(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?.trim();
    let v: f64 = t.parse().ok()?;
    v.is_finite().then_some(v)
}

/// Trim ASCII whitespace on both ends.
#[inline]
pub fn trim(s: &[u8]) -> &[u8] {
    s.trim_ascii()
}

/// Format a Unix-epoch time in ns as RFC 3339 (UTC), or "" when it is not plausibly absolute.
pub(crate) fn rfc3339_ns(t_ns: i64) -> String {
    // Plausible absolute times: 1990..2100.
    if !(631_152_000_000_000_000..4_102_444_800_000_000_000).contains(&t_ns) {
        return String::new();
    }
    let secs = t_ns.div_euclid(1_000_000_000);
    let nanos = t_ns.rem_euclid(1_000_000_000) as u32;
    match chrono::DateTime::from_timestamp(secs, nanos) {
        Some(d) => d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        None => String::new(),
    }
}

/// Cut a string to `n` characters (with an ellipsis).
pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_detected_by_magic() {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let mut e = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b"a\r\nbb\nccc").unwrap();
        let gz = e.finish().unwrap();
        let mut r = LineReader::from_reader(Box::new(std::io::Cursor::new(gz)), "x").unwrap();
        assert!(r.gzip);
        let mut got = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            got.push(String::from_utf8(l.to_vec()).unwrap());
        }
        assert_eq!(got, vec!["a", "bb", "ccc"]);
    }

    #[test]
    fn byte_numbers() {
        assert_eq!(parse_u64(b"4294967295"), Some(4294967295));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_u64(b"12a"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"99999999999999999999999"), None);
    }
}
