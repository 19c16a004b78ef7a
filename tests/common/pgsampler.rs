//! An independent sampler of PostgreSQL's own view: `pg_stat_activity` read at a fixed rate
//! (≥ 50 Hz) from a connection of its own, counting each sampled backend of one
//! application_name by its wait event; and the same shares from pg_wait_sampling's profile
//! over a window ([`WaitSamplingWindow`]). The references the watch verdicts are compared with.
//!
//! A round is weighted by the time it stands for (from the previous round's start to its own).
//!
//! On a host whose CPUs are saturated a sampler that must itself win a CPU to look sees the
//! backends only at the moments it got one: moments when they are *not* running (on a 2-CPU
//! host, one CPU is the sampler's, and a backend that just ran has gone back to sleep by the
//! time a late round looks). Measured under pgbench and busy loops on both CPUs of the
//! development VM: backends active with no wait event were 1.0 % of the samples of a normal
//! sampler and 7.8 % of a real-time one over the same load (`psql \watch 0.01`, the client
//! and its backend `chrt -f 50`), against 11 to 14 % on CPU or runnable by the kernel's
//! account. So, as root, the sampler thread and its backend run SCHED_FIFO
//! ([`realtime`]): each round starts on its schedule, independent of the load, and a backend
//! it preempts shows as PostgreSQL shows it, active with no wait event. The same for
//! pg_wait_sampling's collector over its window.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a sampler saw over its window.
#[derive(Debug, Clone)]
pub struct WaitShares {
    /// `class:event` (`IO:DataFileRead`, `Lock:transactionid`; `CPU` for an active backend
    /// that waits on nothing; `idle:` and the event for a backend outside a transaction waiting
    /// for its client, `idle:Client:ClientRead`) → its share of all backend samples, each
    /// weighted by the time its round stands for.
    pub shares: BTreeMap<String, f64>,
    /// Backend samples counted (one per backend per round).
    pub samples: u64,
    /// Rounds (reads of pg_stat_activity) done; 0 for pg_wait_sampling's.
    pub rounds: u64,
    /// Wall time from the first round to the last.
    pub window: Duration,
    /// Per label, the standard error of its share, by batch means: the rounds cut into
    /// [`BATCHES`] consecutive batches, the spread of the label's share between batches over
    /// √batches (it takes in the correlation between the backends of one round and between
    /// neighbouring rounds). Empty for pg_wait_sampling's (no rounds kept).
    pub stderr: BTreeMap<String, f64>,
    /// Per label, the standard error of its share as a measurement of this window's own
    /// backends, by successive differences of the rounds (the systematic-sampling estimator
    /// of Wolter, *Introduction to Variance Estimation*, 2nd ed., §8.2, v2): what sampling at
    /// discrete moments misses of the states the backends went through. It leaves out what
    /// [`WaitShares::stderr`] takes in, how far the load's shares over this window stray
    /// from its long-run ones (a burst of lock waits under a loaded host): a watch of the
    /// same window sees the same burst, so that is no error of the comparison. Empty for
    /// pg_wait_sampling's.
    pub window_stderr: BTreeMap<String, f64>,
    /// Whether the sampler (thread and backend) ran real-time, unbiased by the load.
    pub realtime: bool,
    /// Each round: the time it stands for and its samples by label (empty for pg_wait_sampling).
    pub kept: Vec<(f64, BTreeMap<String, u64>)>,
}

/// Batches for the batch-means standard error of [`WaitShares::stderr`].
pub const BATCHES: usize = 20;

/// Makes thread or process `pid` (0: the calling thread) SCHED_FIFO at priority 10 (root only).
pub fn realtime(pid: i32) -> std::io::Result<()> {
    sched(pid, libc::SCHED_FIFO, 10)
}

/// Makes `pid` an ordinary SCHED_OTHER process again.
pub fn normal(pid: i32) -> std::io::Result<()> {
    sched(pid, libc::SCHED_OTHER, 0)
}

