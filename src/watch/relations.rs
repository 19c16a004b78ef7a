//! Which PostgreSQL relation each traced I/O syscall was on. The kernel side hands every
//! syscall's file (inode and filesystem device, read through its descriptor at entry); the
//! first time a file is seen its path is read from `/proc/PID/fd/FD` (and checked to be the
//! same inode), then kept by (device, inode). A path in a data directory names what PostgreSQL
//! keeps there: a relation's file (`base/DBOID/FILENODE`, its segments `.1`, `.2`, its forks
//! `_fsm`, `_vm`, `_init`; `global/` for shared catalogs; a tablespace's
//! `PG_VERSION_CATVERSION/DBOID/FILENODE`), a temporary relation (`tBACKEND_FILENODE`), a
//! temporary file (`pgsql_tmp`), a WAL segment (`pg_wal`). At the watch's end, with a DSN, each
//! database's catalog names the filenodes (`pg_filenode_relation`, connected to that database:
//! filenodes are per database) as `schema.table`, index, TOAST table...; without one, the files
//! are named by their paths and the output says that names need `--dsn`.

use std::collections::BTreeMap;

// Looked up per event (every off-CPU span, every syscall): the Fx hash, not SipHash.
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use anyhow::Result;

use crate::results::{PgRelationIo, PgRelationRole, PgRelations};

/// Connects to the server the watch was given (`--dsn`), to the named database, or to the
/// DSN's own when `None`.
pub type Connect = Arc<dyn Fn(Option<&str>) -> Result<postgres::Client> + Send + Sync>;

/// The catalogs to name relations by: a way to connect, and the DSN as shown (redacted).
#[derive(Clone)]
pub struct Catalog {
    pub connect: Connect,
    pub shown: String,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Catalog({})", self.shown)
    }
}

/// A relation's fork, as its file name's suffix says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Fork {
    Main,
    Fsm,
    Vm,
    Init,
}

impl Fork {
    fn name(self) -> &'static str {
        match self {
            Fork::Main => "main",
            Fork::Fsm => "free space map",
            Fork::Vm => "visibility map",
            Fork::Init => "init",
        }
    }
}

/// Where a relation's files are: the database's default tablespace, `pg_global`, or another
/// tablespace (the directory holding its `PG_…` directory).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Space {
    Default,
    Global,
    At(String),
}

/// What a file in a PostgreSQL data directory is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PgFile {
    /// A relation's file: database oid (0 for `global/`), filenode, fork, segment; `temp`: a
    /// temporary relation's (the backend id in its name).
    Relation {
        space: Space,
        db: u32,
        node: u32,
        fork: Fork,
        segment: u32,
        temp: Option<u32>,
    },
    /// A temporary file (sorts, hashes spilled to disk): `pgsql_tmp/…`.
    TempFile,
    /// A WAL segment (`pg_wal/…`).
    Wal,
    /// Another file of the data directory, by its directory (`pg_xact`, `pg_multixact`, …).
    Other(String),
}

