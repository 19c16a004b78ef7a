// SPDX-License-Identifier: MIT OR Apache-2.0
// iolens profile: on-CPU stack sampling and off-CPU stacks of chosen processes.
//
// On CPU: a software cpu-clock perf event on every CPU runs `on_sample` every `period_ns` of CPU
// time; for a chosen process it records the user and kernel stack ids (frame-pointer walks by
// the kernel) in `counts`, one sample weighing `period_ns`.
//
// Off CPU: at sched_switch the thread leaving the CPU (still `current`) has its stacks recorded
// with the time and the reason it left: still runnable (preempted), waiting for I/O (the kernel's
// in_iowait mark, set by io_schedule), or another sleep. sched_wakeup notes when it became
// runnable again; when it is switched back in, the blocked span (switch-out to wake-up) goes to
// its reason and the run-queue span (wake-up to switch-in) to "runnable", both on the same stack.
//
// PostgreSQL: each stack is also keyed by the process's wait event as PostgreSQL publishes it
// (`*my_wait_event_info`, the value pg_stat_activity shows), read in the process's own context at
// the sample and at the switch-out, exactly as bpf/watch.bpf.c reads it; the address comes from
// user space (`pg_wait_ptr`) and is inherited by forked backends.
//
// Processes are matched by name through their group leader's name, so threads that renamed
// themselves are profiled with their process (as `watch --comm` does).
//
// Nothing is dropped silently: a full map or a failed stack walk increments a slot of `lost`.
// Each tracepoint handler exists as tp_btf and as raw_tp; user space attaches what the kernel
// takes (see src/bpf/mod.rs).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define STATE_ON_CPU 0
#define STATE_IO_WAIT 1
#define STATE_SLEEP 2
#define STATE_RUNNABLE 3

#define LOST_COUNTS 0
#define LOST_USER_STACK 1
#define LOST_KERNEL_STACK 2
#define LOST_OFF_STATE 3
#define LOST_SLOTS 4

#define MAX_DEPTH 127

#include "common.h"

// Set by user space before load.
const volatile __u32 period_ns = 10000000;
const volatile __u32 want_off_cpu = 0;

struct prof_key {
	__u32 tgid;
	__s32 user_stack;
	__s32 kernel_stack;
	__u32 state;
	__u32 wev;
	char comm[16];
};

struct prof_weight {
	__u64 count;
	__u64 ns;
};

struct prof_off {
	__u64 ts;
	__u64 wake_ts;
	__s32 user_stack;
	__s32 kernel_stack;
	__u32 state;
	__u32 tgid;
	__u32 wev;
	__u32 pad;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 32768);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, MAX_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct prof_key);
	__type(value, struct prof_weight);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct prof_off);
} off_cpu SEC(".maps");

// Whether task `t` of process `tgid` is profiled: by pid, or by its process's (group leader's)
// name.
static __always_inline int task_watched(struct task_struct *t, __u32 tgid)
{
	struct comm_key key = {};
	if (!watch_all) {
		struct task_struct *leader = BPF_CORE_READ(t, group_leader);
		bpf_probe_read_kernel(key.comm, sizeof(key.comm), &leader->comm);
	}
	return watched(tgid, &key);
}

static __always_inline void add(struct prof_key *k, __u64 count, __u64 ns)
{
	struct prof_weight *w = bpf_map_lookup_elem(&counts, k);
	if (w) {
		__sync_fetch_and_add(&w->count, count);
		__sync_fetch_and_add(&w->ns, ns);
		return;
	}
	struct prof_weight fresh = { .count = count, .ns = ns };
	if (bpf_map_update_elem(&counts, k, &fresh, BPF_NOEXIST)) {
		w = bpf_map_lookup_elem(&counts, k);
		if (w) {
			__sync_fetch_and_add(&w->count, count);
			__sync_fetch_and_add(&w->ns, ns);
		} else {
			count_lost(LOST_COUNTS);
		}
	}
}

/* ---------------------------------------------------------------- on CPU */

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if ((__u32)id == 0)
		return 0;  // idle
	if (!task_watched((struct task_struct *)bpf_get_current_task(), tgid))
		return 0;
	struct prof_key k = {};
	bpf_get_current_comm(k.comm, sizeof(k.comm));
	k.tgid = tgid;
	k.state = STATE_ON_CPU;
	k.wev = current_wait_event(tgid);
	k.kernel_stack = bpf_get_stackid(ctx, &stacks, 0);
	k.user_stack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	if (k.kernel_stack < 0 && k.kernel_stack != -14)  // -EFAULT: sampled in user mode
		count_lost(LOST_KERNEL_STACK);
	if (k.user_stack < 0 && k.user_stack != -14)      // -EFAULT: a kernel thread
		count_lost(LOST_USER_STACK);
	add(&k, 1, period_ns);
	return 0;
}

