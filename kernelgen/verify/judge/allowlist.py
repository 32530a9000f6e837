"""What a kernel file may import and reach: the allowlist kernelgen.verify.judge.surface holds every
candidate to, before any of it runs.

Since issue 40 no verdict rests on it: every check and timing replays what the candidate's call did on
the device (kernelgen.verify.record, kernelgen.verify.replay). What stays is what a replay cannot see —
the file's imports, and what its recording process could reach beyond its sandbox where a layer of the
sandbox is missing: a kernel file may import the modules below, and on each use only the names its
table lists; a name listed here that is itself a table (`torch.cuda`) is a namespace, whose own table
says what may follow it, and which may not be handed around as a value (`b = torch.cuda` makes `b`
another name for it, checked the same way; `f(torch.cuda)` is refused). On values (a tensor, a config,
a list, a kernel) any attribute may follow but those of ESCAPE_ATTRS, which lead from an object to the
interpreter's frames, code and tracebacks. No attribute starting with `_`, anywhere; only the builtins
of BUILTINS (no eval, exec, open, __import__, setattr: they leave the language).

To extend it: add the name to its table with the reason a kernel needs it, and a test that an honest
use of it passes (tests/verify/test_allowlist.py holds every entry to exist in the installed library
and to pass in a kernel file). An entry is a promise that nothing reached through it leads back to the
interpreter, the process, files or other frames.
"""

from __future__ import annotations

import functools
import importlib
import inspect


def _rows(why: str, names: str) -> dict[str, str]:
    """One reason for several table rows: {name: why} for each name in the whitespace-separated list."""
    return {name: why for name in names.split()}


# Every public name of a module the installed library defines, computed when a file first uses it:
# the kernel language's extern math (198 functions in Triton 3.9's libdevice), pure device code.
EVERY_PUBLIC = "every public function of the installed module"

