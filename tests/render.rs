//! End-to-end tests of the renderers through the `iolens` binary: report, show, compare and
//! export on synthetic results files (a 10-second run, a 1-hour run, a calibration and a
//! trace-like document with wait-event ops), plus bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use iolens::histogram::{new_histogram, record_ns};
use iolens::results::{
    BucketConvention, Hist, Interval, Kind, OpResult, Results, RunResult, SCHEMA_VERSION,
};
use iolens::synth;

fn iolens(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_iolens"));
    c.args(args).env_remove("NO_COLOR").env_remove("COLUMNS");
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("run iolens")
}

fn ok(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "iolens failed: {err}");
    assert!(!err.contains("panicked"), "{err}");
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn write(dir: &Path, name: &str, r: &Results) -> PathBuf {
    let p = dir.join(name);
    r.write_file(&p).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A trace-like document: ops named after Oracle wait events, power-of-two buckets with upper
/// bound labels, 5 intervals.
fn trace_results() -> Results {
    let mut r = Results::new(Kind::Trace, vec!["iolens".into(), "trace".into()]);
    let mut ops = Vec::new();
    for (name, base) in [
        ("db file sequential read", 1_048_576u64),
        ("log file sync", 4_194_304),
    ] {
        let mut total = new_histogram();
        let mut ivs = Vec::new();
        for i in 0..5 {
            let mut h = new_histogram();
            // As ingest does: each upper-bound label's count spread over its bucket once.
            for k in 0..3u64 {
                let n = [7, 7, 6][k as usize];
                iolens::sources::spread_bucket(
                    &mut h,
                    base << k,
                    BucketConvention::UpperBound,
                    1.0,
                    n,
                );
            }
            total.add(&h).unwrap();
            ivs.push(Interval {
                start_s: i as f64 * 60.0,
                duration_s: 60.0,
                count: h.len(),
                bytes: 0,
                hist: Hist::encode(&h),
            });
        }
        let mut op = OpResult::new(name, &total, 0, ivs);
        op.bucket_convention = BucketConvention::UpperBound;
        op.bucket_edges_ns = vec![base / 2, base, base * 2, base * 4];
        ops.push(op);
    }
    r.runs.push(RunResult {
        name: "ORCL trace".into(),
        phase: "trace".into(),
        duration_s: 300.0,
        interval_s: 60.0,
        ops,
        ..RunResult::default()
    });
    r
}

fn count(h: &str, needle: &str) -> usize {
    h.matches(needle).count()
}

#[test]
fn report_of_a_short_run_has_every_section_and_no_external_reference() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "run.json", &synth::run_results(10, 1.0, 5));
    let out = dir.path().join("run.html");
    ok(&iolens(&["report", s(&input), "-o", s(&out)], &[]));
    let h = std::fs::read_to_string(&out).unwrap();
    assert!(h.starts_with("<!DOCTYPE html>"));
    assert!(h.trim_end().ends_with("</html>"));
    // 3 histograms + IOPS over time + 3 latency-over-time + 6 heatmaps.
    assert_eq!(count(&h, "<svg class=\"chart\""), 13, "chart count");
    assert_eq!(count(&h, "class=\"heatdata\""), 6);
    for needle in [
        "id=\"summary\"",
        "read latency histogram",
        "heatmap, frequency",
        "heatmap, intensity",
        "CPU per I/O",
        "run-queue delay",
        "device await",
        "complete workload spec",
        "&quot;read_pct&quot;: 80",
        "synthetic-host",
        "synthetic data, not a measurement",
        "2 modes",
        "class=\"band\"",
    ] {
        assert!(h.contains(needle), "missing {needle}");
    }
    // Self-contained: no links, scripts, styles or fonts from elsewhere.
    for bad in ["http://", "https://", "src=", "@import", "url("] {
        assert!(!h.contains(bad), "report references {bad}");
    }
}

