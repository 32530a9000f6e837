"""How much GPU memory an operator needs at its peak, estimated before it starts, on shape-only
('meta') tensors: nothing is allocated and no device is touched.

The reference is run once per case and dtype with every tensor it creates tracked (bytes alive at
once, a view costing nothing), and once more with its floating inputs upcast to float64, as the
judge's truth is computed (kernelgen.verify.judge.oracle). From those, with I the inputs' bytes, O
the outputs', P eager's peak (inputs, intermediates and outputs alive at once) and P64 the float64
run's peak (its upcast inputs included), an operator holds at once, on its one GPU:

- the judge:   I + O (the drawn inputs, eager's outputs kept as the expected values), plus the
               largest of: eager or torch.compile running again (P - I: Inductor's fused graph holds
               no more than eager's intermediates), the float64 truth (P64: where it does not fit,
               the judge computes it in chunks, so this errs high), the candidate's outputs read back
               and compared in float64 (O + the comparison's float64 copies: 4 of the output, or of
               one 2^26-element slab where it is compared slab by slab, kernelgen.verify.judge.compare),
               and a timed call's output read back while timing: the rotated inputs, eager on them
               (P), the read-back output, the comparison, the truth of a sample of an eighth of the
               rows (P64 / 8); a test case also keeps a private copy of the inputs for eager (+ I);
- one worker:  I + 3 O while timing (the replay worker: its copy of the inputs, the output being made,
               the kept call's output, and as much again for the kernel's scratch: a two-stage
               kernel's partials, a split-K's partial sums); the recording worker (I + 2 O) releases
               its copy before the replay worker takes one, so the two are not counted together
               (kernelgen.verify.judge.devicememory); a check holds I + 2 O;
- the peers:   P + O + P64 / 8 in a process of their own (their inputs and the reference's outputs, the
               peer's outputs, and for a peer off eager by more than the tolerance the truth it is then
               judged by, its budget an eighth of the float64 run's: kernelgen.verify.judge.peerproc),
               timed beside the judge's work (kernelgen.verify.judge.peerproc) -- or, where
               a case's inputs take 4 GiB or more (LATE_PEERS_BYTES), after the kernel's timings, when
               the judge has let its case go: then the larger of the two counts, not their sum;
- the baselines timed ahead (kernelgen.batch.ahead), where the batch times them: P + O in a
  process of their own (eager and torch.compile on its own copy of the inputs) beside `new`'s checks
  and, for small inputs, beside the kernel's timings too; the peers' process is then its child. Where
  a case's inputs take LATE_PEERS_BYTES or more, the judge waits for it to end before drawing them;
- a CUDA context per process (judge, worker, peers, and the baselines' process): CONTEXT_BYTES each.

Test cases are counted with the check's terms and every dtype checked; perf cases with the
timing's terms and every dtype timed; the need is the largest. It is an estimate: the allocator's
rounding and Triton's own buffers are not in it, and an operator that still runs out of memory is
retried alone on an idle GPU (kernelgen.batch.placement).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

GiB = 1 << 30
CONTEXT_BYTES = 512 << 20  # a CUDA context and the caching allocator's first blocks (~500 MiB on an H100)
PROCESSES = 3  # judge, worker, peer-library process
COMPARE_COPIES = 4  # float64 copies of an output the comparison holds at once (got, expected, |diff|, bound)
COMPARE_SLAB = 1 << 26  # elements compared at once in a huge output (kernelgen.verify.judge.compare.CHUNK)


@dataclass(frozen=True)
class Run:
    """What one run of the reference on meta tensors holds, in bytes."""

    peak: int  # everything alive at once, inputs included
    inputs: int
    outputs: int
    output_elements: int


def _run(reference: Any, spec: Any, case: dict[str, list[int]], dtype: str, *, upcast: bool) -> Run:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from kernelgen.spec import torch_dtype

    alive = {"now": 0, "peak": 0}

    def count(t: Any) -> None:
        size = t.numel() * t.element_size()
        alive["now"] += size
        alive["peak"] = max(alive["peak"], alive["now"])
        weakref.finalize(t, lambda: alive.__setitem__("now", alive["now"] - size))

    class Track(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            out = func(*args, **(kwargs or {}))
            if getattr(func, "is_view", False):
                return out  # a view shares its base's memory
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and not any(t is a for a in args):  # an in-place op returns its input
                    count(t)
            return out

    def made(i: Any) -> Any:
        dt = torch_dtype(spec.input_dtype(i, dtype))
        return torch.empty(case[i.name], dtype=torch.float64 if upcast and dt.is_floating_point else dt, device="meta")

    inputs = [made(i) for i in spec.inputs]
    for t in inputs:
        count(t)
    with Track():
        out = reference(*inputs, **spec.param_defaults)
    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
    return Run(alive["peak"], sum(t.numel() * t.element_size() for t in inputs),
               sum(o.numel() * o.element_size() for o in outs), sum(o.numel() for o in outs))


def _truth(reference: Any, spec: Any, case: dict[str, list[int]], dtype: str, eager: Run) -> int:
    """P64: the float64 run's peak (eager's, scaled to 8-byte elements, where float64 has no meta kernel)."""
    if dtype == "float64":
        return 0  # no higher precision to compute
    try:
        return _run(reference, spec, case, dtype, upcast=True).peak
    except Exception:  # noqa: BLE001 - an op without float64: the judge falls back to a float32 truth or none
        from kernelgen.spec import torch_dtype

        return eager.peak * 8 // torch_dtype(dtype).itemsize


def _compare(run: Run) -> int:
    return COMPARE_COPIES * 8 * min(run.output_elements, COMPARE_SLAB)


def check_need(reference: Any, spec: Any, case: dict[str, list[int]], dtype: str) -> int:
    """Bytes on the GPU while one test case is checked (see the module's docstring)."""
    e = _run(reference, spec, case, dtype, upcast=False)
    judge = 2 * e.inputs + e.outputs + max(e.peak - e.inputs, _truth(reference, spec, case, dtype, e),
                                           e.outputs + _compare(e))
    return judge + e.inputs + 2 * e.outputs


def ahead_need(reference: Any, spec: Any, case: dict[str, list[int]], dtype: str) -> int:
    """Bytes the baselines' process, or its peers' child, holds while it times one perf case (see the
    module's docstring): the peers' terms, P + O + P64 / 8 (the baselines' own process computes no
    truth: for it the estimate errs high by P64 / 8)."""
    e = _run(reference, spec, case, dtype, upcast=False)
    return e.peak + e.outputs + _truth(reference, spec, case, dtype, e) // 8


def timing_need(reference: Any, spec: Any, case: dict[str, list[int]], dtype: str, *, ahead: bool = False) -> int:
    """Bytes on the GPU while one perf case is timed (see the module's docstring); `ahead`: with the
    baselines timed ahead in a process of their own."""
    from kernelgen.verify.judge.devicememory import LATE_PEERS_BYTES

    e = _run(reference, spec, case, dtype, upcast=False)
    truth = _truth(reference, spec, case, dtype, e)
    read = e.peak + e.outputs + _compare(e) + truth // 8  # a timed call's output read back, on rotated inputs
    judge = e.inputs + e.outputs + max(e.peak - e.inputs, truth, e.outputs + _compare(e), read)
    worker, peers = e.inputs + 3 * e.outputs, e.peak + e.outputs + truth // 8
    own = e.peak + e.outputs if ahead else 0  # the baselines' process: eager and torch.compile on its own inputs
    return max(judge + worker, peers, own) if e.inputs >= LATE_PEERS_BYTES else judge + worker + peers + own


def ahead_bytes(spec: Any) -> int | None:
    """Bytes the baselines' process (and its peers' child) holds at its peak, contexts included: what
    timing them ahead of the operator's own start (kernelgen.batch.ahead) needs beside another's run.
    None when the reference does not run on meta tensors."""
    from kernelgen.spec import load_reference

    try:
        reference = load_reference(spec)
        own = [ahead_need(reference, spec, case, dtype)
               for case in spec.effective_perf_cases for dtype in spec.effective_perf_dtypes]
    except Exception:  # noqa: BLE001 - a reference without meta kernels: no estimate
        return None
    return 2 * max(own, default=0) + 2 * CONTEXT_BYTES


def memory_need(spec: Any, *, ahead: bool = False) -> int | None:
    """Bytes an operator needs on its GPU at its peak, CUDA contexts included; None when its reference
    does not run on meta tensors (no estimate: the operator is placed as if it were small). `ahead`: its
    baselines are timed ahead, beside `new` (kernelgen.batch.ahead)."""
    from kernelgen.spec import load_reference

    try:
        reference = load_reference(spec)
        checks = [check_need(reference, spec, case, dtype) for case in spec.test_cases for dtype in spec.dtypes]
        perf = [(case, dtype) for case in spec.effective_perf_cases for dtype in spec.effective_perf_dtypes]
        timings = [timing_need(reference, spec, case, dtype, ahead=ahead) for case, dtype in perf]
        if ahead and perf and checks:  # the baselines' process (and its peers' child) beside the checks
            timings.append(max(checks) + 2 * max(ahead_need(reference, spec, case, dtype) for case, dtype in perf))
    except Exception:  # noqa: BLE001 - a reference without meta kernels: no estimate
        return None
    return max(checks + timings) + (PROCESSES + ahead) * CONTEXT_BYTES
