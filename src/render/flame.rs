//! The interactive flame graph of a stack profile: one self-contained SVG (no external
//! resources), written by iolens on its own SVG helpers (the common Rust renderer, inferno, is
//! CDDL-licensed).
//!
//! Layout as Brendan Gregg's flame graphs: the root (`all`) at the bottom, then the process
//! name, then the stack from the outermost caller up; a frame's width is its weight (ns of CPU
//! time on CPU plus ns blocked off CPU), children in alphabetical order, so x is not time.
//! Frames narrower than [`MIN_WIDTH_PX`] are not drawn (their weight stays in their parent's).
//!
//! Colours tell on-CPU from off-CPU: warm (red to yellow) for user code on CPU, orange for
//! kernel code on CPU, blue for I/O wait, violet for other sleep, green for runnable-but-waiting,
//! by the state holding most of the frame's weight. Each frame's tooltip (`<title>`) gives its
//! name, its database or kernel layer (`analysis::dblayers`), its time and share, and its on-
//! and off-CPU split. The inline script zooms on click, searches (the Search button, or
//! `#search=REGEX` in the URL), and zooms from the URL fragment (`#zoom=ID`, IDs are the
//! frames' `data-id`); clicking zooms and writes the fragment, so a zoomed view can be shared.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::svg::esc;
use crate::analysis::stacks::layer_label;
use crate::results::profile::{FrameKind, OffCpuReason, StackProfile, StackState};
use crate::units::{fmt_ns, sig3};

/// Width of the drawing, px.
pub const WIDTH: f64 = 1200.0;
/// Height of one frame row, px.
pub const ROW: f64 = 16.0;
/// Frames narrower than this are left out, px.
pub const MIN_WIDTH_PX: f64 = 0.1;
const PAD: f64 = 10.0;
const TOP: f64 = 62.0;
const BOTTOM: f64 = 34.0;
const FONT: f64 = 12.0;
const CHAR_PX: f64 = 7.0;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum LabelKind {
    Root,
    Comm,
    Frame(FrameKind),
    Marker,
}

struct Node {
    label: u32,
    depth: u32,
    children: Vec<u32>,
    on_ns: u64,
    on_samples: u64,
    off_ns: [u64; 3],
}

impl Node {
    fn weight(&self) -> u64 {
        self.off_ns
            .iter()
            .fold(self.on_ns, |t, &w| t.saturating_add(w))
    }
}

fn reason_index(r: OffCpuReason) -> usize {
    match r {
        OffCpuReason::IoWait => 0,
        OffCpuReason::Sleep => 1,
        OffCpuReason::Runnable => 2,
    }
}

/// The merged call tree of a profile.
struct Tree {
    labels: Vec<(String, LabelKind)>,
    nodes: Vec<Node>,
}

