//! Latency modes (tiers): how many distinct latency populations a histogram holds — RAM or page
//! cache, flash, disk — with the centre, spread and share of each.
//!
//! # Method
//! Everything happens on a natural-log latency axis, where storage tiers look like roughly
//! symmetric bumps and a factor of 2 is the same distance at 2 µs as at 4 ms.
//!
//! 1. **Binned kernel density.** Each recorded HdrHistogram value (its bucket's median
//!    equivalent, with its count) is spread linearly onto a grid of step `h / 10`, then
//!    convolved with a Gaussian kernel of bandwidth `h`.
//! 2. **Bandwidth** `h` (in ln units) is Silverman's robust rule
//!    `0.9 · min(sd, IQR / 1.349) · n_eff^(-1/5)` with `n_eff = min(n, 2000)`, clamped to
//!    [[`H_MIN`], [`H_MAX`]] (factors ×1.09 .. ×1.28: no finer than half the report's
//!    quarter-octave bars). Capping `n` sets the finest feature of
//!    interest: tiers are populations several tens of percent apart, not ripples that millions
//!    of samples make statistically real. The upper clamp keeps two distant tiers (which inflate
//!    the overall sd) from smearing a third, closer pair together. Finally `h` is at least
//!    [`RESOLUTION_FACTOR`] (½) × the data's resolution — the count-weighted median gap between
//!    adjacent recorded values — so that sources with coarse buckets (Oracle and bcc histograms
//!    have power-of-two buckets, gap ln 2) are not read as one mode per bucket; this floor is
//!    capped at [`RESOLUTION_H_MAX`] (0.5). For exact latencies the gap is far below `H_MIN`
//!    and changes nothing.
//! 3. **Peaks and valleys.** Every local maximum of the density is a candidate. Adjacent
//!    candidates are repeatedly merged (the least prominent first) until every remaining pair
//!    is separated by a valley that is both *deep* — valley density at most [`MAX_VALLEY_RATIO`]
//!    (80 %) of the lower peak, which for two equal Gaussians means ≥ ~2.7 sd apart — and
//!    *significant* — in windows of ±h the expected counts at peak and valley differ by more than
//!    [`Z_SIGNIFICANCE`] (3) Poisson standard deviations, so sampling noise in a sparse tail
//!    never becomes a mode. A unimodal distribution, however skewed or long-tailed, has no
//!    such valley and stays one mode.
//! 4. **Mass by cut-points.** Values are assigned to the segment between consecutive valleys.
//!    A segment holding less than [`MIN_SHARE`] (1 %) of all values is not a mode: it is an
//!    outlier cluster and is left out of the result, so shares then add up to less than 1 and
//!    [`describe`] reports the remainder as "outside the modes".
//!
//! A mode's centre is the peak of the density (the most frequent latency of the tier, refined
//! by parabolic interpolation), its spread the geometric standard deviation factor
//! `exp((q84 − q16) / 2)` of the values in its segment (robust to the tail it also contains),
//! and low/high the segment's bounds (valleys inside, the extreme recorded values outside).

use hdrhistogram::Histogram;

pub use crate::results::analysis::{Mode, Valley};
use crate::units::fmt_ns;

/// Smallest kernel bandwidth, ln units: an eighth of an octave (a factor of ×1.09), half the
/// width of a bar in the report's histogram. Finer "modes" (two bumps 30 % apart in a
/// random-read histogram with hundreds of thousands of values) are statistically real ripples,
/// not tiers a reader can see or act on.
pub const H_MIN: f64 = std::f64::consts::LN_2 / 8.0;
/// Largest kernel bandwidth, ln units (a factor of ×1.28).
pub const H_MAX: f64 = 0.25;
/// The bandwidth is at least this multiple of the data's resolution (see the module docs).
pub const RESOLUTION_FACTOR: f64 = 0.5;
/// ... but the resolution never widens the bandwidth beyond this (ln units, a factor of ×1.65):
/// with very few distinct values the "gap" is the distance between samples, not a bucket size.
pub const RESOLUTION_H_MAX: f64 = 0.5;
/// Sample size beyond which the bandwidth stops shrinking.
pub const N_EFF_CAP: f64 = 2000.0;
/// A valley separates two modes only if its density is at most this share of the lower peak.
pub const MAX_VALLEY_RATIO: f64 = 0.8;
/// Peak-minus-valley counts must exceed this many Poisson standard deviations.
pub const Z_SIGNIFICANCE: f64 = 3.0;
/// Segments with a smaller share of all values are outliers, not modes.
pub const MIN_SHARE: f64 = 0.01;

/// Weighted points on the ln axis, sorted: (ln ns, count, lowest ns, highest ns).
struct Points {
    x: Vec<f64>,
    w: Vec<f64>,
    lo: Vec<u64>,
    hi: Vec<u64>,
    n: f64,
}

