//! The Prometheus text exposition (format 0.0.4; OpenMetrics text reads the same for classic
//! histograms): every classic histogram family (`# TYPE NAME histogram`, its `NAME_bucket`
//! series with `le`) into a run named by the family, one op per series named by its labels
//! (`k=v,k=v`, `le` left out). An `iolens watch --prometheus` scrape (`curl .../metrics`), a
//! `--metrics FILE`, node_exporter's or any other exporter's histograms read alike.
//!
//! A bucket's count (its cumulative count less the previous one's) is spread over `(previous
//! le, le]`; the `+Inf` bucket's at the last finite bound. Latencies are in the unit the family's
//! name ends with (`_seconds`, `_milliseconds`, `_microseconds`, `_nanoseconds`), else
//! `--unit`; without either (`_bytes`, `_samples`) the family is left out with a warning. An exposition is one snapshot of
//! cumulative counters, so the run has one interval and no duration (give `--duration`).
//! Counters, gauges and summaries are not latency histograms and are counted as ignored lines.
//!
//! The protobuf exposition (`application/vnd.google.protobuf; proto=io.prometheus.client.
//! MetricFamily; encoding=delimited`, what a scrape that asks for it gets, and the only one that
//! carries native histograms) is told from text by its first bytes and read alike: a series'
//! native buckets when it has them (schema `s`: bucket `i` holds `(2^((i-1)/2^s), 2^(i/2^s)]`;
//! the zero bucket `[0, zero_threshold]`), else its classic ones (the count past the last bound,
//! `sample_count` less the last cumulative count, at that bound, as `+Inf`'s in text).

use std::collections::BTreeMap;

use super::*;

/// One series of a histogram family: its bounds (le, in the family's unit) and cumulative counts.
#[derive(Default)]
struct Series {
    buckets: Vec<(f64, u64)>,
    count: Option<u64>,
}

/// Labels as read: (name, value).
type Labels = Vec<(String, String)>;

/// A sample line's name, labels and value (`None`: not a sample line).
fn sample(line: &str) -> Option<(&str, Labels, f64)> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_ascii_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        let mut chars = r.char_indices().peekable();
        let mut key = String::new();
        let end;
        loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => {
                    end = i + 1;
                    break;
                }
                ',' | ' ' => continue,
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut v = String::new();
                    loop {
                        let (_, c) = chars.next()?;
                        match c {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => v.push('\n'),
                                c => v.push(c),
                            },
                            c => v.push(c),
                        }
                    }
                    labels.push((std::mem::take(&mut key), v));
                }
                c => key.push(c),
            }
        }
        rest = &r[end..];
    }
    let v = rest.split_whitespace().next()?;
    let value = match v {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some((name, labels, value))
}

/// Nanoseconds per unit of a family named `name` (`None`: its name says no time unit).
fn unit_of(name: &str) -> Option<f64> {
    [
        ("_seconds", 1e9),
        ("_milliseconds", 1e6),
        ("_microseconds", 1e3),
        ("_nanoseconds", 1.0),
    ]
    .iter()
    .find(|(s, _)| name.ends_with(s))
    .map(|(_, u)| *u)
}

/// A series' counts as pieces `(lo, hi, n)`: `n` values in `(lo, hi]`, in the family's unit.
type Pieces = Vec<(f64, f64, u64)>;

/// Histogram families → their series (labels `k=v,k=v`, pieces) in order first seen.
type Families = BTreeMap<String, Vec<(String, Pieces)>>;

