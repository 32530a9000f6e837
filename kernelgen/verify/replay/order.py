"""The order the CPU interpreter runs a launch's programs in: forward (Triton's own), reversed, or
shuffled with a seed. On a GPU programs run in any order and at once; a kernel whose answer depends
on the order (a race between programs, one program reading what another wrote) must fail on the CPU
as it would there, so a check replays its plan in more than one order. Installed once in every worker
(a replay's checks and the candidate's own direct calls), before any kernel is imported.
"""

from __future__ import annotations

import contextlib
import inspect
import random
import threading
from typing import Any, Iterator

_LOCK = threading.Lock()
_INSTALLED = [False]
_ORDER: dict[str, Any] = {"mode": "forward", "seed": 0}


class _DeferredPrograms:
    """Stands in for a kernel's Python function inside the interpreter's grid loop: looks like it
    (globals, signature, name) to the interpreter, but hands each program's call to `on_call`."""

    def __init__(self, fn: Any, on_call: Any):
        self._fn, self._on_call = fn, on_call
        self.__signature__ = inspect.signature(fn)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fn, name)

    def __call__(self, **fn_args: Any) -> None:
        self._on_call(fn_args)


def _install() -> None:
    """On the CPU interpreter, run a launch's programs in the order `program_order` sets. Triton's
    GridExecutor walks the grid in nested loops calling `self.fn(**args)` per program; the wrapper
    defers those calls and replays them in the chosen order once the last program is reached."""
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover
        return
    original = interpreter.GridExecutor.__call__

    def ordered_call(self, *args, **kwargs):  # noqa: ANN001, ANN202
        if _ORDER["mode"] == "forward":
            return original(self, *args, **kwargs)
        real_fn, builder, pending = self.fn, interpreter.interpreter_builder, []

        def run_program(fn_args: dict[str, Any]) -> None:
            pending.append(builder.grid_idx)
            nx, ny, nz = builder.grid_dim
            if len(pending) < nx * ny * nz:
                return
            order = list(reversed(pending)) if _ORDER["mode"] == "reversed" else \
                random.Random(_ORDER["seed"]).sample(pending, len(pending))
            for idx in order:
                builder.set_grid_idx(*idx)
                real_fn(**fn_args)

        self.fn = _DeferredPrograms(real_fn, run_program)
        try:
            return original(self, *args, **kwargs)
        finally:
            self.fn = real_fn

    interpreter.GridExecutor.__call__ = ordered_call


@contextlib.contextmanager
def program_order(mode: str, seed: int = 0) -> Iterator[None]:
    """forward | reversed | shuffled: the order the interpreter runs a launch's programs in."""
    _ORDER.update(mode=mode, seed=seed)
    try:
        yield
    finally:
        _ORDER.update(mode="forward", seed=0)


def install() -> None:
    """Patch the interpreter's grid loop once per process (nothing to do without the interpreter)."""
    with _LOCK:
        if not _INSTALLED[0]:
            _install()
            _INSTALLED[0] = True
