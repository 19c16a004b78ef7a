//! Writing a results document: the one place every command's `--json` goes through.
//!
//! Rules (issue 10, item 4): results are written only to a regular file or a new path, or to
//! standard output when the path is `-`. Device nodes, FIFOs, sockets, directories and symbolic
//! links at the destination are refused with an error naming the path — a symlink is refused
//! rather than resolved, so a link planted where the results go can never make a run replace
//! what it points to (name the real file instead). The document is written to a temp file with a
//! random name in the destination's directory, created with `O_CREAT|O_EXCL|O_NOFOLLOW` (mode
//! 0644 before the umask), written, fsynced and renamed over the destination (a new path is
//! claimed with `RENAME_NOREPLACE`), then the directory is fsynced. On any failure (a full disk
//! included) the temp file is removed: nothing partial is left behind and an existing results
//! file stays as it was.
//!
//! [`Destination::check`] runs the same checks, and creates and removes a probe file in the
//! directory, before any measurement, so a bad `--json` fails at once instead of losing the run.

use std::ffi::{CString, OsStr};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use rand::Rng;

use super::Results;

/// Where a results document goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Standard output (`--json -`); the text for people then goes to stderr.
    Stdout,
    /// A regular file, replaced atomically, or a new path.
    File(PathBuf),
}

impl Destination {
    /// The destination a `--json` argument names (`-` is standard output).
    pub fn new(path: &Path) -> Destination {
        if path.as_os_str() == "-" {
            Destination::Stdout
        } else {
            Destination::File(path.to_path_buf())
        }
    }

    /// The destination of an optional `--json`, checked (see [`Destination::check`]). Commands
    /// call this before measuring anything.
    pub fn checked(path: Option<&Path>) -> Result<Option<Destination>> {
        path.map(|p| {
            let d = Destination::new(p);
            d.check()?;
            Ok(d)
        })
        .transpose()
    }

    /// Check, before measuring, that the results can be written here: the path is a regular
    /// file or new, its directory exists and a file can be created in it (a probe file is
    /// created and removed). For [`Destination::Stdout`] this reserves stdout for the results:
    /// the text for people goes to stderr from now on.
    pub fn check(&self) -> Result<()> {
        match self {
            Destination::Stdout => {
                // SAFETY: F_GETFD on descriptor 1 only reads its flags.
                if unsafe { libc::fcntl(1, libc::F_GETFD) } < 0 {
                    bail!("--json -: standard output is closed");
                }
                crate::out::reserve_stdout();
                Ok(())
            }
            Destination::File(p) => {
                let place = Place::open(p)?;
                place.existing()?;
                let (fd, tmp) = place.create_temp()?;
                drop(fd);
                place.unlink(&tmp);
                Ok(())
            }
        }
    }

    /// How to name this destination to a person.
    pub fn describe(&self) -> String {
        match self {
            Destination::Stdout => "standard output".into(),
            Destination::File(p) => p.display().to_string(),
        }
    }

    /// The path, for a file destination.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Destination::Stdout => None,
            Destination::File(p) => Some(p),
        }
    }
}

/// The error of [`write_results_new`] when a file appeared at the chosen name.
#[derive(Debug)]
pub(crate) struct AlreadyThere(pub(crate) PathBuf);

impl std::fmt::Display for AlreadyThere {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} already exists (left as it is)", self.0.display())
    }
}

impl std::error::Error for AlreadyThere {}

/// A results file name that is free now in `dir`: `iolens-<what>-<UTC date and time>.json`,
/// with `-2`, `-3` … added when that name is taken.
pub fn dated_name(dir: &Path, what: &str, unix_s: i64) -> PathBuf {
    let stamp = chrono::DateTime::from_timestamp(unix_s, 0)
        .map(|t| t.format("%Y-%m-%d-%H%M%SZ").to_string())
        .unwrap_or_else(|| unix_s.to_string());
    let base = format!("iolens-{what}-{stamp}");
    let mut n = 1;
    loop {
        let name = if n == 1 {
            format!("{base}.json")
        } else {
            format!("{base}-{n}.json")
        };
        let p = if dir == Path::new(".") {
            PathBuf::from(name)
        } else {
            dir.join(name)
        };
        if std::fs::symlink_metadata(&p).is_err() {
            return p;
        }
        n += 1;
    }
}

