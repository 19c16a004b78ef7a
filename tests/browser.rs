//! Real-browser test: render reports and open them in headless Chromium. Checks that the page
//! loads without script errors, that every chart is laid out with a real size, that the hover
//! read-out works, and that a screenshot is not blank.
//!
//! Needs Debian's `chromium` (/usr/bin/chromium, or set IOLENS_CHROMIUM). Without it the test
//! is skipped with a note, unless IOLENS_BROWSER_TESTS=1 (CI), where it fails.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use iolens::synth;

mod common;

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("IOLENS_CHROMIUM") {
        let p = PathBuf::from(p);
        return p.exists().then_some(p);
    }
    for c in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(c).exists() {
            return Some(PathBuf::from(c));
        }
    }
    None
}

/// Run headless Chromium with the flags this closed, sandbox-less machine needs; returns
/// stdout. Kills it after 90 s.
fn run_chromium(bin: &Path, profile: &Path, extra: &[String], url: &str) -> String {
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap()
}

const ERRORS_HOOK: &str = "<script>window.__errs=[];window.addEventListener('error',\
function(e){window.__errs.push(String(e.message||e));});</script>";

/// Appended after the report's own script: opens every <details>, measures every chart,
/// simulates a hover on the first heatmap and writes the findings into the DOM.
const PROBE: &str = r#"<script>
(function(){
var ds=document.querySelectorAll('details');for(var i=0;i<ds.length;i++){ds[i].open=true;}
var svgs=document.querySelectorAll('svg.chart'),sizes=[];
for(var i=0;i<svgs.length;i++){var r=svgs[i].getBoundingClientRect();sizes.push([Math.round(r.width),Math.round(r.height),svgs[i].querySelectorAll('rect,path,polyline,circle').length]);}
var hover='';var h=document.querySelector('desc.heatdata');
if(h){var svg=h.parentNode,r=svg.getBoundingClientRect();
 svg.dispatchEvent(new MouseEvent('mousemove',{clientX:r.left+r.width*0.4,clientY:r.top+r.height*0.5,bubbles:true}));
 var tip=document.getElementById('tip');hover=tip.hidden?'':tip.textContent;}
var out=document.createElement('pre');out.id='probe';
out.textContent='PROBE'+JSON.stringify({errors:window.__errs,sizes:sizes,hover:hover})+'EBORP';
document.body.appendChild(out);
})();
</script>"#;

#[derive(Debug)]
struct Probe {
    errors: Vec<String>,
    sizes: Vec<(f64, f64, f64)>,
    hover: String,
}

fn probe(bin: &Path, dir: &Path, html: &Path) -> Probe {
    let text = std::fs::read_to_string(html).unwrap();
    let text = text.replacen("<head>", &format!("<head>{ERRORS_HOOK}"), 1);
    let text = text.replacen("</body>", &format!("{PROBE}</body>"), 1);
    let probed = dir.join("probe.html");
    std::fs::write(&probed, text).unwrap();
    let dom = run_chromium(
        bin,
        &dir.join("profile-probe"),
        &["--dump-dom".into(), "--window-size=1000,800".into()],
        &format!("file://{}", probed.display()),
    );
    let marker = "<pre id=\"probe\">PROBE";
    let a = dom.find(marker).expect("probe output in the DOM") + marker.len();
    let b = a + dom[a..].find("EBORP").expect("probe end");
    let json = dom[a..b].replace("&quot;", "\"").replace("&amp;", "&");
    let v: serde_json::Value = serde_json::from_str(&json).expect("probe JSON");
    Probe {
        errors: v["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.to_string())
            .collect(),
        sizes: v["sizes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s[0].as_f64().unwrap(),
                    s[1].as_f64().unwrap(),
                    s[2].as_f64().unwrap(),
                )
            })
            .collect(),
        hover: v["hover"].as_str().unwrap_or_default().to_string(),
    }
}

/// Share of non-white pixels and number of distinct colours in a PNG.
/// The page with its script taken out and every `<svg>` emptied (its tag, and so its size and the
/// page's layout, kept): its text and tables where they were, without the charts' drawing.
fn without_charts(html: &str) -> String {
    let mut page = html.to_string();
    for (open, close, keep_tags) in [("<script", "</script>", false), ("<svg", "</svg>", true)] {
        let mut out = String::with_capacity(page.len());
        let mut rest = page.as_str();
        while let Some(at) = rest.find(open) {
            out.push_str(&rest[..at]);
            let tag_end = rest[at..].find('>').map_or(rest.len(), |e| at + e + 1);
            if keep_tags {
                out.push_str(&rest[at..tag_end]);
                out.push_str(close);
            }
            rest = match rest[tag_end..].find(close) {
                Some(end) => &rest[tag_end + end + close.len()..],
                None => "",
            };
        }
        out.push_str(rest);
        page = out;
    }
    page
}

