//! The terminal renderer's brief mode for `iolens trace` and `iolens ingest`: the Method R
//! profile (from the typed analysis, as `show` prints it), each series' events with their
//! percentiles and bucket convention, the slowest waits, and how every input line was used.

use std::fmt::Write as _;
use std::path::Path;

use super::table::Table;
use super::TermStyle;
use crate::out::fit;
use crate::results::{BucketConvention, Results, UNKNOWN_RATE};
use crate::units::{fmt_ns, sig3};

/// The closing summary of a trace or ingest results document, fitted to `style.width`.
pub fn sources_summary(r: &Results, style: &TermStyle) -> String {
    let an = crate::analysis::of(r);
    let mut s = fit(&super::analysis::text(r, &an, style), style.width);
    for run in &r.runs {
        let n_iv = run.ops.first().map(|o| o.intervals.len()).unwrap_or(0);
        let mut head = format!(
            "\n{}  ({}{})\n",
            run.name,
            if run.started.is_empty() {
                String::new()
            } else {
                format!("{}, ", run.started)
            },
            if run.duration_unknown {
                format!("{n_iv} histogram(s), duration unknown: IOPS, MB/s {UNKNOWN_RATE}")
            } else {
                format!(
                    "{:.1} s, {n_iv} interval(s) of {} s",
                    run.duration_s,
                    sig3(run.interval_s)
                )
            }
        );
        head = fit(&head, style.width);
        s.push_str(&head);
        let mut t = Table::new(&[
            "event", "count", "mean", "p50", "p99", "p99.9", "max", "buckets",
        ]);
        for o in &run.ops {
            let l = &o.summary;
            t.row(vec![
                o.op.clone(),
                l.count.to_string(),
                fmt_ns(l.mean_ns),
                fmt_ns(l.p50_ns as f64),
                fmt_ns(l.p99_ns as f64),
                fmt_ns(l.p999_ns as f64),
                fmt_ns(l.max_ns as f64),
                match o.bucket_convention {
                    BucketConvention::Exact => "exact",
                    BucketConvention::UpperBound => "upper-bound",
                    BucketConvention::LowerBound => "lower-bound",
                }
                .into(),
            ]);
        }
        let inner = TermStyle {
            width: style.width.saturating_sub(2),
            ..*style
        };
        for line in t.render(&inner).lines() {
            let _ = writeln!(s, "  {line}");
        }
        let mut tail = String::new();
        if let Some(why) = run
            .spec
            .get("bucket_convention_basis")
            .and_then(|v| v.as_str())
        {
            let _ = writeln!(tail, "  buckets: {why}");
        }
        for w in &run.warnings {
            let _ = writeln!(tail, "  warning: {w}");
        }
        s.push_str(&fit(&tail, style.width));
    }
    let mut tail = String::new();
    if let Some(sl) = r.extra.get("trace_slowest") {
        slowest(sl, &mut tail);
    }
    files(r, &mut tail);
    for w in &r.warnings {
        let _ = writeln!(tail, "warning: {w}");
    }
    s.push_str(&fit(&tail, style.width));
    s
}

/// The slowest single waits of a trace (`extra["trace_slowest"]`), at most ten.
fn slowest(list: &serde_json::Value, out: &mut String) {
    let Some(list) = list.as_array().filter(|l| !l.is_empty()) else {
        return;
    };
    let _ = writeln!(out, "\nSlowest waits:");
    for w in list.iter().take(10) {
        let opt = |k: &str| {
            w[k].as_i64()
                .map(|v| format!(" {k}={v}"))
                .unwrap_or_default()
        };
        let path = w["path"].as_str().unwrap_or("?");
        let _ = writeln!(
            out,
            "  {:>9}  {}  {}:{}{}{}{}{}",
            fmt_ns(w["ela_us"].as_f64().unwrap_or(0.0) * 1e3),
            w["event"].as_str().unwrap_or("?"),
            Path::new(path)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.to_string()),
            w["line"],
            opt("file"),
            opt("block"),
            opt("obj"),
            w["time"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(|t| format!(" at {t}"))
                .unwrap_or_default(),
        );
    }
}

/// How each input file's lines were used (`extra["source"]["files"]`), with the first lines
/// that could not be parsed.
fn files(r: &Results, out: &mut String) {
    let Some(files) = r
        .extra
        .get("source")
        .and_then(|s| s.get("files"))
        .and_then(|f| f.as_array())
    else {
        return;
    };
    let _ = writeln!(out);
    for f in files {
        let g = |k: &str| f.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        let _ = writeln!(
            out,
            "{}: {} lines, {} used, {} ignored, {} unparsed",
            f.get("path").and_then(|v| v.as_str()).unwrap_or("?"),
            g("lines"),
            g("parsed"),
            f.get("ignored")
                .and_then(|v| v.as_object())
                .map(|m| m.values().filter_map(|v| v.as_u64()).sum::<u64>())
                .unwrap_or(0),
            g("unparsed")
        );
        for u in f
            .get("unparsed_first")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            let _ = writeln!(
                out,
                "  line {}: {} ({})",
                u.get("line").and_then(|v| v.as_u64()).unwrap_or(0),
                u.get("text").and_then(|v| v.as_str()).unwrap_or(""),
                u.get("reason").and_then(|v| v.as_str()).unwrap_or("")
            );
        }
    }
}
