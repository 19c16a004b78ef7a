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

use super::{ingest_run, parse_f64, rfc3339_ns, Format, IngestOptions, LineReader, SnapshotSeries};
use crate::histogram::new_histogram;
use crate::results::{BucketConvention, RunResult};

/// Read an HdrHistogram interval log.
pub fn read(r: &mut LineReader, args: &IngestOptions) -> Result<Vec<RunResult>> {
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
        let h: Histogram<u64> = match decode_any(&bytes) {
            Ok(h) => h,
            Err(why) => {
                r.unparsed(&format!("histogram cannot be decoded: {why}"));
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
            let op = ss.op(&entries[i].2)?;
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

/// Cookie bases (the word-size nibble `0xf0` masked off) of HdrHistogram's encodings.
const V0: u32 = 0x1c84_9308;
const V0_DEFLATE: u32 = 0x1c84_9309;
const V1: u32 = 0x1c84_9301;
const V1_DEFLATE: u32 = 0x1c84_9302;
const V2: u32 = 0x1c84_9303;
const V2_DEFLATE: u32 = 0x1c84_9304;

/// Decode any encoding HdrHistogram's own readers decode: V2 and V2-deflate (by the
/// `hdrhistogram` crate), and the older V0 and V1 (fixed-width counts of 2, 4 or 8 bytes; V0
/// has a 32-byte header without payload length), compressed or not, which are re-encoded as V2
/// with the same parameters, so the counts land in exactly the same buckets.
fn decode_any(bytes: &[u8]) -> std::result::Result<Histogram<u64>, String> {
    let cookie = be32(bytes, 0).ok_or("too short")?;
    let base = cookie & !0xf0;
    let plain: Vec<u8>;
    let inner: &[u8] = match base {
        V2 | V2_DEFLATE => {
            // Declared lengths are checked against the data before anything is allocated.
            return crate::histogram::decode_v2_bounded(bytes).map_err(|e| format!("{e:#}"));
        }
        V0 | V1 => bytes,
        V0_DEFLATE | V1_DEFLATE => {
            let len = be32(bytes, 4).ok_or("too short")? as usize;
            let z = bytes
                .get(8..8 + len)
                .ok_or("compressed length beyond the data")?;
            let mut out = Vec::new();
            // Bounded like V2: a small compressed payload cannot inflate without limit.
            let limit = 16u64 << 20;
            std::io::Read::read_to_end(
                &mut std::io::Read::take(flate2::read::ZlibDecoder::new(z), limit + 1),
                &mut out,
            )
            .map_err(|e| format!("bad deflate data: {e}"))?;
            if out.len() as u64 > limit {
                return Err("histogram inflates beyond 16 MiB".into());
            }
            plain = out;
            &plain
        }
        _ => return Err(format!("unknown encoding cookie {cookie:#x}")),
    };
    let cookie = be32(inner, 0).ok_or("too short")?;
    let word = ((cookie & 0xf0) >> 4) & 0xe;
    let (sig, low, high, payload) = match cookie & !0xf0 {
        V0 => {
            let sig = be32(inner, 4).ok_or("short V0 header")?;
            let low = be64(inner, 8).ok_or("short V0 header")?;
            let high = be64(inner, 16).ok_or("short V0 header")?;
            (sig, low, high, inner.get(32..).unwrap_or(&[]))
        }
        V1 => {
            let len = be32(inner, 4).ok_or("short V1 header")? as usize;
            if be32(inner, 8) != Some(0) {
                return Err("normalizing index offset is not supported".into());
            }
            let sig = be32(inner, 12).ok_or("short V1 header")?;
            let low = be64(inner, 16).ok_or("short V1 header")?;
            let high = be64(inner, 24).ok_or("short V1 header")?;
            let p = inner.get(40..).unwrap_or(&[]);
            (sig, low, high, &p[..len.min(p.len())])
        }
        _ => return Err(format!("unexpected inner cookie {cookie:#x}")),
    };
    if !matches!(word, 2 | 4 | 8) {
        return Err(format!("word size {word} is not 2, 4 or 8"));
    }
    let sig = u8::try_from(sig).map_err(|_| "bad significant digits")?;
    let slots = Histogram::<u64>::new_with_bounds(low.max(1), high.max(2 * low.max(1)), sig)
        .map_err(|e| format!("bad histogram parameters: {e:?}"))?
        .distinct_values();
    // Re-encode as uncompressed V2: ZigZag LEB128 counts.
    let mut v2 = Vec::with_capacity(40 + payload.len());
    let mut counts = Vec::new();
    for (i, w) in payload.chunks_exact(word as usize).enumerate() {
        let c: i64 = match word {
            2 => i16::from_be_bytes([w[0], w[1]]) as i64,
            4 => i32::from_be_bytes([w[0], w[1], w[2], w[3]]) as i64,
            _ => i64::from_be_bytes(w.try_into().expect("8 bytes")),
        };
        if c < 0 {
            return Err(format!("negative count {c} at index {i}"));
        }
        if i >= slots {
            if c != 0 {
                return Err(format!("count at index {i} beyond the histogram's range"));
            }
            continue;
        }
        zigzag(&mut counts, c);
    }
    v2.extend_from_slice(&(V2 | 0x10).to_be_bytes());
    v2.extend_from_slice(&(counts.len() as u32).to_be_bytes());
    v2.extend_from_slice(&0u32.to_be_bytes());
    v2.extend_from_slice(&(sig as u32).to_be_bytes());
    v2.extend_from_slice(&low.to_be_bytes());
    v2.extend_from_slice(&high.to_be_bytes());
    v2.extend_from_slice(&1f64.to_be_bytes());
    v2.extend_from_slice(&counts);
    crate::histogram::decode_v2_bounded(&v2).map_err(|e| format!("{e:#}"))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// HdrHistogram's ZigZag LEB128-64b9B: 7 bits a byte for 8 bytes, the 9th byte holds 8 bits.
fn zigzag(out: &mut Vec<u8>, v: i64) {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    for _ in 0..8 {
        if u >> 7 == 0 {
            out.push(u as u8);
            return;
        }
        out.push((u as u8 & 0x7f) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}
