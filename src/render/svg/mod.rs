//! Chart geometry and inline-SVG drawing for the HTML report: scales (linear and logarithmic),
//! tick choice, line charts (load curve, latency over time), latency histograms on a log axis
//! and heatmaps with a colour legend.
//!
//! Every chart is an `<svg class="chart">` carrying its scales in `data-*` attributes so the
//! report's small inline script can show the values under the pointer; heatmaps also carry
//! their cell values. No external resources are referenced.

use std::fmt::Write as _;

use crate::units::{fmt_ns, fmt_rate, sig3};

mod heat;
pub(crate) use heat::heatmap_chart;
pub use heat::HEAT_LEVELS;

/// Escape text for HTML/SVG content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    html_escape::encode_double_quoted_attribute(s).into_owned()
}

/// How axis values are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fmt {
    /// Nanoseconds, shown as ns/µs/ms/s.
    Latency,
    /// A rate or count (`12.3k`).
    Rate,
    /// Seconds of elapsed time.
    Seconds,
    /// A percentage value (already ×100).
    Percent,
}

impl Fmt {
    pub(crate) fn format(self, v: f64) -> String {
        match self {
            Fmt::Latency => fmt_ns(v),
            Fmt::Rate => fmt_rate(v),
            Fmt::Seconds => format!("{} s", sig3(v)),
            Fmt::Percent => format!("{}%", sig3(v)),
        }
    }
    fn code(self) -> &'static str {
        match self {
            Fmt::Latency => "ns",
            Fmt::Rate => "n",
            Fmt::Seconds => "s",
            Fmt::Percent => "pct",
        }
    }
}

/// A mapping from data values to pixels, linear or logarithmic.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    pub(crate) d0: f64,
    pub(crate) d1: f64,
    pub r0: f64,
    pub r1: f64,
    pub log: bool,
}

impl Scale {
    /// Linear scale; an empty domain is widened so mapping stays finite.
    pub fn linear(d0: f64, d1: f64, r0: f64, r1: f64) -> Scale {
        let (d0, d1) = if d1 > d0 { (d0, d1) } else { (d0, d0 + 1.0) };
        Scale {
            d0,
            d1,
            r0,
            r1,
            log: false,
        }
    }
    /// Logarithmic scale over positive values; the domain is clamped to be positive and
    /// non-empty.
    pub fn log(d0: f64, d1: f64, r0: f64, r1: f64) -> Scale {
        let d0 = d0.max(1e-9);
        let d1 = if d1 > d0 { d1 } else { d0 * 10.0 };
        Scale {
            d0,
            d1,
            r0,
            r1,
            log: true,
        }
    }
    /// Pixel position of a data value (values outside the domain map outside the range).
    pub fn map(&self, v: f64) -> f64 {
        let t = if self.log {
            (v.max(1e-12).ln() - self.d0.ln()) / (self.d1.ln() - self.d0.ln())
        } else {
            (v - self.d0) / (self.d1 - self.d0)
        };
        self.r0 + t * (self.r1 - self.r0)
    }
    /// Tick values inside the domain.
    pub(crate) fn ticks(&self, max_ticks: usize) -> Vec<f64> {
        if self.log {
            log_ticks(self.d0, self.d1)
        } else {
            linear_ticks(self.d0, self.d1, max_ticks)
        }
    }
    fn data_attr(&self) -> String {
        format!(
            "{},{},{},{},{}",
            if self.log { "log" } else { "lin" },
            self.d0,
            self.d1,
            self.r0,
            self.r1
        )
    }
}

/// The smallest "nice" number (1, 2, 2.5 or 5 × 10^k) at least `v`.
pub(crate) fn nice_ceil(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= v * (1.0 - 1e-12) {
            return m * p;
        }
    }
    10.0 * p
}

/// Evenly spaced nice ticks covering `[lo, hi]`, at most about `max_ticks`.
pub(crate) fn linear_ticks(lo: f64, hi: f64, max_ticks: usize) -> Vec<f64> {
    if hi <= lo || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let step = nice_ceil((hi - lo) / max_ticks.max(1) as f64);
    let first = (lo / step).ceil() * step;
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        let v = first + i as f64 * step;
        if v > hi + step * 1e-9 {
            break;
        }
        out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        i += 1;
    }
    out
}

