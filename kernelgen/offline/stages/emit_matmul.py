"""Kernel text of a matmul stage: C[batch, M, N] = A[batch, M, K] @ B[batch, K, N] in fp32
accumulation, tiles grouped for L2 reuse of B (Triton's matmul tutorial), batch dims on the grid's
second axis (a broadcast operand has stride 0 there), then the stage's epilogue on the accumulator
tile and one rounding store per output. fp32 operands multiply in the precision the plan picks:
"tf32x3" (three TF32 products, error near fp32's; far faster than "ieee" on tensor cores) unless
TF32 is allowed, like PyTorch's torch.backends.cuda.matmul.allow_tf32."""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.offline.stages.access import MOVES, Port, ports
from kernelgen.offline.stages.emit_epilogue import tile_epilogue
from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.stages.program import Buffer, Stage


@dataclass
class MatmulKernel:
    name: str
    kind: str
    params: list[tuple[str, str]]
    body: list[str]
    ports: list[Port]
    batch: int  # number of batch dims of the frame
    moves: tuple[bool, bool]  # a, b: their views may move the start (an offset argument)
    sizes: list[int]
    params_used: list[str]


def matmul_kernel(g: Graph, st: Stage, buffers: dict[str, Buffer], name: str) -> MatmulKernel:
    ps = ports(g, st, buffers)
    nb = len(st.frame) - 2
    moves = tuple(any(s[0] in MOVES for s in acc.views) for acc in st.operands)
    body = _k_loop(nb, moves) + _epilogue(g, st, ps, buffers)
    used = sorted({g[u].attrs["name"] for u in st.values if g[u].op == "param"})
    sizes = [u for u in st.values if g[u].op == "size"]
    return MatmulKernel(name, "matmul", _params(g, st, ps, nb, moves, used, sizes), body, ps, nb, moves, sizes, used)


def _k_loop(nb: int, moves: tuple[bool, ...]) -> list[str]:
    """The grouped program order, the batch position, the K loop into the fp32 accumulator."""
    mdim, ndim = nb, nb + 1
    L: list[str] = []
    L += ["pid = tl.program_id(0)",
          f"num_pid_m = tl.cdiv(n{mdim}, BLOCK_M)",
          f"num_pid_n = tl.cdiv(n{ndim}, BLOCK_N)",
          "num_pid_in_group = GROUP_SIZE_M * num_pid_n",
          "group_id = pid // num_pid_in_group",
          "first_pid_m = group_id * GROUP_SIZE_M",
          "group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)",
          "pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)",
          "pid_n = (pid % num_pid_in_group) // group_size_m"]
    if nb:
        L.append("rest = tl.program_id(1)")
        for d in reversed(range(nb)):
            L.append(f"b{d} = (rest % n{d}).to(tl.int64)")
            L.append(f"rest = rest // n{d}")

    def batch_terms(prefix: str, dims: list[int]) -> list[str]:
        return [f"b{d} * {prefix}{d}" for d in dims]

    L += ["offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
          "offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
          "if I64:",
          "    offs_m = offs_m.to(tl.int64)",
          "    offs_n = offs_n.to(tl.int64)",
          "# wrap rather than mask along M and N: the extra rows/columns are computed, never stored",
          f"offs_am = offs_m % n{mdim}",
          f"offs_bn = offs_n % n{ndim}",
          "offs_k = tl.arange(0, BLOCK_K)"]
    a_base = " + ".join(["lhs_ptr"] + (["lhs_off"] if moves[0] else []) + batch_terms("lhs_sb", list(range(nb))))
    b_base = " + ".join(["rhs_ptr"] + (["rhs_off"] if moves[1] else []) + batch_terms("rhs_sb", list(range(nb))))
    L += [f"a_ptrs = {a_base} + offs_am[:, None] * lhs_sm + offs_k[None, :] * lhs_sk",
          f"b_ptrs = {b_base} + offs_k[:, None] * rhs_sk + offs_bn[None, :] * rhs_sn",
          "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
          "for k in range(0, tl.cdiv(K, BLOCK_K)):",
          "    k_mask = offs_k < K - k * BLOCK_K",
          "    a = tl.load(a_ptrs, mask=k_mask[None, :], other=0.0)",
          "    b = tl.load(b_ptrs, mask=k_mask[:, None], other=0.0)",
          "    if UPCAST:  # operands of two dtypes (an fp32 buffer between stages), or bf16 under the CPU interpreter",
          "        a = a.to(tl.float32)",
          "        b = b.to(tl.float32)",
          "    acc = tl.dot(a, b, acc=acc, input_precision=PRECISION)",
          "    a_ptrs += BLOCK_K * lhs_sk",
          "    b_ptrs += BLOCK_K * rhs_sk",
          "# epilogue on the fp32 accumulator, then one rounding store per output",
          f"mask = (offs_m < n{mdim})[:, None] & (offs_n < n{ndim})[None, :]"]
    return L


