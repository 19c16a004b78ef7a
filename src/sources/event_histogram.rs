//! Oracle `V$EVENT_HISTOGRAM` / `V$EVENT_HISTOGRAM_MICRO` snapshots spooled as CSV.
//!
//! Input: rows `time, event, bucket, count` (optionally an instance column), as spooled from
//! SQL*Plus with `set markup csv on` (quoted, with a header) or `set colsep ','` (padded, with
//! or without a header). With a header, columns are found by name (`*TIME*` but not
//! `WAIT_TIME_*`, `EVENT`, `WAIT_TIME_MILLI`/`WAIT_TIME_MICRO`/`BUCKET`, `WAIT_COUNT`/`COUNT`,
//! `INST_ID`/`INSTANCE_NUMBER`); the bucket unit follows the column name (MILLI → ms, MICRO →
//! µs), else `--unit`, else ms. SQL*Plus chatter (`n rows selected.`, `SQL>` lines, dashes) is
//! counted as ignored.
//!
//! Counts are cumulative since instance start, so each snapshot is differenced against the
//! previous one of the same instance ([`CumulativeSeries`]); the deltas form one interval from
//! the previous snapshot time to this one. Buckets are upper bounds (a wait in bucket `v` lies
//! in `[v/2, v)`, bucket 1 in `[0, 1)`; the micro view's sentinel 4294967295 is read as 2^32 µs)
//! and are spread as [`super::spread`] describes. When any count goes down (an instance
//! restart), the series ends and a new one starts at that snapshot, with a warning; the waits
//! between the restart and that snapshot cannot be placed and are left out (also warned).

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde_json::json;

use super::{
    bucket_range, ingest_run, parse_u64, rfc3339_ns, BucketRange, Format, IngestOptions,
    LineReader, SnapshotSeries, Unit,
};
use crate::results::{BucketConvention, RunResult};

/// Cumulative counts of one snapshot, indexed by cell ([`Cells`]); a cell past its end, or
/// absent from the snapshot, counts 0.
pub(crate) type Snapshot = Vec<u64>;

/// The (event, bucket) pairs of the snapshots, numbered in the order first seen: a snapshot
/// is then an array of counts, and no row allocates (a key of an owned event name per row, and
/// its hashing, were most of the rest of the time of a year of hourly AWR snapshots:
/// `bench/awr-year.sh`).
#[derive(Default)]
pub(crate) struct Cells {
    /// Event names, numbered in the order first seen.
    names: Vec<String>,
    name_ids: rustc_hash::FxHashMap<String, u32>,
    /// Per cell: (event, bucket).
    cells: Vec<(u32, u64)>,
    cell_ids: rustc_hash::FxHashMap<(u32, u64), u32>,
    /// The last event looked up (rows of one event come together).
    last: Option<u32>,
    /// The cell after the last one looked up: the next row's, when snapshots list their rows
    /// in the same order.
    next: usize,
}

impl Cells {
    /// The cell of `event`'s `bucket`, numbered on first use.
    pub(crate) fn cell(&mut self, event: &str, bucket: u64) -> usize {
        let ev = match self.last {
            Some(i) if self.names[i as usize] == event => i,
            _ => {
                let i = match self.name_ids.get(event) {
                    Some(&i) => i,
                    None => {
                        self.names.push(event.to_string());
                        let i = (self.names.len() - 1) as u32;
                        self.name_ids.insert(event.to_string(), i);
                        i
                    }
                };
                self.last = Some(i);
                i
            }
        };
        if self.cells.get(self.next) == Some(&(ev, bucket)) {
            self.next += 1;
            return self.next - 1;
        }
        let n = self.cells.len() as u32;
        let c = *self.cell_ids.entry((ev, bucket)).or_insert(n);
        if c == n {
            self.cells.push((ev, bucket));
        }
        self.next = c as usize + 1;
        c as usize
    }
}

