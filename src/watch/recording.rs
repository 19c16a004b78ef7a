//! Everything a watch has recorded so far: each event of the ring in the interval of its
//! completion (ops' histograms, the live view's layers, processes, threads' time, PostgreSQL's
//! wait events, files), the parts under each wait event the kernel summed (`wait_parts`), and at
//! the end each thread's parts the kernel had not yet written.

use super::*;
use layout::{
    RqState, WaitKey, WaitSum, TASK_ACC, TASK_EMIT, TASK_LAST, TASK_LEN, TASK_N_DEV, TASK_N_QUEUE,
    TASK_OFF, TASK_ON, TASK_SEG, TASK_SEG_WEV, TASK_SPAN_FLAGS, TASK_SPAN_OFF, TASK_SPAN_RUNQ,
    TASK_SPAN_WEV, TASK_STATE, TASK_SYS_TS, TASK_TAG, TASK_TAG_WEV, TASK_TGID, TASK_WEV,
};
use rustc_hash::FxHashMap;

/// Parts in ns as a wall-time split in seconds.
fn split_of(parts: &[u64; PARTS]) -> WallSplit {
    let mut w = WallSplit::default();
    for (dst, &ns) in w.parts_mut().into_iter().zip(parts.iter()) {
        *dst = ns as f64 / 1e9;
    }
    w
}

/// Everything recorded so far.
pub(super) struct Recording {
    pub(super) interval_ns: u64,
    pub(super) start_ns: u64,
    /// The slots the intervals are kept in (older ones rolled up): every `k` below, and the
    /// index of every span and op's interval, is a slot of it.
    pub(super) grid: grid::Grid,
    /// (run, op) → histograms; run "" is the syscall run, "cpu" the CPU run, else a device.
    /// Looked up at every record (several per event): hashed (Fx), not a B-tree of strings
    /// (whose comparisons were a quarter of the watcher's CPU under pgbench); `assemble` orders.
    pub(super) ops: FxHashMap<String, FxHashMap<&'static str, OpAcc>>,
    pub(super) spans: Vec<WatchSpan>,
    /// By (pid, tid); tid 0 when threads are not asked for.
    pub(super) processes: BTreeMap<(u32, u32), WatchProcess>,
    pub(super) threads: bool,
    /// The live view's layers (indexed by [`Layer`]), all recorded so that keys can switch.
    pub(super) layers: [OpAcc; 3],
    /// Whether the layers are recorded (the live view is drawn: [`WatchOptions::live`]).
    pub(super) live: bool,
    /// Device number → its name and the name of its run of the watched processes' requests
    /// (shared, so that recording an event allocates nothing).
    pub(super) devices: HashMap<u32, (Rc<str>, Rc<str>)>,
    /// The first failure to record (a histogram that would not decode): ends the watch.
    pub(super) failed: Option<anyhow::Error>,
    /// Every watched thread seen, by tid.
    pub(super) thread_time: BTreeMap<u32, WatchThread>,
    /// The watch's end (`u64::MAX` while it runs): parts past it are cut off.
    pub(super) end_ns: u64,
    /// PostgreSQL's wait events of the watched server processes.
    pub(super) pg: pgwait::PgWaitAcc,
    /// The files the traced syscalls were on.
    pub(super) files: relations::FileTable,
    /// The query ids sampled (with a DSN).
    pub(super) queries: queries::QueryAcc,
    /// `--prometheus`: the cumulative metrics.
    pub(super) metrics: Option<metrics::LiveMetrics>,
    /// The server process of iolens' own sampling connection: never counted.
    pub(super) own: Option<u32>,
    /// `--record`: each positioned I/O syscall.
    pub(super) io_log: Option<io_record::IoLog>,
    /// The rows of exited processes and threads, folded by name (see [`Recording::fold_exited`]).
    pub(super) folded: Folded,
    /// The processes' names as the kernel side reported them.
    pub(super) names: filter::Names,
    /// Processes whose first thread the probes saw (or whose main thread was renamed) since
    /// the last look at PostgreSQL's processes (`PgWaitAcc::refresh_some`).
    pub(super) announced: Vec<u32>,
    /// The newest base interval an event fell in, and the base interval before which every
    /// interval was closed by [`Recording::close_behind`].
    pub(super) newest: u64,
    pub(super) closed_behind: u64,
}

/// Base intervals an event may lag the newest one seen and still find its interval open
/// while the ring is drained (see [`Recording::close_behind`]).
const OPEN_BEHIND: u64 = 4;

/// Most rows of the per-process and per-thread tables before the exited ones are folded.
pub(super) const TABLE_ROWS: usize = 512;
/// Most names of folded rows; later names fold into `other`.
const FOLDED_NAMES: usize = 256;

