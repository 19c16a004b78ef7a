//! Tests of the Oracle trace reader.

use super::fields::*;
use super::*;

fn parse_str(s: &str) -> TraceFile {
    let mut r = LineReader::from_reader(Box::new(std::io::Cursor::new(s.as_bytes().to_vec())), "t")
        .unwrap();
    parse_trace(&mut r, &ParseOptions::default()).unwrap()
}

#[test]
fn params_with_spaces_and_both_ela_forms() {
    let p = parse_params(b" ela= 23 file number=5 first dba=1234 block cnt=16 obj#=-1 tim=99");
    assert_eq!(
        (p.ela, p.file, p.block, p.blocks, p.obj, p.tim),
        (Some(23), Some(5), Some(1234), Some(16), Some(-1), Some(99))
    );
    let p = parse_params(b" ela=7 file#=6 block#=4 blocks=1 obj#=4294967295 tim=5");
    assert_eq!((p.ela, p.obj), (Some(7), Some(4294967295)));
    assert!(parse_params(b" ela= x tim=5").bad.is_some());
}

/// The tests' fixed-seed random numbers (xorshift64).
fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

/// Lines laid out as one of `layouts` (for each field, the bytes before its value), each
/// departing from it now and then: one field in `odd_name` gets a name of `names` instead,
/// one value in `odd_value` is one of `values` (else plain digits), and each `(k, tail)`
/// is appended to one line in `k`.
struct LayoutLines<'a> {
    seed: u64,
    layouts: &'a [&'a [&'a [u8]]],
    names: &'a [&'a [u8]],
    values: &'a [&'a [u8]],
    odd_name: u64,
    odd_value: u64,
    tails: &'a [(u64, &'a [u8])],
}

impl LayoutLines<'_> {
    fn line(&self, layout: &[&[u8]], next: &mut impl FnMut() -> u64) -> Vec<u8> {
        let mut l = Vec::new();
        for key in layout {
            if next().is_multiple_of(self.odd_name) {
                l.extend_from_slice(self.names[(next() >> 8) as usize % self.names.len()]);
            } else {
                l.extend_from_slice(key);
            }
            if next().is_multiple_of(self.odd_value) {
                l.extend_from_slice(self.values[(next() >> 8) as usize % self.values.len()]);
            } else {
                l.extend_from_slice((next() % 100_000_000_000_000).to_string().as_bytes());
            }
        }
        for (k, tail) in self.tails {
            if next().is_multiple_of(*k) {
                l.extend_from_slice(tail);
            }
        }
        l
    }
}

/// For lines of `lines`: the template noted from a line, applied to lines of the same
/// layout (three times in four) or another, reads a line, where it reads it at all, as
/// the general reading (`noting` without a template) does; noting a template does not
/// change the reading; and the template reads at least a third of the lines (else this
/// would prove nothing).
fn check_template_reading<T: PartialEq + std::fmt::Debug>(
    lines: &LayoutLines,
    noting: fn(&[u8], &mut Option<Template>) -> T,
    by_template: fn(&[u8], &Template) -> Option<T>,
) {
    let mut next = xorshift(lines.seed);
    let general = |l: &[u8]| noting(l, &mut None);
    let (mut read, mut tried) = (0, 0);
    for _ in 0..3_000 {
        let layout = lines.layouts[(next() >> 8) as usize % lines.layouts.len()];
        let mut t = Some(Template::default());
        let first = lines.line(layout, &mut next);
        assert_eq!(noting(&first, &mut t), general(&first));
        let Some(t) = t else { continue };
        for _ in 0..4 {
            let l = if next().is_multiple_of(4) {
                let other = lines.layouts[(next() >> 8) as usize % lines.layouts.len()];
                lines.line(other, &mut next)
            } else {
                lines.line(layout, &mut next)
            };
            tried += 1;
            if let Some(r) = by_template(&l, &t) {
                read += 1;
                assert_eq!(r, general(&l), "{:?}", String::from_utf8_lossy(&l));
            }
        }
    }
    assert!(read * 3 > tried, "{read} of {tried}");
}

/// Random lines made of `pieces` (xorshift, fixed seed).
fn random_lines(pieces: &[&[u8]], n: usize, max_len: usize) -> Vec<Vec<u8>> {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|_| {
            let len = next() as usize % max_len;
            let mut l = Vec::new();
            while l.len() < len {
                l.extend_from_slice(pieces[(next() >> 32) as usize % pieces.len()]);
            }
            l
        })
        .collect()
}