/// Differences cumulative bucket snapshots into per-interval histograms; splits series on
/// restarts (counts going down).
pub(crate) struct CumulativeSeries {
    label: String,
    format: Format,
    conv: BucketConvention,
    unit_ns: f64,
    prev: Option<(i64, Snapshot)>,
    seg_start_ns: i64,
    series: SnapshotSeries,
    segment: usize,
    /// Per event: its op in `series` (None until it has one).
    op_of: Vec<Option<usize>>,
    /// Per cell: its bucket's range in `series` (None until it has one).
    range_of: Vec<Option<BucketRange>>,
    warnings: Vec<String>,
    /// Finished runs.
    pub runs: Vec<RunResult>,
    spec: serde_json::Value,
}

impl CumulativeSeries {
    /// A new series named `label`.
    pub(crate) fn new(
        label: &str,
        format: Format,
        conv: BucketConvention,
        unit_ns: f64,
        spec: serde_json::Value,
    ) -> Self {
        CumulativeSeries {
            label: label.to_string(),
            format,
            conv,
            unit_ns,
            prev: None,
            seg_start_ns: 0,
            series: SnapshotSeries::new(),
            segment: 1,
            op_of: Vec::new(),
            range_of: Vec::new(),
            warnings: Vec::new(),
            runs: Vec::new(),
            spec,
        }
    }

    /// Add a snapshot taken at `t_ns` (cumulative counts per cell of `keys`).
    pub(crate) fn push(&mut self, t_ns: i64, snap: Snapshot, at: &str, keys: &Cells) -> Result<()> {
        let Some((pt, prev)) = self.prev.take() else {
            self.seg_start_ns = t_ns;
            self.prev = Some((t_ns, snap));
            return Ok(());
        };
        if t_ns <= pt {
            self.warnings.push(format!(
                "{at}: snapshot time does not advance ({} s after the previous); snapshot skipped",
                t_ns.saturating_sub(pt) as f64 / 1e9
            ));
            self.prev = Some((pt, prev));
            return Ok(());
        }
        // Restart: some count went down (or a bucket vanished).
        let count = |s: &Snapshot, i: usize| s.get(i).copied().unwrap_or(0);
        let down = prev.iter().enumerate().find(|&(i, &v)| count(&snap, i) < v);
        if let Some((i, &v)) = down {
            let (ev, b) = keys.cells[i];
            let ev = &keys.names[ev as usize];
            let now = count(&snap, i);
            let lost: u64 = snap.iter().fold(0, |a, &v| a.saturating_add(v));
            self.warnings.push(format!(
                "{at}: counts went down (event '{ev}' bucket {b}: {v} → {now}): instance restart? \
                 Series {} ends; series {} starts at this snapshot ({lost} waits counted since \
                 the restart cannot be placed in time and are left out)",
                self.segment,
                self.segment + 1
            ));
            self.end_segment();
            self.segment += 1;
            self.seg_start_ns = t_ns;
            self.prev = Some((t_ns, snap));
            return Ok(());
        }
        self.series.begin_interval(
            pt.saturating_sub(self.seg_start_ns) as f64 / 1e9,
            t_ns.saturating_sub(pt) as f64 / 1e9,
        );
        // Ops are made in the order of their events' names (as a sorted reading would).
        let mut new: Vec<u32> = Vec::new();
        for (i, &v) in snap.iter().enumerate() {
            let ev = keys.cells[i].0;
            if v != count(&prev, i) && self.op_of.get(ev as usize).is_none_or(|o| o.is_none()) {
                new.push(ev);
            }
        }
        new.sort_unstable_by(|a, b| keys.names[*a as usize].cmp(&keys.names[*b as usize]));
        new.dedup();
        for ev in new {
            let op = self.series.op(&keys.names[ev as usize])?;
            if self.op_of.len() <= ev as usize {
                self.op_of.resize(ev as usize + 1, None);
            }
            self.op_of[ev as usize] = Some(op);
        }
        for (i, &v) in snap.iter().enumerate() {
            let d = v - count(&prev, i);
            if d == 0 {
                continue;
            }
            let (ev, bucket) = keys.cells[i];
            let op = self.op_of[ev as usize].expect("made above");
            if self.range_of.len() <= i {
                self.range_of.resize(i + 1, None);
            }
            let range = match self.range_of[i] {
                Some(r) => r,
                None => {
                    let (lo, hi) = bucket_range(bucket, self.conv);
                    let r = self.series.range(
                        (lo as f64 * self.unit_ns).round() as u64,
                        (hi as f64 * self.unit_ns).round() as u64,
                    );
                    self.range_of[i] = Some(r);
                    r
                }
            };
            self.series.add_in_range(op, range, d);
        }
        self.prev = Some((t_ns, snap));
        Ok(())
    }

