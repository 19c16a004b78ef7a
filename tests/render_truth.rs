//! Every picture true on real input (issue 11, items 10 and 11): ingested bucket histograms
//! drawn on the source's own bucket edges (spread once, at ingest, never shifted again), and no
//! chart or CSV row with a rate computed over a sliver of a last interval.

use std::path::{Path, PathBuf};
use std::process::Command;

use iolens::render::heatmap::{log_bins, Heatmap, OpSeries};
use iolens::render::terminal::histogram_text;
use iolens::render::TermStyle;
use iolens::results::{Results, RunResult};

fn real(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real")
        .join(name)
}

fn iolens(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_iolens"))
        .args(args)
        .env_remove("COLUMNS")
        .output()
        .expect("run iolens");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "iolens {args:?} failed: {err}");
    assert!(!err.contains("panicked"), "{err}");
    String::from_utf8(o.stdout).unwrap()
}

/// `iolens ingest --format biolatency` of a real file, read back from its JSON.
fn ingest_bcc(dir: &Path, fixture: &str) -> (Results, PathBuf) {
    let json = dir.join(format!("{fixture}.json"));
    iolens(&[
        "ingest",
        "--format",
        "biolatency",
        real(fixture).to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    (Results::read_file(&json).unwrap(), json)
}

/// The bar `[lo, hi)` ns of an op's histogram (per_octave bars per factor of two) and its count.
fn bar(run: &RunResult, op: &str, lo: f64, hi: f64, per_octave: u32) -> u64 {
    let o = run.op(op).unwrap();
    let h = o.hist.decode().unwrap();
    let bins = log_bins(&h, &o.bucket_edges_ns, per_octave);
    let b = bins
        .iter()
        .find(|b| b.low_ns == lo)
        .unwrap_or_else(|| panic!("no bar starting at {lo} ns: {bins:?}"));
    assert_eq!(b.high_ns, hi, "{bins:?}");
    b.count
}

/// The heatmap row `[lo, hi)` ns of an op and its total count.
fn heat_row(run: &RunResult, op: &str, lo: f64, hi: f64) -> u64 {
    let s = OpSeries::decode(run.op(op).unwrap()).unwrap();
    let m = Heatmap::build(&s, 100, 4, 60).unwrap();
    let r = (0..m.rows)
        .find(|&r| m.row_bounds_ns(r).0 == lo)
        .unwrap_or_else(|| {
            let rows: Vec<_> = (0..m.rows).map(|r| m.row_bounds_ns(r)).collect();
            panic!("no heatmap row starting at {lo} ns: {rows:?}")
        });
    assert_eq!(m.row_bounds_ns(r).1, hi);
    (0..m.cols).map(|c| m.freq[r * m.cols + c]).sum()
}

#[test]
fn bcc_msecs_buckets_are_drawn_on_their_own_edges() {
    // bcc tools/biolatency_example.txt, `biolatency.py -Fm`: flags = Read has
    // `16 -> 31 : 68` (ms) out of 965.
    let dir = tempfile::tempdir().unwrap();
    let (r, json) = ingest_bcc(dir.path(), "analysis_biolatency_Fm.txt");
    let run = &r.runs[0];
    assert_eq!(run.op("Read").unwrap().count, 965);
    for per_octave in [1, 4] {
        assert_eq!(bar(run, "Read", 16e6, 32e6, per_octave), 68);
        assert_eq!(bar(run, "Read", 2e6, 4e6, per_octave), 519);
        assert_eq!(bar(run, "Read", 32e6, 64e6, per_octave), 0);
        assert_eq!(bar(run, "Write", 256e6, 512e6, per_octave), 1);
    }
    assert_eq!(heat_row(run, "Read", 16e6, 32e6), 68);
    assert_eq!(heat_row(run, "Read", 128e6, 256e6), 12);
    // The terminal bars and the HTML bars say the same.
    let style = TermStyle {
        color: false,
        width: 100,
    };
    let i = run.ops.iter().position(|o| o.op == "Read").unwrap();
    let text = histogram_text(run, i, &style).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("16 ms .. 32 ms"))
        .unwrap_or_else(|| panic!("no 16–32 ms bar:\n{text}"));
    assert!(line.contains("7.05%"), "68/965 = 7.05 %: {line}");
    assert!(!text.contains("32.8 ms"), "{text}");
    let html = dir.path().join("r.html");
    iolens(&[
        "report",
        json.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(html).unwrap();
    assert!(html.contains("<title>16 ms – 32 ms: 7.05%</title>"), "no 16–32 ms bar in the report");
}

#[test]
fn bcc_usecs_buckets_are_drawn_on_their_own_edges() {
    // bcc tools/biolatency_example.txt, the first `biolatency` output (usecs):
    // `64 -> 127 : 1`, `1024 -> 2047 : 52`, `65536 -> 131071 : 2`, 277 in all.
    let dir = tempfile::tempdir().unwrap();
    let (r, json) = ingest_bcc(dir.path(), "analysis_biolatency_usecs.txt");
    let run = &r.runs[0];
    let op = &run.ops[0].op.clone();
    assert_eq!(run.ops[0].count, 277);
    assert_eq!(bar(run, op, 64e3, 128e3, 1), 1);
    assert_eq!(bar(run, op, 1_024e3, 2_048e3, 1), 52);
    assert_eq!(bar(run, op, 65_536e3, 131_072e3, 4), 2);
    assert_eq!(heat_row(run, op, 64e3, 128e3), 1);
    assert_eq!(heat_row(run, op, 1_024e3, 2_048e3), 52);
    let shown = iolens(&[
        "show",
        json.to_str().unwrap(),
        "--run",
        "0",
        "--color",
        "never",
    ]);
    assert!(shown.contains("64 µs .. 128 µs"), "{shown}");
    assert!(!shown.contains("90.5 µs"), "{shown}");
}
