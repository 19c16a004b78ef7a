//! The streaming parser of one trace file: every line classified, waits binned, calls
//! claimed by their parents, waits placed within or between calls (see the module doc of
//! [`super`]).

use super::fields::*;
use super::*;

#[derive(Clone, Copy)]
pub(super) struct Pending {
    end: i64,
    ev: u32,
    ela: u64,
}

/// Waits not yet known to lie within or between calls, oldest first: a `Vec` with a moving
/// front, so that adding one (once per timed wait) is an inlined push. The front is compacted
/// away once it is most of the vector, so memory stays that of the waits held.
#[derive(Default)]
pub(super) struct PendingQueue {
    v: Vec<Pending>,
    head: usize,
}

impl PendingQueue {
    #[inline]
    fn len(&self) -> usize {
        self.v.len() - self.head
    }

    #[inline]
    fn push_back(&mut self, p: Pending) {
        self.v.push(p);
    }

    #[inline]
    fn pop_front(&mut self) -> Option<Pending> {
        let p = *self.v.get(self.head)?;
        self.head += 1;
        if self.head == self.v.len() {
            self.clear();
        } else if self.head >= 4096 && self.head * 2 >= self.v.len() {
            self.v.drain(..self.head);
            self.head = 0;
        }
        Some(p)
    }

    /// Drop the newest waits while they ended after `t` (they lie within the call that began
    /// at `t`).
    #[inline]
    fn drop_ended_after(&mut self, t: i64) {
        while self.v.len() > self.head && self.v[self.v.len() - 1].end > t {
            self.v.pop();
        }
        if self.v.len() == self.head {
            self.clear();
        }
    }

    #[inline]
    fn clear(&mut self) {
        self.v.clear();
        self.head = 0;
    }
}

/// Streaming parser state for one file.
pub(crate) struct TraceParser {
    opts: ParseOptions,
    out: TraceFile,
    ev_index: HashMap<Vec<u8>, u32>,
    ev_names: Vec<Vec<u8>>,
    /// [`name_key`] of each of `ev_names`: most names differ in it, so few are compared whole.
    ev_keys: Vec<(usize, u64)>,
    ev_op: Vec<usize>,
    /// The parameter layout of each event's latest WAIT line (see [`Template`]).
    ev_tmpl: Vec<Option<Template>>,
    /// The event of the previous WAIT line (consecutive waits are often of one event).
    last_ev: Option<u32>,
    in_sql: bool,
    /// Bytes of failed-statement text still to skip after `PARSE ERROR`.
    sql_left: u64,
    in_header: bool,
    pending_wall_us: Option<i64>,
    /// Added to tim (µs) to place events on the time axis (wall clock when anchored).
    axis_off: i64,
    last_tim: Option<i64>,
    pending: PendingQueue,
    untimed: Vec<(usize, u64)>,
    /// Calls not yet claimed by a parent, by depth then kind (index into `call_kinds`).
    open_calls: Vec<Vec<CallFigures>>,
    call_kinds: Vec<String>,
    /// The field layout of the latest database call line (see [`call_fields_noting`]).
    call_tmpl: Option<Template>,
    /// [`name_key`] of each of `call_kinds`.
    call_kind_keys: Vec<(usize, u64)>,
    /// Inside a `Dump of memory` block (hex lines of a bind value).
    in_dump: bool,
    /// Σ ela (µs) of waits without `tim` since the last `tim` (9i): the clock ran on by at
    /// least that much, so a trailing wait extends the traced span.
    untimed_after: u64,
    slow_min: u64,
    session_id: Option<String>,
    pid: Option<String>,
}

