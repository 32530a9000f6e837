"""Generation with repair: ask the LLM for a kernel, check it with the trusted harness, and on a
compile error, a wrong answer or a broken rule send it back with exactly what failed.

Two budgets, kept apart (as aider does):
- malformed replies (no code, conflicting files, syntax error, wrong entry function) are answered
  with the parse error and retried up to MALFORMED_BUDGET times in a row; they never reach the harness;
- candidates that reach the harness and fail get up to `repairs` repair prompts (default 3).

Every candidate is kept as `rounds/round_<k>/attempt_<n>_<name>_triton.py` (with several candidates
per round: `candidate_<c>_attempt_<n>_...`), every exchange under `llm/`, one line per reply in
`attempts` for the log, and what the model said in words in `notes`: round 0's design note and the
cause it stated before each repair. Everything the candidate printed or the model wrote passes
through `scrub_candidate_text` before it is kept or shown.

`kernelgen.llm.generate` (round 0) and `kernelgen.llm.proposer` (optimization rounds) call
`write_and_repair`; this is the one repair loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from kernelgen.errors import MalformedReplyError
from kernelgen.fsutil import atomic_write
from kernelgen.llm.client import Messages, Session
from kernelgen.llm.failures import violation_line
from kernelgen.llm.prompts import malformed_followup, repair_messages
from kernelgen.llm.replies import ParsedReply, parse_reply, short_reason
from kernelgen.llm.untrusted import scrub_candidate_text
from kernelgen.record.text import clip as clip_text
from kernelgen.record.usage import TokenUsage
from kernelgen.verify.judge.trusted import render_baseline
from kernelgen.verify.judge import integrity
from kernelgen.verify.results import RunRecord
from kernelgen.verify.judge.runner import run_accuracy

if TYPE_CHECKING:
    from kernelgen.devices import DeviceInfo
    from kernelgen.opdir import OperatorDir

MALFORMED_BUDGET = 3
Step = Callable[[str], None]


# --- one usable reply -----------------------------------------------------------------------------
@dataclass
class Asked:
    parsed: ParsedReply | None  # None: MALFORMED_BUDGET unusable replies in a row
    attempts: list[str]
    replies: int


def _tagged(tag: str, purpose: str) -> str:
    """The exchange's purpose, prefixed with the candidate it belongs to: `candidate-2-repair`."""
    return f"{tag}-{purpose}" if tag else purpose


def _attempt(tag: str, number: int) -> str:
    return f"{tag.replace('-', ' ')}, attempt {number}" if tag else f"attempt {number}"


def ask_for_kernel(session: Session, spec, messages: Messages, *, purpose: str, want_baseline: bool = False,  # noqa: ANN001
                   first_number: int = 1, budget: int = MALFORMED_BUDGET, on_step: Step = lambda s: None,
                   tag: str = "") -> Asked:
    """Send `messages`; while the reply is malformed, send the parse error back (up to `budget`
    replies in all). Numbering of attempt lines starts at `first_number`."""
    attempts: list[str] = []
    for i in range(budget):
        number = first_number + i
        on_step(f"{spec.name}: asking {session.model} ({_tagged(tag, purpose)}, reply {number})")
        reply = session.chat(messages, _tagged(tag, purpose))
        try:
            parsed = parse_reply(reply.text, spec, want_baseline=want_baseline, finish_reason=reply.finish_reason)
            return Asked(parsed, attempts, i + 1)
        except MalformedReplyError as e:
            attempts.append(f"{_attempt(tag, number)}: malformed reply ({short_reason(e)})")
            on_step(f"{spec.name}: {attempts[-1]}")
            messages = malformed_followup(messages, reply.text, e.message, budget - i - 1)
            purpose = "malformed"
    return Asked(None, attempts, budget)


# --- checking a candidate ---------------------------------------------------------------------------
def verdict(run: RunRecord) -> tuple[str, str]:
    """(short verdict, one line) for a harness run: 'wrong answer', '512 of 8192 elements differ ...'."""
    acc = run.accuracy
    if run.status == "timeout":
        return "timeout", run.describe()
    if run.status == "crash":
        tail = run.stderr_tail.strip().splitlines()
        return "crash", f"exit status {run.exit_code}" + (f": {tail[-1]}" if tail else "")
    violations = run.all_violations()
    syntax = next((v for v in violations if v.code == "syntax-error"), None)
    if syntax:
        return "compile error", syntax.message
    if acc is not None and not acc.compiled:
        return "compile error", (acc.error or "did not import").strip().splitlines()[-1]
    # Wrong numbers first: a wrong kernel may also trip follow-on rules (e.g. the stale-output
    # probe), but "the answer differs" is the story a reader and the model need.
    if acc is not None and acc.failed_checks:
        # From the check's own fields, not by splitting its message at a ": " (which may sit inside
        # its parentheses): how many failed, then the first one, named, then what it found.
        first = acc.failed_checks[0]
        output = f", output {first.output!r}" if first.output and f"output {first.output!r}" not in first.message else ""
        return "wrong answer", (f"{len(acc.failed_checks)} of {len(acc.checks)} checks failed; first: {first.label}"
                                f"{output}: {clip(first.message, 200)}")
    if violations:
        return "violation", "; ".join(violation_line(v.code, v.message) for v in violations[:2])
    if acc is not None and acc.error:
        last = acc.error.strip().splitlines()[-1]
        return ("compile error" if "CompilationError" in acc.error else "error"), last
    if run.passed:
        return "correct", ""
    return "failed", run.describe().splitlines()[0] if run.describe() else run.status


