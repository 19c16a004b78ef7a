//! Command-line parsing only: turns arguments into specs and dispatches to the module that
//! implements each subcommand. One variant per subcommand; the argument structs of `run` and
//! `calibrate` live here, other subcommands keep theirs in the module that implements them.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::workload::{Distribution, EngineKind, Pattern, SyncMode, WorkloadSpec};

/// iolens: storage measured as a database experiences it.
#[derive(Parser, Debug)]
#[command(
    name = "iolens",
    version,
    about,
    long_about = None,
    after_help = "Exit status: 0 success; 2 error or bad input; 3 data corruption detected \
                  (run, calibrate, verify; also a truncated scratch file or a damaged scratch \
                  header, which is left as found); 130 interrupted (Ctrl-C, also during a \
                  scratch-file fill, which resumes later), 143 terminated (SIGTERM), 129 hung up \
                  (SIGHUP): results measured so far are still written."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
// Parsed once per process: boxing the large argument structs would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one workload on a target and report its full latency distribution.
    Run(RunArgs),
    /// The honest CALIBRATE_IO: load curve, max IOPS at a latency target, MB/s, tiers,
    /// knee, CPU and queueing verdicts. With no arguments it creates its own scratch file.
    Calibrate(crate::calibrate::CalibrateArgs),
    /// Check every block of an iolens scratch file offline: checksum, address, target id.
    /// Exits with 3 when corruption is found.
    Verify(crate::verify::VerifyArgs),
    /// SQL-driven I/O through a real database cache (the SLOB method): setup, run, drop.
    Db(crate::db::DbArgs),
    /// Read Oracle extended SQL trace files (event 10046) into latency distributions and a
    /// response-time profile.
    Trace(crate::sources::TraceArgs),
    /// Read histogram snapshots and latency logs (event histograms, bcc/bpftrace, fio, hlog…).
    Ingest(crate::sources::IngestArgs),
    /// Write a synthetic 10046 trace (benchmark input).
    #[command(hide = true)]
    GenTrace(crate::sources::oracle_trace::GenTraceArgs),
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

/// Parse a size such as `8k`, `4G`, `1.5GiB` (k/M/G are binary: 1k = 1024).
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    parse_size::Config::new()
        .with_binary()
        .parse_size(s)
        .map_err(|e| format!("`{s}` is not a size ({e}); use e.g. 8k, 512, 4G"))
}

/// Parse a duration such as `30s`, `500ms`, `2m` or a plain number of seconds.
pub fn parse_duration(s: &str) -> std::result::Result<f64, String> {
    if let Ok(v) = s.parse::<f64>() {
        if v.is_finite() && v >= 0.0 {
            return Ok(v);
        }
        return Err(format!("`{s}` is not a valid duration"));
    }
    humantime::parse_duration(s)
        .map(|d| d.as_secs_f64())
        .map_err(|e| format!("`{s}` is not a duration ({e}); use e.g. 30s, 500ms, 2m"))
}

