"""What the judge takes from a recording worker: the plan of one call of the candidate on the inputs it
holds, validated before any replay sees it, or why there is none.

The recording ran in the candidate's own process, so everything in its answer is a claim: its refusal
codes are limited to those a recording can give (anything else reads `not-replayable`), its texts
scrubbed and cut, its plan parsed by pydantic and checked (kernelgen.verify.plan.check_plan) against
the kernels the judge itself extracted from the file and the inputs the judge sent. A plan that lies
about the candidate only changes what is replayed; what is replayed is what is judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kernelgen.verify.judge.scrub import scrub
from kernelgen.verify.plan import Plan, PlanError, check_plan, parse_plan
from kernelgen.verify.protocol import storage_span
from kernelgen.verify.replay.extract import ExtractError

# what a recording may say a call did (kernelgen.verify.record.*); the table of every code: codes.py
REFUSALS = {"torch-compute-in-wrapper", "host-read", "outside-tensor", "not-replayable", "plan-differs", "off-stream-launch",
            "launch-hook", "no-triton-launch", "output-not-fresh", "wrong-outputs"}
NOT_REPLAYABLE = "not-replayable"


@dataclass
class Recorded:
    plan: Plan | None = None
    refusal: tuple[str, str] | None = None  # (code, message): what the call did that a replay cannot stand for
    error: str = ""  # what the candidate raised (its own exception, scrubbed by the session)
    notes: list[str] = field(default_factory=list)
    evidence: list[tuple[str, str]] = field(default_factory=list)  # what the worker's own guard saw (harness-tampering)
    call_ms: float = 0.0  # the recording worker's claim: sizes the host-time request, nothing else


def input_bytes(inputs: list[Any]) -> list[int]:
    """Bytes of each input's storage as a worker holds it: its span, from its first element."""
    return [storage_span(t) * t.element_size() for t in inputs]


def _same_inputs(plan: Plan, inputs: list[Any]) -> str:
    for i, (v, t) in enumerate(zip(plan.inputs, inputs)):
        if (v.dtype, v.shape, v.stride) != (str(t.dtype).removeprefix("torch."), list(t.shape), list(t.stride())):
            return f"input {i} was recorded as {v.dtype}{v.shape} stride {v.stride}, not as the judge sent it"
    return ""


def record(judge: Any, kernel: Any, worker: Any, slot: str, key: str, inputs: list[Any], *, warmup: bool = True,
           calls: int = 2) -> Recorded:
    """The plan of `kernel` (loaded in `worker` under `slot`) on the inputs it holds under `key` (the
    judge's `inputs`): a warm-up call, then `calls` recorded calls that must agree."""
    reply = worker.request({"op": "record", "slot": slot, "key": key, "params": judge.spec.param_defaults, "warmup": warmup,
                            "calls": calls})
    evidence = [(str(v.get("code", "harness-tampering")), scrub(str(v.get("message", "")))[:1200])
                for v in (reply.report.violations if reply.report else [])][:8]
    rec = _recorded(judge, kernel, reply, inputs)
    rec.evidence = evidence
    return rec


def _recorded(judge: Any, kernel: Any, reply: Any, inputs: list[Any]) -> Recorded:
    if not reply.ok:
        return Recorded(error=reply.error)
    info = reply.info
    notes = [scrub(str(n))[:400] for n in (info.get("notes") or [])[:8] if isinstance(n, str)]
    refused = info.get("refused")
    if refused is not None:
        refused = refused if isinstance(refused, dict) else {}
        code = str(refused.get("code"))
        return Recorded(refusal=(code if code in REFUSALS else NOT_REPLAYABLE, scrub(str(refused.get("message", "")))[:1200]),
                        notes=notes)
    try:
        extracted = judge.replayer.extracted(kernel)
        plan = parse_plan(info.get("plan"))
        check_plan(plan, set(extracted.kernels), input_bytes(inputs))
        differs = _same_inputs(plan, inputs)
        if differs:
            raise PlanError(differs)
    except ExtractError as e:
        return Recorded(refusal=(e.code, e.message), notes=notes)
    except PlanError as e:
        return Recorded(refusal=(NOT_REPLAYABLE, f"the recorded plan does not hold: {scrub(str(e))[:1200]}"), notes=notes)
    call_ms = info.get("call_ms")
    call_ms = float(call_ms) if isinstance(call_ms, (int, float)) and math.isfinite(call_ms) and call_ms >= 0 else 0.0
    return Recorded(plan=plan, notes=notes, call_ms=min(call_ms, 3.6e6))
