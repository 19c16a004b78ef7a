//! `iolens ingest --format awr` on a real Statspack report (origin in tests/fixtures/README.md):
//! every bucket's count against the report's text (rows read here independently, by the
//! report's own column rule), the shares reconciled with the counts, the duration from the
//! snap window, the foreground wait events as means only, and truncated or garbled reports
//! refused with a non-zero exit. Two real AWR HTML reports (11.2.0.3 and 11.2.0.4) with their
//! Wait Event Histogram Detail sections: every event's count, each main and Detail column's
//! share and each Detail row's printed waits against the HTML (read here independently), the
//! snap window, merged counts worked out by hand, rows that cannot be placed named, truncated
//! HTML refused.

mod common;
use common::real;

use std::path::PathBuf;

use iolens::results::Results;
use iolens::sources::{ingest, Format, IngestOptions};

const STATSPACK: &str = "statspack_11204_igt.txt";

fn opts(files: Vec<PathBuf>) -> IngestOptions {
    IngestOptions {
        format: Format::Awr,
        files,
        unit: None,
        time_unit: None,
        interval: std::time::Duration::from_secs(1),
        duration: None,
    }
}

fn read(path: PathBuf) -> anyhow::Result<Results> {
    ingest(&opts(vec![path]), vec![])
}

/// One histogram row of the report: event, printed total, whether the total is printed in
/// full, and the printed share per column (`None`: blank).
struct Row {
    event: String,
    total: u64,
    exact: bool,
    shares: Vec<Option<f64>>,
}

/// The Wait Event Histogram rows of a report text, cut at the column rule's offsets.
fn histogram_rows(text: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut in_hist = false;
    let mut cols: Option<Vec<(usize, usize)>> = None;
    for l in text.lines() {
        let l = l.trim_end_matches('\r');
        if l.starts_with("Wait Event Histogram") {
            in_hist = true;
            cols = None;
            continue;
        }
        if !in_hist {
            continue;
        }
        if l.starts_with("          ---") && cols.is_some() {
            in_hist = false;
            continue;
        }
        if l.starts_with("---") {
            let mut c = Vec::new();
            let mut start = None;
            for (i, ch) in l.char_indices().chain(std::iter::once((l.len(), ' '))) {
                match (ch == '-', start) {
                    (true, None) => start = Some(i),
                    (false, Some(s)) => {
                        c.push((s, i));
                        start = None;
                    }
                    _ => {}
                }
            }
            cols = Some(c);
            continue;
        }
        let Some(c) = &cols else { continue };
        if l.trim().is_empty() {
            continue;
        }
        let cell =
            |(s, e): (usize, usize)| -> &str { l.get(s..e.min(l.len())).unwrap_or("").trim() };
        let total_s = cell(c[1]);
        let (total, exact) = match total_s.strip_suffix('K') {
            Some(k) => (k.parse::<u64>().unwrap() * 1000, false),
            None => (total_s.parse::<u64>().unwrap(), true),
        };
        rows.push(Row {
            event: cell(c[0]).to_string(),
            total,
            exact,
            shares: c[2..]
                .iter()
                .map(|&sp| {
                    let v = cell(sp);
                    (!v.is_empty()).then(|| v.parse::<f64>().unwrap())
                })
                .collect(),
        });
    }
    rows
}

/// The report's bucket edges in ms: `<1ms` … `<32ms`, `<=1s` (truly < 1024 ms), `>1s`.
const EDGES_MS: [(f64, f64); 8] = [
    (0.0, 1.0),
    (1.0, 2.0),
    (2.0, 4.0),
    (4.0, 8.0),
    (8.0, 16.0),
    (16.0, 32.0),
    (32.0, 1024.0),
    (1024.0, f64::INFINITY),
];

/// Counts of an op's values per report bucket.
fn bucket_counts(op: &iolens::results::OpResult) -> Vec<u64> {
    let h = op.hist.decode().unwrap();
    let mut out = vec![0u64; EDGES_MS.len()];
    for v in h.iter_recorded() {
        let ms = v.value_iterated_to() as f64 / 1e6;
        let i = EDGES_MS
            .iter()
            .position(|&(lo, hi)| ms >= lo && ms < hi)
            .unwrap_or_else(|| panic!("{}: value {ms} ms outside every bucket", op.op));
        out[i] += v.count_at_value();
    }
    out
}

#[test]
fn statspack_bucket_counts_are_the_reports() {
    let r = read(real(STATSPACK)).unwrap();
    let run = &r.runs[0];
    let rows = histogram_rows(&std::fs::read_to_string(real(STATSPACK)).unwrap());
    assert_eq!(rows.len(), 80, "rows of the fixture's two histogram pages");
    // Checked by hand against the text: `ADR block file read  369  99.2  .3  (blank)  .3  .3`.
    let op = |name: &str| run.op(name).unwrap();
    assert_eq!(
        bucket_counts(op("ADR block file read")),
        [366, 1, 0, 1, 1, 0, 0, 0]
    );
    // `cursor: pin S wait on X  57  (blank) 17.5 10.5 5.3 57.9 (blank) 8.8`.
    assert_eq!(
        bucket_counts(op("cursor: pin S wait on X")),
        [0, 10, 6, 3, 33, 0, 5, 0]
    );
    // `os thread startup  431  … 99.1 .7 .2` (<16ms, <32ms, <=1s).
    assert_eq!(
        bucket_counts(op("os thread startup")),
        [0, 0, 0, 0, 427, 3, 1, 0]
    );
    // `enq: TM - contention  1  … 100.0` in `>1s`: recorded at 1024 ms, its lower edge.
    assert_eq!(
        bucket_counts(op("enq: TM - contention")),
        [0, 0, 0, 0, 0, 0, 0, 1]
    );
    // (to the histogram's resolution, 3 significant digits).
    let max = op("enq: TM - contention").summary.max_ns;
    assert!((1_024_000_000..=1_025_024_000).contains(&max), "{max}");

    let mut seen = std::collections::HashMap::new();
    for row in &rows {
        let k = seen.entry(row.event.clone()).or_insert(0);
        *k += 1;
        let name = if *k == 1 {
            row.event.clone()
        } else {
            format!("{} ({k})", row.event)
        };
        let o = op(&name);
        let counts = bucket_counts(o);
        assert_eq!(o.count, row.total, "{name}: count is the printed total");
        assert_eq!(counts.iter().sum::<u64>(), row.total, "{name}");
        for (i, (c, p)) in counts.iter().zip(&row.shares).enumerate() {
            match p {
                // Blank: truly none.
                None => assert_eq!(*c, 0, "{name} bucket {i}"),
                Some(p) => {
                    // The share printed to 0.1 % (`.0`: under 0.05 % but some).
                    assert!(*c > 0, "{name} bucket {i}: printed {p} % but no waits");
                    let share = *c as f64 * 100.0 / row.total as f64;
                    // A rounded total (`71K`) moves shares by up to 500/71000.
                    let slack = if row.exact {
                        0.05 + 1e-9
                    } else {
                        0.05 + 100.0 * 500.0 / row.total as f64
                    };
                    assert!(
                        (share - p).abs() <= slack,
                        "{name} bucket {i}: {c} waits are {share:.3} %, printed {p} %"
                    );
                }
            }
            if row.exact && row.total < 1000 {
                // Exact: the only whole count whose share rounds to the printed one.
                let want = p
                    .map(|p| (p * row.total as f64 / 100.0).round() as u64)
                    .unwrap_or(0);
                assert_eq!(*c, want, "{name} bucket {i}");
            }
        }
    }
    // Two events print as `Streams AQ: qmn coordinato` (1 wait, and 7561 idle waits).
    assert_eq!(op("Streams AQ: qmn coordinato").count, 1);
    assert_eq!(op("Streams AQ: qmn coordinato (2)").count, 7561);
    assert!(run.warnings.iter().any(|w| w.contains("are estimates")));
    // Idle events last: from `DIAG idle wait` (after `write complete waits`) to the end.
    let spec = run.spec.as_ref().unwrap().to_value();
    let idle: Vec<&str> = spec["idle_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(idle.len(), 18, "{idle:?}");
    assert_eq!(idle[0], "DIAG idle wait");
    assert_eq!(idle[17], "wait for unread message on");
    assert!(idle.contains(&"Streams AQ: qmn coordinato (2)"));
    assert!(!idle.contains(&"Streams AQ: qmn coordinato"));
}

#[test]
fn statspack_duration_is_the_snap_window() {
    let r = read(real(STATSPACK)).unwrap();
    let run = &r.runs[0];
    // Begin Snap 31-Jan-16 00:00:03, End Snap 01-Feb-16 00:00:02: 86,399 s (Elapsed 1,439.98 min).
    assert_eq!(run.duration_s, 86_399.0);
    assert!(!run.duration_unknown);
    assert_eq!(run.started, "2016-01-31T00:00:03.000Z");
    assert_eq!(run.name, "Statspack snaps 6693-6723");
    let db = run.op("db file sequential read").unwrap();
    assert_eq!(db.intervals.len(), 1);
    assert_eq!(db.intervals[0].duration_s, 86_399.0);
    // No warning about Elapsed: it agrees with the snap times.
    assert!(
        !run.warnings.iter().any(|w| w.contains("Elapsed")),
        "{:?}",
        run.warnings
    );
}

#[test]
fn statspack_foreground_wait_events_are_means_only() {
    let r = read(real(STATSPACK)).unwrap();
    let run = &r.runs[0];
    let spec = run.spec.as_ref().unwrap().to_value();
    let fg = spec["foreground_wait_events"].as_array().unwrap();
    // Rows of the Foreground Wait Events table (lines 119-157 of the fixture).
    assert_eq!(fg.len(), 35);
    let row = |e: &str| fg.iter().find(|v| v["event"] == e).unwrap().clone();
    let db = row("db file sequential read");
    assert_eq!(db["waits"], 121_513);
    assert_eq!(db["total_wait_s"], 1.0);
    assert_eq!(db["avg_wait_ms"], 0.0);
    let net = row("SQL*Net message from client");
    assert_eq!(net["waits"], 466_947);
    assert_eq!(net["total_wait_s"], 5_175_208.0);
    assert_eq!(net["avg_wait_ms"], 11_083.0);
    // 11083 ms ≈ 5,175,208 s / 466,947 waits: the means agree with the totals.
    let avg = 5_175_208.0 * 1000.0 / 466_947.0;
    assert!((avg - 11_083.0_f64).abs() < 1.0);
    // Means only: no op is made of them (the histogram's op of this event has the histogram's
    // count of fg and bg waits, 237K, not the foreground table's 121,513).
    let op = run.op("db file sequential read").unwrap();
    assert_eq!(op.count, 237_000);
}

fn cut(lines: usize) -> tempfile::TempPath {
    let text = std::fs::read_to_string(real(STATSPACK)).unwrap();
    let part: String = text.split_inclusive('\n').take(lines).collect();
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), part).unwrap();
    f.into_temp_path()
}

