"""The messages KernelGen sends an LLM, rendered from `templates/prompts/` (StrictUndefined: a
variable nobody passed is an error, not a hole in a prompt). No prompt text lives in Python.

Every function returns OpenAI chat messages (`[{"role": ..., "content": ...}]`) and starts with
the same system message: the role, the rules the harness enforces, and the file contract.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from kernelgen.render import render
from kernelgen.verify.staticcheck import ALLOWED_IMPORTS

if TYPE_CHECKING:
    from kernelgen.devices import DeviceInfo
    from kernelgen.verify.results import DevicePeaks, RunRecord
    from kernelgen.spec import OperatorSpec

Messages = list[dict[str, str]]


def system_prompt(spec: OperatorSpec) -> str:
    return render("prompts/system.md.j2", spec=spec, allowed_imports=sorted(ALLOWED_IMPORTS - {"__future__"}))


def _device_context(device: DeviceInfo | None, peaks: DevicePeaks | None) -> dict:
    if device is None:
        from kernelgen.devices import DeviceInfo

        device = DeviceInfo("cuda", "cuda", interpreter=False)  # what kernels are written for
        return {"device": device, "device_name": "a CUDA GPU", "peaks": peaks}
    name = peaks.device_name if peaks else device.kind
    return {"device": device, "device_name": name, "peaks": peaks if peaks is not None else known_peaks(device)}


def known_peaks(device: DeviceInfo) -> DevicePeaks | None:
    """The device's measured ceilings if they were measured before (the cache of kernelgen.verify.peaks);
    never measures here: a prompt is no reason to spend a minute on a benchmark."""
    if device.interpreter or device.kind != "cuda":
        return None
    from kernelgen.verify.peaks import cache_dir
    from kernelgen.verify.results import DevicePeaks

    path = cache_dir() / "peaks.json"
    try:
        from kernelgen.devices import device_name

        name = device_name(device)
        cached = json.loads(path.read_text())
        for key, value in cached.items():
            if key.startswith(f"{name} |"):
                return DevicePeaks.model_validate(value)
    except Exception:  # noqa: BLE001 - no cache, a damaged one, or no CUDA: the prompt goes without
        return None
    return None


def _with_system(spec: OperatorSpec, user: str) -> Messages:
    return [{"role": "system", "content": system_prompt(spec)}, {"role": "user", "content": user}]


def generation_messages(spec: OperatorSpec, device: DeviceInfo | None = None, *, peaks: DevicePeaks | None = None,
                        want_baseline: bool | None = None) -> Messages:
    """The first request for a kernel: spec, description, reference, shapes, dtypes, device."""
    want = spec.reference is None if want_baseline is None else want_baseline
    return _with_system(spec, render("prompts/generate.md.j2", spec=spec, want_baseline=want,
                                     **_device_context(device, peaks)))


def repair_messages(spec: OperatorSpec, source: str, failure: str, *, verdict: str = "rejected",
                    attempt: int | None = None, intent: str = "", baseline: str | None = None) -> Messages:
    """A failing kernel and exactly what failed (RunRecord.describe() or a perf-shape mismatch).
    `intent`: what an optimization round's change was meant to do, so the fix keeps the idea;
    `baseline`: the LLM's own baseline, for a spec without a reference."""
    return _with_system(spec, render("prompts/repair.md.j2", spec=spec, source=source, failure=failure,
                                     verdict=verdict, attempt=attempt, intent=intent, baseline=baseline))


def malformed_followup(messages: Messages, reply: str, problem: str, remaining: int) -> Messages:
    """The same conversation plus the unusable reply and what was wrong with it."""
    return [*messages, {"role": "assistant", "content": reply},
            {"role": "user", "content": render("prompts/malformed.md.j2", problem=problem, remaining=remaining)}]


def measurements_text(perf: RunRecord | None) -> str:
    """The perf run as lines a model can reason about: time, bandwidth, fraction of the ceiling."""
    if perf is None or perf.performance is None:
        return ""
    p = perf.performance
    lines = []
    if not p.measured:
        lines.append("(CPU interpreter: these timings are not measurements; reason from the code and the shapes.)")
    for c in p.cases:
        parts = [c.label, *c.facts()]
        lines.append("- " + ", ".join(parts))
    return "\n".join(lines)


def optimization_messages(spec: OperatorSpec, best_source: str, diagnosis: str, history: list[str], *,
                          device: DeviceInfo | None = None, measurements: RunRecord | None = None,
                          peaks: DevicePeaks | None = None, round_k: int | None = None) -> Messages:
    """One optimization proposal: the current best code, its measurements (with the roofline
    fraction), the diagnosis, earlier rounds and their outcomes, and the strategy catalogue.
    The reply is asked to start with CHANGE / TYPE / REASON lines (kernelgen.llm.replies reads them)."""
    return _with_system(spec, render("prompts/optimize.md.j2", spec=spec, best_source=best_source, diagnosis=diagnosis,
                                     history=history, measurements=measurements_text(measurements), round_k=round_k,
                                     **_device_context(device, peaks)))
