//! The results document of an `iolens trace` run: sessions from files, their runs, the
//! profile, the I/O breakdown and the slowest waits.

use super::method_r::{merge_events, profile, ProfileIn};
use super::parser::insert_slowest;
use super::*;

/// Read the trace files of an `iolens trace` invocation into one results document.
pub fn read_traces(args: &TraceOptions, command_line: Vec<String>) -> Result<Results> {
    let opts = ParseOptions {
        interval_ns: (args.interval.as_nanos() as u64).max(1_000),
        top: args.top,
        keep_io: false,
    };
    let mut files = Vec::new();
    for p in &args.files {
        let mut r = LineReader::open(p)?;
        let f = parse_trace(&mut r, &opts)?;
        if f.stats.parsed == 0 {
            // Nothing read is an error (exit non-zero even with -q, and say why).
            anyhow::bail!(
                "{}: no Oracle 10046 trace lines (WAIT, PARSE, EXEC, FETCH …), not an extended \
                 SQL trace (bcc, bpftrace, fio and HdrHistogram files are read by `iolens ingest \
                 --format …`)",
                super::super::nothing_read(
                    &p.display().to_string(),
                    "Oracle 10046 trace",
                    &f.stats
                )
            );
        }
        files.push(f);
    }
    let mut results = build_results(files, &opts, &args.events)?;
    results.command_line = command_line;
    Ok(results)
}