/// What `path` is in a PostgreSQL data directory; `None` when it is not one of its files.
pub(crate) fn classify(path: &str) -> Option<PgFile> {
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let n = parts.len();
    if n < 2 {
        return None;
    }
    let (dir, file) = (parts[n - 2], parts[n - 1]);
    if parts.contains(&"pgsql_tmp") || file.starts_with("pgsql_tmp") {
        return Some(PgFile::TempFile);
    }
    if dir == "pg_wal" && file.len() == 24 && file.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Some(PgFile::Wal);
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // FILENODE[_fork][.segment], or tBACKEND_FILENODE[_fork][.segment].
    let rel = |name: &str| -> Option<(u32, Fork, u32, Option<u32>)> {
        let (base, segment) = match name.split_once('.') {
            Some((b, s)) if digits(s) => (b, s.parse().ok()?),
            Some(_) => return None,
            None => (name, 0),
        };
        let (temp, rest) = match base.strip_prefix('t') {
            Some(r) => {
                let (b, r) = r.split_once('_')?;
                (Some(b.parse().ok()?), r)
            }
            None => (None, base),
        };
        let (node, fork) = match rest.split_once('_') {
            Some((n, "fsm")) => (n, Fork::Fsm),
            Some((n, "vm")) => (n, Fork::Vm),
            Some((n, "init")) => (n, Fork::Init),
            Some(_) => return None,
            None => (rest, Fork::Main),
        };
        digits(node).then_some(())?;
        Some((node.parse().ok()?, fork, segment, temp))
    };
    let relation = |space: Space, db: u32| {
        rel(file).map(|(node, fork, segment, temp)| PgFile::Relation {
            space,
            db,
            node,
            fork,
            segment,
            temp,
        })
    };
    if dir == "global" {
        return relation(Space::Global, 0);
    }
    if n >= 3 && digits(dir) {
        let db: u32 = dir.parse().ok()?;
        let up = parts[n - 3];
        if up == "base" {
            return relation(Space::Default, db);
        }
        if up.starts_with("PG_") {
            let at = format!("/{}", parts[..n - 3].join("/"));
            return relation(Space::At(at), db);
        }
    }
    // Other directories of a data directory (the WAL's status files included).
    const DIRS: &[&str] = &[
        "pg_wal",
        "pg_xact",
        "pg_multixact",
        "pg_subtrans",
        "pg_commit_ts",
        "pg_logical",
        "pg_replslot",
        "pg_stat",
        "pg_stat_tmp",
        "pg_twophase",
        "pg_serial",
        "pg_notify",
        "pg_snapshots",
    ];
    parts[..n - 1]
        .iter()
        .rev()
        .find(|d| DIRS.contains(d))
        .map(|d| PgFile::Other(d.to_string()))
}

/// Sums of the syscalls on one file.
#[derive(Clone, Copy, Default)]
struct Io {
    reads: u64,
    read_bytes: u64,
    writes: u64,
    write_bytes: u64,
    syncs: u64,
    syscall_ns: u64,
    device_ns: u64,
    queue_ns: u64,
}

/// What a traced syscall does to its file.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileOp {
    Read,
    Write,
    Sync,
}

/// Appended to the role of a process whose io_uring did a relation's I/O.
pub(crate) const URING_SUFFIX: &str = " (io_uring)";

/// The op of traced syscall `name` on its file; `None` for those whose first argument is not
/// a file read or written (io_submit, io_getevents, io_uring_enter).
pub(crate) fn file_op(name: &str) -> Option<FileOp> {
    match name {
        "pread64" | "preadv" | "preadv2" => Some(FileOp::Read),
        "pwrite64" | "pwritev" | "pwritev2" => Some(FileOp::Write),
        "fsync" | "fdatasync" => Some(FileOp::Sync),
        _ => None,
    }
}

impl Io {
    fn with(mut self, op: FileOp, ns: u64, bytes: u64, device_ns: u64, queue_ns: u64) -> Io {
        self.add(op, ns, bytes, device_ns, queue_ns);
        self
    }

    fn merge(&mut self, o: &Io) {
        self.reads += o.reads;
        self.read_bytes += o.read_bytes;
        self.writes += o.writes;
        self.write_bytes += o.write_bytes;
        self.syncs += o.syncs;
        self.syscall_ns += o.syscall_ns;
        self.device_ns += o.device_ns;
        self.queue_ns += o.queue_ns;
    }

    fn add(&mut self, op: FileOp, ns: u64, bytes: u64, device_ns: u64, queue_ns: u64) {
        match op {
            FileOp::Read => {
                self.reads += 1;
                self.read_bytes += bytes;
            }
            FileOp::Write => {
                self.writes += 1;
                self.write_bytes += bytes;
            }
            FileOp::Sync => self.syncs += 1,
        }
        self.syscall_ns += ns;
        self.device_ns += device_ns;
        self.queue_ns += queue_ns;
    }
}

/// Who did a file's I/O: the process, and whether through its io_uring (submitted by it, done
/// by the kernel inline or in its io_uring worker threads) rather than its own syscalls.
type Doer = (u32, bool);

