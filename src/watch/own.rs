//! The block layer under iolens' own load: `--watch` on `run`, `calibrate` and `db run`.
//!
//! [`OwnWatch::start_all`] loads the block-layer probes of `bpf/watch.bpf.c` once for all the
//! run's targets (no syscall or scheduler probes), with the process filter set to this process,
//! and drains their ring buffer on a thread of its own for as long as it lives. Only requests
//! this process submitted to a target's disk are kept, and of those, where the target is a
//! regular file on ext2/3/4 or XFS, only requests to the file's own extents (FIEMAP, handed to
//! the probes as sorted sector ranges, each naming its target): the process's other I/O on the
//! disk (its generation journal, filesystem metadata, its binary's pages read back after
//! reclaim) is not the run's. The probes follow each request with its target's number, so each
//! target's requests, losses and merged bios are counted apart. The session driver
//! [arms](OwnWatch::arm) it when it fixes a run's measurement base, so each request counts in
//! the run's own interval grid (the interval of its completion; completions before the base or
//! at/after the planned end are left out, as the recorder leaves out I/Os), and the producer
//! [takes](OwnWatch::take_into) each target's [`BlockLayer`] once the run has ended. A
//! calibration arms and takes it once per step.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use aya::maps::RingBuf;

use super::layout::{Extent, TargetDisk, LOST_PER_TARGET, MAX_EXTENTS, MAX_TARGETS, TARGET_SHIFT};
use super::recording::{missed_completions, Missed};
use super::{
    block_ops, filter, monotonic_ns, unfollowed_slot, Event, BLOCK_WATCHED, EV_BLOCK, LOST_CAUSES,
    UNSEEN_COMPLETION,
};
use crate::bpf::{self, Global};
use crate::histogram::OpAcc;
use crate::results::{BlockLayer, OpResult, RunResult};

/// One armed run: where its interval grid starts and ends (CLOCK_MONOTONIC ns).
#[derive(Clone, Copy)]
struct Armed {
    base_ns: u64,
    interval_ns: u64,
    end_ns: u64,
}

/// What the drain thread keeps of one target.
#[derive(Default)]
struct Tally {
    /// Kernel op (0 read, 1 write, ...) → (host queue, device service) per interval.
    ops: BTreeMap<u32, (OpAcc, OpAcc)>,
    /// The kernel's lost-event counters of the target after the last cycle, and when the run
    /// was armed.
    lost: Vec<u64>,
    lost_at_arm: Vec<u64>,
    /// Bios of this process to the target merged into a queued request: now, and when the run
    /// was armed.
    merges: u64,
    merges_at_arm: u64,
    /// Requests of the run whose completion was not seen (see [`State::sweep`]).
    unseen: u64,
}

#[derive(Default)]
struct State {
    armed: Option<Armed>,
    /// Each target's, in target order.
    targets: Vec<Tally>,
    /// Drain cycles completed (each a full read of the ring buffer).
    cycles: u64,
    /// The drain thread stopped on an error.
    failed: Option<String>,
    /// Set by [`OwnWatch::take`]: the next cycle removes this process's requests that started
    /// in `[from, to)` ns and are still in the kernel's table (their completion was not seen)
    /// and counts them in their target's `unseen`.
    sweep: Option<(u64, u64)>,
    /// The BPF programs' `count_from` (see `bpf/watch.bpf.c`): [`OwnWatch::arm`] writes the
    /// run's base into it, so that a missed completion of a request of this process from
    /// before the run is not counted as the run's.
    count_from: Option<aya::maps::Array<aya::maps::MapData, u64>>,
}

/// One target of the watch: its disk, and the number of its extent ranges the requests are
/// filtered by (`None`: every request of this process on the disk counts).
struct Traced {
    device: filter::Device,
    extents: Option<u32>,
}

