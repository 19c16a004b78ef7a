//! Oracle AWR (`awrrpt_*.txt`, `awrrpt_*.html`) and Statspack (`spreport`) reports.
//!
//! What is read, from the text report or the HTML one alike (the HTML form is told by its
//! first non-blank line beginning with `<`):
//! - the snapshot window: the `Begin Snap:` / `End Snap:` lines (`DD-Mon-YY HH:MM:SS`, the
//!   database's local time, written as if UTC; the month also as other `NLS_DATE_LANGUAGE`s
//!   abbreviate it, `16-Out-12`, see [`NLS_MONTHS`]) give the start and the duration of the one
//!   interval the report covers, cross-checked against `Elapsed: N (mins)`;
//! - every `Wait Event Histogram` section (pages repeat the title): one op per event, its
//!   buckets taken from the column headings (`<1ms` … `<32ms`, `<=1s`, `>1s`, and the
//!   microsecond / fraction-of-a-second headings of newer releases: `<32us`, `<1/8s`; `s` is
//!   1024 ms, as the report says). In the text report columns are found from the dashed rule
//!   under the headings, so blank cells (no waits) are told from missing ones;
//!   Idle events (listed last, "idle events last") are named in the spec (`idle_events`): the
//!   first row that sorts before the row above it begins them;
//! - the `Wait Event Histogram Detail` sections (`64 msec to 2 sec`, `4 sec to 2 min`, `4 min
//!   to 1 hr`): they continue an event's distribution above the main table's 32 ms column
//!   (`<64ms` … `<2s`, `>=2s`; `<4s` … `< 2m`, `>=2m`; `<4m` … `< 1h`, `>=1h`; `m` is 64 s and
//!   `h` 4096 s of 1024 ms), their first column being every wait below the table's range.
//!   They are merged into the event's one distribution: the main buckets below 32 ms, then
//!   each Detail table's own buckets, then the last table's open column (see [`merge`]);
//! - from 12.2 on the main table is in microseconds (`<8us` … `<512us`, `>=512us`; the text
//!   report cuts headings to their column: `<128u`, `>=512`) and its Detail tables are titled
//!   `Wait Event Histogram (up to 32 ms)` (`<512us` every wait below, `<1ms` … `<32ms`,
//!   `>=32ms`), `(up to 2 sec)`, `(up to 2 min)`, `(up to 1 hr)`: merged the same way. The
//!   microsecond table's `ms` is 1024 µs (its note says so); its columns are read at 1, 2 …
//!   32 ms (2.4 % low) so that they meet the millisecond tables' edges. `(up to 64 us)`
//!   (`<1us` … `<64us`, `>=64us`) lies within the main table's range: it splits the main
//!   table's columns below 64 µs finer (the first, `<8us`, into `<1us` … `<8us`); its waits
//!   column (`1us - 64us`) is taken as the waits from 1 µs to 64 µs (no `<1us` share in the
//!   19c fixture tells whether that column is in it);
//! - an AWR RAC (global) report (`awrgrpt.sql`: `WORKLOAD REPOSITORY REPORT (RAC)`, HTML
//!   `<title>AWR RAC Report for DB:`): its one `Wait Event Histogram (Global)` table (`<1us` …
//!   `<1s`, `>=1s`) holds the cluster's waits, every instance's added together; its window is
//!   the earliest `Begin Snap Time` of `Database Instances Included In Report` (printed to the
//!   minute) for the `Database Summary`'s `Elapsed time` (0.01 min), its snap ids the
//!   summary's; each share under 0.05 % is printed `0.0(N)` with its count, taken as printed
//!   (the text report cuts `0.0(1009)` to its column, `0.0(1009`: the digits shown are the
//!   count unless a count ten times as long would still be under 0.05 % of the total, when
//!   they are a lower bound, warned).
//!   Its `Foreground Wait Events (Global)` (wait class first, per-instance summaries) is not
//!   read. A RAC report whose instances or summary cannot be read is refused, saying so and
//!   what to give instead (the report as awrgrpt writes it, or each instance's own report);
//! - the `Foreground Wait Events` table (waits, total wait time, average wait; times in the
//!   column's unit or with their own, `117.86us`, as newer releases print them) as means-only
//!   evidence: written into the run's spec (`foreground_wait_events`), never as a distribution.
//!
//! The report prints each event's total waits (`71K` when ≥ 10,000 in Statspack, `661.6K` in
//! AWR, `33,4K` where the session's decimal character is a comma) and the share of waits in
//! each bucket to 0.1 % (`.0`: under 0.05 % but not zero; blank: none); the Detail tables print
//! their shares of the same total and the waits in their own columns. Bucket counts are rebuilt
//! from these: each count is the whole number whose share rounds to the printed one, and the
//! counts add up to the total (a Detail table's columns to its printed waits, where it is
//! printed in full). Where the total is printed in full and under 1,000 waits this gives every
//! bucket's count exactly; otherwise the counts are estimates (said in a warning, with the
//! events concerned). A row whose shares do not add up to 100 % within their rounding is not
//! used (counted as unparsed, with a warning); Detail rows that do not fit their event's main
//! row are left out, named in a warning. Waits in an open-ended column (`>1s`, `>=2s`) have no
//! upper edge and are recorded at its lower edge (a lower bound, warned).
//!
//! The HTML report is SQL*Plus output whose lines are cut at the line size (inside tags and
//! words): lines are joined as they are and read as one stream of tags; sections are found by
//! their `<h3>` headings, rows by `<tr>`, cells by `<td>`/`<th>` with entities decoded
//! (`&lt;`, `&#160;` for a blank cell).
//!
//! A report that ends inside a section this reader uses (truncated), an HTML report without its
//! closing `</html>`, or one that has histogram rows but no snapshot window, is an error.
//! Memory: one small row of counts per event.

use anyhow::{bail, Result};
use serde_json::json;

use super::{
    ingest_run, rfc3339_ns, Format, IngestOptions, LineReader, SnapshotSeries, MAX_LINE_BYTES,
};
use crate::results::{BucketConvention, RunResult};

/// Most events one report may list (a real report lists a few hundred).
const MAX_EVENTS: usize = 100_000;

