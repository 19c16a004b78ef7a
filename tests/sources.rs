//! Readers of traces, histogram snapshots and latency logs: real-format fixtures for every
//! version quirk, property tests on generated traces, a fuzz-style robustness test, and JSON
//! round trips through the binary.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use hdrhistogram::Histogram;
use iolens::histogram::{new_histogram, record_ns};
use iolens::results::{BucketConvention, Results, RunResult};
use iolens::sources::oracle_trace::{build_results, parse_trace, ParseOptions};
use iolens::sources::{ingest, Format, IngestOptions, LineReader, Unit};
use proptest::prelude::*;
use serde_json::Value;

/// The results document as its JSON (what `jq` sees).
fn doc(r: &Results) -> Value {
    serde_json::to_value(r).unwrap()
}

fn fixture(name: &str) -> PathBuf {
    common::fixture("sources").join(name)
}

fn trace(paths: &[PathBuf], events: &[&str]) -> Results {
    let opts = ParseOptions::default();
    let files = paths
        .iter()
        .map(|p| parse_trace(&mut LineReader::open(p).unwrap(), &opts).unwrap())
        .collect();
    let ev: Vec<String> = events.iter().map(|s| s.to_string()).collect();
    build_results(files, &opts, &ev).unwrap()
}

fn ingest_files(format: Format, files: &[PathBuf], unit: Option<Unit>) -> Results {
    let args = IngestOptions {
        format,
        files: files.to_vec(),
        unit,
        time_unit: None,
        interval: std::time::Duration::from_secs(1),
        duration: None,
    };
    ingest(&args, vec![]).unwrap()
}

fn hist(r: &RunResult, op: &str) -> Histogram<u64> {
    r.op(op)
        .unwrap_or_else(|| panic!("no op {op} in {}", r.name))
        .hist
        .decode()
        .unwrap()
}

/// Number of recorded values in [lo, hi) ns (by each value's lowest equivalent).
fn count_in(h: &Histogram<u64>, lo: u64, hi: u64) -> u64 {
    h.iter_recorded()
        .filter(|v| {
            let x = h.lowest_equivalent(v.value_iterated_to());
            x >= lo && x < hi
        })
        .map(|v| v.count_at_value())
        .sum()
}

