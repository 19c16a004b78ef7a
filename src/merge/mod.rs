//! `iolens merge`: the results of many ranks (one file per host or per rank, written by `run`,
//! `calibrate` or `db run` under a launcher) merged exactly into one results document.
//!
//! Every rank's interval histograms are placed on one wall-clock grid (slot 0 starts at the
//! earliest rank's measured start; a rank's interval goes to the slot nearest its own start)
//! and summed exactly, interval by interval and op by op: counts add up, and every percentile
//! of the merged document is that of the summed histograms, never an average of percentiles.
//! [`MergeInfo`] keeps the per-rank view: the window in which every rank was measuring (and the
//! full window, labelled), each rank's rates and latencies, a series per rank for the host ×
//! time heatmap, and the ranks that stand out. Calibrations run with `--start-at` follow one
//! fixed schedule on every rank, so their steps merge index by index into the cluster's curve.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde::Deserialize;

use crate::analysis::median;
use crate::histogram::{
    add_sparse, new_histogram, sparse_quantile, value_of, Hist, Parts, Sparse, V2Scan,
};
use crate::results::hosts::{
    MergeInfo, MergeInput, Placement, RankRun, RunMerge, Straggler, StragglerReason, Window,
};
use crate::results::{
    BucketConvention, CpuStats, CurvePoint, Kind, OpResult, Results, RunResult, SCHEMA_NAME,
    SCHEMA_VERSION,
};
use crate::results::{FileState, Source};
use crate::units::{fmt_ns, fmt_ranks, fmt_rate};

mod calibration;
mod grid;

use calibration::merge_calibration;
use grid::{RunGrid, Scratch};

/// What `merge` is told besides its inputs.
#[derive(Clone, Debug, Default)]
pub(crate) struct MergeOptions {
    /// Merge results of different workloads (the differences become warnings).
    pub(crate) force: bool,
    /// Show which file is being read (on a terminal).
    pub(crate) progress: bool,
}

/// One merged results file, once read: its path as given (recorded, and named in errors)
/// and its document without interval histograms (they were summed into the grid as the file
/// was read, so memory holds one file's intervals at a time, not every rank's).
pub(crate) struct Input {
    pub(crate) file: String,
    pub(crate) res: Results,
}

/// What `merge` reads of a file before reading it whole: enough to check that the inputs
/// belong together and to place every rank on the common grid (whose origin is the earliest
/// rank's start, known only once every file has been seen).
#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    schema: Option<String>,
    #[serde(default)]
    version: Option<u64>,
    kind: Kind,
    #[serde(default)]
    placement: Option<Placement>,
    #[serde(default)]
    merge: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    runs: Vec<PeekRun>,
}

/// A run as [`Peek`] reads it.
#[derive(Deserialize)]
struct PeekRun {
    #[serde(default)]
    name: String,
    #[serde(default)]
    started: String,
    duration_s: f64,
    #[serde(default)]
    duration_unknown: bool,
    interval_s: f64,
}

impl PeekRun {
    fn rates_known(&self) -> bool {
        !self.duration_unknown && self.duration_s > 0.0
    }
}

/// The first look at `path`. A file this light reading does not take as a results document
/// of this version is read whole, so the error is the full reader's.
/// Returned with the [`FileState`] the file had when read, which the full reading must find
/// again.
fn peek(path: &Path) -> Result<(Peek, FileState)> {
    let mut src = Source::open(path, true)?;
    let peek = match src.parse::<Peek>() {
        Ok(p)
            if p.schema.as_deref() == Some(SCHEMA_NAME)
                && p.version == Some(SCHEMA_VERSION as u64) =>
        {
            p
        }
        _ => Peek::of_results(
            &Results::from_source(&mut src, None).with_context(|| format!("{}", path.display()))?,
        ),
    };
    Ok((peek, src.unchanged()?))
}

