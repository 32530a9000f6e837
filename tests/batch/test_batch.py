"""`kernelgen batch` end to end on the CPU interpreter, over three tiny specs (tests/batch/data: a
one-case float32 broadcast, gelu and row_sum), one optimization round each:

- the local engine with two interpreter workers, SIGKILLed (the whole process group) after its
  first operator finished, then run again: the finished operator is not redone, the others resume
  where they stopped, all three finish; a bad spec and an operator the offline generator cannot
  build, in the same folder, are reported with their reason while the rest goes on;
- the Ray engine on a local two-CPU Ray instance (one CPU per task: no GPU here), whose first task
  to send round 0 back has its worker SIGKILLed: the batch goes on and reports it, the same command
  again finishes it from round 0, and the others are not redone.

Each test runs the three operators once; the local run, its resume and the bad input share one
test, and so do the Ray run and its resume, to keep CI short.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.batch.resume import JOB_FILE
from kernelgen.cli import app
from kernelgen.devices import DRY_RUN_LABEL
from kernelgen.record.state import load_state

pytestmark = pytest.mark.slow

SPECS = Path(__file__).resolve().parent / "data"
NAMES = ["broadcast", "gelu", "row_sum"]
UNSUPPORTED = ("name: running_max\ndescription: running maximum, which no offline family serves\ninputs:\n  - {name: x}\noutputs:\n  - {name: out}\n"
               "reference: |\n  def running_max(x):\n      return torch.cummax(x, dim=-1).values\n"
               "dtypes: [float32]\ntest_cases:\n  - {x: [4, 33]}\n")
BAD = "name: broken\ndescription: no outputs\ninputs:\n  - {name: x}\ndtypes: [float32]\ntest_cases:\n  - {x: [4]}\n"


def flat(text: str) -> str:
    return " ".join(text.split())


def report_of(out: Path) -> dict:
    return json.loads((out / "batch_report.json").read_text())


def assert_all_finished(out: Path) -> dict:
    report = report_of(out)
    rows = {r["name"]: r for r in report["operators"]}
    for name in NAMES:
        assert rows[name]["status"] == "finished", rows[name]
        assert rows[name]["rounds"] == 1
        assert json.loads((out / name / JOB_FILE).read_text())["status"] == "finished"
        assert (out / name / "final_perf.json").is_file() and (out / name / "optimization_log.md").is_file()
    assert not report["summary"]["measured"]  # interpreter: labelled as a dry run
    md = (out / "batch_report.md").read_text()
    assert DRY_RUN_LABEL in md and all(f"| {n} | finished |" in md for n in NAMES)
    assert (out / "batch_report.png").stat().st_size > 1000
    return report


def _kill_ray_worker_after_round_0(out: Path, killed: dict) -> None:
    """From the driver's side: once an operator's folder came back with round 0 finished, SIGKILL the
    Ray worker running its task (the log that came back with the folder names its pid)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        for name in NAMES:
            log = out / "_batch" / "logs" / f"{name}.log"
            found = re.search(r"worker pid (\d+)", log.read_text()) if log.is_file() else None
            if found:
                killed.update(name=name, pid=int(found.group(1)), round0=load_state(out / name).rounds[0].started_at)
                os.kill(killed["pid"], signal.SIGKILL)
                return
        time.sleep(0.05)


def _running(fragment: str) -> list[str]:
    """Command lines of this host's processes that contain `fragment`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fragment in text:
            found.append(text)
    return found


def test_ray_task_killed_mid_operator_is_reported_and_the_next_run_resumes_it(tmp_path):
    """A local two-CPU Ray instance (one CPU per task: no GPU here). The worker of the first task whose
    round 0 came back is killed; the batch goes on, reports it with its reason, and the same command
    again finishes it from round 0 while the two others are not redone."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    out = tmp_path / "out"
    args = ["batch", str(SPECS), "--out", str(out), "--rounds", "1", "--backend", "offline", "--engine", "ray"]
    killed: dict = {}
    killer = threading.Thread(target=_kill_ray_worker_after_round_0, args=(out, killed))
    try:
        killer.start()
        first = CliRunner().invoke(app, args)
        killer.join()
        left = _running(f"-pid{killed.get('pid')}-")  # its steps, had they outlived their worker
        again = CliRunner().invoke(app, args)
    finally:
        ray.shutdown()
    assert killed, first.output
    name = killed["name"]
    assert first.exit_code == 1, first.output
    assert not left, left

    assert again.exit_code == 0, again.output
    report = assert_all_finished(out)
    assert report["engine"].startswith("ray: a local Ray instance, 2 CPU")
    rows = {r["name"]: r for r in report["operators"]}
    assert not rows[name]["skipped"] and rows[name]["resumed"].startswith("round 0 done")
    assert all(rows[n]["skipped"] for n in NAMES if n != name)  # finished in the first run, beside the killed task
    assert all(" cpu (pid " in row["target"] for row in report["operators"])
    assert load_state(out / name).rounds[0].started_at == killed["round0"], "round 0 was redone"
    steps = [ln.split("$ kernelgen ")[1].split()[0] for ln in (out / "_batch" / "logs" / f"{name}.log").read_text().splitlines()
             if "$ kernelgen " in ln]
    # round 0's measurement (by `new`, in full) is the final one: no `bench` step times it again
    assert steps.count("new") == 1 and steps[-1] == "optimize" and "bench" not in steps, steps
    assert not list(Path(tempfile.gettempdir()).glob(f"kernelgen-batch-*-pid{killed['pid']}-*")), "the dead task's scratch is left"
    first_text = flat(first.output)
    assert f"{name} error" in first_text and "the Ray task failed: WorkerCrashedError" in first_text
    assert "round 0 finished" in first_text and "a later run resumes this operator" in first_text
    assert all(f"{n} finished" in first_text for n in NAMES if n != name)


