"""Checked-in generate prompts, as a model sees them, for a convolution, a reduction, a GEMM with an
epilogue, a padded max pool (its output length `x[2] - 13`) and a whole MLP (three GEMMs: a model, its
output rule `[x[0], network_4_weight[0]]`) — KernelBench-format files of our own, tests/support/llm_problems.py —
on an H100 with measured ceilings. A change to the templates or to what the prompt derives shows here as a diff of real output.
When the change is intended, refresh the snapshots and commit them with it:

    KERNELGEN_UPDATE_SNAPSHOTS=1 python3 -m pytest tests/llm/test_prompt_snapshots.py
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from kernelgen.devices import DeviceFacts, DeviceInfo
from kernelgen.llm.prompts import generation_messages
from kernelgen.spec.given import read_spec
from kernelgen.verify.results import DevicePeaks
from tests.support.llm_problems import write_problem

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots" / "prompts"
REFRESH = "KERNELGEN_UPDATE_SNAPSHOTS"
GPU = DeviceInfo("cuda", "cuda", interpreter=False)
H100 = DeviceFacts(kind="cuda", name="NVIDIA H100 80GB HBM3", interpreter=False, sm_count=132, l2_bytes=50 * 1024 * 1024,
                   smem_per_sm_bytes=228 * 1024, smem_per_block_bytes=227 * 1024, regs_per_sm=65536, warp_size=32,
                   compute_capability="9.0", torch_version="2.13.0", triton_version="3.9.0")
PEAKS = DevicePeaks(device_name="NVIDIA H100 80GB HBM3", copy_gbps=3012.4, read_gbps=3350.0, matmul_tflops=721.0,
                    matmul={"bfloat16": 721.0, "float16": 700.0, "float32": 51.0, "tf32": 378.0},
                    measured_at="2026-11-20", torch_version="2.13.0")
# problem -> (the kind its advice is for, its output rule, the output's shape at the performance case)
CASES = {
    "conv2d_strided": ("convolution", "[`x[0]`, `conv_weight[0]`, `(x[2] - conv_weight[2]) // 2 + 2`, "
                                      "`(x[3] - conv_weight[3]) // 2 + 2`]", "[4, 32, 32, 24]"),
    "row_sum_dim": ("reduction", "[`x[0]`, `1`, `x[2]`]", "[64, 1, 384]"),
    "gemm_scale_groupnorm": ("matmul", "[`x[0]`, `gemm_weight[0]`]", "[256, 512]"),
    # the pooling's meta kernel pins the length in the symbolic run: the rule is fitted over the cases
    "max_pool1d": ("pooling", "[`x[0]`, `x[1]`, `x[2] - 13`]", "[2, 3, 1011]"),
    # a model built once per size pins every size: its output's width is the last layer's, fitted
    "mlp": ("model", "[`x[0]`, `network_4_weight[0]`]", "[128, 1024]"),
}


@pytest.fixture
def h100(monkeypatch):  # noqa: ANN001, ANN201
    import kernelgen.llm.devicefacts as devicefacts

    monkeypatch.setattr(devicefacts, "device_facts", lambda device: H100)
    monkeypatch.setattr(devicefacts, "known_peaks", lambda device: PEAKS)
    monkeypatch.delenv("KERNELGEN_TF32", raising=False)


@pytest.mark.parametrize("stem", sorted(CASES))
def test_generate_prompt_matches_its_snapshot(stem, tmp_path, h100):
    spec = read_spec(write_problem(tmp_path, stem)).spec
    user = generation_messages(spec, GPU)[1]["content"]
    kind, rule, at_perf = CASES[stem]
    assert (f"a **{kind}** operator" if kind != "model" else "a whole **model**") in user
    assert f"## Advice for a {kind} operator" in user and "no rule over the input sizes" not in user
    assert f"shape {rule} ({at_perf} at the performance case; checked on every test case)" in user, user
    path = SNAPSHOTS / f"{stem}.md"
    if os.environ.get(REFRESH) == "1":
        path.write_text(user, encoding="utf-8")
        return
    want = path.read_text(encoding="utf-8") if path.exists() else ""
    if user != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), user.splitlines(True), f"snapshots/prompts/{stem}.md",
                                            f"{stem} (rendered now)"))
        pytest.fail(f"the generate prompt for {stem} differs from its snapshot:\n{diff}\nIf this change is intended, "
                    f"refresh the snapshots and commit them with it:\n    {REFRESH}=1 python3 -m pytest "
                    "tests/llm/test_prompt_snapshots.py", pytrace=False)


def test_a_convolution_prompt_states_the_tf32_policy_and_what_the_judge_keeps(tmp_path, h100):
    user = generation_messages(read_spec(write_problem(tmp_path, "conv2d_strided")).spec, GPU)[1]["content"]
    assert "Implicit GEMM" in user and "tl.dot" in user and "output pixels x output channels" in user
    assert "`torch.backends.cudnn.allow_tf32`, on here, PyTorch's default" in user and "`KERNELGEN_TF32` unset" in user
    assert "`conv` (Conv2d): stride=(2, 2), padding=(1, 1), dilation=(1, 1), groups=1" in user
    assert "`conv_weight[2]` = 3, `conv_weight[3]` = 3 (`conv`'s kernel_size)" in user
    assert "pointwise" not in user and "Category" not in user


def test_every_snapshot_has_a_case():
    stale = sorted({p.stem for p in SNAPSHOTS.glob("*.md")} - set(CASES))
    assert not stale, f"snapshots without a case in CASES (delete them): {stale}"


def test_float32_gemm_advice_agrees_with_the_ceiling_it_states(tmp_path, h100):
    """TF32 off (PyTorch's default): the cost lines hold a float32 GEMM to three TF32 products (tf32x3,
    a third of TF32's rate, above FP32's), and the advice names the same, never "leave input_precision
    unset" (IEEE FP32 at 51 TFLOP/s on this H100)."""
    user = generation_messages(read_spec(write_problem(tmp_path, "gemm_scale_groupnorm")).spec, GPU)[1]["content"]
    assert "tf32x3: a third of the TF32 rate" in user.split("## What the performance case costs at best")[1].split("##")[0]
    assert 'pass `input_precision="tf32x3"` to `tl.dot`' in user and "(tf32x3: a third of the TF32 rate, above FP32's; TF32 off, 126 TFLOP/s)" in user
    assert "leave `input_precision` unset" not in user and "Float32 convolutions" not in user  # no convolution here


def test_the_mlp_is_a_model_of_three_gemms_that_may_take_several_kernels(tmp_path, h100):
    user = generation_messages(read_spec(write_problem(tmp_path, "mlp")).spec, GPU)[1]["content"]
    assert "a whole **model**, 3 GEMMs (addmm) in a chain" in user and "several kernels and intermediate buffers" in user
    assert "matmul operator" not in user and "### Layers of kind matmul" in user and "`torch.empty`" in user
