"""The offline planner: each round, one hypothesis from the diagnosis (kernelgen.optimize.hypothesis),
tested as a small search over that knob's untried values (kernelgen.optimize.search), then composed
from what won per case:
- one value wins every perf case it wins and loses none: the knob changes for every shape;
- different values win different cases (fp32 wants one tile, bf16 another): the winners go into the
  kernel's dispatch table, one entry per perf case x dtype with its measured reason, and every other
  shape goes to the nearest entry (the offline generator writes the table into the file).
A setting already tried in an earlier round is not proposed again; one that generates the best's own
file is skipped, so no round is spent on a no-op.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from kernelgen.errors import KernelGenError
from kernelgen.memory import MemoryEntry, advise
from kernelgen.optimize.hypothesis import CaseView, hypotheses, remembered, views
from kernelgen.optimize.proposal import Proposal, RoundContext
from kernelgen.record.oplog import stated_direction
from kernelgen.record.state import CandidateRecord, DispatchRecord, Hypothesis, RoundRecord
from kernelgen.spec import OperatorSpec


def _key(knobs: dict[str, Any]) -> str:
    return json.dumps(knobs, sort_keys=True, default=str)


def _shown(value: Any) -> str:
    """A knob value for the log: None is the generated file's own shape heuristic."""
    return "heuristic" if value is None else repr(value)


def _agrees(h: Hypothesis, base: Any, value: Any) -> bool:
    """Whether moving the knob from `base` to `value` is the change the hypothesis states: a "larger
    BLOCK_SIZE" is not tried with a smaller one (a round once said that and applied 512 after 4096).
    A value not comparable with the base (the heuristic, a variant's name) is left to the idea's words."""
    said = stated_direction(h.idea)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (base, value))
    return not (said and numbers) or (value > base) == (said > 0)


def _applied(h: Hypothesis, base: Any, value: Any) -> Hypothesis:
    """The hypothesis as one proposal applies it: its idea begins with the change itself."""
    return h.model_copy(update={"idea": f"{h.knob} {_shown(base)} -> {_shown(value)}: {h.idea}"})


def _as_dict(knobs: Any) -> dict[str, Any]:
    """The generator's typed knobs (a pydantic model) or a plain dict, as JSON-ready data."""
    return knobs.model_dump() if hasattr(knobs, "model_dump") else dict(knobs)


