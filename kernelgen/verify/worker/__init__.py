"""The worker's side of the trust boundary: the sandboxed process a candidate is recorded in (role
record) or its plans are replayed in (role replay, never importing a candidate). `python -m
kernelgen.verify.worker` starts it (the judge does, in a sandbox): server.py serves the judge's requests,
sandbox.py confines the process before any candidate is imported, candidate.py calls the candidate
directly where no verdict depends on it, interpreter.py gives the CPU interpreter what honest kernels
use (autotune's first config, libdevice), guard.py and tamper.py gather in-process evidence. It imports
nothing from kernelgen.verify.judge (tests/test_layout.py)."""
