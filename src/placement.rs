//! Many hosts at once, seen from one rank: its rank and world size from the launcher's
//! environment (Slurm, Open MPI, PMIx, PMI, Kubernetes Indexed Jobs) or from `--rank`/`--ranks`,
//! the `{rank}`, `{host}` and `{ranks}` templates of per-rank paths, the common start time
//! (`--start-at`), and the host clock's synchronisation state (`adjtimex`).
//!
//! iolens has no cluster protocol of its own: a launcher starts one iolens per rank, each writes
//! its own results file, and `iolens merge` merges them.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};

pub use crate::results::hosts::{ClockSync, Launcher, Placement};

/// Where this process runs among many, as resolved from the command line and the environment.
#[derive(Clone, Debug, PartialEq)]
pub struct Rank {
    pub rank: u32,
    pub ranks: Option<u32>,
    pub host: String,
    pub launcher: Launcher,
}

pub use crate::results::hosts::MAX_RANKS;

/// The environment variables that give a rank (and, where the launcher sets one, the world
/// size), most specific launcher first: an `mpirun` inside a Slurm allocation is an MPI rank.
const LAUNCHERS: &[(Launcher, &str, Option<&str>)] = &[
    (
        Launcher::OpenMpi,
        "OMPI_COMM_WORLD_RANK",
        Some("OMPI_COMM_WORLD_SIZE"),
    ),
    (Launcher::Slurm, "SLURM_PROCID", Some("SLURM_NTASKS")),
    (Launcher::Pmix, "PMIX_RANK", Some("PMIX_SIZE")),
    (Launcher::Pmi, "PMI_RANK", Some("PMI_SIZE")),
    (Launcher::Kubernetes, "JOB_COMPLETION_INDEX", None),
];

impl Rank {
    /// Resolve the rank: `--rank`/`--ranks` when given, else the first launcher whose variables
    /// are set in `env`, else rank 0 of 1. Clear errors for values that are not numbers, a rank
    /// beyond the world size, or `--ranks` disagreeing with the launcher.
    pub fn resolve(
        rank: Option<u32>,
        ranks: Option<u32>,
        env: &dyn Fn(&str) -> Option<String>,
        host: String,
    ) -> Result<Rank> {
        let num =
            |var: &str| -> Result<Option<u32>> {
                match env(var) {
                    None => Ok(None),
                    Some(v) => v.trim().parse::<u32>().map(Some).with_context(|| {
                        format!("the launcher's {var}={v:?} is not a rank number")
                    }),
                }
            };
        let mut found = None;
        for &(launcher, rv, sv) in LAUNCHERS {
            if let Some(r) = num(rv)? {
                let size = match sv {
                    Some(sv) => num(sv)?,
                    None => None,
                };
                found = Some((launcher, r, size));
                break;
            }
        }
        let out = match (rank, found) {
            (Some(r), _) => Rank {
                rank: r,
                ranks,
                host,
                launcher: Launcher::Manual,
            },
            (None, Some((launcher, r, size))) => {
                if let (Some(a), Some(b)) = (ranks, size) {
                    if a != b {
                        bail!(
                            "--ranks {a} disagrees with the launcher ({} says {b} ranks)",
                            launcher.name()
                        );
                    }
                }
                Rank {
                    rank: r,
                    ranks: size.or(ranks),
                    host,
                    launcher,
                }
            }
            (None, None) => {
                if ranks.is_some_and(|n| n != 1) {
                    bail!(
                        "--ranks needs --rank (no launcher's rank variable is set: SLURM_PROCID, \
                         OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, JOB_COMPLETION_INDEX)"
                    );
                }
                Rank {
                    rank: 0,
                    ranks: Some(1),
                    host,
                    launcher: Launcher::None,
                }
            }
        };
        if let Some(n) = out.ranks.filter(|&n| n > MAX_RANKS) {
            bail!(
                "a world of {n} ranks (--ranks, or the launcher's size) is more than iolens \
                 takes: at most {MAX_RANKS} ranks"
            );
        }
        if out.rank >= MAX_RANKS {
            bail!(
                "rank {} is beyond the largest world iolens takes ({MAX_RANKS} ranks: 0 … {})",
                out.rank,
                MAX_RANKS - 1
            );
        }
        if out.ranks == Some(0) {
            bail!("the world size is 0: --ranks (or the launcher's size) must be at least 1");
        }
        if let Some(n) = out.ranks {
            if out.rank >= n {
                bail!(
                    "rank {} is outside a world of {n} rank(s) (ranks are 0 … {})",
                    out.rank,
                    n - 1
                );
            }
        }
        Ok(out)
    }