#[test]
fn report_of_a_one_hour_run_aggregates_columns_and_stays_small() {
    let dir = tempfile::tempdir().unwrap();
    // One op, 3,600 one-second intervals alternating between two bimodal histograms (built
    // directly: synthesising 3,600 distinct histograms is slow in a debug build).
    let mut hs = [new_histogram(), new_histogram()];
    for (k, h) in hs.iter_mut().enumerate() {
        for v in [
            90_000u64,
            100_000,
            110_000,
            4_000_000,
            4_500_000 + k as u64 * 1_000_000,
        ] {
            record_ns(h, v);
        }
    }
    let enc = [Hist::encode(&hs[0]), Hist::encode(&hs[1])];
    let mut total = new_histogram();
    let ivs: Vec<Interval> = (0..3600)
        .map(|i| {
            total.add(&hs[i % 2]).unwrap();
            Interval {
                start_s: i as f64,
                duration_s: 1.0,
                count: 5,
                bytes: 5 * 8192,
                hist: enc[i % 2].clone(),
            }
        })
        .collect();
    let mut r = Results::new(Kind::Run, vec![]);
    r.runs.push(RunResult {
        name: "hour".into(),
        duration_s: 3600.0,
        interval_s: 1.0,
        ops: vec![OpResult::new("read", &total, total.len() * 8192, ivs)],
        ..RunResult::default()
    });
    let input = write(dir.path(), "hour.json", &r);
    let out = dir.path().join("hour.html");
    ok(&iolens(&["report", s(&input), "-o", s(&out)], &[]));
    let h = std::fs::read_to_string(&out).unwrap();
    assert!(h.len() < 5_000_000, "{} bytes", h.len());
    assert!(h.contains("10 intervals per column"));
    // Every heatmap's column edges: at most one column per 2 px of plot.
    for part in h.split("class=\"heatdata\"").skip(1) {
        let edges = part
            .split("edges&quot;:[")
            .nth(1)
            .unwrap()
            .split(']')
            .next()
            .unwrap();
        let n = edges.split(',').count();
        assert_eq!(n, 361, "3600 intervals in 360 columns (+1 edge)");
        assert!(edges.ends_with("3600"));
    }
}

#[test]
fn report_of_a_calibration_marks_target_and_knee() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "cal.json",
        &synth::calibration_results(6, 2, 100, 3),
    );
    let out = dir.path().join("cal.html");
    ok(&iolens(&["report", s(&input), "-o", s(&out)], &[]));
    let h = std::fs::read_to_string(&out).unwrap();
    assert!(h.contains("Latency vs IOPS"));
    assert!(h.contains("target p99 ≤ 1 ms"));
    assert!(h.contains("class=\"ref\""));
    assert!(h.contains("max at target"));
    assert!(h.contains("knee"));
    assert!(h.contains("Host cost vs IOPS"));
    assert!(h.contains("Application latency beside device service time"));
    // One section per step.
    for i in 0..6 {
        assert!(h.contains(&format!("id=\"run-{i}\"")));
    }
}

#[test]
fn trace_ops_and_bucket_conventions_render_generically() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "trace.json", &trace_results());
    let out = dir.path().join("trace.html");
    ok(&iolens(&["report", s(&input), "-o", s(&out)], &[]));
    let h = std::fs::read_to_string(&out).unwrap();
    assert!(h.contains("db file sequential read latency histogram"));
    assert!(h.contains("log file sync heatmap, intensity"));
    // Wait events carry no bytes: no column of "0 MB/s", no MB/s card. The trace says nothing
    // of the machine: no blank environment rows; the command line wraps inside the page.
    assert!(!h.contains("<th>MB/s</th>"), "MB/s column for wait events");
    assert!(!h.contains("<div class=\"k\">MB/s</div>"), "MB/s card");
    let env = &h[h.find("<section id=\"environment\">").unwrap()..];
    // Text cells carry a class (they wrap); what they hold is what is checked.
    let env = env[..env.find("</section>").unwrap()].replace("<td class=\"t\">", "<td>");
    assert!(!env.contains("<td></td>"), "blank environment row: {env}");
    assert!(
        !env.contains("<td>0 B</td>") && !env.contains("<td>0 × </td>"),
        "{env}"
    );
    assert!(h.contains("#environment td{white-space:normal;overflow-wrap:anywhere"));
    // No raw nanosecond figures of a microsecond or more.
    for m in h.match_indices(" ns") {
        let before: String = h[..m.0]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
            .collect();
        let v: f64 = before
            .chars()
            .rev()
            .collect::<String>()
            .parse()
            .unwrap_or(0.0);
        assert!(v.abs() < 1000.0, "raw nanoseconds: {v} ns");
    }
    let text = ok(&iolens(&["show", s(&input), "--width", "90"], &[]));
    assert!(text.contains("db file sequential read latency histogram (100 operations)"));
    // Upper-bound labels 1048576 ns mean [524288, 1048576): the lowest bar starts at 524 µs.
    let first_bar = text
        .lines()
        .skip_while(|l| !l.starts_with("db file sequential read latency histogram"))
        .nth(1)
        .unwrap();
    assert!(
        first_bar.trim_start().starts_with("524 µs .. 1.05 ms"),
        "{first_bar}"
    );
}

