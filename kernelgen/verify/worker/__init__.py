"""The worker's side of the trust boundary: the only code that runs in the same process as a candidate
kernel. `python -m kernelgen.verify.worker` starts it (the judge does, in a sandbox): server.py serves
the judge's requests, sandbox.py confines the process before any candidate is imported, guard.py and
tamper.py gather in-process evidence. It imports nothing from kernelgen.verify.judge
(tests/test_layout.py), only the shared modules one level up."""
