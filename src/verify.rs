//! `iolens verify`'s work: check every stamped unit of a scratch file offline (checksum,
//! address, target id, and the generation journal's record of stale blocks), and the hidden
//! `--bench` that measures what stamping and verification cost. The block format itself is
//! [`crate::stamp`].

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use serde::Serialize;

use crate::results::{CorruptionReport, VerifyStats};
use crate::stamp::*;

/// Options of [`verify_target`].
#[derive(Clone, Debug)]
pub struct OfflineOptions {
    pub full: bool,
    pub chunk: usize,
    pub stop_at_first: bool,
    pub direct: bool,
    pub progress: bool,
    /// Compare stamps with the generation journal (stale blocks); a missing or damaged
    /// journal is then reported.
    pub journal: bool,
}

/// Check every stamped unit of scratch file `path`. Returns a [`crate::results::RunResult`]
/// with the read latency of each chunk, [`VerifyStats`] and the corruption found.
pub fn verify_target(
    path: &Path,
    o: &OfflineOptions,
    stop: &AtomicBool,
) -> Result<crate::results::RunResult> {
    use crate::histogram::{new_histogram, record_ns};
    use crate::results::{Hist, Interval, OpResult, RunResult};
    use crate::target::HEADER_AREA;

    if o.chunk == 0 || !o.chunk.is_multiple_of(UNIT) || o.chunk > 256 << 20 {
        bail!("--bs must be a multiple of 512 bytes, at most 256 MiB");
    }
    // Opened once, by descriptor; a damaged header is corruption (exit 3), left as found.
    let (file, h, len) = crate::target::open_for_verify(path, o.direct)?;
    let _lock = lock(&file, false, path)?;
    let mut journal = if o.journal {
        Some(crate::journal::open_for_verify(path, &file, h.id)?)
    } else {
        None
    };
    let end = HEADER_AREA + h.filled_upto;
    let mut reports: Vec<CorruptionReport> = Vec::new();
    let mut problems = 0u64;
    let mut note = String::new();
    if h.filled_upto < h.data_size {
        note = format!(
            "fill incomplete: {} of {} stamped (the next run completes it)",
            crate::units::fmt_bytes(h.filled_upto),
            crate::units::fmt_bytes(h.data_size)
        );
    }
    let readable_end = end.min(len);
    if len < end {
        problems += 1;
        reports.push(CorruptionReport {
            kind: CorruptionKind::Truncated,
            offset: len,
            io_offset: len,
            io_len: end - len,
            expected: format!("data up to offset {end}"),
            found: format!("file ends at offset {len}"),
            message: format!(
                "target truncated: its header says the data area ends at offset {end}, the file \
                 ends at {len} ({} missing)",
                crate::units::fmt_bytes(end - len)
            ),
            session: 0,
            time_s: 0.0,
            units: 0,
            target: String::new(),
        });
    }
    let total = readable_end.saturating_sub(HEADER_AREA);
    let pb = crate::progress::bar(o.progress, total, &format!("verifying {}", path.display()));
    let mut hist = new_histogram();
    let mut units = 0u64;
    let mut rewritten = 0u64;
    let mut bytes = 0u64;
    let chunk = o.chunk;
    let t0 = Instant::now();
    let mut verify_ns = 0u64;
    let stop_early = AtomicBool::new(false);
    let mut read_err: Option<String> = None;
    let mut found: Vec<Problem> = Vec::new();
    std::thread::scope(|sc| -> Result<()> {
        let (free_tx, free_rx) = std::sync::mpsc::channel::<crate::engine::AlignedBuf>();
        let (full_tx, full_rx) = std::sync::mpsc::channel::<(
            crate::engine::AlignedBuf,
            u64,
            std::io::Result<usize>,
            u64,
        )>();
        for i in 0..3 {
            let _ = free_tx.send(crate::engine::AlignedBuf::new(1, chunk, i));
        }
        let file = &file;
        let stop_early = &stop_early;
        sc.spawn(move || {
            let mut pos = HEADER_AREA;
            while pos < readable_end {
                let Ok(mut b) = free_rx.recv() else { break };
                if stop.load(Ordering::Relaxed) || stop_early.load(Ordering::Relaxed) {
                    break;
                }
                let want = ((readable_end - pos) as usize).min(chunk);
                let want_aligned = want.div_ceil(UNIT) * UNIT;
                let s = Instant::now();
                let r = read_full(file, &mut b.as_mut_slice()[..want_aligned], pos)
                    .map(|n| n.min(want));
                let ns = s.elapsed().as_nanos() as u64;
                let failed = r.is_err();
                if full_tx.send((b, pos, r, ns)).is_err() || failed {
                    break;
                }
                pos += want as u64;
            }
        });
        while let Ok((mut b, pos, r, ns)) = full_rx.recv() {
            let n = match r {
                Ok(n) => n,
                Err(e) => {
                    read_err = Some(format!("read at offset {pos} failed: {e}"));
                    break;
                }
            };
            record_ns(&mut hist, ns);
            bytes += n as u64;
            let vs = Instant::now();
            let data = &b.as_mut_slice()[..n];
            let mut bad = 0u64;
            let first_found = found.len();
            units += check(data, h.id, pos, o.full, None, |p| {
                bad += 1;
                if found.len() < 100_000 {
                    found.push(p);
                }
            });
            if let Some(crate::journal::VerifyJournal::Ok(j)) = &mut journal {
                bad += stale_units(data, h.id, pos, j, &mut found, first_found);
            }
            if !found.is_empty() {
                for (p, k) in group(&found) {
                    if reports.len() < 1000 {
                        let t = t0.elapsed().as_secs_f64();
                        reports.push(report(&p, k, pos, n as u64, 0, t));
                    }
                }
                found.clear();
            }
            for u in data.chunks_exact(UNIT) {
                if rd64(u, 24) != 0 && u[0..4] == MAGIC {
                    rewritten += 1;
                }
            }
            verify_ns += vs.elapsed().as_nanos() as u64;
            problems += bad;
            pb.inc(n as u64);
            if n == 0 {
                break;
            }
            if bad > 0 && o.stop_at_first {
                stop_early.store(true, Ordering::Relaxed);
                break;
            }
            let _ = free_tx.send(b);
        }
        drop(free_tx);
        Ok(())
    })?;
    pb.finish_and_clear();
    if let Some(e) = read_err {
        bail!("{}: {e}", path.display());
    }
    let jnote = journal_findings(journal.as_ref(), rewritten, &mut reports, &mut problems);
    if !jnote.is_empty() {
        note = if note.is_empty() {
            jnote
        } else {
            format!("{note}; {jnote}")
        };
    }
    let dur = t0.elapsed().as_secs_f64();
    let mut op = OpResult::new(
        "read",
        &hist,
        bytes,
        vec![Interval {
            start_s: 0.0,
            duration_s: dur,
            count: hist.len(),
            bytes,
            hist: Hist::encode(&hist),
        }],
    );
    op.errors = 0;
    let stats = VerifyStats {
        mode: if o.full {
            VerifyMode::Full
        } else {
            VerifyMode::Header
        },
        unit_bytes: UNIT as u64,
        reads_verified: hist.len(),
        units_verified: units,
        ns_per_read: verify_ns as f64 / hist.len().max(1) as f64,
        ns_per_unit: verify_ns as f64 / units.max(1) as f64,
        errors: problems,
        units_rewritten: rewritten,
        stopped: stop.load(Ordering::Relaxed) || (o.stop_at_first && problems > 0),
        note,
        ..Default::default()
    };
    let mut r = RunResult {
        name: format!("verify {}", path.display()),
        phase: "verify".into(),
        spec: crate::results::Spec::of(serde_json::json!({
            "target": path.display().to_string(),
            "mode": stats.mode,
            "read_size": chunk,
            "direct": o.direct,
            "target_id": format!("{:016x}", h.id),
            "data_size": h.data_size,
            "filled_upto": h.filled_upto,
        }))?,
        started: humantime::format_rfc3339_millis(
            std::time::SystemTime::now() - Duration::from_secs_f64(dur),
        )
        .to_string(),
        duration_s: dur,
        interval_s: dur,
        ops: vec![op],
        interrupted: stop.load(Ordering::Relaxed),
        ..Default::default()
    };
    r.verify = Some(stats);
    r.corruption = reports;
    Ok(r)
}

