//! The terminal renderer's brief mode for `iolens trace` and `iolens ingest`: the Method R
//! profile (from the typed analysis, as `show` prints it), each series' events with their
//! percentiles and bucket convention, the slowest waits, and how every input line was used.

use std::fmt::Write as _;
use std::path::Path;

use super::table::Table;
use super::TermStyle;
use crate::out::fit;
use crate::results::evidence::SlowWait;
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
                let rates = if run.ops.iter().any(|o| o.bytes > 0) {
                    format!("{}, MB/s", super::rate_name(r))
                } else {
                    super::rate_name(r).to_string()
                };
                format!("{n_iv} histogram(s), duration unknown: {rates} {UNKNOWN_RATE}")
            } else {
                format!(
                    "{} s, {n_iv} interval(s) of {} s",
                    sig3(run.duration_s),
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
            .as_ref()
            .and_then(|s| s.bucket_convention_basis.as_deref())
        {
            let _ = writeln!(tail, "  buckets: {why}");
        }
        for w in &run.warnings {
            let _ = writeln!(tail, "  warning: {w}");
        }
        s.push_str(&fit(&tail, style.width));
    }
    s.push_str(&super::io_stats::text(r, style));
    let mut tail = String::new();
    slowest(&r.trace_slowest, &mut tail);
    files(r, &mut tail);
    for w in &r.warnings {
        let _ = writeln!(tail, "warning: {w}");
    }
    s.push_str(&fit(&tail, style.width));
    s
}

/// The slowest single waits of a trace ([`Results::trace_slowest`]), at most ten.
fn slowest(list: &[SlowWait], out: &mut String) {
    if list.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nSlowest waits:");
    for w in list.iter().take(10) {
        let opt = |k: &str, v: Option<i64>| v.map(|v| format!(" {k}={v}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:>9}  {}  {}:{}{}{}{}{}",
            fmt_ns(w.ela_us as f64 * 1e3),
            w.event,
            Path::new(&w.path)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| w.path.clone()),
            w.line,
            opt("file", w.file),
            opt("block", w.block.and_then(|b| i64::try_from(b).ok())),
            opt("obj", w.obj),
            if w.time.is_empty() {
                String::new()
            } else {
                format!(" at {}", w.time)
            },
        );
    }
}

/// How each input file's lines were used ([`Results::source`]), with the first lines that
/// could not be parsed.
fn files(r: &Results, out: &mut String) {
    let Some(src) = &r.source else {
        return;
    };
    let _ = writeln!(out);
    for f in &src.files {
        let _ = writeln!(
            out,
            "{}: {} lines, {} used, {} ignored, {} unparsed",
            f.path,
            f.lines,
            f.parsed,
            f.ignored.values().fold(0u64, |a, v| a.saturating_add(*v)),
            f.unparsed
        );
        for u in &f.unparsed_first {
            let _ = writeln!(out, "  line {}: {} ({})", u.line, u.text, u.reason);
        }
    }
}
