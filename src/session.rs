//! The session driver shared by `run` and `db` (SQLite and PostgreSQL): spawn the sessions,
//! wait until every one is ready, set one measurement base, hand each its recorders, take the
//! system snapshots at the start and end of measurement, drive the collectors (live progress,
//! deadline, Ctrl-C), join, and hand back the per-operation results.
//!
//! Data flow: [`drive`] runs `body(i, gate)` on one thread per session. The body prepares
//! (opens an engine, connects, prepares statements) and calls [`Gate::ready`], which blocks
//! until all sessions are ready and returns its [`Start`]: one [`SessionRecorder`] per
//! [`OpSet`] of the [`Plan`], the base (warm-up before it is counted, not recorded), the end
//! and a stop flag. Sessions start together: each waits at one start line, which the driver
//! opens once every session holds its recorders, fixing the base at that moment (so at
//! hundreds of sessions none starts before the others have been handed their recorders). The driver merges the recorders' intervals off the hot path and reports
//! each interval to a [`Watch`] once every collector has closed it, exactly once, in order,
//! and none that starts at or after the planned end.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use crate::recorder::{recorders, Collector, IntervalSnapshot, OpSet, SessionRecorder};
use crate::results::OpResult;
use crate::sys::{DiskCounters, SchedEdge, SchedReader, SysSnapshot};

/// What every producer's run takes from its command besides the workload: whether it draws
/// progress, what ends it early, when its measurement starts and what watches its own I/O.
/// Built once by the command (`run`, `calibrate`, `plan --verify`, `db run`) and passed as one
/// value; a producer that runs several steps hands each a copy ([`RunContext::starting_at`]
/// for a step with its own start).
#[derive(Clone, Copy)]
pub struct RunContext<'a> {
    /// Draw live progress on a terminal.
    pub progress: bool,
    /// Global interrupt flag (Ctrl-C): ends the run early, keeping what was measured.
    pub interrupt: &'a AtomicBool,
    /// Start measuring at this wall-clock time (`--start-at`), the warm-up before it.
    pub start_at: Option<std::time::SystemTime>,
    /// Trace the block layer under the run's own I/O (`--watch`) with this watch, over its
    /// targets in target order (`None`: no trace).
    pub block_watch: Option<&'a crate::watch::own::OwnWatch>,
}

impl<'a> RunContext<'a> {
    /// The context of a command: progress as given, Ctrl-C ends it, no start time, no watch.
    pub fn new(progress: bool) -> RunContext<'static> {
        RunContext {
            progress,
            interrupt: crate::interrupt::flag(),
            start_at: None,
            block_watch: None,
        }
    }

    /// This context with its measurement starting at `start_at`.
    pub fn starting_at(self, start_at: Option<std::time::SystemTime>) -> RunContext<'a> {
        RunContext { start_at, ..self }
    }
}

/// What to drive.
pub(crate) struct Plan<'a> {
    /// Number of sessions (threads).
    pub(crate) sessions: usize,
    /// The recorders each session gets, one per set (e.g. main file I/O, log I/O, statements).
    pub(crate) ops: &'a [OpSet],
    /// Time after the start before anything is recorded.
    pub(crate) warmup: Duration,
    /// Measured time after the warm-up; `None` runs until the sessions end (e.g. an I/O quota).
    pub(crate) duration: Option<Duration>,
    /// Length of one recorded interval.
    pub(crate) interval: Duration,
    /// Block device whose counters the snapshots read.
    pub(crate) device: Option<&'a str>,
    /// Global interrupt flag (Ctrl-C): sets the stop flag, keeping what was measured.
    pub(crate) interrupt: &'a AtomicBool,
    /// Session threads are named `{thread_name}-{i}`.
    pub(crate) thread_name: &'a str,
    /// Start of measurement at this wall-clock time (`--start-at`; the warm-up runs before
    /// it): once every session is ready the driver waits for it, and calls the run off when
    /// it has already passed.
    pub(crate) start_at: Option<std::time::SystemTime>,
    /// Block-layer watch of this process's own I/O (`--watch`): armed with the run's
    /// measurement base, interval and planned end as the start line opens.
    pub(crate) block_watch: Option<&'a crate::watch::own::OwnWatch>,
}

