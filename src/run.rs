//! Executes one workload on a prepared target and produces its [`RunResult`].
//!
//! Flow: open the target, create one engine per session (so set-up errors surface before any
//! I/O), create recorders, start all sessions together, take system snapshots at the start of
//! measurement (after warm-up) and at the end, drive the collector (merging intervals, live
//! progress) until the deadline, quota, an error or Ctrl-C, then assemble the result with CPU,
//! run-queue, device and page-cache figures and the warnings they call for.
//!
//! Verification: `--verify auto` becomes `full` on iolens' own (stamped) scratch files and
//! `none` elsewhere; the resolved mode is what the stored spec says. Runs that write stamp
//! every block and track generations; corruption found by the sessions ends up in
//! `RunResult::corruption` (the run is still returned, so its results can be written).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::engine::{make_engine, run_engine_session, session_buffers, SessionCtx, SessionOutcome};
use crate::recorder::{session_summary_of, IntervalSnapshot, IO_OPS};
use crate::results::{IoBuffers, PageCacheInfo, RunResult, SessionSummary};
pub use crate::session::RunContext;
use crate::session::{self, DiskWindow, Gate, Plan, Watch};
use crate::stamp::{GenMap, OnCorruption, VerifyMode, VerifyShared, UNIT};
use crate::target::{Target, TargetKind};
use crate::units::{fmt_ns, fmt_rate};
use crate::workload::{EngineKind, WorkloadSpec};

/// Options of one execution that are not part of the workload itself.
pub struct RunOptions<'a> {
    /// Label shown in progress and stored as the run's name.
    pub name: String,
    /// Phase (for calibration steps); `run` otherwise.
    pub phase: String,
    /// Prefix of the progress line (e.g. calibration phase and step).
    pub progress_prefix: String,
    /// Progress, interrupt, start time and block watch, as the command gave them.
    pub ctx: RunContext<'a>,
}

/// Run `spec` on `target`. The spec's sizes must already be resolved against the target.
pub fn execute(spec: &WorkloadSpec, target: &Target, opts: &RunOptions<'_>) -> Result<RunResult> {
    execute_on(spec, std::slice::from_ref(target), opts)
}

