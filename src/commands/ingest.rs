//! `iolens ingest`: histogram snapshots and latency logs (event histograms, bcc/bpftrace, fio,
//! hlog…) into results.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{finish_evidence, Context};
use crate::sources::{ingest, Format, IngestOptions, Unit};

/// Arguments of `iolens ingest`.
#[derive(Args, Debug, Clone)]
pub struct IngestArgs {
    /// Input format.
    #[arg(long, value_enum)]
    pub format: Format,
    /// Input files, plain or gzip-compressed.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Latency unit of the values where the format does not say it (ns, us, ms, s). Defaults:
    /// event-histogram from the column name (ms for WAIT_TIME_MILLI), fio-log ns, hlog ns,
    /// time-latency us, bpftrace from the map name (else us).
    #[arg(long)]
    pub unit: Option<Unit>,
    /// Time unit of the first column of time-latency input (default us, as trace2heatmap.pl).
    #[arg(long)]
    pub time_unit: Option<Unit>,
    /// Interval length for formats with per-event timestamps (fio-log, biosnoop,
    /// time-latency) and the assumed spacing of un-timestamped histogram sections.
    #[arg(long, default_value = "1s", value_parser = crate::commands::values::std_duration)]
    pub interval: std::time::Duration,
    /// How long the source was recording, for sources that do not say (a histogram printed
    /// once at Ctrl-C, histograms without timestamps): without it their rates are unknown.
    #[arg(long, value_parser = crate::commands::values::std_duration)]
    pub duration: Option<std::time::Duration>,
    /// Write the results document (JSON) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

impl IngestArgs {
    /// The domain options these arguments describe.
    pub fn options(&self) -> IngestOptions {
        IngestOptions {
            format: self.format,
            files: self.files.clone(),
            unit: self.unit,
            time_unit: self.time_unit,
            interval: self.interval,
            duration: self.duration,
        }
    }
}

/// `iolens ingest`.
pub(crate) fn main(a: &IngestArgs, cx: &Context) -> Result<ExitCode> {
    let json = super::results_output(
        crate::output::Plan::new().inputs(a.files.iter().map(|p| p.as_path())),
        a.json.as_deref(),
        0,
    )?;
    let results = {
        let _reading = super::reading(json.as_ref());
        ingest(&a.options(), cx.cmdline.clone())?
    };
    finish_evidence(results, json, cx)
}
