//! Tests of the heatmap: columns merged exactly, cells, and the fast paths against the general ones.

use super::*;
use crate::histogram::{new_histogram, record_ns};

fn op_with(intervals: &[&[u64]]) -> OpResult {
    let mut total = new_histogram();
    let ivs = intervals
        .iter()
        .enumerate()
        .map(|(i, vals)| {
            let mut h = new_histogram();
            for &v in *vals {
                record_ns(&mut h, v);
            }
            total.add(&h).unwrap();
            Interval {
                start_s: i as f64,
                duration_s: 1.0,
                count: h.len(),
                bytes: h.len() * 8192,
                hist: Hist::encode(&h),
            }
        })
        .collect();
    OpResult::new("read", &total, total.len() * 8192, ivs)
}

/// Intervals whose latencies move (a slow tier that comes and goes), so that averaging
/// per-interval percentiles would give other figures than merging histograms.
fn drifting_op(n: usize) -> OpResult {
    let vals: Vec<Vec<u64>> = (0..n)
        .map(|i| {
            let k = (i % 7) as u64;
            (0..(20 + 13 * k))
                .map(|j| 50_000 + j * 997 * (k + 1) + if i % 5 == 0 { 9_000_000 } else { 0 })
                .collect()
        })
        .collect();
    let refs: Vec<&[u64]> = vals.iter().map(|v| v.as_slice()).collect();
    op_with(&refs)
}

#[test]
fn display_columns_are_exact_merges_of_their_intervals_at_any_width() {
    let op = drifting_op(103);
    for max_cols in [1, 2, 7, 10, 50, 103, 500] {
        let s = OpSeries::decode_columns(&op, max_cols).unwrap();
        let group = s.per_entry();
        assert!(s.stats.len() <= max_cols.max(1));
        assert_eq!(s.stats.len(), 103usize.div_ceil(group));
        for (c, st) in s.stats.iter().enumerate() {
            let ivs = &op.intervals[c * group..((c + 1) * group).min(103)];
            let mut merged = new_histogram();
            for iv in ivs {
                merged.add(iv.hist.decode().unwrap()).unwrap();
            }
            let at = format!("{max_cols} columns, column {c}");
            assert_eq!(st.count, merged.len(), "{at}");
            assert_eq!(st.count, ivs.iter().map(|i| i.count).sum::<u64>(), "{at}");
            assert_eq!(st.p50_ns, merged.value_at_quantile(0.5), "{at}");
            assert_eq!(st.p90_ns, merged.value_at_quantile(0.9), "{at}");
            assert_eq!(st.p99_ns, merged.value_at_quantile(0.99), "{at}");
            assert_eq!(st.p999_ns, merged.value_at_quantile(0.999), "{at}");
            assert_eq!(st.max_ns, merged.max(), "{at}");
            let dur: f64 = ivs.iter().map(|i| i.duration_s).sum();
            assert_eq!(st.duration_s, dur, "{at}");
            assert_eq!(st.start_s, ivs[0].start_s, "{at}");
            // The cells are those of the merged histogram too.
            assert_eq!(s.cells[c], bin_histogram(&merged, &[]), "{at}");
        }
        // Nothing is lost or counted twice whatever the width.
        let total: u64 = s.stats.iter().map(|st| st.count).sum();
        assert_eq!(total, op.count);
    }
    // One interval per column: the per-interval figures themselves.
    let cols = OpSeries::decode_columns(&op, 103).unwrap();
    let per = OpSeries::decode(&op).unwrap();
    assert_eq!(cols.stats, per.stats);
    assert_eq!(cols.cells, per.cells);
}

