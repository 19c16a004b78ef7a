//! A replay (`iolens replay`) in words: recorded beside replayed latency per event and per
//! session, and how faithfully the schedule was kept.

use std::fmt::Write as _;

use super::table::{blocks_text, Block, Table};
use crate::results::replay::ReplayInfo;
use crate::results::Results;
use crate::units::{fmt_bytes, fmt_ns};

fn blocks(r: &Results, p: &ReplayInfo) -> Vec<Block> {
    let mut out = Vec::new();
    // Recorded beside replayed, per event.
    let rec = r.runs.iter().find(|x| x.phase == "recorded");
    let rep = r.runs.iter().find(|x| x.phase == "replay");
    let mut t = Table::new(&[
        "event", "count", "rec p50", "rep p50", "rec p99", "rep p99", "rec mean", "rep mean",
    ]);
    if let (Some(rec), Some(rep)) = (rec, rep) {
        for o in &rec.ops {
            let Some(q) = rep.op(&o.op) else { continue };
            t.row(vec![
                o.op.clone(),
                o.count.to_string(),
                fmt_ns(o.summary.p50_ns as f64),
                fmt_ns(q.summary.p50_ns as f64),
                fmt_ns(o.summary.p99_ns as f64),
                fmt_ns(q.summary.p99_ns as f64),
                fmt_ns(o.summary.mean_ns),
                fmt_ns(q.summary.mean_ns),
            ]);
        }
    }
    let mut lines = vec![format!(
        "{} I/Os of {} replayed ({} timing{}), {} failed{}",
        p.replayed_ios,
        p.source,
        p.timing,
        if p.writes {
            ", writes on"
        } else {
            ", reads only"
        },
        p.errors,
        if p.stamp_checked > 0 {
            format!(
                "; {} of {} reads held their own offset's stamp",
                p.stamp_checked - p.misplaced,
                p.stamp_checked
            )
        } else {
            String::new()
        }
    )];
    for (why, n) in &p.skipped {
        lines.push(format!("not replayed: {n} {why}"));
    }
    out.push(Block {
        title: "Replay: recorded beside replayed latency".into(),
        lines,
        table: Some(t),
    });
    let mut lines = Vec::new();
    if p.timing != "fast" {
        lines.push(format!(
            "issue-time error (issued − scheduled): p50 {}, p99 {}, p99.9 {}, max {}",
            fmt_ns(p.issue_error.p50_ns as f64),
            fmt_ns(p.issue_error.p99_ns as f64),
            fmt_ns(p.issue_error.p999_ns as f64),
            fmt_ns(p.issue_error.max_ns as f64),
        ));
        lines.push(format!(
            "issue span {:.6} s replayed, {:.6} s scheduled ({:+.3} %)",
            p.replayed_span_s, p.scheduled_span_s, p.span_error_pct
        ));
    }
    lines.push(format!(
        "first issue to last completion: {:.6} s replayed, {:.6} s recorded{}",
        p.replayed_duration_s,
        p.recorded_duration_s,
        if p.speed != 1.0 && p.speed > 0.0 {
            format!(" (scaled by 1/{})", p.speed)
        } else {
            String::new()
        }
    ));
    lines.push(format!(
        "order within sessions: {} I/Os reordered; {}",
        p.reordered,
        if p.kept_up {
            "the replay kept to the schedule".to_string()
        } else {
            format!(
                "the replay fell behind the schedule (at most {})",
                fmt_ns(p.behind_s * 1e9)
            )
        }
    ));
    let mut t = Table::new(&["session", "I/Os", "rec p99", "rep p99", "rec s", "rep s"]);
    for s in &p.sessions {
        t.row(vec![
            s.session.clone(),
            s.ios.to_string(),
            fmt_ns(s.recorded.p99_ns as f64),
            fmt_ns(s.replayed.p99_ns as f64),
            format!("{:.4}", s.recorded_s),
            format!("{:.4}", s.replayed_s),
        ]);
    }
    out.push(Block {
        title: "Replay fidelity".into(),
        lines,
        table: Some(t),
    });
    if p.intervals.len() > 1 {
        let mut t = Table::new(&["start s", "recorded IOPS", "replayed IOPS"]);
        for i in &p.intervals {
            let d = i.duration_s.max(1e-9);
            t.row(vec![
                format!("{:.3}", i.start_s),
                format!("{:.1}", i.recorded_ios as f64 / d),
                format!("{:.1}", i.replayed_ios as f64 / d),
            ]);
        }
        out.push(Block {
            title: "Replay: recorded and achieved IOPS per interval".into(),
            lines: Vec::new(),
            table: Some(t),
        });
    }
    let mut t = Table::new(&["file", "target offset", "first byte", "length"]);
    for e in &p.map {
        t.row(vec![
            e.file.clone(),
            e.target_offset.to_string(),
            e.first_byte.to_string(),
            fmt_bytes(e.length),
        ]);
    }
    out.push(Block {
        title: "Replay map".into(),
        lines: vec![format!("block size {} bytes", p.block_size)],
        table: Some(t),
    });
    out
}

/// The replay as terminal text (empty for results without one).
pub(crate) fn text(r: &Results, style: &super::TermStyle) -> String {
    let Some(p) = &r.replay else {
        return String::new();
    };
    crate::out::fit(&blocks_text(blocks(r, p), style), style.width)
}

/// The replay as Markdown (empty without one).
pub(crate) fn markdown(r: &Results) -> String {
    let Some(p) = &r.replay else {
        return String::new();
    };
    super::table::blocks_markdown(blocks(r, p))
}

/// The replay in HTML (empty without one).
pub(crate) fn html(r: &Results) -> String {
    let Some(p) = &r.replay else {
        return String::new();
    };
    let mut out = String::from("<section id=\"replay\">");
    for b in blocks(r, p) {
        let _ = write!(out, "<h2>{}</h2>", super::svg::esc(&b.title));
        for l in &b.lines {
            let _ = write!(out, "<p>{}</p>", super::svg::esc(l));
        }
        if let Some(t) = &b.table {
            out.push_str(&t.html());
        }
    }
    out.push_str("</section>");
    out
}
