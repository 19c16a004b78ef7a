//! Hostile, broken and absurd input (issue 10 items 8–11), driven through the real binary:
//! - the panics fuzzing found stay fixed;
//! - input without line breaks (`/dev/zero`) and a gzip bomb are refused with a clear error
//!   and bounded memory (peak RSS of the child after its exec, sampled by `common::peak`, and
//!   an address-space limit so a regression fails instead of exhausting the machine);
//! - crafted-bad results files are refused the same way by `show`, `report`, `compare` and
//!   `export`;
//! - empty, random and wrong-format input is an error in every reader and in `trace`, with a
//!   reason even under `-q`.
mod common;

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::ValueEnum as _;
use common::bin;
use iolens::sources::{format_name, Format};

fn fixture(name: &str) -> PathBuf {
    common::fixture("sources").join(name)
}

/// Run with the address space capped at `limit_mb` MiB (a regression then fails with an
/// allocation error instead of eating the machine's memory).
/// Run under an address-space limit; the output and the child's own peak RSS (MiB).
fn run_limited(mut cmd: Command, limit_mb: u64) -> (Output, u64) {
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit_mb << 20,
                rlim_max: limit_mb << 20,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    run_measured(cmd)
}

/// Run to completion; the output and the peak RSS (MiB) of that child alone, after its exec
/// ([`common::peak`]: `ru_maxrss` would count this test process's pages).
fn run_measured(cmd: Command) -> (Output, u64) {
    let p = common::peak::run(cmd, std::time::Duration::from_secs(600));
    assert!(!p.killed, "the command ran for 10 minutes");
    let mib = p.peak_mib();
    let o = Output {
        status: p.status,
        stdout: p.stdout,
        stderr: p.stderr,
    };
    (o, mib)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A refusal: exit status 2 (not a panic's 101, not a signal), with a message.
fn assert_refused(o: &Output, what: &str, expect: &str) {
    let err = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{what}: expected a clear error (exit 2), got {:?}\nstderr: {err}",
        o.status
    );
    assert!(!err.contains("panicked"), "{what}: panicked: {err}");
    assert!(
        err.contains(expect),
        "{what}: error should say \"{expect}\", got: {err}"
    );
}

fn ingest(format: &str, file: &Path, extra: &[&str]) -> Command {
    let mut c = bin();
    c.args(["ingest", "-q", "--format", format])
        .args(extra)
        .arg(file);
    c
}

// ---------------------------------------------------------------------------------------------
// Item 8: the panics fuzzing found

#[test]
fn bcc_row_with_colon_before_arrow_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("one.txt");
    std::fs::write(&f, "1 : 2 -> 3\n").unwrap();
    let o = ingest("biolatency", &f, &[]).output().unwrap();
    assert_refused(&o, "biolatency `1 : 2 -> 3`", "no biolatency data found");
    assert!(stderr(&o).contains("line 1"), "{}", stderr(&o));
}

#[test]
fn counts_beyond_the_histogram_encoding_are_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    // bpftrace, --unit s: every value lands in the top bucket (1 h), whose count then exceeds
    // what the HdrHistogram V2 encoding can hold.
    let f = dir.path().join("bpf.txt");
    std::fs::write(&f, "@usecs:\n[4K, 8K)  18446744073709551615 |@@@@@|\n").unwrap();
    let o = ingest("bpftrace", &f, &["--unit", "s"]).output().unwrap();
    assert_refused(
        &o,
        "bpftrace with a count of 2^64-1",
        "not a possible event count",
    );

    // An .hlog whose intervals each hold i64::MAX values: their total cannot be encoded.
    use base64::Engine as _;
    use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
    let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    h.record_n(1000, i64::MAX as u64).unwrap();
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(&h, &mut buf).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&buf);
    let f = dir.path().join("huge.hlog");
    std::fs::write(
        &f,
        format!("0.000,1.000,1.000,{b64}\n1.000,1.000,1.000,{b64}\n"),
    )
    .unwrap();
    let o = ingest("hlog", &f, &[]).output().unwrap();
    assert_refused(&o, "hlog with counts summing past 2^63", "overflow");
}

// ---------------------------------------------------------------------------------------------
// Item 9: memory bounds

/// Peak RSS allowed to any reader on hostile input (the debug binary idles near 10 MiB).
const READER_RSS_MB: u64 = 128;

