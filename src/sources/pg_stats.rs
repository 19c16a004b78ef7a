//! Databases' cumulative I/O statistics read at snapshots — PostgreSQL's and MySQL's/MariaDB's.
//!
//! MySQL/MariaDB: `performance_schema.file_summary_by_instance` (per file and instrument:
//! `COUNT_READ`, `SUM_TIMER_READ` in picoseconds, `SUM_NUMBER_OF_BYTES_READ`, the same for
//! writes, `COUNT_MISC`/`SUM_TIMER_MISC` for opens, syncs, closes …) and the sys schema's
//! `io_global_by_file_by_latency` (`file`, `count_read`, `read_latency` … formatted as
//! `8.65 ms`) or `x$io_global_by_file_by_latency` (picoseconds), as the `mysql`/`mariadb` client
//! prints them (boxed or `-B`) or CSV. The counters start again at a server restart or a
//! `TRUNCATE` of the summary table: counters that go back are handled as below.
//!
//! PostgreSQL's: `pg_stat_io` (16 and 17: counts
//! and `op_bytes`; 18: `*_bytes` columns and `wal` rows, no `op_bytes`), `pg_stat_database`
//! (`blks_read`, `blk_read_time`, `blk_write_time`, `blks_hit`) and `pg_stat_statements`
//! (`blk_read_time` up to 16, `shared_blk_read_time` / `local_blk_read_time` from 17), as
//! printed by psql (aligned, unaligned, `\watch`) or as CSV ([`super::sql_table`]).
//!
//! Snapshots: rows with the same value in a time column (`now`, `ts`, `snapshot_time`, …), or
//! else each printed table (a `\watch` title gives its time), or else the rows up to a key
//! seen again. Consecutive snapshots give one interval each: per key and operation, the
//! difference of the counters. A key whose `stats_reset` changed, or whose counters went back
//! (a reset, a crash, a statement evicted and seen again), counts from zero in that interval:
//! its delta is what the later snapshot holds, a lower bound, and the interval says how many
//! keys it has so. A key first seen in a later snapshot counts from zero (said). One snapshot
//! alone is one interval since its `stats_reset`.
//!
//! The result is means-only evidence ([`IoStats`]): counts, bytes and total times, and the
//! mean time per operation where both are kept. A time of 0 over operations that happened is
//! timing that was off (`track_io_timing`, `track_wal_io_timing`): no time, not a fast device.

use std::collections::HashMap;

use anyhow::{bail, Result};

use super::sql_table::{read_tables, TextTable};
use super::{rfc3339_ns, LineReader};
use crate::results::io_stats::{IoStats, IoStatsDelta, IoStatsInterval, IoStatsSeries};

/// Most keys one view may hold per snapshot (pg_stat_statements keeps 5,000 by default).
const MAX_KEYS: usize = 1_000_000;
/// Most snapshots one input may hold.
const MAX_SNAPSHOTS: usize = 10_000_000;

/// Which view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsView {
    Io,
    Database,
    Statements,
    /// MySQL/MariaDB per-file I/O: performance_schema.file_summary_by_instance or sys's
    /// io_global_by_file_by_latency (and its x$ form).
    MysqlFileIo,
}

impl StatsView {
    /// The view's name.
    pub fn name(self) -> &'static str {
        match self {
            StatsView::Io => "pg_stat_io",
            StatsView::Database => "pg_stat_database",
            StatsView::Statements => "pg_stat_statements",
            StatsView::MysqlFileIo => "mysql_file_io",
        }
    }
    /// What makes counters go back, in words.
    fn went_back_causes(self) -> &'static str {
        match self {
            StatsView::MysqlFileIo => "a server restart, a TRUNCATE of the summary table",
            _ => "a reset, a crash, a statement evicted",
        }
    }
    /// Why counted operations can have no time.
    fn timing_off(self) -> &'static str {
        match self {
            StatsView::MysqlFileIo => {
                "the instrument's TIMED was NO in performance_schema.setup_instruments"
            }
            _ => "the server's timing was off: track_io_timing, track_wal_io_timing for wal rows",
        }
    }
    fn needs(self) -> &'static str {
        match self {
            StatsView::Io => "backend_type, object, context and reads",
            StatsView::Database => "blks_read and blk_read_time",
            StatsView::Statements => {
                "queryid and blk_read_time (16 and before) or \
                 shared_blk_read_time (17 and after)"
            }
            StatsView::MysqlFileIo => {
                "file_name, count_read and sum_timer_read (performance_schema.\
                 file_summary_by_instance) or file, count_read and read_latency \
                 (sys.io_global_by_file_by_latency)"
            }
        }
    }
}

