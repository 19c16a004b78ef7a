//! `watch --record FILE`: every traced positioned I/O syscall and every io_uring read or write
//! of the watched processes kept, and written at the end in the format `iolens replay` reads
//! (described, and read, in [`crate::sources::watch_record`]).

use std::collections::HashMap;
use std::io::Write;

use super::filter::Names;
use super::relations::{path_by_inode, path_of};
use crate::sources::watch_record::{escape, HEADER, URING_OPS};

/// One recorded I/O.
#[derive(Debug)]
struct LoggedIo {
    issue_ns: u64,
    lat_ns: u64,
    pid: u32,
    tid: u32,
    /// Index into [`super::SYSCALLS`], then into [`URING_OPS`] (see [`op_name`]).
    op: u8,
    /// Index into the file names.
    file: u32,
    /// `u64::MAX`: at the file's position.
    pos: u64,
    bytes: u64,
}

/// One I/O as the kernel side reported it: it completed at `end_ns` (CLOCK_MONOTONIC) after
/// `lat_ns`, in process `pid`'s thread `tid`, on the file (`fdev`, `ino`) at `pos` (`u64::MAX`:
/// at the file's position), transferring `bytes`, or `failed`.
pub(super) struct Io {
    pub end_ns: u64,
    pub lat_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub fdev: u32,
    pub ino: u64,
    pub pos: u64,
    pub bytes: u64,
    pub failed: bool,
}

/// The name of a [`LoggedIo::op`].
fn op_name(op: u8) -> &'static str {
    let (i, n) = (op as usize, super::SYSCALLS.len());
    match super::SYSCALLS.get(i) {
        Some(s) => s.0,
        None => URING_OPS.get(i - n).copied().unwrap_or("?"),
    }
}

/// The I/Os recorded so far.
#[derive(Default, Debug)]
pub struct IoLog {
    ios: Vec<LoggedIo>,
    /// (fdev, ino) → index into `names`.
    files: HashMap<(u32, u64), u32>,
    names: Vec<String>,
    /// pid → (comm, role); the roles are filled in at the end.
    procs: HashMap<u32, (String, String)>,
    /// Syscalls not recorded: failed, or nothing transferred.
    failed: u64,
    empty: u64,
    /// Events the kernel side lost (the record misses them).
    pub(super) lost: u64,
    /// The watch's start, CLOCK_MONOTONIC ns: the record's time origin.
    pub(super) start_ns: u64,
}

impl IoLog {
    /// One traced syscall `op` (index into [`super::SYSCALLS`]) on descriptor `fd`.
    pub(super) fn syscall(&mut self, start_ns: u64, io: Io, op: usize, fd: i32, who: &Names) {
        let (fdev, ino) = (io.fdev, io.ino);
        self.push(start_ns, io, op, who, |pid| path_of(pid, fd, fdev, ino));
    }

    /// One io_uring read or write (`write`): submitted `lat_ns` before it completed, by the
    /// thread `tid`. The request names its file, not a descriptor: its path is found among the
    /// files the process has open.
    pub(super) fn uring(&mut self, start_ns: u64, io: Io, write: bool, who: &Names) {
        let (fdev, ino) = (io.fdev, io.ino);
        let op = super::SYSCALLS.len() + usize::from(write);
        self.push(start_ns, io, op, who, |pid| path_by_inode(pid, fdev, ino));
    }

    fn push(
        &mut self,
        start_ns: u64,
        io: Io,
        op: usize,
        who: &Names,
        path: impl FnOnce(u32) -> Option<String>,
    ) {
        let Io {
            end_ns,
            lat_ns,
            pid,
            tid,
            fdev,
            ino,
            pos,
            bytes,
            failed,
        } = io;
        if failed {
            self.failed += 1;
            return;
        }
        if bytes == 0 {
            self.empty += 1;
            return;
        }
        let names = &mut self.names;
        let file = *self.files.entry((fdev, ino)).or_insert_with(|| {
            names.push(path(pid).unwrap_or_else(|| {
                format!("dev {}:{} inode {ino}", fdev >> 20, fdev & ((1 << 20) - 1))
            }));
            (names.len() - 1) as u32
        });
        self.procs.entry(pid).or_insert_with(|| {
            (
                who.comm(pid).unwrap_or_else(|| "(exited)".into()),
                String::new(),
            )
        });
        self.ios.push(LoggedIo {
            issue_ns: end_ns.saturating_sub(lat_ns).saturating_sub(start_ns),
            lat_ns,
            pid,
            tid,
            op: op as u8,
            file,
            pos,
            bytes,
        });
    }

    /// The I/Os recorded.
    pub fn len(&self) -> usize {
        self.ios.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ios.is_empty()
    }

    /// Name each process's PostgreSQL role (empty: none).
    pub(super) fn roles(&mut self, role: impl Fn(u32) -> String) {
        for (pid, (_, r)) in self.procs.iter_mut() {
            *r = role(*pid);
        }
    }

    /// Write the record file, its I/Os in order of issue.
    pub fn write_to(&mut self, w: &mut dyn Write) -> std::io::Result<()> {
        self.ios.sort_by_key(|x| x.issue_ns);
        writeln!(w, "{HEADER}")?;
        writeln!(w, "# start CLOCK_MONOTONIC ns {}", self.start_ns)?;
        writeln!(
            w,
            "# issue_ns\tlatency_ns\tpid\ttid\tcomm\trole\top\toffset\tbytes\tfile \
             (issue_ns from the watch's start; see iolens' src/watch/io_record.rs)"
        )?;
        let procs: HashMap<u32, (String, String)> = self
            .procs
            .iter()
            .map(|(p, (c, r))| {
                let r = if r.is_empty() { "-".into() } else { escape(r) };
                (*p, (escape(c), r))
            })
            .collect();
        let names: Vec<String> = self.names.iter().map(|n| escape(n)).collect();
        let mut w = std::io::BufWriter::new(w);
        for x in &self.ios {
            let (comm, role) = &procs[&x.pid];
            let op = op_name(x.op);
            write!(
                w,
                "{}\t{}\t{}\t{}\t{comm}\t{role}\t{op}\t",
                x.issue_ns, x.lat_ns, x.pid, x.tid
            )?;
            if x.pos == u64::MAX {
                w.write_all(b"-")?;
            } else {
                write!(w, "{}", x.pos)?;
            }
            writeln!(w, "\t{}\t{}", x.bytes, names[x.file as usize])?;
        }
        writeln!(
            w,
            "# end: {} I/Os recorded; not recorded: {} failed, {} that transferred nothing; {} \
             events lost by the kernel side",
            self.ios.len(),
            self.failed,
            self.empty,
            self.lost
        )?;
        w.flush()
    }
}