/// A file seen: what it is (`None`: not a PostgreSQL file) and its sums, by the process that
/// made the syscalls.
struct Seen {
    what: Option<PgFile>,
    by_pid: HashMap<Doer, Io>,
    /// Its path when first seen (to tell at the end whether it is gone: dropped).
    path: Option<String>,
}

/// The kernel's numbering of a filesystem's device (major << 20 | minor) from a `stat`'s.
fn kernel_dev(dev: u64) -> u32 {
    (libc::major(dev) << 20) | (libc::minor(dev) & 0xfffff)
}

/// The files of the watched servers' data directories, by (filesystem device, inode): how a
/// file is named whose reader is gone (a session that ended before the watch read its
/// events: its descriptors are closed, but the file is still where PostgreSQL keeps it).
/// Found from each postmaster's working directory (it runs in its data directory); read again
/// when a file is not found, at most once every [`DataDirs::RESCAN`], and at the end.
#[derive(Default)]
struct DataDirs {
    /// Postmasters already looked at.
    servers: std::collections::HashSet<u32>,
    dirs: std::collections::BTreeSet<std::path::PathBuf>,
    by_inode: HashMap<(u32, u64), String>,
    scanned: Option<std::time::Instant>,
}

impl DataDirs {
    const RESCAN: std::time::Duration = std::time::Duration::from_secs(1);

    /// Server `postmaster`'s data directory, the first time it is seen.
    fn server(&mut self, postmaster: u32) {
        if !self.servers.insert(postmaster) {
            return;
        }
        if let Ok(d) = std::fs::read_link(format!("/proc/{postmaster}/cwd")) {
            if d.join("PG_VERSION").is_file() && self.dirs.insert(d) {
                // A new directory: its files are read at the next miss.
                self.scanned = None;
            }
        }
    }

    /// Read the directories' relation files, WAL and tablespaces again.
    fn scan(&mut self) {
        use std::os::unix::fs::MetadataExt as _;
        self.scanned = Some(std::time::Instant::now());
        let mut put = |dir: &std::path::Path| {
            let Ok(rd) = std::fs::read_dir(dir) else {
                return;
            };
            for f in rd.flatten() {
                if let Ok(m) = f.metadata() {
                    if m.is_file() {
                        self.by_inode.insert(
                            (kernel_dev(m.dev()), m.ino()),
                            f.path().to_string_lossy().into_owned(),
                        );
                    }
                }
            }
        };
        let subdirs = |d: &std::path::Path| -> Vec<std::path::PathBuf> {
            std::fs::read_dir(d)
                .map(|rd| {
                    rd.flatten()
                        .map(|e| e.path())
                        .filter(|p| p.is_dir())
                        .collect()
                })
                .unwrap_or_default()
        };
        for d in &self.dirs {
            put(&d.join("global"));
            put(&d.join("pg_wal"));
            for db in subdirs(&d.join("base")) {
                put(&db);
            }
            // A tablespace by its real place, as the kernel names its files.
            for link in subdirs(&d.join("pg_tblspc")) {
                let Ok(at) = std::fs::canonicalize(&link) else {
                    continue;
                };
                for version in subdirs(&at) {
                    for db in subdirs(&version) {
                        put(&db);
                    }
                }
            }
        }
    }

    /// The path of file `key`; the directories are read again when it is not known and they
    /// were last read a while ago (or `now`).
    fn path(&mut self, key: (u32, u64), now: bool) -> Option<String> {
        if let Some(p) = self.by_inode.get(&key) {
            return Some(p.clone());
        }
        if self.dirs.is_empty() {
            return None;
        }
        if now || self.scanned.is_none_or(|t| t.elapsed() >= Self::RESCAN) {
            self.scan();
            return self.by_inode.get(&key).cloned();
        }
        None
    }
}

