//! `iolens run`: one workload on a target, its full latency distribution.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;

use super::{finish, Context};
use crate::commands::values::duration as parse_duration;
use crate::results::{Kind, Results};
use crate::stamp::{OnCorruption, VerifyMode};
use crate::target::{PrepareOptions, Target};
use crate::units::{parse_latency, parse_size};
use crate::workload::StripeMode;
use crate::workload::{Distribution, EngineKind, HugePages, Pattern, SyncMode, WorkloadSpec};

/// Options shared by `run` and `calibrate` that select and protect the target.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// Target: a scratch file iolens creates (and marks) if missing, an existing file or a
    /// block device (read-only unless named with --disposable-target). Give it more than once
    /// to spread the I/O over several targets (see --stripe); every one must pass the checks
    /// before any I/O, and none may be named twice.
    #[arg(long, default_value = "iolens-scratch.dat")]
    pub target: Vec<PathBuf>,
    /// Data size of the target (a new scratch file is created this large; default 1G).
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// Allow writes to this existing file or device, whose contents you declare disposable.
    /// Must name the same file or device as a --target; give it once per such target.
    #[arg(long, value_name = "PATH")]
    pub(crate) disposable_target: Vec<PathBuf>,
    /// Several targets: `unit` stripes the address space over them in --stripe-unit
    /// allocation units (unit k on target k mod N), as ASM stripes a disk group;
    /// `per-session` gives each session one target (session i on target i mod N).
    #[arg(long, value_enum, default_value = "unit")]
    pub stripe: StripeMode,
    /// Allocation unit of --stripe unit: a whole number of blocks (--bs).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    pub stripe_unit: u64,
    /// Rewrite the scratch file's fill: complete an interrupted fill from a read-only command,
    /// or rewrite a truncated, damaged or old-format scratch file from the start, only where
    /// its generation journal proves iolens made that very file (a header alone proves
    /// nothing). Without it iolens never repairs a scratch file: damage is reported as
    /// corruption (exit 3) and the file is left as found.
    #[arg(long)]
    pub refill: bool,
    /// Grow an existing scratch file to --size: fill the new part and extend its generation
    /// journal over it. Without it a --size larger than the file is refused.
    #[arg(long)]
    pub grow: bool,
    /// Use the page cache (default: O_DIRECT).
    #[arg(long)]
    pub buffered: bool,
    /// The I/O buffers' pages: `try` puts every session's buffers in one pool on huge pages,
    /// as a database's buffer cache on huge pages (each block is then one contiguous DMA
    /// segment): reserved hugetlb pages when enough are free, else transparent huge pages where
    /// the kernel gives them; `off` keeps them on small pages.
    #[arg(long, value_enum, default_value = "try")]
    pub huge_pages: HugePages,
    /// Do not draw progress (progress is only drawn when stderr is a terminal, or with -v).
    #[arg(long)]
    pub(crate) no_progress: bool,
    /// Write the complete results (spec, environment, every histogram) to this JSON file
    /// (a regular file or a new path; `-` writes them to standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the results as a Prometheus text exposition here, once at the end (classic
    /// latency histograms per run and op, counters, verdicts), for node_exporter's textfile
    /// collector or `iolens ingest --format prometheus`.
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// Also trace, with BPF, the block requests this load makes on the target's disk: host
    /// queue (submission → issue) and device service time (issue → completion) per interval,
    /// compared with the application's latency at p50 and p99. Over several targets each
    /// target's disk is traced on its own (targets sharing a disk must be files whose blocks can
    /// be mapped). Needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF.
    #[arg(long)]
    pub watch: bool,
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
    /// Think time between a session's I/Os, with its unit, e.g. 100us (a bare number is
    /// refused).
    #[arg(long, value_parser = parse_latency)]
    pub(crate) think: Option<f64>,
    /// Seed of the offset generators.
    #[arg(long, default_value_t = 0x10_1e45)]
    pub seed: u64,
    /// io_uring: submit all queued I/Os in one system call instead of one call per I/O.
    #[arg(long)]
    pub batch_submit: bool,
    /// Verify blocks read: auto (full on iolens scratch files, none elsewhere), none, header
    /// (magic, target id, offset, generation of each 512-byte unit) or full (also its CRC32C).
    #[arg(long, value_enum, default_value = "auto")]
    pub verify: VerifyMode,
    /// On corrupt data: stop at the first corrupt block, or continue and report them all.
    /// Either way the run exits with status 3.
    #[arg(long, value_enum, default_value = "stop")]
    pub on_corruption: OnCorruption,
    /// Print the plan and exit without doing any I/O.
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub(crate) launch: super::launch::LaunchArgs,
}

