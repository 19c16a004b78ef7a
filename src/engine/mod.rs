//! I/O engines and the session loop that drives them.
//!
//! An engine ([`IoEngine`]) only moves bytes: `push` queues one I/O into a slot, `complete`
//! issues what is queued and reports completions. The session loop ([`run_session`]) owns
//! everything else: picking offsets ([`OffsetGen`]), stamping the start of each I/O (or its
//! intended start when rate-limited), stamping each completion as it is reaped, and recording
//! the latency into the session's [`SessionRecorder`]. The loop is generic over the engine, so
//! there is no dynamic dispatch, allocation or lock per I/O.
//!
//! Engines: `sync` (pread/pwrite, one in flight), `uring` (io_uring, queue depth per session),
//! `null` (no I/O: the tool's own cost).

pub mod null;
pub mod sync;
pub mod uring;

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::RngCore;

use crate::recorder::{Op, SessionRecorder};
use crate::workload::{OffsetGen, SyncMode, WorkloadSpec};

/// What an engine must do. Results passed to `done` are bytes transferred or `-errno`.
pub trait IoEngine {
    /// Queue one I/O of `len` bytes at absolute `offset` using the buffer of `slot`.
    fn push(&mut self, slot: u32, op: Op, offset: u64, buf: *mut u8, len: usize);
    /// Issue queued I/Os, wait for at least one completion, and report every completion
    /// available as `done(slot, result)`.
    fn complete(&mut self, done: &mut impl FnMut(u32, i64)) -> io::Result<()>;
    /// Make written data durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Called once with the session's buffers before the first I/O (io_uring registers them).
    fn attach(&mut self, _buf: &AlignedBuf) -> io::Result<()> {
        Ok(())
    }
}

/// A page-aligned buffer for O_DIRECT, one block per slot.
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
    block: usize,
}

// SAFETY: the buffer is plain memory owned by one session thread at a time.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// `slots` blocks of `block` bytes, 4 KiB aligned, filled with pseudo-random bytes so
    /// written data is incompressible.
    pub fn new(slots: usize, block: usize, seed: u64) -> AlignedBuf {
        let size = (slots * block).max(4096);
        let layout = std::alloc::Layout::from_size_align(size, 4096).expect("valid layout");
        // SAFETY: non-zero size layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let mut b = AlignedBuf { ptr, layout, block };
        use rand::SeedableRng;
        rand::rngs::SmallRng::seed_from_u64(seed).fill_bytes(b.as_mut_slice());
        b
    }
    /// Pointer to the buffer of `slot`.
    #[inline]
    pub fn slot(&self, slot: u32) -> *mut u8 {
        // SAFETY: slot < slots by construction of the caller.
        unsafe { self.ptr.add(slot as usize * self.block) }
    }
    /// Whole buffer.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for layout.size() bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
    /// Base pointer and length (for io_uring buffer registration).
    pub fn raw(&self) -> (*mut u8, usize) {
        (self.ptr, self.layout.size())
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// Everything a session needs besides its engine and recorder.
pub struct SessionCtx<'a> {
    pub spec: &'a WorkloadSpec,
    pub session: u32,
    /// Absolute byte offset of the target's data area.
    pub data_offset: u64,
    /// I/Os this session should complete (`u64::MAX` for a duration-bound run).
    pub quota: u64,
    /// Set to end the run (deadline, Ctrl-C, or another session's error).
    pub stop: &'a AtomicBool,
}

/// How a session ended.
#[derive(Debug)]
pub struct SessionOutcome {
    /// When the session's last I/O completed.
    pub end: Instant,
    /// The session thread's own schedstat (run ns, run-queue wait ns) at exit.
    pub sched: Option<(u64, u64)>,
    /// First I/O error, if any (the run stops on it).
    pub error: Option<String>,
    /// I/Os completed (including warm-up).
    pub completed: u64,
}