/// Write `res` to a new file at `path` by the rules of [`write_results`], never replacing a
/// file there: when one appeared since the name was chosen, the next free dated-style name
/// (`-2`, `-3` …) is taken instead. Returns the path written.
pub fn write_results_new(res: &Results, path: &Path) -> Result<PathBuf> {
    let mut p = path.to_path_buf();
    for n in 2..1000 {
        let mut place = Place::open(&p)?;
        place.new_only = true;
        if place.existing()? == Existing::Nothing {
            match write_into(&place, &mut |w| {
                let mut w = std::io::BufWriter::with_capacity(1 << 20, w);
                serde_json::to_writer_pretty(&mut w, res).map_err(std::io::Error::from)?;
                w.write_all(b"\n")?;
                w.flush()
            }) {
                Ok(()) => return Ok(p),
                Err(e) if e.downcast_ref::<AlreadyThere>().is_some() => {}
                Err(e) => return Err(e),
            }
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        p = path.with_file_name(format!("{stem}-{n}.json"));
    }
    bail!("cannot write results near {}: no free name", path.display())
}

/// Write `res` to `dest` following the rules in the module docs.
pub fn write_results(res: &Results, dest: &Destination) -> Result<()> {
    if let Destination::File(p) = dest {
        // Streamed into the temp file: the document is never held as one string (a day of
        // 1 s intervals is a few hundred MB of JSON).
        return write_file_atomically_with(p, &mut |w| {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, w);
            serde_json::to_writer_pretty(&mut w, res).map_err(std::io::Error::from)?;
            w.write_all(b"\n")?;
            w.flush()
        });
    }
    let mut json = res.to_json()?;
    json.push('\n');
    match dest {
        Destination::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(json.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| {
                    crate::out::record(&e);
                    if e.kind() == std::io::ErrorKind::BrokenPipe {
                        anyhow!(
                            "cannot write results to standard output: the reader closed the pipe"
                        )
                    } else {
                        anyhow!("cannot write results to standard output: {e}")
                    }
                })
        }
        Destination::File(p) => write_file_atomically(p, json.as_bytes()),
    }
}

/// Write `data` to `path` by the same rules as a results file (regular file or new path only,
/// random `O_EXCL|O_NOFOLLOW` temp file, fsync, rename, nothing left behind on failure); for
/// other files a command writes, such as reports and exports.
pub fn write_atomically(path: &Path, data: &[u8]) -> Result<()> {
    write_file_atomically(path, data)
}

fn write_file_atomically(path: &Path, data: &[u8]) -> Result<()> {
    write_file_atomically_with(path, &mut |w| w.write_all(data))
}

