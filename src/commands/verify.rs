//! `iolens verify`: check every stamped block of a scratch file, offline.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use super::{finish, Context};
use crate::units::parse_size;
use crate::verify::{bench, verify_target, OfflineOptions};

/// Check levels of `iolens verify`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckLevel {
    /// Magic, target id and offset of every unit.
    Header,
    /// Also the CRC32C of every unit.
    Full,
}

/// `iolens verify`: check every stamped block of a scratch file, offline.
#[derive(Args, Debug, Clone)]
pub struct VerifyArgs {
    /// Scratch file (created by iolens) to check.
    #[arg(long, required_unless_present = "bench")]
    pub target: Option<PathBuf>,
    /// What to check in each 512-byte unit.
    #[arg(long, value_enum, default_value = "full")]
    pub mode: CheckLevel,
    /// Size of each sequential read.
    #[arg(long, default_value = "4M", value_parser = parse_size)]
    pub bs: u64,
    /// Stop at the first corrupt unit instead of checking the whole target.
    #[arg(long)]
    pub stop_at_first: bool,
    /// Read through the page cache (default: O_DIRECT when the filesystem allows it).
    #[arg(long)]
    pub buffered: bool,
    /// Do not draw progress.
    #[arg(long)]
    pub(crate) no_progress: bool,
    /// Check without the generation journal beside the target (stale blocks, restored from an
    /// older copy, then go unnoticed).
    #[arg(long)]
    pub(crate) no_journal: bool,
    /// Write the results (read latency histogram, figures, every report) to this JSON file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Measure stamping and verification CPU cost in memory (no target) and print it.
    #[arg(long, hide = true)]
    pub bench: bool,
    /// Block size of `--bench`.
    #[arg(long, hide = true, default_value = "8k", value_parser = parse_size)]
    pub(crate) bench_bs: u64,
}

/// `iolens verify`.
pub(crate) fn main(a: &VerifyArgs, cx: &Context) -> Result<ExitCode> {
    if a.bench {
        let f = bench(a.bench_bs)?;
        crate::outln!(
            "verify-bench block={} stamp_ns={:.0} header_hot_ns={:.0} full_hot_ns={:.0} header_cold_ns={:.0} full_cold_ns={:.0}",
            f.block_bytes, f.stamp_ns, f.header_hot_ns, f.full_hot_ns, f.header_cold_ns, f.full_cold_ns
        );
        return Ok(ExitCode::SUCCESS);
    }
    let Some(path) = &a.target else {
        bail!("--target is required");
    };
    crate::interrupt::install();
    crate::interrupt::set_writes_results(a.json.is_some());
    // A results file that cannot be written must fail now, not after the verification.
    let json = super::results_output(crate::output::Plan::new().input(path), a.json.as_deref(), 0)?;
    let progress = cx.progress(a.no_progress);
    let r = verify_target(
        path,
        &OfflineOptions {
            full: a.mode == CheckLevel::Full,
            chunk: a.bs as usize,
            stop_at_first: a.stop_at_first,
            direct: !a.buffered,
            progress,
            journal: !a.no_journal,
        },
        crate::interrupt::flag(),
    )?;
    let style = cx.brief_style();
    crate::out!("{}", crate::render::brief::verify_summary(&r, path, &style));
    let mut res = crate::results::Results::new(crate::results::Kind::Verify, cx.cmdline.clone());
    res.environment = crate::sys::environment();
    res.runs.push(r);
    finish(&super::complete(res), json)
}