#[test]
fn truncated_or_garbled_reports_are_refused() {
    // Cut inside the first histogram page (its rows run from line 328).
    let e = read(cut(340).to_path_buf()).unwrap_err();
    assert!(format!("{e:#}").contains("truncated"), "{e:#}");
    // Cut before the histogram.
    let e = read(cut(300).to_path_buf()).unwrap_err();
    assert!(
        format!("{e:#}").contains("without a readable Wait Event Histogram"),
        "{e:#}"
    );
    // Without the snap window (the first 20 lines cut away).
    let text = std::fs::read_to_string(real(STATSPACK)).unwrap();
    let body: String = text.split_inclusive('\n').skip(20).collect();
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), &body).unwrap();
    let e = read(f.path().to_path_buf()).unwrap_err();
    assert!(format!("{e:#}").contains("Begin Snap"), "{e:#}");
    // A share changed so that the row no longer adds up to 100 %.
    let bad = text.replacen(
        "ADR block file read         369   99.2",
        "ADR block file read         369   89.2",
        1,
    );
    assert_ne!(bad, text);
    std::fs::write(f.path(), &bad).unwrap();
    let r = read(f.path().to_path_buf()).unwrap();
    let run = &r.runs[0];
    assert!(run.op("ADR block file read").is_none());
    assert!(
        run.warnings
            .iter()
            .any(|w| w.contains("ADR block file read") && w.contains("not 100 %")),
        "{:?}",
        run.warnings
    );
    // A column heading that is not a time bucket.
    let bad = text.replace(" <16ms", " <16xx");
    std::fs::write(f.path(), &bad).unwrap();
    let e = read(f.path().to_path_buf()).unwrap_err();
    assert!(format!("{e:#}").contains("<16xx"), "{e:#}");
    // The CLI: exit non-zero with the reason, never 0 with nothing read.
    let truncated = cut(340);
    ingest_refused("awr", &truncated, "truncated");
    ingest_refused("awr", &real("bcc_biolatency.txt"), "");
}

#[test]
fn awr_ingest_then_show_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sp.json");
    common::ok_stdout(
        common::bin()
            .args(["ingest", "--format", "awr"])
            .arg(real(STATSPACK))
            .arg("--json")
            .arg(&json),
    );
    let shown = common::ok_stdout(common::bin().arg("show").arg(&json));
    assert!(shown.contains("db file sequential read"), "{shown}");
    assert!(shown.contains("86399 s"), "{shown}");
    let html = dir.path().join("r.html");
    common::ok_stdout(common::bin().arg("report").arg(&json).arg("-o").arg(&html));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("db file sequential read"));
    // A wrong --format on the report hints at awr.
    ingest_refused("biolatency", &real(STATSPACK), "--format awr");
}

