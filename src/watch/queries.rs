//! Query ids of the watched client backends, sampled: with `--dsn`, a thread reads
//! `pg_stat_activity` every [`PERIOD`] (active client backends: pid, `query_id`, whether the
//! wait is an `IO:*` event) while the watch runs. What a backend was running between two
//! samples is not known exactly: each of its traced I/O syscalls is charged to the query id of
//! its last sample (the syscall's time itself is exact). The server computes query ids only
//! with `compute_query_id` on (or `auto` with `pg_stat_statements` loaded); their texts come
//! from `pg_stat_statements` where it is installed.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::results::PgQueryIo;

use super::relations::Catalog;

/// How often `pg_stat_activity` is read.
pub(crate) const PERIOD: Duration = Duration::from_millis(100);

/// One look at `pg_stat_activity`: the active client backends, (pid, query id, in an IO wait).
type Round = Vec<(u32, Option<i64>, bool)>;

/// The sampling thread.
pub(crate) struct QuerySampler {
    stop: Arc<AtomicBool>,
    rx: mpsc::Receiver<Round>,
    thread: JoinHandle<Vec<String>>,
    /// The server process serving the sampler's own connection: iolens' own load, left out of
    /// what the watch reports.
    own: Option<u32>,
}

/// Sums per query id, and each watched backend's last sampled query id.
#[derive(Default)]
pub(crate) struct QueryAcc {
    current: HashMap<u32, i64>,
    sums: BTreeMap<i64, PgQueryIo>,
    rounds: u64,
    /// Samples of active watched backends with no query id (none computed).
    no_id: u64,
}

impl QuerySampler {
    /// Start sampling through `catalog`'s connection to the DSN's database. Returns once the
    /// connection is made (or failed), so that its server process is known before the watch
    /// counts anything ([`Self::own_pid`]).
    pub(crate) fn start(catalog: &Catalog) -> QuerySampler {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let (own_tx, own_rx) = mpsc::channel::<Option<u32>>();
        let connect = catalog.connect.clone();
        let shown = catalog.shown.clone();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("iolens-pgquery".into())
            .spawn(move || {
                let mut notes = Vec::new();
                let mut c = match connect(None) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = own_tx.send(None);
                        notes.push(format!(
                            "Query ids not sampled: cannot connect with {shown}: {e:#}"
                        ));
                        return notes;
                    }
                };
                let own = c
                    .query_one("select pg_backend_pid()", &[])
                    .ok()
                    .and_then(|r| u32::try_from(r.get::<_, i32>(0)).ok());
                let _ = own_tx.send(own);
                if let Ok(r) = c.query_one("show compute_query_id", &[]) {
                    let v: String = r.get(0);
                    if v == "off" {
                        notes.push(
                            "The server computes no query ids (compute_query_id = off): set it \
                             to on (or auto with pg_stat_statements loaded) to have them."
                                .into(),
                        );
                    }
                }
                let sql = "select pid, query_id, coalesce(wait_event_type = 'IO', false) \
                           from pg_stat_activity \
                           where backend_type = 'client backend' and state = 'active' \
                             and pid <> pg_backend_pid()";
                let mut next = Instant::now();
                while !flag.load(Ordering::Relaxed) {
                    match c.query(sql, &[]) {
                        Ok(rows) => {
                            let round: Round = rows
                                .iter()
                                .filter_map(|r| {
                                    let pid: i32 = r.get(0);
                                    Some((u32::try_from(pid).ok()?, r.get(1), r.get(2)))
                                })
                                .collect();
                            if tx.send(round).is_err() {
                                break;
                            }
                        }
                        Err(e) => {
                            notes.push(format!("Query id sampling stopped: {e}"));
                            break;
                        }
                    }
                    next += PERIOD;
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    } else {
                        next = now;
                    }
                }
                notes
            });
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                let msg = format!("Query ids not sampled: cannot start the sampling thread: {e}");
                std::thread::spawn(move || vec![msg])
            }
        };
        // A connection not made in 30 s is not waited for: its process, if it ever starts, is
        // then counted with the others.
        let own = own_rx.recv_timeout(Duration::from_secs(30)).ok().flatten();
        QuerySampler {
            stop,
            rx,
            thread,
            own,
        }
    }

    /// The server process serving the sampler's connection, when known.
    pub(crate) fn own_pid(&self) -> Option<u32> {
        self.own
    }

    /// Take the rounds sampled since the last call into `acc` (backends `watched` only).
    pub(crate) fn drain(&self, acc: &mut QueryAcc, watched: impl Fn(u32) -> bool) {
        take_rounds(&self.rx, acc, watched);
    }

    /// Stop sampling; the notes of what could not be sampled.
    pub(crate) fn finish(self, acc: &mut QueryAcc, watched: impl Fn(u32) -> bool) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        let QuerySampler { rx, thread, .. } = self;
        let notes = thread.join().unwrap_or_default();
        take_rounds(&rx, acc, watched);
        notes
    }
}

