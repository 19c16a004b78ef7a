//! eBPF tool output: bcc `biolatency` text, bpftrace `hist()`/`lhist()` maps, bcc `biosnoop`.
//!
//! - biolatency: log2 rows `lo -> hi : count |***|` under a `usecs`/`msecs`/`nsecs` header.
//!   A row holds values in `[lo, hi+1)` (lower-bound convention). `disk = 'sda'` (-D) starts a
//!   per-disk section (one run per disk), `flags = Read` (-F) a per-flag section (one op per
//!   flag value; else the op is `block I/O`). `HH:MM:SS` lines (-T) start a new interval at that
//!   time (biolatency prints the time at the end of each interval); without them every repeated
//!   section starts a new interval, spaced `--interval` apart. Each histogram printed by
//!   biolatency covers one interval (it clears its map), so counts are not differenced.
//! - bpftrace: `@name[key]:` followed by rows `[lo, hi)  count |@@@|` (K/M/G/T suffixes are
//!   powers of 1024), `[v]` for a single value and `[lo, ...)` for the overflow row (read as
//!   `[lo, 2lo)`). The unit comes from the map name (`ns`/`nsecs`, `us`/`usecs`, `ms`/`msecs`),
//!   else `--unit`, else µs with a warning. One op per map (with key); `HH:MM:SS` lines as above.
//! - biosnoop: one line per I/O (`TIME(s) COMM PID DISK T SECTOR BYTES [QUE(ms)] LAT(ms)`),
//!   exact latencies binned by completion time into `--interval`; one run per disk, ops `read`
//!   and `write` by the `T` column.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde_json::json;

use super::{
    ingest_run, parse_f64, parse_u64, rfc3339_ns, Binned, Format, IngestOptions, LineReader,
    SnapshotSeries, Unit, MAX_SERIES_OPS,
};
use crate::results::{BucketConvention, RunResult};

/// One printed histogram section.
struct Section {
    interval: usize,
    series: String,
    op: String,
    /// (lo_ns, hi_ns, count)
    rows: Vec<(u64, u64, u64)>,
}

/// Interval clock from `HH:MM:SS` lines (or section repetition when there are none).
struct Clock {
    times: Vec<Option<i64>>,
    seen: std::collections::HashSet<(String, String)>,
    /// Every distinct section (series, op) so far: at most [`MAX_SERIES_OPS`].
    distinct: std::collections::HashSet<(String, String)>,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            times: Vec::new(),
            seen: Default::default(),
            distinct: Default::default(),
        }
    }
    fn cur(&self) -> usize {
        self.times.len().saturating_sub(1)
    }
    /// A time-of-day line: a new interval ending at `secs` (wrapping past midnight).
    fn tick(&mut self, mut secs: i64) {
        if let Some(Some(prev)) = self.times.iter().rev().find(|t| t.is_some()) {
            let prev = *prev / 1_000_000_000;
            while secs < prev {
                secs += 86_400;
            }
        }
        self.times.push(Some(secs * 1_000_000_000));
        self.seen.clear();
    }
    /// A section header: when the same section repeats without a time line, a new interval.
    /// An error when the input names more than [`MAX_SERIES_OPS`] distinct sections.
    fn section(&mut self, series: &str, op: &str) -> Result<()> {
        let key = (series.to_string(), op.to_string());
        if !self.distinct.contains(&key) {
            if self.distinct.len() >= MAX_SERIES_OPS {
                bail!(
                    "more than {MAX_SERIES_OPS} distinct histograms (the {}th is {:?}): iolens \
                     reads at most {MAX_SERIES_OPS} (each takes about 300 KB)",
                    MAX_SERIES_OPS + 1,
                    super::truncate(op, 60)
                );
            }
            self.distinct.insert(key.clone());
        }
        if self.times.is_empty() || self.seen.contains(&key) {
            self.times.push(None);
            self.seen.clear();
        }
        self.seen.insert(key);
        Ok(())
    }
    /// (start_s, duration_s) of every interval.
    fn spans(&self, default_s: f64) -> (Vec<(f64, f64)>, bool) {
        let timed = self.times.iter().all(|t| t.is_some()) && !self.times.is_empty();
        if !timed {
            return (
                (0..self.times.len())
                    .map(|i| (i as f64 * default_s, default_s))
                    .collect(),
                false,
            );
        }
        let ends: Vec<f64> = self
            .times
            .iter()
            .map(|t| t.expect("timed") as f64 / 1e9)
            .collect();
        let mut out = Vec::new();
        for i in 0..ends.len() {
            let d = if i == 0 {
                if ends.len() > 1 {
                    ends[1] - ends[0]
                } else {
                    default_s
                }
            } else {
                ends[i] - ends[i - 1]
            };
            let d = if d > 0.0 { d } else { default_s };
            out.push((
                ends[i] - ends[0] + out.first().map_or(d, |f: &(f64, f64)| f.1) - d,
                d,
            ));
        }
        (out, true)
    }
}

