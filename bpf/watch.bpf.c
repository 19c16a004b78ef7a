// SPDX-License-Identifier: MIT OR Apache-2.0
// iolens watch: syscall, block-layer and scheduler probes for watched processes.
//
// Every finished I/O or scheduling interval becomes one fixed-size `struct event`, written to
// a ring buffer in per-CPU batches; user space turns them into per-interval histograms. A
// thread's wall-time parts are summed in its state in the kernel and written once per interval
// it crosses (and at its exit); its parts under each PostgreSQL wait event are summed in the
// kernel map `wait_parts`, read by user space. Nothing is dropped silently: a full ring buffer
// or a full state map increments a counter in `lost`.
//
// Each handler exists twice, as a BTF-typed tracepoint (tp_btf) and as a raw tracepoint; user
// space loads whichever the kernel accepts. Both see the same `u64 *ctx` argument array, and
// every kernel structure is read with BPF_CORE_READ, so one body serves both.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define EV_SYSCALL 1
#define EV_BLOCK 2
// An on-CPU slice and the off-CPU span before it (see CPU_SPAN). 4 was a separate off-CPU
// event, no longer written.
#define EV_CPU_ON 3
// A thread's parts (a `parts_event`): at its exit, and where its time crosses an interval's end.
#define EV_PARTS 5
// An io_uring read, write or sync of a watched process, at its completion (`sub`: URING_*; `a`
// its latency from submission; `b` its bytes; the file in ino/fdev; `dev` the submitter's
// PostgreSQL wait event at submission). The submitter's thread is tgid/tid: the kernel may have
// done the I/O inline or in one of that process's io_uring worker threads (iou-wrk).
#define EV_URING 7
#define URING_READ 1
#define URING_WRITE 2
#define URING_SYNC 3
// A PostgreSQL process's title (`struct title_event`) as it exits: its role and session, for a
// process gone before user space read /proc (a short session). `a`: its parent (the postmaster).
#define EV_TITLE 8
#define TITLE_LEN 128
// A process's name (a `title_event`, `bytes` of the name in `title`): its main thread's, when
// its first thread is first seen and when its main thread is renamed (exec, prctl). Every later
// event of the process is reserved after it, so user space knows the name of a process that
// exited before it read /proc (a short-lived process: its events wait in a batch).
#define EV_NAME 9

#define LOST_RINGBUF 0
#define LOST_SYSCALL_STATE 1
#define LOST_BLOCK_STATE 2
#define LOST_TASK_STATE 3
// Not lost events but requests the block-layer state machine could not follow: counted so
// that a shortfall of completions is never silent.
#define LOST_BLOCK_NO_START 4
#define LOST_BLOCK_ISSUE_NO_START 5
#define LOST_BLOCK_RESTART 6
// A watched process's request whose completion the probe never saw: its entry was still there
// when the same request started again. On the development VM (6.18) the kernel skipped the
// completion program for about 0.3 % of completions, in bursts, without counting a recursion
// miss; user space also counts the entries left at the end (src/watch/own.rs).
#define LOST_BLOCK_UNSEEN_COMPLETION 7
// A watched thread's traced syscall whose exit the probe never saw: the thread entered another
// traced syscall while the first was still marked in progress (the same skipped programs).
#define LOST_SYSCALL_UNSEEN_EXIT 8
// The map of parts per PostgreSQL wait event (`wait_parts`) was full.
#define LOST_WAIT_STATE 9
#define LOST_CAUSES 10
// `--watch` on iolens' own load traces up to MAX_TARGETS targets at once (see `target_disks`).
// The counters in `lost` are kept per target and cause: slot t * LOST_CAUSES + cause, t the
// target's number (1 + its index), t 0 for what is no target's (every count of `iolens watch`).
#define MAX_TARGETS 64
#define LOST_SLOTS (LOST_CAUSES * (1 + MAX_TARGETS))

#define TASK_RUNNING 0

// Syscall and scheduler events are batched per CPU and written to the ring SYS_BATCH at a
// time, when the oldest is SYS_BATCH_NS old, or when the CPU goes idle: see `sys_batches`.
#define SYS_BATCH 16
#define SYS_BATCH_NS 5000000ULL

#include "common.h"

