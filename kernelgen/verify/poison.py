"""Poison: what fresh allocations hold during a guarded call, chosen by the judge per run.

Floats get a quiet NaN with a random payload of the judge's choosing, written through an integer view
of the same width, so an element the kernel never wrote is told apart from a NaN it computed
(arithmetic NaNs come out canonical). Integers get a random value; booleans alternate between the
two fills. Because the values are drawn per run and each check runs with two different fills, a
kernel can neither recognise the harness by the poison nor pass by reading memory it did not write.
"""

from __future__ import annotations

import secrets
from typing import Any

from pydantic import BaseModel, ConfigDict

# Quiet-NaN prefixes per float width: exponent all ones, top mantissa bit set; the payload below it.
_QNAN = {"float16": (0x7E00, 9), "bfloat16": (0x7FC0, 6), "float32": (0x7FC00000, 22), "float64": (0x7FF8000000000000, 51)}
_INT_VIEW = {"float16": "int16", "bfloat16": "int16", "float32": "int32", "float64": "int64"}


class Fill(BaseModel):
    """One poison fill: the bit pattern per float dtype, one integer value, one boolean."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    floats: dict[str, int]  # dtype name -> bit pattern (as the signed integer of the same width)
    integer: int
    boolean: bool


def _signed(bits: int, width: int) -> int:
    return bits - (1 << width) if bits >= 1 << (width - 1) else bits


def draw_fills() -> tuple[Fill, Fill]:
    """Two fills that differ in every dtype, drawn afresh (secrets: not reproducible from a seed)."""
    fills = []
    for boolean in (True, False):
        floats = {}
        for name, (prefix, payload_bits) in _QNAN.items():
            payload = 1 + secrets.randbelow((1 << payload_bits) - 2)  # never 0: that would be the canonical NaN
            width = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}[name]
            floats[name] = _signed(prefix | payload, width)
        fills.append(Fill(floats=floats, integer=-(1 + secrets.randbelow(100)), boolean=boolean))
    a, b = fills
    if any(a.floats[k] == b.floats[k] for k in a.floats) or a.integer == b.integer:
        return draw_fills()
    return a, b


def _dtype_name(t: Any) -> str:
    return str(t.dtype).replace("torch.", "")


def poison(t: Any, fill: Fill) -> None:
    """Overwrite `t` with the fill's pattern for its dtype."""
    import torch

    name = _dtype_name(t)
    if name in fill.floats:
        t.view(getattr(torch, _INT_VIEW[name])).fill_(fill.floats[name])
    elif t.dtype == torch.bool:
        t.fill_(fill.boolean)
    else:
        t.fill_(fill.integer if t.dtype != torch.uint8 else fill.integer % 256)


def poisoned_mask(t: Any, fill: Fill) -> Any:
    """Where `t` still holds the fill's float pattern; None for dtypes whose poison is not
    recognisable on its own (integers and booleans: the second fill tells those apart)."""
    import torch

    name = _dtype_name(t)
    if name not in fill.floats:
        return None
    return t.view(getattr(torch, _INT_VIEW[name])) == fill.floats[name]
