//! Writing a results document: the results' side of the one writer, [`crate::output`] (which
//! holds the rules: regular file or new path only, never an input or target, random exclusive
//! temp file with its space reserved before measuring, fsync, rename; measured results kept and
//! said when they cannot be placed).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

use anyhow::Result;

use super::{Interval, Results};
use crate::output::{Holds, Output, Plan, RESULTS_RESERVE};

/// Write `res` to `out`, streamed (a day of 1 s intervals is a few hundred MB of JSON).
pub fn write_results(res: &Results, out: Output) -> Result<()> {
    out.write(&mut |w| write_document(w, res, SPLICE_FROM))
}

/// Documents with at least this many intervals (in their runs' ops) have them written on
/// helper threads ([`Splice`]); smaller ones are written on this thread alone.
const SPLICE_FROM: usize = 10_000;

/// `res` as pretty JSON, then a line break, to `w`: the intervals of its runs' ops rendered on
/// helper threads when it holds at least `splice_from` of them.
fn write_document(w: &mut dyn Write, res: &Results, splice_from: usize) -> std::io::Result<()> {
    // The serializer writes a few bytes at a time: buffered here, its writes are copies
    // rather than calls through `dyn Write` (a twentieth of the time of writing a year of
    // hourly AWR snapshots: bench/awr-year.sh).
    let mut w = std::io::BufWriter::with_capacity(256 << 10, w);
    let total: usize = ops_of(res).map(|o| o.len()).sum();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if total < splice_from || total == 0 {
        pretty(&mut w, res).map_err(std::io::Error::from)?;
    } else {
        let splice = Splice::plan(res);
        std::thread::scope(|s| -> std::io::Result<()> {
            let shared = splice.shared.clone();
            let mut workers = Vec::new();
            for i in 0..threads {
                let splice = &splice;
                let worker = std::thread::Builder::new()
                    .name(format!("iolens-write-{i}"))
                    .spawn_scoped(s, move || splice.render());
                match worker {
                    Ok(h) => workers.push(h),
                    Err(_) => break,
                }
            }
            if workers.is_empty() {
                return pretty(&mut w, res).map_err(std::io::Error::from);
            }
            let written = {
                let _splicing = Splicing::start(splice.index(), shared);
                pretty(&mut w, res).map_err(std::io::Error::from)
            };
            for h in workers {
                h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            }
            written
        })?;
    }
    w.write_all(b"\n")?;
    w.flush()
}

/// The interval lists of `res`'s runs' ops, in the order they are written.
fn ops_of(res: &Results) -> impl Iterator<Item = &Vec<Interval>> {
    res.runs
        .iter()
        .flat_map(|r| r.ops.iter().map(|o| &o.intervals))
}

/// The depth of a run's op's interval list in a results document (the document, `runs`, the
/// run, `ops`, the op).
const OP_INTERVALS_DEPTH: usize = 5;
/// Intervals rendered as one piece.
const PIECE: usize = 2048;
/// Pieces rendered ahead of the one being written (bounds memory: a piece of AWR intervals is
/// about 0.6 MB).
const AHEAD: usize = 16;

/// The interval lists of a document's runs' ops (which are most of a long run's or a long
/// history's document) rendered in pieces on helper threads, in the order they are written,
/// while this thread writes the rest and puts each list's text in its place: the writer's
/// [`Pretty`] formatter, asked for an empty array in place of a list that [`intervals`] finds
/// rendered, writes the rendered text instead. Each piece is rendered by the same formatter at
/// the depth the list has in the document, so the text is the same, byte for byte, as when
/// one thread writes it all.
struct Splice<'a> {
    /// Per piece: its list, its first interval, and its end.
    pieces: Vec<(&'a [Interval], usize, usize)>,
    /// Per list (by its address and length): its pieces.
    lists: Vec<((usize, usize), std::ops::Range<usize>)>,
    shared: Arc<Shared>,
}

/// The rendered pieces, between the helpers and the writer.
struct Shared {
    state: Mutex<SpliceState>,
    /// A piece was rendered, the writer moved on, or the helpers are told to stop.
    ready: Condvar,
}

#[derive(Default)]
struct SpliceState {
    /// Per piece: its text, once rendered (taken when written).
    done: Vec<Option<Vec<u8>>>,
    /// Texts written, emptied for reuse.
    spare: Vec<Vec<u8>>,
    /// The next piece to render.
    next: usize,
    /// The piece the writer waits for or wrote last.
    writing: usize,
    stop: bool,
}

