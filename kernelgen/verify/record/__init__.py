"""Recording: the candidate's wrapper run once per input layout in its sandboxed worker, and what it did
on the device written down as a plan (kernelgen.verify.plan). Worker-side: it runs in the candidate's
own process and imports nothing judge-side. Nothing it reports is trusted: the plan is validated by the
judge and every verdict comes from replaying it (kernelgen.verify.replay) in a process that never
imports the candidate.

  calls.py     the recording of one call: its storages, its steps, and why it was refused
  mode.py      the dispatch mode that sees the wrapper's tensor operations
  launches.py  the hooks that see its Triton launches (JITFunction.run, the interpreter, the launcher)
  ops.py       the worker's `record` request: a warm-up call, then two recorded calls that must agree
"""
