"""The device's measured ceilings, measured once per device and cached per user: copy bandwidth (bytes
read + written), read bandwidth (a large reduction, which reads and writes nearly nothing: a
read-only kernel legitimately beats the copy ceiling — an H200 reads at ~4.4 TB/s and copies at
~4.25), and the matmul rate. Datasheet numbers are not used: an H100 SXM's datasheet says 3.35 TB/s,
a large device-to-device copy measures about 3.0 TB/s, and a kernel is judged against what is reachable."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

from kernelgen.verify.results import DevicePeaks


def cache_dir() -> Path:
    root = os.environ.get("KERNELGEN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernelgen"
    )
    return Path(root)


def _key(device_name: str, torch_version: str) -> str:
    return f"{device_name} | torch {torch_version}"


def measure_peaks(bench) -> DevicePeaks:  # noqa: ANN001 - bench: (fn) -> median ms
    """Measure on the current CUDA device. `bench` is the harness's timer (do_bench median)."""
    import torch

    # 1 GiB each way: far beyond any L2 (50 MB on H100), so the copy streams from HBM.
    n = 1 << 28
    src = torch.randn(n, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    ms = bench(lambda: dst.copy_(src))
    copy_gbps = 2 * n * 4 / (ms * 1e-3) / 1e9
    # Read ceiling: the best of four reductions over the same 1 GiB. A flat sum alone under-reads (an
    # H100 measured 2975 GB/s for it, below its 3005 GB/s copy, while a row sum reached 3075): row
    # reductions keep every SM busy with independent rows.
    rows = src.view(-1, 4096)
    read_ms = min(bench(lambda: src.sum()), bench(lambda: src.amax()), bench(lambda: rows.sum(dim=1)),
                  bench(lambda: rows.amax(dim=1)))
    read_gbps = n * 4 / (read_ms * 1e-3) / 1e9
    del src, dst
    # 8192^3 bf16 on random data (zeros run ~13% faster and would overstate the ceiling).
    m = 8192
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    ms = bench(lambda: a @ b)
    tflops = 2 * m**3 / (ms * 1e-3) / 1e12
    del a, b
    torch.cuda.empty_cache()
    return DevicePeaks(
        device_name=torch.cuda.get_device_name(),
        copy_gbps=copy_gbps,
        read_gbps=read_gbps,
        matmul_tflops=tflops,
        measured_at=date.today().isoformat(),
        torch_version=torch.__version__,
    )


def load_or_measure(bench, *, refresh: bool = False) -> DevicePeaks:  # noqa: ANN001
    import torch

    from kernelgen.fsutil import atomic_write

    path = cache_dir() / "peaks.json"
    key = _key(torch.cuda.get_device_name(), torch.__version__)
    cached: dict = {}
    if path.is_file():
        try:
            cached = json.loads(path.read_text())
        except (OSError, ValueError):
            cached = {}  # a damaged cache is re-measured, not trusted
    if key in cached and not refresh:
        try:
            peaks = DevicePeaks.model_validate(cached[key])
            if peaks.read_gbps is not None:  # a cache from before read ceilings existed is measured again
                return peaks
        except ValueError:
            pass
    peaks = measure_peaks(bench)
    cached[key] = peaks.model_dump()
    atomic_write(path, json.dumps(cached, indent=2))
    return peaks


def device_peaks(device) -> DevicePeaks | None:  # noqa: ANN001 - DeviceInfo
    """The ceilings of `device` (measured once and cached), None off CUDA: the interpreter has none,
    and an NPU's are not measured yet."""
    if device.kind != "cuda":
        return None
    from kernelgen.verify.devicelock import device_lock
    from kernelgen.verify.timing import rep_times, summarize

    with device_lock(exclusive=True, path=device.lock):
        return load_or_measure(lambda fn: summarize(rep_times(fn, "cuda")).ms)