#[derive(Clone, Copy)]
struct Slot {
    op: Op,
    start: Instant,
    offset: u64,
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

/// The session loop: keep `qd` I/Os in flight until stopped or the quota is done.
pub fn run_session<E: IoEngine>(
    eng: &mut E,
    ctx: &SessionCtx<'_>,
    rec: &mut SessionRecorder,
) -> SessionOutcome {
    let spec = ctx.spec;
    let qd = spec.qd as usize;
    let bs = spec.block_size as usize;
    let buf = AlignedBuf::new(qd, bs, spec.seed ^ ctx.session as u64);
    if let Err(e) = eng.attach(&buf) {
        ctx.stop.store(true, Ordering::Relaxed);
        return SessionOutcome {
            end: Instant::now(),
            sched: None,
            error: Some(format!("I/O engine set-up failed: {e}")),
            completed: 0,
        };
    }
    let mut gen = OffsetGen::new(spec, ctx.session);
    let mut free: Vec<u32> = (0..qd as u32).rev().collect();
    let mut slots = vec![
        Slot {
            op: Op::Read,
            start: Instant::now(),
            offset: 0,
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
    // Run-queue accounting starts at the measurement base (warm-up excluded).
    let base = rec.base();
    let mut past_base = Instant::now() >= base;
    let tid = crate::sys::gettid();
    let mut sched0 = if past_base {
        crate::sys::schedstat(tid)
    } else {
        None
    };
    loop {
        while !ctx.stop.load(Ordering::Relaxed) && issued < ctx.quota {
            let Some(slot) = free.pop() else { break };
            let (op, off) = gen.next_io();
            let start = match period {
                Some(p) => {
                    let t = intended;
                    intended += p;
                    wait_until(t);
                    t
                }
                None => Instant::now(),
            };
            let p = buf.slot(slot);
            if op == Op::Write {
                // Make every written block unique (defeats dedupe) at the cost of 16 bytes.
                seq += 1;
                // SAFETY: the slot's buffer is at least 512 bytes and not in flight.
                unsafe {
                    std::ptr::write_unaligned(p as *mut u64, off);
                    std::ptr::write_unaligned(p.add(8) as *mut u64, seq);
                }
            }
            slots[slot as usize] = Slot {
                op,
                start,
                offset: off,
            };
            eng.push(slot, op, ctx.data_offset + off, p, bs);
            inflight += 1;
            issued += 1;
        }
        if inflight == 0 {
            break;
        }
        let r = eng.complete(&mut |slot, res| {
            let end = Instant::now();
            past_base |= end >= base;
            let s = slots[slot as usize];
            if res == bs as i64 {
                rec.record(s.op, s.start, end, bs as u64);
                if s.op == Op::Write {
                    writes_since_sync += 1;
                }
            } else {
                rec.error(s.op);
                if error.is_none() {
                    error = Some(if res < 0 {
                        format!(
                            "{} at offset {} failed: {}",
                            s.op.name(),
                            ctx.data_offset + s.offset,
                            io::Error::from_raw_os_error(-res as i32)
                        )
                    } else {
                        format!(
                            "short {} at offset {}: {res} of {bs} bytes (is the target smaller than expected?)",
                            s.op.name(),
                            ctx.data_offset + s.offset
                        )
                    });
                }
            }
            free.push(slot);
            inflight -= 1;
            completed += 1;
        });
        if let Err(e) = r {
            error.get_or_insert_with(|| format!("I/O engine failed: {e}"));
            ctx.stop.store(true, Ordering::Relaxed);
            break;
        }
        if fsync_every > 0 && writes_since_sync >= fsync_every {
            let t0 = Instant::now();
            match eng.sync() {
                Ok(()) => rec.record(Op::Sync, t0, Instant::now(), 0),
                Err(e) => {
                    rec.error(Op::Sync);
                    error.get_or_insert_with(|| format!("fdatasync failed: {e}"));
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
            std::thread::sleep(t);
        }
    }
    let sched = match (sched0, crate::sys::schedstat(tid)) {
        (Some(a), Some(b)) => Some((b.0.saturating_sub(a.0), b.1.saturating_sub(a.1))),
        _ => None,
    };
    SessionOutcome {
        end: Instant::now(),
        sched,
        error,
        completed,
    }
}

/// Run one session with an engine made by [`make_engine`].
pub fn run_engine_session(
    ctx: &SessionCtx<'_>,
    rec: &mut SessionRecorder,
    engine: EngineBox,
) -> SessionOutcome {
    match engine {
        EngineBox::Sync(mut e) => run_session(&mut e, ctx, rec),
        EngineBox::Uring(mut e) => run_session(e.as_mut(), ctx, rec),
        EngineBox::Null(mut e) => run_session(&mut e, ctx, rec),
    }
}

/// An engine instance created before the session threads start (so set-up errors are
/// reported before any I/O).
pub enum EngineBox {
    Sync(sync::SyncEngine),
    Uring(Box<uring::UringEngine>),
    Null(null::NullEngine),
}

/// Create one engine instance for a session.
pub fn make_engine(spec: &WorkloadSpec, file: &File) -> anyhow::Result<EngineBox> {
    use crate::workload::EngineKind;
    Ok(match spec.engine {
        EngineKind::Sync => EngineBox::Sync(sync::SyncEngine::new(file)?),
        EngineKind::Uring => EngineBox::Uring(Box::new(uring::UringEngine::new(file, spec.qd)?)),
        EngineKind::Null => EngineBox::Null(null::NullEngine::default()),
    })
}
