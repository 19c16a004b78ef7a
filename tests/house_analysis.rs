//! The typed analysis stored in results files (schema version 2) and shown by `show` and
//! `report`: a real short calibration (every phase), a real Oracle 10046 trace and a real SQLite
//! database run. Each test reads the numbers from the stored analysis and checks that the
//! renderers print those numbers; an older (version 1) file is still read and shown.

mod common;

use common::{bin, real};
use std::path::{Path, PathBuf};

use iolens::results::{Results, SCHEMA_VERSION};

fn run_ok(args: &[&str]) -> String {
    let out = bin()
        .args(args)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .output()
        .expect("runs");
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?} failed:\n{so}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    so
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn show_and_report(json: &Path) -> (String, String) {
    let text = run_ok(&["show", s(json)]);
    let html_path = json.with_extension("html");
    run_ok(&["report", s(json), "-o", s(&html_path)]);
    (text, std::fs::read_to_string(&html_path).unwrap())
}

fn schema_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/results-schema.json")
}

/// Validate a results file against the published JSON Schema; returns the errors.
fn schema_errors(doc: &serde_json::Value) -> Vec<String> {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    let v = jsonschema::validator_for(&schema).expect("the published schema is valid");
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

fn assert_valid(path: &Path) {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let errors = schema_errors(&doc);
    assert!(
        errors.is_empty(),
        "{} does not validate: {errors:#?}",
        path.display()
    );
}

#[test]
fn published_schema_is_the_one_this_build_writes() {
    let schema = serde_json::to_string_pretty(&Results::json_schema()).unwrap() + "\n";
    if std::env::var_os("IOLENS_UPDATE_SCHEMA").is_some() {
        std::fs::write(schema_path(), &schema).unwrap();
    }
    let published = std::fs::read_to_string(schema_path()).unwrap_or_default();
    assert!(
        published == schema,
        "docs/results-schema.json is out of date: regenerate it with \
         IOLENS_UPDATE_SCHEMA=1 cargo test --test house_analysis published_schema"
    );
}

#[test]
fn calibration_analysis_is_stored_typed_and_shown_by_show_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cal.json");
    run_ok(&[
        "calibrate",
        "--budget",
        "30s",
        "--max-sessions",
        "4",
        "--max-qd",
        "2",
        "--phases",
        "randread,seqread,seqread1,cache",
        "--writes",
        "--size",
        "32M",
        "--no-progress",
        "--target",
        s(&dir.path().join("s.dat")),
        "--json",
        s(&json),
    ]);
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(raw["version"], SCHEMA_VERSION);
    // Typed, for scripts: enums as kebab-case strings, figures as numbers.
    let ca = &raw["analysis"]["calibration"];
    assert!(ca["stop_reason"].is_string(), "{ca:#}");
    assert!(ca["calibrate_io"]["max_iops"].is_u64(), "{ca:#}");
    assert!(raw["calibration"]["findings"]["stop_reason"].is_string());
    assert!(raw["calibration"].get("analysis").is_none());

    assert_valid(&json);
    // The schema holds the enums: an unknown stop reason does not validate.
    let mut bad = raw.clone();
    bad["analysis"]["calibration"]["stop_reason"] = "tired".into();
    assert!(!schema_errors(&bad).is_empty(), "enum not in the schema");
    let r = Results::read_file(&json).unwrap();
    let an = r.analysis.as_ref().expect("analysis stored");
    assert_eq!(an.runs.len(), r.runs.len());
    let ca = an.calibration.as_ref().unwrap();
    let c = r.calibration.as_ref().unwrap();
    let stop = ca.stop_reason.expect("a stop reason");

    assert!(!ca.little.is_empty());
    assert!(!ca.commit.is_empty(), "{ca:?}");
    assert!(!ca.cache_probe.is_empty(), "{ca:?}");
    assert!(!c.findings.write_ramp.is_empty());
    let max_iops = ca.calibrate_io.max_iops.unwrap();
    let p = &c.curve[c.max_iops_point.unwrap()];
    assert_eq!(max_iops, p.iops.round() as u64);
    assert_eq!(
        ca.calibrate_io.max_pmbps,
        ca.seq1_best.map(|b| b.mb_per_s.round() as u64)
    );

    let (text, html) = show_and_report(&json);
    let cio = format!("CALIBRATE_IO would report: max_iops = {max_iops}, ");
    let l = &ca.little[0];
    let little = [l.sessions.to_string(), format!("{:.2}", l.check.observed)];
    // The analysis' one sentence on why the ramp stopped (it agrees with the USL fit).
    let why = ca
        .stop_sentence
        .clone()
        .unwrap_or_else(|| stop.describe().to_string());
    for (what, out) in [("show", &text), ("report", &html)] {
        assert!(out.contains(&cio), "{what} lacks {cio:?}:\n{out}");
        // (The terminal output wraps long lines: compare with whitespace collapsed.)
        let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat(out).contains(&flat(&why)),
            "{what}: stop reason {why:?}:\n{out}"
        );
        assert!(
            out.contains("Little&#x27;s law") || out.contains("Little's law"),
            "{what}: Little"
        );
        assert!(out.contains("Commit-shaped writes"), "{what}: commit");
        assert!(
            out.contains("Cache probe (random reads over part"),
            "{what}: cache probe"
        );
        // (A ramp that stopped at two points has no fit; tests/analysis.rs checks a fixed curve.)
        if let Some(u) = &ca.usl {
            let line = format!("USL fit: σ={:.4} κ={:.5}", u.sigma, u.kappa);
            assert!(out.contains(&line), "{what} lacks {line:?}");
        }
        let w = &ca.commit[0];
        assert!(
            out.contains(&iolens::units::fmt_ns(w.p99_ns as f64)),
            "{what}: commit p99"
        );
    }
    assert!(
        text.lines().any(|x| x
            .split_whitespace()
            .take(2)
            .eq(little.iter().map(|w| w.as_str()))),
        "show lacks Little row {little:?}:\n{text}"
    );
    // Every phase has its chart in the report.
    for chart in [
        "Latency vs IOPS (single-block random reads)",
        "Sequential reads: MB/s by queue depth",
        "Commit-shaped O_DSYNC writes: latency by write size",
        "Random writes: latency vs IOPS",
        "Cache probe: latency by working set",
    ] {
        assert!(html.contains(chart), "report lacks chart {chart:?}");
    }

    // The same file as version 1 wrote it: no stored analysis, the calibration's findings
    // untyped under `analysis` (cache steps as [share, run, modes]). Still read and shown.
    let mut v1 = raw.clone();
    v1["version"] = 1.into();
    v1.as_object_mut().unwrap().remove("analysis");
    let cal = v1["calibration"].as_object_mut().unwrap();
    let mut old = cal.remove("findings").unwrap();
    let seq1 = old["seq1_best"].clone();
    old["seq1_best"] = serde_json::json!([seq1["level"], seq1["value"]]);
    old["cache"] = old["cache"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| serde_json::json!([c["share"], c["run"], "1 mode"]))
        .collect();
    old["commit"] = old["commit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| serde_json::json!([c["size_bytes"], c["run"]]))
        .collect();
    old["calibrate_io"] = serde_json::json!({"max_iops": max_iops});
    cal.insert("analysis".into(), old);
    let v1_path = dir.path().join("v1.json");
    std::fs::write(&v1_path, serde_json::to_string(&v1).unwrap()).unwrap();
    let back = Results::read_file(&v1_path).unwrap();
    assert!(back.analysis.is_none());
    assert_eq!(back.calibration.as_ref().unwrap().findings, c.findings);
    let (text1, _) = show_and_report(&v1_path);
    // Re-analysed on reading: the same curve gives the same sentence.
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text1.contains(&cio) && flat(&text1).contains(&flat(&why)),
        "{text1}"
    );
}

