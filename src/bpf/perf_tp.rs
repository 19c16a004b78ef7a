//! Tracepoint programs (`SEC("tracepoint/...")`, BPF_PROG_TYPE_TRACEPOINT) attached to kernel
//! trace events through perf events: one perf event per trace event, the program set on each
//! (`PERF_EVENT_IOC_SET_BPF`). The kernel runs such a program only when its event fires, unlike
//! a raw tracepoint's, which runs at every hit of the tracepoint: attached to the per-syscall
//! events (`syscalls:sys_enter_pread64` …), a program runs for those syscalls only, while the
//! raw `sys_enter`/`sys_exit` programs run for every syscall of every process on the host.
//!
//! A trace event is named to perf by its id, which only tracefs publishes
//! (`events/<category>/<name>/id`). Where tracefs is not mounted (a host without systemd's
//! mount of it), it is mounted for the look on a private directory made for it and unmounted at
//! once: nothing of it stays.

use std::fs;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use aya::programs::TracePoint;
use aya::Ebpf;

use super::{describe, BpfError};

/// Where tracefs is usually mounted (by systemd; debugfs automounts it under its own).
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The perf events a tracepoint program is attached through: it stays attached while they are
/// open (dropped, they close).
#[derive(Default)]
pub(crate) struct PerfLinks {
    fds: Vec<OwnedFd>,
}

impl PerfLinks {
    /// Detach: close every perf event (the kernel then runs the program for none of them).
    pub(crate) fn detach(&mut self) {
        self.fds.clear();
    }

    /// Keep `other`'s perf events with these.
    pub(crate) fn extend(&mut self, other: PerfLinks) {
        self.fds.extend(other.fds);
    }

    pub(crate) fn len(&self) -> usize {
        self.fds.len()
    }
}

/// A tracefs mounted here for the look (unmounted and removed when dropped).
struct PrivateMount(PathBuf);

impl Drop for PrivateMount {
    fn drop(&mut self) {
        if let Ok(c) = std::ffi::CString::new(self.0.as_os_str().as_encoded_bytes()) {
            // SAFETY: umount2 reads the NUL-terminated path we own.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = fs::remove_dir(&self.0);
    }
}

fn has_events(root: &Path) -> bool {
    root.join("events").is_dir()
}

/// The ids of trace events `category:name` for each of `names` (the kernel's, from tracefs).
/// An event the kernel lacks is an error naming it.
pub(crate) fn event_ids(category: &str, names: &[String]) -> Result<Vec<u32>, String> {
    event_ids_in(&TRACEFS, category, names)
}

/// As [`event_ids`], with tracefs looked for in `roots` (none there: mounted for the look).
fn event_ids_in(roots: &[&str], category: &str, names: &[String]) -> Result<Vec<u32>, String> {
    let read = |root: &Path| -> Result<Vec<u32>, String> {
        names
            .iter()
            .map(|n| {
                let p = root.join("events").join(category).join(n).join("id");
                fs::read_to_string(&p)
                    .map_err(|e| format!("{}: {e}", p.display()))?
                    .trim()
                    .parse()
                    .map_err(|e| format!("{}: {e}", p.display()))
            })
            .collect()
    };
    if let Some(root) = roots.iter().map(Path::new).find(|p| has_events(p)) {
        return read(root);
    }
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("iolens-tracefs-{}-{n}", std::process::id()));
    read_private(dir, read)
}

/// `read` from a tracefs mounted on `dir` (made here), unmounted and removed after.
fn read_private(
    dir: PathBuf,
    read: impl Fn(&Path) -> Result<Vec<u32>, String>,
) -> Result<Vec<u32>, String> {
    fs::create_dir(&dir).map_err(|e| format!("tracefs is not mounted and {e}"))?;
    let mount = PrivateMount(dir);
    let c = std::ffi::CString::new(mount.0.as_os_str().as_encoded_bytes())
        .map_err(|e| e.to_string())?;
    // SAFETY: mount reads the NUL-terminated strings we own; no data argument.
    let r = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c.as_ptr(),
            c"tracefs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(format!(
            "tracefs is not mounted and cannot be: {}",
            std::io::Error::last_os_error()
        ));
    }
    read(&mount.0)
}