// The scheduler programs run at every switch and wakeup of every thread on the host, the block
// ones at every request, so their first steps must be cheap. Each is built twice, as common.h's
// HANDLER does, but with `btf` set in the tp_btf one: there the tracepoint's arguments are typed
// kernel pointers, read with plain loads (the verifier makes each a fault-safe load) instead of
// one bpf_probe_read_kernel call per field (BPF_CORE_READ), which the raw tracepoint needs.
// `btf` is a constant in each copy, so the other branch is compiled out. Measured on the 2-vCPU
// VM under pgbench (a program on sched_switch, kernel.bpf_stats_enabled): two BPF_CORE_READs of
// `next` cost 115 ns a run, the same two plain loads nothing measurable (docs/pg-watch-overhead.md).
#define HANDLER_BTF(tp, body)                                                              \
	SEC("tp_btf/" #tp)                                                                 \
	int btf_##tp(__u64 *ctx) { const int btf = 1; body; return 0; }                    \
	SEC("raw_tp/" #tp)                                                                 \
	int raw_##tp(__u64 *ctx) { const int btf = 0; body; return 0; }

// Field `f` of kernel object `p` (an argument of the tracepoint, or reached from one).
#define KFIELD(btf, p, f) ((btf) ? (p)->f : BPF_CORE_READ(p, f))


// Set in a block event's `sub` when a watched process submitted the request.
#define BLOCK_WATCHED (1u << 16)
// Set in a block event's `sub` when the request was submitted inside a traced syscall that was
// still waiting when it completed: someone's wait. Watched requests without it are background
// I/O (readahead, writeback, flushes no syscall waited for).
#define BLOCK_WAITED (1u << 17)
// A block event's `sub` carries, in bits TARGET_SHIFT and up, the number of the target (1 + its
// index; see `target_disks`) whose request it was: 0 under `iolens watch`.
#define TARGET_SHIFT 24
// A cpu event (EV_CPU_ON) is one on-CPU slice, written when it ends, and the off-CPU span that
// ended where the slice began, if the switch in was seen (CPU_SPAN in `sub`): one record per
// switch out instead of one at each switch, out and in. Its `sub` flags are the span's:
// Set in a cpu event's `sub`: the thread was inside a traced syscall while it waited.
#define CPU_IN_IO 1u
// Set in a cpu event's `sub`: the CPU it got was running another task, not idle (the wait
// was contention for the CPU, not the time an idle CPU takes to wake).
#define CPU_CONTENDED 2u
// Set in a cpu event's `sub`: it carries the off-CPU span before the slice (in `c`, its
// run-queue wait in `d`, its wait event in `dev`), which ended at `ts - a`.
#define CPU_SPAN 4u

struct event {
	__u32 kind;
	__u32 tgid;
	__u32 tid;
	__u32 sub;  // syscall index; block op | BLOCK_WATCHED; cpu off: CPU_IN_IO | CPU_CONTENDED
	__u64 a;    // syscall latency, block device service, cpu: on-cpu slice
	__u64 b;    // syscall bytes, block host-queue time
	__u64 ts;   // completion time, CLOCK_MONOTONIC ns
	__u32 dev;  // block: disk major << 20 | first_minor; syscall (at entry), cpu span: PostgreSQL wait_event_info
	__u32 bytes; // block: completed bytes; syscall: 1 when it failed
	__u64 c;    // syscall: device time charged to it (the union of its requests'), ns; cpu: off-cpu span
	__u64 d;    // syscall: host-queue time charged to it (none of its requests in the device); cpu: span's run-queue wait
	// Syscall: the file its first argument named at entry (see `file_of`), so user space can
	// name the file (and the PostgreSQL relation) each I/O was on.
	__u64 ino;  // its inode number; 0: no open file under that descriptor
	__u32 fdev; // its filesystem's device, the kernel's s_dev (major << 20 | minor)
	__s32 fd;   // the descriptor (the syscall's first argument)
	// Syscall: its fourth argument, the file offset of pread64/pwrite64/preadv(2)/pwritev(2)
	// (-1: preadv2/pwritev2 at the file's position); user space reads it for those only.
	// io_uring: the offset the read's or write's SQE named (-1: at the file's position).
	__u64 pos;
};
// user space (src/watch/mod.rs, `RawEvent`) checks this layout against the object's BTF.

// Where a watched thread's wall time went, part by part (user space: src/watch/mod.rs,
// `PARTS`). Every instant of a thread's life under watch is in exactly one part, so the parts
// sum to the time accounted: outside a traced I/O syscall on CPU, runnable (waiting for a CPU)
// or otherwise off CPU; inside one on CPU, runnable, or sleeping while one of the requests it
// submitted in this syscall is in the device, else while one is in the host queue, else above
// the block layer (page cache, filesystem, locks).
#define P_CPU 0
#define P_RUNQ 1
#define P_OFF 2
#define P_IO_CPU 3
#define P_IO_RUNQ 4
#define P_IO_DEVICE 5
#define P_IO_QUEUE 6
#define P_IO_ABOVE 7
#define NPARTS 8

#define ST_ON 0
#define ST_RUNQ 1
#define ST_SLEEP 2

// A thread's parts over [from, ts]: written where its time crosses an interval's end (all of
// [from, ts] inside one interval, or one part alone over whole intervals) and at its exit.
struct parts_event {
	struct event e;
	__u64 from;
	__u64 parts[NPARTS];
};

// A process's title: `bytes` of it, read from its argument area (where PostgreSQL writes it).
struct title_event {
	struct event e;
	char title[TITLE_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

// One reservation per batch instead of per event. User space reads what is left in the
// batches once the sys_exit program is detached (src/watch/mod.rs), so none is lost at the end.
struct sys_batch {
	__u32 n;
	__u32 pad;
	__u64 first_ts;
	struct event ev[SYS_BATCH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sys_batch);
} sys_batches SEC(".maps");

// The clock tick (jiffies) at which each CPU's batch's age was last looked at by a switch
// between threads not watched (see on_switch).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} batch_tick SEC(".maps");

// syscall number -> 1 + index in user space's list; 0: not traced.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} syscall_index SEC(".maps");

struct rq_state {
	__u64 start;
	__u64 issue;
	__u32 tgid;
	__u32 tid;
	__u32 watched;
	__u32 target; // the number of the target it is a request of (see `target_of`); 0: none
	// Entry time of the submitter's traced syscall it was submitted in (0: none): the request
	// counts in that syscall's wait only while the same syscall is in progress.
	__u64 sys;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct rq_state);
} in_block SEC(".maps");

// A watched thread: its scheduling, its traced syscall in progress, and its parts. The entry
// stays from the thread's first event until it exits (sched_process_exit); writing in place is
// cheaper than a map update and a delete per syscall (measured with kernel.bpf_stats_enabled).
struct task_state {
	__u64 on_ts;   // switched in
	__u64 off_ts;  // switched out
	__u64 wake_ts; // became runnable (woken, or preempted while running)
	__u64 last;    // the parts are accounted up to here
	__u64 emit_ts; // start of the parts not yet written to the ring (`acc`)
	__u64 bound;   // end of the interval `acc` lies in (0: not yet known; see `account`)
	__u64 sys_ts;  // entry of the traced syscall in progress; 0 outside one
	__u64 sys_dev; // device and host-queue time charged to that syscall so far
	__u64 sys_queue;
	__u32 sys_index;
	__u32 state;   // ST_ON, ST_RUNQ, ST_SLEEP
	__s32 n_dev;   // requests submitted in that syscall: in the device, in the host queue
	__s32 n_queue;
	__u32 tgid;
	// PostgreSQL's wait_event_info (see `pg_wait_ptr`) read when the thread last left the CPU,
	// and when it entered the traced syscall in progress; 0: none, or not a PostgreSQL process.
	__u32 wev;
	__u32 sys_wev;
	__u32 preempted; // switched out while runnable: it resumes where it was
	__u32 tid;
	// Its process's `pg_wait_ptr` entry (where it publishes its wait event; 0: none) as looked
	// up while `pg_gen` was `pg_gen - 1`: looked up again once user space placed others.
	__u32 pg_gen;
	__u64 pg_wait;
	__u64 pg_status;
	__u32 pg_state_off;
	// The last Client:ClientRead value read at an observation point (with its transaction
	// state; 0: none since), and its backend's `st_changecount` then: see `thread_wait_event`.
	__u32 cr_info;
	__s32 cr_cc;
	__u32 pad;
	__u64 acc[NPARTS];
	// The wait event of every slice of wall time (see `observe`): the parts since the last
	// observation point (`seg`, begun under `seg_wev`), and the parts under `tag_wev` not yet
	// added to `wait_parts` (`tag`).
	__u64 seg[NPARTS];
	__u64 tag[NPARTS];
	__u32 seg_wev;
	__u32 tag_wev;
	// The file of the traced syscall in progress (its first argument): see `struct event`.
	__u64 sys_ino;
	__u32 sys_fdev;
	__s32 sys_fd;
	__u64 sys_pos; // its fourth argument (see `struct event`'s `pos`)
	// The off-CPU span that ended at its last switch in (`on_ts`), written with the slice
	// that follows it (see CPU_SPAN): its length, run-queue wait, wait event and flags
	// (0: none pending).
	__u64 span_off;
	__u64 span_runq;
	__u32 span_wev;
	__u32 span_flags;
};
// user space (src/watch/mod.rs, `RawTask`) checks this layout against the object's BTF.

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct task_state);
} tasks SEC(".maps");

// Where a thread's state is made before it is added to `tasks` (see `task_get`).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct task_state);
} task_scratch SEC(".maps");

// Incremented by user space after it adds entries to `pg_wait_ptr`: a thread's copy of its
// process's entry (`task_state.pg_wait`) is good while this has not changed. An entry the kernel
// adds (a forked child's) is added before the child has a state, and one it removes (at the
// process's exit) goes with the process's threads' states.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} pg_gen SEC(".maps");

// The wait event of thread `st` of process `tgid`, which is the current one (as
// `current_wait_event`), without a hash lookup while its process's entry is known.
//
// `held`: the Client:ClientRead value (with its transaction state) it last waited under, if its
// status entry has not changed since (the same `st_changecount`, the first field of
// PgBackendStatus in every version): it has begun no statement and changed no state since that
// wait, so the time since is still that state's (an idle backend woken to flush its statistics,
// catch up with invalidations or answer a signal, then back to waiting for its client, stayed
// idle the whole time). 0 otherwise.
static __always_inline __u32 thread_wait_event(struct task_state *st, __u32 tgid, __u32 *held)
{
	*held = 0;
	__u32 zero = 0;
	__u32 *g = bpf_map_lookup_elem(&pg_gen, &zero);
	__u32 gen = (g ? *g : 0) + 1;
	// Found or not, the lookup is kept until user space places entries (and bumps `pg_gen`
	// after): an entry the kernel adds (a forked child's, in on_fork) is there before the
	// child's first event, so no entry placed since is missed, and a process that is not a
	// server (most of a host's) costs no hash lookup per switch.
	if (st->pg_gen != gen) {
		struct pg_ptrs *p = bpf_map_lookup_elem(&pg_wait_ptr, &tgid);
		st->pg_wait = p ? p->wait : 0;
		st->pg_status = p ? p->status : 0;
		st->pg_state_off = p ? p->state_off : 0;
		st->pg_gen = gen;
	}
	if (!st->pg_wait)
		return 0;
	__u64 entry = 0;
	__u32 info = wait_event_entry(st->pg_wait, st->pg_status, st->pg_state_off, &entry);
	int client = (info & ~PG_STATE_BITS) == (PG_CLIENT_READ | PG_STATE_READ);
	// Most observation points of a busy backend: neither waiting for its client nor since.
	if (!client && !st->cr_info)
		return info;
	__s32 cc = 0;
	// The status entry's address, unless read just now for the Client:ClientRead's state.
	if ((!entry &&
	     (bpf_probe_read_user(&entry, sizeof(entry), (const void *)st->pg_status) || !entry)) ||
	    bpf_probe_read_user(&cc, sizeof(cc), (const void *)entry)) {
		st->cr_info = 0;
		return info;
	}
	if (st->cr_info && cc == st->cr_cc)
		*held = st->cr_info;
	st->cr_info = client ? info : (cc == st->cr_cc ? st->cr_info : 0);
	st->cr_cc = cc;
	return info;
}

