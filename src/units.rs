//! Units: parsing of sizes and durations as people write them (`8k`, `1.5GiB`, `30s`, `500ms`),
//! and human formatting of latencies, sizes and rates, shared by every command and renderer.

/// Parse a size such as `8k`, `4G`, `1.5GiB` (k/M/G are binary: 1k = 1024).
pub(crate) fn parse_size(s: &str) -> std::result::Result<u64, String> {
    parse_size::Config::new()
        .with_binary()
        .parse_size(s)
        .map_err(|e| format!("`{s}` is not a size ({e}); use e.g. 8k, 512, 4G"))
}

/// The longest duration any option takes (366 days): a run, a wait for `--start-at`, a
/// think time or an interval beyond it is a typo, and would overflow the clocks it is added to.
pub(crate) const MAX_DURATION_S: f64 = 366.0 * 86400.0;

/// Parse a duration such as `30s`, `500ms`, `2m` or a plain number of seconds, from 0 to
/// [`MAX_DURATION_S`] (the one duration parser behind every option and `--start-at +D`).
pub(crate) fn parse_duration(s: &str) -> std::result::Result<f64, String> {
    let v = match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => v,
        Ok(_) => {
            return Err(format!(
                "`{s}` is not a valid duration (a number of seconds ≥ 0)"
            ))
        }
        Err(_) => humantime::parse_duration(s.trim())
            .map(|d| d.as_secs_f64())
            .map_err(|e| format!("`{s}` is not a duration ({e}); use e.g. 30s, 500ms, 2m"))?,
    };
    if v > MAX_DURATION_S {
        return Err(format!(
            "`{s}` is too long: durations go up to 366 days (366d)"
        ));
    }
    Ok(v)
}

/// Parse a latency or think time such as `5ms`, `500us`, `1.5s`: a unit is required. A bare
/// number is refused with the fix (`5` → `5ms`), since a latency target is written in
/// milliseconds by habit (CALIBRATE_IO's `max_latency`) and a bare `5` silently meaning five
/// seconds is a trap. Zero needs no unit.
pub(crate) fn parse_latency(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim();
    if let Ok(v) = t.parse::<f64>() {
        if v == 0.0 {
            return Ok(0.0);
        }
        if !(v.is_finite() && v > 0.0) {
            return Err(format!("`{s}` is not a valid duration"));
        }
        return Err(format!(
            "`{s}` has no unit: a latency needs one, e.g. {t}ms (milliseconds), {t}us \
             (microseconds) or {t}s (seconds)"
        ));
    }
    parse_duration(t)
}

/// Format nanoseconds with a unit chosen for 3 significant digits: `850 ns`, `90.1 µs`, `4.10 ms`, `1.20 s`.
/// A negative duration (a difference) keeps its sign: `-381 µs`, never `-381146 ns`.
pub fn fmt_ns(ns: f64) -> String {
    if ns < 0.0 {
        return format!("-{}", fmt_ns(-ns));
    }
    // Thresholds just below each power of 1000, so that 999.7 ns is "1 µs", never "1000 ns".
    let (v, unit) = if ns < 999.5 {
        (ns, "ns")
    } else if ns < 999.5e3 {
        (ns / 1e3, "µs")
    } else if ns < 999.5e6 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    format!("{} {unit}", sig3(v))
}

/// Format bytes in binary units: `512 B`, `8 KiB`, `1.5 GiB`.
pub(crate) fn fmt_bytes(b: u64) -> String {
    const U: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{} {}", sig3(v), U[i])
    }
}

/// Format a count rate: `950`, `12.3k`, `1.05M`.
pub fn fmt_rate(v: f64) -> String {
    if v < 1e3 {
        sig3(v)
    } else if v < 1e6 {
        format!("{}k", sig3(v / 1e3))
    } else {
        format!("{}M", sig3(v / 1e6))
    }
}

/// A number to about 3 significant digits without trailing zeros (`4.1`, `90.1`, `850`).
pub fn sig3(v: f64) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// `other / base` as `1.23×` (or `-` when undefined).
pub fn ratio(base: f64, other: f64) -> String {
    if base > 0.0 && other.is_finite() {
        format!("{}×", sig3(other / base))
    } else {
        "-".into()
    }
}