/// What the writing thread knows of a [`Splice`]: its lists, pieces and shared state.
struct SpliceIndex {
    lists: HashMap<(usize, usize), std::ops::Range<usize>>,
    shared: Arc<Shared>,
    /// The list whose empty array the formatter is about to be asked for.
    pending: Option<std::ops::Range<usize>>,
}

thread_local! {
    /// The splice of the document this thread writes, if any ([`write_document`]).
    static SPLICING: RefCell<Option<SpliceIndex>> = const { RefCell::new(None) };
}

/// This thread's [`SPLICING`] while it writes a document; when done, failed or unwinding, the
/// helpers still rendering are stopped (so that they can be joined).
struct Splicing(Arc<Shared>);

impl Splicing {
    fn start(index: SpliceIndex, shared: Arc<Shared>) -> Splicing {
        SPLICING.with(|x| *x.borrow_mut() = Some(index));
        Splicing(shared)
    }
}

impl Drop for Splicing {
    fn drop(&mut self) {
        SPLICING.with(|x| *x.borrow_mut() = None);
        self.0.state.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        self.0.ready.notify_all();
    }
}

/// The list's key: its address and length (only lists with intervals are rendered ahead, and
/// those live apart).
fn key(list: &[Interval]) -> (usize, usize) {
    (list.as_ptr() as usize, list.len())
}

impl<'a> Splice<'a> {
    fn plan(res: &'a Results) -> Splice<'a> {
        let (mut pieces, mut lists) = (Vec::new(), Vec::new());
        for list in ops_of(res).filter(|l| !l.is_empty()) {
            let first = pieces.len();
            for a in (0..list.len()).step_by(PIECE) {
                pieces.push((list.as_slice(), a, (a + PIECE).min(list.len())));
            }
            lists.push((key(list), first..pieces.len()));
        }
        let state = SpliceState {
            done: (0..pieces.len()).map(|_| None).collect(),
            ..Default::default()
        };
        Splice {
            pieces,
            lists,
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                ready: Condvar::new(),
            }),
        }
    }

    fn index(&self) -> SpliceIndex {
        SpliceIndex {
            lists: self.lists.iter().cloned().collect(),
            shared: self.shared.clone(),
            pending: None,
        }
    }

    /// A helper: render the next piece not taken, until all are or it is told to stop.
    fn render(&self) {
        let sh = &self.shared;
        loop {
            let (j, text) = {
                let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
                while !st.stop && st.next < self.pieces.len() && st.next >= st.writing + AHEAD {
                    st = sh.ready.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                if st.stop || st.next >= self.pieces.len() {
                    return;
                }
                st.next += 1;
                (st.next - 1, st.spare.pop())
            };
            let (list, a, b) = self.pieces[j];
            let mut text = text.unwrap_or_default();
            render_piece(&mut text, &list[a..b], a == 0, OP_INTERVALS_DEPTH);
            sh.state.lock().unwrap_or_else(|e| e.into_inner()).done[j] = Some(text);
            sh.ready.notify_all();
        }
    }
}

