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
        // The band is where the mode's values typically are (centre ×/÷ its spread), within the
        // values attributed to it: `low_ns..high_ns` reach out to the valleys, or to the ends
        // of the histogram, which would draw one mode across the whole axis.
        .map(|m| Band {
            low_ns: (m.centre_ns / m.spread.max(1.0)).max(m.low_ns),
            high_ns: (m.centre_ns * m.spread.max(1.0)).min(m.high_ns),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::analysis::Mode;

    #[test]
    fn a_band_covers_where_the_mode_is_not_the_whole_axis() {
        // Values attributed to the mode reach from 85 µs to 5 ms (valley to histogram end);
        // they are typically within ×/÷ 1.3 of 100 µs.
        let m = Mode {
            centre_ns: 100e3,
            low_ns: 85e3,
            high_ns: 5e6,
            spread: 1.3,
            share: 0.9,
            count: 900,
            valley_below: None,
        };
        let b = mode_bands(&OpModes {
            op: "read".into(),
            modes: vec![m],
            description: String::new(),
        });
        assert_eq!(b[0].low_ns, 85e3);
        assert!((b[0].high_ns - 130e3).abs() < 1.0, "{}", b[0].high_ns);
        assert_eq!(b[0].label, "mode 100 µs (90%)");
    }
}
