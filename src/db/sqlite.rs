//! The SLOB method on an embedded SQLite database (the default engine; nothing to install).
//!
//! Layout: one file `DIR/iolens-slob.db` with 8 KiB pages; per schema a rowid table
//! `t{s}(id INTEGER PRIMARY KEY, k, v, pad)` loaded in `id` order (its physical order, the table
//! B-tree is clustered on `id`) with `k` a pseudo-random permutation of `1..=rows`, and an index
//! `t{s}_k` on `k`. `pad` is 4600 random bytes, so exactly one row fits a page and none spills to
//! overflow pages. Progress is kept in `iolens_progress` in the same transaction as each loaded
//! chunk, so setup resumes exactly where it stopped.
//!
//! Run: each session opens its own connection through the timing VFS shim ([`super::vfs`]) with
//! `mmap_size=0`, a small `cache_size` and WAL journaling with `synchronous=FULL`. WAL is chosen
//! because rollback-journal mode blocks every reader while a writer commits, which would turn an
//! update mix into lock waits rather than I/O; with WAL, readers keep reading while one writer
//! appends its pages to the log and syncs it at every commit (the `log file sync` path), and
//! checkpoints write pages back to the main file (the DBWR path). Logical and physical reads come
//! from SQLite's own cache hit/miss counters (`sqlite3_db_status`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rusqlite::{ffi, params, Connection, OpenFlags, OptionalExtension};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::load::{self, print_checks, LoadState, Loader, Rows};
use super::vfs::{self, IoCounts, IoCtx};
use super::{host, KeyPicker, Layout, LayoutCheck, RunSpec, BLOCK};
use crate::recorder::{self, SessionRecorder, IO_OPS};
use crate::results::evidence::{DbEngine, DbInfo};
use crate::results::{Kind, PageCacheInfo, Results, RunResult, SessionSummary};
use crate::session::RunContext;
use crate::session::{self, Gate, Plan};
use crate::units::fmt_bytes;

/// File name of the database inside `--dir`.
pub const DB_FILE: &str = "iolens-slob.db";
/// Random payload bytes per row: more than half a page (one row per page), less than SQLite's
/// largest local payload (no overflow pages).
pub const PAD_BYTES: usize = 4600;
/// Identifies the layout version in `iolens_meta`.
const FORMAT: &str = "iolens-slob-sqlite-1";
/// Rows loaded per transaction.
const CHUNK: u64 = 1024;

/// Path of the database file in `dir`.
pub fn db_path(dir: &Path) -> PathBuf {
    dir.join(DB_FILE)
}

/// [`db_path`], refused when it or a file SQLite keeps beside it (`-wal`, `-shm`, `-journal`)
/// is a symbolic link or anything but a regular file: SQLite resolves a link to the database
/// and would create or write the file it points to (as root, anywhere). The files are opened
/// with `SQLITE_OPEN_NOFOLLOW` too, so a link planted after this check is refused by SQLite.
fn db_file(dir: &Path) -> Result<PathBuf> {
    let path = db_path(dir);
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = path.clone().into_os_string();
        name.push(suffix);
        let p = PathBuf::from(name);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => bail!(
                "{} is a symbolic link: iolens never opens its database through a link (it would \
                 write where the link points); remove the link",
                p.display()
            ),
            Ok(m) if !m.is_file() => bail!(
                "{} is not a regular file; iolens keeps its SQLite database only in regular files",
                p.display()
            ),
            _ => {}
        }
    }
    Ok(path)
}

fn open_plain(path: &Path, create: bool) -> Result<Connection> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let c = Connection::open_with_flags(path, flags)
        .with_context(|| format!("cannot open SQLite database {}", path.display()))?;
    c.busy_timeout(Duration::from_secs(30))?;
    Ok(c)
}

fn table_exists(c: &Connection, name: &str) -> Result<bool> {
    Ok(c.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?1",
        [name],
        |r| r.get::<_, i64>(0),
    )? > 0)
}

/// Per-schema load state.
#[derive(Clone, Debug)]
struct Progress {
    schema: u32,
    loaded: u64,
    indexed: bool,
    check: Option<LayoutCheck>,
}

