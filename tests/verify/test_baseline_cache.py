"""Baseline timings measured once (kernelgen.verify.judge.baselines): `bench` after a bench takes eager,
torch.compile and the peers from the cache and says when they were timed; `--fresh` times them again;
an entry is found only for exactly what it measured."""

from __future__ import annotations

import json

import torch
from typer.testing import CliRunner

from kernelgen.cli import app
from kernelgen.verify.judge.baselines import BaselineCache
from kernelgen.verify.results import KernelTiming
from tests.support.broadcast import make_op_dir
from tests.support.judging import HONEST


TIMING = KernelTiming(ms=1.5, ms_min=1.4, ms_max=1.7, spread=0.02, reps=100)


def _bench(op, out, *extra):
    r = CliRunner().invoke(app, ["bench", str(op), "--device", "cpu", "--json", str(out), *extra])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())["performance"]


def test_bench_reuses_the_baselines_and_fresh_times_them_again(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "400")
    op = make_op_dir(tmp_path, HONEST)
    first = _bench(op, tmp_path / "1.json")
    assert first["cases"] and all(c["eager"] and not c["baselines_measured_at"] for c in first["cases"])
    second = _bench(op, tmp_path / "2.json")
    assert [c["eager"] for c in second["cases"]] == [c["eager"] for c in first["cases"]]  # the same numbers, not re-timed
    assert all(c["baselines_measured_at"] for c in second["cases"])
    assert "from the cache, timed" in second["note"] and "--fresh" in second["note"]
    fresh = _bench(op, tmp_path / "3.json", "--fresh")
    assert all(c["eager"] and not c["baselines_measured_at"] for c in fresh["cases"]) and "from the cache" not in fresh["note"]


def test_an_entry_is_found_only_for_what_it_measured(tmp_path, monkeypatch):
    recipe = {"inputs": [{"name": "x", "init": "randn"}], "params": []}
    cache = BaselineCache("a" * 64, recipe, "cpu", root=tmp_path)
    cache.put("eager", {"x": [64, 128]}, "float32", timing=TIMING, host_us=3.0)
    assert cache.get("eager", {"x": [64, 128]}, "float32").timing == TIMING
    assert cache.get("eager", {"x": [64, 128]}, "float16") is None
    assert cache.get("eager", {"x": [64, 129]}, "float32") is None
    assert cache.get("compile", {"x": [64, 128]}, "float32") is None
    assert BaselineCache("b" * 64, recipe, "cpu", root=tmp_path).get("eager", {"x": [64, 128]}, "float32") is None
    other_init = {"inputs": [{"name": "x", "init": "rand"}], "params": []}
    assert BaselineCache("a" * 64, other_init, "cpu", root=tmp_path).get("eager", {"x": [64, 128]}, "float32") is None
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "high")  # TF32 for float32 matmuls
    assert BaselineCache("a" * 64, recipe, "cpu", root=tmp_path).get("eager", {"x": [64, 128]}, "float32") is None
    monkeypatch.undo()
    assert BaselineCache("a" * 64, recipe, "cpu", root=tmp_path, fresh=True).get("eager", {"x": [64, 128]}, "float32") is None
    for path in (tmp_path / "baselines").iterdir():
        path.write_text('{"kind": "eager", "timing": "not a timing"}')  # damaged: timed again, never trusted
    assert cache.get("eager", {"x": [64, 128]}, "float32") is None
