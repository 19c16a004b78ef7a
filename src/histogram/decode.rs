//! Decoding: any HdrHistogram V2 encoding, bounded ([`decode_v2_bounded`]), and the counts of
//! the standard layout read straight from their V2-deflate encoding ([`V2Scan`]).

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use super::{
    standard_reference, value_of, Hist, SpreadReader, HIST_MAX_NS, MAX_HIST_BYTES, SIGFIG,
    V2_COOKIE, V2_DEFLATE_COOKIE, V2_HEADER,
};

/// Decode an HdrHistogram V2 or V2-deflate encoding, checking every declared length against
/// the bytes actually present (and decompressing at most [`MAX_HIST_BYTES`]) before anything
/// is allocated: a crafted header cannot make the decoder allocate gigabytes.
pub(crate) fn decode_v2_bounded(bytes: &[u8]) -> Result<Histogram<u64>> {
    use std::io::Read as _;
    let be32 = |b: &[u8], at: usize| -> Option<u32> {
        b.get(at..at + 4)
            .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
    };
    let inflated;
    let raw: &[u8] = match be32(bytes, 0) {
        Some(V2_COOKIE) => bytes,
        Some(V2_DEFLATE_COOKIE) => {
            let declared = be32(bytes, 4).context("histogram is truncated (no length)")? as usize;
            let held = bytes.len() - 8;
            if declared > held {
                bail!("histogram declares {declared} compressed bytes but holds only {held}");
            }
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(&bytes[8..8 + declared])
                .take(MAX_HIST_BYTES as u64 + 1)
                .read_to_end(&mut out)
                .context("histogram's compressed data is corrupt")?;
            if out.len() > MAX_HIST_BYTES {
                bail!(
                    "histogram decompresses to more than {} MiB",
                    MAX_HIST_BYTES >> 20
                );
            }
            inflated = out;
            &inflated
        }
        Some(c) => bail!("histogram is not an HdrHistogram V2 encoding (cookie {c:#010x})"),
        None => bail!("histogram is truncated ({} bytes)", bytes.len()),
    };
    if raw.len() < V2_HEADER || be32(raw, 0) != Some(V2_COOKIE) {
        bail!("histogram's V2 header is missing or truncated");
    }
    let payload = be32(raw, 4).unwrap_or(0) as usize;
    if payload > raw.len() - V2_HEADER {
        bail!(
            "histogram declares a payload of {payload} bytes but holds only {}",
            raw.len() - V2_HEADER
        );
    }
    let digits = be32(raw, 12).unwrap_or(0);
    if digits > 5 {
        bail!("histogram declares {digits} significant digits (at most 5 are possible)");
    }
    let be64 = |at: usize| u64::from_be_bytes(raw[at..at + 8].try_into().expect("8 bytes"));
    let layout = V2Layout::of(be64(16), be64(24), digits as u8)?;
    if layout.counts_len > MAX_DENSE_COUNTS {
        // A layout far wider or finer than iolens keeps (say 1 ns .. 2^63 at 5 digits, 25 MB
        // of counts) is not built: its few counts are read and recorded at 3 digits, which is
        // what every reader of the histogram keeps of it anyway.
        return layout.decode_sparse(&raw[V2_HEADER..V2_HEADER + payload]);
    }
    Deserializer::new()
        .deserialize(&mut &raw[..V2_HEADER + payload])
        .map_err(|e| anyhow::anyhow!("histogram cannot be decoded: {e:?}"))
}

/// Largest counts array a decoded histogram is built with in its declared layout (1 MiB of
/// counts; the standard layout needs about 45,000). Wider layouts are read sparsely.
const MAX_DENSE_COUNTS: usize = 1 << 17;

/// The bucket layout a V2 header declares, computed as HdrHistogram does, without allocating.
struct V2Layout {
    low: u64,
    high: u64,
    unit_magnitude: u32,
    half_magnitude: u32,
    counts_len: usize,
}

