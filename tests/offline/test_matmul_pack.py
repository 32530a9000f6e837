"""float32 GEMMs read K-major (issue 29): Hopper's wgmma reads 32-bit operands only K-major, so the
matmul family and nd's matmul stages copy an operand that is not (b [K, N] row-major, a read
transposed) or whose rows are not 16 bytes (K odd) into [rows, K] with K contiguous first (`pack`),
then take the fp32 tile table (kernelgen.offline.launch.fp32_tiles). Each form gives the reference's
answer on awkward shapes, transposed and sliced inputs and 16-bit dtypes in the interpreter; the plan
packs exactly the operands it should; the file's tiles are the launch model's; round 0 writes pack
per perf case."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelgen.offline import first_choices, generate_kernel  # noqa: E402
from kernelgen.offline.launch import fp32_tiles, matmul_tiles  # noqa: E402
from kernelgen.offline.matmul.knobs import MatmulKnobs  # noqa: E402
from kernelgen.spec import draw_inputs  # noqa: E402
from kernelgen.spec.reference import load_reference  # noqa: E402
from tests.support.nd_specs import ALL  # noqa: E402
from tests.support.offline_check import import_source, make_spec, run_guarded  # noqa: E402


def _mm(name: str, body: str, cases: list, extra: tuple = ()):
    args = ", ".join(("a", "b") + extra)
    return make_spec(name=name, inputs=[{"name": n} for n in ("a", "b") + extra], test_cases=cases,
                     reference=f"def {name}({args}):\n    return {body}\n", dtypes=["float32", "float16"])


MATMULS = {
    # K = 37: rows of neither operand are 16 bytes; K = 64: only b [K, N] needs the copy
    "mm": _mm("mm", "a @ b", [{"a": [45, 37], "b": [37, 29]}, {"a": [33, 64], "b": [64, 17]}]),
    "mm_at": _mm("mm_at", "a.T @ b", [{"a": [36, 45], "b": [36, 29]}]),  # a read transposed
    "mm_bt": _mm("mm_bt", "a @ b.T", [{"a": [45, 36], "b": [29, 36]}]),  # already K-major
    "mm_bias_relu": _mm("mm_bias_relu", "torch.relu(a @ b + c)", [{"a": [45, 37], "b": [37, 29], "c": [29]}], ("c",)),
}
ND = ["bmm", "tensor3_matmul", "einsum4", "linear_leaky_sum"]


def _relaid(t: torch.Tensor) -> torch.Tensor:
    """The same values with every dim reversed in memory."""
    if t.dim() < 2:
        return t
    return t.permute(*reversed(range(t.dim()))).contiguous().permute(*reversed(range(t.dim())))


def _check(spec, knobs: dict, tmp: Path) -> object:
    kern = generate_kernel(spec, knobs)
    module = import_source(spec.name, kern.source, tmp)
    fn, ref = getattr(module, spec.name), load_reference(spec)
    for ci, case in enumerate(spec.test_cases):
        for dtype, relaid in (("float32", False), ("float32", True), ("float16", False)):
            inputs = draw_inputs(spec, case, dtype, 3 + ci, "cpu")
            if relaid:
                inputs = [_relaid(t) for t in inputs]
            want, got = ref(*inputs, **spec.param_defaults), run_guarded(fn, inputs)
            tol = spec.tolerance_for(dtype)
            torch.testing.assert_close(got.float(), want.float(), atol=tol.atol, rtol=tol.rtol,
                                       msg=lambda m: f"{spec.name} {knobs} case {ci} {dtype} relaid={relaid}: {m}")
    return module


@pytest.mark.parametrize("knobs", [{}, {"pack": True}, {"pack": False}], ids=["auto", "pack", "nopack"])
@pytest.mark.parametrize("name", sorted(MATMULS))
def test_matmul_family_packs_and_computes_the_reference(name: str, knobs: dict, tmp_path: Path) -> None:
    spec = MATMULS[name]
    assert generate_kernel(spec).family == "matmul"
    _check(spec, knobs, tmp_path)


@pytest.mark.parametrize("knobs", [{}, {"pack": True}, {"pack": False}], ids=["auto", "pack", "nopack"])
@pytest.mark.parametrize("name", ND)
def test_nd_matmul_stages_pack_and_compute_the_reference(name: str, knobs: dict, tmp_path: Path) -> None:
    assert generate_kernel(ALL[name]).family == "nd"
    _check(ALL[name], knobs, tmp_path)


def _plan(module, spec, case, dtype=torch.float32, relaid=False):
    ts = [torch.empty(case[n], dtype=dtype) for n in spec.input_names]
    if relaid:
        ts = [_relaid(t) for t in ts]
    return module._plan(*[a for t in ts for a in (t.shape, t.stride(), t.dtype)], torch.device("cpu"))


def test_the_plan_packs_exactly_the_operands_that_need_it(tmp_path: Path) -> None:
    mm = MATMULS["mm"]
    module = import_source("mm", generate_kernel(mm).source, tmp_path)
    assert _plan(module, mm, {"a": [45, 37], "b": [37, 29]}).packed == ((False, 37), (True, 37))  # K odd: both
    assert _plan(module, mm, {"a": [33, 64], "b": [64, 17]}).packed == (None, (True, 64))  # b read along N
    assert _plan(module, mm, {"a": [33, 64], "b": [64, 17]}, relaid=True).packed == ((False, 64), None)  # b^T given
    assert _plan(module, mm, {"a": [33, 64], "b": [64, 17]}, torch.float16).packed == (None, None)  # 16-bit: any order
    bt = MATMULS["mm_bt"]
    module = import_source("mm_bt", generate_kernel(bt).source, tmp_path)
    assert _plan(module, bt, {"a": [45, 36], "b": [29, 36]}).packed == (None, None)
    plain = import_source("mm", generate_kernel(mm, {"pack": False}).source, tmp_path / "..")
    assert _plan(plain, mm, {"a": [45, 37], "b": [37, 29]}).packed == (None, None)
    # nd: a batched b [B, K, N] is copied per batch; a b broadcast over the batch once (stride 0 kept)
    bmm = import_source("bmm", generate_kernel(ALL["bmm"]).source, tmp_path)
    (pack,) = _plan(bmm, ALL["bmm"], {"a": [2, 16, 24], "b": [2, 24, 8]}).packs
    assert pack[0] is None and pack[1][0] == (2, 24, 8) and pack[1][3] is True
    t3 = import_source("tensor3_matmul", generate_kernel(ALL["tensor3_matmul"]).source, tmp_path)
    (pack,) = _plan(t3, ALL["tensor3_matmul"], {"a": [3, 17, 12], "b": [12, 33]}).packs
    assert pack[0] is None and pack[1][0] == (12, 33)  # a's batch merges into M: b is one [K, N], copied once
    (pack,) = _plan(t3, ALL["tensor3_matmul"], {"a": [3, 17, 9], "b": [9, 33]}).packs
    assert pack[0][:2] == ((51, 9), (9, 1)) and pack[1] is not None  # K = 9: rows of 36 bytes, both copied
    # a with its dims reversed in memory is copied contiguous by the plan's layout pass, b^T is K-major
    assert _plan(t3, ALL["tensor3_matmul"], {"a": [3, 17, 12], "b": [12, 33]}, relaid=True).packs == (None,)


@pytest.mark.parametrize("m,n,k,kmajor,tf32", [(4096, 4096, 4096, True, False), (32768, 32768, 64, True, False),
                                               (4096, 4096, 4096, False, False), (4096, 4096, 4096, True, True),
                                               (512, 512, 4096, True, False)])
def test_the_files_fp32_tiles_are_the_launch_models(m: int, n: int, k: int, kmajor: bool, tf32: bool, tmp_path: Path) -> None:
    module = import_source("mm", generate_kernel(MATMULS["mm"]).source, tmp_path)
    knobs = MatmulKnobs()
    got = module._launch_config(m, n, k, True, kmajor, tf32, **knobs.model_dump())
    assert got == matmul_tiles(knobs, m, n, True, k, kmajor, tf32)
    assert got[:3] + got[4:] == fp32_tiles(m, n, k, kmajor, tf32)
    assert fp32_tiles(4096, 4096, 4096, True, False) == (128, 128, 64, 8, 3)  # measured: 1.85x cuBLAS fp32 (H200)


def test_round_zero_writes_pack_per_case() -> None:
    spec = MATMULS["mm"].model_copy(update={"perf_cases": [{"a": [4096, 4096], "b": [4096, 4096]}]})
    fp32, fp16 = first_choices(spec, 132)
    assert fp32.knobs == {"pack": True} and "b (read along N)" in fp32.reason and "128x128x64x8x3" in fp32.reason
    assert fp16.knobs == {}
    bt = MATMULS["mm_bt"].model_copy(update={"perf_cases": [{"a": [4096, 4096], "b": [4096, 4096]}]})
    assert first_choices(bt, 132)[0].knobs == {} and "already K-major" in first_choices(bt, 132)[0].reason
    odd = MATMULS["mm_bt"].model_copy(update={"perf_cases": [{"a": [8205, 2949], "b": [5921, 2949]}]})
    assert first_choices(odd, 132)[0].knobs == {"pack": True} and "not 16 bytes" in first_choices(odd, 132)[0].reason
