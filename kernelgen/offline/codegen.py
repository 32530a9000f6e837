"""Assemble a complete `<name>_triton.py` from a traced, classified reference and a knob setting.

Python emits what depends on the traced graph (kernelgen.offline.rowgen / matgen: one statement
per IR node, the kernel's arguments) and describes the wrapper and the launch as data; the text
around them lives in templates/offline/ (one template per family, shared macros in _macros.py.j2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelgen.offline import knobs as defaults
from kernelgen.offline.classify import Classification
from kernelgen.offline.knobs import Knobs, MatmulKnobs, PointwiseKnobs, RowKnobs
from kernelgen.offline.matgen import matmul_kernel
from kernelgen.offline.naming import Names
from kernelgen.offline.rowgen import assign_spaces, pointwise_kernel, row_kernel
from kernelgen.offline.trace import DtypeRule, FixedDtype, LikeInput, Promoted, Traced
from kernelgen.render import render
from kernelgen.spec import DTYPES, OperatorSpec, parse_init


@dataclass
class Launch:
    """What the `launch` macro needs to write a kernel launch (see templates/offline/_macros.py.j2)."""

    kernel: str  # the @triton.jit function's name
    args: list[str]  # positional launch arguments, as the wrapper writes them
    device_of: str  # the input whose device tells the CPU interpreter from a GPU
    config: str  # the `_launch_config(...)` call: the file's shape heuristic
    unpack: list[str]  # the names that call's result is unpacked into
    grid: str  # the number of programs, from the unpacked sizes
    grid_meta: str  # the number of programs, from an autotune config (`meta`)
    sizes: list[str]  # constexpr sizes from the heuristic ("BLOCK_SIZE=block")
    autotune: bool
    stages: list[str] = field(default_factory=list)  # ["num_stages=..."] or []
    fixed: list[str] = field(default_factory=list)  # keyword arguments every launch passes
    configs_set_stages: bool = False  # the autotune configs carry num_stages (matmul)
    heuristic_sizes: bool = False  # @triton.heuristics supplies the sizes (row programs)


def _dtype_expr(rule: DtypeRule, names: Names) -> str:
    if isinstance(rule, LikeInput):
        return f"{names.inputs[rule.index]}.dtype"
    if isinstance(rule, FixedDtype):
        return f"torch.{rule.dtype}"
    if isinstance(rule, Promoted):  # a helper in the file: torch.promote_types is an operator
        return "_result_dtype(" + ", ".join(f"{names.inputs[i]}={names.inputs[i]}.dtype" for i in rule.indices) + ")"
    table = ", ".join(f"torch.{k}: torch.{v}" for k, v in rule.by_case_dtype.items())
    return f"{{{table}}}[{names.inputs[0]}.dtype]"


def _draw(kind: str, args: tuple[float, ...], shape: tuple[int, ...]) -> str:
    """An expression drawing one input on the CPU the way kernelgen.spec.draw_inputs does
    (`parse_init` has checked the number of arguments of each kind)."""
    if kind == "randn":
        return f"torch.randn({shape})"
    if kind == "rand":
        return f"torch.rand({shape})"
    if kind == "uniform":
        return f"(torch.rand({shape}) * {args[1] - args[0]!r} + {args[0]!r})"
    if kind == "normal":
        return f"(torch.randn({shape}) * {args[1]!r} + {args[0]!r})"
    if kind == "randint":
        return f"torch.randint({int(args[0])}, {int(args[1])}, {shape})"
    if kind == "bernoulli":
        return f"(torch.rand({shape}) < {args[0]!r})"
    return f"torch.ones({shape})"


def _main(spec: OperatorSpec, names: Names) -> dict[str, Any]:
    """The self-check run as a script: the first test case in the first dtype, against the reference."""
    case, dtype = spec.test_cases[0], spec.dtypes[0]
    draws = []
    for inp, nm in zip(spec.inputs, names.inputs):
        kind, args = parse_init(inp.init)
        draws.append((nm, f"{_draw(kind, args, tuple(case[inp.name]))}"
                          f".to(device=device, dtype=torch.{DTYPES[spec.input_dtype(inp, dtype)]})"))
    tol = spec.tolerance_for(dtype)
    return {"draws": draws, "args": names.inputs, "dtype": dtype, "atol": tol.atol, "rtol": tol.rtol,
            "case": ", ".join(f"{n} {list(case[n])}" for n in spec.input_names),
            "reference": (spec.reference or "").strip()}


def _or(value: int | None, heuristic: Any) -> Any:
    """A knob's value, or what the file computes when the knob is None."""
    return heuristic if value is None else value


