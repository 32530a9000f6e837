"""The float32 precision modes: whether TF32 may be used, for matmuls and for convolutions, as the
user sets them -- two switches, because PyTorch keeps two with different defaults.

Matmuls: `KERNELGEN_TF32=1` allows TF32; unset (or 0) it is off, PyTorch's own default
(`torch.backends.cuda.matmul.allow_tf32`). Convolutions: `KERNELGEN_CONV_TF32` is on unless set to 0,
as PyTorch lets cuDNN use TF32 for float32 convolutions by default (`torch.backends.cudnn.allow_tf32`
is True): eager's own float32 convolutions are TF32 on an Ampere-or-later GPU, so that is the class
of precision a convolution kernel is held to. Each mode applies to everything compared: PyTorch eager
and `torch.compile` of the reference as the judge runs and times them (the two flags, around their
timing and compilation), and the candidate in its worker -- Triton's default for `tl.dot` on float32
inputs follows the matmul mode (`TRITON_F32_DEFAULT`: "tf32" or "ieee"; a kernel that names its own
`input_precision` keeps it), and the worker sets `torch.backends.cudnn.allow_tf32` from the
convolution mode, which the offline generator's convolution kernels read to name their own
`input_precision` (so the matmul mode never flips a convolution kernel, nor the other way round). The
ceilings follow them too, and every result names them. The accuracy checks measure against the
reference in float64 whatever the modes (kernelgen.verify.judge.oracle; a float32 truth, where an op
has no float64 kernel, runs with both switches off); eager, whose own error against it bounds what a
kernel may add, runs in the modes -- so a float32 convolution kernel using TF32 passes exactly when
eager's cuDNN convolution may use TF32 too.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from kernelgen.errors import UsageError

ENV = "KERNELGEN_TF32"
CONV_ENV = "KERNELGEN_CONV_TF32"  # the worker reads it too (kernelgen.verify.worker.server), as "1" or "0"
_ON, _OFF = {"1", "true", "on", "yes"}, {"", "0", "false", "off", "no"}


def _switch(name: str, default: str) -> bool:
    value = os.environ.get(name, default).strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise UsageError(f"{name}={os.environ[name]!r} is neither on nor off", hint=f"set {name}=1 to allow TF32, or {name}=0")


def tf32_enabled() -> bool:
    """The user's setting for float32 matmuls: off unless KERNELGEN_TF32 is on (UsageError for a value
    that is neither on nor off)."""
    return _switch(ENV, "")


def conv_tf32_enabled() -> bool:
    """The user's setting for float32 convolutions: on unless KERNELGEN_CONV_TF32 is off, as cuDNN's."""
    return _switch(CONV_ENV, "1")


def worker_env() -> dict[str, str]:
    """What a sandboxed worker's environment carries of the modes."""
    return {"TRITON_F32_DEFAULT": "tf32" if tf32_enabled() else "ieee", CONV_ENV: "1" if conv_tf32_enabled() else "0"}


@contextmanager
def matmul_precision(tf32: bool, conv_tf32: bool | None = None) -> Iterator[None]:
    """PyTorch's float32 matmuls (cuBLAS, Inductor's templates) in mode `tf32`, and its float32
    convolutions (cuDNN, Inductor's conv templates) in mode `conv_tf32` (None: the user's,
    KERNELGEN_CONV_TF32), restored after."""
    import torch

    conv = conv_tf32_enabled() if conv_tf32 is None else conv_tf32
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32, conv
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def describe(tf32: bool, conv_tf32: bool | None = None) -> str:
    """Both modes in words (`conv_tf32` None: the user's)."""
    if tf32:
        text = f"TF32 on ({ENV}=1): float32 matmuls in eager, torch.compile and the kernel's tl.dot may use TF32"
    else:
        text = f"TF32 off: float32 matmuls in IEEE FP32 in eager, torch.compile and the kernel's tl.dot ({ENV}=1 allows TF32)"
    conv = conv_tf32_enabled() if conv_tf32 is None else conv_tf32
    if conv:
        return text + f"; float32 convolutions may use TF32 in cuDNN and in the kernel, PyTorch's default ({CONV_ENV}=0 turns it off)"
    return text + f"; float32 convolutions in IEEE FP32 in cuDNN and in the kernel ({CONV_ENV}=0)"