    fn end_segment(&mut self) {
        self.op_of.clear();
        self.range_of.clear();
        let series = std::mem::take(&mut self.series);
        if series.is_empty() {
            return;
        }
        let n = series.len();
        let (mut ops, duration) = series.finish(self.conv);
        ops.retain(|o| o.count > 0);
        let name = if self.segment > 1 || !self.runs.is_empty() {
            format!("{} (series {})", self.label, self.segment)
        } else {
            self.label.clone()
        };
        let mut run = ingest_run(
            &name,
            self.format,
            ops,
            rfc3339_ns(self.seg_start_ns),
            duration,
            if n > 0 { duration / n as f64 } else { 0.0 },
            self.spec.clone(),
        );
        run.counters.insert("snapshots".into(), (n + 1) as f64);
        self.runs.push(run);
    }

    /// Close the series; warnings go to the last run (or are returned when there is none).
    pub(crate) fn finish(mut self) -> (Vec<RunResult>, Vec<String>) {
        if self.series.is_empty() && self.prev.is_some() && self.runs.is_empty() {
            self.warnings.push(format!(
                "{}: only one snapshot, so no interval can be formed (counts are cumulative)",
                self.label
            ));
        }
        self.end_segment();
        let mut runs = self.runs;
        match runs.last_mut() {
            Some(r) => {
                r.warnings.extend(self.warnings);
                (runs, Vec::new())
            }
            None => (runs, self.warnings),
        }
    }
}

struct Columns {
    time: usize,
    event: usize,
    bucket: usize,
    count: usize,
    inst: Option<usize>,
}

/// Rows handed from the parsing thread to the one that differences snapshots, at once.
const BATCH_ROWS: usize = 4096;
/// Batches queued before the parser waits (bounds memory).
const BATCHES_QUEUED: usize = 8;

/// One data row, its texts in its [`Batch`]'s `text`.
struct Row {
    line_no: u64,
    t_ns: i64,
    inst: (u32, u32),
    event: (u32, u32),
    bucket: u64,
    count: u64,
}

/// Data rows in input order, with the view and bucket unit the header named.
struct Batch {
    text: String,
    rows: Vec<Row>,
    view: &'static str,
    unit: Option<Unit>,
}

impl Batch {
    fn new(view: &'static str, unit: Option<Unit>) -> Batch {
        Batch {
            text: String::with_capacity(BATCH_ROWS * 24),
            rows: Vec::with_capacity(BATCH_ROWS),
            view,
            unit,
        }
    }

    /// `s`'s place in `text`, appended.
    fn put(&mut self, s: &str) -> (u32, u32) {
        let a = self.text.len();
        self.text.push_str(s);
        (a as u32, self.text.len() as u32)
    }

    fn get(&self, (a, b): (u32, u32)) -> &str {
        &self.text[a as usize..b as usize]
    }
}

