//! Oracle 10046 traces read the way Method R defines the profile, and durations that never
//! depend on `--interval`, checked on real public traces (tests/fixtures/real, see the README
//! there) against numbers computed independently from the files.
//!
//! The expected profile numbers were computed from each file by a separate script that finds
//! the outermost calls by time containment (a call is outermost when no shallower call's
//! `[tim − e, tim]` contains its own) rather than by the parser's streaming rule, e.g.
//!
//! ```text
//! R     = max(tim) − min(tim − e | tim − ela)      over call and wait lines
//! CPU   = Σ c of the outermost calls
//! waits = Σ ela of every WAIT line
//! unaccounted-for = R − CPU − waits
//! ```

mod common;

use common::real;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use iolens::results::Results;
use iolens::sources::oracle_trace::{build_results, parse_trace, ParseOptions};
use iolens::sources::{ingest, Format, IngestOptions, LineReader};
use serde_json::Value;

/// The results document as its JSON (what `jq` sees).
fn doc(r: &Results) -> Value {
    serde_json::to_value(r).unwrap()
}

fn trace_at(path: &Path, interval: Duration) -> Results {
    let opts = ParseOptions {
        interval_ns: interval.as_nanos() as u64,
        ..Default::default()
    };
    let f = parse_trace(&mut LineReader::open(path).unwrap(), &opts).unwrap();
    build_results(vec![f], &opts, &[]).unwrap()
}

fn trace(path: &Path) -> Results {
    trace_at(path, Duration::from_secs(1))
}

fn us(v: &Value) -> i64 {
    (v.as_f64().unwrap() * 1e6).round() as i64
}

fn row<'a>(p: &'a Value, name: &str) -> &'a Value {
    p["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["component"] == name)
        .unwrap_or_else(|| panic!("no row {name}"))
}

/// R, CPU, waits and unaccounted-for in µs.
fn profile(p: &Value) -> (i64, i64, i64, i64) {
    (
        us(&p["response_time_s"]),
        us(&p["cpu_s"]),
        us(&p["wait_s"]),
        us(&p["unaccounted_s"]),
    )
}