/// Compare the generation of every unit of `data` (read at absolute `pos`) that passed the
/// other checks (not among `found[first..]`) with the journal's bound; push and count stale
/// units.
fn stale_units(
    data: &[u8],
    id: u64,
    pos: u64,
    j: &mut crate::journal::JournalReader,
    found: &mut Vec<Problem>,
    first: usize,
) -> u64 {
    use crate::target::HEADER_AREA;
    let skip = ((UNIT as u64 - pos % UNIT as u64) % UNIT as u64) as usize;
    if skip >= data.len() {
        return 0;
    }
    let mut bad = 0;
    let mut k = first;
    let end = found.len();
    for (i, u) in data[skip..].chunks_exact(UNIT).enumerate() {
        let off = pos + (skip + i * UNIT) as u64;
        while k < end && found[k].offset < off {
            k += 1;
        }
        if k < end && found[k].offset == off {
            continue; // already reported for something else
        }
        if off < HEADER_AREA || u[0..4] != MAGIC || rd64(u, 8) != id || rd64(u, 16) != off {
            continue;
        }
        let Some(want) = j.bound(off - HEADER_AREA) else {
            continue;
        };
        let g = rd64(u, 24);
        if g < want {
            bad += 1;
            if found.len() < 100_000 {
                found.push(Problem {
                    kind: CorruptionKind::Stale,
                    offset: off,
                    expected: want,
                    found: g,
                });
            }
        }
    }
    // Keep offsets in order for grouping.
    if found.len() > end && end > first {
        found[first..].sort_by_key(|p| p.offset);
    }
    bad
}

