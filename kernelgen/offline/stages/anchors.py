"""Stage kinds a family brings to the engine.

The engine (kernelgen.offline.stages) cuts the IR into stages around its anchors and writes the
kernels of pointwise, reduce, scan and matmul stages itself. An anchor it does not know how to emit
(the conv family's convolution) is scheduled like a matmul -- its operands read from buffers, the
pointwise chain after it fused as its epilogue -- and the family that serves such programs hands the
engine an AnchorKind: the stage's kernel text, the wrapper's data for it, its launch at a case (for
pruning and round 0) and its one-line description. The family's template (templates/offline/
<family>.py.j2, extending stages.py.j2) fills the anchored_* blocks with the stage's host code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.stages.access import StageKernel
from kernelgen.offline.stages.program import Buffer, Program, Stage, StageKnobs, StageLaunch


@dataclass(frozen=True)
class AnchorKind:
    kind: str  # the stage kind the scheduler gives the anchor ("conv")
    kernel: Callable[[Graph, Stage, dict[str, Buffer], str], StageKernel]  # (graph, stage, buffers, name) -> its kernel
    plan: Callable[[Graph, Program, Stage, Any], dict[str, Any]]  # (.., its kernel) -> the template's data for its plan
    # (graph, stage, its kernel, knobs, each dim symbol's size at the case, fp32) -> its launch there
    launch: Callable[[Graph, Stage, Any, StageKnobs, dict[str, int], bool], StageLaunch]
    describe: Callable[[Graph, Stage], str]  # one line for the file's docstring and the plan's comment