#[test]
fn trace_profile_is_typed_and_shown_as_tables() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let trc = real("js122a1_ora_9854.trc");
    run_ok(&["trace", "-q", s(&trc), "--json", s(&json)]);
    assert_valid(&json);
    let r = Results::read_file(&json).unwrap();
    let tp = r
        .analysis
        .as_ref()
        .and_then(|a| a.trace_profile.as_ref())
        .expect("typed profile");
    let p = &tp.total;
    assert!(p.response_time_s > 0.0 && p.rows.len() >= 2, "{p:?}");
    let sum: f64 = p.rows.iter().map(|x| x.seconds).sum();
    assert!((sum - p.response_time_s).abs() < 1e-6, "rows add up to R");
    let (text, html) = show_and_report(&json);
    let r_line = format!("R = {:.6} s", p.response_time_s);
    let top = &p
        .rows
        .iter()
        .max_by(|a, b| a.seconds.total_cmp(&b.seconds))
        .unwrap();
    for (what, out) in [("show", &text), ("report", &html)] {
        assert!(out.contains("Response-time profile (Method R)"), "{what}");
        assert!(out.contains(&r_line), "{what} lacks {r_line:?}");
        assert!(
            out.contains(&format!("{:.6}", top.seconds)),
            "{what}: top row"
        );
    }
    // A table in the report, not a JSON dump.
    assert!(html.contains(&format!("<td>{}</td>", top.component)) || html.contains(&top.component));
    assert!(html.contains("<th>%R</th>"), "profile table header");
    // The slowest waits, the I/O breakdown and the line accounting are typed fields, shown as
    // tables (no raw JSON of producer extras).
    assert!(r.extra.is_empty(), "{:?}", r.extra.keys());
    assert!(!html.contains("Producer extras"));
    let w = r.trace_slowest.first().expect("slowest waits");
    assert!(
        html.contains(&format!(">{}:{}</td>", w.path, w.line)),
        "slowest wait {}:{} in the report",
        w.path,
        w.line
    );
    let io = r.trace_io.as_ref().expect("I/O breakdown");
    let ev = io.events.first().expect("an I/O event");
    assert!(
        html.contains(&format!("{}: by file", ev.event)),
        "{}",
        ev.event
    );
    let src = r.source.as_ref().expect("line accounting");
    assert_eq!(src.format, "oracle-10046");
    assert!(html.contains(&format!("<td>{}</td>", src.files[0].lines)));
}

