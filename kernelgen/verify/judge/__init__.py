"""The judge's side of the trust boundary: what runs in KernelGen's own process and never beside a
candidate. It starts the sandboxed workers (session.py): a recording worker per candidate, whose plans it
validates (recorded.py, plans.py), and a replay worker (replayer.py) it sends inputs and plans to and
reads back outputs and timings from; it decides the verdicts (accuracy.py, performance.py, timed.py)
against its own baseline and its own clock. runner.py is the entry point the rest of KernelGen calls."""
