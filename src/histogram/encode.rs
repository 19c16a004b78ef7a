//! Encoding: V2-deflate writers that reuse their deflate state ([`HistEncoder`]) and write the
//! V2 bytes of counts kept by index without building a histogram ([`IndexCounts`]).

use hdrhistogram::Histogram;

use super::quick::{QuickDeflate, MAX_QUICK};
use super::{index_of, Hist, HIST_MAX_NS, SIGFIG, V2_COOKIE, V2_DEFLATE_COOKIE};

/// Encodes histograms in HdrHistogram's V2-deflate format (the bytes [`Hist`] holds) reusing
/// one deflate state: hdrhistogram's own serializer allocates a fresh deflate state (~300 KB,
/// zeroed) per histogram, which dominated encoding many small interval histograms. Inputs up
/// to 16 KiB (nearly all) are deflated by [`QuickDeflate`], the same bytes without zlib-rs'
/// reset of a 128 KiB table per stream.
pub(crate) struct HistEncoder {
    v2: hdrhistogram::serialization::V2Serializer,
    raw: Vec<u8>,
    out: Vec<u8>,
    z: zlib_rs::Deflate,
    /// The same deflate for small inputs (nearly every interval), without zlib-rs' reset.
    quick: QuickDeflate,
}

/// The deflate state of [`HistEncoder`]: zlib-rs at level 1 (static Huffman codes, no lazy
/// matching). Measured on a 600 MB trace (`bench/trace-speed.sh`), it takes about a third of
/// the time miniz_oxide's fastest level (through flate2) took, for results files 15 % larger;
/// zlib-rs at level 2 (dynamic codes) writes 3 % smaller files than miniz_oxide but is slower
/// than it. Any zlib stream decodes the same.
fn new_deflate() -> zlib_rs::Deflate {
    zlib_rs::Deflate::new_with_config(zlib_rs::DeflateConfig::new(1))
}

impl Default for HistEncoder {
    fn default() -> Self {
        HistEncoder::new()
    }
}

impl HistEncoder {
    /// A new encoder.
    pub(crate) fn new() -> HistEncoder {
        HistEncoder {
            v2: hdrhistogram::serialization::V2Serializer::new(),
            raw: Vec::new(),
            out: Vec::new(),
            z: new_deflate(),
            quick: QuickDeflate::new(),
        }
    }

    /// Encode a histogram; decodes with [`Hist::decode`] to an equal histogram.
    pub(crate) fn encode(&mut self, h: &Histogram<u64>) -> Hist {
        use hdrhistogram::serialization::Serializer as _;
        self.raw.clear();
        if self.v2.serialize(h, &mut self.raw).is_err() {
            return Hist::encode(h);
        }
        self.deflate().unwrap_or_else(|| Hist::encode(h))
    }

    /// Encode the counts of `c` (V2-deflate of the standard layout, like [`Self::encode`] of
    /// the histogram holding the same values) and clear it; touches only the indices in use.
    pub(crate) fn encode_counts(&mut self, c: &mut IndexCounts) -> Hist {
        use base64::Engine as _;
        // The counts hold values clamped to the project-wide range: their number is known.
        let n = c.len;
        c.write_v2(&mut self.raw);
        let h = self.deflate().unwrap_or_else(|| {
            // Deflate into memory does not fail; should it, the uncompressed V2 bytes (which
            // every reader accepts) rather than nothing.
            Hist::from_base64(base64::engine::general_purpose::STANDARD.encode(&self.raw))
        });
        h.counted(n)
    }

    /// V2-deflate of the V2 bytes in `raw`.
    fn deflate(&mut self) -> Option<Hist> {
        use base64::Engine as _;
        self.out.clear();
        self.out.extend_from_slice(&V2_DEFLATE_COOKIE.to_be_bytes());
        self.out.extend_from_slice(&[0; 4]);
        if self.raw.len() <= MAX_QUICK {
            self.quick.compress(&self.raw, &mut self.out);
        } else if !self.deflate_zlib_rs() {
            return None;
        }
        let len = (self.out.len() - 8) as u32;
        self.out[4..8].copy_from_slice(&len.to_be_bytes());
        Some(Hist::from_base64(
            base64::engine::general_purpose::STANDARD.encode(&self.out),
        ))
    }

