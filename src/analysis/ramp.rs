//! The ramps of a calibration as pure state machines, told each step's figures: they decide
//! when a ramp stops (latency target, plateau, fall past the peak, ceiling), where it refines,
//! and which step is its best. `calibrate` drives them and measures; the decisions are here.

use crate::results::analysis::StopReason;

/// The session ramp of the random-read phase as a pure state machine: it proposes session
/// counts, is told each step's IOPS and latency, and decides when to stop and what to refine.
#[derive(Clone, Debug)]
pub struct Ramp {
    max_sessions: u32,
    target_ns: f64,
    plateau: f64,
    refinements_left: u32,
    /// (sessions, iops, latency at percentile ns, good)
    pub steps: Vec<(u32, f64, f64, bool)>,
    pub stop: Option<StopReason>,
    next_pow: u32,
    /// Good steps in a row that did not beat the best so far by the plateau threshold.
    flat: u32,
}

/// Steps in a row without growth (by the plateau threshold, over the best step so far) that
/// make a plateau: one noisy step never stops a ramp.
pub const PLATEAU_STEPS: u32 = 2;

/// A step below the best by more than this many times the plateau threshold has fallen past
/// the peak (not noise): the ramp stops at once (with the default 5 %: a fall of over 10 %).
pub const FALL_FACTOR: f64 = 2.0;

/// Did a step of `value` fall past the peak `best` (threshold `plateau`, 0.05 = 5 %)?
fn fell(value: f64, best: f64, plateau: f64) -> bool {
    value < best * (1.0 - FALL_FACTOR * plateau)
}

impl Ramp {
    /// A ramp up to `max_sessions`, latency target `target_ns`, plateau threshold (0.05 = 5 %),
    /// with up to `refinements` refinement steps after the first bad step.
    pub fn new(max_sessions: u32, target_ns: f64, plateau: f64, refinements: u32) -> Ramp {
        Ramp {
            max_sessions,
            target_ns,
            plateau,
            refinements_left: refinements,
            steps: Vec::new(),
            stop: None,
            next_pow: 1,
            flat: 0,
        }
    }

    /// Number of steps the ramp may take at most (powers of two up to the ceiling, plus
    /// refinements): used to divide the budget.
    pub fn max_steps(max_sessions: u32, refinements: u32) -> u32 {
        let mut n = 0;
        let mut s = 1u32;
        while s <= max_sessions {
            n += 1;
            if s == max_sessions {
                break;
            }
            s = (s * 2).min(max_sessions);
        }
        n + refinements
    }

    fn last_good(&self) -> Option<(u32, f64)> {
        self.steps
            .iter()
            .filter(|s| s.3)
            .max_by_key(|s| s.0)
            .map(|s| (s.0, s.1))
    }

    fn first_bad(&self) -> Option<u32> {
        self.steps.iter().filter(|s| !s.3).map(|s| s.0).min()
    }

    /// The next session count to measure, or `None` when the ramp is done.
    pub fn next_sessions(&mut self) -> Option<u32> {
        match self.stop {
            None => Some(self.next_pow),
            Some(StopReason::LatencyTarget) => {
                // Refine between the last good and first bad step (bisection).
                if self.refinements_left == 0 {
                    return None;
                }
                let lo = self.last_good()?.0;
                let hi = self.first_bad()?;
                if hi <= lo + 1 {
                    return None;
                }
                self.refinements_left -= 1;
                Some(lo + (hi - lo) / 2)
            }
            _ => None,
        }
    }

    /// Report the outcome of the step at `sessions`.
    pub fn record(&mut self, sessions: u32, iops: f64, latency_ns: f64) {
        let good = latency_ns <= self.target_ns;
        let prev_best = self.best();
        self.steps.push((sessions, iops, latency_ns, good));
        if self.stop.is_some() {
            return;
        }
        if !good {
            self.stop = Some(StopReason::LatencyTarget);
            return;
        }
        // A plateau must persist: PLATEAU_STEPS good steps in a row that do not beat the best
        // step so far by the threshold (one noisy step is not a plateau). A fall beyond noise
        // (below the best by FALL_FACTOR × the threshold) is past the peak: it stops at once.
        match prev_best {
            Some((_, best)) if fell(iops, best, self.plateau) => {
                self.stop = Some(StopReason::Fell);
                return;
            }
            Some((_, best)) if iops < best * (1.0 + self.plateau) => {
                self.flat += 1;
                if self.flat >= PLATEAU_STEPS {
                    self.stop = Some(StopReason::Plateau);
                    return;
                }
            }
            _ => self.flat = 0,
        }
        if sessions >= self.max_sessions {
            self.stop = Some(StopReason::Ceiling);
            return;
        }
        self.next_pow = (sessions * 2).min(self.max_sessions);
    }

    /// Mark the ramp as cut short.
    pub fn interrupt(&mut self) {
        if self.stop.is_none() {
            self.stop = Some(StopReason::Interrupted);
        }
        self.refinements_left = 0;
    }

    /// Best IOPS among steps that met the target, with its session count (the fewest sessions
    /// among equal IOPS).
    pub fn best(&self) -> Option<(u32, f64)> {
        super::target::best_of(self.steps.iter().map(|s| (s.0, s.1, s.3)))
            .map(|k| (self.steps[k].0, self.steps[k].1))
    }
}

/// The queue-depth ramp of a sequential phase: it is told each step's MB/s and says whether
/// to go on. It stops when [`PLATEAU_STEPS`] steps in a row fail to beat the best so far by the
/// plateau threshold, or at once when a step falls below the best by more than [`FALL_FACTOR`]
/// times it, and reports the best step observed.
#[derive(Clone, Debug)]
pub struct SeqRamp {
    plateau: f64,
    flat: u32,
    /// (queue depth, MB/s) of every step.
    pub steps: Vec<(u32, f64)>,
}

impl SeqRamp {
    /// A ramp with plateau threshold `plateau` (0.05 = 5 %).
    pub fn new(plateau: f64) -> SeqRamp {
        SeqRamp {
            plateau,
            flat: 0,
            steps: Vec::new(),
        }
    }

    /// Report a step; returns whether the ramp goes on.
    pub fn record(&mut self, qd: u32, mbs: f64) -> bool {
        let prev = self.best();
        self.steps.push((qd, mbs));
        match prev {
            Some((_, best)) if fell(mbs, best, self.plateau) => false,
            Some((_, best)) if mbs < best * (1.0 + self.plateau) => {
                self.flat += 1;
                self.flat < PLATEAU_STEPS
            }
            _ => {
                self.flat = 0;
                true
            }
        }
    }

    /// The best step observed: (queue depth, MB/s).
    pub fn best(&self) -> Option<(u32, f64)> {
        self.steps
            .iter()
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }
}
