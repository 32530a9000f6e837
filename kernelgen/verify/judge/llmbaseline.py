"""A baseline an LLM wrote (the spec had no reference) is untrusted code like any candidate: it runs in a
sandboxed worker of its own, called directly (its outputs are the ground truth: no plan of it is
recorded or replayed), and the judge takes its outputs as the reference's."""

from __future__ import annotations

from typing import Any

from kernelgen.devices import DeviceInfo
from kernelgen.verify.judge.judge import Judge, LoadError
from kernelgen.verify.judge.session import WorkerSession
from kernelgen.verify.protocol import TensorRef


class WorkerBaseline:
    """A baseline an LLM wrote (the spec had no reference) is untrusted code like any candidate: it
    runs in a sandboxed worker of its own, and the judge takes its outputs as the ground truth."""

    def __init__(self, device: DeviceInfo, source: str, name: str, arena_bytes: int = 1 << 30):
        self.device = device
        self.worker = WorkerSession(device, arena_bytes=arena_bytes, label="baseline (written by an LLM)")
        reply = self.worker.request({"op": "load", "slot": "baseline", "entry": name, "filename": f"{name}_baseline.py",
                                     "source": source})
        if not reply.ok:
            self.worker.close()
            raise LoadError(f"the LLM-written baseline does not import: {reply.error}")
        self._fill = None

    def __call__(self, *inputs: Any, **params: Any) -> Any:
        from kernelgen.verify.poison import draw_fills

        if any(getattr(t, "device", None) is not None and t.device.type == "meta" for t in inputs):
            raise NotImplementedError("a sandboxed baseline does not run on meta tensors")
        self._fill = self._fill or draw_fills()[0]
        Judge.put(self.worker, "baseline", list(inputs))
        reply = self.worker.request({"op": "call", "slot": "baseline", "key": "baseline", "params": params, "mode": "plain",
                                     "fill": self._fill.model_dump(), "order": "forward", "seed": 0, "out_offset": 0,
                                     "out_limit": self.worker.arena.size // 2, "return_inputs": False})
        if not reply.ok:
            raise RuntimeError(f"the LLM-written baseline failed: {reply.error}")
        outs = [self.worker.arena.read(v, self.device.torch_device, max_bytes=self.worker.arena.size)
                for v in reply.outputs if isinstance(v, TensorRef)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def close(self) -> None:
        self.worker.close()
