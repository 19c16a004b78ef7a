//! `iolens replay`: a database's recorded I/O (Oracle 10046 traces, biosnoop or blkparse
//! output, fio iologs) replayed on a target, recorded beside replayed latency, with the
//! replay's own fidelity.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::Context;
use crate::output::Holds;
use crate::replay::{ReplayOptions, Timing};
use crate::sources::io_stream::{StreamFormat, StreamOptions};
use crate::units::parse_size;

/// Arguments of `iolens replay`.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// Recorded I/O: Oracle 10046 trace files (each traced session replays on its own thread),
    /// bcc biosnoop or blkparse output (each process on its own thread), fio iologs
    /// (version 2 or 3; each log one session), or `iolens watch --record` files (each thread
    /// on its own thread).
    #[arg(required = true)]
    pub sources: Vec<PathBuf>,
    /// The sources' format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: StreamFormat,
    /// Target: a scratch file iolens creates (and marks) sized to hold the map, an existing
    /// scratch file, or (reads only) an existing file or block device.
    #[arg(long, default_value = "iolens-replay.dat")]
    pub target: PathBuf,
    /// Map of source files (file#, disk) to regions of the target, JSON: read when FILE
    /// exists, else the default map (files one after another) is written there to edit.
    #[arg(long, value_name = "FILE")]
    pub map: Option<PathBuf>,
    /// Bytes per block of a trace's block numbers (db_block_size; a trace does not hold it).
    #[arg(long, value_parser = parse_size, default_value = "8k")]
    pub block_size: u64,
    /// recorded (as traced), scaled:K (K times as fast), fast (each session back to back),
    /// think (each session waits its recorded think time after each completion).
    #[arg(long, default_value = "recorded", value_parser = Timing::parse)]
    pub timing: Timing,
    /// Replay recorded writes too (only on a scratch file iolens created; never on the
    /// source's own files).
    #[arg(long, conflicts_with = "skip_writes")]
    pub writes: bool,
    /// Replay the source's reads only, leaving its writes out (without it or --writes, a
    /// source that holds writes is refused).
    #[arg(long)]
    pub skip_writes: bool,
    /// Use the page cache (default: O_DIRECT).
    #[arg(long)]
    pub buffered: bool,
    /// Interval of the per-interval histograms and of recorded beside achieved IOPS.
    #[arg(long, default_value = "1s", value_parser = crate::commands::values::std_duration)]
    pub interval: std::time::Duration,
    /// Run each session's thread under SCHED_FIFO (priority 1), so that other work on a busy
    /// host does not delay its wake-ups (root or CAP_SYS_NICE).
    #[arg(long)]
    pub realtime: bool,
    /// Do not draw progress.
    #[arg(long)]
    pub(crate) no_progress: bool,
    /// Write the results document (JSON) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `iolens replay`.
pub(crate) fn main(a: &ReplayArgs, cx: &Context) -> Result<ExitCode> {
    let mut plan = crate::output::Plan::new();
    plan.inputs(a.sources.iter().map(|p| p.as_path()))
        .input(&a.target);
    let json = super::results_output(&mut plan, a.json.as_deref(), 0)?;
    let opts = ReplayOptions {
        stream: StreamOptions {
            files: a.sources.clone(),
            format: a.format,
            block_size: Some(a.block_size),
        },
        target: a.target.clone(),
        map: a.map.clone(),
        timing: a.timing,
        writes: a.writes,
        skip_writes: a.skip_writes,
        direct: !a.buffered,
        interval: a.interval,
        progress: cx.progress(a.no_progress),
        realtime: a.realtime,
    };
    let prepared = crate::replay::prepare(&opts)?;
    if let (Some(p), true) = (&a.map, prepared.map_is_new) {
        let text = serde_json::to_string_pretty(&prepared.map)? + "\n";
        plan.new_output("--map", p, Holds::Other, text.len() as u64)?
            .write_bytes(text.as_bytes())?;
        crate::outln!("Map written to {} (edit it and give it again)", p.display());
    }
    let results = crate::replay::replay(
        &opts,
        prepared,
        cx.cmdline.clone(),
        crate::interrupt::flag(),
    )?;
    let results = super::complete(results);
    results.validate()?;
    let style = cx.brief_style();
    crate::out!("{}", crate::render::replay::text(&results, &style));
    super::finish(&results, json)
}
