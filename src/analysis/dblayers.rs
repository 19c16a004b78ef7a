//! Which database or kernel layer a function belongs to, from its name: the one table of known
//! Oracle kernel prefixes (as Tanel Poder's DStackProf and the ORA-600 lookup note name them),
//! PostgreSQL's main layers, and the Linux kernel's I/O path. Flame-graph tooltips, the "layers"
//! summary of a profile and the top-functions table all read it through [`classify`].
//!
//! User-space frames are matched against the Oracle and PostgreSQL rows, kernel frames against
//! the Linux rows. The longest matching prefix wins (`kcbz` before `kcb`). Names are matched
//! case-sensitively, as the databases spell them.

use serde::Serialize;

/// The system a layer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum System {
    Oracle,
    PostgreSQL,
    Linux,
}

impl System {
    /// Display name.
    pub fn as_str(self) -> &'static str {
        match self {
            System::Oracle => "Oracle",
            System::PostgreSQL => "PostgreSQL",
            System::Linux => "Linux kernel",
        }
    }
}

/// One row of the table: functions whose names start with `prefix` belong to `layer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Layer {
    pub system: System,
    /// Name prefix (or whole name) that identifies the layer.
    pub prefix: &'static str,
    /// Short layer name, e.g. `buffer cache`.
    pub layer: &'static str,
    /// What the layer does, in a few words.
    pub(crate) description: &'static str,
}

const fn l(
    system: System,
    prefix: &'static str,
    layer: &'static str,
    description: &'static str,
) -> Layer {
    Layer {
        system,
        prefix,
        layer,
        description,
    }
}

use System::{Linux, Oracle, PostgreSQL};

