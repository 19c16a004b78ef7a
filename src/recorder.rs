//! Per-session latency recording and the off-hot-path merge into per-interval histograms.
//!
//! Data flow: each session thread owns a [`SessionRecorder`]. On every completed operation it
//! records one latency into its own HdrHistogram for that operation (no lock, no allocation, no
//! syscall). When a completion falls past the current interval boundary, the session hands its
//! filled histograms to the [`Collector`] over a channel (once per interval, not per operation)
//! and takes cleared ones from a shared pool. The collector merges sessions' batches per interval
//! exactly (HdrHistogram addition), closes an interval once every session has moved past it,
//! encodes it and adds it to the run totals. The result is one [`OpResult`] per operation whose
//! interval counts sum exactly to its total.
//!
//! Operations are named: a producer declares the [`Op`]s it records as one [`OpSet`] (block I/O:
//! [`IO_OPS`] = read, write, sync; a database: select, update, commit; later producers their own
//! syscalls or block-layer events) and the results carry those names as they are.
//!
//! Latency is attributed to the interval in which the operation *completed*; completions before
//! the measurement base (warm-up) are counted but not recorded.

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::results::{
    new_histogram, record_ns, Hist, Interval, LatencySummary, OpResult, SessionSummary,
};

/// One named operation a recorder records: its position in its [`OpSet`] and its name in the
/// results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Op {
    index: u8,
    name: &'static str,
    flush: bool,
}

impl Op {
    /// Operation number `index` of its set, named `name` in the results.
    pub const fn new(index: u8, name: &'static str) -> Op {
        Op {
            index,
            name,
            flush: false,
        }
    }

    /// A flush (fdatasync, commit): recorded like any operation, but left out of the latency
    /// percentiles of [`IntervalSnapshot`], which describe the reads and writes.
    pub const fn flush(index: u8, name: &'static str) -> Op {
        Op {
            index,
            name,
            flush: true,
        }
    }

    /// Name used in results.
    pub fn name(self) -> &'static str {
        self.name
    }
}

/// The operations one set of recorders records, in result order (`ops[i].index == i`).
#[derive(Clone, Copy, Debug)]
pub struct OpSet(&'static [Op]);

impl OpSet {
    /// A set of `ops`, numbered 0, 1, ... in order (checked when the constant is built).
    pub const fn new(ops: &'static [Op]) -> OpSet {
        let mut i = 0;
        while i < ops.len() {
            assert!(
                ops[i].index as usize == i,
                "ops are numbered 0, 1, ... in order"
            );
            i += 1;
        }
        OpSet(ops)
    }

    /// The operations, in result order.
    pub fn ops(self) -> &'static [Op] {
        self.0
    }

    fn len(self) -> usize {
        self.0.len()
    }
}

/// Block I/O: a read.
pub const READ: Op = Op::new(0, "read");
/// Block I/O: a write.
pub const WRITE: Op = Op::new(1, "write");
/// A flush: fdatasync/fsync, `log file sync`-shaped.
pub const SYNC: Op = Op::flush(2, "sync");
/// The operations of block I/O (the engine's sessions, a database's file I/O).
pub const IO_OPS: OpSet = OpSet::new(&[READ, WRITE, SYNC]);

/// One interval's histograms, bytes and errors per operation of a set.
struct Set {
    hists: Vec<Histogram<u64>>,
    bytes: Vec<u64>,
    errors: Vec<u64>,
}

impl Set {
    fn new(n: usize) -> Set {
        Set {
            hists: (0..n).map(|_| new_histogram()).collect(),
            bytes: vec![0; n],
            errors: vec![0; n],
        }
    }

    fn reset(&mut self) {
        self.hists.iter_mut().for_each(|h| h.reset());
        self.bytes.iter_mut().for_each(|b| *b = 0);
        self.errors.iter_mut().for_each(|e| *e = 0);
    }
}

/// One session's data for one interval, sent to the collector.
struct Batch {
    session: u32,
    /// Interval the data belongs to (`None` for a session's final "done" message with no data).
    interval: Option<u64>,
    /// Next interval the session will record into (`u64::MAX` when the session has finished).
    next: u64,
    data: Option<Set>,
}

/// Shared pool of cleared sets so interval switches do not allocate.
type Pool = Arc<Mutex<Vec<Set>>>;

/// Records latencies of one session. Owned by exactly one thread.
pub struct SessionRecorder {
    session: u32,
    ops: OpSet,
    base: Instant,
    interval: Duration,
    cur: u64,
    boundary: Instant,
    set: Set,
    dirty: bool,
    warmup_ops: u64,
    total: Histogram<u64>,
    tx: Sender<Batch>,
    pool: Pool,
}

