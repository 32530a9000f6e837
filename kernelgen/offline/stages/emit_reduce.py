"""The bodies of reduce and scan stages (kernelgen.offline.stages.emit_tile has the layout). What each
reduction kind starts from, steps, reduces and finishes with is a row of the reduction table
(kernelgen.offline.frontend.reductions); the code here branches on a row's form only."""

from __future__ import annotations

from typing import Callable

from kernelgen.offline.frontend.reductions import Reduction, reduction
from kernelgen.offline.stages.emit_values import var
from kernelgen.offline.stages.tile_emitter import TileEmitter

BIG = "4611686018427387904"  # 2**62: larger than any index, in int64
TILE = "[BLOCK_K, BLOCK_R]"


def _row(em: TileEmitter, r: int) -> tuple[Reduction, str, str]:
    """Value r's reduction, its operand as named in the kernel, and the accumulator's dtype."""
    v = em.g[r]
    kind = v.attrs.get("kind", "gather")  # a gather: the one element whose index matches
    row = reduction(kind)
    return row, var(em.g, v.args[0]), row.acc_dtype(kind, em.g[v.args[0]].is_float)


def _mask(em: TileEmitter, r: int, row: Reduction) -> str:
    """The lanes value r takes: the tile's, and for a pick (a gather) the one whose index matches."""
    return f"mask & ({em.ridx()} == {var(em.g, em.g[r].args[1])})" if row.form == "pick" else "mask"


def _src(x: str, acc: str) -> str:
    """The operand as the accumulator takes it: integers summed in int64 (no int32 overflow)."""
    return x if acc == "tl.float32" else f"{x}.to({acc})"


def reduced(em: TileEmitter, row: Reduction, tile: str) -> str:
    """`tile` reduced across its lanes (axis 1) by `row`, kept [BLOCK_K, 1]; the helper it calls noted."""
    if row.helper:
        em.helpers.add(row.helper)
    return row.reduced(tile) + "[:, None]"


def single(em: TileEmitter, r: int, depth: int) -> None:
    """One reduction over a tile that holds every reduced element."""
    ind = "    " * depth
    row, x, acc = _row(em, r)
    L = em.lines
    if row.form == "index":
        L.append(ind + f"best{r} = {reduced(em, row, f'tl.where(mask, {x}, {row.fill(acc)})')}")
        L.append(ind + f"v{r} = tl.min(tl.where(mask & ({x} == best{r}), {em.ridx()}, {BIG}), 1)[:, None]")
    elif row.form == "moments":
        # the count from the reduced lanes alone (every kept row has the same ones), not from the 2-D
        # mask: Triton 3.6 unrolled that sum per element into every thread -- level 2's 17, a 16,384-wide
        # single pass in 16 warps, compiled to 191,131 lines of PTX and 62,228 bytes of spill stores
        # (ptxas -v, sm_90a), 36.8 ms a call on an H100 (2026-12-07); this way 1,278 lines, no spills
        L.append(ind + f"cnt{r} = tl.sum(rmask.to(tl.float32), 0)")
        L.append(ind + f"mean{r} = tl.sum(tl.where(mask, {x}, 0.0), 1)[:, None] / tl.maximum(cnt{r}, 1.0)")
        L.append(ind + f"dev{r} = tl.where(mask, {x} - mean{r}, 0.0)")
        L.append(ind + f"v{r} = tl.sum(dev{r} * dev{r}, 1)[:, None] / (cnt{r} - {em.g[r].attrs['correction']})")
    else:
        L.append(ind + f"v{r} = {reduced(em, row, f'tl.where({_mask(em, r, row)}, {_src(x, acc)}, {row.fill(acc)})')}")