impl TraceParser {
    /// A parser for the file named `path`.
    pub(crate) fn new(path: &str, opts: ParseOptions) -> TraceParser {
        TraceParser {
            out: TraceFile {
                path: path.to_string(),
                session: String::new(),
                continued_from: None,
                instance: None,
                binned: Binned::new(opts.interval_ns),
                offset_us: None,
                stats: LineStats::default(),
                gzip: false,
                events: Vec::new(),
                calls: BTreeMap::new(),
                outermost_by_depth: BTreeMap::new(),
                recursive_calls: 0,
                errors: BTreeMap::new(),
                io_files: FxHashMap::default(),
                io_objs: FxHashMap::default(),
                io_ranges: FxHashMap::default(),
                slowest: Vec::new(),
                io_records: Vec::new(),
                warnings: Vec::new(),
                first_tim: None,
                last_tim: None,
                tim_range: None,
            },
            opts,
            ev_index: HashMap::new(),
            ev_names: Vec::new(),
            ev_keys: Vec::new(),
            ev_op: Vec::new(),
            ev_tmpl: Vec::new(),
            last_ev: None,
            in_sql: false,
            sql_left: 0,
            in_header: true,
            pending_wall_us: None,
            axis_off: 0,
            last_tim: None,
            pending: PendingQueue::default(),
            untimed: Vec::new(),
            open_calls: Vec::new(),
            call_kinds: Vec::new(),
            call_kind_keys: Vec::new(),
            call_tmpl: None,
            in_dump: false,
            untimed_after: 0,
            slow_min: 0,
            session_id: None,
            pid: None,
        }
    }

    /// Parse a whole file.
    pub(crate) fn parse_reader(mut self, r: &mut LineReader) -> Result<TraceFile> {
        let mut stats = LineStats::default();
        let mut n = r.line_no;
        while let Some(line) = r.next_line()? {
            n += 1;
            self.line(line, n, &mut stats);
        }
        stats.lines = r.stats.lines;
        let mut f = self.finish();
        f.stats = stats;
        f.gzip = r.gzip;
        Ok(f)
    }

    fn ignored(stats: &mut LineStats, kind: &'static str) {
        if let Some(n) = stats.ignored.get_mut(kind) {
            *n += 1;
        } else {
            stats.ignored.insert(kind.to_string(), 1);
        }
    }

