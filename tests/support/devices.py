"""Devices a test stands in for: an H100's driver facts and measured ceilings (what the prompts quote on
a GPU), and the sentence the prompts carry where there is none."""

from __future__ import annotations

from kernelgen.devices import DeviceFacts
from kernelgen.verify.results import DevicePeaks

NO_GPU = ("No GPU on this machine: kernels run on the CPU through Triton's interpreter, so correctness is checked "
          "for real but no timing here is a measurement — only test_cases[0] is timed, as a dry run, and the "
          "performance shapes are never run.")


class PeaksWithRead(DevicePeaks):
    """DevicePeaks as the verify engineer extends it (a measured read-only bandwidth)."""

    read_gbps: float | None = None


H100 = DeviceFacts(kind="cuda", name="NVIDIA H100 80GB HBM3", interpreter=False, sm_count=132, l2_bytes=50 * 1024 * 1024,
                   smem_per_sm_bytes=228 * 1024, smem_per_block_bytes=227 * 1024, regs_per_sm=65536, warp_size=32,
                   compute_capability="9.0", torch_version="2.13.0", triton_version="3.9.0")
H100_PEAKS = PeaksWithRead(device_name="NVIDIA H100 80GB HBM3", copy_gbps=3012.4, matmul_tflops=721.0,
                           measured_at="2026-11-20", torch_version="2.13.0", read_gbps=3350.0)
