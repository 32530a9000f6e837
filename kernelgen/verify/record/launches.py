"""The Triton launches of a recorded call, as plan steps.

Two ways in, both hooked once per worker before any candidate is imported:
- `JITFunction.run` (the interpreter's `InterpretedFunction.run` on the CPU): the function, its bound
  arguments, its options and the grid it resolves (a grid function is wrapped, so the value Triton
  computed is the one recorded; autotune and heuristics have already chosen their constants by then);
- the GPU backend's launcher class, which a wrapper may call directly with a kernel it compiled
  earlier (the lean launch of KernelGen's own kernels): each compiled function is mapped back to the
  @triton.jit function and options that compiled it, and its positional arguments to its parameters.
A launch inside `run` reaches the launcher too and is recorded once. A launch with Python of the
candidate's inside it (pre-run hooks, launch hooks) or on another stream than the caller's is refused.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any

from kernelgen.verify.plan import Arg, DescriptorArg, DtypeArg, JitArg, Launch, TensorArg, TupleArg, ValueArg
from kernelgen.verify.record.calls import NOT_REPLAYABLE, Recording, active

_RUNNING = [0]  # JITFunction.run calls in progress: their launcher call is theirs
_COMPILED: dict[Any, tuple[str, list[str], dict[str, Any]]] = {}  # compiled function -> (kernel, params, options)
_LOCK = threading.Lock()
_INSTALLED = [False]


def _python_fn(kernel: Any) -> Any:
    fn = getattr(kernel, "fn", None)
    while fn is not None and not inspect.isfunction(fn):  # an autotuner or heuristics around a JIT function
        fn = getattr(fn, "fn", None)
    return fn


def _params(fn: Any) -> list[str]:
    return list(inspect.signature(fn).parameters)


def _stream_refused(rec: Recording, handle: Any = None) -> bool:
    if rec.stream is None:
        return False
    import torch

    now = torch.cuda.current_stream()
    if handle is not None:
        return handle != rec.stream.cuda_stream
    return now != rec.stream


def _arg(rec: Recording, value: Any, what: str) -> Arg:
    import torch
    import triton.language as tl

    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, torch.Tensor):
        return TensorArg(view=rec.view(value, what))
    if value is None or isinstance(value, (bool, int, float, str)):
        return ValueArg(value=value)
    if isinstance(value, tl.dtype):
        return DtypeArg(name=str(value))
    if isinstance(value, tuple):
        return TupleArg(items=[_arg(rec, v, what) for v in value])
    fn = _python_fn(value) if hasattr(value, "run") else None
    if fn is not None:
        return JitArg(name=fn.__name__)
    descriptor = _descriptor(rec, value, what)
    if descriptor is not None:
        return descriptor
    raise rec.refuse(NOT_REPLAYABLE, f"{what} is a {type(value).__name__}: a plan holds tensors, numbers, strings, "
                     "Triton dtypes, tuples, tensor descriptors and the file's own @triton.jit functions")


def _descriptor(rec: Recording, value: Any, what: str) -> DescriptorArg | None:
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:  # pragma: no cover - a Triton without host-side descriptors
        return None
    if not isinstance(value, TensorDescriptor):
        return None
    return DescriptorArg(base=rec.view(value.base, f"{what}'s base"), shape=[int(s) for s in value.shape],
                         strides=[int(s) for s in value.strides], block_shape=[int(b) for b in value.block_shape],
                         padding=str(getattr(value, "padding", "zero")))


def _options(rec: Recording, kernel: str, options: dict[str, Any]) -> dict[str, Any]:
    for name, value in options.items():
        if value is not None and not isinstance(value, (bool, int, float, str)):
            raise rec.refuse(NOT_REPLAYABLE, f"{kernel}'s launch option {name} is a {type(value).__name__}")
    return dict(options)


def _step(rec: Recording, kernel: str, params: list[str], values: list[Any], grid: Any, options: dict[str, Any]) -> Launch:
    if len(values) != len(params):
        raise rec.refuse(NOT_REPLAYABLE, f"{kernel} was launched with {len(values)} arguments for {len(params)} parameters")
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3:
        raise rec.refuse(NOT_REPLAYABLE, f"{kernel} was launched on a grid of {len(grid)} dims")
    args = [_arg(rec, v, f"argument {p!r} of {kernel}") for p, v in zip(params, values)]
    return Launch(kernel=kernel, grid=list((*grid, 1, 1)[:3]), args=args, params=list(params),
                  options=_options(rec, kernel, options))


def _recorded_run(rec: Recording, jit: Any, args: tuple, kwargs: dict, grid: Any, warmup: bool, original: Any) -> Any:
    fn = _python_fn(jit)
    name = fn.__name__
    if getattr(jit, "pre_run_hooks", None):
        raise rec.refuse("launch-hook", f"{name} carries pre-run hooks: Python of the candidate's runs inside the "
                         "launch, where it can compute what the kernel claims to")
    if _stream_refused(rec):
        raise rec.refuse("off-stream-launch", f"{name} was launched on a stream other than the caller's; timing "
                         "would not see it")
    params = _params(fn)
    bound = inspect.signature(fn).bind(*args, **{k: v for k, v in kwargs.items() if k in params})
    bound.apply_defaults()
    options = {k: v for k, v in kwargs.items() if k not in params}
    seen: list[Any] = [grid]

    def resolved(meta: Any) -> Any:
        seen[0] = grid(meta)
        return seen[0]

    rec.launching += 1
    _RUNNING[0] += 1
    try:
        compiled = original(jit, *args, grid=resolved if callable(grid) else grid, warmup=warmup, **kwargs)
    finally:
        _RUNNING[0] -= 1
        rec.launching -= 1
    rec.launched(_step(rec, name, params, list(bound.arguments.values()), seen[0], options))
    function = getattr(compiled, "function", None)
    if function is not None:
        _COMPILED[function] = (name, params, options)
    return compiled


def _hook_run(cls: type) -> None:
    original = cls.run

    def run(self, *args, grid, warmup, __original=original, **kwargs):  # noqa: ANN001, ANN202 - Triton's signature
        rec = active()
        if rec is None or warmup or rec.launching:
            compiled = __original(self, *args, grid=grid, warmup=warmup, **kwargs)
            function = getattr(compiled, "function", None)
            if function is not None and function not in _COMPILED:  # the warm-up's compile: its lean launches come later
                fn = _python_fn(self)
                if fn is not None:
                    params = _params(fn)
                    _COMPILED[function] = (fn.__name__, params, {k: v for k, v in kwargs.items() if k not in params})
            return compiled
        return _recorded_run(rec, self, args, kwargs, grid, warmup, __original)

    cls.run = run


def _hook_launcher(launcher: type) -> None:
    original = launcher.__call__

    def call(self, gx, gy, gz, stream, function, metadata, launch_metadata, enter, exit_, *args,  # noqa: ANN001, ANN202
             __original=original):
        rec = active()
        if rec is None or _RUNNING[0] or rec.launching:
            return __original(self, gx, gy, gz, stream, function, metadata, launch_metadata, enter, exit_, *args)
        known = _COMPILED.get(function)
        if known is None:
            raise rec.refuse(NOT_REPLAYABLE, "a launch through Triton's launcher of a kernel no @triton.jit function of "
                             "this file compiled")
        name, params, options = known
        if enter is not None or exit_ is not None:
            raise rec.refuse("launch-hook", f"{name} was launched with launch hooks: Python of the candidate's inside the launch")
        if _stream_refused(rec, stream):
            raise rec.refuse("off-stream-launch", f"{name} was launched on a stream other than the caller's")
        rec.launching += 1
        try:
            out = __original(self, gx, gy, gz, stream, function, metadata, launch_metadata, enter, exit_, *args)
        finally:
            rec.launching -= 1
        rec.launched(_step(rec, name, params, list(args), (gx, gy, gz), options))
        return out

    launcher.__call__ = call  # type: ignore[method-assign]


def install() -> None:
    """Hook Triton's launch paths, once per process (before any candidate is imported)."""
    with _LOCK:
        if _INSTALLED[0]:
            return
        from triton.runtime.jit import JITFunction

        _hook_run(JITFunction)
        try:
            from triton.runtime.interpreter import InterpretedFunction

            _hook_run(InterpretedFunction)
        except ImportError:  # pragma: no cover
            pass
        try:
            from triton.runtime import driver

            launcher = driver.active.launcher_cls
        except Exception:  # noqa: BLE001 - no GPU driver (the interpreter): run is the only way in
            launcher = None
        if isinstance(launcher, type):
            _hook_launcher(launcher)
        _INSTALLED[0] = True
