//! Every picture true on real input (issue 11, items 10 and 11): ingested bucket histograms
//! drawn on the source's own bucket edges (spread once, at ingest, never shifted again), and no
//! chart or CSV row with a rate computed over a sliver of a last interval.

mod common;

use common::real;
use std::path::{Path, PathBuf};
use std::process::Command;

use iolens::render::heatmap::{log_bins, Heatmap, OpSeries};
use iolens::render::terminal::histogram_text;
use iolens::render::TermStyle;
use iolens::results::{Results, RunResult};

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
    assert!(
        html.contains("<title>16 ms – 32 ms: 7.05%</title>"),
        "no 16–32 ms bar in the report"
    );
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

/// Rows of `iolens export --csv -`: (op, duration_s, count, iops).
fn csv_rows(json: &Path) -> Vec<(String, f64, u64, f64)> {
    let text = iolens(&["export", json.to_str().unwrap(), "--csv", "-"]);
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[3].to_string(),
                f[5].parse().unwrap(),
                f[6].parse().unwrap(),
                f[7].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_real_run_has_no_stub_last_interval() {
    // 2.3 s at 1 s intervals: the last 0.3 s belong to the interval before, not to an
    // interval of their own.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let target = dir.path().join("t.dat");
    iolens(&[
        "run",
        "--engine",
        "null",
        "--target",
        target.to_str().unwrap(),
        "--size",
        "4M",
        "--duration",
        "2.3s",
        "--interval",
        "1s",
        "--warmup",
        "0s",
        "--no-progress",
        "--json",
        json.to_str().unwrap(),
    ]);
    let r = Results::read_file(&json).unwrap();
    let run = &r.runs[0];
    assert!(run.duration_s >= 2.3, "{}", run.duration_s);
    for o in &run.ops {
        let sum: u64 = o.intervals.iter().map(|i| i.count).sum();
        assert_eq!(sum, o.count, "interval counts sum to the op's count");
        let covered: f64 = o.intervals.iter().map(|i| i.duration_s).sum();
        assert!(
            (covered - run.duration_s).abs() < 1e-6,
            "{covered} vs {}",
            run.duration_s
        );
        for iv in &o.intervals {
            assert!(iv.duration_s >= 0.5, "stub interval {iv:?}");
        }
        assert_eq!(o.intervals.len(), 2, "{:?}", o.intervals.len());
    }
    let overall = run.ops[0].count as f64 / run.duration_s;
    for (op, d, _, iops) in csv_rows(&json) {
        assert!(d >= 0.5, "{op}: CSV row over {d} s");
        assert!(
            iops > overall / 4.0 && iops < overall * 4.0,
            "{op}: CSV rate {iops} far from the run's {overall}"
        );
    }
}

#[test]
fn renderers_fold_a_stub_tail_of_an_old_file() {
    // A file written before runs folded their tail: 3 s of 1 s intervals and then one I/O in a
    // 4 ms interval. No chart or CSV row may show 250 IOPS (or a latency jump) for it.
    let mut r = iolens::synth::run_results(3, 1.0, 7);
    let run = &mut r.runs[0];
    for o in &mut run.ops {
        let mut h = iolens::histogram::new_histogram();
        iolens::histogram::record_ns(&mut h, 5_000_000);
        let mut total = o.hist.decode().unwrap();
        total.add(&h).unwrap();
        o.intervals.push(iolens::results::Interval {
            start_s: 3.0,
            duration_s: 0.004,
            count: 1,
            bytes: 8192,
            hist: iolens::results::Hist::encode(&h),
        });
        let (count, bytes) = (o.count + 1, o.bytes + 8192);
        *o = iolens::results::OpResult::new(&o.op, &total, bytes, o.intervals.clone());
        assert_eq!(o.count, count);
    }
    run.duration_s = 3.004;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("old.json");
    r.write_file(&json).unwrap();
    let rows = csv_rows(&json);
    let ops = r.runs[0].ops.len();
    assert_eq!(rows.len(), 3 * ops, "{rows:?}");
    for (op, d, count, iops) in &rows {
        assert!(*d >= 0.5, "{op}: CSV row over {d} s");
        assert!(*count >= 10 && *iops >= 10.0, "{op}: {count} in {d} s");
    }
    let last = rows.iter().filter(|r| r.1 > 1.0).count();
    assert_eq!(last, ops, "each op's last row covers 1.004 s: {rows:?}");
    let s = OpSeries::decode(&r.runs[0].ops[0]).unwrap();
    assert_eq!(s.stats.len(), 3);
    assert!((s.stats[2].duration_s - 1.004).abs() < 1e-9);
    let total: u64 = s.stats.iter().map(|st| st.count).sum();
    assert_eq!(total, r.runs[0].ops[0].count);
}

#[test]
fn modes_of_real_bcc_histograms() {
    use iolens::analysis::{describe, find_modes_with_edges};
    let dir = tempfile::tempdir().unwrap();
    let modes = |r: &Results, op: &str| {
        let o = r.runs[0].op(op).unwrap();
        find_modes_with_edges(&o.hist.decode().unwrap(), &o.bucket_edges_ns)
    };
    // `biolatency.py -Fm`, flags = Read: 519 at 2–4 ms, a dip to 60 at 4–8 ms, 123 at
    // 8–16 ms: visibly two modes (plus 15 I/Os at 64 ms–1 s after an empty 32–64 ms bucket).
    let (r, _) = ingest_bcc(dir.path(), "analysis_biolatency_Fm.txt");
    let m = modes(&r, "Read");
    let d = describe(&m);
    assert!(m.len() >= 2, "{d}");
    assert!(m[0].centre_ns > 2e6 && m[0].centre_ns < 4e6, "{d}");
    assert!(m[1].centre_ns > 8e6 && m[1].centre_ns < 16e6, "{d}");
    let v = m[1].valley_below.unwrap();
    assert!(
        v.at_ns > 4e6 && v.at_ns < 8e6 && (v.ratio - 60.0 / 123.0).abs() < 0.01,
        "{d}"
    );
    assert!(
        d.contains("density valley at 5.66 ms (49 % of the lower peak"),
        "{d}"
    );
    // Write and NoMerge-Write rise and fall once: one mode each.
    for op in ["Write", "NoMerge-Write", "ReadAhead-Read"] {
        let m = modes(&r, op);
        assert_eq!(m.len(), 1, "{op}: {}", describe(&m));
    }
    // The first `biolatency` output: 43, 52, 47, 52, 36 around 0.5–16 ms is one broad mode
    // (the 47 between the two 52s is no valley).
    let (r, _) = ingest_bcc(dir.path(), "analysis_biolatency_usecs.txt");
    let op = r.runs[0].ops[0].op.clone();
    let m = modes(&r, &op);
    assert_eq!(m.len(), 1, "{}", describe(&m));
    assert!(describe(&m).contains("no valley between peaks as low as 80 %"));
}