/// The table. Order does not matter: the longest matching prefix wins.
pub const LAYERS: &[Layer] = &[
    // Oracle kernel (user space). Prefixes from the ORA-600 lookup categories (MOS 175982.1)
    // and Tanel Poder's os_explain / DStackProf annotations.
    l(
        Oracle,
        "kcb",
        "buffer cache",
        "kcb: manages the buffer cache (gets, pins, reads into cache)",
    ),
    l(
        Oracle,
        "kcbz",
        "buffer cache",
        "kcbz: buffer cache internals (kcbzib reads a block into the cache)",
    ),
    l(
        Oracle,
        "kcbgtcr",
        "buffer cache",
        "kcbgtcr: consistent get of a buffer (logical read)",
    ),
    l(
        Oracle,
        "kcbgcur",
        "buffer cache",
        "kcbgcur: current-mode get of a buffer",
    ),
    l(
        Oracle,
        "ksfd",
        "file I/O",
        "ksfd: kernel service file/disk I/O (ksfdread, ksfd_io)",
    ),
    l(
        Oracle,
        "skgf",
        "OS file I/O",
        "skgf: OS-dependent file I/O (skgfqio, skgfrio calls pread/io_submit)",
    ),
    l(
        Oracle,
        "kcf",
        "control file / datafile headers",
        "kcf: control file and datafile header operations (kcfrbd reads blocks)",
    ),
    l(
        Oracle,
        "kds",
        "data layer (rows)",
        "kds: data operations on rows (fetch, scan, update)",
    ),
    l(Oracle, "kdi", "index layer", "kdi: index operations"),
    l(
        Oracle,
        "kdb",
        "data block layer",
        "kdb: operations inside data blocks",
    ),
    l(
        Oracle,
        "kdst",
        "table scan",
        "kdst: table scan of data blocks",
    ),
    l(
        Oracle,
        "qer",
        "row sources",
        "qer: query execution row sources (plan operations)",
    ),
    l(
        Oracle,
        "qertb",
        "row sources",
        "qertb: table access row source",
    ),
    l(
        Oracle,
        "qerix",
        "row sources",
        "qerix: index access row source",
    ),
    l(
        Oracle,
        "qerhj",
        "row sources",
        "qerhj: hash join row source",
    ),
    l(
        Oracle,
        "qerjo",
        "row sources",
        "qerjo: nested-loop join row source",
    ),
    l(
        Oracle,
        "qergs",
        "row sources",
        "qergs: group-by/sort row source",
    ),
    l(Oracle, "qerso", "row sources", "qerso: sort row source"),
    l(
        Oracle,
        "qes",
        "query execution services",
        "qes: query execution services (expressions, aggregates)",
    ),
    l(
        Oracle,
        "kks",
        "cursor / parse",
        "kks: shared cursor management, hard and soft parse",
    ),
    l(Oracle, "kko", "optimizer", "kko: cost-based optimizer"),
    l(Oracle, "kkq", "optimizer", "kkq: query transformation"),
    l(Oracle, "apa", "optimizer", "apa: access path analysis"),
    l(
        Oracle,
        "opi",
        "call interface",
        "opi: Oracle program interface (parse, execute, fetch calls)",
    ),
    l(Oracle, "opifch", "call interface", "opifch: fetch call"),
    l(Oracle, "opiexe", "call interface", "opiexe: execute call"),
    l(
        Oracle,
        "kpo",
        "client interface",
        "kpo: server side of the client call interface",
    ),
    l(
        Oracle,
        "ttc",
        "network (two-task)",
        "ttc: two-task common, client/server protocol",
    ),
    l(Oracle, "nttf", "network", "nttf: Oracle Net TCP transport"),
    l(
        Oracle,
        "ksl",
        "latches / waits",
        "ksl: latches and the post/wait interface",
    ),
    l(
        Oracle,
        "kslwait",
        "latches / waits",
        "kslwait: waiting on an event (wait interface)",
    ),
    l(Oracle, "ksq", "enqueues", "ksq: enqueue (lock) management"),
    l(
        Oracle,
        "ksk",
        "wait interface",
        "ksk: wait event accounting (kskthewt)",
    ),
    l(
        Oracle,
        "kews",
        "wait interface",
        "kews: wait statistics (kews_update_wait_time)",
    ),
    l(
        Oracle,
        "ksu",
        "sessions",
        "ksu: session and process management",
    ),
    l(
        Oracle,
        "ktr",
        "read consistency",
        "ktr: transaction read consistency",
    ),
    l(Oracle, "ktu", "undo", "ktu: undo management"),
    l(
        Oracle,
        "ktb",
        "transaction blocks",
        "ktb: transaction layer in blocks (ITL)",
    ),
    l(
        Oracle,
        "kcr",
        "redo",
        "kcr: redo generation and log writing",
    ),
    l(
        Oracle,
        "kcrf",
        "redo",
        "kcrf: redo log file writes (log file sync/parallel write)",
    ),
    l(
        Oracle,
        "kgl",
        "library cache",
        "kgl: library cache (shared pool objects)",
    ),
    l(
        Oracle,
        "kgh",
        "heap manager",
        "kgh: memory heap manager (SGA/PGA heaps)",
    ),
    l(
        Oracle,
        "sskgp",
        "OS process services",
        "sskgp: OS-dependent process services",
    ),
    // PostgreSQL (user space).
    l(
        PostgreSQL,
        "ReadBuffer",
        "buffer manager",
        "ReadBuffer: get a page through shared buffers",
    ),
    l(
        PostgreSQL,
        "BufferAlloc",
        "buffer manager",
        "BufferAlloc: find or evict a shared buffer",
    ),
    l(
        PostgreSQL,
        "StrategyGetBuffer",
        "buffer manager",
        "StrategyGetBuffer: clock-sweep buffer replacement",
    ),
    l(
        PostgreSQL,
        "PinBuffer",
        "buffer manager",
        "PinBuffer: pin a shared buffer",
    ),
    l(
        PostgreSQL,
        "UnpinBuffer",
        "buffer manager",
        "UnpinBuffer: unpin a shared buffer",
    ),
    l(
        PostgreSQL,
        "LockBuffer",
        "buffer manager",
        "LockBuffer: content lock of a shared buffer",
    ),
    l(
        PostgreSQL,
        "FlushBuffer",
        "buffer manager",
        "FlushBuffer: write a dirty buffer out",
    ),
    l(
        PostgreSQL,
        "BufTable",
        "buffer manager",
        "BufTable: shared buffer mapping table",
    ),
    l(
        PostgreSQL,
        "WaitReadBuffers",
        "buffer manager",
        "WaitReadBuffers: wait for buffer reads to finish",
    ),
    l(
        PostgreSQL,
        "StartReadBuffer",
        "buffer manager",
        "StartReadBuffer: start reading a buffer",
    ),
    l(
        PostgreSQL,
        "smgr",
        "storage manager",
        "smgr: storage manager (relation files)",
    ),
    l(
        PostgreSQL,
        "mdread",
        "storage manager",
        "mdread: magnetic-disk storage manager read",
    ),
    l(
        PostgreSQL,
        "mdreadv",
        "storage manager",
        "mdreadv: vectored read of relation blocks",
    ),
    l(
        PostgreSQL,
        "mdwrite",
        "storage manager",
        "mdwrite: storage manager write",
    ),
    l(
        PostgreSQL,
        "mdextend",
        "storage manager",
        "mdextend: extend a relation file",
    ),
    l(
        PostgreSQL,
        "mdnblocks",
        "storage manager",
        "mdnblocks: size of a relation",
    ),
    l(
        PostgreSQL,
        "FileRead",
        "virtual file descriptors",
        "FileRead: fd.c read (calls pread)",
    ),
    l(
        PostgreSQL,
        "FileWrite",
        "virtual file descriptors",
        "FileWrite: fd.c write (calls pwrite)",
    ),
    l(
        PostgreSQL,
        "FileSync",
        "virtual file descriptors",
        "FileSync: fd.c fsync",
    ),
    l(
        PostgreSQL,
        "heap_",
        "heap access",
        "heap_: heap (table) access method",
    ),
    l(
        PostgreSQL,
        "heapgettup",
        "heap access",
        "heapgettup: next tuple of a heap scan",
    ),
    l(
        PostgreSQL,
        "heapgetpage",
        "heap access",
        "heapgetpage: read a heap page for a scan",
    ),
    l(
        PostgreSQL,
        "heapam_",
        "heap access",
        "heapam_: table access method callbacks of the heap",
    ),
    l(
        PostgreSQL,
        "HeapTupleSatisfies",
        "heap access",
        "HeapTupleSatisfies: tuple visibility (MVCC)",
    ),
    l(
        PostgreSQL,
        "index_getnext",
        "index access",
        "index_getnext: next tuple of an index scan",
    ),
    l(
        PostgreSQL,
        "index_fetch_heap",
        "index access",
        "index_fetch_heap: heap tuple of an index entry",
    ),
    l(PostgreSQL, "_bt_", "index access", "_bt_: B-tree internals"),
    l(
        PostgreSQL,
        "btgettuple",
        "index access",
        "btgettuple: B-tree scan step",
    ),
    l(
        PostgreSQL,
        "btinsert",
        "index access",
        "btinsert: B-tree insert",
    ),
    l(
        PostgreSQL,
        "Exec",
        "executor",
        "Exec: executor nodes (ExecSeqScan, ExecIndexScan, ExecHashJoin, ...)",
    ),
    l(
        PostgreSQL,
        "ExecutorRun",
        "executor",
        "ExecutorRun: run a plan",
    ),
    l(
        PostgreSQL,
        "ExecInterpExpr",
        "expressions",
        "ExecInterpExpr: expression evaluation",
    ),
    l(
        PostgreSQL,
        "standard_planner",
        "planner",
        "standard_planner: query planning",
    ),
    l(PostgreSQL, "planner", "planner", "planner: query planning"),
    l(
        PostgreSQL,
        "raw_parser",
        "parser",
        "raw_parser: SQL grammar",
    ),
    l(
        PostgreSQL,
        "parse_analyze",
        "parser",
        "parse_analyze: semantic analysis",
    ),
    l(
        PostgreSQL,
        "XLog",
        "WAL",
        "XLog: write-ahead log insert, flush and write",
    ),
    l(
        PostgreSQL,
        "issue_xlog_fsync",
        "WAL",
        "issue_xlog_fsync: WAL flush to disk (commit)",
    ),
    l(PostgreSQL, "LWLock", "locks", "LWLock: lightweight locks"),
    l(
        PostgreSQL,
        "LockAcquire",
        "locks",
        "LockAcquire: heavyweight lock",
    ),
    l(
        PostgreSQL,
        "CommitTransaction",
        "transactions",
        "CommitTransaction: commit",
    ),
    l(
        PostgreSQL,
        "PortalRun",
        "protocol / tcop",
        "PortalRun: run a portal (query)",
    ),
    l(
        PostgreSQL,
        "exec_simple_query",
        "protocol / tcop",
        "exec_simple_query: simple query protocol",
    ),
    l(
        PostgreSQL,
        "exec_execute_message",
        "protocol / tcop",
        "exec_execute_message: extended query protocol",
    ),
    l(
        PostgreSQL,
        "PostgresMain",
        "protocol / tcop",
        "PostgresMain: backend main loop",
    ),
    l(
        PostgreSQL,
        "pq_",
        "protocol / tcop",
        "pq_: client protocol I/O",
    ),
    l(
        PostgreSQL,
        "palloc",
        "memory",
        "palloc: memory context allocation",
    ),
    l(
        PostgreSQL,
        "AllocSet",
        "memory",
        "AllocSet: memory context allocator",
    ),
    l(
        PostgreSQL,
        "WaitEventSetWait",
        "waiting",
        "WaitEventSetWait: waiting for a socket, latch or timeout",
    ),
    l(
        PostgreSQL,
        "WaitLatch",
        "waiting",
        "WaitLatch: waiting on a latch",
    ),
    // Linux kernel (kernel frames).
    l(Linux, "__x64_sys_", "system call", "system call entry"),
    l(Linux, "ksys_", "system call", "system call implementation"),
    l(
        Linux,
        "do_syscall_64",
        "system call",
        "system call dispatch",
    ),
    l(Linux, "entry_SYSCALL", "system call", "system call entry"),
    l(Linux, "vfs_", "VFS", "virtual file system"),
    l(
        Linux,
        "filemap_",
        "page cache",
        "page cache reads and faults",
    ),
    l(
        Linux,
        "page_cache_",
        "page cache",
        "page cache readahead and lookup",
    ),
    l(Linux, "folio_", "page cache", "page cache folios"),
    l(Linux, "iomap_dio", "direct I/O", "direct I/O through iomap"),
    l(
        Linux,
        "__iomap_dio",
        "direct I/O",
        "direct I/O through iomap",
    ),
    l(
        Linux,
        "blkdev_direct",
        "direct I/O",
        "direct I/O on a block device",
    ),
    l(
        Linux,
        "__blkdev_direct",
        "direct I/O",
        "direct I/O on a block device",
    ),
    l(
        Linux,
        "iomap_",
        "filesystem",
        "iomap: filesystem block mapping",
    ),
    l(Linux, "ext4_", "filesystem", "ext4"),
    l(Linux, "xfs_", "filesystem", "XFS"),
    l(Linux, "btrfs_", "filesystem", "Btrfs"),
    l(Linux, "jbd2", "filesystem", "ext4 journal"),
    l(Linux, "submit_bio", "block layer", "block I/O submission"),
    l(
        Linux,
        "blk_",
        "block layer",
        "block layer (request queue, plugging, multi-queue)",
    ),
    l(
        Linux,
        "__blk_",
        "block layer",
        "block layer (request queue, plugging, multi-queue)",
    ),
    l(Linux, "bio_", "block layer", "block I/O descriptors"),
    l(Linux, "nvme_", "device driver", "NVMe driver"),
    l(Linux, "scsi_", "device driver", "SCSI midlayer"),
    l(Linux, "virtblk_", "device driver", "virtio block driver"),
    l(Linux, "virtio_", "device driver", "virtio transport"),
    l(
        Linux,
        "io_uring",
        "io_uring",
        "io_uring submission and completion",
    ),
    l(Linux, "__io_", "io_uring", "io_uring internals"),
    l(
        Linux,
        "io_schedule",
        "scheduler (I/O wait)",
        "sleeping until an I/O completes",
    ),
    l(Linux, "schedule", "scheduler", "giving up the CPU"),
    l(Linux, "__schedule", "scheduler", "giving up the CPU"),
    l(
        Linux,
        "finish_task_switch",
        "scheduler",
        "returning to the CPU after a switch",
    ),
    l(Linux, "futex_", "futex", "user-space lock waits"),
    l(Linux, "do_futex", "futex", "user-space lock waits"),
    l(
        Linux,
        "handle_mm_fault",
        "page faults",
        "page fault handling",
    ),
    l(Linux, "do_page_fault", "page faults", "page fault handling"),
    l(
        Linux,
        "exc_page_fault",
        "page faults",
        "page fault handling",
    ),
    l(Linux, "tcp_", "network", "TCP"),
    l(Linux, "sock_", "network", "sockets"),
];

