//! The SLOB method on PostgreSQL (pgio-style), through the synchronous `postgres` client.
//!
//! Layout: per schema a heap table `iolens_t{s}(k bigint, v bigint, pad bytea)` with
//! `fillfactor=50`, `pad` 3000 random bytes stored PLAIN (never compressed or TOASTed): one row
//! fills just over a third of a page, so a second row never fits under the fillfactor (one row
//! per 8 KiB block) while an updated version still fits in the same block (HOT update, no index
//! change). Rows are COPYed in physical order with `k` a pseudo-random permutation, then a B-tree
//! index on `k` is built and the table vacuumed. Autovacuum is off for these tables so it does
//! not add I/O to measurements. Progress lives in `iolens_progress`, committed with each chunk.
//!
//! Run: each session sets `enable_bitmapscan=off` and `enable_seqscan=off` so the window is read
//! by a plain index scan (one synchronous single-block read per heap block, no prefetch), and
//! `track_io_timing=on`. Client-side latency per operation goes into the recorder; physical and
//! logical reads and read time come from `pg_stat_io` (PostgreSQL 16+) or `pg_stat_database`;
//! wait events are sampled from `pg_stat_activity` several times a second (ASH-style).
//! PostgreSQL reads through the OS page cache, so its "reads" include page-cache hits: the device
//! view from /proc/diskstats (when the server runs on this host) tells them apart.

mod errors;
mod probes;
mod run;
mod sampling;
mod setup;
mod tablespace;

pub(crate) use errors::pg_msg;
pub use errors::{catalog, connect};
pub use run::run;
pub(crate) use setup::drop_layout;
pub use setup::setup;

use anyhow::Result;

use super::{Layout, RunSpec};
use crate::results::Results;
use crate::session::RunContext;

/// Random payload bytes per row (see the module docs for why this size).
pub const PAD_BYTES: usize = 3000;
pub(super) const FORMAT: &str = "iolens-slob-pg-1";
pub(super) const CHUNK: u64 = 2048;

pub use super::SetupOutcome;

/// The PostgreSQL engine: the layout in the database reached through `dsn`, over one
/// tablespace per directory of `dirs` when there are any ([`tablespace`]).
pub(crate) struct Postgres {
    pub dsn: String,
    pub dirs: Vec<std::path::PathBuf>,
}

impl super::DbEngine for Postgres {
    fn setup(&self, layout: &Layout, max: Option<u64>, show: bool) -> Result<SetupOutcome> {
        setup(&self.dsn, &self.dirs, layout, max, show)
    }

    fn run(&self, spec: &RunSpec, ctx: RunContext<'_>, cmdline: Vec<String>) -> Result<Results> {
        run(&self.dsn, &self.dirs, spec, ctx, cmdline)
    }

    fn drop_layout(&self) -> Result<()> {
        drop_layout(&self.dsn)
    }
}