/// `iolens ingest --format FORMAT PATH` fails, and its error says `says` (the CLI: a non-zero
/// exit with the reason, never 0 with nothing read).
fn ingest_refused(format: &str, path: &std::path::Path, says: &str) {
    let out = common::bin()
        .args(["ingest", "--format", format])
        .arg(path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{format} {path:?} was read: {err}");
    assert!(err.contains(says), "{err}");
}

/// A latency as `compare` prints it (`605 µs`, `≤ 1.02 s`): (bound, ns), the bound `≤`, `≥`
/// or empty for a plain value; `None` for `-`.
fn stated(cell: &str) -> Option<(&'static str, f64)> {
    let cell = cell.trim();
    if cell == "-" {
        return None;
    }
    let (bound, rest) = match (cell.strip_prefix("≤ "), cell.strip_prefix("≥ ")) {
        (Some(r), _) => ("≤", r),
        (_, Some(r)) => ("≥", r),
        _ => ("", cell),
    };
    let (v, unit) = rest.split_once(' ').unwrap();
    let scale = match unit {
        "ns" => 1.0,
        "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => panic!("unit {other} in {cell:?}"),
    };
    Some((bound, v.parse::<f64>().unwrap() * scale))
}

/// `compare` of Statspack reports (the real fixture, ingested twice): its event histograms are
/// distributions of the report's buckets, so a percentile is stated as the report's bucket it
/// falls in (`≤` the column's upper edge; `≥ 1.02 s` in the open `>1s` column), the bucket
/// found here from the report's own shares; no mean is made of buckets, no ratio of edges,
/// no percentile curve drawn. Its Foreground Wait Events table holds means, and they are
/// compared as means (the report's total wait time over its waits). Before, compare printed
/// percentiles interpolated inside the buckets (`p50 605 µs`), which the report does not hold,
/// and ignored the foreground means.
#[test]
fn compare_of_statspack_reports_states_the_reports_buckets_and_its_foreground_means() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for f in [&a, &b] {
        common::ok_stdout(
            common::bin()
                .args(["-q", "ingest", "--format", "awr"])
                .arg(real(STATSPACK))
                .arg("--json")
                .arg(f),
        );
    }
    let text = common::ok_stdout(
        common::bin()
            .args(["compare", "--width", "400"])
            .arg(&a)
            .arg(&b),
    );
    let lines: Vec<&str> = text.lines().collect();
    // The figures of `event` in its run table: (row name, base cell, other cell, ratio cell).
    let table = |event: &str| -> Vec<(String, String, String, String)> {
        let start = lines
            .iter()
            .position(|l| l.starts_with(&format!("{event} — run 0")))
            .unwrap_or_else(|| panic!("no table for {event}:\n{text}"));
        lines[start + 2..]
            .iter()
            .take_while(|l| !l.trim().is_empty())
            .map(|l| {
                let c: Vec<&str> = l
                    .split("  ")
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect();
                assert_eq!(c.len(), 4, "{l}");
                (c[0].into(), c[1].into(), c[2].into(), c[3].into())
            })
            .collect()
    };
    let rows = histogram_rows(&std::fs::read_to_string(real(STATSPACK)).unwrap());
    let mut seen = std::collections::HashSet::new();
    let mut checked = 0;
    for row in &rows {
        // Events cut to one name are two ops (`… (2)`): the first of each name is enough.
        if !seen.insert(row.event.clone()) {
            continue;
        }
        let figures = table(&row.event);
        let shares: Vec<f64> = row.shares.iter().map(|s| s.unwrap_or(0.0)).collect();
        let total: f64 = shares.iter().sum();
        for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
            let (_, base, other, ratio) = figures.iter().find(|f| f.0 == name).unwrap();
            assert_eq!(base, other, "{}: the same report on both sides", row.event);
            assert_eq!(ratio, "-", "{} {name}: no ratio of bucket edges", row.event);
            // The report's bucket holding the quantile, from its printed shares; a quantile
            // within the shares' rounding of a column's end could be either side: skipped.
            let mut cum = 0.0;
            let mut at = None;
            let mut near = false;
            for (i, s) in shares.iter().enumerate() {
                cum += s;
                near |= *s > 0.0 && (cum - q * total).abs() <= 0.1 * shares.len() as f64;
                if at.is_none() && cum >= q * total {
                    at = Some(i);
                }
            }
            if near {
                continue;
            }
            let (lo, hi) = EDGES_MS[at.unwrap()];
            let (bound, ns) = stated(base).unwrap_or_else(|| panic!("{} {name}", row.event));
            if hi.is_infinite() {
                assert_eq!(bound, "≥", "{} {name}: {base}", row.event);
                assert!(
                    (ns / 1e6 - lo).abs() <= lo * 0.01,
                    "{} {name}: {base}",
                    row.event
                );
            } else {
                assert_eq!(bound, "≤", "{} {name}: {base}", row.event);
                assert!(
                    (ns / 1e6 - hi).abs() <= hi * 0.01,
                    "{} {name}: {base} vs {hi} ms",
                    row.event
                );
            }
            checked += 1;
        }
        let mean = figures.iter().find(|f| f.0 == "mean").unwrap();
        assert_eq!(
            (mean.1.as_str(), mean.2.as_str()),
            ("-", "-"),
            "{}",
            row.event
        );
    }
    assert!(checked > 100, "{checked} percentiles checked");
    // The foreground means, from the report's Foreground Wait Events table.
    assert!(text.contains("Means only"), "{text}");
    let mean_of = |event: &str| -> f64 {
        let l = lines
            .iter()
            .find(|l| l.starts_with(&format!("{event} mean")))
            .unwrap_or_else(|| panic!("no mean of {event}:\n{text}"));
        let c: Vec<&str> = l[event.len() + 5..]
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(c[0], c[1], "{l}");
        stated(c[0]).unwrap().1
    };
    // `SQL*Net message from client  466,947 … 5,175,208 (s)`; `db file sequential read 121,513
    // … 1 (s)` (lines 119-157 of the fixture).
    let net = mean_of("SQL*Net message from client");
    let want = 5_175_208.0e9 / 466_947.0;
    assert!((net - want).abs() <= want * 0.005, "{net} vs {want}");
    let db = mean_of("db file sequential read");
    let want = 1.0e9 / 121_513.0;
    assert!((db - want).abs() <= want * 0.005, "{db} vs {want}");
    // The HTML: no percentile curve of buckets.
    let html = dir.path().join("c.html");
    common::ok_stdout(
        common::bin()
            .arg("compare")
            .arg(&a)
            .arg(&b)
            .arg("-o")
            .arg(&html),
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains(" percentiles — "));
    assert!(page.contains("<section id=\"means\">"));
}

// ---- AWR HTML reports, with their Wait Event Histogram Detail sections ----

const HTML_11203: &str = "awr_11203_monit_144_145.html";
const HTML_11204: &str = "awr_11204_pderp01_52417_52418.html";
/// A report of a session in Brazilian Portuguese: snap times `16-Out-12 01:00:49`.
const HTML_11203_PT: &str = "awr_11203_varejo1_11560_11563.html";
/// Its main histogram's events and those merged with their Detail rows.
const MERGED_PT: (usize, usize) = (217, 81);

/// The tables of an AWR HTML report, read here independently of iolens: the file's lines joined
/// as they are (SQL*Plus cut them inside tags), cut at each `<h3 class="awr">` heading; each
/// table's rows as their cells' text, entities decoded, `&#160;` blank.
fn html_tables(text: &str) -> Vec<(String, Vec<Vec<String>>)> {
    let joined: String = text.lines().collect();
    let mut out = Vec::new();
    for part in joined.split("<h3 class=\"awr\">").skip(1) {
        let (title, body) = part.split_once("</h3>").unwrap();
        let Some(t0) = body.find("<table") else {
            out.push((title.trim().to_string(), Vec::new()));
            continue;
        };
        let table = &body[t0..body[t0..].find("</table>").map(|e| t0 + e).unwrap()];
        let mut rows = Vec::new();
        for row in table.split("<tr>").skip(1) {
            let mut cells = Vec::new();
            let mut rest = row;
            while let Some(s) = rest.find("<t") {
                let after = &rest[s + 2..];
                if !(after.starts_with('d') || after.starts_with('h')) {
                    rest = after;
                    continue;
                }
                let open_end = after.find('>').unwrap();
                let content = &after[open_end + 1..];
                let close = content.find("</t").unwrap();
                let cell = content[..close]
                    .replace("&#160;", " ")
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&");
                cells.push(cell.split_whitespace().collect::<Vec<_>>().join(" "));
                rest = &content[close..];
            }
            rows.push(cells);
        }
        out.push((title.trim().to_string(), rows));
    }
    out
}

/// A waits count as the report prints it: `1903`, `33,4K`, `3,1M` (a comma as the decimal
/// character before a unit): (waits, printed in full).
fn html_count(s: &str) -> (u64, bool) {
    for (unit, mult) in [('K', 1e3), ('M', 1e6), ('G', 1e9)] {
        if let Some(k) = s.strip_suffix(unit) {
            let v = k.replace(',', ".").parse::<f64>().unwrap();
            return ((v * mult).round() as u64, false);
        }
    }
    (s.replace(',', "").parse().unwrap(), true)
}

