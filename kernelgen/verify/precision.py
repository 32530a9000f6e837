"""The float32 precision policy: whether a float32 matmul and a float32 convolution may multiply in one
TF32 product (a 10-bit mantissa) or must stay IEEE-class (IEEE FP32, or three TF32 products: tf32x3),
and where each choice came from. One typed object, read by everything that depends on it:

- the judge: eager and torch.compile of the reference run under it (never the float64 truth), so a
  kernel is held to eager's own error in the precision the user runs with (kernelgen.verify.judge.oracle);
- the worker: the candidate sees PyTorch's switches set to it (`torch.backends.cuda.matmul.allow_tf32`,
  `torch.backends.cudnn.allow_tf32`) and Triton's float32 `tl.dot` default follows the matmul mode
  (`TRITON_F32_DEFAULT`), through the environment the judge gives it (`worker_env`);
- the ceilings: a float32 case may reach the TF32 rate only where one of its products may use TF32;
- every report: bench, the optimization log, the batch report (`label`).

PyTorch's own defaults differ per kind and are this policy's: float32 matmuls IEEE
(`torch.backends.cuda.matmul.allow_tf32` False, `torch.get_float32_matmul_precision()` "highest"),
float32 convolutions TF32 (`torch.backends.cudnn.allow_tf32` True), which KernelBench's harness leaves
as they are. Both sides import this module (the worker reads the environment the judge wrote); it runs
nothing and imports no torch at import time.
"""

from __future__ import annotations

from typing import Literal, Mapping

from pydantic import BaseModel, ConfigDict

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
