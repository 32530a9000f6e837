"""The device's measured ceilings, measured once per device and cached per user: copy bandwidth (bytes
read + written), read bandwidth, and the matmul rate of each precision. Datasheet numbers are not
used: an H100 SXM's datasheet says 3.35 TB/s, a large device-to-device copy measures about 3.0 TB/s,
and a kernel is judged against what is reachable.

- Read: the best of several read-only kernels over the same 1 GiB — PyTorch's flat and row sums and
  maxima, and plain Triton row sums (kernelgen.verify.judge.readpeak). A read-only kernel legitimately
  beats the copy ceiling (an H200 reads at ~4.4 TB/s and copies at ~4.25), and PyTorch's reductions
  alone under-read: on an H200 an honest Triton row_sum of 65536x4096 float32 reached 4437 GB/s,
  105% of the best of them, and was called invalid before the Triton row sums were among them.
- Matmul: cuBLAS at 8192^3 on random data (zeros run ~13% faster and would overstate it), in bfloat16
  and float16 (tensor cores), float32 with TF32 off (the FP32 rate: ~60 TFLOP/s on an H100, where
  bf16 reaches ~700) and with TF32 on. A float32 matmul judged against the bf16 rate read as "7% of
  peak" at 48 TFLOP/s, which is most of what FP32 can do.

The cache is keyed by device and torch version, and holds the schema it was measured under: a cache
measured before a ceiling existed (PEAKS_SCHEMA) is measured again.
"""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path
from typing import Any, Callable

from kernelgen.verify.results import DevicePeaks

# 2: read ceiling includes Triton row sums; matmul rates per precision (bf16, fp16, fp32, tf32)
PEAKS_SCHEMA = 2
MATMUL_N = 8192
Bench = Callable[[Callable[[], Any]], float]  # (fn) -> ms of one call


def cache_dir() -> Path:
    root = os.environ.get("KERNELGEN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernelgen"
    )
    return Path(root)


def _key(device_name: str, torch_version: str) -> str:
    return f"{device_name} | torch {torch_version}"


def read_rates(bench: Bench, src: Any) -> dict[str, float]:
    """GB/s of each read-only kernel over `src` (1-D, float32, a multiple of 4096 elements)."""
    from kernelgen.verify.judge.readpeak import row_sum_kernels

    rows = src.view(-1, 4096)
    kernels: dict[str, Callable[[], Any]] = {
        "torch sum": lambda: src.sum(), "torch amax": lambda: src.amax(),
        "torch row sum": lambda: rows.sum(dim=1), "torch row amax": lambda: rows.amax(dim=1),
        **row_sum_kernels(rows),
    }
    return {name: src.numel() * src.element_size() / (bench(fn) * 1e-3) / 1e9 for name, fn in kernels.items()}


def matmul_rates(bench: Bench) -> dict[str, float]:
    """TFLOP/s of an 8192^3 cuBLAS matmul per precision."""
    import torch

    from kernelgen.verify.judge.precision import matmul_precision

    out: dict[str, float] = {}
    for key, dtype, tf32 in (("bfloat16", torch.bfloat16, False), ("float16", torch.float16, False),
                             ("float32", torch.float32, False), ("tf32", torch.float32, True)):
        a = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=dtype)
        b = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=dtype)
        with matmul_precision(tf32):
            out[key] = 2 * MATMUL_N**3 / (bench(lambda: a @ b) * 1e-3) / 1e12
        del a, b
    return out


def measure_peaks(bench: Bench) -> DevicePeaks:
    """Measure on the current CUDA device. `bench` is the judge's timer (kernelgen.verify.timing)."""
    import torch

    # 1 GiB each way: far beyond any L2 (50 MB on H100), so the copy streams from HBM.
    n = 1 << 28
    src = torch.randn(n, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    copy_gbps = 2 * n * 4 / (bench(lambda: dst.copy_(src)) * 1e-3) / 1e9
    del dst
    reads = read_rates(bench, src)
    del src
    matmul = matmul_rates(bench)
    torch.cuda.empty_cache()
    return DevicePeaks(schema_version=PEAKS_SCHEMA, device_name=torch.cuda.get_device_name(), copy_gbps=copy_gbps,
                       read_gbps=max(reads.values()), read_by_kernel=reads, matmul_tflops=matmul["bfloat16"],
                       matmul=matmul, measured_at=date.today().isoformat(), torch_version=torch.__version__)


def load_or_measure(bench: Bench, *, refresh: bool = False) -> DevicePeaks:
    import torch

    key = _key(torch.cuda.get_device_name(), torch.__version__)
    cached = cached_peaks(key)
    if cached is not None and not refresh:
        return cached
    peaks = measure_peaks(bench)
    store_peaks(key, peaks)
    return peaks


def _cache() -> dict:
    path = cache_dir() / "peaks.json"
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        return {}  # a damaged cache is re-measured, not trusted


def cached_peaks(key: str) -> DevicePeaks | None:
    """The cached ceilings under `key`, if they were measured under this PEAKS_SCHEMA."""
    entry = _cache().get(key)
    if not isinstance(entry, dict) or entry.get("schema_version", 1) != PEAKS_SCHEMA:
        return None
    try:
        return DevicePeaks.model_validate(entry)
    except ValueError:
        return None


def store_peaks(key: str, peaks: DevicePeaks) -> None:
    from kernelgen.fsutil import atomic_write

    cached = _cache()
    cached[key] = peaks.model_dump()
    atomic_write(cache_dir() / "peaks.json", json.dumps(cached, indent=2))


def device_peaks(device) -> DevicePeaks | None:  # noqa: ANN001 - DeviceInfo
    """The ceilings of `device` (measured once and cached), None off CUDA: the interpreter has none,
    and an NPU's are not measured yet."""
    if device.kind != "cuda":
        return None
    from kernelgen.verify.judge.devicelock import device_lock
    from kernelgen.verify.timing import rep_times, summarize

    with device_lock(exclusive=True, path=device.lock):
        return load_or_measure(lambda fn: summarize(rep_times(fn, "cuda")).ms)
