//! The `Results` model: the one data structure every producer writes and every analysis and
//! renderer reads.
//!
//! Producers (the I/O engine, calibration, the database mode, trace and histogram readers) fill a
//! [`Results`]; analysis and renderers consume only this type, so nothing downstream knows where
//! the data came from. The JSON form is versioned (`schema`/`version`) and documented in
//! `docs/results-schema.md`. Latency histograms are HdrHistograms in nanoseconds (3 significant
//! digits) stored as V2-deflate + base64 ([`Hist`]), so they survive a round trip exactly.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod analysis;
pub mod evidence;
pub mod exposition;
pub mod hosts;
pub mod io_stats;
mod labels;
pub mod metric_family;
pub mod plan;
pub mod profile;
mod read;
pub mod replay;
mod validate;
mod verify;
mod watch;
mod write;
pub use read::{read_results_text, MAX_RESULTS_BYTES};
pub(crate) use read::{FileState, Source};
pub use validate::{interval_groups, IntervalGroups, MAX_COUNT};
pub use verify::*;
pub use watch::*;
pub use write::{dated_name, write_results, write_results_to};

/// Identifies an iolens results document.
pub const SCHEMA_NAME: &str = "iolens-results";
/// Version of the results schema this build writes and the newest it reads.
/// Version 2 added the typed [`analysis::Analysis`] (`analysis`) and replaced the calibration's
/// free-form `analysis` object with typed `findings`; version 1 files are still read.
/// Version 3 added the spread-bucket encoding of interval histograms (`s1:…`, see
/// [`Hist`]), which bucketed sources (`ingest` of AWR, event histograms, bcc, Prometheus)
/// write; files of versions 1 and 2 (V2-deflate only) are still read.
pub const SCHEMA_VERSION: u32 = 3;
/// What renderers print instead of a rate when a run's duration is unknown.
pub const UNKNOWN_RATE: &str = "unknown (no duration in source)";

/// The model's latency histogram type; the histogram itself (layout, encodings, sums, the
/// helpers producers record with) is [`crate::histogram`].
pub use crate::histogram::Hist;

/// Percentile summary of a histogram, in ns. Derived from the histogram; written into JSON
/// so that a reader with `jq` does not need to decode HdrHistogram.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub stdev_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub p9999_ns: u64,
    pub max_ns: u64,
}

impl LatencySummary {
    /// Summarise a histogram.
    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        if h.len() > MAX_COUNT {
            // Counts summing past 2^63 (absurd input): hdrhistogram's quantile scan would
            // overflow. Keep the count so validation rejects the document as an overflow.
            return LatencySummary {
                count: h.len(),
                ..LatencySummary::default()
            };
        }
        LatencySummary {
            count: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            stdev_ns: h.stdev(),
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            p9999_ns: h.value_at_quantile(0.9999),
            max_ns: h.max(),
        }
    }
}

/// Where power-of-two bucketed source data put its bucket label.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BucketConvention {
    /// Exact per-event values (engine runs, trace files).
    Exact,
    /// Oracle: a bucket labelled v holds waits in [v/2, v).
    UpperBound,
    /// bcc / SystemTap / DTrace: a bucket labelled v holds values in [v, 2v).
    LowerBound,
}

/// One interval's histogram of one op.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Interval {
    /// Start of the interval, seconds from the start of measurement.
    pub start_s: f64,
    /// Length of the interval in seconds (the last one may be shorter).
    pub duration_s: f64,
    /// Operations completed in the interval.
    pub count: u64,
    /// Bytes transferred by those operations.
    pub bytes: u64,
    /// Latency histogram of those operations.
    pub hist: Hist,
}

/// Fold a stub last interval into the one before it: when the last interval is shorter than
/// half of the one before (a run ends a few milliseconds after an interval boundary), the two
/// become one interval with their summed real duration and exactly merged histogram, so no rate
/// is ever computed over a sliver. Returns whether it folded.
pub(crate) fn fold_stub_tail(intervals: &mut Vec<Interval>) -> Result<bool> {
    if !has_stub_tail(intervals) {
        return Ok(false);
    }
    let n = intervals.len();
    let (prev, last) = (&intervals[n - 2], &intervals[n - 1]);
    let merged = if last.count > 0 {
        let mut h = prev.hist.decode()?;
        h.add(last.hist.decode()?)
            .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
        Some(Hist::encode(&h))
    } else {
        None
    };
    let Some(last) = intervals.pop() else {
        return Ok(false);
    };
    let Some(prev) = intervals.last_mut() else {
        return Ok(false);
    };
    if let Some(h) = merged {
        prev.hist = h;
    }
    prev.count += last.count;
    prev.bytes += last.bytes;
    prev.duration_s += last.duration_s;
    Ok(true)
}

