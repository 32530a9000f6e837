"""The pointwise family's file as data for templates/offline/pointwise.py.j2: one kernel per
combination of code knobs its routes use, the plan over the collapsed frame, the host path."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.dispatch import Route, literal
from kernelgen.offline.frame.classify import Classification
from kernelgen.offline.frame.host import def_line, launch_forms, frame_plan, host_context, itemsize_expr, variant_name
from kernelgen.offline.frame.launch import PERSISTENT_WARPS_PER_SM
from kernelgen.offline.frame.view import FrameView
from kernelgen.offline.naming import Names
from kernelgen.offline.pointwise.kernel import pointwise_kernel
from kernelgen.offline.pointwise.knobs import POINTWISE_TILE, PointwiseKnobs
from kernelgen.spec import OperatorSpec


def pointwise_context(spec: OperatorSpec, view: FrameView, kind: Classification, names: Names,
               routes_: list[Route]) -> dict[str, Any]:
    base = routes_[0].knobs
    assert isinstance(base, PointwiseKnobs)
    fields = PointwiseKnobs.code_knobs
    default_key = PointwiseKnobs().code_key()
    kname = f"_{spec.name}_kernel"
    taken = {kname}
    variants: dict[tuple, dict] = {}
    for r in routes_:
        key = r.knobs.code_key()
        if key not in variants:
            name = kname if not variants else variant_name(kname, key, fields, default_key, taken)
            assert isinstance(r.knobs, PointwiseKnobs)
            kernel = pointwise_kernel(view.graph, kind.roles, names, view.params, r.knobs)
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
    plan = frame_plan(spec, view, names, vs[0]["kernel"].sizes, keep_last=False, dispatch=len(routes_) > 1,
                       sm=persistent, itemsize=itemsize_expr(view, names), autotuned=autotuned, split=0, roles=kind.roles,
                       used=vs[0]["kernel"].pointers)
    host = host_context(spec, names, view, routes_, launch_forms(vs, f"{kname}_autotuned" if base.autotune else None),
                 vs[0]["kernel"].pointers, copies=True, split=False, sm=persistent,
                 key_what="the output seen as [product of the leading dims, last dim]")
    return dict(kernels=vs, variants=vs if len(vs) > 1 else [], grids={v["grid"] for v in vs}, persistent=persistent,
                stages=f", num_stages={base.num_stages}" if base.num_stages else "",
                erf_poly=any(r.knobs.erf == "poly" for r in routes_), autotuned=base.autotune,
                pick="_KERNELS[grid, eviction, erf, persistent]" if len(vs) > 1 else kname,
                launch_def=def_line("def _launch_config(", ["n_rows", "n_cols", "itemsize", "sm_count", "*",
                                                             *PointwiseKnobs.model_fields]), config={"tile": POINTWISE_TILE,
                                                                      "persistent_warps": PERSISTENT_WARPS_PER_SM},
                plan=plan, host=host)
