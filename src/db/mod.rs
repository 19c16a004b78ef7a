//! `iolens db`: the SLOB method — SQL-driven single-block I/O through a real database cache.
//!
//! Synthetic I/O never touches row data; SLOB (and pgio) drive storage through the database
//! itself, so the measurement includes the buffer-cache work and the CPU the database spends
//! per I/O. This module brings the method to an embedded SQLite (default, [`sqlite`]) and to
//! PostgreSQL ([`postgres`]).
//!
//! Layout (both engines): one table per schema, one row per 8 KiB page, rows loaded in a
//! pseudo-random key order ([`Perm`]) behind a B-tree index on the key, incompressible payload.
//! Work loop: zero-think-time sessions pick a random key ([`KeyPicker`]) and touch a window of
//! `--work-unit` rows by index (each row a different block); `--update-pct` of operations update
//! that window and commit. Everything lands in one [`Results`](crate::results::Results)
//! document (kind `db`) so `show`, `report` and `compare` work unchanged.

pub mod host;
pub mod libpq;
pub mod postgres;
pub mod sqlite;
pub mod vfs;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rand::Rng;
use serde::Serialize;

use crate::results::{Results, RunResult};
use crate::units::{fmt_ns, fmt_rate, sig3};

/// Database block (page) size of every iolens layout.
pub const BLOCK: u64 = 8192;
/// Smallest table iolens builds (rows): enough for the layout checks to be meaningful.
pub const MIN_ROWS: u64 = 1024;

/// `iolens db …`
#[derive(clap::Args, Debug)]
pub struct DbArgs {
    #[command(subcommand)]
    pub command: DbCommand,
}

/// The `db` sub-subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum DbCommand {
    /// Build (or resume, or verify) the SLOB-style data layout.
    Setup(SetupArgs),
    /// Run the SLOB work loop and measure it.
    Run(RunArgs),
    /// Remove everything `db setup` created.
    Drop(DropArgs),
}

/// Database engine.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Embedded SQLite (bundled, nothing to install).
    Sqlite,
    /// A PostgreSQL server reached through a DSN.
    Postgres,
}

/// Where the data lives.
#[derive(clap::Args, Debug, Clone)]
pub struct TargetArgs {
    /// Database engine.
    #[arg(long, value_enum, default_value = "sqlite")]
    pub engine: EngineKind,
    /// Directory holding the SQLite database (sqlite engine).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// libpq connection string or URL (postgres engine). Parameters it leaves out come from
    /// libpq's environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD…) and the
    /// password file (PGPASSFILE or ~/.pgpass), so no password need be on the command line.
    /// Passwords are never printed or stored.
    #[arg(long)]
    pub dsn: Option<String>,
}

/// Arguments of `db setup`.
#[derive(clap::Args, Debug, Clone)]
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
    /// Print no progress.
    #[arg(long)]
    pub quiet: bool,
}

/// Arguments of `db run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Concurrent zero-think-time sessions.
    #[arg(long, default_value_t = 4)]
    pub sessions: u32,
    /// Percentage of operations that update their window and commit (SLOB's UPDATE_PCT).
    #[arg(long, default_value_t = 0.0)]
    pub update_pct: f64,
    /// Rows touched per operation, each in a different block (SLOB's WORK_UNIT).
    #[arg(long, default_value_t = 64)]
    pub work_unit: u32,
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
    pub hot_pct: f64,
    /// Size of the hot spot, percent of each table's keys.
    #[arg(long, default_value_t = 10.0)]
    pub hot_size_pct: f64,
    /// Think time between operations (SLOB runs with zero think time).
    #[arg(long, default_value = "0s")]
    pub think: String,
    /// SQLite page cache per session (keep it much smaller than the data).
    #[arg(long, default_value = "512K")]
    pub cache_size: String,
    /// SQLite: run without the per-I/O timing shim (for overhead benchmarks).
    #[arg(long)]
    pub no_timing: bool,
    /// SQLite: keep the database's pages in the OS page cache instead of dropping them first.
    #[arg(long)]
    pub keep_os_cache: bool,
    /// PostgreSQL: run without track_io_timing (when the role may not enable it).
    #[arg(long)]
    pub no_io_timing: bool,
    /// PostgreSQL: wait-event samples per second (ASH-style).
    #[arg(long, default_value_t = 10.0)]
    pub ash_hz: f64,
    /// Write the results document here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Seed of the sessions' random keys (default: time-based).
    #[arg(long)]
    pub seed: Option<u64>,
    /// No progress lines and no summary.
    #[arg(long)]
    pub quiet: bool,
}

