//! The workload spec: what a run does, in full, and its validation.
//!
//! The CLI (or calibration) builds a [`WorkloadSpec`]; [`WorkloadSpec::validate`] rejects every
//! bad combination with a specific message; the engine turns it into I/O through
//! [`OffsetGen`], which yields (op, offset) and its target per session: it draws a block of the
//! session's address space and its [`Place`] puts that block on a target (one target: at the
//! block's offset; striped over several: `crate::stripe`). The spec is stored verbatim in
//! the results so every figure traces back to a fully described workload.

use anyhow::{bail, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution as _, Zipf};
use serde::{Deserialize, Serialize};

use crate::stamp::{OnCorruption, VerifyMode};
use crate::units::fmt_bytes;

/// What one I/O of a session does; each kind is recorded as the block-I/O operation of the same
/// name ([`crate::recorder::IO_OPS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum IoOp {
    Read,
    Write,
}

impl IoOp {
    /// The recorded operation of this kind.
    #[inline]
    pub(crate) fn op(self) -> crate::recorder::Op {
        match self {
            IoOp::Read => crate::recorder::READ,
            IoOp::Write => crate::recorder::WRITE,
        }
    }
}

/// Access pattern.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Random reads (db file sequential read).
    Randread,
    /// Random writes (DBWR).
    Randwrite,
    /// Sequential reads (scans, direct path read), one stream per session.
    Read,
    /// Sequential writes (log writer), one stream per session.
    Write,
    /// Random mix of reads and writes (`--read-pct`).
    Randrw,
}

impl Pattern {
    /// True when the pattern writes.
    pub fn writes(self) -> bool {
        !matches!(self, Pattern::Randread | Pattern::Read)
    }
    /// True for sequential patterns.
    pub fn sequential(self) -> bool {
        matches!(self, Pattern::Read | Pattern::Write)
    }
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Randread => "randread",
            Pattern::Randwrite => "randwrite",
            Pattern::Read => "read",
            Pattern::Write => "write",
            Pattern::Randrw => "randrw",
        }
    }
}

/// I/O engine.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// pread/pwrite, one I/O in flight per session.
    Sync,
    /// io_uring, `--qd` I/Os in flight per session.
    Uring,
    /// No I/O at all: measures the tool's own cost per I/O.
    Null,
}

/// Whether the run's I/O buffers ask for transparent huge pages (`--huge-pages`), as a
/// database's buffer cache does (see `engine::buffers`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HugePages {
    /// Reserved (hugetlb) huge pages if enough are free, else transparent ones; small pages
    /// where the kernel gives none.
    #[default]
    Try,
    /// Small pages only, as a database without huge pages.
    Off,
}

/// Write durability.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase", tag = "mode", content = "every")]
pub enum SyncMode {
    /// No sync: writes may sit in caches.
    None,
    /// O_DSYNC: every write is durable when it completes (log file parallel write).
    Dsync,
    /// fdatasync after every N writes, timed as its own `sync` op (log file sync).
    Fdatasync(u32),
}

impl std::str::FromStr for SyncMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "none" => Ok(SyncMode::None),
            "dsync" | "odsync" => Ok(SyncMode::Dsync),
            "fdatasync" => Ok(SyncMode::Fdatasync(1)),
            _ => {
                if let Some(n) = s.strip_prefix("fdatasync:") {
                    match n.parse::<u32>() {
                        Ok(n) if n > 0 => Ok(SyncMode::Fdatasync(n)),
                        _ => Err(format!(
                            "`{s}`: N in fdatasync:N must be a whole number ≥ 1"
                        )),
                    }
                } else {
                    Err(format!(
                        "`{s}` is not a sync mode; use none, dsync, fdatasync or fdatasync:N"
                    ))
                }
            }
        }
    }
}

/// How random offsets are distributed over the working set.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Distribution {
    Uniform,
    /// Zipf with exponent θ over blocks; hot blocks are scattered over the working set.
    Zipf {
        theta: f64,
    },
    /// `io_share` of I/Os go to a region of `size_share` of the working set starting at
    /// `offset_share` (SLOB's HOTSPOT); the rest are uniform over the whole working set.
    Hotspot {
        io_share: f64,
        size_share: f64,
        offset_share: f64,
    },
}