impl SessionRecorder {
    /// Record one completed operation. `start` is when it was issued (or, for open-loop runs,
    /// when it was meant to be issued); `end` is when its completion was reaped. `op` is one of
    /// this recorder's [`OpSet`].
    #[inline]
    pub fn record(&mut self, op: Op, start: Instant, end: Instant, bytes: u64) {
        debug_assert_eq!(
            self.ops.0[op.index as usize], op,
            "op of this recorder's set"
        );
        if end < self.base {
            self.warmup_ops += 1;
            return;
        }
        if end >= self.boundary {
            self.advance(end);
        }
        let ns = end.saturating_duration_since(start).as_nanos() as u64;
        let i = op.index as usize;
        record_ns(&mut self.set.hists[i], ns);
        self.set.bytes[i] += bytes;
        self.dirty = true;
    }

    /// Count a failed operation (not timed).
    #[inline]
    pub fn error(&mut self, op: Op) {
        debug_assert_eq!(
            self.ops.0[op.index as usize], op,
            "op of this recorder's set"
        );
        self.set.errors[op.index as usize] += 1;
        self.dirty = true;
    }

    /// Completions seen before the measurement base.
    pub fn warmup_ops(&self) -> u64 {
        self.warmup_ops
    }

    /// Move the measurement base (before any completion is recorded), e.g. once all sessions
    /// are ready to start together.
    pub fn set_base(&mut self, base: Instant) {
        self.base = base;
        self.cur = 0;
        self.boundary = base + self.interval;
    }

    /// The measurement base of this recorder.
    pub fn base(&self) -> Instant {
        self.base
    }

    #[cold]
    fn advance(&mut self, now: Instant) {
        let idx = (now.duration_since(self.base).as_nanos() / self.interval.as_nanos()) as u64;
        self.send(idx);
        self.cur = idx;
        self.boundary = self.base + self.interval * (idx as u32 + 1);
    }

    fn send(&mut self, next: u64) {
        let data = if self.dirty {
            let fresh = self.pool.lock().ok().and_then(|mut p| p.pop());
            let full = std::mem::replace(
                &mut self.set,
                fresh.unwrap_or_else(|| Set::new(self.ops.len())),
            );
            for h in &full.hists {
                let _ = self.total.add(h);
            }
            Some(full)
        } else {
            None
        };
        let _ = self.tx.send(Batch {
            session: self.session,
            interval: data.is_some().then_some(self.cur),
            next,
            data,
        });
        self.dirty = false;
    }
}

impl Drop for SessionRecorder {
    fn drop(&mut self) {
        self.send(u64::MAX);
    }
}

/// A closed interval, for live progress: all operations' counts and bytes, and the latency
/// percentiles of the operations that are not flushes.
#[derive(Clone, Debug)]
pub struct IntervalSnapshot {
    pub index: u64,
    pub count: u64,
    /// Of `count`, the flushes (syncs, commits).
    pub flushes: u64,
    pub bytes: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
}

/// Merges sessions' batches into per-interval and total histograms. Lives off the hot path
/// (typically in the thread that also drives progress display).
pub struct Collector {
    ops: OpSet,
    rx: Receiver<Batch>,
    pool: Pool,
    interval: Duration,
    pos: Vec<u64>,
    open: BTreeMap<u64, Set>,
    closed_upto: u64,
    totals: Set,
    intervals: Vec<Vec<Interval>>,
    /// Closed intervals not yet taken by [`Collector::take_closed`].
    unread: VecDeque<IntervalSnapshot>,
}

/// Create `sessions` recorders of the operations `ops`, sharing one collector. Latencies of
/// completions at or after `base` are recorded, in intervals of `interval`.
pub fn recorders(
    ops: OpSet,
    sessions: usize,
    base: Instant,
    interval: Duration,
) -> (Vec<SessionRecorder>, Collector) {
    assert!(!interval.is_zero(), "interval must be positive");
    let (tx, rx) = channel();
    let pool: Pool = Arc::new(Mutex::new(Vec::new()));
    let recs = (0..sessions)
        .map(|s| SessionRecorder {
            session: s as u32,
            ops,
            base,
            interval,
            cur: 0,
            boundary: base + interval,
            set: Set::new(ops.len()),
            dirty: false,
            warmup_ops: 0,
            total: new_histogram(),
            tx: tx.clone(),
            pool: pool.clone(),
        })
        .collect();
    let col = Collector {
        ops,
        rx,
        pool,
        interval,
        pos: vec![0; sessions],
        open: BTreeMap::new(),
        closed_upto: 0,
        totals: Set::new(ops.len()),
        intervals: vec![Vec::new(); ops.len()],
        unread: VecDeque::new(),
    };
    (recs, col)
}

