"""Assemble a complete `<name>_triton.py` from a traced, classified reference, a knob setting and a
dispatch table.

Python emits what depends on the traced graph (kernelgen.offline.rowgen / rowvariants / matgen:
one statement per IR node, the kernel's arguments) and describes the kernels, the routes and the
host path as data; the text around them lives in templates/offline/ (one template per family,
shared macros in _macros.py.j2). Every route (the base knobs, then one per dispatch entry) needs
the kernels of its code knobs: one @triton.jit function per distinct combination.
"""

from __future__ import annotations

from typing import Any

from kernelgen.offline import knobs as defaults
from kernelgen.offline.classify import Classification
from kernelgen.offline.dispatch import DispatchEntry, Route, code_key, frame_key, literal, routes, table
from kernelgen.offline.fusion import fuse
from kernelgen.offline.knobs import Knobs, MatmulKnobs, PointwiseKnobs
from kernelgen.offline.matgen import matmul_kernel
from kernelgen.offline.naming import Names
from kernelgen.offline.rowgen import assign_spaces, pointwise_kernel, row_kernel
from kernelgen.offline.rowvariants import online_kernel, partial_stats, split_kernels
from kernelgen.offline.selfcheck import main_context
from kernelgen.offline.trace import DtypeRule, FixedDtype, LikeInput, Promoted, Traced
from kernelgen.render import render
from kernelgen.spec import OperatorSpec

ROW_PATHS = {"rows": "a row in registers, or looped once per reduction level",
             "online": "online: one read pass, then the write pass",
             "split": "split rows: partial statistics, then a launch merging them and writing"}


def _dtype_expr(rule: DtypeRule, names: Names) -> str:
    """The output's dtype in _plan, from the signature's dtypes (`x_dtype`)."""
    if isinstance(rule, LikeInput):
        return f"{names.inputs[rule.index]}_dtype"
    if isinstance(rule, FixedDtype):
        return f"torch.{rule.dtype}"
    if isinstance(rule, Promoted):  # a helper in the file: torch.promote_types is an operator
        return "_result_dtype(" + ", ".join(f"{names.inputs[i]}={names.inputs[i]}_dtype" for i in rule.indices) + ")"
    table_ = ", ".join(f"torch.{k}: torch.{v}" for k, v in rule.by_case_dtype.items())
    return f"{{{table_}}}[{names.inputs[0]}_dtype]"


def _route_dtype(spec: OperatorSpec) -> str:
    """The input whose dtype is the case dtype (the dispatch table's key)."""
    return next((i.name for i in spec.inputs if i.dtype is None), spec.input_names[0])


def _variant_name(base: str, key: tuple, fields: tuple[str, ...], default_key: tuple, taken: set[str]) -> str:
    """A kernel's name for a non-base combination of code knobs: the base name and what differs
    from the family's defaults (`_softmax_kernel_online`, `_gelu_kernel_poly_erf_persistent`)."""
    parts = []
    for f, v, d in zip(fields, key, default_key):
        if v != d:
            parts.append(("persistent" if v else "plain") if f == "persistent" else f"{v}_erf" if f == "erf" else str(v))
    name = base + ("".join("_" + p for p in parts) if parts else "_plain")
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _def_line(head: str, params: list[str], width: int = 100) -> str:
    """`def name(a, b, ...):` wrapped under its opening parenthesis past `width` characters."""
    lines, line = [], head
    for i, p in enumerate(params):
        piece = p + ("):" if i == len(params) - 1 else ",")
        if len(line) + 1 + len(piece) > width and not line.endswith("("):
            lines.append(line)
            line = " " * head.index("(") + " " + piece
        else:
            line += ("" if line.endswith("(") else " ") + piece
    return "\n".join(lines + [line])


