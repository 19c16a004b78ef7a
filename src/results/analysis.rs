//! The typed analysis stored in a results document ([`super::Results::analysis`]).
//!
//! These are plain data types: [`crate::analysis::analyse`] computes an [`Analysis`] from the
//! rest of a [`super::Results`], and every renderer (`show`, `report`, `compare`, the closing
//! summary of a command) reads it, so the numbers printed and the numbers a script gets with
//! `jq .analysis` are the same. The types live here, beside the model they describe, so that the
//! results model imports nothing above it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::CurvePoint;

/// Everything analysis found in a results document.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Analysis {
    /// One entry per run, in the order of `Results::runs`.
    #[serde(default)]
    pub runs: Vec<RunAnalysis>,
    /// Findings of a calibration (absent for other kinds of results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<CalibrationAnalysis>,
    /// The Method R response-time profile of a trace (absent unless a trace was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_profile: Option<TraceProfile>,
    /// Buffer-cache figures of database runs (one per run that reports logical reads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub db: Vec<DbFigures>,
    /// Where a watch's processes spent their I/O time (absent unless `iolens watch` made it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchAnalysis>,
    /// Functions and layers of a stack profile (absent unless the document has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_profile: Option<StackProfileAnalysis>,
}

/// Per-run analysis: latency modes of each op and the run's verdicts.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RunAnalysis {
    /// Latency modes of every op with a non-empty histogram, in the run's op order.
    pub modes: Vec<OpModes>,
    /// Verdicts about the run; a histogram that cannot be decoded adds a `bad-histogram` warning.
    pub verdicts: Vec<Verdict>,
    /// Regime changes in the per-interval series and the steady-state verdict (absent in files
    /// written before they were analysed, and for runs without per-interval series).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regimes: Option<RunRegimes>,
}

/// Regimes of a run's per-interval series: where the storage changed under the same load
/// (see `analysis::regimes`), and the SNIA PTS steady-state verdict of the last regime.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RunRegimes {
    /// The regimes in time order (one when nothing changed).
    pub regimes: Vec<Regime>,
    /// The changes between them (one fewer than the regimes).
    pub changes: Vec<RegimeChange>,
    /// SNIA PTS steady state over the last 5 intervals of the last regime (absent with fewer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<SteadyState>,
    /// One line for people, e.g. `4.0k IOPS for 41 s, then 1.0k sustained (…)`.
    pub sentence: String,
    /// Stretches of intervals in which the device did much more work than iolens asked of it
    /// (its own counters against ours): another process on the same device. Empty when none,
    /// and for runs without the device's per-interval counters (older files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neighbours: Vec<NeighbourSpan>,
}

/// A stretch of intervals in which another process used the run's device (see
/// `analysis::regimes::neighbours`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct NeighbourSpan {
    /// Start and end, seconds from the start of measurement (whole intervals).
    pub start_s: f64,
    pub end_s: f64,
    /// Bytes the device moved in the span, all processes.
    pub device_bytes: u64,
    /// Bytes iolens moved in the span.
    pub own_bytes: u64,
    /// I/Os the device completed in the span, all processes.
    pub device_ops: u64,
    /// I/Os iolens completed in the span.
    pub own_ops: u64,
}

/// One regime: a stretch of intervals at one level. Its figures leave out intervals that mix
/// two regimes.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Regime {
    /// Start and end, seconds from the start of measurement.
    pub start_s: f64,
    pub end_s: f64,
    pub iops: f64,
    pub mb_per_s: f64,
    /// Median of the per-interval p99 latencies (absent when not computed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<u64>,
    /// The stretch its rates are measured over, seconds from the start of measurement: the
    /// regime without the intervals that mix it with a neighbouring one (0 and 0 in files
    /// analysed before it was recorded).
    #[serde(default)]
    pub rate_from_s: f64,
    #[serde(default)]
    pub rate_to_s: f64,
}

/// A change between two regimes, with the evidence for its cause.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RegimeChange {
    /// When it happened, seconds from the start of measurement (placed inside its interval).
    pub at_s: f64,
    /// The series that changed there: `IOPS`, `MB/s`, `p99 latency`.
    pub series: Vec<String>,
    pub from_iops: f64,
    pub to_iops: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_p99_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_p99_ns: Option<u64>,
    /// I/Os completed and bytes moved from the start to the change.
    pub ops_before: u64,
    pub bytes_before: u64,
    pub cause: RegimeCause,
    /// The share of iolens' session threads' time spent waiting for a CPU on each side (runs
    /// that recorded `sched_intervals`; absent in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runq: Option<RunqShares>,
}

