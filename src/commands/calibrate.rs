//! `iolens calibrate`: the honest CALIBRATE_IO.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::run::TargetArgs;
use super::{finish, Context};
use crate::calibrate::{CalibrateOptions, Phase, Plan};
use crate::commands::values::duration as parse_duration;
use crate::results::Results;
use crate::stamp::VerifyMode;
use crate::units::{parse_latency, parse_size};

/// `iolens calibrate` options.
#[derive(Args, Debug, Clone)]
pub struct CalibrateArgs {
    #[command(flatten)]
    pub t: TargetArgs,
    /// Total time budget for all steps (e.g. 2m, 90s).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub budget: f64,
    /// Latency target for single-block reads at the chosen percentile, with its unit (e.g.
    /// 5ms, 500us; a bare number is refused).
    #[arg(long, default_value = "5ms", value_parser = parse_latency)]
    pub(crate) max_latency: f64,
    /// Percentile the latency target applies to (e.g. 99, 99.9, 50).
    #[arg(long, default_value_t = 99.0)]
    pub percentile: f64,
    /// Block size of the single-block reads (the database block size).
    #[arg(long, default_value = "8k", value_parser = parse_size)]
    pub bs: u64,
    /// Block size of the large sequential reads.
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    pub(crate) large_bs: u64,
    /// Session ceiling of the random-read ramp.
    #[arg(long, default_value_t = 64)]
    pub(crate) max_sessions: u32,
    /// Queue-depth ceiling of the sequential-read ramps.
    #[arg(long, default_value_t = 32)]
    pub(crate) max_qd: u32,
    /// Streams of the many-streams sequential phase (default: 4).
    #[arg(long, default_value_t = 4)]
    pub streams: u32,
    /// IOPS growth below which the ramp is called a plateau, percent: a ramp stops when two
    /// steps in a row grow less than this over the best step, or at once when a step falls
    /// more than twice this below it (past the peak).
    #[arg(long, default_value_t = 5.0)]
    pub(crate) plateau_pct: f64,
    /// Phases to run (comma-separated); default randread,seqread,seqread1.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub phases: Option<Vec<Phase>>,
    /// Add the write phase (commit-shaped O_DSYNC writes, random-write ramp): writes to the
    /// scratch file.
    #[arg(long)]
    pub writes: bool,
    /// Add the cache probe (random reads over 1 %, 10 %, 100 % of the target).
    #[arg(long)]
    pub cache_probe: bool,
    /// Verify blocks read: auto (full on iolens scratch files), none, header or full. A
    /// database checks its blocks too; `none` measures the storage path alone.
    #[arg(long, value_enum, default_value = "auto")]
    pub verify: VerifyMode,
    /// Hold the chosen random-read point this long after the ramp (e.g. 2m), beyond --budget,
    /// and the chosen random-write point after the write ramp (with the writes phase), and
    /// show whether each holds: a burst that ends, a write cache that fills (bytes written to
    /// the cliff), throttling, and the SNIA steady-state verdict of the held load.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub sustain: f64,
    /// Precondition the target first, SNIA-style, within this bound (default 10m when given
    /// without a value): write it sequentially (twice over while the fill has used at most
    /// half the bound), then rounds of random writes until the last 5 rounds' IOPS are steady
    /// by both SNIA PTS criteria (range ≤ 20 % of the average, best-fit slope excursion
    /// ≤ 10 %), at most 25 rounds. Says how many rounds ran and whether steady state was
    /// reached. Writes to the target: only an iolens scratch file (or a target named
    /// disposable); beyond --budget.
    #[arg(long, num_args = 0..=1, default_missing_value = "10m", value_parser = parse_duration)]
    pub precondition: Option<f64>,
    /// Print the whole plan and exit without doing any I/O.
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub(crate) launch: super::launch::LaunchArgs,
}