/// Group parsed files into sessions and build the results document. `events` (when not empty)
/// limits which events get latency histograms.
pub fn build_results(
    mut files: Vec<TraceFile>,
    opts: &ParseOptions,
    events: &[String],
) -> Result<Results> {
    let mut results = Results::new(Kind::Trace, Vec::new());
    // Files continuing another given file join its session.
    let bases: Vec<String> = files.iter().map(|f| base_name(&f.path)).collect();
    for i in 0..files.len() {
        if let Some(from) = files[i].continued_from.clone() {
            let b = base_name(&from);
            if let Some(j) = bases.iter().position(|x| *x == b) {
                if j != i {
                    files[i].session = files[j].session.clone();
                }
            }
        }
    }
    // Order files by their first tim on the wall clock when known.
    files.sort_by_key(|f| {
        (
            f.session.clone(),
            f.first_tim
                .map(|t| t.saturating_add(f.offset_us.unwrap_or(0))),
        )
    });
    let mut file_profiles = Vec::new();
    let mut all_events: Vec<EventTotals> = Vec::new();
    let mut all_calls: BTreeMap<String, CallFigures> = BTreeMap::new();
    let mut all_errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut all_recursive = 0;
    let mut all_depths: BTreeMap<u64, u64> = BTreeMap::new();
    let mut all_span: Option<i64> = None;
    let mut slowest: Vec<SlowWait> = Vec::new();
    let mut io_files: HashMap<(String, i64), IoAgg> = HashMap::new();
    let mut io_objs: HashMap<(String, i64), IoAgg> = HashMap::new();
    let mut io_ranges: HashMap<(String, i64, u64), IoAgg> = HashMap::new();
    let mut sources = Vec::new();
    let keep = |name: &str| events.is_empty() || events.iter().any(|e| e == name);

    // Sessions in order of first appearance.
    let mut sessions: Vec<(String, Vec<TraceFile>)> = Vec::new();
    for f in files {
        file_profiles.push(FileProfile {
            path: f.path.clone(),
            session: f.session.clone(),
            profile: profile(ProfileIn {
                events: &f.events,
                calls: &f.calls,
                outermost_by_depth: &f.outermost_by_depth,
                recursive: f.recursive_calls,
                errors: &f.errors,
                span_us: f.tim_range.map(|(lo, hi)| hi.saturating_sub(lo)),
            }),
        });
        if let Some((lo, hi)) = f.tim_range {
            all_span = Some(all_span.unwrap_or(0).saturating_add(hi.saturating_sub(lo)));
        }
        for (d, n) in &f.outermost_by_depth {
            *all_depths.entry(*d).or_default() += n;
        }
        merge_events(&mut all_events, &f.events);
        for (k, c) in &f.calls {
            let t = all_calls.entry(k.clone()).or_default();
            t.count += c.count;
            t.cpu_us += c.cpu_us;
            t.elapsed_us += c.elapsed_us;
        }
        for (k, n) in &f.errors {
            *all_errors.entry(k.clone()).or_default() += n;
        }
        all_recursive += f.recursive_calls;
        for w in &f.slowest {
            if keep(&w.event) {
                insert_slowest(&mut slowest, w.clone(), opts.top);
            }
        }
        let ev_name = |i: u32| f.events[i as usize].name.clone();
        for ((e, k), a) in &f.io_files {
            io_files.entry((ev_name(*e), *k)).or_default().merge(a);
        }
        for ((e, k), a) in &f.io_objs {
            io_objs.entry((ev_name(*e), *k)).or_default().merge(a);
        }
        for ((e, k, r), a) in &f.io_ranges {
            io_ranges.entry((ev_name(*e), *k, *r)).or_default().merge(a);
        }
        sources.push(source_file(&f.stats, &f.path, f.gzip));
        if f.stats.unparsed > 0 {
            results.warnings.push(format!(
                "{}: {} line(s) could not be parsed (first at line {})",
                f.path,
                f.stats.unparsed,
                f.stats.unparsed_first.first().map(|u| u.line).unwrap_or(0)
            ));
        }
        match sessions.iter_mut().find(|(s, _)| *s == f.session) {
            Some((_, v)) => v.push(f),
            None => sessions.push((f.session.clone(), vec![f])),
        }
    }

    for (session, group) in sessions {
        let mut paths = Vec::new();
        let mut warnings = Vec::new();
        let mut it = group.into_iter();
        let first = it.next().expect("a session has at least one file");
        paths.push(first.path.clone());
        warnings.extend(first.warnings);
        let offset = first.offset_us;
        let mut binned = first.binned;
        for f in it {
            paths.push(f.path.clone());
            warnings.extend(f.warnings.iter().cloned());
            let mut b = f.binned;
            // Anchored files are already on the wall-clock axis.
            let shift = match (offset, f.offset_us) {
                (Some(_), Some(_)) => 0,
                _ => {
                    warnings.push(format!(
                        "{}: not anchored to wall-clock time; placed after the previous file",
                        f.path
                    ));
                    match (binned.key_range(), b.key_range()) {
                        (Some((_, hi)), Some((lo, _))) => hi + 1 - lo,
                        _ => 0,
                    }
                }
            };
            b.shift(shift);
            binned.merge(b)?;
        }
        let fin = binned.finish(BucketConvention::Exact, &keep);
        warnings.extend(fin.warning);
        let started = match offset {
            Some(_) => rfc3339_ns(fin.start_ns),
            None => String::new(),
        };
        let mut run = RunResult {
            name: format!("trace {session}"),
            phase: "trace".into(),
            spec: Spec::of(
                json!({"source": "oracle-10046", "files": paths, "session": session,
                         "anchored": offset.is_some()}),
            )?,
            started,
            duration_s: fin.duration_s,
            interval_s: fin.interval_s,
            ops: fin.ops,
            warnings,
            ..Default::default()
        };
        if run.ops.is_empty() {
            run.warnings
                .push("no wait events (after --event filtering)".into());
        }
        if run.duration_s <= 0.0 {
            // One timestamp, or none: the session covers no span, so it has counts, not rates.
            run.duration_s = 0.0;
            run.duration_unknown = true;
            run.warnings.push(
                "the session's trace lines cover no time span (one timestamp or none): counts \
                 only, no rates"
                    .into(),
            );
        }
        results.runs.push(run);
    }
    // Fill counters from the per-file profiles (covers every file of each session).
    for run in &mut results.runs {
        let paths: Vec<String> = run
            .spec
            .as_ref()
            .map(|s| s.files.clone())
            .unwrap_or_default();
        let mut waits = 0.0;
        let mut calls = 0.0;
        for p in file_profiles.iter().filter(|p| paths.contains(&p.path)) {
            calls += p
                .profile
                .calls
                .values()
                .map(|c| c.count as f64)
                .sum::<f64>();
            waits += p
                .profile
                .rows
                .iter()
                .filter(|r| r.between_calls_count.is_some())
                .filter_map(|r| r.count.map(|c| c as f64))
                .sum::<f64>();
        }
        run.counters.insert("waits".into(), waits);
        run.counters.insert("outermost_calls".into(), calls);
        let unparsed: f64 = sources
            .iter()
            .filter(|s| paths.contains(&s.path))
            .map(|s| s.unparsed as f64)
            .sum();
        run.counters.insert("unparsed_lines".into(), unparsed);
    }
    results.trace_profile = Some(TraceProfile {
        total: profile(ProfileIn {
            events: &all_events,
            calls: &all_calls,
            outermost_by_depth: &all_depths,
            recursive: all_recursive,
            errors: &all_errors,
            span_us: all_span,
        }),
        files: file_profiles,
    });
    results.trace_io = Some(trace_io(&all_events, io_files, io_objs, io_ranges, &keep));
    results.trace_slowest = slowest;
    results.source = Some(SourceInfo {
        format: "oracle-10046".into(),
        files: sources,
    });
    Ok(results)
}

