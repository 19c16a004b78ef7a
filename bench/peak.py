"""Run a command and print its own peak resident memory (shared by the bench/ scripts).

`ru_maxrss` from wait4 (and GNU time's %M) cannot be used: at exec the kernel carries the high-
water mark of the address space the child had before (a copy of this Python process after
fork) into the child's maximum. This samples `VmHWM` of /proc/PID/status, which belongs to the
address space exec made, counting only samples taken after exec (when the status's Name is the
program's), every 2 ms until the process exits, as tests/common/peak.rs does.

    python3 bench/peak.py LIMIT_S STDERR_FILE COMMAND...

prints "PEAK_KB SECONDS OUTCOME" (OUTCOME: "exit N"; past LIMIT_S seconds, where an endless
input is stopped, SIGTERM is sent (SIGKILL 5 s later) and it reads "stopped at limit: exit N"; a command that ended before the first sample after exec gets
wait4's ru_maxrss, an upper bound, and says so). stdout goes to /dev/null, stderr to STDERR_FILE ('-' keeps
it).
"""
import os
import signal
import sys
import time


def hwm_kb(pid, comm):
    try:
        with open(f"/proc/{pid}/status") as f:
            s = f.read()
    except OSError:
        return None
    named, hwm = False, None
    for line in s.splitlines():
        if line.startswith("Name:"):
            named = line[5:].strip() == comm
        elif line.startswith("VmHWM:"):
            hwm = int(line[6:].strip().split()[0])
    return hwm if named else None


def main():
    limit, err, cmd = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
    comm = os.path.basename(cmd[0])[:15]
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        if err != "-":
            os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        os.execvp(cmd[0], cmd)
    t0, killed, peak = time.time(), 0.0, 0
    while True:
        kb = hwm_kb(pid, comm)
        if kb is not None:
            peak = max(peak, kb)
        p, status, ru = os.wait4(pid, os.WNOHANG)
        if p == pid:
            break
        if not killed and time.time() - t0 > limit:
            # SIGTERM, as a person or a container would stop it (it cleans up after itself);
            # SIGKILL 5 s later if it does not end.
            os.kill(pid, signal.SIGTERM)
            killed = time.time()
        elif killed and time.time() - killed > 5:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)
    code = "exit %d" % os.waitstatus_to_exitcode(status)
    if killed:
        code = "stopped at limit: " + code
    if peak == 0:
        # Ended before a sample after exec: ru_maxrss, an upper bound (it includes this
        # Python process's high-water mark), marked so.
        peak, code = ru.ru_maxrss, code + " (ended before a sample: ru_maxrss, upper bound)"
    print(peak, "%.1fs" % (time.time() - t0), code)


main()
