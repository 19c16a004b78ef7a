//! Validation of a results document as it is read: every figure finite and non-negative,
//! every interval histogram decoded once (merged into display columns on the way when a
//! renderer asks), counts summing to their totals.

use super::*;

/// Reject a figure that is negative, NaN or infinite.
pub(super) fn check_non_negative(what: &str, x: f64) -> Result<()> {
    if !x.is_finite() || x < 0.0 {
        bail!("{what} is {x} (must be a finite, non-negative number)");
    }
    Ok(())
}

/// Most operations one op may count: beyond this the V2 encoding cannot hold the histogram
/// and a count is an overflow or a saturated sum, not a measurement.
pub const MAX_COUNT: u64 = i64::MAX as u64;

impl RunResult {
    /// The spec as one JSON object (`null` when there is none), for comparing specs key by key.
    pub fn spec_value(&self) -> serde_json::Value {
        self.spec.as_ref().map(Spec::to_value).unwrap_or_default()
    }

    /// The checks of [`Results::validate`] for one run.
    pub fn validate(&self) -> Result<()> {
        self.validate_merging(None)
    }

    /// [`RunResult::validate`] of run `run`, handing the interval histograms it decodes to
    /// `groups`.
    pub(crate) fn validate_merging(
        &self,
        groups: Option<(&dyn IntervalGroups, usize)>,
    ) -> Result<()> {
        // A source without time information (`duration_unknown`) has counts, not rates: its
        // duration may be 0, never negative or not finite.
        let unknown_ok = self.duration_unknown && self.duration_s == 0.0;
        if !self.duration_s.is_finite() || (self.duration_s <= 0.0 && !unknown_ok) {
            bail!(
                "its duration is {} s (must be positive): rates cannot be computed",
                self.duration_s
            );
        }
        check_non_negative("its interval length", self.interval_s)?;
        check_non_negative("its warm-up", self.warmup_s)?;
        let mut total: u64 = 0;
        for (k, o) in self.ops.iter().enumerate() {
            o.validate_merging(groups.map(|(g, run)| (g, run, k)))
                .with_context(|| format!("op \"{}\" is not valid", o.op))?;
            total = total
                .checked_add(o.count)
                .filter(|t| *t <= MAX_COUNT)
                .context("its op counts overflow when added up")?;
        }
        if let Some(c) = &self.cpu {
            for (name, x) in [
                ("user_s", c.user_s),
                ("sys_s", c.sys_s),
                ("us_per_io", c.us_per_io),
                ("runq_delay_s", c.runq_delay_s),
            ] {
                check_non_negative(&format!("cpu {name}"), x)?;
            }
        }
        Ok(())
    }
}

impl OpResult {
    /// The checks of [`Results::validate`] for one op: counts, histograms and percentiles.
    pub fn validate(&self) -> Result<()> {
        self.validate_merging(None)
    }

