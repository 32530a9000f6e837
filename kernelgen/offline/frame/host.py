"""What the pointwise, row and matmul files' host paths share, as data for templates/offline/: the
output dtypes, the base knobs and the dispatch table, the plan's fields, the launches, the kernel
names of a dispatch table's variants, and the render of the file around a family's context.

Python emits what depends on the frame graph (each family's kernel.py: one statement per IR node,
the kernel's arguments) and describes the kernels, the routes and the host path as data; the text
around them lives in templates/offline/ (one template per family, shared macros in _macros.py.j2).
"""

from __future__ import annotations

from typing import Any

from kernelgen.offline.dispatch import Route, knobs_assignment, table, wrapped
from kernelgen.offline.frame.launch import DEFAULT_L2_BYTES, INTERPRETER_SMS
from kernelgen.offline.frame.view import FrameView
from kernelgen.offline.frontend.outputs import DtypeRule, FixedDtype, LikeInput, Promoted
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.naming import Names
from kernelgen.offline.runtime import RUNTIME_IMPORT, with_runtime_import
from kernelgen.offline.selfcheck import main_context
from kernelgen.render import render
from kernelgen.spec import OperatorSpec


def dtype_expr(rule: DtypeRule, names: Names) -> str:
    """The output's dtype in _plan, from the signature's dtypes (`x_dtype`)."""
    if isinstance(rule, LikeInput):
        return f"{names.inputs[rule.index]}_dtype"
    if isinstance(rule, FixedDtype):
        return f"torch.{rule.dtype}"
    if isinstance(rule, Promoted):  # a helper in the file: torch.promote_types is an operator
        return "result_dtype(" + ", ".join(f"{names.inputs[i]}={names.inputs[i]}_dtype" for i in rule.indices) + ")"
    table_ = ", ".join(f"torch.{k}: torch.{v}" for k, v in rule.by_case_dtype.items())
    return f"{{{table_}}}[{names.inputs[0]}_dtype]"


def route_dtype(spec: OperatorSpec) -> str:
    """The input whose dtype is the case dtype (the dispatch table's key)."""
    return next((i.name for i in spec.inputs if i.dtype is None), spec.input_names[0])


def variant_name(base: str, key: tuple, fields: tuple[str, ...], default_key: tuple, taken: set[str]) -> str:
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


def def_line(head: str, params: list[str], width: int = 100) -> str:
    """`def name(a, b, ...):` wrapped under its opening parenthesis past `width` characters."""
    return wrapped(head, params, "):", width)


def host_context(spec: OperatorSpec, names: Names, view: FrameView, routes_: list[Route], forms: list[dict],
          pointers: list[str], *, copies: bool, split: bool, sm: bool, key_what: str, l2: bool = False,
          pack: list[str] | None = None) -> dict[str, Any]:
    """The host path's data: the base knobs, the dispatch table, the plan's fields, the launches.
    `copies`: the pointwise and row families, whose plans may copy inputs and whose outputs may
    take the first input's shape (torch.empty_like). `pack`: the matmul family's operands, which
    its plan may copy K-major (_pack)."""
    base = routes_[0].knobs
    params = list(view.params)
    return {"entry": spec.name, "inputs": names.inputs, "pointers": [p for p in pointers if p not in params + ["partials"]],
            "params": params, "outputs": names.outputs, "returns_tuple": view.returns_tuple,
            "base_lines": knobs_assignment("_BASE", base.model_dump()),
            "dispatch": table(routes_, spec) if len(routes_) > 1 else [], "key_what": key_what,
            "l2": l2,
            "forms": forms, "copies": copies, "split": split, "like": copies, "pack": pack}


def role_checks(names: Names, roles: list[str], used: list[str]) -> list[dict[str, str]]:
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


def frame_plan(spec: OperatorSpec, view: FrameView, names: Names, sizes: list[str], *, keep_last: bool,
                dispatch: bool, sm: bool, itemsize: str | None, autotuned: dict | None, split: int,
                roles: list[str], used: list[str], l2: str | None = None) -> dict[str, Any]:
    outputs = []
    for o, info in zip(names.outputs, view.outputs):
        shape = "shape" if info.space == "full" else ("shape[:-1] + (1,)" if info.keepdim else "shape[:-1]")
        outputs.append({"name": o, "shape": shape, "dtype": dtype_expr(info.dtype_rule, names)})
    return {"name": spec.name, "inputs": names.inputs, "same_dtype": [names.inputs[i] for i in view.same_dtype_inputs],
            "keep_last": keep_last, "route_dtype": route_dtype(spec), "dispatch": dispatch, "sm": sm, "l2": l2,
            "interpreter_sms": INTERPRETER_SMS, "interpreter_l2": DEFAULT_L2_BYTES,
            "itemsize": itemsize, "sizes": sizes, "autotuned": autotuned, "split": split, "outputs": outputs,
            "out_dtypes": [f"{o}_dtype" for o in names.outputs],
            "expanded": [f"expanded_strides({x}_shape, {x}_stride, shape)" for x in names.inputs],
            "shapes": [f"{x}_shape" for x in names.inputs],
            "role_checks": role_checks(names, roles, used)}


def itemsize_expr(view: FrameView, names: Names) -> str:
    """The widest element the kernel moves, in _plan (the signature's dtypes)."""
    return "max(" + ", ".join([f"{n}_dtype.itemsize" for n in names.inputs] +
                              [f"{o}_dtype.itemsize" for o in names.outputs]) + ")"


def launch_forms(variants: list[dict], autotuned: str | None) -> list[dict]:
    """The wrapper's launches: the autotuned base first, the base kernel last (the `else`)."""
    forms = [{"kernel": autotuned, "finish": None, "what": "the base kernel, autotuned (GPUs)"}] if autotuned else []
    forms += [{"kernel": v["name"], "finish": v.get("finish"), "what": v["what"]} for v in variants[1:]]
    return forms + [{"kernel": variants[0]["name"], "finish": None, "what": variants[0]["what"]}]


def render_file(template: str, spec: OperatorSpec, view: FrameView, family: str, summary: str, knobs: KnobsModel,
                names: Names, context: dict[str, Any]) -> str:
    """templates/offline/<template>.py.j2 around a family's context (the kernels, plan and host)."""
    return with_runtime_import(render(
        f"offline/{template}.py.j2",
        runtime_import=RUNTIME_IMPORT,
        name=spec.name,
        description=" ".join(spec.description.split()) or spec.name,
        family=family,
        summary=summary,
        # None (the file's own heuristic) reads "auto" in the file's header
        knobs=", ".join(f"{k}={'auto' if v is None else v}" for k, v in knobs.model_dump().items()),
        signature=spec.signature,
        promotes=any(isinstance(o.dtype_rule, Promoted) for o in view.outputs),
        main=main_context(spec, names),
        **context,
    ))