/// Whether [`fold_stub_tail`] folds the last of `intervals`: it is shorter than half of the one
/// before (NaN durations never fold).
pub(crate) fn has_stub_tail(intervals: &[Interval]) -> bool {
    let n = intervals.len();
    n >= 2 && intervals[n - 1].duration_s < 0.5 * intervals[n - 2].duration_s
}

/// All measurements of one operation type (read, write, sync, or a named wait event).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct OpResult {
    /// Op name: `read`, `write`, `sync`, or a source's own event name.
    pub op: String,
    /// Operations completed (in the measured window).
    pub count: u64,
    /// Bytes transferred.
    pub bytes: u64,
    /// I/Os that failed (errors are counted, not timed).
    pub errors: u64,
    /// Histogram of every measured latency (the exact merge of `intervals`).
    pub hist: Hist,
    /// Derived percentile summary of `hist`.
    pub summary: LatencySummary,
    /// Per-interval histograms (heatmap material). Their counts sum to `count`.
    #[serde(serialize_with = "write::intervals")]
    pub intervals: Vec<Interval>,
    /// How the source bucketed values (exact for engine runs).
    #[serde(default = "default_convention")]
    pub bucket_convention: BucketConvention,
    /// Edges (ns, ascending) of the source's own buckets that held counts, for bucketed
    /// sources: their counts were spread across these buckets once, at ingest, so charts draw
    /// bars on these edges rather than re-binning them. Empty for exact values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bucket_edges_ns: Vec<u64>,
}

fn default_convention() -> BucketConvention {
    BucketConvention::Exact
}

/// The exact sum of the per-target results of a run over several targets (`sets[t]`: target
/// `t`'s ops): per op of `names` (in that order), counts, bytes and errors summed, histograms
/// merged, interval by interval on the run's one grid.
pub(crate) fn sum_op_sets(sets: &[Vec<OpResult>], names: &[&str]) -> anyhow::Result<Vec<OpResult>> {
    use crate::histogram::new_histogram;
    let merge = |h: &mut hdrhistogram::Histogram<u64>, x: &Hist| -> anyhow::Result<()> {
        h.add(x.decode()?)
            .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))
    };
    let mut out = Vec::new();
    for &name in names {
        let parts: Vec<&OpResult> = sets
            .iter()
            .filter_map(|s| s.iter().find(|o| o.op == name))
            .collect();
        if parts.is_empty() {
            continue;
        }
        let mut total = new_histogram();
        let mut ivs: Vec<(Interval, hdrhistogram::Histogram<u64>)> = Vec::new();
        for p in &parts {
            merge(&mut total, &p.hist)?;
            for (k, iv) in p.intervals.iter().enumerate() {
                if ivs.len() <= k {
                    ivs.push((
                        Interval {
                            count: 0,
                            bytes: 0,
                            ..iv.clone()
                        },
                        new_histogram(),
                    ));
                }
                let (sum, h) = &mut ivs[k];
                sum.count += iv.count;
                sum.bytes += iv.bytes;
                // The grid is the run's: a shorter last interval on one target is the same
                // interval, trimmed alike.
                sum.duration_s = sum.duration_s.min(iv.duration_s);
                if iv.count > 0 {
                    merge(h, &iv.hist)?;
                }
            }
        }
        let intervals = ivs
            .into_iter()
            .map(|(mut iv, h)| {
                iv.hist = Hist::encode(&h);
                iv
            })
            .collect();
        let mut r = OpResult::new(name, &total, parts.iter().map(|p| p.bytes).sum(), intervals);
        r.errors = parts.iter().map(|p| p.errors).sum();
        out.push(r);
    }
    Ok(out)
}

impl OpResult {
    /// Build from a merged histogram and its intervals.
    pub fn new(op: &str, total: &Histogram<u64>, bytes: u64, intervals: Vec<Interval>) -> Self {
        OpResult {
            op: op.to_string(),
            count: total.len(),
            bytes,
            errors: 0,
            hist: Hist::encode(total),
            summary: LatencySummary::of(total),
            intervals,
            bucket_convention: BucketConvention::Exact,
            bucket_edges_ns: Vec::new(),
        }
    }

    /// Build from what an accumulator of out-of-order intervals holds
    /// ([`crate::histogram::OpAcc::parts`]), `spans` giving each interval's start and length;
    /// a stub last interval folded into the one before ([`fold_stub_tail`]).
    pub(crate) fn of_parts(
        op: &str,
        parts: crate::histogram::Parts,
        spans: &[(f64, f64)],
    ) -> Result<Self> {
        let mut r = OpResult::of_parts_as_placed(op, parts, spans);
        fold_stub_tail(&mut r.intervals)?;
        Ok(r)
    }