/// The rows of processes and threads that exited during a long watch, one per name.
#[derive(Default)]
pub(super) struct Folded {
    pub(super) processes: BTreeMap<String, WatchProcess>,
    pub(super) threads: BTreeMap<String, WatchThread>,
    /// Processes and threads seen exited at the last look: folded if still so at the next.
    gone: std::collections::HashSet<u32>,
    /// Table rows past which the next look folds.
    at: usize,
}

impl Folded {
    /// The key of a folded row of name `comm` (past [`FOLDED_NAMES`] names: `other`).
    fn name(names: usize, has: bool, comm: &str) -> String {
        if has || names < FOLDED_NAMES {
            comm.to_string()
        } else {
            "other".to_string()
        }
    }
}

/// The comm and PostgreSQL role (empty: not a server process) of process `tgid`, for labels.
fn who(pg: &pgwait::PgWaitAcc, names: &filter::Names, tgid: u32) -> (String, String) {
    let comm = names.comm(tgid).unwrap_or_else(|| "(exited)".into());
    let role = if pg.is_pg(tgid) {
        pg.role_of(tgid)
    } else {
        String::new()
    };
    (comm, role)
}

impl Recording {
    /// The slot of the interval of time `ts`.
    pub(super) fn interval_of(&mut self, ts: u64) -> usize {
        let base = ts.saturating_sub(self.start_ns) / self.interval_ns;
        self.newest = self.newest.max(base);
        self.grid.slot(base)
    }

    /// Close the intervals more than [`OPEN_BEHIND`] base intervals behind the newest event's,
    /// while the ring is drained. The watch's loop closes the intervals it has shown after
    /// each drain; when it fell behind (starved of CPU on a loaded host), one drain holds the
    /// events of every interval it missed, and each would stay open (decoded: up to 270 KB an
    /// op) to the drain's end: memory grew with the length of the stall and the allocator
    /// kept it (a watch stopped for 1 s at 10 ms intervals under 1,700 forking readers a
    /// second kept 6 MiB more to its end, 10 s 58 MiB). Counts are exact either way: a late
    /// event reopens its interval.
    pub(super) fn close_behind(&mut self) {
        if self.newest < self.closed_behind + 2 * OPEN_BEHIND {
            return;
        }
        let base = self.newest - OPEN_BEHIND;
        let slot = self.grid.slot(base);
        self.close_before(slot);
        self.closed_behind = base;
    }

    /// Slot `k`'s start and length in seconds.
    pub(super) fn span_s(&self, k: usize) -> (f64, f64) {
        let (first, width) = self.grid.bounds(k);
        let len = self.interval_ns as f64 / 1e9;
        (first as f64 * len, width as f64 * len)
    }

    /// Slot `k`'s span (`k` a slot of the grid).
    pub(super) fn span(&mut self, k: usize) -> &mut WatchSpan {
        while self.spans.len() <= k {
            let (start_s, duration_s) = self.span_s(self.spans.len());
            self.spans.push(WatchSpan {
                start_s,
                duration_s,
                ..Default::default()
            });
        }
        &mut self.spans[k]
    }

    /// Roll up the older slots now that the slots before `done` are finished (closed): the
    /// spans and every op's intervals merge as the grid's do.
    pub(super) fn roll_up(&mut self, done: usize) {
        for i in self.grid.roll(done) {
            if i + 1 < self.spans.len() {
                let next = self.spans.remove(i + 1);
                self.spans[i].absorb(&next);
            }
            if i < self.spans.len() {
                // Its bounds as the grid has them (not summed floats).
                let (start_s, duration_s) = self.span_s(i);
                (self.spans[i].start_s, self.spans[i].duration_s) = (start_s, duration_s);
            }
            let mut failed = None;
            for acc in self
                .ops
                .values_mut()
                .flat_map(|m| m.values_mut())
                .chain(self.layers.iter_mut())
            {
                if let Err(e) = acc.merge_next(i) {
                    failed.get_or_insert(e);
                }
            }
            if let Some(e) = failed {
                self.keep_failure(Err(e));
            }
        }
    }

    /// Record one event of op `op` of run `run` ("" syscalls, "cpu", else a device) in
    /// interval `k`; allocates only the first time a run is seen.
    pub(super) fn record(
        &mut self,
        run: &str,
        op: &'static str,
        k: usize,
        ns: u64,
        bytes: u64,
        err: bool,
    ) {
        let ops = match self.ops.get_mut(run) {
            Some(ops) => ops,
            None => self.ops.entry(run.to_string()).or_default(),
        };
        let r = ops
            .entry(op)
            .or_insert_with(OpAcc::new)
            .record(k, ns, bytes, err);
        self.keep_failure(r);
    }

    pub(super) fn keep_failure(&mut self, r: Result<()>) {
        if let Err(e) = r {
            self.failed.get_or_insert(e);
        }
    }

    /// Encode every interval before `k`: the watch has moved past them.
    pub(super) fn close_before(&mut self, k: usize) {
        for acc in self
            .ops
            .values_mut()
            .flat_map(|m| m.values_mut())
            .chain(self.layers.iter_mut())
        {
            acc.close_before(k);
        }
    }

