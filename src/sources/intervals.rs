//! Latencies accumulated into intervals: per-event values binned by completion time
//! ([`Binned`], encoded on a helper thread) and per-snapshot histograms ([`SnapshotSeries`]).

use super::*;

/// Most latencies an open interval holds as a list before they go into its histogram: 16,384
/// values take 128 KiB, the size of an interval histogram that spans 1 µs to 20 ms.
const MAX_CUR_VALS: usize = 1 << 14;

struct Slot {
    hist: Hist,
    count: u64,
    bytes: u64,
}

/// One event's accumulator in [`Binned`].
struct EventAcc {
    name: String,
    total: Histogram<u64>,
    /// Latencies of `total` not yet in it (added when the accumulator is drained).
    total_counts: TotalCounts,
    bytes: u64,
    cur: Option<i64>,
    /// Times `[lo, hi)` (ns) of interval `cur`; empty when none is open.
    cur_span: (i64, i64),
    cur_hist: Histogram<u64>,
    /// Latencies (ns) of the open interval not yet in `cur_hist`: appending is cheaper than
    /// recording into a histogram that was last touched on the encoder thread (a cache miss
    /// per value); the encoder records them. At most [`MAX_CUR_VALS`].
    cur_vals: Vec<u64>,
    cur_bytes: u64,
    closed: BTreeMap<i64, Slot>,
    /// Edges of the source buckets spread into this op (see `OpResult::bucket_edges_ns`).
    edges: std::collections::BTreeSet<u64>,
}

/// A closed interval histogram on its way to (or back from) the encoder thread.
struct Job {
    op: usize,
    k: i64,
    /// The interval's histogram, when values were recorded into it (spread buckets, or more
    /// than [`MAX_CUR_VALS`] latencies); `None` (the common case) when they are all in `vals`.
    hist: Option<Histogram<u64>>,
    /// Latencies (ns) still to be recorded into `hist`.
    vals: Vec<u64>,
    bytes: u64,
}

impl Job {
    /// The interval's histogram with the pending latencies recorded into it (a fresh one when
    /// it had none).
    fn settled(&mut self) -> &mut Histogram<u64> {
        let h = self.hist.get_or_insert_with(interval_histogram);
        for &v in &self.vals {
            record_interval(h, v, 1);
        }
        self.vals.clear();
        h
    }
}

struct Done {
    op: usize,
    k: i64,
    slot: Slot,
}

impl Job {
    /// Encode the job's interval with `enc` (counting its latencies in `own` when it has no
    /// histogram, the common case: only the counts in use are touched), leaving its list empty
    /// for reuse.
    fn encode(&mut self, enc: &mut HistEncoder, own: &mut IndexCounts) -> Done {
        let slot = if self.hist.is_none() && !self.vals.is_empty() {
            for &v in &self.vals {
                own.record(v);
            }
            self.vals.clear();
            let count = own.len;
            Slot {
                hist: enc.encode_counts(own),
                count,
                bytes: self.bytes,
            }
        } else {
            let bytes = self.bytes;
            let h = self.settled();
            Slot {
                hist: enc.encode(h),
                count: h.len(),
                bytes,
            }
        };
        Done {
            op: self.op,
            k: self.k,
            slot,
        }
    }
}

/// Closed intervals handed over at once: one message (and at most one wake-up of the helper)
/// per batch rather than per interval.
const BATCH_JOBS: usize = 32;
/// A batch is handed over early once its lists hold this many latencies (bounds memory).
const BATCH_VALS: usize = 1 << 16;
/// Batches queued for the helper before the parser waits for it (bounds memory: with the one
/// being encoded and the one being filled, at most (2 + 2) · [`BATCH_JOBS`] intervals and
/// about (2 + 2) · ([`BATCH_VALS`] + [`MAX_CUR_VALS`]) latencies are in flight).
const BATCHES_QUEUED: usize = 2;

/// Encodes closed intervals (V2-deflate) on a helper thread, so the parsing thread only appends
/// latencies to a list and hands the lists over in batches at interval boundaries: the helper
/// counts them by HdrHistogram index ([`IndexCounts`]) and encodes those counts, or (an
/// interval that also holds spread buckets or more than [`MAX_CUR_VALS`] values) records them
/// into the interval's histogram and encodes that. The lists come back with the encoded batch
/// for reuse; the batch queue is bounded, which bounds memory.
struct Encoder {
    tx: Option<std::sync::mpsc::SyncSender<Vec<Job>>>,
    /// Encoded intervals, and the emptied jobs of their batch (for reuse).
    done: std::sync::mpsc::Receiver<(Vec<Done>, Vec<Job>)>,
    /// The batch being filled.
    batch: Vec<Job>,
    batch_vals: usize,
    /// Emptied lists to reuse. (Histograms are not reused: one that grew would encode with a
    /// larger highest trackable value than a fresh one.)
    spare: Vec<Vec<u64>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Encoder {
    fn start() -> Encoder {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Job>>(BATCHES_QUEUED);
        let (done_tx, done) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("iolens-encode".into())
            .spawn(move || {
                let mut enc = HistEncoder::new();
                let mut own = IndexCounts::new();
                for mut batch in rx {
                    let out: Vec<Done> = batch
                        .iter_mut()
                        .map(|job| job.encode(&mut enc, &mut own))
                        .collect();
                    if done_tx.send((out, batch)).is_err() {
                        break;
                    }
                }
            })
            .ok();
        Encoder {
            tx: handle.as_ref().map(|_| tx),
            done,
            batch: Vec::with_capacity(BATCH_JOBS),
            batch_vals: 0,
            spare: Vec::new(),
            handle,
        }
    }

    /// Hand the batch being filled to the helper. `Err` gives the batch back when there is no
    /// helper (it could not be started, or it has stopped).
    fn flush(&mut self) -> std::result::Result<(), Vec<Job>> {
        self.batch_vals = 0;
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH_JOBS));
        match &self.tx {
            Some(tx) => tx.send(batch).map_err(|e| e.0),
            None => Err(batch),
        }
    }
}

