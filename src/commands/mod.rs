//! The command layer: one file per subcommand. Each turns its command-line arguments (the only
//! clap types in the crate) into the domain options of a producer or renderer, calls it, and —
//! when it produced results — ends through the one [`finish`]: write the results file, say
//! where, choose the exit code.
//!
//! Options that mean the same in every command are spelled once, here: `-q/--quiet` (no text
//! for people on standard output: no plan, no progress, no summary; errors and warnings still go
//! to stderr) and `-v/--verbose` (also report, on stderr at the end, what the command itself
//! cost: wall-clock time, CPU time and peak memory) and `--width N` (fit the text for people to N
//! columns instead of the terminal's width or `$COLUMNS`).

pub mod calibrate;
pub mod compare;
pub mod completions;
pub mod db;
pub mod dev_synth;
pub mod export;
pub mod gen_trace;
pub mod ingest;
pub mod launch;
pub mod man;
pub mod merge;
mod metrics;
pub mod plan;
pub mod profile;
pub mod replay;
pub mod report;
pub mod run;
pub mod show;
pub mod trace;
mod values;
pub mod verify;
pub mod watch;

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::output::{Holds, Output, Plan, RESULTS_RESERVE};
use crate::results::Results;

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
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Commands that measure or read evidence print nothing for people on standard output (no
    /// plan, progress or summary); errors and warnings still go to stderr, and the results file
    /// is still written. (`show`, `compare`, `completions` and `man` print what they are for.)
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Also report, on stderr at the end, what iolens itself cost: wall-clock time, user and
    /// system CPU time, peak resident memory.
    #[arg(short, long, global = true, conflicts_with = "quiet")]
    pub(crate) verbose: bool,
    /// Fit the text for people (summaries, tables, progress) to this many columns (40 to 400;
    /// default: the terminal's width, else $COLUMNS, else 100). Tables abbreviate their columns
    /// and prose breaks between words: no line is wider.
    #[arg(long, global = true, value_name = "COLUMNS",
          value_parser = clap::value_parser!(u16).range(40..=400))]
    pub width: Option<u16>,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one workload on a target and report its full latency distribution.
    Run(run::RunArgs),
    /// The honest CALIBRATE_IO: load curve, max IOPS at a latency target, MB/s, tiers,
    /// knee, CPU and queueing verdicts. With no arguments it creates its own scratch file.
    Calibrate(calibrate::CalibrateArgs),
    /// Check every block of an iolens scratch file offline: checksum, address, target id.
    /// Exits with 3 when corruption is found.
    Verify(verify::VerifyArgs),
    /// SQL-driven I/O through a real database cache (the SLOB method): setup, run, drop.
    Db(db::DbArgs),
    /// Read Oracle extended SQL trace files (event 10046) into latency distributions and a
    /// response-time profile.
    Trace(trace::TraceArgs),
    /// Read histogram snapshots and latency logs (event histograms, bcc/bpftrace, fio, hlog…).
    Ingest(ingest::IngestArgs),
    /// Flame graphs of running processes: stacks sampled on CPU and, with --off-cpu, where
    /// they block (I/O wait, other sleep, waiting for a CPU), annotated with database layers.
    Profile(profile::ProfileArgs),
    /// Write a synthetic 10046 trace (benchmark input).
    #[command(hide = true)]
    GenTrace(gen_trace::GenTraceArgs),
    /// Plan LUNs, queue depths and sessions for an IOPS goal at a p99 from measured load
    /// curves (a calibration, or runs at several LUN counts); --verify runs the plan.
    Plan(plan::PlanArgs),
    /// Replay recorded I/O (Oracle 10046 traces, biosnoop output) on a target, each session
    /// on its own thread on the recorded schedule: recorded beside replayed latency, and the
    /// replay's own fidelity (issue-time error, span, IOPS per interval, order).
    Replay(replay::ReplayArgs),
    /// Show a results file in the terminal: summary, histograms, latency heatmaps.
    Show(show::ShowArgs),
    /// Write a self-contained HTML report of a results file.
    Report(report::ReportArgs),
    /// Compare two or more results files (terminal, or HTML with -o).
    Compare(compare::CompareArgs),
    /// Export per-interval data: CSV and/or HdrHistogram interval log.
    Export(export::ExportArgs),
    /// Merge the results of many ranks (one per host, from Slurm, MPI, Kubernetes or ssh)
    /// exactly: histograms summed interval by interval on a common wall-clock grid (also
    /// the watches of several hosts).
    Merge(merge::MergeArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(completions::CompletionsArgs),
    /// Print the manual page (roff) to stdout: `iolens man | man -l -`.
    Man,
    /// Watch live processes with BPF: I/O syscall, block-layer and CPU run-queue latency, and
    /// where their I/O time went (needs root or CAP_BPF + CAP_PERFMON).
    Watch(watch::WatchArgs),
    /// Write a synthetic results file (tests, demos, benchmarks).
    #[command(name = "dev-synth", hide = true)]
    DevSynth(dev_synth::SynthArgs),
}

