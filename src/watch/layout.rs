//! The byte layout of what `bpf/watch.bpf.c` hands to user space: its ring-buffer records
//! (`struct event`, `struct parts_event`, `struct sys_batch`), the per-thread state read at
//! the end (`struct task_state`), the clock user space writes (`struct watch_clock`) and the
//! parts per wait event it reads (`struct wait_key`, `struct wait_sum`). Each is mirrored here as a `#[repr(C)]` struct, and every
//! offset and length user space reads by is derived from the mirror (`offset_of!`, `size_of`),
//! never written by hand; a test reads the same structs' layout from the BTF of the committed
//! object (`src/bpf/obj/watch.bpf.o`, as clang laid them out) and checks that every field the
//! mirrors name is where the C compiler put it, and that the sizes agree: the two cannot drift.

use std::mem::{offset_of, size_of};

/// `struct event`.
#[repr(C)]
#[allow(dead_code)] // read by offset from raw records; the fields name the offsets
pub(super) struct RawEvent {
    pub kind: u32,
    pub tgid: u32,
    pub tid: u32,
    pub sub: u32,
    pub a: u64,
    pub b: u64,
    pub ts: u64,
    pub dev: u32,
    pub bytes: u32,
    pub c: u64,
    pub d: u64,
    pub ino: u64,
    pub fdev: u32,
    pub fd: i32,
    pub pos: u64,
}

/// Parts of a thread's wall time, in the kernel's order (`P_CPU` .. `P_IO_ABOVE`).
pub(super) const PARTS: usize = 8;

/// `struct parts_event`.
#[repr(C)]
#[allow(dead_code)]
pub(super) struct RawParts {
    pub e: RawEvent,
    pub from: u64,
    pub parts: [u64; PARTS],
}

/// Bytes of a title record's title (`TITLE_LEN`).
pub(super) const TITLE: usize = 128;

/// `struct title_event`.
#[repr(C)]
#[allow(dead_code)]
pub(super) struct RawTitle {
    pub e: RawEvent,
    pub title: [u8; TITLE],
}

/// Events in one syscall batch record (`SYS_BATCH`).
pub(super) const SYS_BATCH: usize = 16;

/// `struct sys_batch`.
#[repr(C)]
#[allow(dead_code)]
pub(super) struct RawBatch {
    pub n: u32,
    pub pad: u32,
    pub first_ts: u64,
    pub ev: [RawEvent; SYS_BATCH],
}

/// `struct task_state`.
#[repr(C)]
#[allow(dead_code)]
pub(super) struct RawTask {
    pub on_ts: u64,
    pub off_ts: u64,
    pub wake_ts: u64,
    pub last: u64,
    pub emit_ts: u64,
    pub bound: u64,
    pub sys_ts: u64,
    pub sys_dev: u64,
    pub sys_queue: u64,
    pub sys_index: u32,
    pub state: u32,
    pub n_dev: i32,
    pub n_queue: i32,
    pub tgid: u32,
    pub wev: u32,
    pub sys_wev: u32,
    pub preempted: u32,
    pub tid: u32,
    pub pg_gen: u32,
    pub pg_wait: u64,
    pub pg_status: u64,
    pub pg_state_off: u32,
    pub cr_info: u32,
    pub cr_cc: i32,
    pub pad: u32,
    pub acc: [u64; PARTS],
    pub seg: [u64; PARTS],
    pub tag: [u64; PARTS],
    pub seg_wev: u32,
    pub tag_wev: u32,
    pub sys_ino: u64,
    pub sys_fdev: u32,
    pub sys_fd: i32,
    pub sys_pos: u64,
    pub span_off: u64,
    pub span_runq: u64,
    pub span_wev: u32,
    pub span_flags: u32,
}

/// `struct rq_state`: a block request's state in the kernel's `in_block` table, read at the end
/// of a watch (requests whose completion the probe did not see).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct RqState {
    pub start: u64,
    pub issue: u64,
    pub tgid: u32,
    pub tid: u32,
    pub watched: u32,
    /// The number of the target (1 + its index) of `--watch` on iolens' own load it is a
    /// request to; 0: none (every request under `iolens watch`).
    pub target: u32,
    /// Entry time of the submitter's traced syscall it was submitted in (0: none).
    pub sys: u64,
}

