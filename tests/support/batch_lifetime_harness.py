"""Runs `python -m kernelgen batch ARGS` and says which of the processes it started are still alive
SETTLE seconds after it returned, or after it was killed with SIGKILL (`--kill-when TEXT`: once TEXT
appears in one of the batch's logs under OUT/_batch/logs).

This process is made a child subreaper (PR_SET_CHILD_SUBREAPER), so every process the batch started,
however it detached (a new session, a parent that died), stays below it and is found through /proc.
It prints one JSON line: {"rc", "left": [[pid, cmdline]...], "service": [[pid, cmdline]...]} ("service":
a KernelGen service and the processes below it, which may idle out on their own), then kills whatever
is left, so a failing test leaves nothing behind either.

It looks every 0.2 s and answers at the first look where nothing is alive (with `--services-stay`:
nothing but services), else at SETTLE s: a process that is gone cannot come back (what would start it
again is gone too, and a service's own processes count as the service's), so the answer is the one
SETTLE s would give, without waiting out the 20 s where the batch's processes were gone in one.

    python tests/support/batch_lifetime_harness.py OUT SETTLE [--kill-when TEXT] [--services-stay] -- BATCH_ARGS...
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
SERVICE = "kernelgen.verify.judge.service.daemon"


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[1].split()
        if rest[0] != "Z":  # a zombie holds nothing: it only waits to be reaped
            out.setdefault(int(rest[1]), []).append(int(entry))
    return out


def _below(pid: int) -> list[int]:
    children, found, todo = _children(), [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:300]
    except OSError:
        return ""


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _wait_for(text: str, logs: Path, proc: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if any(text in p.read_text(errors="replace") for p in logs.glob("*.log")):
            return
        time.sleep(0.1)
    raise SystemExit(f"{text!r} never appeared in {logs} (the batch {'ended' if proc.poll() is not None else 'ran on'})")


def _alive() -> tuple[list[int], set[int]]:
    """The processes below this one, and which of them are a service or below one."""
    alive = _below(os.getpid())
    services = [p for p in alive if SERVICE in _cmdline(p)]
    return alive, set(services) | {d for s in services for d in _below(s)}


def main() -> int:
    args = sys.argv[1:]
    split = args.index("--")
    out, settle, rest = Path(args[0]), float(args[1]), args[2:split]
    batch = args[split + 1:]
    kill_when = rest[rest.index("--kill-when") + 1] if "--kill-when" in rest else None
    services_stay = "--services-stay" in rest
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    proc = subprocess.Popen([sys.executable, "-m", "kernelgen", "batch", *batch], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    if kill_when:
        _wait_for(kill_when, out / "_batch" / "logs", proc)
        os.kill(proc.pid, signal.SIGKILL)  # the batch's driver alone: what dies with it is the point
    rc = proc.wait()
    deadline = time.monotonic() + settle
    while True:
        _reap()
        alive, of_services = _alive()
        settled = not alive or (services_stay and set(alive) <= of_services)
        if settled or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    print(json.dumps({"rc": rc, "left": [[p, _cmdline(p)] for p in alive if p not in of_services],
                      "service": [[p, _cmdline(p)] for p in sorted(of_services)]}), flush=True)
    for p in alive:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.5)
    _reap()
    return 0


if __name__ == "__main__":
    sys.exit(main())
