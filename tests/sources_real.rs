//! `iolens ingest` on real files written by other people's tools (bcc, bpftrace, HdrHistogram,
//! PyLatencyMap, fio; origins in tests/fixtures/README.md): counts equal to the source's (summed
//! here independently from the text), percentiles inside the source's bucket, durations equal
//! to the source's span or unknown, impossible input refused, and wrong formats hinted at.

mod common;

use common::real;
use std::path::{Path, PathBuf};

use iolens::results::{Results, RunResult, UNKNOWN_RATE};
use iolens::sources::{ingest, Format, IngestOptions};

fn args(format: Format, files: Vec<PathBuf>, duration: Option<f64>) -> IngestOptions {
    IngestOptions {
        format,
        files,
        unit: None,
        time_unit: None,
        interval: std::time::Duration::from_secs(1),
        duration: duration.map(std::time::Duration::from_secs_f64),
    }
}

fn read(format: Format, name: &str) -> Results {
    ingest(&args(format, vec![real(name)], None), vec![]).unwrap()
}

fn text(name: &str) -> String {
    std::fs::read_to_string(real(name)).unwrap()
}

/// bcc rows `lo -> hi : count |…|` of a text, in order: (lo, hi, count).
fn bcc_rows(t: &str) -> Vec<(u64, u64, u64)> {
    t.lines()
        .filter_map(|l| {
            let (a, rest) = l.split_once("->")?;
            let (b, rest) = rest.split_once(':')?;
            let c = rest.split('|').next()?.trim();
            Some((
                a.trim().parse().ok()?,
                b.trim().parse().ok()?,
                c.parse().ok()?,
            ))
        })
        .collect()
}

/// bpftrace rows `[lo, hi)  count |…|` (K/M suffixes): (lo, count).
fn bpf_counts(t: &str) -> u64 {
    t.lines()
        .filter(|l| l.starts_with('[') && l.contains('|'))
        .map(|l| {
            let after = l.split_once(')').or_else(|| l.split_once(']')).unwrap().1;
            after
                .split('|')
                .next()
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap()
        })
        .sum()
}

fn op_counts(run: &RunResult) -> Vec<(String, u64)> {
    run.ops.iter().map(|o| (o.op.clone(), o.count)).collect()
}

fn unparsed(r: &Results) -> u64 {
    r.source.as_ref().expect("line accounting").files[0].unparsed
}

/// `q`-quantile bucket of bcc rows (lo, hi inclusive) in the rows' unit.
fn quantile_row(rows: &[(u64, u64, u64)], q: f64) -> (u64, u64) {
    let total: u64 = rows.iter().map(|r| r.2).sum();
    let want = (q * total as f64).ceil() as u64;
    let mut acc = 0;
    for r in rows {
        acc += r.2;
        if acc >= want {
            return (r.0, r.1 + 1);
        }
    }
    unreachable!()
}

fn within(v_ns: u64, lo: u64, hi: u64, unit_ns: u64) {
    let (lo, hi) = (lo * unit_ns, hi * unit_ns);
    // HdrHistogram keeps 3 significant digits: allow 0.1 % at the edges.
    assert!(
        v_ns as f64 >= lo as f64 * 0.999 && v_ns as f64 <= hi as f64 * 1.001,
        "{v_ns} ns outside the source bucket [{lo}, {hi}) ns"
    );
}

