//! The stack profile of a results document ([`super::Results::profile`]): where a process spent
//! its time on CPU (sampled stacks) and off CPU (stacks at the moment a thread blocked, weighted
//! by how long it stayed off CPU), written by `iolens profile` and by `iolens ingest --format
//! perf-script|folded`, drawn as a flame graph by `render::flame`.
//!
//! Frames are interned: [`StackProfile::frames`] holds each distinct frame once, and every
//! [`Stack`] lists indices into it, root first. Weights are nanoseconds for both halves (CPU
//! time is samples × sampling period), so on-CPU and off-CPU stacks share one flame graph; the
//! sample and event counts are kept beside them.

use std::collections::HashMap;

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a frame's code lives.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FrameKind {
    /// User-space code (the program, its libraries).
    User,
    /// Kernel code.
    Kernel,
}

/// One function in a stack.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Hash, JsonSchema)]
pub struct Frame {
    /// Symbol name, demangled; `[module]` or `[unknown]` when the address has no symbol.
    pub name: String,
    pub kind: FrameKind,
    /// File the code was mapped from (binary, library, `[kernel.kallsyms]`), when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub module: String,
}

/// Why a thread was off CPU, as the kernel recorded it when the thread left the CPU.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum OffCpuReason {
    /// Uninterruptible sleep (`D`, TASK_UNINTERRUPTIBLE): waiting for I/O (disk reads, page
    /// faults, most filesystem locks).
    IoWait,
    /// Interruptible sleep (`S`): waiting for an event, a lock, a timer, the network.
    Sleep,
    /// Still runnable when switched out (preempted): waiting for a CPU (run-queue delay).
    Runnable,
}

impl OffCpuReason {
    /// Every reason, in display order.
    pub const ALL: [OffCpuReason; 3] = [
        OffCpuReason::IoWait,
        OffCpuReason::Sleep,
        OffCpuReason::Runnable,
    ];
    /// The kebab-case name, as in the JSON and the folded marker.
    pub fn as_str(self) -> &'static str {
        match self {
            OffCpuReason::IoWait => "io-wait",
            OffCpuReason::Sleep => "sleep",
            OffCpuReason::Runnable => "runnable",
        }
    }
    /// In words.
    pub fn describe(self) -> &'static str {
        match self {
            OffCpuReason::IoWait => "I/O wait (uninterruptible sleep)",
            OffCpuReason::Sleep => "other sleep (locks, events, timers, network)",
            OffCpuReason::Runnable => "runnable, waiting for a CPU",
        }
    }
    /// Parse [`OffCpuReason::as_str`].
    pub fn parse(s: &str) -> Option<OffCpuReason> {
        OffCpuReason::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// Whether a stack was sampled on CPU or recorded as the thread left the CPU.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
/// In JSON: `"on-cpu"`, or `{"off-cpu": "io-wait"}`.
#[serde(rename_all = "kebab-case")]
pub enum StackState {
    /// Sampled while running.
    OnCpu,
    /// Off CPU, with the reason.
    OffCpu(OffCpuReason),
}

impl StackState {
    /// `on-cpu`, or `off-cpu io-wait` etc.
    pub fn label(self) -> String {
        match self {
            StackState::OnCpu => "on-cpu".into(),
            StackState::OffCpu(r) => format!("off-cpu {}", r.as_str()),
        }
    }
}

/// One distinct stack of one process name and state, with its weight.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Stack {
    /// Process (or thread) name: the flame graph's first level.
    pub comm: String,
    /// Indices into [`StackProfile::frames`], root (outermost caller) first.
    pub frames: Vec<u32>,
    pub state: StackState,
    /// On CPU: samples taken in this stack. Off CPU: times a thread blocked in it.
    pub count: u64,
    /// Nanoseconds: CPU time (samples × period) on CPU, blocked time off CPU.
    pub weight_ns: u64,
    /// PostgreSQL: the wait event the process published (`IO:DataFileRead`, `Lock:transactionid`)
    /// when sampled or when it left the CPU; absent for no wait event or another program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_event: Option<String>,
    /// Idle, not work: off CPU waiting for a client or for something to do (PostgreSQL's
    /// Client:ClientRead and Activity:* wait events; an event loop's epoll_wait, poll or
    /// select). Kept only with `profile --keep-idle`; never counted in the verdict.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idle: bool,
}

