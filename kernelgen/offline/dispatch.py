"""Per-shape dispatch tables: which knobs a generated wrapper uses for which calls.

The optimize loop keeps a value of a knob per case when it wins on some shapes or dtypes and loses
on others (the seed's "dynamic parameter selection"). Each such case becomes a `DispatchEntry`
(stored in state.json); `generate_kernel(spec, knobs, dispatch=[...])` writes the entries into the
file as a readable table, one commented line each, and the wrapper routes a call to the entry of
its dtype nearest to its shape. A route is the base knobs overridden by one entry's; routes whose
code knobs (a knobs model's `code_knobs`) differ get kernels of their own in the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from pydantic import BaseModel, ConfigDict

from kernelgen.offline.knobs import KnobsModel
from kernelgen.spec import DTYPES, OperatorSpec

# A knob's value as stored (bool before int: pydantic's smart union keeps True a bool).
KnobValue = Union[bool, int, float, str, None]


class DispatchEntry(BaseModel):
    """One measured case whose best knobs differ from the base's."""

    model_config = ConfigDict(extra="forbid")

    dtype: str  # the case dtype it was measured in ("bfloat16")
    shapes: dict[str, list[int]]  # the perf case it was measured at: input name -> shape
    knobs: dict[str, KnobValue]  # overrides of the base knobs that won there
    reason: str  # one measured line, e.g. "x1.21 over the base (0.0705 vs 0.0853 ms)"


@dataclass(frozen=True)
class FirstChoice:
    """One perf case x dtype's round-0 setting and why."""

    dtype: str
    shapes: dict[str, list[int]]
    knobs: dict[str, KnobValue]  # overrides of the base knobs ({}: the file's heuristic is the choice)
    reason: str


def first_entries(choices: list[FirstChoice]) -> list[DispatchEntry]:
    """Round 0's dispatch table: one entry per perf case x dtype, or none when every case keeps the
    file's heuristic (an empty entry pins a case to the base, so nearby shapes are not routed away)."""
    if not any(c.knobs for c in choices):
        return []
    return [DispatchEntry(dtype=c.dtype, shapes=c.shapes, knobs=c.knobs, reason=f"round 0, from the analysis: {c.reason}")
            for c in choices]


@dataclass(frozen=True)
class Route:
    """A setting the wrapper can route calls to: the base knobs (entry None) or an entry's."""

    knobs: KnobsModel  # the full, validated setting
    entry: Optional[DispatchEntry]
    key: tuple[int, int]  # (rows, cols) the entry was measured at; (0, 0) for the base


def frame_key(shapes: list[list[int]]) -> tuple[int, int]:
    """(rows, cols) of the broadcast output seen as [product of the leading dims, last dim]."""
    import torch  # ~1 s: only when a table is built, not when kernelgen.offline is imported

    out = tuple(torch.broadcast_shapes(*[tuple(s) for s in shapes]))
    return (max(math.prod(out[:-1]), 1), max(out[-1], 1)) if out else (1, 1)


def routes(spec: OperatorSpec, base: KnobsModel, entries: list[DispatchEntry] | None,
           key_of: Callable[[dict[str, list[int]]], tuple[int, int]],
           resolve: Callable[[dict[str, Any]], KnobsModel]) -> list[Route]:
    """The base route, then one per entry (ValueError naming the entry when it cannot be served).
    `key_of(shapes)`: the family's routing key (rows, cols) of a case; `resolve(knobs)`: the
    family's knobs model from a dict (ValueError naming a knob it lacks)."""
    out = [Route(base, None, (0, 0))]
    for i, raw in enumerate(entries or []):
        entry = raw if isinstance(raw, DispatchEntry) else DispatchEntry.model_validate(raw)
        where = f"dispatch entry {i} ({entry.dtype} {entry.shapes})"
        if entry.dtype not in DTYPES:
            raise ValueError(f"{where}: dtype {entry.dtype!r} is not one of {', '.join(DTYPES)}")
        if set(entry.shapes) != set(spec.input_names):
            raise ValueError(f"{where}: shapes must name every input of {spec.name} ({', '.join(spec.input_names)})")
        if "autotune" in entry.knobs:
            raise ValueError(f"{where}: autotune is a base knob; an entry fixes its shape's knobs, which autotune "
                             "would choose again at run time")
        try:
            knobs = resolve({**base.model_dump(), **entry.knobs})
            key = key_of(entry.shapes)
        except (ValueError, RuntimeError) as e:
            raise ValueError(f"{where}: {e}") from None
        out.append(Route(knobs, entry, key))
    return out


def literal(value: KnobValue) -> str:
    """A knob value as Python source in the generated file ("online" in double quotes)."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def knobs_literal(knobs: dict[str, KnobValue]) -> str:
    return "{" + ", ".join(f'"{k}": {literal(v)}' for k, v in knobs.items()) + "}"


def wrapped(head: str, items: list[str], close: str, width: int = 100) -> str:
    """`head` + the items, comma-separated, + `close`, wrapped under the bracket `head` ends with past
    `width` characters (`def f(a, b):`, `_BASE = {"a": 1, ...}`)."""
    lines, line = [], head
    for i, item in enumerate(items):
        piece = item + (close if i == len(items) - 1 else ",")
        if len(line) + 1 + len(piece) > width and line != head:
            lines.append(line)
            line = " " * len(head) + piece
        else:
            line += ("" if line == head else " ") + piece
    return "\n".join(lines + [line])


def knobs_assignment(name: str, knobs: dict[str, KnobValue]) -> str:
    """`name = {...}`: the knobs a file's calls use, as a wrapped dict literal."""
    return wrapped(f"{name} = {{", [f'"{k}": {literal(v)}' for k, v in knobs.items()], "}", width=120)


def table(routes_: list[Route], spec: OperatorSpec) -> list[dict]:
    """The generated file's _DISPATCH: per dtype (in the spec's order), its entries with a comment
    each (dtype, shapes, setting, the measured reason), in the order given."""
    groups: dict[str, list[dict]] = {}
    for r in routes_[1:]:
        e = r.entry
        assert e is not None
        shapes = ", ".join(f"{n} {list(e.shapes[n])}" for n in spec.input_names)
        setting = ", ".join(f"{k}={literal(v)}" for k, v in e.knobs.items()) or "the base knobs"
        reason = " ".join(e.reason.split())  # one line, whatever it was given as
        groups.setdefault(e.dtype, []).append({
            "key": r.key, "knobs": knobs_literal(e.knobs),
            "comment": f"{e.dtype}, {shapes} (rows x cols {r.key[0]} x {r.key[1]}): {setting} -- {reason}",
        })
    order = [d for d in spec.dtypes if d in groups] + [d for d in groups if d not in spec.dtypes]
    return [{"dtype": f"torch.{d}", "entries": groups[d]} for d in order]
