//! PostgreSQL's wait events joined to the watch: which server processes publish one, where
//! (filled into the kernel's `pg_wait_ptr` map, `bpf/watch.bpf.c`), and per process its wall
//! time, split into the same parts as every watched thread's, and the part of it under each
//! wait event (the kernel tags every slice with the event set during it), turned at the end
//! into the per-role tables of [`PgWaits`](crate::results::PgWaits): an event's time is all the
//! time it was set, as PostgreSQL counts it; the rest, under no event, is CPU, waiting for a
//! CPU, or off CPU unnamed.

use std::collections::BTreeMap;

// Looked up per event (every off-CPU span, every syscall): the Fx hash, not SipHash.
use rustc_hash::FxHashMap as HashMap;

use crate::results::{PgRoleWaits, PgWaitKind, PgWaitRow, PgWaits, WallSplit};

use super::pg;

/// A wait event the kernel side could not read (its page not resident).
pub(crate) const WAIT_UNREADABLE: u32 = 0xffff_ffff;

/// Counts of one process's off-CPU spans and traced syscalls under one wait event.
#[derive(Clone, Copy, Default)]
struct Sum {
    spans: u64,
    syscalls: u64,
    syscall_ns: u64,
}

/// What a server process is: its role, its session (`user@database` of a client backend), its
/// server's major version and postmaster.
#[derive(Clone)]
struct Proc {
    role: &'static str,
    session: Option<String>,
    major: Option<u32>,
    postmaster: u32,
}

/// What is known of the watched server processes, and their sums.
#[derive(Default)]
pub(crate) struct PgWaitAcc {
    /// From the latest look at /proc.
    procs: HashMap<u32, Proc>,
    /// Processes in `procs` whose role, session, version and postmaster are final (see
    /// [`PgWaitAcc::refresh`]): not read from /proc again while their pid stays there.
    settled: std::collections::HashSet<u32>,
    /// Processes whose pointer address is in the kernel map (or could not be found).
    placed: HashMap<u32, bool>,
    /// (tgid, wait_event_info) → sums; info 0: off CPU under no wait event.
    sums: HashMap<(u32, u32), Sum>,
    /// tgid → on-CPU slices.
    cpu: HashMap<u32, u64>,
    /// tgid → its threads' wall time, by part.
    wall: HashMap<u32, WallSplit>,
    /// (tgid, wait_event_info) → the part of that wall time under the event.
    tagged: HashMap<(u32, u32), WallSplit>,
    /// Labels already made, for the histogram ops (bounded: a few hundred events per version).
    labels: HashMap<(Option<u32>, u32), &'static str>,
    /// postmaster → its (and its children's) wait-event and status pointer addresses.
    addr_of: HashMap<u32, pg::PgPtrs>,
    /// Servers whose pointer could not be found.
    no_addr: std::collections::HashSet<u32>,
    unreadable: Vec<String>,
    /// Servers whose backends' transaction state cannot be read, and why.
    state_unread: Vec<String>,
    /// Exited server processes folded into one stand-in process per (server, role, session)
    /// ([`PgWaitAcc::fold_gone`]): its number (past any pid), by that key.
    stand_ins: HashMap<(u32, &'static str, Option<String>), u32>,
    /// The processes each stand-in holds.
    folded: HashMap<u32, u32>,
}

/// The first stand-in number: past the kernel's largest pid (2^22).
const STAND_IN: u32 = 0x8000_0000;

/// The row of `kind` and `label` in a role's table, created empty.
fn row<'a>(
    rows: &'a mut BTreeMap<(u8, &'static str), PgWaitRow>,
    kind: PgWaitKind,
    label: &'static str,
) -> &'a mut PgWaitRow {
    rows.entry((kind as u8, label))
        .or_insert_with(|| PgWaitRow {
            event: label.to_string(),
            kind,
            ..Default::default()
        })
}

/// The session of a process of `role`: `user@database` of a client backend, a WAL sender's user.
fn session_of(role: &pg::Role) -> Option<String> {
    match role {
        pg::Role::ClientBackend { user, database, .. } => Some(format!("{user}@{database}")),
        pg::Role::WalSender { user, .. } => Some(user.clone()),
        _ => None,
    }
}

