//! Fuzz harness on stable Rust: deterministic mutations of every fixture under tests/fixtures
//! and of results documents the tool writes, fed in-process to every reader (`ingest --format X`
//! for every format clap knows, `trace`) and to everything that loads results (`show`, `report`,
//! `compare`, `export`), read from a file as those commands read it and given to `merge`;
//! and every command-line option that takes a value (durations, sizes, counts, ranks,
//! templates, times) to the command-line parser. A panic is caught (`catch_unwind`), its input written to
//! `target/fuzz-findings/`, and the test fails listing them; a case that runs longer than
//! `IOLENS_FUZZ_HANG_S` (default 20 s) is written there too and the process exits.
//!
//! Budget: `IOLENS_FUZZ_SECS` seconds (default 20, what CI runs) or `IOLENS_FUZZ_CASES` cases,
//! whichever ends first; `IOLENS_FUZZ_SEED` picks the seed (default 1; every case is derived
//! from the seed and its number, so a finding is reproducible). `bench/fuzz.sh` runs it for
//! 10 minutes. Every past finding, kept under tests/fixtures/fuzz, is first fed again unmutated
//! (every reader with every `--unit`, every loader); `IOLENS_FUZZ_REPLAY=FILE[:FILE…]` feeds
//! only the files named.

use std::io::Write as _;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::ValueEnum as _;
use iolens::render::{ColorChoice, TermStyle};
use iolens::results::Results;
use iolens::sources::{self, Format, IngestOptions, TraceOptions, Unit};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

thread_local! {
    /// What the current case is being fed to (named in a finding).
    static STAGE: std::cell::Cell<&'static str> = const { std::cell::Cell::new("") };
}

fn stage(s: &'static str) {
    STAGE.with(|c| c.set(s));
}

/// One seed input: a name and its bytes; `results` when it is a results document.
struct Seed {
    name: String,
    data: Vec<u8>,
    results: bool,
}

fn fixtures(dir: &Path, out: &mut Vec<Seed>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            fixtures(&p, out);
        } else if let Ok(data) = std::fs::read(&p) {
            // Keep the harness fast: cut large fixtures (mutations reach their start anyway).
            let data = data[..data.len().min(64 << 10)].to_vec();
            // A results document only if it is still whole JSON after the cut (a longer one
            // is a text seed: the cases below parse results seeds unguarded).
            let results = data.starts_with(b"{")
                && serde_json::from_slice::<serde_json::Value>(&data).is_ok();
            out.push(Seed {
                name: p.display().to_string(),
                data,
                results,
            });
        }
    }
}

fn ingest_args(format: Format, file: &Path, unit: Option<Unit>) -> IngestOptions {
    IngestOptions {
        format,
        files: vec![file.to_path_buf()],
        unit,
        time_unit: None,
        interval: Duration::from_secs(1),
        duration: None,
    }
}

/// Every seed: the fixtures, and results documents written by the tool itself (synthetic runs
/// and calibrations, and the ingest/trace of every fixture).
fn seeds(work: &Path) -> Vec<Seed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    fixtures(&root.join("tests/fixtures"), &mut out);
    let text: Vec<(String, Vec<u8>)> = out
        .iter()
        .filter(|s| !s.results)
        .map(|s| (s.name.clone(), s.data.clone()))
        .collect();
    let mut docs = vec![
        (
            "synth run".to_string(),
            iolens::synth::run_results_with(4, 1.0, 30, 7),
        ),
        (
            "synth calibrate".to_string(),
            iolens::synth::calibration_results(3, 2, 20, 7),
        ),
    ];
    let f = work.join("seed.in");
    for (name, data) in &text {
        std::fs::write(&f, data).unwrap();
        for format in Format::value_variants() {
            if let Ok(r) = sources::ingest(&ingest_args(*format, &f, None), vec![]) {
                docs.push((format!("{name} as {}", sources::format_name(*format)), r));
            }
        }
        if let Ok(r) = sources::oracle_trace::read_traces(&trace_args(&f), vec![]) {
            docs.push((format!("{name} as trace"), r));
        }
    }
    for (name, r) in docs {
        out.push(Seed {
            name: format!("results of {name}"),
            data: r.to_json().unwrap().into_bytes(),
            results: true,
        });
    }
    out
}

