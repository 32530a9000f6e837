"""What the pointwise, row and matmul families know of a spec they serve: the reference over the
frame (kernelgen.offline.frame.view) and its classification (family label, each input's role)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

from kernelgen.offline.frame.classify import Classification, classify
from kernelgen.offline.frame.view import FrameView, frame_view
from kernelgen.offline.frontend.trace import Traced
from kernelgen.spec import OperatorSpec


@dataclass(frozen=True)
class FramePlan:
    view: FrameView
    kind: Classification

    def fresh(self) -> FramePlan:
        """A copy whose graph emission may annotate (spaces): the cached plan stays clean."""
        return FramePlan(copy.deepcopy(self.view), self.kind)


def analyse_frame(spec: OperatorSpec, traced: Traced) -> FramePlan:
    """The reference over its frame and what kind of work it is (the route keeps it with the family
    that serves it: the optimize loop asks many knob settings of one spec)."""
    view = frame_view(spec, traced)
    return FramePlan(view, classify(view))
