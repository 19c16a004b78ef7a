//! Many hosts at once: where a results document was measured ([`Placement`]: rank, world size,
//! host, launcher, requested start, clock state) and what `iolens merge` found when it merged
//! the documents of many ranks ([`MergeInfo`]: inputs, common window, per-rank series,
//! stragglers). Plain data types; `placement` fills the first, `merge` the second.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The launcher that started this iolens (read from its environment), or how the rank was given.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Launcher {
    /// Slurm `srun` (SLURM_PROCID / SLURM_NTASKS).
    Slurm,
    /// Open MPI `mpirun` (OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE).
    OpenMpi,
    /// A PMIx launcher (PMIX_RANK).
    Pmix,
    /// A PMI launcher such as MPICH's Hydra `mpiexec` (PMI_RANK / PMI_SIZE).
    Pmi,
    /// A Kubernetes Indexed Job (JOB_COMPLETION_INDEX).
    Kubernetes,
    /// `--rank` / `--ranks` on the command line (e.g. parallel ssh).
    Manual,
    /// No launcher: a single host (rank 0 of 1).
    None,
}

impl Launcher {
    /// The name written in results and shown to people.
    pub fn name(self) -> &'static str {
        match self {
            Launcher::Slurm => "slurm",
            Launcher::OpenMpi => "open-mpi",
            Launcher::Pmix => "pmix",
            Launcher::Pmi => "pmi",
            Launcher::Kubernetes => "kubernetes",
            Launcher::Manual => "manual",
            Launcher::None => "none",
        }
    }
}

/// The host clock's synchronisation state, from `adjtimex(2)` at the start of the command.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ClockSync {
    /// The kernel considers the clock synchronised (no `STA_UNSYNC`, state not `TIME_ERROR`).
    pub synchronised: bool,
    /// Estimated error of the clock, µs (`esterror`).
    pub est_error_us: i64,
    /// Maximum error of the clock, µs (`maxerror`).
    pub max_error_us: i64,
    /// The clock state in words (`ok`, `unsynchronised`, `insert leap second`…), or why it
    /// could not be read.
    pub state: String,
}

/// Where a measurement ran among many: its rank, the world size, the host and the launcher.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Placement {
    /// This process's rank, 0-based.
    pub rank: u32,
    /// World size (number of ranks); absent when the launcher does not say (a Kubernetes
    /// Indexed Job without `--ranks`).
    #[serde(default)]
    pub ranks: Option<u32>,
    /// Host name.
    pub host: String,
    /// Where the rank came from.
    pub launcher: Launcher,
    /// The common start of measurement asked for with `--start-at`, RFC 3339 (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// Wall-clock start of the (first) measurement, RFC 3339 (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_start: Option<String>,
    /// Seconds the measured start came after the requested one (negative: before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_lateness_s: Option<f64>,
    /// Clock synchronisation state of the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockSync>,
}

/// The largest world iolens takes (ranks 0 … `MAX_RANKS - 1`): beyond the largest machines'
/// process counts, and small enough that the results of every rank merge in memory.
pub const MAX_RANKS: u32 = 1_000_000;

impl Placement {
    /// A rank and world size iolens could have recorded: within [`MAX_RANKS`], the rank inside
    /// its world. (A file claiming a world of 4,294,967,295 once made `merge` list its missing
    /// ranks: 16.9 GB, then an abort.)
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(n) = self.ranks.filter(|&n| n == 0 || n > MAX_RANKS) {
            anyhow::bail!(
                "its placement claims a world of {n} ranks (iolens records 1 to {MAX_RANKS})"
            );
        }
        if self.rank >= self.ranks.unwrap_or(MAX_RANKS) {
            anyhow::bail!(
                "its placement claims rank {} of a world of {} (ranks are 0 … {})",
                self.rank,
                self.ranks.unwrap_or(MAX_RANKS),
                self.ranks.unwrap_or(MAX_RANKS) - 1
            );
        }
        Ok(())
    }
}

/// What `iolens merge` merged and found. The merged document's `runs` hold the exact sums;
/// this holds the per-rank view of them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct MergeInfo {
    /// The merged documents, in rank order.
    pub inputs: Vec<MergeInput>,
    /// World size the inputs declare (when they do).
    #[serde(default)]
    pub ranks_expected: Option<u32>,
    /// Ranks of that world with no results among the inputs (failed or not collected).
    #[serde(default)]
    pub missing_ranks: Vec<u32>,
    /// Merged with `--force` despite differing workloads.
    #[serde(default)]
    pub forced: bool,
    /// One entry per merged run, in the order of `Results::runs`.
    pub runs: Vec<RunMerge>,
}

/// One merged document.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct MergeInput {
    /// Path of the file as given to `merge`.
    pub file: String,
    pub rank: u32,
    #[serde(default)]
    pub ranks: Option<u32>,
    pub host: String,
    /// Launcher name (see `Launcher`).
    pub launcher: String,
    #[serde(default)]
    pub clock: Option<ClockSync>,
}

/// How one run was merged: the common wall-clock grid, the windows and each rank's part.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RunMerge {
    /// Run name.
    pub name: String,
    /// Wall-clock time of the start of grid slot 0 (the earliest rank's start), RFC 3339.
    pub origin: String,
    /// Grid interval, seconds.
    pub interval_s: f64,
    /// The window in which every rank was measuring (absent when they never overlapped).
    #[serde(default)]
    pub common: Option<Window>,
    /// From the first rank's start to the last rank's end.
    pub full: Window,
    /// Each rank's part, in input order.
    pub ranks: Vec<RankRun>,
    /// Ranks that stand out.
    #[serde(default)]
    pub stragglers: Vec<Straggler>,
    /// Largest difference between two ranks' measured starts, seconds.
    pub start_spread_s: f64,
}

/// Aggregate rates over a window (seconds from the grid origin).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Window {
    pub start_s: f64,
    pub end_s: f64,
    /// Operations (not `sync`) completed in the window, all ranks.
    pub count: u64,
    /// Sum over ranks of each rank's rate in the window.
    pub iops: f64,
    pub mb_per_s: f64,
}

/// One rank's part of a merged run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RankRun {
    /// Index into `MergeInfo::inputs`.
    pub input: usize,
    pub rank: u32,
    pub host: String,
    /// Measured start, seconds after the grid origin.
    pub start_s: f64,
    pub duration_s: f64,
    pub count: u64,
    pub iops: f64,
    pub mb_per_s: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub interrupted: bool,
    /// Grid slot of this rank's first interval.
    pub first_slot: u64,
    /// Operations per second in each of this rank's intervals (host × time heatmap).
    pub slot_iops: Vec<f64>,
    /// p99 latency of each of this rank's intervals, ns (0 where none completed).
    pub slot_p99_ns: Vec<u64>,
}

/// A rank that stands out, and why.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Straggler {
    pub rank: u32,
    pub host: String,
    pub reason: StragglerReason,
    /// The figures, in words.
    pub detail: String,
}

/// Why a rank is called a straggler.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StragglerReason {
    LateStart,
    EarlyEnd,
    LowRate,
    HighLatency,
    Interrupted,
}
