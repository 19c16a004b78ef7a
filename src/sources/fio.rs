//! fio logs: per-I/O latency logs (`write_lat_log`, `write_clat_log`, …) and histogram logs
//! (`write_hist_log`).
//!
//! Latency log rows are `time (ms), value, ddir, bs[, offset[, prio]]`; the value is the
//! latency in ns (fio 3; `--unit us` for fio 2 logs). ddir 0/1/2 are read/write/trim. Times at
//! or above 10^12 ms are Unix-epoch (`log_unix_epoch=1`). Latencies are exact and binned by
//! time into `--interval`. With `log_avg_msec` fio writes averages instead of single I/Os; the
//! file cannot show that, so such logs yield a histogram of averages.
//!
//! Histogram log rows are `time (ms), ddir, bs, bin0, …, binN-1`: each row holds the counts of
//! that ddir's completions since its previous row (fio writes differences). fio 3 uses 29 groups
//! of 64 bins (1856, ns); fio 2 used 19 groups (1216, µs). `log_hist_coarseness=c` merges
//! 2^c adjacent bins, so N = 1856/2^c (or 1216/2^c). Bin `i` of the full table covers
//! `[i, i+1)` for `i < 128`, else with `e = i/64 − 1`:
//! `[2^(e+6) + (i mod 64)·2^e, … + 2^e)`; a coarse bin covers the union of its fine bins.
//! Counts are spread inside each bin as [`super::spread`] describes.

use anyhow::{bail, Result};
use serde_json::json;

use super::{
    ingest_run, parse_i64, parse_u64, rfc3339_ns, Binned, Format, IngestOptions, LineReader, Unit,
};
use crate::results::{BucketConvention, RunResult};

/// No bin of a fio histogram row may hold this many I/Os (2^53: centuries at 1M IOPS).
const MAX_BIN_COUNT: u64 = 1 << 53;
const PLAT_BITS: u32 = 6;
const PLAT_VAL: u64 = 1 << PLAT_BITS;

fn ddir_name(d: u64) -> &'static str {
    match d {
        0 => "read",
        1 => "write",
        2 => "trim",
        3 => "sync",
        _ => "other",
    }
}

fn log_kind(name: &str) -> &'static str {
    let base = std::path::Path::new(name)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    for k in ["clat_hist", "slat", "clat", "lat"] {
        if base.contains(&format!("_{k}.")) || base.starts_with(&format!("{k}.")) {
            return match k {
                "clat_hist" => "clat",
                "slat" => "slat",
                "clat" => "clat",
                _ => "lat",
            };
        }
    }
    "lat"
}

/// Read a fio latency log.
pub(crate) fn read_lat_log(r: &mut LineReader, args: &IngestOptions) -> Result<Vec<RunResult>> {
    let unit_ns = args.unit.unwrap_or(Unit::Ns).ns();
    let interval_ns = (args.interval.as_nanos() as u64).max(1);
    let mut b = Binned::new(interval_ns);
    let mut epoch = None;
    while let Some(line) = r.next_line()? {
        let t = line.trim_ascii();
        if t.is_empty() {
            r.ignored("blank");
            continue;
        }
        let mut f = t.split(|&c| c == b',').map(|x| x.trim_ascii());
        let (Some(time), Some(val), Some(dir)) = (
            f.next().and_then(parse_u64),
            f.next().and_then(parse_u64),
            f.next().and_then(parse_u64),
        ) else {
            r.unparsed("expected 'msec, value, ddir, bs, …'");
            continue;
        };
        let bs = f.next().and_then(parse_u64).unwrap_or(0);
        let is_epoch = *epoch.get_or_insert(time >= 1_000_000_000_000);
        let _ = is_epoch;
        let op = b.op(ddir_name(dir));
        b.record(
            op,
            (time as i64).saturating_mul(1_000_000),
            (val as f64 * unit_ns).round() as u64,
            bs,
        );
        r.parsed();
    }
    let kind = log_kind(&r.name);
    if epoch == Some(false) {
        b.observe(0); // times are ms since the job began: the log covers the span from 0
    }
    let f = b.finish(BucketConvention::Exact, &|_| true);
    if f.ops.is_empty() {
        return Ok(Vec::new());
    }
    let mut run = ingest_run(
        &format!("fio {kind} log"),
        Format::FioLog,
        f.ops,
        if epoch == Some(true) {
            rfc3339_ns(f.start_ns)
        } else {
            String::new()
        },
        f.duration_s,
        f.interval_s,
        json!({"latency": kind, "unit": args.unit.unwrap_or(Unit::Ns).name()}),
    );
    run.warnings.extend(f.warning);
    Ok(vec![run])
}

