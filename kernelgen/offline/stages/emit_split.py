"""The split form of a reduce stage: its reduced elements shared among `n_split` programs per kept
block, for reductions with few kept positions (a norm or a loss down to a scalar, a per-channel
statistic over a large batch), where one program per kept block would leave most SMs idle
(KernelBench's FrobeniusNorm ran 1 program over 1.9G elements: 0.011x eager on an H200).

One kernel, launched once per PHASE on a (kept blocks, n_split) grid (the file's wrapper):
  PHASE l <= levels: each program combines the partials of the levels before l (every program of a
      kept block the same way, in the same order: deterministic), then reduces level l over its own
      `steps` steps of BLOCK_R elements and writes one partial per reduction into the workspace;
  PHASE levels + 1: combines every level, writes the per-kept-position outputs (split 0 only), and
      runs the write pass over its own steps.
The workspace (fp32) holds [slot, split, kept position] with the kept positions contiguous: a
reduction takes one slot (sum, max, min, prod), a variance three (count, mean, M2: Chan et al.'s
parallel merge): a reduction table row's `slots` (kernelgen.offline.frontend.reductions). Integer
sums, arg-reductions and gathers (rows whose form has no partial) keep the unsplit kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kernelgen.offline.frontend.reductions import reduction
from kernelgen.offline.stages.emit_reduce import acc_finish, acc_init, acc_update, lane_merge, reduced, rows_after
from kernelgen.offline.stages.tile_emitter import TileEmitter


@dataclass
class SplitKernel:
    name: str
    params: list[tuple[str, str]]
    body: list[str]
    phases: int  # launches: one per reduction level, then the finish
    slots: int  # fp32 workspace values per kept position and split
    writes: bool  # the finish has a write pass (runs on every split, else on one)


def splittable(em: TileEmitter) -> bool:
    """Whether every reduction of the stage has a partial form the workspace can hold."""
    for u in em.st.values:
        v = em.g[u]
        if v.op in ("reduce", "gather") and u not in em.load_port:
            if not reduction(v.attrs.get("kind", "gather")).splits or not em.g[v.args[0]].is_float:
                return False
    return bool(em.r_groups)


def split_kernel(em: TileEmitter, unsplit_params: list[tuple[str, str]]) -> SplitKernel:
    """The split kernel's text from a fresh emitter of the stage (its lines are written here)."""
    g, st = em.g, em.st
    reductions = [u for u in st.values if g[u].op == "reduce" and u not in em.load_port]
    levels = max(em.level[u] for u in reductions)
    slot, at = {}, 0
    for r in reductions:
        slot[r] = at
        at += reduction(g[r].attrs["kind"]).slots
    full = [p for p in em.ports if p.store and em.space(p.value) == "full"]
    rows = [p for p in em.ports if p.store and em.space(p.value) != "full"]
    em.prologue()
    L = em.lines
    rt = em.r_groups[-1]
    outer = " * ".join(f"n{gi}" for gi in em.r_groups[:-1]) or "1"
    L += ["sid = tl.program_id(1)  # this program's share of the reduced elements",
          "wk = pid * BLOCK_K + tl.arange(0, BLOCK_K)  # the kept positions' place in the workspace",
          "kp = tl.num_programs(0) * BLOCK_K",
          "ss = tl.arange(0, SPLIT_BLOCK)",
          "smask = ss < n_split",
          f"nrb = tl.cdiv(n{rt}, BLOCK_R)",
          f"t_lo = sid * steps  # steps of BLOCK_R elements, over {outer} x nrb",
          f"t_hi = tl.minimum(t_lo + steps, {outer} * nrb)"]
    for phase in range(1, levels + 2):
        L.append(f"if PHASE == {phase}:")
        em.emit(rows_after(em, 0), 1)
        for level in range(1, min(phase, levels + 1)):
            for r in reductions:
                if em.level[r] == level:
                    _combine(em, r, slot[r], 1)
            em.emit(rows_after(em, level), 1)
        if phase <= levels:
            mine = [r for r in reductions if em.level[r] == phase]
            L.append("    # partials of " + ", ".join(f"v{u} = {g[u].attrs['kind']}" for u in mine))
            for r in mine:
                acc_init(em, r, 1)
            _loop(em, [g[r].args[0] for r in mine], lambda depth: [acc_update(em, r, depth) for r in mine])
            for r in mine:
                _partial(em, r, slot[r], 1)
            continue
        if rows:
            L.append("    if sid == 0:  # one split writes the per-kept-position outputs")
            L.extend("        " + em.store(p) for p in rows)
        if full:
            L.append("    # the write pass over this program's share")
            _loop(em, [p.value for p in full], lambda depth: [L.append("    " * depth + em.store(p)) for p in full])
    params = [p for p in unsplit_params if not p[0].startswith("SINGLE")]
    first_const = next(i for i, p in enumerate(params) if "tl.constexpr" in p[0])
    params[first_const:first_const] = [("ws_ptr", "fp32 workspace: partials [slot, split, kept position]"),
                                       ("n_split", "programs sharing each kept block's reduced elements"),
                                       ("steps", "BLOCK_R steps per program")]
    params[-1:-1] = [("PHASE: tl.constexpr", f"1..{levels}: a level's partials; {levels + 1}: combine and write"),
                     ("SPLIT_BLOCK: tl.constexpr", "n_split rounded up to a power of two")]
    return SplitKernel(em.name, params, L, levels + 1, at, bool(full))


