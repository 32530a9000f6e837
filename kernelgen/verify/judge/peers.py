"""The Triton libraries a kernel engineer already has, timed beside KernelGen's kernel on the same inputs.

- **FlagGems** replaces PyTorch's ATen operators (`flag_gems.use_gems()`): the peer is the spec's own
  reference run under it — exactly what a FlagGems user gets for this operator.
- **Liger-Kernel** offers kernels for particular operators; a short table maps an operator's inputs
  onto them (softmax, RMS norm, layer norm, SwiGLU).
Either counts as a peer of an operator only if its output matches the reference within the spec's
tolerance on the perf inputs, so no operator is ever compared with a peer computing something else.
Where a library is not installed the column stays empty and the note says so.
"""

from __future__ import annotations

import contextlib
import importlib.util
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from kernelgen.spec import OperatorSpec


FLAG_GEMS = "FlagGems"  # the peers' names: columns, notes, and what `candidates` calls them
LIGER = "Liger-Kernel"
NAMES = (FLAG_GEMS, LIGER)  # in the order `candidates` tries them


@dataclass
class Peer:
    name: str  # the column: "Liger-Kernel", "FlagGems"
    call: Callable[[], Any]  # one call on the bound inputs
    context: Callable[[], Any] = contextlib.nullcontext  # entered around the calls (FlagGems' dispatch override)


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _eps(spec: OperatorSpec) -> float:
    floats = [p for p in spec.params if p.type == "float"]
    return float(floats[0].default) if floats else 1e-6


def _liger(spec: OperatorSpec, inputs: list[Any]) -> Callable[[], Any] | None:
    """The Liger-Kernel function this operator's inputs fit, by kind; None if none does."""
    if not installed("liger_kernel"):
        return None
    n = len(inputs)
    eps = _eps(spec)
    try:
        if spec.category == "softmax" and n == 1:
            from liger_kernel.ops.softmax import LigerSoftmaxFunction

            return lambda: LigerSoftmaxFunction.apply(inputs[0])
        if spec.category == "normalization" and n == 2:
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction

            return lambda: LigerRMSNormFunction.apply(inputs[0], inputs[1], eps, 0.0, "llama", False)
        if spec.category == "normalization" and n == 3:
            from liger_kernel.ops.layer_norm import LigerLayerNormFunction

            return lambda: LigerLayerNormFunction.apply(inputs[0], inputs[1], inputs[2], eps)
        if n == 2 and inputs[0].shape == inputs[1].shape and "silu" in (spec.reference or "") + spec.description.lower():
            from liger_kernel.ops.swiglu import LigerSiLUMulFunction

            return lambda: LigerSiLUMulFunction.apply(inputs[0], inputs[1])
    except ImportError:
        return None
    return None


@contextlib.contextmanager
def _flag_gems() -> Iterator[None]:
    import flag_gems

    with flag_gems.use_gems():
        yield


def candidates(spec: OperatorSpec, reference: Callable[..., Any], inputs: list[Any]) -> tuple[list[Peer], list[str]]:
    """The peers that could run this operator here, and notes on the libraries that are missing."""
    peers, notes = [], []
    params = spec.param_defaults
    if installed("flag_gems"):
        peers.append(Peer(FLAG_GEMS, lambda: reference(*inputs, **params), _flag_gems))
    else:
        notes.append("FlagGems not installed")
    liger = _liger(spec, inputs)
    if liger is not None:
        peers.append(Peer(LIGER, liger))
    elif not installed("liger_kernel"):
        notes.append("Liger-Kernel not installed")
    return peers, notes
