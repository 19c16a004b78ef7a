//! Block stamps, read verification and corruption detection: the block format, the generation
//! map and the verification state shared by the engine's sessions (`--verify`). The offline
//! command `iolens verify` is built on it in [`crate::verify`].
//!
//! CALIBRATE_IO and ORION never look at the blocks they read, so they skip work every real
//! database does and would not notice storage returning the wrong data. Oracle stamps every
//! block with its address and a checksum (`db_block_checksum`); iolens does the same and
//! measures what it costs.
//!
//! ## Block format
//! The data area of an iolens target is divided into 512-byte *stamp units*. Each unit starts
//! with a 32-byte header; the other 480 bytes are pseudo-random (incompressible) payload:
//!
//! | bytes  | field |
//! |--------|-------|
//! | 0..4   | magic `iolB` |
//! | 4..8   | CRC32C (Castagnoli) of bytes 8..512 of the unit: header fields and payload |
//! | 8..16  | target id (the random id in the scratch file's header) |
//! | 16..24 | absolute byte offset of this unit in the target file |
//! | 24..32 | generation: run nonce (24 bits) << 40 \| per-block write counter (32 bits); 0 = fill |
//!
//! **Why 512 bytes.** It is the smallest write iolens can issue (O_DIRECT on a 512-byte-sector
//! device, a redo-log block, calibrate's 512-byte commit writes). With any larger unit such a
//! write would tear a stamp; with 512 no write of any `--bs` can, runs with different `--bs`
//! on one scratch file stay consistent, and a read of any multiple of 512 bytes is verified
//! completely. The price: 1/16 of the bytes are headers and an 8 KiB read checks 16 CRCs.
//! CRC32C comes from `crc-fast` (SIMD carry-less multiplication, picked at run time), which
//! keeps a full 8 KiB verification well under a microsecond (`bench/verify-speed.sh`).
//!
//! ## What is detected, and how
//! - **payload corruption**: CRC mismatch (`full` only; `header` checks the fields, not the CRC);
//! - **misdirected I/O**: a valid unit whose stamped offset is not where it was read;
//! - **foreign data**: no magic (unstamped, zeroed, or the header itself damaged) or another
//!   target's id; a short read (the target was truncated);
//! - **lost writes**: for runs that read and write, a [`GenMap`] remembers, per block, the
//!   generation of the last write this run completed. A read that finds an older generation
//!   (or one from before the run) reports a lost write.
//! - **stale blocks, offline**: a block restored from an older copy after the run holds an
//!   older generation than the generation journal beside the scratch file recorded for it
//!   (`crate::journal`); `iolens verify` reports it as `stale` (exit 3).
//!
//! ## Generation map (memory-bounded, lock-free)
//! One `AtomicU64` per slot, at most 2^22 slots (32 MiB); a block maps to slot
//! `block % slots` and carries a tag `block / slots`, so blocks are tracked exactly when the
//! working set has at most 2^22 blocks and 8190× that many otherwise (beyond, blocks are
//! checked for everything but lost writes). A slot packs a write counter, an in-flight write
//! count, and flags. A write registers before it is stamped (counter + 1 = its generation) and
//! settles on completion. When writes to a slot overlap, which one lands last is undefined, so
//! the slot's generation becomes unknown until a write runs alone. A read snapshots the slot
//! before it is issued and expects the generation only when no write was in flight; if any
//! write to the slot was in flight during the read, a failed check is not reported (the read
//! may legitimately see a torn mix) but counted as skipped. No false positives, no locks.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{bail, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub use crate::results::{CorruptionKind, VerifyMode};
use crate::results::{CorruptionReport, VerifyStats};

/// Bytes per stamp unit.
pub(crate) const UNIT: usize = 512;
/// Bytes of the stamp header at the start of each unit.
pub const STAMP_LEN: usize = 32;
pub(crate) const MAGIC: [u8; 4] = *b"iolB";
/// Most corruption reports kept per session (all are counted).
pub(crate) const MAX_REPORTS: usize = 100;

/// What a run does when verification finds corrupt data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnCorruption {
    /// End the run at the first corrupt block.
    #[default]
    Stop,
    /// Keep going, reporting every corrupt block.
    Continue,
}

// ---------------------------------------------------------------------------------------------
// Stamping and checking

