//! `iolens calibrate`: the honest CALIBRATE_IO, built from fully described `run` steps and the
//! analysis module.
//!
//! Flow: [`Plan::new`] turns the options into phases and a per-step time that fits the budget
//! (or a clear error when it cannot); [`calibrate`] prepares the target once, then runs each
//! phase's steps with [`crate::run::execute`]. The random-read phase ramps sessions 1, 2, 4, …
//! and stops on the latency target, on an IOPS plateau or at the ceiling, then refines between
//! the last good and first bad step ([`Ramp`], pure and tested on its own). Every step becomes a
//! `RunResult` in the results; the curve, headline figures, analysis (modes, knee, USL, Little's
//! law, verdicts) and the time spent between steps go into `Results::calibration`.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;

use crate::analysis::ramp::{Ramp, SeqRamp, FALL_FACTOR};
use crate::analysis::verdicts::calibration as verdicts;
use crate::analysis::Verdict;
use crate::results::analysis::{
    CacheStep, CalibrationFindings, CommitStep, Precondition, RampBest, SustainStep,
};
pub use crate::results::analysis::{Phase, PhasePlan, Plan, StopReason};
use crate::results::{Calibration, CurvePoint, Kind, Results, RunResult};
use crate::run::{execute_on, RunContext, RunOptions};
use crate::target::Target;
use crate::units::{fmt_bytes, fmt_ns};
use crate::workload::{EngineKind, Pattern, SyncMode, WorkloadSpec};

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Randread => "randread",
            Phase::Seqread => "seqread",
            Phase::Seqread1 => "seqread1",
            Phase::Writes => "writes",
            Phase::Cache => "cache",
        }
    }
    /// Share of the budget relative to other phases.
    fn weight(self) -> f64 {
        match self {
            Phase::Randread => 5.0,
            Phase::Seqread => 2.0,
            Phase::Seqread1 => 1.0,
            Phase::Writes => 2.5,
            Phase::Cache => 1.5,
        }
    }
}

/// What a calibration measures and within which limits (`iolens calibrate` builds it from its
/// arguments). Durations in seconds.
#[derive(Clone, Debug)]
pub struct CalibrateOptions {
    /// Total time budget for all steps.
    pub budget: f64,
    /// Latency target of single-block reads at `percentile`.
    pub(crate) max_latency: f64,
    /// Percentile the latency target applies to.
    pub percentile: f64,
    /// Block size of the single-block reads.
    pub bs: u64,
    /// Block size of the large sequential reads.
    pub(crate) large_bs: u64,
    /// Session ceiling of the random-read ramp.
    pub(crate) max_sessions: u32,
    /// Queue-depth ceiling of the sequential-read ramps.
    pub(crate) max_qd: u32,
    /// Streams of the many-streams sequential phase.
    pub streams: u32,
    /// IOPS growth below which the ramp is called a plateau, percent.
    pub(crate) plateau_pct: f64,
    /// Phases to run; `None`: randread, seqread, seqread1.
    pub phases: Option<Vec<Phase>>,
    /// Add the write phase.
    pub writes: bool,
    /// Add the cache probe.
    pub cache_probe: bool,
    /// Block verification of the reads.
    pub verify: crate::stamp::VerifyMode,
    /// O_DIRECT (else through the page cache).
    pub direct: bool,
    /// Transparent huge pages for the I/O buffers.
    pub huge_pages: crate::workload::HugePages,
    /// `--sustain`: seconds to hold the chosen random-read (and random-write) point after its
    /// ramp (0: not held).
    pub sustain: f64,
    /// `--precondition`: bound on the SNIA-style preconditioning before the phases, seconds
    /// (0: none).
    pub precondition: f64,
    /// `--stripe-unit`: the allocation unit of a calibration over several targets.
    pub stripe_unit: u64,
}

/// Shortest step that still measures something meaningful.
pub const MIN_STEP_S: f64 = 1.0;
/// Refinement steps after the latency target is crossed.
pub const REFINEMENTS: u32 = 2;
/// Queue depths of the sequential ramps, and the session counts of a fixed schedule's
/// ramps: 1, 2, 4, … up to `max_qd` (and `max_qd` itself).
fn qd_ramp(max_qd: u32) -> Vec<u32> {
    let mut v = vec![1u32];
    while *v.last().expect("non-empty") < max_qd {
        let n = (v.last().expect("non-empty") * 2).min(max_qd);
        v.push(n);
    }
    v
}
/// Time left in every scheduled step's slot to set the next step up (open the target, start
/// the sessions) before its warm-up begins, seconds (at most a fifth of the step).
pub const SCHEDULE_GAP_S: f64 = 0.25;
/// Commit-shaped write sizes.
pub const COMMIT_SIZES: [u64; 3] = [512, 8192, 128 << 10];
/// Working-set shares of the cache probe.
pub const CACHE_SHARES: [f64; 3] = [0.01, 0.10, 1.0];