fn trace_args(file: &Path) -> TraceOptions {
    TraceOptions {
        files: vec![file.to_path_buf()],
        events: vec![],
        interval: Duration::from_secs(1),
        top: 5,
    }
}

const INTERESTING: &[&[u8]] = &[
    b"0",
    b"-1",
    b"1",
    b"4294967295",
    b"4294967296",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999999",
    b"1e308",
    b"-1e308",
    b"1e-308",
    b"NaN",
    b"inf",
    b"0.0",
    b"-0",
    b"->",
    b" : ",
    b"|",
    b"[",
    b"]",
    b",",
    b"\n",
    b"\r\n",
    b"\"",
    b"=",
    b"#",
    b"@",
    b"\xff\xfe",
    b"\0",
];

/// Mutate `data` in place: 1..=4 of bit flips, byte insert/delete, interesting numbers and
/// tokens, digit runs replaced by huge numbers, line splices (from `other`), line duplication
/// and deletion, truncation.
fn mutate(rng: &mut SmallRng, data: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..rng.gen_range(1..=4) {
        let len = data.len();
        let at = if len == 0 { 0 } else { rng.gen_range(0..len) };
        match rng.gen_range(0..11) {
            0 if len > 0 => data[at] ^= 1 << rng.gen_range(0..8),
            1 => data.insert(at, rng.gen()),
            2 if len > 0 => {
                let n = rng.gen_range(1..=16.min(len - at));
                data.drain(at..at + n);
            }
            3 => {
                let t = INTERESTING[rng.gen_range(0..INTERESTING.len())];
                data.splice(at..at, t.iter().copied());
            }
            4 | 5 => {
                // Replace a run of digits (a count, a latency, a time) with an extreme number.
                if let Some(start) = (at..len).find(|&i| data[i].is_ascii_digit()) {
                    let end = (start..len)
                        .find(|&i| !data[i].is_ascii_digit())
                        .unwrap_or(len);
                    let t = INTERESTING[rng.gen_range(0..17)];
                    data.splice(start..end, t.iter().copied());
                }
            }
            6 => {
                // Splice: a line of another input into this one.
                let lines: Vec<&[u8]> = other.split(|&c| c == b'\n').collect();
                let line = lines[rng.gen_range(0..lines.len())];
                let at = line_start(data, at);
                let mut ins = line.to_vec();
                ins.push(b'\n');
                data.splice(at..at, ins);
            }
            7 if len > 0 => {
                // Duplicate a line many times.
                let s = line_start(data, at);
                let e = data[s..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map(|p| s + p + 1)
                    .unwrap_or(len);
                let line = data[s..e].to_vec();
                for _ in 0..rng.gen_range(1..50) {
                    data.splice(s..s, line.iter().copied());
                }
            }
            8 if len > 0 => {
                let s = line_start(data, at);
                let e = data[s..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map(|p| s + p + 1)
                    .unwrap_or(len);
                data.drain(s..e);
            }
            9 => data.truncate(at),
            _ => {
                if len > 0 {
                    data[at] = rng.gen();
                }
            }
        }
    }
}

fn line_start(data: &[u8], at: usize) -> usize {
    data[..at.min(data.len())]
        .iter()
        .rposition(|&c| c == b'\n')
        .map(|p| p + 1)
        .unwrap_or(0)
}

/// Structure-aware mutation of a results document: replace numbers with extremes, drop or
/// duplicate array elements, corrupt histogram strings.
fn mutate_json(rng: &mut SmallRng, v: &mut serde_json::Value) {
    fn walk(rng: &mut SmallRng, v: &mut serde_json::Value, p: f64) {
        match v {
            serde_json::Value::Number(_) if rng.gen_bool(p) => {
                let choices = [
                    serde_json::json!(0),
                    serde_json::json!(-1),
                    serde_json::json!(1),
                    serde_json::json!(u64::MAX),
                    serde_json::json!(i64::MAX),
                    serde_json::json!(1e300),
                    serde_json::json!(-1e300),
                    serde_json::json!(1e-300),
                    serde_json::json!(0.5),
                ];
                *v = choices[rng.gen_range(0..choices.len())].clone();
            }
            serde_json::Value::String(s) if rng.gen_bool(p) && s.len() > 8 => {
                // Histograms are base64: corrupt, truncate or swap in a crafted header.
                match rng.gen_range(0..4) {
                    0 => s.truncate(rng.gen_range(0..s.len())),
                    1 => {
                        let i = rng.gen_range(0..s.len());
                        if s.is_char_boundary(i) && s.is_char_boundary(i + 1) {
                            s.replace_range(i..i + 1, "A");
                        }
                    }
                    2 => *s = crafted_hist(rng),
                    _ => s.clear(),
                }
            }
            serde_json::Value::Array(a) => {
                if !a.is_empty() && rng.gen_bool(p) {
                    let i = rng.gen_range(0..a.len());
                    if rng.gen_bool(0.5) {
                        a.remove(i);
                    } else {
                        let x = a[i].clone();
                        a.insert(i, x);
                    }
                }
                for x in a.iter_mut() {
                    walk(rng, x, p);
                }
            }
            serde_json::Value::Object(m) => {
                for (_, x) in m.iter_mut() {
                    walk(rng, x, p);
                }
            }
            _ => {}
        }
    }
    let p = [0.002, 0.01, 0.05][rng.gen_range(0..3)];
    walk(rng, v, p);
}

/// A V2 histogram header with absurd declared sizes, digits or bounds, deflated or not.
fn crafted_hist(rng: &mut SmallRng) -> String {
    use base64::Engine as _;
    let mut raw = Vec::new();
    raw.extend_from_slice(&0x1c84_9313u32.to_be_bytes());
    let payload: u32 = [0, 4, 10, u32::MAX, 1 << 30][rng.gen_range(0..5)];
    raw.extend_from_slice(&payload.to_be_bytes());
    raw.extend_from_slice(&0u32.to_be_bytes());
    raw.extend_from_slice(&[3u32, 5, 200][rng.gen_range(0..3)].to_be_bytes());
    raw.extend_from_slice(&1u64.to_be_bytes());
    raw.extend_from_slice(
        &[3_600_000_000_000u64, u64::MAX, 1 << 62][rng.gen_range(0..3)].to_be_bytes(),
    );
    raw.extend_from_slice(&1.0f64.to_be_bytes());
    raw.extend_from_slice(&[0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    let bytes = if rng.gen_bool(0.5) {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&raw).unwrap();
        let c = z.finish().unwrap();
        let mut out = 0x1c84_9314u32.to_be_bytes().to_vec();
        let declared = if rng.gen_bool(0.5) {
            c.len() as u32
        } else {
            u32::MAX
        };
        out.extend_from_slice(&declared.to_be_bytes());
        out.extend_from_slice(&c);
        out
    } else {
        raw
    };
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

const UNITS: [Option<Unit>; 5] = [
    None,
    Some(Unit::Ns),
    Some(Unit::Us),
    Some(Unit::Ms),
    Some(Unit::S),
];

/// Feed one text input to every reader (with a random `--unit`) and check what they produce.
fn feed_text(path: &Path, rng: &mut SmallRng) {
    feed_text_units(path, rng, None)
}

/// As [`feed_text`], with `unit` when given (`Some(None)`: no `--unit`).
fn feed_text_units(path: &Path, rng: &mut SmallRng, unit: Option<Option<Unit>>) {
    for format in Format::value_variants() {
        let unit = unit.unwrap_or_else(|| UNITS[rng.gen_range(0..UNITS.len())]);
        stage(sources::format_name(*format));
        if let Ok(r) = sources::ingest(&ingest_args(*format, path, unit), vec![]) {
            check_produced(&r, rng);
        }
    }
    stage("trace");
    if let Ok(r) = sources::oracle_trace::read_traces(&trace_args(path), vec![]) {
        check_produced(&r, rng);
    }
}

/// What a reader produced must be summarisable; when it passes the load validation (as
/// `ingest`/`trace` check before writing) it must serialise, load back and render.
fn check_produced(r: &Results, rng: &mut SmallRng) {
    let _ = iolens::render::brief_trace::sources_summary(
        r,
        &iolens::render::TermStyle {
            color: false,
            width: 80,
        },
    );
    if r.validate().is_ok() {
        let json = r.to_json().expect("results serialise");
        // Rendering is slow next to reading: render one produced document in ten (the
        // results cases render every mutated document anyway).
        if rng.gen_ratio(1, 10) {
            load_and_render(&json);
        } else {
            Results::from_json(&json).expect("what a reader wrote loads back");
        }
    }
}

/// Everything `show`, `report`, `compare` and `export` do with a results document.
fn load_and_render(text: &str) {
    let outer = STAGE.with(|c| c.get());
    stage("load results");
    let Ok(r) = Results::from_json(text) else {
        return;
    };
    let style = TermStyle::resolve(ColorChoice::Never, Some(100));
    stage("show");
    let _ = iolens::render::terminal::render(&r, &style, None);
    stage("report");
    let _ = iolens::render::html::report(&r, "fuzz");
    stage("export --csv");
    let _ = iolens::render::csv::intervals_csv(&r);
    stage("export --hlog");
    let _ = iolens::render::hlog::interval_log(&r);
    let base = iolens::synth::run_results_with(2, 1.0, 10, 3);
    let inputs = vec![("a".to_string(), base), ("b".to_string(), r)];
    stage("compare");
    let _ = iolens::render::compare::incompatibilities(&inputs);
    let _ = iolens::render::compare::terminal(&inputs, &[], &style);
    stage("compare -o html");
    let _ = iolens::render::compare::html(&inputs, &[]);
    stage(outer);
}

/// A results document as the commands read it: from a file (the bounded reader that refuses
/// devices and binary data), and merged on its own, with and without `--force`.
fn read_and_merge(text: &[u8], dir: &Path, rng: &mut SmallRng) {
    let outer = STAGE.with(|c| c.get());
    let f = dir.join("rank.json");
    std::fs::write(&f, text).unwrap();
    stage("read results file");
    let _ = Results::read_file(&f);
    if rng.gen_ratio(1, 4) {
        stage("merge");
        let mut args: Vec<std::ffi::OsString> = vec!["iolens".into(), "-q".into(), "merge".into()];
        args.push(f.clone().into());
        args.push("-o".into());
        args.push(dir.join("merged.json").into());
        if rng.gen_bool(0.5) {
            args.push("--force".into());
        }
        let _ = iolens::commands::main_with(args);
    }
    stage(outer);
}

/// Values people write for options (durations, sizes, counts, ranks, templates, times), as
/// seeds for the command-line cases.
const CLI_VALUES: &[&str] = &[
    "30s",
    "500ms",
    "2m",
    "1h",
    "1e20",
    "+1e20",
    "1e308",
    "-1",
    "0",
    "0.5",
    "NaN",
    "inf",
    "8k",
    "1.5GiB",
    "4G",
    "18446744073709551615",
    "18446744073709551616",
    "4294967295",
    "4294967296",
    "+8000y",
    "+1s",
    "2026-11-25T12:00:00Z",
    "9999-12-31T23:59:59Z",
    "{host}",
    "{rank}",
    "{host}/../x",
    "{rank}-{ranks}.json",
    "{",
    "}",
    "{{}}",
    "",
    " ",
    "\u{1b}[2J",
    "1,2,3",
    "0-1000000000",
    "r",
    "w",
    "randread",
    "8k:1,64k:2",
];

/// One command-line case: an option of some subcommand with a mutated value, parsed (every
/// value parser runs; nothing is executed).
fn cli_case(rng: &mut SmallRng, options: &[(String, String)]) -> Vec<u8> {
    let (sub, opt) = &options[rng.gen_range(0..options.len())];
    let mut value = CLI_VALUES[rng.gen_range(0..CLI_VALUES.len())]
        .as_bytes()
        .to_vec();
    if rng.gen_bool(0.5) {
        let other = CLI_VALUES[rng.gen_range(0..CLI_VALUES.len())].as_bytes();
        mutate(rng, &mut value, other);
    }
    let value = String::from_utf8_lossy(&value).into_owned();
    let mut args = vec!["iolens".to_string()];
    args.extend(sub.split(' ').map(String::from));
    args.push(format!("{opt}={value}"));
    stage("command line");
    let _ = iolens::commands::parse_only(&args);
    stage("parse_time");
    let _ = iolens::placement::parse_time(&value);
    stage("--start-at");
    let _ = iolens::placement::parse_start_at(&value, std::time::SystemTime::now());
    // Ranks, world sizes and host names from a launcher's environment (values no option
    // parser checked), and every template expanded with them.
    stage("rank and templates");
    let pick = |rng: &mut SmallRng| -> String {
        let mut v = CLI_VALUES[rng.gen_range(0..CLI_VALUES.len())]
            .as_bytes()
            .to_vec();
        if rng.gen_bool(0.3) {
            mutate(rng, &mut v, b"4294967295");
        }
        String::from_utf8_lossy(&v).into_owned()
    };
    let vars = [
        ("SLURM_PROCID", "SLURM_NTASKS"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMIX_RANK", "PMIX_SIZE"),
        ("JOB_COMPLETION_INDEX", "IOLENS_NO_SUCH_VAR"),
    ];
    let (rank_var, size_var) = vars[rng.gen_range(0..vars.len())];
    let (rank_val, size_val) = (pick(rng), pick(rng));
    let env = |k: &str| {
        if k == rank_var {
            Some(rank_val.clone())
        } else if k == size_var {
            Some(size_val.clone())
        } else {
            None
        }
    };
    let numbers = [
        None,
        Some(0),
        Some(1),
        Some(999_999),
        Some(1_000_000),
        Some(u32::MAX),
    ];
    let opt = |rng: &mut SmallRng| numbers[rng.gen_range(0..numbers.len())];
    let (r, n) = (opt(rng), opt(rng));
    if let Ok(rank) = iolens::placement::Rank::resolve(r, n, &env, pick(rng)) {
        let _ = rank.expand("--json", Path::new(&value));
    }
    args.join(" ").into_bytes()
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn findings_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-findings")
}

#[test]
fn fuzz_readers_and_results() {
    let secs = env_u64("IOLENS_FUZZ_SECS").unwrap_or(20);
    let max_cases = env_u64("IOLENS_FUZZ_CASES").unwrap_or(u64::MAX);
    let seed = env_u64("IOLENS_FUZZ_SEED").unwrap_or(1);
    let hang_s = env_u64("IOLENS_FUZZ_HANG_S").unwrap_or(20);
    let work = tempfile::tempdir().unwrap();
    let seeds = seeds(work.path());
    let n_text = seeds.iter().filter(|s| !s.results).count();
    assert!(n_text > 0, "no fixtures found under tests/fixtures");
    eprintln!(
        "fuzz: {} seeds ({} text fixtures, {} results documents), {} formats + trace, budget {} s, seed {}",
        seeds.len(),
        n_text,
        seeds.len() - n_text,
        Format::value_variants().len(),
        secs,
        seed
    );

    // Panics are caught and reported as findings; keep their messages, not the default output.
    let last_panic = Arc::new(Mutex::new(String::new()));
    {
        let last = last_panic.clone();
        std::panic::set_hook(Box::new(move |info| {
            let what = STAGE.with(|c| c.get());
            *last.lock().unwrap() = format!("[{what}] {}", info.to_string().replace('\n', " "));
        }));
    }
    // Watchdog: a case that runs too long is a hang; save it and stop.
    let current: Arc<Mutex<(String, Vec<u8>)>> = Arc::default();
    let started_ms = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    {
        let (current, started_ms) = (current.clone(), started_ms.clone());
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(500));
            let s = started_ms.load(Ordering::Relaxed);
            let now = t0.elapsed().as_millis() as u64;
            if s > 0 && now.saturating_sub(s) > hang_s * 1000 {
                let (name, data) = current.lock().unwrap().clone();
                let dir = findings_dir();
                let _ = std::fs::create_dir_all(&dir);
                let p = dir.join("hang.bin");
                let _ = std::fs::write(&p, &data);
                eprintln!(
                    "fuzz: HANG: a case from {name} ran over {hang_s} s; input written to {}",
                    p.display()
                );
                std::process::exit(1);
            }
        });
    }

    let input = work.path().join("case.in");
    let mut findings: Vec<String> = Vec::new();
    // Replay, unmutated, every past finding kept under tests/fixtures/fuzz (regressions), or
    // only the files named by IOLENS_FUZZ_REPLAY=FILE[:FILE...].
    let replay_only = std::env::var("IOLENS_FUZZ_REPLAY").ok();
    let replay: Vec<PathBuf> = match &replay_only {
        Some(list) => list
            .split(':')
            .filter(|f| !f.is_empty())
            .map(PathBuf::from)
            .collect(),
        None => {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz");
            let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
                .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            v.sort();
            v
        }
    };
    for f in &replay {
        let data = std::fs::read(f).unwrap();
        let mut rng = SmallRng::seed_from_u64(seed);
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            if data.starts_with(b"{") {
                load_and_render(&String::from_utf8_lossy(&data));
            }
            std::fs::write(&input, &data).unwrap();
            for unit in UNITS {
                feed_text_units(&input, &mut rng, Some(unit));
            }
        }));
        if outcome.is_err() {
            findings.push(format!("{}: {}", f.display(), last_panic.lock().unwrap()));
        }
    }
    eprintln!(
        "fuzz: replayed {} saved finding(s), {} panic(s)",
        replay.len(),
        findings.len()
    );
    if replay_only.is_some() || !findings.is_empty() {
        let _ = std::panic::take_hook();
        assert!(findings.is_empty(), "replay: {}", findings.join("\n"));
        return;
    }
    let options = iolens::commands::value_options();
    assert!(
        options.len() > 20,
        "only {} options take a value",
        options.len()
    );
    let mut cli_cases = 0u64;
    let mut cases = 0u64;
    // (cases, ms) of text inputs and of results documents.
    let (mut time_text, mut time_results) = ((0u64, 0u64), (0u64, 0u64));
    let deadline = t0 + Duration::from_secs(secs);
    while cases < max_cases && Instant::now() < deadline {
        let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ cases);
        let s = &seeds[rng.gen_range(0..seeds.len())];
        let other = &seeds[rng.gen_range(0..seeds.len())];
        if rng.gen_ratio(1, 10) {
            // A command-line case (cheap).
            let outcome =
                std::panic::catch_unwind(AssertUnwindSafe(|| cli_case(&mut rng, &options)));
            if outcome.is_err() {
                let msg = last_panic.lock().unwrap().clone();
                eprintln!("fuzz: PANIC on command-line case {cases}: {msg}");
                findings.push(format!("command-line case {cases} (seed {seed}): {msg}"));
            }
            cli_cases += 1;
            cases += 1;
            continue;
        }
        let mut data = s.data.clone();
        let results = s.results;
        if results && rng.gen_bool(0.7) {
            let mut v: serde_json::Value = serde_json::from_slice(&data).unwrap();
            mutate_json(&mut rng, &mut v);
            data = serde_json::to_vec_pretty(&v).unwrap();
        } else {
            mutate(&mut rng, &mut data, &other.data);
        }
        *current.lock().unwrap() = (s.name.clone(), data.clone());
        let started_ms_case = t0.elapsed().as_millis() as u64 + 1;
        started_ms.store(started_ms_case, Ordering::Relaxed);
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            if results {
                load_and_render(&String::from_utf8_lossy(&data));
                read_and_merge(&data, work.path(), &mut rng);
            } else {
                std::fs::write(&input, &data).unwrap();
                feed_text(&input, &mut rng);
            }
        }));
        started_ms.store(0, Ordering::Relaxed);
        let spent = t0.elapsed().as_millis() as u64 + 1 - started_ms_case;
        if results {
            time_results.0 += 1;
            time_results.1 += spent;
        } else {
            time_text.0 += 1;
            time_text.1 += spent;
        }
        if outcome.is_err() {
            let dir = findings_dir();
            std::fs::create_dir_all(&dir).unwrap();
            let p = dir.join(format!("case-{seed}-{cases}.bin"));
            std::fs::write(&p, &data).unwrap();
            let msg = last_panic.lock().unwrap().clone();
            eprintln!(
                "fuzz: PANIC on case {cases} (from {}): {msg}\n  input written to {}",
                s.name,
                p.display()
            );
            findings.push(format!("{}: {msg}", p.display()));
        }
        cases += 1;
    }
    let _ = std::panic::take_hook();
    let el = t0.elapsed().as_secs_f64();
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l[6..].trim().to_string())
        })
        .unwrap_or_default();
    eprintln!(
        "fuzz: {cases} cases in {el:.1} s ({:.0} cases/s), {} finding(s), peak RSS {peak}",
        cases as f64 / el,
        findings.len()
    );
    eprintln!(
        "fuzz: {} text cases ({:.1} ms each, every reader), {} results cases ({:.1} ms each, every loader), {cli_cases} command-line cases ({} options)",
        time_text.0,
        time_text.1 as f64 / time_text.0.max(1) as f64,
        time_results.0,
        time_results.1 as f64 / time_results.0.max(1) as f64,
        options.len()
    );
    assert!(
        findings.is_empty(),
        "fuzzing found {} panic(s):\n{}",
        findings.len(),
        findings.join("\n")
    );
}
