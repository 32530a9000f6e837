# EXPECT: forbidden-import
# Hostile: right answers; as it is imported it slows the process's clock 1000x (time.perf_counter
# through functools.update_wrapper) and rebinds the worker's timing functions to return made-up
# times, so a timing that looked anything up when it ran would come back 1000x short. The worker
# bound its clock and loop before this file was imported: nothing the judge records changes.
import functools
import sys
import time

import torch
import triton
import triton.language as tl

_REAL = time.perf_counter


class _Slow:
    @staticmethod
    def perf_counter():
        return _REAL() / 1000


def _fake_reps(fn, clock, *, reps, warmup):
    return [1e-6] * reps


def _fake_host(fn, clock, *, calls):
    return 0.001


_PATCHED = []


def _patch():
    if not _PATCHED:
        functools.update_wrapper(time, _Slow, assigned=("perf_counter",), updated=())
        timing = sys.modules["kernelgen.verify.timing"]
        timing.run_reps, timing.host_calls, timing._now = _fake_reps, _fake_host, time.perf_counter
        _PATCHED.append(True)


_patch()  # at import: before any timing request


@triton.jit
def _broadcast_kernel(x_ptr, bias_ptr, out_ptr, n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + cols, mask=cols < n_cols)
    tl.store(out_ptr + offs, (x.to(tl.float32) + b[None, :].to(tl.float32)).to(out_ptr.dtype.element_ty), mask=mask)


def broadcast(x, bias):
    x = x.contiguous()
    bias = bias.contiguous()
    out = torch.empty_like(x)
    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    grid = (triton.cdiv(n_rows, 16), triton.cdiv(n_cols, 64))
    _broadcast_kernel[grid](x, bias, out, n_rows, n_cols, BLOCK_M=16, BLOCK_N=64)
    return out