    /// [`OpResult::of_parts`] with the intervals as `spans` places them, none folded (a merge's
    /// grid slots, which last as long as their longest contribution).
    pub(crate) fn of_parts_as_placed(
        op: &str,
        parts: crate::histogram::Parts,
        spans: &[(f64, f64)],
    ) -> Self {
        let ivs: Vec<Interval> = parts
            .intervals
            .into_iter()
            .zip(spans)
            .map(|((hist, count, bytes), &(start_s, duration_s))| Interval {
                start_s,
                duration_s,
                count,
                bytes,
                hist,
            })
            .collect();
        let mut r = OpResult::new(op, &parts.total, parts.bytes, ivs);
        r.errors = parts.errors;
        r
    }
}

/// CPU cost of a run, for the measured window.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CpuStats {
    /// User CPU seconds of the iolens process (getrusage).
    pub user_s: f64,
    /// System CPU seconds of the iolens process.
    pub sys_s: f64,
    /// (user+sys) µs per completed I/O.
    pub us_per_io: f64,
    pub user_us_per_io: f64,
    pub sys_us_per_io: f64,
    /// System-wide CPU busy share (0..1) from /proc/stat.
    pub host_busy: f64,
    /// System-wide iowait share (0..1).
    pub host_iowait: f64,
    /// Number of online CPUs.
    pub cpus: u32,
    /// Run-queue delay (time runnable but not running) of the session threads, total seconds.
    pub runq_delay_s: f64,
    /// Run-queue delay per I/O in µs.
    pub runq_us_per_io: f64,
    /// Time the session threads spent on CPU, total seconds (schedstat).
    pub session_run_s: f64,
}

impl CpuStats {
    /// Whether the run-queue delay was measured (schedstat read): a delay of 0 from a run
    /// without schedstat means "not known", not "none".
    pub fn runq_measured(&self) -> bool {
        self.runq_delay_s > 0.0 || self.session_run_s > 0.0 || self.runq_us_per_io > 0.0
    }
}

/// The backing block device's own view from /proc/diskstats over the measured window.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DeviceStats {
    pub device: String,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub iops: f64,
    pub mb_per_s: f64,
    /// Average time per read as the block layer saw it (ms reading / reads), µs.
    pub read_await_us: f64,
    /// Average time per write, µs.
    pub write_await_us: f64,
    /// Share of the window the device was busy (io_ticks), 0..1.
    pub util: f64,
    /// Average number of requests in flight (weighted time / elapsed).
    pub avg_in_flight: f64,
}

/// Page-cache residency of the working set, for buffered runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PageCacheInfo {
    /// Share (0..1) of the working set resident before the run.
    pub resident_before: f64,
    /// Share resident after the run.
    pub resident_after: f64,
    pub working_set_bytes: u64,
}

/// Per-session totals (fairness check between sessions).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SessionSummary {
    pub session: u32,
    pub count: u64,
    pub mean_ns: f64,
    pub p99_ns: u64,
}

