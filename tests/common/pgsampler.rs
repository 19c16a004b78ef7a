//! An independent sampler of PostgreSQL's own view: `pg_stat_activity` read at a fixed rate
//! (≥ 50 Hz) from a connection of its own, counting each sampled backend of one
//! application_name by its wait event; and the same shares from pg_wait_sampling's profile
//! over a window ([`WaitSamplingWindow`]). The references the watch verdicts are compared with.
//!
//! A round is weighted by the time it stands for (from the previous round's start to its own):
//! on a saturated host the sampler itself waits for a CPU, and a round that came late stands
//! for the longer time since the last one, not for one period.

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
        let waits: BTreeMap<String, f64> = self
            .shares
            .iter()
            .filter(|(k, _)| *k != "CPU" && !k.starts_with("none:"))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let total: f64 = waits.values().sum();
        WaitShares {
            shares: waits
                .into_iter()
                .map(|(k, v)| (k, if total > 0.0 { v / total } else { 0.0 }))
                .collect(),
            samples: (self.samples as f64 * total).round() as u64,
            rounds: self.rounds,
            window: self.window,
        }
    }

    /// The shares of database time: idle samples (`idle:*`, outside a transaction) and those
    /// of no state (`none:*`) left out, the rest renormalised.
    pub fn db_time(&self) -> WaitShares {
        let db: BTreeMap<String, f64> = self
            .shares
            .iter()
            .filter(|(k, _)| !k.starts_with("idle:") && !k.starts_with("none:"))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let total: f64 = db.values().sum();
        WaitShares {
            shares: db
                .into_iter()
                .map(|(k, v)| (k, if total > 0.0 { v / total } else { 0.0 }))
                .collect(),
            samples: (self.samples as f64 * total).round() as u64,
            rounds: self.rounds,
            window: self.window,
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
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let app = app.to_string();
        let period = Duration::from_secs_f64(1.0 / hz);
        let handle = std::thread::spawn(move || {
            let mut weights: BTreeMap<String, f64> = BTreeMap::new();
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
                for row in client.query(&stmt, &[&app]).expect("pg sampler: query") {
                    *weights.entry(row.get(0)).or_default() += w;
                    samples += 1;
                }
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
            let total: f64 = weights.values().sum();
            WaitShares {
                shares: weights
                    .into_iter()
                    .map(|(k, w)| (k, if total > 0.0 { w / total } else { 0.0 }))
                    .collect(),
                samples,
                rounds,
                window: last - start,
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
        let mut w = WaitSamplingWindow {
            client,
            app: app.to_string(),
            pids: Vec::new(),
            start: BTreeMap::new(),
            started: Instant::now(),
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
        }
    }
}

/// The test server's DSN (IOLENS_PG_DSN, else target/pgtest/dsn from
/// scripts/pg-test-server.sh); `None` with a note when there is none or it does not answer,
/// unless IOLENS_PG_TESTS=1 (CI), where that fails the test.
pub fn test_dsn() -> Option<String> {
    let required = std::env::var("IOLENS_PG_TESTS").as_deref() == Ok("1");
    let dsn = std::env::var("IOLENS_PG_DSN")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pgtest/dsn");
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        });
    match dsn {
        Some(d) if postgres::Client::connect(&d, postgres::NoTls).is_ok() => Some(d),
        _ => {
            assert!(
                !required,
                "IOLENS_PG_TESTS=1 but no test server: run scripts/pg-test-server.sh"
            );
            eprintln!("note: PostgreSQL test skipped (no IOLENS_PG_DSN server answers)");
            None
        }
    }
}
