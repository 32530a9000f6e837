"""The face every family of the offline generator shows; kernelgen.offline.registry lists them.

A family serves one kind of kernel (pointwise, rows, matmul, conv, nd). Shown a
spec's trace (a Subject: the front end's trace, made once per spec and handed to every family in
turn), it says whether it can serve it -- `Served`, with its own plan of the kernel, or
`Refused`, with the reason naming the op or parameter it does not serve -- and for a spec it
serves it gives its knobs (a kernelgen.offline.knobs.KnobsModel), round 0's choices per perf case,
the pruning rules that drop knob values before timing, and the kernel file itself.

Nothing outside a family's folder branches on which family it is: kernelgen.offline's
generate_kernel, first_kernel, knob_space, prune and family_of all go through this face.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, TypeVar, Union

from kernelgen.offline.budgets import Pruned
from kernelgen.offline.dispatch import DispatchEntry, FirstChoice
from kernelgen.offline.knobs import KnobsModel, resolve_knobs
from kernelgen.offline.unsupported import NotServed
from kernelgen.spec import OperatorSpec

if TYPE_CHECKING:
    from kernelgen.offline.frontend.trace import Traced

T = TypeVar("T")


@dataclass
class Subject:
    """What every family examines: the spec, its canonical form (the key the route is cached under,
    computed once), and the front end's trace of its reference, made once and handed to each family
    in turn. An analysis several families read (the frame that pointwise, rows and matmul share) is
    derived once here too."""

    spec: OperatorSpec
    key: str  # the spec's canonical form: its JSON
    traced: Traced
    _derived: dict[str, Any] = field(default_factory=dict, repr=False)

    def derived(self, name: str, make: Callable[[], T]) -> T:
        """`make()` once per subject (its refusal too: the next family asking is refused alike)."""
        if name not in self._derived:
            try:
                self._derived[name] = make()
            except NotServed as e:
                self._derived[name] = e
        got = self._derived[name]
        if isinstance(got, NotServed):
            raise NotServed(got.what)
        return got


@dataclass(frozen=True)
class Served:
    """The family serves the spec: its plan (what its other methods take back), the label the spec
    is known by (OfflineKernel.family, the tuning memory's family: "softmax", "nd", ...), and a
    one-line summary of what was traced."""

    plan: Any
    label: str
    summary: str


@dataclass(frozen=True)
class Refused:
    """The family does not serve the spec, and why: `reason` names the op or parameter ("a reduction
    over dims [0] of a rank-2 tensor"). `scope` says how much the family recognised: "outside" (not
    its kind of operator at all, e.g. the pointwise family shown a softmax) or "detail" (its kind,
    but one op or parameter it does not serve) -- when no family serves a spec, the user is told
    the reason of the last family that refused a detail."""

    family: str
    reason: str
    scope: Literal["outside", "detail"] = "detail"


Verdict = Union[Served, Refused]


class Family(ABC):
    """One family of kernels. Subclasses set `name` and `knobs_model` and implement the methods."""

    name: ClassVar[str]  # the family's folder: pointwise | rows | matmul | conv | nd
    knobs_model: ClassVar[type[KnobsModel]]

    @abstractmethod
    def examine(self, subject: Subject) -> Verdict:
        """Whether this family serves the subject's spec, from its trace (the route asks once per spec)."""

    @abstractmethod
    def emit(self, spec: OperatorSpec, served: Served, knobs: KnobsModel, entries: list[DispatchEntry]) -> str:
        """The kernel file's source: `knobs` baked in, `entries` routed to their own knobs (ValueError
        naming the entry when one cannot be served)."""

    @abstractmethod
    def first_choices(self, spec: OperatorSpec, served: Served, sm_count: int) -> list[FirstChoice]:
        """Round 0: per perf case x dtype, the knobs the analysis picks and why ([] or empty knobs
        everywhere: the file's own per-call heuristics are round 0's choice)."""

    @abstractmethod
    def prune(self, spec: OperatorSpec, served: Served, knob: str, values: list, base: KnobsModel,
              shapes: Mapping[str, list[int]], dtype: str, sm_count: int | None) -> list[Pruned]:
        """Which values of `knob` are worth timing at one case (input name -> shape, in `dtype`, on
        `sm_count` SMs, None: 132), each with the reason; `base` is already resolved."""

    def knob_space(self) -> dict[str, list[Any]]:
        """The tunable knobs and their candidate values (first = default)."""
        return self.knobs_model.space()

    def resolve(self, served: Served, knobs: KnobsModel | Mapping[str, Any] | None) -> KnobsModel:
        """The family's knobs from a model, a dict of overrides or None (ValueError naming a bad one)."""
        return resolve_knobs(self.knobs_model, served.label, knobs)