fn merge_slot(closed: &mut BTreeMap<i64, Slot>, k: i64, s: Slot) {
    match closed.remove(&k) {
        None => {
            closed.insert(k, s);
        }
        Some(old) => {
            // The same interval closed twice (out-of-order times): merge exactly.
            let mut h = old.hist.decode().unwrap_or_else(|_| new_histogram());
            if let Ok(x) = s.hist.decode() {
                let _ = h.add(x);
            }
            closed.insert(
                k,
                Slot {
                    count: h.len(),
                    hist: Hist::encode(&h),
                    bytes: old.bytes.saturating_add(s.bytes),
                },
            );
        }
    }
}

/// Per-event latencies binned by completion time into fixed intervals.
///
/// Time is in ns on any consistent axis (Unix epoch or relative); interval `k` covers
/// `[k·interval, (k+1)·interval)` on that axis, so accumulators of different files on the same
/// axis merge exactly. Only one interval per event is open (a plain histogram); closed ones are
/// handed to an encoder thread and kept encoded, so memory grows with the number of non-empty
/// intervals, not with input size.
///
/// The series' duration never depends on the interval: it is the observed span, from the
/// earliest to the latest time recorded or [`observed`](Binned::observe) (a source that knows
/// its own span, such as a trace's first and last `tim`, says so). The grid is cut to that
/// span: the first and last intervals keep their real, shorter lengths, and one shorter than
/// half an interval is folded into its neighbour, so no interval is a sliver whose rate would
/// mean nothing.
pub(crate) struct Binned {
    interval_ns: u64,
    /// Earliest and latest time seen (ns on the axis).
    span: Option<(i64, i64)>,
    ops: Vec<EventAcc>,
    index: HashMap<String, usize>,
    encoder: Option<Encoder>,
}

impl Drop for Binned {
    fn drop(&mut self) {
        if let Some(mut e) = self.encoder.take() {
            e.tx = None;
            if let Some(h) = e.handle.take() {
                let _ = h.join();
            }
        }
    }
}

impl Binned {
    /// A new accumulator with the given interval length (ns, > 0).
    pub(crate) fn new(interval_ns: u64) -> Binned {
        Binned {
            interval_ns: interval_ns.max(1),
            span: None,
            ops: Vec::new(),
            index: HashMap::new(),
            encoder: None,
        }
    }

    /// Index of the event named `name`, created on first use.
    pub(crate) fn op(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.ops.len();
        self.ops.push(EventAcc {
            name: name.to_string(),
            total: new_histogram(),
            total_counts: TotalCounts::default(),
            bytes: 0,
            cur: None,
            cur_span: (0, 0),
            cur_hist: interval_histogram(),
            cur_vals: Vec::new(),
            cur_bytes: 0,
            closed: BTreeMap::new(),
            edges: Default::default(),
        });
        self.index.insert(name.to_string(), i);
        i
    }

    /// Close the open interval of `op` and queue it for encoding.
    #[cold]
    fn close(&mut self, op: usize) {
        let o = &mut self.ops[op];
        let Some(k) = o.cur.take() else { return };
        o.cur_span = (0, 0);
        if o.cur_hist.is_empty() && o.cur_vals.is_empty() && o.cur_bytes == 0 {
            return;
        }
        let enc = self.encoder.get_or_insert_with(Encoder::start);
        // An empty histogram stays (it is fresh: any value recorded would have made it
        // non-empty); only the list of latencies goes, in the common case.
        let hist = (!o.cur_hist.is_empty())
            .then(|| std::mem::replace(&mut o.cur_hist, interval_histogram()));
        let vals = std::mem::replace(&mut o.cur_vals, enc.spare.pop().unwrap_or_default());
        let bytes = std::mem::take(&mut o.cur_bytes);
        enc.batch_vals += vals.len();
        enc.batch.push(Job {
            op,
            k,
            hist,
            vals,
            bytes,
        });
        if enc.batch.len() >= BATCH_JOBS || enc.batch_vals >= BATCH_VALS {
            self.flush();
        }
    }

    /// Hand the batch of closed intervals to the encoder thread (encoding it here when there is
    /// none) and collect what it has encoded.
    fn flush(&mut self) {
        let Some(enc) = self.encoder.as_mut() else {
            return;
        };
        if let Err(batch) = enc.flush() {
            // No encoder thread: encode here.
            for mut job in batch {
                let bytes = job.bytes;
                let h = job.settled();
                let slot = Slot {
                    hist: Hist::encode(h),
                    count: h.len(),
                    bytes,
                };
                merge_slot(&mut self.ops[job.op].closed, job.k, slot);
            }
        }
        self.drain(false);
    }

    /// Collect encoded intervals; with `all`, close everything and wait for the encoder.
    fn drain(&mut self, all: bool) {
        if all {
            for i in 0..self.ops.len() {
                self.close(i);
                let o = &mut self.ops[i];
                o.total_counts.add_into(&mut o.total);
            }
            if self.encoder.as_ref().is_some_and(|e| !e.batch.is_empty()) {
                self.flush();
            }
        }
        let Some(enc) = self.encoder.as_mut() else {
            return;
        };
        if all {
            enc.tx = None;
            if let Some(h) = enc.handle.take() {
                let _ = h.join();
            }
        }
        while let Ok((done, jobs)) = enc.done.try_recv() {
            for d in done {
                merge_slot(&mut self.ops[d.op].closed, d.k, d.slot);
            }
            if !all {
                enc.spare.extend(jobs.into_iter().map(|j| j.vals));
            }
        }
        if all {
            self.encoder = None;
        }
    }

