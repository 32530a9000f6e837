"""The truth of one case at any size: the reference run in float64 on the same inputs, whole where it
fits in device memory, else in batch slices, else on the host, and only as a last resort in IEEE
float32 -- never eager's own output at a fixed tolerance (kernelgen.verify.judge.oracle is the rule).

Whole: the float64 run takes about the inputs in float64 plus four output-sized float64 tensors (the
reference's intermediates); it is tried when that fits in half the device's free memory
(`KERNELGEN_TRUTH_MEMORY` bytes instead, where set: the hook tests force the other paths with).

In batch slices: where an output's dim 0 is the batch of some inputs, the reference runs on a slice of
those inputs' rows, as many rows at a time as the budget allows. A slice is trusted only after the op
proves batch-separable on it: the reference in IEEE float32 on the whole inputs (eager itself where
the policy keeps eager IEEE) must give those rows, in every element, within 16x the slice's own
float32 rounding of the slice's float64 truth plus a sixteenth of the dtype's tolerance. An op that
mixes rows (training-mode BatchNorm, a cumulative sum over the batch) is off by its function there,
orders of magnitude above both; a separable one whose algorithm changes with the batch size (cuDNN
picks per shape; a GEMM of 1024 rows is blocked unlike one of one row, 3e-4 apart on level 2's 14
shape) stays within them. A slice's truth off by at most a sixteenth of the tolerance moves no
verdict by more than that. The slices are every
row (a spot check), or a judge-chosen sample of an eighth of them (timed outputs: a cached or stale
result is wrong everywhere), drawn by the judge after the candidate answered. A sample is taken only
where slices are needed anyway (the whole run does not fit): a kernel wrong in a share r of the rows of
a read output goes unseen with probability (1 - r) ** (rows / 8) there, where a whole truth sees it.

On the host: an op that is not separable (a loss, a norm over everything) and does not fit on the
device runs in float64 in host memory (half of what is available), the inputs copied there.

What it costs at KernelBench's largest perf shapes (levels 1 and 2, counted on meta tensors): the
largest output is 2.1 G elements (level 1's 87, 1x1 conv; 38, 39 row norms): 17 GB in float64, in
slices of the batch (16 and 32768 rows); the largest inputs 4.3 G elements (level 1's 45, average
pooling, batch 16): 34 GB in float64, also in slices; the most arithmetic 1.3 TFLOP (level 1's 68,
a transposed 3-D convolution), a fraction of a second at an H100's float64 rate (34 TFLOP/s peak;
cuDNN's float64 kernels reach a part of it -- to be measured, benchmarks/conv_gpu.py). A timed
output's sample costs an eighth of that. Not separable and large: level 1's 94/96 (losses over 2.1 G
elements, 17 GB of float64 inputs on the host, memory-bound: seconds).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from kernelgen.spec import ToleranceSpec
from kernelgen.verify.judge import oracle, tf32ref
from kernelgen.precision import PrecisionPolicy, precision_policy
from kernelgen.verify.judge.precision import applied
from kernelgen.verify.judge.truthmemory import bytes64, float64_need, host_budget, truth_budget

SAMPLE_SHARE = 1 / 8  # of the batch rows a sampled truth covers
SEPARABLE_SLACK = 16.0  # the whole run's rows vs the slice's own rounding, both against the slice's truth
TOLERANCE_SHARE = 1 / 16  # ...plus this share of the dtype's tolerance


class NotSeparable(Exception):
    """A batch slice's proof failed after the first: the case's truth is computed another way."""


@dataclass
class CaseTruth:
    """Per output, its truth (oracle.FullTruth or RowsTruth, None for an integer or float64 output);
    `how`: in words; `retry`: the truth another way, where a slice's proof can still fail."""

    outputs: tuple
    how: str = ""
    retry: Callable[[], "CaseTruth"] | None = field(default=None, repr=False)