#[test]
fn dense_merge_indexes_like_hdrhistogram_and_refuses_other_layouts() {
    let h = new_histogram();
    for i in 0..h.distinct_values() - 1 {
        let v = crate::histogram::value_of(i);
        assert_eq!(h.lowest_equivalent(v), v, "index {i}");
        assert_eq!(
            crate::histogram::value_of(i + 1),
            h.next_non_equivalent(v),
            "index {i}"
        );
    }
    // Adding encodings equals adding histograms.
    let op = drifting_op(9);
    let mut m = DenseMerge::new();
    let mut want = new_histogram();
    for iv in &op.intervals {
        assert!(m.add(&iv.hist));
        want.add(iv.hist.decode().unwrap()).unwrap();
    }
    assert_eq!(m.sparse(), sparse_counts(&want));
    // Another precision, or a damaged encoding: refused, nothing added.
    let mut other = Histogram::<u64>::new_with_bounds(1, 1 << 40, 2).unwrap();
    other.record(12_345).unwrap();
    let before = m.sparse();
    assert!(!m.add(&Hist::encode(&other)));
    let good = op.intervals[0].hist.as_base64();
    let cut: Hist = serde_json::from_value(serde_json::json!(&good[..good.len() - 8])).unwrap();
    assert!(!m.add(&cut));
    assert_eq!(m.sparse(), before);
    // The columns of an op in another precision still come out (the general path).
    let mut o = op.clone();
    for iv in &mut o.intervals {
        let mut h = Histogram::<u64>::new_with_bounds(1, 1 << 40, 2).unwrap();
        h.record(iv.count * 1000 + 1).unwrap();
        iv.hist = Hist::encode(&h);
        iv.count = 1;
    }
    let s = OpSeries::decode_columns(&o, 3).unwrap();
    assert_eq!(s.stats.iter().map(|st| st.count).sum::<u64>(), 9);
}

#[test]
fn merged_column_percentile_is_not_an_average_of_interval_percentiles() {
    // Two intervals: 99 fast + 1 slow, then 1 fast + 99 slow. The merged p50 is the
    // merged histogram's, which no mean of the two per-interval p50s gives.
    let fast = 100_000u64;
    let slow = 10_000_000u64;
    let a: Vec<u64> = std::iter::repeat_n(fast, 99).chain([slow]).collect();
    let b: Vec<u64> = std::iter::repeat_n(slow, 99).chain([fast]).collect();
    let op = op_with(&[&a, &b, &a]);
    let s = OpSeries::decode_columns(&op, 1).unwrap();
    assert_eq!(s.stats.len(), 1);
    let mut merged = new_histogram();
    for iv in &op.intervals {
        merged.add(iv.hist.decode().unwrap()).unwrap();
    }
    assert_eq!(s.stats[0].p50_ns, merged.value_at_quantile(0.5));
    assert!(s.stats[0].p50_ns < 200_000, "{}", s.stats[0].p50_ns);
    assert_eq!(s.stats[0].count, 300);
    assert_eq!(s.stats[0].duration_s, 3.0);
}

#[test]
fn fine_rows_are_log2_quarters() {
    assert_eq!(fine_row(1.0), 0);
    assert_eq!(fine_row(2.0), 4);
    assert_eq!(fine_row(1024.0), 40);
    assert_eq!(fine_row(1023.0), 39);
    assert!((row_low_ns(40, 4) - 1024.0).abs() < 1e-9);
    assert!((row_low_ns(10, 1) - 1024.0).abs() < 1e-9);
}