fn points(h: &Histogram<u64>) -> Points {
    let mut p = Points {
        x: Vec::new(),
        w: Vec::new(),
        lo: Vec::new(),
        hi: Vec::new(),
        n: 0.0,
    };
    for it in h.iter_recorded() {
        let v = it.value_iterated_to();
        let c = it.count_at_value();
        if c == 0 {
            continue;
        }
        let mid = h.median_equivalent(v).max(1);
        p.x.push((mid as f64).ln());
        p.w.push(c as f64);
        p.lo.push(h.lowest_equivalent(v).max(1));
        p.hi.push(h.highest_equivalent(v));
        p.n += c as f64;
    }
    p
}

/// Weighted quantile of sorted `x` with weights `w` (q in 0..1).
fn wquantile(x: &[f64], w: &[f64], total: f64, q: f64) -> f64 {
    let target = q * total;
    let mut acc = 0.0;
    for (xi, wi) in x.iter().zip(w) {
        acc += wi;
        if acc >= target {
            return *xi;
        }
    }
    *x.last().unwrap_or(&0.0)
}

/// Kernel bandwidth (ln units) for these points, see the module docs.
fn bandwidth(p: &Points) -> f64 {
    let mean = p.x.iter().zip(&p.w).map(|(x, w)| x * w).sum::<f64>() / p.n;
    let var =
        p.x.iter()
            .zip(&p.w)
            .map(|(x, w)| w * (x - mean).powi(2))
            .sum::<f64>()
            / p.n;
    let iqr = wquantile(&p.x, &p.w, p.n, 0.75) - wquantile(&p.x, &p.w, p.n, 0.25);
    let mut scale = var.sqrt();
    if iqr > 0.0 {
        scale = scale.min(iqr / 1.349);
    }
    let h = 0.9 * scale * p.n.min(N_EFF_CAP).powf(-0.2);
    let h = if h.is_finite() {
        h.clamp(H_MIN, H_MAX)
    } else {
        H_MIN
    };
    h.max((RESOLUTION_FACTOR * resolution(p)).min(RESOLUTION_H_MAX))
}

/// The data's own resolution: the count-weighted median gap between adjacent recorded values
/// (ln units). Tiny for exact latencies; ln 2 for power-of-two bucketed sources.
fn resolution(p: &Points) -> f64 {
    let mut gaps: Vec<(f64, f64)> =
        p.x.windows(2)
            .zip(p.w.windows(2))
            .map(|(x, w)| (x[1] - x[0], w[0] + w[1]))
            .collect();
    if gaps.is_empty() {
        return 0.0;
    }
    gaps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = gaps.iter().map(|g| g.1).sum();
    let mut acc = 0.0;
    for (g, w) in &gaps {
        acc += w;
        if acc >= total / 2.0 {
            return *g;
        }
    }
    gaps[gaps.len() - 1].0
}

/// A density on a regular ln grid: f[j] at x0 + j·dx, normalised to integrate to 1.
struct Density {
    x0: f64,
    dx: f64,
    f: Vec<f64>,
}

impl Density {
    fn x(&self, j: usize) -> f64 {
        self.x0 + j as f64 * self.dx
    }
}

fn kde(p: &Points, h: f64) -> Density {
    let dx = h / 10.0;
    let xmin = p.x[0] - 4.0 * h;
    let xmax = p.x[p.x.len() - 1] + 4.0 * h;
    let len = ((xmax - xmin) / dx).ceil() as usize + 2;
    // Linear binning.
    let mut bins = vec![0.0; len];
    for (x, w) in p.x.iter().zip(&p.w) {
        let t = (x - xmin) / dx;
        let j = t.floor() as usize;
        let frac = t - j as f64;
        bins[j] += w * (1.0 - frac);
        if j + 1 < len {
            bins[j + 1] += w * frac;
        }
    }
    // Gaussian kernel, truncated at 4 h.
    let half = 40usize;
    let norm = 1.0 / (p.n * h * (2.0 * std::f64::consts::PI).sqrt());
    let kernel: Vec<f64> = (0..=half)
        .map(|k| {
            let u = k as f64 * dx / h;
            (-0.5 * u * u).exp() * norm
        })
        .collect();
    let mut f = vec![0.0; len];
    for (j, &b) in bins.iter().enumerate() {
        if b == 0.0 {
            continue;
        }
        let lo = j.saturating_sub(half);
        let hi = (j + half).min(len - 1);
        for (i, fi) in f.iter_mut().enumerate().take(hi + 1).skip(lo) {
            *fi += b * kernel[i.abs_diff(j)];
        }
    }
    Density { x0: xmin, dx, f }
}

/// Index of the minimum of `f` strictly between `a` and `b`.
fn valley(f: &[f64], a: usize, b: usize) -> usize {
    let mut best = a + 1;
    for j in a + 1..b {
        if f[j] < f[best] {
            best = j;
        }
    }
    best
}

/// Are peaks `a` < `b` separated by a deep and significant valley? Returns (separated, prominence).
fn separated(d: &Density, n: f64, h: f64, a: usize, b: usize) -> (bool, f64) {
    let v = d.f[valley(&d.f, a, b)];
    let p = d.f[a].min(d.f[b]);
    // Expected counts in a window of ±h around peak and valley.
    let cp = p * n * 2.0 * h;
    let cv = v * n * 2.0 * h;
    let deep = v <= MAX_VALLEY_RATIO * p;
    let significant = cp - cv > Z_SIGNIFICANCE * (cp + cv).sqrt();
    (deep && significant, p - v)
}

