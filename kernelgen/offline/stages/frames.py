"""Where each value of a stage lives in the stage's frame, and which frame dims the wrapper may merge.

A stage iterates over its frame (a shape); every value computed in it is the frame with some dims
of size 1 (a reduction keeps its dims), seen through PyTorch's broadcasting and the reference's
squeezes and unsqueezes. Its *map* says, per dim of the value, which frame dim it runs along (None
for a size-1 dim). Maps flow forward from the stage's anchor and backward to the loads, whose
strides along the frame the wrapper derives from them. A value whose map cannot be found, or
clashes, cannot live in this stage: the scheduler is told why (NotInFrame).
"""

from __future__ import annotations

from typing import Any

import sympy

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.ir import Graph, Value
from kernelgen.offline.stages.program import Stage


class NotInFrame(ValueError):
    pass


def _big(d: sympy.Expr) -> bool:
    return not S.is_one(d)


def relabel_pairs(src: tuple, dst: tuple) -> list[tuple[int, int]] | None:
    """(src dim, dst dim) pairs of a reshape that only adds or removes size-1 dims; None otherwise."""
    a = [i for i, d in enumerate(src) if _big(d)]
    b = [i for i, d in enumerate(dst) if _big(d)]
    if len(a) != len(b) or any(not S.same(src[i], dst[j]) for i, j in zip(a, b)):
        return None
    return list(zip(a, b))


def is_relabel(g: Graph, v: Value) -> bool:
    """A view that moves no element: size-1 dims added or removed, size-1 dims stretched."""
    kind = v.attrs["kind"]
    src = g[v.args[0]].shape
    if kind in ("unsqueeze", "squeeze", "expand"):
        return True
    if kind == "reshape":
        return relabel_pairs(src, v.shape) is not None
    if kind == "permute":
        moved = [p for i, p in enumerate(v.attrs["perm"]) if _big(src[p])]
        return moved == sorted(moved)
    return False


class _Solver:
    def __init__(self, g: Graph, stage: Stage):
        self.g, self.stage = g, stage
        self.maps: dict[int, list[Any]] = {}
        self.members = set(stage.values)

    def known(self, v: int) -> bool:
        shape = self.g[v].shape
        if not any(_big(d) for d in shape):
            self.maps.setdefault(v, [None] * len(shape))
            return True
        m = self.maps.get(v)
        return m is not None and all(m[i] is not None or not _big(shape[i]) for i in range(len(shape)))

    def put(self, v: int, dim: int, f: Any) -> bool:
        m = self.maps.setdefault(v, [None] * self.g[v].rank)
        if f is None or not _big(self.g[v].shape[dim]):
            if m[dim] is None and f is not None:
                m[dim] = f  # a size-1 dim may still name its frame dim (a kept reduced dim)
                return True
            return False
        if m[dim] is None:
            if not S.same(self.g[v].shape[dim], self.stage.frame[f]):
                raise NotInFrame(f"v{v} dim {dim} ({self.g[v].shape[dim]}) does not match frame dim {f} "
                                 f"({self.stage.frame[f]})")
            m[dim] = f
            return True
        if m[dim] != f:
            raise NotInFrame(f"v{v} dim {dim} runs along frame dims {m[dim]} and {f}")
        return False

    def seed(self, v: int) -> None:
        if not S.same_shape(self.g[v].shape, self.stage.frame) and self.g[v].op != "reduce":
            raise NotInFrame(f"v{v} has shape {self.g[v].shape}, the frame is {self.stage.frame}")
        for d in range(self.g[v].rank):
            self.put(v, d, d)

    def aligned(self, res: Value, arg: Value) -> list[tuple[int, int]]:
        lead = res.rank - arg.rank
        return [(q + lead, q) for q in range(arg.rank) if q + lead >= 0]

    def step(self, v: Value) -> bool:
        changed = False
        if v.op in ("view",) and v.args[0] in self.members:
            src = self.g[v.args[0]]
            pairs = self._view_pairs(v, src)
            for o, i in pairs:
                if self.maps.get(src.id) and self.maps[src.id][i] is not None:
                    changed |= self.put(v.id, o, self.maps[src.id][i])
                if self.maps.get(v.id) and self.maps[v.id][o] is not None:
                    changed |= self.put(src.id, i, self.maps[v.id][o])
            return changed
        if v.op in ("reduce", "gather", "input", "param", "const", "size", "full", "iota", "view", "mm", "conv", "scan", "cat",
                    "pad"):
            return False
        for a in v.args:
            if a not in self.members:
                continue
            arg = self.g[a]
            for p, q in self.aligned(v, arg):
                if not _big(arg.shape[q]):
                    continue
                if self.maps.get(a) and self.maps[a][q] is not None:
                    changed |= self.put(v.id, p, self.maps[a][q])
                if self.maps.get(v.id) and self.maps[v.id][p] is not None:
                    changed |= self.put(a, q, self.maps[v.id][p])
        return changed

    def _view_pairs(self, v: Value, src: Value) -> list[tuple[int, int]]:
        kind = v.attrs["kind"]
        if kind == "unsqueeze":
            d = v.attrs["dim"]
            return [(i if i < d else i + 1, i) for i in range(src.rank)]
        if kind == "squeeze":
            kept = [i for i in range(src.rank) if i not in v.attrs["dims"]]
            return [(o, i) for o, i in enumerate(kept)]
        if kind == "expand":
            return [(p, q) for p, q in self.aligned(v, src) if _big(src.shape[q])]
        if kind == "permute":
            return [(o, p) for o, p in enumerate(v.attrs["perm"]) if _big(src.shape[p])]
        if kind == "window":  # the leading dims pass through; windows and kernel positions are new dims
            return [(i, i) for i in range(src.rank - v.attrs["n"]) if _big(src.shape[i])]
        pairs = relabel_pairs(src.shape, v.shape) or []
        return [(o, i) for i, o in pairs]