/// The description of a measured series ([`RunResult::spec`]): the fields renderers, analysis
/// and merging read, typed, and the rest of what the producer wrote (engine runs: the
/// `workload::WorkloadSpec`; `db run`: engine, layout, settings and the db run's own spec;
/// `verify`, `watch`, readers of evidence: what was read) kept as written. The JSON is one
/// object with all of them, as in files written before the spec was typed.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Spec {
    /// Where a series that iolens did not drive came from: `oracle-10046`, an ingest format,
    /// `watch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// I/O size, bytes (engine runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u64>,
    /// Concurrent sessions (engine and database runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<u32>,
    /// Bytes of the target the run addressed (engine runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region_size: Option<u64>,
    /// Queue depth per session (engine runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qd: Option<u32>,
    /// Share of operations that update, % (database runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_pct: Option<f64>,
    /// Rows per operation (database runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_unit: Option<u32>,
    /// The trace files of a traced session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// The input file of an ingested series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Why a bucketed source's buckets are read as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_convention_basis: Option<String>,
    /// Everything else the producer wrote.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl Spec {
    /// The spec of a producer's description (anything that serialises to a JSON object; `null`
    /// is no spec). An error names the field whose type does not fit.
    pub fn of(description: impl Serialize) -> Result<Option<Spec>> {
        let v = serde_json::to_value(description)?;
        if v.is_null() {
            return Ok(None);
        }
        Ok(Some(
            serde_json::from_value(v).context("a run's spec does not fit the results model")?,
        ))
    }

    /// The spec as one JSON object (typed fields and the rest together), as written.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// One measured series: a `run`, one calibration step, one database run, or one ingested source.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RunResult {
    /// Short human label, e.g. `randread 8k sessions=4` or `db file sequential read`.
    pub name: String,
    /// Phase this series belongs to (calibration phase, `run`, `trace`, ...).
    #[serde(default)]
    pub phase: String,
    /// What was measured, as the producer describes it (engine runs write
    /// `workload::WorkloadSpec`); `null` when the producer gave none.
    #[serde(default)]
    pub spec: Option<Spec>,
    /// Wall-clock start of measurement, RFC 3339.
    #[serde(default)]
    pub started: String,
    /// Measured duration in seconds (warm-up excluded).
    pub duration_s: f64,
    /// True when the source holds no time information (e.g. one histogram printed at Ctrl-C):
    /// counts and distributions are real, rates (IOPS, MB/s) are unknown and renderers print
    /// [`UNKNOWN_RATE`] instead of a number. Absent in older files (read as known).
    #[serde(default)]
    pub duration_unknown: bool,
    /// Interval length in seconds.
    pub interval_s: f64,
    /// Warm-up seconds excluded before measurement.
    #[serde(default)]
    pub warmup_s: f64,
    /// Per-op measurements.
    pub ops: Vec<OpResult>,
    #[serde(default)]
    pub sessions: Vec<SessionSummary>,
    #[serde(default)]
    pub cpu: Option<CpuStats>,
    #[serde(default)]
    pub device: Option<DeviceStats>,
    #[serde(default)]
    pub page_cache: Option<PageCacheInfo>,
    /// Named counters (e.g. errors, aborted, database statistics).
    #[serde(default)]
    pub counters: BTreeMap<String, f64>,
    /// True when the run was interrupted (Ctrl-C) before its planned end.
    #[serde(default)]
    pub interrupted: bool,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Block verification figures (runs on stamped targets, `iolens verify`).
    #[serde(default)]
    pub verify: Option<VerifyStats>,
    /// Corrupt blocks found (empty when none). A non-empty list makes the run exit with 3.
    #[serde(default)]
    pub corruption: Vec<CorruptionReport>,
    /// The block layer under the run's own I/O, traced with BPF (`--watch`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<BlockLayer>,
    /// The memory the engine moved data to and from (engine runs that did I/O).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_buffers: Option<IoBuffers>,
    /// The device's own counters interval by interval (`/proc/diskstats` of the target's
    /// device read at the edges of the run's intervals): everything the device did, for every
    /// process, beside what iolens asked of it. Empty in older files, for targets without a
    /// block device, and for readers of evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_intervals: Vec<DeviceInterval>,
    /// The run's session threads' scheduling interval by interval (their
    /// `/proc/self/task/TID/schedstat` summed, read at the same edges as `device_intervals`),
    /// with the host's CPU pressure: whether iolens itself waited for a CPU, so that a rate
    /// lost to the host's CPU is not blamed on the storage. Empty in older files and for
    /// readers of evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sched_intervals: Vec<SchedInterval>,
    /// A run over several targets: each target's own series, queue facts and disk view, in
    /// target order (`ops` above are the totals); empty for a run on one target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetRun>,
}

/// One target of a run over several (`--target` given more than once, see `stripe`): the
/// I/O that landed on it, its storage's queue facts, and its disk's own view.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TargetRun {
    /// The target and its storage as sysfs describes it when the run started (device,
    /// scheduler, `nr_requests`, …).
    pub target: TargetInfo,
    /// The I/Os that landed on this target, per op, with per-interval histograms on the run's
    /// grid (their counts sum, op by op and interval by interval, to the run's).
    pub ops: Vec<OpResult>,
    /// How many requests its disk takes at once (block-multiqueue tags), where sysfs says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<DiskQueue>,
    /// The SCSI device's queue depth (`/sys/block/DISK/device/queue_depth`: the LUN queue an
    /// HBA driver such as lpfc or qla2xxx sets), where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lun_queue_depth: Option<u32>,
    /// Its disk's own counters (`/proc/diskstats`) over the measured window. Disks are
    /// counted whole: two targets on one disk each see both's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceStats>,
    /// The block requests the run made on this target's disk, traced (`--watch`; `db run
    /// --engine postgres` as root): each one's host queue and device service time per interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<BlockLayer>,
    /// Counts the database kept of this target's own I/O over the measured window (`db run
    /// --engine postgres` over tablespaces: `physical_reads`, `buffer_hits` of the tables in its
    /// tablespace, from `pg_statio_user_tables`; `tables`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, f64>,
}

impl TargetRun {
    /// I/Os completed on this target (all ops).
    pub fn total_count(&self) -> u64 {
        self.ops.iter().map(|o| o.count).sum()
    }
}

/// One interval of the device's own counters (see [`RunResult::device_intervals`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DeviceInterval {
    /// Start, seconds since the run's measurement start.
    pub start_s: f64,
    /// Length, seconds (the span between the two readings).
    pub duration_s: f64,
    /// Reads the device completed.
    pub reads: u64,
    /// Writes the device completed.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Milliseconds the device had requests in flight (io_ticks).
    pub busy_ms: u64,
    /// Request-milliseconds spent in the queue and the device (weighted time in queue):
    /// divided by the interval, the mean number of requests in flight.
    pub queue_ms: u64,
}