def case_truth(baseline: Callable[..., Any], inputs: list[Any], params: dict[str, Any], eager: tuple, *,
               policy: PrecisionPolicy | None = None, sample: bool = False, tol: ToleranceSpec | None = None,
               budget: int | None = None) -> CaseTruth:
    """The truth of one case whose eager outputs (under `policy`, the one in force by default) are
    `eager`. `sample`: where slices are needed, a judge-chosen eighth of the batch rows is enough.
    `tol`: the tolerance the outputs are compared with (a slice's proof allows a share of it).
    `budget`: the bytes it may take at once, where not half the free memory (truth_budget)."""
    import torch

    policy = policy or precision_policy()
    under = policy.label()
    floats = [e for e in eager if isinstance(e, torch.Tensor) and e.dtype.is_floating_point]
    if not floats or all(e.dtype == torch.float64 for e in floats):
        return CaseTruth(tuple(None for _ in eager))
    device = floats[0].device
    need = float64_need(inputs, eager)
    if need <= truth_budget(device, budget):
        whole = _whole(baseline, inputs, params, eager, under, policy=policy)
        if whole is not None:
            return whole
    sliced = _Slices.plan(baseline, inputs, params, eager, policy, sample=sample, tol=tol, budget=budget)
    if sliced is not None:
        return CaseTruth(sliced.outputs(), sliced.how, retry=lambda: _elsewhere(baseline, inputs, params, eager, under, device))
    return _elsewhere(baseline, inputs, params, eager, under, device)


def _whole(baseline: Callable[..., Any], inputs: list[Any], params: dict[str, Any], eager: tuple, under: str,
           how: str = "float64, whole", *, policy: PrecisionPolicy | None = None) -> CaseTruth | None:
    """The reference in float64 (float32 for an op without float64) on the inputs as given; None when
    the device runs out of memory for it. `policy`: where it allows TF32, each float32 output's truth
    also gives the reference under that TF32, computed only if a comparison needs it (_policy_refs)."""
    import torch

    try:
        with applied(exact=True):  # a float32 truth is IEEE float32, whatever the policy
            truths, label = oracle.truth(baseline, inputs, params, eager)
    except torch.OutOfMemoryError:
        _empty_cache(inputs)
        return None
    how = how if label == "float64" else f"{label}, whole (the op has no float64 kernel)"
    note = "" if how == "float64, whole" else how
    refs = _policy_refs(baseline, inputs, params, eager, policy) if label == "float64" else [None] * len(truths)
    return CaseTruth(tuple(oracle.FullTruth(t, label, under, note, ref) if t is not None else None
                           for t, ref in zip(truths, refs)), how)


def _policy_refs(baseline: Callable[..., Any], inputs: list[Any], params: dict[str, Any], eager: tuple,
                 policy: PrecisionPolicy | None) -> list[Callable[[], Any] | None]:
    """Per output: a function giving the reference under the policy's TF32 (tf32ref), for float32 outputs
    where the policy allows TF32 for convolutions or matmuls; one float64 run for every output, made the
    first time a comparison the eager bound alone fails asks (a tf32x3 or IEEE kernel never pays it)."""
    import torch

    if policy is None or not (policy.conv_tf32 or policy.matmul_tf32):
        return [None] * len(eager)
    made: dict[str, Any] = {}

    def output(i: int) -> Any:
        if "out" not in made:
            try:
                made["out"] = tf32ref.policy_reference(baseline, inputs, params, conv=policy.conv_tf32,
                                                       matmul=policy.matmul_tf32)
            except torch.OutOfMemoryError:
                _empty_cache(inputs)
                made["out"] = None  # the eager bound alone, as before the policy's reference
            except Exception:  # noqa: BLE001 - a reference the dispatch mode cannot run: eager's bound alone
                made["out"] = None
        out = made["out"]
        ref = out[i] if out is not None and i < len(out) else None
        ok = isinstance(ref, torch.Tensor) and tuple(ref.shape) == tuple(eager[i].shape)
        return ref if ok else None

    return [(lambda i=i: output(i)) if isinstance(e, torch.Tensor) and e.dtype == torch.float32 else None
            for i, e in enumerate(eager)]


def _elsewhere(baseline: Callable[..., Any], inputs: list[Any], params: dict[str, Any], eager: tuple, under: str,
               device: Any) -> CaseTruth:
    """Not separable and too large for the device: float64 on the host where it fits there, else the
    reference in IEEE float32 on the device, named as such."""
    need = float64_need(inputs, eager)
    if getattr(device, "type", "cpu") != "cpu" and need <= host_budget():
        host = [t.cpu() if hasattr(t, "cpu") else t for t in inputs]
        shapes = tuple(e.to("meta") if hasattr(e, "to") else e for e in eager)  # its dtypes and shapes, no copy
        found = _whole(baseline, host, params, shapes, under,
                       "float64 on the host (too large for the device, and not separable along dim 0)")
        if found is not None:
            return found
    return _ieee(baseline, inputs, params, eager, under)