def _host(spec: OperatorSpec, names: Names, traced: Traced, routes_: list[Route], forms: list[dict],
          pointers: list[str], *, copies: bool, split: bool, sm: bool, key_what: str, l2: bool = False) -> dict[str, Any]:
    """The host path's data: the base knobs, the dispatch table, the plan's fields, the launches.
    `copies`: the pointwise and row families, whose plans may copy inputs and whose outputs may
    take the first input's shape (torch.empty_like)."""
    base = routes_[0].knobs
    params = list(traced.params)
    return {"entry": spec.name, "inputs": names.inputs, "pointers": [p for p in pointers if p not in params + ["partials"]],
            "params": params, "outputs": names.outputs, "returns_tuple": traced.returns_tuple,
            "base": [(k, literal(v)) for k, v in base.model_dump().items()],
            "dispatch": table(routes_, spec) if len(routes_) > 1 else [], "key_what": key_what,
            "imports_functools": sm or l2, "interpreter_sms": defaults.INTERPRETER_SMS, "l2": l2,
            "interpreter_l2": defaults.DEFAULT_L2_BYTES,
            "forms": forms, "copies": copies, "split": split, "like": copies}


def _role_checks(names: Names, roles: list[str], used: list[str]) -> list[dict[str, str]]:
    """Inputs the kernel reads as one value per column, per row or in all (their shapes in the spec's
    cases): a call whose shape varies elsewhere is refused, not read wrongly."""
    checks = []
    for i, (name, role) in enumerate(zip(names.inputs, roles)):
        if name not in used or role == "full":
            continue
        if role == "col":
            checks.append({"name": name, "what": "one value per column", "varies": "along the rows",
                           "cond": f"any(s and d != 1 for s, d in zip(strides[{i}][:-1], shape[:-1]))"})
        elif role == "row":
            checks.append({"name": name, "what": "one value per row", "varies": "along the columns",
                           "cond": f"shape and strides[{i}][-1] and shape[-1] != 1"})
        else:
            checks.append({"name": name, "what": "a single value", "varies": "over the elements",
                           "cond": f"any(s and d != 1 for s, d in zip(strides[{i}], shape))"})
    return checks


def _frame_plan(spec: OperatorSpec, traced: Traced, names: Names, sizes: list[str], *, keep_last: bool,
                dispatch: bool, sm: bool, itemsize: str | None, autotuned: dict | None, split: int,
                roles: list[str], used: list[str], l2: str | None = None) -> dict[str, Any]:
    outputs = []
    for o, info in zip(names.outputs, traced.outputs):
        shape = "shape" if info.space == "full" else ("shape[:-1] + (1,)" if info.keepdim else "shape[:-1]")
        outputs.append({"name": o, "shape": shape, "dtype": _dtype_expr(info.dtype_rule, names)})
    return {"name": spec.name, "inputs": names.inputs, "same_dtype": [names.inputs[i] for i in traced.same_dtype_inputs],
            "keep_last": keep_last, "route_dtype": _route_dtype(spec), "dispatch": dispatch, "sm": sm, "l2": l2,
            "itemsize": itemsize, "sizes": sizes, "autotuned": autotuned, "split": split, "outputs": outputs,
            "out_dtypes": [f"{o}_dtype" for o in names.outputs],
            "expanded": [f"_expanded({x}_shape, {x}_stride, shape)" for x in names.inputs],
            "contiguous": [f"_expanded({x}_shape, _contiguous({x}_shape), shape)" for x in names.inputs],
            "role_checks": _role_checks(names, roles, used)}


def _itemsize(traced: Traced, names: Names) -> str:
    """The widest element the kernel moves, in _plan (the signature's dtypes)."""
    return "max(" + ", ".join([f"{n}_dtype.itemsize" for n in names.inputs] +
                              [f"{o}_dtype.itemsize" for o in names.outputs]) + ")"


def _forms(variants: list[dict], autotuned: str | None) -> list[dict]:
    """The wrapper's launches: the autotuned base first, the base kernel last (the `else`)."""
    forms = [{"kernel": autotuned, "finish": None, "what": "the base kernel, autotuned (GPUs)"}] if autotuned else []
    forms += [{"kernel": v["name"], "finish": v.get("finish"), "what": v["what"]} for v in variants[1:]]
    return forms + [{"kernel": variants[0]["name"], "finish": None, "what": variants[0]["what"]}]