/// The watched processes' files, by (filesystem device, inode), and their sums.
#[derive(Default)]
pub(crate) struct FileTable {
    files: HashMap<(u32, u64), Seen>,
    /// Files not named yet (their readers' descriptors closed, and not found in a data
    /// directory yet): their sums, by process, until they are named or the watch ends.
    pending: HashMap<(u32, u64), HashMap<Doer, Io>>,
    /// Files whose path could not be read from their reader's descriptors, and the tries so
    /// far (a few per file).
    tries: HashMap<(u32, u64), u8>,
    dirs: DataDirs,
}

/// The path of the file open under `fd` in process `pid`, if it is still the inode `ino` on
/// the filesystem `fdev` (the kernel's numbering, major << 20 | minor).
pub(super) fn path_of(pid: u32, fd: i32, fdev: u32, ino: u64) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let link = format!("/proc/{pid}/fd/{fd}");
    let path = std::fs::read_link(&link).ok()?;
    let m = std::fs::metadata(&link).ok()?;
    let same = m.ino() == ino && kernel_dev(m.dev()) == fdev;
    same.then(|| path.to_string_lossy().into_owned())
}

/// The path of the file (`fdev`, `ino`) among those process `pid` has open: for an io_uring
/// request, which names its file, not the descriptor it was submitted on.
pub(super) fn path_by_inode(pid: u32, fdev: u32, ino: u64) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    dir.flatten().find_map(|d| {
        let m = std::fs::metadata(d.path()).ok()?;
        (m.ino() == ino && kernel_dev(m.dev()) == fdev)
            .then(|| std::fs::read_link(d.path()).ok())
            .flatten()
            .map(|p| p.to_string_lossy().into_owned())
    })
}

impl FileTable {
    /// A watched server, by its postmaster: its data directory names the files whose readers
    /// are gone.
    pub(crate) fn server(&mut self, postmaster: u32) {
        self.dirs.server(postmaster);
    }