/// Whether a wait event is idleness, not database time: a backend waiting for its client
/// outside a transaction (`Client:ClientRead`; inside one it is
/// [`pg::CLIENT_READ_IN_TRANSACTION`], database time), a process waiting for work
/// (`Activity:*`).
pub(crate) fn idle(label: &str) -> bool {
    label == "Client:ClientRead" || label.starts_with("Activity:")
}

impl PgWaitAcc {
    /// The role of process `tgid` (its process title's), as its wait-event tables name it.
    pub(crate) fn role_of(&self, tgid: u32) -> String {
        self.procs
            .get(&tgid)
            .map_or("(exited before identified)", |p| p.role)
            .to_string()
    }

    /// A server process's title as it exited (written by the kernel side), `parent` its
    /// postmaster: its role, for a process gone before a look at /proc saw it (a short session).
    pub(crate) fn exited(&mut self, tgid: u32, parent: u32, title: &str) {
        if self.procs.contains_key(&tgid) {
            return;
        }
        let role = pg::role_from_cmdline(title);
        if matches!(role, pg::Role::NotPostgres(_)) {
            return;
        }
        let major = self.procs.get(&parent).and_then(|p| p.major).or_else(|| {
            self.procs
                .values()
                .find(|p| p.postmaster == parent)
                .and_then(|p| p.major)
        });
        self.procs.insert(
            tgid,
            Proc {
                role: role.kind(),
                session: session_of(&role),
                major,
                postmaster: parent,
            },
        );
    }

    /// The postmasters of the server processes seen.
    pub(crate) fn postmasters(&self) -> std::collections::BTreeSet<u32> {
        self.procs.values().map(|p| p.postmaster).collect()
    }

    /// Whether process `tgid` is a known PostgreSQL server process.
    pub(crate) fn is_pg(&self, tgid: u32) -> bool {
        self.procs.contains_key(&tgid) || self.placed.contains_key(&tgid)
    }

    /// Look at the server processes now running: note roles and versions, and return those
    /// (pid, addresses) whose wait-event pointer address is newly known, for the kernel map. A
    /// forked process shares its postmaster's addresses; `watched` says which pids to consider.
    pub(crate) fn refresh(&mut self, watched: impl Fn(u32) -> bool) -> Vec<(u32, pg::PgPtrs)> {
        let pids = pg::process_ids();
        // A pid gone from /proc is no longer settled (a later process may take it).
        self.settled.retain(|p| pids.binary_search(p).is_ok());
        self.look_at(pids, watched)
    }

    /// [`Self::refresh`] for some processes only, without a scan of `/proc` (most of a look's
    /// cost on a host of many processes): `announced`, processes the probes saw for the first
    /// time since the last look (each read again, its pid perhaps an earlier process's), and
    /// the server processes not yet settled.
    pub(crate) fn refresh_some(
        &mut self,
        announced: &[u32],
        watched: impl Fn(u32) -> bool,
    ) -> Vec<(u32, pg::PgPtrs)> {
        let mut pids: Vec<u32> = announced.to_vec();
        for &p in announced {
            self.settled.remove(&p);
        }
        pids.extend(
            self.procs
                .keys()
                .chain(self.placed.keys())
                .filter(|p| !self.settled.contains(p)),
        );
        pids.sort_unstable();
        pids.dedup();
        self.look_at(pids, watched)
    }

    fn look_at(&mut self, pids: Vec<u32>, watched: impl Fn(u32) -> bool) -> Vec<(u32, pg::PgPtrs)> {
        let mut new = Vec::new();
        for pid in pids {
            // Read already, and nothing a new look could change.
            if self.settled.contains(&pid)
                && self.procs.contains_key(&pid)
                && self.placed.contains_key(&pid)
            {
                continue;
            }
            let Some(p) = pg::postgres_process(pid) else {
                continue;
            };
            if !watched(p.pid) {
                continue;
            }
            // Its title set (a role other than the postmaster's command line, or a postmaster
            // whose parent is no server: not a child forked a moment ago) and its version read:
            // what it is stays so for its life, and /proc is not read for it again.
            let settles = match p.role {
                pg::Role::NotPostgres(_) => false,
                pg::Role::Postmaster => !pg::parent_is_server(p.pid),
                _ => true,
            } && p.major.is_some();
            if settles {
                self.settled.insert(p.pid);
            }
            self.procs.insert(
                p.pid,
                Proc {
                    role: p.role.kind(),
                    session: session_of(&p.role),
                    major: p.major,
                    postmaster: p.postmaster,
                },
            );
            if self.placed.contains_key(&p.pid) {
                continue;
            }
            // Found once per server (its binary is read, megabytes): its children share it,
            // and a server without one (PostgreSQL 13) is said once.
            if self.no_addr.contains(&p.postmaster) {
                self.placed.insert(p.pid, false);
                continue;
            }
            let addr = match self.addr_of.get(&p.postmaster) {
                Some(&a) => Ok(a),
                None => pg::process_pointers_why(p.postmaster, p.major).map(|(a, why)| {
                    self.state_unread.extend(why);
                    a
                }),
            };
            match addr {
                Ok(a) => {
                    self.addr_of.insert(p.postmaster, a);
                    new.push((p.pid, a));
                    self.placed.insert(p.pid, true);
                }
                Err(e) => {
                    self.unreadable.push(format!("{e:#}"));
                    self.no_addr.insert(p.postmaster);
                    self.placed.insert(p.pid, false);
                }
            }
        }
        new
    }

