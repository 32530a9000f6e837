"""Elementwise kernels at the copy ceiling (issue 29): forms of a flat unary kernel against eager and
a device copy, on KernelBench's elementwise shape, to pick the pointwise family's default.

    python benchmarks/copy_bound.py [--shape 4096,393216] [--dtypes float32,bfloat16] [--out DIR]

Forms: offsets in 64 or 32 bits, BLOCK elements and warps per program, masks only on the last block
(EVEN), cache hints on the loads and stores, and two blocks per program. Each output is checked
against eager (the same op in PyTorch) before it is timed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

from common import use_this_tree  # benchmarks/ is this script's folder, first on sys.path


@triton.jit
def _op(x, OP: tl.constexpr):
    if OP == "sigmoid":
        return tl.sigmoid(x)
    return tl.where(x >= 0, x, x * 0.01)  # leaky_relu


@triton.jit
def unary_kernel(x_ptr, y_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr, I64: tl.constexpr, EVEN: tl.constexpr,
                 HINT: tl.constexpr, PAIRS: tl.constexpr):
    pid = tl.program_id(0)
    if I64:
        start = pid.to(tl.int64) * (BLOCK * PAIRS)
    else:
        start = pid * (BLOCK * PAIRS)
    for j in tl.static_range(PAIRS):
        offs = start + j * BLOCK + tl.arange(0, BLOCK)
        if EVEN:
            if HINT == "cg":
                x = tl.load(x_ptr + offs, cache_modifier=".cg")
            elif HINT == "evict":
                x = tl.load(x_ptr + offs, eviction_policy="evict_first")
            else:
                x = tl.load(x_ptr + offs)
            y = _op(x.to(tl.float32), OP).to(y_ptr.dtype.element_ty)
            if HINT == "cs":
                tl.store(y_ptr + offs, y, cache_modifier=".cs")
            elif HINT == "evict":
                tl.store(y_ptr + offs, y, eviction_policy="evict_first")
            else:
                tl.store(y_ptr + offs, y)
        else:
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(y_ptr + offs, _op(x.to(tl.float32), OP).to(y_ptr.dtype.element_ty), mask=mask)


FORMS = {  # label -> (BLOCK elements, warps, I64, EVEN, HINT, PAIRS)
    "i64/4096/w8": (4096, 8, True, False, "", 1),
    "i32/4096/w8": (4096, 8, False, False, "", 1),
    "i32/8192/w8": (8192, 8, False, False, "", 1),
    "i32/16384/w16": (16384, 16, False, False, "", 1),
    "i32/4096/w4": (4096, 4, False, False, "", 1),
    "i32/2048/w4": (2048, 4, False, False, "", 1),
    "i32/even/4096/w8": (4096, 8, False, True, "", 1),
    "i32/even/8192/w8": (8192, 8, False, True, "", 1),
    "i32/even/4096/w8/cs": (4096, 8, False, True, "cs", 1),
    "i32/even/4096/w8/cg": (4096, 8, False, True, "cg", 1),
    "i32/even/4096/w8/evict": (4096, 8, False, True, "evict", 1),
    "i32/even/2x4096/w8": (4096, 8, False, True, "", 2),
    "i64/even/8192/w8": (8192, 8, True, True, "", 1),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="4096,393216")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--ops", default="sigmoid,leaky_relu")
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    use_this_tree()
    from kernelgen.verify.timing import rep_times, summarize

    shape = [int(s) for s in args.shape.split(",")]
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    rows = []
    for dtype in args.dtypes.split(","):
        x = torch.randn(shape, device="cuda", dtype=getattr(torch, dtype))
        n = x.numel()
        nbytes = 2 * x.numel() * x.element_size()

        def t_us(fn) -> float:  # noqa: ANN001
            return 1e3 * summarize(rep_times(fn, "cuda", warmup_ms=5, rep_ms=args.rep_ms)).ms

        copy_us = t_us(lambda: x.clone())
        for op in args.ops.split(","):
            eager = (lambda: torch.sigmoid(x)) if op == "sigmoid" else (lambda: torch.nn.functional.leaky_relu(x, 0.01))
            want = eager()
            eager_us = t_us(eager)
            row = {"dtype": dtype, "op": op, "copy_us": copy_us, "eager_us": eager_us, "forms": {}}
            for label, (block, warps, i64, even, hint, pairs) in FORMS.items():
                if even and n % (block * pairs):
                    continue
                y = torch.empty_like(x)

                def call(block=block, warps=warps, i64=i64, even=even, hint=hint, pairs=pairs, y=y):  # noqa: ANN001, ANN202
                    unary_kernel[(triton.cdiv(n, block * pairs),)](x, y, n, OP=op, BLOCK=block, I64=i64, EVEN=even,
                                                                  HINT=hint, PAIRS=pairs, num_warps=warps)
                    return y
                call()
                if not torch.allclose(y.float(), want.float(), atol=1e-5, rtol=1e-5):
                    print(f"  {dtype} {op} {label}: WRONG", flush=True)
                    continue
                row["forms"][label] = t_us(call)
            rows.append(row)
            best = min(row["forms"], key=row["forms"].get)
            print(f"{dtype} {op}: copy {copy_us:.1f} us ({nbytes / copy_us / 1e3:.0f} GB/s), eager {eager_us:.1f}, "
                  + ", ".join(f"{k} {v:.1f}" for k, v in row["forms"].items()) + f" | best {best} x{eager_us / row['forms'][best]:.3f} eager",
                  flush=True)
            if args.out:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / "copy_bound.json").write_text(json.dumps(rows, indent=1))
        del x
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