/// Run `spec` over `targets` (in the order of `spec.targets`; one target: `spec.target`),
/// spreading its I/O as `spec.stripe` says (see [`crate::stripe`]). Every target is checked
/// (alignment, room, verification, locks, journals) before any I/O. The spec's sizes must
/// already be resolved against the targets (`target_size`: the smallest data area).
pub fn execute_on(
    spec: &WorkloadSpec,
    targets: &[Target],
    opts: &RunOptions<'_>,
) -> Result<RunResult> {
    if targets.is_empty() || targets.len() != spec.target_count() {
        bail!(
            "internal: {} target(s) prepared for a spec of {}",
            targets.len(),
            spec.target_count()
        );
    }
    spec.validate()?;
    let (mode, note) = resolve_verify(spec, targets)?;
    let resolved = WorkloadSpec {
        verify: mode,
        ..spec.clone()
    };
    let spec = &resolved;
    let writes = spec.pattern.writes() && spec.engine != EngineKind::Null;
    let each = spec.per_target_working_set();
    let per_target_blocks = each / spec.block_size;
    for target in targets {
        let stamped = target.kind == TargetKind::Scratch;
        if writes
            && stamped
            && (!spec.block_size.is_multiple_of(UNIT as u64)
                || !spec.region_offset.is_multiple_of(UNIT as u64))
        {
            bail!(
                "writes to an iolens scratch file must be whole 512-byte units (its blocks are \
                 stamped per 512 bytes): use a --bs and --offset that are multiples of 512"
            );
        }
        if spec.engine != EngineKind::Null {
            target.check_alignment(spec)?;
        }
        if spec
            .region_offset
            .checked_add(each)
            .is_none_or(|end| end > target.data_size)
        {
            bail!(
                "the working set does not fit in the data area of {}",
                target.path.display()
            );
        }
    }
    let files = targets
        .iter()
        .map(|t| t.open(spec))
        .collect::<Result<Vec<_>>>()?;
    let mut locks = Vec::new();
    if writes || mode != VerifyMode::None {
        for (f, t) in files.iter().zip(targets) {
            locks.push(crate::stamp::lock(f, writes, &t.path)?);
        }
    }
    // Writes to a scratch file are journaled (offline lost-write detection, see `journal`):
    // the journal hands out this run's nonce, so generations grow from run to run.
    let mut journals = Vec::with_capacity(targets.len());
    for (f, t) in files.iter().zip(targets) {
        journals.push(if writes && t.kind == TargetKind::Scratch {
            open_journal(spec, t, f, per_target_blocks)?
        } else {
            None
        });
    }
    let vshared: Option<Vec<VerifyShared>> = (writes || mode != VerifyMode::None).then(|| {
        targets
            .iter()
            .zip(&journals)
            .map(|(t, j)| {
                let nonce = j
                    .as_ref()
                    .map(|j| j.nonce())
                    .unwrap_or_else(|| rand::random::<u64>() % 0xFF_FFFF + 1);
                VerifyShared {
                    mode,
                    stamp: writes,
                    target_id: t.id,
                    gens: writes.then(|| GenMap::new(per_target_blocks, nonce)),
                    region_offset: spec.region_offset,
                    block_size: spec.block_size,
                    data_offset: t.data_offset,
                    target: if targets.len() > 1 {
                        t.path.display().to_string()
                    } else {
                        String::new()
                    },
                }
            })
            .collect()
    });
    let disks = DiskWindow::of(targets.iter().map(|t| t.path.as_path()));
    let device = disks.device();
    let page_before = if !spec.direct && spec.engine != EngineKind::Null && targets.len() == 1 {
        targets[0]
            .residency(spec.region_offset, spec.working_set())
            .ok()
    } else {
        None
    };
    let sessions = spec.sessions as usize;
    let quota_total = spec.io_count.unwrap_or(u64::MAX);
    let many = targets.len() > 1;
    let mut watch = RunProgress {
        pb: crate::progress::line(opts.ctx.progress),
        opts,
        spec,
        disks,
    };
    // One set of recorders per target: each I/O is recorded once, in its target's; the run's
    // totals are their exact sum (`results::sum_op_sets`), made once the sessions are done.
    let op_sets = vec![IO_OPS; targets.len()];
    let plan = Plan {
        sessions,
        ops: &op_sets,
        warmup: Duration::from_secs_f64(spec.warmup_s),
        duration: spec.duration_s.map(Duration::from_secs_f64),
        interval: Duration::from_secs_f64(spec.interval_s),
        device: device.as_deref(),
        interrupt: opts.ctx.interrupt,
        thread_name: "iolens-io",
        start_at: opts.ctx.start_at,
        block_watch: opts.ctx.block_watch,
    };
    // Every session's I/O buffers in one pool, on huge pages where asked and given (see
    // `engine::buffers`); a run that cannot map it falls back to per-session heap buffers.
    let pool = crate::engine::buffers::BufferPool::new(
        sessions,
        spec.qd as usize,
        spec.block_size as usize,
        spec.huge_pages,
    )
    .ok();
    let data_offsets: Vec<u64> = targets.iter().map(|t| t.data_offset).collect();
    let names: Vec<String> = targets
        .iter()
        .map(|t| t.path.display().to_string())
        .collect();
    let placement = crate::stripe::Placement::of(spec);
    let (files_ref, vshared_ref, pool_ref) = (&files, vshared.as_deref(), pool.as_ref());
    let (offsets_ref, names_ref) = (&data_offsets[..], &names[..]);
    if sessions > 1 || many {
        crate::sys::raise_nofile_limit();
    }
    // One session: its engine is made before it reports ready, so set-up errors surface before
    // any I/O.
    let session = |i: usize, gate: Gate<()>| -> Result<(SessionOutcome, SessionSummary)> {
        // Each session reads and writes through a descriptor of its own on each target, as a
        // database's processes (and fio's jobs) do: on one shared descriptor every pread of
        // every session takes and drops a reference on the same open file. Measured at 480
        // sessions of O_DIRECT 8 KiB reads: about 3 % more IOPS. Out of descriptors, the
        // session shares the run's.
        let own = targets
            .iter()
            .map(|t| own_descriptor(t, spec, sessions))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&std::fs::File> = own
            .iter()
            .zip(files_ref)
            .map(|(o, f)| o.as_ref().unwrap_or(f))
            .collect();
        let eng = make_engine(spec, &refs)?;
        let buf = session_buffers(spec, i as u32, pool_ref);
        let Some(mut st) = gate.ready(()) else {
            return Ok((idle_outcome(None), SessionSummary::default()));
        };
        // The planned end closes the measured window (see `recorder`).
        for r in &mut st.recs {
            r.set_end(st.end);
        }
        let quota = if quota_total == u64::MAX {
            u64::MAX
        } else {
            quota_total / sessions as u64 + u64::from((i as u64) < quota_total % sessions as u64)
        };
        let ctx = SessionCtx {
            spec,
            session: i as u32,
            data_offsets: offsets_ref,
            names: names_ref,
            placement,
            quota,
            stop: &st.stop,
            end: st.end,
            verify: vshared_ref,
        };
        let out = if quota == 0 {
            idle_outcome(None)
        } else {
            run_engine_session(&ctx, &mut st.recs, eng, &buf)
        };
        Ok((out, session_summary_of(&st.recs)))
    };

    let sessions_done = AtomicBool::new(false);
    let mut journal_err: Option<String> = None;
    let driven = std::thread::scope(|sc| {
        // Journal flusher: records completed generations every interval, off the hot path.
        // Each flush first fdatasyncs the target; on a buffered run that would write back the
        // page cache the run is measuring, so a buffered run (unless O_DSYNC) records its
        // generations at the end only (a crash mid-run leaves the journal lagging: sound).
        let periodic = spec.direct || spec.sync == crate::workload::SyncMode::Dsync;
        // Each target's journal with the generations of its own blocks.
        let mut flushing: Vec<_> = journals
            .iter_mut()
            .zip(&files)
            .zip(vshared.iter().flatten())
            .filter_map(|((j, f), v)| Some((j.as_mut()?, f, v.gens.as_ref()?)))
            .collect();
        let flusher = if periodic && !flushing.is_empty() {
            let (done, err) = (&sessions_done, &mut journal_err);
            Some(sc.spawn(move || {
                let mut last = Instant::now();
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                    if last.elapsed() >= crate::journal::FLUSH_INTERVAL {
                        last = Instant::now();
                        for (j, file, gens) in flushing.iter_mut() {
                            if let Err(e) = j.flush(gens, file) {
                                *err = Some(format!("{e:#}"));
                                return;
                            }
                        }
                    }
                }
            }))
        } else {
            None
        };
        let driven = session::drive(&plan, session, &mut watch);
        sessions_done.store(true, Ordering::Relaxed);
        if let Some(f) = flusher {
            let _ = f.join();
        }
        driven
    });
    let mut driven = driven?;
    let (base, interrupted) = (driven.base, driven.interrupted);
    let mut outcomes = Vec::with_capacity(sessions);
    let mut summaries = Vec::with_capacity(sessions);
    for o in std::mem::take(&mut driven.outs) {
        match o {
            Ok((out, s)) => {
                outcomes.push(out);
                summaries.push(s);
            }
            Err(e) => outcomes.push(idle_outcome(Some(format!("{e:#}")))),
        }
    }
    let pb = watch.pb;
    pb.finish_and_clear();
    // Every write has completed: record the final generations.
    let mut journal_note = String::new();
    for ((j, file), v) in journals
        .iter_mut()
        .zip(&files)
        .zip(vshared.iter().flatten())
    {
        let (Some(j), Some(gens)) = (j.as_mut(), v.gens.as_ref()) else {
            continue;
        };
        let mut err = journal_err.clone();
        if err.is_none() {
            if let Err(e) = j.flush(gens, file) {
                err = Some(format!("{e:#}"));
            }
        }
        let mut jn = std::mem::take(&mut j.note);
        if let Some(e) = &err {
            crate::out::warn(&format!(
                "the generation journal {} was not brought up to date ({e}); \
                 it lags this run's writes, so `iolens verify` may miss stale blocks they cover",
                j.path().display()
            ));
            jn = format!("generation journal not up to date: {e}");
            if many {
                jn += &format!(" ({})", j.path().display());
            }
        }
        if !jn.is_empty() && !journal_note.contains(&jn) {
            if !journal_note.is_empty() {
                journal_note += "; ";
            }
            journal_note += &jn;
        }
    }

    if let Some(e) = outcomes.iter().find_map(|o| o.error.clone()) {
        bail!("{e}");
    }
    let tallies = outcomes
        .iter_mut()
        .map(|o| std::mem::take(&mut o.verify))
        .collect();
    let note = match (note.is_empty(), journal_note.is_empty()) {
        (_, true) => note,
        (true, false) => journal_note,
        (false, false) => format!("{note}; {journal_note}"),
    };
    let (mut vstats, mut corruption) = crate::stamp::merge(
        vshared.as_ref().and_then(|v| v.first()),
        mode,
        &note,
        tallies,
    );
    if let Some(v) = &vshared {
        vstats.generation_slots = v
            .iter()
            .filter_map(|v| v.gens.as_ref().map(|g| g.slots()))
            .sum();
    }
    vstats.stopped = vstats.errors > 0 && spec.on_corruption == OnCorruption::Stop;
    // (A run over several targets: each report names its target.)
    if !many
        && corruption
            .iter()
            .any(|c| c.kind == crate::results::CorruptionKind::Truncated)
    {
        let target = &targets[0];
        let len = target.file().metadata().map(|m| m.len()).unwrap_or(0);
        for c in corruption
            .iter_mut()
            .filter(|c| c.kind == crate::results::CorruptionKind::Truncated)
        {
            c.message += &format!(
                "; {} is now {} bytes, its data area should end at {}",
                target.path.display(),
                len,
                target.data_offset + target.data_size
            );
        }
    }
    // Completions at or after the planned end are not recorded (see `recorder`): the measured
    // span ends there at the latest.
    let mut end = outcomes.iter().map(|o| o.end).max().unwrap_or(base);
    if let Some(d) = spec.duration_s {
        end = end.min(base + Duration::from_secs_f64(d));
    }
    let measured_s = end.saturating_duration_since(base).as_secs_f64();
    let mut sets = driven.ops(measured_s);
    let ops = if many {
        crate::results::sum_op_sets(&sets, &IO_OPS.names())?
    } else {
        sets.remove(0)
    };
    let (mut start_snap, mut end_snap) = driven.snaps;
    let device_intervals = if spec.engine == EngineKind::Null {
        Vec::new()
    } else {
        crate::sys::device_intervals(&driven.disk_edges)
    };
    let sched_intervals = crate::sys::sched_intervals(&driven.sched_edges);
    let ios: u64 = ops.iter().map(|o| o.count).sum();
    // Run-queue figures from the session threads themselves, from the measurement base to exit.
    let sched = outcomes
        .iter()
        .filter_map(|o| o.sched)
        .fold((0, 0), |a, s| (a.0 + s.0, a.1 + s.1));
    start_snap.set_sched((0, 0));
    end_snap.set_sched(sched);
    let (cpu, dev) = start_snap.delta(&end_snap, ios, device.as_deref());

    let mut r = RunResult {
        name: opts.name.clone(),
        phase: opts.phase.clone(),
        spec: crate::results::Spec::of(spec)?,
        started: humantime::format_rfc3339_micros(
            std::time::SystemTime::now() - Instant::now().saturating_duration_since(base),
        )
        .to_string(),
        duration_s: measured_s,
        duration_unknown: false,
        interval_s: spec.interval_s,
        warmup_s: spec.warmup_s,
        ops,
        sessions: summaries,
        cpu: Some(cpu),
        device: if spec.engine == EngineKind::Null {
            None
        } else {
            dev
        },
        page_cache: page_before.map(|b| PageCacheInfo {
            resident_before: b,
            resident_after: targets[0]
                .residency(spec.region_offset, spec.working_set())
                .unwrap_or(0.0),
            working_set_bytes: spec.working_set(),
        }),
        counters: Default::default(),
        interrupted,
        warnings: Vec::new(),
        verify: (spec.engine != EngineKind::Null).then_some(vstats),
        corruption,
        block: None,
        device_intervals,
        sched_intervals,
        io_buffers: pool
            .as_ref()
            .filter(|_| spec.engine != EngineKind::Null)
            .map(|p| IoBuffers {
                bytes: p.len(),
                huge_bytes: p.huge_bytes().unwrap_or(0),
                huge_pages_asked: spec.huge_pages == crate::workload::HugePages::Try,
                hugetlb: p.hugetlb(),
                thp_setting: crate::sys::thp_setting(),
            }),
        targets: Vec::new(),
    };
    if many {
        r.targets = targets
            .iter()
            .zip(sets)
            .enumerate()
            .map(|(i, (t, ops))| {
                let ios =
                    (spec.engine != EngineKind::Null).then(|| ops.iter().map(|o| o.count).sum());
                watch
                    .disks
                    .target_run(i, &t.path, (t.kind.into(), t.data_size), ops, ios)
            })
            .collect();
    }
    r.counters.insert(
        "ios_completed_incl_warmup".into(),
        outcomes.iter().map(|o| o.completed).sum::<u64>() as f64,
    );
    crate::watch::own::OwnWatch::take_into(opts.ctx.block_watch, &mut r)?;
    r.warnings = run_warnings(&r, spec);
    r.warnings
        .extend(unregistered_warning(&outcomes, r.io_buffers.as_ref()));
    Ok(r)
}

