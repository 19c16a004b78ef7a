//! The latency histogram: one layout, its encodings and the sums and quantiles read from them.
//!
//! Every latency iolens keeps is an HdrHistogram in nanoseconds of the *standard layout*:
//! lowest discernible value 1 ns, highest trackable [`HIST_MAX_NS`] (one hour), [`SIGFIG`]
//! significant digits, so 2048 sub-buckets a bucket (half-count magnitude 10, unit magnitude
//! 0). Stored, a histogram is its V2-deflate encoding in base64 ([`Hist`]), so it survives a
//! round trip exactly and takes a few hundred bytes instead of ~250 KB decoded.
//!
//! - this file: the layout ([`new_histogram`], [`index_of`] and its inverse [`value_of`], the
//!   V2 header's constants) and [`Hist`];
//! - `encode.rs`: V2-deflate writers that reuse their state ([`HistEncoder`], [`IndexCounts`]);
//! - `quick.rs`: zlib-rs' level-1 deflate of small inputs, byte for byte, without its
//!   per-stream reset of a 128 KiB table;
//! - `decode.rs`: a bounded decoder of any V2 encoding ([`decode_v2_bounded`]) and the fast
//!   reader of the standard layout's counts straight from their encoding ([`V2Scan`]);
//! - `classic.rs`: the fixed classic-bucket layout of the Prometheus exposition
//!   ([`classic::PromHist`]);
//! - `counts.rs`: counts added by index ([`TotalCounts`], [`DenseCounts`]), sparse sums
//!   ([`add_sparse`]) and quantiles read from them ([`sparse_quantile`]);
//! - `slots.rs`: one op's per-interval histograms recorded out of order ([`OpAcc`]: an
//!   interval kept encoded once done, reopened by a late event), yielding [`Parts`].
//!
//! It sits on the ground floor: results, the readers (`sources`), `merge`, the recorder and the
//! renderers use it; it imports none of them.

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod classic;
mod counts;
mod decode;
mod encode;
mod quick;
mod slots;
mod spread;

pub(crate) use counts::{add_sparse, sparse_quantile, DenseCounts, Sparse, TotalCounts};
pub(crate) use decode::{decode_v2_bounded, V2Scan};
pub(crate) use encode::{HistEncoder, IndexCounts};
pub(crate) use slots::{OpAcc, Parts};
pub use spread::SPREAD_SLOTS;
pub(crate) use spread::{spread_with, BucketText, SpreadReader, SpreadWriter};

/// Significant digits of every latency histogram.
pub const SIGFIG: u8 = 3;
/// Highest trackable latency: one hour in ns (values above are clamped, and counted as such).
pub const HIST_MAX_NS: u64 = 3_600_000_000_000;

/// A fresh, empty latency histogram with the project-wide configuration (1 ns .. 1 h, 3 digits).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, SIGFIG).expect("static histogram bounds are valid")
}

/// Record a latency (ns; 0 is recorded as 0), clamping to the histogram's range instead of failing.
#[inline]
pub fn record_ns(h: &mut Histogram<u64>, ns: u64) {
    h.saturating_record(ns);
}

/// A histogram for one interval: same precision as [`new_histogram`], but it grows only as far
/// as the values recorded, so resetting and encoding it is cheap. Values are clamped to
/// [0, `HIST_MAX_NS`]; [`Hist::decode`] normalises the bounds.
pub(crate) fn interval_histogram() -> Histogram<u64> {
    let mut h =
        Histogram::new_with_max(1 << 20, SIGFIG).expect("static histogram bounds are valid");
    h.auto(true);
    h
}

/// Record `n` values of `ns` into an interval histogram (clamped to [`HIST_MAX_NS`]).
#[inline]
pub(crate) fn record_interval(h: &mut Histogram<u64>, ns: u64, n: u64) {
    // 0 is a real value (a zero-length wait, `ela= 0`): recorded as 0, not raised to 1 ns.
    let _ = h.record_n(ns.min(HIST_MAX_NS), n);
}

/// Most bytes a histogram's V2 encoding may hold, compressed or decompressed. An iolens
/// histogram (1 ns .. 1 h, 3 digits) needs well under 1 MiB; the cap stops a declared or
/// deflated size from allocating gigabytes.
pub const MAX_HIST_BYTES: usize = 16 << 20;