/// Columns that say when a snapshot was taken, first found wins.
const TIME_COLUMNS: &[&str] = &[
    "snapshot_time",
    "sample_time",
    "snap_time",
    "sampled_at",
    "captured_at",
    "collected_at",
    "ts",
    "now",
    "clock_timestamp",
    "time",
    "timestamp",
];

/// Multiplier from a time column's unit to ms.
const MS: f64 = 1.0;
/// performance_schema timers are picoseconds.
const PS: f64 = 1e-9;

/// How an operation's bytes are known.
#[derive(Debug, Clone, Copy)]
enum Bytes {
    None,
    Col(usize),
    /// count × `op_bytes` (16, 17).
    PerOp(usize),
}

/// One operation, resolved against a table's columns.
#[derive(Debug, Clone)]
struct Op {
    name: &'static str,
    count: Vec<usize>,
    time: Option<usize>,
    /// ms per unit of a bare number in the time column (a number with a unit says its own).
    time_scale: f64,
    bytes: Bytes,
}

/// A table recognised as a view's snapshot(s).
struct Layout {
    column_set: String,
    ops: Vec<Op>,
    key: Vec<(usize, &'static str)>,
    reset: Option<usize>,
    time: Option<usize>,
    query: Option<usize>,
}

fn layout(view: StatsView, t: &TextTable) -> Option<Layout> {
    let c = |n: &str| t.col(n);
    let all = |ns: &[&str]| -> Option<Vec<usize>> { ns.iter().map(|n| c(n)).collect() };
    let op = |name: &'static str, count: &[&str], time: Option<&str>, bytes: Bytes| -> Option<Op> {
        let count = if count.is_empty() {
            Vec::new()
        } else {
            all(count).unwrap_or_default()
        };
        let time = time.and_then(c);
        (!count.is_empty() || time.is_some()).then_some(Op {
            name,
            count,
            time,
            time_scale: MS,
            bytes,
        })
    };
    let mut ops = Vec::new();
    let (column_set, key) = match view {
        StatsView::Io => {
            let key = vec![
                (c("backend_type")?, "backend_type"),
                (c("object")?, "object"),
                (c("context")?, "context"),
            ];
            c("reads")?;
            let ob = c("op_bytes");
            let by = |col: &str| match (c(col), ob) {
                (Some(i), _) => Bytes::Col(i),
                (None, Some(o)) => Bytes::PerOp(o),
                _ => Bytes::None,
            };
            let set = if c("read_bytes").is_some() {
                "PostgreSQL 18 and after (read_bytes, write_bytes, extend_bytes; wal rows)"
            } else if ob.is_some() {
                "PostgreSQL 16 and 17 (op_bytes)"
            } else {
                "a selection without op_bytes or read_bytes (no bytes)"
            };
            ops.extend(op("read", &["reads"], Some("read_time"), by("read_bytes")));
            ops.extend(op(
                "write",
                &["writes"],
                Some("write_time"),
                by("write_bytes"),
            ));
            ops.extend(op(
                "writeback",
                &["writebacks"],
                Some("writeback_time"),
                by("writeback_bytes"),
            ));
            ops.extend(op(
                "extend",
                &["extends"],
                Some("extend_time"),
                by("extend_bytes"),
            ));
            ops.extend(op("fsync", &["fsyncs"], Some("fsync_time"), Bytes::None));
            ops.extend(op("hit", &["hits"], None, Bytes::None));
            ops.extend(op("eviction", &["evictions"], None, Bytes::None));
            ops.extend(op("reuse", &["reuses"], None, Bytes::None));
            (set.to_string(), key)
        }
        StatsView::Database => {
            c("blks_read")?;
            c("blk_read_time")?;
            let key = if let Some(i) = c("datname") {
                vec![(i, "datname")]
            } else if let Some(i) = c("datid") {
                vec![(i, "datid")]
            } else {
                Vec::new()
            };
            ops.extend(op(
                "read",
                &["blks_read"],
                Some("blk_read_time"),
                Bytes::None,
            ));
            ops.extend(op("write", &[], Some("blk_write_time"), Bytes::None));
            ops.extend(op("hit", &["blks_hit"], None, Bytes::None));
            (
                "blks_read, blk_read_time, blk_write_time (all versions)".to_string(),
                key,
            )
        }
        StatsView::Statements => {
            let q = c("queryid")?;
            let mut key = vec![(q, "queryid")];
            for k in ["dbid", "userid", "toplevel"] {
                if let Some(i) = c(k) {
                    key.push((i, k));
                }
            }
            let set = if c("shared_blk_read_time").is_some() {
                ops.extend(op(
                    "shared read",
                    &["shared_blks_read"],
                    Some("shared_blk_read_time"),
                    Bytes::None,
                ));
                ops.extend(op(
                    "shared write",
                    &["shared_blks_written"],
                    Some("shared_blk_write_time"),
                    Bytes::None,
                ));
                ops.extend(op(
                    "local read",
                    &["local_blks_read"],
                    Some("local_blk_read_time"),
                    Bytes::None,
                ));
                ops.extend(op(
                    "local write",
                    &["local_blks_written"],
                    Some("local_blk_write_time"),
                    Bytes::None,
                ));
                "PostgreSQL 17 and after (shared_blk_read_time, local_blk_read_time)"
            } else if c("blk_read_time").is_some() {
                ops.extend(op(
                    "shared+local read",
                    &["shared_blks_read", "local_blks_read"],
                    Some("blk_read_time"),
                    Bytes::None,
                ));
                ops.extend(op(
                    "shared+local write",
                    &["shared_blks_written", "local_blks_written"],
                    Some("blk_write_time"),
                    Bytes::None,
                ));
                "PostgreSQL 16 and before (blk_read_time covers shared and local blocks)"
            } else {
                return None;
            };
            ops.extend(op(
                "temp read",
                &["temp_blks_read"],
                Some("temp_blk_read_time"),
                Bytes::None,
            ));
            ops.extend(op(
                "temp write",
                &["temp_blks_written"],
                Some("temp_blk_write_time"),
                Bytes::None,
            ));
            (set.to_string(), key)
        }
        StatsView::MysqlFileIo => {
            let ps = |o: Option<Op>| {
                o.map(|o| Op {
                    time_scale: PS,
                    ..o
                })
            };
            if let Some(f) = c("file_name") {
                // performance_schema.file_summary_by_instance
                c("count_read")?;
                c("sum_timer_read")?;
                let mut key = vec![(f, "file_name")];
                if let Some(e) = c("event_name") {
                    key.push((e, "event_name"));
                }
                let by = |col: &str| c(col).map_or(Bytes::None, Bytes::Col);
                ops.extend(ps(op(
                    "read",
                    &["count_read"],
                    Some("sum_timer_read"),
                    by("sum_number_of_bytes_read"),
                )));
                ops.extend(ps(op(
                    "write",
                    &["count_write"],
                    Some("sum_timer_write"),
                    by("sum_number_of_bytes_write"),
                )));
                ops.extend(ps(op(
                    "misc",
                    &["count_misc"],
                    Some("sum_timer_misc"),
                    Bytes::None,
                )));
                (
                    "performance_schema.file_summary_by_instance (times in picoseconds)"
                        .to_string(),
                    key,
                )
            } else {
                // sys.io_global_by_file_by_latency, x$io_global_by_file_by_latency
                let f = c("file")?;
                c("count_read")?;
                c("read_latency")?;
                for (name, count, time) in [
                    ("read", "count_read", "read_latency"),
                    ("write", "count_write", "write_latency"),
                    ("misc", "count_misc", "misc_latency"),
                ] {
                    ops.extend(ps(op(name, &[count], Some(time), Bytes::None)));
                }
                (
                    "sys.io_global_by_file_by_latency (formatted times) or \
                     x$io_global_by_file_by_latency (picoseconds)"
                        .to_string(),
                    vec![(f, "file")],
                )
            }
        }
    };
    Some(Layout {
        column_set,
        ops,
        key,
        reset: c("stats_reset"),
        time: TIME_COLUMNS.iter().find_map(|n| c(n)),
        query: if view == StatsView::Statements {
            c("query")
        } else {
            None
        },
    })
}