/// One interval of the session threads' scheduling (see [`RunResult::sched_intervals`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SchedInterval {
    /// Start, seconds since the run's measurement start.
    pub start_s: f64,
    /// Length, seconds (the span between the two readings).
    pub duration_s: f64,
    /// Session threads read (each is one closed loop: its time is its I/O's latency, its CPU
    /// time and its wait for a CPU).
    pub threads: u32,
    /// Nanoseconds the session threads ran on a CPU, summed.
    pub run_ns: u64,
    /// Nanoseconds the session threads were runnable but waited for a CPU (run-queue wait),
    /// summed.
    pub runq_ns: u64,
    /// Microseconds in which some task on the host waited for a CPU (`/proc/pressure/cpu`
    /// "some"), where the kernel has PSI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_some_us: Option<u64>,
    /// Kernel threads of the run's device read over this interval: those whose name carries
    /// the device's (the loop driver's workers `kworker/…+loop0`, which serve its requests);
    /// 0 where none was seen (most disks have none) or the file predates them.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub device_threads: u32,
    /// Nanoseconds those threads were runnable but waited for a CPU, summed: while they wait,
    /// the device's requests wait with them.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub device_runq_ns: u64,
}

impl SchedInterval {
    /// Share of the session threads' time spent waiting for a CPU (None without threads).
    pub fn runq_share(&self) -> Option<f64> {
        let t = self.threads as f64 * self.duration_s * 1e9;
        (t > 0.0).then(|| (self.runq_ns as f64 / t).min(1.0))
    }
}

/// The I/O buffers of an engine run: one pool for all sessions, on transparent huge pages
/// where asked for and given. With O_DIRECT a block inside one huge page is one contiguous
/// DMA segment; a block across two small pages may take two (see `engine::buffers`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IoBuffers {
    /// Bytes the pool maps.
    pub bytes: u64,
    /// Bytes of it the kernel backed with huge pages at the end of the run.
    pub huge_bytes: u64,
    /// Whether huge pages were asked for (`--huge-pages try`).
    pub huge_pages_asked: bool,
    /// The pool is on reserved huge pages (hugetlbfs, `vm.nr_hugepages`), not transparent ones.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hugetlb: bool,
    /// The kernel's transparent-huge-page setting (`/sys/kernel/mm/transparent_hugepage/enabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thp_setting: Option<String>,
}

/// The block requests of a run's own I/O on its target's disk, traced with BPF (`run`,
/// `calibrate`, `db run` with `--watch`): per op, `blk:<op>:queue` (submission → issue: the
/// host's block queue) and `blk:<op>:device` (issue → completion: the device's service time),
/// on the run's own interval grid (a request counts in the interval of its completion).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BlockLayer {
    /// Kernel name of the disk traced (`vda`, `nvme0n1`).
    pub device: String,
    /// `blk:read:queue`, `blk:read:device`, `blk:write:queue`, ... (only ops seen).
    pub ops: Vec<OpResult>,
    /// Events the kernel side could not deliver, by cause (empty: none lost).
    #[serde(default)]
    pub lost: BTreeMap<String, u64>,
    /// The run's bios that merged into a request already queued (in the plug or the I/O
    /// scheduler, possibly another process's request) instead of becoming a request of their
    /// own: block requests + merged bios = the I/Os that reached the block layer.
    #[serde(default)]
    pub merged: u64,
    /// `--watch` on iolens' own load: the number of the target file's extent ranges the
    /// requests and merged bios were filtered by (only I/O to the target's own blocks counts);
    /// absent when every request of the process on the disk counted (a device target, a
    /// filesystem whose blocks could not be mapped, `watch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_extents: Option<u32>,
    /// How many requests the disk takes at once, when traced; absent where unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<DiskQueue>,
}

/// How many requests a disk takes at once, as sysfs says when it was traced: what holds the
/// rest in the host's block queue when more are submitted.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DiskQueue {
    /// Kernel name of the disk (`vda`, `nvme0n1`).
    pub disk: String,
    /// Its block-multiqueue tags (`/sys/block/DISK/mq/*/nr_tags`), over all its hardware
    /// queues: how many requests its driver takes at once.
    pub driver_tags: u32,
    /// The hardware queues those tags are spread over.
    pub hw_queues: u32,
    /// A virtio disk: whether its device offers indirect descriptors. Without them a request
    /// takes two ring descriptors plus one per data segment, of a ring twice `driver_tags`
    /// long, so fewer requests fit in the device than it has tags. Absent for other disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtio_indirect: Option<bool>,
    /// Its request queue (`/sys/block/DISK/queue/nr_requests`, per hardware queue): a request
    /// takes a place in it when it enters the block layer (a scheduler's tag, or with scheduler
    /// `none` the driver's tag, which it then limits), and a submitter finding it full sleeps
    /// above the block layer. Absent where sysfs does not say (and in files written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_requests: Option<u32>,
}