pub(crate) const V2_COOKIE: u32 = 0x1c84_9313;
pub(crate) const V2_DEFLATE_COOKIE: u32 = 0x1c84_9314;
/// Bytes of the V2 header: cookie, payload length, normalising offset, digits, low, high, ratio.
pub(crate) const V2_HEADER: usize = 40;

/// Sub-bucket half-count magnitude of the standard layout: 2^10 = 1024 half, 2048 sub-buckets.
const HALF_MAG: u32 = 10;

/// HdrHistogram's counts index of `v` in the standard layout (`index_for` with unit magnitude
/// 0 and sub-bucket half-count magnitude 10). The inverse of [`value_of`] on every value a
/// bucket holds.
#[inline]
pub(crate) fn index_of(v: u64) -> usize {
    let bucket = 53 - (v | 2047).leading_zeros();
    ((((bucket as u64) + 1) << HALF_MAG) + (v >> bucket) - 1024) as usize
}

/// The value of counts index `i` in the standard layout (2048 sub-buckets, unit 1 ns): the
/// lowest value of that bucket, as HdrHistogram computes it.
#[inline]
pub(crate) fn value_of(i: usize) -> u64 {
    const HALF: u64 = 1 << HALF_MAG;
    let bucket = (i >> HALF_MAG) as i64 - 1;
    let sub = (i as u64 & (HALF - 1)) + HALF;
    if bucket < 0 {
        sub - HALF
    } else {
        sub << bucket
    }
}

/// A latency histogram (ns) kept encoded: HdrHistogram's V2-deflate encoding in base64, or
/// (interval histograms of bucketed sources, schema version 3) the spread-bucket encoding
/// `s1:LO-HIxCOUNT,…` (ns; `LO` left out when it is the previous bucket's `HI`; `5e5` is
/// 500,000): the values of each count spread over its bucket as docs/results-schema.md says.
///
/// Encoded form is what is stored in memory too: a 1-hour run keeps thousands of interval
/// histograms, each a few hundred bytes encoded versus ~250 KB decoded.
#[derive(Clone, Debug, Default, JsonSchema)]
#[schemars(transparent)]
pub struct Hist {
    b64: String,
    /// The number of values, when the encoder that wrote `b64` counted them itself, from values
    /// it kept within the project-wide range ([`Hist::counted`]): [`Hist::checked_len`] need not
    /// decode it. Not stored; a histogram read from a file is always decoded to be checked.
    #[schemars(skip)]
    counted: Option<u64>,
}

impl PartialEq for Hist {
    fn eq(&self, other: &Hist) -> bool {
        self.b64 == other.b64
    }
}

impl Eq for Hist {}

impl Hist {
    /// This histogram, known to hold `n` values, all within the project-wide range, because its
    /// producer counted and clamped them as it encoded them (the interval encoder of
    /// `sources::Binned`), so that checking it does not decode it again.
    pub(crate) fn counted(mut self, n: u64) -> Hist {
        self.counted = Some(n);
        self
    }

    /// The histogram whose V2 or V2-deflate encoding is `b64` (an encoder's own output).
    pub(crate) fn from_base64(b64: String) -> Hist {
        Hist { b64, counted: None }
    }

    /// Encode a histogram.
    ///
    /// The V2 encoding cannot hold a bucket count above `i64::MAX`; such counts (absurd input,
    /// saturated sums) are capped there rather than panicking, so the histogram's total no
    /// longer matches its op's count and [`Results::validate`] rejects the document.
    pub fn encode(h: &Histogram<u64>) -> Hist {
        let mut buf = Vec::new();
        if V2DeflateSerializer::new().serialize(h, &mut buf).is_err() {
            let mut capped = h.clone();
            capped.reset();
            for v in h.iter_recorded() {
                let _ = capped.record_n(
                    v.value_iterated_to(),
                    v.count_at_value().min(i64::MAX as u64),
                );
            }
            buf.clear();
            if V2DeflateSerializer::new()
                .serialize(&capped, &mut buf)
                .is_err()
            {
                buf.clear();
            }
        }
        Hist {
            b64: base64::engine::general_purpose::STANDARD.encode(buf),
            counted: None,
        }
    }