    /// The device's name, and the name of its run of the watched processes' requests.
    pub(super) fn device_names(&mut self, dev: u32) -> (Rc<str>, Rc<str>) {
        self.devices
            .entry(dev)
            .or_insert_with(|| {
                let name = filter::device_name(dev >> 20, dev & 0xfffff);
                let mine = format!("{name} (watched)");
                (Rc::from(name), Rc::from(mine))
            })
            .clone()
    }

    /// A thread's parts over `[from, ts]`: spread over the intervals it covers in proportion
    /// to their overlap (a record is one phase of the thread, on CPU or off it), cut to the
    /// watch's start and end.
    pub(super) fn add_parts(
        &mut self,
        tgid: u32,
        tid: u32,
        from: u64,
        ts: u64,
        parts: &[u64; PARTS],
    ) {
        let total = ts.saturating_sub(from);
        let lo = from.max(self.start_ns);
        let hi = ts.min(self.end_ns);
        if hi < lo || (hi == lo && total > 0) {
            return;
        }
        let thread = self.thread_time.entry(tid).or_insert_with(|| WatchThread {
            pid: tgid,
            tid,
            comm: filter::thread_comm(tgid, tid)
                .or_else(|| self.names.comm(tgid))
                .unwrap_or_else(|| "(exited)".into()),
            ..Default::default()
        });
        let part = |k_from: u64, k_to: u64| -> WallSplit {
            let f = if total == 0 {
                1.0
            } else {
                (k_to - k_from) as f64 / total as f64
            };
            let mut w = WallSplit::default();
            for (dst, &ns) in w.parts_mut().into_iter().zip(parts.iter()) {
                *dst = ns as f64 * f / 1e9;
            }
            w
        };
        thread.watched_s += (hi - lo) as f64 / 1e9;
        let whole = part(lo, hi);
        thread.wall.add(&whole);
        self.pg.wall(tgid, &whole);
        let (k0, k1) = (self.interval_of(lo), self.interval_of(hi.max(lo + 1) - 1));
        for k in k0..=k1 {
            let (first, width) = self.grid.bounds(k);
            let a = (self.start_ns + first * self.interval_ns).max(lo);
            let b = (self.start_ns + (first + width) * self.interval_ns).min(hi);
            let w = if k0 == k1 { whole } else { part(a, b.max(a)) };
            self.span(k).wall.add(&w);
        }
    }

    /// Read (and delete) the kernel's parts per wait event (`wait_parts`) of the processes
    /// for which `done` is true: none of them adds to them any more (gone, or the watch over).
    pub(super) fn drain_wait_parts(
        &mut self,
        ebpf: &mut aya::Ebpf,
        done: impl Fn(u32) -> bool,
    ) -> Result<()> {
        let mut map: aya::maps::HashMap<&mut MapData, WaitKey, WaitSum> =
            aya::maps::HashMap::try_from(
                ebpf.map_mut("wait_parts")
                    .context("BPF object lacks wait_parts")?,
            )?;
        // A process has an entry per wait event: asked once each.
        let mut is_done: HashMap<u32, bool> = HashMap::new();
        let keys: Vec<WaitKey> = map
            .keys()
            .filter_map(|k| k.ok())
            .filter(|k| {
                Some(k.tgid) != self.own && *is_done.entry(k.tgid).or_insert_with(|| done(k.tgid))
            })
            .collect();
        for k in keys {
            if let Ok(v) = map.get(&k, 0) {
                self.pg.tagged(k.tgid, k.wev, &split_of(&v.parts));
            }
            let _ = map.remove(&k);
        }
        Ok(())
    }

