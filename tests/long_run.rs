//! Day-long results files (issue 15): `show` and `report` take their display columns from
//! validation, which merges each op's intervals into the columns as it decodes them, so every
//! interval histogram is decoded once. What they print must be exactly what the renderers print
//! when they merge the intervals themselves (the path every other caller takes), at any width,
//! on files with thousands of intervals written by the real writer, including intervals the
//! fast path refuses (another precision) and a stub last interval that display folds.

use std::path::Path;
use std::process::Command;

use hdrhistogram::Histogram;
use iolens::histogram::HIST_MAX_NS;
use iolens::render::heatmap::{LoadedColumns, OpSeries};
use iolens::render::{html, terminal, TermStyle};
use iolens::results::{interval_groups, Hist, Results};

fn iolens(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_iolens"))
        .args(args)
        .env_remove("COLUMNS")
        .env_remove("NO_COLOR")
        .output()
        .expect("run iolens");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "iolens {args:?} failed: {err}");
    String::from_utf8(o.stdout).unwrap()
}

/// A run of `seconds` one-second intervals per op (read, write, sync), as the writer stores it.
fn synth(dir: &Path, name: &str, kind: &str, seconds: usize) -> std::path::PathBuf {
    let path = dir.join(name);
    iolens(&[
        "dev-synth",
        "-o",
        path.to_str().unwrap(),
        "--kind",
        kind,
        "--seconds",
        &seconds.to_string(),
        "--samples",
        "40",
        "--seed",
        "15",
    ]);
    path
}

/// `run.json` with odd intervals: a stub last interval in the read op, and write intervals in
/// another precision (2 digits) that only the general path merges.
fn odd(dir: &Path, run: &Path) -> std::path::PathBuf {
    let mut r = Results::read_file(run).unwrap();
    let ops = &mut r.runs[0].ops;
    let last = ops[0].intervals.last_mut().unwrap();
    last.duration_s = 0.2;
    for iv in &mut ops[1].intervals[1000..1040] {
        let mut h = Histogram::<u64>::new_with_bounds(1, HIST_MAX_NS, 2).unwrap();
        h.record_n(123_456 + iv.start_s as u64, iv.count).unwrap();
        iv.hist = Hist::encode(&h);
    }
    let path = dir.join("odd.json");
    r.write_file(&path).unwrap();
    path
}

#[test]
fn show_and_report_print_the_same_when_validation_merges_the_columns() {
    let dir = tempfile::tempdir().unwrap();
    let run = synth(dir.path(), "run.json", "run", 3001);
    let files = [
        odd(dir.path(), &run),
        run,
        synth(dir.path(), "calibrate.json", "calibrate", 40),
    ];
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        let r = Results::read_file(f).unwrap();
        for width in [60, 97, 133, 400] {
            let shown = iolens(&[
                "show",
                f.to_str().unwrap(),
                "--color",
                "never",
                "--width",
                &width.to_string(),
            ]);
            let style = TermStyle {
                color: false,
                width,
            };
            let want = terminal::render(&r, &style, None).unwrap();
            assert!(shown == want, "{name}: show --width {width} differs");
        }
        let out = dir.path().join(format!("{name}.html"));
        iolens(&["report", f.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        let page = std::fs::read_to_string(&out).unwrap();
        assert!(
            page == html::report(&r, name).unwrap(),
            "{name}: report differs"
        );
    }
}

#[test]
fn validation_merges_every_column_that_the_renderer_would() {
    let dir = tempfile::tempdir().unwrap();
    let run = synth(dir.path(), "run.json", "run", 3001);
    let odd = odd(dir.path(), &run);
    for (f, max_cols) in [(&run, 770), (&odd, 770), (&odd, 120), (&run, 5000)] {
        let cols = LoadedColumns::new(max_cols);
        let r = Results::read_file_merging(f, Some(&cols)).unwrap();
        let ops = &r.runs[0].ops;
        // Every column is merged by validation, but those holding a write interval in another
        // precision.
        let odd_cols = |k: usize| {
            let (per, _) = interval_groups(&ops[k].intervals, max_cols);
            if f == &odd && k == 1 {
                1000 / per..1039 / per + 1
            } else {
                0..0
            }
        };
        let want: usize = (0..ops.len())
            .map(|k| interval_groups(&ops[k].intervals, max_cols).1 - odd_cols(k).len())
            .sum();
        assert_eq!(cols.merged(), want, "{} at {max_cols}", f.display());
        let loaded = OpSeries::decode_all_columns_loaded(ops, max_cols, Some((&cols, 0))).unwrap();
        assert_eq!(cols.merged(), 0, "the renderer took them all");
        let own = OpSeries::decode_all_columns(ops, max_cols).unwrap();
        for (a, b) in loaded.iter().zip(&own) {
            assert_eq!(a.group, b.group);
            assert_eq!(a.stats.len(), b.stats.len());
            let differs =
                (0..a.stats.len()).find(|&c| a.stats[c] != b.stats[c] || a.cells[c] != b.cells[c]);
            assert_eq!(
                differs,
                None,
                "{} {}: first column that differs",
                f.display(),
                a.op
            );
        }
        // Nothing dropped or counted twice, whatever the number of columns.
        for (s, o) in loaded.iter().zip(ops) {
            assert_eq!(s.stats.iter().map(|st| st.count).sum::<u64>(), o.count);
            assert_eq!(s.stats.iter().map(|st| st.bytes).sum::<u64>(), o.bytes);
        }
    }
}