def _ieee(baseline: Callable[..., Any], inputs: list[Any], params: dict[str, Any], eager: tuple, under: str) -> CaseTruth:
    """The last resort: the reference in IEEE float32 (TF32 off), as the truth of float32 outputs and of
    16-bit ones; still the oracle's rule, with eager's error measured against it."""
    import torch

    with torch.no_grad(), applied(exact=True):
        out = baseline(*[oracle._upcast(t, torch.float32) for t in inputs], **params)
    outs = tuple(out) if type(out) in (tuple, list) else (out,)
    why = "float32 (IEEE, TF32 off): float64 fits neither the device nor the host here and the op is not separable along dim 0"
    return CaseTruth(tuple(oracle.FullTruth(o, "float32", under, why) if _float_like(o, e) else None
                           for o, e in zip(outs, eager)), why)


def _float_like(t: Any, e: Any) -> bool:
    import torch

    return (isinstance(t, torch.Tensor) and isinstance(e, torch.Tensor) and e.dtype.is_floating_point
            and e.dtype != torch.float64 and tuple(t.shape) == tuple(e.shape))


def _empty_cache(tensors: list[Any]) -> None:
    import torch

    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type == "cuda":
            torch.cuda.empty_cache()
            return


class _Slices:
    """The truth of one case in batch slices: which inputs carry the batch, the row groups, and the
    reference the proof compares with (eager where the policy keeps it IEEE, else an IEEE run)."""

    def __init__(self, baseline: Callable[..., Any], inputs: list[Any], params: dict[str, Any], eager: tuple,
                 sliced: set[int], groups: list[list[int]], proof: tuple, how: str, under: str, tol: ToleranceSpec | None):
        self.baseline, self.inputs, self.params, self.eager = baseline, inputs, params, eager
        self.sliced, self.groups, self.proof, self.how, self.under, self.tol = sliced, groups, proof, how, under, tol
        self._cache: tuple[int, tuple] | None = None  # the last group's truth: every output of a group at once

    @classmethod
    def plan(cls, baseline: Callable[..., Any], inputs: list[Any], params: dict[str, Any], eager: tuple,
             policy: PrecisionPolicy, *, sample: bool, tol: ToleranceSpec | None = None,
             budget: int | None = None) -> "_Slices | None":
        """Slices whose first group proves the op separable, or None (no batch dim, or not separable)."""
        import torch

        batch = _batch(eager)
        if batch is None:
            return None
        for sliced in _batch_inputs(inputs, batch):
            rows = _rows_per_slice(inputs, eager, sliced, batch, budget)
            groups = _groups(batch, rows, sample)
            proof = eager if not (policy.matmul_tf32 or policy.conv_tf32) else None
            try:
                if proof is None:
                    with torch.no_grad(), applied(exact=True):
                        proof = _as_tuple(baseline(*inputs, **params))
                found = cls(baseline, inputs, params, eager, sliced, groups, proof, _how(batch, groups, sample),
                            policy.label(), tol)
                found.truth_of(0)
                return found
            except (NotSeparable, torch.OutOfMemoryError):
                _empty_cache(inputs)
                continue
        return None

    def outputs(self) -> tuple:
        import torch

        return tuple(RowsTruth(self, j) if isinstance(e, torch.Tensor) and e.dtype.is_floating_point
                     and e.dtype != torch.float64 else None for j, e in enumerate(self.eager))

    def truth_of(self, gi: int) -> tuple:
        """Every output's float64 truth on group `gi`'s rows, after its proof (NotSeparable where it fails)."""
        import torch

        if self._cache is not None and self._cache[0] == gi:
            return self._cache[1]
        index = torch.tensor(self.groups[gi], device=self.eager[0].device, dtype=torch.long)
        part = [t.index_select(0, index.to(t.device)) if i in self.sliced else t for i, t in enumerate(self.inputs)]
        rows = tuple(e.index_select(0, index) if isinstance(e, torch.Tensor) and e.dim() else e for e in self.eager)
        with applied(exact=True):
            truths, label = oracle.truth(self.baseline, part, self.params, rows)
            with torch.no_grad():
                mine = _as_tuple(self.baseline(*part, **self.params))
        if label != "float64" or len(mine) != len(rows):
            raise NotSeparable("no float64 truth on a slice")
        for t, own, whole in zip(truths, mine, self.proof):
            if t is not None and not _agree(whole.index_select(0, index), own, t, self.tol):
                raise NotSeparable("the whole run's rows differ from the slice's by more than rounding")
        self._cache = (gi, truths)
        return truths


