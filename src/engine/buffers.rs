//! The run's I/O buffers: one anonymous mapping that holds every session's blocks, on huge
//! pages where the kernel gives them, as a database's buffer cache holds its
//! blocks (Oracle's SGA on HugePages, PostgreSQL's `shared_buffers` with `huge_pages`).
//!
//! Why it changes what a run measures: an O_DIRECT block moves straight between the device and
//! the buffer, one scatter-gather segment per physically contiguous piece. A block of two small
//! pages that the page allocator did not place side by side takes two segments; on a virtio
//! disk without indirect descriptors every segment is one ring descriptor, so fewer requests fit
//! in the ring and the device queue is shallower than the load asks for. Inside one huge page
//! every block is contiguous. Measured on this project's VM (virtio-blk, no indirect
//! descriptors), 8 KiB O_DIRECT reads at 480 sessions (`bench/scale.sh`, `ROUNDS=2`): 72.2k IOPS
//! on huge pages, 59.0k on small pages, fio 60.9k; the device held 86 requests on huge pages
//! (its ring's 256 descriptors / 3) against 67–73 on small ones.
//!
//! Where huge pages come from: reserved ones (hugetlb, `vm.nr_hugepages`) when enough are free,
//! as an SGA on HugePages; otherwise transparent huge pages, asked for with `MADV_HUGEPAGE`
//! (THP `always` or `madvise`). `--huge-pages off` keeps the pool on small pages
//! (`MADV_NOHUGEPAGE`).
//!
//! Flow: the run makes one pool for all its sessions before they start ([`BufferPool::new`]);
//! each session takes its own slice ([`BufferPool::slice`]) and fills it from its own thread;
//! after the run [`BufferPool::huge_bytes`] reads from `/proc/self/smaps` how much of the pool
//! the kernel backed with huge pages, for the results.

use std::io;

use super::AlignedBuf;
use crate::workload::HugePages;

/// The size of a transparent huge page on x86-64 and of the pool's alignment.
pub(crate) const HUGE: usize = 2 << 20;
const PAGE: usize = 4096;

/// Every session's I/O buffers of one run, in one mapping (see the module doc).
pub(crate) struct BufferPool {
    base: *mut u8,
    len: usize,
    /// Offset of each session's slice in the mapping.
    offsets: Vec<usize>,
    /// Blocks per session and bytes per block.
    slots: usize,
    block: usize,
    /// On reserved (hugetlb) huge pages rather than transparent ones.
    hugetlb: bool,
}

// SAFETY: the mapping is plain memory; sessions take disjoint slices of it.
unsafe impl Send for BufferPool {}
// SAFETY: as above; the pool itself is never written through `&self`.
unsafe impl Sync for BufferPool {}

impl BufferPool {
    /// Room for `sessions` × `slots` blocks of `block` bytes. A session's slice that fits in
    /// one huge page never straddles two, so each of its blocks stays contiguous.
    pub(crate) fn new(
        sessions: usize,
        slots: usize,
        block: usize,
        pages: HugePages,
    ) -> io::Result<BufferPool> {
        let per = (slots * block).max(1).next_multiple_of(PAGE);
        let mut offsets = Vec::with_capacity(sessions);
        let mut at = 0usize;
        for _ in 0..sessions {
            if per <= HUGE && at / HUGE != (at + per - 1) / HUGE {
                at = at.next_multiple_of(HUGE);
            }
            offsets.push(at);
            at += per;
        }
        let len = at.max(PAGE).next_multiple_of(HUGE);
        if pages == HugePages::Try && crate::sys::free_hugetlb_page_size() == Some(HUGE as u64) {
            // Reserved huge pages (vm.nr_hugepages), as a database's SGA uses them. Without
            // MAP_NORESERVE the kernel reserves every page now or fails the mapping, so a pool
            // it grants cannot run short later; one it refuses falls back to the rest.
            if let Ok(raw) = map_anonymous(len, libc::MAP_HUGETLB) {
                return Ok(BufferPool {
                    base: raw,
                    len,
                    offsets,
                    slots,
                    block,
                    hugetlb: true,
                });
            }
        }
        // Map one huge page more than needed, keep the aligned part and give back the rest.
        let raw = map_anonymous(len + HUGE, libc::MAP_NORESERVE)?;
        let start = raw as usize;
        let base = start.next_multiple_of(HUGE);
        // SAFETY: both ranges lie inside the mapping just made and are not used.
        unsafe {
            if base > start {
                libc::munmap(raw as *mut libc::c_void, base - start);
            }
            let tail = start + HUGE - base;
            if tail > 0 {
                libc::munmap((base + len) as *mut libc::c_void, tail);
            }
        }
        let advice = match pages {
            HugePages::Try => libc::MADV_HUGEPAGE,
            HugePages::Off => libc::MADV_NOHUGEPAGE,
        };
        // Advice only: a kernel without transparent huge pages refuses it (EINVAL) and the pool
        // stays on small pages, which `huge_bytes` then reports.
        // SAFETY: the range is the pool's own mapping.
        unsafe { libc::madvise(base as *mut libc::c_void, len, advice) };
        Ok(BufferPool {
            base: base as *mut u8,
            len,
            offsets,
            slots,
            block,
            hugetlb: false,
        })
    }

