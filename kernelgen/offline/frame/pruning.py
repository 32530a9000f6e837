"""What the pointwise and row families' pruning rules share: one case (shapes, dtype, SMs) and the
rules that hold for both -- a persistent grid that loops over nothing, a value that launches the
same kernel as the base, the register budget of the tile it launches (kernelgen.offline.budgets)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelgen.offline.budgets import DEFAULT_SMS, Pruned, register_budget
from kernelgen.offline.launch import Launch
from kernelgen.offline.frame.view import FrameView
from kernelgen.offline.knobs import KnobsModel
from kernelgen.spec import DTYPES, OperatorSpec

# knobs whose values change the code or the grid's shape: judged by their own rules, never dropped
# for launching fewer programs than another value
NOT_BY_PROGRAMS = ("algorithm", "persistent", "erf", "eviction", "autotune")


@dataclass
class FrameCase:
    """One case a knob's values are judged at: input name -> shape, in `dtype`, on `sms` SMs."""

    spec: OperatorSpec
    view: FrameView
    base: KnobsModel
    shapes: dict[str, list[int]]
    dtype: str
    itemsize: int
    sms: int

    @property
    def shape_text(self) -> str:
        return ", ".join(f"{n} {list(self.shapes[n])}" for n in self.spec.input_names)

    @property
    def input_shapes(self) -> list[list[int]]:
        return [self.shapes[n] for n in self.spec.input_names]

    def persistent(self, value: Any, launch: Launch) -> Pruned:
        if launch.path == "split":
            return Pruned(value, False, "split rows launch a fixed grid: persistent does not apply")
        if launch.programs >= launch.tiles:
            return Pruned(value, False, f"{launch.tiles} tiles fit one wave of {launch.programs} persistent programs: no loop, same launch")
        return Pruned(value, True, f"{launch.tiles} tiles over {launch.programs} programs ({launch.tiles / launch.programs:.1f} each): "
                                   "fewer program launches and tails")

    def same_or_budget(self, knob: str, value: Any, launch: Launch, base_launch: Launch, same_code: bool) -> Pruned:
        """Nothing to time when the value launches the base's kernel, tile and grid; else the tile's
        registers (the tile and a temporary, + an accumulator when it loops)."""
        if launch == base_launch and same_code:
            return Pruned(value, False, f"{knob}={value!r} launches the same kernel, tile and grid as the base at {self.shape_text}: "
                                        "nothing to time")
        live = 2 if launch.path in ("single", "2d", "1d") else 3
        return register_budget(knob, value, launch, self.sms, live)


def frame_case(spec: OperatorSpec, view: FrameView, base: KnobsModel, shapes: dict[str, list[int]], dtype: str,
               sm_count: int | None) -> FrameCase:
    import torch  # ~1 s: only when values are judged, not when kernelgen.offline is imported

    itemsize = getattr(torch, DTYPES[dtype]).itemsize
    return FrameCase(spec, view, base, dict(shapes), dtype, itemsize, sm_count or DEFAULT_SMS)