impl Tree {
    fn build(p: &StackProfile) -> Tree {
        let mut labels: Vec<(String, LabelKind)> = vec![("all".into(), LabelKind::Root)];
        let mut label_ids: HashMap<(String, LabelKind), u32> = HashMap::new();
        let mut intern = |labels: &mut Vec<(String, LabelKind)>, s: &str, k: LabelKind| -> u32 {
            if let Some(&i) = label_ids.get(&(s.to_string(), k)) {
                return i;
            }
            let i = labels.len() as u32;
            labels.push((s.to_string(), k));
            label_ids.insert((s.to_string(), k), i);
            i
        };
        let frame_label: Vec<u32> = p
            .frames
            .iter()
            .map(|f| intern(&mut labels, &f.name, LabelKind::Frame(f.kind)))
            .collect();
        let mut nodes = vec![Node {
            label: 0,
            depth: 0,
            children: Vec::new(),
            on_ns: 0,
            on_samples: 0,
            off_ns: [0; 3],
        }];
        let mut child: HashMap<(u32, u32), u32> = HashMap::new();
        for s in &p.stacks {
            let comm = intern(&mut labels, &s.comm, LabelKind::Comm);
            let marker = match s.state {
                StackState::OnCpu => None,
                StackState::OffCpu(r) => Some(intern(
                    &mut labels,
                    &format!("[off-cpu {}]", r.as_str()),
                    LabelKind::Marker,
                )),
            };
            let path = std::iter::once(comm)
                .chain(s.frames.iter().map(|&f| frame_label[f as usize]))
                .chain(marker);
            let mut at = 0u32;
            let add = |n: &mut Node| match s.state {
                StackState::OnCpu => {
                    n.on_ns = n.on_ns.saturating_add(s.weight_ns);
                    n.on_samples = n.on_samples.saturating_add(s.count);
                }
                StackState::OffCpu(r) => {
                    let w = &mut n.off_ns[reason_index(r)];
                    *w = w.saturating_add(s.weight_ns);
                }
            };
            add(&mut nodes[0]);
            for l in path {
                let next = match child.get(&(at, l)) {
                    Some(&c) => c,
                    None => {
                        let c = nodes.len() as u32;
                        let depth = nodes[at as usize].depth + 1;
                        nodes.push(Node {
                            label: l,
                            depth,
                            children: Vec::new(),
                            on_ns: 0,
                            on_samples: 0,
                            off_ns: [0; 3],
                        });
                        nodes[at as usize].children.push(c);
                        child.insert((at, l), c);
                        c
                    }
                };
                add(&mut nodes[next as usize]);
                at = next;
            }
        }
        // Children alphabetically, as flame graphs order them.
        let node_label: Vec<u32> = nodes.iter().map(|n| n.label).collect();
        for n in &mut nodes {
            n.children.sort_by(|&a, &b| {
                labels[node_label[a as usize] as usize]
                    .0
                    .cmp(&labels[node_label[b as usize] as usize].0)
            });
        }
        Tree { labels, nodes }
    }
}

/// Deterministic 0..1 variation of a name (so a function keeps its shade across graphs).
fn shade(name: &str) -> f64 {
    let mut h: u32 = 2166136261;
    for b in name.bytes().take(24) {
        h ^= b as u32;
        h = h.wrapping_mul(16777619);
    }
    (h % 1000) as f64 / 1000.0
}

/// The fill of a frame: by the state holding most of its weight.
fn fill(name: &str, kind: LabelKind, n: &Node) -> String {
    let v = shade(name);
    let off_max = n.off_ns.iter().copied().max().unwrap_or(0);
    let (r, g, b) = if off_max > n.on_ns {
        let i = n.off_ns.iter().position(|&x| x == off_max).unwrap_or(0);
        match i {
            0 => (40.0 + 50.0 * v, 100.0 + 60.0 * v, 205.0 + 50.0 * v),
            1 => (135.0 + 40.0 * v, 110.0 + 40.0 * v, 200.0 + 40.0 * v),
            _ => (70.0 + 40.0 * v, 170.0 + 50.0 * v, 90.0 + 40.0 * v),
        }
    } else {
        match kind {
            LabelKind::Frame(FrameKind::Kernel) => (225.0 + 25.0 * v, 130.0 + 50.0 * v, 30.0),
            LabelKind::Root | LabelKind::Comm => (200.0, 200.0, 200.0 - 20.0 * v),
            _ => (205.0 + 50.0 * v, 60.0 + 170.0 * v, 40.0 * v),
        }
    };
    format!("rgb({},{},{})", r as u8, g as u8, b as u8)
}

/// How a weight reads: time when the profile's weights are nanoseconds, else samples.
fn amount(ns: u64, samples: u64, timed: bool) -> String {
    if timed {
        fmt_ns(ns as f64)
    } else {
        format!("{samples} samples")
    }
}