// SAFETY: plain `#[repr(C)]` integers without padding, as the kernel map holds them.
unsafe impl aya::Pod for RqState {}

/// The most targets `--watch` on iolens' own load traces at once (`MAX_TARGETS`).
pub(super) const MAX_TARGETS: usize = 64;
/// The most extent ranges of one target the probes filter by (`MAX_EXTENTS`); a target in more
/// pieces is watched whole-disk.
pub(super) const MAX_EXTENTS: usize = 1024;
/// Where a block event's `sub` carries its target's number (`TARGET_SHIFT`).
pub(super) const TARGET_SHIFT: u32 = 24;
/// Counters of `lost` per target (`LOST_CAUSES`): one per cause.
pub(super) const LOST_PER_TARGET: usize = 10;

/// `struct extent`: one extent range of a target of `--watch` on iolens' own load, in sectors
/// `[start, end)` of its disk, and the target's number (1 + its index).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Extent {
    pub start: u64,
    pub end: u64,
    pub target: u32,
    pub pad: u32,
}

// SAFETY: plain `#[repr(C)]` integers without padding, as the kernel map holds them.
unsafe impl aya::Pod for Extent {}

/// `struct target_disk`: what of a disk is a target's (the value of `target_disks`): all of it
/// target `target`'s (`count` 0), or `extents[first .. first + count)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TargetDisk {
    pub target: u32,
    pub first: u32,
    pub count: u32,
    pub pad: u32,
}

// SAFETY: plain `#[repr(C)]` integers without padding, as the kernel map holds them.
unsafe impl aya::Pod for TargetDisk {}

/// `struct watch_clock`: the watch's start, interval length and end (CLOCK_MONOTONIC ns), which
/// user space writes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct WatchClock {
    pub start: u64,
    pub interval: u64,
    pub end: u64,
}

// SAFETY: plain `#[repr(C)]` integers without padding, as the kernel map holds them.
unsafe impl aya::Pod for WatchClock {}

/// `struct first_wev`: a PostgreSQL process's wait event at the watch's start and its status
/// entry's `st_changecount` (read before it), which user space writes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FirstWev {
    pub info: u32,
    pub cc: i32,
}

// SAFETY: plain `#[repr(C)]` integers without padding, as the kernel map holds them.
unsafe impl aya::Pod for FirstWev {}

/// `struct wait_key`: a process and a PostgreSQL wait event (the key of `wait_parts`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct WaitKey {
    pub tgid: u32,
    pub wev: u32,
}

// SAFETY: as above (4 + 4 bytes).
unsafe impl aya::Pod for WaitKey {}

/// `struct wait_sum`: a process's parts under a wait event, ns.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct WaitSum {
    pub parts: [u64; PARTS],
}

// SAFETY: as above.
unsafe impl aya::Pod for WaitSum {}

/// Bytes of one event record.
pub(super) const EVENT_LEN: usize = size_of::<RawEvent>();
/// Bytes of a parts record: an event, its start, its parts.
pub(super) const PARTS_LEN: usize = size_of::<RawParts>();
/// Bytes of a title record: an event, the title.
pub(super) const TITLE_REC_LEN: usize = size_of::<RawTitle>();
/// Offset of a title record's title.
pub(super) const TITLE_AT: usize = offset_of!(RawTitle, title);
// Records are told apart by their length: a title record's is no other's.
const _: () = assert!(
    TITLE_REC_LEN != PARTS_LEN
        && TITLE_REC_LEN != EVENT_LEN
        && TITLE_REC_LEN != BATCH_LEN
        && !(TITLE_REC_LEN - BATCH_HEADER).is_multiple_of(EVENT_LEN),
    "a title record's length is another record's"
);
/// Bytes of a batch record's header (count, pad, first timestamp; the events it holds follow).
pub(super) const BATCH_HEADER: usize = offset_of!(RawBatch, ev);
/// Bytes of a whole batch, as read from the per-CPU map.
pub(super) const BATCH_LEN: usize = size_of::<RawBatch>();
/// Offset of a parts record's start and parts.
pub(super) const PARTS_FROM: usize = offset_of!(RawParts, from);
pub(super) const PARTS_AT: usize = offset_of!(RawParts, parts);

