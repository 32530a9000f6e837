"""The reductions of the IR (a `reduce` value's `kind`, and `gather`): for each, how a kernel starts,
steps, reduces and finishes it. Beside the pointwise op table (exprs.py), this is the one place a new
reduction kind is added: one row, which every emitter reads (the stage engine's tile and split
kernels: kernelgen.offline.stages.emit_reduce and emit_split; the frame engine's rows:
kernelgen.offline.frame.emitter). Floats accumulate in fp32.

A row's `form` is the state its accumulator keeps, which is all an emitter branches on:
  value    one accumulator per lane, reduced across lanes at the end (`reduce`); its partial is a
           value of the same kind, so a split reduction combines partials with `reduce` again
  index    the best value and its flat index per lane (argmax, argmin): `step` says which is better,
           the first index wins among equals
  moments  count, mean and M2 per lane (Welford), merged across lanes and splits by Chan et al.'s
           parallel formula (var; its `correction` is the value's attribute)
  pick     the one element whose index along the reduced dims matches (gather): a masked sum
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from kernelgen.offline.frontend.exprs import literal
from kernelgen.offline.unsupported import unsupported

NAN_ALL = "propagate_nan=tl.PropagateNan.ALL"  # torch.max/min propagate NaN; tl's default does not
FLOAT = {"float": "tl.float32"}
ANY_AS_FLOAT = {"float": "tl.float32", "int": "tl.float32"}


@dataclass(frozen=True)
class Reduction:
    """One reduction kind: templates over {acc} (the accumulator), {x} (the masked operand), {mask},
    {t} (a tile) and {axis}, and the dtypes it accumulates in."""

    identity: float  # what a masked-off lane holds and an accumulator starts from
    step: str  # value, pick: one loop step into {acc}; index: when {x} beats {acc}
    reduce: str  # a tile's lanes into one along {axis}
    accumulates: Mapping[str, str]  # "float" / "int" operand -> the accumulator's dtype; an operand not listed is refused
    form: Literal["value", "index", "moments", "pick"] = "value"
    pairwise: str = ""  # two values {a} and {b} into one, elementwise: a scan's carry, the frame engine's loop
    scan: str = ""  # the running form along {axis}, where there is one
    helper: str = ""  # the @triton.jit helper `reduce` calls (the file defines it)

    def acc_dtype(self, kind: str, is_float: bool) -> str:
        """The accumulator's dtype for an operand; a reduction of integers it does not serve is refused."""
        got = self.accumulates.get("float" if is_float else "int")
        if got is None:
            unsupported(f"a {kind} over integers")
        return got

    def fill(self, acc: str) -> str:
        """The identity as a literal of the accumulator's dtype."""
        return str(int(self.identity)) if acc == "tl.int64" else literal(self.identity)

    def reduced(self, tile: str, axis: str = "1") -> str:
        return self.reduce.format(t=tile, axis=axis)

    @property
    def splits(self) -> bool:
        """Whether a split reduction can share it: partials of a value, or of moments."""
        return self.form in ("value", "moments")

    @property
    def slots(self) -> int:
        """fp32 workspace values one partial takes (count, mean and M2 for moments)."""
        return 3 if self.form == "moments" else 1


REDUCTIONS: dict[str, Reduction] = {
    "sum": Reduction(0.0, "{acc} += tl.where({mask}, {x}, 0)", "tl.sum({t}, {axis})",
                     {"float": "tl.float32", "int": "tl.int64"}, pairwise="{a} + {b}", scan="tl.cumsum({t}, {axis})"),
    "max": Reduction(-math.inf, "{acc} = tl.where({mask}, tl.maximum({acc}, {x}, " + NAN_ALL + "), {acc})",
                     "tl.max({t}, {axis})", FLOAT, pairwise="tl.maximum({a}, {b})"),
    "min": Reduction(math.inf, "{acc} = tl.where({mask}, tl.minimum({acc}, {x}, " + NAN_ALL + "), {acc})",
                     "tl.min({t}, {axis})", FLOAT, pairwise="tl.minimum({a}, {b})"),
    "prod": Reduction(1.0, "{acc} = tl.where({mask}, {acc} * {x}, {acc})", "tl.reduce({t}, {axis}, _prod)", ANY_AS_FLOAT,
                      pairwise="{a} * {b}", scan="tl.cumprod({t}, {axis})", helper="_prod"),
    "argmax": Reduction(-math.inf, "{x} > {acc}", "tl.max({t}, {axis})", FLOAT, form="index"),
    "argmin": Reduction(math.inf, "{x} < {acc}", "tl.min({t}, {axis})", FLOAT, form="index"),
    "var": Reduction(0.0, "", "tl.sum({t}, {axis})", ANY_AS_FLOAT, form="moments"),
    "gather": Reduction(0.0, "{acc} += tl.where({mask}, {x}, 0.0)", "tl.sum({t}, {axis})", ANY_AS_FLOAT, form="pick"),
}


def reduction(kind: str) -> Reduction:
    row = REDUCTIONS.get(kind)
    if row is None:
        unsupported(f"the reduction {kind}")
    return row


def reductions_of(*kinds: str) -> dict[str, Reduction]:
    """The rows an engine serves (the frame engine: sum, max and min)."""
    return {k: REDUCTIONS[k] for k in kinds}
