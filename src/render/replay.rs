//! A replay (`iolens replay`) in words: recorded beside replayed latency per event and per
//! session, and how faithfully the schedule was kept.

use std::fmt::Write as _;

use super::table::{blocks_text, Block, Table};
use crate::results::replay::{ReplayInfo, ReplaySession};
use crate::results::Results;
use crate::units::{fmt_bytes, fmt_ns};

/// A column (or a recorded and a replayed pair of columns) of a per-session table.
#[derive(Clone, Copy)]
enum Col {
    Lanes,
    P50,
    P99,
    Seconds,
    InFlight,
}

/// `peak / mean` I/Os in flight.
fn in_flight((peak, mean): (u32, f64)) -> String {
    format!("{peak} / {mean:.2}")
}

/// One row a session: its name, its I/Os, then `cols`; the recorded latency and I/Os in flight
/// are "-" unless `known` (a source without latencies, such as an fio iolog).
fn session_table(sessions: &[ReplaySession], cols: &[Col], known: bool) -> Table {
    let mut head = vec!["session", "I/Os"];
    for c in cols {
        head.extend_from_slice(match c {
            Col::Lanes => &["lanes"][..],
            Col::P50 => &["rec p50", "rep p50"],
            Col::P99 => &["rec p99", "rep p99"],
            Col::Seconds => &["rec s", "rep s"],
            Col::InFlight => &["rec in flight", "rep in flight"],
        });
    }
    let mut t = Table::new(&head);
    let rec = |cell: String| if known { cell } else { "-".into() };
    for s in sessions {
        let mut row = vec![s.session.clone(), s.ios.to_string()];
        for c in cols {
            match c {
                Col::Lanes => row.push(s.lanes.to_string()),
                Col::P50 => row.extend([
                    rec(fmt_ns(s.recorded.p50_ns as f64)),
                    fmt_ns(s.replayed.p50_ns as f64),
                ]),
                Col::P99 => row.extend([
                    rec(fmt_ns(s.recorded.p99_ns as f64)),
                    fmt_ns(s.replayed.p99_ns as f64),
                ]),
                Col::Seconds => row.extend([
                    format!("{:.4}", s.recorded_s),
                    format!("{:.4}", s.replayed_s),
                ]),
                Col::InFlight => row.extend([
                    rec(in_flight(s.in_flight.recorded())),
                    in_flight(s.in_flight.replayed()),
                ]),
            }
        }
        t.row(row);
    }
    t
}

fn blocks(r: &Results, p: &ReplayInfo) -> Vec<Block> {
    let mut out = Vec::new();
    // Recorded beside replayed, per event.
    let rec = r.runs.iter().find(|x| x.phase == "recorded");
    let rep = r.runs.iter().find(|x| x.phase == "replay");
    let mut t = Table::new(&[
        "event", "count", "rec p50", "rep p50", "rec p99", "rep p99", "rec mean", "rep mean",
    ]);
    if let Some(rep) = rep {
        // A source without latencies (an fio iolog) has no recorded side: "-".
        let rec_ns = |op: &str, f: fn(&crate::results::OpResult) -> f64| {
            rec.and_then(|r| r.op(op))
                .map_or("-".to_string(), |o| fmt_ns(f(o)))
        };
        for q in &rep.ops {
            t.row(vec![
                q.op.clone(),
                q.count.to_string(),
                rec_ns(&q.op, |o| o.summary.p50_ns as f64),
                fmt_ns(q.summary.p50_ns as f64),
                rec_ns(&q.op, |o| o.summary.p99_ns as f64),
                fmt_ns(q.summary.p99_ns as f64),
                rec_ns(&q.op, |o| o.summary.mean_ns),
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
    let known = p.recorded_latency_known;
    lines.push(format!(
        "I/Os in flight (peak / mean): {} recorded, {} replayed",
        if known {
            in_flight(p.in_flight.recorded())
        } else {
            "-".into()
        },
        in_flight(p.in_flight.replayed())
    ));
    let t = session_table(
        &p.sessions,
        &[Col::Lanes, Col::P99, Col::Seconds, Col::InFlight],
        known,
    );
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

/// `compare`'s recorded-beside-replayed view of each replay given to it (its two sides, from
/// [`crate::analysis::compare::replay_sides`]): per event the answer, and per session the
/// latency, duration and I/Os in flight on each side. Titles and tables.
pub(crate) fn compare_tables(inputs: &[(String, Results)]) -> Vec<(String, Table)> {
    use crate::analysis::compare::{replay_answers, replay_pairs};
    let mut out = Vec::new();
    for (a, b) in replay_pairs(inputs) {
        let (rec, rep) = (&inputs[a].1, &inputs[b].1);
        let Some(info) = &rep.replay else { continue };
        let mut t = Table::new(&["event", "I/Os", "answer"]);
        for x in replay_answers(rec, rep) {
            t.row(vec![
                x.event.clone(),
                x.count.to_string(),
                format!(
                    "{} p99 {} recorded, {} replayed (p50 {} recorded, {} replayed)",
                    x.event,
                    fmt_ns(x.recorded_p99_ns as f64),
                    fmt_ns(x.replayed_p99_ns as f64),
                    fmt_ns(x.recorded_p50_ns as f64),
                    fmt_ns(x.replayed_p50_ns as f64)
                ),
            ]);
        }
        let base = inputs[a].0.trim_end_matches(" recorded").to_string();
        out.push((
            format!(
                "{base}: recorded beside replayed ({} timing{})",
                info.timing,
                if info.kept_up {
                    String::new()
                } else {
                    format!(
                        "; the replay fell behind by up to {}",
                        fmt_ns(info.behind_s * 1e9)
                    )
                }
            ),
            t,
        ));
        let t = session_table(
            &info.sessions,
            &[Col::P50, Col::P99, Col::Seconds, Col::InFlight],
            true,
        );
        out.push((format!("{base}: per session, recorded beside replayed"), t));
    }
    out
}
