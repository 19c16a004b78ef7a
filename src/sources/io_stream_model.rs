//! The stream of recorded I/Os that `iolens replay` issues, as every replay source builds it:
//! the formats, what to read, one recorded I/O and the ordered stream. Its own room so that the
//! readers ([`super::io_stream`] for traces, biosnoop, blkparse and fio iologs;
//! [`super::watch_record`] for `watch --record` logs) share it without importing one another.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use crate::results::evidence::SourceFile;

/// Default database block size for traces (`db_block_size` is not in a 10046 trace).
pub const DEFAULT_TRACE_BLOCK: u64 = 8192;

/// What the sources are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFormat {
    /// Decided from each file's first lines.
    Auto,
    Oracle10046,
    Biosnoop,
    Blkparse,
    FioIolog,
    /// `iolens watch --record`.
    WatchRecord,
}

impl StreamFormat {
    pub fn name(self) -> &'static str {
        match self {
            StreamFormat::Auto => "auto",
            StreamFormat::Oracle10046 => "oracle-10046",
            StreamFormat::Biosnoop => "biosnoop",
            StreamFormat::Blkparse => "blkparse",
            StreamFormat::FioIolog => "fio-iolog",
            StreamFormat::WatchRecord => "watch-record",
        }
    }
}

/// What to read.
#[derive(Debug, Clone)]
pub struct StreamOptions {
    pub files: Vec<PathBuf>,
    pub format: StreamFormat,
    /// Bytes per block of a trace's block numbers (`None`: [`DEFAULT_TRACE_BLOCK`]).
    pub block_size: Option<u64>,
}

/// One recorded I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRecord {
    /// Issue time, ns from the stream's first issue.
    pub t_ns: u64,
    /// The latency it had when recorded (ns).
    pub latency_ns: u64,
    /// Index into [`IoStream::sessions`].
    pub session: u32,
    /// Index into [`IoStream::files`].
    pub file: u32,
    /// Byte offset in its file.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
    pub write: bool,
    /// Index into [`IoStream::events`] (the trace's event, or `read`/`write`).
    pub event: u32,
}

/// The recorded I/Os of all sources, ordered by issue time (ties keep source order, so each
/// session's own order is kept).
#[derive(Clone, Debug, Default)]
pub struct IoStream {
    /// The format read (`oracle-10046`, `biosnoop`).
    pub source: String,
    /// Session names (`SESSION ID`, `pid 1234`).
    pub sessions: Vec<String>,
    /// File names as the source names them (`file#25`, `disk vda`).
    pub files: Vec<String>,
    /// Event or operation names.
    pub events: Vec<String>,
    pub records: Vec<IoRecord>,
    /// Bytes per block the offsets were computed with (traces), or 512 (sectors).
    pub block_size: u64,
    /// Recorded waits or rows not replayable, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Whether the records hold their recorded latency (an fio iolog holds none).
    pub latency_known: bool,
    /// How each input line was used.
    pub inputs: Vec<SourceFile>,
}

impl IoStream {
    /// Recorded span: first issue to last completion (ns).
    pub fn span_ns(&self) -> u64 {
        self.records
            .iter()
            .map(|r| r.t_ns.saturating_add(r.latency_ns))
            .max()
            .unwrap_or(0)
    }

    /// For each file, the end of the highest byte any record touches.
    pub fn file_extents(&self) -> Vec<u64> {
        let mut ext = vec![0u64; self.files.len()];
        for r in &self.records {
            let e = &mut ext[r.file as usize];
            *e = (*e).max(r.offset.saturating_add(r.size));
        }
        ext
    }

    pub(super) fn index(
        names: &mut Vec<String>,
        map: &mut HashMap<String, u32>,
        name: &str,
    ) -> u32 {
        if let Some(&i) = map.get(name) {
            return i;
        }
        let i = names.len() as u32;
        names.push(name.to_string());
        map.insert(name.to_string(), i);
        i
    }
}

/// Raw record before the stream's time origin is known.
pub(super) struct Raw {
    pub(super) t_ns: i64,
    pub(super) rec: IoRecord,
}