// Set by user space (CLOCK_MONOTONIC ns): the watch's start, as soon as the probes are
// attached (a thread first seen being woken, not a new one, was asleep since at least then);
// the length of its intervals (a thread's parts are written where they cross an interval's end,
// `start + k * interval`); its end, once it ends (0 until then): no time is accounted past it.
struct watch_clock {
	__u64 start;
	__u64 interval;
	__u64 end;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct watch_clock);
} watch_clock SEC(".maps");

// A thread's parts under each PostgreSQL wait event, summed by process and event: what
// `observe` tags, added when a thread's tag changes and at its exit; user space reads them
// (those of processes gone, as it goes; all at the end) and deletes what it read.
struct wait_key {
	__u32 tgid;
	__u32 wev;
};

struct wait_sum {
	__u64 parts[NPARTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct wait_key);
	__type(value, struct wait_sum);
} wait_parts SEC(".maps");

// Filled by user space before the watch's start: each PostgreSQL process's wait event as it
// was then (tid -> wait_event_info), read from its memory. A thread first seen being woken was
// asleep since before the watch, under that event (nothing changes it while it sleeps).
// With it, the process's status entry's `st_changecount` read at the same time (see
// `thread_wait_event`).
struct first_wev {
	__u32 info;
	__s32 cc;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct first_wev);
} pg_first_wev SEC(".maps");

static __always_inline __u32 part_of(const struct task_state *st)
{
	if (st->sys_ts) {
		if (st->state == ST_ON)
			return P_IO_CPU;
		if (st->state == ST_RUNQ)
			return P_IO_RUNQ;
		if (st->n_dev > 0)
			return P_IO_DEVICE;
		if (st->n_queue > 0)
			return P_IO_QUEUE;
		return P_IO_ABOVE;
	}
	if (st->state == ST_ON)
		return P_CPU;
	if (st->state == ST_RUNQ)
		return P_RUNQ;
	return P_OFF;
}

static __always_inline void charge(struct task_state *st, __u32 p, __u64 d)
{
	if (p < NPARTS) {
		st->acc[p] += d;
		st->seg[p] += d;
	}
	if (p == P_IO_DEVICE)
		st->sys_dev += d;
	else if (p == P_IO_QUEUE)
		st->sys_queue += d;
}

// Write the thread's parts since the last write, up to `ts`, as one record.
static __always_inline void emit_parts(struct task_state *st, __u64 ts)
{
	struct parts_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RINGBUF);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->e.kind = EV_PARTS;
	e->e.tgid = st->tgid;
	e->e.tid = st->tid;
	e->e.ts = ts;
	e->from = st->emit_ts ? st->emit_ts : ts;
	for (int i = 0; i < NPARTS; i++) {
		e->parts[i] = st->acc[i];
		st->acc[i] = 0;
	}
	st->emit_ts = ts;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

// The first interval end after `t`: the watch's start itself before it.
static __always_inline __u64 interval_end_after(const struct watch_clock *clk, __u64 t)
{
	if (t < clk->start)
		return clk->start;
	return clk->start + ((t - clk->start) / clk->interval + 1) * clk->interval;
}

// Charge the time since the last account to the part the thread is in. The parts not yet
// written (`acc`, from `emit_ts`) always lie inside one interval: where the time crosses the
// interval's end, they are written up to it; the one part the thread was in over the whole
// intervals after it (a long sleep) in a second record; the rest goes on. So every record is
// either inside one interval or one part alone, and user space splits none by guesswork. No
// time is accounted past the watch's end.
static __always_inline void account(struct task_state *st, __u64 now)
{
	__u32 zero = 0;
	struct watch_clock *clk = bpf_map_lookup_elem(&watch_clock, &zero);
	if (clk && clk->end && now > clk->end)
		now = clk->end;
	if (st->last && now > st->last) {
		__u32 p = part_of(st);
		if (clk && clk->start && clk->interval) {
			if (!st->bound)
				st->bound = interval_end_after(clk, st->emit_ts ? st->emit_ts : st->last);
			if (now > st->bound) {
				__u64 b = st->bound;
				if (st->last < b) {
					charge(st, p, b - st->last);
					st->last = b;
				}
				emit_parts(st, st->last);
				// The interval `now` is in begins at `k`; whole intervals between: one part.
				__u64 k = clk->start + (now - clk->start) / clk->interval * clk->interval;
				if (k > st->last) {
					charge(st, p, k - st->last);
					st->last = k;
					emit_parts(st, k);
				}
				st->bound = interval_end_after(clk, st->last);
			}
		}
		charge(st, p, now - st->last);
	}
	if (now > st->last)
		st->last = now;
}

// Add the parts under the tagged wait event to `wait_parts`.
static __always_inline void flush_tag(struct task_state *st)
{
	if (!st->tag_wev)
		return;
	struct wait_key key = { .tgid = st->tgid, .wev = st->tag_wev };
	struct wait_sum *v = bpf_map_lookup_elem(&wait_parts, &key);
	if (!v) {
		struct wait_sum zero = {};
		long err = bpf_map_update_elem(&wait_parts, &key, &zero, BPF_NOEXIST);
		if (err && err != -17 /* EEXIST */)
			count_lost(LOST_WAIT_STATE);
		v = bpf_map_lookup_elem(&wait_parts, &key);
	}
	for (int i = 0; i < NPARTS; i++) {
		// Atomic: another thread of the process may add to the same event on another CPU.
		if (v && st->tag[i])
			__sync_fetch_and_add(&v->parts[i], st->tag[i]);
		st->tag[i] = 0;
	}
	st->tag_wev = 0;
}

// An observation point of a PostgreSQL process's wait event (a traced syscall's entry and exit,
// a switch out and in): the slice since the last one is closed. PostgreSQL sets a wait event
// just before the call that blocks and clears it just after (pgstat_report_wait_start/end around
// each read, write, fsync and sleep), so a slice carries the event only when it began under it
// and `end_wev` (the event now) is the same; a slice between a wait's end and the next wait's
// start carries none. `next_wev` is the event the next slice begins under: the one read here at
// a syscall entry or switch-out; none after a syscall's exit or a wakeup from sleep (the wait
// ended with its call, and after a preemption outside a traced syscall, see on_switch); the
// same inside a traced syscall. Time off CPU cannot
// change the event: a span from a switch-out to the switch-in carries the event read at the
// switch-out, run-queue wait after the wakeup included.
//
// `held` (see `thread_wait_event`): the backend waits on nothing now, but its state has not
// changed since its last Client:ClientRead, that value: a slice that carries no event carries
// that one, and so does the next.
static __always_inline void observe(struct task_state *st, __u64 now, __u32 end_wev,
				    __u32 next_wev, __u32 held)
{
	account(st, now);
	__u32 ev = st->seg_wev == end_wev ? end_wev : 0;
	if (!ev)
		ev = held;
	if (held && !next_wev)
		next_wev = held;
	if (ev) {
		if (st->tag_wev != ev) {
			flush_tag(st);
			st->tag_wev = ev;
		}
		for (int i = 0; i < NPARTS; i++)
			st->tag[i] += st->seg[i];
	}
	for (int i = 0; i < NPARTS; i++)
		st->seg[i] = 0;
	st->seg_wev = next_wev;
}

// PF_EXITING in task_struct.flags: the thread is in do_exit.
#define PF_EXITING_FLAG 0x00000004

static __always_inline void emit_name(__u32 tgid, __u32 tid, const char *comm, __u64 now);