def _compiled(run: RunRecord) -> bool:
    acc = run.accuracy
    return acc is not None and acc.compiled and acc.error is None


def _rank(run: RunRecord) -> tuple:
    acc = run.accuracy
    passed_checks = sum(c.passed for c in acc.checks) if acc else 0
    return (run.passed, _compiled(run), not run.all_violations(), passed_checks)


@dataclass
class Candidate:
    number: int  # the reply it came from
    path: Path  # rounds/round_<k>/attempt_<n>_<name>_triton.py
    source: str
    run: RunRecord
    parsed: ParsedReply

    @property
    def correct(self) -> bool:
        return self.run.passed

    @property
    def compiled(self) -> bool:
        return _compiled(self.run)


@dataclass
class RepairOutcome:
    """What `write_and_repair` ends with. `best` is None only when no usable reply came."""

    best: Candidate | None
    candidates: list[Candidate] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)  # one line per reply, for RoundRecord.attempts
    notes: list[str] = field(default_factory=list)  # the model's words, for RoundRecord.model_notes
    tokens: TokenUsage = field(default_factory=TokenUsage)  # this call's share, for RoundRecord.tokens
    baseline_source: str | None = None  # the LLM's baseline, when it was asked for one

    @property
    def correct(self) -> bool:
        return self.best is not None and self.best.correct

    @property
    def compiled(self) -> bool:
        return any(c.compiled for c in self.candidates)


def write_and_repair(session: Session, op: OperatorDir, device: DeviceInfo, messages: Messages, *,
                     round_k: int = 0, repairs: int = 3, purpose: str = "generate", want_baseline: bool = False,
                     intent: str = "", on_step: Step = lambda s: None,
                     check: Callable[[Path], RunRecord] | None = None, tag: str = "",
                     first_number: int = 1, failed: int = 0) -> RepairOutcome:
    """Ask with `messages`, check each candidate with the harness, repair up to `repairs` times.

    Candidates are written under `op.round_dir(round_k)`. `check` replaces the accuracy run (the
    optimize loop may want a perf-shape spot check too); it must return a RunRecord. Stops at the
    first correct candidate. LLMError propagates (the endpoint is down: nothing to repair).
    `tag` ("candidate-2") names one of several candidates of a round in file names, exchange
    purposes and attempt lines. A run that continues an earlier one (kernelgen.llm.earlier) starts with
    a repair request (`purpose` "repair"), numbers its attempts from `first_number`, and `failed` is the
    earlier attempt that request is about.
    """
    spec = op.spec
    check = check or (lambda path: run_accuracy(op, device, kernel=path))
    start_usage = session.usage
    outcome = RepairOutcome(best=None)
    number, repairs_left = first_number, repairs
    phase = purpose  # failed: the attempt the current repair is about
    prefix = f"{tag.replace('-', '_')}_" if tag else ""
    while True:
        asked = ask_for_kernel(session, spec, messages, purpose=purpose, want_baseline=want_baseline and outcome.baseline_source is None,
                               first_number=number, on_step=on_step, tag=tag)
        outcome.attempts += asked.attempts
        number += asked.replies
        if asked.parsed is None:
            break  # the model could not produce a usable reply MALFORMED_BUDGET times in a row
        parsed, this = asked.parsed, number - 1
        if phase == "generate" and parsed.note:
            # A design note answers the request for one; prose that answers "your reply could not be
            # used" is the model's note on the format, and says so.
            what = "design note" if asked.replies == 1 else f"its note after {asked.replies - 1} unusable repl{'y' if asked.replies == 2 else 'ies'}"
            outcome.notes.append(f"{_attempt(tag, this)}, {what}: {parsed.note}")
        elif phase == "repair" and parsed.cause:
            outcome.notes.append(f"{_attempt(tag, this)}, the cause it stated for attempt {failed}'s failure: {parsed.cause}")
        if parsed.baseline_source is not None:
            outcome.baseline_source = parsed.baseline_source
            atomic_write(op.file("baseline"), render_baseline(spec, parsed.baseline_source, llm_written=True))
            integrity.record(op.path, op.name)  # the LLM's baseline is the reference from now on
        path = op.round_dir(round_k) / f"{prefix}attempt_{this}_{spec.name}_triton.py"
        atomic_write(path, parsed.source)
        on_step(f"{spec.name}: checking {_attempt(tag, this)} on {device.kind}")
        run = check(path)
        cand = Candidate(number=this, path=path, source=parsed.source, run=run, parsed=parsed)
        outcome.candidates.append(cand)
        kind, line = verdict(run)
        outcome.attempts.append(f"{_attempt(tag, this)}: {kind}" + (f": {clip(scrub_candidate_text(line))}" if line else ""))
        on_step(f"{spec.name}: {outcome.attempts[-1]}")
        if outcome.best is None or _rank(run) > _rank(outcome.best.run):
            outcome.best = cand
        if run.passed or repairs_left <= 0:
            break
        repairs_left -= 1
        messages = repair_messages(spec, parsed.source, run, verdict=kind, attempt=this,
                                   intent=intent or parsed.change, baseline=outcome.baseline_source)
        purpose, phase, failed = "repair", "repair", this
    outcome.tokens = session.usage.minus(start_usage)
    return outcome


def clip(text: str, n: int = 320) -> str:
    """One line for the attempts list and the console: cut at a word, brackets closed (record.text)."""
    return clip_text(text, n)
