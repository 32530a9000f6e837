"""The offline generator's knobs: typed per family, JSON round-trippable, refused when wrong, and
every setting still computes the reference's answer."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from kernelgen.offline import generate_kernel, knob_space  # noqa: E402
from tests.support.offline_check import check_kernel, example, make_spec, unary  # noqa: E402

FAMILY_SPECS = ["broadcast", "softmax", "matmul_leakyrelu"]  # one per knob model


def test_knob_spaces_per_family() -> None:
    pw = knob_space(unary("g", "F.gelu(x)"))
    assert {"BLOCK_SIZE", "num_warps", "num_stages", "grid", "eviction", "autotune"} <= set(pw)
    rows = knob_space(unary("s", "torch.softmax(x, -1)"))
    assert {"MAX_SINGLE_PASS", "ROW_TILE", "num_warps", "autotune"} <= set(rows)
    mm = knob_space(example("matmul_leakyrelu"))
    assert {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_SIZE_M", "num_warps", "num_stages", "autotune"} <= set(mm)


@pytest.mark.parametrize("name", FAMILY_SPECS)
def test_space_defaults_are_the_generated_defaults_and_none_means_heuristic(name: str) -> None:
    spec = example(name)
    space = knob_space(spec)
    kern = generate_kernel(spec)
    assert kern.knobs.model_dump() == {k: v[0] for k, v in space.items()}  # first value = default
    assert all(v != "auto" for values in space.values() for v in values)  # no sentinel strings
    assert space["num_warps"][0] is None
    assert generate_kernel(spec, {"num_warps": None}).source == kern.source  # None: the file's heuristic
    assert generate_kernel(spec, {"num_warps": 4}).source != kern.source  # a number is baked in


@pytest.mark.parametrize("name", FAMILY_SPECS)
def test_knobs_round_trip_through_json_and_regenerate_the_same_file(name: str) -> None:
    spec = example(name)
    space = knob_space(spec)
    overrides = {k: v[1] for k, v in space.items()}  # every knob off its default
    kern = generate_kernel(spec, overrides)
    stored = json.loads(json.dumps(kern.knobs.model_dump()))  # as state.json holds it
    again = type(kern.knobs).model_validate(stored)
    assert again == kern.knobs
    assert generate_kernel(spec, again).source == kern.source  # the typed model is accepted as is
    assert generate_kernel(spec, stored).source == kern.source  # and so is the plain dict


@pytest.mark.parametrize(
    "knobs,match",
    [
        ({"BLOCK_M": 64}, r"unknown knob 'BLOCK_M' for the pointwise family; known: BLOCK_SIZE"),
        ({"BLOCK_SIZE": "auto"}, r"knob BLOCK_SIZE='auto' is not valid"),
        ({"num_warps": 0}, r"knob num_warps=0 is not valid .*greater than 0"),
        ({"BLOCK_SIZE": True}, r"knob BLOCK_SIZE=True is not valid"),
        ({"grid": "3d"}, r"knob grid='3d' is not valid .*candidates: \['2d', '1d'\]"),
        ({"autotune": "yes"}, r"knob autotune='yes' is not valid"),
    ],
    ids=str,
)
def test_bad_knobs_are_refused_with_their_name(knobs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        generate_kernel(example("broadcast"), knobs)


def test_another_familys_knob_model_is_refused() -> None:
    rows_knobs = generate_kernel(example("softmax")).knobs
    with pytest.raises(ValueError, match="RowKnobs given for the pointwise family, which takes PointwiseKnobs"):
        generate_kernel(example("broadcast"), rows_knobs)


def test_a_size_outside_the_candidates_works_if_triton_can_take_it(tmp_path: Path) -> None:
    spec = unary("sq", "x * x", [{"x": [3, 50]}], dtypes=["float32"])
    kern = check_kernel(spec, tmp_path, {"BLOCK_SIZE": 256, "num_stages": 7})
    assert kern.knobs.BLOCK_SIZE == 256 and '"BLOCK_SIZE": 256,' in kern.source and '"num_stages": 7,' in kern.source
    for knobs in ({"BLOCK_SIZE": 96}, {"num_warps": 3}):  # tl.arange and num_warps take powers of two
        with pytest.raises(ValueError, match="must be a power of two"):
            generate_kernel(spec, knobs)


@pytest.mark.parametrize(
    "knobs",
    [
        {"grid": "1d"},
        {"BLOCK_SIZE": 512, "num_warps": 2},
        {"eviction": "evict_first", "num_stages": 2},
        {"grid": "1d", "autotune": True},
        {"autotune": True},
    ],
    ids=str,
)
def test_pointwise_knobs_stay_correct(knobs: dict, tmp_path: Path) -> None:
    spec = make_spec(name="bias_gelu", inputs=[{"name": "x"}, {"name": "b"}], dtypes=["float32"],
                     reference="def bias_gelu(x, b):\n    return F.gelu(x + b)\n",
                     test_cases=[{"x": [5, 40], "b": [40]}])
    kern = check_kernel(spec, tmp_path, knobs)
    assert all(getattr(kern.knobs, k) == v for k, v in knobs.items())
    assert ("@triton.autotune" in kern.source) == bool(knobs.get("autotune"))


def test_row_and_matmul_knobs(tmp_path: Path) -> None:
    soft = unary("sm", "torch.softmax(x, -1)", [{"x": [3, 50]}], dtypes=["float32"])
    check_kernel(soft, tmp_path, {"num_warps": 2, "ROW_TILE": 512})
    check_kernel(soft, tmp_path, {"autotune": True})
    mm = make_spec(name="mm", inputs=[{"name": "a"}, {"name": "b"}], dtypes=["float32"],
                   reference="def mm(a, b):\n    return a @ b\n", test_cases=[{"a": [20, 30], "b": [30, 12]}])
    kern = check_kernel(mm, tmp_path, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_SIZE_M": 4,
                                       "num_warps": 4, "num_stages": 2})
    base = kern.source[kern.source.index("_BASE = {"):]
    base = base[:base.index("}")]
    assert all(f'"{k}": {v},' in base for k, v in [("BLOCK_M", 64), ("BLOCK_N", 64), ("BLOCK_K", 32), ("GROUP_SIZE_M", 4),
                                                    ("num_warps", 4), ("num_stages", 2)])
    with pytest.raises(ValueError, match="unknown knob"):
        generate_kernel(mm, {"BLOCK_SIZE": 128})
