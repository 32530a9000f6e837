"""Processes that end with the command that started them, also when that command is SIGKILLed.

A GPU process that outlives its command keeps its memory: after a batch returned, 14 KernelGen
processes still held 0.9-46 GB each on four H100s (issue 39), and one peer-library process was alive
seven minutes later. So every helper process a command starts (a batch's workers and their steps, the
judge's fork server, the peer-library timer) ties itself to the process that started it:

    parent:  subprocess.Popen(cmd, env=child_env())          # names this process as the parent
    child:   tie_to_parent()                                  # first thing it does

The child asks the kernel for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG), then checks that
the parent named is still alive: one that died before the request left the child re-parented
already, and it exits at once. (A wrapper between the two, such as `py-spy record --` around a
batch's steps, becomes the parent the signal watches.) The signal comes when the parent *thread* that forked the child ends,
so a long-lived child is started from a thread that lives as long as it (a batch's worker threads do).
The variable is removed from the child's environment, so a grandchild started without `child_env`
is not tied to the wrong process. Linux only: elsewhere nothing is tied (the caller's own cleanup on
exit, SIGINT and SIGTERM still runs).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

ENV = "KERNELGEN_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def child_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """An environment for a child that will tie itself to this process."""
    return {**(os.environ if environ is None else environ), ENV: str(os.getpid())}


def tie_to_parent(sig: int = signal.SIGKILL) -> bool:
    """Die with the parent named by KERNELGEN_PARENT_PID (exit now if it is gone already); False when
    no parent is named or the system cannot do it."""
    named = os.environ.pop(ENV, "")
    if not named.isdigit() or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if not _ancestor(int(named)):  # it died before the request: no signal will come
        os._exit(1)
    return True


def _ancestor(pid: int) -> bool:
    """Whether `pid` is still this process's parent, or a parent's parent (a wrapper in between).

    Asking whether `pid` is alive is not enough: a parent SIGKILLed a moment ago is a zombie until its
    own parent reaps it, and `kill(pid, 0)` succeeds on a zombie -- a zygote started as a batch was
    killed saw its dead service "alive", kept running with no signal to come, and was still there 20 s
    later (tests/batch/test_lifetime.py, 2026-12-07). A dead parent's children are re-parented to a
    subreaper or to init, so the named process is no longer above this one."""
    seen, at = set(), os.getppid()
    while at > 1 and at not in seen:
        if at == pid:
            return True
        seen.add(at)
        at = _parent_of(at)
    return at == pid


def _parent_of(pid: int) -> int:
    """The parent pid /proc gives for `pid`; 0 when it is gone, a zombie or /proc cannot be read."""
    try:
        stat = open(f"/proc/{pid}/stat", "rb").read()
    except OSError:
        return 0
    state, ppid = stat[stat.rindex(b")") + 2:].split()[:2]  # the name may hold spaces and parentheses
    return 0 if state in (b"Z", b"X") else int(ppid)
