//! Counts added by index and sparse sums: a run's totals counted by index ([`TotalCounts`]),
//! many encodings added into one array ([`DenseCounts`]), sparse `(value, count)` lists summed
//! in place ([`add_sparse`]) and the quantiles HdrHistogram would give for them
//! ([`sparse_quantile`]).

use hdrhistogram::Histogram;

use super::{index_of, new_histogram, standard_reference, value_of, Hist, V2Scan, HIST_MAX_NS};

/// Latencies counted by HdrHistogram counts index in the layout of [`new_histogram`] (the
/// standard layout of [`index_of`]), to be added into such a histogram later: one increment
/// per value rather than a call of `Histogram::saturating_record`, with the same result (a
/// value beyond the counts is clamped to the highest trackable value, as that does; a value is
/// added back as the lowest of its bucket, which every figure read from the histogram treats
/// alike).
#[derive(Default)]
pub(crate) struct TotalCounts {
    /// Empty until the first value.
    counts: Vec<u64>,
}

impl TotalCounts {
    #[inline]
    pub(crate) fn record(&mut self, v: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; new_histogram().distinct_values()];
        }
        let i = index_of(v);
        let i = if i < self.counts.len() {
            i
        } else {
            index_of(HIST_MAX_NS)
        };
        self.counts[i] += 1;
    }

    /// Add the counted values into `h` (of the layout of [`new_histogram`]) and clear them.
    pub(crate) fn add_into(&mut self, h: &mut Histogram<u64>) {
        for (i, c) in self.counts.iter_mut().enumerate() {
            if *c != 0 {
                let _ = h.record_n(value_of(i), std::mem::take(c));
            }
        }
    }
}

/// The counts of many standard-layout histograms added into one array indexed like
/// HdrHistogram's own counts, straight from their V2 encodings ([`V2Scan`]): no histogram is
/// allocated, cleared or walked per interval, and clearing touches only the indices used.
/// This is how validation merges a long run's intervals into display columns
/// ([`IntervalGroups`]) and how renderers merge them otherwise.
pub(crate) struct DenseCounts {
    counts: Vec<u64>,
    /// Lowest and highest index added since the last clear (`lo > hi`: none).
    lo: usize,
    hi: usize,
    /// Non-zero `(index, count)` of the encoding being added.
    pending: Vec<(usize, u64)>,
    scan: V2Scan,
}

impl Default for DenseCounts {
    fn default() -> Self {
        DenseCounts::new()
    }
}

impl DenseCounts {
    /// Empty counts.
    pub(crate) fn new() -> DenseCounts {
        DenseCounts {
            counts: vec![0; standard_reference().distinct_values()],
            lo: usize::MAX,
            hi: 0,
            pending: Vec::new(),
            scan: V2Scan::new(),
        }
    }

    /// Back to empty.
    pub(crate) fn clear(&mut self) {
        if self.lo <= self.hi {
            self.counts[self.lo..=self.hi].fill(0);
        }
        (self.lo, self.hi) = (usize::MAX, 0);
    }

    /// Add the histogram `hist` encodes and return how many values it holds (what
    /// [`Hist::checked_len`] returns); `None`, with nothing added, when it is not a
    /// V2-deflate encoding of the standard layout that decodes cleanly and lies in range.
    pub(crate) fn add(&mut self, hist: &Hist) -> Option<u64> {
        // (`scan` keeps the indices ascending and within its layout, which is never longer
        // than the standard one: checking the last is a guard.)
        if !self.scan.scan(hist, &mut self.pending)
            || self
                .pending
                .last()
                .is_some_and(|&(i, _)| i >= self.counts.len())
        {
            return None;
        }
        let len = V2Scan::len_in_range(&self.pending)?;
        if let (Some(&(lo, _)), Some(&(hi, _))) = (self.pending.first(), self.pending.last()) {
            self.lo = self.lo.min(lo);
            self.hi = self.hi.max(hi);
        }
        for &(i, n) in &self.pending {
            self.counts[i] = self.counts[i].saturating_add(n);
        }
        Some(len)
    }

    /// The counts as `(lowest equivalent value, count)`, ascending.
    pub(crate) fn sparse(&self) -> Vec<(u64, u64)> {
        if self.lo > self.hi {
            return Vec::new();
        }
        self.counts[self.lo..=self.hi]
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (value_of(self.lo + i), c))
            .collect()
    }
}

/// A latency distribution as `(lowest equivalent value, count)` in the standard layout,
/// ascending: what an interval's histogram holds, and a grid slot's sum of them.
pub(crate) type Sparse = Vec<(u64, u64)>;

