//! PostgreSQL's wait events joined to the watch: which server processes publish one, where
//! (filled into the kernel's `pg_wait_ptr` map, `bpf/watch.bpf.c`), and the per-process sums of
//! the spans each event covered, turned at the end into the per-role tables of
//! [`PgWaits`](crate::results::PgWaits).

use std::collections::{BTreeMap, HashMap};

use crate::results::{PgRoleWaits, PgWaitKind, PgWaitRow, PgWaits};

use super::pg;

/// A wait event the kernel side could not read (its page not resident).
pub(crate) const WAIT_UNREADABLE: u32 = 0xffff_ffff;

/// Sums of one process's spans under one wait event.
#[derive(Clone, Copy, Default)]
struct Sum {
    off_ns: u64,
    spans: u64,
    syscalls: u64,
    syscall_ns: u64,
}

/// What is known of the watched server processes, and their sums.
#[derive(Default)]
pub(crate) struct PgWaitAcc {
    /// tgid → (role, major version, postmaster), from the latest look at /proc.
    procs: HashMap<u32, (&'static str, Option<u32>, u32)>,
    /// Processes whose pointer address is in the kernel map (or could not be found).
    placed: HashMap<u32, bool>,
    /// (tgid, wait_event_info) → sums; info 0: off CPU under no wait event.
    sums: HashMap<(u32, u32), Sum>,
    /// tgid → on-CPU ns, slices.
    cpu: HashMap<u32, (u64, u64)>,
    /// Labels already made, for the histogram ops (bounded: a few hundred events per version).
    labels: HashMap<(Option<u32>, u32), &'static str>,
    /// postmaster → its (and its children's) wait-event pointer address.
    addr_of: HashMap<u32, u64>,
    /// Servers whose pointer could not be found.
    no_addr: std::collections::HashSet<u32>,
    unreadable: Vec<String>,
}

/// Whether a wait event is idleness, not database time.
pub(crate) fn idle(label: &str) -> bool {
    label == "Client:ClientRead" || label.starts_with("Activity:")
}

impl PgWaitAcc {
    /// Whether process `tgid` is a known PostgreSQL server process.
    pub(crate) fn is_pg(&self, tgid: u32) -> bool {
        self.procs.contains_key(&tgid) || self.placed.contains_key(&tgid)
    }