    /// Process one line (without terminator); `n` is its 1-based number.
    pub(crate) fn line(&mut self, line: &[u8], n: u64, stats: &mut LineStats) {
        if self.in_sql {
            if line.starts_with(b"END OF STMT") {
                self.in_sql = false;
            }
            Self::ignored(stats, "sql text");
            return;
        }
        if self.sql_left > 0 {
            self.sql_left = self.sql_left.saturating_sub(line.len() as u64 + 1);
            Self::ignored(stats, "sql text");
            return;
        }
        if self.in_dump {
            if is_hex_dump_line(line) {
                Self::ignored(stats, "binds");
                return;
            }
            self.in_dump = false;
        }
        let Some(&c0) = line.first() else {
            Self::ignored(stats, "blank");
            return;
        };
        match c0 {
            b'W' if line.starts_with(b"WAIT #") => {
                self.in_header = false;
                match self.wait(line, n) {
                    Ok(()) => stats.parsed += 1,
                    Err(why) => count_unparsed(stats, n, line, why),
                }
                return;
            }
            b'F' if line.starts_with(b"FETCH #") => return self.call(line, 6, "FETCH", n, stats),
            b'E' if line.starts_with(b"EXEC #") => return self.call(line, 5, "EXEC", n, stats),
            b'E' if line.starts_with(b"END OF STMT") => return Self::ignored(stats, "sql text"),
            b'E' if line.starts_with(b"ERROR #") => {
                let err = field(line, b"err=").map(|v| String::from_utf8_lossy(v).into_owned());
                let key = format!("ORA-{:0>5}", err.unwrap_or_else(|| "?".into()));
                *self.out.errors.entry(key).or_default() += 1;
                self.note_tim(field(line, b"tim=").and_then(parse_i64));
                return Self::ignored(stats, "ERROR");
            }
            b'P' if line.starts_with(b"PARSE ERROR") => {
                // The failed statement's text follows: `len=` bytes of it.
                self.sql_left = field(line, b"len=").and_then(parse_u64).unwrap_or(0);
                self.note_tim(field(line, b"tim=").and_then(parse_i64));
                return Self::ignored(stats, "PARSE ERROR");
            }
            b'P' if line.starts_with(b"PARSE #") => return self.call(line, 6, "PARSE", n, stats),
            b'P' if line.starts_with(b"PARSING IN CURSOR") => {
                self.in_header = false;
                self.in_sql = true;
                self.note_tim(field(line, b"tim=").and_then(parse_i64));
                return Self::ignored(stats, "PARSING IN CURSOR");
            }
            b'C' if line.starts_with(b"CLOSE #") => return self.call(line, 6, "CLOSE", n, stats),
            b'U' if line.starts_with(b"UNMAP #") => return self.call(line, 6, "UNMAP", n, stats),
            b'S' if line.starts_with(b"SORT UNMAP #") => {
                return self.call(line, 11, "SORT UNMAP", n, stats)
            }
            b'S' if line.starts_with(b"STAT #") => return Self::ignored(stats, "STAT"),
            b'L' if line.starts_with(b"LOB") => {
                if let Some(colon) = memchr::memchr(b':', line) {
                    let name = &line[..colon];
                    if name.iter().all(|c| c.is_ascii_uppercase()) {
                        let kind = String::from_utf8_lossy(name).into_owned();
                        return self.call_named(line, colon + 1, &kind, n, stats);
                    }
                }
            }
            b'R' if line.starts_with(b"RPC EXEC:") => {
                return self.call(line, 9, "RPC EXEC", n, stats)
            }
            b'R' if line.starts_with(b"RPC ") => return Self::ignored(stats, "RPC"),
            b'X' if line.starts_with(b"XCTEND") => {
                self.note_tim(field(line, b"tim=").and_then(parse_i64));
                return Self::ignored(stats, "XCTEND");
            }
            b'B' if line.starts_with(b"BINDS #") => return Self::ignored(stats, "BINDS"),
            b' ' | b'\t' => {
                if trim(line).is_empty() {
                    return Self::ignored(stats, "blank");
                }
                return Self::ignored(stats, "binds");
            }
            b'k' if line.starts_with(b"kxsbbbfp") => return Self::ignored(stats, "binds"),
            b'=' if line.iter().all(|&c| c == b'=') => return Self::ignored(stats, "separator"),
            b'*' if line.starts_with(b"***") => {
                return match self.star_line(line) {
                    Ok(kind) => Self::ignored(stats, kind),
                    Err(why) => count_unparsed(stats, n, line, why),
                };
            }
            _ => {}
        }
        if line.starts_with(b" Bind#") || line.starts_with(b"Bind#") {
            return Self::ignored(stats, "binds");
        }
        if line.starts_with(b"-----") {
            return Self::ignored(stats, "dump section");
        }
        if line.starts_with(b"Dump of memory from") {
            // A bind value Oracle could not format, followed by hex lines.
            self.in_dump = true;
            return Self::ignored(stats, "binds");
        }
        if self.header_line(line) {
            return Self::ignored(stats, "header");
        }
        if trim(line).is_empty() {
            return Self::ignored(stats, "blank");
        }
        count_unparsed(stats, n, line, "not a 10046 trace line");
    }

