"""The offline generator: correct, fast Triton kernels for common operator families, no LLM needed.

    kern = generate_kernel(spec)            # shape-aware default heuristics in the file
    kern = generate_kernel(spec, {"num_warps": 8})   # one knob fixed, the rest default
    kern = generate_kernel(spec, knobs, dispatch=[DispatchEntry(...), ...])  # per-shape routes
    kern = first_kernel(spec, sm_count=132)     # round 0: per perf case, the setting the analysis picks
    kern.knobs                              # the typed knobs baked in (the family's knobs model)
    space = knob_space(spec)                # what the optimize loop may vary
    prune(spec, "algorithm", space["algorithm"], kern.knobs, shapes, "bfloat16", 132)  # before timing
    family_of(spec)                         # the label the spec is served as: "softmax", "nd", ...
    routed = route(spec)                    # all of the above from one trace: routed.first_kernel(132), ...

The kernel is derived from the spec's `reference` (traced to ATen ops), never from its name.
Operators outside the families raise UnsupportedOperatorError saying how to configure an LLM.

How a spec becomes a kernel file (`kernelgen new` -> backends.OfflineWriter -> route -> first_kernel):
  1. registry.route(spec), once per `new`: the spec's canonical form keys the one cache; the front
     end traces the reference once per test case with symbolic shapes and lowers it through the op
     table into one IR (frontend/); that trace goes to each family in registry.FAMILIES, in order,
     whose examine says Served(plan) or Refused(reason).
  2. Routed.first_choices: round 0's setting per perf case x dtype (a dispatch table where the
     analysis picks other knobs than the file's heuristics).
  3. Routed.kernel(knobs, entries): the family's emit, the kernels' text and the host path as data,
     rendered once through templates/offline/<family>.py.j2 into <name>_triton.py.
  The optimize loop then asks knob_space and prune (the family's launch model against the
  budgets.py limits) and calls generate_kernel with its dispatch table (each call finds the route
  made before).

Where things are (the rooms read as the pipeline: the front end, the two engines, the families):
  family.py, registry.py      the protocol every family shows; the ordered list of families
  knobs.py, dispatch.py, launch.py, budgets.py   shared: the knobs base, dispatch tables, what a
              launch is (the matmul and convolution tile tables), the pruning budgets
  naming.py, selfcheck.py, unsupported.py   kernel-side names, the __main__ self-check, refusals
  frontend/   trace (trace.py) -> IR (ir.py) through the op table (optable.py, lower_*.py);
              expressions (exprs.py), reductions (reductions.py); what the reference returns (outputs.py)
  frame/      the engine of pointwise, rows and matmul: the IR seen over the [rows, cols] frame
              (project.py, view.py), classify, the emitter, host-path data, launch and pruning
  stages/     the engine of nd and conv: the IR cut into stages (schedule.py), one kernel per stage
              (emit_*.py), the launch model, the host path and the file; a family adds a stage kind
              of its own through stages/anchors.py
  pointwise/ rows/ matmul/ conv/ nd/   a family each: family.py, knobs.py, its own kernel text
              (kernel.py or emit.py), launch.py (a model of the file's launch helper), pruning.py;
              no family imports another (tests/test_layout.py)
A new family is a folder here with a Family subclass in its family.py, its KnobsModel, a template in
templates/offline/ and a snapshot test in tests/offline/, and one line in registry.FAMILIES (before
nd). A new ATen op is one row of frontend/optable.py (a pointwise op: one row of frontend/exprs.py; a
reduction kind: one row of frontend/reductions.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelgen.offline.budgets import Pruned
from kernelgen.offline.dispatch import DispatchEntry, FirstChoice
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.registry import OfflineKernel, Routed, route
from kernelgen.offline.unsupported import NotServed
from kernelgen.spec import OperatorSpec

__all__ = ["DispatchEntry", "NotServed", "OfflineKernel", "Routed", "family_of", "first_choices",
           "first_kernel", "generate_kernel", "knob_space", "prune", "route"]


def generate_kernel(spec: OperatorSpec, knobs: KnobsModel | Mapping[str, Any] | None = None,
                    dispatch: list[DispatchEntry] | None = None) -> OfflineKernel:
    """Trace `spec.reference`, route it to its family, emit the kernel file with `knobs` baked in:
    the family's typed knobs, or a dict overriding some of their defaults (ValueError if unknown).
    `dispatch`: measured cases routed to their own knobs (kernelgen.offline.dispatch); ValueError
    naming the entry when one cannot be served (an unknown input, a knob the family lacks, online
    for reductions that need a pass per level)."""
    return route(spec).kernel(knobs, dispatch)


def first_choices(spec: OperatorSpec, sm_count: int | None = None) -> list[FirstChoice]:
    """Round 0's setting per perf case x dtype, with its reason, for a device of `sm_count` SMs
    (None: 132, an H100/H200); empty knobs where the file's own heuristic is the choice."""
    return route(spec).first_choices(sm_count)


def first_kernel(spec: OperatorSpec, sm_count: int | None = None) -> OfflineKernel:
    """Round 0's kernel: the family's default knobs and a dispatch table of first_choices' settings
    (none when every case keeps the file's heuristic)."""
    return route(spec).first_kernel(sm_count)


def knob_space(spec: OperatorSpec) -> dict[str, list[Any]]:
    """The tunable variables of the spec's family and their candidate values (first = default)."""
    return route(spec).knob_space()


def prune(spec: OperatorSpec, knob: str, values: list[Any], base: KnobsModel | Mapping[str, Any],
          shapes: Mapping[str, list[int]], dtype: str, sm_count: int | None) -> list[Pruned]:
    """Which values of `knob` are worth timing at one case (input name -> shape, in `dtype`, on a
    device of `sm_count` SMs; None: 132), each with the reason (the family's pruning rules)."""
    return route(spec).prune(knob, values, base, shapes, dtype, sm_count)


def family_of(spec: OperatorSpec) -> str:
    """The label the offline generator serves `spec` as (what its knobs mean; the tuning memory files
    its measurements under it); UnsupportedOperatorError when no family serves it."""
    return route(spec).label
