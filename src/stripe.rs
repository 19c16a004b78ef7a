//! Several targets in one run: where each I/O of the workload lands.
//!
//! As ASM stripes a disk group, [`StripeMode::Unit`] lays the workload's address space over
//! the targets in allocation units (`--stripe-unit`, 1 MiB by default): unit 0 on the first
//! target, unit 1 on the second, …, unit N on the first again. The offset generator works in
//! that logical space ([`logical_spec`]: N times each target's working set, rounded down to
//! whole units) and places each block as it draws it: a [`Place`] maps the block to a target
//! and the offset within its data area ([`Placement::place`] is the same for tests).
//! [`StripeMode::PerSession`] gives each session one target (session `i` → target `i mod N`),
//! its offsets those of a one-target run.
//!
//! The generator is compiled once per kind of placement, and the session loop that calls it is
//! the same code for every kind: a session whose I/Os all land on one target (a one-target
//! run, or a session of `--stripe per-session`) places a block at its offset
//! ([`OneTarget`](crate::workload::OneTarget)); one striped in units where the unit (in
//! blocks) and the target count are powers of two (the default 1 MiB of 8 KiB blocks over 2,
//! 4, 8 … targets) takes the target bits out of the block number: two instructions where the
//! CPU has BMI1 and a fast BMI2 ([`StripedBmi`]), shifts and masks otherwise
//! ([`StripedPow2`]); any other, divisions ([`Striped`]). `bench/stripe-cost.sh` measures
//! what is left.

use crate::units::fmt_bytes;
use crate::workload::{Place, StripeMode, WorkloadSpec};

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
    /// The allocation unit in blocks (`--stripe-unit` ÷ `--bs`: the unit is whole blocks).
    unit_blocks: u64,
    block: u64,
    region_offset: u64,
    per_session: bool,
}

impl Placement {
    /// The placement of `spec` over its targets; `None` for a one-target run.
    pub(crate) fn of(spec: &WorkloadSpec) -> Option<Placement> {
        let n = spec.target_count();
        let block = spec.block_size.max(1);
        (n > 1).then_some(Placement {
            targets: n as u64,
            unit_blocks: (spec.stripe_unit / block).max(1),
            block,
            region_offset: spec.region_offset,
            per_session: spec.stripe == StripeMode::PerSession,
        })
    }

    /// The target (index) and offset within its data area of the I/O at byte offset `off` of
    /// the session's address space (that of [`logical_spec`]), as the session's generator
    /// places it (the same dispatch as the session loop's; an offset inside a block lands
    /// inside the block's place).
    #[cfg(test)]
    pub(crate) fn place(&self, session: u32, off: u64) -> (u32, u64) {
        let (b, r) = (off / self.block, off % self.block);
        let (t, o) = match self.session_target(session) {
            Some(t) => (t, off - r),
            None => match (StripedBmi::of(self), StripedPow2::of(self)) {
                (Some(x), _) => x.place(b),
                (None, Some(p2)) => p2.place(b),
                (None, None) => Striped::of(self).place(b),
            },
        };
        (t, o + r)
    }

    /// Under `--stripe per-session`, the one target of session `session` (session `i` →
    /// target `i mod N`); `None` when the run is striped in units.
    pub(crate) fn session_target(&self, session: u32) -> Option<u32> {
        self.per_session
            .then(|| (session as u64 % self.targets) as u32)
    }
}

/// The session's blocks striped over the run's targets in units (`--stripe unit`) whose size in
/// blocks or whose target count is no power of two: divisions (those that are take
/// [`StripedPow2`] or [`StripedBmi`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Striped {
    targets: u64,
    unit_blocks: u64,
    /// log2 of `unit_blocks` when it is a power of two (a shift and a mask instead of a
    /// division).
    unit_shift: Option<u32>,
    block: u64,
    region_offset: u64,
}

impl Striped {
    /// `p`'s units as divisions.
    pub(crate) fn of(p: &Placement) -> Striped {
        Striped {
            targets: p.targets,
            unit_blocks: p.unit_blocks,
            unit_shift: p
                .unit_blocks
                .is_power_of_two()
                .then(|| p.unit_blocks.trailing_zeros()),
            block: p.block,
            region_offset: p.region_offset,
        }
    }
}

impl Place for Striped {
    #[inline(always)]
    fn place(&self, b: u64) -> (u32, u64) {
        let (u, within) = match self.unit_shift {
            Some(s) => (b >> s, b & (self.unit_blocks - 1)),
            None => (b / self.unit_blocks, b % self.unit_blocks),
        };
        // A 32-bit division where the unit index fits (any working set under 4 G units).
        let row = if u <= u32::MAX as u64 {
            (u as u32 / self.targets as u32) as u64
        } else {
            u / self.targets
        };
        let t = u - row * self.targets;
        (
            t as u32,
            self.region_offset + (row * self.unit_blocks + within) * self.block,
        )
    }
}

