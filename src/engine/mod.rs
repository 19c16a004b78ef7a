//! I/O engines and the session loop that drives them.
//!
//! An engine ([`IoEngine`]) only moves bytes: `push` queues one I/O into a slot, `complete`
//! issues what is queued and reports completions. The session loop ([`run_session`]) owns
//! everything else: picking offsets ([`OffsetGen`]), stamping the start of each I/O (or its
//! intended start when rate-limited), stamping each completion as it is reaped, and recording
//! the latency into the session's [`SessionRecorder`]. The loop is generic over the engine, so
//! there is no dynamic dispatch, allocation or lock per I/O.
//!
//! On stamped targets the loop also stamps every written block (registering the write in the
//! run's generation map first) and verifies every block read (see [`crate::verify`]).
//! Verification runs after a batch of completions has been stamped, so it never inflates the
//! latency of completions reaped in the same batch; its CPU time is sampled (one batch in
//! eight is timed) and reported per read.
//!
//! Engines: `sync` (pread/pwrite, one in flight), `uring` (io_uring, queue depth per session),
//! `null` (no I/O: the tool's own cost).

pub(crate) mod buffers;
pub(crate) mod null;
pub(crate) mod sync;
pub(crate) mod uring;

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::RngCore;

use crate::recorder::{SessionRecorder, SYNC};
use crate::stamp::{OnCorruption, VerifyShared, VerifyTally, WriteTicket};
use crate::workload::{IoOp, OffsetGen, SyncMode, WorkloadSpec};

/// What an engine must do. Results passed to `done` are bytes transferred or `-errno`.
pub(crate) trait IoEngine {
    /// Queue one I/O of `len` bytes at absolute `offset` of target `file` (its index in the
    /// run's targets) using the buffer of `slot`.
    fn push(&mut self, slot: u32, op: IoOp, file: u32, offset: u64, buf: *mut u8, len: usize);
    /// Issue queued I/Os, wait for at least one completion — or, when `until` is given, no
    /// later than `until` (an open-loop run's next intended start) — and report every
    /// completion available as `done(slot, result)`.
    fn complete(
        &mut self,
        done: &mut impl FnMut(u32, i64),
        until: Option<Instant>,
    ) -> io::Result<()>;
    /// Make data written to target `file` durable (fdatasync).
    fn sync(&mut self, file: u32) -> io::Result<()>;
    /// Called once with the session's buffers before the first I/O (io_uring registers them).
    fn attach(&mut self, _buf: &AlignedBuf<'_>) -> io::Result<()> {
        Ok(())
    }
    /// Why the kernel refused to register the session's buffers (an errno), when the engine
    /// asked and now passes them with every I/O instead; `None` otherwise.
    fn unregistered(&self) -> Option<i32> {
        None
    }
}

/// A page-aligned buffer for O_DIRECT, one block per slot: its own heap allocation, or a
/// session's slice of the run's [`buffers::BufferPool`] (which it borrows).
pub(crate) struct AlignedBuf<'a> {
    ptr: *mut u8,
    size: usize,
    block: usize,
    /// The heap layout when the buffer owns its memory; `None` for a slice of a pool.
    owned: Option<std::alloc::Layout>,
    _pool: std::marker::PhantomData<&'a buffers::BufferPool>,
}

// SAFETY: the buffer is plain memory owned by one session thread at a time.
unsafe impl Send for AlignedBuf<'_> {}

impl AlignedBuf<'static> {
    /// `slots` blocks of `block` bytes on the heap, 4 KiB aligned, filled with pseudo-random
    /// bytes so written data is incompressible.
    pub(crate) fn new(slots: usize, block: usize, seed: u64) -> AlignedBuf<'static> {
        let size = (slots * block).max(4096);
        let layout = std::alloc::Layout::from_size_align(size, 4096).expect("valid layout");
        // SAFETY: non-zero size layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf::filled(ptr, size, block, Some(layout), seed)
    }
}

