# EXPECT: forbidden-api
# RUNTIME: accuracy: outside-tensor
# Hostile: precomputes answers at import for the inputs it predicts and serves them by call count.
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


# The harness used to draw inputs from torch.Generator seeded with seed * 7919 + case (warm-up:
# 10000 + case), in a fixed call order: answers can be computed at import, before any guard runs.
_CASES = [((4, 33), (33,)), ((2, 3, 17), (17,))]
_DTYPES = [torch.float32, torch.float16]


def _inputs(seed, case, dtype):
    g = torch.Generator()
    g.manual_seed(seed)
    return [torch.randn(s, generator=g).to(dtype) for s in case]


_ANSWERS = []
for _s in range(3):
    for _ci, _case in enumerate(_CASES):
        for _dt in _DTYPES:
            if _s == 0:
                _w = _inputs(10_000 + _ci, _case, _dt)
                _ANSWERS.append(_w[0] + _w[1])
            _v = _inputs(_s * 7919 + _ci, _case, _dt)
            _ANSWERS.append(_v[0] + _v[1])
_CALLS = [0]


def broadcast(x, bias):
    i = _CALLS[0]
    _CALLS[0] += 1
    out = torch.empty_like(x)
    _broadcast_kernel[(1, 1)](x, bias, out, 0, 1, BLOCK_M=16, BLOCK_N=64)
    pre = _ANSWERS[i] if i < len(_ANSWERS) else out
    out.copy_(pre)
    return out
