//! The command-line spelling of the domain enums: clap's [`ValueEnum`] for the workload,
//! verification, calibration, ingest, watch layer and colour choices, written here so that the modules
//! defining those enums know nothing of clap. Each value keeps the name and help clap's derive
//! gave it (the variant name in kebab case, the first line of its documentation). Also the
//! one parser of duration values ([`duration`], [`std_duration`]) every command's options use.

use clap::builder::PossibleValue;
use clap::ValueEnum;

use crate::calibrate::Phase;
use crate::render::ColorChoice;
use crate::sources::io_stream::StreamFormat;
use crate::sources::{Format, Unit};
use crate::stamp::{OnCorruption, VerifyMode};
use crate::watch::Layer;
use crate::workload::StripeMode;
use crate::workload::{EngineKind, HugePages, Pattern};

/// `impl ValueEnum for $t`: each variant with its command-line name and optional help.
macro_rules! value_enum {
    ($t:ty { $($v:ident => $name:literal $(: $help:literal)?),+ $(,)? }) => {
        impl ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                &[$(<$t>::$v),+]
            }
            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(match self {
                    $(<$t>::$v => PossibleValue::new($name)$(.help($help))?),+
                })
            }
        }
    };
}

value_enum!(Pattern {
    Randread => "randread": "Random reads (db file sequential read)",
    Randwrite => "randwrite": "Random writes (DBWR)",
    Read => "read": "Sequential reads (scans, direct path read), one stream per session",
    Write => "write": "Sequential writes (log writer), one stream per session",
    Randrw => "randrw": "Random mix of reads and writes (`--read-pct`)",
});

value_enum!(EngineKind {
    Sync => "sync": "pread/pwrite, one I/O in flight per session",
    Uring => "uring": "io_uring, `--qd` I/Os in flight per session",
    Null => "null": "No I/O at all: measures the tool's own cost per I/O",
});

value_enum!(StripeMode {
    Unit => "unit": "Stripe the address space over the targets in --stripe-unit allocation units, as ASM does",
    PerSession => "per-session": "One target per session: session i on target i mod N",
});

value_enum!(HugePages {
    Try => "try": "Reserved (hugetlb) huge pages if enough are free, else transparent ones; small pages where the kernel gives none",
    Off => "off": "Small pages only, as a database without huge pages",
});

value_enum!(VerifyMode {
    Auto => "auto": "`full` on scratch files iolens created, `none` on other targets",
    None => "none": "Do not look at the data read",
    Header => "header": "Check each unit's magic, target id, offset and generation (no checksum)",
    Full => "full": "Everything `header` checks, plus the CRC32C of every 512-byte unit",
});

value_enum!(OnCorruption {
    Stop => "stop": "End the run at the first corrupt block",
    Continue => "continue": "Keep going, reporting every corrupt block",
});

value_enum!(StreamFormat {
    Auto => "auto": "Decided from the first file's first lines",
    Oracle10046 => "oracle10046": "Oracle extended SQL trace (event 10046)",
    Biosnoop => "biosnoop": "bcc biosnoop output",
    Blkparse => "blkparse": "blkparse text output (default format; each Q to its C)",
    FioIolog => "fio-iolog": "fio iolog (write_iolog), version 2 or 3",
    WatchRecord => "watch-record": "`iolens watch --record` (each thread on its own thread)",
});

value_enum!(Layer {
    Syscall => "syscall": "I/O syscall latency (pread64, pwrite64, fsync, io_uring_enter, ...)",
    Block => "block": "Block device service time (issue to completion)",
    Cpu => "cpu": "CPU run-queue wait of the watched threads",
});

value_enum!(Phase {
    Randread => "randread": "Single-block random reads, session ramp (max IOPS at the latency target)",
    Seqread => "seqread": "Large sequential reads, many streams, queue-depth ramp (max MB/s)",
    Seqread1 => "seqread1": "Large sequential reads, one stream (CALIBRATE_IO's MAX_PMBPS)",
    Writes => "writes": "Commit-shaped O_DSYNC writes and random-write session ramp (writes to the scratch file)",
    Cache => "cache": "Random reads over growing working sets (storage-side cache tiers)",
});

value_enum!(Format {
    EventHistogram => "event-histogram": "V$EVENT_HISTOGRAM(_MICRO) snapshots spooled as CSV: time, event, bucket, count",
    Pylatencymap => "pylatencymap": "PyLatencyMap record stream (<begin record> … <end record>)",
    Biolatency => "biolatency": "bcc biolatency text output (log2 histograms, optional -T/-D/-F sections)",
    Bpftrace => "bpftrace": "bpftrace hist()/lhist() map output",
    Biosnoop => "biosnoop": "bcc biosnoop output (one line per I/O)",
    FioLog => "fio-log": "fio per-I/O latency log (write_lat_log / write_clat_log ...)",
    FioHist => "fio-hist": "fio histogram log (write_hist_log)",
    Hlog => "hlog": "HdrHistogram interval log (.hlog)",
    TimeLatency => "time-latency": "Two columns: time latency (Brendan Gregg's heatmap input)",
    PerfScript => "perf-script": "`perf script` output (sampled stacks) into a stack profile and flame graph",
    Folded => "folded": "Folded stacks (comm;outer;…;leaf weight) into a stack profile and flame graph",
    Awr => "awr": "Oracle AWR (text or HTML, also an AWR RAC global report) or Statspack report: Wait Event Histogram, Detail sections merged in, over the snap window; foreground wait events as means",
    PgStatIo => "pg-stat-io": "PostgreSQL pg_stat_io snapshots (psql, \\watch or CSV; 16, 17, 18 columns) as per-interval means",
    PgStatDatabase => "pg-stat-database": "PostgreSQL pg_stat_database snapshots: blks_read, blk_read_time as per-interval means",
    PgStatStatements => "pg-stat-statements": "PostgreSQL pg_stat_statements snapshots: per-statement block I/O time as per-interval means",
    MysqlFileIo => "mysql-file-io": "MySQL/MariaDB per-file I/O snapshots (performance_schema.file_summary_by_instance, sys.io_global_by_file_by_latency; mysql -t/-B or CSV) as per-interval means",
    Prometheus => "prometheus": "Prometheus text exposition: classic histograms (an iolens watch --prometheus scrape, a --metrics file, another exporter's), one run per family, one op per series",
});

value_enum!(Unit {
    Ns => "ns",
    Us => "us",
    Ms => "ms",
    S => "s",
});

value_enum!(ColorChoice {
    Auto => "auto": "Colour when stdout is a terminal and NO_COLOR is not set",
    Always => "always",
    Never => "never",
});

/// A duration option (`--duration`, `--warmup`, `--interval`, `--think`, `--budget`, …) in
/// seconds: `30s`, `500ms`, `2m` or plain seconds, from 0 to 366 days; anything else is a
/// clear error, never a panic where the value is added to a clock.
pub(crate) fn duration(s: &str) -> Result<f64, String> {
    crate::units::parse_duration(s)
}

/// [`duration`] as a [`std::time::Duration`].
pub(crate) fn std_duration(s: &str) -> Result<std::time::Duration, String> {
    duration(s).map(std::time::Duration::from_secs_f64)
}
