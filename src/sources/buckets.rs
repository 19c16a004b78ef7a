//! Bucketed sources: a bucket's range by its convention and its count spread over that range
//! (see the module doc of [`super`]).

use super::*;

/// Spread `count` values over `[lo_ns, hi_ns)` deterministically (see the module docs).
pub fn spread(h: &mut Histogram<u64>, lo_ns: u64, hi_ns: u64, count: u64) {
    spread_with(lo_ns, hi_ns, count, &mut |v, n| record_interval(h, v, n));
}

/// The `[lo, hi)` range in the value's unit of a power-of-two bucket labelled `v`.
///
/// Upper-bound (Oracle): `v` holds `[v/2, v)`, and bucket 1 holds `[0, 1)`; the sentinel
/// 4294967295 is read as 2^32. Lower-bound (bcc, SystemTap, DTrace): `v` holds `[v, 2v)`, and
/// bucket 0 holds `[0, 1)`.
pub(crate) fn bucket_range(v: u64, conv: BucketConvention) -> (u64, u64) {
    match conv {
        BucketConvention::UpperBound => {
            let v = if v == u32::MAX as u64 { 1u64 << 32 } else { v };
            if v <= 1 {
                (0, 1)
            } else {
                (v / 2, v)
            }
        }
        BucketConvention::LowerBound => {
            if v == 0 {
                (0, 1)
            } else {
                (v, v.saturating_mul(2))
            }
        }
        BucketConvention::Exact => (v, v + 1),
    }
}

/// Spread a bucket given in `unit_ns` units.
pub fn spread_bucket(
    h: &mut Histogram<u64>,
    v: u64,
    conv: BucketConvention,
    unit_ns: f64,
    count: u64,
) {
    let (lo, hi) = bucket_range(v, conv);
    let lo_ns = (lo as f64 * unit_ns).round() as u64;
    let hi_ns = (hi as f64 * unit_ns).round() as u64;
    spread(h, lo_ns, hi_ns, count);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_keeps_counts_inside_bucket() {
        for (lo, hi, n) in [
            (4_000_000u64, 8_000_000u64, 1000u64),
            (0, 2000, 7),
            (5, 6, 3),
        ] {
            let mut h = new_histogram();
            spread(&mut h, lo, hi, n);
            assert_eq!(h.len(), n);
            for v in h.iter_recorded() {
                let x = v.value_iterated_to();
                assert!(h.lowest_equivalent(x) >= lo.max(1) && h.lowest_equivalent(x) < hi);
            }
        }
    }

    #[test]
    fn bucket_conventions() {
        assert_eq!(bucket_range(8, BucketConvention::UpperBound), (4, 8));
        assert_eq!(bucket_range(1, BucketConvention::UpperBound), (0, 1));
        assert_eq!(
            bucket_range(4294967295, BucketConvention::UpperBound),
            (1 << 31, 1 << 32)
        );
        assert_eq!(bucket_range(4, BucketConvention::LowerBound), (4, 8));
        assert_eq!(bucket_range(0, BucketConvention::LowerBound), (0, 1));
    }
}
