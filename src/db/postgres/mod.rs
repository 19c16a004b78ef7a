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

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::Type;
use postgres::{Client, NoTls};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use serde_json::json;

mod probes;

use super::{host, redact_dsn, KeyPicker, Layout, LayoutCheck, Perm, RunSpec, BLOCK};
use crate::recorder::{self, IntervalSnapshot, SessionRecorder};
use crate::results::evidence::{DbEngine, DbInfo, WaitProfile, WaitShare};
use crate::results::{CpuStats, Kind, OpResult, Results, RunResult, SessionSummary, TargetInfo};
use crate::session::{self, Gate, Plan, Watch};
use crate::sys::SysSnapshot;
use crate::units::fmt_bytes;

/// Random payload bytes per row (see the module docs for why this size).
pub const PAD_BYTES: usize = 3000;
const FORMAT: &str = "iolens-slob-pg-1";
const CHUNK: u64 = 2048;

/// A PostgreSQL error in words (server message, detail and hint when there are any).
pub(crate) fn pg_msg(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = db.message().to_string();
        if let Some(d) = db.detail() {
            s.push_str(&format!(" ({d})"));
        }
        if let Some(h) = db.hint() {
            s.push_str(&format!(" (hint: {h})"));
        }
        return s;
    }
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        s.push_str(&format!(": {x}"));
        src = x.source();
    }
    s
}

trait PgCtx<T> {
    fn pg(self, what: &str) -> Result<T>;
}

impl<T> PgCtx<T> for std::result::Result<T, postgres::Error> {
    fn pg(self, what: &str) -> Result<T> {
        self.map_err(|e| anyhow!("{what}: {}", pg_msg(&e)))
    }
}

fn is_code(e: &postgres::Error, code: &postgres::error::SqlState) -> bool {
    e.code() == Some(code)
}

/// Connect, with a clear message that never shows the password.
pub fn connect(dsn: &str) -> Result<Client> {
    // libpq's conventions: PG* environment variables, the password file, libpq's defaults.
    let r = super::libpq::resolve(dsn)
        .map_err(|e| anyhow!("the DSN '{}' cannot be used: {e}", redact_dsn(dsn)))?;
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        for w in &r.warnings {
            crate::out::note(w);
        }
    });
    let mut cfg = r.config;
    cfg.application_name("iolens-db");
    if cfg.get_connect_timeout().is_none() {
        cfg.connect_timeout(Duration::from_secs(10));
    }
    cfg.connect(NoTls).map_err(|e| {
        let pw = match &r.password {
            super::libpq::PasswordSource::None => "no password".to_string(),
            super::libpq::PasswordSource::Dsn => "password from the DSN".to_string(),
            super::libpq::PasswordSource::Env => "password from PGPASSWORD".to_string(),
            super::libpq::PasswordSource::File(f) => format!("password from {}", f.display()),
        };
        anyhow!(
            "cannot connect to PostgreSQL with '{}' (host {}, user {}, {pw}): {}",
            redact_dsn(dsn),
            super::libpq::describe_hosts(&cfg),
            cfg.get_user().unwrap_or("?"),
            connect_failure(&cfg, &e)
        )
    })
}

/// Why a connection failed, in words that name what was tried: the socket file looked for, a
/// peer that does not speak PostgreSQL's protocol.
fn connect_failure(cfg: &postgres::Config, e: &postgres::Error) -> String {
    let msg = pg_msg(e);
    let ports = cfg.get_ports();
    let port = ports.first().copied().unwrap_or(5432);
    let sockets: Vec<String> = cfg
        .get_hosts()
        .iter()
        .filter_map(|h| match h {
            postgres::config::Host::Unix(p) => {
                Some(p.join(format!(".s.PGSQL.{port}")).display().to_string())
            }
            _ => None,
        })
        .collect();
    let not_found = std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |x| {
        x.source()
    })
    .any(|x| {
        x.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
    });
    if not_found && !sockets.is_empty() {
        return format!(
            "no server socket {} (is the server running, with that directory in its \
             unix_socket_directories and port {port}?)",
            sockets.join(" or ")
        );
    }
    if msg.contains("bytes remaining on stream") || msg.contains("unexpected message") {
        return format!(
            "the peer at port {port} did not answer as a PostgreSQL server does (another \
             service on that port?): {msg}"
        );
    }
    msg
}

#[derive(Clone, Debug)]
struct Progress {
    schema: u32,
    loaded: u64,
    indexed: bool,
    checked: bool,
}

fn read_state(c: &mut Client) -> Result<Option<(Layout, Vec<Progress>)>> {
    let exists: bool = c
        .query_one("SELECT to_regclass('iolens_meta') IS NOT NULL", &[])
        .pg("cannot query the catalog")?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let rows = c
        .query("SELECT key, value FROM iolens_meta", &[])
        .pg("cannot read iolens_meta")?;
    let meta: BTreeMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    if meta.get("format").map(String::as_str) != Some(FORMAT) {
        bail!("the database has an iolens_meta table but not the {FORMAT} layout");
    }
    let layout: Layout = serde_json::from_str(meta.get("layout").map(String::as_str).unwrap_or(""))
        .context("iolens_meta layout is damaged")?;
    let prog = c
        .query(
            "SELECT schema, loaded, indexed, checked IS NOT NULL FROM iolens_progress ORDER BY schema",
            &[],
        )
        .pg("cannot read iolens_progress")?
        .iter()
        .map(|r| Progress {
            schema: r.get::<_, i32>(0) as u32,
            loaded: r.get::<_, i64>(1) as u64,
            indexed: r.get(2),
            checked: r.get(3),
        })
        .collect();
    Ok(Some((layout, prog)))
}

/// The server's data directory when this role may read it and it is on this host.
fn local_data_dir(c: &mut Client) -> Option<String> {
    let r = c
        .query_one("SELECT current_setting('data_directory')", &[])
        .ok()?;
    let d: String = r.get(0);
    Path::new(&d).exists().then_some(d)
}