/// A timestamp as PostgreSQL and others print it: `2026-11-25 14:00:00.123456+00`,
/// `…+05:30`, RFC 3339, without a zone (read as UTC), or seconds since the epoch; ns.
pub(crate) fn parse_ts(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(s) {
        return d.timestamp_nanos_opt();
    }
    for f in ["%Y-%m-%d %H:%M:%S%.f%#z", "%Y-%m-%dT%H:%M:%S%.f%#z"] {
        if let Ok(d) = chrono::DateTime::parse_from_str(s, f) {
            return d.timestamp_nanos_opt();
        }
    }
    for f in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
        if let Ok(d) = chrono::NaiveDateTime::parse_from_str(s, f) {
            return d.and_utc().timestamp_nanos_opt();
        }
    }
    let v: f64 = s.parse().ok()?;
    // Seconds since the epoch, 2001 to 2286.
    (1e9..1e10).contains(&v).then_some((v * 1e9) as i64)
}

/// One operation's counters in one snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Vals {
    count: Option<f64>,
    time: Option<f64>,
    bytes: Option<f64>,
}

/// One key's row in one snapshot.
#[derive(Debug, Clone)]
struct Row {
    reset: Option<String>,
    ops: Vec<(&'static str, Vals)>,
}

/// One snapshot: its time and its keys' rows, in first-seen order.
#[derive(Debug, Default)]
struct Snapshot {
    time_ns: Option<i64>,
    keys: Vec<String>,
    rows: HashMap<String, Row>,
}

/// Turns snapshots of one view into [`IoStats`], one snapshot at a time.
pub(crate) struct Builder {
    view: StatsView,
    out: IoStats,
    series: HashMap<(String, &'static str), usize>,
    prev: Option<Snapshot>,
    cur: Snapshot,
    cur_time_text: Option<String>,
    new_keys: u64,
    gone_keys: u64,
    reset_keys: u64,
    bad_cells: u64,
    tables: u64,
    untimed: bool,
    same_time: u64,
    /// Times printed rounded with their unit (`8.65 ms`).
    formatted_times: bool,
}

/// A time cell in ms: a bare number times `scale`, or a number with its unit as MySQL's sys
/// schema prints it (`8.65 ms`, `0 ps`, `1.20 s`, `2.5 m`); `formatted` is set for the latter.
fn time_ms(cell: &Option<String>, scale: f64, bad: &mut u64, formatted: &mut bool) -> Option<f64> {
    let s = cell.as_deref()?.trim();
    let split = s
        .find(|c: char| c.is_alphabetic() || c == 'µ')
        .unwrap_or(s.len());
    let (n, unit) = (s[..split].trim(), s[split..].trim());
    let per = match unit {
        "" => scale,
        "ps" => 1e-9,
        "ns" => 1e-6,
        "us" | "µs" => 1e-3,
        "ms" => 1.0,
        "s" => 1e3,
        "m" | "min" => 6e4,
        "h" => 3.6e6,
        "d" => 8.64e7,
        "w" => 6.048e8,
        _ => {
            *bad += 1;
            return None;
        }
    };
    if !unit.is_empty() {
        *formatted = true;
    }
    num(&Some(n.to_string()), bad).map(|v| v * per)
}

fn num(cell: &Option<String>, bad: &mut u64) -> Option<f64> {
    let s = cell.as_deref()?.trim();
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Some(v),
        _ => {
            *bad += 1;
            None
        }
    }
}

impl Builder {
    pub(crate) fn new(view: StatsView) -> Builder {
        Builder {
            view,
            out: IoStats {
                view: view.name().to_string(),
                ..Default::default()
            },
            series: HashMap::new(),
            prev: None,
            cur: Snapshot::default(),
            cur_time_text: None,
            new_keys: 0,
            gone_keys: 0,
            reset_keys: 0,
            bad_cells: 0,
            tables: 0,
            untimed: false,
            same_time: 0,
            formatted_times: false,
        }
    }