/// Which part of a layout a database file holds: a layout over `of` directories (`--dir` given
/// `of` times, as a database's data files spread over several disks) keeps schema `s` in the
/// file of directory `s mod of`, so this file holds the schemas `s` with `s mod of == index`.
/// A layout in one directory is part 0 of 1 (and files written before parts record none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Part {
    pub index: u32,
    pub of: u32,
}

impl Part {
    const WHOLE: Part = Part { index: 0, of: 1 };

    /// The schemas of `layout` this part holds.
    fn schemas(self, layout: &Layout) -> impl Iterator<Item = u32> {
        (0..layout.schemas).filter(move |s| s % self.of == self.index)
    }
}

fn read_state(c: &Connection) -> Result<Option<(Layout, Vec<Progress>)>> {
    Ok(read_state_part(c)?.map(|(l, p, _)| (l, p)))
}

fn read_state_part(c: &Connection) -> Result<Option<(Layout, Vec<Progress>, Part)>> {
    if !table_exists(c, "iolens_meta")? {
        return Ok(None);
    }
    let format: Option<String> = c
        .query_row(
            "SELECT value FROM iolens_meta WHERE key='format'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if format.as_deref() != Some(FORMAT) {
        bail!("the database has an iolens_meta table but not the {FORMAT} layout");
    }
    let lj: String = c.query_row(
        "SELECT value FROM iolens_meta WHERE key='layout'",
        [],
        |r| r.get(0),
    )?;
    let layout: Layout = serde_json::from_str(&lj).context("iolens_meta layout is damaged")?;
    let part: Part = match c
        .query_row("SELECT value FROM iolens_meta WHERE key='part'", [], |r| {
            r.get::<_, String>(0)
        })
        .optional()?
    {
        Some(p) => serde_json::from_str(&p).context("iolens_meta part is damaged")?,
        None => Part::WHOLE,
    };
    let mut st =
        c.prepare("SELECT schema, loaded, indexed, checked FROM iolens_progress ORDER BY schema")?;
    let prog = st
        .query_map([], |r| {
            let check: Option<String> = r.get(3)?;
            Ok(Progress {
                schema: r.get::<_, i64>(0)? as u32,
                loaded: r.get::<_, i64>(1)? as u64,
                indexed: r.get::<_, i64>(2)? != 0,
                check: check.and_then(|s| serde_json::from_str(&s).ok()),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Some((layout, prog, part)))
}

pub use super::SetupOutcome;

/// The SQLite engine: the layout in one database file in each of `dirs` (schema `s` in
/// `dirs[s mod dirs.len()]`, see [`Part`]).
pub struct Sqlite {
    pub dirs: Vec<PathBuf>,
}

impl super::DbEngine for Sqlite {
    fn setup(&self, layout: &Layout, max: Option<u64>, show: bool) -> Result<SetupOutcome> {
        setup_over(&self.dirs, layout, max, show)
    }

    fn run(&self, spec: &RunSpec, ctx: RunContext<'_>, cmdline: Vec<String>) -> Result<Results> {
        run_over(&self.dirs, spec, ctx, cmdline)
    }

    fn drop_layout(&self) -> Result<()> {
        for d in &self.dirs {
            drop_layout(d)?;
        }
        Ok(())
    }
}

mod setup;
pub(crate) use setup::drop_layout;
use setup::*;
pub use setup::{setup, setup_over};

fn db_status(c: &Connection, op: i32) -> u64 {
    let (mut cur, mut hi) = (0i32, 0i32);
    // SAFETY: the handle is valid for the connection's lifetime; out-pointers are locals.
    unsafe { ffi::sqlite3_db_status(c.handle(), op, &mut cur, &mut hi, 0) };
    cur.max(0) as u64
}

#[derive(Clone, Copy, Debug, Default)]
struct DbCounters {
    hits: u64,
    misses: u64,
    writes: u64,
}

impl DbCounters {
    fn read(c: &Connection) -> DbCounters {
        DbCounters {
            hits: db_status(c, ffi::SQLITE_DBSTATUS_CACHE_HIT),
            misses: db_status(c, ffi::SQLITE_DBSTATUS_CACHE_MISS),
            writes: db_status(c, ffi::SQLITE_DBSTATUS_CACHE_WRITE),
        }
    }
    fn since(self, a: DbCounters) -> DbCounters {
        DbCounters {
            hits: self.hits - a.hits,
            misses: self.misses - a.misses,
            writes: self.writes - a.writes,
        }
    }
}

/// What one session reports back.
#[derive(Debug, Default)]
struct SessionOut {
    io: IoCounts,
    db: DbCounters,
    select_ops: u64,
    update_ops: u64,
    statements: u64,
    commits: u64,
    rows: u64,
    busy: u64,
    run_ns: u64,
    wait_ns: u64,
    finished: Option<Instant>,
    io_summary: Option<SessionSummary>,
    op_summary: Option<SessionSummary>,
}

struct Stmts<'c> {
    sel: rusqlite::Statement<'c>,
    upd: rusqlite::Statement<'c>,
    begin: rusqlite::Statement<'c>,
    commit: rusqlite::Statement<'c>,
    rollback: rusqlite::Statement<'c>,
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// One SLOB operation. Returns Ok(true) if it was an update.
fn one_op(
    st: &mut Stmts<'_>,
    picker: &KeyPicker,
    rng: &mut SmallRng,
    out: &mut SessionOut,
) -> Result<bool> {
    let (lo, hi) = picker.window(rng);
    if picker.is_update(rng) {
        if let Err(e) = st.begin.execute([]) {
            if is_busy(&e) {
                out.busy += 1;
                return Ok(true);
            }
            return Err(e.into());
        }
        match st.upd.execute([lo, hi]) {
            Ok(n) => out.rows += n as u64,
            Err(e) => {
                let _ = st.rollback.execute([]);
                if is_busy(&e) {
                    out.busy += 1;
                    return Ok(true);
                }
                return Err(e.into());
            }
        }
        if let Err(e) = st.commit.execute([]) {
            let _ = st.rollback.execute([]);
            if is_busy(&e) {
                out.busy += 1;
                return Ok(true);
            }
            return Err(e.into());
        }
        out.statements += 3;
        out.commits += 1;
        out.update_ops += 1;
        Ok(true)
    } else {
        let n: i64 = st.sel.query_row([lo, hi], |r| r.get(0))?;
        out.rows += n as u64;
        out.statements += 1;
        out.select_ops += 1;
        Ok(false)
    }
}

fn session(
    path: PathBuf,
    (part, parts): (usize, usize),
    schema: u32,
    picker: KeyPicker,
    spec: RunSpec,
    seed: u64,
    gate: Gate<()>,
) -> Result<SessionOut> {
    let opened = (|| -> Result<Connection> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let c = if spec.timing {
            Connection::open_with_flags_and_vfs(&path, flags, vfs::VFS_NAME)
        } else {
            Connection::open_with_flags(&path, flags)
        }
        .with_context(|| format!("cannot open {}", path.display()))?;
        c.busy_timeout(Duration::from_secs(30))?;
        c.execute_batch(&format!(
            "PRAGMA mmap_size=0; PRAGMA cache_size=-{}; PRAGMA synchronous=FULL; \
             PRAGMA temp_store=MEMORY;",
            (spec.cache_bytes / 1024).max(64)
        ))?;
        Ok(c)
    })();
    let conn = opened?;
    let mut st = Stmts {
        sel: conn.prepare(&format!(
            "SELECT count(v) FROM t{schema} INDEXED BY t{schema}_k WHERE k BETWEEN ?1 AND ?2"
        ))?,
        upd: conn.prepare(&format!(
            "UPDATE t{schema} INDEXED BY t{schema}_k SET v = v + 1 WHERE k BETWEEN ?1 AND ?2"
        ))?,
        begin: conn.prepare("BEGIN IMMEDIATE")?,
        commit: conn.prepare("COMMIT")?,
        rollback: conn.prepare("ROLLBACK")?,
    };
    let Some(start) = gate.ready(()) else {
        return Ok(SessionOut::default());
    };
    let end = start.end.unwrap_or(start.base);
    // One recorder per set of the plan: main-file I/O and log I/O per part, statements; this
    // session's part's (the others, dropped, say it records nothing there).
    let mut recs: Vec<Option<SessionRecorder>> = start.recs.into_iter().map(Some).collect();
    let mut take = |i: usize| {
        recs.get_mut(i)
            .and_then(Option::take)
            .ok_or_else(|| anyhow::anyhow!("a session needs {} recorders", 2 * parts + 1))
    };
    let (main, log, mut ops_rec) = (take(part)?, take(parts + part)?, take(2 * parts)?);
    drop(recs);
    let think = Duration::from_secs_f64(spec.think_s);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut warm = SessionOut::default();
    // Warm-up: nothing recorded.
    while Instant::now() < start.base {
        if crate::interrupt::interrupted() {
            break;
        }
        one_op(&mut st, &picker, &mut rng, &mut warm)?;
        if !think.is_zero() {
            // A signal wakes it.
            crate::interrupt::sleep_unless_interrupted(think);
        }
    }
    let mut out = SessionOut::default();
    let mut ctx = IoCtx {
        main,
        log,
        counts: IoCounts::default(),
    };
    let db0 = DbCounters::read(&conn);
    let tid = crate::sys::gettid();
    let s0 = crate::sys::schedstat(tid);
    {
        let _installed = if spec.timing {
            Some(vfs::install(&mut ctx))
        } else {
            None
        };
        loop {
            let t0 = Instant::now();
            if t0 >= end || crate::interrupt::flag().load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            let upd = one_op(&mut st, &picker, &mut rng, &mut out)?;
            let t1 = Instant::now();
            ops_rec.record(if upd { super::UPDATE } else { super::SELECT }, t0, t1, 0);
            if !think.is_zero() {
                // No further than the end; a signal wakes it.
                crate::interrupt::sleep_unless_interrupted(
                    think.min(end.saturating_duration_since(Instant::now())),
                );
            }
        }
    }
    out.finished = Some(Instant::now());
    out.db = DbCounters::read(&conn).since(db0);
    if let (Some(a), Some(b)) = (s0, crate::sys::schedstat(tid)) {
        out.run_ns = b.0.saturating_sub(a.0);
        out.wait_ns = b.1.saturating_sub(a.1);
    }
    out.io = ctx.counts;
    out.io_summary = Some(recorder::session_summary(&ctx.main));
    out.op_summary = Some(recorder::session_summary(&ops_rec));
    drop(st);
    drop(ctx);
    drop(ops_rec);
    Ok(out)
}

/// Read the layout of `dir`, checking that setup completed.
fn open_layout(dir: &Path) -> Result<(Layout, PathBuf, Part)> {
    let path = db_file(dir)?;
    if !path.exists() {
        bail!(
            "no iolens database in {}: run `iolens db setup --engine sqlite --dir {}` first",
            dir.display(),
            dir.display()
        );
    }
    let c = open_plain(&path, false)?;
    let (layout, prog, part) = read_state_part(&c)?.with_context(|| {
        format!(
            "{} was not created by `iolens db setup` (no iolens_meta table)",
            path.display()
        )
    })?;
    if prog
        .iter()
        .any(|p| p.loaded < layout.rows || !p.indexed || p.check.is_none())
    {
        let st: Vec<String> = prog
            .iter()
            .map(|p| {
                format!(
                    "schema {}: {} of {} rows{}{}",
                    p.schema,
                    p.loaded,
                    layout.rows,
                    if p.indexed { "" } else { ", no index yet" },
                    if p.check.is_some() {
                        ""
                    } else {
                        ", not verified"
                    }
                )
            })
            .collect();
        bail!(
            "setup of {} is incomplete ({}); rerun the same `iolens db setup` to resume",
            path.display(),
            st.join("; ")
        );
    }
    // Start from an empty WAL so every page read is a main-database read.
    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .context("cannot checkpoint the WAL before the run")?;
    Ok((layout, path, part))
}

/// Run the SLOB work loop on the SQLite layout in `dir`.
/// `ctx.block_watch` traces the sessions' own I/O (`--watch`).
pub fn run(
    dir: &Path,
    spec: &RunSpec,
    ctx: RunContext<'_>,
    cmdline: Vec<String>,
) -> Result<Results> {
    run_over(&[dir.to_path_buf()], spec, ctx, cmdline)
}

/// Every part of the layout over `dirs`, checked complete and in setup's order before the
/// run touches any of them: the one layout and each file's path.
fn open_parts(dirs: &[PathBuf]) -> Result<(Layout, Vec<PathBuf>)> {
    distinct(dirs)?;
    let n = dirs.len() as u32;
    let mut layout: Option<Layout> = None;
    let mut paths: Vec<PathBuf> = Vec::new();
    for (k, d) in dirs.iter().enumerate() {
        let (l, path, part) = explain_error(open_layout(d), d)?;
        let want = Part {
            index: k as u32,
            of: n,
        };
        if part != want {
            bail!(
                "{} holds part {} of a layout over {} directories, but it was given as --dir \
                 {} of {}: give the directories in the order `db setup` had them",
                path.display(),
                part.index + 1,
                part.of,
                want.index + 1,
                want.of
            );
        }
        if let Some(first) = &layout {
            if *first != l {
                bail!(
                    "{} holds another layout than {} ({} schemas × {} rows, seed {}, against \
                     {} × {}, seed {}): the directories are not one `db setup`",
                    path.display(),
                    paths[0].display(),
                    l.schemas,
                    l.rows,
                    l.seed,
                    first.schemas,
                    first.rows,
                    first.seed
                );
            }
        }
        layout = Some(l);
        paths.push(path);
    }
    Ok((layout.expect("at least one directory"), paths))
}

/// Run the SLOB work loop on the SQLite layout over `dirs` ([`Part`]): each session works on
/// schema `i mod schemas`, in its directory's file, and records that file's I/O in its
/// target's recorders; the run's I/O is their exact sum, and with several directories the
/// run keeps each one's own series, queue facts and disk counters
/// ([`crate::results::TargetRun`]).
pub fn run_over(
    dirs: &[PathBuf],
    spec: &RunSpec,
    ctx: RunContext<'_>,
    cmdline: Vec<String>,
) -> Result<Results> {
    let (layout, paths) = open_parts(dirs)?;
    let result = run_parts(&layout, &paths, spec, ctx, cmdline);
    match dirs {
        [one] => explain_error(result, one),
        _ => result,
    }
}

fn run_parts(
    layout: &Layout,
    paths: &[PathBuf],
    spec: &RunSpec,
    ctx: RunContext<'_>,
    cmdline: Vec<String>,
) -> Result<Results> {
    let layout = layout.clone();
    let n = paths.len();
    let many = n > 1;
    let path = paths[0].clone();
    let picker = KeyPicker::new(layout.rows, spec)?;
    if spec.timing {
        vfs::register()?;
    }
    let mut warnings = Vec::new();
    let cache_total = spec.cache_bytes * spec.sessions as u64;
    if cache_total * 4 > layout.data_bytes() {
        warnings.push(format!(
            "the sessions' SQLite caches ({} in all) are not much smaller than the data ({}): \
             many reads will be cache hits, not physical reads",
            fmt_bytes(cache_total),
            fmt_bytes(layout.data_bytes())
        ));
    }
    let disks = crate::session::DiskWindow::of(paths.iter().map(|p| p.as_path()));
    let device = disks.device();
    for (i, p) in paths.iter().enumerate() {
        if disks.name(i).is_none() {
            warnings.push(format!(
                "no block device found for {} (overlay or network filesystem?): no device view",
                p.display()
            ));
        }
    }
    if spec.drop_os_cache {
        for p in paths {
            host::drop_page_cache(p)?;
        }
    }
    let residency = || -> Option<f64> {
        // Over all parts, weighted by their sizes.
        let (mut res, mut size) = (0.0, 0.0);
        for p in paths {
            let len = std::fs::metadata(p).ok()?.len() as f64;
            res += host::page_cache_residency(p).ok()? * len;
            size += len;
        }
        (size > 0.0).then(|| res / size)
    };
    let resident_before = residency();

    // Each session connects and prepares, then waits for its recorders.
    // One set of file recorders per part (main file, then log), then the statements: each
    // session records in its part's.
    let mut sets = vec![IO_OPS; n];
    sets.extend(vec![vfs::LOG_OPS; n]);
    sets.push(super::DB_OPS);
    let mut watch = super::DbProgress::new(spec, &ctx)
        .ops_set(2 * n)
        .disks(disks);
    let plan = Plan {
        sessions: spec.sessions as usize,
        ops: &sets,
        warmup: Duration::from_secs_f64(spec.warmup_s),
        duration: Some(Duration::from_secs_f64(spec.duration_s)),
        interval: Duration::from_secs_f64(spec.interval_s),
        device: device.as_deref(),
        interrupt: ctx.interrupt,
        thread_name: "iolens-db",
        start_at: ctx.start_at,
        block_watch: ctx.block_watch,
    };
    let mut driven = session::drive(
        &plan,
        |i, gate| {
            let schema = i as u32 % layout.schemas;
            let seed = spec.seed.wrapping_add(i as u64 * 0x9E37_79B9);
            let part = schema as usize % n;
            session(
                paths[part].clone(),
                (part, n),
                schema,
                picker.clone(),
                spec.clone(),
                seed,
                gate,
            )
        },
        &mut watch,
    )?;
    let base = driven.base;
    let started = humantime::format_rfc3339_micros(
        std::time::SystemTime::now() - Instant::now().saturating_duration_since(base),
    )
    .to_string();
    let mut outs = Vec::new();
    for o in std::mem::take(&mut driven.outs) {
        outs.push(o.context("the run failed")?);
    }
    let end = base + Duration::from_secs_f64(spec.duration_s);
    let last = outs.iter().filter_map(|o| o.finished).max().unwrap_or(end);
    let measured = last.saturating_duration_since(base).as_secs_f64().max(1e-6);
    let mut sets = driven.ops(measured);
    if sets.len() != 2 * n + 1 {
        bail!(
            "{} sets of operations were recorded, not {}",
            sets.len(),
            2 * n + 1
        );
    }
    let op_ops = sets.pop().unwrap_or_default();
    let log_sets = sets.split_off(n);
    let main_sets = sets;
    let (main_ops, log_ops) = if many {
        (
            crate::results::sum_op_sets(&main_sets, &IO_OPS.names())?,
            crate::results::sum_op_sets(&log_sets, &vfs::LOG_OPS.names())?,
        )
    } else {
        (main_sets[0].clone(), log_sets[0].clone())
    };
    let (snap0, mut snap1) = driven.snaps;
    let resident_after = residency();

    let mut io = IoCounts::default();
    let mut db = DbCounters::default();
    let (mut sel, mut upd, mut stm, mut com, mut rows, mut busy, mut run_ns, mut wait_ns) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for o in &outs {
        io.add(&o.io);
        db.hits += o.db.hits;
        db.misses += o.db.misses;
        db.writes += o.db.writes;
        sel += o.select_ops;
        upd += o.update_ops;
        stm += o.statements;
        com += o.commits;
        rows += o.rows;
        busy += o.busy;
        run_ns += o.run_ns;
        wait_ns += o.wait_ns;
    }
    let physical = db.misses;
    let logical = db.hits + db.misses;
    let mut c = std::collections::BTreeMap::new();
    super::WorkTotals {
        selects: sel,
        updates: upd,
        statements: stm,
        commits: com,
        rows,
    }
    .put_counters(&mut c, measured);
    let mut put = |k: &str, v: f64| {
        c.insert(k.to_string(), v);
    };
    put("busy_errors", busy as f64);
    put("cache_hits", db.hits as f64);
    put("cache_misses", db.misses as f64);
    put("cache_writes", db.writes as f64);
    put("logical_reads", logical as f64);
    put("physical_reads", physical as f64);
    put("logical_reads_per_s", logical as f64 / measured);
    put("physical_reads_per_s", physical as f64 / measured);
    if spec.timing {
        put("block_reads", io.main_page_reads as f64);
        put("block_reads_per_s", io.main_page_reads as f64 / measured);
        put("db_header_reads", io.main_other_reads as f64);
        put("db_writes", io.main_writes as f64);
        put("db_write_bytes", io.main_write_bytes as f64);
        put("db_syncs", io.main_syncs as f64);
        put("log_reads", io.log_reads as f64);
        put("log_writes", io.log_writes as f64);
        put("log_write_bytes", io.log_write_bytes as f64);
        put("log_syncs", io.log_syncs as f64);
        put("other_file_ios", io.other_ios as f64);
        put("io_errors", io.errors as f64);
    }
    // Run-queue figures come from the session threads themselves (read before they exited).
    snap1.set_sched((run_ns, wait_ns));
    let (cpu, dev) = snap0.delta(&snap1, physical, device.as_deref());
    put("cpu_us_per_physical_read", cpu.us_per_io);
    if let Some(d) = &dev {
        put("device_reads", d.reads as f64);
        put("device_reads_per_s", d.reads as f64 / measured);
        let served = physical.saturating_sub(d.reads);
        put("os_cache_served_reads", served as f64);
        put(
            "os_cache_served_share",
            if physical > 0 {
                served as f64 / physical as f64
            } else {
                0.0
            },
        );
        if d.reads > 0 && d.read_bytes / d.reads > 2 * BLOCK {
            warnings.push(format!(
                "the device read {} per request on average: the kernel's read-ahead brought in \
                 neighbouring blocks, so some reads were served from the page cache it filled",
                fmt_bytes(d.read_bytes / d.reads)
            ));
        }
    }
    if !spec.drop_os_cache || resident_after.unwrap_or(0.0) > 0.5 {
        warnings.push(
            "SQLite reads through the OS page cache: its physical reads include reads the page \
             cache served (compare device reads with physical reads)"
                .to_string(),
        );
    }
    if busy > 0 {
        warnings.push(format!(
            "{busy} operations gave up waiting for the write lock"
        ));
    }
    let mut all_ops = main_ops;
    all_ops.extend(log_ops);
    let io_sessions: Vec<SessionSummary> =
        outs.iter().filter_map(|o| o.io_summary.clone()).collect();
    let op_sessions: Vec<SessionSummary> =
        outs.iter().filter_map(|o| o.op_summary.clone()).collect();
    let spec_json = json!({
        "engine": "sqlite",
        "path": path.display().to_string(),
        "paths": if many {
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>()
        } else {
            Vec::new()
        },
        "layout": layout,
        "page_size": BLOCK,
        "journal_mode": "wal",
        "synchronous": "full",
        "mmap_size": 0,
        "sessions": spec.sessions,
        "update_pct": spec.update_pct,
        "work_unit": spec.work_unit,
        "run": spec,
    });
    let page_cache = match (resident_before, resident_after) {
        (Some(b), Some(a)) => Some(PageCacheInfo {
            resident_before: b,
            resident_after: a,
            working_set_bytes: paths
                .iter()
                .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
                .sum(),
        }),
        _ => None,
    };
    let run0 = RunResult {
        name: format!(
            "sqlite SLOB sessions={} update={}% work_unit={}",
            spec.sessions, spec.update_pct, spec.work_unit
        ),
        phase: "db".to_string(),
        spec: crate::results::Spec::of(&spec_json)?,
        started: started.clone(),
        duration_s: measured,
        duration_unknown: false,
        interval_s: spec.interval_s,
        warmup_s: spec.warmup_s,
        ops: all_ops,
        sessions: io_sessions,
        cpu: Some(cpu),
        device: dev,
        page_cache,
        counters: c,
        interrupted: crate::interrupt::flag().load(std::sync::atomic::Ordering::Relaxed),
        warnings: warnings.clone(),
        verify: None,
        corruption: Vec::new(),
        block: None,
        device_intervals: Vec::new(),
        sched_intervals: Vec::new(),
        io_buffers: None,
        targets: Vec::new(),
    };
    let mut run0 = run0;
    if many {
        run0.targets = paths
            .iter()
            .zip(main_sets.into_iter().zip(log_sets))
            .enumerate()
            .map(|(i, (p, (mut ops, log)))| {
                ops.extend(log);
                let reads = ops.iter().find(|o| o.op == "read").map_or(0, |o| o.count);
                let kind = crate::results::StorageKind::Sqlite;
                let size = std::fs::metadata(p).map_or(0, |m| m.len());
                watch.disks.target_run(i, p, (kind, size), ops, Some(reads))
            })
            .collect();
    }
    crate::watch::own::OwnWatch::take_into(ctx.block_watch, &mut run0)?;
    let run1 = RunResult {
        name: "sqlite operations (select / update+commit)".to_string(),
        phase: "db-ops".to_string(),
        spec: crate::results::Spec::of(&spec_json)?,
        started,
        duration_s: measured,
        interval_s: spec.interval_s,
        warmup_s: spec.warmup_s,
        ops: op_ops,
        sessions: op_sessions,
        ..Default::default()
    };
    let mut res = Results::new(Kind::Db, cmdline);
    res.environment = crate::sys::environment();
    res.environment.target = Some(crate::sys::target_info(
        &path,
        crate::results::StorageKind::Sqlite,
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
    ));
    res.runs = vec![run0, run1];
    res.db = Some(DbInfo {
        engine: DbEngine::Sqlite,
        layout: layout.stored(),
        wait_profile: None,
    });
    Ok(res)
}

/// Name of an extended SQLite result code of the I/O-error family (for messages).
fn ioerr_name(extended: i32) -> &'static str {
    match extended {
        ffi::SQLITE_IOERR_READ => "SQLITE_IOERR_READ",
        ffi::SQLITE_IOERR_SHORT_READ => "SQLITE_IOERR_SHORT_READ",
        ffi::SQLITE_IOERR_WRITE => "SQLITE_IOERR_WRITE",
        ffi::SQLITE_IOERR_FSYNC => "SQLITE_IOERR_FSYNC",
        ffi::SQLITE_IOERR_DIR_FSYNC => "SQLITE_IOERR_DIR_FSYNC",
        ffi::SQLITE_IOERR_TRUNCATE => "SQLITE_IOERR_TRUNCATE",
        ffi::SQLITE_IOERR_SHMOPEN => "SQLITE_IOERR_SHMOPEN",
        ffi::SQLITE_IOERR_SHMSIZE => "SQLITE_IOERR_SHMSIZE",
        ffi::SQLITE_IOERR_SHMMAP => "SQLITE_IOERR_SHMMAP",
        ffi::SQLITE_IOERR_MMAP => "SQLITE_IOERR_MMAP",
        ffi::SQLITE_FULL => "SQLITE_FULL",
        _ => "SQLITE_IOERR",
    }
}

/// Extended codes of failures that a full filesystem causes: writing, extending or syncing a
/// file (SQLite reports a failed extension of the WAL index, the `-shm` file, as
/// SQLITE_IOERR_SHMSIZE, 4874 = 10 | 19 << 8: "disk I/O error" with nothing about space).
fn space_related(extended: i32) -> bool {
    matches!(
        extended,
        ffi::SQLITE_FULL
            | ffi::SQLITE_IOERR_WRITE
            | ffi::SQLITE_IOERR_FSYNC
            | ffi::SQLITE_IOERR_DIR_FSYNC
            | ffi::SQLITE_IOERR_TRUNCATE
            | ffi::SQLITE_IOERR_SHMOPEN
            | ffi::SQLITE_IOERR_SHMSIZE
            | ffi::SQLITE_IOERR_SHMMAP
    )
}

/// Below this much free space, a write-type SQLite I/O error is put down to a full disk.
const NEARLY_FULL: u64 = 4 << 20;

/// Say "no space left on device" when a SQLite error was caused by a full filesystem: SQLite
/// reports most such failures as "disk I/O error" (e.g. extended code 4874, a failed extension
/// of the `-shm` file) or as "database or disk is full". The original error is kept below.
pub(crate) fn explain_error<T>(r: Result<T>, dir: &Path) -> Result<T> {
    r.map_err(|e| {
        let failure = e
            .chain()
            .find_map(|c| match c.downcast_ref::<rusqlite::Error>() {
                Some(rusqlite::Error::SqliteFailure(f, _)) => Some(*f),
                _ => None,
            });
        let Some(f) = failure else { return e };
        if !space_related(f.extended_code) && f.code != rusqlite::ErrorCode::DiskFull {
            return e;
        }
        let free = host::free_bytes(dir).ok();
        let full = f.code == rusqlite::ErrorCode::DiskFull || free.is_some_and(|b| b < NEARLY_FULL);
        if !full {
            return e;
        }
        let at = host::existing_ancestor(dir);
        let msg = format!(
            "no space left on device: the filesystem of {} is full ({} free); SQLite reported \
             {} (extended code {}, {})",
            at.display(),
            free.map(fmt_bytes).unwrap_or_else(|| "unknown".into()),
            if f.code == rusqlite::ErrorCode::DiskFull {
                "\"database or disk is full\""
            } else {
                "\"disk I/O error\""
            },
            f.extended_code,
            ioerr_name(f.extended_code)
        );
        e.context(msg)
    })
}
