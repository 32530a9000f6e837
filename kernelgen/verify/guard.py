"""The runtime guard around one call of a candidate's entry function.

It intercepts every PyTorch operator dispatched during the call (a `TorchDispatchMode`, so it sees
what runs, not what the source looks like) and every Triton launch (by wrapping the JIT runner):
- the wrapper may only allocate, view and copy-to-contiguous; any other operator is PyTorch doing
  the work the kernel claims to do (`torch-compute-in-wrapper`);
- freshly allocated tensors are poisoned (NaN for floats, an unlikely value for integers), so an
  output element the kernel never wrote cannot pass by holding last call's answer or a zero;
- at least one Triton kernel must be launched (`no-triton-launch`), on the caller's stream
  (`off-stream-launch`);
- the storages allocated during the call are recorded, so the harness can tell a fresh output from
  a cached, precomputed or input tensor (`output-not-fresh`, checked in kernelgen.harness).

Floating-point poison is a NaN with a payload of our own (POISON_BITS), so an element the kernel
never wrote is told apart from a NaN it computed (`unwritten-output`). Every violation code is
listed in kernelgen/staticcheck.py (VIOLATION_CODES) and docs/trust.md.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelgen.verify.results import Violation

aten = torch.ops.aten

# Allocation: allowed, and the result is poisoned.
_ALLOC = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
# Allocation with defined contents (atomics need zeros): allowed, not poisoned.
_FILLED_ALLOC = {"zeros", "zeros_like", "new_zeros", "zero_", "fill_", "full", "full_like", "new_full", "ones", "ones_like", "new_ones", "scalar_tensor"}
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
# What Triton's launcher itself dispatches (the CPU interpreter copies arguments to host buffers
# and back); allowed only while a launch is in progress.
_LAUNCHER = _COPIES | {"resize_", "set_", "_local_scalar_dense"}

_POISON_INT = {torch.int8: -77, torch.uint8: 201, torch.int16: -7777, torch.int32: -123456789, torch.int64: -123456789}
# Quiet NaNs with a payload of our own, written through an integer view of the same width: the
# bits an unwritten float element still holds after the call (arithmetic NaNs are canonical).
POISON_BITS: dict[torch.dtype, tuple[torch.dtype, int]] = {
    torch.float16: (torch.int16, 0x7E5A),
    torch.bfloat16: (torch.int16, 0x7FDA),
    torch.float32: (torch.int32, 0x7FC0DEAD),
    torch.float64: (torch.int64, 0x7FF8DEADBEEFDEAD),
}


def _poison_value(dtype: torch.dtype, salt: int) -> Any:
    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.bool:
        return bool(salt % 2)  # alternate per call: an unwritten bool fails under one of the seeds
    return _POISON_INT.get(dtype, -1)


def poison(t: torch.Tensor, salt: int = 0) -> None:
    if t.dtype in POISON_BITS:
        int_dtype, bits = POISON_BITS[t.dtype]
        t.view(int_dtype).fill_(bits)
    else:
        t.fill_(_poison_value(t.dtype, salt))


def poisoned_mask(t: torch.Tensor) -> torch.Tensor | None:
    """Where `t` still holds the float poison bit pattern (None for dtypes without a pattern)."""
    if t.dtype not in POISON_BITS:
        return None
    int_dtype, bits = POISON_BITS[t.dtype]
    return t.view(int_dtype) == bits


def _storage_key(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - e.g. a tensor without storage
        return -1


@dataclass
class CallReport:
    launches: int = 0
    dispatched: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    # Storage addresses of tensors allocated (or copied) by the wrapper during the call; their
    # tensors are kept alive until the report goes, so no address is reused meanwhile.
    allocated: dict[int, torch.Tensor] = field(default_factory=dict)

    def is_fresh(self, t: torch.Tensor) -> bool:
        """Whether `t` lives in storage allocated during the call (a view of it counts)."""
        return _storage_key(t) in self.allocated

    def add(self, code: str, message: str) -> None:
        if not any(v.code == code and v.message == message for v in self.violations):
            self.violations.append(Violation(code=code, message=message))


class _GuardMode(TorchDispatchMode):
    def __init__(self, report: CallReport, salt: int, watched_stream: Any):
        super().__init__()
        self.report = report
        self.salt = salt
        self.launching = 0
        self.watched_stream = watched_stream

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        self.report.dispatched.append(name)
        if self.launching:
            if name not in _LAUNCHER | _ALLOC | _FILLED_ALLOC | _VIEWS:
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
                poison(out, self.salt)
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


_ACTIVE: list[_GuardMode] = []
# Launch counters for calls timed without the dispatch guard (a list bump is all a launch costs).
_COUNTERS: list[list[int]] = []
_PATCH_LOCK = threading.Lock()
_PATCHED = False


def _launch_runners() -> list[type]:
    """The classes whose `.run` performs a Triton launch (compiled, and interpreted on the CPU)."""
    classes = []
    from triton.runtime.jit import JITFunction

    classes.append(JITFunction)
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - old Triton without the interpreter module
        pass
    return classes


def _current_stream() -> Any:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.current_stream()
    return None


def install_launch_hooks() -> None:
    """Wrap Triton's launch path once per process so launches are counted while a guard is active."""
    global _PATCHED
    with _PATCH_LOCK:
        if _PATCHED:
            return
        for cls in _launch_runners():
            original = cls.run

            def run(self, *args, __original=original, **kwargs):  # noqa: ANN001
                for c in _COUNTERS:
                    c[0] += 1
                if not _ACTIVE:
                    return __original(self, *args, **kwargs)
                mode = _ACTIVE[-1]
                mode.report.launches += 1
                stream = _current_stream()
                if mode.watched_stream is not None and stream is not None and stream != mode.watched_stream:
                    mode.report.add("off-stream-launch", "a Triton kernel was launched on a stream other than the caller's; timing would not see it")
                mode.launching += 1
                try:
                    return __original(self, *args, **kwargs)
                finally:
                    mode.launching -= 1

            cls.run = run
        _PATCHED = True


@contextlib.contextmanager
def guarded(salt: int = 0) -> Iterator[CallReport]:
    """Run the body under the guard; afterwards the report holds launches and violations."""
    install_launch_hooks()
    report = CallReport()
    mode = _GuardMode(report, salt, _current_stream())
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
    """Count Triton launches in the body without guarding it (for the timed calls)."""
    install_launch_hooks()
    counter = [0]
    _COUNTERS.append(counter)
    try:
        yield counter
    finally:
        _COUNTERS.remove(counter)


def call_guarded(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], salt: int = 0) -> tuple[Any, CallReport]:
    with guarded(salt) as report:
        out = fn(*args, **kwargs)
    return out, report
