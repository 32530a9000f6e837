"""Kernel text of the tile stages: pointwise, reduce and scan.

A program owns BLOCK_K positions of the frame's last kept group (`kk`) and one position of every
other kept group (decomposed from the program id, once); a reduction loops over the reduced groups,
BLOCK_R elements of the last one at a time (`rr`), the others one at a time (`ro`). Values live in
three spaces: full ([BLOCK_K, BLOCK_R]: per element), row ([BLOCK_K, 1]: per kept position, after a
reduction or loaded once) and scalar. SINGLE (the reduced elements fit one block): everything is
loaded once and reduced in registers; otherwise one loop per reduction level, recomputing the
pointwise work from loads, then a write loop. A scan loops over its dim carrying the running total.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from kernelgen.offline.stages.access import Port, ports
from kernelgen.offline.stages.emit_split import SplitKernel, split_kernel, splittable
from kernelgen.offline.stages.emit_values import is_scalar_leaf, pointwise, var
from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.stages.program import Buffer, Stage
from kernelgen.offline.unsupported import unsupported

NAN_ALL = "propagate_nan=tl.PropagateNan.ALL"
BIG_INDEX = "9223372036854775807"


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
    needs_prod: bool = False
    split: Optional[SplitKernel] = None  # reduce stages: the form that shares a kept block's reduction
    one_pass: bool = False  # a reduce stage that reads its elements once (one level, no write pass)


class _Emitter:
    def __init__(self, g: Graph, st: Stage, buffers: dict[str, Buffer], name: str):
        self.g, self.st, self.name = g, st, name
        self.ports = ports(g, st, buffers)
        self.load_port = {p.value: p for p in self.ports if not p.store}
        red = set(st.reduced) if st.kind in ("reduce", "scan") else set()
        self.r_groups = [gi for gi, grp in enumerate(st.groups) if set(grp) & red]
        k_groups = [gi for gi, grp in enumerate(st.groups) if not set(grp) & red]
        # the tiled kept group: the last one that is not a literal 1 (a cat's [n, 1] part tiles over n)
        wide = [gi for gi in k_groups if any(str(st.frame[d]) != "1" for d in st.groups[gi])]
        if wide and wide[-1] != k_groups[-1]:
            k_groups.remove(wide[-1])
            k_groups.append(wide[-1])
        self.k_groups = k_groups
        self.two_d = st.kind in ("reduce", "scan")
        self.level = self._levels()
        self.needs_prod = False
        self.lines: list[str] = []

    # --- spaces and levels -------------------------------------------------------------------------
    def space(self, u: int) -> str:
        v = self.g[u]
        if is_scalar_leaf(v):
            return "scalar"
        sp = self.st.spaces[u]
        if self.st.kind == "reduce" and sp == "scalar" and self.level[u] > 0:
            return "row"  # a reduction over everything: one kept position
        return sp

    def _levels(self) -> dict[int, int]:
        lv: dict[int, int] = {}
        for u in self.st.values:
            v = self.g[u]
            if u in self.load_port:  # a value an earlier stage computed: read, level 0
                lv[u] = 0
                continue
            base = max((lv.get(a, 0) for a in v.args), default=0)
            lv[u] = base + 1 if v.op in ("reduce", "gather") else base
        return lv

    # --- index expressions -------------------------------------------------------------------------
    def kk(self) -> str:
        return "kk[:, None]" if self.two_d else "kk"

    def tile_mask(self, space: str) -> str:
        if not self.two_d:
            return "kmask"
        return "mask" if space == "full" else "kmask[:, None]"

    def frame_index(self, u: int) -> str:
        """An iota: the index along its frame dim (its own group: the wrapper never merges it)."""
        f = next(f for f in self.st.maps[u] if f is not None)
        gi = next(i for i, grp in enumerate(self.st.groups) if f in grp)
        if gi == self.k_groups[-1]:
            return self.kk()
        if self.r_groups and gi == self.r_groups[-1]:
            return "rr[None, :]"
        return f"k{gi}" if gi in self.k_groups else f"r{gi}"

    def address(self, p: Port, space: str) -> str:
        parts = [f"{p.name}_ptr"]
        if p.offset:
            parts.append(f"{p.name}_off")
        if any(gi in p.groups for gi in self.k_groups[:-1]):
            parts.append(f"{p.name}_kb")
        if any(gi in p.groups for gi in self.r_groups[:-1]) and space == "full":
            parts.append(f"{p.name}_rb")
        kt = self.k_groups[-1]
        if kt in p.groups:
            parts.append(f"{self.kk()} * {p.stride(kt)}")
        if space == "full" and self.r_groups and self.r_groups[-1] in p.groups:
            parts.append(f"rr[None, :] * {p.stride(self.r_groups[-1])}")
        return " + ".join(parts)

    def load(self, u: int) -> str:
        p = self.load_port[u]
        v = self.g[u]
        sp = self.space(u)
        up = ".to(tl.float32)" if v.is_float else ""
        if sp == "scalar":
            return f"v{u} = tl.load({self.address(p, sp)}){up}"
        addr = self.address(p, sp)
        blocked = self.k_groups[-1] in p.groups or (sp == "full" and self.r_groups and self.r_groups[-1] in p.groups)
        if not blocked:  # no tiled index in the address: one pointer, a block of lanes to load it
            addr = f"tl.broadcast_to({addr}, {self._shape(sp)})"
        return f"v{u} = tl.load({addr}, mask={self.tile_mask(sp)}, other=0){up}"

    def _shape(self, sp: str) -> str:
        return "[BLOCK_K, BLOCK_R]" if (self.two_d and sp == "full") else ("[BLOCK_K, 1]" if self.two_d else "[BLOCK_K]")

    def store(self, p: Port) -> str:
        sp = self.space(p.value)
        val = var(self.g, p.value)
        shape = self._shape(sp)
        if sp == "scalar":
            val = f"(tl.zeros({shape}, tl.float32) + {val})"
            sp = "row" if self.two_d else "full"
        elif self.two_d and sp == "full" and self._partial(p.value):
            val = f"tl.broadcast_to({val}, {shape})"
        addr = self.address(p, sp)
        if self.k_groups[-1] not in p.groups:  # the output does not vary along the tiled kept group
            addr = f"tl.broadcast_to({addr}, {shape})"
        return f"tl.store({addr}, {val}.to({p.name}_ptr.dtype.element_ty), mask={self.tile_mask(sp)})"

    def _partial(self, u: int) -> bool:
        """A full value built from row-shaped parts only (a frame index, a broadcast) is not yet a tile."""
        seen, stack = set(), [u]
        while stack:
            w = stack.pop()
            if w in seen:
                continue
            seen.add(w)
            if w in self.load_port and self.space(w) == "full":
                return False
            if self.g[w].op in ("reduce", "gather", "scan") or w in self.load_port:
                continue
            stack.extend(self.g[w].args)
        return True

    # --- statements --------------------------------------------------------------------------------
    def statement(self, u: int) -> str | None:
        v = self.g[u]
        if v.op in ("param", "const", "size", "full"):
            return None
        if u in self.load_port:
            return self.load(u)
        if v.op == "iota":
            return f"v{u} = {self.frame_index(u)}"
        if v.op == "view":
            return f"v{u} = {var(self.g, v.args[0])}"  # a relabelling: the frame map did the work
        if v.op in ("reduce", "gather", "scan", "mm"):
            raise AssertionError(f"v{u}: {v.op} is emitted by its pass")
        return f"v{u} = {pointwise(self.g, v)}"

    def cone(self, roots: list[int], stop: set[str]) -> list[int]:
        """Values needed for `roots` in this stage, stopping at spaces in `stop` (computed before)."""
        seen: set[int] = set()
        stack = list(roots)
        members = set(self.st.values)
        while stack:
            u = stack.pop()
            if u in seen or u not in members:
                continue
            if self.space(u) in stop and u not in roots:
                continue
            seen.add(u)
            if u in self.load_port:
                continue
            if self.g[u].op not in ("reduce", "gather") or u not in roots:
                stack.extend(self.g[u].args)
        return sorted(seen)

    def emit(self, us: list[int], depth: int) -> None:
        for u in us:
            if self.g[u].op in ("reduce", "gather", "scan") and u not in self.load_port:
                continue  # computed by its pass (one loaded from an earlier stage's buffer is a load here)
            s = self.statement(u)
            if s is not None:
                self.lines.append("    " * depth + s)

    # --- program prologue -------------------------------------------------------------------------
    def prologue(self) -> None:
        L = self.lines
        kt = self.k_groups[-1]
        L.append("pid = tl.program_id(0)")
        L.append(f"num_kb = tl.cdiv(n{kt}, BLOCK_K)")
        L.append("kb = pid % num_kb")
        if self.k_groups[:-1]:
            L.append("rest = pid // num_kb")
            for gi in reversed(self.k_groups[:-1]):
                L.append(f"k{gi} = (rest % n{gi}).to(tl.int64)")
                L.append(f"rest = rest // n{gi}")
            for p in self.ports:
                terms = [p.term(gi, f"k{gi}") for gi in self.k_groups[:-1]]
                terms = [t for t in terms if t]
                if terms:
                    L.append(f"{p.name}_kb = " + " + ".join(terms))
        L.append("kk = kb * BLOCK_K + tl.arange(0, BLOCK_K)")
        L.append(f"kmask = kk < n{kt}")
        L.append("if I64:  # a buffer of 2**31 elements or more: offsets in 64 bits")
        L.append("    kk = kk.to(tl.int64)")

    def r_outer(self, depth: int) -> None:
        """The decomposition of `ro` over the outer reduced groups, and each access's offset there."""
        ind = "    " * depth
        outer = self.r_groups[:-1]
        self.lines.append(ind + "rest_r = ro")
        for gi in reversed(outer):
            self.lines.append(ind + f"r{gi} = (rest_r % n{gi}).to(tl.int64)")
            self.lines.append(ind + f"rest_r = rest_r // n{gi}")
        for p in self.ports:
            terms = [t for t in (p.term(gi, f"r{gi}") for gi in outer) if t]
            if terms:
                self.lines.append(ind + f"{p.name}_rb = " + " + ".join(terms))

    def r_tile(self, depth: int, start: str) -> None:
        ind = "    " * depth
        rt = self.r_groups[-1]
        self.lines.append(ind + f"rr = {start} + tl.arange(0, BLOCK_R)")
        self.lines.append(ind + f"rmask = rr < n{rt}")
        self.lines.append(ind + "mask = kmask[:, None] & rmask[None, :]")
        self.lines.append(ind + "if I64:")
        self.lines.append(ind + "    rr = rr.to(tl.int64)")

    def ridx(self) -> str:
        """The flat index over all reduced groups (argmax, gather), in 64 bits: ro * n_tiled + rr."""
        rt = self.r_groups[-1]
        return f"(ro * n{rt} + rr[None, :].to(tl.int64))" if self.r_groups[:-1] else "rr[None, :].to(tl.int64)"


