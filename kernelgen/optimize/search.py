"""A round's search: every candidate of one hypothesis timed against the current best on every perf
case x dtype, in the judge's long-lived workers (compile once, time many), interleaved in rounds.

Per case each candidate gets a verdict: wrong (its output at that shape is not the baseline's),
neutral without timing (it launches exactly what the best launches), or win / loss / neutral from
the paired speedup against the noise of both timings. The search is shorter than the final
judgement (two rounds of 20 ms each): it only chooses what the planner composes; the composed
kernel is then checked in full and timed against the best again before anything is kept.

With several judges (one per GPU: the operator's own, then others of the host) the candidates are
shared out among them, and each judge times the best beside its share on its own GPU: a verdict
never compares timings taken on two different GPUs. The judges time at the same time, each on its
own GPU under that GPU's lock; the inputs and the baseline's outputs are drawn once per case, by
the first judge, and reach every GPU's workers through host memory.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from kernelgen.devices import make_current
from kernelgen.optimize.decide import case_verdict, noise_of
from kernelgen.record.state import CandidateRecord, CaseResult
from kernelgen.spec import Case
from kernelgen.verify.judge.judge import Judge, KernelSource
from kernelgen.verify.judge.performance import perf_inputs, resident_key, timed_cases
from kernelgen.verify.judge.timed import KernelOnCase, paired, time_case
from kernelgen.verify.timing import summarize

SEARCH_ROUNDS = 2
SEARCH_REP_MS = 20.0
Candidate = tuple[CandidateRecord, KernelSource]


def share_out(judges: Sequence[Judge], candidates: list[Candidate]) -> list[tuple[Judge, list[Candidate]]]:
    """Candidate i to judge i mod n (the first judge, the operator's own, gets the first); judges
    left without a candidate are not used."""
    shares = [(j, [c for i, c in enumerate(candidates) if i % len(judges) == n]) for n, j in enumerate(judges)]
    return [(j, share) for j, share in shares if share]


def search(judges: Judge | Sequence[Judge], best: KernelSource, candidates: list[Candidate], *,
           on_step: Callable[[str], None] = lambda s: None) -> None:
    """Fill each candidate's `cases` with its verdict per perf case x dtype; `judges[0]` is the
    operator's own judge, any others serve only searches."""
    judges = [judges] if isinstance(judges, Judge) else list(judges)
    home = judges[0]
    shares = share_out(judges, candidates)
    cases, dtypes = timed_cases(home)
    # One thread per GPU: a judge mostly waits on its workers, so threads time the GPUs in parallel.
    pool = ThreadPoolExecutor(max_workers=len(shares), thread_name_prefix="kernelgen-search") if len(shares) > 1 else None
    try:
        for ci, case in enumerate(cases):
            for dtype in dtypes:
                inputs, expected = perf_inputs(home, ci, case, dtype)
                calls = [(home, judge, [best, *[k for _, k in share]], inputs, expected, dtype,
                          resident_key(home, ci, dtype) if judge is home else None) for judge, share in shares]
                results = [f.result() for f in [pool.submit(_time_share, *c) for c in calls]] if pool is not None else \
                    [_time_share(*c) for c in calls]
                del inputs, expected, calls
                for (judge, share), timed in zip(shares, results):
                    for (rec, _), r in zip(share, timed[1:]):
                        rec.cases.append(_case_result(judge, ci, case, dtype, timed[0], r))
                on_step(f"searched {case and next(iter(case.values()))} {dtype}: " + ", ".join(
                    f"{rec.label} {res.verdict}" + (f" x{res.speedup:.3f}" if res.speedup else "")
                    + (f" on {res.device}" if pool is not None else "")
                    for rec, _ in candidates for res in rec.cases[-1:]))
    finally:
        if pool is not None:
            pool.shutdown(wait=True)  # a failed GPU's error is raised once the others' timings end
    # The other GPUs' judges serve searches only: their candidates' workers (a GPU context each) go,
    # the best's stays for the next round's search.
    for judge in judges[1:]:
        judge.retain({best.sha256})


def _time_share(home: Judge, judge: Judge, kernels: list[KernelSource], inputs: list[Any], expected: tuple,
                dtype: str, key: str | None) -> list[KernelOnCase]:
    make_current(home.device)  # CUDA's current device is per thread: read and compare on the operator's own
    # The last timed outputs are not read back here: the composed winner is checked and timed again in full.
    return time_case(judge, kernels, inputs, expected, dtype, rounds=SEARCH_ROUNDS, rep_ms=SEARCH_REP_MS, key=key,
                     check_last=False)


def _case_result(judge: Judge, ci: int, case: Case, dtype: str, base: KernelOnCase, r: KernelOnCase) -> CaseResult:
    res = CaseResult(case=ci, dtype=dtype, shapes=case, best_ms=summarize(base.reps).ms if base.timed else None,
                     ms=summarize(r.reps).ms if r.timed else None, device=judge.device.label)
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
    return res


def winners(candidates: list[CandidateRecord]) -> dict[tuple[int, str], int]:
    """(case, dtype) -> the index of the candidate that wins there by the most; cases nobody wins are absent."""
    out: dict[tuple[int, str], tuple[int, float]] = {}
    for i, rec in enumerate(candidates):
        for c in rec.cases:
            key = (c.case, c.dtype)
            if c.verdict == "win" and c.speedup and (key not in out or c.speedup > out[key][1]):
                out[key] = (i, c.speedup)
    return {k: i for k, (i, _) in out.items()}
