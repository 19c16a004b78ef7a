//! The plan of `iolens plan` in words: the goal, the figures with where each came from, the
//! host settings, the vendor formulas checked, what the curve says beyond, the predicted curve
//! per LUN count beside what was measured, and the `--verify` run. Drawn by `show`, `report`
//! (with a predicted-vs-measured chart per LUN count), `export --markdown` and the command's
//! own summary. Decided in `analysis::plan`; nothing here decides.

use std::fmt::Write as _;

use crate::results::plan::{Plan, Sourced};
use crate::results::Results;
use crate::units::{fmt_ns, fmt_rate, sig3};

use super::svg::{colour, esc, Fmt, LineChart, Series};
use super::table::{Block, Table};

fn figure(s: &Sourced) -> String {
    match s.unit.as_str() {
        "ns" => fmt_ns(s.value),
        "IOPS" => format!("{} IOPS", fmt_rate(s.value)),
        u => format!("{} {u}", sig3(s.value)),
    }
}

fn yes_no(h: Option<bool>) -> &'static str {
    match h {
        Some(true) => "holds",
        Some(false) => "BREAKS",
        None => "not checked",
    }
}

/// The plan's sections.
fn blocks(p: &Plan) -> Vec<Block> {
    let g = &p.goal;
    let mut out = Vec::new();
    let mut head = vec![format!(
        "Goal: {} IOPS with p99 ≤ {} ({} host(s) × {} path(s){}{}; {} striping).",
        fmt_rate(g.iops),
        fmt_ns(g.p99_ns),
        g.hosts,
        g.paths,
        g.port_queue
            .map(|q| format!(", port queue {q}"))
            .unwrap_or_default(),
        g.lun_queue
            .map(|q| format!(", LUN queue {q}"))
            .unwrap_or_default(),
        g.stripe
    )];
    head.push(format!(
        "Plan: {} LUN(s) of queue depth {}, {} sessions: predicted {} at p99 {}.",
        p.luns.value,
        p.lun_queue_depth.value,
        p.sessions.value,
        figure(&p.predicted_iops),
        fmt_ns(p.predicted_p99_ns.value)
    ));
    for i in &p.inputs {
        head.push(format!(
            "Read {} ({}): {} load point(s) at {} LUN(s).",
            i.file,
            i.kind,
            i.points,
            i.luns
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out.push(Block {
        title: "Plan".into(),
        lines: head,
        table: None,
    });
    let m = &p.model;
    let mut lines: Vec<String> = [
        ("requests in flight", &p.in_flight),
        ("queue slots (99 %)", &p.in_flight_p99),
        ("LUNs", &p.luns),
        ("per-LUN queue depth", &p.lun_queue_depth),
        ("sessions", &p.sessions),
        ("predicted IOPS", &p.predicted_iops),
        ("predicted p99", &p.predicted_p99_ns),
        ("service time", &m.service_ns),
        ("time outside I/O", &m.outside_ns),
        ("LUN queue (model)", &m.lun_queue),
        ("p99 floor", &m.floor_p99_ns),
    ]
    .iter()
    .map(|(name, s)| format!("{name}: {} — {}", figure(s), s.from))
    .collect();
    if !m.queue_facts.is_empty() {
        lines.push(format!(
            "Queue facts of the measured target: {}.",
            m.queue_facts.join("; ")
        ));
    }
    out.push(Block {
        title: "Figures and where they came from".into(),
        lines,
        table: None,
    });
    out.push(Block {
        title: "Host settings".into(),
        lines: p
            .settings
            .iter()
            .map(|s| format!("{} = {}: {} ({})", s.name, s.value, s.how, s.why))
            .collect(),
        table: None,
    });
    out.push(Block {
        title: "Vendor formulas checked".into(),
        lines: p
            .checks
            .iter()
            .map(|c| {
                format!(
                    "{}: {} — {}{}: {}",
                    c.rule,
                    c.formula,
                    yes_no(c.holds),
                    c.limit
                        .map(|l| format!(" (limit {}, planned {})", sig3(l), sig3(c.planned)))
                        .unwrap_or_default(),
                    c.says
                )
            })
            .collect(),
        table: None,
    });
    out.push(Block {
        title: "Beyond the plan".into(),
        lines: p
            .beyond
            .iter()
            .map(|b| format!("{}: {}", figure(b), b.from))
            .collect(),
        table: None,
    });
    let mut t = Table::new(&[
        "LUNs",
        "sessions",
        "predicted IOPS",
        "predicted p99",
        "measured IOPS",
        "measured p99",
        "error",
    ]);
    for c in &p.curves {
        for pr in &c.predicted {
            let me = c.measured.iter().find(|m| m.sessions == pr.sessions);
            t.row(vec![
                c.luns.to_string(),
                pr.sessions.to_string(),
                fmt_rate(pr.iops),
                fmt_ns(pr.p99_ns),
                me.map(|m| fmt_rate(m.iops)).unwrap_or_else(|| "-".into()),
                me.map(|m| fmt_ns(m.p99_ns)).unwrap_or_else(|| "-".into()),
                me.map(|m| format!("{:+.1} %", (m.iops / pr.iops - 1.0) * 100.0))
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
    }
    out.push(Block {
        title: "Predicted curve per LUN count".into(),
        lines: vec![],
        table: Some(t),
    });
    if let Some(v) = &p.verify {
        out.push(Block {
            title: "Verified".into(),
            lines: vec![format!(
                "{} LUN(s), {} sessions ({} striping), run {}: measured {} IOPS vs predicted \
                 {} ({:+.1} %), p99 {} vs {} ({:+.1} %); the goal {}.",
                v.luns,
                v.sessions,
                v.stripe,
                v.run,
                fmt_rate(v.measured_iops),
                fmt_rate(v.predicted_iops),
                v.iops_error * 100.0,
                fmt_ns(v.measured_p99_ns),
                fmt_ns(v.predicted_p99_ns),
                v.p99_error * 100.0,
                if v.goal_met { "was met" } else { "was NOT met" }
            )],
            table: None,
        });
    }
    out.push(Block {
        title: "Notes".into(),
        lines: p.notes.clone(),
        table: None,
    });
    out
}

/// The plan as terminal text (empty for results without one).
pub(crate) fn text(r: &Results, style: &super::TermStyle) -> String {
    let Some(p) = &r.plan else {
        return String::new();
    };
    crate::out::fit(&super::table::blocks_text(blocks(p), style), style.width)
}

/// The plan as Markdown for a change ticket (empty without one).
pub(crate) fn markdown(r: &Results) -> String {
    let Some(p) = &r.plan else {
        return String::new();
    };
    super::table::blocks_markdown(blocks(p))
}

/// The plan in HTML: its sections and, per LUN count, the predicted curve beside the
/// measured points (IOPS and p99 against sessions).
pub(crate) fn html(r: &Results) -> String {
    let Some(p) = &r.plan else {
        return String::new();
    };
    let mut out = String::from("<section id=\"plan\"><h2>Plan</h2>");
    let mut iops = LineChart::new(
        "IOPS per LUN count: predicted (line) and measured (dashed)",
        "sessions",
        "IOPS",
        Fmt::Rate,
        Fmt::Rate,
    );
    let mut lat = LineChart::new(
        "p99 per LUN count: predicted (line) and measured (dashed)",
        "sessions",
        "p99 latency",
        Fmt::Rate,
        Fmt::Latency,
    );
    lat.hlines.push((p.goal.p99_ns, "goal p99".into()));
    iops.hlines.push((p.goal.iops, "goal IOPS".into()));
    for (i, c) in p.curves.iter().enumerate() {
        let name = format!("{} LUN{}", c.luns, if c.luns == 1 { "" } else { "s" });
        let series = |pts: &[crate::results::plan::CurveAt],
                      f: fn(&crate::results::plan::CurveAt) -> f64,
                      dashed: bool,
                      label: &str| Series {
            name: format!("{name} {label}"),
            colour: colour(i).into(),
            points: pts.iter().map(|c| (c.sessions as f64, f(c))).collect(),
            dots: true,
            dashed,
        };
        iops.series
            .push(series(&c.predicted, |c| c.iops, false, "predicted"));
        lat.series
            .push(series(&c.predicted, |c| c.p99_ns, false, "predicted"));
        if !c.measured.is_empty() {
            let mut m = c.measured.clone();
            m.sort_by_key(|c| c.sessions);
            iops.series.push(series(&m, |c| c.iops, true, "measured"));
            lat.series.push(series(&m, |c| c.p99_ns, true, "measured"));
        }
    }
    out.push_str(&iops.render());
    out.push_str(&lat.render());
    out.push_str(&super::table::blocks_html(blocks(p)));
    let _ = write!(out, "</section>");
    let _ = esc;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::plan::{CurveAt, PlanCurve, PlanVerify};

    fn plan() -> Plan {
        Plan {
            luns: Sourced::new(4.0, "LUNs", "fewest LUNs"),
            sessions: Sourced::new(16.0, "sessions", "model"),
            predicted_iops: Sourced::new(3000.0, "IOPS", "model"),
            curves: vec![PlanCurve {
                luns: 2,
                predicted: vec![CurveAt {
                    sessions: 8,
                    iops: 1800.0,
                    p99_ns: 9e6,
                    from: "model".into(),
                }],
                measured: vec![CurveAt {
                    sessions: 8,
                    iops: 1890.0,
                    p99_ns: 1e7,
                    from: "b.json, run 0".into(),
                }],
            }],
            verify: Some(PlanVerify {
                measured_iops: 2900.0,
                predicted_iops: 3000.0,
                iops_error: -1.0 / 30.0,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn every_renderer_words_the_plan_and_its_measurements() {
        let mut r = Results::new(crate::results::Kind::Plan, vec![]);
        r.plan = Some(plan());
        let t = text(&r, &super::super::table::plain(200));
        assert!(t.contains("4 LUN(s) of queue depth"), "{t}");
        assert!(t.contains("+5.0 %"), "{t}");
        assert!(t.contains("-3.3 %"), "{t}");
        let md = markdown(&r);
        assert!(md.contains("### Predicted curve per LUN count"), "{md}");
        let h = html(&r);
        assert!(
            h.contains("2 LUNs measured") && h.contains("2 LUNs predicted"),
            "{h}"
        );
        assert!(text(
            &Results::new(crate::results::Kind::Run, vec![]),
            &super::super::table::plain(80)
        )
        .is_empty());
    }
}
