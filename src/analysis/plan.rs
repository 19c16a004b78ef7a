//! `iolens plan`: how many LUNs, what queue depth and how many sessions an IOPS goal at a p99
//! needs, decided from measured load curves (a calibration, or runs at several LUN counts).
//!
//! # Model
//! Seed 001's argument: an all-flash array's service time stays flat while the host's per-LUN
//! queue (lpfc_lun_queue_depth=30) caps the requests each LUN has in flight, so one LUN's IOPS
//! go flat and its latency rises with the sessions, and more LUNs relieve it. The measured curve
//! gives the three figures of that picture:
//! - the **service time** `S`: the lowest mean latency measured (queueing only adds to it; the
//!   lowest load's own can be higher, each I/O waiting for an idle host to wake);
//! - the **time outside** `Z` a session spends between its I/Os: the cycle time at the lowest
//!   load (sessions ÷ IOPS) minus `S`;
//! - the **LUN queue** `Q`: requests one LUN serves at once, Little's law at the plateau
//!   (highest IOPS per LUN × `S`), or `--lun-queue`.
//!
//! A plan at `n` LUNs and `N` sessions is predicted by exact mean value analysis of a closed
//! network: `N` sessions cycle through a delay `Z` and one of `n` LUNs, each a `Q`-server
//! station of service `S` (rate `min(k, Q)/S` with `k` requests at it). With ASM-style striping
//! (`unit`) every I/O goes to a LUN at random, so the LUNs' queues are uneven (the model's
//! product form counts that); with `per-session` each session stays on one LUN, and each LUN is
//! its own network of `N/n` sessions. The model is checked on the curve it was fitted to (the
//! largest relative IOPS error is stored).
//!
//! The p99 of a predicted point is read off the measured curve at the same mean latency (p99
//! against mean, interpolated; beyond the last point scaled with the mean): the distribution as
//! measured, not a formula's. No plan goes below the lowest p99 measured (the device's floor).
//!
//! Little's law gives the requests in flight at the goal with the latency distribution of the
//! measured point that meets the p99 at the highest IOPS (its histogram's mean); the queue slots
//! that hold them 99 % of the time are the 99th percentile of a Poisson count of that mean
//! (requests in flight in an M/G/∞ system are Poisson whatever the service distribution).

use anyhow::{bail, Result};

use crate::results::plan::{
    CurveAt, HostSetting, LoadPoint, Plan, PlanCurve, PlanGoal, PlanInput, PlanModel, PlanVerify,
    Sourced, VendorCheck,
};
use crate::results::{CurvePoint, Kind, Results, RunResult, TargetInfo};
use crate::units::{fmt_ns, fmt_rate, sig3};

/// One results file given to `plan`.
pub struct Input<'a> {
    /// Its name as given (figures say where they came from by it).
    pub file: String,
    pub results: &'a Results,
}

/// Most LUNs a plan considers.
pub const MAX_LUNS: u32 = 4096;

/// Linux's default request count of a queue with an I/O scheduler: 2 × min(depth, 128)
/// (`BLKDEV_DEFAULT_RQ`, block/blk-mq-sched.c).
pub fn linux_nr_requests(depth: u32) -> u32 {
    2 * depth.min(128)
}

/// The load points of one results file: a calibration's random-read curve, or every run with
/// known rates. Each says how many LUNs (targets) it ran on.
pub fn load_points(file: &str, r: &Results) -> Result<Vec<LoadPoint>> {
    let luns = |run: Option<&RunResult>| run.map_or(1, |x| x.targets.len().max(1) as u32);
    let mut out = Vec::new();
    match r.kind {
        Kind::Calibrate => {
            let Some(c) = &r.calibration else {
                bail!("{file}: a calibration results file without its calibration");
            };
            for p in &c.curve {
                if !(p.iops > 0.0 && p.mean_ns > 0.0) {
                    continue;
                }
                out.push(LoadPoint {
                    file: file.into(),
                    run: p.run,
                    luns: luns(r.runs.get(p.run)),
                    sessions: p.sessions * p.qd.max(1),
                    iops: p.iops,
                    mean_ns: p.mean_ns,
                    p50_ns: p.p50_ns as f64,
                    p99_ns: p.p99_ns as f64,
                });
            }
        }
        Kind::Run => {
            for (i, run) in r.runs.iter().enumerate() {
                let Some(spec) = &run.spec else { continue };
                let Ok(h) = run.merged_io_hist() else {
                    continue;
                };
                if !run.rates_known() || h.is_empty() || run.iops() <= 0.0 {
                    continue;
                }
                out.push(LoadPoint {
                    file: file.into(),
                    run: i,
                    luns: luns(Some(run)),
                    sessions: spec.sessions.unwrap_or(1) * spec.qd.unwrap_or(1).max(1),
                    iops: run.iops(),
                    mean_ns: h.mean(),
                    p50_ns: h.value_at_quantile(0.5) as f64,
                    p99_ns: h.value_at_quantile(0.99) as f64,
                });
            }
        }
        k => bail!(
            "{file} is a {} results file: plan reads load curves, from `calibrate` or from \
             `run`s (at several session counts, or several LUN counts)",
            k.name()
        ),
    }
    Ok(out)
}

/// Where a load point came from, in words.
fn at(p: &LoadPoint) -> String {
    format!(
        "{}, run {} ({} sessions on {} LUN{})",
        p.file,
        p.run,
        p.sessions,
        p.luns,
        if p.luns == 1 { "" } else { "s" }
    )
}

/// The fitted model: per-LUN service time, LUN queue and the time outside, in seconds.
#[derive(Clone, Copy, Debug)]
struct Fit {
    s: f64,
    q: f64,
    z: f64,
}

