"""Every violation code the judge can report, in one table (docs/trust.md and the prompts quote it; a
test checks that every code the code emits is here and in docs/trust.md).

A wrong value is a failed check (CaseCheck), not a violation; a timing beyond the device's measured
ceiling marks the PerfCase invalid; a worker that times out or crashes is a RunRecord status.
"""

VIOLATION_CODES: dict[str, str] = {
    # static (kernelgen.verify.judge.staticcheck, in the judge, before anything runs)
    "syntax-error": "the file does not parse",
    "forbidden-import": "imports a module a kernel file may not use",
    "imports-baseline": "imports the reference implementation",
    "forbidden-call": "calls a builtin outside the allowlist, or getattr/hasattr with a computed name",
    "forbidden-api": "uses a name that is not on its module's allowlist or an attribute not on the values' allowlist, or hands a module around as a value",
    "private-attribute": "uses an attribute whose name starts with '_', on anything",
    "reads-environment": "reads environment variables (where API keys live)",
    "monkeypatch": "assigns or deletes an attribute of an imported module or class (also through setattr, functools.update_wrapper, functools.wraps, dataclasses.dataclass and the like)",
    "introspection": "touches dunder attributes or names, or defines dunder hooks",
    "tensor-subclass": "defines a subclass of a torch class",
    "host-compute": "moves data to the host to compute there (.item/.tolist/.numpy)",
    "fallback-try-except": "try/except on the entry's path: a silent non-Triton fallback",
    "no-triton-kernel": "defines no @triton.jit kernel",
    "no-entry-function": "defines no plain entry function named after the op",
    "entry-rebound": "the entry function is decorated or rebound at module level",
    "kernel-not-launched": "the entry never launches a @triton.jit kernel",
    # decided by the judge from what came back (kernelgen.verify.judge.accuracy, performance)
    "wrong-outputs": "returned the wrong number or kind of values (not plain tensors)",
    "unwritten-output": "output elements were never written (they hold the poison fill, or change with it)",
    "input-mutated": "an input was modified by the call",
    "answer-without-triton": "the output was right with every Triton launch turned into a no-op",
    "stale-output": "wrong on the same buffers refilled with new values: a result cached from an earlier call",
    "timed-output-wrong": "the output of a timed call, chosen by the judge and read after the calls, differs from the reference on that request's inputs",
    "deferred-work": "the worker still had device work queued after it said the timed calls were done",
    "forged-timing": "the worker claimed less device time than the judge's own clock allows for the timed calls",
    "folder-changed": "the operator folder changed while the candidate ran",
    # evidence from the worker's in-process guard (kernelgen.verify.worker.guard, tamper)
    "torch-compute-in-wrapper": "PyTorch computed in the wrapper",
    "no-triton-launch": "the call launched no Triton kernel",
    "off-stream-launch": "a Triton launch on another stream",
    "launch-hook": "a kernel carries pre-run hooks (Python of the candidate's inside the launch)",
    "output-not-fresh": "an output was not allocated during the call",
    "thread-started": "a thread was started during the call",
    "timed-call-no-launch": "a timed call launched no Triton kernel",
    "harness-tampering": "torch, builtins, Triton's launch classes or the worker's own sealed state were changed by the candidate",
}