/// A block-layer watch of this process's own I/O on its targets' disks: one copy of the probes
/// for them all (see the module docs).
pub struct OwnWatch {
    targets: Vec<Traced>,
    shared: Arc<(Mutex<State>, Condvar)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for OwnWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnWatch")
            .field(
                "devices",
                &self
                    .targets
                    .iter()
                    .map(|t| t.device.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Check, before any I/O, that `--watch` can work here (privilege, lockdown, BTF).
pub fn check() -> Result<()> {
    bpf::check_access().context("--watch traces the block layer with BPF")?;
    Ok(())
}

/// Check, before any target is created or written, that `--watch` over `paths` (targets of a
/// run; a new scratch file's not made yet) can trace each target on its own: each lies on a
/// block device, and no two share a disk unless both are files whose blocks can be mapped
/// there (an existing file by its extents now, a new one by its directory's filesystem).
pub fn check_disks(paths: &[&Path]) -> Result<()> {
    too_many(paths.len(), "; nothing was created or written")?;
    let mut seen: Vec<Disk> = Vec::with_capacity(paths.len());
    for p in paths {
        let exists = std::fs::symlink_metadata(p).is_ok();
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let device = disk_of(if exists { p } else { dir })?;
        let this = Disk {
            path: p,
            dev: device.dev,
            mapped: if exists {
                crate::sys::disk_extents(p, MAX_EXTENTS).is_some()
            } else {
                crate::sys::new_file_mappable(dir)
            },
        };
        refuse_shared(
            &seen,
            &this,
            &device.name,
            "; nothing was created or written",
        )?;
        seen.push(this);
    }
    Ok(())
}

/// Refuses more targets than the probes hold (`MAX_TARGETS`); `then` ends the message.
fn too_many(n: usize, then: &str) -> Result<()> {
    if n > MAX_TARGETS {
        bail!(
            "--watch traces at most {MAX_TARGETS} targets at once, not {n}: leave out --watch \
             (each disk's /proc/diskstats is still counted){then}"
        );
    }
    Ok(())
}

/// A target's disk, for the same-disk refusal.
struct Disk<'a> {
    path: &'a Path,
    dev: u32,
    /// Its requests can be told from others' on the disk by its extents.
    mapped: bool,
}

/// Refuse `this` target when it shares a disk (`name`) with one `seen` and either of the two
/// cannot be told apart there; `after` ends the error (what was done before the refusal).
fn refuse_shared(seen: &[Disk], this: &Disk, name: &str, after: &str) -> Result<()> {
    if let Some(o) = seen
        .iter()
        .find(|o| o.dev == this.dev && !(o.mapped && this.mapped))
    {
        bail!(
            "--watch: {} and {} lie on one disk ({name}) and the requests of one of them cannot \
             be told from the other's (a device, or a file whose blocks could not be mapped): \
             trace a run over targets on separate disks, or leave out --watch (each disk's \
             /proc/diskstats is still counted){after}",
            o.path.display(),
            this.path.display(),
        );
    }
    Ok(())
}

/// The disk holding `path` (a file, directory or device), resolved for the probes.
fn disk_of(path: &Path) -> Result<filter::Device> {
    let Some(bd) = crate::sys::block_dev_for(path) else {
        bail!(
            "--watch: {} is on no block device (overlay, tmpfs or network filesystem?), so \
             there is no block layer to trace",
            path.display()
        );
    };
    filter::resolve_device(&bd.disk)
        .with_context(|| format!("--watch: the disk of {}", path.display()))
}

impl OwnWatch {
    /// One watch for the targets of a run over `paths`, in their order: one copy of the probes,
    /// given each target's disk and (where they can be mapped) its extents, follows every
    /// request with its target's number, so each target's block requests (and the completions
    /// of them the probes missed) are its own. Refused when two targets share a disk and one of
    /// them cannot be told apart on it (a device, or a file whose blocks could not be mapped):
    /// both would count the other's requests. [`check_disks`] makes the same refusal before the
    /// targets are made; this one stands for what only the made files show (a new file in more
    /// pieces than the probes hold).
    pub fn start_all(paths: &[&Path]) -> Result<OwnWatch> {
        too_many(paths.len(), "")?;
        let mut targets: Vec<Traced> = Vec::with_capacity(paths.len());
        let mut ranges: Vec<Option<Vec<(u64, u64)>>> = Vec::with_capacity(paths.len());
        for p in paths {
            let device = disk_of(p)?;
            // Only requests to the target's own blocks count, where they can be mapped: this
            // process also reads other files on the same disk (its binary's pages, read back
            // after the kernel reclaimed them), and those are not the run's I/O.
            let extents = crate::sys::disk_extents(p, MAX_EXTENTS);
            let seen: Vec<Disk> = targets
                .iter()
                .zip(paths)
                .map(|(o, q)| Disk {
                    path: q,
                    dev: o.device.dev,
                    mapped: o.extents.is_some(),
                })
                .collect();
            let this = Disk {
                path: p,
                dev: device.dev,
                mapped: extents.is_some(),
            };
            refuse_shared(
                &seen,
                &this,
                &device.name,
                " (seen once the targets were made)",
            )?;
            targets.push(Traced {
                device,
                extents: extents.as_ref().map(|e| e.len() as u32),
            });
            ranges.push(extents);
        }
        let disks = target_disks(&targets, &ranges)?;
        let shared = Arc::new((
            Mutex::new(State {
                targets: (0..targets.len()).map(|_| Tally::default()).collect(),
                ..State::default()
            }),
            Condvar::new(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let thread = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::Builder::new()
                .name("iolens-blkwatch".into())
                .spawn(move || drain(&disks, &shared, &stop, tx))
                .context("cannot start the block-layer watch thread")?
        };
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e.context("--watch: cannot trace the block layer"));
            }
            Err(_) => {
                let _ = thread.join();
                bail!("--watch: the block-layer watch thread ended before attaching");
            }
        }
        Ok(OwnWatch {
            targets,
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// Put the block layers of `run`, just ended, from `watch` (over the run's targets, in
    /// target order; see [`OwnWatch::start_all`]) into it: over several targets each target's
    /// own (`TargetRun::block`) and the run's their exact sum; on one, the run's. Disarms the
    /// watch. Nothing without a watch.
    pub fn take_into(watch: Option<&OwnWatch>, run: &mut RunResult) -> Result<()> {
        let Some(w) = watch else {
            return Ok(());
        };
        let layers = w.take(run)?;
        if layers.len() > 1 && layers.len() == run.targets.len() {
            run.block = Some(BlockLayer::sum(&layers)?);
            for (t, b) in run.targets.iter_mut().zip(layers) {
                t.block = Some(b);
            }
        } else {
            run.block = layers.into_iter().next();
        }
        Ok(())
    }

    /// The disks watched (kernel names), one per target in target order.
    pub fn devices(&self) -> Vec<&str> {
        self.targets
            .iter()
            .map(|t| t.device.name.as_str())
            .collect()
    }

    /// Start a run's grid: requests completing from `base` on, before `end` (the planned end,
    /// if any), in intervals of `interval`. Whatever an earlier run left is dropped.
    pub(crate) fn arm(&self, base: Instant, interval: Duration, end: Option<Instant>) {
        let to_ns = |t: Instant| {
            let (now, mono) = (Instant::now(), monotonic_ns());
            if t >= now {
                mono + (t - now).as_nanos() as u64
            } else {
                mono.saturating_sub((now - t).as_nanos() as u64)
            }
        };
        let armed = Armed {
            base_ns: to_ns(base),
            interval_ns: (interval.as_nanos() as u64).max(1),
            end_ns: end.map_or(u64::MAX, to_ns),
        };
        let mut st = lock(&self.shared.0);
        if let Some(map) = st.count_from.as_mut() {
            // Not fatal: without it, losses from before the run could count as the run's.
            let _ = map.set(0, armed.base_ns, 0);
        }
        for t in &mut st.targets {
            t.ops.clear();
            t.lost_at_arm = t.lost.clone();
            t.merges_at_arm = t.merges;
        }
        st.armed = Some(armed);
    }

    /// The block layers of the run just ended, one per target in target order, on `run`'s
    /// interval grid; disarms.
    pub fn take(&self, run: &RunResult) -> Result<Vec<BlockLayer>> {
        // Every request of the run has completed; let the drain thread read the ring twice
        // more so that the last ones (from other CPUs, a few ms late) are in.
        let (m, cv) = &*self.shared;
        let mut st = lock(m);
        let want = st.cycles + 2;
        if let Some(a) = st.armed {
            st.sweep = Some((a.base_ns, a.end_ns.min(monotonic_ns())));
            for t in &mut st.targets {
                t.unseen = 0;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while st.cycles < want && st.failed.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("--watch: the block-layer watch stopped draining its events");
            }
            st = cv
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if let Some(e) = &st.failed {
            bail!("--watch: reading the block-layer events failed: {e}");
        }
        let Some(armed) = st.armed.take() else {
            bail!("--watch: the run was never armed (internal error)");
        };
        let tallies: Vec<Tally> = st.targets.iter_mut().map(std::mem::take).collect();
        // What the next arm compares with: the counters now.
        for (t, was) in st.targets.iter_mut().zip(&tallies) {
            t.lost = was.lost.clone();
            t.merges = was.merges;
        }
        drop(st);
        let bounds = grid(run, armed.interval_ns);
        let mut out = Vec::with_capacity(tallies.len());
        for (tally, traced) in tallies.into_iter().zip(&self.targets) {
            out.push(block_layer(tally, traced, &bounds, armed.interval_ns)?);
        }
        Ok(out)
    }
}

/// One target's block layer from what the drain thread kept of it since the run was armed.
fn block_layer(
    tally: Tally,
    traced: &Traced,
    bounds: &[(f64, f64)],
    interval_ns: u64,
) -> Result<BlockLayer> {
    let mut lost = BTreeMap::new();
    for (i, (&now, &then)) in tally
        .lost
        .iter()
        .zip(tally.lost_at_arm.iter().chain(std::iter::repeat(&0)))
        .enumerate()
    {
        // Unfollowed slots count requests the probes could not follow (flushes, requests in
        // flight at attach), not this run's losses.
        if now > then && !unfollowed_slot(i) {
            let cause = LOST_CAUSES.get(i).unwrap_or(&"other");
            lost.insert(cause.to_string(), now - then);
        }
    }
    if tally.unseen > 0 {
        *lost.entry(UNSEEN_COMPLETION.to_string()).or_insert(0) += tally.unseen;
    }
    let mut out = Vec::new();
    for (op, (queue, device)) in tally.ops {
        let (_, queue_op, device_op) = block_ops(op);
        for (acc, name) in [(queue, queue_op), (device, device_op)] {
            let parts = fold_to(acc, bounds, interval_ns)?.parts(0, bounds.len())?;
            out.push(OpResult::of_parts(name, parts, bounds)?);
        }
    }
    Ok(BlockLayer {
        device: traced.device.name.clone(),
        ops: out,
        lost,
        merged: tally.merges.saturating_sub(tally.merges_at_arm),
        target_extents: traced.extents,
        queue: crate::sys::disk_queue(&traced.device.name),
    })
}

/// What the probes are given of the targets: each disk's `target_disks` entry, and `extents`.
type Targets = (Vec<(u32, TargetDisk)>, Vec<Extent>);

/// The probes' `target_disks` entries and `extents` for `targets` (their extent ranges in
/// `ranges`, in the same order): per disk, either one target owning it whole or its targets'
/// extents, sorted by start, in one run of the array (disks in the order first met).
fn target_disks(targets: &[Traced], ranges: &[Option<Vec<(u64, u64)>>]) -> Result<Targets> {
    let mut disks: Vec<(u32, TargetDisk)> = Vec::new();
    let mut all: Vec<Extent> = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let dev = t.device.dev;
        if disks.iter().any(|(d, _)| *d == dev) {
            continue;
        }
        let number = i as u32 + 1;
        if ranges[i].is_none() {
            // Refused above when another target shares the disk.
            disks.push((
                dev,
                TargetDisk {
                    target: number,
                    ..TargetDisk::default()
                },
            ));
            continue;
        }
        let first = all.len();
        for (j, r) in ranges.iter().enumerate().skip(i) {
            if targets[j].device.dev != dev {
                continue;
            }
            let Some(r) = r else {
                bail!("--watch: a target on {} could not be mapped", t.device.name);
            };
            all.extend(r.iter().map(|&(start, end)| Extent {
                start,
                end,
                target: j as u32 + 1,
                pad: 0,
            }));
        }
        let mine = &mut all[first..];
        mine.sort_unstable_by_key(|e| e.start);
        if let Some(w) = mine.windows(2).find(|w| w[0].end > w[1].start) {
            bail!(
                "--watch: targets {} and {} share blocks on {}: they are one file",
                w[0].target,
                w[1].target,
                t.device.name
            );
        }
        disks.push((
            dev,
            TargetDisk {
                target: 0,
                first: first as u32,
                count: (all.len() - first) as u32,
                pad: 0,
            },
        ));
    }
    Ok((disks, all))
}

impl Drop for OwnWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The run's interval bounds (start, duration in s): those of its ops (all share one grid),
/// else `duration_s` cut into intervals.
fn grid(run: &RunResult, interval_ns: u64) -> Vec<(f64, f64)> {
    if let Some(o) = run.ops.iter().max_by_key(|o| o.intervals.len()) {
        if !o.intervals.is_empty() {
            return o
                .intervals
                .iter()
                .map(|i| (i.start_s, i.duration_s))
                .collect();
        }
    }
    let iv = interval_ns as f64 / 1e9;
    let n = (run.duration_s / iv).ceil().max(1.0) as usize;
    (0..n)
        .map(|k| {
            let start = k as f64 * iv;
            (start, iv.min(run.duration_s - start).max(1e-6))
        })
        .collect()
}

/// `acc` with every interval past the grid's last folded into it, as the recorder folds a
/// stub tail into the interval before (an interval that starts after the grid ends is left out).
fn fold_to(mut acc: OpAcc, bounds: &[(f64, f64)], interval_ns: u64) -> Result<OpAcc> {
    let end_s = bounds.last().map_or(0.0, |(s, d)| s + d);
    acc.fold_from(bounds.len(), |k| {
        (k as f64 * interval_ns as f64 / 1e9) < end_s - 1e-9
    })?;
    Ok(acc)
}

/// The drain thread: load and attach, report that on `ready`, then bin this process's block
/// requests to each target (on the disks and extents of `disks`) until stopped.
fn drain(
    disks: &Targets,
    shared: &Arc<(Mutex<State>, Condvar)>,
    stop: &AtomicBool,
    ready: mpsc::Sender<Result<()>>,
) {
    let n = lock(&shared.0).targets.len();
    let loaded = (|| -> Result<(aya::Ebpf, RingBuf<aya::maps::MapData>)> {
        let mut ebpf = bpf::load_sized(
            bpf::WATCH_OBJECT,
            &[
                Global {
                    name: "watch_all",
                    value: 0,
                },
                // This process is the one watched: nothing is excluded as "self".
                Global {
                    name: "self_tgid",
                    value: 0,
                },
                // Only the targets' requests, each followed with its target's number.
                Global {
                    name: "own_targets",
                    value: n as u32,
                },
            ],
            &[("extents", disks.1.len() as u32)],
        )?;
        bpf::set_process_filter(&mut ebpf, &[std::process::id()], &[])?;
        set_targets(&mut ebpf, disks)?;
        let btf = aya::Btf::from_sys_fs().map_err(|_| bpf::BpfError::NoBtf)?;
        super::attach_block(&mut ebpf, &btf, true, &mut Vec::new())?;
        let ring = RingBuf::try_from(ebpf.take_map("events").context("no events map")?)?;
        let from =
            aya::maps::Array::try_from(ebpf.take_map("count_from").context("no count_from map")?)?;
        lock(&shared.0).count_from = Some(from);
        Ok((ebpf, ring))
    })();
    let (mut ebpf, mut ring) = match loaded {
        Ok(v) => v,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let (m, cv) = &**shared;
    // Each target's events of a cycle (index: the target's number - 1).
    let mut batch: Vec<(usize, Event)> = Vec::new();
    // The slots of `lost` and `merges` of targets 1 ..= n (slot 0: no target's).
    let lost_slots = LOST_PER_TARGET as u32..(LOST_PER_TARGET * (n + 1)) as u32;
    let merge_slots = 1..n as u32 + 1;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        bpf::drain_ring(&mut ring, Duration::from_millis(10), |d| {
            Event::each(d, |e| {
                let t = (e.sub >> TARGET_SHIFT) as usize;
                if e.kind == EV_BLOCK && e.sub & BLOCK_WATCHED != 0 && (1..=n).contains(&t) {
                    batch.push((t - 1, e));
                }
            });
        });
        let lost = bpf::sum_per_cpu_range(&ebpf, "lost", lost_slots.clone());
        let merges = bpf::sum_per_cpu_range(&ebpf, "merges", merge_slots.clone());
        let mut st = lock(m);
        if let Some((from, to)) = st.sweep.take() {
            match missed_completions(&mut ebpf, from, to, Missed::RunEnded) {
                Ok(by) => {
                    for (t, tally) in st.targets.iter_mut().enumerate() {
                        tally.unseen = by.get(t + 1).copied().unwrap_or(0);
                    }
                }
                Err(e) => st.failed = Some(format!("{e:#}")),
            }
        }
        match (lost, merges) {
            (Ok(l), Ok(g)) => {
                for ((tally, l), g) in st.targets.iter_mut().zip(l.chunks(LOST_PER_TARGET)).zip(g) {
                    tally.lost = l.to_vec();
                    tally.merges = g;
                }
            }
            (Err(e), _) | (_, Err(e)) => st.failed = Some(e.to_string()),
        }
        if let Some(a) = st.armed {
            for (t, e) in batch.drain(..) {
                if e.ts < a.base_ns || e.ts >= a.end_ns {
                    continue;
                }
                let k = ((e.ts - a.base_ns) / a.interval_ns) as usize;
                let (q, d) = st.targets[t]
                    .ops
                    .entry(e.sub & 0xffff)
                    .or_insert_with(|| (OpAcc::new(), OpAcc::new()));
                let r = q
                    .record(k, e.b, 0, false)
                    .and_then(|_| d.record(k, e.a, e.bytes as u64, false));
                if let Err(e) = r {
                    st.failed.get_or_insert(e.to_string());
                }
            }
            // Intervals the run has moved past are kept encoded (a late event reopens one).
            let now = monotonic_ns();
            if now > a.base_ns + a.interval_ns {
                let done = ((now - a.base_ns) / a.interval_ns) as usize;
                for (q, d) in st.targets.iter_mut().flat_map(|t| t.ops.values_mut()) {
                    q.close_before(done.saturating_sub(1));
                    d.close_before(done.saturating_sub(1));
                }
            }
        }
        batch.clear();
        st.cycles += 1;
        cv.notify_all();
        drop(st);
        if stopping {
            break;
        }
    }
}

/// Give the probes the targets' extent ranges, then their disks: the disks last, so the probes
/// never search ranges not yet written.
fn set_targets(ebpf: &mut aya::Ebpf, (disks, extents): &Targets) -> Result<()> {
    {
        let mut map: aya::maps::Array<&mut aya::maps::MapData, Extent> =
            aya::maps::Array::try_from(ebpf.map_mut("extents").context("no extents map")?)?;
        for (i, e) in extents.iter().enumerate() {
            map.set(i as u32, *e, 0)?;
        }
    }
    let mut map: aya::maps::HashMap<&mut aya::maps::MapData, u32, TargetDisk> =
        aya::maps::HashMap::try_from(
            ebpf.map_mut("target_disks")
                .context("no target_disks map")?,
        )?;
    for (dev, d) in disks {
        map.insert(dev, d, 0)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traced(
        name: &str,
        dev: u32,
        extents: Option<&[(u64, u64)]>,
    ) -> (Traced, Option<Vec<(u64, u64)>>) {
        let t = Traced {
            device: filter::Device {
                name: name.into(),
                dev,
            },
            extents: extents.map(|e| e.len() as u32),
        };
        (t, extents.map(<[_]>::to_vec))
    }

    /// Files on one disk share its run of `extents`, sorted by start, each range naming its own
    /// target; a device target owns its disk whole; disks in the order first met.
    #[test]
    fn targets_on_one_disk_share_its_sorted_extents_and_a_device_owns_its_disk() {
        let (t, r): (Vec<Traced>, Vec<_>) = [
            traced("sda", 8 << 20, Some(&[(100, 200), (500, 600)])),
            traced("loop0", 7 << 20, None),
            traced("sda", 8 << 20, Some(&[(300, 400), (10, 20)])),
        ]
        .into_iter()
        .unzip();
        let (disks, extents) = target_disks(&t, &r).unwrap();
        let got: Vec<(u32, u32, u32, u32)> = disks
            .iter()
            .map(|(dev, d)| (*dev, d.target, d.first, d.count))
            .collect();
        assert_eq!(got, [(8 << 20, 0, 0, 4), (7 << 20, 2, 0, 0)]);
        let got: Vec<(u64, u64, u32)> =
            extents.iter().map(|e| (e.start, e.end, e.target)).collect();
        assert_eq!(
            got,
            [(10, 20, 3), (100, 200, 1), (300, 400, 3), (500, 600, 1)]
        );
    }

    /// Two targets whose extents overlap are one file under two names: refused.
    #[test]
    fn overlapping_targets_are_refused() {
        let (t, r): (Vec<Traced>, Vec<_>) = [
            traced("sda", 8 << 20, Some(&[(100, 200)])),
            traced("sda", 8 << 20, Some(&[(150, 160)])),
        ]
        .into_iter()
        .unzip();
        let e = target_disks(&t, &r).unwrap_err().to_string();
        assert!(e.contains("share blocks on sda"), "{e}");
    }
}
