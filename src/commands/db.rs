//! `iolens db`: SQL-driven I/O through a real database cache (the SLOB method).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};

use super::{finish, Context};
use crate::db::{postgres, redact_args, sqlite, Layout, RunSpec, BLOCK, MIN_ROWS};

/// `iolens db …`
#[derive(Args, Debug)]
pub struct DbArgs {
    #[command(subcommand)]
    pub command: DbCommand,
}

/// The `db` sub-subcommands.
#[derive(Subcommand, Debug)]
pub enum DbCommand {
    /// Build (or resume, or verify) the SLOB-style data layout.
    Setup(SetupArgs),
    /// Run the SLOB work loop and measure it.
    Run(Box<RunArgs>),
    /// Remove everything `db setup` created.
    Drop(DropArgs),
    /// Take snapshots of PostgreSQL's I/O statistics (pg_stat_io, pg_stat_database,
    /// pg_stat_statements) every --interval for --duration: per-interval counts, bytes, times
    /// and means (no distributions: these views keep sums). Read-only.
    Sample(SampleArgs),
}

/// Arguments of `db sample`.
#[derive(Args, Debug, Clone)]
pub struct SampleArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Time between snapshots.
    #[arg(long, default_value = "10s", value_parser = crate::commands::values::std_duration)]
    pub interval: Duration,
    /// Length of the window: snapshots at its start, every --interval, and at its end. Ctrl-C
    /// ends it sooner; what was taken is written.
    #[arg(long, value_parser = crate::commands::values::std_duration)]
    pub duration: Duration,
    /// Write the results document (JSON) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Database engine.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// Embedded SQLite (bundled, nothing to install).
    Sqlite,
    /// A PostgreSQL server reached through a DSN.
    Postgres,
}

/// Where the data lives.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// Database engine.
    #[arg(long, value_enum, default_value = "sqlite")]
    pub engine: EngineKind,
    /// Directory holding the SQLite database (sqlite engine), or a tablespace's directory
    /// (postgres engine, optional). Give it several times to spread the layout over several
    /// disks, as a database's data files are: schema s lives in the (s mod N)-th directory (so
    /// --schemas must be at least N; a multiple of N spreads evenly), each session works on one
    /// schema, and `db run` keeps each directory's own series, queue facts and disk counters
    /// beside the totals. SQLite: the database file of each directory. PostgreSQL (superuser,
    /// server on this host): `db setup` creates one tablespace per directory, each directory
    /// new or empty (one holding anything else is refused before anything is created), marked
    /// as iolens' and given to the server's user; `db drop` removes them. `db run` and `db
    /// drop` take the same list, in the same order (PostgreSQL: or none).
    #[arg(long)]
    pub dir: Vec<PathBuf>,
    /// libpq connection string or URL (postgres engine). Parameters it leaves out come from
    /// libpq's environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD…) and the
    /// password file (PGPASSFILE or ~/.pgpass), so no password need be on the command line.
    /// Passwords are never printed or stored.
    #[arg(long)]
    pub dsn: Option<String>,
}

