"""Rich renderings of results for the terminal (the markdown log has its own, in oplog)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from kernelgen.verify.results import PerfCase, PerformanceResult


def tf32_label(perf: PerformanceResult) -> str:
    """The precision policy, where a float32 case was timed (the log's heading and the terminal's title):
    `, precision: matmul IEEE, conv TF32 (PyTorch's defaults)`; a run from before the policy, its TF32 flag."""
    if not any(c.dtype == "float32" for c in perf.cases):
        return ""
    if perf.precision is not None:
        return f", precision: {perf.precision.label()}"
    return "" if perf.tf32 is None else f", float32 matmuls with TF32 {'on' if perf.tf32 else 'off'}"


def _shape_label(shapes: dict[str, list[int]]) -> str:
    # The first input's shape names the case; the rest (bias, weight) follow from it.
    first = next(iter(shapes.values()))
    return "x".join(map(str, first))


def perf_table(perf: PerformanceResult) -> Table:
    title = f"{perf.op} on {perf.device_name} (torch {perf.torch_version}, triton {perf.triton_version})" + tf32_label(perf)
    if not perf.measured:
        title += " — interpreter dry run, NOT a measurement"
    t = Table(title=title, title_justify="left")
    for col in ("case", "dtype", *PerfCase.CELL_HEADERS):
        t.add_column(col, justify="left" if col in ("case", "dtype") else "right", no_wrap=True)
    t.add_column("verdict", justify="left", overflow="fold")  # every violation of the case, on its line
    for c in perf.cases:
        verdict = c.verdict()
        t.add_row(_shape_label(c.shapes), c.dtype, *c.cells(), verdict if verdict == "ok" else f"[bold red]{escape(verdict)}[/]")
    return t

