//! Per-session latency recording and the off-hot-path merge into per-interval histograms.
//!
//! Data flow: each session thread owns a [`SessionRecorder`]. On every completed operation it
//! records one latency into its own HdrHistogram for that operation (no lock, no allocation, no
//! syscall; the histogram of an operation is allocated at its first completion, so a session
//! holds histograms only for the operations it issues). When a completion falls past the
//! current interval boundary, the session sends the non-empty buckets of its histograms to the
//! [`Collector`] over a channel (once per interval, not per operation) and clears them in
//! place: no spare histograms, so memory per session stays flat at hundreds of sessions. The
//! collector merges sessions' batches per interval exactly (same buckets, counts added) into
//! one [`OpAcc`] an operation (the accumulator the watch fills too), closes an interval once
//! every session has moved past it (the accumulator encodes it and adds it to the run total),
//! and makes results of the accumulators' parts ([`OpResult::of_parts`]). The result is one
//! [`OpResult`] per operation whose interval counts sum exactly to its total.
//!
//! Operations are named: a producer declares the [`Op`]s it records as one [`OpSet`] (block I/O:
//! [`IO_OPS`] = read, write, sync; a database: select, update, commit; later producers their own
//! syscalls or block-layer events) and the results carry those names as they are.
//!
//! Latency is attributed to the interval in which the operation *completed*; completions before
//! the measurement base (warm-up) are counted but not recorded. A producer may also close the
//! window at the planned end ([`SessionRecorder::set_end`]; `run` does): completions at or
//! after it (in flight when it came) are then counted but not recorded either, so the measured
//! span is the planned one even when, at hundreds of busy sessions, a session is descheduled
//! past the end between issuing an operation and reaping it. (The database producers keep
//! every completion of the statements they started before the end, which their exact I/O
//! counters include.)

use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::histogram::{add_sparse, new_histogram, OpAcc, HIST_MAX_NS, SIGFIG};
use crate::results::{LatencySummary, OpResult, SessionSummary};

/// One named operation a recorder records: its position in its [`OpSet`] and its name in the
/// results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Op {
    index: u8,
    name: &'static str,
    flush: bool,
}

impl Op {
    /// Operation number `index` of its set, named `name` in the results.
    pub(crate) const fn new(index: u8, name: &'static str) -> Op {
        Op {
            index,
            name,
            flush: false,
        }
    }

    /// A flush (fdatasync, commit): recorded like any operation, but left out of the latency
    /// percentiles of [`IntervalSnapshot`], which describe the reads and writes.
    pub(crate) const fn flush(index: u8, name: &'static str) -> Op {
        Op {
            index,
            name,
            flush: true,
        }
    }

    /// Name used in results.
    pub(crate) fn name(self) -> &'static str {
        self.name
    }
}

/// The operations one set of recorders records, in result order (`ops[i].index == i`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpSet(&'static [Op]);

impl OpSet {
    /// A set of `ops`, numbered 0, 1, ... in order (checked when the constant is built).
    pub(crate) const fn new(ops: &'static [Op]) -> OpSet {
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
    pub(crate) fn ops(self) -> &'static [Op] {
        self.0
    }

    /// The operations' names, in result order.
    pub(crate) fn names(self) -> Vec<&'static str> {
        self.0.iter().map(|o| o.name()).collect()
    }

    fn len(self) -> usize {
        self.0.len()
    }
}

/// Block I/O: a read.
pub(crate) const READ: Op = Op::new(0, "read");
/// Block I/O: a write.
pub(crate) const WRITE: Op = Op::new(1, "write");
/// A flush: fdatasync/fsync, `log file sync`-shaped.
pub(crate) const SYNC: Op = Op::flush(2, "sync");
/// The operations of block I/O (the engine's sessions, a database's file I/O).
pub(crate) const IO_OPS: OpSet = OpSet::new(&[READ, WRITE, SYNC]);

