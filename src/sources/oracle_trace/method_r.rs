//! The Method R response-time profile of one file or the sum of several (see the module
//! doc of [`super`]).

use super::*;

/// The Method R profile of one file (or the sum of several).
///
/// R is the traced span, from the first to the last `tim` (Σ of the files' spans for several
/// files); without any `tim` (very old traces) it falls back to Σ e of the outermost calls plus
/// the waits between calls. R = CPU + waits + unaccounted-for, where CPU is Σ c of the
/// outermost calls (a parent's c includes its children's), waits is Σ ela of every wait, and
/// unaccounted-for is what neither covers: time between calls and waits, time inside calls
/// that Oracle did not instrument, measurement granularity. A negative unaccounted-for time
/// reveals double-counted time (e.g. a first line whose wait began before the first `tim`).
pub(super) struct ProfileIn<'a> {
    pub(super) events: &'a [EventTotals],
    pub(super) calls: &'a BTreeMap<String, CallFigures>,
    pub(super) outermost_by_depth: &'a BTreeMap<u64, u64>,
    pub(super) recursive: u64,
    pub(super) errors: &'a BTreeMap<String, u64>,
    /// Σ (last tim − first tim) in µs, when any tim was seen.
    pub(super) span_us: Option<i64>,
}

pub(super) fn profile(p: ProfileIn) -> Profile {
    let ProfileIn {
        events,
        calls,
        outermost_by_depth,
        recursive,
        errors,
        span_us,
    } = p;
    let cpu: u64 = calls.values().map(|c| c.cpu_us).sum();
    let elapsed: u64 = calls.values().map(|c| c.elapsed_us).sum();
    let between: u64 = events.iter().map(|e| e.between_us).sum();
    let outside: u64 = events.iter().map(|e| e.outside_us).sum();
    let waits: u64 = events.iter().map(|e| e.ela_us).sum();
    let r: i64 = span_us.unwrap_or((elapsed + between) as i64);
    let unaccounted = r - cpu as i64 - waits as i64;
    let share = |x: f64| if r > 0 { x / r as f64 } else { 0.0 };
    let ncalls: u64 = calls.values().map(|c| c.count).sum();
    let mut rows = vec![ProfileRow {
        component: "CPU service (outermost calls)".into(),
        seconds: cpu as f64 / 1e6,
        share: share(cpu as f64),
        count: Some(ncalls),
        mean_us: Some(if ncalls == 0 {
            0.0
        } else {
            cpu as f64 / ncalls as f64
        }),
        ..Default::default()
    }];
    for e in events {
        rows.push(ProfileRow {
            component: e.name.clone(),
            seconds: e.ela_us as f64 / 1e6,
            share: share(e.ela_us as f64),
            count: Some(e.count),
            mean_us: Some(e.ela_us as f64 / e.count.max(1) as f64),
            max_us: Some(e.max_us as f64),
            between_calls_seconds: Some(e.between_us as f64 / 1e6),
            between_calls_count: Some(e.between_count),
            outside_calls_seconds: Some(e.outside_us as f64 / 1e6),
            outside_calls_count: Some(e.outside_count),
        });
    }
    rows.push(ProfileRow {
        component: "unaccounted-for".into(),
        seconds: unaccounted as f64 / 1e6,
        share: share(unaccounted as f64),
        ..Default::default()
    });
    rows.sort_by(|a, b| b.seconds.abs().total_cmp(&a.seconds.abs()));
    Profile {
        response_time_s: r as f64 / 1e6,
        response_time_basis: if span_us.is_some() {
            "span of tim"
        } else {
            "calls and between-call waits"
        }
        .into(),
        outermost_elapsed_s: elapsed as f64 / 1e6,
        between_calls_wait_s: between as f64 / 1e6,
        outside_calls_wait_s: outside as f64 / 1e6,
        cpu_s: cpu as f64 / 1e6,
        wait_s: waits as f64 / 1e6,
        unaccounted_s: unaccounted as f64 / 1e6,
        calls: calls.clone(),
        outermost_calls_by_depth: outermost_by_depth
            .iter()
            .map(|(d, n)| (d.to_string(), *n))
            .collect(),
        recursive_calls: recursive,
        errors: errors.clone(),
        rows,
    }
}

pub(super) fn merge_events(into: &mut Vec<EventTotals>, from: &[EventTotals]) {
    for e in from {
        match into.iter_mut().find(|x| x.name == e.name) {
            Some(x) => {
                x.count += e.count;
                x.ela_us += e.ela_us;
                x.max_us = x.max_us.max(e.max_us);
                x.between_us += e.between_us;
                x.between_count += e.between_count;
                x.outside_us += e.outside_us;
                x.outside_count += e.outside_count;
                x.io |= e.io;
            }
            None => into.push(e.clone()),
        }
    }
}
