//! Stored analysis as the renderers draw it: mode bands, a run's verdicts, the knee of the
//! calibration curve. Reads only the typed [`Analysis`] of the results model (recomputed for
//! older files by `analysis::of`); shared by [`super::terminal`], [`super::html`],
//! [`super::table`] and [`super::markdown`] so that none of them borrows from another.

use super::svg::Band;
use crate::results::analysis::{Analysis, OpModes};
use crate::units::{fmt_ns, fmt_rate, sig3};

/// Modes of a latency histogram as shaded bands where the histogram bars are (values as the
/// model holds them: bucketed sources were spread once, at ingest).
pub(crate) fn mode_bands(modes: &OpModes) -> Vec<Band> {
    modes
        .modes
        .iter()
        .map(|m| Band {
            low_ns: m.low_ns,
            high_ns: m.high_ns,
            label: format!("mode {} ({}%)", fmt_ns(m.centre_ns), sig3(m.share * 100.0)),
        })
        .collect()
}

/// Verdicts on run `run`: (severity, message).
pub(crate) fn verdicts(an: &Analysis, run: usize) -> Vec<(String, String)> {
    an.runs
        .get(run)
        .map(|a| {
            a.verdicts
                .iter()
                .map(|v| (v.severity.to_string(), v.message.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The knee of the calibration curve: curve index and a label.
pub(crate) fn knee_of(an: &Analysis) -> Option<(usize, String)> {
    let k = an.calibration.as_ref()?.knee.as_ref()?;
    Some((
        k.index,
        format!("knee: {} IOPS, {} sessions", fmt_rate(k.iops), k.sessions),
    ))
}
