//! Renderers: everything that turns a results file into something a person reads or another
//! tool loads. Each renderer reads only [`Results`]; nothing here knows which producer wrote it.
//!
//! - [`brief`]: the terminal renderer's brief mode, the summaries commands print as they end.
//! - [`terminal`]: `iolens show` (tables, histogram bars, ANSI heatmaps).
//! - [`html`]: `iolens report` (one self-contained HTML file with inline SVG charts).
//! - [`compare`]: `iolens compare` (compatibility check, ratio tables, overlaid charts).
//! - [`csv`], [`hlog`], [`markdown`]: `iolens export` (per-interval CSV, HdrHistogram interval
//!   log, the summary as Markdown for tickets).
//! - [`table`]: the one table type (text that fits the width, HTML, Markdown) and the tables
//!   several renderers share.
//! - [`findings`]: analysis results as the renderers draw them.
//! - [`heatmap`] (shared binning) and [`svg`] (chart geometry) serve the above.
//! - [`flame`]: the interactive flame graph of a stack profile (SVG); [`folded`]: its folded
//!   stacks.

pub mod analysis;
pub mod brief;
pub mod brief_db;
pub mod brief_trace;
pub mod compare;
pub mod csv;
mod evidence;
pub mod findings;
pub mod flame;
pub mod folded;
pub mod heatmap;
pub mod hlog;
pub mod hosts;
pub mod html;
pub mod io_stats;
pub mod markdown;
pub mod plan;
pub mod prometheus;
pub mod replay;
pub mod stacks;
pub mod svg;
pub mod table;
pub(crate) mod targets;
pub mod terminal;
pub mod watch;
pub mod watch_live;

use std::io::{IsTerminal, Write};

use anyhow::{Context, Result};

use crate::results::Kind;

/// Whether a document counts database wait events, not I/O requests (a trace, an ingested
/// `V$EVENT_HISTOGRAM` spool or AWR report): their rate is waits per second, never IOPS.
pub(crate) fn counts_waits(r: &crate::results::Results) -> bool {
    r.kind == Kind::Trace
        || (r.kind == Kind::Ingest
            && r.source
                .as_ref()
                .is_some_and(|s| matches!(s.format.as_str(), "event-histogram" | "awr")))
}

/// The name of a document's rate of operations: `IOPS`, or `waits/s` ([`counts_waits`]).
pub(crate) fn rate_name(r: &crate::results::Results) -> &'static str {
    if counts_waits(r) {
        "waits/s"
    } else {
        "IOPS"
    }
}

/// When to use ANSI colour in terminal output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and NO_COLOR is not set.
    Auto,
    Always,
    Never,
}

/// The command line as people read it: whole up to 24 arguments, else its first 12 and last 4
/// around a count of those left out (a merge of a thousand ranks names a thousand files). The
/// results file keeps it whole.
pub(crate) fn command_text(args: &[String]) -> String {
    const WHOLE: usize = 24;
    const HEAD: usize = 12;
    const TAIL: usize = 4;
    if args.len() <= WHOLE {
        return args.join(" ");
    }
    format!(
        "{} … ({} more arguments) … {}",
        args[..HEAD].join(" "),
        args.len() - HEAD - TAIL,
        args[args.len() - TAIL..].join(" ")
    )
}

/// Terminal output settings resolved from flags and the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TermStyle {
    pub color: bool,
    pub width: usize,
}

impl TermStyle {
    /// Resolve colour (NO_COLOR, tty detection) and width (`--width`, the terminal, COLUMNS,
    /// else 100).
    pub fn resolve(choice: ColorChoice, width: Option<usize>) -> TermStyle {
        let tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => tty && !no_color,
        };
        let width = width
            .or_else(|| {
                if tty {
                    terminal_size::terminal_size().map(|(w, _)| w.0 as usize)
                } else {
                    None
                }
            })
            .or_else(|| {
                std::env::var("COLUMNS")
                    .ok()
                    .and_then(|c| c.trim().parse().ok())
            })
            .unwrap_or(100)
            .clamp(40, 400);
        TermStyle { color, width }
    }
}

/// Short name of a results kind.
pub(crate) fn kind_name(k: Kind) -> &'static str {
    k.name()
}

/// Print to stdout, treating a closed pipe (`| head`) as success.
pub(crate) fn print_out(text: &str) -> Result<()> {
    let text = crate::out::term_safe(text);
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("cannot write to standard output"),
    }
}