def _agree(whole_rows: Any, own: Any, t: Any, tol: ToleranceSpec | None) -> bool:
    """Every element of the whole run's rows within SEPARABLE_SLACK x the slice's own rounding of the
    slice's truth, plus TOLERANCE_SHARE of the tolerance there."""
    import torch

    if tuple(whole_rows.shape) != tuple(t.shape) or tuple(own.shape) != tuple(t.shape):
        return False
    finite = torch.isfinite(t)
    ea = (whole_rows.to(torch.float64) - t).abs()[finite]
    eb = (own.to(torch.float64) - t).abs()[finite]
    scale = torch.finfo(own.dtype).eps * (float(t[finite].abs().max()) if bool(finite.any()) else 0.0)
    allowed = SEPARABLE_SLACK * max(float(eb.max()) if eb.numel() else 0.0, scale)
    if tol is not None:
        allowed = allowed + TOLERANCE_SHARE * (tol.atol + tol.rtol * t[finite].abs())
    return bool(torch.isfinite(ea).all()) and bool((ea <= allowed).all())


class RowsTruth:
    """One output's truth in batch slices, handed out in slabs of rows as compare asks (computed group
    by group: never more than one slice's float64 at once)."""

    label = "float64"

    def __init__(self, slices: _Slices, j: int):
        self.slices, self.j = slices, j
        self.note, self.eager_under = slices.how, slices.under

    def slabs(self, step: int) -> Iterator[tuple[int, int, Any]]:
        for gi, group in enumerate(self.slices.groups):
            t = self.slices.truth_of(gi)[self.j]
            pos = 0
            for lo, hi in _runs(group):
                for a in range(lo, hi, step):
                    b = min(a + step, hi)
                    yield a, b, t[pos + a - lo: pos + b - lo]
                pos += hi - lo


def _runs(rows: list[int]) -> list[tuple[int, int]]:
    """Sorted rows as [lo, hi) runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for r in rows:
        if runs and runs[-1][1] == r:
            runs[-1] = (runs[-1][0], r + 1)
        else:
            runs.append((r, r + 1))
    return runs


def _as_tuple(x: Any) -> tuple:
    return tuple(x) if type(x) in (tuple, list) else (x,)


def _batch(eager: tuple) -> int | None:
    """The batch size every output shares in dim 0 (more than one row), or None."""
    import torch

    sizes = {e.shape[0] for e in eager if isinstance(e, torch.Tensor) and e.dim()}
    if len(sizes) != 1 or any(isinstance(e, torch.Tensor) and not e.dim() for e in eager):
        return None
    batch = sizes.pop()
    return batch if batch > 1 else None


def _batch_inputs(inputs: list[Any], batch: int) -> list[set[int]]:
    """Which inputs to slice, in the order tried: every input whose dim 0 is the batch, then the first alone."""
    import torch

    every = {i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.dim() and t.shape[0] == batch}
    options = [every] if every else []
    if 0 in every and every != {0}:
        options.append({0})
    return options


def _rows_per_slice(inputs: list[Any], eager: tuple, sliced: set[int], batch: int, budget: int | None = None) -> int:
    """As many rows per slice as the budget holds (at least one): the unsliced inputs in float64 once,
    the sliced ones and the outputs' intermediates per row."""
    fixed = sum(bytes64(t) for i, t in enumerate(inputs) if i not in sliced)
    per_row = float64_need([inputs[i] for i in sliced], eager) / batch
    device = next(iter(e.device for e in eager if hasattr(e, "device")))
    return max(1, min(batch, int((truth_budget(device, budget) - fixed) // max(per_row, 1))))


def _groups(batch: int, rows: int, sample: bool) -> list[list[int]]:
    """Row groups of at most `rows`: every row in order, or a judge-chosen sample (secrets: the candidate
    cannot know it) of SAMPLE_SHARE of them, at least one."""
    chosen = list(range(batch))
    if sample:
        k = max(1, math.ceil(batch * SAMPLE_SHARE))
        chosen = sorted(secrets.SystemRandom().sample(chosen, k))
    return [chosen[i:i + rows] for i in range(0, len(chosen), rows)]


def _how(batch: int, groups: list[list[int]], sample: bool) -> str:
    n = sum(len(g) for g in groups)
    if sample:
        return f"float64 on a judge-chosen sample of {n} of {batch} batch rows, in {len(groups)} slice(s)"
    return f"float64 in {len(groups)} batch slice(s) of up to {max(len(g) for g in groups)} of {batch} rows"
