"""What the pointwise, row and matmul families know of a spec they serve: the reference over the
frame (kernelgen.offline.frame.view) and its classification (family label, each input's role)."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass

from kernelgen.offline.frame.classify import Classification, classify
from kernelgen.offline.frame.view import FrameView, frame_view
from kernelgen.offline.frontend.trace import traced_spec
from kernelgen.spec import OperatorSpec


@dataclass(frozen=True)
class FramePlan:
    view: FrameView
    kind: Classification

    def fresh(self) -> FramePlan:
        """A copy whose graph emission may annotate (spaces): the cached plan stays clean."""
        return FramePlan(copy.deepcopy(self.view), self.kind)


@functools.lru_cache(maxsize=64)
def analyse_frame(spec_json: str) -> FramePlan:
    # the optimize loop asks for many knob settings of one spec: the view is built once per content
    view = frame_view(OperatorSpec.model_validate_json(spec_json), traced_spec(spec_json))
    return FramePlan(view, classify(view))
