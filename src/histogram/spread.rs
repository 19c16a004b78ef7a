//! Bucket counts spread over their ranges, and the spread-bucket encoding of a histogram.
//!
//! A source that gives bucket counts (an Oracle wait-event histogram, a bcc or Prometheus
//! bucket) is read as values spread over each bucket's range `[lo, hi)` ([`spread_with`]): the
//! range is cut into up to [`SPREAD_SLOTS`] geometrically equal slots (uniform slots when `lo`
//! is 0), the count is divided evenly across them (remainder to the lowest slots), and each
//! slot's share is recorded at the slot's geometric midpoint.
//!
//! An interval histogram made only of such buckets is stored as the buckets themselves, the
//! *spread-bucket encoding* (version 1), instead of the V2-deflate of the values they spread
//! into: the same histogram (each index's count is what [`spread_with`] gives, clamped to
//! [`HIST_MAX_NS`] as recording clamps), in a tenth of the text, written without compressing.
//! A year of hourly AWR snapshots holds 876,000 interval histograms; deflating each one's
//! ~380 spread values was most of the time of reading it (`bench/awr-year.sh`).
//!
//! The text is `s1:` and then the buckets, comma-separated, each `LO-HIxCOUNT` in ns, where a
//! number is decimal digits optionally followed by `e` and a power of ten (`5e5` = 500,000) and
//! `LO` is left out when it equals the previous bucket's `HI` (the first bucket's previous `HI`
//! is 0): `s1:5e5-1e6x12,-2e6x40`. `:` is not a base64 character, so no V2-deflate encoding
//! reads as one. The histogram is the sum of the buckets' spreads; a bucket appears as often as
//! it was counted (two counts of one range spread separately, as they were recorded).
//! Changing [`spread_with`] or [`SPREAD_SLOTS`] changes what `s1` means: that needs a new
//! version of the encoding, and this one kept for the files already written.

use anyhow::{bail, Result};

use super::{index_of, Hist, HIST_MAX_NS};

/// Most slots a bucket's count is spread over (part of the `s1` encoding's definition).
pub const SPREAD_SLOTS: u64 = 32;

/// The prefix of the spread-bucket encoding, version 1.
pub(crate) const SPREAD_V1: &str = "s1:";

/// Hand each `(value, count)` of `count` values spread over `[lo_ns, hi_ns)` to `record`, in
/// ascending order of value (see the module docs). A range of at most one ns holds `lo_ns`.
pub(crate) fn spread_with(lo_ns: u64, hi_ns: u64, count: u64, record: &mut dyn FnMut(u64, u64)) {
    if count == 0 {
        return;
    }
    if hi_ns <= lo_ns.saturating_add(1) {
        record(lo_ns, count);
        return;
    }
    let slots = count.min(SPREAD_SLOTS);
    let base = count / slots;
    let rem = count % slots;
    let (lo, hi) = (lo_ns as f64, hi_ns as f64);
    for i in 0..slots {
        let f = (i as f64 + 0.5) / slots as f64;
        let v = if lo_ns == 0 {
            hi * f
        } else {
            lo * (hi / lo).powf(f)
        };
        let v = (v as u64).clamp(lo_ns.max(1), hi_ns - 1);
        let n = base + u64::from(i < rem);
        if n > 0 {
            record(v, n);
        }
    }
}

/// Append the text of a number: decimal, three or more trailing zeros as `e` and their count
/// (`2e6`, `15e5`, `100`).
fn put_number(out: &mut String, mut v: u64) {
    let mut zeros = 0u32;
    while v != 0 && v.is_multiple_of(10) {
        v /= 10;
        zeros += 1;
    }
    let mut buf = [0u8; 24];
    let mut at = 20;
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut end = 20;
    if zeros >= 3 {
        buf[end] = b'e';
        end += 1;
        if zeros >= 10 {
            buf[end] = b'0' + (zeros / 10) as u8;
            end += 1;
        }
        buf[end] = b'0' + (zeros % 10) as u8;
        end += 1;
    }
    out.push_str(std::str::from_utf8(&buf[at..end]).expect("ASCII digits"));
    for _ in 0..if zeros < 3 { zeros } else { 0 } {
        out.push('0');
    }
}

/// A bucket range's text in the spread-bucket encoding: `LO` and `-HIx`.
#[derive(Debug, Clone)]
pub(crate) struct BucketText {
    lo_ns: u64,
    hi_ns: u64,
    lo: String,
    hi: String,
}

impl BucketText {
    /// The text of `[lo_ns, hi_ns)`.
    pub(crate) fn of(lo_ns: u64, hi_ns: u64) -> BucketText {
        let mut lo = String::new();
        put_number(&mut lo, lo_ns);
        let mut hi = String::from("-");
        put_number(&mut hi, hi_ns);
        hi.push('x');
        BucketText {
            lo_ns,
            hi_ns,
            lo,
            hi,
        }
    }
}

