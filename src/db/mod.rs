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
pub(crate) mod load;
pub mod pg_sample;
pub mod postgres;
pub mod sqlite;
pub mod vfs;

use anyhow::{bail, Result};
use rand::Rng;
use serde::Serialize;

use crate::recorder::{Op, OpSet};
use crate::results::Results;
use crate::session::RunContext;
use crate::units::{fmt_ns, fmt_rate};

/// Database block (page) size of every iolens layout.
pub const BLOCK: u64 = 8192;
/// A SLOB select, timed from issue to its row.
pub(crate) const SELECT: Op = Op::new(0, "select");
/// A SLOB update with its commit, timed from `BEGIN` to the end of the commit.
pub(crate) const UPDATE: Op = Op::new(1, "update");
/// The commit of an update alone (a flush: the log write the update waits for).
pub(crate) const COMMIT: Op = Op::flush(2, "commit");
/// The operations a database session records.
pub(crate) const DB_OPS: OpSet = OpSet::new(&[SELECT, UPDATE, COMMIT]);

/// What a `setup` call did.
#[derive(Clone, Debug)]
pub struct SetupOutcome {
    /// Rows inserted by this call.
    pub rows_loaded: u64,
    /// Whether the whole layout is now built and verified.
    pub complete: bool,
    pub checks: Vec<LayoutCheck>,
}

/// A database iolens measures: builds (or resumes, or re-verifies) its SLOB layout, runs the
/// work loop on it through the session driver, and drops it.
pub trait DbEngine {
    /// Build, resume or re-verify the layout. `max` bounds the rows this call loads; `show`
    /// draws its progress.
    fn setup(&self, layout: &Layout, max: Option<u64>, show: bool) -> Result<SetupOutcome>;
    /// Run the SLOB work loop on the layout and measure it.
    fn run(&self, spec: &RunSpec, ctx: RunContext<'_>, cmdline: Vec<String>) -> Result<Results>;
    /// Remove the layout.
    fn drop_layout(&self) -> Result<()>;
}

/// The progress lines of `db run`: one per interval just measured, on a terminal.
pub(crate) struct DbProgress {
    enabled: bool,
    interval_s: f64,
    duration_s: f64,
    /// Set of the statements (select, update, commit) in the plan; block I/O is set 0 when
    /// the engine times its file I/O (SQLite).
    ops_set: usize,
    /// The directories' disks, counted over the measured window when there are several.
    pub(crate) disks: crate::session::DiskWindow,
}

impl DbProgress {
    /// Progress of a run of `spec` (drawn where `ctx` says), with the statements recorded as
    /// the last set of the plan.
    pub(crate) fn new(spec: &RunSpec, ctx: &RunContext<'_>) -> DbProgress {
        DbProgress {
            enabled: ctx.progress && crate::progress::wanted(),
            interval_s: spec.interval_s,
            duration_s: spec.duration_s,
            ops_set: 0,
            disks: Default::default(),
        }
    }

    /// Count these disks' own counters over the measured window (a run over several).
    pub(crate) fn disks(mut self, disks: crate::session::DiskWindow) -> DbProgress {
        self.disks = disks;
        self
    }

    /// The statements are set `i` of the plan; sets before it are block I/O.
    pub(crate) fn ops_set(mut self, i: usize) -> DbProgress {
        self.ops_set = i;
        self
    }

    /// The line for one interval (`snaps` in plan order).
    pub(crate) fn line(&self, snaps: &[crate::recorder::IntervalSnapshot]) -> Option<String> {
        let o = snaps.get(self.ops_set)?;
        let secs = self.interval_s;
        let at = ((o.index + 1) as f64 * secs).min(self.duration_s);
        // An update's commit is part of the update, not an operation of its own.
        let ops = fmt_rate((o.count - o.flushes) as f64 / secs);
        // Over several directories the block reads are one set each: the statements alone.
        Some(
            match snaps
                .first()
                .filter(|_| self.ops_set > 0 && !self.disks.several())
            {
                Some(m) => format!(
                    "  {at:>6.1}s  ops/s {ops:>8}  block reads/s {:>8}  read p50 {:>9}  p99 {:>9}",
                    fmt_rate(m.count as f64 / secs),
                    fmt_ns(m.p50_ns as f64),
                    fmt_ns(m.p99_ns as f64),
                ),
                None => format!(
                    "  {at:>6.1}s  ops/s {ops:>8}  op p50 {:>9}  p99 {:>9}",
                    fmt_ns(o.p50_ns as f64),
                    fmt_ns(o.p99_ns as f64),
                ),
            },
        )
    }
}

impl<R> crate::session::Watch<R> for DbProgress {
    fn measuring(&mut self) {
        self.disks.measuring();
    }

