//! Many hosts, drawn: where a document was measured (rank, world, host, launcher, start, clock)
//! and, for a document `iolens merge` wrote, the per-host table, the windows (all ranks
//! measuring, and the full one), the stragglers and a host × time heatmap of IOPS — as text for
//! `show` and the closing summary of `merge`, and as HTML for `report`. The HTML keeps a row
//! per rank; the text, beyond [`MAX_RANK_ROWS`] ranks, gives the figures across ranks, the
//! ranks that stand out, and heatmap rows of bands of ranks.

use std::fmt::Write as _;

use super::svg::esc;
use super::table::{heading, Table};
use super::TermStyle;
use crate::analysis::median;
use crate::results::hosts::{Placement, RankRun, RunMerge};
use crate::results::Results;
use crate::units::{fmt_ns, fmt_ranks, fmt_rate, sig3};

/// Shades of the text heatmap, emptiest first.
const SHADES: [char; 9] = [' ', '.', ':', '-', '=', '+', '*', '#', '@'];

/// Most ranks the text lists one by one, and most heatmap rows it draws. Beyond it the table
/// lists the ranks that stand out under figures across all ranks, and each heatmap row is a
/// band of consecutive ranks (the HTML report keeps a row per rank). A fixed number, so what
/// a row means does not depend on the terminal.
const MAX_RANK_ROWS: usize = 32;

/// Ranks listed beside the stragglers when not every rank is: the lowest rates and the
/// highest p99s.
const EXTREMES: usize = 3;

/// How many consecutive ranks one row of the text heatmap holds (and one label of the HTML
/// heatmap marks), so that `n` ranks take at most [`MAX_RANK_ROWS`] rows.
fn band(n: usize) -> usize {
    n.div_ceil(MAX_RANK_ROWS).max(1)
}

/// One line on where a single-rank document was measured (none without a placement).
pub(crate) fn placement_line(p: &Placement) -> String {
    let mut s = format!(
        "rank {} of {} on {} (launcher: {})",
        p.rank,
        p.ranks
            .map_or("an unknown number".into(), |n| n.to_string()),
        p.host,
        p.launcher.name()
    );
    if let Some(a) = &p.start_at {
        let _ = write!(s, "; start requested {a}");
        if let (Some(m), Some(l)) = (&p.measured_start, p.start_lateness_s) {
            let _ = write!(
                s,
                ", measured {m} ({}{})",
                if l < 0.0 { "-" } else { "+" },
                fmt_ns(l.abs() * 1e9)
            );
        }
    }
    if let Some(c) = &p.clock {
        let _ = write!(
            s,
            "; clock {}{}",
            c.state,
            if c.synchronised {
                format!(" (estimated error {} µs)", c.est_error_us)
            } else {
                String::new()
            }
        );
    }
    s
}

/// The merged runs whose per-host view is drawn: all of up to four, else the calibration's
/// best step (or the last run).
fn shown_runs(r: &Results) -> Vec<usize> {
    let n = r.merge.as_ref().map_or(0, |m| m.runs.len());
    if n <= 4 {
        return (0..n).collect();
    }
    let pick = r
        .calibration
        .as_ref()
        .and_then(|c| c.max_iops_point.and_then(|p| c.curve.get(p)).map(|p| p.run))
        .filter(|&i| i < n)
        .unwrap_or(n - 1);
    vec![pick]
}

/// The ranks of the world that sent no results, in words (none when every rank did).
fn missing_line(m: &crate::results::hosts::MergeInfo) -> Option<String> {
    (!m.missing_ranks.is_empty()).then(|| {
        format!(
            "missing ranks (no results): {}",
            fmt_ranks(&m.missing_ranks)
        )
    })
}

/// The per-rank table: every rank, or those of `ranks` (positions in `m.ranks`).
fn host_table(m: &RunMerge, ranks: Option<&[usize]>) -> Table {
    let mut t = Table::new(&[
        "rank", "host", "start", "seconds", "count", "IOPS", "MB/s", "p50", "p99", "max",
    ]);
    let rows: Vec<&RankRun> = match ranks {
        Some(k) => k.iter().map(|&k| &m.ranks[k]).collect(),
        None => m.ranks.iter().collect(),
    };
    for x in rows {
        t.row(vec![
            x.rank.to_string(),
            x.host.clone(),
            format!("+{}", fmt_ns(x.start_s * 1e9)),
            sig3(x.duration_s),
            x.count.to_string(),
            fmt_rate(x.iops),
            sig3(x.mb_per_s),
            fmt_ns(x.p50_ns as f64),
            fmt_ns(x.p99_ns as f64),
            fmt_ns(x.max_ns as f64),
        ]);
    }
    t
}