impl std::str::FromStr for Distribution {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let bad = |m: &str| format!("`{s}`: {m}");
        if s == "uniform" {
            return Ok(Distribution::Uniform);
        }
        if let Some(t) = s.strip_prefix("zipf:") {
            let theta: f64 = t
                .parse()
                .map_err(|_| bad("θ in zipf:θ must be a number, e.g. zipf:0.9"))?;
            return Ok(Distribution::Zipf { theta });
        }
        if let Some(rest) = s.strip_prefix("hotspot:") {
            let parts: Vec<&str> = rest.split(':').collect();
            let pct = |x: &str| -> std::result::Result<f64, String> {
                x.trim_end_matches('%')
                    .parse::<f64>()
                    .map(|v| v / 100.0)
                    .map_err(|_| bad("hotspot:IO%:SIZE%[:OFFSET%] takes percentages"))
            };
            if parts.len() < 2 || parts.len() > 3 {
                return Err(bad(
                    "use hotspot:IO%:SIZE%[:OFFSET%], e.g. hotspot:90:5 (90 % of I/O to 5 % of the data)",
                ));
            }
            return Ok(Distribution::Hotspot {
                io_share: pct(parts[0])?,
                size_share: pct(parts[1])?,
                offset_share: if parts.len() == 3 {
                    pct(parts[2])?
                } else {
                    0.0
                },
            });
        }
        Err(bad(
            "unknown distribution; use uniform, zipf:θ or hotspot:IO%:SIZE%[:OFFSET%]",
        ))
    }
}

/// Everything a run does. Stored verbatim in the results.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WorkloadSpec {
    pub pattern: Pattern,
    /// Bytes per I/O.
    pub block_size: u64,
    /// Target path (scratch file, existing file or block device).
    pub target: String,
    /// Size of the target's data area (bytes); for a new scratch file, the size created.
    pub target_size: u64,
    /// Start of the working set within the data area.
    pub region_offset: u64,
    /// Size of the working set (0 = the whole data area from `region_offset`).
    pub region_size: u64,
    pub sessions: u32,
    /// I/Os in flight per session (1 for the sync engine).
    pub qd: u32,
    pub engine: EngineKind,
    /// O_DIRECT (bypass the page cache).
    pub direct: bool,
    pub sync: SyncMode,
    /// Share of reads for `randrw`, percent.
    pub read_pct: u32,
    /// Measured duration in seconds (after warm-up), unless `io_count` is set.
    pub duration_s: Option<f64>,
    /// Total I/Os to complete (across sessions), instead of a duration.
    pub io_count: Option<u64>,
    pub warmup_s: f64,
    pub interval_s: f64,
    pub distribution: Distribution,
    /// Open-loop rate limit, I/Os per second across all sessions.
    pub rate_iops: Option<f64>,
    /// Closed-loop think time between I/Os of a session, µs.
    pub think_us: Option<f64>,
    /// Seed of the offset generators (same seed, same offsets).
    pub seed: u64,
    /// io_uring: submit all queued I/Os in one system call (default: one call per I/O, as
    /// fio does; batching saves CPU but some devices then complete I/Os in lock-step bursts).
    #[serde(default)]
    pub batch_submit: bool,
    /// How reads are verified (`auto` is resolved against the target when the run starts).
    #[serde(default)]
    pub verify: VerifyMode,
    /// Stop at the first corrupt block, or keep going.
    #[serde(default)]
    pub on_corruption: OnCorruption,
    /// Transparent huge pages for the I/O buffers.
    #[serde(default)]
    pub huge_pages: HugePages,
    /// Every target of a run over several (`--target` given more than once), in order; empty
    /// for a run on one target (`target`). See [`crate::stripe`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// How the I/O is spread over several targets.
    #[serde(default)]
    pub stripe: StripeMode,
    /// Allocation unit of `--stripe unit`, bytes.
    #[serde(default = "default_stripe_unit")]
    pub stripe_unit: u64,
}