// The state of thread `tid` (task `p`), created when first seen at `now`: in `state`, accounted
// from `from`. Created only where none exists (BPF_NOEXIST): another CPU may create the same
// thread's state at the same moment (its wakeup while it enters a syscall), and neither may
// erase the other's. Never created for a thread that is exiting: its state was written and
// removed at sched_process_exit, and a preemption on its way out (frequent on a saturated host)
// would create one its last switch (TASK_DEAD, not followed) never ends: it would count as on
// CPU to the end of the watch (measured: two of four pgbench backends, 1.5 s each).
// The fields a new thread state begins with (every other is zero).
static __always_inline void task_init(struct task_state *st, __u32 state, __u64 from, __u32 tgid,
				      __u32 tid, __u32 wev)
{
	st->last = from;
	st->emit_ts = from;
	st->state = state;
	st->tgid = tgid;
	st->tid = tid;
	st->wev = wev;
	st->seg_wev = wev;
}

static __always_inline struct task_state *task_get(struct task_struct *p, __u32 tgid, __u32 tid,
						   __u32 state, __u64 from, __u64 now, __u32 wev)
{
	struct task_state *st = bpf_map_lookup_elem(&tasks, &tid);
	if (st)
		return st;
	if (BPF_CORE_READ(p, flags) & PF_EXITING_FLAG)
		return 0;
	// Built in this CPU's scratch slot, not on the stack (512 bytes for the whole program).
	// A program run in an interrupt on this CPU (a wakeup) may build another thread's state
	// in the same slot meanwhile; it sets the same fields as this one (every other is zero in
	// both), so if they are not this thread's after the copy into the map (which runs with
	// interrupts off), the copy is set right.
	__u32 zero = 0;
	struct task_state *fresh = bpf_map_lookup_elem(&task_scratch, &zero);
	if (!fresh)
		return 0;
	__builtin_memset(fresh, 0, sizeof(*fresh));
	task_init(fresh, state, from, tgid, tid, wev);
	long err = bpf_map_update_elem(&tasks, &tid, fresh, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST */)
		count_lost(LOST_TASK_STATE);
	st = bpf_map_lookup_elem(&tasks, &tid);
	if (!err) {
		if (st && (fresh->tid != tid || fresh->tgid != tgid || fresh->last != from ||
			   fresh->emit_ts != from || fresh->state != state || fresh->wev != wev ||
			   fresh->seg_wev != wev))
			task_init(st, state, from, tgid, tid, wev);
		struct task_struct *leader = BPF_CORE_READ(p, group_leader);
		emit_name(tgid, tid, leader->comm, now);
	}
	return st;
}

// A process is matched by its name: its main thread's (the group leader's), so that threads
// that renamed themselves are watched with their process.
static __always_inline void process_comm(struct task_struct *t, struct comm_key *key)
{
	struct task_struct *leader = BPF_CORE_READ(t, group_leader);
	bpf_probe_read_kernel(key->comm, sizeof(key->comm), &leader->comm);
}

// Each process's verdict (watched or not), cached: most programs run for processes that are
// not watched (a compiler's syscalls and switches on a shared host), and the full test reads
// the group leader's name and looks it up in two hash maps (measured: see the commit that added
// this). Slot tgid % VERDICT_SLOTS holds tgid << 32 | VERDICT_KNOWN | watched, written in one
// 8-byte store; another process in the same slot just recomputes. A slot is valid as long as
// the process's name: cleared when a process is forked (a pid reused), recomputed when its main
// thread is renamed (exec, prctl): see on_fork, on_rename. The filter itself is set before the
// programs are attached and never changes.
#define VERDICT_SLOTS 65536
#define VERDICT_KNOWN 2ULL

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, VERDICT_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} verdicts SEC(".maps");

static __always_inline __u64 *verdict_slot(__u32 tgid)
{
	__u32 slot = tgid & (VERDICT_SLOTS - 1);
	return bpf_map_lookup_elem(&verdicts, &slot);
}

// Whether process `tgid`, of which `t` is a thread, is watched.
static __always_inline int task_tgid_watched(struct task_struct *t, __u32 tgid)
{
	if (tgid == 0 || tgid == self_tgid)
		return 0;
	if (watch_all)
		return 1;
	__u64 *v = verdict_slot(tgid);
	if (v) {
		__u64 known = *v;
		if ((known >> 32) == tgid && (known & VERDICT_KNOWN))
			return known & 1;
	}
	struct comm_key key = {};
	process_comm(t, &key);
	int w = watched(tgid, &key);
	if (v)
		*v = ((__u64)tgid << 32) | VERDICT_KNOWN | (w ? 1 : 0);
	return w;
}

static __always_inline int current_watched(__u32 tgid)
{
	if (watch_all)
		return tgid != 0 && tgid != self_tgid;
	return task_tgid_watched((struct task_struct *)bpf_get_current_task(), tgid);
}

static __always_inline void fill(struct event *e, __u32 kind, __u32 tgid, __u32 tid, __u32 sub,
				 __u64 a, __u64 b, __u64 ts, __u32 dev, __u32 bytes)
{
	e->kind = kind;
	e->tgid = tgid;
	e->tid = tid;
	e->sub = sub;
	e->a = a;
	e->b = b;
	e->ts = ts;
	e->dev = dev;
	e->bytes = bytes;
	e->c = 0;
	e->d = 0;
	e->ino = 0;
	e->fdev = 0;
	e->fd = -1;
	e->pos = ~0ULL;
}

// The file open under descriptor `fd` in the current process: its inode number and its
// filesystem's device (0, 0 when none). Read at a syscall's entry, in the process's context,
// so a descriptor closed and reused later cannot name another file. `btf`: the current task is
// read through its BTF-typed pointer (bpf_get_current_task_btf, Linux 5.11), with plain loads
// down to the descriptor table instead of four bpf_probe_read_kernel calls; the per-syscall
// trace events' programs do, the raw sys_enter fallback does not (an older kernel).
static __always_inline void file_of(__s32 fd, __u64 *ino, __u32 *dev, const int btf)
{
	*ino = 0;
	*dev = 0;
	if (fd < 0)
		return;
	struct fdtable *fdt;
	if (btf) {
		fdt = bpf_get_current_task_btf()->files->fdt;
	} else {
		struct task_struct *t = (struct task_struct *)bpf_get_current_task();
		fdt = BPF_CORE_READ(t, files, fdt);
	}
	if (!fdt || (__u32)fd >= KFIELD(btf, fdt, max_fds))
		return;
	struct file **fds = KFIELD(btf, fdt, fd);
	struct file *f = 0;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return;
	struct inode *in = BPF_CORE_READ(f, f_inode);
	if (!in)
		return;
	*ino = BPF_CORE_READ(in, i_ino);
	*dev = BPF_CORE_READ(in, i_sb, s_dev);
}

// Counter `cause` of target number `target` (0: no target's) in `lost`.
static __always_inline void count_lost_of(__u32 cause, __u32 target)
{
	count_lost(target * LOST_CAUSES + cause);
}

// An event whose loss counts against target number `target` (0: none).
static __always_inline void emit(__u32 kind, __u32 tgid, __u32 tid, __u32 sub, __u64 a, __u64 b,
				 __u64 ts, __u32 dev, __u32 bytes, __u32 target)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost_of(LOST_RINGBUF, target);
		return;
	}
	fill(e, kind, tgid, tid, sub, a, b, ts, dev, bytes);
	// No wakeup per record (on a VM each is an inter-processor interrupt): user space polls
	// the ring every few milliseconds.
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* ---------------------------------------------------------------- syscalls */