/// Throughput (IOPS) of `n` sessions over one delay `z` and `luns` identical `q`-server
/// stations of service `s`, every I/O at a random station; for every population 1..=n
/// (exact mean value analysis with load-dependent stations), stopping at the first population
/// whose throughput reaches `stop`.
fn mva(n: u32, luns: u32, f: Fit, stop: f64) -> Vec<f64> {
    let mu = |k: usize| (k as f64).min(f.q) / f.s;
    let mut p = vec![1.0f64]; // marginal queue-length probabilities at one station
    let mut xs = Vec::with_capacity(n as usize);
    for m in 1..=n as usize {
        // p holds the queue lengths that still have a probability (the tail is dropped).
        let top = p.len();
        let r: f64 = (1..=top).map(|k| k as f64 / mu(k) * p[k - 1]).sum();
        let x = m as f64 / (f.z + r);
        let xi = x / luns as f64;
        let mut np = vec![0.0; top + 1];
        for k in 1..=top {
            np[k] = xi / mu(k) * p[k - 1];
        }
        np[0] = (1.0 - np[1..].iter().sum::<f64>()).max(0.0);
        while np.len() > 1 && np[np.len() - 1] < 1e-18 {
            np.pop();
        }
        p = np;
        xs.push(x);
        if x >= stop {
            break;
        }
    }
    xs
}

/// Predicted IOPS and mean latency (s) of `sessions` over `luns` LUNs.
fn predict_all(max_sessions: u32, luns: u32, f: Fit, per_session: bool) -> Vec<(f64, f64)> {
    predict_until(max_sessions, luns, f, per_session, f64::INFINITY)
}

/// [`predict_all`] up to the first session count whose IOPS reach `stop`.
fn predict_until(
    max_sessions: u32,
    luns: u32,
    f: Fit,
    per_session: bool,
    stop: f64,
) -> Vec<(f64, f64)> {
    let xs = if per_session {
        // Each LUN its own network: sessions split as evenly as they go.
        let one = mva(max_sessions.div_ceil(luns) + 1, 1, f, stop / luns as f64);
        // Past the population that reached the stop the last figure stands (IOPS only grow).
        let x = |k: u32| match k {
            0 => 0.0,
            k => one
                .get(k as usize - 1)
                .or(one.last())
                .copied()
                .unwrap_or(0.0),
        };
        let mut xs = Vec::new();
        for n in 1..=max_sessions {
            let (g, r) = (n / luns, n % luns);
            let v = r as f64 * x(g + 1) + (luns - r) as f64 * x(g);
            xs.push(v);
            if v >= stop {
                break;
            }
        }
        xs
    } else {
        mva(max_sessions, luns, f, stop)
    };
    xs.into_iter()
        .enumerate()
        .map(|(i, x)| (x, ((i + 1) as f64 / x - f.z).max(f.s)))
        .collect()
}

fn predict(sessions: u32, luns: u32, f: Fit, per_session: bool) -> (f64, f64) {
    predict_all(sessions.max(1), luns, f, per_session)[sessions.max(1) as usize - 1]
}

/// The p99 the measured curve shows at mean latency `mean_ns` (interpolated; beyond its
/// last point scaled with the mean; never below its first).
fn p99_at(mean_ns: f64, curve: &[LoadPoint]) -> f64 {
    let mut pts: Vec<(f64, f64)> = curve.iter().map(|p| (p.mean_ns, p.p99_ns)).collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (first, last) = (pts[0], pts[pts.len() - 1]);
    if mean_ns <= first.0 {
        return first.1;
    }
    if mean_ns >= last.0 {
        return last.1 * mean_ns / last.0;
    }
    let i = pts
        .iter()
        .position(|p| p.0 >= mean_ns)
        .unwrap_or(pts.len() - 1);
    let (a, b) = (pts[i - 1], pts[i]);
    let t = if b.0 > a.0 {
        (mean_ns - a.0) / (b.0 - a.0)
    } else {
        0.0
    };
    a.1 + t * (b.1 - a.1)
}

/// The 99th percentile of a Poisson count of mean `m` (normal approximation above 200).
fn poisson_p99(m: f64) -> f64 {
    if m <= 0.0 {
        return 0.0;
    }
    if m > 200.0 {
        return (m + 2.326 * m.sqrt()).ceil();
    }
    let (mut k, mut pmf) = (0u32, (-m).exp());
    let mut cdf = pmf;
    while cdf < 0.99 {
        k += 1;
        pmf *= m / k as f64;
        cdf += pmf;
    }
    k as f64
}

/// The measured target's facts: info, SCSI LUN queue depth, tags.
fn target_facts(p: &LoadPoint, r: &Results) -> (Option<TargetInfo>, Vec<String>) {
    let run = r.runs.get(p.run);
    let tr = run.and_then(|x| x.targets.first());
    let info = tr
        .map(|t| t.target.clone())
        .or_else(|| r.environment.target.clone());
    let mut facts = Vec::new();
    if let Some(i) = &info {
        if let Some(n) = i.nr_requests {
            facts.push(format!(
                "{}: nr_requests {n} (scheduler {})",
                i.device,
                if i.scheduler.is_empty() {
                    "?"
                } else {
                    i.active_scheduler()
                }
            ));
        }
        if !i.driver.is_empty() {
            facts.push(format!("driver {}", i.driver));
        }
    }
    if let Some(l) = tr.and_then(|t| t.lun_queue_depth) {
        facts.push(format!("SCSI queue_depth {l}"));
    }
    if let Some(q) = tr.and_then(|t| t.queue.as_ref()) {
        facts.push(format!(
            "{} tags over {} hardware queue(s)",
            q.driver_tags, q.hw_queues
        ));
    }
    if let Some(c) = &r.calibration {
        if let Some(d) = c
            .curve
            .iter()
            .filter(|c| c.run == p.run)
            .find_map(|c| c.device_in_flight)
        {
            facts.push(format!(
                "{} requests in the device at this step (--watch)",
                sig3(d)
            ));
        }
    }
    (info, facts)
}