/// The share of iolens' session threads' time spent runnable but waiting for a CPU (0–1), on
/// the low-rate and the high-rate side of a change (or in the slowest and the fastest interval
/// of a window).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RunqShares {
    pub low_rate: f64,
    pub high_rate: f64,
    /// The time the device's requests waited for its own kernel threads to get a CPU (the
    /// loop driver's workers), as a share of the session threads' time, on each side: the
    /// I/O path's wait beyond the sessions' own (0 where the device has no such threads).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub device_low_rate: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub device_high_rate: f64,
}

/// What a regime change is named as.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RegimeCause {
    /// Reads fell to a lower rate and stayed there: burst credits ran out.
    CreditsExhausted,
    /// Writes fell to a lower rate and stayed there: a write cache (SLC, controller) filled.
    WriteCacheFull,
    /// The rate fell, then recovered later.
    ThrottlingStarts,
    /// The rate recovered after a fall.
    ThrottlingStops,
    /// Another process used the same device then (its counters moved much more than ours):
    /// a noisy neighbour, not a change of the storage.
    Neighbour,
    /// iolens' own sessions waited for a CPU on the low-rate side, enough more than on the
    /// high-rate side to explain the rate lost: the host's CPU, not the storage.
    HostCpu,
    /// No cause can be named from the evidence.
    #[default]
    Unknown,
}

/// The SNIA SSS PTS steady-state test over a window of rounds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SteadyState {
    pub rounds: u32,
    /// Start of the window, seconds from the start of measurement.
    pub window_start_s: f64,
    /// Average IOPS over the window.
    pub average: f64,
    /// (max − min) / average, percent (steady: ≤ 20).
    pub range_pct: f64,
    /// Excursion of the least-squares line across the window / average, percent (steady: ≤ 10).
    pub slope_pct: f64,
    pub steady: bool,
    /// Not steady because iolens' sessions waited for a CPU: the shares of their time spent
    /// waiting in the window's slowest and fastest intervals, where that explains the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu: Option<RunqShares>,
}

/// The latency modes of one op.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct OpModes {
    /// Op name (as in `OpResult::op`).
    pub op: String,
    /// Modes, fastest first.
    pub modes: Vec<Mode>,
    /// One line for people, e.g. `2 modes: 95.0 µs (62 %), 4.10 ms (38 %)`.
    pub description: String,
}

/// One latency mode (tier) of a distribution.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Mode {
    /// Most frequent latency of the mode, ns.
    pub centre_ns: f64,
    /// Lower bound of the values attributed to the mode, ns.
    pub low_ns: f64,
    /// Upper bound of the values attributed to the mode, ns.
    pub high_ns: f64,
    /// Geometric standard deviation factor (1.3 means typically within ×/÷ 1.3 of the centre).
    pub spread: f64,
    /// Share (0..1) of all values of the histogram that belong to the mode.
    pub share: f64,
    /// Number of values attributed to the mode.
    pub count: u64,
    /// The valley separating this mode from the one below it (none for the lowest mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valley_below: Option<Valley>,
}

/// What was compared to call two modes separate: the valley between their peaks.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Valley {
    /// Where the density is lowest between the two peaks, ns.
    pub at_ns: f64,
    /// Density there as a share of the lower of the two peaks (at most
    /// `analysis::modes::MAX_VALLEY_RATIO`).
    pub ratio: f64,
}

/// What a verdict found.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictKind {
    /// Latency includes scheduling delay (run-queue wait).
    CpuBound,
    /// The CPUs were busy, but the sessions hardly waited for one.
    CpuBusy,
    /// Time was spent above the block layer, not in the storage.
    HostQueueing,
    /// The device accounts for most of the latency.
    StorageBound,
    /// Most reads were served from the page cache.
    PageCache,
    /// The device's counters include other I/O; the comparison is unreliable.
    DeviceShared,
    /// A histogram in the file cannot be decoded.
    BadHistogram,
    /// A calibration step was skipped (e.g. a commit-write size below the device's logical
    /// block size).
    StepSkipped,
    /// Two headline figures of a calibration contradict each other (many streams below one).
    Contradiction,
    /// The step chosen for max IOPS meets the target percentile, but its p99 is far above it.
    TailBeyondTarget,
    /// A note written as plain text by an older iolens (no kind, no figures).
    Note,
    /// I/O syscall time not spent in the block layer: page cache, filesystem, locks.
    AboveBlockLayer,
    /// I/O is a small part of the watched threads' wall time: the answer is elsewhere.
    NotIo,
    /// The storage changed regime under the same load (a burst ended, a cache filled,
    /// throttling started or stopped): both regimes are reported.
    RegimeChange,
    /// The SNIA PTS steady-state verdict of the run's last regime.
    SteadyState,
    /// Another process used the run's device in some intervals (the device's own counters
    /// moved much more than the run's I/O): those intervals are a neighbour's, not the storage's.
    NoisyNeighbour,
    /// A cache answered (latency below any device's floor, or the reads never reached the
    /// device): the figures are the cache's, not the media's.
    CacheAnswered,
    /// A cgroup I/O limit (blk-throttle) held the watched processes' I/O above the block
    /// layer: the limit, not the device.
    CgroupLimit,
}

