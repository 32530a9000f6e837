"""Which row reductions can be computed in one read pass, and how (the `online` and `split` rows).

The looped row kernel reads the row once per reduction level: softmax's sum needs the max first,
layer_norm's variance needs the mean first, so a 50257-wide row costs three reads and a write.
Two patterns fold a second level into the first, exactly up to rounding:

- softmax: `sum(exp(b - max(b)))` keeps a running max m and a running sum s of exp(b - m);
  when a block raises the max to m', s is rescaled by exp(m - m') (Milakov & Gimelshein 2018);
- variance: `sum(square(a - sum(a) / n))` keeps Welford's running mean and sum of squared
  deviations per lane, merged across lanes (and across a split row's programs) by Chan's rule.

The same statistics, computed over a part of a row, combine: that is what lets `split` spread a
row over several programs and merge their partials in a second launch. Level-1 reductions outside
a pattern (sum, max, min) combine trivially. Anything else (a third level, a level-2 reduction of
another form) is refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelgen.offline.frame.graph import FrameGraph, Node
from kernelgen.offline.frame.emitter import REDUCTIONS
from kernelgen.offline.rows.kernel import stage


class NotFusible(ValueError):
    """The reductions of this reference need more than one read pass (the message says why)."""


@dataclass
class Fusion:
    plain: list[Node] = field(default_factory=list)  # level-1 sum/max/min kept as they are
    # (max node M, sum node S): S = sum(exp(b - M)), M = max(b)
    softmax: list[tuple[Node, Node]] = field(default_factory=list)
    # (sum node S1, sum node S2): S1 = sum(a), S2 = sum(square(a - S1 / n))
    welford: list[tuple[Node, Node]] = field(default_factory=list)

    @property
    def maxes(self) -> list[Node]:
        """The running maxima, one per max node however many sums it scales."""
        seen: dict[int, Node] = {}
        for m, _ in self.softmax:
            seen.setdefault(m.id, m)
        return list(seen.values())

    @property
    def means(self) -> list[Node]:
        """The Welford states, one per mean's sum node however many variances use it."""
        seen: dict[int, Node] = {}
        for s1, _ in self.welford:
            seen.setdefault(s1.id, s1)
        return list(seen.values())

    def stats(self) -> list[tuple[str, int]]:
        """The partial statistics a split row's program writes, in order: (kind, node id)."""
        out = [(n.op, n.id) for n in self.plain]
        out += [("runmax", m.id) for m in self.maxes]
        out += [("expsum", s.id) for _, s in self.softmax]
        out += [(kind, s1.id) for s1 in self.means for kind in ("mean", "m2")]
        return out


def _softmax_pair(g: FrameGraph, s: Node, memo: dict) -> tuple[Node, Node] | None:
    e = g.node(s.args[0])
    if e.op != "exp":
        return None
    d = g.node(e.args[0])
    if d.op != "sub" or len(d.args) != 2:
        return None
    b, m = g.node(d.args[0]), g.node(d.args[1])
    if m.op == "max" and m.args[0] == b.id and stage(g, b.id, memo) == 0:
        return m, s
    return None


def _welford_pair(g: FrameGraph, s2: Node, memo: dict) -> tuple[Node, Node] | None:
    sq = g.node(s2.args[0])
    if sq.op != "square":
        return None
    d = g.node(sq.args[0])
    if d.op != "sub" or len(d.args) != 2:
        return None
    a, mean = g.node(d.args[0]), g.node(d.args[1])
    if mean.op != "div" or len(mean.args) != 2 or g.node(mean.args[1]).op != "ncols":
        return None
    s1 = g.node(mean.args[0])
    if s1.op == "sum" and s1.args[0] == a.id and stage(g, a.id, memo) == 0:
        return s1, s2
    return None


def fuse(graph: FrameGraph) -> Fusion:
    """The one-pass form of the graph's reductions, or NotFusible saying which one has none."""
    memo: dict = {}
    live = graph.live()
    reductions = [n for n in graph.nodes if n.op in REDUCTIONS and n.id in live]
    if not reductions:
        raise NotFusible("there is no reduction over the row")
    fusion = Fusion()
    paired: set[int] = set()
    for n in reductions:
        level = stage(graph, n.id, memo)
        if level > 2:
            raise NotFusible(f"{n.op} v{n.id} is a third reduction level (only two fold into one pass)")
        if level == 2:
            if n.op != "sum":
                raise NotFusible(f"the second-level {n.op} v{n.id} has no running form (only sums of exp(x - max) "
                                 "and of squared deviations from the mean do)")
            pair = _softmax_pair(graph, n, memo)
            if pair is not None:
                fusion.softmax.append(pair)
            elif (pair := _welford_pair(graph, n, memo)) is not None:
                fusion.welford.append(pair)
            else:
                raise NotFusible(f"the second-level sum v{n.id} is neither sum(exp(x - max(x))) nor "
                                 "sum((x - mean(x))**2): it needs the first level's result before it can start")
            paired.update(p.id for p in pair)
    fusion.plain = [n for n in reductions if n.id not in paired and stage(graph, n.id, memo) == 1]
    return fusion


def fusible(graph: FrameGraph) -> str | None:
    """None when `online` and `split` can serve the graph, else the reason they cannot."""
    try:
        fuse(graph)
    except NotFusible as e:
        return str(e)
    return None


def levels(graph: FrameGraph) -> int:
    """How many reduction levels (reads of a looped row before its write pass) the graph has."""
    memo: dict = {}
    live = graph.live()
    return max((stage(graph, n.id, memo) for n in graph.nodes if n.op in REDUCTIONS and n.id in live), default=0)
