//! `iolens merge`: the results of many ranks merged exactly into one results document.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{finish, Context};
use crate::merge::MergeOptions;

/// `iolens merge` options.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Results files of the ranks (one per rank or host, from `run`, `calibrate` or `db run`).
    /// Each is read twice (a light reading to place the ranks, then whole), so each must be a
    /// regular file, and one replaced or rewritten between the readings is refused.
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Write the merged results here (`-` is standard output).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Merge results of different workloads, different world sizes, duplicate ranks or files
    /// without ranks (each becomes a warning in the merged results).
    #[arg(long)]
    pub force: bool,
}

/// `iolens merge`.
pub(crate) fn main(a: &MergeArgs, cx: &Context) -> Result<ExitCode> {
    let mut files = crate::output::Plan::new();
    files.inputs(a.files.iter().map(|p| p.as_path()));
    let out = files.output(
        "-o",
        &a.output,
        crate::output::Holds::Results,
        crate::output::RESULTS_RESERVE,
    )?;
    let res = super::complete(crate::merge::merge(
        &a.files,
        &MergeOptions {
            force: a.force,
            progress: cx.progress(false),
        },
        cx.cmdline.clone(),
    )?);
    let style = cx.brief_style();
    crate::out!("{}", crate::render::hosts::merge_summary(&res, &style));
    finish(&res, Some(out))
}