/// `struct perf_event_attr` as of its first version (PERF_ATTR_SIZE_VER0, 64 bytes): all a
/// tracepoint needs.
#[repr(C)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
// _IO('$', 0) and _IOW('$', 8, __u32).
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;

/// Load program `prog` (a `SEC("tracepoint/...")`) if it is not yet, and attach it to each
/// trace event of `ids` (every CPU, every process: a tracepoint program is the event's, not a
/// CPU's). `what` names them in errors.
pub(crate) fn attach(
    ebpf: &mut Ebpf,
    prog: &str,
    ids: &[u32],
    what: &str,
) -> Result<PerfLinks, BpfError> {
    let fail = |detail: String| BpfError::Attach {
        tracepoint: what.to_string(),
        detail,
    };
    let p: &mut TracePoint = ebpf
        .program_mut(prog)
        .ok_or_else(|| fail(format!("the object has no program {prog}")))?
        .try_into()
        .map_err(|e| fail(describe(&e)))?;
    if p.fd().is_err() {
        p.load().map_err(|e| fail(describe(&e)))?;
    }
    let prog_fd = p.fd().map_err(|e| fail(describe(&e)))?.as_fd().as_raw_fd();
    let mut links = PerfLinks::default();
    for &id in ids {
        let attr = PerfEventAttr {
            type_: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: u64::from(id),
            sample_period: 1,
            sample_type: 0,
            read_format: 0,
            flags: 0,
            wakeup_events: 1,
            bp_type: 0,
            config1: 0,
        };
        // SAFETY: perf_event_open reads the attribute struct we own (its size in `size`); pid -1
        // and CPU 0: the event's program runs wherever the event fires.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                -1 as libc::pid_t,
                0 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(if e.kind() == std::io::ErrorKind::PermissionDenied {
                BpfError::Refused {
                    detail: format!("perf_event_open of trace event {id}: {e}"),
                }
            } else {
                fail(format!("perf_event_open of trace event {id}: {e}"))
            });
        }
        // SAFETY: the kernel just gave us this descriptor; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        // SAFETY: ioctls on the perf event we own, with the program's descriptor as argument.
        let r = unsafe {
            if libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_BPF, prog_fd) != 0 {
                -1
            } else {
                libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0)
            }
        };
        if r != 0 {
            return Err(fail(format!(
                "attaching {prog} to trace event {id}: {}",
                std::io::Error::last_os_error()
            )));
        }
        links.fds.push(fd);
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where tracefs is not mounted, it is mounted for the look and gone after: the ids are the
    /// kernel's all the same (this host may have it mounted: the private mount is forced).
    #[test]
    fn event_ids_are_found_without_a_mounted_tracefs_and_it_leaves_nothing() {
        if !crate::bpf::may_run_as_root("mounting tracefs") {
            return;
        }
        let names: Vec<String> = ["sys_enter_pread64", "sys_exit_fdatasync"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let private = event_ids_in(&[], "syscalls", &names).unwrap();
        assert_eq!(private.len(), 2);
        assert_ne!(private[0], private[1]);
        // On a directory of its own: read, then unmounted and removed.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("tracefs");
        let seen = read_private(dir.clone(), |root| {
            let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
            assert!(
                mounts.contains(&format!("{} tracefs", root.display())),
                "{mounts}"
            );
            Ok(vec![u32::from(has_events(root))])
        })
        .unwrap();
        assert_eq!(seen, [1]);
        assert!(!dir.exists(), "{} left behind", dir.display());
        let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
        assert!(!mounts.contains(&dir.display().to_string()), "{mounts}");
        // The same ids as tracefs where the kernel keeps it (mounted again for the look if not).
        assert_eq!(event_ids("syscalls", &names).unwrap(), private);
        let err = event_ids_in(&[], "syscalls", &["sys_enter_no_such_call".into()]).unwrap_err();
        assert!(err.contains("sys_enter_no_such_call"), "{err}");
    }
}
