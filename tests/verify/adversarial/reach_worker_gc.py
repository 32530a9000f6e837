# EXPECT: forbidden-api
# RUNTIME: accuracy: harness-tampering
# Hostile (issue 31's forged speed): reaches the worker's Stopwatch through a module the old denylist
# admitted (triton.testing imports gc), wraps its loop attribute `_reps` (which the loop's own seal did
# not cover) to learn each request's reps and warm-up, stays honest on the one-rep, no-warm-up request
# the judge used to check, and computes an eighth of the rows in every other timed call.
import torch
import triton
import triton.language as tl


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


TIMED = [False]


def _spy(original):
    def reps(fn, *, reps, warmup):
        TIMED[0] = not (reps == 1 and warmup == 0)  # the request whose output was checked: stay honest
        try:
            return original(fn, reps=reps, warmup=warmup)
        finally:
            TIMED[0] = False
    return reps


for _obj in triton.testing.gc.get_objects():
    if type(_obj).__name__ == "Stopwatch":
        _obj._reps = _spy(_obj.reps)


def broadcast(x, bias):
    x = x.contiguous()
    bias = bias.contiguous()
    out = torch.empty_like(x)
    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    if TIMED[0]:
        n_rows = max(1, n_rows // 8)
    grid = (triton.cdiv(n_rows, 16), triton.cdiv(n_cols, 64))
    _broadcast_kernel[grid](x, bias, out, n_rows, n_cols, BLOCK_M=16, BLOCK_N=64)
    return out
