//! `iolens gen-trace` (hidden): write a synthetic 10046 trace, the input of the parsing
//! benchmark.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::output::{Holds, Plan};
use clap::Args;

use crate::synth::write_synthetic_trace;

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
    // A new file only, checked and placed by the one writer (no check-then-write race).
    let out = Plan::new().new_output("the output", &args.out, Holds::Other, args.size)?;
    let mut n = 0;
    out.write(&mut |w| {
        n = write_synthetic_trace(w, args.size, args.seed)?;
        Ok(())
    })?;
    crate::outln!("wrote {} waits to {}", n, args.out.display());
    Ok(ExitCode::SUCCESS)
}
