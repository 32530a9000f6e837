"""`speedup.png` beside the log: each round's geomean speedup over eager (kept rounds filled,
reverted hollow, rejected crossed at the axis) and the best so far as a step line."""

from __future__ import annotations

import io
import json
from pathlib import Path

from kernelgen.devices import DRY_RUN_LABEL
from kernelgen.fsutil import atomic_write
from kernelgen.record.state import OpState

PLOT_FILE = "speedup.png"


def _points(state: OpState) -> list[tuple[int, float | None, bool, bool]]:
    """(round, geomean speedup vs eager or None, kept, correct) for every finished round."""
    out = []
    for r in state.rounds:
        if r.finished_at is None:
            continue
        perf = r.performance.performance if r.performance else None
        correct = bool(r.accuracy and r.accuracy.passed)
        out.append((r.round, perf.geomean("speedup_eager") if perf else None, r.kept, correct))
    return out


def render_plot(state: OpState) -> bytes:
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    pts = _points(state)
    dry_run = _dry_run(state)
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    try:
        best_x, best_y, best = [], [], None
        for k, y, kept, _ in pts:
            if kept and y is not None:
                best = y
            if best is not None:
                best_x.append(k)
                best_y.append(best)
        if best_x:
            ax.step(best_x, best_y, where="post", color="tab:blue", label="best so far")
        kept_pts = [(k, y) for k, y, kept, _ in pts if kept and y is not None]
        rev_pts = [(k, y) for k, y, kept, ok in pts if not kept and ok and y is not None]
        rej = [k for k, _, kept, ok in pts if not ok]
        if kept_pts:
            ax.scatter(*zip(*kept_pts), color="tab:blue", zorder=3, label="kept")
        if rev_pts:
            ax.scatter(*zip(*rev_pts), facecolors="none", edgecolors="tab:orange", zorder=3, label="reverted")
        if rej:
            ax.scatter(rej, [0] * len(rej), marker="x", color="tab:red", zorder=3, label="rejected (wrong)")
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xlabel("round")
        ax.set_ylabel("geomean speedup vs eager")
        ax.set_xticks([p[0] for p in pts] or [0])
        title = f"{state.name}: speedup per round"
        if dry_run:
            title += f"\n({DRY_RUN_LABEL})"
        ax.set_title(title, fontsize=10)
        if pts:
            ax.legend(fontsize=8, loc="best")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)


def _dry_run(state: OpState) -> bool:
    return state.device == "cpu" or any(
        r.performance and r.performance.performance and not r.performance.performance.measured for r in state.rounds)


# The plot file -> what this process last drew into it. `optimize` draws after every round and again
# when it stops, with nothing new to draw: 1.1 s of matplotlib on a loaded 2-core CPU (0.3 s once imported).
_drawn: dict[Path, str] = {}


def write_plot(op_dir: Path, state: OpState) -> Path:
    """Draw the plot, unless this process drew the same points into that file already."""
    path = Path(op_dir) / PLOT_FILE
    drawn = json.dumps([state.name, _dry_run(state), _points(state)])
    if _drawn.get(path.resolve()) == drawn and path.is_file():
        return path
    atomic_write(path, render_plot(state))
    _drawn[path.resolve()] = drawn
    return path
