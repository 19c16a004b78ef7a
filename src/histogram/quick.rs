//! zlib-rs' level-1 deflate (`deflate_quick`: one block of static Huffman codes, a match taken
//! only at the single position its hash table holds) for small inputs, writing the very bytes
//! zlib-rs writes, without its per-stream reset: zlib-rs clears its 128 KiB hash table on every
//! reset, which for the ~100-byte V2 encodings of interval histograms cost far more than the
//! compression itself (a year of hourly AWR snapshots encodes 876,000 of them:
//! `bench/awr-year.sh`). Here only the table entries the stream set are cleared after it.
//!
//! Byte-identity with zlib-rs (the version in Cargo.lock) is tested below on structured and
//! random inputs; inputs longer than [`MAX_QUICK`] go to zlib-rs itself.

/// Longest input deflated here: well inside zlib-rs' first window fill (64 KiB) and its
/// farthest match (32,506 bytes), so its window management never comes into play.
pub(crate) const MAX_QUICK: usize = 16 << 10;

/// zlib-rs' hash table size for `deflate_quick` (`HASH_SIZE`).
const HASH_SIZE: usize = 1 << 16;
/// Longest match (`STD_MAX_MATCH`).
const MAX_MATCH: usize = 258;

/// The state kept between streams: the hash table (all zero between streams) and the entries
/// the current stream set.
pub(crate) struct QuickDeflate {
    head: Box<[u16]>,
    touched: Vec<u16>,
}

impl Default for QuickDeflate {
    fn default() -> Self {
        QuickDeflate::new()
    }
}

/// Bits written least significant first (RFC 1951 §3.1.1).
struct Bits<'a> {
    out: &'a mut Vec<u8>,
    buf: u64,
    n: u32,
}

impl Bits<'_> {
    #[inline(always)]
    fn put(&mut self, v: u64, len: u32) {
        self.buf |= v << self.n;
        self.n += len;
        if self.n >= 32 {
            self.out.extend_from_slice(&(self.buf as u32).to_le_bytes());
            self.buf >>= 32;
            self.n -= 32;
        }
    }

    /// Pad with zero bits to a byte boundary and write what is left.
    fn finish(self) {
        let bytes = self.n.div_ceil(8) as usize;
        self.out.extend_from_slice(&self.buf.to_le_bytes()[..bytes]);
    }
}

/// `code` (`len` bits, most significant first as Huffman codes are sent) reversed for
/// least-significant-first writing.
const fn rev(code: u32, len: u32) -> u64 {
    (code.reverse_bits() >> (32 - len)) as u64
}

/// The static literal/length code of symbol `s` (RFC 1951 §3.2.6): (reversed bits, length).
const fn lit_code(s: u32) -> (u64, u32) {
    match s {
        0..=143 => (rev(0x30 + s, 8), 8),
        144..=255 => (rev(0x190 + s - 144, 9), 9),
        256..=279 => (rev(s - 256, 7), 7),
        _ => (rev(0xc0 + s - 280, 8), 8),
    }
}

/// First match length (minus 3) of each length code, and its extra bits (zlib's `base_length`
/// and `extra_lbits`).
const LEN_BASE: [u32; 29] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128,
    160, 192, 224, 255,
];
const LEN_EXTRA: [u32; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];

/// Per match length minus 3 (0..=255): its length symbol's code and extra bits, as one bit
/// string (value, length).
const LEN_CODES: [(u64, u32); 256] = {
    let mut t = [(0, 0); 256];
    let mut lc = 0;
    while lc < 256 {
        // Length 258 has its own code (285), not 284 with extra bits 31.
        let mut code = if lc == 255 { 28 } else { 27 };
        while LEN_BASE[code] > lc as u32 {
            code -= 1;
        }
        let (c, l) = lit_code(257 + code as u32);
        let extra = ((lc as u32 - LEN_BASE[code]) as u64) << l;
        t[lc] = (c | extra, l + LEN_EXTRA[code]);
        lc += 1;
    }
    t
};

/// The static distance code of `d` (1..=32768) and its extra bits, as one bit string.
#[inline]
fn dist_code(d: u32) -> (u64, u32) {
    let (code, extra_bits, extra) = if d <= 4 {
        (d - 1, 0, 0)
    } else {
        let e = 31 - (d - 1).leading_zeros(); // floor(log2(d - 1)), ≥ 2
        (
            2 * e + (((d - 1) >> (e - 1)) & 1),
            e - 1,
            (d - 1) & ((1 << (e - 1)) - 1),
        )
    };
    (rev(code, 5) | ((extra as u64) << 5), 5 + extra_bits)
}