/// The elements `ivs` of a list at `depth` (its `[` written, so the elements are one deeper) as
/// [`Pretty`] writes them, each after a line break (and a comma, but for the list's first).
/// Written here rather than through serde_json's serializer (the helpers' CPU time for a year
/// of hourly AWR snapshots, `bench/awr-year.sh`, went from 0.48 to 0.29 s), with serde_json's
/// own writers of numbers and strings, so that the text is the same, byte for byte (tested).
fn render_piece(w: &mut Vec<u8>, ivs: &[Interval], first: bool, depth: usize) {
    use serde_json::ser::{CompactFormatter, Formatter};
    let element = Pretty {
        depth: depth + 1,
        has_value: false,
    };
    // A comma and a line break, then the indentation of an element's fields, and of its end.
    let Some(field) = BREAK.get(..2 + 2 * (depth + 2)) else {
        // Deeper than the indentation written at once: serde_json's serializer.
        for (i, iv) in ivs.iter().enumerate() {
            let _ = element.line(w, first && i == 0);
            let mut ser = serde_json::Serializer::with_formatter(&mut *w, element.clone_level());
            let _ = serde::Serialize::serialize(iv, &mut ser);
        }
        return;
    };
    let end = &BREAK[1..2 + 2 * (depth + 1)];
    let f64 = |w: &mut Vec<u8>, v: f64| {
        if v.is_finite() {
            let _ = CompactFormatter.write_f64(w, v);
        } else {
            w.extend_from_slice(b"null");
        }
    };
    for (i, iv) in ivs.iter().enumerate() {
        // Every field named: a field added to `Interval` must be written here too.
        let Interval {
            start_s,
            duration_s,
            count,
            bytes,
            hist,
        } = iv;
        let _ = element.line(w, first && i == 0);
        w.push(b'{');
        w.extend_from_slice(&field[1..]);
        w.extend_from_slice(b"\"start_s\": ");
        f64(w, *start_s);
        w.extend_from_slice(field);
        w.extend_from_slice(b"\"duration_s\": ");
        f64(w, *duration_s);
        w.extend_from_slice(field);
        w.extend_from_slice(b"\"count\": ");
        let _ = CompactFormatter.write_u64(w, *count);
        w.extend_from_slice(field);
        w.extend_from_slice(b"\"bytes\": ");
        let _ = CompactFormatter.write_u64(w, *bytes);
        w.extend_from_slice(field);
        w.extend_from_slice(b"\"hist\": ");
        let text = hist.as_base64();
        // serde_json escapes `"`, `\` and control characters only.
        if text.bytes().all(|c| c >= 0x20 && c != b'"' && c != b'\\') {
            w.push(b'"');
            w.extend_from_slice(text.as_bytes());
            w.push(b'"');
        } else {
            let _ = serde_json::to_writer(&mut *w, text);
        }
        w.extend_from_slice(end);
        w.push(b'}');
    }
}

impl SpliceIndex {
    /// A piece's text written: emptied, for a helper to reuse.
    fn recycle(&self, mut text: Vec<u8>) {
        text.clear();
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.spare.push(text);
    }