    /// Append zlib-rs' level-1 deflate of `raw` to `out`; false when it fails.
    fn deflate_zlib_rs(&mut self) -> bool {
        self.out.reserve(self.raw.len() / 2 + 64);
        self.z.reset();
        loop {
            let done = self.z.total_in() as usize;
            let used = self.out.len();
            self.out.resize(self.out.capacity(), 0);
            let status = self.z.compress(
                &self.raw[done..],
                &mut self.out[used..],
                zlib_rs::DeflateFlush::Finish,
            );
            self.out.truncate(8 + self.z.total_out() as usize);
            match status {
                Ok(zlib_rs::Status::StreamEnd) => break,
                Ok(_) => self.out.reserve(self.out.len().max(64)),
                Err(_) => return false,
            }
        }
        true
    }
}

/// Counts of latencies at HdrHistogram counts indices of the standard layout (lowest value
/// 1 ns, 3 significant digits: 2048 sub-buckets; values clamped to `HIST_MAX_NS`), with a
/// bitmap of the indices in use, so that writing the V2 encoding and clearing touch only those
/// instead of walking and zeroing a whole counts array (128 KiB for values up to 20 ms) per
/// interval. Holds at most `u32::MAX` values in one bucket between encodings (the counts are
/// `u32`; the readers' interval accumulator hands over at most 16,384 at a time).
pub(crate) struct IndexCounts {
    counts: Vec<u32>,
    used: Vec<u64>,
    /// Values held (all within the project-wide range: clamped on recording).
    pub(crate) len: u64,
    max_value: u64,
    /// Words of `used` that may have bits set: `[lo_w, hi_w)` (empty when nothing is held),
    /// so that encoding walks those rather than all ~520 words.
    lo_w: usize,
    hi_w: usize,
}

impl IndexCounts {
    pub(crate) fn new() -> IndexCounts {
        let n = index_of(HIST_MAX_NS) + 1;
        IndexCounts {
            counts: vec![0; n],
            used: vec![0; n.div_ceil(64)],
            len: 0,
            max_value: 0,
            lo_w: usize::MAX,
            hi_w: 0,
        }
    }

    /// Mark counts index `i` in use.
    #[inline]
    fn mark(&mut self, i: usize) {
        let w = i >> 6;
        self.used[w] |= 1 << (i & 63);
        self.lo_w = self.lo_w.min(w);
        self.hi_w = self.hi_w.max(w + 1);
    }

    #[inline]
    pub(crate) fn record(&mut self, v: u64) {
        let v = v.min(HIST_MAX_NS);
        let i = index_of(v);
        if self.counts[i] == 0 {
            self.mark(i);
        }
        self.counts[i] += 1;
        self.len += 1;
        self.max_value = self.max_value.max(v);
    }

    /// Record `n` values `v` at once. The caller keeps every bucket's count within `u32`
    /// between encodings (at most `u32::MAX` values in all).
    #[inline]
    pub(crate) fn record_n(&mut self, v: u64, n: u64) {
        if n == 0 {
            return;
        }
        let v = v.min(HIST_MAX_NS);
        let i = index_of(v);
        if self.counts[i] == 0 {
            self.mark(i);
        }
        self.counts[i] += n as u32;
        self.len += n;
        self.max_value = self.max_value.max(v);
    }

    /// Write the V2 (uncompressed) encoding into `raw` (cleared first) and clear the counts:
    /// the bytes HdrHistogram's serializer writes for a histogram holding these values, but
    /// for the highest trackable value in the header (here the smallest 2^k − 1 ≥ the largest
    /// value, so that readers see few distinct layouts).
    pub(super) fn write_v2(&mut self, raw: &mut Vec<u8>) {
        raw.clear();
        let high = (self.max_value + 1)
            .next_power_of_two()
            .saturating_sub(1)
            .clamp(2, HIST_MAX_NS);
        raw.extend_from_slice(&V2_COOKIE.to_be_bytes());
        raw.extend_from_slice(&[0; 4]); // payload length, below
        raw.extend_from_slice(&0u32.to_be_bytes()); // normalizing index offset
        raw.extend_from_slice(&(SIGFIG as u32).to_be_bytes());
        raw.extend_from_slice(&1u64.to_be_bytes()); // lowest discernible value
        raw.extend_from_slice(&high.to_be_bytes());
        raw.extend_from_slice(&1.0f64.to_bits().to_be_bytes()); // integer to double ratio
        let start = raw.len();
        // Counts from index 0 to that of the largest value; a run of zeros longer than one is
        // written as its negated length, a single zero as 0 (as HdrHistogram does).
        let mut next = 0usize;
        let mut w = self.lo_w;
        while w < self.hi_w {
            let mut bits = std::mem::take(&mut self.used[w]);
            while bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let gap = (i - next) as i64;
                if gap == 1 {
                    push_zigzag(raw, 0);
                } else if gap > 1 {
                    push_zigzag(raw, -gap);
                }
                push_zigzag(raw, std::mem::take(&mut self.counts[i]) as i64);
                next = i + 1;
            }
            w += 1;
        }
        let payload = (raw.len() - start) as u32;
        raw[4..8].copy_from_slice(&payload.to_be_bytes());
        self.len = 0;
        self.max_value = 0;
        self.lo_w = usize::MAX;
        self.hi_w = 0;
    }
}

