"""The judge's special-value cases (kernelgen.verify.judge.inputs.special_values): the values a wrong kernel
from an LLM needs to show — negated, zeros and ties, large and tiny magnitudes, infinities — each kept
only where the reference is defined and finite on it, checked on the reference first.

KernelBench draws `torch.rand`: a max pool padding with 0 instead of -inf passed every check drawn
that way. The end-to-end refusal of that kernel, through the LLM path, is in
tests/llm/test_kernelbench_e2e.py; here the cases themselves, on the public planning and drawing
functions, without running a kernel (fast)."""

from __future__ import annotations

import math

import pytest
import torch

from kernelgen.spec import validate_spec_data
from kernelgen.spec.given import read_spec
from kernelgen.verify.judge.inputs import SPECIAL_CASES, CheckCase, draw, plan_checks, tolerance_of
from tests.support.llm_problems import write_problem


def _spec(reference: str, name: str = "op", init: str = "rand", test_case: list[int] | None = None):
    return validate_spec_data({"name": name, "description": name, "category": "other",
                               "inputs": [{"name": "x", "init": init}], "outputs": [{"name": "out"}],
                               "reference": reference, "dtypes": ["float32"],
                               "test_cases": [{"x": test_case or [4, 64]}]}, run_reference=False)


def _special(spec, variant: str) -> CheckCase:
    plan = plan_checks(spec, seeds=(0,), base=7, interpreter=True)
    return next(c for c in plan.cases if c.variant == variant)


def test_every_special_case_is_planned_beside_the_spec_draw(tmp_path):
    spec = read_spec(write_problem(tmp_path, "max_pool1d")).spec
    plan = plan_checks(spec, seeds=(0, 1, 2), base=7, interpreter=True)
    planned = [c.variant for c in plan.cases if c.dtype == "float32"]
    assert [v for v in planned if v in SPECIAL_CASES] == list(SPECIAL_CASES)
    assert "" in planned and "scaled x16" in planned  # the spec's own draw and the earlier generated cases stay
    # each is one seed of one case per deciding dtype; the reported dtypes get none on the interpreter
    assert all(c.decides and len(c.seeds) == 1 for c in plan.cases if c.variant in SPECIAL_CASES)


def test_on_the_interpreter_one_deciding_dtype_gets_them_on_a_gpu_every_one():
    spec = _spec("def op(x):\n    return x * 2\n").model_copy(update={"dtypes": ["float32", "float16"]})
    for interpreter, dtypes in ((True, ["float32"]), (False, ["float32", "float16"])):
        plan = plan_checks(spec, seeds=(0,), base=1, interpreter=interpreter)
        assert sorted({c.dtype for c in plan.cases if c.variant in SPECIAL_CASES}) == sorted(dtypes)


def test_the_values_each_case_holds(tmp_path):
    spec = read_spec(write_problem(tmp_path, "max_pool1d")).spec
    plain = draw(spec, _special(spec, "negated"), 11, "cpu")[0]
    assert (plain <= 0).all() and (plain < 0).any()  # every sign flipped: torch.rand's draw is non-negative
    ties = draw(spec, _special(spec, "zeros and ties"), 11, "cpu")[0]
    assert (ties == 0).any() and (ties < 0).any() and (ties > 0).any()
    assert ties.unique().numel() < ties.numel() // 10  # quarters: many equal values
    assert torch.equal(ties * 4, torch.round(ties * 4))
    large = draw(spec, _special(spec, "large magnitudes"), 11, "cpu")[0]
    tiny = draw(spec, _special(spec, "tiny magnitudes"), 11, "cpu")[0]
    assert large.abs().max() > 500 and tiny.abs().max() < 1e-3
    inf = draw(spec, _special(spec, "infinities"), 11, "cpu")[0]
    # +inf would make a window's max +inf: only -inf is kept, where every window still has a finite max
    assert torch.isneginf(inf).sum() == inf.numel() // 16 and not torch.isposinf(inf).any()
    # the same seed, the same inputs: the verdict of a kernel is reproducible
    assert torch.equal(draw(spec, _special(spec, "infinities"), 11, "cpu")[0], inf)


def test_both_infinities_where_the_reference_stays_finite():
    spec = _spec("def op(x):\n    return torch.softmax(torch.where(torch.isinf(x), -x.abs(), x), dim=-1)\n")
    x = draw(spec, _special(spec, "infinities"), 3, "cpu")[0]
    assert torch.isposinf(x).any() and torch.isneginf(x).any()


def test_a_case_the_reference_is_not_finite_on_is_refused_with_why():
    spec = _spec("def op(x):\n    return torch.log(x)\n")
    with pytest.raises(ValueError, match="the reference is not finite on them .* inf or NaN"):
        draw(spec, _special(spec, "negated"), 3, "cpu")
    x = draw(spec, _special(spec, "large magnitudes"), 3, "cpu")[0]  # log of large values is finite
    assert x.max() > 100


def test_only_the_first_input_changes_where_changing_all_is_not_finite():
    spec = validate_spec_data({"name": "div", "description": "x / sqrt(v)", "category": "other",
                               "inputs": [{"name": "x", "init": "randn"}, {"name": "v", "init": "uniform(0.5, 1.5)"}],
                               "outputs": [{"name": "out"}], "reference": "def div(x, v):\n    return x / torch.sqrt(v)\n",
                               "dtypes": ["float32"], "test_cases": [{"x": [8, 16], "v": [8, 16]}]}, run_reference=False)
    check = _special(spec, "negated")
    x, v = draw(spec, check, 5, "cpu")
    x0, v0 = draw(spec, CheckCase(0, check.shapes, "float32"), 5, "cpu")
    assert torch.equal(x, -x0) and torch.equal(v, v0)  # a negative variance has no square root: v kept as drawn


def test_no_special_case_without_a_continuous_input_or_a_reference():
    ints = validate_spec_data({"name": "ix", "description": "x + 1", "category": "pointwise",
                               "inputs": [{"name": "x", "dtype": "int64", "init": "randint(0, 9)"}], "outputs": [{"name": "out"}],
                               "reference": "def ix(x):\n    return x + 1\n", "dtypes": ["float32"],
                               "test_cases": [{"x": [4, 8]}]}, run_reference=False)
    assert not [c for c in plan_checks(ints, seeds=(0,), base=1, interpreter=True).cases if c.variant in SPECIAL_CASES]
    llm_baseline = _spec("def op(x):\n    return x\n").model_copy(update={"reference": None})
    assert not [c for c in plan_checks(llm_baseline, seeds=(0,), base=1, interpreter=True).cases if c.variant in SPECIAL_CASES]


def test_a_large_magnitude_widens_the_absolute_tolerance_as_a_scaled_case_does():
    spec = _spec("def op(x):\n    return x * 2\n")
    large = tolerance_of(spec, _special(spec, "large magnitudes"))
    assert large.atol == spec.tolerance_for("float32").atol * 2.0 ** 20 and math.isclose(large.rtol, 1e-4)
    assert tolerance_of(spec, _special(spec, "tiny magnitudes")) == spec.tolerance_for("float32")