/// Arguments of `db drop`.
#[derive(clap::Args, Debug, Clone)]
pub struct DropArgs {
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Entry point of `iolens db`. `argv` is the full command line (redacted before it is stored).
pub fn main(args: DbArgs, argv: &[String]) -> Result<ExitCode> {
    let cmdline = redact_args(argv);
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
            let outcome = match a.target.engine {
                EngineKind::Sqlite => {
                    let dir = sqlite_dir(&a.target)?;
                    let o =
                        sqlite::explain_error(sqlite::setup(&dir, &layout, None, !a.quiet), &dir)?;
                    (o.rows_loaded, o.complete)
                }
                EngineKind::Postgres => {
                    let dsn = pg_dsn(&a.target)?;
                    let o = postgres::setup(&dsn, &layout, None, !a.quiet)?;
                    (o.rows_loaded, o.complete)
                }
            };
            let (rows_loaded, complete) = outcome;
            if !complete && crate::interrupt::interrupted() {
                eprintln!(
                    "iolens: setup stopped after loading {} rows this time; rerun the same \
                     command to resume",
                    rows_loaded
                );
                return Ok(ExitCode::from(crate::interrupt::exit_code()));
            }
            Ok(ExitCode::SUCCESS)
        }
        DbCommand::Run(a) => {
            let spec = RunSpec::from_args(&a)?;
            crate::interrupt::install();
            // A results file that cannot be written must fail now, not after the run.
            crate::results::Destination::checked(a.json.as_deref())?;
            let mut res = match a.target.engine {
                EngineKind::Sqlite => {
                    let dir = sqlite_dir(&a.target)?;
                    sqlite::explain_error(sqlite::run(&dir, &spec, cmdline), &dir)?
                }
                EngineKind::Postgres => {
                    let dsn = pg_dsn(&a.target)?;
                    postgres::run(&dsn, &spec, cmdline)?
                }
            };
            res.analysis = Some(crate::analysis::analyse(&res));
            if let Some(p) = &a.json {
                res.write_file(p)?;
            }
            if !a.quiet {
                print_summary(&res);
                if let Some(p) = &a.json {
                    crate::outln!(
                        "results written to {}",
                        crate::results::Destination::new(p).describe()
                    );
                }
            }
            Ok(
                if res.runs.iter().any(|r| r.interrupted) || crate::interrupt::interrupted() {
                    ExitCode::from(crate::interrupt::exit_code())
                } else {
                    ExitCode::SUCCESS
                },
            )
        }
        DbCommand::Drop(a) => {
            match a.target.engine {
                EngineKind::Sqlite => sqlite::drop_layout(&sqlite_dir(&a.target)?)?,
                EngineKind::Postgres => postgres::drop_layout(&pg_dsn(&a.target)?)?,
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn sqlite_dir(t: &TargetArgs) -> Result<PathBuf> {
    if t.dsn.is_some() {
        bail!("--dsn is for --engine postgres; the sqlite engine takes --dir");
    }
    t.dir
        .clone()
        .context("--engine sqlite needs --dir DIR (where the database file lives)")
}

fn pg_dsn(t: &TargetArgs) -> Result<String> {
    if t.dir.is_some() {
        bail!("--dir is for --engine sqlite; the postgres engine takes --dsn");
    }
    // Without --dsn, libpq's environment variables, password file and defaults apply alone.
    Ok(t.dsn.clone().unwrap_or_default())
}

/// Parse a size such as `64M` or `1G` (binary units), naming the option in the error.
pub fn parse_size(s: &str, what: &str) -> Result<u64> {
    crate::cli::parse_size(s).map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

/// Parse a duration such as `60s` or `500ms`, naming the option in the error.
pub fn parse_duration(s: &str, what: &str) -> Result<Duration> {
    crate::cli::parse_duration(s)
        .map(Duration::from_secs_f64)
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

/// Progress of loading one table during `db setup`, shared by the engines: a line when loading
/// starts, one every 10 % of the rows, and one when the index is built — drawn only when
/// asked for and stderr is a terminal (setup's layout check is printed regardless).
pub struct LoadProgress {
    on: bool,
    table: String,
    rows: u64,
    next: u64,
}

impl LoadProgress {
    /// Start reporting on `table`, of which `loaded` of `rows` rows are already in.
    pub fn start(enabled: bool, table: String, loaded: u64, rows: u64) -> LoadProgress {
        let on = enabled && crate::progress::wanted();
        if on && loaded < rows {
            crate::outln!("{table}: loading rows {}..{rows} of {rows}", loaded + 1);
        }
        LoadProgress {
            on,
            table,
            rows,
            next: loaded + rows / 10,
        }
    }

    /// `loaded` rows are now in.
    pub fn loaded(&mut self, loaded: u64) {
        if self.on && loaded >= self.next && loaded < self.rows {
            crate::outln!(
                "{}: {loaded} of {} rows ({:.0}%)",
                self.table,
                self.rows,
                loaded as f64 * 100.0 / self.rows as f64
            );
            self.next = loaded + self.rows / 10;
        }
    }

    /// The index `index` is being built.
    pub fn indexing(&self, index: &str) {
        if self.on {
            crate::outln!("{}: building index {index}", self.table);
        }
    }
}

/// Operation totals of a database run, common to every engine.
pub struct WorkTotals {
    pub selects: u64,
    pub updates: u64,
    pub statements: u64,
    pub commits: u64,
    pub rows: u64,
}

impl WorkTotals {
    /// Put the operation counters every engine reports into `c`.
    pub fn put_counters(&self, c: &mut std::collections::BTreeMap<String, f64>, measured_s: f64) {
        let ops = self.selects + self.updates;
        let share = if ops > 0 {
            self.updates as f64 / ops as f64
        } else {
            0.0
        };
        for (k, v) in [
            ("ops", ops as f64),
            ("select_ops", self.selects as f64),
            ("update_ops", self.updates as f64),
            ("update_share", share),
            ("statements", self.statements as f64),
            ("commits", self.commits as f64),
            ("rows_touched", self.rows as f64),
            ("ops_per_s", ops as f64 / measured_s),
            ("statements_per_s", self.statements as f64 / measured_s),
        ] {
            c.insert(k.to_string(), v);
        }
    }
}

/// The data layout `setup` builds: `schemas` tables of `rows` rows (one per block).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Layout {
    pub schemas: u32,
    pub rows: u64,
    pub seed: u64,
}

impl Layout {
    /// Bytes of table data (one block per row).
    pub fn data_bytes(&self) -> u64 {
        self.schemas as u64 * self.rows * BLOCK
    }
}

/// What `setup` found out about the layout it built (per schema).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct LayoutCheck {
    pub schema: u32,
    pub rows: u64,
    /// Distinct data blocks holding the rows.
    pub blocks: u64,
    /// Most rows found in one block (must be 1).
    pub max_rows_per_block: u64,
    /// Overflow / TOAST pages (must be 0: a row is one block).
    pub overflow_pages: u64,
    pub index_present: bool,
    /// Pearson correlation between key and physical position (near 0 when uncorrelated).
    pub key_position_corr: f64,
    /// Share of consecutive keys whose rows sit in adjacent blocks (near 0).
    pub adjacent_share: f64,
}

impl LayoutCheck {
    /// Problems with the layout, in words (empty when it is as intended).
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.max_rows_per_block != 1 || self.blocks != self.rows {
            p.push(format!(
                "schema {}: {} rows in {} blocks (max {} per block), expected one row per block",
                self.schema, self.rows, self.blocks, self.max_rows_per_block
            ));
        }
        if self.overflow_pages != 0 {
            p.push(format!(
                "schema {}: {} overflow pages",
                self.schema, self.overflow_pages
            ));
        }
        if !self.index_present {
            p.push(format!("schema {}: key index missing", self.schema));
        }
        if self.key_position_corr.abs() > 0.1 {
            p.push(format!(
                "schema {}: key order correlates with physical order (r = {:.3})",
                self.schema, self.key_position_corr
            ));
        }
        if self.adjacent_share > 0.05 {
            p.push(format!(
                "schema {}: {:.1}% of consecutive keys share adjacent blocks",
                self.schema,
                self.adjacent_share * 100.0
            ));
        }
        p
    }
}

/// Pseudo-random bijection of `[0, n)` (4-round Feistel network with cycle-walking): the key
/// of the row at physical position `i` is `permute(i) + 1`. Deterministic per seed, O(1) memory,
/// so a resumed setup continues the same permutation.
#[derive(Clone, Debug)]
pub struct Perm {
    n: u64,
    half: u32,
    mask: u64,
    keys: [u64; 4],
}

impl Perm {
    pub fn new(n: u64, seed: u64) -> Perm {
        assert!(n > 0);
        let bits = 64 - (n - 1).max(1).leading_zeros();
        let half = bits.div_ceil(2).max(1);
        let mut s = seed ^ 0x9E37_79B9_7F4A_7C15;
        let mut keys = [0u64; 4];
        for k in keys.iter_mut() {
            s = splitmix(s);
            *k = s;
        }
        Perm {
            n,
            half,
            mask: (1u64 << half) - 1,
            keys,
        }
    }

    fn round(&self, x: u64) -> u64 {
        let (mut l, mut r) = (x >> self.half, x & self.mask);
        for k in self.keys {
            let f = splitmix(r ^ k) & self.mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half) | r
    }

    /// The image of `i` (`i < n`).
    pub fn permute(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        let mut y = self.round(i);
        while y >= self.n {
            y = self.round(y);
        }
        y
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The validated workload of `db run`.
#[derive(Clone, Debug, Serialize)]
pub struct RunSpec {
    pub sessions: u32,
    pub update_pct: f64,
    pub work_unit: u32,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub interval_s: f64,
    pub hot_pct: f64,
    pub hot_size_pct: f64,
    pub think_s: f64,
    pub cache_bytes: u64,
    pub timing: bool,
    pub drop_os_cache: bool,
    pub io_timing: bool,
    pub ash_hz: f64,
    pub seed: u64,
    #[serde(skip)]
    pub quiet: bool,
}

impl RunSpec {
    /// Validate `db run` arguments into a spec.
    pub fn from_args(a: &RunArgs) -> Result<RunSpec> {
        if a.sessions == 0 || a.sessions > 4096 {
            bail!("--sessions must be between 1 and 4096");
        }
        if !(0.0..=100.0).contains(&a.update_pct) {
            bail!("--update-pct must be between 0 and 100");
        }
        if a.work_unit == 0 {
            bail!("--work-unit must be at least 1");
        }
        if !(0.0..=100.0).contains(&a.hot_pct) {
            bail!("--hot-pct must be between 0 and 100");
        }
        if !(a.hot_size_pct > 0.0 && a.hot_size_pct <= 100.0) {
            bail!("--hot-size-pct must be above 0 and at most 100");
        }
        if !(a.ash_hz > 0.0 && a.ash_hz <= 100.0) {
            bail!("--ash-hz must be above 0 and at most 100");
        }
        let duration = parse_duration(&a.duration, "--duration")?;
        if duration.is_zero() {
            bail!("--duration must be positive");
        }
        let interval = parse_duration(&a.interval, "--interval")?;
        if interval < Duration::from_millis(10) {
            bail!("--interval must be at least 10ms");
        }
        let cache = parse_size(&a.cache_size, "--cache-size")?;
        if cache < 64 * 1024 {
            bail!("--cache-size must be at least 64K");
        }
        let seed = a.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
        Ok(RunSpec {
            sessions: a.sessions,
            update_pct: a.update_pct,
            work_unit: a.work_unit,
            duration_s: duration.as_secs_f64(),
            warmup_s: parse_duration(&a.warmup, "--warmup")?.as_secs_f64(),
            interval_s: interval.as_secs_f64(),
            hot_pct: a.hot_pct,
            hot_size_pct: a.hot_size_pct,
            think_s: parse_duration(&a.think, "--think")?.as_secs_f64(),
            cache_bytes: cache,
            timing: !a.no_timing,
            drop_os_cache: !a.keep_os_cache,
            io_timing: !a.no_io_timing,
            ash_hz: a.ash_hz,
            seed,
            quiet: a.quiet,
        })
    }
}

/// Chooses each operation's window start key (1-based) and whether it updates.
#[derive(Clone, Debug)]
pub struct KeyPicker {
    rows: u64,
    wu: u64,
    hot_p: f64,
    hot_rows: u64,
    update_p: f64,
}

impl KeyPicker {
    pub fn new(rows: u64, spec: &RunSpec) -> Result<KeyPicker> {
        let wu = spec.work_unit as u64;
        if wu > rows {
            bail!("--work-unit {wu} is larger than a table ({rows} rows); lower it or set up a larger --scale");
        }
        let hot_rows = ((rows as f64 * spec.hot_size_pct / 100.0) as u64).clamp(wu, rows);
        Ok(KeyPicker {
            rows,
            wu,
            hot_p: spec.hot_pct / 100.0,
            hot_rows,
            update_p: spec.update_pct / 100.0,
        })
    }

    /// (first key, last key) of the next window.
    #[inline]
    pub fn window<R: Rng>(&self, rng: &mut R) -> (i64, i64) {
        let span = if self.hot_p > 0.0 && rng.gen_bool(self.hot_p) {
            self.hot_rows
        } else {
            self.rows
        };
        let lo = rng.gen_range(1..=span - self.wu + 1);
        (lo as i64, (lo + self.wu - 1) as i64)
    }

    /// Whether the next operation updates.
    #[inline]
    pub fn is_update<R: Rng>(&self, rng: &mut R) -> bool {
        self.update_p > 0.0 && rng.gen_bool(self.update_p)
    }
}

/// Replace the password in a libpq connection string or URL with `***`.
pub fn redact_dsn(dsn: &str) -> String {
    let t = dsn.trim_start();
    if t.starts_with("postgres://") || t.starts_with("postgresql://") {
        let scheme_end = dsn.find("://").map(|i| i + 3).unwrap_or(0);
        let mut out = dsn.to_string();
        let rest = &dsn[scheme_end..];
        let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..auth_end].rfind('@') {
            if let Some(colon) = rest[..at].find(':') {
                out = format!(
                    "{}{}:***{}",
                    &dsn[..scheme_end],
                    &rest[..colon],
                    &rest[at..]
                );
            }
        }
        // Query-string passwords.
        if let Some(q) = out.find('?') {
            let (head, query) = out.split_at(q + 1);
            let parts: Vec<String> = query
                .split('&')
                .map(|kv| {
                    if kv.to_ascii_lowercase().starts_with("password=") {
                        "password=***".to_string()
                    } else {
                        kv.to_string()
                    }
                })
                .collect();
            out = format!("{head}{}", parts.join("&"));
        }
        return out;
    }
    // key = value form; values may be single-quoted with backslash escapes.
    let b = dsn.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            out.push(b[i] as char);
            i += 1;
            continue;
        }
        let ks = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = &dsn[ks..i];
        let mut j = i;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if j >= b.len() || b[j] != b'=' {
            out.push_str(key);
            continue;
        }
        j += 1;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        let vs = j;
        if j < b.len() && b[j] == b'\'' {
            j += 1;
            while j < b.len() && b[j] != b'\'' {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            j = (j + 1).min(b.len());
        } else {
            while j < b.len() && !b[j].is_ascii_whitespace() {
                j += 1;
            }
        }
        if key.eq_ignore_ascii_case("password") {
            out.push_str("password=***");
        } else {
            out.push_str(key);
            out.push('=');
            out.push_str(&dsn[vs..j]);
        }
        i = j;
    }
    out
}

/// Redact `--dsn` values in a command line.
pub fn redact_args(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut next_is_dsn = false;
    for a in argv {
        if next_is_dsn {
            out.push(redact_dsn(a));
            next_is_dsn = false;
        } else if a == "--dsn" {
            out.push(a.clone());
            next_is_dsn = true;
        } else if let Some(v) = a.strip_prefix("--dsn=") {
            out.push(format!("--dsn={}", redact_dsn(v)));
        } else {
            out.push(a.clone());
        }
    }
    out
}

/// Counter value or 0.
fn ctr(r: &RunResult, k: &str) -> f64 {
    r.counters.get(k).copied().unwrap_or(0.0)
}

/// Print the terminal summary of a `db run` results document.
pub fn print_summary(res: &Results) {
    let Some(r) = res.runs.first() else {
        return;
    };
    let engine = res
        .extra
        .get("engine")
        .and_then(|v| v.as_str())
        .unwrap_or("db");
    crate::outln!("== iolens db run ({engine}): {} ==", r.name);
    crate::outln!(
        "  {:.1} s measured, {} sessions, update {}%, work unit {} rows",
        r.duration_s,
        r.spec.get("sessions").and_then(|v| v.as_u64()).unwrap_or(0),
        r.spec
            .get("update_pct")
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0),
        r.spec
            .get("work_unit")
            .and_then(|v| v.as_u64())
            .unwrap_or(0),
    );
    crate::outln!(
        "  operations  {}/s ({} selects, {} updates), statements {}/s, commits {}/s",
        fmt_rate(ctr(r, "ops_per_s")),
        ctr(r, "select_ops") as u64,
        ctr(r, "update_ops") as u64,
        fmt_rate(ctr(r, "statements") / r.duration_s.max(1e-9)),
        fmt_rate(ctr(r, "commits") / r.duration_s.max(1e-9)),
    );
    crate::outln!(
        "  logical reads {}/s, physical reads {}/s (hit ratio {:.1}%)",
        fmt_rate(ctr(r, "logical_reads_per_s")),
        fmt_rate(ctr(r, "physical_reads_per_s")),
        100.0 * (1.0 - ctr(r, "physical_reads") / ctr(r, "logical_reads").max(1.0)),
    );
    for run in &res.runs {
        for o in &run.ops {
            if o.count == 0 {
                continue;
            }
            let s = &o.summary;
            crate::outln!(
                "  {:<12} {:>9} {:>9}/s  p50 {:>9}  p99 {:>9}  p99.9 {:>9}  max {:>9}",
                o.op,
                o.count,
                fmt_rate(o.count as f64 / run.duration_s.max(1e-9)),
                fmt_ns(s.p50_ns as f64),
                fmt_ns(s.p99_ns as f64),
                fmt_ns(s.p999_ns as f64),
                fmt_ns(s.max_ns as f64),
            );
        }
    }
    if let Some(c) = &r.cpu {
        crate::outln!(
            "  CPU {} µs per physical read ({} user + {} sys s over the window{}), host busy {:.0}%, iowait {:.0}%",
            sig3(c.us_per_io),
            sig3(c.user_s),
            sig3(c.sys_s),
            if engine == "postgres" { ", server processes" } else { ", this process" },
            c.host_busy * 100.0,
            c.host_iowait * 100.0,
        );
        if c.runq_us_per_io > 0.0 {
            crate::outln!(
                "  run-queue delay {} µs per physical read",
                sig3(c.runq_us_per_io)
            );
        }
    }
    if let Some(d) = &r.device {
        crate::outln!(
            "  device {}: {} reads ({}/s, await {} µs), {} writes; database physical reads {}",
            d.device,
            d.reads,
            fmt_rate(d.reads as f64 / r.duration_s.max(1e-9)),
            sig3(d.read_await_us),
            d.writes,
            ctr(r, "physical_reads") as u64,
        );
        let served = ctr(r, "os_cache_served_reads");
        crate::outln!(
            "  about {} of the database's physical reads ({:.0}%) were served by the OS page cache, not the device",
            served as u64,
            ctr(r, "os_cache_served_share") * 100.0
        );
    }
    if let Some(w) = res.extra.get("wait_profile") {
        if let Some(evs) = w.get("events").and_then(|e| e.as_array()) {
            crate::outln!(
                "  wait profile ({} samples):",
                w.get("samples").and_then(|v| v.as_u64()).unwrap_or(0)
            );
            for e in evs.iter().take(8) {
                crate::outln!(
                    "    {:<40} {:>5.1}%",
                    e.get("event").and_then(|v| v.as_str()).unwrap_or("?"),
                    e.get("share").and_then(|v| v.as_f64()).unwrap_or(0.0) * 100.0
                );
            }
        }
    }
    for w in r.warnings.iter().chain(res.warnings.iter()) {
        crate::outln!("  warning: {w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perm_is_a_bijection() {
        for n in [1u64, 2, 3, 1000, 1024, 4097] {
            let p = Perm::new(n, 7);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let y = p.permute(i) as usize;
                assert!(!seen[y], "n={n} duplicate {y}");
                seen[y] = true;
            }
        }
        assert_ne!(Perm::new(1000, 1).permute(5), Perm::new(1000, 2).permute(5));
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact_dsn("host=/tmp dbname=x password=s3cret user=me"),
            "host=/tmp dbname=x password=*** user=me"
        );
        assert_eq!(
            redact_dsn("host=h password = 'a b\\'c' dbname=x"),
            "host=h password=*** dbname=x"
        );
        assert_eq!(
            redact_dsn("postgresql://me:s3cret@db:5432/x?sslmode=disable&password=zz"),
            "postgresql://me:***@db:5432/x?sslmode=disable&password=***"
        );
        assert_eq!(redact_dsn("postgres://me@db/x"), "postgres://me@db/x");
        let a: Vec<String> = [
            "iolens",
            "db",
            "run",
            "--dsn",
            "password=pw host=h",
            "--dsn=password=q",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let r = redact_args(&a).join(" ");
        assert!(!r.contains("pw ") && !r.contains("=q"), "{r}");
    }

    #[test]
    fn key_windows_stay_in_range() {
        let a = RunArgs {
            target: TargetArgs {
                engine: EngineKind::Sqlite,
                dir: None,
                dsn: None,
            },
            sessions: 1,
            update_pct: 25.0,
            work_unit: 64,
            duration: "1s".into(),
            warmup: "0s".into(),
            interval: "1s".into(),
            hot_pct: 50.0,
            hot_size_pct: 10.0,
            think: "0s".into(),
            cache_size: "512K".into(),
            no_timing: false,
            keep_os_cache: false,
            no_io_timing: false,
            ash_hz: 10.0,
            json: None,
            seed: Some(3),
            quiet: true,
        };
        let spec = RunSpec::from_args(&a).unwrap();
        let kp = KeyPicker::new(1000, &spec).unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut upd = 0;
        let mut hot = 0;
        for _ in 0..10_000 {
            let (lo, hi) = kp.window(&mut rng);
            assert!(lo >= 1 && hi <= 1000 && hi - lo == 63);
            if hi <= 100 {
                hot += 1;
            }
            if kp.is_update(&mut rng) {
                upd += 1;
            }
        }
        assert!((2200..2800).contains(&upd), "{upd}");
        assert!(hot > 4500, "{hot}");
        assert!(KeyPicker::new(10, &spec).is_err());
    }

    use rand::SeedableRng;
}
