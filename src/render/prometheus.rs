//! The Prometheus text exposition (format 0.0.4, which OpenMetrics parsers and the node_exporter
//! textfile collector read too): an [`Exposition`] worded line by line, and a results
//! document made one (`run`, `calibrate`, `db run --metrics FILE`).
//!
//! Latencies are histograms in seconds on one fixed bucket layout ([`crate::histogram::classic`]):
//! classic buckets, 16 an octave from 238 ns to 64 s, each 4.43 % wide (text and protobuf), and
//! native ones at schema 5, 2.19 % wide (protobuf only), so series of many hosts add up with
//! `sum by (le)` or `sum` and `histogram_quantile` is within a bucket's width of the exact
//! quantile.

use std::fmt::Write as _;

use anyhow::Result;

use crate::histogram::classic::{
    classic_bound_ns, zero_threshold_s, PromHist, CLASSIC_BOUNDS, NATIVE_SCHEMA,
};
use crate::results::analysis::Analysis;
use crate::results::exposition::{Exposition, MetricKind, SampleValue};
use crate::results::metric_family as mf;
use crate::results::Results;

/// The content type of the text exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value escaped as the exposition wants it (backslash, double quote, newline).
fn escape(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// `{a="x",b="y"` (open: the caller adds `le` or closes it), or nothing when there are no
/// labels and no `le` follows.
fn labels(ls: &[(String, String)], out: &mut String) {
    out.push('{');
    for (i, (k, v)) in ls.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        escape(v, out);
        out.push('"');
    }
}

/// A float as the exposition writes it (`+Inf`, `-Inf`, `NaN` spelled out).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// The `le` label values of the layout, seconds (the same text on every host).
pub fn le_values() -> &'static [String] {
    static LE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    LE.get_or_init(|| {
        (0..CLASSIC_BOUNDS)
            .map(|j| number(classic_bound_ns(j) / 1e9))
            .chain(std::iter::once("+Inf".to_string()))
            .collect()
    })
}

fn histogram(name: &str, ls: &[(String, String)], h: &PromHist, out: &mut String) {
    let le = le_values();
    let mut head = String::new();
    labels(ls, &mut head);
    if !ls.is_empty() {
        head.push(',');
    }
    for (j, cum) in h.cumulative().enumerate() {
        let _ = writeln!(out, "{name}_bucket{head}le=\"{}\"}} {cum}", le[j]);
    }
    let tail = if ls.is_empty() {
        String::new()
    } else {
        let mut t = String::new();
        labels(ls, &mut t);
        t.push('}');
        t
    };
    let _ = writeln!(out, "{name}_sum{tail} {}", number(h.sum_ns as f64 / 1e9));
    let _ = writeln!(out, "{name}_count{tail} {}", h.count);
}

/// The text exposition of `e`.
pub fn text(e: &Exposition) -> String {
    let mut out = String::new();
    for f in &e.families {
        if f.samples.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help.replace('\n', " "));
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.name());
        for s in &f.samples {
            match &s.value {
                SampleValue::Hist(h) => histogram(&f.name, &s.labels, h, &mut out),
                SampleValue::Number(v) => {
                    out.push_str(&f.name);
                    if !s.labels.is_empty() {
                        labels(&s.labels, &mut out);
                        out.push('}');
                    }
                    let _ = writeln!(out, " {}", number(*v));
                }
            }
        }
    }
    out
}

/// One histogram as protobuf: its classic buckets (cumulative, seconds; the `+Inf` one is
/// implied by the count) and its native histogram at schema 5 (zero bucket, spans of
/// consecutive buckets, each bucket's count as the difference from the previous one's).
fn proto_histogram(h: &PromHist) -> mf::Histogram {
    let bucket = h
        .cumulative()
        .take(CLASSIC_BOUNDS)
        .enumerate()
        .map(|(j, cum)| mf::Bucket {
            cumulative_count: Some(cum),
            upper_bound: Some(classic_bound_ns(j) / 1e9),
        })
        .collect();
    let mut spans: Vec<mf::BucketSpan> = Vec::new();
    let mut deltas = Vec::new();
    let (mut next, mut prev) = (None::<i32>, 0i64);
    for (i, n) in h.native() {
        match next {
            Some(e) if e == i => {
                if let Some(s) = spans.last_mut() {
                    s.length = Some(s.length.unwrap_or(0) + 1);
                }
            }
            _ => spans.push(mf::BucketSpan {
                offset: Some(next.map_or(i, |e| i - e)),
                length: Some(1),
            }),
        }
        deltas.push(n as i64 - prev);
        prev = n as i64;
        next = Some(i + 1);
    }
    mf::Histogram {
        sample_count: Some(h.count),
        sample_sum: Some(h.sum_ns as f64 / 1e9),
        bucket,
        schema: Some(NATIVE_SCHEMA),
        zero_threshold: Some(zero_threshold_s()),
        zero_count: Some(h.zero_count()),
        positive_span: spans,
        positive_delta: deltas,
        ..Default::default()
    }
}

