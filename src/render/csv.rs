//! CSV export of per-interval figures, one row per run, op and interval, for spreadsheets:
//! time, op, count, IOPS, MB/s and latency percentiles in microseconds. A run over several
//! targets has its rows (the totals, `target` empty) and then one row per target, op and
//! interval (`target` its path): each op's target rows sum, interval by interval, to its row.

use anyhow::{Context, Result};

use super::heatmap::OpSeries;
use crate::results::{Results, UNKNOWN_RATE};

/// Column names of the interval CSV.
pub const HEADER: [&str; 17] = [
    "run",
    "run_name",
    "phase",
    "op",
    "start_s",
    "duration_s",
    "count",
    "iops",
    "mb_per_s",
    "mean_us",
    "p50_us",
    "p90_us",
    "p99_us",
    "p99.9_us",
    "max_us",
    "bytes",
    "target",
];

/// Render the per-interval CSV of every run and op.
pub fn intervals_csv(r: &Results) -> Result<String> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    w.write_record(HEADER)?;
    let us = |ns: f64| format!("{:.3}", ns / 1e3);
    for (ri, run) in r.runs.iter().enumerate() {
        let parts = std::iter::once(("", &run.ops))
            .chain(run.targets.iter().map(|t| (t.target.path.as_str(), &t.ops)));
        for (target, ops) in parts {
            let series = OpSeries::decode_all(ops).with_context(|| match target {
                "" => format!("run {ri}"),
                t => format!("run {ri}, target {t}"),
            })?;
            for s in &series {
                for st in &s.stats {
                    w.write_record([
                        ri.to_string(),
                        run.name.clone(),
                        run.phase.clone(),
                        s.op.clone(),
                        format!("{:.3}", st.start_s),
                        format!("{:.3}", st.duration_s),
                        st.count.to_string(),
                        if run.rates_known() {
                            format!("{:.3}", st.iops())
                        } else {
                            UNKNOWN_RATE.into()
                        },
                        if run.rates_known() {
                            format!("{:.6}", st.mb_per_s())
                        } else {
                            UNKNOWN_RATE.into()
                        },
                        us(st.mean_ns),
                        us(st.p50_ns as f64),
                        us(st.p90_ns as f64),
                        us(st.p99_ns as f64),
                        us(st.p999_ns as f64),
                        us(st.max_ns as f64),
                        st.bytes.to_string(),
                        target.to_string(),
                    ])?;
                }
            }
        }
    }
    let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(String::from_utf8(bytes)?)
}