/// Bytes of `struct task_state`, and the offsets read from it.
pub(super) const TASK_LEN: usize = size_of::<RawTask>();
pub(super) const TASK_ON: usize = offset_of!(RawTask, on_ts);
pub(super) const TASK_OFF: usize = offset_of!(RawTask, off_ts);
pub(super) const TASK_SPAN_OFF: usize = offset_of!(RawTask, span_off);
pub(super) const TASK_SPAN_RUNQ: usize = offset_of!(RawTask, span_runq);
pub(super) const TASK_SPAN_WEV: usize = offset_of!(RawTask, span_wev);
pub(super) const TASK_SPAN_FLAGS: usize = offset_of!(RawTask, span_flags);
pub(super) const TASK_LAST: usize = offset_of!(RawTask, last);
pub(super) const TASK_EMIT: usize = offset_of!(RawTask, emit_ts);
pub(super) const TASK_SYS_TS: usize = offset_of!(RawTask, sys_ts);
pub(super) const TASK_STATE: usize = offset_of!(RawTask, state);
pub(super) const TASK_N_DEV: usize = offset_of!(RawTask, n_dev);
pub(super) const TASK_N_QUEUE: usize = offset_of!(RawTask, n_queue);
pub(super) const TASK_TGID: usize = offset_of!(RawTask, tgid);
pub(super) const TASK_WEV: usize = offset_of!(RawTask, wev);
pub(super) const TASK_ACC: usize = offset_of!(RawTask, acc);
pub(super) const TASK_SEG: usize = offset_of!(RawTask, seg);
pub(super) const TASK_TAG: usize = offset_of!(RawTask, tag);
pub(super) const TASK_SEG_WEV: usize = offset_of!(RawTask, seg_wev);
pub(super) const TASK_TAG_WEV: usize = offset_of!(RawTask, tag_wev);