/// The ranks that stand out, as positions in `m.ranks` in rank order: the stragglers, the
/// [`EXTREMES`] lowest rates and the [`EXTREMES`] highest p99s.
fn standing_out(m: &RunMerge) -> Vec<usize> {
    let mut pick: Vec<usize> = m
        .stragglers
        .iter()
        .filter_map(|s| m.ranks.iter().position(|r| r.rank == s.rank))
        .collect();
    let mut by: Vec<usize> = (0..m.ranks.len()).collect();
    by.sort_by(|&a, &b| m.ranks[a].iops.total_cmp(&m.ranks[b].iops));
    pick.extend(by.iter().take(EXTREMES));
    by.sort_by(|&a, &b| m.ranks[b].p99_ns.cmp(&m.ranks[a].p99_ns));
    pick.extend(by.iter().take(EXTREMES));
    pick.sort_unstable();
    pick.dedup();
    pick
}

/// Figures across all ranks: the lowest, the median and the highest rank's of each column.
fn across_table(m: &RunMerge) -> Table {
    let mut t = Table::new(&[
        &format!("across {} ranks", m.ranks.len()),
        "lowest",
        "median",
        "highest",
    ]);
    let row = |t: &mut Table, name: &str, v: Vec<f64>, f: &dyn Fn(f64) -> String| {
        let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        t.row(vec![name.into(), f(lo), f(median(v)), f(hi)]);
    };
    let col = |f: &dyn Fn(&RankRun) -> f64| m.ranks.iter().map(f).collect::<Vec<f64>>();
    let ns = |v: f64| fmt_ns(v);
    row(&mut t, "start", col(&|r| r.start_s * 1e9), &|v| {
        format!("+{}", fmt_ns(v))
    });
    row(&mut t, "seconds", col(&|r| r.duration_s), &sig3);
    row(&mut t, "IOPS", col(&|r| r.iops), &fmt_rate);
    row(&mut t, "MB/s", col(&|r| r.mb_per_s), &sig3);
    row(&mut t, "p50", col(&|r| r.p50_ns as f64), &ns);
    row(&mut t, "p99", col(&|r| r.p99_ns as f64), &ns);
    row(&mut t, "max", col(&|r| r.max_ns as f64), &ns);
    t
}

/// The per-rank part of the text: every rank when there are at most [`MAX_RANK_ROWS`], else
/// the figures across all ranks and the ranks that stand out.
fn ranks_text(m: &RunMerge, style: &TermStyle) -> String {
    if m.ranks.len() <= MAX_RANK_ROWS {
        return host_table(m, None).render(style);
    }
    let pick = standing_out(m);
    let mut s = across_table(m).render(style);
    let _ = writeln!(
        s,
        "\n{} of {} ranks: the stragglers, the {EXTREMES} lowest IOPS, the {EXTREMES} highest p99s \
         (`iolens report` lists every rank)",
        pick.len(),
        m.ranks.len()
    );
    s.push_str(&host_table(m, Some(&pick)).render(style));
    s
}

fn window_lines(m: &RunMerge) -> Vec<String> {
    let mut v = Vec::new();
    match &m.common {
        Some(w) => v.push(format!(
            "all ranks measuring ({} s .. {} s, {} s): {} IOPS, {} MB/s ({} ops)",
            sig3(w.start_s),
            sig3(w.end_s),
            sig3(w.end_s - w.start_s),
            fmt_rate(w.iops),
            sig3(w.mb_per_s),
            w.count
        )),
        None => v.push("all ranks measuring: never at once (no common window)".into()),
    }
    let f = &m.full;
    v.push(format!(
        "full window, first start to last end ({} s): {} IOPS, {} MB/s ({} ops)",
        sig3(f.end_s - f.start_s),
        fmt_rate(f.iops),
        sig3(f.mb_per_s),
        f.count
    ));
    v.push(format!(
        "starts spread over {}; grid origin {}",
        fmt_ns(m.start_spread_s * 1e9),
        m.origin
    ));
    for s in &m.stragglers {
        v.push(format!(
            "straggler: rank {} ({}): {}",
            s.rank, s.host, s.detail
        ));
    }
    v
}

