//! A finished watch turned into results: the runs (syscalls, each device, CPU, PostgreSQL's
//! wait events) in a fixed order, what was lost in the kernel, and the time budget.

use super::*;

/// How a watch ended, and what its end left to say.
pub(super) struct Ending {
    /// "interrupted", "stopped", "duration" or "exited".
    pub(super) reason: &'static str,
    /// What the end left out (from [`Recording::drain_after_end`]).
    pub(super) warnings: Vec<String>,
    /// Ring records that did not parse.
    pub(super) parse_errors: u64,
    /// Events the kernel lost, by cause (the `lost` map, summed over CPUs).
    pub(super) lost_counts: Vec<u64>,
    /// The query-id sampler's notes (with a DSN).
    pub(super) query_notes: Option<Vec<String>>,
}

impl Recording {
    /// The results of the watch recorded (`self`, its end set), ended as `ending` says.
    pub(super) fn into_results(
        mut self,
        opts: &WatchOptions,
        command_line: Vec<String>,
        started_wall: std::time::SystemTime,
        tracepoints: Vec<String>,
        cgroups: Vec<crate::results::WatchCgroup>,
        ending: Ending,
    ) -> Result<Results> {
        let filters = &opts.filters;
        let (start_ns, end_ns, interval_ns) = (self.start_ns, self.end_ns, self.interval_ns);
        let total_s = (end_ns - start_ns) as f64 / 1e9;
        let last = (end_ns - start_ns).div_ceil(interval_ns).max(1) - 1;
        let n = self.grid.slot(last) + 1;
        self.span(n - 1);
        // Every interval is finished now: rolled up as the watch would have, however far its
        // loop lagged, so that the results keep at most `--keep-intervals`.
        self.close_before(n);
        self.roll_up(n);
        if let Some(e) = self.failed.take() {
            return Err(e.context("cannot record the watch's histograms"));
        }
        let n = self.grid.slot(last) + 1;
        self.spans.truncate(n);
        if let Some(last) = self.spans.last_mut() {
            last.duration_s = (total_s - last.start_s).max(1e-6);
        }
        let bounds: Vec<(f64, f64)> = self
            .spans
            .iter()
            .map(|s| (s.start_s, s.duration_s))
            .collect();

        let (lost, unfollowed) = lost_by_cause(&ending.lost_counts, ending.parse_errors);
        let lost: BTreeMap<String, u64> = lost.into_iter().collect();
        let unfollowed: BTreeMap<String, f64> = unfollowed.into_iter().collect();

        let mut res = Results::new(Kind::Watch, command_line);
        res.environment = crate::sys::environment();
        let started = humantime::format_rfc3339_millis(started_wall).to_string();
        let spec = serde_json::json!({
            "source": "watch",
            "pids": filters.pids,
            "comms": filters.comms,
            "devices": filters.devices.iter().map(|d| d.name.clone()).collect::<Vec<_>>(),
            "interval_s": interval_ns as f64 / 1e9,
        });
        let mut runs: BTreeMap<String, Vec<OpResult>> = BTreeMap::new();
        let mut order: Vec<String> = Vec::new();
        // Syscall ops in the order of SYSCALLS, then devices, then CPU.
        let mut accs: Vec<(String, &'static str, OpAcc)> = std::mem::take(&mut self.ops)
            .into_iter()
            .flat_map(|(run, ops)| ops.into_iter().map(move |(op, acc)| (run.clone(), op, acc)))
            .collect();
        let rank = |k: (&String, &'static str)| -> (u8, String, usize) {
            if k.0.is_empty() {
                let i = SYSCALLS.iter().position(|s| s.0 == k.1).unwrap_or(99);
                (0, String::new(), i)
            } else if k.0 == "cpu" {
                let i = [CPU_RUNQ, CPU_ON, CPU_OFF]
                    .iter()
                    .position(|s| *s == k.1)
                    .unwrap_or(9);
                (2, String::new(), i)
            } else if k.0 == PG_RUN {
                (3, String::new(), 0)
            } else {
                (1, k.0.to_string(), 0)
            }
        };
        accs.sort_by_key(|(run, op, _)| (rank((run, op)), *op));
        for (key_run, op, mut acc) in accs {
            let key = (&key_run, op);
            let run = if key.0.is_empty() {
                "syscalls".to_string()
            } else if key.0 == "cpu" {
                "cpu".to_string()
            } else if key.0 == PG_RUN {
                PG_WAIT_RUN.to_string()
            } else {
                format!("block {}", key.0)
            };
            if !runs.contains_key(&run) {
                order.push(run.clone());
            }
            runs.entry(run).or_default().push(OpResult::of_parts(
                op,
                acc.parts(0, bounds.len())?,
                &bounds,
            )?);
        }
        // A signal is the planned end of a watch without a duration (Ctrl-C, or SIGTERM from
        // systemd or Kubernetes): it ended as asked. Only one that a signal stopped before its
        // `--duration` was interrupted (`merge` then says so, and exits as for an interrupted run).
        let interrupted = ending.reason == "interrupted" && opts.duration.is_some();
        let mut warnings = ending.warnings;
        if !lost.is_empty() {
            warnings.push(format!(
                "events were lost in the kernel: {}",
                lost.iter()
                    .map(|(k, v)| format!("{v} ({k})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !runs.contains_key("syscalls") {
            warnings.push(
                "no traced I/O syscall of a watched process completed while watching".to_string(),
            );
        }
        for name in order {
            let ops = runs.remove(&name).unwrap_or_default();
            res.runs.push(RunResult {
                name: name.clone(),
                phase: "watch".into(),
                spec: crate::results::Spec::of(&spec)?,
                started: started.clone(),
                duration_s: total_s,
                interval_s: interval_ns as f64 / 1e9,
                ops,
                interrupted,
                counters: lost
                    .iter()
                    .map(|(k, v)| (format!("lost: {k}"), *v as f64))
                    .chain(
                        unfollowed
                            .iter()
                            .filter(|_| name.starts_with("block "))
                            .map(|(k, v)| (k.clone(), *v)),
                    )
                    .collect(),
                ..Default::default()
            });
        }
        res.warnings = warnings;
        // The files named from the catalogs (each database's), and the query ids sampled.
        let pg = &self.pg;
        let mut relations = self
            .files
            .finish(opts.catalog.as_ref(), &|pid| pg.role_of(pid));
        if let (Some(c), Some(notes)) = (&opts.catalog, ending.query_notes) {
            let (queries, notes) = self.queries.finish(c, notes);
            let r = relations.get_or_insert_with(Default::default);
            r.queries = queries;
            r.query_notes = notes;
        }
        let budget = WatchBudget {
            intervals: self.spans.clone(),
            processes: self
                .processes
                .into_values()
                .chain(self.folded.processes.into_values())
                .collect(),
            tracepoints,
            lost,
            pids: filters.pids.clone(),
            comms: filters.comms.clone(),
            devices: filters.devices.iter().map(|d| d.name.clone()).collect(),
            threads: self
                .thread_time
                .into_values()
                .chain(self.folded.threads.into_values())
                .collect(),
            pg: self.pg.finish(),
            cgroups,
            relations,
            disks: {
                let mut names: Vec<&str> = self.devices.values().map(|(name, _)| &**name).collect();
                names.sort_unstable();
                names
                    .into_iter()
                    .filter_map(crate::sys::disk_queue)
                    .collect()
            },
        };
        res.watch = Some(budget);
        Ok(res)
    }
}
