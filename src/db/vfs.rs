//! A timing shim around SQLite's default `unix` VFS: every read, write and sync of the main
//! database and of its log (WAL or rollback journal) is timed and recorded into the calling
//! session's recorders.
//!
//! Data flow: a session thread owns an [`IoCtx`] (two `SessionRecorder`s and counters) and
//! [`install`]s it in a thread-local pointer for the measured window. SQLite calls the shim's
//! methods on the thread that runs the statement, so the shim finds that session's recorder
//! without any lock: two clock reads and one histogram increment per I/O. Files opened while no
//! context is installed (setup, other threads) pass straight through.
//!
//! Mapping: main-database reads of exactly one page are block reads (`db file sequential read`),
//! other main-database reads (the 100-byte header, the 16-byte change counter) are counted but
//! are not block reads; main writes and syncs are the checkpoint (DBWR) path; log writes and
//! syncs are the commit (`log file sync`) path. Memory mapping is refused (`xFetch` returns no
//! page), so every page SQLite reads goes through `xRead`.

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use anyhow::{bail, Result};
use rusqlite::ffi;

use crate::recorder::{Op, OpSet, SessionRecorder, READ, SYNC, WRITE};

/// Name under which the shim is registered.
pub const VFS_NAME: &str = "iolens-timed";
const VFS_NAME_C: &CStr = c"iolens-timed";
/// Database page size of the iolens layout; reads of exactly this size are block reads.
pub const PAGE_SIZE: usize = 8192;

/// Per-session I/O counters kept by the shim (measured window only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoCounts {
    /// Page-sized reads of the main database file (block reads).
    pub(crate) main_page_reads: u64,
    /// Other reads of the main database file (header, change counter).
    pub(crate) main_other_reads: u64,
    pub(crate) main_writes: u64,
    pub(crate) main_write_bytes: u64,
    pub(crate) main_syncs: u64,
    /// Reads of the WAL / journal (pages found in the WAL are read from there).
    pub(crate) log_reads: u64,
    pub log_writes: u64,
    pub(crate) log_write_bytes: u64,
    pub log_syncs: u64,
    /// I/O on other files (temporary files, statement journals).
    pub(crate) other_ios: u64,
    /// Failed I/O calls.
    pub errors: u64,
}

impl IoCounts {
    /// Add another session's counts.
    pub fn add(&mut self, o: &IoCounts) {
        self.main_page_reads += o.main_page_reads;
        self.main_other_reads += o.main_other_reads;
        self.main_writes += o.main_writes;
        self.main_write_bytes += o.main_write_bytes;
        self.main_syncs += o.main_syncs;
        self.log_reads += o.log_reads;
        self.log_writes += o.log_writes;
        self.log_write_bytes += o.log_write_bytes;
        self.log_syncs += o.log_syncs;
        self.other_ios += o.other_ios;
        self.errors += o.errors;
    }
}

/// The log (WAL, rollback journal) file's reads.
pub(crate) const LOG_READ: Op = Op::new(0, "log read");
/// The log file's writes.
pub(crate) const LOG_WRITE: Op = Op::new(1, "log write");
/// The log file's syncs.
pub(crate) const LOG_SYNC: Op = Op::flush(2, "log sync");
/// The operations of the log file ([`crate::recorder::IO_OPS`] are the main database file's).
pub(crate) const LOG_OPS: OpSet = OpSet::new(&[LOG_READ, LOG_WRITE, LOG_SYNC]);

/// One session's recording context: main-database I/O, log I/O, and counters.
pub struct IoCtx {
    pub(crate) main: SessionRecorder,
    pub(crate) log: SessionRecorder,
    pub counts: IoCounts,
}

thread_local! {
    static CTX: Cell<*mut IoCtx> = const { Cell::new(ptr::null_mut()) };
}

/// While alive, I/O issued by SQLite on this thread is recorded into the installed context.
pub(crate) struct Installed<'a> {
    _ctx: PhantomData<&'a mut IoCtx>,
}

/// Install `ctx` for the calling thread until the returned guard is dropped.
pub(crate) fn install(ctx: &mut IoCtx) -> Installed<'_> {
    CTX.with(|c| c.set(ctx as *mut IoCtx));
    Installed { _ctx: PhantomData }
}

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        CTX.with(|c| c.set(ptr::null_mut()));
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Kind {
    Main,
    Log,
    Other,
}

/// The shim's file object: SQLite allocates `szOsFile` bytes; the real file follows this header.
#[repr(C)]
struct ShimFile {
    base: ffi::sqlite3_file,
    kind: Kind,
    real: *mut ffi::sqlite3_file,
}

static REAL_VFS: AtomicPtr<ffi::sqlite3_vfs> = AtomicPtr::new(ptr::null_mut());