/// Find the latency modes of a histogram (ns), sorted by centre. Empty for an empty histogram.
///
/// See the module documentation for the method and its thresholds.
pub fn find_modes(h: &Histogram<u64>) -> Vec<Mode> {
    let p = points(h);
    if p.x.is_empty() {
        return Vec::new();
    }
    let bw = bandwidth(&p);
    let d = kde(&p, bw);
    let f = &d.f;

    // Candidate peaks: local maxima (first index of a plateau).
    let mut peaks: Vec<usize> = Vec::new();
    let mut j = 1;
    while j + 1 < f.len() {
        if f[j] > f[j - 1] {
            let mut k = j;
            while k + 1 < f.len() && f[k + 1] == f[j] {
                k += 1;
            }
            if k + 1 < f.len() && f[k + 1] < f[j] {
                peaks.push((j + k) / 2);
            }
            j = k + 1;
        } else {
            j += 1;
        }
    }
    if peaks.is_empty() {
        // A single point mass exactly at the grid edge cannot happen (grid is padded), but be safe.
        let top = (0..f.len())
            .max_by(|&a, &b| f[a].total_cmp(&f[b]))
            .unwrap_or(0);
        peaks.push(top);
    }

    // Merge the least prominent unseparated pair until all pairs are separated.
    merge_unseparated(
        &mut peaks,
        |i| f[i],
        |a, b| match separated(&d, p.n, bw, a, b) {
            (true, _) => None,
            (false, prom) => Some(prom),
        },
    );

    // Cut-points at the valleys between surviving peaks.
    let cuts: Vec<f64> = peaks
        .windows(2)
        .map(|w| d.x(valley(f, w[0], w[1])))
        .collect();

    // Assign values to segments.
    let nseg = peaks.len();
    let mut seg_idx: Vec<Vec<usize>> = vec![Vec::new(); nseg];
    for (i, x) in p.x.iter().enumerate() {
        let s = cuts.iter().take_while(|&&c| *x >= c).count();
        seg_idx[s].push(i);
    }

    let mut modes = Vec::new();
    for (s, idx) in seg_idx.iter().enumerate() {
        if idx.is_empty() {
            continue;
        }
        let xs: Vec<f64> = idx.iter().map(|&i| p.x[i]).collect();
        let ws: Vec<f64> = idx.iter().map(|&i| p.w[i]).collect();
        let count: f64 = ws.iter().sum();
        let share = count / p.n;
        if share < MIN_SHARE {
            continue;
        }
        let q16 = wquantile(&xs, &ws, count, 0.1587);
        let q84 = wquantile(&xs, &ws, count, 0.8413);
        let low_ns = if s == 0 {
            p.lo[idx[0]] as f64
        } else {
            cuts[s - 1].exp()
        };
        let high_ns = if s + 1 == nseg {
            p.hi[*idx.last().unwrap()] as f64
        } else {
            cuts[s].exp()
        };
        let valley_below = (s > 0).then(|| {
            let j = valley(f, peaks[s - 1], peaks[s]);
            Valley {
                at_ns: d.x(j).exp(),
                ratio: f[j] / f[peaks[s - 1]].min(f[peaks[s]]),
            }
        });
        modes.push(Mode {
            centre_ns: peak_location(&d, peaks[s]).exp(),
            low_ns,
            high_ns,
            spread: ((q84 - q16) / 2.0).exp(),
            share,
            count: count.round() as u64,
            valley_below,
        });
    }
    modes
}

