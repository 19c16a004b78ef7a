"""Run a command quietly and read its resource usage (shared by the bench/ scripts)."""
import os
import sys


def child(cmd):
    """Run cmd with stdout and stderr discarded; exit if it fails. Returns (CPU seconds, user
    plus system, and peak resident set in KB) from the child's rusage."""
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execvp(cmd[0], cmd)
    _, status, ru = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"command failed: {' '.join(cmd)}")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss
