"""Small test cases from a problem's own code: its module-level sizes replaced by small ones, the code
run again, so every shape computed from them follows (`bias_shape = (out_channels, 1, 1)`).

- Sizes up to SMALL are structural (kernel sizes, strides, groups, a reduction's dim index, a few
  channels) and stay; larger ones are mapped by value, so equal sizes stay equal and different ones
  stay different (a transposed operand cannot hide behind M == N).
- Mapped sizes are odd first, so no size is a multiple of a kernel's tile; where the reference refuses
  them, each mapped size keeps the structural sizes that divide it.
- The names the module fixes (kernelgen.spec.kernelbench.fixed: a GroupNorm's groups and channels, a
  norm's shape, a class count) are held: they keep KernelBench's value in every case, even where a
  name that is not held has the same value. Where a held input alone is over the budget (a GroupNorm's
  8192x5 weight), the case is the smallest that fits: the interpreter's time grows with every input
  and output (a GEMM + GroupNorm took 53 s a call at x[181, 128] and its budget counting x alone).
- A case with a convolution is budgeted in work too (WORK_BUDGETS: its multiply-adds, and the largest
  tensor an op makes): channels reach get_init_inputs() and are held, batch-like sizes up to SMALL are
  kept, so a case small in elements can still be large in work. Level 1's 58 (ConvTranspose3d 32->16,
  3x5x7 taps) kept x[16, 32, 16, 3, 5]: 122,880 elements, 206 M multiply-adds a call, and its
  `kernelgen new` ran past 10 minutes on 2 cores. Over the work budget, the sizes the case was run at go
  down one name at a time (lighter_case: to 2, else 3, 5 or half; never 1, and no op may make a size-1
  dim the case did not have), where the case still fits and does less work.
- Each case is checked by the caller (the reference on meta tensors); a case over the budget is taken
  rather than none.
- Where that finds none, the other sizes shrink name by name (kept_dims_case); where even that is too
  large, derive.py builds the module again at shrunk sizes.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from kernelgen.errors import ProblemFileError
from kernelgen.spec.kernelbench.extents import CaseWork
from kernelgen.spec.kernelbench.lift import Observation, observe
from kernelgen.spec.kernelbench.source import ProblemSource, Size

SMALL = 16
# The largest input of each derived case, in elements: the interpreter checks a case x dtype x seed in
# about a second at 2e4 elements; the second case is smaller and shaped differently.
BUDGETS = (24_000, 4_000)
HARD_CAP = 2_000_000  # never a test case above this: the interpreter would take minutes
# ... except where the module itself fixes more elements than that (LayerNorm over 64x256x256: 4.2M in
# one row, which nd's kernel is specialised to): two batch rows of it, about 5 s a row a call under
# the interpreter (2 cores, 2026-11-24); beyond this, the module is built again at shrunk sizes instead.
# Never one row: a kernel traced at a size of 1 may treat the dim as a broadcast, and level 1's 40 was
# refused at KernelBench's own batch (`x.shape[0] is 16; the reference needs 1 there`).
KEPT_CAP = 9_000_000
# What a case may ask of the interpreter, per case as BUDGETS: its convolutions' multiply-adds, and the
# largest tensor an op makes. One call of round 0's kernel in the interpreter (2 cores, 2026-12-05): level
# 1's 58 (transposed 3-D) at 206 M multiply-adds took 74 s, at 11 M (batch 2) 7.5 s; its 72 (transposed
# 3-D, grouped) 39 M 34 s, 6.4 M 5.6 s; its 50 (forward 2-D) 203 M 5.3 s -- a transposed kernel loops over
# taps per stride phase on small tiles, so the count ranks cases within a problem and does not price them
# across forms. A pooling or norm stage runs a program per row of the convolution's output, ~10 ms each
# in the interpreter: level 2's 3 (ConvTranspose3d -> LayerNorm over 64 -> AvgPool) took 127 s a call at
# a 2.5M-element output, its 8 (Conv3d -> MaxPool -> global pool) 9.1 s at 14k (784 programs) and 2.7 s at
# 4k. `kernelgen new` runs each case 40-50 times: about 5 s a call is what 10 minutes on 2 cores allow.
WORK_BUDGETS = ((32_000_000, 8_192), (8_000_000, 2_048))
Work = Callable[["Observation"], CaseWork]


def load(work: CaseWork, budget: tuple[int, int]) -> float:
    """How far over its budget a case is (1.0: at it), by the larger of its two shares; 0 without a
    convolution (other problems' cases are priced by BUDGETS' elements alone, as before this budget)."""
    return max(work.macs / budget[0], work.largest / budget[1]) if work.macs else 0.0


_BASES = (181, 127, 91, 63, 45, 31, 23, 17, 13, 9, 7, 5, 3)


def ints(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        return [i for v in value for i in ints(v)]
    return []


def _large(sizes: dict[str, Size]) -> list[int]:
    return sorted({v for s in sizes.values() for v in ints(s) if v > SMALL})


def _kept(sizes: dict[str, Size]) -> set[int]:
    return {v for s in sizes.values() for v in ints(s) if 2 <= v <= SMALL}


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
        else:  # a multiple of its divisors: once may already be large (8192 channels in 512 groups -> 1024),
            # but never once: a group of one channel is a size-1 dim the trace specialises, and the
            # kernel then refuses the perf case (KernelBench's GroupNorm, 64 channels in 8 groups -> 8)
            m = max(2, -(-base // d)) + offset
        while d * m in out.values():
            m += 2 if d == 1 else 1
        out[v] = d * m
    return out


def _apply(sizes: dict[str, Size], mapping: dict[int, int], held: set[str] = frozenset()) -> dict[str, Size]:
    """Every size mapped by value, except the names in `held`, which keep theirs."""
    def one(v: int) -> int:
        return mapping.get(v, v)

    return {k: v if k in held else (one(v) if isinstance(v, int) else type(v)(one(x) for x in v)) for k, v in sizes.items()}


def free_values(sizes: dict[str, Size], held: set[str]) -> list[int]:
    """The large values of the names not held: what the cases map."""
    return _large({k: v for k, v in sizes.items() if k not in held})


def _biggest(obs: Observation) -> int:
    return max(math.prod(t.shape) for t in obs.inputs)


def _unchanged(obs: Observation, perf: Observation) -> int:
    """The largest input this case keeps at KernelBench's shape (a held weight), or 0."""
    return max((math.prod(t.shape) for t, p in zip(obs.inputs, perf.inputs) if t.shape == p.shape), default=0)