pub(crate) fn read(r: &mut LineReader, args: &IngestOptions) -> Result<Vec<RunResult>> {
    if looks_protobuf(r.peek(8)?) {
        let fams = read_protobuf(r)?;
        return runs_of(fams, r, args);
    }
    let mut histograms: BTreeMap<String, ()> = BTreeMap::new();
    // family → series (by labels) in order first seen.
    let mut fams: BTreeMap<String, Vec<(String, Series)>> = BTreeMap::new();
    let mut repeated = 0u64;
    while let Some(line) = r.next_line()? {
        let t = String::from_utf8_lossy(line.trim_ascii()).into_owned();
        if t.is_empty() {
            r.ignored("blank");
            continue;
        }
        if let Some(c) = t.strip_prefix('#') {
            let mut w = c.split_whitespace();
            if w.next() == Some("TYPE") {
                if let (Some(n), Some("histogram")) = (w.next(), w.next()) {
                    histograms.insert(n.to_string(), ());
                }
            }
            r.ignored("comment");
            continue;
        }
        let Some((name, labels, value)) = sample(&t) else {
            r.unparsed("not a sample line (NAME{LABELS} VALUE)");
            continue;
        };
        let (fam, part) = match ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| name.strip_suffix(s).map(|f| (f, *s)))
        {
            Some((f, p)) if histograms.contains_key(f) => (f.to_string(), p),
            _ => {
                r.ignored("not a histogram");
                continue;
            }
        };
        let key = labels
            .iter()
            .filter(|(k, _)| k != "le")
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let series = fams.entry(fam).or_default();
        let i = match series.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                if series.len() >= MAX_SERIES_OPS {
                    bail!(
                        "line {}: more than {MAX_SERIES_OPS} series in one histogram family",
                        r.line_no
                    );
                }
                series.push((key, Series::default()));
                series.len() - 1
            }
        };
        let s = &mut series[i].1;
        if !(value.is_finite() && value >= 0.0) && part != "_sum" {
            r.unparsed("a count that is not a finite, non-negative number");
            continue;
        }
        match part {
            "_bucket" => {
                let Some(le) =
                    labels
                        .iter()
                        .find(|(k, _)| k == "le")
                        .and_then(|(_, v)| match v.as_str() {
                            "+Inf" | "Inf" => Some(f64::INFINITY),
                            v => v.parse::<f64>().ok(),
                        })
                else {
                    r.unparsed("a bucket without an le label");
                    continue;
                };
                if s.buckets.iter().any(|b| b.0 == le) {
                    repeated += 1;
                }
                super::bcc::impossible_count(value as u64, r.line_no)?;
                s.buckets.push((le, value as u64));
            }
            "_count" => s.count = Some(value as u64),
            _ => {}
        }
        r.parsed();
    }
    if repeated > 0 {
        bail!(
            "{repeated} bucket(s) appear twice in one series: several scrapes in one file? \
             Give each scrape as its own file"
        );
    }
    let mut out: Families = BTreeMap::new();
    for (fam, series) in fams {
        let mut pieces_of = Vec::new();
        for (key, mut s) in series {
            s.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut prev = (0.0f64, 0u64);
            let last_finite = s
                .buckets
                .iter()
                .rev()
                .find(|b| b.0.is_finite())
                .map_or(0.0, |b| b.0);
            let mut pieces = Vec::new();
            for &(le, cum) in &s.buckets {
                if cum < prev.1 {
                    bail!(
                        "{fam}{{{key}}}: bucket le={le} holds {cum}, less than the one before \
                         ({}): not cumulative counts",
                        prev.1
                    );
                }
                let hi = if le.is_finite() { le } else { last_finite };
                pieces.push((prev.0, hi, cum - prev.1));
                prev = (hi, cum);
            }
            if let Some(c) = s.count {
                if c != prev.1 {
                    bail!(
                        "{fam}{{{key}}}: _count is {c} but the buckets hold {}",
                        prev.1
                    );
                }
            }
            pieces_of.push((key, pieces));
        }
        out.insert(fam, pieces_of);
    }
    runs_of(out, r, args)
}

/// Whether the input begins as a delimited protobuf exposition does: a message's length (a
/// varint) and then its first field, the family's name (field 1, length-delimited: 0x0a). Text
/// begins with `#` or a metric name, and a name one letter long alone on its line is no sample.
fn looks_protobuf(head: &[u8]) -> bool {
    let Some(n) = head.iter().take(5).position(|b| b & 0x80 == 0) else {
        return false;
    };
    head.first() != Some(&b'#') && head.get(n + 1) == Some(&0x0a)
}

