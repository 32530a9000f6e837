"""Why a step of an operator's job did not end well, in the step's own words, for one cell of the
report: its `error:` lines, else the exception its traceback ended with, else its last line; an
INVALID final measurement with each case's reason; and an out-of-memory error as such, with what the
operator needs and what the GPU has, never as a verdict on the kernel."""

from __future__ import annotations

import re
from pathlib import Path

from kernelgen.batch.resume import FINAL_FILE
from kernelgen.batch.step import StepOutput
from kernelgen.record.text import clip
from kernelgen.verify.results import RunRecord

REASON_CHARS = 600  # a reason is one cell of the report: long enough for an exception and its note
_EXCEPTION_RE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*:|^[A-Za-z_][\w.]*(Error|Exception)$")
GiB = 1 << 30


def _last_words(tail: list[str]) -> str:
    """What a step that printed no `error:` said last: a traceback's exception line (and the notes under
    it), else its last line."""
    exc = max((i for i, line in enumerate(tail) if _EXCEPTION_RE.match(line)), default=None)
    if exc is not None:
        return " ".join(tail[exc:])
    return tail[-1] if tail else ""


def why(out: StepOutput, default: str) -> str:
    """The failing step's own reason, as it said it (its `error:` lines, else the end of what it printed),
    never a pointer to the log alone."""
    step, rc = out.record.step, out.record.exit_code
    if rc is None:
        return f"{step}: no result within the step timeout ({out.record.seconds:.0f} s)"
    text = " ".join(e.removeprefix("error:").strip() for e in out.errors[:4])
    if not text:
        said = _last_words(out.tail)
        text = f"{default}: `kernelgen {step}` exit {rc}" + (f": {said}" if said else " without a word")
    return clip(text, REASON_CHARS)


def bench_reason(op_dir: Path, out: StepOutput | None) -> str:
    """Why the final measurement did not pass, from its own record: each INVALID case with its reason."""
    try:
        perf = RunRecord.model_validate_json((op_dir / FINAL_FILE).read_text(encoding="utf-8")).performance
    except (OSError, ValueError):
        perf = None
    fallback = "the final measurement did not pass"
    if perf is None:
        return why(out, fallback) if out is not None else fallback
    parts = [f"{' '.join(f'{k}{v}' for k, v in c.shapes.items())} {c.dtype}: INVALID: {c.invalid_reason or 'no reason recorded'}"
             for c in perf.cases if not c.valid]
    parts += [f"violation {v.code}: {v.message}" for v in perf.violations]
    if perf.error:
        parts.append(perf.error.strip().splitlines()[-1])
    if parts:
        return clip(f"{fallback}: " + "; ".join(parts), REASON_CHARS)
    return why(out, fallback) if out is not None else fallback


def out_of_memory(step: str, line: str) -> str:
    """An out-of-memory error as the reason of a `memory` row (the engine adds what the GPU has)."""
    return clip(f"out of GPU memory in `kernelgen {step}`: {line.lstrip('•').strip()}", REASON_CHARS)


def memory_reason(first: str, need: int | None, room: tuple[int, int] | None, where: str) -> str:
    """The reason of an operator that ran out of memory also alone on an idle GPU."""
    needs = f"needs about {need / GiB:.1f} GiB" if need else "needs more memory than it found"
    has = f"this GPU ({where}) has {room[1] / GiB:.1f} GiB, {room[0] / GiB:.1f} GiB free now" if room else f"on {where}"
    return clip(f"{needs}, {has}: out of memory also alone on an idle GPU; {first}", REASON_CHARS)