#[inline]
pub(crate) fn rd32(u: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([u[at], u[at + 1], u[at + 2], u[at + 3]])
}

#[inline]
pub(crate) fn rd64(u: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&u[at..at + 8]);
    u64::from_le_bytes(b)
}

/// CRC32C of a unit's bytes 8..512 (everything but the magic and the checksum itself).
#[inline]
pub fn checksum(unit: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &unit[8..]) as u32
}

/// Stamp one 512-byte unit found at absolute target offset `offset`.
#[inline]
pub(crate) fn stamp_unit(u: &mut [u8], id: u64, offset: u64, gen: u64) {
    u[0..4].copy_from_slice(&MAGIC);
    u[8..16].copy_from_slice(&id.to_le_bytes());
    u[16..24].copy_from_slice(&offset.to_le_bytes());
    u[24..32].copy_from_slice(&gen.to_le_bytes());
    let c = checksum(u);
    u[4..8].copy_from_slice(&c.to_le_bytes());
}

/// Stamp every whole unit of `buf`, which will be written at absolute offset `offset`
/// (a multiple of [`UNIT`]). A tail shorter than a unit is left as it is.
#[inline]
pub fn stamp(buf: &mut [u8], id: u64, offset: u64, gen: u64) {
    for (i, u) in buf.chunks_exact_mut(UNIT).enumerate() {
        stamp_unit(u, id, offset + (i * UNIT) as u64, gen);
    }
}

/// One bad unit, as found on the hot path (no allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem {
    pub kind: CorruptionKind,
    /// Absolute byte offset of the unit.
    pub offset: u64,
    pub expected: u64,
    pub found: u64,
}

/// Check one unit read at absolute `offset`. `expect_gen` is the generation the unit must
/// carry, when known.
#[inline]
pub(crate) fn check_unit(
    u: &[u8],
    id: u64,
    offset: u64,
    full: bool,
    expect_gen: Option<u64>,
) -> Option<Problem> {
    let p = |kind, expected, found| {
        Some(Problem {
            kind,
            offset,
            expected,
            found,
        })
    };
    if u[0..4] != MAGIC {
        return p(
            CorruptionKind::Unstamped,
            u32::from_le_bytes(MAGIC) as u64,
            rd32(u, 0) as u64,
        );
    }
    if full {
        let stored = rd32(u, 4);
        let c = checksum(u);
        if c != stored {
            return p(CorruptionKind::Checksum, stored as u64, c as u64);
        }
    }
    let fid = rd64(u, 8);
    if fid != id {
        return p(CorruptionKind::Foreign, id, fid);
    }
    let foff = rd64(u, 16);
    if foff != offset {
        return p(CorruptionKind::Misdirected, offset, foff);
    }
    if let Some(e) = expect_gen {
        let g = rd64(u, 24);
        if g != e {
            let older = (g >> 40) != (e >> 40) || (g & 0xFFFF_FFFF) < (e & 0xFFFF_FFFF);
            let kind = if older {
                CorruptionKind::LostWrite
            } else {
                CorruptionKind::UnexpectedGeneration
            };
            return p(kind, e, g);
        }
    }
    None
}

/// Check every whole unit of `buf`, read at absolute `offset`; calls `on` for each bad unit
/// and returns the number of units checked.
#[inline]
pub fn check(
    buf: &[u8],
    id: u64,
    offset: u64,
    full: bool,
    expect_gen: Option<u64>,
    mut on: impl FnMut(Problem),
) -> u64 {
    let skip = ((UNIT as u64 - offset % UNIT as u64) % UNIT as u64) as usize;
    if skip >= buf.len() {
        return 0;
    }
    let mut n = 0;
    for (i, u) in buf[skip..].chunks_exact(UNIT).enumerate() {
        let off = offset + (skip + i * UNIT) as u64;
        if let Some(p) = check_unit(u, id, off, full, expect_gen) {
            on(p);
        }
        n += 1;
    }
    n
}

/// A generation as people read it: `fill`, or `run-nonce:write-counter`.
pub(crate) fn fmt_gen(g: u64) -> String {
    if g == 0 {
        "fill".into()
    } else {
        format!("{:06x}:{}", g >> 40, g & 0xFFFF_FFFF)
    }
}

