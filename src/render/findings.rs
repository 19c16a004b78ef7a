//! Analysis results as the renderers draw them: mode bands and their description, a run's
//! verdicts, the knee of the calibration curve. Shared by [`super::terminal`], [`super::html`]
//! and [`super::table`] so that none of them borrows from another.

use hdrhistogram::Histogram;

use super::svg::Band;
use crate::analysis::{describe, find_knee, find_modes_with_edges, run_verdicts};
use crate::results::{Results, RunResult};
use crate::units::{fmt_ns, fmt_rate, sig3};

/// Modes of a latency histogram (`analysis::modes`) as shaded bands where the histogram bars
/// are (values as the model holds them: bucketed sources were spread once, at ingest), and
/// their one-line description.
pub(crate) fn mode_bands(h: &Histogram<u64>, edges: &[u64]) -> (Vec<Band>, String) {
    let modes = find_modes_with_edges(h, edges);
    let bands = modes
        .iter()
        .map(|m| Band {
            low_ns: m.low_ns,
            high_ns: m.high_ns,
            label: format!("mode {} ({}%)", fmt_ns(m.centre_ns), sig3(m.share * 100.0)),
        })
        .collect();
    (bands, describe(&modes))
}

/// Verdicts on a run (`analysis::verdicts`): (severity, message).
pub(crate) fn verdicts(run: &RunResult) -> Vec<(String, String)> {
    run_verdicts(run)
        .into_iter()
        .map(|v| (v.severity, v.message))
        .collect()
}

/// The knee of the calibration curve (`analysis::knee`): curve index and a label.
pub(crate) fn knee_of(r: &Results) -> Option<(usize, String)> {
    let c = r.calibration.as_ref()?;
    let k = find_knee(&c.curve)?;
    Some((
        k.index,
        format!("knee: {} IOPS, {} sessions", fmt_rate(k.iops), k.sessions),
    ))
}
