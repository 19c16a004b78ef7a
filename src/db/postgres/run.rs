//! `db run` on PostgreSQL: the sessions (one connection each, the SLOB work loop), the warm-up
//! and measured phases, and the run's results.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use postgres::Client;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde_json::json;

use super::errors::{connect, is_code, pg_msg, PgCtx};
use super::probes;
use super::sampling::{read_stats, PgStats, PgWatch};
use super::setup::{local_data_dir, read_state};
use crate::db::{host, redact_dsn, KeyPicker, Layout, RunSpec};
use crate::recorder::{self, SessionRecorder};
use crate::results::evidence::{DbEngine, DbInfo, WaitProfile, WaitShare};
use crate::results::{CpuStats, Kind, OpResult, Results, RunResult, SessionSummary, TargetInfo};
use crate::session::RunContext;
use crate::session::{self, Gate, Plan};
use crate::sys::SysSnapshot;
use crate::units::fmt_bytes;

/// Whether the server runs on this host: its backend for `c` is a local `postgres` process.
pub(super) fn server_is_local(c: &mut Client) -> Option<i32> {
    let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).ok()?.get(0);
    let comm = host::pid_comm(pid)?;
    comm.starts_with("postgres").then_some(pid)
}

pub(super) struct SessionOut {
    pub(super) select_ops: u64,
    pub(super) update_ops: u64,
    pub(super) statements: u64,
    pub(super) commits: u64,
    pub(super) rows: u64,
    pub(super) retries: u64,
    pub(super) summary: Option<SessionSummary>,
    pub(super) finished: Instant,
}

pub(super) struct SessionCfg {
    pub(super) dsn: String,
    pub(super) schema: u32,
    pub(super) picker: KeyPicker,
    pub(super) think: Duration,
    pub(super) set_io_timing: bool,
    pub(super) seed: u64,
    /// Over several tablespaces, the target of the session's schema: it records in that
    /// target's set and in the totals' (the last).
    pub(super) target: Option<usize>,
}

