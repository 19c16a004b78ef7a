//! What commands print for people on standard output, written so that a closed or full stdout
//! never panics and never stops a measurement or the writing of its results file.
//!
//! `println!` panics when stdout is a closed pipe (`iolens run … | head -1`) or a full device
//! (`> /dev/full`). The [`outln!`](crate::outln) and [`out!`](crate::out) macros write instead
//! through [`human`], which remembers the first error and then stays silent. When stdout carries
//! the results themselves (`--json -`), the text for people goes to stderr so the JSON stays
//! clean. [`status`] tells the command's ending whether the text was lost: a closed pipe is the
//! reader's choice (as `head` does) and is not an error; any other failure is.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;

static TO_STDERR: AtomicBool = AtomicBool::new(false);
static SILENT: AtomicBool = AtomicBool::new(false);
/// 0 = fine; -1 = a closed pipe; otherwise the raw OS error (or 1 when it had none).
static FAILED: AtomicI32 = AtomicI32::new(0);
static FIRST_ERROR: Mutex<Option<String>> = Mutex::new(None);

static WIDTH: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();

/// Fit the text for people to `width` columns (a command's `--width`); call before printing.
pub(crate) fn set_width(width: Option<usize>) {
    let _ = WIDTH.set(width.map(|w| w.clamp(40, 400)));
}

/// The width the text for people is fitted to: `--width`, the terminal's, else $COLUMNS; none
/// for a pipe or file without $COLUMNS (nothing to fit).
fn width() -> Option<usize> {
    *WIDTH.get_or_init(|| {
        use std::io::IsTerminal;
        let tty = io::stdout().is_terminal();
        tty.then(|| terminal_size::terminal_size().map(|(w, _)| w.0 as usize))
            .flatten()
            .or_else(|| {
                std::env::var("COLUMNS")
                    .ok()
                    .and_then(|c| c.trim().parse().ok())
            })
            .map(|w: usize| w.clamp(40, 400))
    })
}

/// Send the text for people to stderr from now on: stdout carries the results (`--json -`).
pub(crate) fn reserve_stdout() {
    TO_STDERR.store(true, Ordering::SeqCst);
}

/// Print no text for people from now on (`-q/--quiet`); errors still go to stderr.
pub(crate) fn silence() {
    SILENT.store(true, Ordering::SeqCst);
}

/// A writer for the text meant for people: stdout (stderr when stdout carries the results).
/// Errors are recorded (see [`status`]) and swallowed; after the first, nothing more is tried.
pub(crate) fn human() -> Human {
    Human
}

/// See [`human`].
pub(crate) struct Human;

impl Write for Human {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf).map(|_| buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if SILENT.load(Ordering::Relaxed) {
            return Ok(());
        }
        // Lines wider than the terminal are broken between words, not by the terminal.
        let fitted;
        let safe;
        let buf = match (width(), std::str::from_utf8(buf)) {
            (Some(w), Ok(text)) => {
                fitted = fit(&term_safe(text), w);
                fitted.as_bytes()
            }
            (None, Ok(text)) => {
                safe = term_safe(text);
                safe.as_bytes()
            }
            _ => {
                safe =
                    std::borrow::Cow::Owned(term_safe(&String::from_utf8_lossy(buf)).into_owned());
                safe.as_bytes()
            }
        };
        if TO_STDERR.load(Ordering::Relaxed) {
            let _ = io::stderr().write_all(buf);
            return Ok(());
        }
        if FAILED.load(Ordering::Relaxed) != 0 {
            return Ok(());
        }
        let mut out = io::stdout().lock();
        if let Err(e) = out.write_all(buf).and_then(|_| out.flush()) {
            record(&e);
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Remember a failed write to stdout (the first one wins).
pub fn record(e: &io::Error) {
    let code = if e.kind() == io::ErrorKind::BrokenPipe {
        -1
    } else {
        e.raw_os_error().unwrap_or(1)
    };
    if FAILED
        .compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        if let Ok(mut g) = FIRST_ERROR.lock() {
            *g = Some(e.to_string());
        }
    }
}

/// `text` made safe for a terminal: control characters (C0 other than newline and tab, DEL,
/// C1, and the bidirectional overrides) become `?`, so escape sequences and carriage returns
/// read from an input file cannot move the cursor, retitle the window or hide text. Colour
/// sequences (`ESC [ digits ; … m`, which iolens itself writes) are kept.
pub fn term_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    if !text.chars().any(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b' {
            // A colour sequence: ESC [ (digits and ;)* m.
            let b = rest.as_bytes();
            if b.get(1) == Some(&b'[') {
                let n = b[2..]
                    .iter()
                    .take_while(|x| x.is_ascii_digit() || **x == b';')
                    .count();
                if b.get(2 + n) == Some(&b'm') {
                    out.push_str(&rest[..3 + n]);
                    rest = &rest[3 + n..];
                    continue;
                }
            }
        }
        out.push(if bad(c) { '?' } else { c });
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
}