    /// The `Class:Event` name of wait event `info` of process `tgid` (its server's version).
    pub(crate) fn label(&mut self, tgid: u32, info: u32) -> &'static str {
        let major = self.procs.get(&tgid).and_then(|p| p.major);
        if let Some(&l) = self.labels.get(&(major, info)) {
            return l;
        }
        let s = match (info, major) {
            (WAIT_UNREADABLE, _) => "(unreadable)".to_string(),
            (_, Some(m)) => pg::wait_event_label(m, info),
            (_, None) => format!("?:{info:#010X}"),
        };
        // Interned for the histogram ops' `&'static str` names: one per distinct event.
        let l: &'static str = Box::leak(s.into_boxed_str());
        self.labels.insert((major, info), l);
        l
    }

    /// An off-CPU span of process `tgid` under wait event `info`: the op name of its
    /// histogram (`None` for no wait event).
    pub(crate) fn off_cpu(&mut self, tgid: u32, info: u32) -> Option<&'static str> {
        self.sums.entry((tgid, info)).or_default().spans += 1;
        (info != 0).then(|| self.label(tgid, info))
    }

    /// An on-CPU slice of process `tgid`.
    pub(crate) fn on_cpu(&mut self, tgid: u32) {
        *self.cpu.entry(tgid).or_default() += 1;
    }

    /// Wall time of process `tgid`'s threads (every watched process's: which are server
    /// processes is known at the end).
    pub(crate) fn wall(&mut self, tgid: u32, w: &WallSplit) {
        self.wall.entry(tgid).or_default().add(w);
    }

    /// Wall time of process `tgid`'s threads under wait event `info` (part of [`Self::wall`]).
    pub(crate) fn tagged(&mut self, tgid: u32, info: u32, w: &WallSplit) {
        if info != 0 {
            self.tagged.entry((tgid, info)).or_default().add(w);
        }
    }

    pub(crate) fn syscall(&mut self, tgid: u32, info: u32, ns: u64) {
        let s = self.sums.entry((tgid, info)).or_default();
        s.syscalls += 1;
        s.syscall_ns += ns;
    }

    /// Whether process `tgid` counts as a server process at the end (see [`Self::finish`]).
    fn is_server(&self, tgid: u32) -> bool {
        self.procs.contains_key(&tgid)
            || self.placed.contains_key(&tgid)
            || self.tagged.keys().any(|k| k.0 == tgid)
            || self.sums.keys().any(|k| k.0 == tgid && k.1 != 0)
    }

    /// Keep the per-process sums bounded however many processes come and go: the exited
    /// processes `gone` leave them. A server process's sums are added to the stand-in of its
    /// (server, role, session), which the tables count as the processes it holds, with their
    /// exact sums; returns (exited pid, stand-in) for the other tables keyed by pid to do the
    /// same. Another process's are dropped: the end never reads them (only server processes'
    /// time is tabled).
    pub(crate) fn fold_gone(&mut self, gone: &std::collections::HashSet<u32>) -> Vec<(u32, u32)> {
        let mut moved = Vec::new();
        let mut servers = std::collections::HashSet::new();
        for &pid in gone {
            if pid >= STAND_IN {
                continue;
            }
            if self.is_server(pid) {
                servers.insert(pid);
            }
        }
        let mut to: HashMap<u32, u32> = HashMap::default();
        for &pid in &servers {
            let p = self.procs.get(&pid).cloned().unwrap_or(Proc {
                role: "(exited before identified)",
                session: None,
                major: None,
                postmaster: 0,
            });
            let key = (p.postmaster, p.role, p.session.clone());
            let next = STAND_IN + self.stand_ins.len() as u32;
            let s = *self.stand_ins.entry(key).or_insert(next);
            self.procs.insert(s, p);
            *self.folded.entry(s).or_default() += 1 + self.folded.remove(&pid).unwrap_or(0);
            to.insert(pid, s);
            moved.push((pid, s));
        }
        // Every map keyed by pid: a server process's entries to its stand-in, another's out.
        let rekey = |k: u32| -> Option<Option<u32>> {
            match to.get(&k) {
                Some(&s) => Some(Some(s)),
                None if gone.contains(&k) && k < STAND_IN => Some(None),
                None => None,
            }
        };
        fn move_keyed<K: Eq + std::hash::Hash + Copy, V>(
            m: &mut HashMap<K, V>,
            pid_of: impl Fn(&K) -> u32,
            with: impl Fn(&K, u32) -> K,
            rekey: &dyn Fn(u32) -> Option<Option<u32>>,
            mut add: impl FnMut(&mut V, V),
        ) where
            V: Default,
        {
            let keys: Vec<K> = m
                .keys()
                .filter(|k| rekey(pid_of(k)).is_some())
                .copied()
                .collect();
            for k in keys {
                let Some(v) = m.remove(&k) else { continue };
                if let Some(Some(s)) = rekey(pid_of(&k)) {
                    add(m.entry(with(&k, s)).or_default(), v);
                }
            }
        }
        move_keyed(
            &mut self.sums,
            |k| k.0,
            |k, s| (s, k.1),
            &rekey,
            |a, b| {
                a.spans += b.spans;
                a.syscalls += b.syscalls;
                a.syscall_ns += b.syscall_ns;
            },
        );
        move_keyed(
            &mut self.tagged,
            |k| k.0,
            |k, s| (s, k.1),
            &rekey,
            |a, b| a.add(&b),
        );
        move_keyed(&mut self.wall, |k| *k, |_, s| s, &rekey, |a, b| a.add(&b));
        move_keyed(&mut self.cpu, |k| *k, |_, s| s, &rekey, |a, b| *a += b);
        for &pid in gone {
            if pid < STAND_IN {
                self.procs.remove(&pid);
                self.placed.remove(&pid);
            }
        }
        moved
    }

    /// The tables, per role; `None` when no server process was watched.
    pub(crate) fn finish(mut self) -> Option<PgWaits> {
        if self.placed.is_empty() && self.sums.is_empty() && self.tagged.is_empty() {
            return None;
        }
        // Server processes: those identified, and those that published a wait event (forked
        // and gone between two looks at /proc).
        let mut pids: std::collections::BTreeSet<u32> = self.procs.keys().copied().collect();
        pids.extend(self.placed.keys().copied());
        pids.extend(self.tagged.keys().map(|k| k.0));
        pids.extend(self.sums.keys().filter(|k| k.1 != 0).map(|k| k.0));
        let unknown = Proc {
            role: "(exited before identified)",
            session: None,
            major: None,
            postmaster: 0,
        };
        #[derive(Default)]
        struct Role {
            processes: u32,
            rows: BTreeMap<(u8, &'static str), PgWaitRow>,
        }
        // By server (postmaster pid; 0: not identified), role and session.
        let mut roles: BTreeMap<(u32, &'static str, Option<String>), Role> = BTreeMap::new();
        let mut major_of: HashMap<u32, u32> = HashMap::default();
        let mut tagged: Vec<((u32, u32), WallSplit)> = self.tagged.drain().collect();
        tagged.sort_by_key(|t| t.0);
        let mut sums: Vec<((u32, u32), Sum)> = self.sums.drain().collect();
        sums.sort_by_key(|s| s.0);
        for tgid in pids {
            let p = self
                .procs
                .get(&tgid)
                .cloned()
                .unwrap_or_else(|| unknown.clone());
            if let Some(m) = p.major {
                major_of.insert(p.postmaster, m);
            }
            let role = roles
                .entry((p.postmaster, p.role, p.session.clone()))
                .or_default();
            role.processes += self.folded.get(&tgid).copied().unwrap_or(1);
            // What is left of the process's wall time once its events' time is taken out.
            let mut rest = self.wall.get(&tgid).copied().unwrap_or_default();
            let ev_kind = |label: &str| {
                if idle(label) {
                    PgWaitKind::Idle
                } else {
                    PgWaitKind::Wait
                }
            };
            for ((_, info), w) in tagged.iter().filter(|t| t.0 .0 == tgid) {
                let label = self.label(tgid, *info);
                row(&mut role.rows, ev_kind(label), label).split.add(w);
                // Both are sums of whole nanoseconds: a difference under one is the floating
                // point's, not time (the wall is summed piecewise over intervals, the event's
                // time whole).
                for (a, b) in rest.parts_mut().into_iter().zip(w.parts()) {
                    let d = *a - b;
                    *a = if d < 1e-9 { 0.0 } else { d };
                }
            }
            for ((_, info), s) in sums.iter().filter(|t| t.0 .0 == tgid) {
                let (kind, label) = if *info == 0 {
                    let kind = if p.role == "postmaster" {
                        PgWaitKind::Idle
                    } else {
                        PgWaitKind::Unnamed
                    };
                    (kind, "")
                } else {
                    let label = self.label(tgid, *info);
                    (ev_kind(label), label)
                };
                let r = row(&mut role.rows, kind, label);
                r.count += s.spans;
                r.syscalls += s.syscalls;
                r.syscall_s += s.syscall_ns as f64 / 1e9;
            }
            // Under no event: on CPU, waiting for one, off CPU (the postmaster waiting for
            // connections names no wait: not DB work).
            let w = &rest;
            let unnamed = if p.role == "postmaster" {
                PgWaitKind::Idle
            } else {
                PgWaitKind::Unnamed
            };
            for (kind, split) in [
                (
                    PgWaitKind::Cpu,
                    WallSplit {
                        cpu_s: w.cpu_s,
                        io_cpu_s: w.io_cpu_s,
                        ..Default::default()
                    },
                ),
                (
                    PgWaitKind::CpuWait,
                    WallSplit {
                        runnable_s: w.runnable_s,
                        io_runnable_s: w.io_runnable_s,
                        ..Default::default()
                    },
                ),
                (
                    unnamed,
                    WallSplit {
                        off_cpu_s: w.off_cpu_s,
                        io_device_s: w.io_device_s,
                        io_queue_s: w.io_queue_s,
                        io_above_s: w.io_above_s,
                        ..Default::default()
                    },
                ),
            ] {
                if split.wall_s() > 0.0 {
                    row(&mut role.rows, kind, "").split.add(&split);
                }
            }
            if let Some(&n) = self.cpu.get(&tgid) {
                row(&mut role.rows, PgWaitKind::Cpu, "").count += n;
            }
        }
        let mut out: Vec<PgRoleWaits> = roles
            .into_iter()
            .map(|((server, name, session), r)| {
                let mut rows: Vec<PgWaitRow> = r
                    .rows
                    .into_values()
                    .map(|mut x| {
                        x.time_s = x.split.wall_s();
                        x
                    })
                    .filter(|x| x.time_s > 0.0 || x.count > 0 || x.syscalls > 0)
                    .collect();
                let db_s: f64 = rows
                    .iter()
                    .filter(|x| x.kind != PgWaitKind::Idle)
                    .fold(0.0, |a, x| a + x.time_s);
                let idle_s = rows
                    .iter()
                    .filter(|x| x.kind == PgWaitKind::Idle)
                    .fold(0.0, |a, x| a + x.time_s);
                for x in &mut rows {
                    x.share_of_db =
                        (x.kind != PgWaitKind::Idle && db_s > 0.0).then(|| x.time_s / db_s);
                }
                rows.sort_by(|a, b| {
                    (a.kind == PgWaitKind::Idle)
                        .cmp(&(b.kind == PgWaitKind::Idle))
                        .then(b.time_s.total_cmp(&a.time_s))
                });
                PgRoleWaits {
                    server: (server != 0).then_some(server),
                    major: major_of.get(&server).copied(),
                    role: name.to_string(),
                    session,
                    processes: r.processes,
                    db_s,
                    idle_s,
                    rows,
                }
            })
            .collect();
        // Client backends first: their time is the database's answer to its clients.
        out.sort_by(|a, b| {
            (b.role == "client backend")
                .cmp(&(a.role == "client backend"))
                .then(b.db_s.total_cmp(&a.db_s))
        });
        let mut majors: Vec<u32> = self.procs.values().filter_map(|p| p.major).collect();
        majors.sort_unstable();
        majors.dedup();
        self.unreadable.sort();
        self.unreadable.dedup();
        Some(PgWaits {
            majors,
            roles: out,
            unreadable: self.unreadable,
            state_unread: self.state_unread,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(cpu: f64, runnable: f64, off: f64, io_cpu: f64, io_device: f64) -> WallSplit {
        WallSplit {
            cpu_s: cpu,
            runnable_s: runnable,
            off_cpu_s: off,
            io_cpu_s: io_cpu,
            io_device_s: io_device,
            ..Default::default()
        }
    }

    #[test]
    fn idle_waits_are_kept_apart_and_shares_are_of_db_time() {
        let mut a = PgWaitAcc::default();
        a.procs.insert(
            10,
            Proc {
                role: "client backend",
                session: Some("app@shop".into()),
                major: Some(15),
                postmaster: 9,
            },
        );
        a.placed.insert(10, true);
        // PostgreSQL 15: Client:ClientRead is 0x06000000, Timeout:PgSleep 0x09000002,
        // IO:WALSync 0x0A000046.
        let sleep = 0x0900_0002;
        let read = 0x0600_0000;
        let sync = 0x0A00_0046;
        assert_eq!(pg::wait_event_label(15, sleep), "Timeout:PgSleep");
        assert_eq!(pg::wait_event_label(15, read), "Client:ClientRead");
        assert_eq!(pg::wait_event_label(15, sync), "IO:WALSync");
        // 10 s of wall time: 3 s asleep in pg_sleep (0.1 s of it runnable after the wakeup),
        // 5 s idle, 1 s in fdatasync under IO:WALSync (0.2 s of it on CPU), and under no event
        // 0.5 s on CPU, 0.3 s runnable, 0.2 s off CPU.
        a.wall(10, &split(0.5, 0.4, 8.1, 0.2, 0.8));
        a.tagged(10, sleep, &split(0.0, 0.1, 2.9, 0.0, 0.0));
        a.tagged(10, read, &split(0.0, 0.0, 5.0, 0.0, 0.0));
        a.tagged(10, sync, &split(0.0, 0.0, 0.0, 0.2, 0.8));
        assert_eq!(a.off_cpu(10, sleep), Some("Timeout:PgSleep"));
        a.off_cpu(10, read);
        a.off_cpu(10, 0);
        a.on_cpu(10);
        a.syscall(10, sync, 1_000_000_000);
        let w = a.finish().unwrap();
        let r = &w.roles[0];
        assert_eq!(r.role, "client backend");
        assert_eq!(r.session.as_deref(), Some("app@shop"));
        assert_eq!((r.server, r.major), (Some(9), Some(15)));
        assert!((r.db_s - 5.0).abs() < 1e-9 && (r.idle_s - 5.0).abs() < 1e-9);
        assert_eq!(r.rows[0].event, "Timeout:PgSleep");
        assert!((r.rows[0].share_of_db.unwrap() - 0.6).abs() < 1e-9);
        let get = |kind: PgWaitKind, event: &str| {
            r.rows
                .iter()
                .find(|x| x.kind == kind && x.event == event)
                .unwrap()
        };
        // The event's on-CPU time inside its syscall is the event's, not CPU.
        let s = get(PgWaitKind::Wait, "IO:WALSync");
        assert!((s.time_s - 1.0).abs() < 1e-9 && (s.split.io_device_s - 0.8).abs() < 1e-9);
        assert_eq!((s.syscalls, s.syscall_s), (1, 1.0));
        assert!((get(PgWaitKind::Cpu, "").time_s - 0.5).abs() < 1e-9);
        assert!((get(PgWaitKind::CpuWait, "").time_s - 0.3).abs() < 1e-9);
        assert!((get(PgWaitKind::Unnamed, "").time_s - 0.2).abs() < 1e-9);
        let sum: f64 = r.rows.iter().filter_map(|x| x.share_of_db).sum();
        assert!((sum - 1.0).abs() < 1e-9, "{sum}");
        let last = r.rows.last().unwrap();
        assert_eq!((last.kind, last.share_of_db), (PgWaitKind::Idle, None));
    }
}