/// Open the generation journal of a scratch file for a run that writes it. Setting
/// `IOLENS_JOURNAL=off` runs without one (to measure what the journal costs); it is refused
/// when the target already has a journal, which such a run would make wrong.
fn open_journal(
    spec: &WorkloadSpec,
    target: &Target,
    file: &std::fs::File,
    blocks: u64,
) -> Result<Option<crate::journal::RunJournal>> {
    if std::env::var_os("IOLENS_JOURNAL").is_some_and(|v| v == "off") {
        let jp = crate::journal::locate(&target.path, file, target.id);
        if std::fs::symlink_metadata(&jp).is_ok() {
            bail!(
                "IOLENS_JOURNAL=off, but {} has a generation journal ({}): writing without \
                 it would make it report stale blocks",
                target.path.display(),
                jp.display()
            );
        }
        return Ok(None);
    }
    crate::journal::RunJournal::open(
        &target.path,
        file,
        target.id,
        crate::journal::RunGeometry {
            data_size: target.data_size,
            region_offset: spec.region_offset,
            block_size: spec.block_size,
            blocks,
        },
    )
    .map(Some)
}

/// Resolve `--verify` against the targets: the mode to use and, when off, why. Stamps are
/// checked only when every target carries them (iolens' own scratch files).
fn resolve_verify(spec: &WorkloadSpec, targets: &[Target]) -> Result<(VerifyMode, String)> {
    let unstamped = targets.iter().find(|t| t.kind != TargetKind::Scratch);
    if spec.engine == EngineKind::Null {
        if matches!(spec.verify, VerifyMode::Header | VerifyMode::Full) {
            bail!(
                "--verify {} needs real I/O: the null engine reads nothing",
                spec.verify.name()
            );
        }
        return Ok((VerifyMode::None, "null engine: nothing is read".into()));
    }
    Ok(match (spec.verify, unstamped) {
        (VerifyMode::Auto, None) => (VerifyMode::Full, String::new()),
        (VerifyMode::Auto, Some(target)) => (
            VerifyMode::None,
            format!(
                "verification off: {} is a {} iolens did not create, so its blocks carry no stamps",
                target.path.display(),
                target.kind.name()
            ),
        ),
        (VerifyMode::None, _) => (VerifyMode::None, "verification off (--verify none)".into()),
        (m, Some(target)) => bail!(
            "--verify {} needs blocks stamped by iolens, but {} is a {} iolens did not create \
             (its blocks carry no stamps); use --verify none, or a scratch file iolens creates",
            m.name(),
            target.path.display(),
            target.kind.name()
        ),
        (m, None) => (m, String::new()),
    })
}