/// Grid columns of a heatmap and the rank rows' IOPS per column (averaged over the slots a
/// column covers), for `cols` columns at most.
fn heat_grid(m: &RunMerge, cols: usize) -> (usize, Vec<Vec<f64>>) {
    let slots = m
        .ranks
        .iter()
        .map(|r| r.first_slot as usize + r.slot_iops.len())
        .max()
        .unwrap_or(0);
    let per = slots.div_ceil(cols.max(1)).max(1);
    let ncols = slots.div_ceil(per);
    let rows = m
        .ranks
        .iter()
        .map(|r| {
            let mut row = vec![0.0; ncols];
            let mut n = vec![0u32; ncols];
            for (k, v) in r.slot_iops.iter().enumerate() {
                let c = (r.first_slot as usize + k) / per;
                if c < ncols {
                    row[c] += v;
                    n[c] += 1;
                }
            }
            for (x, k) in row.iter_mut().zip(&n) {
                if *k > 0 {
                    *x /= *k as f64;
                } else {
                    *x = f64::NAN;
                }
            }
            row
        })
        .collect();
    (per, rows)
}

/// The highest rate in a heatmap's rows (columns with no measurement are NaN).
fn grid_max(rows: &[Vec<f64>]) -> f64 {
    rows.iter()
        .flatten()
        .filter(|x| x.is_finite())
        .fold(0.0, |a: f64, b| a.max(*b))
}

/// The text heatmap: a row per rank, or per band of consecutive ranks (at most
/// [`MAX_RANK_ROWS`] rows) showing the lowest of their rates, where a straggler shows.
fn heat_text(m: &RunMerge, width: usize) -> String {
    let band = band(m.ranks.len());
    let labels: Vec<String> = m
        .ranks
        .chunks(band)
        .map(|c| match c {
            [r] => format!("{} {}", r.rank, r.host),
            _ => format!(
                "ranks {}–{}",
                c[0].rank,
                c.last().map_or(c[0].rank, |r| r.rank)
            ),
        })
        .collect();
    let label_w = labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .min(24);
    let cols = width.saturating_sub(label_w + 3).max(8);
    let (per, rank_rows) = heat_grid(m, cols);
    // A band's cell: the lowest rate of its ranks; none where one of them was not measuring
    // (a late start or an early end shows as it does in its own row).
    let rows: Vec<Vec<f64>> = rank_rows
        .chunks(band)
        .map(|c| {
            (0..c[0].len())
                .map(|k| {
                    c.iter().map(|row| row[k]).fold(f64::INFINITY, |a, v| {
                        if a.is_nan() || !v.is_finite() {
                            f64::NAN
                        } else {
                            a.min(v)
                        }
                    })
                })
                .collect()
        })
        .collect();
    let max = grid_max(&rows);
    let mut s = format!(
        "IOPS per host over time (one column = {} s; {}' ' none … '@' {} IOPS)\n",
        sig3(per as f64 * m.interval_s),
        if band > 1 {
            format!("one row = {band} ranks, the lowest of their IOPS, blank where one was not measuring; ")
        } else {
            String::new()
        },
        fmt_rate(max)
    );
    for (l, row) in labels.iter().zip(&rows) {
        let label: String = l.chars().take(label_w).collect();
        let _ = write!(s, "{label:>label_w$} |");
        for v in row {
            let c = if !v.is_finite() {
                ' '
            } else if max > 0.0 {
                SHADES[((v / max) * (SHADES.len() - 1) as f64).round() as usize % SHADES.len()]
            } else {
                SHADES[0]
            };
            s.push(c);
        }
        s.push_str("|\n");
    }
    s
}