/// Register the shim (once per process). Safe to call repeatedly.
pub(crate) fn register() -> Result<()> {
    static ONCE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let r = ONCE.get_or_init(|| unsafe {
        // SAFETY: sqlite3_vfs_find initialises SQLite and returns a static VFS or null.
        let real = ffi::sqlite3_vfs_find(c"unix".as_ptr());
        if real.is_null() {
            return Err("SQLite has no \"unix\" VFS to wrap".to_string());
        }
        REAL_VFS.store(real, Ordering::Release);
        let mut v: ffi::sqlite3_vfs = ptr::read(real);
        v.szOsFile = std::mem::size_of::<ShimFile>() as c_int + (*real).szOsFile;
        v.zName = VFS_NAME_C.as_ptr();
        v.pNext = ptr::null_mut();
        v.xOpen = Some(shim_open);
        let leaked: &'static mut ffi::sqlite3_vfs = Box::leak(Box::new(v));
        let rc = ffi::sqlite3_vfs_register(leaked, 0);
        if rc != ffi::SQLITE_OK {
            return Err(format!("sqlite3_vfs_register failed (code {rc})"));
        }
        Ok(())
    });
    match r {
        Ok(()) => Ok(()),
        Err(e) => bail!("cannot install the SQLite timing shim: {e}"),
    }
}

unsafe extern "C" fn shim_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let real_vfs = REAL_VFS.load(Ordering::Acquire);
    let sf = file as *mut ShimFile;
    let real = (file as *mut u8).add(std::mem::size_of::<ShimFile>()) as *mut ffi::sqlite3_file;
    (*sf).base.pMethods = ptr::null();
    (*sf).real = real;
    (*sf).kind = if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
        Kind::Main
    } else if flags & (ffi::SQLITE_OPEN_WAL | ffi::SQLITE_OPEN_MAIN_JOURNAL) != 0 {
        Kind::Log
    } else {
        Kind::Other
    };
    (*real).pMethods = ptr::null();
    let open = (*real_vfs).xOpen.expect("unix VFS has xOpen");
    let rc = open(real_vfs, name, real, flags, out_flags);
    if !(*real).pMethods.is_null() {
        (*sf).base.pMethods = &SHIM_METHODS;
    }
    rc
}

#[inline]
unsafe fn parts(
    f: *mut ffi::sqlite3_file,
) -> (Kind, *mut ffi::sqlite3_file, *const ffi::sqlite3_io_methods) {
    let sf = f as *mut ShimFile;
    let real = (*sf).real;
    ((*sf).kind, real, (*real).pMethods)
}

#[inline]
fn ctx() -> *mut IoCtx {
    CTX.with(|c| c.get())
}

/// Make the real file's call `io`, timed when this thread has a timing context installed:
/// its return code, and with a context that context, the call's start and end and whether
/// `ok` calls the code a success (a failure is counted in the context's errors here). Without
/// a context the call is made untimed.
#[inline]
unsafe fn timed<'a>(
    io: impl FnOnce() -> c_int,
    ok: impl FnOnce(c_int) -> bool,
) -> (c_int, Option<(&'a mut IoCtx, Instant, Instant, bool)>) {
    let c = ctx();
    if c.is_null() {
        return (io(), None);
    }
    let t0 = Instant::now();
    let rc = io();
    let t1 = Instant::now();
    // SAFETY: the installed context belongs to this thread and outlives the guard.
    let c = &mut *c;
    let ok = ok(rc);
    if !ok {
        c.counts.errors += 1;
    }
    (rc, Some((c, t0, t1, ok)))
}

unsafe extern "C" fn x_close(f: *mut ffi::sqlite3_file) -> c_int {
    let (_, real, m) = parts(f);
    ((*m).xClose.expect("xClose"))(real)
}

unsafe extern "C" fn x_read(
    f: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amt: c_int,
    off: ffi::sqlite3_int64,
) -> c_int {
    let (kind, real, m) = parts(f);
    let read = (*m).xRead.expect("xRead");
    let (rc, timing) = timed(
        || read(real, buf, amt, off),
        |rc| rc == ffi::SQLITE_OK || rc == ffi::SQLITE_IOERR_SHORT_READ,
    );
    let Some((c, t0, t1, ok)) = timing else {
        return rc;
    };
    match kind {
        Kind::Main if amt as usize == PAGE_SIZE => {
            if ok {
                c.main.record(READ, t0, t1, amt as u64);
                c.counts.main_page_reads += 1;
            } else {
                c.main.error(READ);
            }
        }
        Kind::Main => c.counts.main_other_reads += 1,
        Kind::Log => {
            if ok {
                c.log.record(LOG_READ, t0, t1, amt as u64);
                c.counts.log_reads += 1;
            } else {
                c.log.error(LOG_READ);
            }
        }
        Kind::Other => c.counts.other_ios += 1,
    }
    rc
}

unsafe extern "C" fn x_write(
    f: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    off: ffi::sqlite3_int64,
) -> c_int {
    let (kind, real, m) = parts(f);
    let write = (*m).xWrite.expect("xWrite");
    let (rc, timing) = timed(|| write(real, buf, amt, off), |rc| rc == ffi::SQLITE_OK);
    let Some((c, t0, t1, ok)) = timing else {
        return rc;
    };
    match (kind, ok) {
        (Kind::Main, true) => {
            c.main.record(WRITE, t0, t1, amt as u64);
            c.counts.main_writes += 1;
            c.counts.main_write_bytes += amt as u64;
        }
        (Kind::Main, false) => c.main.error(WRITE),
        (Kind::Log, true) => {
            c.log.record(LOG_WRITE, t0, t1, amt as u64);
            c.counts.log_writes += 1;
            c.counts.log_write_bytes += amt as u64;
        }
        (Kind::Log, false) => c.log.error(LOG_WRITE),
        (Kind::Other, _) => c.counts.other_ios += 1,
    }
    rc
}

unsafe extern "C" fn x_sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    let (kind, real, m) = parts(f);
    let sync = (*m).xSync.expect("xSync");
    let (rc, timing) = timed(|| sync(real, flags), |rc| rc == ffi::SQLITE_OK);
    let Some((c, t0, t1, ok)) = timing else {
        return rc;
    };
    match (kind, ok) {
        (Kind::Main, true) => {
            c.main.record(SYNC, t0, t1, 0);
            c.counts.main_syncs += 1;
        }
        (Kind::Main, false) => c.main.error(SYNC),
        (Kind::Log, true) => {
            c.log.record(LOG_SYNC, t0, t1, 0);
            c.counts.log_syncs += 1;
        }
        (Kind::Log, false) => c.log.error(LOG_SYNC),
        (Kind::Other, _) => c.counts.other_ios += 1,
    }
    rc
}