/// The protobuf exposition of `e` (`encoding=delimited`: each family prefixed by its length),
/// the one format that carries native histograms.
pub fn protobuf(e: &Exposition) -> Vec<u8> {
    use prost::Message as _;
    let mut out = Vec::new();
    for f in &e.families {
        if f.samples.is_empty() {
            continue;
        }
        let metric = f
            .samples
            .iter()
            .map(|s| {
                let mut m = mf::Metric {
                    label: s
                        .labels
                        .iter()
                        .map(|(k, v)| mf::LabelPair {
                            name: Some(k.clone()),
                            value: Some(v.clone()),
                        })
                        .collect(),
                    ..Default::default()
                };
                match (&s.value, f.kind) {
                    (SampleValue::Hist(h), _) => m.histogram = Some(proto_histogram(h)),
                    (SampleValue::Number(v), MetricKind::Counter) => {
                        m.counter = Some(mf::Counter { value: Some(*v) })
                    }
                    (SampleValue::Number(v), _) => m.gauge = Some(mf::Gauge { value: Some(*v) }),
                }
                m
            })
            .collect();
        let fam = mf::MetricFamily {
            name: Some(f.name.clone()),
            help: Some(f.help.clone()),
            r#type: Some(match f.kind {
                MetricKind::Counter => mf::TYPE_COUNTER,
                MetricKind::Gauge => mf::TYPE_GAUGE,
                MetricKind::Histogram => mf::TYPE_HISTOGRAM,
            }),
            metric,
        };
        // Writing to a Vec cannot fail.
        let _ = fam.encode_length_delimited(&mut out);
    }
    out
}

/// Whether an HTTP `Accept` header asks for the protobuf exposition (as Prometheus does with
/// its native-histogram feature on) before the text one: its first media range naming
/// `application/vnd.google.protobuf` with `proto=io.prometheus.client.MetricFamily` and
/// `encoding=delimited` has a q above every text range's.
pub fn wants_protobuf(accept: &str) -> bool {
    let q_of = |range: &str| {
        range
            .split(';')
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f64>().ok())
            .unwrap_or(1.0)
    };
    let mut proto = None::<f64>;
    let mut other = 0f64;
    for range in accept.split(',') {
        let r = range.to_ascii_lowercase();
        let media = r.split(';').next().unwrap_or("").trim();
        if media == "application/vnd.google.protobuf" {
            let params: Vec<String> = r.split(';').skip(1).map(|p| p.replace(' ', "")).collect();
            if params
                .iter()
                .any(|p| p == "proto=io.prometheus.client.metricfamily")
                && params.iter().any(|p| p == "encoding=delimited")
            {
                proto = Some(proto.unwrap_or(0.0).max(q_of(&r)));
            }
        } else if !media.is_empty() {
            other = other.max(q_of(&r));
        }
    }
    proto.is_some_and(|q| q > 0.0 && q >= other)
}

/// Latency histograms of every op of every run.
pub const OP_LATENCY: &str = "iolens_op_latency_seconds";