/// Ticks for a log axis: powers of ten, with 2× and 5× steps when the span is under three
/// decades; all within `[lo, hi]`.
pub(crate) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if lo <= 0.0 || hi <= lo {
        return vec![];
    }
    let decades = (hi / lo).log10();
    let mults: &[f64] = if decades < 3.0 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let step = if decades > 12.0 { 2 } else { 1 };
    let mut out = Vec::new();
    let mut e = lo.log10().floor() as i32;
    while 10f64.powi(e) <= hi * (1.0 + 1e-9) {
        if (e - lo.log10().floor() as i32) % step == 0 {
            for m in mults {
                let v = m * 10f64.powi(e);
                if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                    out.push(v);
                }
            }
        }
        e += 1;
    }
    out
}

/// Series colours (colour-blind friendly, print well).
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Colour of series `i`.
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Plot area inside a chart: total size and margins.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub(crate) bottom: f64,
}

impl Frame {
    pub fn new(width: f64, height: f64) -> Frame {
        Frame {
            width,
            height,
            left: 70.0,
            right: 20.0,
            top: 28.0,
            bottom: 42.0,
        }
    }
    pub(crate) fn x0(&self) -> f64 {
        self.left
    }
    pub(crate) fn x1(&self) -> f64 {
        self.width - self.right
    }
    pub(crate) fn y0(&self) -> f64 {
        self.height - self.bottom
    }
    pub(crate) fn y1(&self) -> f64 {
        self.top
    }
    pub(crate) fn plot_width(&self) -> f64 {
        self.x1() - self.x0()
    }
    pub(crate) fn plot_height(&self) -> f64 {
        self.y0() - self.y1()
    }
}

fn open_svg(out: &mut String, f: &Frame, title: &str, sx: &Scale, sy: &Scale, fx: Fmt, fy: Fmt) {
    let _ = write!(
        out,
        "<svg class=\"chart\" role=\"img\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         data-sx=\"{}\" data-sy=\"{}\" data-fx=\"{}\" data-fy=\"{}\" aria-label=\"{t}\">\
         <title>{t}</title>",
        sx.data_attr(),
        sy.data_attr(),
        fx.code(),
        fy.code(),
        w = f.width,
        h = f.height,
        t = esc(title)
    );
    let _ = write!(
        out,
        "<text class=\"ctitle\" x=\"{}\" y=\"16\">{}</text>",
        f.x0(),
        esc(title)
    );
}

/// Draw axes, grid lines and tick labels.
fn axes(
    out: &mut String,
    f: &Frame,
    sx: &Scale,
    sy: &Scale,
    (fx, fy): (Fmt, Fmt),
    (xl, yl): (&str, &str),
) {
    let max_x_ticks = ((f.plot_width() / 80.0) as usize).max(2);
    for t in sx.ticks(max_x_ticks) {
        let x = sx.map(t);
        let label = fx.format(t);
        // Centred under its tick, unless that runs into the y axis' labels (left of the plot)
        // or past the chart's right edge: then it starts, or ends, at its tick.
        let half = label_width(&label) / 2.0;
        let anchor = if x - half < f.x0() {
            "start"
        } else if x + half > f.width - 2.0 {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>",
            f.y0(),
            f.y1(),
            f.y0() + 14.0,
            esc(&label)
        );
    }
    for t in sy.ticks(((f.plot_height() / 40.0) as usize).max(2)) {
        let y = sy.map(t);
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            f.x0(),
            f.x1(),
            f.x0() - 5.0,
            y + 4.0,
            esc(&fy.format(t))
        );
    }
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\"/>\
         <line class=\"axis\" x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\"/>\
         <text class=\"alabel\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
         <text class=\"alabel\" transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        (f.x0() + f.x1()) / 2.0,
        f.height - 6.0,
        esc(xl),
        (f.y0() + f.y1()) / 2.0,
        esc(yl),
        x0 = f.x0(),
        x1 = f.x1(),
        y0 = f.y0(),
        y1 = f.y1(),
    );
}

/// One line of a line chart.
#[derive(Clone, Debug, Default)]
pub(crate) struct Series {
    pub name: String,
    pub colour: String,
    pub points: Vec<(f64, f64)>,
    /// Draw a dot (with a hover title) at every point; for short series such as curves.
    pub(crate) dots: bool,
    pub(crate) dashed: bool,
}

/// A labelled point drawn on top of a chart (e.g. the knee).
#[derive(Clone, Debug, Default)]
pub(crate) struct Mark {
    pub x: f64,
    pub y: f64,
    pub label: String,
}

