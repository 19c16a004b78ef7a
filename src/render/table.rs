//! The one table type every renderer uses, with its back ends: plain/ANSI text that fits the
//! terminal width ([`Table::render`]), HTML ([`Table::html`]) and Markdown ([`Table::markdown`]).
//! Tables that more than one renderer shows are built here once (the calibration load curve).
//!
//! Text tables never wrap: when the columns are wider than the terminal, the gap between
//! columns narrows, long headers and text cells are abbreviated with `…`, and as a last resort
//! the rightmost columns are left out with a note saying which ones and how to see them.

use std::fmt::Write as _;

use super::svg::esc;
use super::TermStyle;
use crate::results::analysis::Analysis;
use crate::results::Results;
use crate::units::{fmt_ns, fmt_rate, sig3};

/// A table: a header row and data rows of preformatted cells. The first column is text
/// (left-aligned); the others are right-aligned.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// Width of a string in terminal columns (one per character: iolens prints no wide glyphs).
fn cols(s: &str) -> usize {
    s.chars().count()
}

/// `s` cut to `w` columns, ending in `…` when cut.
pub fn abbreviate(s: &str, w: usize) -> String {
    if cols(s) <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut t: String = s.chars().take(w - 1).collect();
    t.push('…');
    t
}

/// `cells` (one column) cut to `w` columns each so that cells that differ still read
/// differently: a cell whose plain abbreviation another cell shares keeps its head and its
/// tail around the `…` (`SQL*Net…client` and `SQL*Net…o client`), with as much head as leaves
/// every such cell distinct. `None` when no split at `w` keeps them apart.
fn abbreviate_unique(cells: &[&str], w: usize) -> Option<Vec<String>> {
    let mut out: Vec<String> = cells.iter().map(|c| abbreviate(c, w)).collect();
    let mut seen: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    let mut clash = vec![false; cells.len()];
    for (i, a) in out.iter().enumerate() {
        if let Some(first) = seen.insert(a.as_str(), cells[i]) {
            if first != cells[i] {
                clash[i] = true;
            }
        }
    }
    if !clash.iter().any(|&c| c) {
        return Some(out);
    }
    // Every cell whose abbreviation is shared by a different cell is in a clash group.
    let clashing: std::collections::HashSet<String> = (0..cells.len())
        .filter(|&i| clash[i])
        .map(|i| out[i].clone())
        .collect();
    let group: Vec<usize> = (0..cells.len())
        .filter(|&i| clashing.contains(&out[i]))
        .collect();
    let outside: std::collections::HashSet<&str> = (0..cells.len())
        .filter(|j| !clashing.contains(&out[*j]))
        .map(|j| out[j].as_str())
        .collect();
    let split = |c: &str, head: usize| -> String {
        let ch: Vec<char> = c.chars().collect();
        if ch.len() <= w {
            return c.to_string();
        }
        let tail = w - 1 - head;
        let mut t: String = ch[..head].iter().collect();
        t.push('…');
        t.extend(&ch[ch.len() - tail..]);
        t
    };
    if w < 2 {
        return None;
    }
    for head in (0..w - 1).rev() {
        let tried: Vec<String> = group.iter().map(|&i| split(cells[i], head)).collect();
        let mut by: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
        let distinct = group.iter().zip(&tried).all(|(&i, t)| {
            by.insert(t.as_str(), cells[i])
                .is_none_or(|prev| prev == cells[i])
        });
        // Nor may a split cell read as a cell outside the group.
        let apart = tried.iter().all(|t| !outside.contains(t.as_str()));
        if distinct && apart {
            for (&i, t) in group.iter().zip(tried) {
                out[i] = t;
            }
            return Some(out);
        }
    }
    None
}