impl BlockLayer {
    /// The op named `name` (e.g. `blk:read:device`), if any request of it was seen.
    pub fn op(&self, name: &str) -> Option<&OpResult> {
        self.ops.iter().find(|o| o.op == name && o.count > 0)
    }

    /// The run's block layer over several targets' (a run over several, `--watch`): each op's
    /// requests summed exactly, interval by interval, as the run's own ops are; losses, merges
    /// and extent ranges added; the disks named together (`loop0 + loop1`). The disk's queue
    /// only where every part is one and the same disk.
    pub(crate) fn sum(parts: &[BlockLayer]) -> anyhow::Result<BlockLayer> {
        let mut names: Vec<&str> = Vec::new();
        for o in parts.iter().flat_map(|p| &p.ops) {
            if !names.contains(&o.op.as_str()) {
                names.push(&o.op);
            }
        }
        let sets: Vec<Vec<OpResult>> = parts.iter().map(|p| p.ops.clone()).collect();
        let mut disks: Vec<&str> = Vec::new();
        for p in parts {
            if !disks.contains(&p.device.as_str()) {
                disks.push(&p.device);
            }
        }
        let mut lost = BTreeMap::new();
        for (k, v) in parts.iter().flat_map(|p| &p.lost) {
            *lost.entry(k.clone()).or_insert(0) += v;
        }
        Ok(BlockLayer {
            device: disks.join(" + "),
            ops: sum_op_sets(&sets, &names)?,
            lost,
            merged: parts.iter().map(|p| p.merged).sum(),
            target_extents: parts.iter().map(|p| p.target_extents).sum::<Option<u32>>(),
            queue: if disks.len() == 1 {
                parts.first().and_then(|p| p.queue.clone())
            } else {
                None
            },
        })
    }
}

impl RunResult {
    /// Total completed operations across ops.
    pub fn total_count(&self) -> u64 {
        self.ops.iter().map(|o| o.count).sum()
    }
    /// True when rates can be computed (the duration is known and positive).
    pub fn rates_known(&self) -> bool {
        !self.duration_unknown && self.duration_s > 0.0
    }
    /// Operations per second across ops (sync ops included); 0 when the duration is unknown
    /// (check [`RunResult::rates_known`] before printing it).
    pub fn iops(&self) -> f64 {
        if self.rates_known() {
            self.ops
                .iter()
                .filter(|o| o.op != "sync")
                .map(|o| o.count)
                .sum::<u64>() as f64
                / self.duration_s
        } else {
            0.0
        }
    }
    /// Megabytes (10^6) per second across ops.
    pub fn mb_per_s(&self) -> f64 {
        if self.rates_known() {
            self.ops.iter().map(|o| o.bytes).sum::<u64>() as f64 / self.duration_s / 1e6
        } else {
            0.0
        }
    }
    /// The op named `name`, if present.
    pub fn op(&self, name: &str) -> Option<&OpResult> {
        self.ops.iter().find(|o| o.op == name)
    }
    /// True when the run read corrupt data (block verification).
    pub(crate) fn found_corruption(&self) -> bool {
        !self.corruption.is_empty() || self.verify.as_ref().is_some_and(|v| v.errors > 0)
    }

    /// Merge all I/O ops (not `sync`) into one histogram.
    pub fn merged_io_hist(&self) -> Result<Histogram<u64>> {
        let mut h = crate::histogram::new_histogram();
        for o in self.ops.iter().filter(|o| o.op != "sync") {
            h.add(o.hist.decode()?)
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        }
        Ok(h)
    }
}

/// Facts about the machine, filesystem and device a run was made on.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Environment {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: u32,
    pub memory_bytes: u64,
    #[serde(default)]
    pub target: Option<TargetInfo>,
}

/// What a target is: `scratch` (created and marked by iolens), `file`, `block-device`, or the
/// database a `db` run used (`sqlite`, `postgres`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StorageKind {
    /// A file created and marked by iolens.
    Scratch,
    /// An existing file iolens did not create.
    #[default]
    File,
    /// A block device.
    BlockDevice,
    /// An SQLite database file (`db` runs).
    Sqlite,
    /// A PostgreSQL database (`db` runs).
    Postgres,
}

impl StorageKind {
    /// The kebab-case name, as in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            StorageKind::Scratch => "scratch",
            StorageKind::File => "file",
            StorageKind::BlockDevice => "block-device",
            StorageKind::Sqlite => "sqlite",
            StorageKind::Postgres => "postgres",
        }
    }
}

/// `Display` as the JSON spelling, and comparison with it (`kind == "lost-write"`), for the
/// enums of the model that have a `name()`.
macro_rules! named_enum {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.name() == *other
            }
        }
    )*};
}

