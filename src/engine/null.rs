//! The null engine: completes every I/O at once without touching storage, so a run measures
//! only the tool's own cost per I/O (offset generation, clock reads, histogram recording).

use std::io;

use super::IoEngine;
use crate::workload::IoOp;

/// Completes pushed I/Os immediately with their full length.
#[derive(Default)]
pub(crate) struct NullEngine {
    pending: Vec<(u32, usize)>,
}

impl IoEngine for NullEngine {
    #[inline]
    fn push(&mut self, slot: u32, _op: IoOp, _file: u32, _offset: u64, _buf: *mut u8, len: usize) {
        self.pending.push((slot, len));
    }

    #[inline]
    fn complete(
        &mut self,
        done: &mut impl FnMut(u32, i64),
        _until: Option<std::time::Instant>,
    ) -> io::Result<()> {
        for (slot, len) in self.pending.drain(..) {
            done(slot, len as i64);
        }
        Ok(())
    }

    fn sync(&mut self, _file: u32) -> io::Result<()> {
        Ok(())
    }
}
