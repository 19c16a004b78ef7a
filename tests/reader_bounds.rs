//! Readers are bounded by what their input holds, not by what it is or claims (issue 22):
//! `/dev/zero` and `/dev/urandom` given to every command that reads results, bpftrace output
//! of thousands of one-line keys, random bytes and histograms that declare absurd layouts.
//! Each runs the real binary under a time limit (killed past it, so a regression fails instead
//! of hanging CI) and its peak memory is its own, after exec (`common::peak`).

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::bin;

/// Most memory any reader may take (the budget).
const MAX_PEAK_KB: u64 = 256 * 1024;

struct Outcome {
    /// Exit code; `None` when killed at the time limit.
    code: Option<i32>,
    peak_kb: u64,
    stderr: String,
}

/// Run `cmd` for at most `limit` (then SIGKILL): its exit code, peak RSS (its own, after
/// exec: [`common::peak`]) and stderr.
fn bounded(cmd: Command, limit: Duration) -> Outcome {
    let p = common::peak::run(cmd, limit);
    Outcome {
        code: if p.killed { None } else { p.status.code() },
        peak_kb: p.peak_kb,
        stderr: p.stderr_text(),
    }
}

fn args(a: &[&str]) -> Command {
    let mut c = bin();
    c.args(a);
    c
}

/// Refused with exit 2 and `needle` in the message, within budget.
fn assert_refused(what: &str, o: &Outcome, needle: &str) {
    assert!(
        o.code.is_some(),
        "{what}: killed at the time limit (peak {} KB)",
        o.peak_kb
    );
    assert_eq!(o.code, Some(2), "{what}: {}", o.stderr);
    assert!(o.stderr.contains(needle), "{what}: {}", o.stderr);
    assert!(
        o.peak_kb < MAX_PEAK_KB,
        "{what}: peak RSS {} KB over {MAX_PEAK_KB} KB",
        o.peak_kb
    );
}

#[test]
fn results_readers_refuse_devices_and_random_data_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    for dev in ["/dev/zero", "/dev/urandom"] {
        for cmd in [
            vec!["show", dev],
            vec!["report", dev, "-o", out],
            vec!["compare", dev, dev],
            vec!["export", dev, "--csv", out],
            vec!["merge", dev, "-o", out],
        ] {
            let what = cmd.join(" ");
            let o = bounded(args(&cmd), Duration::from_secs(20));
            assert_refused(&what, &o, "is not a results file");
        }
    }
}

/// 20,000 distinct `@name:` lines (each with one row) took 270-540 KB per key.
#[test]
fn bpftrace_of_thousands_of_keys_is_refused_within_budget() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("keys.bt");
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&format!("@k{i}:\n[1, 2) 1 |@|\n"));
    }
    std::fs::write(&f, text).unwrap();
    let mut c = bin();
    c.args(["ingest", "--format", "bpftrace"])
        .arg(&f)
        .arg("--json")
        .arg(dir.path().join("r.json"));
    let o = bounded(c, Duration::from_secs(30));
    assert_refused("bpftrace of 20,000 keys", &o, "distinct histograms");
}

/// An endless stream of random bytes read as bpftrace keeps reading (it is endless) in
/// constant memory: an `@x[` line once gathered the rest of the input into one map key.
#[test]
fn bpftrace_of_dev_urandom_stays_within_budget() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = bin();
    c.args(["ingest", "--format", "bpftrace", "/dev/urandom", "--json"])
        .arg(dir.path().join("r.json"));
    let o = bounded(c, Duration::from_secs(8));
    assert!(
        o.peak_kb < MAX_PEAK_KB,
        "bpftrace of /dev/urandom: peak RSS {} KB over {MAX_PEAK_KB} KB",
        o.peak_kb
    );
}

/// Random bytes with one `@zz:` line among them held no histogram, yet exited 0 with an
/// empty one.
#[test]
fn bpftrace_without_a_histogram_row_is_no_data() {
    use rand::{Rng as _, SeedableRng as _};
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("random.bt");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(22);
    let mut bytes: Vec<u8> = (0..3000).map(|_| rng.gen()).collect();
    bytes.extend_from_slice(b"\n@zz:\n");
    bytes.extend((0..3000).map(|_| rng.gen::<u8>()));
    std::fs::write(&f, bytes).unwrap();
    let mut c = bin();
    c.args(["ingest", "--format", "bpftrace"])
        .arg(&f)
        .arg("--json")
        .arg(dir.path().join("r.json"));
    let o = bounded(c, Duration::from_secs(20));
    assert_refused(
        "random bytes with @zz: as bpftrace",
        &o,
        "no bpftrace data found",
    );
}

