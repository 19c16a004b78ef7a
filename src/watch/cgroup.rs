//! The cgroups that limit the watched processes' block I/O.
//!
//! A cgroup I/O limit (v2 `io.max`, v1 `blkio.throttle.*_device`) is enforced by blk-throttle,
//! which holds a bio in `submit_bio` before it becomes a request: no block tracepoint sees the
//! wait (the bio is submitted again later, from a kernel worker), so the probes see the time
//! only as syscall time above the block layer. What names the cause is the cgroup itself: each
//! watched process's cgroup (`/proc/PID/cgroup`) and its ancestors, the limits set there, and
//! what the cgroup completed on each limited device over the watch (`io.stat`, v1
//! `blkio.throttle.io_serviced` / `io_service_bytes`), with v2's `io.pressure` stall time.
//! The counters are read every [`SAMPLE`] while watching, so that the rate is taken while the
//! cgroup did I/O (from the first reading that saw it to the last), not diluted by the time
//! before and after. The analysis compares that rate with the limit.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::results::{CgroupIoLimit, WatchCgroup};

/// Per device (`MAJ:MIN`): reads, writes, read bytes, written bytes completed.
type Counters = BTreeMap<String, [u64; 4]>;

/// How often the limiting cgroups' counters are read.
pub(crate) const SAMPLE: Duration = Duration::from_millis(100);

/// A limiting cgroup found, with its counters when first found.
struct Tracked {
    dir: PathBuf,
    /// The first pids found in it (at most [`WatchCgroup::PIDS_KEPT`]), and how many in all.
    pids: BTreeSet<u32>,
    processes: u64,
    since: Instant,
    start: Counters,
    pressure_us: Option<u64>,
    /// Per device: the last counters read, and the first and last readings that changed.
    seen: BTreeMap<String, Busy>,
}

/// One device's readings in a cgroup.
#[derive(Default)]
struct Busy {
    last: [u64; 4],
    first_change: Option<(Instant, [u64; 4])>,
    last_change: Option<(Instant, [u64; 4])>,
}

impl Tracked {
    fn sample(&mut self, version: u8) {
        let now = Instant::now();
        for (dev, c) in counters(version, &self.dir) {
            let b = self.seen.entry(dev.clone()).or_insert_with(|| Busy {
                last: self.start.get(&dev).copied().unwrap_or_default(),
                ..Default::default()
            });
            if c != b.last {
                b.first_change.get_or_insert((now, c));
                b.last_change = Some((now, c));
                b.last = c;
            }
        }
    }
}

/// The watched processes' limiting cgroups, looked up once per process.
#[derive(Default)]
pub(crate) struct CgroupTracker {
    looked: HashSet<u32>,
    /// By (version, path).
    groups: BTreeMap<(u8, String), Tracked>,
    mounts: Option<Mounts>,
}

/// Where the hierarchies are mounted: the cgroup v2 mount, the v1 blkio mount.
#[derive(Default)]
struct Mounts {
    v2: Option<PathBuf>,
    v1_blkio: Option<PathBuf>,
}

impl Mounts {
    fn read() -> Mounts {
        let mut m = Mounts::default();
        let Ok(text) = fs::read_to_string("/proc/self/mounts") else {
            return m;
        };
        for l in text.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (Some(dir), Some(kind), Some(opts)) = (f.get(1), f.get(2), f.get(3)) else {
                continue;
            };
            if *kind == "cgroup2" && m.v2.is_none() {
                m.v2 = Some(PathBuf::from(dir));
            } else if *kind == "cgroup"
                && m.v1_blkio.is_none()
                && opts.split(',').any(|o| o == "blkio")
            {
                m.v1_blkio = Some(PathBuf::from(dir));
            }
        }
        m
    }
}

/// A cgroup's limits, per device: riops, wiops, rbps, wbps.
fn limits(version: u8, dir: &Path) -> BTreeMap<String, [Option<u64>; 4]> {
    let mut out: BTreeMap<String, [Option<u64>; 4]> = BTreeMap::new();
    if version == 2 {
        let text = fs::read_to_string(dir.join("io.max")).unwrap_or_default();
        for l in text.lines() {
            let mut f = l.split_whitespace();
            let Some(dev) = f.next() else { continue };
            let mut row = [None; 4];
            for kv in f {
                let Some((k, v)) = kv.split_once('=') else {
                    continue;
                };
                let i = match k {
                    "riops" => 0,
                    "wiops" => 1,
                    "rbps" => 2,
                    "wbps" => 3,
                    _ => continue,
                };
                row[i] = v.parse().ok();
            }
            if row.iter().any(Option::is_some) {
                out.insert(dev.to_string(), row);
            }
        }
    } else {
        for (i, file) in [
            "blkio.throttle.read_iops_device",
            "blkio.throttle.write_iops_device",
            "blkio.throttle.read_bps_device",
            "blkio.throttle.write_bps_device",
        ]
        .iter()
        .enumerate()
        {
            let text = fs::read_to_string(dir.join(file)).unwrap_or_default();
            for l in text.lines() {
                let f: Vec<&str> = l.split_whitespace().collect();
                if let [dev, v] = f[..] {
                    if let Ok(v) = v.parse::<u64>() {
                        out.entry(dev.to_string()).or_default()[i] = Some(v);
                    }
                }
            }
        }
    }
    out
}

