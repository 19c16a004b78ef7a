//! The live view of `iolens watch` on a terminal: one frame per interval, the layer's heatmaps
//! and one line per interval under a header, each line at most 80 columns.

use hdrhistogram::Histogram;

use super::heatmap::{HeatKind, OpSeries};
use super::TermStyle;
use crate::results::analysis::{VerdictKind, WatchShares};
use crate::units::{fmt_ns, sig3};

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// A verdict kind for the live view's line: at most 13 columns, so the line fits 80.
fn verdict_live(k: Option<VerdictKind>) -> &'static str {
    match k {
        Some(VerdictKind::AboveBlockLayer) => "above block",
        k => super::watch::verdict_short(k),
    }
}

/// The header of the live view's lines, its columns aligned with [`interval_line`]'s: thread
/// time on CPU, waiting for a CPU (runq), in I/O and off CPU; the time in I/O split into the
/// device's service (disk), the host queue and above the block layer; the interval's verdict.
pub(crate) fn live_header() -> String {
    format!(
        "{:>6} {:>8} {:>9} {:>4} {:>4} {:>4} {:>4} │ {:>5} {:>5} {:>5}  verdict",
        "time", "syscalls", "p99", "CPU", "runq", "I/O", "off", "disk", "queue", "above"
    )
}

/// The live view's line for one interval, at most 80 columns; `hist` is the histogram of the
/// heatmap's layer (its p99 is shown).
pub(crate) fn interval_line(s: &WatchShares, hist: &Histogram<u64>) -> String {
    let p99 = if hist.is_empty() {
        "-".to_string()
    } else {
        fmt_ns(hist.value_at_quantile(0.99) as f64)
    };
    format!(
        "{:>5}s {:>8} {:>9} {:>4} {:>4} {:>4} {:>4} │ {:>5} {:>5} {:>5}  {}",
        sig3(s.start_s + s.duration_s),
        s.syscalls,
        p99,
        pct(s.wall_cpu),
        pct(s.wall_cpu_wait),
        pct(s.wall_io),
        pct(s.wall_off_cpu),
        pct(s.device),
        pct(s.host_queue),
        pct(s.above_block),
        verdict_live(s.verdict)
    )
}

/// What one frame of the live view shows.
pub(crate) struct LiveFrame<'a> {
    /// What is watched, in words.
    pub what: &'a str,
    /// The heatmap's layer, in words.
    pub layer: &'a str,
    /// Whether keys switch the layer.
    pub keys: bool,
    /// The layer's recent intervals, newest last (none: no heatmap).
    pub series: Option<&'a OpSeries>,
    /// Every interval's line so far ([`interval_line`]), oldest first.
    pub lines: &'a [String],
    /// The terminal's columns and rows.
    pub size: (usize, usize),
}

/// One frame of the live view: from the top of a cleared screen, what is watched, the layer's
/// heatmaps (both when the terminal is tall enough, else the frequency one; newest interval on
/// the right) and the newest interval lines under their header.
pub(crate) fn live_frame(f: &LiveFrame, style: &TermStyle) -> String {
    let height = f.size.1;
    let mut frame = String::from("\x1b[H\x1b[J");
    frame.push_str(&crate::out::fit(
        &format!("iolens watch: {} (Ctrl-C to stop)", f.what),
        f.size.0,
    ));
    frame.push('\n');
    frame.push_str(&format!(
        "heatmap: {}{}\n",
        f.layer,
        if f.keys {
            " (keys: s syscalls, b block, c run queue)"
        } else {
            ""
        }
    ));
    if let Some(series) = f.series {
        let maps: Vec<String> = [HeatKind::Frequency, HeatKind::Intensity]
            .into_iter()
            .filter_map(|kind| super::terminal::heatmap_text(series, kind, style))
            .collect();
        let tall: usize = maps.iter().map(|m| m.lines().count()).sum();
        for (i, m) in maps.iter().enumerate() {
            if i == 0 || tall + 6 <= height {
                frame.push_str(m);
            }
        }
    }
    let used = frame.lines().count() + 3;
    let keep = height.saturating_sub(used).clamp(3, 30);
    let from = f.lines.len().saturating_sub(keep);
    frame.push_str(&live_header());
    frame.push('\n');
    for l in &f.lines[from..] {
        frame.push_str(l);
        frame.push('\n');
    }
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The live view's lines fit 80 columns at their widest (long intervals, a million
    /// syscalls, a p99 in seconds, every share 100 %, every verdict), and the header's columns
    /// end where the values' do.
    #[test]
    fn live_lines_fit_80_columns() {
        let mut h = crate::histogram::new_histogram();
        crate::histogram::record_ns(&mut h, 12_345_678_901);
        let header = live_header();
        let kinds = [
            None,
            Some(VerdictKind::StorageBound),
            Some(VerdictKind::HostQueueing),
            Some(VerdictKind::AboveBlockLayer),
            Some(VerdictKind::CgroupLimit),
            Some(VerdictKind::CpuBound),
            Some(VerdictKind::NotIo),
        ];
        for v in kinds {
            let s = WatchShares {
                start_s: 86_000.0,
                duration_s: 399.0,
                syscalls: 99_999_999,
                wall_cpu: 1.0,
                wall_cpu_wait: 1.0,
                wall_io: 1.0,
                wall_off_cpu: 1.0,
                device: 1.0,
                host_queue: 1.0,
                above_block: 1.0,
                verdict: v,
                ..Default::default()
            };
            let l = interval_line(&s, &h);
            assert!(
                l.chars().count() <= 80,
                "{} columns: {l}",
                l.chars().count()
            );
            let bar = |x: &str| x.chars().position(|c| c == '│').unwrap();
            assert_eq!(bar(&l), bar(&header), "{header}\n{l}");
            assert!(l.contains("12.3 s") || l.contains("12.35 s"), "{l}");
        }
        assert!(header.chars().count() <= 80);
    }
}
