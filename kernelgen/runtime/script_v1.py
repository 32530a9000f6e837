"""The self-check of a generated file run as a script (`python <op>_triton.py`), version 1: FROZEN as
kernelgen.runtime.v1 is (a change of behaviour goes to script_v2). Imported only in a file's
`if __name__ == "__main__":` block, which KernelGen never runs: these start a process and exit, so
they are no kernel's to import (kernelgen.verify.judge.allowlist admits kernelgen.runtime.v1 alone).
"""

import os
import subprocess
import sys

import torch


def check_device():
    """Where the self-check runs: the GPU, or, with no GPU driver, Triton's interpreter -- the script run
    again with TRITON_INTERPRET=1, which must be on before the kernels are decorated (this process exits
    with the child's status). Seeds PyTorch's generator (0) for the draws that follow."""
    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit(subprocess.call([sys.executable, *sys.argv], env={**os.environ, "TRITON_INTERPRET": "1"}))
    torch.manual_seed(0)
    return "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"


def self_check(name, got, want, atol, rtol, what):
    """A wrapper's results against the reference's (tensors or tuples): shapes, dtypes, values within
    (atol, rtol); one line printed, exit 0 when they match, else 1."""
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    ok = all(g.shape == w.shape and g.dtype == w.dtype and torch.allclose(g.float(), w.float(), rtol=rtol, atol=atol, equal_nan=True)
             for g, w in zip(got, want))
    error = max((g.float() - w.float()).abs().max().item() if g.shape == w.shape else float("inf") for g, w in zip(got, want))
    device = got[0].device.type if got else "cpu"
    print(f"{name}: {'ok' if ok else 'MISMATCH'} on {device}, {what}: max abs error {error:.3g} (atol {atol}, rtol {rtol})")
    sys.exit(0 if ok else 1)