impl RunArgs {
    /// The workload spec these arguments describe (target size resolved later).
    pub(crate) fn to_spec(&self) -> WorkloadSpec {
        WorkloadSpec {
            pattern: self.pattern,
            block_size: self.bs,
            target: self.t.target[0].display().to_string(),
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
            huge_pages: self.t.huge_pages,
            targets: if self.t.target.len() > 1 {
                self.t
                    .target
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect()
            } else {
                Vec::new()
            },
            stripe: self.t.stripe,
            stripe_unit: self.t.stripe_unit,
        }
    }
}

impl TargetArgs {
    /// These options with the rank templates ({rank}, {host}, {ranks}) of --target,
    /// --disposable-target and --json expanded.
    pub(crate) fn expanded(&self, l: &super::launch::Launch) -> Result<TargetArgs> {
        let mut t = self.clone();
        for p in t.target.iter_mut().chain(t.disposable_target.iter_mut()) {
            *p = l.rank.expand("--target", p)?;
        }
        l.expand_opt("--json", &mut t.json)?;
        Ok(t)
    }

    /// The block-layer watch of this load's own I/O over its targets, with `--watch` (none
    /// without).
    pub(crate) fn own_watch(
        &self,
        targets: &[Target],
    ) -> Result<Option<crate::watch::own::OwnWatch>> {
        if !self.watch {
            return Ok(None);
        }
        let paths: Vec<&Path> = targets.iter().map(|t| t.path.as_path()).collect();
        crate::watch::own::OwnWatch::start_all(&paths).map(Some)
    }

    /// How to open (and, for a new scratch file, create) `target`, one of the targets.
    pub(crate) fn prepare_options_for(
        &self,
        target: &Path,
        writes: bool,
        progress: bool,
    ) -> PrepareOptions {
        PrepareOptions {
            size: self.size,
            // The --disposable-target that names this very file or device, if any.
            disposable: self
                .disposable_target
                .iter()
                .find(|d| crate::target::same_file(d, target))
                .or(self
                    .disposable_target
                    .first()
                    .filter(|_| self.target.len() == 1))
                .cloned(),
            writes,
            progress,
            refill: self.refill,
            grow: self.grow,
        }
    }

    /// Every check [`Target::prepare`] makes, on every target, and with `--watch` that each
    /// target's disk can be traced on its own, without creating or writing anything; refuses
    /// a target named twice. Returns each target's data size.
    pub(crate) fn check_all(&self, writes: bool) -> Result<Vec<u64>> {
        crate::target::refuse_repeats(&self.target)?;
        let sizes = self
            .target
            .iter()
            .map(|t| {
                self.about(
                    t,
                    Target::check(t, &self.prepare_options_for(t, writes, false)),
                )
            })
            .collect::<Result<Vec<u64>>>()?;
        if self.watch {
            // Each target's disk traced on its own: two on one disk that cannot be told apart
            // are refused here, before any target is made.
            let paths: Vec<&Path> = self.target.iter().map(|p| p.as_path()).collect();
            crate::watch::own::check_disks(&paths)?;
        }
        Ok(sizes)
    }