#[test]
fn spread_buckets_are_drawn_on_the_source_edges() {
    // A bcc row `16 -> 31` µs spread at ingest holds values in [16, 32) µs: the bar, the
    // heatmap row and every value's position stay inside that bucket (no second shift).
    let mut h = new_histogram();
    crate::sources::spread_bucket(
        &mut h,
        16,
        crate::results::BucketConvention::LowerBound,
        1000.0,
        100,
    );
    crate::sources::spread_bucket(
        &mut h,
        64,
        crate::results::BucketConvention::LowerBound,
        1000.0,
        7,
    );
    let edges = [16_000u64, 32_000, 64_000, 128_000];
    for (v, _) in sparse_counts(&h) {
        let ns = representative_ns(&h, v);
        assert!((16_000.0..128_000.0).contains(&ns), "{ns}");
    }
    for per_octave in [1, 4] {
        let bins = log_bins(&h, &edges, per_octave);
        assert_eq!(bins.len(), 3, "{bins:?}");
        assert_eq!(
            (bins[0].low_ns, bins[0].high_ns, bins[0].count),
            (16e3, 32e3, 100)
        );
        assert_eq!(
            (bins[1].low_ns, bins[1].high_ns, bins[1].count),
            (32e3, 64e3, 0)
        );
        assert_eq!(
            (bins[2].low_ns, bins[2].high_ns, bins[2].count),
            (64e3, 128e3, 7)
        );
    }
    // Without source edges the values are still drawn where they are: 16..32 µs spans the
    // 2^13.97..2^14.97 ns octaves, never 32.8..65.5 µs.
    let bins = log_bins(&h, &[], 1);
    let in_32k_64k: u64 = bins
        .iter()
        .filter(|b| b.low_ns >= 32_768.0 && b.high_ns <= 65_536.0)
        .map(|b| b.count)
        .sum();
    assert_eq!(in_32k_64k, 0, "{bins:?}");
}

