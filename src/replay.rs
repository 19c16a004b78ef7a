//! `iolens replay`: a recorded I/O stream ([`crate::sources::io_stream`]) issued again on a
//! target, each recorded session on its own thread in its own order, every I/O scheduled from
//! the start of the replay (never as a delay after the previous one, so errors do not add up),
//! and the fidelity of the schedule measured beside the latencies.
//!
//! - Mapping: each source file (a trace's file#, a biosnoop disk) is a region of the target's
//!   data area: offset in the target = region start + (offset in the file − the file's first
//!   byte touched). The default lays the files one after another in source order, each from
//!   its lowest touched byte (rounded down to 1 MiB) to its highest (rounded up), on a scratch
//!   file iolens creates and marks, sized to hold them all. `--map FILE` reads such a map
//!   (JSON, editable) or, when FILE does not exist, writes the default one there.
//! - Timing: `recorded` issues each I/O at its recorded time from the start; `scaled:K` at
//!   recorded time / K (K = 2 twice as fast); `fast` each session's I/Os back to back;
//!   `think` a closed loop per session: the next I/O follows the previous one's completion
//!   after the recorded think time between them (its recorded issue less the previous one's
//!   recorded completion), so a session's duration stretches by exactly the latency the new
//!   storage adds. A session waits for its scheduled time by sleeping to within
//!   [`SPIN_NS`] of it ([`SPIN_RT_NS`] under `--realtime`; its threads' timer slack is 1 ns,
//!   so a sleep ends when asked) and spinning the rest. A thread that would stay on its CPU
//!   nearly all the time (I/Os closer together than a sleep's wake-up) owes the CPU
//!   [`PAUSE_NS`] whenever it used more than [`MAX_CPU_SHARE`] of a [`PACE_WINDOW_NS`] window
//!   ([`Pacer`]), paid in the gaps before its next I/Os: the kernel keeps 5 % of every CPU for
//!   the tasks that are not real-time (a SCHED_FIFO thread that never sleeps is stopped for
//!   about 50 ms each second, measured as a 42.8 ms p99 issue-time error at 50k IOPS), and
//!   pauses that it chooses cost the schedule far less than that one stall.
//! - Safety: reads only, unless `writes`; then only on a scratch file iolens created and
//!   marked (its data written back as stamped blocks of generation 0, as its fill was), never
//!   on a file or device iolens did not create. A source with writes is refused without
//!   `writes` unless `skip_writes` leaves them out. A file the map leaves out is not replayed.
//! - Overlapping I/Os: a session whose recorded I/Os overlapped (an io_uring or AIO session,
//!   several I/Os in flight) replays them overlapping. Its I/Os are dealt onto lanes, each
//!   I/O to a lane whose previous I/O had completed (in the recording) before it was issued;
//!   the fewest lanes that do so is the session's recorded concurrency at its peak. Each lane
//!   is a thread issuing its I/Os on time, one at a time, so an I/O never waits for one it did
//!   not wait for when recorded, and one that did wait (it followed the completion of an
//!   earlier one of its lane) still does. Lanes are capped at [`MAX_LANES`] per session.
//! - Each read from a scratch file is checked: its first 512-byte unit's stamp must name the
//!   offset read (`misplaced` counts those that do not).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;

use crate::histogram::{new_histogram, record_ns};
use crate::results::replay::{InFlight, ReplayInfo, ReplayInterval, ReplayMapEntry, ReplaySession};
use crate::results::{Hist, Kind, LatencySummary, Results, RunResult, Spec};
use crate::sources::io_stream::{read_stream, IoStream, Series, StreamOptions};
use crate::target::{PrepareOptions, Target, TargetKind};

/// A session sleeps until this close to an I/O's scheduled time, then spins (a CFS thread's
/// wake-up on a loaded host is often tens of µs late).
pub const SPIN_NS: u64 = 100_000;
/// The same under SCHED_FIFO (prompt wake-ups): it sleeps for all but the last 10 µs, so that
/// even at 50k IOPS (an I/O every 20 µs) it sleeps between I/Os and leaves the CPU to others.
pub const SPIN_RT_NS: u64 = 10_000;
/// A thread's share of its CPU above which it pauses ([`Pacer`]): under the kernel's 95 % for
/// real-time tasks (sched_rt_runtime_us 950000 of 1000000).
pub const MAX_CPU_SHARE: f64 = 0.9;
/// The window over which a thread's CPU share is measured, ns.
pub const PACE_WINDOW_NS: u64 = 2_000_000;
/// How long a thread over [`MAX_CPU_SHARE`] sleeps, ns.
pub const PAUSE_NS: u64 = 150_000;
/// At most this many lanes (threads) per session: I/Os beyond it in flight at once share the
/// lane that frees first.
pub const MAX_LANES: usize = 64;
/// Regions of the default map are aligned to this.
const REGION_ALIGN: u64 = 1 << 20;

/// How the recorded times are kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Timing {
    Recorded,
    /// Speed factor K: recorded time / K.
    Scaled(f64),
    Fast,
    Think,
}