/// Writes the spread-bucket encoding of one histogram's buckets, reusing its buffer.
#[derive(Default)]
pub(crate) struct SpreadWriter {
    text: String,
    prev_hi: u64,
    /// Values added (`None` once their number overflows).
    len: Option<u64>,
}

impl SpreadWriter {
    /// Start a histogram (forgetting any unfinished one).
    pub(crate) fn begin(&mut self) {
        self.text.clear();
        self.text.push_str(SPREAD_V1);
        self.prev_hi = 0;
        self.len = Some(0);
    }

    /// Add `count` values spread over `[lo_ns, hi_ns)`.
    #[cfg(test)]
    pub(crate) fn bucket(&mut self, lo_ns: u64, hi_ns: u64, count: u64) {
        self.bucket_named(&BucketText::of(lo_ns, hi_ns), count);
    }

    /// [`SpreadWriter::bucket`] for a range whose text was written once ([`BucketText`]): a
    /// source's few bucket ranges come back in every interval (writing their numbers again
    /// each time was a twentieth of the time of a year of hourly AWR snapshots).
    pub(crate) fn bucket_named(&mut self, range: &BucketText, count: u64) {
        if self.text.len() > SPREAD_V1.len() {
            self.text.push(',');
        }
        if range.lo_ns != self.prev_hi {
            self.text.push_str(&range.lo);
        }
        self.text.push_str(&range.hi);
        if count < 10 {
            self.text.push(char::from(b'0' + count as u8));
        } else {
            put_number(&mut self.text, count);
        }
        self.prev_hi = range.hi_ns;
        self.len = self.len.and_then(|n| n.checked_add(count));
    }

    /// The histogram of the buckets added since [`SpreadWriter::begin`], counted
    /// ([`Hist::counted`]) when their number fits `u64` (spread values are clamped into the
    /// project-wide range, as they are decoded).
    pub(crate) fn finish(&self) -> Hist {
        let h = Hist::from_base64(self.text.clone());
        match self.len {
            Some(n) => h.counted(n),
            None => h,
        }
    }
}

/// Reads spread-bucket encodings into their histograms' counts by index, keeping the counts
/// indices of each `(lo, hi, slots)` met (a `powf` a slot otherwise).
#[derive(Default)]
pub(crate) struct SpreadReader {
    slots: rustc_hash::FxHashMap<(u64, u64, u64), Vec<usize>>,
    entries: Vec<(usize, u64)>,
}

/// Distinct `(lo, hi, slots)` a [`SpreadReader`] keeps before it starts again.
const MAX_KEPT: usize = 4096;

/// One number of the encoding at the start of `s`, and the rest.
fn number(s: &[u8]) -> Result<(u64, &[u8])> {
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        bail!("spread-bucket histogram: a number was expected");
    }
    let mut v = 0u64;
    for &b in &s[..digits] {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or_else(|| anyhow::anyhow!("spread-bucket histogram: a number overflows"))?;
    }
    let mut rest = &s[digits..];
    if let Some((b'e', r)) = rest.split_first() {
        let e = r.iter().take_while(|b| b.is_ascii_digit()).count();
        if e == 0 || e > 2 {
            bail!("spread-bucket histogram: a power of ten was expected after 'e'");
        }
        let exp = r[..e]
            .iter()
            .fold(0u32, |a, &b| a * 10 + u32::from(b - b'0'));
        v = 10u64
            .checked_pow(exp)
            .and_then(|p| v.checked_mul(p))
            .ok_or_else(|| anyhow::anyhow!("spread-bucket histogram: a number overflows"))?;
        rest = &r[e..];
    }
    Ok((v, rest))
}

impl SpreadReader {
    /// Whether `text` is a spread-bucket encoding (of any version).
    pub(crate) fn is_spread(text: &str) -> bool {
        text.starts_with('s') && text.contains(':')
    }

