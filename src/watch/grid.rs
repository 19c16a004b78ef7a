//! The watch's intervals over a long watch: the newest at full resolution, older ones rolled up
//! into coarser ones, so that a watch of days keeps a bounded number of intervals.
//!
//! A slot holds one or more consecutive base intervals (`--interval` long). The newest finished
//! slots, up to `fine`, are one base interval each; older ones move into the coarse slots, each
//! at most `width` base intervals: the oldest fine slot joins the newest coarse slot while that
//! one is narrower than `width`, else it starts a new one. When there would be more than
//! `coarse` coarse slots, `width` doubles and neighbouring coarse slots merge pairwise. So at
//! most `fine + coarse + 1` finished slots exist, however long the watch, and the coarse ones
//! are all `width` wide (but the newest, still filling). Merging adds two slots' histograms and
//! sums exactly: every count of the watch stays in exactly one slot.

/// Slots kept by default (`--keep-intervals`): half at full resolution, half rolled up.
pub const KEEP: usize = 2048;

/// The slots of a watch (see the module doc), oldest first.
#[derive(Debug)]
pub(super) struct Grid {
    /// The first base interval of each slot.
    starts: Vec<u64>,
    /// The base intervals each slot holds.
    widths: Vec<u64>,
    /// Slots before this one are coarse.
    coarse_n: usize,
    /// The most base intervals a coarse slot holds now.
    width: u64,
    fine: usize,
    coarse: usize,
}

impl Grid {
    /// A grid keeping about `keep` finished slots (at least 4): half fine, half coarse.
    pub(super) fn new(keep: usize) -> Grid {
        let keep = keep.max(4);
        Grid {
            starts: Vec::new(),
            widths: Vec::new(),
            coarse_n: 0,
            width: 1,
            fine: keep - keep / 2,
            coarse: keep / 2,
        }
    }

    /// Slots so far.
    pub(super) fn len(&self) -> usize {
        self.starts.len()
    }

    /// The base interval past the last slot.
    fn end(&self) -> u64 {
        match (self.starts.last(), self.widths.last()) {
            (Some(s), Some(w)) => s + w,
            _ => 0,
        }
    }

    /// The slot of base interval `k`, adding one-interval slots up to it when it lies past the
    /// last.
    pub(super) fn slot(&mut self, k: u64) -> usize {
        let end = self.end();
        if k >= end {
            for b in end..=k {
                self.starts.push(b);
                self.widths.push(1);
            }
            return self.starts.len() - 1;
        }
        // The fine slots: one base interval each.
        if let Some(&s) = self.starts.get(self.coarse_n) {
            if k >= s {
                return self.coarse_n + (k - s) as usize;
            }
        }
        self.starts.partition_point(|&s| s <= k) - 1
    }

    /// Slot `i`'s first base interval and its width in base intervals.
    pub(super) fn bounds(&self, i: usize) -> (u64, u64) {
        (self.starts[i], self.widths[i])
    }

    /// Roll up now that the slots before `done` are finished. Returns the merges made, in
    /// order: each `i` merged slot `i + 1` into slot `i` (the later slots moving down by one),
    /// as the intervals' holders must merge theirs.
    pub(super) fn roll(&mut self, mut done: usize) -> Vec<usize> {
        let mut merges = Vec::new();
        done = done.min(self.len());
        while done - self.coarse_n > self.fine {
            match self.coarse_n.checked_sub(1) {
                Some(last) if self.widths[last] < self.width => {
                    self.merge(last);
                    merges.push(last);
                    done -= 1;
                }
                _ => self.coarse_n += 1,
            }
            if self.coarse_n > self.coarse {
                self.width *= 2;
                let mut i = 0;
                while i + 1 < self.coarse_n {
                    if self.widths[i] + self.widths[i + 1] <= self.width {
                        self.merge(i);
                        merges.push(i);
                        self.coarse_n -= 1;
                        done -= 1;
                    }
                    i += 1;
                }
            }
        }
        merges
    }

    fn merge(&mut self, i: usize) {
        self.widths[i] += self.widths[i + 1];
        self.widths.remove(i + 1);
        self.starts.remove(i + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_stay_bounded_and_cover_every_interval_once() {
        let mut g = Grid::new(16);
        // Each slot's holder: the base intervals it holds, merged as the grid says.
        let mut held: Vec<Vec<u64>> = Vec::new();
        for k in 0..10_000u64 {
            let s = g.slot(k);
            while held.len() <= s {
                held.push(Vec::new());
            }
            held[s].push(k);
            // Interval k is done once k + 1 begins.
            let done = g.slot(k + 1);
            while held.len() < g.len() {
                held.push(Vec::new());
            }
            for i in g.roll(done) {
                let next = held.remove(i + 1);
                held[i].extend(next);
            }
            assert_eq!(held.len(), g.len());
            assert!(g.len() <= 16 + 2, "{} slots at {k}", g.len());
        }
        // Every base interval in exactly one slot, in order, where the grid places it.
        let all: Vec<u64> = held.iter().flatten().copied().collect();
        assert_eq!(all, (0..10_000).collect::<Vec<_>>());
        for (i, h) in held.iter().enumerate() {
            if let (Some(&a), Some(&b)) = (h.first(), h.last()) {
                assert_eq!(g.bounds(i), (a, b - a + 1), "slot {i}");
                assert_eq!(g.slot(a), i);
                assert_eq!(g.slot(b), i);
            }
        }
        // The newest 8 at full resolution; the coarse ones as wide as the width (the newest
        // still filling), and older never narrower than newer.
        assert!(g.widths[g.len() - 8..].iter().all(|&w| w == 1));
        let coarse = &g.widths[..g.coarse_n];
        assert!(coarse[..coarse.len() - 1].iter().all(|&w| w == g.width));
        assert!(coarse.windows(2).all(|p| p[0] >= p[1]));
        assert!(g.width >= 10_000 / 16, "width {}", g.width);
    }
}