/// Find the latency modes of a histogram whose values were spread over the source's own
/// buckets (`edges`, ns, ascending: `OpResult::bucket_edges_ns`). Without edges this is
/// [`find_modes`].
///
/// Coarse buckets (power-of-two: one per octave) are the density's own resolution, so no
/// kernel smooths them again: the density of a bucket is its count per ln-width (gaps in the
/// edges are filled by doubling, empty buckets count 0), and two peaks are separate modes only
/// when the lowest bucket between them is deep (at most [`MAX_VALLEY_RATIO`] of the lower peak)
/// and significant (counts differ by more than [`Z_SIGNIFICANCE`] Poisson standard deviations).
/// Values in the valley bucket are split evenly between the two modes.
pub fn find_modes_with_edges(h: &Histogram<u64>, edges: &[u64]) -> Vec<Mode> {
    if edges.len() < 2 {
        return find_modes(h);
    }
    let e = fill_gaps(edges);
    let nb = e.len() - 1;
    let mut c = vec![0f64; nb];
    let mut n = 0f64;
    for it in h.iter_recorded() {
        let v = h.median_equivalent(it.value_iterated_to()) as f64;
        let i = e
            .partition_point(|&x| x as f64 <= v)
            .saturating_sub(1)
            .min(nb - 1);
        c[i] += it.count_at_value() as f64;
        n += it.count_at_value() as f64;
    }
    if n == 0.0 {
        return Vec::new();
    }
    let ln2 = std::f64::consts::LN_2;
    let width = |i: usize| {
        if e[i] == 0 {
            ln2
        } else {
            (e[i + 1] as f64 / e[i] as f64).ln().max(1e-9)
        }
    };
    // Counts per octave, so buckets of different widths compare.
    let d: Vec<f64> = (0..nb).map(|i| c[i] / width(i) * ln2).collect();
    let mid = |i: usize| {
        if e[i] == 0 {
            e[i + 1] as f64 / 2.0
        } else {
            (e[i] as f64 * e[i + 1] as f64).sqrt()
        }
    };
    // Peaks: local maxima (plateaus count once, at their middle), the ends padded with 0.
    let at = |i: isize| {
        if i < 0 || i as usize >= nb {
            0.0
        } else {
            d[i as usize]
        }
    };
    let mut peaks = Vec::new();
    let mut i = 0isize;
    while (i as usize) < nb {
        let mut k = i;
        while ((k + 1) as usize) < nb && d[(k + 1) as usize] == d[i as usize] {
            k += 1;
        }
        if d[i as usize] > 0.0 && at(i - 1) < d[i as usize] && at(k + 1) < d[i as usize] {
            peaks.push(((i + k) / 2) as usize);
        }
        i = k + 1;
    }
    let lowest = |a: usize, b: usize| (a + 1..b).min_by(|&x, &y| d[x].total_cmp(&d[y]));
    merge_unseparated(
        &mut peaks,
        |i| d[i],
        |a, b| {
            let p = d[a].min(d[b]);
            let v = lowest(a, b).map_or(p, |j| d[j]);
            let sep = v <= MAX_VALLEY_RATIO * p && p - v > Z_SIGNIFICANCE * (p + v).sqrt();
            (!sep).then_some(p - v)
        },
    );
    let valleys: Vec<usize> = peaks
        .windows(2)
        .map(|w| lowest(w[0], w[1]).unwrap_or(w[0]))
        .collect();
    let first = c.iter().position(|&x| x > 0.0).unwrap_or(0);
    let last = c.iter().rposition(|&x| x > 0.0).unwrap_or(nb - 1);
    let mut modes = Vec::new();
    for (s, &pk) in peaks.iter().enumerate() {
        let lo_b = if s == 0 { first } else { valleys[s - 1] };
        let hi_b = if s + 1 == peaks.len() {
            last
        } else {
            valleys[s]
        };
        // Bucket weights of the segment; shared valley buckets count half.
        let mut xs = Vec::new();
        let mut ws = Vec::new();
        for (b, &cb) in c.iter().enumerate().take(hi_b + 1).skip(lo_b) {
            let shared = (s > 0 && b == lo_b) || (s + 1 < peaks.len() && b == hi_b);
            let w = if shared { cb / 2.0 } else { cb };
            if w > 0.0 {
                xs.push(mid(b).ln());
                ws.push(w);
            }
        }
        let count: f64 = ws.iter().sum();
        let share = count / n;
        if share < MIN_SHARE || xs.is_empty() {
            continue;
        }
        let q16 = wquantile(&xs, &ws, count, 0.1587);
        let q84 = wquantile(&xs, &ws, count, 0.8413);
        let low_ns = if s == 0 { e[lo_b] as f64 } else { mid(lo_b) };
        let high_ns = if s + 1 == peaks.len() {
            e[hi_b + 1] as f64
        } else {
            mid(hi_b)
        };
        let valley_below = (s > 0).then(|| Valley {
            at_ns: mid(valleys[s - 1]),
            ratio: d[valleys[s - 1]] / d[peaks[s - 1]].min(d[pk]),
        });
        modes.push(Mode {
            centre_ns: mid(pk),
            low_ns,
            high_ns,
            spread: ((q84 - q16) / 2.0).exp(),
            share,
            count: count.round() as u64,
            valley_below,
        });
    }
    modes
}

/// Source bucket edges with gaps (empty power-of-two buckets a source did not print) filled
/// by doubling.
pub(crate) fn fill_gaps(edges: &[u64]) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::with_capacity(edges.len());
    for &x in edges {
        if let Some(&last) = out.last() {
            let mut e = last;
            while e > 0 && e.saturating_mul(2) < x && x as f64 > e as f64 * 2.0001 {
                e *= 2;
                out.push(e);
            }
        }
        out.push(x);
    }
    out
}

/// Peak position refined by a parabola through the three grid points around it.
fn peak_location(d: &Density, j: usize) -> f64 {
    if j == 0 || j + 1 >= d.f.len() {
        return d.x(j);
    }
    let (a, b, c) = (d.f[j - 1], d.f[j], d.f[j + 1]);
    let denom = a - 2.0 * b + c;
    let off = if denom < 0.0 {
        (0.5 * (a - c) / denom).clamp(-0.5, 0.5)
    } else {
        0.0
    };
    d.x(j) + off * d.dx
}

