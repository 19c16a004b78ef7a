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
    /// Read Oracle extended SQL trace files (event 10046) into latency distributions and a
    /// response-time profile.
    Trace(crate::sources::TraceArgs),
    /// Read histogram snapshots and latency logs (event histograms, bcc/bpftrace, fio, hlog…).
    Ingest(crate::sources::IngestArgs),
    /// Write a synthetic 10046 trace (benchmark input).
    #[command(hide = true)]
    GenTrace(crate::sources::oracle_trace::GenTraceArgs),
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
    let command_line: Vec<String> = std::env::args().collect();
    match cli.command {
        Command::Trace(a) => crate::sources::run_trace(&a, command_line),
        Command::Ingest(a) => crate::sources::run_ingest(&a, command_line),
        Command::GenTrace(a) => crate::sources::oracle_trace::run_gen_trace(&a),
    }
}