    /// Feed one printed table; `false` when it is not a table of this view.
    pub(crate) fn table(&mut self, t: &TextTable) -> Result<bool> {
        let Some(l) = layout(self.view, t) else {
            return Ok(false);
        };
        self.tables += 1;
        if self.out.column_set.is_empty() {
            self.out.column_set = l.column_set.clone();
        } else if self.out.column_set != l.column_set {
            self.out.notes.push(format!(
                "the table at line {} has another column set ({}) than the tables before it \
                 ({}): a server upgrade between snapshots?",
                t.line, l.column_set, self.out.column_set
            ));
        }
        // A table without a time column is one snapshot (or more, where keys repeat).
        if l.time.is_none() {
            self.end_snapshot()?;
            self.cur.time_ns = t.title_ns;
            if t.title_ns.is_none() {
                self.untimed = true;
            }
        }
        for row in &t.rows {
            if let Some(tc) = l.time {
                let tt = row[tc].clone();
                if tt != self.cur_time_text || self.cur.keys.is_empty() {
                    if !self.cur.keys.is_empty() {
                        self.end_snapshot()?;
                    }
                    self.cur_time_text = tt.clone();
                    self.cur.time_ns = tt.as_deref().and_then(parse_ts);
                    if self.cur.time_ns.is_none() {
                        bail!(
                            "table at line {}: '{}' in the time column '{}' is not a timestamp \
                             (2026-11-25 14:00:00+00, RFC 3339 or epoch seconds)",
                            t.line,
                            tt.unwrap_or_default(),
                            t.columns[tc]
                        );
                    }
                }
            }
            let mut key = l
                .key
                .iter()
                .map(|&(i, name)| match (name, row[i].as_deref()) {
                    ("datname", None) => "(shared objects)".to_string(),
                    ("toplevel", Some("f" | "false")) => "nested".to_string(),
                    ("toplevel", _) => String::new(),
                    ("dbid", Some(v)) => format!("db {v}"),
                    // `wait/io/file/innodb/innodb_data_file` → `[innodb_data_file]`
                    ("event_name", Some(v)) => format!("[{}]", v.rsplit('/').next().unwrap_or(v)),
                    ("userid", Some(v)) => format!("user {v}"),
                    (_, v) => v.unwrap_or("NULL").to_string(),
                })
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(if self.view == StatsView::MysqlFileIo {
                    " "
                } else {
                    "/"
                });
            if key.is_empty() {
                key = "all".to_string();
            }
            if let Some(q) = l.query.and_then(|q| row[q].as_deref()) {
                let q: String = q.split_whitespace().collect::<Vec<_>>().join(" ");
                key = format!("{key}: {}", super::truncate(&q, 60));
            }
            if self.cur.rows.contains_key(&key) {
                if l.time.is_some() {
                    bail!(
                        "table at line {}: key '{key}' twice in the snapshot of {}",
                        t.line,
                        self.cur_time_text.clone().unwrap_or_default()
                    );
                }
                // Keys repeat: the rows of another snapshot appended without a header.
                self.end_snapshot()?;
                self.untimed = true;
            }
            let mut ops = Vec::with_capacity(l.ops.len());
            for o in &l.ops {
                let count = if o.count.is_empty() {
                    None
                } else {
                    o.count
                        .iter()
                        .map(|&i| num(&row[i], &mut self.bad_cells))
                        .sum::<Option<f64>>()
                };
                let time = o.time.and_then(|i| {
                    time_ms(
                        &row[i],
                        o.time_scale,
                        &mut self.bad_cells,
                        &mut self.formatted_times,
                    )
                });
                let bytes = match o.bytes {
                    Bytes::None => None,
                    Bytes::Col(i) => num(&row[i], &mut self.bad_cells),
                    Bytes::PerOp(i) => {
                        num(&row[i], &mut self.bad_cells).and_then(|b| count.map(|c| c * b))
                    }
                };
                // NULL: an operation this key cannot do.
                if count.is_some() || time.is_some() {
                    ops.push((o.name, Vals { count, time, bytes }));
                }
            }
            if self.cur.rows.len() >= MAX_KEYS {
                bail!("more than {MAX_KEYS} keys in one snapshot");
            }
            self.cur.keys.push(key.clone());
            self.cur.rows.insert(
                key,
                Row {
                    reset: l.reset.and_then(|i| row[i].clone()),
                    ops,
                },
            );
        }
        Ok(true)
    }