    /// Session `session`'s blocks, filled with pseudo-random bytes from `seed` (so written data
    /// is incompressible). Call it once per session, from the session's thread: the first touch
    /// places the memory.
    pub(crate) fn slice(&self, session: usize, seed: u64) -> AlignedBuf<'_> {
        let off = self.offsets[session];
        // SAFETY: the slice lies inside the mapping (see `new`), belongs to this session only,
        // and the returned buffer borrows the pool, so it cannot outlive the mapping.
        unsafe { AlignedBuf::in_pool(self.base.add(off), self.slots, self.block, seed) }
    }

    /// Bytes of the pool the kernel backs with huge pages now (`AnonHugePages`, or the
    /// `*_Hugetlb` sizes of a hugetlb pool, of the pool's mapping in `/proc/self/smaps`);
    /// `None` where smaps cannot be read.
    pub(crate) fn huge_bytes(&self) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        Some(anon_huge_in(&smaps, self.base as usize, self.len))
    }

    /// Bytes of memory the pool maps.
    pub(crate) fn len(&self) -> u64 {
        self.len as u64
    }

    /// Whether the pool is on reserved (hugetlb) huge pages.
    pub(crate) fn hugetlb(&self) -> bool {
        self.hugetlb
    }
}

/// A fresh private anonymous read-write mapping of `len` bytes, with `flags` added.
fn map_anonymous(len: usize, flags: libc::c_int) -> io::Result<*mut u8> {
    // SAFETY: a new mapping at an address the kernel chooses; no existing memory is touched.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(raw as *mut u8)
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; every slice borrowed the pool and is gone.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// `AnonHugePages` (and the hugetlb sizes) of the smaps entries that overlap `[base, base + len)`, in bytes, at most the
/// overlap of each entry (a neighbouring mapping the kernel merged with the pool's counts only
/// as far as it overlaps).
fn anon_huge_in(smaps: &str, base: usize, len: usize) -> u64 {
    let end = base + len;
    let mut total = 0u64;
    let mut overlap: Option<usize> = None;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    overlap = (a < end && b > base).then(|| b.min(end) - a.max(base));
                    continue;
                }
            }
        }
        let huge = ["AnonHugePages:", "Private_Hugetlb:", "Shared_Hugetlb:"]
            .iter()
            .find_map(|k| line.strip_prefix(k));
        if let (Some(o), Some(rest)) = (overlap, huge) {
            let kb: u64 = rest
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .unwrap_or(0);
            total += (kb * 1024).min(o as u64);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_are_disjoint_and_never_straddle_a_huge_page() {
        for (sessions, slots, block) in [(480, 1, 8192), (7, 3, 12288), (5, 1, 3 << 20)] {
            let pool = BufferPool::new(sessions, slots, block, HugePages::Off).unwrap();
            let per = (slots * block).next_multiple_of(PAGE);
            let mut last_end = 0;
            for (i, &o) in pool.offsets.iter().enumerate() {
                assert!(o >= last_end, "slice {i} overlaps the one before");
                assert!(o + per <= pool.len, "slice {i} runs past the pool");
                if per <= HUGE {
                    assert_eq!(o / HUGE, (o + per - 1) / HUGE, "slice {i} straddles");
                }
                last_end = o + per;
            }
            assert_eq!(pool.base as usize % HUGE, 0);
        }
    }

    /// The physical frame of the page at `addr`, from /proc/self/pagemap (`None` where frames
    /// are hidden: not root, or not present).
    fn frame(addr: usize) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open("/proc/self/pagemap").ok()?;
        let mut e = [0u8; 8];
        f.read_exact_at(&mut e, (addr / PAGE * 8) as u64).ok()?;
        let e = u64::from_le_bytes(e);
        let pfn = e & ((1 << 55) - 1);
        (e >> 63 == 1 && pfn != 0).then_some(pfn)
    }

    /// What the pool is for: on huge pages every block of every slice is physically contiguous
    /// (one DMA segment). Read from the page tables; needs root to see frame numbers.
    #[test]
    fn blocks_on_huge_pages_are_physically_contiguous() {
        let pool = BufferPool::new(300, 2, 8192, HugePages::Try).unwrap();
        let bufs: Vec<_> = (0..300).map(|i| pool.slice(i, i as u64)).collect();
        if pool.huge_bytes() != Some(pool.len()) {
            eprintln!(
                "SKIP: the kernel gave this pool no huge pages ({:?})",
                crate::sys::thp_setting()
            );
            return;
        }
        if frame(bufs[0].raw().0 as usize).is_none() {
            eprintln!("SKIP: physical frames are hidden (not root)");
            return;
        }
        for (i, b) in bufs.iter().enumerate() {
            let (p, len) = b.raw();
            let first = frame(p as usize).unwrap();
            for page in 1..len / PAGE {
                assert_eq!(
                    frame(p as usize + page * PAGE),
                    Some(first + page as u64),
                    "session {i}: page {page} of its slice is not next to the one before"
                );
            }
        }
    }

    /// With reserved huge pages free, `try` takes them (as an SGA on HugePages) and the blocks
    /// are contiguous; `off` does not. Reserves a few pages for the test when none are free
    /// (root), and gives them back.
    #[test]
    fn a_pool_takes_reserved_huge_pages_when_some_are_free() {
        const NR: &str = "/proc/sys/vm/nr_hugepages";
        let read = |p: &str| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok();
        let Some(before) = read(NR) else {
            eprintln!("SKIP: this kernel has no hugetlb pages");
            return;
        };
        // One page for this pool and three for a concurrent test's pool (which may take them).
        let raised = std::fs::write(NR, (before + 4).to_string()).is_ok();
        if crate::sys::free_hugetlb_page_size() != Some(HUGE as u64) {
            if raised {
                let _ = std::fs::write(NR, before.to_string());
            }
            eprintln!("SKIP: no free 2 MiB hugetlb pages (and not root to reserve some)");
            return;
        }
        let checked = std::panic::catch_unwind(|| {
            let pool = BufferPool::new(200, 1, 8192, HugePages::Try).unwrap();
            assert!(pool.hugetlb(), "a pool with hugetlb pages free takes them");
            let bufs: Vec<_> = (0..200).map(|i| pool.slice(i, i as u64)).collect();
            assert_eq!(pool.huge_bytes(), Some(pool.len()));
            if frame(bufs[0].raw().0 as usize).is_some() {
                for b in &bufs {
                    let p = b.raw().0 as usize;
                    assert_eq!(frame(p + PAGE), frame(p).map(|f| f + 1));
                }
            }
            let off = BufferPool::new(200, 1, 8192, HugePages::Off).unwrap();
            assert!(!off.hugetlb(), "--huge-pages off never takes them");
        });
        if raised {
            let _ = std::fs::write(NR, before.to_string());
        }
        if let Err(e) = checked {
            std::panic::resume_unwind(e);
        }
    }

    #[test]
    fn anon_huge_counts_only_the_pools_overlap() {
        let smaps = "\
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
Size:               4096 kB
AnonHugePages:      4096 kB
7f0000400000-7f0000600000 rw-p 00000000 00:00 0
AnonHugePages:      2048 kB
7f0000600000-7f0000a00000 rw-p 00000000 00:0f 1234 /anon_hugepage (deleted)
AnonHugePages:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:    4096 kB
";
        // The pool is the second half of the first entry and none of the second.
        assert_eq!(anon_huge_in(smaps, 0x7f00_0020_0000, 2 << 20), 2 << 20);
        assert_eq!(anon_huge_in(smaps, 0x7f00_0000_0000, 6 << 20), 6 << 20);
        assert_eq!(anon_huge_in(smaps, 0x7e00_0000_0000, 2 << 20), 0);
        // A hugetlb mapping counts by its Private_Hugetlb.
        assert_eq!(anon_huge_in(smaps, 0x7f00_0060_0000, 4 << 20), 4 << 20);
    }
}