/// A session that did no I/O (a zero quota, a run called off, or with the error that ended it).
fn idle_outcome(error: Option<String>) -> SessionOutcome {
    SessionOutcome {
        end: Instant::now(),
        sched: None,
        error,
        completed: 0,
        unregistered: None,
        verify: Default::default(),
    }
}

/// The warning for io_uring sessions whose buffers the kernel would not register (they pass
/// their buffers with every I/O: more CPU per I/O than a run with them registered).
fn unregistered_warning(
    outcomes: &[SessionOutcome],
    buffers: Option<&IoBuffers>,
) -> Option<String> {
    let refused: Vec<i32> = outcomes.iter().filter_map(|o| o.unregistered).collect();
    let errno = *refused.first()?;
    let mut w = format!(
        "io_uring: the kernel refused to register the I/O buffers of {} of {} sessions ({}); \
         they pass their buffers with every I/O, which costs more CPU per I/O",
        refused.len(),
        outcomes.len(),
        std::io::Error::from_raw_os_error(errno)
    );
    if errno == libc::ENOMEM {
        let limit = crate::sys::memlock_limit()
            .map(|l| format!(" ({})", crate::units::fmt_bytes(l)))
            .unwrap_or_default();
        w += &format!(": the locked-memory limit{limit} is too low");
        let on_huge = buffers.is_some_and(|b| b.huge_bytes > 0);
        if on_huge {
            w += ", and each ring is charged the whole 2 MiB huge page its buffers sit in";
        }
        w += "; raise it (`ulimit -l`), run as root";
        if on_huge {
            w += ", or keep the buffers on small pages (--huge-pages off)";
        }
    }
    Some(w)
}