/// Take the rounds sampled since the last call into `acc` (backends `watched` only).
fn take_rounds(rx: &mpsc::Receiver<Round>, acc: &mut QueryAcc, watched: impl Fn(u32) -> bool) {
    while let Ok(round) = rx.try_recv() {
        acc.rounds += 1;
        acc.current.clear();
        for (pid, qid, io) in round {
            if !watched(pid) {
                continue;
            }
            let Some(q) = qid.filter(|&q| q != 0) else {
                acc.no_id += 1;
                continue;
            };
            acc.current.insert(pid, q);
            let s = acc.sums.entry(q).or_insert_with(|| PgQueryIo {
                query_id: q,
                ..Default::default()
            });
            s.samples += 1;
            s.io_samples += u64::from(io);
        }
    }
}

impl QueryAcc {
    /// One traced I/O syscall of process `pid`: charged to its last sampled query id.
    pub(crate) fn syscall(&mut self, pid: u32, ns: u64, device_ns: u64) {
        if let Some(q) = self.current.get(&pid) {
            if let Some(s) = self.sums.get_mut(q) {
                s.syscalls += 1;
                s.syscall_s += ns as f64 / 1e9;
                s.device_s += device_ns as f64 / 1e9;
            }
        }
    }

    /// The rows (most samples first) with their texts from `pg_stat_statements`, and the notes
    /// that say what is sampled and what is exact.
    pub(crate) fn finish(
        self,
        catalog: &Catalog,
        mut notes: Vec<String>,
    ) -> (Vec<PgQueryIo>, Vec<String>) {
        let mut rows: Vec<PgQueryIo> = self.sums.into_values().collect();
        rows.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then(b.syscall_s.total_cmp(&a.syscall_s))
        });
        notes.insert(
            0,
            format!(
                "Query ids are sampled: pg_stat_activity read every {} ms ({} reads); each \
                 backend's I/O syscalls are charged to the query id of its last sample. The \
                 syscalls and their times are exact; which query made them is sampled.",
                PERIOD.as_millis(),
                self.rounds
            ),
        );
        if self.no_id > 0 && rows.is_empty() {
            notes.push(format!(
                "{} samples of active backends had no query id: the server computes them only \
                 with compute_query_id = on (or auto with pg_stat_statements loaded).",
                self.no_id
            ));
        }
        if !rows.is_empty() {
            let ids: Vec<i64> = rows.iter().map(|r| r.query_id).collect();
            let texts = (catalog.connect)(None).and_then(|mut c| {
                Ok(c.query(
                    "select queryid, query from pg_stat_statements where queryid = any($1)",
                    &[&ids],
                )?)
            });
            match texts {
                Ok(found) => {
                    for r in found {
                        let (id, text): (i64, String) = (r.get(0), r.get(1));
                        if let Some(row) = rows.iter_mut().find(|x| x.query_id == id) {
                            row.text.get_or_insert_with(|| short(&text));
                        }
                    }
                }
                Err(e) => notes.push(format!(
                    "No query texts: pg_stat_statements cannot be read in the DSN's database \
                     ({}).",
                    crate::out::one_line(&format!("{e:#}"))
                )),
            }
        }
        (rows, notes)
    }
}

/// A query's text on one line, at most 100 characters.
fn short(text: &str) -> String {
    let line = crate::out::one_line(text);
    let words = line.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.chars().count() > 100 {
        format!("{}…", words.chars().take(99).collect::<String>())
    } else {
        words
    }
}