impl<'a> AlignedBuf<'a> {
    /// `slots` blocks of `block` bytes at `ptr`, a slice of a pool, filled as in `new`.
    ///
    /// # Safety
    /// `ptr` must be 4 KiB aligned, valid for `slots * block` bytes for `'a`, and used by no
    /// other buffer.
    unsafe fn in_pool(ptr: *mut u8, slots: usize, block: usize, seed: u64) -> AlignedBuf<'a> {
        AlignedBuf::filled(ptr, slots * block, block, None, seed)
    }

    fn filled(
        ptr: *mut u8,
        size: usize,
        block: usize,
        owned: Option<std::alloc::Layout>,
        seed: u64,
    ) -> AlignedBuf<'a> {
        let mut b = AlignedBuf {
            ptr,
            size,
            block,
            owned,
            _pool: std::marker::PhantomData,
        };
        use rand::SeedableRng;
        rand::rngs::SmallRng::seed_from_u64(seed).fill_bytes(b.as_mut_slice());
        b
    }
    /// Pointer to the buffer of `slot`.
    #[inline]
    pub(crate) fn slot(&self, slot: u32) -> *mut u8 {
        // SAFETY: slot < slots by construction of the caller.
        unsafe { self.ptr.add(slot as usize * self.block) }
    }
    /// Whole buffer.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for `size` bytes (heap layout or pool slice).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.size) }
    }
    /// Base pointer and length (for io_uring buffer registration).
    pub(crate) fn raw(&self) -> (*mut u8, usize) {
        (self.ptr, self.size)
    }
}

impl Drop for AlignedBuf<'_> {
    fn drop(&mut self) {
        if let Some(layout) = self.owned {
            // SAFETY: allocated with this layout in `new`.
            unsafe { std::alloc::dealloc(self.ptr, layout) };
        }
    }
}

/// Everything a session needs besides its engine and recorder.
pub(crate) struct SessionCtx<'a> {
    pub(crate) spec: &'a WorkloadSpec,
    pub(crate) session: u32,
    /// Absolute byte offset of each target's data area, in target order.
    pub(crate) data_offsets: &'a [u64],
    /// Each target's path, in target order (named in an I/O error of a run over several).
    pub(crate) names: &'a [String],
    /// Where each I/O lands on a run over several targets (`None`: one target).
    pub(crate) placement: Option<crate::stripe::Placement>,
    /// I/Os this session should complete (`u64::MAX` for a duration-bound run).
    pub(crate) quota: u64,
    /// Set to end the run (deadline, Ctrl-C, or another session's error).
    pub(crate) stop: &'a AtomicBool,
    /// Planned end of measurement: the session issues nothing after it (it does not wait for
    /// the driver's stop flag, which at hundreds of busy sessions may come late).
    pub(crate) end: Option<Instant>,
    /// Stamping and verification (targets whose blocks iolens stamps), one per target.
    pub(crate) verify: Option<&'a [VerifyShared]>,
}

/// How a session ended.
#[derive(Debug)]
pub(crate) struct SessionOutcome {
    /// When the session's last I/O completed (when it ended, if it completed none).
    pub(crate) end: Instant,
    /// The session thread's own schedstat (run ns, run-queue wait ns) at exit.
    pub(crate) sched: Option<(u64, u64)>,
    /// First I/O error, if any (the run stops on it).
    pub(crate) error: Option<String>,
    /// I/Os completed (including warm-up).
    pub(crate) completed: u64,
    /// The errno with which the kernel refused to register the session's buffers (io_uring).
    pub(crate) unregistered: Option<i32>,
    /// Verification figures and corruption found by this session.
    pub(crate) verify: VerifyTally,
}

#[derive(Clone, Copy)]
struct Slot {
    op: IoOp,
    start: Instant,
    /// Target (index) and offset within its data area.
    target: u32,
    offset: u64,
    /// Generation-map snapshot taken before a read was issued.
    snap: u64,
    /// Registration of a write in the generation map.
    ticket: Option<WriteTicket>,
}

/// Sleep until `t` precisely: coarse sleep, then yield until the moment.
#[inline]
fn wait_until(t: Instant) {
    let now = Instant::now();
    if t <= now {
        return;
    }
    let d = t - now;
    if d > Duration::from_micros(200) {
        std::thread::sleep(d - Duration::from_micros(120));
    }
    while Instant::now() < t {
        std::thread::yield_now();
    }
}

/// The session loop: keep `qd` I/Os in flight until stopped or the quota is done. `recs` holds
/// one recorder per target (one, on a run over one target): each I/O is recorded once, in its
/// target's; the run's totals are their exact sum, made off the hot path (see `run`).
pub(crate) fn run_session<E: IoEngine>(
    eng: &mut E,
    ctx: &SessionCtx<'_>,
    recs: &mut [SessionRecorder],
    buf: &AlignedBuf<'_>,
) -> SessionOutcome {
    use crate::stripe::{Striped, StripedBmi, StripedPow2};
    use crate::workload::OneTarget;
    let Some(p) = ctx.placement else {
        return run_placed(eng, ctx, recs, buf, OneTarget::new(0, ctx.spec));
    };
    if let Some(t) = p.session_target(ctx.session) {
        return run_placed(eng, ctx, recs, buf, OneTarget::new(t, ctx.spec));
    }
    if let Some(x) = StripedBmi::of(&p) {
        return run_placed(eng, ctx, recs, buf, x);
    }
    match StripedPow2::of(&p) {
        Some(p2) => run_placed(eng, ctx, recs, buf, p2),
        None => run_placed(eng, ctx, recs, buf, Striped::of(&p)),
    }
}