/// Latency below which no device answered: the fastest storage-class memory behind NVMe
/// (Optane-class, ~10 µs for a 4 KiB read at the device) is slower, and a virtualised device
/// adds a VM exit; only RAM on this host's side of the interface answers faster.
pub const RAM_MAX_NS: f64 = 5_000.0;
/// Upper bound of the tier between RAM and flash: a cache behind the device interface (a
/// hypervisor's host page cache, an array's cache) or storage-class memory. NAND flash reads
/// take ~50–100 µs at the device.
pub const NEAR_RAM_MAX_NS: f64 = 40_000.0;
/// Upper bound of flash (an array's cache over a network falls here too, 0.1–0.5 ms).
pub const FLASH_MAX_NS: f64 = 1_500_000.0;

/// The storage tier a latency mode's centre points to, with its evidence: RAM (a cache on this
/// host's side, below [`RAM_MAX_NS`]), a cache behind the device interface or storage-class
/// memory (to [`NEAR_RAM_MAX_NS`]), flash (to [`FLASH_MAX_NS`]), else disk or a queue.
pub fn tier(centre_ns: f64) -> (&'static str, String) {
    if centre_ns < RAM_MAX_NS {
        (
            "RAM cache",
            format!(
                "below {}, faster than any device answers",
                fmt_ns(RAM_MAX_NS)
            ),
        )
    } else if centre_ns < NEAR_RAM_MAX_NS {
        (
            "cache behind the device (hypervisor or array) or storage-class memory",
            format!(
                "{}–{}, faster than NAND flash reads",
                fmt_ns(RAM_MAX_NS),
                fmt_ns(NEAR_RAM_MAX_NS)
            ),
        )
    } else if centre_ns < FLASH_MAX_NS {
        (
            "flash (or an array cache over the network)",
            format!("{}–{}", fmt_ns(NEAR_RAM_MAX_NS), fmt_ns(FLASH_MAX_NS)),
        )
    } else {
        (
            "disk (rotating) or a queue",
            format!("above {}, slower than flash", fmt_ns(FLASH_MAX_NS)),
        )
    }
}

