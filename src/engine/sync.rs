//! The sync engine: pread/pwrite, one I/O in flight per session — the shape of a database's
//! single-block reads (`db file sequential read`) and of a log writer.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use super::IoEngine;
use crate::workload::IoOp;

/// pread/pwrite on the session's descriptor of each target (its own; the run's, shared, when
/// the process had none left: pread is safe to use from many threads).
pub(crate) struct SyncEngine {
    fds: Vec<RawFd>,
    pending: Option<(u32, IoOp, RawFd, u64, *mut u8, usize)>,
}

// SAFETY: the raw buffer pointer refers to the session's own buffer; the engine lives in one
// session thread.
unsafe impl Send for SyncEngine {}

impl SyncEngine {
    /// An engine over `files` (one per target, in target order), which must outlive the run.
    pub(crate) fn new(files: &[&File]) -> anyhow::Result<SyncEngine> {
        Ok(SyncEngine {
            fds: files.iter().map(|f| f.as_raw_fd()).collect(),
            pending: None,
        })
    }
}

impl IoEngine for SyncEngine {
    #[inline]
    fn push(&mut self, slot: u32, op: IoOp, file: u32, offset: u64, buf: *mut u8, len: usize) {
        debug_assert!(self.pending.is_none(), "sync engine has one I/O in flight");
        self.pending = Some((slot, op, self.fds[file as usize], offset, buf, len));
    }

    #[inline]
    fn complete(
        &mut self,
        done: &mut impl FnMut(u32, i64),
        _until: Option<std::time::Instant>,
    ) -> io::Result<()> {
        let Some((slot, op, fd, offset, buf, len)) = self.pending.take() else {
            return Ok(());
        };
        // SAFETY: buf is valid for len bytes (the session's slot buffer) and fd is open.
        let r = unsafe {
            match op {
                IoOp::Read => libc::pread(fd, buf as *mut libc::c_void, len, offset as i64),
                _ => libc::pwrite(fd, buf as *const libc::c_void, len, offset as i64),
            }
        };
        let res = if r < 0 {
            -(io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO) as i64)
        } else {
            r as i64
        };
        done(slot, res);
        Ok(())
    }

    fn sync(&mut self, file: u32) -> io::Result<()> {
        // SAFETY: fd is open.
        if unsafe { libc::fdatasync(self.fds[file as usize]) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