    /// Decode with the bounds it was stored with (`None` when empty), checking every declared
    /// size before allocating.
    pub(crate) fn decode_as_stored(&self) -> Result<Option<Histogram<u64>>> {
        if self.b64.is_empty() {
            return Ok(None);
        }
        if self.is_spread() {
            let counts = self.spread_counts()?;
            let mut h = interval_histogram();
            for (i, n) in counts {
                h.record_n(value_of(i), n)
                    .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
            }
            return Ok(Some(h));
        }
        if self.b64.len() > MAX_HIST_BYTES / 3 * 4 + 4 {
            bail!(
                "histogram is {} bytes of base64, more than the {} MiB an iolens histogram can hold",
                self.b64.len(),
                MAX_HIST_BYTES >> 20
            );
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(self.b64.as_bytes())
            .context("histogram is not valid base64")?;
        decode_v2_bounded(&bytes).map(Some)
    }

    /// Decode into a histogram with the project-wide bounds.
    pub fn decode(&self) -> Result<Histogram<u64>> {
        let Some(h) = self.decode_as_stored()? else {
            return Ok(new_histogram());
        };
        // Normalise bounds so histograms from any producer merge exactly.
        let mut out = new_histogram();
        out.add(&h)
            .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
        Ok(out)
    }

    /// Number of values the histogram holds, checking that it decodes and fits the
    /// project-wide range, without building the full-range histogram [`Hist::decode`] returns
    /// (cheap enough to check every interval histogram of a long run on load).
    pub(crate) fn checked_len(&self) -> Result<u64> {
        if let Some(n) = self.counted {
            return Ok(n);
        }
        thread_local! {
            static SCAN: std::cell::RefCell<(V2Scan, Vec<(usize, u64)>)> =
                std::cell::RefCell::new((V2Scan::new(), Vec::new()));
        }
        // Fast path (the standard layout): the same answer without building the histogram.
        let fast = SCAN.with(|s| {
            let (scan, counts) = &mut *s.borrow_mut();
            scan.scan(self, counts)
                .then(|| V2Scan::len_in_range(counts))?
        });
        match fast {
            Some(len) => Ok(len),
            None => self.checked_len_general(),
        }
    }

    /// [`Hist::checked_len`] by decoding the histogram (any layout; the errors).
    pub(crate) fn checked_len_general(&self) -> Result<u64> {
        if self.is_spread() {
            return V2Scan::len_in_range(&self.spread_counts()?).with_context(|| {
                "spread-bucket histogram holds more values than a count can hold".to_string()
            });
        }
        let Some(h) = self.decode_as_stored()? else {
            return Ok(0);
        };
        static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let limit = *LIMIT.get_or_init(|| {
            let h = new_histogram();
            h.highest_equivalent(h.high())
        });
        if !h.is_empty() && h.max() > limit {
            bail!(
                "histogram out of range: {} ns is beyond the {} ns iolens histograms hold",
                h.max(),
                HIST_MAX_NS
            );
        }
        Ok(h.len())
    }

    /// Add this histogram's values into `h` exactly, decoding it with its stored bounds (no
    /// full-range histogram is built: cheap enough for millions of interval histograms).
    pub(crate) fn add_to(&self, h: &mut Histogram<u64>) -> Result<()> {
        if let Some(x) = self.decode_as_stored()? {
            h.add(&x)
                .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
        }
        Ok(())
    }

    /// The stored text (as it appears in JSON): base64 of a V2 or V2-deflate encoding, or a
    /// spread-bucket encoding ([`Hist::is_spread`]).
    pub(crate) fn as_base64(&self) -> &str {
        &self.b64
    }

    /// Whether the histogram is stored as spread buckets (`s1:…`, see `spread.rs`) rather
    /// than as an HdrHistogram encoding.
    pub(crate) fn is_spread(&self) -> bool {
        SpreadReader::is_spread(&self.b64)
    }

    /// The non-zero `(counts index, count)` of a spread-bucket histogram, ascending.
    fn spread_counts(&self) -> Result<Vec<(usize, u64)>> {
        thread_local! {
            static READER: std::cell::RefCell<SpreadReader> = Default::default();
        }
        let mut out = Vec::new();
        READER.with(|r| r.borrow_mut().read(&self.b64, &mut out))?;
        Ok(out)
    }

    /// The same histogram as HdrHistogram's V2-deflate encoding (what an `.hlog` line and
    /// every HdrHistogram library read): itself unless stored as spread buckets, which are
    /// written as the V2-deflate of their values would have been, byte for byte.
    pub(crate) fn to_v2_deflate(&self) -> Result<Hist> {
        if !self.is_spread() {
            return Ok(self.clone());
        }
        thread_local! {
            static ENC: std::cell::RefCell<(HistEncoder, IndexCounts)> =
                std::cell::RefCell::new((HistEncoder::new(), IndexCounts::new()));
        }
        let counts = self.spread_counts()?;
        // As the interval was encoded before (schema version 2): counted by index up to
        // `u32::MAX` values, else as a histogram.
        let small = counts
            .iter()
            .try_fold(0u64, |a, &(_, n)| a.checked_add(n))
            .is_some_and(|n| n <= u32::MAX as u64);
        let h = if small { None } else { Some(self.decode()?) };
        Ok(ENC.with(|e| {
            let (enc, own) = &mut *e.borrow_mut();
            match &h {
                Some(h) => enc.encode(h),
                None => {
                    for &(i, n) in &counts {
                        own.record_n(value_of(i), n);
                    }
                    enc.encode_counts(own)
                }
            }
        }))
    }

    /// Raw V2-deflate bytes.
    #[cfg(test)]
    fn to_bytes(&self) -> Result<Vec<u8>> {
        Ok(base64::engine::general_purpose::STANDARD.decode(self.b64.as_bytes())?)
    }
}

impl Serialize for Hist {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.b64)
    }
}

