"""Whether a launched @triton.jit function is Triton: compiled to Triton IR by Triton's own front end with
the launch's arguments (their dtypes, the constants, the alignment Triton specialises on), before its
first replay.

On a GPU the launch compiles anyway, and a CompilationError there is the same refusal. On the CPU the
interpreter would run the function's body as Python — whatever Python it holds — so the front end runs
first, for a nominal CUDA target (sm_90): it refuses what is not in the language (a call of a Python
function, an attribute walk out of a tensor, a loop over something Triton cannot lower) with its line.
It needs the function as a JITFunction: the replay module is imported a second time with the
interpreter's switch off, so its @triton.jit decorators build those (nothing compiles or runs then).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Iterator

NOT_TRITON = "not-triton"


class NotTriton(Exception):
    """A @triton.jit function Triton's front end refuses: `message` is its error, with the line."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def compiled_twin(path: Path, module_name: str) -> Any:
    """The replay module at `path` imported with the interpreter off: its kernels as JITFunctions."""
    from triton import knobs

    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    before = knobs.runtime.interpret
    knobs.runtime.interpret = False
    try:
        spec.loader.exec_module(module)
    finally:
        knobs.runtime.interpret = before
    return module


def _twin_arg(value: Any, twin: Any) -> Any:
    """An argument as the compiled twin takes it: the file's kernels passed as constexprs are its own."""
    from triton.runtime.interpreter import InterpretedFunction

    if isinstance(value, InterpretedFunction):
        return getattr(twin, value.fn.__name__)
    if isinstance(value, tuple):
        return tuple(_twin_arg(v, twin) for v in value)
    return value


_STDLIB: dict[int, tuple[Any, Any]] = {}  # id(InterpretedFunction) -> (it, its JITFunction twin)
_PRISTINE: list[tuple[Any, dict[str, Any]]] = []  # the language's namespaces as Triton made them


def _language() -> list[Any]:
    """What the interpreter patches while a kernel runs (triton.runtime.interpreter._patch_lang)."""
    import triton.language as tl

    return [tl, tl.core, tl.math, tl.tensor, tl.dtype, tl.core.condition, tl.core.tensor_descriptor_base]


def snapshot_language() -> None:
    """Keep the language as Triton made it (at the replay worker's start, before any kernel ran): the
    interpreter's calls of one @triton.jit function from another patch `triton.language.core` and never
    restore it (Triton 3.9), and the front end cannot compile against the interpreter's stand-ins."""
    if not _PRISTINE:
        _PRISTINE.extend((obj, dict(vars(obj))) for obj in _language())


@contextlib.contextmanager
def _pristine_language() -> Iterator[None]:
    changed: list[tuple[Any, str, Any]] = []
    for obj, before in _PRISTINE:
        now = dict(vars(obj))
        for name, value in before.items():
            if now.get(name, _ABSENT) is not value:
                changed.append((obj, name, now.get(name, _ABSENT)))
                setattr(obj, name, value)
        for name in now.keys() - before.keys():
            changed.append((obj, name, now[name]))
            delattr(obj, name)
    try:
        yield
    finally:
        for obj, name, value in reversed(changed):
            if value is _ABSENT:
                delattr(obj, name)
            else:
                setattr(obj, name, value)


_ABSENT = object()


@contextlib.contextmanager
def _compiled_stdlib() -> Iterator[None]:
    """Triton's own library functions (tl.cdiv, tl.sum, tl.softmax, ...) as JITFunctions for the body:
    under the interpreter they were made InterpretedFunctions when Triton was imported, and the front
    end would call those as Python."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    swapped = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("triton.language") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, InterpretedFunction):
                if id(value) not in _STDLIB:
                    _STDLIB[id(value)] = (value, JITFunction(value.fn, **value.kwargs))
                setattr(module, attr, _STDLIB[id(value)][1])
                swapped.append((module, attr, value))
    try:
        yield
    finally:
        for module, attr, value in swapped:
            setattr(module, attr, value)


def check(twin: Any, kernel: str, args: list[Any], options: dict[str, Any]) -> None:
    """Triton's front end on `kernel` of `twin` with these arguments; NotTriton when it refuses."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend
    from triton.compiler.errors import CompilationError
    from triton.runtime.jit import create_function_from_signature
    from triton._C.libtriton import ir

    fn = getattr(twin, kernel)
    args = [_twin_arg(a, twin) for a in args]
    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, parsed = binder(*args, **options)
    opts, signature, constexprs, attrs = fn._pack_args(backend, dict(options), bound, specialization, parsed)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    try:
        with _pristine_language(), _compiled_stdlib():
            ASTSource(fn, signature, constexprs, attrs).make_ir(target, opts, backend.get_codegen_implementation(opts),
                                                               backend.get_module_map(), context)
    except CompilationError as e:
        raise NotTriton(f"{kernel} does not compile as Triton: {_last_lines(str(e))}") from e


def _last_lines(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-4:])[:800]
