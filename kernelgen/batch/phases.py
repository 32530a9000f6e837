"""Where a step's seconds went, read from the progress lines it prints as it works (`• ...`).

Each line that begins a known phase ends the phase before it; the time before the first is the
step's start (Python, imports, and for `new` the spec read or derived from a KernelBench file); lines
that begin no phase belong to the phase they appear in. A phase that happens several times (an
optimization round's proposing, checking and timing) adds up. The names are `<step>: <phase>`:

    new:       start, generate (the offline generator or the LLM), check (the accuracy check),
               measure (round 0 timed: the kernel, eager, torch.compile and the peer libraries)
    optimize:  start, time the best (round 0 timed before its diagnosis, where `new` did not or its basis changed),
               propose, search, check, time (the candidate against the best), end (keep or not, log)
    bench:     start, time (the final measurement: the kernel, eager, torch.compile, the peers)

A phase's wait for the device, said at its end (`<name>: waited 41.3 s for the device`:
kernelgen.verify.judge.devicelock.waits_said), is a phase of its own, `<step>: <phase> (device lock)`,
taken out of the phase's seconds: other processes' checks and timings on the GPU, not this step's work.

Only what the steps print is seen: inside `measure` and `bench: time`, torch.compile's and the
peers' seconds are not told apart (the baseline cache makes them cost nothing the second time).

The baselines timed ahead (kernelgen.batch.ahead) print where each case's seconds went, `case 0 float32:
eager 3.5 ms, torch.compile 1.1 ms (63.1 s: inputs 0.5, compile 5.1, device lock 57.2, timing eager 0.3,
timing torch.compile 0.0)` (kernelgen.verify.judge.ahead); `baseline_split` reads that line.
"""

from __future__ import annotations

import re

MARKS: tuple[tuple[str, re.Pattern[str], str], ...] = tuple((step, re.compile(pattern), phase) for step, pattern, phase in (
    ("new", r": generating the kernel", "generate"),
    ("new", r": checking accuracy", "check"),
    ("new", r": measuring performance$", "measure"),
    ("optimize", r": measuring round \d+'s kernel", "time the best"),
    ("optimize", r": proposing \(", "propose"),
    ("optimize", r": searching \d+ candidate", "search"),
    ("optimize", r": checking the candidate", "check"),
    ("optimize", r": timing the candidate", "time"),
    ("optimize", r": (keeping round|round \d+ not kept|stopped —)", "end"),
    ("bench", r": timing on ", "time"),
))


_SPLIT = re.compile(r"^baselines ahead: .*: case \d+ \w+: .*\([\d.]+ s: (?P<parts>[^()]*)\)\s*$")
_PART = re.compile(r"^(?P<name>[a-z][\w. ]*?) (?P<s>\d+(?:\.\d+)?)$")


def baseline_split(line: str) -> dict[str, float]:
    """Seconds per part of one case's line from the baselines timed ahead ({} for any other line); the
    timings of eager and of torch.compile counted together as `timing`."""
    m = _SPLIT.match(line.strip())
    if m is None:
        return {}
    out: dict[str, float] = {}
    for part in m["parts"].split(", "):
        pm = _PART.match(part.strip())
        if pm is None:
            continue
        name = "timing" if pm["name"].startswith("timing") else pm["name"]
        out[name] = out.get(name, 0.0) + float(pm["s"])
    return out


def phase_of_line(step: str, line: str) -> str | None:
    """The phase a progress line of `step` begins; None when it begins none."""
    return next((phase for s, pattern, phase in MARKS if s == step and pattern.search(line)), None)


_WAITED = re.compile(r": waited (?P<s>\d+(?:\.\d+)?) s for the device$")


def split(step: str, marks: list[tuple[float, str]], total: float) -> dict[str, float]:
    """Seconds per phase of one step: `marks` are (seconds since the step started, progress line)."""
    out: dict[str, float] = {}
    waited: dict[str, float] = {}
    current, since = "start", 0.0
    for at, line in marks:
        phase = phase_of_line(step, line)
        if phase is None:
            m = _WAITED.search(line.strip())
            if m is not None:
                waited[current] = waited.get(current, 0.0) + float(m["s"])
            continue
        out[f"{step}: {current}"] = out.get(f"{step}: {current}", 0.0) + max(0.0, at - since)
        current, since = phase, at
    out[f"{step}: {current}"] = out.get(f"{step}: {current}", 0.0) + max(0.0, total - since)
    for phase, s in waited.items():
        key = f"{step}: {phase}"
        s = min(s, out.get(key, 0.0))  # said by the judge's clock, bounded by the step's
        out[key] = out.get(key, 0.0) - s
        out[f"{key} (device lock)"] = s
    return {k: round(v, 2) for k, v in out.items()}
