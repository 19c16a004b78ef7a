//! Means-only I/O evidence ([`crate::results::io_stats::IoStats`]) in the terminal: per key and
//! operation the counts, bytes, total time and mean over the window, and the rate where the
//! window's length is known. Never percentiles: these counters hold none.

use std::fmt::Write as _;

use super::table::Table;
use super::TermStyle;
use crate::out::fit;
use crate::results::io_stats::IoStats;
use crate::results::{Results, UNKNOWN_RATE};
use crate::units::{fmt_ns, sig3};

/// Most rows listed per view (the busiest first; the JSON holds them all).
const TOP: usize = 20;

/// The summary of every view in `r.io_stats`, fitted to `style.width`.
pub fn text(r: &Results, style: &TermStyle) -> String {
    let mut s = String::new();
    for v in &r.io_stats {
        view(v, style, &mut s);
    }
    s
}

/// Bytes in binary units.
fn fmt_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{} GiB", sig3(b / (1024.0 * 1024.0 * 1024.0)))
    } else if b >= 1024.0 * 1024.0 {
        format!("{} MiB", sig3(b / (1024.0 * 1024.0)))
    } else if b >= 1024.0 {
        format!("{} KiB", sig3(b / 1024.0))
    } else {
        format!("{b} B")
    }
}

fn view(v: &IoStats, style: &TermStyle, s: &mut String) {
    let span: Option<f64> = v
        .intervals
        .iter()
        .map(|i| i.duration_s)
        .sum::<Option<f64>>()
        .filter(|d| *d > 0.0);
    let head = format!(
        "\n{}  ({} snapshot(s), {} interval(s), {}; means only: no distribution)\n  columns: {}\n",
        v.view,
        v.snapshots,
        v.intervals.len(),
        match span {
            Some(d) => format!("{} s", sig3(d)),
            None => "span unknown".to_string(),
        },
        v.column_set
    );
    s.push_str(&fit(&head, style.width));
    // Keys are long (`client backend/relation/bulkread`, a statement's text): the table names
    // them #1, #2 … and the lines under it say which is which.
    let mut head: Vec<&str> = vec!["key", "op", "count"];
    if span.is_some() {
        head.push("per s");
    }
    head.extend(["bytes", "time", "mean"]);
    let mut t = Table::new(&head);
    let busy = v
        .series
        .iter()
        .filter(|x| x.count.unwrap_or(0) > 0 || x.time_ms.unwrap_or(0.0) > 0.0);
    let mut keys: Vec<&str> = Vec::new();
    let mut shown = 0;
    for x in busy.clone().take(TOP) {
        shown += 1;
        let k = match keys.iter().position(|k| *k == x.key) {
            Some(i) => i + 1,
            None => {
                keys.push(&x.key);
                keys.len()
            }
        };
        let mut row = vec![
            format!("#{k}"),
            x.op.clone(),
            x.count.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
        ];
        if let Some(d) = span {
            row.push(match x.count {
                Some(c) => sig3(c as f64 / d),
                None => "-".into(),
            });
        }
        row.extend([
            x.bytes.map(fmt_bytes).unwrap_or_else(|| "-".into()),
            x.time_ms
                .map(|ms| fmt_ns(ms * 1e6))
                .unwrap_or_else(|| "-".into()),
            x.mean_ms
                .map(|ms| fmt_ns(ms * 1e6))
                .unwrap_or_else(|| "-".into()),
        ]);
        t.row(row);
    }
    let inner = TermStyle {
        width: style.width.saturating_sub(2),
        ..*style
    };
    if shown == 0 {
        s.push_str("  no I/O in the window\n");
    } else {
        for line in t.render(&inner).lines() {
            let _ = writeln!(s, "  {line}");
        }
    }
    let mut legend = String::new();
    for (i, k) in keys.iter().enumerate() {
        let _ = writeln!(legend, "  #{}  {k}", i + 1);
    }
    if span.is_none() && shown > 0 {
        let _ = writeln!(
            legend,
            "  rates {UNKNOWN_RATE}: the snapshots' span is not known"
        );
    }
    s.push_str(&fit(&legend, style.width));
    let more = busy.count().saturating_sub(shown);
    let mut tail = String::new();
    if more > 0 {
        let _ = writeln!(tail, "  … {more} more key/operation row(s) in the JSON");
    }
    for n in &v.notes {
        let _ = writeln!(tail, "  note: {n}");
    }
    s.push_str(&fit(&tail, style.width));
}