    /// Piece `j`, waiting for a helper to render it.
    fn take(&self, j: usize) -> Option<Vec<u8>> {
        let sh = &self.shared;
        let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
        st.writing = st.writing.max(j);
        sh.ready.notify_all();
        loop {
            if let Some(text) = st.done[j].take() {
                return Some(text);
            }
            if st.stop {
                return None;
            }
            st = sh.ready.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// How `OpResult::intervals` is serialized: as the list it is, but for a list of a document
/// being written whose text was rendered ahead ([`Splice`]), for which an empty array is asked
/// and the writer's formatter writes that text in its place.
pub(crate) fn intervals<S: serde::Serializer>(
    list: &Vec<Interval>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    let spliced = !list.is_empty()
        && SPLICING.with(|x| {
            let mut x = x.borrow_mut();
            let Some(ix) = x.as_mut() else {
                return false;
            };
            ix.pending = ix.lists.get(&key(list)).cloned();
            ix.pending.is_some()
        });
    if spliced {
        use serde::ser::SerializeSeq;
        s.serialize_seq(Some(0))?.end()
    } else {
        serde::Serialize::serialize(list, s)
    }
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
    /// A formatter at this one's depth, nothing written in it yet.
    fn clone_level(&self) -> Pretty {
        Pretty {
            depth: self.depth,
            has_value: false,
        }
    }

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
        let pending = SPLICING.with(|x| x.borrow_mut().as_mut().and_then(|ix| ix.pending.take()));
        let Some(pieces) = pending else {
            return self.open(w, b"[");
        };
        // The empty array [`intervals`] asked for: the list's rendered text instead, then
        // (below) its end.
        if self.depth != OP_INTERVALS_DEPTH {
            return Err(std::io::Error::other(
                "intervals rendered at another depth than they are written",
            ));
        }
        w.write_all(b"[")?;
        for j in pieces {
            let text = SPLICING.with(|x| x.borrow().as_ref().and_then(|ix| ix.take(j)));
            let Some(text) = text else {
                return Err(std::io::Error::other("the intervals' writers stopped"));
            };
            w.write_all(&text)?;
            SPLICING.with(|x| x.borrow().as_ref().map(|ix| ix.recycle(text)));
        }
        self.depth += 1;
        self.has_value = true;
        Ok(())
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

    /// A document whose intervals are rendered on helper threads and spliced in is the one
    /// written on one thread, byte for byte: lists of one piece and of many (more than are
    /// rendered ahead), empty lists, runs without ops, strings that need escaping, a NaN, and
    /// the per-target lists (deeper in the document) that are not rendered ahead.
    #[test]
    fn spliced_intervals_are_the_ones_written_on_one_thread() {
        let hist = |i: usize| -> super::super::Hist {
            let s = if i % 7 == 3 {
                format!("q\"\n\u{1}é{i}")
            } else {
                format!("s1:-1e6x{i},-2e6x{}", i % 13)
            };
            serde_json::from_value(serde_json::json!(s)).unwrap()
        };
        let ivs = |n: usize| -> Vec<Interval> {
            (0..n)
                .map(|i| Interval {
                    start_s: i as f64 * 0.1,
                    duration_s: if i == 5 { f64::NAN } else { 3600.0 },
                    count: i as u64 * 3,
                    bytes: u64::MAX - i as u64,
                    hist: hist(i),
                })
                .collect()
        };
        let op = |name: &str, n: usize| super::super::OpResult {
            op: name.to_string(),
            count: n as u64,
            bytes: 0,
            errors: 0,
            hist: hist(n),
            summary: Default::default(),
            intervals: ivs(n),
            bucket_convention: super::super::BucketConvention::UpperBound,
            bucket_edges_ns: vec![1, 2],
        };
        let mut res = Results::new(super::super::Kind::Ingest, vec!["a\"b".into()]);
        res.runs.push(super::super::RunResult {
            name: "one".into(),
            ops: vec![op("a", 2 * PIECE + 5), op("empty", 0), op("c", 1)],
            targets: vec![super::super::TargetRun {
                ops: vec![op("deeper", 3)],
                ..Default::default()
            }],
            ..Default::default()
        });
        res.runs.push(Default::default());
        res.runs.push(super::super::RunResult {
            name: "many".into(),
            ops: (0..2 * AHEAD)
                .map(|i| op(&format!("op{i}"), PIECE + 1))
                .collect(),
            ..Default::default()
        });
        let one_thread = serde_json::to_string_pretty(&res).unwrap() + "\n";
        for splice_from in [0, usize::MAX] {
            let mut ours = Vec::new();
            write_document(&mut ours, &res, splice_from).unwrap();
            assert!(
                String::from_utf8(ours).unwrap() == one_thread,
                "splice_from {splice_from}"
            );
        }
    }

    /// Every results document among the fixtures (tests/fixtures/results, files other tools'
    /// inputs made; tests/fixtures/trace_golden, written by the trace tests) is written the same,
    /// byte for byte, as serde_json's pretty writer writes it: with its runs' intervals rendered
    /// on helper threads and spliced in (the threshold lowered to one interval), and on one
    /// thread.
    #[test]
    fn every_results_fixture_is_written_alike_spliced_or_not() {
        use std::io::Read as _;
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut files = Vec::new();
        for sub in ["results", "trace_golden"] {
            for e in std::fs::read_dir(fixtures.join(sub)).unwrap() {
                let p = e.unwrap().path();
                let name = p.to_string_lossy().to_string();
                if name.ends_with(".json") || name.ends_with(".json.gz") {
                    files.push(p);
                }
            }
        }
        files.sort();
        let mut spliced = 0;
        for p in &files {
            let mut text = String::new();
            let f = std::fs::File::open(p).unwrap();
            if p.extension().is_some_and(|x| x == "gz") {
                flate2::read::GzDecoder::new(f).read_to_string(&mut text)
            } else {
                std::io::BufReader::new(f).read_to_string(&mut text)
            }
            .unwrap();
            let res =
                Results::from_json(&text).unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
            let one_thread = serde_json::to_string_pretty(&res).unwrap() + "\n";
            let intervals: usize = ops_of(&res).map(|o| o.len()).sum();
            for splice_from in [1, usize::MAX] {
                let mut ours = Vec::new();
                write_document(&mut ours, &res, splice_from).unwrap();
                assert!(
                    ours == one_thread.as_bytes(),
                    "{}: splice_from {splice_from}",
                    p.display()
                );
            }
            spliced += usize::from(intervals > 0);
        }
        // Every fixture read, and all but the few without a run's interval spliced.
        assert!(files.len() >= 20, "{files:?}");
        assert!(spliced >= files.len() - 2, "{spliced} of {}", files.len());
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
