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

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;

use crate::results::hosts::{
    MergeInfo, MergeInput, RankRun, RunMerge, Straggler, StragglerReason, Window,
};
use crate::results::{
    new_histogram, CpuStats, CurvePoint, Hist, Interval, Kind, LatencySummary, OpResult, Results,
    RunResult,
};
use crate::units::{fmt_ns, fmt_rate};

/// What `merge` is told besides its inputs.
#[derive(Clone, Debug, Default)]
pub(crate) struct MergeOptions {
    /// Merge results of different workloads (the differences become warnings).
    pub(crate) force: bool,
}

/// One results file to merge.
pub(crate) struct Input {
    /// The path as given (recorded, and named in errors).
    pub(crate) file: String,
    pub(crate) res: Results,
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

/// A rank whose start lies further than this share of an interval from the others is called
/// late, and starts that disagree by more are warned about.
pub(crate) const START_TOLERANCE: f64 = 0.1;

/// Merge `inputs` into one results document (see the module doc).
pub(crate) fn merge(
    mut inputs: Vec<Input>,
    o: &MergeOptions,
    cmdline: Vec<String>,
) -> Result<Results> {
    if inputs.is_empty() {
        bail!("merge needs at least one results file");
    }
    let mut warnings: Vec<String> = Vec::new();
    let kind = inputs[0].res.kind;
    for i in &inputs {
        if !matches!(i.res.kind, Kind::Run | Kind::Calibrate | Kind::Db) {
            bail!(
                "{}: merge merges measurements (`run`, `calibrate`, `db run`), not {} results",
                i.file,
                kind_word(i.res.kind)
            );
        }
        if i.res.merge.is_some() {
            bail!(
                "{}: this is already a merged result; merge the per-rank files it came from",
                i.file
            );
        }
        if i.res.kind != kind {
            bail!(
                "cannot merge {} results ({}) with {} results ({})",
                kind_word(kind),
                inputs[0].file,
                kind_word(i.res.kind),
                i.file
            );
        }
    }
    // Ranks: from each file's placement.
    for (k, i) in inputs.iter().enumerate() {
        if i.res.placement.is_none() {
            if !o.force {
                bail!(
                    "{}: records no rank (written before iolens recorded ranks, or not by run, \
                     calibrate or db run); --force merges it as rank {k}",
                    i.file
                );
            }
            warnings.push(format!(
                "{} records no rank: merged as rank {k} (--force)",
                i.file
            ));
        }
    }
    let rank_of = |k: usize, i: &Input| i.res.placement.as_ref().map_or(k as u32, |p| p.rank);
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&k| (rank_of(k, &inputs[k]), k));
    let mut sorted: Vec<Input> = Vec::with_capacity(inputs.len());
    let mut slots: Vec<Option<Input>> = inputs.drain(..).map(Some).collect();
    for k in &order {
        if let Some(x) = slots[*k].take() {
            sorted.push(x);
        }
    }
    let inputs = sorted;
    let ranks: Vec<u32> = order
        .iter()
        .zip(&inputs)
        .map(|(k, i)| rank_of(*k, i))
        .collect();
    for w in ranks.windows(2).zip(inputs.windows(2)) {
        if w.0[0] == w.0[1] {
            let msg = format!(
                "{} and {} are both rank {} (give each host its own rank: a launcher, or --rank)",
                w.1[0].file, w.1[1].file, w.0[0]
            );
            if !o.force {
                bail!("{msg}; --force merges them anyway");
            }
            warnings.push(format!("{msg}; merged anyway (--force)"));
        }
    }
    let sizes: BTreeSet<Option<u32>> = inputs
        .iter()
        .map(|i| i.res.placement.as_ref().and_then(|p| p.ranks))
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
    // Same workload: same runs, same shape.
    let first = &inputs[0];
    for i in &inputs[1..] {
        let diffs = differences(&first.res, &i.res);
        if !diffs.is_empty() {
            let msg = format!(
                "{} and {} are not the same workload: {}",
                first.file,
                i.file,
                diffs.join("; ")
            );
            if !o.force {
                bail!("{msg}. --force merges them anyway");
            }
            warnings.push(format!("{msg} (merged with --force)"));
        }
    }
    let n_runs = inputs.iter().map(|i| i.res.runs.len()).min().unwrap_or(0);
    if inputs.iter().any(|i| i.res.runs.len() != n_runs) {
        warnings.push(format!(
            "the inputs hold different numbers of runs: the first {n_runs} are merged"
        ));
    }
    // Clocks.
    let unsynced: Vec<String> = inputs
        .iter()
        .zip(&ranks)
        .filter(|(i, _)| {
            i.res
                .placement
                .as_ref()
                .and_then(|p| p.clock.as_ref())
                .is_some_and(|c| !c.synchronised)
        })
        .map(|(i, r)| format!("rank {r} ({})", host_of(&i.res)))
        .collect();
    if !unsynced.is_empty() {
        warnings.push(format!(
            "the clock of {} is not synchronised (adjtimex): ranks are placed on the common \
             grid by their own clocks, which may disagree",
            unsynced.join(", ")
        ));
    }