/// The histogram families of a delimited protobuf exposition (see the module doc).
fn read_protobuf(r: &mut LineReader) -> Result<Families> {
    use crate::results::metric_family::{MetricFamily, TYPE_HISTOGRAM};
    use prost::Message as _;
    let mut fams: Families = BTreeMap::new();
    let mut at = 0u64;
    while let Some(msg) = r.take_delimited()? {
        at += 1;
        let f = MetricFamily::decode(msg.as_slice())
            .with_context(|| format!("message {at}: not a MetricFamily (protobuf exposition)"))?;
        let name = f.name.clone().unwrap_or_default();
        if f.r#type != Some(TYPE_HISTOGRAM) {
            r.ignored("not a histogram");
            continue;
        }
        let series = fams.entry(name.clone()).or_default();
        for m in &f.metric {
            let Some(h) = &m.histogram else {
                bail!("message {at}: {name}: a histogram family's metric without a histogram");
            };
            let key = m
                .label
                .iter()
                .map(|l| {
                    format!(
                        "{}={}",
                        l.name.as_deref().unwrap_or(""),
                        l.value.as_deref().unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join(",");
            if series.len() >= MAX_SERIES_OPS {
                bail!("message {at}: more than {MAX_SERIES_OPS} series in one histogram family");
            }
            let pieces = histogram_pieces(h).with_context(|| format!("{name}{{{key}}}"))?;
            series.push((key, pieces));
        }
        r.parsed();
    }
    Ok(fams)
}

/// One protobuf histogram's counts as pieces: its native buckets when it has them, else its
/// classic ones.
fn histogram_pieces(h: &crate::results::metric_family::Histogram) -> Result<Pieces> {
    let count = h.sample_count.unwrap_or(0);
    let mut pieces = Vec::new();
    let native = h.schema.is_some()
        && (!h.positive_span.is_empty() || h.zero_count.is_some() || h.bucket.is_empty());
    if native {
        let schema = h.schema.unwrap_or(0);
        if !(-4..=8).contains(&schema) {
            bail!("native histogram schema {schema} (Prometheus knows -4..8)");
        }
        // Negative buckets hold negative values: not latencies (empty ones are fine).
        let mut neg = 0i64;
        for d in &h.negative_delta {
            neg += d;
            if neg != 0 {
                bail!("native histogram with negative values: not latencies");
            }
        }
        let zero = h.zero_count.unwrap_or(0);
        if zero > 0 {
            pieces.push((0.0, h.zero_threshold.unwrap_or(0.0).max(0.0), zero));
        }
        let base = 2f64.powf(2f64.powi(-schema));
        let (mut deltas, mut i, mut n) = (h.positive_delta.iter(), 0i64, 0i64);
        for span in &h.positive_span {
            i += i64::from(span.offset.unwrap_or(0));
            for _ in 0..span.length.unwrap_or(0) {
                let Some(d) = deltas.next() else {
                    bail!("native histogram with fewer deltas than its spans' buckets");
                };
                n += d;
                if n < 0 {
                    bail!("native histogram bucket {i} holds a negative count ({n})");
                }
                let (lo, hi) = (base.powi(i as i32 - 1), base.powi(i as i32));
                pieces.push((lo, hi, n as u64));
                i += 1;
            }
        }
        if deltas.next().is_some() {
            bail!("native histogram with more deltas than its spans' buckets");
        }
    } else {
        let mut prev = (0.0f64, 0u64);
        for b in &h.bucket {
            let (le, cum) = (
                b.upper_bound.unwrap_or(f64::NAN),
                b.cumulative_count.unwrap_or(0),
            );
            if le.is_nan() || le < prev.0 || cum < prev.1 {
                bail!(
                    "classic bucket le={le} ({cum}) out of order after le={} ({})",
                    prev.0,
                    prev.1
                );
            }
            let hi = if le.is_finite() { le } else { prev.0 };
            pieces.push((prev.0, hi, cum - prev.1));
            prev = (hi, cum);
        }
        // Past the last bound (`+Inf`, never sent in protobuf): at that bound.
        if count > prev.1 {
            pieces.push((prev.0, prev.0, count - prev.1));
        }
    }
    let held: u64 = pieces.iter().map(|p| p.2).sum();
    if held != count {
        bail!("sample_count is {count} but the buckets hold {held}");
    }
    Ok(pieces)
}

/// The runs of `fams`: one per family, one op per series (see the module doc).
fn runs_of(fams: Families, r: &mut LineReader, args: &IngestOptions) -> Result<Vec<RunResult>> {
    let mut runs = Vec::new();
    for (fam, series) in fams {
        // A histogram of bytes or samples is not a latency: left out, and said.
        let Some(unit_ns) = unit_of(&fam).or(args.unit.map(|u| u.ns())) else {
            r.warnings.push(format!(
                "histogram {fam} left out: its name ends in no time unit (_seconds, \
                 _milliseconds, ...); --unit reads it as latencies in that unit"
            ));
            continue;
        };
        let mut ss = SnapshotSeries::new();
        ss.begin_interval(0.0, 0.0);
        for (key, pieces) in series {
            let op = ss.op(if key.is_empty() { &fam } else { &key })?;
            for (lo, hi, n) in pieces {
                if n == 0 {
                    continue;
                }
                let lo_ns = (lo * unit_ns).round() as u64;
                let hi_ns = (hi * unit_ns).round() as u64;
                // (lo, hi]: the spread's [lo, hi) moved up by one ns.
                let lo = lo_ns.saturating_add(1);
                ss.add_spread(op, lo, hi_ns.max(lo).saturating_add(1), n);
            }
        }
        let (ops, _) = ss.finish(BucketConvention::UpperBound);
        let mut run = ingest_run(
            &fam,
            Format::Prometheus,
            ops,
            String::new(),
            0.0,
            0.0,
            serde_json::json!({"series": fam, "unit_ns": unit_ns,
                "bucket_convention_basis": "upper-bound: a bucket le=X holds the values above the previous bound up to X"}),
        );
        run.duration_unknown = true;
        run.warnings.push(
            "one exposition of cumulative counts: counts and percentiles only, no time span \
             (give --duration for rates)"
                .into(),
        );
        runs.push(run);
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_lines_with_escaped_labels() {
        let (n, l, v) = sample(r#"x_bucket{op="a\"b",le="0.5"} 12"#).unwrap();
        assert_eq!(n, "x_bucket");
        assert_eq!(l[0], ("op".into(), "a\"b".into()));
        assert_eq!(l[1], ("le".into(), "0.5".into()));
        assert_eq!(v, 12.0);
        assert_eq!(sample("up 1 1700000000000").unwrap().2, 1.0);
        assert!(sample("x{op=\"a} 1").is_none());
    }
}