// A syscall's entry: `nr` its number, `regs` where its arguments are (the raw tracepoint), or
// with `regs` 0 its first and fourth arguments `fd` and `pos` (a per-syscall tracepoint).
static __always_inline void sys_enter_body(__u32 nr, struct pt_regs *regs, __u64 fd, __u64 pos,
					   const int btf)
{
	__u32 *index = bpf_map_lookup_elem(&syscall_index, &nr);
	if (!index || *index == 0)
		return;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (!current_watched(tgid))
		return;
	__u32 tid = (__u32)id;
	__u64 now = bpf_ktime_get_ns();
	struct task_state *cur =
		task_get((struct task_struct *)bpf_get_current_task(), tgid, tid, ST_ON, now, now, 0);
	if (!cur)
		return;
	__u32 held;
	__u32 wev = thread_wait_event(cur, tgid, &held);
	observe(cur, now, wev, wev, held);
	if (cur->sys_ts)
		count_lost(LOST_SYSCALL_UNSEEN_EXIT);
	cur->state = ST_ON;
	cur->sys_index = *index;
	cur->sys_ts = now;
	cur->sys_wev = wev;
	cur->sys_dev = 0;
	cur->sys_queue = 0;
	cur->n_dev = 0;
	cur->n_queue = 0;
	// Every traced syscall but io_submit (an AIO context) and io_getevents takes a file
	// descriptor first; user space keeps the file of those that read or write a file.
	if (regs) {
		fd = PT_REGS_PARM1_CORE_SYSCALL(regs);
		pos = PT_REGS_PARM4_CORE_SYSCALL(regs);
	}
	cur->sys_fd = (__s32)fd;
	file_of(cur->sys_fd, &cur->sys_ino, &cur->sys_fdev, btf);
	cur->sys_pos = pos;
}

// Write this CPU's batch to the ring and empty it.
static __always_inline void flush_sys(struct sys_batch *b)
{
	__u32 n = b->n;
	if (n > SYS_BATCH)
		n = SYS_BATCH;
	// Only the events held: the header (16 bytes) and n events.
	__u64 size = 16 + (__u64)n * sizeof(struct event);
	// The verifier bounds `size` loosely: say the bound outright.
	if (size > sizeof(*b))
		size = sizeof(*b);
	if (bpf_ringbuf_output(&events, b, size, BPF_RB_NO_WAKEUP))
		count_lost_n(LOST_RINGBUF, n);
	b->n = 0;
}

// This CPU's batch and the slot of its next event (filled by the caller, then `batch_commit`).
static __always_inline struct event *batch_slot(struct sys_batch **bp, __u64 now)
{
	__u32 zero = 0;
	struct sys_batch *b = bpf_map_lookup_elem(&sys_batches, &zero);
	*bp = b;
	if (!b)
		return 0;
	__u32 n = b->n;
	if (n >= SYS_BATCH)
		n = 0;
	if (n == 0)
		b->first_ts = now;
	b->n = n;
	return &b->ev[n];
}

static __always_inline void batch_commit(struct sys_batch *b, __u64 now)
{
	__u32 n = b->n + 1;
	b->n = n;
	if (n < SYS_BATCH && now - b->first_ts < SYS_BATCH_NS)
		return;
	flush_sys(b);
}

static __always_inline void emit_sys(__u32 tgid, __u32 tid, __u32 index, __u64 lat, __u64 bytes,
				     __u64 now, __u32 error, __u64 dev, __u64 queue, __u32 wev,
				     const struct task_state *st)
{
	struct sys_batch *b;
	struct event *e = batch_slot(&b, now);
	if (!e)
		return;
	// A syscall event's `dev` carries the wait event at its entry.
	fill(e, EV_SYSCALL, tgid, tid, index, lat, bytes, now, wev, error);
	e->c = dev;
	e->d = queue;
	e->ino = st->sys_ino;
	e->fdev = st->sys_fdev;
	e->fd = st->sys_fd;
	e->pos = st->sys_pos;
	batch_commit(b, now);
}

static __always_inline void sys_exit_body(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	// The cached verdict first: an array slot, cheaper than the hash lookup below for the
	// processes not watched (most syscalls on a shared host).
	if (!current_watched(id >> 32))
		return;
	struct task_state *st = bpf_map_lookup_elem(&tasks, &tid);
	if (!st || st->sys_ts == 0)
		return;
	__u64 now = bpf_ktime_get_ns();
	// Inside the kernel the event cannot change; PostgreSQL clears it just after the call.
	observe(st, now, st->seg_wev, 0, 0);
	__u64 ts = st->sys_ts;
	__u32 index = st->sys_index;
	__u64 dev = st->sys_dev, queue = st->sys_queue;
	st->sys_ts = 0;
	st->n_dev = 0;
	st->n_queue = 0;
	emit_sys(id >> 32, tid, index, now - ts, ret > 0 ? (__u64)ret : 0, now, ret < 0 ? 1 : 0, dev,
		 queue, st->sys_wev, st);
}

// Two ways to see the traced syscalls (user space picks one: src/watch/mod.rs, `SyscallProbes`).
//
// The raw tracepoints sys_enter and sys_exit run for every syscall of every process on the
// host (a shared host makes ~150 per pgbench transaction, nearly all neither traced nor
// watched): each costs a BPF program run, even one that returns at once.
HANDLER(sys_enter, sys_enter_body((__u32)ctx[1], (struct pt_regs *)ctx[0], 0, 0, 0))
HANDLER(sys_exit, sys_exit_body((long)ctx[1]))

// The per-syscall tracepoints (syscalls:sys_enter_pread64, syscalls:sys_exit_pread64, ...),
// one program attached to each traced syscall's event through perf: the kernel runs it only for
// that syscall (a bit test for the others). Their record (the event's `format` in tracefs):
// the common header, the syscall's number, then its arguments, or its return value.
struct sc_enter_args {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__u64 args[6];
};

struct sc_exit_args {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__s64 ret;
};

// The kernel refuses a program that reads past a syscall's arguments (the record of fsync has
// one): this one reads the fourth, for the syscalls that have four or more.
SEC("tracepoint/syscalls/sys_enter_pos")
int sc_enter_pos(struct sc_enter_args *ctx)
{
	sys_enter_body((__u32)ctx->nr, 0, ctx->args[0], ctx->args[3], 1);
	return 0;
}

