// SPDX-License-Identifier: MIT OR Apache-2.0
// What every iolens BPF program shares: the process filter user space fills
// (src/bpf/mod.rs: set_process_filter), the per-CPU lost-event counters, the macro that builds
// one handler as a tp_btf and a raw_tp program (user space attaches what the kernel takes), and
// PostgreSQL's wait event read from a server process's memory (watch and profile alike).
// Include after vmlinux.h and the libbpf headers (bpf_core_read.h too), with LOST_SLOTS defined.
#ifndef IOLENS_COMMON_H
#define IOLENS_COMMON_H

#ifndef LOST_SLOTS
#error "define LOST_SLOTS before including common.h"
#endif

// Set by user space before load.
const volatile __u32 watch_all = 0;   // 1: every process; 0: only watch_pids / watch_comms
const volatile __u32 self_tgid = 0;   // iolens itself is never traced

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} watch_pids SEC(".maps");

struct comm_key {
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct comm_key);
	__type(value, __u8);
} watch_comms SEC(".maps");

// One handler body, attached as tp_btf if the kernel takes it, else as a raw tracepoint.
#define HANDLER(tp, body)                                                                  \
	SEC("tp_btf/" #tp)                                                                 \
	int btf_##tp(__u64 *ctx) { body; return 0; }                                       \
	SEC("raw_tp/" #tp)                                                                 \
	int raw_##tp(__u64 *ctx) { body; return 0; }

static __always_inline void count_lost_n(__u32 slot, __u64 k)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &slot);
	if (n)
		*n += k;
}

static __always_inline void count_lost(__u32 slot)
{
	count_lost_n(slot, 1);
}

// Whether process `tgid`, named `key` (read only when filtering by name), is watched.
static __always_inline int watched(__u32 tgid, const struct comm_key *key)
{
	if (tgid == 0 || tgid == self_tgid)
		return 0;
	if (watch_all)
		return 1;
	if (bpf_map_lookup_elem(&watch_pids, &tgid))
		return 1;
	return bpf_map_lookup_elem(&watch_comms, key) != 0;
}

// PostgreSQL server processes (filled by user space: src/watch/pgwait.rs, src/profile.rs):
// tgid -> where the process publishes its state. `wait`: user address of the global
// `uint32 *my_wait_event_info`, through which it publishes its current wait event (the value
// pg_stat_activity shows). `status`: user address of the global `PgBackendStatus *MyBEEntry`
// (0: unknown), whose entry's field at `state_off` is its transaction state
// (pg_stat_activity.state; offsets and values per version: src/watch/pg_backend_state.rs).
// Read in the process's own context (a syscall, the switch-out of the thread leaving the CPU,
// a sample).
struct pg_ptrs {
	__u64 wait;
	__u64 status;
	__u32 state_off;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pg_ptrs);
} pg_wait_ptr SEC(".maps");

// A wait event that could not be read (its page not resident: no fault is taken here).
#define WAIT_UNREADABLE 0xffffffffu
// Client:ClientRead, the same value in every version (13 to 18): a backend waiting for its
// client. Whether that is idleness or database time depends on its transaction state.
#define PG_CLIENT_READ 0x06000000u
// Set in a Client:ClientRead value whose backend's transaction state was read: the state is
// in bits 16..22 (wait_event_info never uses bits 16..23: class << 24 | 16-bit event id).
#define PG_STATE_READ 0x00800000u
// The bits of that state.
#define PG_STATE_BITS 0x007f0000u

// The current process's wait_event_info: 0 when it is not a PostgreSQL process or waits on
// nothing. A Client:ClientRead carries the backend's transaction state (PG_STATE_READ), read
// at the same instant from its status entry: waiting for its client inside a transaction
// (holding its locks) is database time, outside one it is idle.
//
// `*entry`: the status entry's address, where it was read to learn the state (a value with
// PG_STATE_READ always had it read), else 0.
static __always_inline __u32 wait_event_entry(__u64 wait, __u64 status, __u32 state_off,
					      __u64 *entry)
{
	__u64 ptr = 0;
	__u32 info = 0;
	*entry = 0;
	if (bpf_probe_read_user(&ptr, sizeof(ptr), (const void *)wait) || !ptr)
		return WAIT_UNREADABLE;
	if (bpf_probe_read_user(&info, sizeof(info), (const void *)ptr))
		return WAIT_UNREADABLE;
	if (info == PG_CLIENT_READ && status) {
		__u64 e = 0;
		__s32 state = -1;
		if (!bpf_probe_read_user(&e, sizeof(e), (const void *)status) && e) {
			*entry = e;
			if (!bpf_probe_read_user(&state, sizeof(state), (const void *)(e + state_off)) &&
			    state >= 0 && state < 0x80)
				info |= PG_STATE_READ | ((__u32)state << 16);
		}
	}
	return info;
}

static __always_inline __u32 wait_event_at(__u64 wait, __u64 status, __u32 state_off)
{
	__u64 entry;
	return wait_event_entry(wait, status, state_off, &entry);
}

static __always_inline __u32 current_wait_event(__u32 tgid)
{
	struct pg_ptrs *p = bpf_map_lookup_elem(&pg_wait_ptr, &tgid);
	if (!p)
		return 0;
	return wait_event_at(p->wait, p->status, p->state_off);
}

// A PostgreSQL process forks its backends and workers without exec: a child process inherits
// its parent's address space, so its wait-event pointer (and status entry pointer) is at the
// same address, known from its first instant however short its life.
static __always_inline void pg_wait_ptr_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ctgid == ptgid || ctgid != BPF_CORE_READ(child, pid))
		return;
	struct pg_ptrs *addr = bpf_map_lookup_elem(&pg_wait_ptr, &ptgid);
	if (addr) {
		struct pg_ptrs a = *addr;
		bpf_map_update_elem(&pg_wait_ptr, &ctgid, &a, BPF_ANY);
	}
}

#endif