    /// First and last interval index holding data (closes open intervals).
    pub(crate) fn key_range(&mut self) -> Option<(i64, i64)> {
        self.drain(true);
        let lo = self
            .ops
            .iter()
            .filter_map(|o| o.closed.keys().next())
            .min()?;
        let hi = self
            .ops
            .iter()
            .filter_map(|o| o.closed.keys().next_back())
            .max()?;
        Some((*lo, *hi))
    }

    /// Widen the observed span to include `t_ns` (a time of the source that carries no value,
    /// e.g. a trace line that is not a wait).
    #[inline]
    pub(crate) fn observe(&mut self, t_ns: i64) {
        self.span = Some(match self.span {
            Some((lo, hi)) => (lo.min(t_ns), hi.max(t_ns)),
            None => (t_ns, t_ns),
        });
    }

    /// Move every interval by `k` intervals (to align files on one time axis).
    pub(crate) fn shift(&mut self, k: i64) {
        if k == 0 {
            return;
        }
        let d = k.saturating_mul(self.interval_ns as i64);
        self.span = self
            .span
            .map(|(lo, hi)| (lo.saturating_add(d), hi.saturating_add(d)));
        self.drain(true);
        for o in &mut self.ops {
            let old = std::mem::take(&mut o.closed);
            o.closed = old.into_iter().map(|(i, s)| (i + k, s)).collect();
        }
    }

    #[inline]
    fn slot_of(&mut self, op: usize, t_ns: i64) -> &mut EventAcc {
        let (lo, hi) = self.ops[op].cur_span;
        if lo <= t_ns && t_ns < hi {
            // Still in the open interval: no division.
            return &mut self.ops[op];
        }
        let iv = self.interval_ns as i64;
        let k = t_ns.div_euclid(iv);
        if self.ops[op].cur != Some(k) {
            self.close(op);
            self.ops[op].cur = Some(k);
        }
        let o = &mut self.ops[op];
        o.cur_span = k
            .checked_mul(iv)
            .and_then(|lo| Some((lo, lo.checked_add(iv)?)))
            .unwrap_or((0, 0));
        o
    }

    /// Record one latency completing at `t_ns`.
    #[inline]
    pub(crate) fn record(&mut self, op: usize, t_ns: i64, lat_ns: u64, bytes: u64) {
        self.observe(t_ns);
        let o = self.slot_of(op, t_ns);
        if o.cur_vals.len() >= MAX_CUR_VALS {
            for &v in &o.cur_vals {
                record_interval(&mut o.cur_hist, v, 1);
            }
            o.cur_vals.clear();
        }
        o.cur_vals.push(lat_ns);
        o.total_counts.record(lat_ns);
        o.cur_bytes = o.cur_bytes.saturating_add(bytes);
        o.bytes = o.bytes.saturating_add(bytes);
    }

    /// Record a bucket of `count` values in `[lo_ns, hi_ns)` at `t_ns` (spread as [`spread`]).
    pub(crate) fn record_spread(
        &mut self,
        op: usize,
        t_ns: i64,
        lo_ns: u64,
        hi_ns: u64,
        count: u64,
    ) {
        self.observe(t_ns);
        let o = self.slot_of(op, t_ns);
        spread(&mut o.cur_hist, lo_ns, hi_ns, count);
        spread(&mut o.total, lo_ns, hi_ns, count);
        o.edges.insert(lo_ns);
        o.edges.insert(hi_ns);
    }

    /// Add another accumulator on the same time axis.
    pub(crate) fn merge(&mut self, mut other: Binned) -> Result<()> {
        if other.interval_ns != self.interval_ns {
            bail!("cannot merge series with different intervals");
        }
        self.drain(true);
        other.drain(true);
        if let Some((lo, hi)) = other.span {
            self.observe(lo);
            self.observe(hi);
        }
        for src in std::mem::take(&mut other.ops) {
            let i = self.op(&src.name);
            let dst = &mut self.ops[i];
            dst.total
                .add(&src.total)
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            dst.bytes = dst.bytes.saturating_add(src.bytes);
            dst.edges.extend(src.edges);
            for (k, s) in src.closed {
                merge_slot(&mut dst.closed, k, s);
            }
        }
        Ok(())
    }

