//! `iolens trace`: Oracle extended SQL trace files (event 10046) into latency distributions and a
//! response-time profile.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{finish_evidence, Context};
use crate::sources::{oracle_trace, TraceOptions};
use crate::sys::peak_rss;

/// Arguments of `iolens trace`.
#[derive(Args, Debug, Clone)]
pub struct TraceArgs {
    /// Oracle extended SQL trace files (event 10046), plain or gzip-compressed. Files of one
    /// session (same SESSION ID, or a `TRACE CONTINUED` chain) are combined into one series.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Keep only these wait events in the latency histograms (repeatable). The response-time
    /// profile always covers every event.
    #[arg(long = "event", value_name = "NAME")]
    pub events: Vec<String>,
    /// Interval length of the per-interval histograms (heatmap resolution).
    #[arg(long, default_value = "1s", value_parser = crate::commands::values::std_duration)]
    pub interval: std::time::Duration,
    /// How many of the slowest individual waits to list.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Write the results document (JSON) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print the process's peak resident memory (VmHWM) at the end (used by the benchmark).
    #[arg(long, hide = true)]
    pub(crate) print_peak_rss: bool,
}

/// `iolens trace`.
pub(crate) fn main(a: &TraceArgs, cx: &Context) -> Result<ExitCode> {
    let json = super::results_output(
        crate::output::Plan::new().inputs(a.files.iter().map(|p| p.as_path())),
        a.json.as_deref(),
        0,
    )?;
    let opts = TraceOptions {
        files: a.files.clone(),
        events: a.events.clone(),
        interval: a.interval,
        top: a.top,
    };
    let results = {
        let _reading = super::reading(json.as_ref());
        oracle_trace::read_traces(&opts, cx.cmdline.clone())?
    };
    let code = finish_evidence(results, json, cx)?;
    if a.print_peak_rss {
        crate::outln!(
            "peak RSS: {}",
            peak_rss().unwrap_or_else(|| "unknown".into())
        );
    }
    Ok(code)
}