def total(obs: Observation) -> int:
    return sum(math.prod(t.shape) for t in obs.inputs)


def _draw_args(obs: Observation) -> set[int]:
    """Sizes that set how a forward input is drawn (randint's range)."""
    return {int(a) for t in obs.inputs if not t.key for a in t.init.args if isinstance(a, float) and a.is_integer()}


def small_cases(src: ProblemSource, perf: Observation, fits: Callable[[Observation], bool], held: set[str],
                work: Work | None = None) -> list[Observation]:
    """Up to len(BUDGETS) small cases the reference runs on, each under its budget where one fits; the
    names in `held` keep their size. `work`: what a case asks of the interpreter, kept under WORK_BUDGETS too."""
    values = free_values(src.sizes, held)
    kept = _kept(src.sizes)
    # the divisors each mapped size keeps: none first (odd sizes), then the structural ones
    tries = [{}, {v: kept for v in values}]
    wanted = [t.init for t in perf.inputs if not t.key]
    cases: list[Observation] = []
    for offset, (budget, work_budget) in enumerate(zip(BUDGETS, WORK_BUDGETS)):
        found = None
        for divisors in tries:
            found = search_case(src, perf, values, divisors, held, offset, budget, wanted, fits, [c.case for c in cases],
                                work=work, work_budget=work_budget)
            if found is not None:
                break
        if found is not None and work is not None and load(work(found), work_budget) > 1:
            found = lighter_case(src, found, held | set(_draw_names(src, perf)), wanted, fits, work, work_budget,
                                 [c.case for c in cases])
        # a second case only if small, in the inputs it shrinks (a held weight costs both alike)
        if found is not None and (not cases or _biggest(found) <= max(budget, _unchanged(found, perf))):
            cases.append(found)
    return cases


def search_case(src: ProblemSource, perf: Observation, values: list[int], divisors: dict[int, set[int]], held: set[str],
                offset: int, budget: int, wanted: list, fits: Callable[[Observation], bool], taken: list[dict], *,
                work: Work | None = None, work_budget: tuple[int, int] = (1, 1)) -> Observation | None:
    over: Observation | None = None  # the smallest case that fits but exceeds the budget
    for base in _BASES:
        mapping = _mapping(values, divisors, set(), base, offset)
        if any(to > v for v, to in mapping.items()):
            continue  # a shrunk case, never a larger one (a batch of 64 mapped to 181)
        try:
            obs = observe(src, _apply(src.sizes, mapping, held))
        except ProblemFileError:  # the problem's own code refuses these sizes (channels not a multiple of groups)
            continue
        size = _biggest(obs)
        if size > HARD_CAP or obs.case in taken or [t.init for t in obs.inputs if not t.key] != wanted:
            continue
        if not fits(obs):
            continue
        if size <= budget and (work is None or load(work(obs), work_budget) <= 1):
            return obs
        over = obs
    return over


def _draw_names(src: ProblemSource, perf: Observation) -> list[str]:
    """The names whose value sets how a forward input is drawn (randint's range): never shrunk alone."""
    fixed = _draw_args(perf)
    return [n for n, v in src.sizes.items() if set(ints(v)) & fixed]