/// Ranks as ascending runs: `0–4, 7, 9–999` (the input in any order; repeats once).
pub(crate) fn fmt_ranks(ranks: &[u32]) -> String {
    let mut v = ranks.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}–{}", v[i], v[j])
        } else {
            v[i].to_string()
        });
        i = j + 1;
    }
    out.join(", ")
}

/// A span of seconds, `15–15.3 s`: both ends with as many decimals as keep them apart (a
/// last, partial interval never reads `15–15 s`).
pub(crate) fn fmt_span_s(from: f64, to: f64) -> String {
    let (a, b) = (sig3(from), sig3(to));
    if a != b || to <= from {
        return format!("{a}–{b} s");
    }
    let d = (1..=6)
        .find(|&d| format!("{from:.d$}") != format!("{to:.d$}"))
        .unwrap_or(6);
    format!("{from:.d$}–{to:.d$} s")
}

/// At most `max` of `items`, then how many more: `1, 2, 3 and 40 more`; a warning that names
/// what it is about stays a line or two however many there are.
pub(crate) fn fmt_some(items: &[String], max: usize) -> String {
    if items.len() <= max {
        return items.join(", ");
    }
    format!("{} and {} more", items[..max].join(", "), items.len() - max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_never_read_as_empty() {
        assert_eq!(fmt_span_s(0.0, 1.0), "0–1 s");
        assert_eq!(fmt_span_s(15.0, 15.3), "15–15.3 s");
        assert_eq!(fmt_span_s(1500.0, 1500.4), "1500.0–1500.4 s");
        assert_eq!(fmt_span_s(15.0, 15.004), "15.000–15.004 s");
    }

    #[test]
    fn fmt_some_names_a_few_and_counts_the_rest() {
        let v: Vec<String> = (1..=50).map(|i| i.to_string()).collect();
        assert_eq!(fmt_some(&v[..3], 5), "1, 2, 3");
        assert_eq!(fmt_some(&v, 3), "1, 2, 3 and 47 more");
    }

    #[test]
    fn ranks_as_runs() {
        assert_eq!(fmt_ranks(&[9, 0, 1, 2, 7, 10, 11, 2]), "0–2, 7, 9–11");
        assert_eq!(fmt_ranks(&[5]), "5");
        assert_eq!(fmt_ranks(&[]), "");
        assert_eq!(fmt_ranks(&[3, 4]), "3–4");
    }
    #[test]
    fn formats() {
        assert_eq!(fmt_ns(850.0), "850 ns");
        assert_eq!(fmt_ns(-381_146.0), "-381 µs");
        assert_eq!(fmt_ns(90_100.0), "90.1 µs");
        assert_eq!(fmt_ns(4_100_000.0), "4.1 ms");
        // Rounding up to the next unit says so: never "1000 ns" or "1000 µs".
        assert_eq!(fmt_ns(999.7), "1 µs");
        assert_eq!(fmt_ns(999_800.0), "1 ms");
        assert_eq!(fmt_ns(999_900_000.0), "1 s");
        assert_eq!(fmt_bytes(8192), "8 KiB");
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_rate(1_050_000.0), "1.05M");
    }

    #[test]
    fn parses() {
        assert_eq!(parse_size("8k"), Ok(8192));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert!(parse_size("eight").unwrap_err().contains("not a size"));
        assert_eq!(parse_duration("500ms"), Ok(0.5));
        assert_eq!(parse_duration("2"), Ok(2.0));
        assert!(parse_duration("-1").is_err());
        assert_eq!(parse_latency("5ms"), Ok(0.005));
        assert_eq!(parse_latency("0"), Ok(0.0));
        let e = parse_latency("5").unwrap_err();
        assert!(e.contains("no unit") && e.contains("5ms"), "{e}");
        assert!(parse_latency("2.5").unwrap_err().contains("2.5ms"));
        assert!(parse_latency("soon")
            .unwrap_err()
            .contains("not a duration"));
        assert!(parse_duration("soon")
            .unwrap_err()
            .contains("not a duration"));
    }
}
