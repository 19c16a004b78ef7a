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
