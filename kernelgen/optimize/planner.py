"""The offline optimization plan: change one knob of the offline generator at a time, starting from
the current best's knobs, in the order a person tuning a Triton kernel would take —

  1. grid shape (1-D vs 2-D programs), 2. block sizes, 3. warps and stages,
  4. memory access (alignment, vector width, cache/eviction hints), 5. per-shape selection / autotune.

The first pass takes one step per category (five rounds, the spec's default budget, touch all five);
later passes take the next untried value of each knob. A knob setting already tried in any earlier
round (kept, reverted or rejected) is never proposed again, and one that generates the same file as
the current best is skipped, so no round is spent on a no-op.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from kernelgen.errors import KernelGenError
from kernelgen.optimize.proposal import Proposal, RoundContext
from kernelgen.record.state import RoundRecord
from kernelgen.spec import OperatorSpec

CATEGORIES = ("grid shape", "block sizes", "warps and stages", "memory access", "per-shape selection / autotune")
_EXPECT = {
    "grid shape": "a grid whose rank matches the data (rows x columns) avoids a div/mod per element and keeps "
                  "a broadcast operand in registers; a 1-D grid helps when rows are short",
    "block sizes": "larger tiles put more loads in flight per program (latency hiding); smaller ones give more "
                   "programs on awkward shapes and fewer masked lanes",
    "warps and stages": "more warps per program raise memory parallelism for wide tiles; more stages pipeline "
                        "loads for looped kernels; fewer cut register pressure",
    "memory access": "streaming data used once with evict_first leaves L2 to the reused operand; aligned, vector-"
                     "wide accesses cut transactions",
    "per-shape selection / autotune": "different shapes want different tiles; autotune over a pruned config set "
                                      "picks per shape at the cost of a first-call search",
}


def knob_category(name: str) -> str:
    n = name.lower()
    if n in {"grid", "grid_rank", "grid_shape"}:
        return CATEGORIES[0]
    if n in {"num_warps", "num_stages", "num_ctas"}:
        return CATEGORIES[2]
    if any(t in n for t in ("evict", "cache", "vector", "vec", "align", "load")):
        return CATEGORIES[3]
    if any(t in n for t in ("autotune", "per_shape", "heuristic")):
        return CATEGORIES[4]
    return CATEGORIES[1]  # BLOCK_SIZE, ROW_TILE, LOOP_BLOCK, GROUP_SIZE_M, ...: tile geometry


def _key(knobs: dict[str, Any]) -> str:
    return json.dumps(knobs, sort_keys=True, default=str)


def _shown(value: Any) -> str:
    """A knob value for the log: None is the generated file's own shape heuristic."""
    return "heuristic" if value is None else repr(value)


def _as_dict(knobs: Any) -> dict[str, Any]:
    """The generator's typed knobs (a pydantic model) or a plain dict, as JSON-ready data."""
    return knobs.model_dump() if hasattr(knobs, "model_dump") else dict(knobs)


def _alternatives(values: list[Any], current: Any) -> list[Any]:
    """Neighbours first (one step up, one down, two up...): one variable, moved a little at a time."""
    if current not in values:
        return list(values)
    i = values.index(current)
    out = []
    for d in range(1, len(values)):
        for j in (i + d, i - d):
            if 0 <= j < len(values):
                out.append(values[j])
    return out


