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
    /// SQL-driven I/O through a real database cache (the SLOB method): setup, run, drop.
    Db(crate::db::DbArgs),
}

/// Parse arguments and run the chosen subcommand; returns the process exit code.
pub fn main_with(args: Vec<std::ffi::OsString>) -> Result<ExitCode> {
    let argv: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return Ok(ExitCode::from(code));
        }
    };
    match cli.command {
        Command::Db(a) => crate::db::main(a, &argv),
    }
}
