"""The small run behind `kernelgen validate`'s "yes": a kernel run once on the spec's smallest test case,
in float32, in the accuracy check's own sandboxed worker (never in the process that asks), and compared
with the reference within the spec's tolerance.

It is not the accuracy check: one case, one dtype, one seed, none of the generated variants or the
anti-cheat calls. It only keeps `validate` from promising a kernel that its own generator cannot write
(KernelBench's problem 12 once validated, then failed 53 of 56 checks on an H100).

    with first_run_worker() as worker:
        result = run_first_case(spec, KernelSource(source, f"{spec.name}_triton.py", "offline"), worker)
    result.passed, result.case, result.why, result.seconds
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from kernelgen.devices import DeviceInfo
from kernelgen.spec import Case, OperatorSpec, load_reference
from kernelgen.verify.judge.compare import as_tuple, compare
from kernelgen.verify.judge.inputs import CheckCase, checkable_dtypes, draw, tolerance_of
from kernelgen.verify.judge.judge import Judge, KernelSource
from kernelgen.verify.poison import draw_fills
from kernelgen.verify.protocol import OtherValue, ProtocolError
from kernelgen.verify.judge.session import WorkerFailure, WorkerSession

# The smallest derived KernelBench case (<= 4,000 elements, kernelgen.spec.kernelbench.shrink) runs in
# well under a second under the interpreter; a kernel still running after this long is looping.
REQUEST_TIMEOUT_S = 120.0
SEED = 0
_SLACK = 16 << 20  # arena room beyond one case's inputs and outputs


@dataclass(frozen=True)
class FirstRun:
    passed: bool
    case: str  # what ran: "case 1 {x: [3, 5]} float32"
    why: str  # why it failed, on one line ("" when it passed)
    seconds: float  # the worker's load, the reference and the one call (not the worker's start)


def interpreter() -> DeviceInfo:
    return DeviceInfo("cpu", "cpu", interpreter=True)


@contextlib.contextmanager
def first_run_worker() -> Iterator[WorkerSession]:
    """A sandboxed worker on the CPU interpreter for one or many first runs (~3 s to start)."""
    worker = WorkerSession(interpreter(), arena_bytes=_SLACK, label="first run", request_timeout_s=REQUEST_TIMEOUT_S)
    try:
        yield worker
    finally:
        worker.close()


def smallest_case(spec: OperatorSpec) -> tuple[int, Case]:
    """The test case with the fewest input elements, and its index."""
    return min(enumerate(spec.test_cases), key=lambda ic: (sum(math.prod(s) for s in ic[1].values()), ic[0]))


def first_dtype(spec: OperatorSpec) -> str | None:
    """float32 where the spec has it, else its first dtype the interpreter runs; None for none (bfloat16)."""
    runnable, _ = checkable_dtypes(spec, interpreter=True)
    return "float32" if "float32" in runnable else (runnable[0] if runnable else None)


def _line(text: str) -> str:
    """The last non-empty line of an error (a traceback's own message), shortened."""
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else "no message"
    return last if len(last) <= 240 else last[:237] + "..."


def _room(worker: WorkerSession, inputs: list[Any], expected: tuple) -> None:
    need = sum(t.numel() * t.element_size() + 64 for t in [*inputs, *expected] if hasattr(t, "numel"))
    need = 2 * need + _SLACK
    if worker.arena is None or worker.arena.size < need:
        worker.attach(need)


def run_first_case(spec: OperatorSpec, kernel: KernelSource, worker: WorkerSession,
                   baseline: Callable[..., Any] | None = None) -> FirstRun:
    """Run `kernel` in `worker` on the spec's smallest test case (float32 where the spec has it) and
    compare with the reference. A failure of the kernel (import, launch, wrong numbers, a timeout) is a
    FirstRun that did not pass; the worker is then stopped only if it timed out or died."""
    started = time.monotonic()
    index, case = smallest_case(spec)
    dtype = first_dtype(spec)
    if dtype is None:
        raise ValueError(f"{spec.name}: no dtype the interpreter runs (bfloat16 only); ask first_dtype() first")
    what = f"case {index} {{{', '.join(f'{k}: {v}' for k, v in case.items())}}} {dtype}"

    def done(passed: bool, why: str = "") -> FirstRun:
        return FirstRun(passed, what, why, time.monotonic() - started)

    check = CheckCase(index, case, dtype, seeds=(SEED,))
    inputs = draw(spec, check, SEED, "cpu")
    expected = as_tuple((baseline or load_reference(spec))(*[t.clone() for t in inputs], **spec.param_defaults))
    slot, key = f"first{kernel.sha256[:16]}", "first"
    try:
        return done(*_call_once(spec, kernel, worker, check, inputs, expected, slot, key))
    except WorkerFailure as e:
        return done(False, f"the worker {'timed out' if e.status == 'timeout' else 'failed'}: {_line(e.message)}")
    finally:
        if not worker.closed:  # a long-lived worker keeps no inputs of a case it is done with
            worker.request({"op": "drop", "key": key})


def _call_once(spec: OperatorSpec, kernel: KernelSource, worker: WorkerSession, check: CheckCase, inputs: list[Any],
               expected: tuple, slot: str, key: str) -> tuple[bool, str]:
    """(passed, why not) of one plain call; WorkerFailure when the worker times out or dies."""
    _room(worker, inputs, expected)
    loaded = worker.request({"op": "load", "slot": slot, "entry": spec.name, "filename": kernel.name, "source": kernel.source})
    if not loaded.ok:
        return False, f"import failed: {_line(loaded.error)}"
    Judge.put(worker, key, inputs)
    fill, _ = draw_fills()
    reply = worker.request({"op": "call", "slot": slot, "key": key, "params": spec.param_defaults, "mode": "plain",
                            "fill": fill.model_dump(), "order": "forward", "seed": SEED, "out_offset": 0,
                            "out_limit": worker.arena.size // 2, "return_inputs": False})
    if not reply.ok:
        return False, f"raised {_line(reply.error)}"
    if len(reply.outputs) != len(expected):
        return False, f"returned {len(reply.outputs)} value(s), the reference {len(expected)}"
    for name, value, exp in zip([o.name for o in spec.outputs], reply.outputs, expected):
        if isinstance(value, OtherValue):
            return False, f"returned a {value.type_name} as `{name}`, not a tensor"
        try:
            got = worker.arena.read(value, "cpu", max_bytes=2 * exp.numel() * exp.element_size() + 4096)
        except ProtocolError as e:
            return False, f"an output `{name}` the judge refuses to read: {e}"
        result = compare(got, exp, tolerance_of(spec, check), fill)
        if not result.passed:
            return False, f"`{name}`: {_line(result.message)}"
    return True, ""