/// A column heading as an edge in ms (`us` a thousandth, `s` 1024 ms, `m` 64 s and `h` 4096 s of
/// them):
/// `<32ms` → 32, `<1/8s` → 128, `< 1m` → 65536, `<1/4h` → 1048576; `None` for `>1s`, `>=2s`.
fn heading_ms(h: &str) -> Option<f64> {
    let h = h.strip_prefix('<')?.trim_start_matches('=').trim();
    let (num, unit) = if let Some(n) = h.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = h.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = h.strip_suffix('s') {
        (n, 1024.0)
    } else if let Some(n) = h.strip_suffix('m') {
        (n, 65536.0)
    } else {
        (h.strip_suffix('h').unwrap(), 4_194_304.0)
    };
    let v = match num.split_once('/') {
        Some((a, b)) => a.parse::<f64>().unwrap() / b.parse::<f64>().unwrap(),
        None => num.parse::<f64>().unwrap(),
    };
    Some(v * unit)
}

/// One histogram table: its column edges ([lo, hi) in ms, the last open) and its rows (event,
/// printed count, shares).
struct HTable {
    edges: Vec<(f64, f64)>,
    rows: Vec<(String, String, Vec<Option<f64>>)>,
}

/// The bucket edges (ms) of a histogram table's heading row `head` (its first two cells are the
/// event and its total): each heading's upper edge, the last one open.
fn heading_edges(head: &[String]) -> Vec<(f64, f64)> {
    let mut edges = Vec::new();
    let mut lo = 0.0;
    for h in &head[2..] {
        match heading_ms(h) {
            Some(hi) => {
                edges.push((lo, hi));
                lo = hi;
            }
            None => edges.push((lo, f64::INFINITY)),
        }
    }
    edges
}

fn htable(rows: &[Vec<String>]) -> HTable {
    let head = rows.iter().find(|r| r[0] == "Event").unwrap();
    let edges = heading_edges(head);
    let data = rows
        .iter()
        .filter(|r| r.len() == head.len() && r[0] != "Event")
        .map(|r| {
            let shares = r[2..]
                .iter()
                .map(|c| (!c.is_empty()).then(|| c.parse::<f64>().unwrap()))
                .collect();
            (r[0].clone(), r[1].clone(), shares)
        })
        .collect();
    HTable { edges, rows: data }
}

/// Waits of an op per power-of-two bucket of ms: index 0 is [0, 1) ms, index k is
/// [2^(k-1), 2^k) ms (the reports' edges, 1 ms to 4096 × 1024 ms, are all powers of two).
fn pow2_counts(op: &iolens::results::OpResult) -> Vec<u64> {
    let h = op.hist.decode().unwrap();
    let mut out = vec![0u64; 24];
    for v in h.iter_recorded() {
        let ms = v.value_iterated_to() as f64 / 1e6;
        let k = if ms < 1.0 {
            0
        } else {
            (ms.log2().floor() as usize + 1).min(23)
        };
        out[k] += v.count_at_value();
    }
    out
}

/// The waits of `counts` in [lo, hi) ms (edges powers of two, or 0, or open).
fn waits_in(counts: &[u64], lo: f64, hi: f64) -> u64 {
    let k = |ms: f64| {
        if ms <= 0.0 {
            0
        } else {
            ms.log2().round() as usize + 1
        }
    };
    let (a, b) = (
        k(lo),
        if hi.is_infinite() {
            counts.len()
        } else {
            k(hi)
        },
    );
    counts[a..b].iter().sum()
}

/// Whether `n` of `total` waits is the printed share `p` within its rounding (`.0`: some, under
/// 0.05 %; blank: none; a total printed with a unit moves shares by up to 50/total %).
fn share_fits(n: u64, total: u64, exact: bool, p: Option<f64>) -> bool {
    match p {
        None => n == 0,
        Some(p) => {
            let slack = if exact {
                0.05 + 1e-9
            } else {
                0.05 + 100.0 * 50.0 / total as f64
            };
            n > 0 && (n as f64 * 100.0 / total as f64 - p).abs() <= slack
        }
    }
}

