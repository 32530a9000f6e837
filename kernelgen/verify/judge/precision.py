"""The precision policy in force (kernelgen.verify.precision.PrecisionPolicy), resolved from the user's
switches, and PyTorch's switches set to it around the judge's own runs of the reference.

One way to set it, per switch, the first that says something:
1. `--precision` on new, test, bench, optimize and batch, or its variable `KERNELGEN_PRECISION`:
   `pytorch` (PyTorch's defaults), `ieee` (both IEEE-class), `tf32` (both may use TF32), or per kind
   `matmul=tf32,conv=ieee` (a kind not named keeps what the next lines say). The matmul mode takes
   `torch.set_float32_matmul_precision`'s words too: `highest` is ieee, `high` is tf32.
2. `KERNELGEN_TF32=1` (float32 matmuls may use TF32) and `KERNELGEN_CONV_TF32=0` (float32 convolutions
   may not), the older per-switch variables.
3. PyTorch's defaults: matmuls IEEE (`torch.backends.cuda.matmul.allow_tf32` is False), convolutions
   TF32 (`torch.backends.cudnn.allow_tf32` is True) -- what KernelBench's harness runs eager with.

`--precision` exports its value as KERNELGEN_PRECISION, so the warm service (keyed on the environment),
the sandboxed workers (`worker_env`) and a batch's steps all follow it. The process's own
`torch.backends` switches are not read: a judge in the warm service would not see a caller's, and the
same command must give the same verdict in and out of it.

`precision_policy()` is the stable entry point (prompts render their precision advice from it).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from kernelgen.errors import UsageError
from kernelgen.verify.precision import CONV_ENV, KINDS, MATMUL_ENV, OPTION_ENV, Mode, PrecisionPolicy

ENV = MATMUL_ENV  # the names callers have used
_ON, _OFF = {"1", "true", "on", "yes"}, {"", "0", "false", "off", "no"}
_WORDS: dict[str, Mode] = {"ieee": "ieee", "tf32": "tf32", "highest": "ieee", "high": "tf32"}
_PRESETS: dict[str, dict[str, Mode]] = {"pytorch": {"matmul": "ieee", "conv": "tf32"},
                                        "ieee": {"matmul": "ieee", "conv": "ieee"},
                                        "tf32": {"matmul": "tf32", "conv": "tf32"}}
_HINT = "--precision takes pytorch, ieee, tf32, or per kind: matmul=tf32,conv=ieee (each ieee or tf32)"


def parse_precision(text: str) -> dict[str, Mode]:
    """The modes `text` (--precision's syntax) sets, per kind it names; UsageError for anything else."""
    value = text.strip().lower()
    if value in _PRESETS:
        return dict(_PRESETS[value])
    modes: dict[str, Mode] = {}
    for part in filter(None, (p.strip() for p in value.split(","))):
        kind, _, word = (s.strip() for s in part.partition("="))
        if kind not in KINDS or word not in _WORDS or (kind == "conv" and word in ("high", "highest")):
            raise UsageError(f"precision {text!r}: {part!r} is not a precision setting", hint=_HINT)
        if kind in modes and modes[kind] != _WORDS[word]:
            raise UsageError(f"precision {text!r} sets {kind} twice", hint=_HINT)
        modes[kind] = _WORDS[word]
    if not modes:
        raise UsageError(f"precision {text!r} sets nothing", hint=_HINT)
    return modes


def _switch(name: str, default: str) -> bool:
    value = os.environ.get(name, default).strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise UsageError(f"{name}={os.environ[name]!r} is neither on nor off", hint=f"set {name}=1 to allow TF32, or {name}=0")


def precision_policy() -> PrecisionPolicy:
    """The policy in force now, from the switches above (UsageError for a value that means nothing)."""
    chosen = parse_precision(os.environ[OPTION_ENV]) if os.environ.get(OPTION_ENV, "").strip() else {}
    fields: dict[str, str] = {}
    for kind, env, default in (("matmul", MATMUL_ENV, ""), ("conv", CONV_ENV, "1")):
        if kind in chosen:
            fields[kind], fields[f"{kind}_from"] = chosen[kind], "option"
        else:
            tf32 = _switch(env, default)  # a bad value is an error even where it changes nothing
            fields[kind] = "tf32" if tf32 else "ieee"
            fields[f"{kind}_from"] = "env" if os.environ.get(env, "").strip() else "pytorch-default"
    return PrecisionPolicy.model_validate(fields)


def use_precision(text: str) -> PrecisionPolicy:
    """`--precision TEXT`: checked, then exported as KERNELGEN_PRECISION for everything this command
    starts (the service is keyed on it, workers and batch steps inherit it); the policy now in force."""
    parse_precision(text)
    os.environ[OPTION_ENV] = text.strip()
    return precision_policy()


def tf32_enabled() -> bool:
    """Whether float32 matmuls may use TF32 under the policy in force."""
    return precision_policy().matmul_tf32


def conv_tf32_enabled() -> bool:
    """Whether float32 convolutions may use TF32 under the policy in force (cuDNN's default: yes)."""
    return precision_policy().conv_tf32


def worker_env() -> dict[str, str]:
    """What a sandboxed worker's environment carries of the policy in force."""
    return precision_policy().worker_env()


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
