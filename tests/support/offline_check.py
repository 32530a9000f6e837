"""Shared by the offline-generator tests: build specs, import a generated kernel file, and compare
it with the reference on random inputs (every case x dtype), the way a user's accuracy file would."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from kernelgen.offline import OfflineKernel, generate_kernel  # noqa: E402
from kernelgen.spec import OperatorSpec, draw_inputs, load_spec, validate_spec_data  # noqa: E402
from kernelgen.spec.reference import load_reference  # noqa: E402
from tests.support.paths import SPECS  # noqa: E402


def example(name: str) -> OperatorSpec:
    """One of the example specs in operator_specs/."""
    return load_spec(SPECS / f"{name}.yaml")


def make_spec(**fields) -> OperatorSpec:
    data = {"outputs": [{"name": "out"}], "dtypes": ["float32", "float16", "bfloat16"]}
    data.update(fields)
    return validate_spec_data(data, "<test>")


def unary(name: str, body: str, cases: list | None = None, **fields) -> OperatorSpec:
    """A one-input spec `def name(x): return body`."""
    cases = cases or [{"x": [3, 7, 33]}, {"x": [129]}, {"x": [2, 3, 5, 17]}]
    return make_spec(name=name, inputs=[{"name": "x"}], reference=f"def {name}(x):\n    return {body}\n",
                     test_cases=cases, **fields)


def import_source(name: str, source: str, tmp: Path):
    path = tmp / f"{name}_triton.py"
    path.write_text(source)
    mod_spec = importlib.util.spec_from_file_location(f"{name}_triton_{abs(hash(source))}", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module


def check_kernel(spec: OperatorSpec, tmp: Path, knobs: dict | None = None, cases: list | None = None,
                 dispatch: list | None = None) -> OfflineKernel:
    kern = generate_kernel(spec, knobs, dispatch=dispatch)
    fn = getattr(import_source(spec.name, kern.source, tmp), spec.name)
    ref = load_reference(spec)
    for case in cases or spec.test_cases:
        for dtype in spec.dtypes:
            inputs = draw_inputs(spec, case, dtype, 1, "cpu")  # the judge's own generator
            before = [t.clone() for t in inputs]
            expected = ref(*inputs, **spec.param_defaults)
            got = fn(*inputs)
            assert isinstance(got, tuple) == isinstance(expected, tuple)
            exp_t = expected if isinstance(expected, tuple) else (expected,)
            got_t = got if isinstance(got, tuple) else (got,)
            tol = spec.tolerance_for(dtype)
            where = f"{spec.name} {case} {dtype}"
            for e, r in zip(exp_t, got_t, strict=True):
                assert r.shape == e.shape, f"{where}: shape {tuple(r.shape)} != {tuple(e.shape)}"
                assert r.dtype == e.dtype, f"{where}: dtype {r.dtype} != {e.dtype}"
                if e.dtype.is_floating_point:
                    torch.testing.assert_close(r.float(), e.float(), atol=tol.atol, rtol=tol.rtol, msg=lambda m: f"{where}: {m}")
                else:
                    assert torch.equal(r, e), where
            for a, b in zip(inputs, before):
                assert torch.equal(a, b), f"{where}: an input was modified"
    return kern


def run_guarded(fn, inputs: list, **params):
    """Call a generated wrapper under KernelGen's runtime guard; fail on any violation (PyTorch
    computing in the wrapper, no launch, ...). Returns the outputs."""
    from kernelgen.verify.worker.guard import guarded
    from kernelgen.verify.poison import draw_fills

    with guarded(draw_fills()[0]) as report:
        out = fn(*inputs, **params)
    assert not report.violations, [message for _, message in report.violations]
    return out
