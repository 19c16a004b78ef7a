//! `iolens profile`: on- and off-CPU stacks of running processes, as a flame graph, folded
//! stacks and results.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{finish, Context};
use crate::output::{Holds, Plan};
use crate::profile::{profile, ProfileOptions};
use crate::render::{flame, folded, ColorChoice, TermStyle};

/// Arguments of `iolens profile`.
#[derive(Args, Debug, Clone)]
pub struct ProfileArgs {
    /// Process ids to profile (all their threads).
    #[arg(long, num_args = 1.., required_unless_present = "comm", conflicts_with = "comm")]
    pub pid: Vec<u32>,
    /// Profile every process with this name (the kernel's 15-byte command name; the
    /// process's, not a thread's). A name no running process has is an error, unless --wait.
    #[arg(long)]
    pub comm: Option<String>,
    /// With --comm: accept a name no process has yet, and profile it once one starts.
    #[arg(long, requires = "comm")]
    pub wait: bool,
    /// How long to sample; Ctrl-C ends earlier and keeps what was sampled.
    #[arg(long, default_value = "10s", value_parser = crate::commands::values::std_duration)]
    pub duration: std::time::Duration,
    /// Samples per second of CPU time of each running thread (software clock; 99 avoids
    /// beating with 100 Hz timers).
    #[arg(long, default_value_t = 99)]
    pub frequency: u32,
    /// Also record where threads block (off CPU), weighted by how long, split into I/O wait,
    /// other sleep and waiting for a CPU.
    #[arg(long)]
    pub off_cpu: bool,
    /// Keep idle stacks (PostgreSQL's Client:ClientRead outside a transaction and Activity:*
    /// waits, event loops asleep in epoll_wait, poll or select) in the profile and the flame
    /// graph; by default they are left out and their total is shown apart. Never counted in
    /// the verdict.
    #[arg(long)]
    pub keep_idle: bool,
    /// Write the interactive flame graph (SVG) here.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write the folded stacks (Brendan Gregg's format) here (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write the results document (JSON) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Do not draw progress.
    #[arg(long)]
    pub(crate) no_progress: bool,
}

impl ProfileArgs {
    /// The domain options these arguments describe.
    pub(crate) fn options(&self, cx: &Context) -> ProfileOptions {
        ProfileOptions {
            pids: self.pid.clone(),
            comm: self.comm.clone(),
            duration: self.duration,
            frequency_hz: self.frequency,
            off_cpu: self.off_cpu,
            progress: cx.progress(self.no_progress),
            keep_idle: self.keep_idle,
            wait: self.wait,
        }
    }
}

/// `iolens profile`.
pub(crate) fn main(a: &ProfileArgs, cx: &Context) -> Result<ExitCode> {
    crate::interrupt::set_writes_results(a.json.is_some());
    if a.folded.as_deref().is_some_and(|p| p.as_os_str() == "-")
        && a.json.as_deref().is_some_and(|p| p.as_os_str() == "-")
    {
        anyhow::bail!("only one of --folded and --json can write to standard output");
    }
    // Every output is checked, and the results' space reserved, before sampling: a bad path
    // must not lose the profile.
    let mut files = Plan::new();
    let json = super::results_output(&mut files, a.json.as_deref(), PROFILE_RESERVE)?;
    let svg = a
        .output
        .as_deref()
        .map(|p| files.output("-o", p, Holds::Other, 0))
        .transpose()?;
    let folded_out = a
        .folded
        .as_deref()
        .map(|p| files.output("--folded", p, Holds::Other, 0))
        .transpose()?;
    let opts = a.options(cx);
    opts.validate()?;
    if folded_out.as_ref().is_some_and(|o| o.is_stdout()) {
        crate::out::reserve_stdout();
    }
    let res = super::complete(profile(&opts, cx.cmdline.clone())?);
    for w in &res.warnings {
        crate::out::warn(w);
    }
    let prof = res
        .profile
        .as_ref()
        .expect("profile producer writes a profile");
    let style = TermStyle::resolve(ColorChoice::Auto, None);
    let an = crate::analysis::of(&res);
    // The verdict first, from the analysis `watch` uses.
    if let Some(w) = &an.watch {
        for v in &w.verdicts {
            crate::outln!("Verdict: {}", v.message);
        }
    }
    crate::out!(
        "{}",
        crate::render::stacks::text(&res, an.stack_profile.as_ref(), &style, 10)
    );
    // The results first: the flame graph and folded stacks are drawn from them.
    let code = finish(&res, json)?;
    if let Some(out) = svg {
        let p = out.path().to_path_buf();
        out.write_bytes(flame::flame_svg(prof, &flame::title(&res), true).as_bytes())?;
        crate::outln!("Flame graph written to {}", p.display());
    }
    if let Some(out) = folded_out {
        let stdout = out.is_stdout();
        let p = out.path().to_path_buf();
        out.write_bytes(folded::folded(prof).as_bytes())?;
        if !stdout {
            crate::outln!("Folded stacks written to {}", p.display());
        }
    }
    Ok(code)
}

/// Space reserved for a profile's results document (its stacks are most of it).
const PROFILE_RESERVE: u64 = 1 << 20;
