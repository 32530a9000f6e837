"""Inputs of different float dtypes: the generated wrapper gives the output the dtype PyTorch's
promotion gives the reference (x float16 + bias float32 -> float32), learnt from the reference
itself; where the reference cannot show it, the wrapper refuses mixed dtypes with a clear error.
Either way only views, allocations and the launch run in the wrapper (the runtime guard)."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelgen.offline import generate_kernel  # noqa: E402
from kernelgen.spec import OperatorSpec  # noqa: E402
from kernelgen.spec.reference import load_reference  # noqa: E402
from tests.support.offline_check import example, import_source, make_spec, run_guarded  # noqa: E402

F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


def _kernel(spec: OperatorSpec, tmp_path: Path):
    return getattr(import_source(spec.name, generate_kernel(spec).source, tmp_path), spec.name)


@pytest.mark.parametrize(
    "name,shapes,dtypes",
    [
        ("broadcast", [(4, 33), (33,)], [F16, F32]),  # float32 out: PyTorch promotes x + bias
        ("broadcast", [(4, 33), (33,)], [F32, F16]),
        ("swiglu", [(3, 40), (3, 40)], [F16, BF16]),  # float16 with bfloat16: float32
        ("scale_shift", [(5, 17), (17,), (17,)], [F16, F16, F32]),
        ("rms_norm", [(6, 50), (50,)], [F16, F32]),  # `(...).to(x.dtype)`: float16 out, not refused
        ("layer_norm", [(6, 50), (50,), (50,)], [F16, F32, F32]),  # PyTorch keeps x's dtype here
        ("linear_bias_gelu", [(20, 24), (24, 12), (12,)], [F16, F16, F32]),  # the epilogue promotes
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_output_dtype_follows_pytorch_promotion(name: str, shapes: list, dtypes: list, tmp_path: Path) -> None:
    spec = example(name)
    torch.manual_seed(0)
    inputs = [torch.randn(s).to(d) for s, d in zip(shapes, dtypes)]
    expected = load_reference(spec)(*inputs, **spec.param_defaults)
    got = run_guarded(_kernel(spec, tmp_path), inputs)
    assert got.dtype == expected.dtype, f"{name} {dtypes}: {got.dtype}, PyTorch gives {expected.dtype}"
    torch.testing.assert_close(got.float(), expected.float(), atol=2e-2, rtol=1e-2)


def test_one_dtype_costs_one_comparison_and_keeps_it(tmp_path: Path) -> None:
    fn = _kernel(example("broadcast"), tmp_path)
    x, bias = torch.randn(4, 33, dtype=F16), torch.randn(33, dtype=F16)
    assert run_guarded(fn, [x, bias]).dtype == F16


def test_non_float_inputs_to_a_promoting_output_are_refused(tmp_path: Path) -> None:
    fn = _kernel(example("broadcast"), tmp_path)
    with pytest.raises(ValueError, match=r"expected float tensors, got x=torch.int32, bias=torch.float32"):
        fn(torch.ones(4, 33, dtype=torch.int32), torch.randn(33))


def test_mixed_dtypes_are_refused_where_the_reference_cannot_show_its_promotion(tmp_path: Path) -> None:
    # This reference will not run in float16, so how it promotes mixed dtypes cannot be learnt.
    spec = make_spec(name="strict", inputs=[{"name": "x"}, {"name": "y"}], dtypes=["float32"],
                     reference=("def strict(x, y):\n"
                                "    if x.dtype != torch.float32:\n"
                                "        raise TypeError('float32 only')\n"
                                "    return x * y\n"),
                     test_cases=[{"x": [4, 9], "y": [9]}])
    fn = _kernel(spec, tmp_path)
    x, y = torch.randn(4, 9), torch.randn(9)
    torch.testing.assert_close(run_guarded(fn, [x, y]), x * y)
    with pytest.raises(ValueError) as err:
        fn(x, y.half())
    msg = str(err.value)
    assert "strict: x is torch.float32, y is torch.float16" in msg and "y.to(x.dtype)" in msg