/// A line chart description.
#[derive(Clone, Debug)]
pub(crate) struct LineChart {
    pub title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) x_fmt: Fmt,
    pub(crate) y_fmt: Fmt,
    pub(crate) x_log: bool,
    pub(crate) y_log: bool,
    pub series: Vec<Series>,
    /// Horizontal reference lines (value, label), e.g. the latency target.
    pub(crate) hlines: Vec<(f64, String)>,
    pub(crate) marks: Vec<Mark>,
    pub width: f64,
    pub height: f64,
}

impl LineChart {
    pub(crate) fn new(
        title: &str,
        x_label: &str,
        y_label: &str,
        x_fmt: Fmt,
        y_fmt: Fmt,
    ) -> LineChart {
        LineChart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_fmt,
            y_fmt,
            x_log: false,
            y_log: false,
            series: vec![],
            hlines: vec![],
            marks: vec![],
            width: 860.0,
            height: 320.0,
        }
    }

    /// Data extent over series, reference lines and marks.
    fn extent(&self) -> Option<((f64, f64), (f64, f64))> {
        let pts = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .chain(self.marks.iter().map(|m| (m.x, m.y)))
            .filter(|(x, y)| {
                x.is_finite()
                    && y.is_finite()
                    && (!self.x_log || *x > 0.0)
                    && (!self.y_log || *y > 0.0)
            });
        let mut ext: Option<((f64, f64), (f64, f64))> = None;
        for (x, y) in pts {
            ext = Some(match ext {
                None => ((x, x), (y, y)),
                Some(((a, b), (c, d))) => ((a.min(x), b.max(x)), (c.min(y), d.max(y))),
            });
        }
        let ((x0, x1), (mut y0, mut y1)) = ext?;
        for (v, _) in &self.hlines {
            y0 = y0.min(*v);
            y1 = y1.max(*v);
        }
        Some(((x0, x1), (y0, y1)))
    }

    /// The scales this chart will use.
    pub(crate) fn scales(&self) -> Option<(Frame, Scale, Scale)> {
        let names: Vec<&str> = self.series.iter().map(|s| s.name.as_str()).collect();
        let f = with_legend_room(Frame::new(self.width, self.height), &self.title, &names);
        let ((x0, x1), (y0, y1)) = self.extent()?;
        let sx = if self.x_log {
            Scale::log(x0, x1, f.x0(), f.x1())
        } else {
            // Start at zero for non-negative data; leave a little room after the last point.
            let lo = if x0 >= 0.0 { 0.0 } else { x0 };
            let hi = if self.x_fmt == Fmt::Seconds || x1 <= 0.0 {
                x1
            } else {
                let step = nice_ceil(x1 / 8.0);
                (x1 * 1.02 / step).ceil() * step
            };
            Scale::linear(lo, hi, f.x0(), f.x1())
        };
        let sy = if self.y_log {
            let lo = 10f64.powf(y0.log10().floor());
            let hi = 10f64.powf(y1.log10().ceil());
            Scale::log(lo, hi.max(lo * 10.0), f.y0(), f.y1())
        } else {
            Scale::linear(0.0f64.min(y0), nice_ceil(y1 * 1.05), f.y0(), f.y1())
        };
        Some((f, sx, sy))
    }

    /// Render to SVG; a chart with no data becomes a short note instead.
    pub(crate) fn render(&self) -> String {
        let Some((f, sx, sy)) = self.scales() else {
            return format!("<p class=\"note\">{}: no data.</p>", esc(&self.title));
        };
        let mut out = String::new();
        open_svg(&mut out, &f, &self.title, &sx, &sy, self.x_fmt, self.y_fmt);
        axes(
            &mut out,
            &f,
            &sx,
            &sy,
            (self.x_fmt, self.y_fmt),
            (&self.x_label, &self.y_label),
        );
        for (v, label) in &self.hlines {
            let y = sy.map(*v);
            let _ = write!(
                out,
                "<line class=\"ref\" x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\"/>\
                 <text class=\"reflabel\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                f.x0(),
                f.x1(),
                f.x1() - 4.0,
                y - 4.0,
                esc(label)
            );
        }
        for s in &self.series {
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|(x, y)| (!self.x_log || *x > 0.0) && (!self.y_log || *y > 0.0))
                .map(|&(x, y)| (sx.map(x), sy.map(y)))
                .collect();
            let pts = decimate(&pts);
            let mut d = String::with_capacity(pts.len() * 12);
            for (x, y) in &pts {
                let _ = write!(d, "{x:.1},{y:.1} ");
            }
            let _ = write!(
                out,
                "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\"{} points=\"{}\"><title>{}</title></polyline>",
                esc(&s.colour),
                if s.dashed { " stroke-dasharray=\"5 3\"" } else { "" },
                d.trim_end(),
                esc(&s.name)
            );
            if s.dots {
                for &(x, y) in &s.points {
                    if (self.x_log && x <= 0.0) || (self.y_log && y <= 0.0) {
                        continue;
                    }
                    let _ = write!(
                        out,
                        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{}\"><title>{}: {}, {}</title></circle>",
                        sx.map(x),
                        sy.map(y),
                        esc(&s.colour),
                        esc(&s.name),
                        esc(&self.x_fmt.format(x)),
                        esc(&self.y_fmt.format(y))
                    );
                }
            }
        }
        for m in &self.marks {
            let (x, y) = (sx.map(m.x), sy.map(m.y));
            // Right of the point, unless the label would leave the chart: then left of it.
            let (lx, anchor) = if x + 8.0 + label_width(&m.label) > f.width - 4.0 {
                (x - 8.0, "end")
            } else {
                (x + 8.0, "start")
            };
            let ly = if y - 8.0 < 12.0 { y + 18.0 } else { y - 8.0 };
            let _ = write!(
                out,
                "<circle class=\"mark\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"6\"/>\
                 <text class=\"marklabel\" x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"{anchor}\">{}</text>",
                esc(&m.label)
            );
        }
        legend(
            &mut out,
            &f,
            &self.title,
            self.series
                .iter()
                .map(|s| (s.name.as_str(), s.colour.as_str())),
        );
        out.push_str("</svg>");
        out
    }
}