def _snapshot(out: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(out)): (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*")
            if p.is_file() and not p.relative_to(out).parts[0].startswith(("_batch", "batch_report"))}


def test_local_engine_killed_midway_resumes_and_reports_bad_input(tmp_path):
    """Two interpreter workers; the folder also holds a spec that does not validate and one the
    offline generator cannot build. SIGKILL of the whole process group once the first operator has
    finished, then the same command again."""
    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    (specs / "broken.yaml").write_text(BAD)
    (specs / "running_max.yaml").write_text(UNSUPPORTED)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "kernelgen", "batch", str(specs), "--out", str(out), "--rounds", "1",
           "--backend", "offline", "--engine", "local", "--gpus", "2"]
    env = {**os.environ, "KERNELGEN_DEVICE": "cpu"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 400
    try:
        while time.monotonic() < deadline:
            finished = [n for n in NAMES if (out / n / JOB_FILE).is_file()]
            if finished:
                break
            assert proc.poll() is None, "the batch ended before any operator finished"
            time.sleep(0.1)
        else:
            pytest.fail("no operator finished")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the batch, its workers and their steps
        proc.wait()
    # Which operators finished is read once the batch is dead, not when the first was seen: another
    # can finish between that poll and the kill (it did, 2 runs in 4 on 2 cores), and it is then
    # rightly skipped by the resume.
    finished = [n for n in NAMES if (out / n / JOB_FILE).is_file()]
    before = _snapshot(out)
    started: dict[str, str] = {}  # operators whose round 0 had finished: resumed, not redone
    for name in NAMES:
        try:
            r0 = load_state(out / name).rounds[0]
        except (OSError, ValueError, IndexError):
            continue
        if r0.finished_at:
            started[name] = r0.started_at
    assert len(finished) < len(NAMES), "killed too late to show a resume"

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 1, again.stdout + again.stderr  # the batch ran; two of its specs could not
    report = assert_all_finished(out)
    after = _snapshot(out)
    for path, (data, mtime) in before.items():
        if path.split("/")[0] in finished:
            assert after[path] == (data, mtime), f"{path} of a finished operator changed"
    rows = {r["name"]: r for r in report["operators"]}
    assert {n for n in NAMES if rows[n]["skipped"]} == set(finished)
    for name, t0 in started.items():
        assert load_state(out / name).rounds[0].started_at == t0, f"{name}: round 0 was redone"
    for name in NAMES:  # a folder whose round 0 never finished was moved aside, not deleted
        if name not in started and any(p.startswith(f"{name}/") for p in before):
            assert list(out.glob(f"{name}.previous-*")), name
    assert {rows[n]["target"] for n in NAMES} <= {"cpu#0", "cpu#1"}

    # bad input: listed with its reason; the rest of the batch went on
    assert rows["broken"]["status"] == "invalid" and "outputs" in rows["broken"]["reason"]
    assert rows["running_max"]["status"] == "invalid" and "needs an LLM" in rows["running_max"]["reason"]
    s = report["summary"]
    assert (s["operators"], s["correct"]) == (5, 3) and s["pass_rate"] == pytest.approx(0.6)
    text = flat(again.stdout)
    assert all(f"{n} skipped: finished in an earlier run" in text for n in finished)
    assert "pass rate 3/5 (60%)" in text and "local: 2 Triton-interpreter worker(s)" in text
    md = (out / "batch_report.md").read_text()
    assert "| broken | invalid |" in md and "| running_max | invalid |" in md
    for name in finished:
        log = (out / "_batch" / "logs" / f"{name}.log").read_text()
        # the best round's measurement is the final one (kernelgen.batch.job): no `bench` step repeats it
        assert [ln.split("$ kernelgen ")[1].split()[0] for ln in log.splitlines() if "$ kernelgen " in ln] == ["new", "optimize"]