#[test]
fn an_engine_run_written_before_the_spec_was_typed_reads_unchanged() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results/run_spec_before_typing.json");
    let text = std::fs::read_to_string(&p).unwrap();
    let old: serde_json::Value = serde_json::from_str(&text).unwrap();
    let r = Results::from_json(&text).unwrap();
    let spec = r.runs[0].spec.as_ref().expect("a spec");
    assert_eq!(
        (spec.block_size, spec.sessions, spec.qd, spec.region_size),
        (Some(8192), Some(1), Some(1), Some(0))
    );
    assert_eq!(spec.other["pattern"], "randread");
    // Written again, the spec is the same JSON object, key for key (nulls included).
    assert_eq!(r.runs[0].spec_value(), old["runs"][0]["spec"]);
    let again = Results::from_json(&r.to_json().unwrap()).unwrap();
    assert_eq!(again, r);
    // What the renderers read from it.
    let text = run_ok(&["show", s(&p)]);
    assert!(text.contains("block_size=8192"), "{text}");
    // Its target's scheduler was stored as the sysfs line whole: the active one is read from
    // it, and the report names that one alone.
    let target = r.environment.target.as_ref().unwrap();
    assert_eq!(target.scheduler, "none [mq-deadline] kyber bfq");
    assert_eq!(target.active_scheduler(), "mq-deadline");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("old.html");
    run_ok(&["report", s(&p), "-o", s(&html)]);
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("scheduler mq-deadline,"), "{html}");
    assert!(!html.contains("kyber"), "the whole line reported");
}

/// The value of `v` with every number as f64 (old files wrote some integers that the typed
/// fields write as floats).
fn numbers_as_f64(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Number(n) => serde_json::json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.iter().map(numbers_as_f64).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), numbers_as_f64(x)))
                .collect(),
        ),
        x => x.clone(),
    }
}

