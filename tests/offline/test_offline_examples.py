"""Every example spec in operator_specs/: the offline kernel matches the reference on every case x dtype."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from kernelgen.offline import generate_kernel, knob_space  # noqa: E402
from kernelgen.spec import load_spec  # noqa: E402
from kernelgen.verify.judge.staticcheck import check_source  # noqa: E402
from tests.support.offline_check import SPECS as SPEC_DIR, check_kernel  # noqa: E402

SPECS = sorted(SPEC_DIR.glob("*.yaml"))
FAMILY = {
    "broadcast": "pointwise", "gelu": "pointwise", "swiglu": "pointwise", "clamp_scale": "pointwise",
    "scale_shift": "pointwise", "row_sum": "row_reduction", "row_mean": "row_reduction",
    "row_max": "row_reduction", "softmax": "softmax", "log_softmax": "softmax", "layer_norm": "layernorm",
    "rms_norm": "rmsnorm", "matmul_leakyrelu": "matmul", "linear_bias_gelu": "matmul",
}


def test_at_least_twelve_examples_cover_every_family() -> None:
    names = {p.stem for p in SPECS}
    assert len(names) >= 12
    assert set(FAMILY) <= names
    for path in SPECS:
        spec = load_spec(path)
        assert spec.perf_cases and spec.description
        if spec.category == "matmul":
            shapes = {tuple(c[spec.inputs[0].name]) for c in spec.perf_cases}
            assert {(4096, 4096), (8192, 8192)} <= shapes and spec.flops


@pytest.mark.parametrize("path", [p for p in SPECS if p.stem in FAMILY], ids=lambda p: p.stem)
def test_example_matches_reference(path: Path, tmp_path: Path) -> None:
    spec = load_spec(path)
    kern = check_kernel(spec, tmp_path)
    assert kern.family == FAMILY[spec.name]
    assert kern.summary.startswith(kern.family)
    assert set(knob_space(spec)) >= {"num_warps", "autotune"}


@pytest.mark.parametrize("path", [p for p in SPECS if p.stem in FAMILY], ids=lambda p: p.stem)
def test_generated_file_follows_the_rules(path: Path) -> None:
    spec = load_spec(path)
    src = generate_kernel(spec).source
    imports = {line.split()[1] for line in src.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"functools", "torch", "triton", "triton.language", "math", "typing", "kernelgen.runtime.v1"}
    assert src.index(f"def _{spec.name}_kernel(") < src.index(f"def {spec.name}({spec.signature}):")
    assert "try:" not in src and "tl.math.tanh" not in src
    start = src.index(f"def {spec.name}(")
    wrapper = src[start:src.index("\n\n\n", start)]  # the kernels first, then the wrapper, then the host path
    for banned in (".to(", ".sum(", "torch.where", "torch.exp", ".float()", "torch.matmul"):
        assert banned not in wrapper, banned
    compile(src, f"{spec.name}_triton.py", "exec")
    assert check_source(src, spec.name) == []  # KernelGen's static checker accepts its own kernels
