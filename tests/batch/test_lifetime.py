"""A batch over KernelBench problems on the CPU interpreter, with the KernelGen service on (each worker
gets one), watched from a child subreaper (tests/support/batch_lifetime_harness.py) so that every process it
started is seen, however it detached:

- returned normally: 20 s later nothing it started is alive (it stopped its services), and the same
  command again redoes none of the finished problems;
- stopped with SIGTERM (as `timeout` stops it) just as its steps and the baselines timed beside them
  start, then killed with SIGKILL mid-check: each time nothing it started is alive 20 s later or
  starts after it returned, its services included (each worker owns its service: it dies with the
  worker, the worker with the batch), and the same command again finishes every problem, each row
  with its true final status.

The harness stops waiting as soon as nothing of the batch is left: what is gone starts nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from kernelgen.batch.job import JobRequest
from kernelgen.batch.local import STOPPED, LocalEngine
from kernelgen.batch.placement import GiB
from kernelgen.batch.resume import JOB_FILE
from kernelgen.batch.step import WRAPPER_ENV
from kernelgen.batch.targets import Target
from tests.support.kernelbench_problems import LAYERNORM, RELU, SCALAR
from tests.support.paths import TESTS

pytestmark = pytest.mark.slow
HARNESS = TESTS / "support" / "batch_lifetime_harness.py"
SERVICE = "kernelgen.verify.judge.service.daemon"  # in a KernelGen service's command line
SETTLE_S = 20  # the rule: 20 s after the batch returned or was killed


def _problems(root: Path, files: dict[str, str]) -> Path:
    level = root / "level1"
    level.mkdir(parents=True)
    for name, text in files.items():
        (level / name).write_text(text)
    return level


def _env(tmp_path: Path) -> dict[str, str]:
    runtime = Path(os.environ["KERNELGEN_RUNTIME_DIR"]) / tmp_path.name  # swept by conftest at the end
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "KERNELGEN_DEVICE": "cpu", "KERNELGEN_RUNTIME_DIR": str(runtime)}
    env.pop("KERNELGEN_NO_SERVICE", None)  # the service on, as a user has it
    return env


def _watch(out: Path, args: list[str], env: dict[str, str], *, kill_when: str | None = None,
           term_when: str | None = None) -> dict:
    when = [*(["--kill-when", kill_when] if kill_when else []), *(["--term-when", term_when] if term_when else [])]
    cmd = [sys.executable, str(HARNESS), str(out), str(SETTLE_S), *when, "--", *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _services(watched: dict) -> int:
    """How many KernelGen services the watched batch started."""
    return sum(SERVICE in cmd for *_, cmd in watched["seen"])


def _rows(out: Path) -> dict[str, dict]:
    return {r["name"]: r for r in json.loads((out / "batch_report.json").read_text())["operators"]}


def _steps_run(out: Path) -> int:
    return sum(p.read_text().count("$ kernelgen ") for p in (out / "_batch" / "logs").glob("kb*.log"))


def test_a_batch_leaves_no_process_behind_and_a_rerun_redoes_no_finished_problem(tmp_path):
    level = _problems(tmp_path, {"19_ReLU.py": RELU, "9_Scalar.py": SCALAR})
    out = tmp_path / "out"
    env = _env(tmp_path)
    args = [str(level), "--out", str(out), "--rounds", "0", "--backend", "offline", "--gpus", "1"]
    got = _watch(out, args, env)
    assert got["rc"] == 0, got
    assert got["left"] == [] and got["service"] == [], got  # its services too: stopped when it ended
    rows = _rows(out)
    assert sorted(rows) == ["kb1_19_relu", "kb1_9_scalar"] and all(r["status"] == "finished" for r in rows.values()), rows
    assert all(r["phases"].get("new: check", 0) > 0 and r["seconds"] > 0 for r in rows.values()), rows
    jobs = {n: (out / n / JOB_FILE).stat().st_mtime_ns for n in rows}
    steps = _steps_run(out)

    again = subprocess.run([sys.executable, "-m", "kernelgen", "batch", *args], env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    text = " ".join(again.stdout.split())
    assert all(f"{n} skipped: finished in an earlier run" in text for n in rows), text
    assert _steps_run(out) == steps and {n: (out / n / JOB_FILE).stat().st_mtime_ns for n in rows} == jobs
    assert not list(out.glob("*.previous-*"))  # nothing was moved aside to be redone


def test_a_batch_stopped_or_killed_leaves_nothing_behind_and_a_rerun_finishes_every_row(tmp_path):
    level = _problems(tmp_path, {"19_ReLU.py": RELU, "40_LayerNorm.py": LAYERNORM})
    out = tmp_path / "out"
    env = {**_env(tmp_path), "KERNELGEN_BATCH_BASELINES": "on"}  # each operator's baselines timed beside its `new`
    args = [str(level), "--out", str(out), "--rounds", "0", "--backend", "offline", "--gpus", "2"]
    stopped = _watch(out, args, env, term_when="$ kernelgen new")  # a step and its baselines' process starting
    assert stopped["rc"] == 130, stopped
    assert _services(stopped) == 2, stopped  # one per worker, none a step started where it found none
    assert stopped["left"] == [] and stopped["service"] == [] and stopped["late"] == [], stopped
    rows = _rows(out)  # the operators it stopped are to be resumed, not errors of the kernel or the tool
    assert rows and all(r["status"] in ("pending", "finished") for r in rows.values()), rows
    assert any(r["reason"] == STOPPED for r in rows.values()), rows

    killed = _watch(out, args, env, kill_when="checking accuracy")
    assert killed["rc"] == -9, killed
    assert _services(killed) == 2, killed
    assert killed["left"] == [] and killed["service"] == [] and killed["late"] == [], killed

    again = subprocess.run([sys.executable, "-m", "kernelgen", "batch", *args], env=env, capture_output=True, text=True,
                           timeout=900)
    assert again.returncode == 0, again.stdout + again.stderr
    rows = _rows(out)
    assert len(rows) == 2 and all(r["status"] == "finished" for r in rows.values()), rows
    assert not any("earlier run's verdict" in r["reason"] or r["reason"] for r in rows.values()), rows
    md = (out / "batch_report.md").read_text()
    assert all(f"| {n} | finished |" in md for n in rows) and "| error |" not in md


# Stands in for `python -c BOOT new SPEC ...` (kernelgen.batch.step): says which operator's step ran, then
# works until it is interrupted.
SLOW_STEP = textwrap.dedent('''
    import os, sys, time
    name = os.path.splitext(os.path.basename(sys.argv[5]))[0]
    with open(os.environ["STEPS_LOG"], "a") as f:
        f.write(name + "\\n")
    print("• " + name + ": generating the kernel (offline)", flush=True)
    time.sleep(120)
''')


def _workers_of(pid: int) -> list[int]:
    """The batch workers (kernelgen.batch.worker) alive below this test's process."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            if int(parent) == pid and state != "Z" and b"kernelgen.batch.worker" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def test_a_stopped_batch_starts_nothing_more_not_even_an_operator_that_waited_for_room(tmp_path, monkeypatch):
    """On a GPU, operators wait in the queue for room (kernelgen.batch.placement): here `b` waits while
    the large `a` runs alone. SIGTERM stops `a`'s worker, which frees the room `b` waited for: `b` must
    not start then (on 4x H100, 2026-11-27, a batch stopped by SIGTERM started services and a peer
    process 8 s after it returned). The GPU is simulated (a fake free-memory reader), the steps too."""
    step = tmp_path / "step.py"
    step.write_text(SLOW_STEP)
    log = tmp_path / "steps.log"
    monkeypatch.setenv(WRAPPER_ENV, f"{sys.executable} {step}")
    monkeypatch.setenv("STEPS_LOG", str(log))
    out = tmp_path / "out"
    jobs = [JobRequest(name=n, spec_file=str(tmp_path / f"{n}.yaml"), spec_label=f"{n}.yaml", out_root=str(out),
                       log_file=str(out / "_batch" / "logs" / f"{n}.log"), rounds=0, device="cuda", spec_data={},
                       need_bytes=need * GiB) for n, need in (("a", 50), ("b", 5))]
    engine = LocalEngine([Target("cuda", "0", 0), Target("cuda", "0", 1, share=1)], out / "_batch",
                         probe=lambda device_id: (80 * GiB, 80 * GiB))

    def stop_once_a_runs() -> None:
        deadline = time.monotonic() + 120
        while not (log.is_file() and log.read_text().split()) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)  # engine.run turns it into KeyboardInterrupt, as Ctrl-C

    threading.Thread(target=stop_once_a_runs, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            engine.run(jobs, lambda event: None)
        assert log.read_text().split() == ["a"]  # `b` never started
        assert _workers_of(os.getpid()) == []  # and no worker was started for it after the stop
    finally:
        for pid in _workers_of(os.getpid()):
            os.killpg(pid, signal.SIGKILL)
