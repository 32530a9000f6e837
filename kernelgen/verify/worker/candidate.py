"""The requests that run the candidate's own code, in its sandboxed worker (the recording role): import
its file, call its entry directly, probe it on meta tensors of a perf case's shapes, and time its host
path.

Since issue 40 no verdict rests on these calls: accuracy checks, timed outputs and timings come from
replays of the recorded plan (kernelgen.verify.record, kernelgen.verify.replay); the candidate's own
process is never timed. These stay for what a replay does not have or what is not a candidate's
verdict: the wrapper's host time (reported beside the device time), the perf-shape probe on meta
tensors, `kernelgen validate`'s first run of KernelGen's own kernels, and a baseline an LLM wrote (its
outputs are the ground truth, run in a worker of its own).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any



class CandidateOps:
    def __init__(self, worker: Any):
        self.w = worker

    def op_load(self, req: dict[str, Any]) -> dict[str, Any]:
        slot, name = str(req["slot"]), str(req["entry"])
        path = self.w.kernels / f"{slot}_{Path(str(req['filename'])).name}"
        path.write_text(str(req["source"]), encoding="utf-8")  # the private copy: the bytes the judge sent
        module_name = f"kernelgen_candidate_{slot}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            return {"ok": False, "error": f"cannot import {path.name}"}
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        fn = getattr(module, name, None)
        if not callable(fn):
            return {"ok": False, "error": f"{path.name} defines no function {name!r}"}
        self.w.slots[slot] = fn
        return {"ok": True, "kind": "loaded"}

    def op_call(self, req: dict[str, Any]) -> dict[str, Any]:
        """One direct call of the entry, its launches counted: for what is no candidate's verdict (a baseline
        an LLM wrote, `validate`'s first run of KernelGen's own kernels). A candidate is recorded instead."""
        slot, key = str(req["slot"]), str(req["key"])
        fn, inputs, params = self.w.slots[slot], self.w.store[key], dict(req.get("params") or {})
        count = self.w.calls[(slot, key)] = self.w.calls.get((slot, key), 0) + 1
        g = self.w.guard
        with g.program_order(str(req.get("order", "forward")), int(req.get("seed", 0))), g.watching_threads() as threads, \
                g.counting_launches() as launches:
            out = fn(*inputs, **params)
            self.w._sync()
        violations = []
        tampered = self.w._tampered("during the call, before its outputs were written")
        if tampered:
            violations.append(tampered)
        # The first call of a kernel on new inputs may compile, and the compiler keeps threads of its own.
        if threads[0] and count > 1:
            violations.append({"code": "thread-started", "message": f"{threads[0]} thread(s) started during the call"})
        outputs, fresh = self.w._outputs(out, int(req["out_offset"]), int(req["out_limit"]))
        return {"ok": True, "kind": "called", "outputs": outputs,
                "report": {"launches": launches[0], "violations": violations, "threads_started": threads[0], "fresh": fresh}}

    def op_probe(self, req: dict[str, Any]) -> dict[str, Any]:
        """The entry called on meta tensors (shapes, no memory) with every Triton launch a no-op: whether
        its wrapper accepts a perf case's shapes (its shape guards run, its outputs are allocated)
        without running the case. The judge reads only the outputs' shapes and dtypes."""
        torch = self.w.torch
        fn, params = self.w.slots[str(req["slot"])], dict(req.get("params") or {})
        args = [torch.empty(list(s), dtype=getattr(torch, str(d)), device="meta") for s, d in zip(req["shapes"], req["dtypes"])]
        with self.w.guard.ablated():
            out = fn(*args, **params)
        values = tuple(out) if type(out) in (tuple, list) else (out,)
        outputs = [{"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")} if type(v) is torch.Tensor
                   else {"type": type(v).__name__} for v in values]
        return {"ok": True, "kind": "probed", "info": {"outputs": outputs}}

    def op_host(self, req: dict[str, Any]) -> dict[str, Any]:
        """`calls` calls without waiting for the device: the judge times this request on its own clock
        (the figure returned is the worker's own, and not used)."""
        fn, inputs, params = self.w.slots[str(req["slot"])], self.w.store[str(req["key"])], dict(req.get("params") or {})
        with self.w.guard.counting_launches():
            us = self.w.stopwatch.host_us(lambda: fn(*inputs, **params), calls=int(req.get("calls", 50)))
        return {"ok": True, "kind": "host", "host_us": us}
