//! `iolens compare`: two or more results files side by side.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use crate::render::{check_distinct, compare, print_out, write_output, ColorChoice, TermStyle};
use crate::results::Results;

/// `iolens compare`: two or more results side by side.
#[derive(Args, Debug)]
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
    /// Colour: auto (terminal and no NO_COLOR), always or never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// `iolens compare`.
pub(crate) fn main(args: &CompareArgs, cx: &super::Context) -> Result<ExitCode> {
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
            crate::out::note(&format!("wrote {}", out.display()));
        }
        None => {
            let style = TermStyle::resolve(args.color, cx.width);
            print_out(&compare::terminal(&inputs, &problems, &style)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