/// What a session gets once every session is ready.
pub(crate) struct Start {
    /// One recorder per [`Plan::ops`] set, in that order.
    pub(crate) recs: Vec<SessionRecorder>,
    /// Measurement base: completions before it are warm-up.
    pub(crate) base: Instant,
    /// Planned end of measurement, if the run has a duration.
    pub(crate) end: Option<Instant>,
    /// Set by the driver at the end, on Ctrl-C, or when a session failed to get ready.
    pub(crate) stop: Arc<AtomicBool>,
}

/// Where every session waits until the driver opens it: the measurement base and planned
/// end, once set.
#[derive(Default)]
struct StartLine {
    open: Mutex<Option<(Instant, Option<Instant>)>>,
    cv: Condvar,
}

impl StartLine {
    fn open(&self, base: Instant, end: Option<Instant>) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = Some((base, end));
        self.cv.notify_all();
    }

    fn wait(&self) -> (Instant, Option<Instant>) {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(v) = *g {
                return v;
            }
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A session's handle to the start line.
pub(crate) struct Gate<R> {
    ready: Option<Sender<Option<R>>>,
    go: Receiver<Start>,
    line: Arc<StartLine>,
}

impl<R> Gate<R> {
    /// Report this session ready (with what the driver should know of it, e.g. a server
    /// process id) and wait for the start. `None`: the run was called off before it started
    /// (another session failed to get ready).
    pub(crate) fn ready(mut self, r: R) -> Option<Start> {
        if let Some(tx) = self.ready.take() {
            let _ = tx.send(Some(r));
        }
        let mut st = self.go.recv().ok()?;
        let (base, end) = self.line.wait();
        for rec in &mut st.recs {
            rec.set_base(base);
        }
        st.base = base;
        st.end = end;
        Some(st)
    }
}

impl<R> Drop for Gate<R> {
    fn drop(&mut self) {
        // A session that ends without being ready (its set-up failed) calls the run off.
        if let Some(tx) = self.ready.take() {
            let _ = tx.send(None);
        }
    }
}

/// Live view of the driven sessions (progress display, hooks); `R` is what sessions report
/// with [`Gate::ready`].
pub(crate) trait Watch<R = ()> {
    /// Every session is ready (`ready` in session order); measurement starts when this returns.
    /// An error calls the run off (the sessions are stopped and joined) and is returned.
    fn starting(&mut self, _ready: &[R]) -> Result<()> {
        Ok(())
    }
    /// Interval `snaps[0].index` has been closed by every collector (`snaps[i]` is set `i`'s).
    fn interval(&mut self, _snaps: &[IntervalSnapshot]) {}
    /// Called about four times a second: `last` is the last interval reported (empty before
    /// the first), `done` the operations of set 0 in closed intervals.
    fn tick(&mut self, _now: Instant, _base: Instant, _last: &[IntervalSnapshot], _done: u64) {}
    /// Every session has stopped recording (the end snapshot has just been taken); the
    /// sessions have not been joined yet.
    fn stopped(&mut self) {}
    /// Measurement begins: as the start line opens, before any session's I/O, when the run has
    /// no warm-up; else once the base has passed (the start snapshot has just been taken).
    fn measuring(&mut self) {}
}

/// No live view.
impl<R> Watch<R> for () {}

/// What [`drive`] hands back.
pub(crate) struct Driven<R, O> {
    /// What each session reported with [`Gate::ready`], in session order.
    pub(crate) ready: Vec<R>,
    /// Each session's outcome, in session order (a panic becomes an error).
    pub(crate) outs: Vec<Result<O>>,
    /// The measurement base.
    pub(crate) base: Instant,
    /// System snapshots at the base and once every session stopped recording.
    pub(crate) snaps: (SysSnapshot, SysSnapshot),
    /// The device's counters read at the edges of the intervals (seconds since the base),
    /// the first at the base (empty without a device).
    pub(crate) disk_edges: Vec<(f64, DiskCounters)>,
    /// The session threads' scheduling read at the same edges (always, device or not).
    pub(crate) sched_edges: Vec<(f64, SchedEdge)>,
    /// Ctrl-C ended the run before its planned end.
    pub(crate) interrupted: bool,
    collectors: Vec<Collector>,
}

impl<R, O> Driven<R, O> {
    /// The results of each set's operations (in [`Plan::ops`] order), over `measured_s`.
    /// (Once: a second call has nothing left to hand back.)
    pub(crate) fn ops(&mut self, measured_s: f64) -> Vec<Vec<OpResult>> {
        std::mem::take(&mut self.collectors)
            .into_iter()
            .map(|c| c.finish(measured_s))
            .collect()
    }
}

/// Keeps each collector's closed intervals until every collector has closed the same one.
struct Aligner {
    pending: Vec<VecDeque<IntervalSnapshot>>,
    /// Intervals at or past this index start at or after the planned end.
    limit: u64,
}

impl Aligner {
    fn new(sets: usize, plan: &Plan<'_>) -> Aligner {
        let limit = plan.duration.map_or(u64::MAX, |d| {
            (d.as_nanos()).div_ceil(plan.interval.as_nanos()) as u64
        });
        Aligner {
            pending: vec![VecDeque::new(); sets],
            limit,
        }
    }

    /// Take newly closed intervals and report the ones every collector has closed.
    fn pump<R>(
        &mut self,
        cols: &mut [Collector],
        last: &mut Vec<IntervalSnapshot>,
        w: &mut dyn Watch<R>,
    ) {
        for (p, c) in self.pending.iter_mut().zip(cols.iter_mut()) {
            p.extend(c.take_closed());
        }
        while self.pending.iter().all(|p| !p.is_empty()) {
            let snaps: Vec<IntervalSnapshot> = self
                .pending
                .iter_mut()
                .filter_map(|p| p.pop_front())
                .collect();
            // Every collector fills gaps, so their intervals run 0, 1, 2, ... alike.
            if snaps.iter().any(|s| s.index != snaps[0].index) || snaps[0].index >= self.limit {
                continue;
            }
            w.interval(&snaps);
            *last = snaps;
        }
    }
}

/// Run `plan.sessions` sessions of `body` and measure them (see the module doc).
pub(crate) fn drive<R, O, F>(
    plan: &Plan<'_>,
    body: F,
    watch: &mut dyn Watch<R>,
) -> Result<Driven<R, O>>
where
    R: Send,
    O: Send,
    F: Fn(usize, Gate<R>) -> Result<O> + Sync,
{
    let n = plan.sessions;
    let stop = Arc::new(AtomicBool::new(false));
    let line = Arc::new(StartLine::default());
    // The session threads' kernel ids, for their run-queue wait at the interval edges.
    let tids = std::sync::Mutex::new(Vec::with_capacity(n));
    let tids = &tids;
    std::thread::scope(|sc| {
        let (ready_tx, ready_rx) = channel();
        let mut gos = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        let body = &body;
        for i in 0..n {
            let (go_tx, go_rx) = channel();
            gos.push(go_tx);
            let ready = ready_tx.clone();
            let line = line.clone();
            let h = std::thread::Builder::new()
                .name(format!("{}-{i}", plan.thread_name))
                .spawn_scoped(sc, move || {
                    tids.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(crate::sys::gettid());
                    let gate = Gate {
                        ready: Some(ready),
                        go: go_rx,
                        line,
                    };
                    // The session's index travels with its ready report.
                    body(i, gate)
                })
                .context("cannot start a session thread");
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    drop(gos);
                    return Err(e);
                }
            }
        }
        drop(ready_tx);
        let mut ready = Vec::with_capacity(n);
        let mut called_off = false;
        for _ in 0..n {
            match ready_rx.recv() {
                Ok(Some(r)) => ready.push(r),
                Ok(None) | Err(_) => {
                    called_off = true;
                    break;
                }
            }
        }
        let mut refused = if called_off {
            None
        } else {
            watch.starting(&ready).err()
        };
        if let (false, None, Some(at)) = (called_off, &refused, plan.start_at) {
            // The load starts a warm-up before the common start of measurement.
            let load_at = at.checked_sub(plan.warmup).unwrap_or(at);
            refused = crate::placement::sleep_until(load_at, plan.interrupt).err();
        }
        if called_off || refused.is_some() {
            drop(gos);
            stop.store(true, Ordering::Relaxed);
            let mut first = None;
            for h in handles {
                if let Err(e) = join(h) {
                    first.get_or_insert(e);
                }
            }
            return Err(refused
                .or(first)
                .unwrap_or_else(|| anyhow!("a session ended before it was ready")));
        }
        // Recorders are made with a provisional base; each session moves them to the real one
        // when the start line opens.
        let provisional = Instant::now() + plan.warmup;
        let mut sets: Vec<Vec<SessionRecorder>> = Vec::with_capacity(plan.ops.len());
        let mut cols = Vec::with_capacity(plan.ops.len());
        for &ops in plan.ops {
            let (recs, col) = recorders(ops, n, provisional, plan.interval);
            sets.push(recs);
            cols.push(col);
        }
        let mut per_session: Vec<Vec<SessionRecorder>> = (0..n).map(|_| Vec::new()).collect();
        for set in sets {
            for (s, r) in per_session.iter_mut().zip(set) {
                s.push(r);
            }
        }
        for (go, recs) in gos.iter().zip(per_session) {
            let _ = go.send(Start {
                recs,
                base: provisional,
                end: None,
                stop: stop.clone(),
            });
        }
        drop(gos);
        let base = Instant::now() + plan.warmup;
        let deadline = plan.duration.map(|d| base + d);
        if let Some(w) = plan.block_watch {
            w.arm(base, plan.interval, deadline);
        }
        // Without a warm-up, measurement begins as the start line opens: the live view's
        // windows (each disk's counters) are opened before any session's first I/O, so they
        // hold every I/O the run measures (and a traced request of the run is one the disk
        // counted). With one, it begins once the base has passed.
        let begun_at_open = plan.warmup.is_zero();
        if begun_at_open {
            watch.measuring();
        }
        line.open(base, deadline);
        let mut start_snap: Option<SysSnapshot> = None;
        let mut interrupted = false;
        let mut aligner = Aligner::new(cols.len(), plan);
        let mut last = Vec::new();
        let mut last_tick = Instant::now();
        // The device's own counters at each interval edge (a noisy neighbour shows against
        // ours), and the session threads' wait for a CPU (a starved iolens shows against the
        // device), read by this thread, off the sessions' path.
        let mut disk_edges: Vec<(f64, DiskCounters)> = Vec::new();
        let mut sched_edges: Vec<(f64, SchedEdge)> = Vec::new();
        let mut sched = SchedReader::default();
        let mut disk_on = plan.device.is_some();
        let mut next_edge = Some(base);
        loop {
            let now = Instant::now();
            if start_snap.is_none() && now >= base {
                start_snap = Some(SysSnapshot::take(plan.device, &[]));
                if !begun_at_open {
                    watch.measuring();
                }
            }
            if let Some(edge) = next_edge {
                if now >= edge && !stop.load(Ordering::Relaxed) {
                    let at = now.duration_since(base).as_secs_f64();
                    if let Some(dev) = plan.device.filter(|_| disk_on) {
                        match crate::sys::disk_counters(dev) {
                            Some(c) => disk_edges.push((at, c)),
                            None => disk_on = false,
                        }
                    }
                    let ids = tids.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    sched_edges.push((at, sched.read(&ids, plan.device)));
                    // The next edge after now (a late wake-up skips none: it reads once).
                    let mut e = edge + plan.interval;
                    while e <= now {
                        e += plan.interval;
                    }
                    next_edge = Some(e);
                }
            }
            if plan.interrupt.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                interrupted = true;
                stop.store(true, Ordering::Relaxed);
            }
            if deadline.is_some_and(|d| now >= d) {
                stop.store(true, Ordering::Relaxed);
            }
            let mut wait = Duration::from_millis(50);
            if start_snap.is_none() {
                wait = wait.min(base.saturating_duration_since(now));
            }
            // Past the deadline (or once stopped) nothing is due: wait for the sessions' last
            // batches instead of polling without a pause. A session still inside a slow read
            // can take long to stop, and a loop that never sleeps there spins a CPU — under
            // SCHED_FIFO it starved the very daemon that served those reads, for minutes.
            if let Some(d) = deadline.filter(|&d| d > now) {
                wait = wait.min(d - now);
            }
            if let Some(e) = next_edge.filter(|_| !stop.load(Ordering::Relaxed)) {
                wait = wait.min(e.saturating_duration_since(now));
            }
            let mut live = false;
            for (i, c) in cols.iter_mut().enumerate() {
                live |= c.poll(if i == 0 { wait } else { Duration::ZERO });
            }
            aligner.pump(&mut cols, &mut last, watch);
            if last_tick.elapsed() >= Duration::from_millis(250) {
                last_tick = Instant::now();
                let done = cols.first().map_or(0, |c| c.total_count());
                watch.tick(Instant::now(), base, &last, done);
            }
            if !live {
                break;
            }
        }
        let start_snap = start_snap.unwrap_or_else(|| SysSnapshot::take(plan.device, &[]));
        let end_snap = SysSnapshot::take(plan.device, &[]);
        // The last edge, read once every session stopped recording.
        if let Some(dev) = plan.device.filter(|_| !disk_edges.is_empty()) {
            if let Some(c) = crate::sys::disk_counters(dev) {
                disk_edges.push((
                    Instant::now().saturating_duration_since(base).as_secs_f64(),
                    c,
                ));
            }
        }
        if !sched_edges.is_empty() {
            let ids = tids.lock().unwrap_or_else(|e| e.into_inner()).clone();
            sched_edges.push((
                Instant::now().saturating_duration_since(base).as_secs_f64(),
                sched.read(&ids, plan.device),
            ));
        }
        watch.stopped();
        let outs = handles.into_iter().map(join).collect();
        Ok(Driven {
            ready,
            outs,
            base,
            snaps: (start_snap, end_snap),
            disk_edges,
            sched_edges,
            interrupted,
            collectors: cols,
        })
    })
}