    pub(super) fn add(&mut self, e: &Event, filters: &Filters) {
        if Some(e.tgid) == self.own {
            return;
        }
        if let Some((from, parts)) = &e.parts {
            self.add_parts(e.tgid, e.tid, *from, e.ts, parts);
        }
        if e.kind == EV_NAME {
            if let Some(t) = &e.title {
                self.names.set(e.tgid, t.clone(), e.ts);
                self.announced.push(e.tgid);
            }
            return;
        }
        if e.kind == EV_TITLE {
            self.pg
                .exited(e.tgid, e.a as u32, e.title.as_deref().unwrap_or(""));
            return;
        }
        if e.kind == EV_CPU_ON {
            self.cpu_slice(e);
            return;
        }
        if e.ts < self.start_ns || e.ts > self.end_ns {
            return;
        }
        let k = self.interval_of(e.ts);
        match e.kind {
            EV_SYSCALL => {
                let Some(&(name, _, _)) = SYSCALLS.get((e.sub as usize).wrapping_sub(1)) else {
                    return;
                };
                let error = e.bytes != 0;
                if let Some(log) = self.io_log.as_mut() {
                    let positioned = SYSCALLS[(e.sub - 1) as usize].2;
                    if positioned && e.ino != 0 {
                        let op = (e.sub - 1) as usize;
                        log.syscall(self.start_ns, e.io(error), op, e.fd, &self.names);
                    }
                }
                if e.dev != 0 || self.pg.is_pg(e.tgid) {
                    self.pg.syscall(e.tgid, e.dev, e.a);
                }
                if e.ino != 0 {
                    if let Some(op) = relations::file_op(name) {
                        self.files
                            .syscall(e.tgid, e.fd, e.fdev, e.ino, op, e.a, e.b, e.c, e.d);
                    }
                }
                self.queries.syscall(e.tgid, e.a, e.c);
                if let Some(m) = self.metrics.as_mut() {
                    let (pg, names) = (&self.pg, &self.names);
                    let i = (e.sub - 1) as u16;
                    m.syscall(e.tgid, || who(pg, names, e.tgid), i, name, e.a, e.b, error);
                }
                self.record("", name, k, e.a, e.b, error);
                if !error {
                    self.layer_record(Layer::Syscall, k, e.a);
                }
                let span = self.span(k);
                span.syscalls += 1;
                span.syscall_ns += e.a;
                span.sys_device_ns += e.c;
                span.sys_queue_ns += e.d;
                if e.c + e.d > e.a {
                    span.overcharged += 1;
                }
                let tid = if self.threads { e.tid } else { 0 };
                let names = &self.names;
                let p = self
                    .processes
                    .entry((e.tgid, tid))
                    .or_insert_with(|| WatchProcess {
                        pid: e.tgid,
                        tid: (tid != 0).then_some(tid),
                        comm: names
                            .comm(e.tgid)
                            .or_else(|| filters.only_comm())
                            .unwrap_or_else(|| "(exited)".into()),
                        syscalls: BTreeMap::new(),
                        exited: 0,
                    });
                // Looked up before inserting: no String allocated per event.
                let row = match p.syscalls.get_mut(name) {
                    Some(row) => row,
                    None => p.syscalls.entry(name.to_string()).or_insert([0; 3]),
                };
                row[0] += 1;
                row[1] += e.b;
                row[2] += e.a;
            }
            EV_URING => {
                // Its file is named as a syscall's is; its time (submission to completion) is
                // no thread's: the submitter waits for it, if at all, in its own syscalls.
                let op = match e.sub {
                    1 => relations::FileOp::Read,
                    2 => relations::FileOp::Write,
                    3 => relations::FileOp::Sync,
                    _ => return,
                };
                if let Some(log) = self.io_log.as_mut() {
                    if e.ino != 0 && op != relations::FileOp::Sync {
                        let write = op == relations::FileOp::Write;
                        log.uring(self.start_ns, e.io(e.bytes != 0), write, &self.names);
                    }
                }
                if e.ino != 0 && e.bytes == 0 {
                    self.files.uring(e.tgid, e.fdev, e.ino, op, e.a, e.b);
                }
            }
            EV_BLOCK => {
                if !filters.wants_device(e.dev) {
                    return;
                }
                let (dev, mine) = self.device_names(e.dev);
                let (op, queue_op, device_op) = block_ops(e.sub & 0xffff);
                // The kernel side marks requests a watched process submitted (`watched`).
                let watched = e.sub & BLOCK_WATCHED != 0;
                if let Some(m) = self.metrics.as_mut() {
                    let code = (e.sub & 0xffff).min(4) as u16;
                    m.block(&dev, code, op, watched || filters.all_processes(), e.b, e.a);
                }
                self.record(&dev, queue_op, k, e.b, 0, false);
                self.record(&dev, device_op, k, e.a, e.bytes as u64, false);
                if watched || filters.all_processes() {
                    self.layer_record(Layer::Block, k, e.a);
                }
                if watched && !filters.all_processes() {
                    // The same device, only the requests the watched processes submitted.
                    self.record(&mine, queue_op, k, e.b, 0, false);
                    self.record(&mine, device_op, k, e.a, e.bytes as u64, false);
                }
                if watched {
                    let span = self.span(k);
                    span.block_requests += 1;
                    span.device_ns += e.a;
                    span.queue_ns += e.b;
                    if e.sub & BLOCK_WAITED == 0 {
                        span.bg_requests += 1;
                        span.bg_device_ns += e.a;
                    }
                }
            }
            _ => {}
        }
    }

    /// A cpu event: an on-CPU slice ending at `ts`, and with [`CPU_SPAN`] the off-CPU span that
    /// ended where the slice began, each in the interval of its end, each only inside the watch.
    fn cpu_slice(&mut self, e: &Event) {
        if e.sub & CPU_SPAN != 0 {
            let span = OffSpan {
                end: e.ts.saturating_sub(e.a),
                off: e.c,
                runq: e.d,
                wev: e.dev,
                flags: e.sub,
            };
            self.off_span(e.tgid, &span);
        }
        if e.ts < self.start_ns || e.ts > self.end_ns {
            return;
        }
        let k = self.interval_of(e.ts);
        if self.pg.is_pg(e.tgid) {
            self.pg.on_cpu(e.tgid);
        }
        self.record("cpu", CPU_ON, k, e.a, 0, false);
        self.span(k).oncpu_ns += e.a;
    }