/// Turn a hot-path [`Problem`] into a report (error path only: this allocates).
pub fn report(
    p: &Problem,
    units: u64,
    io_offset: u64,
    io_len: u64,
    session: u32,
    time_s: f64,
) -> CorruptionReport {
    let (expected, found, message) = match p.kind {
        CorruptionKind::Checksum => (
            format!("crc32c {:08x}", p.expected),
            format!("crc32c {:08x}", p.found),
            format!(
                "payload corruption: the 512-byte unit at offset {} no longer matches its checksum",
                p.offset
            ),
        ),
        CorruptionKind::Misdirected => (
            format!("offset {}", p.expected),
            format!("offset {}", p.found),
            format!(
                "misdirected I/O: the unit read at offset {} is the one written for offset {}",
                p.offset, p.found
            ),
        ),
        CorruptionKind::Foreign => (
            format!("target id {:016x}", p.expected),
            format!("target id {:016x}", p.found),
            format!(
                "foreign block at offset {}: stamped by another iolens target",
                p.offset
            ),
        ),
        CorruptionKind::Unstamped => (
            "magic iolB".into(),
            format!("bytes {:08x}", (p.found as u32).swap_bytes()),
            format!(
                "no iolens stamp at offset {}: data written by something else, zeroed, or a damaged header",
                p.offset
            ),
        ),
        CorruptionKind::LostWrite => (
            format!("generation {}", fmt_gen(p.expected)),
            format!("generation {}", fmt_gen(p.found)),
            format!(
                "lost write: offset {} holds an older version than the last write this run completed",
                p.offset
            ),
        ),
        CorruptionKind::UnexpectedGeneration => (
            format!("generation {}", fmt_gen(p.expected)),
            format!("generation {}", fmt_gen(p.found)),
            format!(
                "offset {} holds a generation this run never completed writing",
                p.offset
            ),
        ),
        CorruptionKind::Stale => (
            format!("generation {} or later", fmt_gen(p.expected)),
            format!("generation {}", fmt_gen(p.found)),
            format!(
                "stale block (lost write): offset {} holds an older version than the generation \
                 journal recorded as written there and durable (restored from an older copy, or \
                 a write the storage acknowledged and dropped)",
                p.offset
            ),
        ),
        CorruptionKind::Truncated => (
            format!("{} bytes", p.expected),
            format!("{} bytes", p.found),
            format!(
                "short read at offset {}: the target ends early (truncated?)",
                p.offset
            ),
        ),
        // Found by the offline check of the journal, which writes its own reports.
        CorruptionKind::JournalMissing | CorruptionKind::JournalDamaged => (
            format!("{:x}", p.expected),
            format!("{:x}", p.found),
            format!("generation journal damaged or missing (unit at offset {})", p.offset),
        ),
    };
    let message = if units > 1 {
        format!(
            "{message} ({units} consecutive units, {})",
            crate::units::fmt_bytes(units * UNIT as u64)
        )
    } else {
        message
    };
    CorruptionReport {
        kind: p.kind,
        offset: p.offset,
        units,
        io_offset,
        io_len,
        expected,
        found,
        message,
        session,
        time_s,
        target: String::new(),
    }
}

