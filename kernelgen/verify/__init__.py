"""The trust boundary: everything that decides whether a candidate kernel is correct and how fast it
is, split by the process each file runs in.

    judge/    the trusted process: draws inputs, runs the baseline, compares, times, decides
              (judge.py holds one operator's state; runner.py is the front door for the rest of
              KernelGen; accuracy.py and performance.py are the two verdicts)
    worker/   the sandboxed process a candidate runs in: its bootstrap and sandbox, the request loop,
              and the in-process guard and tamper evidence. It imports nothing from judge/ (a test
              holds it to that), so nothing a candidate can walk to from its own process is the
              judge's.
    *.py      what both sides import: the wire (protocol.py), the timing loop (timing.py, adaptive.py,
              samples.py), the typed results, poison fills, input digests and the sandbox policy.

Nothing here imports kernelgen.llm, kernelgen.optimize or kernelgen.offline (tests/test_layout.py):
code that judges must not depend on code that writes what is judged.
"""