#[test]
fn trace_that_begins_inside_plsql_counts_its_calls_cpu_and_waits() {
    // The real 12.2 trace below, cut to begin inside the PL/SQL block's EXEC: only dep=1 calls,
    // and the block's dbms_lock.sleep waits ('PL/SQL lock timer') lie in no call of the file.
    let r = trace(&real("js122a1_ora_9854_inside_plsql.trc"));
    let d = doc(&r);
    let p = &d["trace_profile"]["total"];
    assert_eq!(profile(p), (5_134_287, 6_514, 5_097_232, 30_541));
    assert_eq!(p["outermost_calls_by_depth"]["1"], 87);
    assert_eq!(us(&p["outermost_elapsed_s"]), 109_347);
    let timer = row(p, "PL/SQL lock timer");
    assert_eq!(timer["count"], 10);
    assert_eq!(timer["between_calls_count"], 0, "not between calls");
    assert_eq!(timer["outside_calls_count"], 10);
    assert_eq!(us(&p["between_calls_wait_s"]), 0);
    // Waits inside the dep=1 calls are within them.
    let dfsr = row(p, "db file sequential read");
    assert_eq!(
        (
            dfsr["between_calls_count"].as_u64(),
            dfsr["outside_calls_count"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert!(r.runs[0].warnings.iter().any(|w| w.contains("dep=1")));
    assert_eq!(r.runs[0].counters["outermost_calls"], 87.0);
    assert_eq!(d["source"]["files"][0]["unparsed"], 0);
}

#[test]
fn parent_call_includes_its_recursive_children() {
    // The whole trace: the PL/SQL EXEC (dep=0, c=23944) includes its 87 dep=1 calls.
    let r = trace(&real("js122a1_ora_9854.trc"));
    let d = doc(&r);
    let p = &d["trace_profile"]["total"];
    assert_eq!(profile(p), (5_501_002, 29_858, 5_369_709, 101_435));
    assert_eq!(p["outermost_calls_by_depth"], serde_json::json!({"0": 6}));
    assert_eq!(p["recursive_calls"], 87);
    let sn = row(p, "SQL*Net message from client");
    assert_eq!(sn["between_calls_count"], 2);
    let timer = row(p, "PL/SQL lock timer");
    assert_eq!(
        (
            timer["between_calls_count"].as_u64(),
            timer["outside_calls_count"].as_u64()
        ),
        (Some(0), Some(0)),
        "within the EXEC"
    );
    assert_eq!(us(&p["between_calls_wait_s"]), 2_435);
    assert!(r.runs[0].warnings.iter().all(|w| !w.contains("dep=")));
    // The run's duration is R, the traced span.
    assert!((r.runs[0].duration_s - 5.501002).abs() < 1e-9);
}

#[test]
fn nested_calls_without_parents_count_once_at_every_depth() {
    // A slice of a real trace inside a hard parse's recursion: dep=2 calls, some claiming
    // dep=3 children, and dep=3 calls whose dep=2 parent comes after the slice.
    let r = trace(&real("js122a1_ora_9850_dep2_dep3.trc"));
    let d = doc(&r);
    let p = &d["trace_profile"]["total"];
    assert_eq!(profile(p), (7_890, 6_659, 0, 1_231));
    assert_eq!(
        p["outermost_calls_by_depth"],
        serde_json::json!({"2": 35, "3": 3})
    );
    assert_eq!(d["source"]["files"][0]["unparsed"], 0);
}

#[test]
fn trcsess_markers_are_recognised_not_unparsed() {
    let r = trace(&real("trcsess_main_js122a1.trc"));
    let d = doc(&r);
    let f = &d["source"]["files"][0];
    assert_eq!(f["unparsed"], 0, "{f}");
    assert_eq!(f["ignored"]["trcsess marker"], 7);
}

#[test]
fn header_markers_and_memory_dumps_are_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("orcl_ora_1.trc");
    std::fs::write(
        &p,
        "Trace file C:\\APP\\ORACLE\\DIAG\\RDBMS\\ORCL\\ORCL\\TRACE\\orcl_ora_1.trc\n\
         Oracle Database 23ai Free Release 23.0.0.0.0 - Develop, Learn, and Run for Free\n\
         Version 23.4.0.24.05\n\
         Windows NT Version V6.2  \n\
         CPU                 : 4 - type 8664, 4 Physical Cores\n\
         Windows thread id: 1234, image: ORACLE.EXE (SHAD)\n\
         \n\
         *** 2024-05-01T10:00:00.000000+00:00\n\
         *** TRACE FILE RECREATED AFTER BEING REMOVED ***\n\
         BINDS #1:\n\
         \x20Bind#0\n\
         \x20 value=###\n\
         \x20 An invalid number has been seen.Memory contents are :\n\
         Dump of memory from 0x00007F1C70A4D6D8 to 0x00007F1C70A4D6E2\n\
         7F1C70A4D6D0          C1020000                   [....]\n\
         7F1C70A4D6E0 00000000                             [....]\n\
         WAIT #1: nam='db file sequential read' ela= 120 file#=4 block#=10 blocks=1 obj#=5 tim=1000\n\
         EXEC #1:c=100,e=300,p=1,cr=1,cu=0,mis=0,r=1,dep=0,og=1,plh=1,tim=1100\n",
    )
    .unwrap();
    let r = trace(&p);
    let d = doc(&r);
    let f = &d["source"]["files"][0];
    assert_eq!(f["unparsed"], 0, "{f}");
    assert_eq!(f["parsed"], 2);
}

#[test]
fn zero_length_waits_are_recorded_as_zero() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("orcl_ora_2.trc");
    std::fs::write(
        &p,
        "WAIT #1: nam='SQL*Net message to client' ela= 0 driver id=1 #bytes=1 p3=0 obj#=-1 tim=1000\n\
         WAIT #1: nam='SQL*Net message to client' ela= 0 driver id=1 #bytes=1 p3=0 obj#=-1 tim=2000\n",
    )
    .unwrap();
    let r = trace(&p);
    let op = r.runs[0].op("SQL*Net message to client").unwrap();
    let h = op.hist.decode().unwrap();
    assert_eq!((h.len(), h.max()), (2, 0));
    assert_eq!(op.summary.max_ns, 0);
    let iv = op.intervals[0].hist.decode().unwrap();
    assert_eq!((iv.len(), iv.max()), (2, 0));
}

#[test]
fn trace_without_trace_lines_is_an_error_even_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.trc");
    std::fs::write(&empty, "").unwrap();
    let noise = dir.path().join("noise.trc");
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&noise, bytes).unwrap();
    let bcc =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sources/biolatency_TD.txt");
    for f in [&empty, &noise, &bcc] {
        let out = Command::new(env!("CARGO_BIN_EXE_iolens"))
            .arg("trace")
            .arg("-q")
            .arg(f)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: exit 0", f.display());
        assert!(
            err.contains("no Oracle 10046 trace lines"),
            "{}: {err}",
            f.display()
        );
    }
}

