"""The recording worker's `record` request: the candidate's entry called on the inputs held under `key`,
once to warm up (it compiles, autotunes, fills its caches: nothing recorded), then twice recorded. The
two plans must be the same: a wrapper that launches differently on an identical call is not one a
replay can stand for. The answer carries the plan (or the refusal, with its code), the notes of the
interpreter's stand-ins (autotune's first config), and how long a recorded call took on the worker's
clock (a claim, used only to size the judge's host-time request).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from kernelgen.verify.record import calls, launches
from kernelgen.verify.record.calls import Recording, Refused
from kernelgen.verify.record.mode import RecordMode

RECORDED_CALLS = 2  # a second identical call must record the same plan


@contextlib.contextmanager
def recording(inputs: list[Any], device: str) -> Iterator[Recording]:
    """Record the body's tensor operations (kernelgen.verify.record.mode) and Triton launches
    (kernelgen.verify.record.launches)."""
    launches.install()
    rec = Recording(inputs, device)
    calls.ACTIVE.append(rec)
    try:
        with RecordMode(rec):
            yield rec
    finally:
        calls.ACTIVE.pop()


class RecordOps:
    def __init__(self, worker: Any):
        self.w = worker

    def op_record(self, req: dict[str, Any]) -> dict[str, Any]:
        from kernelgen.verify.worker.interpreter import drain_notes

        w = self.w
        fn, inputs, params = w.slots[str(req["slot"])], w.store[str(req["key"])], dict(req.get("params") or {})
        if req.get("warmup", True):
            fn(*inputs, **params)
            w._sync()
        plans, call_ms = [], 0.0
        for _ in range(max(1, min(RECORDED_CALLS, int(req.get("calls", RECORDED_CALLS))))):
            t0 = w.stopwatch.clock.now()
            try:
                plans.append(self._record_once(fn, inputs, params))
            except Refused as e:
                return {"ok": True, "kind": "recorded", "info": {"refused": {"code": e.code, "message": e.message},
                                                                  "notes": drain_notes()}}
            w._sync()
            call_ms = (w.stopwatch.clock.now() - t0) * 1e3
        notes = drain_notes()
        if not plans[0].same_as(plans[-1]):
            return {"ok": True, "kind": "recorded", "info": {"refused": {"code": "plan-differs", "message": _differ(plans[0], plans[-1])},
                                                              "notes": notes}}
        return {"ok": True, "kind": "recorded", "info": {"plan": plans[-1].model_dump(mode="json"), "notes": notes,
                                                          "call_ms": call_ms}}

    def _record_once(self, fn: Any, inputs: list[Any], params: dict[str, Any]) -> Any:
        with recording(inputs, self.w.device) as rec:
            try:
                out = fn(*inputs, **params)
            except Refused:
                raise
            except BaseException:
                if rec.refusal is not None:  # the wrapper failed because a refused operation raised: say that
                    raise rec.refusal from None
                raise
        if rec.refusal is not None:  # refused, and the wrapper caught it and went on
            raise rec.refusal
        return rec.plan(out, [])


def _differ(a: Any, b: Any) -> str:
    """Where two recordings of the same call part ways, in words."""
    if len(a.steps) != len(b.steps):
        return (f"a second identical call recorded a different plan: {len(a.steps)} steps, then {len(b.steps)} "
                f"({len(a.launches())} launches, then {len(b.launches())})")
    for i, (x, y) in enumerate(zip(a.steps, b.steps)):
        if x != y:
            what = f"{x.op} of {getattr(x, 'kernel', '')}".strip().removesuffix(" of")
            return f"a second identical call recorded a different plan: step {i} ({what}) differs"
    return "a second identical call recorded a different plan: its outputs differ"