impl V2Layout {
    fn of(low: u64, high: u64, digits: u8) -> Result<V2Layout> {
        if low < 1 || high < low.saturating_mul(2) || digits > 5 {
            bail!("histogram declares an impossible layout ({low}..{high}, {digits} digits)");
        }
        let single = 2 * 10u64.pow(digits as u32);
        let sub_magnitude = (single as f64).log2().ceil() as u32;
        let half_magnitude = sub_magnitude.max(1) - 1;
        let unit_magnitude = 63 - low.leading_zeros();
        if unit_magnitude + half_magnitude + 1 > 63 {
            bail!("histogram declares an impossible layout ({low}..{high}, {digits} digits)");
        }
        let sub_count = 1u64 << (half_magnitude + 1);
        let mut smallest_untrackable = sub_count << unit_magnitude;
        let mut buckets = 1usize;
        while smallest_untrackable <= high {
            if smallest_untrackable > u64::MAX / 2 {
                buckets += 1;
                break;
            }
            smallest_untrackable <<= 1;
            buckets += 1;
        }
        Ok(V2Layout {
            low,
            high,
            unit_magnitude,
            half_magnitude,
            counts_len: (buckets + 1) << half_magnitude,
        })
    }

    /// The lowest value of counts index `i`.
    fn value_of(&self, i: usize) -> u64 {
        let half = 1usize << self.half_magnitude;
        let mut bucket = (i >> self.half_magnitude) as i64 - 1;
        let mut sub = (i & (half - 1)) + half;
        if bucket < 0 {
            sub -= half;
            bucket = 0;
        }
        (sub as u64)
            .checked_shl(bucket as u32 + self.unit_magnitude)
            .unwrap_or(u64::MAX)
    }

    /// Read the zig-zag LEB128 counts `payload` (runs of zeros as negative numbers) into a
    /// 3-digit histogram of the declared range: time and memory follow the payload, not the
    /// declared layout.
    fn decode_sparse(&self, payload: &[u8]) -> Result<Histogram<u64>> {
        let mut h = Histogram::<u64>::new_with_bounds(self.low, self.high, SIGFIG)
            .map_err(|e| anyhow::anyhow!("histogram cannot be decoded: {e:?}"))?;
        let (mut at, mut index) = (0usize, 0usize);
        while at < payload.len() {
            let Some((v, k)) = read_leb128(payload, at) else {
                bail!("histogram cannot be decoded: its counts end inside a number");
            };
            at += k;
            let n = unzigzag(v);
            if n < 0 {
                index = index.saturating_add(n.unsigned_abs() as usize);
            } else {
                if index >= self.counts_len {
                    bail!(
                        "histogram cannot be decoded: its counts run past the {} its layout holds",
                        self.counts_len
                    );
                }
                if n > 0 {
                    h.record_n(self.value_of(index), n as u64)
                        .map_err(|e| anyhow::anyhow!("histogram cannot be decoded: {e:?}"))?;
                }
                index += 1;
            }
            if index > self.counts_len {
                bail!(
                    "histogram cannot be decoded: its counts run past the {} its layout holds",
                    self.counts_len
                );
            }
        }
        Ok(h)
    }
}

/// Reads the counts of a V2-deflate encoding of a histogram in the project's standard layout
/// (lowest value 1 ns, 3 significant digits, at most [`HIST_MAX_NS`]) without building the
/// histogram: one reused inflate state and output buffer, no counts array allocated or cleared
/// per call. It accepts only what [`decode_v2_bounded`] and HdrHistogram's decoder accept (and
/// refuses anything else: callers then take that general path, which reports the error), so a
/// long run's thousands of interval histograms are checked and merged several times faster.
///
/// It inflates with zlib-rs (the deflate streams are those any zlib writes; its inflater is
/// about 1.5 times as fast as miniz_oxide's on these small streams, which are mostly Huffman
/// table set-up), and reads the counts' LEB128 with a one-byte fast path.
pub(crate) struct V2Scan {
    b64: Vec<u8>,
    /// The inflated V2 encoding is `raw[..raw_len]`; `raw` only grows.
    raw: Vec<u8>,
    raw_len: usize,
    z: zlib_rs::Inflate,
    /// Counts-array length of the standard layout by highest trackable value.
    lens: Vec<(u64, usize)>,
    /// The reader of spread-bucket histograms (their counts are the standard layout's).
    spread: SpreadReader,
}

