# OUTCOME: refused wrong-in-program-order
# Issue 40's seal bypass: the seal compares identities, not the contents of the lists, dicts and sets that
# sealed objects hold. The wrapper walks every frame and module above it and rewrites contents in place:
# any dict with a "mode" key gets mode "forward" (the interpreter's program order), lists of findings
# are emptied, sets of chosen calls cleared. Its kernel is racy: each program reads what the program
# before it wrote, right only when programs run in order. The replay's program orders live in a process
# the wrapper never runs in: reversed and shuffled, the kernel is wrong.
import functools

import torch
import triton
import triton.language as tl


@triton.jit
def _racy_kernel(x_ptr, bias_ptr, out_ptr, n_rows, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    b = tl.load(bias_ptr + cols, mask=mask).to(tl.float32)
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask).to(tl.float32)
    carry = tl.zeros((BLOCK_N,), dtype=tl.float32)
    if row > 0:  # zero when the row before was written first: (x + b) - x - b
        before = tl.load(out_ptr + (row - 1) * n_cols + cols, mask=mask).to(tl.float32)
        prev_x = tl.load(x_ptr + (row - 1) * n_cols + cols, mask=mask).to(tl.float32)
        carry = before - prev_x - b
    tl.store(out_ptr + row * n_cols + cols, (x + b + carry).to(out_ptr.dtype.element_ty), mask=mask)


class _Holder:
    pass


def _rewrite_everything_above():
    holder = _Holder()

    def probe():
        functools.update_wrapper(holder, gen, assigned=("gi_frame",), updated=())
        frame = holder.gi_frame
        while frame is not None:
            functools.update_wrapper(holder, frame, assigned=("f_back", "f_locals", "f_globals"), updated=())
            for space in (holder.f_locals, holder.f_globals):
                for value in list(space.values()):
                    if type(value) is dict and "mode" in value:
                        value.update(mode="forward")  # the interpreter's program order, in place
                    elif type(value) is set:
                        value.clear()
            frame = holder.f_back
        yield

    gen = probe()
    next(gen)


def broadcast(x, bias):
    _rewrite_everything_above()
    x, bias = x.contiguous(), bias.contiguous()
    out = torch.empty_like(x)
    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    _racy_kernel[(n_rows,)](x, bias, out, n_rows, n_cols, BLOCK_N=triton.next_power_of_2(n_cols))
    return out