/// A results document as an exposition: per run and op its latency histogram (seconds), I/O,
/// error and byte counters, the run's length, and each verdict as a gauge of 1 labelled with
/// its kind and severity.
pub fn of_results(r: &Results, an: &Analysis) -> Result<Exposition> {
    let mut e = Exposition::default();
    let kind = r.kind.name();
    for run in &r.runs {
        for op in &run.ops {
            let ls = [
                ("kind", kind),
                ("run", run.name.as_str()),
                ("op", op.op.as_str()),
            ];
            let h = PromHist::from_hdr(&op.hist.decode()?);
            e.family(
                OP_LATENCY,
                "Latency of each completed operation, seconds (classic buckets: 16 an octave from \
                 238 ns to 64 s).",
                MetricKind::Histogram,
            )
            .push(&ls, SampleValue::Hist(h));
            e.family(
                "iolens_op_errors_total",
                "Operations that failed (counted, not timed).",
                MetricKind::Counter,
            )
            .push(&ls, SampleValue::Number(op.errors as f64));
            e.family(
                "iolens_op_bytes_total",
                "Bytes the operations transferred.",
                MetricKind::Counter,
            )
            .push(&ls, SampleValue::Number(op.bytes as f64));
        }
        e.family(
            "iolens_run_duration_seconds",
            "Length of the run's measured window, seconds.",
            MetricKind::Gauge,
        )
        .push(
            &[("kind", kind), ("run", run.name.as_str())],
            SampleValue::Number(run.duration_s),
        );
    }
    let verdicts = an
        .runs
        .iter()
        .zip(&r.runs)
        .flat_map(|(a, run)| a.verdicts.iter().map(move |v| (run.name.as_str(), v)))
        .chain(
            an.watch
                .iter()
                .flat_map(|w| w.verdicts.iter().map(|v| ("watch", v))),
        );
    for (run, v) in verdicts {
        e.family(
            "iolens_verdict",
            "A verdict of the analysis (1 while it holds), labelled by its kind and severity.",
            MetricKind::Gauge,
        )
        .push(
            &[
                ("kind", kind),
                ("run", run),
                ("verdict", v.kind.as_str()),
                ("severity", v.severity.as_str()),
            ],
            SampleValue::Number(1.0),
        );
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_with_every_bound_and_escaped_labels() {
        let mut e = Exposition::default();
        let mut h = PromHist::default();
        for v in [100, 300, 1_000_000, 1u64 << 40] {
            h.record(v);
        }
        e.family("x_seconds", "help", MetricKind::Histogram)
            .push(&[("op", "a\"b\\c")], SampleValue::Hist(h));
        e.family("y_total", "h", MetricKind::Counter)
            .push(&[], SampleValue::Number(3.0));
        let t = text(&e);
        let buckets: Vec<&str> = t.lines().filter(|l| l.contains("_bucket")).collect();
        assert_eq!(buckets.len(), CLASSIC_BOUNDS + 1);
        assert!(buckets[0]
            .starts_with("x_seconds_bucket{op=\"a\\\"b\\\\c\",le=\"0.0000002384185791015625\"} 1"));
        assert!(buckets[CLASSIC_BOUNDS].ends_with("le=\"+Inf\"} 4"));
        assert_eq!(buckets[CLASSIC_BOUNDS - 1].rsplit(' ').next(), Some("3"));
        assert!(t.contains("x_seconds_count{op=\"a\\\"b\\\\c\"} 4\n"));
        assert!(t.contains("\ny_total 3\n"));
    }

    #[test]
    fn protobuf_native_buckets_decode_to_the_values_recorded() {
        use prost::Message as _;
        let mut h = PromHist::default();
        let vals = [
            50u64,
            120,
            3_000,
            3_010,
            3_100,
            9_000,
            2_000_000,
            90_000_000_000,
        ];
        for v in vals {
            h.record(v);
        }
        let mut e = Exposition::default();
        e.family("x_seconds", "help", MetricKind::Histogram)
            .push(&[("op", "read")], SampleValue::Hist(h));
        e.family("y_total", "h", MetricKind::Counter)
            .push(&[], SampleValue::Number(3.0));
        let bytes = protobuf(&e);
        let mut buf = bytes.as_slice();
        let f = mf::MetricFamily::decode_length_delimited(&mut buf).unwrap();
        let c = mf::MetricFamily::decode_length_delimited(&mut buf).unwrap();
        assert!(buf.is_empty());
        assert_eq!(c.r#type, Some(mf::TYPE_COUNTER));
        assert_eq!(c.metric[0].counter.as_ref().unwrap().value, Some(3.0));
        let hist = f.metric[0].histogram.as_ref().unwrap();
        assert_eq!(hist.sample_count, Some(vals.len() as u64));
        assert_eq!(hist.zero_count, Some(2));
        // Spans and deltas back to (index, count): every value in the bucket that holds it.
        let base = 2f64.powf(2f64.powi(-NATIVE_SCHEMA));
        let (mut i, mut n, mut d) = (0i32, 0i64, hist.positive_delta.iter());
        let mut got = Vec::new();
        for (k, s) in hist.positive_span.iter().enumerate() {
            i = if k == 0 {
                s.offset.unwrap()
            } else {
                i + s.offset.unwrap()
            };
            for _ in 0..s.length.unwrap() {
                n += d.next().unwrap();
                got.push((i, n));
                i += 1;
            }
        }
        let mut want: Vec<(i32, i64)> = Vec::new();
        for v in vals
            .iter()
            .map(|&v| v as f64 / 1e9)
            .filter(|&v| v > zero_threshold_s())
        {
            let idx = (v.ln() / base.ln()).ceil() as i32;
            assert!(v <= base.powi(idx) * (1.0 + 1e-12) && v > base.powi(idx - 1));
            match want.last_mut() {
                Some((j, c)) if *j == idx => *c += 1,
                _ => want.push((idx, 1)),
            }
        }
        assert_eq!(got, want);
        assert_eq!(hist.bucket.len(), CLASSIC_BOUNDS);
        assert_eq!(hist.bucket[0].cumulative_count, Some(2));
    }

    #[test]
    fn protobuf_is_chosen_only_when_asked_first() {
        // Prometheus 2.42 with --enable-feature=native-histograms, and without.
        assert!(wants_protobuf(
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;\
             encoding=delimited;q=0.8,application/openmetrics-text;version=1.0.0;q=0.6,\
             text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(!wants_protobuf(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
             version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(!wants_protobuf("*/*"));
        assert!(!wants_protobuf(
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;\
             encoding=text;q=0.9,text/plain;q=0.5"
        ));
    }
}