/// Duration, counts and mean rates of a run.
fn shape(r: &Results) -> Vec<(String, u64, i64)> {
    r.runs
        .iter()
        .flat_map(|run| {
            run.ops
                .iter()
                .map(move |o| (o.op.clone(), o.count, (run.duration_s * 1e6).round() as i64))
        })
        .collect()
}

fn assert_intervals_cover(r: &Results, interval_s: f64) {
    for run in &r.runs {
        for o in &run.ops {
            let n = o.intervals.len();
            let total: f64 = o.intervals.iter().map(|i| i.duration_s).sum();
            assert!(
                (total - run.duration_s).abs() < 1e-6,
                "{}: intervals cover {total} s of {} s",
                o.op,
                run.duration_s
            );
            assert_eq!(o.intervals.iter().map(|i| i.count).sum::<u64>(), o.count);
            for (i, iv) in o.intervals.iter().enumerate() {
                if n > 1 {
                    assert!(
                        iv.duration_s >= interval_s / 2.0 - 1e-9,
                        "{}: interval {i} of {n} is a sliver of {} s",
                        o.op,
                        iv.duration_s
                    );
                }
                assert!(iv.duration_s <= interval_s * 1.5 + 1e-9);
            }
            for w in o.intervals.windows(2) {
                assert!((w[0].start_s + w[0].duration_s - w[1].start_s).abs() < 1e-9);
            }
        }
    }
}

#[test]
fn trace_duration_does_not_depend_on_interval() {
    let p = real("js122a1_ora_9854.trc");
    let base = trace_at(&p, Duration::from_secs(1));
    for s in [1, 10, 60] {
        let r = trace_at(&p, Duration::from_secs(s));
        assert_eq!(shape(&r), shape(&base), "--interval {s}s");
        assert!((r.runs[0].duration_s - 5.501002).abs() < 1e-9);
        assert_intervals_cover(&r, s as f64);
    }
}

fn pairs_at(path: &Path, interval: Duration) -> Results {
    let args = IngestOptions {
        format: Format::TimeLatency,
        files: vec![path.to_path_buf()],
        unit: None,
        time_unit: None,
        interval,
        duration: None,
    };
    ingest(&args, vec![]).unwrap()
}

#[test]
fn time_latency_duration_and_rate_do_not_depend_on_interval() {
    // 29 160 events over exactly 177.8 s (first to last): 164/s at every interval, where the
    // old whole-interval rounding made it 240 s and 122/s at --interval 60s.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pairs.txt");
    let n = 29_160u64;
    let mut s = String::new();
    for i in 0..n {
        let t_us = 5_000_000 + i * 177_800_000 / (n - 1);
        s.push_str(&format!("{t_us} {}\n", 100 + i % 900));
    }
    std::fs::write(&p, s).unwrap();
    for secs in [1, 10, 60] {
        let r = pairs_at(&p, Duration::from_secs(secs));
        let run = &r.runs[0];
        assert!(
            (run.duration_s - 177.8).abs() < 1e-9,
            "--interval {secs}s: {} s",
            run.duration_s
        );
        assert_eq!(run.ops[0].count, n);
        let rate = n as f64 / run.duration_s;
        assert!((rate - 164.0).abs() < 0.1, "{rate}/s");
        assert_intervals_cover(&r, secs as f64);
        // The last interval keeps its real length: 177.8 s is not a whole number of them.
        let last = run.ops[0].intervals.last().unwrap();
        let whole = (177.8f64 / secs as f64).floor() * secs as f64;
        if secs > 1 {
            assert!(last.duration_s < secs as f64 * 1.5);
            assert!((last.start_s + last.duration_s - 177.8).abs() < 1e-9);
            assert!(last.start_s <= whole);
        }
    }
}

#[test]
fn real_pairs_fixture_same_shape_at_every_interval() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sources/pairs_us.txt");
    let base = pairs_at(&p, Duration::from_secs(1));
    // 1.0 s to 3.6 s: a 2.6 s span.
    assert!((base.runs[0].duration_s - 2.6).abs() < 1e-9);
    for s in [1, 10, 60] {
        let r = pairs_at(&p, Duration::from_secs(s));
        assert_eq!(shape(&r), shape(&base), "--interval {s}s");
        assert_intervals_cover(&r, s as f64);
    }
}