/// `dev-synth` results of `seconds` one-second intervals in `d` (rank 0 of 1).
fn synth(d: &Path, seconds: &str) -> serde_json::Value {
    let f = d.join(format!("synth{seconds}.json"));
    let o = bin()
        .args(["-q", "dev-synth", "--seconds", seconds, "--samples", "5"])
        .args(["--rank", "0", "--ranks", "1", "-o"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap()
}

/// A results file whose every histogram declares 1 ns .. 2^62 at 5 significant digits (25 MB
/// of counts each, for the few values it holds) kept `show` busy for minutes.
#[test]
fn histograms_declaring_huge_layouts_are_read_by_what_they_hold() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let mut doc = synth(dir.path(), "600");
    // V2-deflate, 1 ns .. 2^62 at 5 digits, `count` values of 1 us: a header, a run of 1000
    // zero counts and one count (what any HdrHistogram writer emits for it).
    let wide = |count: u64| -> String {
        fn leb(out: &mut Vec<u8>, n: i64) {
            let mut v = ((n << 1) ^ (n >> 63)) as u64;
            loop {
                let b = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    out.push(b);
                    return;
                }
                out.push(b | 0x80);
            }
        }
        let mut payload = Vec::new();
        leb(&mut payload, -1000);
        leb(&mut payload, count as i64);
        let mut raw = Vec::new();
        raw.extend_from_slice(&0x1c84_9313u32.to_be_bytes());
        raw.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        raw.extend_from_slice(&0u32.to_be_bytes());
        raw.extend_from_slice(&5u32.to_be_bytes());
        raw.extend_from_slice(&1u64.to_be_bytes());
        raw.extend_from_slice(&(1u64 << 62).to_be_bytes());
        raw.extend_from_slice(&1.0f64.to_be_bytes());
        raw.extend_from_slice(&payload);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&raw).unwrap();
        let z = z.finish().unwrap();
        let mut bytes = 0x1c84_9314u32.to_be_bytes().to_vec();
        bytes.extend_from_slice(&(z.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&z);
        base64::engine::general_purpose::STANDARD.encode(bytes)
    };
    let mut n = 0;
    for run in doc["runs"].as_array_mut().unwrap() {
        for op in run["ops"].as_array_mut().unwrap() {
            op["hist"] = wide(op["count"].as_u64().unwrap()).into();
            for iv in op["intervals"].as_array_mut().unwrap() {
                iv["hist"] = wide(iv["count"].as_u64().unwrap()).into();
                n += 1;
            }
        }
    }
    assert!(n >= 600, "{n} histograms re-encoded");
    let f = dir.path().join("wide.json");
    std::fs::write(&f, doc.to_string()).unwrap();
    let t0 = Instant::now();
    let o = bounded(
        args(&["show", f.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    assert_eq!(o.code, Some(0), "show of wide histograms: {}", o.stderr);
    assert!(o.peak_kb < MAX_PEAK_KB, "peak RSS {} KB", o.peak_kb);
    eprintln!(
        "show of {n} wide histograms ({} KB): {:.1} s, peak {} KB",
        std::fs::metadata(&f).unwrap().len() >> 10,
        t0.elapsed().as_secs_f64(),
        o.peak_kb
    );
}

/// `compare` of two long runs decoded every interval's histogram of both at once: two
/// 24-hour runs took 22.9 GB (about 265 KB an interval; two hours of one-second intervals
/// here took 971 MB). Then it held the second file's text while parsing it beside the first
/// file's model: 288 MB for two 24-hour runs (217 MB of results), over the 256 MB.
/// Results are now parsed from the descriptor, never held as text: the peak is what the two
/// models hold (a little less than their text) and the binary, under the size of the inputs
/// plus 16 MB; for two 24-hour runs that is under 233 MB. Measured (debug build): two 6-hour
/// runs (53 MB of results) 57.9 MB, 82.7 MB before; `bench/reader-memory.sh` measures the
/// 24-hour pair (185 MB release).
#[test]
fn compare_of_long_runs_is_bounded_by_what_they_hold() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for seed in ["1", "2"] {
        let f = dir.path().join(format!("long{seed}.json"));
        let o = bin()
            .args(["-q", "dev-synth", "--seconds", "21600", "--samples", "200"])
            .args(["--seed", seed, "-o"])
            .arg(&f)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        files.push(f);
    }
    let held_kb: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len() >> 10)
        .sum();
    let mut c = bin();
    c.arg("compare").args(&files);
    let t0 = Instant::now();
    let o = bounded(c, Duration::from_secs(300));
    assert_eq!(o.code, Some(0), "compare of 6 hours: {}", o.stderr);
    // The two models (each a little less than its text) and the debug binary itself.
    let bound_kb = held_kb + 16 * 1024;
    assert!(
        o.peak_kb < bound_kb,
        "compare of two 6-hour runs ({held_kb} KB of results): peak RSS {} KB, over {bound_kb} KB",
        o.peak_kb
    );
    eprintln!(
        "compare of two 6-hour runs ({held_kb} KB): {:.1} s, peak {} KB",
        t0.elapsed().as_secs_f64(),
        o.peak_kb
    );
}

/// An `.hlog` reader kept a full-layout histogram for every line until the end (about 270 KB
/// a line: 4,000 one-value lines took over 1 GB). It keeps what each line holds now.
#[test]
fn hlog_memory_follows_what_its_lines_hold() {
    use base64::Engine as _;
    use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
    let dir = tempfile::tempdir().unwrap();
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    h.record(1000).unwrap();
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(&h, &mut buf).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&buf);
    let f = dir.path().join("long.hlog");
    let text: String = (0..4000)
        .map(|i| format!("{i}.000,1.000,1.000,{b64}\n"))
        .collect();
    std::fs::write(&f, &text).unwrap();
    let mut c = bin();
    c.args(["ingest", "-q", "--format", "hlog"])
        .arg(&f)
        .arg("--json")
        .arg(dir.path().join("r.json"));
    let o = bounded(c, Duration::from_secs(120));
    assert_eq!(o.code, Some(0), "hlog of 4,000 lines: {}", o.stderr);
    // The input and the results written from it, a few times over, and the binary itself.
    let bound_kb = 16 * (text.len() as u64 >> 10) + 48 * 1024;
    assert!(
        o.peak_kb < bound_kb,
        "hlog of 4,000 lines ({} KB): peak RSS {} KB, over {bound_kb} KB",
        text.len() >> 10,
        o.peak_kb
    );
}