/* --------------------------------------------------------------- off CPU */

static __always_inline void switch_out(void *ctx, bool preempt, struct task_struct *prev,
				       __u32 prev_state)
{
	__u32 tgid = BPF_CORE_READ(prev, tgid);
	__u32 tid = BPF_CORE_READ(prev, pid);
	if (tid == 0)
		return;
	if (!task_watched(prev, tgid))
		return;
	// An exiting thread's last switch (TASK_DEAD): it never comes back.
	if (prev_state & 0x80) {
		bpf_map_delete_elem(&off_cpu, &tid);
		return;
	}
	struct prof_off s = {};
	bpf_probe_read_kernel(s.comm, sizeof(s.comm), &prev->comm);
	s.ts = bpf_ktime_get_ns();
	s.tgid = tgid;
	// `prev` is current: its own address space.
	s.wev = current_wait_event(tgid);
	if (preempt || (prev_state & 0xff) == 0)
		s.state = STATE_RUNNABLE;
	else if (BPF_CORE_READ_BITFIELD_PROBED(prev, in_iowait))
		s.state = STATE_IO_WAIT;
	else
		s.state = STATE_SLEEP;
	// `prev` is still current here: its stacks are the ones it blocked in.
	s.kernel_stack = bpf_get_stackid(ctx, &stacks, 0);
	s.user_stack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	if (s.kernel_stack < 0)
		count_lost(LOST_KERNEL_STACK);
	if (s.user_stack < 0 && s.user_stack != -14)
		count_lost(LOST_USER_STACK);
	if (s.state == STATE_RUNNABLE)
		s.wake_ts = s.ts;
	if (bpf_map_update_elem(&off_cpu, &tid, &s, BPF_ANY))
		count_lost(LOST_OFF_STATE);
}

static __always_inline void switch_in(struct task_struct *next)
{
	__u32 tid = BPF_CORE_READ(next, pid);
	struct prof_off *s = bpf_map_lookup_elem(&off_cpu, &tid);
	if (!s)
		return;
	__u64 now = bpf_ktime_get_ns();
	struct prof_key k = {};
	k.tgid = s->tgid;
	k.user_stack = s->user_stack;
	k.kernel_stack = s->kernel_stack;
	k.wev = s->wev;
	__builtin_memcpy(k.comm, s->comm, 16);
	__u64 wake = s->wake_ts && s->wake_ts >= s->ts && s->wake_ts <= now ? s->wake_ts : now;
	if (s->state != STATE_RUNNABLE && wake > s->ts) {
		k.state = s->state;
		add(&k, 1, wake - s->ts);
	}
	__u64 runq_from = s->state == STATE_RUNNABLE ? s->ts : wake;
	if (now > runq_from) {
		k.state = STATE_RUNNABLE;
		add(&k, s->state == STATE_RUNNABLE ? 1 : 0, now - runq_from);
	}
	bpf_map_delete_elem(&off_cpu, &tid);
}

static __always_inline void on_switch(void *ctx, __u64 *args)
{
	if (!want_off_cpu)
		return;
	switch_out(ctx, (bool)args[0], (struct task_struct *)args[1], (__u32)args[3]);
	switch_in((struct task_struct *)args[2]);
}

static __always_inline void on_wakeup(struct task_struct *p)
{
	if (!want_off_cpu)
		return;
	__u32 tid = BPF_CORE_READ(p, pid);
	struct prof_off *s = bpf_map_lookup_elem(&off_cpu, &tid);
	if (s && !s->wake_ts)
		s->wake_ts = bpf_ktime_get_ns();
}

// A PostgreSQL process's children share its wait-event pointer address (common.h).
static __always_inline void on_fork(struct task_struct *parent, struct task_struct *child)
{
	pg_wait_ptr_fork(parent, child);
}

// An exited process's pid may be reused: its address goes with it; an exiting thread leaves
// no off-CPU state behind.
static __always_inline void on_exit(struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	__u32 tid = BPF_CORE_READ(p, pid);
	bpf_map_delete_elem(&off_cpu, &tid);
	if (tgid == tid)
		bpf_map_delete_elem(&pg_wait_ptr, &tgid);
}

HANDLER(sched_switch, on_switch(ctx, ctx))
HANDLER(sched_process_fork, on_fork((struct task_struct *)ctx[0], (struct task_struct *)ctx[1]))
HANDLER(sched_process_exit, on_exit((struct task_struct *)ctx[0]))
HANDLER(sched_wakeup, on_wakeup((struct task_struct *)ctx[0]))
