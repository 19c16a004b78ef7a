//! The one writer of every file iolens writes: results (`--json`, `merge -o`, `dev-synth -o`),
//! reports (`report -o`, `compare -o`), exports (`--csv`, `--hlog`, `--markdown`, `--flame`,
//! `--folded`), flame graphs and folded stacks (`profile -o/--folded`), synthetic traces.
//!
//! A command first makes a [`Plan`] of the files it reads (inputs, targets) and asks it for each
//! output, before it measures or renders anything. [`Plan::output`] refuses, with an error that
//! names the path:
//! - an output that is one of the command's inputs or targets, compared by identity (device and
//!   inode, so a hard link of an input is caught) or, for a path that does not exist yet, by its
//!   directory's identity and its name; two outputs of one command that are the same file;
//! - anything at the destination but a regular file or nothing: a symbolic link is refused, not
//!   resolved; device nodes, FIFOs, sockets and directories are refused;
//! - a results document replacing anything but a results document or an empty file (the typo
//!   `trace --json a.trc b.trc` names evidence, not a results file); any other output replacing a
//!   results document (measured results are never overwritten by a report).
//!
//! It then creates the temp file the output will be written to, with a random name beside the
//! destination (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0644 before the umask), reserves the expected
//! size in it (`fallocate`; where that is not supported, free space is checked) and keeps it
//! open until [`Output::write`]: a full filesystem fails the command before anything is measured.
//! [`Output::write`] writes, truncates to what was written, fsyncs, checks the destination again
//! and renames over it (a new name is claimed with `RENAME_NOREPLACE`), then fsyncs the directory.
//!
//! Nothing that was written is thrown away. When the finished file cannot be placed (a directory,
//! link or other file appeared at the destination, the directory was moved) it is kept beside
//! the destination as `iolens-kept-…-NAME` and the error says where. When a results document
//! cannot be written at all (the filesystem filled beyond the reservation, an I/O error) it is
//! written again to a new file in `$TMPDIR`, `/var/tmp` or the current directory, and the error
//! says where. `-` is standard output.

use std::ffi::{CString, OsStr};
use std::io::{Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use rand::Rng;

/// What an output holds: it decides what an existing file at the destination may be, and what
/// happens when the output cannot be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holds {
    /// A results document: replaces only a results document or an empty file; when it cannot be
    /// written where asked it is written elsewhere and the error says where.
    Results,
    /// Anything else (HTML, CSV, SVG, Markdown, folded stacks, traces): never replaces a results
    /// document.
    Other,
}

/// Space reserved for a results document whose size is not known in advance.
pub const RESULTS_RESERVE: u64 = 64 << 10;

/// Space to reserve for a results document of `intervals` intervals (measured: about 1.7 KB per
/// interval for a read-only run, 2–4 KB with writes or syncs; 10–20 KB for the rest).
/// At most 1 GiB is reserved.
pub fn results_estimate(intervals: u64) -> u64 {
    (32u64 << 10)
        .saturating_add(intervals.saturating_mul(4 << 10))
        .min(1 << 30)
}

/// How many intervals of `interval_s` fit in `seconds` (0 for nonsense values).
pub fn intervals(seconds: f64, interval_s: f64) -> u64 {
    let n = (seconds / interval_s).ceil();
    if n.is_finite() && n > 0.0 {
        n.min(u64::MAX as f64) as u64
    } else {
        0
    }
}

/// A file's identity: its device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Node {
    dev: u64,
    ino: u64,
}

/// How a path named on the command line is told apart from others.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Key {
    /// An existing file (links followed): its identity.
    Node(Node),
    /// A path that does not exist yet: its directory's identity and its name.
    New(Node, Vec<u8>),
    /// A path in a directory that does not exist: the name as given.
    Name(PathBuf),
}

impl Key {
    fn of(path: &Path) -> Key {
        if let Ok(m) = std::fs::metadata(path) {
            return Key::Node(Node {
                dev: m.dev(),
                ino: m.ino(),
            });
        }
        let (dir, name) = split(path);
        match (std::fs::metadata(&dir), name) {
            (Ok(m), Some(n)) => Key::New(
                Node {
                    dev: m.dev(),
                    ino: m.ino(),
                },
                n.as_bytes().to_vec(),
            ),
            _ => Key::Name(path.to_path_buf()),
        }
    }
}