#[test]
fn input_without_line_breaks_is_refused_with_bounded_memory() {
    let zero = Path::new("/dev/zero");
    let mut cmds: Vec<(String, Command)> = Format::value_variants()
        .iter()
        .map(|f| {
            (
                format_name(*f).to_string(),
                ingest(format_name(*f), zero, &[]),
            )
        })
        .collect();
    let mut t = bin();
    t.args(["trace", "-q"]).arg(zero);
    cmds.push(("trace".into(), t));
    for (name, cmd) in cmds {
        let (o, rss) = run_limited(cmd, 1024);
        assert_refused(&o, &format!("{name} /dev/zero"), "line 1 is longer than");
        assert!(stderr(&o).contains("/dev/zero"), "{name}: {}", stderr(&o));
        assert!(
            rss < READER_RSS_MB,
            "{name}: peak RSS {rss} MiB on /dev/zero (bound {READER_RSS_MB} MiB)"
        );
    }
}

#[test]
fn gzip_bomb_is_streamed_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bomb.gz");
    // 1 GiB of zeros deflates to about 1 MB.
    let mut z = flate2::write::GzEncoder::new(
        std::fs::File::create(&f).unwrap(),
        flate2::Compression::fast(),
    );
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..1024 {
        z.write_all(&chunk).unwrap();
    }
    z.finish().unwrap();
    assert!(std::fs::metadata(&f).unwrap().len() < 8 << 20);
    let mut rss = 0;
    for format in ["time-latency", "biolatency", "hlog"] {
        let (o, r) = run_limited(ingest(format, &f, &[]), 1024);
        assert_refused(&o, &format!("{format} gzip bomb"), "line 1 is longer than");
        rss = rss.max(r);
    }
    let mut t = bin();
    t.args(["trace", "-q"]).arg(&f);
    let (o, r) = run_limited(t, 1024);
    assert_refused(&o, "trace gzip bomb", "line 1 is longer than");
    let rss = rss.max(r);
    assert!(
        rss < READER_RSS_MB,
        "peak RSS {rss} MiB on a gzip bomb (bound {READER_RSS_MB} MiB)"
    );
}

// ---------------------------------------------------------------------------------------------
// Item 10: one validation when results are loaded