impl Timing {
    pub fn name(self) -> String {
        match self {
            Timing::Recorded => "recorded".into(),
            Timing::Scaled(k) => format!("scaled:{k}"),
            Timing::Fast => "fast".into(),
            Timing::Think => "think".into(),
        }
    }

    /// Parse `recorded`, `scaled:K`, `fast`, `think`.
    pub fn parse(s: &str) -> Result<Timing> {
        Ok(match s {
            "recorded" => Timing::Recorded,
            "fast" => Timing::Fast,
            "think" => Timing::Think,
            _ => match s.strip_prefix("scaled:") {
                Some(k) => {
                    let k: f64 = k
                        .parse()
                        .with_context(|| format!("scaled:K needs a number, not {k:?}"))?;
                    if !(k.is_finite() && k > 0.0 && k <= 1e6) {
                        bail!("scaled:K needs a factor above 0 (and at most 10^6), not {k}");
                    }
                    Timing::Scaled(k)
                }
                None => bail!("--timing is one of recorded, scaled:K, fast, think; not {s:?}"),
            },
        })
    }

    /// The speed factor the recorded times are divided by.
    fn speed(self) -> f64 {
        match self {
            Timing::Scaled(k) => k,
            Timing::Fast => 0.0,
            _ => 1.0,
        }
    }
}

/// What to replay, where and how.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    pub stream: StreamOptions,
    pub target: PathBuf,
    /// `--map FILE`: read when it exists, else the default map is written there.
    pub map: Option<PathBuf>,
    pub timing: Timing,
    pub writes: bool,
    /// Replay a stream's reads only, leaving its writes out (without it, a stream with writes
    /// and no `writes` is refused).
    pub skip_writes: bool,
    /// O_DIRECT (default) or the page cache.
    pub direct: bool,
    /// Interval of the per-interval histograms and IOPS comparison.
    pub interval: Duration,
    pub progress: bool,
    /// Run the session threads under SCHED_FIFO (priority 1) so that a busy host's other
    /// work does not delay their wake-ups (needs root or CAP_SYS_NICE).
    pub realtime: bool,
}

/// One I/O of a session's plan.
#[derive(Clone, Copy)]
struct Job {
    /// Index in the stream.
    rec: usize,
    /// Scheduled issue (ns from the replay's start) for recorded/scaled; the session's first
    /// issue for think.
    at_ns: u64,
    /// Think: recorded gap from the previous completion to this issue (ns).
    think_ns: u64,
    /// Absolute byte offset in the target.
    offset: u64,
    size: usize,
    write: bool,
}

/// What happened to one I/O.
#[derive(Clone, Copy, Default)]
struct Done {
    /// When it was due (ns from start; equal to `issue_ns` for fast).
    due_ns: u64,
    issue_ns: u64,
    lat_ns: u64,
    failed: bool,
    misplaced: bool,
    checked: bool,
    /// False for an I/O an interrupted replay never issued.
    ran: bool,
    /// Its thread was found over its CPU share before it and owed a pause ([`Pacer`]).
    paused: bool,
}

/// Peak and mean number of I/Os in flight over `(start, end)` intervals (ns); the mean is
/// their summed time over the span from the first start to the last end.
fn concurrency(iv: &[(u64, u64)]) -> (u32, f64) {
    if iv.is_empty() {
        return (0, 0.0);
    }
    let mut ev: Vec<(u64, i32)> = Vec::with_capacity(iv.len() * 2);
    for &(a, b) in iv {
        ev.push((a, 1));
        // An I/O that completes when the next starts is not in flight beside it.
        ev.push((b.max(a), -1));
    }
    ev.sort_unstable_by_key(|e| (e.0, e.1));
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, d) in ev {
        now += d;
        peak = peak.max(now);
    }
    let lo = iv.iter().map(|x| x.0).min().unwrap_or(0);
    let hi = iv.iter().map(|x| x.1).max().unwrap_or(0);
    let busy: f64 = iv.iter().map(|x| x.1.saturating_sub(x.0) as f64).sum();
    let mean = if hi > lo {
        busy / (hi - lo) as f64
    } else {
        0.0
    };
    (peak.max(0) as u32, mean)
}

