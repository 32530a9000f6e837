"""Assemble a complete `<name>_triton.py` from a traced, classified reference and a knob setting."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.classify import Classification
from kernelgen.offline.knobs import Knobs
from kernelgen.offline.matgen import matmul_kernel
from kernelgen.offline.naming import Names
from kernelgen.render import render
from kernelgen.offline.rowgen import KernelText, assign_spaces, pointwise_kernel, row_kernel
from kernelgen.offline.trace import DtypeRule, FixedDtype, LikeInput, Traced
from kernelgen.spec import DTYPES, OperatorSpec, parse_init

_HELPERS = '''def _broadcast_shape(*shapes):
    """torch.broadcast_shapes in plain Python: the wrapper runs no torch ops beyond views."""
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s, rank - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    raise ValueError(f"shapes {[tuple(x) for x in shapes]} do not broadcast")
                out[i] = d
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _frame(shape, strides, keep_last):
    """Collapse `shape` and every tensor's strides in it to (n_outer, n_inner, n_cols, strides3).

    Size-1 dims drop and neighbours merge when every tensor walks them as one dim
    (stride[i] == stride[i + 1] * size[i + 1]), so a contiguous tensor becomes one long row and a
    bias broadcast becomes [rows, n_cols]. keep_last keeps the last dim apart (it is reduced).
    Returns None when more than three dims remain.
    """
    dims = [(size, tuple(s[d] for s in strides)) for d, size in enumerate(shape)]
    last = dims.pop() if keep_last and dims else None
    merged = []
    for size, st in dims:
        if size == 1:
            continue
        if merged and all(p == q * size for p, q in zip(merged[-1][1], st)):
            merged[-1] = (merged[-1][0] * size, st)
        else:
            merged.append((size, st))
    if last is not None:
        merged.append(last)
    zero = (0,) * len(strides)
    merged = merged or [(1, zero)]
    if len(merged) > 3:
        return None
    merged = [(1, zero)] * (3 - len(merged)) + merged
    (d0, s0), (d1, s1), (d2, s2) = merged
    return d0, d1, d2, tuple(zip(s0, s1, s2))'''


def indent(lines: list[str], depth: int = 1) -> str:
    pad = "    " * depth
    return "\n".join(pad + line if line else "" for line in lines)


def _dtype_expr(rule: DtypeRule, names: Names) -> str:
    if isinstance(rule, LikeInput):
        return f"{names.inputs[rule.index]}.dtype"
    if isinstance(rule, FixedDtype):
        return f"torch.{rule.dtype}"
    table = ", ".join(f"torch.{k}: torch.{v}" for k, v in rule.by_case_dtype.items())
    return f"{{{table}}}[{names.inputs[0]}.dtype]"


def _kernel_params(text: KernelText) -> str:
    lines = []
    for arg, comment in text.params:
        lines.append(f"    {arg},  # {comment}" if comment else f"    {arg},")
    return "\n".join(lines)


def _main_lines(spec: OperatorSpec, names: Names) -> list[str]:
    case = spec.test_cases[0]
    dtype = spec.dtypes[0]
    lines = ['device = "cuda" if torch.cuda.is_available() else "cpu"']
    for inp, nm in zip(spec.inputs, names.inputs):
        dt = spec.input_dtype(inp, dtype)
        shape = tuple(case[inp.name])
        gen, a = parse_init(inp.init)
        if dt == "bool":
            lines.append(f"{nm} = torch.rand({shape}, device=device) < 0.5")
        elif dt not in ("float16", "bfloat16", "float32", "float64"):
            lo, hi = (int(a[0]), int(a[1])) if gen == "randint" else (0, 10)
            lines.append(f"{nm} = torch.randint({lo}, {hi}, {shape}, device=device, dtype=torch.{DTYPES[dt]})")
        else:
            lines.append(f"{nm} = torch.randn({shape}, device=device, dtype=torch.{DTYPES[dt]})")
    lines.append(f"result = {spec.name}({', '.join(names.inputs)})")
    lines.append("for r in (result if isinstance(result, tuple) else (result,)):")
    lines.append(f'    print("{spec.name}:", tuple(r.shape), r.dtype)')
    return lines


def _ret(traced: Traced, names: Names) -> str:
    outs = ", ".join(names.outputs)
    return f"return ({outs},)" if traced.returns_tuple and len(names.outputs) == 1 else f"return {outs}"


# --- pointwise and row programs ----------------------------------------------------------
def _frame_wrapper(spec: OperatorSpec, traced: Traced, names: Names, text: KernelText,
                   knobs: Knobs, rows: bool) -> tuple[list[str], str, str]:
    """Wrapper body lines, the heuristic helper text, the decorator text."""
    ins = names.inputs
    lines = [f"shape = _broadcast_shape({', '.join(f'{n}.shape' for n in ins)})"]
    for n in ins:
        lines.append(f"{n}_v = {n}.expand(shape)  # a view: stride 0 where {n} broadcasts")
    for k, (o, info) in enumerate(zip(names.outputs, traced.outputs)):
        oshape = "shape" if info.space == "full" else ("shape[:-1] + (1,)" if info.keepdim else "shape[:-1]")
        lines.append(f"{o} = torch.empty({oshape}, dtype={_dtype_expr(info.dtype_rule, names)}, device={ins[0]}.device)")
    views = ", ".join(f"{n}_v" for n in ins)
    strides = "(" + ", ".join(f"{n}_v.stride()" for n in ins) + ("," if len(ins) == 1 else "") + ")"
    lines.append(f"frame = _frame(shape, {strides}, {rows})")
    lines.append("if frame is None:  # a broadcast needing more than three dims: copy the inputs once")
    lines.append(f"    {views}{',' if len(ins) == 1 else ''} = " + ", ".join(f"{n}_v.contiguous()" for n in ins))
    lines.append(f"    frame = _frame(shape, {strides}, {rows})")
    lines.append("n_outer, n_inner, n_cols, strides = frame")
    stages = "" if knobs.num_stages is None else f", num_stages={knobs.num_stages}"
    kname = f"_{spec.name}_kernel"
    args = ", ".join(text.wrapper_args)
    decorator = ""
    if not rows:
        if knobs.grid == "1d":
            helper = _pointwise_1d_config(knobs)
            if knobs.autotune:
                decorator = _autotune_1d()
                lines.append(f'if {ins[0]}.device.type == "cpu":  # the CPU interpreter cannot time configs')
                lines.append("    block, num_warps = _launch_config(n_outer * n_inner * n_cols)")
                lines.append("    grid = (triton.cdiv(n_outer * n_inner * n_cols, block),)")
                lines.append(f"    {kname}.fn[grid]({args}, BLOCK_SIZE=block, num_warps=num_warps)")
                lines.append("else:")
                lines.append('    grid = lambda meta: (triton.cdiv(n_outer * n_inner * n_cols, meta["BLOCK_SIZE"]),)')
                lines.append(f"    {kname}[grid]({args}{stages})")
            else:
                lines.append("block, num_warps = _launch_config(n_outer * n_inner * n_cols)")
                lines.append("grid = (triton.cdiv(n_outer * n_inner * n_cols, block),)")
                lines.append(f"{kname}[grid]({args}, BLOCK_SIZE=block, num_warps=num_warps{stages})")
        else:
            helper = _pointwise_2d_config(knobs)
            if knobs.autotune:
                decorator = _autotune_2d()
                lines.append(f'if {ins[0]}.device.type == "cpu":  # the CPU interpreter cannot time configs')
                lines.append("    block_r, block_c, num_warps = _launch_config(n_outer * n_inner, n_cols)")
                lines.append("    grid = (triton.cdiv(n_outer * n_inner, block_r) * triton.cdiv(n_cols, block_c),)")
                lines.append(f"    {kname}.fn[grid]({args}, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=num_warps)")
                lines.append("else:")
                lines.append('    grid = lambda meta: (triton.cdiv(n_outer * n_inner, meta["BLOCK_R"]) * triton.cdiv(n_cols, meta["BLOCK_C"]),)')
                lines.append(f"    {kname}[grid]({args}{stages})")
            else:
                lines.append("block_r, block_c, num_warps = _launch_config(n_outer * n_inner, n_cols)")
                lines.append("grid = (triton.cdiv(n_outer * n_inner, block_r) * triton.cdiv(n_cols, block_c),)")
                lines.append(f"{kname}[grid]({args}, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=num_warps{stages})")
    else:
        helper = _row_config(knobs)
        if knobs.autotune:
            decorator = _autotune_rows()
            lines.append('grid = lambda meta: (triton.cdiv(n_outer * n_inner, meta["BLOCK_R"]),)')
            lines.append(f'if {ins[0]}.device.type == "cpu":  # the CPU interpreter cannot time configs')
            lines.append(f"    {kname}.fn[grid]({args}, num_warps=_launch_config(n_outer * n_inner, n_cols)[3])")
            lines.append("else:")
            lines.append(f"    {kname}[grid]({args}{stages})")
        else:
            lines.append("block_r, block_c, single_pass, num_warps = _launch_config(n_outer * n_inner, n_cols)")
            lines.append("grid = (triton.cdiv(n_outer * n_inner, block_r),)")
            lines.append(f"{kname}[grid]({args}, BLOCK_R=block_r, BLOCK_C=block_c, SINGLE_PASS=single_pass, "
                         f"num_warps=num_warps{stages})")
    lines.append(_ret(traced, names))
    return lines, helper, decorator


def _warps_expr(knobs: Knobs, auto: str) -> str:
    return auto if knobs.num_warps is None else str(knobs.num_warps)


def _pointwise_2d_config(knobs: Knobs) -> str:
    from kernelgen.offline.knobs import POINTWISE_TILE

    tile = POINTWISE_TILE if knobs.BLOCK_SIZE is None else knobs.BLOCK_SIZE
    warps = _warps_expr(knobs, "8 if block_r * block_c >= 4096 else 4")
    return f'''@functools.lru_cache(maxsize=1024)
def _launch_config(n_rows, n_cols):
    """(BLOCK_R, BLOCK_C, num_warps): a tile of about {tile} elements, as wide as the rows allow.

    {tile} elements per program keeps ~16 KB of fp32 loads in flight per program, enough for an H100
    to approach copy bandwidth; a wide tile keeps loads of each row contiguous and vectorised.
    """
    block_c = min(triton.next_power_of_2(n_cols), {tile})
    block_r = min(triton.next_power_of_2(n_rows), max(1, {tile} // block_c))
    num_warps = {warps}
    return block_r, block_c, num_warps'''


def _pointwise_1d_config(knobs: Knobs) -> str:
    from kernelgen.offline.knobs import POINTWISE_TILE

    tile = POINTWISE_TILE if knobs.BLOCK_SIZE is None else knobs.BLOCK_SIZE
    warps = _warps_expr(knobs, "8 if block >= 4096 else 4")
    return f'''@functools.lru_cache(maxsize=1024)
def _launch_config(n_elements):
    """(BLOCK_SIZE, num_warps) for the flat 1-D grid: {tile} elements per program."""
    block = min(triton.next_power_of_2(n_elements), {tile})
    num_warps = {warps}
    return block, num_warps'''


def _row_config(knobs: Knobs) -> str:
    from kernelgen.offline import knobs as h

    single = h.ROW_MAX_SINGLE if knobs.MAX_SINGLE_PASS is None else knobs.MAX_SINGLE_PASS
    loop = h.ROW_LOOP_BLOCK if knobs.LOOP_BLOCK is None else knobs.LOOP_BLOCK
    tile = h.ROW_TILE if knobs.ROW_TILE is None else knobs.ROW_TILE
    warps = _warps_expr(knobs, "4 if tile <= 2048 else (8 if tile <= 8192 else 16)")
    return f'''@functools.lru_cache(maxsize=1024)
def _launch_config(n_rows, n_cols):
    """(BLOCK_R, BLOCK_C, SINGLE_PASS, num_warps) for rows of n_cols elements.

    Rows up to {single} elements stay in registers and are read once; longer rows loop over
    {loop}-column blocks, one pass per reduction level. Short rows share a program until a tile
    holds ~{tile} elements, so warps are not left idle on 64-wide rows.
    """
    block_c = triton.next_power_of_2(n_cols)
    single_pass = block_c <= {single}
    if not single_pass:
        block_c = {loop}
    block_r = min(triton.next_power_of_2(n_rows), max(1, {tile} // block_c))
    tile = block_r * block_c
    num_warps = {warps}
    return block_r, block_c, single_pass, num_warps'''


def _autotune_2d() -> str:
    return '''@triton.autotune(
    configs=[
        triton.Config({"BLOCK_R": r, "BLOCK_C": c}, num_warps=w)
        for r, c, w in [(1, 4096, 8), (1, 1024, 4), (4, 1024, 8), (16, 256, 8), (64, 64, 8), (32, 128, 4)]
    ],
    key=["n_rows", "n_cols"],
)
'''


def _autotune_1d() -> str:
    return '''@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": b}, num_warps=w) for b, w in [(1024, 4), (2048, 4), (4096, 8), (8192, 8)]],
    key=["n_rows", "n_cols"],
)
'''


def _autotune_rows() -> str:
    return '''@triton.autotune(
    configs=[triton.Config({}, num_warps=w) for w in (2, 4, 8, 16)],
    key=["n_rows", "n_cols"],
)
@triton.heuristics(
    {
        "BLOCK_R": lambda args: _launch_config(args["n_rows"], args["n_cols"])[0],
        "BLOCK_C": lambda args: _launch_config(args["n_rows"], args["n_cols"])[1],
        "SINGLE_PASS": lambda args: _launch_config(args["n_rows"], args["n_cols"])[2],
    }
)
'''


# --- matmul -----------------------------------------------------------------------------
def _matmul_config(knobs: Knobs) -> str:
    def pick(name: str, auto: str) -> str:
        return auto if getattr(knobs, name) is None else str(getattr(knobs, name))

    fixed = all(getattr(knobs, k) is not None for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"))
    if fixed:
        body = (f"    return {knobs.BLOCK_M}, {knobs.BLOCK_N}, {knobs.BLOCK_K}, "
                f"{knobs.GROUP_SIZE_M}, {knobs.num_warps}, {knobs.num_stages}")
    else:
        body = f'''    if fp32:
        # IEEE fp32 runs on FMA units, not tensor cores: moderate tiles, short K steps.
        bm, bn, bk, warps, stages = (128, 128, 32, 8, 3) if M * N >= 1 << 20 else (64, 64, 32, 4, 3)
    elif M * N >= 1 << 24:
        # >= 4096 x 4096 outputs: the Hopper config of Triton's matmul tutorial (128x256x64,
        # 8 warps, 3 stages) keeps both warpgroups' tensor cores fed.
        bm, bn, bk, warps, stages = 128, 256, 64, 8, 3
    elif M * N >= 1 << 20:
        bm, bn, bk, warps, stages = 128, 128, 64, 8, 4
    else:
        # small outputs: smaller tiles so there are enough programs to fill the SMs
        bm, bn, bk, warps, stages = 64, 64, 32, 4, 4
    bm, bn, bk = {pick("BLOCK_M", "bm")}, {pick("BLOCK_N", "bn")}, {pick("BLOCK_K", "bk")}
    return bm, bn, bk, {knobs.GROUP_SIZE_M}, {pick("num_warps", "warps")}, {pick("num_stages", "stages")}'''
    return f'''@functools.lru_cache(maxsize=256)
def _launch_config(M, N, K, fp32):
    """(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_SIZE_M, num_warps, num_stages) for one problem size."""
{body}'''


def _autotune_matmul(knobs: Knobs) -> str:
    g = knobs.GROUP_SIZE_M
    return f'''@triton.autotune(
    configs=[
        triton.Config({{"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_SIZE_M": {g}}}, num_warps=w, num_stages=s)
        for m, n, k, w, s in [
            (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 8, 4),
            (128, 128, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 32, 4, 4),
        ]
    ],
    key=["M", "N", "K"],
)
'''


def _matmul_wrapper(spec: OperatorSpec, traced: Traced, names: Names, text: KernelText,
                    knobs: Knobs, a_idx: int, b_idx: int) -> tuple[list[str], str, str]:
    a, b = names.inputs[a_idx], names.inputs[b_idx]
    lines = []
    if traced.inputs[b_idx].transposed:
        lines.append(f"{b}_mat = {b}.permute(1, 0)  # the reference multiplies by {b}.T: a strided view, no copy")
    else:
        lines.append(f"{b}_mat = {b}")
    if traced.inputs[a_idx].transposed:
        lines.append(f"{a} = {a}.permute(1, 0)  # the reference multiplies {a}.T")
    lines.append(f"M, K = {a}.shape")
    lines.append(f"N = {b}_mat.shape[1]")
    for i, nm in enumerate(names.inputs):
        if i not in (a_idx, b_idx) and f"{nm}_v" in text.wrapper_args:
            lines.append(f"{nm}_v = {nm}.expand(M, N)  # a view: stride 0 where {nm} broadcasts")
    for o, info in zip(names.outputs, traced.outputs):
        lines.append(f"{o} = torch.empty((M, N), dtype={_dtype_expr(info.dtype_rule, names)}, device={a}.device)")
    lines.append(f'upcast = {a}.device.type == "cpu" and {a}.dtype == torch.bfloat16  # interpreter workaround, see kernel')
    lines.append(f'precision = "ieee" if {a}.dtype == torch.float32 or upcast else "tf32"')
    kname = f"_{spec.name}_kernel"
    args = ", ".join(text.wrapper_args)
    decorator = ""
    if knobs.autotune:
        decorator = _autotune_matmul(knobs)
        lines.append(f'if {a}.device.type == "cpu":  # the CPU interpreter cannot time configs')
        lines.append(f"    bm, bn, bk, group, num_warps, num_stages = _launch_config(M, N, K, {a}.dtype == torch.float32)")
        lines.append("    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)")
        lines.append(f"    {kname}.fn[grid]({args}, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_SIZE_M=group,")
        lines.append("        INPUT_PRECISION=precision, UPCAST=upcast, num_warps=num_warps)")
        lines.append("else:")
        lines.append('    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)')
        lines.append(f"    {kname}[grid]({args}, INPUT_PRECISION=precision, UPCAST=upcast)")
    else:
        lines.append(f"bm, bn, bk, group, num_warps, num_stages = _launch_config(M, N, K, {a}.dtype == torch.float32)")
        lines.append("grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)")
        lines.append(f"{kname}[grid]({args}, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_SIZE_M=group,")
        lines.append("    INPUT_PRECISION=precision, UPCAST=upcast, num_warps=num_warps, num_stages=num_stages)")
    lines.append(_ret(traced, names))
    return lines, _matmul_config(knobs), decorator


# --- the file ---------------------------------------------------------------------------
def generate_source(spec: OperatorSpec, traced: Traced, kind: Classification, knobs: Knobs) -> str:
    names = Names(spec)
    g = traced.graph
    if kind.family == "matmul":
        mm = next(n for n in g.nodes if n.op == "mm")
        a_idx, b_idx = (g.node(i).attrs["index"] for i in mm.args)
        epi_roles = [r if r != "mm" else "full" for r in kind.roles]
        for n in g.nodes:
            n.space = "full"
        text = matmul_kernel(g, epi_roles, names, traced.params, a_idx, b_idx)
        wrapper, helper, decorator = _matmul_wrapper(spec, traced, names, text, knobs, a_idx, b_idx)
        helpers = helper
        traffic = "Compute: 2*M*N*K FLOPs; memory: read a and b, write the M x N output once."
    else:
        assign_spaces(g, kind.roles)
        rows = kind.family != "pointwise"
        if rows:
            text = row_kernel(g, kind.roles, names, traced.params, [o.space for o in traced.outputs], knobs)
        else:
            text = pointwise_kernel(g, kind.roles, names, traced.params, knobs)
        wrapper, helper, decorator = _frame_wrapper(spec, traced, names, text, knobs, rows)
        helpers = _HELPERS + "\n\n\n" + helper
        traffic = ("Memory traffic: each input is read once and each output written once (rows longer than the "
                   "single-pass limit are re-read once per reduction pass), so the kernel is bound by bandwidth."
                   if rows else
                   "Memory traffic: each input is read once (broadcast inputs once per tile) and each output "
                   "written once: the kernel is bound by copy bandwidth.")
    description = " ".join(spec.description.split()) or spec.name
    return render(
        "offline/kernel_file.py.j2",
        name=spec.name,
        description=description,
        family=kind.family,
        summary=kind.summary,
        traffic=traffic,
        # None (the file's own heuristic) reads "auto" in the file's header
        knobs=", ".join(f"{k}={'auto' if v is None else v}" for k, v in knobs.model_dump().items()),
        decorators=decorator,
        kernel_params=_kernel_params(text),
        kernel_body=indent(text.body),
        helpers=helpers,
        signature=spec.signature,
        doc=f"Same signature and results as the reference {spec.name}; the wrapper only allocates, "
            "takes views and launches the kernel.",
        wrapper_body=indent(wrapper),
        main_body=indent(_main_lines(spec, names)),
    )
