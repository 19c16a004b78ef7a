//! What `iolens watch` follows: processes by pid or name, block devices by path or name.
//! Every filter is checked before any probe is loaded, so a typo is a clear error.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use anyhow::{bail, Result};

pub(crate) use crate::bpf::COMM_LEN;

/// A block device to watch: its whole disk (partitions map to their disk).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Kernel name of the disk (`vda`, `nvme0n1`).
    pub name: String,
    /// `major << 20 | minor` of the disk, as the BPF side reports it.
    pub dev: u32,
}

/// The filters of one watch. Empty pids and comms: every process; empty devices: every device.
#[derive(Clone, Debug, Default)]
pub struct Filters {
    pub(crate) pids: Vec<u32>,
    pub(crate) comms: Vec<String>,
    pub devices: Vec<Device>,
}

impl Filters {
    /// Check and resolve the filters given on the command line. A process name must be the
    /// name of a running process (its main thread's, as `ps -e -o comm` shows it) unless `wait`
    /// (a process of that name is expected to start).
    pub fn new(pids: &[u32], comms: &[String], devices: &[String], wait: bool) -> Result<Filters> {
        for &p in pids {
            if p == 0 || !crate::sys::alive(p) {
                bail!("--pid {p}: no such process (is it still running? `ps -p {p}` shows it)");
            }
        }
        let mut names = Vec::new();
        for c in comms {
            if c.is_empty() {
                bail!("--comm needs a process name, e.g. --comm postgres");
            }
            if c.contains('/') {
                bail!(
                    "--comm {c}: give the process name as `ps -o comm` shows it (e.g. postgres), \
                     not a path"
                );
            }
            // The kernel truncates names; matching on the truncated form follows long names.
            let t: String = truncate_comm(c);
            if !wait && !process_named(&t) {
                bail!(
                    "--comm {c}: no running process has this name (`ps -e -o comm` lists them; \
                     the name is the process's, not a thread's); add --wait to watch for one \
                     to start"
                );
            }
            if !names.contains(&t) {
                names.push(t);
            }
        }
        let mut devs = Vec::new();
        for d in devices {
            let dev = resolve_device(d)?;
            if !devs.contains(&dev) {
                devs.push(dev);
            }
        }
        Ok(Filters {
            pids: pids.to_vec(),
            comms: names,
            devices: devs,
        })
    }

    /// Whether block requests of device `dev` (`major << 20 | minor`) are recorded.
    pub(crate) fn wants_device(&self, dev: u32) -> bool {
        self.devices.is_empty() || self.devices.iter().any(|d| d.dev == dev)
    }

    /// The one name every watched process has, when only one --comm (and no --pid) is given:
    /// the name of a process that exited before it could be looked up.
    pub(crate) fn only_comm(&self) -> Option<String> {
        match (self.pids.is_empty(), self.comms.as_slice()) {
            (true, [one]) => Some(one.clone()),
            _ => None,
        }
    }

    /// Whether every process is watched (no --pid, no --comm).
    pub(crate) fn all_processes(&self) -> bool {
        self.pids.is_empty() && self.comms.is_empty()
    }
}

fn truncate_comm(c: &str) -> String {
    let mut end = c.len().min(COMM_LEN);
    while !c.is_char_boundary(end) {
        end -= 1;
    }
    c[..end].to_string()
}

/// The name (`comm`) of process `pid`, if it still exists.
pub(crate) fn comm_of(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end_matches('\n').to_string())
}

/// Whether a running process (its main thread) is named `name` (already truncated).
pub(crate) fn process_named(name: &str) -> bool {
    let self_pid = std::process::id();
    let Ok(dir) = fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| p != self_pid)
        .any(|p| comm_of(p).is_some_and(|c| c == name))
}

/// Names are looked at for pruning once there are this many (and then each time their number
/// doubled since the last look: amortised, a /proc lookup per name set at most).
const NAMES_LOOK: usize = 4096;
/// A name reported this recently (ns) is kept even if its process is gone: its events may
/// still wait in a per-CPU batch (flushed at the CPU's next event 5 ms after the batch began).
const NAMES_KEEP_NS: u64 = 2_000_000_000;

/// The watched processes' names as the kernel side reported them (`EV_NAME`: when a process's
/// first thread is first seen, and at each rename of its main thread). Each process's events
/// come after its name, so a process that exited before user space read its events (a
/// short-lived one, its syscalls waiting in a batch) keeps its name instead of `(exited)`.
/// Bounded: the names of processes gone for a while are dropped (see [`NAMES_KEEP_NS`]).
pub(crate) struct Names {
    /// tgid → (name, when it was reported, kernel ns).
    map: std::collections::HashMap<u32, (String, u64)>,
    /// The size at which the map is next pruned.
    look_at: usize,
}

impl Default for Names {
    fn default() -> Names {
        Names {
            map: Default::default(),
            look_at: NAMES_LOOK,
        }
    }
}

