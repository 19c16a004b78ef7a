//! The p99 of a planned configuration, simulated: closed-loop sessions over LUNs, each LUN a
//! FIFO queue of `queue` servers, every service time drawn from a measured latency histogram.
//!
//! Why a simulation and not the 1-LUN curve read at the same mean latency
//! (`bench/plan-p99-sim.py`): on one LUN past its queue every read waits behind the same
//! number of others, so the wait is nearly fixed and p99 ÷ mean falls toward 1 (1.09 measured
//! at 16 sessions on a 4-deep LUN). Striped, each read goes to a LUN at random and the number
//! of sessions queued at that LUN varies from read to read, so at the same mean the spread is
//! far wider (p99 ÷ mean 1.8–1.9 measured over 2 and 4 LUNs). The mean is a product-form
//! figure (mean value analysis gets it); the tail is not, so it is simulated.
//!
//! Every simulation is seeded from its parameters: the same inputs give the same figures.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A service-time distribution: a measured histogram's recorded values and their counts.
#[derive(Clone, Debug)]
pub struct Service {
    /// (value in ns, cumulative count), ascending.
    steps: Vec<(u64, u64)>,
}

impl Service {
    /// The distribution of `h`'s recorded latencies (each bucket at its median equivalent
    /// value). None when `h` is empty.
    pub fn from_hist(h: &Histogram<u64>) -> Option<Self> {
        let mut steps = Vec::new();
        let mut cum = 0u64;
        for v in h.iter_recorded() {
            cum += v.count_at_value();
            steps.push((h.median_equivalent(v.value_iterated_to()), cum));
        }
        (cum > 0).then_some(Service { steps })
    }

    /// Reads recorded.
    pub fn count(&self) -> u64 {
        self.steps.last().map_or(0, |s| s.1)
    }

    /// Mean service time, ns.
    pub fn mean(&self) -> f64 {
        let mut prev = 0;
        let mut sum = 0.0;
        for &(v, c) in &self.steps {
            sum += v as f64 * (c - prev) as f64;
            prev = c;
        }
        sum / self.count().max(1) as f64
    }

    fn sample(&self, rng: &mut SmallRng) -> u64 {
        let k = rng.gen_range(0..self.count());
        let i = self.steps.partition_point(|s| s.1 <= k);
        self.steps[i.min(self.steps.len() - 1)].0
    }

    /// A bootstrap replica: as many reads as measured, drawn from this distribution with
    /// replacement (what another measurement of the same size might have recorded).
    fn resampled(&self, rng: &mut SmallRng) -> Service {
        let mut vals: Vec<u64> = (0..self.count()).map(|_| self.sample(rng)).collect();
        vals.sort_unstable();
        let mut steps: Vec<(u64, u64)> = Vec::new();
        for (i, v) in vals.into_iter().enumerate() {
            match steps.last_mut() {
                Some(s) if s.0 == v => s.1 = i as u64 + 1,
                _ => steps.push((v, i as u64 + 1)),
            }
        }
        Service { steps }
    }
}

/// One configuration to simulate.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub sessions: u32,
    pub luns: u32,
    /// Requests each LUN serves at once.
    pub queue: u32,
    /// Time a session spends between its reads, ns.
    pub outside_ns: u64,
    /// Each session on one LUN (session mod LUNs) instead of every read at a random LUN.
    pub per_session: bool,
}

/// What a simulation gave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    pub iops: f64,
    pub mean_ns: f64,
    pub p99_ns: f64,
    /// Reads the figures are of (after the warm-up).
    pub reads: usize,
}

/// Reads simulated for a prediction: enough that the p99 of the simulated model is known to
/// about ±2 % (its rank to √(n·0.0099) ≈ 30 of the 1,000 reads above it).
pub const READS: usize = 100_000;