    /// Resolve from the process's own environment and host name.
    pub(crate) fn from_env(rank: Option<u32>, ranks: Option<u32>) -> Result<Rank> {
        Rank::resolve(rank, ranks, &|k| std::env::var(k).ok(), hostname())
    }

    /// Expand `{rank}`, `{host}` and `{ranks}` in a path given on the command line. Any other
    /// `{name}` is refused (a misspelt template must not become a literal file name); `{ranks}`
    /// needs a known world size. The host name is made safe for one path component first (see
    /// [`path_safe`]): a host name cannot send a file elsewhere.
    pub fn expand(&self, what: &str, p: &Path) -> Result<PathBuf> {
        let Some(s) = p.to_str() else {
            return Ok(p.to_path_buf());
        };
        if !s.contains('{') {
            return Ok(p.to_path_buf());
        }
        let mut out = String::with_capacity(s.len() + 16);
        let mut rest = s;
        while let Some(i) = rest.find('{') {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            let Some(j) = tail.find('}') else {
                bail!("{what} {s:?}: `{{` without a closing `}}` (templates are {{rank}}, {{host}}, {{ranks}})");
            };
            match &tail[1..j] {
                "rank" => out.push_str(&self.rank.to_string()),
                "host" => out.push_str(&path_safe(&self.host)),
                "ranks" => match self.ranks {
                    Some(n) => out.push_str(&n.to_string()),
                    None => bail!(
                        "{what} {s:?} uses {{ranks}} but the world size is unknown (give --ranks)"
                    ),
                },
                other => bail!(
                    "{what} {s:?}: unknown template {{{other}}} (templates are {{rank}}, {{host}}, {{ranks}})"
                ),
            }
            rest = &tail[j + 1..];
        }
        out.push_str(rest);
        Ok(PathBuf::from(out))
    }

    /// The placement record of a results document (start and clock filled in by [`stamp`]).
    pub fn placement(&self) -> Placement {
        Placement {
            rank: self.rank,
            ranks: self.ranks,
            host: self.host.clone(),
            launcher: self.launcher,
            start_at: None,
            measured_start: None,
            start_lateness_s: None,
            clock: Some(clock_sync()),
        }
    }
}

/// Record the requested start (if any) and the measured start in `p`.
pub fn stamp(p: &mut Placement, start_at: Option<SystemTime>, measured: Option<SystemTime>) {
    p.start_at = start_at.map(fmt_time);
    p.measured_start = measured.map(fmt_time);
    p.start_lateness_s = match (start_at, measured) {
        (Some(a), Some(m)) => Some(match m.duration_since(a) {
            Ok(d) => d.as_secs_f64(),
            Err(e) => -e.duration().as_secs_f64(),
        }),
        _ => None,
    };
}

/// RFC 3339 with microseconds.
pub fn fmt_time(t: SystemTime) -> String {
    humantime::format_rfc3339_micros(t).to_string()
}

/// Parse an RFC 3339 time (any offset, fractional seconds allowed) into a `SystemTime`.
pub fn parse_time(s: &str) -> Result<SystemTime> {
    let t = chrono::DateTime::parse_from_rfc3339(s.trim())
        .with_context(|| format!("{s:?} is not an RFC 3339 time (e.g. 2026-03-01T12:00:00Z)"))?;
    let ns = t.timestamp_nanos_opt().context("time out of range")?;
    if ns < 0 {
        bail!("{s:?} is before 1970");
    }
    Ok(SystemTime::UNIX_EPOCH + Duration::from_nanos(ns as u64))
}