fn sched(pid: i32, policy: i32, priority: i32) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: plain system call on a pid with a valid parameter block.
    if unsafe { libc::sched_setscheduler(pid, policy, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A label's share, its batch-means standard error and its successive-differences one
/// ([`WaitShares::stderr`], [`WaitShares::window_stderr`]), and the samples counted.
type SharesOf = (
    BTreeMap<String, f64>,
    BTreeMap<String, f64>,
    BTreeMap<String, f64>,
    u64,
);

/// The shares of `rounds` (labels and counts, and the time each stands for) restricted to the
/// labels `keep` accepts and renormalised, with the two standard errors of each.
fn shares_of(rounds: &[(f64, BTreeMap<String, u64>)], keep: impl Fn(&str) -> bool) -> SharesOf {
    let share = |rs: &[(f64, BTreeMap<String, u64>)]| {
        let mut w: BTreeMap<String, f64> = BTreeMap::new();
        let mut n = 0;
        for (weight, counts) in rs {
            for (k, c) in counts.iter().filter(|(k, _)| keep(k)) {
                *w.entry(k.clone()).or_default() += weight * *c as f64;
                n += c;
            }
        }
        let total: f64 = w.values().sum();
        (
            w.into_iter()
                .map(|(k, v)| (k, if total > 0.0 { v / total } else { 0.0 }))
                .collect::<BTreeMap<String, f64>>(),
            n,
        )
    };
    let (all, n) = share(rounds);
    let mut stderr = BTreeMap::new();
    let size = rounds.len() / BATCHES;
    if size > 0 {
        let batches: Vec<BTreeMap<String, f64>> = rounds
            .chunks(size)
            .take(BATCHES)
            .map(|c| share(c).0)
            .collect();
        let b = batches.len() as f64;
        for label in all.keys() {
            let xs: Vec<f64> = batches
                .iter()
                .map(|m| m.get(label).copied().unwrap_or(0.0))
                .collect();
            let mean = xs.iter().sum::<f64>() / b;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (b - 1.0);
            stderr.insert(label.clone(), (var / b).sqrt());
        }
    }
    // Successive differences: share s of label L is a ratio of means, so its error is that of
    // the mean of z = y − s·Y (y: L's backends in a round, Y: all kept backends in it) over
    // the mean of Y, and the error of a systematic sample's mean is estimated from the
    // squared differences of neighbouring rounds: Σ (z_r − z_{r−1})² / (2 n (n − 1)). Each
    // backend that changed state between two rounds adds to it, a slow drift of the load
    // hardly. Rounds are taken as equally spaced (the sampler keeps its schedule real-time).
    let mut window_stderr = BTreeMap::new();
    let n_rounds = rounds.len();
    if n_rounds > 2 {
        let kept_of = |counts: &BTreeMap<String, u64>, label: Option<&str>| -> f64 {
            counts
                .iter()
                .filter(|(k, _)| keep(k) && label.is_none_or(|l| l == k.as_str()))
                .map(|(_, c)| *c as f64)
                .sum()
        };
        let mean_all = rounds.iter().map(|(_, c)| kept_of(c, None)).sum::<f64>() / n_rounds as f64;
        for (label, &s) in &all {
            let z: Vec<f64> = rounds
                .iter()
                .map(|(_, c)| kept_of(c, Some(label)) - s * kept_of(c, None))
                .collect();
            let sq: f64 = z.windows(2).map(|p| (p[1] - p[0]).powi(2)).sum();
            let n = n_rounds as f64;
            let var = sq / (2.0 * n * (n - 1.0));
            window_stderr.insert(label.clone(), var.sqrt() / mean_all.max(1e-12));
        }
    }
    (all, stderr, window_stderr, n)
}

impl WaitShares {
    /// Rounds per second achieved.
    pub fn rate_hz(&self) -> f64 {
        if self.rounds < 2 {
            return 0.0;
        }
        (self.rounds - 1) as f64 / self.window.as_secs_f64()
    }

    /// The shares among waits only (`CPU` and idle-without-wait samples left out), as
    /// pg_wait_sampling counts.
    pub fn waits_only(&self) -> WaitShares {
        self.restricted(|k| k != "CPU" && !k.starts_with("none:"))
    }

    /// The shares of database time: idle samples (`idle:*`, outside a transaction) and those
    /// of no state (`none:*`) left out, the rest renormalised.
    pub fn db_time(&self) -> WaitShares {
        self.restricted(|k| !k.starts_with("idle:") && !k.starts_with("none:"))
    }

    fn restricted(&self, keep: impl Fn(&str) -> bool) -> WaitShares {
        if !self.kept.is_empty() {
            let (shares, stderr, window_stderr, samples) = shares_of(&self.kept, keep);
            return WaitShares {
                shares,
                stderr,
                window_stderr,
                samples,
                kept: self.kept.clone(),
                ..self.clone()
            };
        }
        let kept: BTreeMap<String, f64> = self
            .shares
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let total: f64 = kept.values().sum();
        WaitShares {
            shares: kept
                .into_iter()
                .map(|(k, v)| (k, if total > 0.0 { v / total } else { 0.0 }))
                .collect(),
            samples: (self.samples as f64 * total).round() as u64,
            ..self.clone()
        }
    }

    /// The share of `label`, 0 when never seen.
    pub fn share(&self, label: &str) -> f64 {
        self.shares.get(label).copied().unwrap_or(0.0)
    }
}

/// A running sampler; [`PgSampler::finish`] stops it and returns what it saw.
pub struct PgSampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<WaitShares>>,
}

impl PgSampler {
    /// Starts sampling, `hz` times a second, the backends whose application_name is `app`
    /// (the sampler's own connection is `iolens-pg-sampler`, never counted). Rounds are on a
    /// fixed schedule; a late round is not made up for (the achieved rate is reported).
    pub fn start(dsn: &str, app: &str, hz: f64) -> PgSampler {
        let mut client = postgres::Client::connect(
            &format!("{dsn} application_name=iolens-pg-sampler"),
            postgres::NoTls,
        )
        .expect("pg sampler: connect");
        let stmt = client
            .prepare(
                "SELECT CASE WHEN state = 'idle' THEN 'idle:' ELSE '' END || \
                   coalesce(wait_event_type || ':' || wait_event, \
                   CASE WHEN state = 'active' THEN 'CPU' ELSE 'none:' || coalesce(state, '') END) \
                 FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()",
            )
            .unwrap();
        // As root, the sampler's backend and thread run real-time (see the module's note).
        let backend: i32 = client
            .query_one("SELECT pg_backend_pid()", &[])
            .unwrap()
            .get(0);
        let backend_rt = realtime(backend).is_ok();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let app = app.to_string();
        let period = Duration::from_secs_f64(1.0 / hz);
        let handle = std::thread::spawn(move || {
            let rt = backend_rt && realtime(0).is_ok();
            let mut kept: Vec<(f64, BTreeMap<String, u64>)> = Vec::new();
            let (mut samples, mut rounds) = (0u64, 0u64);
            let start = Instant::now();
            let mut last = start;
            let mut next = start;
            let mut prev: Option<Instant> = None;
            while !stop2.load(Ordering::Relaxed) {
                let at = Instant::now();
                // The time this round stands for: since the last one (one period for the first).
                let w = prev.map_or(period, |p| at - p).as_secs_f64();
                prev = Some(at);
                let mut counts: BTreeMap<String, u64> = BTreeMap::new();
                for row in client.query(&stmt, &[&app]).expect("pg sampler: query") {
                    *counts.entry(row.get(0)).or_default() += 1;
                    samples += 1;
                }
                kept.push((w, counts));
                rounds += 1;
                last = Instant::now();
                next += period;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
            let (shares, stderr, window_stderr, _) = shares_of(&kept, |_| true);
            WaitShares {
                shares,
                samples,
                rounds,
                window: last - start,
                stderr,
                window_stderr,
                realtime: rt,
                kept,
            }
        });
        PgSampler {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops the sampler and returns its shares.
    pub fn finish(mut self) -> WaitShares {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap()
    }
}

impl Drop for PgSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The same shares as pg_wait_sampling (the server-side sampler, 10 ms period by default)
/// counted them over a window: the difference of its profile (samples per pid and wait event)
/// between start and finish, for the
/// backends of one application_name present at either moment. Its profile is not reset (other
/// users of the server keep theirs). Debian's pg_wait_sampling 1.1.4 samples only processes
/// that wait (it has no `sample_cpu`): compare with [`WaitShares::waits_only`]; a `CPU` share
/// appears only with a version that samples CPU.
pub struct WaitSamplingWindow {
    client: postgres::Client,
    app: String,
    pids: Vec<i32>,
    start: BTreeMap<(i32, String), i64>,
    started: Instant,
    /// pg_wait_sampling's collector, made real-time for the window (as root), restored after.
    collector: Option<i32>,
}

impl WaitSamplingWindow {
    /// Starts a window; `None` (with a note) when the server has no pg_wait_sampling (not
    /// preloaded or not created), unless IOLENS_PG_TESTS=1 (CI), where that fails the test.
    pub fn start(dsn: &str, app: &str) -> Option<WaitSamplingWindow> {
        let mut client = postgres::Client::connect(
            &format!("{dsn} application_name=iolens-pg-sampler"),
            postgres::NoTls,
        )
        .expect("pg_wait_sampling window: connect");
        let present = client
            .query_one(
                "SELECT count(*) FROM pg_extension WHERE extname = 'pg_wait_sampling'",
                &[],
            )
            .map(|r| r.get::<_, i64>(0) == 1)
            .unwrap_or(false);
        if !present {
            let required = std::env::var("IOLENS_PG_TESTS").as_deref() == Ok("1");
            assert!(
                !required,
                "the test server has no pg_wait_sampling: run scripts/pg-test-server.sh"
            );
            eprintln!("note: pg_wait_sampling comparison skipped: not in the test server");
            return None;
        }
        // Its collector samples from a process of its own, starved as any on a saturated host.
        let collector: Option<i32> = client
            .query_opt(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_wait_sampling collector'",
                &[],
            )
            .ok()
            .flatten()
            .map(|r| r.get(0))
            .filter(|&pid| realtime(pid).is_ok());
        let mut w = WaitSamplingWindow {
            client,
            app: app.to_string(),
            pids: Vec::new(),
            start: BTreeMap::new(),
            started: Instant::now(),
            collector,
        };
        w.add_pids();
        w.start = w.profile();
        w.started = Instant::now();
        Some(w)
    }

    fn add_pids(&mut self) {
        for row in self
            .client
            .query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
                &[&self.app],
            )
            .unwrap()
        {
            let pid: i32 = row.get(0);
            if !self.pids.contains(&pid) {
                self.pids.push(pid);
            }
        }
    }

    fn profile(&mut self) -> BTreeMap<(i32, String), i64> {
        self.client
            .query(
                "SELECT pid, coalesce(event_type || ':' || event, 'CPU'), sum(count)::bigint \
                 FROM pg_wait_sampling_profile WHERE pid = ANY($1) GROUP BY 1, 2",
                &[&self.pids],
            )
            .unwrap()
            .into_iter()
            .map(|r| ((r.get(0), r.get(1)), r.get(2)))
            .collect()
    }

    /// Ends the window: pg_wait_sampling's shares over it.
    pub fn finish(mut self) -> WaitShares {
        let window = self.started.elapsed();
        let mut end = self.profile();
        let realtime = self.collector.take().is_some_and(|pid| normal(pid).is_ok());
        self.add_pids();
        end.extend(self.profile());
        let mut counts: BTreeMap<String, i64> = BTreeMap::new();
        for ((pid, label), n) in end {
            let d = n - self.start.get(&(pid, label.clone())).copied().unwrap_or(0);
            if d > 0 {
                *counts.entry(label).or_default() += d;
            }
        }
        let samples: i64 = counts.values().sum();
        WaitShares {
            shares: counts
                .into_iter()
                .map(|(k, c)| (k, c as f64 / samples.max(1) as f64))
                .collect(),
            samples: samples as u64,
            rounds: 0,
            window,
            stderr: BTreeMap::new(),
            window_stderr: BTreeMap::new(),
            realtime,
            kept: Vec::new(),
        }
    }
}

impl Drop for WaitSamplingWindow {
    fn drop(&mut self) {
        if let Some(pid) = self.collector.take() {
            let _ = normal(pid);
        }
    }
}