/// [`run_session`] for the session's placement `place`, which its offset generator applies as
/// it draws each block ([`OffsetGen::next_io`], never inlined): the loop is compiled for each
/// kind but is the same code for every kind, only the generator's instance differs; each on
/// its own (not inlined into one another, where they would share the compiler's inlining
/// budget and registers).
#[inline(never)]
fn run_placed<E: IoEngine, P: crate::workload::Place>(
    eng: &mut E,
    ctx: &SessionCtx<'_>,
    recs: &mut [SessionRecorder],
    buf: &AlignedBuf<'_>,
    place: P,
) -> SessionOutcome {
    let spec = ctx.spec;
    let qd = spec.qd as usize;
    let bs = spec.block_size as usize;
    if let Err(e) = eng.attach(buf) {
        ctx.stop.store(true, Ordering::Relaxed);
        return SessionOutcome {
            end: Instant::now(),
            sched: None,
            error: Some(format!("I/O engine set-up failed: {e}")),
            completed: 0,
            unregistered: None,
            verify: VerifyTally::default(),
        };
    }
    let vall = ctx.verify;
    let verify_reads = vall.is_some_and(|v| v.iter().any(|v| v.reads()));
    let keep_going = spec.on_corruption == OnCorruption::Continue;
    let mut tally = if vall.is_some() {
        VerifyTally::new()
    } else {
        VerifyTally::default()
    };
    // Reads completed in the last batch, verified once the whole batch has been stamped.
    let mut to_verify: Vec<u32> = Vec::with_capacity(qd);
    let mut corrupt = false;
    let mut gen = if ctx.placement.is_some() {
        OffsetGen::new(&crate::stripe::logical_spec(spec), ctx.session, place)
    } else {
        OffsetGen::new(spec, ctx.session, place)
    };
    let mut free: Vec<u32> = (0..qd as u32).rev().collect();
    let mut slots = vec![
        Slot {
            op: IoOp::Read,
            start: Instant::now(),
            target: 0,
            offset: 0,
            snap: 0,
            ticket: None,
        };
        qd
    ];
    // Open loop: each session issues at rate/sessions, from a common schedule origin.
    let period = spec
        .rate_iops
        .map(|r| Duration::from_secs_f64(spec.sessions as f64 / r));
    let mut intended = Instant::now();
    let think = spec
        .think_us
        .map(|t| Duration::from_nanos((t * 1e3) as u64));
    let fsync_every = match spec.sync {
        SyncMode::Fdatasync(n) => n as u64,
        _ => 0,
    };
    let mut writes_since_sync = 0u64;
    let mut issued = 0u64;
    let mut completed = 0u64;
    let mut inflight = 0usize;
    let mut error: Option<String> = None;
    let mut seq = 0u64;
    // The planned end (never, without one) and whether a completion has reached it.
    let deadline = ctx.end;
    let mut past_end = false;
    let mut last_end: Option<Instant> = None;
    // Run-queue accounting starts at the measurement base (warm-up excluded).
    let base = recs[0].base();
    let mut past_base = Instant::now() >= base;
    let tid = crate::sys::gettid();
    let mut sched0 = if past_base {
        crate::sys::schedstat(tid)
    } else {
        None
    };
    loop {
        // Open loop with I/Os in flight: do not sleep before issuing the next one (that would
        // delay reaping their completions); reap until its intended start instead.
        let mut reap_until = None;
        while !past_end && !ctx.stop.load(Ordering::Relaxed) && issued < ctx.quota {
            if period.is_some() && deadline.is_some_and(|d| intended >= d) {
                // Open loop: the next I/O is meant to start after the end.
                past_end = true;
                break;
            }
            if period.is_some() && inflight > 0 && intended > Instant::now() {
                reap_until = Some(intended);
                break;
            }
            if period.is_some() && !free.is_empty() {
                // A long wait for the next intended start (a low --rate) wakes on a signal or
                // the end; the last 2 ms are waited precisely below, after the buffer is ready.
                if let Some(coarse) = intended.checked_sub(Duration::from_millis(2)) {
                    let d = coarse.saturating_duration_since(Instant::now());
                    if !d.is_zero() && !crate::interrupt::sleep(d, ctx.stop) {
                        break;
                    }
                }
            }
            let Some(slot) = free.pop() else { break };
            let (op, off) = gen.next_io();
            let t = gen.target();
            let vs = vall.map(|v| &v[t as usize]);
            let p = buf.slot(slot);
            let mut snap = 0;
            let mut ticket = None;
            if op == IoOp::Write {
                // Make every written block unique (defeats dedupe) and, on stamped targets,
                // verifiable: register, then stamp header and checksum of each 512-byte unit.
                seq += 1;
                match vs {
                    Some(v) => {
                        let timed = tally.writes & 7 == 0;
                        let t0 = timed.then(Instant::now);
                        // SAFETY: the slot's buffer holds `bs` bytes and is not in flight.
                        let data = unsafe { std::slice::from_raw_parts_mut(p, bs) };
                        ticket = v.stamp_write(data, off, seq);
                        tally.writes += 1;
                        if let Some(t0) = t0 {
                            tally.timed_write(t0.elapsed().as_nanos() as u64);
                        }
                    }
                    None if bs >= 16 => {
                        // SAFETY: the slot's buffer holds `bs` ≥ 16 bytes and is not in flight.
                        unsafe {
                            std::ptr::write_unaligned(p as *mut u64, off);
                            std::ptr::write_unaligned(p.add(8) as *mut u64, seq);
                        }
                    }
                    None => {}
                }
            } else if verify_reads {
                if let Some(v) = vs {
                    snap = v.read_snapshot(off);
                }
            }
            let start = match period {
                Some(p) => {
                    let t = intended;
                    intended += p;
                    wait_until(t);
                    t
                }
                None => Instant::now(),
            };
            slots[slot as usize] = Slot {
                op,
                start,
                target: t,
                offset: off,
                snap,
                ticket,
            };
            eng.push(slot, op, t, ctx.data_offsets[t as usize] + off, p, bs);
            inflight += 1;
            issued += 1;
        }
        if inflight == 0 {
            break;
        }
        let r = eng.complete(
            &mut |slot, res| {
            let end = Instant::now();
            past_base |= end >= base;
            past_end |= deadline.is_some_and(|d| end >= d);
            last_end = Some(end);
            let s = slots[slot as usize];
            let vs = vall.map(|v| &v[s.target as usize]);
            if let (Some(t), Some(v)) = (&s.ticket, vs) {
                v.write_done(t, res == bs as i64);
            }
            if res == bs as i64 {
                recs[s.target as usize].record(s.op.op(), s.start, end, bs as u64);
                if s.op == IoOp::Write {
                    writes_since_sync += 1;
                } else if verify_reads {
                    to_verify.push(slot);
                }
            } else if verify_reads && s.op == IoOp::Read && (0..bs as i64).contains(&res) {
                // A short read of a stamped target: it ends early.
                recs[s.target as usize].error(s.op.op());
                if let Some(v) = vs {
                    v.short_read(&mut tally, s.offset, bs as u64, res as u64, ctx.session, base);
                }
                corrupt = true;
            } else {
                recs[s.target as usize].error(s.op.op());
                if error.is_none() {
                    let on = if ctx.names.len() > 1 {
                        format!(" of {}", ctx.names[s.target as usize])
                    } else {
                        String::new()
                    };
                    error = Some(if res < 0 {
                        format!(
                            "{} at offset {}{on} failed: {}",
                            s.op.op().name(),
                            ctx.data_offsets[s.target as usize] + s.offset,
                            io::Error::from_raw_os_error(-res as i32)
                        )
                    } else {
                        format!(
                            "short {} at offset {}{on}: {res} of {bs} bytes (is the target smaller than expected?)",
                            s.op.op().name(),
                            ctx.data_offsets[s.target as usize] + s.offset
                        )
                    });
                }
            }
            free.push(slot);
            inflight -= 1;
            completed += 1;
            },
            reap_until,
        );
        if let Err(e) = r {
            error.get_or_insert_with(|| format!("I/O engine failed: {e}"));
            ctx.stop.store(true, Ordering::Relaxed);
            break;
        }
        if !to_verify.is_empty() {
            if let Some(vall) = vall {
                tally.batches += 1;
                let t0 = (tally.batches & 7 == 1).then(Instant::now);
                let n = to_verify.len() as u64;
                for &slot in &to_verify {
                    let s = slots[slot as usize];
                    let v = &vall[s.target as usize];
                    // SAFETY: the slot's buffer holds `bs` bytes just read; it is not reissued
                    // before this loop ends.
                    let data = unsafe { std::slice::from_raw_parts(buf.slot(slot), bs) };
                    if v.verify_read(&mut tally, data, s.offset, s.snap, ctx.session, base) {
                        corrupt = true;
                    }
                }
                if let Some(t0) = t0 {
                    tally.timed_reads(n, t0.elapsed().as_nanos() as u64);
                }
            }
            to_verify.clear();
        }
        if corrupt && !keep_going {
            ctx.stop.store(true, Ordering::Relaxed);
        }
        if fsync_every > 0 && writes_since_sync >= fsync_every {
            // Every target, each its own timed sync (one target: one sync).
            for (t, rec) in recs.iter_mut().enumerate() {
                let t0 = Instant::now();
                match eng.sync(t as u32) {
                    Ok(()) => rec.record(SYNC, t0, Instant::now(), 0),
                    Err(e) => {
                        rec.error(SYNC);
                        error.get_or_insert_with(|| format!("fdatasync failed: {e}"));
                    }
                }
            }
            writes_since_sync = 0;
        }
        if error.is_some() {
            ctx.stop.store(true, Ordering::Relaxed);
        }
        if past_base && sched0.is_none() {
            sched0 = crate::sys::schedstat(tid);
        }
        if let Some(t) = think {
            // Wakes on a signal or the end of the run.
            crate::interrupt::sleep(t, ctx.stop);
        }
    }
    let sched = match (sched0, crate::sys::schedstat(tid)) {
        (Some(a), Some(b)) => Some((b.0.saturating_sub(a.0), b.1.saturating_sub(a.1))),
        _ => None,
    };
    // Stopped by the driver (the planned end, Ctrl-C) rather than by its quota: the session was
    // measuring until it noticed, even when its last I/O completed a moment before (a thread
    // descheduled across the end would otherwise shorten the measured span).
    let end = match last_end {
        Some(e) if error.is_none() && ctx.stop.load(Ordering::Relaxed) => e.max(Instant::now()),
        Some(e) => e,
        None => Instant::now(),
    };
    SessionOutcome {
        end,
        sched,
        error,
        completed,
        unregistered: eng.unregistered(),
        verify: tally,
    }
}

