//! A cgroup I/O limit on one block device for chosen processes: blk-throttle, which holds bios
//! above the block layer before they become requests (what containers and Kubernetes set).
//! cgroup v2's `io.max` (`MAJ:MIN riops=N wiops=M`) where the io controller is on the v2
//! hierarchy; else cgroup v1's `blkio.throttle.read_iops_device` / `write_iops_device`, the
//! same throttle in the kernel (the development VM mounts blkio as v1). Needs root.

use std::ffi::CString;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The limit's cgroup; dropping it moves its processes back to the parent and removes it.
pub struct IoLimit {
    dir: PathBuf,
    parent: PathBuf,
    /// 2 for io.max, 1 for blkio.throttle.
    pub version: u8,
}

/// `MAJ:MIN` of block device `dev` (`/dev/loop3`).
pub fn dev_numbers(dev: &str) -> String {
    let rdev = std::fs::metadata(dev).unwrap().rdev();
    format!("{}:{}", libc::major(rdev), libc::minor(rdev))
}

/// The cgroup v2 mount whose root offers the io controller, if any.
fn v2_with_io() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let dir = Path::new(f.get(1)?);
        let controllers = std::fs::read_to_string(dir.join("cgroup.controllers")).ok()?;
        (f.get(2) == Some(&"cgroup2") && controllers.split_whitespace().any(|c| c == "io"))
            .then(|| dir.to_path_buf())
    })
}

/// The cgroup v1 blkio mount, if any.
fn v1_blkio() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"cgroup") && f.get(3)?.split(',').any(|o| o == "blkio"))
            .then(|| PathBuf::from(f[1]))
    })
}

impl IoLimit {
    /// A cgroup limiting reads and writes of block device `dev` to `riops` / `wiops` per
    /// second (`None`: unlimited). `None` (with a note) when not root or no cgroup offers an
    /// I/O throttle, except under CI, where that fails the test.
    pub fn new(dev: &str, riops: Option<u32>, wiops: Option<u32>) -> Option<IoLimit> {
        if !super::root_or_skip("a cgroup I/O limit") {
            return None;
        }
        let devno = dev_numbers(dev);
        let name = format!(
            "iolens-test-{}-{}",
            std::process::id(),
            devno.replace(':', "-")
        );
        let limit = if let Some(root) = v2_with_io() {
            std::fs::write(root.join("cgroup.subtree_control"), "+io").unwrap();
            let dir = root.join(&name);
            std::fs::create_dir(&dir).unwrap();
            let mut line = devno.clone();
            if let Some(r) = riops {
                line += &format!(" riops={r}");
            }
            if let Some(w) = wiops {
                line += &format!(" wiops={w}");
            }
            std::fs::write(dir.join("io.max"), line).unwrap();
            IoLimit {
                dir,
                parent: root,
                version: 2,
            }
        } else if let Some(root) = v1_blkio() {
            let dir = root.join(&name);
            std::fs::create_dir(&dir).unwrap();
            if let Some(r) = riops {
                std::fs::write(
                    dir.join("blkio.throttle.read_iops_device"),
                    format!("{devno} {r}"),
                )
                .unwrap();
            }
            if let Some(w) = wiops {
                std::fs::write(
                    dir.join("blkio.throttle.write_iops_device"),
                    format!("{devno} {w}"),
                )
                .unwrap();
            }
            IoLimit {
                dir,
                parent: root,
                version: 1,
            }
        } else {
            assert!(!super::ci(), "no cgroup offers an I/O throttle here");
            eprintln!("note: cgroup I/O limit test skipped: no io (v2) or blkio (v1) controller");
            return None;
        };
        Some(limit)
    }

    /// Makes the process `cmd` spawns join the cgroup before it runs its program (so all its
    /// I/O is limited, the first included).
    pub fn join_on_exec(&self, cmd: &mut Command) {
        let procs = CString::new(
            self.dir
                .join("cgroup.procs")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: the closure only calls open, write and close (async-signal-safe).
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
                libc::close(fd);
                if ok {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }

    /// Moves process `pid` (all its threads) into the cgroup.
    pub fn add(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for IoLimit {
    fn drop(&mut self) {
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write(self.parent.join("cgroup.procs"), pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