/// The live progress line of a run.
struct RunProgress<'a, 'b> {
    pb: indicatif::ProgressBar,
    opts: &'a RunOptions<'b>,
    spec: &'a WorkloadSpec,
    /// The targets' disks, counted over the measured window when there are several.
    disks: DiskWindow,
}

impl Watch for RunProgress<'_, '_> {
    fn measuring(&mut self) {
        self.disks.measuring();
    }

    fn stopped(&mut self) {
        self.disks.stopped();
    }

    fn tick(&mut self, now: Instant, base: Instant, last: &[IntervalSnapshot], done: u64) {
        let (opts, spec) = (self.opts, self.spec);
        let mut m = String::new();
        if !opts.progress_prefix.is_empty() {
            m += &opts.progress_prefix;
            m += " | ";
        }
        m += &opts.name;
        if now < base {
            m += " | warming up";
        } else {
            if let Some(iv) = last.first() {
                // (Several targets: one snapshot each; counts summed, the worst p99 shown.)
                let count: u64 = last.iter().map(|s| s.count).sum();
                let bytes: u64 = last.iter().map(|s| s.bytes).sum();
                let iops = count as f64 / spec.interval_s;
                let mbs = bytes as f64 / spec.interval_s / 1e6;
                if last.len() > 1 {
                    let p99 = last.iter().map(|s| s.p99_ns).max().unwrap_or(0);
                    m += &format!(
                        " | {} IOPS {:.0} MB/s p99 {} (worst of {} targets)",
                        fmt_rate(iops),
                        mbs,
                        fmt_ns(p99 as f64),
                        last.len()
                    );
                } else {
                    m += &format!(
                        " | {} IOPS {:.0} MB/s p50 {} p99 {}",
                        fmt_rate(iops),
                        mbs,
                        fmt_ns(iv.p50_ns as f64),
                        fmt_ns(iv.p99_ns as f64)
                    );
                }
            }
            match (spec.duration_s, spec.io_count) {
                (Some(d), _) => {
                    let end = base + Duration::from_secs_f64(d);
                    m += &format!(
                        " | {:.0}s left",
                        end.saturating_duration_since(now).as_secs_f64()
                    )
                }
                (_, Some(n)) if !self.disks.several() => m += &format!(" | {done}/{n} I/Os"),
                _ => {}
            }
        }
        self.pb.set_message(crate::progress::fit(&m));
        self.pb.tick();
    }
}

