//! The stored analysis ([`crate::results::analysis::Analysis`]) as sections that `show` and
//! `report` print: calibration findings (stop reason, knee, USL, Little's law, sequential,
//! commit-write and cache-probe results, the CALIBRATE_IO figures), a trace's Method R profile
//! as tables, and database buffer-cache figures. The sections are built once as [`Block`]s and
//! written by the terminal and the HTML back ends, so both show the same words and numbers.

use super::svg::{colour, Fmt, LineChart, Series};
pub use super::table::Block;
use super::table::{blocks_text, Table};
use super::TermStyle;
use crate::results::analysis::{Analysis, Knee, Profile, UslFit};
use crate::results::{CurvePoint, Results};
use crate::units::{fmt_bytes, fmt_ns, fmt_rate, sig3};

fn opt_num(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

fn pct(share: f64) -> String {
    format!("{} %", sig3(share * 100.0))
}

/// The knee of the load curve, in one line.
pub(crate) fn knee_line(k: &Knee) -> String {
    format!(
        "Knee: {} sessions ({} IOPS, p99 {}) by {}",
        k.sessions,
        fmt_rate(k.iops),
        fmt_ns(k.p99_ns as f64),
        k.method
    )
}

/// The USL fit (σ, κ, R², predicted peak), in one line.
pub(crate) fn usl_line(u: &UslFit) -> String {
    let peak = match (u.peak_n, u.peak_x) {
        (Some(n), Some(x)) => format!("predicted peak {} IOPS at {:.1} sessions", fmt_rate(x), n),
        _ => "no peak within reach (κ ≈ 0)".into(),
    };
    format!(
        "USL fit: σ={:.4} κ={:.5} (R²={:.3}); {peak}",
        u.sigma, u.kappa, u.r2
    )
}

/// The calibration findings of `an`.
fn calibration_blocks(r: &Results, an: &Analysis, out: &mut Vec<Block>) {
    let (Some(c), Some(ca)) = (&r.calibration, &an.calibration) else {
        return;
    };
    let mut lines = Vec::new();
    if let Some(pc) = &c.findings.precondition {
        lines.push(format!("{}.", pc.sentence));
    }
    if let Some(s) = ca.stop_reason {
        let why = ca.stop_sentence.clone().unwrap_or(s.describe().into());
        lines.push(format!("Random-read ramp stopped because {why}."));
    }
    if let Some(k) = &ca.knee {
        lines.push(knee_line(k));
    }
    if let Some(u) = &ca.usl {
        lines.push(usl_line(u));
    }
    if let Some(m) = &ca.modes_at_max {
        lines.push(format!("Latency modes at max IOPS: {m}."));
    }
    if let Some(t) = &ca.tiers_at_max {
        lines.push(format!("Latency tiers at max IOPS: {t}."));
    }
    if let Some(b) = ca.seq_best {
        lines.push(format!(
            "Max MB/s, many streams: {} MB/s (queue depth {} per stream).",
            sig3(b.mb_per_s),
            b.qd
        ));
    }
    if let Some(b) = ca.seq1_best {
        lines.push(format!(
            "Max MB/s, one stream: {} MB/s (queue depth {}).",
            sig3(b.mb_per_s),
            b.qd
        ));
    }
    if let Some(b) = &ca.burst {
        lines.push(format!(
            "Random reads: {} IOPS sustained; a burst: {}.",
            fmt_rate(b.sustained_iops),
            b.sentence
        ));
    }
    if let Some(b) = ca.write_best {
        lines.push(format!(
            "Random writes: {} IOPS at p{} ≤ {} ({} sessions).",
            fmt_rate(b.value),
            sig3(c.percentile),
            fmt_ns(c.max_latency_ns as f64),
            b.level
        ));
    }
    if let Some(b) = &ca.write_cache {
        lines.push(format!(
            "Random writes: {} IOPS sustained; a write cache: {}.",
            fmt_rate(b.sustained_iops),
            b.sentence
        ));
    }
    let cio = &ca.calibrate_io;
    lines.push(format!(
        "CALIBRATE_IO would report: max_iops = {}, max_mbps = {}, max_pmbps = {}, latency = {} ms \
         (an integer-ms average that hides the distribution).",
        opt_num(cio.max_iops),
        opt_num(cio.max_mbps),
        opt_num(cio.max_pmbps),
        opt_num(cio.latency_ms)
    ));
    out.push(Block {
        title: "Calibration findings".into(),
        lines,
        table: None,
    });
    if !ca.little.is_empty() {
        let mut t = Table::new(&["sessions", "in flight", "configured", "outside I/O"]);
        for l in &ca.little {
            t.row(vec![
                l.sessions.to_string(),
                format!("{:.2}", l.check.observed),
                format!("{:.0}", l.check.concurrency),
                pct(l.check.outside_share),
            ]);
        }
        out.push(Block {
            title: "Little's law (IOPS × mean latency = I/Os in flight)".into(),
            lines: vec![],
            table: Some(t),
        });
    }
    if !ca.commit.is_empty() {
        let mut t = Table::new(&["commit write", "writes/s", "p50", "p99", "p99.9"]);
        for w in &ca.commit {
            t.row(vec![
                format!("{} O_DSYNC", fmt_bytes(w.size_bytes)),
                w.writes_per_s.map(fmt_rate).unwrap_or_else(|| "-".into()),
                fmt_ns(w.p50_ns as f64),
                fmt_ns(w.p99_ns as f64),
                fmt_ns(w.p999_ns as f64),
            ]);
        }
        out.push(Block {
            title: "Commit-shaped writes".into(),
            lines: vec![],
            table: Some(t),
        });
    }
    if !ca.cache_probe.is_empty() {
        let mut t = Table::new(&["share", "working set", "IOPS", "p50", "p99", "modes"]);
        for p in &ca.cache_probe {
            t.row(vec![
                pct(p.share),
                fmt_bytes(p.working_set_bytes),
                p.iops.map(fmt_rate).unwrap_or_else(|| "-".into()),
                fmt_ns(p.p50_ns as f64),
                fmt_ns(p.p99_ns as f64),
                p.modes.clone(),
            ]);
        }
        out.push(Block {
            title: "Cache probe (random reads over part of the target)".into(),
            lines: vec![],
            table: Some(t),
        });
    }
}

fn profile_table(p: &Profile) -> Table {
    let mut t = Table::new(&["component", "seconds", "%R", "count", "mean"]);
    for row in &p.rows {
        t.row(vec![
            row.component.clone(),
            format!("{:.6}", row.seconds),
            format!("{:.1}%", row.share * 100.0),
            row.count.map(|c| c.to_string()).unwrap_or_default(),
            row.mean_us.map(|m| fmt_ns(m * 1e3)).unwrap_or_default(),
        ]);
    }
    t
}

fn trace_blocks(an: &Analysis, out: &mut Vec<Block>) {
    let Some(tp) = &an.trace_profile else { return };
    let p = &tp.total;
    let depths: Vec<String> = p
        .outermost_calls_by_depth
        .iter()
        .map(|(d, n)| format!("{n} at dep={d}"))
        .collect();
    out.push(Block {
        title: "Response-time profile (Method R)".into(),
        lines: vec![
            format!(
                "R = {:.6} s ({}) = CPU {:.6} s + waits {:.6} s + unaccounted-for {:.6} s",
                p.response_time_s, p.response_time_basis, p.cpu_s, p.wait_s, p.unaccounted_s
            ),
            format!(
                "outermost calls {:.6} s ({}), waits between calls {:.6} s, in no traced call {:.6} s",
                p.outermost_elapsed_s,
                if depths.is_empty() { "none".to_string() } else { depths.join(", ") },
                p.between_calls_wait_s,
                p.outside_calls_wait_s
            ),
        ],
        table: Some(profile_table(p)),
    });
    if tp.files.len() > 1 {
        let mut t = Table::new(&["file", "R s", "CPU s", "waits s", "unaccounted s"]);
        for f in &tp.files {
            let q = &f.profile;
            t.row(vec![
                f.path.clone(),
                format!("{:.6}", q.response_time_s),
                format!("{:.6}", q.cpu_s),
                format!("{:.6}", q.wait_s),
                format!("{:.6}", q.unaccounted_s),
            ]);
        }
        out.push(Block {
            title: "Profile per trace file".into(),
            lines: vec![],
            table: Some(t),
        });
    }
}

fn db_blocks(r: &Results, an: &Analysis, out: &mut Vec<Block>) {
    if an.db.is_empty() {
        return;
    }
    let mut t = Table::new(&[
        "run",
        "logical reads",
        "physical reads",
        "hit ratio",
        "logical/s",
        "physical/s",
        "OS cache served",
    ]);
    let rate = |v: Option<f64>| v.map(fmt_rate).unwrap_or_else(|| "-".into());
    for d in &an.db {
        t.row(vec![
            r.runs
                .get(d.run)
                .map(|x| x.name.clone())
                .unwrap_or_default(),
            format!("{:.0}", d.logical_reads),
            format!("{:.0}", d.physical_reads),
            d.hit_ratio.map(pct).unwrap_or_else(|| "-".into()),
            rate(d.logical_reads_per_s),
            rate(d.physical_reads_per_s),
            d.os_cache_served_share
                .map(pct)
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    out.push(Block {
        title: "Database cache: logical and physical reads".into(),
        lines: vec![],
        table: Some(t),
    });
}

/// Every analysis section of `r`, in print order.
pub fn blocks(r: &Results, an: &Analysis) -> Vec<Block> {
    let mut out = Vec::new();
    calibration_blocks(r, an, &mut out);
    trace_blocks(an, &mut out);
    db_blocks(r, an, &mut out);
    super::watch::blocks(r, an, &mut out);
    super::stacks::blocks(r, an.stack_profile.as_ref(), &mut out);
    out
}

/// The sections as terminal text.
pub fn text(r: &Results, an: &Analysis, style: &TermStyle) -> String {
    blocks_text(blocks(r, an), style)
}

/// A chart of one ramp: `y` against `x` for each named series.
fn ramp_chart(
    title: &str,
    x_label: &str,
    x_fmt: Fmt,
    y_fmt: Fmt,
    series: Vec<(&str, Vec<(f64, f64)>)>,
) -> String {
    let mut ch = LineChart::new(title, x_label, "", x_fmt, y_fmt);
    ch.height = 260.0;
    ch.y_log = y_fmt == Fmt::Latency;
    for (k, (name, points)) in series.into_iter().enumerate() {
        ch.series.push(Series {
            name: name.into(),
            colour: colour(k).into(),
            points,
            dots: true,
            dashed: false,
        });
    }
    ch.render()
}

/// Charts of every calibration phase beyond the random-read curve: sequential-read ramps
/// (MB/s by queue depth), commit-shaped writes (latency by size), the random-write ramp
/// (latency by IOPS) and the cache probe (latency by working-set share).
fn phase_charts(r: &Results, an: &Analysis) -> String {
    let mut out = String::new();
    let (Some(c), Some(ca)) = (&r.calibration, &an.calibration) else {
        return out;
    };
    let seq: Vec<(&str, Vec<(f64, f64)>)> =
        [("many streams", "seqread"), ("one stream", "seqread1")]
            .into_iter()
            .map(|(name, phase)| {
                let pts = r
                    .runs
                    .iter()
                    .filter(|x| x.phase == phase)
                    .filter_map(|x| Some((x.spec.as_ref()?.qd? as f64, x.mb_per_s())))
                    .collect::<Vec<_>>();
                (name, pts)
            })
            .filter(|(_, p)| !p.is_empty())
            .collect();
    if !seq.is_empty() {
        out.push_str(&ramp_chart(
            "Sequential reads: MB/s by queue depth",
            "queue depth per stream",
            Fmt::Rate,
            Fmt::Rate,
            seq,
        ));
    }
    if !ca.commit.is_empty() {
        let pick = |f: fn(&crate::results::analysis::CommitResult) -> u64| {
            ca.commit
                .iter()
                .map(|w| (w.size_bytes as f64, f(w) as f64))
                .collect::<Vec<_>>()
        };
        out.push_str(&ramp_chart(
            "Commit-shaped O_DSYNC writes: latency by write size (bytes)",
            "write size, bytes",
            Fmt::Rate,
            Fmt::Latency,
            vec![
                ("p50", pick(|w| w.p50_ns)),
                ("p99", pick(|w| w.p99_ns)),
                ("p99.9", pick(|w| w.p999_ns)),
            ],
        ));
    }
    let wr: &[CurvePoint] = &c.findings.write_ramp;
    if !wr.is_empty() {
        out.push_str(&ramp_chart(
            "Random writes: latency vs IOPS",
            "IOPS",
            Fmt::Rate,
            Fmt::Latency,
            vec![
                (
                    "p50",
                    wr.iter().map(|p| (p.iops, p.p50_ns as f64)).collect(),
                ),
                (
                    "p99",
                    wr.iter().map(|p| (p.iops, p.p99_ns as f64)).collect(),
                ),
            ],
        ));
    }
    if !ca.cache_probe.is_empty() {
        let cp = &ca.cache_probe;
        out.push_str(&ramp_chart(
            "Cache probe: latency by working set (% of target)",
            "working set, % of target",
            Fmt::Percent,
            Fmt::Latency,
            vec![
                (
                    "p50",
                    cp.iter()
                        .map(|p| (p.share * 100.0, p.p50_ns as f64))
                        .collect(),
                ),
                (
                    "p99",
                    cp.iter()
                        .map(|p| (p.share * 100.0, p.p99_ns as f64))
                        .collect(),
                ),
            ],
        ));
    }
    out
}

/// The sections as HTML (with the calibration phases' charts), inside one `<section>`.
pub fn html(r: &Results, an: &Analysis) -> String {
    let blocks = blocks(r, an);
    let charts = phase_charts(r, an);
    if blocks.is_empty() && charts.is_empty() {
        return String::new();
    }
    let mut out = String::from("<section id=\"analysis\"><h2>Analysis</h2>");
    out.push_str(&charts);
    out.push_str(&super::table::blocks_html(blocks));
    out.push_str("</section>");
    out
}
