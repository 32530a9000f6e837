"""The reduction table (kernelgen.offline.frontend.reductions): every reduction kind is one row --
its identity, its step, how a tile's lanes reduce, the dtypes it accumulates in, the form of its
state -- and the emitters of both engines read the row, never branch on the kind."""

from __future__ import annotations

import ast
import dataclasses
from collections import OrderedDict
from pathlib import Path

import pytest

import kernelgen.offline
from kernelgen.offline import NotServed, generate_kernel, registry
from kernelgen.offline.frontend import reductions
from kernelgen.offline.frontend.reductions import REDUCTIONS
from tests.support.nd_specs import ALL
from tests.support.offline_check import check_kernel, make_spec

OFFLINE = Path(kernelgen.offline.__file__).parent
EMITTERS = ["stages/emit_reduce.py", "stages/emit_split.py", "stages/emit_tile.py", "stages/tile_emitter.py",
            "frame/emitter.py", "rows/kernel.py", "rows/variants.py"]


@pytest.fixture
def fresh_routes(monkeypatch):
    monkeypatch.setattr(registry, "_ROUTES", OrderedDict())  # kernels are emitted when a spec is routed


@pytest.mark.parametrize("path", EMITTERS)
def test_no_emitter_branches_on_a_reduction_s_kind(path: str) -> None:
    kinds = set(REDUCTIONS)
    for node in ast.walk(ast.parse((OFFLINE / path).read_text())):
        if isinstance(node, ast.Compare):
            strings = {c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)}
            assert not strings & kinds, f"{path}:{node.lineno} compares with a reduction kind: read its row instead"


def test_a_row_is_what_the_stage_engine_writes(fresh_routes, monkeypatch) -> None:
    """The max row's step, swapped for one that lets NaN lose, is the looped pass's step; its reduce, the
    single pass's and the split's combine."""
    row = dataclasses.replace(REDUCTIONS["max"], step="{acc} = tl.maximum({acc}, tl.where({mask}, {x}, -float('inf')))",
                              reduce="tl.max({t}, {axis}, propagate_nan=tl.PropagateNan.NONE)")
    monkeypatch.setitem(reductions.REDUCTIONS, "max", row)
    source = generate_kernel(ALL["max_dim1"], {"split": True}).source
    assert "acc1 = tl.maximum(acc1, tl.where(mask, v0, -float('inf')))" in source
    assert "propagate_nan=tl.PropagateNan.NONE" in source and "PropagateNan.ALL" not in source


def test_a_new_kind_is_one_row(fresh_routes, monkeypatch, tmp_path: Path) -> None:
    """A kind the front end lowers to and the table has is served without another edit: sum's row under
    a new name, the IR's sums renamed to it, gives the same kernel and the reference's numbers."""
    spec = ALL["sum_dim0"]
    want = generate_kernel(spec).source
    monkeypatch.setattr(registry, "_ROUTES", OrderedDict())
    monkeypatch.setitem(reductions.REDUCTIONS, "total", REDUCTIONS["sum"])
    lowered = registry.trace_reference

    def renamed(s):
        traced = lowered(s)
        for v in traced.graph.values:
            if v.op == "reduce" and v.attrs["kind"] == "sum":
                v.attrs["kind"] = "total"
        return traced

    monkeypatch.setattr(registry, "trace_reference", renamed)
    kern = check_kernel(spec, tmp_path)
    assert "total" in kern.source and kern.source.replace("total", "sum") == want  # its name in the comments only


def test_an_integer_max_is_refused_by_its_row(fresh_routes) -> None:
    spec = make_spec(name="imax", inputs=[{"name": "x", "dtype": "int64", "init": "randint(0, 9)"}], dtypes=["float32"],
                     reference="def imax(x):\n    return x.amax(0)\n", test_cases=[{"x": [6, 5]}])
    with pytest.raises(NotServed, match="a max over integers"):
        generate_kernel(spec)


def test_every_row_says_what_it_accumulates_in() -> None:
    for kind, row in REDUCTIONS.items():
        assert row.accumulates.get("float") == "tl.float32", kind  # floats accumulate in fp32
        assert row.splits == (row.form in ("value", "moments")) and row.slots >= 1
    assert REDUCTIONS["sum"].acc_dtype("sum", False) == "tl.int64"  # integer sums: no int32 overflow