impl VerdictKind {
    /// The kebab-case name, as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::CpuBound => "cpu-bound",
            VerdictKind::CpuBusy => "cpu-busy",
            VerdictKind::HostQueueing => "host-queueing",
            VerdictKind::StorageBound => "storage-bound",
            VerdictKind::PageCache => "page-cache",
            VerdictKind::DeviceShared => "device-shared",
            VerdictKind::BadHistogram => "bad-histogram",
            VerdictKind::StepSkipped => "step-skipped",
            VerdictKind::Contradiction => "contradiction",
            VerdictKind::TailBeyondTarget => "tail-beyond-target",
            VerdictKind::Note => "note",
            VerdictKind::AboveBlockLayer => "above-block-layer",
            VerdictKind::NotIo => "not-io",
            VerdictKind::RegimeChange => "regime-change",
            VerdictKind::SteadyState => "steady-state",
            VerdictKind::NoisyNeighbour => "noisy-neighbour",
            VerdictKind::CacheAnswered => "cache-answered",
            VerdictKind::CgroupLimit => "cgroup-limit",
        }
    }
}

/// How much a verdict matters.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    Info,
    Warning,
}

impl Severity {
    /// `info` or `warning`, as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
        }
    }
}

impl std::fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding about a run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Verdict {
    /// What was found.
    pub kind: VerdictKind,
    /// How much it matters.
    pub severity: Severity,
    /// One or two sentences for a person.
    pub message: String,
    /// The figures the verdict rests on (names carry their unit, e.g. `mean_latency_us`).
    pub figures: BTreeMap<String, f64>,
}

/// Read a list of verdicts, accepting the plain sentences older files hold (as [`VerdictKind::Note`]).
pub(crate) fn verdicts_or_notes<'de, D>(d: D) -> Result<Vec<Verdict>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Typed(Verdict),
        Note(String),
    }
    Ok(Vec::<Either>::deserialize(d)?
        .into_iter()
        .map(|e| match e {
            Either::Typed(v) => v,
            Either::Note(message) => Verdict {
                kind: VerdictKind::Note,
                severity: Severity::Info,
                message,
                figures: BTreeMap::new(),
            },
        })
        .collect())
}

/// The knee of a load curve.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Knee {
    /// Index into the curve the knee was found on.
    pub index: usize,
    pub sessions: u32,
    pub iops: f64,
    pub p99_ns: u64,
    /// How the knee was found, e.g. `max power (IOPS / mean latency)`.
    pub method: String,
}

/// Result of a Universal Scalability Law fit.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct UslFit {
    /// Throughput of a single session.
    pub lambda: f64,
    /// Contention coefficient (≥ 0).
    pub sigma: f64,
    /// Coherency coefficient (≥ 0).
    pub kappa: f64,
    /// Concurrency of peak throughput, `sqrt((1−σ)/κ)`, when κ > 0 and σ < 1.
    pub peak_n: Option<f64>,
    /// Throughput at `peak_n`.
    pub peak_x: Option<f64>,
    /// Coefficient of determination of the fit on X.
    pub r2: f64,
}

/// Configured versus observed concurrency of a run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LittleCheck {
    /// Configured concurrency: sessions × queue depth.
    pub concurrency: f64,
    /// Observed average I/Os in flight: IOPS × mean latency (s), summed over ops.
    pub observed: f64,
    /// `1 − observed / concurrency`: share of the sessions' time spent outside the I/O.
    pub outside_share: f64,
}

/// Why the session ramp of a calibration stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The latency percentile exceeded the target.
    LatencyTarget,
    /// IOPS grew less than the plateau threshold over the best step, steps in a row.
    Plateau,
    /// IOPS fell below the best step by more than twice the plateau threshold (past the peak).
    Fell,
    /// The session ceiling was reached.
    Ceiling,
    /// The budget (or Ctrl-C) ended the ramp.
    Interrupted,
}

impl StopReason {
    /// Why, in words: completes "the ramp stopped because …".
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::LatencyTarget => "the next load level broke the latency target",
            StopReason::Plateau => "IOPS stopped growing with more sessions",
            StopReason::Fell => "IOPS fell with more sessions (past the peak)",
            StopReason::Ceiling => "the session ceiling was reached (more may be possible)",
            StopReason::Interrupted => "the ramp was cut short (budget or Ctrl-C)",
        }
    }
}

/// The best step of a ramp: its load level (sessions or queue depth) and what it reached.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RampBest {
    /// Sessions (random ramps) or queue depth per stream (sequential ramps).
    pub level: u32,
    /// IOPS (random ramps) or MB/s (sequential ramps).
    pub value: f64,
}

