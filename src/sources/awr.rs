//! Oracle AWR (`awrrpt_*.txt`) and Statspack (`spreport`) reports in text form.
//!
//! What is read:
//! - the snapshot window: the `Begin Snap:` / `End Snap:` lines (`DD-Mon-YY HH:MM:SS`, the
//!   database's local time, written as if UTC) give the start and the duration of the one
//!   interval the report covers, cross-checked against `Elapsed: N (mins)`;
//! - every `Wait Event Histogram` section (pages repeat the title): one op per event, its
//!   buckets taken from the column headings (`<1ms` … `<32ms`, `<=1s`, `>1s`, and the
//!   microsecond / fraction-of-a-second headings of newer releases: `<32us`, `<1/8s`; `s` is
//!   1024 ms, as the report says). Columns are found from the dashed rule under the headings,
//!   so blank cells (no waits) are told from missing ones;
//!   Idle events (listed last, "idle events last") are named in the spec (`idle_events`): the
//!   first row that sorts before the row above it begins them;
//! - the `Foreground Wait Events` table (waits, total wait time, average wait; times in the
//!   column's unit or with their own, `117.86us`, as newer releases print them) as means-only
//!   evidence: written into the run's spec (`foreground_wait_events`), never as a distribution.
//!
//! The report prints each event's total waits (`71K` when ≥ 10,000 in Statspack, `661.6K` in
//! AWR) and the share of waits in each bucket to 0.1 % (`.0`: under 0.05 % but not zero;
//! blank: none). Bucket counts are rebuilt from these: each count is the whole number whose
//! share rounds to the printed one, and the counts add up to the total. Where the total is
//! printed in full and under 1,000 waits this gives every bucket's count exactly; otherwise the
//! counts are estimates (said in a warning, with the events concerned). A row whose shares do
//! not add up to 100 % within their rounding is not used (counted as unparsed, with a warning).
//! Waits in an open-ended column (`>1s`) have no upper edge and are recorded at its lower edge
//! (a lower bound, warned). `Wait Event Histogram Detail` sections are not read (warned).
//!
//! A report that ends inside a section this reader uses (truncated), or that has histogram
//! rows but no snapshot window, is an error. Memory: one small row of counts per event.

use anyhow::{bail, Result};
use serde_json::json;

use super::{ingest_run, rfc3339_ns, Format, IngestOptions, LineReader, SnapshotSeries};
use crate::results::{BucketConvention, RunResult};

/// Most events one report may list (a real report lists a few hundred).
const MAX_EVENTS: usize = 100_000;

/// Most bucket columns one histogram table may have (a real one has 8 to 13).
const MAX_COLUMNS: usize = 64;

/// Most waits one row may print (`999.9G`, and then some): larger totals are refused.
const MAX_TOTAL: u64 = 1 << 50;

/// Which section the reader is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    None,
    Histogram,
    Detail,
    Foreground,
}

/// One bucket column: `[lo_ns, hi_ns)`; `hi_ns == None` for an open-ended column (`>1s`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bucket {
    lo_ns: u64,
    hi_ns: Option<u64>,
}

/// Columns of the current table: byte spans from the dashed rule, and (for histograms) the
/// bucket of each percentage column.
#[derive(Debug, Clone, Default)]
struct Table {
    spans: Vec<(usize, usize)>,
    buckets: Vec<Bucket>,
}