def acc_init(em: TileEmitter, r: int, depth: int) -> None:
    ind = "    " * depth
    row, _, acc = _row(em, r)
    L = em.lines
    if row.form == "moments":  # per lane (Welford): no cross-lane reduction inside the loop
        L.append(ind + f"cnt{r} = tl.zeros([1, BLOCK_R], tl.float32)")
        for a in ("mean", "m2"):
            L.append(ind + f"{a}{r} = tl.zeros({TILE}, tl.float32)")
        return
    start = f"tl.zeros({TILE}, {acc})" if row.identity == 0 else f"tl.full({TILE}, {row.fill(acc)}, {acc})"
    L.append(ind + f"acc{r} = {start}")
    if row.form == "index":
        L.append(ind + f"idx{r} = tl.zeros({TILE}, tl.int64)")


def acc_update(em: TileEmitter, r: int, depth: int) -> None:
    ind = "    " * depth
    row, x, acc = _row(em, r)
    L = em.lines
    if row.form == "index":
        L.append(ind + f"take{r} = mask & ({row.step.format(x=x, acc=f'acc{r}')})  # later equal values keep the first index")
        L.append(ind + f"acc{r} = tl.where(take{r}, {x}, acc{r})")
        L.append(ind + f"idx{r} = tl.where(take{r}, {em.ridx()}, idx{r})")
    elif row.form == "moments":  # Welford per lane: one reciprocal per reduced lane, no block-wide sum per step
        L.append(ind + f"cnt{r} = cnt{r} + rmask[None, :].to(tl.float32)")
        L.append(ind + f"d{r} = tl.where(mask, {x} - mean{r}, 0.0)")
        L.append(ind + f"mean{r} = mean{r} + d{r} * (1.0 / tl.maximum(cnt{r}, 1.0))")
        L.append(ind + f"m2{r} = m2{r} + d{r} * tl.where(mask, {x} - mean{r}, 0.0)")
    else:
        L.append(ind + row.step.format(acc=f"acc{r}", mask=_mask(em, r, row), x=_src(x, acc)))


def acc_finish(em: TileEmitter, r: int, depth: int) -> None:
    ind = "    " * depth
    row = _row(em, r)[0]
    L = em.lines
    if row.form == "index":
        L.append(ind + f"best{r} = {reduced(em, row, f'acc{r}')}")
        L.append(ind + f"v{r} = tl.min(tl.where(acc{r} == best{r}, idx{r}, {BIG}), 1)[:, None]")
    elif row.form == "moments":
        lane_merge(em, r, depth)
        L.append(ind + f"v{r} = m2{r} / (cnt{r} - {em.g[r].attrs['correction']})")
    else:
        L.append(ind + f"v{r} = {reduced(em, row, f'acc{r}')}")


def lane_merge(em: TileEmitter, r: int, depth: int) -> None:
    """A var's per-lane Welford states merged into one per kept position (Chan et al.'s parallel
    formula): cnt{r}, mean{r}, m2{r} become [BLOCK_K, 1]."""
    ind = "    " * depth
    L = em.lines
    L.append(ind + f"tot{r} = tl.sum(cnt{r}, 1)[:, None]")
    L.append(ind + f"mu{r} = tl.sum(cnt{r} * mean{r}, 1)[:, None] / tl.maximum(tot{r}, 1.0)")
    L.append(ind + f"m2{r} = tl.sum(m2{r} + cnt{r} * (mean{r} - mu{r}) * (mean{r} - mu{r}), 1)[:, None]")
    L.append(ind + f"cnt{r} = tot{r}")
    L.append(ind + f"mean{r} = mu{r}")


def rows_after(em: TileEmitter, level: int) -> list[int]:
    """Row and scalar values of this level (computed once per program, after its reductions)."""
    return [u for u in em.st.values if em.level[u] == level and em.space(u) in ("row", "scalar")
            and (em.g[u].op not in ("reduce", "gather") or u in em.load_port)]