/// One commit-shaped write step of a calibration.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CommitStep {
    /// Write size, bytes.
    pub size_bytes: u64,
    /// Index into `Results::runs`.
    pub run: usize,
}

/// One cache-probe step of a calibration.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CacheStep {
    /// Share (0..1) of the target the working set covered.
    pub share: f64,
    /// Index into `Results::runs`.
    pub run: usize,
}

/// What the calibration procedure itself decided while it ran (the facts analysis cannot
/// recompute from the runs): why the ramp stopped, the best step of each ramp, and which runs
/// belong to which phase. Written by `calibrate` into `Calibration::findings`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CalibrationFindings {
    /// Why the random-read session ramp stopped.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// Best step of the sequential-read ramp, many streams (queue depth, MB/s).
    #[serde(default)]
    pub seq_best: Option<RampBest>,
    /// Best step of the sequential-read ramp, one stream (queue depth, MB/s).
    #[serde(default)]
    pub seq1_best: Option<RampBest>,
    /// Commit-shaped O_DSYNC write steps.
    #[serde(default)]
    pub commit: Vec<CommitStep>,
    /// The random-write session ramp.
    #[serde(default)]
    pub write_ramp: Vec<CurvePoint>,
    /// Best step of the random-write ramp (sessions, IOPS).
    #[serde(default)]
    pub write_best: Option<RampBest>,
    /// Cache-probe steps.
    #[serde(default)]
    pub cache: Vec<CacheStep>,
    /// `--sustain`: the chosen random-read point held after the ramp (its run and sessions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustain: Option<SustainStep>,
    /// `--sustain`: the chosen random-write point held after the write ramp (its run and
    /// sessions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustain_write: Option<SustainStep>,
    /// The calibration plan as run (phases, budget, steps), as `calibrate --explain` describes
    /// it. Absent when a file's plan is missing or of an older shape.
    #[serde(default, deserialize_with = "lenient")]
    pub plan: Option<Plan>,
    /// `--precondition`: the fill and the write rounds before the phases, and whether they
    /// reached steady state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precondition: Option<Precondition>,
}

/// SNIA-style preconditioning (`calibrate --precondition`): the target written sequentially
/// (up to twice over, SNIA's workload-independent preconditioning), then rounds of random
/// writes until the last [`SteadyState::rounds`] rounds' IOPS meet both SNIA PTS criteria, or
/// the round limit or the time bound ends them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Precondition {
    /// Runs of the sequential fill, in order.
    pub fill_runs: Vec<usize>,
    /// Bytes the fill wrote and the target's data size.
    pub fill_bytes: u64,
    pub target_bytes: u64,
    /// Seconds the fill took.
    pub fill_s: f64,
    /// Runs of the random-write rounds, in order, and each round's IOPS.
    pub rounds: Vec<usize>,
    pub round_iops: Vec<f64>,
    /// Seconds each round measured.
    pub round_s: f64,
    /// The SNIA test over the last rounds (absent with fewer rounds than its window).
    pub steady: Option<SteadyState>,
    /// Whether steady state was reached.
    pub reached: bool,
    /// Why the rounds ended: `steady`, `round-limit`, `time-bound` or `interrupted`.
    pub ended: String,
    /// The bound on the whole preconditioning, seconds.
    pub bound_s: f64,
    /// One line for people.
    pub sentence: String,
}

/// `Some` when the value reads as a `T`, `None` when it is null, missing or of another shape
/// (older files: a part that is only informative must not make the whole file unreadable).
fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
}

/// Calibration phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Single-block random reads, session ramp (max IOPS at the latency target).
    Randread,
    /// Large sequential reads, many streams, queue-depth ramp (max MB/s).
    Seqread,
    /// Large sequential reads, one stream (CALIBRATE_IO's MAX_PMBPS).
    Seqread1,
    /// Commit-shaped O_DSYNC writes and random-write session ramp (writes to the scratch file).
    Writes,
    /// Random reads over growing working sets (storage-side cache tiers).
    Cache,
}

/// A ramp's chosen point (random reads, or random writes) held for `--sustain`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SustainStep {
    /// Index into `Results::runs`.
    pub run: usize,
    pub sessions: u32,
}

/// One planned phase with its step budget.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PhasePlan {
    pub phase: Phase,
    /// Most steps the phase may take.
    pub max_steps: u32,
    /// Seconds per step (warm-up included).
    pub step_s: f64,
    /// Warm-up seconds per step.
    pub warmup_s: f64,
    /// What the phase does, in words.
    pub description: String,
}