/// Peak and mean I/Os in flight in each of `n` intervals of `interval_ns` from 0, over
/// `(start, end)` intervals (ns): the mean is the time the I/Os spent in flight within the
/// interval over its length; the last interval also takes whatever lies beyond it.
fn concurrency_per_interval(iv: &[(u64, u64)], interval_ns: u64, n: usize) -> Vec<(u32, f64)> {
    let mut out = vec![(0u32, 0.0f64); n];
    if n == 0 || interval_ns == 0 {
        return out;
    }
    // An I/O of no length is in flight for no time (and its end would sort before its start).
    let mut ev: Vec<(u64, i32)> = Vec::with_capacity(iv.len() * 2);
    for &(a, b) in iv.iter().filter(|x| x.1 > x.0) {
        ev.push((a, 1));
        ev.push((b, -1));
    }
    // Ends before starts at one instant, as in `concurrency`.
    ev.sort_unstable_by_key(|e| (e.0, e.1));
    let bin = |t: u64| ((t / interval_ns) as usize).min(n - 1);
    let mut busy = vec![0u128; n];
    let (mut now, mut at) = (0u32, 0u64);
    for (t, d) in ev {
        // [at, t) held `now` I/Os in flight: spread it over the intervals it crosses, each of
        // which it entered with `now` in flight.
        let mut a = at;
        while a < t {
            let k = bin(a);
            if a > at {
                out[k].0 = out[k].0.max(now);
            }
            let edge = if k == n - 1 {
                t
            } else {
                ((k as u64 + 1) * interval_ns).min(t)
            };
            busy[k] += (edge - a) as u128 * now as u128;
            a = edge;
        }
        at = t;
        now = now.saturating_add_signed(d);
        let k = bin(t);
        out[k].0 = out[k].0.max(now);
    }
    for (o, b) in out.iter_mut().zip(busy) {
        o.1 = b as f64 / interval_ns as f64;
    }
    out
}

/// The default map: files one after another, each region from its lowest byte touched.
pub fn default_map(stream: &IoStream) -> Vec<ReplayMapEntry> {
    let mut lo = vec![u64::MAX; stream.files.len()];
    let mut hi = vec![0u64; stream.files.len()];
    for r in &stream.records {
        let f = r.file as usize;
        lo[f] = lo[f].min(r.offset);
        hi[f] = hi[f].max(r.offset.saturating_add(r.size));
    }
    let mut at = 0u64;
    let mut map = Vec::new();
    for (i, name) in stream.files.iter().enumerate() {
        let first = lo[i] / REGION_ALIGN * REGION_ALIGN;
        let length = (hi[i].saturating_sub(first)).div_ceil(REGION_ALIGN) * REGION_ALIGN;
        map.push(ReplayMapEntry {
            file: name.clone(),
            target_offset: at,
            first_byte: first,
            length,
        });
        at = at.saturating_add(length);
    }
    map
}

/// Bytes of the target's data area a map needs.
pub fn map_size(map: &[ReplayMapEntry]) -> u64 {
    map.iter()
        .map(|e| e.target_offset.saturating_add(e.length))
        .max()
        .unwrap_or(0)
}

/// Parse a map file (JSON list of entries).
pub fn parse_map(text: &str) -> Result<Vec<ReplayMapEntry>> {
    serde_json::from_str(text)
        .context("a map file is a JSON list of {file, target_offset, first_byte, length} (bytes)")
}

/// The stream read and the map it will use, before anything is prepared.
pub struct Prepared {
    pub stream: IoStream,
    pub map: Vec<ReplayMapEntry>,
    /// True when the map is the default one (to be written to `--map FILE`).
    pub map_is_new: bool,
}

/// Read the sources and decide the map (reads `--map FILE` when it exists).
pub fn prepare(opts: &ReplayOptions) -> Result<Prepared> {
    let stream = read_stream(&opts.stream)?;
    let (map, map_is_new) = match &opts.map {
        Some(p) if p.exists() => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the map {}", p.display()))?;
            (
                parse_map(&text).with_context(|| format!("{}", p.display()))?,
                false,
            )
        }
        _ => (default_map(&stream), true),
    };
    Ok(Prepared {
        stream,
        map,
        map_is_new,
    })
}

/// A page-aligned buffer for O_DIRECT.
struct Buf {
    ptr: *mut u8,
    layout: Layout,
}

