//! `iolens report`: a self-contained HTML report of a results file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::output::{Holds, Plan};
use crate::render::heatmap::LoadedColumns;
use crate::render::html;
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
    let out = Plan::new()
        .input(&args.file)
        .output("-o", &args.output, Holds::Other, 0)?;
    // Validation merges the charts' columns as it decodes the interval histograms.
    let columns = LoadedColumns::new(html::TIME_COLUMNS);
    let r = Results::read_file_merging(&args.file, Some(&columns))?;
    let title = args
        .file
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let html = html::report_loaded(&r, &title, Some(&columns))?;
    out.write_bytes(html.as_bytes())?;
    crate::out::note(&format!(
        "wrote {} ({} KB)",
        args.output.display(),
        html.len().div_ceil(1000)
    ));
    Ok(ExitCode::SUCCESS)
}