/// What a cgroup completed, per device.
fn counters(version: u8, dir: &Path) -> Counters {
    let mut out = Counters::new();
    if version == 2 {
        let text = fs::read_to_string(dir.join("io.stat")).unwrap_or_default();
        for l in text.lines() {
            let mut f = l.split_whitespace();
            let Some(dev) = f.next() else { continue };
            let row = out.entry(dev.to_string()).or_default();
            for kv in f {
                let Some((k, v)) = kv.split_once('=') else {
                    continue;
                };
                let i = match k {
                    "rios" => 0,
                    "wios" => 1,
                    "rbytes" => 2,
                    "wbytes" => 3,
                    _ => continue,
                };
                row[i] = v.parse().unwrap_or(0);
            }
        }
    } else {
        for (file, at) in [
            ("blkio.throttle.io_serviced", 0),
            ("blkio.throttle.io_service_bytes", 2),
        ] {
            let text = fs::read_to_string(dir.join(file)).unwrap_or_default();
            for l in text.lines() {
                let f: Vec<&str> = l.split_whitespace().collect();
                if let [dev, op, v] = f[..] {
                    let i = match op {
                        "Read" => at,
                        "Write" => at + 1,
                        _ => continue,
                    };
                    out.entry(dev.to_string()).or_default()[i] = v.parse().unwrap_or(0);
                }
            }
        }
    }
    out
}

/// v2's `io.pressure` "some" total, µs.
fn pressure_us(version: u8, dir: &Path) -> Option<u64> {
    if version != 2 {
        return None;
    }
    let text = fs::read_to_string(dir.join("io.pressure")).ok()?;
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace()
        .find_map(|kv| kv.strip_prefix("total="))?
        .parse()
        .ok()
}

/// The cgroup paths of process `pid`: (version, path) of its v2 cgroup and its v1 blkio one.
fn cgroups_of(pid: u32) -> Vec<(u8, String)> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let mut out = Vec::new();
    for l in text.lines() {
        let mut f = l.splitn(3, ':');
        let (Some(id), Some(ctl), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" && ctl.is_empty() {
            out.push((2, path.to_string()));
        } else if ctl.split(',').any(|c| c == "blkio") {
            out.push((1, path.to_string()));
        }
    }
    out
}

/// `path` and its ancestors up to the root, deepest first.
fn ancestors(path: &str) -> Vec<String> {
    let mut out = vec![path.to_string()];
    let mut p = path.trim_end_matches('/');
    while let Some(i) = p.rfind('/') {
        p = &p[..i];
        out.push(if p.is_empty() { "/".into() } else { p.into() });
        if p.is_empty() {
            break;
        }
    }
    out.dedup();
    out
}

impl CgroupTracker {
    /// Look up the cgroups of processes not looked up yet; a limiting cgroup found for the
    /// first time has its counters read now.
    pub(crate) fn look(&mut self, pids: impl IntoIterator<Item = u32>) {
        let mut now = HashSet::new();
        for pid in pids {
            now.insert(pid);
            if !self.looked.insert(pid) {
                continue;
            }
            let mounts = self.mounts.get_or_insert_with(Mounts::read);
            for (version, path) in cgroups_of(pid) {
                let root = if version == 2 {
                    &mounts.v2
                } else {
                    &mounts.v1_blkio
                };
                let Some(root) = root else { continue };
                for p in ancestors(&path) {
                    let key = (version, p.clone());
                    if let Some(t) = self.groups.get_mut(&key) {
                        t.processes += 1;
                        if t.pids.len() < WatchCgroup::PIDS_KEPT {
                            t.pids.insert(pid);
                        }
                        continue;
                    }
                    let dir = root.join(p.trim_start_matches('/'));
                    if limits(version, &dir).is_empty() {
                        continue;
                    }
                    self.groups.insert(
                        key,
                        Tracked {
                            start: counters(version, &dir),
                            pressure_us: pressure_us(version, &dir),
                            since: Instant::now(),
                            pids: BTreeSet::from([pid]),
                            processes: 1,
                            dir,
                            seen: BTreeMap::new(),
                        },
                    );
                }
            }
        }
        // Remember only the processes passed now (those still in the watch's tables): a set of
        // every pid ever seen would grow with each process that came and went.
        if self.looked.len() > 2 * now.len() + 1024 {
            self.looked.retain(|p| now.contains(p));
        }
    }