/// Arguments of `db setup`.
#[derive(Args, Debug, Clone)]
pub struct SetupArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Number of schemas (one table each). Sessions are spread over them round-robin; 1 is
    /// SLOB's single-schema model.
    #[arg(long, default_value_t = 1)]
    pub schemas: u32,
    /// Data size per schema (SLOB's SCALE), e.g. 64M, 1G. One row per 8 KiB block.
    #[arg(long, default_value = "64M")]
    pub scale: String,
    /// Seed of the key permutation and payload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Arguments of `db run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Concurrent zero-think-time sessions.
    #[arg(long, default_value_t = 4)]
    pub sessions: u32,
    /// Percentage of operations that update their window and commit (SLOB's UPDATE_PCT).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) update_pct: f64,
    /// Rows touched per operation, each in a different block (SLOB's WORK_UNIT).
    #[arg(long, default_value_t = 64)]
    pub(crate) work_unit: u32,
    /// Measured duration.
    #[arg(long, default_value = "30s")]
    pub duration: String,
    /// Warm-up before measurement (not recorded).
    #[arg(long, default_value = "0s")]
    pub warmup: String,
    /// Histogram interval.
    #[arg(long, default_value = "1s")]
    pub interval: String,
    /// Percentage of operations that go to the hot spot (0 = uniform).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) hot_pct: f64,
    /// Size of the hot spot, percent of each table's keys.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) hot_size_pct: f64,
    /// Think time between operations (SLOB runs with zero think time).
    #[arg(long, default_value = "0s")]
    pub(crate) think: String,
    /// SQLite page cache per session (keep it much smaller than the data).
    #[arg(long, default_value = "512K")]
    pub(crate) cache_size: String,
    /// SQLite: run without the per-I/O timing shim (for overhead benchmarks).
    #[arg(long)]
    pub(crate) no_timing: bool,
    /// Keep the database's pages in the OS page cache instead of dropping them first (SQLite:
    /// its files; PostgreSQL on this host, as root or the server's user: the tables' and
    /// indexes' files).
    #[arg(long)]
    pub(crate) keep_os_cache: bool,
    /// PostgreSQL: run without track_io_timing (when the role may not enable it).
    #[arg(long)]
    pub(crate) no_io_timing: bool,
    /// PostgreSQL: wait-event samples per second (ASH-style).
    #[arg(long, default_value_t = 10.0)]
    pub(crate) ash_hz: f64,
    /// Trace with BPF (needs root or CAP_BPF+CAP_PERFMON and a kernel with BTF). SQLite: the
    /// block requests the sessions' own I/O makes on the database's disk (host queue and device
    /// service time per interval; over several --dir, each directory's disk on its own, which
    /// must then be disks of their own). PostgreSQL: require what a run as root does by itself —
    /// the sessions' backends traced like `iolens watch` (per-I/O syscall and block histograms,
    /// time split, wait-event table) — and fail when it cannot.
    #[arg(long, conflicts_with = "no_probes")]
    pub watch: bool,
    /// PostgreSQL: do not trace the backends, even as root (only the server's statistics and
    /// the sampled wait profile).
    #[arg(long)]
    pub(crate) no_probes: bool,
    /// Write the results document here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write the results as a Prometheus text exposition here, once at the end (classic
    /// latency histograms per run and op, counters, verdicts), for node_exporter's textfile
    /// collector or `iolens ingest --format prometheus`.
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// Seed of the sessions' random keys (default: time-based).
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub(crate) launch: super::launch::LaunchArgs,
}

/// Arguments of `db drop`.
#[derive(Args, Debug, Clone)]
pub struct DropArgs {
    #[command(flatten)]
    pub target: TargetArgs,
}