fn time_of_day(t: &[u8]) -> Option<i64> {
    // HH:MM:SS (ext4dist and friends print `HH:MM:SS:`)
    let t = t.strip_suffix(b":").unwrap_or(t);
    if t.len() != 8 || t[2] != b':' || t[5] != b':' {
        return None;
    }
    let h = parse_u64(&t[0..2])? as i64;
    let m = parse_u64(&t[3..5])? as i64;
    let s = parse_u64(&t[6..8])? as i64;
    (h < 24 && m < 60 && s < 61).then_some(h * 3600 + m * 60 + s)
}

fn build_runs(
    sections: Vec<Section>,
    clock: &Clock,
    args: &IngestOptions,
    format: Format,
    default_series: &str,
) -> Result<Vec<RunResult>> {
    let (spans, timed) = clock.spans(args.interval.as_secs_f64());
    let mut by_series: BTreeMap<String, Vec<&Section>> = BTreeMap::new();
    for s in &sections {
        by_series.entry(s.series.clone()).or_default().push(s);
    }
    let mut runs = Vec::new();
    for (series, secs) in by_series {
        let mut ss = SnapshotSeries::new();
        for (i, (start, dur)) in spans.iter().enumerate() {
            ss.begin_interval(*start, *dur);
            for s in secs.iter().filter(|s| s.interval == i) {
                let op = ss.op(&s.op)?;
                for &(lo, hi, c) in &s.rows {
                    ss.add_spread(op, lo, hi, c);
                }
            }
        }
        let (ops, duration) = ss.finish(BucketConvention::LowerBound);
        let name = if series.is_empty() {
            default_series.to_string()
        } else {
            format!("{default_series} {series}")
        };
        // Time is known only from two or more HH:MM:SS lines (each marks an interval's end);
        // a histogram printed once at Ctrl-C, or untimed ones, have counts but no duration.
        let known = timed && spans.len() > 1;
        let mut run = ingest_run(
            &name,
            format,
            ops,
            String::new(),
            if known { duration } else { 0.0 },
            spans.first().map(|s| s.1).unwrap_or(0.0),
            json!({"series": series, "timestamps": timed,
                   "bucket_convention_basis": "lower-bound: a row `lo -> hi` (or `[lo, hi)`) holds values from lo up to hi, as the tool prints it"}),
        );
        run.duration_unknown = !known;
        if !known && spans.len() > 1 {
            run.warnings.push(format!(
                "no HH:MM:SS timestamp lines (-T): {} histograms drawn {} s apart in order; their \
                 duration is unknown (give --duration for rates)",
                spans.len(),
                args.interval.as_secs_f64()
            ));
        } else if !known {
            run.warnings.push(
                "one histogram without a time span (printed at exit): counts and percentiles \
                 only; give --duration for rates"
                    .into(),
            );
        }
        runs.push(run);
    }
    Ok(runs)
}

