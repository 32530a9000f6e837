"""kernelgen.lifetime: a child tied to its parent dies with it, also when the parent died before the
child asked -- while the dead parent is still a zombie nobody has reaped (a batch SIGKILLed as its
service started a zygote left that zygote running, 2026-12-07)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from tests.support.procs import gone, state

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# The child waits until its parent is gone, then ties itself; it writes its pid once the tie returned.
CHILD = textwrap.dedent("""
    import os, sys, time
    from kernelgen.lifetime import ENV, tie_to_parent
    parent, out = int(os.environ[ENV]), sys.argv[1]
    while os.getppid() == parent:
        time.sleep(0.01)
    tie_to_parent()
    open(out, "w").write(str(os.getpid()))
    time.sleep(30)
""")

# The parent starts the child tied to itself and exits at once; the test does not reap it for a while.
PARENT = textwrap.dedent("""
    import subprocess, sys
    from kernelgen.lifetime import child_env
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], env=child_env())
    print(child.pid, flush=True)
""")


def test_a_child_whose_parent_died_before_it_asked_exits_though_the_parent_is_an_unreaped_zombie(tmp_path):
    out = tmp_path / "survived"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(out)], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 30
        while state(parent.pid) != "Z":
            assert time.monotonic() < deadline, "the parent did not exit"
            time.sleep(0.02)
        # the parent is a zombie now (not reaped: we have not waited), which kill(pid, 0) calls alive
        os.kill(parent.pid, 0)
        assert gone(child, 15), "the child kept running with its parent dead"
        assert not out.exists(), "tie_to_parent returned in a child whose parent had died"
    finally:
        parent.wait()
        try:
            os.kill(child, 9)
        except ProcessLookupError:
            pass


def test_a_child_of_a_live_parent_ties_and_runs(tmp_path):
    code = "from kernelgen.lifetime import tie_to_parent; import sys; sys.exit(0 if tie_to_parent() else 3)"
    from kernelgen.lifetime import child_env
    done = subprocess.run([sys.executable, "-c", code], env=child_env(), timeout=60)
    assert done.returncode == 0
    # a shell that stays (it has work after python) between the two: the named parent is a grandparent
    wrapped = subprocess.run(["sh", "-c", '"$0" -c "$1"; exit $?', sys.executable, code], env=child_env(), timeout=60)
    assert wrapped.returncode == 0