/// A time heading such as `<1ms`, `<=1s`, `>1s`, `<32us`, `<1/8s`, `>=2s`: (is an upper edge,
/// edge in ns). `s` is 1024 ms (the report: "s is 1024 milliseconds (approximately 1 second)").
fn parse_heading(h: &str) -> Option<(bool, u64)> {
    let (upper, rest) = if let Some(r) = h.strip_prefix("<=") {
        (true, r)
    } else if let Some(r) = h.strip_prefix('<') {
        (true, r)
    } else if let Some(r) = h.strip_prefix(">=") {
        (false, r)
    } else if let Some(r) = h.strip_prefix('>') {
        (false, r)
    } else {
        return None;
    };
    let (num, unit_ns) = if let Some(n) = rest.strip_suffix("us") {
        (n, 1_000.0)
    } else if let Some(n) = rest.strip_suffix("ms") {
        (n, 1_000_000.0)
    } else if let Some(n) = rest.strip_suffix('s') {
        (n, 1_024_000_000.0)
    } else {
        return None;
    };
    let v = match num.split_once('/') {
        Some((a, b)) => a.parse::<f64>().ok()? / b.parse::<f64>().ok()?,
        None => num.parse::<f64>().ok()?,
    };
    if !(v.is_finite() && v > 0.0) {
        return None;
    }
    Some((upper, (v * unit_ns).round() as u64))
}

/// Column spans of a dashed rule (`----- ----- …`).
fn rule_spans(line: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < line.len() {
        if line[i] == b'-' {
            let s = i;
            while i < line.len() && line[i] == b'-' {
                i += 1;
            }
            spans.push((s, i));
        } else {
            i += 1;
        }
    }
    spans
}

/// Whitespace-separated tokens of `line` from byte `from`, with their end offsets.
fn tokens(line: &[u8], from: usize) -> Vec<(usize, &[u8])> {
    let mut out = Vec::new();
    let mut i = from.min(line.len());
    while i < line.len() {
        if line[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let s = i;
        while i < line.len() && !line[i].is_ascii_whitespace() {
            i += 1;
        }
        out.push((i, &line[s..i]));
    }
    out
}

/// The column (index into `spans`) of a right-aligned value ending at byte `end`.
fn column_of(spans: &[(usize, usize)], end: usize) -> Option<usize> {
    spans
        .iter()
        .position(|&(s, e)| end > s && end <= e)
        .or_else(|| {
            // A value one or two characters wider than its column spills to the left only.
            spans.iter().position(|&(s, e)| end > s && end <= e + 2)
        })
}

/// A count as printed: `369`, `1,234`, `71K`, `661.6K`, `3138.K`, `1.2M`. Returns the value
/// and whether it is exact (no unit suffix).
fn parse_count(t: &[u8]) -> Option<(u64, bool)> {
    let s = std::str::from_utf8(t).ok()?.replace(',', "");
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1e3),
        b'M' => (&s[..s.len() - 1], 1e6),
        b'G' => (&s[..s.len() - 1], 1e9),
        _ => (s.as_str(), 1.0),
    };
    if num.is_empty() || !num.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return None;
    }
    let v: f64 = num.trim_end_matches('.').parse().ok()?;
    if mult == 1.0 {
        if num.contains('.') {
            return None;
        }
        return Some((v as u64, true));
    }
    Some(((v * mult).round() as u64, false))
}

/// A percentage cell: `99.2`, `.3`, `100.0`, `.0`.
fn parse_pct(t: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(t).ok()?;
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    (0.0..=100.0).contains(&v).then_some(v)
}

