"""Which of a problem's sizes its module fixes, and so which dims of its inputs every case keeps.

A size the module fixes keeps KernelBench's value in every test case, and the judge's generated cases
never change it (the spec's `fixed_dims`): a kernel may be specialised to it, as KernelBench only ever
runs the module at it. Level 2's 62, 75, 88 and 94 show why: their GroupNorm's 512 groups of 16
channels were shrunk to 512 groups of 1, the generated kernel was specialised to that, and it refused
KernelBench's own shape (`gemm_weight.shape[0] is 8192; the reference needs 512 there`).

- Held: every module-level name whose value reaches `get_init_inputs()` (a norm's shape, a
  GroupNorm's groups and channels, a Linear's features) or sets how an input is drawn
  (`torch.randint(0, num_classes, ...)`), found by doubling each name alone and watching what changes.
- Except where holding them all leaves no test case under shrink.HARD_CAP elements: then a name the
  module does not pin is let go, one whose shrunk value the module built at KernelBench's sizes
  accepts (a Linear's features: its forward reads them off the weight it is given). The Linears of
  level 2 are 8192x8192: one call of the nd kernel on x[3, 8192] took 55 s in the CPU interpreter
  (2 cores, 2026-11-25), and a check makes about 60 of them.
"""

from __future__ import annotations

from typing import Callable

from kernelgen.errors import ProblemFileError
from kernelgen.spec.kernelbench.lift import Observation, observe
from kernelgen.spec.kernelbench.shrink import BUDGETS, HARD_CAP, free_values, ints, search_case, total
from kernelgen.spec.kernelbench.source import ProblemSource, Size

_PINNED_PROBE = 13  # an odd size no channel count of KernelBench's is a multiple of


def doubled(value: Size) -> Size:
    return 2 * value if isinstance(value, int) else type(value)(2 * v for v in value)


def _draws(obs: Observation) -> list:
    return [t.init for t in obs.inputs if not t.key]


def reaching_names(src: ProblemSource, perf: Observation) -> dict[str, str]:
    """The names whose value reaches how a forward input is drawn ("draw") or get_init_inputs() ("init")."""
    out = {}
    for name, value in src.sizes.items():
        try:
            obs = observe(src, {name: doubled(value)})
        except ProblemFileError:  # the problem refuses it changed alone: hold it, to be safe
            out[name] = "draw"
            continue
        if _draws(obs) != _draws(perf):
            out[name] = "draw"
        elif obs.init != perf.init:
            out[name] = "init"
    return out


def _pinned(src: ProblemSource, name: str, fits: Callable[[Observation], bool]) -> bool:
    """Whether the module built at KernelBench's sizes refuses this name shrunk alone."""
    value = src.sizes[name]
    if min(ints(value), default=0) <= _PINNED_PROBE:
        return True
    probe = _PINNED_PROBE if isinstance(value, int) else type(value)(_PINNED_PROBE for _ in value)  # a list as a list
    try:
        return not fits(observe(src, {name: probe}))
    except ProblemFileError:
        return True


def held_names(src: ProblemSource, perf: Observation, fits: Callable[[Observation], bool]) -> set[str]:
    """The names every case keeps at KernelBench's value (see the module's docstring)."""
    reaching = reaching_names(src, perf)
    held = set(reaching)
    first = search_case(src, perf, free_values(src.sizes, held), {}, held, 0, BUDGETS[0], _draws(perf), fits, [])
    if first is not None and total(first) <= HARD_CAP:
        return held
    return {n for n, why in reaching.items() if why == "draw" or _pinned(src, n, fits)}


def _observe_or(src: ProblemSource, perf: Observation, overrides: dict[str, Size]) -> Observation:
    try:
        return observe(src, overrides)
    except ProblemFileError:
        return perf


def fixed_dims(src: ProblemSource, perf: Observation, cases: list[Observation], held: set[str]) -> dict[str, list[int]]:
    """Per input, the dims every case keeps: those that keep their size when every name not held is
    doubled (equal values alike; doubling keeps what divides them) and in every test case. Where the
    problem's code refuses the doubled sizes, the test cases alone say."""
    free = {n: doubled(v) for n, v in src.sizes.items() if n not in held and max(ints(v), default=0) > 1}
    moved = [_observe_or(src, perf, free)] if free else []
    if moved and moved[0] is perf:
        moved = []
    out: dict[str, list[int]] = {}
    for i, t in enumerate(perf.inputs):
        same = [d for d in range(len(t.shape)) if all(len(o.inputs[i].shape) == len(t.shape) and
                                                         o.inputs[i].shape[d] == t.shape[d] for o in [*moved, *cases])]
        if same:
            out[t.name] = same
    return out