    /// Read the limiting cgroups' counters (every [`SAMPLE`] while watching).
    pub(crate) fn sample(&mut self) {
        for ((version, _), t) in self.groups.iter_mut() {
            t.sample(*version);
        }
    }

    /// The limiting cgroups found, their limits and counters read again now.
    pub(crate) fn finish(mut self) -> Vec<WatchCgroup> {
        self.sample();
        self.report()
    }

    /// The limiting cgroups found so far, their limits and counters read now (the live view
    /// asks at each interval; [`finish`](Self::finish) at the end).
    pub(crate) fn report(&self) -> Vec<WatchCgroup> {
        self.groups
            .iter()
            .map(|((version, path), t)| {
                let (version, path) = (*version, path.clone());
                let now = counters(version, &t.dir);
                let limits = limits(version, &t.dir)
                    .into_iter()
                    .map(|(dev, [riops, wiops, rbps, wbps])| {
                        let end = now.get(&dev).copied().unwrap_or_default();
                        let start = t.start.get(&dev).copied().unwrap_or_default();
                        let d = |i: usize| end[i].saturating_sub(start[i]);
                        let (busy_s, busy) = match t.seen.get(&dev) {
                            Some(Busy {
                                first_change: Some((t0, c0)),
                                last_change: Some((t1, c1)),
                                ..
                            }) => (
                                t1.duration_since(*t0).as_secs_f64(),
                                [0, 1, 2, 3].map(|i| c1[i].saturating_sub(c0[i])),
                            ),
                            _ => (0.0, [0; 4]),
                        };
                        let disk = dev
                            .split_once(':')
                            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                            .map_or_else(|| dev.clone(), |(a, b)| super::filter::device_name(a, b));
                        CgroupIoLimit {
                            disk,
                            dev,
                            riops,
                            wiops,
                            rbps,
                            wbps,
                            reads: d(0),
                            writes: d(1),
                            read_bytes: d(2),
                            write_bytes: d(3),
                            busy_s,
                            busy,
                        }
                    })
                    .collect();
                let pressure_some_s = match (t.pressure_us, pressure_us(version, &t.dir)) {
                    (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e6),
                    _ => None,
                };
                WatchCgroup {
                    path,
                    version,
                    pids: t.pids.iter().copied().collect(),
                    processes: t.processes,
                    limits,
                    window_s: t.since.elapsed().as_secs_f64(),
                    pressure_some_s,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_go_up_to_the_root() {
        assert_eq!(ancestors("/a/b"), vec!["/a/b", "/a", "/"]);
        assert_eq!(ancestors("/"), vec!["/"]);
    }

    #[test]
    fn limits_and_counters_of_both_hierarchies_are_read() {
        let d = tempfile::tempdir().unwrap();
        fs::write(
            d.path().join("io.max"),
            "7:3 rbps=max wbps=1048576 riops=50 wiops=max\n8:0 rbps=max wbps=max riops=max wiops=max\n",
        )
        .unwrap();
        fs::write(
            d.path().join("io.stat"),
            "7:3 rbytes=8192 wbytes=0 rios=2 wios=0 dbytes=0 dios=0\n",
        )
        .unwrap();
        fs::write(
            d.path().join("io.pressure"),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=1500\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000\n",
        )
        .unwrap();
        let l = limits(2, d.path());
        assert_eq!(l.len(), 1, "{l:?}");
        assert_eq!(l["7:3"], [Some(50), None, None, Some(1048576)]);
        assert_eq!(counters(2, d.path())["7:3"], [2, 0, 8192, 0]);
        assert_eq!(pressure_us(2, d.path()), Some(1500));
        fs::write(d.path().join("blkio.throttle.read_iops_device"), "7:3 50\n").unwrap();
        fs::write(
            d.path().join("blkio.throttle.io_serviced"),
            "7:3 Read 12\n7:3 Write 3\n7:3 Sync 15\n7:3 Async 0\n7:3 Discard 0\n7:3 Total 15\nTotal 15\n",
        )
        .unwrap();
        assert_eq!(limits(1, d.path())["7:3"], [Some(50), None, None, None]);
        assert_eq!(counters(1, d.path())["7:3"], [12, 3, 0, 0]);
        assert_eq!(pressure_us(1, d.path()), None);
    }
}
