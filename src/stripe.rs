//! Several targets in one run: where each I/O of the workload lands.
//!
//! As ASM stripes a disk group, [`StripeMode::Unit`] lays the workload's address space over
//! the targets in allocation units (`--stripe-unit`, 1 MiB by default): unit 0 on the first
//! target, unit 1 on the second, …, unit N on the first again. The offset generator works in
//! that logical space ([`logical_spec`]: N times each target's working set, rounded down to
//! whole units), and [`Placement::place`] maps each logical offset to a target and the offset
//! within its data area. [`StripeMode::PerSession`] gives each session one target (session
//! `i` → target `i mod N`), its offsets those of a one-target run.
//!
//! The session loop is compiled once per kind of placement ([`Place`]): a session whose I/Os all
//! land on one target (a one-target run, or a session of `--stripe per-session`) has no
//! placement at all ([`OneTarget`]); one striped in units ([`Striped`]) pays a few shifts and
//! masks per I/O where the unit and the target count are powers of two (the default 1 MiB over
//! 2, 4, 8 … targets), a division otherwise (`bench/stripe-cost.sh` measures what is left).

use crate::units::fmt_bytes;
use crate::workload::{StripeMode, WorkloadSpec};

/// The targets of a run in words: the one path, or the list and how it is striped.
pub fn describe<'a>(paths: impl Iterator<Item = &'a std::path::Path>, unit: u64) -> String {
    let all: Vec<String> = paths.map(|p| p.display().to_string()).collect();
    if all.len() < 2 {
        return all.join("");
    }
    format!(
        "{} (striped over these {} in {} allocation units)",
        all.join(", "),
        all.len(),
        fmt_bytes(unit)
    )
}

/// Where the I/Os of a run over several targets land.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placement {
    targets: u64,
    unit: u64,
    /// Where the unit and the target count are both powers of two: log2 of the unit, and of
    /// the unit times the target count (a row of units): the target is a shift and a mask, the
    /// offset within it two shifts, a mask and an add.
    pow2: Option<(u32, u32)>,
    /// log2 of `unit` when it is a power of two (a shift and a mask instead of a division).
    shift: Option<u32>,
    region_offset: u64,
    per_session: bool,
}

impl Placement {
    /// The placement of `spec` over its targets; `None` for a one-target run.
    pub(crate) fn of(spec: &WorkloadSpec) -> Option<Placement> {
        let n = spec.target_count();
        let unit = spec.stripe_unit.max(1);
        let shift = unit.is_power_of_two().then(|| unit.trailing_zeros());
        (n > 1).then_some(Placement {
            targets: n as u64,
            unit,
            pow2: shift
                .filter(|_| n.is_power_of_two())
                .map(|s| (s, s + n.trailing_zeros())),
            shift,
            region_offset: spec.region_offset,
            per_session: spec.stripe == StripeMode::PerSession,
        })
    }

    /// The target (index) and offset within its data area of the I/O at `off`, an offset the
    /// session's generator (made from [`logical_spec`]) gave. (The session loop takes it
    /// through [`Place`].)
    #[cfg(test)]
    pub(crate) fn place(&self, session: u32, off: u64) -> (u32, u64) {
        match (self.session_target(session), StripedPow2::of(self)) {
            (Some(t), _) => (t, off),
            (None, Some(p2)) => p2.place(off),
            (None, None) => self.unit_place(off),
        }
    }

    /// Under `--stripe per-session`, the one target of session `session` (session `i` →
    /// target `i mod N`); `None` when the run is striped in units.
    pub(crate) fn session_target(&self, session: u32) -> Option<u32> {
        self.per_session
            .then(|| (session as u64 % self.targets) as u32)
    }

    /// [`Placement::place`] for a run striped in units whose unit or target count is no power
    /// of two (those take [`StripedPow2`]).
    #[inline(always)]
    fn unit_place(&self, off: u64) -> (u32, u64) {
        let (u, within) = match self.shift {
            Some(s) => (off >> s, off & (self.unit - 1)),
            None => (off / self.unit, off % self.unit),
        };
        // A 32-bit division where the unit index fits (any working set under 4 G units).
        let row = if u <= u32::MAX as u64 {
            (u as u32 / self.targets as u32) as u64
        } else {
            u / self.targets
        };
        let t = u - row * self.targets;
        (t as u32, self.region_offset + row * self.unit + within)
    }
}

/// Where a session's I/Os land: the session loop is compiled for each kind (see the module
/// docs), so that a session on one target does no placement at all.
pub(crate) trait Place: Copy {
    /// The target (index) and offset within its data area of the I/O the session's generator
    /// gave at `off`.
    fn place(&self, off: u64) -> (u32, u64);
}

/// Every I/O of the session on this one target, at the generator's offset.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OneTarget(pub(crate) u32);

impl Place for OneTarget {
    #[inline(always)]
    fn place(&self, off: u64) -> (u32, u64) {
        (self.0, off)
    }
}

/// The session's I/Os striped over the run's targets in units (`--stripe unit`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Striped(pub(crate) Placement);

impl Place for Striped {
    #[inline(always)]
    fn place(&self, off: u64) -> (u32, u64) {
        self.0.unit_place(off)
    }
}

/// [`Striped`] where the unit and the target count are powers of two: shifts and masks, no
/// branch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StripedPow2 {
    /// log2 of the unit, and of a row of units (one on each target).
    unit_shift: u32,
    row_shift: u32,
    targets_mask: u64,
    unit_mask: u64,
    region_offset: u64,
}