/// Reports about the journal itself after a whole scan: missing (when workloads rewrote
/// blocks), damaged header, damaged pages. Returns a note describing the journal.
fn journal_findings(
    journal: Option<&crate::journal::VerifyJournal>,
    rewritten: u64,
    reports: &mut Vec<CorruptionReport>,
    problems: &mut u64,
) -> String {
    use crate::journal::VerifyJournal;
    let mut push =
        |kind: CorruptionKind, offset: u64, len: u64, expected: String, found: String, m| {
            *problems += 1;
            reports.push(CorruptionReport {
                kind,
                offset,
                io_offset: offset,
                io_len: len,
                expected,
                found,
                message: m,
                session: 0,
                time_s: 0.0,
                units: 0,
                target: String::new(),
            });
        };
    match journal {
        None => "generation journal not used (--no-journal): stale blocks are not detected".into(),
        Some(VerifyJournal::Missing(p)) if rewritten > 0 => {
            push(
                CorruptionKind::JournalMissing,
                0,
                0,
                format!("generation journal {}", p.display()),
                "no such file".into(),
                format!(
                    "generation journal {} is missing, but workloads have rewritten {rewritten} \
                     unit(s): stale blocks (restored from an older copy) cannot be detected. \
                     Use --no-journal to check without it",
                    p.display()
                ),
            );
            String::new()
        }
        Some(VerifyJournal::Missing(_)) => {
            "no generation journal (no workload has written this file since its fill)".into()
        }
        Some(VerifyJournal::Damaged { path, why }) => {
            push(
                CorruptionKind::JournalDamaged,
                0,
                0,
                format!("generation journal {}", path.display()),
                why.clone(),
                format!(
                    "generation journal {} is unusable: {why}; stale blocks cannot be detected. \
                     Use --no-journal to check without it",
                    path.display()
                ),
            );
            String::new()
        }
        Some(VerifyJournal::Ok(j)) => {
            for &no in &j.damaged_pages {
                let (a, b) = j.page_range(no);
                let (a, b) = (
                    a + crate::target::HEADER_AREA,
                    b + crate::target::HEADER_AREA,
                );
                push(
                    CorruptionKind::JournalDamaged,
                    a,
                    b - a,
                    format!("journal page {no} intact"),
                    "checksum mismatch or missing".into(),
                    format!(
                        "generation journal {}: page {no} is torn, damaged or missing; stale \
                         blocks at offsets {a}..{b} cannot be detected",
                        j.path.display()
                    ),
                );
            }
            j.describe()
        }
    }
}

