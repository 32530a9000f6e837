"""The float32 matmul precision mode: whether TF32 may be used, as the user sets it.

`KERNELGEN_TF32=1` allows TF32; unset (or 0) it is off, PyTorch's own default. The same mode applies
to everything compared: PyTorch eager and `torch.compile` of the reference as the judge times them
(`torch.backends.cuda.matmul.allow_tf32` and cuDNN's, around their timing and compilation), and the
candidate in its worker (Triton's default for `tl.dot` on float32 inputs, `TRITON_F32_DEFAULT`:
"tf32" or "ieee"; a kernel that names its own `input_precision` keeps it). The ceilings follow it too
(a float32 matmul against the FP32 rate, or the TF32 rate), and every result names it. The accuracy
checks measure against the reference in float64 whatever the mode (kernelgen.verify.judge.oracle); eager,
whose own error against it bounds what a kernel may add, runs in the mode.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from kernelgen.errors import UsageError

ENV = "KERNELGEN_TF32"
_ON, _OFF = {"1", "true", "on", "yes"}, {"", "0", "false", "off", "no"}


def tf32_enabled() -> bool:
    """The user's setting (UsageError for a value that is neither on nor off)."""
    value = os.environ.get(ENV, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise UsageError(f"{ENV}={os.environ[ENV]!r} is neither on nor off", hint=f"set {ENV}=1 to allow TF32, or unset it")


def worker_env() -> dict[str, str]:
    """What a sandboxed worker's environment carries of the mode."""
    return {"TRITON_F32_DEFAULT": "tf32" if tf32_enabled() else "ieee"}


@contextmanager
def matmul_precision(tf32: bool) -> Iterator[None]:
    """PyTorch's float32 matmuls (cuBLAS, cuDNN, Inductor's templates) in this mode, restored after."""
    import torch

    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def describe(tf32: bool) -> str:
    if tf32:
        return f"TF32 on ({ENV}=1): float32 matmuls in eager, torch.compile and the kernel's tl.dot may use TF32"
    return f"TF32 off: float32 matmuls in IEEE FP32 in eager, torch.compile and the kernel's tl.dot ({ENV}=1 allows TF32)"
