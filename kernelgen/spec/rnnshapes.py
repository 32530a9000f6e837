"""Recurrent layers on shape-only tensors in one step, not one per time step.

On the meta device `torch.lstm`, `torch.gru` and `torch.rnn_*` decompose into every gate of every time
step of every layer, each through Python: one forward of KernelBench level 3's 39_GRU (512 steps, 6
layers) took 5 s, a derivation runs about 50 of them, and it was stopped at 240 s (2 cores,
2026-11-27). Within `rnn_shapes()` a recurrent call on meta tensors returns its outputs' shapes at once,
after the checks torch makes of the sizes (input features against the first layer's weights, the
initial state's layers, batch and width), so a size that does not fit still raises, as the shrinking of
test cases needs. Calls on real tensors (the CPU runs of a derivation) go through untouched.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _outputs(name: str, args: tuple) -> tuple:
    """The outputs of `torch.<name>(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first)` on meta tensors, or RuntimeError where torch would refuse the sizes."""
    import torch

    x, hx, params, has_biases, layers, _, _, bidirectional, batch_first = args
    states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    directions = 2 if bidirectional else 1
    hidden = params[0].shape[0] // _GATES[name]
    width = params[1].shape[1]  # of h: the hidden size, or an LSTM's projection
    batched = x.dim() == 3
    if x.dim() not in (2, 3) or x.shape[-1] != params[0].shape[1]:
        raise RuntimeError(f"{name}: input of shape {list(x.shape)} for a first layer of {params[0].shape[1]} features")
    batch = [x.shape[0 if batch_first else 1]] if batched else []
    wanted = [[layers * directions, *batch, width]] + ([[layers * directions, *batch, hidden]] if name == "lstm" else [])
    if [list(s.shape) for s in states] != wanted:
        raise RuntimeError(f"{name}: initial state of shape {[list(s.shape) for s in states]}, expected {wanted}")
    steps = x.shape[1 if batch_first and batched else 0]
    shape = ([batch[0], steps] if batch_first else [steps, batch[0]]) if batched else [steps]
    out = torch.empty(*shape, directions * width, dtype=x.dtype, device=x.device)
    return (out, *[torch.empty(s.shape, dtype=s.dtype, device=s.device) for s in states])


class _Mode:
    """A TorchFunctionMode (made lazily: torch) answering recurrent calls on meta tensors by shape."""

    @staticmethod
    def make() -> Any:
        import torch
        from torch.overrides import TorchFunctionMode

        functions = {getattr(torch, name): name for name in _GATES}

        class RNNShapes(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
                name = functions.get(func)
                if name is not None and not kwargs and len(args) == 9 and isinstance(args[0], torch.Tensor) \
                        and args[0].device.type == "meta":
                    return _outputs(name, args)
                return func(*args, **(kwargs or {}))

        return RNNShapes()


@contextmanager
def rnn_shapes() -> Iterator[None]:
    with _Mode.make():
        yield