impl Peek {
    /// What the light reading takes of a document read whole.
    fn of_results(r: &Results) -> Peek {
        Peek {
            schema: Some(r.schema.clone()),
            version: Some(r.version as u64),
            kind: r.kind,
            placement: r.placement.clone(),
            merge: r.merge.as_ref().map(|_| serde::de::IgnoredAny),
            runs: r
                .runs
                .iter()
                .map(|x| PeekRun {
                    name: x.name.clone(),
                    started: x.started.clone(),
                    duration_s: x.duration_s,
                    duration_unknown: x.duration_unknown,
                    interval_s: x.interval_s,
                })
                .collect(),
        }
    }
}

/// What merge's light reading of a file established (its kind, rank, world size, whether it
/// is a merged result, and each run's name, start, duration and interval length): the full
/// reading must find the same, or the grid placed from the first would not hold the second.
#[derive(PartialEq, Debug)]
struct Established {
    kind: Kind,
    rank: Option<(u32, Option<u32>)>,
    merged: bool,
    runs: Vec<RunKey>,
}

/// A run as [`Established`] compares it (durations by their bits: exactly what was read; the
/// name as the full reading cleans it, one line of plain text).
type RunKey = (String, String, u64, bool, u64);

fn run_key(name: &str, started: &str, duration_s: f64, unknown: bool, interval_s: f64) -> RunKey {
    (
        crate::out::one_line(name).into_owned(),
        started.to_string(),
        duration_s.to_bits(),
        unknown,
        interval_s.to_bits(),
    )
}

impl Established {
    fn of_peek(p: &Peek) -> Established {
        Established {
            kind: p.kind,
            rank: p.placement.as_ref().map(|p| (p.rank, p.ranks)),
            merged: p.merge.is_some(),
            runs: p
                .runs
                .iter()
                .map(|r| {
                    run_key(
                        &r.name,
                        &r.started,
                        r.duration_s,
                        r.duration_unknown,
                        r.interval_s,
                    )
                })
                .collect(),
        }
    }

    fn of_results(r: &Results) -> Established {
        Established::of_peek(&Peek::of_results(r))
    }

    /// What differs, in words.
    fn difference(&self, now: &Established) -> String {
        if self.kind != now.kind || self.merged != now.merged {
            return "its kind".into();
        }
        if self.rank != now.rank {
            return "its rank".into();
        }
        if self.runs.len() != now.runs.len() {
            return format!("{} runs, then {}", self.runs.len(), now.runs.len());
        }
        match self.runs.iter().zip(&now.runs).position(|(a, b)| a != b) {
            Some(j) => format!("run {}'s name, start, duration or interval", j + 1),
            None => "its contents".into(),
        }
    }
}

/// Spec fields that may differ between ranks of one workload (per-rank target, its size and
/// layout, seeds, verification).
const PER_RANK_FIELDS: &[&str] = &[
    "target",
    "target_size",
    "region_offset",
    "region_size",
    "seed",
    "verify",
    "on_corruption",
    "batch_submit",
    "path",
    "dir",
];

/// Most intervals one merged run's grid holds: 46 days of 1 s intervals. Ranks further apart
/// were not measured together, and their grid would take gigabytes.
const MAX_SLOTS: usize = 4_000_000;

/// A rank whose start lies further than this share of an interval from the others is called
/// late, and starts that disagree by more are warned about.
pub(crate) const START_TOLERANCE: f64 = 0.1;