def tile_kernel(g: Graph, st: Stage, buffers: dict[str, Buffer], name: str) -> TileKernel:
    em = _Emitter(g, st, buffers, name)
    if not em.k_groups:
        unsupported("a stage with no kept dimension")  # the scheduler gives every reduction one
    if st.kind == "pointwise":
        _pointwise_body(em)
    elif st.kind == "reduce":
        from kernelgen.offline.stages.emit_reduce import reduce_body

        reduce_body(em)
    else:
        from kernelgen.offline.stages.emit_reduce import scan_body

        scan_body(em)
    params = _params(em)
    split = None
    if st.kind == "reduce" and splittable(em):
        sem = _Emitter(g, st, buffers, name.removesuffix("_kernel") + "_split_kernel")
        split = split_kernel(sem, params)
        em.needs_prod = em.needs_prod or sem.needs_prod
    return TileKernel(name, st.kind, params, em.lines, em.ports, st.groups, em.k_groups, em.r_groups,
                      sizes=[u for u in st.values if g[u].op == "size"],
                      params_used=sorted({g[u].attrs["name"] for u in st.values if g[u].op == "param"}),
                      levels=max(em.level.values(), default=0), needs_prod=em.needs_prod, split=split,
                      one_pass=st.kind == "reduce" and max(em.level.values(), default=0) == 1 and
                      not any(p.store and em.space(p.value) == "full" for p in em.ports))


def _pointwise_body(em: _Emitter) -> None:
    em.prologue()
    em.emit([u for u in em.st.values], 0)
    for p in em.ports:
        if p.store:
            em.lines.append(em.store(p))


def _params(em: _Emitter) -> list[tuple[str, str]]:
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
    out.append(("I64: tl.constexpr", "64-bit offsets (a buffer of 2**31 elements or more)"))
    return out
