"""What the repair prompt says about a failed check, read from the judge's typed verdict (RunRecord):

- every test case x dtype x output, passing and failing, one compact line each; beyond a bound,
  one "N more" line that names what it stands for, so nothing is dropped silently;
- the exact text of every violation and of the error the candidate raised;
- for outputs the kernel never wrote: how many, the first and last unwritten index and the pattern
  they form (rows, blocks, tail), which makes a grid that misses the tail obvious.

All of it may carry text the candidate printed or raised: it goes through `scrub_candidate_text`.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.llm.untrusted import scrub_candidate_text
from kernelgen.verify.results import CaseCheck, RunRecord

MAX_FAILING = 12  # lines before "N more failing"
MAX_PASSING = 12
MAX_VIOLATIONS = 12
ERROR_LINES = 40


class FailureReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    status: str  # the child's: failed, error, crash, timeout
    summary: str  # "3 of 24 checks failed" or what ended the run
    violations: list[str] = Field(default_factory=list)  # "code: message", exact
    more_violations: int = 0
    error: str = ""  # the exception the candidate raised, or the crashed child's output
    failing: list[str] = Field(default_factory=list)
    more_failing: str = ""  # "5 more failing: case 3 float16, ..." ("" when none)
    passing: list[str] = Field(default_factory=list)
    more_passing: str = ""


def _shapes(check: CaseCheck) -> str:
    return " ".join(f"{k}{v}" for k, v in check.shapes.items())


def _unwritten(check: CaseCheck) -> str:
    """'1024 of 8192 never written: first [7, 0], last [7, 1023], pattern rows' (the judge's
    unwritten_* fields where it reports them)."""
    if not check.unwritten:
        return ""
    text = f"{check.unwritten} of {check.total} elements never written"
    first, last, pattern = check.unwritten_first, check.unwritten_last, check.unwritten_pattern
    if first is not None:
        text += f": first unwritten index {first}"
        if last is not None:
            text += f", last {last}"
    if pattern:
        text += f" (pattern: {pattern})"
    return text


Key = tuple[int, str, str, str]  # case, variant ("" for the spec's own case), dtype, output


def _group_line(key: Key, checks: list[CaseCheck]) -> tuple[bool, str]:
    case, variant, dtype, output = key
    first = checks[0]
    out = f", output `{output}`" if output else ""
    head = f"case {case}{' ' + variant if variant else ''} {_shapes(first)} {dtype}{out}"
    failed = [c for c in checks if not c.passed]
    seeds = len({c.seed for c in checks})
    how = "calls: " + ", ".join(sorted({c.call for c in checks}))
    if not failed:
        return True, f"{head}: {len(checks)} of {len(checks)} checks pass ({seeds} seed(s), {how})"
    worst = failed[0]
    parts = [f"{head}: {len(failed)} of {len(checks)} checks fail", f"first failure: {worst.message or 'mismatch'}"]
    unwritten = _unwritten(worst)
    if unwritten:
        parts.append(unwritten)
    return False, "; ".join(parts)


def _more(label: str, keys: list[Key]) -> str:
    if not keys:
        return ""
    named = ", ".join(f"case {c}{' ' + v if v else ''} {d}" + (f" `{o}`" if o else "") for c, v, d, o in keys[:20])
    return f"{len(keys)} more {label}: {named}" + (", ..." if len(keys) > 20 else "")


def failure_report(run: RunRecord) -> FailureReport:
    clean = scrub_candidate_text
    acc = run.accuracy
    violations = [f"{v.code}: {v.message}" for v in run.all_violations()]
    if run.status in ("timeout", "crash"):
        error = run.describe()
    elif acc is not None and acc.error:
        error = acc.error
    elif run.status == "error":
        error = run.stderr_tail
    else:
        error = ""
    error = "\n".join(error.strip().splitlines()[-ERROR_LINES:])
    groups: dict[Key, list[CaseCheck]] = defaultdict(list)
    for c in acc.checks if acc else []:
        groups[(c.case, c.variant, c.dtype, c.output)].append(c)
    failing: list[tuple[Key, str]] = []
    passing: list[tuple[Key, str]] = []
    for key in groups:  # the judge's order: case, then the spec's dtype order
        ok, line = _group_line(key, groups[key])
        (passing if ok else failing).append((key, line))
    if acc is not None and acc.checks:
        n_bad = sum(not c.passed for c in acc.checks)
        summary = f"{n_bad} of {len(acc.checks)} checks failed"
        if acc.interpreter:
            summary += " (on the CPU interpreter)"
    elif run.status in ("timeout", "crash"):
        summary = f"the check {'timed out' if run.status == 'timeout' else 'crashed'} before any comparison"
    else:
        summary = "no comparison ran" + (f" ({len(violations)} violation(s))" if violations else "")
    return FailureReport(
        status=run.status, summary=summary,
        violations=[clean(v) for v in violations[:MAX_VIOLATIONS]], more_violations=max(0, len(violations) - MAX_VIOLATIONS),
        error=clean(error),
        failing=[clean(line) for _, line in failing[:MAX_FAILING]],
        more_failing=_more("failing", [k for k, _ in failing[MAX_FAILING:]]),
        passing=[clean(line) for _, line in passing[:MAX_PASSING]],
        more_passing=_more("passing", [k for k, _ in passing[MAX_PASSING:]]),
    )
