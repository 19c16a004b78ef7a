//! `perf script` output (Linux perf's text dump of recorded samples) into a stack profile.
//!
//! A sample is a header line and its stack, one frame a line, leaf first, ended by a blank line:
//! ```text
//! dd 29776 666709.771979:   10101010 cpu-clock:
//!         414b3b fsnotify (/lib/modules/4.1.0-virtual/build/vmlinux)
//!          e5f70 read (/lib/x86_64-linux-gnu/libc-2.15.so)
//! ```
//! The header is `comm pid[/tid] [cpu] time: [period] event:` (the command name may hold
//! spaces; the time is required). Frames are `address symbol[+offset] (module)`; the offset is dropped, an unknown
//! symbol becomes `[module file name]` (or `[unknown]`), and a frame is a kernel frame when its
//! module is `[kernel.kallsyms]`, another `[module]` or a `vmlinux` file, or its address lies in
//! the kernel half. Names are tidied as Brendan Gregg's stackcollapse-perf does by default (`;`
//! becomes `:`, C++ argument lists are cut), so the folded stacks match its output.
//!
//! Only the first event type is read (mixing cycles with instructions would mislead); samples
//! of other events are counted as ignored and reported. Weights: a software-clock event
//! (`cpu-clock`, `task-clock`) carries its period in nanoseconds; otherwise the sampling
//! frequency from the `# cmdline` header (`perf script --header`, `-F HZ`) gives the time per
//! sample; without either the weights are sample counts (the profile's `period_ns` is unset).

use anyhow::Result;

use super::{parse_u64, LineReader};
use crate::results::profile::{FrameKind, ProfileBuilder, ProfileSource, StackProfile, StackState};

/// One sample being read.
struct Sample {
    comm: String,
    period: Option<u64>,
    /// Frames leaf first.
    frames: Vec<u32>,
}

/// The parsed header of a sample.
struct Header<'a> {
    comm: &'a [u8],
    time_s: Option<f64>,
    period: Option<u64>,
    event: Option<&'a [u8]>,
}

fn is_ts(t: &[u8]) -> Option<f64> {
    let t = t.strip_suffix(b":")?;
    let dot = t.iter().position(|&c| c == b'.')?;
    if dot == 0
        || !t
            .iter()
            .enumerate()
            .all(|(i, c)| c.is_ascii_digit() || i == dot)
    {
        return None;
    }
    std::str::from_utf8(t).ok()?.parse().ok()
}

/// A pid or `pid/tid` token.
fn is_pid(t: &[u8]) -> bool {
    let mut parts = t.splitn(2, |&c| c == b'/');
    let digits = |p: &[u8]| !p.is_empty() && p.iter().all(u8::is_ascii_digit);
    parts.next().is_some_and(digits) && parts.next().is_none_or(digits)
}

/// Parse a sample header; `None` when the line is not one.
///
/// As stackcollapse-perf reads it: the command name (it may hold spaces), then the first token
/// that is a pid or `pid/tid`, then optional `[cpu]`, time (`12345.678901:`), period and event
/// (`cycles:`). Older perf and `perf script -F` without `time` write no time: then the line ends
/// `pid event:` and, as for stackcollapse-perf, the event is not read (no filter on it).
fn header(line: &[u8]) -> Option<Header<'_>> {
    if line.first().is_none_or(|c| c.is_ascii_whitespace()) {
        return None;
    }
    let toks: Vec<(usize, &[u8])> = tokens(line);
    // The pid is followed by at least one more token (stackcollapse-perf: `pid\s+`).
    let pid_at = (1..toks.len().saturating_sub(1)).find(|&i| is_pid(toks[i].1))?;
    let comm_end = toks[pid_at - 1].0 + toks[pid_at - 1].1.len();
    let comm = &line[toks[0].0..comm_end];
    let mut i = pid_at + 1;
    if toks[i].1.starts_with(b"[") && toks[i].1.ends_with(b"]") {
        i += 1;
    }
    let time_s = toks.get(i).and_then(|(_, t)| is_ts(t));
    // Event and period from the line's end, as stackcollapse-perf's `:\s*(\d+)*\s+(\S+):\s*$`:
    // the last token ends with `:`, the one before is a period after a `…:` token or a `…:`
    // token itself.
    let n = toks.len();
    let (mut period, mut event) = (None, None);
    let last = toks[n - 1].1;
    if last.len() > 1 && last.ends_with(b":") && n >= 2 {
        let before = toks[n - 2].1;
        if let Some(p) = parse_u64(before) {
            if n >= 3 && toks[n - 3].1.ends_with(b":") {
                period = Some(p);
                event = Some(&last[..last.len() - 1]);
            }
        } else if before.ends_with(b":") {
            event = Some(&last[..last.len() - 1]);
        }
    }
    Some(Header {
        comm,
        time_s,
        period,
        event,
    })
}