impl Buf {
    fn new(size: usize) -> Result<Buf> {
        let layout = Layout::from_size_align(size.max(4096), 4096)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            bail!("cannot allocate a {size}-byte I/O buffer");
        }
        Ok(Buf { ptr, layout })
    }
    fn slice(&mut self, n: usize) -> &mut [u8] {
        // SAFETY: ptr is valid for layout.size() bytes and n never exceeds it.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, n.min(self.layout.size())) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

/// The calling thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Keeps a session thread from holding its CPU: every [`PACE_WINDOW_NS`] of wall time it
/// reads its own CPU time, and when it used more than [`MAX_CPU_SHARE`] of the window it owes
/// [`PAUSE_NS`] off its CPU. The debt is paid in the gaps before the next I/Os (sleeping all
/// the way to each one's due time instead of spinning the last [`SPIN_RT_NS`]), so that an
/// I/O is late by a wake-up at most, not by the whole pause; only what a following window
/// left unpaid (a thread behind its schedule has no gaps) is slept at once.
struct Pacer {
    window_start: Instant,
    cpu_start: u64,
    /// Off-CPU time still owed, ns.
    owed_ns: u64,
}

impl Pacer {
    fn new() -> Pacer {
        Pacer {
            window_start: Instant::now(),
            cpu_start: thread_cpu_ns(),
            owed_ns: 0,
        }
    }

    /// Called before each I/O: true when the thread fell into debt at this I/O.
    #[inline]
    fn check(&mut self, now: Instant) -> bool {
        let wall = now.duration_since(self.window_start).as_nanos() as u64;
        if wall < PACE_WINDOW_NS {
            return false;
        }
        if self.owed_ns > 0 {
            // A whole window passed without the gaps to pay it in.
            std::thread::sleep(Duration::from_nanos(self.owed_ns));
            self.owed_ns = 0;
        }
        let cpu = thread_cpu_ns();
        let used = cpu.saturating_sub(self.cpu_start);
        let over = used as f64 > MAX_CPU_SHARE * wall as f64;
        if over {
            self.owed_ns = PAUSE_NS;
        }
        self.window_start = Instant::now();
        self.cpu_start = thread_cpu_ns();
        over
    }
}

/// Wait until `base + at_ns`: sleep to within `spin_ns` (all the way while the thread owes
/// its CPU a pause), then spin. Also says whether the pacer found the thread over its share.
#[inline]
fn wait_until(base: Instant, at_ns: u64, spin_ns: u64, pacer: &mut Pacer) -> (Instant, bool) {
    let due = base + Duration::from_nanos(at_ns);
    let paused = pacer.check(Instant::now());
    loop {
        let now = Instant::now();
        if now >= due {
            return (now, paused);
        }
        let left = due - now;
        let spin = if pacer.owed_ns > 0 { 0 } else { spin_ns };
        if left > Duration::from_nanos(spin) {
            std::thread::sleep(left - Duration::from_nanos(spin));
            if pacer.owed_ns > 0 {
                let slept = now.elapsed().as_nanos() as u64;
                pacer.owed_ns = pacer.owed_ns.saturating_sub(slept);
            }
        } else {
            std::hint::spin_loop();
        }
    }
}

/// A timer slack of 1 ns for the calling thread, so its sleeps end when asked (a normal
/// thread's default slack lets a sleep run 50 µs long).
fn set_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a value and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Whether this process may put a thread under SCHED_FIFO.
fn fifo_allowed() -> bool {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/geteuid with a valid out pointer.
    unsafe {
        libc::geteuid() == 0
            || (libc::getrlimit(libc::RLIMIT_RTPRIO, &mut lim) == 0 && lim.rlim_cur >= 1)
    }
}

/// Put the calling thread under SCHED_FIFO priority 1 (best effort: checked by
/// [`fifo_allowed`] before the threads start).
fn set_fifo() {
    let p = libc::sched_param { sched_priority: 1 };
    // SAFETY: pthread_self is the calling thread; p is a valid sched_param.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) };
}

/// Run one session's plan.
fn run_session(
    jobs: &[Job],
    timing: Timing,
    fd: i32,
    stamp_id: Option<u64>,
    base: Instant,
    stop: &AtomicBool,
    spin_ns: u64,
) -> Result<Vec<Done>> {
    let max = jobs.iter().map(|j| j.size).max().unwrap_or(4096);
    let mut buf = Buf::new(max)?;
    let mut done = Vec::with_capacity(jobs.len());
    let mut prev_end_ns = 0u64;
    let mut pacer = Pacer::new();
    for (i, j) in jobs.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let due_ns = match timing {
            Timing::Recorded | Timing::Scaled(_) => j.at_ns,
            Timing::Think if i == 0 => j.at_ns,
            Timing::Think => prev_end_ns.saturating_add(j.think_ns),
            Timing::Fast => 0,
        };
        let (issued, paused) = if timing == Timing::Fast {
            (Instant::now(), false)
        } else {
            wait_until(base, due_ns, spin_ns, &mut pacer)
        };
        let b = buf.slice(j.size);
        if j.write {
            if let Some(id) = stamp_id {
                crate::stamp::stamp(b, id, j.offset, 0);
            }
        }
        // SAFETY: b is valid for j.size bytes and fd is open for the whole replay.
        let r = unsafe {
            if j.write {
                libc::pwrite(
                    fd,
                    b.as_ptr() as *const libc::c_void,
                    j.size,
                    j.offset as i64,
                )
            } else {
                libc::pread(
                    fd,
                    b.as_mut_ptr() as *mut libc::c_void,
                    j.size,
                    j.offset as i64,
                )
            }
        };
        let end = Instant::now();
        let issue_ns = issued.duration_since(base).as_nanos() as u64;
        let lat_ns = end.duration_since(issued).as_nanos() as u64;
        prev_end_ns = issue_ns.saturating_add(lat_ns);
        let failed = r != j.size as isize;
        let (mut checked, mut misplaced) = (false, false);
        if !failed && !j.write && j.size >= crate::stamp::UNIT {
            if let Some(id) = stamp_id {
                checked = true;
                misplaced =
                    crate::stamp::check_unit(&b[..crate::stamp::UNIT], id, j.offset, false, None)
                        .is_some();
            }
        }
        done.push(Done {
            ran: true,
            due_ns: if timing == Timing::Fast {
                issue_ns
            } else {
                due_ns
            },
            issue_ns,
            lat_ns,
            failed,
            misplaced,
            checked,
            paused,
        });
    }
    Ok(done)
}