/// A path's directory (`.` when it has none) and its last component.
fn split(path: &Path) -> (PathBuf, Option<&OsStr>) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .filter(|n| *n != OsStr::new(".") && *n != OsStr::new(".."));
    (dir, name)
}

/// The files one command reads and the outputs it has claimed, compared by identity.
#[derive(Debug, Default)]
pub struct Plan {
    inputs: Vec<(PathBuf, Key)>,
    outputs: Vec<(String, PathBuf, Key)>,
}

impl Plan {
    /// A plan with no inputs yet.
    pub fn new() -> Plan {
        Plan::default()
    }

    /// Record an input or target of the command (a file read, a target measured, a database
    /// file). Standard input (`-`) is not a file and is not recorded.
    pub fn input(&mut self, path: &Path) -> &mut Plan {
        if path.as_os_str() != "-" {
            self.inputs.push((path.to_path_buf(), Key::of(path)));
        }
        self
    }

    /// Record several inputs.
    pub fn inputs<'a>(&mut self, paths: impl IntoIterator<Item = &'a Path>) -> &mut Plan {
        for p in paths {
            self.input(p);
        }
        self
    }

    /// Check the output `flag` names (`-` is standard output) against the rules in the module
    /// docs and reserve `reserve` bytes for it. Call before measuring or rendering anything.
    pub fn output(
        &mut self,
        flag: &str,
        path: &Path,
        holds: Holds,
        reserve: u64,
    ) -> Result<Output> {
        self.output_with(flag, path, holds, reserve, false)
    }

    /// [`Plan::output`] for a file that must not exist: refused when anything is at the
    /// destination, and placed only where nothing appeared meanwhile (`RENAME_NOREPLACE`, or a
    /// hard link where that is not supported); what appeared is left alone and the finished
    /// file is kept beside it under a name the error says.
    pub fn new_output(
        &mut self,
        flag: &str,
        path: &Path,
        holds: Holds,
        reserve: u64,
    ) -> Result<Output> {
        self.output_with(flag, path, holds, reserve, true)
    }

    fn output_with(
        &mut self,
        flag: &str,
        path: &Path,
        holds: Holds,
        reserve: u64,
        new_only: bool,
    ) -> Result<Output> {
        let what = match holds {
            Holds::Results => "results",
            Holds::Other => "output",
        };
        if path.as_os_str() == "-" {
            if let Some((other, _, _)) = self.outputs.iter().find(|(_, p, _)| p == path) {
                bail!("only one of {other} and {flag} can write to standard output");
            }
            self.outputs
                .push((flag.into(), path.to_path_buf(), Key::Name(path.into())));
            // SAFETY: F_GETFD on descriptor 1 only reads its flags.
            if unsafe { libc::fcntl(1, libc::F_GETFD) } < 0 {
                bail!("{flag} -: standard output is closed");
            }
            if holds == Holds::Results {
                crate::out::reserve_stdout();
            }
            return Ok(Output {
                flag: flag.into(),
                path: path.to_path_buf(),
                to: To::Stdout(holds),
            });
        }
        let key = Key::of(path);
        if let Some((input, _)) = self.inputs.iter().find(|(_, k)| *k == key) {
            let how = if input == path {
                String::new()
            } else {
                format!(" ({} is the same file)", input.display())
            };
            bail!(
                "refusing to write {what} to {}: it is one of this command's inputs or targets{how}; \
                 name another file for {flag}",
                path.display()
            );
        }
        if let Some((other, p, _)) = self.outputs.iter().find(|(_, _, k)| *k == key) {
            bail!(
                "{flag} {} and {other} {} are the same file: one would overwrite the other; \
                 name two different files",
                path.display(),
                p.display()
            );
        }
        let inputs = self
            .inputs
            .iter()
            .filter_map(|(_, k)| match k {
                Key::Node(n) => Some(*n),
                _ => None,
            })
            .collect();
        let mut place = Place::open(path, flag, what, inputs)?;
        place.new_only = new_only;
        place.existing(holds)?;
        if let Some(note) = place.unfinished() {
            crate::out::warn(&note);
        }
        let (fd, tmp) = place.create_temp()?;
        let pending = Pending {
            place,
            tmp,
            file: Some(std::fs::File::from(fd)),
            kept: false,
        };
        pending.reserve(reserve)?;
        self.outputs.push((flag.into(), path.to_path_buf(), key));
        Ok(Output {
            flag: flag.into(),
            path: path.to_path_buf(),
            to: To::File(pending, holds),
        })
    }
}

