"""Whether a kernel accepts its perf cases' shapes, asked before any timing and without running them.

A kernel can pass every check on the small test cases and still refuse the shapes it is timed on: four
GEMM + GroupNorm problems of KernelBench's level 2 (62, 75, 88, 94) passed, then `bench` called them
INVALID with `gemm_weight.shape[0] is 8192; the reference needs 512 there` (their kernel was specialised
to a test size). So the accuracy verdict asks the worker to call the kernel on meta tensors of each perf
case's shapes with every Triton launch a no-op (kernelgen.verify.worker.server op_probe): its shape
guards run and its outputs are allocated, nothing is computed, no memory is used. The outputs' shapes
and dtypes must be the reference's on the same meta tensors.

It is evidence from the candidate's own process (a kernel could answer differently on meta tensors
than on real ones); the perf case's own timed outputs are still compared with the baseline's when it is
timed. A refusal the meta device itself causes (an op with no meta kernel) says nothing: the case is
noted as not probed, not failed.
"""

from __future__ import annotations

from typing import Any

from kernelgen.nodynamo import without_dynamo
from kernelgen.spec import Case, OperatorSpec, torch_dtype
from kernelgen.verify.judge.judge import Judge
from kernelgen.verify.results import CaseCheck

# what torch says when the meta device, not the kernel, is what failed
_META_MISSING = ("'Meta' backend", "meta tensor", "on meta", "data-dependent")


def perf_shape_cases(spec: OperatorSpec) -> list[tuple[int, Case, str]]:
    """(index, case, dtype) for every perf case that is not also a test case, in every dtype timed."""
    if not spec.perf_cases:
        return []
    dtypes = spec.effective_perf_dtypes
    return [(i, case, dtype) for i, case in enumerate(spec.perf_cases) if case not in spec.test_cases for dtype in dtypes]


def _expected(judge: Judge, case: Case, dtype: str) -> list[tuple[list[int], str]] | None:
    """The reference's output shapes and dtypes on meta tensors; None where it cannot say."""
    import torch

    spec = judge.spec
    args = [torch.empty(case[i.name], dtype=torch_dtype(spec.input_dtype(i, dtype)), device="meta") for i in spec.inputs]
    try:
        out = without_dynamo(lambda: judge.baseline(*args, **spec.param_defaults))
    except Exception:  # noqa: BLE001 - no meta kernel, or a baseline run in a worker: shapes unknown
        return None
    outs = out if type(out) in (tuple, list) else (out,)
    return [(list(o.shape), str(o.dtype).removeprefix("torch.")) for o in outs if isinstance(o, torch.Tensor)]


def probe(judge: Judge, worker: Any, slot: str, index: int, case: Case, dtype: str, decides: bool) -> CaseCheck | str:
    """The check of one perf case in one dtype; a note (str) where the meta device cannot tell."""
    spec = judge.spec
    shapes = [case[i.name] for i in spec.inputs]
    dtypes = [spec.input_dtype(i, dtype) for i in spec.inputs]
    reply = worker.request({"op": "probe", "slot": slot, "shapes": shapes, "dtypes": dtypes, "params": spec.param_defaults})
    check = CaseCheck(case=index, variant="perf-shape", shapes=case, dtype=dtype, seed=0, call="perf-shape", passed=True,
                      decides=decides)
    where = " ".join(f"{k}{v}" for k, v in case.items())
    if not reply.ok:
        lines = [ln.strip() for ln in reply.error.strip().splitlines() if ln.strip()]
        last = lines[-1][:400] if lines else "no message"
        if last.startswith("NotImplementedError") or any(w in last for w in _META_MISSING):
            return f"perf case {index} {where} {dtype}: not probed on meta tensors ({last[:200]})"
        check.passed = False
        check.message = f"the kernel refuses perf case {index} ({where}, {dtype}), the shapes it is timed on: {last}"
        return check
    got = [(o.get("shape"), o.get("dtype")) for o in reply.info.get("outputs", [])]
    want = _expected(judge, case, dtype)
    if want is not None and got != want:
        check.passed = False
        check.message = (f"on perf case {index} ({where}, {dtype}) the kernel returns "
                         f"{_describe(got)} where the reference returns {_describe(want)}")
    return check


def _describe(outs: list[tuple[Any, Any]]) -> str:
    return ", ".join(f"{d}{list(s)}" if s is not None else "a non-tensor" for s, d in outs) or "nothing"
