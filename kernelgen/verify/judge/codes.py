"""Every violation code the judge can report, in one table (docs/trust.md and the prompts quote it; a
test checks that every code the code emits is here and in docs/trust.md). Since issue 40 the verdicts
come from replays of what a call recorded: the recording's refusals and the replay's checks decide; the
static rules and the in-process evidence stay as defence in depth.

A wrong value is a failed check (CaseCheck), not a violation; a timing beyond the device's measured
ceiling marks the PerfCase invalid; a worker that times out or crashes is a RunRecord status.
"""

VIOLATION_CODES: dict[str, str] = {
    # static (kernelgen.verify.judge.staticcheck, in the judge, before anything runs)
    "syntax-error": "the file does not parse",
    "forbidden-import": "imports a module a kernel file may not use",
    "imports-baseline": "imports the reference implementation",
    "forbidden-call": "calls a builtin outside the allowlist, or getattr/hasattr with a computed name",
    "forbidden-api": "uses a name that is not on its module's allowlist, hands a module around as a value, or walks to Python's frames, code or tracebacks",
    "private-attribute": "uses an attribute whose name starts with '_', on anything",
    "reads-environment": "reads environment variables (where API keys live)",
    "monkeypatch": "assigns or deletes an attribute of an imported module or class (also through setattr, functools.update_wrapper, functools.wraps, dataclasses.dataclass and the like)",
    "introspection": "touches dunder attributes or names, defines dunder hooks, or derives a class from something it may not",
    "no-triton-kernel": "defines no @triton.jit kernel",
    "no-entry-function": "defines no plain entry function named after the op",
    # what a recording refuses: the call did something a replay cannot stand for (kernelgen.verify.record)
    "torch-compute-in-wrapper": "PyTorch computed in the wrapper (any op beyond allocation, views, fills and same-dtype copies)",
    "host-read": "the launches depend on values, not on shapes: not replayable (a host read of device values, or new values recording a different plan)",
    "outside-tensor": "a tensor made outside the call (at import, by an earlier call, or from host data) reached a launch or an output",
    "not-replayable": "the call did something a plan has no form for (an argument, a launch path, a kernel that is not a module-level @triton.jit function, a module constant computed by Python)",
    "plan-differs": "a second identical call recorded a different plan",
    "no-triton-launch": "the call launched no Triton kernel",
    "off-stream-launch": "a Triton launch on another stream",
    "launch-hook": "a kernel carries pre-run or launch hooks (Python of the candidate's inside the launch)",
    "output-not-fresh": "an output is an input or a view of one, not a tensor allocated during the call",
    # what the replay refuses (kernelgen.verify.replay)
    "not-triton": "a @triton.jit function does not compile as Triton (Triton's front end refuses Python outside the language)",
    # decided by the judge from what came back (kernelgen.verify.judge.accuracy, performance)
    "wrong-outputs": "returned the wrong number or kind of values (not plain tensors)",
    "unwritten-output": "output elements were never written (they hold the poison fill, or change with it)",
    "input-mutated": "an input was modified by the call",
    "answer-without-triton": "the output was right with every Triton launch turned into a no-op",
    "timed-output-wrong": "the output of a timed call, chosen by the judge and read after the calls, differs from the reference on that request's inputs",
    "deferred-work": "the worker still had device work queued after it said the timed calls were done",
    "forged-timing": "the worker claimed less device time than the judge's own clock allows for the timed calls",
    "folder-changed": "the operator folder changed while the candidate ran",
    "timed-call-no-launch": "a timed call launched no Triton kernel",
    # evidence from the candidate's own process (kernelgen.verify.worker.guard, tamper): defence in depth
    "thread-started": "a thread was started during a direct call of the candidate",
    "harness-tampering": "torch, builtins, Triton's launch classes or the worker's own sealed state were changed by the candidate",
}
