//! Query results as a SQL client prints them: `psql` aligned tables (`a | b` under a
//! `---+---` rule, `(N rows)` below), `psql -A` unaligned (`a|b`), and CSV (`psql --csv`,
//! `COPY … TO STDOUT WITH CSV HEADER`, a spreadsheet's export). Text between tables (prompts,
//! echoed SQL, command tags) is skipped. `\watch` titles (`Tue Nov 25 14:00:00 2026 (every
//! 10s)`) give the time of the table below them.
//!
//! The `mysql`/`mariadb` client's tables are read too: its boxed tables (`+---+` borders,
//! `| a | b |` rows, `N rows in set (0.00 sec)` below) and its batch output (`mysql -B`, or any
//! query piped through it: tab-separated, `NULL` for NULL).
//!
//! A header is a line of at least two column names (letters, digits, `_`, `$`, starting with a
//! letter or `_`) separated by `|`, `,` or a tab; the table's rows follow until a blank line, a
//! row count, a `\watch` title or the same header again. Empty cells are NULL. A row whose cells
//! do not match the header is counted as unparsed. Memory: one table at a time.

use anyhow::{bail, Result};

use super::LineReader;

/// Most columns one table may have.
const MAX_COLUMNS: usize = 512;
/// Most rows one table may have (a snapshot of a view has tens to thousands).
const MAX_ROWS: usize = 1_000_000;

/// One table as printed.
#[derive(Debug, Clone, Default)]
pub(crate) struct TextTable {
    /// Column names, lower-case.
    pub columns: Vec<String>,
    /// Cells; `None` is NULL (an empty cell).
    pub rows: Vec<Vec<Option<String>>>,
    /// The time of a `\watch` title above the table (its local time written as UTC), ns.
    pub title_ns: Option<i64>,
    /// Line of the header.
    pub line: u64,
}

impl TextTable {
    /// Index of column `name`.
    pub(crate) fn col(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Aligned,
    Unaligned,
    Csv,
    /// Tab-separated (`mysql -B`): `NULL` is NULL.
    Tab,
}

/// A box border of the mysql client (`+------+-----+`).
fn box_rule(t: &str) -> bool {
    t.len() > 2 && t.starts_with("+-") && t.bytes().all(|c| c == b'-' || c == b'+')
}

/// The mysql client's line under a table: `3 rows in set (0.00 sec)`, `1 row in set`,
/// `Empty set (0.00 sec)`, with or without its warnings count.
fn mysql_footer(t: &str) -> bool {
    if t.starts_with("Empty set") {
        return true;
    }
    let mut w = t.split_whitespace();
    w.next().is_some_and(|n| n.parse::<u64>().is_ok())
        && matches!(w.next(), Some("row" | "rows"))
        && w.next() == Some("in")
        && w.next() == Some("set")
}

/// A line of column names: (names, style guess).
fn header_of(t: &str) -> Option<(Vec<String>, char)> {
    let sep = if t.contains('|') {
        '|'
    } else if t.contains('\t') {
        '\t'
    } else if t.contains(',') {
        ','
    } else {
        return None;
    };
    // A boxed header (`| a | b |`) has bars at both ends.
    let t = if sep == '|' {
        t.strip_prefix('|')
            .and_then(|x| x.strip_suffix('|'))
            .unwrap_or(t)
    } else {
        t
    };
    let names: Vec<String> = t
        .split(sep)
        .map(|c| c.trim().trim_matches('"').to_ascii_lowercase())
        .collect();
    let ident = |c: &str| {
        let b = c.as_bytes();
        !b.is_empty()
            && (b[0].is_ascii_alphabetic() || b[0] == b'_')
            && b.iter()
                .all(|&x| x.is_ascii_alphanumeric() || x == b'_' || x == b'$')
    };
    (names.len() >= 2 && names.len() <= MAX_COLUMNS && names.iter().all(|c| ident(c)))
        .then_some((names, sep))
}

/// `(3 rows)`, `(1 row)`, `(3 行)`: the row count psql prints under a table.
fn row_count(t: &str) -> Option<u64> {
    let inner = t.strip_prefix('(')?.strip_suffix(')')?;
    let (n, word) = inner.split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    (!word.is_empty() && !word.contains(' ')).then_some(n)
}

/// A `\watch` title: `… Tue Nov 25 14:00:00 2026 (every 10s)`; the time, ns, when readable.
fn watch_title(t: &str) -> Option<Option<i64>> {
    let i = t.rfind("(every ")?;
    if !t.ends_with("s)") {
        return None;
    }
    let head = t[..i].trim();
    let words: Vec<&str> = head.split_whitespace().collect();
    // The date is strftime's `%c` in the client's locale: try the common C and en_US forms on
    // the title's last words.
    let forms = [
        "%a %b %e %H:%M:%S %Y",
        "%a %d %b %Y %I:%M:%S %p",
        "%a %d %b %Y %H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
    ];
    for n in (2..=7).rev() {
        if words.len() < n {
            continue;
        }
        let cand = words[words.len() - n..].join(" ");
        // `… PM UTC`: a zone name after the time is dropped.
        let cands = [
            cand.clone(),
            cand.rsplit_once(' ')
                .map(|x| x.0.to_string())
                .unwrap_or_default(),
        ];
        for c in &cands {
            for f in &forms {
                if let Ok(d) = chrono::NaiveDateTime::parse_from_str(c, f) {
                    return Some(d.and_utc().timestamp_nanos_opt());
                }
            }
        }
    }
    Some(None)
}

/// Split one CSV record (RFC 4180 quotes; a quoted field may not span lines here).
pub(crate) fn csv_fields(t: &str) -> Option<Vec<Option<String>>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    cur.push('"');
                } else {
                    quoted = false;
                }
            } else {
                cur.push(c);
            }
        } else if c == '"' && cur.is_empty() {
            quoted = true;
            was_quoted = true;
        } else if c == ',' {
            out.push(if cur.is_empty() && !was_quoted {
                None
            } else {
                Some(std::mem::take(&mut cur))
            });
            cur.clear();
            was_quoted = false;
        } else {
            cur.push(c);
        }
    }
    if quoted {
        return None;
    }
    out.push(if cur.is_empty() && !was_quoted {
        None
    } else {
        Some(cur)
    });
    Some(out)
}

