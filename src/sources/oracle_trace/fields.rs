//! The fields of a database call line and the parameters of a WAIT line, read by the
//! layout the previous line of the same kind had ([`Template`]: most lines repeat it) with
//! SWAR digit and key reading, or field by field when the layout changed.

use super::*;

/// The `c`, `e`, `dep` and `tim` fields of a database call line (after its colon).
#[derive(Debug, Default, PartialEq)]
pub(super) struct CallFields {
    pub(super) c: Option<u64>,
    pub(super) e: Option<u64>,
    pub(super) dep: u64,
    pub(super) tim: Option<i64>,
}

/// Read the fields of a database call line: `c=…,e=…,p=…,…,dep=…,…,tim=…`.
#[cfg(test)]
pub(super) fn call_fields(b: &[u8]) -> CallFields {
    call_fields_noting(b, &mut None)
}

/// [`call_fields`], also noting the line's layout as a [`Template`] in `tmpl` (left `None`
/// when a field's bytes before its value take more than 16, or a field other than the four
/// read has no `=`). A template's parameter is [`Param::Other`] for a field passed over, else
/// `Ela`, `Blocks`, `Block` or `Tim` standing for `c`, `e`, `dep` and `tim`.
pub(super) fn call_fields_noting(b: &[u8], tmpl: &mut Option<Template>) -> CallFields {
    if let Some(t) = tmpl.as_mut() {
        t.keys.clear();
    }
    let mut f = CallFields::default();
    // `key=value` fields split at commas; a field's key is what precedes its first `=`, so
    // the key is `c` exactly when the (trimmed) field starts with `c=`, and so on: the
    // other fields (`p=`, `cr=`, `cu=`, `mis=`, `r=`, `og=`, `plh=` …) are passed over
    // by their first byte. A value is the trimmed rest of its field; plain digits up to the
    // comma (the rule) are taken as they are accumulated.
    let len = b.len();
    let mut i = 0;
    while i <= len {
        let seg = i;
        while i < len && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let rest = &b[i..];
        let key = match rest.first() {
            Some(b'c') if rest.get(1) == Some(&b'=') => Some((0, 2)),
            Some(b'e') if rest.get(1) == Some(&b'=') => Some((1, 2)),
            Some(b'd') if rest.starts_with(b"dep=") => Some((2, 4)),
            Some(b't') if rest.starts_with(b"tim=") => Some((3, 4)),
            _ => None,
        };
        let Some((k, skip)) = key else {
            if tmpl.is_some() {
                // The field up to its `=` tells it apart from the four read.
                let eq = find_byte(rest, b'=').filter(|&q| find_byte(&rest[..q], b',').is_none());
                let kept = eq.is_some_and(|q| {
                    tmpl.as_mut()
                        .is_some_and(|t| t.push(&b[seg..i + q + 1], Param::Other))
                });
                if !kept && !rest.is_empty() {
                    *tmpl = None;
                }
            }
            i += find_byte(rest, b',').map_or(rest.len(), |c| c + 1);
            if i >= len {
                break;
            }
            continue;
        };
        let vs = i + skip;
        if let Some(t) = tmpl.as_mut() {
            if !t.push(&b[seg..vs], CALL_PARAMS[k]) {
                *tmpl = None;
            }
        }
        let (acc, nd) = leading_digits(&b[vs..]);
        let ve = vs + nd;
        let (u, s) = if (ve == len || b[ve] == b',') && (1..=19).contains(&nd) {
            i = ve + 1;
            (Some(acc), i64::try_from(acc).ok())
        } else {
            let end = vs + find_byte(&b[vs..], b',').unwrap_or(len - vs);
            i = end + 1;
            let v = trim(&b[vs..end]);
            if k == 3 {
                (None, parse_i64(v))
            } else {
                (parse_u64(v), None)
            }
        };
        match k {
            0 => f.c = u,
            1 => f.e = u,
            2 => f.dep = u.unwrap_or(0),
            _ => f.tim = s,
        }
    }
    f
}

/// The template parameters standing for a call's `c`, `e`, `dep` and `tim` (see
/// [`call_fields_noting`]).
pub(super) const CALL_PARAMS: [Param; 4] = [Param::Ela, Param::Blocks, Param::Block, Param::Tim];

