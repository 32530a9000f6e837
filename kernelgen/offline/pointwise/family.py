"""The pointwise family: elementwise work over the inputs' broadcast frame (activations, scales,
biases, comparisons, casts), one program per tile, no reduction."""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.budgets import Pruned
from kernelgen.offline.dispatch import FirstChoice, Route, frame_key
from kernelgen.offline.family import Served
from kernelgen.offline.frame.family import FrameFamily
from kernelgen.offline.frame.plan import FramePlan
from kernelgen.offline.frame.pruning import FrameCase
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.naming import Names
from kernelgen.offline.pointwise.emit import pointwise_context
from kernelgen.offline.pointwise.knobs import PointwiseKnobs
from kernelgen.offline.pointwise.pruning import prune_pointwise
from kernelgen.spec import OperatorSpec


# elements from which a float32 frame takes 64 KB tiles (first_choices): at 1.6G elements they won 2%
# (below), at 65M-134M they lost 18-41% (gelu 16384x8192 261 -> 368 us, scale_shift 65536x1000 134 -> 184,
# broadcast 65536x1000 134 -> 157; H200, Triton 3.6, benchmarks/trees.py, 2026-11-26)
BIG_FRAME = 1 << 30


class PointwiseFamily(FrameFamily):
    name = "pointwise"
    labels = ("pointwise",)
    knobs_model = PointwiseKnobs

    def context(self, spec: OperatorSpec, plan: FramePlan, names: Names, rs: list[Route]) -> dict[str, Any]:
        return pointwise_context(spec, plan.view, plan.kind, names, rs)

    def first_choices(self, spec: OperatorSpec, served: Served, sm_count: int) -> list[FirstChoice]:
        """float32 frames of 1G elements or more take 64 KB per program (16384 elements, 16 warps):
        on an H200 (2026-11-25, [4096, 393216], eager at 99% of a 4.28 TB/s copy) sigmoid, leaky ReLU
        and hardsigmoid took 3.07-3.10 ms against 3.13-3.15 at the file's 16 KB; 16-bit frames keep
        the file's tile (a flat bf16 kernel was fastest at 2048 elements, 4 warps: 1.00-1.12x eager)."""
        out = []
        for shapes in spec.effective_perf_cases:
            rows, cols = frame_key([shapes[n] for n in spec.input_names])
            for dtype in spec.dtypes:
                if dtype == "float32" and rows * cols >= BIG_FRAME:
                    out.append(FirstChoice(dtype, dict(shapes), {"TILE_BYTES": 65536},
                                           f"{rows}x{cols} float32: 64 KB per program (16384 elements, 16 warps), "
                                           "fewer programs in flight than the file's 16 KB tiles, each with more loads"))
                else:
                    out.append(FirstChoice(dtype, dict(shapes), {}, "the file's tiles (16 KB per program)"))
        return out

    def prune_case(self, case: FrameCase, label: str, resolve: Callable[[Any], KnobsModel], knob: str,
                   values: list) -> list[Pruned]:
        return prune_pointwise(case, label, resolve, knob, values)