/// An output checked by [`Plan::output`], its temp file created and its space reserved; written
/// (once) by [`Output::write`]. Dropped unwritten, its temp file is removed.
#[derive(Debug)]
pub struct Output {
    flag: String,
    path: PathBuf,
    to: To,
}

#[derive(Debug)]
enum To {
    Stdout(Holds),
    File(Pending, Holds),
}

impl Output {
    /// Whether this output is standard output.
    pub fn is_stdout(&self) -> bool {
        matches!(self.to, To::Stdout(_))
    }

    /// The path as given (`-` for standard output).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write what `write` writes (it may be called a second time, to keep results elsewhere)
    /// and put it in place.
    pub fn write(self, write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
        let Output { flag, path, to } = self;
        match to {
            To::Stdout(holds) => {
                let mut out = std::io::stdout().lock();
                write(&mut out).and_then(|_| out.flush()).map_err(|e| {
                    let what = if holds == Holds::Results {
                        crate::out::record(&e);
                        "results"
                    } else {
                        "output"
                    };
                    if e.kind() == std::io::ErrorKind::BrokenPipe {
                        anyhow!(
                            "cannot write {what} to standard output: the reader closed the pipe"
                        )
                    } else {
                        anyhow!("cannot write {what} to standard output: {e}")
                    }
                })
            }
            To::File(mut p, holds) => {
                let what = p.place.what;
                if let Err(e) = p.fill(write) {
                    // The temp file is incomplete: remove it, then keep measured results
                    // elsewhere.
                    drop(p);
                    let why = format!("cannot write {what} to {}: {e}", path.display());
                    if holds == Holds::Other {
                        bail!("{why} (the partial file was removed; {flag} was not written)");
                    }
                    return match keep_elsewhere(write) {
                        Ok(kept) => Err(anyhow!(
                            "{why}; the results were saved to {0} instead (see them with \
                             `iolens show {0}`)",
                            kept.display()
                        )),
                        Err(e2) => Err(anyhow!(
                            "{why}; the results could not be saved elsewhere either ({e2:#})"
                        )),
                    };
                }
                p.place_it()
            }
        }
    }

    /// What removes this output's temp file from a signal handler
    /// ([`crate::interrupt::reading`]): a descriptor of its directory of its own, and its
    /// name. None for standard output.
    pub(crate) fn temp(&self) -> Option<(OwnedFd, CString)> {
        match &self.to {
            To::Stdout(_) => None,
            To::File(p, _) => Some((p.place.dir.try_clone().ok()?, p.tmp.clone())),
        }
    }

    /// Write `data`.
    pub fn write_bytes(self, data: &[u8]) -> Result<()> {
        self.write(&mut |w| w.write_all(data))
    }
}

/// Write `data` to `path` (`-` is standard output) by the rules of this module, for a command
/// that reads nothing else. (Tests and one-off tools; commands use a [`Plan`].)
pub fn write_file(path: &Path, holds: Holds, data: &[u8]) -> Result<()> {
    Plan::new()
        .output("the output", path, holds, data.len() as u64)?
        .write_bytes(data)
}