/// Merge the results files `files` into one results document (see the module doc). Two
/// passes: a light reading of every file checks that they belong together and places each
/// rank on the grid; then each file is read whole, in rank order, and summed into the grid
/// before the next is read.
pub(crate) fn merge(files: &[PathBuf], o: &MergeOptions, cmdline: Vec<String>) -> Result<Results> {
    if files.is_empty() {
        bail!("merge needs at least one results file");
    }
    let pb = crate::progress::line(o.progress);
    let mut peeks: Vec<Peek> = Vec::with_capacity(files.len());
    let mut states = Vec::with_capacity(files.len());
    for (k, f) in files.iter().enumerate() {
        pb.set_message(crate::progress::fit(&format!(
            "checking file {} of {}",
            k + 1,
            files.len()
        )));
        let (p, state) = peek(f)?;
        peeks.push(p);
        states.push(state);
    }
    let name = |k: usize| files[k].display().to_string();
    let mut warnings: Vec<String> = Vec::new();
    let mut watch_common: Option<Vec<String>> = None;
    let kind = peeks[0].kind;
    for (k, p) in peeks.iter().enumerate() {
        if let Some(pl) = &p.placement {
            pl.validate().with_context(|| name(k))?;
        }
        if !matches!(p.kind, Kind::Run | Kind::Calibrate | Kind::Db | Kind::Watch) {
            bail!(
                "{}: merge merges measurements (`run`, `calibrate`, `db run`, `watch`), not {} \
                 results",
                name(k),
                kind_word(kind)
            );
        }
        if p.merge.is_some() {
            bail!(
                "{}: this is already a merged result; merge the per-rank files it came from",
                name(k)
            );
        }
        if p.kind != kind {
            bail!(
                "cannot merge {} results ({}) with {} results ({})",
                kind_word(kind),
                name(0),
                kind_word(p.kind),
                name(k)
            );
        }
    }
    // Watches of several hosts: the runs every host has (the devices differ from host to
    // host), in the first file's order; each file is a host, numbered in the order given.
    if kind == Kind::Watch {
        let common: Vec<String> = peeks[0]
            .runs
            .iter()
            .map(|r| r.name.clone())
            .filter(|n| peeks.iter().all(|p| p.runs.iter().any(|r| &r.name == n)))
            .collect();
        for (k, p) in peeks.iter_mut().enumerate() {
            let left: Vec<&str> = p
                .runs
                .iter()
                .map(|r| r.name.as_str())
                .filter(|n| !common.iter().any(|c| c == n))
                .collect();
            if !left.is_empty() {
                warnings.push(format!(
                    "{}: left out, not watched on every host: {}",
                    name(k),
                    left.join(", ")
                ));
            }
            keep_runs(&mut p.runs, &common, |r| &r.name);
        }
        watch_common = Some(common);
    }
    // Ranks: from each file's placement (a watch's file is the host of its place).
    for (k, p) in peeks.iter().enumerate() {
        if p.placement.is_none() && kind != Kind::Watch {
            if !o.force {
                bail!(
                    "{}: records no rank (written before iolens recorded ranks, or not by run, \
                     calibrate or db run); --force merges it as rank {k}",
                    name(k)
                );
            }
            warnings.push(format!(
                "{} records no rank: merged as rank {k} (--force)",
                name(k)
            ));
        }
    }
    let rank_of = |k: usize| peeks[k].placement.as_ref().map_or(k as u32, |p| p.rank);
    let mut order: Vec<usize> = (0..peeks.len()).collect();
    order.sort_by_key(|&k| (rank_of(k), k));
    let ranks: Vec<u32> = order.iter().map(|&k| rank_of(k)).collect();
    for w in order.windows(2) {
        if rank_of(w[0]) == rank_of(w[1]) {
            let msg = format!(
                "{} and {} are both rank {} (give each host its own rank: a launcher, or --rank)",
                name(w[0]),
                name(w[1]),
                rank_of(w[0])
            );
            if !o.force {
                bail!("{msg}; --force merges them anyway");
            }
            warnings.push(format!("{msg}; merged anyway (--force)"));
        }
    }
    let sizes: BTreeSet<Option<u32>> = peeks
        .iter()
        .map(|p| p.placement.as_ref().and_then(|p| p.ranks))
        .collect();
    let ranks_expected = match sizes.len() {
        1 => sizes.into_iter().next().flatten(),
        _ => {
            let msg = format!(
                "the inputs declare different world sizes ({})",
                sizes
                    .iter()
                    .map(|s| s.map_or("unknown".into(), |n| n.to_string()))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if !o.force {
                bail!("{msg}: they come from different launches; --force merges them anyway");
            }
            warnings.push(format!("{msg}; merged anyway (--force)"));
            None
        }
    };
    let mut missing_ranks = Vec::new();
    if let Some(n) = ranks_expected {
        let have: BTreeSet<u32> = ranks.iter().copied().collect();
        missing_ranks = (0..n).filter(|r| !have.contains(r)).collect();
        if !missing_ranks.is_empty() {
            warnings.push(format!(
                "rank{} {} of a world of {n} {} no results among the inputs (failed, or not \
                 collected): the merged figures cover {} rank(s)",
                if missing_ranks.len() > 1 { "s" } else { "" },
                fmt_ranks_at_most(&missing_ranks, 20),
                if missing_ranks.len() > 1 {
                    "have"
                } else {
                    "has"
                },
                have.len()
            ));
        }
    }
    // What the light reading established of each file, checked again by the full reading:
    // a file replaced between the two would otherwise escape the limits placed on the grid.
    let established: Vec<Established> = peeks.iter().map(Established::of_peek).collect();
    // Every run's grid, placed from the light reading.
    let n_runs = peeks.iter().map(|p| p.runs.len()).min().unwrap_or(0);
    let sorted_names: Vec<String> = order.iter().map(|&k| name(k)).collect();
    let mut grids = Vec::with_capacity(n_runs);
    for j in 0..n_runs {
        let runs: Vec<&PeekRun> = order.iter().map(|&k| &peeks[k].runs[j]).collect();
        grids.push(
            RunGrid::place(&runs, &sorted_names)
                .with_context(|| format!("run {} (\"{}\")", j + 1, runs[0].name))?,
        );
    }
    drop(peeks);

    // Each file whole, in rank order: checked against the first, summed into the grids, and
    // kept without its interval histograms.
    let mut inputs: Vec<Input> = Vec::with_capacity(order.len());
    let mut scratch = Scratch::new();
    for (pos, &k) in order.iter().enumerate() {
        let file = name(k);
        pb.set_message(crate::progress::fit(&format!(
            "summing rank {} ({} of {}): {file}",
            ranks[pos],
            pos + 1,
            order.len()
        )));
        let mut src = Source::open(&files[k], true)?;
        let state = src.opened()?;
        if state != states[k] {
            bail!(
                "{file} changed between merge's two readings of it ({}): was it being \
                 rewritten or replaced? Merge it again once it is complete",
                state.difference(&states[k])
            );
        }
        let mut res = Results::from_source(&mut src, None).with_context(|| file.clone())?;
        src.unchanged()?;
        if let Some(common) = &watch_common {
            keep_runs(&mut res.runs, common, |r| &r.name);
        }
        let now = Established::of_results(&res);
        if now != established[k] {
            bail!(
                "{file} changed between merge's two readings of it ({}): was it being \
                 rewritten or replaced? Merge it again once it is complete",
                established[k].difference(&now)
            );
        }
        if let Some(first) = inputs.first() {
            let diffs = differences(&first.res, &res);
            if !diffs.is_empty() {
                let msg = format!(
                    "{} and {} are not the same workload: {}",
                    first.file,
                    file,
                    diffs.join("; ")
                );
                if !o.force {
                    bail!("{msg}. --force merges them anyway");
                }
                warnings.push(format!("{msg} (merged with --force)"));
            }
        }
        let host = host_of(&res);
        for (j, grid) in grids.iter_mut().enumerate() {
            let run = &res.runs[j];
            grid.add(pos, ranks[pos], &host, run, &mut scratch)
                .with_context(|| format!("{file}: run {} (\"{}\")", j + 1, run.name))?;
        }
        for run in &mut res.runs {
            for op in &mut run.ops {
                op.intervals = Vec::new();
            }
        }
        inputs.push(Input { file, res });
    }
    pb.finish_and_clear();
    let first = &inputs[0];
    if inputs.iter().any(|i| i.res.runs.len() != n_runs) {
        warnings.push(format!(
            "the inputs hold different numbers of runs: the first {n_runs} are merged"
        ));
    }
    // Clocks.
    let unsynced: Vec<(u32, String)> = inputs
        .iter()
        .zip(&ranks)
        .filter(|(i, _)| {
            i.res
                .placement
                .as_ref()
                .and_then(|p| p.clock.as_ref())
                .is_some_and(|c| !c.synchronised)
        })
        .map(|(i, r)| (*r, host_of(&i.res)))
        .collect();
    if !unsynced.is_empty() {
        warnings.push(format!(
            "the {} not synchronised (adjtimex): ranks are placed on the common grid by their \
             own clocks, which may disagree",
            if unsynced.len() > 1 {
                format!("clocks of {} are", ranks_named(&unsynced))
            } else {
                format!("clock of {} is", ranks_named(&unsynced))
            }
        ));
    }

    let mut runs = Vec::with_capacity(n_runs);
    let mut run_merges = Vec::with_capacity(n_runs);
    for (j, grid) in grids.into_iter().enumerate() {
        let parts: Vec<&RunResult> = inputs.iter().map(|i| &i.res.runs[j]).collect();
        let (run, m) = grid
            .finish(&parts, &mut warnings)
            .with_context(|| format!("run {} (\"{}\")", j + 1, parts[0].name))?;
        runs.push(run);
        run_merges.push(m);
    }

    let mut res = Results::new(kind, cmdline);
    res.environment = first.res.environment.clone();
    res.environment.hostname = format!(
        "{} host(s): {}",
        inputs
            .iter()
            .map(|i| host_of(&i.res))
            .collect::<BTreeSet<_>>()
            .len(),
        summarise_hosts(&inputs)
    );
    res.extra = first.res.extra.clone();
    res.db = first.res.db.clone();
    res.source = first.res.source.clone();
    res.trace_profile = first.res.trace_profile.clone();
    res.trace_io = first.res.trace_io.clone();
    res.trace_slowest = first.res.trace_slowest.clone();
    // The ranks' own warnings, each once with the ranks that gave it (a thousand hosts on one
    // filesystem give one warning a thousand times).
    let mut same: Vec<(&str, Vec<(u32, String)>)> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, r) in inputs.iter().zip(&ranks) {
        for w in &i.res.warnings {
            let k = *index.entry(w.as_str()).or_insert_with(|| {
                same.push((w.as_str(), Vec::new()));
                same.len() - 1
            });
            if same[k].1.last().map(|b| b.0) != Some(*r) {
                same[k].1.push((*r, host_of(&i.res)));
            }
        }
    }
    for (w, by) in same {
        warnings.push(format!("{}: {w}", ranks_named(&by)));
    }
    res.runs = runs;
    if kind == Kind::Calibrate {
        res.calibration = merge_calibration(&inputs, &res.runs, &run_merges, &mut warnings)?;
    }
    res.warnings = warnings;
    res.merge = Some(MergeInfo {
        inputs: inputs
            .iter()
            .zip(&ranks)
            .map(|(i, r)| MergeInput {
                file: i.file.clone(),
                rank: *r,
                ranks: i.res.placement.as_ref().and_then(|p| p.ranks),
                host: host_of(&i.res),
                launcher: i
                    .res
                    .placement
                    .as_ref()
                    .map_or("unknown".into(), |p| p.launcher.name().to_string()),
                clock: i.res.placement.as_ref().and_then(|p| p.clock.clone()),
            })
            .collect(),
        ranks_expected,
        missing_ranks,
        forced: o.force,
        runs: run_merges,
    });
    res.validate()
        .context("the merged result is not consistent")?;
    Ok(res)
}