impl CalibrateArgs {
    /// The domain options these arguments describe.
    pub fn options(&self) -> CalibrateOptions {
        CalibrateOptions {
            budget: self.budget,
            max_latency: self.max_latency,
            percentile: self.percentile,
            bs: self.bs,
            large_bs: self.large_bs,
            max_sessions: self.max_sessions,
            max_qd: self.max_qd,
            streams: self.streams,
            plateau_pct: self.plateau_pct,
            phases: self.phases.clone(),
            writes: self.writes,
            cache_probe: self.cache_probe,
            verify: self.verify,
            direct: !self.t.buffered,
            huge_pages: self.t.huge_pages,
            sustain: self.sustain,
            precondition: self.precondition.unwrap_or(0.0),
            stripe_unit: self.t.stripe_unit,
        }
    }
}

/// `iolens calibrate`.
pub(crate) fn main(a: &CalibrateArgs, cx: &Context) -> Result<ExitCode> {
    let launch = a.launch.resolve()?;
    let a = &CalibrateArgs {
        t: a.t.expanded(&launch)?,
        ..a.clone()
    };
    let o = a.options();
    let plan = Plan::new(&o)?;
    let progress = cx.progress(a.t.no_progress);
    if plan.precondition_s > 0.0 && launch.start_at.is_some() {
        anyhow::bail!("--precondition cannot be combined with --start-at (a fixed schedule)");
    }
    let writes = plan.phase(Phase::Writes).is_some() || plan.precondition_s > 0.0;
    if a.t.target.len() > 1 && a.t.stripe == crate::workload::StripeMode::PerSession {
        anyhow::bail!(
            "calibrate stripes its steps over several targets in allocation units: its steps \
             of one session cannot give each target a session of its own (--stripe per-session \
             is for `run`)"
        );
    }
    if a.explain {
        // The same checks as a real run, without creating or writing anything.
        a.t.check_all(writes)?;
        crate::out!(
            "{}",
            plan.explain(&crate::stripe::describe(
                a.t.target.iter().map(|p| p.as_path()),
                a.t.stripe_unit
            ))
        );
        return Ok(ExitCode::SUCCESS);
    }
    crate::interrupt::install();
    // A results file that cannot be written must fail now, not after the calibration.
    crate::interrupt::set_writes_results(true);
    // Without --json the results still go to a file (a new, dated name in the working
    // directory), so that `show`, `report` and `compare` work right after the first command.
    // The name is claimed as a new path: a file that appears there meanwhile is never
    // replaced (the results are then kept beside it, under a name the error says).
    let dated = a.t.json.is_none().then(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        crate::results::dated_name(std::path::Path::new("."), "calibrate", now)
    });
    let mut files = crate::output::Plan::new();
    files.inputs(a.t.target.iter().map(|p| p.as_path()));
    let json = super::results_output(
        &mut files,
        a.t.json.as_deref().or(dated.as_deref()),
        crate::output::results_estimate(crate::output::intervals(
            plan.budget_s + a.sustain + plan.precondition_s,
            1.0,
        )),
    )?;
    let metrics = super::metrics::metrics_output(&mut files, a.t.metrics.as_deref())?;
    if let Some(p) = &dated {
        crate::outln!(
            "Results will be written to {} (--json FILE names another)",
            p.display()
        );
    }
    if a.t.watch {
        // Refused before any I/O when BPF cannot be used here.
        crate::watch::own::check()?;
    }
    let targets = a.t.prepare_all(writes, progress)?;
    let block_watch = a.t.own_watch(&targets)?;
    let mut res: Results = crate::calibrate::calibrate(
        crate::calibrate::CalibrateSpec {
            plan: &plan,
            verify: o.verify,
            targets: &targets,
            cmdline: cx.cmdline.clone(),
        },
        crate::run::RunContext {
            block_watch: block_watch.as_ref(),
            ..crate::run::RunContext::new(progress).starting_at(launch.start_at)
        },
    )?;
    launch.record(&mut res);
    let res = super::complete(res);
    let style = cx.brief_style();
    crate::out!("{}", crate::render::brief::calibrate_summary(&res, &style));
    let code = finish(&res, json)?;
    super::metrics::write_metrics(&res, metrics)?;
    Ok(code)
}