impl<'de> Deserialize<'de> for Hist {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(Hist {
            b64: s,
            counted: None,
        })
    }
}

/// An empty histogram of the standard layout (equivalence ranges only; never recorded into).
pub(crate) fn standard_reference() -> &'static Histogram<u64> {
    static R: std::sync::OnceLock<Histogram<u64>> = std::sync::OnceLock::new();
    R.get_or_init(new_histogram)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_of_inverts_value_of_and_is_hdrhistograms_own() {
        let h = new_histogram();
        for i in 0..index_of(HIST_MAX_NS) + 1 {
            let v = value_of(i);
            assert_eq!(index_of(v), i);
            assert_eq!(h.lowest_equivalent(v), v);
            assert_eq!(index_of(h.highest_equivalent(v)), i);
        }
    }

    #[test]
    fn hist_roundtrip_exact() {
        let mut h = new_histogram();
        for v in [1u64, 50, 999, 12_345, 1_000_000, 987_654_321] {
            record_ns(&mut h, v);
        }
        let back = Hist::encode(&h).decode().unwrap();
        assert_eq!(h, back);
    }

    #[test]
    fn checked_len_fast_path_agrees_with_decoding_on_damaged_encodings() {
        let mut h = new_histogram();
        for v in [0u64, 1, 999, 2_048, 123_456, 7_000_000, 3_000_000_000_000] {
            h.record_n(v, v % 7 + 1).unwrap();
        }
        let mut other = Histogram::<u64>::new_with_bounds(1, 1 << 20, 2).unwrap();
        other.record(77).unwrap();
        let mut small = Histogram::<u64>::new_with_max(1 << 20, SIGFIG).unwrap();
        small.auto(true);
        small.record(5_000_000).unwrap();
        let mut cases = Vec::new();
        for src in [h, new_histogram(), other, small] {
            let good = Hist::encode(&src);
            let bytes = good.to_bytes().unwrap();
            cases.push(good.clone());
            for cut in 0..bytes.len() {
                let mut b = bytes.clone();
                b.truncate(cut);
                cases.push(Hist {
                    b64: base64::engine::general_purpose::STANDARD.encode(&b),
                    counted: None,
                });
                let mut f = bytes.clone();
                f[cut] ^= 1 << (cut % 8);
                cases.push(Hist {
                    b64: base64::engine::general_purpose::STANDARD.encode(&f),
                    counted: None,
                });
            }
        }
        let mut fast_taken = 0;
        for (i, c) in cases.iter().enumerate() {
            let general = c.checked_len_general().map_err(|e| e.to_string());
            let now = c.checked_len().map_err(|e| e.to_string());
            assert_eq!(now, general, "case {i}");
            let mut v = Vec::new();
            fast_taken += V2Scan::new().scan(c, &mut v) as usize;
        }
        assert!(fast_taken > 4, "the fast path was taken {fast_taken} times");
    }
}