/// The disks under a run's targets (or a database's directories) and, for a run over several,
/// each one's own counters over the measured window: the `device` view of its
/// [`TargetRun`](crate::results::TargetRun). A live view holds one and passes its
/// [`Watch::measuring`] and [`Watch::stopped`] on.
#[derive(Default)]
pub(crate) struct DiskWindow {
    /// Each target's block device, in target order.
    disks: Vec<Option<crate::sys::BlockDev>>,
    /// Their counters at the start of measurement and once every session stopped (several
    /// targets only; none when measurement never began).
    snaps: Option<(Vec<SysSnapshot>, Vec<SysSnapshot>)>,
}

impl DiskWindow {
    /// The disks under `paths`, in order.
    pub(crate) fn of<'p>(paths: impl IntoIterator<Item = &'p std::path::Path>) -> DiskWindow {
        DiskWindow {
            disks: paths.into_iter().map(crate::sys::block_dev_for).collect(),
            snaps: None,
        }
    }

    /// Over several targets, each one's disk is counted over the measured window.
    pub(crate) fn several(&self) -> bool {
        self.disks.len() > 1
    }

    /// Target `i`'s device (`/proc/diskstats` name), where one was found.
    pub(crate) fn name(&self, i: usize) -> Option<&str> {
        self.disks.get(i)?.as_ref().map(|d| d.name.as_str())
    }

    /// The run's own disk view: its one disk (targets on one disk count it once); none when
    /// they lie on several or one has no block device.
    pub(crate) fn device(&self) -> Option<String> {
        let first = self.name(0)?;
        (0..self.disks.len())
            .all(|i| self.name(i) == Some(first))
            .then(|| first.to_string())
    }

    fn snap(&self) -> Vec<SysSnapshot> {
        (0..self.disks.len())
            .map(|i| SysSnapshot::take(self.name(i), &[]))
            .collect()
    }

    /// Measurement has begun ([`Watch::measuring`]).
    pub(crate) fn measuring(&mut self) {
        if self.several() {
            self.snaps = Some((self.snap(), Vec::new()));
        }
    }

    /// Every session has stopped ([`Watch::stopped`]).
    pub(crate) fn stopped(&mut self) {
        if !self.several() {
            return;
        }
        let end = self.snap();
        // When measurement never began there is no window to count over.
        if let Some((_, b)) = &mut self.snaps {
            *b = end;
        }
    }

    /// Target `i`'s row of the results: its facts (`kind`, `size` bytes), the I/Os that landed
    /// on it, its disk's queues, and its disk's counters over the window for `ios` of its
    /// I/Os (`None`: no device view).
    pub(crate) fn target_run(
        &self,
        i: usize,
        path: &std::path::Path,
        (kind, size): (crate::results::StorageKind, u64),
        ops: Vec<OpResult>,
        ios: Option<u64>,
    ) -> crate::results::TargetRun {
        let disk = self.disks.get(i).and_then(|d| d.as_ref());
        let device = match (&self.snaps, self.name(i), ios) {
            (Some((a, b)), Some(name), Some(n)) => a[i].delta(&b[i], n, Some(name)).1,
            _ => None,
        };
        crate::results::TargetRun {
            target: crate::sys::target_info(path, kind, size),
            ops,
            queue: disk.and_then(|d| crate::sys::disk_queue(&d.disk)),
            lun_queue_depth: disk.and_then(|d| crate::sys::lun_queue_depth(&d.disk)),
            device,
            ..Default::default()
        }
    }
}

