//! The heatmap chart: latency over time as coloured cells, its two palettes and its colour
//! legend (see [`super`] for the frame, scales and axes it shares with the other charts).

use std::fmt::Write as _;

use super::*;
use crate::render::heatmap::{level_for, HeatKind, Heatmap};

/// Colour stops of the two heatmap palettes (light = few, dark = many).
fn palette(kind: HeatKind) -> &'static [(f64, [u8; 3])] {
    match kind {
        HeatKind::Frequency => &[
            (0.0, [222, 235, 247]),
            (0.4, [107, 174, 214]),
            (0.7, [33, 113, 181]),
            (1.0, [8, 48, 107]),
        ],
        HeatKind::Intensity => &[
            (0.0, [255, 245, 200]),
            (0.35, [254, 196, 79]),
            (0.7, [236, 112, 20]),
            (1.0, [153, 0, 13]),
        ],
    }
}

/// RGB colour of a level in 0..=1 on a heatmap palette.
pub(super) fn heat_rgb(kind: HeatKind, t: f64) -> [u8; 3] {
    let stops = palette(kind);
    let t = t.clamp(0.0, 1.0);
    for w in stops.windows(2) {
        let ((a, ca), (b, cb)) = (w[0], w[1]);
        if t <= b {
            let u = if b > a { (t - a) / (b - a) } else { 0.0 };
            let mix = |i: usize| (ca[i] as f64 + u * (cb[i] as f64 - ca[i] as f64)).round() as u8;
            return [mix(0), mix(1), mix(2)];
        }
    }
    stops[stops.len() - 1].1
}

/// Colour levels a heatmap is quantised to (one SVG path per level keeps the file small).
pub const HEAT_LEVELS: usize = 24;

/// Heatmap of latency over time, with a colour legend. `id` must be unique in the page; the
/// cell values are embedded (as JSON in a data attribute) for the hover read-out.
pub(crate) fn heatmap_chart(title: &str, m: &Heatmap, kind: HeatKind, id: &str) -> String {
    let f = Frame {
        right: 110.0,
        ..Frame::new(860.0, (m.rows as f64 * 12.0).clamp(160.0, 420.0) + 70.0)
    };
    let t0 = m.col_edges_s[0];
    let t1 = *m.col_edges_s.last().unwrap_or(&t0);
    let sx = Scale::linear(t0, t1, f.x0(), f.x1());
    let (lo, lo_hi) = m.row_bounds_ns(0);
    // A source bucket starting at 0 is drawn from half its upper edge on the log axis.
    let lo = if lo > 0.0 { lo } else { lo_hi / 2.0 };
    let (_, hi) = m.row_bounds_ns(m.rows - 1);
    let sy = Scale::log(lo, hi, f.y0(), f.y1());
    let max = m.max_value(kind);
    let mut out = String::new();
    open_svg(&mut out, &f, title, &sx, &sy, Fmt::Seconds, Fmt::Latency);
    // One path per colour level; runs of equal level along a row merge into one rectangle.
    let mut paths = vec![String::new(); HEAT_LEVELS];
    for r in 0..m.rows {
        let (rlo, rhi) = m.row_bounds_ns(r);
        let (ya, yb) = (sy.map(rhi), sy.map(rlo.max(lo)));
        let mut c = 0;
        while c < m.cols {
            let l = quant(level_for(kind, m.value(kind, r, c), max));
            let start = c;
            while c < m.cols && quant(level_for(kind, m.value(kind, r, c), max)) == l {
                c += 1;
            }
            if let Some(l) = l {
                let (xa, xb) = (sx.map(m.col_edges_s[start]), sx.map(m.col_edges_s[c]));
                let _ = write!(paths[l], "M{xa:.1} {ya:.1}H{xb:.1}V{yb:.1}H{xa:.1}z",);
            }
        }
    }
    let _ = write!(
        out,
        "<rect class=\"heatbg\" x=\"{}\" y=\"{}\" width=\"{:.1}\" height=\"{:.1}\"/>",
        f.x0(),
        f.y1(),
        f.plot_width(),
        f.plot_height()
    );
    axes(
        &mut out,
        &f,
        &sx,
        &sy,
        (Fmt::Seconds, Fmt::Latency),
        ("time since start of measurement", "latency (log scale)"),
    );
    // Cells over the grid lines.
    for (l, d) in paths.iter().enumerate() {
        if d.is_empty() {
            continue;
        }
        let [r, g, b] = heat_rgb(kind, (l as f64 + 1.0) / HEAT_LEVELS as f64);
        let _ = write!(out, "<path fill=\"#{r:02x}{g:02x}{b:02x}\" d=\"{d}\"/>");
    }
    // Colour legend: gradient of the quantised levels with min/max labels.
    let lx = f.x1() + 24.0;
    let lh = f.plot_height();
    for l in 0..HEAT_LEVELS {
        let [r, g, b] = heat_rgb(kind, (l as f64 + 1.0) / HEAT_LEVELS as f64);
        let y = f.y0() - (l as f64 + 1.0) * lh / HEAT_LEVELS as f64;
        let _ = write!(
            out,
            "<rect x=\"{lx:.1}\" y=\"{y:.1}\" width=\"14\" height=\"{:.2}\" fill=\"#{r:02x}{g:02x}{b:02x}\"/>",
            lh / HEAT_LEVELS as f64 + 0.3
        );
    }
    let (top_label, unit) = match kind {
        HeatKind::Frequency => (fmt_rate(max), "ops/cell"),
        HeatKind::Intensity => (fmt_ns(max), "time/cell"),
    };
    let _ = write!(
        out,
        "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\">{}</text>\
         <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\">{}</text>\
         <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\">{}</text>\
         <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
        lx + 18.0,
        f.y1() + 9.0,
        esc(&top_label),
        lx + 18.0,
        f.y0(),
        match kind {
            HeatKind::Frequency => "1",
            HeatKind::Intensity => "min",
        },
        lx - 2.0,
        f.y0() + 14.0,
        match kind {
            HeatKind::Frequency => "log scale",
            HeatKind::Intensity => "linear",
        },
        lx - 2.0,
        f.y0() + 27.0,
        unit
    );
    // Cell data for the hover read-out.
    let mut data = String::with_capacity(m.rows * m.cols * 4);
    data.push_str("{\"edges\":[");
    join_into(&mut data, m.col_edges_s.iter().map(|v| format!("{v}")));
    data.push_str("],\"rows\":[");
    join_into(
        &mut data,
        (0..=m.rows).map(|r| format!("{:.0}", m.row_bounds_ns(r).0)),
    );
    let _ = write!(
        data,
        "],\"kind\":\"{}\",\"v\":[",
        match kind {
            HeatKind::Frequency => "f",
            HeatKind::Intensity => "i",
        }
    );
    join_into(
        &mut data,
        (0..m.rows * m.cols).map(|i| match kind {
            HeatKind::Frequency => m.freq[i].to_string(),
            HeatKind::Intensity => format!("{:.0}", m.intensity[i]),
        }),
    );
    data.push_str("]}");
    let _ = write!(
        out,
        "<desc class=\"heatdata\" id=\"{}\">{}</desc>",
        esc(id),
        esc(&data)
    );
    out.push_str("</svg>");
    out
}
