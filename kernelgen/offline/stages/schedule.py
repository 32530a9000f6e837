"""Cut the IR into stages (kernel launches) and the buffers between them.

Every reduction over one frame and one set of dims, every matmul and every scan is an anchor of a
stage; the pointwise work that depends on an anchor joins its stage (an epilogue: per kept position,
or a write pass over the frame), and pointwise work on loads alone is recomputed wherever it is
needed (a prologue). A value crosses stages through a buffer: an fp32 temporary, or an output. Views
that move elements (a real reshape, permute, slice, flip) apply to loads: a view of a computed value
makes that value a buffer first. A `cat` is a buffer each part is written into (a slice of it).
"""

from __future__ import annotations

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.stages.frames import NotInFrame, fits, frame_strides, groups, invert, is_relabel, solve
from kernelgen.offline.frontend.ir import Graph, Value
from kernelgen.offline.stages.program import Access, Buffer, Program, Stage
from kernelgen.offline.unsupported import unsupported

LEAF_OPS = ("input", "param", "const", "size", "full", "iota")
SCALAR_OPS = ("param", "const", "size")


class _Scheduler:
    def __init__(self, g: Graph, input_names: list[str], output_names: list[str]):
        self.g = g
        self.live = g.live()
        self.users = g.users()
        self.input_names = input_names
        self.output_names = output_names
        self.stage_of: dict[int, int] = {}  # computed value -> stage
        self.access: dict[int, Access] = {}  # leafish load-able value -> its buffer access
        self.buffer_of: dict[int, str] = {}  # materialised value -> buffer name
        self.buffers: dict[str, Buffer] = {}
        self.stages: list[Stage] = []
        self.leafish: set[int] = set()
        self.writers: dict[str, set[int]] = {}  # buffer -> stages writing it
        for i, name in enumerate(input_names):
            self.buffers[name] = Buffer(name, "input", (), index=i)

    # --- helpers -----------------------------------------------------------------------------------
    def v(self, i: int) -> Value:
        return self.g[i]

    def new_stage(self, kind: str, frame: tuple, reduced: tuple = (), anchor: int = -1) -> Stage:
        st = Stage(len(self.stages), kind, tuple(frame), tuple(reduced), anchor=anchor)
        self.stages.append(st)
        return st

    def materialise(self, u: int, *, dtype: str | None = "temp") -> str:
        """The buffer holding computed value u (created on first use), written by u's stage."""
        if u in self.buffer_of:
            return self.buffer_of[u]
        val = self.v(u)
        name = f"t{sum(1 for b in self.buffers.values() if b.kind == 'temp')}"
        self.buffers[name] = Buffer(name, "temp", val.shape, dtype="float32" if val.is_float else val.dtype, value=u)
        self.buffer_of[u] = name
        if u in self.stage_of:
            self.store(self.stages[self.stage_of[u]], u, Access(name, [], ()))
        return name

    def deps(self, u: int) -> tuple[set[int], set[int]]:
        """(stages a value can join: where its computed operands are computed; stages it must come
        after: who writes the buffers its loads read). A stage that writes a buffer cannot also read it
        back: its programs would read elements other programs have not written yet."""
        if u in self.stage_of:
            return {self.stage_of[u]}, set()
        if u in self.access:
            return set(), set(self.writers.get(self.access[u].buffer, ()))
        join: set[int] = set()
        after: set[int] = set()
        for a in self.v(u).args:
            j, f = self.deps(a)
            join |= j
            after |= f
        return join, after

    def store(self, st: Stage, u: int, access: Access) -> None:
        st.stores.append((u, access))
        self.writers.setdefault(access.buffer, set()).add(st.id)

    def loadable(self, u: int) -> bool:
        return u in self.leafish

    # --- the walk ----------------------------------------------------------------------------------
    def run(self) -> Program:
        order = [v for v in self.g.values if v.id in self.live]
        for v in order:
            self.place(v)
        returns = [self.output(k, o) for k, o in enumerate(self.g.outputs)]
        for st in self.stages:
            self.finish(st)
        return Program(self.buffers, self.stages, returns)

    def place(self, v: Value) -> None:
        if v.op in LEAF_OPS:
            self.leafish.add(v.id)
            if v.op == "input":
                self.buffers[self.input_names[v.attrs["index"]]].shape = v.shape
                self.access[v.id] = Access(self.input_names[v.attrs["index"]], [], ())
            return
        if v.op == "view":
            self.place_view(v)
            return
        if v.op == "reduce" or v.op == "gather":
            self.place_reduce(v)
            return
        if v.op in ("mm", "conv"):  # a matmul or a convolution: its operands are read from buffers
            for a in v.args:
                if a in self.access:
                    continue
                if self.loadable(a):  # a prologue (computed from loads): a stage of its own writes it
                    self.compute_prologue(a)
                else:
                    self.loadify(a)
            st = self.new_stage("matmul" if v.op == "mm" else "conv", v.shape, anchor=v.id)
            self.stage_of[v.id] = st.id
            return
        if v.op == "scan":
            x = v.args[0]
            if not self.loadable(x):
                self.loadify(x)
            st = self.new_stage("scan", v.shape, (v.attrs["dim"],), anchor=v.id)
            self.stage_of[v.id] = st.id
            return
        if v.op == "cat":
            self.place_cat(v)
            return
        if v.op == "pad":
            self.place_pad(v)
            return
        self.place_pointwise(v)

    def loadify(self, u: int) -> None:
        """Make computed value u readable by later stages: its buffer, an access with no views."""
        name = self.materialise(u)
        self.leafish.add(u)
        self.access[u] = Access(name, [], ())

    def place_view(self, v: Value) -> None:
        src = v.args[0]
        step = (v.attrs["kind"], {k: x for k, x in v.attrs.items() if k != "kind"}, v.shape)
        if src in self.leafish:
            base = self.access.get(src)
            if base is None:  # a view of a constant or a pointwise prologue
                if self.v(src).op in ("full",) or is_relabel(self.g, v):
                    self.leafish.add(v.id)  # a constant tensor of another shape; a relabelled prologue value
                    return
                self.compute_prologue(src)
                base = self.access[src]
            self.leafish.add(v.id)
            self.access[v.id] = Access(base.buffer, base.views + [step], ())
            return
        if is_relabel(self.g, v):
            self.stage_of[v.id] = self.stage_of[src]
            return
        self.loadify(src)
        self.leafish.add(v.id)
        self.access[v.id] = Access(self.access[src].buffer, [step], ())

    def compute_prologue(self, u: int) -> None:
        """A value computed from loads alone, that a moving view needs in memory: a stage of its own,
        before every stage that would otherwise recompute it."""
        if any(u in st.values for st in self.stages) or any(self.stage_of.get(w) is not None for w in self.users[u]
                                                            if w != u and self.v(w).op != "view"):
            unsupported(f"a {self.v(u).op} result that is both computed in a kernel and reshaped")
        st = self.new_stage("pointwise", self.v(u).shape)
        self.stage_of[u] = st.id
        self.leafish.discard(u)
        self.loadify(u)

    def place_reduce(self, v: Value) -> None:
        x = v.args[0]
        frame = self.v(x).shape
        dims = tuple(v.attrs["dims"]) if v.op == "reduce" else (v.attrs["dim"],)
        if v.op == "gather":
            idx = v.args[1]
            if not S.is_one(self.v(idx).shape[dims[0]]):
                unsupported("a gather of more than one element per row")
        join: set[int] = set()
        after: set[int] = set()
        for a in v.args:
            j, f = self.deps(a)
            join |= j
            after |= f
        for st in reversed(self.stages):
            if st.kind == "reduce" and S.same_shape(st.frame, frame) and st.reduced == dims and \
                    all(n <= st.id for n in join) and all(n < st.id for n in after):
                break
        else:
            st = None
        for a in v.args:
            if a in self.stage_of and (st is None or self.stage_of[a] != st.id):
                self.loadify(a)
        if st is None:
            st = self.new_stage("reduce", frame, dims)
        self.stage_of[v.id] = st.id
        if v.op == "gather":
            st.unmergeable.add(dims[0])

    def place_cat(self, v: Value) -> None:
        name = f"t{sum(1 for b in self.buffers.values() if b.kind == 'temp')}"
        self.buffers[name] = Buffer(name, "temp", v.shape, dtype="float32" if v.is_float else v.dtype, value=v.id)
        self.buffer_of[v.id] = name
        dim, offset = v.attrs["dim"], S.expr(0)
        for p in v.args:
            pv = self.v(p)
            length = pv.shape[dim]
            step = ("slice", {"dim": dim, "start": offset, "step": 1}, pv.shape)
            if p in self.stage_of:
                st = self.stages[self.stage_of[p]]
            else:
                st = self.new_stage("pointwise", pv.shape)
                self.stage_of[p] = st.id  # a copy (or fill) stage: the part computed from loads here
                self.leafish.discard(p)
            self.store(st, p, Access(name, [step], ()))
            offset = offset + length
        self.leafish.add(v.id)
        self.access[v.id] = Access(name, [], ())

    def place_pad(self, v: Value) -> None:
        """A padded copy: one buffer, its interior written from the value (in the stage computing it,
        or a copy stage) and each border slab from a constant, every part through its slice views."""
        name = f"t{sum(1 for b in self.buffers.values() if b.kind == 'temp')}"
        self.buffers[name] = Buffer(name, "temp", v.shape, dtype="float32" if v.is_float else v.dtype, value=v.id)
        self.buffer_of[v.id] = name
        for p, region in zip(v.args, v.attrs["regions"]):
            steps, shape = [], list(v.shape)
            for kind, attrs in region:
                shape[attrs["dim"]] = self.v(p).shape[attrs["dim"]]
                steps.append((kind, attrs, tuple(shape)))
            if p in self.stage_of:
                st = self.stages[self.stage_of[p]]
            elif p in self.access:  # a buffer (an input): a copy stage loads it
                st = self.new_stage("pointwise", self.v(p).shape)
            else:
                st = self.new_stage("pointwise", self.v(p).shape)
                self.stage_of[p] = st.id  # a constant slab, or a prologue computed from loads here
                self.leafish.discard(p)
            self.store(st, p, Access(name, steps, ()))
        self.leafish.add(v.id)
        self.access[v.id] = Access(name, [], ())

    def place_pointwise(self, v: Value) -> None:
        join: set[int] = set()
        after: set[int] = set()
        for a in v.args:
            j, f = self.deps(a)
            join |= j
            after |= f
        if join and max(join) > max(after, default=-1) and fits(v.shape, self.stages[max(join)].frame):
            target = max(join)
            for a in v.args:
                if a in self.stage_of and self.stage_of[a] != target:
                    self.loadify(a)
            self.stage_of[v.id] = target
            return
        # from loads alone (of inputs, or of buffers earlier stages write), or broadcast past the
        # frame of the stage computing its operands: a prologue, recomputed in whichever later stage
        # needs it
        for a in v.args:
            if a in self.stage_of:
                self.loadify(a)
        self.leafish.add(v.id)

    def output(self, k: int, o: int) -> tuple[str, list]:
        """Where output k comes from: a buffer written by a stage, or a view of one. A view the stage
        can write through backwards (a flip, a permute, a reshape) is written that way, so the
        output is a fresh contiguous tensor as the reference's is (torch.flip copies)."""
        if o in self.access and self.v(o).op != "input" and o not in self.stage_of:
            acc = self.access[o]
            buf = self.buffers[acc.buffer]
            if buf.kind == "temp":
                inverse = invert(acc.views, buf.shape)
                readers = [st for st in self.stages if any(a.buffer == acc.buffer for a in st.loads.values())]
                if acc.views and inverse is not None and not readers and self.writers.get(acc.buffer):
                    name = self.output_names[k]
                    self.buffers[name] = Buffer(name, "output", self.v(o).shape, index=k, value=o)
                    del self.buffers[acc.buffer]
                    for st in self.stages:
                        st.stores = [(u, Access(name, inverse + a.views, a.map) if a.buffer == acc.buffer else a)
                                     for u, a in st.stores]
                    self.writers[name] = self.writers.pop(acc.buffer)
                    return name, []
                self._rename_output(acc.buffer, k)
                return self.output_names[k], acc.views
        name = self.output_names[k]
        self.buffers[name] = Buffer(name, "output", self.v(o).shape, index=k, value=o)
        if o in self.stage_of:
            self.store(self.stages[self.stage_of[o]], o, Access(name, [], ()))
        else:  # computed from the inputs alone (a copy of a view, a constant): a stage of its own
            st = self.new_stage("pointwise", self.v(o).shape)
            self.stage_of[o] = st.id
            self.leafish.discard(o)
            self.store(st, o, Access(name, [], ()))
        return name, []

    def _rename_output(self, temp: str, k: int) -> None:
        """A temporary that is (a view of) output k becomes that output's buffer."""
        name = self.output_names[k]
        buf = self.buffers.pop(temp)
        if name in self.buffers:
            unsupported("two outputs that are views of one value")
        self.buffers[name] = Buffer(name, "output", buf.shape, index=k, value=buf.value)
        for st in self.stages:
            st.stores = [(u, Access(name if a.buffer == temp else a.buffer, a.views, a.map)) for u, a in st.stores]
            st.loads = {u: Access(name if a.buffer == temp else a.buffer, a.views, a.map) for u, a in st.loads.items()}
        if temp in self.writers:
            self.writers[name] = self.writers.pop(temp)
        for u, acc in list(self.access.items()):
            if acc.buffer == temp:
                self.access[u] = Access(name, acc.views, acc.map)
        for u, b in list(self.buffer_of.items()):
            if b == temp:
                self.buffer_of[u] = name

    # --- per stage: its values, loads, maps --------------------------------------------------------
    def finish(self, st: Stage) -> None:
        members: list[int] = []
        seen: set[int] = set()

        def visit(u: int) -> None:
            if u in seen:
                return
            seen.add(u)
            val = self.v(u)
            if self.stage_of.get(u) == st.id:
                for a in val.args:
                    if val.op not in ("mm", "conv"):
                        visit(a)
                members.append(u)
            elif u in self.leafish:
                if u in self.access:  # a load
                    members.append(u)
                    st.loads[u] = self.access[u]
                else:
                    for a in val.args:
                        visit(a)
                    members.append(u)
            else:
                unsupported(f"v{u} is needed by stage {st.id} but lives in another stage without a buffer")

        for u, _ in st.stores:
            visit(u)
        if st.kind in ("matmul", "conv"):
            st.operands = [self.access[a] for a in self.v(st.anchor).args]
        members.sort()
        st.values = members
        if st.kind in ("matmul", "conv"):
            seeds = [st.anchor]
        elif st.kind == "scan":
            seeds = [st.anchor, self.v(st.anchor).args[0]]
        elif st.kind == "reduce":
            seeds = [self.v(u).args[0] for u in members if self.v(u).op in ("reduce", "gather") and self.stage_of.get(u) == st.id]
        else:
            seeds = [u for u, _ in st.stores if S.same_shape(self.v(u).shape, st.frame)]
        try:
            solve(self.g, st, seeds)
        except NotInFrame as e:
            unsupported(f"a value that does not fit its kernel's iteration space ({e})")
        for u, acc in list(st.loads.items()):
            st.loads[u] = Access(acc.buffer, acc.views, st.maps[u])
        st.stores = [(u, Access(a.buffer, a.views, st.maps[u])) for u, a in st.stores]
        for u in members:
            if self.v(u).op == "iota":
                st.unmergeable.update(f for f in st.maps[u] if f is not None)
        accesses = [frame_strides(st, self.buffers[a.buffer].shape, a.views, a.map) for a in
                    list(st.loads.values()) + [a for _, a in st.stores]]
        st.groups = groups(st, accesses)


def schedule(g: Graph, input_names: list[str], output_names: list[str]) -> Program:
    return _Scheduler(g, input_names, output_names).run()
