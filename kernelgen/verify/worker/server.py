"""The sandboxed worker: the process a candidate kernel is recorded in, or its plan replayed in.

    python -m kernelgen.verify.worker --socket FD --handoff FD --device KIND --policy JSON

Its bootstrap (this file, trusted) applies the sandbox (kernelgen.verify.worker.sandbox) before torch or any
candidate is imported, says hello, imports torch and Triton and starts the device at once (while the
judge gets on with its own start: the two overlap), then serves the judge's requests: take the
shared-memory arena (its fd comes through the handoff socket, so a worker can be started before the
judge knows how large the arena must be), store inputs (or draw perf inputs from the judge's recipe
and say their digest) and answer one request at a time or several in a batch. It decides nothing.

A worker has one role for its life (the policy's `role`), and serves only that role's requests:
- **record**: the candidate's own process. It imports the kernel file from the bytes the judge sends,
  records a call as a plan (kernelgen.verify.record.ops), probes the wrapper on meta tensors, times its
  host path, and still calls it directly where no candidate's verdict depends on it
  (kernelgen.verify.worker.candidate).
- **replay**: never imports a candidate. It defines only the @triton.jit functions the judge extracted
  from a file, checks that they compile as Triton, and runs, checks and times plans
  (kernelgen.verify.replay.ops).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import traceback
from pathlib import Path
from typing import Any

from kernelgen.verify.policy import SandboxPolicy
from kernelgen.verify.worker import sandbox
from kernelgen.verify.protocol import ALIGN, Arena, OtherValue, ProtocolError, TensorRef, recv, send

BATCHABLE = ("put", "refill", "call", "drop", "replay")
COMMON = ("arena", "put", "draw", "refill", "drop", "clear", "sync", "batch")


def _short_tb(exc: BaseException, limit: int = 8) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines[-limit:])
    return text.strip()[-4000:]


def _handlers(role: str, worker: "Worker") -> list[Any]:
    if role == "replay":
        from kernelgen.verify.replay.ops import ReplayOps

        return [ReplayOps(worker)]
    from kernelgen.verify.record.ops import RecordOps
    from kernelgen.verify.worker.candidate import CandidateOps

    return [RecordOps(worker), CandidateOps(worker)]


class Worker:
    def __init__(self, sock: socket.socket, handoff: socket.socket, device: str, scratch: Path, role: str = "record"):
        self.sock = sock
        self.handoff = handoff  # the judge passes the arena's fd through it (SCM_RIGHTS), nothing else
        self.arena: Any = None
        self.start_error = ""  # why torch, Triton or the device could not start: every request's answer
        self.device = device  # cpu | cuda | npu
        self.role = role  # record | replay
        self.kernels = scratch / "kernels"
        self.kernels.mkdir(exist_ok=True)
        self.slots: dict[str, Any] = {}
        self.store: dict[str, list[Any]] = {}
        self.calls: dict[tuple[str, str], int] = {}
        self.kept: dict[str, list[Any]] = {}  # slot (or plan) -> outputs of the timed calls the judge asked to keep
        self.torch: Any = None
        self.tamper: Any = None
        # its role's requests: imported in warm(), after the hello (they import torch: ~2.5 s the judge
        # waited for the hello of each worker it started, twice per `bench`)
        self.handlers: list[Any] = []

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

        self.handlers = _handlers(self.role, self)  # before the launch hooks and the seal, as at the start before

        from kernelgen.verify.worker import guard
        from kernelgen.verify.worker.tamper import TamperSnapshot
        from kernelgen.verify.timing import Stopwatch

        if self.device == "cpu":
            from kernelgen.verify.worker import interpreter

            torch.set_num_threads(1)
            interpreter.install()  # autotune's first config, libdevice: what the interpreter lacks
        from kernelgen.precision import PrecisionPolicy  # PyTorch's TF32 switches as the judge's policy says

        PrecisionPolicy.from_worker_env(os.environ).apply_to_torch()
        self.torch, self.guard = torch, guard
        if self.role == "record":
            from kernelgen.verify.record import launches

            guard.install_launch_hooks()
            launches.install()  # before the tamper snapshot seals Triton's launch classes
        else:
            from kernelgen.verify.replay import frontend, order

            order.install()
            frontend.snapshot_language()  # the language as Triton made it, before any kernel runs in the interpreter
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
        handler = self._handler(str(op))
        if handler is None and self.start_error:  # its role's requests were never set up
            return {"ok": False, "error": self.start_error}
        if handler is None:
            return {"ok": False, "error": f"unknown request {op!r} for a {self.role} worker"}
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

    def _handler(self, op: str) -> Any:
        """The method serving `op` in this worker's role (the common requests, then its role's)."""
        if op in COMMON:
            return getattr(self, f"op_{op}")
        for handlers in self.handlers:
            found = getattr(handlers, f"op_{op}", None)
            if found is not None:
                return found
        return None

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

    def op_clear(self, req: dict[str, Any]) -> dict[str, Any]:  # noqa: ARG002 - every request carries one dict
        """Every input held dropped: a worker the service keeps for the next command holds no tensors."""
        self.store.clear()
        if self.device == "cuda":
            self.torch.cuda.empty_cache()
        return {"ok": True, "kind": "stored"}

    def _outputs(self, out: Any, offset: int, limit: int) -> tuple[list[dict], list[bool]]:
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
            fresh.append(True)  # a direct call's outputs are not the verdict's; a replay's are its own buffers
            offset += -(-ref.nbytes // ALIGN) * ALIGN
        return refs, fresh

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
    p.add_argument("--parent", type=int, default=None, help="the pid of the process that started it (it dies with that one)")
    args = p.parse_args(argv)
    policy_data = json.loads(args.policy)
    policy = SandboxPolicy(**{**policy_data, "scratch": Path(policy_data["scratch"])})
    report = sandbox.apply(policy, args.parent)  # forks into the PID namespace; only its first process returns here
    sock = socket.socket(fileno=args.socket)
    try:
        from importlib.metadata import version

        worker = Worker(sock, socket.socket(fileno=args.handoff), args.device, policy.scratch, policy.role)
        send(sock, {"ok": True, "kind": "hello", "info": {"pid": os.getpid(), "torch": version("torch"),
                                                            "triton": version("triton"), "sandbox": report.as_dict()}})
    except BaseException as e:  # noqa: BLE001 - the judge must learn why the worker could not start
        send(sock, {"ok": False, "kind": "hello", "error": f"the worker could not start: {_short_tb(e)}",
                    "info": {"sandbox": report.as_dict()}})
        return 3
    worker.warm()
    worker.serve()
    return 0