    /// Header lines (trace file preamble); key lines are remembered.
    fn header_line(&mut self, line: &[u8]) -> bool {
        const KNOWN: [&[u8]; 21] = [
            b"Trace file ",
            b"Dump file ",
            b"Oracle Database ",
            b"Oracle9i ",
            b"Oracle8i ",
            b"Personal Oracle",
            b"With the ",
            b"Version ",
            b"Build label:",
            b"ORACLE_HOME",
            b"System name:",
            b"Node name:",
            b"Release:",
            b"Version:",
            b"Machine:",
            b"Instance name:",
            b"Redo thread mounted",
            b"Oracle process number:",
            b"Unix process pid:",
            b"Windows thread id:",
            b"Windows NT ",
        ];
        let known = KNOWN.iter().any(|k| line.starts_with(k))
            || (self.in_header
                && (line.starts_with(b"/")
                    || line.ends_with(b"Production")
                    || memchr::memmem::find(line, b" Release ").is_some()));
        if line.starts_with(b"Instance name:") {
            let v = trim(&line[14..]);
            self.out.instance = Some(String::from_utf8_lossy(v).into_owned());
        } else if line.starts_with(b"Unix process pid:") {
            let v = &line[17..];
            let end = v.iter().position(|&c| c == b',').unwrap_or(v.len());
            self.pid = Some(String::from_utf8_lossy(trim(&v[..end])).into_owned());
        }
        if known {
            return true;
        }
        // Other `Name: value` / `NAME = value` preamble lines before the first record.
        if self.in_header {
            let key_end = line
                .iter()
                .position(|&c| c == b':' || c == b'=')
                .unwrap_or(0);
            return key_end > 0
                && line[..key_end]
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || b" _-/().#".contains(c));
        }
        false
    }

    /// `***` lines: timestamps (possibly after `SESSION ID:(…)` and similar), continuation.
    fn star_line(&mut self, line: &[u8]) -> std::result::Result<&'static str, &'static str> {
        let rest = trim(&line[3..]);
        if rest.starts_with(b"TRACE CONTINUED FROM FILE") {
            let p = trim(&rest[25..]);
            let p = p.strip_suffix(b"***").map(trim).unwrap_or(p);
            self.out.continued_from = Some(String::from_utf8_lossy(p).into_owned());
            return Ok("trace continued");
        }
        if rest.starts_with(b"TRACE CONTINUES IN FILE") || rest.starts_with(b"TRACE CONTINUED") {
            return Ok("trace continued");
        }
        // `*** [ Unix process pid: 9850 ]`: trcsess's marker of where each process's lines begin.
        if rest.starts_with(b"[") && rest.ends_with(b"]") {
            return Ok("trcsess marker");
        }
        // `*** TRACE FILE RECREATED AFTER BEING REMOVED ***`, `*** DUMP FILE SIZE IS LIMITED …`
        if rest.first().is_some_and(|c| c.is_ascii_uppercase())
            && memchr::memchr(b'(', rest).is_none()
        {
            return Ok("marker");
        }
        let mut ts = rest;
        let mut kind = "timestamp";
        if rest.first().is_some_and(|c| c.is_ascii_digit()) {
            // `*** 2017-09-12T10:32:11.123456+02:00 (PDB1(3))` (12.2+: container after the time)
            if let Some(p) = memchr::memmem::find(rest, b" (") {
                ts = trim(&rest[..p]);
            }
        } else if let Some(open) = memchr::memchr(b'(', rest) {
            if let Some(close) = memchr::memrchr(b')', rest) {
                if close > open {
                    let name = trim(&rest[..open]);
                    let val = &rest[open + 1..close];
                    if name.starts_with(b"SESSION ID") {
                        kind = "session id";
                        if self.session_id.is_none() {
                            self.session_id = Some(String::from_utf8_lossy(val).into_owned());
                        }
                    } else {
                        kind = "session info";
                    }
                    ts = trim(&rest[close + 1..]);
                }
            }
        }
        if ts.is_empty() {
            return Ok(kind);
        }
        match parse_timestamp(ts) {
            Some(ns) => {
                if self.pending_wall_us.is_none() && self.out.first_tim.is_none() {
                    self.pending_wall_us = Some(ns / 1000);
                }
                Ok(kind)
            }
            None => Err("timestamp not understood"),
        }
    }

    #[inline]
    fn note_tim(&mut self, tim: Option<i64>) {
        let Some(t) = tim else { return };
        if self.out.first_tim.is_none() {
            // The time axis is fixed by the first tim: epoch µs, or anchored to the preceding
            // `***` timestamp, or (neither) the trace's own clock.
            self.out.first_tim = Some(t);
            if t as u64 >= EPOCH_TIM {
                self.out.offset_us = Some(0);
            } else if let Some(w) = self.pending_wall_us.take() {
                self.out.offset_us = Some(w.saturating_sub(t));
            }
            self.axis_off = self.out.offset_us.unwrap_or(0);
        }
        self.last_tim = Some(t);
        self.out.last_tim = Some(t);
        self.untimed_after = 0;
        self.out.tim_range = Some(match self.out.tim_range {
            Some((lo, hi)) => (lo.min(t), hi.max(t)),
            None => (t, t),
        });
        if !self.untimed.is_empty() {
            for (op, ela) in std::mem::take(&mut self.untimed) {
                self.out.binned.record(
                    op,
                    t.saturating_add(self.axis_off).saturating_mul(1000),
                    ela.saturating_mul(1000),
                    0,
                );
            }
        }
    }

    /// A call or wait began at `t` (its `tim` less its duration): the traced span starts no
    /// later.
    #[inline]
    fn note_start(&mut self, t: i64) {
        if let Some((lo, _)) = &mut self.out.tim_range {
            *lo = (*lo).min(t);
        }
    }

    /// The index of the event named `name`, if it has one yet.
    #[inline]
    fn find_event(&self, name: &[u8]) -> Option<u32> {
        let key = name_key(name);
        let same = |i: usize| self.ev_keys[i] == key && same_tail(&self.ev_names[i], name);
        if let Some(i) = self.last_ev {
            if same(i as usize) {
                return Some(i);
            }
        }
        if self.out.events.len() <= 32 {
            (0..self.ev_names.len())
                .find(|&i| same(i))
                .map(|i| i as u32)
        } else {
            self.ev_index.get(name).copied()
        }
    }

    /// Whether `text` begins with the name of event `e` and a closing quote.
    #[inline]
    fn named_at(&self, e: u32, text: &[u8]) -> bool {
        let (len, head) = self.ev_keys[e as usize];
        text.get(len) == Some(&b'\'')
            && word_at(text, 0) & low_bytes(len) == head
            && same_tail(&self.ev_names[e as usize], &text[..len])
    }

    /// A new event named `name` (not yet known): its index.
    fn add_event(&mut self, name: &[u8]) -> u32 {
        let i = self.out.events.len() as u32;
        let s = String::from_utf8_lossy(name).into_owned();
        self.ev_op.push(self.out.binned.op(&s));
        self.out.events.push(EventTotals {
            between_by_name: BETWEEN_CALL_EVENTS.contains(&s.as_str()),
            name: s,
            ..Default::default()
        });
        self.ev_index.insert(name.to_vec(), i);
        self.ev_names.push(name.to_vec());
        self.ev_keys.push(name_key(name));
        self.ev_tmpl.push(None);
        i
    }

    /// The parameters after a WAIT line's name: by the layout of the event's previous line when
    /// this one has it, else read the general way (and its layout kept for the next line).
    #[inline]
    fn wait_params(&mut self, found: Option<u32>, p: &[u8]) -> (WaitParams, Option<Template>) {
        if let Some(ev) = found {
            let slot = &mut self.ev_tmpl[ev as usize];
            if let Some(w) = slot.as_ref().and_then(|t| params_by_template(p, t)) {
                return (w, None);
            }
            let mut t = Some(slot.take().unwrap_or_default());
            let w = parse_params_noting(p, &mut t);
            *slot = t;
            return (w, None);
        }
        let mut t = Some(Template::default());
        let w = parse_params_noting(p, &mut t);
        (w, t)
    }

    fn wait(&mut self, line: &[u8], n: u64) -> std::result::Result<(), &'static str> {
        let rest = &line[6..];
        // The cursor number and the event name are short: an eight-byte scan beats a memchr
        // call.
        let colon = find_byte(rest, b':').ok_or("WAIT line without ':'")?;
        let cursor = &rest[..colon];
        let rest = &rest[colon + 1..];
        let rest = rest.trim_ascii_start();
        let after = match rest.strip_prefix(b"nam='") {
            Some(a) => a,
            None => {
                let nam =
                    memchr::memmem::find(rest, b"nam='").ok_or("WAIT line without nam='…'")?;
                &rest[nam + 5..]
            }
        };
        // Most often the event of the previous wait: its name and the closing quote, compared
        // word by word, are the name (a name holds no quote).
        let (q, found) = match self.last_ev.filter(|&e| self.named_at(e, after)) {
            Some(e) => (self.ev_names[e as usize].len(), Some(e)),
            None => {
                let q = find_byte(after, b'\'').ok_or("WAIT line with unterminated nam='")?;
                (q, self.find_event(&after[..q]))
            }
        };
        let name = &after[..q];
        let (params, tmpl) = self.wait_params(found, &after[q + 1..]);
        if let Some(b) = params.bad {
            return Err(b);
        }
        let ela = params.ela.ok_or("WAIT line without ela=")?;
        let ev = match found {
            Some(ev) => ev,
            None => {
                let ev = self.add_event(name);
                self.ev_tmpl[ev as usize] = tmpl;
                ev
            }
        };
        self.last_ev = Some(ev);
        self.note_tim(params.tim);
        if let Some(t) = params.tim {
            self.note_start(t.saturating_sub(ela as i64));
            if self.pending.len() >= MAX_PENDING {
                if let Some(p) = self.pending.pop_front() {
                    self.resolve(p, false);
                }
            }
            self.pending.push_back(Pending { end: t, ev, ela });
        }
        if params.tim.is_none() {
            self.untimed_after = self.untimed_after.saturating_add(ela);
        }
        let e = &mut self.out.events[ev as usize];
        e.count += 1;
        e.ela_us += ela;
        e.max_us = e.max_us.max(ela);
        // Without tim, between/within database call is decided by the event name.
        if params.tim.is_none() && e.between_by_name {
            e.between_us += ela;
            e.between_count += 1;
        }
        // Latency histogram.
        let op = self.ev_op[ev as usize];
        match params.tim.or(self.last_tim) {
            Some(t) => self.out.binned.record(
                op,
                t.saturating_add(self.axis_off).saturating_mul(1000),
                ela.saturating_mul(1000),
                0,
            ),
            None => {
                if self.untimed.len() < MAX_PENDING {
                    self.untimed.push((op, ela));
                } else {
                    self.out.binned.record(op, 0, ela.saturating_mul(1000), 0);
                }
            }
        }
        // I/O breakdown: file parameter named file#/file number, or p1 of I/O events (9i).
        let (file, block, blocks) = if params.file.is_some() {
            (params.file, params.block, params.blocks)
        } else if params.p1.is_some() && is_io_event_name(name) {
            (params.p1, params.p2, params.p3)
        } else {
            (None, None, None)
        };
        let obj = params
            .obj
            .map(|o| if o == u32::MAX as i64 { -1 } else { o });
        if let Some(f) = file {
            e.io = true;
            if self.opts.keep_io {
                if let (Some(t), Some(b)) = (params.tim, block) {
                    self.out.io_records.push(super::TraceIoRecord {
                        tim: t,
                        ela_us: ela,
                        event: ev,
                        file: f,
                        block: b,
                        blocks: blocks.unwrap_or(1),
                        line: n,
                    });
                }
            }
            let nb = blocks.unwrap_or(1);
            self.out
                .io_files
                .entry((ev, f))
                .or_default()
                .add(ela, block, nb);
            if let Some(o) = obj {
                self.out
                    .io_objs
                    .entry((ev, o))
                    .or_default()
                    .add(ela, block, nb);
            }
            if let Some(b) = block {
                self.out
                    .io_ranges
                    .entry((ev, f, b / BLOCK_RANGE))
                    .or_default()
                    .add(ela, block, nb);
            }
        }
        // Slowest waits.
        if self.opts.top > 0 && (ela > self.slow_min || self.out.slowest.len() < self.opts.top) {
            let time = match (params.tim.or(self.last_tim), self.out.offset_us) {
                (Some(t), Some(off)) => rfc3339_ns(t.saturating_add(off).saturating_mul(1000)),
                _ => String::new(),
            };
            let w = SlowWait {
                event: self.out.events[ev as usize].name.clone(),
                ela_us: ela,
                path: self.out.path.clone(),
                line: n,
                cursor: String::from_utf8_lossy(cursor).into_owned(),
                time,
                tim: params.tim,
                file,
                block,
                blocks,
                obj,
            };
            insert_slowest(&mut self.out.slowest, w, self.opts.top);
            if self.out.slowest.len() >= self.opts.top {
                self.slow_min = self.out.slowest.last().map(|w| w.ela_us).unwrap_or(0);
            }
        }
        Ok(())
    }

    /// Resolve a pending wait that no call of the file contains: between calls when a depth-0
    /// call followed it (`between`), else by its event name (between calls, or in a call that
    /// is not in the trace).
    fn resolve(&mut self, p: Pending, between: bool) {
        let e = &mut self.out.events[p.ev as usize];
        if between || e.between_by_name {
            e.between_us += p.ela;
            e.between_count += 1;
        } else {
            e.outside_us += p.ela;
            e.outside_count += 1;
        }
    }

    fn call(&mut self, line: &[u8], prefix: usize, kind: &'static str, n: u64, st: &mut LineStats) {
        // `EXEC #123:c=…` — skip the cursor number to the colon.
        let Some(colon) = find_byte(&line[prefix..], b':') else {
            return count_unparsed(st, n, line, "database call line without ':'");
        };
        self.call_named(line, prefix + colon + 1, kind, n, st)
    }

    /// A database call. Its `c` and `e` include those of its recursive children, which come
    /// before it with a greater `dep`: the call claims every unclaimed call deeper than itself,
    /// so that only outermost calls (at whatever depth the trace holds them) are counted. Waits
    /// that ended after it began lie within it; waits that ended before a depth-0 call began
    /// lie between calls.
    fn call_named(&mut self, line: &[u8], start: usize, kind: &str, n: u64, st: &mut LineStats) {
        self.in_header = false;
        let b = &line[start..];
        let CallFields { c, e, dep, tim } = match self
            .call_tmpl
            .as_ref()
            .and_then(|t| call_fields_by_template(b, t))
        {
            Some(f) => f,
            None => {
                let mut t = Some(self.call_tmpl.take().unwrap_or_default());
                let f = call_fields_noting(b, &mut t);
                self.call_tmpl = t;
                f
            }
        };
        let in_range = |x: &u64| *x <= MAX_TRACE_US;
        let (Some(c), Some(e)) = (c.filter(in_range), e.filter(in_range)) else {
            return count_unparsed(
                st,
                n,
                line,
                "database call without numeric c= and e= (up to 12 days)",
            );
        };
        if dep > MAX_DEPTH {
            return count_unparsed(st, n, line, "dep= beyond any real recursion depth");
        }
        st.parsed += 1;
        self.note_tim(tim);
        if let Some(t) = tim {
            self.note_start(t.saturating_sub(e as i64));
        }
        if dep > 0 {
            self.out.recursive_calls += 1;
        }
        let d = dep as usize;
        // Claim the children; count this call until a parent claims it.
        self.open_calls.truncate(d + 1);
        if self.open_calls.len() <= d {
            self.open_calls.resize_with(d + 1, Vec::new);
        }
        let key = name_key(kind.as_bytes());
        let k = match (0..self.call_kinds.len()).find(|&k| {
            self.call_kind_keys[k] == key
                && same_tail(self.call_kinds[k].as_bytes(), kind.as_bytes())
        }) {
            Some(k) => k,
            None => {
                self.call_kind_keys.push(key);
                self.call_kinds.push(kind.to_string());
                self.call_kinds.len() - 1
            }
        };
        let row = &mut self.open_calls[d];
        if row.len() <= k {
            row.resize_with(k + 1, CallFigures::default);
        }
        let t = &mut row[k];
        t.count += 1;
        t.cpu_us += c;
        t.elapsed_us += e;
        // Waits: the latest ones, ended after this call began, are within it.
        match tim.map(|t| t.saturating_sub(e as i64)) {
            Some(s) => {
                self.pending.drop_ended_after(s);
            }
            None => self.pending.clear(),
        }
        if dep == 0 {
            while let Some(p) = self.pending.pop_front() {
                self.resolve(p, true);
            }
        }
    }

    /// Finish: resolve pending waits (no call followed them: between calls) and hand back.
    pub(crate) fn finish(mut self) -> TraceFile {
        while let Some(p) = self.pending.pop_front() {
            self.resolve(p, false);
        }
        for (d, row) in self.open_calls.iter().enumerate() {
            for (k, t) in row.iter().enumerate().filter(|(_, t)| t.count > 0) {
                let o = self
                    .out
                    .calls
                    .entry(self.call_kinds[k].clone())
                    .or_default();
                o.count += t.count;
                o.cpu_us += t.cpu_us;
                o.elapsed_us += t.elapsed_us;
                *self.out.outermost_by_depth.entry(d as u64).or_default() += t.count;
            }
        }
        if let Some((_, hi)) = &mut self.out.tim_range {
            *hi = hi.saturating_add(self.untimed_after as i64);
        }
        if let Some((lo, hi)) = self.out.tim_range {
            let off = self.axis_off;
            self.out
                .binned
                .observe(lo.saturating_add(off).saturating_mul(1000));
            self.out
                .binned
                .observe(hi.saturating_add(off).saturating_mul(1000));
        }
        if let Some(d) = self.out.outermost_by_depth.keys().find(|d| **d > 0) {
            self.out.warnings.push(format!(
                "{}: the trace holds calls at dep={d} whose parent is not in it (tracing began or ended inside a call): their c= and e= are counted as outermost calls",
                self.out.path
            ));
        }
        if !self.untimed.is_empty() {
            self.out.warnings.push(format!(
                "{}: no tim= values, so waits have no time axis ({} waits in one interval)",
                self.out.path,
                self.untimed.len()
            ));
            for (op, ela) in std::mem::take(&mut self.untimed) {
                self.out.binned.record(op, 0, ela.saturating_mul(1000), 0);
            }
        }
        if self.out.first_tim.is_some() && self.out.offset_us.is_none() {
            self.out.warnings.push(format!(
                "{}: no '*** yyyy-mm-dd hh:mm:ss' timestamp line before the first tim=: times are \
                 relative to the trace's own clock",
                self.out.path
            ));
        }
        let base = Path::new(&self.out.path)
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.out.session = match (&self.session_id, &self.pid) {
            (Some(s), _) => format!(
                "{}session {s}",
                self.out
                    .instance
                    .as_ref()
                    .map(|i| format!("{i} "))
                    .unwrap_or_default()
            ),
            (None, Some(p)) => format!("pid {p}"),
            (None, None) => pid_from_name(&base).map_or(base, |p| format!("pid {p}")),
        };
        self.out
    }
}