fn png_stats(path: &Path) -> (f64, usize, u32, u32) {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut rd = dec.read_info().unwrap();
    let mut buf = vec![0; rd.output_buffer_size().unwrap()];
    let info = rd.next_frame(&mut buf).unwrap();
    let ch = info.color_type.samples();
    let px = &buf[..info.buffer_size()];
    let mut non_white = 0usize;
    let mut colours = std::collections::HashSet::new();
    let n = px.len() / ch;
    for p in px.chunks(ch) {
        let rgb = [p[0], p[1.min(ch - 1)], p[2.min(ch - 1)]];
        if rgb.iter().any(|&c| c < 235) {
            non_white += 1;
        }
        colours.insert(rgb);
    }
    (
        non_white as f64 / n as f64,
        colours.len(),
        info.width,
        info.height,
    )
}

fn report(dir: &Path, name: &str, r: &iolens::results::Results) -> PathBuf {
    let input = dir.join(format!("{name}.json"));
    r.write_file(&input).unwrap();
    let out = dir.join(format!("{name}.html"));
    let o = Command::new(env!("CARGO_BIN_EXE_iolens"))
        .args([
            "report",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
fn reports_load_and_draw_in_headless_chromium() {
    let Some(bin) = chromium() else {
        if std::env::var("IOLENS_BROWSER_TESTS").as_deref() == Ok("1") {
            panic!(
                "IOLENS_BROWSER_TESTS=1 but chromium is not installed \
                 (apt-get install -y chromium, or set IOLENS_CHROMIUM)"
            );
        }
        eprintln!("note: skipping the browser test: chromium not found (apt-get install chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("run", synth::run_results(20, 1.0, 11), 13usize),
        ("cal", synth::calibration_results(4, 3, 100, 2), 3 + 4 * 5),
    ];
    for (name, r, charts) in cases {
        let html = report(dir.path(), name, &r);
        let p = probe(&bin, dir.path(), &html);
        assert!(p.errors.is_empty(), "{name}: script errors: {:?}", p.errors);
        assert_eq!(p.sizes.len(), charts, "{name}: chart count {:?}", p.sizes);
        for (i, (w, h, shapes)) in p.sizes.iter().enumerate() {
            assert!(*w >= 300.0 && *h >= 100.0, "{name}: chart {i} is {w}×{h}");
            assert!(*shapes >= 1.0, "{name}: chart {i} draws no data");
        }
        assert!(
            p.hover.contains(" s, ")
                && (p.hover.contains("ops") || p.hover.contains("of I/O time")),
            "{name}: hover read-out {:?}",
            p.hover
        );

        // The same page with its charts emptied (every `<svg>` kept at its size, its drawing and the
        // script taken out) is its text and tables only: the charts' ink is what the real screenshot holds beyond it. A fixed share
        // of ink mistook a text-heavy page for a blank one (the calibration page's top is about
        // 5 % ink, and 0.0498 once failed a 0.05 floor with every chart drawn).
        let bare = dir.path().join(format!("{name}-bare.html"));
        std::fs::write(
            &bare,
            without_charts(&std::fs::read_to_string(&html).unwrap()),
        )
        .unwrap();
        let shoot = |tag: &str, page: &Path| {
            let shot = dir.path().join(format!("{name}-{tag}.png"));
            run_chromium(
                &bin,
                &dir.path().join(format!("profile-shot-{name}-{tag}")),
                &[
                    format!("--screenshot={}", shot.display()),
                    "--window-size=1000,1600".into(),
                ],
                &format!("file://{}", page.display()),
            );
            png_stats(&shot)
        };
        let (ink, colours, w, h) = shoot("drawn", &html);
        let (bare_ink, _, _, _) = shoot("bare", &bare);
        eprintln!(
            "{name}: ink {ink:.4} drawn, {bare_ink:.4} without the charts; {colours} colours"
        );
        assert_eq!((w, h), (1000, 1600));
        assert!(
            ink > 0.02 && ink > bare_ink * 1.3,
            "{name}: screenshot is nearly blank or the charts drew nothing \
             ({ink:.4} of pixels inked, {bare_ink:.4} without the charts)"
        );
        assert!(
            colours > 50,
            "{name}: screenshot has only {colours} colours"
        );
    }
}

/// Appended to a flame graph after its own script: errors, and the frames left visible.
const FLAME_PROBE: &str = r#"<script><![CDATA[
(function(){var svg=document.getElementById('iolens-flame'),vis=[],gs=svg.querySelectorAll('g.f');
var act=location.search.slice(1);
if(act==='click'){var a=null;for(var i=0;i<gs.length;i++){if(gs[i].getAttribute('data-n')==='a')a=gs[i];}
 a.querySelector('rect').dispatchEvent(new MouseEvent('click',{bubbles:true}));}
for(var i=0;i<gs.length;i++){var g=gs[i];if(g.style.display!=='none')vis.push([g.getAttribute('data-n'),+g.querySelector('rect').getAttribute('width'),g.querySelector('rect').getAttribute('fill')]);}
var t=document.createElementNS('http://www.w3.org/2000/svg','text');t.setAttribute('id','probe');
t.textContent='FLAMEPROBE'+JSON.stringify({errors:window.__errs||[],vis:vis,hash:location.hash,matched:svg.querySelector('#matched').textContent,plot:+svg.getAttribute('data-plot')})+'EBORPEMALF';
svg.appendChild(t);})();
]]></script>"#;

/// Load a probed copy of a flame graph (`query` picks an action, `fragment` the URL fragment).
fn flame_probe(
    bin: &Path,
    dir: &Path,
    svg: &Path,
    query: &str,
    fragment: &str,
) -> serde_json::Value {
    let text = std::fs::read_to_string(svg).unwrap();
    let open_end =
        text.find("<svg").unwrap() + text[text.find("<svg").unwrap()..].find('>').unwrap() + 1;
    let hook = "<script><![CDATA[window.__errs=[];window.addEventListener('error',function(e){window.__errs.push(String(e.message||e));});]]></script>";
    let probed = format!(
        "{}{hook}{}",
        &text[..open_end],
        text[open_end..].replacen("</svg>", &format!("{FLAME_PROBE}</svg>"), 1)
    );
    let path = dir.join("probe.svg");
    std::fs::write(&path, probed).unwrap();
    let dom = run_chromium(
        bin,
        &dir.join("profile-flame"),
        &["--dump-dom".into(), "--window-size=1300,600".into()],
        &format!("file://{}?{query}{fragment}", path.display()),
    );
    let a = dom.rfind("FLAMEPROBE").expect("probe output") + "FLAMEPROBE".len();
    let b = a + dom[a..].find("EBORPEMALF").unwrap();
    let json = dom[a..b].replace("&quot;", "\"").replace("&amp;", "&");
    serde_json::from_str(&json).unwrap()
}

#[test]
fn flame_graph_opens_zooms_and_searches_in_headless_chromium() {
    let Some(bin) = chromium() else {
        if std::env::var("IOLENS_BROWSER_TESTS").as_deref() == Ok("1") {
            panic!("IOLENS_BROWSER_TESTS=1 but chromium is not installed");
        }
        eprintln!("note: skipping the flame graph browser test: chromium not found");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/recorded/perf-script-spin_ab.txt");
    let json = dir.path().join("p.json");
    let svg = dir.path().join("p.svg");
    let iolens = |args: &[&std::ffi::OsStr]| {
        let st = Command::new(env!("CARGO_BIN_EXE_iolens"))
            .args(args)
            .status()
            .unwrap();
        assert!(st.success());
    };
    iolens(&[
        "-q".as_ref(),
        "ingest".as_ref(),
        "--format".as_ref(),
        "perf-script".as_ref(),
        fixture.as_os_str(),
        "--json".as_ref(),
        json.as_os_str(),
    ]);
    iolens(&[
        "export".as_ref(),
        json.as_os_str(),
        "--flame".as_ref(),
        svg.as_os_str(),
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    let id_of = |name: &str| -> String {
        let at = text.find(&format!("data-n=\"{name}\"")).unwrap();
        let g = text[..at].rfind("data-id=\"").unwrap() + "data-id=\"".len();
        text[g..g + text[g..].find('"').unwrap()].to_string()
    };
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["vis"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f[0].as_str().unwrap().to_string())
            .collect()
    };
    let width = |v: &serde_json::Value, n: &str| -> f64 {
        v["vis"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f[0] == n)
            .map(|f| f[1].as_f64().unwrap())
            .sum()
    };

    // Plain load: no errors, both hot functions drawn, b about twice as wide as a.
    let p = flame_probe(&bin, dir.path(), &svg, "", "");
    assert_eq!(p["errors"].as_array().unwrap().len(), 0, "{p}");
    let (wa, wb) = (width(&p, "a"), width(&p, "b"));
    assert!(
        wa > 100.0 && (1.6..2.5).contains(&(wb / wa)),
        "a {wa} px, b {wb} px"
    );

    // The URL fragment zooms: b fills the width, a is gone, b's callers stay (as ancestors).
    let p = flame_probe(&bin, dir.path(), &svg, "", &format!("#zoom={}", id_of("b")));
    assert_eq!(p["errors"].as_array().unwrap().len(), 0, "{p}");
    let plot = p["plot"].as_f64().unwrap();
    assert!((width(&p, "b") - plot).abs() < 0.5, "{p}");
    assert!(!names(&p).contains(&"a".to_string()), "{p}");
    assert!(names(&p).contains(&"main".to_string()), "{p}");

    // A click zooms and writes the fragment.
    let p = flame_probe(&bin, dir.path(), &svg, "click", "");
    assert!((width(&p, "a") - plot).abs() < 0.5, "{p}");
    assert_eq!(p["hash"], format!("#zoom={}", id_of("a")), "{p}");

    // Search from the fragment highlights matches and reports their share.
    let p = flame_probe(&bin, dir.path(), &svg, "", "#search=%5Eb%24");
    let hit: Vec<&serde_json::Value> = p["vis"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f[2] == "rgb(230,0,230)")
        .collect();
    assert_eq!(hit.len(), 1, "{p}");
    assert!(
        p["matched"].as_str().unwrap().starts_with("Matched: 6"),
        "{p}"
    );
}

/// Appended after a report's own script: opens every <details>, then lists text boxes that
/// overlap inside any SVG (charts, the flame graph), elements that reach past the page's
/// right edge with nothing scrolling them, tables that need sideways scrolling, and where the
/// flame graph and its search box are.
const LAYOUT_PROBE: &str = r#"<script>
(function(){
var ds=document.querySelectorAll('details');for(var i=0;i<ds.length;i++){ds[i].open=true;}
var over=[],svgs=document.querySelectorAll('svg');
for(var s=0;s<svgs.length;s++){var ts=svgs[s].querySelectorAll('text'),bs=[];
 for(var i=0;i<ts.length;i++){var t=ts[i];if(!t.textContent.trim())continue;var r=t.getBoundingClientRect();
  if(r.width<=0||r.height<=0)continue;var g=t,shown=true;
  while(g&&g!==svgs[s]){var st=getComputedStyle(g);if(st.display==='none'||st.visibility==='hidden')shown=false;g=g.parentNode;}
  if(shown)bs.push([r,t.textContent]);}
 for(var i=0;i<bs.length;i++)for(var j=i+1;j<bs.length;j++){var a=bs[i][0],b=bs[j][0];
  var w=Math.min(a.right,b.right)-Math.max(a.left,b.left),h=Math.min(a.bottom,b.bottom)-Math.max(a.top,b.top);
  if(w>1&&h>1)over.push([svgs[s].getAttribute('aria-label')||svgs[s].id,bs[i][1],bs[j][1],Math.round(w),Math.round(h)]);}}
var W=document.documentElement.clientWidth,wide=[],all=document.body.querySelectorAll('*');
for(var i=0;i<all.length;i++){var e=all[i];if(e.closest('#tip'))continue;var r=e.getBoundingClientRect();if(r.right<=W+1)continue;
 var p=e.parentElement,scrolled=false;while(p){var o=getComputedStyle(p).overflowX;if(o==='auto'||o==='scroll'||o==='hidden'){scrolled=true;break;}p=p.parentElement;}
 if(!scrolled)wide.push([e.tagName,Math.round(r.right),(e.textContent||'').slice(0,60)]);}
var tables=[],tb=document.querySelectorAll('table');
for(var i=0;i<tb.length;i++){if(tb[i].scrollWidth>tb[i].clientWidth+1)tables.push([tb[i].scrollWidth,tb[i].clientWidth,tb[i].textContent.slice(0,80)]);}
var flame=null,f=document.getElementById('iolens-flame');
if(f){var r=f.getBoundingClientRect(),s=document.getElementById('search');var sr=s?s.getBoundingClientRect():null;
 flame=[Math.round(r.right),sr?Math.round(sr.right):-1];}
var out=document.createElement('pre');out.id='probe';
out.textContent='PROBE'+JSON.stringify({over:over,wide:wide.slice(0,20),tables:tables,flame:flame,W:W})+'EBORP';
document.body.appendChild(out);})();
</script>"#;

/// The layout findings of report `html` in a window `width` pixels wide.
fn layout_probe(bin: &Path, dir: &Path, html: &Path, width: u32) -> serde_json::Value {
    let text = std::fs::read_to_string(html).unwrap();
    let text = text.replacen("</body>", &format!("{LAYOUT_PROBE}</body>"), 1);
    let probed = dir.join("layout-probe.html");
    std::fs::write(&probed, text).unwrap();
    let dom = run_chromium(
        bin,
        &dir.join("profile-layout"),
        &["--dump-dom".into(), format!("--window-size={width},900")],
        &format!("file://{}", probed.display()),
    );
    let marker = "<pre id=\"probe\">PROBE";
    let a = dom.find(marker).expect("probe output in the DOM") + marker.len();
    let b = a + dom[a..].find("EBORP").expect("probe end");
    let json = dom[a..b]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).expect("probe JSON")
}

/// The reports the test suite makes (a run, a calibration, a trace, ingested wait-event
/// histograms, a block-latency histogram, a stack profile with its flame graph, Statspack,
/// pg_stat_io, a replay of real traces, a plan and a comparison; the watch's report in
/// [`watch_report_draws_the_wall_time_split_in_headless_chromium`]), each in a window as wide
/// as a laptop's browser: no two text boxes of a chart overlap, nothing reaches past the
/// page's right edge, no table needs sideways scrolling, and the flame graph with its search
/// box fits the page; and at 480 px no overlap and nothing past the page either.
#[test]
fn report_text_never_overlaps_and_fits_the_page() {
    let Some(bin) = chromium() else {
        if std::env::var("IOLENS_BROWSER_TESTS").as_deref() == Ok("1") {
            panic!("IOLENS_BROWSER_TESTS=1 but chromium is not installed");
        }
        eprintln!("note: skipping the report layout browser test: chromium not found");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fx = common::fixture;
    let mut reports = vec![
        report(dir.path(), "run", &synth::run_results(20, 1.0, 11)),
        report(dir.path(), "run2", &synth::run_results(20, 1.0, 12)),
        report(dir.path(), "cal", &synth::calibration_results(4, 3, 100, 2)),
    ];
    // Results made by iolens from `args` (written to NAME.json), and their report.
    let made = |name: &str, args: &[&std::ffi::OsStr]| -> PathBuf {
        let json = dir.path().join(format!("{name}.json"));
        let out = common::bin()
            .arg("-q")
            .args(args)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {err}");
        let html = dir.path().join(format!("{name}.html"));
        let st = common::bin()
            .args(["-q", "report"])
            .arg(&json)
            .arg("-o")
            .arg(&html)
            .status()
            .unwrap();
        assert!(st.success(), "{name} report");
        html
    };
    let sources: [(&str, &[&str], PathBuf); 6] = [
        ("trace", &["trace"], fx("real/js122a1_ora_9854.trc")),
        (
            "hist",
            &["ingest", "--format", "event-histogram"],
            fx("sources/event_histogram_micro.csv"),
        ),
        (
            "bio",
            &["ingest", "--format", "biolatency"],
            fx("real/bcc_biolatency_D.txt"),
        ),
        (
            "prof",
            &["ingest", "--format", "perf-script"],
            fx("recorded/perf-script-spin_ab.txt"),
        ),
        (
            "awr",
            &["ingest", "--format", "awr"],
            fx("real/statspack_11204_igt.txt"),
        ),
        (
            "pgio",
            &["ingest", "--format", "pg-stat-io"],
            fx("real/pg18_stat_io_watch.txt"),
        ),
    ];
    for (name, args, input) in sources {
        let mut a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
        a.push(input.as_os_str());
        reports.push(made(name, &a));
    }
    // A replay of the real 10046 traces on a scratch file: recorded beside replayed latency
    // and the replay's fidelity charts.
    let (t1, t2) = (
        fx("real/js122a1_ora_9850.trc"),
        fx("real/js122a1_ora_9854.trc"),
    );
    let target = dir.path().join("replay.dat");
    reports.push(made(
        "replay",
        &[
            "replay".as_ref(),
            t1.as_os_str(),
            t2.as_os_str(),
            "--target".as_ref(),
            target.as_os_str(),
        ],
    ));
    // A plan from the calibration's curve, for twice its best IOPS at three times its
    // highest p99 (a goal the curve's model reaches with more LUNs).
    let cal: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("cal.json")).unwrap())
            .unwrap();
    let curve = cal["calibration"]["curve"].as_array().unwrap();
    let top = |k: &str| {
        curve
            .iter()
            .map(|p| p[k].as_f64().unwrap())
            .fold(0.0, f64::max)
    };
    let (iops, p99) = (
        format!("{}", (2.0 * top("iops")).round()),
        format!("{}us", (3.0 * top("p99_ns") / 1e3).round()),
    );
    let cal_json = dir.path().join("cal.json");
    reports.push(made(
        "plan",
        &[
            "plan".as_ref(),
            "--iops".as_ref(),
            iops.as_ref(),
            "--p99".as_ref(),
            p99.as_ref(),
            cal_json.as_os_str(),
        ],
    ));
    // A comparison of two runs, whose charts overlay both.
    let cmp = dir.path().join("cmp.html");
    let st = common::bin()
        .args(["-q", "compare"])
        .arg(dir.path().join("run.json"))
        .arg(dir.path().join("run2.json"))
        .arg("-o")
        .arg(&cmp)
        .status()
        .unwrap();
    assert!(st.success(), "compare report");
    reports.push(cmp);
    for html in &reports {
        assert_fits_the_page(&bin, dir.path(), html);
    }
}

/// The layout checks of [`report_text_never_overlaps_and_fits_the_page`] on report `html`: at
/// a laptop browser's 1000 px every check; at a narrow 480 px (a window beside another, a
/// phone) no chart's text overlaps and nothing reaches past the page, though a table may
/// scroll sideways in its own box.
fn assert_fits_the_page(bin: &Path, dir: &Path, html: &Path) {
    let name = html.file_name().unwrap().to_string_lossy();
    let narrow = layout_probe(bin, dir, html, 480);
    for what in ["over", "wide"] {
        let found = narrow[what].as_array().unwrap();
        assert!(
            found.is_empty(),
            "{name} at 480 px: {}: {found:?}",
            if what == "over" {
                "overlapping text in charts"
            } else {
                "wider than the page"
            }
        );
    }
    let p = layout_probe(bin, dir, html, 1000);
    let over = p["over"].as_array().unwrap();
    assert!(
        over.is_empty(),
        "{name}: overlapping text in charts: {over:?}"
    );
    let wide = p["wide"].as_array().unwrap();
    assert!(wide.is_empty(), "{name}: wider than the page: {wide:?}");
    let tables = p["tables"].as_array().unwrap();
    assert!(
        tables.is_empty(),
        "{name}: tables scrolling sideways: {tables:?}"
    );
    if name.starts_with("prof") {
        let w = p["W"].as_f64().unwrap();
        let f = p["flame"]
            .as_array()
            .expect("a flame graph in the profile report");
        assert!(
            f[0].as_f64().unwrap() <= w,
            "{name}: flame graph {f:?}, page {w}"
        );
        let search = f[1].as_f64().unwrap();
        assert!(
            search > 0.0 && search <= w,
            "{name}: search box at {search}, page {w}"
        );
    }
}

/// Appended to a watch report: the wall-time chart's size, and per bar the rendered heights of
/// its parts (the browser's layout boxes, in the chart's units) against its total.
const WALL_PROBE: &str = r#"<script>
(function(){
var svg=document.querySelector('#wall svg.chart'),out={errors:window.__errs,found:!!svg,bars:[]};
if(svg){var r=svg.getBoundingClientRect();out.w=r.width;out.h=r.height;
 var s=svg.dataset.sy.split(','),ppu=(+s[3]-+s[4])/(+s[2]-+s[1]);
 var gs=svg.querySelectorAll('g.bar');
 for(var i=0;i<gs.length;i++){var h=0,rs=gs[i].querySelectorAll('rect');
  for(var k=0;k<rs.length;k++){h+=rs[k].getBBox().height;}
  out.bars.push([h/ppu*(+gs[i].dataset.len),+gs[i].dataset.total,rs.length]);}}
var p=document.createElement('pre');p.id='probe';p.textContent='PROBE'+JSON.stringify(out)+'EBORP';
document.body.appendChild(p);})();
</script>"#;

/// Issue 23, item 8: the report of a real watch (a process doing synced writes, watched by its
/// name) draws the wall-time split in a real browser: the chart is laid out, and every bar's
/// parts, as the browser lays them out, stack to the thread time of its interval.
#[test]
fn watch_report_draws_the_wall_time_split_in_headless_chromium() {
    let Some(chromium) = chromium() else {
        if std::env::var("IOLENS_BROWSER_TESTS").as_deref() == Ok("1") {
            panic!("IOLENS_BROWSER_TESTS=1 but chromium is not installed");
        }
        eprintln!("note: skipping the watch report browser test: chromium not found");
        return;
    };
    if !common::root_or_skip("watch_report_draws_the_wall_time_split_in_headless_chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A copy of dd under a name nothing else on the host has: the watch follows it by name.
    let dd = dir.path().join("iolens_wall_dd");
    std::fs::copy("/bin/dd", &dd).unwrap();
    let json = dir.path().join("w.json");
    let mut w = common::bin()
        .args([
            "watch",
            "--comm",
            "iolens_wall_dd",
            "--wait",
            "--duration",
            "3s",
        ])
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(w.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("tracepoints attached") {
        line.clear();
        let n = std::io::BufRead::read_line(&mut err, &mut line).unwrap();
        assert!(n > 0, "iolens watch ended before attaching");
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let out = dir.path().join("dd.out");
    let st = Command::new(&dd)
        .args(["if=/dev/zero", "bs=8k", "count=400", "oflag=dsync"])
        .arg(format!("of={}", out.display()))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    assert!(w.wait().unwrap().success(), "iolens watch failed");
    let _ = std::fs::remove_file(&out);
    let r = iolens::results::Results::read_file(&json).unwrap();
    let html = report(dir.path(), "watch", &r);
    let text = std::fs::read_to_string(&html).unwrap();
    let text = text.replacen("<head>", &format!("<head>{ERRORS_HOOK}"), 1);
    let text = text.replacen("</body>", &format!("{WALL_PROBE}</body>"), 1);
    let probed = dir.path().join("wall.html");
    std::fs::write(&probed, text).unwrap();
    let dom = run_chromium(
        &chromium,
        &dir.path().join("profile-wall"),
        &["--dump-dom".into(), "--window-size=1000,800".into()],
        &format!("file://{}", probed.display()),
    );
    let marker = "<pre id=\"probe\">PROBE";
    let a = dom.find(marker).expect("probe output in the DOM") + marker.len();
    let b = a + dom[a..].find("EBORP").expect("probe end");
    let v: serde_json::Value =
        serde_json::from_str(&dom[a..b].replace("&quot;", "\"").replace("&amp;", "&")).unwrap();
    assert_eq!(v["errors"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["found"], true, "no wall-time chart: {v}");
    let (w, h) = (v["w"].as_f64().unwrap(), v["h"].as_f64().unwrap());
    assert!(w >= 300.0 && h >= 100.0, "chart is {w}×{h}");
    let bars = v["bars"].as_array().unwrap();
    let spans = r.watch.as_ref().unwrap().intervals.len();
    assert!(!bars.is_empty() && bars.len() <= spans, "{v}");
    let mut drawn = 0;
    for bar in bars {
        let (stacked, total, parts) = (
            bar[0].as_f64().unwrap(),
            bar[1].as_f64().unwrap(),
            bar[2].as_f64().unwrap(),
        );
        // Heights written to 0.001 px, at most eight parts: 0.008 px of the bar's height.
        assert!(
            (stacked - total).abs() <= 0.01 * total + 1e-3,
            "bar drawn {stacked} thread-s high, its interval holds {total}: {v}"
        );
        if parts >= 2.0 {
            drawn += 1;
        }
    }
    assert!(drawn >= 1, "no bar with two parts or more: {v}");
    // Its per-interval table (12 columns) fits the page's 920 px: headers wrap between words.
    assert_fits_the_page(&chromium, dir.path(), &html);
}