/// `[lo, hi)` of fine bin `idx` of fio's latency table.
pub(crate) fn plat_bin_range(idx: u64) -> (u64, u64) {
    if idx < (PLAT_VAL << 1) {
        return (idx, idx + 1);
    }
    let error_bits = (idx >> PLAT_BITS) - 1;
    let base = 1u64 << (error_bits + PLAT_BITS as u64);
    let k = idx % PLAT_VAL;
    let lo = base + (k << error_bits);
    (lo, lo + (1u64 << error_bits))
}

/// Read a fio histogram log.
pub(crate) fn read_hist_log(r: &mut LineReader, args: &IngestOptions) -> Result<Vec<RunResult>> {
    let interval_ns = (args.interval.as_nanos() as u64).max(1);
    let mut b = Binned::new(interval_ns);
    // (leading columns, stride, unit_ns) fixed by the first row.
    let mut layout: Option<(usize, u64, f64, usize)> = None;
    let mut epoch = None;
    let mut vals: Vec<u64> = Vec::new();
    // Per ddir: last time (ms) and running count.
    let mut last: Vec<(u64, u64, u64)> = Vec::new();
    // Rows skipped as impossible: how many, and the first one's line and reason.
    let mut skipped: (u64, u64, String) = (0, 0, String::new());
    let mut skip = |line: u64, why: String| {
        if skipped.0 == 0 {
            skipped.1 = line;
            skipped.2 = why;
        }
        skipped.0 += 1;
    };
    while let Some(line) = r.next_line()? {
        let t = line.trim_ascii();
        if t.is_empty() {
            r.ignored("blank");
            continue;
        }
        vals.clear();
        let mut ok = true;
        let mut negative = false;
        for f in t.split(|&c| c == b',') {
            let f = f.trim_ascii();
            match parse_u64(f) {
                Some(v) => vals.push(v),
                None if parse_i64(f).is_some() => {
                    negative = true;
                    vals.push(0);
                }
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if ok && negative && vals.len() >= 4 {
            skip(r.line_no, "a negative value".into());
            continue;
        }
        if !ok || vals.len() < 4 {
            r.unparsed("expected 'msec, ddir, bs, bin0, bin1, …' (whole numbers)");
            continue;
        }
        if layout.is_none() {
            layout = detect_layout(vals.len(), args.unit);
            if layout.is_none() {
                bail!(
                    "line {}: {} columns do not match a fio histogram log (3 leading columns and \
                     1856 or 1216 bins divided by a power of two)",
                    r.line_no,
                    vals.len()
                );
            }
        }
        let (lead, stride, unit_ns, nbins) = layout.expect("set above");
        if vals.len() != lead + nbins {
            r.unparsed("row has a different number of bins than the first row");
            continue;
        }
        let time = vals[0];
        // Impossible counts (fio has written uninitialised memory as counts): no bin may hold
        // 2^53 I/Os or more, and the row's and the direction's totals must not overflow.
        let bins = &vals[lead..];
        let row_sum = bins.iter().try_fold(0u64, |a, &c| {
            (c < MAX_BIN_COUNT).then(|| a.checked_add(c)).flatten()
        });
        let ddir = vals[1];
        let prev = last.iter().find(|x| x.0 == ddir).map(|x| (x.1, x.2));
        let Some(row_sum) = row_sum.filter(|s| {
            prev.map_or(0u64, |p| p.1)
                .checked_add(*s)
                .is_some_and(|t| t < MAX_BIN_COUNT)
        }) else {
            let big = bins.iter().copied().max().unwrap_or(0);
            skip(
                r.line_no,
                format!("bin counts that cannot be I/O counts (up to {big}; their sum overflows)"),
            );
            continue;
        };
        if let Some((pt, _)) = prev {
            if time < pt {
                skip(
                    r.line_no,
                    format!(
                        "time going backwards ({time} ms after {pt} ms for {})",
                        ddir_name(ddir)
                    ),
                );
                continue;
            }
        }
        match last.iter_mut().find(|x| x.0 == ddir) {
            Some(x) => *x = (ddir, time, x.2 + row_sum),
            None => last.push((ddir, time, row_sum)),
        }
        let is_epoch = *epoch.get_or_insert(time >= 1_000_000_000_000);
        let _ = is_epoch;
        let op = b.op(ddir_name(vals[1]));
        let t_ns = (time as i64).saturating_mul(1_000_000);
        for (j, &c) in vals[lead..].iter().enumerate() {
            if c == 0 {
                continue;
            }
            let first = j as u64 * stride;
            let (lo, _) = plat_bin_range(first);
            let (_, hi) = plat_bin_range(first + stride - 1);
            b.record_spread(
                op,
                t_ns,
                (lo as f64 * unit_ns) as u64,
                (hi as f64 * unit_ns) as u64,
                c,
            );
        }
        r.parsed();
    }
    if skipped.0 > 0 {
        r.stats.ignored.insert("impossible row".into(), skipped.0);
        r.warnings.push(format!(
            "{} row(s) skipped as impossible (first at line {}: {})",
            skipped.0, skipped.1, skipped.2
        ));
    }
    let Some((_, stride, unit_ns, _)) = layout else {
        return Ok(Vec::new());
    };
    if epoch == Some(false) {
        b.observe(0); // each row counts the window ending at its time, from the job's start at 0
    }
    let f = b.finish(BucketConvention::LowerBound, &|_| true);
    if f.ops.is_empty() {
        return Ok(Vec::new());
    }
    let mut run = ingest_run(
        "fio histogram log",
        Format::FioHist,
        f.ops,
        if epoch == Some(true) {
            rfc3339_ns(f.start_ns)
        } else {
            String::new()
        },
        f.duration_s,
        f.interval_s,
        json!({"coarseness_stride": stride, "unit_ns": unit_ns}),
    );
    run.warnings.extend(f.warning);
    Ok(vec![run])
}

/// (leading columns, stride, unit ns, bins) for a row of `n` numbers.
fn detect_layout(n: usize, unit: Option<Unit>) -> Option<(usize, u64, f64, usize)> {
    for lead in [3usize, 4] {
        let bins = n.checked_sub(lead)?;
        if bins == 0 {
            continue;
        }
        for (total, default_unit) in [(1856usize, Unit::Ns), (1216, Unit::Us)] {
            if total % bins == 0 && (total / bins).is_power_of_two() {
                return Some((
                    lead,
                    (total / bins) as u64,
                    unit.unwrap_or(default_unit).ns(),
                    bins,
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plat_bins_match_fio_table() {
        assert_eq!(plat_bin_range(0), (0, 1));
        assert_eq!(plat_bin_range(127), (127, 128));
        // Group 2 (idx 128..191) has 2-wide bins starting at 128.
        assert_eq!(plat_bin_range(128), (128, 130));
        assert_eq!(plat_bin_range(191), (254, 256));
        assert_eq!(plat_bin_range(192), (256, 260));
        // Bins tile the value axis without gaps.
        for i in 0..1855 {
            assert_eq!(
                plat_bin_range(i).1,
                plat_bin_range(i + 1).0,
                "gap after bin {i}"
            );
        }
        assert_eq!(detect_layout(3 + 1856, None).unwrap().1, 1);
        assert_eq!(detect_layout(3 + 464, None).unwrap().1, 4);
        assert_eq!(detect_layout(3 + 1216, None).unwrap().2, 1e3);
        assert!(detect_layout(3 + 1000, None).is_none());
    }
}