/// Options shared by `run` and `calibrate` that select and protect the target.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// Target: a scratch file iolens creates (and marks) if missing, an existing file or a
    /// block device (read-only unless named with --disposable-target).
    #[arg(long, default_value = "iolens-scratch.dat")]
    pub target: PathBuf,
    /// Data size of the target (a new scratch file is created this large; default 1G).
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// Allow writes to this existing file or device, whose contents you declare disposable.
    /// Must name the same path as --target.
    #[arg(long, value_name = "PATH")]
    pub disposable_target: Option<PathBuf>,
    /// Rewrite the scratch file's fill: complete an interrupted fill from a read-only command,
    /// or rewrite a truncated, damaged or old-format scratch file from the start. Without it
    /// iolens never repairs a scratch file: damage is reported as corruption (exit 3) and the
    /// file is left as found.
    #[arg(long)]
    pub refill: bool,
    /// Use the page cache (default: O_DIRECT).
    #[arg(long)]
    pub buffered: bool,
    /// Do not draw progress (progress is only drawn when stderr is a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// Write the complete results (spec, environment, every histogram) to this JSON file
    /// (a regular file or a new path; `-` writes them to standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `iolens run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub t: TargetArgs,
    /// Access pattern.
    #[arg(long, value_enum, default_value = "randread")]
    pub pattern: Pattern,
    /// Block size per I/O.
    #[arg(long, default_value = "8k", value_parser = parse_size)]
    pub bs: u64,
    /// Concurrent sessions (threads).
    #[arg(long, default_value_t = 1)]
    pub sessions: u32,
    /// I/Os in flight per session (uring engine).
    #[arg(long, default_value_t = 1)]
    pub qd: u32,
    /// I/O engine: sync (pread/pwrite), uring (io_uring), null (no I/O: tool overhead).
    #[arg(long, value_enum, default_value = "sync")]
    pub engine: EngineKind,
    /// Write durability: none, dsync (O_DSYNC), fdatasync, fdatasync:N (every N writes).
    #[arg(long, default_value = "none")]
    pub sync: SyncMode,
    /// Percentage of reads for --pattern randrw.
    #[arg(long)]
    pub read_pct: Option<u32>,
    /// Measured duration (e.g. 30s, 2m); default 10s unless --ios is given.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<f64>,
    /// Number of I/Os to complete instead of a duration.
    #[arg(long)]
    pub ios: Option<u64>,
    /// Warm-up excluded from the results.
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    pub warmup: f64,
    /// Interval of the per-interval histograms.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: f64,
    /// Offset distribution: uniform, zipf:θ, hotspot:IO%:SIZE%[:OFFSET%].
    #[arg(long = "dist", default_value = "uniform")]
    pub dist: Distribution,
    /// Start of the working set within the target's data area.
    #[arg(long, default_value = "0", value_parser = parse_size)]
    pub offset: u64,
    /// Size of the working set (default: the whole target from --offset).
    #[arg(long, value_parser = parse_size)]
    pub working_set: Option<u64>,
    /// Open-loop rate limit in I/Os per second (latency counted from each intended start).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Think time between a session's I/Os, e.g. 100us.
    #[arg(long, value_parser = parse_duration)]
    pub think: Option<f64>,
    /// Seed of the offset generators.
    #[arg(long, default_value_t = 0x10_1e45)]
    pub seed: u64,
    /// io_uring: submit all queued I/Os in one system call instead of one call per I/O.
    #[arg(long)]
    pub batch_submit: bool,
    /// Verify blocks read: auto (full on iolens scratch files, none elsewhere), none, header
    /// (magic, target id, offset, generation of each 512-byte unit) or full (also its CRC32C).
    #[arg(long, value_enum, default_value = "auto")]
    pub verify: crate::verify::VerifyMode,
    /// On corrupt data: stop at the first corrupt block, or continue and report them all.
    /// Either way the run exits with status 3.
    #[arg(long, value_enum, default_value = "stop")]
    pub on_corruption: crate::verify::OnCorruption,
    /// Print the plan and exit without doing any I/O.
    #[arg(long)]
    pub explain: bool,
}

impl RunArgs {
    /// The workload spec these arguments describe (target size resolved later).
    pub fn to_spec(&self) -> WorkloadSpec {
        WorkloadSpec {
            pattern: self.pattern,
            block_size: self.bs,
            target: self.t.target.display().to_string(),
            target_size: self.t.size.unwrap_or(crate::target::DEFAULT_SCRATCH_SIZE),
            region_offset: self.offset,
            region_size: self.working_set.unwrap_or(0),
            sessions: self.sessions,
            qd: self.qd,
            engine: self.engine,
            direct: !self.t.buffered,
            sync: self.sync,
            read_pct: self.read_pct.unwrap_or(100),
            duration_s: match (self.duration, self.ios) {
                (None, None) => Some(10.0),
                (d, _) => d,
            },
            io_count: self.ios,
            warmup_s: self.warmup,
            interval_s: self.interval,
            distribution: self.dist,
            rate_iops: self.rate,
            think_us: self.think.map(|t| t * 1e6),
            seed: self.seed,
            batch_submit: self.batch_submit,
            verify: self.verify,
            on_corruption: self.on_corruption,
        }
    }
}

