//! Classic (cumulative `le`) buckets for the Prometheus exposition: one fixed layout, so that
//! every host's series aggregate with `sum by (le)` and memory stays fixed however long a
//! watch runs.
//!
//! The layout: 16 buckets an octave, geometric, from 2^8 ns (256 ns) to 2^36 ns (68.7 s):
//! upper bounds `2^(8 + j/16)` ns for j = 0..=448, then `+Inf`. Each bucket is 2^(1/16) − 1 =
//! 4.43 % wide, so a quantile PromQL interpolates inside a bucket (`histogram_quantile`) is within
//! 4.43 % of the exact value for any latency between 256 ns and 68.7 s. Values at or below
//! 256 ns fall in the first bucket; above 68.7 s, in `+Inf`.

use hdrhistogram::Histogram;

/// Buckets an octave.
pub const CLASSIC_PER_OCTAVE: u32 = 16;
/// log2 of the first bucket's upper bound, ns.
pub const CLASSIC_LOW_LOG2: u32 = 8;
/// log2 of the last finite bucket's upper bound, ns.
pub const CLASSIC_HIGH_LOG2: u32 = 36;
/// Finite upper bounds.
pub const CLASSIC_BOUNDS: usize =
    ((CLASSIC_HIGH_LOG2 - CLASSIC_LOW_LOG2) * CLASSIC_PER_OCTAVE) as usize + 1;

/// Upper bound (ns) of finite bucket `j`.
pub fn classic_bound_ns(j: usize) -> f64 {
    2f64.powf(CLASSIC_LOW_LOG2 as f64 + j as f64 / CLASSIC_PER_OCTAVE as f64)
}

/// The finite upper bounds, ns (computed once).
fn bounds() -> &'static [f64; CLASSIC_BOUNDS] {
    static B: std::sync::OnceLock<[f64; CLASSIC_BOUNDS]> = std::sync::OnceLock::new();
    B.get_or_init(|| std::array::from_fn(classic_bound_ns))
}

/// The bucket `ns` falls in: the first whose upper bound is at least `ns` (`CLASSIC_BOUNDS`:
/// `+Inf`).
#[inline]
pub fn classic_index(ns: u64) -> usize {
    let b = bounds();
    let v = ns as f64;
    if v <= b[0] {
        return 0;
    }
    if v > b[CLASSIC_BOUNDS - 1] {
        return CLASSIC_BOUNDS;
    }
    let guess = ((v.log2() - CLASSIC_LOW_LOG2 as f64) * CLASSIC_PER_OCTAVE as f64).ceil();
    let mut j = (guess.max(0.0) as usize).min(CLASSIC_BOUNDS - 1);
    // The logarithm's rounding, corrected against the table itself.
    while j > 0 && v <= b[j - 1] {
        j -= 1;
    }
    while v > b[j] {
        j += 1;
    }
    j
}

/// One series' classic histogram: counts per bucket (not cumulative; the last is `+Inf`), the
/// sum of the values (ns) and their count. Fixed size.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassicHist {
    pub counts: Box<[u64; CLASSIC_BOUNDS + 1]>,
    pub sum_ns: u128,
    pub count: u64,
}

impl Default for ClassicHist {
    fn default() -> Self {
        ClassicHist {
            counts: Box::new([0; CLASSIC_BOUNDS + 1]),
            sum_ns: 0,
            count: 0,
        }
    }
}

impl ClassicHist {
    /// Record one value.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[classic_index(ns)] += 1;
        self.sum_ns += ns as u128;
        self.count += 1;
    }

    /// Every value of an HdrHistogram, each bucket placed by the highest value it stands for
    /// (so a classic bucket never counts a value above its bound); the sum from the same values.
    pub fn from_hdr(h: &Histogram<u64>) -> ClassicHist {
        let mut c = ClassicHist::default();
        for v in h.iter_recorded() {
            let n = v.count_since_last_iteration();
            let x = h.median_equivalent(v.value_iterated_to());
            c.counts[classic_index(x)] += n;
            c.sum_ns += x as u128 * n as u128;
            c.count += n;
        }
        c
    }

    /// Add another histogram of the same layout.
    pub fn add(&mut self, o: &ClassicHist) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.sum_ns += o.sum_ns;
        self.count += o.count;
    }

    /// The cumulative counts, one per bound and the last for `+Inf`.
    pub fn cumulative(&self) -> impl Iterator<Item = u64> + '_ {
        self.counts.iter().scan(0u64, |acc, &c| {
            *acc += c;
            Some(*acc)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_the_first_bucket_that_holds_it() {
        let b = bounds();
        assert_eq!(CLASSIC_BOUNDS, 449);
        assert_eq!(b[0], 256.0);
        assert_eq!(b[CLASSIC_BOUNDS - 1], (1u64 << 36) as f64);
        for j in 1..CLASSIC_BOUNDS {
            let w = b[j] / b[j - 1] - 1.0;
            assert!((w - 0.0443).abs() < 0.0001, "bucket {j} is {w} wide");
        }
        let mut x = 1u64;
        while x < 1 << 40 {
            for v in [x, x + 1, x * 3 / 2, x.saturating_sub(1)] {
                let j = classic_index(v);
                if j < CLASSIC_BOUNDS {
                    assert!(v as f64 <= b[j], "{v} above bound {j}");
                }
                if j > 0 {
                    assert!(v as f64 > b[j - 1], "{v} fits bound {}", j - 1);
                }
            }
            x = x * 17 / 16 + 1;
        }
        assert_eq!(classic_index(u64::MAX), CLASSIC_BOUNDS);
    }

    #[test]
    fn hdr_values_keep_their_count_and_sum_within_its_precision() {
        let mut h = crate::histogram::new_histogram();
        let mut c = ClassicHist::default();
        for k in 1..5000u64 {
            let v = k * k * 37 + 100;
            h.record(v).unwrap();
            c.record(v);
        }
        let from = ClassicHist::from_hdr(&h);
        assert_eq!(from.count, c.count);
        assert_eq!(from.cumulative().last(), Some(c.count));
        let rel = from.sum_ns as f64 / c.sum_ns as f64 - 1.0;
        assert!(rel.abs() < 1e-3, "sums differ by {rel}");
    }
}