/// Cells of a `|`-separated row, trimmed; empty is NULL.
fn bar_fields(t: &str, aligned: bool) -> Vec<Option<String>> {
    // Boxed rows (`| a | b |`, psql's border 2 and the mysql client) have bars at both ends.
    let t = match t.trim().strip_prefix('|').and_then(|x| x.strip_suffix('|')) {
        Some(inner) if aligned => inner,
        _ => t,
    };
    t.split('|')
        .map(|c| {
            let c = if aligned { c.trim() } else { c };
            (!c.is_empty()).then(|| c.to_string())
        })
        .collect()
}

/// Read every table of the input, handing each to `each` as it ends.
pub(crate) fn read_tables(
    r: &mut LineReader,
    mut each: impl FnMut(TextTable, &mut LineReader) -> Result<()>,
) -> Result<()> {
    let mut cur: Option<(TextTable, Style, String)> = None;
    let mut pending_title: Option<i64> = None;
    let mut expect_rule = false;
    loop {
        let Some(raw) = r.next_line()? else { break };
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = String::from_utf8_lossy(raw).into_owned();
        let t = line.trim();
        let ends =
            t.is_empty() || row_count(t).is_some() || watch_title(t).is_some() || mysql_footer(t);
        if ends {
            if let Some((tb, _, _)) = cur.take() {
                if let Some(n) = row_count(t) {
                    if n != tb.rows.len() as u64 {
                        r.warnings.push(format!(
                            "the table at line {} says ({n} rows) but {} were read",
                            tb.line,
                            tb.rows.len()
                        ));
                    }
                }
                each(tb, r)?;
            }
            expect_rule = false;
            if let Some(w) = watch_title(t) {
                pending_title = w;
                if w.is_none() {
                    r.warnings.push(format!(
                        "line {}: a \\watch title whose time is not readable: the table below \
                         it has no time from it",
                        r.line_no
                    ));
                }
                r.ignored("\\watch title");
            } else if t.is_empty() {
                r.ignored("blank");
            } else {
                r.ignored("row count");
            }
            continue;
        }
        if box_rule(t) {
            if expect_rule {
                expect_rule = false;
                if let Some((_, st, _)) = &mut cur {
                    *st = Style::Aligned;
                }
            }
            r.ignored("table border");
            continue;
        }
        if expect_rule {
            expect_rule = false;
            if t.bytes().all(|c| c == b'-' || c == b'+') {
                if let Some((_, st, _)) = &mut cur {
                    *st = Style::Aligned;
                }
                r.ignored("column rule");
                continue;
            }
        }
        let same_header = cur
            .as_ref()
            .is_some_and(|c| c.2 == t || header_of(t).is_some_and(|(cols, _)| cols == c.0.columns));
        if same_header {
            // The same header again (its padding may differ): a new table (a snapshot
            // appended to the file).
            let (old, st, head) = cur.take().expect("checked");
            let title = pending_title.take();
            let line_no = r.line_no;
            let columns = old.columns.clone();
            each(old, r)?;
            cur = Some((
                TextTable {
                    columns,
                    rows: Vec::new(),
                    title_ns: title,
                    line: line_no,
                },
                st,
                head,
            ));
            expect_rule = matches!(st, Style::Aligned | Style::Unaligned);
            r.ignored("column headings");
            continue;
        }
        if let Some((tb, st, _)) = &mut cur {
            let cells = match st {
                Style::Csv => csv_fields(&line),
                Style::Tab => Some(
                    line.trim_end_matches(['\r', '\n'])
                        .split('\t')
                        .map(|c| (c != "NULL").then(|| c.to_string()))
                        .collect(),
                ),
                Style::Aligned => Some(bar_fields(&line, true)),
                Style::Unaligned => Some(bar_fields(&line, false)),
            };
            match cells {
                Some(c) if c.len() == tb.columns.len() => {
                    if tb.rows.len() >= MAX_ROWS {
                        bail!(
                            "line {}: more than {MAX_ROWS} rows in one table (begun at line {})",
                            r.line_no,
                            tb.line
                        );
                    }
                    tb.rows.push(c);
                    r.parsed();
                }
                _ => r.unparsed("row whose cells do not match the table's header"),
            }
            continue;
        }
        if let Some((cols, sep)) = header_of(t) {
            let style = match sep {
                ',' => Style::Csv,
                '\t' => Style::Tab,
                _ => Style::Unaligned,
            };
            cur = Some((
                TextTable {
                    columns: cols,
                    rows: Vec::new(),
                    title_ns: pending_title.take(),
                    line: r.line_no,
                },
                style,
                t.to_string(),
            ));
            expect_rule = sep == '|';
            r.ignored("column headings");
            continue;
        }
        r.ignored("text between tables");
    }
    if let Some((tb, _, _)) = cur.take() {
        each(tb, r)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_and_nulls() {
        assert_eq!(
            csv_fields(r#"a,,"b,c","",7"#),
            Some(vec![
                Some("a".into()),
                None,
                Some("b,c".into()),
                Some(String::new()),
                Some("7".into())
            ])
        );
        assert_eq!(csv_fields(r#""open"#), None);
    }

    #[test]
    fn row_counts_and_titles() {
        assert_eq!(row_count("(3 rows)"), Some(3));
        assert_eq!(row_count("(1 row)"), Some(1));
        assert_eq!(row_count("(3 行)"), Some(3));
        assert_eq!(row_count("(a b)"), None);
        let t = watch_title("Wed Nov 25 14:00:00 2026 (every 10s)").unwrap();
        assert_eq!(
            t,
            chrono::NaiveDate::from_ymd_opt(2026, 11, 25)
                .unwrap()
                .and_hms_opt(14, 0, 0)
                .unwrap()
                .and_utc()
                .timestamp_nanos_opt()
        );
        let t = watch_title("io  Wed 25 Nov 2026 02:00:00 PM UTC (every 1.5s)").unwrap();
        assert!(t.is_some());
        assert_eq!(watch_title("reads (every day)"), None);
    }

    #[test]
    fn headers_are_column_names() {
        assert!(header_of(" backend_type | object | context ").is_some());
        assert!(header_of("client backend,relation,normal").is_none());
        assert!(header_of("a").is_none());
        assert_eq!(
            header_of("| FILE_NAME | COUNT_READ |").unwrap().0,
            vec!["file_name", "count_read"]
        );
        assert_eq!(header_of("ts\tfile_name\tcount_read").unwrap().1, '\t');
        assert!(box_rule("+------+-----+") && !box_rule("---+---"));
        assert!(mysql_footer("3 rows in set (0.001 sec)") && mysql_footer("Empty set (0.00 sec)"));
        assert!(!mysql_footer("3 rows"));
    }
}