/// Whether the server runs on this host: its backend for `c` is a local `postgres` process.
fn server_is_local(c: &mut Client) -> Option<i32> {
    let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).ok()?.get(0);
    let comm = host::pid_comm(pid)?;
    comm.starts_with("postgres").then_some(pid)
}

pub use super::SetupOutcome;

/// The PostgreSQL engine: the layout in the database reached through `dsn`.
pub(crate) struct Postgres {
    pub dsn: String,
}

impl super::DbEngine for Postgres {
    fn setup(&self, layout: &Layout, max: Option<u64>, show: bool) -> Result<SetupOutcome> {
        setup(&self.dsn, layout, max, show)
    }

    fn run(&self, spec: &RunSpec, cmdline: Vec<String>) -> Result<Results> {
        run(&self.dsn, spec, cmdline)
    }

    fn drop_layout(&self) -> Result<()> {
        drop_layout(&self.dsn)
    }
}

/// Build, resume or re-verify the layout. `max_rows` bounds the rows this call loads.
pub fn setup(
    dsn: &str,
    layout: &Layout,
    max_rows: Option<u64>,
    progress: bool,
) -> Result<SetupOutcome> {
    let mut c = connect(dsn)?;
    let state = read_state(&mut c)?;
    let already = match &state {
        Some((l, p)) => {
            if l != layout {
                bail!(
                    "the database holds a different iolens layout ({} schemas × {} rows, seed {}); \
                     use the same --schemas/--scale/--seed, or remove it with `iolens db drop \
                     --engine postgres --dsn ...`",
                    l.schemas,
                    l.rows,
                    l.seed
                );
            }
            p.iter().map(|p| p.loaded).sum::<u64>()
        }
        None => 0,
    };
    let total = layout.schemas as u64 * layout.rows;
    let need = (total - already.min(total)) * BLOCK * 110 / 100 + total * 40 + (16 << 20);
    match local_data_dir(&mut c) {
        Some(d) => {
            let free = host::free_bytes(Path::new(&d))?;
            if need > free {
                bail!(
                    "--scale {} × {} schemas needs about {} more in the server's data directory, \
                     but only {} is free there{}",
                    fmt_bytes(layout.rows * BLOCK),
                    layout.schemas,
                    fmt_bytes(need),
                    fmt_bytes(free),
                    if state.is_some() {
                        "; the partial iolens tables were left as they are"
                    } else {
                        "; nothing was created"
                    }
                );
            }
        }
        None => {
            if progress {
                crate::outln!(
                    "note: cannot see the server's data directory from here; free space not checked \
                     (about {} needed)",
                    fmt_bytes(need)
                );
            }
        }
    }
    if state.is_none() {
        create_schema(&mut c, layout)?;
    }
    match load_and_check(&mut c, layout, max_rows, progress) {
        Ok(o) => {
            if progress {
                if o.complete {
                    for k in &o.checks {
                        crate::outln!(
                            "schema {}: {} rows in {} blocks (max {} per block), {} TOAST pages, \
                             index {}, key/block correlation {:.4}, adjacent-key share {:.4}",
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
                    crate::outln!(
                        "setup complete: {} schemas × {} verified",
                        layout.schemas,
                        fmt_bytes(layout.rows * BLOCK)
                    );
                } else {
                    crate::outln!("setup paused after {} rows; rerun to resume", o.rows_loaded);
                }
            }
            Ok(o)
        }
        Err(e) => {
            let st = connect(dsn)
                .ok()
                .and_then(|mut c| read_state(&mut c).ok().flatten())
                .map(|(_, p)| {
                    p.iter()
                        .map(|p| {
                            format!("iolens_t{}: {} of {} rows", p.schema, p.loaded, layout.rows)
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_else(|| "state unknown".to_string());
            Err(e.context(format!(
                "setup stopped; the partial iolens tables remain ({st}): rerun the same command \
                 to resume, or remove them with `iolens db drop --engine postgres --dsn ...`"
            )))
        }
    }
}

fn create_schema(c: &mut Client, layout: &Layout) -> Result<()> {
    let mut tx = c.transaction().pg("cannot start a transaction")?;
    let mut ddl = String::from(
        "CREATE TABLE iolens_meta(key text PRIMARY KEY, value text NOT NULL);
         CREATE TABLE iolens_progress(schema int PRIMARY KEY, loaded bigint NOT NULL,
                                      indexed boolean NOT NULL, checked text);",
    );
    for s in 0..layout.schemas {
        ddl.push_str(&format!(
            "CREATE TABLE iolens_t{s}(k bigint NOT NULL, v bigint NOT NULL, pad bytea NOT NULL)
               WITH (fillfactor = 50, autovacuum_enabled = off);
             ALTER TABLE iolens_t{s} ALTER COLUMN pad SET STORAGE PLAIN;
             INSERT INTO iolens_progress VALUES ({s}, 0, false, NULL);"
        ));
    }
    tx.batch_execute(&ddl)
        .pg("cannot create the iolens tables")?;
    tx.execute(
        "INSERT INTO iolens_meta VALUES ('format', $1), ('layout', $2)",
        &[&FORMAT, &serde_json::to_string(layout)?],
    )
    .pg("cannot write iolens_meta")?;
    tx.commit().pg("cannot create the iolens tables")?;
    Ok(())
}

fn load_and_check(
    c: &mut Client,
    layout: &Layout,
    max_rows: Option<u64>,
    progress: bool,
) -> Result<SetupOutcome> {
    let (_, prog) = read_state(c)?.context("iolens_meta vanished")?;
    let mut budget = max_rows.unwrap_or(u64::MAX);
    let mut loaded_now = 0;
    let mut pad = vec![0u8; PAD_BYTES];
    for p in &prog {
        let s = p.schema;
        let mut loaded = p.loaded;
        let mut report =
            super::LoadProgress::start(progress, format!("iolens_t{s}"), loaded, layout.rows);
        let perm = Perm::new(
            layout.rows,
            layout.seed.wrapping_mul(1_000_003).wrapping_add(s as u64),
        );
        let mut rng = SmallRng::seed_from_u64(layout.seed ^ ((s as u64) << 40) ^ loaded);
        while loaded < layout.rows {
            // A signal (Ctrl-C, SIGTERM) stops between committed chunks: resumable.
            if budget == 0 || crate::interrupt::interrupted() {
                return Ok(SetupOutcome {
                    rows_loaded: loaded_now,
                    complete: false,
                    checks: vec![],
                });
            }
            let n = CHUNK.min(layout.rows - loaded).min(budget);
            let mut tx = c.transaction().pg("cannot start a transaction")?;
            {
                let sink = tx
                    .copy_in(&format!(
                        "COPY iolens_t{s} (k, v, pad) FROM STDIN (FORMAT binary)"
                    ))
                    .pg("cannot start COPY")?;
                let mut w = BinaryCopyInWriter::new(sink, &[Type::INT8, Type::INT8, Type::BYTEA]);
                for i in loaded..loaded + n {
                    rng.fill_bytes(&mut pad);
                    let k = (perm.permute(i) + 1) as i64;
                    w.write(&[&k, &0i64, &&pad[..]]).pg("COPY failed")?;
                }
                w.finish().pg("COPY failed")?;
            }
            tx.execute(
                "UPDATE iolens_progress SET loaded = $1 WHERE schema = $2",
                &[&((loaded + n) as i64), &(s as i32)],
            )
            .pg("cannot record progress")?;
            tx.commit().pg("cannot commit loaded rows")?;
            loaded += n;
            loaded_now += n;
            budget -= n;
            report.loaded(loaded);
        }
        if crate::interrupt::interrupted() {
            return Ok(SetupOutcome {
                rows_loaded: loaded_now,
                complete: false,
                checks: vec![],
            });
        }
        if !p.indexed {
            report.indexing(&format!("iolens_t{s}_k"));
            let mut tx = c.transaction().pg("cannot start a transaction")?;
            tx.batch_execute(&format!(
                "CREATE INDEX IF NOT EXISTS iolens_t{s}_k ON iolens_t{s}(k);
                 UPDATE iolens_progress SET indexed = true WHERE schema = {s};"
            ))
            .pg("cannot build the index")?;
            tx.commit().pg("cannot build the index")?;
        }
        if !p.checked {
            c.batch_execute(&format!("VACUUM (ANALYZE) iolens_t{s}"))
                .pg("VACUUM failed")?;
        }
    }
    let mut checks = Vec::new();
    let mut problems = Vec::new();
    for p in &prog {
        let k = check_schema(c, p.schema)?;
        problems.extend(k.problems());
        c.execute(
            "UPDATE iolens_progress SET checked = $1 WHERE schema = $2",
            &[&serde_json::to_string(&k)?, &(p.schema as i32)],
        )
        .pg("cannot record the check")?;
        checks.push(k);
    }
    if !problems.is_empty() {
        bail!("the layout failed verification: {}", problems.join("; "));
    }
    Ok(SetupOutcome {
        rows_loaded: loaded_now,
        complete: true,
        checks,
    })
}

/// Verify one schema's layout from the rows' physical addresses (ctid).
pub(crate) fn check_schema(c: &mut Client, s: u32) -> Result<LayoutCheck> {
    let t = format!("iolens_t{s}");
    let q = format!(
        "WITH b AS (SELECT k, (ctid::text::point)[0]::bigint AS blk FROM {t}),
              per AS (SELECT count(*) AS n FROM b GROUP BY blk),
              adj AS (SELECT abs(blk - lag(blk) OVER (ORDER BY k)) AS d FROM b)
         SELECT (SELECT count(*) FROM b), (SELECT count(*) FROM per),
                (SELECT coalesce(max(n), 0) FROM per),
                (SELECT coalesce(corr(k, blk), 0) FROM b),
                (SELECT count(*) FILTER (WHERE d <= 1) FROM adj),
                (SELECT coalesce(pg_relation_size(NULLIF(reltoastrelid, 0)), 0) / 8192
                   FROM pg_class WHERE oid = '{t}'::regclass),
                (SELECT count(*) FROM pg_indexes WHERE tablename = '{t}' AND indexname = '{t}_k')"
    );
    let r = c.query_one(&q, &[]).pg("cannot verify the layout")?;
    let rows: i64 = r.get(0);
    let adjacent: i64 = r.get(4);
    Ok(LayoutCheck {
        schema: s,
        rows: rows as u64,
        blocks: r.get::<_, i64>(1) as u64,
        max_rows_per_block: r.get::<_, i64>(2) as u64,
        key_position_corr: r.get(3),
        overflow_pages: r.get::<_, i64>(5) as u64,
        index_present: r.get::<_, i64>(6) > 0,
        adjacent_share: if rows > 1 {
            adjacent as f64 / (rows - 1) as f64
        } else {
            0.0
        },
    })
}

/// Drop every table `setup` created.
pub(crate) fn drop_layout(dsn: &str) -> Result<()> {
    let mut c = connect(dsn)?;
    let Some((layout, _)) = read_state(&mut c)? else {
        bail!("the database has no iolens tables (nothing to drop)");
    };
    let mut tx = c.transaction().pg("cannot start a transaction")?;
    let mut ddl = String::new();
    for s in 0..layout.schemas {
        ddl.push_str(&format!("DROP TABLE IF EXISTS iolens_t{s};"));
    }
    ddl.push_str("DROP TABLE iolens_progress; DROP TABLE iolens_meta;");
    tx.batch_execute(&ddl).pg("cannot drop the iolens tables")?;
    tx.commit().pg("cannot drop the iolens tables")?;
    crate::outln!("dropped {} iolens tables", layout.schemas);
    Ok(())
}

/// Server-side counters read before and after the measured window.
#[derive(Clone, Debug, Default)]
struct PgStats {
    /// Named values; deltas are taken key by key.
    v: BTreeMap<String, f64>,
}

fn read_stats(c: &mut Client, tables: &[String], version: i32) -> Result<PgStats> {
    let mut v = BTreeMap::new();
    c.batch_execute("SELECT pg_stat_clear_snapshot()")
        .pg("cannot refresh statistics")?;
    let r = c
        .query_one(
            "SELECT blks_read::float8, blks_hit::float8, blk_read_time, blk_write_time,
                    xact_commit::float8, xact_rollback::float8, tup_fetched::float8,
                    tup_updated::float8, deadlocks::float8
               FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .pg("cannot read pg_stat_database")?;
    for (i, k) in [
        "db_blks_read",
        "db_blks_hit",
        "db_blk_read_time_ms",
        "db_blk_write_time_ms",
        "db_xact_commit",
        "db_xact_rollback",
        "db_tup_fetched",
        "db_tup_updated",
        "db_deadlocks",
    ]
    .iter()
    .enumerate()
    {
        v.insert(k.to_string(), r.get::<_, Option<f64>>(i).unwrap_or(0.0));
    }
    let r = c
        .query_one(
            "SELECT coalesce(sum(heap_blks_read), 0)::float8, coalesce(sum(heap_blks_hit), 0)::float8,
                    coalesce(sum(idx_blks_read), 0)::float8, coalesce(sum(idx_blks_hit), 0)::float8
               FROM pg_statio_user_tables WHERE relname = ANY($1)",
            &[&tables],
        )
        .pg("cannot read pg_statio_user_tables")?;
    for (i, k) in [
        "heap_blks_read",
        "heap_blks_hit",
        "idx_blks_read",
        "idx_blks_hit",
    ]
    .iter()
    .enumerate()
    {
        v.insert(k.to_string(), r.get::<_, f64>(i));
    }
    if version >= 160000 {
        let r = c
            .query_one(
                "SELECT coalesce(sum(reads), 0)::float8, coalesce(sum(read_time), 0)::float8,
                        coalesce(sum(hits), 0)::float8, coalesce(sum(writes), 0)::float8,
                        coalesce(sum(write_time), 0)::float8
                   FROM pg_stat_io WHERE backend_type = 'client backend' AND object = 'relation'",
                &[],
            )
            .pg("cannot read pg_stat_io")?;
        for (i, k) in [
            "io_reads",
            "io_read_time_ms",
            "io_hits",
            "io_writes",
            "io_write_time_ms",
        ]
        .iter()
        .enumerate()
        {
            v.insert(k.to_string(), r.get::<_, f64>(i));
        }
    }
    if version >= 140000 {
        let r = c
            .query_one(
                "SELECT wal_records::float8, wal_bytes::float8, wal_write::float8, wal_sync::float8
                   FROM pg_stat_wal",
                &[],
            )
            .pg("cannot read pg_stat_wal")?;
        for (i, k) in ["wal_records", "wal_bytes", "wal_writes", "wal_syncs"]
            .iter()
            .enumerate()
        {
            v.insert(k.to_string(), r.get::<_, f64>(i));
        }
    }
    Ok(PgStats { v })
}

fn server_pids(c: &mut Client, exclude: &[i32]) -> Vec<i32> {
    c.query(
        "SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL",
        &[],
    )
    .map(|rows| {
        rows.iter()
            .map(|r| r.get::<_, i32>(0))
            .filter(|p| !exclude.contains(p))
            .collect()
    })
    .unwrap_or_default()
}

fn cpu_of(pids: &[i32]) -> BTreeMap<i32, (f64, f64)> {
    pids.iter()
        .filter_map(|p| host::pid_cpu_split(*p).map(|c| (*p, c)))
        .collect()
}

struct SessionOut {
    select_ops: u64,
    update_ops: u64,
    statements: u64,
    commits: u64,
    rows: u64,
    retries: u64,
    summary: Option<SessionSummary>,
    finished: Instant,
}

struct SessionCfg {
    dsn: String,
    schema: u32,
    picker: KeyPicker,
    think: Duration,
    set_io_timing: bool,
    seed: u64,
}

fn session(cfg: SessionCfg, gate: Gate<i32>, done: Arc<Barrier>) -> Result<SessionOut> {
    let prep = (|| -> Result<(Client, postgres::Statement, postgres::Statement, i32)> {
        let mut c = connect(&cfg.dsn)?;
        let mut set =
            String::from("SET enable_bitmapscan = off; SET enable_seqscan = off; SET jit = off;");
        if cfg.set_io_timing {
            set.push_str("SET track_io_timing = on;");
        }
        c.batch_execute(&set).pg("cannot configure the session")?;
        let s = cfg.schema;
        let sel = c
            .prepare(&format!(
                "SELECT count(v) FROM iolens_t{s} WHERE k BETWEEN $1 AND $2"
            ))
            .pg("cannot prepare the select")?;
        let upd = c
            .prepare(&format!(
                "UPDATE iolens_t{s} SET v = v + 1 WHERE k BETWEEN $1 AND $2"
            ))
            .pg("cannot prepare the update")?;
        let pid: i32 = c
            .query_one("SELECT pg_backend_pid()", &[])
            .pg("pid")?
            .get(0);
        Ok((c, sel, upd, pid))
    })();
    let (mut c, sel, upd, pid) = prep?;
    let Some(start) = gate.ready(pid) else {
        bail!("the run was cancelled before it started");
    };
    let end = start.end.unwrap_or(start.base);
    let mut rec: Option<SessionRecorder> = start.recs.into_iter().next();
    let mut rng = SmallRng::seed_from_u64(cfg.seed);
    let mut out = SessionOut {
        select_ops: 0,
        update_ops: 0,
        statements: 0,
        commits: 0,
        rows: 0,
        retries: 0,
        summary: None,
        finished: Instant::now(),
    };
    let mut failure = None;
    loop {
        let t0 = Instant::now();
        if t0 >= end || crate::interrupt::flag().load(Ordering::Relaxed) {
            break;
        }
        let (lo, hi) = cfg.picker.window(&mut rng);
        if cfg.picker.is_update(&mut rng) {
            let r = (|| -> std::result::Result<(u64, Instant), postgres::Error> {
                let mut tx = c.transaction()?;
                let n = tx.execute(&upd, &[&lo, &hi])?;
                let tc = Instant::now();
                tx.commit()?;
                Ok((n, tc))
            })();
            match r {
                Ok((n, tc)) => {
                    let t1 = Instant::now();
                    if let Some(r) = rec.as_mut() {
                        r.record(super::UPDATE, t0, t1, 0);
                        r.record(super::COMMIT, tc, t1, 0);
                    }
                    out.rows += n;
                    out.update_ops += 1;
                    out.statements += 3;
                    out.commits += 1;
                }
                Err(e)
                    if is_code(&e, &postgres::error::SqlState::T_R_DEADLOCK_DETECTED)
                        || is_code(&e, &postgres::error::SqlState::T_R_SERIALIZATION_FAILURE) =>
                {
                    out.retries += 1;
                }
                Err(e) => {
                    failure = Some(anyhow!("update failed: {}", pg_msg(&e)));
                    break;
                }
            }
        } else {
            match c.query_one(&sel, &[&lo, &hi]) {
                Ok(row) => {
                    let t1 = Instant::now();
                    if let Some(r) = rec.as_mut() {
                        r.record(super::SELECT, t0, t1, 0);
                    }
                    out.rows += row.get::<_, i64>(0) as u64;
                    out.select_ops += 1;
                    out.statements += 1;
                }
                Err(e) => {
                    failure = Some(anyhow!("select failed: {}", pg_msg(&e)));
                    break;
                }
            }
        }
        if !cfg.think.is_zero() {
            // No further than the end; a signal wakes it.
            crate::interrupt::sleep_unless_interrupted(
                cfg.think.min(end.saturating_duration_since(Instant::now())),
            );
        }
    }
    out.finished = Instant::now();
    out.summary = rec.as_ref().map(recorder::session_summary);
    drop(rec);
    // Wait until the main thread has read the server processes' CPU, then disconnect.
    done.wait();
    drop(c);
    match failure {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// ASH-style sampler: wait events of the sessions' backends, `hz` times a second.
fn sample_waits(
    dsn: String,
    pids: Vec<i32>,
    hz: f64,
    stop: Arc<AtomicBool>,
) -> Result<(u64, BTreeMap<String, u64>)> {
    let mut c = connect(&dsn)?;
    let st = c
        .prepare(
            "SELECT state, wait_event_type, wait_event FROM pg_stat_activity WHERE pid = ANY($1)",
        )
        .pg("cannot prepare the wait sampler")?;
    let period = Duration::from_secs_f64(1.0 / hz);
    let mut next = Instant::now();
    let mut samples = 0u64;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    while !stop.load(Ordering::Relaxed) {
        let rows = c.query(&st, &[&pids]).pg("wait sampling failed")?;
        samples += 1;
        for r in rows {
            let state: Option<String> = r.get(0);
            let ty: Option<String> = r.get(1);
            let ev: Option<String> = r.get(2);
            let key = match (state.as_deref(), ty, ev) {
                (Some("active"), None, _) => "CPU (running or runnable)".to_string(),
                (_, Some(t), Some(e)) => format!("{t}:{e}"),
                (Some(s), _, _) => format!("state:{s}"),
                _ => "unknown".to_string(),
            };
            *counts.entry(key).or_default() += 1;
        }
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    Ok((samples, counts))
}

/// Wait-event samples of a phase: sessions sampled, and samples per event.
type AshSamples = (u64, BTreeMap<String, u64>);

/// What a phase does around its sessions: reads the server's statistics and CPU and starts the
/// wait sampler once every session is connected, prints progress, and reads the CPU again
/// before the sessions disconnect.
struct PgWatch<'a> {
    progress: Option<super::DbProgress>,
    ctl: &'a mut Client,
    ctl_pid: i32,
    measure: bool,
    local: bool,
    tables: &'a [String],
    version: i32,
    dsn: &'a str,
    hz: f64,
    stats0: PgStats,
    sampler: Option<std::thread::JoinHandle<Result<AshSamples>>>,
    stop: Arc<AtomicBool>,
    others: Vec<i32>,
    cpu0: BTreeMap<i32, (f64, f64)>,
    cpu1: BTreeMap<i32, (f64, f64)>,
    done: Arc<Barrier>,
    /// Trace the backends with the watch probes (measured phase, local server, privilege).
    probe: bool,
    interval: Duration,
    probes: Option<probes::BackendProbes>,
    probe_error: Option<anyhow::Error>,
}

impl Watch<i32> for PgWatch<'_> {
    fn starting(&mut self, pids: &[i32]) -> Result<()> {
        if self.measure && self.probe {
            // First, so the whole measured window is under the probes.
            match probes::BackendProbes::start(pids, self.interval) {
                Ok(p) => self.probes = Some(p),
                Err(e) => self.probe_error = Some(e),
            }
        }
        if self.measure {
            self.stats0 = read_stats(self.ctl, self.tables, self.version)?;
            let (d, p, s, hz) = (
                self.dsn.to_string(),
                pids.to_vec(),
                self.stop.clone(),
                self.hz,
            );
            self.sampler = Some(std::thread::spawn(move || sample_waits(d, p, hz, s)));
            if self.local {
                self.others = server_pids(self.ctl, &[self.ctl_pid]);
            }
        }
        self.cpu0 = cpu_of(&self.others);
        Ok(())
    }

    fn interval(&mut self, snaps: &[IntervalSnapshot]) {
        if let Some(p) = self.progress.as_mut() {
            Watch::<i32>::interval(p, snaps);
        }
    }

    fn stopped(&mut self) {
        // Sessions stop issuing at their end, then wait at the barrier: read CPU while they
        // still exist.
        self.cpu1 = cpu_of(&self.others);
        self.stop.store(true, Ordering::Relaxed);
        if let Some(p) = &self.probes {
            p.stop();
        }
        self.done.wait();
    }
}

/// One phase of sessions (warm-up or measured). Returns the outputs and, for the measured phase,
/// the op results, ASH samples and server CPU.
struct Phase {
    outs: Vec<SessionOut>,
    ops: Vec<OpResult>,
    measured_s: f64,
    started: String,
    stats0: PgStats,
    cpu0: BTreeMap<i32, (f64, f64)>,
    cpu1: BTreeMap<i32, (f64, f64)>,
    ash: Option<(u64, BTreeMap<String, u64>)>,
    snap0: SysSnapshot,
    snap1: SysSnapshot,
    /// The backends' watch (`None`: not traced), or why it failed.
    probes: Option<Result<Results>>,
}

#[allow(clippy::too_many_arguments)]
fn run_phase(
    dsn: &str,
    ctl: &mut Client,
    ctl_pid: i32,
    layout: &Layout,
    spec: &RunSpec,
    picker: &KeyPicker,
    secs: f64,
    measure: bool,
    set_io_timing: bool,
    local: bool,
    tables: &[String],
    version: i32,
    device: Option<&str>,
    probe: bool,
) -> Result<Phase> {
    let n = spec.sessions as usize;
    let done = Arc::new(Barrier::new(n + 1));
    let secs_d = Duration::from_secs_f64(secs);
    let plan = Plan {
        sessions: n,
        ops: &[super::DB_OPS],
        // The warm-up phase records nothing: all of it lies before the base.
        warmup: if measure { Duration::ZERO } else { secs_d },
        duration: Some(if measure { secs_d } else { Duration::ZERO }),
        interval: Duration::from_secs_f64(spec.interval_s),
        device,
        interrupt: crate::interrupt::flag(),
        thread_name: "iolens-pg",
        // With a warm-up phase, that phase waits for the start (a warm-up before it).
        start_at: if measure && spec.warmup_s > 0.0 {
            None
        } else {
            spec.start_at
        },
        // `db run --watch` traces iolens' own I/O: PostgreSQL's is its server's.
        block_watch: None,
    };
    let mut watch = PgWatch {
        progress: measure.then(|| super::DbProgress::new(spec)),
        ctl,
        ctl_pid,
        measure,
        local,
        tables,
        version,
        dsn,
        hz: spec.ash_hz,
        stats0: PgStats::default(),
        sampler: None,
        stop: Arc::new(AtomicBool::new(false)),
        others: Vec::new(),
        cpu0: BTreeMap::new(),
        cpu1: BTreeMap::new(),
        done: done.clone(),
        probe,
        interval: Duration::from_secs_f64(spec.interval_s),
        probes: None,
        probe_error: None,
    };
    let driven = session::drive(
        &plan,
        |i, gate| {
            let cfg = SessionCfg {
                dsn: dsn.to_string(),
                schema: i as u32 % layout.schemas,
                picker: picker.clone(),
                think: Duration::from_secs_f64(spec.think_s),
                set_io_timing,
                seed: spec
                    .seed
                    .wrapping_add(i as u64 * 0x9E37_79B9)
                    .wrapping_add(measure as u64),
            };
            session(cfg, gate, done.clone())
        },
        &mut watch,
    );
    let PgWatch {
        stats0,
        sampler,
        cpu0,
        cpu1,
        probes,
        probe_error,
        ..
    } = watch;
    let probes = match (probes, probe_error) {
        (Some(p), _) => Some(p.finish()),
        (None, Some(e)) => Some(Err(e)),
        (None, None) => None,
    };
    let mut driven = driven?;
    let (base, pids) = (driven.base, std::mem::take(&mut driven.ready));
    let end = base + secs_d;
    let started = humantime::format_rfc3339_micros(
        std::time::SystemTime::now() - Instant::now().saturating_duration_since(base),
    )
    .to_string();
    let mut outs = Vec::new();
    let mut err = None;
    for o in std::mem::take(&mut driven.outs) {
        match o {
            Ok(o) => outs.push(o),
            Err(e) => {
                err.get_or_insert(e);
            }
        }
    }
    let ash = match sampler {
        Some(h) => Some(
            h.join()
                .map_err(|_| anyhow!("the wait sampler panicked"))??,
        ),
        None => None,
    };
    if let Some(e) = err {
        return Err(e.context("the run failed"));
    }
    // Backends flush their statistics when they exit: wait for them to go.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        let left: i64 = ctl
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)",
                &[&pids],
            )
            .pg("cannot read pg_stat_activity")?
            .get(0);
        if left == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let last = outs.iter().map(|o| o.finished).max().unwrap_or(end);
    let measured_s = last.saturating_duration_since(base).as_secs_f64().max(1e-6);
    let ops = driven.ops(measured_s).pop().unwrap_or_default();
    let (snap0, snap1) = driven.snaps;
    Ok(Phase {
        outs,
        ops,
        measured_s,
        started,
        stats0,
        cpu0,
        cpu1,
        ash,
        snap0,
        snap1,
        probes,
    })
}

/// Run the SLOB work loop against the layout reached through `dsn`.
pub fn run(dsn: &str, spec: &RunSpec, cmdline: Vec<String>) -> Result<Results> {
    let mut ctl = connect(dsn)?;
    let version: i32 = ctl
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .pg("cannot read the server version")?
        .get(0);
    // track_io_timing: needed for read times; a role without the privilege gets a clear message.
    let mut set_io_timing = false;
    let mut warnings = Vec::new();
    if spec.io_timing {
        let on: String = ctl
            .query_one("SHOW track_io_timing", &[])
            .pg("cannot read track_io_timing")?
            .get(0);
        if on != "on" {
            match ctl.batch_execute("SET track_io_timing = on") {
                Ok(()) => set_io_timing = true,
                Err(e) if is_code(&e, &postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) => bail!(
                    "track_io_timing is off on this server and this role may not turn it on \
                     ({}). Ask an administrator to set track_io_timing = on in postgresql.conf \
                     (or GRANT SET ON PARAMETER track_io_timing to this role, PostgreSQL 15+), \
                     or rerun with --no-io-timing to measure without read times. Nothing was changed.",
                    pg_msg(&e)
                ),
                Err(e) => bail!("cannot enable track_io_timing: {}", pg_msg(&e)),
            }
        }
    } else {
        warnings.push("run without track_io_timing: no read times from the server".to_string());
    }
    let (layout, prog) = read_state(&mut ctl)?.with_context(|| {
        format!(
            "the database at '{}' has no iolens schema (no iolens_meta table): run `iolens db \
             setup --engine postgres --dsn ...` first",
            redact_dsn(dsn)
        )
    })?;
    if prog
        .iter()
        .any(|p| p.loaded < layout.rows || !p.indexed || !p.checked)
    {
        let st: Vec<String> = prog
            .iter()
            .map(|p| {
                format!(
                    "iolens_t{}: {} of {} rows{}{}",
                    p.schema,
                    p.loaded,
                    layout.rows,
                    if p.indexed { "" } else { ", no index yet" },
                    if p.checked { "" } else { ", not verified" }
                )
            })
            .collect();
        bail!(
            "setup is incomplete ({}); rerun the same `iolens db setup` to resume",
            st.join("; ")
        );
    }
    let picker = KeyPicker::new(layout.rows, spec)?;
    let tables: Vec<String> = (0..layout.schemas)
        .map(|s| format!("iolens_t{s}"))
        .collect();
    // The plan must be a plain index scan: single-block synchronous heap reads.
    ctl.batch_execute("SET enable_bitmapscan = off; SET enable_seqscan = off; SET jit = off")
        .pg("cannot configure the session")?;
    let plan: Vec<String> = ctl
        .query(
            &format!(
                "EXPLAIN SELECT count(v) FROM iolens_t0 WHERE k BETWEEN 1 AND {}",
                spec.work_unit
            ),
            &[],
        )
        .pg("cannot EXPLAIN the work query")?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if !plan
        .iter()
        .any(|l| l.contains("Index Scan using iolens_t0_k"))
    {
        bail!(
            "the work query is not planned as a plain index scan on iolens_t0_k: {}",
            plan.join(" / ")
        );
    }
    let shared_buffers: String = ctl
        .query_one("SHOW shared_buffers", &[])
        .pg("cannot read shared_buffers")?
        .get(0);
    let sb_bytes: i64 = ctl
        .query_one(
            "SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers'",
            &[],
        )
        .pg("cannot read shared_buffers")?
        .get(0);
    if (sb_bytes as u64) * 4 > layout.data_bytes() {
        warnings.push(format!(
            "shared_buffers ({shared_buffers}) is not much smaller than the data ({}): many reads \
             will be buffer hits, not physical reads",
            fmt_bytes(layout.data_bytes())
        ));
    }
    let ctl_pid = server_is_local(&mut ctl);
    let local = ctl_pid.is_some();
    let data_dir = local_data_dir(&mut ctl);
    let device = data_dir
        .as_deref()
        .and_then(|d| crate::sys::block_dev_for(Path::new(d)))
        .map(|b| b.name);
    if !local {
        warnings.push(
            "the server does not run on this host (or its processes are not visible): CPU per \
             read is the client's, and there is no device view"
                .to_string(),
        );
    } else if device.is_none() {
        warnings.push(
            "the server's data directory is not readable by this role or not on a block device: \
             no device view"
                .to_string(),
        );
    }
    // The backends' own I/O, timed in the kernel by the watch probes: only where the server
    // runs on this host and this process may load BPF programs; otherwise said.
    let probe = match spec.probes {
        Some(false) => false,
        _ if !local => {
            if spec.probes == Some(true) {
                bail!(
                    "--watch traces the server's backends, and this server does not run on this \
                     host (or its processes are not visible): run iolens on the server's host"
                );
            }
            warnings.push(
                "the server does not run on this host: the backends' per-I/O latency histograms \
                 and the wait-event table (kernel probes) were not measured"
                    .to_string(),
            );
            false
        }
        _ => match probes::unavailable() {
            Some(why) if spec.probes == Some(true) => bail!("--watch: {why}"),
            Some(why) => {
                warnings.push(format!(
                    "the backends' per-I/O latency histograms, their time split and the \
                     wait-event table were not measured: they need root (or CAP_BPF and \
                     CAP_PERFMON) to trace the backends ({why}); the wait profile is \
                     pg_stat_activity sampled {} times a second",
                    spec.ash_hz
                ));
                false
            }
            None => true,
        },
    };
    if spec.warmup_s > 0.0 {
        run_phase(
            dsn,
            &mut ctl,
            ctl_pid.unwrap_or(0),
            &layout,
            spec,
            &picker,
            spec.warmup_s,
            false,
            set_io_timing,
            local,
            &tables,
            version,
            None,
            false,
        )?;
    }
    let ph = run_phase(
        dsn,
        &mut ctl,
        ctl_pid.unwrap_or(0),
        &layout,
        spec,
        &picker,
        spec.duration_s,
        true,
        set_io_timing,
        local,
        &tables,
        version,
        device.as_deref(),
        probe,
    )?;
    let stats1 = read_stats(&mut ctl, &tables, version)?;
    let d = |k: &str| {
        stats1.v.get(k).copied().unwrap_or(0.0) - ph.stats0.v.get(k).copied().unwrap_or(0.0)
    };
    let m = ph.measured_s;
    let (mut sel, mut upd, mut stm, mut com, mut rows, mut retries) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for o in &ph.outs {
        sel += o.select_ops;
        upd += o.update_ops;
        stm += o.statements;
        com += o.commits;
        rows += o.rows;
        retries += o.retries;
    }
    let has_io = version >= 160000;
    let (physical, hits, read_ms) = if has_io {
        (d("io_reads"), d("io_hits"), d("io_read_time_ms"))
    } else {
        (
            d("db_blks_read"),
            d("db_blks_hit"),
            d("db_blk_read_time_ms"),
        )
    };
    let logical = physical + hits;
    let mut c = BTreeMap::new();
    super::WorkTotals {
        selects: sel,
        updates: upd,
        statements: stm,
        commits: com,
        rows,
    }
    .put_counters(&mut c, m);
    let mut put = |k: &str, v: f64| {
        c.insert(k.to_string(), v);
    };
    put("retried_ops", retries as f64);
    put("physical_reads", physical);
    put("logical_reads", logical);
    put("buffer_hits", hits);
    put("physical_reads_per_s", physical / m);
    put("logical_reads_per_s", logical / m);
    put("blk_read_time_ms", read_ms);
    if physical > 0.0 && (set_io_timing || spec.io_timing) {
        put("avg_read_us", read_ms * 1e3 / physical);
    }
    for k in stats1.v.keys() {
        put(&format!("pg_{k}"), d(k));
    }
    // Server CPU: every server process present at both ends of the window.
    let (mut su, mut ss) = (0.0, 0.0);
    for (pid, a) in &ph.cpu0 {
        if let Some(b) = ph.cpu1.get(pid) {
            su += (b.0 - a.0).max(0.0);
            ss += (b.1 - a.1).max(0.0);
        }
    }
    let server_cpu = su + ss;
    // The client's CPU (this process) and the device view over the window.
    let (client, dev) = ph
        .snap0
        .delta(&ph.snap1, physical as u64, device.as_deref());
    put("client_cpu_s", client.user_s + client.sys_s);
    if local {
        put("server_cpu_s", server_cpu);
    }
    let per = |x: f64| {
        if physical > 0.0 {
            x * 1e6 / physical
        } else {
            0.0
        }
    };
    let cpu = if local {
        CpuStats {
            user_s: su,
            sys_s: ss,
            us_per_io: per(server_cpu),
            user_us_per_io: per(su),
            sys_us_per_io: per(ss),
            runq_delay_s: 0.0,
            runq_us_per_io: 0.0,
            session_run_s: 0.0,
            ..client
        }
    } else {
        client
    };
    put("cpu_us_per_physical_read", cpu.us_per_io);
    if let Some(dv) = &dev {
        put("device_reads", dv.reads as f64);
        put("device_reads_per_s", dv.reads as f64 / m);
        let served = (physical - dv.reads as f64).max(0.0);
        put("os_cache_served_reads", served);
        put(
            "os_cache_served_share",
            if physical > 0.0 {
                served / physical
            } else {
                0.0
            },
        );
        if served > 0.0 {
            warnings.push(
                "PostgreSQL counts reads served by the OS page cache as reads: compare its \
                 physical reads with the device's reads"
                    .to_string(),
            );
        }
    }
    let c = c;
    let wait_profile = ph.ash.as_ref().map(|(samples, counts)| {
        let total: u64 = counts.values().sum();
        let mut evs: Vec<(&String, &u64)> = counts.iter().collect();
        evs.sort_by(|a, b| b.1.cmp(a.1));
        WaitProfile {
            hz: spec.ash_hz,
            samples: *samples,
            session_samples: total,
            events: evs
                .iter()
                .map(|(e, n)| WaitShare {
                    event: e.to_string(),
                    count: **n,
                    share: **n as f64 / total.max(1) as f64,
                })
                .collect(),
        }
    });
    let mut probe_res = None;
    match ph.probes {
        Some(Ok(w)) => probe_res = Some(w),
        Some(Err(e)) => warnings.push(format!(
            "the backends' probes failed ({e:#}): their per-I/O latency histograms and the \
             wait-event table were not measured"
        )),
        None => {}
    }
    let ops_res: Vec<OpResult> = ph.ops;
    let spec_json = json!({
        "engine": "postgres",
        "dsn": redact_dsn(dsn),
        "server_version_num": version,
        "layout": layout,
        "shared_buffers": shared_buffers,
        "plan": plan,
        "stats_source": if has_io { "pg_stat_io" } else { "pg_stat_database" },
        "sessions": spec.sessions,
        "update_pct": spec.update_pct,
        "work_unit": spec.work_unit,
        "run": spec,
    });
    let run0 = RunResult {
        name: format!(
            "postgres SLOB sessions={} update={}% work_unit={}",
            spec.sessions, spec.update_pct, spec.work_unit
        ),
        phase: "db".to_string(),
        spec: crate::results::Spec::of(&spec_json)?,
        started: ph.started,
        duration_s: m,
        duration_unknown: false,
        interval_s: spec.interval_s,
        warmup_s: spec.warmup_s,
        ops: ops_res,
        sessions: ph.outs.iter().filter_map(|o| o.summary.clone()).collect(),
        cpu: Some(cpu),
        device: dev,
        page_cache: None,
        counters: c,
        interrupted: crate::interrupt::flag().load(std::sync::atomic::Ordering::Relaxed),
        warnings,
        verify: None,
        corruption: Vec::new(),
        block: None,
        io_buffers: None,
        targets: Vec::new(),
    };
    let mut res = Results::new(Kind::Db, cmdline);
    res.environment = crate::sys::environment();
    res.environment.target = Some(match &data_dir {
        Some(d) => crate::sys::target_info(
            Path::new(d),
            crate::results::StorageKind::Postgres,
            layout.data_bytes(),
        ),
        None => TargetInfo {
            path: redact_dsn(dsn),
            kind: crate::results::StorageKind::Postgres,
            size_bytes: layout.data_bytes(),
            ..Default::default()
        },
    });
    res.runs = vec![run0];
    res.db = Some(DbInfo {
        engine: DbEngine::Postgres,
        layout: layout.stored(),
        wait_profile,
    });
    if let Some(w) = probe_res {
        probes::merge(&mut res, w, device.as_deref());
    }
    Ok(res)
}
