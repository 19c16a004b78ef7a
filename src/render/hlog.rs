//! HdrHistogram interval log (`.hlog`) export, the V2 log format of HdrHistogram's
//! `HistogramLogWriter` (readable by `HistogramLogProcessor`, HdrHistogram's Rust, Python
//! and Go log readers, and tools built on them).
//!
//! Header: `#[Histogram log format version 1.3]`, `#[StartTime: ...]`, `#[BaseTime: ...]` and
//! the legend line; then one line per op and interval:
//! `Tag=<op>,<start s since BaseTime>,<length s>,<max ms>,<V2-deflate base64 histogram>`.
//! Histograms are in nanoseconds; `Interval_Max` is in milliseconds (HdrHistogram's default
//! max-value unit ratio of 10^6). The histograms are copied verbatim from the results file,
//! which stores exactly this encoding. With several runs (calibration steps) the tag is
//! `r<run>.<op>` and each run's intervals are placed at its own start time.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use crate::histogram::new_histogram;
use crate::results::{Hist, Results};

/// Make an op name usable as a tag (no commas or whitespace, which end a tag).
pub(crate) fn tag_of(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c == ',' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

fn epoch_s(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn parse_time(s: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(s.trim()).ok()
}

/// Render the interval log of every run and op.
pub fn interval_log(r: &Results) -> Result<String> {
    let base = r
        .runs
        .iter()
        .filter_map(|run| parse_time(&run.started))
        .min()
        .or_else(|| parse_time(&r.created))
        .unwrap_or(UNIX_EPOCH);
    let base_s = epoch_s(base);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "#[Logged with iolens {} from a {} results file]",
        r.tool_version,
        super::kind_name(r.kind)
    );
    out.push_str("#[Histogram log format version 1.3]\n");
    let _ = writeln!(
        out,
        "#[StartTime: {base_s:.3} (seconds since epoch), {}]",
        humantime::format_rfc3339_millis(base)
    );
    let _ = writeln!(out, "#[BaseTime: {base_s:.3} (seconds since epoch)]");
    out.push_str("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n");
    let empty = Hist::encode(&new_histogram());
    let mut offset = 0.0;
    for (ri, run) in r.runs.iter().enumerate() {
        let run_start = parse_time(&run.started)
            .map(|t| epoch_s(t) - base_s)
            .unwrap_or(offset);
        let n = run.ops.iter().map(|o| o.intervals.len()).max().unwrap_or(0);
        let tags: Vec<String> = run
            .ops
            .iter()
            .map(|o| {
                if r.runs.len() == 1 {
                    tag_of(&o.op)
                } else {
                    format!("r{ri}.{}", tag_of(&o.op))
                }
            })
            .collect();
        // Interleave ops so timestamps stay in order.
        for i in 0..n {
            for (op, tag) in run.ops.iter().zip(&tags) {
                let Some(iv) = op.intervals.get(i) else {
                    continue;
                };
                // An .hlog line holds HdrHistogram's V2-deflate (spread buckets rewritten so).
                let v2;
                let hist = if iv.hist.as_base64().is_empty() {
                    &empty
                } else if iv.hist.is_spread() {
                    v2 = iv
                        .hist
                        .to_v2_deflate()
                        .with_context(|| format!("run {ri} op {} interval {i}", op.op))?;
                    &v2
                } else {
                    &iv.hist
                };
                let h = super::heatmap::decode_any_bounds(hist)
                    .with_context(|| format!("run {ri} op {} interval {i}", op.op))?;
                let max_ms = if h.is_empty() {
                    0.0
                } else {
                    h.max() as f64 / 1e6
                };
                let _ = writeln!(
                    out,
                    "Tag={tag},{:.3},{:.3},{max_ms:.3},{}",
                    run_start + iv.start_s,
                    iv.duration_s,
                    hist.as_base64()
                );
            }
        }
        offset = run_start + run.duration_s;
    }
    Ok(out)
}