/// Read bcc biolatency output.
pub(crate) fn read_biolatency(r: &mut LineReader, args: &IngestOptions) -> Result<Vec<RunResult>> {
    let mut clock = Clock::new();
    let mut sections: Vec<Section> = Vec::new();
    let mut disk = String::new();
    let mut flags = String::new();
    // A section line (`disk = …`, `flags = …`) was read since the last histogram header.
    let mut pending = false;
    let mut unit_ns: Option<f64> = None;
    while let Some(line) = r.next_line()? {
        let t = line.trim_ascii();
        if t.is_empty() {
            r.ignored("blank");
            continue;
        }
        if let Some(s) = time_of_day(t) {
            clock.tick(s);
            r.parsed();
            continue;
        }
        if let Some((key, v)) = section_header(t) {
            // `disk = sda`, `Bucket disk = 'xvdb'` (older bcc), `Bucket ptr = b'sda'`: one
            // series per disk; `flags = Read`, `operation = 'read'`: one op per value. A key
            // applies to the one histogram that follows it.
            if key == "disk" || key == "ptr" {
                disk = v;
            } else {
                flags = v;
            }
            pending = true;
            r.parsed();
            continue;
        }
        if let Some(arrow) = memchr::memmem::find(t, b"->") {
            // lo -> hi : count |***|
            // The count's ':' follows the arrow (`1 : 2 -> 3` is not a row).
            let Some(colon) = memchr::memchr(b':', &t[arrow..]).map(|c| arrow + c) else {
                r.unparsed("histogram row without ':'");
                continue;
            };
            let bar = memchr::memchr(b'|', t).unwrap_or(t.len());
            let lo = parse_u64(t[..arrow].trim_ascii());
            let hi = parse_u64(t[arrow + 2..colon].trim_ascii());
            let count = parse_u64(t[colon + 1..bar.max(colon + 1)].trim_ascii());
            match (lo, hi, count, unit_ns, sections.last_mut()) {
                (Some(lo), Some(hi), Some(c), Some(u), Some(s)) if hi >= lo => {
                    impossible_count(c, r.line_no)?;
                    if c > 0 {
                        s.rows
                            .push(((lo as f64 * u) as u64, ((hi as f64 + 1.0) * u) as u64, c));
                    }
                    r.parsed();
                }
                (_, _, _, None, _) | (_, _, _, _, None) => {
                    r.unparsed("histogram row before a 'usecs : count' header")
                }
                _ => r.unparsed("histogram row not understood"),
            }
            continue;
        }
        if memchr::memmem::find(t, b"distribution").is_some() && memchr::memchr(b':', t).is_some() {
            let label = t.split(|&c| c == b' ').next().unwrap_or(b"");
            let u = match label {
                b"nsecs" => 1.0,
                b"usecs" => 1e3,
                b"msecs" => 1e6,
                b"secs" => 1e9,
                other => {
                    let what = String::from_utf8_lossy(other).into_owned();
                    bail!(
                        "line {}: histogram of '{what}' is not a latency (expected usecs or msecs)",
                        r.line_no
                    )
                }
            };
            unit_ns = Some(u);
            if !pending {
                // A histogram without its own section line: no disk or flag applies (the
                // previous section's belong to an earlier, concatenated output).
                disk.clear();
                flags.clear();
            }
            pending = false;
            let op = if flags.is_empty() {
                "block I/O".to_string()
            } else {
                flags.clone()
            };
            clock.section(&disk, &op)?;
            sections.push(Section {
                interval: clock.cur(),
                series: disk.clone(),
                op,
                rows: Vec::new(),
            });
            r.parsed();
            continue;
        }
        if t.starts_with(b"Tracing") {
            // A new output begins (concatenated files): no disk or flag carries over.
            disk.clear();
            flags.clear();
            pending = false;
            r.ignored("tool message");
            continue;
        }
        if is_banner(t) || t.starts_with(b"avg =") {
            r.ignored("tool message");
            continue;
        }
        r.unparsed("not biolatency output");
    }
    build_runs(sections, &clock, args, Format::Biolatency, "biolatency")
}

/// A bucket count no tool can have printed (2^53 events or more: the counts of a histogram
/// must add up without overflowing) is an error naming the line.
pub(crate) fn impossible_count(c: u64, line: u64) -> Result<()> {
    if c >= 1 << 53 {
        bail!("line {line}: bucket count {c} is not a possible event count (corrupt input?)");
    }
    Ok(())
}

/// Banner and status lines the tools print around their data.
fn is_banner(t: &[u8]) -> bool {
    t.starts_with(b"Tracing")
        || t.starts_with(b"^C")
        || t.starts_with(b"Detaching")
        || t.starts_with(b"Attaching")
        || (t.starts_with(b"Attached ") && memchr::memmem::find(t, b"probe").is_some())
        || memchr::memmem::find(t, b"Hit Ctrl-C").is_some()
}

/// A bcc section line `[Bucket ]key = value` (e.g. `disk = sda`, `Bucket disk = 'xvdb'`,
/// `flags = Sync-Write`, `operation = 'read'`): the key and the unquoted value.
fn section_header(t: &[u8]) -> Option<(String, String)> {
    let t = t.strip_prefix(b"Bucket ").unwrap_or(t);
    let eq = memchr::memmem::find(t, b" = ")?;
    let key = &t[..eq];
    // `avg = 663 usecs, total: …` (-e) is a summary line, not a section.
    if key.is_empty()
        || key == b"avg"
        || !key.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
    {
        return None;
    }
    Some((
        String::from_utf8_lossy(key).into_owned(),
        unquote(&t[eq + 3..]),
    ))
}