/// Default allocation unit of `--stripe unit` (ASM's default AU size).
pub const DEFAULT_STRIPE_UNIT: u64 = 1 << 20;

/// How a run's I/O is spread over several targets (`--stripe`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum StripeMode {
    /// The address space striped over the targets in allocation units, as ASM does.
    #[default]
    Unit,
    /// Each session on one target: session `i` on target `i mod N`.
    PerSession,
}

impl StripeMode {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            StripeMode::Unit => "unit",
            StripeMode::PerSession => "per-session",
        }
    }
}

/// The serde default of [`WorkloadSpec::stripe_unit`].
fn default_stripe_unit() -> u64 {
    DEFAULT_STRIPE_UNIT
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            pattern: Pattern::Randread,
            block_size: 8192,
            target: "iolens-scratch.dat".into(),
            target_size: 1 << 30,
            region_offset: 0,
            region_size: 0,
            sessions: 1,
            qd: 1,
            engine: EngineKind::Sync,
            direct: true,
            sync: SyncMode::None,
            read_pct: 100,
            duration_s: Some(10.0),
            io_count: None,
            warmup_s: 0.0,
            interval_s: 1.0,
            distribution: Distribution::Uniform,
            rate_iops: None,
            think_us: None,
            seed: 0x10_1e45,
            batch_submit: false,
            verify: VerifyMode::Auto,
            on_corruption: OnCorruption::Stop,
            huge_pages: HugePages::Try,
            targets: Vec::new(),
            stripe: StripeMode::Unit,
            stripe_unit: DEFAULT_STRIPE_UNIT,
        }
    }
}

impl WorkloadSpec {
    /// The working set on each target of a striped run: the spec's, rounded down to whole units
    /// (a partial unit would leave the logical space with holes).
    pub fn per_target_working_set(&self) -> u64 {
        let w = self.working_set();
        if self.target_count() > 1 && self.stripe == StripeMode::Unit {
            w / self.stripe_unit.max(1) * self.stripe_unit.max(1)
        } else {
            w
        }
    }

    /// Check the striping options (`--target` more than once, `--stripe`, `--stripe-unit`).
    pub(crate) fn validate_stripe(&self) -> Result<()> {
        let n = self.target_count();
        if n < 2 {
            return Ok(());
        }
        match self.stripe {
            StripeMode::Unit => {
                let (u, bs) = (self.stripe_unit, self.block_size);
                if u == 0 || u < bs || !u.is_multiple_of(bs) {
                    bail!(
                        "--stripe-unit {} must be a whole number of blocks (--bs {}): each I/O lies \
                         within one allocation unit, on one target",
                        fmt_bytes(u),
                        fmt_bytes(bs)
                    );
                }
                if self.working_set() < u {
                    bail!(
                        "the working set on each target ({}) is smaller than one --stripe-unit ({}): \
                         give a larger --working-set or --size, or a smaller --stripe-unit",
                        fmt_bytes(self.working_set()),
                        fmt_bytes(u)
                    );
                }
            }
            StripeMode::PerSession => {
                if (self.sessions as usize) < n {
                    bail!(
                        "--stripe per-session with {n} targets needs at least {n} sessions (one \
                         target per session; --sessions is {})",
                        self.sessions
                    );
                }
            }
        }
        Ok(())
    }

    /// How many targets the run spreads its I/O over (1 unless `targets` names several).
    pub fn target_count(&self) -> usize {
        self.targets.len().max(1)
    }

