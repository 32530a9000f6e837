"""Generation with repair: ask the LLM for a kernel, check it with the trusted harness, and on a
compile error, a wrong answer or a broken rule send it back with exactly what failed.

Two budgets, kept apart (as aider does):
- malformed replies (no code, conflicting files, syntax error, wrong entry function) are answered
  with the parse error and retried up to MALFORMED_BUDGET times in a row; they never reach the harness;
- candidates that reach the harness and fail get up to `repairs` repair prompts (default 3).

Every candidate is kept as `rounds/round_<k>/attempt_<n>_<name>_triton.py`, every exchange under
`llm/`, and one line per reply in `attempts` for the log.

`kernelgen.generate` calls `prepare` (before any work) and `generate`; the optimize loop calls
`connect`, `write_and_repair` (with `kernelgen.prompts.optimization_messages`) and reads tokens
from the outcome.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from kernelgen.config import LLMSettings, load_settings, require_endpoint
from kernelgen.errors import ConfigError, GenerationError, LLMError, MalformedReplyError
from kernelgen.fsutil import atomic_write, timestamp
from kernelgen.llm import Messages, OpenAIChat, ReplayChat, Session
from kernelgen.prompts import generation_messages, malformed_followup, repair_messages
from kernelgen.recording import LLM_DIR, load_recording
from kernelgen.replies import ParsedReply, parse_reply, short_reason
from kernelgen.results import RunRecord
from kernelgen.runner import run_accuracy
from kernelgen.state import TokenUsage

if TYPE_CHECKING:
    from kernelgen.devices import DeviceInfo
    from kernelgen.generate import Generated
    from kernelgen.opdir import OperatorDir

MALFORMED_BUDGET = 3
Step = Callable[[str], None]


@dataclass(frozen=True)
class LLMPlan:
    """A validated LLM configuration: what `prepare` returns and `connect` uses."""

    backend: str  # openai | replay
    settings: LLMSettings
    replay_dir: Path | None = None

    @property
    def repairs(self) -> int:
        return self.settings.repairs


def prepare(backend: str, options: dict[str, Any]) -> LLMPlan:
    """Validate the configuration before anything is written; ConfigError (exit 2) says what to set.
    options: model, base_url, temperature, max_tokens, timeout_s, max_retries, repairs (command-line
    values, highest precedence) and replay (the recorded folder, for --backend replay)."""
    if backend not in {"openai", "replay"}:
        raise ConfigError(f"backend {backend!r} does not use an LLM")
    settings = load_settings({k: v for k, v in options.items() if k != "replay"})
    if backend == "replay":
        folder = options.get("replay")
        if not folder:
            raise ConfigError("--backend replay needs --replay DIR: the llm/ folder of a recorded run",
                              hint="e.g. --replay generated/broadcast/llm")
        load_recording(Path(folder))  # a bad folder fails now, not after the files are written
        return LLMPlan(backend="replay", settings=settings, replay_dir=Path(folder))
    return LLMPlan(backend="openai", settings=require_endpoint(settings))


def connect(plan: LLMPlan, op_path: Path) -> Session:
    """A session that records into `<op_path>/llm/` (numbering on from what is there)."""
    backend = ReplayChat(plan.replay_dir) if plan.backend == "replay" and plan.replay_dir else OpenAIChat(plan.settings)
    return Session(backend, Path(op_path) / LLM_DIR)


# --- one usable reply -----------------------------------------------------------------------------
@dataclass
class Asked:
    parsed: ParsedReply | None  # None: MALFORMED_BUDGET unusable replies in a row
    attempts: list[str]
    replies: int


def ask_for_kernel(session: Session, spec, messages: Messages, *, purpose: str, want_baseline: bool = False,  # noqa: ANN001
                   first_number: int = 1, budget: int = MALFORMED_BUDGET, on_step: Step = lambda s: None) -> Asked:
    """Send `messages`; while the reply is malformed, send the parse error back (up to `budget`
    replies in all). Numbering of attempt lines starts at `first_number`."""
    attempts: list[str] = []
    for i in range(budget):
        number = first_number + i
        on_step(f"{spec.name}: asking {session.model} ({purpose}, reply {number})")
        reply = session.chat(messages, purpose)
        try:
            parsed = parse_reply(reply.text, spec, want_baseline=want_baseline, finish_reason=reply.finish_reason)
            return Asked(parsed, attempts, i + 1)
        except MalformedReplyError as e:
            attempts.append(f"attempt {number}: malformed reply ({short_reason(e)})")
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
        msg = acc.failed_checks[0].message
        # "case 0 ... (candidate-first), output 'out': 512 of 8192 elements differ ..." -> the numbers first
        head, _, tail = msg.partition(": ")
        n_bad = len(acc.failed_checks)
        return "wrong answer", f"{tail or head} [{head}; {n_bad} of {len(acc.checks)} checks failed]"
    if violations:
        return "violation", "; ".join(f"{v.code}: {v.message}" for v in violations[:2])
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
    tokens: TokenUsage = field(default_factory=TokenUsage)  # this call's share, for RoundRecord.tokens
    baseline_source: str | None = None  # the LLM's baseline, when it was asked for one

    @property
    def correct(self) -> bool:
        return self.best is not None and self.best.correct

    @property
    def compiled(self) -> bool:
        return any(c.compiled for c in self.candidates)


def _diff_usage(after: TokenUsage, before: TokenUsage) -> TokenUsage:
    return TokenUsage(calls=after.calls - before.calls, prompt_tokens=after.prompt_tokens - before.prompt_tokens,
                      completion_tokens=after.completion_tokens - before.completion_tokens)


def write_and_repair(session: Session, op: OperatorDir, device: DeviceInfo, messages: Messages, *,
                     round_k: int = 0, repairs: int = 3, purpose: str = "generate", want_baseline: bool = False,
                     intent: str = "", on_step: Step = lambda s: None,
                     check: Callable[[Path], RunRecord] | None = None) -> RepairOutcome:
    """Ask with `messages`, check each candidate with the harness, repair up to `repairs` times.

    Candidates are written under `op.round_dir(round_k)`. `check` replaces the accuracy run (the
    optimize loop may want a perf-shape spot check too); it must return a RunRecord. Stops at the
    first correct candidate. LLMError propagates (the endpoint is down: nothing to repair).
    """
    spec = op.spec
    check = check or (lambda path: run_accuracy(op, device, kernel=path))
    start_usage = session.usage
    outcome = RepairOutcome(best=None)
    number, repairs_left = 1, repairs
    while True:
        asked = ask_for_kernel(session, spec, messages, purpose=purpose, want_baseline=want_baseline and outcome.baseline_source is None,
                               first_number=number, on_step=on_step)
        outcome.attempts += asked.attempts
        number += asked.replies
        if asked.parsed is None:
            break  # the model could not produce a usable reply MALFORMED_BUDGET times in a row
        parsed, this = asked.parsed, number - 1
        if parsed.baseline_source is not None:
            from kernelgen.opdir import render_baseline

            outcome.baseline_source = parsed.baseline_source
            atomic_write(op.file("baseline"), render_baseline(spec, parsed.baseline_source, llm_written=True))
        path = op.round_dir(round_k) / f"attempt_{this}_{spec.name}_triton.py"
        atomic_write(path, parsed.source)
        on_step(f"{spec.name}: checking attempt {this} on {device.kind}")
        run = check(path)
        cand = Candidate(number=this, path=path, source=parsed.source, run=run, parsed=parsed)
        outcome.candidates.append(cand)
        kind, line = verdict(run)
        outcome.attempts.append(f"attempt {this}: {kind}" + (f": {_clip(line)}" if line else ""))
        on_step(f"{spec.name}: {outcome.attempts[-1]}")
        if outcome.best is None or _rank(run) > _rank(outcome.best.run):
            outcome.best = cand
        if run.passed or repairs_left <= 0:
            break
        repairs_left -= 1
        messages = repair_messages(spec, parsed.source, run.describe(), verdict=kind, attempt=this,
                                   intent=intent or parsed.change, baseline=outcome.baseline_source)
        purpose = "repair"
    outcome.tokens = _diff_usage(session.usage, start_usage)
    return outcome


def _clip(text: str, n: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


# --- kernelgen new ------------------------------------------------------------------------------
def _keep_recording(op: OperatorDir) -> Path | None:
    """`kernelgen new` deletes its staging folder on failure; the exchanges (tokens paid for) are
    kept beside the output as `<name>.failed-<time>-llm/`."""
    src = op.path / LLM_DIR
    if not src.is_dir():
        return None
    dest = op.path.parent / f"{op.name}.failed-{timestamp()}-llm"
    shutil.copytree(src, dest, dirs_exist_ok=True)
    return dest


def generate(llm: LLMPlan, op: OperatorDir, device: DeviceInfo, on_step: Step = lambda s: None) -> Generated:
    """The first kernel for `kernelgen new`: generated, checked, repaired; the best attempt returned.
    GenerationError only when no candidate even compiled."""
    from kernelgen.generate import Generated

    spec = op.spec
    session = connect(llm, op.path)
    want_baseline = spec.reference is None
    messages = generation_messages(spec, device, want_baseline=want_baseline)
    try:
        outcome = write_and_repair(session, op, device, messages, round_k=0, repairs=llm.repairs,
                                   want_baseline=want_baseline, on_step=on_step)
        if outcome.best is None or not outcome.compiled:
            story = "\n".join(f"  {a}" for a in outcome.attempts) or "  (no attempts)"
            raise GenerationError(f"{spec.name}: no candidate kernel compiled within the budgets "
                                  f"({MALFORMED_BUDGET} malformed replies in a row, {llm.repairs} repairs):\n{story}")
    except (GenerationError, LLMError) as e:
        kept = _keep_recording(op)
        if kept is not None:
            e.hint = ((e.hint + "; ") if e.hint else "") + f"the LLM exchanges are kept in {kept}"
        raise
    best = outcome.best
    source = "replayed from " + str(llm.replay_dir) if llm.backend == "replay" else f"written by {session.model} at {session.backend.endpoint}"
    n = len(outcome.attempts)
    note = f"{source}; {n} repl{'y' if n == 1 else 'ies'}, " + ("correct at attempt " + str(best.number) if best.correct
                                                                else f"no correct kernel within the budget: kept attempt {best.number}, the closest")
    if outcome.baseline_source is not None:
        note += "; the spec had no reference, so the LLM wrote the baseline too"
    if best.parsed.reason:
        note += f". The model's reasoning: {_clip(best.parsed.reason, 300)}"
    return Generated(source=best.source, backend=llm.backend, note=note, baseline_source=outcome.baseline_source,
                     tokens=outcome.tokens, attempts=outcome.attempts)