#[test]
fn bcc_single_histogram_counts_exact_and_rates_unknown() {
    let r = read(Format::Biolatency, "bcc_biolatency.txt");
    let rows = bcc_rows(&text("bcc_biolatency.txt"));
    let total: u64 = rows.iter().map(|r| r.2).sum();
    assert_eq!(total, 277);
    let run = &r.runs[0];
    assert_eq!(run.total_count(), total);
    assert!(
        run.duration_unknown,
        "a histogram printed at Ctrl-C has no duration"
    );
    assert!(!run.rates_known());
    assert_eq!(run.iops(), 0.0);
    let s = &run.ops[0].summary;
    let (lo, hi) = quantile_row(&rows, 0.5);
    within(s.p50_ns, lo, hi, 1000);
    let (lo, hi) = quantile_row(&rows, 0.99);
    within(s.p99_ns, lo, hi, 1000);
    assert_eq!(unparsed(&r), 0);
    // Every renderer says the rate is unknown instead of printing a number.
    let table = iolens::render::terminal::summary_table(&r);
    // The table's cell says it (why, once beside the run: a cell of 31 characters in every row
    // would not fit a terminal).
    assert_eq!(table.rows[0][3], "unknown");
    let csv = iolens::render::csv::intervals_csv(&r).unwrap();
    assert!(csv.contains(UNKNOWN_RATE), "{csv}");
    let summary = iolens::render::brief::run_summary(
        run,
        &iolens::render::TermStyle {
            color: false,
            width: 100,
        },
    );
    assert!(summary.contains(UNKNOWN_RATE), "{summary}");
    // The user who knows the duration can give it.
    let a = args(
        Format::Biolatency,
        vec![real("bcc_biolatency.txt")],
        Some(10.0),
    );
    let r = ingest(&a, vec![]).unwrap();
    assert!(r.runs[0].rates_known());
    assert!((r.runs[0].iops() - 27.7).abs() < 1e-9);
}

#[test]
fn bcc_timestamps_give_the_span() {
    let r = read(Format::Biolatency, "bcc_biolatency_mT.txt");
    let run = &r.runs[0];
    assert!(!run.duration_unknown);
    assert_eq!(run.duration_s, 5.0);
    assert_eq!(run.ops[0].intervals.len(), 5);
    let per: Vec<u64> = run.ops[0].intervals.iter().map(|i| i.count).collect();
    let t = text("bcc_biolatency_mT.txt");
    let want: Vec<u64> = t
        .split("msecs")
        .skip(1)
        .map(|sec| bcc_rows(sec).iter().map(|r| r.2).sum())
        .collect();
    assert_eq!(per, want);
    // ext4dist prints `HH:MM:SS:` and `operation = 'read'` sections: one op per operation.
    let r = read(Format::Biolatency, "bcc_ext4dist_m.txt");
    let run = &r.runs[0];
    assert_eq!(run.duration_s, 3.0);
    let t = text("bcc_ext4dist_m.txt");
    for op in ["read", "write", "open"] {
        let want: u64 = t
            .split("operation = ")
            .filter(|s| s.starts_with(&format!("'{op}'")))
            .map(|s| bcc_rows(s).iter().map(|r| r.2).sum::<u64>())
            .sum();
        assert_eq!(run.op(op).unwrap().count, want, "{op}");
    }
    assert_eq!(unparsed(&r), 0);
}

#[test]
fn bcc_per_disk_sections_are_series_not_intervals() {
    // Older bcc prints `Bucket disk = 'xvdb'`.
    let r = read(Format::Biolatency, "bcc_biolatency_D.txt");
    let t = text("bcc_biolatency_D.txt");
    let mut want: Vec<(String, u64)> = t
        .split("Bucket disk = ")
        .skip(1)
        .map(|s| {
            let name = s.lines().next().unwrap().trim_matches('\'').to_string();
            (
                format!("biolatency {name}"),
                bcc_rows(s).iter().map(|r| r.2).sum(),
            )
        })
        .collect();
    want.sort();
    let mut got: Vec<(String, u64)> = r
        .runs
        .iter()
        .map(|run| (run.name.clone(), run.total_count()))
        .collect();
    got.sort();
    assert_eq!(got, want);
    for run in &r.runs {
        assert_eq!(run.ops[0].intervals.len(), 1, "{}", run.name);
        assert!(run.duration_unknown);
    }
    assert_eq!(unparsed(&r), 0);
    // Newer bcc prints `disk = sda` without quotes.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("new.txt");
    std::fs::write(
        &p,
        t.replace("Bucket disk = 'xvdb'", "disk = sda")
            .replace("Bucket disk = 'xvdc'", "disk = sdb")
            .replace("Bucket disk = 'xvda1'", "disk = nvme0n1"),
    )
    .unwrap();
    let r2 = ingest(&args(Format::Biolatency, vec![p], None), vec![]).unwrap();
    let names: Vec<&str> = r2.runs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["biolatency nvme0n1", "biolatency sda", "biolatency sdb"]
    );
}

