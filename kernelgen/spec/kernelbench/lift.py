"""A problem's module and inputs, observed on the meta device: what `get_inputs()` returns and how each
tensor was drawn, and every parameter and buffer of `Model(*get_init_inputs())` lifted into an input
(named from its state-dict key, drawn the way the module initialises it)."""

from __future__ import annotations

import inspect
import keyword
import re
from dataclasses import dataclass, field
from typing import Any

from kernelgen.errors import ProblemFileError
from kernelgen.spec.init import InitPlan
from kernelgen.spec.kernelbench.record import Opaque, Recorder
from kernelgen.spec.kernelbench.source import ProblemCode, ProblemSource, problem_code, where


@dataclass(frozen=True)
class TensorInput:
    name: str  # the spec input's name
    shape: list[int]
    dtype: str  # torch's name: float32, int64, bool
    init: InitPlan
    key: str = ""  # state-dict key of a lifted parameter or buffer, or a plain attribute's path ("" for a forward input)
    kind: str = "input"  # input | parameter | buffer | attribute


@dataclass(frozen=True)
class ScalarInput:
    """A plain number get_inputs() passes to forward (`A * s`): a spec param, its default the value
    KernelBench passes (or, where get_inputs() draws it anew each call, the problem's own constant)."""

    name: str
    type: str  # float | int | bool: the spec param's type
    value: float | int | bool
    how: str  # how the value was chosen, for the spec's comment


@dataclass
class Observation:
    """One run of the problem's code (at KernelBench's sizes, or shrunk ones)."""

    init: list[Any]  # get_init_inputs()
    inputs: list[TensorInput]  # forward's tensors, then the lifted parameters and buffers
    model: Any  # the module, on the meta device
    training: bool
    scalars: list[ScalarInput] = field(default_factory=list)  # forward's plain numbers: the spec's params
    forward: list[str] = field(default_factory=list)  # forward's arguments in order (tensors and scalars)
    schedules: bool = False  # the constructor reads numbers of a torch.linspace / logspace (built on the CPU)
    overrides: dict[str, Any] = field(default_factory=dict)  # the sizes it was run at, where not the file's own

    @property
    def case(self) -> dict[str, list[int]]:
        return {t.name: t.shape for t in self.inputs}


def _dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def _identifier(text: str) -> str:
    name = re.sub(r"\W", "_", text)
    if not name or name[0].isdigit() or keyword.iskeyword(name):
        name = f"t_{name}"
    return name


