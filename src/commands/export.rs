//! `iolens export`: per-interval data for other tools (CSV, HdrHistogram interval log) and the
//! summary as Markdown for tickets.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use crate::render::{check_distinct, csv, flame, folded, hlog, markdown, write_output};
use crate::results::Results;

/// `iolens export`: per-interval data for other tools.
#[derive(Args, Debug)]
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
    pub(crate) markdown: Option<PathBuf>,
    /// Write the stack profile's interactive flame graph (SVG).
    #[arg(long, value_name = "FILE")]
    pub flame: Option<PathBuf>,
    /// Write the stack profile as folded stacks (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
}

/// `iolens export`.
pub(crate) fn main(args: &ExportArgs) -> Result<ExitCode> {
    let outputs = [
        &args.csv,
        &args.hlog,
        &args.markdown,
        &args.flame,
        &args.folded,
    ];
    if outputs.iter().all(|o| o.is_none()) {
        bail!(
            "nothing to export: give --csv FILE, --hlog FILE, --markdown FILE, --flame FILE \
             and/or --folded FILE"
        );
    }
    let to_stdout = outputs
        .iter()
        .filter(|o| o.as_deref().is_some_and(|p| p.as_os_str() == "-"))
        .count();
    if to_stdout > 1 {
        bail!(
            "only one of --csv, --hlog, --markdown, --flame and --folded can write to \
             standard output"
        );
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
    if args.flame.is_some() || args.folded.is_some() {
        let Some(prof) = &r.profile else {
            bail!(
                "{} holds no stack profile (write one with `iolens profile` or \
                 `iolens ingest --format perf-script`)",
                args.file.display()
            );
        };
        if let Some(p) = &args.flame {
            check_distinct(p, &[&args.file])?;
            write_output(p, &flame::flame_svg(prof, &flame::title(&r), true))?;
        }
        if let Some(p) = &args.folded {
            check_distinct(p, &[&args.file])?;
            write_output(p, &folded::folded(prof))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
