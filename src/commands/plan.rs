//! `iolens plan`: LUNs, queue depth and sessions for an IOPS goal at a p99, from measured
//! load curves (decided in `analysis::plan`), and with `--verify` the plan's configuration run
//! beside its prediction.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;

use super::run::TargetArgs;
use super::{finish, Context};
use crate::analysis::plan::{self as decide, Input};
use crate::commands::values::duration as parse_duration;
use crate::results::plan::PlanGoal;
use crate::results::{Kind, Results};
use crate::units::parse_latency;
use crate::workload::{StripeMode, WorkloadSpec};

/// `iolens plan` options.
#[derive(Args, Debug, Clone)]
pub struct PlanArgs {
    /// Results files with a load curve: a calibration (with or without --watch), or runs at
    /// several session counts or LUN counts (`run --target a --target b …`).
    #[arg(required = true, value_name = "RESULTS")]
    pub files: Vec<PathBuf>,
    /// The goal: I/Os per second the database needs.
    #[arg(long)]
    pub iops: f64,
    /// The goal: the 99th percentile latency to stay under, with its unit (e.g. 1ms, 800us).
    #[arg(long, value_parser = parse_latency)]
    pub p99: f64,
    /// Hosts sharing the array's port (for the port-queue check).
    #[arg(long, default_value_t = 1)]
    pub hosts: u32,
    /// Paths (initiator ports) per host to each LUN (for the port-queue check).
    #[arg(long, default_value_t = 1)]
    pub paths: u32,
    /// The array port's queue (e.g. 2048): checked against port queue ÷ (initiators × LUNs).
    #[arg(long)]
    pub port_queue: Option<u32>,
    /// Plan for LUNs of this queue depth (the HBA's per-LUN depth, e.g. 30) instead of the
    /// depth measured (the measured service time is kept).
    #[arg(long)]
    pub lun_queue: Option<u32>,
    /// Run the plan's configuration (its LUN count of --target, its sessions) for
    /// --verify-duration and set the measured IOPS and p99 beside the predicted ones. Reads
    /// only; the targets follow `run`'s rules (scratch files iolens creates, or devices).
    #[arg(long)]
    pub verify: bool,
    /// How long the --verify run measures.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub verify_duration: f64,
    #[command(flatten)]
    pub t: TargetArgs,
}

/// `iolens plan`.
pub(crate) fn main(a: &PlanArgs, cx: &Context) -> Result<ExitCode> {
    if !(a.iops > 0.0 && a.iops.is_finite()) {
        anyhow::bail!("--iops must be a positive number of I/Os per second");
    }
    if a.p99 <= 0.0 {
        anyhow::bail!("--p99 must be a positive latency, e.g. 1ms");
    }
    if a.hosts == 0 || a.paths == 0 || a.lun_queue == Some(0) || a.port_queue == Some(0) {
        anyhow::bail!("--hosts, --paths, --lun-queue and --port-queue must be at least 1");
    }
    let mut read = Vec::new();
    for f in &a.files {
        read.push((
            f.display().to_string(),
            Results::read_file(f).with_context(|| format!("cannot read {}", f.display()))?,
        ));
    }
    let inputs: Vec<Input<'_>> = read
        .iter()
        .map(|(file, results)| Input {
            file: file.clone(),
            results,
        })
        .collect();
    let goal = PlanGoal {
        iops: a.iops,
        p99_ns: a.p99 * 1e9,
        hosts: a.hosts,
        paths: a.paths,
        port_queue: a.port_queue,
        lun_queue: a.lun_queue,
        stripe: match a.t.stripe {
            StripeMode::Unit => "unit".into(),
            StripeMode::PerSession => "per-session".into(),
        },
    };
    let mut plan = decide::plan(&inputs, &goal)?;
    let luns = plan.luns.value as usize;
    // The verify run's targets: the plan's LUN count of them.
    let targets_given: Vec<PathBuf> = a.t.target.iter().take(luns).cloned().collect();
    if a.verify && a.t.target.len() < luns {
        anyhow::bail!(
            "the plan needs {luns} LUNs: --verify needs {luns} --target (got {}); nothing was run",
            a.t.target.len()
        );
    }
    let json = super::results_output(
        crate::output::Plan::new().inputs(
            a.files
                .iter()
                .map(|p| p.as_path())
                .chain(targets_given.iter().map(|p| p.as_path())),
        ),
        a.t.json.as_deref(),
        crate::output::results_estimate(crate::output::intervals(a.verify_duration, 1.0)),
    )?;
    let mut res = Results::new(Kind::Plan, cx.cmdline.clone());
    res.environment = crate::sys::environment();
    if a.verify {
        crate::interrupt::install();
        crate::interrupt::set_writes_results(a.t.json.is_some());
        let t = TargetArgs {
            target: targets_given,
            ..a.t.clone()
        };
        let progress = cx.progress(a.t.no_progress);
        if t.watch {
            // Refused before any I/O when BPF cannot be used here.
            crate::watch::own::check()?;
        }
        let targets = t.prepare_all(false, progress)?;
        let block_watch = t.own_watch(&targets)?;
        // The measured curve's block size (the database's), else 8 KiB.
        let bs = read
            .iter()
            .find(|(f, _)| *f == plan.operating_point.file)
            .and_then(|(_, r)| r.runs.get(plan.operating_point.run))
            .and_then(|r| r.spec.as_ref())
            .and_then(|s| s.block_size)
            .unwrap_or(8192);
        let mut spec = WorkloadSpec {
            block_size: bs,
            target: targets[0].path.display().to_string(),
            sessions: plan.sessions.value as u32,
            duration_s: Some(a.verify_duration),
            targets: crate::target::Target::stripe_names(&targets),
            stripe: a.t.stripe,
            stripe_unit: a.t.stripe_unit,
            direct: !a.t.buffered,
            huge_pages: a.t.huge_pages,
            ..WorkloadSpec::default()
        };
        spec.target_size = targets.iter().map(|t| t.data_size).min().unwrap_or(0);
        spec.validate()?;
        crate::outln!("Verify: {}", spec.explain());
        res.environment.target = Some(crate::sys::target_info(
            &targets[0].path,
            targets[0].kind.into(),
            targets[0].data_size,
        ));
        let run = crate::run::execute_on(
            &spec,
            &targets,
            &crate::run::RunOptions {
                name: format!("plan verify: {}", spec.label()),
                phase: "verify".into(),
                progress_prefix: String::new(),
                ctx: crate::run::RunContext {
                    block_watch: block_watch.as_ref(),
                    ..crate::run::RunContext::new(progress)
                },
            },
        )?;
        plan.verify = Some(decide::verify(&plan, &run, res.runs.len()));
        res.runs.push(run);
    }
    res.plan = Some(plan);
    let res = super::complete(res);
    let style = cx.brief_style();
    crate::out!("{}", crate::render::plan::text(&res, &style));
    finish(&res, json)
}