/// The whole calibration plan (`calibrate --explain` prints it; the procedure is in `calibrate`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Plan {
    pub budget_s: f64,
    pub phases: Vec<PhasePlan>,
    pub bs: u64,
    pub large_bs: u64,
    pub max_sessions: u32,
    pub max_qd: u32,
    pub streams: u32,
    pub percentile: f64,
    pub max_latency_ns: u64,
    pub plateau: f64,
    pub refinements: u32,
    pub direct: bool,
    /// The I/O buffers stay on small pages (`--huge-pages off`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub small_pages: bool,
    /// `--sustain`: seconds the chosen random-read (and random-write) point is held after its
    /// ramp (0: not held).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sustain_s: f64,
    /// `--precondition`: the bound on its time, seconds (0: no preconditioning).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub precondition_s: f64,
    /// The allocation unit each step's I/O is striped in over several targets
    /// (`--stripe-unit`; one target: unused).
    #[serde(default = "default_stripe_unit")]
    pub stripe_unit: u64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn default_stripe_unit() -> u64 {
    1 << 20
}

/// What Oracle's DBMS_RESOURCE_MANAGER.CALIBRATE_IO would print for the same device: whole
/// numbers, and an integer-millisecond average latency that hides the distribution.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct CalibrateIoFigures {
    pub max_iops: Option<u64>,
    pub max_mbps: Option<u64>,
    pub max_pmbps: Option<u64>,
    /// Mean latency at the max-IOPS point, whole milliseconds rounded down.
    pub latency_ms: Option<u64>,
}

/// Little's law at one step of the random-read ramp.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LittleAt {
    pub sessions: u32,
    /// Index into `Results::runs`.
    pub run: usize,
    pub check: LittleCheck,
}

/// Latency of one commit-shaped write size.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CommitResult {
    pub size_bytes: u64,
    /// Index into `Results::runs`.
    pub run: usize,
    /// Writes per second (`None` when the duration is unknown).
    pub writes_per_s: Option<f64>,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
}

/// Latency of random reads over one cache-probe working set.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CacheProbeResult {
    /// Share (0..1) of the target the working set covered.
    pub share: f64,
    /// Working-set size, bytes (0 when the step does not say).
    pub working_set_bytes: u64,
    /// Index into `Results::runs`.
    pub run: usize,
    pub iops: Option<f64>,
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// Latency modes of the reads: a fast mode growing with a smaller set is the cache.
    pub modes: String,
}

/// The best step of a sequential-read ramp.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SeqBest {
    /// Queue depth per stream.
    pub qd: u32,
    pub mb_per_s: f64,
}

/// Everything analysis found in a calibration.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CalibrationAnalysis {
    /// Why the random-read ramp stopped.
    pub stop_reason: Option<StopReason>,
    /// The same in one sentence that agrees with the USL fit (completes "the ramp stopped
    /// because …"; absent in older files: then [`StopReason::describe`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sentence: Option<String>,
    /// The knee of the random-read load curve.
    pub knee: Option<Knee>,
    /// USL fit of the random-read curve (σ, κ, predicted peak).
    pub usl: Option<UslFit>,
    /// Little's law at every curve point.
    pub little: Vec<LittleAt>,
    /// Latency modes at the max-IOPS point.
    pub modes_at_max: Option<String>,
    /// The same modes named as storage tiers with their evidence (RAM cache, a cache behind the
    /// device, flash, disk; `analysis::modes::tier`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiers_at_max: Option<String>,
    /// Sequential reads, many streams and one stream.
    pub seq_best: Option<SeqBest>,
    pub seq1_best: Option<SeqBest>,
    /// Commit-shaped O_DSYNC writes.
    pub commit: Vec<CommitResult>,
    /// Random-write ramp best step: sessions and IOPS at the latency target.
    pub write_best: Option<RampBest>,
    /// Cache-probe steps.
    pub cache_probe: Vec<CacheProbeResult>,
    /// Verdicts of the step they are reported for: max-IOPS point, else the first step.
    pub verdicts_at: Option<usize>,
    /// What CALIBRATE_IO would report.
    pub calibrate_io: CalibrateIoFigures,
    /// A burst the random-read ramp ran into: its rate and length, and the sustained rate
    /// after it (absent when no step changed regime downwards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<CalibrationBurst>,
    /// A write cache the random-write ramp (and its held point) filled: the rate while it
    /// took writes, the bytes written to the cliff, and the sustained rate after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_cache: Option<CalibrationBurst>,
}

/// A burst found in a calibration's random-read ramp, or a write cache its random-write ramp
/// filled.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CalibrationBurst {
    /// Curve index of the step in which the rate fell.
    pub cliff_point: usize,
    /// The highest rate before the cliff.
    pub burst_iops: f64,
    /// Seconds from the ramp's first step to the cliff.
    pub burst_s: f64,
    /// The highest rate after the cliff: the answer.
    pub sustained_iops: f64,
    /// Whether the max-IOPS step the ramp chose was measured inside the burst.
    pub max_in_burst: bool,
    /// One line for people: `4.0k IOPS for 41 s, then 1.0k sustained`.
    pub sentence: String,
    /// Bytes the calibration had moved in the ramp's direction (read for a burst, written for
    /// a write cache) from its first such step to the cliff.
    #[serde(default)]
    pub bytes_before: u64,
    /// The stretch whose rate is `burst_iops` (absent in files analysed before it was
    /// recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_stretch: Option<RateStretch>,
    /// The stretch whose rate is `sustained_iops`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained_stretch: Option<RateStretch>,
}

