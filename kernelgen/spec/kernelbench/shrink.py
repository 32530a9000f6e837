"""Small test cases from a problem's own code: its module-level sizes replaced by small ones, the code
run again, so every shape computed from them follows (`bias_shape = (out_channels, 1, 1)`).

- Sizes up to SMALL are structural (kernel sizes, strides, groups, a reduction's dim index, a few
  channels) and stay; larger ones are mapped by value, so equal sizes stay equal and different ones
  stay different (a transposed operand cannot hide behind M == N).
- Mapped sizes are odd first, so no size is a multiple of a kernel's tile; where the reference refuses
  them, each mapped size keeps the structural sizes that divide it (channels stay a multiple of groups).
- A size that also sets how an input is drawn (`torch.randint(0, num_classes, ...)`) stays.
- Each case is checked by the caller (the reference on meta tensors); where none fits, the sizes that
  reach `get_init_inputs()` are kept one by one (the module is built once, at KernelBench's sizes, so a
  GroupNorm's 512 groups stay 512), and at last a case over the budget is taken rather than none.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from kernelgen.errors import ProblemFileError
from kernelgen.spec.kernelbench.lift import Observation, observe
from kernelgen.spec.kernelbench.source import ProblemSource, Size

SMALL = 16
# The largest input of each derived case, in elements: the interpreter checks a case x dtype x seed in
# about a second at 2e4 elements; the second case is smaller and shaped differently.
BUDGETS = (24_000, 4_000)
HARD_CAP = 2_000_000  # never a test case above this: the interpreter would take minutes
_BASES = (181, 127, 91, 63, 45, 31, 23, 17, 13, 9, 7, 5, 3)


def _ints(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        return [i for v in value for i in _ints(v)]
    return []


def _large(sizes: dict[str, Size]) -> list[int]:
    return sorted({v for s in sizes.values() for v in _ints(s) if v > SMALL})


def _kept(sizes: dict[str, Size]) -> set[int]:
    return {v for s in sizes.values() for v in _ints(s) if 2 <= v <= SMALL}


def _mapping(values: list[int], divisors: dict[int, set[int]], fixed: set[int], base: int, offset: int) -> dict[int, int]:
    """Each size not in `fixed` -> a small one near `base` (odd where it has no divisors to keep), all different."""
    out: dict[int, int] = {}
    for v in values:
        if v in fixed:
            continue
        d = math.lcm(1, *[k for k in divisors.get(v, ()) if v % k == 0 and k != v])
        if d == 1:
            m = max(3, base) + 2 * offset
            m += 1 - m % 2  # odd
        else:  # a multiple of its divisors: once may already be large (8192 channels in 512 groups -> 512)
            m = max(1, -(-base // d)) + offset
        while d * m in out.values():
            m += 2 if d == 1 else 1
        out[v] = d * m
    return out


def _apply(sizes: dict[str, Size], mapping: dict[int, int]) -> dict[str, Size]:
    def one(v: int) -> int:
        return mapping.get(v, v)

    return {k: (one(v) if isinstance(v, int) else tuple(one(x) for x in v)) for k, v in sizes.items()}


def _largest(obs: Observation) -> int:
    return max(math.prod(t.shape) for t in obs.inputs)


def _draw_args(obs: Observation) -> set[int]:
    """Sizes that set how a forward input is drawn (randint's range)."""
    return {int(a) for t in obs.inputs if not t.key for a in t.init.args if isinstance(a, float) and a.is_integer()}


def small_cases(src: ProblemSource, perf: Observation, fits: Callable[[Observation], bool]) -> list[Observation]:
    """Up to len(BUDGETS) small cases the reference runs on, each under its budget where one fits."""
    values = _large(src.sizes)
    kept = _kept(src.sizes)
    fixed = {v for v in _draw_args(perf) if v in values}
    init_sizes = sorted({v for v in _ints(perf.init) if v in values} - fixed)
    helds = [set(fixed)] + [fixed | set(init_sizes[: k + 1]) for k in range(len(init_sizes))]
    in_init = set(_ints(perf.init))
    # (sizes held, the divisors each mapped size keeps): most shrunk and least even first; a held size
    # divides only the sizes Model gets too (channels in groups), never the batch
    tries = [(held, divisors) for held in helds for divisors in (
        {}, {v: kept for v in values}, {v: kept | (held if v in in_init else set()) for v in values})]
    wanted = [t.init for t in perf.inputs if not t.key]
    cases: list[Observation] = []
    for offset, budget in enumerate(BUDGETS):
        found = None
        for held, divisors in tries:
            found = _search(src, values, divisors, held, offset, budget, wanted, fits, [c.case for c in cases])
            if found is not None:
                break
        if found is not None and (not cases or _largest(found) <= budget):  # a second case only if small
            cases.append(found)
    return cases


def _search(src: ProblemSource, values: list[int], divisors: dict[int, set[int]], held: set[int], offset: int, budget: int,
            wanted: list, fits: Callable[[Observation], bool], taken: list[dict]) -> Observation | None:
    over: Observation | None = None  # the smallest case that fits but exceeds the budget
    for base in _BASES:
        try:
            obs = observe(src, _apply(src.sizes, _mapping(values, divisors, held, base, offset)))
        except ProblemFileError:  # the problem's own code refuses these sizes (channels not a multiple of groups)
            continue
        size = _largest(obs)
        if size > HARD_CAP or obs.case in taken or [t.init for t in obs.inputs if not t.key] != wanted:
            continue
        if not fits(obs):
            continue
        if size <= budget:
            return obs
        over = obs
    return over
