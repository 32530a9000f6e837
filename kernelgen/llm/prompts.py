"""The messages KernelGen sends an LLM, rendered from `templates/prompts/` (StrictUndefined: a
variable nobody passed is an error, not a hole in a prompt). No prompt text lives in Python.

Every function returns OpenAI chat messages (`[{"role": ..., "content": ...}]`) and starts with
the same system message: the role, the rules the harness enforces, and the file contract. Every
user message carries the spec section (inputs' dtypes, shape relations, output rules: llm/specfacts)
and the advice for the operator's kind (llm/kinds); generation and optimization add the device
section (llm/devicefacts); optimization adds the measurements, the diagnosis and the history
(llm/history); repair adds the judge's verdict case by case (llm/failures).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelgen.llm.devicefacts import cost_lines, precision_facts, prompt_device
from kernelgen.llm.failures import failure_report
from kernelgen.llm.kinds import describe_layers, model_parts, operator_kind
from kernelgen.llm.specfacts import fixed_lines, spec_facts
from kernelgen.llm.untrusted import scrub_candidate_text
from kernelgen.render import render
from kernelgen.verify.judge.staticcheck import ALLOWED_IMPORTS

if TYPE_CHECKING:
    from kernelgen.devices import DeviceInfo
    from kernelgen.memory import MemoryEntry
    from kernelgen.llm.history import HistoryEntry
    from kernelgen.record.state import Diagnosis
    from kernelgen.spec import OperatorSpec
    from kernelgen.verify.results import DevicePeaks, PerformanceResult, RunRecord

Messages = list[dict[str, str]]
MAX_OPS_SHOWN = 12  # the operators a reference calls, as the prompt names them: what it is, not a trace


def system_prompt(spec: OperatorSpec) -> str:
    return render("prompts/system.md.j2", spec=spec, allowed_imports=sorted(ALLOWED_IMPORTS - {"__future__"}))


def _spec_context(spec: OperatorSpec, peaks: DevicePeaks | None = None) -> dict[str, Any]:
    from kernelgen.spec.hyperparams import module_constants
    from kernelgen.spec.kernelbench.readback import read_back
    from kernelgen.spec.symbolic import trace_reference

    trace = trace_reference(spec)
    calls = trace.calls if trace is not None else []
    kind = operator_kind(spec)
    parts = model_parts(calls) if kind == "model" else []
    dots = {"convolution", "matmul", "attention"} & {kind, *parts}
    return {"spec": spec, "facts": spec_facts(spec), "kind": kind, "problem": read_back(spec),
            "calls": trace.ops[:MAX_OPS_SHOWN] if trace is not None else [], "fixed": fixed_lines(spec),
            "constants": [c.describe() for c in module_constants(spec)], "parts": parts,
            "layers": describe_layers(calls) if kind == "model" else "",
            "precision": precision_facts(peaks) if dots and "float32" in spec.dtypes else None}


def _with_system(spec: OperatorSpec, user: str) -> Messages:
    # The parts built from the record are scrubbed where they are read (llm/history, llm/failures);
    # the whole message is scrubbed once more here, so no path (a diagnosis line quoting a
    # candidate's error, a note of the judge's) reaches the endpoint unscrubbed.
    return [{"role": "system", "content": system_prompt(spec)}, {"role": "user", "content": scrub_candidate_text(user)}]


def generation_messages(spec: OperatorSpec, device: DeviceInfo | None = None, *, peaks: DevicePeaks | None = None,
                        want_baseline: bool | None = None) -> Messages:
    """The first request for a kernel: spec, description, reference, shapes, dtypes, device, advice."""
    want = spec.reference is None if want_baseline is None else want_baseline
    dev = prompt_device(device, peaks)
    return _with_system(spec, render("prompts/generate.md.j2", want_baseline=want, dev=dev,
                                     analysis=cost_lines(spec, dev.peaks), **_spec_context(spec, dev.peaks)))


def repair_messages(spec: OperatorSpec, source: str, run: RunRecord, *, verdict: str = "rejected",
                    attempt: int | None = None, intent: str = "", baseline: str | None = None,
                    earlier: list[str] | None = None) -> Messages:
    """A failing kernel and exactly what failed: every case passing or failing, the violations, the
    error. `intent`: what an optimization round's change was meant to do, so the fix keeps the idea;
    `baseline`: the LLM's own baseline, for a spec without a reference; `earlier`: one line per reply
    of an earlier run this one continues (kernelgen.llm.earlier), the kernel being its closest."""
    return _with_system(spec, render("prompts/repair.md.j2", source=source, report=failure_report(run, spec), verdict=verdict,
                                     attempt=attempt, intent=intent, baseline=baseline, earlier=earlier or [],
                                     **_spec_context(spec)))


def malformed_followup(messages: Messages, reply: str, problem: str, remaining: int) -> Messages:
    """The same conversation plus the unusable reply and what was wrong with it."""
    return [*messages, {"role": "assistant", "content": scrub_candidate_text(reply)},
            {"role": "user", "content": scrub_candidate_text(render("prompts/malformed.md.j2", problem=problem, remaining=remaining))}]


def unmeasured_cases(spec: OperatorSpec, perf: PerformanceResult | None) -> list[str]:
    """The performance shapes x dtypes the measurements do not cover (all of them on the interpreter)."""
    timed = {(tuple((k, tuple(v)) for k, v in c.shapes.items()), c.dtype) for c in perf.cases} if perf else set()
    out = []
    for case in spec.effective_perf_cases:
        key = tuple((k, tuple(v)) for k, v in case.items())
        for dtype in spec.effective_perf_dtypes:
            if (key, dtype) not in timed:
                out.append("`" + " ".join(f"{k}{v}" for k, v in case.items()) + f" {dtype}`")
    return out


def optimization_messages(spec: OperatorSpec, best_source: str, *, device: DeviceInfo | None = None,
                          performance: PerformanceResult | None = None, diagnosis: Diagnosis | None = None,
                          history: list[HistoryEntry] | None = None, best_round: int = 0, round_k: int | None = None,
                          candidate: int = 1, candidates: int = 1, earlier: list[str] | None = None,
                          remembered: list[MemoryEntry] | None = None, shipped: int | None = None) -> Messages:
    """One optimization proposal: the device's facts, the current best code, its measurements per
    case x dtype, the diagnosis, every earlier round (llm/history), what each change type may touch,
    and the advice for the operator's kind. `earlier`: the CHANGE lines of this round's proposals so
    far, when several are asked for. `remembered`: the tuning memory's entries about this device and
    family (kernelgen.optimize.remember.recalled); those on cases alike to the spec's are quoted with
    their numbers. `shipped`: the best round, where the round starts from a later, unjudged one
    (optimize.resume.start_round). The reply starts with CHANGE / TYPE / REASON (llm/replies)."""
    peaks = performance.peaks if performance is not None else None
    quoted = memory_lines(spec, remembered or [])
    first = remembered[0] if remembered else None
    dev = prompt_device(device, peaks)
    return _with_system(spec, render(
        "prompts/optimize.md.j2", best_source=best_source, dev=dev, analysis=cost_lines(spec, dev.peaks), perf=performance,
        unmeasured=unmeasured_cases(spec, performance), diagnosis=diagnosis, history=history or [],
        best_round=best_round, shipped=shipped, round_k=round_k, candidate=candidate, candidates=candidates, earlier=earlier or [],
        remembered=quoted, remembered_device=first.device if first else "", remembered_family=first.family if first else "",
        **_spec_context(spec, dev.peaks)))


def memory_lines(spec: OperatorSpec, entries: list[MemoryEntry], limit: int = 12) -> list[str]:
    """The entries on cases alike to the spec's perf cases (kernelgen.memory.shapes), wins first, at
    most `limit`, each as one line with its numbers; scrubbed like everything a prompt quotes."""
    from kernelgen.memory.shapes import RECALL_DISTANCE, distance

    near = [e for e in entries if e.shapes and any(distance(e.shapes, c) <= RECALL_DISTANCE for c in spec.effective_perf_cases)]
    near.sort(key=lambda e: (e.verdict != "win", -e.speedup))
    return [scrub_candidate_text(e.describe()) for e in near[:limit]]