def _forward_names(model_cls: type, n: int) -> list[str]:
    try:
        params = list(inspect.signature(model_cls.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    named = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [named[i] if i < len(named) else f"arg{i}" for i in range(n)]


def _call(src: ProblemSource, fn: Any, what: str) -> Any:
    try:
        return fn()
    except ProblemFileError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code failing is reported with its line
        raise ProblemFileError(src.path, f"{what} raises {type(e).__name__}: {e}{where(e, src)}") from None


def _plan(src: ProblemSource, rec: Recorder, t: Any, what: str) -> InitPlan:
    got = rec.final(t)
    if isinstance(got, Opaque):
        raise ProblemFileError(src.path, f"{what} is made in a way no spec `init` can draw ({got.why}); a spec's inputs "
                                         "are drawn fresh for every check, so KernelGen must know how")
    return got


def _plain_tensors(model: Any) -> list[tuple[str, Any]]:
    """(dotted path, tensor) of every tensor a module holds as a plain attribute (neither an
    nn.Parameter nor a registered buffer)."""
    import torch

    found = []
    for prefix, module in model.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, torch.Tensor):
                found.append((f"{prefix}.{attr}" if prefix else attr, value))
    return found


def observe(src: ProblemSource, overrides: dict[str, Any] | None = None) -> Observation:
    """Run the problem (sizes in `overrides` replaced) on the meta device and read what it makes."""
    import torch

    code: ProblemCode = problem_code(src, src.run(overrides))
    init = _call(src, code.get_init_inputs, "get_init_inputs()")
    if not isinstance(init, (list, tuple)):
        raise ProblemFileError(src.path, f"get_init_inputs() returns a {type(init).__name__}, not a list of Model's arguments")
    if any(isinstance(v, torch.Tensor) for v in init):
        raise ProblemFileError(src.path, "get_init_inputs() returns a tensor: only plain values (numbers, shapes, flags) "
                                         "can be written into the spec's reference")
    with Recorder() as rec:
        raw = _call(src, code.get_inputs, "get_inputs()")
        model = _call(src, lambda: code.model(*init), "Model(*get_init_inputs())")
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ProblemFileError(src.path, "get_inputs() must return a non-empty list of tensors")
    names = _forward_names(code.model, len(raw))
    inputs, scalars = [], []
    for i, (name, t) in enumerate(zip(names, raw)):
        if isinstance(t, (bool, int, float)):
            scalars.append(_scalar(src, code, name, i, t))
            continue
        if not isinstance(t, torch.Tensor):
            raise ProblemFileError(src.path, f"get_inputs() returns a {type(t).__name__} ({t!r}) as input {i} (`{name}`): "
                                             "only tensors and plain numbers can be a kernel's inputs")
        inputs.append(TensorInput(name, list(t.shape), _dtype_name(t), _plan(src, rec, t, f"input {i} (`{name}`)")))
    if not inputs:
        raise ProblemFileError(src.path, "get_inputs() returns no tensor: a kernel needs at least one tensor input")
    taken = set(names)
    buffers = dict(model.named_buffers())
    tensors = dict(model.state_dict(keep_vars=True))
    tensors.update({k: v for k, v in buffers.items() if k not in tensors})  # non-persistent buffers too
    # A plain tensor attribute (a GRU's `self.h0 = torch.randn(...)`) is passed in like a buffer:
    # torch.func.functional_call sets it for the call and puts the module's own back after, so a forward
    # that reassigns it (a vanilla RNN's `self.hidden = tanh(...)`) starts every call from the input.
    attributes = {path: t for path, t in _plain_tensors(model) if path not in tensors}
    tensors.update(attributes)
    for key, t in tensors.items():
        kind = "attribute" if key in attributes else "buffer" if key in buffers else "parameter"
        name = _identifier(key.replace(".", "_"))
        while name in taken:
            name += f"_{kind}"
        taken.add(name)
        plan = _plan(src, rec, t, f"Model's {kind} `{key}`")
        inputs.append(TensorInput(name, list(t.shape), _dtype_name(t), plan, key=key, kind=kind))
    return Observation(init=list(init), inputs=inputs, model=model, training=bool(model.training), scalars=scalars,
                       forward=names, schedules=rec.schedules, overrides=dict(overrides or {}))


def _scalar(src: ProblemSource, code: ProblemCode, name: str, i: int, value: bool | int | float) -> ScalarInput:
    """Input i of get_inputs(), a plain number, as a spec param. get_inputs() runs again to see whether it
    draws the number anew (`random.uniform(...)`): a kernel is checked against one value, so a drawn one
    takes the problem's module-level constant of the same name, and without one the file is refused."""
    import random

    import torch

    kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "float"
    state = random.getstate()
    try:
        random.seed(12345)
        torch.manual_seed(12345)
        with torch.device("meta"):
            again = _call(src, code.get_inputs, "get_inputs()")
    finally:
        random.setstate(state)
    if again[i] == value:
        return ScalarInput(name, kind, value, f"get_inputs() passes {value!r}")
    constant = src.constants.get(name)
    if isinstance(constant, (bool, int, float)) and type(constant) is type(value):
        return ScalarInput(name, kind, constant, f"get_inputs() draws it anew each call ({value!r}, then {again[i]!r}); "
                                                 f"the problem's constant `{name} = {constant!r}` is used")
    raise ProblemFileError(src.path, f"get_inputs() draws input {i} (`{name}`) anew each call ({value!r}, then {again[i]!r}) "
                                     f"and the file has no module-level constant `{name}` to take instead: a kernel is "
                                     "checked against one value; set it to a number")


def mutated(obs: Observation) -> set[str]:
    """The lifted tensors the forward writes in place (training-mode BatchNorm's running statistics),
    found by running it once on meta tensors and reading each op's schema: which arguments it writes."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    args = [torch.empty(t.shape, dtype=getattr(torch, t.dtype), device="meta") for t in obs.inputs]
    lifted = {t.key: a for t, a in zip(obs.inputs, args) if t.key}
    given = {t.name: a for t, a in zip(obs.inputs, args) if not t.key} | {s.name: s.value for s in obs.scalars}
    forward = [given[n] for n in obs.forward]
    written: set[int] = set()

    class Writes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            kwargs = kwargs or {}
            schema = func._schema.arguments
            given = list(args) + [kwargs.get(a.name) for a in schema[len(args):]]
            named = {a.name: v for a, v in zip(schema, given)}
            # native_batch_norm's schema does not mark the running statistics it updates in training mode
            stats = "batch_norm" in func.__name__ and named.get("training") is True
            for a, v in zip(schema, given):
                writes = a.alias_info is not None and a.alias_info.is_write
                if isinstance(v, torch.Tensor) and (writes or (stats and a.name in ("running_mean", "running_var"))):
                    written.add(id(v))
            return func(*args, **kwargs)

    try:
        with Writes():
            torch.func.functional_call(obs.model, lifted, tuple(forward))
    except Exception:  # noqa: BLE001 - an op without a meta kernel: nothing learned, the CPU run checks the rest
        return set()
    return {k for k, a in lifted.items() if id(a) in written}
