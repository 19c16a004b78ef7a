//! `iolens report` and `iolens compare -o`: one self-contained HTML file. Charts are inline SVG
//! built by [`super::svg`]; styles and the small hover script are inline; nothing is fetched
//! from anywhere, so the file opens offline and prints legibly.
//!
//! Layout: summary first (headline figures, verdicts, per-op table), then the calibration
//! curve, then per run: host cost (CPU µs per I/O, run-queue delay, application vs device
//! latency), latency histograms with their modes, latency and IOPS over time, and frequency
//! and intensity heatmaps per op; then environment, the complete workload specs and warnings.

use std::fmt::Write as _;

use anyhow::Result;

use super::findings::{knee_of, mode_bands};
use super::heatmap::{log_bins, HeatKind, Heatmap, LoadedColumns, OpSeries};
use super::kind_name;
use super::svg::{self, colour, esc, Fmt, HistSeries, LineChart, Mark, Series};
use super::table::{calibration_curve, Table};
use super::terminal::{host_lines, spec_line, summary_table};

use crate::results::analysis::{Analysis, RunAnalysis};
use crate::results::{Results, RunResult};
use crate::units::{fmt_bytes, fmt_ns, fmt_rate, sig3};

const CSS: &str = r#"
:root{--fg:#1b1f24;--muted:#5b6570;--line:#d8dde3;--bg:#fff;--accent:#1f77b4}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;max-width:960px;padding:16px 20px 60px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.meta,.note{color:var(--muted)}
nav{margin:8px 0 0;font-size:13px}nav a{margin-right:12px;color:var(--accent)}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 12px;min-width:140px}
.card .v{font-size:20px;font-weight:600}.card .k{font-size:12px;color:var(--muted)}
table{border-collapse:collapse;margin:8px 0;font-size:13px;font-variant-numeric:tabular-nums;display:block;max-width:100%;overflow-x:auto}
th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:right;white-space:nowrap}
td.t{white-space:normal;overflow-wrap:anywhere;min-width:6em}
th:first-child,td:first-child{text-align:left}
#environment td{white-space:normal;overflow-wrap:anywhere;text-align:left}
.wide{overflow-x:auto;max-width:100%}
th{background:#f3f5f7;white-space:normal;vertical-align:bottom}
pre{background:#f6f8fa;border:1px solid var(--line);padding:8px;overflow:auto;font-size:12px}
.verdict{border-left:4px solid var(--accent);padding:4px 10px;margin:6px 0;background:#f6f9fc}
.verdict.warning{border-color:#e6a100;background:#fffaf0}.verdict.critical{border-color:#d62728;background:#fff5f5}
.warn{color:#8a5a00}
svg.chart,svg.flame{display:block;max-width:100%;height:auto;margin:6px 0 14px}
svg .grid{stroke:#eceff2}svg .axis{stroke:#333}svg .tick{font-size:11px;fill:#333}
svg .alabel{font-size:12px;fill:#333}svg .ctitle{font-size:13px;font-weight:600;fill:#111}
svg .ref{stroke:#d62728;stroke-dasharray:6 4}svg .reflabel{font-size:11px;fill:#d62728}
svg .mark{fill:none;stroke:#111;stroke-width:2}svg .marklabel{font-size:12px;font-weight:600}
svg .band{fill:#ffbf00;fill-opacity:.15;stroke:#e6a100;stroke-opacity:.6}svg .bandlabel{font-size:11px;fill:#8a5a00}
svg .heatbg{fill:#fafafa}
details>summary{cursor:pointer;font-weight:600;margin:10px 0}
#tip{position:absolute;background:#111;color:#fff;font-size:12px;padding:3px 6px;border-radius:3px;pointer-events:none;white-space:nowrap}
@media print{nav,#tip{display:none}body{max-width:none;padding:0}svg.chart,table{break-inside:avoid}h2{break-after:avoid}details{display:block}}
"#;

/// Inline script: pointer read-out for every chart (and cell values for heatmaps).
const JS: &str = r#"
(function(){
var tip=document.getElementById('tip');
function sc(a){var s=a.split(',');return{lg:s[0]==='log',d0:+s[1],d1:+s[2],r0:+s[3],r1:+s[4]};}
function inv(s,p){var t=(p-s.r0)/(s.r1-s.r0);return s.lg?Math.exp(Math.log(s.d0)+t*(Math.log(s.d1)-Math.log(s.d0))):s.d0+t*(s.d1-s.d0);}
function within(s,p){return p>=Math.min(s.r0,s.r1)&&p<=Math.max(s.r0,s.r1);}
function g3(v){var a=Math.abs(v);return a>=100?v.toFixed(0):a>=10?v.toFixed(1):v.toFixed(2);}
function fns(v){return v<1e3?g3(v)+' ns':v<1e6?g3(v/1e3)+' \u00b5s':v<1e9?g3(v/1e6)+' ms':g3(v/1e9)+' s';}
function fmt(f,v){if(f==='ns')return fns(v);if(f==='s')return g3(v)+' s';if(f==='pct')return g3(v)+'%';return v>=1e6?g3(v/1e6)+'M':v>=1e3?g3(v/1e3)+'k':g3(v);}
function find(a,v){for(var i=0;i+1<a.length;i++){if(v>=a[i]&&v<a[i+1])return i;}return -1;}
var charts=document.querySelectorAll('svg.chart');
for(var k=0;k<charts.length;k++){(function(svg){
 var sx=sc(svg.dataset.sx),sy=sc(svg.dataset.sy),data=null,d=svg.querySelector('desc.heatdata');
 if(d){data=JSON.parse(d.textContent);}
 svg.addEventListener('mousemove',function(e){
  var m=svg.getScreenCTM();if(!m){return;}
  var pt=svg.createSVGPoint();pt.x=e.clientX;pt.y=e.clientY;var p=pt.matrixTransform(m.inverse());
  if(!within(sx,p.x)||!within(sy,p.y)){tip.hidden=true;return;}
  var x=inv(sx,p.x),y=inv(sy,p.y),text=fmt(svg.dataset.fx,x)+', '+fmt(svg.dataset.fy,y);
  if(data){var c=find(data.edges,x),r=find(data.rows,y);
   if(c>=0&&r>=0){var v=data.v[r*(data.edges.length-1)+c];
    text=g3(data.edges[c])+'\u2013'+g3(data.edges[c+1])+' s, '+fns(data.rows[r])+'\u2013'+fns(data.rows[r+1])+': '+(data.kind==='f'?v+' ops':fns(v)+' of I/O time');}}
  tip.textContent=text;tip.style.left=(e.pageX+14)+'px';tip.style.top=(e.pageY+14)+'px';tip.hidden=false;});
 svg.addEventListener('mouseleave',function(){tip.hidden=true;});
})(charts[k]);}
})();
"#;

fn card(out: &mut String, key: &str, value: &str) {
    let _ = write!(
        out,
        "<div class=\"card\"><div class=\"v\">{}</div><div class=\"k\">{}</div></div>",
        esc(value),
        esc(key)
    );
}

pub(crate) fn page_start(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head><body>",
        esc(title)
    );
}

pub(crate) fn page_end(out: &mut String) {
    let _ = writeln!(
        out,
        "<div id=\"tip\" hidden></div><script>{JS}</script></body></html>"
    );
}

/// Headline cards of a results document.
fn headline(out: &mut String, r: &Results, an: &Analysis) {
    out.push_str("<div class=\"cards\">");
    if let Some(c) = &r.calibration {
        card(
            out,
            &format!(
                "max IOPS at p{} ≤ {}",
                sig3(c.percentile),
                fmt_ns(c.max_latency_ns as f64)
            ),
            &c.max_iops
                .map(fmt_rate)
                .unwrap_or_else(|| "not reached".into()),
        );
        if let Some((i, _)) = knee_of(an) {
            if let Some(p) = c.curve.get(i) {
                card(
                    out,
                    "knee (queueing starts)",
                    &format!("{} IOPS", fmt_rate(p.iops)),
                );
            }
        }
        if let Some(v) = c.max_mbps {
            card(out, "max MB/s (many streams)", &sig3(v));
        }
        if let Some(v) = c.max_pmbps {
            card(out, "max MB/s (one stream)", &sig3(v));
        }
    } else if let Some(tp) = &r.trace_profile {
        trace_headline(out, &tp.total);
    } else if let Some(run) = r.runs.first() {
        if r.runs.len() == 1 {
            if run.rates_known() {
                card(out, super::rate_name(r), &fmt_rate(run.iops()));
                if run.ops.iter().any(|o| o.bytes > 0) {
                    card(out, "MB/s", &sig3(run.mb_per_s()));
                }
            } else {
                card(out, "IOPS, MB/s", crate::results::UNKNOWN_RATE);
            }
            for op in run.ops.iter().filter(|o| o.count > 0).take(3) {
                card(
                    out,
                    &format!("{} p99 (p99.9)", op.op),
                    &format!(
                        "{} ({})",
                        fmt_ns(op.summary.p99_ns as f64),
                        fmt_ns(op.summary.p999_ns as f64)
                    ),
                );
            }
            if let Some(c) = &run.cpu {
                card(out, "CPU µs per I/O", &sig3(c.us_per_io));
            }
        } else {
            card(out, "series", &r.runs.len().to_string());
            card(
                out,
                "operations",
                &r.runs
                    .iter()
                    .map(|x| x.total_count())
                    .sum::<u64>()
                    .to_string(),
            );
        }
    }
    out.push_str("</div>");
}

/// Headline cards of a trace: its response time R, then what R went to, largest first (the
/// top waits, CPU), as Method R reads a trace; not its events in file order.
fn trace_headline(out: &mut String, p: &crate::results::analysis::Profile) {
    card(
        out,
        "response time R",
        &format!("{} s", sig3(p.response_time_s)),
    );
    for row in p.rows.iter().filter(|x| x.seconds > 0.0).take(3) {
        let mean = row
            .mean_us
            .zip(row.count)
            .map(|(m, n)| format!(", {n} × {}", fmt_ns(m * 1e3)))
            .unwrap_or_default();
        card(
            out,
            &format!(
                "{} ({} % of R{mean})",
                row.component,
                sig3(row.share * 100.0)
            ),
            &format!("{} s", sig3(row.seconds)),
        );
    }
}

/// Latency histogram chart of every op of a run (one chart per op, modes shaded).
fn run_histograms(out: &mut String, run: &RunResult, ra: Option<&RunAnalysis>) -> Result<()> {
    for (i, op) in run.ops.iter().enumerate() {
        if op.count == 0 {
            continue;
        }
        let h = op.hist.decode()?;
        let bins = log_bins(&h, &op.bucket_edges_ns, 4);
        let modes = ra.and_then(|a| a.modes.iter().find(|m| m.op == op.op));
        let bands = modes.map(mode_bands).unwrap_or_default();
        let desc = modes.map(|m| m.description.as_str()).unwrap_or("");
        let series = HistSeries {
            name: op.op.clone(),
            colour: colour(i).into(),
            bins: bins
                .iter()
                .map(|b| (b.low_ns, b.high_ns, b.share))
                .collect(),
        };
        out.push_str(&svg::histogram_chart(
            &format!("{} latency histogram — {} operations", op.op, op.count),
            &[series],
            &bands,
        ));
        if !desc.is_empty() {
            let _ = write!(out, "<p class=\"note\">{}: {}</p>", esc(&op.op), esc(desc));
        }
    }
    Ok(())
}

/// Points of the charts over time per op: one per plot column (~770 px) at most, each the exact
/// merge of its intervals.
pub const TIME_COLUMNS: usize = 770;

/// Latency-over-time and IOPS- (or waits/s-) over-time charts plus heatmaps of run `ri`.
fn run_time_charts(
    out: &mut String,
    run: &RunResult,
    ri: usize,
    loaded: Option<&LoadedColumns>,
    rate: &str,
) -> Result<()> {
    let id = &format!("r{ri}");
    let series =
        OpSeries::decode_all_columns_loaded(&run.ops, TIME_COLUMNS, loaded.map(|l| (l, ri)))?;
    if series.iter().all(|s| s.stats.len() < 2) {
        return Ok(());
    }
    let title = format!("{rate} over time");
    let mut iops = LineChart::new(
        &title,
        "time since start of measurement",
        if rate == "IOPS" {
            "operations per second"
        } else {
            "waits per second"
        },
        Fmt::Seconds,
        Fmt::Rate,
    );
    for (i, s) in series.iter().enumerate() {
        iops.series.push(Series {
            name: s.op.clone(),
            colour: colour(i).into(),
            points: s
                .stats
                .iter()
                .map(|st| (st.start_s + st.duration_s / 2.0, st.iops()))
                .collect(),
            ..Series::default()
        });
    }
    out.push_str(&iops.render());
    for (i, s) in series.iter().enumerate() {
        if run.ops[i].count == 0 {
            continue;
        }
        let mut lat = LineChart::new(
            &format!("{} latency per interval", s.op),
            "time since start of measurement",
            "latency (log scale)",
            Fmt::Seconds,
            Fmt::Latency,
        );
        lat.y_log = true;
        lat.height = 260.0;
        type Pick = fn(&super::heatmap::IntervalStat) -> u64;
        let picks: [(&str, Pick); 3] = [
            ("p50", |s| s.p50_ns),
            ("p99", |s| s.p99_ns),
            ("max", |s| s.max_ns),
        ];
        for (k, (name, f)) in picks.into_iter().enumerate() {
            lat.series.push(Series {
                name: name.into(),
                colour: colour(k).into(),
                points: s
                    .stats
                    .iter()
                    .filter(|st| st.count > 0)
                    .map(|st| (st.start_s + st.duration_s / 2.0, f(st) as f64))
                    .collect(),
                ..Series::default()
            });
        }
        out.push_str(&lat.render());
        // Plot area is ~770 px wide: at most one column per 2 px.
        for kind in [HeatKind::Frequency, HeatKind::Intensity] {
            if let Some(m) = Heatmap::build(s, 385, 2, 48) {
                let hid = format!(
                    "{id}-{i}-{}",
                    if kind == HeatKind::Frequency {
                        "f"
                    } else {
                        "i"
                    }
                );
                let title = format!(
                    "{} heatmap, {}{}",
                    s.op,
                    kind.title(),
                    if m.group * s.per_entry() > 1 {
                        format!(" — {} intervals per column", m.group * s.per_entry())
                    } else {
                        String::new()
                    }
                );
                out.push_str(&svg::heatmap_chart(&title, &m, kind, &hid));
            }
        }
    }
    Ok(())
}

/// Host cost and device view of a run as a table and lines.
fn run_host(out: &mut String, run: &RunResult) {
    let lines = host_lines(run);
    if lines.is_empty() {
        return;
    }
    out.push_str("<h3>Host cost and device view</h3>");
    if let Some(c) = &run.cpu {
        let mut t = Table::new(&["CPU per I/O", "µs"]);
        t.row(vec!["user + system".into(), sig3(c.us_per_io)]);
        t.row(vec!["user".into(), sig3(c.user_us_per_io)]);
        t.row(vec!["system".into(), sig3(c.sys_us_per_io)]);
        t.row(vec![
            "run-queue delay (waiting for a CPU)".into(),
            if c.runq_measured() {
                sig3(c.runq_us_per_io)
            } else {
                "not measured".into()
            },
        ]);
        out.push_str(&t.html());
    }
    if let Some(d) = &run.device {
        let mut t = Table::new(&[
            "op",
            "application mean",
            "application p50",
            "device await",
            "difference (host queue)",
        ]);
        for (name, dev_us) in [("read", d.read_await_us), ("write", d.write_await_us)] {
            if let Some(op) = run.op(name).filter(|o| o.count > 0) {
                t.row(vec![
                    name.into(),
                    fmt_ns(op.summary.mean_ns),
                    fmt_ns(op.summary.p50_ns as f64),
                    fmt_ns(dev_us * 1e3),
                    fmt_ns(op.summary.mean_ns - dev_us * 1e3),
                ]);
            }
        }
        if !t.rows.is_empty() {
            out.push_str(&t.html());
        }
    }
    for l in lines {
        let _ = write!(out, "<p>{}</p>", esc(&l));
    }
}

/// The calibration section: curve with target and knee, host-cost curves, curve table.
fn calibration_section(out: &mut String, r: &Results, an: &Analysis) {
    let Some(c) = &r.calibration else { return };
    out.push_str("<section id=\"calibration\"><h2>Calibration: load curve</h2>");
    let mut ch = LineChart::new(
        "Latency vs IOPS (single-block random reads)",
        "IOPS",
        "latency (log scale)",
        Fmt::Rate,
        Fmt::Latency,
    );
    ch.y_log = true;
    type Pick = fn(&crate::results::CurvePoint) -> f64;
    let picks: [(&str, Pick); 3] = [
        ("p50", |p| p.p50_ns as f64),
        ("p99", |p| p.p99_ns as f64),
        ("p99.9", |p| p.p999_ns as f64),
    ];
    for (k, (name, f)) in picks.into_iter().enumerate() {
        ch.series.push(Series {
            name: name.into(),
            colour: colour(k).into(),
            points: c.curve.iter().map(|p| (p.iops, f(p))).collect(),
            dots: true,
            dashed: false,
        });
    }
    ch.hlines.push((
        c.max_latency_ns as f64,
        format!(
            "target p{} ≤ {}",
            sig3(c.percentile),
            fmt_ns(c.max_latency_ns as f64)
        ),
    ));
    let knee = knee_of(an);
    if let Some(p) = c.max_iops_point.and_then(|i| c.curve.get(i)) {
        let same = knee.as_ref().is_some_and(|k| Some(k.0) == c.max_iops_point);
        ch.marks.push(Mark {
            x: p.iops,
            y: p.p99_ns as f64,
            label: format!(
                "max at target{}: {} IOPS",
                if same { " = knee" } else { "" },
                fmt_rate(p.iops)
            ),
        });
    }
    if let Some((i, label)) = knee.filter(|k| Some(k.0) != c.max_iops_point) {
        if let Some(p) = c.curve.get(i) {
            ch.marks.push(Mark {
                x: p.iops,
                y: p.p99_ns as f64,
                label,
            });
        }
    }
    out.push_str(&ch.render());
    let mut cost = LineChart::new(
        "Host cost vs IOPS",
        "IOPS",
        "µs per I/O",
        Fmt::Rate,
        Fmt::Rate,
    );
    cost.height = 260.0;
    type PickC = fn(&crate::results::CurvePoint) -> f64;
    let costs: [(&str, PickC); 2] = [
        ("CPU µs/IO", |p| p.cpu_us_per_io),
        ("run-queue µs/IO", |p| p.runq_us_per_io),
    ];
    for (k, (name, f)) in costs.into_iter().enumerate() {
        cost.series.push(Series {
            name: name.into(),
            colour: colour(k + 3).into(),
            points: c.curve.iter().map(|p| (p.iops, f(p))).collect(),
            dots: true,
            dashed: false,
        });
    }
    out.push_str(&cost.render());
    if c.curve.iter().any(|p| p.device_await_us > 0.0) {
        let mut dev = LineChart::new(
            "Application latency beside device service time",
            "IOPS",
            "latency (log scale)",
            Fmt::Rate,
            Fmt::Latency,
        );
        dev.y_log = true;
        dev.height = 260.0;
        dev.series.push(Series {
            name: "application mean".into(),
            colour: colour(0).into(),
            points: c.curve.iter().map(|p| (p.iops, p.mean_ns)).collect(),
            dots: true,
            dashed: false,
        });
        dev.series.push(Series {
            name: "device await".into(),
            colour: colour(2).into(),
            points: c
                .curve
                .iter()
                .map(|p| (p.iops, p.device_await_us * 1e3))
                .collect(),
            dots: true,
            dashed: true,
        });
        out.push_str(&dev.render());
    }
    if let Some(t) = calibration_curve(r, an) {
        out.push_str(&t.html());
    }
    let _ = write!(
        out,
        "<p class=\"note\">Time between steps: {} s of a {} s budget.</p>",
        sig3(c.overhead_s),
        sig3(c.budget_s)
    );
    for v in &c.verdicts {
        let _ = write!(out, "<div class=\"verdict\">{}</div>", esc(&v.message));
    }
    out.push_str("</section>");
}

fn environment_section(out: &mut String, r: &Results) {
    out.push_str("<section id=\"environment\"><h2>Environment and workload</h2>");
    let e = &r.environment;
    let mut t = Table::new(&["", ""]);
    // A trace or ingested file says nothing of the machine: no rows for what is unknown.
    if !e.hostname.is_empty() {
        t.row(vec!["host".into(), e.hostname.clone()]);
    }
    if !e.kernel.is_empty() {
        t.row(vec!["kernel".into(), e.kernel.clone()]);
    }
    if e.cpus > 0 {
        t.row(vec!["CPU".into(), format!("{} × {}", e.cpus, e.cpu_model)]);
    }
    if e.memory_bytes > 0 {
        t.row(vec!["memory".into(), fmt_bytes(e.memory_bytes)]);
    }
    if let Some(tg) = &e.target {
        t.row(vec![
            "target".into(),
            format!("{} ({}, {})", tg.path, tg.kind, fmt_bytes(tg.size_bytes)),
        ]);
        t.row(vec![
            "filesystem".into(),
            format!(
                "{} on {} [{}]",
                tg.filesystem, tg.mount_point, tg.mount_options
            ),
        ]);
        t.row(vec![
            "device".into(),
            format!(
                "{} {} ({}), scheduler {}, blocks {}/{} B",
                tg.device,
                tg.device_model,
                match tg.rotational {
                    Some(true) => "rotational",
                    Some(false) => "non-rotational",
                    None => "rotation unknown",
                },
                tg.active_scheduler(),
                tg.logical_block_size,
                tg.physical_block_size
            ),
        ]);
        let opt = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
        t.row(vec![
            "queue".into(),
            format!(
                "nr_requests {}, max_sectors_kb {}, read_ahead_kb {}",
                opt(tg.nr_requests),
                opt(tg.max_sectors_kb),
                opt(tg.read_ahead_kb)
            ),
        ]);
    }
    t.row(vec!["command".into(), super::command_text(&r.command_line)]);
    t.row(vec![
        "written".into(),
        format!("{} by iolens {}", r.created, r.tool_version),
    ]);
    out.push_str(
        &t.html()
            .replace("<thead><tr><th></th><th></th></tr></thead>", ""),
    );
    for (i, run) in r.runs.iter().enumerate() {
        if run.spec.is_none() && run.counters.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "<h3>Run {i}: {} — complete workload spec</h3>",
            esc(&run.name)
        );
        let spec = serde_json::to_string_pretty(&run.spec).unwrap_or_default();
        let _ = write!(out, "<pre>{}</pre>", esc(&spec));
        if let Some(b) = &run.io_buffers {
            let _ = write!(
                out,
                "<p>I/O buffers: {}</p>",
                esc(&super::brief::io_buffers_line(b))
            );
        }
        if !run.counters.is_empty() {
            let mut t = Table::new(&["counter", "value"]);
            for (k, v) in &run.counters {
                t.row(vec![k.clone(), sig3(*v)]);
            }
            out.push_str(&t.html());
        }
    }
    out.push_str("</section>");
}

/// Render the HTML report of one results document.
pub fn report(r: &Results, source: &str) -> Result<String> {
    report_loaded(r, source, None)
}

/// [`report`], taking the display columns validation merged on loading (`loaded`, made for
/// [`TIME_COLUMNS`]): the same page, each interval histogram decoded once.
pub(crate) fn report_loaded(
    r: &Results,
    source: &str,
    loaded: Option<&LoadedColumns>,
) -> Result<String> {
    let mut out = String::with_capacity(1 << 20);
    page_start(
        &mut out,
        &format!("iolens {} report — {source}", kind_name(r.kind)),
    );
    // Source, host, target and time; a part the results do not have is left out, not shown
    // as an empty slot between two dots.
    let written = format!("written {}", r.created);
    let meta: Vec<String> = [
        source,
        r.environment.hostname.as_str(),
        r.environment
            .target
            .as_ref()
            .map_or("", |t| t.path.as_str()),
        written.as_str(),
    ]
    .iter()
    .filter(|p| !p.trim().is_empty())
    .map(|p| esc(p).to_string())
    .collect();
    let _ = write!(
        out,
        "<header><h1>iolens {} report</h1><p class=\"meta\">{}</p>",
        kind_name(r.kind),
        meta.join(" · ")
    );
    out.push_str("<nav><a href=\"#summary\">Summary</a>");
    if r.plan.is_some() {
        out.push_str("<a href=\"#plan\">Plan</a>");
    }
    if r.calibration.is_some() {
        out.push_str("<a href=\"#calibration\">Calibration</a>");
    }
    if r.profile.is_some() {
        out.push_str("<a href=\"#flame\">Flame graph</a>");
    }
    if r.watch.is_some() {
        out.push_str("<a href=\"#wall\">Wall time</a>");
    }
    for (i, run) in r.runs.iter().enumerate().take(12) {
        let _ = write!(out, "<a href=\"#run-{i}\">{}</a>", esc(&run.name));
    }
    out.push_str(
        "<a href=\"#environment\">Environment</a><a href=\"#warnings\">Warnings</a></nav></header>",
    );

    // The calibration's best step (max IOPS at the target), if any.
    let best = r
        .calibration
        .as_ref()
        .and_then(|c| c.max_iops_point.and_then(|p| c.curve.get(p)).map(|p| p.run));
    let an = crate::analysis::of(r);
    let verdicts = |i: usize| an.runs.get(i).map(|a| a.verdicts.as_slice()).unwrap_or(&[]);
    out.push_str("<section id=\"summary\"><h2>Summary</h2>");
    headline(&mut out, r, &an);
    // A watch's answer first: its verdict and the database's own words.
    for (severity, line) in super::watch::headline(r, &an) {
        let _ = write!(
            out,
            "<div class=\"verdict {severity}\">{}</div>",
            esc(&line)
        );
    }
    // Verdicts of a calibration are given for its best step here (every step's own verdicts
    // are in its section); other documents list each run's, labelled when there are several.
    let summary_runs: Vec<(usize, &RunResult)> = match best.and_then(|b| Some((b, r.runs.get(b)?)))
    {
        Some(b) => vec![b],
        None => r.runs.iter().enumerate().collect(),
    };
    for (ri, run) in summary_runs {
        for v in verdicts(ri) {
            let label = if r.runs.len() > 1 {
                format!("{}: ", run.name)
            } else {
                String::new()
            };
            let _ = write!(
                out,
                "<div class=\"verdict {}\">{}{}</div>",
                v.severity,
                esc(&label),
                esc(&v.message)
            );
        }
    }
    // A stack profile alone (`profile`, perf-script ingest) has no runs: no empty table.
    if !r.runs.is_empty() {
        let _ = write!(out, "<div class=\"wide\">{}</div>", summary_table(r).html());
    }
    out.push_str("</section>");
    if let Some(chart) = super::watch::wall_chart(r, "Where the watched threads' time went") {
        out.push_str("<section id=\"wall\"><h2>Wall time over time</h2>");
        out.push_str(&chart);
        out.push_str(
            "<p class=\"note\">Every instant of every watched thread is in exactly one part: \
             each bar's parts add up to the thread time of its interval (its area; its height is \
             the number of threads watched, on average). The I/O parts are time inside traced \
             I/O syscalls.</p></section>",
        );
    }
    out.push_str(&super::hosts::html(r));
    out.push_str(&super::plan::html(r));
    out.push_str(&super::replay::html(r));

    calibration_section(&mut out, r, &an);
    out.push_str(&super::analysis::html(r, &an));
    let evidence = super::evidence::blocks(r);
    if !evidence.is_empty() {
        out.push_str("<section id=\"evidence\"><h2>Evidence</h2>");
        out.push_str(&super::table::blocks_html(evidence));
        out.push_str("</section>");
    }
    if let Some(p) = &r.profile {
        // Scaled to the page's width (its viewBox keeps the drawing): no sideways scrolling,
        // and the search box in its top right corner is on screen.
        out.push_str("<section id=\"flame\"><h2>Flame graph</h2><div>");
        out.push_str(&super::flame::flame_svg(p, &super::flame::title(r), false));
        out.push_str("</div></section>");
    }

    // Runs: details open for single runs and the calibration's best step.
    for (i, run) in r.runs.iter().enumerate() {
        let open = r.runs.len() <= 3 || best == Some(i);
        let _ = write!(
            out,
            "<section id=\"run-{i}\"><h2>Run {i}: {}</h2><details{}><summary>{} s measured in {} s intervals{} — {} {}{}</summary>",
            esc(&run.name),
            if open { " open" } else { "" },
            sig3(run.duration_s),
            sig3(run.interval_s),
            if run.warmup_s > 0.0 { format!(" after {} s warm-up", sig3(run.warmup_s)) } else { String::new() },
            if run.rates_known() { fmt_rate(run.iops()) } else { crate::results::UNKNOWN_RATE.into() },
            super::rate_name(r),
            if !run.ops.iter().any(|o| o.bytes > 0) {
                String::new()
            } else if run.rates_known() {
                format!(", {} MB/s", sig3(run.mb_per_s()))
            } else {
                format!(", {} MB/s", crate::results::UNKNOWN_RATE)
            }
        );
        if let Some(s) = spec_line(run.spec.as_ref()) {
            let _ = write!(out, "<p class=\"meta\">workload: {}</p>", esc(&s));
        }
        if run.interrupted {
            out.push_str("<p class=\"warn\">This run was interrupted before its planned end.</p>");
        }
        if r.runs.len() > 1 {
            for v in verdicts(i) {
                let _ = write!(
                    out,
                    "<div class=\"verdict {}\">{}</div>",
                    v.severity,
                    esc(&v.message)
                );
            }
        }
        for w in &run.warnings {
            let _ = write!(out, "<p class=\"warn\">warning: {}</p>", esc(w));
        }
        run_host(&mut out, run);
        out.push_str(&super::targets::html(run));
        out.push_str("<h3>Latency distribution</h3>");
        run_histograms(&mut out, run, an.runs.get(i))?;
        out.push_str("<h3>Over time</h3>");
        run_time_charts(&mut out, run, i, loaded, super::rate_name(r))?;
        if !run.sessions.is_empty() {
            let mut t = Table::new(&["session", "count", "mean", "p99"]);
            for s in &run.sessions {
                t.row(vec![
                    s.session.to_string(),
                    s.count.to_string(),
                    fmt_ns(s.mean_ns),
                    fmt_ns(s.p99_ns as f64),
                ]);
            }
            out.push_str("<h3>Sessions</h3>");
            out.push_str(&t.html());
        }
        out.push_str("</details></section>");
    }

    environment_section(&mut out, r);
    out.push_str("<section id=\"warnings\"><h2>Warnings</h2>");
    let all: Vec<String> = r
        .warnings
        .iter()
        .cloned()
        .chain(
            r.runs
                .iter()
                .flat_map(|x| x.warnings.iter().map(move |w| format!("{}: {w}", x.name))),
        )
        .collect();
    if all.is_empty() {
        out.push_str("<p class=\"note\">None.</p>");
    }
    for w in all {
        let _ = write!(out, "<p class=\"warn\">{}</p>", esc(&w));
    }
    out.push_str("</section>");
    page_end(&mut out);
    Ok(out)
}