#[test]
fn bcc_flag_sections_are_ops_and_reset_between_outputs() {
    let r = read(Format::Biolatency, "bcc_biolatency_Fm.txt");
    let t = text("bcc_biolatency_Fm.txt");
    let want: Vec<(String, u64)> = t
        .split("flags = ")
        .skip(1)
        .map(|s| {
            (
                s.lines().next().unwrap().to_string(),
                bcc_rows(s).iter().map(|r| r.2).sum(),
            )
        })
        .collect();
    assert_eq!(r.runs.len(), 1);
    assert_eq!(op_counts(&r.runs[0]), want);
    // A plain biolatency output concatenated after it is not a flag section.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cat.txt");
    std::fs::write(&p, format!("{t}\n{}", text("bcc_biolatency.txt"))).unwrap();
    let r = ingest(&args(Format::Biolatency, vec![p], None), vec![]).unwrap();
    let run = &r.runs[0];
    assert_eq!(run.op("block I/O").unwrap().count, 277);
    assert_eq!(run.op("Priority-Metadata-Write").unwrap().count, 9);
    // The -e summary line is recognised, not a section.
    let r = read(Format::Biolatency, "bcc_biolatency_e.txt");
    assert_eq!(op_counts(&r.runs[0]), [("block I/O".to_string(), 25)]);
    assert_eq!(unparsed(&r), 0);
}

#[test]
fn bpftrace_maps_stacks_and_banners() {
    for f in [
        "bpftrace_biolatency.txt",
        "bpftrace_runqlat.txt",
        "bpftrace_xfsdist.txt",
        "bpftrace_ssllatency.txt",
    ] {
        let r = read(Format::Bpftrace, f);
        assert_eq!(r.runs[0].total_count(), bpf_counts(&text(f)), "{f}");
        assert_eq!(
            unparsed(&r),
            0,
            "{f}: banners, @stat lines and printf text are known"
        );
        assert!(r.runs[0].duration_unknown, "{f}");
    }
    // Multi-line kernel-stack keys: one op per stack, the stack kept as its label.
    let r = read(Format::Bpftrace, "bpftrace_biostacks.txt");
    let run = &r.runs[0];
    assert_eq!(run.ops.len(), 2);
    assert!(run.ops[0]
        .op
        .starts_with("@usecs[blk_account_io_start+1;blk_mq_make_request+1102;"));
    assert!(run.ops[0].op.ends_with("kthread+289;ret_from_fork+53]"));
    assert_eq!(op_counts(run)[0].1, 1);
    assert_eq!(op_counts(run)[1].1, 560 + 218 + 26 + 2 + 53 + 60);
    // The author's `[...]` elision is the one line not understood.
    assert_eq!(unparsed(&r), 1);
}

#[test]
fn hdrhistogram_logs_of_every_encoding() {
    // (file, histograms, total count, p99.9 and max as HdrHistogram's own Java tests assert)
    for (f, n, total, p999, max) in [
        (
            "hdr_jHiccup-2.0.1.logV0.hlog",
            81,
            61256u64,
            1510998015u64,
            1569718271u64,
        ),
        (
            "hdr_jHiccup-2.0.6.logV1.hlog",
            88,
            65964,
            1829765119,
            1888485375,
        ),
        (
            "hdr_jHiccup-2.0.7S.logV2.hlog",
            62,
            48761,
            1745879039,
            1796210687,
        ),
    ] {
        let r = read(Format::Hlog, f);
        let run = &r.runs[0];
        let o = &run.ops[0];
        assert_eq!(o.count, total, "{f}");
        assert_eq!(o.intervals.len(), n, "{f}");
        // Java reports a bucket's highest value; iolens keeps each source bucket's middle:
        // within the source bucket (jHiccup's 2 significant digits: < 1 % wide).
        let rel = |a: u64, b: u64| (a as f64 / b as f64 - 1.0).abs();
        assert!(
            rel(o.summary.p999_ns, p999) < 0.005,
            "{f}: {}",
            o.summary.p999_ns
        );
        assert!(
            rel(o.summary.max_ns, max) < 0.005,
            "{f}: {}",
            o.summary.max_ns
        );
        assert_eq!(unparsed(&r), 0, "{f}");
        // Duration: first start to last end, as the log's own columns say.
        let rows: Vec<(f64, f64)> = text(f)
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('"'))
            .map(|l| {
                let v: Vec<&str> = l.split(',').collect();
                (v[0].parse().unwrap(), v[1].parse().unwrap())
            })
            .collect();
        let span = rows.iter().map(|r| r.0 + r.1).fold(0.0, f64::max) - rows[0].0;
        assert!(
            (run.duration_s - span).abs() < 0.01,
            "{f}: {} vs {span}",
            run.duration_s
        );
    }
    let r = read(Format::Hlog, "hdr_tagged-Log.logV2.hlog");
    let run = &r.runs[0];
    assert_eq!(run.total_count(), 32290);
    assert_eq!(run.op("A").unwrap().hist, run.op("hlog").unwrap().hist);
}

