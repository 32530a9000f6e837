"""The in-process guard around one call of a candidate, inside the sandboxed worker.

Everything here runs in the candidate's own process, so a determined candidate could subvert it: it is
evidence the judge adds to its own checks, never the only evidence. It provides:
- a `TorchDispatchMode` that lets the wrapper only allocate, view and copy without a dtype change;
  any other operator is PyTorch doing the kernel's work (`torch-compute-in-wrapper`); fresh
  allocations are poisoned with the judge's fill of this call (kernelgen.verify.poison);
- launch hooks on Triton's JIT and interpreter runners and on the GPU backend's launcher (which a
  compiled kernel can be launched through directly): launches are counted (`no-triton-launch`,
  `off-stream-launch`), and in an *ablated* call every launch — pre-run hooks included — becomes a
  no-op, so the judge can check that the answer really came from Triton;
- the interpreter's program order (forward, reversed, shuffled), so a kernel relying on programs
  running in order fails on the CPU as it would on a GPU;
- a count of threads started during the call (`thread-started`).
Every violation code is listed in kernelgen/verify/judge/codes.py.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelgen.verify.poison import Fill, poison
from kernelgen.verify.replay import order
from kernelgen.verify.replay.order import program_order  # noqa: F401 - the candidate's calls take it from here

# Allocation: allowed, and the result is poisoned.
_ALLOC = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
# Allocation with defined contents (atomics need zeros): allowed, not poisoned.
_FILLED_ALLOC = {"zeros", "zeros_like", "new_zeros", "zero_", "fill_", "full", "full_like", "new_full", "ones",
                 "ones_like", "new_ones", "scalar_tensor"}
# Views and metadata: no data touched.
_VIEWS = {
    "view", "_unsafe_view", "reshape", "expand", "expand_as", "permute", "transpose", "t", "unsqueeze",
    "squeeze", "select", "slice", "narrow", "as_strided", "alias", "detach", "unfold", "split",
    "split_with_sizes", "chunk", "unbind", "flatten", "unflatten", "movedim", "view_as", "lift_fresh",
    "_reshape_alias", "diagonal", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
    "is_contiguous", "stride", "size", "dim", "numel", "storage_offset", "_has_compatible_shallow_copy_type",
}
# Copies that keep the dtype (`.contiguous()` dispatches clone). A dtype change is arithmetic.
_COPIES = {"clone", "contiguous", "copy_", "_to_copy", "_copy_from", "_copy_from_and_resize"}
# What Triton's launcher itself dispatches (the CPU interpreter copies arguments to host buffers and
# back: copy_, empty, new_empty, set_ with Triton 3.9); allowed only while a launch is in progress.
# No fill, no scalar reads: Python arithmetic written into a tensor during a launch is not a kernel.
_LAUNCHER = _COPIES | {"resize_", "set_"}


def _storage_key(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - e.g. a tensor without storage
        return -1


@dataclass
class GuardReport:
    launches: int = 0
    configs: list[str] = field(default_factory=list)  # what each launch ran with: kernel, grid, constants
    violations: list[tuple[str, str]] = field(default_factory=list)  # (code, message)
    # Storages allocated (or copied) by the wrapper during the call, kept alive until the report goes
    # so no address is reused meanwhile: an output outside them is cached, precomputed or an input.
    allocated: dict[int, torch.Tensor] = field(default_factory=dict)

    def is_fresh(self, t: torch.Tensor) -> bool:
        return _storage_key(t) in self.allocated

    def add(self, code: str, message: str) -> None:
        if (code, message) not in self.violations:
            self.violations.append((code, message))


class _GuardMode(TorchDispatchMode):
    def __init__(self, report: GuardReport, fill: Fill, watched_stream: Any):
        super().__init__()
        self.report = report
        self.fill = fill
        self.launching = 0
        self.watched_stream = watched_stream

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ARG002 - the dispatch protocol
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        if self.launching:
            if name not in _LAUNCHER | _ALLOC | _VIEWS:
                self.report.add("torch-compute-in-wrapper", f"aten.{name} ran inside a Triton launch (an argument computing with PyTorch)")
            return func(*args, **kwargs)
        if name in _COPIES:
            src = args[1] if name in {"copy_", "_copy_from"} and len(args) > 1 else (args[0] if args else None)
            out = func(*args, **kwargs)
            dst = args[0] if name == "copy_" else out
            if isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor) and src.dtype != dst.dtype:
                self.report.add("torch-compute-in-wrapper", f"aten.{name} converts {src.dtype} to {dst.dtype} in PyTorch; casts belong in the kernel")
            if name not in {"copy_", "_copy_from"}:
                self._record(out)
            return out
        if name in _ALLOC:
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor) and out.numel():
                poison(out, self.fill)
            self._record(out)
            return out
        if name in _FILLED_ALLOC and not name.endswith("_"):
            out = func(*args, **kwargs)
            self._record(out)
            return out
        if name in _FILLED_ALLOC or name in _VIEWS:
            return func(*args, **kwargs)
        self.report.add("torch-compute-in-wrapper", f"the wrapper ran aten.{name}: PyTorch computed what the Triton kernel should")
        return func(*args, **kwargs)

    def _record(self, out: Any) -> None:
        if isinstance(out, torch.Tensor):
            self.report.allocated[_storage_key(out)] = out


# --- launches -----------------------------------------------------------------------------------
_ACTIVE: list[_GuardMode] = []
_COUNTERS: list[list[int]] = []  # launch counters of unguarded (timed, plain) calls
_ABLATE = [False]
_PATCH_LOCK = threading.Lock()
_PATCHED = [False]


def launch_runners() -> list[type]:
    """The classes whose `.run` performs a Triton launch (compiled, and interpreted on the CPU)."""
    from triton.runtime.jit import JITFunction

    classes: list[type] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - a Triton without the interpreter module
        pass
    return classes


def describe_launch(fn: Any, kwargs: dict[str, Any]) -> str:
    """`_k grid=(64, 1, 1) BLOCK=1024 num_warps=4`: what decides a launch's speed besides its data; two
    kernels launching the same strings on the same inputs run the same machine code."""
    name = getattr(getattr(fn, "fn", fn), "__name__", "kernel")
    grid = kwargs.get("grid")
    shown = (tuple(grid) + (1, 1))[:3] if isinstance(grid, tuple) else "callable"  # (64,) and a launcher's (64, 1, 1) alike
    consts = " ".join(f"{k}={v}" for k, v in sorted(kwargs.items()) if k not in ("grid", "warmup") and
                      isinstance(v, (int, float, str, bool)))
    return f"{name} grid={shown} {consts}".strip()


def _current_stream() -> Any:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.current_stream()
    return None


# A compiled kernel's launches may skip JITFunction.run: a generated wrapper hands the compiled kernel
# straight to Triton's launcher after its first call (templates/offline/_macros.py.j2, _launch), and
# any candidate could. The launcher class is hooked too, so those launches are counted and ablated
# like the rest; a launch through JITFunction.run is counted there, once (_RUNNING).
_RUNNING = [0]  # JITFunction.run calls in progress
_DESCRIBED: dict[Any, tuple[Any, dict[str, Any]]] = {}  # compiled function handle -> (its JIT function, launch kwargs)


def _launched(fn: Any, kwargs: dict[str, Any], described: str, go: Any) -> Any:
    """One launch: counted, described, checked for hooks and stream, ablated on request, else `go()`."""
    for c in _COUNTERS:
        c[0] += 1
    if _ACTIVE:
        mode = _ACTIVE[-1]
        mode.report.launches += 1
        mode.report.configs.append(described)
        if getattr(fn, "pre_run_hooks", None):
            mode.report.add("launch-hook", "the kernel carries pre-run hooks: Python of the candidate's runs "
                            "inside the launch, where it can compute what the kernel claims to")
        stream = _current_stream()
        if mode.watched_stream is not None and stream is not None and stream != mode.watched_stream:
            mode.report.add("off-stream-launch", "a Triton kernel was launched on a stream other than the caller's; timing would not see it")
    if _ABLATE[0]:
        return None  # no hooks, no kernel: the answer must not appear anyway
    if not _ACTIVE:
        return go()
    mode.launching += 1
    try:
        return go()
    finally:
        mode.launching -= 1


def _launcher_class() -> type | None:
    """The active GPU backend's launcher class (Triton 3.x: driver.active.launcher_cls); None on the
    interpreter or without a GPU driver."""
    try:
        from triton.runtime import driver

        cls = driver.active.launcher_cls
    except Exception:  # noqa: BLE001 - no driver (the CPU interpreter): JITFunction.run is the only way in
        return None
    return cls if isinstance(cls, type) else None


def hook_launcher(launcher: type) -> None:
    """Wrap a launcher class's `__call__`: launches that skip JITFunction.run are counted, described
    (as the JITFunction.run launch that compiled them was) and ablated like the others."""
    original = launcher.__call__

    def call(self, grid_x, grid_y, grid_z, stream, function, *rest, __original=original):  # noqa: ANN001, ANN202
        def go() -> Any:
            return __original(self, grid_x, grid_y, grid_z, stream, function, *rest)

        if _RUNNING[0]:  # the launch JITFunction.run makes: counted there
            return go()
        fn, kwargs = _DESCRIBED.get(function, (None, {}))
        grid = (grid_x, grid_y, grid_z)
        described = describe_launch(fn, {**kwargs, "grid": grid}) if fn is not None else \
            f"an unregistered compiled kernel {function} grid={grid}"
        return _launched(fn, kwargs, described, go)

    launcher.__call__ = call  # type: ignore[method-assign]


def install_launch_hooks() -> None:
    """Wrap Triton's launch paths once per process (JITFunction.run, the interpreter's run, the GPU
    backend's launcher): count, watch the stream, ablate on request."""
    with _PATCH_LOCK:
        if _PATCHED[0]:
            return
        for cls in launch_runners():
            original = cls.run

            def run(self, *args, __original=original, **kwargs):  # noqa: ANN001, ANN202
                _RUNNING[0] += 1
                try:
                    compiled = _launched(self, kwargs, describe_launch(self, kwargs), lambda: __original(self, *args, **kwargs))
                finally:
                    _RUNNING[0] -= 1
                function = getattr(compiled, "function", None)
                if function is not None:  # its later launches may come straight to the launcher
                    _DESCRIBED[function] = (self, {k: v for k, v in kwargs.items() if k != "grid"})
                return compiled

            cls.run = run
        launcher = _launcher_class()
        if launcher is not None:
            hook_launcher(launcher)
        order.install()
        _PATCHED[0] = True