def _stages(knobs: Knobs) -> list[str]:
    return [] if knobs.num_stages is None else [f"num_stages={knobs.num_stages}"]


# --- pointwise and row programs ----------------------------------------------------------
def _frame_wrapper(traced: Traced, names: Names, keep_last: bool) -> dict[str, Any]:
    outputs = []
    for o, info in zip(names.outputs, traced.outputs):
        shape = "shape" if info.space == "full" else ("shape[:-1] + (1,)" if info.keepdim else "shape[:-1]")
        outputs.append({"name": o, "shape": shape, "dtype": _dtype_expr(info.dtype_rule, names)})
    return {"inputs": names.inputs, "outputs": outputs, "keep_last": keep_last, "returns_tuple": traced.returns_tuple,
            "same_dtype": [names.inputs[i] for i in traced.same_dtype_inputs]}


def _pointwise(spec: OperatorSpec, traced: Traced, kind: Classification, names: Names,
               knobs: PointwiseKnobs) -> dict[str, Any]:
    kernel = pointwise_kernel(traced.graph, kind.roles, names, traced.params, knobs)
    common = dict(kernel=f"_{spec.name}_kernel", args=kernel.launch_args, device_of=names.inputs[0],
                  autotune=knobs.autotune, stages=_stages(knobs))
    if knobs.grid == "1d":
        launch = Launch(config="_launch_config(n_outer * n_inner * n_cols)", unpack=["block", "num_warps"],
                        grid="triton.cdiv(n_outer * n_inner * n_cols, block)",
                        grid_meta='triton.cdiv(n_outer * n_inner * n_cols, meta["BLOCK_SIZE"])',
                        sizes=["BLOCK_SIZE=block"], **common)
        warps = "8 if block >= 4096 else 4"
    else:
        launch = Launch(config="_launch_config(n_outer * n_inner, n_cols)", unpack=["block_r", "block_c", "num_warps"],
                        grid="triton.cdiv(n_outer * n_inner, block_r) * triton.cdiv(n_cols, block_c)",
                        grid_meta='triton.cdiv(n_outer * n_inner, meta["BLOCK_R"]) * triton.cdiv(n_cols, meta["BLOCK_C"])',
                        sizes=["BLOCK_R=block_r", "BLOCK_C=block_c"], **common)
        warps = "8 if block_r * block_c >= 4096 else 4"
    config = {"tile": _or(knobs.BLOCK_SIZE, defaults.POINTWISE_TILE), "warps": _or(knobs.num_warps, warps)}
    return dict(kernel=kernel, grid=knobs.grid, autotune=knobs.autotune, config=config,
                wrapper=_frame_wrapper(traced, names, False), launch=launch)


def _rows(spec: OperatorSpec, traced: Traced, kind: Classification, names: Names, knobs: RowKnobs) -> dict[str, Any]:
    kernel = row_kernel(traced.graph, kind.roles, names, traced.params, [o.space for o in traced.outputs], knobs)
    launch = Launch(kernel=f"_{spec.name}_kernel", args=kernel.launch_args, device_of=names.inputs[0],
                    config="_launch_config(n_outer * n_inner, n_cols)",
                    unpack=["block_r", "block_c", "single_pass", "num_warps"],
                    grid="triton.cdiv(n_outer * n_inner, block_r)",
                    grid_meta='triton.cdiv(n_outer * n_inner, meta["BLOCK_R"])',
                    sizes=["BLOCK_R=block_r", "BLOCK_C=block_c", "SINGLE_PASS=single_pass"],
                    autotune=knobs.autotune, stages=_stages(knobs), heuristic_sizes=True)
    config = {"single": _or(knobs.MAX_SINGLE_PASS, defaults.ROW_MAX_SINGLE),
              "loop": _or(knobs.LOOP_BLOCK, defaults.ROW_LOOP_BLOCK),
              "tile": _or(knobs.ROW_TILE, defaults.ROW_TILE),
              "warps": _or(knobs.num_warps, "4 if tile <= 2048 else (8 if tile <= 8192 else 16)")}
    return dict(kernel=kernel, autotune=knobs.autotune, config=config,
                wrapper=_frame_wrapper(traced, names, True), launch=launch)