#[test]
fn fio_histogram_with_impossible_counts_is_refused() {
    let e = ingest(
        &args(
            Format::FioHist,
            vec![real("pbench_fio_clat_hist_garbage.1.log")],
            None,
        ),
        vec![],
    )
    .unwrap_err();
    let m = format!("{e:#}");
    assert!(m.contains("line 1") && m.contains("impossible"), "{m}");
    assert!(!m.contains("18446744073709551615"), "{m}");
}

#[test]
fn pylatencymap_conventions_inferred_and_stated() {
    // DTrace sample data: no datasource line, raw quantize() rows: lower-bound.
    let r = read(Format::Pylatencymap, "pylatencymap_test_DTrace_data.txt");
    let run = &r.runs[0];
    assert_eq!(
        run.ops[0].bucket_convention,
        iolens::results::BucketConvention::LowerBound
    );
    let why = run
        .spec
        .as_ref()
        .and_then(|s| s.bucket_convention_basis.clone())
        .unwrap();
    assert!(why.contains("DTrace"), "{why}");
    // Counts are cumulative: the run holds last record minus first.
    let t = text("pylatencymap_test_DTrace_data.txt");
    let sums: Vec<u64> = t
        .split("<begin record>")
        .skip(1)
        .map(|rec| {
            rec.lines()
                .filter_map(|l| {
                    let (v, c) = l.split_once('|')?;
                    v.trim().parse::<u64>().ok()?;
                    c.split_whitespace().last()?.parse::<u64>().ok()
                })
                .sum()
        })
        .collect();
    assert_eq!(run.total_count(), sums[sums.len() - 1] - sums[0]);
    // The p50 lies in a DTrace bucket [v, 2v) ns: 688 µs is inside [524288, 1048576).
    let p50 = run.ops[0].summary.p50_ns;
    assert!((524_288..1_048_576).contains(&p50), "{p50}");
    assert_eq!(unparsed(&r), 0);
    // Oracle data without a datasource line: upper-bound, from the label.
    let r = read(
        Format::Pylatencymap,
        "pylatencymap_example_latency_data.txt",
    );
    let run = &r.runs[0];
    assert_eq!(
        run.ops[0].bucket_convention,
        iolens::results::BucketConvention::UpperBound
    );
    assert!(run.spec_value()["bucket_convention_basis"]
        .as_str()
        .unwrap()
        .contains("event_histogram"));
    // SystemTap with its datasource line.
    let r = read(Format::Pylatencymap, "pylatencymap_test_SystemTap_data.txt");
    assert!(r.runs[0].spec_value()["bucket_convention_basis"]
        .as_str()
        .unwrap()
        .contains("datasource"));
    assert_eq!(unparsed(&r), 0);
}

#[test]
fn wrong_format_is_an_error_with_a_hint() {
    for (format, file, want) in [
        (Format::Biolatency, "bcc_biosnoop.txt", "--format biosnoop"),
        (
            Format::Bpftrace,
            "bcc_biolatency.txt",
            "--format biolatency",
        ),
        (
            Format::Biolatency,
            "hdr_jHiccup-2.0.7S.logV2.hlog",
            "--format hlog",
        ),
        (Format::Hlog, "bpftrace_biolatency.txt", "--format bpftrace"),
    ] {
        let e = ingest(&args(format, vec![real(file)], None), vec![]).unwrap_err();
        let m = format!("{e:#}");
        assert!(m.contains("no ") && m.contains(want), "{file}: {m}");
    }
}

