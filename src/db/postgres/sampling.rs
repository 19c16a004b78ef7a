//! What a PostgreSQL run reads from the server around its sessions: statistics counters
//! (`pg_stat_io` or `pg_stat_database`) before and after, the backends' CPU, and wait events
//! sampled from `pg_stat_activity` (ASH-style).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::Result;
use postgres::Client;

use super::errors::{connect, PgCtx};
use super::probes;
use crate::db::host;
use crate::recorder::IntervalSnapshot;
use crate::session::Watch;

/// Server-side counters read before and after the measured window.
#[derive(Clone, Debug, Default)]
pub(super) struct PgStats {
    /// Named values; deltas are taken key by key.
    pub(super) v: BTreeMap<String, f64>,
}

pub(super) fn read_stats(c: &mut Client, tables: &[String], version: i32) -> Result<PgStats> {
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

/// Blocks of `tables` (heap and index) read into and found in shared buffers, from
/// `pg_statio_user_tables`: (read, hit).
pub(super) fn table_reads(c: &mut Client, tables: &[String]) -> Result<(f64, f64)> {
    c.batch_execute("SELECT pg_stat_clear_snapshot()")
        .pg("cannot refresh statistics")?;
    let r = c
        .query_one(
            "SELECT coalesce(sum(heap_blks_read), 0)::float8 + coalesce(sum(idx_blks_read), 0)::float8,
                    coalesce(sum(heap_blks_hit), 0)::float8 + coalesce(sum(idx_blks_hit), 0)::float8
               FROM pg_statio_user_tables WHERE relname = ANY($1)",
            &[&tables],
        )
        .pg("cannot read pg_statio_user_tables")?;
    Ok((r.get(0), r.get(1)))
}

pub(super) fn server_pids(c: &mut Client, exclude: &[i32]) -> Vec<i32> {
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

pub(super) fn cpu_of(pids: &[i32]) -> BTreeMap<i32, (f64, f64)> {
    pids.iter()
        .filter_map(|p| host::pid_cpu_split(*p).map(|c| (*p, c)))
        .collect()
}

/// ASH-style sampler: wait events of the sessions' backends, `hz` times a second.
pub(super) fn sample_waits(
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
pub(super) type AshSamples = (u64, BTreeMap<String, u64>);

/// What a phase does around its sessions: reads the server's statistics and CPU and starts the
/// wait sampler once every session is connected, prints progress, and reads the CPU again
/// before the sessions disconnect.
pub(super) struct PgWatch<'a> {
    pub(super) progress: Option<crate::db::DbProgress>,
    pub(super) ctl: &'a mut Client,
    pub(super) ctl_pid: i32,
    pub(super) measure: bool,
    pub(super) local: bool,
    pub(super) tables: &'a [String],
    /// The tables of each target (a layout over several tablespaces; else empty), and their
    /// [`table_reads`] when measurement began.
    pub(super) target_tables: &'a [Vec<String>],
    pub(super) targets0: Vec<(f64, f64)>,
    pub(super) version: i32,
    pub(super) dsn: &'a str,
    pub(super) hz: f64,
    pub(super) stats0: PgStats,
    pub(super) sampler: Option<std::thread::JoinHandle<Result<AshSamples>>>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) others: Vec<i32>,
    pub(super) cpu0: BTreeMap<i32, (f64, f64)>,
    pub(super) cpu1: BTreeMap<i32, (f64, f64)>,
    pub(super) done: Arc<Barrier>,
    /// Trace the backends with the watch probes (measured phase, local server, privilege).
    pub(super) probe: bool,
    pub(super) interval: Duration,
    pub(super) probes: Option<probes::BackendProbes>,
    pub(super) probe_error: Option<anyhow::Error>,
}

impl Watch<i32> for PgWatch<'_> {
    fn starting(&mut self, pids: &[i32]) -> Result<()> {
        if self.measure && self.probe {
            // First, so the whole measured window is under the probes.
            match probes::BackendProbes::start(pids, self.interval, self.dsn) {
                Ok(p) => self.probes = Some(p),
                Err(e) => self.probe_error = Some(e),
            }
        }
        if self.measure {
            self.stats0 = read_stats(self.ctl, self.tables, self.version)?;
            self.targets0 = self
                .target_tables
                .iter()
                .map(|t| table_reads(self.ctl, t))
                .collect::<Result<_>>()?;
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

    fn measuring(&mut self) {
        if let Some(p) = self.progress.as_mut() {
            Watch::<i32>::measuring(p);
        }
    }

    fn stopped(&mut self) {
        if let Some(p) = self.progress.as_mut() {
            Watch::<i32>::stopped(p);
        }
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