/// pread until `buf` is full or the file ends; returns the bytes read.
fn read_full(f: &File, buf: &mut [u8], mut pos: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], pos) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                pos += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Stamping and verification cost measured in memory, ns per block.
#[derive(Clone, Debug, Serialize)]
pub struct BenchFigures {
    pub(crate) block_bytes: u64,
    pub(crate) stamp_ns: f64,
    pub(crate) header_hot_ns: f64,
    pub full_hot_ns: f64,
    pub(crate) header_cold_ns: f64,
    pub(crate) full_cold_ns: f64,
}

/// Measure stamping and verification of `bs`-byte blocks: hot (one block, in CPU cache, as
/// right after a buffered read) and cold (a 256 MiB region, from memory, as after DMA).
pub fn bench(bs: u64) -> Result<BenchFigures> {
    if bs == 0 || !bs.is_multiple_of(UNIT as u64) || bs > 64 << 20 {
        bail!("--bench-bs must be a multiple of 512 bytes, at most 64 MiB");
    }
    let bs = bs as usize;
    let id = 0x1234_5678_9abc_def1u64;
    let region = (256usize << 20).max(bs * 4) / bs * bs;
    let mut buf = crate::engine::AlignedBuf::new(1, region, 7);
    let data = buf.as_mut_slice();
    for (i, b) in data[..region].chunks_exact_mut(bs).enumerate() {
        stamp(b, id, (i * bs) as u64, 1);
    }
    // Median of 7 timed passes (after a warm-up pass): robust to a shared machine's noise.
    let time = |f: &mut dyn FnMut(usize) -> u64, iters: usize| -> f64 {
        let mut acc = 0;
        for i in 0..iters {
            acc += f(i);
        }
        let mut passes: Vec<f64> = (0..7)
            .map(|_| {
                let t = Instant::now();
                for i in 0..iters {
                    acc += f(i);
                }
                t.elapsed().as_nanos() as f64 / iters as f64
            })
            .collect();
        std::hint::black_box(acc);
        passes.sort_by(f64::total_cmp);
        passes[3]
    };
    let iters = ((64usize << 20) / bs).max(64);
    let blocks = region / bs;
    let stamp_ns = {
        let mut one = data[..bs].to_vec();
        time(
            &mut |i| {
                stamp(&mut one, id, 0, i as u64);
                one[5] as u64
            },
            iters,
        )
    };
    let data: &[u8] = data;
    let run = |full: bool, hot: bool| {
        time(
            &mut |i| {
                let b = if hot { 0 } else { (i * 7919) % blocks };
                let blk = &data[b * bs..(b + 1) * bs];
                let mut bad = 0;
                let n = check(blk, id, (b * bs) as u64, full, Some(1), |_| bad += 1);
                std::hint::black_box(n + bad)
            },
            iters,
        )
    };
    Ok(BenchFigures {
        block_bytes: bs as u64,
        stamp_ns,
        header_hot_ns: run(false, true),
        full_hot_ns: run(true, true),
        header_cold_ns: run(false, false),
        full_cold_ns: run(true, false),
    })
}
