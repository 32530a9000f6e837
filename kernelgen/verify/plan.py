"""A recorded call of a candidate kernel: what its wrapper did on the device, as data (issue 40).

The recording process (kernelgen.verify.record) runs the candidate's wrapper once per input layout and
writes down what reached the device: the buffers it allocated, the copies and fills it made, and each
Triton launch — which `@triton.jit` function of the file, its grid, options and arguments, tensors as
views of the call's inputs or of its own allocations. The replay process (kernelgen.verify.replay)
runs exactly that on the judge's inputs, with the file's `@triton.jit` functions and nothing else of
it. The judge validates a plan (`check_plan`) before any replay sees it: it came from the candidate's
process, so it is a claim, and only what it makes the replay compute is trusted.

Storages are numbered: the call's inputs first (0 .. n_inputs - 1, in the entry's argument order),
then each allocation in the order it was made. Every tensor is a `View` of one storage: dtype, shape,
stride and offset (in elements of its dtype), which covers every view, reshape, slice, broadcast and
dtype reinterpretation a wrapper can take without touching data.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelgen.verify.protocol import DTYPE_SIZES

# dtypes a plan may name: those that cross the boundary, and the 8-bit floats a kernel may view bytes as
PLAN_DTYPES = {**DTYPE_SIZES, "float8_e4m3fn": 1, "float8_e5m2": 1, "uint16": 2, "uint32": 4, "uint64": 8}
MAX_STEPS = 4096  # a wrapper with more device steps per call is not one a person wrote
MAX_GRID = (2**31 - 1, 65535, 65535)  # CUDA's grid limits
Scalar = Union[bool, int, float, str, None]


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class View(_Step):
    """A tensor: a view of storage `storage`."""

    storage: int
    dtype: str
    shape: list[int]
    stride: list[int]
    offset: int = 0  # in elements of `dtype`

    def span_bytes(self) -> int:
        """Bytes of the storage this view reaches, from its start (0 for an empty view)."""
        if any(d == 0 for d in self.shape):
            return 0
        last = self.offset + sum((d - 1) * s for d, s in zip(self.shape, self.stride))
        return (last + 1) * PLAN_DTYPES.get(self.dtype, 8)


class TensorArg(_Step):
    kind: Literal["tensor"] = "tensor"
    view: View


class ValueArg(_Step):
    """A number, a string or None, passed as it was (an int keeps Triton's specialisation on it)."""

    kind: Literal["value"] = "value"
    value: Scalar


class DtypeArg(_Step):
    """A Triton dtype passed as a constexpr (`OUT: tl.constexpr = tl.float16`), by its name ("fp16")."""

    kind: Literal["dtype"] = "dtype"
    name: str


class JitArg(_Step):
    """Another @triton.jit function of the file passed as a constexpr, by its name."""

    kind: Literal["jit"] = "jit"
    name: str


class DescriptorArg(_Step):
    """A host-side tensor descriptor (triton.tools.tensor_descriptor.TensorDescriptor) over a view."""

    kind: Literal["descriptor"] = "descriptor"
    base: View
    shape: list[int]
    strides: list[int]
    block_shape: list[int]
    padding: str = "zero"


class TupleArg(_Step):
    kind: Literal["tuple"] = "tuple"
    items: list["Arg"]


Arg = Annotated[Union[TensorArg, ValueArg, DtypeArg, JitArg, DescriptorArg, TupleArg], Field(discriminator="kind")]
TupleArg.model_rebuild()


class Alloc(_Step):
    """A new buffer: `storage` is its number; empty (poisoned by the judge in checks) or filled."""

    op: Literal["alloc"] = "alloc"
    storage: int
    nbytes: int
    dtype: str  # what the wrapper allocated it as: the poison's pattern
    shape: list[int]
    stride: list[int]
    fill: Scalar = None  # None: empty; else every element set to this value (zeros, ones, full)


class Fill(_Step):
    op: Literal["fill"] = "fill"
    target: View
    value: Scalar


class Copy(_Step):
    """dst.copy_(src): same dtype (a cast is arithmetic); src broadcast to dst's shape as copy_ does."""

    op: Literal["copy"] = "copy"
    dst: View
    src: View


class Launch(_Step):
    op: Literal["launch"] = "launch"
    kernel: str  # the name of a module-level @triton.jit function of the file
    grid: list[int]  # 3 dims
    args: list[Arg]  # every parameter of the function, in order (constexprs and defaults included)
    params: list[str] = Field(default_factory=list)  # their names, as the recording saw them (for people)
    options: dict[str, Scalar] = Field(default_factory=dict)  # num_warps, num_stages, ...

    def describe(self) -> str:
        """`_k grid=(64, 1, 1) BLOCK=1024 num_warps=4`: what decides a launch's speed besides its data."""
        consts = [f"{p}={a.value}" for p, a in zip(self.params, self.args) if isinstance(a, ValueArg) and p.isupper()]
        consts += [f"{k}={v}" for k, v in sorted(self.options.items())]
        return " ".join([f"{self.kernel} grid=({', '.join(map(str, self.grid))})", *consts])


Step = Annotated[Union[Alloc, Fill, Copy, Launch], Field(discriminator="op")]


class Plan(_Step):
    inputs: list[View]  # the inputs as the recording saw them (storage i is input i)
    steps: list[Step]
    outputs: list[View]
    notes: list[str] = Field(default_factory=list)  # e.g. autotune resolved to its first config on the interpreter

    def launches(self) -> list[Launch]:
        return [s for s in self.steps if isinstance(s, Launch)]

    def same_as(self, other: "Plan") -> bool:
        return self.model_dump(exclude={"notes"}) == other.model_dump(exclude={"notes"})

    def digest(self) -> str:
        import hashlib

        return hashlib.sha256(json.dumps(self.model_dump(exclude={"notes"}), sort_keys=True).encode()).hexdigest()[:16]


class PlanError(Exception):
    """A plan that does not hold together (what the recording process sent is not one the judge replays)."""


def parse_plan(data: Any) -> Plan:
    """The plan a recording process sent, validated (pydantic), or PlanError."""
    try:
        return Plan.model_validate(data)
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        raise PlanError(f"a plan that does not validate: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def check_plan(plan: Plan, kernels: set[str], input_bytes: list[int]) -> None:
    """The judge's check of a plan before it is replayed: every storage used after it exists, every view
    inside its storage, every launch of a function the replay defines, grids and sizes sane. PlanError
    names the first step that fails."""
    if len(plan.inputs) != len(input_bytes):
        raise PlanError(f"the plan has {len(plan.inputs)} inputs, the call {len(input_bytes)}")
    if len(plan.steps) > MAX_STEPS:
        raise PlanError(f"{len(plan.steps)} steps in one call (at most {MAX_STEPS})")
    sizes = list(input_bytes)
    for i, step in enumerate(plan.steps):
        where = f"step {i} ({step.op})"
        if isinstance(step, Alloc):
            if step.storage != len(sizes) or step.nbytes < 0 or step.dtype not in PLAN_DTYPES:
                raise PlanError(f"{where}: storage {step.storage} out of order, or a bad size or dtype")
            _check_view(View(storage=step.storage, dtype=step.dtype, shape=step.shape, stride=step.stride), [*sizes, step.nbytes], where)
            sizes.append(step.nbytes)
        elif isinstance(step, Fill):
            _check_view(step.target, sizes, where)
        elif isinstance(step, Copy):
            _check_view(step.dst, sizes, where)
            _check_view(step.src, sizes, where)
            if step.dst.dtype != step.src.dtype:
                raise PlanError(f"{where}: a copy from {step.src.dtype} to {step.dst.dtype} is arithmetic")
        else:
            _check_launch(step, kernels, sizes, where)
    if not plan.launches():
        raise PlanError("the plan launches no Triton kernel")
    for j, out in enumerate(plan.outputs):
        _check_view(out, sizes, f"output {j}")
        if out.storage < len(input_bytes):
            raise PlanError(f"output {j} is a view of input {out.storage}, not a buffer of the call")


def _check_view(view: View, sizes: list[int], where: str) -> None:
    if not 0 <= view.storage < len(sizes):
        raise PlanError(f"{where}: storage {view.storage} does not exist at that point")
    if view.dtype not in PLAN_DTYPES or len(view.shape) != len(view.stride) or len(view.shape) > 8:
        raise PlanError(f"{where}: a view with dtype {view.dtype!r}, shape {view.shape} and stride {view.stride}")
    if any(d < 0 for d in view.shape) or any(s < 0 for s in view.stride) or view.offset < 0:
        raise PlanError(f"{where}: negative sizes, strides or offset")
    if view.span_bytes() > sizes[view.storage]:
        raise PlanError(f"{where}: a view reaching byte {view.span_bytes()} of a {sizes[view.storage]}-byte storage")


def _check_launch(step: Launch, kernels: set[str], sizes: list[int], where: str) -> None:
    if step.kernel not in kernels:
        raise PlanError(f"{where}: {step.kernel!r} is not a module-level @triton.jit function of the file")
    if len(step.grid) != 3 or any(not 0 <= g <= m for g, m in zip(step.grid, MAX_GRID)):
        raise PlanError(f"{where}: grid {step.grid} is outside what a device launches")
    for arg in _flat(step.args):
        if isinstance(arg, TensorArg):
            _check_view(arg.view, sizes, where)
        elif isinstance(arg, DescriptorArg):
            _check_view(arg.base, sizes, where)
        elif isinstance(arg, JitArg) and arg.name not in kernels:
            raise PlanError(f"{where}: passes {arg.name!r}, which is not a @triton.jit function of the file")
    for name, value in step.options.items():
        if not name.isidentifier() or name.startswith("_"):
            raise PlanError(f"{where}: launch option {name!r}")


def _flat(args: list[Any]) -> list[Any]:
    out: list[Any] = []
    for a in args:
        out += _flat(a.items) if isinstance(a, TupleArg) else [a]
    return out