def solve(g: Graph, stage: Stage, seeds: list[int]) -> None:
    """Fill stage.maps and stage.spaces (NotInFrame when a value cannot be placed)."""
    s = _Solver(g, stage)
    for v in seeds:
        s.seed(v)
    for v in stage.values:  # a reduction has its input's map, its reduced dims kept as size 1
        val = g[v]
        if val.op in ("reduce", "gather") and val.args[0] in s.maps:
            for d, f in enumerate(s.maps[val.args[0]]):
                s.put(v, d, f)
    for _ in range(4 * len(stage.values) + 4):
        changed = False
        for v in stage.values:
            val = g[v]
            if val.op in ("reduce", "gather") and v in s.maps and val.args[0] in s.members:
                for d, f in enumerate(s.maps[v]):
                    if f is not None:
                        changed |= s.put(val.args[0], d, f) if d < g[val.args[0]].rank else False
            changed |= s.step(val)
        for v in reversed(stage.values):
            changed |= s.step(g[v])
        if not changed:
            break
    for v in stage.values:
        if not s.known(v):
            raise NotInFrame(f"v{v} ({g[v].describe()}) has no place in the frame {tuple(map(str, stage.frame))}")
    stage.maps = {v: tuple(m) for v, m in s.maps.items() if v in s.members}
    red = set(stage.reduced) if stage.kind in ("reduce", "scan") else set()
    for v in stage.values:
        dims = {f for f, d in zip(stage.maps[v], g[v].shape) if f is not None and _big(d)}
        stage.spaces[v] = "full" if (dims & red or (stage.kind not in ("reduce",) and dims)) else ("row" if dims else "scalar")


def contiguous_view_strides(shape: tuple, views: list) -> tuple[tuple, tuple] | None:
    """The (shape, strides) a contiguous buffer of `shape` has after the view steps, symbolically;
    None when a step is not a view there."""
    strides = S.contiguous_strides(shape)
    cur = tuple(shape)
    for kind, attrs, out in views:
        got = view_strides(cur, strides, kind, attrs, out)
        if got is None:
            return None
        cur, strides = out, got
    return cur, strides