/// [`call_fields`] of a line laid out as `t`: `None` as soon as the line departs from it (the
/// bytes before a value, a value that is not plain digits up to its comma, fields left after
/// the last), so that the caller reads it the general way. Where it returns a value, that
/// value is what [`call_fields`] returns: the same bytes begin the same fields.
#[inline]
pub(super) fn call_fields_by_template(b: &[u8], t: &Template) -> Option<CallFields> {
    let mut f = CallFields::default();
    let len = b.len();
    let mut i = 0;
    for k in &t.keys {
        if i > len || !k.matches(b, i) {
            return None;
        }
        i += k.len;
        if let Param::Other = k.param {
            i += find_byte(&b[i..], b',').map_or(len - i, |c| c + 1);
            continue;
        }
        let (acc, nd) = leading_digits(&b[i..]);
        let ve = i + nd;
        if !(ve == len || b[ve] == b',') || !(1..=19).contains(&nd) {
            return None;
        }
        i = ve + 1;
        match k.param {
            Param::Ela => f.c = Some(acc),
            Param::Blocks => f.e = Some(acc),
            Param::Block => f.dep = acc,
            _ => f.tim = Some(i64::try_from(acc).ok()?),
        }
    }
    (i >= len).then_some(f)
}

/// Parse the parameters after `nam='…'`: `ela= N name=value … tim=T`. Parameter names may
/// contain spaces (`file number=`, `first dba=`); values are the next space-free token.
///
/// One pass: a name of up to seven bytes (all the common ones) is found and told apart with
/// one eight-byte load (the bytes before the first `=`, as a number, with the name's length in
/// the top byte); longer names are scanned for and compared as bytes. The value's digits are
/// accumulated while its end is found, so a plain decimal value (all of them but `obj#=-1` in
/// practice) is never scanned twice.
#[cfg(test)]
pub(super) fn parse_params(p: &[u8]) -> WaitParams {
    parse_params_noting(p, &mut None)
}

/// [`parse_params`], also noting the line's layout as a [`Template`] in `tmpl` (left `None`
/// when a name and the spaces around it take more than 16 bytes).
pub(super) fn parse_params_noting(p: &[u8], tmpl: &mut Option<Template>) -> WaitParams {
    let mut w = WaitParams::default();
    let n = p.len();
    let mut i = 0;
    // Where the bytes before the next value (spaces, name, `=`, spaces) begin.
    let mut seg = 0;
    if let Some(t) = tmpl.as_mut() {
        t.keys.clear();
    }
    let mut noting = tmpl.as_mut();
    loop {
        while i < n && p[i] == b' ' {
            i += 1;
        }
        let name_start = i;
        // `key`: the name as a short key (see [`short_key`]), when it is one.
        let (key, eq) = match p.get(i..i + 8) {
            Some(chunk) => {
                let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                match first_byte_eq(x, b'=') {
                    Some(k) => (name_key_at(p, i, i + k), i + k),
                    None => match find_byte(&p[i + 8..], b'=') {
                        Some(k) => (None, i + 8 + k),
                        None => break,
                    },
                }
            }
            None => match find_byte(&p[i..], b'=') {
                Some(k) => (None, i + k),
                None => break,
            },
        };
        let param = param_of(key, &p[name_start..eq]);
        i = eq + 1;
        while i < n && p[i] == b' ' {
            i += 1;
        }
        if let Some(t) = noting.as_deref_mut() {
            if !t.push(&p[seg..i], param) {
                noting = None;
                *tmpl = None;
            }
        }
        i = read_value(p, i, param, &mut w);
        seg = i;
    }
    w
}