/// Group consecutive bad units with the same fault (e.g. a whole misdirected block) into one
/// entry each: (first unit's problem, number of units).
pub fn group(ps: &[Problem]) -> Vec<(Problem, u64)> {
    let mut out: Vec<(Problem, u64)> = Vec::new();
    for p in ps {
        if let Some((q, n)) = out.last_mut() {
            let step = *n * UNIT as u64;
            let same = q.kind == p.kind
                && p.offset == q.offset + step
                && match p.kind {
                    CorruptionKind::Misdirected => p.found == q.found + step,
                    CorruptionKind::Checksum | CorruptionKind::Unstamped => true,
                    _ => p.found == q.found && p.expected == q.expected,
                };
            if same {
                *n += 1;
                continue;
            }
        }
        out.push((*p, 1));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Generation map

const CNT_MASK: u64 = 0xFFFF_FFFF;
const KNOWN: u64 = 1 << 32;
const AMBIG: u64 = 1 << 33;
const POISON: u64 = 1 << 34;
const INFL_SHIFT: u32 = 35;
const INFL_MAX: u64 = 0xFFFF;
const INFL_ONE: u64 = 1 << INFL_SHIFT;
const INFL_MASK: u64 = INFL_MAX << INFL_SHIFT;
const TAG_SHIFT: u32 = 51;
const TAG_NONE: u64 = 0x1FFF;
const TAG_MASK: u64 = TAG_NONE << TAG_SHIFT;
/// Most slots of a generation map (32 MiB).
pub(crate) const MAX_SLOTS: u64 = 1 << 22;

/// Per-block generations of the writes of one run, in bounded memory, without locks.
pub(crate) struct GenMap {
    slots: Box<[AtomicU64]>,
    shift: u32,
    nonce: u64,
}

/// What a registered write needs to settle on completion.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WriteTicket {
    slot: u32,
    tag: u64,
    cnt: u64,
}

impl GenMap {
    /// A map for `blocks` blocks (capped at [`MAX_SLOTS`] slots); `nonce` (24 bits, non-zero)
    /// distinguishes this run's generations from every earlier run's.
    pub(crate) fn new(blocks: u64, nonce: u64) -> GenMap {
        let n = blocks.clamp(1, MAX_SLOTS).next_power_of_two();
        GenMap {
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
            shift: n.trailing_zeros(),
            nonce: nonce & 0xFF_FFFF,
        }
    }

    /// Number of slots.
    pub(crate) fn slots(&self) -> u64 {
        self.slots.len() as u64
    }

    #[inline]
    fn locate(&self, block: u64) -> (usize, u64) {
        let slot = (block & (self.slots.len() as u64 - 1)) as usize;
        let tag = (block >> self.shift).min(TAG_NONE);
        (slot, tag)
    }

    /// The on-disk generation of a ticket.
    #[inline]
    pub(crate) fn generation(&self, t: &WriteTicket) -> u64 {
        (self.nonce << 40) | t.cnt
    }

    /// Register a write of `block` before its buffer is stamped and issued.
    #[inline]
    pub(crate) fn register(&self, block: u64) -> WriteTicket {
        let (slot, tag) = self.locate(block);
        let a = &self.slots[slot];
        let mut v = a.load(Ordering::SeqCst);
        loop {
            let infl = (v & INFL_MASK) >> INFL_SHIFT;
            if infl == INFL_MAX {
                // 65535 writes in flight to one slot: wait for one to finish.
                std::thread::yield_now();
                v = a.load(Ordering::SeqCst);
                continue;
            }
            let cnt = (v + 1) & CNT_MASK;
            let mut n = (v & !CNT_MASK) | cnt;
            if cnt == 0 {
                // Counter wrapped: this slot's generations no longer compare.
                n |= POISON;
            }
            n += INFL_ONE;
            if infl > 0 {
                n |= AMBIG;
            }
            if (v & TAG_MASK) >> TAG_SHIFT != tag {
                n = (n & !TAG_MASK & !KNOWN) | (tag << TAG_SHIFT);
            }
            match a.compare_exchange_weak(v, n, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => {
                    return WriteTicket {
                        slot: slot as u32,
                        tag,
                        cnt,
                    }
                }
                Err(cur) => v = cur,
            }
        }
    }

    /// Settle a registered write; `ok` is false when it failed (its data is then unknown).
    #[inline]
    pub(crate) fn complete(&self, t: &WriteTicket, ok: bool) {
        let a = &self.slots[t.slot as usize];
        let mut v = a.load(Ordering::SeqCst);
        loop {
            let infl = (v & INFL_MASK) >> INFL_SHIFT;
            debug_assert!(infl > 0, "completion without registration");
            let mut n = v - INFL_ONE;
            if v & AMBIG != 0 {
                n &= !KNOWN;
                if infl == 1 {
                    n &= !AMBIG;
                }
            } else if ok
                && t.tag != TAG_NONE
                && v & POISON == 0
                && (v & TAG_MASK) >> TAG_SHIFT == t.tag
                && v & CNT_MASK == t.cnt
            {
                n |= KNOWN;
            } else {
                n &= !KNOWN;
            }
            match a.compare_exchange_weak(v, n, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return,
                Err(cur) => v = cur,
            }
        }
    }

    /// Snapshot of `block`'s slot, taken before a read is issued.
    #[inline]
    pub(crate) fn snapshot(&self, block: u64) -> u64 {
        self.slots[self.locate(block).0].load(Ordering::SeqCst)
    }

    /// The generation a read of `block` must find, given the snapshot taken before it was
    /// issued (`None` when not known: never written, overlapping writes, or evicted).
    #[inline]
    pub(crate) fn expected(&self, block: u64, snap: u64) -> Option<u64> {
        let (_, tag) = self.locate(block);
        let clean = snap & KNOWN != 0
            && snap & (POISON | AMBIG | INFL_MASK) == 0
            && tag != TAG_NONE
            && (snap & TAG_MASK) >> TAG_SHIFT == tag;
        clean.then_some((self.nonce << 40) | (snap & CNT_MASK))
    }

    /// True when a write to `block`'s slot was in flight at the snapshot or started since.
    #[inline]
    pub(crate) fn overlapped(&self, block: u64, snap: u64) -> bool {
        let now = self.snapshot(block);
        snap & INFL_MASK != 0 || (now & CNT_MASK) != (snap & CNT_MASK)
    }
}

// ---------------------------------------------------------------------------------------------
// Run integration

/// Verification state shared by the sessions of one run.
pub struct VerifyShared {
    /// How reads are checked (resolved: never `Auto`).
    pub mode: VerifyMode,
    /// Stamp written blocks.
    pub stamp: bool,
    pub(crate) target_id: u64,
    /// Generations of this run's writes (runs that write).
    pub(crate) gens: Option<GenMap>,
    pub region_offset: u64,
    pub block_size: u64,
    /// Absolute offset of the data area.
    pub data_offset: u64,
    /// The target's path, named by its corruption reports in a run over several targets;
    /// empty in a run on one.
    pub target: String,
}

/// Per-session verification figures, merged into [`VerifyStats`] at the end of a run.
#[derive(Debug, Default)]
pub struct VerifyTally {
    pub reads: u64,
    pub units: u64,
    pub(crate) timed_reads: u64,
    pub(crate) timed_ns: u64,
    /// Sampled verification time per read (ns), weighted by reads: the median is robust to
    /// the session being preempted inside a timed batch.
    pub(crate) read_cost: Option<Histogram<u64>>,
    pub(crate) batches: u64,
    pub writes: u64,
    pub(crate) timed_writes: u64,
    pub(crate) stamp_ns: u64,
    /// Sampled stamping time per write (ns).
    pub(crate) stamp_cost: Option<Histogram<u64>>,
    pub(crate) gen_checks: u64,
    pub(crate) skipped_concurrent: u64,
    pub(crate) problems: u64,
    pub reports: Vec<CorruptionReport>,
}

impl VerifyTally {
    /// A tally with its cost histograms allocated (at session start, not per I/O).
    pub fn new() -> VerifyTally {
        VerifyTally {
            read_cost: Some(cost_histogram()),
            stamp_cost: Some(cost_histogram()),
            ..Default::default()
        }
    }

    /// Account one timed batch of `n` reads verified in `ns`.
    #[inline]
    pub(crate) fn timed_reads(&mut self, n: u64, ns: u64) {
        self.timed_reads += n;
        self.timed_ns += ns;
        if let Some(h) = &mut self.read_cost {
            let _ = h.record_n((ns / n.max(1)).clamp(1, COST_MAX), n);
        }
    }

    /// Account one timed stamping of a write.
    #[inline]
    pub(crate) fn timed_write(&mut self, ns: u64) {
        self.timed_writes += 1;
        self.stamp_ns += ns;
        if let Some(h) = &mut self.stamp_cost {
            let _ = h.record(ns.clamp(1, COST_MAX));
        }
    }
}

const COST_MAX: u64 = 10_000_000_000;

fn cost_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, COST_MAX, 2).expect("static bounds are valid")
}