    /// One traced syscall of process `pid` on descriptor `fd`, the file (`fdev`, `ino`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn syscall(
        &mut self,
        pid: u32,
        fd: i32,
        fdev: u32,
        ino: u64,
        op: FileOp,
        ns: u64,
        bytes: u64,
        device_ns: u64,
        queue_ns: u64,
    ) {
        let io = Io::default().with(op, ns, bytes, device_ns, queue_ns);
        self.add(pid, false, fdev, ino, io, || path_of(pid, fd, fdev, ino));
    }

    /// One io_uring request of process `pid` (its submitter) on the file (`fdev`, `ino`: the
    /// request's own file, read by the kernel side), `ns` from its submission to its
    /// completion. Named from the data directories first: the submitter may be gone.
    pub(crate) fn uring(&mut self, pid: u32, fdev: u32, ino: u64, op: FileOp, ns: u64, bytes: u64) {
        let io = Io::default().with(op, ns, bytes, 0, 0);
        self.add(pid, true, fdev, ino, io, || path_by_inode(pid, fdev, ino));
    }

    fn add(
        &mut self,
        pid: u32,
        uring: bool,
        fdev: u32,
        ino: u64,
        io: Io,
        path: impl FnOnce() -> Option<String>,
    ) {
        let key = (fdev, ino);
        if !self.files.contains_key(&key) {
            // From the reader's descriptors (a few tries: a file closed, or its process gone,
            // is not there any more), else from the data directories. An io_uring request
            // names its file, not a descriptor: the data directories first.
            let by_reader = |t: &mut HashMap<(u32, u64), u8>| {
                let n = t.entry(key).or_insert(0);
                *n = n.saturating_add(1);
                if *n > 3 {
                    return None;
                }
                path()
            };
            let found = if uring {
                self.dirs
                    .path(key, false)
                    .or_else(|| by_reader(&mut self.tries))
            } else {
                by_reader(&mut self.tries).or_else(|| self.dirs.path(key, false))
            };
            if let Some(p) = found {
                self.name(key, p);
            }
        }
        let by_pid = match self.files.get_mut(&key) {
            Some(Seen { what: None, .. }) => return,
            Some(s) => &mut s.by_pid,
            None => self.pending.entry(key).or_default(),
        };
        by_pid.entry((pid, uring)).or_default().merge(&io);
    }

    /// File `key` is at `path`: what it is, with its sums so far.
    fn name(&mut self, key: (u32, u64), path: String) {
        self.tries.remove(&key);
        let by_pid = self.pending.remove(&key).unwrap_or_default();
        self.files.insert(
            key,
            Seen {
                what: classify(&path),
                by_pid,
                path: Some(path),
            },
        );
    }

    /// Exited server processes folded into stand-ins (`moved`: pid, stand-in; see
    /// `PgWaitAcc::fold_gone`): their sums by file move to the stand-in's, which the end splits
    /// by role as it would have theirs.
    pub(crate) fn fold(&mut self, moved: &[(u32, u32)]) {
        if moved.is_empty() {
            return;
        }
        let to: HashMap<u32, u32> = moved.iter().copied().collect();
        let by_pids = self
            .files
            .values_mut()
            .map(|s| &mut s.by_pid)
            .chain(self.pending.values_mut());
        for by_pid in by_pids {
            let keys: Vec<Doer> = by_pid
                .keys()
                .filter(|d| to.contains_key(&d.0))
                .copied()
                .collect();
            for d in keys {
                if let Some(io) = by_pid.remove(&d) {
                    by_pid.entry((to[&d.0], d.1)).or_default().merge(&io);
                }
            }
        }
    }

    /// Whether any PostgreSQL file was seen.
    pub(crate) fn any(&self) -> bool {
        self.files.values().any(|s| s.what.is_some())
    }

    /// The relations table: files named through `catalog` (each database's, connected to it)
    /// when given, else by their paths; most I/O time first. Each row is split by the role of
    /// the processes that made its syscalls (`role_of` a pid: client backend, IO worker,
    /// checkpointer...).
    pub(crate) fn finish(
        mut self,
        catalog: Option<&Catalog>,
        role_of: &dyn Fn(u32) -> String,
    ) -> Option<PgRelations> {
        // Files still not named: the data directories as they are now.
        let keys: Vec<(u32, u64)> = self.pending.keys().copied().collect();
        let mut fresh = true;
        for key in keys {
            if let Some(p) = self.dirs.path(key, fresh) {
                self.name(key, p);
            }
            fresh = false;
        }
        if !self.any() {
            return None;
        }
        // Relation files gone by the end: dropped (or rewritten: TRUNCATE, VACUUM FULL, a
        // table rewrite give a relation a new file) during the watch.
        let mut gone: std::collections::HashSet<(Space, u32, u32)> = Default::default();
        let mut files: Vec<(PgFile, HashMap<Doer, Io>)> = Vec::new();
        for s in self.files.into_values() {
            let Some(what) = s.what else { continue };
            if let (
                PgFile::Relation {
                    space, db, node, ..
                },
                Some(p),
            ) = (&what, &s.path)
            {
                // A dropped relation's first segment stays, empty, until the next checkpoint.
                if std::fs::metadata(p).map_or(true, |m| m.len() == 0) {
                    gone.insert((space.clone(), *db, *node));
                }
            }
            files.push((what, s.by_pid));
        }
        // Closed, or their process gone, before they were named, and not in a data directory.
        let mut unnamed: HashMap<Doer, Io> = HashMap::default();
        for by_pid in self.pending.into_values() {
            for (doer, io) in by_pid {
                unnamed.entry(doer).or_default().merge(&io);
            }
        }
        if !unnamed.is_empty() {
            files.push((
                PgFile::Other("(closed before it was named)".into()),
                unnamed,
            ));
        }
        let mut notes = Vec::new();
        let mut resolved = Vec::new();
        let names = match catalog {
            Some(c) => names_from(c, &files, &mut resolved, &mut notes),
            None => {
                notes.push(
                    "Relations are named by their files: give --dsn to name them (schema.table, \
                     index) from the server's catalogs."
                        .into(),
                );
                Names::default()
            }
        };
        if catalog.is_some() && !resolved.is_empty() {
            notes.push(
                "Names are read from the catalogs at the watch's end: a relation dropped or \
                 rewritten (TRUNCATE, VACUUM FULL) during the watch is shown by its file, \
                 marked (dropped) when that file is gone or emptied."
                    .into(),
            );
        }
        // One row per (relation, fork); segments and files of one relation summed.
        let mut rows: BTreeMap<(String, String), (PgRelationIo, std::collections::BTreeSet<u32>)> =
            BTreeMap::new();
        for (f, by_pid) in files {
            let (name, kind, database, fork, segment) = describe(&f, &names, &gone);
            let (row, segs) = rows.entry((name.clone(), fork.clone())).or_insert_with(|| {
                (
                    PgRelationIo {
                        name,
                        kind,
                        database,
                        fork,
                        ..Default::default()
                    },
                    Default::default(),
                )
            });
            segs.insert(segment);
            row.files += 1;
            for ((pid, uring), io) in by_pid {
                row.reads += io.reads;
                row.read_bytes += io.read_bytes;
                row.writes += io.writes;
                row.write_bytes += io.write_bytes;
                row.syncs += io.syncs;
                row.syscall_s += io.syscall_ns as f64 / 1e9;
                row.device_s += io.device_ns as f64 / 1e9;
                row.queue_s += io.queue_ns as f64 / 1e9;
                let mut role = role_of(pid);
                if uring {
                    role.push_str(URING_SUFFIX);
                }
                let r = match row.by_role.iter().position(|x| x.role == role) {
                    Some(i) => &mut row.by_role[i],
                    None => {
                        row.by_role.push(PgRelationRole {
                            role,
                            ..Default::default()
                        });
                        row.by_role.last_mut().unwrap()
                    }
                };
                r.reads += io.reads;
                r.writes += io.writes;
                r.syncs += io.syncs;
                r.syscall_s += io.syscall_ns as f64 / 1e9;
            }
        }
        let mut rows: Vec<PgRelationIo> = rows
            .into_values()
            .map(|(mut r, _)| {
                r.by_role.sort_by(|a, b| {
                    b.syscall_s
                        .total_cmp(&a.syscall_s)
                        .then_with(|| a.role.cmp(&b.role))
                });
                r
            })
            .collect();
        rows.sort_by(|a, b| {
            b.syscall_s
                .total_cmp(&a.syscall_s)
                .then_with(|| a.name.cmp(&b.name))
        });
        Some(PgRelations {
            rows,
            resolved,
            notes,
            queries: Vec::new(),
            query_notes: Vec::new(),
        })
    }
}

