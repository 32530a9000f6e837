"""Candidates across GPUs, on the CPU: a search shared out over two judges (each times the best beside
its share, and says where); judges pinned to another device; idle batch devices lent and claimed with
a flock that ends with its holder; `optimize --gpus` refusals; the local engine's lend tokens."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgen.batch.job import JobRequest
from kernelgen.batch.resume import JobResult
from kernelgen.batch.targets import Target, parse_gpus
from kernelgen.cli import app
from kernelgen.devices import DeviceInfo
from kernelgen.lending import LendToken, claim, lend, lent
from kernelgen.optimize.pool import JudgePool
from kernelgen.optimize.search import search
from kernelgen.record.oplog import search_table
from kernelgen.record.state import CandidateRecord, RoundRecord
from kernelgen.spec import validate_spec_data
from kernelgen.verify.judge.judge import Judge, KernelSource
from kernelgen.verify.judge.session import worker_environment
from tests.support.paths import DATA

SPEC = validate_spec_data({
    "name": "broadcast", "description": "out = x + bias", "category": "broadcast",
    "inputs": [{"name": "x"}, {"name": "bias"}], "outputs": [{"name": "out"}],
    "reference": "def broadcast(x, bias):\n    return x + bias\n",
    "dtypes": ["float32"], "test_cases": [{"x": [16, 32], "bias": [32]}],
})


def broadcast(x, bias):  # noqa: ANN001, ANN201 - the spec's reference
    return x + bias


def tiled(bm: int, bn: int, *, wrong: bool = False) -> KernelSource:
    src = (DATA / "broadcast_honest.py").read_text(encoding="utf-8")
    src = (src.replace("cdiv(n_rows, 16)", f"cdiv(n_rows, {bm})").replace("cdiv(n_cols, 64)", f"cdiv(n_cols, {bn})")
              .replace("BLOCK_M=16, BLOCK_N=64", f"BLOCK_M={bm}, BLOCK_N={bn}"))
    src = src.replace("+ b[None, :]", "- b[None, :]") if wrong else src
    return KernelSource(src, "broadcast_triton.py", "offline")  # offline: one worker per judge, fast


def cpu(pin: str) -> DeviceInfo:
    return DeviceInfo("cpu", "cpu", interpreter=True, pin=pin)


# --- the search over two judges -------------------------------------------------------------------
def test_search_shares_candidates_over_two_judges_each_against_the_best_there():
    home = Judge(SPEC, cpu("0"), broadcast)
    other = home.elsewhere(cpu("1"))
    best = tiled(16, 64)
    cands = [(CandidateRecord(label=f"c{i}"), k) for i, k in enumerate([tiled(8, 32), tiled(16, 32, wrong=True), tiled(4, 16)])]
    steps: list[str] = []
    try:
        search([home, other], best, cands, on_step=steps.append)
    finally:
        other.close()
        home.close()
    recs = [r for r, _ in cands]
    assert [[c.device for c in r.cases] for r in recs] == [["cpu:0"], ["cpu:1"], ["cpu:0"]]  # i mod 2
    for r in recs:
        (c,) = r.cases  # the interpreter times test_cases[0] in its first dtype only
        assert (c.case, c.dtype) == (0, "float32")
        assert c.best_ms is not None  # the best was timed beside it, on its own judge
    # The second judge checked its candidate against the outputs the first drew: it is caught there.
    assert recs[1].cases[0].verdict == "wrong" and "differ" in recs[1].cases[0].note
    for r in (recs[0], recs[2]):
        assert r.cases[0].verdict == "unjudged" and r.cases[0].note == "CPU interpreter: not a measurement"
        assert r.cases[0].ms is not None and r.cases[0].speedup is None
    assert any("on cpu:1" in s for s in steps)
    table = search_table(RoundRecord(round=1, started_at="", backend="offline", change_type="none", kernel_file="k.py",
                                     candidates=recs))
    assert table["headers"][:2] == ["candidate", "device"]
    assert [row[:2] for row in table["rows"]] == [["c0", "cpu:0"], ["c1", "cpu:1"], ["c2", "cpu:0"]]
    for r in recs:
        for c in r.cases:
            c.device = "cpu:0"
    assert "device" not in search_table(RoundRecord(round=1, started_at="", backend="offline", change_type="none",
                                                    kernel_file="k.py", candidates=recs))["headers"]


def test_an_optimizing_judge_sends_each_perf_case_to_its_worker_once(monkeypatch):
    from kernelgen.verify.judge.judge import RESIDENT_BYTES

    sent: list[str] = []
    real_put, real_draw = Judge.put, Judge._draw
    monkeypatch.setattr(Judge, "put", staticmethod(lambda worker, key, inputs, **kw: (sent.append(key), real_put(worker, key, inputs, **kw))))
    # perf inputs are drawn by the worker itself where its draw matches the judge's (it does on the CPU)
    monkeypatch.setattr(Judge, "_draw", lambda self, worker, key, inputs: (sent.append(key), real_draw(self, worker, key, inputs))[1])
    best, cand = tiled(16, 64), tiled(8, 32)
    for keep in (0, RESIDENT_BYTES):
        sent.clear()
        judge = Judge(SPEC, DeviceInfo("cpu", "cpu", True), broadcast)
        judge.resident_bytes = keep
        try:
            for _ in range(3):  # three rounds' searches of the same case
                rec = CandidateRecord(label="c")
                search(judge, best, [(rec, cand)])
                assert [c.verdict for c in rec.cases] == ["unjudged"]  # the same verdicts either way
        finally:
            judge.close()
        perf = [k for k in sent if k.startswith("perf-") or k == "timed-case"]
        # Each kernel is recorded once per judge (its recording worker gets the case once; both kernels
        # here are offline and share one), and replayed in the judge's replay worker: the case goes there
        # every round, or once when kept resident.
        assert perf == (["timed-case"] * (2 + 3) if not keep else ["perf-0-float32"] * (2 + 1))


def test_a_pinned_judge_starts_its_workers_on_that_device(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # this process's own GPU
    env = worker_environment(DeviceInfo("cuda", "cuda", False, pin="3"), tmp_path)
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    assert worker_environment(DeviceInfo("cuda", "cuda", False), tmp_path)["CUDA_VISIBLE_DEVICES"] == "0"
    assert worker_environment(DeviceInfo("npu", "npu", False, pin="2"), tmp_path)["ASCEND_RT_VISIBLE_DEVICES"] == "2"
    assert DeviceInfo("cuda", "cuda", False, pin="3").label == "cuda:3"
    assert DeviceInfo("cuda", "cuda", False).label == "cuda:0"  # pinned by the environment


# --- lending --------------------------------------------------------------------------------------
HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from kernelgen.lending import claim
    loans = claim("cuda", 1, lend_dir=Path(sys.argv[1]))
    print(len(loans), flush=True)
    time.sleep(120)
""")