/// [`write_file_atomically`] of what `write` writes.
fn write_file_atomically_with(
    path: &Path,
    write: &mut dyn FnMut(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<()> {
    let place = Place::open(path)?;
    write_into(&place, write)
}

/// Write what `write` writes to a temp file beside `place` and move it there.
fn write_into(
    place: &Place,
    write: &mut dyn FnMut(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<()> {
    let path = place.path;
    let before = place.existing()?;
    let (fd, tmp) = place.create_temp()?;
    if before == Existing::Regular {
        // Keep the permissions of the file being replaced (less set-id bits).
        if let Some(mode) = place.mode() {
            // SAFETY: fchmod on the temp file we just created.
            unsafe { libc::fchmod(fd.as_raw_fd(), mode & 0o1777) };
        }
    }
    let mut file = std::fs::File::from(fd);
    let written = write(&mut file).and_then(|_| file.sync_all()).map_err(|e| {
        anyhow!(
            "cannot write results to {}: {}{}",
            path.display(),
            e,
            if e.raw_os_error() == Some(libc::ENOSPC) {
                " (the partial temp file was removed)"
            } else {
                ""
            }
        )
    });
    drop(file);
    if let Err(e) = written.and_then(|_| place.replace_with(&tmp)) {
        place.unlink(&tmp);
        return Err(e);
    }
    // Make the rename durable; a directory that cannot be fsynced (some filesystems) is fine.
    let _ = nix_fsync(place.dir.as_raw_fd());
    Ok(())
}

fn nix_fsync(fd: i32) -> std::io::Result<()> {
    // SAFETY: fsync on a descriptor we own.
    if unsafe { libc::fsync(fd) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// What is at the destination now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Existing {
    Nothing,
    Regular,
}

/// The destination's directory (held open) and its name in it.
struct Place<'a> {
    path: &'a Path,
    /// Claim a new name only: never replace a file already there.
    new_only: bool,
    dir: OwnedFd,
    dir_shown: PathBuf,
    name: CString,
}

impl<'a> Place<'a> {
    fn open(path: &'a Path) -> Result<Place<'a>> {
        let bytes = path.as_os_str().as_bytes();
        if bytes.is_empty() {
            bail!("--json needs a file name (or - for standard output)");
        }
        let refuse = |why: &str| -> anyhow::Error {
            anyhow!(
                "refusing to write results to {}: {why}; results go only to a regular file or a \
                 new path (or `--json -` for standard output)",
                path.display()
            )
        };
        if bytes.ends_with(b"/") {
            return Err(refuse("the path names a directory"));
        }
        let name = match path.file_name() {
            Some(n) if n != OsStr::new(".") && n != OsStr::new("..") => n,
            _ => return Err(refuse("the path names a directory")),
        };
        let dir_path = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let c_dir = CString::new(dir_path.as_os_str().as_bytes())
            .map_err(|_| anyhow!("{}: the path contains a NUL byte", path.display()))?;
        // SAFETY: open(2) on a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c_dir.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            let why = match e.raw_os_error() {
                Some(libc::ENOENT) => format!("directory {} does not exist", dir_path.display()),
                Some(libc::ENOTDIR) => format!("{} is not a directory", dir_path.display()),
                _ => format!("cannot open directory {}: {e}", dir_path.display()),
            };
            bail!("cannot write results to {}: {why}", path.display());
        }
        // SAFETY: fd was just opened and is owned by nobody else.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Place {
            path,
            new_only: false,
            dir,
            dir_shown: dir_path,
            name: CString::new(name.as_bytes()).expect("checked for NUL above"),
        })
    }

    /// What is at the destination, refusing anything but a regular file or nothing.
    fn existing(&self) -> Result<Existing> {
        self.existing_at(&self.name)
    }

    /// The permission bits of what is at the destination now.
    fn mode(&self) -> Option<libc::mode_t> {
        // SAFETY: fstatat into a zeroed stat buffer with a valid dirfd and name.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::fstatat(
                self.dir.as_raw_fd(),
                self.name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        (rc == 0).then_some(st.st_mode & 0o7777)
    }

    fn existing_at(&self, name: &CString) -> Result<Existing> {
        // SAFETY: fstatat into a zeroed stat buffer with a valid dirfd and name.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::fstatat(
                self.dir.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOENT) {
                return Ok(Existing::Nothing);
            }
            bail!("cannot write results to {}: {e}", self.path.display());
        }
        let what = match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => return Ok(Existing::Regular),
            libc::S_IFDIR => "it is a directory".to_string(),
            libc::S_IFCHR => "it is a character device".to_string(),
            libc::S_IFBLK => "it is a block device".to_string(),
            libc::S_IFIFO => "it is a FIFO (named pipe)".to_string(),
            libc::S_IFSOCK => "it is a socket".to_string(),
            libc::S_IFLNK => {
                let to = std::fs::read_link(self.path)
                    .map(|t| format!(" to {}", t.display()))
                    .unwrap_or_default();
                format!("it is a symbolic link{to} (name the file itself)")
            }
            _ => "it is not a regular file".to_string(),
        };
        bail!(
            "refusing to write results to {}: {what}; results go only to a regular file or a new \
             path (or `--json -` for standard output)",
            self.path.display()
        )
    }

    /// Create a temp file with a random name beside the destination, exclusively and without
    /// following links.
    fn create_temp(&self) -> Result<(OwnedFd, CString)> {
        let mut rng = rand::thread_rng();
        for _ in 0..16 {
            let tmp = CString::new(format!(".iolens-results-{:016x}.tmp", rng.gen::<u64>()))
                .expect("no NUL");
            // SAFETY: openat with a valid dirfd and NUL-terminated name.
            let fd = unsafe {
                libc::openat(
                    self.dir.as_raw_fd(),
                    tmp.as_ptr(),
                    libc::O_WRONLY
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o644 as libc::c_uint,
                )
            };
            if fd >= 0 {
                // SAFETY: fd was just opened and is owned by nobody else.
                return Ok((unsafe { OwnedFd::from_raw_fd(fd) }, tmp));
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                bail!(
                    "cannot write results to {}: cannot create a file in {}: {e}",
                    self.path.display(),
                    self.dir_shown.display()
                );
            }
        }
        bail!(
            "cannot write results to {}: no free temp name in {}",
            self.path.display(),
            self.dir_shown.display()
        )
    }

    fn unlink(&self, tmp: &CString) {
        // SAFETY: unlinkat of a name we created, relative to our directory descriptor.
        unsafe {
            libc::unlinkat(self.dir.as_raw_fd(), tmp.as_ptr(), 0);
        }
    }

    /// Move the finished temp file to the destination, re-checking what is there now.
    fn replace_with(&self, tmp: &CString) -> Result<()> {
        let d = self.dir.as_raw_fd();
        let fail = |e: std::io::Error| {
            anyhow::Error::new(e)
                .context(format!("cannot write results to {}", self.path.display()))
        };
        match self.existing()? {
            Existing::Regular if self.new_only => {
                bail!(AlreadyThere(self.path.to_path_buf()))
            }
            Existing::Regular => {
                // SAFETY: renameat within our directory descriptor.
                if unsafe { libc::renameat(d, tmp.as_ptr(), d, self.name.as_ptr()) } != 0 {
                    return Err(fail(std::io::Error::last_os_error()));
                }
            }
            Existing::Nothing => {
                // Claim the new name without replacing anything that appeared meanwhile.
                // SAFETY: renameat2 within our directory descriptor.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        d,
                        tmp.as_ptr(),
                        d,
                        self.name.as_ptr(),
                        libc::RENAME_NOREPLACE,
                    )
                };
                if rc != 0 {
                    let e = std::io::Error::last_os_error();
                    match e.raw_os_error() {
                        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
                            // A filesystem without RENAME_NOREPLACE: check again, then rename.
                            if self.existing()? == Existing::Nothing {
                                // SAFETY: as above.
                                if unsafe { libc::renameat(d, tmp.as_ptr(), d, self.name.as_ptr()) }
                                    != 0
                                {
                                    return Err(fail(std::io::Error::last_os_error()));
                                }
                            } else {
                                return self.replace_with(tmp);
                            }
                        }
                        Some(libc::EEXIST) => {
                            // Something appeared at the destination: apply the rules to it.
                            return self.replace_with(tmp);
                        }
                        _ => return Err(fail(e)),
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dash_is_stdout() {
        assert_eq!(Destination::new(Path::new("-")), Destination::Stdout);
        assert_eq!(
            Destination::new(Path::new("./-")),
            Destination::File(PathBuf::from("./-"))
        );
    }

    #[test]
    fn refuses_directories_and_links_and_keeps_other_files() {
        let d = tempfile::tempdir().unwrap();
        let res = Results::new(super::super::Kind::Run, vec!["test".into()]);
        let dir_err = write_results(&res, &Destination::File(d.path().to_path_buf()))
            .unwrap_err()
            .to_string();
        assert!(dir_err.contains("directory"), "{dir_err}");
        let target = d.path().join("victim");
        std::fs::write(&target, b"keep").unwrap();
        let link = d.path().join("r.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = write_results(&res, &Destination::File(link.clone()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        // An unrelated file with the old predictable temp name survives.
        let out = d.path().join("report.json");
        std::fs::write(d.path().join("report.json.tmp"), b"mine").unwrap();
        write_results(&res, &Destination::File(out.clone())).unwrap();
        assert_eq!(
            std::fs::read(d.path().join("report.json.tmp")).unwrap(),
            b"mine"
        );
        assert!(Results::read_file(&out).is_ok());
        // Nothing else is left in the directory.
        let mut names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["r.json", "report.json", "report.json.tmp", "victim"]
        );
    }

    #[test]
    fn replacing_keeps_the_permissions_of_the_old_file() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("private.json");
        std::fs::write(&p, b"old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_atomically(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn new_results_never_replace_a_file() {
        let d = tempfile::tempdir().unwrap();
        let res = Results::new(super::super::Kind::Run, vec!["test".into()]);
        let p = dated_name(d.path(), "calibrate", 1_795_000_000);
        assert!(p
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("iolens-calibrate-2026-"));
        // Someone else's file appears at the chosen name before the results are written.
        std::fs::write(&p, b"theirs").unwrap();
        let written = write_results_new(&res, &p).unwrap();
        assert_ne!(written, p);
        assert_eq!(std::fs::read(&p).unwrap(), b"theirs");
        assert!(Results::read_file(&written).is_ok());
        // The next dated name skips both.
        let next = dated_name(d.path(), "calibrate", 1_795_000_000);
        assert!(next != p && next != written, "{next:?}");
    }
}
