//! The Prometheus exposition (issue 29): `watch --prometheus` scraped by a real Prometheus
//! server (Debian's `prometheus` package, started here on a free port with its own config and
//! storage), and `--metrics FILE` read back by `ingest --format prometheus`.
//!
//! The BPF test needs root and the `prometheus` binary: without them it skips with a note,
//! except under CI (env CI set), where it fails.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::http::{free_port, http_get};
use common::{bin, ci, results_of, root_or_skip};
use hdrhistogram::Histogram;
use iolens::results::Results;

/// Width of a classic bucket (16 an octave): the most a PromQL quantile can be off.
const BUCKET_WIDTH: f64 = 0.0443;
/// What the issue allows a native histogram's PromQL quantile (its buckets at schema 5 are
/// 2^(1/32) − 1 = 2.19 % wide).
const NATIVE_LIMIT: f64 = 0.03;

/// The `prometheus` binary, or `None` (skipped with a note; a failure under CI).
fn prometheus_or_skip(what: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("prometheus"))
            .find(|f| f.is_file())
    });
    if found.is_none() {
        assert!(
            !ci(),
            "{what} needs the prometheus server (apt-get install prometheus), and CI is set"
        );
        eprintln!("note: {what} skipped: no prometheus binary (apt-get install prometheus)");
    }
    found
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A Prometheus server of its own: temp config and storage, a free port, scraping `targets`
/// every second; `native`: with its native-histogram feature on (it then asks for the protobuf
/// exposition). Killed when dropped.
struct Prom {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Prom {
    fn start(bin: &Path, targets: &[&str], native: bool) -> Prom {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        let list = targets
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - \
                 job_name: iolens\n    static_configs:\n      - targets: [{list}]\n"
            ),
        )
        .unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .args(native.then_some("--enable-feature=native-histograms"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let p = Prom {
            child,
            addr,
            _dir: dir,
        };
        let t = Instant::now();
        while !matches!(http_get(&p.addr, "/-/ready"), Ok((200, _))) {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "prometheus not ready"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// An instant query's one value (`None`: an empty result).
    fn query(&self, q: &str) -> Option<f64> {
        let (status, body) =
            http_get(&self.addr, &format!("/api/v1/query?query={}", urlencode(q))).unwrap();
        assert_eq!(status, 200, "query {q}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let r = v["data"]["result"].as_array()?;
        assert!(r.len() <= 1, "query {q} gave {} series", r.len());
        r.first()?["value"][1].as_str()?.parse().ok()
    }

    /// Wait until `q` is `want` (every target up, say); false after `within`.
    fn wait_for(&self, q: &str, want: f64, within: Duration) -> bool {
        let t = Instant::now();
        while t.elapsed() < within {
            if self.query(q) == Some(want) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        false
    }
}

impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `iolens watch ARGS --prometheus 127.0.0.1:0`, once its probes are attached; with the address
/// it serves.
fn start_watch(args: &[&str]) -> (Child, String) {
    let mut child = bin()
        .arg("watch")
        .args(args)
        .args(["--prometheus", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        let n = err.read_line(&mut line).unwrap();
        assert!(n > 0, "iolens watch ended before serving");
        assert!(!line.contains("error"), "iolens watch failed: {line}");
        if let Some(rest) = line.split("serving metrics at http://").nth(1) {
            break rest.trim().trim_end_matches("/metrics").to_string();
        }
    };
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        if !rest.trim().is_empty() {
            eprintln!("watch stderr: {rest}");
        }
    });
    (child, addr)
}

/// End a watch with SIGTERM and wait for it to write its results and exit 143.
fn terminate(mut w: Child) {
    // SAFETY: kill sends a signal to the child we started.
    unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    loop {
        if let Some(st) = w.try_wait().unwrap() {
            assert_eq!(st.code(), Some(143), "iolens watch exited with {st}");
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "watch did not end on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pread64 histogram of a watch's results, and its per-thread counts (pid's threads).
fn watched_reads(r: &Results) -> Histogram<u64> {
    let run = r.runs.iter().find(|r| r.name == "syscalls").unwrap();
    run.op("pread64").unwrap().hist.decode().unwrap()
}

#[test]
fn prometheus_scrapes_two_watchers_and_agrees_with_their_results() {
    let what = "prometheus_scrapes_two_watchers_and_agrees_with_their_results";
    if !root_or_skip(what) {
        return;
    }
    let Some(prom_bin) = prometheus_or_skip(what) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = common::data_file(tmp.path(), 64);
    // Two "hosts": two watchers, each of its own load, told apart by the process name (an
    // iolens binary run through a link of that name).
    let names = ["iolensprom1", "iolensprom2"];
    let mut watches = Vec::new();
    let mut addrs = Vec::new();
    for n in names {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_iolens"), tmp.path().join(n)).unwrap();
        let json = tmp.path().join(format!("{n}-watch.json"));
        let (w, addr) = start_watch(&[
            "--comm",
            n,
            "--wait",
            "--threads",
            "--interval",
            "500ms",
            "--no-progress",
            "--json",
            json.to_str().unwrap(),
        ]);
        watches.push(w);
        addrs.push(addr);
    }
    // Two servers scrape both: one as Prometheus does by default (text, classic buckets), one
    // with native histograms (protobuf).
    let targets: Vec<&str> = addrs.iter().map(|a| a.as_str()).collect();
    let prom = Prom::start(&prom_bin, &targets, false);
    let native = Prom::start(&prom_bin, &targets, true);
    for p in [&prom, &native] {
        assert!(
            p.wait_for("sum(up{job=\"iolens\"})", 2.0, Duration::from_secs(20)),
            "prometheus never scraped both watchers"
        );
    }
    // The loads: rate-limited reads, one at a time per host, at the same time.
    let loads: Vec<Child> = names
        .iter()
        .zip([1500, 2500])
        .map(|(n, rate)| {
            Command::new(tmp.path().join(n))
                .args(["run", "--target", data.to_str().unwrap(), "-q"])
                .args(["--rate", &rate.to_string(), "--duration", "3s"])
                .args(["--verify", "none", "--no-progress", "--json"])
                .arg(tmp.path().join(format!("{n}-run.json")))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut l in loads {
        assert!(l.wait().unwrap().success(), "the load failed");
    }
    // Every event of the loads in a published interval (500 ms), then scraped (1 s): wait
    // until both counts have stayed the same for 2 s (at most 30 s).
    let counts = || -> Vec<u64> {
        addrs
            .iter()
            .flat_map(|a| {
                let q = format!(
                    "sum(iolens_syscall_latency_seconds_count{{op=\"pread64\",instance=\"{a}\"}})"
                );
                let nq = format!(
                    "histogram_count(sum(iolens_syscall_latency_seconds{{op=\"pread64\",\
                     instance=\"{a}\"}}))"
                );
                [
                    prom.query(&q).unwrap_or(0.0) as u64,
                    native.query(&nq).unwrap_or(0.0) as u64,
                ]
            })
            .collect()
    };
    let t = Instant::now();
    let mut promql_counts = counts();
    loop {
        std::thread::sleep(Duration::from_secs(2));
        let now = counts();
        if now == promql_counts || t.elapsed() > Duration::from_secs(30) {
            break;
        }
        promql_counts = now;
    }
    let q99 = |sel: &str| {
        prom.query(&format!(
            "histogram_quantile(0.99, sum by (le) \
             (iolens_syscall_latency_seconds_bucket{{op=\"pread64\"{sel}}}))"
        ))
        .unwrap()
    };
    let promql_p99: Vec<f64> = addrs
        .iter()
        .map(|a| q99(&format!(",instance=\"{a}\"")))
        .collect();
    let promql_p99_all = q99("");
    // The native histograms' quantiles, per host and both together.
    let nq = |q: f64, sel: &str| {
        native
            .query(&format!(
                "histogram_quantile({q}, sum(iolens_syscall_latency_seconds{{op=\"pread64\"{sel}}}))"
            ))
            .unwrap()
    };
    const QS: [f64; 3] = [0.5, 0.9, 0.99];
    let native_q: Vec<Vec<f64>> = addrs
        .iter()
        .map(|a| {
            QS.iter()
                .map(|&q| nq(q, &format!(",instance=\"{a}\"")))
                .collect()
        })
        .collect();
    let native_q_all: Vec<f64> = QS.iter().map(|&q| nq(q, "")).collect();
    let own_cpu = prom
        .query("sum(process_cpu_seconds_total{job=\"iolens\"})")
        .unwrap();
    for w in watches {
        terminate(w);
    }
    drop(prom);
    drop(native);

    let mut merged: Option<Histogram<u64>> = None;
    for (i, n) in names.iter().enumerate() {
        let watched = Results::read_file(&tmp.path().join(format!("{n}-watch.json"))).unwrap();
        let ran = Results::read_file(&tmp.path().join(format!("{n}-run.json"))).unwrap();
        let h = watched_reads(&watched);
        // Exact: what Prometheus scraped is every pread64 the watch recorded.
        assert_eq!(
            promql_counts[2 * i],
            h.len(),
            "{n}: Prometheus' count vs the watch's own"
        );
        assert_eq!(
            promql_counts[2 * i + 1],
            h.len(),
            "{n}: Prometheus' native histogram's count vs the watch's own"
        );
        native_agrees(n, &h, &native_q[i]);
        // And the run's own I/O is in it, exactly, as its session thread's calls (the
        // process's main thread reads the target's first blocks when it opens it).
        let completed = ran.runs[0].counters["ios_completed_incl_warmup"] as u64;
        let b = watched.watch.as_ref().unwrap();
        let session = b
            .processes
            .iter()
            .filter_map(|p| p.syscalls.get("pread64").map(|r| r[0]))
            .max()
            .unwrap();
        assert_eq!(
            session, completed,
            "{n}: the session thread's reads vs the run's"
        );
        assert!(
            h.len() - completed <= 16,
            "{n}: {} reads besides the run's",
            h.len() - completed
        );
        let own = h.value_at_quantile(0.99) as f64 / 1e9;
        let off = promql_p99[i] / own - 1.0;
        eprintln!(
            "{n}: {} reads; p99 PromQL {:.1} us, iolens {:.1} us ({:+.2} %)",
            h.len(),
            promql_p99[i] * 1e6,
            own * 1e6,
            off * 100.0
        );
        assert!(
            off.abs() <= BUCKET_WIDTH + 0.002,
            "{n}: PromQL p99 {} s vs iolens' {own} s",
            promql_p99[i]
        );
        match &mut merged {
            None => merged = Some(h),
            Some(m) => m.add(&h).unwrap(),
        }
    }
    // `iolens merge` of the two watches: exactly the sum of their histograms.
    let m = merged.unwrap();
    let merged_json = tmp.path().join("merged.json");
    let out = bin()
        .args(["-q", "merge"])
        .args(names.map(|n| tmp.path().join(format!("{n}-watch.json"))))
        .arg("-o")
        .arg(&merged_json)
        .output()
        .unwrap();
    // A watch without a duration ended by SIGTERM ended as asked: no input was interrupted.
    assert!(
        out.status.code() == Some(0),
        "iolens merge of the watches: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let by_merge = watched_reads(&Results::read_file(&merged_json).unwrap());
    assert_eq!(by_merge.len(), m.len(), "merged pread64 count");
    for q in [0.5, 0.9, 0.99, 0.999] {
        assert_eq!(
            by_merge.value_at_quantile(q),
            m.value_at_quantile(q),
            "merged p{}",
            q * 100.0
        );
    }
    // Two hosts aggregated in PromQL: the p99 of both watches' histograms merged exactly.
    let own = m.value_at_quantile(0.99) as f64 / 1e9;
    let off = promql_p99_all / own - 1.0;
    eprintln!(
        "both: p99 PromQL {:.1} us, merged {:.1} us ({:+.2} %); watchers' own CPU {own_cpu:.2} s",
        promql_p99_all * 1e6,
        own * 1e6,
        off * 100.0
    );
    assert!(
        off.abs() <= BUCKET_WIDTH + 0.002,
        "aggregated PromQL p99 {promql_p99_all} s vs the merged {own} s"
    );
    native_agrees("both", &m, &native_q_all);
    assert!(own_cpu > 0.0);
}

/// A native histogram's PromQL quantiles (p50, p90, p99) within [`NATIVE_LIMIT`] of the exact
/// ones of `h`.
fn native_agrees(who: &str, h: &Histogram<u64>, promql: &[f64]) {
    for (q, &p) in [0.5, 0.9, 0.99].iter().zip(promql) {
        let own = h.value_at_quantile(*q) as f64 / 1e9;
        let off = p / own - 1.0;
        eprintln!(
            "{who}: native p{} PromQL {:.1} us, iolens {:.1} us ({:+.2} %)",
            q * 100.0,
            p * 1e6,
            own * 1e6,
            off * 100.0
        );
        assert!(
            off.abs() <= NATIVE_LIMIT,
            "{who}: native PromQL p{} {p} s vs iolens' {own} s",
            q * 100.0
        );
    }
}

/// `iolens ingest --format prometheus FILE`, its results (written in `dir`).
fn ingest(file: &Path, dir: &Path) -> Results {
    let json = dir.join("back.json");
    let out = bin()
        .args(["ingest", "--format", "prometheus", "-q", "--json"])
        .arg(&json)
        .arg(file)
        .output()
        .unwrap();
    results_of(&out, &json)
}

#[test]
fn metrics_file_reads_back_with_the_same_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("scratch");
    let run_json = tmp.path().join("run.json");
    let prom = tmp.path().join("run.prom");
    let out = bin()
        .args(["run", "--target", target.to_str().unwrap(), "--size", "8m"])
        .args(["--engine", "null", "--duration", "1s", "--rate", "3000"])
        .args([
            "--pattern",
            "randrw",
            "--read-pct",
            "70",
            "--no-progress",
            "-q",
        ])
        .arg("--json")
        .arg(&run_json)
        .arg("--metrics")
        .arg(&prom)
        .output()
        .unwrap();
    let ran = results_of(&out, &run_json);
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(text.contains("# TYPE iolens_op_latency_seconds histogram"));
    let back = ingest(&prom, tmp.path());
    let run = &ran.runs[0];
    assert!(run.ops.len() >= 2, "{:?}", run.ops.len());
    for op in &run.ops {
        assert!(op.count > 100, "{} did {}", op.op, op.count);
        let b = back
            .runs
            .iter()
            .flat_map(|r| &r.ops)
            .find(|o| o.op.ends_with(&format!("op={}", op.op)))
            .unwrap_or_else(|| panic!("no op {} read back", op.op));
        assert_eq!(b.count, op.count, "{}", op.op);
        // Its p99 within a bucket's width of the run's own.
        let off = b.summary.p99_ns as f64 / op.summary.p99_ns as f64 - 1.0;
        assert!(off.abs() <= BUCKET_WIDTH + 0.002, "{}: {off}", op.op);
    }
}

/// Skip (or, under CI, fail) when a validator is missing.
fn unavailable(why: &str) {
    assert!(!ci(), "{why} (CI is set: scripts/test.sh must provide it)");
    eprintln!("SKIPPED: {why}");
}

#[test]
fn exporter_recipes_are_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The systemd unit, by systemd's own checker, its ExecStart pointed at this build; a broken
    // unit is refused (so the check can fail).
    let unit = std::fs::read_to_string(root.join("recipes/iolens-watch.service")).unwrap();
    assert!(unit.contains("--prometheus :9464"));
    let analyze = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("systemd-analyze"))
            .find(|f| f.is_file())
    });
    match analyze {
        None => unavailable("systemd-analyze is not installed"),
        Some(tool) => {
            let dir = tempfile::tempdir().unwrap();
            let here = unit.replace("/usr/local/bin/iolens", env!("CARGO_BIN_EXE_iolens"));
            for (text, ok) in [
                (here.clone(), true),
                (here.replace("Type=simple", "Type=simplest"), false),
            ] {
                let p = dir.path().join("iolens-watch.service");
                std::fs::write(&p, text).unwrap();
                let out = Command::new(&tool).arg("verify").arg(&p).output().unwrap();
                let err = String::from_utf8_lossy(&out.stderr).into_owned();
                // verify exits 0 on warnings about the host; the unit's own errors name it.
                let bad = !out.status.success()
                    || err
                        .lines()
                        .any(|l| l.contains("iolens-watch.service") && !l.contains("Unknown"));
                assert_eq!(!bad, ok, "systemd-analyze verify: {err}");
            }
        }
    }
    // The DaemonSet, offline against the Kubernetes API schema.
    let local = root.join("target/k8s-validate/bin/kubernetes-validate");
    let tool = if local.is_file() {
        local
    } else {
        unavailable("kubernetes-validate is not installed (scripts/test.sh installs it)");
        return;
    };
    let manifest = root.join("recipes/kubernetes-daemonset.yaml");
    for (text, ok) in [
        (std::fs::read_to_string(&manifest).unwrap(), true),
        (
            std::fs::read_to_string(&manifest)
                .unwrap()
                .replace("containerPort: 9464", "containerPort: nine"),
            false,
        ),
    ] {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        let out = Command::new(&tool)
            .arg("--strict")
            .arg(f.path())
            .output()
            .unwrap();
        assert_eq!(
            out.status.success(),
            ok,
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The delimited protobuf exposition's families (prost, the structs the exporter writes with).
fn families(file: &Path) -> Vec<iolens::results::metric_family::MetricFamily> {
    use prost::Message as _;
    let bytes = std::fs::read(file).unwrap();
    let mut buf = bytes.as_slice();
    let mut out = Vec::new();
    while !buf.is_empty() {
        out.push(
            iolens::results::metric_family::MetricFamily::decode_length_delimited(&mut buf)
                .unwrap(),
        );
    }
    out
}

#[test]
fn real_protobuf_scrapes_read_back_native_and_classic_histograms() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real");
    let tmp = tempfile::tempdir().unwrap();
    // Prometheus 2.42's own histograms (classic buckets in protobuf): every series of seconds
    // with the count its message gives.
    let file = root.join("prometheus_2.42_self_metrics.pb");
    let back = ingest(&file, tmp.path());
    let mut series = 0;
    for f in families(&file) {
        let name = f.name.clone().unwrap();
        if f.r#type != Some(4) || !name.ends_with("_seconds") {
            continue;
        }
        let run = back.runs.iter().find(|r| r.name == name).unwrap();
        for m in &f.metric {
            let key: Vec<String> = m
                .label
                .iter()
                .map(|l| {
                    format!(
                        "{}={}",
                        l.name.as_deref().unwrap(),
                        l.value.as_deref().unwrap()
                    )
                })
                .collect();
            let key = if key.is_empty() {
                name.clone()
            } else {
                key.join(",")
            };
            let h = m.histogram.as_ref().unwrap();
            assert!(
                h.schema.is_none() && !h.bucket.is_empty(),
                "{name}: classic only"
            );
            assert_eq!(
                run.op(&key).unwrap().count,
                h.sample_count.unwrap(),
                "{name} {key}"
            );
            series += 1;
        }
    }
    // The fixture holds 3 (a server that scraped nothing yet): each one checked.
    assert!(series >= 3, "{series} series of seconds");
    assert!(!back.runs.iter().any(|r| r.name.ends_with("_bytes")));

    // client_golang's native histogram of 1000 known latencies, 100 us * 1.005^i: its
    // percentiles within the native bucket width (schema 3: 2^(1/8), 9.05 %). Read from the
    // classic buckets beside it instead, p50 would be about 3.2 ms (785 values spread over
    // (0, 5 ms]), not 1.28 ms.
    let file = root.join("client_golang_1.14_native_histogram.pb");
    let f = families(&file);
    let h = f[0].metric[0].histogram.as_ref().unwrap();
    assert_eq!(h.schema, Some(3), "the fixture's native schema");
    assert!(
        !h.bucket.is_empty(),
        "classic buckets beside the native ones"
    );
    let back = ingest(&file, tmp.path());
    let run = back
        .runs
        .iter()
        .find(|r| r.name == "demo_request_duration_seconds")
        .unwrap();
    let read = run.op("op=read").unwrap();
    assert_eq!(read.count, 1000);
    assert_eq!(run.op("op=write").unwrap().count, 1);
    let hist = read.hist.decode().unwrap();
    let width = 2f64.powf(1.0 / 8.0) - 1.0;
    for q in [0.5, 0.9, 0.99] {
        // The known value at rank ceil(q * 1000).
        let i = (q * 1000.0_f64).ceil() - 1.0;
        let truth = 100e-6 * 1.005f64.powf(i);
        let got = hist.value_at_quantile(q) as f64 / 1e9;
        let off = got / truth - 1.0;
        eprintln!(
            "native p{}: {got:.6} s, known {truth:.6} s ({:+.2} %)",
            q * 100.0,
            off * 100.0
        );
        assert!(
            off.abs() <= width,
            "p{}: {got} s against {truth} s",
            q * 100.0
        );
    }
}

#[test]
fn a_real_prometheus_scrape_reads_back_with_its_own_counts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = root.join("tests/fixtures/real/prometheus_2.42_self_metrics.txt");
    let tmp = tempfile::tempdir().unwrap();
    let back = ingest(&file, tmp.path());
    // Every `_count` line of a histogram of seconds, as the file gives it.
    let text = std::fs::read_to_string(&file).unwrap();
    let mut expected = 0;
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some((name, labels)) = series.split_once("_count") else {
            continue;
        };
        if !name.ends_with("_seconds") || !text.contains(&format!("# TYPE {name} histogram")) {
            continue;
        }
        let labels = labels
            .trim_matches(|c| c == '{' || c == '}')
            .replace('"', "");
        let run = back
            .runs
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no run {name}"));
        let op = if labels.is_empty() { name } else { &labels };
        let o = run
            .op(op)
            .unwrap_or_else(|| panic!("{name}: no op {op}: {:?}", run.ops.len()));
        assert_eq!(o.count, value.parse::<u64>().unwrap(), "{name} {op}");
        expected += 1;
    }
    assert!(expected >= 5, "{expected} series of seconds in the fixture");
    let ops: usize = back.runs.iter().map(|r| r.ops.len()).sum();
    assert_eq!(ops, expected);
    // The histograms of bytes and samples are left out, and said to be.
    assert!(!back.runs.iter().any(|r| r.name.ends_with("_bytes")));
    assert!(back
        .warnings
        .iter()
        .any(|w| w.contains("prometheus_http_response_size_bytes left out")));
}