#[test]
fn awr_html_reports_merge_the_detail_sections_into_each_events_distribution() {
    for (file, name, started, duration, events, merged_want) in [
        (
            HTML_11203,
            "AWR snaps 144-145",
            "2013-11-04T10:00:39.000Z",
            3632.0,
            190,
            96,
        ),
        (
            HTML_11204,
            "AWR snaps 52417-52418",
            "2014-01-20T08:00:13.000Z",
            3571.0,
            175,
            50,
        ),
        (
            HTML_11203_PT,
            "AWR snaps 11560-11563",
            "2012-10-16T01:00:49.000Z",
            10766.0,
            MERGED_PT.0,
            MERGED_PT.1,
        ),
    ] {
        let r = read(real(file)).unwrap();
        let run = &r.runs[0];
        // Begin Snap 04-Nov-13 10:00:39, End Snap 11:01:11: 3632 s (Elapsed 60.54 min);
        // 20-Jan-14 08:00:13 to 08:59:44: 3571 s (59.51 min); in Portuguese, 16-Out-12
        // 01:00:49 to 04:00:15: 10766 s (179.43 min).
        assert_eq!(run.name, name);
        assert_eq!(run.started, started);
        assert_eq!(run.duration_s, duration);
        assert!(
            !run.warnings.iter().any(|w| w.contains("Elapsed")),
            "{:?}",
            run.warnings
        );
        let tables = html_tables(&std::fs::read_to_string(real(file)).unwrap());
        let table = |t: &str| htable(&tables.iter().find(|x| x.0 == t).unwrap().1);
        let main = table("Wait Event Histogram");
        // A Detail section without waits has no table ("No data exists", the Portuguese
        // report's 4 min to 1 hr).
        let details: Vec<HTable> = [
            "Wait Event Histogram Detail (64 msec to 2 sec)",
            "Wait Event Histogram Detail (4 sec to 2 min)",
            "Wait Event Histogram Detail (4 min to 1 hr)",
        ]
        .iter()
        .map(|t| &tables.iter().find(|x| x.0 == *t).unwrap().1)
        .filter(|rows| !rows.is_empty())
        .map(|rows| htable(rows))
        .collect();
        assert!(details.len() >= 2, "{file}");
        assert_eq!(main.rows.len(), events);
        assert_eq!(run.ops.len(), events, "one op per event (every total > 0)");
        let spec = run.spec.as_ref().unwrap().to_value();
        let merged: Vec<&str> = spec["detail_merged_events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let mut checked_detail = 0;
        let mut checked_waits = 0;
        for (event, printed, shares) in &main.rows {
            let op = run.op(event).unwrap();
            let (total, exact) = html_count(printed);
            assert_eq!(op.count, total, "{event}: the printed total");
            let counts = pow2_counts(op);
            assert_eq!(counts.iter().sum::<u64>(), total, "{event}");
            // The main table's columns hold their printed shares, merged or not.
            for (&(lo, hi), p) in main.edges.iter().zip(shares) {
                let n = waits_in(&counts, lo, hi);
                assert!(
                    share_fits(n, total, exact, *p),
                    "{event} [{lo}, {hi}) ms: {n} of {total} waits, printed {p:?} %"
                );
            }
            if !merged.contains(&event.as_str()) {
                // Not merged: the main table's buckets only (`>1s` recorded at 1024 ms).
                assert_eq!(waits_in(&counts, 2048.0, f64::INFINITY), 0, "{event}");
                continue;
            }
            for d in &details {
                let Some((_, w, dshares)) = d.rows.iter().find(|r| &r.0 == event) else {
                    continue;
                };
                // Each Detail column holds its printed share of the event's total …
                for (&(lo, hi), p) in d.edges.iter().zip(dshares).skip(1) {
                    if hi.is_infinite() {
                        continue; // continued by the next table when it lists the event
                    }
                    let n = waits_in(&counts, lo, hi);
                    assert!(
                        share_fits(n, total, exact, *p),
                        "{event} [{lo}, {hi}) ms: {n} of {total} waits, printed {p:?} %"
                    );
                }
                // … and its own columns hold its printed waits.
                let (w, w_exact) = html_count(w);
                let (lo, hi) = (d.edges[0].1, d.edges[d.edges.len() - 2].1);
                let n = waits_in(&counts, lo, hi);
                let held = !run
                    .warnings
                    .iter()
                    .any(|w| w.contains("could not be held") && w.contains(event.as_str()));
                if w_exact && held {
                    assert_eq!(n, w, "{event}: waits in [{lo}, {hi}) ms");
                    checked_waits += 1;
                }
                checked_detail += 1;
            }
        }
        eprintln!(
            "{file}: {} merged, {checked_detail} Detail rows checked, {checked_waits} with their \
             printed waits held; warnings {:#?}",
            merged.len(),
            run.warnings
        );
        assert_eq!(
            merged.len(),
            merged_want,
            "{file}: {merged:?}\n{:?}",
            run.warnings
        );
        assert!(checked_detail >= merged.len());
    }
}

/// Events whose totals are printed in full and under 1,000 waits: every merged count is the one
/// whole number whose share of the total rounds to the printed one (computed here by hand).
#[test]
fn awr_html_detail_counts_by_hand() {
    let r = read(real(HTML_11203)).unwrap();
    let run = &r.runs[0];
    let op = |e: &str| run.op(e).unwrap();
    // `enq: TX - row lock contention`, 136 waits. Main: <1ms .7, <4ms 1.5, <8ms .7, <16ms 2.9,
    // <32ms 2.2 → 1, 0, 2, 1, 4, 3; `<=1s` 8.1 (11), `>1s` 83.8 (114).
    // Detail 64 ms–2 s (14 waits): <64ms 1.5, <1/8s .7, <1/4s .7, <1/2s .7, <1s 4.4, <2s 2.2
    // → 2, 1, 1, 1, 6, 3 (14); `>=2s` 81.6.
    // Detail 4 s–2 min (105 waits): <4s 8.1, <8s 6.6, <16s 14.7, <32s 22.1, < 1m 18.4,
    // < 2m 7.4 → 11, 9, 20, 30, 25, 10 (105); `>=2m` 4.4.
    // Detail 4 min–1 h (6 waits): <4m 2.2, <8m 1.5, <1/4h .7 → 3, 2, 1 (6); `>=1h` blank.
    // 11 + 14 + 105 + 6 = 136.
    let want = [
        1, 0, 2, 1, 4, 3, // [0, 1) … [16, 32) ms
        2, 1, 1, 1, 6, 3, // [32, 64) … [1024, 2048) ms
        11, 9, 20, 30, 25, 10, // [2, 4) … [64, 128) s of 1024 ms
        3, 2, 1, 0, 0, // [2, 4) m … [1/2, 1) h
        0,
    ];
    assert_eq!(pow2_counts(op("enq: TX - row lock contention")), want);
    // `os thread startup`, 148 waits: `<=1s` 54.7 (81), `>1s` 45.3 (67). Detail 64 ms–2 s (91):
    // <1/2s 48.6 (72), <1s 6.1 (9), <2s 6.8 (10); `>=2s` 38.5. Detail 4 s–2 min (57): <4s
    // 4.1 (6), <8s 2.0 (3), <16s 2.7 (4), <32s 9.5 (14), < 1m 16.2 (24), < 2m 4.1 (6); no
    // waits of 2 min or more. 72 + 9 = 81 and 10 + 57 = 67.
    let c = pow2_counts(op("os thread startup"));
    assert_eq!(&c[..9], &[0; 9]);
    assert_eq!(&c[9..18], &[72, 9, 10, 6, 3, 4, 14, 24, 6]);
    assert_eq!(c[18..].iter().sum::<u64>(), 0);
    // The 11.2.0.4 report: `Wait for Table Lock`, 1 wait in `<=1s`, the Detail's `<1s`:
    // [512, 1024) ms.
    let r = read(real(HTML_11204)).unwrap();
    let run = &r.runs[0];
    let o = run.op("Wait for Table Lock").unwrap();
    let c = pow2_counts(o);
    assert_eq!(c[10], 1, "{c:?}");
    assert_eq!(c.iter().sum::<u64>(), 1);
}

/// `Streams AQ: qmn coordinator waiting for slave to start` in the 11.2.0.3 report has a row in
/// the 4 s–2 min Detail table (9 waits: `<2s` 25.0, `<8s` 75.0) but none in the 64 ms–2 s one,
/// so nothing says where its waits between 32 ms and 2 s lie: its main row is kept (12 waits,
/// `<1ms` 25.0 → 3, `>1s` 75.0 → 9, at 1024 ms) and the event is named.
#[test]
fn awr_html_detail_rows_that_cannot_be_placed_are_named_not_used() {
    let r = read(real(HTML_11203)).unwrap();
    let run = &r.runs[0];
    let ev = "Streams AQ: qmn coordinator waiting for slave to start";
    let spec = run.spec.as_ref().unwrap().to_value();
    let merged = spec["detail_merged_events"].as_array().unwrap();
    assert!(!merged.iter().any(|v| v == ev));
    assert!(
        run.warnings
            .iter()
            .any(|w| w.contains("do not fit") && w.contains(&format!("'{ev}'"))),
        "{:?}",
        run.warnings
    );
    let c = pow2_counts(run.op(ev).unwrap());
    assert_eq!(c[0], 3);
    assert_eq!(c[11], 9);
    assert_eq!(c.iter().sum::<u64>(), 12);
    // `enq: PR - contention` (64 waits) is merged: main `<=1s` 21.9 (14), `>1s` 78.1 (50);
    // 64 ms–2 s Detail (15 waits): <1/2s 7.8 (5), <1s 14.1 (9), <2s 1.6 (1), `>=2s` 76.6;
    // 4 s–2 min (48): <4s 3.1 (2), <8s 1.6 (1), <16s 4.7 (3), <32s 12.5 (8), < 1m 26.6 (17),
    // < 2m 26.6 (17); 4 min–1 h (1): <4m 1.6 (1). 5 + 9 = 14, 1 + 48 + 1 = 50.
    assert!(merged.iter().any(|v| v == "enq: PR - contention"));
    let c = pow2_counts(run.op("enq: PR - contention").unwrap());
    assert_eq!(&c[9..19], &[5, 9, 1, 2, 1, 3, 8, 17, 17, 1]);
    assert_eq!(c.iter().sum::<u64>(), 64);
}

/// `log file sync` in the Portuguese report: its total is printed rounded (`276,6K`) and its
/// main row gives `<=1s` .5 % (about 1,383 waits) and `>1s` .0; the Detail rows print 1,346
/// waits from 32 ms to 2 s (`<64ms` .2, `<1/8s` .1, `<1/4s` .1, `<1/2s` … `<2s` .0) and 71
/// from 2 s to 2 min (`<4s`, `<8s`, `<16s` .0, the rest blank). Those waits are held: [32 ms,
/// 2 s) holds 1,346, [2 s, 16 s) 71, nothing from 16 s on, and [1, 2) s at least one.
#[test]
fn awr_html_detail_waits_are_held_where_the_main_total_is_rounded() {
    let r = read(real(HTML_11203_PT)).unwrap();
    let run = &r.runs[0];
    let ev = "log file sync";
    let spec = run.spec.as_ref().unwrap().to_value();
    let merged = spec["detail_merged_events"].as_array().unwrap();
    assert!(merged.iter().any(|v| v == ev), "{:?}", run.warnings);
    assert!(
        !run.warnings.iter().any(|w| w.contains(&format!("'{ev}'"))
            || (w.contains("could not be held") && w.contains(ev))),
        "{:?}",
        run.warnings
    );
    // The printed figures, read here from the file.
    let tables = html_tables(&std::fs::read_to_string(real(HTML_11203_PT)).unwrap());
    let table = |t: &str| htable(&tables.iter().find(|x| x.0 == t).unwrap().1);
    let row = |t: &HTable| t.rows.iter().find(|r| r.0 == ev).unwrap().clone();
    let main = row(&table("Wait Event Histogram"));
    let d64 = row(&table("Wait Event Histogram Detail (64 msec to 2 sec)"));
    let d4 = row(&table("Wait Event Histogram Detail (4 sec to 2 min)"));
    assert_eq!(
        (main.1.as_str(), d64.1.as_str(), d4.1.as_str()),
        ("276,6K", "1346", "71")
    );
    let c = pow2_counts(run.op(ev).unwrap());
    assert_eq!(c.iter().sum::<u64>(), 276_600);
    assert_eq!(waits_in(&c, 32.0, 2048.0), 1346);
    assert_eq!(waits_in(&c, 2048.0, 16384.0), 71);
    assert_eq!(waits_in(&c, 16384.0, f64::INFINITY), 0);
    assert!(waits_in(&c, 1024.0, 2048.0) >= 1);
    // The main row's columns below 32 ms keep their shares of the rounded total.
    let t = table("Wait Event Histogram");
    for (&(lo, hi), p) in t.edges.iter().zip(&main.2).take(6) {
        let n = waits_in(&c, lo, hi);
        assert!(
            share_fits(n, 276_600, false, *p),
            "[{lo}, {hi}) ms: {n}, {p:?}"
        );
    }
}

fn cut_file(name: &str, keep: impl Fn(usize, &str) -> bool) -> tempfile::TempPath {
    let text = std::fs::read_to_string(real(name)).unwrap();
    let part: String = text
        .split_inclusive('\n')
        .enumerate()
        .filter(|(i, l)| keep(i + 1, l))
        .map(|(_, l)| l)
        .collect();
    let f = tempfile::Builder::new().suffix(".html").tempfile().unwrap();
    std::fs::write(f.path(), part).unwrap();
    f.into_temp_path()
}

#[test]
fn truncated_awr_html_reports_are_refused() {
    // Cut inside the Wait Event Histogram table (lines 634 to 1015 of the fixture).
    let e = read(cut_file(HTML_11203, |i, _| i <= 700).to_path_buf()).unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("truncated") && msg.contains("Wait Event Histogram"),
        "{msg}"
    );
    // Cut after every section read, before the closing `</body></html>` (the last line).
    let e = read(cut_file(HTML_11203, |i, _| i <= 1313).to_path_buf()).unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("</html>") && msg.contains("truncated"),
        "{msg}"
    );
    // The CLI: a non-zero exit with the reason.
    let cut = cut_file(HTML_11204, |i, _| i <= 600);
    ingest_refused("awr", &cut, "truncated");
    // A wrong --format on the HTML report hints at awr.
    ingest_refused("biolatency", &real(HTML_11204), "--format awr");
}

