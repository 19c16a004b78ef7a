//! `iolens watch`: a live process's I/O and CPU, layer by layer (BPF).

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;

use super::{finish, Context};
use crate::render::heatmap::OpSeries;
use crate::render::{terminal, watch_live as watch, ColorChoice, TermStyle};
use crate::watch::{Filters, IntervalView, Layer, WatchOptions};

/// Arguments of `iolens watch`.
#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF. \
    Without --pid or --comm the whole host is watched. With only --pid, the watch ends when \
    every watched process has exited."
)]
pub struct WatchArgs {
    /// Watch this process (repeatable).
    #[arg(long = "pid", value_name = "PID")]
    pub(crate) pids: Vec<u32>,
    /// Watch every process of this name, including ones started later (repeatable), e.g.
    /// `--comm postgres`. The name is the process's (its main thread's, as `ps -e -o comm`
    /// shows it): every thread of the process is watched, whatever its own name. A name no
    /// running process has is an error, unless --wait.
    #[arg(long = "comm", value_name = "NAME")]
    pub(crate) comms: Vec<String>,
    /// With --comm: accept a name no process has yet, and watch for one to start.
    #[arg(long)]
    pub(crate) wait: bool,
    /// Record block requests of this disk only (repeatable; `/dev/vda`, `vda`, `254:0`; a
    /// partition means its disk). Default: every disk.
    #[arg(long = "device", value_name = "DEV")]
    pub devices: Vec<String>,
    /// Stop after this long (default: until Ctrl-C, or until the watched pids have exited).
    #[arg(long, value_parser = crate::commands::values::std_duration)]
    pub duration: Option<Duration>,
    /// Interval length of the per-interval histograms and of the live view.
    #[arg(long, default_value = "1s", value_parser = crate::commands::values::std_duration)]
    pub interval: Duration,
    /// Keep about this many intervals, however long the watch runs: the newest half at full
    /// resolution, older ones rolled up into at most the other half, each as long as a
    /// power of two of intervals (counts and sums stay exact). Of the per-process and
    /// per-thread tables, processes and threads that exited are folded into one row per name
    /// once a table holds 512 rows. So memory stays bounded for days. At least 4.
    #[arg(long, value_name = "N", default_value_t = crate::watch::grid::KEEP)]
    pub keep_intervals: usize,
    /// Break the per-process syscall table down by thread.
    #[arg(long)]
    pub threads: bool,
    /// The layer the live heatmap shows first (keys switch it: s, b, c; space or tab: next).
    #[arg(long, value_enum, default_value_t = Layer::Syscall)]
    pub layer: Layer,
    /// No live view (it is drawn only when standard output is a terminal).
    #[arg(long)]
    pub(crate) no_progress: bool,
    /// Name the files PostgreSQL processes read and write as relations (schema.table, index)
    /// from this server's catalogs (each database's, connected to in turn), and sample the
    /// backends' query ids (`pg_stat_activity`, every 100 ms; texts from pg_stat_statements).
    /// A libpq connection string or URI, e.g. `host=/var/run/postgresql dbname=app`.
    #[arg(long, value_name = "DSN")]
    pub dsn: Option<String>,
    /// Write the results document (JSON) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics while watching (HOST:PORT, or :PORT for
    /// every interface; no default port: node_exporter has 9100, postgres_exporter 9187,
    /// ebpf_exporter 9435). Cumulative classic latency histograms per layer (syscall, host
    /// queue, device, CPU run queue, PostgreSQL wait event), 16 buckets an octave from 256 ns
    /// to 68.7 s (each 4.43 % wide), updated every --interval; counters, the time split, the
    /// verdict, lost events, iolens' own CPU. Memory stays fixed: label values past their limit
    /// (comm 16, role 16, device 16, wait event 48) are `other`; pids are never labels.
    #[arg(long, value_name = "ADDR")]
    pub prometheus: Option<String>,
    /// Record every positioned read and write syscall of the watched processes (pread64,
    /// pwrite64, preadv/pwritev and their v2 forms) and every io_uring read and write they
    /// submit (time, latency, process, thread, PostgreSQL role, file, offset, bytes) to this
    /// file, which `iolens replay` replays on other storage. Written at the end (kept in memory
    /// meanwhile: about 50 bytes an I/O).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
}