def view_strides(shape: tuple, strides: tuple, kind: str, attrs: dict, out: tuple) -> tuple | None:
    if kind == "unsqueeze":
        d = attrs["dim"]
        return strides[:d] + (S.ONE,) + strides[d:]
    if kind == "squeeze":
        return tuple(s for i, s in enumerate(strides) if i not in attrs["dims"])
    if kind == "permute":
        return tuple(strides[p] for p in attrs["perm"])
    if kind == "expand":
        lead = len(out) - len(shape)
        return (S.expr(0),) * lead + tuple(S.expr(0) if S.is_one(d) and not S.is_one(t) else s
                                           for d, t, s in zip(shape, out[lead:], strides))
    if kind == "window":  # [.., L..] -> [.., out.., kernel..]: a window steps by stride, a tap by dilation
        n, lead = attrs["n"], len(shape) - attrs["n"]
        return (tuple(strides[:lead]) + tuple(strides[lead + i] * s for i, s in enumerate(attrs["stride"]))
                + tuple(strides[lead + i] * d for i, d in enumerate(attrs["dilation"])))
    if kind in ("slice", "flip", "select"):
        if kind == "select":
            return tuple(s for i, s in enumerate(strides) if i != attrs["dim"])
        if kind == "slice":
            return tuple(s * attrs["step"] if i == attrs["dim"] else s for i, s in enumerate(strides))
        return tuple(-s if i in attrs["dims"] else s for i, s in enumerate(strides))
    # reshape: viewable when each merged run of dims is contiguous within itself
    pairs = relabel_pairs(shape, out)
    if pairs is not None:
        res = [S.ONE] * len(out)
        for i, o in pairs:
            res[o] = strides[i]
        return tuple(res)
    if all(S.same(strides[i], S.contiguous_strides(shape)[i]) for i in range(len(shape)) if _big(shape[i])):
        return S.contiguous_strides(out)
    return None


def frame_strides(stage: Stage, shape: tuple, views: list, m: tuple) -> tuple | None:
    """Per frame dim, the stride of an access whose buffer is contiguous (0 where it broadcasts)."""
    got = contiguous_view_strides(shape, views)
    if got is None:
        return None
    vshape, strides = got
    out = [S.expr(0)] * len(stage.frame)
    for d, f in enumerate(m):
        if f is not None and _big(vshape[d]):
            out[f] = strides[d]
    return tuple(out)


def groups(stage: Stage, accesses: list[tuple]) -> list[list[int]]:
    """Frame dims merged into one loop dim: neighbours with the same role (kept or reduced) that every
    access walks as one dim when its buffer is contiguous (stride[i] == stride[i+1] * size[i+1])."""
    red = set(stage.reduced)
    out: list[list[int]] = []
    for f in range(len(stage.frame)):
        if out:
            prev = out[-1][-1]
            same_role = (prev in red) == (f in red) and not (stage.kind == "scan" and (f in red or prev in red))
            if same_role and prev not in stage.unmergeable and f not in stage.unmergeable and stage.kind not in ("matmul", "conv"):
                if all(st is not None and S.same(st[prev], st[f] * stage.frame[f]) for st in accesses):
                    out[-1].append(f)
                    continue
        out.append([f])
    if stage.kind == "reduce" and all(set(grp) <= red for grp in out):
        out.insert(0, [])  # everything reduced: one kept position, a group of no dims (size 1)
    return out


def fits(shape: tuple, frame: tuple) -> bool:
    """Whether a value of `shape` can live in `frame`: its dims of size > 1 are frame dims of the same
    size, in the same order (a [B] per-row value lives in a [B, C] frame). Else it cannot join that
    stage: a [B, 1] row result added to a [B, K] input makes a [B, K] value that a [B, 1] frame has
    no room for, and a [1, N, B, 1] broadcast has its dims in the other order from a [B, N] frame."""
    at = 0
    for d in shape:
        if S.is_one(d):
            continue
        while at < len(frame) and not S.same(d, frame[at]):
            at += 1
        if at == len(frame):
            return False
        at += 1
    return True


def invert(views: list, shape: tuple) -> list | None:
    """View steps that take a buffer of the views' final shape back to `shape` (reversed, each
    inverted); None when a step has no inverse (a slice, a select, an expand)."""
    out = []
    shapes = [tuple(shape)] + [step[2] for step in views]
    for i in reversed(range(len(views))):
        kind, attrs, _ = views[i]
        before = shapes[i]
        if kind == "flip":
            out.append(("flip", attrs, before))
        elif kind == "permute":
            perm = attrs["perm"]
            out.append(("permute", {"perm": tuple(sorted(range(len(perm)), key=lambda j: perm[j]))}, before))
        elif kind in ("reshape", "squeeze", "unsqueeze"):
            out.append(("reshape", {}, before))
        else:
            return None
    return out