unsafe extern "C" fn x_truncate(f: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    let (_, real, m) = parts(f);
    ((*m).xTruncate.expect("xTruncate"))(real, size)
}

unsafe extern "C" fn x_file_size(
    f: *mut ffi::sqlite3_file,
    size: *mut ffi::sqlite3_int64,
) -> c_int {
    let (_, real, m) = parts(f);
    ((*m).xFileSize.expect("xFileSize"))(real, size)
}

unsafe extern "C" fn x_lock(f: *mut ffi::sqlite3_file, l: c_int) -> c_int {
    let (_, real, m) = parts(f);
    ((*m).xLock.expect("xLock"))(real, l)
}

unsafe extern "C" fn x_unlock(f: *mut ffi::sqlite3_file, l: c_int) -> c_int {
    let (_, real, m) = parts(f);
    ((*m).xUnlock.expect("xUnlock"))(real, l)
}

unsafe extern "C" fn x_check_reserved(f: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    let (_, real, m) = parts(f);
    ((*m).xCheckReservedLock.expect("xCheckReservedLock"))(real, out)
}

unsafe extern "C" fn x_file_control(
    f: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    let (_, real, m) = parts(f);
    ((*m).xFileControl.expect("xFileControl"))(real, op, arg)
}

unsafe extern "C" fn x_sector_size(f: *mut ffi::sqlite3_file) -> c_int {
    let (_, real, m) = parts(f);
    ((*m).xSectorSize.expect("xSectorSize"))(real)
}

unsafe extern "C" fn x_device_chars(f: *mut ffi::sqlite3_file) -> c_int {
    let (_, real, m) = parts(f);
    ((*m).xDeviceCharacteristics.expect("xDeviceCharacteristics"))(real)
}

unsafe extern "C" fn x_shm_map(
    f: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    pp: *mut *mut c_void,
) -> c_int {
    let (_, real, m) = parts(f);
    match (*m).xShmMap {
        Some(x) => x(real, region, size, extend, pp),
        None => ffi::SQLITE_IOERR,
    }
}

unsafe extern "C" fn x_shm_lock(
    f: *mut ffi::sqlite3_file,
    off: c_int,
    n: c_int,
    fl: c_int,
) -> c_int {
    let (_, real, m) = parts(f);
    match (*m).xShmLock {
        Some(x) => x(real, off, n, fl),
        None => ffi::SQLITE_IOERR,
    }
}

unsafe extern "C" fn x_shm_barrier(f: *mut ffi::sqlite3_file) {
    let (_, real, m) = parts(f);
    if let Some(x) = (*m).xShmBarrier {
        x(real)
    }
}

unsafe extern "C" fn x_shm_unmap(f: *mut ffi::sqlite3_file, del: c_int) -> c_int {
    let (_, real, m) = parts(f);
    match (*m).xShmUnmap {
        Some(x) => x(real, del),
        None => ffi::SQLITE_OK,
    }
}

/// Memory-mapped access is refused so every page read goes through `xRead`.
unsafe extern "C" fn x_fetch(
    _f: *mut ffi::sqlite3_file,
    _off: ffi::sqlite3_int64,
    _amt: c_int,
    pp: *mut *mut c_void,
) -> c_int {
    *pp = ptr::null_mut();
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_unfetch(
    f: *mut ffi::sqlite3_file,
    off: ffi::sqlite3_int64,
    p: *mut c_void,
) -> c_int {
    let (_, real, m) = parts(f);
    match (*m).xUnfetch {
        Some(x) => x(real, off, p),
        None => ffi::SQLITE_OK,
    }
}

static SHIM_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_chars),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};
