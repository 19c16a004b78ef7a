//! The verdicts of a calibration: the run verdicts of its chosen step, headline figures that
//! contradict each other or the target, skipped steps, and a cluster's notes on its merged
//! curve. `calibrate` and `merge` measure and sum; what is said is decided here.

use super::{run_verdicts_with, Severity, Verdict, VerdictKind};
use crate::results::{CurvePoint, RunResult};
use crate::units::{fmt_bytes, fmt_ns, fmt_rate, sig3};

/// A chosen step's p99 more than this many times the latency target is flagged.
pub const P99_FAR_FACTOR: f64 = 2.0;

/// Headline results that contradict each other or the target, as warnings: many streams
/// slower than one stream (impossible by definition: the many-streams ramp did not find its
/// peak), and a chosen max-IOPS step whose p99 is far above the latency target (when the
/// target is on a lower percentile). `seq`/`seq1` are (queue depth, MB/s); `chosen_p99_ns` the
/// p99 of the max-IOPS step.
pub fn contradictions(
    seq: Option<(u32, f64)>,
    seq1: Option<(u32, f64)>,
    chosen_p99_ns: Option<f64>,
    target_ns: f64,
    percentile: f64,
) -> Vec<Verdict> {
    let mut out = Vec::new();
    if let (Some((qd, many)), Some((qd1, one))) = (seq, seq1) {
        if many < one {
            out.push(Verdict::new(
                VerdictKind::Contradiction,
                Severity::Warning,
                format!(
                    "contradiction: many streams reached {many:.0} MB/s (queue depth {qd} per stream) \
                     but one stream reached {one:.0} MB/s (queue depth {qd1}); many streams can do at \
                     least what one does, so the many-streams figure is too low (noise, or a ramp \
                     cut short by the budget): take {one:.0} MB/s as the lower bound and repeat with \
                     a longer --budget"
                ),
                &[
                    ("many_streams_mb_per_s", many),
                    ("many_streams_qd", qd as f64),
                    ("one_stream_mb_per_s", one),
                    ("one_stream_qd", qd1 as f64),
                ],
            ));
        }
    }
    if let Some(p99) = chosen_p99_ns {
        if p99 > P99_FAR_FACTOR * target_ns {
            out.push(Verdict::new(
                VerdictKind::TailBeyondTarget,
                Severity::Warning,
                format!(
                    "the max-IOPS step meets p{} ≤ {} but its p99 is {} ({:.1}× the target): the tail \
                     above p{} is far slower than the target suggests",
                    sig3(percentile),
                    fmt_ns(target_ns),
                    fmt_ns(p99),
                    p99 / target_ns,
                    sig3(percentile)
                ),
                &[
                    ("p99_ns", p99),
                    ("target_ns", target_ns),
                    ("percentile", percentile),
                ],
            ));
        }
    }
    out
}

/// The run verdicts of the calibration's chosen step, each led by where it was measured: the
/// max-IOPS step (`best`, an index into `curve`), or without one the curve's first step.
/// `runs` are the calibration's steps, indexed by [`CurvePoint::run`]; `target` the calibrated
/// target (its request queue, its device's link: see [`super::run_verdicts_with`]).
pub fn chosen_step(
    runs: &[RunResult],
    curve: &[CurvePoint],
    best: Option<usize>,
    target: Option<&crate::results::TargetInfo>,
) -> Vec<Verdict> {
    let (p, where_) = match best {
        Some(p) => (
            &curve[p],
            format!("at max IOPS ({} sessions)", curve[p].sessions),
        ),
        None => match curve.first() {
            Some(c) => (c, format!("at {} session(s)", c.sessions)),
            None => return Vec::new(),
        },
    };
    run_verdicts_with(&runs[p.run], target)
        .into_iter()
        .map(|v| at_step(v, where_.clone(), p.sessions))
        .collect()
}

/// A run's verdict as reported for one calibration step: `where_` leads its message and the
/// step's sessions join its figures.
fn at_step(mut v: Verdict, where_: String, sessions: u32) -> Verdict {
    v.message = format!("{where_}: {}", v.message);
    v.figures.insert("sessions".into(), sessions as f64);
    v
}

/// A commit-write step of `size` bytes not run: below the device's logical block size `lbs`.
pub fn step_skipped(size: u64, lbs: u64) -> Verdict {
    Verdict::new(
        VerdictKind::StepSkipped,
        Severity::Info,
        format!(
            "commit writes of {} skipped: below the device's {} B logical block size",
            fmt_bytes(size),
            lbs
        ),
        &[
            ("size_bytes", size as f64),
            ("logical_block_size", lbs as f64),
        ],
    )
}

/// The notes of a cluster's calibration merged from `ranks` ranks: how it was summed, and its
/// max IOPS at p`percentile` ≤ `target_ns` (`best`: the merged curve's point, if any met it).
pub fn cluster(
    ranks: u32,
    percentile: f64,
    target_ns: u64,
    best: Option<&CurvePoint>,
) -> Vec<Verdict> {
    let note = |message: String, figures: &[(&str, f64)]| {
        Verdict::new(VerdictKind::Note, Severity::Info, message, figures)
    };
    let mut verdicts = vec![note(
        format!(
            "cluster of {ranks} rank(s): IOPS summed over ranks in the window where all measured, \
             latency percentiles from the exactly merged histograms"
        ),
        &[("ranks", ranks as f64)],
    )];
    if let Some(b) = best {
        verdicts.push(note(
            format!(
                "max IOPS at p{} ≤ {}: {} with {} sessions in all",
                percentile,
                fmt_ns(target_ns as f64),
                fmt_rate(b.iops),
                b.sessions
            ),
            &[("max_iops", b.iops), ("sessions", b.sessions as f64)],
        ));
    }
    verdicts
}