/// Read a snapshot CSV. Rows are parsed on this thread and differenced into intervals on
/// another ([`Snapshots`]), in batches: the two halves took about the same time on one thread
/// (`bench/awr-year.sh`), and neither depends on the other's results, so the whole reads in
/// about the time of the larger.
pub fn read(r: &mut LineReader, args: &IngestOptions) -> Result<Vec<RunResult>> {
    let name = r.name.clone();
    let (parsed, snapshots) = std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(BATCHES_QUEUED);
        let worker = std::thread::Builder::new()
            .name("iolens-snapshots".into())
            .spawn_scoped(s, move || -> Result<Snapshots> {
                let mut snaps = Snapshots::new(name);
                for batch in rx {
                    snaps.add(&batch)?;
                }
                Ok(snaps)
            });
        match worker {
            Ok(worker) => {
                let parsed = parse_rows(r, args, &mut |b| tx.send(b).is_ok());
                drop(tx);
                let snapshots = worker
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
                (parsed, snapshots)
            }
            // No thread to be had: difference each batch as it fills.
            Err(_) => {
                drop(tx);
                let mut snaps = Snapshots::new(r.name.clone());
                let mut failed = None;
                let parsed = parse_rows(r, args, &mut |b| match snaps.add(&b) {
                    Ok(()) => true,
                    Err(e) => {
                        failed = Some(e);
                        false
                    }
                });
                (parsed, failed.map_or(Ok(snaps), Err))
            }
        }
    });
    // A snapshot that failed came from a line before any the parser failed on.
    let snapshots = snapshots?;
    let (view, unit) = parsed?;
    snapshots.finish(r, view, unit)
}