    /// Close every interval and build one [`OpResult`] per event on a shared interval grid
    /// (gaps become empty intervals). `keep` filters events by name. When the data spans more
    /// than [`MAX_INTERVALS`] intervals (a long trace, or a corrupt time far from the rest), the
    /// interval is widened by a whole factor so that the grid stays bounded, with a warning.
    pub(crate) fn finish(
        mut self,
        conv: BucketConvention,
        keep: &dyn Fn(&str) -> bool,
    ) -> Finished {
        self.drain(true);
        let mut kept: Vec<EventAcc> = std::mem::take(&mut self.ops)
            .into_iter()
            .filter(|o| !o.total.is_empty() && keep(&o.name))
            .collect();
        let range = |kept: &[EventAcc]| {
            let lo = kept
                .iter()
                .filter_map(|o| o.closed.keys().next().copied())
                .min();
            let hi = kept
                .iter()
                .filter_map(|o| o.closed.keys().next_back().copied())
                .max();
            lo.zip(hi)
        };
        let Some((mut lo, mut hi)) = range(&kept) else {
            // No values, but the source's own times (a trace of calls without waits) still
            // give the span it covers.
            let (start_ns, duration_s) = self
                .span
                .map_or((0, 0.0), |(a, b)| (a, b.saturating_sub(a) as f64 / 1e9));
            return Finished {
                ops: Vec::new(),
                start_ns,
                duration_s,
                interval_s: self.interval_ns as f64 / 1e9,
                warning: None,
            };
        };
        let mut interval_ns = self.interval_ns;
        let mut warning = None;
        if let Some((s_lo, s_hi)) = self.span {
            lo = lo.min(s_lo.div_euclid(interval_ns as i64));
            hi = hi.max(s_hi.div_euclid(interval_ns as i64));
        }
        let span = (hi as i128 - lo as i128 + 1) as u128;
        // The grid's size follows the data: a few values with one stray time far from the rest
        // (a 3 KB trace whose times span 84 days) must not become 172,800 empty intervals per
        // event (200 MB of results); [`MIN_GRID`] keeps short sources' grids as they are.
        let values: u64 = kept
            .iter()
            .map(|o| o.total.len())
            .fold(0, u64::saturating_add);
        let limit = (values.saturating_mul(GRID_PER_VALUE) as i64).clamp(MIN_GRID, MAX_INTERVALS);
        if span > limit as u128 {
            let f = span.div_ceil(limit as u128).min(i64::MAX as u128) as i64;
            for o in &mut kept {
                let old = std::mem::take(&mut o.closed);
                for (k, slot) in old {
                    merge_slot(&mut o.closed, k.div_euclid(f), slot);
                }
            }
            interval_ns = interval_ns.saturating_mul(f as u64).min(i64::MAX as u64);
            warning = Some(format!(
                "the data spans {span} intervals of {} s: interval widened to {} s to keep at \
                 most {limit} for {values} value(s) (check for times far from the rest)",
                self.interval_ns as f64 / 1e9,
                interval_ns as f64 / 1e9
            ));
            (lo, hi) = range(&kept).expect("still has data");
        }
        let iv_s = interval_ns as f64 / 1e9;
        let iv = interval_ns as i64;
        // The grid covers the observed span (which may reach past the intervals holding values:
        // a trace's last `tim` after its last wait), cut to the span at both ends.
        let (s_lo, s_hi) = self
            .span
            .unwrap_or((lo.saturating_mul(iv), hi.saturating_mul(iv)));
        lo = lo.min(s_lo.div_euclid(iv));
        hi = hi.max(s_hi.div_euclid(iv));
        // Groups of grid keys that become one interval: (first key, last key, start, end).
        let mut groups: Vec<(i64, i64, i64, i64)> = (lo..=hi)
            .map(|k| {
                let b0 = k.saturating_mul(iv).max(s_lo);
                let b1 = k.saturating_add(1).saturating_mul(iv).min(s_hi);
                (k, k, b0, b1.max(b0))
            })
            .collect();
        // A first or last interval shorter than half an interval joins its neighbour.
        if groups.len() > 1 && groups[0].3.saturating_sub(groups[0].2) < iv / 2 {
            let g = groups.remove(0);
            groups[0].0 = g.0;
            groups[0].2 = g.2;
        }
        let n = groups.len();
        if n > 1 && groups[n - 1].3.saturating_sub(groups[n - 1].2) < iv / 2 {
            let g = groups.pop().expect("n > 1");
            let last = groups.last_mut().expect("n > 1");
            last.1 = g.1;
            last.3 = g.3;
        }
        let empty = Hist::encode(&new_histogram());
        let mut ops = Vec::new();
        for mut o in kept {
            let mut ivs = Vec::with_capacity(groups.len());
            for &(k0, k1, b0, b1) in &groups {
                for k in k0..k1 {
                    if let Some(s) = o.closed.remove(&k) {
                        merge_slot(&mut o.closed, k1, s);
                    }
                }
                let (hist, count, bytes) = match o.closed.remove(&k1) {
                    Some(s) => (s.hist, s.count, s.bytes),
                    None => (empty.clone(), 0, 0),
                };
                ivs.push(Interval {
                    // i128: times from a hostile file may lie at both ends of i64.
                    start_s: (b0 as i128 - s_lo as i128) as f64 / 1e9,
                    duration_s: (b1 as i128 - b0 as i128) as f64 / 1e9,
                    count,
                    bytes,
                    hist,
                });
            }
            let mut r = OpResult::new(&o.name, &o.total, o.bytes, ivs);
            r.bucket_convention = conv;
            r.bucket_edges_ns = o.edges.into_iter().collect();
            ops.push(r);
        }
        Finished {
            ops,
            start_ns: s_lo,
            duration_s: s_hi.saturating_sub(s_lo) as f64 / 1e9,
            interval_s: iv_s,
            warning,
        }
    }
}

/// Most intervals a [`Binned`] series keeps: two days of 1 s intervals, so that a day-long
/// source keeps its 1 s intervals (display columns merge them exactly, whatever their number);
/// beyond, the interval is widened (with a warning).
pub const MAX_INTERVALS: i64 = 172_800;

/// Intervals a source's grid may always have, however few its values (an hour of 1 s).
const MIN_GRID: i64 = 3_600;
/// Intervals a source's grid may have per value it holds, up to [`MAX_INTERVALS`]: a grid of
/// mostly empty intervals tells nothing a coarser one does not.
const GRID_PER_VALUE: u64 = 16;