/// Height of one row of the legend.
const LEGEND_ROW: f64 = 14.0;

/// Where each legend entry goes: (x, row), right-aligned rows above the plot, the first beside
/// the chart's title and never over it, each further row below the one before. None for fewer
/// than two entries (one series needs no legend).
fn legend_layout(f: &Frame, title: &str, names: &[&str]) -> Vec<(f64, usize)> {
    if names.len() < 2 {
        return Vec::new();
    }
    // The title is 13 px bold: about 7.5 px a character.
    let title_end = f.x0() + title.chars().count() as f64 * 7.5 + 12.0;
    let mut placed = vec![(0.0, 0); names.len()];
    let (mut x, mut row) = (f.x1(), 0);
    for (i, name) in names.iter().enumerate().rev() {
        let w = label_width(name) + 22.0;
        let left_end = if row == 0 { title_end } else { 4.0 };
        if x - w < left_end && x < f.x1() {
            row += 1;
            x = f.x1();
        }
        x -= w;
        placed[i] = (x, row);
    }
    placed
}

/// `f` with room above the plot for the legend's rows beyond the first (the chart grows, the
/// plot keeps its size).
fn with_legend_room(mut f: Frame, title: &str, names: &[&str]) -> Frame {
    let rows = legend_layout(&f, title, names)
        .iter()
        .map(|p| p.1 + 1)
        .max()
        .unwrap_or(1);
    let more = (rows.saturating_sub(1)) as f64 * LEGEND_ROW;
    f.top += more;
    f.height += more;
    f
}

/// Series legend above the plot, right-aligned (see [`legend_layout`]).
fn legend<'a>(
    out: &mut String,
    f: &Frame,
    title: &str,
    items: impl Iterator<Item = (&'a str, &'a str)>,
) {
    let items: Vec<_> = items.collect();
    let names: Vec<&str> = items.iter().map(|i| i.0).collect();
    for ((name, col), (x, row)) in items.iter().zip(legend_layout(f, title, &names)) {
        let y = 8.0 + row as f64 * LEGEND_ROW;
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"12\" height=\"10\" fill=\"{}\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            esc(col),
            x + 15.0,
            y + 9.0,
            esc(name)
        );
    }
}