pub(super) fn base_name(p: &str) -> String {
    Path::new(p)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.to_string())
}

pub(super) fn trace_io(
    events: &[EventTotals],
    files: HashMap<(String, i64), IoAgg>,
    objs: HashMap<(String, i64), IoAgg>,
    ranges: HashMap<(String, i64, u64), IoAgg>,
    keep: &dyn Fn(&str) -> bool,
) -> TraceIo {
    const TOP: usize = 50;
    let figures = |a: &IoAgg| IoFigures {
        count: a.count,
        seconds: a.ela_us as f64 / 1e6,
        mean_us: a.ela_us as f64 / a.count.max(1) as f64,
        max_us: a.max_us,
        blocks: a.blocks,
    };
    let mut out = Vec::new();
    for e in events.iter().filter(|e| e.io && keep(&e.name)) {
        let mut fl: Vec<(&i64, &IoAgg)> = files
            .iter()
            .filter(|((n, _), _)| *n == e.name)
            .map(|((_, k), a)| (k, a))
            .collect();
        fl.sort_by(|a, b| b.1.ela_us.cmp(&a.1.ela_us).then(a.0.cmp(b.0)));
        let fl = fl
            .iter()
            .map(|(k, a)| {
                let blocks = a.min_block != u64::MAX;
                IoByFile {
                    file: **k,
                    min_block: blocks.then_some(a.min_block),
                    max_block: blocks.then_some(a.max_block),
                    io: figures(a),
                }
            })
            .collect();
        let mut ol: Vec<(&i64, &IoAgg)> = objs
            .iter()
            .filter(|((n, _), _)| *n == e.name)
            .map(|((_, k), a)| (k, a))
            .collect();
        let objects_total = ol.len() as u64;
        ol.sort_by(|a, b| b.1.ela_us.cmp(&a.1.ela_us).then(a.0.cmp(b.0)));
        let ol = ol
            .iter()
            .take(TOP)
            .map(|(k, a)| IoByObject {
                obj: **k,
                io: figures(a),
            })
            .collect();
        let mut rl: Vec<(&(String, i64, u64), &IoAgg)> = ranges
            .iter()
            .filter(|((n, _, _), _)| *n == e.name)
            .collect();
        let block_ranges_total = rl.len() as u64;
        rl.sort_by(|a, b| b.1.ela_us.cmp(&a.1.ela_us).then(a.0.cmp(b.0)));
        let rl = rl
            .iter()
            .take(TOP)
            .map(|((_, f, r), a)| IoByRange {
                file: *f,
                first_block: r * BLOCK_RANGE,
                last_block: (r + 1).saturating_mul(BLOCK_RANGE) - 1,
                io: figures(a),
            })
            .collect();
        out.push(TraceIoEvent {
            event: e.name.clone(),
            files: fl,
            objects: ol,
            objects_total,
            block_ranges: rl,
            block_ranges_total,
        });
    }
    TraceIo {
        block_range_blocks: BLOCK_RANGE,
        top: TOP as u64,
        events: out,
    }
}