    /// The non-zero `(counts index, count)` of the spread-bucket encoding `text` into `out`
    /// (cleared first), ascending and each index once: the counts of the histogram holding the
    /// spread values, clamped to [`HIST_MAX_NS`]. An error names what is malformed; a count
    /// sum beyond `u64` is the caller's to check.
    pub(crate) fn read(&mut self, text: &str, out: &mut Vec<(usize, u64)>) -> Result<()> {
        out.clear();
        let Some(body) = text.strip_prefix(SPREAD_V1) else {
            bail!(
                "histogram is a spread-bucket encoding of a version this iolens does not read \
                 ({:?}); upgrade iolens",
                text.split(':').next().unwrap_or_default()
            );
        };
        self.entries.clear();
        let mut s = body.as_bytes();
        let mut prev_hi = 0u64;
        while !s.is_empty() {
            let (lo, r) = if s[0] == b'-' {
                (prev_hi, s)
            } else {
                number(s)?
            };
            let Some((b'-', r)) = r.split_first() else {
                bail!("spread-bucket histogram: '-' was expected after a bucket's low edge");
            };
            let (hi, r) = number(r)?;
            let Some((b'x', r)) = r.split_first() else {
                bail!("spread-bucket histogram: 'x' was expected after a bucket's high edge");
            };
            let (count, r) = number(r)?;
            s = match r.split_first() {
                None => r,
                Some((b',', r)) if !r.is_empty() => r,
                Some(_) => bail!("spread-bucket histogram: ',' was expected between buckets"),
            };
            prev_hi = hi;
            self.add(lo, hi, count);
        }
        let e = &mut self.entries;
        if !e.windows(2).all(|w| w[0].0 <= w[1].0) {
            e.sort_unstable_by_key(|x| x.0);
        }
        for &(i, n) in e.iter() {
            match out.last_mut() {
                Some(last) if last.0 == i => last.1 = last.1.saturating_add(n),
                _ => out.push((i, n)),
            }
        }
        Ok(())
    }