/// What [`Binned::finish`] returns.
pub(crate) struct Finished {
    pub ops: Vec<OpResult>,
    /// Start of the observed span on the time axis (ns).
    pub(crate) start_ns: i64,
    /// The observed span (s): earliest to latest time, whatever the interval.
    pub duration_s: f64,
    /// Interval length actually used (s).
    pub interval_s: f64,
    /// Set when the interval had to be widened.
    pub warning: Option<String>,
}

/// `(start_s, duration_s, values per op)` of the snapshot interval being filled.
type SnapshotInterval = (f64, f64, Vec<Option<IntervalValues>>);

/// What one op holds in the snapshot interval being filled: the bucket counts spread into it,
/// as `(spread, count)` ([`Spreads`]; written at the interval's end as the buckets themselves,
/// the spread-bucket encoding [`SpreadWriter`] writes, without expanding or compressing them),
/// or a histogram once a whole one was added to it. A full histogram per op and interval,
/// zeroed and then walked to encode it, took two thirds of the time of a year of hourly AWR
/// snapshots (`bench/awr-year.sh`); expanding each interval's buckets into values and deflating
/// their V2 encoding, most of what remained.
enum IntervalValues {
    Spread(Vec<(usize, u64)>),
    Hist(Histogram<u64>),
}

/// The values a bucket's count is spread over ([`spread_with`]), found once per bucket range
/// and number of slots rather than per snapshot (each slot's value is a `powf`), and per op the
/// counts spread into them not yet in its total histogram: recording 32 values a bucket a
/// snapshot into the total was a quarter of the time of a year of hourly AWR snapshots.
#[derive(Default)]
struct Spreads {
    /// The bucket ranges `[lo, hi)` met, numbered in order ([`BucketRange`]).
    ranges: rustc_hash::FxHashMap<(u64, u64), usize>,
    /// Per range: its `[lo, hi)`.
    range_ns: Vec<(u64, u64)>,
    /// Per range, per number of slots less one: its spread (`usize::MAX` until made).
    by_slots: Vec<[usize; SPREAD_SLOTS as usize]>,
    /// Per spread: its values, one per slot.
    values: Vec<Vec<u64>>,
    /// Per spread: its bucket's text in the spread-bucket encoding.
    texts: Vec<BucketText>,
    /// Per op, per spread: the counts of its slots not yet recorded in the op's total
    /// (empty until used).
    pending: Vec<Vec<Vec<u64>>>,
}

impl Spreads {
    /// The number of bucket range `[lo_ns, hi_ns)`.
    fn range(&mut self, lo_ns: u64, hi_ns: u64) -> BucketRange {
        let next = self.range_ns.len();
        let r = *self.ranges.entry((lo_ns, hi_ns)).or_insert(next);
        if r == next {
            self.range_ns.push((lo_ns, hi_ns));
            self.by_slots.push([usize::MAX; SPREAD_SLOTS as usize]);
        }
        BucketRange(r)
    }

    /// The spread of `count` (at least 1) values over bucket range `range`.
    fn of(&mut self, range: BucketRange, count: u64) -> usize {
        let slots = count.clamp(1, SPREAD_SLOTS);
        let at = self.by_slots[range.0][slots as usize - 1];
        if at != usize::MAX {
            return at;
        }
        // Spread one value a slot: each slot's value does not depend on the count.
        let (lo_ns, hi_ns) = self.range_ns[range.0];
        let mut v = Vec::with_capacity(slots as usize);
        spread_with(lo_ns, hi_ns, slots, &mut |x, _| v.push(x));
        self.values.push(v);
        self.texts.push(BucketText::of(lo_ns, hi_ns));
        self.by_slots[range.0][slots as usize - 1] = self.values.len() - 1;
        self.values.len() - 1
    }

    /// Each `(value, n)` of `count` values spread by `spread`, as [`spread_with`] gives them.
    fn each(&self, spread: usize, count: u64, mut f: impl FnMut(u64, u64)) {
        let v = &self.values[spread];
        let slots = v.len() as u64;
        let (base, rem) = (count / slots, count % slots);
        for (i, &x) in v.iter().enumerate() {
            let n = base + u64::from((i as u64) < rem);
            if n > 0 {
                f(x, n);
            }
        }
    }

    /// Count `count` values spread by `spread` into op `op`'s pending total. A count spread
    /// over `slots` slots gives each `count / slots` and one more to the `count % slots` lowest:
    /// kept as the sum of the first and, per remainder, how often it came (a loop over the
    /// slots per count was a twentieth of the time of a year of hourly AWR snapshots).
    fn add_pending(&mut self, op: usize, spread: usize, count: u64) {
        if self.pending.len() <= op {
            self.pending.resize_with(op + 1, Vec::new);
        }
        let p = &mut self.pending[op];
        if p.len() <= spread {
            p.resize_with(spread + 1, Vec::new);
        }
        let slots = self.values[spread].len();
        let c = &mut p[spread];
        if c.is_empty() {
            c.resize(slots, 0);
        }
        // c[0]: the sum of the shares; c[r] (r ≥ 1): the number of counts with remainder r.
        let slots = slots as u64;
        c[0] += count / slots;
        let rem = (count % slots) as usize;
        if rem > 0 {
            c[rem] += 1;
        }
    }

