"""In-process tampering evidence, inside the worker, taken before any candidate is imported (since issue 40
defence in depth: what a recording worker reports is a plan the judge checks and replays elsewhere):

- the identity of every attribute of the namespaces a call's evidence depends on (torch, torch.Tensor,
  torch.nn.functional, math, builtins, Triton's launch classes, pydantic's BaseModel);
- the worker's own state, sealed: every module the worker runs (its request loop, guard, wire, timing
  loop, poison fills), each of their classes' dictionaries (additions included), and the code, defaults
  and closure cells of every function in them and in Triton's launch classes (where the guard's launch
  hooks live); and the instance dictionaries of the objects that decide a reply (the Worker, its
  Stopwatch and that Stopwatch's Seal).

A candidate that monkeypatches any of them (`torch.equal = ...`, `Arena.write = ...`,
`run_reps.__code__ = ...`, `stopwatch._reps = ...`) is reported on the first check after its import or
after any call, and, in a call or timing request, before the worker writes the outputs or the times
it would otherwise have trusted to the patched code. The judge does not rely on this — it compares
outputs itself, in its own process — but a patch is a violation worth naming.
"""

from __future__ import annotations

import math
import sys
from typing import Any

# The worker's own modules: everything between a candidate's call and the bytes the judge reads.
SEALED_MODULES = ("kernelgen.verify.worker.server", "kernelgen.verify.worker.guard", "kernelgen.verify.worker.tamper",
                  "kernelgen.verify.worker.candidate", "kernelgen.verify.worker.interpreter",
                  "kernelgen.verify.record.calls", "kernelgen.verify.record.mode", "kernelgen.verify.record.launches",
                  "kernelgen.verify.record.ops", "kernelgen.verify.plan", "kernelgen.verify.replay.order",
                  "kernelgen.verify.protocol", "kernelgen.verify.timing", "kernelgen.verify.poison",
                  "kernelgen.verify.digest", "kernelgen.verify.samples", "kernelgen.verify.adaptive")


def _function_state(f: Any) -> tuple:
    # identities only: comparing values could run a candidate's __eq__
    cells = tuple(c.cell_contents for c in f.__closure__ or () if _filled(c))
    return (f.__code__, f.__defaults__, f.__kwdefaults__, *cells)


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _functions(space: Any) -> list[tuple[str, Any]]:
    """(name, Python function) for every function in a namespace: plain, static, class methods and
    property accessors."""
    out = []
    for name, member in list(vars(space).items()):
        for f in (member, getattr(member, "__func__", None), getattr(member, "fget", None), getattr(member, "fset", None)):
            if f is not None and hasattr(f, "__code__") and hasattr(f, "__closure__"):
                out.append((name, f))
    return out


class TamperSnapshot:
    # Attributes Python and PyTorch add or rewrite on their own: copyreg caches `__slotnames__` on
    # a class the first time it is pickled (torch.compile's cache keys pickle Triton's JITFunction:
    # seen on an H200 with torch 2.11, a false "tampering" verdict before this list existed).
    BENIGN = frozenset({"_", "__slotnames__", "_abc_impl", "__abstractmethods__", "__parameters__"})

    def __init__(self) -> None:
        import builtins

        import pydantic
        import torch
        import torch.nn.functional as F  # noqa: N812

        from kernelgen.verify.worker.guard import launch_runners

        try:  # imported lazily by the first launch, and it rewraps torch.manual_seed & co.
            import torch._dynamo  # noqa: F401
        except Exception:  # noqa: BLE001 - pragma: no cover
            pass
        spaces: list[tuple[str, Any, bool]] = [
            ("torch", torch, False), ("torch.nn.functional", F, False), ("math", math, False),
            ("builtins", builtins, False), ("torch.Tensor", torch.Tensor, True),
            ("torch.Tensor base", torch.Tensor.__mro__[1], True), ("pydantic.BaseModel", pydantic.BaseModel, True),
        ]
        launchers = [(f"triton {cls.__name__}", cls, True) for cls in launch_runners()]
        own = [(name, sys.modules[name], False) for name in SEALED_MODULES if name in sys.modules]
        classes = [(f"{module.__name__}.{value.__qualname__}", value, True) for _, module, _ in own
                   for value in vars(module).values() if isinstance(value, type) and value.__module__ == module.__name__]
        self._spaces = [(label, obj, closed, dict(vars(obj))) for label, obj, closed in spaces + launchers + own + classes]
        self._code = [(f"{label}.{name}", f, _function_state(f)) for label, obj, _ in launchers + own + classes
                      for name, f in _functions(obj)]
        self._instances: list[tuple[str, Any, dict[str, Any]]] = []

    def seal(self, label: str, obj: Any) -> None:
        """Seal an object's instance dictionary as it is now (the Worker, its Stopwatch, the Seal)."""
        self._instances.append((label, obj, dict(vars(obj))))

    def accept(self, obj: Any, name: str) -> None:
        """The worker itself rebound `obj.name` (a new arena): the new value is the sealed one."""
        for _, sealed, state in self._instances:
            if sealed is obj:
                state[name] = vars(obj)[name]

    def rebase(self) -> None:
        """Accept the current state (after trusted code, such as the worker's own launch hooks, or after
        reporting a change once)."""
        self._spaces = [(label, obj, closed, dict(vars(obj))) for label, obj, closed, _ in self._spaces]
        self._code = [(label, f, _function_state(f)) for label, f, _ in self._code]
        self._instances = [(label, obj, dict(vars(obj))) for label, obj, _ in self._instances]

    def changed(self) -> list[str]:
        found = []
        for label, obj, closed, before in self._spaces:
            found += _diff(label, vars(obj), before, closed, self.BENIGN)
        for label, obj, before in self._instances:
            found += _diff(label, vars(obj), before, True, frozenset())
        for label, f, state in self._code:
            now = _function_state(f)
            if len(now) != len(state) or any(a is not b for a, b in zip(now, state)):
                found.append(f"{label}'s code, defaults or closure changed")
        return found


def _diff(label: str, now: Any, before: dict[str, Any], closed: bool, benign: frozenset[str]) -> list[str]:
    found = []
    for k, v in before.items():
        if k in benign:
            continue
        if k not in now:
            found.append(f"{label}.{k} deleted")
        elif now[k] is not v:
            found.append(f"{label}.{k} replaced")
    if closed:
        found += [f"{label}.{k} added" for k in now if k not in before and k not in benign]
    return found


def describe(changed: list[str], when: str) -> tuple[str, str]:
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return "harness-tampering", f"{when}: {shown} (the candidate monkeypatched what the checks rely on)"
