"""What the reference returns, learnt by running it (not by tracing): per case dtype its outputs'
dtypes and per test case their shapes (on shape-only meta tensors, a small CPU run where an op has
no meta kernel), and for each output the rule its dtype follows across the inputs' dtypes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Union

import torch

from kernelgen.spec import FLOAT_DTYPES, OperatorSpec, draw_inputs


# --- how an output's dtype follows the inputs' (the same for every case dtype of the spec) --------
@dataclass(frozen=True)
class LikeInput:
    """The output has the dtype of input `index` (x + bias: like x)."""

    index: int


@dataclass(frozen=True)
class FixedDtype:
    """The output always has this dtype (a comparison: bool; `.float()`: float32)."""

    dtype: str


@dataclass(frozen=True)
class Promoted:
    """The output has the dtype PyTorch promotes these inputs to (x + bias with x float16 and bias
    float32: float32). In the spec's cases they share one dtype, so this is LikeInput there."""

    indices: tuple[int, ...]


@dataclass(frozen=True)
class DtypeTable:
    """The output dtype per case dtype, when neither rule above fits."""

    by_case_dtype: dict[str, str]


DtypeRule = Union[LikeInput, FixedDtype, Promoted, DtypeTable]


def sample_inputs(spec: OperatorSpec, case: dict, dtype: str) -> list[torch.Tensor]:
    """Inputs drawn the way the harness draws them (each input's `init`), on the CPU: a trace must
    see the values the kernel will be checked on (integer ranges, masks)."""
    return draw_inputs(spec, case, dtype, 0, "cpu")


def _returns(ret: Any) -> list[torch.Tensor]:
    return list(ret) if isinstance(ret, (tuple, list)) else [ret]


def _run(spec: OperatorSpec, fn: Callable, case: dict, dtype: str) -> list[torch.Tensor]:
    from kernelgen.spec import torch_dtype

    args = [torch.empty(case[i.name], dtype=torch_dtype(spec.input_dtype(i, dtype)), device="meta") for i in spec.inputs]
    try:
        return _returns(fn(*args, **spec.param_defaults))
    except Exception:  # noqa: BLE001 - no meta kernel: a small real run on the CPU instead
        return _returns(fn(*sample_inputs(spec, case, dtype), **spec.param_defaults))


def output_dtypes(spec: OperatorSpec, fn: Callable) -> dict[str, list[str]]:
    """The reference's output dtypes per case dtype (on the first test case)."""
    case = spec.test_cases[0]
    return {d: [str(r.dtype).replace("torch.", "") for r in _run(spec, fn, case, d)] for d in spec.dtypes}


def output_shapes(spec: OperatorSpec, fn: Callable, case: dict) -> list[tuple[int, ...]]:
    """The reference's output shapes at one test case (in the spec's first dtype)."""
    return [tuple(r.shape) for r in _run(spec, fn, case, spec.dtypes[0])]


def case_dtype_inputs(spec: OperatorSpec) -> list[int]:
    """The inputs that take the case dtype (no dtype of their own in the spec)."""
    if not any(d in FLOAT_DTYPES for d in spec.dtypes):
        return []
    return [i for i, inp in enumerate(spec.inputs) if inp.dtype is None]


def promoting_inputs(spec: OperatorSpec, fn: Callable, n_outputs: int) -> list[set[int]] | None:
    """Per output, the inputs whose dtype PyTorch promotes into it: the reference is run with
    every case-dtype input in float16 but one in float32, and an output that turns float32
    follows that input too (x + bias: both inputs; rms_norm's `(...).to(x.dtype)`: x alone).
    A mix the reference refuses (a float16 @ float32 matmul) teaches nothing: PyTorch raises
    there too. None when the reference does not even run in float16."""
    free = case_dtype_inputs(spec)
    if len(free) < 2:
        return [set() for _ in range(n_outputs)]
    case = spec.test_cases[0]

    def dtypes(ret: Any) -> list[torch.dtype]:
        return [r.dtype for r in _returns(ret)]

    half = sample_inputs(spec, case, "float16")
    try:
        base = dtypes(fn(*half, **spec.param_defaults))
    except Exception:  # noqa: BLE001 - user code that cannot run in float16 on the CPU
        return None
    found: list[set[int]] = [set() for _ in range(n_outputs)]
    for j in free:
        mixed = [t.float() if i == j else t for i, t in enumerate(half)]
        try:
            outs = dtypes(fn(*mixed, **spec.param_defaults))
        except Exception:  # noqa: BLE001 - the reference refuses this mix
            continue
        for k, (b, o) in enumerate(zip(base, outs)):
            if b == torch.float16 and o == torch.float32:
                found[k].add(j)
    return found


def dtype_rule(spec: OperatorSpec, per_dtype: dict[str, list[str]], k: int, promoting: set[int]) -> DtypeRule:
    """The rule output k's dtype follows, from its dtype per case dtype and the inputs promoting into it."""
    outs = {d: v[k] for d, v in per_dtype.items()}
    for i, inp in enumerate(spec.inputs):
        if all(outs[d] == spec.input_dtype(inp, d) for d in outs):
            return Promoted(tuple(sorted(promoting | {i}))) if promoting - {i} else LikeInput(i)
    if len(set(outs.values())) == 1:
        return FixedDtype(next(iter(outs.values())))
    return DtypeTable(outs)
