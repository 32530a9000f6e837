"""A judge's worker dies with the process that started it, also when that process died while the worker
was still starting: the kernel's parent-death signal watches whatever parent a process has when it
asks, so a worker whose judge (or fork server) was killed before it asked -- as a SIGKILLed batch kills
them, mid-check -- would be re-parented and never signalled. It must exit instead of serving nobody
(a fresh clone's suite once found four processes of a killed batch alive 20 s later)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.procs import gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# The starter forks the would-be worker, then dies at once (or waits for it, with --stay); the worker
# waits until it has been re-parented, then asks to die with the starter it was given.
SCRIPT = textwrap.dedent('''
    import os, sys, time
    from kernelgen.verify.policy import SandboxReport
    from kernelgen.verify.worker.sandbox import die_with_parent

    out = sys.argv[1]
    starter = os.getpid()
    pid = os.fork()
    if pid:
        if "--stay" in sys.argv:
            _, status = os.waitpid(pid, 0)
            sys.exit(os.waitstatus_to_exitcode(status))
        os._exit(0)
    with open(out + ".pid", "w") as f:
        f.write(str(os.getpid()))
    while os.getppid() == starter and "--stay" not in sys.argv:
        time.sleep(0.01)
    die_with_parent(SandboxReport(), starter)
    with open(out, "w") as f:
        f.write("serving")
    os._exit(0)
''')


def _run(tmp_path: Path, *flags: str) -> tuple[int, Path]:
    script = tmp_path / "starter.py"
    script.write_text(SCRIPT)
    out = tmp_path / "worker"
    proc = subprocess.run([sys.executable, str(script), str(out), *flags], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    deadline = time.monotonic() + 10
    while not (out.parent / "worker.pid").is_file() and time.monotonic() < deadline:
        time.sleep(0.02)
    return int((out.parent / "worker.pid").read_text()), out


def test_a_worker_whose_starter_died_before_it_asked_exits_instead_of_serving(tmp_path):
    pid, out = _run(tmp_path)
    assert gone(pid), f"the worker {pid} outlived the process that started it"
    assert not out.exists(), "the worker went on after its starter had died"


def test_a_worker_whose_starter_lives_goes_on(tmp_path):
    pid, out = _run(tmp_path, "--stay")
    assert out.read_text() == "serving"
