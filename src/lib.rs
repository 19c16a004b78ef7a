//! iolens: storage measured as a database experiences it.
//!
//! Data flows one way: workload spec → engine → recorder → [`results::Results`] → analysis →
//! renderers. Other producers (traces, histogram snapshots, database runs) also write `Results`.
pub mod analysis;
pub mod calibrate;
pub mod cli;
pub mod db;
pub mod engine;
pub mod interrupt;
pub mod journal;
pub mod out;
pub mod progress;
pub mod recorder;
pub mod render;
pub mod results;
pub mod run;
pub mod sources;
pub mod sys;
pub mod target;
pub mod units;
pub mod verify;
pub mod workload;
