"""One recorded call: the storages it touched (numbered as the plan numbers them), the steps it made on
the device, and, once anything it did cannot be replayed, why (sticky: a wrapper that catches the
refusal and goes on is still refused).

A storage is known by the address of its first byte. Every allocation of the call is kept alive until
the recording ends, so no address is reused by a later allocation of the same call and read as the
same buffer; a replay holds its allocations for the whole call too.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelgen.verify.plan import PLAN_DTYPES, Alloc, Copy, Fill, Launch, Plan, View

ACTIVE: list["Recording"] = []  # the recording in progress, if any (one call at a time)

# the codes a refusal may carry (kernelgen.verify.judge.codes has them all)
HOST_READ = "host-read"
OUTSIDE = "outside-tensor"
NOT_REPLAYABLE = "not-replayable"


class Refused(Exception):
    """What the call did cannot be replayed; `code` and `message` say what."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


def dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def active() -> "Recording | None":
    return ACTIVE[-1] if ACTIVE else None


class Recording:
    def __init__(self, inputs: list[Any], device: str):
        self.device = device
        self.steps: list[Any] = []
        self.refusal: Refused | None = None
        self.launching = 0  # > 0 inside a Triton launch: its own copies (the interpreter's) are not the wrapper's
        self.stream = torch.cuda.current_stream() if device == "cuda" and torch.cuda.is_initialized() else None
        self._keys: dict[int, int] = {}
        self._sizes: list[int] = []
        self._alive: list[Any] = []
        self.inputs = []
        for t in inputs:
            self.inputs.append(self._register(t))

    # --- refusals --------------------------------------------------------------------------------
    def refuse(self, code: str, message: str) -> Refused:
        """Note the first refusal (it stands whatever the wrapper does next) and return it, to raise."""
        if self.refusal is None:
            self.refusal = Refused(code, message)
        return self.refusal

    # --- storages and views -------------------------------------------------------------------------
    def _register(self, t: Any) -> View:
        storage = t.untyped_storage()
        number = len(self._sizes)
        if storage.nbytes():
            self._keys.setdefault(storage.data_ptr(), number)
        self._sizes.append(storage.nbytes())
        self._alive.append(t)
        return self._view_on(t, number)

    def _view_on(self, t: Any, storage: int) -> View:
        dtype = dtype_name(t)
        if dtype not in PLAN_DTYPES:
            raise self.refuse(NOT_REPLAYABLE, f"a tensor of dtype {dtype}, which a plan cannot hold")
        return View(storage=storage, dtype=dtype, shape=list(t.shape), stride=list(t.stride()), offset=t.storage_offset())

    def view(self, t: Any, what: str) -> View:
        """`t` as a view of a storage of the call; refused when it is none of them."""
        if type(t) is not torch.Tensor:
            raise self.refuse(NOT_REPLAYABLE, f"{what} is a {type(t).__name__}, not a plain torch.Tensor")
        storage = t.untyped_storage()
        if not storage.nbytes():  # an empty tensor: no memory to share, a fresh one replays it
            return self.allocated(t, None)
        number = self._keys.get(storage.data_ptr())
        if number is None or t.device.type != torch.device(self.device).type:
            raise self.refuse(OUTSIDE, f"{what} is a tensor made outside the call (at import, by an earlier call, "
                              "or from host data): the plan holds only the call's inputs and what it allocates")
        return self._view_on(t, number)

    def allocated(self, t: Any, fill: Any) -> View:
        """A buffer the call allocated (`fill`: None, or the value every element got)."""
        view = self._register(t)
        nbytes = self._sizes[view.storage]
        self.steps.append(Alloc(storage=view.storage, nbytes=nbytes, dtype=view.dtype, shape=view.shape,
                                stride=view.stride, fill=fill))
        return view

    def filled(self, t: Any, value: Any) -> None:
        self.steps.append(Fill(target=self.view(t, "a filled tensor"), value=value))

    def copied(self, dst: Any, src: Any) -> None:
        self.steps.append(Copy(dst=self.view(dst, "a copy's destination"), src=self.view(src, "a copy's source")))

    def launched(self, step: Launch) -> None:
        self.steps.append(step)

    # --- the plan --------------------------------------------------------------------------------
    def plan(self, out: Any, notes: list[str]) -> Plan:
        """The recorded call as a plan, its outputs checked: plain tensors the call allocated."""
        values = tuple(out) if type(out) in (tuple, list) else (out,)
        outputs = []
        for j, v in enumerate(values):
            if type(v) is not torch.Tensor:
                raise self.refuse("wrong-outputs", f"output {j} is a {type(v).__name__}, not a plain torch.Tensor")
            view = self.view(v, f"output {j}")
            if view.storage < len(self.inputs):
                raise self.refuse("output-not-fresh", f"output {j} is input {view.storage} or a view of it, "
                                  "not a tensor allocated during the call")
            outputs.append(view)
        if not any(isinstance(s, Launch) for s in self.steps):
            raise self.refuse("no-triton-launch", "the call launched no Triton kernel: the result did not come from Triton")
        return Plan(inputs=self.inputs, steps=self.steps, outputs=outputs, notes=notes)
