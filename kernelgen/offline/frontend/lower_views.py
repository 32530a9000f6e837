"""Views: the op table's handlers of the ATen view ops (reshape, expand, unsqueeze, squeeze,
permute, slice, select, flip), and `view` and dim lists, which the other handlers use too. A view
stays explicit in the IR; the nd family turns the ones that move elements into loads."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.call import Builder, Call


def _dims(dims: Any, rank: int) -> tuple[int, ...]:
    """Reduced dims, normalised (None or [] means all of them)."""
    if dims is None or dims == [] or dims == ():
        return tuple(range(rank))
    dl = [dims] if isinstance(dims, int) else list(dims)
    return tuple(sorted({d % max(rank, 1) for d in dl}))


def view(b: Builder, x: int, kind: str, shape: tuple | None = None, **attrs: Any) -> int:
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


def reshape(b: Builder, c: Call) -> int:
    return view(b, b.operand(c.args[0]), "reshape", b.shape_of(c.node))


def expand(b: Builder, c: Call) -> int:
    return view(b, b.operand(c.args[0]), "expand", b.shape_of(c.node))


def broadcast_in_dim(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    for d in range(len(c.args[1])):
        if d not in c.args[2]:
            x = view(b, x, "unsqueeze", dim=d)
    return view(b, x, "expand", b.shape_of(c.node))


def unsqueeze(b: Builder, c: Call) -> int:
    return view(b, b.operand(c.args[0]), "unsqueeze", dim=c.args[1] % (b.v(b.operand(c.args[0])).rank + 1))


def squeeze(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    rank = b.v(x).rank
    given = range(rank) if c.overload == "default" else ([c.args[1]] if c.overload == "dim" else c.args[1])
    dims = tuple(d % max(rank, 1) for d in given if S.is_one(b.v(x).shape[d % max(rank, 1)]))
    return view(b, x, "squeeze", dims=dims) if dims else x


def permute(b: Builder, c: Call) -> int:
    """permute, transpose, t and .T: one permute view (none when it moves nothing)."""
    x = b.operand(c.args[0])
    rank = b.v(x).rank
    if c.base == "permute":
        perm = tuple(d % rank for d in c.args[1])
    elif c.base == "transpose":
        order = list(range(rank))
        d0, d1 = c.args[1] % rank, c.args[2] % rank
        order[d0], order[d1] = order[d1], order[d0]
        perm = tuple(order)
    else:
        perm = tuple(reversed(range(rank)))
    return view(b, x, "permute", perm=perm) if perm != tuple(range(rank)) else x


def slice_(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    dim = (c.args[1] if len(c.args) > 1 else 0) % b.v(x).rank
    start = S.expr(c.args[2] if len(c.args) > 2 and c.args[2] is not None else 0)
    step = c.args[4] if len(c.args) > 4 else 1
    if start.is_number and int(start) < 0:
        start = start + b.v(x).shape[dim]
    return view(b, x, "slice", b.shape_of(c.node), dim=dim, start=start, step=int(step))


def select(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    dim = c.args[1] % b.v(x).rank
    index = S.expr(c.args[2])
    if index.is_number and int(index) < 0:
        index = index + b.v(x).shape[dim]
    return view(b, x, "select", b.shape_of(c.node), dim=dim, index=index)


def flip(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    return view(b, x, "flip", dims=tuple(d % b.v(x).rank for d in c.args[1]))
