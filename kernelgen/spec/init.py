"""An input's `init`: how its values are drawn — a generator, then optional steps applied left to right.

    randn                               standard normal (the default)
    rand | softmax(-1)                  uniform [0, 1), then a softmax over the last dim (a distribution)
    randint(0, 2) | affine(2, -1)       -1 or +1 (x * 2 - 1)
    randint(0, 2) | bool                a boolean mask
    rand | triu                         the upper triangle of a uniform matrix (tril(k), triu(k): a diagonal offset)
    rand | add_transpose | affine(0.5)  a symmetric matrix: (x + x.mT) / 2
    rand | scale(rand)                  times one number drawn from rand (KernelBench's `torch.rand(()) * ...`)

The one definition of what an init means: `draw_init` draws it for the judge and the tracer (with a
seeded generator), `init_code` writes the same draw as Python for a generated file's self-check (with
the global one). Nothing here imports torch at module level.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

# name -> (fewest, most) numeric arguments
GENERATORS: dict[str, tuple[int, int]] = {
    "randn": (0, 0),  # standard normal
    "rand": (0, 0),  # uniform [0, 1)
    "uniform": (2, 2),  # uniform [lo, hi)
    "normal": (2, 2),  # normal(mean, std)
    "randint": (2, 2),  # integers in [lo, hi)
    "bernoulli": (1, 1),  # 0/1 (or bool) with probability p
    "ones": (0, 0),
    "zeros": (0, 0),
    "full": (1, 1),  # every element the same value
}
STEPS: dict[str, tuple[int, int]] = {
    "affine": (1, 2),  # x * a + b (b defaults to 0)
    "softmax": (1, 1),  # softmax over dim d
    "triu": (0, 1),  # upper triangle, diagonal offset k (default 0)
    "tril": (0, 1),  # lower triangle
    "add_transpose": (0, 0),  # x + x.mT (square in the last two dims)
    "bool": (0, 0),  # nonzero -> True
    "scale": (1, 1),  # times one value drawn from a generator without arguments: scale(rand), scale(randn)
}
SCALE_SOURCES = ("rand", "randn")
_PART_RE = re.compile(r"^\s*([a-z_]+)\s*(?:\((.*)\))?\s*$")


@dataclass(frozen=True)
class InitPlan:
    generator: str
    args: tuple[float, ...] = ()
    steps: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    @property
    def text(self) -> str:
        """The canonical spelling (what a derived spec writes)."""
        parts = [_call(self.generator, self.args)] + [_call(name, args) for name, args in self.steps]
        return " | ".join(parts)


def _num(v: Any) -> str:
    if isinstance(v, str):
        return v
    return repr(int(v)) if float(v).is_integer() else repr(float(v))


def _call(name: str, args: tuple[Any, ...]) -> str:
    return f"{name}({', '.join(_num(a) for a in args)})" if args else name


def _args(text: str | None, whole: str) -> tuple[Any, ...]:
    if text is None or not text.strip():
        return ()
    out: list[Any] = []
    for piece in text.split(","):
        piece = piece.strip()
        if re.fullmatch(r"[a-z_]+", piece):
            out.append(piece)
            continue
        try:
            value = ast.literal_eval(piece)
        except (ValueError, SyntaxError):
            value = None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"init {whole!r}: arguments must be numbers, got {piece!r}")
        out.append(float(value))
    return tuple(out)


def _count(kind: str, name: str, args: tuple[Any, ...], table: dict[str, tuple[int, int]]) -> None:
    lo, hi = table[name]
    if not lo <= len(args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise ValueError(f"init {kind} {name!r} takes {want} argument(s), got {len(args)}")


def _check_step(name: str, args: tuple[Any, ...], whole: str) -> None:
    if name == "scale":
        if args[0] not in SCALE_SOURCES:
            raise ValueError(f"init {whole!r}: scale takes a generator name ({', '.join(SCALE_SOURCES)}), got {args[0]!r}")
    elif any(isinstance(a, str) for a in args):
        raise ValueError(f"init {whole!r}: {name} takes numbers")
    elif name in ("softmax", "triu", "tril") and args and not float(args[0]).is_integer():
        raise ValueError(f"init {whole!r}: {name}'s argument is a dimension index or a diagonal offset, an integer")


def parse_init(text: str) -> InitPlan:
    """Parse an input's `init` ("randn", "randint(0, 100)", "rand | softmax(-1)"); ValueError if bad."""
    parts = text.split("|")
    plan_gen: tuple[str, tuple[float, ...]] | None = None
    steps: list[tuple[str, tuple[Any, ...]]] = []
    for i, part in enumerate(parts):
        match = _PART_RE.match(part)
        if not match:
            raise ValueError(f"cannot parse init {text!r}; expected e.g. 'randn', 'randint(0, 100)' or 'rand | softmax(-1)'")
        name, args = match.group(1), _args(match.group(2), text)
        if i == 0:
            if name not in GENERATORS:
                hint = " (a step: it comes after a generator and `|`)" if name in STEPS else ""
                raise ValueError(f"unknown init generator {name!r}{hint}; known: {', '.join(GENERATORS)}")
            _count("generator", name, args, GENERATORS)
            if any(isinstance(a, str) for a in args):
                raise ValueError(f"init {text!r}: arguments must be numbers")
            plan_gen = (name, args)
        else:
            if name not in STEPS:
                raise ValueError(f"unknown init step {name!r} in {text!r}; known: {', '.join(STEPS)}")
            _count("step", name, args, STEPS)
            _check_step(name, args, text)
            steps.append((name, args))
    assert plan_gen is not None
    gen, args = plan_gen
    if gen in ("uniform", "randint") and not args[0] < args[1]:
        raise ValueError(f"init {text!r}: the lower bound must be below the upper bound")
    if gen == "normal" and args[1] <= 0:
        raise ValueError(f"init {text!r}: std must be positive")
    if gen == "bernoulli" and not 0.0 <= args[0] <= 1.0:
        raise ValueError(f"init {text!r}: p must be in [0, 1]")
    return InitPlan(gen, args, tuple(steps))


