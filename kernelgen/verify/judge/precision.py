"""PyTorch's switches set to the precision policy in force (kernelgen.precision) around the judge's own
runs of the reference: eager and torch.compile under the user's policy, the float32 truth exact."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from kernelgen.precision import CONV_ENV, ENV, PrecisionPolicy, conv_tf32_enabled, precision_policy


@contextmanager
def applied(policy: PrecisionPolicy | None = None, *, exact: bool = False) -> Iterator[PrecisionPolicy]:
    """PyTorch's float32 matmuls (cuBLAS, Inductor's templates) and convolutions (cuDNN) under `policy`
    (the one in force when None), or both IEEE where `exact` (a truth computed in float32); restored after."""
    policy = policy or precision_policy()
    with matmul_precision(policy.matmul_tf32 and not exact, conv_tf32=policy.conv_tf32 and not exact):
        yield policy


@contextmanager
def matmul_precision(tf32: bool, conv_tf32: bool | None = None) -> Iterator[None]:
    """PyTorch's float32 matmuls in mode `tf32`, and its float32 convolutions in mode `conv_tf32`
    (None: the policy's), restored after."""
    import torch

    conv = conv_tf32_enabled() if conv_tf32 is None else conv_tf32
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32, conv
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def describe(tf32: bool, conv_tf32: bool | None = None) -> str:
    """Both modes in words (`conv_tf32` None: the policy's)."""
    if tf32:
        text = f"TF32 on ({ENV}=1): float32 matmuls in eager, torch.compile and the kernel's tl.dot may use TF32"
    else:
        text = f"TF32 off: float32 matmuls in IEEE FP32 in eager, torch.compile and the kernel's tl.dot ({ENV}=1 allows TF32)"
    conv = conv_tf32_enabled() if conv_tf32 is None else conv_tf32
    if conv:
        return text + f"; float32 convolutions may use TF32 in cuDNN and in the kernel, PyTorch's default ({CONV_ENV}=0 turns it off)"
    return text + f"; float32 convolutions in IEEE FP32 in cuDNN and in the kernel ({CONV_ENV}=0)"
