"""Checked-in kernels: what the offline generator writes for one example of every family.

A change to the templates or the emitters shows here as a diff of real output, for a reviewer to
read. When the change is intended, refresh the snapshots and commit them with it:

    KERNELGEN_UPDATE_SNAPSHOTS=1 python3 -m pytest tests/offline/test_offline_snapshots.py
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from kernelgen.offline import generate_kernel
from tests.support.offline_check import example

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
REFRESH = "KERNELGEN_UPDATE_SNAPSHOTS"
# snapshot file stem -> (example spec, knobs): every family once with the defaults, and each of the
# launch macro's autotuned forms (frame, heuristics, matmul) once
CASES = {
    "pointwise_broadcast": ("broadcast", {}),
    "pointwise_swiglu_1d_autotune": ("swiglu", {"grid": "1d", "autotune": True}),
    "row_reduction_row_sum": ("row_sum", {}),
    "softmax_softmax": ("softmax", {}),
    "softmax_log_softmax_autotune": ("log_softmax", {"autotune": True}),
    "layernorm_layer_norm": ("layer_norm", {}),
    "rmsnorm_rms_norm": ("rms_norm", {}),
    "matmul_linear_bias_gelu": ("linear_bias_gelu", {}),
    "matmul_matmul_leakyrelu_autotune": ("matmul_leakyrelu", {"autotune": True}),
}


@pytest.mark.parametrize("stem", sorted(CASES))
def test_generated_kernel_matches_its_snapshot(stem: str) -> None:
    spec_name, knobs = CASES[stem]
    kern = generate_kernel(example(spec_name), knobs)
    assert stem.startswith(kern.family + "_"), f"{stem}: {spec_name} is in the {kern.family} family now"
    path = SNAPSHOTS / f"{stem}.py"
    if os.environ.get(REFRESH) == "1":
        path.write_text(kern.source)
        return
    want = path.read_text() if path.exists() else ""
    if kern.source != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), kern.source.splitlines(True),
                                            f"snapshots/{stem}.py (checked in)", f"{spec_name} {knobs} (generated now)"))
        pytest.fail(f"the generated {spec_name} kernel differs from its snapshot:\n{diff}\n"
                    f"If this change is intended, refresh the snapshots and commit them with it:\n"
                    f"    {REFRESH}=1 python3 -m pytest tests/offline/test_offline_snapshots.py", pytrace=False)


def test_every_snapshot_has_a_case() -> None:
    # nd_*.py and conv_*.py belong to test_nd_families.py and test_conv_family.py, which check their own
    stale = sorted({p.stem for p in SNAPSHOTS.glob("*.py") if not p.stem.startswith(("nd_", "conv_"))} - set(CASES))
    assert not stale, f"snapshots without a case in CASES (delete them): {stale}"