/// Counter type of a session's interval histograms: 16 bits, a quarter of the memory of 64
/// (66 KiB a histogram instead of 264 KiB; the range stays the project's: 1 ns to one hour at
/// 3 significant digits).
///
/// Why a count cannot overflow: a bucket's count is at most its histogram's total count, and
/// [`SessionRecorder::record`] hands an interval histogram to the collector (and goes on with an
/// empty one, for the same interval) once its total reaches [`COUNT_CAP`], before recording
/// another value. So no count of an interval histogram exceeds `Count::MAX`, at any rate and for
/// any interval length; the test `interval_counts_are_handed_over_before_they_can_overflow`
/// records past the cap into one bucket and checks every count arrives. The collector adds
/// what it is handed into 64-bit histograms. The hand-over costs one pass over the histogram up
/// to its highest value and one message: once per 65,535 operations of a session, a fraction of
/// a nanosecond per operation (measured by `bench/scale.sh`, null engine).
type Count = u16;
/// Operations one interval histogram of a session holds before it is handed over.
const COUNT_CAP: u64 = Count::MAX as u64;

fn new_interval_histogram() -> Histogram<Count> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, SIGFIG).expect("static histogram bounds are valid")
}

/// One operation's data of one interval from one session, sent to the collector: the
/// histogram as (value, count) of its non-empty buckets (ascending), bytes and errors.
struct OpData {
    op: u8,
    counts: Vec<(u64, Count)>,
    bytes: u64,
    errors: u64,
}

/// One session's data for one interval, sent to the collector.
struct Batch {
    session: u32,
    /// Interval the data belongs to.
    interval: u64,
    /// Next interval the session will record into (`u64::MAX` when the session has finished).
    next: u64,
    /// Operations with data (empty: the session only moved on).
    data: Vec<OpData>,
}

/// Records latencies of one session. Owned by exactly one thread.
///
/// Memory: one 16-bit interval histogram (66 KiB) per operation the session has issued,
/// allocated at its first completion; the session's running total is kept sparse (its
/// non-empty buckets). At an interval boundary the session sends its non-empty buckets to the
/// collector and clears its histograms in place, so no spare histograms are kept anywhere.
pub(crate) struct SessionRecorder {
    session: u32,
    ops: OpSet,
    base: Instant,
    interval: Duration,
    cur: u64,
    /// The next interval boundary, or the planned end if that comes first.
    boundary: Instant,
    end: Option<Instant>,
    hists: Vec<Option<Histogram<Count>>>,
    bytes: Vec<u64>,
    errors: Vec<u64>,
    dirty: bool,
    warmup_ops: u64,
    late_ops: u64,
    /// Every operation handed over so far, as (value, count) of non-empty buckets, ascending.
    total: Vec<(u64, u64)>,
    tx: Sender<Batch>,
    /// Scratch histogram for [`session_summary`], shared by the set's recorders.
    scratch: Arc<Mutex<Option<Histogram<u64>>>>,
}

impl SessionRecorder {
    /// Record one completed operation. `start` is when it was issued (or, for open-loop runs,
    /// when it was meant to be issued); `end` is when its completion was reaped. `op` is one of
    /// this recorder's [`OpSet`].
    #[inline]
    pub(crate) fn record(&mut self, op: Op, start: Instant, end: Instant, bytes: u64) {
        debug_assert_eq!(
            self.ops.0[op.index as usize], op,
            "op of this recorder's set"
        );
        if end < self.base {
            self.warmup_ops += 1;
            return;
        }
        if end >= self.boundary && !self.advance(end) {
            self.late_ops += 1;
            return;
        }
        let ns = end.saturating_duration_since(start).as_nanos() as u64;
        let i = op.index as usize;
        match &mut self.hists[i] {
            Some(h) if h.len() < COUNT_CAP => h.saturating_record(ns),
            _ => self.record_cold(i, ns),
        }
        self.bytes[i] += bytes;
        self.dirty = true;
    }

    /// Count a failed operation (not timed).
    #[inline]
    pub(crate) fn error(&mut self, op: Op) {
        debug_assert_eq!(
            self.ops.0[op.index as usize], op,
            "op of this recorder's set"
        );
        self.errors[op.index as usize] += 1;
        self.dirty = true;
    }

    /// Completions seen before the measurement base.
    #[cfg(test)]
    pub(crate) fn warmup_ops(&self) -> u64 {
        self.warmup_ops
    }

    /// Completions seen at or after the planned end (not recorded).
    #[cfg(test)]
    pub(crate) fn late_ops(&self) -> u64 {
        self.late_ops
    }

    /// Move the measurement base (before any completion is recorded), e.g. once all sessions
    /// are ready to start together.
    pub(crate) fn set_base(&mut self, base: Instant) {
        self.base = base;
        self.cur = 0;
        self.boundary = self.next_boundary(0);
    }

