"""Symbolic sizes: sympy expressions over the inputs' dimension symbols, and what the IR needs of them
(broadcasting, equality, products, and Python source for the generated wrapper)."""

from __future__ import annotations

from typing import Any, Iterable

import sympy
import torch

ONE = sympy.Integer(1)


def expr(d: Any) -> sympy.Expr:
    """A size as an expression: ints become Integers, SymInts their symbolic expression."""
    if isinstance(d, sympy.Expr):
        return d
    if isinstance(d, (torch.SymInt, torch.SymFloat)):
        return d.node.expr
    return sympy.Integer(int(d))


def same(a: sympy.Expr, b: sympy.Expr) -> bool:
    return a == b or sympy.simplify(a - b) == 0


def is_one(d: sympy.Expr) -> bool:
    return d == ONE


def prod(ds: Iterable[sympy.Expr]) -> sympy.Expr:
    out = ONE
    for d in ds:
        out = out * d
    return out


def broadcast(*shapes: tuple) -> tuple:
    """PyTorch's broadcast of symbolic shapes (aligned from the right); ValueError when they clash."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[sympy.Expr] = [ONE] * rank
    for s in shapes:
        for i, d in enumerate(s, rank - len(s)):
            if is_one(d):
                continue
            if is_one(out[i]):
                out[i] = d
            elif not same(out[i], d):
                raise ValueError(f"shapes {[tuple(map(str, x)) for x in shapes]} do not broadcast")
    return tuple(out)


def same_shape(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def python(e: sympy.Expr) -> str:
    """Python source computing `e` from the symbols (bound in the wrapper to the inputs' sizes)."""
    from torch.utils._sympy.printers import PythonPrinter

    return PythonPrinter().doprint(sympy.sympify(e))


def contiguous_strides(shape: tuple) -> tuple:
    strides, step = [], ONE
    for d in reversed(shape):
        strides.append(step)
        step = step * d
    return tuple(reversed(strides))
