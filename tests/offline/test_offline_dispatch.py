"""Per-shape dispatch tables in generated wrappers: the table is readable, each call goes to the
entry of its dtype nearest to its shape, every route stays correct for every shape, and the
wrapper's host path analyses a call signature once."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from kernelgen.offline import DispatchEntry, generate_kernel  # noqa: E402
from kernelgen.spec import draw_inputs  # noqa: E402
from kernelgen.spec.reference import load_reference  # noqa: E402
from tests.support.offline_check import check_kernel, example, import_source, run_guarded, unary  # noqa: E402

FAST_FP32 = DispatchEntry(dtype="float32", shapes={"x": [4, 20000]}, knobs={"algorithm": "online"},
                          reason="x1.52 over the base (0.0915 vs 0.139 ms)")
FEW_FP16 = DispatchEntry(dtype="float16", shapes={"x": [2, 9000]}, knobs={"algorithm": "split", "num_warps": 4},
                         reason="x1.87 over the base (0.0092 vs 0.0172 ms)")


def _kernel_of(module, spec, shape: list[int], dtype: str) -> str:
    """The kernel the wrapper launches for one call (its plan, after the call)."""
    (x,) = draw_inputs(spec, {"x": shape}, dtype, 0, "cpu")
    module._PLANS.clear()
    getattr(module, spec.name)(x)
    (plan,) = module._PLANS.values()
    return plan.kernel.__name__


def test_two_entries_route_by_dtype_and_nearest_shape_and_pass_the_checks(tmp_path: Path) -> None:
    spec = example("log_softmax")
    kern = generate_kernel(spec, {}, dispatch=[FAST_FP32, FEW_FP16])
    src = kern.source
    # readable: one commented line per entry (dtype, shape, setting, reason), then the entry
    assert '# float32, x [4, 20000] (rows x cols 4 x 20000): algorithm="online" -- x1.52 over the base (0.0915 vs 0.139 ms)' in src
    assert '((4, 20000), {"algorithm": "online"}),' in src
    assert '# float16, x [2, 9000] (rows x cols 2 x 9000): algorithm="split", num_warps=4 -- x1.87' in src
    assert src.index("torch.float32: [") < src.index("torch.float16: [")  # the spec's dtype order
    # each code variant a route uses is in the file, once
    for name in ("_log_softmax_kernel", "_log_softmax_kernel_online", "_log_softmax_kernel_split",
                 "_log_softmax_kernel_split_finish"):
        assert src.count(f"def {name}(") == 1
    module = import_source(spec.name, src, tmp_path)
    assert _kernel_of(module, spec, [3, 12000], "float32") == "_log_softmax_kernel_online"  # nearest fp32 entry
    assert _kernel_of(module, spec, [2, 12000], "float16") == "_log_softmax_kernel_split"  # nearest fp16 entry
    assert _kernel_of(module, spec, [3, 12000], "bfloat16") == "_log_softmax_kernel"  # no entry: the base, looped
    # an entry that cannot serve a shape falls back: online at a row that fits registers, split at many rows
    assert _kernel_of(module, spec, [3, 100], "float32") == "_log_softmax_kernel"
    assert _kernel_of(module, spec, [64, 9000], "float16") == "_log_softmax_kernel"
    # every route under the runtime guard: only allocations and views in PyTorch, the launches real
    for shape, dtype in (([3, 12000], "float32"), ([2, 12000], "float16"), ([3, 12000], "bfloat16")):
        (x,) = draw_inputs(spec, {"x": shape}, dtype, 1, "cpu")
        got = run_guarded(module.log_softmax, [x])
        assert got.dtype == x.dtype and got.shape == x.shape
    # the dispatched kernel passes the accuracy checks in both dtypes, on every case and the entries' shapes
    cases = spec.test_cases + [{"x": [4, 20000]}, {"x": [2, 9000]}, {"x": [40, 3000]}]
    check_kernel(spec, tmp_path, cases=cases, knobs=None, dispatch=[FAST_FP32, FEW_FP16])


def test_entries_with_code_knobs_of_the_pointwise_family(tmp_path: Path) -> None:
    spec = example("gelu")
    entries = [DispatchEntry(dtype="bfloat16", shapes={"x": [16384, 8192]}, knobs={"erf": "poly", "TILE_BYTES": 16384},
                             reason="x1.30 over the base"),
               DispatchEntry(dtype="float32", shapes={"x": [8, 1000]}, knobs={"grid": "1d", "persistent": True},
                             reason="x1.05 over the base")]
    kern = check_kernel(spec, tmp_path, dispatch=entries)
    module = import_source(spec.name, kern.source, tmp_path)
    assert _kernel_of(module, spec, [64, 512], "bfloat16") == "_gelu_kernel_poly_erf"
    assert _kernel_of(module, spec, [64, 512], "float32") == "_gelu_kernel_1d_persistent"
    assert _kernel_of(module, spec, [64, 512], "float16") == "_gelu_kernel"


def test_matmul_entries_are_launch_constants(tmp_path: Path) -> None:
    spec = example("matmul_leakyrelu")
    entry = DispatchEntry(dtype="float16", shapes={"a": [64, 80], "b": [80, 96]},
                          knobs={"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16}, reason="x1.1")
    kern = check_kernel(spec, tmp_path, dispatch=[entry])
    module = import_source(spec.name, kern.source, tmp_path)
    a, b = torch.randn(64, 80, dtype=torch.float16), torch.randn(80, 96, dtype=torch.float16)
    module.matmul_leakyrelu(a, b)
    module.matmul_leakyrelu(a.float(), b.float())
    metas = {plan.out_dtypes[0]: plan.meta for plan in module._PLANS.values()}
    assert metas[torch.float16]["BLOCK_M"] == 32 and metas[torch.float32]["BLOCK_M"] == 64


def test_entries_round_trip_through_json_and_bad_ones_are_refused() -> None:
    stored = json.loads(json.dumps(FEW_FP16.model_dump()))  # as state.json holds it
    assert DispatchEntry.model_validate(stored) == FEW_FP16
    assert generate_kernel(example("log_softmax"), dispatch=[stored]).dispatch == (FEW_FP16,)
    with pytest.raises(ValueError, match="extra"):
        DispatchEntry.model_validate({**stored, "speedup": 2})
    spec = example("softmax")
    bad = [({"dtype": "float8", "shapes": {"x": [2, 9]}, "knobs": {}}, "dtype 'float8' is not one of"),
           ({"dtype": "float32", "shapes": {"y": [2, 9]}, "knobs": {}}, "shapes must name every input of softmax"),
           ({"dtype": "float32", "shapes": {"x": [2, 9]}, "knobs": {"BLOCK_M": 64}}, "unknown knob 'BLOCK_M'"),
           ({"dtype": "float32", "shapes": {"x": [2, 9]}, "knobs": {"autotune": True}}, "autotune is a base knob")]
    for entry, match in bad:
        with pytest.raises(ValueError, match=match):
            generate_kernel(spec, dispatch=[{**entry, "reason": "r"}])
    centred = unary("centred", "(x - x.amax(-1, keepdim=True)).sum(-1)", [{"x": [3, 50]}], dtypes=["float32"])
    with pytest.raises(ValueError, match=r"neither sum\(exp"):
        generate_kernel(centred, dispatch=[{"dtype": "float32", "shapes": {"x": [2, 9]}, "knobs": {"algorithm": "online"},
                                            "reason": "r"}])


# --- the host path ------------------------------------------------------------------------
class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.ops.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_a_signature_is_analysed_once_and_calls_only_allocate(tmp_path: Path, monkeypatch) -> None:
    from triton.runtime.interpreter import InterpretedFunction

    spec = example("layer_norm")
    module = import_source(spec.name, generate_kernel(spec).source, tmp_path)
    analyses = []
    real = module._plan
    monkeypatch.setattr(module, "_plan", lambda *key: analyses.append(key) or real(*key))
    x, w, b = draw_inputs(spec, spec.test_cases[0], "float32", 0, "cpu")
    first = module.layer_norm(x, w, b)
    again = module.layer_norm(x.clone(), w, b)  # same shapes, strides, dtypes, device
    assert len(analyses) == 1 and torch.equal(first, again)
    module.layer_norm(x[:, :500], w[:500], b[:500])  # another signature: a second analysis
    assert len(analyses) == 2
    monkeypatch.setattr(InterpretedFunction, "run", lambda self, *a, **k: None)  # the launch itself
    with _Ops() as seen:
        module.layer_norm(x, w, b)
    assert seen.ops == ["empty_like"], seen.ops  # no expand views, no shape analysis: one allocation
    xt = torch.randn(5, 4, 3, x.shape[1]).permute(2, 1, 0, 3)  # 3 leading dims no frame merges: copied once
    with _Ops() as seen:
        module.layer_norm(xt, w, b)
    assert "clone" in seen.ops and "expand" not in seen.ops


def test_copied_and_broadcast_inputs_stay_correct_under_the_guard(tmp_path: Path) -> None:
    spec = example("scale_shift")
    module = import_source(spec.name, generate_kernel(spec, {"persistent": True}).source, tmp_path)
    x = torch.randn(6, 5, 4, 33).permute(0, 2, 1, 3)  # 3 leading dims no frame merges: copied once
    scale, shift = torch.randn(33)[::1], torch.randn(66)[::2]  # per column, one of them strided
    for _ in range(2):  # the second call takes the cached plan
        got = run_guarded(module.scale_shift, [x, scale, shift])
        torch.testing.assert_close(got, x * (1 + scale) + shift)
    # scale is read as one value per column (its shape in every case of the spec): a scale that
    # varies along the rows is refused, not read wrongly (the wrapper before the plan cache read it
    # as its first row's values)
    with pytest.raises(ValueError, match=r"scale_shift: scale of shape \(1, 4, 1, 33\) varies along the rows"):
        module.scale_shift(x, torch.randn(1, 4, 1, 33), shift)


@pytest.mark.parametrize("name,knobs", [("log_softmax", {"autotune": True, "num_stages": 2}),
                                        ("swiglu", {"autotune": True, "grid": "1d"}),
                                        ("broadcast", {"autotune": True, "num_stages": 2}),
                                        ("matmul_leakyrelu", {"autotune": True})], ids=str)
def test_the_gpu_plan_of_an_autotuned_kernel_launches_on_the_interpreter(name: str, knobs: dict, tmp_path: Path) -> None:
    """The branch only a GPU takes: the plan made for a CUDA device launches the autotuned kernel;
    here its configs are 'timed' by a stand-in so the launch's arguments are checked on the CPU."""
    spec = example(name)
    module = import_source(spec.name, generate_kernel(spec, knobs).source, tmp_path)
    tuned = getattr(module, f"_{name}_kernel_autotuned")
    tuned.do_bench = lambda call, quantiles: (call(), [1.0, 1.0, 1.0])[1]  # no device to time configs on
    dtype = "float16" if name == "matmul_leakyrelu" else "float32"
    inputs = draw_inputs(spec, spec.test_cases[0], dtype, 0, "cpu")
    key = tuple(v for t in inputs for v in (t.shape, t.stride(), t.dtype)) + (torch.device("cuda"),)
    plan = module._plan(*key)
    assert plan.kernel is tuned and "num_warps" not in plan.meta and "num_stages" not in plan.meta
    outs = [torch.empty(s, dtype=d) for s, d in zip(plan.out_shapes, plan.out_dtypes)]
    tensors = [t for t, n in zip(inputs, spec.input_names) if f"{n}_ptr" in module.__dict__[f"_{name}_kernel"].arg_names]
    plan.kernel[plan.grid](*tensors, *outs, *[spec.param_defaults[p] for p in spec.param_defaults], *plan.sizes, **plan.meta)
    expected = load_reference(spec)(*inputs, **spec.param_defaults)
    tol = spec.tolerance_for(dtype)
    torch.testing.assert_close(outs[0].float(), expected.float(), atol=tol.atol, rtol=tol.rtol)
