"""The IR every family reads: a traced reference as values with symbolic shapes.

Every `Value` is one tensor (or scalar) the reference computes, in topological order, with its shape
as sympy expressions over the inputs' dimensions (`s0`, `s1`, ... bound to `x.shape[0]`, ... by the
generated wrapper) and its dtype as the reference gives it. Float math runs in fp32 in the kernels and
rounds once at each store.

Ops:
- leaves: `input` (attrs index), `param` (name), `const` (value), `size` (expr: a symbolic size
  used as a number, e.g. the element count a mean divides by), `full` (value; a constant tensor of
  `shape`), `iota` (a 0..n-1 ramp of shape (n,): triangular masks are built from two of them);
- pointwise: the expression table's op names (kernelgen.offline.frontend.exprs): add, mul, where,
  cast, ..., broadcasting as PyTorch does (shapes aligned from the right);
- `view` (attrs kind + arguments): reshape, permute, expand, unsqueeze, squeeze, slice, select, flip,
  window (pooling's overlapping windows);
- `reduce` (attrs kind, dims, correction): sum, max, min, prod, argmax, argmin, var (Welford), its
  shape keeping the reduced dims as 1 (a `squeeze` view follows when the reference drops them);
- anchors of their own: `mm` (a [..., M, K] @ [..., K, N] with broadcast batch dims), `scan`
  (kind sum|prod, dim), `gather` (dim), `cat` (dim), `pad` (a padded copy, pooling's borders).
  Pooling and attention are lowered into these (frontend/lower_pool.py, lower_attention.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy

Shape = tuple  # of sympy.Expr

FLOATS = ("float16", "bfloat16", "float32", "float64")


@dataclass
class Value:
    id: int
    op: str
    args: tuple[int, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    shape: Shape = ()
    dtype: str = "float32"

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOATS

    @property
    def rank(self) -> int:
        return len(self.shape)

    def numel(self) -> sympy.Expr:
        return sympy.Mul(*self.shape) if self.shape else sympy.Integer(1)

    def describe(self) -> str:
        shape = "x".join(str(d) for d in self.shape) or "scalar"
        extra = ", ".join(f"{k}={v}" for k, v in self.attrs.items() if k not in ("value",))
        return f"v{self.id} = {self.op}({', '.join(f'v{a}' for a in self.args)}{', ' + extra if extra else ''}) [{shape} {self.dtype}]"


@dataclass
class Graph:
    values: list[Value]
    outputs: list[int]  # value ids, in the order the reference returns them
    returns_tuple: bool = False
    symbols: dict[str, tuple[int, int]] = field(default_factory=dict)  # symbol name -> (input index, dim)

    def __getitem__(self, i: int) -> Value:
        return self.values[i]

    def users(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {v.id: [] for v in self.values}
        for v in self.values:
            for a in v.args:
                out[a].append(v.id)
        return out

    def live(self) -> set[int]:
        seen: set[int] = set()
        stack = list(self.outputs)
        while stack:
            i = stack.pop()
            if i not in seen:
                seen.add(i)
                stack.extend(self.values[i].args)
        return seen

    def computes(self, op: str) -> bool:
        """Whether a value the outputs depend on is an `op` (the conv family serves what computes a "conv")."""
        return any(self.values[i].op == op for i in self.live())

    def signature(self) -> tuple:
        """The structure, without sizes or literal values: two traces of one reference must agree."""
        return tuple((v.op, v.args, v.dtype, tuple(sorted((k, str(type(x))) for k, x in v.attrs.items())))
                     for v in self.values), tuple(self.outputs)

    def dump(self) -> str:
        return "\n".join(v.describe() for v in self.values) + f"\nreturn {self.outputs}"


class Multi(tuple):
    """An op with several results (max.dim, var_mean, native_layer_norm, ...), read through getitem."""


class NoValue:
    """A result the reference does not use (a norm's running statistics): refused if it is used."""

    def __init__(self, what: str):
        self.what = what