    /// Record op `op`'s pending counts into its total `h` and clear them.
    fn flush(&mut self, op: usize, h: &mut Histogram<u64>) {
        let Some(p) = self.pending.get_mut(op) else {
            return;
        };
        for (spread, c) in p.iter_mut().enumerate() {
            if c.is_empty() {
                continue;
            }
            // Slot i holds the shares and one for each count whose remainder exceeds i.
            let mut n = vec![0u64; c.len()];
            let mut above = 0u64;
            for i in (0..c.len()).rev() {
                n[i] = c[0] + above;
                if i > 0 {
                    above += c[i];
                }
            }
            c.iter_mut().for_each(|x| *x = 0);
            for (i, n) in n.into_iter().enumerate() {
                if n > 0 {
                    record_interval(h, self.values[spread][i], n);
                }
            }
        }
    }
}

/// A bucket range `[lo, hi)` of one [`SnapshotSeries`] ([`SnapshotSeries::range`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BucketRange(usize);

/// A closed snapshot interval: `(start_s, duration_s, per-op (encoding, count))`.
type ClosedInterval = (f64, f64, Vec<Option<(Hist, u64)>>);

/// Most distinct histograms (ops: bpftrace map keys, bcc sections, wait events, hlog tags) one
/// series holds. Each keeps a full-range total (about 300 KB), so a file of a few thousand
/// one-line keys would otherwise take gigabytes; real tools print far fewer.
pub const MAX_SERIES_OPS: usize = 256;

/// Build a run from per-snapshot histograms: `series[i]` is `(start_s, duration_s, per-op
/// histogram)` with `start_s` relative to the first snapshot. Only the interval being filled
/// is held as histograms; each closed interval is kept encoded (its size follows its counts),
/// so memory grows with what the input holds, not with its number of intervals.
pub(crate) struct SnapshotSeries {
    names: Vec<String>,
    index: HashMap<String, usize>,
    /// Closed intervals: `(start_s, duration_s, per-op (encoding, count))`.
    closed: Vec<ClosedInterval>,
    cur: Option<SnapshotInterval>,
    totals: Vec<Histogram<u64>>,
    /// Edges of the source buckets spread into each op (see `OpResult::bucket_edges_ns`).
    edges: Vec<std::collections::BTreeSet<u64>>,
    enc: HistEncoder,
    /// The writer of an interval's buckets.
    buckets: SpreadWriter,
    spreads: Spreads,
    /// Per op, per spread: whether its edges are in `edges` yet.
    edged: Vec<Vec<bool>>,
}

impl Default for SnapshotSeries {
    fn default() -> Self {
        SnapshotSeries::new()
    }
}

impl SnapshotSeries {
    /// An empty series.
    pub(crate) fn new() -> SnapshotSeries {
        SnapshotSeries {
            names: Vec::new(),
            index: HashMap::new(),
            closed: Vec::new(),
            cur: None,
            totals: Vec::new(),
            edges: Vec::new(),
            enc: HistEncoder::new(),
            buckets: SpreadWriter::default(),
            spreads: Spreads::default(),
            edged: Vec::new(),
        }
    }

    /// Index of an op, created on first use; an error beyond [`MAX_SERIES_OPS`] ops.
    pub(crate) fn op(&mut self, name: &str) -> Result<usize> {
        if let Some(&i) = self.index.get(name) {
            return Ok(i);
        }
        if self.names.len() >= MAX_SERIES_OPS {
            bail!(
                "more than {MAX_SERIES_OPS} distinct histograms (the {}th is {:?}): iolens reads \
                 at most {MAX_SERIES_OPS} per series (each takes about 300 KB); is this the \
                 right --format?",
                MAX_SERIES_OPS + 1,
                truncate(name, 60)
            );
        }
        self.names.push(name.to_string());
        self.totals.push(new_histogram());
        self.edges.push(Default::default());
        self.index.insert(name.to_string(), self.names.len() - 1);
        Ok(self.names.len() - 1)
    }

    /// Encode the interval being filled and keep it closed.
    fn close(&mut self) {
        if let Some((s, d, hs)) = self.cur.take() {
            let (enc, buckets, spreads) = (&mut self.enc, &mut self.buckets, &self.spreads);
            let hs = hs
                .into_iter()
                .map(|h| {
                    h.map(|h| match h {
                        IntervalValues::Spread(v) => {
                            buckets.begin();
                            let mut n = 0u64;
                            for (spread, count) in v {
                                buckets.bucket_named(&spreads.texts[spread], count);
                                n = n.saturating_add(count);
                            }
                            (buckets.finish(), n)
                        }
                        IntervalValues::Hist(h) => (enc.encode(&h), h.len()),
                    })
                })
                .collect();
            self.closed.push((s, d, hs));
        }
    }

    /// Start a new interval.
    pub(crate) fn begin_interval(&mut self, start_s: f64, duration_s: f64) {
        self.close();
        self.cur = Some((start_s, duration_s, Vec::new()));
    }

    /// Number of intervals so far.
    pub(crate) fn len(&self) -> usize {
        self.closed.len() + usize::from(self.cur.is_some())
    }

    /// True when there are no intervals.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Add a bucket count to `op` in the current interval.
    pub(crate) fn add_spread(&mut self, op: usize, lo_ns: u64, hi_ns: u64, count: u64) {
        let range = self.range(lo_ns, hi_ns);
        self.add_in_range(op, range, count);
    }

    /// The number of bucket range `[lo_ns, hi_ns)` in this series, for
    /// [`SnapshotSeries::add_in_range`].
    pub(crate) fn range(&mut self, lo_ns: u64, hi_ns: u64) -> BucketRange {
        self.spreads.range(lo_ns, hi_ns)
    }