    /// An off-CPU span of a thread of process `tgid`, in the interval of its end.
    fn off_span(&mut self, tgid: u32, s: &OffSpan) {
        if s.end < self.start_ns || s.end > self.end_ns {
            return;
        }
        let k = self.interval_of(s.end);
        // The span's wait event, as PostgreSQL published it when the span began; only its
        // part inside the watch counts.
        let ns = s.off.min(s.end - self.start_ns);
        if ns > 0 && (s.wev != 0 || self.pg.is_pg(tgid)) {
            if let Some(op) = self.pg.off_cpu(tgid, s.wev) {
                if let Some(m) = self.metrics.as_mut() {
                    let (pg, names) = (&self.pg, &self.names);
                    m.pg_wait(tgid, || who(pg, names, tgid), op, ns);
                }
                self.record(PG_RUN, op, k, ns, 0, false);
            }
        }
        self.record("cpu", CPU_OFF, k, s.off, 0, false);
        if s.runq > 0 {
            if let Some(m) = self.metrics.as_mut() {
                let (pg, names) = (&self.pg, &self.names);
                m.runq(tgid, || who(pg, names, tgid), s.runq);
            }
            self.record("cpu", CPU_RUNQ, k, s.runq, 0, false);
            self.layer_record(Layer::Cpu, k, s.runq);
            let span = self.span(k);
            span.runq_ns += s.runq;
            if s.flags & CPU_CONTENDED != 0 {
                span.runq_contended_ns += s.runq;
            }
            if s.flags & (CPU_IN_IO | CPU_CONTENDED) == CPU_IN_IO | CPU_CONTENDED {
                span.runq_io_ns += s.runq;
            }
        }
    }

    pub(super) fn layer_record(&mut self, layer: Layer, k: usize, ns: u64) {
        if !self.live {
            return;
        }
        let r = self.layers[layer as usize].record(k, ns, 0, false);
        self.keep_failure(r);
    }

    /// Keep the per-process and per-thread tables bounded however many processes come and go:
    /// once one holds more than [`TABLE_ROWS`] rows, the rows of processes (threads) seen exited
    /// at two looks in a row (their last events long delivered) are folded into one row per
    /// name (pid 0, `exited` counting them), their sums added. The exited processes' other
    /// per-process sums (PostgreSQL's wait events, files by process) fold alike, into one
    /// stand-in per server, role and session. Called every few hundred ms.
    pub(super) fn fold_exited(&mut self) {
        let f = &mut self.folded;
        if self.processes.len().max(self.thread_time.len()) <= f.at.max(TABLE_ROWS) {
            return;
        }
        let mut gone = std::collections::HashSet::new();
        // Rows of processes (threads) alive now: never folded, so the next look waits for the
        // table to grow well past them.
        let mut alive = 0usize;
        // The processes (not threads) folded: gone, their last events long delivered.
        let mut exited = std::collections::HashSet::new();
        let keys: Vec<(u32, u32)> = self.processes.keys().copied().collect();
        for (pid, tid) in keys {
            let id = if tid != 0 { tid } else { pid };
            if crate::sys::alive(id) {
                alive += 1;
                continue;
            }
            if !f.gone.contains(&id) {
                gone.insert(id);
                continue;
            }
            let Some(p) = self.processes.remove(&(pid, tid)) else {
                continue;
            };
            if tid == 0 || !crate::sys::alive(pid) {
                exited.insert(pid);
            }
            let name = Folded::name(
                f.processes.len(),
                f.processes.contains_key(&p.comm),
                &p.comm,
            );
            let row = f
                .processes
                .entry(name.clone())
                .or_insert_with(|| WatchProcess {
                    pid: 0,
                    tid: None,
                    comm: name,
                    syscalls: BTreeMap::new(),
                    exited: 0,
                });
            row.exited += 1 + p.exited;
            for (sys, v) in p.syscalls {
                let r = row.syscalls.entry(sys).or_insert([0; 3]);
                for (a, b) in r.iter_mut().zip(v) {
                    *a += b;
                }
            }
        }
        let tids: Vec<u32> = self.thread_time.keys().copied().collect();
        let mut alive_threads = 0usize;
        for tid in tids {
            if crate::sys::alive(tid) {
                alive_threads += 1;
                continue;
            }
            if !f.gone.contains(&tid) {
                gone.insert(tid);
                continue;
            }
            let Some(t) = self.thread_time.remove(&tid) else {
                continue;
            };
            if t.pid == tid || !crate::sys::alive(t.pid) {
                exited.insert(t.pid);
            }
            let name = Folded::name(f.threads.len(), f.threads.contains_key(&t.comm), &t.comm);
            let row = f
                .threads
                .entry(name.clone())
                .or_insert_with(|| WatchThread {
                    comm: name,
                    ..Default::default()
                });
            row.exited += 1 + t.exited;
            row.watched_s += t.watched_s;
            row.wall.add(&t.wall);
        }
        f.gone = gone;
        let moved = self.pg.fold_gone(&exited);
        self.files.fold(&moved);
        // No look every few hundred ms over a large table of live processes: the next once the
        // table has grown well past them (exited ones fold at the next look or the one after).
        f.at = 2 * alive.max(alive_threads);
    }
}