/// Whole-number bucket counts adding up to `total` whose shares round to the printed
/// percentages (`None`: blank, truly 0). `exact`: the total is printed in full, so the counts
/// must lie within the rounding of each share; otherwise the shares only guide the split.
/// `None` when no such counts exist.
pub(crate) fn apportion(total: u64, pcts: &[Option<f64>], exact: bool) -> Option<Vec<u64>> {
    if total > MAX_TOTAL || pcts.len() > MAX_COLUMNS {
        return None;
    }
    let t = total as f64;
    let ideal: Vec<f64> = pcts.iter().map(|p| p.unwrap_or(0.0) * t / 100.0).collect();
    let mut lo = Vec::with_capacity(pcts.len());
    let mut hi = Vec::with_capacity(pcts.len());
    for p in pcts {
        match p {
            None => {
                lo.push(0u64);
                hi.push(0u64);
            }
            Some(p) => {
                // The printed share p covers [p - 0.05, p + 0.05) %; `.0` is "under 0.05 %",
                // so at least one wait.
                let l = (((p - 0.05) * t / 100.0) - 1e-9).ceil().max(1.0) as u64;
                let h = (((p + 0.05) * t / 100.0) - 1e-9).floor().max(1.0) as u64;
                if exact {
                    lo.push(l);
                    hi.push(h.max(l).min(total));
                } else {
                    lo.push(1);
                    hi.push(total);
                }
            }
        }
    }
    let sat = |v: &[u64]| v.iter().fold(0u64, |a, &b| a.saturating_add(b));
    if sat(&lo) > total || sat(&hi) < total {
        return None;
    }
    let mut c: Vec<u64> = ideal
        .iter()
        .zip(lo.iter().zip(&hi))
        .map(|(&x, (&l, &h))| (x.round() as u64).clamp(l, h))
        .collect();
    // Move the difference between the rounded shares and the total, in whole steps, to the
    // buckets furthest from their ideal share (each within its bounds).
    // At most MAX_COLUMNS counts of at most MAX_TOTAL each: the sum fits.
    let mut sum: u64 = c.iter().sum();
    while sum < total {
        let i = (0..c.len())
            .filter(|&i| c[i] < hi[i])
            .max_by(|&a, &b| (ideal[a] - c[a] as f64).total_cmp(&(ideal[b] - c[b] as f64)))?;
        let step = (total - sum).min(hi[i] - c[i]);
        c[i] += step;
        sum += step;
    }
    while sum > total {
        let i = (0..c.len())
            .filter(|&i| c[i] > lo[i])
            .max_by(|&a, &b| (c[a] as f64 - ideal[a]).total_cmp(&(c[b] as f64 - ideal[b])))?;
        let step = (sum - total).min(c[i] - lo[i]);
        c[i] -= step;
        sum -= step;
    }
    Some(c)
}

/// A time cell in ms: `1,557` in the column's unit (`unit_ms` ms), or with its own unit as
/// newer releases print them (`117.86us`, `6.34ms`, `1.02s`); `######` (overflow) is `None`.
fn parse_time_ms(s: &str, unit_ms: f64) -> Option<f64> {
    let s = s.replace(',', "");
    let (num, mult) = if let Some(n) = s.strip_suffix("us") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e3)
    } else {
        (s.as_str(), unit_ms)
    };
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v * mult)
}

/// `31-Jan-16 00:00:03` (also with a four-digit year) as ns since the epoch.
fn parse_snap_time(s: &str) -> Option<i64> {
    let s = s.trim();
    ["%d-%b-%y %H:%M:%S", "%d-%b-%Y %H:%M:%S"]
        .iter()
        .find_map(|f| chrono::NaiveDateTime::parse_from_str(s, f).ok())
        .and_then(|t| t.and_utc().timestamp_nanos_opt())
}

/// `Begin Snap:       6693 31-Jan-16 00:00:03      153       5.5` → (snap id, time).
fn parse_snap_line(t: &str) -> Option<(u64, i64)> {
    let rest = t.split_once(':')?.1;
    let mut it = rest.split_whitespace();
    let id = it.next()?.parse().ok()?;
    let date = it.next()?;
    let time = it.next()?;
    Some((id, parse_snap_time(&format!("{date} {time}"))?))
}

/// One row of the foreground wait events table.
struct FgEvent {
    event: String,
    waits: u64,
    total_s: Option<f64>,
    avg_ms: Option<f64>,
}