/// A cell that reads as a figure (a number with its unit, or a placeholder): never cut.
fn is_figure(c: &str) -> bool {
    c.is_empty()
        || c == "-"
        || c == crate::results::UNKNOWN_RATE
        || c == "unknown"
        || c.starts_with(|ch: char| ch.is_ascii_digit() || ch == '-' || ch == '+' || ch == '.')
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: vec![],
        }
    }

    /// A table of `header` and `rows`.
    pub fn of(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> Table {
        let mut t = Table::new(header);
        t.rows.extend(rows);
        t
    }

    /// No rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Leave out the column headed `name`, from the header and every row (nothing when no
    /// column has that name): a column is named, never numbered, so adding one before it
    /// cannot make this drop the wrong one.
    pub fn drop_column(&mut self, name: &str) {
        let Some(i) = self.header.iter().position(|h| h == name) else {
            return;
        };
        self.header.remove(i);
        for row in &mut self.rows {
            if i < row.len() {
                row.remove(i);
            }
        }
    }

    /// Which columns hold text (the first, and any with a cell that is not a figure).
    fn text_columns(&self) -> Vec<bool> {
        (0..self.header.len())
            .map(|i| {
                i == 0
                    || self
                        .rows
                        .iter()
                        .any(|r| !is_figure(r.get(i).map_or("", |c| c)))
            })
            .collect()
    }

    /// Column widths that fit `width`: (widths, gap, number of columns shown).
    fn layout(&self, width: usize) -> (Vec<usize>, usize, usize) {
        let n = self.header.len();
        let cell = |r: &Vec<String>, i: usize| r.get(i).map(|c| cols(c)).unwrap_or(0);
        let data_w: Vec<usize> = (0..n)
            .map(|i| self.rows.iter().map(|r| cell(r, i)).max().unwrap_or(0))
            .collect();
        let mut w: Vec<usize> = (0..n)
            .map(|i| data_w[i].max(cols(&self.header[i])))
            .collect();
        // Text columns (the first, and any holding words) may be cut down to a few characters;
        // columns of figures keep their data whole and only abbreviate their header.
        let text = self.text_columns();
        let min: Vec<usize> = (0..n)
            .map(|i| {
                if text[i] {
                    // As narrow as six columns, or as the narrowest width at which its
                    // different cells still read differently.
                    let cells: Vec<&str> = self
                        .rows
                        .iter()
                        .map(|r| r.get(i).map_or("", |c| c))
                        .collect();
                    (w[i].min(6)..w[i])
                        .find(|&m| abbreviate_unique(&cells, m).is_some())
                        .unwrap_or(w[i])
                } else {
                    data_w[i].max(cols(&self.header[i]).min(4)).max(1)
                }
            })
            .collect();
        let total = |w: &[usize], shown: usize, gap: usize| {
            w[..shown].iter().sum::<usize>() + gap * shown.saturating_sub(1)
        };
        let mut gap = 2;
        if total(&w, n, gap) > width {
            gap = 1;
        }
        // Narrow the widest column that can still give, one column at a time.
        while total(&w, n, gap) > width {
            let pick = (0..n)
                .filter(|&i| w[i] > min[i])
                .max_by_key(|&i| (w[i] - min[i], text[i]));
            match pick {
                Some(i) => w[i] -= 1,
                None => break,
            }
        }
        let mut shown = n;
        while shown > 1 && total(&w, shown, gap) > width {
            shown -= 1;
        }
        (w, gap, shown)
    }

    /// The table as text fitting `style.width` columns; the header bold when colour is on.
    pub fn render(&self, style: &TermStyle) -> String {
        let (w, gap, shown) = self.layout(style.width);
        let mut out = String::new();
        // Each column's cells cut together, so that different cells never read the same.
        let cut: Vec<Vec<String>> = (0..shown)
            .map(|i| {
                let cells: Vec<&str> = self
                    .rows
                    .iter()
                    .map(|r| r.get(i).map_or("", |c| c.as_str()))
                    .collect();
                abbreviate_unique(&cells, w[i])
                    .unwrap_or_else(|| cells.iter().map(|c| abbreviate(c, w[i])).collect())
            })
            .collect();
        let line = |out: &mut String, r: &[String], row: Option<usize>, bold: bool| {
            let mut s = String::new();
            for (i, wi) in w.iter().enumerate().take(shown) {
                let c = match row {
                    Some(k) => cut[i][k].clone(),
                    None => abbreviate(r.get(i).map_or("", |c| c.as_str()), *wi),
                };
                let pad = wi.saturating_sub(cols(&c));
                if i == 0 {
                    s.push_str(&c);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str(&" ".repeat(gap + pad));
                    s.push_str(&c);
                }
            }
            let s = s.trim_end();
            if bold && style.color {
                let _ = writeln!(out, "\x1b[1m{s}\x1b[0m");
            } else {
                let _ = writeln!(out, "{s}");
            }
        };
        line(&mut out, &self.header, None, true);
        for (k, r) in self.rows.iter().enumerate() {
            line(&mut out, r, Some(k), false);
        }
        if shown < self.header.len() {
            let left: Vec<&str> = self.header[shown..]
                .iter()
                .map(|h| if h.is_empty() { "notes" } else { h.as_str() })
                .collect();
            let note = format!(
                "({} more column(s) need a wider terminal: {}; use --width)",
                left.len(),
                left.join(", ")
            );
            let _ = writeln!(out, "{}", abbreviate(&note, style.width));
        }
        out
    }

    /// The table as an HTML `<table>` (cells escaped). Cells of text columns carry class `t`:
    /// long text there wraps instead of widening the page.
    pub fn html(&self) -> String {
        let text = self.text_columns();
        let mut s = String::from("<table><thead><tr>");
        for h in &self.header {
            let _ = write!(s, "<th>{}</th>", esc(h));
        }
        s.push_str("</tr></thead><tbody>");
        for r in &self.rows {
            s.push_str("<tr>");
            for (i, c) in r.iter().enumerate() {
                if text.get(i).copied().unwrap_or(false) {
                    let _ = write!(s, "<td class=\"t\">{}</td>", esc(c));
                } else {
                    let _ = write!(s, "<td>{}</td>", esc(c));
                }
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody></table>");
        s
    }

    /// The table as GitHub-flavoured Markdown (text left-aligned, figures right-aligned, `|`
    /// escaped).
    pub(crate) fn markdown(&self) -> String {
        let cell = |c: &str| c.replace('|', "\\|");
        let mut s = String::new();
        let _ = writeln!(
            s,
            "| {} |",
            self.header
                .iter()
                .map(|h| cell(h))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let sep: Vec<&str> = self
            .text_columns()
            .into_iter()
            .map(|text| if text { "---" } else { "---:" })
            .collect();
        let _ = writeln!(s, "| {} |", sep.join(" | "));
        for r in &self.rows {
            let _ = writeln!(
                s,
                "| {} |",
                (0..self.header.len())
                    .map(|i| cell(r.get(i).map_or("", |c| c.as_str())))
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
        }
        s
    }
}

/// The calibration load curve, one row per step: the one table `show`, `report` and the end of
/// `calibrate` print. The last column marks the step with the most IOPS at the target, the
/// knee, and steps over the target.
pub(crate) fn calibration_curve(r: &Results, an: &Analysis) -> Option<Table> {
    let c = r.calibration.as_ref()?;
    if c.curve.is_empty() {
        return None;
    }
    let knee = super::findings::knee_of(an);
    // With `--watch`: how many requests each step kept in the device, where the curve
    // flattens because the device takes no more.
    let watched = c.curve.iter().any(|p| p.device_in_flight.is_some());
    let mut header = vec![
        "sessions",
        "qd",
        "IOPS",
        "MB/s",
        "p50",
        "p99",
        "p99.9",
        "CPU µs/IO",
        "runq µs/IO",
        "dev await",
    ];
    if watched {
        header.push("in device");
    }
    header.push("");
    let mut t = Table::new(&header);
    for (i, p) in c.curve.iter().enumerate() {
        let mut note = Vec::new();
        if c.max_iops_point == Some(i) {
            note.push("← max at target");
        }
        if knee.as_ref().is_some_and(|k| k.0 == i) {
            note.push("← knee");
        }
        if p.p99_ns > c.max_latency_ns {
            note.push("over target");
        }
        let mut row = vec![
            p.sessions.to_string(),
            p.qd.to_string(),
            fmt_rate(p.iops),
            sig3(p.mb_per_s),
            fmt_ns(p.p50_ns as f64),
            fmt_ns(p.p99_ns as f64),
            fmt_ns(p.p999_ns as f64),
            sig3(p.cpu_us_per_io),
            sig3(p.runq_us_per_io),
            fmt_ns(p.device_await_us * 1e3),
        ];
        if watched {
            row.push(p.device_in_flight.map_or("-".into(), sig3));
        }
        row.push(note.join(" "));
        t.row(row);
    }
    Some(t)
}

/// Plain text at `width` columns (for tests).
/// A section heading: underlined (bold and underlined in colour).
pub(crate) fn heading(out: &mut String, style: &TermStyle, text: &str) {
    if style.color {
        let _ = writeln!(out, "\n\x1b[1;4m{text}\x1b[0m");
    } else {
        let _ = writeln!(out, "\n{text}\n{}", "=".repeat(text.chars().count()));
    }
}

/// One section: a title, lines of text and an optional table.
pub struct Block {
    pub title: String,
    pub lines: Vec<String>,
    pub table: Option<Table>,
}

/// Sections as terminal text: heading, lines, table.
pub(crate) fn blocks_text(blocks: Vec<Block>, style: &TermStyle) -> String {
    let mut out = String::new();
    for b in blocks {
        heading(&mut out, style, &b.title);
        for l in &b.lines {
            let _ = writeln!(out, "{l}");
        }
        if let Some(t) = &b.table {
            out.push_str(&t.render(style));
        }
    }
    out
}

/// Sections as HTML: `<h3>` title, paragraphs, table.
pub(crate) fn blocks_html(blocks: Vec<Block>) -> String {
    let mut out = String::new();
    for b in blocks {
        let _ = write!(out, "<h3>{}</h3>", esc(&b.title));
        for l in &b.lines {
            let _ = write!(out, "<p>{}</p>", esc(l));
        }
        if let Some(t) = &b.table {
            out.push_str(&t.html());
        }
    }
    out
}

/// Text for a Markdown paragraph: characters that would start markup are escaped.
pub(crate) fn md(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\`*_[]<>|#".contains(c) {
            o.push('\\');
        }
        o.push(c);
    }
    o
}

/// Sections as Markdown: `###` title, paragraphs, table (the Markdown twin of
/// [`blocks_text`] and [`blocks_html`]).
pub(crate) fn blocks_markdown(blocks: Vec<Block>) -> String {
    let mut out = String::new();
    for b in blocks {
        let _ = writeln!(out, "### {}\n", md(&b.title));
        for l in &b.lines {
            let _ = writeln!(out, "{}\n", md(l));
        }
        if let Some(t) = &b.table {
            let _ = writeln!(out, "{}", t.markdown());
        }
    }
    out
}

#[cfg(test)]
pub(crate) fn plain(width: usize) -> TermStyle {
    TermStyle {
        color: false,
        width,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide() -> Table {
        let mut t = Table::new(&[
            "run", "op", "count", "IOPS", "MB/s", "mean", "p50", "p99", "p99.9", "max", "errors",
        ]);
        t.row(
            [
                "0: randread 8 KiB, 16 sessions, queue depth 1",
                "read",
                "1234567",
                "123k",
                "1011",
                "123.4 µs",
                "110.2 µs",
                "1.234 ms",
                "12.34 ms",
                "123.4 ms",
                "0",
            ]
            .map(String::from)
            .to_vec(),
        );
        t
    }

    #[test]
    fn a_column_is_dropped_by_its_name_wherever_it_stands() {
        let mut t = Table::new(&["run", "new", "count", "MB/s", "p99"]);
        t.row(vec![
            "a".into(),
            "x".into(),
            "1".into(),
            "0".into(),
            "2 ms".into(),
        ]);
        t.row(vec![
            "b".into(),
            "y".into(),
            "3".into(),
            "0".into(),
            "4 ms".into(),
        ]);
        t.drop_column("MB/s");
        assert_eq!(t.header, ["run", "new", "count", "p99"]);
        assert_eq!(t.rows[1], ["b", "y", "3", "4 ms"]);
        t.drop_column("no such column");
        assert_eq!(t.header.len(), 4);
    }

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(&["name", "n"]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["long name".into(), "12345".into()]);
        let s = t.render(&plain(80));
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "name           n");
        assert_eq!(lines[1], "a              1");
        assert_eq!(lines[2], "long name  12345");
    }

    #[test]
    fn abbreviates_text_not_figures_to_fit() {
        let t = wide();
        let s = t.render(&plain(80));
        for l in s.lines() {
            assert!(cols(l) <= 80, "{} > 80: {l:?}\n{s}", cols(l));
        }
        let data = s.lines().nth(1).unwrap();
        // The long run name is cut; every figure survives whole.
        assert!(data.starts_with("0: ra"), "{s}");
        assert!(data.contains('…'), "{s}");
        for f in [
            "1234567",
            "123k",
            "123.4 µs",
            "1.234 ms",
            "12.34 ms",
            "123.4 ms",
        ] {
            assert!(data.contains(f), "{f} missing:\n{s}");
        }
        // Wide enough: nothing cut.
        assert!(!t.render(&plain(200)).contains('…'));
    }

    #[test]
    fn leaves_out_columns_only_as_last_resort_and_says_so() {
        let s = wide().render(&plain(40));
        for l in s.lines() {
            assert!(cols(l) <= 40, "{l:?}");
        }
        assert!(s.contains("more column(s)"), "{s}");
    }

    #[test]
    fn different_cells_never_abbreviate_alike() {
        let mut t = Table::new(&["event", "count", "mean", "p50", "p99", "p99.9", "max"]);
        for name in [
            "SQL*Net message to client",
            "SQL*Net message from client",
            "SQL*Net more data to client",
            "db file sequential read",
            "db file scattered read",
        ] {
            t.row(
                [
                    name, "12345", "1.22 ms", "617 µs", "1.82 ms", "1.82 ms", "1.82 ms",
                ]
                .map(String::from)
                .to_vec(),
            );
        }
        for width in [60, 50, 45] {
            let s = t.render(&plain(width));
            // The rows differ only in their names: no two may read the same.
            let firsts: Vec<&str> = s.lines().skip(1).take(5).collect();
            let mut uniq = firsts.clone();
            uniq.sort_unstable();
            uniq.dedup();
            assert_eq!(uniq.len(), 5, "at {width}: {firsts:?}\n{s}");
            for l in s.lines() {
                assert!(cols(l) <= width, "{l:?} wider than {width}\n{s}");
            }
        }
        // Where the head alone tells them apart, the plain abbreviation stays.
        let cells = ["abcdefghij", "xbcdefghij"];
        assert_eq!(abbreviate_unique(&cells, 5).unwrap(), ["abcd…", "xbcd…"]);
        // The shared head is kept as far as it can be, the tail tells them apart.
        let cells = ["SQL*Net message to client", "SQL*Net message from client"];
        let cut = abbreviate_unique(&cells, 10).unwrap();
        assert_ne!(cut[0], cut[1], "{cut:?}");
        assert!(
            cut.iter()
                .all(|c| cols(c) == 10 && c.starts_with('S') && c.contains('…')),
            "{cut:?}"
        );
    }

    #[test]
    fn html_and_markdown_escape() {
        let mut t = Table::new(&["a", "b"]);
        t.row(vec!["<x>".into(), "1|2".into()]);
        // A text cell (it may wrap in a browser); figures keep plain cells.
        assert!(
            t.html().contains("<td class=\"t\">&lt;x&gt;</td>"),
            "{}",
            t.html()
        );
        let md = t.markdown();
        assert_eq!(md.lines().next(), Some("| a | b |"));
        assert_eq!(md.lines().nth(1), Some("| --- | ---: |"));
        assert_eq!(md.lines().nth(2), Some("| <x> | 1\\|2 |"));
    }
}