    let mut runs = Vec::with_capacity(n_runs);
    let mut run_merges = Vec::with_capacity(n_runs);
    for j in 0..n_runs {
        let parts: Vec<&RunResult> = inputs.iter().map(|i| &i.res.runs[j]).collect();
        let (run, m) = merge_run(&parts, &ranks, &inputs, &mut warnings)
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
    for (i, r) in inputs.iter().zip(&ranks) {
        for w in &i.res.warnings {
            warnings.push(format!("rank {r} ({}): {w}", host_of(&i.res)));
        }
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

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Accumulates one op's merged intervals on the grid.
struct OpGrid {
    op: String,
    /// (grid slot, input, op index, interval index) of every interval of this op.
    cells: Vec<(usize, usize, usize, usize)>,
    total: Histogram<u64>,
    count: u64,
    bytes: u64,
    errors: u64,
    /// Some rank's op has a count but no intervals: the merged op keeps no intervals.
    no_intervals: bool,
    first: OpResult,
}

/// Merge one run across ranks.
fn merge_run(
    parts: &[&RunResult],
    ranks: &[u32],
    inputs: &[Input],
    warnings: &mut Vec<String>,
) -> Result<(RunResult, RunMerge)> {
    let iv = parts[0].interval_s;
    for (p, i) in parts.iter().zip(inputs) {
        if (p.interval_s - iv).abs() > 1e-9 * iv.max(1.0) {
            bail!(
                "{} measured with {} s intervals and {} with {} s: histograms can only be \
                 summed on one grid (run every rank with the same --interval)",
                inputs[0].file,
                iv,
                i.file,
                p.interval_s
            );
        }
        if !p.rates_known() {
            bail!(
                "{}: the run has no duration, so it cannot be placed in time",
                i.file
            );
        }
    }
    if iv.is_nan() || iv <= 0.0 {
        bail!("the runs have no interval length");
    }
    let mut starts = Vec::with_capacity(parts.len());
    for (p, i) in parts.iter().zip(inputs) {
        if p.started.is_empty() {
            bail!(
                "{}: the run does not record when its measurement started",
                i.file
            );
        }
        let t = crate::placement::parse_time(&p.started)
            .with_context(|| format!("{}: its start {:?} is not a time", i.file, p.started))?;
        starts.push(t);
    }
    let Some(t0) = starts.iter().min().copied() else {
        bail!("nothing to merge");
    };
    let origin = crate::placement::fmt_time(t0);
    let offsets: Vec<f64> = starts
        .iter()
        .map(|t| t.duration_since(t0).unwrap_or_default().as_secs_f64())
        .collect();
    let spread = offsets.iter().cloned().fold(0.0, f64::max);
    if spread > START_TOLERANCE * iv && parts.len() > 1 {
        warnings.push(format!(
            "{}: the ranks' measured starts disagree by {} (more than a tenth of the {} \
             interval): each rank's intervals are placed on the common grid at the nearest slot",
            parts[0].name,
            fmt_ns(spread * 1e9),
            fmt_ns(iv * 1e9)
        ));
    }
    // Op grids, in order of first appearance: which rank's interval falls in which slot.
    let mut grids: Vec<OpGrid> = Vec::new();
    let mut rank_runs = Vec::with_capacity(parts.len());
    let mut tmp = new_histogram();
    for (k, p) in parts.iter().enumerate() {
        let off = offsets[k];
        let shift = (off / iv).round() as i64;
        let mut first_slot = usize::MAX;
        for (oi, o) in p.ops.iter().enumerate() {
            let g = match grids.iter().position(|g| g.op == o.op) {
                Some(x) => &mut grids[x],
                None => {
                    grids.push(OpGrid {
                        op: o.op.clone(),
                        cells: Vec::new(),
                        total: new_histogram(),
                        count: 0,
                        bytes: 0,
                        errors: 0,
                        no_intervals: false,
                        first: o.clone(),
                    });
                    let n = grids.len() - 1;
                    &mut grids[n]
                }
            };
            o.hist.add_to(&mut g.total)?;
            g.count += o.count;
            g.bytes = g.bytes.saturating_add(o.bytes);
            g.errors += o.errors;
            if o.intervals.is_empty() && o.count > 0 {
                g.no_intervals = true;
            }
            for (n, x) in o.intervals.iter().enumerate() {
                let slot = ((x.start_s / iv).round() as i64 + shift).max(0) as usize;
                first_slot = first_slot.min(slot);
                g.cells.push((slot, k, oi, n));
            }
        }
        // This rank's own series (I/O, not sync), interval by interval.
        let n_int = p
            .ops
            .iter()
            .filter(|o| o.op != "sync")
            .map(|o| o.intervals.len())
            .max()
            .unwrap_or(0);
        let mut spans = Vec::with_capacity(n_int);
        let (mut slot_iops, mut slot_p99_ns) = (Vec::new(), Vec::new());
        for n in 0..n_int {
            tmp.reset();
            let (mut c, mut b, mut d) = (0u64, 0u64, 0.0f64);
            for o in p.ops.iter().filter(|o| o.op != "sync") {
                if let Some(x) = o.intervals.get(n) {
                    x.hist.add_to(&mut tmp)?;
                    c += x.count;
                    b = b.saturating_add(x.bytes);
                    d = d.max(x.duration_s);
                }
            }
            spans.push((c, b, d));
            slot_iops.push(if d > 0.0 { c as f64 / d } else { 0.0 });
            slot_p99_ns.push(if tmp.is_empty() {
                0
            } else {
                tmp.value_at_quantile(0.99)
            });
        }
        let io = p.merged_io_hist()?;
        let q = |x: f64| {
            if io.is_empty() {
                0
            } else {
                io.value_at_quantile(x)
            }
        };
        rank_runs.push((
            spans,
            RankRun {
                input: k,
                rank: ranks[k],
                host: host_of(&inputs[k].res),
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
    let c0 = rank_runs.iter().map(|r| r.1.start_s).fold(0.0, f64::max);
    let c1 = rank_runs
        .iter()
        .map(|r| end_of(&r.1))
        .fold(f64::INFINITY, f64::min);
    let mut common = None;
    if c1 > c0 {
        let (mut count, mut iops, mut mbs, mut every) = (0u64, 0.0, 0.0, true);
        for (slot_io, r) in &rank_runs {
            let (mut n, mut b, mut d) = (0u64, 0u64, 0.0);
            let mut t = r.start_s;
            for s in slot_io {
                let (a, z) = (t, t + s.2);
                t = z;
                let overlap = (z.min(c1) - a.max(c0)).max(0.0);
                if s.2 > 0.0 && overlap >= 0.5 * s.2 {
                    n += s.0;
                    b = b.saturating_add(s.1);
                    d += s.2;
                }
            }
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
    for mut g in grids {
        let mut intervals = Vec::new();
        if !g.no_intervals {
            g.cells.sort_unstable();
            let end = g.cells.last().map_or(0, |c| c.0 + 1);
            let mut i = 0;
            for slot in 0..end {
                tmp.reset();
                let (mut count, mut bytes, mut dur) = (0u64, 0u64, 0.0f64);
                while let Some(&(_, k, oi, n)) = g.cells.get(i).filter(|c| c.0 == slot) {
                    let x = &parts[k].ops[oi].intervals[n];
                    x.hist.add_to(&mut tmp)?;
                    count += x.count;
                    bytes = bytes.saturating_add(x.bytes);
                    // The slot lasts as long as its longest contribution.
                    dur = dur.max(x.duration_s);
                    i += 1;
                }
                intervals.push(Interval {
                    start_s: slot as f64 * iv,
                    duration_s: if dur > 0.0 { dur } else { iv },
                    count,
                    bytes,
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
            ..g.first
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
