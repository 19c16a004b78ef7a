//! The command layer: one spelling of quiet across commands, shell completions and the manual
//! page generated from the CLI definition.

use std::path::Path;

mod common;
use common::bin;

fn stdout_of(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_cover_every_visible_subcommand() {
    let bash = stdout_of(&["completions", "bash"]);
    for sub in [
        "run",
        "calibrate",
        "verify",
        "db",
        "trace",
        "ingest",
        "show",
        "export",
    ] {
        assert!(bash.contains(sub), "bash completion lacks {sub}");
    }
    assert!(
        bash.contains("--working-set"),
        "options of run are completed"
    );
    let zsh = stdout_of(&["completions", "zsh"]);
    assert!(
        zsh.starts_with("#compdef iolens"),
        "{}",
        &zsh[..40.min(zsh.len())]
    );
    let e = bin().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(e.status.code(), Some(2));
}

#[test]
fn man_page_documents_subcommands_and_their_options() {
    let man = stdout_of(&["man"]);
    assert!(
        man.contains(".TH iolens 1"),
        "{}",
        &man[..200.min(man.len())]
    );
    for sec in [
        "IOLENS RUN",
        "IOLENS CALIBRATE",
        "IOLENS INGEST",
        "IOLENS DB",
    ] {
        assert!(man.contains(sec), "no section {sec}");
    }
    assert!(
        man.contains("working\\-set"),
        "run's options are in the page"
    );
    assert!(!man.contains("DEV-SYNTH"), "hidden commands stay hidden");
}

#[test]
fn quiet_is_spelled_once_and_silences_every_producer() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.dat");
    let j = dir.path().join("r.json");
    let ts = t.to_str().unwrap();
    let js = j.to_str().unwrap();
    // -q before or after the subcommand; the results file is still written.
    for args in [
        vec![
            "-q", "run", "--target", ts, "--size", "4M", "--ios", "100", "--json", js,
        ],
        vec![
            "run", "--target", ts, "--ios", "100", "--json", js, "--quiet",
        ],
        vec!["verify", "--target", ts, "-q", "--json", js],
    ] {
        let _ = std::fs::remove_file(&j);
        let out = stdout_of(&args);
        assert_eq!(out, "", "{args:?} printed on stdout");
        assert!(Path::new(&j).exists(), "{args:?} wrote no results");
    }
    // Without it the same run says what it did.
    let out = stdout_of(&["run", "--target", ts, "--ios", "100"]);
    assert!(out.contains("Plan:"), "{out}");
    // -v reports the tool's own cost on stderr, leaving stdout as it was.
    let v = bin()
        .args(["run", "--target", ts, "--ios", "100", "-v"])
        .output()
        .unwrap();
    assert!(v.status.success());
    let err = String::from_utf8_lossy(&v.stderr);
    assert!(
        err.contains("iolens: cost:") && err.contains("peak RSS"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&v.stdout).contains("Plan:"));
    // -q and -v contradict each other.
    let e = bin()
        .args(["run", "-q", "-v", "--explain"])
        .output()
        .unwrap();
    assert_eq!(e.status.code(), Some(2));
}