/// Parse `r`'s rows into batches handed to `send` (false: the receiver has stopped, so stop);
/// returns the view and bucket unit the input named.
fn parse_rows(
    r: &mut LineReader,
    args: &IngestOptions,
    send: &mut dyn FnMut(Batch) -> bool,
) -> Result<(&'static str, Option<Unit>)> {
    let mut cols: Option<Columns> = None;
    let mut unit = args.unit;
    let mut view = "V$EVENT_HISTOGRAM";
    // Per instance: the time of its current snapshot (rows older than it are refused).
    let mut cur: Vec<(String, i64)> = Vec::new();
    let mut last_inst = 0;
    let mut batch: Option<Batch> = None;
    // One row's fields, unquoted into `text` at `fields` (reused: no row allocates).
    let (mut text, mut fields) = (String::new(), Vec::new());
    let mut last_time: (String, Option<i64>) = (String::new(), None);
    while let Some((line_no, line)) = r.next_numbered_line()? {
        let t = line.trim_ascii();
        if t.is_empty() {
            r.ignored("blank");
            continue;
        }
        // (A data row ends with a quote or a digit: the ends are compared only for a '.'.)
        if t.starts_with(b"SQL>")
            || (t.last() == Some(&b'.')
                && (t.ends_with(b"rows selected.") || t.ends_with(b"row selected.")))
            || (t[0] == b'n' && t.starts_with(b"no rows selected"))
            || t.iter().all(|&c| c == b'-' || c == b' ' || c == b',')
        {
            r.ignored("sqlplus");
            continue;
        }
        // One row's fields (a CSV reader built per line cost 2/3 of the time of a year of
        // hourly snapshots: bench/awr-year.sh). A row whose fields need no unquoting (each
        // quoted whole or not at all, no quote inside) is cut where it lies; only others are
        // unquoted into `text` (copying every row was a tenth of that time).
        let Ok(l) = std::str::from_utf8(line) else {
            r.unparsed("not a CSV row");
            continue;
        };
        let src = if plain_csv_fields(line, &mut fields) {
            l
        } else if csv_fields_into(l, &mut text, &mut fields) {
            text.as_str()
        } else {
            r.unparsed("not a CSV row");
            continue;
        };
        let get = |i: usize| fields.get(i).map_or("", |&(a, b)| trim_field(&src[a..b]));
        let n_fields = fields.len();
        // A whole number in the count column is a data row (a header has no number): most rows
        // need not be tried as one.
        let count_here = cols
            .as_ref()
            .and_then(|c| parse_u64(get(c.count).as_bytes()));
        let data_row = count_here.is_some();
        let looks_header = !data_row
            && (0..n_fields).all(|i| get(i).parse::<f64>().is_err())
            && (0..n_fields).any(|i| {
                get(i)
                    .as_bytes()
                    .windows(5)
                    .any(|w| w.eq_ignore_ascii_case(b"EVENT"))
            });
        if looks_header && cols.is_some() {
            // SQL*Plus repeats the heading on every page and every run of the query.
            r.ignored("header");
            continue;
        }
        if cols.is_none() {
            if looks_header {
                let up: Vec<String> = (0..n_fields).map(|i| get(i).to_ascii_uppercase()).collect();
                let find = |p: &dyn Fn(&str) -> bool| up.iter().position(|c| p(c));
                let bucket =
                    find(&|c| c.starts_with("WAIT_TIME_") || c == "BUCKET" || c == "WAIT_TIME");
                let time = find(&|c| c.contains("TIME") && !c.starts_with("WAIT_TIME"))
                    .or_else(|| find(&|c| c == "TS" || c.contains("DATE")));
                let event = find(&|c| c == "EVENT" || c == "EVENT_NAME" || c == "NAME");
                let count = find(&|c| c == "WAIT_COUNT" || c == "COUNT");
                let inst = find(&|c| c == "INST_ID" || c == "INSTANCE_NUMBER" || c == "INSTANCE");
                let (Some(time), Some(event), Some(bucket), Some(count)) =
                    (time, event, bucket, count)
                else {
                    bail!(
                        "header line {} lacks a time, event, bucket or count column: {}",
                        line_no,
                        up.join(",")
                    );
                };
                if unit.is_none() {
                    if up[bucket].contains("MICRO") {
                        unit = Some(Unit::Us);
                        view = "V$EVENT_HISTOGRAM_MICRO";
                    } else if up[bucket].contains("NANO") {
                        unit = Some(Unit::Ns);
                    } else if up[bucket].contains("MILLI") {
                        unit = Some(Unit::Ms);
                    }
                }
                cols = Some(Columns {
                    time,
                    event,
                    bucket,
                    count,
                    inst,
                });
                r.ignored("header");
                continue;
            }
            if n_fields < 4 {
                r.unparsed("expected time, event, bucket, count");
                continue;
            }
            cols = Some(Columns {
                time: 0,
                event: 1,
                bucket: 2,
                count: 3,
                inst: if n_fields >= 5 { Some(4) } else { None },
            });
        }
        let c = cols.as_ref().expect("set above");
        // Rows of one snapshot share its time: parse it once.
        if last_time.0 != get(c.time) {
            last_time = (get(c.time).to_string(), parse_time_any(get(c.time)));
        }
        let Some(t_ns) = last_time.1 else {
            r.unparsed("time not understood");
            continue;
        };
        let ev = get(c.event);
        let (Some(bucket), Some(count)) = (
            parse_u64(get(c.bucket).as_bytes()),
            count_here.or_else(|| parse_u64(get(c.count).as_bytes())),
        ) else {
            r.unparsed("bucket or count is not a whole number");
            continue;
        };
        if ev.is_empty() {
            r.unparsed("empty event name");
            continue;
        }
        let inst = c.inst.map(get).unwrap_or_default();
        let i = match cur.get(last_inst) {
            Some((x, _)) if x == inst => last_inst,
            _ => match cur.iter().position(|(x, _)| x == inst) {
                Some(i) => i,
                None => {
                    cur.push((inst.to_string(), t_ns));
                    cur.len() - 1
                }
            },
        };
        last_inst = i;
        if t_ns < cur[i].1 {
            r.unparsed("row older than the current snapshot (sort by time)");
            continue;
        }
        cur[i].1 = t_ns;
        let b = batch.get_or_insert_with(|| Batch::new(view, unit));
        let (inst, event) = (b.put(inst), b.put(ev));
        b.rows.push(Row {
            line_no,
            t_ns,
            inst,
            event,
            bucket,
            count,
        });
        r.parsed();
        if b.rows.len() == BATCH_ROWS && !send(batch.take().expect("filled above")) {
            return Ok((view, unit));
        }
    }
    if let Some(b) = batch {
        send(b);
    }
    Ok((view, unit))
}

