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
//! - [`synth`]: synthetic results for tests, demos and the report benchmark.

pub mod brief;
pub mod compare;
pub mod csv;
pub mod findings;
pub mod heatmap;
pub mod hlog;
pub mod html;
pub mod markdown;
pub mod svg;
pub mod synth;
pub mod table;
pub mod terminal;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::results::{Kind, Results};

/// When to use ANSI colour in terminal output.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and NO_COLOR is not set.
    Auto,
    Always,
    Never,
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

/// `iolens show`: the results in the terminal.
#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// Results file written by iolens.
    pub file: PathBuf,
    /// Show details (histograms, heatmaps) of this run only (0-based index, see the summary).
    #[arg(long)]
    pub run: Option<usize>,
    /// Colour: auto (terminal and no NO_COLOR), always or never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Output width in columns (default: the terminal's, else $COLUMNS, else 100).
    #[arg(long)]
    pub width: Option<usize>,
}

/// `iolens report`: one self-contained HTML file.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Results file written by iolens.
    pub file: PathBuf,
    /// HTML file to write.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// `iolens compare`: two or more results side by side.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Results files; the first is the baseline for ratios.
    #[arg(num_args = 2.., required = true)]
    pub files: Vec<PathBuf>,
    /// Write an HTML comparison here instead of printing to the terminal.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Compare even when the workloads differ in ways that make the comparison meaningless.
    #[arg(long)]
    pub force: bool,
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    #[arg(long)]
    pub width: Option<usize>,
}

/// `iolens export`: per-interval data for other tools.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// Results file written by iolens.
    pub file: PathBuf,
    /// Write per-interval figures (time, op, count, IOPS, MB/s, percentiles) as CSV (`-` for
    /// standard output).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write an HdrHistogram interval log (V2, one tagged line per op and interval).
    #[arg(long)]
    pub hlog: Option<PathBuf>,
    /// Write the summary (tables, calibration, verdicts) as Markdown for a ticket (`-` for
    /// standard output).
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

/// Short name of a results kind.
pub fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Run => "run",
        Kind::Calibrate => "calibrate",
        Kind::Db => "db",
        Kind::Trace => "trace",
        Kind::Ingest => "ingest",
        Kind::Verify => "verify",
    }
}

/// Refuse to overwrite an input with an output.
fn check_distinct(output: &Path, inputs: &[&Path]) -> Result<()> {
    for i in inputs {
        let same = match (output.canonicalize(), i.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => output == *i,
        };
        if same {
            bail!(
                "output {} is the same file as input {}; choose another output path",
                output.display(),
                i.display()
            );
        }
    }
    Ok(())
}

/// Write text to `path`, or to standard output when `path` is `-`.
fn write_output(path: &Path, text: &str) -> Result<()> {
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .context("cannot write to standard output")?;
        return Ok(());
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Print to stdout, treating a closed pipe (`| head`) as success.
fn print_out(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("cannot write to standard output"),
    }
}

/// Run `iolens show`.
pub fn show(args: &ShowArgs) -> Result<ExitCode> {
    let r = Results::read_file(&args.file)?;
    let style = TermStyle::resolve(args.color, args.width);
    let text = terminal::render(&r, &style, args.run)?;
    print_out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Run `iolens report`.
pub fn report(args: &ReportArgs) -> Result<ExitCode> {
    check_distinct(&args.output, &[&args.file])?;
    let r = Results::read_file(&args.file)?;
    let title = args
        .file
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let html = html::report(&r, &title)?;
    write_output(&args.output, &html)?;
    eprintln!(
        "iolens: wrote {} ({} KB)",
        args.output.display(),
        html.len().div_ceil(1000)
    );
    Ok(ExitCode::SUCCESS)
}

/// Run `iolens compare`.
pub fn compare(args: &CompareArgs) -> Result<ExitCode> {
    let mut inputs = Vec::new();
    for f in &args.files {
        let r = Results::read_file(f)?;
        let label = f
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| f.display().to_string());
        inputs.push((label, r));
    }
    let problems = compare::incompatibilities(&inputs);
    if !problems.is_empty() && !args.force {
        bail!(
            "these results cannot be compared meaningfully:\n  - {}\nuse --force to compare them anyway",
            problems.join("\n  - ")
        );
    }
    match &args.output {
        Some(out) => {
            let paths: Vec<&Path> = args.files.iter().map(|p| p.as_path()).collect();
            check_distinct(out, &paths)?;
            let html = compare::html(&inputs, &problems)?;
            write_output(out, &html)?;
            eprintln!("iolens: wrote {}", out.display());
        }
        None => {
            let style = TermStyle::resolve(args.color, args.width);
            print_out(&compare::terminal(&inputs, &problems, &style)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Run `iolens export`.
pub fn export(args: &ExportArgs) -> Result<ExitCode> {
    let outputs = [&args.csv, &args.hlog, &args.markdown];
    if outputs.iter().all(|o| o.is_none()) {
        bail!("nothing to export: give --csv FILE, --hlog FILE and/or --markdown FILE");
    }
    let to_stdout = outputs
        .iter()
        .filter(|o| o.as_deref().is_some_and(|p| p.as_os_str() == "-"))
        .count();
    if to_stdout > 1 {
        bail!("only one of --csv, --hlog and --markdown can write to standard output");
    }
    let r = Results::read_file(&args.file)?;
    if let Some(p) = &args.csv {
        check_distinct(p, &[&args.file])?;
        write_output(p, &csv::intervals_csv(&r)?)?;
    }
    if let Some(p) = &args.hlog {
        check_distinct(p, &[&args.file])?;
        write_output(p, &hlog::interval_log(&r)?)?;
    }
    if let Some(p) = &args.markdown {
        check_distinct(p, &[&args.file])?;
        write_output(p, &markdown::summary(&r))?;
    }
    Ok(ExitCode::SUCCESS)
}