/// HdrHistogram's ZigZag LEB128 (at most 9 bytes, the 9th holding 8 bits).
#[inline]
fn push_zigzag(out: &mut Vec<u8>, n: i64) {
    let mut v = ((n << 1) ^ (n >> 63)) as u64;
    for _ in 0..8 {
        if v < 0x80 {
            out.push(v as u8);
            return;
        }
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::{interval_histogram, new_histogram, record_interval, HIST_MAX_NS};

    #[test]
    fn reusable_encoder_round_trips() {
        let mut enc = HistEncoder::new();
        for n in [0u64, 1, 10, 5000] {
            let mut h = interval_histogram();
            for i in 0..n {
                record_interval(&mut h, 1 + i * i * 37, 1);
            }
            let e = enc.encode(&h);
            let mut want = new_histogram();
            want.add(&h).unwrap();
            assert_eq!(e.decode().unwrap(), want);
            assert_eq!(Hist::encode(&h).decode().unwrap(), want);
        }
    }

    /// The encoder's own deflate of small inputs writes what its zlib-rs state, reused from
    /// stream to stream as it was before, writes, on the V2 encodings of interval histograms.
    #[test]
    fn quick_deflate_writes_what_the_reused_zlib_rs_state_writes() {
        let mut enc = HistEncoder::new();
        let mut c = IndexCounts::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..400u64 {
            for _ in 0..(round * round % 3000 + 1) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                c.record((seed % 50_000_000) >> (seed % 23));
            }
            c.write_v2(&mut enc.raw);
            assert!(enc.raw.len() <= MAX_QUICK);
            let quick = enc.deflate().unwrap();
            enc.out.clear();
            enc.out.extend_from_slice(&V2_DEFLATE_COOKIE.to_be_bytes());
            enc.out.extend_from_slice(&[0; 4]);
            assert!(enc.deflate_zlib_rs());
            let len = (enc.out.len() - 8) as u32;
            enc.out[4..8].copy_from_slice(&len.to_be_bytes());
            use base64::Engine as _;
            let zlib = base64::engine::general_purpose::STANDARD.encode(&enc.out);
            assert_eq!(quick.as_base64(), zlib, "round {round}");
        }
    }

    /// The sparse counts write the very counts bytes HdrHistogram's serializer writes for the
    /// same values (zero runs, single zeros, 0 ns, values past 1 h clamped), and decode to the
    /// same histogram.
    #[test]
    fn index_counts_encode_as_hdrhistogram_does() {
        use hdrhistogram::serialization::Serializer as _;
        let mut enc = HistEncoder::new();
        let mut c = IndexCounts::new();
        let mut v2 = hdrhistogram::serialization::V2Serializer::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let sets: Vec<Vec<u64>> = vec![
            vec![0],
            vec![1, 2, 4],
            vec![2047, 2048, 2049, 2050, 4095, 4096],
            vec![80_000, 80_000, 81_000, 399_000, 20_000_000],
            vec![HIST_MAX_NS, u64::MAX, 7],
            (0..5000)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    ((seed % 30_000) * 1000) >> (seed % 7)
                })
                .collect(),
        ];
        for vals in sets {
            let mut h = interval_histogram();
            for &v in &vals {
                record_interval(&mut h, v, 1);
                c.record(v);
            }
            assert_eq!(c.len, h.len());
            let mut want = Vec::new();
            v2.serialize(&h, &mut want).unwrap();
            let mut raw = Vec::new();
            c.write_v2(&mut raw);
            assert_eq!(raw[40..], want[40..], "counts of {vals:?}");
            assert_eq!(raw[..24], want[..24]);
            for &v in &vals {
                c.record(v);
            }
            let mut all = new_histogram();
            all.add(&h).unwrap();
            assert_eq!(enc.encode_counts(&mut c).decode().unwrap(), all);
            assert!(c.counts.iter().all(|&n| n == 0) && c.used.iter().all(|&w| w == 0));
        }
    }
}