/// The part a thread is in (`part_of` in `bpf/watch.bpf.c`).
pub(super) fn part_of(in_syscall: bool, state: u32, n_dev: i32, n_queue: i32) -> usize {
    match (in_syscall, state) {
        (true, 0) => 3,
        (true, 1) => 4,
        (true, _) if n_dev > 0 => 5,
        (true, _) if n_queue > 0 => 6,
        (true, _) => 7,
        (false, 0) => 0,
        (false, 1) => 1,
        (false, _) => 2,
    }
}

/// An off-CPU span of a watched thread (see `CPU_SPAN` in `bpf/watch.bpf.c`): where it ended,
/// its length, its run-queue wait, the wait event it began under, its flags.
pub(super) struct OffSpan {
    pub(super) end: u64,
    pub(super) off: u64,
    pub(super) runq: u64,
    pub(super) wev: u32,
    pub(super) flags: u32,
}

/// A watched thread's state at the end: its parts not yet written to the ring, and the
/// off-CPU span it is in, if any.
pub(super) struct Pending {
    pub(super) tgid: u32,
    pub(super) tid: u32,
    /// Its parts not yet written, over `[from, last]` (inside one interval: see `account` in
    /// `bpf/watch.bpf.c`), and the one part it has been in since, over `[last, to]`.
    pub(super) from: u64,
    pub(super) last: u64,
    pub(super) to: u64,
    pub(super) parts: [u64; PARTS],
    pub(super) tail: [u64; PARTS],
    /// Start of the off-CPU span in progress (0: on CPU or runnable since its last switch-in),
    /// and the wait event it carries.
    pub(super) off_ts: u64,
    pub(super) wev: u32,
    /// The off-CPU span that ended at its last switch-in, not yet written (the kernel writes
    /// it with the slice that follows, at the switch-out).
    pub(super) span: Option<OffSpan>,
    /// Its parts under PostgreSQL wait events not yet written: (event, parts), up to two
    /// (the tagged parts, and the slice since the last observation point, which carries the
    /// event it began under: at the end nothing can change it any more).
    pub(super) tags: Vec<(u32, [u64; PARTS])>,
}

/// Which watched block requests still in the kernel's table (`in_block`) are completions the
/// probes did not see, rather than requests still in flight.
#[derive(Clone, Copy, Debug)]
pub(super) enum Missed {
    /// Every request submitted in the window has completed: the run that submitted them has
    /// ended (iolens' own `--watch`, which loads no syscall probes and so cannot tell which
    /// syscall waited for which request).
    RunEnded,
    /// A request whose syscall has returned (the thread's current syscall entry differs from
    /// the one recorded with the request, or the thread is gone) has completed: a synchronous
    /// syscall returns only after its requests complete (`iolens watch`). Requests no syscall
    /// waits for (readahead, writeback) and those whose syscall still waits are in flight.
    SyscallReturned,
}

/// Remove and count the watched block requests submitted in `[from, to)` (CLOCK_MONOTONIC
/// ns) that are still in the kernel's table and that `rule` says have completed: completions
/// the probes did not see. The kernel counts such a request as lost only when a later request
/// reuses its address (`unseen_counts` in `bpf/watch.bpf.c`); those of a run's or a watch's
/// last moments are counted here. A request is counted only if it is still in the table
/// as listed when it is removed: one completed (and its address reused) between the
/// listing and now was seen. Counted by the requests' target number (`RqState::target`): index
/// 0 those of no target (all of them under `iolens watch`), index t target t's.
pub(super) fn missed_completions(
    ebpf: &mut aya::Ebpf,
    from: u64,
    to: u64,
    rule: Missed,
) -> Result<Vec<u64>> {
    let candidates: Vec<(u64, RqState)> = {
        let in_block: aya::maps::HashMap<&MapData, u64, RqState> = aya::maps::HashMap::try_from(
            ebpf.map("in_block").context("BPF object lacks in_block")?,
        )?;
        let tasks: aya::maps::HashMap<&MapData, u32, [u8; TASK_LEN]> =
            aya::maps::HashMap::try_from(ebpf.map("tasks").context("BPF object lacks tasks")?)?;
        let returned = |st: &RqState| {
            st.sys != 0
                && !tasks.get(&st.tid, 0).ok().is_some_and(|v| {
                    u64::from_ne_bytes(v[TASK_SYS_TS..TASK_SYS_TS + 8].try_into().unwrap_or([0; 8]))
                        == st.sys
                })
        };
        in_block
            .iter()
            .filter_map(|r| r.ok())
            .filter(|(_, st)| st.watched != 0 && st.start >= from && st.start < to)
            .filter(|(_, st)| match rule {
                Missed::RunEnded => true,
                Missed::SyscallReturned => returned(st),
            })
            .collect()
    };
    let mut in_block: aya::maps::HashMap<&mut MapData, u64, RqState> =
        aya::maps::HashMap::try_from(
            ebpf.map_mut("in_block")
                .context("BPF object lacks in_block")?,
        )?;
    let mut n: Vec<u64> = Vec::new();
    for (k, listed) in candidates {
        let still = in_block
            .get(&k, 0)
            .is_ok_and(|st| st.start == listed.start && st.tid == listed.tid);
        if still && in_block.remove(&k).is_ok() {
            let t = listed.target as usize;
            if n.len() <= t {
                n.resize(t + 1, 0);
            }
            n[t] += 1;
        }
    }
    Ok(n)
}

