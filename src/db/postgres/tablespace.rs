//! A PostgreSQL layout over several directories (`--dir` given with `--engine postgres`), as a
//! database's data files spread over the disks of a disk group: one tablespace per directory,
//! schema `s`'s table and index in the tablespace of directory `s mod N` (the placement SQLite's
//! [`Part`](crate::db::sqlite) uses), each named `iolens_ts_<database oid>_<i>`.
//!
//! Safety, as `run`'s: iolens lets the server write only into a directory it created, or one
//! it found empty, and marks each with [`MARKER`] (the cluster's system identifier and the
//! tablespace's name). A directory holding anything else, or another cluster's or tablespace's
//! marker, refuses the whole setup before any directory, tablespace or table is made; a run
//! checks every directory's marker and the server's location of its tablespace before any
//! session connects. `db drop` drops the tablespaces, removes the markers, removes the
//! directories iolens created and gives back the ones it found empty their owner and mode.

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use postgres::Client;
use serde::{Deserialize, Serialize};

use super::errors::PgCtx;

/// The marker file iolens writes into each tablespace directory.
pub(crate) const MARKER: &str = ".iolens-tablespace";
const MARKER_FORMAT: &str = "iolens-pg-tablespace-1";

/// One tablespace of the layout: its name and its directory (absolute, as the server has it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Space {
    pub name: String,
    pub location: PathBuf,
}

/// What iolens wrote into a directory it gave the server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Marker {
    format: String,
    /// `pg_control_system()`'s system identifier of the cluster the tablespace belongs to.
    system_identifier: String,
    tablespace: String,
    /// iolens made the directory (`db drop` removes it), or found it empty and took it, with
    /// the owner and mode it had (`db drop` puts them back).
    created_dir: bool,
    was: Option<(u32, u32, u32)>,
}

/// The server as the tablespaces need it: on this host, with its data directory's owner.
struct Server {
    system_identifier: String,
    data_dir: PathBuf,
    uid: u32,
    gid: u32,
    datoid: u32,
}

fn server(c: &mut Client) -> Result<Server> {
    let superuser: bool = c
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .pg("cannot read the role")?
        .get(0);
    if !superuser {
        bail!(
            "--dir with --engine postgres creates one tablespace per directory, and CREATE \
             TABLESPACE needs a superuser: connect as one, or leave out --dir (the tables then \
             live in the database's default tablespace)"
        );
    }
    let d: String = c
        .query_one("SELECT current_setting('data_directory')", &[])
        .pg("cannot read the server's data directory")?
        .get(0);
    if !Path::new(&d).exists() {
        bail!(
            "--dir with --engine postgres places the tables in tablespaces at those directories \
             on the server's host, and this server's data directory is not on this host: run \
             iolens on the server's host"
        );
    }
    let data_dir = PathBuf::from(d);
    let m = std::fs::metadata(&data_dir)
        .with_context(|| format!("cannot read the data directory {}", data_dir.display()))?;
    let system_identifier: String = c
        .query_one(
            "SELECT system_identifier::text FROM pg_control_system()",
            &[],
        )
        .pg("cannot read the cluster's system identifier")?
        .get(0);
    let datoid: u32 = c
        .query_one(
            "SELECT oid FROM pg_database WHERE datname = current_database()",
            &[],
        )
        .pg("cannot read the database's oid")?
        .get::<_, postgres::types::Oid>(0);
    Ok(Server {
        system_identifier,
        data_dir,
        uid: m.uid(),
        gid: m.gid(),
        datoid,
    })
}

/// `dir` made absolute without following a last component that does not exist yet.
fn absolute(dir: &Path) -> Result<PathBuf> {
    if dir.exists() {
        return dir
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", dir.display()));
    }
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        bail!("{} is not a directory path", dir.display());
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let p = parent.canonicalize().with_context(|| {
        format!(
            "--dir {}: its parent directory does not exist (iolens creates the last component \
             only)",
            dir.display()
        )
    })?;
    Ok(p.join(name))
}