    /// [`OpResult::validate`] of op `op_index` of run `run`, handing its interval histograms,
    /// decoded once, to `groups`.
    pub(crate) fn validate_merging(
        &self,
        groups: Option<(&dyn IntervalGroups, usize, usize)>,
    ) -> Result<()> {
        if self.count > MAX_COUNT {
            bail!(
                "its count {} is an overflow (more than 2^63 operations)",
                self.count
            );
        }
        if self.bytes > MAX_COUNT {
            bail!(
                "its byte count {} is an overflow (more than 2^63 bytes)",
                self.bytes
            );
        }
        let held = self
            .hist
            .checked_len()
            .context("its histogram is undecodable")?;
        if held != self.count {
            bail!(
                "its histogram holds {held} operation(s) but its count says {}",
                self.count
            );
        }
        let s = &self.summary;
        if s.count != self.count {
            bail!(
                "its summary counts {} operation(s) but its count says {}",
                s.count,
                self.count
            );
        }
        check_non_negative("its mean latency", s.mean_ns)?;
        check_non_negative("its latency standard deviation", s.stdev_ns)?;
        let p = [
            ("min", s.min_ns),
            ("p50", s.p50_ns),
            ("p90", s.p90_ns),
            ("p99", s.p99_ns),
            ("p99.9", s.p999_ns),
            ("p99.99", s.p9999_ns),
            ("max", s.max_ns),
        ];
        for w in p.windows(2) {
            if w[0].1 > w[1].1 {
                bail!(
                    "its percentiles are not in order ({} {} ns > {} {} ns)",
                    w[0].0,
                    w[0].1,
                    w[1].0,
                    w[1].1
                );
            }
        }
        if self.count > 0
            && (s.mean_ns < s.min_ns as f64 * 0.999 || s.mean_ns > s.max_ns as f64 * 1.001 + 1.0)
        {
            bail!(
                "its mean latency {} ns lies outside its min..max ({}..{} ns)",
                s.mean_ns,
                s.min_ns,
                s.max_ns
            );
        }
        if !self.intervals.is_empty() {
            let (mut n, mut bytes) = (0u64, 0u64);
            let mut held_all = checked_lens(self, groups).into_iter();
            for (k, iv) in self.intervals.iter().enumerate() {
                let at = || format!("interval {} (at {} s)", k + 1, iv.start_s);
                if !iv.start_s.is_finite() || !iv.duration_s.is_finite() || iv.duration_s < 0.0 {
                    bail!(
                        "{}: start {} s, duration {} s are not valid",
                        at(),
                        iv.start_s,
                        iv.duration_s
                    );
                }
                let held = held_all
                    .next()
                    .unwrap_or_else(|| iv.hist.checked_len())
                    .with_context(|| format!("{}: histogram is undecodable", at()))?;
                if held != iv.count {
                    bail!(
                        "{}: its histogram holds {held} operation(s) but its count says {}",
                        at(),
                        iv.count
                    );
                }
                n = n
                    .checked_add(iv.count)
                    .with_context(|| format!("{}: interval counts overflow", at()))?;
                bytes = bytes.saturating_add(iv.bytes);
            }
            if n != self.count {
                bail!(
                    "its intervals count {n} operation(s) but its count says {}",
                    self.count
                );
            }
            if bytes != self.bytes && self.bytes != 0 {
                bail!(
                    "its intervals transferred {bytes} byte(s) but its total says {}",
                    self.bytes
                );
            }
        }
        Ok(())
    }
}

/// [`Hist::checked_len`] of every interval of `op`, in order; spread over up to 8 threads when
/// there are many (a day of 1-second intervals is 86,400 per op). With `groups`, the intervals
/// are also merged by the groups of [`interval_groups`] as they are decoded, each group on one
/// thread, and every group is handed to it.
pub(super) fn checked_lens(
    op: &OpResult,
    groups: Option<(&dyn IntervalGroups, usize, usize)>,
) -> Vec<Result<u64>> {
    let ivs = &op.intervals;
    let groups = groups.and_then(|(g, run, k)| {
        let max = g.max_groups(run, op);
        (max > 0 && !ivs.is_empty()).then_some((g, run, k, max))
    });
    // Units of work: the groups, or single intervals.
    let (per, units) = match groups {
        Some((.., max)) => interval_groups(ivs, max),
        None => (1, ivs.len()),
    };
    // The intervals of unit `u` (the last unit also holds a folded stub tail).
    let span = |u: usize| {
        u * per..if u + 1 == units {
            ivs.len()
        } else {
            (u + 1) * per
        }
    };
    let run_units = |us: std::ops::Range<usize>| -> Vec<Result<u64>> {
        let Some((g, run, k, _)) = groups else {
            return ivs[span(us.start).start..span(us.end - 1).end]
                .iter()
                .map(|iv| iv.hist.checked_len())
                .collect();
        };
        let mut dense = crate::histogram::DenseCounts::new();
        let mut out = Vec::new();
        for u in us {
            dense.clear();
            let mut clean = true;
            for iv in &ivs[span(u)] {
                out.push(match dense.add(&iv.hist) {
                    Some(n) => Ok(n),
                    None => {
                        clean = false;
                        iv.hist.checked_len_general()
                    }
                });
            }
            g.group(run, k, op, u, clean.then(|| dense.sparse()).as_deref());
        }
        out
    };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8);
    if units == 0 {
        return Vec::new();
    }
    if threads <= 1 || ivs.len() < 1024 {
        return run_units(0..units);
    }
    let chunk = units.div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..units)
            .step_by(chunk)
            .map(|a| {
                let run_units = &run_units;
                s.spawn(move || run_units(a..(a + chunk).min(units)))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("histogram check thread panicked"))
            .collect()
    })
}

