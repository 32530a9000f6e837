"""Convolution -> pooling chains whose sizes follow the input (issue 38): the kernel traced on one test
case gives the reference's output, shape and values, at every other shape, on shapes where floor and
ceil mode differ, in 1-D, 2-D and 3-D, after a convolution and a transposed one, in every pooling
mode (ceil_mode, padding, dilation, count_include_pad, divisor_override). A trace that holds a size as
a number the input does not fix is refused by `kernelgen validate` with the size named, never built
into a kernel that the judge finds wrong at round 0.

Before: level 2's 46 (Conv2d 3x3 -> AvgPool2d(2)) traced at x 5x5, where the pooled size is 1, and its
kernel returned [7, 128, 1, 1] where the baseline gives [7, 128, 2, 2]; level 1's 41 (MaxPool1d)
fixed the input's length to the traced 27."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from kernelgen.cli import app  # noqa: E402
from tests.support.offline_check import check_kernel, make_spec  # noqa: E402


def _spec(name: str, inputs: str, body: str, cases: list):
    names = inputs.split()
    return make_spec(name=name, inputs=[{"name": n} for n in names], dtypes=["float32"],
                     reference=f"def {name}({', '.join(names)}):\n    return {body}\n", test_cases=cases)


# name -> (inputs, reference body, test cases, other shapes checked). Where the first case pools a dim
# to 1 (level 2's 46 form, the 2-D and 3-D max) and the others do not, the trace is taken there; every
# chain is checked at sizes where ceil and floor mode differ (test_each_chain_is_checked_where_...).
W2, W1, W3 = [4, 3, 3, 3], [5, 3, 3], [3, 2, 3, 3, 3]
CHAINS = {
    # level 2's 46: conv 3x3 -> pointwise -> AvgPool2d(2); x 5x5 pools 3x3 to 1x1
    "conv2d_avgpool": ("x w b", "F.avg_pool2d(torch.tanh(F.conv2d(x, w, b) - 0.5) - 0.2, 2)",
                       [{"x": [2, 3, 5, 5], "w": W2, "b": [4]}, {"x": [3, 3, 9, 12], "w": W2, "b": [4]}],
                       [{"x": [2, 3, 19, 10], "w": W2, "b": [4]}]),
    "conv2d_maxpool_ceil_dilated": ("x w", "F.max_pool2d(F.conv2d(x, w), 3, 2, 1, 2, ceil_mode=True)",
                                    [{"x": [2, 3, 5, 6], "w": W2}, {"x": [2, 3, 12, 9], "w": W2}],
                                    [{"x": [1, 3, 16, 18], "w": W2}]),
    "conv2d_avgpool_ceil_padded": ("x w", "F.avg_pool2d(F.conv2d(x, w), 3, 2, 1, ceil_mode=True)",
                                   [{"x": [2, 3, 4, 5], "w": W2}, {"x": [2, 3, 12, 9], "w": W2}],
                                   [{"x": [1, 3, 16, 18], "w": W2}]),
    "conv2d_avgpool_pad_uncounted": ("x w", "F.avg_pool2d(F.conv2d(x, w, padding=1), 3, 2, 1, count_include_pad=False)",
                                     [{"x": [2, 3, 10, 9], "w": W2}], [{"x": [1, 3, 6, 13], "w": W2}]),
    # level 1's 41 after a convolution: max_pool1d without indices, dilated and padded
    "conv1d_maxpool_dilated": ("x w", "F.max_pool1d(F.conv1d(x, w), 4, 2, 2, 3)",
                               [{"x": [2, 3, 13], "w": W1}, {"x": [3, 3, 18], "w": W1}], [{"x": [2, 3, 33], "w": W1}]),
    "conv1d_avgpool_ceil_uncounted": ("x w", "F.avg_pool1d(F.conv1d(x, w), 3, 2, 1, ceil_mode=True, count_include_pad=False)",
                                      [{"x": [2, 3, 4], "w": W1}, {"x": [2, 3, 13], "w": W1}], [{"x": [1, 3, 22], "w": W1}]),
    "conv_transpose2d_avgpool_divisor": ("x w", "F.avg_pool2d(F.conv_transpose2d(x, w, stride=2, output_padding=1), 3, 2, 1, "
                                         "ceil_mode=True, divisor_override=4)",
                                         [{"x": [2, 3, 4, 6], "w": [3, 2, 3, 3]}, {"x": [1, 3, 5, 3], "w": [3, 2, 3, 3]}],
                                         [{"x": [1, 3, 7, 4], "w": [3, 2, 3, 3]}]),
    # level 2's Conv3d / ConvTranspose3d -> pooling chains (6, 43, 78, 89); a batch of 1 in the first case is a
    # constant to its trace: the second case's trace is kept (frontend/trace.py)
    "conv3d_maxpool_ceil": ("x w", "F.max_pool3d(torch.softmax(F.conv3d(x, w), 1), 2, 2, ceil_mode=True)",
                            [{"x": [1, 2, 4, 5, 6], "w": W3}, {"x": [2, 2, 8, 5, 6], "w": W3}], [{"x": [1, 2, 6, 9, 7], "w": W3}]),
    "conv_transpose3d_avgpool_ceil": ("x w", "F.avg_pool3d(F.conv_transpose3d(x, w, stride=2, padding=1), 2, ceil_mode=True)",
                                      [{"x": [1, 2, 2, 3, 3], "w": [2, 3, 3, 3, 3]}, {"x": [2, 2, 3, 2, 4], "w": [2, 3, 3, 3, 3]}],
                                      [{"x": [2, 2, 4, 3, 2], "w": [2, 3, 3, 3, 3]}]),
}
FAST = "conv2d_avgpool"


def _chain(name: str, tmp_path: Path) -> None:
    inputs, body, cases, others = CHAINS[name]
    spec = _spec(name, inputs, body, cases)
    check_kernel(spec, tmp_path, cases=cases + others)


def test_a_pooled_size_of_one_where_traced_follows_the_input(tmp_path: Path) -> None:
    """The trace taken where Conv2d 3x3 -> AvgPool2d(2) pools 3x3 to 1x1 (level 2's 46 at x 5x5):
    the kernel's output is the reference's at 9x12 (3x5) and at 19x10 (8x4), not 1x1."""
    _chain(FAST, tmp_path)


def test_short_pooled_rows_share_programs(tmp_path: Path) -> None:
    """Level 2's 35 in small (Conv2d 3x3 -> HardSwish -> MaxPool2d(2) -> Mish): x 5x5 pools 3x3 to 1x1,
    one kept position per pooled row. The pooling stage's tile runs flat over the batch, channels and
    rows (FLAT): cdiv(kept positions, BLOCK_K) programs, where one program per row took ~3.5 s a call in
    Triton's interpreter (640 of them) and `kernelgen new` did not finish in 10 minutes. Right at every
    case, the ones where rows are long enough to tile by program included."""
    import math

    import torch

    from tests.support.offline_check import import_source
    from kernelgen.offline import generate_kernel

    body = "F.mish(F.max_pool2d(F.hardswish(F.conv2d(x, w, b) - 0.5), 2))"
    cases = [{"x": [5, 6, 5, 5], "w": [16, 6, 3, 3], "b": [16]}, {"x": [2, 6, 7, 7], "w": [16, 6, 3, 3], "b": [16]}]
    spec = _spec("kb35_small", "x w b", body, cases)
    module = import_source(spec.name, generate_kernel(spec, {}).source, tmp_path)
    launches = {}
    for case in cases + [{"x": [1, 6, 70, 70], "w": [16, 6, 3, 3], "b": [16]}]:
        args = [a for n in ("x", "w", "b") for t in [torch.empty(case[n])] for a in (t.shape, t.stride(), t.dtype)]
        plan = module._plan(*args, torch.device("cpu"))
        pool = next(i for i, m in enumerate(plan.metas) if "FLAT" in m)
        launches[case["x"][-1]] = (plan.metas[pool]["FLAT"], plan.metas[pool]["BLOCK_K"], plan.grids[pool][0])
    n, c = 5, 16  # 5x5 -> conv 3x3 -> pooled 1x1: 80 kept positions
    flat, block_k, programs = launches[5]
    assert flat and block_k > 1 and programs == math.ceil(n * c / block_k) < n * c, launches
    assert launches[70][0] is False, launches  # rows of 34: a program per row, its loads contiguous
    check_kernel(spec, tmp_path, cases=cases + [{"x": [1, 6, 70, 70], "w": [16, 6, 3, 3], "b": [16]}])


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in CHAINS if n != FAST])
def test_pooled_sizes_follow_the_input(name: str, tmp_path: Path) -> None:
    _chain(name, tmp_path)


@pytest.mark.slow
def test_global_adaptive_pooling_after_a_convolution(tmp_path: Path) -> None:
    """Adaptive pooling to one element per dim (level 2's GlobalAvgPool chains) is a max or a mean
    over the spatial dims, at every size."""
    body = "F.adaptive_max_pool2d(F.conv2d(x, w), 1) + F.adaptive_avg_pool2d(F.conv2d(x, w), (1, 1))"
    cases = [{"x": [2, 3, 5, 7], "w": W2}, {"x": [3, 3, 9, 4], "w": W2}]
    check_kernel(_spec("conv_global_pools", "x w", body, cases), tmp_path, cases=cases + [{"x": [1, 3, 12, 17], "w": W2}])


def test_validate_names_adaptive_pooling_to_more_than_one(tmp_path: Path) -> None:
    spec = tmp_path / "adaptive.yaml"
    spec.write_text(
        "name: adaptive\n"
        "description: adaptive max pooling to 3x3\n"
        "inputs:\n  - {name: x}\n"
        "outputs:\n  - {name: out}\n"
        "reference: |\n  def adaptive(x):\n      return F.adaptive_max_pool2d(x, 3)\n"
        "dtypes: [float32]\n"
        "test_cases:\n  - {x: [2, 3, 9, 12]}\n")
    r = CliRunner().invoke(app, ["validate", str(spec), "--no-run"])
    text = " ".join(r.output.split())
    assert r.exit_code == 0, text
    assert "offline: no (" in text and "adaptive pooling (adaptive_max_pool2d) to more than one element" in text, text


def _other_mode(body: str) -> str:
    """The chain with its pooling (the outermost call) in the other rounding mode."""
    if "ceil_mode=True" in body:
        return body.replace("ceil_mode=True", "ceil_mode=False")
    return body[:-1] + ", ceil_mode=True)"


@pytest.mark.parametrize("name", list(CHAINS))
def test_each_chain_is_checked_where_floor_and_ceil_differ(name: str) -> None:
    """Each chain's shapes are ones where its pooling in the other rounding mode gives another output
    size, at the traced case or at a case checked beside it: a kernel that rounds the wrong way fails."""
    import torch

    from kernelgen.spec.reference import load_reference

    inputs, body, cases, others = CHAINS[name]
    ours, other = (load_reference(_spec(name, inputs, b, cases)) for b in (body, _other_mode(body)))
    names = inputs.split()
    differs = []
    for case in cases + others:
        args = [torch.empty(case[n], device="meta") for n in names]
        differs.append(ours(*args).shape != other(*args).shape)
    assert any(differs), f"{name}: floor and ceil give the same sizes at every case"


def test_validate_names_a_size_the_trace_fixes(tmp_path: Path) -> None:
    """A reference that reads a size as a Python number (int(x.shape[-1])) traces to a kernel of that
    size only: validate refuses it and names the dim, the traced size and another case's."""
    spec = tmp_path / "fixed.yaml"
    spec.write_text(
        "name: fixed\n"
        "description: scale by the row length read as a Python int\n"
        "inputs:\n  - {name: x}\n"
        "outputs:\n  - {name: out}\n"
        "reference: |\n  def fixed(x):\n      return x * float(int(x.shape[-1]))\n"
        "dtypes: [float32]\n"
        "test_cases:\n  - {x: [3, 7]}\n  - {x: [5, 9]}\n")
    r = CliRunner().invoke(app, ["validate", str(spec), "--no-run"])
    text = " ".join(r.output.split())
    assert r.exit_code == 0, text
    assert "offline: no (" in text and "fixes x.shape[1] to 7" in text and "has 9" in text, text


# The three KernelBench problems the judge refused at round 0 on 4x H100, in small: each a spec whose
# first test case is where the trace went wrong (a pooled size of 1; a length read as a number), with
# KernelBench's own perf shape (checked by the judge's perf-shape probe on meta tensors, no memory).
PROBLEMS = {
    # level 2's 46: Conv2d -> Subtract -> Tanh -> Subtract -> AvgPool2d(2); before: "shape [3, 4, 1, 1]
    # but the baseline gives [3, 4, 3, 5]" at the second test case
    "kb46_conv_avgpool": ("x w b", "F.avg_pool2d(torch.tanh(F.conv2d(x, w, b) - 0.5) - 0.2, 2)",
                          [{"x": [2, 3, 5, 5], "w": W2, "b": [4]}, {"x": [3, 3, 9, 12], "w": W2, "b": [4]}],
                          {"x": [128, 3, 128, 128], "w": W2, "b": [4]}),
    # level 1's 41: MaxPool1d(8, stride 1, padding 4, dilation 3); before: x.shape[2] fixed to 27
    "kb41_max_pool1d": ("x", "F.max_pool1d(x, 8, 1, 4, 3)", [{"x": [3, 5, 27]}, {"x": [2, 3, 15]}],
                        {"x": [64, 192, 65536]}),
    # level 2's 55: Linear -> MaxPool1d(2) over x.unsqueeze(1) -> sum -> scale; before: the Linear's
    # out_features fixed to the traced case's
    "kb55_linear_max_pool1d": ("x w b", "F.max_pool1d(F.linear(x, w, b).unsqueeze(1), 2).squeeze(1).sum(dim=1) * 0.5",
                               [{"x": [5, 33], "w": [37, 33], "b": [37]}, {"x": [3, 17], "w": [21, 17], "b": [21]}],
                               {"x": [128, 32768], "w": [32768, 32768], "b": [32768]}),
}


def _yaml(tmp_path: Path, name: str) -> Path:
    import yaml

    inputs, body, cases, perf = PROBLEMS[name]
    names = inputs.split()
    data = {"name": name, "description": f"issue 38's {name}", "inputs": [{"name": n} for n in names],
            "outputs": [{"name": "out"}], "reference": f"def {name}({', '.join(names)}):\n    return {body}\n",
            "dtypes": ["float32"], "test_cases": cases, "perf_cases": [perf]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROBLEMS))
def test_new_builds_the_problems_refused_at_round_0(name: str, tmp_path: Path) -> None:
    """`kernelgen new` on the CPU: every check passes, the perf shape's probe included."""
    import json

    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["new", str(_yaml(tmp_path, name)), "--out", str(out), "--backend", "offline",
                                 "--no-bench", "--no-service"])
    text = " ".join(r.output.split())
    assert r.exit_code == 0, text
    assert "Accuracy: PASS" in text and "the reference needs" not in text, text
    checks = json.loads((out / name / "state.json").read_text())["rounds"][0]["accuracy"]["accuracy"]["checks"]
    probed = [c for c in checks if c["call"] == "perf-shape"]
    assert probed and all(c["passed"] for c in probed), probed


