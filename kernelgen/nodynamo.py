"""Running PyTorch code that imports torch._dynamo only to switch it off, without importing it.

In PyTorch 2.13 the meta kernels of elementwise ops are Python references wrapped in
`torch._disable_dynamo`, and so is part of FlopCounterMode's dispatch; the wrapper imports
torch._dynamo — and with it Inductor's configuration and sympy — on its first call: 3.4 s of every
`kernelgen test` on an H200 (issue 32), 4.5 s on a loaded 2-core CPU machine, for commands that
compile nothing. Where torch._dynamo has not been imported nothing can be compiling, so "run this
function with dynamo disabled" has nothing to disable. Inside `without_dynamo` that lazy import finds
a stand-in whose `disable` hands the function back unchanged; on leaving, the stand-in and every
cache entry it left on torch's functions are removed, so a later real import (torch.compile in
`bench`) finds torch exactly as it would have. If the code asks the stand-in for anything else, the
call is made again with the real torch._dynamo: correct, only slower.
"""

from __future__ import annotations

import sys
import threading
import types
from typing import Any, Callable, TypeVar

T = TypeVar("T")
_NAME = "torch._dynamo"
# Held while the stand-in is installed, and by `real_dynamo`: no thread imports the stand-in for real.
_lock = threading.RLock()


class _StandInMissing(Exception):
    """The code asked the stand-in for more than `disable`."""


class _StandIn(types.ModuleType):
    def __init__(self) -> None:
        super().__init__(_NAME)
        self.__path__: list[str] = []  # a package without submodules: importing one fails, and is retried
        self.touched: list[Callable[..., Any]] = []

    def disable(self, fn: Callable[..., Any] = None, recursive: bool = True, wrapping: bool = True) -> Any:  # noqa: ARG002
        if fn is None:
            return lambda f: self.disable(f, recursive, wrapping)
        self.touched.append(fn)
        return fn

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise _StandInMissing(name)


def without_dynamo(fn: Callable[[], T]) -> T:
    """`fn()` (PyTorch on meta tensors, under a flop counter...) without importing torch._dynamo when
    it is not imported yet. Exceptions of `fn` itself propagate unchanged."""
    if _NAME in sys.modules:
        return fn()
    with _lock:
        if _NAME in sys.modules:
            return fn()
        stand_in = _StandIn()
        sys.modules[_NAME] = stand_in
        try:
            return fn()
        except (_StandInMissing, ImportError):
            pass  # made again below, with the real one
        finally:
            _remove(stand_in)
    real_dynamo()
    return fn()


def _remove(stand_in: _StandIn) -> None:
    if sys.modules.get(_NAME) is stand_in:
        del sys.modules[_NAME]
    torch = sys.modules.get("torch")
    if torch is not None and torch.__dict__.get("_dynamo") is stand_in:
        delattr(torch, "_dynamo")
    for fn in stand_in.touched:  # torch caches what `disable` returned on the function itself
        if getattr(fn, "__dynamo_disable", None) is fn:
            try:
                delattr(fn, "__dynamo_disable")
            except AttributeError:
                pass


def real_dynamo() -> Any:
    """torch._dynamo, imported for real (never the stand-in, whatever another thread runs)."""
    with _lock:
        import torch._dynamo

        return torch._dynamo