/// What every command is told besides its own arguments.
#[derive(Clone, Debug)]
pub(crate) struct Context {
    /// The command line as given (stored in the results; `db` redacts passwords).
    pub cmdline: Vec<String>,
    /// `-q/--quiet`.
    pub quiet: bool,
    /// `-v/--verbose`.
    pub(crate) verbose: bool,
    /// `--width`.
    pub width: Option<usize>,
}

impl Context {
    /// Whether to draw progress: never when quiet or asked not to, otherwise when stderr is
    /// a terminal.
    pub(crate) fn progress(&self, no_progress: bool) -> bool {
        !self.quiet && !no_progress && crate::progress::wanted()
    }

    /// The style of a command's closing summary: no colour, fitted to `--width` (else the
    /// terminal's width, `$COLUMNS`, 100).
    pub(crate) fn brief_style(&self) -> crate::render::TermStyle {
        crate::render::TermStyle::resolve(crate::render::ColorChoice::Never, self.width)
    }
}

/// Parse a command line without running it: `Err` with clap's message when it is refused.
/// The in-process fuzzer's way into every value parser (durations, sizes, counts, ranks,
/// templates); not a stable interface.
#[doc(hidden)]
pub fn parse_only(args: &[String]) -> std::result::Result<(), String> {
    Cli::try_parse_from(args)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Every `(subcommand path, --long option)` that takes a value, for the fuzzer (see
/// [`parse_only`]); nested subcommands are written with spaces (`db run`).
#[doc(hidden)]
pub fn value_options() -> Vec<(String, String)> {
    use clap::CommandFactory as _;
    fn walk(c: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
        for a in c.get_arguments() {
            let takes = a.get_action().takes_values();
            if let (Some(long), true) = (a.get_long(), takes) {
                out.push((path.to_string(), format!("--{long}")));
            }
        }
        for sub in c.get_subcommands() {
            let p = if path.is_empty() {
                sub.get_name().to_string()
            } else {
                format!("{path} {}", sub.get_name())
            };
            walk(sub, &p, out);
        }
    }
    let mut out = Vec::new();
    let mut root = Cli::command();
    root.build();
    walk(&root, "", &mut out);
    out.retain(|(p, _)| !p.is_empty());
    out
}

/// Parse arguments and run the chosen subcommand; returns the process exit code.
pub fn main_with(args: Vec<std::ffi::OsString>) -> Result<ExitCode> {
    let cli = match Cli::try_parse_from(args.clone()) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                crate::exit::ERROR
            } else {
                crate::exit::SUCCESS
            };
            let _ = e.print();
            return Ok(ExitCode::from(code));
        }
    };
    let cx = Context {
        cmdline: args
            .iter()
            .map(|a| a.to_string_lossy().to_string())
            .collect(),
        quiet: cli.quiet,
        verbose: cli.verbose,
        width: cli.width.map(usize::from),
    };
    if cx.quiet {
        crate::out::silence();
    }
    if cx.width.is_some() {
        // Without --width the text is fitted to the terminal (or $COLUMNS), found on first use.
        crate::out::set_width(cx.width);
    }
    let started = std::time::Instant::now();
    let code = match cli.command {
        Command::Run(a) => run::main(&a, &cx),
        Command::Calibrate(a) => calibrate::main(&a, &cx),
        Command::Verify(a) => verify::main(&a, &cx),
        Command::Db(a) => db::main(a, &cx),
        Command::Trace(a) => trace::main(&a, &cx),
        Command::Ingest(a) => ingest::main(&a, &cx),
        Command::Profile(a) => profile::main(&a, &cx),
        Command::GenTrace(a) => gen_trace::main(&a),
        Command::Plan(a) => plan::main(&a, &cx),
        Command::Replay(a) => replay::main(&a, &cx),
        Command::Show(a) => show::main(&a, &cx),
        Command::Report(a) => report::main(&a),
        Command::Compare(a) => compare::main(&a, &cx),
        Command::Export(a) => export::main(&a),
        Command::Merge(a) => merge::main(&a, &cx),
        Command::Completions(a) => completions::main(&a),
        Command::Man => man::main(),
        Command::DevSynth(a) => dev_synth::main(&a),
        Command::Watch(a) => watch::main(&a, &cx),
    };
    if cx.verbose {
        let (user, sys) = crate::sys::rusage_self();
        crate::out::note(&format!(
            "cost: {:.2} s wall, {:.2} s user + {:.2} s system CPU, peak RSS {}",
            started.elapsed().as_secs_f64(),
            user,
            sys,
            crate::sys::peak_rss().unwrap_or_else(|| "unknown".into())
        ));
    }
    code
}

