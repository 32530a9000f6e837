"""The emitter of a tile stage's kernel (pointwise, reduce and scan stages: emit_tile.py lays them
out, emit_reduce.py and emit_split.py write the reductions' passes): how a program names its indices,
addresses and masks, which space each value lives in, and the statements of its values.

A program owns BLOCK_K positions of the frame's last kept group (`kk`) and one position of every
other kept group (decomposed from the program id, once); with FLAT (a stage of two or more kept
groups whose tiled one is short: a pooled row, a kept dim of size 1) its BLOCK_K positions run flat
over all the kept groups instead, each lane decomposing its own; a reduction loops over the reduced groups,
BLOCK_R elements of the last one at a time (`rr`), the others one at a time (`ro`). Values live in
three spaces: full ([BLOCK_K, BLOCK_R]: per element), row ([BLOCK_K, 1]: per kept position, after a
reduction or loaded once) and scalar.
"""

from __future__ import annotations

from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.stages.access import Port, ports
from kernelgen.offline.stages.emit_values import is_scalar_leaf, pointwise, var
from kernelgen.offline.stages.program import Buffer, Stage


class TileEmitter:
    """One tile stage's kernel as it is written: its lines, and what it knows of the stage."""

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
        self.flat = len(k_groups) > 1  # the kernel has a FLAT form (the host picks it per case)
        self.level = self._levels()
        self.helpers: set[str] = set()  # the file's @triton.jit helpers the kernel calls ("_prod")
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
        if not self.flat:
            self._by_program(L, kt)
            return
        # A tiled group of a few positions (level 2's 35 pools [5, 128, 3, 3] to [5, 128, 1, 1]: 640
        # programs of one lane each, ~5 ms a program in Triton's interpreter, ~3.5 s a call) leaves the
        # tile's lanes idle: FLAT spreads BLOCK_K lanes over every kept group. Each lane's position is
        # decomposed by % and //, so its loads are not provably contiguous (the host takes FLAT only
        # below a 32-position tiled group, where that costs little), and a masked tail lane still lands
        # inside every group (its stores are masked). Never with I64: the host keeps big buffers by program.
        L.append("if FLAT:  # BLOCK_K positions flat over all kept groups, each lane its own")
        sub: list[str] = []
        sub.append("kf = pid * BLOCK_K + tl.arange(0, BLOCK_K)")
        sub.append("kmask = kf < " + " * ".join(f"n{gi}" for gi in self.k_groups))
        sub.append(f"kk = kf % n{kt}")
        sub.append(f"rest = kf // n{kt}")
        col = "[:, None]" if self.two_d else ""
        for gi in reversed(self.k_groups[:-1]):
            sub.append(f"k{gi} = (rest % n{gi}){col}")
            sub.append(f"rest = rest // n{gi}")
        self._kb_terms(sub)
        L.extend("    " + line for line in sub)
        L.append("else:")
        sub = []
        self._by_program(sub, kt)
        L.extend("    " + line for line in sub)

    def _by_program(self, L: list[str], kt: int) -> None:
        """BLOCK_K positions of the tiled group; one position of every other, from the program id."""
        L.append(f"num_kb = tl.cdiv(n{kt}, BLOCK_K)")
        L.append("kb = pid % num_kb")
        if self.k_groups[:-1]:
            L.append("rest = pid // num_kb")
            for gi in reversed(self.k_groups[:-1]):
                L.append(f"k{gi} = (rest % n{gi}).to(tl.int64)")
                L.append(f"rest = rest // n{gi}")
            self._kb_terms(L)
        L.append("kk = kb * BLOCK_K + tl.arange(0, BLOCK_K)")
        L.append(f"kmask = kk < n{kt}")
        L.append("if I64:  # a buffer of 2**31 elements or more: offsets in 64 bits")
        L.append("    kk = kk.to(tl.int64)")

    def _kb_terms(self, L: list[str]) -> None:
        """Each access's offset along the kept groups other than the tiled one."""
        for p in self.ports:
            terms = [p.term(gi, f"k{gi}") for gi in self.k_groups[:-1]]
            terms = [t for t in terms if t]
            if terms:
                L.append(f"{p.name}_kb = " + " + ".join(terms))

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
