"""A batch over KernelBench problems on the CPU interpreter, with the KernelGen service on (each worker
gets one), watched from a child subreaper (tests/support/batch_lifetime_harness.py) so that every process it
started is seen, however it detached:

- returned normally: 20 s later nothing it started is alive (it stopped its services), and the same
  command again redoes none of the finished problems;
- killed with SIGKILL mid-check: 20 s later only its idle-limited services are (its workers, their
  steps and everything below them died with it), and the same command again finishes every problem,
  each row with its true final status.

The harness answers as soon as that holds (a process gone does not come back), within the 20 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgen.batch.resume import JOB_FILE
from tests.support.kernelbench_problems import LAYERNORM, RELU, SCALAR
from tests.support.paths import TESTS

pytestmark = pytest.mark.slow
HARNESS = TESTS / "support" / "batch_lifetime_harness.py"
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


def _watch(out: Path, args: list[str], env: dict[str, str], kill_when: str | None = None) -> dict:
    """After a kill, the services may stay (they idle out on their own); after a normal end, nothing may."""
    killing = ["--kill-when", kill_when, "--services-stay"] if kill_when else []
    cmd = [sys.executable, str(HARNESS), str(out), str(SETTLE_S), *killing, "--", *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


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


def test_a_batch_killed_mid_check_leaves_only_its_idle_services_and_a_rerun_finishes_every_row(tmp_path):
    level = _problems(tmp_path, {"19_ReLU.py": RELU, "40_LayerNorm.py": LAYERNORM})
    out = tmp_path / "out"
    env = _env(tmp_path)
    args = [str(level), "--out", str(out), "--rounds", "0", "--backend", "offline", "--gpus", "2"]
    got = _watch(out, args, env, kill_when="checking accuracy")
    assert got["rc"] == -9, got
    assert got["left"] == [], got  # no worker, no step, no sandboxed worker, no peer process
    assert all("kernelgen" in cmd for _, cmd in got["service"]), got

    again = subprocess.run([sys.executable, "-m", "kernelgen", "batch", *args], env=env, capture_output=True, text=True,
                           timeout=900)
    assert again.returncode == 0, again.stdout + again.stderr
    rows = _rows(out)
    assert len(rows) == 2 and all(r["status"] == "finished" for r in rows.values()), rows
    assert not any("earlier run's verdict" in r["reason"] or r["reason"] for r in rows.values()), rows
    md = (out / "batch_report.md").read_text()
    assert all(f"| {n} | finished |" in md for n in rows) and "| error |" not in md