/// Add the sparse counts `add` to `acc` (both ascending), in place: merged from the back into
/// `acc`'s grown tail, then moved down over the gap that equal values left.
pub(crate) fn add_sparse<C: Copy + Into<u64>>(acc: &mut Sparse, add: &[(u64, C)]) {
    if add.is_empty() {
        return;
    }
    let n = acc.len();
    acc.resize(n + add.len(), (0, 0));
    let (mut i, mut j, mut w) = (n, add.len(), n + add.len());
    while j > 0 {
        w -= 1;
        let b = (add[j - 1].0, add[j - 1].1.into());
        if i > 0 && acc[i - 1].0 > b.0 {
            acc[w] = acc[i - 1];
            i -= 1;
        } else if i > 0 && acc[i - 1].0 == b.0 {
            acc[w] = (b.0, acc[i - 1].1.saturating_add(b.1));
            i -= 1;
            j -= 1;
        } else {
            acc[w] = b;
            j -= 1;
        }
    }
    if w > i {
        let len = acc.len();
        acc.copy_within(w.., i);
        acc.truncate(len - (w - i));
    }
}

/// What HdrHistogram's `value_at_quantile` gives for the histogram of the standard layout
/// holding `counts`; 0 when empty.
pub(crate) fn sparse_quantile(counts: &[(u64, u64)], q: f64) -> u64 {
    let reference = standard_reference();
    let total = counts.iter().fold(0u64, |t, c| t.saturating_add(c.1));
    if total == 0 {
        return 0;
    }
    let target = ((q.min(1.0) * total as f64).ceil() as u64).max(1);
    let mut seen = 0u64;
    for &(v, n) in counts {
        seen = seen.saturating_add(n);
        if seen >= target {
            return if q == 0.0 {
                v
            } else {
                reference.highest_equivalent(v)
            };
        }
    }
    counts
        .last()
        .map_or(0, |c| reference.highest_equivalent(c.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Totals counted by index hold what `saturating_record` records: the same encoding and
    /// the same figures, for 0 ns, values near and past the highest trackable one, and many.
    #[test]
    fn total_counts_as_saturating_record() {
        let top = HIST_MAX_NS;
        let mut vals = vec![
            0,
            1,
            2047,
            2048,
            123_456_789,
            top - 1,
            top,
            top + 1,
            top * 6 / 5,
        ];
        vals.extend([top * 2, u64::MAX / 2, u64::MAX]);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..50_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            vals.push(seed >> (seed % 64));
        }
        let mut want = new_histogram();
        let mut counts = TotalCounts::default();
        for &v in &vals {
            want.saturating_record(v);
            counts.record(v);
        }
        let mut got = new_histogram();
        counts.add_into(&mut got);
        assert_eq!(Hist::encode(&got), Hist::encode(&want));
        assert_eq!(
            (got.len(), got.min(), got.max(), got.mean(), got.stdev()),
            (
                want.len(),
                want.min(),
                want.max(),
                want.mean(),
                want.stdev()
            )
        );
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(got.value_at_quantile(q), want.value_at_quantile(q));
        }
        // Emptied: adding again adds nothing.
        counts.add_into(&mut got);
        assert_eq!(got.len(), want.len());
    }

    /// Latencies from 0 to about an hour, clustered as real ones are (a few decades apart).
    fn latencies() -> impl Strategy<Value = Vec<(u64, u64)>> {
        proptest::collection::vec(
            (0u32..40, 0u64..1000, 1u64..5).prop_map(|(shift, low, n)| ((low << shift) >> 8, n)),
            0..60,
        )
    }

    fn histogram_of(values: &[(u64, u64)]) -> Histogram<u64> {
        let mut h = new_histogram();
        for &(v, n) in values {
            super::super::record_ns(&mut h, v);
            if n > 1 {
                h.record_n(v.min(h.high()), n - 1).unwrap();
            }
        }
        h
    }

    fn sparse_of(h: &Histogram<u64>) -> Sparse {
        h.iter_recorded()
            .map(|v| {
                (
                    h.lowest_equivalent(v.value_iterated_to()),
                    v.count_at_value(),
                )
            })
            .collect()
    }

    proptest! {
        /// Summing sparse counts in place gives the sparse counts of the summed histograms,
        /// and the quantiles read from them are HdrHistogram's own.
        #[test]
        fn sparse_sums_and_quantiles_are_hdrhistograms(parts in proptest::collection::vec(latencies(), 1..6)) {
            let mut sum = new_histogram();
            let mut acc = Sparse::new();
            for p in &parts {
                let h = histogram_of(p);
                sum.add(&h).unwrap();
                add_sparse(&mut acc, &sparse_of(&h));
                prop_assert_eq!(&acc, &sparse_of(&sum));
            }
            for q in [0.0, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
                let want = if sum.is_empty() { 0 } else { sum.value_at_quantile(q) };
                prop_assert_eq!(sparse_quantile(&acc, q), want, "q {}", q);
            }
        }
    }

    #[test]
    fn sparse_sum_closes_the_gap_equal_values_leave() {
        let mut acc = vec![(1, 1), (5, 2), (9, 3)];
        add_sparse(&mut acc, &[(0, 1u64), (5, 1), (9, 1), (12, 4)]);
        assert_eq!(acc, vec![(0, 1), (1, 1), (5, 3), (9, 4), (12, 4)]);
        add_sparse::<u64>(&mut acc, &[]);
        assert_eq!(acc.len(), 5);
        let mut empty = Sparse::new();
        add_sparse(&mut empty, &[(3, 1u64)]);
        assert_eq!(empty, vec![(3, 1)]);
    }
}
