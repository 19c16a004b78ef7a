//! `iolens gen-trace` (hidden): write a synthetic 10046 trace, the input of the parsing
//! benchmark.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;

use crate::sources::oracle_trace::write_synthetic_trace;

/// Arguments of the hidden `iolens gen-trace` command (benchmark input).
#[derive(Args, Debug, Clone)]
pub struct GenTraceArgs {
    /// Output file (created; must not exist).
    pub out: PathBuf,
    /// Approximate size, e.g. 600M.
    #[arg(long, default_value = "600M", value_parser = |s: &str| parse_size::parse_size(s))]
    pub size: u64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `iolens gen-trace`.
pub(crate) fn main(args: &GenTraceArgs) -> Result<ExitCode> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&args.out)
        .with_context(|| format!("cannot create {} (must not exist)", args.out.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let n = write_synthetic_trace(&mut w, args.size, args.seed)?;
    w.flush()?;
    crate::outln!("wrote {} waits to {}", n, args.out.display());
    Ok(ExitCode::SUCCESS)
}