named_enum!(VerifyMode, CorruptionKind, StorageKind);

/// Facts about the target and its backing storage.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TargetInfo {
    pub path: String,
    /// What the target is.
    pub kind: StorageKind,
    pub size_bytes: u64,
    pub filesystem: String,
    pub mount_point: String,
    pub mount_options: String,
    pub device: String,
    pub device_model: String,
    pub rotational: Option<bool>,
    /// The disk's active I/O scheduler (`none`, `mq-deadline`, `kyber`, `bfq`: the bracketed
    /// name of `/sys/block/DISK/queue/scheduler`); empty where unknown. Results written before
    /// this was the active one hold that file's whole line (see
    /// [`TargetInfo::active_scheduler`]).
    pub scheduler: String,
    /// The schedulers the disk offers (that file's names, the active one among them); empty
    /// where unknown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedulers: Vec<String>,
    pub logical_block_size: u32,
    pub physical_block_size: u32,
    pub nr_requests: Option<u32>,
    pub max_sectors_kb: Option<u32>,
    pub read_ahead_kb: Option<u32>,
    /// What the device's own link can carry, MB/s of payload (an NVMe device's PCIe link:
    /// rate × lanes × line-code efficiency); absent where sysfs gives no link for the device.
    /// A read rate above it came from a cache on the host's side of the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_mb_per_s: Option<f64>,
    /// The disk's driver where sysfs names it: the SCSI host's (`lpfc`, `qla2xxx`,
    /// `virtio_scsi`), `nvme`, `virtio_blk`, `loop`; empty where unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub driver: String,
}

impl TargetInfo {
    /// The active I/O scheduler: [`TargetInfo::scheduler`], or in results that hold the sysfs
    /// line whole (`[none] mq-deadline`), its bracketed name.
    pub fn active_scheduler(&self) -> &str {
        active_scheduler(&self.scheduler)
    }
}

/// The active scheduler of a `queue/scheduler` line: its bracketed name (`[none] mq-deadline`
/// → `none`); a line without brackets (one name alone) as it is.
pub(crate) fn active_scheduler(line: &str) -> &str {
    line.split_once('[')
        .and_then(|(_, r)| r.split_once(']'))
        .map_or(line.trim(), |(a, _)| a.trim())
}

/// A calibration point on the load curve (derived from a step's `RunResult`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CurvePoint {
    /// Index into `Results::runs`.
    pub run: usize,
    pub sessions: u32,
    pub qd: u32,
    pub iops: f64,
    pub mb_per_s: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub mean_ns: f64,
    pub cpu_us_per_io: f64,
    pub runq_us_per_io: f64,
    pub device_await_us: f64,
    /// Requests in the device on average during the step (Little's law over its traced block
    /// layer, `--watch`); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_in_flight: Option<f64>,
}

/// Results of `iolens calibrate`: the curve and the headline figures, referencing `runs`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Calibration {
    /// Latency percentile used for the target (e.g. 99.0).
    pub percentile: f64,
    /// Latency target in ns.
    pub max_latency_ns: u64,
    /// Single-block random-read load curve.
    pub curve: Vec<CurvePoint>,
    /// Max IOPS at the latency target (and the curve point it came from).
    pub max_iops: Option<f64>,
    pub max_iops_point: Option<usize>,
    /// Large-read bandwidth, many streams, MB/s.
    pub max_mbps: Option<f64>,
    /// Large-read bandwidth, one stream (CALIBRATE_IO's MAX_PMBPS), MB/s.
    pub max_pmbps: Option<f64>,
    /// What the calibration procedure decided while it ran (stop reason, best steps, which
    /// runs are commit writes and cache probes). The analysis of it is in `Results::analysis`.
    #[serde(default)]
    pub findings: analysis::CalibrationFindings,
    /// Seconds spent between steps (start/stop overhead), and the share of the budget.
    pub overhead_s: f64,
    pub budget_s: f64,
    /// What the procedure found besides the analysis: skipped steps, the verdicts at the
    /// max-IOPS step (figures include `sessions`), contradicting headline figures. Older files
    /// hold plain sentences, read as `note` verdicts.
    #[serde(default, deserialize_with = "analysis::verdicts_or_notes")]
    pub verdicts: Vec<analysis::Verdict>,
}

/// What produced a results document.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Run,
    Calibrate,
    Db,
    Trace,
    Ingest,
    /// `iolens verify`: an offline check of a target's blocks.
    Verify,
    /// `iolens watch`: live processes traced with BPF (syscalls, block layer, CPU).
    Watch,
    /// `iolens profile`: on- and off-CPU stacks of running processes.
    Profile,
    /// `iolens plan`: LUNs, queue depths and sessions for an IOPS goal, from measured curves.
    Plan,
    /// `iolens replay`: recorded I/O replayed on a target, with its fidelity.
    Replay,
}

