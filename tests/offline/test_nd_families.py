"""The n-dimensional generator (kernelgen.offline.nd), family by family, through the public
`generate_kernel`: every spec of tests/support/nd_specs.py is served by it, and its kernel gives the
reference's answer under the runtime guard in every dtype the interpreter computes (float32, float16;
bfloat16 arithmetic is not supported there), on contiguous and on transposed or sliced inputs.
One spec per family is also kept as a snapshot (tests/offline/snapshots/nd_*.py)."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import difflib  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelgen.offline import generate_kernel, knob_space  # noqa: E402
from kernelgen.spec import draw_inputs  # noqa: E402
from kernelgen.spec.reference import load_reference  # noqa: E402
from tests.support.nd_specs import ALL, FAMILIES, TUNING_SNAPSHOTS  # noqa: E402
from tests.support.offline_check import import_source, run_guarded  # noqa: E402

pytestmark = pytest.mark.slow
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
REFRESH = "KERNELGEN_UPDATE_SNAPSHOTS"


def _relaid(t: torch.Tensor, how: str) -> torch.Tensor:
    """The same values in another layout: all dims reversed in memory, or every other element of a
    buffer twice as long along the last dim."""
    if t.dim() < 2 or not t.dtype.is_floating_point:
        return t
    if how == "transposed":
        return t.permute(*reversed(range(t.dim()))).contiguous().permute(*reversed(range(t.dim())))
    wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
    wide[..., ::2] = t
    return wide[..., ::2]


def _check(name: str, layout: str, dtypes: tuple[str, ...], tmp_path: Path) -> None:
    spec = ALL[name]
    kern = generate_kernel(spec)
    assert kern.family == "nd", f"{name} is served by the {kern.family} family now"
    fn = getattr(import_source(spec.name, kern.source, tmp_path), spec.name)
    ref = load_reference(spec)
    for ci, case in enumerate(spec.test_cases):
        for dtype in (d for d in dtypes if d in spec.dtypes):
            inputs = [_relaid(t, layout) if layout != "contiguous" else t
                      for t in draw_inputs(spec, case, dtype, 7 + ci, "cpu")]
            assert layout == "contiguous" or any(not t.is_contiguous() for t in inputs)
            expected = ref(*inputs, **spec.param_defaults)
            got = run_guarded(fn, inputs)
            assert got.shape == expected.shape and got.dtype == expected.dtype, (got.shape, got.dtype, expected.shape)
            if expected.dtype.is_floating_point:
                tol = spec.tolerance_for(dtype)
                torch.testing.assert_close(got.float(), expected.float(), atol=tol.atol, rtol=tol.rtol,
                                           msg=lambda m: f"{name} case {ci} {dtype} {layout}: {m}")
            else:
                assert torch.equal(got, expected), f"{name} case {ci} {dtype} {layout}"


@pytest.mark.parametrize("name", sorted(ALL))
def test_contiguous_inputs_in_float32_and_float16(name: str, tmp_path: Path) -> None:
    _check(name, "contiguous", ("float32", "float16"), tmp_path)


@pytest.mark.parametrize("name", sorted(ALL))
def test_transposed_and_sliced_inputs(name: str, tmp_path: Path) -> None:
    first, second = ("transposed", "sliced") if len(name) % 2 else ("sliced", "transposed")
    _check(name, first, ("float32",), tmp_path)
    _check(name, second, ("float16",), tmp_path)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_one_kernel_per_family_matches_its_snapshot(family: str) -> None:
    spec = FAMILIES[family][0]
    source = generate_kernel(spec).source
    path = SNAPSHOTS / f"nd_{family}_{spec.name}.py"
    if os.environ.get(REFRESH) == "1":
        path.write_text(source)
        return
    want = path.read_text() if path.exists() else ""
    if source != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), source.splitlines(True),
                                            f"snapshots/{path.name} (checked in)", f"{spec.name} (generated now)"))
        pytest.fail(f"the generated {spec.name} kernel differs from its snapshot:\n{diff}\n"
                    f"If intended: {REFRESH}=1 python3 -m pytest tests/offline/test_nd_families.py -k snapshot",
                    pytrace=False)


def test_every_nd_snapshot_has_a_family() -> None:
    want = {f"nd_{family}_{specs[0].name}" for family, specs in FAMILIES.items()} | set(TUNING_SNAPSHOTS)
    stale = sorted({p.stem for p in SNAPSHOTS.glob("nd_*.py")} - want)
    assert not stale, f"nd snapshots no family writes (delete them): {stale}"


def test_knob_space_and_knobs_reach_the_file(tmp_path: Path) -> None:
    """The family's knobs are the optimizer's: a changed setting changes the file and stays correct."""
    spec = ALL["group_norm3"]
    space = knob_space(spec)
    assert space and all(len(v) >= 2 for v in space.values()), space
    knob = next(iter(space))
    base, other = generate_kernel(spec), generate_kernel(spec, {knob: space[knob][1]})
    assert other.source != base.source and other.family == "nd"
    with pytest.raises(ValueError, match="unknown knob"):
        generate_kernel(spec, {"NO_SUCH_KNOB": 1})