impl Default for V2Scan {
    fn default() -> Self {
        V2Scan::new()
    }
}

impl V2Scan {
    /// A scanner.
    pub(crate) fn new() -> V2Scan {
        V2Scan {
            b64: Vec::new(),
            raw: Vec::new(),
            raw_len: 0,
            z: zlib_rs::Inflate::new(true, 15),
            lens: Vec::new(),
            spread: SpreadReader::default(),
        }
    }

    /// How many values the counts [`V2Scan::scan`] read hold, when that sum does not overflow
    /// and the highest of them lies within the project-wide range ([`HIST_MAX_NS`]); `None`
    /// otherwise (the general path then reports why).
    pub(crate) fn len_in_range(counts: &[(usize, u64)]) -> Option<u64> {
        static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let reference = standard_reference();
        let limit = *LIMIT.get_or_init(|| reference.highest_equivalent(reference.high()));
        let mut len = 0u64;
        for &(_, n) in counts {
            len = len.checked_add(n)?;
        }
        let max = counts
            .last()
            .map_or(0, |&(i, _)| reference.highest_equivalent(value_of(i)));
        (max <= limit).then_some(len)
    }

    /// Inflate the zlib stream `zdata` into `raw[..raw_len]`: false unless it ends cleanly
    /// (checksum verified) within [`MAX_HIST_BYTES`].
    fn inflate(&mut self, zdata: &[u8]) -> bool {
        self.z.reset(true);
        let mut out = 0usize;
        loop {
            if out == self.raw.len() {
                if self.raw.len() > MAX_HIST_BYTES {
                    return false;
                }
                let grow = (self.raw.len() * 2).clamp(1 << 16, MAX_HIST_BYTES + 1);
                self.raw.resize(grow, 0);
            }
            let (in0, out0) = (self.z.total_in(), self.z.total_out());
            let Some(rest) = zdata.get(in0 as usize..) else {
                return false;
            };
            let status =
                self.z
                    .decompress(rest, &mut self.raw[out..], zlib_rs::InflateFlush::Finish);
            out = self.z.total_out() as usize;
            match status {
                Ok(zlib_rs::Status::StreamEnd) => break,
                Ok(_) if self.z.total_in() != in0 || self.z.total_out() != out0 => {}
                _ => return false,
            }
        }
        self.raw_len = out;
        out <= MAX_HIST_BYTES
    }

