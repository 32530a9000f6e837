"""Whether a shrunk case leaves every convolution room: each spatial size of its input and output at
least MIN_SPATIAL; and what a case asks of the interpreter (CaseWork).

A convolution whose output is 1 wide makes the symbolic trace of the reference specialise that size:
PyTorch guards Eq(height - kernel + 1, 1) and replaces the input's symbol with the kernel's, so the
generated kernel demands `x.shape[2] == conv_weight.shape[2]`. The judge keeps the weight's kernel
size (the spec's fixed_dims) and varies the input, and the kernel refused every other case: level 1's
82 (depthwise 3x3 over 512x512, shrunk to a 3x3 input under the 24,000-element budget: 16x64x3x3)
passed 19/29 checks, level 2's 1 passed 10/39. An input 1 wide is specialised the same way (a size-1
dim is a constant to the trace), which a transposed convolution's shrunk input could hit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

MIN_SPATIAL = 2  # PyTorch's symbolic shapes specialise sizes 0 and 1 only: 2 keeps every size a symbol


def convolution_shapes(run: Callable[[], Any]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(input shape, output shape) of every aten.convolution `run` calls (on meta tensors)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    class Convolutions(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket is torch.ops.aten.convolution and isinstance(out, torch.Tensor):
                seen.append((tuple(args[0].shape), tuple(out.shape)))
            return out

    with Convolutions():
        run()
    return seen


@dataclass(frozen=True)
class CaseWork:
    """What one call of a case asks of the interpreter: its convolutions' multiply-adds, and the largest
    tensor an op makes (a reduction stage after a convolution runs a program per row of it: level 2's 3,
    ConvTranspose3d -> LayerNorm over 64 -> AvgPool, took 127 s a call at a 2.5M-element output)."""

    macs: int
    largest: int
    shapes: tuple[tuple[int, ...], ...] = ()  # every tensor an op computes, in order

    def keeps_sizes_of(self, other: CaseWork) -> bool:
        """Whether no dim is 1 here that is larger in `other` (op by op): a size-1 dim is a constant to
        the trace, and the kernel would then be made for this case alone (a 2-wide pooled input pools
        to 1: level 2's 96, 'a trace that fixes x.shape[2] to 2')."""
        return len(self.shapes) == len(other.shapes) and all(
            len(a) == len(b) and not any(x <= 1 < y for x, y in zip(a, b)) for a, b in zip(self.shapes, other.shapes))


def case_work(run: Callable[[], Any]) -> CaseWork:
    """The CaseWork of `run` (on meta tensors). A convolution's output element takes a group's input
    channels x the taps; a transposed one's input element does (its weight is [C_in, C_out / groups,
    taps..]). Views make nothing, and a factory (the inputs' own allocation) computes nothing: neither counts."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    macs = largest = 0
    shapes: list[tuple[int, ...]] = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            nonlocal macs, largest
            out = func(*args, **(kwargs or {}))
            computed = any(isinstance(a, torch.Tensor) for a in tree_leaves((args, kwargs)))  # not a factory's
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if computed and isinstance(t, torch.Tensor) and not t._is_view():
                    largest = max(largest, t.numel())
                    shapes.append(tuple(t.shape))
            if func.overloadpacket is torch.ops.aten.convolution and isinstance(out, torch.Tensor):
                x, w, transposed = args[0], args[1], bool(args[6])
                macs += (x if transposed else out).numel() * math.prod(w.shape[1:])
            return out

    with Count():
        run()
    return CaseWork(macs, largest, tuple(shapes))


def roomy(run: Callable[[], Any]) -> bool:
    """Whether every convolution `run` calls has each spatial size of its input and output at least
    MIN_SPATIAL: dims 2 on, as aten.convolution always sees (N, C, spatial...) (conv1d/2d/3d batch an
    unbatched input before calling it)."""
    for shape_in, shape_out in convolution_shapes(run):
        if any(d < MIN_SPATIAL for shape in (shape_in, shape_out) for d in shape[2:]):
            return False
    return True