/// Plans per session: each I/O's target offset and schedule.
fn plan(
    stream: &IoStream,
    map: &[ReplayMapEntry],
    target: &Target,
    opts: &ReplayOptions,
) -> Result<(Vec<Vec<Job>>, Skipped)> {
    let speed = opts.timing.speed();
    let mut regions = Vec::with_capacity(stream.files.len());
    for name in &stream.files {
        // A file the map leaves out is not replayed (counted as skipped).
        let Some(e) = map.iter().find(|e| &e.file == name) else {
            regions.push(None);
            continue;
        };
        if e.target_offset.saturating_add(e.length) > target.data_size {
            bail!(
                "the map puts {name} at {}..{} of the target's data, which holds only {} bytes",
                e.target_offset,
                e.target_offset.saturating_add(e.length),
                target.data_size
            );
        }
        regions.push(Some(e));
    }
    let lbs = if opts.direct {
        crate::sys::logical_block_size(&target.path) as u64
    } else {
        1
    };
    let mut sessions: Vec<Vec<Job>> = vec![Vec::new(); stream.sessions.len()];
    let mut prev_end: Vec<Option<u64>> = vec![None; stream.sessions.len()];
    let mut skipped = Skipped::default();
    for (i, r) in stream.records.iter().enumerate() {
        let Some(e) = regions[r.file as usize] else {
            skipped.unmapped += 1;
            continue;
        };
        if r.offset < e.first_byte || r.offset + r.size > e.first_byte + e.length {
            bail!(
                "{} bytes {}..{} lie outside its map region (first byte {}, length {})",
                e.file,
                r.offset,
                r.offset + r.size,
                e.first_byte,
                e.length
            );
        }
        let s = r.session as usize;
        let pe = prev_end[s].replace(r.t_ns.saturating_add(r.latency_ns));
        if r.write && !opts.writes {
            skipped.writes += 1;
            continue;
        }
        let offset = target.data_offset + e.target_offset + (r.offset - e.first_byte);
        if !(offset.is_multiple_of(lbs) && r.size.is_multiple_of(lbs)) {
            bail!(
                "{} offset {} size {} is not aligned to the target's logical block size \
                 ({lbs} bytes), which O_DIRECT needs: use --buffered or another --block-size/map",
                e.file,
                r.offset,
                r.size
            );
        }
        let size = usize::try_from(r.size).ok().filter(|&n| n <= 64 << 20);
        let Some(size) = size else {
            bail!("{}: an I/O of {} bytes (more than 64 MiB)", e.file, r.size);
        };
        let at_ns = if speed > 0.0 {
            (r.t_ns as f64 / speed) as u64
        } else {
            0
        };
        sessions[s].push(Job {
            rec: i,
            at_ns,
            think_ns: pe.map_or(0, |p| r.t_ns.saturating_sub(p)),
            offset,
            size,
            write: r.write,
        });
    }
    Ok((sessions, skipped))
}

/// One thread's share of a session: indexes into the session's jobs, in order.
struct Lane {
    session: usize,
    jobs: Vec<Job>,
    /// Index of each job in its session's plan.
    index: Vec<usize>,
}

/// Deal each session's I/Os onto lanes: an I/O goes to the lane whose last I/O completed
/// (recorded) earliest, if that was before its recorded issue, else to a new lane (up to
/// [`MAX_LANES`]). For `think`, each I/O's think time is then counted from its lane's previous
/// completion.
fn lanes(stream: &IoStream, sessions: &[Vec<Job>]) -> Vec<Lane> {
    let mut out = Vec::new();
    for (s, jobs) in sessions.iter().enumerate() {
        // (recorded end of the lane's last I/O, lane index in out)
        let mut ends: Vec<(u64, usize)> = Vec::new();
        for (i, j) in jobs.iter().enumerate() {
            let r = &stream.records[j.rec];
            let free = ends
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.0)
                .map(|(k, e)| (k, e.0));
            let k = match free {
                Some((k, end)) if end <= r.t_ns || ends.len() >= MAX_LANES => k,
                _ => {
                    out.push(Lane {
                        session: s,
                        jobs: Vec::new(),
                        index: Vec::new(),
                    });
                    ends.push((0, out.len() - 1));
                    ends.len() - 1
                }
            };
            let lane = &mut out[ends[k].1];
            let mut job = *j;
            if let Some(prev) = lane.jobs.last() {
                let pr = &stream.records[prev.rec];
                job.think_ns = r.t_ns.saturating_sub(pr.t_ns.saturating_add(pr.latency_ns));
            }
            lane.jobs.push(job);
            lane.index.push(i);
            ends[k].0 = ends[k].0.max(r.t_ns.saturating_add(r.latency_ns));
        }
    }
    out
}

/// Recorded I/Os the plan leaves out.
#[derive(Default)]
struct Skipped {
    /// Writes, without `--writes`.
    writes: u64,
    /// I/Os of files the map leaves out.
    unmapped: u64,
}