fn seed_of(c: &Config, extra: u64) -> u64 {
    let mut z = (c.sessions as u64) << 40
        ^ (c.luns as u64) << 24
        ^ (c.queue as u64) << 8
        ^ c.per_session as u64
        ^ c.outside_ns.rotate_left(17)
        ^ extra.rotate_left(33);
    // splitmix64's finaliser: nearby configurations get unrelated streams.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Simulate `reads` reads of `c` (after a warm-up of a tenth as many, at least 20 per
/// session) with service times drawn from `svc`.
fn run(c: &Config, svc: &Service, reads: usize, rng: &mut SmallRng) -> Outcome {
    let sessions = c.sessions.max(1) as usize;
    let luns = c.luns.max(1) as usize;
    let queue = c.queue.max(1);
    let warm = (reads / 10).max(20 * sessions);
    // Events: (time, sequence, session, completion?) — the sequence keeps ties in order.
    let mut ev: BinaryHeap<Reverse<(u64, u64, u32, bool)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut busy = vec![0u32; luns];
    let mut waiting: Vec<VecDeque<u32>> = vec![VecDeque::new(); luns];
    let mut lun_of = vec![0usize; sessions];
    let mut issued = vec![0u64; sessions];
    for s in 0..sessions {
        // Sessions start spread over one cycle.
        let t = rng.gen_range(0..=c.outside_ns + svc.mean() as u64);
        ev.push(Reverse((t, seq, s as u32, false)));
        seq += 1;
    }
    let mut lat: Vec<u64> = Vec::with_capacity(reads);
    let (mut done, mut t_warm, mut t_end) = (0usize, 0u64, 0u64);
    while let Some(Reverse((t, _, s, completion))) = ev.pop() {
        let si = s as usize;
        if !completion {
            let l = if c.per_session {
                si % luns
            } else {
                rng.gen_range(0..luns)
            };
            lun_of[si] = l;
            issued[si] = t;
            if busy[l] < queue {
                busy[l] += 1;
                ev.push(Reverse((t + svc.sample(rng), seq, s, true)));
                seq += 1;
            } else {
                waiting[l].push_back(s);
            }
            continue;
        }
        let l = lun_of[si];
        done += 1;
        if done == warm {
            t_warm = t;
        } else if done > warm {
            lat.push(t - issued[si]);
            t_end = t;
            if lat.len() == reads {
                break;
            }
        }
        match waiting[l].pop_front() {
            Some(next) => {
                ev.push(Reverse((t + svc.sample(rng), seq, next, true)));
                seq += 1;
            }
            None => busy[l] -= 1,
        }
        ev.push(Reverse((t + c.outside_ns, seq, s, false)));
        seq += 1;
    }
    let n = lat.len().max(1);
    let mean = lat.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
    let k = ((n as f64 * 0.99).ceil() as usize).clamp(1, n) - 1;
    let p99 = if lat.is_empty() {
        0.0
    } else {
        *lat.select_nth_unstable(k).1 as f64
    };
    Outcome {
        iops: lat.len() as f64 / ((t_end - t_warm).max(1) as f64 / 1e9),
        mean_ns: mean,
        p99_ns: p99,
        reads: lat.len(),
    }
}

/// The simulated IOPS, mean and p99 of `c` ([`READS`] reads, seeded from `c`).
pub fn simulate(c: &Config, svc: &Service) -> Outcome {
    let mut rng = SmallRng::seed_from_u64(seed_of(c, 0));
    run(c, svc, READS, &mut rng)
}

/// The p99 a measurement of `reads` reads of `c` can give, as the model sees it: `replicas`
/// simulations of `reads` reads each, every one with its own bootstrap replica of the
/// service distribution (the measured histogram is itself a sample). Returns the p99s,
/// sorted.
pub fn p99_spread(c: &Config, svc: &Service, reads: usize, replicas: usize) -> Vec<f64> {
    let mut out: Vec<f64> = (0..replicas)
        .map(|i| {
            let mut rng = SmallRng::seed_from_u64(seed_of(c, i as u64 + 1));
            let s = svc.resampled(&mut rng);
            run(c, &s, reads.max(100), &mut rng).p99_ns
        })
        .collect();
    out.sort_by(f64::total_cmp);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 ms service with an exponential jitter of mean 0.3 ms, as bench/plan-p99-sim.py.
    fn jittered() -> Service {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..20_000 {
            let u: f64 = rng.gen_range(f64::EPSILON..1.0);
            h.record(4_000_000 + (-u.ln() * 300_000.0) as u64).unwrap();
        }
        Service::from_hist(&h).unwrap()
    }

    fn cfg(sessions: u32, luns: u32) -> Config {
        Config {
            sessions,
            luns,
            queue: 4,
            outside_ns: 100_000,
            per_session: false,
        }
    }

    #[test]
    fn one_lun_saturates_at_its_queue_and_its_tail_is_narrow() {
        let svc = jittered();
        assert!((svc.mean() / 4.3e6 - 1.0).abs() < 0.02, "{}", svc.mean());
        let o = simulate(&cfg(16, 1), &svc);
        // 4 servers of 4.3 ms mean: 930 IOPS; 16 sessions by Little's law: 17.2 ms.
        assert!((o.iops / (4.0 / 4.3e-3) - 1.0).abs() < 0.02, "{o:?}");
        assert!((o.mean_ns / 17.1e6 - 1.0).abs() < 0.03, "{o:?}");
        // Every read waits behind the same 12 others: the tail is the sum of 4 services'
        // jitter, p99 ÷ mean near 1.1 (the Python model: 1.09).
        let r = o.p99_ns / o.mean_ns;
        assert!(r > 1.02 && r < 1.2, "{r} {o:?}");
    }

    #[test]
    fn striped_luns_have_a_wider_tail_than_one_lun_at_the_same_mean() {
        let svc = jittered();
        // The Python model (bench/plan-p99-sim.py, 60,000 reads): p99 ÷ mean 1.81 at 16
        // sessions over 2 LUNs, 1.91 over 4, 2.40 at 32 over 4; ±0.1 for two simulations'
        // sampling and histogram buckets.
        for (n, luns, want) in [(16, 2, 1.81), (16, 4, 1.91), (32, 4, 2.40)] {
            let o = simulate(&cfg(n, luns), &svc);
            let r = o.p99_ns / o.mean_ns;
            assert!(
                (r - want).abs() < 0.1,
                "{luns} LUNs, {n} sessions: {r} {o:?}"
            );
        }
        // Per session each LUN is a 1-LUN network: the narrow tail again.
        let o = simulate(
            &Config {
                per_session: true,
                ..cfg(32, 4)
            },
            &svc,
        );
        assert!(o.p99_ns / o.mean_ns < 1.25, "{o:?}");
    }

    #[test]
    fn the_same_inputs_give_the_same_figures_and_the_spread_brackets_the_prediction() {
        let svc = jittered();
        let c = cfg(16, 2);
        assert_eq!(simulate(&c, &svc), simulate(&c, &svc));
        let p = simulate(&c, &svc).p99_ns;
        let s = p99_spread(&c, &svc, 5_000, 20);
        assert!(s[0] < p && p < s[19], "{p} {s:?}");
    }
}