    /// Set the planned end of measurement (before any completion is recorded): completions at
    /// or after it are counted but not recorded.
    pub(crate) fn set_end(&mut self, end: Option<Instant>) {
        self.end = end;
        self.boundary = self.next_boundary(self.cur);
    }

    fn next_boundary(&self, idx: u64) -> Instant {
        let b = self.base + self.interval * (idx as u32 + 1);
        self.end.map_or(b, |e| b.min(e))
    }

    /// The measurement base of this recorder.
    pub(crate) fn base(&self) -> Instant {
        self.base
    }

    /// A completion at or past the boundary: move to its interval (false: it lies at or past
    /// the planned end, and is not recorded).
    #[cold]
    fn advance(&mut self, now: Instant) -> bool {
        if self.end.is_some_and(|e| now >= e) {
            return false;
        }
        let idx = (now.duration_since(self.base).as_nanos() / self.interval.as_nanos()) as u64;
        self.send(idx);
        self.cur = idx;
        self.boundary = self.next_boundary(idx);
        true
    }

    /// Record `ns` for operation `i` at its first completion (allocate its histogram) or when
    /// its histogram is full (hand the interval's data over so far, go on in the same interval).
    #[cold]
    fn record_cold(&mut self, i: usize, ns: u64) {
        if self.hists[i].is_some() {
            self.send(self.cur);
        }
        self.hists[i]
            .get_or_insert_with(new_interval_histogram)
            .saturating_record(ns);
    }