/// The "Hosts" section of `show` (empty for a single host without a launcher).
pub fn text(r: &Results, style: &TermStyle) -> String {
    let mut out = String::new();
    if let Some(m) = &r.merge {
        heading(
            &mut out,
            style,
            &format!(
                "Hosts: {} rank(s) merged{}",
                m.inputs.len(),
                m.ranks_expected
                    .map_or(String::new(), |n| format!(" of a world of {n}"))
            ),
        );
        if let Some(l) = missing_line(m) {
            let _ = writeln!(out, "{l}");
        }
        for i in shown_runs(r) {
            let rm = &m.runs[i];
            let _ = writeln!(out, "\nRun {i}: {}", rm.name);
            out.push_str(&ranks_text(rm, style));
            for l in window_lines(rm) {
                let _ = writeln!(out, "{l}");
            }
            out.push('\n');
            out.push_str(&heat_text(rm, style.width));
        }
    } else if let Some(p) = &r.placement {
        if p.launcher != crate::results::hosts::Launcher::None || p.start_at.is_some() {
            heading(&mut out, style, "Host");
            let _ = writeln!(out, "{}", placement_line(p));
        }
    }
    out
}

/// The closing summary of `iolens merge`.
pub(crate) fn merge_summary(r: &Results, style: &TermStyle) -> String {
    let mut out = text(r, style);
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// The "Hosts" section of `report` (empty for a document without a merge or placement).
pub fn html(r: &Results) -> String {
    let mut out = String::new();
    if let Some(m) = &r.merge {
        let _ = write!(
            out,
            "<section id=\"hosts\"><h2>Hosts: {} rank(s) merged</h2>",
            m.inputs.len()
        );
        if let Some(l) = missing_line(m) {
            let _ = write!(out, "<p class=\"warn\">{}</p>", esc(&l));
        }
        for i in shown_runs(r) {
            let rm = &m.runs[i];
            let _ = write!(out, "<h3>Run {i}: {}</h3>", esc(&rm.name));
            out.push_str(&host_table(rm, None).html());
            out.push_str("<ul>");
            for l in window_lines(rm) {
                let _ = write!(out, "<li>{}</li>", esc(&l));
            }
            out.push_str("</ul>");
            out.push_str(&heat_html(rm));
        }
        out.push_str("</section>");
    } else if let Some(p) = &r.placement {
        let _ = write!(
            out,
            "<section id=\"hosts\"><h2>Host</h2><p>{}</p></section>",
            esc(&placement_line(p))
        );
    }
    out
}

/// The HTML heatmap: a row per rank. Beyond [`MAX_RANK_ROWS`] ranks the rows get lower (the
/// map stays about 450 px high), only every band's first rank is labelled, and each cell's
/// tooltip names its rank.
fn heat_html(m: &RunMerge) -> String {
    let (per, rows) = heat_grid(m, 120);
    let max = grid_max(&rows);
    let n = m.ranks.len();
    let many = n > MAX_RANK_ROWS;
    let (height, step) = if many {
        ((448 / n).max(2), band(n))
    } else {
        (14, 1)
    };
    let mut s = format!(
        "<h4>IOPS per host over time</h4><p class=\"meta\">one column = {} s; darker = more \
         IOPS (up to {}){}</p><table class=\"heat\" style=\"border-collapse:collapse\">",
        sig3(per as f64 * m.interval_s),
        esc(&fmt_rate(max)),
        if many {
            format!("; a row per rank, every {step}th labelled")
        } else {
            String::new()
        }
    );
    for (k, (r, row)) in m.ranks.iter().zip(&rows).enumerate() {
        let name = format!("{} {}", r.rank, r.host);
        let label = if k % step == 0 { name.as_str() } else { "" };
        let _ = write!(
            s,
            "<tr><th style=\"text-align:right;padding:0 6px 0 0;font-size:{}px;line-height:{height}px;white-space:nowrap\" title=\"{}\">{}</th>",
            if many { 10 } else { 14 },
            esc(&name),
            esc(label)
        );
        for v in row {
            let (bg, what) = if v.is_finite() {
                let l = if max > 0.0 { v / max } else { 0.0 };
                let c = (235.0 - 200.0 * l) as u8;
                (
                    format!("rgb({c},{c},255)"),
                    format!("{} IOPS", fmt_rate(*v)),
                )
            } else {
                ("#fff".to_string(), "not measuring".to_string())
            };
            let title = if many {
                format!("rank {name}: {what}")
            } else {
                what
            };
            let _ = write!(
                s,
                "<td title=\"{}\" style=\"background:{bg};width:6px;height:{height}px;padding:0\"></td>",
                esc(&title)
            );
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}
