//! PyLatencyMap record streams, so the output of its connectors (Oracle event histograms,
//! 10046, SystemTap, DTrace, bcc) can be read.
//!
//! ```text
//! <begin record>
//! timestamp, microsec, 1405512384123456, 2014-07-16 12:06:24
//! label, db file sequential read latency data from gv$event_histogram
//! latencyunit, millisec
//! datasource, oracle
//! 1, 1234
//! 2, 567
//! <end record>
//! ```
//! Bucket counts are cumulative per label, so records are differenced per label with
//! [`super::event_histogram::CumulativeSeries`] (a count going down starts a new series with a
//! warning). `datasource, oracle` means upper-bound buckets (`[v/2, v)`); `systemtap`,
//! `dtrace` and `bpf` mean lower-bound buckets (`[v, 2v)`), as PyLatencyMap itself reads them.
//! Records without a timestamp are spaced `--interval` apart. One run per label; the op is
//! named after the label.

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use serde_json::json;

use super::event_histogram::{Cells, CumulativeSeries};
use super::{parse_u64, Format, IngestOptions, LineReader};
use crate::results::{BucketConvention, RunResult};

#[derive(Default)]
struct Record {
    t_ns: Option<i64>,
    label: String,
    unit_ns: Option<f64>,
    conv: Option<BucketConvention>,
    /// Set when the rows are raw DTrace `quantize()` / SystemTap `@hist_log` output.
    shape: Option<&'static str>,
    buckets: HashMap<u64, u64>,
}

/// The bucket convention of a record and why: its `datasource` line; else the shape of its rows
/// (DTrace and SystemTap print lower bounds); else its label (Oracle views and 10046 traces use
/// upper bounds; DTrace, SystemTap, BPF lower); else its unit (Oracle never reports ns); else
/// PyLatencyMap's own default (`systemtap`, later `bpf`: lower bounds).
fn convention(rc: &Record) -> (BucketConvention, String) {
    use BucketConvention::{LowerBound, UpperBound};
    if let Some(c) = rc.conv {
        let name = if c == UpperBound {
            "upper-bound (Oracle)"
        } else {
            "lower-bound"
        };
        return (c, format!("{name}: stated by the record's datasource line"));
    }
    if let Some(shape) = rc.shape {
        return (
            LowerBound,
            format!("lower-bound: no datasource line; the rows are {shape} output, which labels a bucket by its lower bound"),
        );
    }
    let l = rc.label.to_ascii_lowercase();
    for k in [
        "event_histogram",
        "10046",
        "awr",
        "oracle",
        "wait event",
        "dba_hist",
    ] {
        if l.contains(k) {
            return (
                UpperBound,
                format!("upper-bound (Oracle): no datasource line; the label names '{k}', an Oracle source, whose bucket v holds [v/2, v)"),
            );
        }
    }
    for k in ["dtrace", "systemtap", "bpf", "bcc", "biolatency", "ebpf"] {
        if l.contains(k) {
            return (
                LowerBound,
                format!("lower-bound: no datasource line; the label names '{k}', whose bucket v holds [v, 2v)"),
            );
        }
    }
    if rc.unit_ns == Some(1.0) {
        return (
            LowerBound,
            "lower-bound: no datasource line; the unit is ns, which Oracle histograms never use"
                .into(),
        );
    }
    (
        LowerBound,
        "lower-bound: nothing in the record says; PyLatencyMap's own default data source (systemtap/bpf) is lower-bound".into(),
    )
}

