"""The sandboxed worker: the only process a candidate kernel ever runs in.

    python -m kernelgen.verify.worker --socket FD --handoff FD --policy JSON

Its bootstrap (this file, trusted) applies the sandbox (kernelgen.verify.worker.sandbox) before torch or any
candidate is imported, says hello, imports torch and Triton and starts the device at once (while the
judge gets on with its own start: the two overlap), then serves the judge's requests: take the
shared-memory arena (its fd comes through the handoff socket, so a worker can be started before the
judge knows how large the arena must be), load a kernel file from the bytes the judge
sends, store inputs (or draw perf inputs from the judge's recipe and say their digest), call the
entry function (guarded, plain, or with every Triton launch ablated, in the interpreter program order
asked for; or on meta tensors of a perf case's shapes, launches ablated), time it, and return the outputs' bytes — one request at a time or several in a batch. It
decides nothing: the judge draws the inputs, runs the baseline, compares and writes the verdict.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from kernelgen.verify.policy import SandboxPolicy
from kernelgen.verify.worker import sandbox
from kernelgen.verify.protocol import Arena, OtherValue, ProtocolError, TensorRef, recv, send

ALIGN = 64  # bytes between tensors in the arena
BATCHABLE = ("put", "refill", "call", "drop")


def _short_tb(exc: BaseException, limit: int = 8) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines[-limit:])
    return text.strip()[-4000:]


class Worker:
    def __init__(self, sock: socket.socket, handoff: socket.socket, device: str, scratch: Path):
        self.sock = sock
        self.handoff = handoff  # the judge passes the arena's fd through it (SCM_RIGHTS), nothing else
        self.arena: Any = None
        self.start_error = ""  # why torch, Triton or the device could not start: every request's answer
        self.device = device  # cpu | cuda | npu
        self.kernels = scratch / "kernels"
        self.kernels.mkdir(exist_ok=True)
        self.slots: dict[str, Any] = {}
        self.store: dict[str, list[Any]] = {}
        self.calls: dict[tuple[str, str], int] = {}
        self.kept: dict[str, list[Any]] = {}  # slot -> outputs of the timed calls the judge asked to keep
        self.torch: Any = None
        self.tamper: Any = None

    def warm(self) -> None:
        """torch, Triton, the device, the launch hooks and the tampering snapshot, right after the
        hello: the ~5 s they take (torch, torch._dynamo, a CUDA context) overlap the judge's own start
        instead of following it."""
        try:
            self._start_torch()
        except BaseException as e:  # noqa: BLE001 - said in answer to every request, not here
            if isinstance(e, KeyboardInterrupt):
                raise
            self.start_error = f"the worker could not start torch on {self.device}: {_short_tb(e)}"

    def _start_torch(self) -> None:
        if self.torch is not None:
            return
        if self.device == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: @triton.jit reads it then
        import torch

        from kernelgen.verify.worker import guard
        from kernelgen.verify.worker.tamper import TamperSnapshot
        from kernelgen.verify.timing import Stopwatch

        if self.device == "cpu":
            torch.set_num_threads(1)
        from kernelgen.verify.precision import PrecisionPolicy  # PyTorch's TF32 switches as the judge's policy says

        PrecisionPolicy.from_worker_env(os.environ).apply_to_torch()
        self.torch, self.guard = torch, guard
        guard.install_launch_hooks()
        self.stopwatch = Stopwatch(self.device)  # the clock and the timing loop, bound before any candidate is imported
        t = torch.ones(1 << 16, device=self.device)  # start the pools torch keeps, before threads are counted
        float((t * 2).sum())
        self.tamper = TamperSnapshot()
        # what decides a reply, sealed before any candidate is imported (kernelgen.verify.worker.tamper)
        for label, obj in (("the worker", self), ("the stopwatch", self.stopwatch), ("the timing seal", self.stopwatch.seal)):
            self.tamper.seal(label, obj)

    # --- requests ------------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            try:
                req = recv(self.sock)
            except EOFError:
                return
            if req.get("op") == "bye":
                send(self.sock, {"ok": True, "kind": "bye"})
                return
            send(self.sock, self._handle(req))

    def _handle(self, req: dict[str, Any]) -> dict[str, Any]:
        """One request's reply; the candidate's failure is a reply, and any tampering seen after it
        is reported in it."""
        op = req.get("op")
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            return {"ok": False, "error": f"unknown request {op!r}"}
        try:
            if self.start_error:
                raise RuntimeError(self.start_error)
            if op != "arena" and self.arena is None:
                raise ProtocolError("no arena yet: the judge sends one before any other request")
            reply = handler(req)
        except ProtocolError as e:
            reply = {"ok": False, "error": f"protocol: {e}"}
        except BaseException as e:  # noqa: BLE001 - the candidate's failure is a reply, not the worker's end
            if isinstance(e, KeyboardInterrupt):
                raise
            reply = {"ok": False, "error": _short_tb(e)}
        tampered = self._tampered(f"after the {op} request")
        if tampered:
            reply.setdefault("report", {}).setdefault("violations", []).append(tampered)
        return reply

    def _tampered(self, when: str) -> dict[str, str] | None:
        """harness-tampering, if anything sealed changed since the last check (each change said once)."""
        changed = self.tamper.changed() if self.tamper is not None else []
        if not changed:
            return None
        from kernelgen.verify.worker.tamper import describe

        code, message = describe(changed, when)
        self.tamper.rebase()
        return {"code": code, "message": message}

    def op_batch(self, req: dict[str, Any]) -> dict[str, Any]:
        """Several requests in one round trip (one accuracy seed: its inputs, then its four calls),
        each handled and answered exactly as if it came alone; the first that fails ends the batch."""
        replies = []
        for sub in req["requests"]:
            if sub.get("op") not in BATCHABLE:
                replies.append({"ok": False, "error": f"protocol: {sub.get('op')!r} cannot be batched"})
                break
            replies.append(self._handle(sub))
            if not replies[-1].get("ok"):
                break
        return {"ok": True, "kind": "batch", "replies": replies}

    def op_arena(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: ARG002 - every request carries one dict
        """The shared-memory arena, its fd passed through the handoff socket just before this request."""
        _, fds, _, _ = socket.recv_fds(self.handoff, 1, 1)
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise ProtocolError("the arena request came without exactly one fd")
        if self.arena is not None:
            self.arena.close()
        self.arena = Arena.attach(fds[0])
        if self.tamper is not None:
            self.tamper.accept(self, "arena")
        return {"ok": True, "kind": "stored"}

    def op_load(self, req: dict[str, Any]) -> dict[str, Any]:
        slot, name = str(req["slot"]), str(req["entry"])
        path = self.kernels / f"{slot}_{Path(str(req['filename'])).name}"
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
        self.slots[slot] = fn
        return {"ok": True, "kind": "loaded"}

    def op_put(self, req: dict[str, Any]) -> dict[str, Any]:
        refs = [TensorRef.model_validate(r) for r in req["tensors"]]
        self.store[str(req["key"])] = [self.arena.read(r, self.device, max_bytes=self.arena.size) for r in refs]
        return {"ok": True, "kind": "stored"}

    def op_draw(self, req: dict[str, Any]) -> dict[str, Any]:
        """Perf inputs drawn here from the recipe the judge drew its own with (the same seed, on the
        device), not copied through host memory; their digest goes back for the judge to compare."""
        from kernelgen.spec import OperatorSpec, draw_inputs
        from kernelgen.verify.digest import digest

        spec = OperatorSpec.model_validate(req["spec"])
        inputs = draw_inputs(spec, dict(req["case"]), str(req["dtype"]), int(req["seed"]), self.device, on_device=True)
        if req.get("refill"):  # into the buffers held under key, as op_refill does
            for t, new in zip(self.store[str(req["key"])], inputs):
                t.data.copy_(new)
            self._sync()
        else:
            self.store[str(req["key"])] = inputs
        return {"ok": True, "kind": "stored", "info": {"digest": digest(inputs)}}

    def op_refill(self, req: dict[str, Any]) -> dict[str, Any]:
        """New values into the same buffers: the same tensors, addresses and version counters (written
        through `.data`), so a result cached by identity, address or `_version` goes stale."""
        refs = [TensorRef.model_validate(r) for r in req["tensors"]]
        for t, r in zip(self.store[str(req["key"])], refs):
            t.data.copy_(self.arena.read(r, self.device, max_bytes=self.arena.size))
        return {"ok": True, "kind": "stored"}

    def op_drop(self, req: dict[str, Any]) -> dict[str, Any]:
        self.store.pop(str(req["key"]), None)
        if self.device == "cuda":
            self.torch.cuda.empty_cache()
        return {"ok": True, "kind": "stored"}

    def _outputs(self, out: Any, offset: int, limit: int, report: Any = None) -> tuple[list[dict], list[bool]]:
        values = tuple(out) if type(out) in (tuple, list) else (out,)
        refs, fresh, end = [], [], offset + limit
        for v in values:
            if type(v) is not self.torch.Tensor:  # exact: a subclass could lie through __torch_function__
                refs.append(OtherValue(type_name=type(v).__name__).model_dump())
                fresh.append(False)
                continue
            ref = self.arena.write(v.detach(), offset) if offset + _nbytes(v) <= end else None
            if ref is None:
                raise ProtocolError(f"the outputs take more than the {limit} bytes the judge expected")
            refs.append(ref.model_dump())
            fresh.append(bool(report.is_fresh(v)) if report is not None else True)
            offset += -(-ref.nbytes // ALIGN) * ALIGN
        return refs, fresh

    def op_call(self, req: dict[str, Any]) -> dict[str, Any]:
        from kernelgen.verify.poison import Fill

        slot, key, mode = str(req["slot"]), str(req["key"]), str(req["mode"])
        fn, inputs, params = self.slots[slot], self.store[key], dict(req.get("params") or {})
        fill = Fill.model_validate(req["fill"])
        count = self.calls[(slot, key)] = self.calls.get((slot, key), 0) + 1
        g = self.guard
        report, launches = None, [0]
        with g.program_order(str(req.get("order", "forward")), int(req.get("seed", 0))), g.watching_threads() as threads:
            if mode == "plain":
                with g.counting_launches() as launches:
                    out = fn(*inputs, **params)
            else:
                with g.guarded(fill) as report:
                    if mode == "ablated":
                        with g.ablated():
                            out = fn(*inputs, **params)
                    else:
                        out = fn(*inputs, **params)
            self._sync()
        violations = [{"code": c, "message": m} for c, m in (report.violations if report else [])]
        tampered = self._tampered("during the call, before its outputs were written")
        if tampered:
            violations.append(tampered)
        if mode == "ablated":
            violations = [v for v in violations if v["code"] != "torch-compute-in-wrapper" or "inside a Triton launch" not in v["message"]]
        # The first call of a kernel on new inputs may compile, and the compiler keeps threads of its own.
        if threads[0] and count > 1:
            violations.append({"code": "thread-started", "message": f"{threads[0]} thread(s) started during the call"})
        outputs, fresh = self._outputs(out, int(req["out_offset"]), int(req["out_limit"]), report)
        inputs_after = []
        if req.get("return_inputs"):
            offset = int(req["out_offset"]) + int(req["out_limit"])
            for t in inputs:
                ref = self.arena.write(t, offset)
                inputs_after.append(ref.model_dump())
                offset += -(-ref.nbytes // ALIGN) * ALIGN
        return {"ok": True, "kind": "called", "outputs": outputs, "inputs_after": inputs_after,
                "report": {"launches": report.launches if report else launches[0], "violations": violations,
                           "threads_started": threads[0], "fresh": fresh, "configs": report.configs if report else []}}

    def op_probe(self, req: dict[str, Any]) -> dict[str, Any]:
        """The entry called on meta tensors (shapes, no memory) with every Triton launch a no-op: whether
        its wrapper accepts a perf case's shapes (its shape guards run, its outputs are allocated)
        without running the case. The judge reads only the outputs' shapes and dtypes."""
        torch = self.torch
        fn, params = self.slots[str(req["slot"])], dict(req.get("params") or {})
        args = [torch.empty(list(s), dtype=getattr(torch, str(d)), device="meta") for s, d in zip(req["shapes"], req["dtypes"])]
        with self.guard.ablated():
            out = fn(*args, **params)
        values = tuple(out) if type(out) in (tuple, list) else (out,)
        outputs = [{"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")} if type(v) is torch.Tensor
                   else {"type": type(v).__name__} for v in values]
        return {"ok": True, "kind": "probed", "info": {"outputs": outputs}}

    def op_time(self, req: dict[str, Any]) -> dict[str, Any]:
        """`reps` timed calls after `warmup` untimed ones, as the judge asks (it bounds the answer with
        its own clock). The outputs of the calls listed in `keep` (counted from the first warm-up call)
        stay here for the judge to read or release (op_kept): the judge chose them, and whether it reads
        them is decided after the request, so every timing request looks alike to the candidate."""
        refused = self._timing_refused("before")
        if refused:
            return refused
        slot, key = str(req["slot"]), str(req["key"])
        fn, inputs, params = self.slots[slot], self.store[key], dict(req.get("params") or {})
        keep = {int(i) for i in req.get("keep") or ()}
        last_kept = max(keep, default=-1)
        self.kept.pop(slot, None)
        calls, held, kept = [0], [None], []

        def timed() -> None:
            n = calls[0]
            calls[0] += 1
            out = fn(*inputs, **params)
            # Up to the last call kept, the latest output stays alive while the next call runs, and the kept
            # one after it: one output besides the one being made, whichever call is kept (as the loop always
            # held the previous call's), so the allocator sees the same pattern on every request.
            if n <= last_kept:
                held[0] = out
            if n in keep:
                kept.append(out)

        with self.guard.counting_launches() as launches:
            times = self.stopwatch.reps(timed, reps=int(req["reps"]), warmup=int(req["warmup"]))
        refused = self._timing_refused("after")
        if refused:
            return refused
        held[0] = None
        self.kept[slot] = kept
        return {"ok": True, "kind": "timed", "times_ms": times, "calls": calls[0], "launches": launches[0],
                "info": {"kept": len(kept)}}

    def _timing_refused(self, when: str) -> dict[str, Any] | None:
        """A refusal to time (or to answer with times) when the timing loop or anything sealed changed."""
        broken = self.stopwatch.broken()
        tampered = self._tampered(f"{when} the timed calls")
        if not broken and not tampered:
            return None
        parts = [f"the timing loop was changed after the worker started: {', '.join(broken)}"] if broken else []
        parts += [tampered["message"]] if tampered else []
        message = "; ".join(parts)
        return {"ok": False, "error": message, "report": {"violations": [{"code": "harness-tampering", "message": message}]}}

    def op_kept(self, req: dict[str, Any]) -> dict[str, Any]:
        """The outputs the last timing request of `slot` kept, one call after another, when `read`;
        released either way."""
        kept = self.kept.pop(str(req["slot"]), [])
        outputs: list[dict] = []
        offset, end = int(req["out_offset"]), int(req["out_offset"]) + int(req["out_limit"])
        for out in kept if req.get("read") else ():
            refs, _ = self._outputs(out, offset, end - offset)
            outputs += refs
            offset += sum(-(-TensorRef.model_validate(r).nbytes // ALIGN) * ALIGN for r in refs if "span" in r)  # as _outputs laid them
        return {"ok": True, "kind": "called", "outputs": outputs}

    def op_host(self, req: dict[str, Any]) -> dict[str, Any]:
        """`calls` calls without waiting for the device: the judge times this request on its own clock
        (the figure returned is the worker's own, and not used)."""
        fn, inputs, params = self.slots[str(req["slot"])], self.store[str(req["key"])], dict(req.get("params") or {})
        with self.guard.counting_launches():
            us = self.stopwatch.host_us(lambda: fn(*inputs, **params), calls=int(req.get("calls", 50)))
        return {"ok": True, "kind": "host", "host_us": us}

    def op_sync(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: ARG002 - every request carries one dict
        self._sync()
        return {"ok": True, "kind": "synced"}

    def _sync(self) -> None:
        if self.device != "cpu":
            self.stopwatch.clock.sync()  # the captured one: a patched torch.cuda.synchronize cannot hide queued work


def _nbytes(t: Any) -> int:
    from kernelgen.verify.protocol import storage_span

    return storage_span(t) * t.element_size()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="KernelGen's sandboxed worker (started by the judge, not by hand)")
    p.add_argument("--socket", type=int, required=True)
    p.add_argument("--handoff", type=int, required=True, help="a socket the arena's fd comes through")
    p.add_argument("--policy", required=True, help="the sandbox policy, as JSON")
    p.add_argument("--device", required=True, choices=["cpu", "cuda", "npu"])
    args = p.parse_args(argv)
    policy_data = json.loads(args.policy)
    policy = SandboxPolicy(**{**policy_data, "scratch": Path(policy_data["scratch"])})
    report = sandbox.apply(policy)  # forks into the PID namespace; only its first process returns here
    sock = socket.socket(fileno=args.socket)
    try:
        from importlib.metadata import version

        worker = Worker(sock, socket.socket(fileno=args.handoff), args.device, policy.scratch)
        send(sock, {"ok": True, "kind": "hello", "info": {"pid": os.getpid(), "torch": version("torch"),
                                                            "triton": version("triton"), "sandbox": report.as_dict()}})
    except BaseException as e:  # noqa: BLE001 - the judge must learn why the worker could not start
        send(sock, {"ok": False, "kind": "hello", "error": f"the worker could not start: {_short_tb(e)}",
                    "info": {"sandbox": report.as_dict()}})
        return 3
    worker.warm()
    worker.serve()
    return 0

