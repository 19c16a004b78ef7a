//! `iolens dev-synth` (hidden): write a synthetic results file (tests, demos, benchmarks).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use crate::synth;

/// `iolens dev-synth`: write a synthetic results file.
#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Output results file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// `run` or `calibrate`.
    #[arg(long, default_value = "run")]
    pub kind: String,
    /// Measured seconds (per step for calibrate).
    #[arg(long, default_value_t = 10)]
    pub seconds: usize,
    /// Latency samples per op and interval.
    #[arg(long, default_value_t = 500)]
    pub samples: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Record this rank (and `--ranks`) on host `synth-RANK`, as if a launcher had started it
    /// (input for `merge` benchmarks).
    #[arg(long)]
    pub rank: Option<u32>,
    /// World size recorded with `--rank`.
    #[arg(long)]
    pub ranks: Option<u32>,
}

/// `iolens dev-synth`.
pub(crate) fn main(args: &SynthArgs) -> Result<ExitCode> {
    let r = match args.kind.as_str() {
        "run" => synth::run_results_with(args.seconds, 1.0, args.samples, args.seed),
        "calibrate" => synth::calibration_results(8, args.seconds, args.samples, args.seed),
        other => bail!("unknown --kind {other:?}: use run or calibrate"),
    };
    let mut r = r;
    if let Some(rank) = args.rank {
        let who = crate::placement::Rank::resolve(
            Some(rank),
            args.ranks,
            &|_| None,
            format!("synth-{rank}"),
        )?;
        r.placement = Some(who.placement());
    }
    r.write_file(&args.output)?;
    Ok(ExitCode::SUCCESS)
}
