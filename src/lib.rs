//! iolens: storage measured as a database experiences it.
//!
//! Data flows one way: workload spec → engine → recorder → [`results::Results`] → analysis →
//! renderers. Other producers (traces, histogram snapshots, database runs) also write `Results`.
pub mod cli;
pub mod recorder;
pub mod results;
pub mod sources;
pub mod units;
