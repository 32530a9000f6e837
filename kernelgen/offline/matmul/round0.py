"""Round 0 of the matmul family from the analysis: per perf case x dtype, whether float32 operands
are copied K-major first (`pack`) and the tiles the file's table gives then.

Hopper's wgmma reads 32-bit operands only K-major (a [M, K] with K contiguous, b as [N, K]): with b
[K, N] row-major, TF32 products ran at 87 TFLOP/s where b^T contiguous reached 350, and three TF32
products (tf32x3, float32-grade) 94 TFLOP/s, 1.85x cuBLAS's IEEE float32 (H200, Triton 3.6,
2026-11-25, 4096^3: benchmarks/gemm_fp32.py). A row of K not a multiple of 4 (16 bytes) also loses
the vector loads: 8205x2949 @ 2949x5921 ran at 0.45x cuBLAS until its operands were copied aligned.
The copy (a transposed copy of b, ~0.1 ms for 4096^2 in float32) is written into round 0's dispatch
table as `pack=True`, so a round can take it back per shape; 16-bit operands need none.
"""

from __future__ import annotations

from kernelgen.offline.dispatch import FirstChoice
from kernelgen.offline.launch import fp32_tiles
from kernelgen.offline.matmul.emit import matmul_indices
from kernelgen.spec import OperatorSpec


def first_choices(spec: OperatorSpec, view, sms: int) -> list[FirstChoice]:  # noqa: ANN001 - a FrameView
    a_idx, b_idx = matmul_indices(view)
    a_t, b_t = view.inputs[a_idx].transposed, view.inputs[b_idx].transposed
    a_name, b_name = spec.input_names[a_idx], spec.input_names[b_idx]
    out = []
    for shapes in spec.effective_perf_cases:
        a, b = shapes[a_name], shapes[b_name]
        m, k = (a[1], a[0]) if a_t else (a[0], a[1])
        n = b[0] if b_t else b[1]
        # contiguous inputs: a is K-major unless the reference reads it transposed, b only then
        bad = [f"{name} ({why})" for name, why in ((a_name, "read transposed" if a_t else None), (b_name, None if b_t else "read along N"))
               if why] or ([f"{a_name} and {b_name} (rows of K={k}, not 16 bytes)"] if k % 4 else [])
        for dtype in spec.dtypes:
            if dtype != "float32":
                out.append(FirstChoice(dtype, dict(shapes), {}, "16-bit operands: the tensor cores read them in any "
                                                                 "order; the file's tiles"))
                continue
            tiles = "x".join(map(str, fp32_tiles(m, n, k, True, False)))
            if bad:
                out.append(FirstChoice(dtype, dict(shapes), {"pack": True},
                                       f"{m}x{n}x{k} float32: {', '.join(bad)} copied to [rows, K] with K contiguous and "
                                       f"16-byte rows first (wgmma reads 32-bit operands only K-major), then tf32x3 at "
                                       f"{tiles} (BLOCK_M x N x K, warps, stages)"))
            else:
                out.append(FirstChoice(dtype, dict(shapes), {}, f"{m}x{n}x{k} float32: operands already K-major; "
                                                                 f"tf32x3 at {tiles}"))
    return out
