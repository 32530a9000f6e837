"""A plan run on inputs, in the replay worker: what the candidate's wrapper did on the device, without
its Python.

Every call allocates its buffers afresh (kept until the call returns, as the recording kept them),
poisoned with the judge's fill when a check asks (an element no launch wrote is then told apart),
filled where the wrapper filled them; copies and fills run as recorded; each launch calls the file's
@triton.jit function by name with the recorded grid, options and arguments, tensors rebuilt as views
of this call's storages. On a GPU, after a launch's first call has compiled it, later calls go
straight to Triton's launcher with the compiled kernel (as KernelGen's own lean wrappers do: Triton's
argument binding costs 10-20 us per launch), unless a pointer's 16-byte alignment, which Triton
specialises on, differs from the first call's. `ablate` skips every launch: the answer must then not
appear. Nothing here decides anything; the judge compares what comes back.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelgen.verify.plan import (Alloc, Copy, DescriptorArg, DtypeArg, Fill, JitArg, Launch, Plan, TensorArg, TupleArg,
                                   ValueArg, View)
from kernelgen.verify.poison import Fill as Poison
from kernelgen.verify.poison import poison


def _dtype(name: str) -> Any:
    return getattr(torch, name)


class _Lean:
    """A launch's compiled kernel, for Triton's launcher (GPU only)."""

    def __init__(self, compiled: Any, aligned: tuple[bool, ...]):
        self.run, self.function, self.packed = compiled.run, compiled.function, compiled.packed_metadata
        self.aligned = aligned


class Replay:
    """One plan, ready to run: its kernels looked up, each view's fastest way to be rebuilt chosen."""

    def __init__(self, plan: Plan, kernels: dict[str, Any], device: str):
        self.plan, self.device = plan, device
        self.kernels = kernels
        self.n_inputs = len(plan.inputs)
        self.base: dict[int, tuple[str, list[int], list[int]]] = {i: (v.dtype, v.shape, v.stride) for i, v in enumerate(plan.inputs)}
        for step in plan.steps:
            if isinstance(step, Alloc):
                self.base[step.storage] = (step.dtype, step.shape, step.stride)
        self.lean: dict[int, _Lean | None] = {}
        self.launches = len(plan.launches())
        self.check: Any = None  # check(step, args) before a launch's first call: the front end on the CPU
        self.checked: set[int] = set()

    # --- views --------------------------------------------------------------------------------------
    def view(self, storages: list[Any], v: View) -> Any:
        base = storages[v.storage]
        if v.offset == 0 and self.base.get(v.storage) == (v.dtype, v.shape, v.stride):
            return base  # the buffer itself, as allocated (or the input as given)
        if v.dtype == str(base.dtype).removeprefix("torch."):
            return torch.as_strided(base, v.shape, v.stride, v.offset)
        out = torch.empty(0, dtype=_dtype(v.dtype), device=base.device)
        return out.set_(base.untyped_storage(), v.offset, v.shape, v.stride)

    def arg(self, storages: list[Any], a: Any) -> Any:
        if isinstance(a, TensorArg):
            return self.view(storages, a.view)
        if isinstance(a, ValueArg):
            return a.value
        if isinstance(a, TupleArg):
            return tuple(self.arg(storages, x) for x in a.items)
        if isinstance(a, DtypeArg):
            import triton.language as tl

            return tl.dtype(a.name)
        if isinstance(a, JitArg):
            return self.kernels[a.name]
        assert isinstance(a, DescriptorArg)
        from triton.tools.tensor_descriptor import TensorDescriptor

        return TensorDescriptor(self.view(storages, a.base), a.shape, a.strides, a.block_shape, padding=a.padding)

    # --- one call ----------------------------------------------------------------------------------
    def run(self, inputs: list[Any], *, fill: Poison | None = None, ablate: bool = False) -> list[Any]:
        """The plan's outputs on `inputs` (this call's own buffers)."""
        storages: list[Any] = list(inputs)
        for i, step in enumerate(self.plan.steps):
            if isinstance(step, Launch):
                if not ablate:
                    self._launch(i, step, storages)
            elif isinstance(step, Alloc):
                t = torch.empty_strided(step.shape, step.stride, dtype=_dtype(step.dtype), device=self.device)
                if t.untyped_storage().nbytes() < step.nbytes:  # allocated otherwise: as many bytes as the wrapper had
                    t = torch.empty(step.nbytes, dtype=torch.uint8, device=self.device).view(_dtype(step.dtype))
                    t = t.as_strided(step.shape, step.stride, 0) if t.numel() else t
                if step.fill is not None:
                    t.fill_(step.fill)
                elif fill is not None and t.numel():
                    poison(torch.as_strided(t, (t.untyped_storage().nbytes() // t.element_size(),), (1,), 0), fill)
                storages.append(t)
            elif isinstance(step, Fill):
                self.view(storages, step.target).fill_(step.value)
            elif isinstance(step, Copy):
                self.view(storages, step.dst).copy_(self.view(storages, step.src))
        return [self.view(storages, v) for v in self.plan.outputs]

    def _launch(self, i: int, step: Launch, storages: list[Any]) -> None:
        args = [self.arg(storages, a) for a in step.args]
        lean = self.lean.get(i)
        if lean is not None and self._aligned(args) == lean.aligned:
            stream = _stream()
            lean.run(*step.grid, stream, lean.function, lean.packed, None, None, None, *args)
            return
        if self.check is not None and i not in self.checked:
            self.check(step, args)
            self.checked.add(i)
        try:
            compiled = self.kernels[step.kernel].run(*args, grid=tuple(step.grid), warmup=False, **step.options)
        except Exception as e:
            from triton.compiler.errors import CompilationError

            if isinstance(e, CompilationError):  # on a GPU, the compile is the front end's check
                from kernelgen.verify.replay.frontend import NotTriton

                raise NotTriton(f"{step.kernel} does not compile as Triton: {str(e).strip()[-800:]}") from None
            raise
        if i not in self.lean:
            self.lean[i] = _lean(compiled, self._aligned(args), len(args))

    @staticmethod
    def _aligned(args: list[Any]) -> tuple[bool, ...]:
        return tuple(a.data_ptr() % 16 == 0 for a in args if isinstance(a, torch.Tensor))


def _stream() -> Any:
    from triton.runtime import driver

    backend = driver.active
    return backend.get_current_stream(backend.get_current_device())


def _lean(compiled: Any, aligned: tuple[bool, ...], n_args: int) -> _Lean | None:
    """The launcher path for `compiled`, where Triton's launcher takes every argument in order (3.3+);
    None on the interpreter or a backend without a launcher class."""
    try:
        from triton.runtime import driver

        launcher = driver.active.launcher_cls
    except Exception:  # noqa: BLE001 - the interpreter: no driver, no launcher
        return None
    if compiled is None or not isinstance(launcher, type) or not isinstance(getattr(compiled, "run", None), launcher):
        return None
    signature = getattr(getattr(compiled, "src", None), "signature", None)
    if not isinstance(signature, dict) or len(signature) != n_args or any(not isinstance(k, str) for k in signature):
        return None
    return _Lean(compiled, aligned)