# --- pointwise ----------------------------------------------------------------------------
def _pointwise(spec: OperatorSpec, traced: Traced, kind: Classification, names: Names,
               routes_: list[Route]) -> dict[str, Any]:
    base = routes_[0].knobs
    assert isinstance(base, PointwiseKnobs)
    fields = defaults.CODE_KNOBS[PointwiseKnobs]
    default_key = code_key(PointwiseKnobs())
    kname = f"_{spec.name}_kernel"
    taken = {kname}
    variants: dict[tuple, dict] = {}
    for r in routes_:
        key = code_key(r.knobs)
        if key not in variants:
            name = kname if not variants else _variant_name(kname, key, fields, default_key, taken)
            assert isinstance(r.knobs, PointwiseKnobs)
            kernel = pointwise_kernel(traced.graph, kind.roles, names, traced.params, r.knobs)
            what = ", ".join(f"{f}={v}" for f, v in zip(fields, key))
            variants[key] = {"name": name, "kernel": kernel, "grid": r.knobs.grid, "persistent": r.knobs.persistent,
                             "key": "(" + ", ".join(literal(v) for v in key) + ")", "what": what}
    vs = list(variants.values())
    persistent = any(r.knobs.persistent for r in routes_)
    autotuned = None
    if base.autotune:
        grid = ('lambda meta: (triton.cdiv(n_rows, meta["BLOCK_R"]) * triton.cdiv(n_cols, meta["BLOCK_C"]),)'
                if base.grid == "2d" else 'lambda meta: (triton.cdiv(n_rows * n_cols, meta["BLOCK_SIZE"]),)')
        autotuned = {"kernel": kname, "grid": grid, "meta": "{}",
                     "why": "the autotuned configs pick the tile, num_warps and num_stages"}
    plan = _frame_plan(spec, traced, names, vs[0]["kernel"].sizes, keep_last=False, dispatch=len(routes_) > 1,
                       sm=persistent, itemsize=_itemsize(traced, names), autotuned=autotuned, split=0, roles=kind.roles,
                       used=vs[0]["kernel"].pointers)
    host = _host(spec, names, traced, routes_, _forms(vs, f"{kname}_autotuned" if base.autotune else None),
                 vs[0]["kernel"].pointers, copies=True, split=False, sm=persistent,
                 key_what="the output seen as [product of the leading dims, last dim]")
    return dict(kernels=vs, variants=vs if len(vs) > 1 else [], grids={v["grid"] for v in vs}, persistent=persistent,
                stages=f", num_stages={base.num_stages}" if base.num_stages else "",
                erf_poly=any(r.knobs.erf == "poly" for r in routes_), autotuned=base.autotune,
                pick="_KERNELS[grid, eviction, erf, persistent]" if len(vs) > 1 else kname,
                launch_def=_def_line("def _launch_config(", ["n_rows", "n_cols", "itemsize", "sm_count", "*",
                                                             *PointwiseKnobs.model_fields]), config={"tile": defaults.POINTWISE_TILE,
                                                                      "persistent_warps": defaults.PERSISTENT_WARPS_PER_SM},
                plan=plan, host=host)


# --- row programs -------------------------------------------------------------------------
def _row_variant_keys(r: Route) -> list[tuple]:
    k = r.knobs
    keys = [("rows", k.eviction, k.persistent)]  # the fallback of every route (rows that fit, many rows)
    if k.algorithm in ("online", "split"):
        keys.append((k.algorithm, k.eviction, k.persistent if k.algorithm == "online" else False))
    return keys