@contextlib.contextmanager
def guarded(fill: Fill) -> Iterator[GuardReport]:
    """Run the body under the dispatch guard with this poison fill."""
    install_launch_hooks()
    report = GuardReport()
    mode = _GuardMode(report, fill, _current_stream())
    _ACTIVE.append(mode)
    try:
        with mode:
            yield report
    finally:
        _ACTIVE.pop()
    if report.launches == 0:
        report.add("no-triton-launch", "the call launched no Triton kernel: the result did not come from Triton")


@contextlib.contextmanager
def counting_launches() -> Iterator[list[int]]:
    """Count Triton launches in the body without guarding it (plain and timed calls)."""
    install_launch_hooks()
    counter = [0]
    _COUNTERS.append(counter)
    try:
        yield counter
    finally:
        _COUNTERS.remove(counter)


@contextlib.contextmanager
def ablated() -> Iterator[None]:
    """Every Triton launch in the body (pre-run hooks included) does nothing."""
    install_launch_hooks()
    _ABLATE[0] = True
    try:
        yield
    finally:
        _ABLATE[0] = False


# --- threads ----------------------------------------------------------------------------------------
def thread_ids() -> set[str]:
    """Every thread of this process, native ones included (what /proc lists)."""
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:  # pragma: no cover - not Linux
        return {str(t.ident) for t in threading.enumerate()}


@contextlib.contextmanager
def watching_threads() -> Iterator[list[int]]:
    """Count Python threads started in the body, plus native threads still alive after it."""
    started = [0]
    original = threading.Thread.start

    def start(self, *a, **k):  # noqa: ANN001, ANN202
        started[0] += 1
        return original(self, *a, **k)

    before = thread_ids()
    threading.Thread.start = start  # type: ignore[method-assign]
    try:
        yield started
    finally:
        threading.Thread.start = original  # type: ignore[method-assign]
        started[0] = max(started[0], len(thread_ids() - before))
