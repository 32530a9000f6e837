"""Rich renderings of results for the terminal (the markdown log has its own, in oplog)."""

from __future__ import annotations

from rich.table import Table

from kernelgen.results import PerformanceResult


def _shape_label(shapes: dict[str, list[int]]) -> str:
    # The first input's shape names the case; the rest (bias, weight) follow from it.
    first = next(iter(shapes.values()))
    return "x".join(map(str, first))


def perf_table(perf: PerformanceResult) -> Table:
    title = f"{perf.op} on {perf.device_name} (torch {perf.torch_version}, triton {perf.triton_version})"
    if not perf.measured:
        title += " — interpreter dry run, NOT a measurement"
    t = Table(title=title, title_justify="left")
    for col in ("case", "dtype", "kernel ms", "eager ms", "compile ms", "x eager", "x compile", "GB/s", "TFLOP/s", "% peak"):
        t.add_column(col, justify="left" if col in ("case", "dtype") else "right", no_wrap=True)
    for c in perf.cases:
        pct = f"{100 * c.frac_peak:.0f}%" if c.frac_peak is not None else "—"
        if not c.valid:
            pct += " INVALID"
        t.add_row(
            _shape_label(c.shapes), c.dtype.replace("float", "f").replace("bf16", "bf16"),
            f"{c.kernel.ms:.4f}" if c.kernel else "—",
            f"{c.eager.ms:.4f}" if c.eager else "—",
            f"{c.compiled.ms:.4f}" if c.compiled else "—",
            f"{c.speedup_eager:.2f}" if c.speedup_eager else "—",
            f"{c.speedup_compile:.2f}" if c.speedup_compile else "—",
            f"{c.gbps:.0f}" if c.gbps is not None else "—",
            f"{c.tflops:.0f}" if c.tflops else "—",
            pct,
        )
    return t
