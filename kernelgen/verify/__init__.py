"""The trust boundary: everything that decides whether a candidate kernel is correct and how fast it
is, split by the process each file runs in. It reads record | replay | judge: a candidate's module runs
only to be recorded; every check and every timing is a replay of that record in a process that never
imports it (issue 40).

    record/   runs in the candidate's sandboxed worker: one call written down as a plan (its buffers,
              copies, fills and Triton launches), or refused with what a replay cannot stand for
    replay/   runs in a sandboxed worker that never imports a candidate: the file's @triton.jit
              functions only (extracted by the judge, compiled by Triton's front end first), plans run
              on fresh buffers, checked and timed
    judge/    the trusted process: draws inputs, runs the baseline, checks plans, compares, times,
              decides (judge.py holds one operator's state; runner.py is the front door for the rest of
              KernelGen; accuracy.py and performance.py are the two verdicts)
    worker/   the sandboxed process both run in: its bootstrap and sandbox, the request loop, the
              candidate's direct calls, and the in-process guard and tamper evidence. Nothing
              worker-side (worker/, record/, replay/) imports from judge/ (a test holds it to that).
    *.py      what both sides import: the plan (plan.py), the wire (protocol.py), the timing loop
              (timing.py, adaptive.py, samples.py), the typed results, poison fills, input digests and
              the sandbox policy.

Nothing here imports kernelgen.llm, kernelgen.optimize or kernelgen.offline (tests/test_layout.py):
code that judges must not depend on code that writes what is judged.
"""