    /// [`SnapshotSeries::add_spread`] for a range numbered by [`SnapshotSeries::range`]: a
    /// source with the same few buckets in every snapshot looks each one up once (a lookup a
    /// count was a twentieth of the time of a year of hourly AWR snapshots).
    pub(crate) fn add_in_range(&mut self, op: usize, range: BucketRange, count: u64) {
        let (lo_ns, hi_ns) = self.spreads.range_ns[range.0];
        let Some(cur) = self.cur.as_mut() else {
            return;
        };
        if cur.2.len() <= op {
            cur.2.resize_with(op + 1, || None);
        }
        // (Room for a source's usual number of buckets: grown a push at a time, the lists of
        // a year of hourly AWR snapshots were 2.6 million allocations.)
        let acc = cur.2[op].get_or_insert_with(|| IntervalValues::Spread(Vec::with_capacity(16)));
        if count == 0 {
            self.edges[op].insert(lo_ns);
            self.edges[op].insert(hi_ns);
            return;
        }
        let spread = self.spreads.of(range, count);
        self.spreads.add_pending(op, spread, count);
        match acc {
            IntervalValues::Spread(list) => list.push((spread, count)),
            IntervalValues::Hist(h) => self
                .spreads
                .each(spread, count, |v, n| record_interval(h, v, n)),
        }
        if self.edged.len() <= op {
            self.edged.resize_with(op + 1, Vec::new);
        }
        let seen = &mut self.edged[op];
        if seen.len() <= spread {
            seen.resize(spread + 1, false);
        }
        if !seen[spread] {
            seen[spread] = true;
            self.edges[op].insert(lo_ns);
            self.edges[op].insert(hi_ns);
        }
    }

    /// Add a whole histogram to `op` in the current interval.
    pub(crate) fn add_hist(&mut self, op: usize, src: &Histogram<u64>) {
        let Some(cur) = self.cur.as_mut() else {
            return;
        };
        if cur.2.len() <= op {
            cur.2.resize_with(op + 1, || None);
        }
        let acc = cur.2[op].get_or_insert_with(|| IntervalValues::Hist(new_histogram()));
        if let IntervalValues::Spread(list) = acc {
            let mut h = new_histogram();
            for &(spread, count) in list.iter() {
                self.spreads
                    .each(spread, count, |v, n| record_interval(&mut h, v, n));
            }
            *acc = IntervalValues::Hist(h);
        }
        if let IntervalValues::Hist(h) = acc {
            let _ = h.add(src);
        }
        let _ = self.totals[op].add(src);
    }

    /// Build the ops (every op gets every interval; empty where it had no data). Returns the
    /// ops and the covered duration.
    pub(crate) fn finish(mut self, conv: BucketConvention) -> (Vec<OpResult>, f64) {
        self.close();
        for (op, total) in self.totals.iter_mut().enumerate() {
            self.spreads.flush(op, total);
        }
        let empty = Hist::encode(&new_histogram());
        let duration = self
            .closed
            .iter()
            .map(|(s, d, _)| s + d)
            .fold(0.0, f64::max);
        let mut ops = Vec::new();
        for (i, name) in self.names.iter().enumerate() {
            let ivs = self
                .closed
                .iter_mut()
                .map(|(s, d, hs)| {
                    let (hist, count) = match hs.get_mut(i).and_then(|h| h.take()) {
                        Some(h) => h,
                        None => (empty.clone(), 0),
                    };
                    Interval {
                        start_s: *s,
                        duration_s: *d,
                        count,
                        bytes: 0,
                        hist,
                    }
                })
                .collect();
            let mut r = OpResult::new(name, &self.totals[i], 0, ivs);
            r.bucket_convention = conv;
            r.bucket_edges_ns = self.edges[i].iter().copied().collect();
            ops.push(r);
        }
        (ops, duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// The totals kept as shares and remainders hold, slot by slot, what spreading each
        /// count on its own gives.
        #[test]
        fn pending_totals_are_each_count_spread(
            counts in proptest::collection::vec((0usize..3, 1u64..200), 1..60)
        ) {
            let ranges = [(0, 1_000_000), (1_000_000, 2_000_000), (4_000, 4_001)];
            let mut s = Spreads::default();
            let mut want = new_histogram();
            for &(r, n) in &counts {
                let (lo, hi) = ranges[r];
                let range = s.range(lo, hi);
                let spread = s.of(range, n);
                s.add_pending(0, spread, n);
                spread_with(lo, hi, n, &mut |v, k| record_interval(&mut want, v, k));
            }
            let mut got = new_histogram();
            s.flush(0, &mut got);
            prop_assert_eq!(got.len(), counts.iter().map(|c| c.1).sum::<u64>());
            prop_assert_eq!(&got, &want);
            let mut again = new_histogram();
            s.flush(0, &mut again);
            prop_assert!(again.is_empty());
        }
    }

    /// The interval histograms of a [`Binned`] say how many values they hold without being
    /// decoded, and that number is the one decoding finds.
    #[test]
    fn counted_intervals_hold_what_they_say() {
        let mut b = Binned::new(1_000_000_000);
        let op = b.op("x");
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut n = 0;
        for t in 0..3_000i64 {
            for _ in 0..(t % 7) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                b.record(op, t * 5_000_000, seed >> (seed % 64), 0);
                n += 1;
            }
        }
        let fin = b.finish(BucketConvention::Exact, &|_| true);
        let ivs = &fin.ops[0].intervals;
        assert!(ivs.len() > 10);
        let mut sum = 0;
        for iv in ivs {
            // The same histogram as read from a file (not counted: decoded to be checked).
            let decoded: Hist =
                serde_json::from_value(serde_json::Value::String(iv.hist.as_base64().into()))
                    .unwrap();
            assert_eq!(
                iv.hist.checked_len().unwrap(),
                decoded.checked_len().unwrap()
            );
            assert_eq!(iv.hist.checked_len().unwrap(), iv.count);
            sum += iv.count;
        }
        assert_eq!(sum, n);
    }

