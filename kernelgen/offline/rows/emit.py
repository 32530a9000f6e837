"""The row families' file as data for templates/offline/rows.py.j2: the kernels every route needs
(a row in registers or looped, online, split), the plan over the [rows, cols] frame, the host path."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.dispatch import Route, literal
from kernelgen.offline.frame.classify import Classification
from kernelgen.offline.frame.host import def_line, launch_forms, frame_plan, host_context, itemsize_expr, variant_name
from kernelgen.offline.frame.launch import PERSISTENT_WARPS_PER_SM
from kernelgen.offline.frame.view import FrameView
from kernelgen.offline.naming import Names
from kernelgen.offline.rows import knobs as defaults
from kernelgen.offline.rows.fusion import fuse
from kernelgen.offline.rows.kernel import row_kernel
from kernelgen.offline.rows.variants import online_kernel, partial_stats, split_kernels
from kernelgen.spec import OperatorSpec

ROW_PATHS = {"rows": "a row in registers, or looped once per reduction level",
             "online": "online: one read pass, then the write pass",
             "split": "split rows: partial statistics, then a launch merging them and writing"}


def _row_variant_keys(r: Route) -> list[tuple]:
    k = r.knobs
    keys = [("rows", k.eviction, k.persistent)]  # the fallback of every route (rows that fit, many rows)
    if k.algorithm in ("online", "split"):
        keys.append((k.algorithm, k.eviction, k.persistent if k.algorithm == "online" else False))
    return keys


def rows_context(spec: OperatorSpec, view: FrameView, kind: Classification, names: Names, routes_: list[Route]) -> dict[str, Any]:
    g, out_spaces = view.graph, [o.space for o in view.outputs]
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
            name = kname if not variants else variant_name(kname, key, fields, ("rows", "none", False), taken)
            what = ROW_PATHS[path] + (f", {eviction}" if eviction != "none" else "") + (", persistent" if persistent else "")
            v = {"name": name, "kind": path, "persistent": persistent, "what": what,
                 "key": "(" + ", ".join(literal(x) for x in key) + ")"}
            if path == "rows":
                v["kernel"] = row_kernel(g, kind.roles, names, view.params, out_spaces, eviction)
            elif path == "online":
                v["kernel"] = online_kernel(g, kind.roles, names, view.params, out_spaces, eviction)
            else:
                v["kernel"] = split_kernels(g, kind.roles, names, view.params, out_spaces, eviction)
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
    plan = frame_plan(spec, view, names, vs[0]["kernel"].sizes, keep_last=True, dispatch=len(routes_) > 1,
                       sm=sm, itemsize=None, autotuned=autotuned, split=n_stats, roles=kind.roles,
                       used=vs[0]["kernel"].pointers, l2=itemsize_expr(view, names) if l2 else None)
    forms = launch_forms(vs, f"{kname}_autotuned" if base.autotune else None)
    host = host_context(spec, names, view, routes_, forms, vs[0]["kernel"].pointers, copies=True,
                 split="split" in algorithms, sm=sm, key_what="the output seen as [product of the leading dims, last dim]", l2=l2)
    config = {"single": defaults.ROW_MAX_SINGLE, "single_limit": defaults.ROW_SINGLE_LIMIT, "loop": defaults.ROW_LOOP_BLOCK,
              "tile": defaults.ROW_TILE, "split_min": defaults.SPLIT_MIN_COLS,
              "persistent_warps": PERSISTENT_WARPS_PER_SM}
    return dict(kernels=vs, variants=vs if multi else [], algorithms=algorithms, persistent=any(r.knobs.persistent for r in routes_), l2=l2,
                stages=f", num_stages={base.num_stages}" if base.num_stages else "",
                one_pass=bool(algorithms & {"online", "split"}), autotuned=base.autotune, pick=pick,
                launch_def=def_line("def _launch_config(", ["n_rows", "n_cols", "sm_count", *(["itemsize", "l2_bytes"] if l2 else []),
                                                             "*", *type(base).model_fields]),
                config=config, plan=plan, host=host)