/// The snapshots of the rows read: per instance, the current snapshot and the series of
/// intervals differenced from those before it.
struct Snapshots {
    /// The input's name.
    name: String,
    /// Per instance, in the order first seen: its name, and its current snapshot's time,
    /// counts and first line.
    cur: Vec<(String, (i64, Snapshot, u64))>,
    /// The instance of the last row (rows of one instance come together).
    last_inst: usize,
    series: BTreeMap<String, CumulativeSeries>,
    keys: Cells,
}

impl Snapshots {
    fn new(name: String) -> Snapshots {
        Snapshots {
            name,
            cur: Vec::new(),
            last_inst: 0,
            series: BTreeMap::new(),
            keys: Cells::default(),
        }
    }

    /// Add a batch of rows (each no older than its instance's current snapshot).
    fn add(&mut self, b: &Batch) -> Result<()> {
        for row in &b.rows {
            let inst = b.get(row.inst);
            let t_ns = row.t_ns;
            let i = match self.cur.get(self.last_inst) {
                Some((x, _)) if x == inst => self.last_inst,
                _ => match self.cur.iter().position(|(x, _)| x == inst) {
                    Some(i) => i,
                    None => {
                        self.cur
                            .push((inst.to_string(), (t_ns, Vec::new(), row.line_no)));
                        self.cur.len() - 1
                    }
                },
            };
            self.last_inst = i;
            let entry = &mut self.cur[i].1;
            if entry.0 != t_ns {
                let next = (t_ns, Vec::with_capacity(self.keys.cells.len()), row.line_no);
                let (pt, snap, at) = std::mem::replace(entry, next);
                series_of(&mut self.series, b.view, inst, b.unit).push(
                    pt,
                    snap,
                    &format!("{}:{at}", self.name),
                    &self.keys,
                )?;
            }
            let cell = self.keys.cell(b.get(row.event), row.bucket);
            let snap = &mut entry.1;
            if snap.len() <= cell {
                snap.resize(cell + 1, 0);
            }
            snap[cell] = snap[cell].saturating_add(row.count);
        }
        Ok(())
    }

    /// The runs: each instance's last snapshot pushed and its series finished.
    fn finish(
        mut self,
        r: &mut LineReader,
        view: &'static str,
        unit: Option<Unit>,
    ) -> Result<Vec<RunResult>> {
        let mut extra_warnings = Vec::new();
        // Instances in the order of their names.
        self.cur.sort_by(|a, b| a.0.cmp(&b.0));
        for (inst, (t, snap, at)) in self.cur {
            series_of(&mut self.series, view, &inst, unit).push(
                t,
                snap,
                &format!("{}:{}", r.name, at),
                &self.keys,
            )?;
        }
        let mut runs = Vec::new();
        for (_, s) in self.series {
            let (rs, w) = s.finish();
            runs.extend(rs);
            extra_warnings.extend(w);
        }
        if let Some(first) = runs.first_mut() {
            first.warnings.extend(extra_warnings);
        } else {
            r.warnings.extend(extra_warnings);
        }
        Ok(runs)
    }
}

/// The fields of `line` when none needs unquoting: each either quoted whole (`"…"`, no quote
/// inside, followed by a comma or the end) or holding no quote at all, cut at `(start, end)`
/// of `line` in `fields` (what [`csv_fields_into`] would copy out of it); false for any other
/// row, which is left to [`csv_fields_into`]. Fields are short: a byte loop finds their ends
/// sooner than a search call per field.
fn plain_csv_fields(b: &[u8], fields: &mut Vec<(usize, usize)>) -> bool {
    fields.clear();
    let n = b.len();
    let mut i = 0;
    loop {
        if b.get(i) == Some(&b'"') {
            let s = i + 1;
            let Some(j) = find_either(b, s, b'"', b'"') else {
                return false;
            };
            fields.push((s, j));
            i = j + 1;
            if i == n {
                return true;
            }
            if b[i] != b',' {
                return false;
            }
        } else {
            let s = i;
            let j = find_either(b, s, b',', b'"').unwrap_or(n);
            if j < n && b[j] == b'"' {
                return false;
            }
            fields.push((s, j));
            if j == n {
                return true;
            }
            i = j;
        }
        i += 1;
    }
}

