//! The io_uring engine: `qd` I/Os in flight per session on a private ring, with the file and
//! the session's buffers registered (no per-I/O fd lookup or page pinning). Each completion is
//! stamped as its CQE is reaped, never once per batch.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use anyhow::bail;
use io_uring::{opcode, types, IoUring};

use super::{AlignedBuf, IoEngine};
use crate::workload::IoOp;

/// One ring per session.
pub(crate) struct UringEngine {
    ring: IoUring,
    /// The session's descriptor of each target, in target order (registered as fixed files
    /// 0..N where the kernel allows).
    fds: Vec<i32>,
    fixed_file: bool,
    fixed_bufs: bool,
    /// Why registering the buffers failed (errno); they are then passed with each I/O.
    unregistered: Option<i32>,
    /// Submit each I/O with its own system call as it is queued (fio's default,
    /// iodepth_batch_submit=1) rather than all queued I/Os in one call.
    submit_each: bool,
    queued: u32,
}

// SAFETY: the ring is used by one session thread only; pointers in SQEs refer to that
// session's buffers.
unsafe impl Send for UringEngine {}

/// Explain why io_uring cannot be used here.
fn unavailable(e: &io::Error) -> anyhow::Error {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let why = match e.raw_os_error() {
        Some(libc::ENOSYS) => {
            "this kernel has no io_uring (it needs Linux 5.1 or newer)".to_string()
        }
        Some(libc::EPERM) if disabled > 0 => {
            format!("io_uring is disabled by the kernel.io_uring_disabled sysctl (= {disabled})")
        }
        Some(libc::EPERM) => {
            "io_uring is not permitted here (a seccomp filter, as in many containers, blocks it)"
                .to_string()
        }
        Some(libc::ENOMEM) => {
            "io_uring could not allocate its rings (locked-memory limit too low?)".to_string()
        }
        _ => format!("io_uring set-up failed: {e}"),
    };
    anyhow::anyhow!("the uring engine cannot run: {why}; use --engine sync instead")
}

impl UringEngine {
    /// A ring with room for `qd` I/Os on `files` (one per target), which must outlive the run. With
    /// `batch_submit`, queued I/Os are submitted together in one system call; otherwise each
    /// is submitted as it is queued, so the device sees a steady stream rather than bursts.
    pub(crate) fn new(files: &[&File], qd: u32, batch_submit: bool) -> anyhow::Result<UringEngine> {
        let entries = qd.next_power_of_two().max(2);
        let ring = match IoUring::builder().setup_coop_taskrun().build(entries) {
            Ok(r) => r,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                IoUring::new(entries).map_err(|e| unavailable(&e))?
            }
            Err(e) => return Err(unavailable(&e)),
        };
        if (ring.params().sq_entries()) < qd {
            bail!("io_uring ring too small for --qd {qd}");
        }
        let fds: Vec<i32> = files.iter().map(|f| f.as_raw_fd()).collect();
        let fixed_file = ring.submitter().register_files(&fds).is_ok();
        Ok(UringEngine {
            ring,
            fds,
            fixed_file,
            fixed_bufs: false,
            unregistered: None,
            submit_each: !batch_submit,
            queued: 0,
        })
    }
}

impl IoEngine for UringEngine {
    fn attach(&mut self, buf: &AlignedBuf<'_>) -> io::Result<()> {
        let (p, len) = buf.raw();
        let iov = libc::iovec {
            iov_base: p as *mut libc::c_void,
            iov_len: len,
        };
        // SAFETY: the buffer outlives the ring's use of it (both live for the session).
        let registered = unsafe { self.ring.submitter().register_buffers(&[iov]) };
        self.fixed_bufs = registered.is_ok();
        self.unregistered = registered
            .err()
            .map(|e| e.raw_os_error().unwrap_or(libc::EIO));
        Ok(())
    }

    fn unregistered(&self) -> Option<i32> {
        self.unregistered
    }

    #[inline]
    fn push(&mut self, slot: u32, op: IoOp, file: u32, offset: u64, buf: *mut u8, len: usize) {
        let fd = self.fds[file as usize];
        let sqe = match (op, self.fixed_file, self.fixed_bufs) {
            (IoOp::Read, true, true) => {
                opcode::ReadFixed::new(types::Fixed(file), buf, len as u32, 0)
                    .offset(offset)
                    .build()
            }
            (IoOp::Read, false, true) => opcode::ReadFixed::new(types::Fd(fd), buf, len as u32, 0)
                .offset(offset)
                .build(),
            (IoOp::Read, true, false) => opcode::Read::new(types::Fixed(file), buf, len as u32)
                .offset(offset)
                .build(),
            (IoOp::Read, false, false) => opcode::Read::new(types::Fd(fd), buf, len as u32)
                .offset(offset)
                .build(),
            (_, true, true) => opcode::WriteFixed::new(types::Fixed(file), buf, len as u32, 0)
                .offset(offset)
                .build(),
            (_, false, true) => opcode::WriteFixed::new(types::Fd(fd), buf, len as u32, 0)
                .offset(offset)
                .build(),
            (_, true, false) => opcode::Write::new(types::Fixed(file), buf, len as u32)
                .offset(offset)
                .build(),
            (_, false, false) => opcode::Write::new(types::Fd(fd), buf, len as u32)
                .offset(offset)
                .build(),
        };
        // SAFETY: the buffer stays valid until the completion is reaped; the queue has room
        // because at most `qd` ≤ ring size I/Os are in flight.
        unsafe {
            let _ = self.ring.submission().push(&sqe.user_data(slot as u64));
        }
        self.queued += 1;
        if self.submit_each {
            // Errors surface on the next submit_and_wait.
            let _ = self.ring.submit();
        }
    }

    #[inline]
    fn complete(
        &mut self,
        done: &mut impl FnMut(u32, i64),
        until: Option<std::time::Instant>,
    ) -> io::Result<()> {
        loop {
            let r = match until {
                None => self.ring.submitter().submit_and_wait(1),
                Some(t) => {
                    // Wait for a completion, but no longer than the next intended start.
                    let d = t.saturating_duration_since(std::time::Instant::now());
                    if d.is_zero() {
                        self.ring.submitter().submit()
                    } else {
                        let ts = types::Timespec::new()
                            .sec(d.as_secs())
                            .nsec(d.subsec_nanos());
                        let args = types::SubmitArgs::new().timespec(&ts);
                        self.ring.submitter().submit_with_args(1, &args)
                    }
                }
            };
            match r {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => break,
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => break,
                Err(e) => return Err(e),
            }
        }
        self.queued = 0;
        for cqe in self.ring.completion() {
            done(cqe.user_data() as u32, cqe.result() as i64);
        }
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
