"""Generated kernels on inputs that are not plain contiguous tensors: strided slices, transposed
and permuted views (5-D, more dims than the kernel's three-dim frame), and broadcasts with stride
0, for every family. The answer must be the reference's, and the wrapper must pass the runtime
guard (it may allocate, take views, copy to contiguous and launch, nothing else)."""

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

ROWS = (3, 5, 7, 4, 6)  # 5-D: after collapsing, four dims remain for a permuted input
# spec -> its input shapes (a spec from operator_specs/, or one defined below)
SHAPES = {
    "gelu": {"x": ROWS},
    "swiglu": {"gate": ROWS, "up": ROWS},
    "broadcast": {"x": ROWS, "bias": (6,)},
    "scale_shift": {"x": ROWS, "scale": (6,), "shift": (6,)},
    "row_sum": {"x": ROWS},
    "row_max": {"x": ROWS},
    "row_mean": {"x": ROWS},
    "softmax": {"x": ROWS},
    "log_softmax": {"x": ROWS},
    "layer_norm": {"x": ROWS, "weight": (6,), "bias": (6,)},
    "rms_norm": {"x": ROWS, "weight": (6,)},
    "linear_bias_gelu": {"x": (33, 17), "w": (17, 45), "bias": (45,)},
    "matmul_leakyrelu": {"a": (33, 17), "b": (17, 45)},
    "linear_t": {"x": (33, 40), "w": (24, 40), "b": (24,)},  # x @ w.t(): a transposed weight
    "row_gate": {"x": ROWS, "g": ROWS[:-1] + (1,)},  # one value per row
    # broadcasts that interleave: no two neighbouring dims merge for every input, so the frame
    # needs four dims even for contiguous inputs and the wrapper materialises the broadcasts
    "interleaved": {"x": (2, 3, 4, 5), "g": (2, 3, 4, 1), "y": (2, 1, 4, 1), "b": (5,)},
}
TOL = {torch.float32: (2e-5, 1e-5), torch.float16: (2e-2, 1e-2)}


def _spec(name: str) -> OperatorSpec:
    if name == "linear_t":
        return make_spec(name="linear_t", inputs=[{"name": "x"}, {"name": "w"}, {"name": "b"}],
                         reference="def linear_t(x, w, b):\n    return torch.relu(x @ w.t() + b)\n",
                         test_cases=[{"x": [33, 40], "w": [24, 40], "b": [24]}])
    if name == "row_gate":
        return make_spec(name="row_gate", inputs=[{"name": "x"}, {"name": "g"}],
                         reference="def row_gate(x, g):\n    return x * torch.sigmoid(g)\n",
                         test_cases=[{"x": [6, 40], "g": [6, 1]}, {"x": [2, 3, 17], "g": [2, 3, 1]}])
    if name == "interleaved":
        return make_spec(name="interleaved", inputs=[{"name": n} for n in ("x", "g", "y", "b")],
                         reference="def interleaved(x, g, y, b):\n    return x * g + y - b\n",
                         test_cases=[{"x": [2, 3, 4, 5], "g": [2, 3, 4, 1], "y": [2, 1, 4, 1], "b": [5]}])
    return example(name)


def _make(shape: tuple[int, ...], layout: str, dtype: torch.dtype) -> torch.Tensor:
    """A tensor of `shape` laid out as `layout`, never contiguous unless 1-D and unavoidable."""
    if layout == "strided":  # every other element along the last dim, every row kept
        return torch.randn(*shape[:-1], 2 * shape[-1], dtype=dtype)[..., ::2]
    if layout == "transposed":  # all dims reversed in memory
        return torch.randn(*reversed(shape), dtype=dtype).permute(*reversed(range(len(shape))))
    if layout == "permuted":  # torch.randn(7, 6, 5, 4, 3).permute(4, 2, 0, 3, 1) for ROWS
        perm = (4, 2, 0, 3, 1) if len(shape) == 5 else tuple(reversed(range(len(shape))))
        base = [0] * len(shape)
        for i, p in enumerate(perm):
            base[p] = shape[i]
        return torch.randn(*base, dtype=dtype).permute(*perm)
    if layout == "expanded":  # stride 0 along the first dim: every row reads the same memory
        return torch.randn(1, *shape[1:], dtype=dtype).expand(shape)
    raise AssertionError(layout)


