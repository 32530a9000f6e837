"""In-process tampering evidence, inside the worker: the identity of every attribute of the namespaces
a call's evidence depends on (torch, torch.Tensor, torch.nn.functional, math, builtins, Triton's launch
classes and the worker's own guard modules), taken before any candidate is imported.

A candidate that monkeypatches one of them (`torch.equal = ...`, `torch.Tensor.__ne__ = ...`) is
reported on the first check after its import or after any call, even if its patch would undo itself
later. The judge does not rely on this — it compares outputs itself, in its own process — but a patch
is a violation worth naming.
"""

from __future__ import annotations

import math
import sys
from typing import Any


class TamperSnapshot:
    # Attributes Python and PyTorch add or rewrite on their own: copyreg caches `__slotnames__` on
    # a class the first time it is pickled (torch.compile's cache keys pickle Triton's JITFunction:
    # seen on an H200 with torch 2.11, a false "tampering" verdict before this list existed).
    BENIGN = frozenset({"_", "__slotnames__", "_abc_impl", "__abstractmethods__", "__parameters__"})

    def __init__(self) -> None:
        import builtins

        import torch
        import torch.nn.functional as F  # noqa: N812

        from kernelgen.verify.worker import guard

        from kernelgen.verify import poison, protocol
        from kernelgen.verify.worker.guard import launch_runners

        try:  # imported lazily by the first launch, and it rewraps torch.manual_seed & co.
            import torch._dynamo  # noqa: F401
        except Exception:  # noqa: BLE001 - pragma: no cover
            pass
        spaces: list[tuple[str, Any, bool]] = [
            ("torch", torch, False), ("torch.nn.functional", F, False), ("math", math, False),
            ("builtins", builtins, False), ("torch.Tensor", torch.Tensor, True),
            ("torch.Tensor base", torch.Tensor.__mro__[1], True),
            ("kernelgen.verify.worker.guard", guard, False), ("kernelgen.verify.poison", poison, False),
            ("kernelgen.verify.protocol", protocol, False),
            ("kernelgen.verify.worker.server", sys.modules.get("kernelgen.verify.worker.server") or guard, False),
        ]
        spaces += [(f"triton {cls.__name__}", cls, True) for cls in launch_runners()]
        self._spaces = [(label, obj, closed, dict(vars(obj))) for label, obj, closed in spaces]

    def rebase(self) -> None:
        """Accept the current state (after trusted code, such as the worker's own launch hooks)."""
        self._spaces = [(label, obj, closed, dict(vars(obj))) for label, obj, closed, _ in self._spaces]

    def changed(self) -> list[str]:
        found = []
        for label, obj, closed, before in self._spaces:
            now = vars(obj)
            for k, v in before.items():
                if k in self.BENIGN:
                    continue
                if k not in now:
                    found.append(f"{label}.{k} deleted")
                elif now[k] is not v:
                    found.append(f"{label}.{k} replaced")
            if closed:
                found += [f"{label}.{k} added" for k in now if k not in before and k not in self.BENIGN]
        return found


def describe(changed: list[str], when: str) -> tuple[str, str]:
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return "harness-tampering", f"{when}: {shown} (the candidate monkeypatched what the checks rely on)"
