"""Kernel text of the tile stages: pointwise, reduce and scan (tile_emitter.py names the indices,
addresses and spaces). SINGLE (the reduced elements fit one block): everything is loaded once and
reduced in registers; otherwise one loop per reduction level, recomputing the pointwise work from
loads, then a write loop (emit_reduce.py; a split form shares the reduced elements among programs:
emit_split.py). A scan loops over its dim carrying the running total.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.stages.access import Port
from kernelgen.offline.stages.emit_reduce import reduce_body, scan_body
from kernelgen.offline.stages.emit_split import SplitKernel, split_kernel, splittable
from kernelgen.offline.stages.program import Buffer, Stage
from kernelgen.offline.stages.tile_emitter import TileEmitter
from kernelgen.offline.unsupported import unsupported


@dataclass
class TileKernel:
    name: str
    kind: str  # pointwise | reduce | scan
    params: list[tuple[str, str]]  # (argument, comment)
    body: list[str]
    ports: list[Port]
    groups: list[list[int]]  # frame dims per group
    k_groups: list[int]  # kept groups, the tiled one last
    r_groups: list[int]  # reduced groups, the tiled one last
    sizes: list[int] = field(default_factory=list)  # `size` values passed as c<id>
    params_used: list[str] = field(default_factory=list)
    levels: int = 0
    helpers: tuple[str, ...] = ()  # the file's @triton.jit helpers it calls ("_prod")
    split: Optional[SplitKernel] = None  # reduce stages: the form that shares a kept block's reduction
    one_pass: bool = False  # a reduce stage that reads its elements once (one level, no write pass)
    flat: bool = False  # two or more kept groups: a FLAT form, the tile flat over all of them


def tile_kernel(g: Graph, st: Stage, buffers: dict[str, Buffer], name: str) -> TileKernel:
    em = TileEmitter(g, st, buffers, name)
    if not em.k_groups:
        unsupported("a stage with no kept dimension")  # the scheduler gives every reduction one
    if st.kind == "pointwise":
        _pointwise_body(em)
    elif st.kind == "reduce":
        reduce_body(em)
    else:
        scan_body(em)
    params = _params(em)
    split = None
    if st.kind == "reduce" and splittable(em):
        sem = TileEmitter(g, st, buffers, name.removesuffix("_kernel") + "_split_kernel")
        split = split_kernel(sem, params)
        em.helpers |= sem.helpers
    return TileKernel(name, st.kind, params, em.lines, em.ports, st.groups, em.k_groups, em.r_groups,
                      sizes=[u for u in st.values if g[u].op == "size"],
                      params_used=sorted({g[u].attrs["name"] for u in st.values if g[u].op == "param"}),
                      levels=max(em.level.values(), default=0), helpers=tuple(sorted(em.helpers)), split=split,
                      one_pass=st.kind == "reduce" and max(em.level.values(), default=0) == 1 and
                      not any(p.store and em.space(p.value) == "full" for p in em.ports),
                      flat=em.flat)


def _pointwise_body(em: TileEmitter) -> None:
    em.prologue()
    em.emit([u for u in em.st.values], 0)
    for p in em.ports:
        if p.store:
            em.lines.append(em.store(p))


def _params(em: TileEmitter) -> list[tuple[str, str]]:
    g, st = em.g, em.st
    out: list[tuple[str, str]] = []
    for p in em.ports:
        what = "written" if p.store else "read"
        out.append((f"{p.name}_ptr", f"{p.buffer}, {what}" + (f" through {', '.join(s[0] for s in p.access.views)}"
                                                                if p.access.views else "")))
    for name in sorted({g[u].attrs["name"] for u in st.values if g[u].op == "param"}):
        out.append((name, f"scalar param {name}"))
    for u in st.values:
        if g[u].op == "size":
            out.append((f"c{u}", f"the size {g[u].attrs['expr']}, as a number"))
    for gi, grp in enumerate(st.groups):
        role = "reduced" if gi in em.r_groups else "kept"
        out.append((f"n{gi}", f"{role} group {gi}: frame dims {grp}"))
    for p in em.ports:
        if p.offset:
            out.append((f"{p.name}_off", f"{p.name}: element offset of its view"))
        for gi in p.groups:
            out.append((p.stride(gi), f"{p.name}: element stride along group {gi}" if gi == p.groups[0] else ""))
    out.append(("BLOCK_K: tl.constexpr", "kept positions per program (the last kept group)"))
    if st.kind != "pointwise":
        out.append(("BLOCK_R: tl.constexpr", "reduced elements per step (the last reduced group)"))
    if st.kind == "reduce":
        out.append(("SINGLE: tl.constexpr", "True: the reduced elements fit one block and are read once"))
    if em.flat:
        out.append(("FLAT: tl.constexpr", "True: BLOCK_K positions flat over all kept groups (a short tiled group)"))
    out.append(("I64: tl.constexpr", "64-bit offsets (a buffer of 2**31 elements or more)"))
    return out
