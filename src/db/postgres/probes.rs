//! The server's side of `db run --engine postgres`: the sessions' backends traced, for the
//! measured phase, by the probes of `iolens watch` (`bpf/watch.bpf.c`), so a PostgreSQL run has
//! what a SQLite run has and more: every I/O syscall of the backends timed one by one
//! (per-interval histograms), their block requests' host queue and device service time, their
//! wall time split (on CPU, waiting for a CPU, inside I/O, other off-CPU time) and the wait-event
//! table read from each backend's `my_wait_event_info` at every syscall and switch.
//!
//! The watch runs on a thread of its own, filtered to the backends' pids; the run stops it when
//! its sessions stop. [`merge`] moves its findings into the run's results: the watch budget
//! ([`Results::watch`], from which the analysis draws the verdict and the wait-event table), the
//! requests on the data directory's disk as the run's [`BlockLayer`], and the watch's runs
//! (`syscalls`, `block DISK`, `cpu`, `pg wait events`) after the SQL run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Context as _, Result};

use crate::results::{BlockLayer, Results};
use crate::watch::{Filters, WatchOptions};

/// How long the probes may take to load and attach before the run gives up on them.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the backends cannot be traced from this process (no privilege, kernel lockdown), in
/// words; `None` when they can.
pub(super) fn unavailable() -> Option<String> {
    crate::bpf::check_access().err().map(|e| e.to_string())
}

/// A watch of the sessions' backends, running until [`BackendProbes::finish`].
pub(super) struct BackendProbes {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<Results>>,
}

impl BackendProbes {
    /// Load and attach the probes for `pids` (the sessions' backends); returns once they are
    /// attached, so the measured phase starts under them.
    /// The server's catalogs (through `dsn`) name the relations the backends' I/O was on.
    pub(super) fn start(pids: &[i32], interval: Duration, dsn: &str) -> Result<BackendProbes> {
        let pids: Vec<u32> = pids.iter().filter_map(|&p| u32::try_from(p).ok()).collect();
        let filters = Filters::new(&pids, &[], &[], false)
            .context("the sessions' backends are not visible on this host")?;
        let stop = Arc::new(AtomicBool::new(false));
        let opts = WatchOptions {
            record: None,
            filters,
            duration: None,
            interval: interval.max(Duration::from_millis(10)),
            threads: false,
            stop: Some(stop.clone()),
            catalog: Some(super::catalog(dsn)),
            metrics: false,
            // The run's own intervals, every one: as long as the run, never rolled up.
            keep_intervals: usize::MAX,
            // Nothing drawn.
            live: false,
        };
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("iolens-pgprobe".into())
            .spawn(move || {
                crate::watch::watch(
                    &opts,
                    Vec::new(),
                    &mut |_| {
                        let _ = tx.send(());
                    },
                    &mut |_| {},
                )
            })
            .context("cannot start the probes' thread")?;
        match rx.recv_timeout(ATTACH_TIMEOUT) {
            Ok(()) => Ok(BackendProbes { stop, thread }),
            Err(_) => {
                stop.store(true, Ordering::Relaxed);
                let why = match thread.join() {
                    Ok(Err(e)) => format!("{e:#}"),
                    Ok(Ok(_)) => "they ended before attaching".to_string(),
                    Err(_) => "their thread panicked".to_string(),
                };
                Err(anyhow!("the probes could not be attached: {why}"))
            }
        }
    }

    /// Ask the watch to end (the sessions have stopped); [`BackendProbes::finish`] collects it.
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// End the watch and take what it recorded.
    pub(super) fn finish(self) -> Result<Results> {
        self.stop();
        self.thread
            .join()
            .map_err(|_| anyhow!("the probes' thread panicked"))?
    }
}

/// Move the backends' watch into the run's results `res` (its first run the SQL run): the
/// backends' own requests on `device` (the data directory's disk; the only disk they used when
/// unknown) become the SQL run's block layer, and over several tablespaces those on each
/// target's disk that target's.
pub(super) fn merge(res: &mut Results, watch: Results, device: Option<&str>) {
    // `block DISK (watched)`: the watched processes' requests (`block DISK` holds every
    // process's, for the disk's queue).
    let mine: Vec<(&str, &crate::results::RunResult)> = watch
        .runs
        .iter()
        .filter_map(|r| {
            let disk = r.name.strip_prefix("block ")?.strip_suffix(" (watched)")?;
            Some((disk, r))
        })
        .collect();
    let chosen = match device {
        Some(d) => mine.iter().find(|(disk, _)| *disk == d),
        None if mine.len() == 1 => mine.first(),
        None => None,
    };
    let lost = watch
        .watch
        .as_ref()
        .map(|w| w.lost.clone())
        .unwrap_or_default();
    let layer = |disk: &str, b: &crate::results::RunResult| BlockLayer {
        queue: crate::sys::disk_queue(disk),
        device: disk.to_string(),
        ops: b.ops.clone(),
        lost: lost.clone(),
        merged: 0,
        target_extents: None,
    };
    if let Some(run0) = res.runs.first_mut() {
        if let Some((disk, b)) = chosen {
            run0.block = Some(layer(disk, b));
        }
        for t in &mut run0.targets {
            if let Some((disk, b)) = mine.iter().find(|(d, _)| *d == t.target.device) {
                t.block = Some(layer(disk, b));
            }
        }
    }
    res.warnings.extend(
        watch
            .warnings
            .into_iter()
            .map(|w| format!("backend probes: {w}")),
    );
    res.watch = watch.watch;
    res.runs.extend(watch.runs);
}
