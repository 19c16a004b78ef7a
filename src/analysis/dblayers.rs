//! Which database or kernel layer a function belongs to, from its name: the one table of known
//! Oracle kernel prefixes (as Tanel Poder's DStackProf and the ORA-600 lookup note name them),
//! PostgreSQL's main layers, and the Linux kernel's I/O path. Flame-graph tooltips, the "layers"
//! summary of a profile and the top-functions table all read it through [`classify`].
//!
//! User-space frames are matched against the Oracle and PostgreSQL rows, kernel frames against
//! the Linux rows. The longest matching prefix wins (`kcbz` before `kcb`). Names are matched
//! case-sensitively, as the databases spell them.

use serde::Serialize;

/// The system a layer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum System {
    Oracle,
    PostgreSQL,
    Linux,
}

impl System {
    /// Display name.
    pub fn as_str(self) -> &'static str {
        match self {
            System::Oracle => "Oracle",
            System::PostgreSQL => "PostgreSQL",
            System::Linux => "Linux kernel",
        }
    }
}

/// One row of the table: functions whose names start with `prefix` belong to `layer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Layer {
    pub system: System,
    /// Name prefix (or whole name) that identifies the layer.
    pub prefix: &'static str,
    /// Short layer name, e.g. `buffer cache`.
    pub layer: &'static str,
    /// What the layer does, in a few words.
    pub(crate) description: &'static str,
}

use System::{Linux, Oracle, PostgreSQL};

/// The table (`dblayers.tsv`, read once). Order does not matter: the longest matching prefix
/// wins.
pub static LAYERS: std::sync::LazyLock<Vec<Layer>> =
    std::sync::LazyLock::new(|| parse(include_str!("dblayers.tsv")));

/// The rows of the table's text; a row that does not read is left out (the tests hold that
/// every row reads).
fn parse(text: &'static str) -> Vec<Layer> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| {
            let mut f = line.split('\t');
            let system = match f.next()? {
                "Oracle" => Oracle,
                "PostgreSQL" => PostgreSQL,
                "Linux" => Linux,
                _ => return None,
            };
            let (prefix, layer, description) = (f.next()?, f.next()?, f.next()?);
            f.next().is_none().then_some(Layer {
                system,
                prefix,
                layer,
                description,
            })
        })
        .collect()
}

/// The layer of a function: the longest prefix of its name in [`LAYERS`] for its side (kernel
/// rows for kernel frames, database rows for user frames).
pub(crate) fn classify(name: &str, kernel: bool) -> Option<&'static Layer> {
    LAYERS
        .iter()
        .filter(|l| (l.system == Linux) == kernel && name.starts_with(l.prefix))
        .max_by_key(|l| l.prefix.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_sides_are_kept_apart() {
        assert_eq!(classify("kcbzib", false).unwrap().prefix, "kcbz");
        assert_eq!(classify("kcbgtcr", false).unwrap().prefix, "kcbgtcr");
        assert_eq!(classify("kcbrls", false).unwrap().layer, "buffer cache");
        assert_eq!(
            classify("qertbFetchByRowID", false).unwrap().prefix,
            "qertb"
        );
        assert_eq!(classify("ksfdread", false).unwrap().layer, "file I/O");
        assert_eq!(
            classify("ReadBufferExtended", false).unwrap().system,
            PostgreSQL
        );
        assert_eq!(classify("ExecSeqScan", false).unwrap().layer, "executor");
        assert_eq!(
            classify("heap_getnextslot", false).unwrap().layer,
            "heap access"
        );
        assert_eq!(
            classify("blk_mq_submit_bio", true).unwrap().layer,
            "block layer"
        );
        assert_eq!(
            classify("io_schedule", true).unwrap().layer,
            "scheduler (I/O wait)"
        );
        // A kernel function is never taken for a database one, nor the other way round.
        assert!(classify("blk_mq_submit_bio", false).is_none());
        assert!(classify("kcbgtcr", true).is_none());
        assert!(classify("main", false).is_none());
    }

    #[test]
    fn every_row_of_the_table_reads() {
        let text = include_str!("dblayers.tsv");
        let rows = text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .count();
        assert_eq!(LAYERS.len(), rows);
        assert!(rows > 100, "{rows}");
    }

    #[test]
    fn every_prefix_is_unique_per_system() {
        let mut seen = std::collections::HashSet::new();
        for l in LAYERS.iter() {
            assert!(seen.insert((l.system, l.prefix)), "duplicate {l:?}");
        }
    }
}