fn tooltip(p: &StackProfile, tree: &Tree, n: &Node, total: u64, timed: bool) -> String {
    let (name, kind) = &tree.labels[n.label as usize];
    let w = n.weight();
    let mut t = name.clone();
    match kind {
        LabelKind::Frame(k) => {
            t.push_str(if *k == FrameKind::Kernel {
                " (kernel)"
            } else {
                ""
            });
            if let Some(l) = layer_label(name, *k) {
                let _ = write!(t, " — {l}");
            }
        }
        LabelKind::Comm => t.push_str(" (process)"),
        _ => {}
    }
    let share = 100.0 * w as f64 / total.max(1) as f64;
    let _ = write!(
        t,
        "\n{} ({}% of all)",
        amount(w, n.on_samples, timed),
        sig3(share)
    );
    let off: u64 = n.off_ns.iter().fold(0u64, |t, &w| t.saturating_add(w));
    if off > 0 || p.has_off_cpu() {
        let _ = write!(
            t,
            "\non CPU {}",
            amount(n.on_ns, n.on_samples, timed || n.on_samples == 0)
        );
        if n.on_samples > 0 && timed {
            let _ = write!(t, " ({} samples)", n.on_samples);
        }
        for r in OffCpuReason::ALL {
            let x = n.off_ns[reason_index(r)];
            if x > 0 {
                let _ = write!(t, "\noff CPU, {}: {}", r.describe(), fmt_ns(x as f64));
            }
        }
    } else if timed && n.on_samples > 0 {
        let _ = write!(t, " — {} samples", n.on_samples);
    }
    t
}

