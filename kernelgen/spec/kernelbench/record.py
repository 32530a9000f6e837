"""How each tensor of a KernelBench problem was drawn, learned by running its code on the meta device.

`get_inputs()` and `Model(*get_init_inputs())` run under a `Recorder`: every tensor is created on
the meta device (a 6 GB input costs nothing) while two modes watch what made it — the dispatch mode
sees every ATen op (`rand`, `randint`, `uniform_` with the bound nn.init computed, `_softmax`,
`triu`, `mul` by a number...), the function mode the constants ATen never sees (`torch.tensor(2.0)`).
Each tensor gets a provenance: an `InitPlan` (kernelgen.spec.init) when the way it was drawn can be
said in a spec's `init`, else an `Opaque` naming the op that cannot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from kernelgen.spec.init import InitPlan


@dataclass(frozen=True)
class Opaque:
    """A tensor whose values no `init` can describe, and the op that made it so."""

    why: str


@dataclass(frozen=True)
class TransposeOf:
    """A view swapping the last two dims of another tensor (`A.T`), kept only to see `A + A.T`."""

    base: int  # id() of the tensor viewed


Provenance = Union[InitPlan, Opaque, TransposeOf]

# ops that give the same values (a copy, a view of all of them, a device move)
_SAME = {"clone", "detach", "alias", "lift_fresh", "lift_fresh_copy", "contiguous", "_to_copy", "to"}
# views that reshape without reordering: an iid draw stays the same draw, a shaped step would not
_RESHAPE = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "flatten", "expand"}
_SHAPED_STEPS = ("softmax", "triu", "tril", "add_transpose")
_FACTORIES = {"rand": "rand", "randn": "randn", "zeros": "zeros", "ones": "ones", "rand_like": "rand",
              "randn_like": "randn", "zeros_like": "zeros", "ones_like": "ones"}


_MATRIX_STEPS = ("triu", "tril", "add_transpose")  # steps on the last two dims, whatever leads them


def _same_matrices(p: Provenance, before: Any, after: Any) -> bool:
    """A reshape that only adds or drops leading dims of a triangle or a symmetric matrix: the same
    draw at the new shape (MinGPT's causal mask, `tril(ones(n, n)).view(1, 1, n, n)`)."""
    return (isinstance(p, InitPlan) and all(s[0] in _MATRIX_STEPS for s in p.steps if s[0] in _SHAPED_STEPS)
            and isinstance(after, torch.Tensor) and before.dim() >= 2 and after.dim() >= 2
            and tuple(after.shape[-2:]) == tuple(before.shape[-2:]))


def _with_step(p: Provenance, name: str, args: tuple[Any, ...] = ()) -> Provenance:
    if not isinstance(p, InitPlan):
        return p if isinstance(p, Opaque) else Opaque(name)
    if name == "affine" and p.steps and p.steps[-1][0] == "affine":  # (x*a1+b1)*a2+b2 is one affine
        (a1, b1), (a2, b2) = _ab(p.steps[-1][1]), _ab(args)
        return InitPlan(p.generator, p.args, p.steps[:-1] + (("affine", (a1 * a2, b1 * a2 + b2)),))
    return InitPlan(p.generator, p.args, p.steps + ((name, args),))


def _ab(args: tuple[Any, ...]) -> tuple[float, float]:
    return float(args[0]), float(args[1]) if len(args) > 1 else 0.0


def canonical(plan: InitPlan) -> InitPlan:
    """The plainest spelling: `randn | affine(0.02)` is `normal(0, 0.02)`, `full(1)` is `ones`."""
    gen, args, steps = plan.generator, plan.args, list(plan.steps)
    while steps and steps[0][0] == "affine":
        a, b = _ab(steps[0][1])
        if gen == "randn" and a > 0:
            gen, args = "normal", (b, a)
        elif gen == "normal" and a > 0:
            gen, args = "normal", (args[0] * a + b, args[1] * a)
        elif gen == "rand" and a > 0:
            gen, args = "uniform", (b, a + b)
        elif gen == "uniform" and a > 0:
            gen, args = "uniform", (args[0] * a + b, args[1] * a + b)
        elif gen in ("zeros", "ones", "full"):
            v = {"zeros": 0.0, "ones": 1.0}.get(gen, args[0] if args else 0.0)
            gen, args = "full", (v * a + b,)
        else:
            break
        steps.pop(0)
    steps = [(n, _short_affine(x) if n == "affine" else x) for n, x in steps]
    if gen == "uniform" and args == (0.0, 1.0):
        gen, args = "rand", ()
    if gen == "normal" and args == (0.0, 1.0):
        gen, args = "randn", ()
    if gen == "full" and args and args[0] in (0.0, 1.0):
        gen, args = ("zeros" if args[0] == 0.0 else "ones"), ()
    return InitPlan(gen, tuple(args), tuple(steps))


def _short_affine(args: tuple[Any, ...]) -> tuple[float, ...]:
    a, b = _ab(args)
    return (a, b) if b else (a,)


def _flat(data: Any) -> list[float] | None:
    """The numbers of a constant (a number, nested lists of them); None for anything else."""
    if isinstance(data, (bool, int, float)):
        return [float(data)]
    if isinstance(data, (list, tuple)):
        out: list[float] = []
        for d in data:
            inner = _flat(d)
            if inner is None:
                return None
            out += inner
        return out
    return None


_UNARY = ("log", "exp", "sqrt", "rsqrt", "reciprocal", "abs", "neg", "log1p", "expm1", "sigmoid", "tanh")
_SCHEDULES = (torch.linspace, torch.logspace)
_SCHEDULE_CAP = 1 << 16  # elements: a decay schedule over layers, never a tensor the kernel reads


def _function_of_constant(name: str, p: Provenance) -> InitPlan | None:
    """A function of one constant is a constant (SwinV2's logit_scale: log(10 * ones(heads, 1, 1)))."""
    constant = canonical(p) if isinstance(p, InitPlan) else None
    if name not in _UNARY or constant is None or constant.generator not in ("full", "ones", "zeros") or constant.steps:
        return None
    value = {"ones": 1.0, "zeros": 0.0}.get(constant.generator, constant.args[0] if constant.args else 0.0)
    return InitPlan("full", (float(getattr(torch, name)(torch.tensor(value, dtype=torch.float64))),))


def _small_schedule(func: Any, args: tuple, kwargs: dict) -> bool:
    steps = args[2] if len(args) > 2 else kwargs.get("steps")
    return isinstance(steps, int) and 0 <= steps <= _SCHEDULE_CAP


class _Constants(TorchFunctionMode):
    """`torch.tensor(2.0)` builds its tensor below ATen's view: read the value here."""

    def __init__(self, recorder: "Recorder") -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if func in _SCHEDULES and "device" not in kwargs and _small_schedule(func, args, kwargs):
            # numbers for the constructor itself (Swin's `[x.item() for x in torch.linspace(0, rate, depth)]`):
            # on the CPU, as meta tensors hold no values; the reference builds Model the same way
            self.recorder.schedules = True
            return func(*args, **kwargs, device="cpu")
        out = func(*args, **kwargs)
        if func in (torch.tensor, torch.as_tensor, torch.scalar_tensor) and isinstance(out, torch.Tensor) and args:
            values = _flat(args[0])
            if values and all(v == values[0] for v in values):
                self.recorder.note(out, InitPlan("full", (values[0],)))
            else:
                self.recorder.note(out, Opaque(f"torch.{func.__name__} of a constant with several values"))
        return out


class _Ops(TorchDispatchMode):
    def __init__(self, recorder: "Recorder") -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        prov = self.recorder.derive(name, args, kwargs, out)
        if prov is not None:
            target = args[0] if name.endswith("_") and args and isinstance(args[0], torch.Tensor) else out
            if isinstance(target, torch.Tensor):
                self.recorder.note(target, prov, in_place=target is not out or name.endswith("_"))
        return out


class Recorder:
    """`with Recorder() as rec:` run the problem's code; `rec.provenance(t)` says how `t` was drawn."""

    def __init__(self) -> None:
        self._by_id: dict[int, Provenance] = {}
        self._by_storage: dict[int, Provenance] = {}
        self._alive: list[torch.Tensor] = []  # ids and storages stay unique while recording
        self._stack: list[Any] = []
        self.schedules = False  # torch.linspace / logspace ran on the CPU for the constructor

    def __enter__(self) -> "Recorder":
        self._stack = [torch.device("meta"), _Constants(self), _Ops(self)]
        for ctx in self._stack:
            ctx.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for ctx in reversed(self._stack):
            ctx.__exit__(*exc)

    @staticmethod
    def _storage(t: torch.Tensor) -> int | None:
        try:
            return t.untyped_storage()._cdata
        except (RuntimeError, NotImplementedError):
            return None

    @staticmethod
    def _whole(t: torch.Tensor) -> bool:
        try:
            return t.storage_offset() == 0 and t.numel() * t.element_size() == t.untyped_storage().nbytes()
        except (RuntimeError, NotImplementedError):
            return False

    def note(self, t: torch.Tensor, prov: Provenance, *, in_place: bool = False) -> None:
        self._alive.append(t)
        key = self._storage(t)
        if in_place and not self._whole(t):  # part of a tensor written: the whole is no draw any more
            prov = Opaque(f"{getattr(prov, 'why', 'a write')} into part of a tensor")
            if key is not None:
                self._by_storage[key] = prov
            return
        self._by_id[id(t)] = prov
        if key is not None and self._whole(t) and not isinstance(prov, TransposeOf):
            self._by_storage[key] = prov

    def provenance(self, t: torch.Tensor) -> Provenance:
        if id(t) in self._by_id:
            return self._by_id[id(t)]
        key = self._storage(t)
        if key is not None and key in self._by_storage and self._whole(t):
            return self._by_storage[key]
        return Opaque("made by code KernelGen did not see")

    def final(self, t: torch.Tensor) -> InitPlan | Opaque:
        """How `t` was drawn, as an init (canonical spelling), or why it cannot be said."""
        p = self.provenance(t)
        if isinstance(p, TransposeOf):
            return Opaque("a transposed view (its layout is not the draw's)")
        return canonical(p) if isinstance(p, InitPlan) else p

    def _of(self, x: Any) -> Provenance | None:
        return self.provenance(x) if isinstance(x, torch.Tensor) else None

    def derive(self, name: str, args: tuple, kwargs: dict, out: Any) -> Provenance | None:  # noqa: C901 - one table
        """The provenance of `out` (or, for an in-place op, of args[0]) after op `name`."""
        a0 = self._of(args[0]) if args else None
        if name in _FACTORIES:
            return InitPlan(_FACTORIES[name])
        if name == "randint":
            lo, hi = (args[0], args[1]) if len(args) >= 3 or (len(args) == 2 and not isinstance(args[1], (list, tuple))) else (0, args[0])
            return InitPlan("randint", (float(lo), float(hi)))
        if name in ("full", "full_like"):
            return InitPlan("full", (float(args[1]),))
        if name == "scalar_tensor":
            return InitPlan("full", (float(args[0]),))
        if name.startswith("empty") or name == "new_empty":
            # nn.init.trunc_normal_ and orthogonal_ do nothing on the meta device: their tensors stay empty here
            return Opaque("torch.empty, never filled where KernelGen could see it (nn.init.trunc_normal_ and "
                          "orthogonal_ do nothing on the meta device)")
        if name == "uniform_":
            lo, hi = float(args[1]) if len(args) > 1 else kwargs.get("from", 0.0), float(args[2]) if len(args) > 2 else kwargs.get("to", 1.0)
            return InitPlan("uniform", (lo, hi))
        if name == "normal_":
            m, s = float(args[1]) if len(args) > 1 else kwargs.get("mean", 0.0), float(args[2]) if len(args) > 2 else kwargs.get("std", 1.0)
            return InitPlan("normal", (m, s))
        if name == "fill_":
            v = args[1]
            if isinstance(v, torch.Tensor):
                p = self._of(v)
                return p if isinstance(p, InitPlan) and p.generator == "full" and not p.steps else Opaque("fill_ with a tensor")
            return InitPlan("full", (float(v),))
        if name == "zero_":
            return InitPlan("zeros")
        if name == "copy_":
            src = args[1]
            return self._of(src) if isinstance(src, torch.Tensor) and tuple(src.shape) == tuple(args[0].shape) else Opaque("copy_")
        if a0 is None:
            return Opaque(f"aten.{name}")
        if name in _SAME:
            dtype = kwargs.get("dtype")
            if dtype is torch.bool:
                return _with_step(a0, "bool")
            if dtype is not None and not dtype.is_floating_point and args[0].dtype.is_floating_point:
                return Opaque("a cast of floats to integers")
            return a0
        if name in _RESHAPE:
            shaped = isinstance(a0, InitPlan) and any(s[0] in _SHAPED_STEPS for s in a0.steps)
            return Opaque(f"aten.{name} after a shaped step") if shaped and not _same_matrices(a0, args[0], out) else a0
        if name in ("t", "permute", "transpose", "numpy_T", "mT"):
            if args[0].dim() == 2 or (name == "transpose" and sorted(d % args[0].dim() for d in args[1:3]) == [args[0].dim() - 2, args[0].dim() - 1]):
                return TransposeOf(id(args[0]))
            return Opaque(f"aten.{name}")
        other = args[1] if len(args) > 1 else None
        alpha = float(kwargs.get("alpha", 1.0))
        if name in ("mul", "div", "add", "sub", "rsub") and isinstance(other, (int, float)) and not isinstance(other, bool):
            a, b = {"mul": (other, 0.0), "div": (1.0 / other, 0.0), "add": (1.0, other * alpha),
                    "sub": (1.0, -other * alpha), "rsub": (-alpha, other)}[name]
            return _with_step(a0, "affine", (a, b))
        if name == "neg":
            return _with_step(a0, "affine", (-1.0, 0.0))
        if name == "mul" and isinstance(other, torch.Tensor):
            for t, s in ((args[0], other), (other, args[0])):
                ps = self._of(s)
                if s.dim() == 0 and t.dim() > 0 and isinstance(ps, InitPlan) and not ps.steps and ps.generator in ("rand", "randn"):
                    return _with_step(self._of(t), "scale", (ps.generator,))
            return Opaque("a product of two drawn tensors")
        if name == "add" and isinstance(other, torch.Tensor) and alpha == 1.0:
            po = self._of(other)
            if isinstance(po, TransposeOf) and po.base == id(args[0]):
                return _with_step(a0, "add_transpose")
            if isinstance(a0, TransposeOf) and a0.base == id(other):
                return _with_step(po, "add_transpose")
            return Opaque("a sum of two drawn tensors")
        if name == "_softmax":
            return _with_step(a0, "softmax", (float(args[1]),))
        if name in ("triu", "tril"):
            k = float(args[1]) if len(args) > 1 else float(kwargs.get("diagonal", 0))
            return _with_step(a0, name, (k,) if k else ())
        return _function_of_constant(name, a0) or Opaque(f"aten.{name}")
