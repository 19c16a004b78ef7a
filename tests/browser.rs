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

        let shot = dir.path().join(format!("{name}.png"));
        run_chromium(
            &bin,
            &dir.path().join(format!("profile-shot-{name}")),
            &[
                format!("--screenshot={}", shot.display()),
                "--window-size=1000,1600".into(),
            ],
            &format!("file://{}", html.display()),
        );
        let (ink, colours, w, h) = png_stats(&shot);
        assert_eq!((w, h), (1000, 1600));
        assert!(ink > 0.05, "{name}: screenshot is nearly blank ({ink})");
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