impl VerifyShared {
    /// True when reads are checked.
    #[inline]
    pub fn reads(&self) -> bool {
        matches!(self.mode, VerifyMode::Header | VerifyMode::Full)
    }

    /// Block index (for the generation map) of an I/O at data-area offset `off`.
    #[inline]
    pub(crate) fn block_of(&self, off: u64) -> u64 {
        (off - self.region_offset) / self.block_size
    }

    /// Prepare a write of `buf` at data-area offset `off`: register it and stamp it.
    #[inline]
    pub(crate) fn stamp_write(&self, buf: &mut [u8], off: u64, seq: u64) -> Option<WriteTicket> {
        let abs = self.data_offset + off;
        let (ticket, gen) = match &self.gens {
            Some(g) => {
                let t = g.register(self.block_of(off));
                (Some(t), g.generation(&t))
            }
            None => (None, seq),
        };
        if self.stamp && buf.len() >= UNIT {
            stamp(buf, self.target_id, abs, gen);
        } else if buf.len() >= 16 {
            // Too small to stamp: still make every written block unique (defeats dedupe).
            buf[0..8].copy_from_slice(&abs.to_le_bytes());
            buf[8..16].copy_from_slice(&seq.to_le_bytes());
        }
        ticket
    }

    /// Settle a write on completion.
    #[inline]
    pub(crate) fn write_done(&self, t: &WriteTicket, ok: bool) {
        if let Some(g) = &self.gens {
            g.complete(t, ok);
        }
    }