/// The modes named as storage tiers with their evidence, e.g. `RAM cache: 38 % around 1.9 µs
/// (below 5.00 µs, faster than any device answers); flash (…): 62 % around 90 µs (40 µs–1.5 ms)`.
pub fn tiers(modes: &[Mode]) -> String {
    modes
        .iter()
        .map(|m| {
            let (name, why) = tier(m.centre_ns);
            format!(
                "{name}: {} % around {} ({why})",
                fmt_pct(m.share),
                fmt_ns(m.centre_ns)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// One line describing the modes, e.g. `2 modes: 38 % around 90 µs, 62 % around 4.1 ms`.
pub fn describe(modes: &[Mode]) -> String {
    if modes.is_empty() {
        return "no latency values".to_string();
    }
    let parts: Vec<String> = modes
        .iter()
        .map(|m| format!("{} % around {}", fmt_pct(m.share), fmt_ns(m.centre_ns)))
        .collect();
    let mut s = format!(
        "{} mode{}: {}",
        modes.len(),
        if modes.len() == 1 { "" } else { "s" },
        parts.join(", ")
    );
    let rest = 1.0 - modes.iter().map(|m| m.share).sum::<f64>();
    if rest >= 0.0005 {
        s.push_str(&format!("; {} % outside the modes", fmt_pct(rest)));
    }
    // What was compared, so a reader can check it.
    let valleys: Vec<String> = modes
        .iter()
        .filter_map(|m| m.valley_below)
        .map(|v| {
            format!(
                "{} ({} % of the lower peak)",
                fmt_ns(v.at_ns),
                fmt_pct(v.ratio)
            )
        })
        .collect();
    if valleys.is_empty() && rest >= 0.0005 {
        s.push_str(&format!(
            " (outside the modes: clusters under {} % of all values)",
            fmt_pct(MIN_SHARE)
        ));
    } else if valleys.is_empty() {
        s.push_str(&format!(
            " (no valley between peaks as low as {} % of the lower peak)",
            fmt_pct(MAX_VALLEY_RATIO)
        ));
    } else {
        s.push_str(&format!(
            " (density valley at {}; modes need a valley ≤ {} % of the lower peak)",
            valleys.join(", "),
            fmt_pct(MAX_VALLEY_RATIO)
        ));
    }
    s
}

/// Percentage of a share: whole numbers from 1 %, one decimal below.
fn fmt_pct(share: f64) -> String {
    let p = share * 100.0;
    if p >= 0.995 {
        format!("{:.0}", p)
    } else {
        format!("{:.1}", p)
    }
}

/// Merge neighbouring peaks that are not separated by a real valley, least prominent pair first,
/// until every pair is separated: `unseparated(a, b)` gives the pair's prominence when its
/// valley is not real; the lower peak of the pair (by `height`) is dropped.
fn merge_unseparated(
    peaks: &mut Vec<usize>,
    height: impl Fn(usize) -> f64,
    unseparated: impl Fn(usize, usize) -> Option<f64>,
) {
    loop {
        let worst = (0..peaks.len().saturating_sub(1))
            .filter_map(|i| unseparated(peaks[i], peaks[i + 1]).map(|prom| (i, prom)))
            .min_by(|x, y| x.1.total_cmp(&y.1));
        let Some((i, _)) = worst else { break };
        let drop = if height(peaks[i]) < height(peaks[i + 1]) {
            i
        } else {
            i + 1
        };
        peaks.remove(drop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::{new_histogram, record_ns};
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use rand_distr::{Distribution, LogNormal};

    /// Mixture of log-normals: (median ns, geometric sd factor, share).
    fn mixture(parts: &[(f64, f64, f64)], n: usize, seed: u64) -> Histogram<u64> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut h = new_histogram();
        for &(median, spread, share) in parts {
            let d = LogNormal::new(median.ln(), spread.ln()).unwrap();
            for _ in 0..(n as f64 * share).round() as usize {
                record_ns(&mut h, d.sample(&mut rng).round() as u64);
            }
        }
        h
    }

    fn assert_modes(modes: &[Mode], want: &[(f64, f64)]) {
        assert_eq!(
            modes.len(),
            want.len(),
            "modes: {} ({modes:?})",
            describe(modes)
        );
        for (m, &(centre, share)) in modes.iter().zip(want) {
            let rel = (m.centre_ns / centre - 1.0).abs();
            assert!(rel < 0.15, "centre {} vs {centre}: {modes:?}", m.centre_ns);
            assert!(
                (m.share - share).abs() < 0.03,
                "share {} vs {share}: {modes:?}",
                m.share
            );
        }
    }

    #[test]
    fn single_lognormal_is_one_mode() {
        for (spread, seed) in [(1.3, 1), (1.6, 2), (2.5, 3)] {
            let h = mixture(&[(200_000.0, spread, 1.0)], 50_000, seed);
            let m = find_modes(&h);
            assert_modes(&m, &[(200_000.0, 1.0)]);
            assert!((m[0].spread / spread - 1.0).abs() < 0.1, "{m:?}");
        }
    }

    #[test]
    fn small_sample_single_mode_not_split() {
        for seed in 0..20 {
            let h = mixture(&[(90_000.0, 1.4, 1.0)], 150, seed);
            let m = find_modes(&h);
            assert_eq!(m.len(), 1, "seed {seed}: {}", describe(&m));
        }
    }

    #[test]
    fn long_right_tail_is_not_split() {
        use rand::Rng;
        use rand_distr::Exp;
        let mut rng = SmallRng::seed_from_u64(7);
        let body = LogNormal::new(100_000f64.ln(), 1.25f64.ln()).unwrap();
        // Right-skewed in log space (body × e^Exp), 5 % with a Pareto factor on top: p99 ≈ 6×
        // the median, p99.9 ≈ 40×, and no second population.
        let skew: Exp<f64> = Exp::new(1.0 / 0.3).unwrap();
        let mut h = new_histogram();
        for _ in 0..100_000 {
            let mut v = body.sample(&mut rng) * skew.sample(&mut rng).exp();
            if rng.gen_bool(0.05) {
                v *= (1.0 - rng.gen_range(0.0f64..0.999)).powf(-1.0 / 1.2);
            }
            record_ns(&mut h, v as u64);
        }
        assert!(h.value_at_quantile(0.99) > 5 * h.value_at_quantile(0.5));
        let m = find_modes(&h);
        assert_eq!(m.len(), 1, "{}", describe(&m));
        // Queueing on top of a device time (linear-space ex-Gaussian).
        let wait = Exp::new(1.0 / 40_000.0).unwrap();
        let dev = LogNormal::new(80_000f64.ln(), 1.1f64.ln()).unwrap();
        let mut h = new_histogram();
        for _ in 0..100_000 {
            let v = dev.sample(&mut rng) + wait.sample(&mut rng);
            record_ns(&mut h, v as u64);
        }
        let m = find_modes(&h);
        assert_eq!(m.len(), 1, "{}", describe(&m));
    }

    #[test]
    fn two_modes_90us_4ms() {
        let h = mixture(
            &[(90_000.0, 1.3, 0.38), (4_000_000.0, 1.3, 0.62)],
            20_000,
            11,
        );
        let m = find_modes(&h);
        assert_modes(&m, &[(90_000.0, 0.38), (4_000_000.0, 0.62)]);
        assert!(m[0].high_ns <= m[1].low_ns);
        let d = describe(&m);
        assert!(
            d.starts_with(&format!(
                "2 modes: 38 % around {}, 62 % around {} (density valley at ",
                fmt_ns(m[0].centre_ns),
                fmt_ns(m[1].centre_ns)
            )),
            "{d}"
        );
        let v = m[1].valley_below.unwrap();
        assert!(
            v.at_ns > 90_000.0 && v.at_ns < 4_000_000.0 && v.ratio < 0.1,
            "{v:?}"
        );
    }

    /// Values spread over power-of-two buckets `[2^k, 2^(k+1))` µs as ingest does, with the
    /// bucket edges an ingested op keeps.
    fn bucketed(parts: &[(f64, f64, f64)], n: usize, seed: u64) -> (Histogram<u64>, Vec<u64>) {
        let exact = mixture(parts, n, seed);
        let mut h = new_histogram();
        let mut edges = std::collections::BTreeSet::new();
        for it in exact.iter_recorded() {
            let us = exact.median_equivalent(it.value_iterated_to()) / 1000;
            let v = if us == 0 { 0 } else { 1u64 << us.ilog2() };
            crate::sources::spread_bucket(
                &mut h,
                v,
                crate::results::BucketConvention::LowerBound,
                1000.0,
                it.count_at_value(),
            );
            let (lo, hi) =
                crate::sources::bucket_range(v, crate::results::BucketConvention::LowerBound);
            edges.insert(lo * 1000);
            edges.insert(hi * 1000);
        }
        (h, edges.into_iter().collect())
    }

    #[test]
    fn bucketed_single_lognormal_is_one_mode() {
        // However wide, a lognormal spread over octave buckets has no valley.
        for (seed, spread) in [(1, 1.3), (2, 1.8), (3, 2.5), (4, 4.0)] {
            for n in [200, 5_000, 500_000] {
                let (h, e) = bucketed(&[(300_000.0, spread, 1.0)], n, seed);
                let m = find_modes_with_edges(&h, &e);
                assert_eq!(m.len(), 1, "spread {spread}, n {n}: {}", describe(&m));
                assert!(m[0].valley_below.is_none());
            }
        }
    }

    #[test]
    fn bucketed_mixtures_with_known_answers() {
        // Page cache (3 µs) and device (400 µs): far apart, any weights from 10 % up.
        for (w, seed) in [(0.5, 11), (0.2, 12), (0.1, 13)] {
            let (h, e) = bucketed(
                &[(3_000.0, 1.3, w), (400_000.0, 1.4, 1.0 - w)],
                20_000,
                seed,
            );
            let m = find_modes_with_edges(&h, &e);
            assert_eq!(m.len(), 2, "w {w}: {}", describe(&m));
            assert!((m[0].share - w).abs() < 0.02, "w {w}: {}", describe(&m));
            assert!(m[0].centre_ns > 2_000.0 && m[0].centre_ns < 8_000.0);
            assert!(m[1].centre_ns > 256_000.0 && m[1].centre_ns < 1_024_000.0);
            assert!(m[1].valley_below.unwrap().ratio <= MAX_VALLEY_RATIO);
        }
        // A factor of 2 apart is within one octave bucket's resolution: one mode.
        let (h, e) = bucketed(&[(100_000.0, 1.2, 0.5), (200_000.0, 1.2, 0.5)], 20_000, 14);
        assert_eq!(find_modes_with_edges(&h, &e).len(), 1);
        // Too few values for the valley to be real: one mode.
        let (h, e) = bucketed(&[(3_000.0, 1.3, 0.5), (400_000.0, 1.4, 0.5)], 8, 15);
        let m = find_modes_with_edges(&h, &e);
        assert_eq!(m.len(), 1, "{}", describe(&m));
    }

    #[test]
    fn ripples_finer_than_a_quarter_octave_are_not_modes() {
        // A 1-session random-read histogram on the development VM: two bumps at 51 and 69 µs,
        // 300k values. Drawn at a quarter octave per bar it is one mode, and so is it reported.
        let h = mixture(
            &[(51_000.0, 1.07, 0.46), (69_000.0, 1.07, 0.54)],
            300_000,
            41,
        );
        let m = find_modes(&h);
        assert_eq!(m.len(), 1, "{}", describe(&m));
    }

    #[test]
    fn large_exact_single_lognormals_are_one_mode() {
        for (seed, spread) in [(31, 1.3), (32, 2.0), (33, 3.0)] {
            let h = mixture(&[(150_000.0, spread, 1.0)], 1_000_000, seed);
            let m = find_modes(&h);
            assert_eq!(m.len(), 1, "spread {spread}: {}", describe(&m));
        }
    }

    #[test]
    fn page_cache_and_device_5_95_and_50_50() {
        let h = mixture(&[(2_000.0, 1.2, 0.05), (150_000.0, 1.4, 0.95)], 40_000, 21);
        assert_modes(&find_modes(&h), &[(2_000.0, 0.05), (150_000.0, 0.95)]);
        let h = mixture(&[(2_000.0, 1.2, 0.95), (150_000.0, 1.4, 0.05)], 40_000, 22);
        assert_modes(&find_modes(&h), &[(2_000.0, 0.95), (150_000.0, 0.05)]);
        let h = mixture(&[(2_000.0, 1.2, 0.5), (150_000.0, 1.4, 0.5)], 40_000, 23);
        assert_modes(&find_modes(&h), &[(2_000.0, 0.5), (150_000.0, 0.5)]);
    }

    #[test]
    fn close_modes_factor_4_are_separated() {
        let h = mixture(
            &[(100_000.0, 1.25, 0.5), (400_000.0, 1.25, 0.5)],
            20_000,
            31,
        );
        assert_modes(&find_modes(&h), &[(100_000.0, 0.5), (400_000.0, 0.5)]);
    }

    /// Issue 24 item 3: modes are named as tiers with their evidence.
    #[test]
    fn modes_are_named_as_tiers() {
        assert_eq!(tier(1_800.0).0, "RAM cache");
        assert!(tier(20_000.0).0.starts_with("cache behind the device"));
        assert!(tier(90_000.0).0.starts_with("flash"));
        assert!(tier(6_000_000.0).0.starts_with("disk"));
        let h = mixture(&[(2_000.0, 1.2, 0.4), (4_000_000.0, 1.3, 0.6)], 20_000, 3);
        let t = tiers(&find_modes(&h));
        assert!(t.starts_with("RAM cache: 40 % around"), "{t}");
        assert!(
            t.contains("; disk (rotating) or a queue: 60 % around"),
            "{t}"
        );
    }

    #[test]
    fn three_tiers() {
        let h = mixture(
            &[
                (1_500.0, 1.2, 0.30),
                (120_000.0, 1.3, 0.55),
                (6_000_000.0, 1.5, 0.15),
            ],
            30_000,
            41,
        );
        assert_modes(
            &find_modes(&h),
            &[(1_500.0, 0.30), (120_000.0, 0.55), (6_000_000.0, 0.15)],
        );
    }

    #[test]
    fn tiny_outlier_cluster_is_not_a_mode() {
        // 0.5 % of I/Os stall around 50 ms: reported outside the modes, not as a mode.
        let h = mixture(
            &[(100_000.0, 1.3, 0.995), (50_000_000.0, 1.2, 0.005)],
            40_000,
            51,
        );
        let m = find_modes(&h);
        assert_modes(&m, &[(100_000.0, 0.995)]);
        let d = describe(&m);
        assert!(
            d.ends_with(
                "; 0.5 % outside the modes (outside the modes: clusters under 1 % of all values)"
            ),
            "{d}"
        );
    }

    /// Re-bucket a histogram into power-of-two buckets labelled by their upper bound (Oracle).
    fn pow2(h: &Histogram<u64>) -> Histogram<u64> {
        let mut out = new_histogram();
        for it in h.iter_recorded() {
            let v = it.value_iterated_to().max(1);
            out.record_n(v.next_power_of_two(), it.count_at_value())
                .unwrap();
        }
        out
    }

    #[test]
    fn power_of_two_buckets_are_not_one_mode_each() {
        for (spread, seed) in [(1.5, 61), (2.0, 62), (3.0, 63)] {
            let h = pow2(&mixture(&[(300_000.0, spread, 1.0)], 50_000, seed));
            assert!(h.iter_recorded().count() >= 3);
            let m = find_modes(&h);
            assert_eq!(m.len(), 1, "spread {spread}: {}", describe(&m));
        }
        let h = pow2(&mixture(
            &[(2_000.0, 1.3, 0.4), (4_000_000.0, 1.5, 0.6)],
            50_000,
            64,
        ));
        let m = find_modes(&h);
        assert_eq!(m.len(), 2, "{}", describe(&m));
        // Centres are only known to within a bucket (a factor of 2).
        assert!(
            m[0].centre_ns > 1_000.0 && m[0].centre_ns < 4_000.0,
            "{m:?}"
        );
        assert!(m[1].centre_ns > 2e6 && m[1].centre_ns < 8e6, "{m:?}");
        assert!((m[0].share - 0.4).abs() < 0.03 && (m[1].share - 0.6).abs() < 0.03);
    }

    #[test]
    fn empty_and_constant() {
        assert!(find_modes(&new_histogram()).is_empty());
        assert_eq!(describe(&[]), "no latency values");
        let mut h = new_histogram();
        for _ in 0..100 {
            record_ns(&mut h, 5_000);
        }
        let m = find_modes(&h);
        assert_eq!(m.len(), 1);
        assert!((m[0].centre_ns / 5_000.0 - 1.0).abs() < 0.01, "{m:?}");
        assert_eq!(m[0].count, 100);
        assert_eq!(m[0].share, 1.0);
        assert_eq!(
            describe(&m),
            "1 mode: 100 % around 5 µs (no valley between peaks as low as 80 % of the lower peak)"
        );
        // One far outlier neither becomes a mode nor drags the centre.
        record_ns(&mut h, 10_000_000);
        let m = find_modes(&h);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!((m[0].centre_ns / 5_000.0 - 1.0).abs() < 0.05, "{m:?}");
        assert_eq!(m[0].count, 101);
        assert_eq!(m[0].high_ns, h.highest_equivalent(10_000_000) as f64);
        // Two exact values far apart are two modes (the resolution floor is capped).
        let mut h = new_histogram();
        h.record_n(2_000, 500).unwrap();
        h.record_n(4_000_000, 500).unwrap();
        assert_modes(&find_modes(&h), &[(2_000.0, 0.5), (4_000_000.0, 0.5)]);
    }
}
