"""What the pointwise, row and matmul families share as families (kernelgen.offline.family): one
analysis of the spec over its frame, read by all three, each serving the labels it knows."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, Callable, ClassVar

from kernelgen.offline.budgets import Pruned
from kernelgen.offline.dispatch import DispatchEntry, Route, frame_key, routes
from kernelgen.offline.family import Family, Refused, Served, Subject, Verdict
from kernelgen.offline.frame.emitter import assign_spaces
from kernelgen.offline.frame.host import render_file
from kernelgen.offline.frame.plan import FramePlan, analyse_frame
from kernelgen.offline.frame.pruning import FrameCase, frame_case
from kernelgen.offline.knobs import KnobsModel, resolve_knobs
from kernelgen.offline.naming import Names
from kernelgen.offline.unsupported import NotServed
from kernelgen.spec import OperatorSpec


class FrameFamily(Family):
    labels: ClassVar[tuple[str, ...]]  # the classifications this family serves (kernelgen.offline.frame.classify)

    def examine(self, subject: Subject) -> Verdict:
        try:  # one frame analysis for the three families that read it
            plan = subject.derived("frame", lambda: analyse_frame(subject.spec, subject.traced))
        except NotServed as e:  # outside the frame: the general families may still serve it
            return Refused(self.name, e.what, "outside")
        if plan.kind.family not in self.labels:
            return Refused(self.name, f"{plan.kind.family} work (the {self.name} family serves {', '.join(self.labels)})",
                           "outside")
        refusal = self.refusal(plan)
        if refusal is not None:
            return Refused(self.name, refusal)
        return Served(plan, plan.kind.family, plan.kind.summary)

    def emit(self, spec: OperatorSpec, served: Served, knobs: KnobsModel, entries: list[DispatchEntry]) -> str:
        """The family's file (templates/offline/<name>.py.j2) from its own template context."""
        plan: FramePlan = served.plan.fresh()
        rs = routes(spec, knobs, entries, lambda shapes: frame_key([shapes[n] for n in spec.input_names]),
                    lambda k: self.resolve(served, k))
        assign_spaces(plan.view.graph, plan.kind.roles)
        names = Names(spec)
        context = self.context(spec, plan, names, rs)
        return render_file(self.name, spec, plan.view, served.label, served.summary, knobs, names, context)

    def context(self, spec: OperatorSpec, plan: FramePlan, names: Names, rs: list[Route]) -> dict[str, Any]:
        """What the family's template needs beyond the shared frame (a family that emits its own way,
        as matmul does, overrides emit instead)."""
        raise NotImplementedError(f"the {self.name} family emits without the frame's template context")

    def refusal(self, plan: FramePlan) -> str | None:
        """What in a plan of this family's kind its kernels cannot compute (None: nothing), found
        before anything is emitted so that the families after it are asked instead."""
        return None

    def prune(self, spec: OperatorSpec, served: Served, knob: str, values: list, base: KnobsModel,
              shapes: Mapping[str, list[int]], dtype: str, sm_count: int | None) -> list[Pruned]:
        plan: FramePlan = served.plan
        case = frame_case(spec, plan.view, base, dict(shapes), dtype, sm_count)
        return self.prune_case(case, served.label, lambda k: resolve_knobs(self.knobs_model, served.label, k), knob, values)

    @abstractmethod
    def prune_case(self, case: FrameCase, label: str, resolve: Callable[[Any], KnobsModel], knob: str,
                   values: list) -> list[Pruned]:
        """The family's rules on one case (its launch model against the shared budgets)."""