impl Plan {
    /// Build and check the plan.
    pub fn new(a: &CalibrateOptions) -> Result<Plan> {
        if !(a.max_latency.is_finite() && a.max_latency > 0.0) {
            bail!("--max-latency must be greater than zero (e.g. 5ms)");
        }
        if !(a.percentile > 0.0 && a.percentile < 100.0) {
            bail!(
                "--percentile must be between 0 and 100 (exclusive), e.g. 99 or 99.9; got {}",
                a.percentile
            );
        }
        if a.max_sessions == 0 || a.max_sessions > 4096 {
            bail!("--max-sessions must be between 1 and 4096");
        }
        if a.max_qd == 0 || a.max_qd > 4096 {
            bail!("--max-qd must be between 1 and 4096");
        }
        if a.streams == 0 || a.streams > 256 {
            bail!("--streams must be between 1 and 256");
        }
        if !(a.plateau_pct >= 0.0 && a.plateau_pct < 100.0) {
            bail!("--plateau-pct must be between 0 and 100");
        }
        if !(a.budget.is_finite() && a.budget > 0.0) {
            bail!("--budget must be positive (e.g. 2m)");
        }
        if !(a.precondition.is_finite() && a.precondition >= 0.0) {
            bail!("--precondition must be a positive bound on its time (e.g. 10m)");
        }
        if a.precondition > 0.0 && a.precondition < PRECONDITION_MIN_S {
            bail!(
                "--precondition {}s leaves no time for the fill and {} rounds of at least {} s; \
                 give at least {}s",
                a.precondition,
                crate::analysis::regimes::SNIA_ROUNDS,
                MIN_STEP_S,
                PRECONDITION_MIN_S
            );
        }
        let mut phases = a
            .phases
            .clone()
            .unwrap_or_else(|| vec![Phase::Randread, Phase::Seqread, Phase::Seqread1]);
        if a.writes && !phases.contains(&Phase::Writes) {
            phases.push(Phase::Writes);
        }
        if a.cache_probe && !phases.contains(&Phase::Cache) {
            phases.push(Phase::Cache);
        }
        let mut seen = std::collections::HashSet::new();
        phases.retain(|p| seen.insert(*p));
        if phases.is_empty() {
            bail!("no phases to run");
        }
        let total_w: f64 = phases.iter().map(|p| p.weight()).sum();
        let qds = qd_ramp(a.max_qd).len() as u32;
        let write_ramp = Ramp::max_steps(a.max_sessions.min(16), 0);
        let mut out = Vec::new();
        for p in &phases {
            let share = a.budget * p.weight() / total_w;
            let (steps, desc) = match p {
                Phase::Randread => (
                    Ramp::max_steps(a.max_sessions, REFINEMENTS),
                    format!(
                        "{} random reads, sync engine, sessions 1, 2, 4, … ≤ {}; stop when p{} > {} \
                         or when IOPS falls > {} % below the best step, or grows < {} % over it two \
                         steps in a row, or at the ceiling; then up to {} refinement steps",
                        fmt_bytes(a.bs),
                        a.max_sessions,
                        a.percentile,
                        fmt_ns(a.max_latency * 1e9),
                        crate::units::sig3(FALL_FACTOR * a.plateau_pct),
                        a.plateau_pct,
                        REFINEMENTS
                    ),
                ),
                Phase::Seqread => (
                    qds,
                    format!(
                        "{} sequential reads, io_uring, {} streams, queue depth 1 … {} per stream; \
                         stop when MB/s falls > {} % below the best step, or grows < {} % over \
                         it two steps in a row",
                        fmt_bytes(a.large_bs),
                        a.streams,
                        a.max_qd,
                        crate::units::sig3(FALL_FACTOR * a.plateau_pct),
                        a.plateau_pct
                    ),
                ),
                Phase::Seqread1 => (
                    qds,
                    format!(
                        "{} sequential reads, io_uring, one stream, queue depth 1 … {}",
                        fmt_bytes(a.large_bs),
                        a.max_qd
                    ),
                ),
                Phase::Writes => (
                    COMMIT_SIZES.len() as u32 + write_ramp,
                    format!(
                        "commit-shaped writes: sequential, O_DSYNC, one session, sizes {}; then \
                         {} random writes (O_DIRECT), sessions 1, 2, 4, … ≤ {}",
                        COMMIT_SIZES
                            .iter()
                            .map(|s| fmt_bytes(*s))
                            .collect::<Vec<_>>()
                            .join(", "),
                        fmt_bytes(a.bs),
                        a.max_sessions.min(16)
                    ),
                ),
                Phase::Cache => (
                    CACHE_SHARES.len() as u32,
                    format!(
                        "{} random reads at the best session count over working sets of {} of \
                         the target (storage-side cache tiers show as new latency modes)",
                        fmt_bytes(a.bs),
                        CACHE_SHARES
                            .iter()
                            .map(|s| format!("{} %", s * 100.0))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
            };
            let step_s = share / steps as f64;
            out.push(PhasePlan {
                phase: *p,
                max_steps: steps,
                step_s,
                warmup_s: (step_s * 0.1).min(1.0),
                description: desc,
            });
        }
        // The smallest budget that gives every phase's steps at least MIN_STEP_S.
        let min_budget = out
            .iter()
            .map(|p| MIN_STEP_S * p.max_steps as f64 * total_w / p.phase.weight())
            .fold(0.0, f64::max);
        if let Some(p) = out.iter().find(|p| p.step_s < MIN_STEP_S) {
            bail!(
                "--budget {} is too small for the plan: phase {} may take {} steps, which leaves \
                 {:.2} s per step (at least {} s needed). Raise --budget to at least {:.0}s, lower \
                 --max-sessions/--max-qd, or choose fewer --phases",
                humantime::format_duration(std::time::Duration::from_secs_f64(a.budget)),
                p.phase.name(),
                p.max_steps,
                p.step_s,
                MIN_STEP_S,
                min_budget.ceil()
            );
        }
        Ok(Plan {
            budget_s: a.budget,
            phases: out,
            bs: a.bs,
            large_bs: a.large_bs,
            max_sessions: a.max_sessions,
            max_qd: a.max_qd,
            streams: a.streams,
            percentile: a.percentile,
            max_latency_ns: (a.max_latency * 1e9) as u64,
            plateau: a.plateau_pct / 100.0,
            refinements: REFINEMENTS,
            direct: a.direct,
            small_pages: a.huge_pages == crate::workload::HugePages::Off,
            sustain_s: a.sustain,
            precondition_s: a.precondition,
            stripe_unit: a.stripe_unit,
        })
    }

    /// The plan in words (`--explain`).
    pub fn explain(&self, target: &str) -> String {
        let mut s = format!(
            "Calibration plan: target {target}, budget {}, {}, I/O buffers on {}\n",
            humantime::format_duration(std::time::Duration::from_secs(self.budget_s as u64)),
            if self.direct { "O_DIRECT" } else { "buffered" },
            if self.small_pages {
                "small pages"
            } else {
                "huge pages where the kernel gives them"
            }
        );
        if self.precondition_s > 0.0 {
            s += &format!(
                "  0. precondition (SNIA-style, beyond the budget, at most {}): {} sequential \
                 writes over the whole target, up to {} times ({} of a pass per step), then \
                 rounds of {} random writes ({} sessions × queue depth {}, io_uring) until the \
                 last {} rounds' IOPS are steady by both SNIA PTS criteria (range ≤ 20 % of \
                 the average, best-fit slope excursion ≤ 10 %), at most {} rounds\n",
                humantime::format_duration(std::time::Duration::from_secs(
                    self.precondition_s as u64
                )),
                fmt_bytes(FILL_BS),
                FILL_PASSES,
                if FILL_CHUNKS == 1 {
                    "all".to_string()
                } else {
                    format!("1/{FILL_CHUNKS}")
                },
                fmt_bytes(self.bs),
                ROUND_SESSIONS,
                ROUND_QD,
                crate::analysis::regimes::SNIA_ROUNDS,
                MAX_ROUNDS
            );
        }
        for (i, p) in self.phases.iter().enumerate() {
            s += &format!(
                "  {}. {}: {}\n     up to {} steps of {:.1} s ({:.1} s warm-up excluded from results)\n",
                i + 1,
                p.phase.name(),
                p.description,
                p.max_steps,
                p.step_s,
                p.warmup_s
            );
        }
        s
    }

    /// The plan of phase `p`, when it runs.
    pub fn phase(&self, p: Phase) -> Option<&PhasePlan> {
        self.phases.iter().find(|x| x.phase == p)
    }
}

/// Latency at a percentile (0..100) of a step's merged I/O histogram, ns (infinite when the
/// step completed nothing, so an empty step never meets a latency target).
fn latency_at(h: &Histogram<u64>, pct: f64) -> f64 {
    if h.is_empty() {
        f64::INFINITY
    } else {
        h.value_at_quantile(pct / 100.0) as f64
    }
}

/// The load-curve point of step `idx` (a `RunResult` at `sessions` × `qd`).
pub fn curve_point(idx: usize, r: &RunResult, sessions: u32, qd: u32) -> CurvePoint {
    let h = r
        .merged_io_hist()
        .unwrap_or_else(|_| crate::histogram::new_histogram());
    curve_point_of(idx, r, &h, sessions, qd)
}

/// The curve point of a step whose merged I/O histogram `h` the caller already decoded.
fn curve_point_of(
    idx: usize,
    r: &RunResult,
    h: &Histogram<u64>,
    sessions: u32,
    qd: u32,
) -> CurvePoint {
    let nz = !h.is_empty();
    let q = |x: f64| if nz { h.value_at_quantile(x) } else { 0 };
    CurvePoint {
        run: idx,
        sessions,
        qd,
        iops: r.iops(),
        mb_per_s: r.mb_per_s(),
        p50_ns: q(0.5),
        p99_ns: q(0.99),
        p999_ns: q(0.999),
        mean_ns: if nz { h.mean() } else { 0.0 },
        cpu_us_per_io: r.cpu.as_ref().map(|c| c.us_per_io).unwrap_or(0.0),
        runq_us_per_io: r.cpu.as_ref().map(|c| c.runq_us_per_io).unwrap_or(0.0),
        device_await_us: r.device.as_ref().map(|d| d.read_await_us).unwrap_or(0.0),
        device_in_flight: r
            .block
            .as_ref()
            .filter(|_| r.rates_known())
            .map(|b| crate::analysis::verdicts::in_device(&b.ops, r.duration_s)),
    }
}

/// Block size of the preconditioning fill (SNIA's workload-independent preconditioning writes
/// 128 KiB sequentially).
pub const FILL_BS: u64 = 128 << 10;
/// Passes of the fill over the target (SNIA: twice the capacity).
pub const FILL_PASSES: u32 = 2;
/// Steps per fill pass: the time bound is checked between them.
pub const FILL_CHUNKS: u64 = 4;
/// Most write rounds (SNIA PTS: 25).
pub const MAX_ROUNDS: u32 = 25;
/// Longest round, seconds (SNIA PTS rounds are about a minute).
pub const MAX_ROUND_S: f64 = 60.0;
/// Sessions and queue depth of the write rounds (SNIA's OIO of 32: 2 threads × 16).
pub const ROUND_SESSIONS: u32 = 2;
pub const ROUND_QD: u32 = 16;
/// Smallest `--precondition` bound: a fill and the SNIA window of rounds of at least a second.
pub const PRECONDITION_MIN_S: f64 = 10.0;

/// `--precondition`: fill the target (up to [`FILL_PASSES`] sequential passes of [`FILL_BS`]
/// writes, in [`FILL_CHUNKS`] steps each, while the fill has used at most half the bound), then
/// rounds of random writes until the last [`crate::analysis::regimes::SNIA_ROUNDS`] rounds'
/// IOPS are steady by both SNIA criteria, [`MAX_ROUNDS`] rounds were run, or the bound is
/// spent. Round length: what is left of the bound over [`MAX_ROUNDS`], between
/// [`MIN_STEP_S`] and [`MAX_ROUND_S`].
fn precondition(st: &mut Stepper, plan: &Plan) -> Result<Precondition> {
    use crate::analysis::regimes::snia_steady;
    let bound_s = plan.precondition_s;
    let started = Instant::now();
    let data = st.base.target_size;
    let bs = FILL_BS.min(data / plan.bs.max(1) * plan.bs).max(plan.bs);
    let blocks = data / bs;
    let mut pc = Precondition {
        target_bytes: data,
        bound_s,
        ..Default::default()
    };
    let phase = "precondition";
    let chunks = FILL_CHUNKS.min(blocks).max(1);
    'fill: for pass in 0..FILL_PASSES {
        for c in 0..chunks {
            if st.interrupted() || started.elapsed().as_secs_f64() >= bound_s / 2.0 {
                break 'fill;
            }
            let first = blocks * c / chunks;
            let n = blocks * (c + 1) / chunks - first;
            let spec = WorkloadSpec {
                pattern: Pattern::Write,
                block_size: bs,
                sessions: 1,
                qd: 8,
                engine: EngineKind::Uring,
                region_offset: first * bs,
                region_size: n * bs,
                io_count: Some(n),
                duration_s: None,
                warmup_s: 0.0,
                interval_s: 1.0,
                ..st.spec()
            };
            let label = format!(
                "precondition fill pass {}/{FILL_PASSES} part {}/{chunks}",
                pass + 1,
                c + 1
            );
            let i = st.run_as(phase, spec, label)?;
            pc.fill_bytes += st.results[i].ops.iter().map(|o| o.bytes).sum::<u64>();
            pc.fill_runs.push(i);
        }
    }
    pc.fill_s = started.elapsed().as_secs_f64();
    let left = bound_s - pc.fill_s;
    pc.round_s = (left / MAX_ROUNDS as f64).clamp(MIN_STEP_S, MAX_ROUND_S);
    let mut starts = Vec::new();
    pc.ended = "round-limit".into();
    while (pc.rounds.len() as u32) < MAX_ROUNDS {
        if st.interrupted() {
            pc.ended = "interrupted".into();
            break;
        }
        if started.elapsed().as_secs_f64() + pc.round_s > bound_s * 1.02 {
            pc.ended = "time-bound".into();
            break;
        }
        let spec = WorkloadSpec {
            pattern: Pattern::Randwrite,
            block_size: plan.bs,
            sessions: ROUND_SESSIONS,
            qd: ROUND_QD,
            engine: EngineKind::Uring,
            duration_s: Some(pc.round_s),
            io_count: None,
            warmup_s: 0.0,
            interval_s: if pc.round_s >= 5.0 {
                1.0
            } else {
                pc.round_s / 5.0
            },
            ..st.spec()
        };
        let label = format!(
            "precondition round {} randwrite {}",
            pc.rounds.len() + 1,
            fmt_bytes(plan.bs)
        );
        starts.push(started.elapsed().as_secs_f64());
        let i = st.run_as(phase, spec, label)?;
        pc.rounds.push(i);
        pc.round_iops.push(st.results[i].iops());
        pc.steady = snia_steady(&pc.round_iops, &starts);
        if pc.steady.as_ref().is_some_and(|s| s.steady) {
            pc.reached = true;
            pc.ended = "steady".into();
            break;
        }
    }
    pc.sentence = precondition_sentence(&pc);
    Ok(pc)
}

/// One line for people about a preconditioning.
pub fn precondition_sentence(pc: &Precondition) -> String {
    let fill = format!(
        "filled {} of {} ({:.2} passes) in {:.0} s",
        fmt_bytes(pc.fill_bytes),
        fmt_bytes(pc.target_bytes),
        pc.fill_bytes as f64 / pc.target_bytes.max(1) as f64,
        pc.fill_s
    );
    let rounds = pc.rounds.len();
    let test = pc.steady.as_ref().map_or(String::new(), |s| {
        format!(
            " (last {} rounds: {} IOPS, range {:.1} % of the average, steady ≤ 20 %; slope \
             {:.1} %, steady ≤ 10 %)",
            s.rounds,
            crate::units::fmt_rate(s.average),
            s.range_pct,
            s.slope_pct
        )
    });
    let verdict = if pc.reached {
        format!(
            "steady state reached after {rounds} rounds of {:.0} s{test}",
            pc.round_s
        )
    } else {
        let why = match pc.ended.as_str() {
            "time-bound" => format!(
                "the {} bound was reached",
                humantime::format_duration(std::time::Duration::from_secs(pc.bound_s as u64))
            ),
            "interrupted" => "it was interrupted".to_string(),
            _ => format!("the {MAX_ROUNDS}-round limit was reached"),
        };
        format!(
            "NOT steady after {rounds} rounds of {:.0} s: {why}{test}; the figures below may \
             move as the device settles",
            pc.round_s
        )
    };
    format!("Preconditioned (SNIA-style): {fill}; {verdict}")
}

/// Runs steps, keeping the wall-clock accounting of time spent between them.
struct Stepper<'a> {
    targets: &'a [Target],
    /// The command's context, handed to each step (its block watch traces each step's own
    /// I/O; a scheduled step gets its own start).
    ctx: RunContext<'a>,
    base: WorkloadSpec,
    results: Vec<RunResult>,
    step_wall_s: f64,
    corrupt: bool,
    deadline: Instant,
    step_no: u32,
    /// With `--start-at`: the wall-clock start of the next step's measurement in the fixed
    /// schedule (its set-up and warm-up come before).
    slot: Option<std::time::SystemTime>,
}

