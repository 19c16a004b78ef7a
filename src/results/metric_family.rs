//! Prometheus' protobuf exposition, `io.prometheus.client.MetricFamily` (prometheus/client_model
//! `io/prometheus/client/metrics.proto`, the proto2 messages every Prometheus server and client
//! library reads), written by hand as `prost` messages: only the fields iolens writes or reads
//! (exemplars, summaries, untyped and gauge histograms left out, which a decoder skips as unknown
//! fields). Field numbers and types are the .proto's; no build script, no `protoc`.
//!
//! The exposition over HTTP is these messages each prefixed by its length as a varint
//! (`encoding=delimited`), which is the only format that carries native histograms.

/// The `Content-Type` of the delimited protobuf exposition.
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelPair {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Gauge {
    #[prost(double, optional, tag = "1")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Counter {
    #[prost(double, optional, tag = "1")]
    pub value: Option<f64>,
}

/// A classic bucket.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Bucket {
    #[prost(uint64, optional, tag = "1")]
    pub cumulative_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    pub upper_bound: Option<f64>,
}

/// A run of consecutive native buckets: `offset` from the end of the previous span (from 0 for
/// the first), `length` buckets.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BucketSpan {
    #[prost(sint32, optional, tag = "1")]
    pub offset: Option<i32>,
    #[prost(uint32, optional, tag = "2")]
    pub length: Option<u32>,
}

/// A histogram: classic buckets (`bucket`) and/or a native one (`schema`, the zero bucket, the
/// spans and the counts of their buckets, each as the difference from the previous bucket's).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Histogram {
    #[prost(uint64, optional, tag = "1")]
    pub sample_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    pub sample_sum: Option<f64>,
    #[prost(message, repeated, tag = "3")]
    pub bucket: Vec<Bucket>,
    #[prost(sint32, optional, tag = "5")]
    pub schema: Option<i32>,
    #[prost(double, optional, tag = "6")]
    pub zero_threshold: Option<f64>,
    #[prost(uint64, optional, tag = "7")]
    pub zero_count: Option<u64>,
    #[prost(message, repeated, tag = "9")]
    pub negative_span: Vec<BucketSpan>,
    #[prost(sint64, repeated, packed = "false", tag = "10")]
    pub negative_delta: Vec<i64>,
    #[prost(message, repeated, tag = "12")]
    pub positive_span: Vec<BucketSpan>,
    #[prost(sint64, repeated, packed = "false", tag = "13")]
    pub positive_delta: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Metric {
    #[prost(message, repeated, tag = "1")]
    pub label: Vec<LabelPair>,
    #[prost(message, optional, tag = "2")]
    pub gauge: Option<Gauge>,
    #[prost(message, optional, tag = "3")]
    pub counter: Option<Counter>,
    #[prost(message, optional, tag = "7")]
    pub histogram: Option<Histogram>,
    #[prost(int64, optional, tag = "6")]
    pub timestamp_ms: Option<i64>,
}

/// `MetricType`: COUNTER 0, GAUGE 1, SUMMARY 2, UNTYPED 3, HISTOGRAM 4, GAUGE_HISTOGRAM 5.
pub const TYPE_COUNTER: i32 = 0;
pub const TYPE_GAUGE: i32 = 1;
pub const TYPE_HISTOGRAM: i32 = 4;

#[derive(Clone, PartialEq, prost::Message)]
pub struct MetricFamily {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub help: Option<String>,
    #[prost(int32, optional, tag = "3")]
    pub r#type: Option<i32>,
    #[prost(message, repeated, tag = "4")]
    pub metric: Vec<Metric>,
}