/// Read one AWR or Statspack text report.
pub fn read(r: &mut LineReader, _args: &IngestOptions) -> Result<Vec<RunResult>> {
    let mut kind: Option<&'static str> = None;
    let mut begin: Option<(u64, i64)> = None;
    let mut end: Option<(u64, i64)> = None;
    let mut elapsed_min: Option<f64> = None;
    let mut section = Section::None;
    let mut section_line = 0u64;
    let mut table: Option<Table> = None;
    let mut header = String::new();
    // Per event: (bucket → count), in first-seen order.
    let mut events: Vec<(String, Vec<(Bucket, u64)>)> = Vec::new();
    let mut estimated: Vec<String> = Vec::new();
    let mut open_ended = 0u64;
    let mut fg: Vec<FgEvent> = Vec::new();
    let mut detail_sections = 0u64;
    let mut bad_rows: Vec<String> = Vec::new();
    let mut collisions: Vec<String> = Vec::new();
    let mut names: std::collections::HashSet<String> = Default::default();
    let mut prev_event: Option<String> = None;
    let mut idle_from: Option<usize> = None;
    while let Some(line) = r.next_line()? {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let t = line.trim_ascii();
        if t.is_empty() {
            r.ignored("blank");
            continue;
        }
        let text = String::from_utf8_lossy(line);
        // Titles start in the first column.
        if t.starts_with(b"WORKLOAD REPOSITORY report for")
            || t.starts_with(b"WORKLOAD REPOSITORY REPORT")
        {
            kind = Some("AWR");
            r.ignored("title");
            continue;
        }
        if t.starts_with(b"STATSPACK report for") || t.starts_with(b"STATSPACK Statistics Report") {
            kind = Some("Statspack");
            r.ignored("title");
            continue;
        }
        if section == Section::None {
            let tt = text.trim();
            if tt.starts_with("Begin Snap:") {
                begin = parse_snap_line(tt);
                if begin.is_none() {
                    r.unparsed("Begin Snap line without a snap id and time");
                } else {
                    r.parsed();
                }
                continue;
            }
            if tt.starts_with("End Snap:") {
                end = parse_snap_line(tt);
                if end.is_none() {
                    r.unparsed("End Snap line without a snap id and time");
                } else {
                    r.parsed();
                }
                continue;
            }
            if let Some(rest) = tt.strip_prefix("Elapsed:") {
                elapsed_min = rest
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.replace(',', "").parse().ok());
                r.ignored("header");
                continue;
            }
        }
        if !line[0].is_ascii_whitespace() {
            let new = if t.starts_with(b"Wait Event Histogram Detail") {
                Some(Section::Detail)
            } else if t.starts_with(b"Wait Event Histogram") {
                Some(Section::Histogram)
            } else if t.starts_with(b"Foreground Wait Events") {
                Some(Section::Foreground)
            } else {
                None
            };
            if let Some(s) = new {
                if s == Section::Detail && section != Section::Detail {
                    detail_sections += 1;
                }
                section = s;
                section_line = r.line_no;
                table = None;
                header.clear();
                r.ignored("section title");
                continue;
            }
        }
        if section == Section::None {
            r.ignored("other section");
            continue;
        }
        // The end of a section: an indented rule after the table (above the table, an indented
        // rule underlines a heading such as `% of Waits`).
        if line[0].is_ascii_whitespace()
            && t.iter().all(|&c| c == b'-')
            && t.len() > 20
            && table.is_some()
        {
            section = Section::None;
            table = None;
            r.ignored("section end");
            continue;
        }
        if t.starts_with(b"->") {
            r.ignored("section notes");
            continue;
        }
        if section == Section::Detail {
            r.ignored("histogram detail (not read)");
            continue;
        }
        // The rule under the column headings.
        if line[0] == b'-' && t.iter().all(|&c| c == b'-' || c == b' ') {
            let spans = rule_spans(line);
            let mut tb = Table {
                spans,
                buckets: Vec::new(),
            };
            if section == Section::Histogram {
                // Columns: event, total waits, then one per bucket.
                let hb = header.as_bytes();
                let mut prev_hi = 0u64;
                for &(s, e) in tb.spans.iter().skip(2) {
                    let label = hb
                        .get(s.min(hb.len())..e.min(hb.len()))
                        .map(|b| String::from_utf8_lossy(b).trim().to_string())
                        .unwrap_or_default();
                    let Some((upper, edge)) = parse_heading(&label) else {
                        bail!(
                            "line {}: Wait Event Histogram column heading '{label}' is not a \
                             time bucket (`<1ms`, `<=1s`, `>1s`, …): is the report garbled?",
                            r.line_no - 1
                        );
                    };
                    if upper {
                        if edge <= prev_hi {
                            bail!(
                                "line {}: Wait Event Histogram column '{label}' does not follow \
                                 the column before it",
                                r.line_no - 1
                            );
                        }
                        tb.buckets.push(Bucket {
                            lo_ns: prev_hi,
                            hi_ns: Some(edge),
                        });
                        prev_hi = edge;
                    } else {
                        tb.buckets.push(Bucket {
                            lo_ns: edge.max(prev_hi),
                            hi_ns: None,
                        });
                    }
                }
                if tb.buckets.is_empty() {
                    bail!(
                        "line {}: Wait Event Histogram table without bucket columns",
                        r.line_no
                    );
                }
            }
            table = Some(tb);
            r.ignored("column rule");
            continue;
        }
        let Some(tb) = &table else {
            // Headings above the rule: keep the last one.
            header.clear();
            header.push_str(&text);
            r.ignored("column headings");
            continue;
        };
        if tb.spans.len() < 3 {
            r.unparsed("table without columns");
            continue;
        }
        let name_end = tb.spans[0].1.min(line.len());
        let name = String::from_utf8_lossy(&line[..name_end])
            .trim()
            .to_string();
        let mut cells: Vec<Option<&[u8]>> = vec![None; tb.spans.len()];
        let mut stray = false;
        for (end, tok) in tokens(line, name_end) {
            match column_of(&tb.spans, end) {
                Some(c) if c > 0 && cells[c].is_none() => cells[c] = Some(tok),
                _ => stray = true,
            }
        }
        if name.is_empty() || stray {
            r.unparsed("row does not fit the table's columns");
            continue;
        }
        match section {
            Section::Histogram => {
                let Some((total, exact)) = cells[1].and_then(parse_count) else {
                    r.unparsed("histogram row without a total waits count");
                    continue;
                };
                let mut pcts = Vec::with_capacity(tb.buckets.len());
                let mut bad = false;
                for c in cells.iter().skip(2) {
                    match c {
                        None => pcts.push(None),
                        Some(t) => match parse_pct(t) {
                            Some(p) => pcts.push(Some(p)),
                            None => bad = true,
                        },
                    }
                }
                if bad {
                    r.unparsed("histogram row with a share that is not a percentage");
                    continue;
                }
                let sum: f64 = pcts.iter().flatten().sum();
                let shown = pcts.iter().flatten().count() as f64;
                if total > 0 && (sum - 100.0).abs() > 0.05 * shown + 1e-6 {
                    bad_rows.push(format!(
                        "line {}: '{name}': shares add up to {sum:.1} %, not 100 % within their \
                         rounding: row not used",
                        r.line_no
                    ));
                    r.unparsed("histogram shares do not add up to 100 %");
                    continue;
                }
                let Some(counts) = apportion(total, &pcts, exact) else {
                    bad_rows.push(format!(
                        "line {}: '{name}': no whole counts of the {total} waits give the \
                         printed shares: row not used",
                        r.line_no
                    ));
                    r.unparsed("histogram shares do not fit the total waits");
                    continue;
                };
                // Each event has one row; a name seen before is another event whose name was
                // cut to the same first characters (the report cuts names to the column).
                let mut op_name = name.clone();
                let mut k = 1;
                while names.contains(&op_name) {
                    k += 1;
                    op_name = format!("{name} ({k})");
                }
                if k > 1 {
                    collisions.push(format!(
                        "line {}: a second event printed as '{name}' (names are cut to the \
                         column's width) is read as '{op_name}'",
                        r.line_no
                    ));
                }
                if !(exact && total < 1000) && total > 0 {
                    estimated.push(op_name.clone());
                }
                if events.len() >= MAX_EVENTS {
                    bail!("more than {MAX_EVENTS} events in one report");
                }
                let mut row = Vec::new();
                for (b, n) in tb.buckets.iter().zip(counts) {
                    if n == 0 {
                        continue;
                    }
                    if b.hi_ns.is_none() {
                        open_ended = open_ended.saturating_add(n);
                    }
                    row.push((*b, n));
                }
                // Rows are ordered by event, idle events last: the first row that sorts
                // before the one above it (byte-wise and ignoring case alike, whichever sort
                // the database used) begins the idle events.
                if let Some(prev) = &prev_event {
                    let ci = |a: &str| a.to_ascii_lowercase();
                    if idle_from.is_none() && name < *prev && ci(&name) < ci(prev) {
                        idle_from = Some(events.len());
                    }
                }
                prev_event = Some(name.clone());
                names.insert(op_name.clone());
                events.push((op_name, row));
                r.parsed();
            }
            Section::Foreground => {
                let waits = cells[1].and_then(parse_count).filter(|w| w.1).map(|w| w.0);
                let Some(waits) = waits else {
                    r.unparsed("wait events row without a waits count");
                    continue;
                };
                let num = |i: usize, unit_ms: f64| -> Option<f64> {
                    let s = std::str::from_utf8(cells.get(i).copied().flatten()?).ok()?;
                    parse_time_ms(s, unit_ms)
                };
                if fg.len() >= MAX_EVENTS {
                    bail!("more than {MAX_EVENTS} foreground wait events in one report");
                }
                fg.push(FgEvent {
                    event: name,
                    waits,
                    total_s: num(3, 1000.0).map(|ms| ms / 1000.0),
                    avg_ms: num(4, 1.0),
                });
                r.parsed();
            }
            Section::None | Section::Detail => unreachable!("handled above"),
        }
    }
    if matches!(section, Section::Histogram | Section::Foreground) && table.is_some() {
        bail!(
            "the report ends inside its {} section (begun at line {section_line}) without the \
             section's closing rule: the file looks truncated",
            if section == Section::Histogram {
                "Wait Event Histogram"
            } else {
                "Foreground Wait Events"
            }
        );
    }
    if events.is_empty() {
        if kind.is_some() {
            let mut m = format!(
                "{} report without a readable Wait Event Histogram section",
                kind.unwrap_or("AWR")
            );
            for b in &bad_rows {
                m.push_str(&format!("\n  {b}"));
            }
            bail!(m);
        }
        return Ok(Vec::new());
    }
    let kind = kind.unwrap_or("AWR");
    let (Some((b_id, b_ns)), Some((e_id, e_ns))) = (begin, end) else {
        bail!(
            "the {kind} report has Wait Event Histogram rows but no Begin Snap / End Snap lines: \
             its snapshot window (the span the counts cover) is unknown"
        );
    };
    if e_ns <= b_ns {
        bail!("the {kind} report's End Snap time is not after its Begin Snap time");
    }
    let duration = (e_ns - b_ns) as f64 / 1e9;
    let mut warnings = Vec::new();
    if let Some(m) = elapsed_min {
        // Snap times are to the second, Elapsed to 0.01 min.
        if (m * 60.0 - duration).abs() > 0.3 + 1.0 {
            warnings.push(format!(
                "Elapsed {m} min in the report differs from the snap times' {duration} s: the \
                 snap times are used"
            ));
        }
    }
    warnings.extend(bad_rows);
    warnings.extend(collisions);
    if !estimated.is_empty() {
        warnings.push(format!(
            "bucket counts of {} event(s) are estimates from the report's shares (0.1 %) of a \
             total that is rounded or of 1,000 waits or more: {}",
            estimated.len(),
            super::truncate(&estimated.join(", "), 300)
        ));
    }
    if open_ended > 0 {
        warnings.push(format!(
            "{open_ended} wait(s) in an open-ended column (such as `>1s`) have no upper edge in \
             the report and are recorded at the column's lower edge (a lower bound)"
        ));
    }
    if detail_sections > 0 {
        warnings.push(format!(
            "{detail_sections} Wait Event Histogram Detail section(s) not read (the main \
             histogram's buckets are used)"
        ));
    }
    let mut series = SnapshotSeries::new();
    series.begin_interval(0.0, duration);
    for (name, row) in &events {
        let op = series.op(name)?;
        for (b, n) in row {
            let hi = b.hi_ns.unwrap_or(b.lo_ns.saturating_add(1));
            series.add_spread(op, b.lo_ns, hi, *n);
        }
    }
    let (mut ops, duration) = series.finish(BucketConvention::UpperBound);
    ops.retain(|o| o.count > 0);
    let fg_json: Vec<serde_json::Value> = fg
        .iter()
        .map(|f| {
            json!({
                "event": f.event,
                "waits": f.waits,
                "total_wait_s": f.total_s,
                "avg_wait_ms": f.avg_ms,
            })
        })
        .collect();
    let idle: Vec<&str> = idle_from
        .map(|i| events[i..].iter().map(|(n, _)| n.as_str()).collect())
        .unwrap_or_default();
    let spec = json!({
        "report": kind,
        "idle_events": idle,
        "begin_snap": b_id,
        "end_snap": e_id,
        "bucket_convention_basis": "the report's column headings: `<2ms` holds [1, 2) ms, \
            `<=1s` holds [32, 1024) ms, `>1s` 1024 ms and more",
        "foreground_wait_events": fg_json,
    });
    let mut run = ingest_run(
        &format!("{kind} snaps {b_id}-{e_id}"),
        Format::Awr,
        ops,
        rfc3339_ns(b_ns),
        duration,
        duration,
        spec,
    );
    run.counters.insert("snapshots".into(), 2.0);
    run.warnings.extend(warnings);
    Ok(vec![run])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_follow_the_reports_units() {
        assert_eq!(parse_heading("<1ms"), Some((true, 1_000_000)));
        assert_eq!(parse_heading("<=1s"), Some((true, 1_024_000_000)));
        assert_eq!(parse_heading(">1s"), Some((false, 1_024_000_000)));
        assert_eq!(parse_heading("<1/8s"), Some((true, 128_000_000)));
        assert_eq!(parse_heading("<32us"), Some((true, 32_000)));
        assert_eq!(parse_heading("Waits"), None);
    }

    #[test]
    fn counts_as_printed() {
        assert_eq!(parse_count(b"369"), Some((369, true)));
        assert_eq!(parse_count(b"71K"), Some((71_000, false)));
        assert_eq!(parse_count(b"661.6K"), Some((661_600, false)));
        assert_eq!(parse_count(b"3138.K"), Some((3_138_000, false)));
        assert_eq!(parse_count(b"1,234"), Some((1_234, true)));
        assert_eq!(parse_count(b"x"), None);
    }

    #[test]
    fn time_cells_in_the_columns_unit_or_their_own() {
        assert_eq!(parse_time_ms("1,557", 1.0), Some(1557.0));
        assert_eq!(parse_time_ms("5,175,208", 1000.0), Some(5_175_208_000.0));
        let near = |s: &str, want: f64| {
            let v = parse_time_ms(s, 1.0).unwrap();
            assert!((v - want).abs() < 1e-9 * want, "{s}: {v}");
        };
        near("117.86us", 0.11786);
        near("6.34ms", 6.34);
        near("1.02s", 1020.0);
        assert_eq!(parse_time_ms("######", 1.0), None);
    }

    #[test]
    fn apportion_is_exact_for_small_printed_totals() {
        // 369 waits: 99.2 / .3 / - / .3 / .3 % → 366 + 1 + 0 + 1 + 1.
        let c = apportion(
            369,
            &[Some(99.2), Some(0.3), None, Some(0.3), Some(0.3)],
            true,
        );
        assert_eq!(c, Some(vec![366, 1, 0, 1, 1]));
        // Shares that no whole counts give.
        assert_eq!(apportion(10, &[Some(55.0), Some(45.0)], true), None);
    }
}
