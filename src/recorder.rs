//! Per-session latency recording and the off-hot-path merge into per-interval histograms.
//!
//! Data flow: each session thread owns a [`SessionRecorder`]. On every completed I/O it records
//! one latency into its own HdrHistogram for the op (no lock, no allocation, no syscall). When
//! a completion falls past the current interval boundary, the session hands its filled
//! histograms to the [`Collector`] over a channel (once per interval, not per I/O) and takes
//! cleared ones from a shared pool. The collector merges sessions' batches per interval exactly
//! (HdrHistogram addition), closes an interval once every session has moved past it, encodes it
//! and adds it to the run totals. The result is one [`OpResult`] per op whose interval counts
//! sum exactly to its total.
//!
//! Latency is attributed to the interval in which the I/O *completed*; completions before the
//! measurement base (warm-up) are counted but not recorded.

use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::results::{
    new_histogram, record_ns, Hist, Interval, LatencySummary, OpResult, SessionSummary,
};

/// Operation types recorded by the engine and the database shims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Read = 0,
    Write = 1,
    /// A flush: fdatasync/fsync, `log file sync`-shaped.
    Sync = 2,
}

/// Number of op types.
pub const OPS: usize = 3;

impl Op {
    pub const ALL: [Op; OPS] = [Op::Read, Op::Write, Op::Sync];
    /// Name used in results.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Sync => "sync",
        }
    }
}

type HistSet = [Histogram<u64>; OPS];

fn new_set() -> HistSet {
    [new_histogram(), new_histogram(), new_histogram()]
}

/// One session's data for one interval, sent to the collector.
struct Batch {
    session: u32,
    /// Interval the data belongs to (`None` for a session's final "done" message with no data).
    interval: Option<u64>,
    /// Next interval the session will record into (`u64::MAX` when the session has finished).
    next: u64,
    hists: Option<HistSet>,
    bytes: [u64; OPS],
    errors: [u64; OPS],
}

/// Shared pool of cleared histogram sets so interval switches do not allocate.
type Pool = Arc<Mutex<Vec<HistSet>>>;

/// Records latencies of one session. Owned by exactly one thread.
pub struct SessionRecorder {
    session: u32,
    base: Instant,
    interval: Duration,
    cur: u64,
    boundary: Instant,
    hists: HistSet,
    bytes: [u64; OPS],
    errors: [u64; OPS],
    dirty: bool,
    warmup_ops: u64,
    total: Histogram<u64>,
    tx: Sender<Batch>,
    pool: Pool,
}

impl SessionRecorder {
    /// Record one completed operation. `start` is when it was issued (or, for open-loop runs,
    /// when it was meant to be issued); `end` is when its completion was reaped.
    #[inline]
    pub fn record(&mut self, op: Op, start: Instant, end: Instant, bytes: u64) {
        if end < self.base {
            self.warmup_ops += 1;
            return;
        }
        if end >= self.boundary {
            self.advance(end);
        }
        let ns = end.saturating_duration_since(start).as_nanos() as u64;
        record_ns(&mut self.hists[op as usize], ns);
        self.bytes[op as usize] += bytes;
        self.dirty = true;
    }

    /// Count a failed operation (not timed).
    #[inline]
    pub fn error(&mut self, op: Op) {
        self.errors[op as usize] += 1;
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
            let full = std::mem::replace(&mut self.hists, fresh.unwrap_or_else(new_set));
            for h in &full {
                let _ = self.total.add(h);
            }
            Some(full)
        } else {
            None
        };
        let _ = self.tx.send(Batch {
            session: self.session,
            interval: if data.is_some() { Some(self.cur) } else { None },
            next,
            hists: data,
            bytes: std::mem::take(&mut self.bytes),
            errors: std::mem::take(&mut self.errors),
        });
        self.dirty = false;
    }
}

impl Drop for SessionRecorder {
    fn drop(&mut self) {
        self.send(u64::MAX);
    }
}

/// A closed interval, for live progress.
#[derive(Clone, Debug)]
pub struct IntervalSnapshot {
    pub index: u64,
    pub count: u64,
    pub bytes: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
}

struct Open {
    hists: HistSet,
    bytes: [u64; OPS],
}

/// Merges sessions' batches into per-interval and total histograms. Lives off the hot path
/// (typically in the thread that also drives progress display).
pub struct Collector {
    rx: Receiver<Batch>,
    pool: Pool,
    interval: Duration,
    pos: Vec<u64>,
    open: BTreeMap<u64, Open>,
    closed_upto: u64,
    totals: HistSet,
    bytes: [u64; OPS],
    errors: [u64; OPS],
    intervals: [Vec<Interval>; OPS],
    last: Option<IntervalSnapshot>,
}