/// The live view's state: the interval lines so far and the layer shown (drawn by
/// [`watch::live_frame`]). Keys switch the layer (`s` syscalls, `b` block device, `c` CPU run queue, space or tab: the next).
struct Live {
    style: TermStyle,
    lines: Vec<String>,
    draw: bool,
    what: String,
    layer: Layer,
    keys: Option<Keys>,
}

impl Live {
    fn interval(&mut self, v: &mut IntervalView) {
        if !self.draw {
            return;
        }
        if let Some(keys) = &self.keys {
            while let Ok(k) = keys.rx.try_recv() {
                self.layer = match k {
                    b's' | b'S' => Layer::Syscall,
                    b'b' | b'B' => Layer::Block,
                    b'c' | b'C' => Layer::Cpu,
                    b' ' | b'\t' => match self.layer {
                        Layer::Syscall => Layer::Block,
                        Layer::Block => Layer::Cpu,
                        Layer::Cpu => Layer::Syscall,
                    },
                    _ => self.layer,
                };
            }
        }
        let shares = crate::analysis::watch::live_shares(v.span(), &v.cgroups());
        let Ok(hist) = v.layer_hist(self.layer) else {
            return;
        };
        self.lines.push(watch::interval_line(&shares, &hist));
        let size = terminal_size::terminal_size()
            .map(|(w, h)| (w.0 as usize, h.0 as usize))
            .unwrap_or((80, 40));
        // As many intervals as the terminal has columns.
        let series = v
            .series(self.layer, size.0)
            .and_then(|r| OpSeries::decode(&r))
            .ok();
        let frame = watch::live_frame(
            &watch::LiveFrame {
                what: &self.what,
                layer: self.layer.name(),
                keys: self.keys.is_some(),
                series: series.as_ref(),
                lines: &self.lines,
                size,
            },
            &self.style,
        );
        crate::out!("{frame}");
    }
}

/// Key presses on the terminal, one byte each, while the live view runs: the terminal is put in
/// non-canonical mode without echo (signals stay on, so Ctrl-C still ends the watch) and set
/// back as it was when this is dropped.
struct Keys {
    rx: std::sync::mpsc::Receiver<u8>,
    saved: libc::termios,
}

impl Keys {
    /// `None` when standard input is not a terminal.
    fn start() -> Option<Keys> {
        use std::io::Read as _;
        if !std::io::stdin().is_terminal() {
            return None;
        }
        // SAFETY: termios is plain data; tcgetattr fills it for a terminal file descriptor.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut saved) } != 0 {
            return None;
        }
        let mut raw = saved;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: setting attributes read from the same descriptor.
        if unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &raw) } != 0 {
            return None;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        // The reader blocks on standard input; it ends with the process.
        std::thread::spawn(move || {
            let mut b = [0u8; 1];
            let mut stdin = std::io::stdin();
            while let Ok(1) = stdin.read(&mut b) {
                if tx.send(b[0]).is_err() {
                    break;
                }
            }
        });
        Some(Keys { rx, saved })
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        // SAFETY: restoring the attributes saved in start().
        unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.saved) };
    }
}

/// The exposition of the watch so far with the last interval's wall-time shares and verdict
/// (the analysis', as the live view words them).
fn with_shares(
    mut e: crate::results::exposition::Exposition,
    v: &IntervalView,
) -> crate::results::exposition::Exposition {
    use crate::results::exposition::{MetricKind, SampleValue};
    let s = crate::analysis::watch::live_shares(v.span(), &v.cgroups());
    let f = e.family(
        "iolens_wall_share",
        "Shares of the watched threads' wall time in the last interval: on CPU, waiting for a \
         CPU, in I/O (not waiting for a CPU), off CPU outside I/O.",
        MetricKind::Gauge,
    );
    for (part, x) in [
        ("cpu", s.wall_cpu),
        ("cpu_wait", s.wall_cpu_wait),
        ("io", s.wall_io),
        ("off_cpu", s.wall_off_cpu),
    ] {
        f.push(&[("part", part)], SampleValue::Number(x));
    }
    if let Some(k) = s.verdict {
        e.family(
            "iolens_verdict",
            "The verdict on the last interval (1 while it holds), labelled by its kind.",
            MetricKind::Gauge,
        )
        .push(
            &[("scope", "interval"), ("verdict", k.as_str())],
            SampleValue::Number(1.0),
        );
    }
    e
}

