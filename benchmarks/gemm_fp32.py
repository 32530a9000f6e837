"""float32 GEMM on a GPU without TF32 (issue 29): Triton kernels that multiply with three TF32
products (tf32x3) against cuBLAS's IEEE float32 and TF32 GEMMs, per KernelBench shape, to pick the
matmul family's tiles and form.

    python benchmarks/gemm_fp32.py [--out DIR] [--shapes square,rect,...] [--rep-ms 30]

Variants (one kernel each, the tile/warps/stages set per config):
- grouped: Triton's matmul tutorial 03 (what the matmul family writes today): a program per output
  tile in grouped order, `% M` wrap of the operand rows, tl.dot(input_precision="tf32x3");
- hinted: the same, operand rows clamped with tl.where and tagged contiguous (tutorial 09's hints);
- persistent: tutorial 09's persistent loop (one program per SM walking the tiles, flatten=True);
- manual: the three TF32 products written out (hi/lo split by masking the low 13 mantissa bits);
- splitk: K shared by SPLIT programs per tile writing fp32 partials, a second kernel summing them
  in order (large K over a small output).
Each result is checked against float64 (relative Frobenius error, and allclose at 1e-4/1e-4 as the
float32 oracle asks); the table gives TFLOP/s and the ratio to cuBLAS float32.
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

SHAPES = {  # KernelBench level 1 (M, N, K, batch)
    "square": (4096, 4096, 4096, 1), "rect": (2048, 4096, 8192, 1), "irregular": (8205, 5921, 2949, 1),
    "smallk": (32768, 32768, 64, 1), "largek": (256, 256, 524288, 1), "bmm": (512, 2048, 1024, 128),
    "tensor3": (16384, 768, 2048, 1), "tensor4": (1048576, 768, 256, 1),
}


@triton.jit
def _tile_ids(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    return first_m + ((pid % in_group) % size_m), (pid % in_group) // size_m


@triton.jit
def _tf32_parts(x):
    hi = (x.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)  # 10 mantissa bits kept
    return hi, x - hi


@triton.jit
def _mac(acc, a, b, PREC: tl.constexpr):
    if PREC == "manual":
        a_hi, a_lo = _tf32_parts(a)
        b_hi, b_lo = _tf32_parts(b)
        acc = tl.dot(a_lo, b_hi, acc, input_precision="tf32")
        acc = tl.dot(a_hi, b_lo, acc, input_precision="tf32")
        acc = tl.dot(a_hi, b_hi, acc, input_precision="tf32")
    elif PREC == "manual2":  # the step's three products summed in the MMA from zero, then added in fp32
        a_hi, a_lo = _tf32_parts(a)
        b_hi, b_lo = _tf32_parts(b)
        part = tl.dot(a_lo, b_hi, input_precision="tf32")
        part = tl.dot(a_hi, b_lo, part, input_precision="tf32")
        acc += tl.dot(a_hi, b_hi, part, input_precision="tf32")
    else:
        acc = tl.dot(a, b, acc, input_precision=PREC)
    return acc


@triton.jit
def _tile(a_ptr, b_ptr, pid_m, pid_n, k_lo, k_hi, M, N, sam, sak, sbk, sbn, BLOCK_M: tl.constexpr,
          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PREC: tl.constexpr, HINTS: tl.constexpr):
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if HINTS:
        offs_m = tl.max_contiguous(tl.multiple_of(tl.where(offs_m < M, offs_m, 0), BLOCK_M), BLOCK_M)
        offs_n = tl.max_contiguous(tl.multiple_of(tl.where(offs_n < N, offs_n, 0), BLOCK_N), BLOCK_N)
    else:
        offs_m = offs_m % M
        offs_n = offs_n % N
    offs_k = k_lo + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_n[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_lo, k_hi, BLOCK_K):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_hi - (k - k_lo), other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_hi - (k - k_lo), other=0.0)
        acc = _mac(acc, a, b, PREC)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    return acc


@triton.jit
def grouped_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sab, sam, sak, sbb, sbk, sbn, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PREC: tl.constexpr,
                   HINTS: tl.constexpr):
    pid_m, pid_n = _tile_ids(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    bid = tl.program_id(1).to(tl.int64)
    acc = _tile(a_ptr + bid * sab, b_ptr + bid * sbb, pid_m, pid_n, 0, K, M, N, sam, sak, sbk, sbn,
                BLOCK_M, BLOCK_N, BLOCK_K, PREC, HINTS)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    tl.store(c_ptr + bid * M * N + offs_m[:, None].to(tl.int64) * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sab, sam, sak, sbb, sbk, sbn, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PREC: tl.constexpr,
                      HINTS: tl.constexpr, NUM_SMS: tl.constexpr):
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_ids(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = _tile(a_ptr, b_ptr, pid_m, pid_n, 0, K, M, N, sam, sak, sbk, sbn, BLOCK_M, BLOCK_N, BLOCK_K, PREC, HINTS)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
        tl.store(c_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def splitk_kernel(a_ptr, b_ptr, w_ptr, M, N, K, sab, sam, sak, sbb, sbk, sbn, k_chunk, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PREC: tl.constexpr,
                  HINTS: tl.constexpr):
    pid_m, pid_n = _tile_ids(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    s = tl.program_id(1)
    k_lo = s * k_chunk
    acc = _tile(a_ptr, b_ptr, pid_m, pid_n, k_lo, tl.minimum(k_lo + k_chunk, K), M, N, sam, sak, sbk, sbn,
                BLOCK_M, BLOCK_N, BLOCK_K, PREC, HINTS)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    tl.store(w_ptr + s.to(tl.int64) * M * N + offs_m[:, None] * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def sum_parts_kernel(w_ptr, c_ptr, MN, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(SPLIT):  # in split order: deterministic
        acc += tl.load(w_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc, mask=mask)


@triton.jit
def split_parts_kernel(x_ptr, hi_ptr, lo_ptr, R, C, sxr, sxc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """hi/lo TF32 parts of x [R, C] (any strides), written [R, C] contiguous."""
    offs_r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (offs_r < R)[:, None] & (offs_c < C)[None, :]
    x = tl.load(x_ptr + offs_r[:, None].to(tl.int64) * sxr + offs_c[None, :] * sxc, mask=mask, other=0.0)
    hi, lo = _tf32_parts(x)
    out = offs_r[:, None].to(tl.int64) * C + offs_c[None, :]
    tl.store(hi_ptr + out, hi, mask=mask)
    tl.store(lo_ptr + out, lo, mask=mask)


@triton.jit
def presplit_kernel(ahi_ptr, alo_ptr, bhi_ptr, blo_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """c = a @ b from TF32 parts: a [M, K] and b^T [N, K], both K-major (wgmma reads 32-bit operands
    only K-major), three TF32 products straight from the loaded tiles."""
    pid_m, pid_n = _tile_ids(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows_m = tl.max_contiguous(tl.multiple_of(tl.where(offs_m < M, offs_m, 0), BLOCK_M), BLOCK_M).to(tl.int64)
    rows_n = tl.max_contiguous(tl.multiple_of(tl.where(offs_n < N, offs_n, 0), BLOCK_N), BLOCK_N).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    a_off = rows_m[:, None] * K + offs_k[None, :]
    b_off = rows_n[None, :] * K + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        km = offs_k < K - k
        a_lo = tl.load(alo_ptr + a_off + k, mask=km[None, :], other=0.0)
        b_lo = tl.load(blo_ptr + b_off + k, mask=km[:, None], other=0.0)
        a_hi = tl.load(ahi_ptr + a_off + k, mask=km[None, :], other=0.0)
        b_hi = tl.load(bhi_ptr + b_off + k, mask=km[:, None], other=0.0)
        acc = tl.dot(a_lo, b_hi, acc, input_precision="tf32")
        acc = tl.dot(a_hi, b_lo, acc, input_precision="tf32")
        acc = tl.dot(a_hi, b_hi, acc, input_precision="tf32")
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    tl.store(c_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :], acc, mask=mask)


def presplit_parts(a: torch.Tensor, b: torch.Tensor):
    """The TF32 parts of a [M, K] and of b [K, N] transposed to [N, K]."""
    M, K = a.shape
    N = b.shape[1]
    parts = []
    for x, R, C, sr, sc in ((a, M, K, a.stride(0), a.stride(1)), (b, N, K, b.stride(1), b.stride(0))):
        hi = torch.empty((R, C), device=a.device, dtype=torch.float32)
        lo = torch.empty_like(hi)
        split_parts_kernel[(triton.cdiv(R, 32), triton.cdiv(C, 128))](x, hi, lo, R, C, sr, sc, BLOCK_R=32, BLOCK_C=128,
                                                                       num_warps=4)
        parts += [hi, lo]
    return parts


def run_presplit(cfg: tuple, parts: list, M: int, N: int, K: int):
    bm, bn, bk, warps, stages = cfg
    c = torch.empty((M, N), device=parts[0].device, dtype=torch.float32)
    presplit_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn),)](*parts, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                                                 GROUP_M=8, num_warps=warps, num_stages=stages)
    return c


def run(kind: str, cfg: tuple, a: torch.Tensor, b: torch.Tensor, sms: int, prec: str = "tf32x3", hints: bool = False):
    bm, bn, bk, warps, stages = cfg[:5]
    batched = a.dim() == 3
    B = a.shape[0] if batched else 1
    M, K = a.shape[-2:]
    N = b.shape[-1]
    sa = (a.stride(0) if batched else 0, a.stride(-2), a.stride(-1))
    sb = (b.stride(0) if batched else 0, b.stride(-2), b.stride(-1))
    c = torch.empty((B, M, N) if batched else (M, N), device=a.device, dtype=torch.float32)
    common = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, PREC=prec, HINTS=hints, num_warps=warps, num_stages=stages)
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    if kind == "persistent":
        persistent_kernel[(min(sms, tiles),)](a, b, c, M, N, K, *sa, *sb, NUM_SMS=sms, **common)
    elif kind == "splitk":
        split = cfg[5]
        chunk = triton.cdiv(triton.cdiv(K, split), bk) * bk
        w = torch.empty((split, M, N), device=a.device, dtype=torch.float32)
        splitk_kernel[(tiles, split)](a, b, w, M, N, K, *sa, *sb, chunk, **common)
        sum_parts_kernel[(triton.cdiv(M * N, 1024),)](w, c, M * N, SPLIT=split, BLOCK=1024, num_warps=4)
    else:
        grouped_kernel[(tiles, B)](a, b, c, M, N, K, *sa, *sb, **common)
    return c


GROUPED = [(128, 128, 32, 8, 3), (128, 128, 32, 4, 3), (128, 256, 32, 8, 3), (256, 128, 32, 8, 3),
           (128, 128, 64, 8, 3), (128, 128, 64, 8, 2), (64, 128, 32, 4, 4), (128, 64, 32, 4, 4),
           (128, 256, 64, 8, 2), (64, 256, 32, 8, 3)]
VARIANTS = ([("grouped", c, "tf32x3", False) for c in GROUPED]
            + [("grouped", c, "tf32x3", True) for c in GROUPED[:3]]
            + [("persistent", c, "tf32x3", True) for c in (GROUPED[0], GROUPED[2], GROUPED[4])]
            + [("grouped", c, "manual", False) for c in (GROUPED[0], GROUPED[2])]
            + [("grouped", (128, 256, 32, 8, 3), "tf32", False), ("grouped", (128, 128, 32, 8, 4), "tf32", False)])
SPLITK = [("splitk", (64, 64, 64, 4, 3, s), "tf32x3", True) for s in (16, 32, 64)] + \
         [("splitk", (128, 128, 32, 8, 3, s), "tf32x3", True) for s in (32, 64)]
# --set kmajor: b read K-major (b^T contiguous, as wgmma needs 32-bit operands), and the operands
# split into TF32 parts by a first pass (presplit); (kind, tiles, precision, hints, b K-major)
# --set final: the forms the generator now writes, beside the three-products-by-hand one (manual2)
FINAL = ([("grouped", c, "tf32x3", True, True) for c in ((128, 128, 64, 8, 3), (128, 64, 32, 4, 4))]
         + [("grouped", c, "manual2", True, True) for c in ((128, 256, 32, 8, 3), (128, 128, 64, 8, 3), (128, 128, 32, 8, 3),
                                                            (128, 64, 32, 4, 4))]
         + [("grouped", c, "tf32", True, True) for c in ((128, 256, 32, 8, 3), (128, 256, 64, 8, 2), (256, 128, 32, 8, 3))])
KMAJOR = ([("grouped", (128, 64, 32, 4, 4), "tf32x3", False, False)]
          + [("grouped", c, "tf32", True, True) for c in ((128, 256, 32, 8, 3), (128, 128, 32, 8, 4))]
          + [("grouped", c, "tf32x3", True, True) for c in ((128, 128, 32, 8, 3), (128, 64, 32, 4, 4), (128, 256, 32, 8, 3),
                                                              (128, 128, 64, 8, 3), (256, 128, 32, 8, 3), (128, 128, 32, 4, 4))]
          + [("grouped", c, "manual", True, True) for c in ((128, 128, 32, 8, 3), (128, 256, 32, 8, 3))]
          + [("presplit", c, "tf32", True, True) for c in ((128, 128, 32, 8, 3), (128, 256, 32, 8, 3), (128, 128, 32, 4, 4),
                                                           (128, 64, 32, 4, 4), (256, 128, 32, 8, 3), (128, 128, 16, 8, 4))])


def _variants(which: str, name: str, a: torch.Tensor, b: torch.Tensor, row: dict, t_ms) -> tuple[list, torch.Tensor, list]:  # noqa: ANN001
    """The (kind, tiles, precision, hints, b K-major) settings of --set `which` for one shape, b as those
    settings read it, and the TF32 parts of a presplit (timed into `row`)."""
    batched = a.dim() == 3
    if which == "tiles":
        return [v + (False,) for v in (SPLITK if name == "largek" else VARIANTS)], b, None
    if batched:
        return [], b, None
    row["prepass_ms"] = t_ms(lambda: presplit_parts(a, b))
    row["transpose_ms"] = t_ms(lambda: b.t().contiguous())
    print(f"  prepass (split a and b^T into TF32 parts) {row['prepass_ms']:.3f} ms, b^T copy "
          f"{row['transpose_ms']:.3f} ms", flush=True)
    return (KMAJOR if which == "kmajor" else FINAL), b.t().contiguous().t(), presplit_parts(a, b)


def _shape_row(name: str, which: str, sms: int, t_ms) -> dict:  # noqa: ANN001
    """cuBLAS float32 and TF32, then every variant of --set `which`, on one KernelBench shape."""
    M, N, K, B = SHAPES[name]
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand((B, M, K) if B > 1 else (M, K), device="cuda", generator=g)
    b = torch.rand((B, K, N) if B > 1 else (K, N), device="cuda", generator=g)
    ref = torch.matmul(a.double(), b.double())
    flop = 2.0 * M * N * K * B
    base = {}
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        base[tf32] = t_ms(lambda: torch.matmul(a, b))
    torch.backends.cuda.matmul.allow_tf32 = False
    row = {"shape": name, "mnkb": [M, N, K, B], "cublas_fp32_ms": base[False], "cublas_tf32_ms": base[True], "variants": []}
    print(f"{name} {M}x{N}x{K}x{B}: cuBLAS fp32 {base[False]:.3f} ms ({flop / base[False] / 1e9:.1f} TFLOP/s), "
          f"tf32 {base[True]:.3f} ms", flush=True)
    variants, bt, parts = _variants(which, name, a, b, row, t_ms)
    for kind, cfg, prec, hints, kmajor in variants:
        if kind == "persistent" and B > 1:
            continue
        label = f"{kind}/{prec}{'/hints' if hints else ''}{'/kmajor' if kmajor else ''}/{'x'.join(map(str, cfg))}"

        def call(kind=kind, cfg=cfg, prec=prec, hints=hints, kmajor=kmajor):  # noqa: ANN001, ANN202
            if kind == "presplit":
                return run_presplit(cfg, parts, M, N, K)
            return run(kind, cfg, a, bt if kmajor else b, sms, prec, hints)
        try:
            out = call()
            err = ((out.double() - ref).norm() / ref.norm()).item()
            ok = bool(torch.allclose(out.double(), ref, atol=1e-4, rtol=1e-4))
            ms = t_ms(call)
        except Exception as e:  # a config the compiler or the shared memory refuses
            print(f"  {label}: {type(e).__name__}: {str(e)[:120]}", flush=True)
            continue
        row["variants"].append({"label": label, "ms": ms + (row["prepass_ms"] if kind == "presplit" else 0.0),
                                "kernel_ms": ms, "rel_err": err, "allclose": ok,
                                "fp32_grade": prec != "tf32" or kind == "presplit"})
        print(f"  {label}: {ms:.3f} ms {flop / ms / 1e9:.1f} TFLOP/s x{base[False] / ms:.2f} cuBLAS-fp32, "
              f"err {err:.1e} {'ok' if ok else 'NOT allclose'}", flush=True)
    return row


def _table(rows: list[dict]) -> None:
    print("\n| shape | cuBLAS fp32 ms | TF32 ms | best tf32x3-grade variant | ms | x cuBLAS fp32 |\n|---|---:|---:|---|---:|---:|")
    for r in rows:
        good = [v for v in r["variants"] if v["allclose"] and v["fp32_grade"]]
        best = min(good, key=lambda v: v["ms"]) if good else None
        print(f"| {r['shape']} | {r['cublas_fp32_ms']:.3f} | {r['cublas_tf32_ms']:.3f} | {best['label'] if best else '-'} | "
              f"{best['ms'] if best else float('nan'):.3f} | {r['cublas_fp32_ms'] / best['ms'] if best else 0:.2f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--rep-ms", type=float, default=30.0)
    ap.add_argument("--set", choices=["tiles", "kmajor", "final"], default="tiles")
    args = ap.parse_args()
    use_this_tree()
    from kernelgen.verify.timing import rep_times, summarize

    def t_ms(fn) -> float:  # noqa: ANN001
        return summarize(rep_times(fn, "cuda", warmup_ms=5, rep_ms=args.rep_ms)).ms

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    rows = []
    for name in args.shapes.split(","):
        rows.append(_shape_row(name, args.set, sms, t_ms))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"gemm_fp32_{args.set}.json").write_text(json.dumps(rows, indent=1))
        torch.cuda.empty_cache()
    _table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
