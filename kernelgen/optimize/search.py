"""A round's search: every candidate of one hypothesis timed against the current best on every perf
case x dtype, in the judge's long-lived workers (compile once, time many), interleaved in rounds.

Per case each candidate gets a verdict: wrong (its output at that shape is not the baseline's),
neutral without timing (it launches exactly what the best launches), or win / loss / neutral from
the paired speedup against the noise of both timings. The search is shorter than the final
judgement (two rounds of 20 ms each): it only chooses what the planner composes; the composed
kernel is then checked in full and timed against the best again before anything is kept.
"""

from __future__ import annotations

from typing import Callable

from kernelgen.optimize.decide import case_verdict, noise_of
from kernelgen.record.state import CandidateRecord, CaseResult
from kernelgen.verify.judge import Judge, KernelSource
from kernelgen.verify.performance import perf_inputs, timed_cases
from kernelgen.verify.timed import paired, time_case
from kernelgen.verify.timing import summarize

SEARCH_ROUNDS = 2
SEARCH_REP_MS = 20.0


def search(judge: Judge, best: KernelSource, candidates: list[tuple[CandidateRecord, KernelSource]], *,
           on_step: Callable[[str], None] = lambda s: None) -> None:
    """Fill each candidate's `cases` with its verdict per perf case x dtype."""
    cases, dtypes = timed_cases(judge)
    for ci, case in enumerate(cases):
        for dtype in dtypes:
            inputs, expected = perf_inputs(judge, ci, case, dtype)
            results = time_case(judge, [best] + [k for _, k in candidates], inputs, expected, dtype,
                                rounds=SEARCH_ROUNDS, rep_ms=SEARCH_REP_MS)
            del inputs, expected
            base = results[0]
            for (rec, _), r in zip(candidates, results[1:]):
                res = CaseResult(case=ci, dtype=dtype, shapes=case, best_ms=summarize(base.reps).ms if base.timed else None,
                                 ms=summarize(r.reps).ms if r.timed else None)
                problems = [m for code, m in r.violations if code != "thread-started"]
                if r.wrong or problems:
                    res.verdict, res.note = "wrong", (r.wrong or problems[0])[:300]
                elif r.configs and r.configs == base.configs:
                    res.verdict, res.note = "neutral", "launches exactly what the best launches: the same machine code"
                elif judge.device.interpreter:
                    res.note = "CPU interpreter: not a measurement"
                else:
                    res.speedup, pair_noise = paired(base, r)
                    res.noise = noise_of(summarize(base.reps).spread if base.timed else None,
                                         summarize(r.reps).spread if r.timed else None, pair_noise)
                    res.verdict = case_verdict(res.speedup, res.noise)
                rec.cases.append(res)
            on_step(f"searched {case and next(iter(case.values()))} {dtype}: " + ", ".join(
                f"{rec.label} {res.verdict}" + (f" x{res.speedup:.3f}" if res.speedup else "")
                for rec, _ in candidates for res in rec.cases[-1:]))


def winners(candidates: list[CandidateRecord]) -> dict[tuple[int, str], int]:
    """(case, dtype) -> the index of the candidate that wins there by the most; cases nobody wins are absent."""
    out: dict[tuple[int, str], tuple[int, float]] = {}
    for i, rec in enumerate(candidates):
        for c in rec.cases:
            key = (c.case, c.dtype)
            if c.verdict == "win" and c.speedup and (key not in out or c.speedup > out[key][1]):
                out[key] = (i, c.speedup)
    return {k: i for k, (i, _) in out.items()}