/// The `--json` of a command, checked against the rules of [`crate::output`] and against the
/// command's inputs and targets (`plan`), its space reserved: called before any work, so a
/// results file that cannot be written fails at once instead of losing what was measured.
pub(crate) fn results_output(
    plan: &mut Plan,
    json: Option<&Path>,
    reserve: u64,
) -> Result<Option<Output>> {
    json.map(|p| plan.output("--json", p, Holds::Results, reserve.max(RESULTS_RESERVE)))
        .transpose()
}

/// The reading of `trace` and `ingest` ([`crate::interrupt::reading`]): a signal while they
/// read ends them at once, the temp file of `json` removed; after the reading a signal ends
/// them as every command, the results of what was read written.
pub(crate) fn reading(json: Option<&Output>) -> crate::interrupt::Reading {
    crate::interrupt::set_writes_results(json.is_some());
    crate::interrupt::reading(json.and_then(|o| o.temp()).into_iter().collect())
}

/// The ending of `trace` and `ingest`, which read evidence others wrote: analyse it, apply the
/// checks every loader (`show`, `report`, `compare`, `export`) applies so that no document they
/// would refuse is written, print the summary (text for people never fails the command, see
/// `crate::out`), then [`finish`].
pub(crate) fn finish_evidence(
    results: Results,
    json: Option<Output>,
    cx: &Context,
) -> Result<ExitCode> {
    let results = complete(results);
    results.validate()?;
    let style = cx.brief_style();
    crate::out!(
        "{}",
        crate::render::brief_trace::sources_summary(&results, &style)
    );
    if cx.quiet {
        // The summary above says the warnings; `-q` silences it, never the warnings.
        for run in &results.runs {
            for w in &run.warnings {
                crate::out::warn(&format!("{}: {w}", run.name));
            }
        }
        for w in &results.warnings {
            crate::out::warn(w);
        }
    }
    finish(&results, json)
}

/// A command's results with their analysis attached: made only by [`complete`], and the only
/// thing [`finish`] writes, so every results file carries the analysis decided once, the same
/// way, where the results are finished.
pub(crate) struct Complete(Results);

impl std::ops::Deref for Complete {
    type Target = Results;
    fn deref(&self) -> &Results {
        &self.0
    }
}

/// The one place a command's results are finished: every name made one line of plain text
/// ([`Results::clean_labels`]: names come from files and processes others wrote) and the
/// analysis ([`crate::analysis::analyse`]) decided and attached. Summaries printed before the
/// results are written read the analysis from here.
pub(crate) fn complete(mut res: Results) -> Complete {
    res.clean_labels();
    res.analysis = Some(crate::analysis::analyse(&res));
    Complete(res)
}

/// The one ending of every command that produces results: write the results file when asked
/// (`-` is standard output) and say where, then choose the exit code: 3 when corrupt data was
/// read, 128 + the signal (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP) when a signal ended the work
/// early, 0 otherwise.
pub(crate) fn finish(res: &Complete, json: Option<Output>) -> Result<ExitCode> {
    if let Some(out) = json {
        let stdout = out.is_stdout();
        let p = out.path().to_path_buf();
        crate::results::write_results(res, out)?;
        if stdout {
            crate::outln!("Results written to standard output");
        } else {
            crate::outln!(
                "Results written to {0}; see them with `iolens show {0}` or `iolens report {0} -o report.html`",
                p.display()
            );
        }
    }
    let interrupted = res.runs.iter().any(|r| r.interrupted) || crate::interrupt::interrupted();
    let corruption = res.runs.iter().any(|r| r.found_corruption());
    if corruption {
        crate::out::note("CORRUPT DATA was read; see the corruption report above");
    }
    Ok(ExitCode::from(crate::exit::of_finished(
        corruption,
        interrupted,
    )))
}