#[test]
fn params_as_the_plain_reading() {
    // The plain reading of `name=value …`: spaces skipped, a name up to the next `=` with
    // its trailing spaces trimmed, then the value up to the next space; numbers parsed
    // whole.
    fn plain(p: &[u8]) -> WaitParams {
        let mut w = WaitParams::default();
        let mut rest = p;
        loop {
            let start = rest.iter().position(|&c| c != b' ').unwrap_or(rest.len());
            rest = &rest[start..];
            let Some(eq) = rest.iter().position(|&c| c == b'=') else {
                break;
            };
            let name = trim_end_spaces(&rest[..eq]);
            let name = name.to_vec();
            rest = &rest[eq + 1..];
            let vs = rest.iter().position(|&c| c != b' ').unwrap_or(rest.len());
            rest = &rest[vs..];
            let ve = rest.iter().position(|&c| c == b' ').unwrap_or(rest.len());
            let v = &rest[..ve];
            rest = &rest[ve..];
            match name.as_slice() {
                b"ela" => match parse_u64(v) {
                    Some(x) if x <= MAX_TRACE_US => w.ela = Some(x),
                    Some(_) => w.bad = Some("ela= is beyond 12 days (corrupt line?)"),
                    None => w.bad = Some("ela= is not a number"),
                },
                b"tim" => match parse_i64(v) {
                    Some(x) => w.tim = Some(x),
                    None => w.bad = Some("tim= is not a number"),
                },
                b"obj#" => w.obj = parse_i64(v),
                b"file#" | b"file number" => w.file = parse_i64(v),
                b"block#" | b"first dba" => w.block = parse_u64(v),
                b"blocks" | b"block cnt" => w.blocks = parse_u64(v).filter(|&b| b <= 1 << 32),
                b"p1" => w.p1 = parse_i64(v),
                b"p2" => w.p2 = parse_u64(v),
                b"p3" => w.p3 = parse_u64(v),
                _ => {}
            }
        }
        w
    }
    let pieces: [&[u8]; 26] = [
        b" ",
        b"  ",
        b"=",
        b"ela",
        b"ela ",
        b"tim",
        b"obj#",
        b"file#",
        b"file number",
        b"block#",
        b"first dba",
        b"blocks",
        b"block cnt",
        b"p1",
        b"p2",
        b"p3",
        b"driver id",
        b"-1",
        b"+7",
        b"12345678901234567890",
        b"2707602560910",
        b"9",
        b"x\xff",
        b"0",
        b"\0",
        b"4294967297",
    ];
    let mut lines = random_lines(&pieces, 20_000, 150);
    lines.push(b" ela= 23 file number=5 first dba=1234 block cnt=16 obj#=-1 tim=99".to_vec());
    lines.push(b" ela =7 file# =6 p1=x p2=99999999999999999999 tim=-5".to_vec());
    for l in &lines {
        assert_eq!(
            parse_params(l),
            plain(l),
            "{:?}",
            String::from_utf8_lossy(l)
        );
    }
}

#[test]
fn params_by_a_template_as_the_general_reading() {
    // Lines laid out alike (the template's home ground) and lines that depart from the
    // layout by a name, a space or a value: wherever the template reads a line, it reads
    // it as the general reading does.
    let layouts: [&[&[u8]]; 4] = [
        &[
            b" ela= ",
            b" file#=",
            b" block#=",
            b" blocks=",
            b" obj#=",
            b" tim=",
        ],
        &[
            b" ela= ",
            b" driver id=",
            b" #bytes=",
            b" p3=",
            b" obj#=",
            b" tim=",
        ],
        &[
            b" ela= ",
            b" file number=",
            b" first dba=",
            b" block cnt=",
            b" tim=",
        ],
        &[b" ela= ", b" p1=", b" p2=", b" p3="],
    ];
    let values: [&[u8]; 12] = [
        b"7",
        b"0",
        b"-1",
        b"2707602560910",
        b"12345678901234567890",
        b"x\xff",
        b"+7",
        b"",
        b" 5",
        b"4294967297",
        b"99",
        b"1650815232",
    ];
    let names: [&[u8]; 4] = [b" ela =", b"  tim=", b" obj#= ", b" blocks="];
    check_template_reading(
        &LayoutLines {
            seed: 0x2545_f491_4f6c_dd1d,
            layouts: &layouts,
            names: &names,
            values: &values,
            odd_name: 32,
            odd_value: 8,
            tails: &[(16, b"   "), (32, b" extra=1")],
        },
        parse_params_noting,
        params_by_template,
    );
}

