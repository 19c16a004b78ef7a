//! One op's per-interval latency histograms while they are recorded out of order (a BPF
//! watch's events, its own-process `--watch`): the accumulator yields the parts, and results
//! builds its `Interval`s and `OpResult` from them (`OpResult::of_parts`), so this sits on the
//! ground floor with the histogram it fills.
//!
//! A decoded histogram covering 1 ns to an hour at three significant digits is about 270 KB, so
//! only the intervals still receiving events are kept decoded ("open"); once the watch has moved
//! past an interval it is closed: encoded into the compact [`Hist`] the results file stores, with
//! its count, bytes and errors. A late event for a closed interval reopens it (decode, record,
//! close again), so nothing is dropped. Memory is then the size of the results, not 270 KB per op
//! per interval (a 10 s whole-host watch at 10 ms intervals reached 6 GB before this).

use anyhow::Result;
use hdrhistogram::Histogram;

use super::{new_histogram, record_ns, Hist};

/// What an [`OpAcc`] holds over a range of intervals: the whole range's histogram, bytes and
/// errors, and each interval's encoded histogram, count and bytes (`OpResult::of_parts` makes
/// them results).
#[derive(Debug)]
pub(crate) struct Parts {
    pub(crate) total: Histogram<u64>,
    pub(crate) bytes: u64,
    pub(crate) errors: u64,
    /// Per interval: (histogram, count, bytes).
    pub(crate) intervals: Vec<(Hist, u64, u64)>,
}

/// An interval still receiving events: its histogram, bytes and errors.
struct Open {
    /// Every value recorded but those still in `pending`.
    hist: Histogram<u64>,
    /// Values recorded since the last flush into `hist`: recorded there in ascending order,
    /// [`PENDING`] at a time (or when `hist` is read, in place), so that a record is an append rather
    /// than an increment at a random place of a 270 KB array, which missed the cache for
    /// nearly every event of a watch (a 3-digit histogram gives most latencies a counter of
    /// their own). A histogram's counts do not depend on the order of its records.
    pending: Vec<u64>,
    bytes: u64,
    errors: u64,
}

/// Values an open interval holds before they are recorded into its histogram (32 KiB).
const PENDING: usize = 4096;

impl Open {
    fn new(hist: Histogram<u64>, bytes: u64, errors: u64) -> Box<Open> {
        Box::new(Open {
            hist,
            pending: Vec::new(),
            bytes,
            errors,
        })
    }

    #[inline]
    fn record(&mut self, ns: u64) {
        self.pending.push(ns);
        if self.pending.len() >= PENDING {
            self.flush();
        }
    }

    /// Record the pending values into the histogram.
    fn flush(&mut self) {
        self.pending.sort_unstable();
        for &v in &self.pending {
            record_ns(&mut self.hist, v);
        }
        self.pending.clear();
    }

    /// The histogram of every value recorded (the pending ones recorded into it first, rather
    /// than into a copy of its 270 KB).
    fn hist(&mut self) -> &Histogram<u64> {
        if !self.pending.is_empty() {
            self.flush();
        }
        &self.hist
    }

    /// The histogram of every value recorded, flushed.
    fn into_hist(mut self) -> Histogram<u64> {
        self.flush();
        self.hist
    }
}

/// One interval of one op.
enum Slot {
    Empty,
    Open(Box<Open>),
    Closed {
        hist: Hist,
        count: u64,
        bytes: u64,
        errors: u64,
    },
}

/// One op's intervals (see the module doc).
pub(crate) struct OpAcc {
    slots: Vec<Slot>,
    /// Indices of the open slots.
    open: Vec<usize>,
    /// The closed intervals' histograms added up (allocated at the first close), so that the
    /// parts of every interval need not decode the closed ones again.
    closed_total: Option<Histogram<u64>>,
}

impl OpAcc {
    pub(crate) fn new() -> OpAcc {
        OpAcc {
            slots: Vec::new(),
            open: Vec::new(),
            closed_total: None,
        }
    }

    /// The open interval `k`, opened (or reopened) when needed.
    fn open_slot(&mut self, k: usize) -> Result<&mut Open> {
        // Already open (nearly every event): no slot moved out and back.
        if matches!(self.slots.get(k), Some(Slot::Open(_))) {
            match &mut self.slots[k] {
                Slot::Open(o) => return Ok(o),
                _ => unreachable!("the slot is open"),
            }
        }
        if self.slots.len() <= k {
            self.slots.resize_with(k + 1, || Slot::Empty);
        }
        let reopened = match std::mem::replace(&mut self.slots[k], Slot::Empty) {
            Slot::Open(o) => o,
            Slot::Empty => {
                self.open.push(k);
                Open::new(new_histogram(), 0, 0)
            }
            Slot::Closed {
                hist,
                bytes,
                errors,
                ..
            } => {
                self.open.push(k);
                let hist = hist.decode()?;
                if let Some(t) = self.closed_total.as_mut() {
                    t.subtract(&hist)
                        .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
                }
                Open::new(hist, bytes, errors)
            }
        };
        self.slots[k] = Slot::Open(reopened);
        match &mut self.slots[k] {
            Slot::Open(o) => Ok(o),
            _ => unreachable!("the slot was just opened"),
        }
    }