/// Warnings about how the run was made (analysis verdicts about its figures — CPU-bound,
/// page-cache hits, host queueing — are derived from the results by `analysis`).
fn run_warnings(r: &RunResult, spec: &WorkloadSpec) -> Vec<String> {
    let mut w = Vec::new();
    if let Some(v) = &r.verify {
        if v.errors > 0 {
            w.push(format!(
                "DATA CORRUPTION: {} corrupt 512-byte unit(s) found{}",
                v.errors,
                if v.stopped {
                    format!(
                        "; the run stopped at the first after {:.1} s (--on-corruption continue keeps going)",
                        r.duration_s
                    )
                } else {
                    String::new()
                }
            ));
        }
    }
    if r.interrupted {
        w.push(format!(
            "interrupted after {:.1} s: figures cover only the measured part",
            r.duration_s
        ));
    }
    if !spec.direct && spec.engine != EngineKind::Null {
        let mem = crate::sys::memory_bytes();
        if spec.working_set() < mem {
            w.push(format!(
                "buffered run on a working set ({}) smaller than RAM ({}): reads may come from the page cache, not the storage",
                crate::units::fmt_bytes(spec.working_set()),
                crate::units::fmt_bytes(mem)
            ));
        }
        if let Some(pc) = &r.page_cache {
            if pc.resident_before > 0.01 {
                w.push(format!(
                    "{:.0} % of the working set was in the page cache before the run",
                    pc.resident_before * 100.0
                ));
            }
        }
    }
    w
}

/// A descriptor of a session's own on the target (see [`execute`]'s sessions): `None` for
/// a run of one session (it has the run's to itself), on the null engine (no I/O), or when the
/// process has no descriptors left (the session then shares the run's). The same inode as the
/// run's, checked by [`Target::open`].
fn own_descriptor(
    target: &Target,
    spec: &WorkloadSpec,
    sessions: usize,
) -> Result<Option<std::fs::File>> {
    if sessions < 2 || spec.engine == EngineKind::Null {
        return Ok(None);
    }
    match target.open(spec) {
        Ok(f) => Ok(Some(f)),
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .and_then(|io| io.raw_os_error())
                    .is_some_and(|n| n == libc::EMFILE || n == libc::ENFILE)
            }) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
