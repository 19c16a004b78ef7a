//! iolens: storage measured as a database experiences it.
//!
//! The `iolens` binary is a thin shell over this library: [`commands::main_with`] parses the
//! command line ([`commands::Cli`]) and runs one subcommand. Data flows one way:
//!
//! 1. **Commands** ([`commands`]) turn arguments into domain options — a
//!    [`workload::WorkloadSpec`] and [`target::PrepareOptions`] for `run`, a
//!    [`calibrate::CalibrateOptions`] for `calibrate`, a [`db::RunSpec`] for `db run`, a
//!    [`sources::IngestOptions`] or [`sources::TraceOptions`] for the readers — with one
//!    [`run::RunContext`] for a producer that runs (progress, Ctrl-C, `--start-at`,
//!    `--watch`), and end through one `commands::finish` (write the results, say where, choose
//!    the exit code).
//! 2. **Producers** make a [`results::Results`]: [`run::execute`] drives an engine
//!    ([`engine`]) whose sessions record every I/O into per-interval histograms
//!    ([`recorder`]) on a [`target::Target`] whose blocks carry [`stamp`]s;
//!    [`calibrate::calibrate`] schedules many runs from a [`calibrate::Plan`]; [`db`] drives
//!    SQLite or PostgreSQL; [`sources`] read traces and histogram logs;
//!    [`verify::verify_target`] checks a scratch file offline; [`watch`] and `profile` record
//!    live processes through BPF probes (`bpf`); `merge` sums per-rank results exactly.
//! 3. **Results** ([`results::Results`], one versioned, serialisable model: the spec, the
//!    environment, a [`results::RunResult`] per run with its per-interval histograms) is what
//!    every producer writes and every reader reads.
//! 4. **Analysis** ([`analysis`]: modes, knee, USL, Little's law, verdicts) reads only `Results`
//!    and is stored back in it, typed ([`results::analysis::Analysis`]); **renderers**
//!    ([`render`]) read only `Results`: the closing summary every command prints
//!    ([`render::brief`], [`render::brief_db`], [`render::brief_trace`]), `show`
//!    ([`render::terminal`]), `report` ([`render::html`]), `compare`, CSV, hlog, Markdown.
//!
//! Nothing imports a module above it; [`units`] (parsing and formatting) and [`stamp`] (the
//! block format) sit at the bottom. See `docs/architecture.md` for the whole map.
#![warn(unreachable_pub)]
pub mod analysis;
pub(crate) mod bpf;
pub mod calibrate;
pub mod commands;
pub mod db;
pub(crate) mod engine;
pub mod exit;
pub mod histogram;
pub(crate) mod interrupt;
pub mod journal;
pub(crate) mod merge;
pub mod out;
pub mod output;
pub mod placement;
pub(crate) mod profile;
pub(crate) mod progress;
pub(crate) mod recorder;
pub mod render;
pub mod replay;
pub mod results;
pub mod run;
pub(crate) mod session;
pub mod sources;
pub mod stamp;
pub mod stripe;
pub mod synth;
pub(crate) mod sys;
pub mod target;
pub mod units;
pub mod verify;
pub mod watch;
pub mod workload;