/// Create `sessions` recorders sharing one collector. Latencies of completions at or after
/// `base` are recorded, in intervals of `interval`.
pub fn recorders(
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
            base,
            interval,
            cur: 0,
            boundary: base + interval,
            hists: new_set(),
            bytes: [0; OPS],
            errors: [0; OPS],
            dirty: false,
            warmup_ops: 0,
            total: new_histogram(),
            tx: tx.clone(),
            pool: pool.clone(),
        })
        .collect();
    let col = Collector {
        rx,
        pool,
        interval,
        pos: vec![0; sessions],
        open: BTreeMap::new(),
        closed_upto: 0,
        totals: new_set(),
        bytes: [0; OPS],
        errors: [0; OPS],
        intervals: [Vec::new(), Vec::new(), Vec::new()],
        last: None,
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

    /// The most recently closed interval (for progress display).
    pub fn last_interval(&self) -> Option<&IntervalSnapshot> {
        self.last.as_ref()
    }

    /// Total completed operations so far (closed intervals only).
    pub fn total_count(&self) -> u64 {
        self.totals.iter().map(|h| h.len()).sum()
    }

    fn take(&mut self, b: Batch) {
        if let (Some(k), Some(h)) = (b.interval, b.hists) {
            let open = self.open.entry(k).or_insert_with(|| Open {
                hists: new_set(),
                bytes: [0; OPS],
            });
            for (i, hi) in h.iter().enumerate() {
                let _ = open.hists[i].add(hi);
                open.bytes[i] += b.bytes[i];
            }
            let mut h = h;
            for x in h.iter_mut() {
                x.reset();
            }
            if let Ok(mut p) = self.pool.lock() {
                p.push(h);
            }
        }
        for i in 0..OPS {
            self.errors[i] += b.errors[i];
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

    fn close_interval(&mut self, k: u64, o: Open) {
        // Gaps (no completion anywhere) become empty intervals so time stays continuous.
        while self.closed_upto < k {
            let gap = self.closed_upto;
            self.push_interval(gap, None);
        }
        self.push_interval(k, Some(o));
    }

    fn push_interval(&mut self, k: u64, o: Option<Open>) {
        let dur = self.interval.as_secs_f64();
        let mut snap = IntervalSnapshot {
            index: k,
            count: 0,
            bytes: 0,
            p50_ns: 0,
            p99_ns: 0,
        };
        let mut merged = new_histogram();
        for i in 0..OPS {
            let (hist, bytes) = match &o {
                Some(o) => (Hist::encode(&o.hists[i]), o.bytes[i]),
                None => (Hist::encode(&new_histogram()), 0),
            };
            let count = o.as_ref().map(|o| o.hists[i].len()).unwrap_or(0);
            if let Some(o) = &o {
                let _ = self.totals[i].add(&o.hists[i]);
                if i != Op::Sync as usize {
                    let _ = merged.add(&o.hists[i]);
                }
            }
            self.bytes[i] += bytes;
            snap.count += count;
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
        self.last = Some(snap);
    }

    /// Drain every remaining batch (all recorders must have been dropped) and build the per-op
    /// results. `measured_s` is the measured duration (trims the last interval's length).
    pub fn finish(mut self, measured_s: f64) -> Vec<OpResult> {
        while let Ok(b) = self.rx.recv() {
            self.take(b);
        }
        self.close_ready(true);
        let mut ops = Vec::new();
        for op in Op::ALL {
            let i = op as usize;
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
            if self.totals[i].is_empty() && self.errors[i] == 0 {
                continue;
            }
            let mut r = OpResult::new(op.name(), &self.totals[i], self.bytes[i], ivs);
            r.errors = self.errors[i];
            ops.push(r);
        }
        ops
    }
}

/// Per-session summaries, gathered from recorders before they are dropped.
pub fn session_summary(rec: &SessionRecorder) -> SessionSummary {
    let mut t = rec.total.clone();
    for h in &rec.hists {
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
        let (mut recs, mut col) = recorders(3, base, iv);
        let mut reference = new_histogram();
        let mut n = 0u64;
        for step in 0..200u64 {
            for (s, r) in recs.iter_mut().enumerate() {
                let lat = 1_000 + step * 37 + s as u64 * 1_000_003;
                let end = base + Duration::from_micros(step * 500 + s as u64);
                let start = end - Duration::from_nanos(lat);
                r.record(if s == 1 { Op::Write } else { Op::Read }, start, end, 8192);
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
        let (mut recs, col) = recorders(1, base, Duration::from_millis(10));
        let r = &mut recs[0];
        r.record(Op::Read, t0, t0 + Duration::from_millis(10), 1); // warm-up
        r.record(Op::Read, base, base + Duration::from_millis(1), 1); // interval 0
        r.record(Op::Read, base, base + Duration::from_millis(45), 1); // interval 4
        assert_eq!(r.warmup_ops(), 1);
        drop(recs);
        let ops = col.finish(0.05);
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].count, 2);
        let counts: Vec<u64> = ops[0].intervals.iter().map(|i| i.count).collect();
        assert_eq!(counts, vec![1, 0, 0, 0, 1]);
    }
}
