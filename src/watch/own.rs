//! The block layer under iolens' own load: `--watch` on `run`, `calibrate` and `db run`.
//!
//! [`OwnWatch::start`] loads the block-layer probes of `bpf/watch.bpf.c` (no syscall or
//! scheduler probes) with the process filter set to this process, and drains their ring
//! buffer on a thread of its own for as long as it lives. Only requests this process submitted
//! to the target's disk are kept, and of those, where the target is a regular file on ext2/3/4
//! or XFS, only requests to the file's own extents (FIEMAP, handed to the probes as sorted
//! sector ranges): the process's other I/O on the disk (its generation journal, filesystem
//! metadata, its binary's pages read back after reclaim) is not the run's. The session driver [arms](OwnWatch::arm) it when it fixes a
//! run's measurement base, so each request counts in the run's own interval grid (the interval
//! of its completion; completions before the base or at/after the planned end are left out, as
//! the recorder leaves out I/Os), and the producer [takes](OwnWatch::take) the run's
//! [`BlockLayer`] once the run has ended. A calibration arms and takes it once per step.

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

#[derive(Default)]
struct State {
    armed: Option<Armed>,
    /// Kernel op (0 read, 1 write, ...) → (host queue, device service) per interval.
    ops: BTreeMap<u32, (OpAcc, OpAcc)>,
    /// Drain cycles completed (each a full read of the ring buffer).
    cycles: u64,
    /// The kernel's lost-event counters after the last cycle, and when the run was armed.
    lost: Vec<u64>,
    lost_at_arm: Vec<u64>,
    /// Bios of this process merged into a queued request: now, and when the run was armed.
    merges: u64,
    merges_at_arm: u64,
    /// The drain thread stopped on an error.
    failed: Option<String>,
    /// Set by [`OwnWatch::take`]: the next cycle removes this process's requests that started
    /// in `[from, to)` ns and are still in the kernel's table (their completion was not seen)
    /// and counts them in `unseen`.
    sweep: Option<(u64, u64)>,
    unseen: u64,
    /// The BPF programs' `count_from` (see `bpf/watch.bpf.c`): [`OwnWatch::arm`] writes the
    /// run's base into it, so that a missed completion of a request of this process from
    /// before the run is not counted as the run's.
    count_from: Option<aya::maps::Array<aya::maps::MapData, u64>>,
}