#[test]
fn zero_latency_is_zero() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pairs.txt");
    std::fs::write(&p, "1000 0\n2000 5\n").unwrap();
    let r = ingest(&args(Format::TimeLatency, vec![p], None), vec![]).unwrap();
    assert_eq!(r.runs[0].ops[0].summary.min_ns, 0);
}

#[test]
fn impossible_rows_are_skipped_or_refused_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    // fio: time going backwards and a negative count, in an otherwise real log.
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sources/randread_clat_hist.1.log"),
    )
    .unwrap();
    let rows: Vec<&str> = src.lines().collect();
    let back = rows[1].replacen("2000,", "500,", 1);
    let neg = rows[2]
        .replacen(", 0,", ", -3,", 2)
        .replacen("2000, -3,", "2000, 1,", 1);
    let p = dir.path().join("bad_clat_hist.1.log");
    std::fs::write(&p, format!("{}\n{back}\n{neg}\n", rows[0])).unwrap();
    let r = ingest(&args(Format::FioHist, vec![p], None), vec![]).unwrap();
    let w = r.warnings.join("\n") + &r.runs[0].warnings.join("\n");
    assert!(
        w.contains("2 row(s) skipped") && w.contains("line 2"),
        "{w}"
    );
    assert!(w.contains("backwards"), "{w}");
    // bcc: a count no tool can print is an error naming the line; `1 : 2 -> 3` is no row.
    let t = text("bcc_biolatency.txt")
        .replace(": 52       |", ": 18446744073709551615 |")
        .replace("^C", "1 : 2 -> 3");
    let p = dir.path().join("bad.txt");
    std::fs::write(&p, t).unwrap();
    let e = ingest(&args(Format::Biolatency, vec![p], None), vec![]).unwrap_err();
    let m = format!("{e:#}");
    assert!(
        m.contains("line 14") && m.contains("not a possible event count"),
        "{m}"
    );
}