/// A stretch of one run whose rate a figure is: the run (index into `Results::runs`) and the
/// span, seconds from its measurement start.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RateStretch {
    pub run: usize,
    pub from_s: f64,
    pub to_s: f64,
}

/// One row of a Method R response-time profile.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProfileRow {
    /// `CPU service (outermost calls)`, a wait event name, or `unaccounted-for`.
    pub component: String,
    pub seconds: f64,
    /// Share (0..1) of the response time.
    pub share: f64,
    /// Calls or waits (none for unaccounted-for time).
    #[serde(default)]
    pub count: Option<u64>,
    /// Mean per call or wait, µs.
    #[serde(default)]
    pub mean_us: Option<f64>,
    /// Longest single wait, µs (waits only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_us: Option<f64>,
    /// Of a wait event: time and waits between database calls (idle waits such as
    /// `SQL*Net message from client`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub between_calls_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub between_calls_count: Option<u64>,
    /// Of a wait event: time and waits in no traced call (tracing began or ended inside one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_calls_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_calls_count: Option<u64>,
}

/// The outermost database calls of one kind (`PARSE`, `EXEC`, `FETCH`, ...) in a trace.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CallFigures {
    pub count: u64,
    /// Σ c (CPU), µs; includes the calls' recursive children.
    pub cpu_us: u64,
    /// Σ e (elapsed), µs.
    pub elapsed_us: u64,
}

/// A Method R response-time profile: R = CPU + waits + unaccounted-for.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Profile {
    pub response_time_s: f64,
    /// `span of tim` or `calls and between-call waits`.
    #[serde(default)]
    pub response_time_basis: String,
    #[serde(default)]
    pub outermost_elapsed_s: f64,
    #[serde(default)]
    pub between_calls_wait_s: f64,
    #[serde(default)]
    pub outside_calls_wait_s: f64,
    pub cpu_s: f64,
    pub wait_s: f64,
    pub unaccounted_s: f64,
    /// Outermost calls by kind.
    #[serde(default)]
    pub calls: BTreeMap<String, CallFigures>,
    /// Outermost calls by their `dep=` depth.
    #[serde(default)]
    pub outermost_calls_by_depth: BTreeMap<String, u64>,
    /// Calls made by other calls (`dep` > 0 and claimed by a parent).
    #[serde(default)]
    pub recursive_calls: u64,
    /// `ERROR #` lines by error code.
    #[serde(default)]
    pub errors: BTreeMap<String, u64>,
    /// Largest components first.
    #[serde(default)]
    pub rows: Vec<ProfileRow>,
}

/// The profile of one trace file.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct FileProfile {
    pub path: String,
    /// The session the file was grouped into.
    #[serde(default)]
    pub session: String,
    pub profile: Profile,
}

/// The response-time profile of a trace: all files together and each file.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TraceProfile {
    pub total: Profile,
    #[serde(default)]
    pub files: Vec<FileProfile>,
}

/// Buffer-cache figures of one database run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DbFigures {
    /// Index into `Results::runs`.
    pub run: usize,
    /// Page/block requests the database made (hits + physical reads).
    pub logical_reads: f64,
    /// Requests that missed the database's cache and were read from the OS.
    pub physical_reads: f64,
    /// Share (0..1) of logical reads served from the database's own cache.
    pub hit_ratio: Option<f64>,
    /// Rates, when the duration is known.
    pub logical_reads_per_s: Option<f64>,
    pub physical_reads_per_s: Option<f64>,
    /// Share (0..1) of physical reads the OS page cache served (not the device), when measured.
    pub os_cache_served_share: Option<f64>,
}

/// Bring a version 1 document to version 2 in place: its calibration's free-form `analysis`
/// object (written by `calibrate` before the analysis was typed) becomes `findings`. The parts
/// of it that version 2 computes on reading (knee, USL, Little's law, modes, CALIBRATE_IO
/// figures) are dropped; stop reason, best steps, commit and cache-probe steps are kept.
pub(super) fn upgrade_v1(doc: &mut serde_json::Value) {
    let Some(cal) = doc.get_mut("calibration").and_then(|c| c.as_object_mut()) else {
        return;
    };
    let old = cal.remove("analysis").unwrap_or_default();
    let mut f = serde_json::Map::new();
    for key in [
        "stop_reason",
        "seq_best",
        "seq1_best",
        "commit",
        "write_ramp",
        "write_best",
        "plan",
    ] {
        if let Some(v) = old.get(key).filter(|v| !v.is_null()) {
            f.insert(key.into(), v.clone());
        }
    }
    // Version 1 cache steps were `[share, run, modes]`; the modes are recomputed.
    if let Some(steps) = old.get("cache").and_then(|c| c.as_array()) {
        let steps: Vec<serde_json::Value> = steps
            .iter()
            .filter_map(|s| Some(serde_json::json!([s.get(0)?, s.get(1)?])))
            .collect();
        f.insert("cache".into(), steps.into());
    }
    cal.insert("findings".into(), f.into());
}