/// Parse `--start-at`: an RFC 3339 time, or `+DURATION` from now (e.g. `+30s`). A time in the
/// past is refused. (`+DURATION` is resolved by each rank when it starts; ranks launched
/// together agree to within the launcher's start-up skew. For an exact common start, resolve it
/// once — `date -u -d '+30 sec' +%FT%T.%NZ` in the batch script — and pass the time.)
pub fn parse_start_at(s: &str, now: SystemTime) -> Result<SystemTime> {
    let s = s.trim();
    let t = if let Some(rel) = s.strip_prefix('+') {
        let d = crate::units::parse_duration(rel)
            .map_err(|e| anyhow::anyhow!("--start-at {s}: {e}"))?;
        now + Duration::from_secs_f64(d)
    } else {
        parse_time(s).context("--start-at")?
    };
    if let Ok(ahead) = t.duration_since(now) {
        if ahead.as_secs_f64() > crate::units::MAX_DURATION_S {
            bail!(
                "--start-at {s} is more than 366 days ahead ({}): give a nearer time",
                fmt_time(t)
            );
        }
    }
    if t <= now {
        let ago = now.duration_since(t).unwrap_or_default();
        bail!(
            "--start-at {s} is in the past ({} ago by this host's clock, {}): give a later time",
            crate::units::fmt_ns(ago.as_nanos() as f64),
            fmt_time(now)
        );
    }
    Ok(t)
}

/// Sleep until `at` (in slices, so Ctrl-C is honoured); an error when `at` has already passed
/// (the preparation took longer than the time left) or on Ctrl-C.
pub(crate) fn sleep_until(at: SystemTime, interrupt: &std::sync::atomic::AtomicBool) -> Result<()> {
    let now = SystemTime::now();
    if let Err(e) = at.duration_since(now) {
        bail!(
            "the start time {} passed {} before this rank was ready to start (preparing the \
             target and sessions took longer): give a later --start-at",
            fmt_time(at),
            crate::units::fmt_ns(e.duration().as_nanos() as f64)
        );
    }
    loop {
        if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            // Exits as any interrupted work does (130 for Ctrl-C, 143 for SIGTERM).
            return Err(crate::exit::Interrupted(format!(
                "interrupted while waiting for the start time {}",
                fmt_time(at)
            ))
            .into());
        }
        match at.duration_since(SystemTime::now()) {
            Ok(left) if !left.is_zero() => {
                std::thread::sleep(left.min(Duration::from_millis(50)));
            }
            _ => return Ok(()),
        }
    }
}

/// This host's name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The clock's synchronisation state from `adjtimex(2)` (read only: `modes` is 0).
pub(crate) fn clock_sync() -> ClockSync {
    // SAFETY: an all-zero timex is a valid argument; modes 0 only reads.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is a valid, exclusively borrowed timex.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return ClockSync {
            synchronised: false,
            est_error_us: 0,
            max_error_us: 0,
            state: format!(
                "unknown (adjtimex failed: {})",
                std::io::Error::last_os_error()
            ),
        };
    }
    let unsync = tx.status & libc::STA_UNSYNC != 0 || state == libc::TIME_ERROR;
    let words = match state {
        _ if unsync => "unsynchronised",
        libc::TIME_OK => "ok",
        libc::TIME_INS => "ok (leap second to be inserted)",
        libc::TIME_DEL => "ok (leap second to be deleted)",
        libc::TIME_OOP => "ok (leap second in progress)",
        libc::TIME_WAIT => "ok (leap second has occurred)",
        _ => "ok",
    };
    ClockSync {
        synchronised: !unsync,
        est_error_us: tx.esterror as i64,
        max_error_us: tx.maxerror as i64,
        state: words.into(),
    }
}