impl Stepper<'_> {
    /// Let the slot of a scheduled step that is not run pass (the schedule stays the same on
    /// every rank).
    fn skip_slot(&mut self, pp: &PhasePlan) {
        if let Some(t) = self.slot.as_mut() {
            *t += std::time::Duration::from_secs_f64(pp.step_s);
        }
    }

    /// True when the calibration must stop: Ctrl-C, or a step read corrupt data.
    fn interrupted(&self) -> bool {
        self.corrupt
            || self
                .ctx
                .interrupt
                .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Run `spec` as given (its own duration or I/O count) as a step of `phase`; returns its
    /// index in `results`.
    fn run_as(&mut self, phase: &str, spec: WorkloadSpec, label: String) -> Result<usize> {
        self.step_no += 1;
        let r = execute_on(
            &spec,
            self.targets,
            &RunOptions {
                name: label.clone(),
                phase: phase.into(),
                progress_prefix: format!("calibrate {phase} step {}", self.step_no),
                ctx: self.ctx.starting_at(None),
            },
        )
        .with_context(|| format!("calibration step `{label}`"))?;
        self.step_wall_s += spec.warmup_s + r.duration_s;
        self.corrupt |= r.found_corruption();
        self.results.push(r);
        Ok(self.results.len() - 1)
    }

    /// Run one step; returns its index in `results`.
    fn step(&mut self, pp: &PhasePlan, spec: WorkloadSpec, label: String) -> Result<usize> {
        self.step_no += 1;
        // Never run past the budget: shorten the last step if needed.
        let left = self
            .deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        let mut step_s = pp.step_s.min(left.max(MIN_STEP_S));
        // A scheduled step takes its whole slot: a set-up gap, the warm-up, the measurement.
        // (The slot's time is its measurement's start; the set-up gap and the warm-up come
        // before it, at the end of the slot before.)
        let mut start_at = None;
        if let Some(t) = self.slot {
            step_s = pp.step_s - SCHEDULE_GAP_S.min(pp.step_s * 0.2);
            start_at = Some(t);
            self.skip_slot(pp);
        }
        let warm = pp.warmup_s.min(step_s / 4.0);
        let measured = step_s - warm;
        let spec = WorkloadSpec {
            duration_s: Some(measured),
            io_count: None,
            warmup_s: warm,
            interval_s: if measured >= 5.0 { 1.0 } else { measured / 5.0 },
            ..spec
        };
        let r = execute_on(
            &spec,
            self.targets,
            &RunOptions {
                name: label.clone(),
                phase: pp.phase.name().into(),
                progress_prefix: format!(
                    "calibrate {} step {} ({:.0}s left)",
                    pp.phase.name(),
                    self.step_no,
                    self.deadline
                        .saturating_duration_since(Instant::now())
                        .as_secs_f64()
                ),
                ctx: self.ctx.starting_at(start_at),
            },
        )
        .with_context(|| format!("calibration step `{label}`"))?;
        // Time inside steps is measuring (warm-up included); the rest is overhead.
        self.step_wall_s += warm + r.duration_s;
        self.corrupt |= r.found_corruption();
        self.results.push(r);
        Ok(self.results.len() - 1)
    }

    fn spec(&self) -> WorkloadSpec {
        self.base.clone()
    }

    /// `--sustain`: hold a ramp's chosen point (`sessions` of single-block `pattern` I/O) for
    /// the plan's sustain time, beyond the budget.
    fn hold(
        &mut self,
        pp: &PhasePlan,
        plan: &Plan,
        pattern: Pattern,
        sessions: u32,
    ) -> Result<SustainStep> {
        self.deadline += std::time::Duration::from_secs_f64(plan.sustain_s);
        let held = PhasePlan {
            step_s: plan.sustain_s,
            warmup_s: 0.0,
            ..pp.clone()
        };
        let spec = WorkloadSpec {
            pattern,
            block_size: plan.bs,
            sessions,
            engine: EngineKind::Sync,
            ..self.spec()
        };
        let label = format!(
            "sustain {} {} sessions={sessions}",
            pattern.name(),
            fmt_bytes(plan.bs)
        );
        let run = self.step(&held, spec, label)?;
        Ok(SustainStep { run, sessions })
    }
}