// The first argument only (fsync, fdatasync, io_submit).
SEC("tracepoint/syscalls/sys_enter_fd")
int sc_enter_fd(struct sc_enter_args *ctx)
{
	sys_enter_body((__u32)ctx->nr, 0, ctx->args[0], 0, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit")
int sc_exit(struct sc_exit_args *ctx)
{
	sys_exit_body(ctx->ret);
	return 0;
}

/* ---------------------------------------------------------------- io_uring */

// An io_uring request of a watched process on a file, from its submission: who submitted it
// (PostgreSQL 18 with io_method=io_uring: the backend), when, and under which wait event.
struct uring_req {
	__u64 ts;
	// The file offset a read or write names (-1: at the file's position), for `watch --record`.
	__u64 pos;
	__u32 tgid;
	__u32 tid;
	__u32 op;
	__u32 wev;
};

// Keyed by the request (`struct io_kiocb *`), from its submission to its completion. LRU: a
// request cancelled without a completion ages out instead of filling the map.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct uring_req);
} uring_reqs SEC(".maps");

static __always_inline __u32 uring_op(__u8 opcode)
{
	switch (opcode) {
	case 1:  // IORING_OP_READV
	case 4:  // IORING_OP_READ_FIXED
	case 22: // IORING_OP_READ
	case 60: // IORING_OP_READV_FIXED
		return URING_READ;
	case 2:  // IORING_OP_WRITEV
	case 5:  // IORING_OP_WRITE_FIXED
	case 23: // IORING_OP_WRITE
	case 61: // IORING_OP_WRITEV_FIXED
		return URING_WRITE;
	case 3:  // IORING_OP_FSYNC
		return URING_SYNC;
	}
	return 0;
}

// io_uring_submit_req(req): in the submitting task's context.
static __always_inline void on_uring_submit(struct io_kiocb *req)
{
	__u32 op = uring_op(BPF_CORE_READ(req, opcode));
	if (!op)
		return;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (!current_watched(tgid))
		return;
	struct uring_req r = {
		.ts = bpf_ktime_get_ns(), .pos = ~0ULL, .tgid = tgid, .tid = (__u32)id, .op = op,
		.wev = current_wait_event(tgid)
	};
	// The request is prepared before this tracepoint: a read's or write's `struct io_rw`, whose
	// first member is its `struct kiocb`, starts the request (`io_kiocb.cmd`), and its ki_pos
	// holds the SQE's offset.
	if (op != URING_SYNC)
		r.pos = (__u64)BPF_CORE_READ((struct kiocb *)req, ki_pos);
	__u64 key = (__u64)req;
	bpf_map_update_elem(&uring_reqs, &key, &r, BPF_ANY);
}

// io_uring_complete(ctx, req, cqe): the request's completion is posted (by whichever task
// reaps it); its file is still held.
static __always_inline void on_uring_complete(void *vreq)
{
	__u64 key = (__u64)vreq;
	struct uring_req *r = bpf_map_lookup_elem(&uring_reqs, &key);
	if (!r)
		return;
	struct uring_req req = *r;
	bpf_map_delete_elem(&uring_reqs, &key);
	struct io_kiocb *k = vreq;
	__s32 res = BPF_CORE_READ(k, cqe.res);
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RINGBUF);
		return;
	}
	__u64 now = bpf_ktime_get_ns();
	fill(e, EV_URING, req.tgid, req.tid, req.op, now - req.ts, res > 0 ? (__u64)res : 0, now,
	     req.wev, res < 0 ? 1 : 0);
	e->pos = req.pos;
	struct file *f = BPF_CORE_READ(k, file);
	if (f) {
		struct inode *in = BPF_CORE_READ(f, f_inode);
		if (in) {
			e->ino = BPF_CORE_READ(in, i_ino);
			e->fdev = BPF_CORE_READ(in, i_sb, s_dev);
		}
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

HANDLER(io_uring_submit_req, on_uring_submit((struct io_kiocb *)ctx[0]))
HANDLER(io_uring_complete, on_uring_complete((void *)ctx[1]))

/* ------------------------------------------------------------- block layer */

// For `--watch` on iolens' own load: the CLOCK_MONOTONIC time (ns) from which the run being
// measured began. A request whose completion the probe missed counts as lost only if it
// started then or later: one of this process's requests from before (the scratch file's fill,
// a warm-up, an earlier step) belongs to no run being measured. Left 0 by `iolens watch`.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} count_from SEC(".maps");

// For `--watch` on iolens' own load: its targets, each by its number t (1 + its index, at most
// MAX_TARGETS), and what of their disks is theirs. `target_disks` holds each target's disk
// (major << 20 | minor, as `struct event`'s `dev`): with `count` 0 every request (and merged bio)
// on the disk is target `target`'s (a device, or a file whose blocks could not be mapped: then
// no other target is on that disk); else the disk's targets are files whose extents are
// `extents[first .. first + count)`, sorted, disjoint [start, end) sector ranges, each naming its
// file's target. Requests of the process outside them (its binary's pages read back after
// reclaim, another file, another disk) are none of the run's. One copy of the probes serves
// every target of a run; the programs that follow a request keep its target, so one target's
// requests (and their completions missed) are never another's. `own_targets` 0 (`iolens
// watch`): no target filter, every request of the watched processes.
#define MAX_EXTENTS 1024
#define ALL_EXTENTS (MAX_TARGETS * MAX_EXTENTS)
const volatile __u32 own_targets = 0;

struct extent {
	__u64 start;
	__u64 end;
	__u32 target;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ALL_EXTENTS);
	__type(key, __u32);
	__type(value, struct extent);
} extents SEC(".maps");

struct target_disk {
	__u32 target;
	__u32 first;
	__u32 count;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct target_disk);
} target_disks SEC(".maps");

// The number of the target a request (or bio) on `disk` at `sector` is to (see `target_disks`);
// 0: none of them. With extents, a binary search of the disk's for the last that starts at or
// before `sector`.
static __always_inline __u32 target_of(struct gendisk *disk, __u64 sector)
{
	int major = BPF_CORE_READ(disk, major);
	int minor = BPF_CORE_READ(disk, first_minor);
	__u32 dev = ((__u32)major << 20) | (__u32)minor;
	struct target_disk *d = bpf_map_lookup_elem(&target_disks, &dev);
	if (!d)
		return 0;
	if (d->count == 0)
		return d->target;
	__u32 lo = d->first, n = d->count;
	if (n > ALL_EXTENTS)
		n = ALL_EXTENTS;
	__u32 hi = lo + n;
	// [lo, hi) holds the answer; 17 halvings cover ALL_EXTENTS.
	for (int i = 0; i < 17 && hi - lo > 1; i++) {
		__u32 mid = lo + (hi - lo) / 2;
		struct extent *e = bpf_map_lookup_elem(&extents, &mid);
		if (!e)
			return 0;
		if (e->start <= sector)
			lo = mid;
		else
			hi = mid;
	}
	struct extent *e = bpf_map_lookup_elem(&extents, &lo);
	return e && sector >= e->start && sector < e->end ? e->target : 0;
}

static __always_inline int unseen_counts(const struct rq_state *old)
{
	__u32 zero = 0;
	__u64 *from = bpf_map_lookup_elem(&count_from, &zero);
	return old->watched && (!from || old->start >= *from);
}

// The thread whose syscall waits for request `st` (if still the same syscall): its requests
// in the host queue and in the device change by `dq` and `dd` at `now`.
static __always_inline void rq_waiter_moves(struct rq_state *st, __u64 now, int dq, int dd)
{
	if (!st->sys)
		return;
	__u32 tid = st->tid;
	struct task_state *t = bpf_map_lookup_elem(&tasks, &tid);
	if (!t || t->sys_ts != st->sys)
		return;
	account(t, now);
	t->n_queue += dq;
	t->n_dev += dd;
	if (t->n_queue < 0)
		t->n_queue = 0;
	if (t->n_dev < 0)
		t->n_dev = 0;
}

static __always_inline void rq_start(struct request *rq)
{
	__u64 key = (__u64)rq;
	__u64 id = bpf_get_current_pid_tgid();
	struct rq_state st = { .start = bpf_ktime_get_ns(), .tgid = id >> 32, .tid = (__u32)id };
	st.watched = current_watched(st.tgid);
	if (st.watched && own_targets) {
		st.target = target_of(BPF_CORE_READ(rq, q, disk), BPF_CORE_READ(rq, __sector));
		st.watched = st.target != 0;
	}
	if (st.watched) {
		// Submitted inside a traced syscall: that syscall waits for it.
		struct task_state *t = bpf_map_lookup_elem(&tasks, &st.tid);
		if (t && t->sys_ts) {
			account(t, st.start);
			t->n_queue++;
			st.sys = t->sys_ts;
		}
	}
	// The usual case, one map operation: no entry under this address.
	long err = bpf_map_update_elem(&in_block, &key, &st, BPF_NOEXIST);
	if (err == 0)
		return;
	if (err != -17 /* EEXIST */) {
		count_lost_of(LOST_BLOCK_STATE, st.target);
		return;
	}
	// A start begins a new life of the request: what is stored under the same address
	// belongs to an earlier request whose completion was not seen.
	struct rq_state *old = bpf_map_lookup_elem(&in_block, &key);
	if (old && unseen_counts(old))
		count_lost_of(LOST_BLOCK_UNSEEN_COMPLETION, old->target);
	if (old)
		rq_waiter_moves(old, bpf_ktime_get_ns(), -(old->issue ? 0 : 1), -(old->issue ? 1 : 0));
	if (bpf_map_update_elem(&in_block, &key, &st, BPF_ANY))
		count_lost_of(LOST_BLOCK_STATE, st.target);
}

static __always_inline void rq_issue(struct request *rq)
{
	__u64 key = (__u64)rq;
	__u64 now = bpf_ktime_get_ns();
	struct rq_state *st = bpf_map_lookup_elem(&in_block, &key);
	if (st && st->issue == 0) {
		st->issue = now;
		rq_waiter_moves(st, now, -1, 1);
		return;
	}
	if (st)
		rq_waiter_moves(st, now, 0, -1);
	// Issued without a start we saw (flush sequences, requests issued straight away), or an
	// entry left by a request whose completion we missed (a requeue clears `issue` first, see
	// rq_requeue): the request starts here.
	count_lost(st ? LOST_BLOCK_RESTART : LOST_BLOCK_ISSUE_NO_START);
	if (st && unseen_counts(st))
		count_lost_of(LOST_BLOCK_UNSEEN_COMPLETION, st->target);
	__u64 id = bpf_get_current_pid_tgid();
	struct rq_state fresh = { .start = now, .issue = now, .tgid = id >> 32, .tid = (__u32)id };
	// Whoever issues a request whose start was not seen need not be who submitted it (a
	// watched thread running the dispatch queue issues other processes' requests): only a
	// whole-host watch attributes it to the issuer.
	fresh.watched = watch_all && current_watched(fresh.tgid);
	if (bpf_map_update_elem(&in_block, &key, &fresh, BPF_ANY))
		count_lost(LOST_BLOCK_STATE);
}

