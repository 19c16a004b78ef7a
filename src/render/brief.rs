//! The terminal renderer's brief mode: the closing summaries commands print when they end.
//! [`run_summary`] (the end of `iolens run`): per-op throughput and latency percentiles, CPU
//! cost, run-queue delay, the device's own view, block verification and its cost, corruption
//! found, and warnings. Every brief fits [`TermStyle::width`]: tables abbreviate their columns
//! ([`Table::render`]) and prose lines break between words ([`crate::out::fit`]), never inside a figure.

use std::fmt::Write as _;

use super::table::Table;
use super::TermStyle;
use crate::out::fit;
use crate::results::{Results, RunResult};
use crate::units::{fmt_bytes, fmt_ns, fmt_rate};

/// Render the summary of one run as text fitting `style.width`.
pub fn run_summary(r: &RunResult, style: &TermStyle) -> String {
    let mut s = String::new();
    let errors = r.verify.as_ref().map(|v| v.errors).unwrap_or(0);
    if errors > 0 || !r.corruption.is_empty() {
        let _ = writeln!(
            s,
            "!! DATA CORRUPTION DETECTED: {} corrupt 512-byte unit(s) — see below",
            errors.max(r.corruption.len() as u64)
        );
    }
    let _ = writeln!(
        s,
        "{} — {:.1} s measured{}",
        r.name,
        r.duration_s,
        if r.interrupted { " (interrupted)" } else { "" }
    );
    let mut t = Table::new(&[
        "op", "count", "IOPS", "MB/s", "min", "p50", "p90", "p99", "p99.9", "p99.99", "max",
    ]);
    let mut errors_lines = String::new();
    for o in &r.ops {
        let l = &o.summary;
        let (rate, mbs) = if r.rates_known() {
            (
                fmt_rate(o.count as f64 / r.duration_s),
                format!("{:.1}", o.bytes as f64 / r.duration_s / 1e6),
            )
        } else {
            ("unknown".to_string(), "unknown".to_string())
        };
        t.row(vec![
            o.op.clone(),
            o.count.to_string(),
            rate,
            mbs,
            fmt_ns(l.min_ns as f64),
            fmt_ns(l.p50_ns as f64),
            fmt_ns(l.p90_ns as f64),
            fmt_ns(l.p99_ns as f64),
            fmt_ns(l.p999_ns as f64),
            fmt_ns(l.p9999_ns as f64),
            fmt_ns(l.max_ns as f64),
        ]);
        if o.errors > 0 {
            let _ = writeln!(errors_lines, "  {} {} errors", o.op, o.errors);
        }
    }
    let inner = TermStyle {
        width: style.width.saturating_sub(2),
        ..*style
    };
    for line in t.render(&inner).lines() {
        let _ = writeln!(s, "  {line}");
    }
    s.push_str(&errors_lines);
    if let Some(mut tt) = super::targets::table(r) {
        // The queue facts are in `show`; the closing summary keeps to what landed where.
        for c in ["scheduler", "nr_requests", "tags", "disk await"] {
            tt.drop_column(c);
        }
        let _ = writeln!(s, "  per target:");
        for line in tt.render(&inner).lines() {
            let _ = writeln!(s, "  {line}");
        }
        if let Some(n) = super::targets::note(r) {
            let _ = writeln!(s, "  note: {n}");
        }
    }
    if !r.rates_known() {
        let _ = writeln!(s, "  IOPS, MB/s: {}", crate::results::UNKNOWN_RATE);
    }
    if let Some(c) = &r.cpu {
        let _ = writeln!(
            s,
            "  CPU: {:.2} µs per I/O (user {:.2}, sys {:.2}); host {:.0} % busy, {:.0} % iowait on {} CPUs; run-queue delay {}",
            c.us_per_io,
            c.user_us_per_io,
            c.sys_us_per_io,
            c.host_busy * 100.0,
            c.host_iowait * 100.0,
            c.cpus,
            if c.runq_measured() {
                format!("{:.2} µs per I/O", c.runq_us_per_io)
            } else {
                "not measured".into()
            }
        );
    }
    if let Some(d) = &r.device {
        let _ = writeln!(
            s,
            "  Device {}: {} IOPS, {:.1} MB/s ({} read, {} written), read await {}, write await {}, util {:.0} %, avg in flight {:.1}",
            d.device,
            fmt_rate(d.iops),
            d.mb_per_s,
            fmt_bytes(d.read_bytes),
            fmt_bytes(d.write_bytes),
            fmt_ns(d.read_await_us * 1e3),
            fmt_ns(d.write_await_us * 1e3),
            d.util * 100.0,
            d.avg_in_flight
        );
    }
    if let Some(b) = &r.io_buffers {
        let _ = writeln!(s, "  I/O buffers: {}", io_buffers_line(b));
    }
    if let Some(pc) = &r.page_cache {
        let _ = writeln!(
            s,
            "  Page cache: {:.0} % of the {} working set resident before, {:.0} % after",
            pc.resident_before * 100.0,
            fmt_bytes(pc.working_set_bytes),
            pc.resident_after * 100.0
        );
    }
    if let Some(v) = &r.verify {
        if v.mode == crate::results::VerifyMode::None {
            let _ = writeln!(s, "  Verify: none — {}", v.note);
        } else {
            let mut line = format!(
                "  Verify: {}, {} B stamp units: {} reads checked ({} units)",
                v.mode, v.unit_bytes, v.reads_verified, v.units_verified
            );
            if v.reads_verified > 0 {
                let mean = r.op("read").map(|o| o.summary.mean_ns).unwrap_or(0.0);
                line += &format!(", {} per read to verify", fmt_ns(v.ns_per_read));
                if mean > 0.0 {
                    line += &format!(
                        " ({:.1} % of the mean read latency)",
                        v.ns_per_read / mean * 100.0
                    );
                }
            }
            if v.generation_checks > 0 {
                line += &format!(", {} with a known generation", v.generation_checks);
            }
            let _ = writeln!(s, "{line}");
        }
        if v.writes_stamped > 0 {
            let _ = writeln!(
                s,
                "  Stamping: {} writes stamped, {} per write{}",
                v.writes_stamped,
                fmt_ns(v.stamp_ns_per_write),
                if v.generation_slots > 0 {
                    format!("; generations tracked in {} slots", v.generation_slots)
                } else {
                    String::new()
                }
            );
        }
        if v.skipped_concurrent > 0 {
            let _ = writeln!(
                s,
                "  Verify: {} failed check(s) not counted: the run's own write to the block was in flight",
                v.skipped_concurrent
            );
        }
        if v.mode != crate::results::VerifyMode::None
            && v.reads_verified > 0
            && v.units_verified == 0
        {
            let _ = writeln!(
                s,
                "  WARNING: reads smaller than or misaligned with the 512-byte stamp units: nothing was verified"
            );
        }
    }
    let mut s = fit(&s, style.width);
    if !r.corruption.is_empty() {
        let _ = writeln!(
            s,
            "  !! CORRUPTION ({} unit(s){}):",
            errors.max(r.corruption.len() as u64),
            if r.verify.as_ref().is_some_and(|v| v.stopped) {
                ", stopped at the first"
            } else {
                ""
            }
        );
        s += &render_reports(&r.corruption, errors, 10);
    }
    let mut tail = String::new();
    for v in crate::analysis::run_summary_verdicts(r) {
        let tag = if v.severity == crate::analysis::Severity::Warning {
            "WARNING"
        } else {
            "Verdict"
        };
        let _ = writeln!(tail, "  {tag}: {}", v.message);
    }
    for w in &r.warnings {
        let _ = writeln!(tail, "  WARNING: {w}");
    }
    s.push_str(&fit(&tail, style.width));
    s
}