impl StripedPow2 {
    /// `p`'s shifts and masks; `None` where its unit or target count is no power of two.
    pub(crate) fn of(p: &Placement) -> Option<StripedPow2> {
        let (unit_shift, row_shift) = p.pow2?;
        Some(StripedPow2 {
            unit_shift,
            row_shift,
            targets_mask: p.targets - 1,
            unit_mask: p.unit - 1,
            region_offset: p.region_offset,
        })
    }
}

impl Place for StripedPow2 {
    #[inline(always)]
    fn place(&self, off: u64) -> (u32, u64) {
        let t = (off >> self.unit_shift) & self.targets_mask;
        let within = ((off >> self.row_shift) << self.unit_shift) | (off & self.unit_mask);
        (t as u32, self.region_offset + within)
    }
}

/// The spec the sessions' offset generators are made from: for `--stripe unit` over several
/// targets, the logical address space (offset 0, N whole-unit working sets); otherwise `spec`.
pub(crate) fn logical_spec(spec: &WorkloadSpec) -> WorkloadSpec {
    let n = spec.target_count() as u64;
    if n < 2 || spec.stripe != StripeMode::Unit {
        return spec.clone();
    }
    WorkloadSpec {
        region_offset: 0,
        region_size: spec.per_target_working_set() * n,
        target_size: spec.per_target_working_set() * n,
        ..spec.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(n: usize, unit: u64) -> WorkloadSpec {
        WorkloadSpec {
            targets: (0..n).map(|i| format!("t{i}")).collect(),
            target_size: 16 << 20,
            region_offset: 1 << 20,
            stripe_unit: unit,
            ..Default::default()
        }
    }

    #[test]
    fn units_go_round_the_targets_and_fill_each_working_set_exactly() {
        let s = spec(3, 1 << 20);
        let p = Placement::of(&s).unwrap();
        let l = logical_spec(&s);
        // 15 MiB per target from offset 1 MiB: 15 whole units each, 45 in the logical space.
        assert_eq!(l.working_set(), 45 << 20);
        let mut per = [0u64; 3];
        let mut seen = std::collections::HashSet::new();
        for b in 0..l.blocks() {
            let (t, off) = p.place(0, b * l.block_size);
            per[t as usize] += 1;
            assert!(off >= s.region_offset && off + l.block_size <= s.target_size);
            assert!(
                seen.insert((t, off)),
                "each logical block has its own place"
            );
        }
        assert_eq!(per, [15 * 128; 3]);
        assert_eq!(p.place(0, 0), (0, 1 << 20));
        assert_eq!(p.place(0, 1 << 20), (1, 1 << 20));
        assert_eq!(p.place(0, (3 << 20) + 8192), (0, (2 << 20) + 8192));
        // Four targets (shifts) and a unit that is no power of two (divisions) agree.
        let p4 = Placement::of(&spec(4, 1 << 20)).unwrap();
        assert_eq!(p4.place(0, (5 << 20) + 4096), (1, (2 << 20) + 4096));
        let p3 = Placement::of(&spec(3, 24 << 10)).unwrap();
        assert_eq!(
            p3.place(0, (24 << 10) * 7 + 8192),
            (1, (1 << 20) + (48 << 10) + 8192)
        );
    }

    /// The shifts and masks of a power-of-two unit over a power-of-two target count give what
    /// the divisions give (unit k on target k mod N, at row k div N), for every block.
    #[test]
    fn power_of_two_placement_is_the_divisions() {
        for (n, unit) in [(2, 1 << 20), (4, 1 << 20), (8, 64 << 10), (4, 8 << 10)] {
            let s = spec(n, unit);
            let p = Placement::of(&s).unwrap();
            assert!(p.pow2.is_some(), "{n} targets, unit {unit}");
            let l = logical_spec(&s);
            for b in 0..l.blocks() {
                let off = b * l.block_size;
                let k = off / unit;
                let want = (
                    (k % n as u64) as u32,
                    s.region_offset + k / n as u64 * unit + off % unit,
                );
                assert_eq!(
                    p.place(0, off),
                    want,
                    "{n} targets, unit {unit}, offset {off}"
                );
                assert_eq!(Striped(p).place(off), want);
                assert_eq!(StripedPow2::of(&p).unwrap().place(off), want);
            }
        }
        assert!(Placement::of(&spec(3, 1 << 20)).unwrap().pow2.is_none());
        assert!(Placement::of(&spec(4, 24 << 10)).unwrap().pow2.is_none());
    }

    #[test]
    fn per_session_puts_each_session_on_one_target() {
        let s = WorkloadSpec {
            stripe: StripeMode::PerSession,
            sessions: 4,
            ..spec(2, 1 << 20)
        };
        let p = Placement::of(&s).unwrap();
        assert_eq!(p.place(3, 8192), (1, 8192));
        assert_eq!(p.place(2, 8192), (0, 8192));
        assert!(Placement::of(&spec(1, 1 << 20)).is_none());
    }

    #[test]
    fn bad_units_and_too_few_sessions_are_refused() {
        assert!(
            spec(2, 12 << 10).validate_stripe().is_err(),
            "not whole 8 KiB blocks"
        );
        assert!(
            spec(2, 4 << 10).validate_stripe().is_err(),
            "smaller than a block"
        );
        assert!(
            spec(2, 32 << 20).validate_stripe().is_err(),
            "larger than the working set"
        );
        let s = WorkloadSpec {
            stripe: StripeMode::PerSession,
            sessions: 2,
            ..spec(3, 1 << 20)
        };
        assert!(s
            .validate_stripe()
            .unwrap_err()
            .to_string()
            .contains("3 sessions"));
        assert!(spec(2, 1 << 20).validate_stripe().is_ok());
    }
}
