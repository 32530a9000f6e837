"""The replay worker's requests. This process never imports a candidate's module: it defines the
@triton.jit functions the judge extracted from a kernel file (`kernels`), takes plans the judge has
validated (`plan`), and runs them on the inputs it holds: once, for a check, poisoned and in the
interpreter's program order asked for (`replay`); in the judge's timing loop (`time`, then `kept` for
the outputs of the calls the judge chose); or without waiting for the device, for the judge's clock to
bound its host time (`host`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from kernelgen.verify.plan import Plan, parse_plan
from kernelgen.verify.protocol import ALIGN, ProtocolError, TensorRef
from kernelgen.verify.replay.executor import Replay
from kernelgen.verify.replay.frontend import NOT_TRITON, NotTriton, compiled_twin


def _same_layout(plan: Plan, inputs: list[Any]) -> str:
    """Why `inputs` are not what the plan was recorded on ("" when they are)."""
    if len(inputs) != len(plan.inputs):
        return f"{len(inputs)} inputs where the plan was recorded on {len(plan.inputs)}"
    for i, (t, v) in enumerate(zip(inputs, plan.inputs)):
        mine = (str(t.dtype).removeprefix("torch."), list(t.shape), list(t.stride()), t.storage_offset())
        if mine != (v.dtype, v.shape, v.stride, v.offset) or t.untyped_storage().nbytes() < v.span_bytes():
            return f"input {i} is {mine[0]}{mine[1]} stride {mine[2]} where the plan was recorded on {v.dtype}{v.shape} stride {v.stride}"
    return ""


class ReplayOps:
    def __init__(self, worker: Any):
        self.w = worker
        self.modules: dict[str, tuple[Any, Any]] = {}  # slot -> (its kernels as they run here, their compiled twin on the CPU)
        self.plans: dict[str, Replay] = {}

    def op_kernels(self, req: dict[str, Any]) -> dict[str, Any]:
        """Define a file's @triton.jit functions (the judge's extraction of it) under `slot`."""
        slot = str(req["slot"])
        if slot in self.modules:
            return {"ok": True, "kind": "loaded"}
        path = self.w.kernels / f"{slot}_replay_{Path(str(req['filename'])).name}"
        path.write_text(str(req["source"]), encoding="utf-8")
        name = f"kernelgen_replay_{slot}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            return {"ok": False, "error": f"cannot import {path.name}"}
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        twin = compiled_twin(path, f"kernelgen_replay_twin_{slot}") if self.w.device == "cpu" else None
        self.modules[slot] = (module, twin)
        return {"ok": True, "kind": "loaded"}

    def op_plan(self, req: dict[str, Any]) -> dict[str, Any]:
        """A validated plan, ready to replay under its id (its launches check against `slot`'s kernels)."""
        module, twin = self.modules[str(req["slot"])]
        plan = parse_plan(req["body"])
        names = {s.kernel for s in plan.launches()} | {a.name for s in plan.launches() for a in s.args if a.kind == "jit"}
        missing = sorted(n for n in names if not hasattr(module, n))
        if missing:
            return {"ok": False, "error": f"the replay module defines no {', '.join(missing)}"}
        replay = Replay(plan, {n: getattr(module, n) for n in names}, self.w.device)
        if twin is not None:
            from kernelgen.verify.replay.frontend import check

            replay.check = lambda step, args: check(twin, step.kernel, args, step.options)
        self.plans[str(req["plan"])] = replay
        return {"ok": True, "kind": "planned"}

    def _replay(self, req: dict[str, Any]) -> tuple[Replay, list[Any]]:
        replay, inputs = self.plans[str(req["plan"])], self.w.store[str(req["key"])]
        differs = _same_layout(replay.plan, inputs)
        if differs:
            raise ProtocolError(f"the plan does not fit these inputs: {differs}")
        return replay, inputs

    def op_replay(self, req: dict[str, Any]) -> dict[str, Any]:
        """One replay: allocations poisoned with `fill` (when given), launches skipped when `ablate`, the
        interpreter's programs in `order`; the outputs (and, asked, the inputs after) into the arena."""
        from kernelgen.verify.poison import Fill
        from kernelgen.verify.replay.order import program_order

        replay, inputs = self._replay(req)
        fill = Fill.model_validate(req["fill"]) if req.get("fill") else None
        ablate = bool(req.get("ablate"))
        try:
            with program_order(str(req.get("order", "forward")), int(req.get("seed", 0))):
                outs = replay.run(inputs, fill=fill, ablate=ablate)
                self.w._sync()
        except NotTriton as e:
            return {"ok": False, "error": e.message, "info": {"code": NOT_TRITON}}
        outputs, fresh = self.w._outputs(outs, int(req["out_offset"]), int(req["out_limit"]))
        after = []
        if req.get("return_inputs"):
            offset = int(req["out_offset"]) + int(req["out_limit"])
            for t in inputs:
                ref = self.w.arena.write(t, offset)
                after.append(ref.model_dump())
                offset += -(-ref.nbytes // ALIGN) * ALIGN
        return {"ok": True, "kind": "called", "outputs": outputs, "inputs_after": after,
                "report": {"launches": 0 if ablate else replay.launches, "fresh": fresh}}

    def op_time(self, req: dict[str, Any]) -> dict[str, Any]:
        """`reps` timed replays after `warmup` untimed ones, on the judge's loop and clock; the outputs of
        the calls listed in `keep` stay for `kept` (every timing request looks alike)."""
        broken = self.w.stopwatch.broken()
        if broken:
            return {"ok": False, "error": f"the timing loop was changed: {', '.join(broken)}"}
        pid = str(req["plan"])
        self.w.kept.pop(pid, None)
        if not int(req["reps"]) and not int(req["warmup"]):
            return {"ok": True, "kind": "timed", "times_ms": [], "calls": 0, "launches": 0}
        replay, inputs = self._replay(req)
        keep = {int(i) for i in req.get("keep") or ()}
        last_kept = max(keep, default=-1)
        calls, held, kept = [0], [None], []

        def timed() -> None:
            n = calls[0]
            calls[0] += 1
            out = replay.run(inputs)
            if n <= last_kept:  # as the candidate's own loop held them: one output besides the one being made
                held[0] = out
            if n in keep:
                kept.append(out)

        times = self.w.stopwatch.reps(timed, reps=int(req["reps"]), warmup=int(req["warmup"]))
        held[0] = None
        self.w.kept[pid] = kept
        return {"ok": True, "kind": "timed", "times_ms": times, "calls": calls[0], "launches": calls[0] * replay.launches,
                "info": {"kept": len(kept)}}

    def op_kept(self, req: dict[str, Any]) -> dict[str, Any]:
        """The outputs the last timing request of `plan` kept, one call after another, when `read`;
        released either way."""
        kept = self.w.kept.pop(str(req["plan"]), [])
        outputs: list[dict] = []
        offset, end = int(req["out_offset"]), int(req["out_offset"]) + int(req["out_limit"])
        for out in kept if req.get("read") else ():
            refs, _ = self.w._outputs(out, offset, end - offset)
            outputs += refs
            offset += sum(-(-TensorRef.model_validate(r).nbytes // ALIGN) * ALIGN for r in refs if "span" in r)
        return {"ok": True, "kind": "called", "outputs": outputs}

    def op_graph(self, req: dict[str, Any]) -> dict[str, Any]:
        """`reps` timed replays of the plan captured once in a CUDA graph (GPU only). A plan reads nothing on
        the host, launches on one stream and allocates through the caching allocator: capturable by
        construction. Two replays on a side stream first (compiles, lean launches, the allocator's pool),
        as torch.cuda.graph asks."""
        if self.w.device != "cuda":
            return {"ok": False, "error": "a CUDA graph needs a CUDA device"}
        torch = self.w.torch
        replay, inputs = self._replay(req)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                replay.run(inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            replay.run(inputs)
        times = self.w.stopwatch.reps(graph.replay, reps=int(req["reps"]), warmup=int(req["warmup"]))
        del graph
        torch.cuda.empty_cache()
        return {"ok": True, "kind": "timed", "times_ms": times, "calls": int(req["reps"]) + int(req["warmup"]),
                "launches": (int(req["reps"]) + int(req["warmup"])) * replay.launches}

    def op_host(self, req: dict[str, Any]) -> dict[str, Any]:
        """`calls` replays without waiting for the device (the judge clocks the request)."""
        replay, inputs = self._replay(req)
        us = self.w.stopwatch.host_us(lambda: replay.run(inputs), calls=int(req.get("calls", 50)))
        return {"ok": True, "kind": "host", "host_us": us}