/// The layer of a function: the longest prefix of its name in [`LAYERS`] for its side (kernel
/// rows for kernel frames, database rows for user frames).
pub(crate) fn classify(name: &str, kernel: bool) -> Option<&'static Layer> {
    LAYERS
        .iter()
        .filter(|l| (l.system == Linux) == kernel && name.starts_with(l.prefix))
        .max_by_key(|l| l.prefix.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_sides_are_kept_apart() {
        assert_eq!(classify("kcbzib", false).unwrap().prefix, "kcbz");
        assert_eq!(classify("kcbgtcr", false).unwrap().prefix, "kcbgtcr");
        assert_eq!(classify("kcbrls", false).unwrap().layer, "buffer cache");
        assert_eq!(
            classify("qertbFetchByRowID", false).unwrap().prefix,
            "qertb"
        );
        assert_eq!(classify("ksfdread", false).unwrap().layer, "file I/O");
        assert_eq!(
            classify("ReadBufferExtended", false).unwrap().system,
            PostgreSQL
        );
        assert_eq!(classify("ExecSeqScan", false).unwrap().layer, "executor");
        assert_eq!(
            classify("heap_getnextslot", false).unwrap().layer,
            "heap access"
        );
        assert_eq!(
            classify("blk_mq_submit_bio", true).unwrap().layer,
            "block layer"
        );
        assert_eq!(
            classify("io_schedule", true).unwrap().layer,
            "scheduler (I/O wait)"
        );
        // A kernel function is never taken for a database one, nor the other way round.
        assert!(classify("blk_mq_submit_bio", false).is_none());
        assert!(classify("kcbgtcr", true).is_none());
        assert!(classify("main", false).is_none());
    }

    #[test]
    fn every_prefix_is_unique_per_system() {
        let mut seen = std::collections::HashSet::new();
        for l in LAYERS {
            assert!(seen.insert((l.system, l.prefix)), "duplicate {l:?}");
        }
    }
}
