"""Candidates across GPUs, on the CPU: a search shared out over two judges (each times the best beside
its share, and says where); judges pinned to another device."""

from __future__ import annotations

from pathlib import Path

from kernelgen.devices import DeviceInfo
from kernelgen.optimize.search import search
from kernelgen.record.oplog import search_table
from kernelgen.record.state import CandidateRecord, RoundRecord
from kernelgen.spec import validate_spec_data
from kernelgen.verify.judge import Judge, KernelSource
from kernelgen.verify.session import worker_environment

DATA = Path(__file__).resolve().parent / "data"
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


def test_a_pinned_judge_starts_its_workers_on_that_device(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # this process's own GPU
    env = worker_environment(DeviceInfo("cuda", "cuda", False, pin="3"), tmp_path)
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    assert worker_environment(DeviceInfo("cuda", "cuda", False), tmp_path)["CUDA_VISIBLE_DEVICES"] == "0"
    assert worker_environment(DeviceInfo("npu", "npu", False, pin="2"), tmp_path)["ASCEND_RT_VISIBLE_DEVICES"] == "2"
    assert DeviceInfo("cuda", "cuda", False, pin="3").label == "cuda:3"
    assert DeviceInfo("cuda", "cuda", False).label == "cuda:0"  # pinned by the environment