#[test]
fn call_fields_by_a_template_as_the_general_reading() {
    // As for WAIT parameters: lines of one layout, and lines departing from it by a
    // field's name, spaces or value; wherever the template reads a line, it reads it as
    // the general reading does.
    let layouts: [&[&[u8]]; 3] = [
        &[
            b"c=", b",e=", b",p=", b",cr=", b",cu=", b",mis=", b",r=", b",dep=", b",og=", b",plh=",
            b",tim=",
        ],
        &[
            b"c=", b",e=", b",p=", b",cr=", b",cu=", b",mis=", b",r=", b",dep=", b",og=", b",tim=",
        ],
        &[b"c=", b",e=", b",dep=", b",type=", b",tim="],
    ];
    let values: [&[u8]; 9] = [
        b"-1",
        b"12345678901234567890",
        b"x",
        b"",
        b" 5",
        b"9223372036854775808",
        b"7 ",
        b"5,",
        b"1,c=9",
    ];
    let names: [&[u8]; 5] = [b", c=", b",e =", b",dep=", b",tim=", b",cx="];
    check_template_reading(
        &LayoutLines {
            seed: 0x9e37_79b9_7f4a_7c15,
            layouts: &layouts,
            names: &names,
            values: &values,
            odd_name: 64,
            odd_value: 32,
            tails: &[(16, b",")],
        },
        call_fields_noting,
        call_fields_by_template,
    );
}

#[test]
fn call_fields_as_the_plain_reading() {
    // The plain reading: fields split at commas and trimmed, values trimmed and parsed
    // whole, a later field overriding an earlier one.
    fn plain(b: &[u8]) -> CallFields {
        let mut f = CallFields::default();
        for kv in b.split(|&x| x == b',') {
            let kv = kv.trim_ascii();
            if let Some(v) = kv.strip_prefix(b"c=") {
                f.c = parse_u64(v.trim_ascii());
            } else if let Some(v) = kv.strip_prefix(b"e=") {
                f.e = parse_u64(v.trim_ascii());
            } else if let Some(v) = kv.strip_prefix(b"dep=") {
                f.dep = parse_u64(v.trim_ascii()).unwrap_or(0);
            } else if let Some(v) = kv.strip_prefix(b"tim=") {
                f.tim = parse_i64(v.trim_ascii());
            }
        }
        f
    }
    let pieces: [&[u8]; 22] = [
        b",",
        b" ",
        b"\t",
        b"c=",
        b"e=",
        b"dep=",
        b"tim=",
        b"cr=",
        b"p=",
        b"c =",
        b"d",
        b"t",
        b"1",
        b"42",
        b"-3",
        b"+4",
        b"2707602560910",
        b"12345678901234567890",
        b"99999999999999999999",
        b"x",
        b"\xff",
        b"=",
    ];
    let mut lines = random_lines(&pieces, 20_000, 100);
    lines.push(b"c=120,e=150,p=0,cr=0,cu=0,mis=1,r=0,dep=0,og=1,plh=0,tim=2707602560910".to_vec());
    lines.push(b" c = 1, e=2 ,dep= 3,tim=-9,c=5,".to_vec());
    for l in &lines {
        assert_eq!(call_fields(l), plain(l), "{:?}", String::from_utf8_lossy(l));
    }
}

#[test]
fn leading_digits_as_one_by_one() {
    let one_by_one = |p: &[u8]| {
        let mut acc = 0u64;
        let mut n = 0;
        for &c in p {
            if !c.is_ascii_digit() {
                break;
            }
            acc = acc.wrapping_mul(10).wrapping_add((c - b'0') as u64);
            n += 1;
        }
        (acc, n)
    };
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let alphabet = b"0123456789 =/:-9x\xff\xfa\x2f\x3a";
    for len in 0..40 {
        for _ in 0..200 {
            let s: Vec<u8> = (0..len)
                .map(|_| {
                    let seed = next();
                    // Mostly digits, sometimes any byte of the alphabet.
                    if !seed.is_multiple_of(5) {
                        b'0' + (seed >> 8) as u8 % 10
                    } else {
                        alphabet[(seed >> 8) as usize % alphabet.len()]
                    }
                })
                .collect();
            assert_eq!(leading_digits(&s), one_by_one(&s), "{s:?}");
        }
    }
    assert_eq!(leading_digits(b"2707602560910 x"), (2707602560910, 13));
    assert_eq!(
        leading_digits(b"99999999999999999999999"),
        one_by_one(b"99999999999999999999999")
    );
}

#[test]
fn between_call_waits_by_time() {
    let t = parse_str(
            "WAIT #1: nam='SQL*Net message from client' ela= 1000 driver id=1 #bytes=1 p3=0 obj#=-1 tim=10000\n\
             WAIT #1: nam='db file sequential read' ela= 300 file#=1 block#=2 blocks=1 obj#=5 tim=10400\n\
             FETCH #1:c=100,e=500,p=1,cr=1,cu=0,mis=0,r=1,dep=0,og=1,plh=1,tim=10500\n",
        );
    let sn = &t.events[0];
    assert_eq!((sn.between_us, sn.count), (1000, 1));
    assert_eq!(t.events[1].between_us, 0);
    assert_eq!(t.calls["FETCH"].elapsed_us, 500);
    assert_eq!(t.stats.parsed, 3);
}