/// A step `--sustain` held: "`what` at N sessions for S s (--sustain): " and what its regimes
/// say.
fn held_line(
    what: &str,
    held: crate::results::analysis::SustainStep,
    res: &Results,
    an: &crate::results::analysis::Analysis,
) -> String {
    let g = an.runs.get(held.run).and_then(|a| a.regimes.as_ref());
    let secs = res.runs.get(held.run).map_or(0.0, |r| r.duration_s);
    format!(
        "{what} at {} sessions for {:.0} s (--sustain): {}",
        held.sessions,
        secs,
        g.map_or("too short to judge".to_string(), |g| g.sentence.clone())
    )
}

/// The rate `b` sustained after its burst or cache (`rate`: "IOPS", "write IOPS"), `caveat` in
/// brackets when the headline figure was measured inside it, then `what` it was and its
/// sentence on a second line.
fn burst_line(
    b: &crate::results::analysis::CalibrationBurst,
    rate: &str,
    caveat: &str,
    what: &str,
) -> String {
    let caveat = if b.max_in_burst {
        format!(" ({caveat})")
    } else {
        String::new()
    };
    format!(
        "{} {rate} sustained{caveat}\n  {what}: {}",
        fmt_rate(b.sustained_iops),
        b.sentence
    )
}

/// The ten-second summary of a calibration.
pub(crate) fn calibrate_summary(res: &Results, style: &TermStyle) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let Some(c) = &res.calibration else {
        return s;
    };
    let an = crate::analysis::of(res);
    let f = an.calibration.clone().unwrap_or_default();
    let pct = c.percentile;
    let _ = writeln!(s, "\n== iolens calibration ==");
    if let Some(pc) = &c.findings.precondition {
        let _ = writeln!(s, "{}", pc.sentence);
    }
    match (c.max_iops, c.max_iops_point) {
        (Some(iops), Some(p)) => {
            let pt = &c.curve[p];
            let _ = writeln!(
                s,
                "Max IOPS at p{pct} ≤ {}: {} ({} random reads, {} sessions)\n  latency there: p50 {}  p99 {}  p99.9 {}",
                fmt_ns(c.max_latency_ns as f64),
                fmt_rate(iops),
                res.runs
                    .get(pt.run)
                    .and_then(|r| r.spec.as_ref()?.block_size)
                    .map(fmt_bytes)
                    .unwrap_or_default(),
                pt.sessions,
                fmt_ns(pt.p50_ns as f64),
                fmt_ns(pt.p99_ns as f64),
                fmt_ns(pt.p999_ns as f64)
            );
            if let Some(why) = f.stop_reason {
                let why = f.stop_sentence.clone().unwrap_or(why.describe().into());
                let _ = writeln!(s, "  ramp stopped because {why}");
            }
            if let Some(held) = c.findings.sustain {
                let _ = writeln!(s, "{}", held_line("Held", held, res, &an));
            }
            if let Some(b) = &f.burst {
                let _ = writeln!(
                    s,
                    "{}",
                    burst_line(
                        b,
                        "IOPS",
                        "the maximum above was measured inside a burst, it is not the maximum",
                        "a burst"
                    )
                );
            }
        }
        _ if !c.curve.is_empty() => {
            let pt = &c.curve[0];
            let _ = writeln!(
                s,
                "No load level met p{pct} ≤ {}: even 1 session saw p99 {} ({} IOPS)",
                fmt_ns(c.max_latency_ns as f64),
                fmt_ns(pt.p99_ns as f64),
                fmt_rate(pt.iops)
            );
        }
        _ => {}
    }
    if let Some(b) = f.seq_best {
        let _ = writeln!(
            s,
            "Max MB/s, many streams: {:.0} MB/s (queue depth {} per stream)",
            b.mb_per_s, b.qd
        );
    }
    if let Some(b) = f.seq1_best {
        let _ = writeln!(
            s,
            "Max MB/s, one stream:   {:.0} MB/s (queue depth {})",
            b.mb_per_s, b.qd
        );
    }
    for w in &f.commit {
        let _ = writeln!(
            s,
            "Commit write {} O_DSYNC: p50 {}  p99 {}  p99.9 {}  ({} per s)",
            fmt_bytes(w.size_bytes),
            fmt_ns(w.p50_ns as f64),
            fmt_ns(w.p99_ns as f64),
            fmt_ns(w.p999_ns as f64),
            w.writes_per_s.map(fmt_rate).unwrap_or_else(|| "-".into())
        );
    }
    if let Some(b) = f.write_best {
        let _ = writeln!(
            s,
            "Random writes: {} IOPS at p{pct} ≤ {} ({} sessions)",
            fmt_rate(b.value),
            fmt_ns(c.max_latency_ns as f64),
            b.level
        );
    }
    if let Some(held) = c.findings.sustain_write {
        let _ = writeln!(s, "{}", held_line("Writes held", held, res, &an));
    }
    if let Some(b) = &f.write_cache {
        let _ = writeln!(
            s,
            "{}",
            burst_line(
                b,
                "write IOPS",
                "the random-write figure above was measured before the cache filled",
                "a write cache"
            )
        );
    }
    if let Some(m) = &f.modes_at_max {
        let _ = writeln!(s, "Latency modes at max IOPS: {m}");
    }
    if let Some(t) = &f.tiers_at_max {
        let _ = writeln!(s, "  as tiers: {t}");
    }
    for p in &f.cache_probe {
        let _ = writeln!(
            s,
            "Cache probe, {} % of target: {}",
            p.share * 100.0,
            p.modes
        );
    }
    if let Some(k) = &f.knee {
        let _ = writeln!(s, "{}", super::analysis::knee_line(k));
    }
    if let Some(u) = &f.usl {
        let _ = writeln!(s, "{}", super::analysis::usl_line(u));
    }
    if let Some((n, l)) = f
        .little
        .iter()
        .find(|l| c.max_iops_point.map(|p| c.curve[p].sessions) == Some(l.sessions))
        .or(f.little.last())
        .map(|l| (l.sessions, &l.check))
    {
        let _ = writeln!(
            s,
            "Little's law at {n} sessions: IOPS × mean latency = {:.2} I/Os in flight of {:.0}; {:.1} % of the sessions' time is outside the I/O",
            l.observed,
            l.concurrency,
            l.outside_share * 100.0
        );
    }
    for v in &c.verdicts {
        let _ = writeln!(s, "Verdict: {}", v.message);
    }
    let cio = &f.calibrate_io;
    let num = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    let _ = writeln!(
        s,
        "CALIBRATE_IO would report: max_iops = {}, max_mbps = {}, max_pmbps = {}, latency = {} ms \
         (an integer-ms average that hides the distribution above)",
        num(cio.max_iops),
        num(cio.max_mbps),
        num(cio.max_pmbps),
        num(cio.latency_ms)
    );
    if let Some(t) = super::table::calibration_curve(res, &an) {
        let _ = writeln!(
            s,
            "\nLoad curve ({} random reads, sync engine):",
            res.runs
                .get(c.curve[0].run)
                .and_then(|r| r.spec.as_ref()?.block_size)
                .map(fmt_bytes)
                .unwrap_or_default(),
        );
        s.push_str(&t.render(style));
        for p in &c.curve {
            if let Some(m) = an
                .runs
                .get(p.run)
                .and_then(|a| a.modes.first())
                .filter(|m| !m.description.is_empty())
            {
                let _ = writeln!(s, "modes at {} sessions: {}", p.sessions, m.description);
            }
        }
    }
    let _ = writeln!(
        s,
        "\nOverhead between steps: {:.2} s ({:.2} % of the {:.0} s budget)",
        c.overhead_s,
        c.overhead_s / c.budget_s.max(1e-9) * 100.0,
        c.budget_s
    );
    for w in &res.warnings {
        let _ = writeln!(s, "WARNING: {w}");
    }
    fit(&s, style.width)
}

