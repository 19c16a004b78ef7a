//! Traces parse identically before and after the parser's speed work (issue 15).
//!
//! `tests/fixtures/trace_golden/*.json` hold the results documents the line-by-line parser
//! produced (before the memchr-driven rewrite) for every 10046 trace fixture: the real traces
//! of tests/fixtures/real, the hand-written ones of tests/fixtures/sources, a generated trace
//! with thousands of waits on a 10 ms grid, and a mangled copy of the real traces (lines cut
//! short, numbers broken, fields doubled: the error paths). The parser of today must produce
//! the same documents, with every line number, count, histogram and warning (histograms are
//! compared by their counts, not by the bytes of their encoding).
//!
//! The goldens were written with `IOLENS_UPDATE_GOLDEN=1 cargo test --test trace_golden` at the
//! commit before the rewrite; regenerate them only for a deliberate change of the output.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use iolens::results::{Hist, Results};
use iolens::sources::oracle_trace::{build_results, parse_trace, ParseOptions};
use iolens::sources::LineReader;
use iolens::synth::write_synthetic_trace;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn golden_dir() -> PathBuf {
    root().join("tests/fixtures/trace_golden")
}

/// The results document of `inputs` (name, bytes) parsed as one `iolens trace` invocation,
/// with the fields that name this build or this moment blanked.
fn document(inputs: &[(String, Vec<u8>)], interval_ns: u64) -> String {
    let opts = ParseOptions {
        interval_ns,
        top: 20,
        keep_io: false,
    };
    let files = inputs
        .iter()
        .map(|(name, bytes)| {
            let mut r =
                LineReader::from_reader(Box::new(std::io::Cursor::new(bytes.clone())), name)
                    .unwrap();
            parse_trace(&mut r, &opts).unwrap()
        })
        .collect();
    let mut r: Results = build_results(files, &opts, &[]).unwrap();
    r.created = String::new();
    r.tool_version = String::new();
    let mut s = r.to_json().unwrap();
    s.push('\n');
    s
}

/// `doc` with every histogram in one encoding: an interval histogram's bytes depend on how far
/// the (reused) histogram it was recorded in had grown, not only on its counts. The goldens
/// were written when a trace's profile, I/O breakdown, slowest waits and line accounting lay in
/// `extra` under the names of today's typed fields: they are moved there (as reading a results
/// file does; `Results::from_json` would also refuse the mangled traces' documents).
fn canonical(doc: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(doc).unwrap();
    let doc_obj = v.as_object_mut().unwrap();
    if let Some(serde_json::Value::Object(extra)) = doc_obj.remove("extra") {
        doc_obj.extend(extra);
    }
    let mut r: Results = serde_json::from_value(v).unwrap();
    // The version is the writer's (goldens written before a schema change keep theirs); what
    // the traces say is compared, not which iolens wrote it.
    r.version = iolens::results::SCHEMA_VERSION;
    for op in r.runs.iter_mut().flat_map(|run| run.ops.iter_mut()) {
        op.hist = Hist::encode(&op.hist.decode().unwrap());
        for iv in &mut op.intervals {
            iv.hist = Hist::encode(&iv.hist.decode().unwrap());
        }
    }
    r.to_json().unwrap()
}

fn read(p: &Path) -> (String, Vec<u8>) {
    let name = p.file_name().unwrap().to_string_lossy().into_owned();
    (name, std::fs::read(p).unwrap())
}

fn traces_in(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "trc"))
        .collect();
    v.sort();
    v
}

/// Every line of the real traces, then for some lines a damaged copy: cut short, a number
/// broken, `ela=` doubled, a field without its value, a CRLF ending, a stray tab.
fn mangled() -> Vec<u8> {
    let mut out = Vec::new();
    let mut n = 0usize;
    for p in traces_in("tests/fixtures/real") {
        let text = std::fs::read(&p).unwrap();
        for line in text.split(|&b| b == b'\n') {
            out.extend_from_slice(line);
            out.push(b'\n');
            n += 1;
            let l = line.len();
            match n % 13 {
                1 => out.extend_from_slice(&line[..l * 2 / 3]),
                3 => out.extend(line.iter().map(|&b| if b == b'7' { b'x' } else { b })),
                5 => {
                    out.extend_from_slice(line);
                    out.extend_from_slice(b" ela= 12");
                }
                7 => out.extend(line.iter().filter(|&&b| !b.is_ascii_digit())),
                9 => {
                    out.extend_from_slice(line);
                    out.push(b'\r');
                }
                11 => out.extend(line.iter().map(|&b| if b == b' ' { b'\t' } else { b })),
                _ => continue,
            }
            out.push(b'\n');
        }
    }
    out
}

/// The golden documents: (golden file name, document of today's parser).
fn cases() -> Vec<(String, String)> {
    let sec = 1_000_000_000;
    let mut v = Vec::new();
    for dir in ["tests/fixtures/real", "tests/fixtures/sources"] {
        for p in traces_in(dir) {
            let input = read(&p);
            let name = format!("{}.json", input.0.trim_end_matches(".trc"));
            v.push((name, document(&[input], sec)));
        }
    }
    let real: Vec<_> = traces_in("tests/fixtures/real")
        .iter()
        .map(|p| read(p))
        .collect();
    v.push(("all_real_together.json".into(), document(&real, sec)));
    let mut gen = Vec::new();
    write_synthetic_trace(&mut gen, 150_000, 7).unwrap();
    v.push((
        // Compressed: the fuzz harness reads fixtures' first 64 KiB, and a document cut
        // there would not be one.
        "generated_150k_10ms.json.gz".into(),
        document(&[("orcl_ora_12345.trc".into(), gen)], sec / 100),
    ));
    v.push((
        "mangled_real.json".into(),
        document(&[("mangled_ora_1.trc".into(), mangled())], sec),
    ));
    v
}

#[test]
fn traces_parse_identically_to_the_golden_documents() {
    let dir = golden_dir();
    let update = std::env::var_os("IOLENS_UPDATE_GOLDEN").is_some();
    if update {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut differ = Vec::new();
    for (name, doc) in cases() {
        let path = dir.join(&name);
        let gz = name.ends_with(".gz");
        if update {
            let bytes = if gz {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
                e.write_all(doc.as_bytes()).unwrap();
                e.finish().unwrap()
            } else {
                doc.clone().into_bytes()
            };
            std::fs::write(&path, bytes).unwrap();
            continue;
        }
        let raw = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (golden missing)", path.display()));
        let want = if gz {
            let mut s = String::new();
            flate2::read::GzDecoder::new(raw.as_slice())
                .read_to_string(&mut s)
                .unwrap();
            s
        } else {
            String::from_utf8(raw).unwrap()
        };
        let (want, doc) = (canonical(&want), canonical(&doc));
        if want != doc {
            let line = want
                .lines()
                .zip(doc.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(want.lines().count().min(doc.lines().count()));
            differ.push(format!(
                "{name}: first difference at line {}: golden {:?}, now {:?}",
                line + 1,
                want.lines().nth(line),
                doc.lines().nth(line)
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