    /// Prepare every target (after [`TargetArgs::check_all`] passed for all of them, so that
    /// one failing target refuses the run before any target is created or written).
    pub(crate) fn prepare_all(&self, writes: bool, progress: bool) -> Result<Vec<Target>> {
        self.check_all(writes)?;
        let mut out: Vec<Target> = Vec::with_capacity(self.target.len());
        for t in &self.target {
            let prep = self.prepare_options_for(t, writes, progress);
            let p = self.about(t, Target::prepare(t, &prep, crate::interrupt::flag()))?;
            // Opened now, by descriptor: the same inode or device reached by two paths.
            if let Some(o) = out.iter().find(|o| o.same_as(&p)) {
                anyhow::bail!(
                    "{} and {} are the same {}: name each target once",
                    o.path.display(),
                    p.path.display(),
                    p.kind.name()
                );
            }
            out.push(p);
        }
        Ok(out)
    }

    /// On a run over several targets, an error about target `t` says which target and that
    /// the run was refused whole.
    fn about<T>(&self, t: &Path, r: Result<T>) -> Result<T> {
        if self.target.len() > 1 {
            r.with_context(|| {
                format!(
                    "{} (one of {} targets) failed its checks, so the whole run is refused: \
                     no target was written",
                    t.display(),
                    self.target.len()
                )
            })
        } else {
            r
        }
    }
}

/// `iolens run`.
pub(crate) fn main(a: &RunArgs, cx: &Context) -> Result<ExitCode> {
    crate::interrupt::install();
    let launch = a.launch.resolve()?;
    let a = &RunArgs {
        t: a.t.expanded(&launch)?,
        ..a.clone()
    };
    crate::interrupt::set_writes_results(a.t.json.is_some());
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
    let progress = cx.progress(a.t.no_progress);
    let writes = a.pattern.writes() && a.engine != EngineKind::Null;
    if a.explain {
        // The same checks as a real run, without creating or writing anything.
        spec.target_size = a.t.check_all(writes)?.into_iter().min().unwrap_or(0);
        spec.validate()?;
        crate::outln!("Plan: {}", spec.explain());
        return Ok(ExitCode::SUCCESS);
    }
    // A results file that cannot be written must fail now, not after the measurement.
    // The target is an input: it is never the results file, by name or identity.
    let mut files = crate::output::Plan::new();
    files.inputs(a.t.target.iter().map(|p| p.as_path()));
    let json = super::results_output(
        &mut files,
        a.t.json.as_deref(),
        crate::output::results_estimate(crate::output::intervals(
            spec.duration_s.unwrap_or(0.0) + spec.warmup_s,
            spec.interval_s,
        )),
    )?;
    let metrics = super::metrics::metrics_output(&mut files, a.t.metrics.as_deref())?;
    if a.t.watch {
        // Refused before any I/O when BPF cannot be used here.
        crate::watch::own::check()?;
    }
    let targets = a.t.prepare_all(writes, progress)?;
    let target = &targets[0];
    let block_watch = a.t.own_watch(&targets)?;
    // Several targets: the working set is laid out alike on each, within the smallest.
    spec.target_size = targets.iter().map(|t| t.data_size).min().unwrap_or(0);
    spec.validate()?;
    crate::outln!("Plan: {}", spec.explain());
    let mut res = Results::new(Kind::Run, cx.cmdline.clone());
    res.environment = crate::sys::environment();
    res.environment.target = Some(crate::sys::target_info(
        &target.path,
        target.kind.into(),
        target.data_size,
    ));
    let r = crate::run::execute_on(
        &spec,
        &targets,
        &crate::run::RunOptions {
            name: spec.label(),
            phase: "run".into(),
            progress_prefix: String::new(),
            ctx: crate::run::RunContext {
                block_watch: block_watch.as_ref(),
                ..crate::run::RunContext::new(progress).starting_at(launch.start_at)
            },
        },
    )?;
    let style = cx.brief_style();
    crate::out!("{}", crate::render::brief::run_summary(&r, &style));
    res.runs.push(r);
    launch.record(&mut res);
    let res = super::complete(res);
    let code = finish(&res, json)?;
    super::metrics::write_metrics(&res, metrics)?;
    Ok(code)
}
