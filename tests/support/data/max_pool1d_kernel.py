import torch
import triton
import triton.language as tl


@triton.jit
def _max_pool1d_kernel(
    x_ptr,  # input viewed as [rows, L], contiguous
    out_ptr,  # output viewed as [rows, L_out], contiguous
    L,  # input length
    L_out,  # output length: (L + 2 * PADDING - DILATION * (KERNEL - 1) - 1) // STRIDE + 1
    KERNEL: tl.constexpr,  # window size
    STRIDE: tl.constexpr,  # window step
    PADDING: tl.constexpr,  # implicit -inf on both sides
    DILATION: tl.constexpr,  # spacing of a window's elements
    BLOCK: tl.constexpr,  # outputs per program
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    valid = cols < L_out
    start = cols * STRIDE - PADDING
    acc = tl.full([BLOCK], float("-inf"), tl.float32)
    for k in tl.static_range(KERNEL):
        pos = start + k * DILATION
        inside = valid & (pos >= 0) & (pos < L)
        v = tl.load(x_ptr + row * L + pos, mask=inside, other=float("-inf"))
        acc = tl.maximum(acc, v.to(tl.float32))
    tl.store(out_ptr + row * L_out + cols, acc.to(out_ptr.dtype.element_ty), mask=valid)


def kb_max_pool1d(x):
    x = x.contiguous()
    n, c, length = x.shape
    kernel, stride, padding, dilation = 8, 1, 4, 3
    l_out = (length + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    out = torch.empty((n, c, l_out), dtype=x.dtype, device=x.device)
    BLOCK = 128
    grid = (n * c, triton.cdiv(l_out, BLOCK))
    _max_pool1d_kernel[grid](x, out, length, l_out, KERNEL=kernel, STRIDE=stride, PADDING=padding, DILATION=dilation,
                             BLOCK=BLOCK, num_warps=4)
    return out