    fn series_index(&mut self, key: &str, op: &'static str) -> usize {
        let n_iv = self.out.intervals.len();
        *self.series.entry((key.to_string(), op)).or_insert_with(|| {
            self.out.series.push(IoStatsSeries {
                key: key.to_string(),
                op: op.to_string(),
                deltas: vec![None; n_iv.saturating_sub(1)],
                ..Default::default()
            });
            self.out.series.len() - 1
        })
    }

    /// Close the snapshot being read: the interval from the one before it.
    fn end_snapshot(&mut self) -> Result<()> {
        if self.cur.keys.is_empty() {
            return Ok(());
        }
        let cur = std::mem::take(&mut self.cur);
        self.out.snapshots += 1;
        if self.out.snapshots as usize > MAX_SNAPSHOTS {
            bail!("more than {MAX_SNAPSHOTS} snapshots");
        }
        let Some(prev) = self.prev.take() else {
            self.prev = Some(cur);
            return Ok(());
        };
        let duration_s = match (prev.time_ns, cur.time_ns) {
            (Some(a), Some(b)) => {
                if b < a {
                    bail!(
                        "snapshot {} was taken at {}, before the one before it ({}): \
                         snapshots must be in time order",
                        self.out.snapshots,
                        rfc3339_ns(b),
                        rfc3339_ns(a)
                    );
                }
                if b == a {
                    // `\watch` titles are to the second.
                    self.same_time += 1;
                    None
                } else {
                    Some((b - a) as f64 / 1e9)
                }
            }
            _ => None,
        };
        self.out.intervals.push(IoStatsInterval {
            start: prev.time_ns.map(rfc3339_ns),
            duration_s,
            resets: 0,
        });
        let iv = self.out.intervals.len() - 1;
        for key in &cur.keys {
            let row = &cur.rows[key];
            let before = prev.rows.get(key);
            let went_back = before.is_some_and(|b| {
                (b.reset.is_some() && row.reset.is_some() && b.reset != row.reset)
                    || row.ops.iter().any(|(name, v)| {
                        b.ops.iter().any(|(n, p)| {
                            n == name
                                && [(v.count, p.count), (v.time, p.time), (v.bytes, p.bytes)]
                                    .iter()
                                    .any(|(a, b)| matches!((a, b), (Some(a), Some(b)) if a < b))
                        })
                    })
            });
            if before.is_none() {
                self.new_keys += 1;
            }
            if went_back {
                self.reset_keys += 1;
                self.out.intervals[iv].resets += 1;
            }
            for (name, v) in &row.ops {
                let p = if went_back {
                    None
                } else {
                    before.and_then(|b| b.ops.iter().find(|(n, _)| n == name).map(|x| x.1))
                };
                let d = |a: Option<f64>, b: Option<f64>| a.map(|a| a - b.unwrap_or(0.0));
                let delta = IoStatsDelta {
                    count: d(v.count, p.and_then(|p| p.count)).map(|x| x.round() as u64),
                    bytes: d(v.bytes, p.and_then(|p| p.bytes)).map(|x| x.round() as u64),
                    time_ms: d(v.time, p.and_then(|p| p.time)),
                };
                let s = self.series_index(key, name);
                let dl = &mut self.out.series[s].deltas;
                dl.resize(iv, None);
                dl.push(Some(delta));
            }
        }
        self.gone_keys += prev
            .keys
            .iter()
            .filter(|k| !cur.rows.contains_key(*k))
            .count() as u64;
        self.prev = Some(cur);
        Ok(())
    }