    /// The indices of `count` values spread over `[lo, hi)` into `entries`.
    fn add(&mut self, lo: u64, hi: u64, count: u64) {
        if count == 0 {
            return;
        }
        if hi <= lo.saturating_add(1) {
            self.entries.push((index_of(lo.min(HIST_MAX_NS)), count));
            return;
        }
        let slots = count.min(SPREAD_SLOTS);
        if self.slots.len() >= MAX_KEPT && !self.slots.contains_key(&(lo, hi, slots)) {
            self.slots.clear();
        }
        let idx = self.slots.entry((lo, hi, slots)).or_insert_with(|| {
            let mut v = Vec::with_capacity(slots as usize);
            // One value a slot: each slot's value does not depend on the count.
            spread_with(lo, hi, slots, &mut |x, _| {
                v.push(index_of(x.min(HIST_MAX_NS)))
            });
            v
        });
        let (base, rem) = (count / slots, count % slots);
        for (k, &i) in idx.iter().enumerate() {
            let n = base + u64::from((k as u64) < rem);
            if n > 0 {
                self.entries.push((i, n));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::{
        new_histogram, record_interval, sparse_quantile, value_of, HistEncoder, IndexCounts, V2Scan,
    };
    use proptest::prelude::*;

    /// The V2-deflate encoding a snapshot interval of these buckets had before the spread-bucket
    /// encoding (schema version 2): each bucket's spread values counted by index and encoded,
    /// or, beyond `u32::MAX` values, recorded into a histogram and encoded.
    fn v2_of(buckets: &[(u64, u64, u64)], enc: &mut HistEncoder, own: &mut IndexCounts) -> Hist {
        if buckets.iter().map(|b| b.2).sum::<u64>() <= u32::MAX as u64 {
            for &(lo, hi, n) in buckets {
                spread_with(lo, hi, n, &mut |v, k| own.record_n(v, k));
            }
            enc.encode_counts(own)
        } else {
            let mut h = new_histogram();
            for &(lo, hi, n) in buckets {
                spread_with(lo, hi, n, &mut |v, k| record_interval(&mut h, v, k));
            }
            enc.encode(&h)
        }
    }

    fn s1_of(buckets: &[(u64, u64, u64)]) -> Hist {
        let mut w = SpreadWriter::default();
        w.begin();
        for &(lo, hi, n) in buckets {
            w.bucket(lo, hi, n);
        }
        w.finish()
    }

    /// The same histogram as a file holds it: text only, not counted by its writer.
    fn as_read(h: &Hist) -> Hist {
        serde_json::from_value(serde_json::Value::String(h.as_base64().into())).unwrap()
    }

    /// Buckets as the readers give them: Oracle's power-of-two ms and µs buckets (the first
    /// from 0), bcc's, single-value ranges, ranges beyond the hour a histogram holds, and
    /// counts from 0 to beyond `u32::MAX`.
    fn buckets() -> impl Strategy<Value = Vec<(u64, u64, u64)>> {
        let range = prop_oneof![
            (0u32..22).prop_map(|k| if k == 0 {
                (0, 1_000_000)
            } else {
                (1_000_000u64 << (k - 1), 1_000_000u64 << k)
            }),
            (0u32..36).prop_map(|k| if k == 0 {
                (0, 1_000)
            } else {
                (1_000u64 << (k - 1), 1_000u64 << k)
            }),
            (0u64..5_000_000_000_000).prop_map(|lo| (lo, lo + 1)),
            (1u64..1 << 50, 1u64..1 << 20).prop_map(|(lo, w)| (lo, lo + w)),
        ];
        let count = prop_oneof![0u64..40, 0u64..100_000, Just(u32::MAX as u64 + 7)];
        proptest::collection::vec((range, count).prop_map(|((lo, hi), n)| (lo, hi, n)), 0..24)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        /// Old encoding and new hold the same histogram: the same counts by index, the same
        /// decoded histogram, quantiles and number of values, as written and as read back from
        /// a file; and the spread buckets rewritten as V2-deflate are the old bytes exactly.
        #[test]
        fn spread_buckets_hold_what_their_v2_deflate_held(b in buckets()) {
            let (mut enc, mut own) = (HistEncoder::new(), IndexCounts::new());
            let old = v2_of(&b, &mut enc, &mut own);
            let new = s1_of(&b);
            prop_assert!(new.is_spread() && !old.is_spread());
            prop_assert!(new.as_base64().len() <= 3 + 64 * b.len());
            let (mut scan, mut a, mut c) = (V2Scan::new(), Vec::new(), Vec::new());
            prop_assert!(scan.scan(&old, &mut a));
            prop_assert!(scan.scan(&new, &mut c));
            prop_assert_eq!(&a, &c);
            for h in [new.clone(), as_read(&new)] {
                prop_assert_eq!(h.checked_len().unwrap(), old.checked_len().unwrap());
                prop_assert_eq!(h.checked_len_general().unwrap(), old.checked_len().unwrap());
                let (x, y) = (old.decode().unwrap(), h.decode().unwrap());
                prop_assert_eq!(&x, &y);
                let sparse: Vec<(u64, u64)> = c.iter().map(|&(i, n)| (value_of(i), n)).collect();
                for q in [0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 0.99999, 1.0] {
                    prop_assert_eq!(x.value_at_quantile(q), y.value_at_quantile(q));
                    prop_assert_eq!(sparse_quantile(&sparse, q), x.value_at_quantile(q));
                }
                prop_assert_eq!((x.len(), x.min(), x.max(), x.mean().to_bits()),
                    (y.len(), y.min(), y.max(), y.mean().to_bits()));
                let mut z = new_histogram();
                h.add_to(&mut z).unwrap();
                prop_assert_eq!(&z, &x);
                let v2 = h.to_v2_deflate().unwrap();
                prop_assert_eq!(v2.as_base64(), old.as_base64());
            }
        }
    }

    #[test]
    fn numbers_read_back_as_written() {
        for v in [
            0u64,
            1,
            9,
            10,
            100,
            999,
            1000,
            1_000_000,
            12_300_000,
            500_000,
            2_048_000_000,
            10u64.pow(19),
            u64::MAX,
            u64::MAX / 10 * 10,
        ] {
            let mut s = String::new();
            put_number(&mut s, v);
            let (back, rest) = number(s.as_bytes()).unwrap();
            assert_eq!((back, rest), (v, &b""[..]), "{s}");
        }
        let h = s1_of(&[
            (500_000, 1_000_000, 12),
            (1_000_000, 2_000_000, 40),
            (0, 1000, 3),
        ]);
        assert_eq!(h.as_base64(), "s1:5e5-1e6x12,-2e6x40,0-1e3x3");
        let h = s1_of(&[
            (0, 2_000_000, 36),
            (2_000_000, 4_000_000, 100),
            (1_500_000, 1_500_001, 1),
        ]);
        assert_eq!(h.as_base64(), "s1:-2e6x36,-4e6x100,15e5-1500001x1");
    }

    #[test]
    fn malformed_spread_buckets_are_refused_with_the_reason() {
        let mut r = SpreadReader::default();
        let mut out = Vec::new();
        r.read("s1:", &mut out).unwrap();
        assert!(out.is_empty());
        for (text, why) in [
            ("s1:-", "number was expected"),
            ("s1:1-2x", "number was expected"),
            ("s1:1-2x3,", "',' was expected"),
            ("s1:1-2x3;4-5x6", "',' was expected"),
            ("s1:1x3", "'-' was expected"),
            ("s1:1-2-3", "'x' was expected"),
            ("s1:99999999999999999999-1x1", "overflows"),
            ("s1:1e20-1x1", "overflows"),
            ("s1:1e-1x1", "power of ten"),
            ("s2:1-2x3", "version this iolens does not read"),
        ] {
            let e = r.read(text, &mut out).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
            let h = as_read(&Hist::from_base64(text.into()));
            assert!(h.checked_len().is_err() && h.decode().is_err(), "{text}");
            assert!(!V2Scan::new().scan(&h, &mut out), "{text}");
        }
        // Counts whose sum overflows: refused as a whole, not wrapped.
        let h = as_read(&s1_of(&[(1, 2, u64::MAX), (3, 4, 2)]));
        assert!(h.checked_len().is_err());
    }
}
