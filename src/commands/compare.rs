//! `iolens compare`: two or more results files side by side.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use crate::output::{Holds, Plan};
use crate::render::{compare, print_out, ColorChoice, TermStyle};
use crate::results::Results;

/// `iolens compare`: two or more results side by side.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Results files; the first is the baseline for ratios. A replay's results (`iolens
    /// replay --json`) count as two, its recorded and its replayed side, so one is enough.
    #[arg(num_args = 1.., required = true)]
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
    // The report is checked against the inputs (by identity) before anything is read.
    let output = args
        .output
        .as_deref()
        .map(|out| {
            Plan::new()
                .inputs(args.files.iter().map(|p| p.as_path()))
                .output("-o", out, Holds::Other, 0)
        })
        .transpose()?;
    let mut inputs = Vec::new();
    for f in &args.files {
        let r = Results::read_file(f)?;
        let label = f
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| f.display().to_string());
        inputs.push((label, r));
    }
    let inputs = crate::analysis::compare::replay_sides(inputs)?;
    if inputs.len() < 2 {
        bail!(
            "compare needs two results files, or one replay's results (its recorded and \
             replayed sides)"
        );
    }
    let problems = compare::incompatibilities(&inputs);
    if !problems.is_empty() && !args.force {
        bail!(
            "these results cannot be compared meaningfully:\n  - {}\nuse --force to compare them anyway",
            problems.join("\n  - ")
        );
    }
    match output {
        Some(out) => {
            let html = compare::html(&inputs, &problems)?;
            let shown = out.path().display().to_string();
            out.write_bytes(html.as_bytes())?;
            crate::out::note(&format!("wrote {shown}"));
        }
        None => {
            let style = TermStyle::resolve(args.color, cx.width);
            print_out(&compare::terminal(&inputs, &problems, &style)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