def init_shape_problem(plan: InitPlan, shape: list[int]) -> str | None:
    """Why `plan` cannot draw a tensor of `shape` (a softmax dim beyond the rank, a triangle of a
    vector, a transpose of a non-square matrix), or None."""
    for name, args in plan.steps:
        if name == "softmax" and not -len(shape) <= int(args[0]) < max(len(shape), 1):
            return f"softmax({int(args[0])}) needs a dimension of a rank-{len(shape)} tensor"
        if name in ("triu", "tril", "add_transpose") and len(shape) < 2:
            return f"{name} needs a matrix (rank >= 2), got rank {len(shape)}"
        if name == "add_transpose" and shape[-1] != shape[-2]:
            return f"add_transpose needs the last two dims equal, got {shape}"
    return None


def draw_init(plan: InitPlan, shape: list[int], generator: Any, device: str) -> Any:
    """One tensor drawn as `plan` says (float32, int64 or bool; the caller casts to the input's dtype)."""
    import torch

    kw = {"generator": generator, "device": device}
    g, a = plan.generator, plan.args
    if g == "randn":
        t = torch.randn(shape, **kw)
    elif g == "rand":
        t = torch.rand(shape, **kw)
    elif g == "uniform":
        t = torch.rand(shape, **kw) * (a[1] - a[0]) + a[0]
    elif g == "normal":
        t = torch.randn(shape, **kw) * a[1] + a[0]
    elif g == "randint":
        t = torch.randint(int(a[0]), int(a[1]), shape, **kw)
    elif g == "bernoulli":
        t = torch.rand(shape, **kw) < a[0]
    else:  # ones, zeros, full
        t = torch.full(shape, {"ones": 1.0, "zeros": 0.0}.get(g, a[0] if a else 0.0), device=device)
    for name, args in plan.steps:
        if name == "affine":
            t = t * args[0] + (args[1] if len(args) > 1 else 0.0)
        elif name == "softmax":
            t = t.float().softmax(int(args[0]))
        elif name in ("triu", "tril"):
            t = getattr(torch, name)(t, int(args[0]) if args else 0)
        elif name == "add_transpose":
            t = t + t.mT
        elif name == "bool":
            t = t.bool()
        else:  # scale
            t = t * getattr(torch, args[0])((), **kw)
    return t


def init_code(plan: InitPlan, shape: tuple[int, ...]) -> str:
    """The same draw as a Python expression on the global generator (a generated file's self-check)."""
    g, a = plan.generator, plan.args
    code = {
        "randn": lambda: f"torch.randn({shape})",
        "rand": lambda: f"torch.rand({shape})",
        "uniform": lambda: f"(torch.rand({shape}) * {a[1] - a[0]!r} + {a[0]!r})",
        "normal": lambda: f"(torch.randn({shape}) * {a[1]!r} + {a[0]!r})",
        "randint": lambda: f"torch.randint({int(a[0])}, {int(a[1])}, {shape})",
        "bernoulli": lambda: f"(torch.rand({shape}) < {a[0]!r})",
        "ones": lambda: f"torch.ones({shape})",
        "zeros": lambda: f"torch.zeros({shape})",
        "full": lambda: f"torch.full({shape}, {a[0]!r})",
    }[g]()
    for name, args in plan.steps:
        if name == "affine":
            code = f"({code} * {args[0]!r} + {args[1] if len(args) > 1 else 0.0!r})"
        elif name == "softmax":
            code = f"{code}.float().softmax({int(args[0])})"
        elif name in ("triu", "tril"):
            code = f"torch.{name}({code}, {int(args[0]) if args else 0})"
        elif name == "add_transpose":
            code = f"(lambda t: t + t.mT)({code})"
        elif name == "bool":
            code = f"{code}.bool()"
        else:
            code = f"({code} * torch.{args[0]}(()))"
    return code