#[test]
fn show_respects_no_color_width_and_run_selection() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "run.json", &synth::run_results(30, 1.0, 2));
    // Not a terminal: plain.
    let plain = ok(&iolens(&["show", s(&input)], &[("COLUMNS", "60")]));
    assert!(!plain.contains('\x1b'));
    assert!(plain.contains("Summary"));
    assert!(plain.contains("read heatmap, frequency"));
    assert!(plain.contains("modes: 2 modes"));
    for l in plain.lines().filter(|l| l.contains(" |")) {
        assert!(l.chars().count() <= 60, "{l:?}");
    }
    // Forced colour, and NO_COLOR beats auto.
    let col = ok(&iolens(&["show", s(&input), "--color", "always"], &[]));
    assert!(col.contains("\x1b[48;5;"));
    let nc = ok(&iolens(&["show", s(&input)], &[("NO_COLOR", "1")]));
    assert!(!nc.contains('\x1b'));
    let bad = iolens(&["show", s(&input), "--run", "4"], &[]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("out of range"));
}

#[test]
fn compare_shows_ratios_and_refuses_different_workloads() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &synth::run_results(10, 1.0, 1));
    let mut rb = synth::run_results(20, 1.0, 2);
    rb.runs[0]
        .spec
        .as_mut()
        .unwrap()
        .other
        .insert("target".into(), "/other/place".into());
    // 1 vs 2 sessions is what a comparison is for: no --force, the difference said.
    rb.runs[0].spec.as_mut().unwrap().sessions = Some(2);
    let b = write(dir.path(), "b.json", &rb);
    let text = ok(&iolens(&["compare", s(&a), s(&b)], &[]));
    assert!(text.contains("ratios are against a.json"));
    assert!(text.contains("read — run 0"));
    assert!(
        text.contains("differs: a.json run 0 vs b.json run 0: sessions: 4 vs 2"),
        "{text}"
    );
    // Ratios carry their interval-to-interval noise.
    assert!(text.contains(" ± ") && text.contains("×"), "{text}");
    let html = dir.path().join("cmp.html");
    ok(&iolens(&["compare", s(&a), s(&b), "-o", s(&html)], &[]));
    let h = std::fs::read_to_string(&html).unwrap();
    assert!(h.contains("<th>ratio</th>"));
    // Overlaid histograms and percentile curves (log scale): one line per input in each of
    // the 3 ops' two charts.
    assert!(h.contains("read percentiles — run 0"));
    assert_eq!(count(&h, "<polyline class=\"series\""), 12);

    let mut rc = synth::run_results(10, 1.0, 3);
    rc.runs[0].spec.as_mut().unwrap().block_size = Some(4096);
    let c = write(dir.path(), "c.json", &rc);
    let o = iolens(&["compare", s(&a), s(&c)], &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("workloads differ") && err.contains("block_size: 8192 vs 4096"),
        "{err}"
    );
    assert!(err.contains("--force"));
    let forced = ok(&iolens(&["compare", s(&a), s(&c), "--force"], &[]));
    assert!(forced.contains("compared with --force"));

    let cal = write(
        dir.path(),
        "cal.json",
        &synth::calibration_results(3, 1, 50, 1),
    );
    let o = iolens(&["compare", s(&a), s(&cal)], &[]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("a.json is a run result but cal.json is a calibrate result"));
}