/// `name` as one safe path component: every character but ASCII letters, digits, `-`, `_` and
/// `.` becomes `_` (so `/`, NUL, spaces and control characters cannot appear), and a name of
/// dots alone (`.`, `..`) or an empty one becomes underscores (`_`), so it cannot name a
/// directory above.
pub(crate) fn path_safe(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.chars().all(|c| c == '.') {
        "_".repeat(s.len().max(1))
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(a, _)| *a == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn launcher_precedence_and_errors() {
        let r = Rank::resolve(
            None,
            None,
            &env(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4")]),
            "h".into(),
        )
        .unwrap();
        assert_eq!((r.rank, r.ranks, r.launcher), (3, Some(4), Launcher::Slurm));
        // mpirun inside a Slurm allocation: the MPI rank wins.
        let r = Rank::resolve(
            None,
            None,
            &env(&[
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "1"),
                ("OMPI_COMM_WORLD_RANK", "1"),
                ("OMPI_COMM_WORLD_SIZE", "2"),
            ]),
            "h".into(),
        )
        .unwrap();
        assert_eq!(
            (r.rank, r.ranks, r.launcher),
            (1, Some(2), Launcher::OpenMpi)
        );
        let r = Rank::resolve(
            None,
            Some(8),
            &env(&[("JOB_COMPLETION_INDEX", "5")]),
            "h".into(),
        )
        .unwrap();
        assert_eq!(
            (r.rank, r.ranks, r.launcher),
            (5, Some(8), Launcher::Kubernetes)
        );
        let r = Rank::resolve(None, None, &env(&[]), "h".into()).unwrap();
        assert_eq!((r.rank, r.ranks, r.launcher), (0, Some(1), Launcher::None));
        let e = Rank::resolve(None, None, &env(&[("PMI_RANK", "x")]), "h".into()).unwrap_err();
        assert!(e.to_string().contains("PMI_RANK"), "{e}");
        let e = Rank::resolve(Some(4), Some(4), &env(&[]), "h".into()).unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        let e = Rank::resolve(
            None,
            Some(3),
            &env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")]),
            "h".into(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("disagrees"), "{e}");
    }

    #[test]
    fn templates() {
        let r = Rank {
            rank: 2,
            ranks: Some(4),
            host: "db7".into(),
            launcher: Launcher::Manual,
        };
        assert_eq!(
            r.expand("--json", Path::new("out/{host}-{rank}-of-{ranks}.json"))
                .unwrap(),
            PathBuf::from("out/db7-2-of-4.json")
        );
        assert_eq!(
            r.expand("--target", Path::new("/dev/plain")).unwrap(),
            PathBuf::from("/dev/plain")
        );
        let e = r
            .expand("--json", Path::new("{hostname}.json"))
            .unwrap_err();
        assert!(e.to_string().contains("unknown template"), "{e}");
        let e = r.expand("--json", Path::new("a{rank")).unwrap_err();
        assert!(e.to_string().contains("closing"), "{e}");
        let k = Rank { ranks: None, ..r };
        assert!(k.expand("--json", Path::new("{ranks}")).is_err());
    }

    #[test]
    fn a_host_name_cannot_send_a_file_elsewhere() {
        for (host, want) in [
            ("../../etc/cron.d/x", "out/.._.._etc_cron.d_x-2.json"),
            ("..", "out/__-2.json"),
            ("", "out/_-2.json"),
            ("a/b\nc\0d e", "out/a_b_c_d_e-2.json"),
            ("db7.example.com", "out/db7.example.com-2.json"),
        ] {
            let r = Rank {
                rank: 2,
                ranks: Some(4),
                host: host.into(),
                launcher: Launcher::Manual,
            };
            let p = r
                .expand("--json", Path::new("out/{host}-{rank}.json"))
                .unwrap();
            assert_eq!(p, PathBuf::from(want), "{host:?}");
            assert_eq!(p.components().count(), 2, "{host:?} left its directory");
        }
        let r = Rank {
            rank: 0,
            ranks: None,
            host: "..".into(),
            launcher: Launcher::Manual,
        };
        assert_eq!(
            r.expand("--json", Path::new("{host}")).unwrap(),
            PathBuf::from("__")
        );
    }

    #[test]
    fn start_at_parsing() {
        let now = SystemTime::now();
        let t = parse_start_at("+30s", now).unwrap();
        assert_eq!(t.duration_since(now).unwrap(), Duration::from_secs(30));
        let e = parse_start_at("2001-01-01T00:00:00Z", now).unwrap_err();
        assert!(e.to_string().contains("in the past"), "{e}");
        let e = parse_start_at("tomorrow", now).unwrap_err();
        assert!(format!("{e:#}").contains("RFC 3339"), "{e:#}");
        let t = parse_time("2030-01-01T01:00:00.25+01:00").unwrap();
        assert_eq!(
            t.duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
            1_893_456_000_250
        );
    }

    #[test]
    fn clock_state_is_read() {
        let c = clock_sync();
        assert!(!c.state.is_empty());
        assert!(c.max_error_us >= 0, "{c:?}");
    }
}