fn tokens(line: &[u8]) -> Vec<(usize, &[u8])> {
    let mut v = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        let s = i;
        while i < line.len() && !line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i > s {
            v.push((s, &line[s..i]));
        }
    }
    v
}

/// A parsed frame line: address, symbol (offset stripped), module.
fn frame(line: &[u8]) -> Option<(u64, &str, &str)> {
    let t = std::str::from_utf8(line.trim_ascii()).ok()?;
    let (addr, rest) = t.split_once(char::is_whitespace)?;
    let addr = u64::from_str_radix(addr, 16).ok()?;
    let rest = rest.trim_start();
    let (sym, module) = match rest.rfind(" (") {
        Some(i) if rest.ends_with(')') => (&rest[..i], &rest[i + 2..rest.len() - 1]),
        // No symbol at all (`7f1e2215d058  (/lib/…/libc-2.15.so)`): an unknown one.
        _ if rest.starts_with("(/") && rest.ends_with(')') => ("", &rest[1..rest.len() - 1]),
        _ => (rest, ""),
    };
    let sym = match sym.rfind("+0x") {
        Some(i) if sym[i + 3..].bytes().all(|c| c.is_ascii_hexdigit()) && i > 0 => &sym[..i],
        _ => sym,
    };
    Some((addr, sym.trim(), module))
}

/// Whether a frame is kernel code, from its module and address.
fn kernel_frame(addr: u64, module: &str) -> bool {
    (module.starts_with('[') && module != "[unknown]" && !module.starts_with("[vdso"))
        || module.ends_with("vmlinux")
        || (module == "[unknown]" && addr >= 0xffff_8000_0000_0000)
}

/// The name a frame is shown under (stackcollapse-perf's default tidying; `comm` is the
/// sample's process name, spaces made `_`).
pub(crate) fn tidy_name(sym: &str, module: &str, comm: &str) -> String {
    if sym == "[unknown]" || sym.is_empty() {
        return if module.is_empty() || module == "[unknown]" {
            "[unknown]".to_string()
        } else {
            format!("[{}]", module.rsplit('/').next().unwrap_or(module))
        };
    }
    let mut s = sym.replace(';', ":");
    // Cut a C++ argument list, keeping `(anonymous namespace)` and Go's `pkg.(*T).M` (a `.(`
    // with a `).` after it, as stackcollapse-perf's `\.\(.*\)\.`).
    let go = s
        .find(".(")
        .is_some_and(|i| s.rfind(").").is_some_and(|j| j >= i + 2));
    if !go {
        let mut from = 0;
        while let Some(i) = s[from..].find('(') {
            let at = from + i;
            if s[at..].starts_with("(anonymous namespace)") {
                from = at + "(anonymous namespace)".len();
                continue;
            }
            s.truncate(at);
            break;
        }
    }
    s.retain(|c| c != '"' && c != '\'');
    // Java: stackcollapse-perf drops the JVM's type prefix `L` of `Ljava/lang/Thread;::run` in
    // a `java…` process (the `;` already made `:`).
    if comm.starts_with("java") && s.contains('/') && s.starts_with('L') {
        s.remove(0);
    }
    s
}

/// Weight per sample in ns for a software-clock event's period, or from the frequency.
fn sample_ns(event: &[u8], period: Option<u64>, freq_period: Option<u64>) -> Option<u64> {
    let clock = event.starts_with(b"cpu-clock") || event.starts_with(b"task-clock");
    match (clock, period) {
        (true, Some(p)) if p > 0 => Some(p),
        _ => freq_period,
    }
}

