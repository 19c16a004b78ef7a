//! At 80 columns no line that `run`, `calibrate`, `show` or `compare` prints is wider than the
//! terminal: tables abbreviate their columns and prose breaks between words, so the terminal
//! never wraps a line in the middle of a figure. Real runs on real temp files.

use std::path::Path;

mod common;
use common::bin;

/// Lines of `text` wider than `width` columns (ANSI colour escapes take no columns).
fn too_wide(text: &str, width: usize) -> Vec<String> {
    text.lines()
        .filter(|l| iolens::out::visible_width(l) > width)
        .map(|l| format!("{} columns: {l}", iolens::out::visible_width(l)))
        .collect()
}

fn ok_stdout(cmd: &mut std::process::Command) -> String {
    let out = cmd.env("COLUMNS", "80").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn assert_fits(what: &str, text: &str) {
    let wide = too_wide(text, 80);
    assert!(
        wide.is_empty(),
        "{what}: lines wider than 80 columns:\n{}\n--- whole output:\n{text}",
        wide.join("\n")
    );
}

fn run(dir: &Path, json: &Path) -> String {
    ok_stdout(
        bin()
            .args("run --size 8M --duration 0.5s --interval 100ms".split(' '))
            .arg("--target")
            .arg(dir.join("s.dat"))
            .arg("--json")
            .arg(json),
    )
}

#[test]
fn run_calibrate_show_and_compare_fit_80_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (r1, r2, cal) = (
        dir.path().join("a.json"),
        dir.path().join("b.json"),
        dir.path().join("cal.json"),
    );
    assert_fits("run", &run(dir.path(), &r1));
    run(dir.path(), &r2);
    let text = ok_stdout(
        bin()
            .args(
                "calibrate --budget 6s --max-sessions 2 --max-qd 1 --phases randread,seqread1 \
                 --size 32M --no-progress"
                    .split_whitespace(),
            )
            .arg("--target")
            .arg(dir.path().join("c.dat"))
            .arg("--json")
            .arg(&cal),
    );
    assert!(text.contains("Load curve"), "{text}");
    assert_fits("calibrate", &text);
    for f in [&r1, &cal] {
        for color in ["never", "always"] {
            let text = ok_stdout(
                bin()
                    .args(["show", "--width", "80", "--color", color])
                    .arg(f),
            );
            assert!(text.contains("Summary"), "{text}");
            assert_fits("show", &text);
        }
    }
    let text = ok_stdout(bin().args(["compare", "--width", "80"]).arg(&r1).arg(&r2));
    assert!(text.contains("ratio"), "{text}");
    assert_fits("compare", &text);
}

/// Lines of the standard output of `args` run with `--width` `w` (and `$COLUMNS` saying
/// otherwise, so that the flag is what decides) that are wider than `w`.
fn wider_than(w: usize, args: &[&str]) -> (String, Vec<String>) {
    let out = bin()
        .args(args)
        .args(["--width", &w.to_string()])
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let wide = too_wide(&text, w);
    (text, wide)
}

#[test]
fn width_flag_fits_every_command_that_prints_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (run_json, cal_json, trace_json) = (p("r.json"), p("c.json"), p("t.json"));
    let trace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real/js122a1_ora_9854.trc")
        .to_str()
        .unwrap()
        .to_string();
    let bcc = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real/bcc_biolatency_D.txt")
        .to_str()
        .unwrap()
        .to_string();
    let (scratch, cal_target) = (p("s.dat"), p("c.dat"));
    let db = p("db");
    std::fs::create_dir(&db).unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec![
            "run",
            "--size",
            "8M",
            "--duration",
            "0.5s",
            "--interval",
            "100ms",
            "--target",
            &scratch,
            "--json",
            &run_json,
        ],
        vec![
            "calibrate",
            "--budget",
            "6s",
            "--max-sessions",
            "2",
            "--max-qd",
            "1",
            "--phases",
            "randread,seqread1",
            "--size",
            "32M",
            "--no-progress",
            "--target",
            &cal_target,
            "--json",
            &cal_json,
        ],
        vec!["verify", "--target", &scratch],
        vec!["trace", &trace, "--json", &trace_json],
        vec!["ingest", "--format", "biolatency", &bcc],
        vec![
            "db",
            "setup",
            "--dir",
            &db,
            "--schemas",
            "1",
            "--scale",
            "8M",
        ],
        vec![
            "db",
            "run",
            "--dir",
            &db,
            "--sessions",
            "1",
            "--duration",
            "1s",
            "--update-pct",
            "20",
        ],
        vec!["show", &run_json, "--color", "always"],
        vec!["show", &cal_json],
        vec!["show", &trace_json],
        vec!["compare", &run_json, &run_json],
    ];
    for w in [80, 60] {
        for args in &commands {
            let (text, wide) = wider_than(w, args);
            assert!(
                wide.is_empty(),
                "{args:?} at --width {w}: lines wider than {w} columns:\n{}\n--- whole output:\n{text}",
                wide.join("\n")
            );
        }
    }
    // The flag is checked: a width no terminal has is refused with a clear message.
    let out = bin()
        .args(["show", &run_json, "--width", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--width"));
}
