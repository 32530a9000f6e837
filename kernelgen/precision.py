"""The float32 precision policy: whether a float32 matmul and a float32 convolution may multiply in one
TF32 product (a 10-bit mantissa) or must stay IEEE-class (IEEE FP32, or three TF32 products: tf32x3),
and where each choice came from. One typed object, read by everything that depends on it:

- the judge: eager and torch.compile of the reference run under it (never the float64 truth), so a
  kernel is held to eager's own error in the precision the user runs with (kernelgen.verify.judge.oracle);
- the worker: the candidate sees PyTorch's switches set to it (`torch.backends.cuda.matmul.allow_tf32`,
  `torch.backends.cudnn.allow_tf32`) and Triton's float32 `tl.dot` default follows the matmul mode
  (`TRITON_F32_DEFAULT`), through the environment the judge gives it (`worker_env`);
- the ceilings: a float32 case may reach the TF32 rate only where one of its products may use TF32;
- every report: bench, the optimization log, the batch report (`label`);
- the offline generator: its model of a convolution's tiles (one TF32 product or three) follows the
  policy, which is why this module sits outside kernelgen.verify (the generator imports nothing of it).

PyTorch's own defaults differ per kind and are this policy's: float32 matmuls IEEE
(`torch.backends.cuda.matmul.allow_tf32` False, `torch.get_float32_matmul_precision()` "highest"),
float32 convolutions TF32 (`torch.backends.cudnn.allow_tf32` True), which KernelBench's harness leaves
as they are. Both sides import this module (the worker reads the environment the judge wrote); it runs
nothing and imports no torch at import time.

The policy in force is resolved from the user's switches (`precision_policy()`).

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
from typing import Literal, Mapping

from pydantic import BaseModel, ConfigDict

from kernelgen.errors import UsageError

Mode = Literal["ieee", "tf32"]
# where a switch's value came from: PyTorch's own default, an environment variable, or --precision
Source = Literal["pytorch-default", "env", "option"]
KINDS = ("matmul", "conv")

OPTION_ENV = "KERNELGEN_PRECISION"  # --precision's value, exported so the service, workers and batch steps follow it
MATMUL_ENV = "KERNELGEN_TF32"  # the per-switch variables: "1" allows TF32, "0" (or unset) not
CONV_ENV = "KERNELGEN_CONV_TF32"  # ...unset: TF32 allowed, as cuDNN's default
TRITON_ENV = "TRITON_F32_DEFAULT"  # Triton's precision for a float32 tl.dot that names none


class PrecisionPolicy(BaseModel):
    """matmul / conv: "tf32" where one TF32 product is allowed for that kind of float32 product, "ieee"
    where it must be IEEE-class; *_from: which switch said so."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    matmul: Mode = "ieee"
    conv: Mode = "tf32"
    matmul_from: Source = "pytorch-default"
    conv_from: Source = "pytorch-default"

    @property
    def matmul_tf32(self) -> bool:
        return self.matmul == "tf32"

    @property
    def conv_tf32(self) -> bool:
        return self.conv == "tf32"

    def tf32_for(self, kinds: set[str] | frozenset[str]) -> bool:
        """Whether a float32 op whose products are of these kinds ("matmul", "conv") may use one TF32
        product somewhere: the fastest precision any of its products is allowed."""
        return ("matmul" in kinds and self.matmul_tf32) or ("conv" in kinds and self.conv_tf32)

    @property
    def is_pytorch_default(self) -> bool:
        return (self.matmul, self.conv) == ("ieee", "tf32")

    def label(self) -> str:
        """Short, for a table cell or a heading: `matmul IEEE, conv TF32 (PyTorch's defaults)`, or each
        kind with the switch that set it: `matmul TF32 (KERNELGEN_TF32=1), conv TF32 (PyTorch's default)`."""
        if self.matmul_from == self.conv_from == "pytorch-default":
            return f"matmul {_word(self.matmul)}, conv {_word(self.conv)} (PyTorch's defaults)"
        return ", ".join(f"{kind} {_word(mode)} ({_switch(kind, mode, source)})" for kind, mode, source in
                         (("matmul", self.matmul, self.matmul_from), ("conv", self.conv, self.conv_from)))

    def describe(self) -> str:
        """One sentence per kind, naming the switch that sets it."""
        return "; ".join(_sentence(kind, mode, source) for kind, mode, source in
                         (("matmul", self.matmul, self.matmul_from), ("conv", self.conv, self.conv_from)))

    def worker_env(self) -> dict[str, str]:
        """What a sandboxed worker's environment carries of the policy (it reads it with `from_worker_env`)."""
        return {TRITON_ENV: "tf32" if self.matmul_tf32 else "ieee", CONV_ENV: "1" if self.conv_tf32 else "0"}

    @classmethod
    def from_worker_env(cls, environ: Mapping[str, str]) -> "PrecisionPolicy":
        """The policy as `worker_env` wrote it (a worker never resolves one of its own: the judge's is the one)."""
        return cls(matmul="tf32" if environ.get(TRITON_ENV, "ieee") == "tf32" else "ieee",
                   conv="ieee" if environ.get(CONV_ENV, "1") == "0" else "tf32")

    def apply_to_torch(self) -> None:
        """PyTorch's switches of this process set to the policy (the worker does this once, before any
        candidate is imported, so a kernel reading them sees what the user runs with)."""
        import torch

        torch.backends.cuda.matmul.allow_tf32 = self.matmul_tf32
        torch.backends.cudnn.allow_tf32 = self.conv_tf32


def _word(mode: Mode) -> str:
    return "TF32" if mode == "tf32" else "IEEE"


def _switch(kind: str, mode: Mode, source: Source) -> str:
    """The switch that set one kind, in the user's words."""
    if source == "env":
        return f"{MATMUL_ENV if kind == 'matmul' else CONV_ENV}={'1' if mode == 'tf32' else '0'}"
    if source == "option":
        return f"--precision {kind}={mode}"
    return "PyTorch's default"


def _sentence(kind: str, mode: Mode, source: Source) -> str:
    what = "float32 matmuls" if kind == "matmul" else "float32 convolutions"
    torch_switch = "torch.backends.cuda.matmul.allow_tf32" if kind == "matmul" else "torch.backends.cudnn.allow_tf32"
    how = ("may use one TF32 product in eager, torch.compile and the kernel" if mode == "tf32"
           else "IEEE-class (IEEE FP32, or three TF32 products) in eager, torch.compile and the kernel")
    where = _switch(kind, mode, source)
    if source == "pytorch-default":
        where += f", {torch_switch} = {mode == 'tf32'}"
    elif source == "option":
        where += f", or {OPTION_ENV}"
    return f"{what} {how} ({where})"


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


def _env_switch(name: str, default: str) -> bool:
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
            tf32 = _env_switch(env, default)  # a bad value is an error even where it changes nothing
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
