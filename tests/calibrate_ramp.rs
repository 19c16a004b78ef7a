//! Calibration ramps never stop on one noisy step, report the best value observed, and flag
//! headline figures that contradict each other (issue 11, item 12). Pure decision logic driven
//! by step sequences, including the one a default calibration produced on the development VM.

mod common;

use common::drive;
use iolens::analysis::ramp::{Ramp, SeqRamp, PLATEAU_STEPS};
use iolens::analysis::verdicts::calibration::contradictions;
use iolens::calibrate::StopReason;

const MS: f64 = 1e6;

/// Feed a sequential ramp (queue depths 1, 2, 4, …) until it stops; returns the steps taken.
fn seq(mbs: &[f64]) -> SeqRamp {
    let mut r = SeqRamp::new(0.05);
    for (i, &m) in mbs.iter().enumerate() {
        if !r.record(1 << i, m) {
            break;
        }
    }
    r
}

#[test]
fn one_noisy_sequential_step_does_not_stop_the_ramp() {
    // The reported run: QD1 989 MB/s, QD2 a noisy 950, then the device's real climb.
    let r = seq(&[989.0, 950.0, 1800.0, 2300.0, 2350.0, 2340.0, 2500.0]);
    assert_eq!(r.steps.len(), 6, "{:?}", r.steps);
    assert_eq!(r.best(), Some((16, 2350.0)), "best observed, not the last");
    // The old rule stopped after QD2 and reported 989 MB/s.
    assert!(r.best().unwrap().1 > 2000.0);
}

#[test]
fn a_real_plateau_stops_after_it_persists() {
    assert_eq!(PLATEAU_STEPS, 2);
    // Growth, then two steps within 5 % of the best: stop, best is the peak.
    let r = seq(&[500.0, 900.0, 1500.0, 1520.0, 1490.0, 3000.0]);
    assert_eq!(r.steps.len(), 5);
    assert_eq!(r.best(), Some((8, 1520.0)));
    // A flat step followed by real growth resets the count.
    let r = seq(&[500.0, 510.0, 900.0, 905.0, 1200.0, 1210.0, 1215.0]);
    assert_eq!(r.steps.len(), 7, "{:?}", r.steps);
    assert_eq!(r.best(), Some((64, 1215.0)));
    // Falling after a peak: still the peak, and the fall (50 %) stops the ramp at once.
    let r = seq(&[2000.0, 1000.0, 900.0]);
    assert_eq!(r.best(), Some((1, 2000.0)));
    assert_eq!(r.steps.len(), 2);
}

#[test]
fn session_ramp_rides_out_one_noisy_step() {
    // IOPS doubles with sessions up to 16, except a noisy dip at 4 sessions.
    let r = drive(Ramp::new(64, 5.0 * MS, 0.05, 2), |n| {
        let iops = n.min(16) as f64 * 1000.0;
        (if n == 4 { 1900.0 } else { iops }, 0.5 * MS)
    });
    let sessions: Vec<u32> = r.steps.iter().map(|s| s.0).collect();
    assert_eq!(sessions, vec![1, 2, 4, 8, 16, 32, 64], "{sessions:?}");
    assert_eq!(r.stop, Some(StopReason::Plateau));
    assert_eq!(r.best(), Some((16, 16_000.0)));
}

#[test]
fn contradicting_headlines_are_flagged() {
    // Many streams below one stream: impossible by definition.
    let w = contradictions(Some((1, 989.0)), Some((8, 2033.0)), None, 5.0 * MS, 99.0);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].message.contains("many streams reached 989 MB/s"),
        "{:?}",
        w[0]
    );
    assert!(
        w[0].message.contains("one stream reached 2033 MB/s"),
        "{:?}",
        w[0]
    );
    // Consistent figures: nothing.
    assert!(contradictions(
        Some((4, 2500.0)),
        Some((8, 2033.0)),
        Some(4.0 * MS),
        5.0 * MS,
        99.0
    )
    .is_empty());
    // A chosen step at p95 ≤ 5 ms whose p99 is 40 ms.
    let w = contradictions(None, None, Some(40.0 * MS), 5.0 * MS, 95.0);
    assert_eq!(w.len(), 1);
    assert!(
        w[0].message.contains("its p99 is 40 ms (8.0× the target)"),
        "{:?}",
        w[0]
    );
}

/// Issue 24 item 4: `--help` says the ramp stops when IOPS stops growing, yet a ramp went on
/// after IOPS fell. A fall beyond noise (more than twice the plateau threshold below the best
/// step) stops it at once; a dip within that still rides out (above).
#[test]
fn a_ramp_stops_when_iops_falls_past_the_peak() {
    let r = drive(Ramp::new(64, 5.0 * MS, 0.05, 2), |n| {
        let iops = match n {
            1 => 1000.0,
            2 => 1900.0,
            4 => 3600.0,
            _ => 2900.0, // 19 % below the best: past the peak
        };
        (iops, 0.5 * MS)
    });
    let sessions: Vec<u32> = r.steps.iter().map(|s| s.0).collect();
    assert_eq!(sessions, vec![1, 2, 4, 8], "{sessions:?}");
    assert_eq!(r.stop, Some(StopReason::Fell));
    assert_eq!(r.best(), Some((4, 3600.0)));
    // The sequential ramps follow the same rule.
    let r = seq(&[500.0, 1000.0, 1800.0, 1500.0, 2500.0]);
    assert_eq!(r.steps.len(), 4, "{:?}", r.steps);
    assert_eq!(r.best(), Some((4, 1800.0)));
}