#[test]
fn binary_exits_non_zero_with_a_hint_and_prints_unknown_rates() {
    let bin = env!("CARGO_BIN_EXE_iolens");
    let out = std::process::Command::new(bin)
        .args(["ingest", "--format", "biolatency"])
        .arg(real("bcc_biosnoop.txt"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("try --format biosnoop"), "{err}");
    let out = std::process::Command::new(bin)
        .args(["ingest", "--format", "bpftrace"])
        .arg(real("bpftrace_biolatency.txt"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(
        so.contains("duration unknown") && so.contains(UNKNOWN_RATE),
        "{so}"
    );
    // PyLatencyMap records without timestamps have no duration either.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("untimed.txt");
    let t: String = text("pylatencymap_test_SystemTap_data.txt")
        .lines()
        .filter(|l| !l.starts_with("timestamp"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&p, t).unwrap();
    let r = ingest(&args(Format::Pylatencymap, vec![p], None), vec![]).unwrap();
    assert!(r.runs[0].duration_unknown);
    assert!(!r.runs[0].rates_known());
}

/// Every real 10046 trace committed here traces to a file that `show` reads: a session whose
/// calls carry no waits still covers the span of its `tim` values (one of them was written
/// with a duration of 0 s, which `trace` then refused to write and `show` to read).
#[test]
fn every_real_trace_traces_to_a_file_show_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    for e in std::fs::read_dir(real("")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "trc") {
            continue;
        }
        n += 1;
        let json = dir.path().join("t.json");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_iolens"))
            .args(["trace", "-q"])
            .arg(&p)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            p.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let r = Results::read_file(&json).unwrap();
        for run in &r.runs {
            assert!(
                run.duration_s > 0.0 || run.duration_unknown,
                "{}: {} has no duration",
                p.display(),
                run.name
            );
        }
        let show = std::process::Command::new(env!("CARGO_BIN_EXE_iolens"))
            .arg("show")
            .arg(&json)
            .output()
            .unwrap();
        assert!(
            show.status.success(),
            "{}: {}",
            p.display(),
            String::from_utf8_lossy(&show.stderr)
        );
    }
    assert!(n >= 4, "{n} real traces");
}

/// bcc's own biosnoop example: xvdc had a single I/O. Each disk is a run whose count and
/// latencies are those of its rows (read here from the text); xvdc's one I/O has a latency and an
/// unknown duration, as any untimed source, instead of failing the whole file.
#[test]
fn biosnoop_with_a_disk_of_one_io_reads() {
    let r = read(Format::Biosnoop, "bcc_biosnoop.txt");
    let t = text("bcc_biosnoop.txt");
    // (disk → latencies in ms, first and last time) from the text.
    let mut disks: std::collections::BTreeMap<String, (Vec<f64>, f64, f64)> = Default::default();
    for l in t.lines().skip(1) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (time, lat): (f64, f64) = (f[0].parse().unwrap(), f[7].parse().unwrap());
        let e = disks
            .entry(f[3].to_string())
            .or_insert((Vec::new(), time, time));
        e.0.push(lat);
        e.2 = time;
    }
    assert_eq!(r.runs.len(), disks.len());
    for (disk, (lats, t0, t1)) in &disks {
        let run = r
            .runs
            .iter()
            .find(|x| x.name == format!("biosnoop {disk}"))
            .unwrap_or_else(|| panic!("no run for {disk}"));
        assert_eq!(op_counts(run), vec![("write".into(), lats.len() as u64)]);
        let s = &run.ops[0].summary;
        let max_ns = (lats.iter().cloned().fold(0.0, f64::max) * 1e6).round() as u64;
        let min_ns = (lats.iter().cloned().fold(f64::MAX, f64::min) * 1e6).round() as u64;
        // Exact latencies in a histogram of 3 significant digits.
        assert!(
            s.max_ns.abs_diff(max_ns) * 1000 <= max_ns,
            "{disk}: {} vs {max_ns}",
            s.max_ns
        );
        assert!(
            s.min_ns.abs_diff(min_ns) * 1000 <= min_ns,
            "{disk}: {} vs {min_ns}",
            s.min_ns
        );
        if lats.len() == 1 {
            assert!(run.duration_unknown, "{disk}");
            assert!(run
                .warnings
                .iter()
                .any(|w| w.contains("duration is unknown")));
        } else {
            assert!(!run.duration_unknown, "{disk}");
            assert!(
                (run.duration_s - (t1 - t0)).abs() < 1e-3,
                "{disk}: {}",
                run.duration_s
            );
        }
    }
    assert_eq!(disks["xvdc"].0.len(), 1);
    // And through the binary: it exits 0 and prints the unknown rate.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_iolens"))
        .args(["ingest", "--format", "biosnoop"])
        .arg(real("bcc_biosnoop.txt"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `-q`'s help says warnings still go to stderr: a source's warnings (bcc's biosnoop example,
/// whose disk xvdc has one I/O and so an unknown duration) reached only the results file under
/// `-q`. Each warning the results hold is said on stderr, and nothing on stdout; without `-q`
/// the summary on stdout says them.
#[test]
fn quiet_ingest_still_says_the_sources_warnings_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_iolens"))
        .args(["-q", "ingest", "--format", "biosnoop"])
        .arg(real("bcc_biosnoop.txt"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = Results::read_file(&json).unwrap();
    let warnings: Vec<&String> = r
        .runs
        .iter()
        .flat_map(|x| &x.warnings)
        .chain(&r.warnings)
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains("duration is unknown")),
        "{warnings:?}"
    );
    // Lines on stderr may be fitted to a width: compare words.
    let said: Vec<&str> = err.split_whitespace().collect();
    for w in warnings {
        let words: Vec<&str> = w.split_whitespace().collect();
        assert!(
            said.windows(words.len()).any(|x| x == words.as_slice()),
            "warning {w:?} not on stderr: {err}"
        );
    }
    assert!(err.contains("warning:"), "{err}");
}
