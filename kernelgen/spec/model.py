"""The operator spec as typed objects: what a user's YAML means once it is validated.

`OperatorSpec` and its parts are pydantic models with `extra="forbid"`; `kernelgen.spec.load`
turns a file into one (or a `SpecError` listing every mistake). Nothing here reads files or
imports torch.
"""

from __future__ import annotations

import keyword
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from kernelgen.spec.init import parse_init
from kernelgen.spec.shapes import Case, eval_shape_expr

NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Names a spec may use for dtypes, mapped to torch attribute names (resolved lazily: importing
# torch costs ~1 s and `kernelgen validate` should not pay it before reporting a typo).
DTYPES: dict[str, str] = {
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float64": "float64",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "bool": "bool",
}
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
Category = Literal["pointwise", "broadcast", "reduction", "softmax", "normalization", "matmul", "other"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_identifier(v: str) -> str:
    if not IDENT_RE.match(v) or keyword.iskeyword(v):
        raise ValueError(f"{v!r} is not a Python identifier")
    return v


def _check_dtype(v: str) -> str:
    if v not in DTYPES:
        raise ValueError(f"unknown dtype {v!r}; known: {', '.join(DTYPES)}")
    return v


Identifier = Annotated[str, AfterValidator(_check_identifier)]
KnownDtype = Annotated[str, AfterValidator(_check_dtype)]


class InputSpec(_Strict):
    name: Identifier
    dtype: KnownDtype | None = None  # fixed dtype; None: the case dtype
    init: str = "randn"
    # Dims whose size the operator fixes (a Linear's features, a norm's shape, a class count): every test
    # and perf case gives them the same size and the judge's generated cases never change it, so a kernel
    # may be specialised to it; every other dim may vary from case to case.
    fixed_dims: list[int] = Field(default_factory=list)

    @field_validator("init")
    @classmethod
    def _init(cls, v: str) -> str:
        parse_init(v)
        return v


class ParamSpec(_Strict):
    name: Identifier
    type: Literal["float", "int", "bool"]
    default: float | int | bool

    @model_validator(mode="after")
    def _default_matches_type(self) -> "ParamSpec":
        ok = {
            "float": isinstance(self.default, (int, float)) and not isinstance(self.default, bool),
            "int": isinstance(self.default, int) and not isinstance(self.default, bool),
            "bool": isinstance(self.default, bool),
        }[self.type]
        if not ok:
            raise ValueError(f"default {self.default!r} is not a {self.type}")
        return self


class OutputSpec(_Strict):
    name: Identifier
    dtype: KnownDtype | None = None  # None: the reference decides


class ToleranceSpec(_Strict):
    atol: float = Field(gt=0)
    rtol: float = Field(gt=0)


# Defaults when a spec gives none. Offline kernels compute in float32 and round once, PyTorch may
# round intermediates, so a 1-ulp difference must pass: fp16 ulp at 1.0 is 9.8e-4, bf16 7.8e-3.
DEFAULT_TOLERANCES: dict[str, ToleranceSpec] = {
    "float64": ToleranceSpec(atol=1e-7, rtol=1e-7),
    "float32": ToleranceSpec(atol=1e-4, rtol=1e-4),
    "float16": ToleranceSpec(atol=1e-3, rtol=2e-3),
    "bfloat16": ToleranceSpec(atol=1e-2, rtol=1.6e-2),
}
_INT_TOLERANCE = ToleranceSpec(atol=1e-12, rtol=1e-12)

class OperatorSpec(_Strict):
    name: str
    description: str = ""
    category: Category = "other"
    inputs: list[InputSpec] = Field(min_length=1)
    params: list[ParamSpec] = Field(default_factory=list)
    outputs: list[OutputSpec] = Field(min_length=1)
    reference: str | None = None
    dtypes: list[str] = Field(min_length=1)
    test_cases: list[Case] = Field(min_length=1)
    perf_cases: list[Case] = Field(default_factory=list)
    perf_dtypes: list[str] = Field(default_factory=list)  # dtypes to time; empty: all of `dtypes`
    # The dtypes whose checks decide correct or not; the others are checked and reported beside them.
    # Empty: every dtype decides. A KernelBench problem's is its own (float32).
    primary_dtypes: list[str] = Field(default_factory=list)
    tolerance: dict[str, ToleranceSpec] = Field(default_factory=dict)
    flops: str | None = None  # expression over input shapes, e.g. "2 * a[0] * a[1] * b[1]"
    target_speedup: float | None = Field(default=None, gt=0)
    max_rounds: int = Field(default=5, ge=0, le=50)
    hints: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v) or keyword.iskeyword(v):
            raise ValueError(f"{v!r} must match [a-z][a-z0-9_]* (it becomes a file prefix and a function name)")
        return v

    @field_validator("dtypes")
    @classmethod
    def _dtypes(cls, v: list[str]) -> list[str]:
        bad = [d for d in v if d not in DTYPES]
        if bad:
            raise ValueError(f"unknown dtype(s) {', '.join(map(repr, bad))}; known: {', '.join(DTYPES)}")
        if len(set(v)) != len(v):
            raise ValueError("dtypes are listed more than once")
        return v

    @model_validator(mode="after")
    def _perf_dtypes_subset(self) -> "OperatorSpec":
        for field in ("perf_dtypes", "primary_dtypes"):
            extra = [d for d in getattr(self, field) if d not in self.dtypes]
            if extra:
                raise ValueError(f"{field} {extra} are not in dtypes {self.dtypes}")
        return self

    # --- derived views the rest of KernelGen uses -------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    @property
    def param_defaults(self) -> dict[str, float | int | bool]:
        return {p.name: p.default for p in self.params}

    @property
    def signature(self) -> str:
        """The entry function's parameter list, shared by the kernel and the baseline."""
        parts = self.input_names + [f"{p.name}={p.default!r}" for p in self.params]
        return ", ".join(parts)

    def tolerance_for(self, dtype: str) -> ToleranceSpec:
        if dtype in self.tolerance:
            return self.tolerance[dtype]
        return DEFAULT_TOLERANCES.get(dtype, _INT_TOLERANCE)

    def input_dtype(self, inp: InputSpec, case_dtype: str) -> str:
        return inp.dtype or case_dtype

    def flop_count(self, case: Case) -> int | None:
        if not self.flops:
            return None
        return int(eval_shape_expr(self.flops, case))

    @property
    def effective_perf_cases(self) -> list[Case]:
        return self.perf_cases or self.test_cases

    @property
    def effective_perf_dtypes(self) -> list[str]:
        return self.perf_dtypes or self.dtypes

    @property
    def deciding_dtypes(self) -> list[str]:
        """The dtypes whose checks decide the verdict (`primary_dtypes`, or every dtype)."""
        return self.primary_dtypes or self.dtypes

    def fixed_sizes(self) -> set[int]:
        """Every size a fixed dim has (in the first test case): the judge's generated cases keep them."""
        case = self.test_cases[0]
        return {case[i.name][d] for i in self.inputs for d in i.fixed_dims if d < len(case[i.name])}


