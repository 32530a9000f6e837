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
    if os.getppid() != int(named) and not _alive(int(named)):  # it died before the request: no signal will come
        os._exit(1)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
