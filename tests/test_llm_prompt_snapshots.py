"""Checked-in generate prompts, as a model sees them, for a convolution, a reduction and a GEMM with an
epilogue (KernelBench-format files of our own, tests/llm_problems.py), on an H100 with measured
ceilings. A change to the templates or to what the prompt derives shows here as a diff of real output.
When the change is intended, refresh the snapshots and commit them with it:

    KERNELGEN_UPDATE_SNAPSHOTS=1 python3 -m pytest tests/test_llm_prompt_snapshots.py
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest
from llm_problems import write_problem

from kernelgen.devices import DeviceFacts, DeviceInfo
from kernelgen.llm.prompts import generation_messages
from kernelgen.spec.given import read_spec
from kernelgen.verify.results import DevicePeaks

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
    assert f"a **{kind}** operator" in user and f"## Advice for a {kind} operator" in user
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
                    "tests/test_llm_prompt_snapshots.py", pytrace=False)


def test_a_convolution_prompt_states_the_tf32_policy_and_what_the_judge_keeps(tmp_path, h100):
    user = generation_messages(read_spec(write_problem(tmp_path, "conv2d_strided")).spec, GPU)[1]["content"]
    assert "Implicit GEMM" in user and "tl.dot" in user and "output pixels x output channels" in user
    assert "`torch.backends.cudnn.allow_tf32` defaults to True" in user and "`KERNELGEN_TF32` is unset" in user
    assert "`conv` (Conv2d): stride=(2, 2), padding=(1, 1), dilation=(1, 1), groups=1" in user
    assert "`conv_weight[2]` = 3, `conv_weight[3]` = 3 (`conv`'s kernel_size)" in user
    assert "pointwise" not in user and "Category" not in user


def test_every_snapshot_has_a_case():
    stale = sorted({p.stem for p in SNAPSHOTS.glob("*.md")} - set(CASES))
    assert not stale, f"snapshots without a case in CASES (delete them): {stale}"