/// Decide the plan. Errors say plainly when the inputs hold no curve or the goal cannot be met.
pub fn plan(inputs: &[Input<'_>], goal: &PlanGoal) -> Result<Plan> {
    if inputs.is_empty() {
        bail!("plan needs at least one results file (a calibration, or runs)");
    }
    if !(super::positive(goal.iops) && super::positive(goal.p99_ns)) {
        bail!("the goal needs a positive --iops and --p99");
    }
    let per_session = goal.stripe == "per-session";
    let mut all: Vec<LoadPoint> = Vec::new();
    let mut used = Vec::new();
    for i in inputs {
        let pts = load_points(&i.file, i.results)?;
        let mut luns: Vec<u32> = pts.iter().map(|p| p.luns).collect();
        luns.sort_unstable();
        luns.dedup();
        used.push(PlanInput {
            file: i.file.clone(),
            kind: i.results.kind.name().into(),
            points: pts.len(),
            luns,
        });
        all.extend(pts);
    }
    // The curve: the LUN count with the most points at distinct session counts (fewest LUNs
    // on a tie).
    let mut counts: Vec<u32> = all.iter().map(|p| p.luns).collect();
    counts.sort_unstable();
    counts.dedup();
    let distinct = |l: u32| {
        let mut s: Vec<u32> = all
            .iter()
            .filter(|p| p.luns == l)
            .map(|p| p.sessions)
            .collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    };
    let Some(b) = counts
        .iter()
        .copied()
        .max_by_key(|&l| (distinct(l), std::cmp::Reverse(l)))
        .filter(|&l| distinct(l) >= 2)
    else {
        bail!(
            "the results hold no load curve: plan needs IOPS and latency at two or more \
             session counts on the same number of LUNs (a calibration's random-read ramp, or \
             `run`s at several --sessions); found {} load point(s)",
            all.len()
        );
    };
    let mut curve: Vec<LoadPoint> = all.iter().filter(|p| p.luns == b).cloned().collect();
    curve.sort_by(|a, c| a.sessions.cmp(&c.sessions).then(a.iops.total_cmp(&c.iops)));
    let lowest = curve[0].clone();
    let top = curve
        .iter()
        .max_by(|a, c| a.iops.total_cmp(&c.iops))
        .cloned()
        .unwrap_or_else(|| lowest.clone());
    // The service time: the lowest mean latency on the curve (queueing only adds to it). The
    // lowest load's own can be higher: one session waits for an idle CPU and device to wake
    // for each I/O (tests/plan.rs: 4.63 ms at 1 session, 4.2-4.37 ms at 4 on a 4 ms "LUN"),
    // which put the 4-LUN prediction 14 % under the measured IOPS.
    let fastest = curve
        .iter()
        .min_by(|a, c| a.mean_ns.total_cmp(&c.mean_ns))
        .cloned()
        .unwrap_or_else(|| lowest.clone());
    let s = fastest.mean_ns / 1e9;
    let z = (lowest.sessions as f64 / lowest.iops - lowest.mean_ns / 1e9).max(0.0);
    let q_measured = top.iops / b as f64 * s;
    let q = goal.lun_queue.map_or(q_measured, f64::from);
    let fit = Fit { s, q, z };
    let fit_measured = Fit {
        q: q_measured,
        ..fit
    };
    let floor = all
        .iter()
        .min_by(|a, c| a.p99_ns.total_cmp(&c.p99_ns))
        .cloned()
        .unwrap_or_else(|| lowest.clone());
    let fit_error = curve
        .iter()
        .map(|p| (predict(p.sessions, b, fit_measured, per_session).0 / p.iops - 1.0).abs())
        .fold(0.0, f64::max);
    let results_of = |file: &str| {
        inputs
            .iter()
            .find(|i| i.file == file)
            .map(|i| i.results)
            .expect("the file of a load point")
    };
    let (info, mut queue_facts) = target_facts(&top, results_of(&top.file));
    let lun_word = |n: u32| if n == 1 { "LUN" } else { "LUNs" };

    // What the measurements cannot support, said plainly.
    if goal.p99_ns < floor.p99_ns {
        bail!(
            "the goal's p99 of {} is below anything this storage delivered: its lowest p99 was \
             {} ({}). More LUNs or deeper queues remove queueing, not service time: no plan \
             meets this goal on this storage",
            fmt_ns(goal.p99_ns),
            fmt_ns(floor.p99_ns),
            at(&floor)
        );
    }
    let Some(op) = all
        .iter()
        .filter(|p| p.p99_ns <= goal.p99_ns)
        .max_by(|a, c| (a.iops / a.luns as f64).total_cmp(&(c.iops / c.luns as f64)))
        .cloned()
    else {
        unreachable!("the floor point meets the p99")
    };
    let op_hist_mean = results_of(&op.file)
        .runs
        .get(op.run)
        .and_then(|r| r.merged_io_hist().ok())
        .filter(|h| !h.is_empty())
        .map(|h| h.mean())
        .unwrap_or(op.mean_ns);
    let in_flight = goal.iops * op_hist_mean / 1e9;
    let slots = poisson_p99(in_flight);

    // The fewest LUNs at which some session count reaches the goal within its p99.
    let min_luns = ((goal.iops * s / q).floor() as u32).clamp(1, MAX_LUNS);
    let mut found = None;
    for n in min_luns..=MAX_LUNS.min(min_luns + 64) {
        if goal.iops >= n as f64 * q / s {
            continue;
        }
        // Enough sessions to pass the goal: the goal's cycle time, with room for queueing.
        let cap =
            ((goal.iops * (s + z) * 4.0).ceil() as u32 + 4 * n * q.ceil() as u32).clamp(8, 1 << 15);
        let preds = predict_until(cap, n, fit, per_session, goal.iops);
        if let Some((i, (x, r))) = preds.iter().enumerate().find(|(_, (x, _))| *x >= goal.iops) {
            let p99 = p99_at(r * 1e9, &curve);
            if p99 <= goal.p99_ns {
                found = Some((n, i as u32 + 1, *x, p99));
                break;
            }
        }
    }
    let Some((luns, sessions, x, p99)) = found else {
        bail!(
            "no plan of up to {} LUNs reaches {} IOPS within a p99 of {}: with the measured \
             service time {} and {} requests per LUN the queueing needed passes the p99 (the \
             measured curve: {})",
            MAX_LUNS.min(min_luns + 64),
            fmt_rate(goal.iops),
            fmt_ns(goal.p99_ns),
            fmt_ns(s * 1e9),
            sig3(q),
            at(&top)
        );
    };
    // A measured queue within 10 % of a whole number is that number (Little's law over a
    // plateau measured for seconds, with the lowest mean latency as service), else the next
    // one up.
    let depth = if (q - q.round()).abs() < 0.1 * q.round() {
        q.round()
    } else {
        q.ceil()
    }
    .max(1.0) as u32;
    let model_from = format!(
        "mean value analysis: {sessions} sessions, {luns} {} of {} requests each, service \
         {}, {} outside ({} striping)",
        lun_word(luns),
        sig3(q),
        fmt_ns(s * 1e9),
        fmt_ns(z * 1e9),
        goal.stripe
    );

    let q_from = match goal.lun_queue {
        Some(l) => format!("--lun-queue {l} (measured: {})", sig3(q_measured)),
        None => format!(
            "Little's law at the plateau: {} IOPS per LUN × {} service ({})",
            fmt_rate(top.iops / b as f64),
            fmt_ns(s * 1e9),
            at(&top)
        ),
    };
    if let Some(l) = goal.lun_queue {
        queue_facts.push(format!(
            "measured LUN queue {} (plan uses {l})",
            sig3(q_measured)
        ));
    }
    let model = PlanModel {
        luns: b,
        points: curve.clone(),
        service_ns: Sourced::new(
            s * 1e9,
            "ns",
            format!("lowest mean latency on the curve, {}", at(&fastest)),
        ),
        outside_ns: Sourced::new(
            z * 1e9,
            "ns",
            format!(
                "sessions ÷ IOPS − mean latency at the lowest load: {} ÷ {} − {} ({})",
                lowest.sessions,
                fmt_rate(lowest.iops),
                fmt_ns(lowest.mean_ns),
                at(&lowest)
            ),
        ),
        lun_queue: Sourced::new(q, "requests", q_from),
        floor_p99_ns: Sourced::new(floor.p99_ns, "ns", format!("lowest p99, {}", at(&floor))),
        fit_error,
        queue_facts,
    };

    let driver = info.as_ref().map(|i| i.driver.clone()).unwrap_or_default();
    let device = info.as_ref().map(|i| i.device.clone()).unwrap_or_default();
    let settings = host_settings(&driver, &device, depth, sessions);
    let checks = vendor_checks(
        goal,
        luns,
        depth,
        sessions,
        info.as_ref(),
        fit,
        per_session,
        &curve,
    );
    let beyond = beyond(
        &curve,
        b,
        luns,
        fit,
        per_session,
        results_of(&top.file),
        &top,
    );

    // Predicted curves per LUN count, with what was measured there.
    let mut lun_counts: Vec<u32> = counts.clone();
    lun_counts.extend([1, 2, 4, luns]);
    lun_counts.sort_unstable();
    lun_counts.dedup();
    lun_counts.retain(|&m| m <= luns.max(*counts.last().unwrap_or(&1)).max(4));
    let per_lun: Vec<f64> = curve.iter().map(|p| p.sessions as f64 / b as f64).collect();
    let curves = lun_counts
        .iter()
        .map(|&m| {
            let measured: Vec<CurveAt> = all
                .iter()
                .filter(|p| p.luns == m)
                .map(|p| CurveAt {
                    sessions: p.sessions,
                    iops: p.iops,
                    p99_ns: p.p99_ns,
                    from: at(p),
                })
                .collect();
            let mut ss: Vec<u32> = per_lun
                .iter()
                .map(|k| (k * m as f64).round().max(1.0) as u32)
                .chain(measured.iter().map(|c| c.sessions))
                .chain((m == luns).then_some(sessions))
                .collect();
            ss.sort_unstable();
            ss.dedup();
            let mx = *ss.last().unwrap_or(&1);
            let all_p = predict_all(mx, m, fit, per_session);
            PlanCurve {
                luns: m,
                predicted: ss
                    .iter()
                    .map(|&n| {
                        let (x, r) = all_p[n as usize - 1];
                        CurveAt {
                            sessions: n,
                            iops: x,
                            p99_ns: p99_at(r * 1e9, &curve),
                            from: "model".into(),
                        }
                    })
                    .collect(),
                measured,
            }
        })
        .collect();

    let mut notes = vec![format!(
        "The model assumes each LUN behaves as the measured one{} and that what is behind the \
         LUNs (array, ports) has room for all of them: a curve measured on {b} {} cannot show \
         the array's own limit; runs at more LUNs (`run --target … --target …`) or \
         `plan --verify` can.",
        if b == 1 { "" } else { "s" },
        lun_word(b)
    )];
    notes.push(format!(
        "The model reproduces the curve it was fitted to within {} % (largest IOPS error).",
        sig3(fit_error * 100.0)
    ));
    if !per_session {
        notes.push(
            "Striping in allocation units sends each I/O to a LUN at random, so the LUNs' \
             queues are uneven: the model counts that (per-session placement, `--stripe \
             per-session`, needs fewer sessions for the same IOPS)."
                .into(),
        );
    }
    let depth_from = format!("the LUN queue, to a whole number: {}", model.lun_queue.from);
    Ok(Plan {
        goal: goal.clone(),
        inputs: used,
        in_flight: Sourced::new(
            in_flight,
            "requests",
            format!(
                "Little's law: {} IOPS × {} (mean of the latency histogram at the point that \
                 meets the p99 at the highest IOPS per LUN: {}; its p50 {}, p99 {})",
                fmt_rate(goal.iops),
                fmt_ns(op_hist_mean),
                at(&op),
                fmt_ns(op.p50_ns),
                fmt_ns(op.p99_ns)
            ),
        ),
        in_flight_p99: Sourced::new(
            slots,
            "requests",
            format!(
                "99th percentile of a Poisson count of mean {} (in flight in an M/G/∞ system)",
                sig3(in_flight)
            ),
        ),
        operating_point: op,
        luns: Sourced::new(
            luns as f64,
            "LUNs",
            format!(
                "fewest LUNs at which the model reaches {} IOPS within a p99 of {}",
                fmt_rate(goal.iops),
                fmt_ns(goal.p99_ns)
            ),
        ),
        lun_queue_depth: Sourced::new(depth as f64, "requests", depth_from),
        sessions: Sourced::new(
            sessions as f64,
            "sessions",
            format!(
                "fewest sessions at which the model reaches the goal on {luns} {} (each session \
                 one single-block read at a time)",
                lun_word(luns)
            ),
        ),
        predicted_iops: Sourced::new(x, "IOPS", model_from.clone()),
        predicted_p99_ns: Sourced::new(
            p99,
            "ns",
            format!(
                "the measured curve's p99 at the predicted mean latency {} (p99 against mean, \
                 interpolated)",
                fmt_ns((sessions as f64 / x - z) * 1e9)
            ),
        ),
        model,
        settings,
        checks,
        beyond,
        curves,
        verify: None,
        notes,
    })
}

/// The host settings of the plan: the block layer's request count and the driver's per-LUN
/// queue depth, where the driver is known.
fn host_settings(driver: &str, device: &str, depth: u32, sessions: u32) -> Vec<HostSetting> {
    let dev = if device.is_empty() { "DEV" } else { device };
    let nr = linux_nr_requests(depth).max(depth);
    let mut out = Vec::new();
    // A loop device's nr_requests is its own queue (below): no second line for it.
    out.extend((driver != "loop").then(|| HostSetting {
        name: "nr_requests".into(),
        value: nr.to_string(),
        how: format!("echo {nr} > /sys/block/{dev}/queue/nr_requests (each LUN's disk)"),
        why: format!(
            "at least the LUN queue depth {depth}; Linux's own default for a queue of depth \
             {depth} with a scheduler is 2 × min({depth}, 128) = {}",
            linux_nr_requests(depth)
        ),
    }));
    let (name, how, why) = match driver {
        "lpfc" => (
            "lpfc_lun_queue_depth",
            format!("options lpfc lpfc_lun_queue_depth={depth} (/etc/modprobe.d, then rebuild the initramfs)"),
            "Emulex lpfc's per-LUN queue depth (default 30)",
        ),
        "qla2xxx" => (
            "ql2xmaxqdepth",
            format!("options qla2xxx ql2xmaxqdepth={depth} (/etc/modprobe.d, then rebuild the initramfs)"),
            "QLogic qla2xxx's per-LUN queue depth (default 32)",
        ),
        "nvme" => (
            "io_queue_depth",
            format!("nvme.io_queue_depth={} (kernel command line or modprobe.d)", depth.max(2)),
            "NVMe I/O queue depth per hardware queue (default 1024): already above any LUN \
             depth unless lowered",
        ),
        "virtio_blk" => (
            "virtqueue size",
            format!(
                "virtio_blk.queue_depth={depth} and the hypervisor's virtqueue size ≥ {depth} \
                 (QEMU -device virtio-blk-pci,queue-size=N)"
            ),
            "virtio-blk takes at most the virtqueue's entries (half without indirect \
             descriptors)",
        ),
        "loop" => (
            "nr_requests",
            format!("echo {depth} > /sys/block/{dev}/queue/nr_requests (scheduler none: the tags)"),
            "a loop device's queue is its tags (module hw_queue_depth, default 128)",
        ),
        "" => (
            "LUN queue depth",
            format!("set the HBA driver's per-LUN queue depth to {depth}"),
            "the driver of the measured disk is not known (results without it)",
        ),
        other => (
            "queue_depth",
            format!("echo {depth} > /sys/block/{dev}/device/queue_depth (driver {other})"),
            "the SCSI device's queue depth",
        ),
    };
    out.push(HostSetting {
        name: name.into(),
        value: depth.to_string(),
        how,
        why: format!("{why}; {depth} from the LUN queue of the model"),
    });
    out.push(HostSetting {
        name: "database sessions".into(),
        value: sessions.to_string(),
        how: "sessions (connections) doing the single-block reads, e.g. SLOB's".into(),
        why: "the model's session count for the goal".into(),
    });
    out
}

#[allow(clippy::too_many_arguments)]
fn vendor_checks(
    goal: &PlanGoal,
    luns: u32,
    depth: u32,
    sessions: u32,
    info: Option<&TargetInfo>,
    fit: Fit,
    per_session: bool,
    curve: &[LoadPoint],
) -> Vec<VendorCheck> {
    let initiators = goal.hosts.max(1) * goal.paths.max(1);
    let mut out = Vec::new();
    let port = match goal.port_queue {
        Some(pq) => {
            let limit = pq as f64 / (initiators * luns) as f64;
            let holds = depth as f64 <= limit;
            VendorCheck {
                rule: "array port queue".into(),
                formula: format!(
                    "LUN depth ≤ port queue ÷ (initiators × LUNs) = {pq} ÷ ({initiators} × {luns})"
                ),
                limit: Some(limit),
                planned: depth as f64,
                holds: Some(holds),
                says: if holds {
                    format!("{depth} per LUN fits the port's {pq} with {initiators} initiator(s)")
                } else {
                    format!(
                        "{depth} per LUN × {luns} LUNs × {initiators} initiator(s) = {} \
                         exceeds the port's {pq}: at full load the port answers QUEUE FULL",
                        depth * luns * initiators
                    )
                },
            }
        }
        None => VendorCheck {
            rule: "array port queue".into(),
            formula: "LUN depth ≤ port queue ÷ (initiators × LUNs)".into(),
            limit: None,
            planned: depth as f64,
            holds: None,
            says: format!(
                "not checked: give --port-queue (the array port's queue; {} initiator(s) from \
                 --hosts × --paths)",
                initiators
            ),
        },
    };
    out.push(port);
    let nr_now = info.and_then(|i| i.nr_requests);
    let sched = info.map(|i| i.active_scheduler()).unwrap_or("");
    out.push(VendorCheck {
        rule: "Linux nr_requests".into(),
        formula: format!(
            "nr_requests = 2 × min(depth, 128) = {} with a scheduler; it must be ≥ the LUN depth",
            linux_nr_requests(depth)
        ),
        limit: nr_now.map(f64::from),
        planned: depth as f64,
        holds: nr_now.map(|n| n >= depth),
        says: match nr_now {
            Some(n) if n >= depth => {
                format!("the measured disk's nr_requests {n} holds a depth of {depth}")
            }
            Some(n) => format!(
                "the measured disk's nr_requests {n} is below the depth {depth}: the block layer \
                 would cap each LUN at {n}; raise it (scheduler {})",
                if sched.is_empty() { "?" } else { sched }
            ),
            None => "not checked: the results do not record nr_requests".into(),
        },
    });
    let half = Fit {
        q: (fit.q / 2.0).max(1.0),
        ..fit
    };
    let (xh, rh) = predict(sessions, luns, half, per_session);
    let p99h = p99_at(rh * 1e9, curve);
    let holds = xh >= goal.iops && p99h <= goal.p99_ns;
    out.push(VendorCheck {
        rule: "VMware adaptive queue depth".into(),
        formula: format!(
            "on QUEUE FULL ESXi halves a LUN's depth: {depth} → {}",
            (depth / 2).max(1)
        ),
        limit: Some(xh),
        planned: goal.iops,
        holds: Some(holds),
        says: format!(
            "at half depth the model gives {} IOPS at p99 {}: the goal {}",
            fmt_rate(xh),
            fmt_ns(p99h),
            if holds { "still holds" } else { "breaks" }
        ),
    });
    out
}

/// What the measured curve says beyond the plan: its knee, its USL peak, the host's CPU.
fn beyond(
    curve: &[LoadPoint],
    b: u32,
    luns: u32,
    fit: Fit,
    per_session: bool,
    r: &Results,
    top: &LoadPoint,
) -> Vec<Sourced> {
    let mut out = Vec::new();
    let cps: Vec<CurvePoint> = curve
        .iter()
        .map(|p| CurvePoint {
            run: p.run,
            sessions: p.sessions,
            qd: 1,
            iops: p.iops,
            mean_ns: p.mean_ns,
            p50_ns: p.p50_ns as u64,
            p99_ns: p.p99_ns as u64,
            ..Default::default()
        })
        .collect();
    if let Some(k) = super::find_knee(&cps) {
        out.push(Sourced::new(
            k.iops,
            "IOPS",
            format!(
                "knee of the measured curve ({b} LUN{}): {} sessions, {} IOPS at p99 {} ({}): \
                 past it more sessions buy queueing",
                if b == 1 { "" } else { "s" },
                k.sessions,
                fmt_rate(k.iops),
                fmt_ns(k.p99_ns as f64),
                k.method
            ),
        ));
    } else {
        out.push(Sourced::new(
            top.iops,
            "IOPS",
            format!(
                "no knee: the measured curve still gained at its last point ({}); the LUN \
                 queue may be larger than the model's",
                at(top)
            ),
        ));
    }
    let pts: Vec<(f64, f64)> = curve.iter().map(|p| (p.sessions as f64, p.iops)).collect();
    if let Some(u) = super::fit_usl(&pts) {
        if let (Some(n), Some(x)) = (u.peak_n, u.peak_x) {
            out.push(Sourced::new(
                x * luns as f64 / b as f64,
                "IOPS",
                format!(
                    "USL fit of the measured curve (σ {}, κ {}): peak {} IOPS at {} sessions on \
                     {b} LUN{}, so about {} IOPS at {} sessions on {luns}",
                    sig3(u.sigma),
                    sig3(u.kappa),
                    fmt_rate(x),
                    sig3(n),
                    if b == 1 { "" } else { "s" },
                    fmt_rate(x * luns as f64 / b as f64),
                    sig3(n * luns as f64 / b as f64)
                ),
            ));
        }
    }
    let sat = luns as f64 * fit.q / fit.s;
    let (x2, _) = predict(
        ((sat * (fit.s + fit.z) * 2.0).ceil() as u32 + 1).min(4096),
        luns,
        fit,
        per_session,
    );
    out.push(Sourced::new(
        sat,
        "IOPS",
        format!(
            "ceiling of {luns} LUN{}: {luns} × {} requests ÷ {} service; the model gives {} IOPS \
             with twice the sessions that would fill it, at a higher latency",
            if luns == 1 { "" } else { "s" },
            sig3(fit.q),
            fmt_ns(fit.s * 1e9),
            fmt_rate(x2)
        ),
    ));
    if let Some(c) = &r.calibration {
        if let Some(p) = c
            .curve
            .iter()
            .find(|c| c.run == top.run)
            .filter(|c| c.cpu_us_per_io > 0.0)
        {
            let cpus = r.environment.cpus.max(1) as f64;
            out.push(Sourced::new(
                cpus * 1e6 / p.cpu_us_per_io,
                "IOPS",
                format!(
                    "host CPU ceiling of iolens' own I/O path: {} CPUs ÷ {} µs of CPU per I/O \
                     ({}); a database spends more per I/O",
                    cpus,
                    sig3(p.cpu_us_per_io),
                    at(top)
                ),
            ));
        }
    }
    out
}

/// The `--verify` run beside the plan's prediction.
pub fn verify(p: &Plan, run: &RunResult, index: usize) -> PlanVerify {
    let h = run.merged_io_hist().ok().filter(|h| !h.is_empty());
    let measured_p99 = h.map_or(0.0, |h| h.value_at_quantile(0.99) as f64);
    let measured_iops = if run.rates_known() { run.iops() } else { 0.0 };
    let rel = |m: f64, pr: f64| if pr > 0.0 { m / pr - 1.0 } else { 0.0 };
    PlanVerify {
        run: index,
        luns: p.luns.value as u32,
        sessions: p.sessions.value as u32,
        stripe: p.goal.stripe.clone(),
        predicted_iops: p.predicted_iops.value,
        measured_iops,
        predicted_p99_ns: p.predicted_p99_ns.value,
        measured_p99_ns: measured_p99,
        iops_error: rel(measured_iops, p.predicted_iops.value),
        p99_error: rel(measured_p99, p.predicted_p99_ns.value),
        goal_met: measured_iops >= p.goal.iops
            && measured_p99 > 0.0
            && measured_p99 <= p.goal.p99_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Fit = Fit {
        s: 0.004,
        q: 4.0,
        z: 0.0,
    };

    #[test]
    fn one_lun_goes_flat_at_its_queue_and_more_luns_relieve_it() {
        // 4 requests at a time, 4 ms each: 1000 IOPS whatever the sessions beyond 4.
        let x = mva(16, 1, F, f64::INFINITY);
        assert!((x[0] - 250.0).abs() < 1e-6, "{x:?}");
        assert!((x[3] - 1000.0).abs() < 1e-6);
        assert!((x[15] - 1000.0).abs() < 1e-6);
        // Per session, 4 LUNs × 4 sessions: each LUN full, 4000.
        let (x4, r4) = predict(16, 4, F, true);
        assert!((x4 - 4000.0).abs() < 1e-6 && (r4 - 0.004).abs() < 1e-9);
        // Striped at random the queues are uneven: less, and more than one LUN's.
        let (xu, _) = predict(16, 4, F, false);
        assert!(xu > 2500.0 && xu < 3200.0, "{xu}");
    }

    #[test]
    fn poisson_quantile() {
        assert_eq!(poisson_p99(0.0), 0.0);
        // P(X ≤ 3 | m = 1) = 0.981, P(X ≤ 4) = 0.996.
        assert_eq!(poisson_p99(1.0), 4.0);
        assert!((poisson_p99(10_000.0) - 10_233.0).abs() <= 1.0);
    }

    /// Each known driver gets its own per-LUN queue parameter set to the plan's depth; the
    /// block layer's request count is raised to hold it (a loop device's is its queue).
    #[test]
    fn each_known_driver_gets_its_own_queue_parameter() {
        for (driver, param, how) in [
            ("lpfc", "lpfc_lun_queue_depth", "lpfc_lun_queue_depth=8"),
            ("qla2xxx", "ql2xmaxqdepth", "ql2xmaxqdepth=8"),
            ("nvme", "io_queue_depth", "nvme.io_queue_depth=8"),
            ("virtio_blk", "virtqueue size", "virtio_blk.queue_depth=8"),
            (
                "loop",
                "nr_requests",
                "echo 8 > /sys/block/sdq/queue/nr_requests",
            ),
            (
                "sd",
                "queue_depth",
                "echo 8 > /sys/block/sdq/device/queue_depth",
            ),
        ] {
            let h = host_settings(driver, "sdq", 8, 24);
            let names: Vec<&str> = h.iter().map(|x| x.name.as_str()).collect();
            let d = h.iter().find(|x| x.name == param).unwrap();
            assert_eq!(d.value, "8", "{driver}");
            assert!(d.how.contains(how), "{driver}: {}", d.how);
            // nr_requests: 2 × min(8, 128) = 16 ≥ 8, once (a loop device's queue is its own).
            let nr: Vec<_> = h.iter().filter(|x| x.name == "nr_requests").collect();
            assert_eq!(nr.len(), 1, "{driver}: {names:?}");
            if driver != "loop" {
                assert_eq!(nr[0].value, "16", "{driver}");
            }
            assert_eq!(h.last().unwrap().value, "24", "{driver}: sessions");
        }
    }

    /// The port-queue formula holds where LUN depth × LUNs × initiators fits the port and
    /// breaks one request beyond; nr_requests below the depth breaks its check; halving the
    /// depth (VMware on QUEUE FULL) breaks a goal that needs the full queue and not one that
    /// a quarter of the LUNs' capacity meets.
    #[test]
    fn vendor_formulas_hold_and_break_where_the_arithmetic_says() {
        let goal = |iops: f64, port_queue| PlanGoal {
            iops,
            p99_ns: 1e9,
            hosts: 2,
            paths: 2,
            port_queue: Some(port_queue),
            lun_queue: None,
            stripe: "per-session".into(),
        };
        let curve: Vec<LoadPoint> = [(1u32, 4e6), (4, 4e6), (16, 16e6)]
            .iter()
            .map(|&(sessions, mean_ns)| LoadPoint {
                file: "cal.json".into(),
                run: 0,
                luns: 1,
                sessions,
                iops: 1e9 / mean_ns * sessions.min(4) as f64,
                mean_ns,
                p50_ns: mean_ns,
                p99_ns: 2.0 * mean_ns,
            })
            .collect();
        let info = |nr| TargetInfo {
            nr_requests: Some(nr),
            ..TargetInfo::default()
        };
        // 4 initiators × 4 LUNs × depth 4 = 64: fits a port queue of 64, not of 63.
        let check =
            |g: &PlanGoal, nr: u32| vendor_checks(g, 4, 4, 16, Some(&info(nr)), F, true, &curve);
        let fits = check(&goal(1000.0, 64), 8);
        assert_eq!(fits[0].holds, Some(true), "{:?}", fits[0]);
        assert_eq!(fits[0].limit, Some(4.0));
        let over = check(&goal(1000.0, 63), 8);
        assert_eq!(over[0].holds, Some(false), "{:?}", over[0]);
        assert!(
            over[0].says.contains("64 exceeds the port's 63"),
            "{}",
            over[0].says
        );
        // nr_requests 8 holds a depth of 4; 3 does not.
        assert_eq!(fits[1].holds, Some(true));
        assert_eq!(check(&goal(1000.0, 64), 3)[1].holds, Some(false));
        // 4 LUNs of 4 at 4 ms serve 4000 IOPS; at half depth (2) 2000: a goal of 3000 breaks,
        // one of 1000 still holds.
        assert_eq!(check(&goal(3000.0, 64), 8)[2].holds, Some(false));
        assert_eq!(fits[2].holds, Some(true));
        assert!(
            (fits[2].limit.unwrap() - 2000.0).abs() < 1.0,
            "{:?}",
            fits[2]
        );
    }

    /// What the curve says beyond the plan, on curves whose shape is known by construction:
    /// one that follows the USL with σ 0.05, κ 0.01 (peak at √(0.95 / 0.01) = 9.75 sessions)
    /// has a knee and its USL peak, scaled to the plan's LUNs; one that grows in proportion
    /// to its sessions (constant latency) has no knee and no peak. Both name the ceiling of
    /// the plan's LUNs (2 × 4 requests ÷ 4 ms = 2000 IOPS).
    #[test]
    fn beyond_names_the_knee_and_usl_peak_of_a_curve_that_has_them_and_not_of_one_without() {
        let point = |sessions: u32, iops: f64| LoadPoint {
            file: "cal.json".into(),
            run: sessions as usize,
            luns: 1,
            sessions,
            iops,
            mean_ns: sessions as f64 / iops * 1e9,
            p50_ns: sessions as f64 / iops * 1e9,
            p99_ns: 3.0 * sessions as f64 / iops * 1e9,
        };
        let usl = |n: f64| 1000.0 * n / (1.0 + 0.05 * (n - 1.0) + 0.01 * n * (n - 1.0));
        let r = Results::new(Kind::Calibrate, Vec::new());
        let bent: Vec<LoadPoint> = (1..=16).map(|n| point(n, usl(n as f64))).collect();
        let top = bent
            .iter()
            .max_by(|a, b| a.iops.total_cmp(&b.iops))
            .unwrap();
        let said = beyond(&bent, 1, 2, F, true, &r, top);
        let find = |v: &[Sourced], w: &str| v.iter().find(|x| x.from.contains(w)).cloned();
        let knee = find(&said, "knee of the measured curve").expect("a knee");
        assert!(knee.value <= top.iops, "{knee:?}");
        let peak = find(&said, "USL fit").expect("a USL peak");
        let peak_x = usl(95f64.sqrt());
        assert!(
            (peak.value / (2.0 * peak_x) - 1.0).abs() < 0.02,
            "{peak:?} for 2 × {peak_x}"
        );
        let ceiling = find(&said, "ceiling of 2 LUNs").expect("the ceiling");
        assert!((ceiling.value - 2000.0).abs() < 1e-6, "{ceiling:?}");
        let straight: Vec<LoadPoint> = (1..=16).map(|n| point(n, 250.0 * n as f64)).collect();
        let top = straight.last().unwrap();
        let said = beyond(&straight, 1, 2, F, true, &r, top);
        assert!(find(&said, "no knee").is_some(), "{said:?}");
        assert!(find(&said, "knee of the measured curve").is_none());
        assert!(find(&said, "USL fit").is_none(), "{said:?}");
        assert!(find(&said, "ceiling of 2 LUNs").is_some());
    }

    #[test]
    fn linux_default_request_count() {
        assert_eq!(linux_nr_requests(30), 60);
        assert_eq!(linux_nr_requests(1024), 256);
    }
}