    /// Snapshot to take before issuing a read at data-area offset `off`.
    #[inline]
    pub(crate) fn read_snapshot(&self, off: u64) -> u64 {
        match &self.gens {
            Some(g) => g.snapshot(self.block_of(off)),
            None => 0,
        }
    }

    /// Verify a completed read of `data` at data-area offset `off`. Returns true when a
    /// problem was reported.
    #[inline]
    pub(crate) fn verify_read(
        &self,
        tally: &mut VerifyTally,
        data: &[u8],
        off: u64,
        snap: u64,
        session: u32,
        base: Instant,
    ) -> bool {
        let abs = self.data_offset + off;
        let block = self.block_of(off);
        let expect = self.gens.as_ref().and_then(|g| g.expected(block, snap));
        if expect.is_some() {
            tally.gen_checks += 1;
        }
        let mut first: Option<Problem> = None;
        let mut bad = 0u64;
        let units = check(
            data,
            self.target_id,
            abs,
            self.mode == VerifyMode::Full,
            expect,
            |p| {
                bad += 1;
                if first.is_none() {
                    first = Some(p);
                }
            },
        );
        tally.reads += 1;
        tally.units += units;
        if bad == 0 {
            return false;
        }
        let io = (abs, data.len() as u64, block, snap);
        self.problem_slow(tally, first, bad, io, session, secs_since(base), data)
    }

    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn problem_slow(
        &self,
        tally: &mut VerifyTally,
        first: Option<Problem>,
        bad: u64,
        (abs, len, block, snap): (u64, u64, u64, u64),
        session: u32,
        time_s: f64,
        data: &[u8],
    ) -> bool {
        if self
            .gens
            .as_ref()
            .is_some_and(|g| g.overlapped(block, snap))
        {
            // One of this run's writes to the block was in flight: a torn mix is legitimate.
            tally.skipped_concurrent += 1;
            return false;
        }
        tally.problems += bad;
        let expect = self.gens.as_ref().and_then(|g| g.expected(block, snap));
        let full = self.mode == VerifyMode::Full;
        let mut out = Vec::new();
        check(data, self.target_id, abs, full, expect, |p| out.push(p));
        if out.is_empty() {
            out.extend(first);
        }
        for (p, n) in group(&out) {
            if tally.reports.len() >= MAX_REPORTS {
                break;
            }
            let mut r = report(&p, n, abs, len, session, time_s);
            r.target.clone_from(&self.target);
            tally.reports.push(r);
        }
        true
    }

    /// Record a short read (the target ends early).
    #[cold]
    pub(crate) fn short_read(
        &self,
        tally: &mut VerifyTally,
        off: u64,
        want: u64,
        got: u64,
        session: u32,
        base: Instant,
    ) {
        let time_s = secs_since(base);
        let abs = self.data_offset + off;
        tally.problems += 1;
        if tally.reports.len() < MAX_REPORTS {
            let p = Problem {
                kind: CorruptionKind::Truncated,
                offset: abs + got,
                expected: want,
                found: got,
            };
            let mut r = report(&p, 1, abs, want, session, time_s);
            r.target.clone_from(&self.target);
            tally.reports.push(r);
        }
    }
}

/// Seconds from `base` to now, negative before it.
fn secs_since(base: Instant) -> f64 {
    let now = Instant::now();
    if now >= base {
        (now - base).as_secs_f64()
    } else {
        -(base - now).as_secs_f64()
    }
}

