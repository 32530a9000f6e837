"""Round 0 from the analysis (kernelgen.offline.rows.round0 through kernelgen.offline.first_kernel): each
perf case x dtype gets the row algorithm its shape calls for, in a dispatch table whose routes are
all correct, and the files that need nothing keep their heuristic."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from kernelgen.offline import first_choices, first_kernel, generate_kernel  # noqa: E402
from kernelgen.spec.reference import load_reference  # noqa: E402
from tests.support.offline_check import example, import_source  # noqa: E402


def test_a_50257_column_perf_case_gets_the_online_algorithm_on_an_l2_sized_grid(tmp_path: Path) -> None:
    spec = example("log_softmax")
    kern = first_kernel(spec, sm_count=132)
    long_rows = [e for e in kern.dispatch if e.shapes["x"] == [4096, 50257]]
    assert {e.dtype for e in long_rows} == set(spec.dtypes)  # float16 too, though it is not a perf dtype
    for e in long_rows:
        assert e.knobs["algorithm"] == "online" and e.knobs["persistent"] is True, e
        assert e.knobs["LOOP_BLOCK"] == (4096 if e.dtype == "float32" else 8192)
        assert "round 0, from the analysis" in e.reason and "half a 50 MB L2" in e.reason
    short = [e for e in kern.dispatch if e.shapes["x"] == [16384, 4096]]
    assert short and all(e.knobs == {} for e in short)  # pinned to the heuristic: a 4096 row fits registers
    assert "def _log_softmax_kernel_online_persistent(" in kern.source and "device_l2_bytes(device, " in kern.source
    assert "# float32, x [4096, 50257] (rows x cols 4096 x 50257): algorithm=\"online\"" in kern.source

    # every route is correct: a shape routed to the online entry, and one routed to the heuristic
    module = import_source(spec.name, kern.source, tmp_path)
    reference = load_reference(spec)
    for shape in ([5, 20000], [64, 3000]):
        x = torch.randn(shape) * 4
        torch.testing.assert_close(module.log_softmax(x), reference(x), atol=1e-4, rtol=1e-4)
    plan = next(iter(module._PLANS.values()))
    assert plan.kernel.__name__ == "_log_softmax_kernel_online_persistent"


def test_few_long_rows_split_and_rows_that_fit_registers_stay_single() -> None:
    spec = example("softmax").model_copy(update={"perf_cases": [{"x": [32, 32000]}, {"x": [64, 16384]}, {"x": [1, 4096]}]})
    got = {(c.shapes["x"][0], c.dtype): c for c in first_choices(spec, sm_count=132)}
    assert got[32, "bfloat16"].knobs == {"algorithm": "split"} and "8 per row" in got[32, "bfloat16"].reason
    # 64 x 16384 fp32 is 4 MB over 64 rows: split; a 16384 row of 1 program per row fits 16 warps' registers
    assert got[64, "float32"].knobs == {"algorithm": "split"}
    assert got[1, "float32"].knobs == {}  # 16 KB: a second launch would cost more than the idle SMs
    wide = example("softmax").model_copy(update={"perf_cases": [{"x": [4096, 16384]}]})
    (single, *_) = first_choices(wide, sm_count=132)
    assert single.knobs == {"MAX_SINGLE_PASS": 16384, "num_warps": 16} and "2 x 32 fp32 registers" in single.reason


def test_reductions_that_read_once_keep_their_heuristic_and_big_fp32_pointwise_frames_take_64kb() -> None:
    row_sum = first_kernel(example("row_sum"), sm_count=132)
    assert row_sum.dispatch == ()  # one reduction, no per-element output: looped reads each row once
    # KernelBench's elementwise frame (4096 x 393216 = 1.6G elements) takes 64 KB; the examples' 134M keep 16 KB
    big = example("gelu").model_copy(update={"perf_cases": [{"x": [4096, 393216]}]})
    gelu = first_kernel(big)
    assert {e.dtype: e.knobs for e in gelu.dispatch if e.dtype == "float32"} == {"float32": {"TILE_BYTES": 65536}}
    assert all(e.knobs == {} for e in gelu.dispatch if e.dtype != "float32")
    assert first_kernel(example("gelu")).source == generate_kernel(example("gelu")).source
    small = example("gelu").model_copy(update={"perf_cases": [{"x": [64, 1000]}]})
    assert first_kernel(small).source == generate_kernel(small).source  # 64K elements: the file's 16 KB tiles
