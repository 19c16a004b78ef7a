// SPDX-License-Identifier: MIT OR Apache-2.0
// The floor of syscall tracing on this kernel, for bench/watch-overhead.sh: programs on the
// same raw tracepoints iolens watch uses (sys_enter, sys_exit) that do nothing at all. Whatever
// IOPS a watched run loses with these attached, no syscall tracer built on these tracepoints
// can avoid.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
char LICENSE[] SEC("license") = "Dual MIT/GPL";
SEC("raw_tp/sys_enter")
int floor_enter(void *ctx) { return 0; }
SEC("raw_tp/sys_exit")
int floor_exit(void *ctx) { return 0; }