/// The first place at or after `from` in `b` that holds `x` or `y`, eight bytes a step (a
/// field is a few words; a byte a step was a fifth of the time of reading a row).
#[inline]
fn find_either(b: &[u8], from: usize, x: u8, y: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte of `v` that is 0 sets its high bit here; the lowest set bit is always a 0 byte.
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let (xs, ys) = (ONES * u64::from(x), ONES * u64::from(y));
    let mut i = from;
    while let Some(w) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        let hit = zero(w ^ xs) | zero(w ^ ys);
        if hit != 0 {
            return Some(i + (hit.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b.get(i..)?
        .iter()
        .position(|&c| c == x || c == y)
        .map(|j| i + j)
}

/// `s.trim()`, at once when `s` neither starts nor ends with whitespace or a non-ASCII
/// character (a data field: `str::trim`'s Unicode test was a twentieth of the time of a year
/// of hourly snapshots).
#[inline]
fn trim_field(s: &str) -> &str {
    let plain = |c: Option<&u8>| c.is_some_and(|&c| c > b' ' && c < 0x80);
    let b = s.as_bytes();
    if plain(b.first()) && plain(b.last()) {
        s
    } else {
        s.trim()
    }
}

/// [`super::sql_table::csv_fields`] without allocating: `line`'s fields unquoted into `text`,
/// each at its `(start, end)` in `fields`; false for an unterminated quote. Runs between quotes
/// and commas are copied whole (a character at a time was a tenth of the time of a year of
/// hourly snapshots: `bench/awr-year.sh`); both are ASCII, so every cut is a character boundary.
fn csv_fields_into(line: &str, text: &mut String, fields: &mut Vec<(usize, usize)>) -> bool {
    text.clear();
    fields.clear();
    let b = line.as_bytes();
    let mut start = 0;
    let mut quoted = false;
    let mut i = 0;
    while i < b.len() {
        if quoted {
            let Some(j) = memchr::memchr(b'"', &b[i..]) else {
                text.push_str(&line[i..]);
                break;
            };
            text.push_str(&line[i..i + j]);
            i += j + 1;
            if b.get(i) == Some(&b'"') {
                text.push('"');
                i += 1;
            } else {
                quoted = false;
            }
        } else {
            let Some(j) = memchr::memchr2(b'"', b',', &b[i..]) else {
                text.push_str(&line[i..]);
                break;
            };
            text.push_str(&line[i..i + j]);
            i += j;
            if b[i] == b',' {
                fields.push((start, text.len()));
                start = text.len();
            } else if text.len() == start {
                quoted = true;
            } else {
                text.push('"');
            }
            i += 1;
        }
    }
    fields.push((start, text.len()));
    !quoted
}

/// The series of instance `inst` of `view` in `series`, made on its first snapshot (`unit`:
/// the buckets' unit, milliseconds when not known).
fn series_of<'a>(
    series: &'a mut BTreeMap<String, CumulativeSeries>,
    view: &str,
    inst: &str,
    unit: Option<Unit>,
) -> &'a mut CumulativeSeries {
    series.entry(inst.to_string()).or_insert_with(|| {
        let unit = unit.unwrap_or(Unit::Ms);
        CumulativeSeries::new(
            &series_label(view, inst),
            Format::EventHistogram,
            BucketConvention::UpperBound,
            unit.ns(),
            json!({"view": view, "instance": inst, "unit": unit.name()}),
        )
    })
}

fn series_label(view: &str, inst: &str) -> String {
    if inst.is_empty() {
        view.to_string()
    } else {
        format!("{view} instance {inst}")
    }
}

/// Parse the time formats SQL*Plus and scripts commonly spool, to Unix ns (naive times are
/// taken as UTC): ISO 8601 with or without zone, `yyyy-mm-dd hh:mm:ss[.f]`, `yyyy/mm/dd …`,
/// Oracle's `DD-MON-RR HH.MI.SSXFF AM` and `DD-MON-YYYY HH24:MI:SS`, or epoch seconds.
pub(crate) fn parse_time_any(s: &str) -> Option<i64> {
    let s = s.trim().trim_matches('"');
    if let Some(ns) = super::oracle_trace::parse_timestamp(s.as_bytes()) {
        return Some(ns);
    }
    if let Ok(v) = s.parse::<f64>() {
        if v.is_finite() && (0.0..1e11).contains(&v) {
            return Some((v * 1e9).round() as i64);
        }
    }
    let up = s.to_ascii_uppercase();
    // Strip a trailing zone after an Oracle timestamp (e.g. " +00:00", " UTC").
    let fmts = [
        "%Y/%m/%d %H:%M:%S%.f",
        "%d-%b-%y %I.%M.%S%.f %p",
        "%d-%b-%Y %I.%M.%S%.f %p",
        "%d-%b-%Y %H:%M:%S",
        "%d-%b-%y %H:%M:%S",
        "%d/%m/%Y %H:%M:%S",
    ];
    for cand in [up.as_str(), up.rsplit_once(' ').map(|x| x.0).unwrap_or("")] {
        for f in fmts {
            if let Ok(d) = chrono::NaiveDateTime::parse_from_str(cand, f) {
                return d.and_utc().timestamp_nanos_opt();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn time_formats() {
        let a = parse_time_any("2024-03-01 10:00:00").unwrap();
        assert_eq!(parse_time_any("01-MAR-24 10.00.00.000000 AM"), Some(a));
        assert_eq!(parse_time_any("01-MAR-2024 10:00:00"), Some(a));
        assert_eq!(parse_time_any("2024-03-01T10:00:00+00:00"), Some(a));
        assert_eq!(
            parse_time_any("01-MAR-24 10.00.00.000000 AM +00:00"),
            Some(a)
        );
        assert_eq!(parse_time_any("1709287200"), Some(a));
        assert_eq!(parse_time_any("yesterday"), None);
    }

    /// A row cut where it lies has the fields (trimmed) that unquoting it gives; the rows
    /// SQL*Plus spools (`set markup csv on`) are cut so.
    #[test]
    fn plain_rows_are_cut_as_they_are_unquoted() {
        let mut fields = Vec::new();
        let row = r#""01-JAN-25 12.00.00.000 AM","1","db file sequential read","1","7""#;
        assert!(plain_csv_fields(row.as_bytes(), &mut fields));
        assert_eq!(fields.len(), 5);
        assert_eq!(&row[fields[2].0..fields[2].1], "db file sequential read");
        assert!(!plain_csv_fields(br#""a ""b""",1"#, &mut fields));
        assert!(!plain_csv_fields(br#"a"b,1"#, &mut fields));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn plain_fields_are_the_unquoted_fields(
            line in proptest::collection::vec(
                proptest::sample::select(vec!['a', '1', ' ', '"', ',', '\t', '\u{b}', 'é', '\u{a0}']),
                0..24,
            ).prop_map(|c| c.into_iter().collect::<String>())
        ) {
            let (mut text, mut all, mut plain) = (String::new(), Vec::new(), Vec::new());
            let unquoted = csv_fields_into(&line, &mut text, &mut all);
            if plain_csv_fields(line.as_bytes(), &mut plain) {
                prop_assert!(unquoted);
                let a: Vec<&str> = all.iter().map(|&(x, y)| text[x..y].trim()).collect();
                let p: Vec<&str> = plain.iter().map(|&(x, y)| trim_field(&line[x..y])).collect();
                prop_assert_eq!(a, p);
            }
            prop_assert_eq!(trim_field(&line), line.trim());
        }
    }
}