/// A results file claiming a world of 4,294,967,295 ranks (the issue's `--ranks 4294967295`,
/// which `run` now refuses, edited into a file): `merge` listed its missing ranks, 16.9 GB,
/// then aborted. Every reader refuses what iolens could not have recorded, at once; the same
/// file with a world iolens takes merges.
#[test]
fn results_claiming_an_absurd_world_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = d.join("base.json");
    let o = bin()
        .args(["-q", "dev-synth", "--seconds", "5", "--samples", "5"])
        .args(["--rank", "0", "--ranks", "2", "-o"])
        .arg(&base)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    let out = d.join("out");
    let out = out.to_str().unwrap();
    for (rank, ranks, says) in [
        (0u64, 4_294_967_295u64, "claims a world of 4294967295 ranks"),
        (0, 0, "claims a world of 0 ranks"),
        (
            4_294_967_294,
            4_294_967_295,
            "claims a world of 4294967295 ranks",
        ),
        (7, 2, "claims rank 7 of a world of 2"),
        (
            1_000_000,
            1_000_000,
            "claims rank 1000000 of a world of 1000000",
        ),
    ] {
        let mut x = doc.clone();
        x["placement"]["rank"] = rank.into();
        x["placement"]["ranks"] = ranks.into();
        let f = d.join("claims.json");
        std::fs::write(&f, serde_json::to_vec(&x).unwrap()).unwrap();
        let f = f.to_str().unwrap();
        for cmd in [
            vec!["merge", f, "-o", out],
            vec!["merge", "--force", f, "-o", out],
            vec!["show", f],
            vec!["export", f, "--csv", out],
        ] {
            let what = format!("{} (rank {rank} of {ranks})", cmd.join(" "));
            let o = bounded(args(&cmd), Duration::from_secs(60));
            assert_refused(&what, &o, says);
        }
        assert!(!Path::new(out).exists());
    }
    // The largest world iolens takes: ranks 0 and 999,999 of 1,000,000 merge, the 999,998
    // missing ones named.
    let mut files = Vec::new();
    for rank in [0u32, 999_999] {
        let mut x = doc.clone();
        x["placement"]["rank"] = rank.into();
        x["placement"]["ranks"] = 1_000_000u32.into();
        x["placement"]["host"] = format!("synth-{rank}").into();
        let f = d.join(format!("r{rank}.json"));
        std::fs::write(&f, serde_json::to_vec(&x).unwrap()).unwrap();
        files.push(f);
    }
    let mut c = bin();
    c.arg("merge").args(&files).args(["-o", out]);
    let p = common::peak::run(c, Duration::from_secs(120));
    let said = String::from_utf8_lossy(&p.stdout).into_owned() + &p.stderr_text();
    assert!(p.status.success() && !p.killed, "{said}");
    assert!(p.peak_kb < MAX_PEAK_KB, "peak {} KB", p.peak_kb);
    // The warning names them as a range, not 999,998 numbers.
    assert!(
        said.contains("ranks 1–999998 of a world of 1000000"),
        "{said}"
    );
    assert!(said.len() < 8192, "{} bytes said", said.len());
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    assert_eq!(
        m["merge"]["missing_ranks"].as_array().map(Vec::len),
        Some(999_998)
    );
}