impl Results {
    /// Check that the document is internally consistent before anything is drawn from it:
    /// durations positive and finite, counts that neither overflowed nor disagree with their
    /// intervals and histograms, histograms that decode, percentiles that are ordered. Every
    /// command that loads results (`show`, `report`, `compare`, `export`) goes through this,
    /// so they all refuse the same files with the same message.
    pub fn validate(&self) -> Result<()> {
        self.validate_merging(None)
    }

    /// [`Results::validate`], handing the interval histograms it decodes to `groups`.
    pub(crate) fn validate_merging(&self, groups: Option<&dyn IntervalGroups>) -> Result<()> {
        if let Some(p) = &self.profile {
            p.validate().context("its stack profile is not valid")?;
        }
        if let Some(p) = &self.placement {
            p.validate()?;
        }
        let mut total: u64 = 0;
        for (i, run) in self.runs.iter().enumerate() {
            run.validate_merging(groups.map(|g| (g, i)))
                .with_context(|| format!("run {} (\"{}\") is not valid", i + 1, run.name))?;
            // Renderers add counts across runs (totals, heatmaps of several runs): the whole
            // file's count must fit too, so no sum of its counts can overflow.
            total = run
                .ops
                .iter()
                .try_fold(total, |t, o| t.checked_add(o.count))
                .filter(|t| *t <= MAX_COUNT)
                .with_context(|| {
                    format!(
                        "its runs' op counts overflow when added up (at run {}): more than 2^63 \
                         operations is not a measurement",
                        i + 1
                    )
                })?;
        }
        if let Some(c) = &self.calibration {
            for p in &c.curve {
                if p.run >= self.runs.len() {
                    bail!(
                        "calibration curve refers to run {} but the file has {} run(s)",
                        p.run,
                        self.runs.len()
                    );
                }
                for (name, x) in [
                    ("iops", p.iops),
                    ("mb_per_s", p.mb_per_s),
                    ("mean_ns", p.mean_ns),
                    ("cpu_us_per_io", p.cpu_us_per_io),
                ] {
                    check_non_negative(&format!("calibration curve {name}"), x)?;
                }
            }
            for (name, x) in [("max_iops", c.max_iops), ("max_mbps", c.max_mbps)] {
                if let Some(x) = x {
                    check_non_negative(&format!("calibration {name}"), x)?;
                }
            }
        }
        Ok(())
    }
}

/// A reader of the interval histograms that validation decodes ([`Results::from_json_merging`]),
/// handed each op's intervals merged into groups of consecutive intervals, the groups of
/// [`interval_groups`] (display columns): a renderer then decodes no interval a second time.
pub trait IntervalGroups: Sync {
    /// At most how many groups op `op` of run `run` is wanted in (0: not wanted).
    fn max_groups(&self, run: usize, op: &OpResult) -> usize;
    /// Group `g` of op `op` (index `op_index`) of run `run`: the exact merge of its intervals'
    /// counts as `(lowest equivalent value, count)` ascending, or `None` when one of them is
    /// not a clean encoding of the standard layout (the reader then merges that group itself).
    /// Called from validation's threads, in any order.
    fn group(
        &self,
        run: usize,
        op_index: usize,
        op: &OpResult,
        g: usize,
        counts: Option<&[(u64, u64)]>,
    );
}

/// How display columns group `ivs`: a stub last interval folded into the one before
/// ([`fold_stub_tail`]), then at most `max_groups` groups of `per` consecutive intervals (the
/// last may hold fewer; it also holds the folded stub). Returns `(per, groups)`.
pub fn interval_groups(ivs: &[Interval], max_groups: usize) -> (usize, usize) {
    let n = ivs.len() - has_stub_tail(ivs) as usize;
    let per = n.div_ceil(max_groups.max(1)).max(1);
    (per, n.div_ceil(per))
}