    /// Check every field and combination; the message names the option to change.
    pub fn validate(&self) -> Result<()> {
        self.validate_stripe()?;
        if self.block_size == 0 {
            bail!("--bs must be at least 1 byte");
        }
        if self.block_size > 64 << 20 {
            bail!(
                "--bs {} is larger than the 64 MiB limit",
                fmt_bytes(self.block_size)
            );
        }
        if self.direct && self.engine != EngineKind::Null && !self.block_size.is_multiple_of(512) {
            bail!(
                "--bs {} is not a multiple of 512 bytes, which O_DIRECT requires; \
                 use a multiple of the device's logical block size or --buffered",
                self.block_size
            );
        }
        if self.sessions == 0 {
            bail!("--sessions must be at least 1");
        }
        if self.sessions > 4096 {
            bail!("--sessions {} is more than the 4096 allowed", self.sessions);
        }
        if self.qd == 0 {
            bail!("--qd must be at least 1");
        }
        if self.qd > 4096 {
            bail!("--qd {} is more than the 4096 allowed", self.qd);
        }
        if self.engine == EngineKind::Sync && self.qd != 1 {
            bail!(
                "--qd {} needs an asynchronous engine: the sync engine has one I/O in flight per \
                 session; use --engine uring, or more --sessions",
                self.qd
            );
        }
        if self.pattern == Pattern::Randrw && self.read_pct > 100 {
            bail!("--read-pct must be between 0 and 100");
        }
        if self.pattern != Pattern::Randrw && self.read_pct != 100 {
            bail!("--read-pct applies only to --pattern randrw");
        }
        if !self.pattern.writes() && self.sync != SyncMode::None {
            bail!(
                "--sync applies to write patterns; {} only reads",
                self.pattern.name()
            );
        }
        if let SyncMode::Fdatasync(_) = self.sync {
            if self.engine != EngineKind::Sync {
                bail!("--sync fdatasync:N is supported with --engine sync; with uring use --sync dsync");
            }
        }
        match (self.duration_s, self.io_count) {
            (None, None) => bail!("give a --duration or an --ios count"),
            (Some(_), Some(_)) => bail!("give either --duration or --ios, not both"),
            (Some(d), None) if !positive(d) => {
                bail!("--duration must be positive")
            }
            (None, Some(0)) => bail!("--ios must be at least 1"),
            _ => {}
        }
        if !non_negative(self.warmup_s) {
            bail!("--warmup must be zero or positive");
        }
        if !(self.interval_s.is_finite() && self.interval_s >= 0.01) {
            bail!("--interval must be at least 10ms");
        }
        if self.target_size == 0 {
            bail!("--size must be positive");
        }
        if self.region_offset >= self.target_size {
            bail!(
                "--offset {} is beyond the target's data size {}",
                fmt_bytes(self.region_offset),
                fmt_bytes(self.target_size)
            );
        }
        if self
            .region_offset
            .checked_add(self.working_set())
            .is_none_or(|end| end > self.target_size)
        {
            bail!(
                "the working set ({} at offset {}) does not fit in the target ({})",
                fmt_bytes(self.working_set()),
                fmt_bytes(self.region_offset),
                fmt_bytes(self.target_size)
            );
        }
        if self.working_set() < self.block_size {
            bail!(
                "the working set ({}) is smaller than one block ({})",
                fmt_bytes(self.working_set()),
                fmt_bytes(self.block_size)
            );
        }
        if self.pattern.sequential()
            && self.working_set() / self.block_size < self.sessions as u64 * self.qd as u64
        {
            bail!("the working set is too small to give each sequential stream its own blocks");
        }
        if self.direct && !self.region_offset.is_multiple_of(512) {
            bail!("--offset must be a multiple of 512 bytes with O_DIRECT");
        }
        match self.distribution {
            Distribution::Uniform => {}
            Distribution::Zipf { theta } => {
                if !positive(theta) || theta > 10.0 {
                    bail!("zipf θ must be > 0 and ≤ 10 (typical: 0.8 to 1.2), got {theta}");
                }
                if self.pattern.sequential() {
                    bail!("--dist zipf applies to random patterns");
                }
            }
            Distribution::Hotspot {
                io_share,
                size_share,
                offset_share,
            } => {
                let ok = (0.0..=1.0).contains(&io_share)
                    && size_share > 0.0
                    && size_share <= 1.0
                    && (0.0..1.0).contains(&offset_share)
                    && offset_share + size_share <= 1.0 + 1e-9;
                if !ok {
                    bail!(
                        "hotspot percentages must satisfy 0 ≤ IO% ≤ 100, 0 < SIZE% ≤ 100 and \
                         OFFSET% + SIZE% ≤ 100"
                    );
                }
                if self.pattern.sequential() {
                    bail!("--dist hotspot applies to random patterns");
                }
            }
        }
        if self.batch_submit && self.engine != EngineKind::Uring {
            bail!("--batch-submit applies to --engine uring");
        }
        if let Some(r) = self.rate_iops {
            if !positive(r) {
                bail!("--rate must be a positive number of I/Os per second");
            }
            // Each session issues one I/O per sessions/rate seconds: at most the longest
            // duration iolens takes.
            if self.sessions as f64 / r > crate::units::MAX_DURATION_S {
                bail!(
                    "--rate {r:?} is too low: each of the {} session(s) would wait more than 366 \
                     days between I/Os",
                    self.sessions
                );
            }
        }
        if let Some(t) = self.think_us {
            if !non_negative(t) {
                bail!("--think must be zero or positive");
            }
            if self.engine == EngineKind::Uring {
                bail!("--think applies to the sync engine (one I/O at a time per session)");
            }
            if self.rate_iops.is_some() {
                bail!("--think (closed loop) and --rate (open loop) cannot be combined");
            }
        }
        Ok(())
    }