/// `iolens db`. The command line is stored with passwords redacted.
pub(crate) fn main(args: DbArgs, cx: &Context) -> Result<ExitCode> {
    let cmdline = redact_args(&cx.cmdline);
    match args.command {
        DbCommand::Setup(a) => {
            let scale = parse_size(&a.scale, "--scale")?;
            let rows = scale / BLOCK;
            if a.schemas == 0 {
                bail!("--schemas must be at least 1");
            }
            if rows < MIN_ROWS {
                bail!(
                    "--scale {} is too small: at least {} ({MIN_ROWS} blocks of 8 KiB) per schema",
                    a.scale,
                    crate::units::fmt_bytes(MIN_ROWS * BLOCK)
                );
            }
            let layout = Layout {
                schemas: a.schemas,
                rows,
                seed: a.seed,
            };
            // Ctrl-C or SIGTERM stops the load between committed chunks; rerunning resumes.
            crate::interrupt::install();
            let o = engine(&a.target)?.setup(&layout, None, !cx.quiet)?;
            let (rows_loaded, complete) = (o.rows_loaded, o.complete);
            if !complete && crate::interrupt::interrupted() {
                crate::out::note(&format!(
                    "setup stopped after loading {} rows this time; rerun the same \
                     command to resume",
                    rows_loaded
                ));
                return Ok(ExitCode::from(crate::exit::interrupted()));
            }
            Ok(ExitCode::SUCCESS)
        }
        DbCommand::Run(mut a) => {
            let launch = a.launch.resolve()?;
            for d in &mut a.target.dir {
                let mut x = Some(std::mem::take(d));
                launch.expand_opt("--dir", &mut x)?;
                *d = x.unwrap_or_default();
            }
            launch.expand_opt("--json", &mut a.json)?;
            let spec = run_spec(&a)?;
            if a.watch {
                // Refused before any I/O when BPF cannot be used here.
                crate::watch::own::check()?;
            }
            crate::interrupt::install();
            crate::interrupt::set_writes_results(a.json.is_some());
            // A results file that cannot be written must fail now, not after the run.
            let mut files = crate::output::Plan::new();
            if a.target.engine == EngineKind::Sqlite {
                for dir in &a.target.dir {
                    files.input(&crate::db::sqlite::db_path(dir));
                }
            }
            let json = super::results_output(
                &mut files,
                a.json.as_deref(),
                crate::output::results_estimate(crate::output::intervals(
                    spec.duration_s + spec.warmup_s,
                    spec.interval_s,
                )),
            )?;
            let metrics = super::metrics::metrics_output(&mut files, a.metrics.as_deref())?;
            // SQLite: each directory's disk traced on its own (PostgreSQL's backends are
            // watched by the engine's own probes).
            let block_watch = if a.watch && a.target.engine != EngineKind::Postgres {
                let dirs = sqlite_dirs(&a.target)?;
                Some(crate::watch::own::OwnWatch::start_all(
                    &dirs.iter().map(|d| d.as_path()).collect::<Vec<_>>(),
                )?)
            } else {
                None
            };
            let ctx = crate::run::RunContext {
                block_watch: block_watch.as_ref(),
                ..crate::run::RunContext::new(cx.progress(false)).starting_at(launch.start_at)
            };
            let mut res = engine(&a.target)?.run(&spec, ctx, cmdline)?;
            launch.record(&mut res);
            let res = super::complete(res);
            let style = cx.brief_style();
            crate::out!("{}", crate::render::brief_db::db_summary(&res, &style));
            let code = finish(&res, json)?;
            super::metrics::write_metrics(&res, metrics)?;
            Ok(code)
        }
        DbCommand::Sample(a) => {
            if a.target.engine != EngineKind::Postgres {
                bail!(
                    "db sample reads PostgreSQL's statistics views: give --engine postgres \
                     --dsn …"
                );
            }
            let Some(dsn) = a.target.dsn.as_deref() else {
                bail!("db sample --engine postgres needs --dsn (a libpq connection string or URL)");
            };
            if a.interval.is_zero() || a.interval > a.duration {
                bail!(
                    "--interval must be more than 0 and at most --duration ({} s)",
                    a.duration.as_secs_f64()
                );
            }
            crate::interrupt::install();
            crate::interrupt::set_writes_results(a.json.is_some());
            let json =
                super::results_output(&mut crate::output::Plan::new(), a.json.as_deref(), 0)?;
            let res = super::complete(crate::db::pg_sample::sample(
                dsn, a.interval, a.duration, cmdline,
            )?);
            res.validate()?;
            let style = cx.brief_style();
            crate::out!("{}", crate::render::io_stats::text(&res, &style));
            for w in &res.warnings {
                crate::out::warn(w);
            }
            finish(&res, json)
        }
        DbCommand::Drop(a) => {
            engine(&a.target)?.drop_layout()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The `db run` workload these arguments describe, parsed and checked.
fn run_spec(a: &RunArgs) -> Result<RunSpec> {
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let spec = RunSpec {
        sessions: a.sessions,
        update_pct: a.update_pct,
        work_unit: a.work_unit,
        duration_s: parse_duration(&a.duration, "--duration")?.as_secs_f64(),
        warmup_s: parse_duration(&a.warmup, "--warmup")?.as_secs_f64(),
        interval_s: parse_duration(&a.interval, "--interval")?.as_secs_f64(),
        hot_pct: a.hot_pct,
        hot_size_pct: a.hot_size_pct,
        think_s: crate::units::parse_latency(&a.think)
            .map_err(|e| anyhow::anyhow!("--think: {e}"))?,
        cache_bytes: parse_size(&a.cache_size, "--cache-size")?,
        timing: !a.no_timing,
        drop_os_cache: !a.keep_os_cache,
        io_timing: !a.no_io_timing,
        ash_hz: a.ash_hz,
        seed,
        probes: match (a.watch, a.no_probes) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
    };
    spec.validate()?;
    Ok(spec)
}

/// The engine `t` names, at the place it names.
fn engine(t: &TargetArgs) -> Result<Box<dyn crate::db::DbEngine>> {
    Ok(match t.engine {
        EngineKind::Sqlite => Box::new(sqlite::Sqlite {
            dirs: sqlite_dirs(t)?,
        }),
        EngineKind::Postgres => Box::new(postgres::Postgres {
            dsn: pg_dsn(t)?,
            dirs: t.dir.clone(),
        }),
    })
}

fn sqlite_dirs(t: &TargetArgs) -> Result<Vec<PathBuf>> {
    if t.dsn.is_some() {
        bail!("--dsn is for --engine postgres; the sqlite engine takes --dir");
    }
    if t.dir.is_empty() {
        bail!("--engine sqlite needs --dir DIR (where the database file lives)");
    }
    Ok(t.dir.clone())
}

fn pg_dsn(t: &TargetArgs) -> Result<String> {
    // Without --dsn, libpq's environment variables, password file and defaults apply alone.
    Ok(t.dsn.clone().unwrap_or_default())
}

/// Parse a size such as `64M` or `1G` (binary units), naming the option in the error.
fn parse_size(s: &str, what: &str) -> Result<u64> {
    crate::units::parse_size(s).map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

/// Parse a duration such as `60s` or `500ms`, naming the option in the error.
fn parse_duration(s: &str, what: &str) -> Result<Duration> {
    crate::commands::values::std_duration(s).map_err(|e| anyhow::anyhow!("{what}: {e}"))
}
