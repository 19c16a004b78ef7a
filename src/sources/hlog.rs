//! HdrHistogram interval logs (`.hlog`, as written by HdrHistogram's `HistogramLogWriter`,
//! wrk2, jHiccup, and iolens's own hlog renderer).
//!
//! ```text
//! #[Histogram log format version 1.3]
//! #[StartTime: 1441812279.474 (seconds since epoch), Wed Sep 09 08:24:39 PDT 2015]
//! "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//! [Tag=name,]0.127,1.007,2.769,HISTFAAAAEV42pJpYm5gYGBkAAEOAGAAAP//…
//! ```
//! Each data line is one interval histogram (V2 or V2-deflate encoding, base64), placed at its
//! start timestamp (relative to `StartTime`/`BaseTime`, or absolute when it is a plausible
//! epoch time) with its length. Values are taken as ns unless `--unit` says otherwise (then
//! each recorded value is rescaled). One run per file, one op per tag (`hlog` when untagged);
//! the histograms keep HdrHistogram's own precision (`exact` convention).

use std::collections::BTreeMap;

use anyhow::Result;
use base64::Engine as _;
use hdrhistogram::Histogram;
use serde_json::json;

use super::{ingest_run, parse_f64, rfc3339_ns, Format, IngestArgs, LineReader, SnapshotSeries};
use crate::results::{new_histogram, BucketConvention, RunResult};

/// Read an HdrHistogram interval log.
pub fn read(r: &mut LineReader, args: &IngestArgs) -> Result<Vec<RunResult>> {
    let scale = args.unit.map(|u| u.ns()).unwrap_or(1.0);
    let mut start_time: Option<f64> = None;
    let mut base_time: Option<f64> = None;
    // (absolute-or-relative start, length, tag, histogram)
    let mut entries: Vec<(f64, f64, String, Histogram<u64>)> = Vec::new();
    while let Some(line) = r.next_line()? {
        let t = line.trim_ascii();
        if t.is_empty() {
            r.ignored("blank");
            continue;
        }
        if let Some(c) = t.strip_prefix(b"#") {
            let c = String::from_utf8_lossy(c);
            let num = |key: &str| {
                c.strip_prefix(key)
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.trim_end_matches(']').parse::<f64>().ok())
            };
            if let Some(v) = num("[StartTime: ") {
                start_time = Some(v);
            } else if let Some(v) = num("[BaseTime: ") {
                base_time = Some(v);
            }
            r.ignored("comment");
            continue;
        }
        if t.starts_with(b"\"") {
            r.ignored("legend");
            continue;
        }
        let mut fields: Vec<&[u8]> = t.split(|&c| c == b',').collect();
        let mut tag = "hlog".to_string();
        if let Some(first) = fields.first() {
            if let Some(v) = first.strip_prefix(b"Tag=") {
                tag = String::from_utf8_lossy(v).into_owned();
                fields.remove(0);
            }
        }
        if fields.len() != 4 {
            r.unparsed("expected [Tag=…,]start,length,max,histogram");
            continue;
        }
        let (Some(start), Some(len)) = (parse_f64(fields[0]), parse_f64(fields[1])) else {
            r.unparsed("start or length is not a number");
            continue;
        };
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(fields[3].trim_ascii())
        else {
            r.unparsed("histogram is not base64");
            continue;
        };
        let h: Histogram<u64> = match crate::results::decode_v2_bounded(&bytes) {
            Ok(h) => h,
            Err(_) => {
                r.unparsed("histogram cannot be decoded (not V2/V2-deflate)");
                continue;
            }
        };
        let mut out = new_histogram();
        if scale == 1.0 {
            for v in h.iter_recorded() {
                out.saturating_record_n(
                    h.median_equivalent(v.value_iterated_to()),
                    v.count_at_value(),
                );
            }
        } else {
            for v in h.iter_recorded() {
                let x = (h.median_equivalent(v.value_iterated_to()) as f64 * scale) as u64;
                out.saturating_record_n(x.max(1), v.count_at_value());
            }
        }
        entries.push((start, len.max(0.0), tag, out));
        r.parsed();
    }
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    // Absolute start of the first interval, when known.
    let first = entries.iter().map(|e| e.0).fold(f64::INFINITY, f64::min);
    let absolute = first > 1e9; // epoch seconds (2001+)
    let origin = if absolute {
        Some(first)
    } else {
        base_time.or(start_time).map(|b| b + first)
    };
    entries.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Group entries with the same start/length into one interval (tags share intervals).
    let mut ss = SnapshotSeries::new();
    let mut groups: BTreeMap<(i64, i64), Vec<usize>> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        groups
            .entry((((e.0 - first) * 1e6) as i64, (e.1 * 1e6) as i64))
            .or_default()
            .push(i);
    }
    for ((s, l), idx) in groups {
        ss.begin_interval(s as f64 / 1e6, l as f64 / 1e6);
        for i in idx {
            let op = ss.op(&entries[i].2);
            ss.add_hist(op, &entries[i].3);
        }
    }
    let n = ss.len();
    let (ops, duration) = ss.finish(BucketConvention::Exact);
    Ok(vec![ingest_run(
        "hlog",
        Format::Hlog,
        ops,
        origin
            .map(|o| rfc3339_ns((o * 1e9) as i64))
            .unwrap_or_default(),
        duration,
        if n > 0 { duration / n as f64 } else { 0.0 },
        json!({"unit_ns": scale}),
    )])
}