@dataclass
class OfflinePlanner:
    """The Proposer the `offline` backend uses (see kernelgen.optimize.proposal)."""

    spec: OperatorSpec
    sm_count: int | None = None  # the device's, for the few-rows rule; None on the interpreter
    generate: Callable[..., Any] | None = None  # generate_kernel(spec, knobs, dispatch=...); injectable for tests
    space_fn: Callable[[OperatorSpec], dict[str, list[Any]]] | None = None
    # prune(spec, knob, values, base, shapes, dtype, sm_count) -> [Pruned(value, kept, reason)]: the
    # rules that drop a value before it is timed (None: every value is timed)
    prune_fn: Callable[..., list[Any]] | None = None
    # the tuning memory's entries about this device and family (kernelgen.optimize.remember.recalled):
    # their wins on alike cases are the first hypotheses, each re-timed by the round's search
    remembered: list[MemoryEntry] = field(default_factory=list)
    family: str = ""  # the spec's family, as the memory files it
    device_name: str = ""
    name: str = "offline"
    skipped: list[str] = field(default_factory=list)  # settings the generator refused in the last propose()
    pruned: list[CandidateRecord] = field(default_factory=list)  # values the last propose() dropped untimed
    hypothesis: Hypothesis | None = None  # the last propose()'s, before each proposal's own change was written into it

    def __post_init__(self) -> None:
        if self.generate is None or self.space_fn is None:
            try:
                from kernelgen.offline import generate_kernel, knob_space, prune
            except ImportError as e:
                raise KernelGenError(f"the offline generator is not available in this installation ({e})",
                                     hint="use --backend openai with an LLM endpoint") from None
            if self.generate is None and self.prune_fn is None:
                self.prune_fn = prune
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

    def _tried(self, ctx: RoundContext) -> set[tuple[str, str]]:
        """(knob, value) pairs any earlier round proposed, kept or not, and the values kept rounds
        replaced (log_softmax on an H100 spent its round 2 proposing `algorithm` back to the
        heuristic that round 1 had just beaten by x1.69)."""
        tried = set()
        for r in ctx.state.rounds:
            if r.knob:
                tried.add((r.knob, _key({"v": r.knob_to})))
                if r.kept:  # the value it moved away from was measured against it and lost
                    tried.add((r.knob, _key({"v": r.knob_from})))
            for c in r.candidates:
                for k, v in (c.knobs or {}).items():
                    if r.hypothesis is not None and k == r.hypothesis.knob:
                        tried.add((k, _key({"v": v})))
        return tried

    def _generate(self, knobs: dict[str, Any], dispatch: list[DispatchRecord]) -> Any:
        assert self.generate is not None
        if dispatch:
            return self.generate(self.spec, knobs, dispatch=[d.model_dump() for d in dispatch])
        return self.generate(self.spec, knobs)

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        base = self.knobs_of(ctx.best)
        space = self.space()
        perf = ctx.best.performance.performance if ctx.best.performance else None
        family = getattr(self._generate(base, ctx.best.dispatch), "family", "")
        tried = self._tried(ctx)
        self.skipped = []
        cases = views(self.spec, perf)
        planned = self._recalled(cases, space, base)
        planned += [(h, space[h.knob]) for h in hypotheses(self.spec, family, space, cases, self.sm_count, ctx.best_source)]
        for h, candidates in planned:
            out, pruned = [], []
            values = [v for v in candidates if v != base.get(h.knob) and (h.knob, _key({"v": v})) not in tried
                      and _agrees(h, base.get(h.knob), v)]
            for value, why in self._prune(h.knob, values, base):
                knobs = dict(base, **{h.knob: value})
                if why:
                    pruned.append(CandidateRecord(label=f"{h.knob}={value!r}"[:120], knobs=knobs, pruned=why))
                    continue
                try:
                    kern = self._generate(knobs, ctx.best.dispatch)
                except Exception as e:  # noqa: BLE001 - a value this family cannot take: skipped, and said so
                    self.skipped.append(f"{h.knob}={_shown(value)} ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})")
                    continue
                if kern.source == ctx.best_source:
                    continue  # the value does not reach this operator's code: nothing to time
                applied = _applied(h, base.get(h.knob), value)
                out.append(Proposal(
                    source=kern.source, backend=self.name, change=f"{h.knob} {_shown(base.get(h.knob))} -> {_shown(value)}",
                    reason=f"{h.problem}. Idea: {applied.idea}. Expected: {h.expected}.", knobs=_as_dict(getattr(kern, "knobs", None) or knobs),
                    knob=h.knob, knob_from=base.get(h.knob), knob_to=value, hypothesis=applied, dispatch=list(ctx.best.dispatch)))
            if out:
                self.pruned, self.hypothesis = pruned, h
                return out
        self.pruned = []
        return []

    def _recalled(self, cases: list[CaseView], space: dict[str, list[Any]], base: dict[str, Any]) -> list[tuple[Any, list[Any]]]:
        """The memory's hypotheses for these cases, with the values it remembers winning."""
        if not self.remembered:
            return []
        found = [(view, a) for view in cases  # the memory compares cases as [rows, cols], as the views read them
                 for a in advise(self.remembered, device=self.device_name, family=self.family, dtype=view.dtype,
                                 shapes={"case": [view.rows, view.cols]})]
        return list(remembered(found, space, base))

    def _prune(self, knob: str, values: list[Any], base: dict[str, Any]) -> list[tuple[Any, str]]:
        """(value, "") when it is worth timing at some perf case x dtype, else why not at any (the
        reasons of every case, joined when they differ). A value the rules cannot judge is timed."""
        reasons: dict[int, dict[str, list[str]]] = {i: {} for i in range(len(values))}  # reason -> cases
        timed: set[int] = set()
        if self.prune_fn is not None and values:
            for case in self.spec.effective_perf_cases:
                for dtype in self.spec.effective_perf_dtypes:
                    try:
                        verdicts = self.prune_fn(self.spec, knob, values, base, case, dtype, self.sm_count)
                    except Exception as e:  # noqa: BLE001 - the rules only advise: a value they cannot judge is timed
                        self.skipped.append(f"pruning {knob} ({type(e).__name__}: {str(e)[:120]})")
                        timed.update(range(len(values)))
                        continue
                    label = f"{'x'.join(map(str, next(iter(case.values()), [])))} {dtype}"
                    for i, v in enumerate(verdicts):
                        if v.kept:
                            timed.add(i)
                        else:
                            reasons[i].setdefault(v.reason, []).append(label)
        else:
            timed.update(range(len(values)))
        why = {i: "; ".join(f"{', '.join(cases)}: {reason}" for reason, cases in r.items()) for i, r in reasons.items()}
        return [(v, "" if i in timed else why[i] or "pruned") for i, v in enumerate(values)]

    def compose(self, ctx: RoundContext, proposals: list[Proposal], records: list[CandidateRecord],
                won: dict[tuple[int, str], int]) -> Proposal | None:
        """One kernel from what won where: a plain knob change, or dispatch entries per case."""
        if not won:
            return None
        knob = proposals[0].knob
        lost = {i for i, rec in enumerate(records) if any(c.verdict in ("loss", "wrong") for c in rec.cases)}
        choices = set(won.values())
        if len(choices) == 1 and not (choices & lost):  # one value, better wherever it differs: for every shape
            only = proposals[next(iter(choices))]
            return replace(only, change=f"{only.change} (faster on {len(won)} case(s), slower on none)")
        base = self.knobs_of(ctx.best)
        results = {(c.case, c.dtype): (i, c) for i, rec in enumerate(records) for c in rec.cases}
        entries = list(ctx.best.dispatch)
        for (ci, dtype), (i, res) in sorted(results.items()):
            if dtype not in {dt for (_, dt) in won}:
                continue  # a dtype nothing won in keeps its setting, with or without entries
            old = next((d for d in entries if d.dtype == dtype and d.shapes == res.shapes), None)
            if (ci, dtype) in won:
                i = won[(ci, dtype)]
                res = next(c for c in records[i].cases if c.case == ci and c.dtype == dtype)
                knobs = dict(old.knobs if old else {}, **{knob: proposals[i].knob_to})
                reason = (f"{knob}={_shown(proposals[i].knob_to)}: x{res.speedup:.3f} over round {ctx.best.round} "
                          f"({res.ms:.4f} vs {res.best_ms:.4f} ms, noise +-{100 * res.noise:.1f}%)")
            elif old is None:  # measured, nothing better here: pinned, so the nearest-entry rule does not send it elsewhere
                knobs, reason = {}, f"round {ctx.best.round}'s setting: no value of {knob} was faster here"
            else:
                continue
            entries = [d for d in entries if not (d.dtype == dtype and d.shapes == res.shapes)]
            entries.append(DispatchRecord(dtype=dtype, shapes=res.shapes, knobs=knobs, reason=reason))
        try:
            kern = self._generate(base, entries)
        except Exception as e:  # noqa: BLE001 - a generator without dispatch tables: nothing composed, and said so
            self.skipped.append(f"a dispatch table ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})")
            return None
        shown = ", ".join(f"{d.dtype} {'x'.join(map(str, next(iter(d.shapes.values()))))}" for d in entries if d.knobs)
        first = proposals[0]
        plain = self.hypothesis or first.hypothesis
        table = ", ".join(f"{d.dtype} {'x'.join(map(str, next(iter(d.shapes.values()))))}: {_shown(d.knobs.get(knob))}"
                          for d in entries if knob in d.knobs)
        applied = plain.model_copy(update={"idea": f"{knob} per shape ({table}): {plain.idea}"}) if plain else None
        return Proposal(source=kern.source, backend=self.name, change=f"{knob} per shape: a dispatch table ({shown})",
                        reason=f"{plain.problem}. Idea: {applied.idea}. Expected: {plain.expected}." if plain and applied else first.reason,
                        knobs=_as_dict(getattr(kern, "knobs", None) or base), knob=knob,
                        knob_from=base.get(knob), knob_to=None, hypothesis=applied, dispatch=entries)

    def next_directions(self, ctx: RoundContext) -> str:
        if self.skipped:
            return f"the generator refused {'; '.join(self.skipped[:3])}; the next round takes the next hypothesis."
        return "the next round takes the next hypothesis the diagnosis supports (or more values of this one)."