    #[test]
    fn binned_grid_and_merge() {
        let mut a = Binned::new(1_000_000_000);
        let r = a.op("read");
        a.record(r, 10_500_000_000, 1000, 8192);
        a.record(r, 12_100_000_000, 2000, 8192);
        a.record(r, 10_700_000_000, 3000, 8192); // back to an earlier interval
        let mut b = Binned::new(1_000_000_000);
        let w = b.op("write");
        b.record(w, 11_000_000_000, 5000, 0);
        let r2 = b.op("read");
        b.record(r2, 12_900_000_000, 4000, 0);
        a.merge(b).unwrap();
        let f = a.finish(BucketConvention::Exact, &|_| true);
        let ops = f.ops;
        // The observed span, 10.5 s to 12.9 s, not whole intervals.
        assert_eq!(f.start_ns, 10_500_000_000);
        assert!((f.duration_s - 2.4).abs() < 1e-12);
        let read = ops.iter().find(|o| o.op == "read").unwrap();
        let counts: Vec<u64> = read.intervals.iter().map(|i| i.count).collect();
        assert_eq!(counts, vec![2, 0, 2]);
        let lens: Vec<f64> = read.intervals.iter().map(|i| i.duration_s).collect();
        let starts: Vec<f64> = read.intervals.iter().map(|i| i.start_s).collect();
        assert!(lens
            .iter()
            .zip([0.5, 1.0, 0.9])
            .all(|(a, b)| (a - b).abs() < 1e-12));
        assert!(starts
            .iter()
            .zip([0.0, 0.5, 1.5])
            .all(|(a, b)| (a - b).abs() < 1e-12));
        assert_eq!(read.count, 4);
        assert_eq!(read.bytes, 3 * 8192);
        let write = ops.iter().find(|o| o.op == "write").unwrap();
        assert_eq!(
            write.intervals.iter().map(|i| i.count).collect::<Vec<_>>(),
            vec![0, 1, 0]
        );
    }

    #[test]
    fn span_is_the_same_at_every_interval_and_slivers_fold() {
        for iv in [1_000_000_000u64, 10_000_000_000, 60_000_000_000] {
            let mut a = Binned::new(iv);
            let r = a.op("read");
            for i in 0..=1778u64 {
                a.record(r, 5_000_000_000 + (i * 100_000_000) as i64, 1000, 0);
            }
            a.observe(183_000_000_000); // a time with no value, after the last one
            let f = a.finish(BucketConvention::Exact, &|_| true);
            assert_eq!(f.start_ns, 5_000_000_000);
            assert!((f.duration_s - 178.0).abs() < 1e-9, "{}", f.duration_s);
            let ivs = &f.ops[0].intervals;
            let total: f64 = ivs.iter().map(|i| i.duration_s).sum();
            assert!((total - 178.0).abs() < 1e-9);
            assert_eq!(ivs.iter().map(|i| i.count).sum::<u64>(), 1779);
            let half = iv as f64 / 2e9;
            assert!(ivs
                .iter()
                .all(|i| i.duration_s >= half && i.duration_s < 3.0 * half));
        }
        // One value: a span of zero, one interval of zero length.
        let mut a = Binned::new(1_000_000_000);
        let r = a.op("read");
        a.record(r, 7_300_000_000, 0, 0);
        let f = a.finish(BucketConvention::Exact, &|_| true);
        assert_eq!((f.duration_s, f.ops[0].intervals.len()), (0.0, 1));
        assert_eq!(f.ops[0].summary.max_ns, 0, "a zero value stays zero");
    }

    #[test]
    fn far_apart_times_widen_the_interval() {
        let mut a = Binned::new(1_000_000_000);
        let r = a.op("read");
        a.record(r, 0, 1000, 0);
        a.record(r, 500_000 * 1_000_000_000, 1000, 0); // 500,000 s later
        let f = a.finish(BucketConvention::Exact, &|_| true);
        assert!(f.warning.is_some());
        // Two values: the grid is held to MIN_GRID intervals, 500,001 s / 3,600 → 139 s.
        assert_eq!(f.interval_s, 139.0);
        assert!(f.ops[0].intervals.len() as i64 <= MIN_GRID);
        assert_eq!(f.ops[0].count, 2);
        // Many values over the same span keep the finer grid MAX_INTERVALS allows.
        let mut a = Binned::new(1_000_000_000);
        let r = a.op("read");
        for k in 0..20_000i64 {
            a.record(r, k * 25 * 1_000_000_000, 1000, 0);
        }
        let f = a.finish(BucketConvention::Exact, &|_| true);
        assert_eq!(f.interval_s, 3.0);
        assert!(f.ops[0].intervals.len() as i64 <= MAX_INTERVALS);
    }

    #[test]
    fn a_day_of_one_second_intervals_keeps_them() {
        let mut a = Binned::new(1_000_000_000);
        let r = a.op("read");
        for s in 0..86_400i64 {
            a.record(r, s * 1_000_000_000 + 500_000_000, 1000 + s as u64, 0);
        }
        let f = a.finish(BucketConvention::Exact, &|_| true);
        assert!(f.warning.is_none(), "{:?}", f.warning);
        assert_eq!(f.interval_s, 1.0);
        assert_eq!(f.ops[0].intervals.len(), 86_400);
        assert!(f.ops[0].intervals.iter().all(|iv| iv.count == 1));
    }
}
