"""The bodies of reduce and scan stages (kernelgen.offline.stages.emit_tile has the layout)."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.stages.emit_values import var
from kernelgen.offline.unsupported import unsupported

NAN_ALL = "propagate_nan=tl.PropagateNan.ALL"
BIG = "4611686018427387904"  # 2**62: larger than any index, in int64
INF = 'float("inf")'


def _acc_dtype(em: Any, x: int) -> str:
    return "tl.float32" if em.g[x].is_float else "tl.int64"


def single(em: Any, r: int, depth: int) -> None:
    """One reduction over a tile that holds every reduced element."""
    ind = "    " * depth
    v = em.g[r]
    x = var(em.g, v.args[0])
    kind = v.attrs.get("kind", "gather")
    L = em.lines
    if kind == "sum":
        zero = "0.0" if em.g[v.args[0]].is_float else "0"
        src = x if em.g[v.args[0]].is_float else f"{x}.to(tl.int64)"
        L.append(ind + f"v{r} = tl.sum(tl.where(mask, {src}, {zero}), 1)[:, None]")
    elif kind in ("max", "min"):
        _float_only(em, v)
        L.append(ind + f"v{r} = tl.{kind}(tl.where(mask, {x}, {'-' if kind == 'max' else ''}{INF}), 1)[:, None]")
    elif kind == "prod":
        em.needs_prod = True
        L.append(ind + f"v{r} = tl.reduce(tl.where(mask, {x}, 1.0), 1, _prod)[:, None]")
    elif kind in ("argmax", "argmin"):
        _float_only(em, v)
        fn, fill = ("max", f"-{INF}") if kind == "argmax" else ("min", INF)
        L.append(ind + f"best{r} = tl.{fn}(tl.where(mask, {x}, {fill}), 1)[:, None]")
        L.append(ind + f"v{r} = tl.min(tl.where(mask & ({x} == best{r}), {em.ridx()}, {BIG}), 1)[:, None]")
    elif kind == "var":
        L.append(ind + f"cnt{r} = tl.sum(mask.to(tl.float32), 1)[:, None]")
        L.append(ind + f"mean{r} = tl.sum(tl.where(mask, {x}, 0.0), 1)[:, None] / tl.maximum(cnt{r}, 1.0)")
        L.append(ind + f"dev{r} = tl.where(mask, {x} - mean{r}, 0.0)")
        L.append(ind + f"v{r} = tl.sum(dev{r} * dev{r}, 1)[:, None] / (cnt{r} - {v.attrs['correction']})")
    else:  # gather along the reduced dim: the one element whose index matches
        idx = var(em.g, v.args[1])
        L.append(ind + f"v{r} = tl.sum(tl.where(mask & ({em.ridx()} == {idx}), {x}, 0.0), 1)[:, None]")


def _float_only(em: Any, v: Any) -> None:
    if not em.g[v.args[0]].is_float:
        unsupported(f"a {v.attrs['kind']} over integers")


def acc_init(em: Any, r: int, depth: int) -> None:
    ind = "    " * depth
    v = em.g[r]
    kind = v.attrs.get("kind", "gather")
    L = em.lines
    tile = "[BLOCK_K, BLOCK_R]"
    if kind in ("sum", "gather"):
        L.append(ind + f"acc{r} = tl.zeros({tile}, {_acc_dtype(em, v.args[0]) if kind == 'sum' else 'tl.float32'})")
    elif kind in ("max", "min", "argmax", "argmin"):
        _float_only(em, v)
        fill = f"-{INF}" if kind in ("max", "argmax") else INF
        L.append(ind + f"acc{r} = tl.full({tile}, {fill}, tl.float32)")
        if kind.startswith("arg"):
            L.append(ind + f"idx{r} = tl.zeros({tile}, tl.int64)")
    elif kind == "prod":
        L.append(ind + f"acc{r} = tl.full({tile}, 1.0, tl.float32)")
    elif kind == "var":  # per lane (Welford): no cross-lane reduction inside the loop
        L.append(ind + f"cnt{r} = tl.zeros([1, BLOCK_R], tl.float32)")
        for a in ("mean", "m2"):
            L.append(ind + f"{a}{r} = tl.zeros({tile}, tl.float32)")


def acc_update(em: Any, r: int, depth: int) -> None:
    ind = "    " * depth
    v = em.g[r]
    x = var(em.g, v.args[0])
    kind = v.attrs.get("kind", "gather")
    L = em.lines
    if kind == "sum":
        src = x if em.g[v.args[0]].is_float else f"{x}.to(tl.int64)"
        L.append(ind + f"acc{r} += tl.where(mask, {src}, 0)")
    elif kind == "gather":
        L.append(ind + f"acc{r} += tl.where(mask & ({em.ridx()} == {var(em.g, v.args[1])}), {x}, 0.0)")
    elif kind in ("max", "min"):
        L.append(ind + f"acc{r} = tl.where(mask, tl.{'maximum' if kind == 'max' else 'minimum'}(acc{r}, {x}, {NAN_ALL}), acc{r})")
    elif kind == "prod":
        L.append(ind + f"acc{r} = tl.where(mask, acc{r} * {x}, acc{r})")
    elif kind in ("argmax", "argmin"):
        cmp = ">" if kind == "argmax" else "<"
        L.append(ind + f"take{r} = mask & ({x} {cmp} acc{r})  # later equal values keep the first index")
        L.append(ind + f"acc{r} = tl.where(take{r}, {x}, acc{r})")
        L.append(ind + f"idx{r} = tl.where(take{r}, {em.ridx()}, idx{r})")
    elif kind == "var":  # Welford per lane: one reciprocal per reduced lane, no block-wide sum per step
        L.append(ind + f"cnt{r} = cnt{r} + rmask[None, :].to(tl.float32)")
        L.append(ind + f"d{r} = tl.where(mask, {x} - mean{r}, 0.0)")
        L.append(ind + f"mean{r} = mean{r} + d{r} * (1.0 / tl.maximum(cnt{r}, 1.0))")
        L.append(ind + f"m2{r} = m2{r} + d{r} * tl.where(mask, {x} - mean{r}, 0.0)")


def acc_finish(em: Any, r: int, depth: int) -> None:
    ind = "    " * depth
    v = em.g[r]
    kind = v.attrs.get("kind", "gather")
    L = em.lines
    if kind in ("sum", "gather"):
        L.append(ind + f"v{r} = tl.sum(acc{r}, 1)[:, None]")
    elif kind in ("max", "min"):
        L.append(ind + f"v{r} = tl.{kind}(acc{r}, 1)[:, None]")
    elif kind == "prod":
        em.needs_prod = True
        L.append(ind + f"v{r} = tl.reduce(acc{r}, 1, _prod)[:, None]")
    elif kind in ("argmax", "argmin"):
        fn = "max" if kind == "argmax" else "min"
        L.append(ind + f"best{r} = tl.{fn}(acc{r}, 1)[:, None]")
        L.append(ind + f"v{r} = tl.min(tl.where(acc{r} == best{r}, idx{r}, {BIG}), 1)[:, None]")
    elif kind == "var":
        lane_merge(em, r, depth)
        L.append(ind + f"v{r} = m2{r} / (cnt{r} - {v.attrs['correction']})")


def lane_merge(em: Any, r: int, depth: int) -> None:
    """A var's per-lane Welford states merged into one per kept position (Chan et al.'s parallel
    formula): cnt{r}, mean{r}, m2{r} become [BLOCK_K, 1]."""
    ind = "    " * depth
    L = em.lines
    L.append(ind + f"tot{r} = tl.sum(cnt{r}, 1)[:, None]")
    L.append(ind + f"mu{r} = tl.sum(cnt{r} * mean{r}, 1)[:, None] / tl.maximum(tot{r}, 1.0)")
    L.append(ind + f"m2{r} = tl.sum(m2{r} + cnt{r} * (mean{r} - mu{r}) * (mean{r} - mu{r}), 1)[:, None]")
    L.append(ind + f"cnt{r} = tot{r}")
    L.append(ind + f"mean{r} = mu{r}")


def rows_after(em: Any, level: int) -> list[int]:
    """Row and scalar values of this level (computed once per program, after its reductions)."""
    return [u for u in em.st.values if em.level[u] == level and em.space(u) in ("row", "scalar")
            and (em.g[u].op not in ("reduce", "gather") or u in em.load_port)]


def reduce_body(em: Any) -> None:
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
        _loop(em, [g[r].args[0] for r in mine] + [g[r].args[1] for r in mine if g[r].op == "gather"],
              lambda depth: [acc_update(em, r, depth) for r in mine])
        for r in mine:
            acc_finish(em, r, 1)
        em.emit(rows_after(em, level), 1)
    for p in stores_row:
        L.append("    " + em.store(p))
    if stores_full:
        L.append("    # the write pass")
        _loop(em, [p.value for p in stores_full], lambda depth: [L.append("    " * depth + em.store(p)) for p in stores_full])


def _loop(em: Any, roots: list[int], inner: Any) -> None:
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


def scan_body(em: Any) -> None:
    """A running scan along the scanned group: each block scanned in registers, plus the carry of
    the blocks before it."""
    g, st = em.g, em.st
    scan = st.anchor
    kind = g[scan].attrs["kind"]
    x = g[scan].args[0]
    em.prologue()
    L = em.lines
    ident = "0.0" if kind == "sum" else "1.0"
    L.append(f"carry = tl.full([BLOCK_K, 1], {ident}, tl.float32)")
    L.append("ro = 0")
    rt = em.r_groups[-1]
    L.append(f"for r0 in range(0, n{rt}, BLOCK_R):")
    em.r_tile(1, "r0")
    em.emit(em.cone([x], {"row", "scalar"}), 1)
    xs = var(g, x)
    L.append(f"    block = tl.where(mask, {xs}, {ident})")
    if kind == "sum":
        L.append(f"    v{scan} = tl.cumsum(block, 1) + carry")
        L.append("    carry = carry + tl.sum(block, 1)[:, None]")
    else:
        em.needs_prod = True
        L.append(f"    v{scan} = tl.cumprod(block, 1) * carry")
        L.append("    carry = carry * tl.reduce(block, 1, _prod)[:, None]")
    after = [u for u in st.values if u > scan]
    em.emit([u for u in after if u not in em.cone([x], {"row", "scalar"})], 1)
    for p in em.ports:
        if p.store:
            L.append("    " + em.store(p))
