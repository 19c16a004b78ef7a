//! The record of `iolens watch --record FILE` (written by `src/watch/io_record.rs`), read as
//! a stream of I/Os for `iolens replay` (`--format watch-record`): I/O recorded live on one
//! storage, replayed on another.
//!
//! The file is text: a first line `# iolens watch record 1`, comment lines (`#`; the second
//! is `# start CLOCK_MONOTONIC ns N`, the watch's start, from which times count), then one line
//! per I/O of tab-separated columns
//! `issue_ns latency_ns pid tid comm role op offset bytes file`:
//! - `issue_ns`: the syscall's entry, ns from the watch's start (CLOCK_MONOTONIC);
//!   `latency_ns` its entry to its exit: the I/O was in flight from `issue_ns` for `latency_ns`;
//! - `pid`, `tid`: the process and the thread (a replay session is one thread: its syscalls
//!   never overlapped; threads that ran at once replay at once);
//! - `comm`: the process's name; `role`: its PostgreSQL role (`checkpointer`, `client
//!   backend`), `-` for none;
//! - `op`: the syscall (`pread64`, `pwrite64`, `preadv`, `preadv2`, `pwritev`, `pwritev2`), or
//!   `io_uring_read` / `io_uring_write` for an io_uring request (any of its read or write
//!   opcodes; `issue_ns` is its submission, `latency_ns` to its completion, `tid` the thread
//!   that submitted it: one thread's requests may overlap); reads and writes are told apart by
//!   it;
//! - `offset`: the file offset the syscall or request named, in bytes; `-` for one at the
//!   file's position (offset −1: preadv2/pwritev2, an io_uring read or write), which a replay
//!   cannot place;
//! - `bytes`: the bytes it transferred (its return value);
//! - `file`: the file's path as the process had it open (read from /proc when first seen), or
//!   `dev M:m inode N` when it could not be read.
//!
//! `comm`, `role` and `file` have `%`, tab, newline and carriage return written as `%25`, `%09`,
//! `%0A`, `%0D`. Failed syscalls and those that transferred nothing are not written (a trailing
//! comment counts them).

use std::collections::HashMap;

use anyhow::{bail, Result};

use super::io_stream_model::{IoRecord, IoStream, Raw, StreamOptions};
use super::LineReader;

/// The first line of a record file.
pub const HEADER: &str = "# iolens watch record 1";

/// The `op` of an io_uring read and of an io_uring write.
pub const URING_OPS: [&str; 2] = ["io_uring_read", "io_uring_write"];

/// Escape `%`, tab, newline and carriage return.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '%' => o.push_str("%25"),
            '\t' => o.push_str("%09"),
            '\n' => o.push_str("%0A"),
            '\r' => o.push_str("%0D"),
            c => o.push(c),
        }
    }
    o
}

/// The inverse of [`escape`].
pub fn unescape(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let mut o = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('%') {
        o.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3);
        let c = match code {
            Some("25") => Some('%'),
            Some("09") => Some('\t'),
            Some("0A") => Some('\n'),
            Some("0D") => Some('\r'),
            _ => None,
        };
        match c {
            Some(c) => {
                o.push(c);
                rest = &rest[i + 3..];
            }
            None => {
                o.push('%');
                rest = &rest[i + 1..];
            }
        }
    }
    o.push_str(rest);
    o
}

/// Read record files into the stream: each thread a session, each file a file, each syscall
/// its event; I/Os at the file's position (no offset) are counted as skipped.
pub(super) fn read_records(opts: &StreamOptions, s: &mut IoStream) -> Result<Vec<Raw>> {
    let (mut smap, mut fmap, mut emap) = (HashMap::new(), HashMap::new(), HashMap::new());
    let mut raw = Vec::new();
    for p in &opts.files {
        let mut r = LineReader::open(p)?;
        let mut first = true;
        let mut at_position = 0u64;
        while let Some(line) = r.next_line()? {
            let line = String::from_utf8_lossy(line).into_owned();
            if first {
                first = false;
                if line.trim_end() != HEADER {
                    bail!(
                        "{}: not an iolens watch record (its first line is `{HEADER}`)",
                        p.display()
                    );
                }
                r.ignored("header");
                continue;
            }
            if line.starts_with('#') {
                r.ignored("comment");
                continue;
            }
            if line.trim().is_empty() {
                r.ignored("blank");
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() != 10 {
                r.unparsed("a record line has 10 tab-separated columns");
                continue;
            }
            let num = |x: &str| x.parse::<u64>().ok();
            let (Some(issue), Some(lat), Some(pid), Some(tid), Some(bytes)) =
                (num(f[0]), num(f[1]), num(f[2]), num(f[3]), num(f[8]))
            else {
                r.unparsed("a record line with a non-numeric time, latency, pid, tid or size");
                continue;
            };
            let write = match f[6] {
                "pread64" | "preadv" | "preadv2" => false,
                "pwrite64" | "pwritev" | "pwritev2" => true,
                op if op == URING_OPS[0] => false,
                op if op == URING_OPS[1] => true,
                _ => {
                    r.unparsed("a record line whose op is not a positioned read or write");
                    continue;
                }
            };
            let offset = if f[7] == "-" {
                at_position += 1;
                r.parsed();
                continue;
            } else if let Some(o) = num(f[7]) {
                o
            } else {
                r.unparsed("a record line with a non-numeric offset");
                continue;
            };
            let (comm, role) = (unescape(f[4]), unescape(f[5]));
            let who = if role == "-" {
                comm
            } else {
                format!("{comm} ({role})")
            };
            let session = IoStream::index(
                &mut s.sessions,
                &mut smap,
                &format!("{who} pid {pid} tid {tid}"),
            );
            let file = IoStream::index(&mut s.files, &mut fmap, &unescape(f[9]));
            let event = IoStream::index(&mut s.events, &mut emap, f[6]);
            raw.push(Raw {
                t_ns: issue as i64,
                rec: IoRecord {
                    t_ns: 0,
                    latency_ns: lat,
                    session,
                    file,
                    offset,
                    size: bytes,
                    write,
                    event,
                },
            });
            r.parsed();
        }
        if at_position > 0 {
            *s.skipped
                .entry("I/Os at the file's position (offset -1)".into())
                .or_default() += at_position;
        }
        s.inputs.push(r.file_stats(p));
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips() {
        for s in ["plain", "a\tb\nc\rd%e", "%25", "100%", "%zz"] {
            assert_eq!(unescape(&escape(s)), s);
            assert!(!escape(s).contains(['\t', '\n', '\r']));
        }
    }
}
