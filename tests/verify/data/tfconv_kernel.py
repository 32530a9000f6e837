import torch
import triton
import triton.language as tl

# Mantissa bits each operand keeps before it is multiplied: 23 is IEEE float32, 10 is TF32's one
# product (as cuDNN's TF32 convolutions), fewer is a kernel less precise than any policy allows.
KEEP_BITS = 23


@triton.jit
def _round(v, KEEP: tl.constexpr):
    if KEEP < 23:
        bits = v.to(tl.int32, bitcast=True) & (-(1 << (23 - KEEP)))
        v = bits.to(tl.float32, bitcast=True)
    return v


@triton.jit
def _tfconv_kernel(
    x_ptr,  # input [B, C, L], contiguous
    w_ptr,  # weight [O, C, K], contiguous
    out_ptr,  # output [B, O, L - K + 1]
    C, L, O, K, L_OUT,  # sizes
    BLOCK_C: tl.constexpr,  # every input channel at once
    BLOCK_L: tl.constexpr,  # output positions per program
    KEEP: tl.constexpr,  # mantissa bits of each operand
):
    pid_bo = tl.program_id(0)  # one (batch, out-channel) pair
    pid_l = tl.program_id(1)
    b = pid_bo // O
    o = pid_bo % O
    chans = tl.arange(0, BLOCK_C)
    cols = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    mask = (chans[:, None] < C) & (cols[None, :] < L_OUT)
    acc = tl.zeros([BLOCK_L], dtype=tl.float32)
    for k in range(K):
        xv = tl.load(x_ptr + (b * C + chans[:, None]) * L + cols[None, :] + k, mask=mask, other=0.0)
        wv = tl.load(w_ptr + (o * C + chans) * K + k, mask=chans < C, other=0.0)
        acc += tl.sum(_round(xv, KEEP) * _round(wv, KEEP)[:, None], axis=0)
    tl.store(out_ptr + (b * O + o) * L_OUT + cols, acc, mask=cols < L_OUT)


def tfconv(x, w):
    x = x.contiguous()
    w = w.contiguous()
    B, C, L = x.shape
    O, _, K = w.shape
    L_OUT = L - K + 1
    out = torch.empty((B, O, L_OUT), device=x.device, dtype=x.dtype)
    BLOCK_L = min(256, triton.next_power_of_2(L_OUT))
    grid = (B * O, triton.cdiv(L_OUT, BLOCK_L))
    _tfconv_kernel[grid](x, w, out, C, L, O, K, L_OUT, BLOCK_C=triton.next_power_of_2(C), BLOCK_L=BLOCK_L, KEEP=KEEP_BITS)
    return out