/// [`Striped`] where the unit in blocks and the target count are powers of two: block `b` of
/// the session's space is unit `b >> k` (k = log2 of the unit in blocks), on target
/// `(b >> k) mod N`, and lies within that target at the block whose number is `b` with those
/// log2 N target bits taken out. Shifts and masks, no branch, no division.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StripedPow2 {
    /// log2 of the unit in blocks, and of the target count.
    unit_shift: u32,
    targets_shift: u32,
    targets_mask: u64,
    /// The block within its unit: the low `unit_shift` bits.
    unit_mask: u64,
    block: u64,
    region_offset: u64,
}

impl StripedPow2 {
    /// `p`'s shifts and masks; `None` where its unit in blocks or its target count is no power
    /// of two.
    pub(crate) fn of(p: &Placement) -> Option<StripedPow2> {
        (p.unit_blocks.is_power_of_two() && p.targets.is_power_of_two()).then(|| StripedPow2 {
            unit_shift: p.unit_blocks.trailing_zeros(),
            targets_shift: p.targets.trailing_zeros(),
            targets_mask: p.targets - 1,
            unit_mask: p.unit_blocks - 1,
            block: p.block,
            region_offset: p.region_offset,
        })
    }
}

impl Place for StripedPow2 {
    #[inline(always)]
    fn place(&self, b: u64) -> (u32, u64) {
        let t = (b >> self.unit_shift) & self.targets_mask;
        // The row's units (bits above the target bits) moved down over them, the block within
        // the unit kept.
        let within = ((b >> self.targets_shift) & !self.unit_mask) | (b & self.unit_mask);
        (t as u32, self.region_offset + within * self.block)
    }
}

/// [`StripedPow2`] in two instructions where the CPU has them: BEXTR (BMI1) takes the target
/// bits out of the block number, PEXT (BMI2) packs the bits left around them (the block within
/// its target). Made only where both are present and PEXT is fast (not AMD before Zen 3, where
/// it is microcoded: tens to hundreds of cycles).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StripedBmi {
    /// BEXTR's control: start bit (log2 of the unit in blocks) and length (log2 of the target
    /// count) of the target bits.
    extract: u64,
    /// PEXT's mask: every bit but the target bits.
    keep: u64,
    block: u64,
    region_offset: u64,
}

impl StripedBmi {
    /// `p` by BEXTR and PEXT; `None` where its unit in blocks or target count is no power of
    /// two, or the CPU lacks BMI1, BMI2 or a fast PEXT.
    pub(crate) fn of(p: &Placement) -> Option<StripedBmi> {
        let p2 = StripedPow2::of(p)?;
        fast_pext().then_some(StripedBmi {
            extract: p2.unit_shift as u64 | (p2.targets_shift as u64) << 8,
            keep: !(p2.targets_mask << p2.unit_shift),
            block: p2.block,
            region_offset: p2.region_offset,
        })
    }
}

impl Place for StripedBmi {
    #[inline(always)]
    fn place(&self, b: u64) -> (u32, u64) {
        let (t, within) = bextr_pext(b, self.extract, self.keep);
        (t as u32, self.region_offset + within * self.block)
    }
}