/// Reduce a polyline to at most four points per pixel column (first, min, max, last), which
/// draws identically but keeps a 1-hour series small.
pub(crate) fn decimate(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if pts.len() < 2000 {
        return pts.to_vec();
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < pts.len() {
        let px = pts[i].0.floor();
        let mut j = i;
        let (mut lo, mut hi) = (pts[i], pts[i]);
        while j < pts.len() && pts[j].0.floor() == px {
            if pts[j].1 < lo.1 {
                lo = pts[j];
            }
            if pts[j].1 > hi.1 {
                hi = pts[j];
            }
            j += 1;
        }
        let (a, b) = if lo.0 <= hi.0 { (lo, hi) } else { (hi, lo) };
        for p in [pts[i], a, b, pts[j - 1]] {
            if out.last() != Some(&p) {
                out.push(p);
            }
        }
        i = j;
    }
    out
}

/// One latency histogram to draw: bins of `(low_ns, high_ns, share 0..1)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct HistSeries {
    pub name: String,
    pub colour: String,
    pub bins: Vec<(f64, f64, f64)>,
}

/// A shaded latency range with a label (a detected mode).
#[derive(Clone, Debug, Default)]
pub(crate) struct Band {
    pub low_ns: f64,
    pub high_ns: f64,
    pub label: String,
}

/// Latency histogram(s) on a log latency axis; y = share of operations per bin. One series is
/// drawn as bars, several as overlaid outlines.
/// Width in pixels a chart label of 11 px type takes (an estimate: no font metrics here).
fn label_width(label: &str) -> f64 {
    label.chars().count() as f64 * 6.2
}

pub(crate) fn histogram_chart(title: &str, series: &[HistSeries], bands: &[Band]) -> String {
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    let f = with_legend_room(Frame::new(860.0, 280.0), title, &names);
    // A source bucket starting at 0 (bcc's `0 -> 1`) is drawn from half its upper edge on
    // the log axis; its label keeps the real edges.
    let low = |b0: f64, b1: f64| if b0 > 0.0 { b0 } else { b1 / 2.0 };
    let lo = series
        .iter()
        .flat_map(|s| s.bins.iter().map(|b| low(b.0, b.1)))
        .fold(f64::INFINITY, f64::min);
    let hi = series
        .iter()
        .flat_map(|s| s.bins.iter().map(|b| b.1))
        .fold(0.0, f64::max);
    let top = series
        .iter()
        .flat_map(|s| s.bins.iter().map(|b| b.2))
        .fold(0.0, f64::max);
    if !lo.is_finite() || hi <= lo || top <= 0.0 {
        return format!("<p class=\"note\">{}: no data.</p>", esc(title));
    }
    let sx = Scale::log(lo, hi, f.x0(), f.x1());
    let sy = Scale::linear(0.0, nice_ceil(top * 100.0 * 1.05), f.y0(), f.y1());
    let mut out = String::new();
    open_svg(&mut out, &f, title, &sx, &sy, Fmt::Latency, Fmt::Percent);
    axes(
        &mut out,
        &f,
        &sx,
        &sy,
        (Fmt::Latency, Fmt::Percent),
        ("latency (log scale)", "share of operations"),
    );
    // Labels that would overlap the one before go one line lower; none leaves the plot.
    let mut placed: Vec<(f64, f64, usize)> = Vec::new();
    for b in bands {
        let (x0, x1) = (sx.map(b.low_ns.max(lo)), sx.map(b.high_ns.min(hi)));
        let half = label_width(&b.label) / 2.0;
        let cx = ((x0 + x1) / 2.0).clamp(f.x0() + half, (f.x1() - half).max(f.x0() + half));
        let line = (0..)
            .find(|&l| {
                !placed
                    .iter()
                    .any(|&(a, z, pl)| pl == l && cx - half < z && cx + half > a)
            })
            .unwrap_or(0);
        placed.push((cx - half - 4.0, cx + half + 4.0, line));
        let _ = write!(
            out,
            "<rect class=\"band\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"><title>{}</title></rect>\
             <text class=\"bandlabel\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            f.y1(),
            (x1 - x0).max(1.0),
            f.plot_height(),
            esc(&b.label),
            cx,
            f.y1() + 12.0 + 13.0 * line as f64,
            esc(&b.label)
        );
    }
    let single = series.len() == 1;
    for s in series {
        if single {
            for &(b0, b1, share) in &s.bins {
                if share <= 0.0 {
                    continue;
                }
                let (x0, x1) = (sx.map(low(b0, b1)), sx.map(b1));
                let y = sy.map(share * 100.0);
                let _ = write!(
                    out,
                    "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} – {}: {}%</title></rect>",
                    (x1 - x0 - 0.5).max(0.5),
                    f.y0() - y,
                    esc(&s.colour),
                    esc(&fmt_ns(b0)),
                    esc(&fmt_ns(b1)),
                    sig3(share * 100.0)
                );
            }
        } else {
            let mut d = String::new();
            for &(b0, b1, share) in &s.bins {
                let y = sy.map(share * 100.0);
                let _ = write!(
                    d,
                    "{:.1},{:.1} {:.1},{y:.1} {:.1},{y:.1} {:.1},{:.1} ",
                    sx.map(low(b0, b1)),
                    f.y0(),
                    sx.map(low(b0, b1)),
                    sx.map(b1),
                    sx.map(b1),
                    f.y0()
                );
            }
            let _ = write!(
                out,
                "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\" points=\"{}\"><title>{}</title></polyline>",
                esc(&s.colour),
                d.trim_end(),
                esc(&s.name)
            );
        }
    }
    legend(
        &mut out,
        &f,
        title,
        series.iter().map(|s| (s.name.as_str(), s.colour.as_str())),
    );
    out.push_str("</svg>");
    out
}