/// What one calibration measures: its plan, on these prepared targets (each opened once;
/// every step re-opens it by inode, never by path), verifying blocks as `verify` says;
/// `cmdline` is stored in the results.
pub struct CalibrateSpec<'a> {
    pub plan: &'a Plan,
    pub verify: crate::stamp::VerifyMode,
    pub targets: &'a [Target],
    pub cmdline: Vec<String>,
}

/// Run the calibration `spec` in the command's context `ctx` (with `--start-at`, a fixed
/// schedule from `ctx.start_at`); returns the results document.
pub fn calibrate(spec: CalibrateSpec<'_>, ctx: RunContext<'_>) -> Result<Results> {
    let CalibrateSpec {
        plan,
        verify,
        targets,
        cmdline,
    } = spec;
    let start_at = ctx.start_at;
    let plan = plan.clone();
    let Some(target) = targets.first() else {
        bail!("internal: a calibration without a target");
    };
    crate::out!(
        "{}",
        plan.explain(&crate::stripe::describe(
            targets.iter().map(|t| t.path.as_path()),
            plan.stripe_unit
        ))
    );
    let scheduled = start_at.is_some();
    if let Some(t) = start_at {
        crate::outln!(
            "Fixed schedule (--start-at): every step of every phase at a fixed level (1, 2, 4, … \
             up to each ceiling), one slot of its phase's step time each; the first measurement \
             starts at {}",
            crate::placement::fmt_time(t)
        );
    }
    let started = Instant::now();
    // Several targets: every step striped over them in --stripe-unit allocation units, its
    // working set laid out alike on each, within the smallest.
    let base = WorkloadSpec {
        target: target.path.display().to_string(),
        target_size: targets.iter().map(|t| t.data_size).min().unwrap_or(0),
        targets: Target::stripe_names(targets),
        stripe_unit: plan.stripe_unit,
        direct: plan.direct,
        huge_pages: if plan.small_pages {
            crate::workload::HugePages::Off
        } else {
            crate::workload::HugePages::Try
        },
        verify,
        ..Default::default()
    };
    let mut st = Stepper {
        targets,
        ctx,
        base,
        results: Vec::new(),
        step_wall_s: 0.0,
        corrupt: false,
        // A fixed schedule ends when its last slot does (waiting for the start included).
        deadline: started
            + std::time::Duration::from_secs_f64(
                plan.budget_s * 1.02
                    + start_at
                        .and_then(|t| t.duration_since(std::time::SystemTime::now()).ok())
                        .map_or(0.0, |d| d.as_secs_f64())
                    + if scheduled { plan.budget_s } else { 0.0 },
            ),
        step_no: 0,
        slot: start_at,
    };
    let mut f = CalibrationFindings::default();
    if plan.precondition_s > 0.0 {
        if scheduled {
            bail!("--precondition cannot be combined with --start-at (a fixed schedule)");
        }
        let pc = precondition(&mut st, &plan)?;
        crate::outln!("{}", pc.sentence);
        // The budget starts after the preconditioning.
        st.deadline = Instant::now() + std::time::Duration::from_secs_f64(plan.budget_s * 1.02);
        f.precondition = Some(pc);
    }
    // The procedure's own notes (skipped steps, verdicts at the best step, contradictions).
    let mut notes: Vec<Verdict> = Vec::new();
    let mut curve: Vec<CurvePoint> = Vec::new();
    let mut max_iops_point = None;

    for pp in plan.phases.clone() {
        if st.interrupted() {
            break;
        }
        match pp.phase {
            Phase::Randread => {
                let mut ramp = Ramp::new(
                    plan.max_sessions,
                    plan.max_latency_ns as f64,
                    plan.plateau,
                    plan.refinements,
                );
                let mut fixed = scheduled.then(|| qd_ramp(plan.max_sessions).into_iter());
                while let Some(n) = match fixed.as_mut() {
                    Some(it) => it.next(),
                    None => ramp.next_sessions(),
                } {
                    if st.interrupted() || Instant::now() >= st.deadline {
                        ramp.interrupt();
                        break;
                    }
                    let spec = WorkloadSpec {
                        pattern: Pattern::Randread,
                        block_size: plan.bs,
                        sessions: n,
                        engine: EngineKind::Sync,
                        ..st.spec()
                    };
                    let label = format!("randread {} sessions={n}", fmt_bytes(plan.bs));
                    let i = st.step(&pp, spec, label)?;
                    // One decode per step serves the ramp, the curve and the modes.
                    let r = &st.results[i];
                    let h = r.merged_io_hist()?;
                    ramp.record(n, r.iops(), latency_at(&h, plan.percentile));
                    curve.push(curve_point_of(i, r, &h, n, 1));
                }
                curve.sort_by_key(|c| c.sessions);
                f.stop_reason = ramp.stop;
                if scheduled && ramp.stop != Some(StopReason::Interrupted) {
                    // A fixed schedule measures every level up to the ceiling.
                    f.stop_reason = Some(StopReason::Ceiling);
                }
                if let Some((n, _)) = ramp.best() {
                    max_iops_point = curve.iter().position(|c| c.sessions == n);
                    // --sustain: hold the chosen point, beyond the budget, to show it holds
                    // (or where it stops holding: its regimes say so).
                    if plan.sustain_s > 0.0 && !st.interrupted() {
                        f.sustain = Some(st.hold(&pp, &plan, Pattern::Randread, n)?);
                    }
                }
            }
            Phase::Seqread | Phase::Seqread1 => {
                let streams = if pp.phase == Phase::Seqread {
                    plan.streams
                } else {
                    1
                };
                let mut ramp = SeqRamp::new(plan.plateau);
                for qd in qd_ramp(plan.max_qd) {
                    if st.interrupted() || Instant::now() >= st.deadline {
                        break;
                    }
                    let spec = WorkloadSpec {
                        pattern: Pattern::Read,
                        block_size: plan.large_bs,
                        sessions: streams,
                        qd,
                        engine: EngineKind::Uring,
                        ..st.spec()
                    };
                    let label = format!(
                        "read {} streams={streams} qd={qd}",
                        fmt_bytes(plan.large_bs)
                    );
                    let i = st.step(&pp, spec, label)?;
                    if !ramp.record(qd, st.results[i].mb_per_s()) && !scheduled {
                        break;
                    }
                }
                let best = ramp.best().map(ramp_best);
                if pp.phase == Phase::Seqread {
                    f.seq_best = best;
                } else {
                    f.seq1_best = best;
                }
            }
            Phase::Writes => {
                let lbs = targets
                    .iter()
                    .map(|t| crate::sys::logical_block_size(&t.path) as u64)
                    .max()
                    .unwrap_or(512);
                for size in COMMIT_SIZES {
                    if st.interrupted() || Instant::now() >= st.deadline {
                        break;
                    }
                    if plan.direct && size % lbs != 0 {
                        st.skip_slot(&pp);
                        notes.push(verdicts::step_skipped(size, lbs));
                        continue;
                    }
                    let spec = WorkloadSpec {
                        pattern: Pattern::Write,
                        block_size: size,
                        sessions: 1,
                        sync: SyncMode::Dsync,
                        engine: EngineKind::Sync,
                        ..st.spec()
                    };
                    let i = st.step(
                        &pp,
                        spec,
                        format!("commit write {} O_DSYNC", fmt_bytes(size)),
                    )?;
                    f.commit.push(CommitStep {
                        size_bytes: size,
                        run: i,
                    });
                }
                let mut ramp = Ramp::new(
                    plan.max_sessions.min(16),
                    plan.max_latency_ns as f64,
                    plan.plateau,
                    0,
                );
                let mut fixed = scheduled.then(|| qd_ramp(plan.max_sessions.min(16)).into_iter());
                while let Some(n) = match fixed.as_mut() {
                    Some(it) => it.next(),
                    None => ramp.next_sessions(),
                } {
                    if st.interrupted() || Instant::now() >= st.deadline {
                        break;
                    }
                    let spec = WorkloadSpec {
                        pattern: Pattern::Randwrite,
                        block_size: plan.bs,
                        sessions: n,
                        engine: EngineKind::Sync,
                        ..st.spec()
                    };
                    let i = st.step(
                        &pp,
                        spec,
                        format!("randwrite {} sessions={n}", fmt_bytes(plan.bs)),
                    )?;
                    let r = &st.results[i];
                    let h = r.merged_io_hist()?;
                    ramp.record(n, r.iops(), latency_at(&h, plan.percentile));
                    f.write_ramp.push(curve_point_of(i, r, &h, n, 1));
                }
                f.write_best = ramp.best().map(ramp_best);
                // --sustain: the chosen write point held too (a write cache that fills shows
                // here, in bytes written).
                if let Some((n, _)) = ramp.best() {
                    if plan.sustain_s > 0.0 && !st.interrupted() {
                        f.sustain_write = Some(st.hold(&pp, &plan, Pattern::Randwrite, n)?);
                    }
                }
            }
            Phase::Cache => {
                // A fixed schedule cannot depend on what this rank measured.
                let sessions = match max_iops_point {
                    Some(p) if !scheduled => curve[p].sessions,
                    _ => plan.max_sessions.min(4),
                };
                for share in CACHE_SHARES {
                    if st.interrupted() || Instant::now() >= st.deadline {
                        break;
                    }
                    // (On each target, over several: at least one allocation unit.)
                    let data = st.base.target_size;
                    let least = if targets.len() > 1 {
                        plan.stripe_unit
                    } else {
                        plan.bs * 16
                    };
                    let ws = ((data as f64 * share) as u64 / plan.bs * plan.bs).max(least);
                    let spec = WorkloadSpec {
                        pattern: Pattern::Randread,
                        block_size: plan.bs,
                        sessions,
                        region_size: ws.min(data),
                        engine: EngineKind::Sync,
                        ..st.spec()
                    };
                    let i = st.step(
                        &pp,
                        spec,
                        format!(
                            "randread {} over {} ({} %)",
                            fmt_bytes(plan.bs),
                            fmt_bytes(ws),
                            share * 100.0
                        ),
                    )?;
                    f.cache.push(CacheStep { share, run: i });
                }
            }
        }
    }
    let total_s = started.elapsed().as_secs_f64();
    let overhead_s = (total_s - st.step_wall_s).max(0.0);

    let tinfo = crate::sys::target_info(&target.path, target.kind.into(), target.data_size);
    notes.extend(verdicts::chosen_step(
        &st.results,
        &curve,
        max_iops_point,
        Some(&tinfo),
    ));
    let pair = |b: Option<RampBest>| b.map(|b| (b.level, b.value));
    let contradicted = verdicts::contradictions(
        pair(f.seq_best),
        pair(f.seq1_best),
        max_iops_point.map(|p| curve[p].p99_ns as f64),
        plan.max_latency_ns as f64,
        plan.percentile,
    );
    notes.extend(contradicted.iter().cloned());

    let mut res = Results::new(Kind::Calibrate, cmdline);
    res.environment = crate::sys::environment();
    res.environment.target = Some(tinfo);
    if st.corrupt {
        for r in &st.results {
            for w in r
                .warnings
                .iter()
                .filter(|w| w.to_lowercase().contains("corrupt"))
            {
                res.warnings.push(format!("{}: {w}", r.name));
            }
        }
        res.warnings.push(
            "calibration stopped: a step read corrupt data (see its corruption report)".into(),
        );
    }
    res.warnings
        .extend(contradicted.into_iter().map(|v| v.message));
    let interrupted = crate::interrupt::flag().load(std::sync::atomic::Ordering::Relaxed);
    if interrupted {
        res.warnings
            .push("calibration interrupted: only the steps measured so far are reported".into());
    }
    // (A fixed schedule waits for its start and for each slot: that is not overhead.)
    if overhead_s > 0.02 * plan.budget_s && !scheduled {
        res.warnings.push(format!(
            "{:.2} s ({:.1} % of the budget) went to starting and stopping steps",
            overhead_s,
            overhead_s / plan.budget_s * 100.0
        ));
    }
    res.runs = st.results;
    f.plan = Some(plan.clone());
    res.calibration = Some(Calibration {
        percentile: plan.percentile,
        max_latency_ns: plan.max_latency_ns,
        max_iops: max_iops_point.map(|p| curve[p].iops),
        max_iops_point,
        curve,
        max_mbps: f.seq_best.map(|b| b.value),
        max_pmbps: f.seq1_best.map(|b| b.value),
        findings: f,
        overhead_s,
        budget_s: plan.budget_s,
        verdicts: notes,
    });
    Ok(res)
}

fn ramp_best((level, value): (u32, f64)) -> RampBest {
    RampBest { level, value }
}
