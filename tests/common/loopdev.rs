//! Loop devices for tests: attached over a file, detached when dropped (waiting for the kernel
//! to let the device go, so the next test does not see one this test already released).

use std::path::Path;
use std::process::Command;

/// A loop device (`/dev/loopN`) over a file.
pub struct Loop(pub String);

impl Loop {
    /// Attach a free loop device over `backing`; `None` where there is none (not root, no
    /// loop driver), with the reason on stderr.
    pub fn attach(backing: &Path) -> Option<Loop> {
        let o = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(backing)
            .output()
            .ok()?;
        if !o.status.success() {
            eprintln!(
                "note: losetup: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return None;
        }
        Some(Loop(String::from_utf8_lossy(&o.stdout).trim().to_string()))
    }

    /// The device's path (`/dev/loopN`).
    pub fn dev(&self) -> &str {
        &self.0
    }

    /// The device's name in /sys/block and /proc/diskstats (`loopN`).
    pub fn name(&self) -> &str {
        self.0.trim_start_matches("/dev/")
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
        // The kernel detaches a loop device still in use (just unmounted, udev probing it)
        // only when its last user closes it: wait for that.
        let sys = format!("/sys/block/{}/loop/backing_file", self.name());
        for _ in 0..200 {
            if !Path::new(&sys).exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}