# namespace (a dotted path) -> {name: why a kernel needs it}
NAMESPACES: dict[str, dict[str, str]] = {
    "torch": {
        **_rows("allocates an output or scratch buffer", "empty empty_like empty_strided zeros zeros_like ones "
                "ones_like full full_like"),
        **_rows("a dtype", "float32 float16 bfloat16 float64 float8_e4m3fn float8_e5m2 int8 int16 int32 int64 uint8 "
                "bool half float double long int short complex64"),
        **_rows("a type, for isinstance and annotations", "Tensor device dtype Size"),
        **_rows("dtype and shape arithmetic, no data touched", "finfo iinfo promote_types result_type is_tensor "
                "is_floating_point broadcast_shapes get_default_dtype"),
        **_rows("no autograd around the wrapper", "no_grad inference_mode"),
        **_rows("device and build queries (a namespace)", "cuda version backends"),
    },
    "torch.cuda": _rows("what a wrapper asks about its device", "is_available is_initialized current_device "
                        "device_count get_device_properties get_device_capability get_device_name device"),
    "torch.version": _rows("which build (ROCm or CUDA), to pick a launch shape", "cuda hip"),
    "torch.backends": {**_rows("the matmul precision mode (a namespace)", "cuda"),
                       **_rows("the convolution precision mode (a namespace)", "cudnn")},
    "torch.backends.cuda": _rows("the matmul precision mode (a namespace)", "matmul"),
    "torch.backends.cuda.matmul": _rows("reads the TF32 and reduced-precision settings (never sets them)",
                                        "allow_tf32 allow_fp16_reduced_precision_reduction "
                                        "allow_bf16_reduced_precision_reduction"),
    "torch.backends.cudnn": _rows("reads the TF32 setting of float32 convolutions (never sets it)", "allow_tf32"),
    "triton": {
        **_rows("defines, tunes and configures a kernel", "jit autotune heuristics Config"),
        **_rows("launch arithmetic", "cdiv next_power_of_2"),
        "JITFunction": "isinstance checks on a kernel",
        "set_allocator": "the scratch allocator device-side TMA descriptors (tl.make_tensor_descriptor) need",
        **_rows("a namespace", "language runtime tools"),
    },
    "triton.runtime": _rows("a namespace", "driver"),
    "triton.runtime.driver": _rows("the active GPU driver (a namespace)", "active"),
    "triton.runtime.driver.active": _rows("the launcher and current device and stream, for launching a compiled "
                                          "kernel directly", "launcher_cls get_current_device get_current_stream"),
    "triton.tools": _rows("a namespace", "tensor_descriptor"),
    "triton.tools.tensor_descriptor": _rows("host-side TMA descriptors", "TensorDescriptor"),
    # the kernel language (Triton 3.9's public names; tests/verify/test_allowlist.py flags new ones)
    "triton.language": {
        **_rows("the kernel language", """
            PropagateNan TRITON_MAX_TENSOR_NUMEL abs add aggregate_replace arange argmax argmin associative_scan assume
            atomic_add atomic_and atomic_cas atomic_load atomic_max atomic_min atomic_or atomic_poll atomic_store
            atomic_xchg atomic_xor bfloat16 bitonic_merge block_type broadcast broadcast_to cast cat cdiv ceil clamp
            condition const constexpr constexpr_type cos cumprod cumsum debug_barrier device_assert device_print
            div_rn dot dot_scaled dtype erf exp exp2 expand_dims expect_zero fdiv flip float16 float32 float64
            float8e4b15 float8e4b8 float8e4nv float8e5 float8e5b16 floor fma full gather histogram
            inline_asm_elementwise int1 int16 int32 int64 int8 interleave join load load_tensor_descriptor log log2
            make_block_ptr make_tensor_descriptor map_elementwise max max_constancy max_contiguous maximum min
            minimum mul multiple_of num_programs pair_uniform_to_normal permute philox philox_impl pi32_t pointer_type
            program_id rand rand4x randint randint4x randn randn4x range ravel reduce reduce_or reshape rsqrt
            sigmoid sin slice softmax sort split sqrt sqrt_rn squeeze static_assert static_print static_range store
            store_tensor_descriptor str_to_ty sub sum swizzle2d tensor tensor_descriptor tensor_descriptor_type
            to_tensor topk trans tuple tuple_type uint16 uint32 uint64 uint8 uint_to_uniform_float umulhi
            unsqueeze view void where xor_sum zeros zeros_like"""),
        **_rows("a namespace", "math extra PropagateNan"),
    },
    "triton.language.PropagateNan": _rows("how tl.maximum and tl.minimum treat NaN", "ALL NONE"),
    "triton.language.math": _rows("the kernel language's math", "abs ceil cos div_rn erf exp exp2 fdiv floor fma "
                                  "log log2 rsqrt sin sqrt sqrt_rn umulhi"),
    "triton.language.extra": _rows("extern device math (a namespace)", "libdevice cuda"),
    "triton.language.extra.cuda": _rows("extern device math (a namespace)", "libdevice"),
    "triton.language.extra.libdevice": {"*": EVERY_PUBLIC},
    "triton.language.extra.cuda.libdevice": {"*": EVERY_PUBLIC},
    "math": {"*": EVERY_PUBLIC},  # pure functions of numbers
    "functools": {
        **_rows("memoises a launch configuration", "lru_cache cache"),
        **_rows("builds a new callable or value; sets nothing on what it is given", "partial reduce cached_property"),
        **_rows("copies attributes: only onto the file's own functions and classes (the monkeypatch rule)",
                "wraps update_wrapper total_ordering"),
    },
    "typing": _rows("annotations", "Any Optional Union Tuple List Dict Set Callable Sequence Mapping Iterable "
                    "Iterator NamedTuple Literal TYPE_CHECKING cast Final ClassVar Type Generic TypeVar overload"),
    "dataclasses": _rows("a small config class of the file's own", "dataclass field replace fields"),
    "itertools": _rows("loops over launch parameters", "product chain accumulate islice repeat count starmap "
                       "combinations permutations zip_longest"),
    "__future__": _rows("postponed annotations", "annotations"),
    # KernelGen's own host runtime, frozen by version (kernelgen/runtime/v1.py): the generated files' plan
    # cache, lean launch and layout arithmetic. Only this module, not `kernelgen` or its package: nothing
    # else of KernelGen is a kernel's to reach. Its table is its `__all__` (not the script-only helpers).
    "kernelgen.runtime.v1": {"*": "KernelGen's frozen host runtime"},
    # `import kernelgen.runtime.v1` binds `kernelgen`: the path down to the runtime, and nothing beside it
    "kernelgen": _rows("the path to the host runtime (a namespace)", "runtime"),
    "kernelgen.runtime": _rows("the host runtime (a namespace)", "v1"),
}