fn profile_row<'a>(p: &'a Value, component: &str) -> &'a Value {
    p["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["component"] == component)
        .unwrap_or_else(|| panic!("no profile row {component}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// Equal within HdrHistogram's 3-significant-digit precision.
fn near(got: u64, want: u64) -> bool {
    (got as f64 / want as f64 - 1.0).abs() < 0.001
}

fn assert_intervals_consistent(r: &RunResult) {
    for o in &r.ops {
        let sum: u64 = o.intervals.iter().map(|i| i.count).sum();
        assert_eq!(sum, o.count, "{}: intervals sum to the total", o.op);
        let mut m = new_histogram();
        for i in &o.intervals {
            m.add(i.hist.decode().unwrap()).unwrap();
        }
        assert_eq!(
            m,
            o.hist.decode().unwrap(),
            "{}: intervals merge to total",
            o.op
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Oracle 10046 traces, one fixture per version quirk

#[test]
fn trace_10g_epoch_tim_method_r_profile() {
    let r = trace(&[fixture("ora10g_accmeas2_j004_32116.trc")], &[]);
    let d = doc(&r);
    assert_eq!(r.runs.len(), 1);
    let run = &r.runs[0];
    assert_eq!(run.name, "trace accmeas2 session 213.1177");
    // tim is Unix-epoch µs in 10g: 1193690114589134 = 2007-10-29 20:35:14.589 UTC.
    // The span starts when the first line's wait began (tim − ela), 20:35:14.577959.
    assert_eq!(run.started, "2007-10-29T20:35:14.577Z");
    assert_eq!(run.op("db file sequential read").unwrap().count, 2);
    let p = &d["trace_profile"]["total"];
    // R = the traced span: last tim 1193690114930200 − first start (1193690114589134 − 11175).
    assert!(close(p["response_time_s"].as_f64().unwrap(), 0.352241));
    // CPU of the outermost calls: the dep=0 EXEC (5000 µs, including its dep=1 children) and
    // PARSE (0); unaccounted = R − CPU − waits (270632 µs).
    assert!(close(p["cpu_s"].as_f64().unwrap(), 0.005));
    assert!(close(p["unaccounted_s"].as_f64().unwrap(), 0.076609));
    assert_eq!(p["recursive_calls"], 3);
    let sn = profile_row(p, "SQL*Net message from client");
    assert!(close(sn["between_calls_seconds"].as_f64().unwrap(), 0.25));
    let dfsr = profile_row(p, "db file sequential read");
    assert_eq!(
        dfsr["between_calls_count"], 0,
        "waits inside EXEC are within the call"
    );
    let slow = d["trace_slowest"].as_array().unwrap();
    assert_eq!(slow[0]["line"], 31);
    assert_eq!(slow[1]["line"], 26);
    assert_eq!(slow[1]["file"], 13);
    assert_eq!(slow[1]["time"], "2007-10-29T20:35:14.589Z");
    // The first line (the file's path) is recognised as header, nothing unparsed.
    assert_eq!(d["source"]["files"][0]["unparsed"], 0);
}

#[test]
fn trace_9i_p1_p2_p3_without_tim() {
    let r = trace(&[fixture("ora9i_orcl_ora_4321.trc")], &[]);
    let d = doc(&r);
    let p = &d["trace_profile"]["total"];
    // No tim on WAIT lines: 'SQL*Net message from client' is between calls by name.
    assert!(close(
        profile_row(p, "SQL*Net message from client")["between_calls_seconds"]
            .as_f64()
            .unwrap(),
        1.5
    ));
    // R = span of the calls' tim (72366 µs) + the trailing 1.5 s wait that has no tim.
    assert!(close(p["response_time_s"].as_f64().unwrap(), 1.572366));
    assert!(close(p["unaccounted_s"].as_f64().unwrap(), 0.013228));
    // p1/p2/p3 of db file events are file#/block#/blocks.
    let io = d["trace_io"]["events"].as_array().unwrap();
    let scattered = io
        .iter()
        .find(|e| e["event"] == "db file scattered read")
        .unwrap();
    assert_eq!(scattered["files"][0]["file"], 7);
    assert_eq!(scattered["files"][0]["blocks"], 8);
    assert_eq!(scattered["files"][0]["min_block"], 12345);
    assert_eq!(d["source"]["files"][0]["unparsed"], 0);
    // The first tim is anchored to the '*** 2008-01-30 12:00:00.001' line before it.
    assert_eq!(r.runs[0].started, "2008-01-30T12:00:00.001Z");
}

#[test]
fn trace_11g_counter_tim_lob_error_binds_and_object_sentinel() {
    let r = trace(&[fixture("ora11g_orcl_ora_5555.trc")], &[]);
    let d = doc(&r);
    let f = &d["source"]["files"][0];
    assert_eq!(f["unparsed"], 0, "{f}");
    assert_eq!(f["ignored"]["ERROR"], 1);
    assert_eq!(f["ignored"]["PARSE ERROR"], 1);
    assert_eq!(f["ignored"]["binds"], 5);
    assert_eq!(f["ignored"]["BINDS"], 1);
    assert_eq!(f["ignored"]["XCTEND"], 1);
    let p = &d["trace_profile"]["total"];
    assert_eq!(p["calls"]["LOBREAD"]["count"], 1);
    assert_eq!(p["errors"]["ORA-01403"], 1);
    assert!(close(p["response_time_s"].as_f64().unwrap(), 0.0183));
    assert!(close(p["cpu_s"].as_f64().unwrap(), 0.0027));
    assert!(close(p["unaccounted_s"].as_f64().unwrap(), 0.001562));
    // The log file sync lies inside the commit's EXEC; the direct path read inside LOBREAD.
    assert_eq!(profile_row(p, "log file sync")["between_calls_count"], 0);
    assert_eq!(profile_row(p, "direct path read")["between_calls_count"], 0);
    assert_eq!(
        profile_row(p, "SQL*Net message from client")["between_calls_count"],
        2
    );
    // obj#=4294967295 means "no object", like -1.
    let io = d["trace_io"]["events"].as_array().unwrap();
    let dpr = io
        .iter()
        .find(|e| e["event"] == "direct path read")
        .unwrap();
    assert_eq!(dpr["objects"][0]["obj"], -1);
    assert_eq!(dpr["files"][0]["blocks"], 4);
    // tim is a counter here: anchored to the first '***' timestamp.
    // The span starts when the first wait began, just before the anchored first tim.
    assert_eq!(r.runs[0].started, "2014-05-01T09:59:59.999Z");
}

#[test]
fn trace_12c_iso_timestamps_and_parameter_names_with_spaces() {
    let r = trace(&[fixture("ora12c_cdb1_ora_9876.trc")], &[]);
    let d = doc(&r);
    let run = &r.runs[0];
    assert_eq!(run.name, "trace cdb1 session 152.56419");
    assert_eq!(run.started, "2017-09-12T08:32:11.123Z");
    // 2.325 s from 08:32:11.123: 0.877 s to the next whole second, then 1.448 s (the 0.448 s
    // tail joins it).
    assert_eq!(run.ops[0].intervals.len(), 2);
    assert_intervals_consistent(run);
    // `ela=2` (no space) and `ela= 2` both parse.
    assert_eq!(run.op("SQL*Net message to client").unwrap().count, 2);
    let dpr = run.op("direct path read").unwrap();
    assert_eq!(dpr.count, 2);
    assert!(near(dpr.summary.max_ns, 2_345_000));
    let io = d["trace_io"]["events"].as_array().unwrap();
    let e = io
        .iter()
        .find(|e| e["event"] == "direct path read")
        .unwrap();
    assert_eq!(e["files"][0]["file"], 12);
    assert_eq!(e["files"][0]["blocks"], 29);
    assert_eq!(e["files"][0]["min_block"], 131);
    assert_eq!(e["files"][0]["max_block"], 144);
    let slow = d["trace_slowest"].as_array().unwrap();
    assert_eq!(slow[0]["line"], 43);
    assert_eq!(slow[0]["time"], "2017-09-12T08:32:13.448Z");
    let p = &d["trace_profile"]["total"];
    assert!(close(p["response_time_s"].as_f64().unwrap(), 2.324994));
    assert!(close(p["unaccounted_s"].as_f64().unwrap(), 0.000562));
    assert_eq!(d["source"]["files"][0]["unparsed"], 0);
}

#[test]
fn trace_without_header_uses_relative_time() {
    let r = trace(&[fixture("noheader_fragment.trc")], &[]);
    let run = &r.runs[0];
    assert_eq!(run.started, "");
    assert_eq!(run.spec_value()["anchored"], false);
    assert!(run.warnings.iter().any(|w| w.contains("relative")));
    // The first 0.444 s sliver joins the next interval.
    let counts: Vec<u64> = run.ops[0].intervals.iter().map(|i| i.count).collect();
    assert_eq!(counts, vec![2, 1, 1, 1, 1]);
    let h = hist(run, "db file sequential read");
    assert_eq!(h.len(), 6);
    assert!(near(h.max(), 10_118_000));
}

#[test]
fn trace_continued_files_join_one_session_even_gzipped() {
    let dir = tempfile::tempdir().unwrap();
    // Compressed, and named without .gz: detected by its magic bytes.
    let gz = dir.path().join("second-part.bin");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::default(),
    );
    e.write_all(&std::fs::read(fixture("orcl_ora_777_2.trc")).unwrap())
        .unwrap();
    e.finish().unwrap();
    let r = trace(&[gz.clone(), fixture("orcl_ora_777.trc")], &[]);
    let d = doc(&r);
    assert_eq!(r.runs.len(), 1, "one session");
    let run = &r.runs[0];
    assert_eq!(run.spec_value()["files"].as_array().unwrap().len(), 2);
    let counts: Vec<u64> = run.ops[0].intervals.iter().map(|i| i.count).collect();
    assert_eq!(counts, vec![2, 1, 2]);
    // The first wait began 1 ms before the first tim, anchored at 10:00:00.000.
    assert_eq!(run.started, "2024-03-01T09:59:59.999Z");
    let files = d["source"]["files"].as_array().unwrap();
    let g = files
        .iter()
        .find(|f| f["path"] == gz.to_str().unwrap())
        .unwrap();
    assert_eq!(g["gzip"], true);
    assert_intervals_consistent(run);
}

#[test]
fn trace_damaged_lines_are_counted_with_line_numbers() {
    let r = trace(&[fixture("damaged.trc")], &[]);
    let d = doc(&r);
    let f = &d["source"]["files"][0];
    assert_eq!(f["unparsed"], 5);
    let lines: Vec<u64> = f["unparsed_first"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, vec![2, 3, 4, 5, 7]);
    assert_eq!(r.runs[0].op("db file sequential read").unwrap().count, 2);
    assert!(r.warnings.iter().any(|w| w.contains("5 line(s)")));
}

#[test]
fn trace_event_filter_limits_histograms_not_profile() {
    let r = trace(
        &[fixture("ora12c_cdb1_ora_9876.trc")],
        &["db file sequential read"],
    );
    let d = doc(&r);
    let ops: Vec<&str> = r.runs[0].ops.iter().map(|o| o.op.as_str()).collect();
    assert_eq!(ops, vec!["db file sequential read"]);
    let p = &d["trace_profile"]["total"];
    profile_row(p, "direct path read");
    let slow = d["trace_slowest"].as_array().unwrap();
    assert!(slow.iter().all(|w| w["event"] == "db file sequential read"));
}

// ---------------------------------------------------------------------------------------------
// Property tests: generated traces parse back to exactly the waits written

#[derive(Clone, Debug)]
struct GenWait {
    event: usize,
    ela: u64,
    gap: u64,
    file: u32,
    block: u64,
    obj_none: bool,
    obj_style: bool,
    tight: bool,
}

const EVENTS: [&str; 4] = [
    "db file sequential read",
    "direct path read",
    "log file parallel write",
    "SQL*Net message from client",
];

fn gen_wait() -> impl Strategy<Value = GenWait> {
    (
        0..EVENTS.len(),
        1u64..5_000_000,
        0u64..800_000,
        1u32..40,
        0u64..10_000_000,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(event, ela, gap, file, block, obj_none, obj_style, tight)| GenWait {
                event,
                ela,
                gap,
                file,
                block,
                obj_none,
                obj_style,
                tight,
            },
        )
}

fn render_trace(waits: &[GenWait], header: bool) -> String {
    let mut s = String::new();
    if header {
        s.push_str("Trace file /x/orcl_ora_1.trc\nInstance name: orcl\n\n*** 2024-01-01 00:00:00.000\n*** SESSION ID:(1.2) 2024-01-01 00:00:00.000\n");
    }
    let mut tim = 5_000_000_000u64;
    for (i, w) in waits.iter().enumerate() {
        tim += w.gap + w.ela;
        let ela = if w.tight {
            format!("ela={}", w.ela)
        } else {
            format!("ela= {}", w.ela)
        };
        let obj = if w.obj_none {
            if w.obj_style {
                "-1".to_string()
            } else {
                "4294967295".to_string()
            }
        } else {
            format!("{}", 70000 + w.file)
        };
        let params = match w.event {
            0 => format!("file#={} block#={} blocks=1", w.file, w.block),
            1 => format!("file number={} first dba={} block cnt=8", w.file, w.block),
            2 => "files=1 blocks=2 requests=1".to_string(),
            _ => "driver id=1650815232 #bytes=1 p3=0".to_string(),
        };
        s.push_str(&format!(
            "WAIT #{}: nam='{}' {ela} {params} obj#={obj} tim={tim}\n",
            i % 3,
            EVENTS[w.event]
        ));
        if i % 5 == 4 {
            s.push_str(&format!(
                "FETCH #1:c=10,e=20,p=0,cr=1,cu=0,mis=0,r=1,dep=0,og=1,plh=1,tim={}\n",
                tim + 25
            ));
            tim += 25;
        }
    }
    s
}

fn parse_text(text: &str) -> Results {
    let mut r = LineReader::from_reader(
        Box::new(std::io::Cursor::new(text.as_bytes().to_vec())),
        "gen",
    )
    .unwrap();
    let opts = ParseOptions::default();
    let f = parse_trace(&mut r, &opts).unwrap();
    build_results(vec![f], &opts, &[]).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    #[test]
    fn generated_trace_parses_back_exactly(
        waits in proptest::collection::vec(gen_wait(), 1..120),
        header in any::<bool>(),
    ) {
        let r = parse_text(&render_trace(&waits, header));
        let d = doc(&r);
        prop_assert_eq!(d["source"]["files"][0]["unparsed"].as_u64(), Some(0));
        let run = &r.runs[0];
        for (i, name) in EVENTS.iter().enumerate() {
            let mine: Vec<u64> =
                waits.iter().filter(|w| w.event == i).map(|w| w.ela).collect();
            match run.op(name) {
                None => prop_assert!(mine.is_empty()),
                Some(o) => {
                    let mut want = new_histogram();
                    for e in &mine {
                        record_ns(&mut want, e * 1000);
                    }
                    prop_assert_eq!(o.count, mine.len() as u64);
                    prop_assert_eq!(o.hist.decode().unwrap(), want);
                    let row = profile_row(&d["trace_profile"]["total"], name);
                    prop_assert_eq!(row["count"].as_u64(), Some(mine.len() as u64));
                    let total: u64 = mine.iter().sum();
                    prop_assert!(close(row["seconds"].as_f64().unwrap(), total as f64 / 1e6));
                }
            }
        }
        assert_intervals_consistent(run);
        // I/O breakdown: per-file counts of single-block reads.
        let io = d["trace_io"]["events"].as_array().unwrap();
        if let Some(e) = io.iter().find(|e| e["event"] == EVENTS[0]) {
            for f in e["files"].as_array().unwrap() {
                let file = f["file"].as_u64().unwrap() as u32;
                let n = waits.iter().filter(|w| w.event == 0 && w.file == file).count();
                prop_assert_eq!(f["count"].as_u64(), Some(n as u64));
            }
        }
        prop_assert_eq!(run.spec_value()["anchored"].as_bool(), Some(header));
    }

    /// Fuzz: arbitrary line soup never panics and every line is accounted for.
    #[test]
    fn arbitrary_lines_never_panic_and_are_accounted(
        lines in proptest::collection::vec(
            prop_oneof![
                "WAIT #[0-9]{1,3}: nam='[a-z *]{0,12}' ela= ?[0-9a-z]{0,6}( [a-z# ]{1,8}=-?[0-9]{0,12}){0,5}( tim=[0-9]{0,14})?",
                "(PARSE|EXEC|FETCH|CLOSE) #[0-9]{0,4}:(c=[0-9]{0,4},e=[0-9]{0,5},dep=[0-2],tim=[0-9]{0,12})?",
                "\\*\\*\\* [0-9:T. +-]{0,30}",
                "(PARSING IN CURSOR|END OF STMT|PARSE ERROR #1:len=[0-9]{1,3}|BINDS #1:| Bind#0|STAT #1|XCTEND|LOBREAD:c=1,e=2)",
                "[ -~]{0,40}",
                any::<Vec<u8>>().prop_map(|v| String::from_utf8_lossy(&v).replace('\n', " ")),
            ],
            0..60,
        )
    ) {
        let text = lines.join("\n");
        let r = parse_text(&text);
        let d = doc(&r);
        let f = &d["source"]["files"][0];
        let ignored: u64 = f["ignored"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        prop_assert_eq!(
            f["lines"].as_u64().unwrap(),
            f["parsed"].as_u64().unwrap() + ignored + f["unparsed"].as_u64().unwrap()
        );
        for run in &r.runs {
            assert_intervals_consistent(run);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Histogram snapshots and logs

#[test]
fn event_histogram_micro_deltas_sentinel_and_restart() {
    let r = ingest_files(
        Format::EventHistogram,
        &[fixture("event_histogram_micro.csv")],
        None,
    );
    assert_eq!(r.runs.len(), 2, "a restart starts a new series");
    let s1 = &r.runs[0];
    let s2 = &r.runs[1];
    assert_eq!(s1.started, "2024-03-01T10:00:00.000Z");
    assert_eq!(s2.started, "2024-03-01T10:00:30.000Z");
    assert!(s2.name.contains("series 2"));
    assert!(s2.warnings.iter().any(|w| w.contains("restart")));
    let d = s1.op("db file sequential read").unwrap();
    assert_eq!(d.bucket_convention, BucketConvention::UpperBound);
    assert_eq!(d.count, 754);
    assert_eq!(
        d.intervals.iter().map(|i| i.count).collect::<Vec<_>>(),
        vec![550, 204]
    );
    assert_eq!(d.intervals[1].start_s, 10.0);
    assert_eq!(d.intervals[1].duration_s, 10.0);
    // Interval 1: buckets 64/128/256 µs are upper bounds: values in [32, 256) µs.
    let h1 = d.intervals[0].hist.decode().unwrap();
    assert_eq!(count_in(&h1, 32_000, 256_000), 550);
    assert_eq!(count_in(&h1, 32_000, 64_000), 100);
    // Interval 2: bucket 8192 µs → [4096, 8192) µs; the sentinel bucket → ≥ 2^31 µs.
    let h2 = d.intervals[1].hist.decode().unwrap();
    assert_eq!(count_in(&h2, 4_096_000, 8_192_000), 3);
    assert_eq!(count_in(&h2, 2_147_483_648_000, u64::MAX), 1);
    assert_eq!(s1.op("log file sync").unwrap().count, 10);
    assert_eq!(s2.op("db file sequential read").unwrap().count, 25);
    assert_eq!(s2.op("log file sync").unwrap().count, 3);
    assert_intervals_consistent(s1);
}

#[test]
fn event_histogram_milli_sqlplus_colsep_spool() {
    let r = ingest_files(
        Format::EventHistogram,
        &[fixture("event_histogram_milli.lst")],
        None,
    );
    let d = doc(&r);
    assert_eq!(r.runs.len(), 1);
    let h = hist(&r.runs[0], "db file sequential read");
    assert_eq!(h.len(), 1000);
    // Bucket 1 ms holds [0, 1) ms, bucket 8 ms holds [4, 8) ms.
    assert_eq!(count_in(&h, 0, 1_000_000), 600);
    assert_eq!(count_in(&h, 1_000_000, 2_000_000), 100);
    assert_eq!(count_in(&h, 4_000_000, 8_000_000), 300);
    assert_eq!(d["source"]["files"][0]["unparsed"], 0);
    assert_eq!(r.runs[0].duration_s, 60.0);
}

#[test]
fn pylatencymap_records_both_conventions() {
    let r = ingest_files(
        Format::Pylatencymap,
        &[fixture("pylatencymap_records.txt")],
        None,
    );
    assert_eq!(r.runs.len(), 2);
    let ora = &r.runs[0].ops[0];
    assert_eq!(ora.bucket_convention, BucketConvention::UpperBound);
    assert_eq!(ora.count, 360);
    assert_eq!(
        ora.intervals.iter().map(|i| i.count).collect::<Vec<_>>(),
        vec![302, 58]
    );
    let h = ora.hist.decode().unwrap();
    assert_eq!(
        count_in(&h, 1_000_000, 2_000_000),
        220,
        "bucket 2 ms = [1, 2) ms"
    );
    let bpf = &r.runs[1].ops[0];
    assert_eq!(bpf.bucket_convention, BucketConvention::LowerBound);
    assert_eq!(bpf.count, 20);
    let h = bpf.hist.decode().unwrap();
    assert_eq!(
        count_in(&h, 64_000, 128_000),
        15,
        "bucket 64 µs = [64, 128) µs"
    );
    assert_eq!(count_in(&h, 256_000, 512_000), 5);
    assert_eq!(r.runs[1].started, "2024-03-01T10:00:00.000Z");
}

#[test]
fn biolatency_per_disk_sections_with_timestamps() {
    let r = ingest_files(Format::Biolatency, &[fixture("biolatency_TD.txt")], None);
    let d = doc(&r);
    assert_eq!(r.runs.len(), 2);
    let sda = r.runs.iter().find(|r| r.name.ends_with("sda")).unwrap();
    let o = sda.op("block I/O").unwrap();
    assert_eq!(o.bucket_convention, BucketConvention::LowerBound);
    assert_eq!(
        o.intervals.iter().map(|i| i.count).collect::<Vec<_>>(),
        vec![100, 51]
    );
    assert_eq!(sda.spec_value()["timestamps"], true);
    let h = o.hist.decode().unwrap();
    // Row "8192 -> 16383" holds [8192, 16384) µs.
    assert_eq!(count_in(&h, 8_192_000, 16_384_000), 1);
    assert_eq!(count_in(&h, 64_000, 128_000), 100);
    let nvme = r.runs.iter().find(|r| r.name.ends_with("nvme0n1")).unwrap();
    assert_eq!(nvme.ops[0].count, 1012);
    assert_eq!(d["source"]["files"][0]["unparsed"], 0);
}

#[test]
fn biolatency_msecs_per_flag() {
    let r = ingest_files(Format::Biolatency, &[fixture("biolatency_mF.txt")], None);
    let run = &r.runs[0];
    let read = hist(run, "Read");
    assert_eq!(read.len(), 100);
    assert_eq!(count_in(&read, 2_000_000, 4_000_000), 10);
    let w = hist(run, "Sync-Write");
    assert_eq!(count_in(&w, 4_000_000, 8_000_000), 1);
}

#[test]
fn bpftrace_maps_units_from_names() {
    let r = ingest_files(
        Format::Bpftrace,
        &[fixture("bpftrace_biolatency.txt")],
        None,
    );
    let run = &r.runs[0];
    let us = hist(run, "@usecs");
    assert_eq!(us.len(), 258);
    assert_eq!(count_in(&us, 1_024_000, 2_048_000), 1, "[1K, 2K) µs");
    let ns = hist(run, "@lat_ns[nvme0n1]");
    assert_eq!(ns.len(), 80);
    assert_eq!(count_in(&ns, 8_192, 16_384), 52, "[8K, 16K) ns");
    // Units come from the names: the only warning is that the span is unknown.
    assert!(
        run.warnings.iter().all(|w| !w.contains("unit")),
        "{:?}",
        run.warnings
    );
    assert!(run.duration_unknown);
}

#[test]
fn biosnoop_per_disk_with_and_without_queue_column() {
    let r = ingest_files(
        Format::Biosnoop,
        &[fixture("biosnoop.txt"), fixture("biosnoop_Q.txt")],
        None,
    );
    let sda = r.runs.iter().find(|r| r.name == "biosnoop sda").unwrap();
    let read = sda.op("read").unwrap();
    assert_eq!(read.count, 3);
    assert_eq!(read.bytes, 3 * 8192);
    assert_eq!(read.summary.max_ns, hist(sda, "read").max());
    assert!(near(hist(sda, "read").max(), 4_750_000));
    assert_eq!(sda.op("write").unwrap().bytes, 4096 + 12288);
    let q = r.runs.last().unwrap();
    assert_eq!(q.name, "biosnoop nvme0n1");
    assert_eq!(q.op("read").unwrap().count, 2);
    assert!(near(hist(q, "read").min(), 90_000));
}

#[test]
fn fio_latency_log_ns() {
    let r = ingest_files(Format::FioLog, &[fixture("randread_clat.1.log")], None);
    let run = &r.runs[0];
    assert_eq!(run.name, "fio clat log");
    let read = run.op("read").unwrap();
    assert_eq!(read.count, 6);
    assert_eq!(read.bytes, 6 * 8192);
    // Completions at 0–2.4 s: the 0.4 s tail after 2.0 s joins the interval before.
    assert_eq!(
        read.intervals.iter().map(|i| i.count).collect::<Vec<_>>(),
        vec![4, 2]
    );
    assert!(near(hist(run, "write").max(), 2_310_456));
}

#[test]
fn fio_histogram_log_coarse_bins() {
    let r = ingest_files(
        Format::FioHist,
        &[fixture("randread_clat_hist.1.log")],
        None,
    );
    let run = &r.runs[0];
    let read = hist(run, "read");
    assert_eq!(read.len(), 15);
    // Coarse bin 200 (stride 4) = fine bins 800..803 = [196608, 204800) ns.
    assert_eq!(count_in(&read, 196_608, 204_800), 12);
    // Coarse bin 100 = fine bins 400..403: 2048 + 16·32 = 2560 up to 2048 + 20·32 = 2688 ns.
    assert_eq!(count_in(&read, 2_560, 2_688), 3);
    assert_eq!(run.spec_value()["coarseness_stride"], 4);
    assert_eq!(run.op("write").unwrap().count, 2);
}

fn write_hlog(dir: &Path) -> (PathBuf, Histogram<u64>, Histogram<u64>) {
    use base64::Engine as _;
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
    let mut a = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    let mut b = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    for i in 0..1000u64 {
        a.record(50_000 + i * 137).unwrap();
        b.record(2_000_000 + i * 9_001).unwrap();
    }
    let enc = |h: &Histogram<u64>| {
        let mut v = Vec::new();
        V2DeflateSerializer::new().serialize(h, &mut v).unwrap();
        base64::engine::general_purpose::STANDARD.encode(v)
    };
    let text = format!(
        "#[Histogram log format version 1.3]\n#[StartTime: 1709287200.000 (seconds since epoch), Fri Mar 01 10:00:00 UTC 2024]\n\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\nTag=read,0.000,1.000,{:.3},{}\nTag=read,1.000,1.000,{:.3},{}\nTag=commit,1.000,1.000,{:.3},{}\n",
        a.max() as f64 / 1e6,
        enc(&a),
        a.max() as f64 / 1e6,
        enc(&a),
        b.max() as f64 / 1e6,
        enc(&b)
    );
    let p = dir.join("run.hlog");
    std::fs::write(&p, text).unwrap();
    (p, a, b)
}

#[test]
fn hlog_intervals_tags_and_units() {
    let dir = tempfile::tempdir().unwrap();
    let (p, a, b) = write_hlog(dir.path());
    let r = ingest_files(Format::Hlog, std::slice::from_ref(&p), None);
    let run = &r.runs[0];
    assert_eq!(run.started, "2024-03-01T10:00:00.000Z");
    let read = run.op("read").unwrap();
    assert_eq!(read.count, 2000);
    assert_eq!(
        read.intervals.iter().map(|i| i.count).collect::<Vec<_>>(),
        vec![1000, 1000]
    );
    let mut aa = new_histogram();
    aa.add(&a).unwrap();
    aa.add(&a).unwrap();
    assert_eq!(read.summary.p99_ns, aa.value_at_quantile(0.99));
    let c = hist(run, "commit");
    assert_eq!(c.len(), 1000);
    assert_eq!(c.value_at_quantile(0.5), b.value_at_quantile(0.5));
    // The same log read as µs values: everything 1000× larger.
    let r = ingest_files(Format::Hlog, &[p], Some(Unit::Us));
    let c = hist(&r.runs[0], "commit");
    let want = b.median_equivalent(b.value_at_quantile(0.5)) * 1000;
    let got = c.value_at_quantile(0.5);
    assert!(
        (got as f64 / want as f64 - 1.0).abs() < 0.002,
        "{got} vs {want}"
    );
}

#[test]
fn time_latency_pairs() {
    let r = ingest_files(Format::TimeLatency, &[fixture("pairs_us.txt")], None);
    let o = &r.runs[0].ops[0];
    assert_eq!(o.count, 7);
    assert_eq!(
        o.intervals.iter().map(|i| i.count).collect::<Vec<_>>(),
        vec![3, 2, 2]
    );
    assert!(near(o.summary.max_ns, 9_000_000));
}

// ---------------------------------------------------------------------------------------------
// The binary: JSON round trips, rendering, errors

fn iolens(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_iolens"))
        .args(args)
        .output()
        .unwrap()
}

fn roundtrip(args: &[&str], json: &Path) -> Results {
    let mut all: Vec<&str> = args.to_vec();
    let j = json.to_str().unwrap();
    all.extend(["--json", j]);
    let out = iolens(&all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = Results::read_file(json).unwrap();
    assert!(!r.runs.is_empty(), "{args:?} produced runs");
    for run in &r.runs {
        assert_intervals_consistent(run);
        for o in &run.ops {
            assert_eq!(o.summary.count, o.count);
        }
    }
    // Every ingested result must render with `iolens show` when it exists in this build.
    let help = iolens(&["--help"]);
    if String::from_utf8_lossy(&help.stdout).contains("show") {
        let out = iolens(&["show", j]);
        assert!(
            out.status.success(),
            "show {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.stdout.is_empty());
    }
    r
}

#[test]
fn every_format_round_trips_through_json() {
    let dir = tempfile::tempdir().unwrap();
    let (hlog, _, _) = write_hlog(dir.path());
    let f = |n: &str| fixture(n).to_str().unwrap().to_string();
    let cases: Vec<(String, Vec<String>)> = vec![
        (
            "event-histogram".into(),
            vec![f("event_histogram_micro.csv")],
        ),
        ("pylatencymap".into(), vec![f("pylatencymap_records.txt")]),
        ("biolatency".into(), vec![f("biolatency_TD.txt")]),
        ("bpftrace".into(), vec![f("bpftrace_biolatency.txt")]),
        ("biosnoop".into(), vec![f("biosnoop.txt")]),
        ("fio-log".into(), vec![f("randread_clat.1.log")]),
        ("fio-hist".into(), vec![f("randread_clat_hist.1.log")]),
        ("hlog".into(), vec![hlog.to_str().unwrap().to_string()]),
        ("time-latency".into(), vec![f("pairs_us.txt")]),
    ];
    for (i, (fmt, files)) in cases.iter().enumerate() {
        let json = dir.path().join(format!("out{i}.json"));
        let mut args = vec!["ingest", "--format", fmt.as_str(), "-q"];
        args.extend(files.iter().map(|s| s.as_str()));
        let r = roundtrip(&args, &json);
        let d = doc(&r);
        assert_eq!(r.kind, iolens::results::Kind::Ingest);
        assert_eq!(d["source"]["format"], fmt.as_str());
    }
    let json = dir.path().join("trace.json");
    let t12 = f("ora12c_cdb1_ora_9876.trc");
    let r = roundtrip(&["trace", "-q", &t12], &json);
    assert_eq!(r.kind, iolens::results::Kind::Trace);
    assert!(r.trace_profile.is_some());
}

#[test]
fn trace_command_prints_profile_and_unparsed_lines() {
    let out = iolens(&[
        "trace",
        fixture("ora11g_orcl_ora_5555.trc").to_str().unwrap(),
        fixture("damaged.trc").to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("Response-time profile"), "{s}");
    assert!(s.contains("CPU service"));
    assert!(s.contains("unaccounted-for"));
    assert!(s.contains("line 3: this line is noise"), "{s}");
    assert!(s.contains("Slowest waits"));
}

#[test]
fn bad_input_gives_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = iolens(&["trace", dir.path().join("missing.trc").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open"));
    let out = iolens(&["trace", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("directory"));
    let bad = dir.path().join("bad.log");
    std::fs::write(&bad, "1000, 0, 4096, 1, 2, 3\n").unwrap();
    let out = iolens(&["ingest", "--format", "fio-hist", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fio histogram log"));
    let kb = dir.path().join("bitesize.txt");
    std::fs::write(
        &kb,
        "     kbytes              : count     distribution\n         0 -> 1          : 3 |*|\n",
    )
    .unwrap();
    let out = iolens(&["ingest", "--format", "biolatency", kb.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a latency"));
    // Corrupt gzip: an error with context, not a panic.
    let gz = dir.path().join("broken.trc");
    std::fs::write(&gz, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3]).unwrap();
    let out = iolens(&["trace", gz.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("gzip"));
}

/// Results written before the spread-bucket encoding (schema version 2, every interval
/// histogram V2-deflate; written by iolens main@6476a07, origins in tests/fixtures/README.md)
/// still read, and the same real sources ingested now, their intervals stored as spread
/// buckets (schema version 3), hold the same histograms: every interval's count and decoded
/// histogram, its quantiles, each op's total, and `export --csv` and the `export --hlog`
/// histogram lines (V2-deflate again) byte for byte.
#[test]
fn spread_bucket_intervals_hold_what_version_2_files_held() {
    let dir = tempfile::tempdir().unwrap();
    for (format, src, old) in [
        (
            "biolatency",
            "real/bcc_biolatency_mT.txt",
            "v2_bcc_biolatency_mT.json",
        ),
        (
            "pylatencymap",
            "real/pylatencymap_example_latency_data.txt",
            "v2_pylatencymap_example_latency_data.json",
        ),
        (
            "pylatencymap",
            "real/pylatencymap_test_SystemTap_data.txt",
            "v2_pylatencymap_test_SystemTap_data.json",
        ),
        (
            "event-histogram",
            "sources/event_histogram_micro.csv",
            "v2_event_histogram_micro.json",
        ),
    ] {
        let old = common::fixture("results").join(old);
        let new = dir.path().join(old.file_name().unwrap());
        let out = common::bin()
            .args(["-q", "ingest", "--format", format])
            .arg(common::fixture(src))
            .arg("--json")
            .arg(&new)
            .output()
            .unwrap();
        let doc = common::json_of(&out, &new);
        let old_doc: Value = serde_json::from_str(&std::fs::read_to_string(&old).unwrap()).unwrap();
        assert_eq!(
            (old_doc["version"].as_u64(), doc["version"].as_u64()),
            (Some(2), Some(3))
        );
        let (a, b) = (
            Results::read_file(&old).unwrap(),
            Results::read_file(&new).unwrap(),
        );
        let mut spread = 0;
        assert_eq!(a.runs.len(), b.runs.len(), "{src}");
        for (ra, rb) in a.runs.iter().zip(&b.runs) {
            assert_eq!(ra.ops.len(), rb.ops.len(), "{src}");
            for (oa, ob) in ra.ops.iter().zip(&rb.ops) {
                assert_eq!((&oa.op, oa.count), (&ob.op, ob.count), "{src}");
                assert_eq!(
                    oa.hist.decode().unwrap(),
                    ob.hist.decode().unwrap(),
                    "{src}"
                );
                assert_eq!(oa.intervals.len(), ob.intervals.len(), "{src}");
                for (ia, ib) in oa.intervals.iter().zip(&ob.intervals) {
                    assert_eq!((ia.start_s, ia.count), (ib.start_s, ib.count), "{src}");
                    let text = serde_json::to_value(&ib.hist).unwrap();
                    let text = text.as_str().unwrap();
                    spread += usize::from(text.starts_with("s1:"));
                    let (ha, hb) = (ia.hist.decode().unwrap(), ib.hist.decode().unwrap());
                    assert_eq!(ha, hb, "{src} {} at {} s", oa.op, ia.start_s);
                    assert_eq!(ha.len(), ib.count);
                    for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
                        assert_eq!(ha.value_at_quantile(q), hb.value_at_quantile(q));
                    }
                }
            }
        }
        assert!(
            spread > 0,
            "{src}: no interval was stored as spread buckets"
        );
        let export = |file: &Path, what: &str| {
            common::ok_stdout(common::bin().arg("export").arg(file).args([what, "-"]))
        };
        assert_eq!(export(&old, "--csv"), export(&new, "--csv"), "{src}");
        let lines = |t: String| -> Vec<String> {
            t.lines()
                .filter(|l| l.starts_with("Tag="))
                .map(String::from)
                .collect()
        };
        let (ha, hb) = (lines(export(&old, "--hlog")), lines(export(&new, "--hlog")));
        assert!(!ha.is_empty());
        assert_eq!(ha, hb, "{src}");
    }
}