def _loop(em: TileEmitter, roots: list[int], inner: Callable[[int], object]) -> None:
    """This program's steps (t_lo..t_hi) of the flat reduced range: the outer reduced groups' index
    and a BLOCK_R block of the tiled one per step."""
    L = em.lines
    L.append("    for t in range(t_lo, t_hi):")
    ind = "        "
    step = "t"
    if em.r_groups[:-1]:
        L.append(ind + "ro = t // nrb")
        em.r_outer(2)
        step = "(t % nrb)"
    else:
        L.append(ind + "ro = 0")
    L.append(ind + f"rs = {step} * BLOCK_R")
    L.append(ind + "if I64:")
    L.append(ind + f"    rs = {step}.to(tl.int64) * BLOCK_R")
    em.r_tile(2, "rs")
    em.emit(em.cone(roots, {"row", "scalar"}), 2)
    inner(2)


def _ws(slot: int, k: int = 0) -> str:
    return f"ws_ptr + ({slot + k} * n_split + ss[None, :]) * kp + wk[:, None]"


def _partial(em: TileEmitter, r: int, slot: int, depth: int) -> None:
    """Reduce the accumulator over its lanes and store this split's partial."""
    ind = "    " * depth
    L = em.lines
    where = f"ws_ptr + ({{}} * n_split + sid) * kp + wk[:, None]"
    if reduction(em.g[r].attrs["kind"]).form == "moments":
        lane_merge(em, r, depth)
        for k, a in enumerate(("cnt", "mean", "m2")):
            L.append(ind + f"tl.store({where.format(slot + k)}, {a}{r} + tl.zeros([BLOCK_K, 1], tl.float32), "
                           "mask=kmask[:, None])")
        return
    acc_finish(em, r, depth)
    L.append(ind + f"tl.store({where.format(slot)}, v{r}, mask=kmask[:, None])")


def _combine(em: TileEmitter, r: int, slot: int, depth: int) -> None:
    """v{r} from every split's partial, in split order (each program of a kept block alike)."""
    ind = "    " * depth
    v = em.g[r]
    row = reduction(v.attrs["kind"])
    L = em.lines
    pmask = "kmask[:, None] & smask[None, :]"
    if row.form == "moments":
        L.append(ind + f"pc{r} = tl.load({_ws(slot)}, mask={pmask}, other=0.0)")
        L.append(ind + f"pm{r} = tl.load({_ws(slot, 1)}, mask={pmask}, other=0.0)")
        L.append(ind + f"pq{r} = tl.load({_ws(slot, 2)}, mask={pmask}, other=0.0)")
        L.append(ind + f"tot{r} = tl.sum(pc{r}, 1)[:, None]")
        L.append(ind + f"mu{r} = tl.sum(pc{r} * pm{r}, 1)[:, None] / tl.maximum(tot{r}, 1.0)")
        L.append(ind + f"v{r} = tl.sum(pq{r} + pc{r} * (pm{r} - mu{r}) * (pm{r} - mu{r}), 1)[:, None] / "
                       f"(tot{r} - {v.attrs['correction']})")
        return
    part = f"tl.load({_ws(slot)}, mask={pmask}, other={row.fill('tl.float32')})"
    L.append(ind + f"v{r} = {reduced(em, row, part)}")