def reduce_body(em: TileEmitter) -> None:
    g, st = em.g, em.st
    reductions = [u for u in st.values if g[u].op in ("reduce", "gather") and u not in em.load_port]
    levels = max(em.level[u] for u in reductions)
    stores_full = [p for p in em.ports if p.store and em.space(p.value) == "full"]
    stores_row = [p for p in em.ports if p.store and em.space(p.value) != "full"]
    em.prologue()
    L = em.lines
    # SINGLE: one tile holds every reduced element of the program's rows
    L.append("if SINGLE:")
    L.append("    ro = 0")
    if em.r_groups[:-1]:
        em.r_outer(1)
    em.r_tile(1, "0")
    order = [u for u in st.values]
    for u in order:
        if g[u].op in ("reduce", "gather") and u not in em.load_port:
            single(em, u, 1)
        else:
            s = em.statement(u)
            if s is not None:
                L.append("    " + s)
    for p in em.ports:
        if p.store:
            L.append("    " + em.store(p))
    L.append("else:")
    # the values computed once per program: row loads and what follows from them
    em.emit(rows_after(em, 0), 1)
    for level in range(1, levels + 1):
        mine = [u for u in reductions if em.level[u] == level]
        L.append(f"    # pass {level}: " + ", ".join(f"v{u} = {g[u].attrs.get('kind', 'gather')}" for u in mine))
        for r in mine:
            acc_init(em, r, 1)
        _loop(em, [g[r].args[0] for r in mine] + [g[r].args[1] for r in mine if _row(em, r)[0].form == "pick"],
              lambda depth: [acc_update(em, r, depth) for r in mine])
        for r in mine:
            acc_finish(em, r, 1)
        em.emit(rows_after(em, level), 1)
    for p in stores_row:
        L.append("    " + em.store(p))
    if stores_full:
        L.append("    # the write pass")
        _loop(em, [p.value for p in stores_full], lambda depth: [L.append("    " * depth + em.store(p)) for p in stores_full])


def _loop(em: TileEmitter, roots: list[int], inner: Callable[[int], object]) -> None:
    """A loop over every reduced element (outer groups one at a time, the tiled one by blocks),
    computing the full values `roots` need from loads, then `inner(depth)`."""
    L = em.lines
    depth = 1
    if em.r_groups[:-1]:
        outer = " * ".join(f"n{gi}" for gi in em.r_groups[:-1])
        L.append(f"    for ro in range(0, {outer}):")
        depth = 2
        em.r_outer(depth)
    else:
        L.append("    ro = 0")
    rt = em.r_groups[-1]
    L.append("    " * depth + f"for r0 in range(0, n{rt}, BLOCK_R):")
    depth += 1
    em.r_tile(depth, "r0")
    em.emit(em.cone(roots, {"row", "scalar"}), depth)
    inner(depth)


def scan_body(em: TileEmitter) -> None:
    """A running scan along the scanned group: each block scanned in registers, plus the carry of
    the blocks before it."""
    g, st = em.g, em.st
    scan = st.anchor
    kind = g[scan].attrs["kind"]
    x = g[scan].args[0]
    row = reduction(kind)
    em.prologue()
    L = em.lines
    ident = row.fill("tl.float32")
    L.append(f"carry = tl.full([BLOCK_K, 1], {ident}, tl.float32)")
    L.append("ro = 0")
    rt = em.r_groups[-1]
    L.append(f"for r0 in range(0, n{rt}, BLOCK_R):")
    em.r_tile(1, "r0")
    em.emit(em.cone([x], {"row", "scalar"}), 1)
    xs = var(g, x)
    L.append(f"    block = tl.where(mask, {xs}, {ident})")
    L.append(f"    v{scan} = " + row.pairwise.format(a=row.scan.format(t="block", axis="1"), b="carry"))
    L.append("    carry = " + row.pairwise.format(a="carry", b=reduced(em, row, "block")))
    after = [u for u in st.values if u > scan]
    em.emit([u for u in after if u not in em.cone([x], {"row", "scalar"})], 1)
    for p in em.ports:
        if p.store:
            L.append("    " + em.store(p))
