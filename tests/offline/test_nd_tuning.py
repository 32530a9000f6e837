"""The nd family's tuning, through the public face: its launch model agrees with the generated
file's own _tile_config and _matmul_config; its pruning rules drop values with the reason; a
dispatch table routes measured shapes to their own knobs, and every route computes the reference's
answer; round 0 keeps the file's heuristics, saying what they launch."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import difflib  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelgen.offline import DispatchEntry, first_choices, first_kernel, generate_kernel, knob_space, prune, route  # noqa: E402
from kernelgen.offline.nd.knobs import NdKnobs  # noqa: E402
from kernelgen.offline.stages.launch import stage_launches  # noqa: E402
from kernelgen.spec import draw_inputs  # noqa: E402
from kernelgen.spec.reference import load_reference  # noqa: E402
from tests.support.nd_specs import ALL, TUNING_SNAPSHOTS  # noqa: E402
from tests.support.offline_check import import_source, make_spec  # noqa: E402

SUM0 = ALL["sum_dim0"]  # x.sum(0): a reduction over the leading dim
GEMM_SUM = make_spec(name="gemm_rowsum", inputs=[{"name": "a"}, {"name": "b"}], dtypes=["float32", "float16"],
                     reference="def gemm_rowsum(a, b):\n    return (a @ b).sum(0)\n",
                     test_cases=[{"a": [33, 20], "b": [20, 17]}, {"a": [9, 40], "b": [40, 5]}])


def _by_value(spec, knob: str, shapes: dict, dtype: str = "float32", base: dict | None = None) -> dict:
    values = knob_space(spec)[knob]
    out = prune(spec, knob, values, generate_kernel(spec, base).knobs, shapes, dtype, 132)
    assert [p.value for p in out] == values and all(p.reason for p in out)
    return {p.value: p for p in out}


def test_knobs_no_stage_reads_and_values_that_change_nothing_are_dropped() -> None:
    tiles = _by_value(SUM0, "BLOCK_M", {"x": [4096, 64]})
    assert tiles[None].kept and all(not tiles[v].kept and "no matmul" in tiles[v].reason for v in (64, 128, 256))
    # an arg-reduction has no split form: every value of split launches the same kernels
    split = _by_value(ALL["argmax1"], "split", {"x": [64, 4096, 3]})
    assert not split[True].kept and "same kernels, tiles and grids as the base" in split[True].reason
    # 64 contiguous kept positions (one block) over 4096 reduced rows: 256K elements stay unsplit
    # under the heuristic (a second launch costs more there); forced, 64 programs share the block
    split = _by_value(SUM0, "split", {"x": [4096, 64]})
    assert not split[False].kept and "same kernels" in split[False].reason
    assert split[True].kept and "split tile 64x64" in split[True].reason and "64 programs" in split[True].reason
    # 64 reduced elements per kept position: a single pass holds 256 kept positions (16 programs)
    # under 16384 or 32768 alike; 8192 halves the tile (32 programs), 4096 halves it again (64), so
    # 8192 leaves SMs idle where 4096 does not
    single = _by_value(SUM0, "MAX_SINGLE_PASS", {"x": [64, 4096]})
    assert not single[32768].kept and "nothing to time" in single[32768].reason
    assert single[4096].kept and "single tile 64x64" in single[4096].reason and "64 programs" in single[4096].reason
    assert not single[8192].kept and "32 programs on 132 SMs" in single[8192].reason


def test_register_budget_and_the_sms() -> None:
    warps = _by_value(SUM0, "num_warps", {"x": [16384, 8]})  # 8 kept positions: a single pass of 1 x 16384
    assert not warps[2].kept and "spills to local memory" in warps[2].reason and "stage 0 (reduce)" in warps[2].reason
    assert not warps[16].kept and "nothing to time" in warps[16].reason  # the heuristic's own 16 warps
    assert warps[8].kept and "programs on 132 SMs" in warps[8].reason
    # a scan of 64 rows of 512: ROW_TILE sets the rows per program, so 1024 (2 rows) launches 32
    # programs where 2048 launches 16 and 16384 two
    tiles = _by_value(ALL["cumsum_reverse"], "ROW_TILE", {"x": [64, 512]})
    assert tiles[1024].kept and "scan tile 2x512 over 4 warps" in tiles[1024].reason and "32 programs" in tiles[1024].reason
    assert not tiles[16384].kept and "2 programs on 132 SMs (< 2 per SM) where another value reaches 32" in tiles[16384].reason


def test_matmul_stage_budgets() -> None:
    got = _by_value(GEMM_SUM, "BLOCK_K", {"a": [4096, 40], "b": [40, 4096]}, "float16")
    assert not got[128].kept and "BLOCK_K=128 > K=40" in got[128].reason
    stages = _by_value(GEMM_SUM, "num_stages", {"a": [8192, 8192], "b": [8192, 8192]}, "float16",
                       base={"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128})
    assert not stages[5].kept and "of shared memory >" in stages[5].reason


@pytest.mark.parametrize("name", ["sum_dim0", "mean12", "max_dim1", "rms_channels", "group_norm3", "cumsum_reverse",
                                  "linear_leaky_sum", "bmm", "mse", "batch_norm_train", "max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("knobs", [{}, {"MAX_SINGLE_PASS": 4096, "ROW_TILE": 1024, "num_warps": 2, "BLOCK_N": 64},
                                   {"split": True, "ROW_TILE": 64, "SPLIT_PER_SM": 2}], ids=str)
def test_launch_model_matches_the_generated_file(name: str, knobs: dict, tmp_path: Path) -> None:
    spec = ALL[name]
    module = import_source(spec.name, generate_kernel(spec, knobs).source, tmp_path)
    analysis = route(spec).served.plan
    seen, flats = set(), set()
    for case in spec.test_cases + [{n: [d * 37 for d in s] for n, s in spec.test_cases[0].items()}]:
        inputs = [torch.empty(case[n]) for n in spec.input_names]
        plan = module._plan(*[a for t in inputs for a in (t.shape, t.stride(), t.dtype)], torch.device("cpu"))
        model = stage_launches(analysis, NdKnobs.model_validate(knobs), case, spec.input_names, True, sms=4)  # the interpreter's
        for grid, meta, split, launch in zip(plan.grids, plan.metas, plan.splits, model):
            if launch.kind == "matmul":
                assert launch.tiles == tuple(meta[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_SIZE_M",
                                                                "num_warps", "num_stages")), (name, case)
                continue
            assert launch.launch is not None
            la = launch.launch
            chunks = split[2][0] if split is not None else 1  # a split stage's grid: kept blocks x n_split
            assert (meta["BLOCK_K"], meta.get("BLOCK_R", 1), meta["num_warps"], grid[0] * chunks, chunks) == \
                   (la.block_r, la.block_c, la.num_warps, la.programs, la.chunks), (name, case)
            assert meta.get("SINGLE", la.path == "single") == (la.path == "single")
            assert (split is not None) == (la.path == "split"), (name, case)
            seen.add(la.path)
            flats.add(meta.get("FLAT"))
    if knobs.get("split") and name not in ("cumsum_reverse", "linear_leaky_sum", "bmm"):
        assert "split" in seen, name  # the forced split reaches every stage with a split form
    if name.endswith("pool2d"):  # 2x3x20x21 pools to rows of 10: the tile runs flat; x37, rows of 369 do not
        assert flats == {True, False}, (name, flats)


def test_a_dispatch_table_routes_each_shape_and_every_route_is_right(tmp_path: Path) -> None:
    spec = ALL["mean12"]
    entries = [DispatchEntry(dtype="float32", shapes=spec.test_cases[0], knobs={"MAX_SINGLE_PASS": 4096, "num_warps": 2},
                             reason="x1.10 over the base (test)"),
               DispatchEntry(dtype="float32", shapes={"x": [64, 512, 64, 64]}, knobs={"ROW_TILE": 1024},
                             reason="x1.05 over the base (test)")]
    kern = generate_kernel(spec, None, dispatch=entries)
    assert kern.dispatch == tuple(entries) and "_DISPATCH = {" in kern.source and "x1.10 over the base" in kern.source
    _matches_snapshot(TUNING_SNAPSHOTS[0], kern.source)
    module = import_source(spec.name, kern.source, tmp_path)
    assert module._route(torch.float32, 2 * 6 * 5, 7)["num_warps"] == 2
    assert module._route(torch.float32, 64 * 512 * 64, 64)["ROW_TILE"] == 1024
    assert module._route(torch.float16, 30, 7) is module._KNOBS
    fn, ref = getattr(module, spec.name), load_reference(spec)
    for i, case in enumerate(spec.test_cases):
        inputs = draw_inputs(spec, case, "float32", 3 + i, "cpu")
        torch.testing.assert_close(fn(*inputs), ref(*inputs), atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="dispatch entry 0.*unknown knob 'algorithm'"):
        generate_kernel(spec, None, dispatch=[DispatchEntry(dtype="float32", shapes=spec.test_cases[0],
                                                             knobs={"algorithm": "online"}, reason="")])


def _matches_snapshot(stem: str, source: str) -> None:
    path = Path(__file__).resolve().parent / "snapshots" / f"{stem}.py"
    if os.environ.get("KERNELGEN_UPDATE_SNAPSHOTS") == "1":
        path.write_text(source)
        return
    want = path.read_text() if path.exists() else ""
    if source != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), source.splitlines(True), f"snapshots/{path.name}", "now"))
        pytest.fail(f"the nd file with a dispatch table differs from its snapshot:\n{diff}\nIf intended: "
                    "KERNELGEN_UPDATE_SNAPSHOTS=1 python3 -m pytest tests/offline/test_nd_tuning.py", pytrace=False)


def test_round_zero_keeps_the_heuristics_and_says_what_they_launch() -> None:
    spec = ALL["sum_dim0"]
    choices = first_choices(spec, 132)
    assert len(choices) == len(spec.effective_perf_cases) * len(spec.dtypes)
    assert all(c.knobs == {} and c.reason.startswith("the file's heuristics: stage 0 (reduce)") for c in choices)
    assert first_kernel(spec).source == generate_kernel(spec).source


def test_a_contiguous_short_kept_dim_keeps_its_sectors(tmp_path: Path) -> None:
    """x.sum(1) over [64, 4096, 16]: the kept 16 are contiguous, so a program reads rows of them, BLOCK_R
    at a time (whole 64-byte rows), not FLAT: a flat tile would give each lane one kept position's
    column, a 32-byte sector read per 4-byte element. Transposed ([64, 16, 4096] summed over the last
    dim is the contiguous reduction), nothing changes either; a strided short kept dim goes flat."""
    spec = make_spec(name="sum_mid", inputs=[{"name": "x"}], dtypes=["float32"],
                     reference="def sum_mid(x):\n    return x.sum(1)\n", test_cases=[{"x": [4, 33, 5]}])
    module = import_source(spec.name, generate_kernel(spec, {}).source, tmp_path)

    def meta(shape, stride=None):
        t = torch.empty(shape) if stride is None else torch.empty_strided(shape, stride)
        plan = module._plan(t.shape, t.stride(), t.dtype, torch.device("cpu"))
        return plan.metas[0]

    assert meta([64, 4096, 16])["FLAT"] is False
    assert meta([64, 4096, 16], stride=(4096 * 16, 1, 4096))["FLAT"] is True  # the kept 16 strided by 4096