/// Without its Detail sections the same report reads as before: the main table's buckets,
/// `>1s` at 1024 ms.
#[test]
fn awr_html_without_detail_sections_keeps_the_main_buckets() {
    let text = std::fs::read_to_string(real(HTML_11203)).unwrap();
    let start = text.find("<a class=\"awr\" name=\"7410\"></a>").unwrap();
    let end = text.rfind("</table><p />").unwrap() + "</table><p />".len();
    let cut = format!("{}{}", &text[..start], &text[end..]);
    assert!(!cut.contains("Histogram Detail (64 msec to 2 sec)</h3>"));
    let f = tempfile::Builder::new().suffix(".html").tempfile().unwrap();
    std::fs::write(f.path(), cut).unwrap();
    let r = read(f.path().to_path_buf()).unwrap();
    let run = &r.runs[0];
    let spec = run.spec.as_ref().unwrap().to_value();
    assert_eq!(spec["detail_merged_events"].as_array().unwrap().len(), 0);
    assert_eq!(run.ops.len(), 190);
    let o = run.op("enq: TX - row lock contention").unwrap();
    let c = pow2_counts(o);
    // 11 below 32 ms, `<=1s` 11 spread over [32, 1024) ms, `>1s` 114 at 1024 ms.
    assert_eq!(c[..6].iter().sum::<u64>(), 11);
    assert_eq!(c[6..11].iter().sum::<u64>(), 11);
    assert_eq!(c[11], 114);
    assert_eq!(c[12..].iter().sum::<u64>(), 0);
}

// ---- Oracle 19c: the main histogram in microseconds and its `(up to …)` sections ----

const HTML_19C: &str = "awr_19c_p60sdb2_47_48.html";
const TEXT_19C: &str = "awr_19c_p60sdb2_47_48.txt";
const UP_TO: [&str; 5] = [
    "Wait Event Histogram (up to 64 us)",
    "Wait Event Histogram (up to 32 ms)",
    "Wait Event Histogram (up to 2 sec)",
    "Wait Event Histogram (up to 2 min)",
    "Wait Event Histogram (up to 1 hr)",
];

/// Waits of an op in [lo, hi) ms, each recorded value taken at the middle of its histogram
/// bucket (the columns' edges, 8 us … 512 us, 1 ms … 1 h, are not all powers of two in ns).
fn waits_between(op: &iolens::results::OpResult, lo: f64, hi: f64) -> u64 {
    let h = op.hist.decode().unwrap();
    h.iter_recorded()
        .filter(|v| {
            let ms = h.median_equivalent(v.value_iterated_to()) as f64 / 1e6;
            ms >= lo && ms < hi
        })
        .map(|v| v.count_at_value())
        .sum()
}