/// Offsets of `struct event`'s fields.
pub(super) const EV_KIND: usize = offset_of!(RawEvent, kind);
pub(super) const EV_TGID: usize = offset_of!(RawEvent, tgid);
pub(super) const EV_TID: usize = offset_of!(RawEvent, tid);
pub(super) const EV_SUB: usize = offset_of!(RawEvent, sub);
pub(super) const EV_A: usize = offset_of!(RawEvent, a);
pub(super) const EV_B: usize = offset_of!(RawEvent, b);
pub(super) const EV_TS: usize = offset_of!(RawEvent, ts);
pub(super) const EV_DEV: usize = offset_of!(RawEvent, dev);
pub(super) const EV_BYTES: usize = offset_of!(RawEvent, bytes);
pub(super) const EV_C: usize = offset_of!(RawEvent, c);
pub(super) const EV_D: usize = offset_of!(RawEvent, d);
pub(super) const EV_INO: usize = offset_of!(RawEvent, ino);
pub(super) const EV_FDEV: usize = offset_of!(RawEvent, fdev);
pub(super) const EV_FD: usize = offset_of!(RawEvent, fd);
pub(super) const EV_POS: usize = offset_of!(RawEvent, pos);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A struct's size (bytes) and its members' offsets in bits, by name, as BTF records them.
    type Layout = (usize, BTreeMap<String, usize>);

    fn u16_at(d: &[u8], o: usize) -> usize {
        u16::from_le_bytes([d[o], d[o + 1]]) as usize
    }
    fn u32_at(d: &[u8], o: usize) -> usize {
        u32::from_le_bytes(d[o..o + 4].try_into().unwrap()) as usize
    }
    fn u64_at(d: &[u8], o: usize) -> usize {
        u64::from_le_bytes(d[o..o + 8].try_into().unwrap()) as usize
    }

    /// The `.BTF` section of a little-endian ELF64 object.
    fn btf_section(elf: &[u8]) -> &[u8] {
        assert_eq!(&elf[..4], b"\x7fELF", "not an ELF object");
        assert_eq!((elf[4], elf[5]), (2, 1), "not a little-endian ELF64 object");
        let shoff = u64_at(elf, 0x28);
        let (shentsize, shnum, shstrndx) =
            (u16_at(elf, 0x3A), u16_at(elf, 0x3C), u16_at(elf, 0x3E));
        let sh = |i: usize| shoff + i * shentsize;
        let names = u64_at(elf, sh(shstrndx) + 0x18);
        for i in 0..shnum {
            let name_at = names + u32_at(elf, sh(i));
            let end = elf[name_at..].iter().position(|&b| b == 0).unwrap();
            if &elf[name_at..name_at + end] == b".BTF" {
                let (off, size) = (u64_at(elf, sh(i) + 0x18), u64_at(elf, sh(i) + 0x20));
                return &elf[off..off + size];
            }
        }
        panic!("the object has no .BTF section");
    }

    /// Every named struct of a BTF blob (kernel `Documentation/bpf/btf.rst`).
    fn btf_structs(btf: &[u8]) -> BTreeMap<String, Layout> {
        assert_eq!(u16_at(btf, 0), 0xEB9F, "bad BTF magic");
        let hdr_len = u32_at(btf, 4);
        let (type_off, type_len) = (u32_at(btf, 8), u32_at(btf, 12));
        let str_off = u32_at(btf, 16);
        let strs = &btf[hdr_len + str_off..];
        let name = |off: usize| {
            let end = strs[off..].iter().position(|&b| b == 0).unwrap();
            String::from_utf8_lossy(&strs[off..off + end]).into_owned()
        };
        let types = &btf[hdr_len + type_off..hdr_len + type_off + type_len];
        let mut out = BTreeMap::new();
        let mut at = 0;
        while at < types.len() {
            let (name_off, info, size) = (
                u32_at(types, at),
                u32_at(types, at + 4),
                u32_at(types, at + 8),
            );
            let (vlen, kind, bitfields) = (info & 0xffff, (info >> 24) & 0x1f, info >> 31 == 1);
            at += 12;
            let extra = match kind {
                1 | 14 | 17 => 4,          // int, var, decl tag
                3 => 12,                   // array
                4 | 5 => 12 * vlen,        // struct, union
                6 | 13 => 8 * vlen,        // enum, func proto
                15 | 19 => 12 * vlen,      // datasec, enum64
                2 | 7..=12 | 16 | 18 => 0, // ptr, fwd, typedef, qualifiers, func, float, tag
                k => panic!("unknown BTF kind {k}"),
            };
            if kind == 4 && name_off != 0 {
                let mut members = BTreeMap::new();
                for m in 0..vlen {
                    let o = at + 12 * m;
                    let bits = u32_at(types, o + 8);
                    let bits = if bitfields { bits & 0xff_ffff } else { bits };
                    members.insert(name(u32_at(types, o)), bits);
                }
                out.insert(name(name_off), (size, members));
            }
            at += extra;
        }
        out
    }

    #[test]
    fn rust_mirrors_match_the_bpf_objects_structs() {
        let structs = btf_structs(btf_section(crate::bpf::WATCH_OBJECT));
        let check = |c: &str, size: usize, fields: &[(&str, usize)]| {
            let (c_size, members) = structs
                .get(c)
                .unwrap_or_else(|| panic!("struct {c} not in the object's BTF"));
            assert_eq!(*c_size, size, "size of struct {c}: C {c_size}, Rust {size}");
            // Every C member is mirrored, at the same offset.
            let names: Vec<&str> = fields.iter().map(|f| f.0).collect();
            for (m, off) in members {
                let rust = fields.iter().find(|f| f.0 == m);
                assert!(
                    rust.is_some(),
                    "struct {c}.{m} is not mirrored in Rust ({names:?})"
                );
                assert_eq!(rust.unwrap().1 * 8, *off, "offset (bits) of struct {c}.{m}");
            }
            assert_eq!(members.len(), fields.len(), "members of struct {c}");
        };
        macro_rules! fields {
            ($t:ty: $($f:ident),*) => { &[$((stringify!($f), offset_of!($t, $f))),*] };
        }
        check(
            "event",
            EVENT_LEN,
            fields!(RawEvent: kind, tgid, tid, sub, a, b, ts, dev, bytes, c, d, ino, fdev, fd, pos),
        );
        // clang emits BTF only for types a map or a program names: `struct parts_event` is
        // written through a ring-buffer reservation, so it is checked from its source, whose
        // members after an event (its size checked above, a multiple of 8) have no padding.
        let src = include_str!("../../bpf/watch.bpf.c");
        // The members of `struct NAME` in the source, each trimmed.
        let members = |name: &str| -> Vec<&str> {
            src.split(&format!("struct {name} {{"))
                .nth(1)
                .and_then(|b| b.split("};").next())
                .unwrap_or_else(|| panic!("struct {name} in bpf/watch.bpf.c"))
                .split(';')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .collect()
        };
        assert_eq!(
            members("parts_event"),
            ["struct event e", "__u64 from", "__u64 parts[NPARTS]"],
            "struct parts_event changed: change RawParts with it"
        );
        assert!(src.contains(&format!("#define NPARTS {PARTS}\n")));
        for (name, v) in [
            ("MAX_TARGETS", MAX_TARGETS),
            ("MAX_EXTENTS", MAX_EXTENTS),
            ("TARGET_SHIFT", TARGET_SHIFT as usize),
            ("LOST_CAUSES", LOST_PER_TARGET),
        ] {
            assert!(src.contains(&format!("#define {name} {v}\n")), "{name}");
        }
        assert_eq!(super::super::LOST_CAUSES.len(), LOST_PER_TARGET);
        // The same for `struct title_event`, and its length is no other record's.
        assert_eq!(
            members("title_event"),
            ["struct event e", "char title[TITLE_LEN]"],
            "struct title_event changed: change RawTitle with it"
        );
        assert!(src.contains(&format!("#define TITLE_LEN {TITLE}\n")));
        assert_eq!((TITLE_AT, TITLE_REC_LEN), (EVENT_LEN, EVENT_LEN + TITLE));

        assert_eq!(EVENT_LEN % 8, 0);
        assert_eq!((PARTS_FROM, PARTS_AT), (EVENT_LEN, EVENT_LEN + 8));
        assert_eq!(PARTS_LEN, EVENT_LEN + 8 + 8 * PARTS);
        check(
            "sys_batch",
            BATCH_LEN,
            fields!(RawBatch: n, pad, first_ts, ev),
        );
        check(
            "task_state",
            TASK_LEN,
            fields!(RawTask: on_ts, off_ts, wake_ts, last, emit_ts, bound, sys_ts, sys_dev,
                sys_queue, sys_index, state, n_dev, n_queue, tgid, wev, sys_wev, preempted, tid,
                pg_gen, pg_wait, pg_status, pg_state_off, cr_info, cr_cc, pad, acc, seg, tag, seg_wev, tag_wev, sys_ino, sys_fdev, sys_fd, sys_pos, span_off, span_runq,
                span_wev, span_flags),
        );
        check(
            "watch_clock",
            size_of::<WatchClock>(),
            fields!(WatchClock: start, interval, end),
        );
        check(
            "wait_key",
            size_of::<WaitKey>(),
            fields!(WaitKey: tgid, wev),
        );
        check(
            "first_wev",
            size_of::<FirstWev>(),
            fields!(FirstWev: info, cc),
        );
        check("wait_sum", size_of::<WaitSum>(), fields!(WaitSum: parts));
        check(
            "rq_state",
            size_of::<RqState>(),
            fields!(RqState: start, issue, tgid, tid, watched, target, sys),
        );
        check(
            "extent",
            size_of::<Extent>(),
            fields!(Extent: start, end, target, pad),
        );
        check(
            "target_disk",
            size_of::<TargetDisk>(),
            fields!(TargetDisk: target, first, count, pad),
        );
        // The value of `pg_wait_ptr`, which user space fills (watch and profile alike).
        use crate::bpf::PgPtrs;
        check(
            "pg_ptrs",
            size_of::<PgPtrs>(),
            fields!(PgPtrs: wait, status, state_off, pad),
        );
        let profile = btf_structs(btf_section(crate::bpf::profile::PROFILE_OBJECT));
        assert_eq!(profile.get("pg_ptrs"), structs.get("pg_ptrs"));
    }
}
