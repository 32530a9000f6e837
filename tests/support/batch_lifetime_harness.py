"""Runs `python -m kernelgen batch ARGS` and says which of the processes it started are still alive
SETTLE seconds after it returned, or after it was stopped: `--kill-when TEXT` sends the batch's
driver SIGKILL, `--term-when TEXT` SIGTERM (as `timeout` does), once TEXT appears in one of the
batch's logs under OUT/_batch/logs.

This process is made a child subreaper (PR_SET_CHILD_SUBREAPER), so every process the batch started,
however it detached (a new session, a parent that died), stays below it and is found through /proc.
A thread watches them from the start (every 0.1 s), so the answer also says who started whom and
when, a process that died early included. The wait ends before SETTLE once nothing is left below this
process: a process that is gone starts nothing, so nothing of the batch can start later (the batch's
services included: they are below it too).

It prints one JSON line:
  {"rc", "stop_s", "left": [[pid, cmdline]...], "service": [[pid, cmdline]...], "late": [[pid, cmdline]...],
   "seen": [[pid, parent, started_s, last_seen_s, cmdline]...], "described": [{pid, cmd, state, parent, threads, rss_kb, wchan,
   gone_after_s}...]}
"stop_s": seconds from the signal to the batch's return; "service": a KernelGen service and the
processes below it; "late": every process that started after the batch returned (of which none
should exist); "described": each left process as it was at SETTLE and how many seconds later it went
(None: not within LINGER_S); "seen": every process below the batch, its first parent seen, its start and when it was last seen alive,
in seconds after the batch returned (negative: before): how long the processes took to go, one by one. Then it kills whatever is left, so a failing test leaves
nothing behind either.

    python tests/support/batch_lifetime_harness.py OUT SETTLE [--kill-when TEXT | --term-when TEXT] -- BATCH_ARGS...
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
SERVICE = "kernelgen.verify.judge.service.daemon"
WATCH_S = 0.1
LINGER_S = 30  # after SETTLE, how long a left process is still watched (when it went, or that it did not)
TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        rest = _stat(entry) if entry.isdigit() else None
        if rest is not None and rest[0] != "Z":  # a zombie holds nothing: it only waits to be reaped
            out.setdefault(int(rest[1]), []).append(int(entry))
    return out


def _below(pid: int, children: dict[int, list[int]] | None = None) -> list[int]:
    children, found, todo = children or _children(), [], [pid]
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


def _describe(pid: int) -> dict:
    """What a left process is doing, so a failure says whether it lives or is dying: its state (R, S, D;
    a zombie is never listed), parent, threads, resident memory (None: its address space is gone, it is
    inside exit), and where in the kernel it waits (wchan)."""
    rest = _stat(str(pid)) or []
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        rss = next((int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS:")), None)
    except OSError:
        rss = None
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        wchan = ""
    return {"pid": pid, "cmd": _cmdline(pid), "state": rest[0] if rest else "?", "parent": int(rest[1]) if rest else None,
            "threads": int(rest[17]) if len(rest) > 17 else None, "rss_kb": rss, "wchan": wchan}


def _uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


class Watch(threading.Thread):
    """Every process below this one, as first seen: (first parent, start in seconds since boot, cmdline)."""

    def __init__(self) -> None:
        super().__init__(name="watch", daemon=True)
        self.seen: dict[int, tuple[int, float, str]] = {}
        self.last: dict[int, float] = {}  # pid -> when it was last seen alive (seconds since boot)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.look()
            time.sleep(WATCH_S)

    def look(self) -> None:
        children = _children()
        parent = {c: p for p, cs in children.items() for c in cs}
        now = _uptime()
        for pid in _below(os.getpid(), children):
            self.last[pid] = now
            if pid in self.seen:  # a forked child shows its parent's command line until it execs its own
                first, start, _ = self.seen[pid]
                self.seen[pid] = (first, start, _cmdline(pid) or self.seen[pid][2])
            elif (rest := _stat(str(pid))) is not None:
                self.seen[pid] = (parent[pid], int(rest[19]) / TICKS, _cmdline(pid))


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _sizes(logs: Path) -> dict[Path, int]:
    return {p: p.stat().st_size for p in logs.glob("*.log")}


def _wait_for(text: str, logs: Path, proc: subprocess.Popen, before: dict[Path, int], timeout_s: float = 600) -> None:
    """Until `text` appears in what this run added to the logs (an earlier run's lines do not count)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        for p in logs.glob("*.log"):
            with open(p, "rb") as f:
                f.seek(before.get(p, 0))
                if text.encode() in f.read():
                    return
        time.sleep(0.1)
    raise SystemExit(f"{text!r} never appeared in {logs} (the batch {'ended' if proc.poll() is not None else 'ran on'})")


def main() -> int:
    args = sys.argv[1:]
    split = args.index("--")
    out, settle, rest = Path(args[0]), float(args[1]), args[2:split]
    batch = args[split + 1:]
    when = {flag: rest[rest.index(flag) + 1] for flag in ("--kill-when", "--term-when") if flag in rest}
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    watch = Watch()
    watch.start()
    logs = out / "_batch" / "logs"
    before = _sizes(logs) if logs.is_dir() else {}
    proc = subprocess.Popen([sys.executable, "-m", "kernelgen", "batch", *batch], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    signalled = None
    for flag, text in when.items():
        _wait_for(text, logs, proc, before)
        # the batch's driver alone: what dies with it, or what it stops, is the point
        os.kill(proc.pid, signal.SIGKILL if flag == "--kill-when" else signal.SIGTERM)
        signalled = _uptime()
    rc = proc.wait()
    returned = _uptime()
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        _reap()
        if not _below(os.getpid()):
            break
        time.sleep(0.2)
    _reap()
    watch.done.set()
    watch.join()
    watch.look()
    children = _children()  # at SETTLE: the verdict's moment
    alive = _below(os.getpid(), children)
    described = [_describe(p) for p in alive]
    for d in described:
        d["cmd"] = d["cmd"] or watch.seen.get(d["pid"], (0, 0, ""))[2]  # empty: exiting; say what it was
    known = {d["pid"]: d["cmd"] for d in described}.get
    services = [p for p in alive if SERVICE in known(p)]
    of_services = set(services) | {d for s in services for d in _below(s, children)}
    gone_after = {}
    if alive:  # diagnosis only: how much longer each takes to go (the verdict is the SETTLE rule above)
        t0 = time.monotonic()
        while time.monotonic() - t0 < LINGER_S and len(gone_after) < len(alive):
            _reap()
            now = set(_below(os.getpid()))
            gone_after.update({p: round(time.monotonic() - t0, 1) for p in alive if p not in now and p not in gone_after})
            time.sleep(0.2)
    for d in described:
        d["gone_after_s"] = gone_after.get(d["pid"])
    seen = sorted(watch.seen.items(), key=lambda kv: kv[1][1])
    print(json.dumps({"rc": rc, "stop_s": None if signalled is None else round(returned - signalled, 2), "left": [[p, known(p)] for p in alive if p not in of_services],
                      "service": [[p, known(p)] for p in sorted(of_services)],
                      "late": [[p, cmd] for p, (_, start, cmd) in seen if start > returned], "described": described,
                      "seen": [[p, parent, round(start - returned, 2), round(watch.last.get(p, start) - returned, 2), cmd]
                               for p, (parent, start, cmd) in seen]}), flush=True)
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