fn describe(f: &Filters) -> String {
    let mut parts = Vec::new();
    if !f.pids.is_empty() {
        parts.push(format!(
            "pid {}",
            f.pids
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !f.comms.is_empty() {
        parts.push(format!("processes named {}", f.comms.join(", ")));
    }
    if parts.is_empty() {
        parts.push("every process".into());
    }
    let devices = if f.devices.is_empty() {
        "every disk".to_string()
    } else {
        f.devices
            .iter()
            .map(|d| d.name.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("{}; block layer of {devices}", parts.join(" and "))
}

/// `iolens watch`.
pub(crate) fn main(a: &WatchArgs, cx: &Context) -> Result<ExitCode> {
    let mut plan = crate::output::Plan::new();
    let json = super::results_output(
        &mut plan,
        a.json.as_deref(),
        crate::output::results_estimate(crate::output::intervals(
            a.duration.map_or(0.0, |d| d.as_secs_f64()),
            a.interval.as_secs_f64(),
        )),
    )?;
    let record = a
        .record
        .as_deref()
        .map(|p| plan.output("--record", p, crate::output::Holds::Other, 1 << 20))
        .transpose()?;
    // The first Ctrl-C says "writing results" only where a results file will be written.
    crate::interrupt::set_writes_results(json.is_some() || record.is_some());
    if a.interval < Duration::from_millis(10) {
        bail!("--interval must be at least 10ms");
    }
    if a.duration.is_some_and(|d| d.is_zero()) {
        bail!("--duration must be longer than zero");
    }
    if a.keep_intervals < 4 {
        bail!("--keep-intervals must be at least 4");
    }
    let filters = Filters::new(&a.pids, &a.comms, &a.devices, a.wait)?;
    let server = a
        .prometheus
        .as_deref()
        .map(super::metrics::MetricsServer::bind)
        .transpose()?;
    let draw = !cx.quiet && !a.no_progress && std::io::stdout().is_terminal();
    let opts = WatchOptions {
        filters,
        duration: a.duration,
        interval: a.interval,
        threads: a.threads,
        stop: None,
        catalog: a.dsn.as_deref().map(crate::db::postgres::catalog),
        metrics: server.is_some(),
        record: record.as_ref().map(|_| Default::default()),
        keep_intervals: a.keep_intervals,
        live: draw,
    };
    let style = TermStyle::resolve(ColorChoice::Auto, None);
    let what = describe(&opts.filters);
    let mut live = Live {
        style,
        lines: Vec::new(),
        draw,
        what: what.clone(),
        layer: a.layer,
        keys: if draw { Keys::start() } else { None },
    };
    let quiet = cx.quiet;
    let results = crate::watch::watch(
        &opts,
        crate::db::redact_args(&cx.cmdline),
        &mut |tps| {
            if !quiet {
                crate::out::note(&format!(
                    "watching {what} ({} tracepoints attached)",
                    tps.len()
                ));
            }
            if let Some(s) = &server {
                // Said even with -q: where to scrape (a port 0 is chosen by the system).
                crate::out::note(&format!("serving metrics at http://{}/metrics", s.addr));
            }
        },
        &mut |v| {
            live.interval(v);
            if let Some(s) = &server {
                if let Some(e) = v.metrics() {
                    s.publish(with_shares(e, v));
                }
            }
        },
    );
    // The terminal as it was before the summary is printed (or the error reported).
    drop(live.keys.take());
    let results = super::complete(results?);
    if let (Some(out), Some(sink)) = (record, &opts.record) {
        let mut log = sink
            .lock()
            .ok()
            .and_then(|mut s| s.take())
            .unwrap_or_default();
        out.write(&mut |w| log.write_to(w))?;
        if !quiet {
            crate::out::note(&format!(
                "recorded {} I/Os to {}",
                log.len(),
                a.record
                    .as_deref()
                    .unwrap_or(std::path::Path::new("-"))
                    .display()
            ));
        }
    }
    results.validate()?;
    let an = crate::analysis::of(&results);
    let mut text = String::new();
    text.push_str(&terminal::summary_table(&results).render(&style));
    text.push_str(&crate::render::analysis::text(&results, &an, &style));
    for w in &results.warnings {
        crate::out::warn(w);
    }
    crate::out!("{text}");
    finish(&results, json)
}
