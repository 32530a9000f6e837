"""What a measurement was taken under, so that a later command can tell whether it still holds instead
of timing the same kernel again.

A `PerformanceResult` records its basis when it is taken: the device (its kind and model), the tool
(KernelGen's version and the hash of its files), the versions of PyTorch and Triton, the precision
policy, the perf cases x dtypes timed, and which baselines were timed beside the kernel (eager,
torch.compile, the peer libraries). `changes` compares a stored result with what a measurement taken
now would be, and says in words what differs; an empty list means the stored numbers are the ones a
new measurement would set out to take. The numbers are not compared: timing noise is not a change.

Used by `optimize` (round 0 measured by `new` is not timed again before its diagnosis: 25-28 s of an
H100 per KernelBench problem) and by the batch's final measurement (the best round's record, where it
holds every baseline, is the final one; kernelgen.batch.job).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from kernelgen.devices import DeviceInfo
    from kernelgen.spec import OperatorSpec
    from kernelgen.verify.results import PerformanceResult

ALL_BASELINES = ("eager", "compile", "peers")  # what `kernelgen bench` times beside the kernel on a GPU


def tool_version() -> str:
    """KernelGen's version and the hash of its files (read once per process, as the integrity record's)."""
    import kernelgen
    from kernelgen.verify.judge.integrity import tool_files

    digest = hashlib.sha256(json.dumps(tool_files(), sort_keys=True).encode()).hexdigest()
    return f"kernelgen {kernelgen.__version__}, files {digest[:12]}"


def device_name(device: DeviceInfo) -> str:
    """The name a measurement records for its device (the GPU's model on CUDA)."""
    if device.kind == "cuda":
        import torch

        return torch.cuda.get_device_name()
    return device.kind


def timed_cases_of(spec: OperatorSpec, interpreter: bool) -> tuple[list, list[str]]:
    """The perf cases and dtypes a measurement times: the spec's, or under the interpreter only the first
    test case in its first checkable dtype (perf shapes are sized for a GPU: hours on the interpreter)."""
    if interpreter:
        from kernelgen.verify.judge.inputs import checkable_dtypes

        dtypes, _ = checkable_dtypes(spec, True)
        return spec.test_cases[:1], dtypes[:1]
    return spec.effective_perf_cases, spec.effective_perf_dtypes


def changes(result: PerformanceResult, spec: OperatorSpec, *, kind: str, interpreter: bool, name: str | None,
            baselines: Iterable[str] = ("eager",)) -> list[str]:
    """What differs between the basis `result` was measured on and a measurement taken now, on a device
    of `kind` named `name` (None: any of that kind, as a batch's basis says where it knows no model),
    with `baselines` beside the kernel, in words; [] when it would measure the same. Starts no device."""
    import torch
    import triton

    from kernelgen.precision import precision_policy

    out: list[str] = []
    if not result.tool:
        out.append("the measurement does not say which KernelGen took it")
    elif result.tool != tool_version():
        out.append(f"KernelGen changed ({result.tool} -> {tool_version()})")
    if result.device != kind or result.interpreter != interpreter:
        out.append(f"the device changed ({result.device} -> {kind})")
    elif name is not None and result.device_name != name:
        out.append(f"the device changed ({result.device_name} -> {name})")
    if (result.torch_version, result.triton_version) != (torch.__version__, triton.__version__):
        out.append(f"PyTorch or Triton changed ({result.torch_version}, {result.triton_version} -> "
                   f"{torch.__version__}, {triton.__version__})")
    policy = precision_policy()
    if result.precision is None or (result.precision.matmul, result.precision.conv) != (policy.matmul, policy.conv):
        out.append(f"the precision policy changed ({result.precision.describe() if result.precision else 'not recorded'}"
                   f" -> {policy.describe()})")
    cases, dtypes = timed_cases_of(spec, interpreter)
    want = sorted((json.dumps(c, sort_keys=True), d) for c in cases for d in dtypes)
    have = sorted((json.dumps(c.shapes, sort_keys=True), c.dtype) for c in result.cases)
    if want != have:
        out.append("the perf cases changed")
    missing = [b for b in baselines if b not in result.baselines]
    if missing:
        out.append(f"it did not time {', '.join(missing)}")
    return out


def final_baselines(interpreter: bool) -> tuple[str, ...]:
    """The baselines a final measurement (`kernelgen bench`) times: on the interpreter only eager
    (torch.compile and the peers are not timed there)."""
    return ("eager",) if interpreter else ALL_BASELINES