/// Merge per-session tallies into the run's figures and reports (reports sorted by time).
pub fn merge(
    shared: Option<&VerifyShared>,
    mode: VerifyMode,
    note: &str,
    tallies: Vec<VerifyTally>,
) -> (VerifyStats, Vec<CorruptionReport>) {
    let mut s = VerifyStats {
        mode,
        unit_bytes: UNIT as u64,
        note: note.into(),
        ..Default::default()
    };
    let mut reports = Vec::new();
    let (mut tr, mut tn, mut tw, mut ts) = (0u64, 0u64, 0u64, 0u64);
    let mut rc = cost_histogram();
    let mut sc = cost_histogram();
    for t in tallies {
        if let Some(h) = &t.read_cost {
            let _ = rc.add(h);
        }
        if let Some(h) = &t.stamp_cost {
            let _ = sc.add(h);
        }
        s.reads_verified += t.reads;
        s.units_verified += t.units;
        s.writes_stamped += t.writes;
        s.generation_checks += t.gen_checks;
        s.skipped_concurrent += t.skipped_concurrent;
        s.errors += t.problems;
        tr += t.timed_reads;
        tn += t.timed_ns;
        tw += t.timed_writes;
        ts += t.stamp_ns;
        reports.extend(t.reports);
    }
    if tr > 0 {
        s.ns_per_read = rc.value_at_quantile(0.5) as f64;
        s.ns_per_read_mean = tn as f64 / tr as f64;
        let units_per_read = s.units_verified as f64 / s.reads_verified.max(1) as f64;
        if units_per_read > 0.0 {
            s.ns_per_unit = s.ns_per_read / units_per_read;
        }
    }
    if tw > 0 {
        s.stamp_ns_per_write = sc.value_at_quantile(0.5) as f64;
        s.stamp_ns_per_write_mean = ts as f64 / tw as f64;
    }
    if let Some(g) = shared.and_then(|v| v.gens.as_ref()) {
        s.generation_slots = g.slots();
    }
    reports.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
    (s, reports)
}

/// Take an advisory lock on a target for the duration of a run: exclusive for runs that write,
/// shared for runs that verify reads. Concurrent writers would make verification report false
/// corruption (torn reads, generations this run does not know).
pub(crate) fn lock<'a>(file: &'a File, exclusive: bool, path: &Path) -> Result<TargetLock<'a>> {
    use std::os::fd::AsRawFd;
    let how = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    // SAFETY: flock on a valid fd.
    if unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            bail!(
                "another iolens process is {} {}: {}; wait for it to finish, or use --verify none \
                 for a read-only run",
                if exclusive { "using" } else { "writing to" },
                path.display(),
                if exclusive {
                    "a run that writes needs the target alone (concurrent writes would look like corruption)"
                } else {
                    "verified reads would see its writes half done"
                }
            );
        }
        // Filesystems without flock support: go on without the lock.
    }
    Ok(TargetLock(file))
}

/// Releases the target lock when dropped. Explicitly, because an io_uring instance that
/// registered the file keeps it open until the kernel tears the ring down, later.
pub(crate) struct TargetLock<'a>(&'a File);

