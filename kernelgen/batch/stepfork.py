"""A batch worker's steps forked from the worker itself, which imported once what every step imports.

A step is a fresh `python -m kernelgen ...` otherwise, and each one imports the CLI, torch and
torch._dynamo (the offline front end and the spec's derivation trace through it) before it does
anything: 6.9 s on a loaded 2-core CPU machine (0.2 s the CLI, 3.0 s torch, 2.9 s torch._dynamo,
0.8 s KernelGen's own modules), about 4 s on an H100 host, two or three times per operator. A local
batch worker imports them once (`preload`, before its first job; nothing in it starts CUDA, so every
child starts its own device context, as a fresh process does) and forks each step from there: the
child is what `python -m kernelgen ARGS` would be — a new session, stdin from /dev/null, stdout and
stderr into the worker's pipe, every other descriptor closed, the step's own environment, default
signal handlers, the same CLI entry point — only without the imports. It ties itself to the worker
(kernelgen.lifetime), as an exec'd step does.

Only a process that called `preload` forks (a local batch worker); a Ray task runs inside Ray's own
worker process, which holds threads and connections no child should inherit: its steps are exec'd.
"""

from __future__ import annotations

import importlib
import io
import os
import signal
import subprocess
import sys
import time
import traceback
from typing import IO

_preloaded = False
# What the steps import, by name: the program's entry point (`python -m kernelgen` runs kernelgen.cli,
# which itself imports the batch) and the modules its commands load lazily. Not a dependency of this
# package: the same code an exec'd step would import, imported once.
# The offline generator (0.65 s of imports on this CPU: `new` generates, `optimize` plans with it) and
# matplotlib for the plot each optimize round draws (0.5 s) are loaded by every offline step too.
PRELOAD = ("torch", "kernelgen.cli", "kernelgen.new", "kernelgen.optimize.loop", "kernelgen.serve.commands",
           "kernelgen.spec.kernelbench", "kernelgen.offline", "kernelgen.record.plot", "kernelgen.verify.judge.ahead")
ENTRY = "kernelgen.cli"  # a step's entry point; the baselines timed ahead (kernelgen.batch.ahead) name their own


def preload(device: str) -> str:
    """Import what the steps import (the CLI and the modules its commands load, torch, torch._dynamo);
    from now on this process forks its steps. Unless a child forked now cannot start `device` (an
    import started the CUDA driver: kernelgen.verify.worker.zygote.forkable): then every step is a
    fresh process, as before, and the reason is returned."""
    global _preloaded
    for name in PRELOAD:
        importlib.import_module(name)
    import matplotlib

    matplotlib.use("Agg")  # as kernelgen.record.plot selects it: files only, no display
    importlib.import_module("matplotlib.pyplot")
    from kernelgen.nodynamo import real_dynamo

    real_dynamo()
    from kernelgen.verify.worker.zygote import forkable

    why = forkable(device)
    _preloaded = not why
    return why


def forking() -> bool:
    return _preloaded


class ForkedStep:
    """A forked step, as much of `subprocess.Popen` as kernelgen.batch.step uses."""

    def __init__(self, pid: int, stdout: IO[str]):
        self.pid, self.stdout = pid, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None and self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        deadline = time.monotonic() + (timeout or 0)
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"step {self.pid}", timeout or 0)
            time.sleep(0.05)
        return self.returncode  # type: ignore[return-value]


def fork_step(args: list[str], env: dict[str, str], entry: str = ENTRY) -> ForkedStep:
    """`kernelgen ARGS` (or `python -m ENTRY ARGS`) in a child of this process, in `env` (which names
    this process as its parent)."""
    read, write = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        _become_step(args, env, write, entry)  # never returns
    os.close(write)
    return ForkedStep(pid, io.open(read, "r", encoding="utf-8", errors="replace"))


def _become_step(args: list[str], env: dict[str, str], out: int, entry: str) -> None:
    code = 1
    try:
        # first: until now the worker's own handlers run here (they end a forked child at once)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        for src, target in ((null, 0), (out, 1), (out, 2)):
            os.dup2(src, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 65536)
        os.environ.clear()
        os.environ.update(env)
        sys.stdin = io.open(0, "r", closefd=False)
        sys.stdout = io.open(1, "w", encoding="utf-8", errors="replace", closefd=False)
        sys.stderr = io.open(2, "w", encoding="utf-8", errors="replace", closefd=False)
        sys.argv = ["kernelgen", *args]
        from kernelgen.lifetime import tie_to_parent

        tie_to_parent()
        importlib.import_module(entry).main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the step's own failure, told as a fresh process would tell it
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001 - pragma: no cover
                pass
        os._exit(code)