def test_validate_says_when_a_cpu_build_would_take_over_10_minutes() -> None:
    """validate's yes states what `kernelgen new` on the CPU will cost: its accuracy check repeats the
    one run 3 times per seed of every planned check (51 here, the special-value cases among them), and past 10 minutes it says so."""
    from kernelgen.backends import cpu_build

    inputs, body, cases, perf = PROBLEMS["kb46_conv_avgpool"]
    spec = make_spec(name="kb46", inputs=[{"name": n} for n in inputs.split()], dtypes=["float32"], perf_cases=[perf],
                     reference=f"def kb46({', '.join(inputs.split())}):\n    return {body}\n", test_cases=cases)
    import re

    quick = cpu_build(spec, 0.5)
    calls = int(re.fullmatch(r"; `kernelgen new` on the CPU makes (\d+) calls like it, under a minute", quick).group(1))
    assert 36 <= calls <= 60, quick  # 3 calls per seed of each case, the generated ones included
    assert cpu_build(spec, 10.0) == f"; `kernelgen new` on the CPU makes {calls} calls like it, ~{calls * 10 / 60:.0f} min"
    slow = cpu_build(spec, 20.0)
    assert slow.endswith(f"~{calls * 20 / 60:.0f} min: over the 10 min a CPU build should take, build it on a GPU"), slow