def lighter_case(src: ProblemSource, obs: Observation, held: set[str], wanted: list, fits: Callable[[Observation], bool],
                 work: Work, work_budget: tuple[int, int], taken: list[dict]) -> Observation:
    """`obs` with less work: from the sizes it was run at, each name not held whose size is one
    number above 2 (the batch, a depth) set to 2 alone (else 3, 5 or half of it) -- never 1: a
    size-1 dim is a constant to the trace, and no op may make one where `obs` had more -- kept where
    the case still fits, draws its inputs as KernelBench does, and does less work; the largest first,
    until the case is within `work_budget`."""
    sizes = {**src.sizes, **obs.overrides}
    start = work(obs)
    best, cost = obs, load(start, work_budget)
    names = sorted((n for n, v in sizes.items() if isinstance(v, int) and not isinstance(v, bool) and v > 2 and n not in held),
                   key=lambda n: -sizes[n])
    for name in names:
        # 3 where 2 makes an earlier case again (a second case shaped as the first), 5 or half where a
        # kernel or a pooling window needs more (level 2's 6: a 3x3x3 convolution, then two poolings)
        for to in sorted({2, 3, 5, sizes[name] // 2}):
            if cost <= 1 or to >= sizes[name]:
                break
            try:
                tried = observe(src, {**best.overrides, name: to})
            except ProblemFileError:
                continue
            if tried.case in taken or [t.init for t in tried.inputs if not t.key] != wanted or not fits(tried):
                continue
            tried_work = work(tried)
            tried_cost = load(tried_work, work_budget)
            if tried_cost < cost and tried_work.keeps_sizes_of(start):
                best, cost = tried, tried_cost
                break
    return best


def kept_dims_case(src: ProblemSource, perf: Observation, fits: Callable[[Observation], bool], held: set[str]) -> Observation | None:
    """One case where the module built at KernelBench's sizes fixes some dims of its inputs (a LayerNorm's
    shape, a ConvTranspose3d's output width read by LayerNorm(64)): from KernelBench's sizes, each large
    size is shrunk by value (every name holding it), else name by name, and kept where the reference
    refuses it; while the case is above the first budget, batch-like sizes (small ones get_init_inputs()
    does not see) go down to 2, never 1. Those dims stay at KernelBench's size, the rest shrink; None above KEPT_CAP.
    Level 2's problem 3 (x 32x32x16x32x32, 16.8M elements): batch and height shrink, in_channels and
    width stay (5x32x16x7x32, 573k). Level 1's problem 40 (LayerNorm over 64x256x256): x 2x64x256x256."""
    overrides: dict[str, Size] = {}
    fixed = _draw_args(perf)
    wanted = [t.init for t in perf.inputs if not t.key]
    small = iter(range(5, 1 << 20, 2))  # odd and different per size: a transposed operand cannot hide

    def tried(extra: dict[str, Size]) -> Observation | None:
        try:
            obs = observe(src, {**overrides, **extra})
        except ProblemFileError:
            return None
        same_draws = [t.init for t in obs.inputs if not t.key] == wanted
        return obs if same_draws and fits(obs) else None

    found = perf
    for v in reversed(free_values(src.sizes, held)):
        if v in fixed:
            continue
        names = [n for n, s in src.sizes.items() if v in ints(s) and n not in overrides and n not in held]
        m = next(small)  # equal sizes stay equal where they can; else each name its own
        tries = [{n: m for n in names}] + ([{n: next(small)} for n in names] if len(names) > 1 else [])
        for values in tries:
            mapped = {n: _apply({n: src.sizes[n]}, {v: to})[n] for n, to in values.items()}
            obs = tried(mapped)
            if obs is not None:
                overrides.update(mapped)
                found = obs
                if len(values) == len(names):
                    break
    in_init = set(ints(perf.init))
    batch_like = [n for n, s in src.sizes.items() if isinstance(s, int) and 2 < s <= SMALL and s not in in_init | fixed
                  and n not in overrides and n not in held]
    for to, cap in ((2, BUDGETS[0]),):  # two rows where the case is over budget
        for name in batch_like:
            obs = tried({name: to}) if _biggest(found) > cap else None
            if obs is not None:
                overrides[name], found = to, obs
    return found if _biggest(found) <= KEPT_CAP and found is not perf else None


def fitting_cases(src: ProblemSource, perf: Observation, fits: Callable[[Observation], bool], held: set[str],
                  work: Work | None = None) -> list[Observation]:
    """small_cases; where none fits (each above HARD_CAP), the kept-dims case. Not also where small_cases'
    first is merely over its budget (a case over it is better than one shrunk name by name)."""
    cases = small_cases(src, perf, fits, held, work)
    if cases:
        return cases
    kept = kept_dims_case(src, perf, fits, held)
    if kept is not None and work is not None and load(work(kept), WORK_BUDGETS[0]) > 1:
        kept = lighter_case(src, kept, held | set(_draw_names(src, perf)), [t.init for t in perf.inputs if not t.key],
                            fits, work, WORK_BUDGETS[0], [])
    return [kept] if kept is not None else []

