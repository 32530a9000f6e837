"""Replay: a recorded plan (kernelgen.verify.plan) run in a process that never imports the candidate's
module: it defines only the file's @triton.jit functions and the module constants they read (extracted
by the judge from the file's bytes, extract.py), checks that each compiles as Triton (frontend.py:
Triton's own front end, which refuses Python outside the language; on the CPU too), allocates fresh
buffers on every call and runs the plan's steps on the judge's inputs (executor.py). Accuracy checks,
timed outputs and timings all come from replays (ops.py serves them in the replay worker).

  extract.py   the replay module of a kernel file (pure AST; the judge runs it)
  order.py     the interpreter's program order (forward, reversed, shuffled)
  frontend.py  each launched function compiled to Triton IR with the launch's arguments
  executor.py  a plan run on inputs: allocations (poisoned when checked), copies, fills, launches
  ops.py       the replay worker's requests: kernels, plan, replay, time, kept, host
"""
