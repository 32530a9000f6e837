"""The algorithmic variants the offline generator can emit, each correct on the CPU interpreter:
online and split rows (long rows, few rows), single and looped rows, persistent grids, wide tiles,
and the polynomial erf (whose error bound is checked against torch.special.erf)."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernelgen.offline import generate_kernel  # noqa: E402
from kernelgen.spec import draw_inputs  # noqa: E402
from tests.support.offline_check import check_kernel, example, import_source, make_spec, run_guarded, unary  # noqa: E402

ROW_SPECS = ["softmax", "log_softmax", "layer_norm", "rms_norm", "row_sum", "row_mean", "row_max"]


def _cases(spec, lead: list[int], cols: int) -> list[dict]:
    """One case of the spec's inputs at [*lead, cols] (per-column inputs: [cols])."""
    first = spec.input_names[0]
    return [{n: (lead + [cols] if n == first else [cols]) for n in spec.input_names}]


def _kernels_used(module, spec, cases: list[dict], dtype: str = "float32") -> set[str]:
    """The kernels a generated wrapper launched for these cases (from its plans)."""
    module._PLANS.clear()
    for case in cases:
        getattr(module, spec.name)(*draw_inputs(spec, case, dtype, 0, "cpu"))
    return {plan.kernel.__name__ if hasattr(plan.kernel, "__name__") else str(plan.kernel) for plan in module._PLANS.values()}


# Every row example's test cases include [2, 9000]: longer than the 8192 columns a row keeps in
# registers, and fewer rows than 2 programs per SM of the interpreter's 4 "SMs", so online rows go
# online and split rows split; [2, 3, 2100] splits rows whose frame has an outer and an inner dim.
FEW = ([2, 3], 2100)


@pytest.mark.parametrize("name", ROW_SPECS)
@pytest.mark.parametrize("algorithm", ["online", "split", "single", "looped"])
def test_row_algorithms_match_the_reference(name: str, algorithm: str, tmp_path: Path) -> None:
    spec = example(name)  # row_sum/mean/max under online: one reduction, no per-element output, still correct
    assert any(case[spec.input_names[0]] == [2, 9000] for case in spec.test_cases)
    kern = check_kernel(spec, tmp_path, {"algorithm": algorithm}, cases=spec.test_cases + _cases(spec, *FEW))
    used = _kernels_used(import_source(spec.name, kern.source, tmp_path), spec, _cases(spec, [2], 9000))
    want = {"online": f"_{name}_kernel_online", "split": f"_{name}_kernel_split"}.get(algorithm, f"_{name}_kernel")
    assert used == {want}, used


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "rms_norm"])
@pytest.mark.parametrize("knobs", [{"persistent": True}, {"algorithm": "online", "persistent": True},
                                   {"algorithm": "split", "eviction": "evict_first", "LOOP_BLOCK": 1024}], ids=str)
def test_row_variants_with_other_knobs(name: str, knobs: dict, tmp_path: Path) -> None:
    spec = example(name)
    check_kernel(spec, tmp_path, knobs, cases=spec.test_cases + _cases(spec, [40], 70))


@pytest.mark.parametrize("algorithm", ["online", "split"])
def test_one_pass_rows_under_the_guard_in_shuffled_order(algorithm: str, tmp_path: Path) -> None:
    from kernelgen.verify.worker.guard import program_order

    spec = example("log_softmax")
    fn = getattr(import_source(spec.name, generate_kernel(spec, {"algorithm": algorithm}).source, tmp_path), spec.name)
    for dtype in ("float32", "float16"):
        (x,) = draw_inputs(spec, {"x": [3, 9000]}, dtype, 3, "cpu")
        with program_order("shuffled", seed=7):
            got = run_guarded(fn, [x])
        tol = spec.tolerance_for(dtype)
        torch.testing.assert_close(got.float(), torch.log_softmax(x.float(), -1), atol=tol.atol, rtol=tol.rtol)


def test_reductions_without_a_one_pass_form_are_refused_by_name() -> None:
    three_levels = unary("peaked", "torch.softmax(x, -1) - torch.softmax(x, -1).amax(-1, keepdim=True)",
                         [{"x": [3, 50]}], dtypes=["float32"])
    with pytest.raises(ValueError, match="third reduction level"):
        generate_kernel(three_levels, {"algorithm": "online"})
    centred_sum = unary("centred", "(x - x.amax(-1, keepdim=True)).sum(-1)", [{"x": [3, 50]}], dtypes=["float32"])
    with pytest.raises(ValueError, match="neither sum\\(exp"):
        generate_kernel(centred_sum, {"algorithm": "split"})
    generate_kernel(centred_sum, {"algorithm": "single"})  # the register and loop paths serve any graph