# What `import X` / `from X import ...` may name: the namespaces that are modules.
IMPORTABLE = frozenset({
    "torch", "torch.cuda", "triton", "triton.language", "triton.language.math", "triton.language.extra",
    "triton.language.extra.libdevice", "triton.language.extra.cuda", "triton.language.extra.cuda.libdevice",
    "triton.tools", "triton.tools.tensor_descriptor", "math", "functools", "typing", "dataclasses", "itertools",
    "__future__", "kernelgen.runtime.v1",
})

# Attribute names no value may be followed by: those of Python's frames, generators, coroutines,
# tracebacks and code objects. From a running generator (`gen.gi_frame.f_back.f_globals`) they walk to
# every frame above and to the real builtins, which is the interpreter itself; nothing a kernel does
# needs them. Every other attribute a value has is the kernel's to use (`cfg.tile`, `cfg.mode`,
# `slice.start`: the allowlist refused those until issue 40, and honest kernels with them).
ESCAPE_PREFIXES = ("f_", "gi_", "cr_", "ag_", "tb_", "co_")


@functools.lru_cache(maxsize=1)
def escape_attrs() -> frozenset[str]:
    import types

    kinds = (types.FrameType, types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType, types.TracebackType,
             types.CodeType)
    return frozenset(n for k in kinds for n in dir(k) if n.startswith(ESCAPE_PREFIXES))


# Builtins a wrapper needs. Not here: those that run code (eval, exec, compile, __import__), open files
# (open), reach namespaces or frames (globals, locals, vars, dir, breakpoint), set attributes (setattr,
# delattr), tell objects apart by address (id, hash: a cache keyed on them skips work on inputs that
# changed), or make classes at run time (type).
BUILTINS: frozenset[str] = frozenset((
    "range len min max abs sum any all sorted reversed enumerate zip map filter round divmod pow isinstance "
    "issubclass callable iter next print repr format int float bool str tuple list dict set frozenset slice "
    "object super property staticmethod classmethod getattr hasattr "
    "Exception ValueError TypeError RuntimeError NotImplementedError AssertionError KeyError IndexError "
    "ZeroDivisionError ArithmeticError OverflowError StopIteration"
).split())

# Dunder names a file may write: methods of its own small classes, and the `__main__` guard.
ALLOWED_DUNDER_DEFS = frozenset({"__init__", "__post_init__", "__repr__", "__call__"})
ALLOWED_DUNDER_ATTRS = frozenset({"__init__"})  # super().__init__(...)
ALLOWED_DUNDER_NAMES = frozenset({"__name__"})


def table(namespace: str) -> dict[str, str] | None:
    """The names admitted on `namespace` ({name: why}), or None when it is not a namespace."""
    rows = NAMESPACES.get(namespace)
    if rows is None or "*" not in rows:
        return rows
    return _every_public(namespace)


@functools.lru_cache(maxsize=None)
def _every_public(namespace: str) -> dict[str, str]:
    """Every public name of the module, or those of its `__all__` where it has one (the runtime's)."""
    module = importlib.import_module(namespace)
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not inspect.ismodule(getattr(module, n))]
    return {n: NAMESPACES[namespace]["*"] for n in names if not n.startswith("_")}


def where(namespace: str) -> str:
    """How a refusal names the table a name was missing from."""
    return f"the allowlist of {namespace} (kernelgen/verify/judge/allowlist.py)"