# --- matmul -----------------------------------------------------------------------------
def _matmul(spec: OperatorSpec, traced: Traced, kind: Classification, names: Names,
            knobs: MatmulKnobs) -> dict[str, Any]:
    g = traced.graph
    mm = next(n for n in g.nodes if n.op == "mm")
    a_idx, b_idx = (g.node(i).attrs["index"] for i in mm.args)
    for n in g.nodes:
        n.space = "full"
    epi_roles = [r if r != "mm" else "full" for r in kind.roles]
    kernel = matmul_kernel(g, epi_roles, names, traced.params, a_idx, b_idx)
    a, b = names.inputs[a_idx], names.inputs[b_idx]
    epilogue_inputs = [nm for i, nm in enumerate(names.inputs) if i not in (a_idx, b_idx) and f"{nm}_v" in kernel.launch_args]
    outputs = [{"name": o, "dtype": _dtype_expr(info.dtype_rule, names)} for o, info in zip(names.outputs, traced.outputs)]
    launch = Launch(kernel=f"_{spec.name}_kernel", args=kernel.launch_args, device_of=a,
                    config=f"_launch_config(M, N, K, {a}.dtype == torch.float32)",
                    unpack=["bm", "bn", "bk", "group", "num_warps", "num_stages"],
                    grid="triton.cdiv(M, bm) * triton.cdiv(N, bn)",
                    grid_meta='triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])',
                    sizes=["BLOCK_M=bm", "BLOCK_N=bn", "BLOCK_K=bk", "GROUP_SIZE_M=group"],
                    fixed=["INPUT_PRECISION=precision", "UPCAST=upcast"], stages=["num_stages=num_stages"],
                    autotune=knobs.autotune, configs_set_stages=True)
    tiles = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages")
    config = {"fixed": all(getattr(knobs, k) is not None for k in tiles), "group": knobs.GROUP_SIZE_M,
              "bm": _or(knobs.BLOCK_M, "bm"), "bn": _or(knobs.BLOCK_N, "bn"), "bk": _or(knobs.BLOCK_K, "bk"),
              "warps": _or(knobs.num_warps, "warps"), "stages": _or(knobs.num_stages, "stages")}
    wrapper = {"a": a, "b": b, "a_transposed": traced.inputs[a_idx].transposed,
               "b_transposed": traced.inputs[b_idx].transposed, "epilogue_inputs": epilogue_inputs,
               "outputs": outputs, "returns_tuple": traced.returns_tuple,
               "same_dtype": [names.inputs[i] for i in traced.same_dtype_inputs]}
    return dict(kernel=kernel, a=a, b=b, autotune=knobs.autotune, config=config, wrapper=wrapper, launch=launch)


# --- the file ---------------------------------------------------------------------------
def generate_source(spec: OperatorSpec, traced: Traced, kind: Classification, knobs: Knobs) -> str:
    names = Names(spec)
    if isinstance(knobs, MatmulKnobs):
        template, context = "matmul", _matmul(spec, traced, kind, names, knobs)
    else:
        assign_spaces(traced.graph, kind.roles)
        if isinstance(knobs, PointwiseKnobs):
            template, context = "pointwise", _pointwise(spec, traced, kind, names, knobs)
        else:
            template, context = "rows", _rows(spec, traced, kind, names, knobs)
    return render(
        f"offline/{template}.py.j2",
        name=spec.name,
        description=" ".join(spec.description.split()) or spec.name,
        family=kind.family,
        summary=kind.summary,
        # None (the file's own heuristic) reads "auto" in the file's header
        knobs=", ".join(f"{k}={'auto' if v is None else v}" for k, v in knobs.model_dump().items()),
        signature=spec.signature,
        promotes=any(isinstance(o.dtype_rule, Promoted) for o in traced.outputs),
        main=_main(spec, names),
        **context,
    )