def _rows(spec: OperatorSpec, traced: Traced, kind: Classification, names: Names, routes_: list[Route]) -> dict[str, Any]:
    g, out_spaces = traced.graph, [o.space for o in traced.outputs]
    base = routes_[0].knobs
    algorithms = {r.knobs.algorithm for r in routes_} - {None}
    if algorithms & {"online", "split"}:
        fuse(g)  # NotFusible (a ValueError) says why these reductions need one pass per level
    kname = f"_{spec.name}_kernel"
    taken = {kname}
    fields = ("path", "eviction", "persistent")
    variants: dict[tuple, dict] = {}
    for r in routes_:
        for key in _row_variant_keys(r):
            if key in variants:
                continue
            path, eviction, persistent = key
            name = kname if not variants else _variant_name(kname, key, fields, ("rows", "none", False), taken)
            what = ROW_PATHS[path] + (f", {eviction}" if eviction != "none" else "") + (", persistent" if persistent else "")
            v = {"name": name, "kind": path, "persistent": persistent, "what": what,
                 "key": "(" + ", ".join(literal(x) for x in key) + ")"}
            if path == "rows":
                v["kernel"] = row_kernel(g, kind.roles, names, traced.params, out_spaces, eviction)
            elif path == "online":
                v["kernel"] = online_kernel(g, kind.roles, names, traced.params, out_spaces, eviction)
            else:
                v["kernel"] = split_kernels(g, kind.roles, names, traced.params, out_spaces, eviction)
                v["finish"] = f"{name}_finish"
            variants[key] = v
    vs = list(variants.values())
    sm = "split" in algorithms or any(r.knobs.persistent for r in routes_)
    l2 = any(r.knobs.algorithm == "online" and r.knobs.persistent for r in routes_)  # the grid sized by the L2
    multi = len(vs) > 1
    pick = {"rows": (("_KERNELS[path, eviction, persistent]" if "online" in algorithms else
                      '_KERNELS["rows", eviction, persistent]') if multi else kname),
            "split": '_KERNELS["split", eviction, False]'}
    autotuned = None
    if base.autotune:
        autotuned = {"kernel": kname, "grid": "grid",
                     "meta": '{k: v for k, v in meta.items() if k not in ("num_warps", "num_stages")}',
                     "why": "the autotuned configs pick num_warps (and carry num_stages); the sizes come from _launch_config"}
    n_stats = len(partial_stats(fuse(g))) if "split" in algorithms else 0
    plan = _frame_plan(spec, traced, names, vs[0]["kernel"].sizes, keep_last=True, dispatch=len(routes_) > 1,
                       sm=sm, itemsize=None, autotuned=autotuned, split=n_stats, roles=kind.roles,
                       used=vs[0]["kernel"].pointers, l2=_itemsize(traced, names) if l2 else None)
    forms = _forms(vs, f"{kname}_autotuned" if base.autotune else None)
    host = _host(spec, names, traced, routes_, forms, vs[0]["kernel"].pointers, copies=True,
                 split="split" in algorithms, sm=sm, key_what="the output seen as [product of the leading dims, last dim]", l2=l2)
    config = {"single": defaults.ROW_MAX_SINGLE, "single_limit": defaults.ROW_SINGLE_LIMIT, "loop": defaults.ROW_LOOP_BLOCK,
              "tile": defaults.ROW_TILE, "split_min": defaults.SPLIT_MIN_COLS,
              "persistent_warps": defaults.PERSISTENT_WARPS_PER_SM}
    return dict(kernels=vs, variants=vs if multi else [], algorithms=algorithms, persistent=any(r.knobs.persistent for r in routes_), l2=l2,
                stages=f", num_stages={base.num_stages}" if base.num_stages else "",
                one_pass=bool(algorithms & {"online", "split"}), autotuned=base.autotune, pick=pick,
                launch_def=_def_line("def _launch_config(", ["n_rows", "n_cols", "sm_count", *(["itemsize", "l2_bytes"] if l2 else []),
                                                             "*", *type(base).model_fields]),
                config=config, plan=plan, host=host)


