//! `iolens export`: per-interval data for other tools (CSV, HdrHistogram interval log) and the
//! summary as Markdown for tickets.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use crate::output::{Holds, Output, Plan};
use crate::render::{csv, flame, folded, hlog, markdown};
use crate::results::Results;

/// `iolens export`: per-interval data for other tools.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Results file written by iolens.
    pub file: PathBuf,
    /// Write per-interval figures (time, op, count, IOPS, MB/s, percentiles) as CSV (`-` for
    /// standard output); a run over several targets adds a row per target (column `target`).
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
    // Every output is checked (against the input and each other, by identity) before any is
    // written.
    let mut files = Plan::new();
    files.input(&args.file);
    let mut claim = |flag: &str, p: &Option<PathBuf>| -> Result<Option<Output>> {
        p.as_deref()
            .map(|p| files.output(flag, p, Holds::Other, 0))
            .transpose()
    };
    let csv_out = claim("--csv", &args.csv)?;
    let hlog_out = claim("--hlog", &args.hlog)?;
    let markdown_out = claim("--markdown", &args.markdown)?;
    let flame_out = claim("--flame", &args.flame)?;
    let folded_out = claim("--folded", &args.folded)?;
    let r = Results::read_file(&args.file)?;
    if let Some(out) = csv_out {
        out.write_bytes(csv::intervals_csv(&r)?.as_bytes())?;
    }
    if let Some(out) = hlog_out {
        out.write_bytes(hlog::interval_log(&r)?.as_bytes())?;
    }
    if let Some(out) = markdown_out {
        out.write_bytes(markdown::summary(&r).as_bytes())?;
    }
    if flame_out.is_some() || folded_out.is_some() {
        let Some(prof) = &r.profile else {
            bail!(
                "{} holds no stack profile (write one with `iolens profile` or \
                 `iolens ingest --format perf-script`)",
                args.file.display()
            );
        };
        if let Some(out) = flame_out {
            out.write_bytes(flame::flame_svg(prof, &flame::title(&r), true).as_bytes())?;
        }
        if let Some(out) = folded_out {
            out.write_bytes(folded::folded(prof).as_bytes())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