impl Collector {
    /// Process incoming batches for up to `timeout`. Returns true while some session is live.
    pub fn poll(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(b) => self.take(b),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        self.close_ready(false);
        self.pos.iter().any(|&p| p != u64::MAX)
    }

    /// Every interval closed since the last call, oldest first (each exactly once).
    pub fn take_closed(&mut self) -> impl Iterator<Item = IntervalSnapshot> + '_ {
        self.unread.drain(..)
    }

    /// Total completed operations so far (closed intervals only).
    pub fn total_count(&self) -> u64 {
        self.totals.hists.iter().map(|h| h.len()).sum()
    }

    fn take(&mut self, b: Batch) {
        if let (Some(k), Some(mut d)) = (b.interval, b.data) {
            let n = self.ops.len();
            let open = self.open.entry(k).or_insert_with(|| Set::new(n));
            for i in 0..n {
                let _ = open.hists[i].add(&d.hists[i]);
                open.bytes[i] += d.bytes[i];
                open.errors[i] += d.errors[i];
            }
            d.reset();
            if let Ok(mut p) = self.pool.lock() {
                p.push(d);
            }
        }
        self.pos[b.session as usize] = b.next;
    }

    fn close_ready(&mut self, all: bool) {
        let limit = if all {
            u64::MAX
        } else {
            *self.pos.iter().min().unwrap_or(&0)
        };
        let ready: Vec<u64> = self.open.range(..limit).map(|(k, _)| *k).collect();
        for k in ready {
            let o = self.open.remove(&k).expect("key exists");
            self.close_interval(k, o);
        }
    }

    fn close_interval(&mut self, k: u64, o: Set) {
        // Gaps (no completion anywhere) become empty intervals so time stays continuous.
        while self.closed_upto < k {
            let gap = self.closed_upto;
            self.push_interval(gap, None);
        }
        self.push_interval(k, Some(o));
    }

    fn push_interval(&mut self, k: u64, o: Option<Set>) {
        let dur = self.interval.as_secs_f64();
        let mut snap = IntervalSnapshot {
            index: k,
            count: 0,
            flushes: 0,
            bytes: 0,
            p50_ns: 0,
            p99_ns: 0,
        };
        let mut merged = new_histogram();
        for (i, op) in self.ops.ops().iter().enumerate() {
            let (hist, bytes, count) = match &o {
                Some(o) => {
                    let _ = self.totals.hists[i].add(&o.hists[i]);
                    self.totals.errors[i] += o.errors[i];
                    if !op.flush {
                        let _ = merged.add(&o.hists[i]);
                    }
                    (Hist::encode(&o.hists[i]), o.bytes[i], o.hists[i].len())
                }
                None => (Hist::encode(&new_histogram()), 0, 0),
            };
            self.totals.bytes[i] += bytes;
            snap.count += count;
            if op.flush {
                snap.flushes += count;
            }
            snap.bytes += bytes;
            self.intervals[i].push(Interval {
                start_s: k as f64 * dur,
                duration_s: dur,
                count,
                bytes,
                hist,
            });
        }
        if !merged.is_empty() {
            snap.p50_ns = merged.value_at_quantile(0.5);
            snap.p99_ns = merged.value_at_quantile(0.99);
        }
        self.closed_upto = k + 1;
        self.unread.push_back(snap);
    }

    /// Drain every remaining batch (all recorders must have been dropped) and build the
    /// results of the operations that completed or failed at least once, in the set's order.
    /// `measured_s` is the measured duration (trims the last interval's length).
    pub fn finish(mut self, measured_s: f64) -> Vec<OpResult> {
        while let Ok(b) = self.rx.recv() {
            self.take(b);
        }
        self.close_ready(true);
        let mut ops = Vec::new();
        for (i, op) in self.ops.ops().iter().enumerate() {
            let mut ivs = std::mem::take(&mut self.intervals[i]);
            // Intervals past the measured end carry no data by construction; trim lengths.
            if let Some(last) = ivs.last_mut() {
                let end = last.start_s + last.duration_s;
                if measured_s > last.start_s && measured_s < end {
                    last.duration_s = measured_s - last.start_s;
                }
            }
            // A few milliseconds past the last boundary is not an interval: fold it into the
            // one before (its real length kept, so rates stay count / real duration).
            // (Histograms encoded by this process always decode; on the impossible failure
            // the intervals stay as they are.)
            let _ = crate::results::fold_stub_tail(&mut ivs);
            let errors = self.totals.errors[i];
            if self.totals.hists[i].is_empty() && errors == 0 {
                continue;
            }
            let mut r = OpResult::new(op.name(), &self.totals.hists[i], self.totals.bytes[i], ivs);
            r.errors = errors;
            ops.push(r);
        }
        ops
    }
}