/// Replay the prepared stream on the target and build the results.
pub fn replay(
    opts: &ReplayOptions,
    prepared: Prepared,
    command_line: Vec<String>,
    stop: &AtomicBool,
) -> Result<Results> {
    let Prepared { stream, map, .. } = prepared;
    let writes = stream.records.iter().filter(|r| r.write).count();
    if writes > 0 && !opts.writes && !opts.skip_writes {
        bail!(
            "the source holds {writes} recorded writes: give --writes to replay them (on a \
             scratch file iolens creates), or --skip-writes to replay its reads only"
        );
    }
    let needed = map_size(&map);
    let exists = opts.target.exists();
    let popts = PrepareOptions {
        size: if exists {
            None
        } else {
            Some(needed.max(REGION_ALIGN))
        },
        disposable: None,
        writes: opts.writes,
        progress: opts.progress,
        refill: false,
        grow: false,
    };
    if opts.writes && exists && !crate::target::is_scratch(&opts.target) {
        bail!(
            "--writes replays writes only on a scratch file iolens created and marked; {} is \
             not one (name a new path and iolens creates it)",
            opts.target.display()
        );
    }
    let target = Target::prepare(&opts.target, &popts, stop)?;
    if opts.writes && target.kind != TargetKind::Scratch {
        bail!(
            "--writes replays writes only on a scratch file iolens created and marked; {} is a {}",
            opts.target.display(),
            target.kind.name()
        );
    }
    let (sessions, skipped) = plan(&stream, &map, &target, opts)?;
    let file: File = target.open_with(opts.writes, opts.direct, false, true)?;
    let fd = file.as_raw_fd();
    let stamp_id = (target.kind == TargetKind::Scratch).then_some(target.id);
    let started = humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string();
    let lanes = lanes(&stream, &sessions);
    let barrier = Barrier::new(lanes.len() + 1);
    let base_cell = std::sync::OnceLock::new();
    let timing = opts.timing;
    let realtime = opts.realtime;
    if realtime && !fifo_allowed() {
        bail!("--realtime needs SCHED_FIFO, which this process may not use (root or CAP_SYS_NICE)");
    }
    let outcome: Vec<Result<Vec<Done>>> = std::thread::scope(|sc| {
        let handles: Vec<_> = lanes
            .iter()
            .map(|lane| {
                let jobs = &lane.jobs;
                let (barrier, base_cell) = (&barrier, &base_cell);
                sc.spawn(move || {
                    set_timer_slack();
                    if realtime {
                        set_fifo();
                    }
                    barrier.wait();
                    let base: Instant = *base_cell.get().expect("base set before the barrier");
                    let spin = if realtime { SPIN_RT_NS } else { SPIN_NS };
                    run_session(jobs, timing, fd, stamp_id, base, stop, spin)
                })
            })
            .collect();
        // Every thread is started before the clock begins.
        let _ = base_cell.set(Instant::now() + Duration::from_millis(20));
        barrier.wait();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a replay session panicked")))
            })
            .collect()
    });
    // Each session's outcomes back in its plan's order.
    let mut dones: Vec<Vec<Done>> = sessions
        .iter()
        .map(|j| vec![Done::default(); j.len()])
        .collect();
    let mut lane_count = vec![0u32; sessions.len()];
    for (lane, o) in lanes.iter().zip(outcome) {
        let o = o?;
        lane_count[lane.session] += 1;
        for (d, &i) in o.into_iter().zip(&lane.index) {
            dones[lane.session][i] = d;
        }
    }
    drop(file);
    let mut res = build_results(
        &stream,
        &sessions,
        &dones,
        &lane_count,
        opts,
        map,
        &skipped,
        started,
        command_line,
    )?;
    res.environment = crate::sys::environment();
    res.environment.target = Some(crate::sys::target_info(
        &target.path,
        target.kind.into(),
        target.data_size,
    ));
    Ok(res)
}

fn summary(h: &Histogram<u64>) -> LatencySummary {
    LatencySummary::of(h)
}