impl QuickDeflate {
    pub(crate) fn new() -> QuickDeflate {
        QuickDeflate {
            head: vec![0u16; HASH_SIZE].into_boxed_slice(),
            touched: Vec::new(),
        }
    }

    /// Append the zlib stream (header, one static block, Adler-32) zlib-rs at level 1 writes
    /// for `input` (at most [`MAX_QUICK`] bytes) to `out`.
    pub(crate) fn compress(&mut self, input: &[u8], out: &mut Vec<u8>) {
        debug_assert!(input.len() <= MAX_QUICK);
        // zlib header: deflate, 32 KiB window, "fastest" level flags.
        out.extend_from_slice(&[0x78, 0x01]);
        let mut bits = Bits { out, buf: 0, n: 0 };
        bits.put(0b011, 3); // last block, static codes
        let n = input.len();
        let word = |i: usize| u32::from_le_bytes(input[i..i + 4].try_into().expect("4 bytes"));
        let mut pos = 0;
        while pos < n {
            if n - pos >= 4 {
                let v = word(pos);
                let h = (v.wrapping_mul(2_654_435_761) >> 16) as usize;
                let cand = self.head[h] as usize;
                self.head[h] = pos as u16;
                self.touched.push(h as u16);
                // An empty entry is 0: position 0 is then the candidate, as in zlib-rs.
                if cand < pos && word(cand) == v {
                    let limit = (n - pos).min(MAX_MATCH);
                    let mut len = 4;
                    while len < limit && input[cand + len] == input[pos + len] {
                        len += 1;
                    }
                    let (lc, ll) = LEN_CODES[len - 3];
                    let (dc, dl) = dist_code((pos - cand) as u32);
                    bits.put(lc | (dc << ll), ll + dl);
                    pos += len;
                    continue;
                }
            }
            let (c, l) = lit_code(input[pos] as u32);
            bits.put(c, l);
            pos += 1;
        }
        let (c, l) = lit_code(256);
        bits.put(c, l);
        bits.finish();
        out.extend_from_slice(&zlib_rs::adler32::adler32(1, input).to_be_bytes());
        for h in self.touched.drain(..) {
            self.head[h as usize] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zlib_rs_level1(input: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; input.len() * 2 + 64];
        let (done, rc) = zlib_rs::compress_slice(&mut out, input, zlib_rs::DeflateConfig::new(1));
        assert_eq!(rc, zlib_rs::ReturnCode::Ok);
        done.to_vec()
    }

    /// The bytes zlib-rs writes at level 1, on inputs that take every path: empty, shorter
    /// than a hash word, runs (overlapping matches, the 258-byte cap, a match ending at the
    /// input's end), matches at distance 1 and far, position 0 as the candidate of an empty
    /// entry, hash collisions, every byte value, V2 histogram encodings, random bytes, and
    /// the longest input taken here.
    #[test]
    fn writes_what_zlib_rs_writes() {
        let mut q = QuickDeflate::new();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut inputs: Vec<Vec<u8>> = vec![
            vec![],
            vec![7],
            vec![0, 0, 0],
            vec![0; 4],
            vec![0; 5],
            vec![0; 300],
            vec![0xff; 259],
            vec![0xaa; 1000],
            (0..=255u8).collect(),
            (0..=255u8).cycle().take(5000).collect(),
            b"abcdabcdabcdXabcdabcd".to_vec(),
            b"\0\0\0\0abc\0\0\0\0".to_vec(),
        ];
        for len in 0..600 {
            // Small alphabets: many matches and hash collisions.
            let k = 1 + len % 5;
            inputs.push((0..len).map(|_| (rnd() % k as u64) as u8).collect());
            inputs.push((0..len).map(|_| rnd() as u8).collect());
        }
        for _ in 0..200 {
            let len = (rnd() as usize) % MAX_QUICK + 1;
            let k = 1 + (rnd() % 40);
            inputs.push((0..len).map(|_| (rnd() % k) as u8).collect());
        }
        inputs.push((0..MAX_QUICK).map(|_| (rnd() % 3) as u8).collect());
        inputs.push((0..MAX_QUICK).map(|_| rnd() as u8).collect());
        // V2 encodings of interval histograms, as the encoder writes them.
        let mut c = crate::histogram::IndexCounts::new();
        let mut raw = Vec::new();
        for n in [1u64, 3, 40, 700, 20_000] {
            for _ in 0..n {
                c.record((rnd() % 40_000_000) >> (rnd() % 20));
            }
            c.write_v2(&mut raw);
            inputs.push(raw.clone());
        }
        for input in &inputs {
            let mut got = Vec::new();
            q.compress(input, &mut got);
            assert_eq!(got, zlib_rs_level1(input), "input of {} bytes", input.len());
        }
        assert!(q.head.iter().all(|&h| h == 0), "the table is left clear");
    }
}
