"""An operator folder's final measurement, as `kernelgen batch` leaves it, for the reports to read."""

from __future__ import annotations

from pathlib import Path

from kernelgen.batch.resume import FINAL_FILE
from kernelgen.verify.results import KernelTiming, PerfCase, PerformanceResult, RunRecord


def _timing(ms: float) -> KernelTiming:
    return KernelTiming(ms=ms, ms_min=ms, ms_max=ms, spread=0.0)


def write_measured(root: Path, name: str, kernel_ms: list[float], eager_ms: float) -> None:
    """root/name/final_perf.json as a batch writes it: one float32 case per kernel time, against `eager_ms`
    (torch.compile as fast as eager), measured on a GPU."""
    cases = [PerfCase(case=i, shapes={"x": [1024, 1024]}, dtype="float32", bytes=8 << 20, kernel=_timing(k), eager=_timing(eager_ms),
                      compiled=_timing(eager_ms), speedup_eager=eager_ms / k, speedup_compile=eager_ms / k)
             for i, k in enumerate(kernel_ms)]
    perf = PerformanceResult(op=name, kernel="k.py", device="cuda", device_name="H200", interpreter=False, measured=True,
                             torch_version="2.11", triton_version="3.6", cases=cases)
    op = root / name
    op.mkdir(parents=True)
    (op / FINAL_FILE).write_text(RunRecord(kind="performance", status="ok", exit_code=0, duration_s=1.0, performance=perf).model_dump_json())