/// A good results document (as the tool writes it) to craft bad ones from.
fn good_results(dir: &Path) -> serde_json::Value {
    let p = dir.join("good.json");
    let o = bin()
        .args(["dev-synth", "--seconds", "3", "--samples", "50", "-o"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
}

/// A V2-deflate histogram whose inner header declares a 4 GiB payload.
fn hist_declaring_4gib() -> String {
    use base64::Engine as _;
    let mut raw = Vec::new();
    raw.extend_from_slice(&0x1c84_9313u32.to_be_bytes());
    raw.extend_from_slice(&u32::MAX.to_be_bytes()); // payload length: 4 GiB
    raw.extend_from_slice(&0u32.to_be_bytes());
    raw.extend_from_slice(&3u32.to_be_bytes());
    raw.extend_from_slice(&1u64.to_be_bytes());
    raw.extend_from_slice(&3_600_000_000_000u64.to_be_bytes());
    raw.extend_from_slice(&1.0f64.to_be_bytes());
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&raw).unwrap();
    let c = z.finish().unwrap();
    let mut out = 0x1c84_9314u32.to_be_bytes().to_vec();
    out.extend_from_slice(&(c.len() as u32).to_be_bytes());
    out.extend_from_slice(&c);
    base64::engine::general_purpose::STANDARD.encode(out)
}

/// Crafted-bad results files: (name, what the error must say, the change).
#[allow(clippy::type_complexity)]
fn bad_results() -> Vec<(
    &'static str,
    &'static str,
    Box<dyn Fn(&mut serde_json::Value)>,
)> {
    vec![
        (
            "zero duration",
            "duration is 0 s",
            Box::new(|v| v["runs"][0]["duration_s"] = 0.into()),
        ),
        (
            "negative duration",
            "duration is -5 s",
            Box::new(|v| v["runs"][0]["duration_s"] = (-5.0).into()),
        ),
        (
            "interval counts not summing",
            "its intervals count",
            Box::new(|v| {
                v["runs"][0]["ops"][0]["intervals"]
                    .as_array_mut()
                    .unwrap()
                    .remove(0);
            }),
        ),
        (
            "saturated count",
            "overflow",
            Box::new(|v| v["runs"][0]["ops"][0]["count"] = u64::MAX.into()),
        ),
        (
            "count twice what the histogram holds",
            "its histogram holds",
            Box::new(|v| {
                let n = v["runs"][0]["ops"][0]["count"].as_u64().unwrap();
                v["runs"][0]["ops"][0]["count"] = (2 * n).into();
                v["runs"][0]["ops"][0]["summary"]["count"] = (2 * n).into();
            }),
        ),
        (
            "undecodable histogram",
            "histogram is undecodable",
            Box::new(|v| v["runs"][0]["ops"][0]["hist"] = "AAAAAAAA".into()),
        ),
        (
            "histogram declaring a 4 GiB payload",
            "declares a payload of 4294967295 bytes",
            Box::new(|v| {
                v["runs"][0]["ops"][0]["intervals"][1]["hist"] = hist_declaring_4gib().into()
            }),
        ),
        (
            "percentiles out of order",
            "percentiles are not in order",
            Box::new(|v| {
                let s = &mut v["runs"][0]["ops"][0]["summary"];
                s["p50_ns"] = (s["max_ns"].as_u64().unwrap() * 10).into();
            }),
        ),
        (
            "negative mean",
            "mean latency is -1",
            Box::new(|v| v["runs"][0]["ops"][0]["summary"]["mean_ns"] = (-1.0).into()),
        ),
    ]
}

#[test]
fn bad_results_are_refused_alike_by_show_report_compare_export() {
    let dir = tempfile::tempdir().unwrap();
    let good = good_results(dir.path());
    let good_path = dir.path().join("good.json");
    for (name, expect, change) in bad_results() {
        let mut v = good.clone();
        change(&mut v);
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
        let html = dir.path().join("out.html");
        let csv = dir.path().join("out.csv");
        let mut cmds: Vec<(&str, Command)> = Vec::new();
        let mut c = bin();
        c.args(["show", "--color", "never"]).arg(&bad);
        cmds.push(("show", c));
        let mut c = bin();
        c.arg("report").arg(&bad).arg("-o").arg(&html);
        cmds.push(("report", c));
        let mut c = bin();
        c.arg("compare").arg(&good_path).arg(&bad);
        cmds.push(("compare", c));
        let mut c = bin();
        c.arg("compare").arg(&bad).arg(&good_path).arg("--force");
        cmds.push(("compare (bad first, --force)", c));
        let mut c = bin();
        c.arg("export").arg(&bad).arg("--csv").arg(&csv);
        cmds.push(("export --csv", c));
        let mut c = bin();
        c.arg("export").arg(&bad).arg("--hlog").arg("-");
        cmds.push(("export --hlog", c));
        let mut rss = 0;
        for (cmd_name, cmd) in cmds {
            let (o, r) = run_limited(cmd, 1024);
            rss = rss.max(r);
            assert_refused(&o, &format!("{cmd_name} on {name}"), expect);
            assert!(
                stderr(&o).contains("bad.json"),
                "{cmd_name} on {name}: the error should name the file: {}",
                stderr(&o)
            );
        }
        assert!(rss < 256, "{name}: peak RSS {rss} MiB");
    }
    // The good file itself loads everywhere.
    let o = bin().arg("show").arg(&good_path).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

// ---------------------------------------------------------------------------------------------
// Item 11: nothing read is an error

#[test]
fn empty_random_and_wrong_format_input_is_an_error_in_every_reader() {
    use rand::{Rng as _, SeedableRng as _};
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let random = dir.path().join("random.bin");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(10);
    let bytes: Vec<u8> = (0..4096).map(|_| rng.gen()).collect();
    std::fs::write(&random, bytes).unwrap();
    let trace = fixture("ora11g_orcl_ora_5555.trc");
    let bcc = fixture("biolatency_TD.txt");
    for format in Format::value_variants() {
        let name = format_name(*format);
        for (what, file) in [
            ("an empty file", &empty),
            ("random bytes", &random),
            ("an Oracle trace", &trace),
        ] {
            let o = ingest(name, file, &[]).output().unwrap();
            assert_refused(&o, &format!("ingest --format {name} -q on {what}"), "no ");
            assert!(
                stderr(&o).contains(&format!("no {name} data found")),
                "{name} on {what}: {}",
                stderr(&o)
            );
            assert!(o.stdout.is_empty(), "-q printed: {:?}", o.stdout);
        }
    }
    for (what, file) in [
        ("an empty file", &empty),
        ("random bytes", &random),
        ("a biolatency file", &bcc),
    ] {
        let o = bin().args(["trace", "-q"]).arg(file).output().unwrap();
        assert_refused(
            &o,
            &format!("trace -q on {what}"),
            "no Oracle 10046 trace data found",
        );
    }
}

/// Escape sequences and newlines in names a file carries (a run, an op, a host, a profiled
/// function) once reached the terminal: a hostile file could clear the screen, retitle the
/// window or forge a line of output. `show`, `compare`, `merge` and `ingest`'s own summary
/// print none of them (stdout is a pipe: no colour either), and no forged line starts.
#[test]
fn escape_sequences_and_newlines_from_inputs_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let evil = "x\u{1b}]0;TITLE\u{7}\u{1b}[2J\u{9b}31m\u{202e}\nFORGED LINE\r";
    let base = d.join("base.json");
    let o = bin()
        .args(["-q", "dev-synth", "--seconds", "5", "--samples", "5"])
        .args(["--rank", "0", "--ranks", "1", "-o"])
        .arg(&base)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    doc["runs"][0]["name"] = format!("run {evil}").into();
    doc["runs"][0]["ops"][0]["op"] = format!("op {evil}").into();
    doc["environment"]["hostname"] = format!("host {evil}").into();
    doc["placement"]["host"] = format!("host {evil}").into();
    let r = d.join("evil.json");
    std::fs::write(&r, serde_json::to_vec(&doc).unwrap()).unwrap();
    // Folded stacks whose process and function names carry the same.
    let folded = d.join("evil.folded");
    // (A line-based format has no newline inside a name: a vertical tab stands for it.)
    let e = evil.replace('\n', "\u{b}");
    std::fs::write(&folded, format!("comm{e};outer{e};leaf{e} 5\nother;f 3\n")).unwrap();
    let prof = d.join("prof.json");
    let mut cmds: Vec<Command> = Vec::new();
    let mut c = ingest("folded", &folded, &[]);
    c.arg("--json").arg(&prof);
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    for args in [
        vec!["show".into(), r.clone().into_os_string()],
        vec!["show".into(), prof.clone().into_os_string()],
        vec![
            "compare".into(),
            base.clone().into_os_string(),
            r.clone().into_os_string(),
        ],
        vec![
            "merge".into(),
            "--force".into(),
            r.clone().into_os_string(),
            "-o".into(),
            d.join("m.json").into_os_string(),
        ],
        vec![
            "ingest".into(),
            "--format".into(),
            "folded".into(),
            folded.clone().into_os_string(),
        ],
    ] {
        let mut c = bin();
        c.args(&args);
        cmds.push(c);
    }
    for mut c in cmds {
        let what = format!("{c:?}");
        let o = c.output().unwrap();
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        for (stream, text) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
            let t = String::from_utf8_lossy(text);
            for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}', '\r', '\u{b}'] {
                assert!(
                    !t.contains(bad),
                    "{what}: {stream} holds {bad:?} from the input:\n{t}"
                );
            }
            assert!(
                !t.lines().any(|l| l.trim_start().starts_with("FORGED")),
                "{what}: {stream} has a forged line:\n{t}"
            );
        }
    }
}