/// One function of a stack profile: its own weight (leaf frames) and its inclusive weight.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct FunctionRow {
    pub name: String,
    /// True for a kernel function.
    pub kernel: bool,
    /// `System: layer` from the layer table, when the name is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// Weight (ns) of stacks where this function is the leaf, on CPU.
    pub self_on_cpu_ns: u64,
    /// Weight (ns) of stacks where this function is the leaf, off CPU.
    pub self_off_cpu_ns: u64,
    /// Weight (ns) of stacks that contain this function (counted once per stack).
    pub total_ns: u64,
    /// `total_ns` as a share (0..1) of the profile's weight.
    pub total_share: f64,
    /// On-CPU samples where this function is the leaf.
    pub self_samples: u64,
}

/// One layer (database or kernel) of a stack profile.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LayerRow {
    /// `Oracle`, `PostgreSQL` or `Linux kernel`.
    pub system: String,
    pub layer: String,
    /// Weight (ns) of stacks that pass through the layer (counted once per stack).
    pub total_ns: u64,
    /// Weight (ns) of stacks whose innermost known layer it is (these add up to at most 100 %).
    pub innermost_ns: u64,
    /// Share of the innermost weight that was off CPU (0..1).
    pub off_cpu_share: f64,
    /// `total_ns` as a share (0..1) of the profile's weight.
    pub total_share: f64,
    /// The functions of the layer seen in the profile, heaviest first (at most 5).
    pub functions: Vec<String>,
}

/// Off-CPU weight of one reason.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct OffCpuRow {
    /// `io-wait`, `sleep` or `runnable`.
    pub reason: String,
    pub weight_ns: u64,
    /// Times a thread blocked for this reason.
    pub count: u64,
    /// Share (0..1) of all off-CPU weight.
    pub share: f64,
}

/// What analysis found in a stack profile: the split between on and off CPU, the heaviest
/// functions and the database and kernel layers the time went through.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct StackProfileAnalysis {
    /// On-CPU samples.
    pub samples: u64,
    /// CPU time (ns) the samples stand for.
    pub on_cpu_ns: u64,
    /// Blocked time (ns).
    pub off_cpu_ns: u64,
    /// Off-CPU time by reason, largest first.
    pub off_cpu: Vec<OffCpuRow>,
    /// Distinct stacks.
    pub stacks: u64,
    /// Heaviest functions by own (leaf) weight, then inclusive weight (at most 25).
    pub top_functions: Vec<FunctionRow>,
    /// Layers, by inclusive weight.
    pub layers: Vec<LayerRow>,
    /// PostgreSQL: the time under each wait event the processes published (the wait event
    /// `-` for none), heaviest first; empty for other programs. Idle stacks are left out.
    #[serde(default)]
    pub wait_events: Vec<ProfileWaitRow>,
    /// Idle time (ns) the profile holds (with `--keep-idle`) or left out, never in the rows
    /// above nor in the verdict.
    #[serde(default)]
    pub idle_ns: u64,
}

/// The time of a profile under one PostgreSQL wait event.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProfileWaitRow {
    /// `Class:Event` as pg_stat_activity names it; `-` for no wait event (running SQL, or a
    /// wait PostgreSQL does not name).
    pub event: String,
    /// CPU time sampled under it, ns.
    pub on_cpu_ns: u64,
    /// Off-CPU time under it, ns, and the part of it waiting for a CPU.
    pub off_cpu_ns: u64,
    pub runnable_ns: u64,
    /// Times a thread left the CPU under it.
    pub count: u64,
    /// Share of the profile's non-idle time.
    pub share: f64,
}