/// Each watched thread's parts not yet written to the ring, up to `end_ns`.
pub(super) fn pending_parts(ebpf: &aya::Ebpf, end_ns: u64) -> Result<Vec<Pending>> {
    let tasks: aya::maps::HashMap<&MapData, u32, [u8; TASK_LEN]> =
        aya::maps::HashMap::try_from(ebpf.map("tasks").context("BPF object lacks tasks")?)?;
    let mut out = Vec::new();
    for item in tasks.iter() {
        let Ok((tid, v)) = item else { continue };
        let u64_at = |o: usize| u64::from_ne_bytes(v[o..o + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |o: usize| u32::from_ne_bytes(v[o..o + 4].try_into().unwrap_or([0; 4]));
        let (last, from) = (u64_at(TASK_LAST), u64_at(TASK_EMIT));
        if from == 0 || from >= end_ns {
            continue;
        }
        let mut parts = [0u64; PARTS];
        for (i, p) in parts.iter_mut().enumerate() {
            *p = u64_at(TASK_ACC + i * 8);
        }
        let parts_at = |o: usize| {
            let mut p = [0u64; PARTS];
            for (i, x) in p.iter_mut().enumerate() {
                *x = u64_at(o + i * 8);
            }
            p
        };
        let mut seg = parts_at(TASK_SEG);
        let mut tail = [0u64; PARTS];
        let last = last.max(from);
        if last < end_ns {
            let p = part_of(
                u64_at(TASK_SYS_TS) != 0,
                u32_at(TASK_STATE),
                u32_at(TASK_N_DEV) as i32,
                u32_at(TASK_N_QUEUE) as i32,
            );
            tail[p] = end_ns - last;
            seg[p] += end_ns - last;
        }
        let tags = [
            (u32_at(TASK_TAG_WEV), parts_at(TASK_TAG)),
            (u32_at(TASK_SEG_WEV), seg),
        ]
        .into_iter()
        .filter(|t| t.0 != 0)
        .collect();
        out.push(Pending {
            tgid: u32_at(TASK_TGID),
            tid,
            from,
            last,
            to: last.max(end_ns),
            parts,
            tail,
            off_ts: u64_at(TASK_OFF),
            wev: u32_at(TASK_WEV),
            span: (u32_at(TASK_SPAN_FLAGS) & CPU_SPAN != 0).then(|| OffSpan {
                end: u64_at(TASK_ON),
                off: u64_at(TASK_SPAN_OFF),
                runq: u64_at(TASK_SPAN_RUNQ),
                wev: u32_at(TASK_SPAN_WEV),
                flags: u32_at(TASK_SPAN_FLAGS),
            }),
            tags,
        });
    }
    Ok(out)
}

impl Recording {
    /// After the end (`end_ns` set, in the kernel too): detach the programs that write the
    /// per-CPU batches, the threads' parts and the parts per wait event, then record whatever
    /// is still in the ring buffer, what the batches still hold, the parts per wait event, each
    /// thread's parts not yet written, and the server processes never seen
    /// (`present_at_start`: pid, wait event). Returns the warnings of what is left out.
    pub(super) fn drain_after_end(
        &mut self,
        ebpf: &mut aya::Ebpf,
        syscalls: &mut super::syscalls::SyscallProbes,
        ring: &mut RingBuf<MapData>,
        filters: &Filters,
        present_at_start: Vec<(u32, u32)>,
        parse_errors: &mut u64,
    ) -> Vec<String> {
        let (start_ns, end_ns) = (self.start_ns, self.end_ns);
        // Detach sched_switch and sys_exit (both write the per-CPU batches to the ring), and
        // the programs that move a thread's parts (to the ring, to `wait_parts`): then whatever
        // is still in the ring buffer, what the batches still hold and the threads' states are
        // what happened before the end, each counted once. Failing that, the measurement so far
        // is still written, with a warning.
        let mut end_warnings = Vec::new();
        // sys_enter first: a syscall entered after sys_exit is gone would count as an exit
        // not seen.
        let frozen_first = syscalls.detach_enter(ebpf);
        let detached =
            bpf::detach_tracepoint(ebpf, "sched_switch").and_then(|()| syscalls.detach_exit(ebpf));
        let frozen = [
            "sched_process_exit",
            "sched_wakeup",
            "sched_wakeup_new",
            "block_io_start",
            "block_rq_insert",
            "block_rq_issue",
            "block_rq_requeue",
            "block_rq_complete",
        ]
        .into_iter()
        .try_for_each(|tp| bpf::detach_tracepoint(ebpf, tp))
        .and(frozen_first);
        if let Err(e) = frozen {
            end_warnings.push(format!(
                "the threads' last parts may be counted twice or not at all: {e}"
            ));
        }
        let mut late = |e: Event| {
            // A parts record written after the end may hold time before it (it is cut).
            // A cpu event after the end may carry a span before it (`cpu_slice` cuts).
            if e.ts <= end_ns || e.parts.is_some() || e.kind == EV_CPU_ON {
                self.add(&e, filters)
            }
        };
        while let Some(item) = ring.next() {
            if !Event::each(&item, &mut late) {
                *parse_errors += 1;
            }
        }
        match detached {
            Err(e) => end_warnings.push(format!(
                "the last syscalls of each CPU (up to {SYS_BATCH} each) are left out: {e}"
            )),
            Ok(()) => {
                let batches = ebpf
                    .map("sys_batches")
                    .context("BPF object lacks sys_batches")
                    .and_then(|m| Ok(PerCpuArray::<&MapData, [u8; BATCH_LEN]>::try_from(m)?))
                    .and_then(|b| Ok(b.get(&0, 0)?));
                match batches {
                    Ok(values) => {
                        for b in values.iter() {
                            if !Event::each(b, &mut late) {
                                *parse_errors += 1;
                            }
                        }
                    }
                    Err(e) => end_warnings.push(format!(
                        "the last syscalls of each CPU (up to {SYS_BATCH} each) are left out: \
                         cannot read them: {e:#}"
                    )),
                }
            }
        }
        // The parts per wait event the kernel summed, all of them now.
        if let Err(e) = self.drain_wait_parts(ebpf, |_| true) {
            end_warnings.push(format!(
                "the time under PostgreSQL wait events is incomplete: {e:#}"
            ));
        }
        // The threads' parts not yet written (each thread's last phase, up to the end).
        match pending_parts(ebpf, end_ns) {
            Ok(pending) => {
                for p in pending {
                    self.add_parts(p.tgid, p.tid, p.from, p.last, &p.parts);
                    if p.to > p.last {
                        self.add_parts(p.tgid, p.tid, p.last, p.to, &p.tail);
                    }
                    for (info, parts) in &p.tags {
                        self.pg.tagged(p.tgid, *info, &split_of(parts));
                    }
                    // On CPU at the end: the span before its slice in progress.
                    if let Some(span) = &p.span {
                        self.off_span(p.tgid, span);
                    }
                    // Off CPU at the end (an idle backend, a session still sleeping): the span
                    // so far, under its wait event.
                    if p.off_ts != 0 && p.off_ts < end_ns && (p.wev != 0 || self.pg.is_pg(p.tgid)) {
                        let from = p.off_ts.max(start_ns);
                        let k = self.interval_of(end_ns - 1);
                        if let Some(op) = self.pg.off_cpu(p.tgid, p.wev) {
                            self.record(PG_RUN, op, k, end_ns - from, 0, false);
                        }
                    }
                }
            }
            Err(e) => end_warnings.push(format!(
                "the watched threads' time since their last switch is left out: {e:#}"
            )),
        }
        // Server processes never seen (no switch, no wakeup, no syscall: asleep for the whole
        // watch, under the event they had at its start) and still there: the whole watch off CPU.
        for (pid, info) in present_at_start {
            if self.thread_time.contains_key(&pid)
                || !std::path::Path::new(&format!("/proc/{pid}")).exists()
            {
                continue;
            }
            let span = end_ns.saturating_sub(start_ns);
            let mut parts = [0u64; PARTS];
            parts[2] = span;
            self.add_parts(pid, pid, start_ns, end_ns, &parts);
            self.pg.tagged(
                pid,
                info,
                &WallSplit {
                    off_cpu_s: span as f64 / 1e9,
                    ..Default::default()
                },
            );
            if let Some(op) = self.pg.off_cpu(pid, info) {
                let k = self.interval_of(end_ns - 1);
                self.record(PG_RUN, op, k, span, 0, false);
            }
        }
        end_warnings
    }
}