/// Read the value of `param` that begins at `vs` (after the spaces following its `=`) into
/// `w`; returns where it ends (the next space, or the end of `p`). A value that is not kept
/// is only passed over. Digits first (the common case, eight at a time), then whatever else
/// the value holds up to the next space.
#[inline(always)]
pub(super) fn read_value(p: &[u8], vs: usize, param: Param, w: &mut WaitParams) -> usize {
    let n = p.len();
    if let Param::Other = param {
        return vs + find_byte(&p[vs..], b' ').unwrap_or(n - vs);
    }
    let (acc, nd) = leading_digits(&p[vs..]);
    let mut i = vs + nd;
    let mut digits = true;
    if i < n && p[i] != b' ' {
        digits = false;
        i += find_byte(&p[i..], b' ').unwrap_or(n - i);
    }
    let val = &p[vs..i];
    // Up to 19 digits cannot overflow u64: the accumulated value is the number.
    let fast = (digits && !val.is_empty() && val.len() <= 19).then_some(acc);
    keep_param(w, param, val, fast);
    i
}

/// The layout of a WAIT line's parameters: for each, the bytes before its value (spaces, its
/// name, `=`, spaces: at most 16) and which parameter it is. Lines of one event nearly always
/// share it, so [`params_by_template`] checks those bytes with two word comparisons instead of
/// searching for `=` and reading the name.
#[derive(Default, Debug)]
pub(super) struct Template {
    keys: Vec<TemplateKey>,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct TemplateKey {
    /// The bytes, little-endian, zero past `len`, and the mask of the bytes that count.
    words: [u64; 2],
    masks: [u64; 2],
    len: usize,
    param: Param,
}

impl TemplateKey {
    /// Whether `p` holds this key's bytes at `i`.
    #[inline]
    fn matches(&self, p: &[u8], i: usize) -> bool {
        word_at(p, i) & self.masks[0] == self.words[0]
            && (self.len <= 8 || word_at(p, i + 8) & self.masks[1] == self.words[1])
    }
}

impl Template {
    /// Add the parameter whose value follows `before`; false when `before` is empty or longer
    /// than 16 bytes.
    fn push(&mut self, before: &[u8], param: Param) -> bool {
        if before.is_empty() || before.len() > 16 {
            return false;
        }
        let len = before.len();
        let masks = [low_bytes(len.min(8)), low_bytes(len.saturating_sub(8))];
        self.keys.push(TemplateKey {
            words: [word_at(before, 0) & masks[0], word_at(before, 8) & masks[1]],
            masks,
            len,
            param,
        });
        true
    }
}

/// Eight bytes of `p` from `i` (little-endian), zero past its end.
#[inline]
pub(super) fn word_at(p: &[u8], i: usize) -> u64 {
    match p.get(i..i + 8) {
        Some(c) => u64::from_le_bytes(c.try_into().expect("8 bytes")),
        // The last eight bytes, shifted so that those from `i` come first.
        None if p.len() >= 8 && i < p.len() => {
            u64::from_le_bytes(p[p.len() - 8..].try_into().expect("8 bytes"))
                >> (8 * (i + 8 - p.len()))
        }
        // Shorter than eight bytes in all: byte by byte (a copy of a length not known at
        // compile time is a call of memcpy).
        None => p
            .get(i..)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .fold(0, |w, (j, &c)| w | (c as u64) << (8 * j)),
    }
}

/// The mask of the low `n` (0 to 8) bytes of a word.
#[inline]
pub(super) fn low_bytes(n: usize) -> u64 {
    if n >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * n)) - 1
    }
}

/// [`parse_params`] of a line laid out as `t`: `None` as soon as the line departs from it (a
/// name, a space, a value starting with a space, anything but spaces after the last value),
/// so that the caller parses it the general way. Where it returns a value, that value is what
/// [`parse_params`] returns: the same bytes delimit the same names and values.
#[inline]
pub(super) fn params_by_template(p: &[u8], t: &Template) -> Option<WaitParams> {
    let mut w = WaitParams::default();
    let n = p.len();
    let mut i = 0;
    for k in &t.keys {
        if !k.matches(p, i) {
            return None;
        }
        i += k.len;
        // The general reading skips every space before a value; the template holds as many
        // as its own line had.
        if i >= n || p[i] == b' ' {
            return None;
        }
        i = read_value(p, i, k.param, &mut w);
    }
    p[i..].iter().all(|&c| c == b' ').then_some(w)
}

