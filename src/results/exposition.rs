//! The metrics exposition's model (Prometheus/OpenMetrics): metric families of counters,
//! gauges and classic histograms with their labels. `watch --prometheus` builds one per interval
//! from what it has recorded; `render::prometheus` builds one from a results document and words
//! either as the text exposition; `sources::prometheus` reads that text back.

use std::collections::HashMap;

pub use crate::histogram::classic::PromHist;

/// What a family's samples are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

impl MetricKind {
    /// The name in a `# TYPE` line.
    pub fn name(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        }
    }
}

/// One sample's value.
#[derive(Clone, Debug, PartialEq)]
pub enum SampleValue {
    Number(f64),
    Hist(PromHist),
}

/// One series: its labels (name, value) and value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub labels: Vec<(String, String)>,
    pub value: SampleValue,
}

/// One metric family.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub kind: MetricKind,
    pub samples: Vec<Sample>,
}

/// A whole exposition.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    pub families: Vec<Family>,
}

impl Exposition {
    /// The family `name`, created (with its help and kind) the first time.
    pub fn family(&mut self, name: &str, help: &str, kind: MetricKind) -> &mut Family {
        let i = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family {
                    name: name.to_string(),
                    help: help.to_string(),
                    kind,
                    samples: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        &mut self.families[i]
    }
}

impl Family {
    /// Add a sample with these labels.
    pub fn push(&mut self, labels: &[(&str, &str)], value: SampleValue) {
        self.samples.push(Sample {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
        });
    }
}

/// The label value that stands for every value past a label's limit.
pub const OTHER: &str = "other";

/// A label's values, bounded: the first `limit` distinct values keep their own, every later
/// one is [`OTHER`]. Values are numbered in the order first seen (index 0 is [`OTHER`]).
#[derive(Clone, Debug)]
pub struct LabelValues {
    limit: usize,
    names: Vec<String>,
    index: HashMap<String, u16>,
}

impl LabelValues {
    pub fn new(limit: usize) -> LabelValues {
        LabelValues {
            limit,
            names: vec![OTHER.to_string()],
            index: HashMap::new(),
        }
    }

    /// The number of `v` ([`OTHER`]'s past the limit).
    pub fn id(&mut self, v: &str) -> u16 {
        if let Some(&i) = self.index.get(v) {
            return i;
        }
        if self.names.len() > self.limit || v == OTHER {
            return 0;
        }
        let i = self.names.len() as u16;
        self.names.push(v.to_string());
        self.index.insert(v.to_string(), i);
        i
    }

    /// The value numbered `i`.
    pub fn name(&self, i: u16) -> &str {
        self.names.get(i as usize).map_or(OTHER, |s| s.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_past_the_limit_are_other() {
        let mut l = LabelValues::new(2);
        assert_eq!(l.id("a"), 1);
        assert_eq!(l.id("b"), 2);
        assert_eq!(l.id("c"), 0);
        assert_eq!(l.id("a"), 1);
        assert_eq!(l.name(0), OTHER);
        assert_eq!(l.name(2), "b");
        let d = l.id("d");
        assert_eq!(l.name(d), OTHER);
    }
}