#[test]
fn sparse_counts_and_quantiles_match_hdrhistogram() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
    let mut h = new_histogram();
    for _ in 0..5000 {
        let v = if rng.gen::<f64>() < 0.7 {
            rng.gen_range(50_000..150_000)
        } else {
            rng.gen_range(2_000_000..9_000_000)
        };
        record_ns(&mut h, v);
    }
    let sparse = sparse_counts(&h);
    let mine: Vec<(u64, u64)> = h
        .iter_recorded()
        .map(|v| {
            (
                h.lowest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
        .collect();
    assert_eq!(sparse, mine);
    let qs = [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0];
    let theirs: Vec<u64> = h.value_at_quantiles(qs).collect();
    assert_eq!(sparse_quantiles(&h, &sparse, &qs), theirs);
    let s = OpSeries::decode(&op_with(&[&[100, 200, 300_000, 7_000_000]])).unwrap();
    assert!((s.stats[0].mean_ns - (100.0 + 200.0 + 300_000.0 + 7_000_000.0) / 4.0).abs() < 5_000.0);
    assert!(sparse_counts(&new_histogram()).is_empty());
}

#[test]
fn decode_gives_percentiles_and_cells_per_interval() {
    let op = op_with(&[&[100_000; 10], &[100_000, 100_000, 5_000_000]]);
    let s = OpSeries::decode(&op).unwrap();
    assert_eq!(s.stats.len(), 2);
    assert_eq!(s.stats[0].count, 10);
    assert!((s.stats[0].p50_ns as f64 - 100_000.0).abs() < 100.0);
    assert!((s.stats[1].max_ns as f64 - 5_000_000.0).abs() < 5_000.0);
    let cells: u64 = s.cells[1].iter().map(|c| c.count).sum();
    assert_eq!(cells, 3);
    assert_eq!(s.cells[1].len(), 2);
    assert_eq!(s.cells[1][0].row, fine_row(100_000.0));
}

#[test]
fn parallel_decode_matches_serial() {
    let vals: Vec<Vec<u64>> = (0..100).map(|i| vec![1000 + i * 37; 3]).collect();
    let refs: Vec<&[u64]> = vals.iter().map(|v| v.as_slice()).collect();
    let op = op_with(&refs);
    let ops = vec![op.clone(), op];
    let par = OpSeries::decode_all(&ops).unwrap();
    let ser = OpSeries::decode(&ops[0]).unwrap();
    assert_eq!(par.len(), 2);
    assert_eq!(par[1].stats, ser.stats);
    assert_eq!(par[1].cells, ser.cells);
}

#[test]
fn heatmap_maps_buckets_to_rows_and_aggregates_columns() {
    // 10 intervals; 1 µs and 1 ms ops.
    let vals: Vec<Vec<u64>> = (0..10).map(|_| vec![1_000, 1_000, 1_000_000]).collect();
    let refs: Vec<&[u64]> = vals.iter().map(|v| v.as_slice()).collect();
    let s = OpSeries::decode(&op_with(&refs)).unwrap();
    let m = Heatmap::build(&s, 4, 1, 100).unwrap();
    // 10 intervals into at most 4 columns: 3 per column, 4 columns.
    assert_eq!((m.group, m.cols), (3, 4));
    assert_eq!(m.col_edges_s, vec![0.0, 3.0, 6.0, 9.0, 10.0]);
    // 1 µs is in octave 9 ([512,1024)) or 10 depending on bucket; 1 ms in octave 19.
    assert_eq!(m.row0, fine_row(1_000.0) / 4);
    assert_eq!(m.rows as i32, fine_row(1_000_000.0) / 4 - m.row0 + 1);
    assert_eq!(m.freq[0], 6); // row 0, col 0: 3 intervals × 2 ops
    assert_eq!(m.freq[m.rows.saturating_sub(1) * m.cols], 3);
    assert_eq!(m.freq[3], 2); // last column has one interval
    let total: u64 = m.freq.iter().sum();
    assert_eq!(total, 30);
    // Intensity: the 1 ms row holds most of the time.
    let top = m.value(HeatKind::Intensity, m.rows - 1, 0);
    let bottom = m.value(HeatKind::Intensity, 0, 0);
    assert!(top > 100.0 * bottom);
    let (lo, hi) = m.row_bounds_ns(m.rows - 1);
    assert!(lo <= 1_000_000.0 && 1_000_000.0 < hi);
}

#[test]
fn heatmap_coarsens_rows_to_fit() {
    let vals: Vec<Vec<u64>> = vec![vec![100, 10_000_000_000]];
    let refs: Vec<&[u64]> = vals.iter().map(|v| v.as_slice()).collect();
    let s = OpSeries::decode(&op_with(&refs)).unwrap();
    let fine = Heatmap::build(&s, 10, 4, 1000).unwrap();
    assert_eq!(fine.per_octave, 4);
    let coarse = Heatmap::build(&s, 10, 4, 40).unwrap();
    assert_eq!(coarse.per_octave, 1);
    assert!(coarse.rows <= 40 && coarse.rows >= 26);
}

#[test]
fn log_bins_are_contiguous_and_sum_to_one() {
    let mut h = new_histogram();
    for v in [1_000u64, 1_100, 66_000, 70_000, 70_000] {
        record_ns(&mut h, v);
    }
    let bins = log_bins(&h, &[], 1);
    // From the 512..1024 or 1024..2048 octave up to 65536..131072.
    assert!(bins.len() >= 7 && bins.len() <= 8, "{bins:?}");
    for w in bins.windows(2) {
        assert!((w[0].high_ns - w[1].low_ns).abs() < 1e-6);
    }
    let sum: f64 = bins.iter().map(|b| b.share).sum();
    assert!((sum - 1.0).abs() < 1e-9);
    assert_eq!(bins.last().unwrap().count, 3);
    assert!(log_bins(&new_histogram(), &[], 1).is_empty());
}

#[test]
fn empty_series_has_no_heatmap() {
    let op = op_with(&[]);
    let s = OpSeries::decode(&op).unwrap();
    assert!(Heatmap::build(&s, 10, 1, 10).is_none());
}

#[test]
fn levels_are_logarithmic_and_keep_outliers_visible() {
    assert_eq!(level(0.0, 1000.0), 0.0);
    assert_eq!(level(1000.0, 1000.0), 1.0);
    assert!(level(1.0, 1e9) >= 0.05);
    assert!(level(31.0, 1023.0) > 0.45 && level(31.0, 1023.0) < 0.55);
    assert_eq!(level_for(HeatKind::Intensity, 500.0, 1000.0), 0.5);
    assert_eq!(level_for(HeatKind::Intensity, 1e-3, 1000.0), 0.05);
    assert_eq!(
        level_for(HeatKind::Frequency, 31.0, 1023.0),
        level(31.0, 1023.0)
    );
}