impl Names {
    /// Process `tgid` is named `name` from `ts` (kernel ns) on.
    pub(crate) fn set(&mut self, tgid: u32, name: String, ts: u64) {
        self.map.insert(tgid, (name, ts));
        if self.map.len() >= self.look_at {
            self.map.retain(|p, (_, t)| {
                ts.saturating_sub(*t) < NAMES_KEEP_NS || Path::new(&format!("/proc/{p}")).exists()
            });
            self.look_at = NAMES_LOOK.max(2 * self.map.len());
        }
    }

    /// Process `tgid`'s name: as reported, else from `/proc` while it runs.
    pub(crate) fn comm(&self, tgid: u32) -> Option<String> {
        self.map
            .get(&tgid)
            .map(|(n, _)| n.clone())
            .or_else(|| comm_of(tgid))
    }
}

/// The name of thread `tid` of process `pid`, while it lives.
pub(crate) fn thread_comm(pid: u32, tid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
        .ok()
        .map(|s| s.trim_end_matches('\n').to_string())
}

/// Kernel name of block device `major:minor`, or `major:minor` when sysfs does not know it.
pub(crate) fn device_name(major: u32, minor: u32) -> String {
    fs::read_link(format!("/sys/dev/block/{major}:{minor}"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .unwrap_or_else(|| format!("{major}:{minor}"))
}

fn parse_dev(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Resolve `/dev/vda`, `vda`, `/dev/vda1` or `254:0` to its whole disk.
pub fn resolve_device(given: &str) -> Result<Device> {
    let (major, minor) = if let Some(mm) = parse_dev(given) {
        mm
    } else {
        let path = if given.starts_with('/') {
            given.to_string()
        } else {
            format!("/dev/{given}")
        };
        match fs::metadata(&path) {
            Ok(m) if m.file_type().is_block_device() => {
                let rdev = m.rdev();
                (libc::major(rdev), libc::minor(rdev))
            }
            Ok(_) => bail!(
                "--device {given}: {path} is not a block device (name a disk such as /dev/vda; \
                 `lsblk` lists them)"
            ),
            Err(_) => bail!("--device {given}: no such block device (`lsblk` lists them)"),
        }
    };
    let sys = format!("/sys/dev/block/{major}:{minor}");
    let Ok(real) = fs::canonicalize(&sys) else {
        bail!("--device {given}: the kernel has no block device {major}:{minor}");
    };
    // A partition's sysfs directory sits inside its disk's and has a `partition` file.
    let disk_dir = if real.join("partition").exists() {
        real.parent().map(Path::to_path_buf).unwrap_or(real.clone())
    } else {
        real.clone()
    };
    let name = disk_dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| given.to_string());
    let Some((dmaj, dmin)) = fs::read_to_string(disk_dir.join("dev"))
        .ok()
        .and_then(|s| parse_dev(&s))
    else {
        bail!("--device {given}: cannot read the disk's number from sysfs");
    };
    Ok(Device {
        name,
        dev: (dmaj << 20) | dmin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_resolve_to_their_disk_and_bad_ones_are_refused() {
        let root = fs::metadata("/").unwrap().dev();
        let (maj, min) = (libc::major(root), libc::minor(root));
        if fs::canonicalize(format!("/sys/dev/block/{maj}:{min}")).is_ok() {
            let d = resolve_device(&format!("{maj}:{min}")).unwrap();
            assert!(!d.name.is_empty());
            assert!(resolve_device(&format!("/dev/{}", d.name)).is_ok());
        }
        let e = resolve_device("/dev/no-such-disk-xyz").unwrap_err();
        assert!(e.to_string().contains("no such block device"), "{e}");
        let e = resolve_device("/dev/null").unwrap_err();
        assert!(e.to_string().contains("not a block device"), "{e}");
    }

    #[test]
    fn pids_and_names_are_checked() {
        assert!(Filters::new(&[std::process::id()], &[], &[], false).is_ok());
        let e = Filters::new(&[999_999_999], &[], &[], false).unwrap_err();
        assert!(e.to_string().contains("no such process"), "{e}");
        let f = Filters::new(&[], &["a-very-long-process-name".into()], &[], true).unwrap();
        assert_eq!(f.comms, vec!["a-very-long-pro".to_string()]);
        assert_eq!(&crate::bpf::comm_key("postgres")[..9], b"postgres\0");
        assert!(Filters::new(&[], &["/usr/bin/x".into()], &[], true).is_err());
        // A name no process has is an error, unless waiting for one.
        let e = Filters::new(&[], &["no-such-procXY".into()], &[], false).unwrap_err();
        assert!(e.to_string().contains("no running process"), "{e}");
        // PID 1 always runs: its name is found.
        let init = comm_of(1).unwrap();
        assert!(Filters::new(&[], &[init], &[], false).is_ok());
    }
}
