//! Command-line parsing only: turns arguments into specs and dispatches to the module that
//! implements each subcommand. One variant per subcommand; its argument struct lives in the
//! module that implements it.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// iolens: storage measured as a database experiences it.
#[derive(Parser, Debug)]
#[command(name = "iolens", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show a results file in the terminal: summary, histograms, latency heatmaps.
    Show(crate::render::ShowArgs),
    /// Write a self-contained HTML report of a results file.
    Report(crate::render::ReportArgs),
    /// Compare two or more results files (terminal, or HTML with -o).
    Compare(crate::render::CompareArgs),
    /// Export per-interval data: CSV and/or HdrHistogram interval log.
    Export(crate::render::ExportArgs),
    /// Write a synthetic results file (tests, demos, benchmarks).
    #[command(name = "dev-synth", hide = true)]
    DevSynth(crate::render::synth::SynthArgs),
}

/// Parse arguments and run the chosen subcommand; returns the process exit code.
pub fn main_with(args: Vec<std::ffi::OsString>) -> Result<ExitCode> {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return Ok(ExitCode::from(code));
        }
    };
    match cli.command {
        Command::Show(a) => crate::render::show(&a),
        Command::Report(a) => crate::render::report(&a),
        Command::Compare(a) => crate::render::compare(&a),
        Command::Export(a) => crate::render::export(&a),
        Command::DevSynth(a) => crate::render::synth::main(&a),
    }
}