# --- matmul -----------------------------------------------------------------------------
def _matmul_key(traced: Traced, a_idx: int, b_idx: int, spec: OperatorSpec):
    a_name, b_name = spec.input_names[a_idx], spec.input_names[b_idx]

    def key(shapes: dict[str, list[int]]) -> tuple[int, int]:
        a, b = shapes[a_name], shapes[b_name]
        if len(a) != 2 or len(b) != 2:
            raise ValueError("matmul operands are 2-D")
        m = a[1] if traced.inputs[a_idx].transposed else a[0]
        n = b[0] if traced.inputs[b_idx].transposed else b[1]
        return max(m, 1), max(n, 1)
    return key


def _matmul_indices(traced: Traced) -> tuple[int, int]:
    mm = next(n for n in traced.graph.nodes if n.op == "mm")
    a_idx, b_idx = (traced.graph.node(i).attrs["index"] for i in mm.args)
    return a_idx, b_idx


def _matmul(spec: OperatorSpec, traced: Traced, kind: Classification, names: Names, routes_: list[Route]) -> dict[str, Any]:
    g = traced.graph
    base = routes_[0].knobs
    assert isinstance(base, MatmulKnobs)
    a_idx, b_idx = _matmul_indices(traced)
    for n in g.nodes:
        n.space = "full"
    epi_roles = [r if r != "mm" else "full" for r in kind.roles]
    kernel = matmul_kernel(g, epi_roles, names, traced.params, a_idx, b_idx)
    a, b = names.inputs[a_idx], names.inputs[b_idx]
    kname = f"_{spec.name}_kernel"
    epilogue = [nm for i, nm in enumerate(names.inputs) if i not in (a_idx, b_idx) and nm in kernel.pointers]
    outputs = [{"name": o, "dtype": _dtype_expr(info.dtype_rule, names)} for o, info in zip(names.outputs, traced.outputs)]
    plan = {"inputs": names.inputs, "same_dtype": [names.inputs[i] for i in traced.same_dtype_inputs],
            "a_transposed": traced.inputs[a_idx].transposed, "b_transposed": traced.inputs[b_idx].transposed,
            "epilogue": epilogue, "dispatch": len(routes_) > 1, "sizes": kernel.sizes, "outputs": outputs,
            "out_dtypes": [f"{o}_dtype" for o in names.outputs]}
    forms = _forms([{"name": kname, "what": "the kernel with the plan's tiles"}], f"{kname}_autotuned" if base.autotune else None)
    host = _host(spec, names, traced, routes_, forms, kernel.pointers, copies=False, split=False, sm=False,
                 key_what="the output [M, N]")
    return dict(kernel=kernel, kernel_name=kname, a=a, b=b, autotuned=base.autotune, config={"group": base.GROUP_SIZE_M},
                launch_def=_def_line("def _launch_config(", ["M", "N", "K", "fp32", "*", *MatmulKnobs.model_fields]),
                plan=plan, host=host)


# --- the file ---------------------------------------------------------------------------
def generate_source(spec: OperatorSpec, traced: Traced, kind: Classification, knobs: Knobs,
                    entries: list[DispatchEntry] | None = None) -> str:
    names = Names(spec)
    if isinstance(knobs, MatmulKnobs):
        a_idx, b_idx = _matmul_indices(traced)
        rs = routes(spec, kind.family, knobs, entries, _matmul_key(traced, a_idx, b_idx, spec))
        template, context = "matmul", _matmul(spec, traced, kind, names, rs)
    else:
        rs = routes(spec, kind.family, knobs, entries, lambda shapes: frame_key([shapes[n] for n in spec.input_names]))
        assign_spaces(traced.graph, kind.roles)
        if isinstance(knobs, PointwiseKnobs):
            template, context = "pointwise", _pointwise(spec, traced, kind, names, rs)
        else:
            template, context = "rows", _rows(spec, traced, kind, names, rs)
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
        main=main_context(spec, names),
        **context,
    )