/// A relation as its database's catalog names it.
#[derive(Clone, Debug)]
struct RelName {
    /// `schema.name`.
    name: String,
    /// "table", "index", "TOAST table", …
    kind: String,
}

/// Names found: (space, database oid, filenode) → relation; database oid → name.
#[derive(Default)]
struct Names {
    rels: HashMap<(Space, u32, u32), RelName>,
    dbs: HashMap<u32, String>,
}

fn relkind(k: &str) -> &'static str {
    match k {
        "r" => "table",
        "i" => "index",
        "I" => "partitioned index",
        "t" => "TOAST table",
        "S" => "sequence",
        "m" => "materialized view",
        "p" => "partitioned table",
        _ => "relation",
    }
}

/// Name the files' filenodes from each database's catalog (connected to each database in
/// turn: a filenode means something only in its database; shared catalogs from the DSN's).
fn names_from(
    c: &Catalog,
    files: &[(PgFile, HashMap<Doer, Io>)],
    resolved: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Names {
    let mut names = Names::default();
    let mut wanted: BTreeMap<u32, Vec<(Space, u32)>> = BTreeMap::new();
    for (f, _) in files {
        if let PgFile::Relation {
            space,
            db,
            node,
            temp: None,
            ..
        } = f
        {
            wanted.entry(*db).or_default().push((space.clone(), *node));
        }
    }
    let mut first = match (c.connect)(None) {
        Ok(cl) => cl,
        Err(e) => {
            notes.push(format!(
                "Relations are named by their files: cannot connect with {} to read the \
                 catalogs: {e:#}",
                c.shown
            ));
            return names;
        }
    };
    let dsn_db = first
        .query_one("select current_database()", &[])
        .ok()
        .map(|r| r.get::<_, String>(0));
    if let Ok(rows) = first.query("select oid, datname from pg_database", &[]) {
        for r in rows {
            names.dbs.insert(r.get::<_, u32>(0), r.get(1));
        }
    }
    // Tablespaces other than the default ones, by location.
    let mut spaces: Vec<(u32, String)> = Vec::new();
    if let Ok(rows) = first.query(
        "select oid, pg_tablespace_location(oid) from pg_tablespace \
         where pg_tablespace_location(oid) <> ''",
        &[],
    ) {
        for r in rows {
            let loc: String = r.get(1);
            let canon = std::fs::canonicalize(&loc)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or(loc);
            spaces.push((r.get(0), canon));
        }
    }
    for (db, list) in wanted {
        let dbname = if db == 0 {
            dsn_db.clone()
        } else {
            names.dbs.get(&db).cloned()
        };
        let Some(dbname) = dbname else {
            notes.push(format!(
                "Database oid {db} is not in pg_database (dropped?): its files are named by path."
            ));
            continue;
        };
        let mut other;
        let client = if db == 0 || Some(&dbname) == dsn_db.as_ref() {
            &mut first
        } else {
            match (c.connect)(Some(&dbname)) {
                Ok(cl) => {
                    other = cl;
                    &mut other
                }
                Err(e) => {
                    notes.push(format!(
                        "Database {dbname}'s relations are named by their files: cannot connect \
                         to it: {e:#}"
                    ));
                    continue;
                }
            }
        };
        let mut found = 0;
        for (space, node) in list {
            let spc: u32 = match &space {
                Space::Default => 0,
                Space::Global => 1664,
                Space::At(at) => match spaces.iter().find(|(_, loc)| loc == at) {
                    Some((oid, _)) => *oid,
                    None => continue,
                },
            };
            let row = client.query_opt(
                "select n.nspname, c.relname, c.relkind::text, \
                        (select r.oid::regclass::text from pg_class r \
                          where r.reltoastrelid = c.oid limit 1), \
                        (select i.indrelid::regclass::text from pg_index i \
                          where i.indexrelid = c.oid) \
                   from pg_class c join pg_namespace n on n.oid = c.relnamespace \
                  where c.oid = pg_filenode_relation($1, $2)",
                &[&spc, &node],
            );
            match row {
                Ok(Some(r)) => {
                    let (nsp, rel, kind): (String, String, String) = (r.get(0), r.get(1), r.get(2));
                    let toast_of: Option<String> = r.get(3);
                    let index_of: Option<String> = r.get(4);
                    let mut kind = relkind(&kind).to_string();
                    if let Some(t) = toast_of {
                        kind = format!("TOAST table of {t}");
                    } else if let Some(t) = index_of {
                        kind = format!("{kind} on {t}");
                    }
                    names.rels.insert(
                        (space.clone(), db, node),
                        RelName {
                            name: format!("{nsp}.{rel}"),
                            kind,
                        },
                    );
                    found += 1;
                }
                Ok(None) => {}
                Err(e) => {
                    notes.push(format!("Database {dbname}: cannot read its catalog: {e}"));
                    break;
                }
            }
        }
        resolved.push(if db == 0 {
            format!("the shared catalogs (global/, read through {dbname}): {found} file(s) named")
        } else {
            format!("{dbname} (oid {db}): {found} relation file(s) named")
        });
    }
    names
}

/// A file's row: (name, kind, database, fork, segment).
fn describe(
    f: &PgFile,
    names: &Names,
    gone: &std::collections::HashSet<(Space, u32, u32)>,
) -> (String, String, Option<String>, String, u32) {
    match f {
        PgFile::Relation {
            space,
            db,
            node,
            fork,
            segment,
            temp,
        } => {
            let database = if *db == 0 {
                Some("(shared)".to_string())
            } else {
                Some(
                    names
                        .dbs
                        .get(db)
                        .cloned()
                        .unwrap_or_else(|| format!("oid {db}")),
                )
            };
            let (name, kind) = match (temp, names.rels.get(&(space.clone(), *db, *node))) {
                (Some(b), _) => (
                    format!("temporary relation {node} (backend {b})"),
                    "temporary relation".to_string(),
                ),
                (None, Some(r)) => (r.name.clone(), r.kind.clone()),
                (None, None) => {
                    let dir = match space {
                        Space::Default => format!("base/{db}"),
                        Space::Global => "global".to_string(),
                        Space::At(at) => format!("{at}/…/{db}"),
                    };
                    if gone.contains(&(space.clone(), *db, *node)) {
                        (
                            format!("{dir}/{node} (dropped)"),
                            "relation dropped or rewritten during the watch".to_string(),
                        )
                    } else {
                        (
                            format!("{dir}/{node}"),
                            "relation file (not named)".to_string(),
                        )
                    }
                }
            };
            (name, kind, database, fork.name().to_string(), *segment)
        }
        PgFile::TempFile => (
            "temporary files (pgsql_tmp)".into(),
            "temporary files".into(),
            None,
            String::new(),
            0,
        ),
        PgFile::Wal => ("WAL (pg_wal)".into(), "WAL".into(), None, String::new(), 0),
        PgFile::Other(d) => (d.clone(), "other file".into(), None, String::new(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(
        space: Space,
        db: u32,
        node: u32,
        fork: Fork,
        segment: u32,
        temp: Option<u32>,
    ) -> PgFile {
        PgFile::Relation {
            space,
            db,
            node,
            fork,
            segment,
            temp,
        }
    }

    #[test]
    fn data_directory_paths_name_what_postgresql_keeps_there() {
        let d = "/var/lib/postgresql/15/main";
        let c = |p: &str| classify(&format!("{d}/{p}"));
        assert_eq!(
            c("base/16384/16385"),
            Some(rel(Space::Default, 16384, 16385, Fork::Main, 0, None))
        );
        assert_eq!(
            c("base/16384/16385.2"),
            Some(rel(Space::Default, 16384, 16385, Fork::Main, 2, None))
        );
        assert_eq!(
            c("base/5/2619_fsm"),
            Some(rel(Space::Default, 5, 2619, Fork::Fsm, 0, None))
        );
        assert_eq!(
            c("base/5/2619_vm.1"),
            Some(rel(Space::Default, 5, 2619, Fork::Vm, 1, None))
        );
        assert_eq!(
            c("base/5/16400_init"),
            Some(rel(Space::Default, 5, 16400, Fork::Init, 0, None))
        );
        assert_eq!(
            c("base/5/t3_16390"),
            Some(rel(Space::Default, 5, 16390, Fork::Main, 0, Some(3)))
        );
        assert_eq!(
            c("global/1262"),
            Some(rel(Space::Global, 0, 1262, Fork::Main, 0, None))
        );
        assert_eq!(
            classify("/srv/ts1/PG_15_202209061/16384/16500.3"),
            Some(rel(
                Space::At("/srv/ts1".into()),
                16384,
                16500,
                Fork::Main,
                3,
                None
            ))
        );
        assert_eq!(c("pg_wal/000000010000000000000003"), Some(PgFile::Wal));
        assert_eq!(c("base/pgsql_tmp/pgsql_tmp1234.0"), Some(PgFile::TempFile));
        assert_eq!(
            classify("/srv/ts1/PG_15_202209061/pgsql_tmp/pgsql_tmp99.1 (deleted)"),
            Some(PgFile::TempFile)
        );
        assert_eq!(c("pg_xact/0000"), Some(PgFile::Other("pg_xact".into())));
        assert_eq!(
            c("pg_wal/archive_status/x.ready"),
            Some(PgFile::Other("pg_wal".into()))
        );
        // Not a PostgreSQL file, or not a relation's name.
        assert_eq!(classify("/home/me/data.bin"), None);
        assert_eq!(c("base/16384/PG_VERSION"), None);
        assert_eq!(c("base/16384/16385_xyz"), None);
        assert_eq!(c("base/16384/16385.x"), None);
        assert_eq!(classify("/"), None);
    }
}
