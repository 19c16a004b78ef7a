//! Writing a results document: the results' side of the one writer, [`crate::output`] (which
//! holds the rules: regular file or new path only, never an input or target, random exclusive
//! temp file with its space reserved before measuring, fsync, rename; measured results kept and
//! said when they cannot be placed).

use std::path::Path;

use anyhow::Result;

use super::Results;
use crate::output::{Holds, Output, Plan, RESULTS_RESERVE};

/// Write `res` to `out`, streamed (a day of 1 s intervals is a few hundred MB of JSON).
pub fn write_results(res: &Results, out: Output) -> Result<()> {
    out.write(&mut |w| {
        serde_json::to_writer_pretty(&mut *w, res).map_err(std::io::Error::from)?;
        w.write_all(b"\n")
    })
}

/// Write `res` to `path` (`-` is standard output), for a command that reads nothing else.
pub fn write_results_to(res: &Results, path: &Path) -> Result<()> {
    let out = Plan::new().output("--output", path, Holds::Results, RESULTS_RESERVE)?;
    write_results(res, out)
}

/// A results file name that is free now in `dir`: `iolens-<what>-<UTC date and time>.json`,
/// with `-2`, `-3` … added when that name is taken. The caller claims it as a new path, so a
/// file that appears there in between is never replaced.
pub fn dated_name(dir: &Path, what: &str, unix_s: i64) -> std::path::PathBuf {
    let stamp = chrono::DateTime::from_timestamp(unix_s, 0)
        .map(|t| t.format("%Y-%m-%d-%H%M%SZ").to_string())
        .unwrap_or_else(|| unix_s.to_string());
    let base = format!("iolens-{what}-{stamp}");
    let mut n = 1;
    loop {
        let name = if n == 1 {
            format!("{base}.json")
        } else {
            format!("{base}-{n}.json")
        };
        let p = if dir == Path::new(".") {
            std::path::PathBuf::from(name)
        } else {
            dir.join(name)
        };
        if std::fs::symlink_metadata(&p).is_err() {
            return p;
        }
        n += 1;
    }
}

#[cfg(test)]
mod dated_tests {
    use super::*;

    #[test]
    fn dated_names_skip_taken_ones() {
        let d = tempfile::tempdir().unwrap();
        let p = dated_name(d.path(), "calibrate", 1_795_000_000);
        assert!(p
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("iolens-calibrate-2026-"));
        std::fs::write(&p, b"theirs").unwrap();
        let next = dated_name(d.path(), "calibrate", 1_795_000_000);
        assert_ne!(next, p);
        assert!(next.to_string_lossy().ends_with("-2.json"), "{next:?}");
    }
}