    /// Working-set bytes.
    pub fn working_set(&self) -> u64 {
        if self.region_size == 0 {
            self.target_size.saturating_sub(self.region_offset)
        } else {
            self.region_size
        }
    }

    /// Number of whole blocks in the working set.
    pub fn blocks(&self) -> u64 {
        self.working_set() / self.block_size
    }

    /// Short label for progress and tables: `randread 8 KiB sync s=4`.
    pub fn label(&self) -> String {
        let mut s = format!(
            "{} {} {}",
            self.pattern.name(),
            fmt_bytes(self.block_size),
            match self.engine {
                EngineKind::Sync => "sync",
                EngineKind::Uring => "uring",
                EngineKind::Null => "null",
            }
        );
        s += &format!(" sessions={}", self.sessions);
        if self.engine == EngineKind::Uring {
            s += &format!(" qd={}", self.qd);
        }
        if self.target_count() > 1 {
            s += &format!(" targets={}", self.target_count());
        }
        s
    }

    /// The plan in words, as `--explain` prints it.
    pub fn explain(&self) -> String {
        let mut out = String::new();
        let what = match self.pattern {
            Pattern::Randread => "random reads",
            Pattern::Randwrite => "random writes",
            Pattern::Read => "sequential reads (one stream per session)",
            Pattern::Write => "sequential writes (one stream per session)",
            Pattern::Randrw => "random reads and writes",
        };
        out += &format!(
            "{} of {} each, {}",
            what,
            fmt_bytes(self.block_size),
            if self.pattern == Pattern::Randrw {
                format!("{} % reads, ", self.read_pct)
            } else {
                String::new()
            }
        );
        out += &format!(
            "{} session(s) × {} in flight, engine {}, {}",
            self.sessions,
            self.qd,
            match self.engine {
                EngineKind::Sync => "sync (pread/pwrite)",
                EngineKind::Uring => "io_uring",
                EngineKind::Null => "null (no I/O)",
            },
            if self.direct {
                "O_DIRECT"
            } else {
                "buffered (page cache)"
            }
        );
        if self.engine != EngineKind::Null {
            out += match self.huge_pages {
                HugePages::Try => ", I/O buffers on huge pages where the kernel gives them",
                HugePages::Off => ", I/O buffers on small pages",
            };
        }
        if self.pattern.writes() {
            out += &format!(
                ", sync {}",
                match self.sync {
                    SyncMode::None => "none".to_string(),
                    SyncMode::Dsync => "O_DSYNC".to_string(),
                    SyncMode::Fdatasync(n) => format!("fdatasync every {n} write(s)"),
                }
            );
        }
        if self.target_count() > 1 {
            let each = self.per_target_working_set();
            out += &format!(
                "\n  {} targets: {}; working set {} at offset {} on each ({} in all), {}",
                self.targets.len(),
                self.targets.join(", "),
                fmt_bytes(each),
                fmt_bytes(self.region_offset),
                fmt_bytes(each * self.targets.len() as u64),
                match self.stripe {
                    StripeMode::Unit => format!(
                        "striped in {} allocation units (unit k on target k mod {})",
                        fmt_bytes(self.stripe_unit),
                        self.targets.len()
                    ),
                    StripeMode::PerSession => format!(
                        "one target per session (session i on target i mod {})",
                        self.targets.len()
                    ),
                }
            );
        } else {
            out += &format!(
                "\n  target {} ({}), working set {} at offset {}",
                self.target,
                fmt_bytes(self.target_size),
                fmt_bytes(self.working_set()),
                fmt_bytes(self.region_offset)
            );
        }
        match self.distribution {
            Distribution::Uniform => {}
            Distribution::Zipf { theta } => out += &format!(", zipf θ={theta}"),
            Distribution::Hotspot {
                io_share,
                size_share,
                offset_share,
            } => {
                out += &format!(
                    ", hot spot: {:.0} % of I/O to {:.1} % of the data at {:.1} %",
                    io_share * 100.0,
                    size_share * 100.0,
                    offset_share * 100.0
                )
            }
        }
        out += "\n  ";
        match (self.duration_s, self.io_count) {
            (Some(d), _) => out += &format!("{d} s measured"),
            (_, Some(n)) => out += &format!("{n} I/Os measured"),
            _ => {}
        }
        out += &format!(
            " after {} s warm-up, {} s intervals",
            self.warmup_s, self.interval_s
        );
        if let Some(r) = self.rate_iops {
            out += &format!(", open loop at {r} IOPS (latency from intended start)");
        }
        if let Some(t) = self.think_us {
            out += &format!(", think time {t} µs");
        }
        if self.engine != EngineKind::Null {
            out += "\n  ";
            out += match self.verify {
                VerifyMode::Auto => {
                    "verification auto: full on an iolens scratch file, none on other targets"
                }
                VerifyMode::None => "verification none: data read is not looked at",
                VerifyMode::Header => {
                    "verification header: magic, target id, offset and generation of every 512 B unit"
                }
                VerifyMode::Full => {
                    "verification full: header fields and CRC32C of every 512 B unit"
                }
            };
            if self.pattern.writes() {
                out += "; written blocks are stamped";
            }
            if self.verify != VerifyMode::None {
                out += match self.on_corruption {
                    OnCorruption::Stop => "; stop at the first corrupt block",
                    OnCorruption::Continue => "; keep going past corrupt blocks",
                };
            }
        }
        out
    }
}

