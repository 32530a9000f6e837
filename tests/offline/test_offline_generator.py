"""The offline generator on specs that are not in the repo, and its refusals."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from kernelgen.errors import UnsupportedOperatorError  # noqa: E402
from kernelgen.offline import generate_kernel, knob_space  # noqa: E402
from tests.support.offline_check import check_kernel, make_spec, unary as _unary  # noqa: E402


# --- specs a user would write, not in the repo ---------------------------------------------
@pytest.mark.parametrize(
    "name,body",
    [
        ("hardswish", "F.hardswish(x)"),
        ("mish", "x * torch.tanh(F.softplus(x))"),
        ("gelu_tanh", "F.gelu(x, approximate='tanh')"),
        ("chain", "torch.abs(torch.sigmoid(x) - 0.5) * torch.exp(-x * x) + torch.sqrt(torch.abs(x) + 1)"),
        ("relu6_like", "torch.clamp(torch.relu(x), max=6.0) / 6.0"),
        ("elu", "F.elu(x)"),
    ],
)
def test_user_pointwise_chains(name: str, body: str, tmp_path: Path) -> None:
    kern = check_kernel(_unary(name, body), tmp_path)
    assert kern.family == "pointwise"


def test_comparison_returns_bool_and_cast_returns_cast_dtype(tmp_path: Path) -> None:
    spec = make_spec(
        name="masks", inputs=[{"name": "x"}, {"name": "y"}], outputs=[{"name": "m"}, {"name": "f"}],
        reference="def masks(x, y):\n    return x > y, (x < 0).float()\n",
        test_cases=[{"x": [4, 33], "y": [33]}, {"x": [50], "y": [1]}],
    )
    check_kernel(spec, tmp_path)


def test_gated_product_with_per_row_gate(tmp_path: Path) -> None:
    spec = make_spec(
        name="row_gate", inputs=[{"name": "x"}, {"name": "g"}],
        reference="def row_gate(x, g):\n    return x * torch.sigmoid(g)\n",
        test_cases=[{"x": [6, 40], "g": [6, 1]}, {"x": [2, 3, 17], "g": [2, 3, 1]}],
    )
    kern = check_kernel(spec, tmp_path)
    assert "g[row]" in kern.summary


def test_per_channel_broadcast_in_the_middle(tmp_path: Path) -> None:
    spec = make_spec(
        name="channel_scale", inputs=[{"name": "x"}, {"name": "s"}],
        reference="def channel_scale(x, s):\n    return x * s\n",
        test_cases=[{"x": [2, 3, 5, 7], "s": [3, 1, 1]}, {"x": [4, 6, 9], "s": [6, 1]}],
    )
    check_kernel(spec, tmp_path)


@pytest.mark.parametrize(
    "name,body,family",
    [
        ("mean_sq", "(x * x).mean(-1)", "row_reduction"),
        ("amax_abs", "x.abs().amax(dim=-1, keepdim=True)", "row_reduction"),
        ("row_var", "torch.var(x, dim=-1)", "row_reduction"),
        ("max_minus_min", "x.max(dim=-1).values - x.min(dim=-1).values", "row_reduction"),
        ("centre", "x - x.mean(-1, keepdim=True)", "row_reduction"),
        ("softmax_temp", "torch.softmax(x / 0.7, dim=-1)", "softmax"),
    ],
)
def test_user_reductions(name: str, body: str, family: str, tmp_path: Path) -> None:
    cases = [{"x": [3, 7, 33]}, {"x": [2, 3, 5, 17]}, {"x": [2, 2500]}]
    tol = {"float16": {"atol": 1e-2, "rtol": 2e-3}, "bfloat16": {"atol": 6e-2, "rtol": 1.6e-2}}
    kern = check_kernel(_unary(name, body, cases, tolerance=tol), tmp_path)
    assert kern.family == family
    # force the looped (multi-pass) path on the same cases
    check_kernel(_unary(name, body, cases, tolerance=tol), tmp_path, knobs={"MAX_SINGLE_PASS": 2048, "LOOP_BLOCK": 1024})


def test_layer_norm_written_by_hand_with_all_outputs(tmp_path: Path) -> None:
    ref = (
        "def ln(x, w, eps=1e-5):\n"
        "    mean = x.mean(-1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(-1, keepdim=True)\n"
        "    rstd = torch.rsqrt(var + eps)\n"
        "    return (x - mean) * rstd * w, rstd\n"
    )
    spec = make_spec(
        name="ln", inputs=[{"name": "x"}, {"name": "w"}], outputs=[{"name": "y"}, {"name": "rstd"}],
        params=[{"name": "eps", "type": "float", "default": 1e-5}], reference=ref, dtypes=["float32"],
        test_cases=[{"x": [5, 300], "w": [300]}, {"x": [2, 3, 70], "w": [70]}],
    )
    assert check_kernel(spec, tmp_path).family == "layernorm"


def test_matmul_with_transposed_weight_and_row_bias(tmp_path: Path) -> None:
    spec = make_spec(
        name="lin", inputs=[{"name": "x"}, {"name": "w"}, {"name": "b"}],
        reference="def lin(x, w, b):\n    return torch.relu(x @ w.t() + b) * 2.0\n",
        test_cases=[{"x": [33, 40], "w": [24, 40], "b": [24]}],
        tolerance={"float16": {"atol": 1e-2, "rtol": 4e-3}, "bfloat16": {"atol": 6e-2, "rtol": 1.6e-2}},
    )
    kern = check_kernel(spec, tmp_path)
    assert kern.family == "matmul" and "w[Tmm]" in kern.summary


def test_params_are_keyword_args(tmp_path: Path) -> None:
    spec = make_spec(name="lrelu", inputs=[{"name": "x"}], dtypes=["float32"],
                     params=[{"name": "slope", "type": "float", "default": 0.2}],
                     reference="def lrelu(x, slope=0.2):\n    return F.leaky_relu(x, slope)\n",
                     test_cases=[{"x": [4, 9]}])
    from tests.support.offline_check import import_source

    import torch

    fn = import_source("lrelu", generate_kernel(spec).source, tmp_path).lrelu
    x = torch.randn(4, 9)
    torch.testing.assert_close(fn(x, slope=0.5), torch.nn.functional.leaky_relu(x, 0.5))


@pytest.mark.parametrize("name,body", [
    ("l2_normalize", "F.normalize(x, dim=-1)"),  # refused before one front end decomposed its norm
    ("var_and_mean", "torch.var_mean(x, -1)[1] + x.var(-1)"),  # one mean shared by both
    ("isnan_mask", "torch.where(torch.isnan(x), 0.0, x).sum(-1)"),  # an op from the one expression table
])
def test_the_front_end_serves_the_row_families_more(name: str, body: str, tmp_path: Path) -> None:
    spec = _unary(name, body, [{"x": [4, 33]}, {"x": [3, 7, 129]}])
    kern = check_kernel(spec, tmp_path)
    assert kern.family == "row_reduction", kern.summary
    if name == "var_and_mean":
        from kernelgen.offline import route

        graph = route(spec).served.plan.view.graph
        assert sum(graph.node(i).op == "sum" for i in graph.live()) == 2  # sum(x) once, sum of squares once


# --- refusals ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,body",
    [
        # cumsum, sums over dim 0, argmax, flip and size arithmetic are served by the nd generator now
        ("srt", "torch.sort(x, dim=-1).values"),
        ("top", "torch.topk(x, 3, dim=-1).values"),
        ("med", "torch.median(x, dim=-1).values"),
        ("kth", "torch.kthvalue(x, 2, dim=-1).values"),
        ("cmax", "torch.cummax(x, dim=-1).values"),
    ],
)
def test_outside_the_families_asks_for_an_llm(name: str, body: str) -> None:
    spec = _unary(name, body, [{"x": [4, 8]}, {"x": [3, 5]}])
    with pytest.raises(UnsupportedOperatorError) as err:
        generate_kernel(spec)
    assert "OPENAI_API_KEY" in str(err.value) and "--backend openai" in str(err.value)


def test_an_op_no_family_serves_is_refused_by_name() -> None:
    # a convolution was the example until the conv family served it (tests/offline/test_conv_family.py)
    spec = make_spec(name="sorted_rows", inputs=[{"name": "x"}], dtypes=["float32"],
                     reference="def sorted_rows(x):\n    return torch.sort(x, -1).values\n",
                     test_cases=[{"x": [4, 9]}])
    with pytest.raises(UnsupportedOperatorError, match=r"aten\.sort.*needs an LLM"):
        generate_kernel(spec)


def test_matmul_autotune_file_runs_on_cpu(tmp_path: Path) -> None:
    mm = make_spec(name="mma", inputs=[{"name": "a"}, {"name": "b"}], dtypes=["float16"],
                   reference="def mma(a, b):\n    return a @ b\n", test_cases=[{"a": [20, 30], "b": [30, 12]}])
    kern = check_kernel(mm, tmp_path, {"autotune": True})
    assert "@triton.autotune" in kern.source and 'key=["M", "N", "K"]' in kern.source