/// A new file for results that could not go where asked: `$TMPDIR`, `/var/tmp`, then the
/// current directory.
fn keep_elsewhere(write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>) -> Result<PathBuf> {
    let name = format!(
        "iolens-results-{}-{}-{:08x}.json",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        std::process::id(),
        rand::random::<u32>()
    );
    let mut errors = Vec::new();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    for dir in [std::env::temp_dir(), PathBuf::from("/var/tmp"), cwd] {
        let path = dir.join(&name);
        let attempt = (|| -> Result<()> {
            let place = Place::open(&path, "the results", "results", Vec::new())?;
            let (fd, tmp) = place.create_temp()?;
            let mut p = Pending {
                place,
                tmp,
                file: Some(std::fs::File::from(fd)),
                kept: false,
            };
            p.fill(write)
                .map_err(|e| anyhow!("{}: {e}", dir.display()))?;
            p.place_it()
        })();
        match attempt {
            Ok(()) => return Ok(path),
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    bail!("{}", errors.join("; "))
}

/// The temp file of an output, from [`Plan::output`] until it is placed.
#[derive(Debug)]
struct Pending {
    place: Place,
    tmp: CString,
    file: Option<std::fs::File>,
    /// Placed or kept: the temp name no longer holds anything to remove.
    kept: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.kept {
            self.place.unlink(&self.tmp);
        }
    }
}

impl Pending {
    /// Reserve `bytes` in the temp file, or check that the filesystem has them free.
    fn reserve(&self, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let fd = self
            .file
            .as_ref()
            .expect("reserved before writing")
            .as_raw_fd();
        // SAFETY: fallocate on the temp file we own.
        let rc = unsafe { libc::fallocate(fd, 0, 0, bytes as libc::off_t) };
        let short = |e: String| {
            anyhow!(
                "cannot write {} to {}: {e}: about {} KB are needed; free some space or name \
                 another place",
                self.place.what,
                self.place.path.display(),
                bytes.div_ceil(1024)
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) => {
                // No fallocate here: check the free space instead.
                // SAFETY: fstatvfs into a zeroed buffer on a descriptor we own.
                let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
                if unsafe { libc::fstatvfs(fd, &mut st) } == 0 {
                    let free = (st.f_bavail as u64).saturating_mul(st.f_frsize as u64);
                    if free < bytes {
                        return Err(short(format!(
                            "{} has {} KB free",
                            self.place.dir_shown.display(),
                            free / 1024
                        )));
                    }
                }
                Ok(())
            }
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => Err(short(format!(
                "{} is full ({e})",
                self.place.dir_shown.display()
            ))),
            _ => Err(short(e.to_string())),
        }
    }

    /// Write the temp file from its start, cut it to what was written and sync it.
    fn fill(
        &mut self,
        write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let mut file = self.file.take().expect("written once");
        file.rewind()?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut file);
        write(&mut w)?;
        w.flush()?;
        drop(w);
        let len = file.stream_position()?;
        file.set_len(len)?;
        file.sync_all()
    }

    /// Put the finished temp file at the destination; when it cannot be, keep it and say where.
    fn place_it(&mut self) -> Result<()> {
        let placed = self.place.replace_with(&self.tmp);
        self.kept = true;
        if let Err(e) = placed {
            let kept = self.place.keep(&self.tmp);
            return Err(e.context(format!(
                "the finished {} were kept in {}",
                if self.place.what == "results" {
                    "results"
                } else {
                    "contents"
                },
                kept.display()
            )));
        }
        // Make the rename durable; a directory that cannot be fsynced (some filesystems) is fine.
        // SAFETY: fsync on a descriptor we own.
        unsafe { libc::fsync(self.place.dir.as_raw_fd()) };
        // The directory moved or replaced while we worked: the file is not where asked.
        let now = std::fs::metadata(&self.place.dir_shown)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let ours = std::fs::File::from(self.place.dir.try_clone()?).metadata()?;
        if now != Some((ours.dev(), ours.ino())) {
            let real = self
                .place
                .real_dir()
                .join(OsStr::from_bytes(self.place.name.as_bytes()));
            bail!(
                "directory {} was moved or replaced while iolens worked: the {} for {} were \
                 written to {}",
                self.place.dir_shown.display(),
                self.place.what,
                self.place.path.display(),
                real.display()
            );
        }
        Ok(())
    }
}

/// What is at the destination now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Existing {
    Nothing,
    Regular,
}

/// The destination's directory (held open) and its name in it.
#[derive(Debug)]
struct Place {
    path: PathBuf,
    flag: String,
    /// "results" or "output", for messages.
    what: &'static str,
    dir: OwnedFd,
    dir_shown: PathBuf,
    name: CString,
    /// The identities of the command's inputs, checked again when the file is placed.
    inputs: Vec<Node>,
    /// Only a new file: nothing at the destination is replaced ([`Plan::new_output`]).
    new_only: bool,
}