/// The sampling frequency named on a `# cmdline :` header line (`-F 99`, `-F99`, `--freq=99`).
fn cmdline_freq(line: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(line).ok()?;
    let mut it = t.split_whitespace();
    while let Some(a) = it.next() {
        let v = if a == "-F" || a == "--freq" {
            it.next()
        } else if let Some(v) = a.strip_prefix("--freq=") {
            Some(v)
        } else if a.starts_with("-F") && a.len() > 2 && !a.starts_with("--") {
            Some(&a[2..])
        } else {
            None
        };
        if let Some(f) = v.and_then(|v| v.parse::<f64>().ok()).filter(|f| *f > 0.0) {
            return Some(f);
        }
    }
    None
}

/// Read one `perf script` file into a stack profile (empty when no sample was found).
pub fn read(r: &mut LineReader) -> Result<StackProfile> {
    let mut b = ProfileBuilder::new();
    let mut first_event: Option<Vec<u8>> = None;
    let mut freq: Option<f64> = None;
    let mut cur: Option<Sample> = None;
    let mut skipping = false;
    let mut other_events = 0u64;
    let (mut t0, mut t1) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut clock_event = false;
    let mut periods_seen = false;
    // Headers are read as stackcollapse-perf reads them (a name, then a number), which lines
    // of other tools' text can match (an Oracle trace's `WAIT #0: nam=… ela= 12 …`): a file in
    // which no sample carries a single frame is not `perf script` output.
    let (mut headers, mut frames) = (0u64, 0u64);
    let flush = |b: &mut ProfileBuilder, s: Option<Sample>, per_sample: Option<u64>| {
        if let Some(mut s) = s {
            s.frames.reverse();
            let w = s.period.or(per_sample).unwrap_or(1);
            b.add(&s.comm, s.frames, StackState::OnCpu, 1, w);
        }
    };
    while let Some(line) = r.next_line()? {
        if line.starts_with(b"#") {
            if line.starts_with(b"# cmdline") {
                freq = freq.or(cmdline_freq(line));
            }
            r.ignored("comment");
            continue;
        }
        if line.trim_ascii().is_empty() {
            let per = freq.map(|f| (1e9 / f).round() as u64);
            let s = cur.take();
            flush(&mut b, s, per);
            skipping = false;
            continue;
        }
        // A header starts at the line's first column; a frame may too (some perf versions and
        // hand-made files write frames unindented), so a line that is no header is tried as one.
        if let Some(h) = header(line) {
            // A header without a blank line before it still ends the previous sample.
            let per = freq.map(|f| (1e9 / f).round() as u64);
            let prev = cur.take();
            flush(&mut b, prev, per);
            let ev = h.event.unwrap_or(b"").to_vec();
            match &first_event {
                None => {
                    clock_event = ev.starts_with(b"cpu-clock") || ev.starts_with(b"task-clock");
                    first_event = Some(ev);
                }
                Some(f) if *f != ev => {
                    other_events += 1;
                    skipping = true;
                    r.ignored("other event type");
                    continue;
                }
                _ => {}
            }
            skipping = false;
            if let Some(t) = h.time_s {
                t0 = t0.min(t);
                t1 = t1.max(t);
            }
            periods_seen |= h.period.is_some();
            let period = sample_ns(h.event.unwrap_or(b""), h.period, None);
            cur = Some(Sample {
                comm: String::from_utf8_lossy(h.comm).replace(' ', "_"),
                period,
                frames: Vec::new(),
            });
            headers += 1;
            r.parsed();
            continue;
        }
        if skipping {
            r.ignored("other event type");
            continue;
        }
        let Some(s) = cur.as_mut() else {
            if frame(line).is_some() {
                r.unparsed("stack frame outside a sample");
            } else {
                r.unparsed("not a perf script sample header");
            }
            continue;
        };
        match frame(line) {
            Some((addr, sym, module)) => {
                // Process-name pseudo frames (`(comm)`) are not code.
                if sym.starts_with('(') {
                    r.ignored("process name frame");
                    continue;
                }
                let kind = if kernel_frame(addr, module) {
                    FrameKind::Kernel
                } else {
                    FrameKind::User
                };
                let name = tidy_name(sym, module, &s.comm);
                let id = b.frame(&name, kind, module);
                s.frames.push(id);
                frames += 1;
                r.parsed();
            }
            None => r.ignored("source line or annotation"),
        }
    }
    let per = freq.map(|f| (1e9 / f).round() as u64);
    let last = cur.take();
    flush(&mut b, last, per);
    if headers > 0 && frames == 0 {
        anyhow::bail!(
            "no perf-script data found: {headers} line(s) look like sample headers but no \
             sample has a stack frame (was it recorded with -g? is --format right?)"
        );
    }
    if other_events > 0 {
        r.warnings.push(format!(
            "{other_events} sample(s) of other event types than the first ({}) ignored: \
             run perf script once per event",
            String::from_utf8_lossy(first_event.as_deref().unwrap_or(b""))
        ));
    }
    let weights_in_ns = (clock_event && periods_seen) || per.is_some();
    if !weights_in_ns && !b.is_empty() {
        r.warnings.push(
            "the samples carry no time (no software-clock period, no -F frequency in a \
             `perf script --header` header): weights are sample counts"
                .into(),
        );
    }
    let mut p = b.finish(ProfileSource {
        producer: "perf-script".into(),
        frequency_hz: freq,
        period_ns: per,
        duration_s: (t1 >= t0).then_some(t1 - t0),
        ..ProfileSource::default()
    });
    if weights_in_ns && per.is_none() {
        // Periods came with each sample: the profile's period is their mean.
        let n = p.on_cpu_samples().max(1);
        p.source.period_ns = Some(p.weight_ns(StackState::OnCpu) / n);
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_with_spaces_cpus_and_tids() {
        let h = header(b"V8 WorkerThread 24636/25607 [000] 94564.109216: 100 cycles:").unwrap();
        assert_eq!(h.comm, b"V8 WorkerThread");
        assert_eq!(h.period, Some(100));
        assert_eq!(h.event, Some(&b"cycles"[..]));
        let h = header(b"func_ab 15285 28075374.517811: cpu-clock: ").unwrap();
        assert_eq!((h.comm, h.period), (&b"func_ab"[..], None));
        assert_eq!(h.event, Some(&b"cpu-clock"[..]));
        assert!(header(b"no header here").is_none());
        // No time field (older perf, `-F` without time): no event read, as stackcollapse-perf.
        let h = header(b"java 19983 cycles:").unwrap();
        assert_eq!((h.comm, h.time_s, h.event), (&b"java"[..], None, None));
        let h = header(b"iperf 27409/28744 [000] 441995.133575: cpu-clock: ").unwrap();
        assert_eq!((h.comm, h.event), (&b"iperf"[..], Some(&b"cpu-clock"[..])));
        // A frame written unindented is no header.
        assert!(header(b"ffffffff8103d0ca native_write_msr_safe ([kernel.kallsyms])").is_none());
    }

    #[test]
    fn java_type_prefix_is_dropped_in_java_processes_only() {
        let sym = "Ljava/lang/Thread;::run";
        assert_eq!(
            tidy_name(sym, "/tmp/perf-1.map", "java"),
            "java/lang/Thread:::run"
        );
        assert_eq!(
            tidy_name(sym, "/tmp/perf-1.map", "node"),
            "Ljava/lang/Thread:::run"
        );
        assert_eq!(tidy_name("Lfoo", "x", "java"), "Lfoo");
    }

    #[test]
    fn frames_and_names() {
        let (a, s, m) =
            frame(b"\t    ffffffff8103ce3b native_safe_halt+0x1b ([kernel.kallsyms])").unwrap();
        assert_eq!(
            (a, s, m),
            (0xffffffff8103ce3b, "native_safe_halt", "[kernel.kallsyms]")
        );
        assert!(kernel_frame(a, m));
        let (_, s, m) = frame(b"\t    7f1e2215d058  (/lib/libc-2.15.so)").unwrap();
        assert_eq!(tidy_name(s, m, "java"), "[libc-2.15.so]");
        let (_, s, m) = frame(b"  31ef [unknown] (/bin/dd)").unwrap();
        assert_eq!(tidy_name(s, m, "dd"), "[dd]");
        assert_eq!(tidy_name("foo::bar(int, char*)", "x", "a"), "foo::bar");
        assert_eq!(
            tidy_name("(anonymous namespace)::f(int)", "x", "a"),
            "(anonymous namespace)::f"
        );
        assert_eq!(
            tidy_name("net/http.(*Client).Do", "x", "a"),
            "net/http.(*Client).Do"
        );
        assert_eq!(
            cmdline_freq(b"# cmdline : /usr/bin/perf record -F 99 -g ./func_ab"),
            Some(99.0)
        );
    }
}
