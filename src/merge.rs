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
    add_sparse, new_histogram, sparse_quantile, value_of, Hist, Sparse, V2Scan,
};
use crate::results::hosts::{
    MergeInfo, MergeInput, Placement, RankRun, RunMerge, Straggler, StragglerReason, Window,
};
use crate::results::{
    BucketConvention, CpuStats, CurvePoint, Interval, Kind, LatencySummary, OpResult, Results,
    RunResult, SCHEMA_NAME, SCHEMA_VERSION,
};
use crate::units::{fmt_ns, fmt_ranks, fmt_rate};

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
fn peek(path: &Path) -> Result<Peek> {
    let text = crate::results::read_results_text(path)?;
    match serde_json::from_str::<Peek>(&text) {
        Ok(p)
            if p.schema.as_deref() == Some(SCHEMA_NAME)
                && p.version == Some(SCHEMA_VERSION as u64) =>
        {
            Ok(p)
        }
        _ => {
            drop(text);
            let r = Results::read_file(path)?;
            Ok(Peek {
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
            })
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

/// A run as [`Established`] compares it (durations by their bits: exactly what was read).
type RunKey = (String, String, u64, bool, u64);

fn run_key(name: &str, started: &str, duration_s: f64, unknown: bool, interval_s: f64) -> RunKey {
    (
        name.to_string(),
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
        Established {
            kind: r.kind,
            rank: r.placement.as_ref().map(|p| (p.rank, p.ranks)),
            merged: r.merge.is_some(),
            runs: r
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
    let mut peeks = Vec::with_capacity(files.len());
    for (k, f) in files.iter().enumerate() {
        pb.set_message(crate::progress::fit(&format!(
            "checking file {} of {}",
            k + 1,
            files.len()
        )));
        peeks.push(peek(f)?);
    }
    let name = |k: usize| files[k].display().to_string();
    let mut warnings: Vec<String> = Vec::new();
    let kind = peeks[0].kind;
    for (k, p) in peeks.iter().enumerate() {
        if !matches!(p.kind, Kind::Run | Kind::Calibrate | Kind::Db) {
            bail!(
                "{}: merge merges measurements (`run`, `calibrate`, `db run`), not {} results",
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
    // Ranks: from each file's placement.
    for (k, p) in peeks.iter().enumerate() {
        if p.placement.is_none() {
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
                missing_ranks
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
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
        let mut res = Results::read_file(&files[k])?;
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
    res.analysis = Some(crate::analysis::analyse(&res));
    Ok(res)
}

/// Ranks in words: each with its host when there are a few (`rank 3 (db-3), rank 5 (db-5)`),
/// else as runs of ranks with their number (`ranks 0–511, 600–999 (912 ranks)`).
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
        spec_differences("", &x.spec_value(), &y.spec_value(), &mut out);
        if out.len() > 6 {
            break;
        }
    }
    out
}

/// The fields of two specs that differ (nested objects compared field by field), leaving out
/// those that may differ between ranks.
fn spec_differences(at: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    if let (Some(sa), Some(sb)) = (a.as_object(), b.as_object()) {
        let keys: BTreeSet<&String> = sa.keys().chain(sb.keys()).collect();
        for k in keys {
            if PER_RANK_FIELDS.contains(&k.as_str()) {
                continue;
            }
            let null = serde_json::Value::Null;
            let name = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            spec_differences(
                &name,
                sa.get(k).unwrap_or(&null),
                sb.get(k).unwrap_or(&null),
                out,
            );
        }
    } else if a != b {
        out.push(format!("{at} {a} against {b}"));
    }
}

/// Buffers reused for every interval a merge reads.
struct Scratch {
    scan: V2Scan,
    indices: Vec<(usize, u64)>,
    values: Sparse,
    series: Sparse,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            scan: V2Scan::new(),
            indices: Vec::new(),
            values: Vec::new(),
            series: Vec::new(),
        }
    }

    /// The counts `hist` holds into `self.values`: read straight from the encoding when it is
    /// a clean one of the standard layout, else decoded (which reports what is wrong).
    fn read(&mut self, hist: &Hist) -> Result<()> {
        self.values.clear();
        if self.scan.scan(hist, &mut self.indices) && V2Scan::len_in_range(&self.indices).is_some()
        {
            self.values
                .extend(self.indices.iter().map(|&(i, n)| (value_of(i), n)));
        } else {
            let h = hist.decode()?;
            self.values.extend(h.iter_recorded().map(|v| {
                (
                    h.lowest_equivalent(v.value_iterated_to()),
                    v.count_at_value(),
                )
            }));
        }
        Ok(())
    }
}

/// One slot of an op's grid: the sum of the intervals placed in it.
#[derive(Default)]
struct Slot {
    counts: Sparse,
    count: u64,
    bytes: u64,
    /// The longest contribution (the slot lasts as long as it).
    dur: f64,
}

/// Accumulates one op's merged intervals on the grid.
struct OpGrid {
    op: String,
    slots: Vec<Slot>,
    total: Histogram<u64>,
    count: u64,
    bytes: u64,
    errors: u64,
    /// Some rank's op has a count but no intervals: the merged op keeps no intervals.
    no_intervals: bool,
    convention: BucketConvention,
    edges: Vec<u64>,
}

/// One run's merge across ranks: placed on the grid from the light reading
/// ([`RunGrid::place`]), fed each rank's run in rank order ([`RunGrid::add`]), and made into
/// the merged run and its per-rank view ([`RunGrid::finish`]).
struct RunGrid {
    iv: f64,
    origin: String,
    /// Each rank's start, seconds after the earliest (by position in rank order).
    offsets: Vec<f64>,
    /// The ops, in order of first appearance.
    grids: Vec<OpGrid>,
    /// The window in which every rank measured (seconds after the origin, from the last start
    /// to the first end; empty when that end comes first). Its start is how far the ranks'
    /// starts spread.
    common: (f64, f64),
    /// Each rank's share of the common window (I/O count, bytes, duration of the intervals
    /// that lie at least half in it), and its row of the per-rank view.
    ranks: Vec<((u64, u64, f64), RankRun)>,
}

impl RunGrid {
    /// The grid of one run: every rank on one interval length, its origin the earliest
    /// rank's start (`runs` and `files` in rank order).
    fn place(runs: &[&PeekRun], files: &[String]) -> Result<RunGrid> {
        let iv = runs[0].interval_s;
        for (p, f) in runs.iter().zip(files) {
            if (p.interval_s - iv).abs() > 1e-9 * iv.max(1.0) {
                bail!(
                    "{} measured with {} s intervals and {} with {} s: histograms can only be \
                     summed on one grid (run every rank with the same --interval)",
                    files[0],
                    iv,
                    f,
                    p.interval_s
                );
            }
            if !p.rates_known() {
                bail!("{f}: the run has no duration, so it cannot be placed in time");
            }
        }
        if iv.is_nan() || iv <= 0.0 {
            bail!("the runs have no interval length");
        }
        let mut starts = Vec::with_capacity(runs.len());
        for (p, f) in runs.iter().zip(files) {
            if p.started.is_empty() {
                bail!("{f}: the run does not record when its measurement started");
            }
            let t = crate::placement::parse_time(&p.started)
                .with_context(|| format!("{f}: its start {:?} is not a time", p.started))?;
            starts.push(t);
        }
        let Some(t0) = starts.iter().min().copied() else {
            bail!("nothing to merge");
        };
        let offsets: Vec<f64> = starts
            .iter()
            .map(|t| t.duration_since(t0).unwrap_or_default().as_secs_f64())
            .collect();
        let end = offsets
            .iter()
            .zip(runs)
            .map(|(o, p)| o + p.duration_s)
            .fold(0.0, f64::max);
        if end / iv > MAX_SLOTS as f64 {
            bail!(
                "the ranks' runs span {} from the first start to the last end, {} intervals of \
                 {}: more than the {MAX_SLOTS} one merge places (were they measured together?)",
                fmt_ns(end * 1e9),
                (end / iv).round(),
                fmt_ns(iv * 1e9)
            );
        }
        let c0 = offsets.iter().cloned().fold(0.0, f64::max);
        let c1 = offsets
            .iter()
            .zip(runs)
            .map(|(o, p)| o + p.duration_s)
            .fold(f64::INFINITY, f64::min);
        Ok(RunGrid {
            iv,
            common: (c0, c1),
            origin: crate::placement::fmt_time(t0),
            offsets,
            grids: Vec::new(),
            ranks: Vec::new(),
        })
    }

    /// Sum the run `p` of the rank at position `k` (rank `rank`, on `host`) into the grid.
    fn add(
        &mut self,
        k: usize,
        rank: u32,
        host: &str,
        p: &RunResult,
        s: &mut Scratch,
    ) -> Result<()> {
        let iv = self.iv;
        let off = self.offsets[k];
        let shift = (off / iv).round() as i64;
        // The op grids this rank's ops feed, creating those seen first here.
        let mut at = Vec::with_capacity(p.ops.len());
        for o in &p.ops {
            let x = match self.grids.iter().position(|g| g.op == o.op) {
                Some(x) => x,
                None => {
                    self.grids.push(OpGrid {
                        op: o.op.clone(),
                        slots: Vec::new(),
                        total: new_histogram(),
                        count: 0,
                        bytes: 0,
                        errors: 0,
                        no_intervals: false,
                        convention: o.bucket_convention,
                        edges: o.bucket_edges_ns.clone(),
                    });
                    self.grids.len() - 1
                }
            };
            let g = &mut self.grids[x];
            o.hist.add_to(&mut g.total)?;
            g.count += o.count;
            g.bytes = g.bytes.saturating_add(o.bytes);
            g.errors += o.errors;
            if o.intervals.is_empty() && o.count > 0 {
                g.no_intervals = true;
                g.slots = Vec::new();
            }
            at.push(x);
        }
        // Interval by interval: each op's into its slot, and this rank's own series (I/O,
        // not sync) from the same reading.
        let n_all = p.ops.iter().map(|o| o.intervals.len()).max().unwrap_or(0);
        let n_io = p
            .ops
            .iter()
            .filter(|o| o.op != "sync")
            .map(|o| o.intervals.len())
            .max()
            .unwrap_or(0);
        let mut first_slot = usize::MAX;
        let mut spans = Vec::with_capacity(n_io);
        let (mut slot_iops, mut slot_p99_ns) = (Vec::new(), Vec::new());
        for n in 0..n_all {
            s.series.clear();
            let (mut c, mut b, mut d) = (0u64, 0u64, 0.0f64);
            for (o, &x) in p.ops.iter().zip(&at) {
                let Some(iv_n) = o.intervals.get(n) else {
                    continue;
                };
                // An interval outside its run is not this grid's (and would stretch it).
                if !(iv_n.start_s >= -1e-9 && iv_n.start_s <= p.duration_s + iv) {
                    bail!(
                        "op {} interval {} starts at {} s, outside the run ({} s long)",
                        o.op,
                        n + 1,
                        iv_n.start_s,
                        p.duration_s
                    );
                }
                let slot = ((iv_n.start_s / iv).round() as i64 + shift).max(0) as usize;
                first_slot = first_slot.min(slot);
                let io = o.op != "sync";
                let g = &mut self.grids[x];
                if g.no_intervals && !io {
                    continue;
                }
                s.read(&iv_n.hist)?;
                if !g.no_intervals {
                    if g.slots.len() <= slot {
                        g.slots.resize_with(slot + 1, Slot::default);
                    }
                    let sl = &mut g.slots[slot];
                    add_sparse(&mut sl.counts, &s.values);
                    sl.count += iv_n.count;
                    sl.bytes = sl.bytes.saturating_add(iv_n.bytes);
                    sl.dur = sl.dur.max(iv_n.duration_s);
                }
                if io {
                    add_sparse(&mut s.series, &s.values);
                    c += iv_n.count;
                    b = b.saturating_add(iv_n.bytes);
                    d = d.max(iv_n.duration_s);
                }
            }
            if n < n_io {
                spans.push((c, b, d));
                slot_iops.push(if d > 0.0 { c as f64 / d } else { 0.0 });
                slot_p99_ns.push(sparse_quantile(&s.series, 0.99));
            }
        }
        // This rank's share of the common window.
        let (c0, c1) = self.common;
        let mut share = (0u64, 0u64, 0.0f64);
        let mut t = off;
        for s in &spans {
            let (a, z) = (t, t + s.2);
            t = z;
            let overlap = (z.min(c1) - a.max(c0)).max(0.0);
            if s.2 > 0.0 && overlap >= 0.5 * s.2 {
                share.0 += s.0;
                share.1 = share.1.saturating_add(s.1);
                share.2 += s.2;
            }
        }
        let io = p.merged_io_hist()?;
        let q = |x: f64| {
            if io.is_empty() {
                0
            } else {
                io.value_at_quantile(x)
            }
        };
        self.ranks.push((
            share,
            RankRun {
                input: k,
                rank,
                host: host.to_string(),
                start_s: off,
                duration_s: p.duration_s,
                count: p
                    .ops
                    .iter()
                    .filter(|o| o.op != "sync")
                    .map(|o| o.count)
                    .sum(),
                iops: p.iops(),
                mb_per_s: p.mb_per_s(),
                p50_ns: q(0.5),
                p99_ns: q(0.99),
                max_ns: if io.is_empty() { 0 } else { io.max() },
                interrupted: p.interrupted,
                first_slot: if first_slot == usize::MAX {
                    0
                } else {
                    first_slot as u64
                },
                slot_iops,
                slot_p99_ns,
            },
        ));
        Ok(())
    }

    /// The merged run and its per-rank view, once every rank's run (`parts`, in rank order,
    /// their interval histograms already summed) has been added.
    fn finish(
        self,
        parts: &[&RunResult],
        warnings: &mut Vec<String>,
    ) -> Result<(RunResult, RunMerge)> {
        let RunGrid {
            iv,
            origin,
            grids,
            common: (c0, c1),
            ranks: rank_runs,
            ..
        } = self;
        let spread = c0;
        if spread > START_TOLERANCE * iv && parts.len() > 1 {
            warnings.push(format!(
                "{}: the ranks' measured starts disagree by {} (more than a tenth of the {} \
                 interval): each rank's intervals are placed on the common grid at the nearest \
                 slot",
                parts[0].name,
                fmt_ns(spread * 1e9),
                fmt_ns(iv * 1e9)
            ));
        }
        // Windows: the full one, and the one in which every rank measured.
        let end_of = |r: &RankRun| r.start_s + r.duration_s;
        let full_end = rank_runs.iter().map(|r| end_of(&r.1)).fold(0.0, f64::max);
        let total_io: u64 = rank_runs.iter().map(|r| r.1.count).sum();
        let total_bytes: u64 = parts
            .iter()
            .flat_map(|p| p.ops.iter())
            .filter(|o| o.op != "sync")
            .map(|o| o.bytes)
            .sum();
        let full = Window {
            start_s: 0.0,
            end_s: full_end,
            count: total_io,
            iops: if full_end > 0.0 {
                total_io as f64 / full_end
            } else {
                0.0
            },
            mb_per_s: if full_end > 0.0 {
                total_bytes as f64 / full_end / 1e6
            } else {
                0.0
            },
        };
        let mut common = None;
        if c1 > c0 {
            let (mut count, mut iops, mut mbs, mut every) = (0u64, 0.0, 0.0, true);
            for &((n, b, d), _) in &rank_runs {
                if d > 0.0 {
                    count += n;
                    iops += n as f64 / d;
                    mbs += b as f64 / d / 1e6;
                } else {
                    every = false;
                }
            }
            if every {
                common = Some(Window {
                    start_s: c0,
                    end_s: c1,
                    count,
                    iops,
                    mb_per_s: mbs,
                });
            }
        }
        if common.is_none() && parts.len() > 1 {
            warnings.push(format!(
                "{}: the ranks were never all measuring for as much as half an interval at once: \
             there is no common window, only the full one",
                parts[0].name
            ));
        }
        let rank_out: Vec<RankRun> = rank_runs.into_iter().map(|(_, r)| r).collect();
        let stragglers = stragglers(&rank_out, iv);
        // The merged run: slot by slot, one histogram at a time (memory stays flat however long
        // the run and however many ranks).
        let mut ops = Vec::with_capacity(grids.len());
        let mut tmp = new_histogram();
        for g in grids {
            let mut intervals = Vec::new();
            if !g.no_intervals {
                intervals.reserve_exact(g.slots.len());
                for (slot, sl) in g.slots.into_iter().enumerate() {
                    tmp.reset();
                    for &(v, n) in &sl.counts {
                        tmp.record_n(v, n)
                            .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
                    }
                    intervals.push(Interval {
                        start_s: slot as f64 * iv,
                        duration_s: if sl.dur > 0.0 { sl.dur } else { iv },
                        count: sl.count,
                        bytes: sl.bytes,
                        hist: Hist::encode(&tmp),
                    });
                }
            }
            ops.push(OpResult {
                op: g.op,
                count: g.count,
                bytes: g.bytes,
                errors: g.errors,
                hist: Hist::encode(&g.total),
                summary: LatencySummary::of(&g.total),
                intervals,
                bucket_convention: g.convention,
                bucket_edges_ns: g.edges,
            });
        }
        let p0 = parts[0];
        let ios: u64 = total_io;
        let cpu = parts
            .iter()
            .filter_map(|p| p.cpu.as_ref())
            .fold(None::<CpuStats>, |acc, c| {
                let mut a = acc.unwrap_or_default();
                a.user_s += c.user_s;
                a.sys_s += c.sys_s;
                a.runq_delay_s += c.runq_delay_s;
                a.session_run_s += c.session_run_s;
                a.cpus += c.cpus;
                a.host_busy += c.host_busy / parts.len() as f64;
                a.host_iowait += c.host_iowait / parts.len() as f64;
                Some(a)
            })
            .map(|mut a| {
                if ios > 0 {
                    a.us_per_io = (a.user_s + a.sys_s) * 1e6 / ios as f64;
                    a.user_us_per_io = a.user_s * 1e6 / ios as f64;
                    a.sys_us_per_io = a.sys_s * 1e6 / ios as f64;
                    a.runq_us_per_io = a.runq_delay_s * 1e6 / ios as f64;
                }
                a
            });
        let mut sessions = Vec::new();
        for p in parts {
            for s in &p.sessions {
                let mut s = s.clone();
                s.session = sessions.len() as u32;
                sessions.push(s);
            }
        }
        let mut counters = std::collections::BTreeMap::new();
        for p in parts {
            for (k, v) in &p.counters {
                *counters.entry(k.clone()).or_insert(0.0) += v;
            }
        }
        let mut corruption = Vec::new();
        for p in parts {
            corruption.extend(p.corruption.iter().cloned());
        }
        let run = RunResult {
            name: p0.name.clone(),
            phase: p0.phase.clone(),
            spec: p0.spec.clone(),
            started: origin.clone(),
            duration_s: full_end,
            duration_unknown: false,
            interval_s: iv,
            warmup_s: p0.warmup_s,
            ops,
            sessions,
            cpu,
            device: None,
            page_cache: None,
            counters,
            interrupted: parts.iter().any(|p| p.interrupted),
            warnings: Vec::new(),
            verify: None,
            corruption,
            block: None,
            // The ranks' pools together, when every rank recorded one.
            io_buffers: parts
                .iter()
                .map(|p| p.io_buffers.clone())
                .collect::<Option<Vec<_>>>()
                .map(|b| crate::results::IoBuffers {
                    bytes: b.iter().map(|x| x.bytes).sum(),
                    huge_bytes: b.iter().map(|x| x.huge_bytes).sum(),
                    huge_pages_asked: b.iter().all(|x| x.huge_pages_asked),
                    hugetlb: b.iter().all(|x| x.hugetlb),
                    thp_setting: b
                        .iter()
                        .all(|x| x.thp_setting == b[0].thp_setting)
                        .then(|| b[0].thp_setting.clone())
                        .flatten(),
                }),
        };
        let m = RunMerge {
            name: p0.name.clone(),
            origin,
            interval_s: iv,
            common,
            full,
            ranks: rank_out,
            stragglers,
            start_spread_s: spread,
        };
        Ok((run, m))
    }
}

/// The ranks that stand out: a late start or early end (beyond a tenth of an interval, and
/// 50 ms), a rate below half or a p99 above twice the median of the other ranks, an interrupted
/// run.
fn stragglers(ranks: &[RankRun], iv: f64) -> Vec<Straggler> {
    let mut out = Vec::new();
    if ranks.len() < 2 {
        return out;
    }
    let tol = (START_TOLERANCE * iv).max(0.05);
    let med_start = median(ranks.iter().map(|r| r.start_s).collect());
    let med_end = median(ranks.iter().map(|r| r.start_s + r.duration_s).collect());
    for (k, r) in ranks.iter().enumerate() {
        let others = |f: &dyn Fn(&RankRun) -> f64| {
            median(
                ranks
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != k)
                    .map(|(_, x)| f(x))
                    .collect(),
            )
        };
        let mut push = |reason, detail: String| {
            out.push(Straggler {
                rank: r.rank,
                host: r.host.clone(),
                reason,
                detail,
            })
        };
        if r.interrupted {
            push(
                StragglerReason::Interrupted,
                "its run was interrupted before its planned end".into(),
            );
        }
        if r.start_s - med_start > tol {
            push(
                StragglerReason::LateStart,
                format!(
                    "started {} after the median rank",
                    fmt_ns((r.start_s - med_start) * 1e9)
                ),
            );
        }
        let end = r.start_s + r.duration_s;
        if med_end - end > tol {
            push(
                StragglerReason::EarlyEnd,
                format!(
                    "ended {} before the median rank",
                    fmt_ns((med_end - end) * 1e9)
                ),
            );
        }
        let oi = others(&|x| x.iops);
        if oi > 0.0 && r.iops < 0.5 * oi {
            push(
                StragglerReason::LowRate,
                format!(
                    "{} IOPS against a median of {} on the other ranks",
                    fmt_rate(r.iops),
                    fmt_rate(oi)
                ),
            );
        }
        let op = others(&|x| x.p99_ns as f64);
        if op > 0.0 && r.p99_ns as f64 > 2.0 * op {
            push(
                StragglerReason::HighLatency,
                format!(
                    "p99 {} against a median of {} on the other ranks",
                    fmt_ns(r.p99_ns as f64),
                    fmt_ns(op)
                ),
            );
        }
    }
    out
}

/// The cluster's calibration: every rank followed the same fixed schedule, so step `i` of every
/// rank merged is the cluster's step `i`: IOPS summed over ranks (in the common window),
/// latency from the merged histograms, and max IOPS at the latency target, max MB/s and the
/// knee recomputed from that curve.
fn merge_calibration(
    inputs: &[Input],
    runs: &[RunResult],
    merges: &[RunMerge],
    warnings: &mut Vec<String>,
) -> Result<Option<crate::results::Calibration>> {
    let Some(c0) = inputs[0].res.calibration.as_ref() else {
        return Ok(None);
    };
    let scheduled = inputs.iter().all(|i| {
        i.res
            .placement
            .as_ref()
            .is_some_and(|p| p.start_at.is_some())
    });
    if !scheduled {
        warnings.push(
            "the calibrations were not all run with --start-at: their steps were not \
             scheduled together, so the cluster curve sums steps that may not have overlapped"
                .into(),
        );
    }
    let n = inputs.len() as u32;
    let rate = |k: usize| {
        merges[k]
            .common
            .as_ref()
            .map_or((runs[k].iops(), runs[k].mb_per_s()), |w| {
                (w.iops, w.mb_per_s)
            })
    };
    let point = |p: &CurvePoint| -> Result<Option<CurvePoint>> {
        let Some(run) = runs.get(p.run) else {
            return Ok(None);
        };
        let h = run.merged_io_hist()?;
        let q = |x: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(x)
            }
        };
        let (iops, mbs) = rate(p.run);
        Ok(Some(CurvePoint {
            run: p.run,
            sessions: p.sessions * n,
            qd: p.qd,
            iops,
            mb_per_s: mbs,
            p50_ns: q(0.5),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            mean_ns: if h.is_empty() { 0.0 } else { h.mean() },
            cpu_us_per_io: run.cpu.as_ref().map_or(0.0, |c| c.us_per_io),
            runq_us_per_io: run.cpu.as_ref().map_or(0.0, |c| c.runq_us_per_io),
            device_await_us: 0.0,
            device_in_flight: None,
        }))
    };
    let mut curve = Vec::new();
    for p in &c0.curve {
        if let Some(x) = point(p)? {
            curve.push(x);
        }
    }
    let target = c0.max_latency_ns;
    let pct = c0.percentile;
    let mut best: Option<usize> = None;
    for (k, p) in curve.iter().enumerate() {
        let h = runs[p.run].merged_io_hist()?;
        let lat = if h.is_empty() {
            u64::MAX
        } else {
            h.value_at_quantile(pct / 100.0)
        };
        if lat <= target && best.is_none_or(|b| p.iops > curve[b].iops) {
            best = Some(k);
        }
    }
    let phase_best = |phase: &str| -> Option<(usize, f64)> {
        runs.iter()
            .enumerate()
            .filter(|(_, r)| r.phase == phase)
            .map(|(k, _)| (k, rate(k).1))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    };
    let mut findings = c0.findings.clone();
    let seq = phase_best("seqread");
    let seq1 = phase_best("seqread1");
    if let (Some(b), Some((k, v))) = (findings.seq_best.as_mut(), seq) {
        b.value = v;
        b.level = runs[k].spec.as_ref().and_then(|s| s.qd).unwrap_or(b.level);
    }
    if let (Some(b), Some((_, v))) = (findings.seq1_best.as_mut(), seq1) {
        b.value = v;
    }
    let mut write_ramp = Vec::new();
    for p in &c0.findings.write_ramp {
        if let Some(x) = point(p)? {
            write_ramp.push(x);
        }
    }
    findings.write_ramp = write_ramp;
    use crate::results::analysis::{Severity, Verdict, VerdictKind};
    let note = |message: String, figures: &[(&str, f64)]| Verdict {
        kind: VerdictKind::Note,
        severity: Severity::Info,
        message,
        figures: figures.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    };
    let mut verdicts = vec![note(
        format!(
            "cluster of {n} rank(s): IOPS summed over ranks in the window where all measured, \
             latency percentiles from the exactly merged histograms"
        ),
        &[("ranks", n as f64)],
    )];
    if let Some(b) = best {
        verdicts.push(note(
            format!(
                "max IOPS at p{} ≤ {}: {} with {} sessions in all",
                pct,
                fmt_ns(target as f64),
                fmt_rate(curve[b].iops),
                curve[b].sessions
            ),
            &[
                ("max_iops", curve[b].iops),
                ("sessions", curve[b].sessions as f64),
            ],
        ));
    }
    Ok(Some(crate::results::Calibration {
        percentile: pct,
        max_latency_ns: target,
        max_iops: best.map(|b| curve[b].iops),
        max_iops_point: best,
        curve,
        max_mbps: seq.map(|x| x.1),
        max_pmbps: seq1.map(|x| x.1),
        findings,
        overhead_s: c0.overhead_s,
        budget_s: c0.budget_s,
        verdicts,
    }))
}
