//! Shared latency binning for every renderer: per-interval figures of one op, and the
//! latency-over-time heatmap (time columns × log-latency rows) in both of PyLatencyMap's views,
//! frequency (count) and intensity (count × latency: where the time went).
//!
//! Data flow: [`OpSeries::decode`] decodes each interval histogram of an [`OpResult`] exactly
//! once into its percentiles and a sparse list of cells on a fixed fine log grid
//! ([`FINE_PER_OCTAVE`] rows per factor of two). [`Heatmap::build`] then crops that grid to the
//! latencies present, coarsens rows for the display and merges intervals into at most the
//! requested number of columns, so a 10-second and a 1-hour run both fit the same width.

use anyhow::{Context, Result};
use hdrhistogram::Histogram;

use crate::histogram::{DenseCounts, Hist};
use crate::results::{
    fold_stub_tail, has_stub_tail, interval_groups, Interval, IntervalGroups, OpResult,
};

/// Rows per factor of two on the fine latency grid every histogram is binned onto.
pub const FINE_PER_OCTAVE: u32 = 4;

/// Fine grid row of a latency: `floor(log2(ns) * FINE_PER_OCTAVE)`.
pub(crate) fn fine_row(ns: f64) -> i32 {
    (ns.max(1.0).log2() * FINE_PER_OCTAVE as f64).floor() as i32
}

/// Lower edge (ns) of row `row` on a grid with `per_octave` rows per factor of two.
pub(crate) fn row_low_ns(row: i32, per_octave: u32) -> f64 {
    2f64.powf(row as f64 / per_octave as f64)
}

/// The latency one recorded histogram value stands for: its bucket's median equivalent.
///
/// Bucketed sources (Oracle's upper-bound, bcc's lower-bound power-of-two buckets) were spread
/// across their bucket once, at ingest, so what the model holds is already where the latency
/// lies: renderers shift nothing again.
pub(crate) fn representative_ns(h: &Histogram<u64>, value: u64) -> f64 {
    h.median_equivalent(value) as f64
}

/// Index `i` of the source bucket `[edges[i], edges[i+1])` holding `ns` (values outside the
/// edges go to the first or last bucket). `None` when there are no source buckets.
pub(crate) fn source_bucket(edges: &[u64], ns: f64) -> Option<usize> {
    if edges.len() < 2 {
        return None;
    }
    let i = edges.partition_point(|&e| (e as f64) <= ns);
    Some(i.saturating_sub(1).min(edges.len() - 2))
}

/// One non-empty cell of an interval on the fine grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    /// Fine row ([`fine_row`]), or for an op with source buckets the index of its source
    /// bucket ([`source_bucket`]).
    pub row: i32,
    /// Operations in the cell.
    pub count: u64,
    /// Sum of their latencies, ns (intensity).
    pub(crate) time_ns: f64,
}

/// The non-empty buckets of a histogram as `(lowest equivalent value, count)`, ascending.
///
/// Walks only the buckets between the recorded minimum and maximum (HdrHistogram's own
/// iterators visit the whole counts array, ~34k slots at 1 ns..1 h and 3 digits), which makes
/// per-interval figures for thousands of intervals several times cheaper.
pub(crate) fn sparse_counts(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    if h.is_empty() {
        return out;
    }
    let max = h.max();
    let mut v = h.lowest_equivalent(h.min());
    let mut seen = 0u64;
    while v <= max && seen < h.len() {
        let c = h.count_at(v);
        if c > 0 {
            out.push((v, c));
            seen += c;
        }
        let next = h.next_non_equivalent(v);
        if next <= v {
            break;
        }
        v = next;
    }
    out
}

/// Quantiles (ascending `qs`, each in 0..=1) of sparse counts with HdrHistogram's definition:
/// the highest equivalent value of the first bucket whose cumulative count reaches
/// `max(1, ceil(q × total))`.
pub(crate) fn sparse_quantiles(h: &Histogram<u64>, sparse: &[(u64, u64)], qs: &[f64]) -> Vec<u64> {
    let total: u64 = sparse.iter().map(|p| p.1).sum();
    let mut out = Vec::with_capacity(qs.len());
    let mut i = 0;
    let mut cum = 0u64;
    for &q in qs {
        if total == 0 {
            out.push(0);
            continue;
        }
        let target = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        while cum < target && i < sparse.len() {
            cum += sparse[i].1;
            i += 1;
        }
        let v = sparse[i.saturating_sub(1)].0;
        out.push(if q == 0.0 {
            h.lowest_equivalent(v)
        } else {
            h.highest_equivalent(v)
        });
    }
    out
}