fn unquote(v: &[u8]) -> String {
    let v = v.trim_ascii();
    let v = v
        .strip_prefix(b"b")
        .filter(|x| x.starts_with(b"'"))
        .unwrap_or(v);
    let v = v
        .strip_prefix(b"'")
        .and_then(|x| x.strip_suffix(b"'"))
        .unwrap_or(v);
    String::from_utf8_lossy(v).into_owned()
}

/// Parse a bpftrace bucket bound: `123`, `4K`, `16M` (powers of 1024).
fn bpf_num(s: &[u8]) -> Option<u64> {
    let s = s.trim_ascii();
    let (num, mult) = match s.last()? {
        b'K' => (&s[..s.len() - 1], 1u64 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        b'T' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    parse_u64(num)?.checked_mul(mult)
}

fn unit_from_map_name(name: &str) -> Option<Unit> {
    let n = name.to_ascii_lowercase();
    let tokens: Vec<&str> = n
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|s| !s.is_empty())
        .collect();
    let has = |w: &[&str]| {
        tokens
            .iter()
            .any(|t| w.iter().any(|x| t == x || t.ends_with(&format!("_{x}"))))
            || w.iter().any(|x| n.ends_with(x))
    };
    if has(&["ns", "nsecs", "nsec"]) {
        Some(Unit::Ns)
    } else if has(&["us", "usecs", "usec"]) {
        Some(Unit::Us)
    } else if has(&["ms", "msecs", "msec"]) {
        Some(Unit::Ms)
    } else {
        None
    }
}

/// Most lines (frames) of a multi-line bpftrace map key (`@x[` … `]:`): kernel and user
/// stacks are at most 127 frames each.
const MAX_KEY_FRAMES: usize = 512;
/// Most bytes of a multi-line bpftrace map key.
const MAX_KEY_BYTES: usize = 256 << 10;

/// Read bpftrace map output.
pub(crate) fn read_bpftrace(r: &mut LineReader, args: &IngestOptions) -> Result<Vec<RunResult>> {
    let mut clock = Clock::new();
    let mut sections: Vec<Section> = Vec::new();
    let mut unit_ns = 1e3;
    let mut guessed: Vec<String> = Vec::new();
    let mut in_map = false;
    // A multi-line key being read (its lines so far) and its map's name.
    let mut stack_key: Option<Vec<String>> = None;
    let mut stack_map = String::new();
    let start_section = |sections: &mut Vec<Section>,
                         clock: &mut Clock,
                         unit_ns: &mut f64,
                         guessed: &mut Vec<String>,
                         map: &str,
                         name: String|
     -> Result<()> {
        let unit = args.unit.or_else(|| unit_from_map_name(map));
        if unit.is_none() && !guessed.iter().any(|g| g == map) {
            guessed.push(map.to_string());
        }
        *unit_ns = unit.unwrap_or(Unit::Us).ns();
        clock.section("", &name)?;
        sections.push(Section {
            interval: clock.cur(),
            series: String::new(),
            op: name,
            rows: Vec::new(),
        });
        Ok(())
    };
    while let Some(line) = r.next_line()? {
        let t = line.trim_ascii();
        if t.is_empty() {
            r.ignored("blank");
            in_map = false;
            continue;
        }
        if let Some(s) = time_of_day(t) {
            clock.tick(s);
            r.parsed();
            continue;
        }
        if let Some(key) = stack_key.as_mut() {
            // Inside a multi-line map key (`@usecs[` … kernel stack lines … `]:`).
            if t == b"]:" || t == b"]" {
                let frames = std::mem::take(key);
                stack_key = None;
                let name = format!("{}[{}]", stack_map, frames.join(";"));
                start_section(
                    &mut sections,
                    &mut clock,
                    &mut unit_ns,
                    &mut guessed,
                    &stack_map,
                    name,
                )?;
                in_map = true;
            } else if key.len() >= MAX_KEY_FRAMES
                || key.iter().map(|k| k.len()).sum::<usize>() + t.len() > MAX_KEY_BYTES
            {
                // Not a stack key (random data after an `@x[` line): give it up rather than
                // gather the rest of the input into one key.
                stack_key = None;
                in_map = false;
                r.unparsed("map key longer than any stack (not closed with ']:')");
                continue;
            } else {
                key.push(String::from_utf8_lossy(t).into_owned());
            }
            r.parsed();
            continue;
        }
        if t.starts_with(b"@") && t.ends_with(b"[") {
            stack_map = String::from_utf8_lossy(&t[..t.len() - 1]).into_owned();
            stack_key = Some(Vec::new());
            r.parsed();
            continue;
        }
        if t.starts_with(b"@") && !t.ends_with(b":") {
            // `@stat[k]: count 10, average 5, total 50`, `@name: 123`, `@[k]: 4`: scalar maps.
            if memchr::memmem::find(t, b": ").is_some() {
                r.ignored("scalar map");
            } else {
                r.unparsed("map line not understood");
            }
            in_map = false;
            continue;
        }
        if t.starts_with(b"@") && t.ends_with(b":") {
            let name = String::from_utf8_lossy(&t[..t.len() - 1]).into_owned();
            let map = name.split('[').next().unwrap_or(&name).to_string();
            start_section(
                &mut sections,
                &mut clock,
                &mut unit_ns,
                &mut guessed,
                &map,
                name,
            )?;
            in_map = true;
            r.parsed();
            continue;
        }
        if t.starts_with(b"[") {
            let Some(close) = memchr::memchr2(b']', b')', t) else {
                r.unparsed("bucket without closing bracket");
                continue;
            };
            let inner = &t[1..close];
            let rest = &t[close + 1..];
            let bar = memchr::memchr(b'|', rest).unwrap_or(rest.len());
            let count = parse_u64(rest[..bar].trim_ascii());
            let range = match memchr::memchr(b',', inner) {
                Some(c) => {
                    let lo = bpf_num(&inner[..c]);
                    let hi_s = inner[c + 1..].trim_ascii();
                    if hi_s == b"..." {
                        lo.map(|l| (l, (l.max(1)).saturating_mul(2)))
                    } else {
                        lo.zip(bpf_num(hi_s))
                    }
                }
                None => bpf_num(inner).and_then(|v| Some((v, v.checked_add(1)?))),
            };
            match (range, count, in_map, sections.last_mut()) {
                (Some((lo, hi)), Some(c), true, Some(s)) if hi > lo => {
                    impossible_count(c, r.line_no)?;
                    if c > 0 {
                        s.rows.push((
                            (lo as f64 * unit_ns) as u64,
                            (hi as f64 * unit_ns) as u64,
                            c,
                        ));
                    }
                    r.parsed();
                }
                (_, _, false, _) | (_, _, _, None) => {
                    r.unparsed("histogram row outside a @map: section")
                }
                _ => r.unparsed("histogram row not understood"),
            }
            continue;
        }
        if is_banner(t) {
            r.ignored("tool message");
            continue;
        }
        if t[0].is_ascii_alphabetic() && !t.contains(&b'|') && !t.contains(&b'[') {
            // printf() text of the script (e.g. `Latency distribution in microsecond:`).
            r.ignored("script message");
            continue;
        }
        r.unparsed("not bpftrace hist() output");
    }
    if stack_key.is_some() {
        r.unparsed("map key not closed with ']:' at end of input");
    }
    if sections.iter().all(|s| s.rows.is_empty()) {
        // `@x:` lines without a single histogram row (bpftrace prints no empty histogram):
        // no data, which the caller reports as such.
        return Ok(Vec::new());
    }
    let mut runs = build_runs(sections, &clock, args, Format::Bpftrace, "bpftrace")?;
    if !guessed.is_empty() {
        if let Some(run) = runs.first_mut() {
            run.warnings.push(format!(
                "unit of {} not evident from the map name: taken as µs (use --unit)",
                guessed.join(", ")
            ));
        }
    }
    Ok(runs)
}

/// One row of bcc biosnoop output (`TIME(s) COMM PID DISK T SECTOR BYTES [QUE(ms)] LAT(ms)`):
/// TIME is the completion, in seconds from the first I/O biosnoop saw.
pub(crate) struct BiosnoopRow<'a> {
    pub time_s: f64,
    pub pid: &'a [u8],
    pub disk: &'a [u8],
    /// `R`, `W`, or another flag letter.
    pub dir: u8,
    /// 512-byte sectors.
    pub sector: Option<u64>,
    pub bytes: u64,
    pub lat_ms: f64,
}