/// Where the blocks an [`OffsetGen`] draws land: the generator is compiled for each kind, the
/// placement done where the block is drawn (no work per I/O for one target beyond the block's
/// offset; see `crate::stripe` for several).
pub(crate) trait Place: Copy {
    /// Every block lands on one target: the generator sets its target once, not per I/O.
    const ONE_TARGET: bool = false;
    /// The target (index) and byte offset within its data area of block `block` of the
    /// generator's address space.
    fn place(&self, block: u64) -> (u32, u64);
}

/// Every block on this one target, block `b` at `base + b × bs` (a one-target run, or a session
/// of `--stripe per-session`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OneTarget {
    target: u32,
    base: u64,
    bs: u64,
}

impl OneTarget {
    /// Target `target`, its blocks those of `spec` (its region offset and block size).
    pub(crate) fn new(target: u32, spec: &WorkloadSpec) -> OneTarget {
        OneTarget {
            target,
            base: spec.region_offset,
            bs: spec.block_size,
        }
    }
}

impl Place for OneTarget {
    const ONE_TARGET: bool = true;
    #[inline(always)]
    fn place(&self, block: u64) -> (u32, u64) {
        (self.target, self.base + block * self.bs)
    }
}

/// Per-session generator of I/Os: (op, offset within the target's data area), and the target
/// of the last one drawn ([`OffsetGen::target`]).
pub(crate) struct OffsetGen<P: Place> {
    rng: SmallRng,
    place: P,
    /// The target of the I/O last drawn (kept here rather than handed back with the offset:
    /// a third value would come back through memory, and a session on one target never
    /// changes it).
    target: u32,
    nblocks: u64,
    pattern: Pattern,
    read_pct: u32,
    // sequential stream state
    seq_start: u64,
    seq_len: u64,
    seq_pos: u64,
    zipf: Option<(Zipf<f64>, u64)>,
    hot: Option<(f64, u64, u64)>,
}