/// Ranks in words: each with its host when there are a few (`rank 3 (db-3), rank 5 (db-5)`),
/// else as runs of ranks with their number (`ranks 0–511, 600–999 (912 ranks)`).
/// [`fmt_ranks`] of at most `n` runs of ranks, then how many ranks more (a world of a million
/// with every other rank missing is not a warning of 500,000 numbers).
fn fmt_ranks_at_most(ranks: &[u32], n: usize) -> String {
    let mut runs = 0;
    let mut i = 0;
    while i < ranks.len() && runs < n {
        while i + 1 < ranks.len() && ranks[i + 1] == ranks[i] + 1 {
            i += 1;
        }
        i += 1;
        runs += 1;
    }
    let shown = fmt_ranks(&ranks[..i]);
    match ranks.len() - i {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

fn ranks_named(ranks: &[(u32, String)]) -> String {
    if ranks.len() <= 4 {
        return ranks
            .iter()
            .map(|(r, h)| format!("rank {r} ({h})"))
            .collect::<Vec<_>>()
            .join(", ");
    }
    format!(
        "ranks {} ({} ranks)",
        fmt_ranks(&ranks.iter().map(|r| r.0).collect::<Vec<_>>()),
        ranks.len()
    )
}

/// The kind's name as results files spell it.
fn kind_word(k: Kind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn host_of(r: &Results) -> String {
    r.placement
        .as_ref()
        .map(|p| p.host.clone())
        .unwrap_or_else(|| r.environment.hostname.clone())
}

fn summarise_hosts(inputs: &[Input]) -> String {
    let hosts: BTreeSet<String> = inputs.iter().map(|i| host_of(&i.res)).collect();
    let v: Vec<String> = hosts.into_iter().collect();
    if v.len() > 8 {
        format!("{} … {}", v[..4].join(", "), v[v.len() - 2..].join(", "))
    } else {
        v.join(", ")
    }
}

/// Keep the runs named in `names`, in their order.
fn keep_runs<T>(runs: &mut Vec<T>, names: &[String], name: impl Fn(&T) -> &String) {
    let mut all: Vec<Option<T>> = std::mem::take(runs).into_iter().map(Some).collect();
    for n in names {
        if let Some(r) = all
            .iter_mut()
            .find(|r| r.as_ref().is_some_and(|r| name(r) == n))
            .and_then(Option::take)
        {
            runs.push(r);
        }
    }
}

/// The fields of a watch's spec that are its host's own (which processes, devices it
/// watched).
const PER_HOST_WATCH_FIELDS: &[&str] = &["pids", "comms", "devices"];

/// What makes two documents different workloads, in words (empty when they are the same).
fn differences(a: &Results, b: &Results) -> Vec<String> {
    let mut out = Vec::new();
    if a.runs.len() != b.runs.len() {
        out.push(format!("{} run(s) against {}", a.runs.len(), b.runs.len()));
    }
    for (x, y) in a.runs.iter().zip(&b.runs) {
        if x.name != y.name {
            out.push(format!("run \"{}\" against \"{}\"", x.name, y.name));
        }
        let (mut xs, mut ys) = (x.spec_value(), y.spec_value());
        if a.kind == Kind::Watch {
            for v in [&mut xs, &mut ys] {
                if let Some(o) = v.as_object_mut() {
                    for f in PER_HOST_WATCH_FIELDS {
                        o.remove(*f);
                    }
                }
            }
        }
        spec_differences("", &xs, &ys, &mut out);
        if out.len() > 6 {
            break;
        }
    }
    out
}

/// The fields of two specs that differ (nested objects compared field by field), leaving out
/// those that may differ between ranks.
fn spec_differences(at: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    crate::analysis::compare::walk_differences(at, a, b, PER_RANK_FIELDS, &mut |at, a, b| {
        out.push(format!("{at} {a} against {b}"))
    });
}