/// Where the profile came from and how it was taken.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProfileSource {
    /// `bpf` (iolens profile), `perf-script` or `folded` (ingest).
    pub producer: String,
    /// Sampling frequency (Hz) of the on-CPU half, when known.
    #[serde(default)]
    pub frequency_hz: Option<f64>,
    /// Nanoseconds one on-CPU sample stands for (1e9 / frequency), when known.
    #[serde(default)]
    pub period_ns: Option<u64>,
    /// Seconds the profile covers, when known.
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Whether off-CPU stacks were collected.
    #[serde(default)]
    pub off_cpu: bool,
    /// Process ids profiled (empty: by name, or unknown).
    #[serde(default)]
    pub pids: Vec<u32>,
    /// Process name profiled, when chosen by name.
    #[serde(default)]
    pub comm: Option<String>,
    /// CPUs sampled.
    #[serde(default)]
    pub cpus: u32,
    /// Samples or events lost (full maps, failed stack walks), counted rather than hidden.
    #[serde(default)]
    pub lost: u64,
    /// Stacks the kernel could not walk (user or kernel part missing), counted.
    #[serde(default)]
    pub truncated: u64,
    /// Idle time (ns) left out of the stacks (see [`Stack::idle`]; 0 with `--keep-idle`).
    #[serde(default)]
    pub idle_ns: u64,
    /// Times a thread went idle, left out with that time.
    #[serde(default)]
    pub idle_count: u64,
}

/// A whole stack profile: interned frames and weighted stacks.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct StackProfile {
    pub source: ProfileSource,
    /// Every distinct frame once.
    pub frames: Vec<Frame>,
    /// Distinct stacks (by process name, frames and state), heaviest first.
    pub stacks: Vec<Stack>,
}

impl StackProfile {
    /// Sum of on-CPU samples.
    pub(crate) fn on_cpu_samples(&self) -> u64 {
        self.stacks
            .iter()
            .filter(|s| s.state == StackState::OnCpu)
            .map(|s| s.count)
            .fold(0u64, u64::saturating_add)
    }
    /// Sum of weights (ns) of stacks in `state`.
    pub fn weight_ns(&self, state: StackState) -> u64 {
        self.stacks
            .iter()
            .filter(|s| s.state == state)
            .map(|s| s.weight_ns)
            .fold(0u64, u64::saturating_add)
    }
    /// Sum of all weights (ns).
    pub(crate) fn total_weight_ns(&self) -> u64 {
        self.stacks
            .iter()
            .map(|s| s.weight_ns)
            .fold(0u64, u64::saturating_add)
    }
    /// Whether any stack is off CPU.
    pub(crate) fn has_off_cpu(&self) -> bool {
        self.stacks.iter().any(|s| s.state != StackState::OnCpu)
    }
    /// The frame a stack index refers to.
    pub fn frame(&self, i: u32) -> &Frame {
        &self.frames[i as usize]
    }

    /// Check indices and weights before anything is drawn from the profile.
    pub fn validate(&self) -> Result<()> {
        let n = self.frames.len();
        for (k, s) in self.stacks.iter().enumerate() {
            if let Some(bad) = s.frames.iter().find(|&&f| f as usize >= n) {
                bail!(
                    "profile stack {} refers to frame {bad} but the profile has {n} frame(s)",
                    k + 1
                );
            }
        }
        // Every sum drawn from a profile (totals, a frame's inclusive weight, a flame graph's
        // widths) is at most the sum of all stacks; refuse a profile where that overflows.
        let (mut weight, mut count) = (0u64, 0u64);
        for s in &self.stacks {
            weight = weight.checked_add(s.weight_ns).ok_or_else(|| {
                anyhow::anyhow!("profile weights add up to more than 2^64 ns (about 584 years)")
            })?;
            count = count
                .checked_add(s.count)
                .ok_or_else(|| anyhow::anyhow!("profile sample counts add up to more than 2^64"))?;
        }
        if let Some(f) = self.source.frequency_hz {
            if !f.is_finite() || f <= 0.0 {
                bail!("profile frequency is {f} Hz (must be positive)");
            }
        }
        if let Some(d) = self.source.duration_s {
            if !d.is_finite() || d < 0.0 {
                bail!("profile duration is {d} s (must be a non-negative number)");
            }
        }
        Ok(())
    }
}

