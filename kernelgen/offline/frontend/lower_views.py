"""Views and dim lists, shared by the op lowerings (lower_ops.py) and the reductions (lower_reduce.py)."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.frontend import shapes as S


def _dims(dims: Any, rank: int) -> tuple[int, ...]:
    """Reduced dims, normalised (None or [] means all of them)."""
    if dims is None or dims == [] or dims == ():
        return tuple(range(rank))
    dl = [dims] if isinstance(dims, int) else list(dims)
    return tuple(sorted({d % max(rank, 1) for d in dl}))


def view(b: Any, x: int, kind: str, shape: tuple | None = None, **attrs: Any) -> int:
    """A view of x; its shape from the trace (`shape`) or worked out here for the simple kinds."""
    xs = b.v(x).shape
    if shape is None:
        if kind == "unsqueeze":
            shape = xs[: attrs["dim"]] + (S.ONE,) + xs[attrs["dim"]:]
        elif kind == "squeeze":
            shape = tuple(d for i, d in enumerate(xs) if i not in attrs["dims"])
        elif kind == "permute":
            shape = tuple(xs[p] for p in attrs["perm"])
        elif kind == "flip":
            shape = xs
        else:
            raise ValueError(f"view {kind} needs its shape")
    if kind == "reshape" and S.same_shape(tuple(shape), xs):
        return x
    return b.add("view", (x,), tuple(shape), b.v(x).dtype, kind=kind, **attrs)