fn positive(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

fn non_negative(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl<P: Place> OffsetGen<P> {
    /// Generator for session `session` of `spec` (deterministic given the spec's seed), its
    /// blocks (`spec`'s working set) placed by `place`.
    pub(crate) fn new(spec: &WorkloadSpec, session: u32, place: P) -> OffsetGen<P> {
        let nblocks = spec.blocks().max(1);
        let streams = spec.sessions as u64;
        let per = (nblocks / streams).max(1);
        let zipf = match spec.distribution {
            Distribution::Zipf { theta } => {
                let z = Zipf::new(nblocks, theta).expect("validated θ");
                // A multiplier coprime to nblocks scatters ranks over the working set.
                let mut m = (0x9E37_79B9_7F4A_7C15u64 % nblocks.max(2)) | 1;
                while gcd(m, nblocks) != 1 {
                    m += 2;
                }
                Some((z, m))
            }
            _ => None,
        };
        let hot = match spec.distribution {
            Distribution::Hotspot {
                io_share,
                size_share,
                offset_share,
            } => {
                let start = (offset_share * nblocks as f64) as u64;
                let len = ((size_share * nblocks as f64) as u64)
                    .max(1)
                    .min(nblocks - start.min(nblocks - 1));
                Some((io_share, start.min(nblocks - 1), len))
            }
            _ => None,
        };
        OffsetGen {
            rng: SmallRng::seed_from_u64(
                spec.seed ^ (session as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D),
            ),
            place,
            target: place.place(0).0,
            nblocks,
            pattern: spec.pattern,
            read_pct: spec.read_pct,
            seq_start: session as u64 * per,
            seq_len: if session as u64 == streams - 1 {
                nblocks - session as u64 * per
            } else {
                per
            },
            seq_pos: 0,
            zipf,
            hot,
        }
    }

    /// Next I/O: op and byte offset within its target's data area; its target is then
    /// [`OffsetGen::target`]. Never inlined: the session loop that calls it is then the same
    /// code whatever the placement, which only this function's own instance differs by.
    #[inline(never)]
    pub(crate) fn next_io(&mut self) -> (IoOp, u64) {
        let block = match self.pattern {
            Pattern::Read | Pattern::Write => {
                let b = self.seq_start + self.seq_pos;
                self.seq_pos += 1;
                if self.seq_pos >= self.seq_len {
                    self.seq_pos = 0;
                }
                b
            }
            _ => self.random_block(),
        };
        let op = match self.pattern {
            Pattern::Randread | Pattern::Read => IoOp::Read,
            Pattern::Randwrite | Pattern::Write => IoOp::Write,
            Pattern::Randrw => {
                if self.rng.gen_range(0..100) < self.read_pct {
                    IoOp::Read
                } else {
                    IoOp::Write
                }
            }
        };
        let (target, offset) = self.place.place(block);
        if !P::ONE_TARGET {
            self.target = target;
        }
        (op, offset)
    }

    /// The target (index) of the I/O last drawn.
    #[inline(always)]
    pub(crate) fn target(&self) -> u32 {
        self.target
    }

    #[inline]
    fn random_block(&mut self) -> u64 {
        if let Some((z, m)) = &self.zipf {
            let rank = z.sample(&mut self.rng) as u64 - 1;
            return ((rank as u128 * *m as u128) % self.nblocks as u128) as u64;
        }
        if let Some((share, start, len)) = self.hot {
            if self.rng.gen::<f64>() < share {
                return start + self.rng.gen_range(0..len);
            }
        }
        self.rng.gen_range(0..self.nblocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> WorkloadSpec {
        WorkloadSpec {
            target_size: 8 << 20,
            ..Default::default()
        }
    }

    #[test]
    fn validation_messages() {
        let cases: Vec<(WorkloadSpec, &str)> = vec![
            (WorkloadSpec { qd: 8, ..spec() }, "asynchronous engine"),
            (
                WorkloadSpec {
                    block_size: 1000,
                    ..spec()
                },
                "multiple of 512",
            ),
            (
                WorkloadSpec {
                    sessions: 0,
                    ..spec()
                },
                "--sessions",
            ),
            (
                WorkloadSpec {
                    read_pct: 50,
                    ..spec()
                },
                "randrw",
            ),
            (
                WorkloadSpec {
                    sync: SyncMode::Dsync,
                    ..spec()
                },
                "write patterns",
            ),
            (
                WorkloadSpec {
                    duration_s: None,
                    ..spec()
                },
                "--duration",
            ),
            (
                WorkloadSpec {
                    region_size: 16 << 20,
                    ..spec()
                },
                "does not fit",
            ),
            (
                WorkloadSpec {
                    rate_iops: Some(-1.0),
                    ..spec()
                },
                "--rate",
            ),
            (
                WorkloadSpec {
                    distribution: Distribution::Zipf { theta: 0.0 },
                    ..spec()
                },
                "zipf",
            ),
        ];
        for (s, want) in cases {
            let e = s.validate().unwrap_err().to_string();
            assert!(e.contains(want), "expected `{want}` in `{e}`");
        }
        spec().validate().unwrap();
    }

    #[test]
    fn parse_dist_and_sync() {
        assert_eq!(
            "hotspot:90:5".parse::<Distribution>().unwrap(),
            Distribution::Hotspot {
                io_share: 0.9,
                size_share: 0.05,
                offset_share: 0.0
            }
        );
        assert!("zipf:x".parse::<Distribution>().is_err());
        assert_eq!(
            "fdatasync:4".parse::<SyncMode>().unwrap(),
            SyncMode::Fdatasync(4)
        );
        assert!("fdatasync:0".parse::<SyncMode>().is_err());
    }

    #[test]
    fn offsets_in_range_aligned_and_mixed() {
        let s = WorkloadSpec {
            pattern: Pattern::Randrw,
            read_pct: 80,
            region_offset: 1 << 20,
            region_size: 4 << 20,
            ..spec()
        };
        s.validate().unwrap();
        let mut g = OffsetGen::new(&s, 0, OneTarget::new(0, &s));
        let mut reads = 0;
        for _ in 0..100_000 {
            let (op, off) = g.next_io();
            assert!(off >= 1 << 20 && off + 8192 <= 5 << 20 && off % 8192 == 0);
            if op == IoOp::Read {
                reads += 1;
            }
        }
        assert!((78_000..82_000).contains(&reads), "{reads}");
    }

    #[test]
    fn hotspot_and_zipf_concentrate() {
        let s = WorkloadSpec {
            distribution: Distribution::Hotspot {
                io_share: 0.9,
                size_share: 0.1,
                offset_share: 0.5,
            },
            ..spec()
        };
        let mut g = OffsetGen::new(&s, 0, OneTarget::new(0, &s));
        let n = s.blocks();
        let hot = (0..50_000)
            .filter(|_| {
                let b = g.next_io().1 / 8192;
                b >= n / 2 && b < n / 2 + n / 10
            })
            .count();
        // 90 % directly plus 10 % × 10 % of the uniform part.
        assert!((45_000..46_000).contains(&hot), "{hot}");

        let z = WorkloadSpec {
            distribution: Distribution::Zipf { theta: 1.2 },
            ..spec()
        };
        let mut g = OffsetGen::new(&z, 0, OneTarget::new(0, &z));
        let mut counts = std::collections::HashMap::new();
        for _ in 0..50_000 {
            *counts.entry(g.next_io().1).or_insert(0u32) += 1;
        }
        let top = *counts.values().max().unwrap();
        assert!(top > 5_000, "zipf top block gets a large share: {top}");
    }

    #[test]
    fn sequential_streams_are_disjoint() {
        let s = WorkloadSpec {
            pattern: Pattern::Read,
            sessions: 4,
            ..spec()
        };
        let per = s.blocks() / 4;
        for sess in 0..4u32 {
            let mut g = OffsetGen::new(&s, sess, OneTarget::new(0, &s));
            let first = g.next_io().1 / 8192;
            assert_eq!(first, sess as u64 * per);
            assert_eq!(g.next_io().1 / 8192, first + 1);
        }
    }
}