/// Builds a [`StackProfile`]: interns frames and merges equal stacks.
#[derive(Default)]
pub struct ProfileBuilder {
    frames: Vec<Frame>,
    frame_ids: HashMap<Frame, u32>,
    stacks: HashMap<StackKey, (u64, u64)>,
}

/// What tells two stacks apart: process name, frames, state, wait event, idleness.
type StackKey = (String, Vec<u32>, StackState, Option<String>, bool);

impl ProfileBuilder {
    /// An empty builder.
    pub(crate) fn new() -> ProfileBuilder {
        ProfileBuilder::default()
    }
    /// The index of `frame`, adding it when new.
    pub(crate) fn intern(&mut self, frame: Frame) -> u32 {
        if let Some(&i) = self.frame_ids.get(&frame) {
            return i;
        }
        let i = self.frames.len() as u32;
        self.frames.push(frame.clone());
        self.frame_ids.insert(frame, i);
        i
    }
    /// The index of a frame given by parts.
    pub(crate) fn frame(&mut self, name: &str, kind: FrameKind, module: &str) -> u32 {
        self.intern(Frame {
            name: name.to_string(),
            kind,
            module: module.to_string(),
        })
    }
    /// Add `count` occurrences weighing `weight_ns` to the stack `frames` (root first).
    pub(crate) fn add(
        &mut self,
        comm: &str,
        frames: Vec<u32>,
        state: StackState,
        count: u64,
        weight_ns: u64,
    ) {
        self.add_tagged(comm, frames, state, None, false, count, weight_ns);
    }
    /// [`ProfileBuilder::add`] with a wait event and the stack's idleness.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_tagged(
        &mut self,
        comm: &str,
        frames: Vec<u32>,
        state: StackState,
        wait_event: Option<String>,
        idle: bool,
        count: u64,
        weight_ns: u64,
    ) {
        let e = self
            .stacks
            .entry((comm.to_string(), frames, state, wait_event, idle))
            .or_insert((0, 0));
        e.0 = e.0.saturating_add(count);
        e.1 = e.1.saturating_add(weight_ns);
    }
    /// Whether nothing was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }
    /// Add every stack of another profile.
    pub(crate) fn merge(&mut self, p: &StackProfile) {
        let map: Vec<u32> = p.frames.iter().map(|f| self.intern(f.clone())).collect();
        for s in &p.stacks {
            let frames = s.frames.iter().map(|&f| map[f as usize]).collect();
            self.add_tagged(
                &s.comm,
                frames,
                s.state,
                s.wait_event.clone(),
                s.idle,
                s.count,
                s.weight_ns,
            );
        }
    }
    /// The profile, stacks heaviest first (ties in a stable order).
    pub(crate) fn finish(self, source: ProfileSource) -> StackProfile {
        let mut stacks: Vec<Stack> = self
            .stacks
            .into_iter()
            .map(
                |((comm, frames, state, wait_event, idle), (count, weight_ns))| Stack {
                    comm,
                    frames,
                    state,
                    count,
                    weight_ns,
                    wait_event,
                    idle,
                },
            )
            .collect();
        stacks.sort_by(|a, b| {
            b.weight_ns
                .cmp(&a.weight_ns)
                .then_with(|| a.state.cmp(&b.state))
                .then_with(|| a.comm.cmp(&b.comm))
                .then_with(|| a.frames.cmp(&b.frames))
                .then_with(|| a.wait_event.cmp(&b.wait_event))
                .then_with(|| a.idle.cmp(&b.idle))
        });
        StackProfile {
            source,
            frames: self.frames,
            stacks,
        }
    }
}