/// `7F1C70A4D6D8 C3020C03 …  [....]`: a line of a memory dump.
pub(super) fn is_hex_dump_line(line: &[u8]) -> bool {
    let sp = line.iter().position(|&c| c == b' ').unwrap_or(line.len());
    sp >= 8 && line[..sp].iter().all(|c| c.is_ascii_hexdigit())
}

pub(super) fn is_io_event_name(name: &[u8]) -> bool {
    name.starts_with(b"db file")
        || name.starts_with(b"direct path")
        || name.starts_with(b"control file")
}

/// The value after `key` up to the next ',' or space.
pub(super) fn field<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let i = memchr::memmem::find(line, key)?;
    let v = &line[i + key.len()..];
    let end = v
        .iter()
        .position(|&c| c == b',' || c == b' ')
        .unwrap_or(v.len());
    Some(&v[..end])
}

pub(super) fn insert_slowest(list: &mut Vec<SlowWait>, w: SlowWait, top: usize) {
    let pos = list
        .iter()
        .position(|x| x.ela_us < w.ela_us)
        .unwrap_or(list.len());
    if pos < top {
        list.insert(pos, w);
        list.truncate(top);
    }
}

pub(super) fn pid_from_name(base: &str) -> Option<String> {
    // orcl_ora_12345.trc, orcl_ora_12345_tag.trc(.gz), orcl_j001_4321.trc
    let stem = base.split('.').next()?;
    let parts: Vec<&str> = stem.split('_').collect();
    parts
        .iter()
        .skip(1)
        .find(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        .map(|p| p.to_string())
}