pub(super) fn session(cfg: SessionCfg, gate: Gate<i32>, done: Arc<Barrier>) -> Result<SessionOut> {
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
    let mut recs: Vec<SessionRecorder> = start.recs;
    // The sets this session records in: its target's and the totals' (the last).
    let sets: Vec<usize> = match (cfg.target, recs.len()) {
        (_, 0) => Vec::new(),
        (Some(t), n) if t + 1 < n => vec![t, n - 1],
        (_, n) => vec![n - 1],
    };
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
                    for &k in &sets {
                        recs[k].record(crate::db::UPDATE, t0, t1, 0);
                        recs[k].record(crate::db::COMMIT, tc, t1, 0);
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
                    for &k in &sets {
                        recs[k].record(crate::db::SELECT, t0, t1, 0);
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
    out.summary = recs.last().map(recorder::session_summary);
    drop(recs);
    // Wait until the main thread has read the server processes' CPU, then disconnect.
    done.wait();
    drop(c);
    match failure {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// One phase of sessions (warm-up or measured). Returns the outputs and, for the measured phase,
/// the op results, ASH samples and server CPU.
pub(super) struct Phase {
    pub(super) outs: Vec<SessionOut>,
    pub(super) ops: Vec<OpResult>,
    pub(super) measured_s: f64,
    pub(super) started: String,
    pub(super) stats0: PgStats,
    pub(super) cpu0: BTreeMap<i32, (f64, f64)>,
    pub(super) cpu1: BTreeMap<i32, (f64, f64)>,
    pub(super) ash: Option<(u64, BTreeMap<String, u64>)>,
    pub(super) snap0: SysSnapshot,
    pub(super) snap1: SysSnapshot,
    /// The backends' watch (`None`: not traced), or why it failed.
    pub(super) probes: Option<Result<Results>>,
    /// Over several tablespaces: each target's operations, its disk's window and its tables'
    /// reads when measurement began.
    pub(super) target_ops: Vec<Vec<OpResult>>,
    pub(super) disks: crate::session::DiskWindow,
    pub(super) targets0: Vec<(f64, f64)>,
}

/// Where a phase's sessions work: the layout's tablespaces' disks and tables (one target per
/// tablespace; none in the default tablespace).
pub(super) struct Targets {
    pub(super) disks: crate::session::DiskWindow,
    pub(super) tables: Vec<Vec<String>>,
}

impl Targets {
    fn several(&self) -> bool {
        self.tables.len() > 1
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run_phase(
    dsn: &str,
    ctl: &mut Client,
    ctl_pid: i32,
    layout: &Layout,
    spec: &RunSpec,
    ctx: RunContext<'_>,
    picker: &KeyPicker,
    secs: f64,
    measure: bool,
    set_io_timing: bool,
    local: bool,
    tables: &[String],
    version: i32,
    device: Option<&str>,
    probe: bool,
    targets: Targets,
) -> Result<Phase> {
    let n = spec.sessions as usize;
    let done = Arc::new(Barrier::new(n + 1));
    let secs_d = Duration::from_secs_f64(secs);
    let nt = targets.tables.len();
    let many = targets.several();
    // One set of the statements per target, then the totals'.
    let sets = vec![crate::db::DB_OPS; if many { nt + 1 } else { 1 }];
    let plan = Plan {
        sessions: n,
        ops: &sets,
        // The warm-up phase records nothing: all of it lies before the base.
        warmup: if measure { Duration::ZERO } else { secs_d },
        duration: Some(if measure { secs_d } else { Duration::ZERO }),
        interval: Duration::from_secs_f64(spec.interval_s),
        device,
        interrupt: ctx.interrupt,
        thread_name: "iolens-pg",
        // With a warm-up phase, that phase waits for the start (a warm-up before it).
        start_at: if measure && spec.warmup_s > 0.0 {
            None
        } else {
            ctx.start_at
        },
        // `db run --watch` traces iolens' own I/O: PostgreSQL's is its server's.
        block_watch: None,
    };
    let mut watch = PgWatch {
        progress: measure.then(|| {
            crate::db::DbProgress::new(spec, &ctx)
                .ops_set(sets.len() - 1)
                .disks(targets.disks)
        }),
        ctl,
        ctl_pid,
        measure,
        local,
        tables,
        target_tables: if many { &targets.tables } else { &[] },
        targets0: Vec::new(),
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
            let schema = i as u32 % layout.schemas;
            let cfg = SessionCfg {
                dsn: dsn.to_string(),
                schema,
                target: many.then_some(schema as usize % nt.max(1)),
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
        progress,
        targets0,
        ..
    } = watch;
    let disks = progress.map(|p| p.disks).unwrap_or_default();
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
    let mut target_ops = driven.ops(measured_s);
    let ops = target_ops.pop().unwrap_or_default();
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
        target_ops,
        disks,
        targets0,
    })
}

/// Drop the layout's tables' and indexes' files (every 1 GiB segment) from the OS page cache,
/// so the server's reads of them are the disk's: they are written back first, then dropped
/// (`posix_fadvise(DONTNEED)`). Needs the server's data directory readable here (root or the
/// server's user); returns how many files were dropped.
fn drop_tables_cache(c: &mut Client, data_dir: &Path, tables: &[String]) -> Result<usize> {
    let mut rels: Vec<String> = tables.to_vec();
    rels.extend(tables.iter().map(|t| format!("{t}_k")));
    let rows = c
        .query(
            "SELECT pg_relation_filepath(oid) FROM pg_class WHERE relname = ANY($1)",
            &[&rels],
        )
        .pg("cannot read the tables' files")?;
    let mut n = 0;
    for r in rows {
        let Some(rel): Option<String> = r.get(0) else {
            continue;
        };
        let first = data_dir.join(&rel);
        for seg in 0.. {
            let p = if seg == 0 {
                first.clone()
            } else {
                std::path::PathBuf::from(format!("{}.{seg}", first.display()))
            };
            if seg > 0 && !p.exists() {
                break;
            }
            host::drop_page_cache(&p)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Run the SLOB work loop against the layout reached through `dsn`; over several tablespaces
/// (`dirs`: the layout's directories, or none for those it recorded) each session works on
/// one schema in its target's tablespace, and the run keeps each target's series, its tables'
/// reads and its disk's counters and block layer beside the totals.
pub fn run(
    dsn: &str,
    dirs: &[std::path::PathBuf],
    spec: &RunSpec,
    ctx: RunContext<'_>,
    cmdline: Vec<String>,
) -> Result<Results> {
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
    // Every target passes its checks before any session connects.
    let spaces = super::tablespace::read_spaces(&mut ctl)?;
    super::tablespace::check_existing(&mut ctl, &spaces, dirs)?;
    let picker = KeyPicker::new(layout.rows, spec)?;
    let tables: Vec<String> = (0..layout.schemas)
        .map(|s| format!("iolens_t{s}"))
        .collect();
    let nt = spaces.len().max(1);
    let target_tables: Vec<Vec<String>> = (0..spaces.len())
        .map(|k| {
            (0..layout.schemas)
                .filter(|s| *s as usize % nt == k)
                .map(|s| format!("iolens_t{s}"))
                .collect()
        })
        .collect();
    let disks = crate::session::DiskWindow::of(spaces.iter().map(|s| s.location.as_path()));
    if spaces.len() > 1 && !spec.sessions.is_multiple_of(layout.schemas) {
        warnings.push(format!(
            "{} sessions over {} schemas: the schemas (and so the tablespaces) do not get the \
             same number of sessions",
            spec.sessions, layout.schemas
        ));
    }
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
    // Over tablespaces the data lies on their disks: the run's own disk view is theirs when
    // they share one.
    let device = if spaces.is_empty() {
        data_dir
            .as_deref()
            .and_then(|d| crate::sys::block_dev_for(Path::new(d)))
            .map(|b| b.name)
    } else {
        disks.device()
    };
    if !local {
        warnings.push(
            "the server does not run on this host (or its processes are not visible): CPU per \
             read is the client's, and there is no device view"
                .to_string(),
        );
    } else if spaces.len() > 1 {
        for (i, sp) in spaces.iter().enumerate() {
            if disks.name(i).is_none() {
                warnings.push(format!(
                    "no block device found for {} (overlay or network filesystem?): no device \
                     view of that tablespace",
                    sp.location.display()
                ));
            }
        }
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
    if spec.drop_os_cache {
        let dropped = match &data_dir {
            Some(d) => drop_tables_cache(&mut ctl, Path::new(d), &tables),
            None => Err(anyhow!("the server's data directory is not on this host")),
        };
        if let Err(e) = dropped {
            warnings.push(format!(
                "the tables' pages were not dropped from the OS page cache ({e:#}), so some of \
                 the server's reads may be served by it"
            ));
        }
    }
    if spec.warmup_s > 0.0 {
        run_phase(
            dsn,
            &mut ctl,
            ctl_pid.unwrap_or(0),
            &layout,
            spec,
            ctx,
            &picker,
            spec.warmup_s,
            false,
            set_io_timing,
            local,
            &tables,
            version,
            None,
            false,
            Targets {
                disks: Default::default(),
                tables: Vec::new(),
            },
        )?;
    }
    let ph = run_phase(
        dsn,
        &mut ctl,
        ctl_pid.unwrap_or(0),
        &layout,
        spec,
        ctx,
        &picker,
        spec.duration_s,
        true,
        set_io_timing,
        local,
        &tables,
        version,
        device.as_deref(),
        probe,
        Targets {
            disks,
            tables: target_tables.clone(),
        },
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
    crate::db::WorkTotals {
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
    // Each target's own series, its tables' reads and its disk's counters.
    let mut targets = Vec::new();
    if spaces.len() > 1 {
        for (k, ((sp, ops), tabs)) in spaces
            .iter()
            .zip(ph.target_ops)
            .zip(&target_tables)
            .enumerate()
        {
            let (r1, h1) = super::sampling::table_reads(&mut ctl, tabs)?;
            let (r0, h0) = ph.targets0.get(k).copied().unwrap_or_default();
            let reads = (r1 - r0).max(0.0);
            let bytes = tabs.len() as u64 * layout.rows * crate::db::BLOCK;
            let mut tr = ph.disks.target_run(
                k,
                &sp.location,
                (crate::results::StorageKind::Postgres, bytes),
                ops,
                Some(reads as u64),
            );
            tr.counters.insert("physical_reads".into(), reads);
            tr.counters.insert("buffer_hits".into(), (h1 - h0).max(0.0));
            tr.counters.insert("tables".into(), tabs.len() as f64);
            targets.push(tr);
        }
    }
    let spec_json = json!({
        "engine": "postgres",
        "dsn": redact_dsn(dsn),
        "server_version_num": version,
        "layout": layout,
        "shared_buffers": shared_buffers,
        "plan": plan,
        "stats_source": if has_io { "pg_stat_io" } else { "pg_stat_database" },
        "tablespaces": spaces,
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
        device_intervals: Vec::new(),
        sched_intervals: Vec::new(),
        io_buffers: None,
        targets,
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