    /// Record one completion (or, with `error`, one failed operation) in interval `k`.
    pub(crate) fn record(&mut self, k: usize, ns: u64, bytes: u64, error: bool) -> Result<()> {
        let o = self.open_slot(k)?;
        if error {
            o.errors += 1;
        } else {
            o.record(ns);
            o.bytes += bytes;
        }
        Ok(())
    }

    /// Record what one source counted in interval `k`: `(value, count)` pairs, bytes and
    /// errors (the recorder's sessions hand their intervals over so).
    pub(crate) fn record_counts(
        &mut self,
        k: usize,
        counts: impl IntoIterator<Item = (u64, u64)>,
        bytes: u64,
        errors: u64,
    ) -> Result<()> {
        let o = self.open_slot(k)?;
        for (v, n) in counts {
            o.hist.saturating_record_n(v, n);
        }
        o.bytes += bytes;
        o.errors += errors;
        Ok(())
    }

    /// The histogram and bytes of interval `k` while it is open (`None` once closed, or when
    /// nothing was recorded in it).
    pub(crate) fn open_at(&mut self, k: usize) -> Option<(&Histogram<u64>, u64)> {
        match self.slots.get_mut(k) {
            Some(Slot::Open(o)) => {
                let bytes = o.bytes;
                Some((o.hist(), bytes))
            }
            _ => None,
        }
    }

    /// Close every open interval before `k`.
    pub(crate) fn close_before(&mut self, k: usize) {
        let slots = &mut self.slots;
        let total = &mut self.closed_total;
        self.open.retain(|&i| {
            if i >= k {
                return true;
            }
            if let Slot::Open(mut o) = std::mem::replace(&mut slots[i], Slot::Empty) {
                o.flush();
                // Same layout, so adding cannot fail.
                let _ = total.get_or_insert_with(new_histogram).add(&o.hist);
                slots[i] = Slot::Closed {
                    hist: Hist::encode(&o.hist),
                    count: o.hist.len(),
                    bytes: o.bytes,
                    errors: o.errors,
                };
            }
            false
        });
    }

