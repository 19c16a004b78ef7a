//! The options every measuring command (`run`, `calibrate`, `db run`) shares for many hosts at
//! once: `--rank`/`--ranks` (when no launcher sets them) and `--start-at`. Not a subcommand.

use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::Result;
use clap::Args;

use crate::placement::Rank;
use crate::results::Results;

/// Rank, world size and common start.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct LaunchArgs {
    /// This process's rank (0-based) among many hosts. Read from the launcher's environment
    /// when not given: SLURM_PROCID (srun), OMPI_COMM_WORLD_RANK (Open MPI), PMIX_RANK,
    /// PMI_RANK (MPICH), JOB_COMPLETION_INDEX (Kubernetes Indexed Job). Recorded in the results
    /// with the world size, host and launcher; {rank}, {host} and {ranks} in --target, --json
    /// (and --dir of `db run`) are replaced by them.
    #[arg(long, value_name = "N")]
    pub rank: Option<u32>,
    /// World size (number of ranks), when the launcher does not say (Kubernetes, parallel ssh).
    #[arg(long, value_name = "N")]
    pub ranks: Option<u32>,
    /// Start measuring at TIME, together with the other ranks: RFC 3339
    /// (2026-03-01T12:00:00Z, any offset) or +DURATION from now (+30s, resolved by each rank
    /// when it starts). A time in the past is refused; the warm-up runs before it. The measured
    /// start and the host clock's synchronisation state (adjtimex) are recorded.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
}

/// The resolved launch: where this rank is and when it starts.
pub(crate) struct Launch {
    pub rank: Rank,
    pub start_at: Option<SystemTime>,
}

impl LaunchArgs {
    /// Resolve the rank (arguments, then the launcher's environment) and the start time.
    pub(crate) fn resolve(&self) -> Result<Launch> {
        let rank = Rank::from_env(self.rank, self.ranks)?;
        let start_at = self
            .start_at
            .as_deref()
            .map(|s| crate::placement::parse_start_at(s, SystemTime::now()))
            .transpose()?;
        Ok(Launch { rank, start_at })
    }
}

impl Launch {
    /// Expand the rank templates of an optional path option.
    pub(crate) fn expand_opt(&self, what: &str, p: &mut Option<PathBuf>) -> Result<()> {
        if let Some(x) = p.as_mut() {
            *x = self.rank.expand(what, x)?;
        }
        Ok(())
    }

    /// Record rank, world size, host, launcher, requested and measured start, and the clock
    /// state in `res` (the measured start is that of its first run).
    pub(crate) fn record(&self, res: &mut Results) {
        let mut p = self.rank.placement();
        let measured = res
            .runs
            .first()
            .and_then(|r| crate::placement::parse_time(&r.started).ok());
        crate::placement::stamp(&mut p, self.start_at, measured);
        if let (Some(late), Some(run)) = (p.start_lateness_s, res.runs.first()) {
            if late.abs() > 0.1 * run.interval_s.max(0.001) {
                res.warnings.push(format!(
                    "measurement started {late:.3} s after the requested --start-at (more \
                     than a tenth of an interval)"
                ));
            }
        }
        res.placement = Some(p);
    }
}