#[allow(clippy::too_many_arguments)]
fn build_results(
    stream: &IoStream,
    sessions: &[Vec<Job>],
    dones: &[Vec<Done>],
    lane_count: &[u32],
    opts: &ReplayOptions,
    map: Vec<ReplayMapEntry>,
    skipped: &Skipped,
    started: String,
    command_line: Vec<String>,
) -> Result<Results> {
    let speed = opts.timing.speed();
    let scale = |t: u64| -> u64 {
        if speed > 0.0 {
            (t as f64 / speed) as u64
        } else {
            t
        }
    };
    let interval_ns = (opts.interval.as_nanos() as u64).max(1_000_000);
    let mut recorded = Series::new(interval_ns);
    let mut replayed = Series::new(interval_ns);
    let mut err_h = new_histogram();
    let mut info = ReplayInfo {
        source: stream.source.clone(),
        timing: opts.timing.name(),
        speed,
        block_size: stream.block_size,
        writes: opts.writes,
        direct: opts.direct,
        recorded_ios: sessions.iter().map(|s| s.len() as u64).sum(),
        skipped: stream.skipped.clone(),
        recorded_latency_known: stream.latency_known,
        ..ReplayInfo::default()
    };
    if skipped.writes > 0 {
        info.skipped
            .insert("writes (--skip-writes)".into(), skipped.writes);
    }
    if skipped.unmapped > 0 {
        info.skipped
            .insert("I/Os of files the map leaves out".into(), skipped.unmapped);
    }
    let (mut first_due, mut last_due) = (u64::MAX, 0u64);
    let (mut first_issue, mut last_issue, mut last_end) = (u64::MAX, 0u64, 0u64);
    let (mut rec_first, mut rec_end) = (u64::MAX, 0u64);
    let mut rec_issue_times = Vec::new();
    let mut rep_issue_times = Vec::new();
    // Recorded I/Os on the replay's clock (scaled issue, recorded latency).
    let mut rec_scaled_iv = Vec::new();
    let (mut all_rec_iv, mut all_rep_iv) = (Vec::new(), Vec::new());
    for (s, (jobs, done)) in sessions.iter().zip(dones).enumerate() {
        let mut rh = new_histogram();
        let mut ph = new_histogram();
        let mut reordered = 0u64;
        let mut prev_issue = 0u64;
        let mut late_ns = 0u64;
        let (mut s_rec0, mut s_rec1, mut s_rep0, mut s_rep1) = (u64::MAX, 0u64, u64::MAX, 0u64);
        let (mut rec_iv, mut rep_iv) = (Vec::new(), Vec::new());
        for (j, d) in jobs.iter().zip(done) {
            let r = &stream.records[j.rec];
            let ev = &stream.events[r.event as usize];
            let rec_t = scale(r.t_ns);
            if stream.latency_known {
                record_ns(&mut rh, r.latency_ns);
                recorded.record(ev, rec_t + r.latency_ns, r.latency_ns, r.size);
            }
            rec_first = rec_first.min(rec_t);
            rec_end = rec_end.max(rec_t + r.latency_ns);
            s_rec0 = s_rec0.min(rec_t);
            s_rec1 = s_rec1.max(rec_t + r.latency_ns);
            rec_issue_times.push(rec_t);
            rec_scaled_iv.push((rec_t, rec_t + r.latency_ns));
            rec_iv.push((r.t_ns, r.t_ns + r.latency_ns));
            if !d.ran {
                continue;
            }
            info.replayed_ios += 1;
            info.pauses += d.paused as u64;
            if d.failed {
                info.errors += 1;
                continue;
            }
            info.misplaced += d.misplaced as u64;
            info.stamp_checked += d.checked as u64;
            record_ns(&mut ph, d.lat_ns);
            replayed.record(ev, d.issue_ns + d.lat_ns, d.lat_ns, r.size);
            if d.issue_ns < prev_issue {
                reordered += 1;
            }
            prev_issue = d.issue_ns;
            let late = d.issue_ns.saturating_sub(d.due_ns);
            late_ns += late;
            record_ns(&mut err_h, late.max(1));
            first_due = first_due.min(d.due_ns);
            last_due = last_due.max(d.due_ns);
            first_issue = first_issue.min(d.issue_ns);
            last_issue = last_issue.max(d.issue_ns);
            last_end = last_end.max(d.issue_ns + d.lat_ns);
            s_rep0 = s_rep0.min(d.issue_ns);
            s_rep1 = s_rep1.max(d.issue_ns + d.lat_ns);
            rep_issue_times.push(d.issue_ns);
            rep_iv.push((d.issue_ns, d.issue_ns + d.lat_ns));
        }
        let rec_c = if stream.latency_known {
            concurrency(&rec_iv)
        } else {
            (0, 0.0)
        };
        let in_flight = InFlight::of(rec_c, concurrency(&rep_iv));
        all_rec_iv.append(&mut rec_iv);
        all_rep_iv.append(&mut rep_iv);
        info.reordered += reordered;
        info.sessions.push(ReplaySession {
            session: stream.sessions[s].clone(),
            ios: jobs.len() as u64,
            recorded: summary(&rh),
            replayed: summary(&ph),
            reordered,
            recorded_s: s_rec1.saturating_sub(s_rec0.min(s_rec1)) as f64 / 1e9,
            replayed_s: s_rep1.saturating_sub(s_rep0.min(s_rep1)) as f64 / 1e9,
            late_s: late_ns as f64 / 1e9,
            lanes: lane_count[s],
            in_flight,
        });
    }
    let rec_c = if stream.latency_known {
        concurrency(&all_rec_iv)
    } else {
        (0, 0.0)
    };
    info.in_flight = InFlight::of(rec_c, concurrency(&all_rep_iv));
    let secs = |a: u64, b: u64| b.saturating_sub(a.min(b)) as f64 / 1e9;
    info.scheduled_span_s = secs(first_due, last_due);
    info.replayed_span_s = secs(first_issue, last_issue);
    info.span_error_pct = if info.scheduled_span_s > 0.0 {
        (info.replayed_span_s - info.scheduled_span_s) / info.scheduled_span_s * 100.0
    } else {
        0.0
    };
    info.recorded_duration_s = secs(rec_first, rec_end);
    info.replayed_duration_s = secs(first_issue, last_end);
    if !err_h.is_empty() && opts.timing != Timing::Fast {
        info.issue_error = summary(&err_h);
        info.issue_error_hist = Hist::encode(&err_h);
        info.behind_s = err_h.max() as f64 / 1e9;
    }
    info.kept_up = opts.timing == Timing::Fast
        || (info.issue_error.p99_ns < 1_000_000 && info.span_error_pct.abs() <= 1.0);
    // Recorded (scheduled) beside achieved IOPS per interval, on the replay's clock.
    let n_int = (rep_issue_times
        .iter()
        .chain(&rec_issue_times)
        .max()
        .copied()
        .unwrap_or(0)
        / interval_ns
        + 1)
    .min(crate::sources::MAX_INTERVALS as u64) as usize;
    let mut ints = vec![(0u64, 0u64); n_int];
    for &t in &rec_issue_times {
        ints[((t / interval_ns) as usize).min(n_int - 1)].0 += 1;
    }
    for &t in &rep_issue_times {
        ints[((t / interval_ns) as usize).min(n_int - 1)].1 += 1;
    }
    let rec_c = if stream.latency_known {
        concurrency_per_interval(&rec_scaled_iv, interval_ns, n_int)
    } else {
        vec![(0, 0.0); n_int]
    };
    let rep_c = concurrency_per_interval(&all_rep_iv, interval_ns, n_int);
    info.intervals = ints
        .into_iter()
        .zip(rec_c.into_iter().zip(rep_c))
        .enumerate()
        .map(|(i, ((a, b), (rc, pc)))| ReplayInterval {
            start_s: (i as u64 * interval_ns) as f64 / 1e9,
            duration_s: interval_ns as f64 / 1e9,
            recorded_ios: a,
            replayed_ios: b,
            in_flight: InFlight::of(rc, pc),
        })
        .collect();
    info.map = map;

    let mut res = Results::new(Kind::Replay, command_line);
    let spec = Spec {
        source: Some(stream.source.clone()),
        block_size: Some(stream.block_size),
        sessions: Some(stream.sessions.len() as u32),
        files: stream.inputs.iter().map(|f| f.path.clone()).collect(),
        ..Spec::default()
    };
    for (phase, series, duration_s) in [
        ("recorded", recorded, info.recorded_duration_s),
        ("replay", replayed, info.replayed_duration_s),
    ] {
        let (ops, _span, interval_s, warning) = series.finish();
        let mut run = RunResult {
            name: format!("{phase} ({})", stream.source),
            phase: phase.into(),
            spec: Some(spec.clone()),
            started: started.clone(),
            duration_s,
            interval_s,
            ops,
            ..RunResult::default()
        };
        run.warnings.extend(warning);
        if phase == "recorded" && !stream.latency_known {
            run.warnings.push(format!(
                "the source ({}) holds no latencies: only the replayed side has them",
                stream.source
            ));
        }
        if phase == "replay" {
            run.interrupted = crate::interrupt::interrupted();
            if info.errors > 0 {
                run.counters.insert("errors".into(), info.errors as f64);
            }
        }
        res.runs.push(run);
    }
    if !info.kept_up {
        res.warnings.push(format!(
            "the replay did not keep to the recorded schedule: issue-time error p99 {}, span {:+.2} % \
             of the schedule, at most {} behind",
            crate::units::fmt_ns(info.issue_error.p99_ns as f64),
            info.span_error_pct,
            crate::units::fmt_ns(info.behind_s * 1e9)
        ));
    }
    if info.misplaced > 0 {
        res.warnings.push(format!(
            "{} reads found another offset's stamp in the target: the map or the target is not \
             what the replay expected",
            info.misplaced
        ));
    }
    res.source = Some(crate::results::evidence::SourceInfo {
        format: stream.source.clone(),
        files: stream.inputs.clone(),
    });
    res.replay = Some(info);
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_per_interval_splits_each_io_over_the_intervals_it_spans() {
        // (5, 25) spans three 10 ns intervals; (12, 14) lies in the second; (30, 30) is empty.
        let iv = [(5, 25), (12, 14), (30, 30)];
        let c = concurrency_per_interval(&iv, 10, 4);
        assert_eq!(
            c.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![1, 2, 1, 0],
            "{c:?}"
        );
        let means: Vec<f64> = c.iter().map(|x| x.1).collect();
        assert_eq!(means, vec![0.5, 1.2, 0.5, 0.0]);
        // The parts add up to the whole: mean × length summed is the time in flight.
        let busy: f64 = means.iter().sum::<f64>() * 10.0;
        assert_eq!(busy, iv.iter().map(|x| (x.1 - x.0) as f64).sum::<f64>());
        // An I/O ending exactly at an interval's start is not in flight in it.
        let c = concurrency_per_interval(&[(0, 10), (10, 20)], 10, 2);
        assert_eq!(c, vec![(1, 1.0), (1, 1.0)]);
        // Beyond the last interval counts in it.
        let c = concurrency_per_interval(&[(0, 30)], 10, 2);
        assert_eq!(c, vec![(1, 1.0), (1, 2.0)]);
    }
}
