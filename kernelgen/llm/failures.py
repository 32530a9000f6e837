"""What the repair prompt says about a failed check, read from the judge's typed verdict (RunRecord):

- every test case x dtype x output, passing and failing, one compact line each; beyond a bound,
  one "N more" line that names what it stands for, so nothing is dropped silently;
- the exact text of every violation and of the error the candidate raised;
- for outputs the kernel never wrote: how many, the first and last unwritten index and the pattern
  they form (rows, blocks, tail), which makes a grid that misses the tail obvious;
- where the wrong elements lie (`where_errors`): what the worst element of every failing check of a
  case has in common — an edge of one dim (a padding or a mask), one index (a row, a column), one
  residue (a stride), or none (a band, or everywhere) — and what share of the elements is wrong;
- an output that changes with the poison fill though every element was written is an
  **out-of-bounds read** (the judge files it as `unwritten-output`): named so, with what causes one.

All of it may carry text the candidate printed or raised: it goes through `scrub_candidate_text`.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.llm.untrusted import scrub_candidate_text
from kernelgen.spec import OperatorSpec
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
    where: str = ""  # where the wrong elements lie across every failing case (where_errors)


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
EDGE = 3  # indices this close to either end of a dim are at its edge (a padding, a window, a tail mask)


def violation_line(code: str, message: str) -> str:
    """A violation as the model reads it: the judge's code and exact message, an out-of-bounds read
    named as one (the judge's `unwritten-output` from two poison fills, where nothing was unwritten)."""
    if code == "unwritten-output" and "change with the poison fill" in message:
        return (f"out-of-bounds read: {message}. Every element was written, yet its value depends on memory the "
                "kernel never wrote: a load past the end of an input or a buffer (a missing or wrong mask, an "
                "offset computed from the wrong size or stride) or a read of an output before it is written "
                f"(the judge's code: {code})")
    return f"{code}: {message}"


def _along(d: int, points: list[tuple[int, int | None]], distinct: int) -> str:
    """What the worst indices along dim d have in common (each with its output's size there): the
    edges (a padding, a window, a tail mask), one index (a row, a column), one residue (a stride)."""
    sized = [(v, n) for v, n in points if n is not None and n > 2 * EDGE]
    if sized and len(sized) == len(points):
        low, high = [v < EDGE for v, _ in sized], [v >= n - EDGE for v, n in sized]
        if all(low) or all(high):
            return f"at the {'start' if all(low) else 'end'} of dim {d} (its {'first' if all(low) else 'last'} {EDGE} indices)"
        if all(a or b for a, b in zip(low, high)):
            return f"at the edges of dim {d} (its first or last {EDGE} indices)"
    values = sorted({v for v, _ in points})
    if distinct < 3:  # one index or one residue is a pattern only over several distinct worst elements
        return ""
    if len(values) == 1:
        return f"at index {values[0]} of dim {d} every time"
    for m in range(8, 1, -1):  # the widest stride they all keep
        if len({v % m for v in values}) == 1:
            return f"at indices {values[0] % m} mod {m} of dim {d} (a stride of {m})"
    return ""


def where_errors(worst: list[tuple[list[int], list[int] | None]]) -> str:
    """Where the wrong elements lie, from the worst element of each failing check (each case, seed and
    call finds its own) with its output's shape; "" when they share nothing."""
    points = [(w, s if s is not None and len(s) == len(w) else None) for w, s in worst if w]
    if len(points) < 1 or len({len(w) for w, _ in points}) != 1:
        return ""
    rank = len(points[0][0])
    distinct = list({(tuple(w), tuple(s) if s is not None else None): None for w, s in points})
    common = [found for d in range(rank)
              if (found := _along(d, [(w[d], s[d] if s is not None else None) for w, s in distinct], len(distinct)))]
    n = len({tuple(w) for w, _ in points})
    if not common:
        return f"the worst elements of the failing checks ({n} distinct) share no edge, index or stride" if n > 1 else ""
    return f"the worst element of {'every failing check' if n > 1 else 'the failing checks'} ({n} distinct) lies " + "; ".join(common)


def _share(failed: list[CaseCheck]) -> str:
    share = max((c.mismatches / c.total for c in failed if c.total), default=0.0)
    return "every element differs" if share >= 1 else f"{100 * share:.3g}% of the elements differ" if share else ""


def _group_line(key: Key, checks: list[CaseCheck], out_shape: list[int] | None = None) -> tuple[bool, str]:
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
    where = "; ".join(x for x in (_share(failed), where_errors([(c.worst_index or [], out_shape) for c in failed])) if x)
    if where:
        parts.append(f"where: {where}")
    return False, "; ".join(parts)


def _output_shapes(spec: OperatorSpec | None, checks: list[CaseCheck]) -> dict[str, list[list[int]]]:
    """Each case's output shapes (the reference on meta tensors), by the case's input shapes."""
    from kernelgen.spec.outshapes import meta_shapes

    found: dict[str, list[list[int]]] = {}
    for c in checks if spec is not None and spec.reference is not None else []:
        key = _shapes(c)
        if key not in found:
            try:
                found[key] = [shape for shape, _ in meta_shapes(spec, c.shapes)]
            except Exception:  # noqa: BLE001 - no meta kernel: the shapes stay unknown
                found[key] = []
    return found


def _more(label: str, keys: list[Key]) -> str:
    if not keys:
        return ""
    named = ", ".join(f"case {c}{' ' + v if v else ''} {d}" + (f" `{o}`" if o else "") for c, v, d, o in keys[:20])
    return f"{len(keys)} more {label}: {named}" + (", ..." if len(keys) > 20 else "")


def failure_report(run: RunRecord, spec: OperatorSpec | None = None) -> FailureReport:
    """The verdict as the repair prompt shows it; with the spec, where the errors lie in each output."""
    clean = scrub_candidate_text
    acc = run.accuracy
    violations = [violation_line(v.code, v.message) for v in run.all_violations()]
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
    outputs = _output_shapes(spec, [c for c in acc.checks if not c.passed] if acc else [])
    names = [o.name for o in spec.outputs] if spec is not None else []
    worst: list[tuple[list[int], list[int] | None]] = []
    for key in groups:  # the judge's order: case, then the spec's dtype order
        shapes = outputs.get(_shapes(groups[key][0]), [])
        k = names.index(key[3]) if key[3] in names else 0
        shape = shapes[k] if k < len(shapes) else None
        ok, line = _group_line(key, groups[key], shape)
        (passing if ok else failing).append((key, line))
        worst += [(c.worst_index, shape) for c in groups[key] if not c.passed and c.worst_index and c.decides]
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
        where=where_errors(worst) if len(failing) > 1 else "",
    )