    /// The evidence read, or why there is none.
    pub(crate) fn finish(mut self) -> Result<Option<IoStats>> {
        self.end_snapshot()?;
        if self.tables == 0 {
            return Ok(None);
        }
        if self.out.snapshots == 0 {
            bail!("the {} table(s) have no rows", self.view.name());
        }
        let mut notes = std::mem::take(&mut self.out.notes);
        if self.out.snapshots == 1 {
            // One snapshot: totals since the counters were last reset.
            let snap = self.prev.take().unwrap_or_default();
            let resets: std::collections::BTreeSet<&str> = snap
                .rows
                .values()
                .filter_map(|r| r.reset.as_deref())
                .collect();
            let start = (resets.len() == 1)
                .then(|| resets.iter().next().and_then(|s| parse_ts(s)))
                .flatten();
            let duration_s = match (start, snap.time_ns) {
                (Some(a), Some(b)) if b > a => Some((b - a) as f64 / 1e9),
                _ => None,
            };
            notes.push(format!(
                "one snapshot: its counters are totals since {}{}",
                match (resets.len(), start) {
                    (1, Some(s)) => format!("stats_reset {}", rfc3339_ns(s)),
                    (0, _) => "the statistics were last reset (no stats_reset column)".into(),
                    _ => "each key's stats_reset (they differ)".into(),
                },
                if duration_s.is_none() {
                    "; the span they cover is unknown: no rates"
                } else {
                    ""
                }
            ));
            self.out.intervals.push(IoStatsInterval {
                start: start.map(rfc3339_ns),
                duration_s,
                resets: 0,
            });
            for key in &snap.keys {
                for (name, v) in &snap.rows[key].ops {
                    let s = self.series_index(key, name);
                    self.out.series[s].deltas = vec![Some(IoStatsDelta {
                        count: v.count.map(|x| x.round() as u64),
                        bytes: v.bytes.map(|x| x.round() as u64),
                        time_ms: v.time,
                    })];
                }
            }
        } else {
            if self.untimed {
                notes.push(
                    "the snapshots say no time (no time column, no \\watch title): interval \
                     lengths and rates are unknown"
                        .to_string(),
                );
            }
            if self.same_time > 0 {
                notes.push(format!(
                    "{} interval(s) between snapshots stamped with the same time (a \\watch \
                     title is to the second): their length is unknown",
                    self.same_time
                ));
            }
            if self.new_keys > 0 {
                notes.push(format!(
                    "{} key(s) first seen after the first snapshot are counted from zero",
                    self.new_keys
                ));
            }
            if self.gone_keys > 0 {
                notes.push(format!(
                    "{} time(s) a key of one snapshot was missing from the next (filtered out, \
                     or its entry evicted): no delta for it there",
                    self.gone_keys
                ));
            }
            if self.reset_keys > 0 {
                notes.push(format!(
                    "{} time(s) a key's counters were reset (stats_reset changed) or went back \
                     ({}): its delta there counts from the reset only, a lower bound (see each \
                     interval's `resets`)",
                    self.reset_keys,
                    self.view.went_back_causes()
                ));
            }
        }
        if self.bad_cells > 0 {
            notes.push(format!(
                "{} cell(s) that are not non-negative numbers read as missing",
                self.bad_cells
            ));
        }
        let n_iv = self.out.intervals.len();
        let mut untimed_ops: Vec<String> = Vec::new();
        for s in &mut self.out.series {
            s.deltas.resize(n_iv, None);
            let sum_u = |f: &dyn Fn(&IoStatsDelta) -> Option<u64>| -> Option<u64> {
                let v: Vec<u64> = s.deltas.iter().flatten().filter_map(f).collect();
                (!v.is_empty()).then(|| v.iter().fold(0u64, |a, b| a.saturating_add(*b)))
            };
            s.count = sum_u(&|d| d.count);
            s.bytes = sum_u(&|d| d.bytes);
            let times: Vec<f64> = s
                .deltas
                .iter()
                .flatten()
                .filter_map(|d| d.time_ms)
                .collect();
            s.time_ms = (!times.is_empty()).then(|| times.iter().sum());
            // Operations that happened in no time: the timing was off.
            if s.count.is_some_and(|c| c > 0) && s.time_ms == Some(0.0) {
                s.time_ms = None;
                for d in s.deltas.iter_mut().flatten() {
                    d.time_ms = None;
                }
                if !untimed_ops.contains(&s.op) {
                    untimed_ops.push(s.op.clone());
                }
            }
            s.mean_ms = match (s.count, s.time_ms) {
                (Some(c), Some(t)) if c > 0 => Some(t / c as f64),
                _ => None,
            };
        }
        if !untimed_ops.is_empty() {
            notes.push(format!(
                "{}: operations counted with a total time of 0: no time was measured ({}), \
                 so no time or mean is given for them",
                untimed_ops.join(", "),
                self.view.timing_off()
            ));
        }
        if self.formatted_times {
            notes.push(
                "times were printed rounded with their unit (`8.65 ms`, as sys's \
                 io_global_by_file_by_latency does): totals and deltas are only as exact as \
                 that rounding; sys.x$io_global_by_file_by_latency gives picoseconds"
                    .to_string(),
            );
        }
        self.out.series.sort_by(|a, b| {
            b.time_ms
                .unwrap_or(0.0)
                .total_cmp(&a.time_ms.unwrap_or(0.0))
                .then(b.count.unwrap_or(0).cmp(&a.count.unwrap_or(0)))
                .then(a.key.cmp(&b.key))
                .then(a.op.cmp(&b.op))
        });
        self.out.notes = notes;
        Ok(Some(self.out))
    }
}

/// Read one input of snapshots of `view`.
pub fn read(r: &mut LineReader, view: StatsView) -> Result<IoStats> {
    let mut b = Builder::new(view);
    let mut others: Vec<String> = Vec::new();
    read_tables(r, |t, _| {
        if !b.table(&t)? && others.len() < 5 {
            others.push(super::truncate(&t.columns.join(", "), 120));
        }
        Ok(())
    })?;
    match b.finish()? {
        Some(s) => Ok(s),
        None => {
            // Every reader says "no FORMAT data found" when it finds nothing to read.
            let mut m = format!(
                "no {} data found: no {} table in the input (its columns must include {})",
                view.name().replace('_', "-"),
                view.name(),
                view.needs()
            );
            if others.is_empty() {
                m.push_str("; no table (a header of column names, then rows) was found");
            } else {
                m.push_str("; tables found have the columns:");
                for o in &others {
                    m.push_str(&format!("\n  {o}"));
                }
            }
            bail!(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_as_servers_print_them() {
        let t = parse_ts("2024-07-15 16:23:26.631774+09").unwrap();
        assert_eq!(
            rfc3339_ns(t),
            rfc3339_ns(parse_ts("2024-07-15T07:23:26.631774Z").unwrap())
        );
        assert!(parse_ts("2026-11-25 14:00:00+05:30").is_some());
        assert!(parse_ts("2026-11-25 14:00:00").is_some());
        assert_eq!(parse_ts("1764079200"), Some(1_764_079_200_000_000_000));
        assert_eq!(parse_ts("client backend"), None);
    }
}