/// Read a PyLatencyMap stream.
pub fn read(r: &mut LineReader, args: &IngestOptions) -> Result<Vec<RunResult>> {
    let mut series: BTreeMap<String, (CumulativeSeries, usize)> = BTreeMap::new();
    let mut keys = Cells::default();
    let mut order: Vec<String> = Vec::new();
    let mut rec: Option<(Record, u64)> = None;
    let interval_ns = args.interval.as_nanos() as i64;
    let mut untimed = 0usize;
    while let Some(line) = r.next_line()? {
        let t = line.trim_ascii();
        if t == b"<begin record>" {
            if rec.is_some() {
                r.unparsed("<begin record> inside a record (previous record dropped)");
            } else {
                r.parsed();
            }
            rec = Some((Record::default(), r.line_no));
            continue;
        }
        if t == b"<end record>" {
            let Some((mut rc, at)) = rec.take() else {
                r.unparsed("<end record> without <begin record>");
                continue;
            };
            r.parsed();
            if rc.label.is_empty() {
                rc.label = "pylatencymap".into();
            }
            let (conv, basis) = convention(&rc);
            let unit_ns = rc.unit_ns.unwrap_or(1e6);
            let label = rc.label.clone();
            if !series.contains_key(&label) {
                order.push(label.clone());
                series.insert(
                    label.clone(),
                    (
                        CumulativeSeries::new(
                            &label,
                            Format::Pylatencymap,
                            conv,
                            unit_ns,
                            json!({"label": label, "unit_ns": unit_ns,
                                   "bucket_convention_basis": basis}),
                        ),
                        0,
                    ),
                );
            }
            let (s, n) = series.get_mut(&label).expect("inserted");
            let t_ns = match rc.t_ns {
                Some(t) => t,
                None => {
                    untimed += 1;
                    *n as i64 * interval_ns
                }
            };
            *n += 1;
            let mut snap = Vec::new();
            for (b, c) in rc.buckets {
                let cell = keys.cell(&label, b);
                if snap.len() <= cell {
                    snap.resize(cell + 1, 0);
                }
                snap[cell] = c;
            }
            s.push(t_ns, snap, &format!("{}:{}", r.name, at), &keys)?;
            continue;
        }
        if t.is_empty() {
            r.ignored("blank");
            continue;
        }
        let Some((rc, _)) = rec.as_mut() else {
            r.ignored("outside records");
            continue;
        };
        // Raw DTrace quantize() / SystemTap @hist_log output, as PyLatencyMap's connectors read
        // it: headers, aggregation keys, `~` elisions, and rows `value |@@@ count`.
        if t.starts_with(b"value") {
            rc.shape = Some(if memchr::memmem::find(t, b"Distribution").is_some() {
                "DTrace quantize()"
            } else {
                "SystemTap @hist_log"
            });
            r.ignored("histogram header");
            continue;
        }
        if t == b"~" || t == b"myhistogram" {
            r.ignored("histogram header");
            continue;
        }
        if let Some(bar) = memchr::memchr(b'|', t) {
            let v = t[..bar].trim_ascii();
            let c = t[bar + 1..]
                .split(|c| c.is_ascii_whitespace())
                .rfind(|f| !f.is_empty())
                .unwrap_or(b"");
            if v.starts_with(b"-") {
                // Negative latencies (a VM clock artefact): PyLatencyMap's connectors drop them.
                r.ignored("negative bucket");
                continue;
            }
            match (parse_u64(v), parse_u64(c)) {
                (Some(b), Some(n)) => {
                    super::bcc::impossible_count(n, r.line_no)?;
                    rc.shape.get_or_insert("DTrace/SystemTap histogram");
                    *rc.buckets.entry(b).or_default() += n;
                    r.parsed();
                }
                _ => r.unparsed("histogram row not understood"),
            }
            continue;
        }
        let fields: Vec<&[u8]> = t.split(|&c| c == b',').map(|f| f.trim_ascii()).collect();
        match fields[0] {
            b"timestamp" => {
                // timestamp, microsec, <value>, <human readable>
                let unit = fields.get(1).copied().unwrap_or(b"microsec");
                let v = fields.get(2).and_then(|v| super::parse_f64(v));
                match (v, unit_ns(unit)) {
                    (Some(v), Some(u)) => {
                        rc.t_ns = Some((v * u) as i64);
                        r.parsed();
                    }
                    _ => r.unparsed("timestamp not understood"),
                }
            }
            b"label" => {
                let l = &t[t.iter().position(|&c| c == b',').unwrap_or(0) + 1..];
                rc.label = String::from_utf8_lossy(l.trim_ascii()).into_owned();
                r.parsed();
            }
            b"latencyunit" => match fields.get(1).and_then(|u| unit_ns(u)) {
                Some(u) => {
                    rc.unit_ns = Some(u);
                    r.parsed();
                }
                None => r.unparsed("latency unit not understood"),
            },
            b"datasource" => {
                rc.conv = Some(match fields.get(1).copied().unwrap_or(b"") {
                    b"oracle" => BucketConvention::UpperBound,
                    _ => BucketConvention::LowerBound,
                });
                r.parsed();
            }
            b => match (parse_u64(b), fields.get(1).and_then(|c| parse_u64(c))) {
                (Some(bucket), Some(count)) if fields.len() == 2 => {
                    super::bcc::impossible_count(count, r.line_no)?;
                    *rc.buckets.entry(bucket).or_default() += count;
                    r.parsed();
                }
                _ => r.unparsed("expected 'bucket, count' or a record tag"),
            },
        }
    }
    if let Some((_, at)) = rec {
        r.stats.unparsed_first.push(super::UnparsedLine {
            line: at,
            text: "<begin record>".into(),
            reason: "record not closed at end of input (dropped)".into(),
        });
        r.stats.unparsed += 1;
    }
    let mut runs = Vec::new();
    for label in order {
        let (s, _) = series.remove(&label).expect("present");
        let (mut rs, w) = s.finish();
        if let Some(last) = rs.last_mut() {
            if untimed > 0 {
                last.warnings.push(format!(
                    "{untimed} record(s) had no timestamp: drawn {} s apart in order; their \
                     duration is unknown (give --duration for rates)",
                    args.interval.as_secs_f64()
                ));
                for run in rs.iter_mut() {
                    run.duration_unknown = true;
                }
            }
        } else {
            r.warnings.extend(w);
        }
        runs.extend(rs);
    }
    Ok(runs)
}

fn unit_ns(u: &[u8]) -> Option<f64> {
    match u {
        b"nanosec" | b"ns" => Some(1.0),
        b"microsec" | b"us" => Some(1e3),
        b"millisec" | b"ms" => Some(1e6),
        b"sec" | b"s" => Some(1e9),
        _ => None,
    }
}
