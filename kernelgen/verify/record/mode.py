"""The dispatch mode of a recording: every aten operation the wrapper makes is one of
- an allocation (recorded: `Alloc`, empty or filled),
- a fill or a same-dtype copy on the device (recorded: `Fill`, `Copy`; `clone`/`contiguous` are both),
- a view or a metadata query (nothing to record: every tensor a step uses is described as a view),
- a host read of device values (`.item()`, `.cpu()`, `.tolist()` on a GPU...): refused, `host-read`,
  "the launches depend on values, not on shapes: not replayable",
- anything else: arithmetic in torch, refused (`torch-compute-in-wrapper`), or a tensor made from host
  data (`outside-tensor`).
Inside a Triton launch the launcher's own operations (the interpreter copies arguments to the host and
back) are not the wrapper's and pass unrecorded.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelgen.verify.record.calls import HOST_READ, OUTSIDE, Recording

ALLOC = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
FILLED = {"zeros": 0, "zeros_like": 0, "new_zeros": 0, "ones": 1, "ones_like": 1, "new_ones": 1}
FULL = {"full", "full_like", "new_full", "scalar_tensor"}  # the value is an argument
INPLACE_FILL = {"zero_", "fill_"}
COPIES = {"clone", "contiguous", "_to_copy"}  # a new tensor holding a copy
VIEWS = {
    "view", "_unsafe_view", "reshape", "expand", "expand_as", "permute", "transpose", "t", "unsqueeze",
    "squeeze", "select", "slice", "narrow", "as_strided", "alias", "detach", "unfold", "split",
    "split_with_sizes", "chunk", "unbind", "flatten", "unflatten", "movedim", "view_as", "_reshape_alias",
    "diagonal", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous", "stride", "size",
    "dim", "numel", "storage_offset", "_has_compatible_shallow_copy_type", "view_as_real", "view_as_complex",
}
HOST_READS = {"_local_scalar_dense", "item", "equal", "is_nonzero", "allclose", "is_same_size", "_assert_async"}
FROM_HOST = {"lift_fresh", "lift_fresh_copy", "lift"}


def _name(func: Any) -> str:
    return func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)


def _scalar(value: Any) -> Any:
    if isinstance(value, (bool, int, float)):
        return value
    raise TypeError(f"a fill value of type {type(value).__name__}")


class RecordMode(TorchDispatchMode):
    def __init__(self, rec: Recording):
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ARG002 - the dispatch protocol
        kwargs = kwargs or {}
        name = _name(func)
        if self.rec.launching or name in VIEWS:
            return func(*args, **kwargs)
        if name in HOST_READS:
            raise self.rec.refuse(HOST_READ, f"the launches depend on values, not on shapes: not replayable "
                                  f"(aten.{name} reads a device value on the host)")
        if name in FROM_HOST:
            raise self.rec.refuse(OUTSIDE, f"aten.{name}: a tensor made from host data (torch.tensor); its values are "
                                  "not part of the plan: pass numbers as kernel arguments")
        if name in ALLOC or name in FILLED or name in FULL:
            return self._allocation(name, func, args, kwargs)
        if name in INPLACE_FILL:
            return self._fill(name, func, args, kwargs)
        if name == "copy_" or name in COPIES:
            return self._copy(name, func, args, kwargs)
        raise self.rec.refuse("torch-compute-in-wrapper", f"the wrapper ran aten.{name}: PyTorch computed what the "
                              "Triton kernel should")

    def _allocation(self, name: str, func: Any, args: tuple, kwargs: dict) -> Any:
        out = func(*args, **kwargs)
        if name in FILLED:
            value: Any = FILLED[name]
        elif name in FULL:
            value = args[0] if name == "scalar_tensor" else args[1] if len(args) > 1 else kwargs.get("fill_value")
        else:
            value = None
        if value is not None:
            try:
                value = _scalar(value)
            except TypeError as e:
                raise self.rec.refuse(OUTSIDE, f"aten.{name} with {e}: a fill the plan cannot hold") from None
            value = bool(value) if out.dtype == torch.bool else (int(value) if not out.dtype.is_floating_point else float(value))
        self.rec.allocated(out, value)
        return out

    def _fill(self, name: str, func: Any, args: tuple, kwargs: dict) -> Any:
        target = args[0]
        value: Any = 0 if name == "zero_" else (args[1] if len(args) > 1 else kwargs.get("value"))
        if isinstance(value, torch.Tensor):
            raise self.rec.refuse(HOST_READ, "fill_ with a tensor's value: the launches depend on values, not on "
                                  "shapes: not replayable")
        self.rec.filled(target, _scalar(value))
        return func(*args, **kwargs)

    def _copy(self, name: str, func: Any, args: tuple, kwargs: dict) -> Any:
        src = args[1] if name == "copy_" else args[0]
        out = func(*args, **kwargs)
        dst = args[0] if name == "copy_" else out
        if isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor):
            if src.device.type != dst.device.type:
                raise self.rec.refuse(HOST_READ, f"aten.{name} moves data between {src.device.type} and {dst.device.type}: "
                                      "the launches depend on values, not on shapes: not replayable")
            if src.dtype != dst.dtype:
                raise self.rec.refuse("torch-compute-in-wrapper", f"aten.{name} converts {src.dtype} to {dst.dtype} in "
                                      "PyTorch; casts belong in the kernel")
        if name != "copy_":
            if out is src:  # `.contiguous()` of a contiguous tensor may come back as itself
                return out
            self.rec.allocated(out, None)
        self.rec.copied(dst, src)
        return out