/// The name `p[start..eq]` (shorter than eight bytes) as a [`short_key`], unless it ends in a
/// space (then it is trimmed and compared as bytes by [`param_of`]).
#[inline]
pub(super) fn name_key_at(p: &[u8], start: usize, eq: usize) -> Option<u64> {
    let k = eq - start;
    if k > 0 && p[eq - 1] == b' ' {
        return None;
    }
    Some((word_at(p, start) & low_bytes(k)) | (k as u64) << 56)
}

/// Which parameter the name before a `=` is: by its short key when it has one, else by its
/// bytes with trailing spaces trimmed.
#[inline]
pub(super) fn param_of(key: Option<u64>, name: &[u8]) -> Param {
    match key {
        Some(k) => match k {
            K_ELA => Param::Ela,
            K_TIM => Param::Tim,
            K_OBJ => Param::Obj,
            K_FILE => Param::File,
            K_BLOCK => Param::Block,
            K_BLOCKS => Param::Blocks,
            K_P1 => Param::P1,
            K_P2 => Param::P2,
            K_P3 => Param::P3,
            _ => Param::Other,
        },
        None => match trim_end_spaces(name) {
            b"ela" => Param::Ela,
            b"tim" => Param::Tim,
            b"obj#" => Param::Obj,
            b"file#" | b"file number" => Param::File,
            b"block#" | b"first dba" => Param::Block,
            b"blocks" | b"block cnt" => Param::Blocks,
            b"p1" => Param::P1,
            b"p2" => Param::P2,
            b"p3" => Param::P3,
            _ => Param::Other,
        },
    }
}

/// `name` without the spaces it ends in.
pub(super) fn trim_end_spaces(name: &[u8]) -> &[u8] {
    let end = name.iter().rposition(|&c| c != b' ').map_or(0, |e| e + 1);
    &name[..end]
}

/// Keep the value `val` of `param`; `fast` is its number when it is plain digits (up to 19).
#[inline(always)]
pub(super) fn keep_param(w: &mut WaitParams, param: Param, val: &[u8], fast: Option<u64>) {
    let u = || fast.or_else(|| parse_u64(val));
    let s = || match fast {
        Some(x) => i64::try_from(x).ok(),
        None => parse_i64(val),
    };
    match param {
        Param::Ela => match u() {
            Some(x) if x <= MAX_TRACE_US => w.ela = Some(x),
            Some(_) => w.bad = Some("ela= is beyond 12 days (corrupt line?)"),
            None => w.bad = Some("ela= is not a number"),
        },
        Param::Tim => match s() {
            Some(x) => w.tim = Some(x),
            None => w.bad = Some("tim= is not a number"),
        },
        Param::Obj => w.obj = s(),
        Param::File => w.file = s(),
        Param::Block => w.block = u(),
        // Bounded (no read spans 2^32 blocks) so sums of them cannot overflow.
        Param::Blocks => w.blocks = u().filter(|&b| b <= 1 << 32),
        Param::P1 => w.p1 = s(),
        Param::P2 => w.p2 = u(),
        Param::P3 => w.p3 = u(),
        Param::Other => {}
    }
}

/// The number written by the first `k` (1 to 8) bytes of `a` (little-endian), each already a
/// digit's value (0 to 9): the `k` digits, preceded by 8 − k zeros, as the 8-digit number they
/// make, with three multiplications.
#[inline]
pub(super) fn swar_digits(a: u64, k: usize) -> u64 {
    let d = if k == 8 { a } else { a << (8 * (8 - k)) };
    let d = d.wrapping_mul(10).wrapping_add(d >> 8);
    ((d & 0x0000_00ff_0000_00ff)
        .wrapping_mul(100 + (1_000_000 << 32))
        .wrapping_add(((d >> 16) & 0x0000_00ff_0000_00ff).wrapping_mul(1 + (10_000 << 32))))
        >> 32
}

/// A name's length and first eight bytes (zero-padded): names that differ in it differ.
#[inline]
pub(super) fn name_key(name: &[u8]) -> (usize, u64) {
    (name.len(), word_at(name, 0))
}