static __always_inline void rq_requeue(struct request *rq)
{
	__u64 key = (__u64)rq;
	struct rq_state *st = bpf_map_lookup_elem(&in_block, &key);
	// Back in the queue: host queue time goes on, attribution stays with the submitter.
	if (st && st->issue) {
		st->issue = 0;
		rq_waiter_moves(st, bpf_ktime_get_ns(), 1, -1);
	}
}

static __always_inline void rq_complete(struct request *rq, __u32 nr_bytes, const int btf)
{
	__u64 key = (__u64)rq;
	struct rq_state *st = bpf_map_lookup_elem(&in_block, &key);
	if (!st) {
		// Started before we attached, or a completion path we do not follow.
		count_lost(LOST_BLOCK_NO_START);
		return;
	}
	if (own_targets && !st->watched) {
		// iolens' own load: another process's request, or not to a target (read by no one).
		bpf_map_delete_elem(&in_block, &key);
		return;
	}
	__u64 now = bpf_ktime_get_ns();
	__u64 issue = st->issue ? st->issue : now;
	__u32 op = KFIELD(btf, rq, cmd_flags) & 0xff;
	struct gendisk *disk = btf ? rq->q->disk : BPF_CORE_READ(rq, q, disk);
	int major = KFIELD(btf, disk, major);
	int minor = KFIELD(btf, disk, first_minor);
	__u32 dev = ((__u32)major << 20) | (__u32)minor;
	if (st->watched)
		op |= BLOCK_WATCHED | (st->target << TARGET_SHIFT);
	if (st->sys) {
		__u32 tid = st->tid;
		struct task_state *t = bpf_map_lookup_elem(&tasks, &tid);
		if (t && t->sys_ts == st->sys) {
			op |= BLOCK_WAITED;
			rq_waiter_moves(st, now, st->issue ? 0 : -1, st->issue ? -1 : 0);
		}
	}
	emit(EV_BLOCK, st->tgid, st->tid, op, now - issue, issue - st->start, now, dev, nr_bytes,
	     st->target);
	bpf_map_delete_elem(&in_block, &key);
}

// A watched process's bio merged into a request already queued (in its plug or the I/O
// scheduler, possibly another process's request): one I/O the block layer sees no request of.
// Counted per target number (slot 0: no target's, all of `iolens watch`).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 + MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u64);
} merges SEC(".maps");

static __always_inline void bio_merge(struct bio *bio)
{
	__u64 id = bpf_get_current_pid_tgid();
	if (!current_watched(id >> 32))
		return;
	__u32 target = 0;
	if (own_targets) {
		target = target_of(BPF_CORE_READ(bio, bi_bdev, bd_disk),
				   BPF_CORE_READ(bio, bi_iter.bi_sector));
		if (!target)
			return;
	}
	__u64 *n = bpf_map_lookup_elem(&merges, &target);
	if (n)
		*n += 1;
}

// The merge tracepoints pass the bio alone (Linux 5.11 and later).
HANDLER(block_bio_backmerge, bio_merge((struct bio *)ctx[0]))
HANDLER(block_bio_frontmerge, bio_merge((struct bio *)ctx[0]))
HANDLER(block_io_start, rq_start((struct request *)ctx[0]))
HANDLER(block_rq_insert, rq_start((struct request *)ctx[0]))
HANDLER(block_rq_issue, rq_issue((struct request *)ctx[0]))
HANDLER(block_rq_requeue, rq_requeue((struct request *)ctx[0]))
HANDLER_BTF(block_rq_complete, rq_complete((struct request *)ctx[0], (__u32)ctx[2], btf))

/* --------------------------------------------------------------- scheduler */

static __always_inline int task_watched(struct task_struct *p, __u32 *tgid, __u32 *tid,
					const int btf)
{
	*tgid = KFIELD(btf, p, tgid);
	*tid = KFIELD(btf, p, pid);
	if (*tid == 0)
		return 0;
	return task_tgid_watched(p, *tgid);
}

static __always_inline void on_wakeup(struct task_struct *p, int is_new, const int btf)
{
	__u32 tgid, tid;
	if (!task_watched(p, &tgid, &tid, btf))
		return;
	__u64 now = bpf_ktime_get_ns();
	// Most wakeups are of a thread already known: one hash lookup (the start's wait event is
	// needed only for a thread first seen here).
	struct task_state *st = bpf_map_lookup_elem(&tasks, &tid);
	if (!st) {
		// A thread that existed before the watch and is woken was asleep since at least
		// its start.
		__u32 zero = 0;
		struct watch_clock *clk = bpf_map_lookup_elem(&watch_clock, &zero);
		__u64 from = !is_new && clk && clk->start && clk->start < now ? clk->start : now;
		struct first_wev *w = 0;
		if (from != now)
			w = bpf_map_lookup_elem(&pg_first_wev, &tid);
		st = task_get(p, tgid, tid, ST_SLEEP, from, now, w ? w->info : 0);
		if (!st)
			return;
		// Its status entry's change count at the start (see `thread_wait_event`): if it is
		// the same at its next observation point, its state has not changed since the start
		// either.
		if (w && !st->cr_info &&
		    (w->info & ~PG_STATE_BITS) == (PG_CLIENT_READ | PG_STATE_READ)) {
			st->cr_info = w->info;
			st->cr_cc = w->cc;
		}
	}
	account(st, now);
	// A thread preempted in a sleeping state is still on the run queue (on_switch): its wait
	// for a CPU began at the preemption, not at this wakeup.
	if (st->state != ST_RUNQ || !st->wake_ts)
		st->wake_ts = now;
	if (st->state != ST_ON)
		st->state = ST_RUNQ;
}

// TASK_DEAD in a switched-out task's state: it will never run again.
#define TASK_DEAD_STATE 0x80

// Thread `st`'s on-CPU slice `slice` ending at `now`, with the off-CPU span before it if one is
// pending (see CPU_SPAN), into this CPU's batch.
static __always_inline void emit_slice(struct task_state *st, __u32 tgid, __u32 tid, __u64 slice,
				       __u64 now)
{
	struct sys_batch *batch;
	struct event *e = batch_slot(&batch, now);
	if (!e)
		return;
	fill(e, EV_CPU_ON, tgid, tid, st->span_flags, slice, 0, now, st->span_wev, 0);
	e->c = st->span_off;
	e->d = st->span_runq;
	st->span_flags = 0;
	batch_commit(batch, now);
}