/// The width of the terminal on stderr (`--width` first, then the terminal's, then $COLUMNS);
/// none when stderr is a pipe or a file and nothing says a width.
pub fn stderr_width() -> Option<usize> {
    use std::io::IsTerminal;
    if let Some(Some(w)) = WIDTH.get() {
        return Some(*w);
    }
    let tty = io::stderr().is_terminal();
    tty.then(|| terminal_size::terminal_size_of(io::stderr()).map(|(w, _)| w.0 as usize))
        .flatten()
        .or_else(|| {
            std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.trim().parse().ok())
        })
        .map(|w: usize| w.clamp(40, 400))
}

/// `text` for stderr, made safe and fitted to [`stderr_width`].
pub fn for_stderr(text: &str) -> String {
    let safe = term_safe(text);
    match stderr_width() {
        Some(w) => fit(&safe, w),
        None => safe.into_owned(),
    }
}

/// A line for people on stderr, `iolens: …`: warnings and notices that must reach a person even
/// when stdout carries the results or is piped away, fitted to the terminal's width. A closed
/// stderr is ignored (never a panic).
pub fn note(text: &str) {
    let _ = writeln!(
        io::stderr().lock(),
        "{}",
        for_stderr(&format!("iolens: {text}"))
    );
}

/// [`note`] of a warning: `iolens: warning: …`.
pub fn warn(text: &str) {
    note(&format!("warning: {text}"));
}

/// How writing the text for people went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Everything written.
    Ok,
    /// The reader closed the pipe (`| head`): not an error.
    Closed,
    /// Writing failed (e.g. no space left on device): the text is incomplete.
    Failed(String),
}

/// How writing the text for people went so far.
pub fn status() -> Status {
    match FAILED.load(Ordering::SeqCst) {
        0 => Status::Ok,
        -1 => Status::Closed,
        _ => Status::Failed(
            FIRST_ERROR
                .lock()
                .ok()
                .and_then(|g| g.clone())
                .unwrap_or_else(|| "write error".into()),
        ),
    }
}

/// `println!` for the text meant for people, without the panic (see the module docs).
#[macro_export]
macro_rules! outln {
    () => {{
        let _ = ::std::io::Write::write_all(&mut $crate::out::human(), b"\n");
    }};
    ($($arg:tt)*) => {{
        let _ = ::std::io::Write::write_all(
            &mut $crate::out::human(),
            format!("{}\n", format_args!($($arg)*)).as_bytes(),
        );
    }};
}

/// `print!` for the text meant for people, without the panic (see the module docs).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        let _ = ::std::io::Write::write_all(
            &mut $crate::out::human(),
            format!($($arg)*).as_bytes(),
        );
    }};
}

/// Columns a line takes on a terminal: characters, not counting ANSI escape sequences.
pub fn visible_width(s: &str) -> usize {
    let mut n = 0;
    let mut esc = false;
    for c in s.chars() {
        if esc {
            esc = !c.is_ascii_alphabetic();
        } else if c == '\x1b' {
            esc = true;
        } else {
            n += 1;
        }
    }
    n
}