LAYOUTS = ["strided", "transposed", "permuted", "expanded"]


def _check(name: str, inputs: list[torch.Tensor], tmp_path: Path) -> None:
    spec = _spec(name)
    fn = getattr(import_source(spec.name, generate_kernel(spec).source, tmp_path), spec.name)
    expected = load_reference(spec)(*inputs, **spec.param_defaults)
    got = run_guarded(fn, inputs)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    atol, rtol = TOL[inputs[0].dtype]
    torch.testing.assert_close(got.float(), expected.float(), atol=atol, rtol=rtol, equal_nan=True)  # a mean of nothing is NaN


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_family_on_every_layout(name: str, layout: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    inputs = [_make(shape, layout, torch.float32) for shape in SHAPES[name].values()]
    assert not any(t.is_contiguous() for t in inputs if t.dim() > 1)
    _check(name, inputs, tmp_path)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_family_on_mixed_layouts_in_float16(name: str, tmp_path: Path) -> None:
    """Each input laid out differently, so no two inputs share strides."""
    torch.manual_seed(1)
    inputs = [_make(shape, LAYOUTS[i % len(LAYOUTS)], torch.float16)
              for i, shape in enumerate(SHAPES[name].values())]
    _check(name, inputs, tmp_path)


def test_interleaved_broadcasts_of_contiguous_inputs(tmp_path: Path) -> None:
    # Before the fix the materialised copy was collapsed to one long row, and the per-row input g
    # was read once per (only) row: wrong everywhere but the first row.
    torch.manual_seed(3)
    _check("interleaved", [torch.randn(shape) for shape in SHAPES["interleaved"].values()], tmp_path)


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "swiglu"])
def test_permuted_5d_input_needing_more_than_three_dims(name: str, tmp_path: Path) -> None:
    # A frame needs more than three dims here, so the wrapper copies the inputs to contiguous
    # once; for a single input this used to fail with "too many values to unpack".
    torch.manual_seed(2)
    x = torch.randn(7, 6, 5, 4, 3).permute(4, 2, 0, 3, 1)
    others = {"softmax": [], "layer_norm": [torch.randn(6), torch.randn(6)],
              "swiglu": [torch.randn(3, 5, 7, 4, 6)]}[name]
    _check(name, [x, *others], tmp_path)


@pytest.mark.parametrize("name", ["broadcast", "gelu", "swiglu", "softmax", "layer_norm", "row_sum"])
def test_an_empty_batch_launches_no_program(name: str, tmp_path: Path) -> None:
    # Zero rows (a decode batch of nothing): the launch config sized its tiles by next_power_of_2(0) = 0
    # and divided by it; now the grid has no program and the empty output comes back.
    inputs = [torch.randn((0, *shape[1:]) if len(shape) == len(ROWS) else shape) for shape in SHAPES[name].values()]
    _check(name, inputs, tmp_path)


@pytest.mark.parametrize("name", ["row_sum", "row_mean", "softmax", "log_softmax", "layer_norm", "rms_norm", "broadcast"])
def test_rows_of_no_elements(name: str, tmp_path: Path) -> None:
    # Rows of length 0 ([4, 0]: a sum over nothing is 0 per row, a softmax of nothing is empty): the rows
    # family sized its block by next_power_of_2(0) = 0 and divided by it (ZeroDivisionError in the wrapper).
    shapes = {k: (4, 0) if len(shape) == len(ROWS) else (0,) for k, shape in SHAPES[name].items()}
    _check(name, [torch.randn(shape) for shape in shapes.values()], tmp_path)