/// A block-layer watch of this process's own I/O on one disk (see the module docs).
pub struct OwnWatch {
    device: filter::Device,
    /// The target's extent ranges the requests are filtered by; `None`: every request of this
    /// process on the disk counts.
    extents: Option<u32>,
    shared: Arc<(Mutex<State>, Condvar)>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for OwnWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnWatch")
            .field("device", &self.device.name)
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
    /// Attach the block-layer probes for this process's requests to the disk holding `path`.
    pub fn start(path: &Path) -> Result<OwnWatch> {
        let device = disk_of(path)?;
        // Only requests to the target's own blocks count, where they can be mapped: this
        // process also reads other files on the same disk (its binary's pages, read back after
        // the kernel reclaimed them), and those are not the run's I/O.
        let extents = crate::sys::disk_extents(path, MAX_EXTENTS);
        let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let thread = {
            let (shared, stop, dev) = (shared.clone(), stop.clone(), device.dev);
            let ranges = extents.clone().unwrap_or_default();
            std::thread::Builder::new()
                .name("iolens-blkwatch".into())
                .spawn(move || drain(dev, &ranges, &shared, &stop, tx))
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
            device,
            extents: extents.map(|e| e.len() as u32),
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// One watch per target of a run over `paths`, in their order: each loads the probes for
    /// its own disk and its target's extents, so each target's block requests (and the
    /// completions of them the probes missed) are its own. Refused when two targets share a disk
    /// and one of them cannot be told apart on it (a device, or a file whose blocks could not be
    /// mapped): both would count the other's requests. [`check_disks`] makes the same refusal
    /// before the targets are made; this one stands for what only the made files show (a new
    /// file in more pieces than the probes hold).
    pub fn start_all(paths: &[&Path]) -> Result<Vec<OwnWatch>> {
        let mut out: Vec<OwnWatch> = Vec::with_capacity(paths.len());
        for (i, p) in paths.iter().enumerate() {
            let w = OwnWatch::start(p)?;
            let seen: Vec<Disk> = out
                .iter()
                .zip(paths)
                .map(|(o, q)| Disk {
                    path: q,
                    dev: o.device.dev,
                    mapped: o.extents.is_some(),
                })
                .collect();
            let this = Disk {
                path: paths[i],
                dev: w.device.dev,
                mapped: w.extents.is_some(),
            };
            refuse_shared(
                &seen,
                &this,
                &w.device.name,
                " (seen once the targets were made)",
            )?;
            out.push(w);
        }
        Ok(out)
    }

    /// Put the block layers of `run`, just ended, from `watches` (one per target, in target
    /// order; see [`OwnWatch::start_all`]) into it: over several targets each target's own
    /// (`TargetRun::block`) and the run's their exact sum; on one, the run's. Disarms each
    /// watch (all are drained even when one fails, so none stays armed).
    pub fn take_into(watches: &[OwnWatch], run: &mut RunResult) -> Result<()> {
        let taken: Vec<Result<BlockLayer>> = watches.iter().map(|w| w.take(run)).collect();
        let layers = taken.into_iter().collect::<Result<Vec<_>>>()?;
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

    /// The disk watched (kernel name).
    pub fn device(&self) -> &str {
        &self.device.name
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
        st.ops.clear();
        st.lost_at_arm = st.lost.clone();
        st.merges_at_arm = st.merges;
        st.armed = Some(armed);
    }

    /// The block layer of the run just ended, on `run`'s interval grid; disarms.
    pub fn take(&self, run: &RunResult) -> Result<BlockLayer> {
        // Every request of the run has completed; let the drain thread read the ring twice
        // more so that the last ones (from other CPUs, a few ms late) are in.
        let (m, cv) = &*self.shared;
        let mut st = lock(m);
        let want = st.cycles + 2;
        if let Some(a) = st.armed {
            st.sweep = Some((a.base_ns, a.end_ns.min(monotonic_ns())));
            st.unseen = 0;
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
        let ops = std::mem::take(&mut st.ops);
        let merged = st.merges.saturating_sub(st.merges_at_arm);
        let mut lost = BTreeMap::new();
        for (i, (&now, &then)) in st
            .lost
            .iter()
            .zip(st.lost_at_arm.iter().chain(std::iter::repeat(&0)))
            .enumerate()
        {
            // Unfollowed slots count requests of the whole host the probes could not follow
            // (flushes, requests in flight at attach), not this run's losses.
            if now > then && !unfollowed_slot(i) {
                let cause = LOST_CAUSES.get(i).unwrap_or(&"other");
                lost.insert(cause.to_string(), now - then);
            }
        }
        if st.unseen > 0 {
            *lost.entry(UNSEEN_COMPLETION.to_string()).or_insert(0) += st.unseen;
        }
        drop(st);
        let bounds = grid(run, armed.interval_ns);
        let mut out = Vec::new();
        for (op, (queue, device)) in ops {
            let (_, queue_op, device_op) = block_ops(op);
            for (acc, name) in [(queue, queue_op), (device, device_op)] {
                let parts = fold_to(acc, &bounds, armed.interval_ns)?.parts(0, bounds.len())?;
                out.push(OpResult::of_parts(name, parts, &bounds)?);
            }
        }
        Ok(BlockLayer {
            device: self.device.name.clone(),
            ops: out,
            lost,
            merged,
            target_extents: self.extents,
            queue: crate::sys::disk_queue(&self.device.name),
        })
    }
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

/// The most extent ranges the probes filter by (`MAX_EXTENTS` in `bpf/watch.bpf.c`); a target
/// in more pieces is watched whole-disk.
const MAX_EXTENTS: usize = 1024;

/// The drain thread: load and attach, report that on `ready`, then bin this process's block
/// requests on the target's disk (in `extents`, when given) until stopped.
fn drain(
    dev: u32,
    extents: &[(u64, u64)],
    shared: &Arc<(Mutex<State>, Condvar)>,
    stop: &AtomicBool,
    ready: mpsc::Sender<Result<()>>,
) {
    let loaded = (|| -> Result<(aya::Ebpf, RingBuf<aya::maps::MapData>)> {
        let mut ebpf = bpf::load(
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
                // Only the target's disk: another target's requests are its own watch's.
                Global {
                    name: "target_dev",
                    value: dev,
                },
            ],
        )?;
        bpf::set_process_filter(&mut ebpf, &[std::process::id()], &[])?;
        set_extents(&mut ebpf, extents)?;
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
    let mut batch: Vec<Event> = Vec::new();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        bpf::drain_ring(&mut ring, Duration::from_millis(10), |d| {
            Event::each(d, |e| {
                if e.kind == EV_BLOCK && e.sub & BLOCK_WATCHED != 0 && e.dev == dev {
                    batch.push(e);
                }
            });
        });
        let lost = bpf::sum_per_cpu(&ebpf, "lost");
        let merges = bpf::sum_per_cpu(&ebpf, "merges");
        let mut st = lock(m);
        if let Some((from, to)) = st.sweep.take() {
            match missed_completions(&mut ebpf, from, to, Missed::RunEnded) {
                Ok(n) => st.unseen = n,
                Err(e) => st.failed = Some(format!("{e:#}")),
            }
        }
        match (lost, merges) {
            (Ok(l), Ok(n)) => {
                st.lost = l;
                st.merges = n.iter().sum();
            }
            (Err(e), _) | (_, Err(e)) => st.failed = Some(e.to_string()),
        }
        if let Some(a) = st.armed {
            for e in batch.drain(..) {
                if e.ts < a.base_ns || e.ts >= a.end_ns {
                    continue;
                }
                let k = ((e.ts - a.base_ns) / a.interval_ns) as usize;
                let (q, d) = st
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
                for (q, d) in st.ops.values_mut() {
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

/// Give the probes the target's extent ranges (sorted sectors), then their count: the count
/// last, so the probes never search ranges not yet written.
fn set_extents(ebpf: &mut aya::Ebpf, extents: &[(u64, u64)]) -> Result<()> {
    if extents.is_empty() {
        return Ok(());
    }
    let mut map: aya::maps::Array<&mut aya::maps::MapData, Extent> =
        aya::maps::Array::try_from(ebpf.map_mut("extents").context("no extents map")?)?;
    for (i, &(start, end)) in extents.iter().enumerate() {
        map.set(i as u32, Extent { start, end }, 0)?;
    }
    let mut count: aya::maps::Array<&mut aya::maps::MapData, u32> = aya::maps::Array::try_from(
        ebpf.map_mut("extent_count")
            .context("no extent_count map")?,
    )?;
    count.set(0, extents.len() as u32, 0)?;
    Ok(())
}

/// One extent range of the target (`struct extent` in `bpf/watch.bpf.c`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Extent {
    start: u64,
    end: u64,
}

// SAFETY: plain old data, laid out as the BPF program's `struct extent`.
unsafe impl aya::Pod for Extent {}
