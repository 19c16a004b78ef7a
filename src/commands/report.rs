//! `iolens report`: a self-contained HTML report of a results file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::render::heatmap::LoadedColumns;
use crate::render::{check_distinct, html, write_output};
use crate::results::Results;

/// `iolens report`: one self-contained HTML file.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Results file written by iolens.
    pub file: PathBuf,
    /// HTML file to write.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// `iolens report`.
pub(crate) fn main(args: &ReportArgs) -> Result<ExitCode> {
    check_distinct(&args.output, &[&args.file])?;
    // Validation merges the charts' columns as it decodes the interval histograms.
    let columns = LoadedColumns::new(html::TIME_COLUMNS);
    let r = Results::read_file_merging(&args.file, Some(&columns))?;
    let title = args
        .file
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let html = html::report_loaded(&r, &title, Some(&columns))?;
    write_output(&args.output, &html)?;
    crate::out::note(&format!(
        "wrote {} ({} KB)",
        args.output.display(),
        html.len().div_ceil(1000)
    ));
    Ok(ExitCode::SUCCESS)
}