#[test]
fn compare_shows_the_analysis_of_each_side() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cb) = (
        synth::calibration_results(6, 1, 200, 1),
        synth::calibration_results(6, 1, 200, 2),
    );
    let (a, b) = (
        write(dir.path(), "a.json", &ca),
        write(dir.path(), "b.json", &cb),
    );
    let knee = |r: &Results| {
        let an = iolens::analysis::analyse(r).calibration.unwrap();
        (an.knee.unwrap().iops, an.usl.unwrap().peak_x.unwrap())
    };
    let text = ok(&iolens(&["compare", s(&a), s(&b), "--width", "120"], &[]));
    let html_path = dir.path().join("cmp.html");
    ok(&iolens(
        &["compare", s(&a), s(&b), "-o", s(&html_path)],
        &[],
    ));
    let html = std::fs::read_to_string(&html_path).unwrap();
    let row = |text: &str, name: &str| -> String {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} row in:\n{text}"))
            .to_string()
    };
    for (r, what) in [(&ca, "a"), (&cb, "b")] {
        let (k, peak) = knee(r);
        let (k, peak) = (iolens::units::fmt_rate(k), iolens::units::fmt_rate(peak));
        assert!(
            row(&text, "knee IOPS").contains(&k),
            "{what}: knee {k}\n{text}"
        );
        assert!(
            row(&text, "USL peak IOPS").contains(&peak),
            "{what}: {peak}\n{text}"
        );
        assert!(
            html.contains(&format!("<td>{k}</td>")),
            "{what}: knee in HTML"
        );
    }
    // The modes at max IOPS of both sides, centre and share.
    let modes = row(&text, "read modes — run");
    assert!(modes.matches('%').count() >= 2, "{modes}");
    assert!(html.contains("<section id=\"analysis\">"));
    assert!(html.contains("read modes — run"));
    // Runs: the verdicts of each side.
    let (ra, rb) = (
        write(dir.path(), "ra.json", &synth::run_results(10, 1.0, 1)),
        write(dir.path(), "rb.json", &synth::run_results(10, 1.0, 2)),
    );
    let text = ok(&iolens(&["compare", s(&ra), s(&rb), "--width", "120"], &[]));
    let verdicts = row(&text, "verdicts — run 0");
    let kinds = iolens::analysis::analyse(&synth::run_results(10, 1.0, 1)).runs[0]
        .verdicts
        .iter()
        .map(|v| v.kind.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    assert!(
        !kinds.is_empty() && verdicts.contains(&kinds),
        "{kinds}: {verdicts}"
    );
}

#[test]
fn export_csv_has_one_row_per_op_and_interval() {
    let dir = tempfile::tempdir().unwrap();
    let r = synth::run_results(12, 1.0, 4);
    let input = write(dir.path(), "run.json", &r);
    let out = dir.path().join("iv.csv");
    ok(&iolens(&["export", s(&input), "--csv", s(&out)], &[]));
    let mut rd = csv::Reader::from_path(&out).unwrap();
    let hdr = rd.headers().unwrap().clone();
    assert_eq!(&hdr[3], "op");
    assert_eq!(&hdr[7], "iops");
    let rows: Vec<csv::StringRecord> = rd.records().map(|x| x.unwrap()).collect();
    assert_eq!(rows.len(), 12 * 3);
    for op in &r.runs[0].ops {
        let mine: Vec<&csv::StringRecord> =
            rows.iter().filter(|x| &x[3] == op.op.as_str()).collect();
        assert_eq!(mine.len(), 12);
        let total: u64 = mine.iter().map(|x| x[6].parse::<u64>().unwrap()).sum();
        assert_eq!(total, op.count);
        for (x, iv) in mine.iter().zip(&op.intervals) {
            let iops: f64 = x[7].parse().unwrap();
            assert!((iops - iv.count as f64 / iv.duration_s).abs() < 1e-3);
            let h = iv.hist.decode().unwrap();
            let p99: f64 = x[12].parse().unwrap();
            assert!((p99 * 1e3 - h.value_at_quantile(0.99) as f64).abs() < 1.0);
        }
    }
    // To standard output as well.
    let text = ok(&iolens(&["export", s(&input), "--csv", "-"], &[]));
    assert_eq!(text.lines().count(), 12 * 3 + 1);
}