/// Where the watched processes' I/O time went in one span (an interval, or the whole watch):
/// the shares of device service, host block queue, time above the block layer and CPU
/// run-queue wait in their I/O syscall time plus run-queue time.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct WatchShares {
    /// Start, seconds from the start of the watch, and length of the span.
    pub start_s: f64,
    pub duration_s: f64,
    /// Traced I/O syscalls completed, and their summed latency in seconds.
    pub syscalls: u64,
    pub syscall_s: f64,
    /// Run-queue wait of the watched threads, seconds (inside and outside I/O syscalls).
    pub runq_s: f64,
    /// The part of it inside traced I/O syscalls (after the I/O completed), seconds.
    #[serde(default)]
    pub runq_io_s: f64,
    /// The watched threads' wall time (thread-seconds) and its shares (0..1), which sum to 1:
    /// on CPU outside I/O syscalls, waiting for a CPU (inside them or not), inside I/O syscalls
    /// (less their CPU wait), otherwise off CPU (sleep, locks, client, idle).
    #[serde(default)]
    pub wall_s: f64,
    #[serde(default)]
    pub wall_cpu: f64,
    #[serde(default)]
    pub wall_cpu_wait: f64,
    #[serde(default)]
    pub wall_io: f64,
    #[serde(default)]
    pub wall_off_cpu: f64,
    /// Time inside traced I/O syscalls, seconds (CPU wait inside them included).
    #[serde(default)]
    pub io_s: f64,
    /// Background I/O: the watched processes' block requests no syscall of theirs waited for,
    /// and their device time in seconds.
    #[serde(default)]
    pub bg_requests: u64,
    #[serde(default)]
    pub bg_device_s: f64,
    /// Shares (0..1) of the time inside I/O syscalls (`io_s`); they sum to 1 when there was
    /// any. `runq` is the share spent waiting for a CPU inside the syscalls; `above_block` holds
    /// the syscalls' own CPU time with their sleeps outside the block layer.
    pub device: f64,
    pub host_queue: f64,
    pub above_block: f64,
    pub runq: f64,
    /// The layer that dominates, as a verdict kind (`storage-bound`, `host-queueing`,
    /// `above-block-layer`, `cpu-bound`), or none when nothing was waited for.
    pub verdict: Option<VerdictKind>,
}

/// The answer of an `iolens watch`: per interval and overall, where the I/O time went, and the
/// verdicts in the seeds' terms.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct WatchAnalysis {
    pub overall: WatchShares,
    pub intervals: Vec<WatchShares>,
    pub verdicts: Vec<Verdict>,
    /// Per PostgreSQL server whose client backends wait on WAL flushes: what the processes
    /// doing the flushes were doing meanwhile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wal: Vec<WalChain>,
}

/// PostgreSQL's WAL chain on one server: client backends wait for WAL flushes
/// (`LWLock:WALWrite` while another process flushes, `IO:WALSync` in their own flush), and the
/// flushes (`fdatasync` under `IO:WALSync`, by backends and the walwriter) take their time in
/// the device, the host queue, waiting for a CPU, or elsewhere.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct WalChain {
    /// The server's postmaster pid.
    pub server: Option<u32>,
    /// Shares of the client backends' DB time under `LWLock:WALWrite`, `IO:WALSync` and
    /// `IO:WALWrite`.
    pub lwlock_share: f64,
    pub sync_share: f64,
    pub write_share: f64,
    /// The flushes: traced syscalls under `IO:WALSync`, by role (`client backend`, `walwriter`).
    pub flushes: u64,
    pub flushes_by: Vec<(String, u64)>,
    /// Per flush, seconds: its whole time under `IO:WALSync`, and of it in the device, in the
    /// host queue, waiting for a CPU, on CPU, and the rest (filesystem, journal, locks).
    pub flush_s: f64,
    pub device_s: f64,
    pub queue_s: f64,
    pub cpu_wait_s: f64,
    pub cpu_s: f64,
    pub other_s: f64,
    /// What the flushes wait on most: `cpu-bound`, `storage-bound` (device and host queue) or
    /// `above-block-layer`.
    pub verdict: Option<VerdictKind>,
}

#[cfg(test)]
mod tests {
    use super::super::Calibration;

    #[test]
    fn older_calibrations_with_sentences_and_odd_plans_still_read() {
        let old = r#"{"percentile": 99.0, "max_latency_ns": 5000000, "curve": [],
            "max_iops": null, "max_iops_point": null, "max_mbps": null, "max_pmbps": null,
            "findings": {"plan": {"budget": "60s"}}, "overhead_s": 0.1, "budget_s": 60.0,
            "verdicts": ["commit writes of 512 B skipped: below the device's 4096 B logical block size"]}"#;
        let c: Calibration = serde_json::from_str(old).unwrap();
        assert_eq!(c.verdicts.len(), 1);
        assert_eq!(c.verdicts[0].kind, super::VerdictKind::Note);
        assert!(c.verdicts[0].message.starts_with("commit writes of 512 B"));
        assert!(c.findings.plan.is_none());
        // Written back, the verdict is typed and reads again as itself.
        let back: Calibration = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        // A mistyped verdict object is an error, not a note.
        let bad = old.replace(r#"["commit"#, r#"[{"kind": "no-such"}, "commit"#);
        assert!(serde_json::from_str::<Calibration>(&bad).is_err());
    }
}
