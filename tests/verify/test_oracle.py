"""The precision oracle (kernelgen.verify.judge.oracle) at the level of one output: a kernel is measured
against the reference run in float64, and passes within the dtype's tolerance of it or no worse than a
stated multiple of eager's own error; NaN/Inf rules stay as they were."""

from __future__ import annotations

import pytest
import torch

from kernelgen.spec import DEFAULT_TOLERANCES, ToleranceSpec
from kernelgen.verify.judge import oracle
from kernelgen.verify.judge.compare import compare

FP16 = DEFAULT_TOLERANCES["float16"]


def _cancelling(n: int = 4096, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """x ~ 100, y in [0, 1): (x + y - x) * 64 loses y's low bits in float16 (ulp 0.0625 at 100)."""
    g = torch.Generator().manual_seed(seed)
    x = (100 + torch.randn(n, generator=g)).half()
    y = torch.rand(n, generator=g).half()
    return x, y


def _op(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x + y - x) * 64


def test_a_16bit_reference_is_wrong_where_a_float32_kernel_is_right():
    x, y = _cancelling()
    eager = _op(x, y)  # rounds x + y to float16 first
    kernel = _op(x.float(), y.float()).half()  # float32 inside, rounded once
    truth, precision = oracle.truth(_op, [x, y], {}, (eager,))
    assert precision == "float64" and truth[0].dtype == torch.float64
    assert not compare(kernel, eager, FP16).passed  # the old rule: failed against eager's rounding
    c = compare(kernel, eager, FP16, truth=truth[0], oracle=precision)
    assert c.passed and c.rule == "tolerance" and c.oracle == "float64"
    assert c.truth_max_err < 0.05 < c.eager_max_err  # both errors in the verdict


def test_a_kernel_worse_than_eager_fails_and_the_message_shows_both_errors():
    x, y = _cancelling()
    eager = _op(x, y)
    truth, precision = oracle.truth(_op, [x, y], {}, (eager,))
    worse = (torch.round(_op(x.float(), y.float()) / 32) * 32).half()  # steps of 32, eager's are of 4
    c = compare(worse, eager, FP16, truth=truth[0], oracle=precision)
    assert not c.passed
    assert c.truth_max_err > 3 * c.eager_max_err or c.truth_rmse > 3 * c.eager_rmse
    assert "float64 truth" in c.message and ", eager " in c.message and "3x eager's error (max/rms: kernel" in c.message


def test_no_worse_than_eager_passes_where_neither_meets_the_tolerance():
    """A tolerance no float16 rounding meets: eager's own error decides (3x, Inductor's multiplier)."""
    tight = ToleranceSpec(atol=1e-6, rtol=1e-6)
    x = torch.linspace(0.1, 3.0, 2048, dtype=torch.float64)
    eager = (x * 3).half()
    c = compare((x * 3).half(), eager, tight, truth=x * 3, oracle="float64")
    assert c.passed and c.rule == "eager-multiple"
    quantised = (torch.round(x * 3 * 64) / 64).half()  # 1/64 steps, 16x float16's ulp here
    assert not compare(quantised, eager, tight, truth=x * 3, oracle="float64").passed


def test_one_wrong_element_of_many_fails_though_the_rmse_rule_alone_would_pass_it():
    x = torch.linspace(0.1, 3.0, 100_000, dtype=torch.float64)
    eager = (x * 3).half()
    kernel = eager.clone()
    kernel[5] += 1.0
    c = compare(kernel, eager, FP16, truth=x * 3, oracle="float64")
    assert c.truth_rmse <= 3 * c.eager_rmse + FP16.atol / 10  # Inductor's rule alone would pass it
    assert not c.passed and c.worst_index == [5]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nonfinite_where_eager_is_finite_never_passes_against_the_truth_either(bad):
    truth = torch.linspace(-2, 2, 64, dtype=torch.float64)
    eager = truth.half()
    kernel = eager.clone()
    kernel[3] = bad
    c = compare(kernel, eager, ToleranceSpec(atol=1e30, rtol=1e30), truth=truth, oracle="float64")
    assert not c.passed and c.nonfinite == 1


def test_where_eager_overflows_a_finite_value_near_the_truth_passes():
    truth = torch.tensor([1.0, 60000.0], dtype=torch.float64)
    eager = torch.tensor([1.0, float("inf")], dtype=torch.float16)  # an intermediate overflowed
    assert compare(truth.half(), eager, FP16, truth=truth, oracle="float64").passed
    assert not compare(torch.tensor([1.0, 1.0]).half(), eager, FP16, truth=truth, oracle="float64").passed


def test_truth_falls_back_to_float32_where_the_reference_has_no_float64_and_skips_integers():
    def no_double(x):
        if x.dtype == torch.float64:
            raise RuntimeError('"foo" not implemented for \'Double\'')
        return x * 2, x.argmax(-1)

    x = torch.randn(4, 8).half()
    expected = no_double(x)
    truth, precision = oracle.truth(no_double, [x], {}, expected)
    assert precision == "float32" and truth[0] is not None and truth[1] is None


def test_float32_outputs_get_a_float64_truth_and_float64_ones_none():
    x = torch.randn(8)
    assert oracle.truth(lambda t: t * 3, [x], {}, (x * 3,))[1] == "float64"
    assert oracle.truth(lambda t: t * 3, [x.double()], {}, (x.double() * 3,)) == ((None,), "")