    fn stopped(&mut self) {
        self.disks.stopped();
    }

    fn interval(&mut self, snaps: &[crate::recorder::IntervalSnapshot]) {
        if self.enabled {
            if let Some(l) = self.line(snaps) {
                eprintln!("{}", crate::out::for_stderr(&l));
            }
        }
    }
}

/// Smallest table iolens builds (rows): enough for the layout checks to be meaningful.
pub const MIN_ROWS: u64 = 1024;

/// Operation totals of a database run, common to every engine.
pub(crate) struct WorkTotals {
    pub(crate) selects: u64,
    pub updates: u64,
    pub statements: u64,
    pub commits: u64,
    pub rows: u64,
}

impl WorkTotals {
    /// Put the operation counters every engine reports into `c`.
    pub(crate) fn put_counters(
        &self,
        c: &mut std::collections::BTreeMap<String, f64>,
        measured_s: f64,
    ) {
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
    /// The layout as stored in the results ([`Results::db`]).
    pub fn stored(&self) -> crate::results::evidence::DbLayout {
        crate::results::evidence::DbLayout {
            schemas: self.schemas,
            rows: self.rows,
            seed: self.seed,
        }
    }

    /// Bytes of table data (one block per row).
    pub(crate) fn data_bytes(&self) -> u64 {
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
    pub(crate) max_rows_per_block: u64,
    /// Overflow / TOAST pages (must be 0: a row is one block).
    pub(crate) overflow_pages: u64,
    pub(crate) index_present: bool,
    /// Pearson correlation between key and physical position (near 0 when uncorrelated).
    pub key_position_corr: f64,
    /// Share of consecutive keys whose rows sit in adjacent blocks (near 0).
    pub(crate) adjacent_share: f64,
}

impl LayoutCheck {
    /// Problems with the layout, in words (empty when it is as intended).
    pub(crate) fn problems(&self) -> Vec<String> {
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
pub(crate) struct Perm {
    n: u64,
    half: u32,
    mask: u64,
    keys: [u64; 4],
}

impl Perm {
    pub(crate) fn new(n: u64, seed: u64) -> Perm {
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
    pub(crate) fn permute(&self, i: u64) -> u64 {
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
    pub(crate) update_pct: f64,
    pub(crate) work_unit: u32,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub interval_s: f64,
    pub(crate) hot_pct: f64,
    pub(crate) hot_size_pct: f64,
    pub(crate) think_s: f64,
    pub(crate) cache_bytes: u64,
    pub timing: bool,
    pub(crate) drop_os_cache: bool,
    pub(crate) io_timing: bool,
    pub(crate) ash_hz: f64,
    pub seed: u64,
    /// PostgreSQL: trace the sessions' backends with the watch probes. `None`: when this
    /// process may (root) and the server is local, said otherwise; `Some(true)`: required
    /// (`--watch`); `Some(false)`: never (`--no-probes`).
    pub probes: Option<bool>,
}

impl RunSpec {
    /// Check the workload: clear errors for every value out of range.
    pub fn validate(&self) -> Result<()> {
        if self.sessions == 0 || self.sessions > 4096 {
            bail!("--sessions must be between 1 and 4096");
        }
        if !(0.0..=100.0).contains(&self.update_pct) {
            bail!("--update-pct must be between 0 and 100");
        }
        if self.work_unit == 0 {
            bail!("--work-unit must be at least 1");
        }
        if !(0.0..=100.0).contains(&self.hot_pct) {
            bail!("--hot-pct must be between 0 and 100");
        }
        if !(self.hot_size_pct > 0.0 && self.hot_size_pct <= 100.0) {
            bail!("--hot-size-pct must be above 0 and at most 100");
        }
        if !(self.ash_hz > 0.0 && self.ash_hz <= 100.0) {
            bail!("--ash-hz must be above 0 and at most 100");
        }
        if self.duration_s <= 0.0 {
            bail!("--duration must be positive");
        }
        if self.interval_s < 0.01 {
            bail!("--interval must be at least 10ms");
        }
        if self.cache_bytes < 64 * 1024 {
            bail!("--cache-size must be at least 64K");
        }
        Ok(())
    }
}

/// Chooses each operation's window start key (1-based) and whether it updates.
#[derive(Clone, Debug)]
pub(crate) struct KeyPicker {
    rows: u64,
    wu: u64,
    hot_p: f64,
    hot_rows: u64,
    update_p: f64,
}

impl KeyPicker {
    pub(crate) fn new(rows: u64, spec: &RunSpec) -> Result<KeyPicker> {
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
    pub(crate) fn window<R: Rng>(&self, rng: &mut R) -> (i64, i64) {
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
    pub(crate) fn is_update<R: Rng>(&self, rng: &mut R) -> bool {
        self.update_p > 0.0 && rng.gen_bool(self.update_p)
    }
}

/// Replace every password in a libpq connection string or URL with `***` (see
/// [`libpq::redact`]: the parser that connects decides what a password is).
pub(crate) fn redact_dsn(dsn: &str) -> String {
    libpq::redact(dsn)
}

/// Redact `--dsn` values in a command line.
pub(crate) fn redact_args(argv: &[String]) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::IntervalSnapshot;

    #[test]
    fn progress_counts_an_update_once_and_stops_at_the_end() {
        let p = DbProgress {
            enabled: false,
            interval_s: 2.0,
            duration_s: 5.0,
            ops_set: 0,
            disks: Default::default(),
        };
        // 30 selects, 10 updates and their 10 commits in the third 2 s interval (4 s to 5 s).
        let snap = IntervalSnapshot {
            index: 2,
            count: 50,
            flushes: 10,
            bytes: 0,
            p50_ns: 1_000,
            p99_ns: 2_000,
        };
        let l = p.line(&[snap]).unwrap();
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(&f[..3], ["5.0s", "ops/s", "20"], "{l}");
    }

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
        // Issue 22, item 7: the parser's password, however it is written.
        assert_eq!(
            redact_dsn("host=h password=abc\\ SECRET dbname=x"),
            "host=h password=*** dbname=x"
        );
        assert_eq!(
            redact_dsn("postgresql://me@db/x?pass%77ord=SECRET&sslmode=disable"),
            "postgresql://me@db/x?pass%77ord=***&sslmode=disable"
        );
        assert_eq!(
            redact_dsn("postgresql://me:pw?SECRET@db/x"),
            "postgresql://me:***@db/x"
        );
        assert_eq!(
            redact_dsn("  host=h PASSWORD=SECRET"),
            "  host=h PASSWORD=***"
        );
        assert_eq!(
            redact_dsn("host=h pasword=SECRET passfile=/p pwd=SECRET"),
            "host=h pasword=*** passfile=/p pwd=***"
        );
        // A DSN that does not parse is not shown: nothing says where its password ends.
        assert!(!redact_dsn("host=h password=abc SECRET").contains("SECRET"));
        assert!(!redact_dsn("password='SECRET").contains("SECRET"));
        for dsn in [
            "host=h password=abc\\ SECRET",
            "postgresql://me@db/x?pass%77ord=SECRET",
            "postgresql://me:pw?SECRET@db/x",
        ] {
            let p = libpq::dsn_params(dsn).unwrap();
            assert!(p["password"].contains("SECRET"), "{dsn}: {p:?}");
        }
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
        let spec = RunSpec {
            sessions: 1,
            update_pct: 25.0,
            work_unit: 64,
            duration_s: 1.0,
            warmup_s: 0.0,
            interval_s: 1.0,
            hot_pct: 50.0,
            hot_size_pct: 10.0,
            think_s: 0.0,
            cache_bytes: 512 << 10,
            timing: true,
            drop_os_cache: true,
            io_timing: true,
            ash_hz: 10.0,
            seed: 3,
            probes: None,
        };
        spec.validate().unwrap();
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