/// Parse arguments and run the chosen subcommand; returns the process exit code.
pub fn main_with(args: Vec<std::ffi::OsString>) -> Result<ExitCode> {
    let cli = match Cli::try_parse_from(args.clone()) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return Ok(ExitCode::from(code));
        }
    };
    let cmdline: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().to_string())
        .collect();
    match cli.command {
        Command::Run(a) => cmd_run(&a, cmdline),
        Command::Calibrate(a) => crate::calibrate::cmd_calibrate(&a, cmdline),
        Command::Verify(a) => crate::verify::cmd_verify(&a, cmdline),
        Command::Db(a) => crate::db::main(a, &cmdline),
        Command::Trace(a) => crate::sources::run_trace(&a, cmdline),
        Command::Ingest(a) => crate::sources::run_ingest(&a, cmdline),
        Command::GenTrace(a) => crate::sources::oracle_trace::run_gen_trace(&a),
        Command::Show(a) => crate::render::show(&a),
        Command::Report(a) => crate::render::report(&a),
        Command::Compare(a) => crate::render::compare(&a),
        Command::Export(a) => crate::render::export(&a),
        Command::DevSynth(a) => crate::render::synth::main(&a),
    }
}

fn cmd_run(a: &RunArgs, cmdline: Vec<String>) -> Result<ExitCode> {
    use crate::results::{Kind, Results};
    use crate::target::{PrepareOptions, Target};
    crate::interrupt::install();
    let mut spec = a.to_spec();
    if a.pattern == Pattern::Randrw && a.read_pct.is_none() {
        anyhow::bail!("--pattern randrw needs --read-pct (e.g. --read-pct 80)");
    }
    // Validate everything that does not depend on the target before touching it.
    let Some(region_end) = spec.region_offset.checked_add(spec.working_set()) else {
        anyhow::bail!(
            "--offset {} plus --working-set {} is beyond any target's size",
            spec.region_offset,
            spec.working_set()
        );
    };
    let provisional = WorkloadSpec {
        target_size: spec.target_size.max(region_end),
        ..spec.clone()
    };
    provisional.validate()?;
    let progress = !a.t.no_progress && crate::progress::wanted();
    let prep = PrepareOptions {
        size: a.t.size,
        disposable: a.t.disposable_target.clone(),
        writes: a.pattern.writes() && a.engine != EngineKind::Null,
        progress,
        refill: a.t.refill,
    };
    if a.explain {
        // The same checks as a real run, without creating or writing anything.
        spec.target_size = Target::check(&a.t.target, &prep)?;
        spec.validate()?;
        crate::outln!("Plan: {}", spec.explain());
        return Ok(ExitCode::SUCCESS);
    }
    // A results file that cannot be written must fail now, not after the measurement.
    crate::results::Destination::checked(a.t.json.as_deref())?;
    let target = Target::prepare(&a.t.target, &prep, crate::interrupt::flag())?;
    spec.target_size = target.data_size;
    spec.validate()?;
    crate::outln!("Plan: {}", spec.explain());
    let mut res = Results::new(Kind::Run, cmdline);
    res.environment = crate::sys::environment();
    res.environment.target = Some(crate::sys::target_info(
        &target.path,
        target.kind.name(),
        target.data_size,
    ));
    let r = crate::run::execute(
        &spec,
        &target,
        &crate::run::RunOptions {
            name: spec.label(),
            phase: "run".into(),
            progress,
            progress_prefix: String::new(),
            interrupt: crate::interrupt::flag(),
        },
    )?;
    let style = crate::render::TermStyle::resolve(crate::render::ColorChoice::Never, None);
    crate::out!("{}", crate::render::brief::run_summary(&r, &style));
    res.runs.push(r);
    finish(&res, a.t.json.as_deref())
}

/// Write the results file when asked, then choose the exit code: 3 when a run read corrupt
/// data, 128 + the signal (130 Ctrl-C, 143 SIGTERM) when a signal ended the work early, 0
/// otherwise.
pub fn finish(res: &crate::results::Results, json: Option<&std::path::Path>) -> Result<ExitCode> {
    if let Some(p) = json {
        let dest = crate::results::Destination::new(p);
        crate::results::write_results(res, &dest)?;
        match dest {
            crate::results::Destination::Stdout => {
                crate::outln!("Results written to standard output")
            }
            crate::results::Destination::File(_) => crate::outln!(
                "Results written to {0}; see them with `iolens show {0}` or `iolens report {0} -o report.html`",
                p.display()
            ),
        }
    }
    let interrupted = res.runs.iter().any(|r| r.interrupted) || crate::interrupt::interrupted();
    Ok(if res.runs.iter().any(|r| r.found_corruption()) {
        eprintln!("iolens: CORRUPT DATA was read; see the corruption report above");
        ExitCode::from(crate::verify::EXIT_CORRUPTION)
    } else if interrupted {
        ExitCode::from(crate::interrupt::exit_code())
    } else {
        ExitCode::SUCCESS
    })
}