/// PyLatencyMap records out of time order (issue 22's lower list: "reordered records exit 0
/// with no data"). A real capture (fbieniek/PyLatencyMap's example, three cumulative
/// snapshots 3 s apart) with its records reversed has no snapshot after the first that
/// advances: a clear error naming why. With the first two swapped, the snapshot that goes back
/// in time is skipped and said by line, and the one interval left is the last two snapshots'
/// difference, never a negative or summed-up count.
#[test]
fn pylatencymap_records_out_of_time_order_are_said_never_silent() {
    let real = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real/pylatencymap_example_latency_data.txt");
    let text = std::fs::read_to_string(&real).unwrap();
    let recs: Vec<String> = text
        .split("<begin record>")
        .skip(1)
        .map(|r| format!("<begin record>{r}"))
        .collect();
    assert_eq!(recs.len(), 3);
    let dir = tempfile::tempdir().unwrap();
    let rev = dir.path().join("reversed.txt");
    std::fs::write(&rev, recs.iter().rev().cloned().collect::<String>()).unwrap();
    let o = ingest("pylatencymap", &rev, &[]).output().unwrap();
    assert_refused(&o, "reversed records", "only one snapshot");
    assert!(
        stderr(&o).contains("snapshot time does not advance"),
        "{}",
        stderr(&o)
    );

    let swapped = dir.path().join("swapped.txt");
    std::fs::write(
        &swapped,
        [&recs[1], &recs[0], &recs[2]].map(|s| s.as_str()).concat(),
    )
    .unwrap();
    let json = dir.path().join("s.json");
    let mut c = ingest("pylatencymap", &swapped, &[]);
    c.arg("--json").arg(&json);
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // Said in the results (and in the summary `show` prints), with the line it was on.
    let doc = std::fs::read_to_string(&json).unwrap();
    assert!(
        doc.contains("swapped.txt:38: snapshot time does not advance")
            && doc.contains("snapshot skipped"),
        "{doc}"
    );
    // The same pair, in order, on its own: what the swapped file's one interval must equal.
    let pair = dir.path().join("pair.txt");
    std::fs::write(&pair, [&recs[1], &recs[2]].map(|s| s.as_str()).concat()).unwrap();
    let pjson = dir.path().join("p.json");
    let mut c = ingest("pylatencymap", &pair, &[]);
    c.arg("--json").arg(&pjson);
    assert!(c.output().unwrap().status.success());
    let counts = |f: &Path| -> Vec<u64> {
        let r = iolens::results::Results::read_file(f).unwrap();
        r.runs[0].ops[0].intervals.iter().map(|i| i.count).collect()
    };
    let got = counts(&json);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0] > 0);
    assert_eq!(got, counts(&pjson));
}