impl Kind {
    /// Its name, as in the JSON (`run`, `calibrate`, …).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Run => "run",
            Kind::Calibrate => "calibrate",
            Kind::Db => "db",
            Kind::Trace => "trace",
            Kind::Ingest => "ingest",
            Kind::Verify => "verify",
            Kind::Watch => "watch",
            Kind::Profile => "profile",
            Kind::Plan => "plan",
            Kind::Replay => "replay",
        }
    }
}

/// The whole record of one iolens invocation.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Results {
    /// Always [`SCHEMA_NAME`].
    pub schema: String,
    /// Schema version ([`SCHEMA_VERSION`]).
    pub version: u32,
    /// iolens version that wrote the document.
    pub tool_version: String,
    pub kind: Kind,
    /// The command line, verbatim (credentials must be redacted by the producer).
    pub command_line: Vec<String>,
    /// When the document was created, RFC 3339.
    pub created: String,
    pub environment: Environment,
    /// Every measured series.
    pub runs: Vec<RunResult>,
    #[serde(default)]
    pub calibration: Option<Calibration>,
    /// Keys this version of iolens does not know (written by a newer one), kept as read so
    /// that they survive a round trip. Older files kept the typed fields below here; reading
    /// moves them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// What analysis found (modes, verdicts, knee, USL, Little's law, calibration findings,
    /// trace profile, database figures): `analysis::analyse` of the rest of this document.
    /// Absent in version 1 files (renderers then compute it on reading).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<analysis::Analysis>,
    /// Where it was measured: rank, world size, host, launcher, requested start, clock state
    /// (`run`, `calibrate`, `db run`; absent in older files and from readers of evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<hosts::Placement>,
    /// Set by `iolens merge`: the ranks merged, windows, per-rank series, stragglers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<hosts::MergeInfo>,
    /// On- and off-CPU stacks (`iolens profile`, `ingest --format perf-script|folded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<profile::StackProfile>,
    /// The time budget of an `iolens watch` (files written before this field held it in
    /// `extra["watch"]`; reading moves it here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchBudget>,
    /// The database of a `db run` (older files: `extra.engine`, `extra.layout`,
    /// `extra.wait_profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db: Option<evidence::DbInfo>,
    /// How a reader of evidence (`trace`, `ingest`) used every input line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<evidence::SourceInfo>,
    /// A trace's Method R response-time profile, all files and each file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_profile: Option<analysis::TraceProfile>,
    /// A trace's I/O waits by file#, obj# and block range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_io: Option<evidence::TraceIo>,
    /// A trace's slowest single waits, slowest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace_slowest: Vec<evidence::SlowWait>,
    /// Means-only I/O counters read at snapshots (`pg_stat_io`, …), as per-interval deltas.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_stats: Vec<io_stats::IoStats>,
    /// `iolens plan`: the plan (and its `--verify` run in `runs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<plan::Plan>,
    /// `iolens replay`: the mapping, the fidelity and each session recorded beside replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<replay::ReplayInfo>,
}

impl Results {
    /// An empty document of the given kind, stamped with version and time.
    pub fn new(kind: Kind, command_line: Vec<String>) -> Results {
        Results {
            schema: SCHEMA_NAME.to_string(),
            version: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            kind,
            command_line,
            created: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            environment: Environment::default(),
            runs: Vec::new(),
            calibration: None,
            extra: BTreeMap::new(),
            warnings: Vec::new(),
            analysis: None,
            placement: None,
            merge: None,
            profile: None,
            watch: None,
            db: None,
            source: None,
            trace_profile: None,
            trace_io: None,
            trace_slowest: Vec::new(),
            io_stats: Vec::new(),
            plan: None,
            replay: None,
        }
    }

    /// Serialise to pretty JSON.
    pub fn to_json(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// Write to `path` (`-` is standard output) through the one writer, [`crate::output`]:
    /// only a results file, an empty file or a new path is replaced, atomically, through a
    /// random temp file.
    pub fn write_file(&self, path: &std::path::Path) -> Result<()> {
        write_results_to(self, path)
    }

    /// The JSON Schema (draft 2020-12) of a results document, as published in
    /// `docs/results-schema.json`.
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(Results)).unwrap_or_default()
    }

    /// Read a results file from disk.
    pub fn read_file(path: &std::path::Path) -> Result<Results> {
        Results::read_file_merging(path, None)
    }

    /// [`Results::read_file`], handing the interval histograms that validation decodes to
    /// `groups` ([`Results::from_json_merging`]).
    pub fn read_file_merging(
        path: &std::path::Path,
        groups: Option<&dyn IntervalGroups>,
    ) -> Result<Results> {
        let mut src = Source::open(path, false)?;
        Results::from_source(&mut src, groups).with_context(|| format!("{}", path.display()))
    }
}

#[cfg(test)]
mod tests;

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}