fn read_marker(dir: &Path) -> Result<Option<Marker>> {
    let p = dir.join(MARKER);
    match std::fs::read_to_string(&p) {
        Ok(s) => {
            let m: Marker = serde_json::from_str(&s)
                .with_context(|| format!("{} is not an iolens tablespace marker", p.display()))?;
            if m.format != MARKER_FORMAT {
                bail!("{} is not an iolens tablespace marker", p.display());
            }
            Ok(Some(m))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
    }
}

/// A directory checked for a new tablespace.
struct Checked {
    dir: PathBuf,
    /// Absent: iolens creates it.
    exists: bool,
}

/// What a directory holds besides iolens' marker and the server's own `PG_*` directory.
fn foreign_entries(dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if name != MARKER {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// Every directory checked for a new layout's tablespaces, all before anything is written:
/// distinct, outside the data directory, each absent (iolens creates it) or empty; a directory
/// holding anything else is refused, naming what it holds.
fn check_new(srv: &Server, dirs: &[PathBuf]) -> Result<Vec<Checked>> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 && euid != srv.uid {
        bail!(
            "--dir with --engine postgres: each directory must belong to the server's user (uid \
             {}, the owner of {}), and this process (uid {euid}) cannot give it one: run iolens \
             as that user or as root; nothing was created",
            srv.uid,
            srv.data_dir.display()
        );
    }
    let data = srv.data_dir.canonicalize().unwrap_or(srv.data_dir.clone());
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for d in dirs {
        let dir = absolute(d)?;
        if !seen.insert(dir.clone()) {
            bail!(
                "--dir {} is given twice: each tablespace needs a directory of its own; nothing \
                 was created",
                dir.display()
            );
        }
        if dir.starts_with(&data) || data.starts_with(&dir) {
            bail!(
                "--dir {} overlaps the server's data directory {}: a tablespace must lie \
                 outside it; nothing was created",
                dir.display(),
                data.display()
            );
        }
        let exists = match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => true,
            Ok(_) => bail!(
                "--dir {} is not a directory: refused, nothing was created",
                dir.display()
            ),
            Err(_) => false,
        };
        if exists {
            if let Some(m) = read_marker(&dir)? {
                bail!(
                    "{} already holds iolens tablespace {} (cluster {}): drop that layout \
                     first (`iolens db drop`), or give another directory; nothing was created",
                    dir.display(),
                    m.tablespace,
                    m.system_identifier
                );
            }
            let foreign = foreign_entries(&dir)?;
            if !foreign.is_empty() {
                bail!(
                    "{} is not empty ({}{}) and iolens did not create it: the server would write \
                     beside files iolens does not own. Give a new or empty directory; nothing \
                     was created",
                    dir.display(),
                    foreign
                        .iter()
                        .take(3)
                        .map(|s| format!("'{s}'"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if foreign.len() > 3 { ", …" } else { "" }
                );
            }
        }
        out.push(Checked { dir, exists });
    }
    Ok(out)
}

/// Check `dirs` and create one tablespace in each (directories, markers, `CREATE TABLESPACE`):
/// every directory passes its checks before the first is touched. `free` is called with each
/// checked directory before anything is written (the caller's free-space check).
pub(super) fn create(
    c: &mut Client,
    dirs: &[PathBuf],
    free: &dyn Fn(&Path) -> Result<()>,
) -> Result<Vec<Space>> {
    let srv = server(c)?;
    let checked = check_new(&srv, dirs)?;
    let names: Vec<String> = (0..checked.len())
        .map(|i| format!("iolens_ts_{}_{i}", srv.datoid))
        .collect();
    for n in &names {
        let taken: bool = c
            .query_one(
                "SELECT count(*) > 0 FROM pg_tablespace WHERE spcname = $1",
                &[n],
            )
            .pg("cannot read pg_tablespace")?
            .get(0);
        if taken {
            bail!(
                "tablespace {n} already exists (left by an earlier layout of this database?): \
                 drop it (DROP TABLESPACE {n}) or the layout (`iolens db drop`); nothing was \
                 created"
            );
        }
    }
    for k in &checked {
        free(if k.exists {
            &k.dir
        } else {
            k.dir.parent().unwrap_or(Path::new("/"))
        })?;
    }
    let mut spaces = Vec::new();
    for (k, name) in checked.iter().zip(&names) {
        let made = (|| -> Result<()> {
            let was = if k.exists {
                let m = std::fs::metadata(&k.dir)?;
                Some((m.uid(), m.gid(), m.permissions().mode() & 0o7777))
            } else {
                std::fs::create_dir(&k.dir)
                    .with_context(|| format!("cannot create {}", k.dir.display()))?;
                None
            };
            let marker = Marker {
                format: MARKER_FORMAT.into(),
                system_identifier: srv.system_identifier.clone(),
                tablespace: name.clone(),
                created_dir: !k.exists,
                was,
            };
            let mp = k.dir.join(MARKER);
            // Through the one writer: a link or anything but nothing at `mp` is refused there.
            let text = serde_json::to_string(&marker)?;
            crate::output::Plan::new()
                .new_output(
                    "the tablespace marker",
                    &mp,
                    crate::output::Holds::Other,
                    text.len() as u64,
                )?
                .write_bytes(text.as_bytes())
                .with_context(|| format!("cannot write {}", mp.display()))?;
            for p in [&k.dir, &mp] {
                std::os::unix::fs::chown(p, Some(srv.uid), Some(srv.gid))
                    .with_context(|| format!("cannot give {} to the server's user", p.display()))?;
            }
            std::fs::set_permissions(&k.dir, std::fs::Permissions::from_mode(0o700))?;
            let loc = k.dir.to_string_lossy().replace('\'', "''");
            c.batch_execute(&format!("CREATE TABLESPACE {name} LOCATION '{loc}'"))
                .pg(&format!(
                    "cannot create tablespace {name} in {}",
                    k.dir.display()
                ))
        })();
        if let Err(e) = made {
            // Undo what this setup made so far: its tablespaces, markers and directories.
            let _ = remove(c, &spaces);
            let _ = unmark(&k.dir);
            return Err(e);
        }
        spaces.push(Space {
            name: name.clone(),
            location: k.dir.clone(),
        });
    }
    Ok(spaces)
}

/// Before a run or a resumed setup: `dirs` (when given) are the layout's, in its order, and each
/// directory still holds its marker for this cluster and tablespace, where the server has the
/// tablespace. Nothing is written.
pub(super) fn check_existing(c: &mut Client, spaces: &[Space], dirs: &[PathBuf]) -> Result<()> {
    if !dirs.is_empty() {
        let given: Vec<PathBuf> = dirs.iter().map(|d| absolute(d)).collect::<Result<_>>()?;
        let have: Vec<&Path> = spaces.iter().map(|s| s.location.as_path()).collect();
        if have.is_empty() {
            bail!(
                "the database's iolens layout lives in its default tablespace, not over the \
                 directories given: leave out --dir, or drop it (`iolens db drop`) and set it up \
                 again with --dir"
            );
        }
        if given.iter().map(PathBuf::as_path).collect::<Vec<_>>() != have {
            bail!(
                "the layout's tablespaces are in {}; --dir gave {}: give the same directories in \
                 the same order (or none)",
                have.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                given
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if spaces.is_empty() {
        return Ok(());
    }
    let sysid: String = c
        .query_one(
            "SELECT system_identifier::text FROM pg_control_system()",
            &[],
        )
        .pg("cannot read the cluster's system identifier")?
        .get(0);
    for s in spaces {
        let loc: Option<String> = c
            .query_opt(
                "SELECT pg_tablespace_location(oid) FROM pg_tablespace WHERE spcname = $1",
                &[&s.name],
            )
            .pg("cannot read pg_tablespace")?
            .map(|r| r.get(0));
        match loc {
            Some(l) if Path::new(&l) == s.location => {}
            Some(l) => bail!(
                "tablespace {} is at {} on the server, not at {} as the layout recorded: \
                 refused",
                s.name,
                l,
                s.location.display()
            ),
            None => bail!(
                "tablespace {} of the layout no longer exists on the server: drop the layout \
                 (`iolens db drop`) and set it up again",
                s.name
            ),
        }
        match read_marker(&s.location) {
            Ok(Some(m)) if m.system_identifier == sysid && m.tablespace == s.name => {}
            Ok(Some(m)) => bail!(
                "{} holds the marker of tablespace {} of cluster {}, not of {} of this one \
                 ({sysid}): refused, nothing was run",
                s.location.display(),
                m.tablespace,
                m.system_identifier,
                s.name
            ),
            Ok(None) => bail!(
                "{} holds no iolens marker ({MARKER}): it is not the directory `iolens db setup` \
                 gave tablespace {}; refused, nothing was run",
                s.location.display(),
                s.name
            ),
            Err(e) => return Err(e.context("refused, nothing was run")),
        }
    }
    Ok(())
}

/// The layout's tablespaces, as `iolens_meta` recorded them (none: the default tablespace).
pub(super) fn read_spaces(c: &mut Client) -> Result<Vec<Space>> {
    let v: Option<String> = c
        .query_opt(
            "SELECT value FROM iolens_meta WHERE key = 'tablespaces'",
            &[],
        )
        .pg("cannot read iolens_meta")?
        .map(|r| r.get(0));
    match v {
        Some(v) => serde_json::from_str(&v).context("iolens_meta tablespaces are damaged"),
        None => Ok(Vec::new()),
    }
}

/// Drop `spaces` (their tables already dropped) and undo what setup did to their directories.
pub(super) fn remove(c: &mut Client, spaces: &[Space]) -> Result<()> {
    let mut first_err = None;
    for s in spaces {
        if let Err(e) = c
            .batch_execute(&format!("DROP TABLESPACE IF EXISTS {}", s.name))
            .pg(&format!("cannot drop tablespace {}", s.name))
        {
            first_err.get_or_insert(e);
            continue;
        }
        if let Err(e) = unmark(&s.location) {
            first_err.get_or_insert(e);
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Remove iolens' marker from `dir`, then `dir` itself when iolens created it and it is empty,
/// or give it back its owner and mode.
fn unmark(dir: &Path) -> Result<()> {
    let Some(m) = read_marker(dir)? else {
        return Ok(());
    };
    std::fs::remove_file(dir.join(MARKER))?;
    if m.created_dir {
        let _ = std::fs::remove_dir(dir);
    } else if let Some((uid, gid, mode)) = m.was {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}