@pytest.mark.parametrize("name", ["broadcast", "gelu", "swiglu", "scale_shift", "clamp_scale"])
@pytest.mark.parametrize("knobs", [{"persistent": True}, {"grid": "1d", "persistent": True}, {"TILE_BYTES": 16384},
                                   {"BLOCK_SIZE": 16384, "num_warps": 16}, {"erf": "poly"},
                                   {"autotune": True, "persistent": True}], ids=str)
def test_pointwise_variants_match_the_reference(name: str, knobs: dict, tmp_path: Path) -> None:
    check_kernel(example(name), tmp_path, knobs)


def test_poly_erf_in_a_gelu_chain(tmp_path: Path) -> None:
    spec = make_spec(name="bias_gelu", inputs=[{"name": "x"}, {"name": "b"}], dtypes=["float32", "float16"],
                     reference="def bias_gelu(x, b):\n    return F.gelu(x + b) * 2\n",
                     test_cases=[{"x": [5, 40], "b": [40]}, {"x": [3, 7, 33], "b": [33]}])
    kern = check_kernel(spec, tmp_path, {"erf": "poly"})
    assert "_erf_poly(" in kern.source and "tl.math.erf" not in kern.source
    assert "_erf_poly" not in generate_kernel(spec).source


@triton.jit
def _erf_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _erf_under_test(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)  # noqa: F821


def test_poly_erf_error_bound_against_torch(tmp_path: Path) -> None:
    module = import_source("gelu", generate_kernel(example("gelu"), {"erf": "poly"}).source, tmp_path)
    globals()["_erf_under_test"] = module._erf_poly  # the interpreter resolves a kernel's calls in its module
    erf_kernel = _erf_kernel
    x = torch.cat([torch.linspace(-6.0, 6.0, 120001), torch.tensor([0.0, -0.0, 1e-30, -1e-30, 30.0, -30.0])])
    errors = {}
    for dtype in (torch.float64, torch.float32):
        xs = x.to(dtype)
        out = torch.empty_like(xs)
        erf_kernel[(triton.cdiv(xs.numel(), 4096),)](xs, out, xs.numel(), BLOCK=4096)
        errors[dtype] = (out.double() - torch.special.erf(xs.double())).abs().max().item()
        if dtype == torch.float32:  # saturates exactly, as erff does
            assert torch.equal(out[xs > 5.9], torch.ones_like(out[xs > 5.9]))
    # A&S 7.1.26 bounds the formula's error by 1.5e-7: evaluated in fp64 it stays inside the bound
    # (the fp32-rounded coefficients add ~1e-9); the kernels evaluate it in fp32, where 1 - p*exp(-x^2)
    # rounds near x = 0 (p*exp ~ 0.98): measured 5.4e-7, 4 orders of magnitude below a bf16 ulp at 1.0.
    assert errors[torch.float64] <= 1.5e-7 + 1e-8, errors
    assert errors[torch.float32] <= 6e-7, errors


def test_variants_keep_todays_kernel_by_default() -> None:
    for name in ("softmax", "gelu"):
        spec = example(name)
        src = generate_kernel(spec).source
        assert "_KERNELS = {" not in src and "_DISPATCH = {" not in src and "sm_count(device" not in src
        assert src == generate_kernel(spec, {"persistent": False}).source


@pytest.mark.parametrize("algorithm", ["online", "split"])
def test_one_pass_rows_for_specs_not_in_the_repo(algorithm: str, tmp_path: Path) -> None:
    # a variance (Welford, row output), a std times x (per-element output), and a softmax of a
    # computed value beside a second, plain reduction of another value
    specs = [unary("rowvar", "x.var(-1)", [{"x": [3, 9000]}, {"x": [2, 3, 2100]}], dtypes=["float32", "float16"]),
             unary("rowstd", "torch.std(x, -1, keepdim=True) * x", [{"x": [3, 9000]}, {"x": [4, 50]}], dtypes=["float32"]),
             make_spec(name="masked_softmax", inputs=[{"name": "x"}, {"name": "m"}], outputs=[{"name": "p"}, {"name": "mx"}],
                       reference="def masked_softmax(x, m):\n    return torch.softmax(x * 2.0 + m, -1), x.amax(-1)\n",
                       test_cases=[{"x": [3, 9000], "m": [9000]}, {"x": [2, 3, 2100], "m": [2100]}], dtypes=["float32"])]
    for spec in specs:
        check_kernel(spec, tmp_path, {"algorithm": algorithm})