/// The closing summary of `iolens verify` of `path`: what was checked, how fast, what it found.
pub(crate) fn verify_summary(r: &RunResult, path: &std::path::Path, style: &TermStyle) -> String {
    let v = r.verify.clone().unwrap_or_default();
    let mut out = String::new();
    let gb = r.ops[0].bytes as f64;
    let _ = writeln!(
        out,
        "Verified {} ({} units of 512 B, {} check) in {:.2} s: {:.0} MB/s, {:.0} µs of CPU per MiB verified",
        crate::units::fmt_bytes(r.ops[0].bytes),
        v.units_verified,
        v.mode,
        r.duration_s,
        gb / r.duration_s.max(1e-9) / 1e6,
        v.ns_per_unit * 2048.0 / 1e3,
    );
    let _ = writeln!(
        out,
        "  {} units rewritten by workloads since the fill, {} as filled",
        v.units_rewritten,
        v.units_verified.saturating_sub(v.units_rewritten)
    );
    if !v.note.is_empty() {
        let _ = writeln!(out, "  Note: {}", v.note);
    }
    if r.interrupted {
        let _ = writeln!(
            out,
            "  WARNING: interrupted: only part of the target was checked"
        );
    }
    if v.errors > 0 {
        let _ = writeln!(
            out,
            "  !! DATA CORRUPTION: {} bad unit(s) in {}{}",
            v.errors,
            path.display(),
            if v.stopped {
                " (stopped at the first)"
            } else {
                ""
            }
        );
        // Report lines are kept whole: an offset stays beside its figure for grep.
        let mut out = fit(&out, style.width);
        out.push_str(&render_reports(&r.corruption, v.errors, 20));
        return out;
    }
    let _ = writeln!(out, "  No corruption found.");
    fit(&out, style.width)
}

