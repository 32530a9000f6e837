"""The pruning rules the optimize loop applies before timing anything: each value kept or dropped
with a reason in words and numbers; and the launch model they rely on agrees with the generated
files' own `_launch_config`."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import inspect  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from kernelgen.offline import generate_kernel, knob_space, prune  # noqa: E402
from kernelgen.offline.budgets import Pruned  # noqa: E402
from kernelgen.offline.matmul.knobs import MatmulKnobs  # noqa: E402
from kernelgen.offline.launch import matmul_tiles  # noqa: E402
from kernelgen.offline.pointwise.knobs import PointwiseKnobs  # noqa: E402
from kernelgen.offline.pointwise.launch import pointwise_launch  # noqa: E402
from kernelgen.offline.rows.knobs import RowKnobs  # noqa: E402
from kernelgen.offline.rows.launch import rows_launch  # noqa: E402
from tests.support.offline_check import example, import_source, unary  # noqa: E402


def _by_value(spec_name: str, knob: str, shapes: dict, dtype: str = "bfloat16", values: list | None = None,
              base: dict | None = None, sms: int | None = 132) -> dict:
    spec = example(spec_name)
    values = values if values is not None else knob_space(spec)[knob]
    out = prune(spec, knob, values, generate_kernel(spec, base).knobs, shapes, dtype, sms)
    assert [p.value for p in out] == values and all(isinstance(p, Pruned) and p.reason for p in out)
    return {p.value: p for p in out}


def test_the_new_knobs_are_in_the_space() -> None:
    rows = knob_space(example("log_softmax"))
    assert rows["algorithm"] == [None, "online", "split", "single", "looped"] and rows["persistent"] == [False, True]
    assert 16384 in rows["LOOP_BLOCK"]
    pw = knob_space(example("gelu"))
    assert pw["erf"] == ["libdevice", "poly"] and pw["persistent"] == [False, True] and pw["TILE_BYTES"][0] is None
    assert {16384, 32768} <= set(pw["BLOCK_SIZE"])


def test_online_for_long_rows_only_where_the_reductions_fold() -> None:
    got = _by_value("log_softmax", "algorithm", {"x": [4096, 50257]})
    assert got[None].kept and "base" in got[None].reason
    assert got["online"].kept and "rows of 50257" in got["online"].reason and "3 times" in got["online"].reason
    assert not got["split"].kept and "4096 rows >= 2 x 132 SMs" in got["split"].reason
    assert not got["single"].kept and "exceed 32768" in got["single"].reason
    assert not got["looped"].kept and "same kernel, tile and grid as the base" in got["looped"].reason
    short = _by_value("softmax", "algorithm", {"x": [16384, 4096]})
    assert not short["online"].kept and "fit in registers" in short["online"].reason
    assert not short["looped"].kept and "re-reads each row 3 times" in short["looped"].reason
    one_level = _by_value("row_max", "algorithm", {"x": [4096, 50257]})
    assert not one_level["online"].kept and "one reduction and no per-element output" in one_level["online"].reason
    centred = unary("centred", "(x - x.amax(-1, keepdim=True)).sum(-1)", [{"x": [3, 50]}], dtypes=["float32"])
    out = prune(centred, "algorithm", ["online", "split"], generate_kernel(centred).knobs, {"x": [8, 50000]}, "float32", 132)
    assert not any(p.kept for p in out) and all("merge in one pass" in p.reason for p in out)


def test_split_for_few_rows() -> None:
    got = _by_value("softmax", "algorithm", {"x": [32, 32000]})
    assert got["split"].kept and "32 rows on 132 SMs leave 100 SMs idle" in got["split"].reason
    assert "8 chunks" in got["split"].reason
    narrow = _by_value("softmax", "algorithm", {"x": [32, 1000]})
    assert not narrow["split"].kept


def test_register_budget_and_programs_per_sm() -> None:
    warps = _by_value("softmax", "num_warps", {"x": [16384, 4096]})
    assert not warps[1].kept and "128 elements per thread" in warps[1].reason and "> 255 per thread: spills" in warps[1].reason
    assert warps[4].kept and "32 elements per thread" in warps[4].reason
    assert not warps[8].kept  # the heuristic's own choice: the same launch as the base
    tiles = _by_value("gelu", "BLOCK_SIZE", {"x": [64, 1000]}, dtype="float32")
    assert tiles[512].kept  # 125 programs: the most any value reaches here
    assert not tiles[1024].kept and "63 programs on 132 SMs (< 2 per SM) where another value reaches 125" in tiles[1024].reason
    big = _by_value("gelu", "BLOCK_SIZE", {"x": [16384, 8192]}, values=[None, 32768], base={"num_warps": 4})
    assert not big[32768].kept and "256 elements per thread" in big[32768].reason


def test_a_tile_a_row_wide_when_the_row_fits() -> None:
    got = _by_value("softmax", "MAX_SINGLE_PASS", {"x": [16384, 4096]})
    assert not got[2048].kept and "would loop over them, 3 reads instead of 1" in got[2048].reason
    assert not got[16384].kept and "nothing to time" in got[16384].reason
    longer = _by_value("softmax", "MAX_SINGLE_PASS", {"x": [2048, 32768]})
    assert longer[32768].kept


def test_persistent_erf_and_stages() -> None:
    pers = _by_value("rms_norm", "persistent", {"x": [16384, 4096], "weight": [4096]})
    assert pers[True].kept and "16384 tiles over 528 programs" in pers[True].reason
    few = _by_value("rms_norm", "persistent", {"x": [64, 4096], "weight": [4096]})
    assert not few[True].kept and "no loop" in few[True].reason
    erf = _by_value("gelu", "erf", {"x": [16384, 8192]})
    assert erf["poly"].kept and "1.5e-07" in erf["poly"].reason
    no_erf = _by_value("swiglu", "erf", {"gate": [64, 64], "up": [64, 64]})
    assert not no_erf["poly"].kept and "has no erf" in no_erf["poly"].reason
    stages = _by_value("softmax", "num_stages", {"x": [16384, 4096]})
    assert not stages[2].kept and "no loop" in stages[2].reason


def test_matmul_shared_memory_tensor_cores_and_padding() -> None:
    shapes = {"a": [4096, 4096], "b": [4096, 4096]}
    stages = _by_value("matmul_leakyrelu", "num_stages", shapes, "float16", values=[None, 2, 4, 5])
    assert stages[4].kept and "192 KB shared memory" in stages[4].reason
    assert not stages[5].kept and "5 stages x (128x64 + 64x256) x 2 B = 240 KB of shared memory > 227 KB" in stages[5].reason
    small = _by_value("matmul_leakyrelu", "BLOCK_M", shapes, "float16", values=[8, 64])
    assert not small[8].kept and "multiples of 16" in small[8].reason
    acc = _by_value("matmul_leakyrelu", "BLOCK_M", shapes, "float16", values=[256], base={"BLOCK_N": 256, "num_warps": 4})
    assert not acc[256].kept and "512 registers per thread" in acc[256].reason
    thin = _by_value("matmul_leakyrelu", "BLOCK_K", {"a": [4096, 32], "b": [32, 4096]}, "float16", values=[None, 128])
    assert not thin[128].kept and "BLOCK_K=128 > K=32" in thin[128].reason


def test_unknown_knobs_and_bad_values() -> None:
    spec = example("softmax")
    with pytest.raises(ValueError, match="unknown knob 'BLOCK_M'"):
        prune(spec, "BLOCK_M", [64], generate_kernel(spec).knobs, {"x": [4, 4]}, "float32", None)
    (bad,) = prune(spec, "num_warps", [3], generate_kernel(spec).knobs, {"x": [4, 4]}, "float32", None)
    assert not bad.kept and "power of two" in bad.reason


# --- the launch model against the generated files ----------------------------------------
ROW_SHAPES = [(1, 7), (3, 1000), (32, 32000), (2048, 4096), (5, 9000), (300, 50257), (4096, 64)]


@pytest.mark.parametrize("knobs", [{}, {"algorithm": "single"}, {"algorithm": "looped", "LOOP_BLOCK": 1024},
                                   {"algorithm": "online", "persistent": True, "num_warps": 4},
                                   {"algorithm": "split", "ROW_TILE": 8192}, {"MAX_SINGLE_PASS": 2048, "num_stages": 2}],
                         ids=str)
def test_rows_launch_model_matches_the_generated_file(knobs: dict, tmp_path: Path) -> None:
    spec = example("softmax")
    module = import_source(spec.name, generate_kernel(spec, knobs).source, tmp_path)
    model = RowKnobs.model_validate(knobs)
    # an online persistent grid is also sized by the L2 (itemsize and L2 bytes follow the SM count)
    sized = "l2_bytes" in inspect.signature(module._launch_config).parameters
    assert sized == (knobs.get("algorithm") == "online" and knobs.get("persistent", False))
    for sms, l2 in ((4, 4 << 20), (132, 50 << 20)):
        for rows, cols in ROW_SHAPES:
            kernel, grid, meta, split = module._launch_config(rows, cols, sms, *((2, l2) if sized else ()), **module._BASE)
            launch = rows_launch(model, rows, cols, sms, 2, l2)
            assert (meta["BLOCK_R"], meta["BLOCK_C"], meta["num_warps"], grid[0]) == \
                   (launch.block_r, launch.block_c, launch.num_warps, launch.programs), (rows, cols, sms)
            assert (split or (1,))[0] == launch.chunks and meta.get("num_stages") == launch.num_stages
            path = next((p for p in ("online", "split") if kernel.__name__.startswith(f"_softmax_kernel_{p}")), None)
            assert (path or ("single" if meta["SINGLE_PASS"] else "looped")) == launch.path


@pytest.mark.parametrize("knobs", [{}, {"grid": "1d"}, {"TILE_BYTES": 16384}, {"BLOCK_SIZE": 512, "persistent": True}],
                         ids=str)
def test_pointwise_launch_model_matches_the_generated_file(knobs: dict, tmp_path: Path) -> None:
    spec = example("gelu")
    module = import_source(spec.name, generate_kernel(spec, knobs).source, tmp_path)
    model = PointwiseKnobs.model_validate(knobs)
    for itemsize in (2, 4):
        for rows, cols in [(1, 8000), (8, 1000), (16384, 8192), (3, 33)]:
            kernel, grid, meta, _ = module._launch_config(rows, cols, itemsize, 132, **module._BASE)
            launch = pointwise_launch(model, rows, cols, itemsize, 132)
            got = (meta.get("BLOCK_R", 1), meta.get("BLOCK_C", meta.get("BLOCK_SIZE")), meta["num_warps"], grid[0])
            assert got == (launch.block_r, launch.block_c, launch.num_warps, launch.programs)


def test_matmul_launch_model_matches_the_generated_file(tmp_path: Path) -> None:
    spec = example("matmul_leakyrelu")
    for knobs in ({}, {"BLOCK_N": 64, "num_stages": 5}):
        module = import_source(spec.name, generate_kernel(spec, knobs).source, tmp_path)
        for m, n, k in [(64, 96, 80), (4096, 4096, 4096), (8192, 8192, 8192), (1024, 1024, 64)]:
            for fp32, kmajor, tf32 in ((False, True, False), (True, True, False), (True, False, False), (True, True, True)):
                assert module._launch_config(m, n, k, fp32, kmajor, tf32, **module._BASE) == \
                       matmul_tiles(MatmulKnobs.model_validate(knobs), m, n, fp32, k, kmajor, tf32)
