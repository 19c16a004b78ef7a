//! The plan of `iolens plan` (a results kind): from measured load curves and a goal (IOPS at a
//! p99), the requests that must be in flight, the LUN count and per-LUN queue depth that hold
//! them, the sessions, the host settings, the vendor formulas checked, what the curve says
//! beyond, and (with `--verify`) the plan's configuration measured beside its prediction.
//! Decided by `analysis::plan`; every figure carries where it came from ([`Sourced`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A figure and where it came from: which file, which step or run, which formula.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Sourced {
    pub value: f64,
    /// Its unit: `IOPS`, `ns`, `requests`, `sessions`, `LUNs`, `CPUs`.
    pub unit: String,
    /// Where it came from, in words (file, step, formula).
    pub from: String,
}

impl Sourced {
    pub fn new(value: f64, unit: &str, from: impl Into<String>) -> Sourced {
        Sourced {
            value,
            unit: unit.into(),
            from: from.into(),
        }
    }
}

/// What the user asked for.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PlanGoal {
    /// I/Os per second the database needs.
    pub iops: f64,
    /// The 99th percentile latency they must stay under, ns.
    pub p99_ns: f64,
    /// Hosts sharing the array's port (`--hosts`).
    pub hosts: u32,
    /// Paths (initiator ports) per host to each LUN (`--paths`).
    pub paths: u32,
    /// The array port's queue (`--port-queue`), where given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_queue: Option<u32>,
    /// The per-LUN queue depth the HBA allows (`--lun-queue`), where given: the plan is made
    /// for LUNs of this depth instead of the measured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lun_queue: Option<u32>,
    /// How sessions reach the LUNs: `unit` (ASM-style striping: each I/O on a LUN at random)
    /// or `per-session` (each session on one LUN).
    pub stripe: String,
}

/// One results file the plan read.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PlanInput {
    pub file: String,
    /// Its kind (`calibrate`, `run`).
    pub kind: String,
    /// Load points it gave, and at how many LUNs (targets) each was measured.
    pub points: usize,
    pub luns: Vec<u32>,
}

/// One measured load point: a calibration step or a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LoadPoint {
    /// The results file and the run within it (index into its `runs`).
    pub file: String,
    pub run: usize,
    /// LUNs (targets) it ran on.
    pub luns: u32,
    /// Requests the load kept issuing: sessions × I/Os in flight per session.
    pub sessions: u32,
    pub iops: f64,
    pub mean_ns: f64,
    pub p50_ns: f64,
    pub p99_ns: f64,
}

/// The queueing model fitted to the measured curve (see `analysis::plan`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PlanModel {
    /// The LUN count of the curve the model was fitted to.
    pub luns: u32,
    /// The curve (per its LUN count), in order of load.
    pub points: Vec<LoadPoint>,
    /// Service time of one I/O on a LUN: the lowest mean latency measured.
    pub service_ns: Sourced,
    /// Time a session spends between its I/Os (CPU, issuing): cycle time minus latency at the
    /// lowest load.
    pub outside_ns: Sourced,
    /// Requests one LUN serves at once: Little's law at the plateau (or `--lun-queue`).
    pub lun_queue: Sourced,
    /// The lowest p99 measured: below it no plan can go.
    pub floor_p99_ns: Sourced,
    /// The largest relative IOPS error of the model on the curve it was fitted to.
    pub fit_error: f64,
    /// The queue facts the measured target reported (nr_requests, tags, SCSI queue depth,
    /// in-device requests from --watch), to set beside `lun_queue`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queue_facts: Vec<String>,
}

/// A host setting to apply.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HostSetting {
    /// What is set (`nr_requests`, `lpfc_lun_queue_depth`, …).
    pub name: String,
    pub value: String,
    /// How to set it (a command or a modprobe line).
    pub how: String,
    /// Why this value (formula and source).
    pub why: String,
}

/// A vendor formula the plan was checked against.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct VendorCheck {
    pub rule: String,
    pub formula: String,
    /// The limit the formula gives, where it could be computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// The plan's figure compared with it.
    pub planned: f64,
    /// `None` when the inputs to check it were not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holds: Option<bool>,
    /// What it means, in words.
    pub says: String,
}

/// Predicted (and, where measured, measured) load points at one LUN count.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PlanCurve {
    pub luns: u32,
    pub predicted: Vec<CurveAt>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<CurveAt>,
}

/// One point of a [`PlanCurve`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CurveAt {
    pub sessions: u32,
    pub iops: f64,
    pub p99_ns: f64,
    /// The model, or the file and run measured.
    pub from: String,
}

/// `plan --verify`: the plan's configuration run, its figures beside the prediction.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PlanVerify {
    /// Index of the run in `Results::runs`.
    pub run: usize,
    pub luns: u32,
    pub sessions: u32,
    pub stripe: String,
    pub predicted_iops: f64,
    pub measured_iops: f64,
    pub predicted_p99_ns: f64,
    pub measured_p99_ns: f64,
    /// measured ÷ predicted − 1.
    pub iops_error: f64,
    pub p99_error: f64,
    /// Whether the measured run met the goal (IOPS and p99).
    pub goal_met: bool,
}

/// The plan.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Plan {
    pub goal: PlanGoal,
    pub inputs: Vec<PlanInput>,
    pub model: PlanModel,
    /// The measured load point that meets the p99 goal at the highest IOPS: its latency
    /// distribution is the one Little's law is applied with.
    pub operating_point: LoadPoint,
    /// Requests that must be in flight on average (Little's law: goal IOPS × mean latency of
    /// the operating point's histogram).
    pub in_flight: Sourced,
    /// Queue slots that hold them 99 % of the time (the 99th percentile of a Poisson count of
    /// that mean: requests in flight in an M/G/∞ system, whatever the service distribution).
    pub in_flight_p99: Sourced,
    pub luns: Sourced,
    pub lun_queue_depth: Sourced,
    pub sessions: Sourced,
    pub predicted_iops: Sourced,
    pub predicted_p99_ns: Sourced,
    pub settings: Vec<HostSetting>,
    pub checks: Vec<VendorCheck>,
    /// What the measured curve says beyond the plan: the knee, the USL peak, the host CPU.
    pub beyond: Vec<Sourced>,
    /// Predicted curve per LUN count, with the points measured there.
    pub curves: Vec<PlanCurve>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<PlanVerify>,
    /// Assumptions and limits of the plan, in words.
    pub notes: Vec<String>,
}