/// Most instances an AWR RAC report may list (a real cluster has a few).
const MAX_INSTANCES: usize = 1024;

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
/// edge in ns). `s` is 1024 ms (the report: "s is 1024 milliseconds (approximately 1 second)"),
/// `m` 64 s and `h` 4096 s of those (the Detail sections' `< 1m`, `>=2m`, `<1/4h`, `>=1h`).
fn parse_heading(h: &str) -> Option<(bool, u64)> {
    let (upper, rest) = heading_sign(h)?;
    let (num, unit_ns) = if let Some(n) = rest.strip_suffix("us") {
        (n, 1_000.0)
    } else if let Some(n) = rest.strip_suffix('u') {
        // `<128u`: a text report cuts headings to their column (`<128us`).
        (n, 1_000.0)
    } else if let Some(n) = rest.strip_suffix("ms") {
        (n, 1_000_000.0)
    } else if let Some(n) = rest.strip_suffix('s') {
        (n, 1_024_000_000.0)
    } else if let Some(n) = rest.strip_suffix('m') {
        // "m is 64*1024 milliseconds (approximately 67 seconds or 1.1 minutes)"
        (n, 64.0 * 1_024_000_000.0)
    } else if let Some(n) = rest.strip_suffix('h') {
        // "h is 4096*1024 milliseconds (approximately 70 minutes or 1.17 hours)"
        (n, 4096.0 * 1_024_000_000.0)
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

/// A heading's sign (`<`, `<=`: an upper edge; `>`, `>=`: an open column) and what follows it,
/// blanks after the sign dropped (`< 1m`).
fn heading_sign(h: &str) -> Option<(bool, &str)> {
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
    Some((upper, rest.trim_start()))
}

/// A heading cut to its column before its unit (the text report's `<512` for `<512us`,
/// `>=512` for `>=512us`): an upper edge takes the largest unit (s, ms, us) that puts it
/// above the column before it and below the next one; an open column begins where the column
/// before it ends.
fn bare_heading(h: &str, prev_hi: u64, next: Option<&String>) -> Option<(bool, u64)> {
    let (upper, rest) = heading_sign(h)?;
    let v: f64 = rest
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)?;
    if !upper {
        return (prev_hi > 0).then_some((false, prev_hi));
    }
    let next_edge = next.and_then(|n| parse_heading(n)).map(|(_, e)| e);
    [1_024_000_000.0, 1_000_000.0, 1_000.0]
        .iter()
        .map(|u| (v * u).round() as u64)
        .find(|&e| e > prev_hi && next_edge.is_none_or(|n| e < n))
        .map(|e| (true, e))
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

/// The text of `line` under each of `spans` (a rule's columns), trimmed; empty past its end.
fn span_texts(line: &[u8], spans: &[(usize, usize)]) -> Vec<String> {
    spans
        .iter()
        .map(|&(a, b)| {
            line.get(a.min(line.len())..b.min(line.len()))
                .map(|b| String::from_utf8_lossy(b).trim().to_string())
                .unwrap_or_default()
        })
        .collect()
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

/// A count as printed: `369`, `1,234`, `71K`, `661.6K`, `3138.K`, `1.2M`, `33,4K`. Returns the value
/// and whether it is exact (no unit suffix).
fn parse_count(t: &[u8]) -> Option<(u64, bool)> {
    let s = std::str::from_utf8(t).ok()?;
    // With a unit, the figure has one decimal, printed with the session's decimal character:
    // `33,4K` where NLS_NUMERIC_CHARACTERS is `,.` (the HTML reports of such a session).
    let suffixed = s.ends_with(['K', 'M', 'G']);
    let s = if suffixed && s.matches(',').count() == 1 && !s.contains('.') {
        s.replace(',', ".")
    } else {
        s.replace(',', "")
    };
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

/// A share cell: a percentage ([`parse_pct`]), or a share of 0.0 % with the count printed
/// beside it, as the AWR RAC report prints the shares under 0.05 % (`0.0(2)`: "When % of Total
/// Waits is 0.0 the count is displayed in parenthesis"): (share, (count, whether the text report
/// cut the cell at its column: `0.0(1009` for `0.0(1009)`, whose count may be longer)).
fn parse_share(t: &[u8]) -> Option<(f64, Option<(u64, bool)>)> {
    let Some(open) = t.iter().position(|&b| b == b'(') else {
        return parse_pct(t).map(|p| (p, None));
    };
    let (inner, cut) = match t[open + 1..].strip_suffix(b")") {
        Some(inner) => (inner, false),
        None => (&t[open + 1..], true),
    };
    if inner.is_empty() || inner.len() > 18 || !inner.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(inner).ok()?.parse().ok()?;
    let p = parse_pct(&t[..open])?;
    (p == 0.0 && n > 0).then_some((p, Some((n, cut))))
}

/// Half the last printed step of a count (`21.7M`: 50,000; `14.7K`: 50; in full: 0), so that the
/// true total lies within the printed one plus or minus it.
fn count_half_step(t: &str) -> u64 {
    match t.trim().as_bytes().last() {
        Some(b'K') => 50,
        Some(b'M') => 50_000,
        Some(b'G') => 50_000_000,
        _ => 0,
    }
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
#[cfg(test)]
pub(crate) fn apportion(total: u64, pcts: &[Option<f64>], exact: bool) -> Option<Vec<u64>> {
    apportion_of(total, total, pcts, exact)
}

/// [`apportion`] of a part of a row: `total` waits over buckets whose printed shares are of
/// `of` waits (the event's total), as a Detail row's waits over its own columns.
pub(crate) fn apportion_of(
    total: u64,
    of: u64,
    pcts: &[Option<f64>],
    exact: bool,
) -> Option<Vec<u64>> {
    apportion_with(total, of, pcts, exact, &[])
}

/// [`apportion_of`] where some buckets' counts are printed (`fixed[i]`, as `0.0(2)`): those
/// buckets get them, the others share the rest.
fn apportion_with(
    total: u64,
    of: u64,
    pcts: &[Option<f64>],
    exact: bool,
    fixed: &[Option<u64>],
) -> Option<Vec<u64>> {
    if total > MAX_TOTAL || of > MAX_TOTAL || pcts.len() > 2 * MAX_COLUMNS {
        return None;
    }
    let fixed_at = |i: usize| fixed.get(i).copied().flatten();
    let t = of as f64;
    let ideal: Vec<f64> = pcts
        .iter()
        .enumerate()
        .map(|(i, p)| match fixed_at(i) {
            Some(n) => n as f64,
            None => p.unwrap_or(0.0) * t / 100.0,
        })
        .collect();
    let mut lo = Vec::with_capacity(pcts.len());
    let mut hi = Vec::with_capacity(pcts.len());
    for (i, p) in pcts.iter().enumerate() {
        if let Some(n) = fixed_at(i) {
            lo.push(n);
            hi.push(n);
            continue;
        }
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
    // buckets furthest from their ideal share (each within its bounds), at most half of a
    // printed step (0.05 %) at a time, so that a difference of many waits (the rounding of a
    // dozen shares of a large total) is spread over the buckets, not put into one.
    // At most MAX_COLUMNS counts of at most MAX_TOTAL each: the sum fits.
    let mut sum: u64 = c.iter().sum();
    let cap = ((t * 0.0005).ceil() as u64).max(1);
    while sum < total {
        let i = (0..c.len())
            .filter(|&i| c[i] < hi[i])
            .max_by(|&a, &b| (ideal[a] - c[a] as f64).total_cmp(&(ideal[b] - c[b] as f64)))?;
        let step = (total - sum).min(hi[i] - c[i]).min(cap);
        c[i] += step;
        sum += step;
    }
    while sum > total {
        let i = (0..c.len())
            .filter(|&i| c[i] > lo[i])
            .max_by(|&a, &b| (c[a] as f64 - ideal[a]).total_cmp(&(c[b] as f64 - ideal[b])))?;
        let step = (sum - total).min(c[i] - lo[i]).min(cap);
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

/// Month abbreviations as Oracle prints `Mon` under other `NLS_DATE_LANGUAGE`s (lower-case, a
/// trailing `.` dropped), with the English ones chrono reads: Portuguese (`Fev`, `Abr`, `Mai`,
/// `Ago`, `Set`, `Out`, `Dez`), Spanish (`Ene`, `Dic`), German (`Mrz`/`Mär`, `Okt`), French
/// (`Janv.`, `Févr.`, `Mars`, `Avr.`, `Juin`, `Juil.`, `Août`, `Sept.`, `Déc.`), Italian (`Gen`,
/// `Mag`, `Giu`, `Lug`, `Ott`), Dutch (`Mrt`, `Mei`) and the Scandinavian `Maj`. No
/// abbreviation names two different months in these languages.
const NLS_MONTHS: [(&str, &str); 36] = [
    ("fev", "Feb"),
    ("abr", "Apr"),
    ("mai", "May"),
    ("ago", "Aug"),
    ("set", "Sep"),
    ("out", "Oct"),
    ("dez", "Dec"),
    ("ene", "Jan"),
    ("dic", "Dec"),
    ("mrz", "Mar"),
    ("mär", "Mar"),
    ("okt", "Oct"),
    ("janv", "Jan"),
    ("févr", "Feb"),
    ("fevr", "Feb"),
    ("mars", "Mar"),
    ("avr", "Apr"),
    ("juin", "Jun"),
    ("juil", "Jul"),
    ("août", "Aug"),
    ("aout", "Aug"),
    ("sept", "Sep"),
    ("déc", "Dec"),
    ("gen", "Jan"),
    ("mag", "May"),
    ("giu", "Jun"),
    ("lug", "Jul"),
    ("ott", "Oct"),
    ("mrt", "Mar"),
    ("mei", "May"),
    ("maj", "May"),
    ("feb", "Feb"),
    ("sep", "Sep"),
    ("oct", "Oct"),
    ("dec", "Dec"),
    ("jan", "Jan"),
];

/// `31-Jan-16 00:00:03` (also with a four-digit year, and with the month abbreviated in one
/// of the languages of [`NLS_MONTHS`], `16-Out-12 01:00:49`) as ns since the epoch.
fn parse_snap_time(s: &str) -> Option<i64> {
    let s = s.trim();
    let parse = |s: &str| {
        ["%d-%b-%y %H:%M:%S", "%d-%b-%Y %H:%M:%S"]
            .iter()
            .find_map(|f| chrono::NaiveDateTime::parse_from_str(s, f).ok())
            .and_then(|t| t.and_utc().timestamp_nanos_opt())
    };
    parse(s).or_else(|| {
        let (day, rest) = s.split_once('-')?;
        let (month, rest) = rest.split_once('-')?;
        let m = month.trim_end_matches('.').to_lowercase();
        let en = NLS_MONTHS.iter().find(|(k, _)| *k == m)?.1;
        parse(&format!("{day}-{en}-{rest}"))
    })
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

/// Which histogram table a row comes from: the main `Wait Event Histogram` (its count column is
/// the event's total waits) or a `Wait Event Histogram Detail` (its count column is the waits
/// in its own bucket columns, between the first column's edge and the last one's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table2 {
    Main,
    Detail,
}

/// One printed histogram row: the count column, the buckets of the share columns (the first
/// one from 0: `<1ms` in the main table, `<32ms` — every wait under 32 ms — in a Detail table;
/// the last one open in a Detail table and in `>1s`) and the printed shares (`None`: blank).
#[derive(Debug, Clone)]
struct HistRow {
    line: u64,
    name: String,
    count: u64,
    exact: bool,
    buckets: Vec<Bucket>,
    pcts: Vec<Option<f64>>,
}

/// One event of the main table: its printed row and the bucket counts rebuilt from it (replaced
/// by finer ones when Detail rows of the event are merged in).
struct Event {
    op_name: String,
    row: HistRow,
    details: Vec<HistRow>,
    buckets: Vec<Bucket>,
    counts: Vec<u64>,
    /// Whether `buckets` are the merged ones.
    merged: bool,
}

/// What one report holds, from its text or its HTML form alike.
#[derive(Default)]
struct Collected {
    kind: Option<&'static str>,
    begin: Option<(u64, i64)>,
    end: Option<(u64, i64)>,
    elapsed_min: Option<f64>,
    events: Vec<Event>,
    details: Vec<HistRow>,
    fg: Vec<FgEvent>,
    bad_rows: Vec<String>,
    collisions: Vec<String>,
    names: std::collections::HashSet<String>,
    prev_event: Option<String>,
    idle_from: Option<usize>,
    /// An AWR RAC (global) report (`awrgrpt.sql`): its histograms are the cluster's, summed
    /// over the instances of [`Collected::instances`].
    global: bool,
    /// A global report's `Database Instances Included In Report` rows.
    instances: Vec<GlobalInstance>,
    /// A global report's `Database Summary` row: begin and end snap ids, `Report Total
    /// (minutes)` `Elapsed time`.
    summary: Option<(u64, u64, Option<f64>)>,
    /// Rows with a count beside a 0.0 % share cut by its column that may have been longer.
    cut_counts: Vec<String>,
}

/// One instance of an AWR RAC (global) report: name, begin and end snap times (to the minute,
/// as the report prints them), elapsed minutes.
#[derive(Debug, Clone)]
struct GlobalInstance {
    name: String,
    begin_ns: i64,
    end_ns: i64,
    elapsed_min: Option<f64>,
}

/// The buckets of a histogram table's share columns from their headings (`<1ms` … `<=1s`,
/// `>1s`; `<32ms` … `<2s`, `>=2s`; …): each upper edge closes a bucket that begins at the edge
/// before it (the first at 0).
fn buckets_of(labels: &[String]) -> std::result::Result<Vec<Bucket>, String> {
    let mut out = Vec::new();
    let mut prev_hi = 0u64;
    for (k, label) in labels.iter().enumerate() {
        let heading =
            parse_heading(label).or_else(|| bare_heading(label, prev_hi, labels.get(k + 1)));
        let Some((upper, edge)) = heading else {
            return Err(format!(
                "column heading '{label}' is not a time bucket (`<1ms`, `<=1s`, `>1s`, …): is \
                 the report garbled?"
            ));
        };
        if upper {
            if edge <= prev_hi {
                return Err(format!(
                    "column '{label}' does not follow the column before it"
                ));
            }
            out.push(Bucket {
                lo_ns: prev_hi,
                hi_ns: Some(edge),
            });
            prev_hi = edge;
        } else {
            // An open column begins where the column before it ends (`>1s` after `<=1s`,
            // `>=2s` after `<2s`), also where the text report cut its heading to a unit of
            // its own (`>=32m` for `>=32ms` after `<32ms`, not 32 minutes).
            out.push(Bucket {
                lo_ns: if out.is_empty() { edge } else { prev_hi },
                hi_ns: None,
            });
        }
        if out.len() > MAX_COLUMNS {
            return Err(format!("more than {MAX_COLUMNS} bucket columns"));
        }
    }
    if out.is_empty() {
        return Err("a histogram table without bucket columns".into());
    }
    Ok(out)
}

impl Collected {
    /// A `Begin Snap:` / `End Snap:` row: snap id and time.
    fn snap(&mut self, begin: bool, id: &str, time: &str) -> bool {
        let v = id
            .trim()
            .parse::<u64>()
            .ok()
            .zip(parse_snap_time(time.trim()));
        if begin {
            self.begin = v;
        } else {
            self.end = v;
        }
        v.is_some()
    }

    /// One histogram row as printed: `name`, the count cell and the share cells. `Ok(Some(why))`:
    /// the row is not used.
    fn hist_row(
        &mut self,
        table: Table2,
        line: u64,
        name: &str,
        count: Option<&str>,
        shares: &[Option<&str>],
        buckets: &[Bucket],
    ) -> Result<Option<&'static str>> {
        let count_cell = count;
        let Some((count, exact)) = count.and_then(|c| parse_count(c.as_bytes())) else {
            return Ok(Some("histogram row without a waits count"));
        };
        if shares.len() != buckets.len() {
            return Ok(Some("row does not fit the table's columns"));
        }
        let mut pcts = Vec::with_capacity(shares.len());
        // Counts printed beside a share of 0.0 % (`0.0(2)`, the AWR RAC report's way). The text
        // report cuts a cell at its column (`0.0(1009` for `0.0(1009)`): the digits shown are
        // the count unless a count ten times as long would still be a share under 0.05 % of the
        // total (at most the printed total and half its last step), when they are a lower bound.
        let t_max = count.saturating_add(count_cell.map_or(0, count_half_step)) as f64;
        let mut fixed: Vec<Option<u64>> = Vec::with_capacity(shares.len());
        let mut cut_short = false;
        for s in shares {
            match s {
                None => {
                    pcts.push(None);
                    fixed.push(None);
                }
                Some(t) => match parse_share(t.as_bytes()) {
                    Some((p, n)) => {
                        pcts.push(Some(p));
                        if let Some((n, true)) = n {
                            cut_short |= (n as f64) * 10.0 * 100.0 < 0.05 * t_max;
                        }
                        fixed.push(n.map(|n| n.0));
                    }
                    None => {
                        return Ok(Some("histogram row with a share that is not a percentage"));
                    }
                },
            }
        }
        let sum: f64 = pcts.iter().flatten().sum();
        let shown = pcts.iter().flatten().count() as f64;
        let what = if table == Table2::Main {
            "Wait Event Histogram"
        } else {
            "Wait Event Histogram Detail"
        };
        if (count > 0 || table == Table2::Detail) && (sum - 100.0).abs() > 0.05 * shown + 1e-6 {
            self.bad_rows.push(format!(
                "line {line}: {what} '{name}': shares add up to {sum:.1} %, not 100 % within \
                 their rounding: row not used"
            ));
            return Ok(Some("histogram shares do not add up to 100 %"));
        }
        let row = HistRow {
            line,
            name: name.to_string(),
            count,
            exact,
            buckets: buckets.to_vec(),
            pcts,
        };
        if table == Table2::Detail {
            if self.details.len() >= MAX_EVENTS {
                bail!("more than {MAX_EVENTS} Wait Event Histogram Detail rows in one report");
            }
            self.details.push(row);
            return Ok(None);
        }
        let Some(counts) = apportion_with(count, count, &row.pcts, exact, &fixed) else {
            self.bad_rows.push(format!(
                "line {line}: '{name}': no whole counts of the {count} waits give the printed \
                 shares: row not used"
            ));
            return Ok(Some("histogram shares do not fit the total waits"));
        };
        // Each event has one row; a name seen before is another event whose name was cut to
        // the same first characters (the text report cuts names to the column).
        let mut op_name = name.to_string();
        let mut k = 1;
        while self.names.contains(&op_name) {
            k += 1;
            op_name = format!("{name} ({k})");
        }
        if k > 1 {
            self.collisions.push(format!(
                "line {line}: a second event printed as '{name}' (names are cut to the column's \
                 width) is read as '{op_name}'"
            ));
        }
        if self.events.len() >= MAX_EVENTS {
            bail!("more than {MAX_EVENTS} events in one report");
        }
        // Rows are ordered by event, idle events last: the first row that sorts before the one
        // above it (byte-wise and ignoring case alike, whichever sort the database used) begins
        // the idle events.
        if let Some(prev) = &self.prev_event {
            let ci = |a: &str| a.to_ascii_lowercase();
            if self.idle_from.is_none() && name < prev.as_str() && ci(name) < ci(prev) {
                self.idle_from = Some(self.events.len());
            }
        }
        self.prev_event = Some(name.to_string());
        if cut_short {
            self.cut_counts.push(format!("line {line}: '{op_name}'"));
        }
        self.names.insert(op_name.clone());
        self.events.push(Event {
            op_name,
            buckets: row.buckets.clone(),
            row,
            details: Vec::new(),
            counts,
            merged: false,
        });
        Ok(None)
    }

    /// A row of an AWR RAC (global) report's header tables, by their column headings: an
    /// instance (`I#`, `Instance`, `Begin Snap Time`, `End Snap Time`, `Elapsed Time(min)`) or
    /// the `Database Summary` (`Begin`, `End` snap ids, `Elapsed time`). `false`: neither.
    fn global_row(&mut self, labels: &[String], cells: &[String]) -> bool {
        let at = |name: &str| {
            labels
                .iter()
                .position(|l| l == name)
                .and_then(|i| cells.get(i))
                .map(|s| s.as_str())
                .filter(|s| !s.is_empty())
        };
        let minutes = |v: &str| v.replace(',', "").parse::<f64>().ok().filter(|m| *m >= 0.0);
        if labels.iter().any(|l| l == "I#") {
            // Snap times to the minute (`20-Feb-20 21:32`), or to the second.
            let time = |v: &str| parse_snap_time(v).or_else(|| parse_snap_time(&format!("{v}:00")));
            let inst = at("I#").and_then(|v| v.parse::<u32>().ok());
            let (Some(_), Some(name), Some(b), Some(e)) = (
                inst,
                at("Instance"),
                at("Begin Snap Time").and_then(time),
                at("End Snap Time").and_then(time),
            ) else {
                return false;
            };
            if self.instances.len() < MAX_INSTANCES {
                self.instances.push(GlobalInstance {
                    name: name.to_string(),
                    begin_ns: b,
                    end_ns: e,
                    elapsed_min: at("Elapsed Time(min)").and_then(minutes),
                });
            }
            return true;
        }
        if labels.iter().any(|l| l == "Elapsed time") {
            let id = |v: &str| v.replace(',', "").parse::<u64>().ok();
            let (Some(b), Some(e)) = (at("Begin").and_then(id), at("End").and_then(id)) else {
                return false;
            };
            self.summary = Some((b, e, at("Elapsed time").and_then(minutes)));
            return true;
        }
        false
    }

    /// One row of the foreground wait events table: event, waits, total wait time (in the
    /// column's unit, s, or with its own), average wait (ms).
    fn fg_row(
        &mut self,
        event: &str,
        waits: Option<&str>,
        total: Option<&str>,
        avg: Option<&str>,
    ) -> Result<bool> {
        let waits = waits
            .and_then(|w| parse_count(w.as_bytes()))
            .filter(|w| w.1)
            .map(|w| w.0);
        let Some(waits) = waits else {
            return Ok(false);
        };
        if self.fg.len() >= MAX_EVENTS {
            bail!("more than {MAX_EVENTS} foreground wait events in one report");
        }
        self.fg.push(FgEvent {
            event: event.to_string(),
            waits,
            total_s: total
                .and_then(|s| parse_time_ms(s, 1000.0))
                .map(|ms| ms / 1000.0),
            avg_ms: avg.and_then(|s| parse_time_ms(s, 1.0)),
        });
        Ok(true)
    }
}

/// The fine buckets' counts of a merge: cells of the fine buckets sharing a main column and a
/// Detail table are given their counts from the main row's column counts (`main_counts`) and,
/// with `use_waits`, the Detail rows' printed waits: a column or Detail table with one cell
/// left gives it what remains, the other cells share what remains of their column by their
/// shares. Each cell's count is then apportioned over its buckets by their shares (`strict`:
/// within each share's rounding of the printed total even where that total is itself rounded).
/// `None`: no such counts.
#[allow(clippy::too_many_arguments)]
fn solve(
    main_counts: &[u64],
    col: &[usize],
    group: &[Option<usize>],
    groups: &[(std::ops::Range<usize>, u64, bool)],
    pcts: &[Option<f64>],
    total: u64,
    exact: bool,
    use_waits: bool,
    strict: bool,
) -> Option<Vec<u64>> {
    // Cells: (main column, Detail table) → their fine buckets.
    let mut cells: Vec<(Cell, Vec<usize>)> = Vec::new();
    for i in 0..col.len() {
        match cells.iter_mut().find(|c| c.0 == (col[i], group[i])) {
            Some(c) => c.1.push(i),
            None => cells.push(((col[i], group[i]), vec![i])),
        }
    }
    let mut value: Vec<Option<u64>> = vec![None; cells.len()];
    // Totals: main columns, then Detail tables whose waits are printed in full.
    let mut totals: Vec<(Vec<usize>, u64)> = Vec::new();
    for (j, &m) in main_counts.iter().enumerate() {
        let members: Vec<usize> = (0..cells.len()).filter(|&c| cells[c].0 .0 == j).collect();
        if members.is_empty() {
            if m > 0 {
                return None;
            }
            continue;
        }
        totals.push((members, m));
    }
    if use_waits {
        for (k, (_, w, w_exact)) in groups.iter().enumerate() {
            if *w_exact {
                let members = (0..cells.len()).filter(|&c| cells[c].0 .1 == Some(k));
                totals.push((members.collect(), *w));
            }
        }
    }
    loop {
        let mut changed = false;
        for (members, t) in &totals {
            let known: u64 = members.iter().filter_map(|&c| value[c]).sum();
            let unknown: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&c| value[c].is_none())
                .collect();
            if known > *t {
                return None;
            }
            if unknown.len() == 1 {
                value[unknown[0]] = Some(t - known);
                changed = true;
            } else if unknown.is_empty() && known != *t {
                return None;
            }
        }
        if !changed {
            break;
        }
    }
    // Cells still open share what remains of their main column by their shares.
    for (j, &m) in main_counts.iter().enumerate() {
        let members: Vec<usize> = (0..cells.len()).filter(|&c| cells[c].0 .0 == j).collect();
        let open: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&c| value[c].is_none())
            .collect();
        if open.is_empty() {
            continue;
        }
        let known: u64 = members.iter().filter_map(|&c| value[c]).sum();
        let rest = m.checked_sub(known)?;
        let shares: Vec<Option<f64>> = open
            .iter()
            .map(|&c| {
                let p: Vec<f64> = cells[c].1.iter().filter_map(|&i| pcts[i]).collect();
                (!p.is_empty()).then(|| p.iter().sum())
            })
            .collect();
        let split = apportion_of(rest, total, &shares, false)?;
        for (&c, n) in open.iter().zip(split) {
            value[c] = Some(n);
        }
    }
    let mut counts = vec![0u64; pcts.len()];
    for (c, (_, members)) in cells.iter().enumerate() {
        let p: Vec<Option<f64>> = members.iter().map(|&i| pcts[i]).collect();
        let n = apportion_of(value[c]?, total, &p, exact || strict)?;
        for (&i, n) in members.iter().zip(n) {
            counts[i] = n;
        }
    }
    Some(counts)
}

/// The main row's column counts led by the Detail rows' printed waits: the main columns whose
/// waits all lie in the own columns of Detail tables whose waits are printed in full (blank
/// shares aside) hold those waits between them, each table's waits split over its main
/// columns by the room their printed shares leave; the other columns share the rest of the
/// total by their own shares. Where the main row's total is rounded (`276,6K`) its shares of
/// the upper columns (`<=1s` .5, `>1s` .0) may not give the waits the Detail rows print (1,346
/// and 71), and no move of a few waits from one column to another reaches them when two
/// columns must change at once. `None`: no column is so covered, or the rest does not fit the
/// other columns' shares.
fn counts_from_waits(
    main: &HistRow,
    col: &[usize],
    group: &[Option<usize>],
    groups: &[(std::ops::Range<usize>, u64, bool)],
    pcts: &[Option<f64>],
    total: u64,
    exact: bool,
) -> Option<Vec<u64>> {
    let ncol = main.buckets.len();
    let covered: Vec<bool> = (0..ncol)
        .map(|j| {
            let mut fine = (0..col.len()).filter(|&i| col[i] == j && pcts[i].is_some());
            let first = fine.next();
            first.is_some()
                && first
                    .into_iter()
                    .chain(fine)
                    .all(|i| group[i].is_some_and(|k| groups[k].2))
        })
        .collect();
    if !covered.iter().any(|&c| c) {
        return None;
    }
    // Each Detail table's waits go to its cells (its own columns within one main column): at
    // least one wait per printed share, the rest by the room each main column has left under
    // its printed share of the total (as if the total were exact); tables spanning fewer main
    // columns first.
    let room_of: Vec<u64> = main
        .pcts
        .iter()
        .map(|p| share_bounds(total, *p, true).1)
        .collect();
    let mut counts = vec![0u64; ncol];
    let mut in_detail = 0u64;
    let mut order: Vec<(usize, Vec<(usize, u64)>)> = Vec::new();
    for (k, (range, _, w_exact)) in groups.iter().enumerate() {
        if !w_exact {
            continue;
        }
        if !range.clone().all(|i| pcts[i].is_none() || covered[col[i]]) {
            return None;
        }
        // (main column, printed shares in it) of the table's cells.
        let mut cells: Vec<(usize, u64)> = Vec::new();
        for i in range.clone() {
            let shown = pcts[i].is_some() as u64;
            match cells.iter_mut().find(|c| c.0 == col[i]) {
                Some(c) => c.1 += shown,
                None => cells.push((col[i], shown)),
            }
        }
        order.push((k, cells));
    }
    order.sort_by_key(|(_, cells)| cells.iter().filter(|c| c.1 > 0).count());
    for (k, cells) in order {
        let waits = groups[k].1;
        let least: u64 = cells.iter().map(|c| c.1).sum();
        let mut rest = waits.checked_sub(least)?;
        let room: Vec<u64> = cells
            .iter()
            .map(|&(j, n)| {
                if n == 0 {
                    0
                } else {
                    room_of[j].saturating_sub(counts[j] + n)
                }
            })
            .collect();
        let all_room: u64 = room.iter().sum();
        let mut give: Vec<u64> = cells.iter().map(|c| c.1).collect();
        if all_room > 0 {
            for (g, r) in give.iter_mut().zip(&room) {
                let n = ((rest as u128 * *r as u128) / all_room as u128) as u64;
                *g += n;
            }
            rest = waits - give.iter().sum::<u64>();
        }
        // What the proportion leaves over goes to the cells with room left, the most first;
        // where none has any, to the cell with the most room (or the first with a share).
        while rest > 0 {
            let spare = |c: usize| (room[c] + cells[c].1).saturating_sub(give[c]);
            let Some(c) = (0..cells.len())
                .filter(|&c| cells[c].1 > 0 && spare(c) > 0)
                .max_by_key(|&c| spare(c))
            else {
                let most = (0..cells.len())
                    .filter(|&c| cells[c].1 > 0)
                    .max_by_key(|&c| room[c])?;
                give[most] += rest;
                break;
            };
            let n = rest.min(spare(c));
            give[c] += n;
            rest -= n;
        }
        for ((j, _), g) in cells.iter().zip(give) {
            counts[*j] += g;
        }
        in_detail += waits;
    }
    let others: Vec<usize> = (0..ncol).filter(|&j| !covered[j]).collect();
    let p: Vec<Option<f64>> = others.iter().map(|&j| main.pcts[j]).collect();
    let split = apportion_of(total.checked_sub(in_detail)?, total, &p, exact)?;
    for (&j, n) in others.iter().zip(split) {
        counts[j] = n;
    }
    Some(counts)
}

/// A cell of a merge: (main column, Detail table whose own columns hold it).
type Cell = (usize, Option<usize>);

/// The counts of `total` waits a printed share allows (as [`apportion_of`] bounds them).
fn share_bounds(total: u64, p: Option<f64>, exact: bool) -> (u64, u64) {
    let t = total as f64;
    match p {
        None => (0, 0),
        Some(_) if !exact => (1, total),
        Some(p) => {
            let l = (((p - 0.05) * t / 100.0) - 1e-9).ceil().max(1.0) as u64;
            let h = (((p + 0.05) * t / 100.0) - 1e-9).floor().max(1.0) as u64;
            (l, h.max(l).min(total))
        }
    }
}

/// Merge an event's Detail rows into its main row: the main table's buckets up to the first
/// Detail table's first edge (32 ms), then each Detail table's own buckets (32 ms … 2 s, 2 s …
/// 2 min, 2 min … 1 h), then the last one's open column. All shares are of the event's total
/// waits; a Detail row's count is the waits in its own buckets, so where it is printed in full
/// those buckets are apportioned from it exactly and the rest of the total over the other
/// buckets. With it, whether the Detail rows' printed waits could be held (else the shares
/// alone gave the counts). `Err`: why the rows cannot be merged (the main row's buckets are
/// kept).
fn merge(ev: &Event) -> std::result::Result<(Vec<Bucket>, Vec<u64>, bool), String> {
    let main = &ev.row;
    let mut details: Vec<&HistRow> = ev.details.iter().collect();
    details.sort_by_key(|d| d.buckets.first().and_then(|b| b.hi_ns));
    // A table within the main table's range (12.2's `(up to 64 us)`: `<1us` … `<64us`,
    // `>=64us` under a main table of `<8us` … `<512us`) splits its first columns finer; the
    // others continue above it.
    let main_top = main
        .buckets
        .iter()
        .filter_map(|b| b.hi_ns)
        .max()
        .unwrap_or(0);
    let inner = details
        .iter()
        .position(|d| {
            let n = d.buckets.len();
            n >= 3
                && d.buckets[n - 1].hi_ns.is_none()
                && d.buckets[n - 2].hi_ns.is_some_and(|h| h < main_top)
        })
        .map(|i| details.remove(i));
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut pcts: Vec<Option<f64>> = Vec::new();
    // (range of `buckets`, printed count, exact) of each Detail table's own buckets.
    let mut groups: Vec<(std::ops::Range<usize>, u64, bool)> = Vec::new();
    let mut from_edge = 0;
    if let Some(d) = inner {
        // Its first column holds every wait below its range (the first at 0), its own columns
        // the waits it counts; it must end at an edge of the main table.
        let n = d.buckets.len();
        let top = d.buckets[n - 2].hi_ns.unwrap_or(0);
        if !main.buckets.iter().any(|b| b.hi_ns == Some(top)) {
            return Err(format!(
                "its Detail row within the main table's range ends at {} ms, not at an edge \
                 of the main table",
                top as f64 / 1e6
            ));
        }
        buckets.push(d.buckets[0]);
        pcts.push(d.pcts[0]);
        let from = buckets.len();
        buckets.extend_from_slice(&d.buckets[1..n - 1]);
        pcts.extend_from_slice(&d.pcts[1..n - 1]);
        groups.push((from..buckets.len(), d.count, d.exact));
        from_edge = top;
    }
    let Some(first) = details.first() else {
        // Only the table within the main table's range: the main columns above it follow.
        for (b, p) in main.buckets.iter().zip(&main.pcts) {
            if b.lo_ns >= from_edge {
                buckets.push(*b);
                pcts.push(*p);
            }
        }
        return merge_counts(ev, buckets, pcts, groups);
    };
    let first_edge = first.buckets[0]
        .hi_ns
        .ok_or("a Detail table whose first column is open")?;
    // The main buckets below the first Detail edge, which must be one of the main table's edges.
    let below: Vec<usize> = (0..main.buckets.len())
        .filter(|&i| main.buckets[i].hi_ns.is_some_and(|h| h <= first_edge))
        .collect();
    if below.last().and_then(|&i| main.buckets[i].hi_ns) != Some(first_edge) {
        return Err(format!(
            "its first Detail row begins at {} ms, not at an edge of the main table (it has no \
             row in the Detail table before)",
            first_edge as f64 / 1e6
        ));
    }
    for &i in &below {
        if main.buckets[i].lo_ns >= from_edge {
            buckets.push(main.buckets[i]);
            pcts.push(main.pcts[i]);
        }
    }
    let mut edge = first_edge;
    let mut open_pct = None;
    for d in &details {
        let n = d.buckets.len();
        if n < 3 || d.buckets[0].hi_ns != Some(edge) || d.buckets[n - 1].hi_ns.is_some() {
            // A later table that does not continue from this one's top edge is left out.
            break;
        }
        let from = buckets.len();
        buckets.extend_from_slice(&d.buckets[1..n - 1]);
        pcts.extend_from_slice(&d.pcts[1..n - 1]);
        groups.push((from..buckets.len(), d.count, d.exact));
        edge = d.buckets[n - 2].hi_ns.unwrap_or(edge);
        open_pct = Some(d.pcts[n - 1]);
    }
    let Some(open_pct) = open_pct else {
        return Err("no Detail table continues the main table".into());
    };
    buckets.push(Bucket {
        lo_ns: edge,
        hi_ns: None,
    });
    pcts.push(open_pct);
    merge_counts(ev, buckets, pcts, groups)
}

/// The counts of a merge's fine buckets (see [`merge`]).
fn merge_counts(
    ev: &Event,
    buckets: Vec<Bucket>,
    pcts: Vec<Option<f64>>,
    groups: Vec<(std::ops::Range<usize>, u64, bool)>,
) -> std::result::Result<(Vec<Bucket>, Vec<u64>, bool), String> {
    let main = &ev.row;
    let sum: f64 = pcts.iter().flatten().sum();
    let shown = pcts.iter().flatten().count() as f64;
    if (sum - 100.0).abs() > 0.05 * shown + 1e-6 {
        return Err(format!(
            "the merged shares add up to {sum:.1} %, not 100 % within their rounding"
        ));
    }
    let (total, exact) = (main.count, main.exact);
    // Each fine bucket lies in one main column and in one Detail table's own columns (or in
    // none: below the first Detail table, or the open one). The main row's counts are the
    // column totals of the first, the Detail rows' printed waits those of the second.
    let mut col = Vec::with_capacity(buckets.len());
    for b in &buckets {
        let j = main
            .buckets
            .iter()
            .position(|m| b.lo_ns >= m.lo_ns && m.hi_ns.is_none_or(|h| b.lo_ns < h))
            .filter(|&j| match (b.hi_ns, main.buckets[j].hi_ns) {
                (Some(h), Some(mh)) => h <= mh,
                (None, Some(_)) => false,
                _ => true,
            })
            .ok_or("a Detail column straddles the main table's columns")?;
        col.push(j);
    }
    let mut group = vec![None; buckets.len()];
    for (k, (range, _, _)) in groups.iter().enumerate() {
        group[range.clone()].iter_mut().for_each(|g| *g = Some(k));
    }
    // The main row's counts are one choice among those its shares allow: where the Detail
    // rows' waits do not fit them, the choices that move a few waits (up to 0.1 % of the total,
    // at most 256) from one column to another are tried too.
    let bounds: Vec<(u64, u64)> = main
        .pcts
        .iter()
        .map(|p| share_bounds(total, *p, exact))
        .collect();
    let mut choices = vec![ev.counts.clone()];
    let most = ((total as f64 * 0.001).ceil() as u64).clamp(2, 256);
    for step in 1..=most {
        for a in 0..ev.counts.len() {
            for b in 0..ev.counts.len() {
                let mut c = ev.counts.clone();
                if a == b || c[a] < bounds[a].0 + step || c[b] + step > bounds[b].1 {
                    continue;
                }
                c[a] -= step;
                c[b] += step;
                choices.push(c);
            }
        }
    }
    // Last, the choice the Detail rows' printed waits lead to, which may differ from the main
    // row's own in several columns at once (see [`counts_from_waits`]).
    if let Some(c) = counts_from_waits(main, &col, &group, &groups, &pcts, total, exact) {
        choices.push(c);
    }
    let (counts, waits_held) = [true, false]
        .iter()
        .find_map(|&strict| {
            choices
                .iter()
                .find_map(|m| solve(m, &col, &group, &groups, &pcts, total, exact, true, strict))
        })
        .map(|c| (c, true))
        .or_else(|| {
            solve(
                &ev.counts, &col, &group, &groups, &pcts, total, exact, false, false,
            )
            .map(|c| (c, false))
        })
        .ok_or_else(|| {
            format!(
                "no whole counts of the {total} waits give both the main row's and the Detail \
                 rows' shares"
            )
        })?;
    // The merged counts must still give the main table's own shares.
    for (b, p) in main.buckets.iter().zip(&main.pcts) {
        let n: u64 = buckets
            .iter()
            .zip(&counts)
            .filter(|(f, _)| f.lo_ns >= b.lo_ns && b.hi_ns.is_none_or(|h| f.lo_ns < h))
            .map(|(_, n)| n)
            .sum();
        let ok = match p {
            None => n == 0,
            Some(p) if exact && total > 0 => {
                let share = n as f64 * 100.0 / total as f64;
                n > 0 && (share - p).abs() <= 0.05 + 1e-9
            }
            Some(_) => n > 0,
        };
        if !ok {
            return Err(format!(
                "no counts were found that hold the Detail rows' waits and the main row's \
                 shares: {n} waits in the main table's column from {} ms, printed {}",
                b.lo_ns as f64 / 1e6,
                p.map(|p| format!("{p} %"))
                    .unwrap_or_else(|| "blank".into())
            ));
        }
    }
    Ok((buckets, counts, waits_held))
}

/// Read one AWR or Statspack report, text or HTML (the HTML form is told by its first
/// non-blank line beginning with `<`).
pub fn read(r: &mut LineReader, _args: &IngestOptions) -> Result<Vec<RunResult>> {
    let mut c = Collected::default();
    let mut state = TextState::default();
    let mut html: Option<HtmlState> = None;
    while let Some(line) = r.next_line()? {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if html.is_none() && state.first {
            let t = line.trim_ascii();
            if t.is_empty() {
                r.ignored("blank");
                continue;
            }
            state.first = false;
            if t.starts_with(b"<") {
                html = Some(HtmlState::default());
            }
        }
        match &mut html {
            Some(h) => {
                let line = line.to_vec();
                h.feed(&mut c, r, &line)?;
            }
            None => {
                let line = line.to_vec();
                text_line(&mut c, &mut state, r, &line)?;
            }
        }
    }
    match &html {
        Some(h) => h.end(&c)?,
        None => {
            if matches!(state.section, Section::Histogram | Section::Foreground)
                && state.table.is_some()
            {
                bail!(
                    "the report ends inside its {} section (begun at line {}) without the \
                     section's closing rule: the file looks truncated",
                    if state.section == Section::Histogram {
                        "Wait Event Histogram"
                    } else {
                        "Foreground Wait Events"
                    },
                    state.section_line
                );
            }
        }
    }
    finish(c, state.detail_sections)
}

/// The histogram section a title begins: the main `Wait Event Histogram` (in a text report the
/// title goes on with `DB/Inst: …`) or a Detail table (`Wait Event Histogram Detail (64 msec to
/// 2 sec)` … of 11g; `Wait Event Histogram (up to 64 us)`, `(up to 32 ms)`, `(up to 2 sec)`,
/// `(up to 2 min)`, `(up to 1 hr)` of 12.2 on, whose main table is in microseconds up to
/// `>=512us`). `None`: not a histogram title.
fn histogram_section(title: &str, text: bool) -> Option<Section> {
    let rest = title.strip_prefix("Wait Event Histogram")?;
    let rest = rest.trim_start();
    if rest.starts_with("Detail") {
        return Some(Section::Detail);
    }
    if rest.starts_with("(up to ") {
        return Some(Section::Detail);
    }
    // `Wait Event Histogram (Global)`: the AWR RAC report's one table, the cluster's waits.
    (rest.is_empty() || text || rest == "(Global)").then_some(Section::Histogram)
}

/// Where the text reader is.
struct TextState {
    first: bool,
    section: Section,
    section_line: u64,
    table: Option<Table>,
    header: String,
    detail_sections: u64,
    /// A global report's header tables outside the sections read: the last line above a rule,
    /// and the columns (spans and headings) of the last rule.
    prev: String,
    columns: Option<Columns>,
}

/// A text table's columns: byte spans from the rule under its headings, and the headings.
type Columns = (Vec<(usize, usize)>, Vec<String>);

impl Default for TextState {
    fn default() -> Self {
        TextState {
            first: true,
            section: Section::None,
            section_line: 0,
            table: None,
            header: String::new(),
            detail_sections: 0,
            prev: String::new(),
            columns: None,
        }
    }
}

/// What an AWR RAC (global) report is called in messages and in the run's spec.
const GLOBAL_KIND: &str = "AWR RAC (global)";

/// A line of an AWR RAC (global) report outside the sections read: the `Database Summary`
/// (snap ids, the report's elapsed minutes) and `Database Instances Included In Report` (each
/// instance's snap times) tables, their columns found from the rule under their headings.
fn global_text_line(
    c: &mut Collected,
    s: &mut TextState,
    r: &mut LineReader,
    line: &[u8],
    text: &str,
) {
    let t = line.trim_ascii();
    if line[0] == b'-' && t.iter().all(|&b| b == b'-' || b == b' ') {
        let spans = rule_spans(line);
        let labels = span_texts(s.prev.as_bytes(), &spans);
        s.columns = Some((spans, labels));
        r.ignored("column rule");
        return;
    }
    if t.starts_with(b"~~~") || !line[0].is_ascii_whitespace() {
        // A title, or the `~~~` rules of sums: the table before it has ended.
        s.columns = None;
    }
    if let Some((spans, labels)) = &s.columns {
        let cells = span_texts(line, spans);
        if c.global_row(labels, &cells) {
            r.parsed();
            return;
        }
    }
    s.prev.clear();
    s.prev.push_str(text);
    r.ignored("other section");
}

/// One line of a text report.
fn text_line(c: &mut Collected, s: &mut TextState, r: &mut LineReader, line: &[u8]) -> Result<()> {
    let t = line.trim_ascii();
    if t.is_empty() {
        r.ignored("blank");
        return Ok(());
    }
    let text = String::from_utf8_lossy(line);
    // Titles start in the first column.
    if t.starts_with(b"WORKLOAD REPOSITORY REPORT (RAC)") {
        c.kind = Some(GLOBAL_KIND);
        c.global = true;
        r.ignored("title");
        return Ok(());
    }
    if t.starts_with(b"WORKLOAD REPOSITORY report for")
        || t.starts_with(b"WORKLOAD REPOSITORY REPORT")
    {
        c.kind = Some("AWR");
        r.ignored("title");
        return Ok(());
    }
    if t.starts_with(b"STATSPACK report for") || t.starts_with(b"STATSPACK Statistics Report") {
        c.kind = Some("Statspack");
        r.ignored("title");
        return Ok(());
    }
    if s.section == Section::None {
        let tt = text.trim();
        for (begin, label) in [(true, "Begin Snap:"), (false, "End Snap:")] {
            if tt.starts_with(label) {
                let ok = parse_snap_line(tt)
                    .map(|(id, ns)| {
                        if begin {
                            c.begin = Some((id, ns));
                        } else {
                            c.end = Some((id, ns));
                        }
                    })
                    .is_some();
                if ok {
                    r.parsed();
                } else {
                    if begin {
                        c.begin = None;
                    } else {
                        c.end = None;
                    }
                    r.unparsed("snap line without a snap id and time");
                }
                return Ok(());
            }
        }
        if let Some(rest) = tt.strip_prefix("Elapsed:") {
            c.elapsed_min = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.replace(',', "").parse().ok());
            r.ignored("header");
            return Ok(());
        }
    }
    if !line[0].is_ascii_whitespace() {
        let new = if let Some(sec) = histogram_section(text.trim(), true) {
            Some(sec)
        } else if t.starts_with(b"Foreground Wait Events") && !c.global {
            // (The RAC report's `Foreground Wait Events (Global)` has other columns: not read.)
            Some(Section::Foreground)
        } else {
            None
        };
        if let Some(new) = new {
            if new == Section::Detail && s.section != Section::Detail {
                s.detail_sections += 1;
            }
            s.section = new;
            s.section_line = r.line_no;
            s.table = None;
            s.header.clear();
            r.ignored("section title");
            return Ok(());
        }
    }
    if s.section == Section::None {
        if c.global {
            global_text_line(c, s, r, line, &text);
            return Ok(());
        }
        r.ignored("other section");
        return Ok(());
    }
    // The end of a section: an indented rule after the table (above the table, an indented
    // rule underlines a heading such as `% of Waits`).
    if line[0].is_ascii_whitespace()
        && t.iter().all(|&c| c == b'-')
        && t.len() > 20
        && s.table.is_some()
    {
        s.section = Section::None;
        s.table = None;
        r.ignored("section end");
        return Ok(());
    }
    if t.starts_with(b"->") {
        r.ignored("section notes");
        return Ok(());
    }
    if t.starts_with(b"No data exists for this section") {
        s.section = Section::None;
        s.table = None;
        r.ignored("section without data");
        return Ok(());
    }
    // The rule under the column headings.
    if line[0] == b'-' && t.iter().all(|&c| c == b'-' || c == b' ') {
        let spans = rule_spans(line);
        let mut tb = Table {
            spans,
            buckets: Vec::new(),
        };
        if matches!(s.section, Section::Histogram | Section::Detail) {
            // Columns: event, waits, then one per bucket.
            let labels = span_texts(s.header.as_bytes(), tb.spans.get(2..).unwrap_or(&[]));
            match buckets_of(&labels) {
                Ok(b) => tb.buckets = b,
                // A Detail section with no table ("No data exists for this section") runs on
                // into the next section, whose table is not a histogram: it ends there.
                Err(_) if s.section == Section::Detail => {
                    s.section = Section::None;
                    s.table = None;
                    r.ignored("other section");
                    return Ok(());
                }
                Err(e) => bail!("line {}: Wait Event Histogram: {e}", r.line_no - 1),
            }
        }
        s.table = Some(tb);
        r.ignored("column rule");
        return Ok(());
    }
    let Some(tb) = &s.table else {
        // Headings above the rule: keep the last one.
        s.header.clear();
        s.header.push_str(&text);
        r.ignored("column headings");
        return Ok(());
    };
    if tb.spans.len() < 3 {
        r.unparsed("table without columns");
        return Ok(());
    }
    let name_end = tb.spans[0].1.min(line.len());
    let name = String::from_utf8_lossy(&line[..name_end])
        .trim()
        .to_string();
    let mut cells: Vec<Option<String>> = vec![None; tb.spans.len()];
    let mut stray = false;
    for (end, tok) in tokens(line, name_end) {
        match column_of(&tb.spans, end) {
            Some(i) if i > 0 && cells[i].is_none() => {
                cells[i] = Some(String::from_utf8_lossy(tok).into_owned())
            }
            _ => stray = true,
        }
    }
    if name.is_empty() || stray {
        r.unparsed("row does not fit the table's columns");
        return Ok(());
    }
    let cell = |i: usize| cells.get(i).and_then(|c| c.as_deref());
    let why = match s.section {
        Section::Histogram | Section::Detail => {
            let table = if s.section == Section::Detail {
                Table2::Detail
            } else {
                Table2::Main
            };
            let shares: Vec<Option<&str>> = (2..tb.spans.len()).map(cell).collect();
            let buckets = tb.buckets.clone();
            c.hist_row(table, r.line_no, &name, cell(1), &shares, &buckets)?
        }
        Section::Foreground => c
            .fg_row(&name, cell(1), cell(3), cell(4))?
            .then_some(())
            .map_or(Some("wait events row without a waits count"), |_| None),
        Section::None => unreachable!("handled above"),
    };
    match why {
        None => r.parsed(),
        Some(why) => r.unparsed(why),
    }
    Ok(())
}

/// Where the HTML reader is. The report is SQL*Plus output: its lines are cut at the line size
/// wherever they reach it, inside tags and words alike, so lines are joined as they are (no
/// space put between them) and read as one stream of tags and text.
#[derive(Default)]
struct HtmlState {
    /// Bytes of a tag begun on an earlier line.
    pending: Vec<u8>,
    section: Option<Section>,
    section_line: u64,
    in_h3: bool,
    h3: String,
    in_table: bool,
    /// Buckets of the current histogram table (from its heading row).
    buckets: Option<Vec<Bucket>>,
    row: Vec<(bool, String)>,
    cell: Option<String>,
    text: String,
    closed: bool,
    detail_sections: u64,
    /// The longest line so far: SQL*Plus's line size, where it cuts lines.
    width: usize,
    /// Column headings of the current table outside the sections read (an AWR RAC report's
    /// header tables).
    labels: Option<Vec<String>>,
}

/// Text of HTML with its entities decoded (`&lt;`, `&#160;`, …; `&#160;` and `&nbsp;` are a
/// blank; an unknown entity is kept as written).
fn decode_entities(s: &str) -> String {
    html_escape::decode_html_entities(s).replace('\u{a0}', " ")
}

impl HtmlState {
    fn feed(&mut self, c: &mut Collected, r: &mut LineReader, line: &[u8]) -> Result<()> {
        let mut buf = std::mem::take(&mut self.pending);
        buf.extend_from_slice(line);
        // A line cut at the line size goes on in the next line as it is; one shorter than that
        // was cut where blanks were (SQL*Plus trims them): a blank goes between the two.
        self.width = self.width.max(line.len());
        if line.len() < self.width {
            buf.push(b' ');
        }
        let mut used = false;
        let mut i = 0;
        while i < buf.len() {
            let Some(lt) = memchr::memchr(b'<', &buf[i..]).map(|k| i + k) else {
                self.push_text(&buf[i..]);
                break;
            };
            self.push_text(&buf[i..lt]);
            let Some(gt) = memchr::memchr(b'>', &buf[lt..]).map(|k| lt + k) else {
                if buf.len() - lt > MAX_LINE_BYTES {
                    bail!(
                        "line {}: an HTML tag longer than {MAX_LINE_BYTES} bytes",
                        r.line_no
                    );
                }
                self.pending = buf[lt..].to_vec();
                break;
            };
            let tag = &buf[lt + 1..gt];
            let close = tag.first() == Some(&b'/');
            let name = tag_name(&tag[close as usize..]);
            used |= self.tag(c, r, &name, close)?;
            i = gt + 1;
        }
        if used {
            r.parsed();
        } else {
            r.ignored("html");
        }
        Ok(())
    }

    fn push_text(&mut self, t: &[u8]) {
        if t.is_empty() {
            return;
        }
        let s = String::from_utf8_lossy(t);
        if let Some(cell) = &mut self.cell {
            if cell.len() < 4096 {
                cell.push_str(&s);
            }
        } else if self.in_h3 {
            if self.h3.len() < 4096 {
                self.h3.push_str(&s);
            }
        } else {
            // Keep a short tail to find the report's title in.
            self.text.push_str(&s);
            if self.text.len() > 256 {
                let cut = self.text.len() - 128;
                let cut = (cut..self.text.len())
                    .find(|&k| self.text.is_char_boundary(k))
                    .unwrap_or(self.text.len());
                self.text.drain(..cut);
            }
        }
    }

    /// One tag; `Ok(true)` when it completed a row this reader used.
    fn tag(
        &mut self,
        c: &mut Collected,
        r: &mut LineReader,
        name: &str,
        close: bool,
    ) -> Result<bool> {
        if !close && c.kind.is_none() && self.text.contains("WORKLOAD REPOSITORY report for") {
            c.kind = Some("AWR");
        }
        match (name, close) {
            ("title", true) if self.text.contains("AWR RAC Report for DB") => {
                c.kind = Some(GLOBAL_KIND);
                c.global = true;
            }
            ("title", true) if self.text.contains("AWR Report for DB") => c.kind = Some("AWR"),
            ("html", true) => self.closed = true,
            ("h1" | "h2" | "h3", false) => {
                self.in_h3 = true;
                self.h3.clear();
            }
            ("h1" | "h2" | "h3", true) => {
                self.in_h3 = false;
                let title = decode_entities(&self.h3);
                let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
                if title.starts_with("WORKLOAD REPOSITORY report for") {
                    c.kind = Some("AWR");
                }
                let new = if let Some(sec) = histogram_section(&title, false) {
                    Some(sec)
                } else if title == "Foreground Wait Events" {
                    Some(Section::Foreground)
                } else {
                    None
                };
                if new == Some(Section::Detail) {
                    self.detail_sections += 1;
                }
                // A heading ends the section before it (a table not closed is cut).
                if self.in_table && self.section.is_some() {
                    bail!(
                        "line {}: a heading inside a table of the section begun at line {}: \
                         is the report garbled?",
                        r.line_no,
                        self.section_line
                    );
                }
                self.section = new;
                self.section_line = r.line_no;
                self.buckets = None;
            }
            ("table", false) => {
                self.in_table = true;
                self.buckets = None;
                self.labels = None;
            }
            ("table", true) => {
                self.in_table = false;
                if self.section.is_some() {
                    // One table a section.
                    self.section = None;
                }
            }
            ("tr", false) => self.row.clear(),
            ("td" | "th", false) => self.cell = Some(String::new()),
            ("td" | "th", true) => {
                if let Some(cell) = self.cell.take() {
                    let text = decode_entities(&cell);
                    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
                    if self.row.len() < MAX_COLUMNS + 16 {
                        self.row.push((name == "th", text));
                    }
                }
            }
            ("tr", true) => return self.row_end(c, r),
            _ => {}
        }
        Ok(false)
    }

    fn row_end(&mut self, c: &mut Collected, r: &mut LineReader) -> Result<bool> {
        let row = std::mem::take(&mut self.row);
        let cell = |i: usize| row.get(i).map(|c| c.1.as_str()).filter(|s| !s.is_empty());
        let first = cell(0).unwrap_or("");
        if self.section.is_none() {
            for (begin, label) in [(true, "Begin Snap:"), (false, "End Snap:")] {
                if first == label {
                    let ok = c.snap(begin, cell(1).unwrap_or(""), cell(2).unwrap_or(""));
                    if !ok {
                        r.unparsed("snap row without a snap id and time");
                    }
                    return Ok(ok);
                }
            }
            if first == "Elapsed:" {
                c.elapsed_min = row
                    .iter()
                    .skip(1)
                    .find_map(|c| c.1.split_whitespace().next()?.replace(',', "").parse().ok());
            }
            if c.global {
                // The header tables of an AWR RAC report: the last row of headings names the
                // columns of the rows below it.
                if row.iter().all(|c| c.0) {
                    self.labels = Some(row.iter().map(|c| c.1.clone()).collect());
                } else if let Some(labels) = &self.labels {
                    let cells: Vec<String> = row.iter().map(|c| c.1.clone()).collect();
                    return Ok(c.global_row(labels, &cells));
                }
            }
            return Ok(false);
        }
        let section = self.section.unwrap_or(Section::None);
        // The column headings: every cell a heading, the first `Event`.
        if row.iter().all(|c| c.0) {
            if first == "Event" && matches!(section, Section::Histogram | Section::Detail) {
                let labels: Vec<String> = row.iter().skip(2).map(|c| c.1.clone()).collect();
                let b = buckets_of(&labels).map_err(|e| {
                    anyhow::anyhow!("line {}: {}: {e}", r.line_no, section_name(section))
                })?;
                self.buckets = Some(b);
            }
            return Ok(false);
        }
        if row.first().is_some_and(|c| c.0) || first.is_empty() {
            // A row of group headings (`% of Waits`) above the column headings.
            return Ok(false);
        }
        let why = match section {
            Section::Histogram | Section::Detail => {
                let Some(buckets) = self.buckets.clone() else {
                    r.unparsed("histogram row before the table's column headings");
                    return Ok(false);
                };
                let table = if section == Section::Detail {
                    Table2::Detail
                } else {
                    Table2::Main
                };
                let shares: Vec<Option<&str>> = (2..row.len()).map(cell).collect();
                c.hist_row(table, r.line_no, first, cell(1), &shares, &buckets)?
            }
            Section::Foreground => c
                .fg_row(first, cell(1), cell(3), cell(4))?
                .then_some(())
                .map_or(Some("wait events row without a waits count"), |_| None),
            Section::None => None,
        };
        if let Some(why) = why {
            r.unparsed(why);
        }
        Ok(why.is_none())
    }

    /// At the end of the file: a report cut short is refused.
    fn end(&self, c: &Collected) -> Result<()> {
        if let Some(s) = self.section.filter(|_| self.in_table) {
            bail!(
                "the HTML report ends inside its {} table (the section begun at line {}): the \
                 file looks truncated",
                section_name(s),
                self.section_line
            );
        }
        if !self.closed && (!c.events.is_empty() || c.kind.is_some()) {
            bail!("the HTML report ends before its closing </html> tag: the file looks truncated");
        }
        Ok(())
    }
}

/// The name of a tag from the bytes after `<` or `</`, lower-case: `td` also from `tdalign=…`
/// (a line cut where the blank after the name was, on the first such line of a report, before
/// its line size is known).
fn tag_name(t: &[u8]) -> String {
    let name: String = t
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric())
        .map(|b| b.to_ascii_lowercase() as char)
        .collect();
    for tag in ["td", "th", "tr", "table"] {
        if let Some(rest) = name.strip_prefix(tag) {
            let attr = [
                "align", "class", "scope", "headers", "id", "colspan", "border", "width",
            ];
            if attr.iter().any(|a| rest.starts_with(a)) {
                return tag.to_string();
            }
        }
    }
    name
}

fn section_name(s: Section) -> &'static str {
    match s {
        Section::Histogram => "Wait Event Histogram",
        Section::Detail => "Wait Event Histogram Detail",
        Section::Foreground => "Foreground Wait Events",
        Section::None => "other",
    }
}

/// The run of one report: Detail rows merged into their events, counts into the interval.
/// The window of an AWR RAC (global) report: (begin snap id, end snap id, start, duration in s).
/// The instances' snap times are printed to the minute: the window starts at the earliest
/// instance's Begin Snap Time and lasts the report's `Elapsed time` (0.01 min), checked
/// against the instances' snap times.
fn global_window(c: &Collected, warnings: &mut Vec<String>) -> Result<(u64, u64, i64, f64)> {
    let give = "give the report as awrgrpt.sql writes it (text or HTML), or each instance's own \
                AWR report (awrrpti.sql)";
    if c.instances.is_empty() {
        bail!(
            "this is an {GLOBAL_KIND} report (awrgrpt.sql): its Wait Event Histogram (Global) \
             is the cluster's, but its `Database Instances Included In Report` table, which \
             gives the snapshot window (the span the counts cover), could not be read: {give}"
        );
    }
    let Some((b_id, e_id, elapsed)) = c.summary else {
        bail!(
            "this is an {GLOBAL_KIND} report (awrgrpt.sql) whose `Database Summary` table (its \
             snap ids and elapsed time) could not be read: {give}"
        );
    };
    let b_ns = c.instances.iter().map(|i| i.begin_ns).min().unwrap_or(0);
    let e_ns = c.instances.iter().map(|i| i.end_ns).max().unwrap_or(0);
    if e_ns <= b_ns {
        bail!("the {GLOBAL_KIND} report's End Snap times are not after its Begin Snap times");
    }
    let span = (e_ns - b_ns) as f64 / 1e9;
    let inst_max = c
        .instances
        .iter()
        .filter_map(|i| i.elapsed_min)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let (mut duration, mut from) = match (elapsed, inst_max) {
        (Some(m), _) if m > 0.0 => (m * 60.0, "the report's Elapsed time"),
        (_, Some(m)) if m > 0.0 => (m * 60.0, "the instances' longest Elapsed Time"),
        _ => (span, "the instances' snap times"),
    };
    // Times to the minute: the true window is within a minute of the span between them either
    // way (each end cut by up to a minute); an elapsed time outside that is not the window's.
    if (duration - span).abs() > 60.0 + 1.0 {
        warnings.push(format!(
            "the {GLOBAL_KIND} report's elapsed time ({duration:.0} s) differs by more than a \
             minute from its instances' snap times ({span:.0} s, to the minute): the snap times \
             are used"
        ));
        duration = span;
        from = "the instances' snap times";
    }
    let names: Vec<&str> = c.instances.iter().map(|i| i.name.as_str()).collect();
    warnings.push(format!(
        "an {GLOBAL_KIND} report: each event's histogram is the cluster's, the waits of its {} \
         instance(s) ({}) added together over snaps {b_id}-{e_id}; its window begins at the \
         earliest instance's Begin Snap Time, printed to the minute only, and lasts {from} \
         ({:.2} min)",
        names.len(),
        super::truncate(&names.join(", "), 200),
        duration / 60.0
    ));
    Ok((b_id, e_id, b_ns, duration))
}

fn finish(mut c: Collected, detail_sections: u64) -> Result<Vec<RunResult>> {
    if c.events.is_empty() {
        if c.global {
            bail!(
                "this {GLOBAL_KIND} report (awrgrpt.sql) has no readable Wait Event Histogram \
                 (Global) section (some releases print none): give each instance's own AWR \
                 report (awrrpti.sql) instead"
            );
        }
        if let Some(kind) = c.kind {
            let mut m = format!("{kind} report without a readable Wait Event Histogram section");
            for b in &c.bad_rows {
                m.push_str(&format!("\n  {b}"));
            }
            bail!(m);
        }
        return Ok(Vec::new());
    }
    let kind = c.kind.unwrap_or("AWR");
    let mut warnings = Vec::new();
    let (b_id, e_id, b_ns, duration) = if c.global {
        global_window(&c, &mut warnings)?
    } else {
        let (Some((b_id, b_ns)), Some((e_id, e_ns))) = (c.begin, c.end) else {
            bail!(
                "the {kind} report has Wait Event Histogram rows but no Begin Snap / End Snap \
                 lines: its snapshot window (the span the counts cover) is unknown"
            );
        };
        if e_ns <= b_ns {
            bail!("the {kind} report's End Snap time is not after its Begin Snap time");
        }
        let duration = (e_ns - b_ns) as f64 / 1e9;
        if let Some(m) = c.elapsed_min {
            // Snap times are to the second, Elapsed to 0.01 min.
            if (m * 60.0 - duration).abs() > 0.3 + 1.0 {
                warnings.push(format!(
                    "Elapsed {m} min in the report differs from the snap times' {duration} s: \
                     the snap times are used"
                ));
            }
        }
        (b_id, e_id, b_ns, duration)
    };
    warnings.append(&mut c.bad_rows);
    warnings.append(&mut c.collisions);
    // Detail rows to their events, by the printed name (only non-idle events are listed).
    let idle_from = c.idle_from.unwrap_or(c.events.len());
    let mut unmatched = Vec::new();
    for d in std::mem::take(&mut c.details) {
        let found: Vec<usize> = (0..c.events.len())
            .filter(|&i| c.events[i].row.name == d.name)
            .collect();
        let busy: Vec<usize> = found.iter().copied().filter(|&i| i < idle_from).collect();
        let at = match (found.len(), busy.len()) {
            (1, _) => Some(found[0]),
            (_, 1) => Some(busy[0]),
            _ => None,
        };
        match at {
            Some(i)
                if c.events[i]
                    .details
                    .iter()
                    .all(|e| e.buckets[0] != d.buckets[0]) =>
            {
                c.events[i].details.push(d)
            }
            _ => unmatched.push(format!("line {}: '{}'", d.line, d.name)),
        }
    }
    if !unmatched.is_empty() {
        warnings.push(format!(
            "{} Wait Event Histogram Detail row(s) name no single event of the main histogram \
             and are not used: {}",
            unmatched.len(),
            super::truncate(&unmatched.join(", "), 300)
        ));
    }
    let mut merged = 0usize;
    let mut not_merged = Vec::new();
    let mut waits_not_held = Vec::new();
    for ev in &mut c.events {
        if ev.details.is_empty() {
            continue;
        }
        match merge(ev) {
            Ok((b, n, held)) => {
                if !held {
                    waits_not_held.push(ev.op_name.clone());
                }
                ev.buckets = b;
                ev.counts = n;
                ev.merged = true;
                merged += 1;
            }
            Err(why) => not_merged.push(format!("'{}': {why}", ev.op_name)),
        }
    }
    if !not_merged.is_empty() {
        warnings.push(format!(
            "the Detail rows of {} event(s) do not fit their main histogram row and are not \
             used (its buckets are kept): {}",
            not_merged.len(),
            super::truncate(&not_merged.join("; "), 400)
        ));
    }
    if !waits_not_held.is_empty() {
        warnings.push(format!(
            "the Detail rows' printed waits of {} event(s) could not be held together with the \
             main row's shares (the shares alone give their Detail buckets): {}",
            waits_not_held.len(),
            super::truncate(&waits_not_held.join(", "), 300)
        ));
    }
    if !c.cut_counts.is_empty() {
        warnings.push(format!(
            "{} row(s) print a count beside a 0.0 % share cut by the column (`0.0(1009` for \
             `0.0(1009)` or longer): the digits shown are used, a lower bound where a longer \
             count would still be under 0.05 % of the total: {}",
            c.cut_counts.len(),
            super::truncate(&c.cut_counts.join(", "), 300)
        ));
    }
    let estimated: Vec<&str> = c
        .events
        .iter()
        .filter(|e| !(e.row.exact && e.row.count < 1000) && e.row.count > 0)
        .map(|e| e.op_name.as_str())
        .collect();
    if !estimated.is_empty() {
        warnings.push(format!(
            "bucket counts of {} event(s) are estimates from the report's shares (0.1 %) of a \
             total that is rounded or of 1,000 waits or more: {}",
            estimated.len(),
            super::truncate(&estimated.join(", "), 300)
        ));
    }
    let open_ended: u64 = c
        .events
        .iter()
        .flat_map(|e| e.buckets.iter().zip(&e.counts))
        .filter(|(b, _)| b.hi_ns.is_none())
        .map(|(_, n)| n)
        .sum();
    if open_ended > 0 {
        warnings.push(format!(
            "{open_ended} wait(s) in an open-ended column (such as `>1s` or `>=2s`) have no \
             upper edge in the report and are recorded at the column's lower edge (a lower \
             bound)"
        ));
    }
    // The histograms hold 1 ns to 1 h: waits the Detail tables put at an hour or more (`< 1h`
    // reaches 4096 × 1024 ms, `>=1h` begins there) are recorded at 1 h.
    let top = crate::histogram::HIST_MAX_NS;
    let over_an_hour: u64 = c
        .events
        .iter()
        .flat_map(|e| e.buckets.iter().zip(&e.counts))
        .filter(|(b, n)| **n > 0 && b.hi_ns.map_or(b.lo_ns >= top, |h| h > top))
        .map(|(_, n)| n)
        .sum();
    if over_an_hour > 0 {
        warnings.push(format!(
            "{over_an_hour} wait(s) in columns reaching past 1 h (`< 1h`, `>=1h`) are recorded \
             at most at 1 h, the top of the histograms (a lower bound for those over it)"
        ));
    }
    if detail_sections > 0 && merged == 0 && not_merged.is_empty() {
        warnings.push(format!(
            "{detail_sections} Wait Event Histogram Detail section(s) without rows of the \
             main histogram's events (the main histogram's buckets are used)"
        ));
    }
    let mut series = SnapshotSeries::new();
    series.begin_interval(0.0, duration);
    for ev in &c.events {
        let op = series.op(&ev.op_name)?;
        for (b, &n) in ev.buckets.iter().zip(&ev.counts) {
            if n == 0 {
                continue;
            }
            let hi = b.hi_ns.unwrap_or(b.lo_ns.saturating_add(1));
            series.add_spread(op, b.lo_ns, hi, n);
        }
    }
    let (mut ops, duration) = series.finish(BucketConvention::UpperBound);
    ops.retain(|o| o.count > 0);
    let fg_json: Vec<serde_json::Value> =
        c.fg.iter()
            .map(|f| {
                json!({
                    "event": f.event,
                    "waits": f.waits,
                    "total_wait_s": f.total_s,
                    "avg_wait_ms": f.avg_ms,
                })
            })
            .collect();
    let idle: Vec<&str> = c
        .idle_from
        .map(|i| c.events[i..].iter().map(|e| e.op_name.as_str()).collect())
        .unwrap_or_default();
    let detailed: Vec<&str> = c
        .events
        .iter()
        .filter(|e| e.merged)
        .map(|e| e.op_name.as_str())
        .collect();
    let instances: Vec<&str> = c.instances.iter().map(|i| i.name.as_str()).collect();
    let basis = if c.global {
        "the report's column headings: `<1us` holds [0, 1) us, `<2us` [1, 2) us … `<1ms` \
         [512 us, 1 ms) … `<1s` [512, 1024) ms, `>=1s` 1024 ms and more"
    } else {
        "the report's column headings: `<2ms` holds [1, 2) ms, `<=1s` holds [32, 1024) ms, \
         `>1s` 1024 ms and more; with the Wait Event Histogram Detail sections merged in, \
         `<64ms` holds [32, 64) ms … `<2s` [1024, 2048) ms, `>=2s` 2048 ms and more (or on to \
         `<4s` … `< 2m`, `>=2m`)"
    };
    let spec = json!({
        "report": kind,
        "instances": instances,
        "idle_events": idle,
        "begin_snap": b_id,
        "end_snap": e_id,
        "bucket_convention_basis": basis,
        "detail_merged_events": detailed,
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
        // The Detail sections: `m` is 64 × 1024 ms, `h` 4096 × 1024 ms, a blank after `<`.
        assert_eq!(parse_heading("< 1m"), Some((true, 65_536_000_000)));
        assert_eq!(parse_heading(">=2m"), Some((false, 131_072_000_000)));
        assert_eq!(parse_heading("<1/4h"), Some((true, 1_048_576_000_000)));
        assert_eq!(parse_heading(">=1h"), Some((false, 4_194_304_000_000)));
    }

    #[test]
    fn headings_cut_to_their_column_and_sections_of_newer_releases() {
        // 19c text: `<128u` for `<128us`; `>=512` after `<512u`; `<512` before `<1ms`;
        // `>=32m` after `<32ms` (32 ms, not 32 minutes).
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let b = buckets_of(&l(&["<8us", "<128u", "<512u", ">=512"])).unwrap();
        assert_eq!(b[1].hi_ns, Some(128_000));
        assert_eq!((b[3].lo_ns, b[3].hi_ns), (512_000, None));
        let b = buckets_of(&l(&["<512", "<1ms", "<32ms", ">=32m"])).unwrap();
        assert_eq!(b[0].hi_ns, Some(512_000));
        assert_eq!((b[3].lo_ns, b[3].hi_ns), (32_000_000, None));
        assert!(buckets_of(&l(&["<8us", "Waits"])).is_err());
        let sec = |t: &str, text: bool| histogram_section(t, text);
        assert_eq!(sec("Wait Event Histogram", false), Some(Section::Histogram));
        assert_eq!(
            sec(
                "Wait Event Histogram        DB/Inst: P/p  Snaps: 47-48",
                true
            ),
            Some(Section::Histogram)
        );
        assert_eq!(
            sec(
                "Wait Event Histogram Detail (64 msec to 2 sec)DB/Inst: O/o",
                true
            ),
            Some(Section::Detail)
        );
        assert_eq!(
            sec("Wait Event Histogram (up to 2 sec)", false),
            Some(Section::Detail)
        );
        assert_eq!(
            sec("Wait Event Histogram (up to 64 us)", false),
            Some(Section::Detail)
        );
        assert_eq!(sec("Wait Event Histogram Summary", false), None);
        assert_eq!(sec("Foreground Wait Events", false), None);
    }

    #[test]
    fn counts_as_printed() {
        assert_eq!(parse_count(b"369"), Some((369, true)));
        assert_eq!(parse_count(b"71K"), Some((71_000, false)));
        assert_eq!(parse_count(b"661.6K"), Some((661_600, false)));
        assert_eq!(parse_count(b"3138.K"), Some((3_138_000, false)));
        assert_eq!(parse_count(b"1,234"), Some((1_234, true)));
        assert_eq!(parse_count(b"x"), None);
        // A comma as the decimal character before a unit (an HTML report of such a session).
        assert_eq!(parse_count(b"33,4K"), Some((33_400, false)));
        assert_eq!(parse_count(b"15,4M"), Some((15_400_000, false)));
    }

    #[test]
    fn snap_times_with_months_of_other_languages() {
        let at = |s: &str| {
            chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
                .unwrap()
                .and_utc()
                .timestamp_nanos_opt()
        };
        let same = |s: &str, want: &str| assert_eq!(parse_snap_time(s), at(want), "{s}");
        same("16-Out-12 01:00:49", "2012-10-16 01:00:49");
        same("31-Jan-16 00:00:03", "2016-01-31 00:00:03");
        same("03-Fev-2015 10:00:00", "2015-02-03 10:00:00");
        same("01-Dic-19 12:00:00", "2019-12-01 12:00:00");
        same("01-MRZ-19 12:00:00", "2019-03-01 12:00:00");
        same("01-Mär-19 12:00:00", "2019-03-01 12:00:00");
        same("01-Févr.-19 12:00:00", "2019-02-01 12:00:00");
        same("01-Août-19 12:00:00", "2019-08-01 12:00:00");
        same("01-Juil.-19 12:00:00", "2019-07-01 12:00:00");
        same("01-Giu-19 12:00:00", "2019-06-01 12:00:00");
        same("01-Mei-19 12:00:00", "2019-05-01 12:00:00");
        assert_eq!(parse_snap_time("01-Xyz-19 12:00:00"), None);
        assert_eq!(parse_snap_time("31-Fev-19 12:00:00"), None);
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
    fn html_text_decodes_entities_and_tag_names_survive_cut_lines() {
        assert_eq!(decode_entities("&lt;=1s&#160;&gt;1s &amp;"), "<=1s >1s &");
        assert_eq!(decode_entities("&#xA0;a&bogus;"), " a&bogus;");
        // An `&` before text that is not ASCII (a report in Portuguese): no entity, no panic.
        assert_eq!(decode_entities("a & ção; é"), "a & ção; é");
        assert_eq!(tag_name(b"td align=\"right\""), "td");
        assert_eq!(tag_name(b"tdalign=\"right\""), "td");
        assert_eq!(tag_name(b"tbody"), "tbody");
        assert_eq!(tag_name(b"h3 class=\"awr\""), "h3");
    }

    #[test]
    fn shares_with_their_counts_printed_beside_them() {
        assert_eq!(parse_share(b"32.5"), Some((32.5, None)));
        assert_eq!(parse_share(b"0.0(119)"), Some((0.0, Some((119, false)))));
        assert_eq!(parse_share(b".0(2)"), Some((0.0, Some((2, false)))));
        // Cut by the text report's column.
        assert_eq!(parse_share(b"0.0(1009"), Some((0.0, Some((1009, true)))));
        // A count beside a share other than 0.0, a zero or empty count: not a share.
        assert_eq!(parse_share(b"1.2(5)"), None);
        assert_eq!(parse_share(b"0.0(0)"), None);
        assert_eq!(parse_share(b"0.0()"), None);
        assert_eq!(parse_share(b"0.0(5x)"), None);
        assert_eq!(parse_share(b"0.0(99999999999999999999)"), None);
        assert_eq!(count_half_step("21.7M"), 50_000);
        assert_eq!(count_half_step("170"), 0);
        // `AQ: RAC AQ Network  14.7K`: `0.0(2)` `32.5` `64.2` `1.8` `1.2` `0.2` `0.1` `0.0(1)`:
        // the printed counts are kept, the rest shares the remaining 14,697 waits.
        let pcts = [0.0, 32.5, 64.2, 1.8, 1.2, 0.2, 0.1, 0.0].map(Some);
        let fixed = [Some(2), None, None, None, None, None, None, Some(1)];
        let c = apportion_with(14_700, 14_700, &pcts, false, &fixed).unwrap();
        assert_eq!((c[0], c[7]), (2, 1));
        assert_eq!(c.iter().sum::<u64>(), 14_700);
        // Printed in full, the counts fix the row: `CGS wait for IPC msg` as if 1000 waits.
        let pcts = [Some(50.0), Some(49.7), Some(0.0)];
        let c = apportion_with(1000, 1000, &pcts, true, &[None, None, Some(3)]).unwrap();
        assert_eq!(c, vec![500, 497, 3]);
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