/// Bin sparse counts onto the fine grid, or onto the source's own buckets when `edges` holds
/// them (ascending rows either way).
fn bin_sparse(h: &Histogram<u64>, sparse: &[(u64, u64)], edges: &[u64]) -> Vec<Cell> {
    let mut cells: Vec<Cell> = Vec::new();
    for &(v, c) in sparse {
        let ns = representative_ns(h, v);
        let row = match source_bucket(edges, ns) {
            Some(b) => b as i32,
            None => fine_row(ns),
        };
        match cells.last_mut() {
            Some(last) if last.row == row => {
                last.count += c;
                last.time_ns += c as f64 * ns;
            }
            _ => cells.push(Cell {
                row,
                count: c,
                time_ns: c as f64 * ns,
            }),
        }
    }
    cells
}

/// Bin a histogram onto the fine grid, or onto the source buckets `edges` when given (sparse,
/// ascending rows).
pub(crate) fn bin_histogram(h: &Histogram<u64>, edges: &[u64]) -> Vec<Cell> {
    bin_sparse(h, &sparse_counts(h), edges)
}

/// The source bucket edges of an op, when it has at least one bucket.
fn source_edges(op: &OpResult) -> Vec<u64> {
    if op.bucket_edges_ns.len() >= 2 {
        op.bucket_edges_ns.clone()
    } else {
        Vec::new()
    }
}

/// Figures of one interval of one op.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntervalStat {
    pub start_s: f64,
    pub duration_s: f64,
    pub count: u64,
    pub bytes: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl IntervalStat {
    /// Operations per second in the interval.
    pub fn iops(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.count as f64 / self.duration_s
        } else {
            0.0
        }
    }
    /// MB (10^6 bytes) per second in the interval.
    pub fn mb_per_s(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.bytes as f64 / self.duration_s / 1e6
        } else {
            0.0
        }
    }
}

/// Figures of the sparse counts `sparse` of a histogram covering `[start_s, start_s +
/// duration_s)`; `h` is that histogram or any of the same precision (only its equivalence
/// ranges are used); `count` is the counts' sum (callers set the stored count).
fn stat_of(
    h: &Histogram<u64>,
    sparse: &[(u64, u64)],
    start_s: f64,
    duration_s: f64,
    bytes: u64,
) -> IntervalStat {
    let q = sparse_quantiles(h, sparse, &[0.5, 0.9, 0.99, 0.999]);
    let len: u64 = sparse.iter().map(|p| p.1).sum();
    let n = len as f64;
    let mean = sparse
        .iter()
        .map(|&(v, c)| h.median_equivalent(v) as f64 * c as f64 / n)
        .sum::<f64>();
    IntervalStat {
        start_s,
        duration_s,
        count: len,
        bytes,
        mean_ns: if len == 0 { 0.0 } else { mean },
        p50_ns: q[0],
        p90_ns: q[1],
        p99_ns: q[2],
        p999_ns: q[3],
        max_ns: sparse.last().map_or(0, |&(v, _)| h.highest_equivalent(v)),
    }
}

/// [`stat_of`] a whole histogram.
fn interval_stat(
    h: &Histogram<u64>,
    start_s: f64,
    duration_s: f64,
    count: u64,
    bytes: u64,
) -> IntervalStat {
    let mut st = stat_of(h, &sparse_counts(h), start_s, duration_s, bytes);
    st.count = count;
    st
}

/// Merges interval histograms of the project's standard layout (lowest value 1 ns, 3
/// significant digits: [`crate::histogram::new_histogram`]) by adding the counts of their V2
/// encodings straight into one array ([`DenseCounts`]): no histogram is allocated, cleared or
/// walked per interval, which is what makes the display columns of a day of 1-second intervals
/// cheap. An encoding in any other layout, or one that is damaged, is refused (nothing added)
/// and the caller merges histograms instead.
pub(crate) struct DenseMerge {
    dense: DenseCounts,
    /// An empty histogram of the standard layout: equivalence ranges of its values.
    pub(crate) reference: Histogram<u64>,
    /// The general path's accumulator.
    pub(crate) merged: Histogram<u64>,
}