impl Place {
    fn open(path: &Path, flag: &str, what: &'static str, inputs: Vec<Node>) -> Result<Place> {
        let bytes = path.as_os_str().as_bytes();
        if bytes.is_empty() {
            bail!("{flag} needs a file name (or - for standard output)");
        }
        let refuse = |why: &str| -> anyhow::Error {
            anyhow!(
                "refusing to write {what} to {}: {why}; iolens writes only to a regular file or \
                 a new path (or - for standard output)",
                path.display()
            )
        };
        if bytes.ends_with(b"/") {
            return Err(refuse("the path names a directory"));
        }
        let (dir_path, name) = split(path);
        let Some(name) = name else {
            return Err(refuse("the path names a directory"));
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
            bail!("cannot write {what} to {}: {why}", path.display());
        }
        // SAFETY: fd was just opened and is owned by nobody else.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Place {
            path: path.to_path_buf(),
            flag: flag.into(),
            what,
            dir,
            dir_shown: dir_path,
            name: CString::new(name.as_bytes()).expect("checked for NUL above"),
            inputs,
            new_only: false,
        })
    }

    fn stat(&self, name: &CString) -> std::io::Result<libc::stat> {
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
        if rc == 0 {
            Ok(st)
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// What is at the destination, refusing anything the rules do not let `holds` replace.
    fn existing(&self, holds: Holds) -> Result<Existing> {
        let what = self.what;
        let st = match self.stat(&self.name) {
            Ok(st) => st,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(Existing::Nothing),
            Err(e) => bail!("cannot write {what} to {}: {e}", self.path.display()),
        };
        if self.new_only {
            bail!(
                "refusing to write {what} to {}: it exists, and {} writes a new file only; \
                 name a path that does not exist",
                self.path.display(),
                self.flag
            );
        }
        let refuse = |why: String| {
            anyhow!(
                "refusing to write {what} to {}: {why}; iolens writes only to a regular file or a \
                 new path (or - for standard output)",
                self.path.display()
            )
        };
        let why = match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => {
                let node = Node {
                    dev: st.st_dev,
                    ino: st.st_ino,
                };
                if self.inputs.contains(&node) {
                    bail!(
                        "refusing to write {what} to {}: it is one of this command's inputs or \
                         targets (the same file); name another file for {}",
                        self.path.display(),
                        self.flag
                    );
                }
                return self
                    .contents_allow(holds, st.st_size)
                    .map(|_| Existing::Regular);
            }
            libc::S_IFDIR => "it is a directory".to_string(),
            libc::S_IFCHR => "it is a character device".to_string(),
            libc::S_IFBLK => "it is a block device".to_string(),
            libc::S_IFIFO => "it is a FIFO (named pipe)".to_string(),
            libc::S_IFSOCK => "it is a socket".to_string(),
            libc::S_IFLNK => {
                let to = std::fs::read_link(&self.path)
                    .map(|t| format!(" to {}", t.display()))
                    .unwrap_or_default();
                format!("it is a symbolic link{to} (name the file itself)")
            }
            _ => "it is not a regular file".to_string(),
        };
        Err(refuse(why))
    }

    /// Whether an output of `holds` may replace the regular file at the destination: results
    /// replace only results (or an empty file); nothing else replaces results.
    fn contents_allow(&self, holds: Holds, size: libc::off_t) -> Result<()> {
        if size == 0 {
            return Ok(());
        }
        let is_results = self.holds_results()?;
        match (holds, is_results) {
            (Holds::Results, false) => bail!(
                "refusing to write results to {}: it exists and is not an iolens results file \
                 (a trace or other evidence given as {}?); results replace only a results file, \
                 an empty file or a new path: name another file",
                self.path.display(),
                self.flag
            ),
            (Holds::Other, true) => bail!(
                "refusing to write {} to {}: it holds iolens results, which would be lost; name \
                 another file",
                self.flag,
                self.path.display()
            ),
            _ => Ok(()),
        }
    }

    /// Whether the regular file at the destination starts as an iolens results document.
    fn holds_results(&self) -> Result<bool> {
        // SAFETY: openat with a valid dirfd and NUL-terminated name; never follows a link and
        // never blocks on a FIFO swapped in meanwhile.
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                self.name.as_ptr(),
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            bail!(
                "cannot write {} to {}: cannot read what is there: {e}",
                self.what,
                self.path.display()
            );
        }
        // SAFETY: fd was just opened and is owned by nobody else.
        let f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        if !f.metadata()?.is_file() {
            bail!(
                "refusing to write {} to {}: it is not a regular file",
                self.what,
                self.path.display()
            );
        }
        let mut head = vec![0u8; 4096];
        let mut n = 0;
        use std::io::Read;
        while n < head.len() {
            match (&f).read(&mut head[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => bail!("cannot read {}: {e}", self.path.display()),
            }
        }
        Ok(looks_like_results(&head[..n]))
    }

    /// Create a temp file with a random name beside the destination, exclusively and without
    /// following links.
    fn create_temp(&self) -> Result<(OwnedFd, CString)> {
        let mut rng = rand::thread_rng();
        for _ in 0..16 {
            let tmp = CString::new(format!(
                ".iolens-{}-{:016x}.tmp",
                self.what,
                rng.gen::<u64>()
            ))
            .expect("no NUL");
            // SAFETY: openat with a valid dirfd and NUL-terminated name.
            let fd = unsafe {
                libc::openat(
                    self.dir.as_raw_fd(),
                    tmp.as_ptr(),
                    libc::O_RDWR
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o644 as libc::c_uint,
                )
            };
            if fd >= 0 {
                // SAFETY: fd was just opened and is owned by nobody else.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                // Locked while it is written: a later run tells a file being written from one
                // an interrupted run left ([`Place::unfinished`]).
                // SAFETY: flock on the descriptor we own.
                unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
                if let Ok(st) = self.stat(&self.name) {
                    if st.st_mode & libc::S_IFMT == libc::S_IFREG {
                        // Keep the permissions of the file being replaced (less set-id bits).
                        // SAFETY: fchmod on the temp file we just created.
                        unsafe { libc::fchmod(fd.as_raw_fd(), st.st_mode & 0o1777) };
                    }
                }
                return Ok((fd, tmp));
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                bail!(
                    "cannot write {} to {}: cannot create a file in {}: {e}",
                    self.what,
                    self.path.display(),
                    self.dir_shown.display()
                );
            }
        }
        bail!(
            "cannot write {} to {}: no free temp name in {}",
            self.what,
            self.path.display(),
            self.dir_shown.display()
        )
    }

    /// A warning naming the unfinished temp files an interrupted iolens left beside the
    /// destination (killed while writing, so none is complete): names this module gives
    /// (`.iolens-results-HEX.tmp`, `.iolens-output-HEX.tmp`), regular files that no running
    /// iolens holds locked. They are said, never removed: a name does not prove who made a
    /// file, and iolens deletes nothing it cannot prove it made.
    fn unfinished(&self) -> Option<String> {
        let entries = std::fs::read_dir(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
            .or_else(|_| std::fs::read_dir(&self.dir_shown))
            .ok()?;
        let now = std::time::SystemTime::now();
        let mut found = Vec::new();
        // A huge directory is not read to its end for a warning.
        for e in entries.take(100_000).flatten() {
            let name = e.file_name();
            if !is_temp_name(name.as_bytes()) {
                continue;
            }
            let Ok(c) = CString::new(name.as_bytes()) else {
                continue;
            };
            // SAFETY: openat with a valid dirfd and NUL-terminated name; never follows a link
            // and never blocks on a FIFO.
            let fd = unsafe {
                libc::openat(
                    self.dir.as_raw_fd(),
                    c.as_ptr(),
                    libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
                )
            };
            if fd < 0 {
                continue;
            }
            // SAFETY: fd was just opened and is owned by nobody else.
            let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
            let Ok(m) = file.metadata() else { continue };
            // SAFETY: flock on a descriptor we own; a shared lock taken here is released when
            // it closes.
            let free = unsafe { libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB) } == 0;
            if !m.is_file() || !free {
                continue;
            }
            let age = m
                .modified()
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .map_or(0, |d| d.as_secs());
            let age = match age {
                a if a < 120 => format!("{a} s old"),
                a if a < 7200 => format!("{} min old", a / 60),
                a if a < 172_800 => format!("{} h old", a / 3600),
                a => format!("{} days old", a / 86_400),
            };
            found.push(format!(
                "{} ({} KB, {age})",
                name.to_string_lossy(),
                m.len().div_ceil(1024)
            ));
        }
        if found.is_empty() {
            return None;
        }
        found.sort();
        let n = found.len();
        let shown = if n > 5 {
            format!("{}, and {} more", found[..5].join(", "), n - 5)
        } else {
            found.join(", ")
        };
        let dir = self.real_dir();
        Some(format!(
            "{} holds {n} unfinished file{} that an interrupted iolens left (killed while \
             writing: none is complete): {shown}; iolens removes only files it can prove it \
             made, so delete {} yourself (rm {}/.iolens-*.tmp) unless another program uses \
             such names",
            dir.display(),
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "them" },
            dir.display()
        ))
    }

    fn unlink(&self, tmp: &CString) {
        // SAFETY: unlinkat of a name we created, relative to our directory descriptor.
        unsafe {
            libc::unlinkat(self.dir.as_raw_fd(), tmp.as_ptr(), 0);
        }
    }

    /// Where our directory is now (it may have been moved since it was named).
    fn real_dir(&self) -> PathBuf {
        std::fs::read_link(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
            .unwrap_or_else(|_| self.dir_shown.clone())
    }

    /// Keep a finished temp file that could not be placed under a name people see beside the
    /// destination; the path it is kept at.
    fn keep(&self, tmp: &CString) -> PathBuf {
        let d = self.dir.as_raw_fd();
        let name = OsStr::from_bytes(self.name.as_bytes()).to_string_lossy();
        for _ in 0..8 {
            let kept = format!("iolens-kept-{:08x}-{name}", rand::random::<u32>());
            let Ok(c) = CString::new(kept.clone()) else {
                break;
            };
            // SAFETY: renameat2 within our directory descriptor, never replacing anything.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_renameat2,
                    d,
                    tmp.as_ptr(),
                    d,
                    c.as_ptr(),
                    libc::RENAME_NOREPLACE,
                )
            };
            if rc == 0 {
                return self.real_dir().join(kept);
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
                break;
            }
        }
        self.real_dir().join(OsStr::from_bytes(tmp.as_bytes()))
    }

    /// Move the finished temp file to the destination, checking again what is there now.
    fn replace_with(&self, tmp: &CString) -> Result<()> {
        let d = self.dir.as_raw_fd();
        let fail = |e: std::io::Error| {
            anyhow::Error::new(e).context(format!(
                "cannot write {} to {}",
                self.what,
                self.path.display()
            ))
        };
        let holds = if self.what == "results" {
            Holds::Results
        } else {
            Holds::Other
        };
        match self.existing(holds)? {
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
                            // A filesystem without RENAME_NOREPLACE. A new file only: a hard
                            // link claims the name or fails, never replacing anything.
                            if self.new_only {
                                // SAFETY: linkat/unlinkat within our directory descriptor.
                                if unsafe {
                                    libc::linkat(d, tmp.as_ptr(), d, self.name.as_ptr(), 0)
                                } != 0
                                {
                                    let e = std::io::Error::last_os_error();
                                    if e.raw_os_error() == Some(libc::EEXIST) {
                                        return self.replace_with(tmp);
                                    }
                                    return Err(fail(e));
                                }
                                self.unlink(tmp);
                                return Ok(());
                            }
                            // Check again, then rename.
                            if self.existing(holds)? == Existing::Nothing {
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

/// Whether `name` is one [`Place::create_temp`] gives: `.iolens-results-` or `.iolens-output-`,
/// 16 hexadecimal digits, `.tmp`.
fn is_temp_name(name: &[u8]) -> bool {
    let Some(rest) = name
        .strip_prefix(b".iolens-results-")
        .or_else(|| name.strip_prefix(b".iolens-output-"))
    else {
        return false;
    };
    rest.len() == 20 && rest.ends_with(b".tmp") && rest[..16].iter().all(u8::is_ascii_hexdigit)
}

/// Whether `head`, the start of a file, is the start of an iolens results document.
fn looks_like_results(head: &[u8]) -> bool {
    let text = head.trim_ascii_start();
    text.starts_with(b"{")
        && head
            .windows(b"\"iolens-results\"".len())
            .any(|w| w == b"\"iolens-results\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_directories_and_links_and_keeps_other_files() {
        let d = tempfile::tempdir().unwrap();
        let dir_err = write_file(d.path(), Holds::Other, b"x")
            .unwrap_err()
            .to_string();
        assert!(dir_err.contains("directory"), "{dir_err}");
        let target = d.path().join("victim");
        std::fs::write(&target, b"keep").unwrap();
        let link = d.path().join("r.csv");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = write_file(&link, Holds::Other, b"new")
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        // An unrelated file with the old predictable temp name survives.
        let out = d.path().join("report.html");
        std::fs::write(d.path().join("report.html.tmp"), b"mine").unwrap();
        write_file(&out, Holds::Other, b"<html>").unwrap();
        assert_eq!(
            std::fs::read(d.path().join("report.html.tmp")).unwrap(),
            b"mine"
        );
        assert_eq!(std::fs::read(&out).unwrap(), b"<html>");
        let mut names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["r.csv", "report.html", "report.html.tmp", "victim"]);
    }

    #[test]
    fn replacing_keeps_the_permissions_of_the_old_file() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("private.csv");
        std::fs::write(&p, b"old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_file(&p, Holds::Other, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn results_replace_only_results_and_nothing_replaces_results() {
        let d = tempfile::tempdir().unwrap();
        let trace = d.path().join("a.trc");
        std::fs::write(&trace, b"Dump file /u01/a.trc\n").unwrap();
        let e = write_file(&trace, Holds::Results, b"{\"schema\": \"iolens-results\"}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an iolens results file"), "{e}");
        assert_eq!(std::fs::read(&trace).unwrap(), b"Dump file /u01/a.trc\n");
        let res = d.path().join("r.json");
        std::fs::write(&res, b"{\n  \"schema\": \"iolens-results\",\n}").unwrap();
        let e = write_file(&res, Holds::Other, b"a,b\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds iolens results"), "{e}");
        write_file(
            &res,
            Holds::Results,
            b"{\"schema\":\"iolens-results\",\"v\":2}",
        )
        .unwrap();
        let empty = d.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        write_file(&empty, Holds::Results, b"{}").unwrap();
    }

    #[test]
    fn an_output_that_is_an_input_or_another_output_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("in.json");
        std::fs::write(&input, b"{\"schema\":\"iolens-results\"}").unwrap();
        let hard = d.path().join("hard.json");
        std::fs::hard_link(&input, &hard).unwrap();
        let mut plan = Plan::new();
        plan.input(&input);
        let e = plan
            .output("--csv", &hard, Holds::Other, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("inputs or targets"), "{e}");
        let f = d.path().join("F");
        let _csv = plan.output("--csv", &f, Holds::Other, 0).unwrap();
        let e = plan
            .output("--hlog", &d.path().join(".").join("F"), Holds::Other, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("same file"), "{e}");
    }

    #[test]
    fn an_unwritten_output_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let out = Plan::new()
            .output("--json", &d.path().join("r.json"), Holds::Results, 4096)
            .unwrap();
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        drop(out);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    /// A new output never replaces what appeared at its destination while it was written: the
    /// finished file is kept beside it and the error says where.
    #[test]
    fn a_new_output_never_replaces_what_appeared() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.trc");
        std::fs::write(&p, b"evidence").unwrap();
        let e = Plan::new()
            .new_output("the output", &p, Holds::Other, 0)
            .unwrap_err();
        assert!(format!("{e:#}").contains("writes a new file only"), "{e:#}");
        std::fs::remove_file(&p).unwrap();
        let out = Plan::new()
            .new_output("the output", &p, Holds::Other, 0)
            .unwrap();
        std::fs::write(&p, b"appeared").unwrap();
        let e = format!("{:#}", out.write_bytes(b"trace").unwrap_err());
        assert!(e.contains("kept in") && e.contains("iolens-kept-"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"appeared");
        let kept: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("iolens-kept-"))
            .collect();
        assert_eq!(kept.len(), 1);
        assert_eq!(std::fs::read(&kept[0]).unwrap(), b"trace");
    }

    #[test]
    fn temp_names_are_told_apart() {
        assert!(is_temp_name(b".iolens-results-0123456789abcdef.tmp"));
        assert!(is_temp_name(b".iolens-output-0123456789ABCDEF.tmp"));
        for n in [
            &b".iolens-results-mine.tmp"[..],
            b".iolens-results-0123456789abcdef.tmp~",
            b".iolens-other-0123456789abcdef.tmp",
            b"iolens-results-0123456789abcdef.tmp",
            b".iolens-results-0123456789abcdeg.tmp",
        ] {
            assert!(!is_temp_name(n), "{}", String::from_utf8_lossy(n));
        }
    }
}
