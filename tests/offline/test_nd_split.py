"""Split reductions of the nd family (kernelgen.offline.stages.emit_split): a kept block's reduced
elements shared among programs, partials in a workspace, a launch per reduction level and one that
combines and writes. Each split form gives the reference's answer on awkward shapes (no dim a power
of two, shares of unequal length, outer reduced dims), transposed inputs and 16-bit dtypes, under
the runtime guard; the plan really splits; and round 0 chooses the split per shape (first_choices)."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelgen.offline import first_choices, first_kernel, generate_kernel  # noqa: E402
from kernelgen.spec import draw_inputs  # noqa: E402
from kernelgen.spec.reference import load_reference  # noqa: E402
from tests.support.nd_specs import ALL  # noqa: E402
from tests.support.offline_check import import_source, make_spec, run_guarded  # noqa: E402

X = [{"name": "x"}]


def _spec(name: str, body: str, cases: list, inputs: list | None = None, **fields):
    inputs = inputs or X
    args = ", ".join(i["name"] for i in inputs)
    return make_spec(name=name, inputs=inputs, reference=f"def {name}({args}):\n    return {body}\n", test_cases=cases,
                     **fields)


EXTRA = {
    # two levels (max, then the sum of exp) and a write pass, reduced over a leading dim
    "softmax_dim0": _spec("softmax_dim0", "torch.softmax(x, 0)", [{"x": [700, 3]}, {"x": [37, 5]}]),
    # two levels down to a scalar
    "logsumexp_all": _spec("logsumexp_all", "torch.logsumexp(x.reshape(-1), 0)", [{"x": [33, 45]}]),
    # a variance (three partials: count, mean, M2) over an outer and an inner reduced dim
    "var_dims02": _spec("var_dims02", "torch.var(x, dim=(0, 2))", [{"x": [9, 3, 97]}, {"x": [5, 2, 301]}]),
    "std_all": _spec("std_all", "torch.std(x)", [{"x": [17, 61]}]),
}
SPLIT_SPECS = ["mse", "frobenius", "kl_div", "hinge", "batch_norm_train", "group_norm3", "instance_norm", "prod1",
               "max_dim1", "mean12", "sum_dim0", *EXTRA]
SETTINGS = [{"split": True, "ROW_TILE": 64}, {"split": True, "ROW_TILE": 256, "num_warps": 2, "SPLIT_PER_SM": 16}]
# cases beside the spec's own whose reduced elements take several 64-element steps
LONGER = {"kl_div": [{"p": [7, 80], "t": [7, 80]}], "hinge": [{"p": [6, 90], "t": [90]}],
          "prod1": [{"x": [2, 70, 3]}], "max_dim1": [{"x": [2, 150, 3]}]}


def _spec_of(name: str):
    return EXTRA.get(name) or ALL[name]


def _transposed(t: torch.Tensor) -> torch.Tensor:
    if t.dim() < 2 or not t.dtype.is_floating_point:
        return t
    return t.permute(*reversed(range(t.dim()))).contiguous().permute(*reversed(range(t.dim())))


def _splits(module, spec, case) -> list:
    ts = [torch.empty(case[n]) for n in spec.input_names]
    plan = module._plan(*[a for t in ts for a in (t.shape, t.stride(), t.dtype)], torch.device("cpu"))
    return [s for s in plan.splits if s is not None]


@pytest.mark.parametrize("knobs", SETTINGS, ids=["tile64", "tile256-2warps"])
@pytest.mark.parametrize("name", SPLIT_SPECS)
def test_every_split_form_computes_the_reference(name: str, knobs: dict, tmp_path: Path) -> None:
    spec = _spec_of(name)
    kern = generate_kernel(spec, knobs)
    assert "_split_kernel" in kern.source, f"{name}: no split form"
    module = import_source(spec.name, kern.source, tmp_path)
    fn, ref = getattr(module, spec.name), load_reference(spec)
    split_cases = 0
    for ci, case in enumerate(spec.test_cases + LONGER.get(name, [])):
        split_cases += bool(_splits(module, spec, case))
        for dtype, layout in (("float32", "contiguous"), ("float32", "transposed"), ("float16", "contiguous")):
            if dtype not in spec.dtypes:
                continue
            inputs = draw_inputs(spec, case, dtype, 11 + ci, "cpu")
            if layout == "transposed":
                inputs = [_transposed(t) for t in inputs]
            expected = ref(*inputs, **spec.param_defaults)
            got = run_guarded(fn, inputs)
            tol = spec.tolerance_for(dtype)
            assert got.shape == expected.shape and got.dtype == expected.dtype
            torch.testing.assert_close(got.float(), expected.float(), atol=tol.atol, rtol=tol.rtol,
                                       msg=lambda m: f"{name} {knobs} case {ci} {dtype} {layout}: {m}")
    assert split_cases or knobs is not SETTINGS[0], f"{name}: no test case took the split path"


def test_a_split_is_deterministic_and_matches_the_unsplit_kernel(tmp_path: Path) -> None:
    spec = EXTRA["var_dims02"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    split = getattr(import_source(spec.name, generate_kernel(spec, SETTINGS[0]).source, tmp_path / "a"), spec.name)
    plain = getattr(import_source(spec.name, generate_kernel(spec, {"split": False}).source, tmp_path / "b"), spec.name)
    x = draw_inputs(spec, spec.test_cases[1], "float32", 5, "cpu")[0]
    first = split(x)
    assert torch.equal(first, split(x))  # the partials combine in one fixed order
    torch.testing.assert_close(first, plain(x), atol=1e-5, rtol=1e-5)


def test_stages_without_a_split_form_keep_one_kernel() -> None:
    int_sum = _spec("int_sum", "x.sum(0)", [{"x": [9, 5]}], inputs=[{"name": "x", "dtype": "int64", "init": "randint(0, 9)"}],
                    dtypes=["float32"])
    for spec in (ALL["argmax1"], int_sum, ALL["cumsum_reverse"]):
        assert "_split_kernel" not in generate_kernel(spec, {"split": True}).source, spec.name


def _at(spec, perf: dict):
    return spec.model_copy(update={"perf_cases": [perf], "dtypes": ["float32", "bfloat16"]})


def test_round_zero_splits_where_the_kept_blocks_leave_sms_idle() -> None:
    # a loss down to a scalar over 1G elements: one kept block, 528 programs share it on 132 SMs
    mse = first_choices(_at(ALL["mse"], {"p": [32768, 32768], "t": [32768, 32768]}), 132)
    assert [c.knobs for c in mse] == [{"split": True}] * 2
    assert "1 kept block(s) on 132 SMs; each shared by 528 programs" in mse[0].reason
    # per-channel statistics of a batch norm (then its write pass): 64 channels, 33 programs each (16 per SM)
    bn = first_choices(_at(ALL["batch_norm_train"], {"x": [64, 64, 512, 512], "w": [64], "b": [64], "rm": [64],
                                                     "rv": [64]}), 132)
    assert bn[0].knobs == {"split": True} and "64 kept block(s)" in bn[0].reason and "2112 programs" in bn[0].reason
    # an instance norm has 7168 kept blocks: enough programs, no split; on 16 SMs neither
    inorm = _at(ALL["instance_norm"], {"x": [112, 64, 512, 512]})
    assert all(c.knobs == {} and "looped" in c.reason and "split" not in c.reason for c in first_choices(inorm, 132))
    # a small loss stays in one launch: a second costs more than idle SMs do there
    assert first_choices(_at(ALL["mse"], {"p": [64, 1000], "t": [64, 1000]}), 132)[0].knobs == {}


def test_round_zero_reads_a_contiguous_kept_dim_wide() -> None:
    # mean over dim 1 of [128, 4096, 4095]: the kept dim 4095 is contiguous; a single pass would hold
    # 4 of it per reduced row (16 of a 32-byte sector), the loop reads 128 of it by 128 rows per step
    spec = _at(_spec("mean_dim1", "x.mean(1)", [{"x": [3, 7, 5]}]), {"x": [128, 4096, 4095]})
    (choice, _) = first_choices(spec, 132)
    assert choice.knobs == {"ROW_TILE": 16384} and "looped, 128x128 tile over 16 warps, 4096 programs" in choice.reason
    # an argmax there keeps 32 rows per step (its int64 index per lane doubles the registers)
    arg = _at(_spec("argmax_dim1", "x.argmax(1)", [{"x": [3, 7, 5]}]), {"x": [128, 4096, 4095]})
    (choice, _) = first_choices(arg, 132)
    assert choice.knobs == {} and "looped, 128x32 tile over 8 warps" in choice.reason
    # a group norm's 112 x 3 kept blocks already fill 132 SMs (2 per SM and more): no split
    gn = _at(ALL["group_norm3"], {"x": [112, 63, 512, 512], "w": [63], "b": [63]})
    assert first_choices(gn, 132)[0].knobs == {}


def test_round_zero_leaves_a_per_stage_split_to_the_file() -> None:
    # a sum of everything (split) beside row sums of 8192 rows (enough programs): forcing split on
    # the route would split the row sums too, so the file's per-stage heuristic keeps the choice
    spec = _at(_spec("sum_and_rows", "x.sum(), x.sum(1)", [{"x": [5, 7]}], outputs=[{"name": "a"}, {"name": "b"}]),
               {"x": [8192, 4096]})
    choice = first_choices(spec, 132)[0]
    assert choice.knobs == {} and "which the file's heuristics choose per stage" in choice.reason
    assert first_kernel(spec).source == generate_kernel(spec).source