impl DenseMerge {
    pub(crate) fn new() -> DenseMerge {
        let reference = crate::histogram::new_histogram();
        DenseMerge {
            dense: DenseCounts::new(),
            merged: reference.clone(),
            reference,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.dense.clear();
    }

    /// The merged counts as `(lowest equivalent value, count)`, ascending.
    pub(crate) fn sparse(&self) -> Vec<(u64, u64)> {
        self.dense.sparse()
    }

    /// Add the histogram `hist` encodes; false, with nothing added, when it is not a
    /// V2-deflate encoding of the standard layout that decodes cleanly.
    pub(crate) fn add(&mut self, hist: &Hist) -> bool {
        self.dense.add(hist).is_some()
    }
}

/// The figures and cells of a display column from its merged counts (`(lowest equivalent
/// value, count)`, ascending, of the standard layout whose equivalence ranges `reference`
/// holds), for an op whose source buckets are `edges` (empty for exact values).
fn column_of(
    reference: &Histogram<u64>,
    sparse: &[(u64, u64)],
    ivs: &[Interval],
    edges: &[u64],
) -> Column {
    let count: u64 = ivs.iter().map(|iv| iv.count).sum();
    let bytes: u64 = ivs.iter().map(|iv| iv.bytes).sum();
    let duration_s: f64 = ivs.iter().map(|iv| iv.duration_s).sum();
    let start_s = ivs.first().map_or(0.0, |iv| iv.start_s);
    let mut st = stat_of(reference, sparse, start_s, duration_s, bytes);
    st.count = count;
    (st, bin_sparse(reference, sparse, edges))
}

/// The columns of one op merged on loading (`None`: left to the renderer).
type LoadedOp = Vec<Option<Column>>;

/// Display columns merged while a results file is validated
/// ([`crate::results::Results::read_file_merging`]
/// with this as its [`IntervalGroups`]): every interval histogram is decoded once, by
/// validation, and [`OpSeries::decode_all_columns_loaded`] takes the columns from here. A
/// column holding an interval in another layout is left to the renderer's general path.
pub struct LoadedColumns {
    max_cols: usize,
    reference: Histogram<u64>,
    /// `(run, op)` → per column, its figures (before the intervals' own count, bytes, start
    /// and duration are set) and cells.
    columns: std::sync::Mutex<std::collections::HashMap<(usize, usize), LoadedOp>>,
}

impl LoadedColumns {
    /// Columns for renderers that draw at most `max_cols` per op.
    pub fn new(max_cols: usize) -> LoadedColumns {
        LoadedColumns {
            max_cols,
            reference: crate::histogram::new_histogram(),
            columns: Default::default(),
        }
    }

    /// How many columns validation merged that no renderer has taken yet.
    pub fn merged(&self) -> usize {
        self.columns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|c| c.iter().filter(|c| c.is_some()).count())
            .sum()
    }

    /// The columns of op `op` of run `run` for a renderer drawing `max_cols` (none when this
    /// was made for another number).
    fn take(&self, run: usize, op: usize, max_cols: usize) -> Option<LoadedOp> {
        if max_cols != self.max_cols {
            return None;
        }
        self.columns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(run, op))
    }
}

impl IntervalGroups for LoadedColumns {
    fn max_groups(&self, _run: usize, _op: &OpResult) -> usize {
        self.max_cols
    }

    fn group(
        &self,
        run: usize,
        op_index: usize,
        op: &OpResult,
        g: usize,
        counts: Option<&[(u64, u64)]>,
    ) {
        let col = counts.map(|c| column_of(&self.reference, c, &[], &op.bucket_edges_ns));
        let (_, groups) = interval_groups(&op.intervals, self.max_cols);
        let mut all = self.columns.lock().unwrap_or_else(|e| e.into_inner());
        let cols = all
            .entry((run, op_index))
            .or_insert_with(|| vec![None; groups]);
        if let Some(slot) = cols.get_mut(g) {
            *slot = col;
        }
    }
}