#[test]
fn export_hlog_is_readable_by_hdrhistogram() {
    let dir = tempfile::tempdir().unwrap();
    let r = trace_results();
    let input = write(dir.path(), "trace.json", &r);
    let out = dir.path().join("trace.hlog");
    ok(&iolens(&["export", s(&input), "--hlog", s(&out)], &[]));
    let text = std::fs::read(&out).unwrap();
    let t = String::from_utf8_lossy(&text);
    assert!(t.contains("#[Histogram log format version 1.3]"));
    assert!(t.contains(
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    ));
    let mut start = false;
    let mut base = false;
    let mut seen = Vec::new();
    for e in IntervalLogIterator::new(&text) {
        match e.expect("log parses") {
            LogEntry::StartTime(_) => start = true,
            LogEntry::BaseTime(_) => base = true,
            LogEntry::Interval(iv) => {
                let tag = iv.tag().expect("tagged").as_str().to_string();
                let bytes = base64::Engine::decode(
                    &base64::engine::general_purpose::STANDARD,
                    iv.encoded_histogram(),
                )
                .unwrap();
                let h: hdrhistogram::Histogram<u64> =
                    hdrhistogram::serialization::Deserializer::new()
                        .deserialize(&mut bytes.as_slice())
                        .unwrap();
                assert!((iv.max() - h.max() as f64 / 1e6).abs() < 1e-3);
                seen.push((tag, iv.start_timestamp().as_secs_f64(), h));
            }
        }
    }
    assert!(start && base);
    assert_eq!(seen.len(), 10);
    let ops = &r.runs[0].ops;
    for (i, (tag, ts, h)) in seen.iter().enumerate() {
        let op = &ops[i % 2];
        assert_eq!(tag, &op.op.replace(' ', "_"));
        let iv = &op.intervals[i / 2];
        assert!((ts - iv.start_s).abs() < 1e-6);
        assert_eq!(h, &iv.hist.decode().unwrap());
    }
}

#[test]
fn bad_input_gets_clear_errors_from_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.json", &synth::run_results(3, 1.0, 1));
    let json = std::fs::read_to_string(&good).unwrap();
    let trunc = dir.path().join("trunc.json");
    std::fs::write(&trunc, &json[..json.len() / 2]).unwrap();
    let foreign = dir.path().join("foreign.json");
    std::fs::write(&foreign, r#"{"schema":"fio","jobs":[]}"#).unwrap();
    let newer = dir.path().join("newer.json");
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["version"] = (SCHEMA_VERSION + 1).into();
    std::fs::write(&newer, v.to_string()).unwrap();
    let missing = dir.path().join("missing.json");
    let html = dir.path().join("out.html");
    let cases = [
        (&trunc, "truncated"),
        (&foreign, "not an iolens results file"),
        (&newer, "newer than this iolens understands"),
        (&missing, "cannot read"),
    ];
    for (file, msg) in cases {
        for args in [
            vec!["show", s(file)],
            vec!["report", s(file), "-o", s(&html)],
            vec!["compare", s(&good), s(file)],
            vec!["export", s(file), "--csv", "-"],
        ] {
            let o = iolens(&args, &[]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains(msg), "{args:?}: {err}");
            assert!(
                err.contains(file.file_name().unwrap().to_str().unwrap()),
                "{err}"
            );
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    assert!(!html.exists());
    let o = iolens(&["export", s(&good)], &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing to export"));
    let o = iolens(&["report", s(&good), "-o", s(&good)], &[]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("inputs or targets"));
    assert_eq!(std::fs::read_to_string(&good).unwrap(), json);
}