/// Run one session with an engine made by [`make_engine`] on `buf`, the session's I/O buffers
/// (its slice of the run's pool, or its own), made and filled before the start line so that
/// placing the memory (page faults, zeroing a huge page) is not measured.
pub(crate) fn run_engine_session(
    ctx: &SessionCtx<'_>,
    recs: &mut [SessionRecorder],
    engine: EngineBox,
    buf: &AlignedBuf<'_>,
) -> SessionOutcome {
    match engine {
        EngineBox::Sync(mut e) => run_session(&mut e, ctx, recs, buf),
        EngineBox::Uring(mut e) => run_session(e.as_mut(), ctx, recs, buf),
        EngineBox::Null(mut e) => run_session(&mut e, ctx, recs, buf),
    }
}

/// A session's I/O buffers: its slice of the run's pool, or a heap buffer of its own where the
/// run has no pool. Filled with pseudo-random bytes from the run's seed and the session.
pub(crate) fn session_buffers<'a>(
    spec: &WorkloadSpec,
    session: u32,
    pool: Option<&'a buffers::BufferPool>,
) -> AlignedBuf<'a> {
    let seed = spec.seed ^ session as u64;
    match pool {
        Some(p) => p.slice(session as usize, seed),
        None => AlignedBuf::new(spec.qd as usize, spec.block_size as usize, seed),
    }
}

/// An engine instance created before the session threads start (so set-up errors are
/// reported before any I/O).
pub(crate) enum EngineBox {
    Sync(sync::SyncEngine),
    Uring(Box<uring::UringEngine>),
    Null(null::NullEngine),
}

/// Create one engine instance for a session, over `files` (one per target, in order).
pub(crate) fn make_engine(spec: &WorkloadSpec, files: &[&File]) -> anyhow::Result<EngineBox> {
    use crate::workload::EngineKind;
    Ok(match spec.engine {
        EngineKind::Sync => EngineBox::Sync(sync::SyncEngine::new(files)?),
        EngineKind::Uring => EngineBox::Uring(Box::new(uring::UringEngine::new(
            files,
            spec.qd,
            spec.batch_submit,
        )?)),
        EngineKind::Null => EngineBox::Null(null::NullEngine::default()),
    })
}