    /// Intervals recorded so far (the last one with any event, plus one).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.len()
    }

    /// Fold every interval from `n` on into interval `n - 1` (a stub tail past the end of a
    /// run's grid), leaving out those for which `keep(k)` is false.
    pub(crate) fn fold_from(&mut self, n: usize, keep: impl Fn(usize) -> bool) -> Result<()> {
        let n = n.max(1);
        while self.slots.len() > n {
            let k = self.slots.len() - 1;
            let tail = self.slots.pop().unwrap_or(Slot::Empty);
            self.open.retain(|&i| i != k);
            let (hist, bytes, errors) = match tail {
                Slot::Empty => continue,
                Slot::Open(o) => {
                    let (bytes, errors) = (o.bytes, o.errors);
                    (o.into_hist(), bytes, errors)
                }
                Slot::Closed {
                    hist,
                    bytes,
                    errors,
                    ..
                } => {
                    let hist = hist.decode()?;
                    if let Some(t) = self.closed_total.as_mut() {
                        t.subtract(&hist)
                            .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
                    }
                    (hist, bytes, errors)
                }
            };
            if !keep(k) {
                continue;
            }
            let into = self.open_slot(n - 1)?;
            into.hist
                .add(&hist)
                .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
            into.bytes += bytes;
            into.errors += errors;
        }
        Ok(())
    }

    /// Merge interval `i + 1` into interval `i`, the later ones moving down by one (a long
    /// watch rolling up its older intervals): the sums stay exact, every count in one interval.
    pub(crate) fn merge_next(&mut self, i: usize) -> Result<()> {
        if i + 1 >= self.slots.len() {
            return Ok(());
        }
        let next = self.slots.remove(i + 1);
        for o in self.open.iter_mut() {
            if *o > i {
                *o -= 1;
            }
        }
        self.open.sort_unstable();
        self.open.dedup();
        let (hist, count, bytes, errors) = match next {
            Slot::Empty => return Ok(()),
            Slot::Open(mut o) => {
                // Moved down: interval i is open now, with what it held added below.
                if !matches!(self.slots[i], Slot::Empty) {
                    o.flush();
                    let into = self.open_slot(i)?;
                    into.hist
                        .add(&o.hist)
                        .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
                    into.bytes += o.bytes;
                    into.errors += o.errors;
                    self.open.sort_unstable();
                    self.open.dedup();
                } else {
                    self.slots[i] = Slot::Open(o);
                }
                return Ok(());
            }
            Slot::Closed {
                hist,
                count,
                bytes,
                errors,
            } => (hist, count, bytes, errors),
        };
        match &mut self.slots[i] {
            Slot::Empty => {
                self.slots[i] = Slot::Closed {
                    hist,
                    count,
                    bytes,
                    errors,
                };
            }
            Slot::Closed {
                hist: h,
                count: c,
                bytes: b,
                errors: e,
            } => {
                // Both closed: their sum is already in the closed total.
                let mut sum = h.decode()?;
                hist.add_to(&mut sum)?;
                *h = Hist::encode(&sum);
                *c += count;
                *b += bytes;
                *e += errors;
            }
            Slot::Open(o) => {
                hist.add_to(&mut o.hist)?;
                o.bytes += bytes;
                o.errors += errors;
                if let Some(t) = self.closed_total.as_mut() {
                    t.subtract(&hist.decode()?)
                        .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
                }
            }
        }
        Ok(())
    }

    /// The parts of the `n` intervals `from..from + n`. Closing happens on a copy: `self` can
    /// go on recording (its open intervals' pending values are recorded into their histograms).
    pub(crate) fn parts(&mut self, from: usize, n: usize) -> Result<Parts> {
        let empty = Hist::encode(&new_histogram());
        // Every interval recorded: the closed ones are already added up.
        let whole = from == 0 && n >= self.slots.len();
        let mut total = match (&self.closed_total, whole) {
            (Some(t), true) => t.clone(),
            _ => new_histogram(),
        };
        let add_closed = !whole || self.closed_total.is_none();
        let (mut bytes, mut errors) = (0, 0);
        let mut ivs = Vec::with_capacity(n);
        for k in from..from + n {
            ivs.push(match self.slots.get_mut(k) {
                Some(Slot::Open(o)) => {
                    let (b, failed) = (o.bytes, o.errors);
                    let h = o.hist();
                    total
                        .add(h)
                        .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
                    bytes += b;
                    errors += failed;
                    (Hist::encode(h), h.len(), b)
                }
                Some(Slot::Closed {
                    hist,
                    count,
                    bytes: b,
                    errors: e,
                }) => {
                    if add_closed {
                        hist.add_to(&mut total)?;
                    }
                    bytes += *b;
                    errors += *e;
                    (hist.clone(), *count, *b)
                }
                Some(Slot::Empty) | None => (empty.clone(), 0, 0),
            });
        }
        Ok(Parts {
            total,
            bytes,
            errors,
            intervals: ivs,
        })
    }

    /// The histogram of interval `k` (empty when nothing was recorded in it).
    pub(crate) fn hist_at(&mut self, k: usize) -> Result<Histogram<u64>> {
        Ok(match self.slots.get_mut(k) {
            Some(Slot::Open(o)) => o.hist().clone(),
            Some(Slot::Closed { hist, .. }) => hist.decode()?,
            _ => new_histogram(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closing_keeps_every_count_and_a_late_event_reopens() {
        let mut open = OpAcc::new();
        let mut closing = OpAcc::new();
        for k in 0..50usize {
            for v in 0..(k as u64 * 7 + 1) {
                open.record(k, 1000 + v * 13, 8192, false).unwrap();
                closing.record(k, 1000 + v * 13, 8192, false).unwrap();
            }
            closing.record(k, 0, 0, true).unwrap();
            open.record(k, 0, 0, true).unwrap();
            closing.close_before(k.saturating_sub(1));
        }
        // A late event for interval 3, long closed.
        open.record(3, 5_000_000, 4096, false).unwrap();
        closing.record(3, 5_000_000, 4096, false).unwrap();
        closing.close_before(usize::MAX);
        assert!(closing.open.is_empty());
        let a = open.parts(0, 50).unwrap();
        let b = closing.parts(0, 50).unwrap();
        assert_eq!(a.intervals, b.intervals);
        assert_eq!(a.total, b.total);
        assert_eq!((a.bytes, a.errors), (b.bytes, b.errors));
        assert_eq!(a.errors, 50);
        assert_eq!(b.intervals[3].1, 3 * 7 + 2);
        // The parts add up: the intervals' counts and bytes are the whole's.
        let n: u64 = b.intervals.iter().map(|i| i.1).sum();
        let bytes: u64 = b.intervals.iter().map(|i| i.2).sum();
        assert_eq!((n, bytes), (b.total.len(), b.bytes));
        assert_eq!(
            closing.hist_at(3).unwrap().max(),
            open.hist_at(3).unwrap().max()
        );
    }

    #[test]
    fn values_held_back_are_in_every_view_of_an_open_interval() {
        // More values than are held back before a flush, in no order, over a wide range: the
        // open interval read before and after closing, merged and folded, holds exactly what
        // recording each value straight into a histogram gives.
        let n = 2 * PENDING as u64 + 123;
        let value = |i: u64| (i * 7919 % 100_003) * 1_000 + i % 977;
        let mut direct = [new_histogram(), new_histogram()];
        let mut acc = OpAcc::new();
        for i in 0..n {
            let k = (i % 2) as usize;
            acc.record(k, value(i), 512, false).unwrap();
            record_ns(&mut direct[k], value(i));
        }
        acc.record(1, 0, 0, true).unwrap();
        let (h, bytes) = acc.open_at(0).unwrap();
        assert_eq!((h, bytes), (&direct[0], 512 * direct[0].len()));
        assert_eq!(acc.hist_at(1).unwrap(), direct[1]);
        let open = acc.parts(0, 2).unwrap();
        let mut whole = direct[0].clone();
        whole.add(&direct[1]).unwrap();
        assert_eq!(open.total, whole);
        assert_eq!((open.bytes, open.errors), (512 * n, 1));
        assert_eq!(open.intervals[1].1, direct[1].len());
        assert_eq!(open.intervals[0].0.decode().unwrap(), direct[0]);
        // Closed: the same parts.
        let mut closed = OpAcc::new();
        for i in 0..n {
            closed
                .record((i % 2) as usize, value(i), 512, false)
                .unwrap();
        }
        closed.record(1, 0, 0, true).unwrap();
        closed.close_before(2);
        let c = closed.parts(0, 2).unwrap();
        assert_eq!((c.total, c.intervals), (open.total.clone(), open.intervals));
        // Merged while open, then folded: every value in one interval.
        acc.merge_next(0).unwrap();
        assert_eq!(acc.hist_at(0).unwrap(), whole);
        acc.record(1, 42, 0, false).unwrap();
        acc.fold_from(1, |_| true).unwrap();
        whole.record(42).unwrap();
        assert_eq!(acc.parts(0, 1).unwrap().total, whole);
    }

    #[test]
    fn merging_intervals_keeps_every_count_in_one() {
        // Closed into closed, closed into open, open into closed, empty either side.
        let mut acc = OpAcc::new();
        let mut whole = new_histogram();
        for k in 0..8usize {
            if k == 2 || k == 5 {
                continue;
            }
            for v in 0..(k as u64 + 1) * 10 {
                let ns = 1000 * (k as u64 + 1) + v;
                acc.record(k, ns, 4096, false).unwrap();
                record_ns(&mut whole, ns);
            }
            acc.record(k, 0, 0, true).unwrap();
        }
        acc.close_before(4);
        // 0, 1 and 3 closed, 4, 6 and 7 open, 2 and 5 empty: closed into closed (0 + 1),
        // closed into empty (3 into 2), open into reopened closed (4 into 3), open into empty.
        for i in [0, 1, 1, 2] {
            acc.merge_next(i).unwrap();
        }
        assert_eq!(acc.len(), 4);
        let p = acc.parts(0, 4).unwrap();
        assert_eq!(p.total, whole);
        let counts: Vec<u64> = p.intervals.iter().map(|i| i.1).collect();
        assert_eq!(counts, vec![10 + 20, 40 + 50, 70, 80]);
        assert_eq!(p.errors, 6);
        assert_eq!(p.bytes, 4096 * whole.len());
        acc.close_before(usize::MAX);
        let q = acc.parts(0, 4).unwrap();
        assert_eq!((q.total, q.intervals), (p.total, p.intervals));
    }

    #[test]
    fn a_tail_past_the_grid_folds_into_its_last_interval() {
        // The tail open, or closed (then the closed intervals' running total gives up what
        // folds or is left out).
        for closed in [4, 6] {
            let mut acc = OpAcc::new();
            for k in 0..6usize {
                acc.record(k, 1000 * (k as u64 + 1), 1, false).unwrap();
            }
            acc.close_before(closed);
            // Intervals 4 and 5 fold into 3, except 5 (outside the run).
            acc.fold_from(4, |k| k < 5).unwrap();
            assert_eq!(acc.len(), 4);
            let r = acc.parts(0, 4).unwrap();
            assert_eq!(r.total.len(), 5, "closed before {closed}");
            assert_eq!(r.total.max(), acc.hist_at(3).unwrap().max());
            assert_eq!(r.intervals[3].1, 2);
            assert_eq!(r.bytes, 5);
            // A range of intervals adds only its own.
            assert_eq!(acc.parts(1, 2).unwrap().total.len(), 2);
        }
    }
}
