"""What a round taught, in the words a kernel engineer would write in a review: what worked or failed,
on which cases and by how much, and why — from the round's own numbers."""

from __future__ import annotations

from kernelgen.record.state import CaseResult, KeepDecision, RoundRecord


def _case(c: CaseResult) -> str:
    if c.speedup is None:
        return f"{c.label} ({c.note or c.verdict})"
    return f"{c.label} x{c.speedup:.3f} (noise +-{100 * c.noise:.1f}%)"


def _search_summary(record: RoundRecord) -> str:
    parts = []
    for cand in record.candidates:
        if cand.pruned:
            parts.append(f"{cand.label}: pruned ({cand.pruned})")
            continue
        verdicts = [c.verdict for c in cand.cases]
        if verdicts:
            counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("win", "neutral", "loss", "wrong", "unjudged") if verdicts.count(v))
            parts.append(f"{cand.label}: {counts}")
    return "; ".join(parts)


def lessons(record: RoundRecord, decision: KeepDecision, base_round: int) -> list[str]:
    out: list[str] = []
    change = f"`{record.change}`" if record.change else "this round's candidates"
    if record.accuracy is not None and not record.accuracy.passed:
        why = record.accuracy.describe().strip().splitlines()[0][:300] if record.accuracy.describe() else "not checked"
        out.append(f"Failed: {change} gave a kernel the judge rejected ({why}); not safe as written.")
    elif not record.judged:
        out.append(f"Unjudged: {change} is correct on the CPU interpreter; whether it is faster can only be measured on a "
                   f"GPU, so the shipped kernel stays as it was, and the next round builds on this one (started from round "
                   f"{base_round}).")
    elif decision.keep:
        wins = [c for c in record.cases if c.verdict == "win"]
        out.append(f"Worked: {change} is faster on {', '.join(_case(c) for c in wins)}, and slower on no case; "
                   "later rounds build on it.")
    else:
        losses = [c for c in record.cases if c.verdict in ("loss", "wrong")]
        wins = [c for c in record.cases if c.verdict == "win"]
        if losses:
            out.append(f"Did not help: {change} was slower on {', '.join(_case(c) for c in losses)}"
                       + (f", though faster on {', '.join(_case(c) for c in wins)}" if wins else "")
                       + f"; round {base_round} stays the best.")
        else:
            out.append(f"Did not help: {decision.reason}; round {base_round} stays the best.")
    searched = _search_summary(record)
    if searched:
        out.append(f"The search: {searched}.")
    if record.dispatch and decision.keep:
        out.append(f"The kernel now carries a dispatch table of {len(record.dispatch)} entr"
                   f"{'y' if len(record.dispatch) == 1 else 'ies'}: each perf case gets the setting that won there.")
    return out