def test_a_claimed_device_is_no_one_elses_until_its_holder_releases_or_dies(tmp_path):
    lend(tmp_path, LendToken(kind="cuda", device_id="1", lock="/locks/cuda1.lock"))
    mine = claim("cuda", 4, lend_dir=tmp_path)
    assert [(loan.token.device_id, loan.token.lock) for loan in mine] == [("1", "/locks/cuda1.lock")]
    assert claim("cuda", 4, lend_dir=tmp_path) == []  # a second claim, even from this process
    mine[0].release()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "1"
        assert claim("cuda", 4, lend_dir=tmp_path) == []
        os.kill(holder.pid, signal.SIGKILL)  # a crash: no release, no cleanup
        holder.wait(timeout=10)
        again = claim("cuda", 4, lend_dir=tmp_path)
        assert [loan.token.device_id for loan in again] == ["1"]
        again[0].release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_an_operator_borrows_lent_devices_for_its_searches_and_gives_them_back(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGEN_LEND_DIR", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    for kind, dev in [("cuda", "0"), ("cuda", "1"), ("cuda", "2"), ("npu", "5")]:
        lend(tmp_path, LendToken(kind=kind, device_id=dev, lock=f"/locks/{kind}{dev}.lock"))
    home = Judge(SPEC, DeviceInfo("cuda", "cuda", False), broadcast)  # no worker starts until a kernel loads
    steps: list[str] = []
    pool = JudgePool(home, on_step=steps.append)
    try:
        (first,) = pool.spares(1)
        assert (first.device.pin, first.device.lock, first.device.torch_device) == ("1", "/locks/cuda1.lock", "cuda")
        assert first.baseline is broadcast
        others = claim("cuda", 4, exclude={"0"})  # another operator of the batch gets only what is left
        assert [loan.token.device_id for loan in others] == ["2"]
        others[0].release()
        assert pool.spares(1) == [first]  # kept across rounds, no new claim
        both = pool.spares(4)  # not its own GPU 0, not the NPU
        assert [j.device.pin for j in both] == ["1", "2"]
        assert any("borrowed cuda:1" in s for s in steps)
    finally:
        pool.close()
    assert sorted(loan.token.device_id for loan in claim("cuda", 4, exclude={"0"})) == ["1", "2"]


def test_nothing_is_borrowed_under_the_interpreter(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGEN_LEND_DIR", str(tmp_path))
    lend(tmp_path, LendToken(kind="cpu", device_id="1"))
    pool = JudgePool(Judge(SPEC, DeviceInfo("cpu", "cpu", True), broadcast))
    assert pool.spares(3) == []
    pool.close()


def test_the_local_engine_lends_an_idle_device_while_another_optimizes(tmp_path, monkeypatch):
    import kernelgen.batch.local as local

    monkeypatch.delenv("KERNELGEN_DEVICE_LOCK", raising=False)
    seen: dict[str, object] = {}

    class Worker:  # a worker process that runs its one job until it sees the idle device lent
        def __init__(self, target: Target, env: dict[str, str], log_dir: Path):
            self.target, self.env, self.alive = target, env, True

        def run(self, job: JobRequest, emit: object) -> JobResult:
            lend_dir = Path(self.env["KERNELGEN_LEND_DIR"])
            deadline = time.monotonic() + 10
            while not lent(lend_dir) and time.monotonic() < deadline:
                time.sleep(0.05)
            seen.update(me=self.target.device_id, pinned=self.env["CUDA_VISIBLE_DEVICES"], tokens=lent(lend_dir),
                        claimed=[loan.token.device_id for loan in claim("cuda", 4, lend_dir=lend_dir)])
            return JobResult(name=job.name, spec=job.spec_label, status="finished", rounds=0, target=self.target.label)

        def close(self) -> None:
            self.alive = False

    monkeypatch.setattr(local, "WorkerProcess", Worker)
    engine = local.LocalEngine([Target("cuda", "0", 0), Target("cuda", "1", 1)], tmp_path / "_batch")
    job = JobRequest(name="op", spec_file="op.yaml", spec_label="op.yaml", out_root=str(tmp_path), log_file=str(tmp_path / "log"))
    (result,) = engine.run([job], lambda event: None)
    assert result.status == "finished"
    idle = "1" if seen["me"] == "0" else "0"
    assert seen["pinned"] == seen["me"]
    assert seen["tokens"] == [LendToken(kind="cuda", device_id=idle, lock=str(tmp_path / "_batch" / "locks" / f"cuda{idle}.lock"))]
    assert seen["claimed"] == [idle]
    assert lent(tmp_path / "_batch" / "lend") == []  # taken back when the batch ended


def test_workers_sharing_a_gpu_lend_it_only_when_the_last_of_them_is_done(tmp_path, monkeypatch):
    import kernelgen.batch.local as local

    monkeypatch.delenv("KERNELGEN_DEVICE_LOCK", raising=False)
    targets = parse_gpus("all", "cuda", ["0"], per_gpu=2)
    assert [t.label for t in targets] == ["cuda:0", "cuda:0#1"]
    engine = local.LocalEngine(targets, tmp_path / "_batch")
    assert {engine.worker_env(t)["KERNELGEN_DEVICE_LOCK"] for t in targets} == {str(tmp_path / "_batch" / "locks" / "cuda0.lock")}
    lend_dir = tmp_path / "_batch" / "lend"
    release = threading.Event()
    seen: list[list[LendToken]] = []

    class Worker:  # the slow job waits until the quick one is done, then looks for a loan of its own GPU
        def __init__(self, target: Target, env: dict[str, str], log_dir: Path):
            self.target, self.alive = target, True

        def run(self, job: JobRequest, emit: object) -> JobResult:
            if job.name == "slow":
                release.wait(10)
                time.sleep(0.3)  # the quick one's worker has gone idle by now
                seen.append(lent(lend_dir))
            else:
                release.set()
            return JobResult(name=job.name, spec=job.spec_label, status="finished", rounds=0, target=self.target.label)

        def close(self) -> None:
            self.alive = False

    monkeypatch.setattr(local, "WorkerProcess", Worker)
    jobs = [JobRequest(name=n, spec_file=f"{n}.yaml", spec_label=f"{n}.yaml", out_root=str(tmp_path), log_file=str(tmp_path / n))
            for n in ("slow", "quick")]
    results = engine.run(jobs, lambda event: None)
    assert [r.status for r in results] == ["finished", "finished"]
    assert {r.target for r in results} == {"cuda:0", "cuda:0#1"}  # both ran at once on the one GPU
    assert seen == [[]]  # GPU 0 still had a job of ours: not lent to anyone


# --- optimize --gpus ------------------------------------------------------------------------------
@pytest.mark.parametrize("gpus, visible, message", [
    ("0,1", ("cpu", []), "--gpus 0,1: no GPU is visible"),
    ("0,5", ("cuda", ["0", "1"]), "--gpus 0,5: 5 not among the visible cuda devices (0, 1)"),
    ("3", ("cuda", ["0", "1"]), "--gpus 3: only 2 cuda device(s) are visible (0, 1)"),
    ("two", ("cuda", ["0", "1"]), "--gpus 'two': not understood"),
    ("1,1", ("cuda", ["0", "1"]), "--gpus 1,1: an id is named twice"),
])
def test_optimize_gpus_refusals(tmp_path, monkeypatch, gpus, visible, message):
    import kernelgen.gpus as gpus_module

    monkeypatch.setattr(gpus_module, "visible_devices", lambda device="auto": visible)
    r = CliRunner().invoke(app, ["optimize", str(tmp_path), "--gpus", gpus])
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split()) and "Traceback" not in r.output


def test_optimize_gpus_first_is_home_and_the_process_computes_there(monkeypatch):
    import kernelgen.gpus as gpus_module

    monkeypatch.setattr(gpus_module, "visible_devices", lambda device="auto": ("cuda", ["4", "5", "6"]))
    devices = gpus_module.search_devices("6,4")
    assert [(d.pin, d.torch_device) for d in devices] == [("6", "cuda:2"), ("4", "cuda:2")]
    assert [d.label for d in devices] == ["cuda:6", "cuda:4"]