/// One part of a [`stacked_chart`]: its name, colour and value in each column.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stack {
    pub name: String,
    pub colour: String,
    pub values: Vec<f64>,
}

/// Stacked bars over time: column `i` spans `columns[i]` (start, length) on the x axis, and its
/// parts are stacked from the axis up in the order given, each `values[i] / length` high, so a
/// bar's height is the sum of its parts per unit of x and its area their sum (thread-seconds
/// drawn as threads on average, for instance). Every part's rectangle carries `data-col`,
/// `data-part` and its value (`data-v`); every bar's group carries its total (`data-total`).
/// The legend wraps below the plot.
pub(crate) fn stacked_chart(
    title: &str,
    (x_label, y_label): (&str, &str),
    y_fmt: Fmt,
    columns: &[(f64, f64)],
    parts: &[Stack],
) -> String {
    let totals: Vec<f64> = (0..columns.len())
        .map(|i| {
            parts
                .iter()
                .map(|p| p.values.get(i).copied().unwrap_or(0.0))
                .sum()
        })
        .collect();
    let top = columns
        .iter()
        .zip(&totals)
        .filter(|(c, _)| c.1 > 0.0)
        .map(|(c, t)| t / c.1)
        .fold(0.0, f64::max);
    if columns.is_empty() || top <= 0.0 {
        return format!("<p class=\"note\">{}: no data.</p>", esc(title));
    }
    // Legend rows: swatch and name, wrapped at the plot's width.
    let mut f = Frame::new(860.0, 300.0);
    let mut rows: Vec<Vec<(f64, &Stack)>> = vec![vec![]];
    let mut x = f.x0();
    for p in parts {
        let w = 7.0 * p.name.chars().count() as f64 + 26.0;
        if x + w > f.x1() && x > f.x0() {
            rows.push(vec![]);
            x = f.x0();
        }
        rows.last_mut().expect("a row").push((x, p));
        x += w;
    }
    f.bottom += 16.0 * rows.len() as f64;
    f.height += 16.0 * rows.len() as f64;
    let (t0, t1) = (columns[0].0, columns.last().map_or(1.0, |c| c.0 + c.1));
    let sx = Scale::linear(t0, t1, f.x0(), f.x1());
    let sy = Scale::linear(0.0, nice_ceil(top * 1.05), f.y0(), f.y1());
    let mut out = String::new();
    open_svg(&mut out, &f, title, &sx, &sy, Fmt::Seconds, y_fmt);
    axes(
        &mut out,
        &f,
        &sx,
        &sy,
        (Fmt::Seconds, y_fmt),
        (x_label, y_label),
    );
    for (i, (&(start, len), total)) in columns.iter().zip(&totals).enumerate() {
        if len <= 0.0 {
            continue;
        }
        let (x0, x1) = (sx.map(start), sx.map(start + len));
        let _ = write!(
            out,
            "<g class=\"bar\" data-col=\"{i}\" data-total=\"{total}\" data-len=\"{len}\">"
        );
        let mut acc = 0.0;
        for (k, p) in parts.iter().enumerate() {
            let v = p.values.get(i).copied().unwrap_or(0.0);
            if v <= 0.0 {
                continue;
            }
            let (y_lo, y_hi) = (sy.map(acc / len), sy.map((acc + v) / len));
            acc += v;
            let _ = write!(
                out,
                "<rect data-col=\"{i}\" data-part=\"{k}\" data-v=\"{v}\" x=\"{x0:.2}\" y=\"{y_hi:.3}\" \
                 width=\"{:.2}\" height=\"{:.3}\" fill=\"{}\"><title>{}–{} s: {} {} ({}%)</title></rect>",
                (x1 - x0 - 0.3).max(0.3),
                y_lo - y_hi,
                esc(&p.colour),
                sig3(start),
                sig3(start + len),
                esc(&p.name),
                sig3(v),
                sig3(100.0 * v / total.max(1e-300))
            );
        }
        out.push_str("</g>");
    }
    for (r, row) in rows.iter().enumerate() {
        let y = f.y0() + 30.0 + 16.0 * r as f64;
        for (x, p) in row {
            let _ = write!(
                out,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"10\" fill=\"{}\"/>\
                 <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                y - 9.0,
                esc(&p.colour),
                x + 15.0,
                y,
                esc(&p.name)
            );
        }
    }
    out.push_str("</svg>");
    out
}