    /// The non-zero `(counts index, count)` of `hist` into `out` (cleared first), ascending;
    /// false when `hist` is neither a clean V2-deflate encoding of the standard layout nor a
    /// well-formed spread-bucket one.
    pub(crate) fn scan(&mut self, hist: &Hist, out: &mut Vec<(usize, u64)>) -> bool {
        out.clear();
        let text = hist.as_base64();
        if text.is_empty() {
            return true;
        }
        if hist.is_spread() {
            return self.spread.read(text, out).is_ok();
        }
        self.b64.clear();
        if base64::engine::general_purpose::STANDARD
            .decode_vec(text, &mut self.b64)
            .is_err()
        {
            return false;
        }
        let be32 = |b: &[u8], at: usize| -> Option<u32> {
            Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
        };
        let be64 = |b: &[u8], at: usize| -> Option<u64> {
            Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
        };
        let b = std::mem::take(&mut self.b64);
        let inflated = be32(&b, 0) == Some(V2_DEFLATE_COOKIE)
            && be32(&b, 4)
                .and_then(|d| b.get(8..8 + d as usize))
                .is_some_and(|zdata| self.inflate(zdata));
        self.b64 = b;
        if !inflated {
            return false;
        }
        let r = &self.raw[..self.raw_len];
        let (Some(V2_COOKIE), Some(payload), Some(0), Some(3), Some(1), Some(high), Some(ratio)) = (
            be32(r, 0),
            be32(r, 4),
            be32(r, 8),
            be32(r, 12),
            be64(r, 16),
            be64(r, 24),
            be64(r, 32),
        ) else {
            return false;
        };
        if f64::from_bits(ratio) != 1.0 || !(2..=HIST_MAX_NS).contains(&high) {
            return false;
        }
        let len = match self.lens.iter().find(|(h, _)| *h == high) {
            Some(&(_, l)) => l,
            None => match Histogram::<u64>::new_with_bounds(1, high, SIGFIG) {
                Ok(h) => {
                    if self.lens.len() >= 64 {
                        self.lens.clear();
                    }
                    self.lens.push((high, h.distinct_values()));
                    h.distinct_values()
                }
                Err(_) => return false,
            },
        };
        let Some(p) = r.get(V2_HEADER..V2_HEADER + payload as usize) else {
            return false;
        };
        // LEB128 values, at most 9 bytes, the 9th contributing all 8 bits (HdrHistogram's),
        // zig-zag signed: a count (>= 0) at the next index, or a run of zeros (< 0). Nearly all
        // are one byte: eight of those are read at a time, without a branch on their values.
        let mut at = 0usize;
        let mut index = 0usize;
        let mut buf = [(0usize, 0u64); 64];
        let mut k = 0usize;
        let mut beyond = false;
        /// One value into `buf[k]` (kept when a non-zero count): false when it moves the
        /// index past `usize`; a count beyond the layout's `len` sets `beyond`.
        #[inline(always)]
        fn put(
            v: u64,
            (index, k): (&mut usize, &mut usize),
            buf: &mut [(usize, u64); 64],
            beyond: &mut bool,
            len: usize,
        ) -> bool {
            let n = unzigzag(v);
            let count = n >= 0;
            *beyond |= count & (*index >= len);
            buf[*k & 63] = (*index, n as u64);
            *k += (n > 0) as usize;
            let step = if count { 1 } else { n.unsigned_abs() as usize };
            match index.checked_add(step) {
                Some(i) => {
                    *index = i;
                    true
                }
                None => false,
            }
        }
        loop {
            if k > 64 - 8 {
                out.extend_from_slice(&buf[..k]);
                k = 0;
            }
            if let Some(w) = p.get(at..at + 8).and_then(|w| w.try_into().ok()) {
                let w = u64::from_le_bytes(w);
                if w & 0x8080_8080_8080_8080 == 0 {
                    for j in 0..8 {
                        if !put(
                            (w >> (8 * j)) & 0xff,
                            (&mut index, &mut k),
                            &mut buf,
                            &mut beyond,
                            len,
                        ) {
                            return false;
                        }
                    }
                    at += 8;
                    continue;
                }
            }
            if at >= p.len() {
                break;
            }
            let Some((v, used)) = read_leb128(p, at) else {
                return false;
            };
            at += used;
            if !put(v, (&mut index, &mut k), &mut buf, &mut beyond, len) {
                return false;
            }
        }
        out.extend_from_slice(&buf[..k]);
        !beyond
    }
}

/// One of HdrHistogram's LEB128 values of `p` at `at` (at most 9 bytes, the 9th contributing all
/// 8 bits) and the bytes it takes; `None` when `p` ends inside it.
#[inline]
fn read_leb128(p: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    let mut k = 0;
    loop {
        let b = *p.get(at + k)?;
        if k == 8 {
            return Some((v | ((b as u64) << 56), 9));
        }
        v |= ((b & 0x7f) as u64) << (7 * k);
        k += 1;
        if b & 0x80 == 0 {
            return Some((v, k));
        }
    }
}

/// The signed number a ZigZag-coded value stands for.
#[inline(always)]
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}
