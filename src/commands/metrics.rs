//! The metrics exposition at the command edge: `watch --prometheus ADDR` serves `/metrics` over
//! HTTP while it watches, and `run`, `calibrate`, `db run --metrics FILE` write the exposition
//! of their results once at the end (node_exporter's textfile-collector style) through the one
//! writer.
//!
//! The server is std's `TcpListener` on one thread: Prometheus scrapes one request at a time per
//! target, a scrape is one `GET /metrics` answered with `Connection: close`, and a plain
//! listener needs no new dependency. The watch publishes its exposition at the end of every
//! interval; a scrape words the latest one (the watch's own thread never waits for a scrape):
//! as the protobuf exposition (with native histograms) when its `Accept` header asks for that
//! first, as Prometheus does with `--enable-feature=native-histograms`, else as text.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};

use crate::render::prometheus;
use crate::results::exposition::Exposition;
use crate::results::metric_family::PROTOBUF_CONTENT_TYPE;

/// The latest exposition, shared with the server's thread.
type Latest = Arc<Mutex<Arc<Exposition>>>;

/// A `/metrics` endpoint serving the latest published exposition.
pub(crate) struct MetricsServer {
    latest: Latest,
    pub(crate) addr: SocketAddr,
}

/// `ADDR` as `--prometheus` takes it: `HOST:PORT`, `[V6]:PORT`, or `:PORT` (every interface).
fn parse_addr(addr: &str) -> Result<SocketAddr> {
    let spelled = if let Some(port) = addr.strip_prefix(':') {
        format!("0.0.0.0:{port}")
    } else {
        addr.to_string()
    };
    spelled
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| {
            format!(
                "--prometheus {addr:?}: not an address to listen on (HOST:PORT or :PORT, e.g. \
                 127.0.0.1:9464 or :9464)"
            )
        })
}

impl MetricsServer {
    /// Listen on `addr` (before the watch starts: a port in use is an error at once).
    pub(crate) fn bind(addr: &str) -> Result<MetricsServer> {
        let sa = parse_addr(addr)?;
        let listener = TcpListener::bind(sa).with_context(|| {
            format!(
                "--prometheus {addr}: cannot listen there (another exporter's port? \
                 node_exporter uses 9100, postgres_exporter 9187, ebpf_exporter 9435)"
            )
        })?;
        let addr = listener.local_addr()?;
        let latest: Latest = Arc::new(Mutex::new(Arc::new(Exposition::default())));
        let shared = latest.clone();
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    let e = shared.lock().map(|g| g.clone()).ok();
                    let _ = answer(stream, e.as_deref());
                }
            })?;
        Ok(MetricsServer { latest, addr })
    }

    /// What the next scrapes see.
    pub(crate) fn publish(&self, e: Exposition) {
        if let Ok(mut g) = self.latest.lock() {
            *g = Arc::new(e);
        }
    }
}

/// Answer one HTTP request: `GET /metrics` (or `HEAD`) with the exposition, anything else 404
/// or 405.
fn answer(mut s: TcpStream, e: Option<&Exposition>) -> Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > 16 * 1024 {
            bail!("request head too long");
        }
    }
    let head = String::from_utf8_lossy(&buf);
    let mut first = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let accept = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("accept"))
        .map_or("", |(_, v)| v.trim());
    let (status, ctype, body): (_, _, Vec<u8>) = match (method, path) {
        ("GET" | "HEAD", "/metrics") if prometheus::wants_protobuf(accept) => (
            "200 OK",
            PROTOBUF_CONTENT_TYPE,
            e.map(prometheus::protobuf).unwrap_or_default(),
        ),
        ("GET" | "HEAD", "/metrics") => (
            "200 OK",
            prometheus::CONTENT_TYPE,
            e.map(prometheus::text).unwrap_or_default().into_bytes(),
        ),
        ("GET" | "HEAD", "/") => (
            "200 OK",
            "text/plain; charset=utf-8",
            b"iolens watch: metrics at /metrics\n".to_vec(),
        ),
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            b"not found: the metrics are at /metrics\n".to_vec(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            b"only GET\n".to_vec(),
        ),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        out.extend_from_slice(&body);
    }
    s.write_all(&out)?;
    Ok(())
}

/// `--metrics FILE`: claimed from the command's output plan before any work.
pub(crate) fn metrics_output(
    plan: &mut crate::output::Plan,
    path: Option<&Path>,
) -> Result<Option<(PathBuf, crate::output::Output)>> {
    let Some(p) = path else {
        return Ok(None);
    };
    // Classic histograms of a calibration's steps: a few MB at most.
    let out = plan.output("--metrics", p, crate::output::Holds::Other, 4 << 20)?;
    Ok(Some((p.to_path_buf(), out)))
}

/// Write the results' exposition to the output claimed by [`metrics_output`].
pub(crate) fn write_metrics(
    results: &crate::results::Results,
    out: Option<(PathBuf, crate::output::Output)>,
) -> Result<()> {
    let Some((path, out)) = out else {
        return Ok(());
    };
    let an = crate::analysis::of(results);
    let e = prometheus::of_results(results, &an)?;
    out.write_bytes(prometheus::text(&e).as_bytes())
        .with_context(|| format!("cannot write the metrics to {}", path.display()))?;
    Ok(())
}