/// Decode a histogram keeping the bounds it was written with. Percentiles and binning do not
/// need the project-wide bounds that [`Hist::decode`] normalises to (which costs a second
/// allocation and a merge per interval), so this is the fast path for per-interval figures.
pub(crate) fn decode_any_bounds(hist: &Hist) -> Result<Histogram<u64>> {
    // Every declared size is checked, and a layout far wider than iolens keeps is read by its
    // counts, not allocated (a file declaring 1 ns .. 2^62 at 5 digits everywhere).
    Ok(hist
        .decode_as_stored()?
        .unwrap_or_else(crate::histogram::new_histogram))
}

/// One display column: its figures and its cells.
type Column = (IntervalStat, Vec<Cell>);

/// Every interval of one op, decoded once.
#[derive(Clone, Debug, Default)]
pub struct OpSeries {
    pub op: String,
    pub stats: Vec<IntervalStat>,
    /// Fine-grid cells per interval (same order as `stats`); source-bucket cells when
    /// `edges_ns` holds the source's bucket edges.
    pub cells: Vec<Vec<Cell>>,
    /// The source's bucket edges (`OpResult::bucket_edges_ns`), empty for exact values.
    pub(crate) edges_ns: Vec<u64>,
    /// Intervals merged into each entry of `stats` and `cells` ([`OpSeries::decode_columns`]);
    /// 0 or 1 for one interval per entry.
    pub group: usize,
}

/// `op` with a stub last interval folded into the one before ([`fold_stub_tail`]): files
/// written before runs folded it themselves still never show a rate over a sliver.
fn without_stub_tail(op: &OpResult) -> Result<std::borrow::Cow<'_, OpResult>> {
    if !has_stub_tail(&op.intervals) {
        return Ok(std::borrow::Cow::Borrowed(op));
    }
    let mut o = op.clone();
    fold_stub_tail(&mut o.intervals).with_context(|| format!("op {}", op.op))?;
    Ok(std::borrow::Cow::Owned(o))
}

impl OpSeries {
    /// Decode every interval histogram of `op` (a stub last interval folded into the one
    /// before).
    pub fn decode(op: &OpResult) -> Result<OpSeries> {
        OpSeries::decode_intervals(without_stub_tail(op)?.as_ref())
    }

    /// Decode every interval histogram of `op` as it is.
    fn decode_intervals(op: &OpResult) -> Result<OpSeries> {
        let mut stats = Vec::with_capacity(op.intervals.len());
        let mut cells = Vec::with_capacity(op.intervals.len());
        for (i, iv) in op.intervals.iter().enumerate() {
            let h = decode_any_bounds(&iv.hist)
                .with_context(|| format!("op {}: interval {i}", op.op))?;
            let sparse = sparse_counts(&h);
            let mut st = stat_of(&h, &sparse, iv.start_s, iv.duration_s, iv.bytes);
            st.count = iv.count;
            stats.push(st);
            cells.push(bin_sparse(&h, &sparse, &op.bucket_edges_ns));
        }
        Ok(OpSeries {
            op: op.op.clone(),
            stats,
            cells,
            edges_ns: source_edges(op),
            group: 1,
        })
    }

