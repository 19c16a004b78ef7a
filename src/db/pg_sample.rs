//! `iolens db sample --engine postgres`: take snapshots of PostgreSQL's I/O statistics views
//! (`pg_stat_io` from 16, `pg_stat_database`, `pg_stat_statements` when the extension is
//! loaded) every interval for a window, and turn them into the same per-interval means-only
//! evidence as `ingest --format pg-stat-io` ([`crate::sources::pg_stats`]). Read-only: one
//! connection, `SELECT`s only. A signal (Ctrl-C) ends the window early; what was taken is kept.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use postgres::{Client, SimpleQueryMessage};

use crate::results::{Kind, Results};
use crate::sources::pg_stats::{Builder, StatsView};
use crate::sources::sql_table::TextTable;

/// One query's rows as a printed table, every value as text (as psql would print it).
fn table(c: &mut Client, sql: &str) -> Result<TextTable> {
    let msgs = c
        .simple_query(sql)
        .map_err(|e| anyhow!("{sql}: {}", super::postgres::pg_msg(&e)))?;
    let mut t = TextTable::default();
    for m in msgs {
        if let SimpleQueryMessage::Row(r) = m {
            if t.columns.is_empty() {
                t.columns = r.columns().iter().map(|c| c.name().to_string()).collect();
            }
            t.rows
                .push((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect());
        }
    }
    Ok(t)
}

/// Sample the views of the server at `dsn` every `interval` for `duration` (the first snapshot
/// at once, the last at the window's end).
pub fn sample(
    dsn: &str,
    interval: Duration,
    duration: Duration,
    cmdline: Vec<String>,
) -> Result<Results> {
    let mut c = super::postgres::connect(dsn)?;
    let version: u32 = table(&mut c, "SHOW server_version_num")?
        .rows
        .first()
        .and_then(|r| r.first().cloned().flatten())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut res = Results::new(Kind::Db, cmdline);
    let mut views: Vec<(StatsView, String, Builder)> = Vec::new();
    let q = |v: &str| format!("SELECT now() AS ts, * FROM {v}");
    if version >= 160000 {
        views.push((StatsView::Io, q("pg_stat_io"), Builder::new(StatsView::Io)));
    } else {
        res.warnings.push(format!(
            "the server is PostgreSQL {}.{}: pg_stat_io came in 16, so only pg_stat_database \
             (and pg_stat_statements) are sampled",
            version / 10000,
            version % 10000 / 100
        ));
    }
    views.push((
        StatsView::Database,
        q("pg_stat_database"),
        Builder::new(StatsView::Database),
    ));
    let has_pss = table(
        &mut c,
        "SELECT to_regclass('pg_stat_statements') IS NOT NULL AS present",
    )?
    .rows
    .first()
    .and_then(|r| r.first().cloned().flatten())
        == Some("t".to_string());
    let pss = q("pg_stat_statements");
    if !has_pss {
        res.warnings.push(
            "pg_stat_statements is not installed in this database (CREATE EXTENSION \
             pg_stat_statements, with it in shared_preload_libraries): per-statement I/O time \
             not sampled"
                .into(),
        );
    } else if let Err(e) = table(&mut c, &format!("{pss} LIMIT 0")) {
        res.warnings.push(format!(
            "pg_stat_statements cannot be read ({e}): per-statement I/O time not sampled"
        ));
    } else {
        views.push((
            StatsView::Statements,
            pss,
            Builder::new(StatsView::Statements),
        ));
    }
    let timing = table(&mut c, "SHOW track_io_timing")?
        .rows
        .first()
        .and_then(|r| r.first().cloned().flatten())
        .unwrap_or_default();
    if timing != "on" {
        res.warnings.push(
            "track_io_timing is off on this server: counts and bytes only, no I/O times or means \
             (SET track_io_timing = on, as a superuser, or in postgresql.conf)"
                .into(),
        );
    }
    let start = Instant::now();
    let mut k: u32 = 0;
    loop {
        for (_, sql, b) in views.iter_mut() {
            let t = table(&mut c, sql)?;
            b.table(&t)?;
        }
        k += 1;
        let Some(next) = interval.checked_mul(k).filter(|n| *n <= duration) else {
            break;
        };
        let wait = (start + next).saturating_duration_since(Instant::now());
        if !crate::interrupt::sleep_unless_interrupted(wait) {
            break;
        }
    }
    for (v, _, b) in views {
        match b.finish()? {
            Some(s) => res.io_stats.push(s),
            None => res.warnings.push(format!("{} gave no rows", v.name())),
        }
    }
    Ok(res)
}
