//! The report's sections for what readers of evidence and the database mode store besides
//! their series ([`crate::results::evidence`]): the database and its wait profile, a trace's
//! I/O by file#, obj# and block range, its slowest waits, and how every input line was used.

use super::table::{Block, Table};
use crate::results::evidence::{IoFigures, TraceIoEvent};
use crate::results::Results;
use crate::units::{fmt_ns, sig3};

/// The sections of `r`, in print order (none for documents without such data).
pub(crate) fn blocks(r: &Results) -> Vec<Block> {
    let mut out = Vec::new();
    if let Some(db) = &r.db {
        let l = &db.layout;
        let mut b = Block {
            title: format!("Database: {}", db.engine.name()),
            lines: vec![format!(
                "{} schema(s) of {} rows, one row per block (key order seed {})",
                l.schemas, l.rows, l.seed
            )],
            table: None,
        };
        if let Some(w) = &db.wait_profile {
            b.lines.push(format!(
                "wait profile: {} samples at {} Hz, {} session samples",
                w.samples,
                sig3(w.hz),
                w.session_samples
            ));
            let mut t = Table::new(&["wait event", "samples", "share"]);
            for e in &w.events {
                t.row(vec![
                    e.event.clone(),
                    e.count.to_string(),
                    format!("{:.1}%", e.share * 100.0),
                ]);
            }
            b.table = Some(t);
        }
        out.push(b);
    }
    if let Some(io) = &r.trace_io {
        for e in &io.events {
            io_blocks(e, io.block_range_blocks, &mut out);
        }
    }
    if !r.trace_slowest.is_empty() {
        let mut t = Table::new(&[
            "wait",
            "event",
            "file:line",
            "file#",
            "block",
            "obj#",
            "cursor",
            "time",
        ]);
        let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
        for w in &r.trace_slowest {
            t.row(vec![
                fmt_ns(w.ela_us as f64 * 1e3),
                w.event.clone(),
                format!("{}:{}", w.path, w.line),
                opt(w.file),
                w.block.map(|b| b.to_string()).unwrap_or_default(),
                opt(w.obj),
                w.cursor.clone(),
                w.time.clone(),
            ]);
        }
        out.push(Block {
            title: "Slowest waits".into(),
            lines: vec![],
            table: Some(t),
        });
    }
    if let Some(src) = &r.source {
        let mut t = Table::new(&["file", "lines", "used", "ignored", "unparsed"]);
        let mut lines = Vec::new();
        for f in &src.files {
            t.row(vec![
                f.path.clone(),
                f.lines.to_string(),
                f.parsed.to_string(),
                // Saturating: a results file is input too, and its counts can be anything.
                f.ignored
                    .values()
                    .fold(0u64, |a, v| a.saturating_add(*v))
                    .to_string(),
                f.unparsed.to_string(),
            ]);
            for u in &f.unparsed_first {
                lines.push(format!(
                    "{} line {}: {} ({})",
                    f.path, u.line, u.text, u.reason
                ));
            }
        }
        out.push(Block {
            title: format!("Input lines ({})", src.format),
            lines,
            table: Some(t),
        });
    }
    out
}

/// One I/O breakdown section: `first` columns (the key of each row) then the wait figures.
fn io_block<'a>(
    title: String,
    line: Option<String>,
    first: &[&str],
    rows: impl Iterator<Item = (Vec<String>, &'a IoFigures)>,
) -> Block {
    let mut header = first.to_vec();
    header.extend(["waits", "seconds", "mean", "max", "blocks"]);
    let mut t = Table::new(&header);
    for (mut cells, io) in rows {
        cells.extend([
            io.count.to_string(),
            sig3(io.seconds),
            fmt_ns(io.mean_us * 1e3),
            fmt_ns(io.max_us as f64 * 1e3),
            io.blocks.to_string(),
        ]);
        t.row(cells);
    }
    Block {
        title,
        lines: line.into_iter().collect(),
        table: Some(t),
    }
}

/// One wait event's I/O by file#, obj# and block range.
fn io_blocks(e: &TraceIoEvent, range_blocks: u64, out: &mut Vec<Block>) {
    out.push(io_block(
        format!("{}: by file", e.event),
        None,
        &["file#", "blocks touched"],
        e.files.iter().map(|f| {
            let span = match (f.min_block, f.max_block) {
                (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
                _ => String::new(),
            };
            (vec![f.file.to_string(), span], &f.io)
        }),
    ));
    if !e.objects.is_empty() {
        out.push(io_block(
            format!("{}: by object", e.event),
            Some(format!(
                "the busiest {} of {} objects",
                e.objects.len(),
                e.objects_total
            )),
            &["obj#"],
            e.objects.iter().map(|o| (vec![o.obj.to_string()], &o.io)),
        ));
    }
    if !e.block_ranges.is_empty() {
        out.push(io_block(
            format!("{}: by block range", e.event),
            Some(format!(
                "the busiest {} of {} ranges of {range_blocks} blocks",
                e.block_ranges.len(),
                e.block_ranges_total
            )),
            &["file#", "blocks"],
            e.block_ranges.iter().map(|g| {
                let span = format!("{}–{}", g.first_block, g.last_block);
                (vec![g.file.to_string(), span], &g.io)
            }),
        ));
    }
}