/// Per-session summaries, gathered from recorders before they are dropped.
pub fn session_summary(rec: &SessionRecorder) -> SessionSummary {
    let mut t = rec.total.clone();
    for h in &rec.set.hists {
        let _ = t.add(h);
    }
    let s = LatencySummary::of(&t);
    SessionSummary {
        session: rec.session,
        count: s.count,
        mean_ns: s.mean_ns,
        p99_ns: s.p99_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_sum_to_total_and_merge_exactly() {
        let base = Instant::now();
        let iv = Duration::from_millis(10);
        let (mut recs, mut col) = recorders(IO_OPS, 3, base, iv);
        let mut reference = new_histogram();
        let mut n = 0u64;
        for step in 0..200u64 {
            for (s, r) in recs.iter_mut().enumerate() {
                let lat = 1_000 + step * 37 + s as u64 * 1_000_003;
                let end = base + Duration::from_micros(step * 500 + s as u64);
                let start = end - Duration::from_nanos(lat);
                r.record(if s == 1 { WRITE } else { READ }, start, end, 8192);
                record_ns(&mut reference, lat);
                n += 1;
            }
            col.poll(Duration::from_millis(0));
        }
        drop(recs);
        let ops = col.finish(0.1);
        let total: u64 = ops.iter().map(|o| o.count).sum();
        assert_eq!(total, n);
        let mut merged = new_histogram();
        for o in &ops {
            let ivsum: u64 = o.intervals.iter().map(|i| i.count).sum();
            assert_eq!(ivsum, o.count, "intervals sum to total for {}", o.op);
            let mut m = new_histogram();
            for i in &o.intervals {
                m.add(i.hist.decode().unwrap()).unwrap();
            }
            assert_eq!(m, o.hist.decode().unwrap());
            merged.add(o.hist.decode().unwrap()).unwrap();
        }
        assert_eq!(
            merged, reference,
            "merge across sessions and intervals is exact"
        );
        // 100 ms of completions at 10 ms intervals.
        assert_eq!(ops[0].intervals.len(), 10);
    }

    #[test]
    fn warmup_excluded_and_gaps_filled() {
        let t0 = Instant::now();
        let base = t0 + Duration::from_millis(50);
        let (mut recs, col) = recorders(IO_OPS, 1, base, Duration::from_millis(10));
        let r = &mut recs[0];
        r.record(READ, t0, t0 + Duration::from_millis(10), 1); // warm-up
        r.record(READ, base, base + Duration::from_millis(1), 1); // interval 0
        r.record(READ, base, base + Duration::from_millis(45), 1); // interval 4
        assert_eq!(r.warmup_ops(), 1);
        drop(recs);
        let ops = col.finish(0.05);
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].count, 2);
        let counts: Vec<u64> = ops[0].intervals.iter().map(|i| i.count).collect();
        assert_eq!(counts, vec![1, 0, 0, 0, 1]);
    }

    #[test]
    fn operations_keep_their_names_and_flushes_stay_out_of_progress_percentiles() {
        const SELECT: Op = Op::new(0, "select");
        const UPDATE: Op = Op::new(1, "update");
        const COMMIT: Op = Op::flush(2, "commit");
        const EXTRA: Op = Op::new(3, "io_uring_enter");
        const SET: OpSet = OpSet::new(&[SELECT, UPDATE, COMMIT, EXTRA]);
        let base = Instant::now();
        let (mut recs, mut col) = recorders(SET, 1, base, Duration::from_millis(10));
        let r = &mut recs[0];
        let at = |us: u64| base + Duration::from_micros(us);
        r.record(SELECT, at(0), at(100), 0);
        r.record(UPDATE, at(0), at(200), 0);
        // A very slow commit: a flush, so not in the interval's p99.
        r.record(COMMIT, at(0), at(9_000), 0);
        r.record(EXTRA, at(100), at(300), 0);
        r.record(SELECT, at(10_000), at(10_100), 0); // moves to interval 1: 0 closes
        col.poll(Duration::from_millis(20));
        let snaps: Vec<IntervalSnapshot> = col.take_closed().collect();
        assert_eq!(snaps.len(), 1);
        assert_eq!((snaps[0].count, snaps[0].flushes), (4, 1));
        assert!(snaps[0].p99_ns < 1_000_000, "p99 {} ns", snaps[0].p99_ns);
        assert_eq!(col.take_closed().count(), 0, "each interval is taken once");
        drop(recs);
        let ops = col.finish(0.02);
        let names: Vec<&str> = ops.iter().map(|o| o.op.as_str()).collect();
        assert_eq!(names, ["select", "update", "commit", "io_uring_enter"]);
        assert_eq!(ops[0].count, 2);
    }
}