const SCRIPT: &str = r#"
(function(){
var svg=document.getElementById('iolens-flame');if(!svg)return;
var W=+svg.getAttribute('data-plot'),X0=+svg.getAttribute('data-x0'),CH=+svg.getAttribute('data-ch');
var gs=svg.querySelectorAll('g.f'),N=[];
for(var i=0;i<gs.length;i++){var g=gs[i];N.push({g:g,x:+g.getAttribute('data-x'),w:+g.getAttribute('data-w'),d:+g.getAttribute('data-d'),r:g.querySelector('rect'),t:g.querySelector('text'),n:g.getAttribute('data-n'),f:g.querySelector('rect').getAttribute('fill')});}
var root=N[0],details=svg.querySelector('#details'),matched=svg.querySelector('#matched'),unzoom=svg.querySelector('#unzoom');
var state={zoom:0,search:''};
function label(n,w){var c=Math.floor(w/CH);if(c<3)return '';return n.length<=c?n:n.slice(0,c-2)+'..';}
function place(n,x,w){n.g.style.display='';n.r.setAttribute('x',x.toFixed(2));n.r.setAttribute('width',Math.max(w,0).toFixed(2));n.t.setAttribute('x',(x+3).toFixed(2));n.t.textContent=label(n.n,w);}
function zoom(id){var z=N[id]||root;state.zoom=N.indexOf(z);var s=W/z.w;
for(var i=0;i<N.length;i++){var n=N[i];
 if(n.d<z.d){if(n.x<=z.x&&n.x+n.w>=z.x+z.w){place(n,X0,W);n.g.classList.add('anc');}else{n.g.style.display='none';}}
 else if(n.x>=z.x&&n.x+n.w<=z.x+z.w&&(n.d>z.d||n===z)){place(n,X0+(n.x-z.x)*s,n.w*s);n.g.classList.remove('anc');}
 else{n.g.style.display='none';}}
unzoom.style.opacity=z===root?'0.3':'1';write();}
function search(term){state.search=term||'';var re=null;if(term){try{re=new RegExp(term);}catch(e){re=null;}}
var hit=[];for(var i=0;i<N.length;i++){var n=N[i],m=re&&re.test(n.n);n.r.setAttribute('fill',m?'rgb(230,0,230)':n.f);if(m)hit.push(n);}
// Matched share: widths of matched frames not inside another matched frame.
var sum=0,end=-1;hit.sort(function(a,b){return a.x-b.x||a.d-b.d;});
for(var i=0;i<hit.length;i++){var h=hit[i];if(h.x>=end){sum+=h.w;end=h.x+h.w;}else if(h.x+h.w>end){sum+=h.x+h.w-end;end=h.x+h.w;}}
matched.textContent=re?('Matched: '+(100*sum/root.w).toFixed(1)+'%'):'';write();}
function write(){var p=[];if(state.zoom>0)p.push('zoom='+state.zoom);if(state.search)p.push('search='+encodeURIComponent(state.search));
var h=p.length?'#'+p.join('&'):'';if(location.hash!==h&&!(h===''&&location.hash==='')){try{history.replaceState(null,'',h||location.pathname+location.search);}catch(e){}}}
function fromHash(){var h=location.hash.replace(/^#/,''),z=0,s='';h.split('&').forEach(function(kv){var i=kv.indexOf('=');if(i<0)return;var k=kv.slice(0,i),v=decodeURIComponent(kv.slice(i+1));if(k==='zoom')z=parseInt(v,10)||0;if(k==='search')s=v;});
zoom(z);search(s);}
svg.addEventListener('click',function(e){var g=e.target.closest?e.target.closest('g.f'):null;if(g){zoom(N.indexOf(N.filter(function(n){return n.g===g;})[0]));}});
svg.addEventListener('mouseover',function(e){var g=e.target.closest?e.target.closest('g.f'):null;if(g){var t=g.querySelector('title');details.textContent=t?t.textContent.split('\n').slice(0,2).join(' — '):'';}});
svg.querySelector('#unzoom').addEventListener('click',function(e){e.stopPropagation();zoom(0);});
svg.querySelector('#search').addEventListener('click',function(e){e.stopPropagation();var t=window.prompt('Search frames (regular expression)',state.search);if(t!==null)search(t);});
window.addEventListener('hashchange',fromHash);
svg.iolensZoom=zoom;svg.iolensSearch=search;
fromHash();
})();
"#;

/// A title for the flame graph of a results document: what was profiled.
pub fn title(r: &crate::results::Results) -> String {
    let Some(p) = &r.profile else {
        return "Flame graph".into();
    };
    let s = &p.source;
    let what = if let Some(c) = &s.comm {
        format!("processes named {c}")
    } else if !s.pids.is_empty() {
        format!(
            "pid {}",
            s.pids
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        s.producer.clone()
    };
    format!(
        "{} flame graph: {what}",
        if p.has_off_cpu() {
            "On- and off-CPU"
        } else {
            "On-CPU"
        }
    )
}

/// The flame graph as a standalone SVG document (`standalone`) or as an element to inline in
/// HTML.
pub(crate) fn flame_svg(p: &StackProfile, title: &str, standalone: bool) -> String {
    let tree = Tree::build(p);
    let timed = p.source.period_ns.is_some() || p.has_off_cpu();
    let total = tree.nodes[0].weight();
    let plot = WIDTH - 2.0 * PAD;
    let scale = if total > 0 { plot / total as f64 } else { 0.0 };
    // Lay out depth-first, children in order; keep nodes wide enough to draw.
    let mut order: Vec<(u32, u64)> = Vec::new(); // (node, x in weight units)
    let mut stack = vec![(0u32, 0u64)];
    let mut max_depth = 0u32;
    while let Some((id, x)) = stack.pop() {
        let n = &tree.nodes[id as usize];
        if id != 0 && n.weight() as f64 * scale < MIN_WIDTH_PX {
            continue;
        }
        order.push((id, x));
        max_depth = max_depth.max(n.depth);
        let mut cx = x;
        let mut kids = Vec::with_capacity(n.children.len());
        for &c in &n.children {
            kids.push((c, cx));
            cx += tree.nodes[c as usize].weight();
        }
        stack.extend(kids.into_iter().rev());
    }
    let height = TOP + BOTTOM + (max_depth as f64 + 1.0) * ROW;
    let mut out = String::with_capacity(order.len() * 300 + 8192);
    if standalone {
        out.push_str("<?xml version=\"1.0\" standalone=\"no\"?>\n");
    }
    let _ = write!(
        out,
        "<svg id=\"iolens-flame\" class=\"flame\" version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" \
         width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" \
         data-plot=\"{plot}\" data-x0=\"{PAD}\" data-ch=\"{CHAR_PX}\" data-total=\"{total}\">\
         <style>#iolens-flame text{{font-family:Verdana,sans-serif;font-size:{FONT}px;fill:#000}}\
         #iolens-flame g.f{{cursor:pointer}}#iolens-flame g.f:hover rect{{stroke:#000;stroke-width:0.5}}\
         #iolens-flame g.anc{{opacity:0.55}}#iolens-flame .ui{{cursor:pointer;fill:#225}}\
         #iolens-flame .legend{{font-size:11px}}</style>\
         <rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{height}\" fill=\"#fbfbf6\"/>"
    );
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"20\" text-anchor=\"middle\" style=\"font-size:16px\">{}</text>",
        WIDTH / 2.0,
        esc(title)
    );
    // Subtitle: what the widths are, and the legend.
    let on = p.weight_ns(StackState::OnCpu);
    let off = p.total_weight_ns().saturating_sub(on);
    let sub = if p.has_off_cpu() {
        format!(
            "width = time: {} on CPU ({} samples), {} off CPU",
            fmt_ns(on as f64),
            p.on_cpu_samples(),
            fmt_ns(off as f64)
        )
    } else if timed {
        format!(
            "width = CPU time: {} samples, {}",
            p.on_cpu_samples(),
            fmt_ns(on as f64)
        )
    } else {
        format!("width = samples: {}", p.on_cpu_samples())
    };
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"38\" text-anchor=\"middle\" class=\"legend\">{}</text>",
        WIDTH / 2.0,
        esc(&sub)
    );
    let legend = [
        ("rgb(230,120,40)", "on CPU, user"),
        ("rgb(237,155,30)", "on CPU, kernel"),
        ("rgb(60,130,230)", "off CPU, I/O wait"),
        ("rgb(155,130,220)", "off CPU, other sleep"),
        ("rgb(90,195,110)", "off CPU, runnable (waiting for a CPU)"),
    ];
    let mut lx = PAD;
    for (c, t) in legend {
        let _ = write!(
            out,
            "<rect x=\"{lx}\" y=\"46\" width=\"10\" height=\"10\" fill=\"{c}\"/>\
             <text x=\"{}\" y=\"55\" class=\"legend\">{t}</text>",
            lx + 14.0
        );
        lx += 14.0 + t.len() as f64 * 6.2 + 16.0;
    }
    let _ = write!(
        out,
        "<text id=\"unzoom\" class=\"ui\" x=\"{PAD}\" y=\"20\" style=\"opacity:0.3\">Reset zoom</text>\
         <text id=\"search\" class=\"ui\" x=\"{}\" y=\"20\" text-anchor=\"end\">Search</text>\
         <text id=\"matched\" x=\"{}\" y=\"{}\" text-anchor=\"end\"></text>\
         <text id=\"details\" x=\"{PAD}\" y=\"{}\"> </text>",
        WIDTH - PAD,
        WIDTH - PAD,
        height - 10.0,
        height - 10.0
    );
    for (k, &(id, x)) in order.iter().enumerate() {
        let n = &tree.nodes[id as usize];
        let (name, kind) = &tree.labels[n.label as usize];
        let w = n.weight();
        let px = PAD + x as f64 * scale;
        let pw = w as f64 * scale;
        let y = height - BOTTOM - (n.depth as f64 + 1.0) * ROW;
        let chars = (pw / CHAR_PX).floor() as usize;
        let text = if chars < 3 {
            String::new()
        } else if name.chars().count() <= chars {
            name.clone()
        } else {
            let mut t: String = name.chars().take(chars - 2).collect();
            t.push_str("..");
            t
        };
        let _ = write!(
            out,
            "<g class=\"f\" data-id=\"{k}\" data-x=\"{x}\" data-w=\"{w}\" data-d=\"{}\" data-n=\"{}\">\
             <title>{}</title><rect x=\"{px:.2}\" y=\"{y}\" width=\"{pw:.2}\" height=\"{}\" fill=\"{}\" rx=\"2\"/>\
             <text x=\"{:.2}\" y=\"{}\">{}</text></g>",
            n.depth,
            esc(name),
            esc(&tooltip(p, &tree, n, total, timed)),
            ROW - 1.0,
            fill(name, *kind, n),
            px + 3.0,
            y + ROW - 4.5,
            esc(&text)
        );
    }
    let _ = write!(out, "<script><![CDATA[{SCRIPT}]]></script></svg>");
    out
}
