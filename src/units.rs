//! Human formatting of latencies, sizes and rates, shared by every renderer.

/// Format nanoseconds with a unit chosen for 3 significant digits: `850 ns`, `90.1 µs`, `4.10 ms`, `1.20 s`.
/// A negative duration (a difference) keeps its sign: `-381 µs`, never `-381146 ns`.
pub fn fmt_ns(ns: f64) -> String {
    if ns < 0.0 {
        return format!("-{}", fmt_ns(-ns));
    }
    let (v, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    format!("{} {unit}", sig3(v))
}

/// Format bytes in binary units: `512 B`, `8 KiB`, `1.5 GiB`.
pub fn fmt_bytes(b: u64) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn formats() {
        assert_eq!(fmt_ns(850.0), "850 ns");
        assert_eq!(fmt_ns(-381_146.0), "-381 µs");
        assert_eq!(fmt_ns(90_100.0), "90.1 µs");
        assert_eq!(fmt_ns(4_100_000.0), "4.1 ms");
        assert_eq!(fmt_bytes(8192), "8 KiB");
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_rate(1_050_000.0), "1.05M");
    }
}