/// Text lines describing corruption reports (at most `max`).
pub(crate) fn render_reports(
    reports: &[crate::results::CorruptionReport],
    total: u64,
    max: usize,
) -> String {
    let mut s = String::new();
    for r in reports.iter().take(max) {
        let on = if r.target.is_empty() {
            String::new()
        } else {
            format!(" on {}", r.target)
        };
        s += &format!(
            "    {}{on} at offset {} (read {}+{}): expected {}, found {} — {}\n",
            r.kind, r.offset, r.io_offset, r.io_len, r.expected, r.found, r.message
        );
    }
    let shown: u64 = reports.iter().take(max).map(|r| r.units.max(1)).sum();
    if total > shown {
        s += &format!("    … and {} more corrupt unit(s)\n", total - shown);
    }
    s
}

/// The I/O buffers in words: their size and how much of it is on huge pages, with the reason
/// when none is.
pub(crate) fn io_buffers_line(b: &crate::results::IoBuffers) -> String {
    let mut line = format!(
        "{}, {} on huge pages",
        fmt_bytes(b.bytes),
        match b.huge_bytes {
            0 => "none".to_string(),
            h if h >= b.bytes => "all".to_string(),
            h => format!(
                "{} ({:.0} %)",
                fmt_bytes(h),
                h as f64 / b.bytes as f64 * 100.0
            ),
        }
    );
    if b.hugetlb && b.huge_bytes > 0 {
        line += " (reserved hugetlb pages)";
    } else if !b.huge_pages_asked {
        line += " (--huge-pages off)";
    } else if b.huge_bytes == 0 {
        match b.thp_setting.as_deref() {
            Some(t) => line += &format!(" (transparent huge pages: {t})"),
            None => line += " (this kernel has no transparent huge pages)",
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::out::visible_width;

    #[test]
    fn fit_breaks_between_words_never_inside_a_figure() {
        let line = "  CPU: 28.85 µs per I/O (user 1.29, sys 27.56); host 100 % busy, 0 % iowait on 2 CPUs; run-queue delay 12.5 µs per I/O\n";
        let s = fit(line, 40);
        for l in s.lines() {
            assert!(visible_width(l) <= 40, "{l:?}");
            assert!(
                !l.trim_start().starts_with("µs"),
                "unit split from its figure:\n{s}"
            );
            assert!(
                !l.trim_start().starts_with('%'),
                "unit split from its figure:\n{s}"
            );
        }
        assert!(s.lines().nth(1).unwrap().starts_with("    "), "{s}");
        assert_eq!(s.replace("\n    ", " "), line);
        // A word longer than a line is cut after a comma where it can be.
        let opts = "  target: /s.dat on ext4 [rw,relatime,discard,resv_strict,resuid=65534,resgid=65534]\n";
        let s = fit(opts, 40);
        for l in s.lines() {
            assert!(visible_width(l) <= 40, "{l:?}\n{s}");
        }
        assert!(s.contains("resv_strict,\n"), "{s}");
        assert_eq!(s.replace("\n    ", ""), opts.replace("ext4 ", "ext4"));
        // Short lines and ANSI escapes are left alone.
        let c = "\x1b[33mwarning:\x1b[0m short\n";
        assert_eq!(fit(c, 20), c);
        // A label stays on the line of its figure: at every width that breaks this line, no
        // line ends in a label whose value starts the next.
        let l =
            "  read latency: mean 210 µs, p50 53.2 µs, p99 4.01 ms, p99.9 8.04 ms, max 17.6 ms\n";
        for w in 40..l.len() {
            let s = fit(l, w);
            for pair in s.lines().collect::<Vec<_>>().windows(2) {
                let label = pair[0].rsplit(' ').next().unwrap();
                assert!(
                    !["mean", "p50", "p99", "p99.9", "max"].contains(&label),
                    "label {label:?} split from its value at {w}:\n{s}"
                );
            }
            assert_eq!(s.replace("\n    ", " "), l);
        }
    }
}