/// Whether this CPU has BMI1 and BMI2 and executes PEXT in hardware (checked once).
fn fast_pext() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static FAST: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *FAST.get_or_init(|| {
            if !(std::arch::is_x86_feature_detected!("bmi1")
                && std::arch::is_x86_feature_detected!("bmi2"))
            {
                return false;
            }
            #[allow(unused_unsafe)]
            // SAFETY: CPUID exists on every x86-64 CPU.
            let (v, f) = unsafe {
                (
                    std::arch::x86_64::__cpuid(0),
                    std::arch::x86_64::__cpuid(1).eax,
                )
            };
            let vendor = [v.ebx, v.edx, v.ecx];
            let amd = vendor == [0x6874_7541, 0x6974_6e65, 0x444d_4163] // AuthenticAMD
                || vendor == [0x6f67_7948, 0x6e65_476e, 0x656e_6975]; // HygonGenuine
            let family = match (f >> 8) & 0xf {
                0xf => 0xf + ((f >> 20) & 0xff),
                x => x,
            };
            // Zen 1 and 2 (families 0x17, Hygon 0x18) microcode PEXT; Zen 3 on (0x19) do not.
            !amd || family >= 0x19
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `(b >> start) & (2^len - 1)` with BEXTR and `b`'s bits under `keep` packed with PEXT.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn bextr_pext(b: u64, extract: u64, keep: u64) -> (u64, u64) {
    let (t, within): (u64, u64);
    // SAFETY: reached only through a StripedBmi, which `fast_pext` allowed (the CPU has BMI1
    // and BMI2); the two instructions read and write registers only.
    unsafe {
        std::arch::asm!(
            "bextr {t}, {b}, {extract}",
            "pext {w}, {b}, {keep}",
            b = in(reg) b,
            extract = in(reg) extract,
            keep = in(reg) keep,
            t = out(reg) t,
            w = out(reg) within,
            options(pure, nomem, nostack),
        );
    }
    (t, within)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn bextr_pext(_: u64, _: u64, _: u64) -> (u64, u64) {
    unreachable!("StripedBmi is made on x86-64 only")
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

    /// Unit `k` of the logical space on target `k mod N` at row `k div N`: the placement by
    /// divisions in bytes, as the striping was first written.
    fn divisions(s: &WorkloadSpec, off: u64) -> (u32, u64) {
        let (n, unit) = (s.target_count() as u64, s.stripe_unit);
        let k = off / unit;
        ((k % n) as u32, s.region_offset + k / n * unit + off % unit)
    }

    /// Every kind of placement gives, for every block, what the divisions give: shifts and
    /// masks (a power-of-two unit in blocks over a power-of-two target count), BEXTR and PEXT
    /// (where this CPU has them fast) and the general divisions, whatever kind the layout
    /// would take; a unit that is no power of two in bytes but is in blocks (48 KiB of 12 KiB)
    /// takes the shifts.
    #[test]
    fn every_placement_is_the_divisions() {
        let layouts = [
            (2, 1 << 20, 8 << 10),
            (4, 1 << 20, 8 << 10),
            (8, 64 << 10, 8 << 10),
            (4, 8 << 10, 8 << 10),
            (4, 48 << 10, 12 << 10),
            (16, 16 << 10, 4 << 10),
            (3, 1 << 20, 8 << 10),
            (4, 24 << 10, 8 << 10),
            (5, 36 << 10, 12 << 10),
        ];
        for (n, unit, bs) in layouts {
            let s = WorkloadSpec {
                block_size: bs,
                ..spec(n, unit)
            };
            let p = Placement::of(&s).unwrap();
            let pow2 = StripedPow2::of(&p);
            let bmi = StripedBmi::of(&p);
            let what = format!("{n} targets, unit {unit}, block {bs}");
            assert_eq!(
                pow2.is_some(),
                n.is_power_of_two() && (unit / bs).is_power_of_two(),
                "{what}"
            );
            assert!(bmi.is_none() || pow2.is_some(), "{what}");
            let l = logical_spec(&s);
            for b in 0..l.blocks() {
                let want = divisions(&s, b * bs);
                assert_eq!(Striped::of(&p).place(b), want, "{what}, block {b}");
                if let Some(p2) = pow2 {
                    assert_eq!(p2.place(b), want, "{what}, block {b}");
                }
                if let Some(x) = bmi {
                    assert_eq!(x.place(b), want, "{what}, block {b}");
                }
                assert_eq!(p.place(0, b * bs + 512), (want.0, want.1 + 512), "{what}");
            }
        }
    }

    /// The generator places each block as it draws it: its I/Os are, one for one, those of a
    /// generator over the logical space on one target (the session's offsets before
    /// placement) placed by the divisions, for every pattern and distribution and every kind
    /// of placement.
    #[test]
    fn the_generator_places_what_it_draws() {
        use crate::workload::{Distribution, IoOp, OffsetGen, OneTarget, Pattern};
        fn drawn<P: Place>(g: &mut OffsetGen<P>) -> (IoOp, u32, u64) {
            let (op, off) = g.next_io();
            (op, g.target(), off)
        }
        let dists = [
            Distribution::Uniform,
            Distribution::Zipf { theta: 1.1 },
            Distribution::Hotspot {
                io_share: 0.9,
                size_share: 0.1,
                offset_share: 0.3,
            },
        ];
        let patterns = [Pattern::Randread, Pattern::Randrw, Pattern::Read];
        for (n, unit) in [(4, 1 << 20), (3, 1 << 20), (4, 24 << 10)] {
            for (pattern, distribution) in patterns.iter().flat_map(|p| dists.map(|d| (*p, d))) {
                let s = WorkloadSpec {
                    pattern,
                    distribution,
                    read_pct: if pattern == Pattern::Randrw { 70 } else { 100 },
                    sessions: 3,
                    ..spec(n, unit)
                };
                let p = Placement::of(&s).unwrap();
                let l = logical_spec(&s);
                for session in 0..3 {
                    let mut flat = OffsetGen::new(&l, session, OneTarget::new(0, &l));
                    let mut div = OffsetGen::new(&l, session, Striped::of(&p));
                    let mut pow2 = StripedPow2::of(&p).map(|x| OffsetGen::new(&l, session, x));
                    let mut bmi = StripedBmi::of(&p).map(|x| OffsetGen::new(&l, session, x));
                    for _ in 0..2000 {
                        let f = flat.next_io();
                        let (target, offset) = divisions(&s, f.1);
                        let want = (f.0, target, offset);
                        let what =
                            format!("{n} targets, unit {unit}, {pattern:?} {distribution:?}");
                        assert_eq!(drawn(&mut div), want, "{what}");
                        if let Some(g) = &mut pow2 {
                            assert_eq!(drawn(g), want, "{what}");
                        }
                        if let Some(g) = &mut bmi {
                            assert_eq!(drawn(g), want, "{what}");
                        }
                    }
                }
            }
        }
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