/// Whether two names of the same [`name_key`] (so of one length) are equal: their bytes after
/// the first eight, compared eight at a time (names are short; this beats a call of `memcmp`).
#[inline]
pub(super) fn same_tail(a: &[u8], b: &[u8]) -> bool {
    let (Some(a), Some(b)) = (a.get(8..), b.get(8..)) else {
        return true;
    };
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
    let mut x = a.chunks_exact(8);
    let mut y = b.chunks_exact(8);
    x.by_ref().zip(y.by_ref()).all(|(p, q)| word(p) == word(q))
        && x.remainder().iter().zip(y.remainder()).all(|(p, q)| p == q)
}

/// The WAIT parameters [`parse_params`] keeps.
#[derive(Clone, Copy, Debug)]
pub(super) enum Param {
    Ela,
    Tim,
    Obj,
    File,
    Block,
    Blocks,
    P1,
    P2,
    P3,
    Other,
}

/// A name of up to seven bytes as one number: its bytes (little-endian) and its length in the
/// top byte, so that names of different lengths never compare equal.
pub(super) const fn short_key(name: &[u8]) -> u64 {
    let mut k = (name.len() as u64) << 56;
    let mut i = 0;
    while i < name.len() {
        k |= (name[i] as u64) << (8 * i);
        i += 1;
    }
    k
}

pub(super) const K_ELA: u64 = short_key(b"ela");
pub(super) const K_TIM: u64 = short_key(b"tim");
pub(super) const K_OBJ: u64 = short_key(b"obj#");
pub(super) const K_FILE: u64 = short_key(b"file#");
pub(super) const K_BLOCK: u64 = short_key(b"block#");
pub(super) const K_BLOCKS: u64 = short_key(b"blocks");
pub(super) const K_P1: u64 = short_key(b"p1");
pub(super) const K_P2: u64 = short_key(b"p2");
pub(super) const K_P3: u64 = short_key(b"p3");

pub(super) const ONES: u64 = 0x0101_0101_0101_0101;

/// Index of the first byte of the eight in `x` (little-endian) equal to `b`, if any. Exact:
/// no carry crosses a byte.
#[inline]
pub(super) fn first_byte_eq(x: u64, b: u8) -> Option<usize> {
    let t = x ^ (b as u64 * ONES);
    let low = 0x7f * ONES;
    let zero = !(((t & low) + low) | t) & (0x80 * ONES);
    (zero != 0).then(|| (zero.trailing_zeros() / 8) as usize)
}

/// Index of the first `b` in `h`: eight bytes at a time (the fields of a trace line are short,
/// so this beats setting up a vector search).
#[inline]
pub(super) fn find_byte(h: &[u8], b: u8) -> Option<usize> {
    let mut i = 0;
    while let Some(chunk) = h.get(i..i + 8) {
        if let Some(k) = first_byte_eq(u64::from_le_bytes(chunk.try_into().expect("8 bytes")), b) {
            return Some(i + k);
        }
        i += 8;
    }
    h[i..].iter().position(|&c| c == b).map(|k| i + k)
}

/// The decimal digits that `p` begins with: their value (wrapping past 2^64, so exact for up
/// to 19 digits) and how many there are. Eight bytes at a time ([`word_at`]: past the end of
/// `p` come zeros, which are not digits), SWAR: the first non-digit byte is found and the
/// digits before it converted with three multiplications.
#[inline(always)]
pub(super) fn leading_digits(p: &[u8]) -> (u64, usize) {
    let mut acc: u64 = 0;
    let mut i = 0;
    while i < p.len() {
        // Per byte: high nibble of b ^ '0' set, or low nibble above 9, marks a non-digit. A
        // carry out of a byte (only from a non-digit byte) can only mark bytes after it.
        let a = word_at(p, i) ^ (0x30 * ONES);
        let t = (a & (0xf0 * ONES)) | (a.wrapping_add(0x06 * ONES) & (0xf0 * ONES));
        let non_digit = ((t >> 1) + 0x78 * ONES) & (0x80 * ONES);
        let k = (non_digit.trailing_zeros() / 8) as usize;
        if k == 0 {
            break;
        }
        acc = acc.wrapping_mul(POW10[k]).wrapping_add(swar_digits(a, k));
        i += k;
        if k < 8 {
            break;
        }
    }
    (acc, i)
}

pub(super) const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];