def _address(st: Stage, p: Port) -> str:
    """An epilogue access's [BLOCK_M, BLOCK_N] of addresses (broadcast where it runs along M or N only)."""
    mdim, ndim = len(st.frame) - 2, len(st.frame) - 1
    parts = [f"{p.name}_ptr"] + ([f"{p.name}_off"] if p.offset else [])
    for gi in p.groups:
        grp = st.groups[gi]
        d = grp[-1]
        if d == mdim:
            parts.append(f"offs_m[:, None] * {p.stride(gi)}")
        elif d == ndim:
            parts.append(f"offs_n[None, :] * {p.stride(gi)}")
        else:
            parts.append(f"b{d} * {p.stride(gi)}")
    addr = " + ".join(parts)
    if not any(st.groups[gi][-1] == mdim for gi in p.groups) or not any(st.groups[gi][-1] == ndim for gi in p.groups):
        addr = f"tl.broadcast_to({addr}, [BLOCK_M, BLOCK_N])"  # a broadcast along M or N (a [M, 1] output)
    return addr


def _epilogue(g: Graph, st: Stage, ps: list[Port], buffers: dict[str, Buffer]) -> list[str]:
    """The stage's values on the accumulator tile, then one rounding store per output."""
    mdim, ndim = len(st.frame) - 2, len(st.frame) - 1
    return tile_epilogue(g, st, ps, buffers, lambda p: _address(st, p),
                         lambda f: "offs_m[:, None]" if f == mdim else "offs_n[None, :]" if f == ndim else f"b{f}")


def _params(g: Graph, st: Stage, ps: list[Port], nb: int, moves: tuple[bool, ...], used: list[str],
            sizes: list[int]) -> list[tuple[str, str]]:
    """The kernel's arguments, each with its comment."""
    mdim = nb
    params: list[tuple[str, str]] = [("lhs_ptr", "the left operand [batch.., M, K]"), ("rhs_ptr", "the right operand [batch.., K, N]")]
    for p in ps:
        params.append((f"{p.name}_ptr", f"{p.buffer}, {'written' if p.store else 'read'} by the epilogue"))
    params += [(n, f"scalar param {n}") for n in used]
    params += [(f"c{u}", f"the size {g[u].attrs['expr']}, as a number") for u in sizes]
    for d in range(len(st.frame)):
        params.append((f"n{d}", "batch dim" if d < nb else ("M: rows of the output" if d == mdim else "N: columns of the output")))
    params.append(("K", "the reduction dimension"))
    if moves[0]:
        params.append(("lhs_off", "lhs: element offset of its view"))
    if moves[1]:
        params.append(("rhs_off", "rhs: element offset of its view"))
    params += [(f"lhs_sb{d}", "lhs: batch strides (0 where it broadcasts)" if d == 0 else "") for d in range(nb)]
    params += [("lhs_sm", "lhs: element strides along M and K"), ("lhs_sk", "")]
    params += [(f"rhs_sb{d}", "rhs: batch strides (0 where it broadcasts)" if d == 0 else "") for d in range(nb)]
    params += [("rhs_sk", "rhs: element strides along K and N"), ("rhs_sn", "")]
    for p in ps:
        if p.offset:
            params.append((f"{p.name}_off", f"{p.name}: element offset of its view"))
        for gi in p.groups:
            params.append((p.stride(gi), f"{p.name}: element strides over the frame" if gi == p.groups[0] else ""))
    params += [("BLOCK_M: tl.constexpr", "output tile rows"), ("BLOCK_N: tl.constexpr", "output tile columns"),
               ("BLOCK_K: tl.constexpr", "reduction step"), ("GROUP_SIZE_M: tl.constexpr", "row-blocks per group (L2 reuse of b)"),
               ("PRECISION: tl.constexpr", 'fp32 products: "tf32x3", "tf32" or "ieee"'),
               ("UPCAST: tl.constexpr", "multiply in fp32: operands of two dtypes, or bf16 under the CPU interpreter"),
               ("ROUND: tl.constexpr", "results kept for a later stage rounded to float16 (1), bfloat16 (2), or not (0)"),
               ("I64: tl.constexpr", "64-bit offsets (a buffer of 2**31 elements or more)")]
    return params