/// Units that stay on the line of the figure before them.
const UNITS: &[&str] = &[
    "ns", "µs", "us", "ms", "s", "%", "B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "MB/s",
    "IOPS", "I/Os", "×",
];

/// Whether the break between `prev` and `next` would split a figure from its unit, or a label
/// from the figure after it (`p99.9 605 µs`, `util 18.1%`).
fn binds(prev: &str, next: &str) -> bool {
    let unit = next.trim_end_matches(|c: char| ",;:.)".contains(c));
    if prev.ends_with(|c: char| c.is_ascii_digit()) && UNITS.contains(&unit) {
        return true;
    }
    let label = !prev.is_empty()
        && !prev.contains(' ')
        && !prev.starts_with(|c: char| c.is_ascii_digit())
        && !prev.ends_with(|c: char| ",;.)".contains(c))
        && visible_width(prev) <= 12;
    label && next.starts_with(|c: char| c.is_ascii_digit())
}

/// `text` with every line longer than `width` columns broken between words, never between a
/// figure and its unit; continuation lines are indented two columns past the line's own
/// indent. A word longer than a whole line (a path, a list of mount options) is cut after a
/// `,`, `/` or `=` where it can be, else where it must.
pub fn fit(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if visible_width(body) <= width {
            out.push_str(line);
            continue;
        }
        let indent = body.len() - body.trim_start().len();
        let hang = " ".repeat(indent + 2);
        // Words, with a figure and its unit kept as one.
        let mut words: Vec<String> = Vec::new();
        for w in body[indent..].split(' ') {
            match words.last_mut() {
                Some(last) if binds(last, w) => {
                    last.push(' ');
                    last.push_str(w);
                }
                _ => words.push(w.to_string()),
            }
        }
        let room = width.saturating_sub(hang.len()).max(8);
        let words: Vec<String> = words.into_iter().flat_map(|w| cut_word(&w, room)).collect();
        let mut cur = body[..indent].to_string();
        let mut cur_w = indent;
        let mut first = true;
        for word in &words {
            let w = visible_width(word);
            if !first && cur_w + 1 + w > width {
                out.push_str(cur.trim_end());
                out.push('\n');
                cur = hang.clone();
                cur_w = hang.len();
                first = true;
            }
            if !first {
                cur.push(' ');
                cur_w += 1;
            }
            cur.push_str(word);
            cur_w += w;
            first = false;
        }
        out.push_str(&cur);
        out.push_str(nl);
    }
    out
}

/// `word` in pieces of at most `room` columns, each cut after a `,`, `/` or `=` where one falls
/// in the second half of the piece (ANSI escapes are not expected in such long words).
fn cut_word(word: &str, room: usize) -> Vec<String> {
    if visible_width(word) <= room {
        return vec![word.to_string()];
    }
    let mut out = Vec::new();
    let mut rest: Vec<char> = word.chars().collect();
    while rest.len() > room {
        let cut = (room / 2..room)
            .rev()
            .find(|&i| matches!(rest[i - 1], ',' | '/' | '='))
            .unwrap_or(room);
        out.push(rest[..cut].iter().collect());
        rest.drain(..cut);
    }
    out.push(rest.into_iter().collect());
    out
}

/// `text` as one line of plain text: every control character (newline, tab, escape…) and
/// bidirectional override becomes its escape (`\n`, `\u{1b}`), so a name read from a file or
/// a process (`prctl(PR_SET_NAME)`) can neither start a line of its own, nor colour, move or
/// hide what iolens prints after it. Names stay distinct: different names stay different.
pub fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| {
        c.is_control()
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    if !text.chars().any(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if bad(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// [`one_line`] in place.
pub fn make_one_line(text: &mut String) {
    if let std::borrow::Cow::Owned(s) = one_line(text) {
        *text = s;
    }
}
