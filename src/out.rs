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
pub fn set_width(width: Option<usize>) {
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
pub fn reserve_stdout() {
    TO_STDERR.store(true, Ordering::SeqCst);
}

/// Print no text for people from now on (`-q/--quiet`); errors still go to stderr.
pub fn silence() {
    SILENT.store(true, Ordering::SeqCst);
}

/// Whether stdout is reserved for the results.
pub fn stdout_reserved() -> bool {
    TO_STDERR.load(Ordering::SeqCst)
}

/// A writer for the text meant for people: stdout (stderr when stdout carries the results).
/// Errors are recorded (see [`status`]) and swallowed; after the first, nothing more is tried.
pub fn human() -> Human {
    Human
}

/// See [`human`].
pub struct Human;

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
        let buf = match (width(), std::str::from_utf8(buf)) {
            (Some(w), Ok(text)) => {
                fitted = crate::render::brief::fit(text, w);
                fitted.as_bytes()
            }
            _ => buf,
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