impl Drop for TargetLock<'_> {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a valid fd.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(n: usize, id: u64, off: u64, gen: u64) -> Vec<u8> {
        let mut b: Vec<u8> = (0..n).map(|i| (i * 131 % 251) as u8).collect();
        stamp(&mut b, id, off, gen);
        b
    }

    #[test]
    fn checksum_is_crc32c() {
        // CRC32C check value of "123456789" (RFC 3720).
        let mut u = vec![0u8; 8];
        u.extend_from_slice(b"123456789");
        assert_eq!(checksum(&u), 0xE306_9283);
    }

    #[test]
    fn clean_blocks_pass_and_each_fault_is_classified() {
        let id = 0xabcdef;
        let b = stamped(8192, id, 1 << 20, 5);
        let mut probs = Vec::new();
        let n = check(&b, id, 1 << 20, true, Some(5), |p| probs.push(p));
        assert_eq!((n, probs.len()), (16, 0));

        let mut c = b.clone();
        c[3 * 512 + 200] ^= 0x10;
        let mut probs = Vec::new();
        check(&c, id, 1 << 20, true, None, |p| probs.push(p));
        assert_eq!(probs.len(), 1);
        assert_eq!(probs[0].kind, CorruptionKind::Checksum);
        assert_eq!(probs[0].offset, (1 << 20) + 3 * 512);
        // Header mode does not see payload damage.
        assert_eq!(check(&c, id, 1 << 20, false, None, |_| panic!()), 16);

        let mut probs = Vec::new();
        check(&b, id, (1 << 20) + 8192, true, None, |p| probs.push(p));
        assert_eq!(probs.len(), 16);
        assert!(probs.iter().all(|p| p.kind == CorruptionKind::Misdirected));
        assert_eq!(probs[0].found, 1 << 20);

        let mut probs = Vec::new();
        check(&b, id + 1, 1 << 20, true, None, |p| probs.push(p));
        assert_eq!(probs[0].kind, CorruptionKind::Foreign);

        let mut probs = Vec::new();
        check(&vec![0u8; 1024], id, 0, true, None, |p| probs.push(p));
        assert_eq!(probs.len(), 2);
        assert_eq!(probs[0].kind, CorruptionKind::Unstamped);

        let mut probs = Vec::new();
        check(&b, id, 1 << 20, true, Some(6), |p| probs.push(p));
        assert_eq!(probs[0].kind, CorruptionKind::LostWrite);
        let mut probs = Vec::new();
        check(&b, id, 1 << 20, true, Some(4), |p| probs.push(p));
        assert_eq!(probs[0].kind, CorruptionKind::UnexpectedGeneration);
        let mut probs = Vec::new();
        check(&b, id, 1 << 20, true, Some((7 << 40) | 9), |p| {
            probs.push(p)
        });
        assert_eq!(
            probs[0].kind,
            CorruptionKind::LostWrite,
            "other run's data is older"
        );
    }

    #[test]
    fn misaligned_reads_check_only_whole_units() {
        let b = stamped(4096, 1, 0, 0);
        // A 1000-byte read at offset 300 covers the unit at 512 only.
        let n = check(&b[300..1300], 1, 300, true, None, |_| panic!());
        assert_eq!(n, 1);
        assert_eq!(check(&b[0..500], 1, 0, true, None, |_| panic!()), 0);
    }

    #[test]
    fn generation_map_tracks_clean_writes_and_forgets_overlaps() {
        let g = GenMap::new(16, 0x42);
        assert_eq!(g.expected(3, g.snapshot(3)), None, "never written");
        let t = g.register(3);
        let gen = g.generation(&t);
        assert_eq!(gen >> 40, 0x42);
        let during = g.snapshot(3);
        assert_eq!(g.expected(3, during), None, "write in flight");
        g.complete(&t, true);
        let snap = g.snapshot(3);
        assert_eq!(g.expected(3, snap), Some(gen));
        assert!(!g.overlapped(3, snap));
        // Two overlapping writes: which landed last is unknown.
        let a = g.register(3);
        let b = g.register(3);
        assert!(g.overlapped(3, snap));
        g.complete(&b, true);
        g.complete(&a, true);
        assert_eq!(g.expected(3, g.snapshot(3)), None);
        // The next write alone makes it known again.
        let c = g.register(3);
        g.complete(&c, true);
        assert_eq!(g.expected(3, g.snapshot(3)), Some(g.generation(&c)));
        assert!(g.generation(&c) > g.generation(&b));
        // A failed write leaves the block unknown.
        let d = g.register(3);
        g.complete(&d, false);
        assert_eq!(g.expected(3, g.snapshot(3)), None);
        // Blocks sharing a slot do not inherit each other's generation.
        let e = g.register(3 + 16);
        g.complete(&e, true);
        assert_eq!(g.expected(3, g.snapshot(3)), None);
        assert!(g.expected(19, g.snapshot(19)).is_some());
    }

    #[test]
    fn generation_map_is_bounded() {
        let g = GenMap::new(u64::MAX / 2, 1);
        assert_eq!(g.slots(), MAX_SLOTS);
        // A block whose tag does not fit is never expected.
        let far = MAX_SLOTS * (TAG_NONE + 5);
        let t = g.register(far);
        g.complete(&t, true);
        assert_eq!(g.expected(far, g.snapshot(far)), None);
    }
}
