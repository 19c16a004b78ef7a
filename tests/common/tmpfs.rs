//! A small tmpfs mounted on a fresh directory (root), unmounted on drop: a filesystem the
//! safety tests can fill to the last byte.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of a given size, mounted on a temp directory; unmounted when dropped.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mount a tmpfs of `size` (`1m`, `8M`…); `None` (with a note) where it cannot be mounted,
    /// a failure under CI (which runs as root).
    pub fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            assert!(!super::ci(), "cannot mount a tmpfs (CI runs as root)");
            eprintln!("note: skipped (cannot mount a tmpfs here)");
            return None;
        }
        Some(Tmpfs { dir })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fill the filesystem to the last byte; the filler file's path.
    pub fn fill(&self) -> PathBuf {
        use std::io::Write;
        let p = self.path().join("filler");
        let mut f = std::fs::File::create(&p).unwrap();
        let buf = vec![0x5au8; 64 << 10];
        while f.write(&buf).is_ok_and(|n| n > 0) {}
        while f.write(&buf[..512]).is_ok_and(|n| n > 0) {}
        p
    }

    /// Fill the filesystem to the last byte, then free `leave` bytes.
    pub fn fill_leaving(&self, leave: u64) {
        let p = self.fill();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        let len = f.metadata().unwrap().len();
        f.set_len(len.saturating_sub(leave)).unwrap();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}