    /// Decode every op of a run, spreading the work over the available CPUs.
    pub(crate) fn decode_all(ops: &[OpResult]) -> Result<Vec<OpSeries>> {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(8);
        let folded = ops
            .iter()
            .map(without_stub_tail)
            .collect::<Result<Vec<_>>>()?;
        let ops: Vec<&OpResult> = folded.iter().map(|o| o.as_ref()).collect();
        let total: usize = ops.iter().map(|o| o.intervals.len()).sum();
        if threads <= 1 || total < 64 {
            return ops.iter().map(|o| OpSeries::decode_intervals(o)).collect();
        }
        // Split each op's intervals into chunks and decode the chunks in parallel.
        let mut parts: Vec<(usize, OpResult)> = Vec::new();
        for (i, o) in ops.iter().enumerate() {
            let chunk = o.intervals.len().div_ceil(threads).max(1);
            if o.intervals.is_empty() {
                parts.push((i, (*o).clone()));
            }
            for ivs in o.intervals.chunks(chunk) {
                let mut part = (*o).clone();
                part.intervals = ivs.to_vec();
                parts.push((i, part));
            }
        }
        let results: Vec<Result<OpSeries>> = std::thread::scope(|s| {
            let per = parts.len().div_ceil(threads);
            let handles: Vec<_> = parts
                .chunks(per)
                .map(|group| {
                    s.spawn(move || {
                        group
                            .iter()
                            .map(|(_, p)| OpSeries::decode_intervals(p))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("decoder thread panicked"))
                .collect()
        });
        let mut out: Vec<OpSeries> = ops
            .iter()
            .map(|o| OpSeries {
                op: o.op.clone(),
                edges_ns: source_edges(o),
                ..OpSeries::default()
            })
            .collect();
        for ((i, _), r) in parts.iter().zip(results) {
            let r = r?;
            out[*i].stats.extend(r.stats);
            out[*i].cells.extend(r.cells);
        }
        Ok(out)
    }

    /// Intervals merged into each entry (at least 1).
    pub(crate) fn per_entry(&self) -> usize {
        self.group.max(1)
    }

    /// `op` merged into at most `max_cols` display columns of equal numbers of consecutive
    /// intervals (a stub last interval folded first). Each column's histogram is the exact merge
    /// of its intervals' histograms (counts summed bucket by bucket), and its percentiles, mean,
    /// max and cells are those of that merged histogram: never an average or an envelope of
    /// per-interval figures. Its count, bytes and duration are the intervals' sums, so its rate
    /// is the columns' exact rate. Memory is one merged histogram per worker thread, whatever
    /// the number of intervals; the columns are computed on up to 8 threads.
    pub(crate) fn decode_columns(op: &OpResult, max_cols: usize) -> Result<OpSeries> {
        OpSeries::decode_columns_with(op, max_cols, None)
    }

    /// [`OpSeries::decode_columns`], taking the columns `loaded` holds (merged by validation,
    /// [`LoadedColumns`]) and computing the others.
    fn decode_columns_with(
        op: &OpResult,
        max_cols: usize,
        loaded: Option<LoadedOp>,
    ) -> Result<OpSeries> {
        let (group, cols) = interval_groups(&op.intervals, max_cols);
        let op = without_stub_tail(op)?;
        let op = op.as_ref();
        let n = op.intervals.len();
        let loaded = loaded.filter(|l| l.len() == cols);
        let edges = source_edges(op);
        let column = |c: usize, m: &mut Option<DenseMerge>| -> Result<Column> {
            let ivs = &op.intervals[c * group..((c + 1) * group).min(n)];
            if let Some(Some((st, cells))) = loaded.as_ref().map(|l| &l[c]) {
                // Merged by validation: only the intervals' own figures are set here.
                let mut st = st.clone();
                st.count = ivs.iter().map(|iv| iv.count).sum();
                st.bytes = ivs.iter().map(|iv| iv.bytes).sum();
                st.duration_s = ivs.iter().map(|iv| iv.duration_s).sum();
                st.start_s = ivs[0].start_s;
                return Ok((st, cells.clone()));
            }
            let m = m.get_or_insert_with(DenseMerge::new);
            // Fast path: counts added straight from the encodings into one array.
            m.clear();
            if ivs.iter().all(|iv| m.add(&iv.hist)) {
                return Ok(column_of(
                    &m.reference,
                    &m.sparse(),
                    ivs,
                    &op.bucket_edges_ns,
                ));
            }
            // Anything unusual (other bounds or precision, a damaged encoding): histograms.
            let count: u64 = ivs.iter().map(|iv| iv.count).sum();
            let bytes: u64 = ivs.iter().map(|iv| iv.bytes).sum();
            let duration_s: f64 = ivs.iter().map(|iv| iv.duration_s).sum();
            let merged = &mut m.merged;
            merged.reset();
            for (k, iv) in ivs.iter().enumerate() {
                let h = decode_any_bounds(&iv.hist)
                    .with_context(|| format!("op {}: interval {}", op.op, c * group + k))?;
                if merged.add(&h).is_err() {
                    for (v, n) in sparse_counts(&h) {
                        merged.saturating_record_n(v, n);
                    }
                }
            }
            let st = interval_stat(merged, ivs[0].start_s, duration_s, count, bytes);
            Ok((st, bin_histogram(merged, &op.bucket_edges_ns)))
        };
        let mut out = OpSeries {
            op: op.op.clone(),
            edges_ns: edges,
            group,
            ..OpSeries::default()
        };
        let parts: Vec<Result<Vec<Column>>> = if loaded
            .as_ref()
            .is_some_and(|l| l.iter().all(Option::is_some))
        {
            // Every column merged already: nothing to spread over threads.
            let mut none = None;
            vec![(0..cols).map(|c| column(c, &mut none)).collect()]
        } else {
            let threads = std::thread::available_parallelism()
                .map(|t| t.get())
                .unwrap_or(1)
                .clamp(1, 8)
                .min(cols.max(1));
            let per = cols.div_ceil(threads).max(1);
            let ranges: Vec<std::ops::Range<usize>> = (0..cols)
                .step_by(per)
                .map(|a| a..(a + per).min(cols))
                .collect();
            std::thread::scope(|s| {
                let handles: Vec<_> = ranges
                    .iter()
                    .map(|r| {
                        let r = r.clone();
                        let column = &column;
                        s.spawn(move || {
                            let mut m = None;
                            r.map(|c| column(c, &mut m)).collect::<Result<Vec<_>>>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("column thread panicked"))
                    .collect()
            })
        };
        for part in parts {
            for (st, cells) in part? {
                out.stats.push(st);
                out.cells.push(cells);
            }
        }
        Ok(out)
    }

    /// [`OpSeries::decode_columns`] for every op of a run.
    pub fn decode_all_columns(ops: &[OpResult], max_cols: usize) -> Result<Vec<OpSeries>> {
        ops.iter()
            .map(|o| OpSeries::decode_columns(o, max_cols))
            .collect()
    }

    /// [`OpSeries::decode_all_columns`] of run `run`, taking the columns validation merged
    /// into `loaded` when it holds them for `max_cols`.
    pub fn decode_all_columns_loaded(
        ops: &[OpResult],
        max_cols: usize,
        loaded: Option<(&LoadedColumns, usize)>,
    ) -> Result<Vec<OpSeries>> {
        ops.iter()
            .enumerate()
            .map(|(k, o)| {
                let cols = loaded.and_then(|(l, run)| l.take(run, k, max_cols));
                OpSeries::decode_columns_with(o, max_cols, cols)
            })
            .collect()
    }

    /// Lowest and highest fine row with data, if any.
    pub(crate) fn row_range(&self) -> Option<(i32, i32)> {
        let mut lo = i32::MAX;
        let mut hi = i32::MIN;
        for c in self.cells.iter().flatten() {
            lo = lo.min(c.row);
            hi = hi.max(c.row);
        }
        (lo <= hi).then_some((lo, hi))
    }
}

/// Which heatmap: PyLatencyMap's two views.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeatKind {
    /// Colour = number of operations.
    Frequency,
    /// Colour = operations × latency (time spent).
    Intensity,
}

impl HeatKind {
    pub fn title(self) -> &'static str {
        match self {
            HeatKind::Frequency => "frequency (operations)",
            HeatKind::Intensity => "intensity (operations × latency: where the time went)",
        }
    }
}

/// A latency-over-time heatmap: `rows` log-latency rows (row 0 = lowest latency) × `cols`
/// time columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Heatmap {
    /// Rows per factor of two of this map.
    pub per_octave: u32,
    /// Row index (on a `per_octave` grid) of the lowest row.
    pub(crate) row0: i32,
    pub rows: usize,
    pub cols: usize,
    /// Intervals merged into each column.
    pub group: usize,
    /// Start time (s) of each column, plus the end of the last as a final element.
    pub(crate) col_edges_s: Vec<f64>,
    /// Counts, row-major: `freq[row * cols + col]`.
    pub freq: Vec<u64>,
    /// Summed latency (ns), same layout.
    pub intensity: Vec<f64>,
    /// Row edges (ns, `rows + 1` of them) when the rows are the source's own buckets (or
    /// groups of them); empty for rows on the `per_octave` grid.
    pub(crate) row_edges_ns: Vec<f64>,
}

impl Heatmap {
    /// Build a heatmap of `series` with at most `max_cols` columns and `per_octave` rows per
    /// factor of two (must divide [`FINE_PER_OCTAVE`]), covering at least `min_rows` rows and
    /// at most `max_rows` (rows are coarsened further when the latency span needs more).
    /// Returns `None` when the series has no data.
    pub fn build(
        series: &OpSeries,
        max_cols: usize,
        per_octave: u32,
        max_rows: usize,
    ) -> Option<Heatmap> {
        let (lo, hi) = series.row_range()?;
        let mut per_octave = per_octave.clamp(1, FINE_PER_OCTAVE);
        while !FINE_PER_OCTAVE.is_multiple_of(per_octave) {
            per_octave -= 1;
        }
        let (mut f, mut row0, mut rows);
        let source = series.edges_ns.len() >= 2;
        if source {
            // Rows are the source's buckets: group whole buckets when there are too many.
            f = 1;
            loop {
                row0 = lo.div_euclid(f);
                rows = (hi.div_euclid(f) - row0 + 1) as usize;
                if rows <= max_rows.max(1) {
                    break;
                }
                f *= 2;
            }
        } else {
            loop {
                f = (FINE_PER_OCTAVE / per_octave) as i32;
                row0 = lo.div_euclid(f);
                rows = (hi.div_euclid(f) - row0 + 1) as usize;
                if rows <= max_rows.max(1) || per_octave == 1 {
                    break;
                }
                per_octave = if per_octave == 4 { 2 } else { 1 };
            }
        }
        let n = series.stats.len();
        let max_cols = max_cols.max(1);
        let group = n.div_ceil(max_cols).max(1);
        let cols = n.div_ceil(group);
        let mut freq = vec![0u64; rows * cols];
        let mut intensity = vec![0f64; rows * cols];
        for (i, cells) in series.cells.iter().enumerate() {
            let col = i / group;
            for c in cells {
                let r = (c.row.div_euclid(f) - row0) as usize;
                freq[r * cols + col] += c.count;
                intensity[r * cols + col] += c.time_ns;
            }
        }
        let mut col_edges_s: Vec<f64> =
            (0..cols).map(|c| series.stats[c * group].start_s).collect();
        let last = &series.stats[n - 1];
        col_edges_s.push(last.start_s + last.duration_s);
        let row_edges_ns = if source {
            let e = &series.edges_ns;
            (0..=rows as i32)
                .map(|g| e[(((row0 + g) * f) as usize).min(e.len() - 1)] as f64)
                .collect()
        } else {
            Vec::new()
        };
        Some(Heatmap {
            per_octave,
            row0,
            rows,
            cols,
            group,
            col_edges_s,
            freq,
            intensity,
            row_edges_ns,
        })
    }

    /// Latency range (ns) of row `r`: `[low, high)` (the source's bucket edges when the rows
    /// are source buckets; the lowest may then start at 0).
    pub fn row_bounds_ns(&self, r: usize) -> (f64, f64) {
        if let (Some(&a), Some(&last)) = (self.row_edges_ns.get(r), self.row_edges_ns.last()) {
            return (a, *self.row_edges_ns.get(r + 1).unwrap_or(&last));
        }
        let i = self.row0 + r as i32;
        (
            row_low_ns(i, self.per_octave),
            row_low_ns(i + 1, self.per_octave),
        )
    }

    /// Value of a cell in the chosen view.
    pub fn value(&self, kind: HeatKind, row: usize, col: usize) -> f64 {
        match kind {
            HeatKind::Frequency => self.freq[row * self.cols + col] as f64,
            HeatKind::Intensity => self.intensity[row * self.cols + col],
        }
    }

    /// Largest cell value of a view.
    pub(crate) fn max_value(&self, kind: HeatKind) -> f64 {
        match kind {
            HeatKind::Frequency => self.freq.iter().copied().max().unwrap_or(0) as f64,
            HeatKind::Intensity => self.intensity.iter().copied().fold(0.0, f64::max),
        }
    }
}

/// Colour level of a cell in a view: frequency on a log scale ([`level`]: counts span
/// decades and single outliers must stay visible), intensity on a linear scale (the point of
/// that view is which latencies dominate the time spent), with non-empty cells kept visible.
pub(crate) fn level_for(kind: HeatKind, v: f64, max: f64) -> f64 {
    match kind {
        HeatKind::Frequency => level(v, max),
        HeatKind::Intensity => {
            if v <= 0.0 || max <= 0.0 {
                0.0
            } else {
                (v / max).clamp(0.05, 1.0)
            }
        }
    }
}

/// Colour level in 0..=1 of a cell value on a logarithmic scale up to `max` (counts span
/// decades; a linear scale would hide everything but the main mode). Zero stays zero; any
/// non-zero value gets at least a small positive level so single outliers remain visible.
pub fn level(v: f64, max: f64) -> f64 {
    if v <= 0.0 || max <= 0.0 {
        return 0.0;
    }
    if max <= 1.0 {
        return 1.0;
    }
    let l = (1.0 + v).ln() / (1.0 + max).ln();
    l.clamp(0.05, 1.0)
}

/// One bin of a whole-run latency histogram: `[low_ns, high_ns)`, its count and share (0..1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bin {
    pub low_ns: f64,
    pub high_ns: f64,
    pub count: u64,
    pub share: f64,
}

/// A histogram as contiguous log bins (`per_octave` per factor of two, dividing
/// [`FINE_PER_OCTAVE`]) from its lowest to its highest non-empty bin, empty bins included.
///
/// When `edges` holds the source's bucket edges (`OpResult::bucket_edges_ns`), the bins are
/// the source's own buckets: whole buckets, merged only where they are finer than
/// `per_octave`, so a bcc row `16 -> 31` µs is one bar from 16 to 32 µs.
pub fn log_bins(h: &Histogram<u64>, edges: &[u64], per_octave: u32) -> Vec<Bin> {
    if edges.len() >= 2 {
        return source_bins(h, edges, per_octave);
    }
    let cells = bin_histogram(h, &[]);
    let (Some(first), Some(last)) = (cells.first(), cells.last()) else {
        return vec![];
    };
    let per_octave = if FINE_PER_OCTAVE.is_multiple_of(per_octave.max(1)) {
        per_octave.max(1)
    } else {
        1
    };
    let f = (FINE_PER_OCTAVE / per_octave) as i32;
    let (r0, r1) = (first.row.div_euclid(f), last.row.div_euclid(f));
    let total: u64 = cells.iter().map(|c| c.count).sum();
    let mut bins: Vec<Bin> = (r0..=r1)
        .map(|r| Bin {
            low_ns: row_low_ns(r, per_octave),
            high_ns: row_low_ns(r + 1, per_octave),
            count: 0,
            share: 0.0,
        })
        .collect();
    for c in &cells {
        bins[(c.row.div_euclid(f) - r0) as usize].count += c.count;
    }
    for b in &mut bins {
        b.share = b.count as f64 / total as f64;
    }
    bins
}

/// [`log_bins`] on the source's bucket edges.
fn source_bins(h: &Histogram<u64>, edges: &[u64], per_octave: u32) -> Vec<Bin> {
    // Empty power-of-two buckets a source did not print are still buckets.
    let edges = &crate::analysis::modes::fill_gaps(edges);
    let step = 2f64.powf(1.0 / per_octave.max(1) as f64) * (1.0 - 1e-9);
    let mut kept: Vec<u64> = vec![edges[0]];
    for &e in &edges[1..] {
        let last = *kept.last().expect("not empty");
        if last == 0 || e as f64 >= last as f64 * step {
            kept.push(e);
        }
    }
    let end = edges[edges.len() - 1];
    if *kept.last().expect("not empty") != end {
        kept.push(end);
    }
    let mut counts = vec![0u64; kept.len() - 1];
    for (v, c) in sparse_counts(h) {
        if let Some(b) = source_bucket(&kept, representative_ns(h, v)) {
            counts[b] += c;
        }
    }
    let (Some(first), Some(last)) = (
        counts.iter().position(|&c| c > 0),
        counts.iter().rposition(|&c| c > 0),
    ) else {
        return vec![];
    };
    let total: u64 = counts.iter().sum();
    (first..=last)
        .map(|i| Bin {
            low_ns: kept[i] as f64,
            high_ns: kept[i + 1] as f64,
            count: counts[i],
            share: counts[i] as f64 / total as f64,
        })
        .collect()
}

#[cfg(test)]
mod tests;