/// The 19c HTML report (12.2 on): its main table is in microseconds (`<8us` … `<512us`,
/// `>=512us`), split finer below 64 us by `(up to 64 us)` (`<1us` … `<64us`, `>=64us`; its
/// waits counted from 1 us) and continued by `(up to 32 ms)` (`<512us` all below, `<1ms` …
/// `<32ms`, `>=32ms`), `(up to 2 sec)`, `(up to 2 min)` and `(up to 1 hr)` (no data): every
/// event's total, every main and `(up to …)` column's share and every printed waits count of
/// those tables against the HTML read here.
#[test]
fn awr_19c_html_report_merges_its_up_to_sections_into_each_events_distribution() {
    let r = read(real(HTML_19C)).unwrap();
    let run = &r.runs[0];
    // Begin Snap 20-Feb-20 21:32:34, End Snap 21:45:07: 753 s (Elapsed 12.56 min).
    assert_eq!(run.name, "AWR snaps 47-48");
    assert_eq!(run.started, "2020-02-20T21:32:34.000Z");
    assert_eq!(run.duration_s, 753.0);
    let tables = html_tables(&std::fs::read_to_string(real(HTML_19C)).unwrap());
    let main = htable(
        &tables
            .iter()
            .find(|x| x.0 == "Wait Event Histogram")
            .unwrap()
            .1,
    );
    assert_eq!(main.edges[0], (0.0, 0.008));
    assert_eq!(main.edges[7], (0.512, f64::INFINITY));
    let details: Vec<HTable> = UP_TO
        .iter()
        .map(|t| &tables.iter().find(|x| x.0 == *t).unwrap().1)
        .filter(|rows| !rows.is_empty())
        .map(|rows| htable(rows))
        .collect();
    assert_eq!(details.len(), 4, "(up to 1 hr) has no data");
    assert_eq!(main.rows.len(), 167);
    assert_eq!(run.ops.len(), 167);
    let spec = run.spec.as_ref().unwrap().to_value();
    let merged: Vec<&str> = spec["detail_merged_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let (mut checked_detail, mut checked_waits) = (0, 0);
    for (event, printed, shares) in &main.rows {
        let op = run.op(event).unwrap();
        let (total, exact) = html_count(printed);
        assert_eq!(op.count, total, "{event}");
        for (&(lo, hi), p) in main.edges.iter().zip(shares) {
            let n = waits_between(op, lo, hi);
            assert!(
                share_fits(n, total, exact, *p),
                "{event} [{lo}, {hi}) ms: {n} of {total}, printed {p:?} %"
            );
        }
        if !merged.contains(&event.as_str()) {
            // Not merged: `>=512us` recorded at 512 us.
            assert_eq!(waits_between(op, 1.0, f64::INFINITY), 0, "{event}");
            continue;
        }
        for d in &details {
            let Some((_, w, dshares)) = d.rows.iter().find(|r| &r.0 == event) else {
                continue;
            };
            for (&(lo, hi), p) in d.edges.iter().zip(dshares).skip(1) {
                if hi.is_infinite() {
                    continue;
                }
                let n = waits_between(op, lo, hi);
                assert!(
                    share_fits(n, total, exact, *p),
                    "{event} [{lo}, {hi}) ms: {n} of {total}, printed {p:?} %"
                );
            }
            let (w, w_exact) = html_count(w);
            let (lo, hi) = (d.edges[0].1, d.edges[d.edges.len() - 2].1);
            let held = !run
                .warnings
                .iter()
                .any(|x| x.contains("could not be held") && x.contains(event.as_str()));
            if w_exact && held {
                assert_eq!(waits_between(op, lo, hi), w, "{event}: [{lo}, {hi}) ms");
                checked_waits += 1;
            }
            checked_detail += 1;
        }
    }
    eprintln!(
        "{} merged, {checked_detail} (up to …) rows checked, {checked_waits} with their waits \
         held; warnings {:#?}",
        merged.len(),
        run.warnings
    );
    assert_eq!(merged.len(), 121, "{:?}", run.warnings);
    assert!(checked_waits >= 200, "{checked_waits}");
    // `db file sequential read`, 1.1M waits: main `>=512us` 100.0; (up to 32 ms) `<4ms` 10.5,
    // `<8ms` 57.0; (up to 2 sec) `<32ms` 90.0, `<64ms` 4.9, `<1/8s` 4.5, `<1/4s` .5.
    let op = run.op("db file sequential read").unwrap();
    assert_eq!(waits_between(op, 0.0, 0.512), 0);
    assert!(waits_between(op, 4.0, 8.0) > 600_000);
    assert!(waits_between(op, 32.0, 2048.0) > 100_000);
}

/// The same report as text: headings cut to their column (`<128u`, `>=512`, `<512`, `>=32m`),
/// event names cut to 25 characters. Every event reads as in the HTML form (its count, and its
/// distribution where both forms merged it), the Foreground Wait Events alike.
#[test]
fn awr_19c_text_report_reads_as_its_html_form() {
    let t = read(real(TEXT_19C)).unwrap();
    let h = read(real(HTML_19C)).unwrap();
    let (tr, hr) = (&t.runs[0], &h.runs[0]);
    assert_eq!(
        (&tr.name, &tr.started, tr.duration_s),
        (&hr.name, &hr.started, hr.duration_s)
    );
    assert_eq!(tr.ops.len(), hr.ops.len());
    let merged = |r: &iolens::results::RunResult| -> Vec<String> {
        r.spec.as_ref().unwrap().to_value()["detail_merged_events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let (tm, hm) = (merged(tr), merged(hr));
    let (mut same_count, mut same_hist) = (0, 0);
    for op in &tr.ops {
        let like: Vec<_> = hr.ops.iter().filter(|o| o.op.starts_with(&op.op)).collect();
        if like.len() != 1 {
            continue; // a name cut to the same 25 characters as another
        }
        let ho = like[0];
        assert_eq!(op.count, ho.count, "{}", op.op);
        same_count += 1;
        if tm.contains(&op.op) && hm.contains(&ho.op) {
            let a: Vec<(u64, u64)> = op
                .hist
                .decode()
                .unwrap()
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect();
            let b: Vec<(u64, u64)> = ho
                .hist
                .decode()
                .unwrap()
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect();
            assert_eq!(a, b, "{}", op.op);
            same_hist += 1;
        }
    }
    eprintln!("{same_count} events' counts, {same_hist} distributions compared");
    assert!(
        same_count >= 160 && same_hist >= 95,
        "{same_count} {same_hist}"
    );
    let fg = |r: &iolens::results::RunResult| {
        r.spec.as_ref().unwrap().to_value()["foreground_wait_events"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(fg(tr), fg(hr));
    // The text report's own figures: `db file sequential read  1,171,285  16,835  14.37ms`.
    let fgv = tr.spec.as_ref().unwrap().to_value()["foreground_wait_events"].clone();
    let e = fgv
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "db file sequential read")
        .unwrap()
        .clone();
    assert_eq!(e["waits"], 1_171_285);
    assert!((e["avg_wait_ms"].as_f64().unwrap() - 14.37).abs() < 1e-9);
}

const RAC_TEXT: &str = "awr_rac_19c_p60sdb_47_48.txt";
const RAC_HTML: &str = "awr_rac_19c_p60sdb_47_48.html";

/// A share cell of the AWR RAC report: `32.5`, blank, or `0.0(2)` ("When % of Total Waits is
/// 0.0 the count is displayed in parenthesis"): (share, count printed beside it).
fn rac_share(c: &str) -> (Option<f64>, Option<u64>) {
    if c.is_empty() {
        return (None, None);
    }
    match c.split_once('(') {
        Some((p, n)) => (
            Some(p.parse().unwrap()),
            Some(n.trim_end_matches(')').parse().unwrap()),
        ),
        None => (Some(c.parse().unwrap()), None),
    }
}

/// The AWR RAC (global) report of a 2-instance 19c cluster (awrgrpt.sql, HTML): its one `Wait
/// Event Histogram (Global)` table (`<1us` … `<1s`, `>=1s`, the cluster's waits) read as one op
/// per event; the window from its `Database Instances Included In Report` (Begin Snap Time
/// `20-Feb-20 21:32`, to the minute) and its `Database Summary` (snaps 47-48, Elapsed time
/// 12.56 min). Every event's total and every column's share against the HTML (read here
/// independently), the 39 counts printed beside a 0.0 % share (`0.0(119)`) exactly.
#[test]
fn awr_rac_global_html_report_reads_the_clusters_histogram() {
    let r = read(real(RAC_HTML)).unwrap();
    assert_eq!(r.runs.len(), 1);
    let run = &r.runs[0];
    assert_eq!(run.name, "AWR RAC (global) snaps 47-48");
    assert_eq!(run.started, "2020-02-20T21:32:00.000Z");
    assert!(
        (run.duration_s - 12.56 * 60.0).abs() < 1e-6,
        "{}",
        run.duration_s
    );
    let spec = run.spec.as_ref().unwrap().to_value();
    assert_eq!(spec["report"], "AWR RAC (global)");
    assert_eq!(spec["instances"], serde_json::json!(["p60sdb1", "p60sdb2"]));
    assert!(
        run.warnings.iter().any(|w| w.contains("the cluster's")
            && w.contains("2 instance(s)")
            && w.contains("to the minute")),
        "{:#?}",
        run.warnings
    );
    let tables = html_tables(&std::fs::read_to_string(real(RAC_HTML)).unwrap());
    let rows = &tables
        .iter()
        .find(|x| x.0 == "Wait Event Histogram (Global)")
        .unwrap()
        .1;
    let head = rows.iter().find(|r| r[0] == "Event").unwrap();
    let edges = heading_edges(head);
    assert_eq!(edges.len(), 22);
    assert_eq!(edges[0], (0.0, 0.001));
    assert_eq!(edges[21], (1024.0, f64::INFINITY));
    let data: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r.len() == head.len() && r[0] != "Event")
        .collect();
    assert_eq!(data.len(), 142);
    assert_eq!(run.ops.len(), 142);
    let mut fixed = 0;
    for row in &data {
        let event = &row[0];
        let op = run.op(event).unwrap();
        let (total, exact) = html_count(&row[1]);
        assert_eq!(op.count, total, "{event}");
        for (&(lo, hi), cell) in edges.iter().zip(&row[2..]) {
            let n = waits_between(op, lo, hi);
            match rac_share(cell) {
                (_, Some(printed)) => {
                    assert_eq!(n, printed, "{event} [{lo}, {hi}) ms");
                    fixed += 1;
                }
                (p, None) => assert!(
                    share_fits(n, total, exact, p),
                    "{event} [{lo}, {hi}) ms: {n} of {total}, printed {p:?} %"
                ),
            }
        }
    }
    assert_eq!(fixed, 39);
    // By hand: `DFS lock handle  170`: 2.4 % in `<256us`, 54.7 `<512us`, 22.9 `<1ms`, 11.8
    // `<2ms`, 5.9 `<4ms`, 0.6 `<128ms`, 1.2 `<512ms`, 0.6 `<1s`: of 170 waits 4.08, 92.99,
    // 38.93, 20.06, 10.03, 1.02, 2.04, 1.02, rounded 4, 93, 39, 20, 10, 1, 2, 1 (sum 170).
    let op = run.op("DFS lock handle").unwrap();
    let by_hand = [
        ((0.128, 0.256), 4),
        ((0.256, 0.512), 93),
        ((0.512, 1.0), 39),
        ((1.0, 2.0), 20),
        ((2.0, 4.0), 10),
        ((4.0, 64.0), 0),
        ((64.0, 128.0), 1),
        ((128.0, 256.0), 0),
        ((256.0, 512.0), 2),
        ((512.0, 1024.0), 1),
    ];
    for ((lo, hi), n) in by_hand {
        assert_eq!(
            waits_between(op, lo, hi),
            n,
            "DFS lock handle [{lo}, {hi}) ms"
        );
    }
    // `db file sequential read  2.3M`: `0.0(119)` in `<2ms`, then 31.3 … 0.3 % in `<4ms` …
    // `<256ms`, `0.0(1)` in `<512ms`, nothing below 1 ms nor from 512 ms on.
    let op = run.op("db file sequential read").unwrap();
    assert_eq!(op.count, 2_300_000);
    assert_eq!(waits_between(op, 0.0, 1.0), 0);
    assert_eq!(waits_between(op, 1.0, 2.0), 119);
    assert_eq!(waits_between(op, 256.0, 512.0), 1);
    assert_eq!(waits_between(op, 512.0, f64::INFINITY), 0);
}

/// The same report as text (`WORKLOAD REPOSITORY REPORT (RAC)`, headings and names cut to their
/// columns): read as its HTML form, every event's count and distribution alike; its `Foreground
/// Wait Events (Global)` (other columns than a single instance's) is not read.
#[test]
fn awr_rac_global_text_report_reads_as_its_html_form() {
    let t = read(real(RAC_TEXT)).unwrap();
    let h = read(real(RAC_HTML)).unwrap();
    let (tr, hr) = (&t.runs[0], &h.runs[0]);
    assert_eq!(
        (&tr.name, &tr.started, tr.duration_s),
        (&hr.name, &hr.started, hr.duration_s)
    );
    assert_eq!(tr.ops.len(), 142);
    let mut same = 0;
    for op in &tr.ops {
        let like: Vec<_> = hr.ops.iter().filter(|o| o.op.starts_with(&op.op)).collect();
        if like.len() != 1 {
            continue; // a name cut to the same 25 characters as another
        }
        let ho = like[0];
        assert_eq!(op.count, ho.count, "{}", op.op);
        let hist = |o: &iolens::results::OpResult| -> Vec<(u64, u64)> {
            o.hist
                .decode()
                .unwrap()
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect()
        };
        assert_eq!(hist(op), hist(ho), "{}", op.op);
        same += 1;
    }
    assert!(same >= 135, "{same}");
    let spec = tr.spec.as_ref().unwrap().to_value();
    assert_eq!(spec["instances"], serde_json::json!(["p60sdb1", "p60sdb2"]));
    assert_eq!(spec["foreground_wait_events"], serde_json::json!([]));
}

/// A RAC report whose instances cannot be read (the rows of `Database Instances Included In
/// Report`, the lines naming the hosts, cut away), or without its histogram, is refused saying
/// what it is and what to give instead (non-zero exit); an Elapsed time that cannot be the
/// window's gives way to the instances' snap times.
#[test]
fn awr_rac_report_without_its_instances_is_refused_plainly() {
    for name in [RAC_TEXT, RAC_HTML] {
        let cut = cut_file(name, |_, l| !l.contains("mcracpoc"));
        let e = format!("{:#}", read(cut.to_path_buf()).unwrap_err());
        assert!(
            e.contains("AWR RAC (global) report (awrgrpt.sql)") && e.contains("awrrpti.sql"),
            "{name}: {e}"
        );
        ingest_refused("awr", &cut, "awrrpti.sql");
    }
    // Cut before its Wait Event Histogram (Global) (the text report's line 561).
    let cut = cut_file(RAC_TEXT, |i, _| i < 561);
    let e = format!("{:#}", read(cut.to_path_buf()).unwrap_err());
    assert!(
        e.contains("no readable Wait Event Histogram (Global)") && e.contains("awrrpti.sql"),
        "{e}"
    );
    // An Elapsed time that cannot be the window's (the instances' snap times span 13 min, to
    // the minute): the snap times are used, and said.
    let text = std::fs::read_to_string(real(RAC_TEXT)).unwrap();
    let bad = text.replacen("4,724.52        12.56", "4,724.52       912.56", 1);
    assert_ne!(bad, text);
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), &bad).unwrap();
    let r = read(f.path().to_path_buf()).unwrap();
    assert_eq!(r.runs[0].duration_s, 13.0 * 60.0);
    assert!(
        r.runs[0]
            .warnings
            .iter()
            .any(|w| w.contains("54754 s") && w.contains("the snap times are used")),
        "{:#?}",
        r.runs[0].warnings
    );
}

/// Another RAC text report of that cluster, where the column cuts two counts printed beside a
/// 0.0 % share: `db file sequential read  21.7M` … `0.0(2066 0.0(1009 0.0(214) 0.0(273)` in
/// `<32ms` … `<256ms`. The same report's HTML form (awr_rac.html.gz beside it, origin in
/// tests/fixtures/README.md) prints them in full: `0.0(2066)`, `0.0(1009)`. A share of 0.0 % is
/// under 0.05 % of at most 21,750,000 waits, under 10,875: 2066 cannot be 20,660 or more, so it
/// is the count; 1009 could be 10,090 to 10,099, so it is a lower bound, and said.
#[test]
fn awr_rac_text_counts_cut_by_their_column_are_read_as_printed_and_said() {
    let r = read(real("awr_rac_19c_p30sdb_47_48.txt")).unwrap();
    let run = &r.runs[0];
    assert_eq!(run.name, "AWR RAC (global) snaps 47-48");
    assert_eq!(run.started, "2020-02-17T09:26:00.000Z");
    assert!(
        (run.duration_s - 6.05 * 60.0).abs() < 1e-6,
        "{}",
        run.duration_s
    );
    assert_eq!(run.ops.len(), 132);
    let op = run.op("db file sequential read").unwrap();
    assert_eq!(op.count, 21_700_000);
    assert_eq!(waits_between(op, 16.0, 32.0), 2066);
    assert_eq!(waits_between(op, 32.0, 64.0), 1009);
    assert_eq!(waits_between(op, 64.0, 128.0), 214);
    assert_eq!(waits_between(op, 128.0, 256.0), 273);
    assert_eq!(waits_between(op, 256.0, f64::INFINITY), 0);
    let cut: Vec<&String> = run
        .warnings
        .iter()
        .filter(|w| w.contains("cut by the column"))
        .collect();
    assert_eq!(cut.len(), 1, "{:#?}", run.warnings);
    assert!(
        cut[0].starts_with("1 row(s)") && cut[0].contains("'db file sequential read'"),
        "{}",
        cut[0]
    );
}
