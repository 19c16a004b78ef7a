//! The grid a merge sums into: each rank's intervals placed in the wall-clock slot nearest
//! their start and summed as sparse counts read straight from their encodings ([`RunGrid`]),
//! and the ranks that stand out ([`stragglers`]).

use super::*;

/// Buffers reused for every interval a merge reads.
pub(super) struct Scratch {
    scan: V2Scan,
    indices: Vec<(usize, u64)>,
    values: Sparse,
    series: Sparse,
}

impl Scratch {
    pub(super) fn new() -> Scratch {
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
pub(super) struct Slot {
    counts: Sparse,
    count: u64,
    bytes: u64,
    /// The longest contribution (the slot lasts as long as it).
    dur: f64,
}

/// Accumulates one op's merged intervals on the grid.
pub(super) struct OpGrid {
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
pub(super) struct RunGrid {
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
    pub(super) fn place(runs: &[&PeekRun], files: &[String]) -> Result<RunGrid> {
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
    pub(super) fn add(
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
    pub(super) fn finish(
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
            let (mut intervals, mut spans) = (Vec::new(), Vec::new());
            if !g.no_intervals {
                intervals.reserve_exact(g.slots.len());
                spans.reserve_exact(g.slots.len());
                for (slot, sl) in g.slots.into_iter().enumerate() {
                    tmp.reset();
                    for &(v, n) in &sl.counts {
                        tmp.record_n(v, n)
                            .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
                    }
                    intervals.push((Hist::encode(&tmp), sl.count, sl.bytes));
                    spans.push((slot as f64 * iv, if sl.dur > 0.0 { sl.dur } else { iv }));
                }
            }
            // The same parts an accumulator of one host yields, made results the same way
            // (the op's count is its histogram's: every rank's document was validated so).
            let parts = Parts {
                total: g.total,
                bytes: g.bytes,
                errors: g.errors,
                intervals,
            };
            let mut r = OpResult::of_parts_as_placed(&g.op, parts, &spans);
            debug_assert_eq!(
                r.count, g.count,
                "validated ranks' counts are their histograms'"
            );
            r.bucket_convention = g.convention;
            r.bucket_edges_ns = g.edges;
            ops.push(r);
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
            // Each rank's device is its own: their counters are not summed.
            device_intervals: Vec::new(),
            sched_intervals: Vec::new(),
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
            // Per-target series are not merged across ranks (each rank's own targets).
            targets: Vec::new(),
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
pub(super) fn stragglers(ranks: &[RankRun], iv: f64) -> Vec<Straggler> {
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