/// Every row of a biosnoop file, in file order (headers, tool messages and blank lines counted
/// as ignored; anything else as unparsed).
pub(crate) fn biosnoop_rows(
    r: &mut LineReader,
    mut row: impl FnMut(BiosnoopRow<'_>),
) -> Result<()> {
    // Column positions counted from the right end: LAT is last.
    let mut has_que = false;
    let mut header = false;
    while let Some(line) = r.next_line()? {
        let t = line.trim_ascii();
        if t.is_empty() {
            r.ignored("blank");
            continue;
        }
        if t.starts_with(b"TIME") {
            header = true;
            has_que = memchr::memmem::find(t, b"QUE(").is_some();
            if memchr::memmem::find(t, b"LAT(ms)").is_none() {
                bail!("line {}: biosnoop header without LAT(ms) column", r.line_no);
            }
            r.ignored("header");
            continue;
        }
        if t.starts_with(b"Tracing") || t.starts_with(b"^C") || t.starts_with(b"Detaching") {
            r.ignored("tool message");
            continue;
        }
        let f: Vec<&[u8]> = t
            .split(|c| c.is_ascii_whitespace())
            .filter(|s| !s.is_empty())
            .collect();
        let need = if has_que { 9 } else { 8 };
        if !header || f.len() < need {
            r.unparsed("not a biosnoop row");
            continue;
        }
        let n = f.len();
        let lat = parse_f64(f[n - 1]);
        let off = if has_que { 1 } else { 0 };
        let bytes = parse_u64(f[n - 2 - off]);
        let time = parse_f64(f[0]);
        let (Some(lat_ms), Some(bytes), Some(time_s)) = (lat, bytes, time) else {
            r.unparsed("biosnoop row with non-numeric fields");
            continue;
        };
        row(BiosnoopRow {
            time_s,
            pid: f[n - 6 - off],
            disk: f[n - 5 - off],
            dir: f[n - 4 - off].first().copied().unwrap_or(b'?'),
            sector: parse_u64(f[n - 3 - off]),
            bytes,
            lat_ms,
        });
        r.parsed();
    }
    Ok(())
}

/// Read bcc biosnoop output.
pub(crate) fn read_biosnoop(r: &mut LineReader, args: &IngestOptions) -> Result<Vec<RunResult>> {
    let interval_ns = (args.interval.as_nanos() as u64).max(1);
    let mut disks: BTreeMap<String, Binned> = BTreeMap::new();
    biosnoop_rows(r, |row| {
        let op = match row.dir {
            b'R' => "read",
            b'W' => "write",
            _ => "other",
        };
        let disk = String::from_utf8_lossy(row.disk).into_owned();
        let b = disks
            .entry(disk)
            .or_insert_with(|| Binned::new(interval_ns));
        let i = b.op(op);
        b.record(
            i,
            (row.time_s * 1e9) as i64,
            (row.lat_ms * 1e6).round() as u64,
            row.bytes,
        );
    })?;
    let mut runs = Vec::new();
    for (disk, b) in disks {
        let f = b.finish(BucketConvention::Exact, &|_| true);
        let mut run = ingest_run(
            &format!("biosnoop {disk}"),
            Format::Biosnoop,
            f.ops,
            rfc3339_ns(f.start_ns),
            f.duration_s,
            f.interval_s,
            json!({"disk": disk}),
        );
        run.warnings.extend(f.warning);
        if f.duration_s <= 0.0 {
            // Every I/O of this disk completed at the same printed time (one I/O, or several
            // within biosnoop's clock step): counts and latencies, no span to make rates from.
            run.duration_unknown = true;
            run.duration_s = 0.0;
            run.warnings.push(format!(
                "{} I/O(s) on {disk} all at one time stamp: counts and latencies only, the \
                 duration is unknown (give --duration for rates)",
                run.ops.iter().map(|o| o.count).sum::<u64>()
            ));
        }
        runs.push(run);
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpf_numbers_and_units() {
        assert_eq!(bpf_num(b"4K"), Some(4096));
        assert_eq!(bpf_num(b"2M"), Some(2 << 20));
        assert_eq!(unit_from_map_name("@usecs"), Some(Unit::Us));
        assert_eq!(unit_from_map_name("@lat_ns"), Some(Unit::Ns));
        assert_eq!(unit_from_map_name("@ms"), Some(Unit::Ms));
        assert_eq!(unit_from_map_name("@bytes"), None);
    }

    #[test]
    fn clock_spans_from_timestamps() {
        let mut c = Clock::new();
        c.tick(10);
        c.tick(12);
        c.tick(13);
        let (s, timed) = c.spans(1.0);
        assert!(timed);
        assert_eq!(s, vec![(0.0, 2.0), (2.0, 2.0), (4.0, 1.0)]);
    }
}