def candidate_steps(space: dict[str, list[Any]], base: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every one-knob change from `base`, in plan order: pass p takes the p-th alternative of each
    knob, categories in order, knobs of one category interleaved across passes."""
    by_cat: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    for name in space:
        by_cat[knob_category(name)].append(name)
    alts = {name: _alternatives(list(space[name]), base.get(name, space[name][0])) for name in space}
    steps: list[tuple[str, Any]] = []
    width = max((len(v) for v in alts.values()), default=0) * max((len(v) for v in by_cat.values()), default=0)
    for p in range(width):
        for cat in CATEGORIES:
            names = by_cat[cat]
            if not names:
                continue
            name = names[p % len(names)]
            depth = p // len(names)
            if depth < len(alts[name]):
                steps.append((name, alts[name][depth]))
    seen, ordered = set(), []
    for s in steps:
        k = (s[0], _key({"v": s[1]}))
        if k not in seen:
            seen.add(k)
            ordered.append(s)
    return ordered


@dataclass
class OfflinePlanner:
    """The Proposer the `offline` backend uses (see kernelgen.optimize.proposal)."""

    spec: OperatorSpec
    generate: Callable[..., Any] | None = None  # generate_kernel(spec, knobs); injectable for tests
    space_fn: Callable[[OperatorSpec], dict[str, list[Any]]] | None = None
    name: str = "offline"
    skipped: tuple[str, ...] = ()  # settings the generator refused in the last propose()

    def __post_init__(self) -> None:
        if self.generate is None or self.space_fn is None:
            try:
                from kernelgen.offline import generate_kernel, knob_space
            except ImportError as e:
                raise KernelGenError(f"the offline generator is not available in this installation ({e})",
                                     hint="use --backend openai with an LLM endpoint") from None
            self.generate = self.generate or generate_kernel
            self.space_fn = self.space_fn or knob_space

    def space(self) -> dict[str, list[Any]]:
        assert self.space_fn is not None
        return self.space_fn(self.spec)

    def knobs_of(self, record: RoundRecord) -> dict[str, Any]:
        """Full knob settings of a round: the space's defaults (its first values, what `kernelgen new`
        used) overridden by what the round recorded."""
        out = {k: v[0] for k, v in self.space().items()}
        # state.json written before knobs were typed holds "auto" where None is meant now
        out.update({k: None if v == "auto" else v for k, v in (record.knobs or {}).items()})
        return out

    def _tried(self, ctx: RoundContext) -> set[str]:
        return {_key(self.knobs_of(r)) for r in ctx.state.rounds if r.round == 0 or r.knobs is not None}

    def _steps(self, ctx: RoundContext) -> list[tuple[str, Any, dict[str, Any]]]:
        base = self.knobs_of(ctx.best)
        tried = self._tried(ctx)
        out = []
        for name, value in candidate_steps(self.space(), base):
            knobs = dict(base, **{name: value})
            if _key(knobs) not in tried:
                out.append((name, value, knobs))
        return out

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        base = self.knobs_of(ctx.best)
        assert self.generate is not None
        skipped: list[str] = []
        for name, value, knobs in self._steps(ctx):
            try:
                kern = self.generate(self.spec, knobs)
            except Exception as e:  # noqa: BLE001 - a value this family cannot take, or a generator bug:
                # either way this one setting is skipped (and said so), not the whole run
                skipped.append(f"{name}={value!r} ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})")
                continue
            if kern.source == ctx.best_source:
                continue  # the knob does not reach this operator's code: no round spent on it
            cat = knob_category(name)
            self.skipped = tuple(skipped)
            return [Proposal(
                source=kern.source, backend=self.name,
                change=f"{cat}: {name} {_shown(base.get(name))} -> {_shown(value)}",
                reason=f"offline plan, one variable at a time from round {ctx.best.round}: {_EXPECT[cat]}."
                       + (f" Skipped first (the generator refused them): {'; '.join(skipped)}." if skipped else ""),
                knobs=_as_dict(getattr(kern, "knobs", None) or knobs), knob=name, knob_from=base.get(name), knob_to=value,
            )]
        self.skipped = tuple(skipped)
        return []

    def next_directions(self, ctx: RoundContext) -> str:
        steps = self._steps(ctx)
        if self.skipped and len(self.skipped) >= len(steps):
            return (f"the generator refused every remaining one-knob change ({'; '.join(self.skipped[:3])}"
                    f"{' …' if len(self.skipped) > 3 else ''}); an LLM (--backend openai) can go further.")
        if not steps:
            return "the offline plan has no untried one-knob change left; an LLM (--backend openai) can go further."
        nxt = ", ".join(f"{n}={_shown(v)} ({knob_category(n)})" for n, v, _ in steps[:3])
        return f"next in the offline plan: {nxt}."