fn join_into(out: &mut String, items: impl Iterator<Item = String>) {
    for (i, s) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&s);
    }
}

/// Quantise a level to a palette index (`None` for an empty cell).
fn quant(l: f64) -> Option<usize> {
    if l <= 0.0 {
        None
    } else {
        Some(((l * HEAT_LEVELS as f64).ceil() as usize).clamp(1, HEAT_LEVELS) - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::heat::heat_rgb;
    use super::*;
    use crate::render::heatmap::HeatKind;

    #[test]
    fn linear_scale_maps_ends_and_middle() {
        let s = Scale::linear(0.0, 100.0, 50.0, 450.0);
        assert_eq!(s.map(0.0), 50.0);
        assert_eq!(s.map(100.0), 450.0);
        assert_eq!(s.map(25.0), 150.0);
        // Inverted range (SVG y grows downwards).
        let y = Scale::linear(0.0, 10.0, 300.0, 20.0);
        assert_eq!(y.map(10.0), 20.0);
    }

    #[test]
    fn log_scale_spaces_decades_equally() {
        let s = Scale::log(1e3, 1e6, 0.0, 300.0);
        assert!((s.map(1e3) - 0.0).abs() < 1e-9);
        assert!((s.map(1e4) - 100.0).abs() < 1e-9);
        assert!((s.map(1e5) - 200.0).abs() < 1e-9);
        assert!((s.map(1e6) - 300.0).abs() < 1e-9);
        // Degenerate domains stay finite.
        let d = Scale::log(0.0, 0.0, 0.0, 100.0);
        assert!(d.map(1.0).is_finite());
        let l = Scale::linear(5.0, 5.0, 0.0, 100.0);
        assert!(l.map(5.0).is_finite());
    }

    #[test]
    fn nice_numbers_and_ticks() {
        assert_eq!(nice_ceil(0.7), 1.0);
        assert_eq!(nice_ceil(1.3), 2.0);
        assert_eq!(nice_ceil(2.2), 2.5);
        assert_eq!(nice_ceil(37.0), 50.0);
        assert_eq!(nice_ceil(100.0), 100.0);
        assert_eq!(
            linear_ticks(0.0, 100.0, 5),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        assert_eq!(
            linear_ticks(0.0, 3600.0, 8),
            (0..=7).map(|i| i as f64 * 500.0).collect::<Vec<_>>()
        );
        assert_eq!(log_ticks(1e3, 1e7), vec![1e3, 1e4, 1e5, 1e6, 1e7]);
        assert_eq!(log_ticks(100.0, 1000.0), vec![100.0, 200.0, 500.0, 1000.0]);
        let wide = log_ticks(1.0, 1e14);
        assert!(wide.len() <= 8, "{wide:?}");
    }

    #[test]
    fn decimation_keeps_extremes() {
        let pts: Vec<(f64, f64)> = (0..3600)
            .map(|i| {
                (
                    i as f64 / 10.0,
                    if i == 1234 { 99.0 } else { (i % 7) as f64 },
                )
            })
            .collect();
        let d = decimate(&pts);
        assert!(d.len() < 1500, "{}", d.len());
        assert!(d.contains(&(123.4, 99.0)));
        assert_eq!(d.first(), pts.first());
        assert_eq!(d.last(), pts.last());
    }

    #[test]
    fn palette_runs_light_to_dark() {
        let light = heat_rgb(HeatKind::Frequency, 0.0);
        let dark = heat_rgb(HeatKind::Frequency, 1.0);
        let sum = |c: [u8; 3]| c.iter().map(|&v| v as u32).sum::<u32>();
        assert!(sum(light) > sum(dark) + 300);
        assert_eq!(quant(0.0), None);
        assert_eq!(quant(1.0), Some(HEAT_LEVELS - 1));
        assert_eq!(quant(0.001), Some(0));
    }

    #[test]
    fn line_chart_places_points_and_marks() {
        let mut c = LineChart::new("curve", "IOPS", "p99", Fmt::Rate, Fmt::Latency);
        c.y_log = true;
        c.series.push(Series {
            name: "p99".into(),
            colour: colour(0).into(),
            points: vec![(1000.0, 1e5), (2000.0, 2e5), (4000.0, 1e6)],
            dots: true,
            dashed: false,
        });
        c.hlines.push((5e5, "target 500 µs".into()));
        c.marks.push(Mark {
            x: 2000.0,
            y: 2e5,
            label: "knee".into(),
        });
        let (f, sx, sy) = c.scales().unwrap();
        assert_eq!(sx.map(0.0), f.x0());
        // A little room after the last point, up to the next tick step.
        assert_eq!(sx.map(4500.0), f.x1());
        assert!((sy.map(1e5) - f.y0()).abs() < 1e-9);
        assert!((sy.map(1e6) - f.y1()).abs() < 1e-9);
        let svg = c.render();
        assert!(svg.starts_with("<svg class=\"chart\""));
        assert_eq!(svg.matches("<circle").count(), 4);
        assert!(svg.contains("target 500 µs"));
        assert!(svg.contains(">knee</text>"));
        // A label at the right edge goes left of its point, not off the chart.
        c.marks[0] = Mark {
            x: 4000.0,
            y: 1e6,
            label: "knee (queueing starts)".into(),
        };
        let svg = c.render();
        assert!(
            svg.contains("text-anchor=\"end\">knee (queueing starts)</text>"),
            "{svg}"
        );
        assert!(svg.contains("data-sy=\"log,"));
        let empty = LineChart::new("none", "x", "y", Fmt::Rate, Fmt::Rate).render();
        assert!(empty.contains("no data"));
    }

    #[test]
    fn histogram_chart_draws_bars_and_bands() {
        let s = HistSeries {
            name: "read".into(),
            colour: colour(0).into(),
            bins: vec![(1e4, 2e4, 0.25), (2e4, 4e4, 0.0), (1e6, 2e6, 0.75)],
        };
        let band = Band {
            low_ns: 0.9e6,
            high_ns: 2.1e6,
            label: "mode 1.4 ms".into(),
        };
        let svg = histogram_chart("h", std::slice::from_ref(&s), &[band]);
        // Two non-empty bars, one band.
        assert_eq!(svg.matches("fill=\"#1f77b4\"><title>").count(), 2);
        assert!(svg.contains("class=\"band\""));
        assert!(svg.contains("mode 1.4 ms"));
        // Labels of neighbouring modes do not overlap: the second goes one line lower, and
        // none is cut at the plot's edge.
        let near = [
            Band {
                low_ns: 1.0e4,
                high_ns: 1.2e4,
                label: "mode 11 µs (40%)".into(),
            },
            Band {
                low_ns: 1.3e4,
                high_ns: 1.5e4,
                label: "mode 14 µs (60%)".into(),
            },
        ];
        let svg = histogram_chart("h", std::slice::from_ref(&s), &near);
        let label_at = |text: &str| -> (f64, f64) {
            let end = svg.find(&format!(">{text}</text>")).unwrap();
            let tag = &svg[svg[..end].rfind("<text").unwrap()..end];
            let num = |k: &str| -> f64 {
                let a = tag.find(&format!("{k}=\"")).unwrap() + k.len() + 2;
                tag[a..a + tag[a..].find('"').unwrap()].parse().unwrap()
            };
            (num("x"), num("y"))
        };
        let ((x1, y1), (x2, y2)) = (label_at("mode 11 µs (40%)"), label_at("mode 14 µs (60%)"));
        let f = Frame::new(860.0, 280.0);
        assert!(y2 > y1 || (x2 - x1).abs() > 16.0 * 6.2, "{svg}");
        assert!(
            x1 - 16.0 * 6.2 / 2.0 >= f.x0() - 0.1,
            "label cut at the left: {x1}"
        );
        let two = histogram_chart(
            "h",
            &[
                s.clone(),
                HistSeries {
                    name: "b".into(),
                    ..s
                },
            ],
            &[],
        );
        assert_eq!(two.matches("<polyline").count(), 2);
    }
}