#[test]
fn committed_files_with_extras_read_into_the_typed_fields_unchanged() {
    // The trace goldens were written when the profile, I/O breakdown, slowest waits and line
    // accounting lay in `extra`: read, they are in the typed fields and write back the same
    // values (nothing lost), and nothing is left in `extra`.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trace_golden");
    let mut checked = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let old: serde_json::Value = serde_json::from_str(&text).unwrap();
        // Goldens written since the fields were typed (a real trace added later) hold no
        // `extra`: trace_golden checks them; this test is about the older ones.
        let Some(old_extra) = old.get("extra").and_then(|e| e.as_object()) else {
            continue;
        };
        // Some documents hold runs `validate` refuses (a run of zero duration); their extras
        // must not be what is refused.
        let r = match Results::from_json(&text) {
            Ok(r) => r,
            Err(e) => {
                let e = format!("{e:#}");
                assert!(!e.contains("extra."), "{}: {e}", p.display());
                continue;
            }
        };
        assert!(r.extra.is_empty(), "{}: {:?}", p.display(), r.extra.keys());
        let now = serde_json::to_value(&r).unwrap();
        for (i, run) in old["runs"].as_array().unwrap().iter().enumerate() {
            assert_eq!(
                now["runs"][i]["spec"],
                run["spec"],
                "{}: run {i}",
                p.display()
            );
        }
        for (k, v) in old_extra {
            // An empty list (a trace without waits has no slowest waits) is written as absent.
            if v.as_array().is_some_and(|a| a.is_empty()) && now[k].is_null() {
                continue;
            }
            assert_eq!(
                numbers_as_f64(&now[k]),
                numbers_as_f64(v),
                "{}: {k}",
                p.display()
            );
        }
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} goldens read");
}

#[test]
fn sqlite_db_run_shows_hit_ratio_and_logical_reads() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("slob");
    run_ok(&[
        "db",
        "setup",
        "--dir",
        s(&dir),
        "--schemas",
        "1",
        "--scale",
        "8M",
        "--quiet",
    ]);
    let json = t.path().join("db.json");
    run_ok(&[
        "db",
        "run",
        "--dir",
        s(&dir),
        "--sessions",
        "1",
        "--duration",
        "1s",
        "--quiet",
        "--json",
        s(&json),
    ]);
    assert_valid(&json);
    let r = Results::read_file(&json).unwrap();
    let an = r.analysis.as_ref().expect("analysis stored");
    assert_eq!(an.db.len(), 1, "{:?}", an.db);
    let d = &an.db[0];
    let run = &r.runs[d.run];
    assert_eq!(d.logical_reads, run.counters["logical_reads"]);
    assert!(d.logical_reads > 0.0);
    let hit = d.hit_ratio.unwrap();
    assert!((hit - (1.0 - d.physical_reads / d.logical_reads)).abs() < 1e-12);
    let db = r.db.as_ref().expect("typed database info");
    assert_eq!(db.engine, iolens::results::evidence::DbEngine::Sqlite);
    assert!(db.layout.schemas == 1 && db.layout.rows > 0, "{db:?}");
    let (text, html) = show_and_report(&json);
    assert!(html.contains("Database: sqlite"), "database section");
    assert!(!html.contains("Producer extras"));
    let hit_s = format!("{} %", iolens::units::sig3(hit * 100.0));
    let logical = format!("{:.0}", d.logical_reads);
    for (what, out) in [("show", &text), ("report", &html)] {
        assert!(
            out.contains("Database cache: logical and physical reads"),
            "{what}"
        );
        assert!(
            out.contains(&hit_s),
            "{what} lacks hit ratio {hit_s}:\n{out}"
        );
        assert!(
            out.contains(&logical),
            "{what} lacks logical reads {logical}"
        );
    }
}

/// The analysis is attached in one place, where a command's results are finished
/// (`commands::complete`): a `run` and a `verify` (which stored none before) both carry it, and
/// what they carry is what analysing the results as written gives, so no producer's own copy
/// differs from the one every other command stores.
#[test]
fn every_command_stores_the_analysis_of_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("scratch.dat");
    let run_json = dir.path().join("run.json");
    let verify_json = dir.path().join("verify.json");
    run_ok(&[
        "run",
        "--ios",
        "2000",
        "--size",
        "4M",
        "--no-progress",
        "--target",
        s(&target),
        "--json",
        s(&run_json),
    ]);
    run_ok(&[
        "verify",
        "--no-progress",
        "--target",
        s(&target),
        "--json",
        s(&verify_json),
    ]);
    for json in [&run_json, &verify_json] {
        let r = Results::read_file(json).unwrap();
        let stored = r.analysis.clone().expect("analysis stored");
        let mut bare = r;
        bare.analysis = None;
        assert_eq!(
            stored,
            iolens::analysis::analyse(&bare),
            "{}: the stored analysis is not that of the results written",
            json.display()
        );
    }
}
