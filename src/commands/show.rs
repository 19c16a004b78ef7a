//! `iolens show`: a results file in the terminal.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::render::heatmap::LoadedColumns;
use crate::render::{print_out, terminal, ColorChoice, TermStyle};
use crate::results::Results;

/// `iolens show`: the results in the terminal.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Results file written by iolens.
    pub file: PathBuf,
    /// Show details (histograms, heatmaps) of this run only (0-based index, see the summary).
    #[arg(long)]
    pub run: Option<usize>,
    /// Colour: auto (terminal and no NO_COLOR), always or never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// `iolens show`.
pub(crate) fn main(args: &ShowArgs, cx: &super::Context) -> Result<ExitCode> {
    let style = TermStyle::resolve(args.color, cx.width);
    // Validation merges the display columns as it decodes the interval histograms.
    let columns = LoadedColumns::new(terminal::heatmap_columns(&style));
    let r = Results::read_file_merging(&args.file, Some(&columns))?;
    let text = terminal::render_loaded(&r, &style, args.run, Some(&columns))?;
    print_out(&text)?;
    Ok(ExitCode::SUCCESS)
}
