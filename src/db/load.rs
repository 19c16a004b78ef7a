//! The SLOB layout's load loop, shared by the engines: per schema, rows in physical order with
//! keys a pseudo-random permutation ([`Perm`]) and incompressible payload, committed in chunks
//! with the progress row so that setup resumes exactly where it stopped; then the key index,
//! then every schema's layout verified. An engine says how to write a chunk, build an index and
//! check a schema ([`Loader`]); the order, the row contents and the stops live here once.

use anyhow::{bail, Result};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use super::{Layout, LayoutCheck, Perm, SetupOutcome};

/// How far one schema's table has been built, as the engine's progress table records it.
#[derive(Clone, Debug)]
pub(crate) struct LoadState {
    pub schema: u32,
    /// Rows committed.
    pub loaded: u64,
    /// Whether the key index exists.
    pub indexed: bool,
    /// Whether a layout check has been recorded.
    pub checked: bool,
}

/// The rows of one schema: row `i` has key `perm(i) + 1` and a fresh random payload.
pub(crate) struct Rows {
    perm: Perm,
    rng: SmallRng,
    pad: Vec<u8>,
}

impl Rows {
    /// Key and payload of row `i` (rows are asked for in order).
    pub(crate) fn row(&mut self, i: u64) -> (i64, &[u8]) {
        self.rng.fill_bytes(&mut self.pad);
        ((self.perm.permute(i) + 1) as i64, &self.pad[..])
    }
}

/// Permutation of the keys of schema `s`.
pub(crate) fn schema_perm(layout: &Layout, s: u32) -> Perm {
    Perm::new(
        layout.rows,
        layout.seed.wrapping_mul(1_000_003).wrapping_add(s as u64),
    )
}

/// What an engine does for the shared load loop.
pub(crate) trait Loader {
    /// Rows committed per transaction.
    const CHUNK: u64;
    /// Payload bytes per row.
    const PAD_BYTES: usize;
    /// The progress of every schema, in schema order.
    fn state(&mut self) -> Result<Vec<LoadState>>;
    /// Name of schema `s`'s table, as progress lines show it.
    fn table(&self, s: u32) -> String;
    /// Insert rows `first..first + n` of schema `s` (from `rows`) and record `first + n` rows
    /// loaded, in one transaction.
    fn load_chunk(&mut self, s: u32, first: u64, n: u64, rows: &mut Rows) -> Result<()>;
    /// Name of schema `s`'s key index, as progress lines show it.
    fn index_name(&self, s: u32) -> String;
    /// Build schema `s`'s key index and record it built, in one transaction.
    fn build_index(&mut self, s: u32) -> Result<()>;
    /// After schema `s` is loaded and indexed (`st` as it was before this call).
    fn loaded(&mut self, _st: &LoadState) -> Result<()> {
        Ok(())
    }
    /// Before the checks, and once more after them.
    fn settle(&mut self) -> Result<()> {
        Ok(())
    }
    /// Verify schema `s`'s layout.
    fn check(&mut self, s: u32) -> Result<LayoutCheck>;
    /// Record schema `s`'s check.
    fn record_check(&mut self, s: u32, check: &LayoutCheck) -> Result<()>;
}

/// Load what is missing (at most `max_rows` rows in this call), index, and verify every schema.
/// A signal stops between committed chunks, as does the row budget: the outcome then says
/// incomplete, and the next call resumes.
pub(crate) fn load_and_check<L: Loader>(
    l: &mut L,
    layout: &Layout,
    max_rows: Option<u64>,
    progress: bool,
) -> Result<SetupOutcome> {
    let prog = l.state()?;
    let mut budget = max_rows.unwrap_or(u64::MAX);
    let mut loaded_now = 0;
    let paused = |loaded_now| SetupOutcome {
        rows_loaded: loaded_now,
        complete: false,
        checks: vec![],
    };
    for p in &prog {
        let s = p.schema;
        let mut loaded = p.loaded;
        let mut report = LoadProgress::start(progress, l.table(s), loaded, layout.rows);
        let mut rows = Rows {
            perm: schema_perm(layout, s),
            rng: SmallRng::seed_from_u64(layout.seed ^ ((s as u64) << 40) ^ loaded),
            pad: vec![0u8; L::PAD_BYTES],
        };
        while loaded < layout.rows {
            // A signal (Ctrl-C, SIGTERM) stops between committed chunks: resumable.
            if budget == 0 || crate::interrupt::interrupted() {
                return Ok(paused(loaded_now));
            }
            let n = L::CHUNK.min(layout.rows - loaded).min(budget);
            l.load_chunk(s, loaded, n, &mut rows)?;
            loaded += n;
            loaded_now += n;
            budget -= n;
            report.loaded(loaded);
        }
        if crate::interrupt::interrupted() {
            return Ok(paused(loaded_now));
        }
        if !p.indexed {
            report.indexing(&l.index_name(s));
            l.build_index(s)?;
        }
        l.loaded(p)?;
    }
    l.settle()?;
    let mut checks = Vec::new();
    let mut problems = Vec::new();
    for p in &prog {
        let k = l.check(p.schema)?;
        problems.extend(k.problems());
        l.record_check(p.schema, &k)?;
        checks.push(k);
    }
    l.settle()?;
    if !problems.is_empty() {
        bail!("the layout failed verification: {}", problems.join("; "));
    }
    Ok(SetupOutcome {
        rows_loaded: loaded_now,
        complete: true,
        checks,
    })
}

/// Print setup's layout checks, one line a schema; `pages` names the pages a row spilled to and
/// `corr` the correlation measured, in the engine's terms.
pub(crate) fn print_checks(checks: &[LayoutCheck], pages: &str, corr: &str) {
    for k in checks {
        crate::outln!(
            "schema {}: {} rows in {} blocks (max {} per block), {} {pages}, index {}, \
             {corr} correlation {:.4}, adjacent-key share {:.4}",
            k.schema,
            k.rows,
            k.blocks,
            k.max_rows_per_block,
            k.overflow_pages,
            if k.index_present {
                "present"
            } else {
                "MISSING"
            },
            k.key_position_corr,
            k.adjacent_share
        );
    }
}

/// Progress of loading one table during `db setup`, shared by the engines: a line when loading
/// starts, one every 10 % of the rows, and one when the index is built — drawn only when
/// asked for and stderr is a terminal (setup's layout check is printed regardless).
pub(crate) struct LoadProgress {
    on: bool,
    table: String,
    rows: u64,
    next: u64,
}

impl LoadProgress {
    /// Start reporting on `table`, of which `loaded` of `rows` rows are already in.
    pub(crate) fn start(enabled: bool, table: String, loaded: u64, rows: u64) -> LoadProgress {
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
    pub(crate) fn loaded(&mut self, loaded: u64) {
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
    pub(crate) fn indexing(&self, index: &str) {
        if self.on {
            crate::outln!("{}: building index {index}", self.table);
        }
    }
}
