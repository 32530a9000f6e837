"""The convolution family's face (kernelgen.offline.family): a reference with a convolution (other than
a 1x1 one with stride 1, which the front end makes a batched matmul for nd), as an nd program whose
convolution stage carries the per-element and per-channel chain after it, and whose later stages
reduce over pixels or channels (kernelgen.offline.stages; the convolution stage: conv/stage.py, its kernel
conv/emit.py)."""

from __future__ import annotations

from collections.abc import Mapping

from kernelgen.offline.budgets import Pruned
from kernelgen.offline.conv.knobs import ConvKnobs
from kernelgen.offline.conv.pruning import describe, prune_conv
from kernelgen.offline.dispatch import DispatchEntry, FirstChoice, routes
from kernelgen.offline.family import Family, Refused, Served, Subject, Verdict
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.stages.analysis import analyse, dispatch_key
from kernelgen.offline.stages.cases import stage_case
from kernelgen.offline.stages.file import stage_file
from kernelgen.offline.conv.stage import CONV_STAGE
from kernelgen.offline.unsupported import NotServed
from kernelgen.spec import OperatorSpec


class ConvFamily(Family):
    name = "conv"
    knobs_model = ConvKnobs

    def examine(self, subject: Subject) -> Verdict:
        spec = subject.spec
        if not subject.traced.graph.computes("conv"):
            return Refused(self.name, "no convolution (a 1x1 one with stride 1 is a batched matmul)", scope="outside")
        try:
            analysis = analyse(spec, subject.traced, (CONV_STAGE,))
        except NotServed as e:
            return Refused(self.name, e.what)
        kinds = [st.kind for st in analysis.program.stages]
        return Served(analysis, "conv", f"conv: {len(kinds)} stage(s) ({', '.join(kinds)}) over {len(spec.inputs)} input(s)")

    def emit(self, spec: OperatorSpec, served: Served, knobs: KnobsModel, entries: list[DispatchEntry]) -> str:
        rs = routes(spec, knobs, entries, lambda shapes: dispatch_key(spec, shapes), lambda k: self.resolve(served, k))
        return stage_file(spec, served.plan, rs, "conv", served.summary)

    def first_choices(self, spec: OperatorSpec, served: Served, sm_count: int) -> list[FirstChoice]:
        """The file's heuristics at every perf case x dtype (its _conv_config: channels per tile no
        wider than a group has, K as (channel, tap) pairs under 16 channels a group, 2 programs per SM
        at BLOCK_M 128 or 64-pixel tiles); each case's reason says what they launch there."""
        out = []
        for shapes in spec.effective_perf_cases:
            for dtype in spec.dtypes:
                case = stage_case(spec, served.plan, shapes, dtype, sm_count)
                out.append(FirstChoice(dtype, dict(shapes), {}, "the file's heuristics: " + describe(case.launches(ConvKnobs()))))
        return out

    def prune(self, spec: OperatorSpec, served: Served, knob: str, values: list, base: KnobsModel,
              shapes: Mapping[str, list[int]], dtype: str, sm_count: int | None) -> list[Pruned]:
        case = stage_case(spec, served.plan, dict(shapes), dtype, sm_count)
        return prune_conv(case, served.label, lambda k: self.resolve(served, k), knob, values, base)