    /// Look at the server processes now running: note roles and versions, and return those
    /// (pid, address) whose wait-event pointer address is newly known, for the kernel map. A
    /// forked process shares its postmaster's address; `watched` says which pids to consider.
    pub(crate) fn refresh(&mut self, watched: impl Fn(u32) -> bool) -> Vec<(u32, u64)> {
        let mut new = Vec::new();
        for p in pg::postgres_processes() {
            if !watched(p.pid) {
                continue;
            }
            self.procs
                .insert(p.pid, (p.role.kind(), p.major, p.postmaster));
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
                None => pg::wait_event_pointer_address(p.postmaster),
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
        let major = self.procs.get(&tgid).and_then(|p| p.1);
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

    /// An off-CPU span of `ns` of process `tgid` under wait event `info`: the op name of its
    /// histogram (`None` for no wait event).
    pub(crate) fn off_cpu(&mut self, tgid: u32, info: u32, ns: u64) -> Option<&'static str> {
        let s = self.sums.entry((tgid, info)).or_default();
        s.off_ns += ns;
        s.spans += 1;
        (info != 0).then(|| self.label(tgid, info))
    }

    pub(crate) fn on_cpu(&mut self, tgid: u32, ns: u64) {
        let c = self.cpu.entry(tgid).or_default();
        c.0 += ns;
        c.1 += 1;
    }

    pub(crate) fn syscall(&mut self, tgid: u32, info: u32, ns: u64) {
        let s = self.sums.entry((tgid, info)).or_default();
        s.syscalls += 1;
        s.syscall_ns += ns;
    }

    /// The tables, per role; `None` when no server process was watched.
    pub(crate) fn finish(mut self) -> Option<PgWaits> {
        if self.placed.is_empty() && self.sums.is_empty() {
            return None;
        }
        // Processes that exited before a look at /proc named them.
        let role_of = |procs: &HashMap<u32, (&'static str, Option<u32>, u32)>, tgid: u32| {
            procs
                .get(&tgid)
                .map_or(("(exited before identified)", 0, None), |p| (p.0, p.2, p.1))
        };
        #[derive(Default)]
        struct Role {
            pids: std::collections::BTreeSet<u32>,
            rows: BTreeMap<(u8, &'static str), PgWaitRow>,
        }
        // By server (postmaster pid; 0: not identified) and role.
        let mut roles: BTreeMap<(u32, &'static str), Role> = BTreeMap::new();
        let mut major_of: HashMap<u32, u32> = HashMap::new();
        let mut sums: Vec<((u32, u32), Sum)> = self.sums.drain().collect();
        sums.sort_by_key(|s| s.0);
        for ((tgid, info), s) in sums {
            let label = if info == 0 {
                ""
            } else {
                self.label(tgid, info)
            };
            let (role_name, server, major) = role_of(&self.procs, tgid);
            if let Some(m) = major {
                major_of.insert(server, m);
            }
            let kind = match info {
                // The postmaster names no wait while it waits for connections: not DB work.
                0 if role_name == "postmaster" => PgWaitKind::Idle,
                0 => PgWaitKind::Unnamed,
                _ if idle(label) => PgWaitKind::Idle,
                _ => PgWaitKind::Wait,
            };
            let role = roles.entry((server, role_name)).or_default();
            role.pids.insert(tgid);
            let row = role
                .rows
                .entry((kind as u8, label))
                .or_insert_with(|| PgWaitRow {
                    event: label.to_string(),
                    kind,
                    ..Default::default()
                });
            row.time_s += s.off_ns as f64 / 1e9;
            row.count += s.spans;
            row.syscalls += s.syscalls;
            row.syscall_s += s.syscall_ns as f64 / 1e9;
        }
        for (tgid, (ns, n)) in &self.cpu {
            let (role_name, server, _) = role_of(&self.procs, *tgid);
            let role = roles.entry((server, role_name)).or_default();
            role.pids.insert(*tgid);
            let row = role.rows.entry((0, "")).or_default();
            row.time_s += *ns as f64 / 1e9;
            row.count += n;
        }
        let mut out: Vec<PgRoleWaits> = roles
            .into_iter()
            .map(|((server, name), r)| {
                let mut rows: Vec<PgWaitRow> = r.rows.into_values().collect();
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
                    processes: r.pids.len() as u32,
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
        let mut majors: Vec<u32> = self.procs.values().filter_map(|p| p.1).collect();
        majors.sort_unstable();
        majors.dedup();
        self.unreadable.sort();
        self.unreadable.dedup();
        Some(PgWaits {
            majors,
            roles: out,
            unreadable: self.unreadable,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_waits_are_kept_apart_and_shares_are_of_db_time() {
        let mut a = PgWaitAcc::default();
        a.procs.insert(10, ("client backend", Some(15), 9));
        a.placed.insert(10, true);
        // PostgreSQL 15: Client:ClientRead is 0x06000000, Timeout:PgSleep 0x09000002.
        let sleep = 0x0900_0002;
        let read = 0x0600_0000;
        assert_eq!(pg::wait_event_label(15, sleep), "Timeout:PgSleep");
        assert_eq!(pg::wait_event_label(15, read), "Client:ClientRead");
        assert_eq!(a.off_cpu(10, sleep, 3_000_000_000), Some("Timeout:PgSleep"));
        a.off_cpu(10, read, 5_000_000_000);
        a.off_cpu(10, 0, 500_000_000);
        a.on_cpu(10, 500_000_000);
        let w = a.finish().unwrap();
        let r = &w.roles[0];
        assert_eq!(r.role, "client backend");
        assert_eq!((r.server, r.major), (Some(9), Some(15)));
        assert!((r.db_s - 4.0).abs() < 1e-9 && (r.idle_s - 5.0).abs() < 1e-9);
        assert_eq!(r.rows[0].event, "Timeout:PgSleep");
        assert_eq!(r.rows[0].share_of_db, Some(0.75));
        let last = r.rows.last().unwrap();
        assert_eq!((last.kind, last.share_of_db), (PgWaitKind::Idle, None));
    }
}
