//! Writing a results document: the results' side of the one writer, [`crate::output`] (which
//! holds the rules: regular file or new path only, never an input or target, random exclusive
//! temp file with its space reserved before measuring, fsync, rename; measured results kept and
//! said when they cannot be placed).

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use super::Results;
use crate::output::{Holds, Output, Plan, RESULTS_RESERVE};

/// Write `res` to `out`, streamed (a day of 1 s intervals is a few hundred MB of JSON).
pub fn write_results(res: &Results, out: Output) -> Result<()> {
    out.write(&mut |w| {
        // The serializer writes a few bytes at a time: buffered here, its writes are copies
        // rather than calls through `dyn Write` (a twentieth of the time of writing a year of
        // hourly AWR snapshots: bench/awr-year.sh).
        let mut w = std::io::BufWriter::with_capacity(256 << 10, w);
        pretty(&mut w, res).map_err(std::io::Error::from)?;
        w.write_all(b"\n")?;
        w.flush()
    })
}

/// `value` as `serde_json::to_writer_pretty` writes it, byte for byte.
fn pretty<W: Write, T: serde::Serialize + ?Sized>(w: W, value: &T) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, Pretty::default());
    value.serialize(&mut ser)
}

/// serde_json's `PrettyFormatter` (two spaces a level) with a line's break, comma and
/// indentation written at once rather than a write a level: a results document is mostly
/// short lines seven levels deep (a year of hourly AWR snapshots: 7 million of them).
#[derive(Default)]
struct Pretty {
    depth: usize,
    has_value: bool,
}

/// `,` and a line break, then the indentation of the deepest level written at once.
const BREAK: &[u8; 2 + 2 * 32] =
    b",\n                                                                ";

impl Pretty {
    /// A line break (after a comma unless `first`) and the indentation of the current level.
    fn line<W: ?Sized + Write>(&self, w: &mut W, first: bool) -> std::io::Result<()> {
        let from = usize::from(first);
        let n = 2 + 2 * self.depth;
        if n <= BREAK.len() {
            return w.write_all(&BREAK[from..n]);
        }
        w.write_all(&BREAK[from..2])?;
        for _ in 0..self.depth {
            w.write_all(b"  ")?;
        }
        Ok(())
    }

    /// An array or object opened: one level deeper, nothing in it yet.
    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> std::io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> std::io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.line(w, true)?;
        }
        w.write_all(bracket)
    }
}

impl serde_json::ser::Formatter for Pretty {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.line(w, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.line(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// Write `res` to `path` (`-` is standard output), for a command that reads nothing else.
pub fn write_results_to(res: &Results, path: &Path) -> Result<()> {
    let out = Plan::new().output("--output", path, Holds::Results, RESULTS_RESERVE)?;
    write_results(res, out)
}

/// A results file name that is free now in `dir`: `iolens-<what>-<UTC date and time>.json`,
/// with `-2`, `-3` … added when that name is taken. The caller claims it as a new path, so a
/// file that appears there in between is never replaced.
pub fn dated_name(dir: &Path, what: &str, unix_s: i64) -> std::path::PathBuf {
    let stamp = chrono::DateTime::from_timestamp(unix_s, 0)
        .map(|t| t.format("%Y-%m-%d-%H%M%SZ").to_string())
        .unwrap_or_else(|| unix_s.to_string());
    let base = format!("iolens-{what}-{stamp}");
    let mut n = 1;
    loop {
        let name = if n == 1 {
            format!("{base}.json")
        } else {
            format!("{base}-{n}.json")
        };
        let p = if dir == Path::new(".") {
            std::path::PathBuf::from(name)
        } else {
            dir.join(name)
        };
        if std::fs::symlink_metadata(&p).is_err() {
            return p;
        }
        n += 1;
    }
}

#[cfg(test)]
mod dated_tests {
    use super::*;

    /// The writer's pretty form is serde_json's, byte for byte: values of every kind, empty
    /// and full arrays and objects, and nesting past the indentation written at once.
    #[test]
    fn pretty_is_serde_jsons_pretty() {
        let mut deep = serde_json::json!({"leaf": [1, {"x": null}], "e": {}, "a": []});
        for i in 0..40 {
            deep = serde_json::json!({ format!("k{i}"): [deep, i, [], {}], "s": "q\"\n\u{1}é" });
        }
        let docs = [
            serde_json::json!(null),
            serde_json::json!([]),
            serde_json::json!({}),
            serde_json::json!([[], {}, [[]], {"a": {}}]),
            serde_json::json!({"f": 0.1, "n": -3, "b": true, "u": 18446744073709551615u64}),
            deep,
        ];
        for d in &docs {
            let mut ours = Vec::new();
            pretty(&mut ours, d).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string_pretty(d).unwrap()
            );
        }
    }

    #[test]
    fn dated_names_skip_taken_ones() {
        let d = tempfile::tempdir().unwrap();
        let p = dated_name(d.path(), "calibrate", 1_795_000_000);
        assert!(p
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("iolens-calibrate-2026-"));
        std::fs::write(&p, b"theirs").unwrap();
        let next = dated_name(d.path(), "calibrate", 1_795_000_000);
        assert_ne!(next, p);
        assert!(next.to_string_lossy().ends_with("-2.json"), "{next:?}");
    }
}