    fn send(&mut self, next: u64) {
        let mut data = Vec::new();
        if self.dirty {
            for i in 0..self.ops.len() {
                let counts: Vec<(u64, Count)> = match self.hists[i].as_mut() {
                    Some(h) if !h.is_empty() => {
                        let c = h
                            .iter_recorded()
                            .map(|v| (v.value_iterated_to(), v.count_at_value()))
                            .collect();
                        h.reset();
                        c
                    }
                    _ => Vec::new(),
                };
                let (bytes, errors) = (
                    std::mem::take(&mut self.bytes[i]),
                    std::mem::take(&mut self.errors[i]),
                );
                if counts.is_empty() && bytes == 0 && errors == 0 {
                    continue;
                }
                add_sparse(&mut self.total, &counts);
                data.push(OpData {
                    op: i as u8,
                    counts,
                    bytes,
                    errors,
                });
            }
        }
        let _ = self.tx.send(Batch {
            session: self.session,
            interval: self.cur,
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
pub(crate) struct IntervalSnapshot {
    pub index: u64,
    pub count: u64,
    /// Of `count`, the flushes (syncs, commits).
    pub flushes: u64,
    pub bytes: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
}

/// Merges sessions' batches into per-interval and total histograms, one [`OpAcc`] an
/// operation (the accumulator the watch fills too; its parts become results through
/// [`OpResult::of_parts`]). Lives off the hot path (typically in the thread that also drives
/// progress display).
pub(crate) struct Collector {
    ops: OpSet,
    rx: Receiver<Batch>,
    interval: Duration,
    pos: Vec<u64>,
    accs: Vec<OpAcc>,
    /// Intervals with data not yet closed (ascending).
    pending: std::collections::BTreeSet<u64>,
    closed_upto: u64,
    /// Operations in the closed intervals.
    closed_count: u64,
    /// Closed intervals not yet taken by [`Collector::take_closed`].
    unread: VecDeque<IntervalSnapshot>,
    /// Scratch for an interval's latency percentiles.
    merged: Histogram<u64>,
}

/// Create `sessions` recorders of the operations `ops`, sharing one collector. Latencies of
/// completions at or after `base` are recorded, in intervals of `interval`.
pub(crate) fn recorders(
    ops: OpSet,
    sessions: usize,
    base: Instant,
    interval: Duration,
) -> (Vec<SessionRecorder>, Collector) {
    assert!(!interval.is_zero(), "interval must be positive");
    let (tx, rx) = channel();
    let n = ops.len();
    let scratch = Arc::new(Mutex::new(None));
    let recs = (0..sessions)
        .map(|s| SessionRecorder {
            session: s as u32,
            ops,
            base,
            interval,
            cur: 0,
            boundary: base + interval,
            end: None,
            hists: (0..n).map(|_| None).collect(),
            bytes: vec![0; n],
            errors: vec![0; n],
            dirty: false,
            warmup_ops: 0,
            late_ops: 0,
            total: Vec::new(),
            tx: tx.clone(),
            scratch: scratch.clone(),
        })
        .collect();
    let col = Collector {
        ops,
        rx,
        interval,
        pos: vec![0; sessions],
        accs: (0..n).map(|_| OpAcc::new()).collect(),
        pending: Default::default(),
        closed_upto: 0,
        closed_count: 0,
        unread: VecDeque::new(),
        merged: new_histogram(),
    };
    (recs, col)
}

impl Collector {
    /// Process incoming batches for up to `timeout`. Returns true while some session is live.
    pub(crate) fn poll(&mut self, timeout: Duration) -> bool {
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
    pub(crate) fn take_closed(&mut self) -> impl Iterator<Item = IntervalSnapshot> + '_ {
        self.unread.drain(..)
    }

    /// Total completed operations so far (closed intervals only).
    pub(crate) fn total_count(&self) -> u64 {
        self.closed_count
    }

    fn take(&mut self, b: Batch) {
        if !b.data.is_empty() {
            self.pending.insert(b.interval);
            for d in b.data {
                let counts = d.counts.into_iter().map(|(v, c)| (v, u64::from(c)));
                // An open interval is never decoded, so this cannot fail.
                let _ = self.accs[d.op as usize].record_counts(
                    b.interval as usize,
                    counts,
                    d.bytes,
                    d.errors,
                );
            }
        }
        self.pos[b.session as usize] = b.next;
    }

    /// Close the intervals every session has moved past (`all`: every one).
    fn close_ready(&mut self, all: bool) {
        let limit = if all {
            u64::MAX
        } else {
            *self.pos.iter().min().unwrap_or(&0)
        };
        let Some(&last) = self.pending.range(..limit).next_back() else {
            return;
        };
        // Gaps (no completion anywhere) become empty intervals so time stays continuous.
        for k in self.closed_upto..=last {
            self.snapshot(k);
        }
        self.pending = self.pending.split_off(&(last + 1));
        self.closed_upto = last + 1;
        for acc in &mut self.accs {
            acc.close_before(last as usize + 1);
        }
    }

    /// The live-progress view of interval `k`, before it closes.
    fn snapshot(&mut self, k: u64) {
        let mut snap = IntervalSnapshot {
            index: k,
            count: 0,
            flushes: 0,
            bytes: 0,
            p50_ns: 0,
            p99_ns: 0,
        };
        self.merged.reset();
        for (op, acc) in self.ops.ops().iter().zip(&mut self.accs) {
            let Some((h, bytes)) = acc.open_at(k as usize) else {
                continue;
            };
            snap.count += h.len();
            snap.bytes += bytes;
            if op.flush {
                snap.flushes += h.len();
            } else {
                let _ = self.merged.add(h);
            }
        }
        if !self.merged.is_empty() {
            snap.p50_ns = self.merged.value_at_quantile(0.5);
            snap.p99_ns = self.merged.value_at_quantile(0.99);
        }
        self.closed_count += snap.count;
        self.unread.push_back(snap);
    }

    /// Drain every remaining batch (all recorders must have been dropped) and build the
    /// results of the operations that completed or failed at least once, in the set's order.
    /// `measured_s` is the measured duration (trims the last interval's length).
    pub(crate) fn finish(mut self, measured_s: f64) -> Vec<OpResult> {
        while let Ok(b) = self.rx.recv() {
            self.take(b);
        }
        self.close_ready(true);
        let dur = self.interval.as_secs_f64();
        let n = self.closed_upto as usize;
        let mut spans: Vec<(f64, f64)> = (0..n).map(|k| (k as f64 * dur, dur)).collect();
        // Intervals past the measured end carry no data by construction; trim lengths.
        if let Some(last) = spans.last_mut() {
            let end = last.0 + last.1;
            if measured_s > last.0 && measured_s < end {
                last.1 = measured_s - last.0;
            }
        }
        let mut ops = Vec::new();
        for (op, acc) in self.ops.ops().iter().zip(&mut self.accs) {
            // (Histograms encoded by this process always decode: an error here cannot come.)
            let Ok(parts) = acc.parts(0, n) else {
                continue;
            };
            if parts.total.is_empty() && parts.errors == 0 {
                continue;
            }
            // A few milliseconds past the last boundary is not an interval: `of_parts` folds
            // it into the one before (its real length kept, so rates stay count / real
            // duration).
            if let Ok(r) = OpResult::of_parts(op.name(), parts, &spans) {
                ops.push(r);
            }
        }
        ops
    }
}

/// Per-session summaries, gathered from recorders before they are dropped.
pub(crate) fn session_summary(rec: &SessionRecorder) -> SessionSummary {
    session_summary_of(std::slice::from_ref(rec))
}

/// [`session_summary`] of a session's recorders together (one per target of a run over
/// several, each with its share of the session's operations).
pub(crate) fn session_summary_of(recs: &[SessionRecorder]) -> SessionSummary {
    let Some(rec) = recs.first() else {
        return SessionSummary::default();
    };
    // One scratch histogram per set of recorders: sessions ending together do not each
    // allocate a full one.
    let mut guard = rec.scratch.lock().unwrap_or_else(|e| e.into_inner());
    let t = guard.get_or_insert_with(new_histogram);
    t.reset();
    for rec in recs {
        for &(v, c) in &rec.total {
            t.saturating_record_n(v, c);
        }
        for h in rec.hists.iter().flatten() {
            for v in h.iter_recorded() {
                t.saturating_record_n(v.value_iterated_to(), u64::from(v.count_at_value()));
            }
        }
    }
    let s = LatencySummary::of(t);
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
    use crate::histogram::record_ns;

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
        // The planned end closes the window: what completes at or after it is not recorded.
        r.set_end(Some(base + Duration::from_millis(48)));
        r.record(READ, base, base + Duration::from_millis(47), 1); // interval 4
        r.record(READ, base, base + Duration::from_millis(48), 1); // at the end
        r.record(READ, base, base + Duration::from_millis(90), 1); // past it
        assert_eq!(r.late_ops(), 2);
        drop(recs);
        let ops = col.finish(0.05);
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].count, 3);
        let counts: Vec<u64> = ops[0].intervals.iter().map(|i| i.count).collect();
        assert_eq!(counts, vec![1, 0, 0, 0, 2]);
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

    #[test]
    fn interval_counts_are_handed_over_before_they_can_overflow() {
        // The cap is the counter's own maximum: no bucket can count past it.
        const _: () = assert!(COUNT_CAP == Count::MAX as u64);
        const N: u64 = 3 * COUNT_CAP + 17;
        let base = Instant::now();
        let (mut recs, col) = recorders(IO_OPS, 1, base, Duration::from_secs(60));
        let r = &mut recs[0];
        let at = base + Duration::from_millis(1);
        // Every value in one bucket of one interval: a counter that overflowed or saturated
        // would lose records.
        for _ in 0..N {
            r.record(READ, at - Duration::from_nanos(700), at, 8);
            let held = r.hists[0].as_ref().map_or(0, |h| h.len());
            assert!(held <= COUNT_CAP, "an interval histogram held {held}");
        }
        assert!(
            r.hists[1].is_none() && r.hists[2].is_none(),
            "no write/sync histograms"
        );
        let s = session_summary(r);
        assert_eq!((s.count, s.p99_ns), (N, 700));
        drop(recs);
        let ops = col.finish(0.002);
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].intervals.len(), 1, "all in one interval");
        assert_eq!(ops[0].intervals[0].count, N);
        assert_eq!(ops[0].intervals[0].bytes, 8 * N);
        let h = ops[0].intervals[0].hist.decode().unwrap();
        assert_eq!(h.count_at(700), N, "one bucket holds every record exactly");
    }

    #[test]
    fn session_summaries_are_exact_across_intervals() {
        let base = Instant::now();
        let (mut recs, col) = recorders(IO_OPS, 2, base, Duration::from_millis(5));
        let mut refs = [new_histogram(), new_histogram()];
        for step in 0..400u64 {
            for (s, r) in recs.iter_mut().enumerate() {
                let lat = 100 + (step * 7919 + s as u64 * 104_729) % 3_000_000;
                let end = base + Duration::from_micros(step * 100);
                r.record(
                    if step % 3 == 0 { WRITE } else { READ },
                    end - Duration::from_nanos(lat),
                    end,
                    0,
                );
                record_ns(&mut refs[s], lat);
            }
        }
        for (r, h) in recs.iter().zip(&refs) {
            let (s, want) = (session_summary(r), LatencySummary::of(h));
            assert_eq!(
                (s.count, s.mean_ns, s.p99_ns),
                (want.count, want.mean_ns, want.p99_ns)
            );
        }
        drop(recs);
        let ops = col.finish(0.04);
        assert_eq!(ops.iter().map(|o| o.count).sum::<u64>(), 800);
    }
}