fn join<O>(h: std::thread::ScopedJoinHandle<'_, Result<O>>) -> Result<O> {
    h.join()
        .unwrap_or_else(|_| Err(anyhow!("a session thread panicked")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::{IO_OPS, READ};

    struct Seen(Vec<(u64, u64, u64)>);

    impl Watch for Seen {
        fn interval(&mut self, s: &[IntervalSnapshot]) {
            self.0.push((s[0].index, s[0].count, s[1].count));
        }
    }

    #[test]
    fn intervals_reported_once_in_order_and_none_past_the_end() {
        let iv = Duration::from_millis(20);
        let plan = Plan {
            sessions: 2,
            ops: &[IO_OPS, IO_OPS],
            warmup: Duration::ZERO,
            duration: Some(iv * 10),
            interval: iv,
            device: None,
            interrupt: &AtomicBool::new(false),
            thread_name: "test",
            start_at: None,
            block_watch: None,
        };
        let mut seen = Seen(Vec::new());
        let d = drive(
            &plan,
            |i, gate: Gate<()>| {
                let mut st = gate.ready(()).expect("started");
                let end = st.end.expect("has an end");
                // Set 1 records twice as often as set 0; both keep going a little past the end
                // (as real sessions finish their last operation).
                while Instant::now() < end + Duration::from_millis(3) {
                    let t = Instant::now();
                    st.recs[0].record(READ, t, t, 0);
                    st.recs[1].record(READ, t, t, 0);
                    st.recs[1].record(READ, t, t, 0);
                    std::thread::sleep(Duration::from_micros(200 + 50 * i as u64));
                }
                Ok(Instant::now())
            },
            &mut seen,
        )
        .unwrap();
        let mut d = d;
        let ops = d.ops(0.2);
        let idx: Vec<u64> = seen.0.iter().map(|s| s.0).collect();
        assert_eq!(
            idx,
            (0..10).collect::<Vec<u64>>(),
            "each interval once, none past the end"
        );
        // The figures reported are those of the interval just measured, for every set.
        // (The last one's stored figures may also hold the few completions past the end.)
        for (k, &(_, c0, c1)) in seen.0.iter().enumerate().take(9) {
            assert_eq!(c0, ops[0][0].intervals[k].count, "set 0, interval {k}");
            assert_eq!(c1, ops[1][0].intervals[k].count, "set 1, interval {k}");
            assert!(c1 > c0, "set 1 records more than set 0 in interval {k}");
        }
    }
}
