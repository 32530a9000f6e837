"""What every benchmark script needs, in one place: the repository's path, this checkout first on the
import path, another tree's environment, `python -m kernelgen` run as a user runs it, and a generated
kernel imported from its file or its text.

A script under benchmarks/ runs as `python benchmarks/X.py`, so this folder is first on sys.path and
`from common import ...` finds this file.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Iterator, Mapping

REPO = Path(__file__).resolve().parent.parent
_LOADS = itertools.count()  # one module name per load: two kernels of one name never share one


def use_this_tree(tree: Path = REPO) -> Path:
    """Put `tree` (default: this checkout) first on sys.path, so its kernelgen is the one imported
    whatever else is installed."""
    sys.path.insert(0, str(tree))
    return tree


def use_tests() -> Path:
    """Make `tests.support` (the test suite's spec lists and helpers, tests/support/) this checkout's, for
    the scripts that run them on a GPU (the CPU tests cannot run bfloat16 or time anything). The `tests`
    package is bound to its folder here rather than through sys.path, so a script whose kernelgen comes
    from another tree (`--tree`) still gets this checkout's helpers and that tree's kernelgen."""
    folder = REPO / "tests"
    spec = importlib.util.spec_from_file_location("tests", folder / "__init__.py", submodule_search_locations=[str(folder)])
    package = importlib.util.module_from_spec(spec)
    sys.modules["tests"] = package
    spec.loader.exec_module(package)
    return folder / "support"


def tree_env(tree: Path | None, base_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base_env` (default: this process's environment) with `tree` first on PYTHONPATH, then the
    caller's PYTHONPATH: a GPU machine carries wheels (pydantic, openai) there, which a child of
    another tree still needs. No tree: the environment unchanged."""
    env = dict(os.environ if base_env is None else base_env)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH", "")) if p)
    return env


def run_python(argv: list[str], *, tree: Path | None = None, env: Mapping[str, str] | None = None,
               cwd: Path | None = None, timeout: float | None = None, echo: bool = False) -> tuple[int, str, float]:
    """`python ARGV` in a child process: (exit code, stdout + stderr, seconds). `tree` first on its
    PYTHONPATH and, unless `cwd` says otherwise, its working folder: `python -m` and `-c` put the
    working folder first on the path, so a child run in this checkout would import this checkout's
    kernelgen whatever PYTHONPATH says. `env`: the whole environment (default: this process's).
    `echo`: the child's output goes to this process's (a long batch shows progress), "" comes back."""
    child_env = tree_env(tree, env)
    t0 = time.monotonic()
    pipe = None if echo else subprocess.PIPE
    # a session of its own: Ctrl-C, or `timeout -s INT`'s signal to the group, reaches this script alone,
    # which passes it on once (a batch told twice stops its stopping half-way) and waits for the child
    p = subprocess.Popen([sys.executable, *argv], env=child_env, cwd=cwd or tree or REPO, stdout=pipe,
                         stderr=subprocess.STDOUT if pipe else None, text=True, start_new_session=True)
    with _forwarding_stops(p) as stopped:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise
    if stopped:  # told to stop: the child (a batch: its workers, steps and services) has ended, now this script,
        signal.signal(stopped[0], signal.SIG_DFL)  # by the same signal (a shell sees 130 for Ctrl-C), no traceback
        os.kill(os.getpid(), stopped[0])
    return p.returncode, out or "", time.monotonic() - t0


@contextlib.contextmanager
def _forwarding_stops(p: subprocess.Popen) -> Iterator[list[int]]:
    """SIGTERM and SIGINT passed to the child and waited for: under `timeout -s TERM`, this script used to
    die at once while its batch still stopped its workers, so "the batch returned" came before the batch
    had (issue 39: processes seen starting 8 s after the return); under Ctrl-C or `timeout -s INT` it
    died of a KeyboardInterrupt traceback while the batch was still saying what it had saved
    (2026-12-07, H100). Yields the signals received, in order."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def forward(signum: int, frame: object) -> None:  # noqa: ARG001 - a signal handler's signature
        got.append(signum)
        if p.poll() is None:
            p.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield got
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def kernelgen(*args: str, tree: Path | None = None, env: Mapping[str, str] | None = None, cwd: Path | None = None,
              timeout: float | None = None, echo: bool = False) -> tuple[int, str, float]:
    """`python -m kernelgen ARGS` as a user types it: (exit code, stdout + stderr, seconds); the
    arguments as run_python's."""
    return run_python(["-m", "kernelgen", *args], tree=tree, env=env, cwd=cwd, timeout=timeout, echo=echo)


def load_module(path_or_source: Path | str, name: str, tmp: Path | None = None) -> ModuleType:
    """A generated kernel imported as a module of a name of its own: from its file (a Path), or from
    its source text (a str), written first to NAME_triton.py in a new folder under `tmp` (default: a
    new temporary folder). Triton's JIT reads a kernel's source back from its file, so text must land
    in one; a new folder per load, because a file rewritten in place within one second, at the same
    size, can be imported from its stale __pycache__ entry."""
    if isinstance(path_or_source, Path):
        path = path_or_source
    else:
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp)) / f"{name}_triton.py"
        path.write_text(path_or_source)
    spec = importlib.util.spec_from_file_location(f"{name}_triton_{next(_LOADS)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_entry(path_or_source: Path | str, name: str, tmp: Path | None = None):  # noqa: ANN201 - the kernel's function
    """The entry function `name` of a generated kernel, loaded as load_module loads it."""
    return getattr(load_module(path_or_source, name, tmp), name)