static __always_inline void on_switch(__u64 *ctx, const int btf)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u32 prev_state = (__u32)ctx[3];
	// A preempted thread stays on the run queue whatever state it had set: preemption can
	// come between setting a sleeping state and calling schedule(), and it runs again without
	// a wakeup. It waits for a CPU, not for an event (the raw tracepoint passes the state as
	// set, so `preempt` must be read; profile.bpf.c does the same).
	int runnable = (__u8)ctx[0] || prev_state == TASK_RUNNING;
	// sched_switch runs in the context of the thread leaving (`prev` is the current task):
	// its ids without reading its task.
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u32 prev_pid = tid;
	// Both sides' verdicts (cached per process) before anything else, and the clock only when
	// either side is watched: a switch between two threads not watched (27 % of the switches
	// under pgbench on the shared VM, more on a host doing other work) costs two verdict slots
	// and `next`'s ids. The first clock read of a switch cost ~100 ns a run there.
	int prev_watched =
		tid != 0 && task_tgid_watched(prev, tgid) && !(prev_state & TASK_DEAD_STATE);
	__u32 next_tgid, next_tid;
	int next_watched = task_watched(next, &next_tgid, &next_tid, btf);
	__u64 now = 0;
	if (prev_watched || next_watched)
		now = bpf_ktime_get_ns();

	if (prev_watched) {
		struct task_state *st = task_get(prev, tgid, tid, ST_ON, now, now, 0);
		if (st) {
			// Its memory is the current one. The off-CPU span it begins carries this wait
			// event.
			__u32 held;
			__u32 wev = thread_wait_event(st, tgid, &held);
			observe(st, now, wev, wev, held);
			emit_slice(st, tgid, tid, st->on_ts ? now - st->on_ts : 0, now);
			st->wev = wev;
			st->preempted = runnable;
			st->on_ts = 0;
			st->off_ts = now;
			st->wake_ts = runnable ? now : 0;
			st->state = runnable ? ST_RUNQ : ST_SLEEP;
		}
	}
	if (next_watched) {
		tgid = next_tgid;
		tid = next_tid;
		struct task_state *st = task_get(next, tgid, tid, ST_RUNQ, now, now, 0);
		if (st) {
			// Back from a sleep, the wait that slept has ended (its call returns). Inside a
			// traced syscall it goes on. Back from a preemption in user space, the process
			// may clear its event at once and set it again later, with no observation point
			// between (a backend preempted just after its wakeup under LWLock:WALWrite runs
			// its next transaction and sleeps under LWLock:WALWrite again): the slice would
			// carry that CPU work as the wait. PostgreSQL sets an event only around a call
			// that blocks, so the slice after a preemption carries none: the preemption's
			// run-queue wait keeps the event read when it began.
			observe(st, now, st->seg_wev, st->sys_ts ? st->seg_wev : 0, 0);
			__u64 runq = 0;
			__u32 flags = 0;
			if (st->off_ts) {
				runq = st->wake_ts && st->wake_ts <= now ? now - st->wake_ts : 0;
				// Waiting for a CPU inside a traced syscall (after its I/O completed)
				// inflates that syscall's latency: the case seed 003 warns about.
				flags = st->sys_ts ? CPU_IN_IO : 0;
				if (prev_pid != 0)
					flags |= CPU_CONTENDED;
			}
			// Written with the slice that begins here, when it ends.
			st->span_off = st->off_ts ? now - st->off_ts : 0;
			st->span_runq = runq;
			st->span_wev = st->off_ts ? st->wev : 0;
			st->span_flags = flags | CPU_SPAN;
			st->wev = 0;
			st->on_ts = now;
			st->off_ts = 0;
			st->wake_ts = 0;
			st->state = ST_ON;
		}
	}
	// A CPU going idle sends its batch out now, and any switch one older than SYS_BATCH_NS,
	// rather than wait for the CPU's next event: the live view is not left without the last
	// events of a burst (user space reads what the batches hold at the end).
	__u32 zero = 0;
	struct sys_batch *batch = bpf_map_lookup_elem(&sys_batches, &zero);
	if (!batch || !batch->n)
		return;
	if (next_tid != 0 && !now) {
		// Neither side watched: the batch's age is looked at once per clock tick on this
		// CPU (jiffies, a plain load), not at every switch. A batch goes out at most one
		// tick later than at SYS_BATCH_NS; a late event still lands in its interval.
		__u64 *tick = bpf_map_lookup_elem(&batch_tick, &zero);
		__u64 j = bpf_jiffies64();
		if (!tick || *tick == j)
			return;
		*tick = j;
		now = bpf_ktime_get_ns();
	}
	if (next_tid == 0 || now - batch->first_ts >= SYS_BATCH_NS)
		flush_sys(batch);
}

// A PostgreSQL process that exits (its main thread, in its own context) writes its title:
// PostgreSQL keeps it in the argument area (/proc/PID/cmdline). Since Linux 6.16 the exit
// tracepoint comes before the address space is released; before, there is no mm here and
// nothing is written (the role is then known only if user space saw the process alive).
static __always_inline void emit_title(struct task_struct *p, __u32 tgid, __u64 now)
{
	if (!bpf_map_lookup_elem(&pg_wait_ptr, &tgid))
		return;
	struct mm_struct *mm = BPF_CORE_READ(p, mm);
	if (!mm)
		return;
	__u64 start = BPF_CORE_READ(mm, arg_start), end = BPF_CORE_READ(mm, arg_end);
	if (!start || end <= start)
		return;
	__u64 n = end - start;
	if (n > TITLE_LEN)
		n = TITLE_LEN;
	struct title_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RINGBUF);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	fill(&e->e, EV_TITLE, tgid, tgid, 0, BPF_CORE_READ(p, real_parent, tgid), 0, now, 0, 0);
	if (bpf_probe_read_user(e->title, n, (const void *)start)) {
		bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
		return;
	}
	e->e.bytes = n;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

// Process `tgid`'s name `comm` (kernel memory; see EV_NAME), from its thread `tid`.
static __always_inline void emit_name(__u32 tgid, __u32 tid, const char *comm, __u64 now)
{
	struct title_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RINGBUF);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	fill(&e->e, EV_NAME, tgid, tid, 0, 0, 0, now, 0, 16);
	bpf_probe_read_kernel_str(e->title, 16, comm);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

// A thread that exits writes its last parts and leaves no state behind.
static __always_inline void on_exit(struct task_struct *p)
{
	__u32 tgid, tid;
	if (!task_watched(p, &tgid, &tid, 0))
		return;
	if (tid == tgid)
		emit_title(p, tgid, bpf_ktime_get_ns());
	struct task_state *st = bpf_map_lookup_elem(&tasks, &tid);
	if (!st)
		return;
	__u64 now = bpf_ktime_get_ns();
	// Its last slice (its switch out, dead, is not followed) and the span before it.
	if (st->on_ts)
		emit_slice(st, tgid, tid, now - st->on_ts, now);
	observe(st, now, st->seg_wev, 0, 0);
	flush_tag(st);
	// Up to where its time was accounted (the watch's end, if it ended before).
	emit_parts(st, st->last);
	bpf_map_delete_elem(&tasks, &tid);
	// The process is gone (its pid may be reused): its wait-event address with it.
	if (tid == tgid)
		bpf_map_delete_elem(&pg_wait_ptr, &tgid);
}

// A PostgreSQL process's children share its wait-event pointer address (common.h). A new
// process has no verdict yet: its pid may be an earlier process's.
static __always_inline void on_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ctgid == BPF_CORE_READ(child, pid)) {
		__u64 *v = verdict_slot(ctgid);
		if (v)
			*v = 0;
	}
	pg_wait_ptr_fork(parent, child);
}

// A thread renamed (exec, prctl PR_SET_NAME), `comm` its new name: a process's main thread's
// name decides whether it is watched, so its verdict is made again with that name.
static __always_inline void on_rename(struct task_struct *t, const char *comm)
{
	__u32 tgid = BPF_CORE_READ(t, tgid);
	if (tgid != BPF_CORE_READ(t, pid))
		return;
	// A watched process's new name (its state exists once it is watched).
	if (bpf_map_lookup_elem(&tasks, &tgid))
		emit_name(tgid, tgid, comm, bpf_ktime_get_ns());
	if (watch_all)
		return;
	__u64 *v = verdict_slot(tgid);
	if (!v)
		return;
	struct comm_key key = {};
	bpf_probe_read_kernel_str(key.comm, sizeof(key.comm), comm);
	int w = watched(tgid, &key);
	*v = ((__u64)tgid << 32) | VERDICT_KNOWN | (w ? 1 : 0);
}

HANDLER(sched_process_exit, on_exit((struct task_struct *)ctx[0]))
HANDLER(sched_process_fork, on_fork((struct task_struct *)ctx[0], (struct task_struct *)ctx[1]))
HANDLER(task_rename, on_rename((struct task_struct *)ctx[0], (const char *)ctx[1]))
HANDLER_BTF(sched_wakeup, on_wakeup((struct task_struct *)ctx[0], 0, btf))
HANDLER_BTF(sched_wakeup_new, on_wakeup((struct task_struct *)ctx[0], 1, btf))
HANDLER_BTF(sched_switch, on_switch(ctx, btf))
